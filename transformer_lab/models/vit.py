"""ViT: an image is a sequence of patches (Dosovitskiy et al., 2021, "An Image is Worth 16x16 Words").

    patches  = the image cut into N = (H / P) * (W / P) squares of P x P pixels, each flattened
    x_0      = [CLS; patches W_E] + positions          W_E: (channels * P * P, C)
    x_l      = Block_l(x_{l-1})                        pre-norm encoder blocks
    logits   = head(LayerNorm(x_L)[CLS])

Multiplying flattened patches by one matrix is exactly a convolution with kernel P and stride
P (:meth:`PatchEmbedding.to_conv2d`), which is how most libraries write it. Positions are learned
(as in the paper) or fixed 2-D sinusoids, one half of the channels for the row and one for the
column. Attention maps, (B, H, N + 1, N + 1) per layer, come back on request for plotting.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._validate import check_tensor
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.models._weights import load_weights
from transformer_lab.models.outputs import ViTOutput
from transformer_lab.models.patches import PatchEmbedding, patchify
from transformer_lab.models.vit_config import ViTConfig
from transformer_lab.models.vit_weights import config_from_huggingface, vit_weights
from transformer_lab.positional import LearnedPositionalEmbedding, sinusoidal_encoding_2d

__all__ = ["ViTConfig", "ViT", "PatchEmbedding", "patchify"]


class ViT(nn.Module):
    """Vision transformer for image classification.

    Args:
        config: a :class:`ViTConfig`.
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise TypeError(f"ViT expects a ViTConfig, but received {type(config).__name__}.")
        self.config = c = config
        self.patch_emb = PatchEmbedding(c.patch_size, c.n_channels, c.d_model)
        self.cls_token = nn.Parameter(
            torch.zeros(1, 1, c.d_model)
        )  # (1, 1, C), one learned "summary" token
        if c.position == "learned":
            self.pos_emb = LearnedPositionalEmbedding(c.n_patches + 1, c.d_model)  # (N + 1, C)
        else:
            pe = torch.cat(
                [torch.zeros(1, c.d_model), sinusoidal_encoding_2d(*c.grid, c.d_model)]
            )  # (N + 1, C)
            self.register_buffer(
                "pos_table", pe, persistent=False
            )  # [CLS] gets no position: row 0 is zero
            self.pos_emb = None
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            Block(
                c.d_model,
                c.n_heads,
                c.d_ff,
                c.dropout,
                c.activation,
                norm_first=True,
                eps=c.eps,
                fused=c.fused,
            )
            for _ in range(c.n_layers)
        )
        self.norm_f = LayerNorm(c.d_model, c.eps, fused=c.fused)
        self.head = nn.Linear(c.d_model, c.n_classes)  # reads the [CLS] token
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        if self.pos_emb is not None:
            nn.init.trunc_normal_(self.pos_emb.weight, std=0.02)

    def forward(
        self, pixel_values: Tensor, labels: Tensor | None = None, output_attentions: bool = False
    ) -> ViTOutput:
        """Classify a batch of images.

        Args:
            pixel_values: (B, channels, height, width) at the configured size.
            labels: optional (B,) class indices for the cross-entropy loss.
            output_attentions: also return each layer's (B, H, N + 1, N + 1) weights.
        Returns:
            :class:`ViTOutput` with logits (B, n_classes) and last_hidden_state (B, N + 1, C).
        """
        self._check_images(pixel_values)
        B = pixel_values.shape[0]
        x = self.patch_emb(pixel_values)  # (B, N, C)
        x = torch.cat([self.cls_token.expand(B, -1, -1), x], dim=1)  # (B, N + 1, C)
        pos = self.pos_emb(x.shape[1]) if self.pos_emb is not None else self.pos_table  # (N + 1, C)
        x = self.drop(x + pos)
        attentions = []
        for block in self.blocks:
            x, w = block(x, need_weights=output_attentions)
            if output_attentions:
                attentions.append(w.self_attn)  # (B, H, N + 1, N + 1)
        x = self.norm_f(x)  # (B, N + 1, C)
        logits = self.head(x[:, 0])  # (B, n_classes)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return ViTOutput(logits, x, loss, tuple(attentions) if output_attentions else None)

    def _check_images(self, pixel_values: object) -> None:
        c = self.config
        check_tensor("pixel_values", pixel_values, dims=4)
        assert isinstance(pixel_values, Tensor)
        if not pixel_values.is_floating_point():
            raise TypeError(
                f"pixel_values must be a floating-point tensor, but received dtype {pixel_values.dtype}."
            )
        _, ch, H, W = pixel_values.shape
        if ch != c.n_channels:
            raise ValueError(
                f"pixel_values must have n_channels={c.n_channels} channels in dimension 1 "
                f"(B, channels, height, width), but received shape {tuple(pixel_values.shape)}."
            )
        if H % c.patch_size or W % c.patch_size:
            raise ValueError(
                f"image height and width must be multiples of patch_size={c.patch_size}, but "
                f"received an image of {H}x{W}."
            )
        if (H, W) != c.image_hw:
            raise ValueError(
                f"images must be {c.image_hw[0]}x{c.image_hw[1]} (the configured image_size, "
                f"which fixes the position table), but received {H}x{W}."
            )

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> ViT:
        """Build a ViT with the weights of a Hugging Face ``ViTForImageClassification`` or ``ViTModel``.

        From a ``ViTModel`` (no classifier) our head keeps its initial weights and the model's
        pooler, which classification does not use, is left out.

        Returns:
            our :class:`ViT` in eval mode.
        """
        sd = model.state_dict()
        has_head = "classifier.weight" in sd
        config = config_from_huggingface(model.config, has_head)
        w = vit_weights(sd, config)
        ours = cls(config)
        load_weights(
            ours,
            w,
            "the Hugging Face ViT weights",
            allow_missing=() if has_head else ("head.weight", "head.bias"),
        )
        return ours.eval()
