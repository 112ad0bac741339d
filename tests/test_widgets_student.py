"""Explorers that run the student's own function beside the reference.

For every explorer whose idea is an exercise: a correct implementation (written here, in the
student's style) is never marked different and its diagnosis says it passes; a realistic wrong
one is marked different while the sliders move, and the check's diagnosis names it under the
plot; a function that raises, is not implemented yet, returns None or the wrong shape gives one
line in the widget and never a traceback.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from widget_helpers import changes_picture

from transformer_lab import widgets as tw


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


# --------------------------------------------------------------------------- student code
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def softmax_dim0(x, dim=-1):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=0, keepdim=True)


def softmax_naive(x, dim=-1):  # NaN on an all -inf row
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def sdpa(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores)
    return w @ v, w


def sdpa_unscaled(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = softmax(scores)
    return w @ v, w


def self_attention(x, w_q, w_k, w_v):
    return sdpa(x @ w_q, x @ w_k, x @ w_v)


def self_attention_keys_softmax(x, w_q, w_k, w_v):  # softmax over the queries
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2)
    return w @ v, w


def mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T, C = x_q.shape
    S, D = x_kv.shape[1], C // n_heads
    q = (x_q @ w_q).view(B, T, n_heads, D).transpose(1, 2)
    k = (x_kv @ w_k).view(B, S, n_heads, D).transpose(1, 2)
    v = (x_kv @ w_v).view(B, S, n_heads, D).transpose(1, 2)
    out, w = sdpa(q, k, v, mask)
    return out.transpose(1, 2).reshape(B, T, C) @ w_o, w


def mha_no_transpose(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    B, T, C = x_q.shape
    S, D = x_kv.shape[1], C // n_heads
    q = (x_q @ w_q).reshape(B, n_heads, T, D)
    k = (x_kv @ w_k).reshape(B, n_heads, S, D)
    v = (x_kv @ w_v).reshape(B, n_heads, S, D)
    out, w = sdpa(q, k, v, mask)
    return out.transpose(1, 2).reshape(B, T, C) @ w_o, w


def sinusoidal(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, but received d_model={d_model}.")
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]
    angles = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe.float()


def sinusoidal_half_exponent(n_positions, d_model, base=10000.0):
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]
    angles = t * base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles).float(), torch.cos(angles).float()
    return pe


def causal_mask(T):
    p = torch.arange(T)
    return p[None, :] <= p[:, None]


def causal_mask_strict(T):
    p = torch.arange(T)
    return p[None, :] < p[:, None]


def padding_mask(lengths, S):
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, None, :]


def macs(T, C, D):
    return 3 * T * C * D + 2 * T * T * D


def macs_one_product(T, C, D):
    return 3 * T * C * D + T * T * D


def split_heads(x, n_heads):
    B, T, C = x.shape
    if C % n_heads:
        raise ValueError(f"C={C} is not divisible by n_heads={n_heads}.")
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)


def split_heads_reshape(x, n_heads):
    B, T, C = x.shape
    return x.reshape(B, n_heads, T, C // n_heads)


def merge_heads(x):
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)


def merge_heads_reshape(x):
    B, H, T, D = x.shape
    return x.reshape(B, T, H * D)


def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, but received D={D}.")
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def apply_rope_backwards(x, base=10000.0):
    T, D = x.shape[-2:]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = -torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return sdpa(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)


def cross_attention_no_mask(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return sdpa(x_q @ w_q, x_kv @ w_k, x_kv @ w_v)


def future_leaks(attend, T, C, seed=0):
    x = torch.randn(T, C, generator=torch.Generator().manual_seed(seed))
    base = attend(x)
    for j in range(1, T):
        moved = x.clone()
        moved[j] += 1.0
        if not torch.equal(attend(moved)[:j], base[:j]):
            return True
    return False


def future_leaks_never(attend, T, C, seed=0):
    return False


# explorer, argument, correct, wrong, {control: value} to drive, words the diagnosis must contain
CASES = [
    ("softmax_explorer", "softmax", softmax, softmax_dim0, {"temperature": 0.3, "shift": 2.0},
     "dimension 0"),
    ("scaling_explorer", "scaled_dot_product_attention", sdpa, sdpa_unscaled, {"d_k": 256},
     "scaling"),
    ("attention_explorer", "scaled_dot_product_attention", sdpa, sdpa_unscaled,
     {"query": 3, "scale": 1.0}, "scaling"),
    ("attention_explorer", "self_attention", self_attention, self_attention_keys_softmax,
     {"query": 2}, ""),
    ("heads_explorer", "multi_head_attention", mha, mha_no_transpose, {"n_heads": 2, "head": 1},
     "transpose"),
    ("positional_explorer", "sinusoidal_encoding", sinusoidal, sinusoidal_half_exponent,
     {"d_model": 16, "position": 9}, "factor of 2"),
    ("mask_explorer", "causal_mask", causal_mask, causal_mask_strict, {"length_1": 3}, ""),
    ("mask_explorer", "padding_mask", padding_mask, lambda lengths, S: ~padding_mask(lengths, S),
     {"length_1": 3}, ""),
    ("equivariance_explorer", "self_attention", self_attention, self_attention_keys_softmax,
     {"shuffle": 5, "positions": True}, ""),
    ("cost_explorer", "self_attention_macs", macs, macs_one_product, {"T": 64, "C": 32}, ""),
    ("head_layout_explorer", "split_heads", split_heads, split_heads_reshape, {"n_heads": 4},
     "transpose"),
    ("head_layout_explorer", "merge_heads", merge_heads, merge_heads_reshape, {"n_heads": 4},
     "transpose"),
    ("position_kinds_explorer", "sinusoidal_encoding", sinusoidal, sinusoidal_half_exponent,
     {"strength": 2.0}, "factor of 2"),
    ("rope_explorer", "apply_rope", apply_rope, apply_rope_backwards, {"t": 12, "pair": 2},
     "wrong way"),
    ("cross_attention_explorer", "cross_attention", cross_attention, cross_attention_no_mask,
     {"source_length": 4, "query": 2}, "mask"),
    ("masked_row_explorer", "softmax", softmax, softmax_dim0, {"softmax": "yours", "layer": 2},
     "dimension 0"),
    ("leak_explorer", "future_leaks", future_leaks, future_leaks_never,
     {"layer": "mask after the softmax", "token": 6}, "leaks"),
]  # fmt: skip
IDS = [f"{c[0]}-{c[1]}" for c in CASES]


def build(name, argument, fn):
    return getattr(tw, name)(**{argument: fn})


def marked(ex) -> bool:
    """Is any entry marked as differing (``differs``, or ``differs_merged`` for merge_heads)?"""
    st = ex.state()
    return any(bool(np.any(v)) for k, v in st.items() if k.startswith("differs"))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_correct_function_is_never_marked_and_passes(case):
    name, argument, right, _, moves, _ = case
    ex = build(name, argument, right)
    assert ex.state()["error"] is None
    assert not marked(ex)
    assert "passes" in ex.footer.value, ex.footer.value
    for control, value in moves.items():
        ex.controls[control].value = value
        st = ex.state()
        assert st["error"] is None and not marked(ex), (control, value, ex.readout.value)
        assert st["max_diff"] < 1e-3
    assert "differs" not in ex.readout.value


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_wrong_function_is_marked_different_and_diagnosed(case):
    name, argument, right, wrong, moves, words = case
    ex = build(name, argument, wrong)
    seen = marked(ex)
    for control, value in moves.items():
        changes_picture(ex, control, value)
        seen = seen or marked(ex)
        assert ex.state()["error"] is None
    assert seen and marked(ex), ex.readout.value
    assert "differs" in ex.readout.value or "wrong" in ex.readout.value
    assert "passes" not in ex.footer.value
    assert "check_" in ex.footer.value and words in ex.footer.value, ex.footer.value


def _raises(*args, **kwargs):
    raise RuntimeError("shape '[2, 5, 5, 2]' is invalid for input of size 30\nsecond line")


def _not_implemented(*args, **kwargs):
    raise NotImplementedError()


def _returns_none(*args, **kwargs):
    return None


def _wrong_shape(*args, **kwargs):
    return torch.zeros(3, 1, 2)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize(
    "broken, words",
    [
        (_raises, "raised RuntimeError: shape '[2, 5, 5, 2]' is invalid"),
        (_not_implemented, "not implemented yet"),
        (_returns_none, "None"),
        (_wrong_shape, ""),
    ],
    ids=["raises", "not-implemented", "none", "wrong-shape"],
)
def test_a_broken_function_gives_one_line_and_no_traceback(case, broken, words):
    name, argument, _, _, moves, _ = case
    ex = build(name, argument, broken)  # must not raise
    for control, value in moves.items():
        ex.controls[control].value = value  # must not raise either
    error = ex.state()["error"]
    assert error and "\n" not in error and len(error) < 240, error
    assert words in error, error
    assert "Traceback" not in ex.readout.value and "second line" not in ex.readout.value
    assert "passes" not in ex.footer.value
    assert ex.image.value[:4] == b"\x89PNG"


def test_the_student_function_is_optional_and_must_be_callable():
    with pytest.raises(
        TypeError, match=r"softmax must be your softmax function \(or None\), but received list"
    ):
        tw.softmax_explorer([1.0, 2.0])
    with pytest.raises(TypeError, match=r"apply_rope must be your apply_rope function"):
        tw.rope_explorer(apply_rope=torch.zeros(3))
    with pytest.raises(ValueError, match=r"either scaled_dot_product_attention or self_attention"):
        tw.attention_explorer(sdpa, self_attention=self_attention)


def test_the_student_function_gets_copies_of_the_explorers_inputs():
    def mutating_softmax(x, dim=-1):
        out = softmax(x, dim)
        x.zero_()  # a student who computes in place
        return out

    ex = tw.softmax_explorer(mutating_softmax, scores=[3.0, 1.0, 0.0])
    before = ex.state()["scores"]
    ex.controls["temperature"].value = 0.5
    np.testing.assert_allclose(ex.state()["scores"], before)
    assert not marked(ex)


def test_a_softmax_that_gives_nan_on_an_empty_row_is_marked_where_the_nan_spreads():
    ex = tw.masked_row_explorer(softmax_naive)
    ex.controls["softmax"].value = "yours"
    st = ex.state()
    assert st["error"] is None
    np.testing.assert_array_equal(st["differs"], st["nan"])  # marked exactly where NaN is
    assert st["nan"][0, 0] and st["nan"][1:].all()
    assert "NaN in 6 of 6 tokens" in ex.readout.value
    assert "passes" not in ex.footer.value  # check_softmax requires zeros on an all -inf slice


def test_a_wrong_softmax_shows_beside_the_reference_bars():
    ex = tw.softmax_explorer(softmax_dim0, scores=[2.0, 1.0, 0.0])
    st = ex.state()
    bars = ex.figure.axes[1].patches
    reference, yours = bars[:3], bars[3:6]
    np.testing.assert_allclose([b.get_height() for b in reference], st["probs"], rtol=1e-5)
    np.testing.assert_allclose([b.get_height() for b in yours], st["yours"], rtol=1e-5)
    assert all(b.get_facecolor()[:3] != reference[0].get_facecolor()[:3] for b in yours)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_under_grading_the_student_function_is_never_called(case, monkeypatch):
    name, argument, *_ = case
    calls = []

    def spy(*args, **kwargs):
        calls.append(args)
        raise AssertionError("called under grading")

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    out = build(name, argument, spy)
    assert isinstance(out, tw.GradingPlaceholder) and calls == []
