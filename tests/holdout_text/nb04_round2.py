"""Holdout for notebook 04 (second round), written from
notebooks/04_masking_and_cross_attention/04_masking_and_cross_attention.ipynb alone (without
reading the checks)."""

import math

import torch

from tests.holdout._harness import Mistake, collector
from transformer_lab import scaled_dot_product_attention

MISTAKES: list[Mistake] = []
CORRECT: list[Mistake] = []
wrong = collector(MISTAKES, "04")
right = collector(CORRECT, "04")
# First shot, written without reading the checks: 31 of 41 named, 2 generic, 6 misleading,
# 2 passed; 40 of 41 named after the round's check work (29 November).
NAMED_AT_LEAST = 0.97


# ---------------------------------------------------------------------------------------------
# Exercise 1: causal_mask(T) -> (T, T) bool, True where key s <= query t
# ---------------------------------------------------------------------------------------------


@wrong(
    "causal_mask", "upper|transpos|triu|above the diagonal|lower triangle|later keys|future keys"
)
def causal_mask_upper_triangle(T):
    return torch.ones(T, T, dtype=torch.bool).triu()  # query t sees keys t..T-1


@wrong("causal_mask", "diagonal|itself|own|strict|s <= t|s < t")
def causal_mask_without_diagonal(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=-1)  # query 0 sees nothing


@wrong("causal_mask", "diagonal|off-by-one|next|one future|s <= t|one position")
def causal_mask_sees_next_token(T):
    return torch.ones(T, T, dtype=torch.bool).tril(diagonal=1)


@wrong("causal_mask", "bool|dtype|float")
def causal_mask_float_ones(T):
    return torch.tril(torch.ones(T, T))  # 1.0 / 0.0 instead of True / False


@wrong("causal_mask", "invert|opposite|convention|negat|True = may|flip|swap")
def causal_mask_true_means_masked(T):
    return ~torch.ones(T, T, dtype=torch.bool).tril()  # True where the key is in the future


@wrong("causal_mask", "shape|dimension|(T, T)")
def causal_mask_with_batch_and_head_dims(T):
    # (1, 1, T, T), "ready to broadcast"
    return torch.ones(T, T, dtype=torch.bool).tril()[None, None]


_PRECOMPUTED = torch.ones(8, 8, dtype=torch.bool).tril()


@wrong("causal_mask", "shape|size|length|(T, T)")
def causal_mask_sliced_from_fixed_table(T):
    return _PRECOMPUTED[:T, :T]  # right for T <= 8, too small beyond


@right("causal_mask")
def causal_mask_by_comparing_positions(T):
    positions = torch.arange(T)
    return positions[None, :] <= positions[:, None]  # key s <= query t


# ---------------------------------------------------------------------------------------------
# Exercise 2: future_leaks(attend, T, C, seed=0) -> Python bool
# ---------------------------------------------------------------------------------------------


