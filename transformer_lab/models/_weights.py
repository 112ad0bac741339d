"""Copy named weights into a model, checking every name and shape on the way.

The ``from_huggingface`` converters and the MiniLM loader first translate a foreign state dict
into our parameter names, then call :func:`load_weights`. A mistake in a mapping then fails
loudly, naming the parameter and both shapes, instead of broadcasting or silently skipping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch
from torch import Tensor, nn

__all__ = ["load_weights", "linear_from_conv1d"]


def load_weights(
    model: nn.Module,
    weights: Mapping[str, Tensor],
    source: str = "the given weights",
    allow_missing: Iterable[str] = (),
) -> nn.Module:
    """Copy ``weights`` (our parameter names -> tensors) into ``model`` in place.

    Args:
        model: the module to fill; tied parameters are listed once (under their first name).
        weights: one tensor per parameter or persistent buffer, named as in ``model``.
        source: where the weights come from, for error messages.
        allow_missing: parameter names that may keep their current values.
    Returns:
        ``model``, for chaining.
    Raises:
        KeyError: a weight names no parameter of the model, or a parameter gets no weight.
        ValueError: a weight's shape differs from its parameter's.
    """
    targets: dict[str, Tensor] = dict(model.named_parameters())
    targets.update((name, b) for name, b in model.named_buffers() if _is_persistent(model, name))
    unknown = sorted(set(weights) - set(targets))
    if unknown:
        raise KeyError(
            f"{source} contain {unknown[0]!r}, which is not a parameter of {type(model).__name__}."
        )
    missing = sorted(set(targets) - set(weights) - set(allow_missing))
    if missing:
        raise KeyError(
            f"{source} have no weight for parameter {missing[0]!r} of {type(model).__name__}."
        )
    with torch.no_grad():
        for name, value in weights.items():
            target = targets[name]
            if tuple(value.shape) != tuple(target.shape):
                raise ValueError(
                    f"cannot load {name!r} from {source}: the model expects shape {tuple(target.shape)}, "
                    f"but the weights have shape {tuple(value.shape)}."
                )
            target.copy_(value.to(dtype=target.dtype, device=target.device))
    return model


def linear_from_conv1d(weight: Tensor) -> Tensor:
    """GPT-2's ``Conv1D`` stores an (in, out) matrix; ``nn.Linear`` stores (out, in)."""
    return weight.t().contiguous()  # (in, out) -> (out, in)


def _is_persistent(model: nn.Module, name: str) -> bool:
    """True if the buffer ``name`` is saved in the state dict (non-persistent ones are derived)."""
    owner_name, _, leaf = name.rpartition(".")
    owner = model.get_submodule(owner_name) if owner_name else model
    return leaf not in owner._non_persistent_buffers_set
