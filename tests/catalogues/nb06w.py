"""Notebook 06, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text (sentence pairs, BERT's embeddings, MLM corruption and loss, the [CLS] head), written
without looking at what the checks detect. ``python -m tests.holdout report 06w``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.holdout._harness import Mistake, collector

MISTAKES: list[Mistake] = []
# Before the fixes of issue 39: 19/1/0/0 named/generic/misleading/passed; after: 20 of 20 named, 0 generic.
# With the 3 scaled-logits entries of h17: 20/3/0/0 of 23 before its evidence, 23 of 23 after.
NAMED_AT_LEAST = 1.0
wrong = collector(MISTAKES, "06")


def _pairs(pairs, cls_id, sep_id, pad_id, seq=None, seg=None, pad_seg=0, left=False):
    seqs = [seq(a, b) if seq else [cls_id, *a, sep_id, *b, sep_id] for a, b in pairs]
    segs = [seg(a, b) if seg else [0] * (len(a) + 2) + [1] * (len(b) + 1) for a, b in pairs]
    L = max(map(len, seqs))

    def pad(s, v):
        return [v] * (L - len(s)) + s if left else s + [v] * (L - len(s))

    ids = torch.tensor([pad(s, pad_id) for s in seqs])
    sg = torch.tensor([pad(s, pad_seg) for s in segs])
    mask = torch.tensor([pad([1] * len(s), 0) for s in seqs])
    return ids, sg, mask


@wrong("pair_inputs", "second [SEP]|[SEP]|end")
def pairs_one_sep(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, seq=lambda a, b: [cls_id, *a, sep_id, *b],
                  seg=lambda a, b: [0] * (len(a) + 2) + [1] * len(b))  # fmt: skip


@wrong("pair_inputs", "segment|token_type|[SEP]")
def pairs_first_sep_in_segment_b(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id,
                  seg=lambda a, b: [0] * (len(a) + 1) + [1] * (len(b) + 2))  # fmt: skip


@wrong("pair_inputs", "padding|segment|token_type|0")
def pairs_pads_segment_one(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, pad_seg=1)


@wrong("pair_inputs", "left|end|padding")
def pairs_left_padded(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, left=True)


@wrong("pair_inputs", "[CLS]|cls")
def pairs_no_cls(pairs, cls_id, sep_id, pad_id):
    return _pairs(pairs, cls_id, sep_id, pad_id, seq=lambda a, b: [*a, sep_id, *b, sep_id],
                  seg=lambda a, b: [0] * (len(a) + 1) + [1] * (len(b) + 1))  # fmt: skip


def _padding_mask(attention_mask):
    return attention_mask.bool()[:, None, None, :]


@wrong("bert_embeddings", "segment|token_type")
def emb_no_segments(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
    T = input_ids.shape[1]
    return norm(tok[input_ids] + pos[:T]), _padding_mask(attention_mask)


@wrong("bert_embeddings", "norm|LayerNorm")
def emb_norm_before_sum(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
    T = input_ids.shape[1]
    return norm(tok[input_ids]) + pos[:T] + seg[token_type_ids], _padding_mask(attention_mask)


@wrong("bert_embeddings", "position|ids|pos")
def emb_positions_by_id(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
    return norm(tok[input_ids] + pos[input_ids] + seg[token_type_ids]), _padding_mask(
        attention_mask
    )


@wrong("bert_embeddings", "mask|polarity|padding")
def emb_mask_inverted(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
    T = input_ids.shape[1]
    x = norm(tok[input_ids] + pos[:T] + seg[token_type_ids])
    return x, (attention_mask == 0)[:, None, None, :]


@wrong("bert_embeddings", "shape|(B, 1, 1, T)|mask")
def emb_mask_2d(input_ids, token_type_ids, attention_mask, tok, pos, seg, norm):
    T = input_ids.shape[1]
    return norm(tok[input_ids] + pos[:T] + seg[token_type_ids]), attention_mask.bool()


def _special(vocab_size, special_ids):
    s = torch.zeros(vocab_size, dtype=torch.bool)
    s[list(special_ids)] = True
    return s


@wrong("mlm_corrupt", "label|-100")
def corrupt_labels_zero(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = _special(vocab_size, special_ids)
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special[input_ids]
    labels = torch.where(chosen, input_ids, torch.zeros_like(input_ids))
    inputs = input_ids.clone()
    inputs[chosen] = mask_id
    return inputs, labels


@wrong("mlm_corrupt", "special")
def corrupt_specials_too(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    chosen = torch.rand(input_ids.shape, generator=generator) < p
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    inputs = input_ids.clone()
    inputs[chosen & (torch.rand(input_ids.shape, generator=generator) < 0.8)] = mask_id
    return inputs, labels


@wrong("mlm_corrupt", "label|every|-100|chosen")
def corrupt_labels_everywhere(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = _special(vocab_size, special_ids)
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~special[input_ids]
    inputs = input_ids.clone()
    inputs[chosen & (torch.rand(input_ids.shape, generator=generator) < 0.8)] = mask_id
    return inputs, input_ids.clone()


@wrong("mlm_corrupt", "p|15|rate|fraction|share")
def corrupt_p_ignored(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    special = _special(vocab_size, special_ids)
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.5) & ~special[input_ids]
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    inputs = input_ids.clone()
    inputs[chosen & (torch.rand(input_ids.shape, generator=generator) < 0.8)] = mask_id
    return inputs, labels


@wrong("masked_lm_loss", "-100|ignore|label")
def loss_ignore_index_zero(hidden, labels, head):
    return F.cross_entropy(head(hidden).flatten(0, 1), labels.flatten().clamp(min=0),
                           ignore_index=0)  # fmt: skip


@wrong("masked_lm_loss", "softmax|log")
def loss_softmax_then_ce(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(torch.softmax(head(hidden[chosen]), -1), labels[chosen])


@wrong("masked_lm_loss", "flatten|(B, V, T)|class|dim")
def loss_logits_unflattened(hidden, labels, head):
    return F.cross_entropy(head(hidden), labels)


@wrong("cls_logits", "pooler|order|tanh")
def cls_tanh_before_pooler(hidden, pooler, classifier):
    return classifier(pooler(torch.tanh(hidden[:, 0])))


@wrong("cls_logits", "tanh|classifier|activation")
def cls_tanh_on_logits(hidden, pooler, classifier):
    return torch.tanh(classifier(pooler(hidden[:, 0])))


@wrong("cls_logits", "batch|dim|axis|token")
def cls_first_axis(hidden, pooler, classifier):
    return classifier(torch.tanh(pooler(hidden[0])))


# Added with issue 39's last generic class (h17): the MLM loss of scaled logits.
@wrong("masked_lm_loss", "scaled|temperature")
def loss_logits_over_temperature(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]) / 0.7, labels[chosen])


@wrong("masked_lm_loss", "scaled|sqrt\\(C\\)")
def loss_logits_over_sqrt_c(hidden, labels, head):
    chosen = labels != -100
    return F.cross_entropy(head(hidden[chosen]) / hidden.shape[-1] ** 0.5, labels[chosen])


@wrong("masked_lm_loss", "scaled|1 / V")
def loss_logits_over_vocabulary(hidden, labels, head):
    chosen = labels != -100
    logits = head(hidden[chosen])
    return F.cross_entropy(logits / logits.shape[-1], labels[chosen])
