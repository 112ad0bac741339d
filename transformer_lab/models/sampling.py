"""Choosing the next token from a language model's logits: greedy, temperature, top-k, top-p.

Temperature divides the logits (below 1 sharpens the distribution, above 1 flattens it); top-k
keeps the k most likely tokens; top-p (nucleus sampling, Holtzman et al., 2020) keeps the
smallest set whose probability reaches p. Used by :meth:`transformer_lab.models.GPT.generate`.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["filter_logits", "sample_next_token"]


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """Set every token outside the top-k and outside the top-p nucleus to -inf.

    Args:
        logits: (..., V) scores.
        top_k: keep the k highest scores (ties with the k-th are kept); ``None`` or 0 = off.
        top_p: keep the smallest set of highest-probability tokens whose mass reaches top_p;
            ``None`` or 1 = off.
    Returns:
        (..., V) with removed tokens at -inf; the most likely token always survives.
    """
    if top_k:
        k = min(top_k, logits.shape[-1])
        kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V) each
        probs = torch.softmax(sorted_logits, dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs  # mass of the strictly more likely tokens
        remove_sorted = mass_before >= top_p  # the nucleus is already full without this token
        remove = remove_sorted.scatter(-1, order, remove_sorted)  # back to vocabulary order
        logits = logits.masked_fill(remove, float("-inf"))
    return logits


def sample_next_token(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Pick one token per row of (B, V) logits; ``temperature=0`` means greedy (argmax).

    Returns:
        (B, 1) token ids.
    """
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    probs = torch.softmax(filter_logits(logits / temperature, top_k, top_p), dim=-1)  # (B, V)
    return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)


def _steps(n: int, progress: bool | None, desc: str):
    """range(n), wrapped in a tqdm bar when asked to (or, by default, when n is large)."""
    if not (n >= 200 if progress is None else progress):
        return range(n)
    from tqdm.auto import tqdm  # a widget in notebooks, text elsewhere

    return tqdm(range(n), desc=desc, leave=False)


def _check_sampling(
    max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None
) -> None:
    """Validate generate()'s sampling arguments."""
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ValueError(
            f"max_new_tokens must be a non-negative integer, but received {max_new_tokens!r}."
        )
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise ValueError(
            f"temperature must be >= 0 (0 means greedy), but received {temperature!r}."
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, but received {top_k!r}.")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must lie in (0, 1] or be None, but received {top_p!r}.")
