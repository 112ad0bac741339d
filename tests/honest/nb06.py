"""Honest alternatives for notebook 06 (BERT)."""

from __future__ import annotations

from . import Alternative as A

ALTERNATIVES = {
    "pair_inputs_impl": [
        A(
            "Python lists padded first, three torch.tensor calls",
            """\
def pair_inputs(pairs, cls_id, sep_id, pad_id):
    ids = [[cls_id] + list(a) + [sep_id] + list(b) + [sep_id] for a, b in pairs]
    segs = [[0] * (len(a) + 2) + [1] * (len(b) + 1) for a, b in pairs]
    L = max(len(r) for r in ids)
    input_ids = [r + [pad_id] * (L - len(r)) for r in ids]
    token_type_ids = [s + [0] * (L - len(s)) for s in segs]
    attention_mask = [[1] * len(r) + [0] * (L - len(r)) for r in ids]
    return tuple(torch.tensor(t, dtype=torch.long) for t in (input_ids, token_type_ids, attention_mask))
""",
        ),
        A(
            "torch.nn.utils.rnn.pad_sequence on each of the three",
            """\
def pair_inputs(pairs, cls_id, sep_id, pad_id):
    from torch.nn.utils.rnn import pad_sequence

    ids, segs, att = [], [], []
    for a, b in pairs:
        row = torch.tensor([cls_id, *a, sep_id, *b, sep_id], dtype=torch.long)
        seg = torch.cat([torch.zeros(len(a) + 2), torch.ones(len(b) + 1)]).long()
        ids.append(row)
        segs.append(seg)
        att.append(torch.ones_like(row))
    return (pad_sequence(ids, batch_first=True, padding_value=pad_id),
            pad_sequence(segs, batch_first=True, padding_value=0),
            pad_sequence(att, batch_first=True, padding_value=0))
""",
        ),
        A(
            "rows built with torch.cat and F.pad",
            """\
def pair_inputs(pairs, cls_id, sep_id, pad_id):
    L = max(len(a) + len(b) + 3 for a, b in pairs)
    out_ids, out_seg, out_att = [], [], []
    for a, b in pairs:
        a, b = torch.tensor(a, dtype=torch.long), torch.tensor(b, dtype=torch.long)
        cls, sep = torch.tensor([cls_id]), torch.tensor([sep_id])
        row = torch.cat([cls, a, sep, b, sep])
        seg = torch.cat([torch.zeros(len(a) + 2, dtype=torch.long),
                         torch.ones(len(b) + 1, dtype=torch.long)])
        missing = L - len(row)
        out_ids.append(F.pad(row, (0, missing), value=pad_id))
        out_seg.append(F.pad(seg, (0, missing), value=0))
        out_att.append(F.pad(torch.ones(len(row), dtype=torch.long), (0, missing), value=0))
    return torch.stack(out_ids), torch.stack(out_seg), torch.stack(out_att)
""",
        ),
    ],
    "bert_embeddings_impl": [
        A(
            "F.embedding for the three tables, the mask computed directly",
            """\
def bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm):
    T = input_ids.shape[1]
    positions = torch.arange(T).unsqueeze(0)  # (1, T)
    x = F.embedding(input_ids, tok_table) + F.embedding(positions, pos_table) \\
        + F.embedding(token_type_ids, seg_table)
    mask = (attention_mask != 0)[:, None, None, :]
    return norm(x), mask
""",
        ),
        A(
            "one-hot rows times the tables (notebook 0's one-hot x W), the package's mask helper",
            """\
def bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm):
    B, T = input_ids.shape
    dtype = tok_table.dtype
    tok = F.one_hot(input_ids, tok_table.shape[0]).to(dtype) @ tok_table
    seg = F.one_hot(token_type_ids, seg_table.shape[0]).to(dtype) @ seg_table
    pos = pos_table[torch.arange(T)]
    return norm(tok + seg + pos), masks.padding_mask_from_attention_mask(attention_mask)
""",
        ),
        A(
            "index_select on flattened ids, segment and position added first",
            """\
def bert_embeddings(input_ids, token_type_ids, attention_mask, tok_table, pos_table, seg_table, norm):
    B, T = input_ids.shape
    C = tok_table.shape[1]
    tok = tok_table.index_select(0, input_ids.reshape(-1)).reshape(B, T, C)
    seg = seg_table.index_select(0, token_type_ids.reshape(-1)).reshape(B, T, C)
    x = (pos_table[:T] + seg) + tok
    mask = attention_mask.bool().reshape(B, 1, 1, T)
    return norm(x), mask
""",
        ),
    ],
    "mlm_corrupt_impl": [
        A(
            "the same draws in another order: fates first, then random ids, then the choice",
            """\
def mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    shape = input_ids.shape
    u = torch.rand(shape, generator=generator)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in special_ids])
    random_ids = allowed[torch.randint(len(allowed), shape, generator=generator)]
    chosen = torch.rand(shape, generator=generator) < p
    chosen &= ~torch.isin(input_ids, torch.tensor(special_ids))
    labels = input_ids.masked_fill(~chosen, -100)
    inputs = input_ids.clone()
    inputs[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, labels
""",
        ),
        A(
            "torch.bernoulli for every decision (Hugging Face's collator: 0.8 mask, then 0.5 of the rest)",
            """\
def mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    shape = input_ids.shape
    special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = torch.bernoulli(torch.full(shape, p), generator=generator).bool() & ~special
    masked = torch.bernoulli(torch.full(shape, 0.8), generator=generator).bool() & chosen
    randomised = torch.bernoulli(torch.full(shape, 0.5), generator=generator).bool() & chosen & ~masked
    allowed = torch.tensor(sorted(set(range(vocab_size)) - set(special_ids)))
    random_ids = allowed[torch.randint(0, len(allowed), shape, generator=generator)]
    inputs = torch.where(masked, mask_id, input_ids)
    inputs = torch.where(randomised, random_ids, inputs)
    labels = torch.where(chosen, input_ids, -100)
    return inputs, labels
""",
        ),
        A(
            "draws only as many fates and random ids as tokens were chosen",
            """\
def mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    is_special = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~is_special
    n = int(chosen.sum())
    fate = torch.rand(n, generator=generator)  # one number per chosen token
    allowed = torch.tensor([i for i in range(vocab_size) if i not in special_ids])
    replacement = allowed[torch.randint(len(allowed), (n,), generator=generator)]
    picked = input_ids[chosen]
    new = torch.where(fate < 0.8, torch.full_like(picked, mask_id),
                      torch.where(fate < 0.9, replacement, picked))
    inputs = input_ids.clone()
    inputs[chosen] = new
    labels = torch.full_like(input_ids, -100)
    labels[chosen] = picked
    return inputs, labels
""",
        ),
        A(
            "torch.multinomial for the fates (0.8/0.1/0.1) and for the random ids (weights 0 on specials)",
            """\
def mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
    B, T = input_ids.shape
    never = torch.isin(input_ids, torch.tensor(special_ids))
    chosen = (torch.rand(B, T, generator=generator) < p) & ~never
    fate = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), B * T, replacement=True,
                             generator=generator).view(B, T)  # 0 mask, 1 random, 2 keep
    weights = torch.ones(vocab_size)
    weights[list(special_ids)] = 0.0
    random_ids = torch.multinomial(weights, B * T, replacement=True, generator=generator).view(B, T)
    inputs = input_ids.clone()
    inputs[chosen & (fate == 0)] = mask_id
    inputs[chosen & (fate == 1)] = random_ids[chosen & (fate == 1)]
    labels = torch.where(chosen, input_ids, torch.tensor(-100))
    return inputs, labels
""",
        ),
    ],
    "masked_lm_loss_impl": [
        A(
            "summed cross-entropy divided by the number of labelled positions",
            """\
def masked_lm_loss(hidden, labels, head):
    keep = labels != -100
    logits = head(hidden[keep])  # (M, V)
    return F.cross_entropy(logits, labels[keep], reduction="sum") / keep.sum()
""",
        ),
        A(
            "log_softmax and gather",
            """\
def masked_lm_loss(hidden, labels, head):
    rows = labels.ne(-100)
    logp = torch.log_softmax(head(hidden[rows]), dim=-1)  # (M, V)
    return -logp.gather(1, labels[rows].unsqueeze(1)).mean()
""",
        ),
        A(
            "positions from nonzero(as_tuple=True), nn.CrossEntropyLoss",
            """\
def masked_lm_loss(hidden, labels, head):
    b, t = (labels != -100).nonzero(as_tuple=True)
    return nn.CrossEntropyLoss()(head(hidden[b, t]), labels[b, t])
""",
        ),
    ],
    "cls_logits_impl": [
        A(
            "F.linear with the modules' weights",
            """\
def cls_logits(hidden, pooler, classifier):
    pooled = torch.tanh(F.linear(hidden[:, 0, :], pooler.weight, pooler.bias))
    return F.linear(pooled, classifier.weight, classifier.bias)
""",
        ),
        A(
            "select(1, 0) and Tensor.tanh()",
            """\
def cls_logits(hidden, pooler, classifier):
    return classifier(pooler(hidden.select(1, 0)).tanh())
""",
        ),
        A(
            "keeps a length-1 axis, squeezes at the end",
            """\
def cls_logits(hidden, pooler, classifier):
    return classifier(nn.Tanh()(pooler(hidden[:, :1]))).squeeze(1)
""",
        ),
    ],
}
