"""Holdout for notebook 06, written from notebooks/06_bert/06_bert.ipynb alone (without reading the
checks)."""

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import masks

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "06")
right = collector(CORRECT, "06")
NAMED_AT_LEAST = 1.0  # measured: 53 of 53 named


# ---------------------------------------------------------------- pair_inputs
def _pairs(pairs, cls_id, sep_id, pad_id, seg_sep_a=0, seg_last=1, seg_pad=0, front=False,
           last_sep=True, att_pad=0, att_real=1, pad_value=None, L=None, dtype=torch.long):  # fmt: skip
    rows, segs = [], []
    for a, b in pairs:
        a, b = list(a), list(b)
        ids = [cls_id, *a, sep_id, *b] + ([sep_id] if last_sep else [])
        seg = [0] * (len(a) + 1) + [seg_sep_a] + [1] * len(b) + ([seg_last] if last_sep else [])
        rows.append(ids)
        segs.append(seg)
    L = max(len(r) for r in rows) if L is None else L
    pv = pad_id if pad_value is None else pad_value
    out_ids, out_seg, out_att = [], [], []
    for r, s in zip(rows, segs):
        r, s = r[:L], s[:L]
        n = L - len(r)
        att = [att_real] * len(r)
        if front:
            out_ids.append([pv] * n + r)
            out_seg.append([seg_pad] * n + s)
            out_att.append([att_pad] * n + att)
        else:
            out_ids.append(r + [pv] * n)
            out_seg.append(s + [seg_pad] * n)
            out_att.append(att + [att_pad] * n)
    return tuple(torch.tensor(t, dtype=dtype) for t in (out_ids, out_seg, out_att))


@wrong("pair_inputs", "segment|token_type|sep|first")
def pairs_first_sep_in_segment_one(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, seg_sep_a=1)


@wrong("pair_inputs", "segment|token_type|sep|last|final")
def pairs_last_sep_in_segment_zero(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, seg_last=0)


@wrong("pair_inputs", "segment|token_type|padding|pad")
def pairs_padding_in_segment_one(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, seg_pad=1)


@wrong("pair_inputs", "at the end|the end|left|front|start|right")
def pairs_padded_in_front(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, front=True)


@wrong("pair_inputs", "long|dtype|int64|bool")
def pairs_bool_attention_mask(pairs, cls_id, sep_id, pad_id):
    ids, seg, att = _pairs(pairs, cls_id, sep_id, pad_id)
    return ids, seg, att.bool()


@wrong("pair_inputs", "sep|final|missing|last|length")
def pairs_without_final_sep(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, last_sep=False)


@wrong("pair_inputs", "length|longest|truncat|+3|shape")
def pairs_length_without_specials(pairs, cls_id, sep_id, pad_id):
    L = max(len(a) + len(b) for a, b in pairs)
    return _pairs(pairs, cls_id, sep_id, pad_id, L=L)


@wrong("pair_inputs", "attention|mask|padding")
def pairs_attention_all_ones(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, att_pad=1)


@wrong("pair_inputs", "attention|mask|padding|invert|polarity")
def pairs_attention_inverted(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, att_pad=1, att_real=0)


@wrong("pair_inputs", "pad_id|pad id|padding value|pad")
def pairs_padded_with_zero(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, pad_value=0)


@wrong("pair_inputs", "segment|token_type")
def pairs_all_segments_zero(pairs, cls_id, sep_id, pad_id):
    ids, seg, att = _pairs(pairs, cls_id, sep_id, pad_id)
    return ids, torch.zeros_like(seg), att


@wrong("pair_inputs", "cls|sep|swap|special")
def pairs_cls_and_sep_swapped(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, sep_id, cls_id, pad_id)


@right("pair_inputs")
def pairs_filled_tensors(pairs, cls_id, sep_id, pad_id):
    L = max(len(a) + len(b) + 3 for a, b in pairs)
    B = len(pairs)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    seg = torch.zeros(B, L, dtype=torch.long)
    att = torch.zeros(B, L, dtype=torch.long)
    for i, (a, b) in enumerate(pairs):
        row = [cls_id, *a, sep_id, *b, sep_id]
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        seg[i, len(a) + 2 : len(row)] = 1
        att[i, : len(row)] = 1
    return ids, seg, att


# ---------------------------------------------------------------- bert_embeddings
def _emb(ids, seg, att, tok, pos, segt, norm, first=0):
    T = ids.shape[1]
    x = tok[ids] + pos[first : first + T] + segt[seg]
    return norm(x), masks.padding_mask_from_attention_mask(att)


@wrong("bert_embeddings", "position")
def emb_without_positions(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x = tok_table[input_ids] + seg_table[token_type_ids]
    return norm(x), masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "segment|token_type")
def emb_without_segments(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x = tok_table[input_ids] + pos_table[: input_ids.shape[1]]
    return norm(x), masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "norm|layer norm|layernorm")
