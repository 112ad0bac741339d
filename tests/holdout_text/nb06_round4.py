"""Holdout for notebook 06 (fourth round), written from notebooks/06_bert/06_bert.ipynb alone (without
reading the checks)."""

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector
from transformer_lab import masks

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "06")
right = collector(CORRECT, "06")
# Written after rounds 2 and 3 had tuned the checks, and measured once, never tuned on: the
# forecast for a new class. First shot 33 of 33 named, 0 generic, 0 misleading, 0 passed.
NAMED_AT_LEAST = 1.0


# --------------------------------------------------------------------------- Exercise 1: pair_inputs


def _pad_rows(rows, fill, length, front=False):
    out = []
    for row in rows:
        padding = [fill] * (length - len(row))
        out.append(padding + row if front else row + padding)
    return torch.tensor(out, dtype=torch.long)


@wrong("pair_inputs", "end|left|front|start|beginning|right|side")
def pair_inputs_pads_at_the_front(pairs, cls_id, sep_id, pad_id):
    ids, segs, att = [], [], []
    for a, b in pairs:
        ids.append([cls_id, *a, sep_id, *b, sep_id])
        segs.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        att.append([1] * (len(a) + len(b) + 3))
    L = max(len(r) for r in ids)
    return (
        _pad_rows(ids, pad_id, L, front=True),
        _pad_rows(segs, 0, L, front=True),
        _pad_rows(att, 0, L, front=True),
    )


@wrong("pair_inputs", "segment|token_type|sep")
def pair_inputs_final_sep_in_segment_0(pairs, cls_id, sep_id, pad_id):
    ids, segs, att = [], [], []
    for a, b in pairs:
        ids.append([cls_id, *a, sep_id, *b, sep_id])
        segs.append([0] * (len(a) + 2) + [1] * len(b) + [0])  # the closing [SEP] left in segment 0
        att.append([1] * (len(a) + len(b) + 3))
    L = max(len(r) for r in ids)
    return _pad_rows(ids, pad_id, L), _pad_rows(segs, 0, L), _pad_rows(att, 0, L)


@wrong("pair_inputs", "segment|token_type|sep")
def pair_inputs_middle_sep_in_segment_1(pairs, cls_id, sep_id, pad_id):
    ids, segs, att = [], [], []
    for a, b in pairs:
        ids.append([cls_id, *a, sep_id, *b, sep_id])
        segs.append([0] * (len(a) + 1) + [1] * (len(b) + 2))  # "[SEP] b [SEP]" is segment 1
        att.append([1] * (len(a) + len(b) + 3))
    L = max(len(r) for r in ids)
    return _pad_rows(ids, pad_id, L), _pad_rows(segs, 0, L), _pad_rows(att, 0, L)


@wrong("pair_inputs", "pad|padding")
def pair_inputs_padding_continues_segment_1(pairs, cls_id, sep_id, pad_id):
    ids, segs, att = [], [], []
    for a, b in pairs:
        ids.append([cls_id, *a, sep_id, *b, sep_id])
        segs.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        att.append([1] * (len(a) + len(b) + 3))
    L = max(len(r) for r in ids)
    return _pad_rows(ids, pad_id, L), _pad_rows(segs, 1, L), _pad_rows(att, 0, L)


@wrong("pair_inputs", "pad_id|pad")
def pair_inputs_pads_with_zero(pairs, cls_id, sep_id, pad_id):
    ids, segs, att = [], [], []
    for a, b in pairs:
        ids.append([cls_id, *a, sep_id, *b, sep_id])
        segs.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        att.append([1] * (len(a) + len(b) + 3))
    L = max(len(r) for r in ids)
    return _pad_rows(ids, 0, L), _pad_rows(segs, 0, L), _pad_rows(att, 0, L)  # 0, as in the example


@wrong("pair_inputs", "dtype|long|bool|int")
def pair_inputs_bool_attention_mask(pairs, cls_id, sep_id, pad_id):
    ids, segs, att = [], [], []
    for a, b in pairs:
        ids.append([cls_id, *a, sep_id, *b, sep_id])
        segs.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
        att.append([1] * (len(a) + len(b) + 3))
    L = max(len(r) for r in ids)
    return _pad_rows(ids, pad_id, L), _pad_rows(segs, 0, L), _pad_rows(att, 0, L) == 1


