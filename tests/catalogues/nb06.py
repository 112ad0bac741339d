"""Notebook 06's mistake catalogue (the checks are tuned on it): correct implementations in
several styles (``GOOD``) and realistic wrong ones with the words their check's message must
contain (``CATALOGUE``), as ``CORRECT`` and ``MISTAKES`` in the holdout's format.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from tests.holdout._harness import from_table
from transformer_lab import checks


# ---------------------------------------------------------------------------------------------
# Exercise 1: pair_inputs
def good_pairs_lists(pairs, cls_id, sep_id, pad_id):
    seqs = [[cls_id, *a, sep_id, *b, sep_id] for a, b in pairs]
    segs = [[0] * (len(a) + 2) + [1] * (len(b) + 1) for a, b in pairs]
    L = max(map(len, seqs))
    ids = torch.tensor([s + [pad_id] * (L - len(s)) for s in seqs])
    seg = torch.tensor([s + [0] * (L - len(s)) for s in segs])
    mask = torch.tensor([[1] * len(s) + [0] * (L - len(s)) for s in seqs])
    return ids, seg, mask


def good_pairs_tensors(pairs, cls_id, sep_id, pad_id):
    rows = [torch.tensor([cls_id, *a, sep_id, *b, sep_id]) for a, b in pairs]
    ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_id)
    lengths = torch.tensor([len(r) for r in rows])
    pos = torch.arange(ids.shape[1])
    mask = (pos[None] < lengths[:, None]).long()
    first = torch.tensor([len(a) + 2 for a, _ in pairs])
    seg = ((pos[None] >= first[:, None]) & mask.bool()).long()
    return ids, seg, mask


def _pair_variant(bug):
    def impl(pairs, cls_id, sep_id, pad_id):
        from transformer_lab.checks.nb06_bert.pair_inputs import _assemble

        return _assemble(pairs, cls_id, sep_id, pad_id, bug)

    impl.__name__ = "bug_pairs_" + bug.replace(" ", "_")
    return impl


def bug_pairs_mask_bool(pairs, cls_id, sep_id, pad_id):
    ids, seg, mask = good_pairs_lists(pairs, cls_id, sep_id, pad_id)
    return ids, seg, mask.bool()


def bug_pairs_lists_returned(pairs, cls_id, sep_id, pad_id):
    ids, seg, mask = good_pairs_lists(pairs, cls_id, sep_id, pad_id)
    return ids.tolist(), seg.tolist(), mask.tolist()


def bug_pairs_two_outputs(pairs, cls_id, sep_id, pad_id):
    ids, seg, _ = good_pairs_lists(pairs, cls_id, sep_id, pad_id)
    return ids, seg


def bug_pairs_hardcoded_ids(pairs, cls_id, sep_id, pad_id):
    return good_pairs_lists(pairs, 101, 102, 0)  # BERT's ids, whatever the arguments say


# ---------------------------------------------------------------------------------------------
# Exercise 2: bert_embeddings
def _padding_mask(attention_mask):
    from transformer_lab import masks

    return masks.padding_mask_from_attention_mask(attention_mask)


def good_embeddings(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids]
    return norm(x), _padding_mask(attention_mask)


def good_embeddings_functional(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
    positions = torch.arange(input_ids.shape[1]).expand_as(input_ids)
    x = F.embedding(input_ids, tok) + F.embedding(positions, pos) + F.embedding(token_type_ids, seg)
    return norm(x), attention_mask[:, None, None, :] == 1


def _emb_bug(transform=None, mask=None):
    def impl(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
        T = input_ids.shape[1]
        x = transform(input_ids, token_type_ids, tok, pos, seg, norm, T) if transform else None
        if x is None:
            x = norm(tok[input_ids] + pos[:T] + seg[token_type_ids])
        m = mask(attention_mask) if mask else _padding_mask(attention_mask)
        return x, m

    return impl


bug_emb_no_positions = _emb_bug(lambda i, s, tok, pos, seg, norm, T: norm(tok[i] + seg[s]))
bug_emb_no_segments = _emb_bug(lambda i, s, tok, pos, seg, norm, T: norm(tok[i] + pos[:T]))
bug_emb_no_norm = _emb_bug(lambda i, s, tok, pos, seg, norm, T: tok[i] + pos[:T] + seg[s])
bug_emb_norm_first = _emb_bug(lambda i, s, tok, pos, seg, norm, T: norm(tok[i]) + pos[:T] + seg[s])
bug_emb_pos_by_ids = _emb_bug(lambda i, s, tok, pos, seg, norm, T: norm(tok[i] + pos[i] + seg[s]))
bug_emb_pos_from_one = _emb_bug(
    lambda i, s, tok, pos, seg, norm, T: norm(tok[i] + pos[1 : T + 1] + seg[s])
)
bug_emb_scaled = _emb_bug(
    lambda i, s, tok, pos, seg, norm, T: norm(tok[i] * math.sqrt(tok.shape[1]) + pos[:T] + seg[s])
)
bug_emb_concat = _emb_bug(
    lambda i, s, tok, pos, seg, norm, T: torch.cat(
        [tok[i], pos[:T].expand(i.shape[0], -1, -1), seg[s]], -1
    )
)
bug_emb_raw_mask = _emb_bug(mask=lambda m: m)
bug_emb_mask_reversed = _emb_bug(mask=lambda m: (m == 0)[:, None, None, :])
bug_emb_mask_3d = _emb_bug(mask=lambda m: m.bool()[:, None, :])
for _name, _fn in list(globals().items()):
    if _name.startswith("bug_emb_"):
        _fn.__name__ = _name


# ---------------------------------------------------------------------------------------------
# Exercise 3: mlm_corrupt
def good_corrupt_bernoulli(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = torch.zeros(vocab_size, dtype=torch.bool)
    special[list(special_ids)] = True
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special[input_ids]
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    # Hugging Face style: 80% [MASK], then half of the rest random
    replaced = (torch.rand(input_ids.shape, generator=generator) < 0.8) & chosen
    rnd = (torch.rand(input_ids.shape, generator=generator) < 0.5) & chosen & ~replaced
    allowed = (~special).nonzero().squeeze(1)
    draws = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids.clone()
    inputs[replaced] = mask_id
    inputs[rnd] = draws[rnd]
    return inputs, labels


def good_corrupt_exact_count(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    """Devlin et al.'s original style: exactly round(p * n) tokens per sequence."""
    inputs, labels = input_ids.clone(), torch.full_like(input_ids, -100)
    allowed = [i for i in range(vocab_size) if i not in set(special_ids)]
    for b in range(input_ids.shape[0]):
        candidates = [
            t for t in range(input_ids.shape[1]) if int(input_ids[b, t]) not in special_ids
        ]
        k = round(p * len(candidates))
        order = torch.randperm(len(candidates), generator=generator)[:k]
        for j in order.tolist():
            t = candidates[j]
            labels[b, t] = input_ids[b, t]
            u = torch.rand((), generator=generator).item()
            if u < 0.8:
                inputs[b, t] = mask_id
            elif u < 0.9:
                inputs[b, t] = allowed[int(torch.randint(len(allowed), (), generator=generator))]
    return inputs, labels


