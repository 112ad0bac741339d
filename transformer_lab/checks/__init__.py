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
or raises :class:`CheckFailed` (an ``AssertionError``) with one short message that names the
most likely mistake (softmax over the wrong dimension, missing sqrt(d) scaling, mask applied
after the softmax, ...). IPython shows the student's line and that message, without the checks'
frames. A function that raises, returns None (untouched ``raise NotImplementedError``), the
wrong tuple, shape, dtype or device, or changes its inputs gets a clear message too.

The diagnosis combines each exercise's catalogue of known mistakes with generic evidence that
holds for any tensor exercise (transposed axes, a constant factor such as sqrt(D), an ignored
argument, right for the first batch element only, wrong only on fully masked rows, shifted by
one, ...): see :mod:`transformer_lab.checks._diagnose`.

For explorers and tools, the verdict as data (never raises for the student's code)::

    checks.diagnose(exercise, student_fn, case=None) -> checks.Diagnosis | None
        exercise: a key of checks.EXERCISES ("softmax", "scaled_dot_product_attention", ...)
        case: None (run the instant check), or the inputs of one call: a tuple of positional
              arguments or {"args": (...), "kwargs": {...}}
        Diagnosis(message, named, case, student, reference): the check's verdict, whether it
              names a mistake, and the outputs of the failing case (or of `case`).

While the student's function runs, the reference for the graded thing is disabled (a call,
even under another name, fails the check), and every check first verifies that nothing it
relies on (``torch.allclose``, numpy's comparisons, the references, these checks) was
replaced by notebook code. See :mod:`transformer_lab.checks._guards`.

Exercises and signatures:

    check_softmax                        softmax(x, dim=-1)
    check_scaled_dot_product_attention   scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)
    check_self_attention                 self_attention(x, w_q, w_k, w_v) -> (out, weights)
    check_cross_attention                cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None) -> (out, weights)
    check_split_heads                    split_heads(x, n_heads): (B, T, C) -> (B, H, T, D)
    check_merge_heads                    merge_heads(x): (B, H, T, D) -> (B, T, C)
    check_multi_head_attention           multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)
                                             -> (out, weights)
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
    check_patchify                       patchify(images, patch_size) -> (B, N, C*P*P)
    check_linear_to_conv                 linear_to_conv(linear, patch_size, n_channels) -> nn.Conv2d
    check_vit_embed                      vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N+1, C)
    check_sinusoidal_2d                  sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0) -> (N, C)
    check_attention_rollout              attention_rollout(attentions) -> (B, T, T)
    check_merge_softmax_stats            merge_softmax_stats(m1, l1, o1, m2, l2, o2) -> (m, l, o)
    check_tiled_attention                tiled_attention(q, k, v, block_size, mask=None) -> (..., T, Dv)
    check_grouped_query_attention        grouped_query_attention(q, k, v) -> (B, H, T, D)
    check_kv_cache_bytes                 kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, ...) -> int
    check_sliding_window_mask            sliding_window_mask(T, window) -> (T, T) bool
