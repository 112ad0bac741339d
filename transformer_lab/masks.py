"""Attention masks, with one meaning everywhere in the package.

**The convention.** A mask is a boolean tensor; ``True`` means "this query may attend to
this key" (the same as ``torch.nn.functional.scaled_dot_product_attention``). It must
broadcast to the attention scores' shape (B, H, T, S): a causal mask is (T, S), a padding
mask is (B, 1, 1, S), and :func:`combine_masks` ANDs any of them together.

Scores at ``False`` positions are set to ``-inf`` *before* the softmax, so they receive
exactly zero weight. A query whose keys are all masked gets zero weights (never NaN).
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab._validate import check_tensor

__all__ = [
    "causal_mask",
    "padding_mask_from_lengths",
    "padding_mask_from_ids",
    "padding_mask_from_attention_mask",
    "combine_masks",
]


def causal_mask(T: int, S: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Lower-triangular mask: query t may attend to keys 0..t (and not to the future).

    With ``S > T`` (a key/value cache holding ``S - T`` earlier tokens), the T queries are
    the *last* T positions, so query t may attend to keys 0..t + (S - T).

    Returns:
        (T, S) bool, ``True`` = may attend.
    """
    S = T if S is None else S
    if T <= 0 or S < T:
        raise ValueError(f"causal_mask needs 0 < T <= S, but received T={T} and S={S}.")
    return torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)


def padding_mask_from_lengths(lengths: Tensor | list[int], S: int | None = None) -> Tensor:
    """Mask out the padding at the end of each sequence, given each sequence's true length.

    Args:
        lengths: (B,) number of real tokens in each sequence.
        S: padded length (defaults to the longest length).
    Returns:
        (B, 1, 1, S) bool, ``True`` at real tokens; broadcasts over heads and queries.
    """
    lengths = torch.as_tensor(lengths)
    check_tensor("lengths", lengths, dims=1)
    S = int(lengths.max()) if S is None else S
    if (lengths < 0).any() or (lengths > S).any():
        raise ValueError(
            f"every length must lie in 0..S={S}, but received lengths {lengths.tolist()}."
        )
    positions = torch.arange(S, device=lengths.device)  # (S,)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, S)


def padding_mask_from_ids(ids: Tensor, pad_id: int) -> Tensor:
    """Mask out every key whose token id is ``pad_id``.

    Args:
        ids: (B, S) token ids.
    Returns:
        (B, 1, 1, S) bool, ``True`` at real tokens.
    """
    check_tensor("ids", ids, dims=2)
    return (ids != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def padding_mask_from_attention_mask(attention_mask: Tensor) -> Tensor:
    """Turn a Hugging Face-style attention mask into ours.

    Args:
        attention_mask: (B, S), 1 (or ``True``) at real tokens and 0 at padding, as tokenizers
            return it.
    Returns:
        (B, 1, 1, S) bool, ``True`` at real tokens; broadcasts over heads and queries.
    """
    check_tensor("attention_mask", attention_mask, dims=2)
    if attention_mask.dtype != torch.bool and bool(
        ((attention_mask != 0) & (attention_mask != 1)).any()
    ):
        bad = attention_mask[(attention_mask != 0) & (attention_mask != 1)][0].item()
        raise ValueError(
            f"attention_mask must hold 1 at real tokens and 0 at padding, but received the value {bad}."
        )
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, S)


def combine_masks(*masks: Tensor | None) -> Tensor | None:
    """AND together any number of boolean masks (``None`` entries are skipped).

    The result broadcasts like its inputs: combining a causal (T, S) mask with a padding
    (B, 1, 1, S) mask gives (B, 1, T, S). Returns ``None`` if every input is ``None``.
    """
    result = None
    for m in masks:
        if m is None:
            continue
        if not isinstance(m, Tensor) or m.dtype != torch.bool:
            got = m.dtype if isinstance(m, Tensor) else type(m).__name__
            raise TypeError(f"combine_masks expects boolean tensors, but received {got}.")
        if result is not None:
            try:
                torch.broadcast_shapes(result.shape, m.shape)
            except RuntimeError:
                raise ValueError(
                    f"masks of shapes {tuple(result.shape)} and {tuple(m.shape)} do not broadcast together."
                ) from None
        result = m if result is None else result & m
    return result