def _corrupt(
    choose="ok",
    labels_mode="ok",
    split="ok",
    rng="ok",
    random_pool="ok",
):
    """A corruption with one realistic mistake switched on."""

    def impl(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
        gen = None if rng == "global" else generator
        if rng == "own":
            gen = torch.Generator().manual_seed(0)
        is_special = torch.isin(input_ids, torch.tensor(list(special_ids)))
        shape = input_ids.shape
        rate = 0.15 if choose == "ignore p" else p
        if choose == "shared":
            u = torch.rand(shape[1], generator=gen).expand(shape)
        else:
            u = torch.rand(shape, generator=gen)
        if choose == "inverted":
            chosen = (u > rate) & ~is_special
        elif choose == "specials":
            chosen = u < rate
        elif choose == "count from T":
            chosen = torch.zeros(shape, dtype=torch.bool)
            for b in range(shape[0]):
                cand = (~is_special[b]).nonzero().squeeze(1)
                k = min(len(cand), round(rate * shape[1]))
                chosen[b, cand[torch.randperm(len(cand), generator=gen)[:k]]] = True
        else:
            chosen = (u < rate) & ~is_special
        r = torch.rand(shape, generator=gen)
        if random_pool == "all":
            draws = torch.randint(vocab_size, shape, generator=gen)
        elif random_pool == "one":
            draws = torch.full(shape, int(torch.randint(4, vocab_size - 4, (), generator=gen)))
            draws = torch.where(
                torch.isin(draws, torch.tensor(list(special_ids))), draws + 1, draws
            )
        else:
            pool = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
            draws = pool[torch.randint(len(pool), shape, generator=gen)]
        inputs = input_ids.clone()
        if split == "whole sequence":
            inputs[(r < 0.8) & ~is_special] = mask_id
            inputs[(r >= 0.8) & (r < 0.9) & ~is_special] = draws[
                (r >= 0.8) & (r < 0.9) & ~is_special
            ]
        elif split == "all mask":
            inputs[chosen] = mask_id
        elif split == "hf 0.1":
            m = chosen & (r < 0.8)
            rnd = chosen & ~m & (torch.rand(shape, generator=gen) < 0.1)
            inputs[m] = mask_id
            inputs[rnd] = draws[rnd]
        elif split == "independent":
            m = chosen & (r < 0.8)
            rnd = chosen & (torch.rand(shape, generator=gen) < 0.1)
            inputs[m] = mask_id
            inputs[rnd] = draws[rnd]
        elif split == "swapped":
            m = chosen & (r < 0.1)
            rnd = chosen & (r >= 0.1) & (r < 0.9)
            inputs[m] = mask_id
            inputs[rnd] = draws[rnd]
        else:
            m = chosen & (r < 0.8)
            rnd = chosen & (r >= 0.8) & (r < 0.9)
            inputs[m] = mask_id
            inputs[rnd] = draws[rnd]
        if labels_mode == "everywhere":
            labels = input_ids.clone()
        elif labels_mode == "corrupted":
            labels = torch.where(chosen, inputs, torch.full_like(inputs, -100))
        elif labels_mode == "mask only":
            labels = torch.where(inputs == mask_id, input_ids, torch.full_like(inputs, -100))
        elif labels_mode == "zero":
            labels = torch.where(chosen, input_ids, torch.zeros_like(input_ids))
        else:
            labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
        if labels_mode == "swapped return":
            return labels, inputs
        return inputs, labels

    return impl


def bug_corrupt_in_place(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    labels = torch.full_like(input_ids, -100)
    special = torch.isin(input_ids, torch.tensor(list(special_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    labels[chosen] = input_ids[chosen]
    input_ids[chosen & (torch.rand(input_ids.shape, generator=generator) < 0.8)] = mask_id
    return input_ids, labels


def bug_corrupt_assumes_specials_first(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    """Random tokens from 4..V-1, as if the specials were always the ids 0..3."""
    special = torch.isin(input_ids, torch.tensor(list(special_ids)))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    u = torch.rand(input_ids.shape, generator=generator)
    draws = torch.randint(4, vocab_size, input_ids.shape, generator=generator)
    inputs = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    inputs = torch.where(chosen & (u >= 0.8) & (u < 0.9), draws, inputs)
    return inputs, torch.where(chosen, input_ids, -100)


good_corrupt_one_uniform = _corrupt()
good_corrupt_one_uniform.__name__ = "good_corrupt_one_uniform"

CORRUPT_BUGS = {
    "bug_corrupt_specials": (_corrupt(choose="specials"), "special tokens were chosen"),
    "bug_corrupt_count_from_T": (_corrupt(choose="count from T"), "ALL positions"),
    "bug_corrupt_labels_everywhere": (_corrupt(labels_mode="everywhere"), "labels everywhere"),
    "bug_corrupt_whole_sequence": (_corrupt(split="whole sequence"), "not to the whole sequence"),
    "bug_corrupt_random_specials": (_corrupt(random_pool="all"), "random replacement is a special"),
    "bug_corrupt_all_mask": (_corrupt(split="all mask"), "every chosen token became [MASK]"),
    "bug_corrupt_hf_point_one": (_corrupt(split="hf 0.1"), "REMAINING 20%"),
    "bug_corrupt_independent": (_corrupt(split="independent"), "ONE uniform number"),
    "bug_corrupt_swapped_split": (_corrupt(split="swapped"), "expected 80% / 10% / 10%"),
    "bug_corrupt_global_rng": (_corrupt(rng="global"), "global random state"),
    "bug_corrupt_own_generator": (_corrupt(rng="own"), "ignores the `generator` argument"),
    "bug_corrupt_labels_corrupted": (_corrupt(labels_mode="corrupted"), "ORIGINAL ids"),
    "bug_corrupt_labels_mask_only": (
        _corrupt(labels_mode="mask only"),
        "labels only at the [MASK]",
    ),
    "bug_corrupt_labels_zero": (_corrupt(labels_mode="zero"), "must be -100"),
    "bug_corrupt_swapped_return": (_corrupt(labels_mode="swapped return"), "in this order"),
    "bug_corrupt_shared_positions": (_corrupt(choose="shared"), "same chosen positions"),
    "bug_corrupt_one_random_token": (_corrupt(random_pool="one"), "same token"),
    "bug_corrupt_ignores_p": (_corrupt(choose="ignore p"), "hard-coded 0.15"),
    "bug_corrupt_inverted": (_corrupt(choose="inverted"), "comparison is reversed"),
    "bug_corrupt_in_place": (bug_corrupt_in_place, "in place"),
    "bug_corrupt_assumes_specials_first": (
        bug_corrupt_assumes_specials_first,
        "random replacement is a special",
    ),
}
for _name, (_fn, _) in CORRUPT_BUGS.items():
    _fn.__name__ = _name


# ---------------------------------------------------------------------------------------------
# Exercise 4: masked_lm_loss
def good_loss(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen])


def good_loss_by_hand(hidden, labels, head):
    b, t = torch.nonzero(labels != -100, as_tuple=True)
    logp = torch.log_softmax(head(hidden[b, t]), dim=-1)  # (M, V)
    return -logp[torch.arange(len(b)), labels[b, t]].mean()


def bug_loss_all_positions(hidden, labels, head):
    logits = head(hidden)
    return F.cross_entropy(logits.flatten(0, 1), labels.clamp(min=0).flatten())


def bug_loss_sum(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="sum")


def bug_loss_divide_all(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="sum") / labels.numel()


def bug_loss_per_sequence(hidden, labels, head):
    losses = []
    for h, y in zip(hidden, labels):
        keep = y != -100
        if keep.any():
            losses.append(F.cross_entropy(head(h[keep]), y[keep]))
    return torch.stack(losses).mean()


def bug_loss_positive_labels(hidden, labels, head):
    chosen = labels > 0
    return F.cross_entropy(head(hidden[chosen]), labels[chosen])


def bug_loss_no_log(hidden, labels, head):
    chosen = labels != -100
    probs = head(hidden[chosen]).softmax(-1)
    return -probs.gather(1, labels[chosen][:, None]).mean()


def bug_loss_softmax_dim0(hidden, labels, head):
    chosen = labels != -100
    logp = head(hidden[chosen]).log_softmax(0)
    return -logp.gather(1, labels[chosen][:, None]).mean()


def bug_loss_head_everywhere(hidden, labels, head):
    logits = head(hidden)
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten())  # right value, 6x the work


def bug_loss_item(hidden, labels, head):
    return good_loss(hidden, labels, head).item()


def bug_loss_detached(hidden, labels, head):
    with torch.no_grad():
        return good_loss(hidden, labels, head)


def bug_loss_no_mean(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="none")


def bug_loss_no_head(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(hidden[chosen], labels[chosen])


# ---------------------------------------------------------------------------------------------
# Exercise 5: cls_logits
def good_cls(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, 0])))


def good_cls_matmul(hidden, pooler, classifier):
    cls = hidden[:, 0, :]  # (B, C)
    pooled = (cls @ pooler.weight.T + pooler.bias).tanh()
    return pooled @ classifier.weight.T + classifier.bias


def bug_cls_mean(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden.mean(dim=1))))


