"""Where batches come from and how they reach the model.

A training or evaluation set is given either as a function returning one batch (called each
time, e.g. ``lambda: data.get_batch("train", 64, 12)``) or as an iterable of batches (a list or
a DataLoader, cycled over epochs); :class:`BatchStream` reads both the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor

__all__ = ["Batches", "BatchStream", "to_device"]

Batches = Callable[[], Any] | Iterable[Any]


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor inside a (nested) batch to ``device``, keeping the batch's type."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # NamedTuple
        return type(batch)(*(to_device(b, device) for b in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    if isinstance(batch, Mapping):
        return {k: to_device(v, device) for k, v in batch.items()}
    return batch


class BatchStream:
    """Uniform access to batches from a function (called each time) or an iterable (cycled)."""

    def __init__(self, batches: Batches, name: str = "batches") -> None:
        if callable(batches) and not hasattr(batches, "__iter__"):
            self._fn, self._iterable = batches, None
        elif hasattr(batches, "__iter__"):
            self._fn, self._iterable = None, batches
        else:
            raise TypeError(
                f"{name} must be a function returning one batch (e.g. lambda: get_batch(...)) or an "
                f"iterable of batches (e.g. a DataLoader), but received {type(batches).__name__}."
            )
        self._it = None
        self.name = name

    def next(self) -> Any:
        if self._fn is not None:
            return self._fn()
        if self._it is None:
            self._it = iter(self._iterable)
        try:
            return next(self._it)
        except StopIteration:
            self._it = iter(self._iterable)  # new epoch
            if self._it is self._iterable:  # a one-shot iterator/generator cannot restart
                raise RuntimeError(
                    f"{self.name} ran out: a generator can be read only once; pass a function "
                    f"returning one batch, a list, or a DataLoader instead."
                ) from None
            try:
                return next(self._it)
            except StopIteration:
                raise RuntimeError(f"{self.name} is empty: it produced no batch.") from None

    def finite(self, iters: int | None):
        """Up to ``iters`` batches (functions need ``iters``; iterables default to one pass)."""
        if self._fn is not None:
            if iters is None:
                raise ValueError(
                    f"{self.name} is a function, so pass iters= to say how many batches to read."
                )
            return (self._fn() for _ in range(iters))
        it = iter(self._iterable)
        return it if iters is None else (b for _, b in zip(range(iters), it))