"""

from transformer_lab import attention as _attention_ref
from transformer_lab import heads as _heads_ref
from transformer_lab import masks as _masks_ref
from transformer_lab import positional as _positional_ref
from transformer_lab.checks import (
    _api,
    _attend,
    _core,
    _diagnose,
    _evidence,
    _expect,
    _guards,
    _integrity,
    _messages,
)
from transformer_lab.checks import attention as _attention_checks
from transformer_lab.checks import batching as _batching_checks
from transformer_lab.checks import bert as _bert_checks
from transformer_lab.checks import bert_evidence as _bert_evidence
from transformer_lab.checks import bert_heads as _bert_heads_checks
from transformer_lab.checks import bert_heads_evidence as _bert_heads_evidence
from transformer_lab.checks import bert_masking as _bert_masking_checks
from transformer_lab.checks import block_trace as _block_trace
from transformer_lab.checks import blocks as _blocks_checks
from transformer_lab.checks import blocks_evidence as _blocks_evidence
from transformer_lab.checks import cost as _cost_checks
from transformer_lab.checks import decoder as _decoder_checks
from transformer_lab.checks import exercise_hints as _exercise_hints
from transformer_lab.checks import fallback as _fallback
from transformer_lab.checks import gpt as _gpt_checks
from transformer_lab.checks import gpt_mistakes as _gpt_mistakes_checks
from transformer_lab.checks import gpt_model as _gpt_model_checks
from transformer_lab.checks import heads as _heads_checks
from transformer_lab.checks import kv_cache as _kv_cache_checks
from transformer_lab.checks import leaks as _leak_checks
from transformer_lab.checks import lm_loss as _lm_loss_checks
from transformer_lab.checks import long_context as _long_context_checks
from transformer_lab.checks import masks as _masks_checks
from transformer_lab.checks import merge_evidence as _merge_evidence
from transformer_lab.checks import mha as _mha_checks
from transformer_lab.checks import patch_conv as _patch_conv_checks
from transformer_lab.checks import patches as _patches_checks
from transformer_lab.checks import positional as _positional_checks
from transformer_lab.checks import projections as _projection_checks
from transformer_lab.checks import residual as _residual_checks
from transformer_lab.checks import rollout as _rollout_checks
from transformer_lab.checks import rope as _rope_checks
from transformer_lab.checks import sampling as _sampling_checks
from transformer_lab.checks import shift as _shift_checks
from transformer_lab.checks import sizes as _sizes_checks
from transformer_lab.checks import sizes_fit as _sizes_fit
from transformer_lab.checks import softmax as _softmax_checks
from transformer_lab.checks import tiled as _tiled_checks
from transformer_lab.checks import tiling_probe as _tiling_probe
from transformer_lab.checks import torch_mha as _torch_mha_checks
from transformer_lab.checks import vit_input as _vit_input_checks
from transformer_lab.checks._api import EXERCISES, diagnose
from transformer_lab.checks._core import CheckFailed
from transformer_lab.checks._diagnose import Diagnosis
from transformer_lab.checks.attention import check_scaled_dot_product_attention
from transformer_lab.checks.batching import check_pad_and_truncate
from transformer_lab.checks.bert import check_bert_embeddings, check_pair_inputs
from transformer_lab.checks.bert_heads import check_cls_logits, check_masked_lm_loss
from transformer_lab.checks.bert_masking import check_mlm_corrupt
from transformer_lab.checks.blocks import check_layer_norm, check_mlp
from transformer_lab.checks.cost import check_self_attention_macs
from transformer_lab.checks.decoder import check_decoder_block
from transformer_lab.checks.gpt import check_next_token_batch
from transformer_lab.checks.gpt_model import check_gpt_from_blocks
from transformer_lab.checks.heads import check_merge_heads, check_split_heads
from transformer_lab.checks.kv_cache import check_generate_greedy
from transformer_lab.checks.leaks import check_future_leaks
from transformer_lab.checks.lm_loss import check_causal_lm_loss
from transformer_lab.checks.long_context import (
    check_grouped_query_attention,
    check_kv_cache_bytes,
    check_sliding_window_mask,
)
from transformer_lab.checks.masks import check_causal_mask, check_padding_mask
from transformer_lab.checks.mha import check_multi_head_attention
from transformer_lab.checks.patches import check_linear_to_conv, check_patchify
from transformer_lab.checks.positional import check_sinusoidal_encoding
from transformer_lab.checks.projections import check_cross_attention, check_self_attention
from transformer_lab.checks.residual import Sublayers, check_encoder_block, sublayers_of
from transformer_lab.checks.rollout import check_attention_rollout
from transformer_lab.checks.rope import check_apply_rope
from transformer_lab.checks.sampling import check_filter_logits
from transformer_lab.checks.shift import check_offset_dot_product, check_shift_matrix
from transformer_lab.checks.sizes import check_count_parameters
from transformer_lab.checks.softmax import check_softmax
from transformer_lab.checks.tiled import check_merge_softmax_stats, check_tiled_attention
from transformer_lab.checks.torch_mha import check_to_torch_mha
from transformer_lab.checks.vit_input import check_sinusoidal_2d, check_vit_embed

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
    "check_patchify",
    "check_linear_to_conv",
    "check_vit_embed",
    "check_sinusoidal_2d",
    "check_attention_rollout",
    "check_merge_softmax_stats",
    "check_tiled_attention",
    "check_grouped_query_attention",
    "check_kv_cache_bytes",
    "check_sliding_window_mask",
    "check_mlp",
    "Sublayers",
    "check_encoder_block",
    "sublayers_of",
    "check_decoder_block",
    "check_count_parameters",
    "check_bert_embeddings",
    "check_pair_inputs",
    "check_cls_logits",
    "check_masked_lm_loss",
    "check_mlm_corrupt",
    "check_causal_lm_loss",
    "check_next_token_batch",
    "check_gpt_from_blocks",
    "check_generate_greedy",
    "check_filter_logits",
    "verify_integrity",
    "diagnose",
    "Diagnosis",
    "CheckFailed",
    "EXERCISES",
]


def verify_integrity() -> None:
    """Raise AssertionError if notebook code replaced anything the checks rely on."""
    _guards.verify("verify_integrity")


def _mha_reference(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    split = _heads_ref.split_heads
    q, k, v = split(x_q @ w_q, n_heads), split(x_kv @ w_k, n_heads), split(x_kv @ w_v, n_heads)
    out, weights = _attention_ref.scaled_dot_product_attention(q, k, v, mask)  # (B, H, T, D)
    return _heads_ref.merge_heads(out) @ w_o, weights


def _rope_reference(x, base=10000.0):
    return _positional_ref.RotaryEmbedding(x.shape[-1], base)(x)


_sdpa = _attention_ref.scaled_dot_product_attention
for _name, _check, _reference in (
    ("softmax", check_softmax, _attention_ref.softmax),
    ("scaled_dot_product_attention", check_scaled_dot_product_attention, _sdpa),
    ("self_attention", check_self_attention, lambda x, wq, wk, wv: _sdpa(x @ wq, x @ wk, x @ wv)),
    (
        "cross_attention",
        check_cross_attention,
        lambda xq, xkv, wq, wk, wv, mask=None: _sdpa(xq @ wq, xkv @ wk, xkv @ wv, mask),
    ),
    ("self_attention_macs", check_self_attention_macs, None),
    ("split_heads", check_split_heads, _heads_ref.split_heads),
    ("merge_heads", check_merge_heads, _heads_ref.merge_heads),
    ("multi_head_attention", check_multi_head_attention, _mha_reference),
    ("to_torch_mha", check_to_torch_mha, None),
    ("sinusoidal_encoding", check_sinusoidal_encoding, _positional_ref.sinusoidal_encoding),
    ("shift_matrix", check_shift_matrix, _positional_ref.sinusoidal_shift_matrix),
    ("offset_dot_product", check_offset_dot_product, _api.offset_dot_product_reference),
    ("apply_rope", check_apply_rope, _rope_reference),
    ("causal_mask", check_causal_mask, _masks_ref.causal_mask),
    ("padding_mask", check_padding_mask, _masks_ref.padding_mask_from_lengths),
    ("future_leaks", check_future_leaks, None),
    ("pad_and_truncate", check_pad_and_truncate, None),
    ("layer_norm", check_layer_norm, None),
):
    _api.register(_name, _check, _reference)

# Notebooks 8 and 9.
from transformer_lab import gqa as _gqa_ref  # noqa: E402
from transformer_lab import interpret as _interpret_ref  # noqa: E402
from transformer_lab import tiled as _tiled_ref  # noqa: E402
from transformer_lab.models import vit as _vit_ref  # noqa: E402

for _name, _check, _reference in (
    ("patchify", check_patchify, _vit_ref.patchify),
    ("linear_to_conv", check_linear_to_conv, None),
    ("vit_embed", check_vit_embed, _vit_input_checks._reference_embed),
    ("sinusoidal_2d", check_sinusoidal_2d, _positional_ref.sinusoidal_encoding_2d),
    ("attention_rollout", check_attention_rollout, _interpret_ref.attention_rollout),
    ("merge_softmax_stats", check_merge_softmax_stats, _tiled_ref.merge_softmax_stats),
    (
        "tiled_attention",
        check_tiled_attention,
        lambda q, k, v, block_size, mask=None: _sdpa(q, k, v, mask)[0],
    ),
    ("grouped_query_attention", check_grouped_query_attention, _gqa_ref.grouped_query_attention),
    ("kv_cache_bytes", check_kv_cache_bytes, _gqa_ref.kv_cache_bytes),
    ("sliding_window_mask", check_sliding_window_mask, _masks_ref.sliding_window_mask),
):
    _api.register(_name, _check, _reference)
for _name, _check in (
    ("mlp", check_mlp),
    ("encoder_block", check_encoder_block),
    ("decoder_block", check_decoder_block),
    ("count_parameters", check_count_parameters),
):
    _api.register(_name, _check, None)
for _name, _check in (
    ("pair_inputs", check_pair_inputs),
    ("bert_embeddings", check_bert_embeddings),
    ("mlm_corrupt", check_mlm_corrupt),
    ("masked_lm_loss", check_masked_lm_loss),
    ("cls_logits", check_cls_logits),
):
    _api.register(_name, _check, None)
for _name, _check in (
    ("next_token_batch", check_next_token_batch),
    ("causal_lm_loss", check_causal_lm_loss),
    ("gpt_from_blocks", check_gpt_from_blocks),
    ("filter_logits", check_filter_logits),
    ("generate_greedy", check_generate_greedy),
):
    _api.register(_name, _check, None)
# Notebook 0 (tokens and embeddings): its exercises are declared in checks/tokens.py.
from transformer_lab.checks import tokens as _tokens  # noqa: E402

for _name, _check, _reference in _tokens.EXERCISES:
    _api.register(_name, _check, _reference)
    globals()[_check.__name__] = _check
    __all__.append(_check.__name__)
del _name, _check, _reference
# Under grading, hidden checks send their results to the grader (see _guards.hidden_entry).
for _name in __all__:
    if _name.startswith("check_"):
        globals()[_name] = _guards.hidden_entry(globals()[_name])

# Snapshot what the checks trust, then make every checks module read-only.
_guards.take_snapshot()
for _module in (
    _core,
    _attention_checks,
    _softmax_checks,
    _projection_checks,
    _cost_checks,
    _heads_checks,
    _masks_checks,
    _positional_checks,
    _rope_checks,
    _blocks_checks,
    _integrity,
    _diagnose,
    _api,
    _attend,
    _evidence,
    _expect,
    _messages,
    _batching_checks,
    _leak_checks,
    _mha_checks,
    _shift_checks,
    _torch_mha_checks,
    _patches_checks,
    _vit_input_checks,
    _rollout_checks,
    _tiled_checks,
    _exercise_hints,
    _patch_conv_checks,
    _merge_evidence,
    _tiling_probe,
    _long_context_checks,
    _decoder_checks,
    _residual_checks,
    _sizes_checks,
    _sizes_fit,
    _block_trace,
    _blocks_evidence,
    _fallback,
    _bert_evidence,
    _bert_heads_evidence,
    _bert_checks,
    _bert_heads_checks,
    _bert_masking_checks,
    _gpt_checks,
    _gpt_mistakes_checks,
    _gpt_model_checks,
    _kv_cache_checks,
    _lm_loss_checks,
    _sampling_checks,
    *_tokens.MODULES,
    _tokens,
    _guards,
):
    _guards.seal(_module.__name__)
del _module, _name
_guards.seal(__name__)