@wrong("future_leaks", "exact|toleran|atol|strict|allclose|faint|small")
def future_leaks_default_allclose(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.allclose(attend(changed)[:j], base[:j]):  # default rtol=1e-5 hides faint leaks
            return True
    return False


@wrong("future_leaks", "[:j]|position j|itself|includ|off-by-one|changed token|before j")
def future_leaks_compares_up_to_and_including_j(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[: j + 1], base[: j + 1]):  # output j may depend on x_j
            return True
    return False


@wrong("future_leaks", "[:j]|off-by-one|j - 1|j-1|just before|previous position|before j")
def future_leaks_skips_position_just_before_j(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[: j - 1], base[: j - 1]):  # never looks at output j-1
            return True
    return False


@wrong(
    "future_leaks",
    "every j|each j|all j|only the last|every token|each token|every position|all positions",
)
def future_leaks_changes_only_last_token(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    changed = x.clone()
    changed[T - 1] = torch.randn(C, generator=g)
    return not torch.equal(attend(changed)[: T - 1], attend(x)[: T - 1])


@wrong(
    "future_leaks", "every j|each j|all j|last token|every token|each token|every position|range"
)
def future_leaks_loop_stops_before_last_token(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T - 1):  # range end off by one: the last token is never changed
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[:j], base[:j]):
            return True
    return False


@wrong(
    "future_leaks",
    "every position|all positions|each t|every t|position 0|first output|earlier outputs|every output",
)
def future_leaks_watches_only_first_output(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(changed)[0], base[0]):  # only output 0 is compared
            return True
    return False


@wrong("future_leaks", "bool|Python|type")
def future_leaks_returns_tensor(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    leaked = torch.tensor(False)
    for j in range(1, T):
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        leaked = leaked | (attend(changed)[:j] != base[:j]).any()
    return leaked  # a 0-d bool tensor, not a Python bool


@wrong("future_leaks", "clone|copy|in place|in-place|alias|same tensor|modif")
def future_leaks_changes_x_itself(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    for j in range(1, T):
        x_changed = x  # no clone: x changes too, so both sides are always equal
        x_changed[j] = torch.randn(C, generator=g)
        if not torch.equal(attend(x)[:j], attend(x_changed)[:j]):
            return True
    return False


@wrong("future_leaks", "row|column|feature")
def future_leaks_replaces_a_column(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    for j in range(1, min(T, C)):
        changed = x.clone()
        changed[:, j] = torch.randn(T, generator=g)  # feature j of every token, not token j
        if not torch.equal(attend(changed)[:j], base[:j]):
            return True
    return False


@right("future_leaks")
def future_leaks_strict_allclose_over_every_j(attend, T, C, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, C, generator=g)
    base = attend(x)
    leaks = False
    for j in range(T):  # j = 0 has no earlier outputs; harmless
        changed = x.clone()
        changed[j] = torch.randn(C, generator=g)
        if not torch.allclose(attend(changed)[:j], base[:j], atol=1e-7, rtol=0):
            leaks = True
    return leaks


# ---------------------------------------------------------------------------------------------
# Exercise 3: padding_mask(lengths, S) -> (B, 1, 1, S) bool, True at s < length_b
# ---------------------------------------------------------------------------------------------


@wrong("padding_mask", "off-by-one|one extra|<=|one position|one too many|s < length|first padding")
def padding_mask_less_or_equal(lengths, S):
    positions = torch.arange(S)
    return (positions[None, :] <= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "shape|(B, 1, 1, S)|dimension|broadcast|unsqueeze")
def padding_mask_returns_b_by_s(lengths, S):
    return torch.arange(S)[None, :] < lengths[:, None]  # (B, S)


@wrong("padding_mask", "invert|opposite|negat|swap|True at|convention|True =")
def padding_mask_true_at_padding(lengths, S):
    return (torch.arange(S)[None, :] >= lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "padded length|longest|max|ignor|width|too short|too narrow")
def padding_mask_width_from_longest_length(lengths, S):
    width = int(lengths.max())  # ignores S: too narrow when every sequence is shorter than S
    return (torch.arange(width)[None, :] < lengths[:, None])[:, None, None, :]


@wrong("padding_mask", "bool|dtype|float|long")
def padding_mask_as_integers(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None]).long()[:, None, None, :]


@wrong("padding_mask", "transpos|order|axis|axes|swap|scrambl|reshape|view")
def padding_mask_reshaped_from_s_by_b(lengths, S):
    m = torch.arange(S)[:, None] < lengths[None, :]  # (S, B)
    # reshape, not transpose: the values land in the wrong places
    return m.reshape(len(lengths), 1, 1, S)


@wrong("padding_mask", "left|beginning|start of|at the start")
def padding_mask_assumes_left_padding(lengths, S):
    return (torch.arange(S)[None, :] >= S - lengths[:, None])[:, None, None, :]


@right("padding_mask")
def padding_mask_filled_in_a_loop(lengths, S):
    mask = torch.zeros(len(lengths), 1, 1, S, dtype=torch.bool)
    for b, n in enumerate(lengths.tolist()):
        mask[b, 0, 0, :n] = True
    return mask


# ---------------------------------------------------------------------------------------------
# Exercise 4: pad_and_truncate(sequences, max_len, pad_id) -> (ids (B, L) long, lengths (B,) long)
# ---------------------------------------------------------------------------------------------


def _check_max_len(max_len):
    if max_len < 1:
        raise ValueError(f"max_len must be at least 1, but received {max_len}.")


def _rectangle(truncated, pad_id, dtype=torch.long):
    L = max((len(s) for s in truncated), default=0)
    ids = torch.full((len(truncated), L), pad_id, dtype=dtype)
    for b, s in enumerate(truncated):
        ids[b, : len(s)] = torch.tensor(s, dtype=dtype)
    return ids, torch.tensor([len(s) for s in truncated], dtype=torch.long)


@wrong("pad_and_truncate", "longest|width|columns|too wide|shape")
def pad_and_truncate_always_to_max_len(sequences, max_len, pad_id):
    _check_max_len(max_len)
    ids = torch.full((len(sequences), max_len), pad_id, dtype=torch.long)
    lengths = []
    for b, s in enumerate(sequences):
        s = s[:max_len]
        ids[b, : len(s)] = torch.tensor(s, dtype=torch.long)
        lengths.append(len(s))
    return ids, torch.tensor(lengths, dtype=torch.long)


@wrong(
    "pad_and_truncate",
    "after truncation|before truncation|original length|untruncated|truncated length",
)
def pad_and_truncate_reports_original_lengths(sequences, max_len, pad_id):
    _check_max_len(max_len)
    ids, _ = _rectangle([list(s[:max_len]) for s in sequences], pad_id)
    return ids, torch.tensor([len(s) for s in sequences], dtype=torch.long)


@wrong("pad_and_truncate", "first|last|beginning|end of")
def pad_and_truncate_keeps_last_tokens(sequences, max_len, pad_id):
    _check_max_len(max_len)
    return _rectangle(
        [list(s[-max_len:]) if len(s) > max_len else list(s) for s in sequences], pad_id
    )


@wrong("pad_and_truncate", "ValueError|raise|max_len < 1|validat|at least 1|positive")
def pad_and_truncate_no_validation(sequences, max_len, pad_id):
    return _rectangle([list(s[:max_len]) for s in sequences], pad_id)


@wrong("pad_and_truncate", "name|value|message|received")
def pad_and_truncate_error_without_value(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError("max_len must be positive")
    return _rectangle([list(s[:max_len]) for s in sequences], pad_id)


@wrong("pad_and_truncate", "pad_id|padding id|pad value|padding value")
def pad_and_truncate_pads_with_zero(sequences, max_len, pad_id):
    _check_max_len(max_len)
    return _rectangle([list(s[:max_len]) for s in sequences], 0)  # the examples use pad_id=0


@wrong("pad_and_truncate", "left|front|beginning|start")
def pad_and_truncate_pads_on_the_left(sequences, max_len, pad_id):
    _check_max_len(max_len)
    truncated = [list(s[:max_len]) for s in sequences]
    L = max((len(s) for s in truncated), default=0)
    ids = torch.tensor([[pad_id] * (L - len(s)) + s for s in truncated], dtype=torch.long).reshape(
        len(truncated), L
    )
    return ids, torch.tensor([len(s) for s in truncated], dtype=torch.long)


@wrong("pad_and_truncate", "mutat|in place|in-place|modif|input|caller|copy")
def pad_and_truncate_edits_the_callers_lists(sequences, max_len, pad_id):
    _check_max_len(max_len)
    lengths = []
    for s in sequences:
        del s[max_len:]  # truncates the caller's list
        lengths.append(len(s))
    L = max(lengths, default=0)
    for s in sequences:
        s.extend([pad_id] * (L - len(s)))  # ... and pads it
    return torch.tensor(sequences, dtype=torch.long).reshape(len(sequences), L), torch.tensor(
        lengths, dtype=torch.long
    )


@wrong("pad_and_truncate", "empty|length 0|zero length|no tokens|float|dtype")
def pad_and_truncate_with_pad_sequence(sequences, max_len, pad_id):
    _check_max_len(max_len)
    tensors = [torch.tensor(s[:max_len]) for s in sequences]  # torch.tensor([]) is float32
    ids = torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=pad_id)
    return ids, torch.tensor([len(t) for t in tensors])


@right("pad_and_truncate")
def pad_and_truncate_list_comprehensions(sequences, max_len, pad_id):
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got max_len={max_len}")
    cut = [list(s)[:max_len] for s in sequences]
    L = max(map(len, cut), default=0)
    rows = [s + [pad_id] * (L - len(s)) for s in cut]
    ids = torch.tensor(rows, dtype=torch.long).reshape(len(rows), L)
    return ids, torch.tensor([len(s) for s in cut], dtype=torch.long)


# ---------------------------------------------------------------------------------------------
# Exercise 5: cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> (out (B, T, Dv), weights (B, T, S))
# ---------------------------------------------------------------------------------------------


@wrong("cross_attention", "decoder|x_q|encoder|swap|Q and K|queries from")
def cross_attention_queries_and_keys_from_encoder(x_q, x_kv, w_q, w_k, w_v, mask=None):
    # "the encoder's output is copied twice to construct Q and K", V from the decoder
    q, k, v = x_kv @ w_q, x_kv @ w_k, x_q @ w_v
    return scaled_dot_product_attention(q, k, v, mask)


@wrong("cross_attention", "values|x_kv|V from|encoder")
def cross_attention_values_from_queries_side(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_q @ w_v
    return scaled_dot_product_attention(q, k, v, mask)


@wrong("cross_attention", "sqrt|scale|scaling|temperature|√")
def cross_attention_unscaled_scores(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1)  # no / sqrt(D)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


@wrong("cross_attention", "invert|negat|opposite|True = may|convention")
def cross_attention_inverts_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    return scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)


@wrong("cross_attention", "mask|padding")
def cross_attention_ignores_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    return scaled_dot_product_attention(q, k, v)


@wrong(
    "cross_attention",
    "-inf|infinity|before the softmax|after the softmax|sum to one|sum to 1|renormal",
)
def cross_attention_masks_after_softmax(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask  # zeroed after the softmax: rows no longer sum to one
    return weights @ v, weights


@wrong("cross_attention", "causal|future|triangular|lower")
def cross_attention_with_causal_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    T, S = x_q.shape[-2], x_kv.shape[-2]
    causal = torch.ones(T, S, dtype=torch.bool).tril()  # the decoder must not peek... (not here)
    full = causal if mask is None else causal & mask
    return scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, full)


@wrong(
    "cross_attention", "NaN|nan|all masked|fully masked|every key|no key|nothing to attend|empty"
)
def cross_attention_torch_softmax_nan_rows(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # a row with every key masked becomes NaN
    return weights @ v, weights


@wrong("cross_attention", "dim|axis|normalis|normaliz|sum to one|sum to 1|rows|over the keys")
def cross_attention_softmax_over_queries(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q, k, v = x_q @ w_q, x_kv @ w_k, x_kv @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=1).nan_to_num(0.0)  # over T, the queries
    return weights @ v, weights


@right("cross_attention")
def cross_attention_einsum_safe_softmax(x_q, x_kv, w_q, w_k, w_v, mask=None):
    q = torch.einsum("btc,cd->btd", x_q, w_q)
    k = torch.einsum("bsc,cd->bsd", x_kv, w_k)
    v = torch.einsum("bsc,cd->bsd", x_kv, w_v)
    scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total > 0, total, torch.ones_like(total))
    return torch.einsum("bts,bsd->btd", weights, v), weights
