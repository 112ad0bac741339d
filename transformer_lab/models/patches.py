"""Images as sequences: cut an image into P x P patches and embed each one as a token."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["patchify", "PatchEmbedding"]


def patchify(pixel_values: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping patches and flatten each one.

    Patches are numbered row by row; inside a patch the features run channel, row, column
    (the order of a ``Conv2d`` kernel, so the two formulations share one weight matrix).

    Args:
        pixel_values: (B, channels, height, width), height and width multiples of ``patch_size``.
    Returns:
        (B, N, channels * P * P).
    """
    B, ch, H, W = pixel_values.shape
    P = patch_size
    x = pixel_values.reshape(B, ch, H // P, P, W // P, P)  # (B, ch, gh, P, gw, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, gh, gw, ch, P, P)
    return x.reshape(B, (H // P) * (W // P), ch * P * P)  # (B, N, ch*P*P)


class PatchEmbedding(nn.Module):
    """Flattened patches times one matrix: (B, channels, height, width) -> (B, N, C)."""

    def __init__(self, patch_size: int, n_channels: int, d_model: int) -> None:
        super().__init__()
        self.patch_size, self.n_channels, self.d_model = patch_size, n_channels, d_model
        self.proj = nn.Linear(n_channels * patch_size * patch_size, d_model)  # W_E: (ch*P*P -> C)

    def forward(self, pixel_values: Tensor) -> Tensor:
        return self.proj(patchify(pixel_values, self.patch_size))  # (B, N, C)

    def to_conv2d(self) -> nn.Conv2d:
        """The same map as a convolution with kernel P and stride P (weights shared by value)."""
        P = self.patch_size
        conv = nn.Conv2d(self.n_channels, self.d_model, kernel_size=P, stride=P)
        with torch.no_grad():
            conv.weight.copy_(
                self.proj.weight.view(self.d_model, self.n_channels, P, P)
            )  # (C, ch*P*P) -> (C, ch, P, P)
            conv.bias.copy_(self.proj.bias)
        return conv
