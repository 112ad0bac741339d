"""Check for notebook 09, part 1: tiled attention (the merge it repeats is checked in
merge_stats.py; the probes of a wrong tiling are in tiling_probe.py and merge_evidence.py).

tiled_attention(q, k, v, block_size, mask=None) -> (..., T, Dv), keys visited block by block
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab import attention as _attention
from transformer_lab import tiled as _tiled
from transformer_lab.checks.engine.core import Case, Mistake, Runner
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.leading_dims import runs_with_other_leading_dims
from transformer_lab.checks.engine.precision import float32_inside
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import (
    _hint,
    _tiled_tip,
)
from transformer_lab.checks.nb09_attention_at_scale.magnitude_probe import tiled_overflow_probe
from transformer_lab.checks.nb09_attention_at_scale.tiled_cases import tiled_cases
from transformer_lab.checks.nb09_attention_at_scale.tiling_probe import (
    _row_factor,
    _tiling_probe,
    _weights_probe,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_tiled_attention"]


_TORCH_ATTENTION = Forbidden(
    "torch's fused scaled_dot_product_attention",
    builtin_names=("scaled_dot_product_attention", "_scaled_dot_product_attention_math"),
)


def _stats(scores: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(m, l, o) of one key set: scores (..., T, b) with -inf for hidden keys, v (..., b, Dv)."""
    m = scores.amax(-1, keepdim=True)  # (..., T, 1)
    p = torch.exp(scores - torch.where(torch.isfinite(m), m, torch.zeros_like(m)))
    return m, p.sum(-1, keepdim=True), p @ v


# ---------------------------------------------------------------------------------------------
# tiled attention
def _blockwise(q, k, v, block, mask, *, rescale_o=True, rescale_l=True, rescale=True,
               normalise_each=False, mask_offset=True, scale=True, drop_last=False,
               value_offset=True, normalise_block=False) -> Tensor:  # fmt: skip
    """The loop with one thing changed, for the catalogue of named mistakes."""
    S = k.shape[-2]
    m = torch.full((*q.shape[:-1], 1), float("-inf"))
    l = torch.zeros_like(m)  # noqa: E741
    o = torch.zeros(*q.shape[:-1], v.shape[-1])
    total, n_blocks = torch.zeros_like(o), 0
    stop_at = S - S % block if drop_last and S % block else S
    for start in range(0, stop_at, block):
        stop = min(start + block, S)
        s = q @ k[..., start:stop, :].transpose(-2, -1)
        if scale:
            s = s / math.sqrt(q.shape[-1])
        if mask is not None:
            piece = mask[..., start:stop] if mask_offset else mask[..., : stop - start]
            s = s.masked_fill(~piece, float("-inf"))
        m_b, l_b, o_b = _stats(
            s, v[..., start:stop, :] if value_offset else v[..., : stop - start, :]
        )
        if normalise_block:  # the block's output divided by its own sum before merging
            o_b = o_b / torch.where(l_b > 0, l_b, torch.ones_like(l_b))
        total, n_blocks = (
            total + o_b / torch.where(l_b > 0, l_b, torch.ones_like(l_b)),
            n_blocks + 1,
        )
        if not rescale:  # each block kept at its own maximum
            l, o, m = l + l_b, o + o_b, torch.maximum(m, m_b)  # noqa: E741
            continue
        new = torch.maximum(m, m_b)
        safe = torch.where(torch.isfinite(new), new, torch.zeros_like(new))
        a, b = torch.exp(m - safe), torch.exp(m_b - safe)
        l = (a if rescale_l else 1) * l + b * l_b  # noqa: E741
        o = (a if rescale_o else 1) * o + b * o_b
        m = new
    if normalise_each:
        return total / max(1, n_blocks)
    return o / torch.where(l > 0, l, torch.ones_like(l))


def _tiled_mistakes(q, k, v, block, mask) -> list[Mistake]:
    def run(**changes) -> Tensor:
        return _blockwise(q, k, v, block, mask, **changes)

    return [
        Mistake(
            "the output accumulator is not rescaled when the running maximum grows: multiply o by "
            "exp(m_old - m_new) in every step, as you do for l",
            lambda: run(rescale_o=False),
        ),
        Mistake(
            "nothing is rescaled: each block's sum and output were computed with its own maximum; "
            "when the running maximum grows, multiply l and o by exp(m_old - m_new)",
            lambda: run(rescale=False),
        ),
        Mistake(
            "the running sum l is not rescaled when the maximum grows (the output is): multiply l "
            "by exp(m_old - m_new) too",
            lambda: run(rescale_l=False),
        ),
        Mistake(
            "each block's output is normalised inside the loop and the blocks averaged; keep o "
            "unnormalised and divide by the running sum l once, after the last block",
            lambda: run(normalise_each=True),
        ),
        Mistake(
            "every block uses the mask's first columns: slice the mask like the keys, "
            "mask[..., start:stop]",
            lambda: run(mask_offset=False),
        ),
        Mistake("the scores are not divided by sqrt(D)", lambda: run(scale=False)),
        Mistake(
            "each block's output is divided by its own sum before merging: keep o unnormalised "
            "(sum of exp(score - m) * value) and divide by the running sum l once, at the end",
            lambda: run(normalise_block=True),
        ),
        Mistake(
            "every block uses the first values v[..., :b]: slice the values like the keys, "
            "v[..., start:stop, :]",
            lambda: run(value_offset=False),
        ),
        Mistake(
            "the mask is inverted (its polarity is reversed, the opposite): True means 'may "
            "attend', so hide the keys where the mask is False (masked_fill(~mask, -inf))",
            lambda: _blockwise(q, k, v, block, None if mask is None else ~mask),
        ),
        Mistake(
            "the mask is ignored: set the scores of masked keys to -inf in every block "
            "(mask[..., start:stop])",
            lambda: _blockwise(q, k, v, block, None) if mask is not None else None,
        ),
        Mistake(
            "the last, shorter block of keys is skipped: when S is not a multiple of block_size the "
            "final block holds the remaining S % block_size keys",
            lambda: run(drop_last=True),
        ),
    ]


