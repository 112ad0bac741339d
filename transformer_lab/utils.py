"""Small helpers the notebooks share: counting multiply-adds, timing, a leaky attention layer.

MultiplyAddCounter()            with-block that counts the multiply-adds of matrix products
best_time(fn, repeats=5)        the fastest of ``repeats`` runs, in seconds
attention_layer(T, C, mode, seed)   a small self-attention with one masking variant
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["MultiplyAddCounter", "best_time", "attention_layer", "LEAK_MODES"]


class MultiplyAddCounter(TorchFunctionMode):
    """Counts the multiply-adds of every matrix product PyTorch executes inside a `with` block.

    Example::

        with MultiplyAddCounter() as counter:
            layer(x)
        counter.macs
    """

    PRODUCTS = {
        torch.matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.mm,
        torch.bmm,
        F.linear,
    }

    def __init__(self) -> None:
        super().__init__()
        self.macs = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.PRODUCTS:
            # every output entry is one dot product over the last dimension of the first operand
            self.macs += out.numel() * args[0].shape[-1]
        return out


def best_time(fn: Callable[[], object], repeats: int = 5) -> float:
    """Seconds of the fastest of ``repeats`` calls of ``fn`` (after one warm-up call).

    The minimum is the run least disturbed by other work on the machine.
    """
    fn()
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


# mask variant -> does it let a later token change an earlier output?
LEAK_MODES = {
    "causal": False,
    "none": True,
    "next token too": True,
    "strictly past": False,
    "after softmax": True,
    "score zero": True,
    "last token to first": True,
    "second token to first": True,
    "faint leak": True,
    "two layers": False,
}


def attention_layer(T: int, C: int, mode: str, seed: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """A small self-attention x (T, C) -> (T, C) with one masking variant (see ``LEAK_MODES``)."""
    if mode not in LEAK_MODES:
        raise ValueError(f"mode must be one of {sorted(LEAK_MODES)}, but received {mode!r}.")
    return _AttentionLayer(T, C, mode, seed)


class _AttentionLayer:
    """The layer :func:`attention_layer` returns: rebuilt from (T, C, mode, seed) when pickled,
    so the grader can hand it to a graded kernel."""

    def __init__(self, T: int, C: int, mode: str, seed: int) -> None:
        self.T, self.C, self.mode, self.seed = T, C, mode, seed
        g = torch.Generator().manual_seed(seed)
        self.w_q, self.w_k, self.w_v = (
            torch.randn(C, C, generator=g) / math.sqrt(C) for _ in range(3)
        )
        # (T, T), True = may attend; written out, not masks.causal_mask: the kernel grading
        # notebook 04 has no causal_mask (it is that notebook's exercise), yet runs these layers
        self.causal = torch.ones(T, T, dtype=torch.bool).tril()

    def __reduce__(self):
        return (_AttentionLayer, (self.T, self.C, self.mode, self.seed))

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        from transformer_lab.attention import scaled_dot_product_attention as sdpa

        T, C, mode, causal = self.T, self.C, self.mode, self.causal
        q, k, v = x @ self.w_q, x @ self.w_k, x @ self.w_v  # (T, C) each
        scores = q @ k.T / math.sqrt(C)  # (T, T)
        if mode == "after softmax":  # zeroing weights after the softmax leaks via the denominator
            return (torch.softmax(scores, -1) * causal) @ v
        if mode == "score zero":  # a masked score of 0 still gets weight e^0
            return torch.softmax(scores.masked_fill(~causal, 0.0), -1) @ v
        if mode in ("last token to first", "second token to first"):  # one hole in the mask
            mask = causal.clone()
            mask[0, T - 1 if mode == "last token to first" else min(1, T - 1)] = True
            return sdpa(q, k, v, mask)[0]
        if mode == "faint leak":  # later tokens change each output by a few parts in 1e7
            later = x.flip(0).cumsum(0).flip(0) - x  # (T, C): the sum of the tokens after t
            return sdpa(q, k, v, causal)[0] * (1 + 3e-7 * later.sum(-1, keepdim=True))
        if mode == "two layers":  # stacking causal layers keeps causality
            h = sdpa(q, k, v, causal)[0]
            return sdpa(h @ self.w_q, h @ self.w_k, h @ self.w_v, causal)[0]
        allowed = {
            "causal": causal,
            "none": torch.ones(T, T, dtype=torch.bool),
            "next token too": torch.ones(T, T, dtype=torch.bool).tril(1),
            "strictly past": torch.ones(T, T, dtype=torch.bool).tril(-1),
        }
        return sdpa(q, k, v, allowed[mode])[0]
