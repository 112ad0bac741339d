"""GPT: a decoder-only transformer trained to predict the next token.

    x_0 = E[idx] + P[0..T-1]                       token + learned position embeddings
    x_l = Block_l(x_{l-1})                         pre-norm, causal self-attention + MLP
    logits = LayerNorm(x_L) E^T                    output head tied to the token embedding (by default)

Pre-norm (``x + f(norm(x))``) as in GPT-2 (Radford et al., 2019), which moved the layer norm
in front of each sublayer and added a final one, so deep stacks train without warm-up tricks.
Generation samples one token at a time with temperature, top-k and nucleus (top-p) filtering
(Holtzman et al., 2020); a key/value cache makes each new token cost O(T) instead of O(T^2).

The config, the model, cached generation and the GPT-2 loader stay in this one file (about 340
lines) so the whole GPT reads top to bottom, as in nanoGPT; sampling lives in :mod:`.sampling`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import _validate
from transformer_lab.blocks import ACTIVATIONS, Block, LayerNorm
from transformer_lab.heads import KVCache
from transformer_lab.models._weights import linear_from_conv1d, load_weights
from transformer_lab.models.outputs import CausalLMOutput
from transformer_lab.models.sampling import (
    _check_sampling,
    _steps,
    filter_logits,
    sample_next_token,
)
from transformer_lab.positional import LearnedPositionalEmbedding

__all__ = ["GPTConfig", "GPT", "filter_logits", "sample_next_token"]


@dataclass(frozen=True)
class GPTConfig:
    """Shape and options of a :class:`GPT` (defaults: GPT-2 small, 124M parameters)."""

    vocab_size: int = 50257  # V: GPT-2's byte-pair vocabulary
    max_len: int = 1024  # context length: the learned position table has this many rows
    n_layers: int = 12  # number of blocks
    n_heads: int = 12  # attention heads H per block
    d_model: int = 768  # width C of the residual stream
    d_ff: int | None = None  # MLP hidden width; None means 4 * d_model
    dropout: float = 0.0  # on embeddings, attention weights and sublayer outputs (training only)
    bias: bool = True  # biases in linear layers and layer norms (GPT-2 has them)
    eps: float = 1e-5  # layer-norm epsilon (GPT-2: 1e-5)
    activation: str = "gelu_tanh"  # GPT-2 uses the tanh approximation of GELU
    fused: bool = True  # PyTorch's fused attention and layer-norm kernels (explicit path when weights are requested)
    tie_weights: bool = True  # the output head reuses the token embedding E (GPT-2); False gives it its own (V, C) matrix

    def __post_init__(self) -> None:
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        _validate.check_positive(
            self, "vocab_size", "max_len", "n_layers", "n_heads", "d_model", "d_ff"
        )
        _validate.check_heads(self)
        _validate.check_probability(self, "dropout")
        _validate.check_eps(self)
        _validate.check_choice(self, "activation", ACTIVATIONS)

    @classmethod
    def tiny(cls, **overrides: Any) -> GPTConfig:
        """4 layers, 4 heads, width 128, context 64, character vocabulary of 65 (tiny Shakespeare).

        About 0.8M parameters: 2,000 steps at batch 12 take one to two minutes on two CPU cores.
        Uses the exact GELU (as nanoGPT does): on a CPU it is cheaper than GPT-2's tanh form.
        """
        base = cls(
            vocab_size=65,
            max_len=64,
            n_layers=4,
            n_heads=4,
            d_model=128,
            dropout=0.0,
            activation="gelu",
        )
        return dataclasses.replace(base, **overrides)

    @classmethod
    def gpt2(cls, **overrides: Any) -> GPTConfig:
        """GPT-2 small's shape: 12 layers, 12 heads, width 768, context 1024, 50257 tokens."""
        return dataclasses.replace(cls(), **overrides)


