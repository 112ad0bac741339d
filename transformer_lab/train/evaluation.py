"""Evaluation in eval mode without gradients: mean loss, accuracy, and the metrics ``train``
records between steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from transformer_lab.train.batches import Batches, BatchStream, to_device
from transformer_lab.train.losses import LossFn, cross_entropy_loss, inputs_targets, logits_of
from transformer_lab.train.runtime import model_device

__all__ = ["EvalMode", "estimate_loss", "accuracy", "mean_loss", "as_metrics"]


class EvalMode:
    """Context: eval mode and no gradients, restoring the model's previous mode afterwards."""

    def __init__(self, model: nn.Module) -> None:
        self.model, self.was_training = model, model.training
        self._no_grad = torch.no_grad()

    def __enter__(self):
        self.model.eval()
        self._no_grad.__enter__()

    def __exit__(self, *exc):
        self._no_grad.__exit__(*exc)
        self.model.train(self.was_training)


def estimate_loss(
    model: nn.Module,
    batches: Batches,
    loss_fn: LossFn | None = None,
    iters: int | None = 20,
    device: torch.device | str | None = None,
) -> float:
    """Mean loss over ``iters`` batches in eval mode (dropout off), without gradients.

    Args:
        batches: a function returning a batch, or an iterable (``iters=None`` reads all of it).
    """
    loss_fn = cross_entropy_loss if loss_fn is None else loss_fn
    device = model_device(model) if device is None else torch.device(device)
    with EvalMode(model):
        return mean_loss(model, BatchStream(batches, "eval batches"), loss_fn, iters, device)


def accuracy(
    model: nn.Module,
    batches: Batches,
    iters: int | None = None,
    predict_fn: Callable[[nn.Module, Any], tuple[Tensor, Tensor]] | None = None,
    device: torch.device | str | None = None,
) -> float:
    """Share of correct argmax predictions, in eval mode.

    Args:
        batches: ``(x, y)`` batches (a function needs ``iters``; an iterable is read once).
        predict_fn: ``(model, batch) -> (logits (N, K), labels (N,))`` for other batch layouts,
            e.g. ``lambda m, b: (m(b.input_ids, attention_mask=b.attention_mask).logits, b.labels)``.
    """

    def default_predict(m: nn.Module, batch: Any) -> tuple[Tensor, Tensor]:
        x, y = inputs_targets(batch)
        return logits_of(m(x)), y

    predict_fn = default_predict if predict_fn is None else predict_fn
    device = model_device(model) if device is None else torch.device(device)
    correct, total = 0, 0
    with EvalMode(model):
        for batch in BatchStream(batches, "batches").finite(iters):
            logits, labels = predict_fn(model, to_device(batch, device))
            keep = labels != -100  # skip ignored targets (padding)
            correct += int((logits.argmax(-1) == labels)[keep].sum())
            total += int(keep.sum())
    if total == 0:
        raise ValueError(
            "accuracy read no labelled examples; check that the batches are not empty."
        )
    return correct / total


def mean_loss(
    model: nn.Module, stream: BatchStream, loss_fn: LossFn, iters: int | None, device
) -> float:
    """Mean loss over ``iters`` batches; the caller has set eval mode and no_grad."""
    total, count = torch.zeros((), device=device), 0
    for batch in stream.finite(iters):
        total += loss_fn(model, to_device(batch, device)).detach().float()
        count += 1
    if count == 0:
        raise ValueError(
            "eval_batches produced no batches; check that the evaluation data are not empty."
        )
    return total.item() / count


def as_metrics(value: Any) -> dict[str, float]:
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    if isinstance(value, (int, float, Tensor, np.floating)):
        return {"loss": float(value)}
    raise TypeError(
        f"eval_fn must return a number (the loss) or a dict of numbers, but received {type(value).__name__}."
    )
