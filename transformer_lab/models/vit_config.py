"""The shape and options of a ViT: :class:`ViTConfig` (its own module, so the Hugging Face weight
mapping can build one without importing the model)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from transformer_lab import _validate
from transformer_lab.blocks import ACTIVATIONS

__all__ = ["ViTConfig"]


@dataclass(frozen=True)
class ViTConfig:
    """Shape and options of a :class:`ViT` (defaults: ViT-B/16 on 224 x 224 ImageNet images)."""

    image_size: int | tuple[int, int] = 224  # height and width in pixels (an int means square)
    patch_size: int = 16  # P: each patch is P x P pixels
    n_channels: int = 3  # colour channels (1 for grayscale)
    n_classes: int = 1000  # outputs of the classification head
    n_layers: int = 12  # encoder blocks
    n_heads: int = 12  # attention heads H
    d_model: int = 768  # width C
    d_ff: int | None = None  # MLP hidden width; None means 4 * d_model
    dropout: float = 0.0  # on embeddings, attention weights and sublayer outputs (training only)
    eps: float = 1e-12  # layer-norm epsilon (Hugging Face ViT: 1e-12)
    activation: str = "gelu"  # exact erf GELU
    position: str = "learned"  # "learned" or "sinusoidal_2d" (fixed, needs d_model % 4 == 0)
    fused: bool = True  # PyTorch's fused attention and layer-norm kernels (explicit path when weights are requested)

    def __post_init__(self) -> None:
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        size = self.image_size
        sizes = (size, size) if isinstance(size, int) else tuple(size)
        if len(sizes) != 2 or any(
            isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in sizes
        ):
            raise ValueError(
                f"ViTConfig.image_size must be a positive int or (height, width), but received image_size={size!r}."
            )
        _validate.check_positive(
            self, "patch_size", "n_channels", "n_classes", "n_layers", "n_heads", "d_model", "d_ff"
        )
        if any(s % self.patch_size for s in sizes):
            raise ValueError(
                f"ViTConfig.image_size must be a multiple of patch_size so the patches tile the image, "
                f"but received image_size={size!r} and patch_size={self.patch_size}."
            )
        _validate.check_heads(self)
        _validate.check_probability(self, "dropout")
        _validate.check_eps(self)
        _validate.check_choice(self, "activation", ACTIVATIONS)
        _validate.check_choice(self, "position", ("learned", "sinusoidal_2d"))
        if self.position == "sinusoidal_2d" and self.d_model % 4:
            raise ValueError(
                f"ViTConfig.d_model must be divisible by 4 for 2-D sinusoidal positions (sin/cos pairs for rows "
                f"and for columns), but received d_model={self.d_model}."
            )

    @property
    def image_hw(self) -> tuple[int, int]:
        """(height, width) in pixels."""
        s = self.image_size
        return (s, s) if isinstance(s, int) else (s[0], s[1])

    @property
    def grid(self) -> tuple[int, int]:
        """Patches per column and per row."""
        h, w = self.image_hw
        return h // self.patch_size, w // self.patch_size

    @property
    def n_patches(self) -> int:
        """N, the number of patch tokens (the [CLS] token comes on top)."""
        gh, gw = self.grid
        return gh * gw

    @classmethod
    def base(cls, **overrides: Any) -> ViTConfig:
        """ViT-B/16: 224 x 224 RGB images, 16 x 16 patches, 12 layers, width 768."""
        return dataclasses.replace(cls(), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> ViTConfig:
        """8 x 8 grayscale digits in 2 x 2 patches (N = 16), 4 layers, width 64: trains on a CPU in a minute."""
        base = cls(
            image_size=8,
            patch_size=2,
            n_channels=1,
            n_classes=10,
            n_layers=4,
            n_heads=4,
            d_model=64,
            d_ff=128,
            dropout=0.1,
        )
        return dataclasses.replace(base, **overrides)