class GPT(nn.Module):
    """A GPT-2-style causal language model.

    Args:
        config: a :class:`GPTConfig`.
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"GPT expects a GPTConfig, but received {type(config).__name__}.")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)  # E: (V, C)
        self.pos_emb = LearnedPositionalEmbedding(c.max_len, c.d_model)  # P: (max_len, C)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            Block(
                c.d_model,
                c.n_heads,
                c.d_ff,
                dropout=c.dropout,
                activation=c.activation,
                norm_first=True,
                bias=c.bias,
                eps=c.eps,
                fused=c.fused,
            )
            for _ in range(c.n_layers)
        )
        self.norm_f = LayerNorm(c.d_model, c.eps, c.bias, fused=c.fused)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        # Weight tying (Press & Wolf, 2017): reading a token in and writing it out share E.
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight  # one (V, C) matrix reads and writes tokens
        self.apply(self._init_weights)
        # GPT-2: scale the projections that write into the residual stream by 1/sqrt(2 * n_layers),
        # so the stream's variance does not grow with depth (two writes per block).
        for block in self.blocks:
            for proj in (block.self_attn.out_proj, block.mlp.fc2):
                nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self, exclude_embeddings: bool = False) -> int:
        """Number of parameters (a tied output head counted once)."""
        n = sum(p.numel() for p in self.parameters())
        if exclude_embeddings:
            n -= self.tok_emb.weight.numel() + self.pos_emb.weight.numel()
        return n

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, output_attentions: bool = False
    ) -> CausalLMOutput:
        """Next-token logits for every position, and the loss if targets are given.

        Args:
            idx: (B, T) token ids, T <= max_len.
            targets: (B, T) the token that follows each position; ``-100`` is ignored.
            output_attentions: also return each layer's (B, H, T, T) attention weights.
        Returns:
            :class:`CausalLMOutput` with logits (B, T, V), loss and attentions.
        """
        c = self.config
        _validate.check_token_ids("idx", idx, c.vocab_size, c.max_len)
        if targets is not None and tuple(targets.shape) != tuple(idx.shape):
            raise ValueError(
                f"targets must have the shape of idx {tuple(idx.shape)}, but received shape {tuple(targets.shape)}."
            )
        B, T = idx.shape
        x = self.drop(self.tok_emb(idx) + self.pos_emb(T))  # (B, T, C)
        attentions = []
        for block in self.blocks:
            x, w = block(x, is_causal=True, need_weights=output_attentions)
            if output_attentions:
                attentions.append(w.self_attn)  # (B, H, T, T)
        logits = self.lm_head(self.norm_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(B * T, c.vocab_size), targets.reshape(B * T)
            )  # (B*T, V) vs (B*T,)
        return CausalLMOutput(logits, loss, tuple(attentions) if output_attentions else None)

    def _forward_cached(self, idx: Tensor, caches: list[KVCache]) -> Tensor:
        """Run only the new tokens ``idx`` (B, T) past the cached ones; return the last (B, V) logits."""
        T, offset = idx.shape[1], caches[0].length
        x = self.tok_emb(idx) + self.pos_emb(
            T, offset=offset
        )  # (B, T, C), positions offset..offset+T-1
        for block, cache in zip(self.blocks, caches):
            # Causal over the S = offset + T keys: each new query sees every key up to its own.
            x, _ = block(x, is_causal=True, cache=cache)
        return self.lm_head(self.norm_f(x[:, -1]))  # (B, V)

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        progress: bool | None = None,
    ) -> Tensor:
        """Extend each prompt by ``max_new_tokens`` tokens, one at a time.

        With ``use_cache`` each step feeds only the newest token and reuses the cached keys and
        values, giving the same tokens as recomputing the whole context. Once the context fills
        the position table (max_len tokens), the window slides: every later step recomputes
        the last max_len tokens from scratch, exactly like ``use_cache=False``, because the
        cached keys were computed at positions that have since shifted.

        Args:
            idx: (B, T0) prompt ids.
            max_new_tokens: how many tokens to add.
            temperature: divides the logits; 0 means greedy decoding.
            top_k: sample only among the k most likely tokens.
            top_p: sample only from the nucleus holding probability mass top_p.
            use_cache: reuse keys and values between steps.
            generator: a seeded ``torch.Generator`` for reproducible sampling.
            progress: show a tqdm bar; by default only for long runs (200 tokens or more).
        Returns:
            (B, T0 + max_new_tokens) ids, the prompt included.
        """
        c = self.config
        _validate.check_token_ids("idx", idx, c.vocab_size)
        _check_sampling(max_new_tokens, temperature, top_k, top_p)
        was_training = self.training
        self.eval()  # dropout off: sampling must not depend on it
        try:
            caches: list[KVCache] | None = None
            for _ in _steps(max_new_tokens, progress, "generating"):
                window = idx[:, -c.max_len :]  # crop to what the position table covers
                if not use_cache:
                    logits = self(window).logits[:, -1]  # (B, V)
                elif caches is None or caches[0].length >= c.max_len:
                    caches = [KVCache() for _ in self.blocks]  # (re)fill from the cropped window
                    logits = self._forward_cached(window, caches)
                else:
                    logits = self._forward_cached(idx[:, -1:], caches)
                next_id = sample_next_token(logits, temperature, top_k, top_p, generator)  # (B, 1)
                idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
        finally:
            self.train(was_training)
        return idx

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> GPT:
        """Build a GPT with the weights of a Hugging Face ``GPT2LMHeadModel`` (or ``GPT2Model``).

        GPT-2 keeps its linear layers in ``Conv1D`` modules that store (in, out) matrices, and
        packs W_q, W_k, W_v into one ``c_attn``; both are undone here.

        Returns:
            our :class:`GPT` in eval mode.
        """
        hf = model.config
        activations = {
            "gelu_new": "gelu_tanh",
            "gelu_pytorch_tanh": "gelu_tanh",
            "gelu": "gelu",
            "relu": "relu",
        }
        if getattr(hf, "model_type", None) != "gpt2":
            raise ValueError(
                f"from_huggingface expects a GPT-2 model, but received model_type={getattr(hf, 'model_type', None)!r}."
            )
        if hf.activation_function not in activations:
            raise ValueError(
                f"GPT supports the activations {sorted(activations)}, but the model uses {hf.activation_function!r}."
            )
        if (
            not hf.scale_attn_weights
            or hf.scale_attn_by_inverse_layer_idx
            or getattr(hf, "add_cross_attention", False)
        ):
            raise ValueError(
                "GPT supports GPT-2's standard attention only (scaled by 1/sqrt(D), no cross-attention), but the model's config differs."
            )
        tied = getattr(hf, "tie_word_embeddings", True)
        config = GPTConfig(
            vocab_size=hf.vocab_size,
            max_len=hf.n_positions,
            n_layers=hf.n_layer,
            n_heads=hf.n_head,
            d_model=hf.n_embd,
            d_ff=hf.n_inner or 4 * hf.n_embd,
            eps=hf.layer_norm_epsilon,
            activation=activations[hf.activation_function],
            dropout=0.0,
            tie_weights=tied,
        )
        ours = cls(config)
        sd = model.state_dict()
        p = "transformer." if "transformer.wte.weight" in sd else ""
        used = (
            {"lm_head.weight"} if tied else set()
        )  # a tied head is wte again, so it carries nothing new

        def take(key: str) -> Tensor:
            used.add(p + key)
            return sd[p + key]

        C = config.d_model
        w = {"tok_emb.weight": take("wte.weight"), "pos_emb.weight": take("wpe.weight")}
        for i in range(config.n_layers):
            h, o = f"h.{i}.", f"blocks.{i}."
            qkv_w = linear_from_conv1d(take(h + "attn.c_attn.weight"))  # (C, 3C) -> (3C, C)
            qkv_b = take(h + "attn.c_attn.bias")  # (3C,)
            for name, wt, bs in zip(
                "qkv", qkv_w.split(C, dim=0), qkv_b.split(C)
            ):  # each (C, C), (C,)
                w[o + f"self_attn.{name}_proj.weight"], w[o + f"self_attn.{name}_proj.bias"] = (
                    wt,
                    bs,
                )
            w[o + "self_attn.out_proj.weight"] = linear_from_conv1d(take(h + "attn.c_proj.weight"))
            w[o + "self_attn.out_proj.bias"] = take(h + "attn.c_proj.bias")
            w[o + "mlp.fc1.weight"] = linear_from_conv1d(take(h + "mlp.c_fc.weight"))
            w[o + "mlp.fc1.bias"] = take(h + "mlp.c_fc.bias")
            w[o + "mlp.fc2.weight"] = linear_from_conv1d(take(h + "mlp.c_proj.weight"))
            w[o + "mlp.fc2.bias"] = take(h + "mlp.c_proj.bias")
            for ours_norm, hf_norm in (("self_attn_norm", "ln_1"), ("mlp_norm", "ln_2")):
                w[o + f"{ours_norm}.weight"] = take(h + f"{hf_norm}.weight")
                w[o + f"{ours_norm}.bias"] = take(h + f"{hf_norm}.bias")
        w["norm_f.weight"], w["norm_f.bias"] = take("ln_f.weight"), take("ln_f.bias")
        if not tied:
            if "lm_head.weight" not in sd:
                raise ValueError(
                    "the Hugging Face model has tie_word_embeddings=False but no lm_head: load a GPT2LMHeadModel."
                )
            used.add("lm_head.weight")
            w["lm_head.weight"] = sd["lm_head.weight"]
        unused = sorted(
            k for k in sd if k not in used and not k.endswith((".attn.bias", ".attn.masked_bias"))
        )
        if unused:
            raise ValueError(
                f"the Hugging Face model has weights GPT would ignore, starting with {unused[0]!r}."
            )
        load_weights(ours, w, source="the Hugging Face GPT-2 weights")
        return ours.eval()
