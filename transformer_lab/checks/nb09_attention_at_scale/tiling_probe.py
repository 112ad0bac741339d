"""Is tiled attention tiled? The largest tensor the student's function allocates on a case with
many more keys than a block holds tells a loop over key blocks (about T x block_size numbers)
from one that builds all T x S scores, or a block of queries against all S keys."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.guards import TRUSTED


class _Largest(TorchDispatchMode):
    """Records the largest floating-point tensor any operation allocates (views excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.numel, self.shape = 0, ()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for t in outs:  # kept light: the grader's call monitor sees every Python call here
            if type(t) is Tensor and t.is_floating_point() and t.numel() > self.numel:
                ptr = t.untyped_storage().data_ptr()
                if not any(_shares(a, ptr) for a in args):  # a view of an input is no allocation
                    self.numel, self.shape = t.numel(), tuple(t.shape)
        return out


def _shares(arg, ptr: int) -> bool:
    if type(arg) is Tensor:
        return arg.untyped_storage().data_ptr() == ptr
    if isinstance(arg, (tuple, list)):
        return any(type(a) is Tensor and a.untyped_storage().data_ptr() == ptr for a in arg)
    return False


def _tiling_probe(run: Runner) -> None:
    """The text asks that only (T, block_size) scores exist at a time. With many more keys than
    a block holds, the largest tensor the function allocates tells a tiled loop (about
    T x block_size numbers) from one that builds all T x S scores, or a block of queries
    against all S keys. Generous: copies of k or v (S x D) are fine."""
    __tracebackhide__ = True
    g = generator(9909)
    T, S, D, Dv, block = 64, 512, 4, 3, 16
    q, k, v = (
        torch.randn(T, D, generator=g),
        torch.randn(S, D, generator=g),
        torch.randn(S, Dv, generator=g),
    )
    case = Case(f"T={T}, S={S}, blocks of {block} (memory)", (q, k, v, block), {},
                describe_args(q=q, k=k, v=v, block_size=block))  # fmt: skip
    run.n_cases += 1
    with _Largest() as largest:
        out, error, calls = run.attempt((q.clone(), k.clone(), v.clone(), block), {})
    if error is not None or calls or not TRUSTED.is_tensor(out):
        run.call(case)  # reports the error or the forbidden call as usual
        return
    limit = max(4 * T * block, 2 * S * max(D, Dv), 2 * T * max(D, Dv))
    if largest.numel <= limit:
        return
    shape = largest.shape
    if len(shape) >= 2 and shape[-1] == S and shape[-2] == T:
        what = f"a {shape} tensor, as large as all T x S = {T} x {S} scores at once"
    elif len(shape) >= 2 and shape[-1] == S:
        what = f"a {shape} tensor, the size of a block of queries against all S = {S} keys"
    else:
        what = f"a {shape} tensor ({largest.numel:,} numbers)"
    run.fail(
        f"the values are right, but your function builds {what}; tiled attention visits the keys "
        f"in blocks of block_size, k[..., start:stop, :], so that only (T, block_size) = ({T}, "
        f"{block}) scores exist at a time.",
        case,
    )


def _row_factor(run: Runner, out: Tensor, expected: Tensor) -> str | None:
    """Every query's output is the reference's times a factor of its own (not 1): the weights
    are right relative to each other, but the division by their sum is missing or wrong."""
    if out.shape != expected.shape or out.shape[-1] < 2:
        return None
    rows = expected.abs().amax(-1) > 1e-3  # (..., T)
    if not rows.any():
        return None
    e, o = expected[rows], out[rows]  # (n, Dv)
    i = e.abs().argmax(-1, keepdim=True)
    r = o.gather(-1, i) / e.gather(-1, i)  # (n, 1)
    if not torch.isfinite(r).all() or (r.abs() < 1e-3).any():
        return None  # a query zeroed out or NaN is a different mistake, not a wrong scale
    if not run.close(o, r * e, 1e-4, 1e-4) or run.close(r, torch.ones_like(r), 1e-4, 1e-4):
        return None
    return (
        "each query's output is the right one times a factor of its own: the final division by "
        "the running sum l is missing or divides by something else; return o / l after the loop"
    )


def _weights_probe(run: Runner) -> str | None:
    """With v the identity (padded with zero columns, so the value width Dv = S + 3 differs from
    the key width D) the output's first S columns are each query's weights over the keys.
    Compared with the softmax: the scores scaled by another factor than 1 / sqrt(D), keys counted
    twice (overlapping blocks), or blocks weighed wrongly against each other."""
    g = generator(9911)
    T, S, D, block = 3, 10, 4, 4
    q, k = torch.randn(T, D, generator=g), torch.randn(S, D, generator=g)
    v = torch.cat([torch.eye(S), torch.zeros(S, 3)], -1)  # (S, Dv)
    got, error, calls = run.attempt((q.clone(), k.clone(), v, block), {})
    if error is not None or calls or not TRUSTED.is_tensor(got) or got.shape != (T, S + 3):
        return None
    got = got.detach().double()[:, :S]
    raw = q.double() @ k.double().T  # (T, S) unscaled scores
    want = torch.softmax(raw / D**0.5, -1)  # (T, S)
    if run.close(got, want, 1e-5, 1e-5) or (got <= 0).any():
        return None
    scale = _score_scale(got, raw, {"D": D, "Dv": S + 3, "S": S, "T": T})
    if scale:
        return scale
    ratio = got / want  # (T, S): how much more each key weighs than it should
    rel = ratio / ratio.amin(-1, keepdim=True)
    counts = rel.round()
    if torch.allclose(rel, counts, atol=1e-3) and (counts == counts[:1]).all() and counts.max() > 1:
        keys = torch.nonzero(counts[0] > 1).flatten().tolist()
        return (
            f"keys {keys} weigh {int(counts.max())} times too much, for every query: they are "
            f"visited twice, the blocks overlap; step by block_size so each key is in one block"
        )
    starts = range(0, S, block)
    per_block = [ratio[:, a : a + block] for a in starts]
    if all(torch.allclose(p, p[:, :1].expand_as(p), rtol=1e-4, atol=0) for p in per_block):
        return (
            "within each block of keys the weights are right, but the blocks are weighed wrongly "
            "against each other: when the running maximum grows, rescale l and o by "
            "exp(m_old - m_new), computing the factors before you update m"
        )
    return None


def _score_scale(weights: Tensor, raw: Tensor, dims: dict[str, int]) -> str | None:
    """The weights are a softmax of c * q k^T for one constant c (fitted on the log-weights):
    name c when it is a usual wrong divisor (the value width, D, no division, ...)."""
    lw = weights.log()
    lw, x = lw - lw.mean(-1, keepdim=True), raw - raw.mean(-1, keepdim=True)  # (T, S)
    c = float((lw * x).sum() / (x * x).sum())
    if c <= 0 or not torch.allclose(lw, c * x, atol=1e-4, rtol=1e-4):
        return None
    D, Dv = dims["D"], dims["Dv"]
    named = {
        "divided by sqrt(Dv), the square root of the value width": Dv**0.5,
        "divided by Dv, the value width": Dv,
        "divided by D, not by its square root": D,
        "not scaled at all": 1.0,
        "divided by sqrt(S), the number of keys": dims["S"] ** 0.5,
        "divided by sqrt(T), the number of queries": dims["T"] ** 0.5,
        "multiplied by sqrt(D) instead of divided by it": D**-0.5,
    }
    for what, divisor in named.items():
        if abs(1 / c - divisor) < 1e-3 * divisor:
            return (
                f"the scores are {what}: divide every block's q k^T by sqrt(D), the square "
                "root of the key width (D = q.shape[-1])"
            )
    return (
        f"the scores are multiplied by {c:.4g} instead of 1 / sqrt(D) = {D**-0.5:.4g} "
        "(D = q.shape[-1], the key width): scale every block's q k^T by 1 / sqrt(D)"
    )