@right("pair_inputs")
def pair_inputs_preallocated(pairs, cls_id, sep_id, pad_id):
    L = max(len(a) + len(b) + 3 for a, b in pairs)
    ids = torch.full((len(pairs), L), pad_id, dtype=torch.long)
    segs = torch.zeros(len(pairs), L, dtype=torch.long)
    att = torch.zeros(len(pairs), L, dtype=torch.long)
    for i, (a, b) in enumerate(pairs):
        row = torch.tensor([cls_id, *a, sep_id, *b, sep_id], dtype=torch.long)
        n = row.numel()
        ids[i, :n] = row
        segs[i, len(a) + 2 : n] = 1
        att[i, :n] = 1
    return ids, segs, att


# --------------------------------------------------------------------------- Exercise 2: bert_embeddings


@wrong("bert_embeddings", "norm|LN|layer")
def bert_embeddings_forgets_the_layer_norm(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids]
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "segment|token_type|seg")
def bert_embeddings_without_segments(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids] + pos_table[:T])
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "position|offset|pos")
def bert_embeddings_positions_from_one(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids] + pos_table[1 : T + 1] + seg_table[token_type_ids])
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "padding|invert|real|True")
def bert_embeddings_mask_true_at_padding(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids])
    return x, (attention_mask == 0)[:, None, None, :]


@wrong("bert_embeddings", "shape|(B, 1, 1, T)|dim|broadcast")
def bert_embeddings_mask_left_2d(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids])
    return x, attention_mask.bool()


