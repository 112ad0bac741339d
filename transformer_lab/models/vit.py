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

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import _validate
from transformer_lab._validate import check_tensor
from transformer_lab.blocks import ACTIVATIONS, Block, LayerNorm
from transformer_lab.models._weights import load_weights
from transformer_lab.models.outputs import ViTOutput
from transformer_lab.models.patches import PatchEmbedding, patchify
from transformer_lab.positional import LearnedPositionalEmbedding, sinusoidal_encoding_2d

__all__ = ["ViTConfig", "ViT", "PatchEmbedding", "patchify"]


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
                f"pixel_values must have n_channels={c.n_channels} channels in dimension 1 (B, channels, height, width), "
                f"but received shape {tuple(pixel_values.shape)}."
            )
        if H % c.patch_size or W % c.patch_size:
            raise ValueError(
                f"image height and width must be multiples of patch_size={c.patch_size}, but received an image of {H}x{W}."
            )
        if (H, W) != c.image_hw:
            raise ValueError(
                f"images must be {c.image_hw[0]}x{c.image_hw[1]} (the configured image_size, which fixes the position table), "
                f"but received {H}x{W}."
            )

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> ViT:
        """Build a ViT with the weights of a Hugging Face ``ViTForImageClassification`` or ``ViTModel``.

        From a ``ViTModel`` (no classifier) our head keeps its initial weights and the model's
        pooler, which classification does not use, is left out.

        Returns:
            our :class:`ViT` in eval mode.
        """
        hf = model.config
        acts = {
            "gelu": "gelu",
            "gelu_new": "gelu_tanh",
            "gelu_pytorch_tanh": "gelu_tanh",
            "relu": "relu",
        }
        if getattr(hf, "model_type", None) != "vit":
            raise ValueError(
                f"from_huggingface expects a ViT model, but received model_type={getattr(hf, 'model_type', None)!r}."
            )
        if hf.hidden_act not in acts or not getattr(hf, "qkv_bias", True):
            raise ValueError(
                f"ViT supports biased q/k/v and the activations {sorted(acts)}, but the model's config differs."
            )
        sd = model.state_dict()
        p = "vit." if "vit.embeddings.cls_token" in sd else ""
        has_head = "classifier.weight" in sd
        config = ViTConfig(
            image_size=hf.image_size if isinstance(hf.image_size, int) else tuple(hf.image_size),
            patch_size=hf.patch_size if isinstance(hf.patch_size, int) else hf.patch_size[0],
            n_channels=hf.num_channels,
            n_classes=hf.num_labels if has_head else 1000,
            n_layers=hf.num_hidden_layers,
            n_heads=hf.num_attention_heads,
            d_model=hf.hidden_size,
            d_ff=hf.intermediate_size,
            eps=hf.layer_norm_eps,
            activation=acts[hf.hidden_act],
            dropout=0.0,
        )
        used: set[str] = set()

        def take(key: str) -> Tensor:
            used.add(key)
            return sd[key]

        e, C = p + "embeddings.", config.d_model
        w = {
            "cls_token": take(e + "cls_token"),  # (1, 1, C)
            "pos_emb.weight": take(e + "position_embeddings")[0],  # (1, N + 1, C) -> (N + 1, C)
            "patch_emb.proj.weight": take(e + "patch_embeddings.projection.weight").reshape(
                C, -1
            ),  # (C, ch, P, P) -> (C, ch*P*P)
            "patch_emb.proj.bias": take(e + "patch_embeddings.projection.bias"),
        }
        names = {
            "self_attn.q_proj": "attention.q_proj",
            "self_attn.k_proj": "attention.k_proj",
            "self_attn.v_proj": "attention.v_proj",
            "self_attn.out_proj": "attention.o_proj",
            "self_attn_norm": "layernorm_before",
            "mlp_norm": "layernorm_after",
            "mlp.fc1": "mlp.fc1",
            "mlp.fc2": "mlp.fc2",
        }
        for i in range(config.n_layers):
            for ours, theirs in names.items():
                for leaf in ("weight", "bias"):
                    w[f"blocks.{i}.{ours}.{leaf}"] = take(f"{p}layers.{i}.{theirs}.{leaf}")
        w["norm_f.weight"], w["norm_f.bias"] = (
            take(p + "layernorm.weight"),
            take(p + "layernorm.bias"),
        )
        if has_head:
            w["head.weight"], w["head.bias"] = take("classifier.weight"), take("classifier.bias")
        unused = sorted(k for k in sd if k not in used and not k.startswith(p + "pooler."))
        if unused:
            raise ValueError(
                f"the Hugging Face model has weights ViT would ignore, starting with {unused[0]!r}."
            )
        ours = cls(config)
        load_weights(
            ours,
            w,
            "the Hugging Face ViT weights",
            allow_missing=() if has_head else ("head.weight", "head.bias"),
        )
        return ours.eval()
