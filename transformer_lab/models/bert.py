"""BERT: a bidirectional encoder pre-trained by filling in masked tokens (Devlin et al., 2019).

    x_0 = LayerNorm(E_tok[ids] + E_pos[0..T-1] + E_seg[segment])
    x_l = Block_l(x_{l-1})                  post-norm: x = norm(x + sublayer(x)), as in the original
    pooled = tanh(W x_L[CLS] + b)           a sentence summary for classification

Every token sees every other (no causal mask); the only mask hides padding. Pre-training
hides 15% of the tokens (:func:`~transformer_lab.models.bert_heads.apply_bert_masking`) and predicts them with a head whose output
matrix is the token embedding (tied). Argument names follow Hugging Face (``input_ids``,
``attention_mask`` with 1 = real token, ``token_type_ids``) so code moves across easily.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_lab import _validate
from transformer_lab._validate import check_tensor
from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.masks import padding_mask_from_attention_mask
from transformer_lab.models._weights import load_weights
from transformer_lab.models.bert_config import BertConfig
from transformer_lab.models.bert_weights import _prefix, bert_weights, config_from_huggingface
from transformer_lab.models.outputs import BertOutput
from transformer_lab.positional import LearnedPositionalEmbedding

__all__ = ["BertConfig", "BERT"]


class BERT(nn.Module):
    """The BERT encoder: embeddings, post-norm encoder blocks and the pooler.

    Args:
        config: a :class:`BertConfig`.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        if not isinstance(config, BertConfig):
            raise TypeError(f"BERT expects a BertConfig, but received {type(config).__name__}.")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)  # (V, C)
        self.pos_emb = (
            LearnedPositionalEmbedding(c.max_len, c.d_model) if c.positions else None
        )  # (max_len, C)
        self.seg_emb = nn.Embedding(c.type_vocab_size, c.d_model)  # (segments, C)
        self.emb_norm = LayerNorm(c.d_model, c.eps, fused=c.fused)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            Block(
                c.d_model,
                c.n_heads,
                c.d_ff,
                c.dropout,
                c.activation,
                norm_first=False,
                eps=c.eps,
                fused=c.fused,
            )
            for _ in range(c.n_layers)
        )
        self.pooler = nn.Linear(c.d_model, c.d_model)  # reads the [CLS] token, then tanh
        self.apply(_init_weights)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        output_attentions: bool = False,
    ) -> BertOutput:
        """Encode a batch of token sequences.

        Args:
            input_ids: (B, T) token ids, T <= max_len.
            attention_mask: (B, T), 1 (or True) at real tokens and 0 at padding; ``None`` means
                every token is real (as in Hugging Face).
            token_type_ids: (B, T) segment of each token (0 = sentence A, 1 = sentence B).
            output_attentions: also return each layer's (B, H, T, T) weights.
        Returns:
            :class:`BertOutput`: last_hidden_state (B, T, C), pooler_output (B, C), attentions.
        """
        c = self.config
        _validate.check_token_ids("input_ids", input_ids, c.vocab_size, c.max_len)
        B, T = input_ids.shape
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        else:
            _check_same_shape("token_type_ids", token_type_ids, input_ids)
            _validate.check_token_ids("token_type_ids", token_type_ids, c.type_vocab_size)
        mask = None
        if attention_mask is not None:
            _check_same_shape("attention_mask", attention_mask, input_ids)
            mask = padding_mask_from_attention_mask(attention_mask)  # (B, 1, 1, S)
        x = self.tok_emb(input_ids)  # (B, T, C)
        if self.pos_emb is not None:  # without it, permuting the tokens permutes the outputs alike
            x = x + self.pos_emb(T)
        x = x + self.seg_emb(token_type_ids)
        x = self.drop(self.emb_norm(x))
        attentions = []
        for block in self.blocks:
            x, w = block(x, mask=mask, need_weights=output_attentions)
            if output_attentions:
                attentions.append(w.self_attn)  # (B, H, T, T)
        pooled = torch.tanh(self.pooler(x[:, 0]))  # (B, C), from the [CLS] position
        return BertOutput(x, pooled, tuple(attentions) if output_attentions else None)

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> BERT:
        """Build a BERT with the weights of a Hugging Face ``BertModel`` (pooler included).

        Returns:
            our :class:`BERT` in eval mode.
        """
        config = config_from_huggingface(model.config)
        sd = model.state_dict()
        prefix = _prefix(sd)
        has_pooler = prefix + "pooler.dense.weight" in sd  # absent with add_pooling_layer=False
        ours = cls(config)
        w = bert_weights(sd, prefix, strict=True, pooler=has_pooler)
        load_weights(
            ours,
            w,
            "the Hugging Face BERT weights",
            allow_missing=() if has_pooler else ("pooler.weight", "pooler.bias"),
        )
        return ours.eval()


def _check_same_shape(name: str, x: object, ids: Tensor) -> None:
    check_tensor(name, x)
    assert isinstance(x, Tensor)
    if tuple(x.shape) != tuple(ids.shape):
        raise ValueError(
            f"{name} must have the shape of input_ids {tuple(ids.shape)}, but received shape {tuple(x.shape)}."
        )


def _init_weights(module: nn.Module) -> None:
    """BERT's initialisation: N(0, 0.02) weights, zero biases (norms keep gain 1, bias 0)."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
