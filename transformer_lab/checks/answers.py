"""Package functions that compute an exercise's answer beyond its reference and forbidden list.

A graded kernel of notebook N imports a build of the package in which every function that
computes the answer of one of N's exercises is absent (``grading/run/stripped.py``). By default
that is the exercise's reference and the package functions its check forbids
(:attr:`~transformer_lab.checks.registry.Exercise.answers`); this table adds the others: a
function without input checks, a faster variant, a layer that with identity weights computes
the same thing. Each entry is ``"module:qualname"``; ``Class.method`` removes one method (the
class itself stays, so a check can still send an instance to the kernel).

tests/test_stripped_build.py calls every public function a graded kernel can reach on each
exercise's cases and fails where one reproduces an answer: a new package function that does
belongs here. Imports nothing.
"""

from __future__ import annotations

__all__ = ["EXTRA", "KEPT"]

# The attention family: any of these, given identity values (or identity weights), returns
# softmax weights or attention outputs.
_ATTENTION = (
    "transformer_lab.attention:softmax",
    "transformer_lab.attention:scaled_dot_product_attention",
    "transformer_lab.attention:attend",
    "transformer_lab.attention:SelfAttention.forward",
    "transformer_lab.heads:MultiHeadAttention.forward",
    "transformer_lab.tiled:tiled_attention",
    "transformer_lab.tiled:merge_softmax_stats",
    "transformer_lab.gqa:grouped_query_attention",
    # the checks' engine: the mistake catalogues' correct variants (the grader runs them)
    "transformer_lab.checks.engine.diagnose:softmax_zeros",
    "transformer_lab.checks.engine.diagnose:softmax_nan",
    "transformer_lab.checks.engine.attention_mistakes:attend",
)

EXTRA: dict[str, tuple[str, ...]] = {
    "softmax": _ATTENTION,
    "scaled_dot_product_attention": _ATTENTION,
    "self_attention": _ATTENTION,
    # Notebooks 02 and 04 build on notebook 01: their answers compose the package's attention
    # with projections, as the solutions do; only the layer that does the whole job goes.
    "multi_head_attention": ("transformer_lab.heads:MultiHeadAttention.forward",),
    "cross_attention": ("transformer_lab.heads:MultiHeadAttention.forward",),
    "split_heads": ("transformer_lab.heads:split_heads",),
    "merge_heads": ("transformer_lab.heads:merge_heads",),
    "tiled_attention": _ATTENTION,
    "merge_softmax_stats": _ATTENTION,
    "grouped_query_attention": _ATTENTION,
    "filter_logits": (
        "transformer_lab.models.sampling:filter_logits",
        "transformer_lab.models.sampling:sample_next_token",
    ),
    "generate_greedy": ("transformer_lab.models.gpt:GPT.generate",),
    "layer_norm": ("transformer_lab.blocks:layer_norm", "transformer_lab.blocks:LayerNorm.forward"),
}

# Notebook -> what its graded build keeps although one of its exercises' answers includes it:
# another exercise of the same notebook is honestly solved with it (09's grouped-query attention
# calls notebook 01's attention after expanding the heads). A tiled attention that calls it is
# not stopped by its absence but flagged for a person by the code scan (grading/scan/).
KEPT: dict[str, tuple[str, ...]] = {
    "09": (
        "transformer_lab.attention:scaled_dot_product_attention",
        "transformer_lab.attention:attend",  # what it calls
        "transformer_lab.attention:softmax",
    ),
}