def bug_cls_last(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, -1])))


def bug_cls_second(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, 1])))


def bug_cls_first_sequence(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[0])))


def bug_cls_no_tanh(hidden, pooler, classifier):
    return classifier(pooler(hidden[:, 0]))


def bug_cls_relu(hidden, pooler, classifier):
    return classifier(torch.relu(pooler(hidden[:, 0])))


def bug_cls_no_pooler(hidden, pooler, classifier):
    return classifier(torch.tanh(hidden[:, 0]))


def bug_cls_softmax(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, 0]))).softmax(dim=-1)


def bug_cls_every_token(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden)))


def bug_cls_max(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden.max(dim=1).values)))


# ---------------------------------------------------------------------------------------------
GOOD = [
    (checks.check_pair_inputs, good_pairs_lists),
    (checks.check_pair_inputs, good_pairs_tensors),
    (checks.check_bert_embeddings, good_embeddings),
    (checks.check_bert_embeddings, good_embeddings_functional),
    (checks.check_mlm_corrupt, good_corrupt_bernoulli),
    (checks.check_mlm_corrupt, good_corrupt_exact_count),
    (checks.check_mlm_corrupt, good_corrupt_one_uniform),
    (checks.check_masked_lm_loss, good_loss),
    (checks.check_masked_lm_loss, good_loss_by_hand),
    (checks.check_cls_logits, good_cls),
    (checks.check_cls_logits, good_cls_matmul),
]

