"""The original encoder-decoder Transformer (Vaswani et al., 2017, "Attention Is All You Need").

    memory = Encoder(E_src[src] * sqrt(C) + PE)                        bidirectional, source padding masked
    h      = Decoder(E_tgt[tgt] * sqrt(C) + PE, memory)               causal self-attention,
                                                                       then cross-attention to memory
    logits = h W_out

Post-norm blocks (``x = norm(x + sublayer(x))``) as in the paper by default; ``norm_first=True``
gives the pre-norm variant. Like ``torch.nn.Transformer`` both stacks end with a layer norm,
so with weights copied across the two give the same numbers. Embeddings are multiplied by
sqrt(C) (paper, sec. 3.4) so they are not drowned by the sinusoidal positions, whose entries
are of size 1. The config is in :mod:`.seq2seq_config` (re-exported here).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import _validate
from transformer_lab.blocks import Block, BlockWeights, LayerNorm
from transformer_lab.heads import KVCache
from transformer_lab.masks import causal_mask, combine_masks, padding_mask_from_ids
from transformer_lab.models.outputs import Seq2SeqOutput
from transformer_lab.models.seq2seq_config import Seq2SeqConfig
from transformer_lab.positional import SinusoidalPositionalEncoding

__all__ = ["Seq2SeqConfig", "Seq2SeqTransformer"]


class Seq2SeqTransformer(nn.Module):
    """Encoder-decoder transformer with cross-attention and greedy decoding.

    Args:
        config: a :class:`Seq2SeqConfig`.
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        if not isinstance(config, Seq2SeqConfig):
            raise TypeError(
                f"Seq2SeqTransformer expects a Seq2SeqConfig, but received {type(config).__name__}."
            )
        self.config = c = config
        self.src_emb = nn.Embedding(c.src_vocab_size, c.d_model)  # (V_src, C)
        self.tgt_emb = nn.Embedding(c.tgt_vocab_size, c.d_model)  # (V_tgt, C)
        self.pos = SinusoidalPositionalEncoding(c.d_model, c.max_len)
        self.drop = nn.Dropout(c.dropout)
        kw = dict(
            dropout=c.dropout,
            activation=c.activation,
            norm_first=c.norm_first,
            eps=c.eps,
            fused=c.fused,
        )
        self.encoder_layers = nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, **kw) for _ in range(c.n_encoder_layers)
        )
        self.encoder_norm = LayerNorm(c.d_model, c.eps, fused=c.fused)
        self.decoder_layers = nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, cross_attention=True, **kw)
            for _ in range(c.n_decoder_layers)
        )
        self.decoder_norm = LayerNorm(c.d_model, c.eps, fused=c.fused)
        self.out_proj = nn.Linear(c.d_model, c.tgt_vocab_size)  # (C -> V_tgt)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(
                    p
                )  # as in torch.nn.Transformer and the Annotated Transformer
        self._scale = math.sqrt(c.d_model) if c.scale_embeddings else 1.0

    # --- the pieces -----------------------------------------------------------------------------

    def embed_source(self, src: Tensor) -> Tensor:
        """(B, S) ids -> (B, S, C): scaled embeddings plus sinusoidal positions."""
        return self.drop(self.pos(self.src_emb(src) * self._scale))

    def embed_target(self, tgt: Tensor, offset: int = 0) -> Tensor:
        """(B, T) ids -> (B, T, C), positions starting at ``offset``."""
        return self.drop(self.pos(self.tgt_emb(tgt) * self._scale, offset=offset))

    def source_mask(self, src: Tensor) -> Tensor:
        """(B, 1, 1, S) bool: True at real source tokens, False at padding."""
        return padding_mask_from_ids(src, self.config.pad_id)

    def target_mask(self, tgt: Tensor) -> Tensor:
        """(B, 1, T, T) bool: causal AND not padding, the decoder's self-attention mask.

        The decoder itself passes the padding part as ``mask`` and ``is_causal=True``, which
        gives the same mask and lets the attention build the causal part where it is cheapest.
        """
        return combine_masks(
            causal_mask(tgt.shape[1], device=tgt.device),
            padding_mask_from_ids(tgt, self.config.pad_id),
        )

    def encode(
        self, src: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """(B, S) source ids -> (B, S, C) memory (and each layer's (B, H, S, S) weights on request)."""
        c = self.config
        _validate.check_token_ids("src", src, c.src_vocab_size, c.max_len)
        x, mask, weights = self.embed_source(src), self.source_mask(src), []
        for layer in self.encoder_layers:
            x, w = layer(x, mask=mask, need_weights=need_weights)
            if need_weights:
                weights.append(w.self_attn)  # (B, H, S, S)
        x = self.encoder_norm(x)
        return (x, weights) if need_weights else x

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[BlockWeights]]:
        """Decoder stack: (B, T) target ids and (B, S, C) memory -> (B, T, C) hidden states."""
        c = self.config
        _validate.check_token_ids("tgt", tgt, c.tgt_vocab_size, c.max_len)
        x, weights = self.embed_target(tgt), []
        mask = padding_mask_from_ids(tgt, c.pad_id)  # (B, 1, 1, T); the causal part: is_causal
        for layer in self.decoder_layers:
            x, w = layer(
                x,
                mask=mask,
                is_causal=True,
                memory=memory,
                memory_mask=src_mask,
                need_weights=need_weights,
            )
            if need_weights:
                weights.append(w)
        x = self.decoder_norm(x)
        return (x, weights) if need_weights else x

    # --- the whole model ------------------------------------------------------------------------

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        targets: Tensor | None = None,
        output_attentions: bool = False,
    ) -> Seq2SeqOutput:
        """Teacher-forced pass: predict the next target token at every decoder position.

        Args:
            src: (B, S) source ids, padded with ``pad_id``.
            tgt: (B, T) decoder input, ``<bos> w1 .. wn`` then padding.
            targets: optional (B, T) ids to predict; ``-100`` positions are ignored.
            output_attentions: also return the encoder, decoder and cross-attention weights.
        Returns:
            :class:`Seq2SeqOutput` with logits (B, T, V_tgt), loss, encoder_output (B, S, C).
        """
        c = self.config
        _validate.check_token_ids("src", src, c.src_vocab_size, c.max_len)
        _validate.check_token_ids("tgt", tgt, c.tgt_vocab_size, c.max_len)
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"src and tgt must have the same batch size, but received {src.shape[0]} and {tgt.shape[0]}."
            )
        src_mask = self.source_mask(src)
        attentions = None
        if output_attentions:
            memory, enc_w = self.encode(src, need_weights=True)
            h, dec_w = self.decode(tgt, memory, src_mask, need_weights=True)
            attentions = {
                "encoder": tuple(enc_w),
                "decoder_self": tuple(w.self_attn for w in dec_w),
                "cross": tuple(w.cross_attn for w in dec_w),
            }
        else:
            memory = self.encode(src)
            h = self.decode(tgt, memory, src_mask)
        logits = self.out_proj(h)  # (B, T, V_tgt)
        loss = None
        if targets is not None:
            if tuple(targets.shape) != tuple(tgt.shape):
                raise ValueError(
                    f"targets must have the shape of tgt {tuple(tgt.shape)}, but received shape {tuple(targets.shape)}."
                )
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # (B*T, V) vs (B*T,)
        return Seq2SeqOutput(logits, loss, memory, attentions)

    @torch.no_grad()
    def greedy_decode(
        self, src: Tensor, max_new_tokens: int, bos_id: int, eos_id: int, use_cache: bool = True
    ) -> Tensor:
        """Translate by always picking the most likely next token.

        Starts every row with ``bos_id`` and stops once every row has produced ``eos_id`` or
        ``max_new_tokens`` tokens; positions after a row's ``eos_id`` hold ``pad_id``. With ``use_cache``
        the decoder's self-attention keys and values are kept between steps (same tokens as
        recomputing the whole prefix, which ``use_cache=False`` does).

        Args:
            src: (B, S) source ids.
            max_new_tokens: most tokens to generate after ``<bos>`` (at most ``config.max_len``).
        Returns:
            (B, 1 + L) ids with L <= max_new_tokens, starting with ``bos_id``.
        """
        c = self.config
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or not 0 < max_new_tokens <= c.max_len
        ):
            raise ValueError(
                f"max_new_tokens must lie in 1..{c.max_len} (the rows of the position table), "
                f"but received {max_new_tokens!r}."
            )
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= value < c.tgt_vocab_size:
                raise ValueError(
                    f"{name} must lie in 0..{c.tgt_vocab_size - 1}, but received {value}."
                )
        was_training = self.training
        self.eval()
        try:
            memory, src_mask = self.encode(src), self.source_mask(src)
            out = torch.full(
                (src.shape[0], 1), bos_id, dtype=torch.long, device=src.device
            )  # (B, 1)
            done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
            caches = [KVCache() for _ in self.decoder_layers]
            for step in range(max_new_tokens):
                if use_cache:
                    x = self.embed_target(
                        out[:, -1:], offset=step
                    )  # (B, 1, C): only the newest token
                    for layer, cache in zip(self.decoder_layers, caches):
                        x, _ = layer(x, memory=memory, memory_mask=src_mask, cache=cache)
                    h = self.decoder_norm(x[:, -1])  # (B, C)
                else:
                    h = self.decode(out, memory, src_mask)[:, -1]  # (B, C)
                next_id = self.out_proj(h).argmax(dim=-1)  # (B,)
                next_id = torch.where(done, torch.full_like(next_id, c.pad_id), next_id)
                out = torch.cat([out, next_id[:, None]], dim=1)  # (B, step + 2)
                done |= next_id == eos_id
                if bool(done.all()):
                    break
        finally:
            self.train(was_training)
        return out