@wrong("bert_embeddings", "norm|LN|order|after|sum")
def bert_embeddings_norms_only_the_tokens(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids]) + pos_table[:T] + seg_table[token_type_ids]
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "padding|zero")
def bert_embeddings_zeroes_the_padding(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids])
    x = x * attention_mask[..., None]  # "padding should not count"
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@right("bert_embeddings")
def bert_embeddings_functional(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    positions = torch.arange(T, device=input_ids.device).expand_as(input_ids)
    x = (
        F.embedding(input_ids, tok_table)
        + F.embedding(positions, pos_table)
        + F.embedding(token_type_ids, seg_table)
    )
    return norm(x), attention_mask.ne(0)[:, None, None, :]


# --------------------------------------------------------------------------- Exercise 3: mlm_corrupt


def _allowed(vocab_size, special_ids):
    everything = torch.arange(vocab_size)
    return everything[~torch.isin(everything, torch.tensor(list(special_ids)))]


@wrong("mlm_corrupt", "special")
def mlm_corrupt_chooses_specials(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    chosen = (
        torch.rand(input_ids.shape, generator=generator) < p
    )  # every token, [CLS]/[SEP]/[PAD] included
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, labels


@wrong("mlm_corrupt", "special|random|replacement")
def mlm_corrupt_random_ids_from_whole_vocab(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(input_ids.shape, generator=generator)
    rand = torch.randint(
        vocab_size, input_ids.shape, generator=generator
    )  # may draw [PAD], [SEP], ...
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, labels


@wrong("mlm_corrupt", "80|10|random|kept|unchanged|share|proportion")
def mlm_corrupt_always_mask(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    return input_ids.masked_fill(chosen, mask_id), labels


@wrong("mlm_corrupt", "80|10|share|proportion|mask")
def mlm_corrupt_thresholds_swapped(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.1)] = mask_id  # 10% [MASK], 80% random
    swap = chosen & (u >= 0.1) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, labels


@wrong("mlm_corrupt", "-100|label")
def mlm_corrupt_labels_everywhere(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, input_ids.clone()  # the original ids as labels at every position


@wrong("mlm_corrupt", "label|kept|unchanged")
def mlm_corrupt_labels_only_where_changed(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    labels = torch.where(
        chosen & (u < 0.9), input_ids, torch.full_like(input_ids, -100)
    )  # kept 10% unlabelled
    return inputs, labels


@wrong("mlm_corrupt", "in place|in-place|unchanged|modif|copy|clone|argument")
def mlm_corrupt_edits_input_in_place(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids  # no clone
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, labels


@wrong("mlm_corrupt", "generator|seed|reproduc")
def mlm_corrupt_random_split_ignores_generator(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(input_ids.shape)  # the global generator
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape)]
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, labels


@wrong("mlm_corrupt", "p|probability|rate|share|15")
def mlm_corrupt_ignores_p(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (
        torch.rand(input_ids.shape, generator=generator) < 0.15
    ) & ~special  # the paper's value, always
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    u = torch.rand(input_ids.shape, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    rand = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = rand[swap]
    return inputs, labels


@right("mlm_corrupt")
def mlm_corrupt_draws_on_chosen_only(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    special = torch.isin(input_ids, torch.tensor(special_ids, dtype=input_ids.dtype))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special
    inputs = input_ids.clone()
    labels = torch.full_like(input_ids, -100)
    labels[chosen] = input_ids[chosen]
    n = int(chosen.sum())
    u = torch.rand(n, generator=generator)
    allowed = _allowed(vocab_size, special_ids)
    replacement = input_ids[chosen].clone()
    replacement[u < 0.8] = mask_id
    is_random = (u >= 0.8) & (u < 0.9)
    replacement[is_random] = allowed[
        torch.randint(len(allowed), (int(is_random.sum()),), generator=generator)
    ]
    inputs[chosen] = replacement
    return inputs, labels


# --------------------------------------------------------------------------- Exercise 4: masked_lm_loss


@wrong("masked_lm_loss", "head|all positions|labelled|count|vectors|chosen")
def masked_lm_loss_head_on_every_position(hidden, labels, head):
    logits = head(hidden.flatten(0, 1))  # (B*T, V), then select
    keep = labels.flatten() != -100
    return F.cross_entropy(logits[keep], labels.flatten()[keep])


@wrong("masked_lm_loss", "mean|sum|average|divid")
def masked_lm_loss_sums(hidden, labels, head):
    keep = labels != -100
    return F.cross_entropy(head(hidden[keep]), labels[keep], reduction="sum")


@wrong("masked_lm_loss", "mean|average|divid|number|all positions|B*T|B * T")
def masked_lm_loss_divides_by_all_positions(hidden, labels, head):
    keep = labels != -100
    total = F.cross_entropy(head(hidden[keep]), labels[keep], reduction="sum")
    return total / labels.numel()


@wrong("masked_lm_loss", "grad|differentiable|detach|tensor")
def masked_lm_loss_returns_a_float(hidden, labels, head):
    keep = labels != -100
    return torch.tensor(F.cross_entropy(head(hidden[keep]), labels[keep]).item())


@wrong("masked_lm_loss", "0-dim|scalar|shape|mean|one number|reduc")
def masked_lm_loss_per_position(hidden, labels, head):
    keep = labels != -100
    return F.cross_entropy(head(hidden[keep]), labels[keep], reduction="none")


@wrong("masked_lm_loss", "softmax|log|probabilit|logits")
def masked_lm_loss_softmax_twice(hidden, labels, head):
    keep = labels != -100
    return F.cross_entropy(torch.softmax(head(hidden[keep]), dim=-1), labels[keep])


@right("masked_lm_loss")
def masked_lm_loss_gather(hidden, labels, head):
    rows = (labels != -100).nonzero(as_tuple=True)
    log_p = torch.log_softmax(head(hidden[rows]), dim=-1)  # (M, V)
    return -log_p.gather(1, labels[rows][:, None]).mean()


# --------------------------------------------------------------------------- Exercise 5: cls_logits


@wrong("cls_logits", "tanh|activation|pooler")
def cls_logits_without_tanh(hidden, pooler, classifier):
    return classifier(pooler(hidden[:, 0]))


@wrong("cls_logits", "tanh|activation|relu")
def cls_logits_relu_pooler(hidden, pooler, classifier):
    return classifier(torch.relu(pooler(hidden[:, 0])))


@wrong("cls_logits", "CLS|first|position 0|index 0|token 0")
def cls_logits_reads_last_token(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, -1])))


@wrong("cls_logits", "CLS|first|mean|average|position 0|token 0")
def cls_logits_mean_pools(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden.mean(dim=1))))


@wrong("cls_logits", "pooler|dense")
def cls_logits_skips_the_pooler(hidden, pooler, classifier):
    return classifier(torch.tanh(hidden[:, 0]))


@right("cls_logits")
def cls_logits_functional(hidden, pooler, classifier):
    h0 = hidden.select(1, 0)  # (B, C)
    pooled = torch.tanh(torch.einsum("bc,dc->bd", h0, pooler.weight) + pooler.bias)
    return F.linear(pooled, classifier.weight, classifier.bias)
