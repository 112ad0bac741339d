"""GPT: a decoder-only transformer trained to predict the next token.

    x_0 = E[idx] + P[0..T-1]                       token + learned position embeddings
    x_l = Block_l(x_{l-1})                         pre-norm, causal self-attention + MLP
    logits = LayerNorm(x_L) E^T                    output head tied to the token embedding (by default)

Pre-norm (``x + f(norm(x))``) as in GPT-2 (Radford et al., 2019), which moved the layer norm
in front of each sublayer and added a final one, so deep stacks train without warm-up tricks.
Generation samples one token at a time with temperature, top-k and nucleus (top-p) filtering
(Holtzman et al., 2020); a key/value cache makes each new token cost O(T) instead of O(T^2).

Sampling lives in :mod:`.sampling`, the GPT-2 weight mapping in :mod:`.gpt_weights`, the config in
:mod:`.gpt_config`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import _validate
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.heads import KVCache, one_row_linear
from transformer_lab.models._weights import load_weights
from transformer_lab.models.gpt_config import GPTConfig
from transformer_lab.models.gpt_weights import config_from_huggingface, gpt2_weights
from transformer_lab.models.outputs import CausalLMOutput
from transformer_lab.models.sampling import (
    _check_sampling,
    _steps,
    filter_logits,
    sample_next_token,
)
from transformer_lab.positional import LearnedPositionalEmbedding

__all__ = ["GPTConfig", "GPT", "filter_logits", "sample_next_token"]


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
        x, attentions = self._trunk(idx, output_attentions)  # (B, T, C)
        logits = self.lm_head(self.norm_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(
                logits.view(B * T, c.vocab_size), targets.reshape(B * T)
            )  # (B*T, V) vs (B*T,)
        return CausalLMOutput(logits, loss, attentions)

    def _trunk(
        self, idx: Tensor, output_attentions: bool = False
    ) -> tuple[Tensor, tuple[Tensor, ...] | None]:
        """Embeddings and blocks, no final norm: (B, T) ids -> (B, T, C) and the attention weights."""
        x = self.drop(self.tok_emb(idx) + self.pos_emb(idx.shape[1]))  # (B, T, C)
        attentions = []
        for block in self.blocks:
            x, w = block(x, is_causal=True, need_weights=output_attentions)
            if output_attentions:
                attentions.append(w.self_attn)  # (B, H, T, T)
        return x, (tuple(attentions) if output_attentions else None)

    def _forward_cached(self, idx: Tensor, caches: list[KVCache], plain: bool = False) -> Tensor:
        """Run only the new tokens ``idx`` (B, T) past the cached ones; return the last (B, V) logits.

        ``plain``: the caller checked that every block is :meth:`Block.plain`, so one new token
        may take :meth:`Block.decode_step` (same numbers, less per-call overhead).
        """
        T, offset = idx.shape[1], caches[0].length
        x = self.tok_emb(idx) + self.pos_emb(
            T, offset=offset
        )  # (B, T, C), positions offset..offset+T-1
        if plain and T == 1 and not self.training and not torch.is_grad_enabled():
            for block, cache in zip(self.blocks, caches):
                x = block.decode_step(x, cache)  # (B, 1, C)
        else:
            for block, cache in zip(self.blocks, caches):
                # Causal over the S = offset + T keys: each new query sees every key up to its own.
                x, _ = block(x, is_causal=True, cache=cache)
        return one_row_linear(self.lm_head, self.norm_f(x[:, -1]))  # (B, V)

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
            plain = all(type(b) is Block and b.plain() for b in self.blocks)
            caches: list[KVCache] | None = None
            for _ in _steps(max_new_tokens, progress, "generating"):
                window = idx[:, -c.max_len :]  # crop to what the position table covers
                if not use_cache:  # the whole window again, but logits for its last position only
                    last = self.norm_f(self._trunk(window)[0][:, -1])  # (B, C)
                    logits = one_row_linear(self.lm_head, last)  # (B, V)
                elif caches is None or caches[0].length >= c.max_len:
                    # (Re)fill from the cropped window, into buffers sized for the whole run.
                    room = min(c.max_len, window.shape[1] + max_new_tokens)
                    caches = [KVCache(capacity=room) for _ in self.blocks]
                    logits = self._forward_cached(window, caches)
                else:
                    logits = self._forward_cached(idx[:, -1:], caches, plain)
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
        config = config_from_huggingface(model.config)
        ours = cls(config)
        weights = gpt2_weights(model.state_dict(), config)
        load_weights(ours, weights, source="the Hugging Face GPT-2 weights")
        return ours.eval()
