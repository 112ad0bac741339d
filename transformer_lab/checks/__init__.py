"""Instant checks for the course's exercises, shared by the notebooks and the test suite.

Usage in a notebook::

    from transformer_lab import checks

    def softmax(x, dim=-1):
        ...

    checks.check_softmax(softmax)               # instant feedback
    checks.check_softmax(softmax, hidden=True)  # in a graded cell's hidden part: other seeds/shapes

Each ``check_<exercise>(student_fn, hidden=False)`` runs the student's function on several
seeded cases and edge cases, compares it with the package's reference computed in the same
process on the same inputs, and either prints one line (``✓ check_softmax passed: 9 cases.``)
or raises ``AssertionError`` whose message names the most likely mistake (softmax over the
wrong dimension, missing sqrt(d) scaling, mask applied after the softmax, ...). A function
that raises, returns None (untouched ``raise NotImplementedError``) or the wrong shape or
dtype gets a clear message too.

While the student's function runs, the reference for the graded thing is disabled (a call,
even under another name, fails the check), and every check first verifies that nothing it
relies on (``torch.allclose``, numpy's comparisons, the references, these checks) was
replaced by notebook code. See :mod:`transformer_lab.checks._guards`.

Exercises and signatures:

    check_softmax                        softmax(x, dim=-1)
    check_scaled_dot_product_attention   scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)
    check_self_attention                 self_attention(x, w_q, w_k, w_v) -> out | (out, weights)
    check_cross_attention                cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> out | (out, weights)
    check_split_heads                    split_heads(x, n_heads): (B, T, C) -> (B, H, T, D)
    check_merge_heads                    merge_heads(x): (B, H, T, D) -> (B, T, C)
    check_multi_head_attention           multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)
    check_sinusoidal_encoding            sinusoidal_encoding(n_positions, d_model, base=10000.0) -> (T, C)
    check_causal_mask                    causal_mask(T) -> (T, T) bool, True = may attend
    check_padding_mask                   padding_mask(lengths, S) -> (B, 1, 1, S) bool
    check_layer_norm                     layer_norm(x, weight, bias, eps=1e-5)
    check_self_attention_macs            self_attention_macs(T, C, D) -> int multiply-adds
    check_to_torch_mha                   to_torch_mha(w_q, w_k, w_v, w_o, n_heads) -> nn.MultiheadAttention
    check_shift_matrix                   shift_matrix(k, d_model, base=10000.0) -> (C, C), p_t M_k = p_(t+k)
    check_offset_dot_product             offset_dot_product(k, d_model, base=10000.0) -> p_t . p_(t+k), k's shape
    check_apply_rope                     apply_rope(x, base=10000.0) -> (..., T, D) rotated pairs (2i, 2i+1)
    check_future_leaks                   future_leaks(attend, T, C, seed=0) -> bool
    check_pad_and_truncate               pad_and_truncate(sequences, max_len, pad_id) -> (ids, lengths)
"""

from transformer_lab.checks import _core, _guards
from transformer_lab.checks import attention as _attention_checks
from transformer_lab.checks import blocks as _blocks_checks
from transformer_lab.checks import heads as _heads_checks
from transformer_lab.checks import masks as _masks_checks
from transformer_lab.checks import positional as _positional_checks
from transformer_lab.checks.attention import (
    check_cross_attention,
    check_scaled_dot_product_attention,
    check_self_attention,
    check_self_attention_macs,
    check_softmax,
)
from transformer_lab.checks.blocks import check_layer_norm
from transformer_lab.checks.heads import (
    check_merge_heads,
    check_multi_head_attention,
    check_split_heads,
    check_to_torch_mha,
)
from transformer_lab.checks.masks import (
    check_causal_mask,
    check_future_leaks,
    check_pad_and_truncate,
    check_padding_mask,
)
from transformer_lab.checks.positional import (
    check_apply_rope,
    check_offset_dot_product,
    check_shift_matrix,
    check_sinusoidal_encoding,
)

__all__ = [
    "check_softmax",
    "check_scaled_dot_product_attention",
    "check_self_attention",
    "check_cross_attention",
    "check_split_heads",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_sinusoidal_encoding",
    "check_causal_mask",
    "check_padding_mask",
    "check_layer_norm",
    "check_self_attention_macs",
    "check_to_torch_mha",
    "check_shift_matrix",
    "check_offset_dot_product",
    "check_apply_rope",
    "check_future_leaks",
    "check_pad_and_truncate",
    "verify_integrity",
]


def verify_integrity() -> None:
    """Raise AssertionError if notebook code replaced anything the checks rely on."""
    _guards.verify("verify_integrity")


# Under grading, hidden checks send their results to the grader (see _guards.hidden_entry).
for _name in __all__:
    if _name.startswith("check_"):
        globals()[_name] = _guards.hidden_entry(globals()[_name])

# Snapshot what the checks trust, then make every checks module read-only.
_guards.take_snapshot()
for _module in (
    _core,
    _attention_checks,
    _heads_checks,
    _masks_checks,
    _positional_checks,
    _blocks_checks,
    _guards,
):
    _guards.seal(_module.__name__)
del _module, _name
_guards.seal(__name__)