def _rows_close(run: Runner, out: Tensor, expected: Tensor) -> Tensor:
    """(..., T) bool: which queries' outputs match the reference (NaN never matches)."""
    diff = (out.detach().double() - expected.double()).abs()
    tol = 1e-5 + 1e-5 * expected.double().abs()
    return torch.nan_to_num(diff, nan=float("inf")).le(tol).all(-1)


def _leading_dims_hint(run: Runner, exc: BaseException, case: Case) -> str:
    """'' unless the same case runs with its tensors given another number of leading dims."""
    dims = runs_with_other_leading_dims(run, exc, case, core=2)
    if dims is None:
        return ""
    given = next(a for a in case.args if isinstance(a, Tensor) and a.dim() >= 2).dim()
    return (
        f"your function runs on {dims}-D inputs but fails on {given}-D ones: the "
        f"inputs are (..., T, D), any number of leading (batch, heads) dims; transpose "
        f"the last two dims with transpose(-2, -1), not transpose(1, 2), and read sizes "
        f"from the end (k.shape[-2]), not with fixed dims"
    )


def check_tiled_attention(tiled_attention, hidden: bool = False) -> None:
    """Check ``tiled_attention(q, k, v, block_size, mask=None)`` against the softmax formula."""
    __tracebackhide__ = True
    forbidden = [
        Forbidden("transformer_lab's tiled_attention", function=_tiled.tiled_attention),
        Forbidden(
            "transformer_lab's scaled_dot_product_attention",
            function=_attention.scaled_dot_product_attention,
        ),
        _TORCH_ATTENTION,
    ]
    tiled_hint = _hint("tiled_attention(q, k, v, block_size, mask=None)", _tiled_tip)
    run = Runner(
        "check_tiled_attention",
        tiled_attention,
        forbidden,
        hidden,
        lambda e, c: _leading_dims_hint(run, e, c) or tiled_hint(e, c),
    )
    for case in tiled_cases(hidden):
        q, k, v, block, mask = (case.data[x] for x in ("q", "k", "v", "block", "mask"))
        expected = _attention.scaled_dot_product_attention(q, k, v, mask)[0]
        out = run.expect_tensor(run.call(case), case, expected.shape, expected.dtype, "output")
        if run.close(out, expected, 1e-5, 1e-5):
            if float32_inside(out, expected):
                run.fail(float32_inside(out, expected), case)
            continue
        overflow = tiled_overflow_probe(run, case) if case.data.get("large") else None
        if overflow:
            run.fail(overflow, case)
        if mask is not None:
            empty = ~mask.any(-1)  # (..., T) queries with nothing to attend to
            rest_ok = run.close(out[~empty], expected[~empty], 1e-5, 1e-5)
            if rest_ok and out[empty].isnan().any():
                run.fail(
                    "a query whose keys are all masked gives NaN: its running sum stays 0 and its "
                    "maximum -inf; shift by 0 instead of -inf and divide only where l > 0 (zeros there)",
                    case,
                )
            if rest_ok:
                run.fail("a query whose keys are all masked must give zeros.", case)
            S = k.shape[-2]
            blind = torch.stack(
                [~mask[..., a : a + block].any(-1) for a in range(0, S, block)]
            ).any(0)  # (..., T): some block hides every key of this query
            wrong = ~_rows_close(run, out, expected) & ~empty  # (..., T) wrong although keys seen
            blind = blind.expand_as(wrong)
            if wrong.any() and blind[wrong].all():
                nan = bool(out.isnan().any(-1)[wrong].any())
                run.fail(
                    ("NaN" if nan else "wrong outputs")
                    + " for queries that do see keys, but not in every block: in a block where a "
                    "query sees no key the block's maximum is -inf, and exp(-inf - (-inf)) is NaN; "
                    "shift that block's scores by 0 instead of its -inf maximum"
                    + ("" if nan else " (replacing the NaN afterwards loses the whole query)"),
                    case,
                )
        message = run.diagnose(out, _tiled_mistakes(q, k, v, block, mask), 1e-5, 1e-5)
        message = message or _row_factor(run, out, expected) or _weights_probe(run)
        if message:
            run.fail(message, case)
        case.data["variations"] = [("mask", {"mask": None})] if mask is not None else []
        case.data["masked_rows"] = None if mask is None else ~mask.any(-1)
        run.explain(out, expected, case, (), 1e-5, 1e-5)
    _tiling_probe(run)
    run.passed()


def _tiled_attention_reference(q, k, v, block_size, mask=None):
    """The answer with the student's signature (for ``checks.diagnose``)."""
    return _attention.scaled_dot_product_attention(q, k, v, mask)[0]


register(
    Exercise(
        "tiled_attention",
        "09_attention_at_scale",
        "tiled_attention(q, k, v, block_size, mask=None) -> (..., T, Dv)",
        cells=(Cell("tiled_attention_tests", "tiled_attention", 3),),
        check=check_tiled_attention,
        reference=_tiled_attention_reference,
        against="transformer_lab.attention.scaled_dot_product_attention",
    )
)
