"""Holdout mistakes for notebook 06 (BERT), fourth round (issue 23): written from the notebook's
text after the checks were changed for that issue, and measured once, untuned.

Measured once on the checks of branch fasttrue (issue 23), before any change made because of
this set: 23 mistakes: named 23, generic 0, misleading 0, passed 0 (100%).
After the fixes it prompted (tuned on it from then on, so no longer a holdout figure): unchanged:
23 of 23.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.holdout._harness import collector
from transformer_lab import masks

MISTAKES: list = []
wrong = collector(MISTAKES, "06")
NAMED_AT_LEAST = 1.0


# --- pair_inputs ------------------------------------------------------------------------------


def _assemble(pairs, cls_id, sep_id, pad_id, seg=None, pad_left=False, mask_sep=False, dtype=None):
    rows = []
    for a, b in pairs:
        ids = [cls_id, *a, sep_id, *b, sep_id]
        segments = seg(a, b) if seg else [0] * (len(a) + 2) + [1] * (len(b) + 1)
        rows.append((ids, segments))
    L = max(len(ids) for ids, _ in rows)
    out = [torch.full((len(rows), L), pad_id), torch.zeros(len(rows), L), torch.zeros(len(rows), L)]
    for i, (ids, segments) in enumerate(rows):
        where = slice(L - len(ids), L) if pad_left else slice(0, len(ids))
        out[0][i, where] = torch.tensor(ids)
        out[1][i, where] = torch.tensor(segments, dtype=torch.float)
        out[2][i, where] = 1
        if mask_sep:
            out[2][i, where.start + len(ids) - 1] = 0
    return tuple(t.to(dtype or torch.long) for t in out)


@wrong("pair_inputs", "segment|token_type|[SEP]|second")
def pair_second_sep_in_segment_zero(pairs, cls_id, sep_id, pad_id):
    return _assemble(pairs, cls_id, sep_id, pad_id,
                     seg=lambda a, b: [0] * (len(a) + 3) + [1] * len(b))  # fmt: skip


@wrong("pair_inputs", "end|left|pad")
def pair_padded_at_the_front(pairs, cls_id, sep_id, pad_id):
    return _assemble(pairs, cls_id, sep_id, pad_id, pad_left=True)


@wrong("pair_inputs", "dtype|long|float")
def pair_float_segments(pairs, cls_id, sep_id, pad_id):
    ids, seg, att = _assemble(pairs, cls_id, sep_id, pad_id)
    return ids, seg.float(), att.float()


@wrong("pair_inputs", "attention_mask|mask|[SEP]|real")
def pair_last_sep_not_attended(pairs, cls_id, sep_id, pad_id):
    return _assemble(pairs, cls_id, sep_id, pad_id, mask_sep=True)


# --- bert_embeddings --------------------------------------------------------------------------


@wrong("bert_embeddings", "norm|layer norm")
def emb_norm_forgotten(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids]
    return x, masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "segment|token_type|seg_table")
def emb_segment_table_by_position(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = tok_table[input_ids] + pos_table[:T] + seg_table[0]  # every token in segment 0
    return norm(x), masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "mask|(B, 1, 1, T)|bool|shape")
def emb_mask_returned_as_given(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = tok_table[input_ids] + pos_table[:T] + seg_table[token_type_ids]
    return norm(x), attention_mask


@wrong("bert_embeddings", "position|pos_table|offset|row")
def emb_positions_from_one(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = tok_table[input_ids] + pos_table[1 : T + 1] + seg_table[token_type_ids]  # [CLS] at 1
    return norm(x), masks.padding_mask_from_attention_mask(attention_mask)


@wrong("bert_embeddings", "norm|each|separately|sum")
def emb_norm_each_table(
    input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm
):
    T = input_ids.shape[1]
    x = norm(tok_table[input_ids]) + norm(pos_table[:T]) + norm(seg_table[token_type_ids])
    return x, masks.padding_mask_from_attention_mask(attention_mask)


# --- mlm_corrupt ------------------------------------------------------------------------------


def _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, *, allow_special=False,
             split=(0.8, 0.9), labels_all=False, choose_specials=False, rand_vocab=False):  # fmt: skip
    special = torch.tensor(list(special_ids))
    chosen = torch.rand(input_ids.shape, generator=generator) < p
    if not choose_specials:
        chosen &= ~torch.isin(input_ids, special)
    labels = input_ids.clone() if labels_all else torch.where(chosen, input_ids, -100)
    if allow_special:
        allowed = torch.arange(vocab_size)
    else:
        allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
    if rand_vocab:
        random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    else:
        random_ids = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    u = torch.rand(input_ids.shape, generator=generator)
    inputs = torch.where(chosen & (u < split[0]), torch.full_like(input_ids, mask_id), input_ids)
    inputs = torch.where(chosen & (u >= split[0]) & (u < split[1]), random_ids, inputs)
    return inputs, labels


@wrong("mlm_corrupt", "special|random")
def mlm_random_from_whole_vocabulary(
    input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None
):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, rand_vocab=True)


@wrong("mlm_corrupt", "-100|label|unchosen|chosen")
def mlm_labels_everywhere(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, labels_all=True)


@wrong("mlm_corrupt", "special|[CLS]|[SEP]|[PAD]|never chosen")
def mlm_specials_can_be_chosen(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, choose_specials=True)


@wrong("mlm_corrupt", "10|random|kept|unchanged|80")
def mlm_split_80_20_no_keep(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    return _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator, split=(0.8, 1.0))


@wrong("mlm_corrupt", "in place|input_ids|unchanged|changed")
def mlm_writes_into_input(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    inputs, labels = _corrupt(input_ids, mask_id, vocab_size, special_ids, p, generator)
    input_ids.copy_(inputs)  # "saves memory"
    return input_ids, labels


@wrong("mlm_corrupt", "generator|seed|reproduc")
def mlm_global_rng_for_fates(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = torch.tensor(list(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~torch.isin(
        input_ids, special
    )
    labels = torch.where(chosen, input_ids, -100)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
    random_ids = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    u = torch.rand(input_ids.shape)  # forgot the generator here
    inputs = torch.where(chosen & (u < 0.8), torch.full_like(input_ids, mask_id), input_ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, inputs), labels


# --- masked_lm_loss ---------------------------------------------------------------------------


@wrong("masked_lm_loss", "every position|all positions|labelled|only|head")
def mlm_loss_head_everywhere(hidden, labels, head):
    logits = head(hidden.flatten(0, 1))
    return F.cross_entropy(logits, labels.flatten())  # right number, 6x the work


@wrong("masked_lm_loss", "mean|sum|average")
def mlm_loss_summed(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]), labels[chosen], reduction="sum")


@wrong("masked_lm_loss", "gradient|detach|graph|float|item")
def mlm_loss_as_python_float(hidden, labels, head):
    chosen = labels != -100
    return torch.tensor(F.cross_entropy(head(hidden[chosen]), labels[chosen]).item())


@wrong("masked_lm_loss", "mean|average|per sequence|row|each sequence")
def mlm_loss_mean_of_row_means(hidden, labels, head):
    losses = []
    for h, y in zip(hidden, labels):  # one sequence at a time
        chosen = y != -100
        if chosen.any():
            losses.append(F.cross_entropy(head(h[chosen]), y[chosen]))
    return torch.stack(losses).mean()


# --- cls_logits -------------------------------------------------------------------------------


@wrong("cls_logits", "tanh")
def cls_without_tanh(hidden, pooler, classifier):
    return classifier(pooler(hidden[:, 0]))


@wrong("cls_logits", "mean|[CLS]|position 0|first")
def cls_mean_pooled(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden.mean(dim=1))))


@wrong("cls_logits", "softmax|logits|probabilit")
def cls_softmaxed(hidden, pooler, classifier):
    return torch.softmax(classifier(torch.tanh(pooler(hidden[:, 0]))), dim=-1)


@wrong("cls_logits", "last|[CLS]|position 0|first")
def cls_reads_last_token(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[:, -1])))