def emb_without_norm(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x = tok_table[input_ids] + pos_table[: input_ids.shape[1]] + seg_table[token_type_ids]
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "mask|polarity|invert|padding|true")
def emb_mask_inverted(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x, m = _emb(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)
    return x, ~m


@wrong("bert_embeddings", "mask|shape|(b, 1, 1, t)|broadcast|dim")
def emb_mask_two_dimensional(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x, _ = _emb(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)
    return x, attention_mask.bool()


@wrong("bert_embeddings", "position|offset|start|off-by-one|off by one")
def emb_positions_from_one(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    return _emb(
        input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm, first=1
    )


@wrong("bert_embeddings", "norm|order|sum|after|before")
def emb_norm_only_tokens(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x = norm(tok_table[input_ids]) + pos_table[: input_ids.shape[1]] + seg_table[token_type_ids]
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "segment|token_type|attention")
def emb_segments_from_attention_mask(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    return _emb(input_ids, attention_mask, attention_mask, tok_table, pos_table, seg_table, norm)


@wrong("bert_embeddings", "position|shape|batch|length")
def emb_positions_by_batch_index(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    B = input_ids.shape[0]
    x = tok_table[input_ids] + pos_table[:B, None, :] + seg_table[token_type_ids]
    return norm(x), masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "bool|dtype|mask")
def emb_mask_as_long(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x, _ = _emb(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)
    return x, attention_mask[:, None, None, :]


@wrong("bert_embeddings", "padding|zero|mask|pad")
def emb_zeroes_padding(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    x, m = _emb(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm)
    return x * attention_mask[..., None].to(x.dtype), m


@right("bert_embeddings")
def emb_with_embedding_fn(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    x = (
        F.embedding(input_ids, tok_table)
        + F.embedding(positions, pos_table)[None]
        + F.embedding(token_type_ids, seg_table)
    )
    mask = (attention_mask != 0)[:, None, None, :]
    return norm(x), mask


# ---------------------------------------------------------------- mlm_corrupt
def _corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None, *, allow_special=False,
             t_mask=0.8, t_rand=0.9, rand_any=False, labels_all=False, label_fill=-100,
             in_place=False, label_corrupted=False, label_only_changed=False, reuse=False):  # fmt: skip
    shape = input_ids.shape
    special = torch.isin(input_ids, torch.tensor(special_ids))
    u0 = torch.rand(shape, generator=generator)
    chosen = u0 < p
    if not allow_special:
        chosen &= ~special
    u = u0 if reuse else torch.rand(shape, generator=generator)
    if rand_any:
        allowed = torch.tensor([i for i in range(vocab_size) if i != mask_id])
    else:
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
    random_ids = allowed[torch.randint(len(allowed), shape, generator=generator)]
    out = input_ids if in_place else input_ids.clone()
    original = input_ids.clone()
    to_mask = chosen & (u < t_mask)
    to_rand = chosen & (u >= t_mask) & (u < t_rand)
    out[to_mask] = mask_id
    out[to_rand] = random_ids[to_rand]
    source = out if label_corrupted else original
    lab_where = (to_mask | to_rand) if label_only_changed else chosen
    labels = (
        original.clone()
        if labels_all
        else torch.where(lab_where, source, torch.full_like(source, label_fill))
    )
    return out, labels


@wrong("mlm_corrupt", "special|cls|sep|pad")
def mlm_chooses_specials(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, allow_special=True)


@wrong("mlm_corrupt", "80%|80 %|random|kept|unchanged|share|proportion|10%|10 %")
def mlm_always_mask(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(
        input_ids, mask_id, vocab_size, special_ids, p, generator, t_mask=1.0, t_rand=1.0
    )


@wrong("mlm_corrupt", "special|random|replacement")
def mlm_random_ids_may_be_special(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, rand_any=True)


@wrong("mlm_corrupt", "-100|label|ignore|unchosen|chosen")
def mlm_labels_everywhere(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, labels_all=True)


@wrong("mlm_corrupt", "-100|label|ignore")
def mlm_unchosen_labels_zero(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, label_fill=0)


@wrong("mlm_corrupt", "in place|in-place|unchanged|modif|new tensor|input_ids")
def mlm_corrupts_input_in_place(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, in_place=True)


@wrong("mlm_corrupt", "generator|seed|reproduc|same")
def mlm_ignores_generator(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, None)


@wrong("mlm_corrupt", "rate|share|probabilit|15%|15 %|chosen")
def mlm_ignores_p(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, 0.15, generator)


@wrong("mlm_corrupt", "80%|80 %|mask|random|share|proportion|10%|10 %")
def mlm_shares_swapped(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(
        input_ids, mask_id, vocab_size, special_ids, p, generator, t_mask=0.1, t_rand=0.9
    )


@wrong("mlm_corrupt", "label|original|corrupt")
def mlm_labels_are_corrupted_ids(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, label_corrupted=True)


@wrong("mlm_corrupt", "random|kept|80%|80 %|share|proportion|unchanged|10%|10 %")
def mlm_reuses_one_uniform(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, reuse=True)


@wrong("mlm_corrupt", "label|kept|unchanged|-100|10%|10 %")
def mlm_kept_tokens_unlabelled(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(
        input_ids, mask_id, vocab_size, special_ids, p, generator, label_only_changed=True
    )


@right("mlm_corrupt")
def mlm_with_bernoulli(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = torch.bernoulli(torch.full(input_ids.shape, p), generator=generator).bool() & ~special
    u = torch.rand(input_ids.shape, generator=generator)
    ordinary = torch.tensor(sorted(set(range(vocab_size)) - set(special_ids)))
    draws = ordinary[torch.randint(len(ordinary), input_ids.shape, generator=generator)]
    inputs = torch.where(chosen & (u < 0.8), torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(chosen & (u >= 0.8) & (u < 0.9), draws, inputs)
    labels = input_ids.masked_fill(~chosen, -100)
    return inputs, labels


# ---------------------------------------------------------------- masked_lm_loss
@wrong("masked_lm_loss", "head|all positions|labelled|only|count|vectors|every position")
def mlm_loss_head_on_all_positions(hidden, labels, head):
    logits = head(hidden.flatten(0, 1))
    return F.cross_entropy(logits, labels.flatten())


@wrong("masked_lm_loss", "mean|sum|average")
def mlm_loss_summed(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="sum")


@wrong("masked_lm_loss", "mean|average|labelled|divide|all positions|number")
def mlm_loss_divided_by_all_positions(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="sum") / labels.numel()


@wrong("masked_lm_loss", "-100|label 0|zero|labelled|id 0")
def mlm_loss_selects_positive_labels(hidden, labels, head):
    chosen = labels > 0
    return F.cross_entropy(head(hidden[chosen]), labels[chosen])


@wrong("masked_lm_loss", "grad|tensor|differentiable|float|item|detach")
def mlm_loss_as_python_float(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen]).item()


@wrong(
    "masked_lm_loss",
    "log_softmax|softmax|logits|cross-entropy|cross entropy|log-prob|log prob|log-softmax|log softmax|logarithm",
)
def mlm_loss_nll_on_logits(hidden, labels, head):
    chosen = labels != -100
    return F.nll_loss(head(hidden[chosen]), labels[chosen])


@wrong("masked_lm_loss", "softmax|logits|twice|probab")
def mlm_loss_softmax_first(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]).softmax(dim=-1), labels[chosen])


@wrong("masked_lm_loss", "mean|shape|0-dim|scalar|one number|reduc")
def mlm_loss_per_position(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="none")


@wrong("masked_lm_loss", "mean|per sequence|position|average|weight")
def mlm_loss_mean_of_sequence_means(hidden, labels, head):
    losses = []
    for b in range(hidden.shape[0]):
        chosen = labels[b] != -100
        if chosen.any():
            losses.append(F.cross_entropy(head(hidden[b][chosen]), labels[b][chosen]))
    return torch.stack(losses).mean()


@right("masked_lm_loss")
def mlm_loss_by_index(hidden, labels, head):
    flat_h, flat_y = hidden.reshape(-1, hidden.shape[-1]), labels.reshape(-1)
    idx = (flat_y != -100).nonzero(as_tuple=True)[0]
    logits = head(flat_h.index_select(0, idx))  # (M, V)
    return -logits.log_softmax(dim=-1).gather(1, flat_y[idx, None]).mean()


# ---------------------------------------------------------------- cls_logits
@wrong("cls_logits", "cls|position 0|first|last")
def cls_reads_last_token(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, -1])))


@wrong("cls_logits", "tanh|activation|pooler")
def cls_without_tanh(hidden, pooler, classifier):
    return classifier(pooler(hidden[:, 0]))


@wrong("cls_logits", "cls|mean|position 0|average|first")
def cls_mean_pooling(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden.mean(dim=1))))


@wrong("cls_logits", "pooler")
def cls_skips_pooler(hidden, pooler, classifier):
    return classifier(torch.tanh(hidden[:, 0]))


@wrong("cls_logits", "tanh|relu|activation")
def cls_relu(hidden, pooler, classifier):
    return classifier(torch.relu(pooler(hidden[:, 0])))


@wrong("cls_logits", "tanh|order|after|classifier")
def cls_tanh_after_classifier(hidden, pooler, classifier):
    return torch.tanh(classifier(pooler(hidden[:, 0])))


@wrong("cls_logits", "softmax|logits|probab")
def cls_returns_probabilities(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, 0]))).softmax(dim=-1)


@wrong("cls_logits", "batch|position|index|dim|shape|sequence")
def cls_indexes_the_batch(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[0])))


@wrong("cls_logits", "tanh|sigmoid|activation")
def cls_sigmoid(hidden, pooler, classifier):
    return classifier(torch.sigmoid(pooler(hidden[:, 0])))


@right("cls_logits")
def cls_with_select(hidden, pooler, classifier):
    first = hidden.select(dim=1, index=0)  # (B, C)
    return classifier(pooler(first).tanh())
