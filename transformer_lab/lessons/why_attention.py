"""From why attention to how: causal averaging, the cost table, and recurrence's one advantage.

Notebook 00 ends by measuring what separates attention, recurrence and convolution:

- **Causal averaging as a matrix product.** Averaging every position with the positions before
  it is a loop, or one product with a lower-triangular matrix whose row t holds 1/(t + 1)
  (:func:`causal_average_matrix`; :func:`causal_average` applies it to (T, C) or (B, T, C),
  the reference of notebook 00's exercise 7); the same matrix is a softmax over scores of
  zero with the future masked to -inf (:func:`masked_softmax_weights`). Self-attention keeps
  the mask and the softmax and replaces the zeros by data-dependent scores (the device
  Karpathy's "Let's build GPT" lecture builds up to).
- **The cost table** of Vaswani et al. (2017), Table 1, per layer for n positions of width d
  and kernel k (:data:`COMPLEXITY`); the path length O(log_k n) is for dilated convolutions,
  contiguous kernels need O(n / k) layers.
- **Sequential operations and path length, measured**: the longest chain of operations in the
  autograd graph (:func:`sequential_operations`); whether the last output depends on the first
  input at all (:func:`reaches_first`, how many convolution layers a distance needs); and the
  cell applications between the first input and the output (:func:`recurrent_path_length`).
- **What recurrence keeps**: generating one token at a time, a recurrent network carries one
  state of fixed size, attention a key and a value for every earlier token
  (:func:`generation_memory`).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "causal_average_loop",
    "causal_average_matrix",
    "causal_average",
    "masked_softmax_weights",
    "COMPLEXITY",
    "sequential_operations",
    "reaches_first",
    "recurrent_path_length",
    "generation_memory",
]

COMPLEXITY = (
    # (layer type, complexity per layer, sequential operations, maximum path length)
    ("self-attention", "O(n² d)", "O(1)", "O(1)"),
    ("recurrent", "O(n d²)", "O(n)", "O(n)"),
    ("convolutional", "O(k n d²)", "O(1)", "O(log_k n)"),
)
"""Vaswani et al. (2017), Table 1 (without its restricted self-attention row)."""


def causal_average_loop(x: torch.Tensor) -> torch.Tensor:
    """(B, T, C) -> (B, T, C): position t is the mean of positions 0..t, one at a time."""
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, T, C), but received shape {tuple(x.shape)}.")
    out = torch.empty_like(x)
    for t in range(x.shape[1]):
        out[:, t] = x[:, : t + 1].mean(dim=1)  # (B, C)
    return out


def causal_average_matrix(T: int) -> torch.Tensor:
    """(T, T) lower-triangular matrix whose row t holds 1/(t + 1) in columns 0..t."""
    if T < 1:
        raise ValueError(f"T must be >= 1, but received {T}.")
    w = torch.tril(torch.ones(T, T))  # (T, T): 1 where the column is not in the future
    return w / w.sum(dim=1, keepdim=True)


def causal_average(x: torch.Tensor) -> torch.Tensor:
    """(T, C) or (B, T, C) -> the same shape: row t is the mean of rows 0..t, as A @ x."""
    if x.dim() not in (2, 3) or not x.is_floating_point():
        raise ValueError(
            f"x must be a floating-point (T, C) or (B, T, C) tensor, but received shape "
            f"{tuple(x.shape)} and dtype {x.dtype}."
        )
    a = causal_average_matrix(x.shape[-2]).to(x.dtype)  # (T, T)
    return a @ x  # (T, T) @ (..., T, C) -> (..., T, C), broadcast over the batch


def masked_softmax_weights(scores: torch.Tensor) -> torch.Tensor:
    """(..., T, T) scores -> causal attention weights: the future set to -inf, then softmax."""
    T = scores.shape[-1]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # (T, T)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1)


def sequential_operations(model: nn.Module, T: int, width: int) -> int:
    """The longest chain of autograd operations from the (1, T, width) input to the output.

    Operations on one chain must run one after another; everything else can run in parallel.
    ``model.forward_embedded`` reads the embeddings.
    """
    out = model.forward_embedded(torch.randn(1, T, width, requires_grad=True))  # (1, V)
    longest: dict[int, int] = {}
    stack = [(out.grad_fn, False)]
    while stack:  # an iterative depth-first walk: a recurrent graph is deeper than the stack
        node, ready = stack.pop()
        if id(node) in longest:
            continue
        parents = [f for f, _ in node.next_functions if f is not None]
        if ready:
            longest[id(node)] = 1 + max((longest[id(p)] for p in parents), default=0)
        else:
            stack.append((node, True))
            stack.extend((p, False) for p in parents if id(p) not in longest)
    return longest[id(out.grad_fn)]


def reaches_first(model: nn.Module, T: int, width: int) -> bool:
    """Whether the output at position T - 1 depends on the input at position 0 (by autograd)."""
    e = torch.randn(1, T, width, requires_grad=True)  # (1, T, C)
    (grad,) = torch.autograd.grad(model.forward_embedded(e).sum(), e)
    return bool(grad[0, 0].abs().max() > 0)


def recurrent_path_length(model: nn.Module, T: int, width: int) -> int:
    """Cell applications between the first input and the output, run one token at a time.

    ``model`` is a :class:`~transformer_lab.lessons.baselines.RecurrentClassifier`; stepping
    its own cell token by token gives the same output as the whole sequence at once (checked).
    """
    e = torch.randn(1, T, width)  # (1, T, C)
    calls = []
    hook = model.cell.register_forward_hook(lambda *_: calls.append(1))
    try:
        h = None
        with torch.no_grad():
            for t in range(T):
                _, h = model.cell(e[:, t : t + 1], h)  # h: (1, 1, C), the state after token t
            stepped = model.out(h[0])  # (1, V)
    finally:
        hook.remove()
    with torch.no_grad():
        if not torch.allclose(stepped, model.forward_embedded(e), atol=1e-5):
            raise RuntimeError("stepping the cell token by token did not reproduce the output.")
    return len(calls)


def generation_memory(kind: str, n_tokens: int, width: int = 32) -> list[int]:
    """Numbers kept between steps while generating ``n_tokens`` tokens one at a time.

    ``kind`` "gru": an ``nn.GRUCell``'s state; "attention": one attention layer's cache of the
    keys and values of every earlier token. Returns the count after each step.
    """
    x = torch.randn(n_tokens, 1, width)  # (T, 1, C): one new token per step
    kept = []
    with torch.no_grad():
        if kind == "gru":
            cell, h = nn.GRUCell(width, width), torch.zeros(1, width)
            for t in range(n_tokens):
                h = cell(x[t], h)  # (1, C): replaces the previous state
                kept.append(h.numel())
        elif kind == "attention":
            w_k, w_v = nn.Linear(width, width), nn.Linear(width, width)
            keys, values = torch.empty(0, width), torch.empty(0, width)
            for t in range(n_tokens):
                keys = torch.cat([keys, w_k(x[t])])  # (t + 1, C): grows by one row per token
                values = torch.cat([values, w_v(x[t])])
                kept.append(keys.numel() + values.numel())
        else:
            raise ValueError(f"kind must be 'gru' or 'attention', but received {kind!r}.")
    return kept
