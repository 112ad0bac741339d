"""How to get one scalar loss from a model and a batch: ``loss_fn(model, batch) -> loss``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["LossFn", "cross_entropy_loss", "model_loss", "logits_of", "inputs_targets"]

LossFn = Callable[[nn.Module, Any], Tensor]


def logits_of(output: Any) -> Tensor:
    """A model's logits, whether it returns a tensor or an output object with ``.logits``."""
    logits = getattr(output, "logits", output)
    if not isinstance(logits, Tensor):
        raise TypeError(
            f"expected the model to return logits (a tensor or an object with .logits), "
            f"but received {type(output).__name__}; pass loss_fn=... to say how to get the loss."
        )
    return logits


def inputs_targets(batch: Any) -> tuple[Any, Tensor]:
    if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
        got = type(batch).__name__
        if isinstance(batch, (tuple, list)):
            got = f"a {got} of length {len(batch)}"
        raise TypeError(
            f"the default loss_fn expects batches of (inputs, targets), but received {got}; "
            f"pass loss_fn=lambda model, batch: ... for other batches."
        )
    return batch[0], batch[1]


def cross_entropy_loss(model: nn.Module, batch: Any) -> Tensor:
    """Default loss: ``cross_entropy(model(x), y)`` for a batch ``(x, y)``.

    Works for classifiers (logits (B, K), y (B,)) and language models (logits (B, T, V),
    y (B, T)) alike; targets equal to -100 are ignored.
    """
    x, y = inputs_targets(batch)
    logits = logits_of(model(x))  # (..., V)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    )  # (B*T, V) vs (B*T,)


def model_loss(model: nn.Module, batch: Any) -> Tensor:
    """Loss computed by the model itself, from its output's ``.loss``.

    A named tuple or dict is passed by keyword (``ClassificationBatch`` -> ``input_ids=,
    attention_mask=, labels=``; ``TranslationBatch`` -> ``src=, tgt=, targets=``), a plain
    tuple by position (``(idx, targets)`` -> ``GPT(idx, targets)``).
    """
    if isinstance(batch, tuple) and hasattr(batch, "_asdict"):
        out = model(**batch._asdict())
    elif isinstance(batch, Mapping):
        out = model(**batch)
    elif isinstance(batch, (tuple, list)):
        out = model(*batch)
    else:
        out = model(batch)
    loss = getattr(out, "loss", None)
    if not isinstance(loss, Tensor):
        raise TypeError(
            f"model_loss expects the model to return an output with a .loss tensor, "
            f"but received {type(out).__name__} with loss={loss!r}."
        )
    return loss
