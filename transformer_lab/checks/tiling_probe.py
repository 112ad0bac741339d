"""Is tiled attention tiled? The largest tensor the student's function allocates on a case with
many more keys than a block holds tells a loop over key blocks (about T x block_size numbers)
from one that builds all T x S scores, or a block of queries against all S keys."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode

from transformer_lab.checks._core import Case, Runner, describe_args, generator
from transformer_lab.checks._integrity import TRUSTED


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