PAIR_WORDS = {
    "no final sep": "final [SEP] is missing",
    "no cls": "[CLS] is missing",
    "no middle sep": "[SEP] between the two sentences",
    "left padding": "padded on the left",
    "sep in segment 1": "one token early",
    "last sep in segment 0": "final [SEP] belongs to segment 1",
    "segments swapped": "segments are swapped",
    "all segment 0": "every token_type_id is 0",
    "padding in segment 1": "padding gets token_type_id 0",
    "mask reversed": "attention_mask is reversed",
    "mask all ones": "attention_mask is all ones",
}

CATALOGUE = (
    [(checks.check_pair_inputs, _pair_variant(bug), words) for bug, words in PAIR_WORDS.items()]
    + [
        (checks.check_pair_inputs, bug_pairs_mask_bool, "torch.long tensor of 1"),
        (checks.check_pair_inputs, bug_pairs_lists_returned, "must be a torch.Tensor"),
        (checks.check_pair_inputs, bug_pairs_two_outputs, "tuple of length 2"),
        (checks.check_pair_inputs, bug_pairs_hardcoded_ids, "special ids are hard-coded"),
        (checks.check_bert_embeddings, bug_emb_no_positions, "position embeddings are missing"),
        (checks.check_bert_embeddings, bug_emb_no_segments, "segment embeddings are missing"),
        (checks.check_bert_embeddings, bug_emb_no_norm, "layer norm is missing"),
        (checks.check_bert_embeddings, bug_emb_norm_first, "normalise the sum"),
        (checks.check_bert_embeddings, bug_emb_pos_by_ids, "indexed by the token ids"),
        (checks.check_bert_embeddings, bug_emb_pos_from_one, "positions start at 1"),
        (checks.check_bert_embeddings, bug_emb_scaled, "scaled by sqrt(C)"),
        (checks.check_bert_embeddings, bug_emb_concat, "concatenating"),
        (checks.check_bert_embeddings, bug_emb_raw_mask, "padding_mask_from_attention_mask"),
        (checks.check_bert_embeddings, bug_emb_mask_reversed, "polarity is reversed"),
        (checks.check_bert_embeddings, bug_emb_mask_3d, "(B, 1, 1, T)"),
    ]
    + [(checks.check_mlm_corrupt, fn, words) for fn, words in CORRUPT_BUGS.values()]
    + [
        (checks.check_masked_lm_loss, bug_loss_all_positions, "averaged over every position"),
        (checks.check_masked_lm_loss, bug_loss_sum, "summed"),
        (checks.check_masked_lm_loss, bug_loss_divide_all, "divided by all B*T positions"),
        (checks.check_masked_lm_loss, bug_loss_per_sequence, "each sequence is averaged first"),
        (checks.check_masked_lm_loss, bug_loss_positive_labels, "labels > 0"),
        (checks.check_masked_lm_loss, bug_loss_no_log, "the log is missing"),
        (checks.check_masked_lm_loss, bug_loss_softmax_dim0, "over the positions"),
        (checks.check_masked_lm_loss, bug_loss_head_everywhere, "ran the head on every position"),
        (checks.check_masked_lm_loss, bug_loss_item, "drop the .item()"),
        (checks.check_masked_lm_loss, bug_loss_detached, "detached"),
        (checks.check_masked_lm_loss, bug_loss_no_mean, "average the per-position losses"),
        (checks.check_masked_lm_loss, bug_loss_no_head, "head is skipped"),
        (checks.check_cls_logits, bug_cls_mean, "mean over the tokens"),
        (checks.check_cls_logits, bug_cls_last, "last token"),
        (checks.check_cls_logits, bug_cls_second, "second token"),
        (checks.check_cls_logits, bug_cls_first_sequence, "first sequence of the batch"),
        (checks.check_cls_logits, bug_cls_no_tanh, "tanh after the pooler is missing"),
        (checks.check_cls_logits, bug_cls_relu, "not ReLU"),
        (checks.check_cls_logits, bug_cls_no_pooler, "pooler is skipped"),
        (checks.check_cls_logits, bug_cls_softmax, "return the logits"),
        (checks.check_cls_logits, bug_cls_every_token, "classified every token"),
        (checks.check_cls_logits, bug_cls_max, "max over the tokens"),
    ]
)


MISTAKES = from_table("06", CATALOGUE)
CORRECT = from_table("06", GOOD)
NAMED_AT_LEAST = 1.0  # every entry named when converted to this format
