"""BERT: a bidirectional encoder pre-trained by filling in masked tokens (Devlin et al., 2019).

    x_0 = LayerNorm(E_tok[ids] + E_pos[0..T-1] + E_seg[segment])
    x_l = Block_l(x_{l-1})                  post-norm: x = norm(x + sublayer(x)), as in the original
    pooled = tanh(W x_L[CLS] + b)           a sentence summary for classification

Every token sees every other (no causal mask); the only mask hides padding. Pre-training
hides 15% of the tokens (:func:`apply_bert_masking`) and predicts them with a head whose output
matrix is the token embedding (tied). Argument names follow Hugging Face (``input_ids``,
``attention_mask`` with 1 = real token, ``token_type_ids``) so code moves across easily.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import _validate
from transformer_lab._validate import check_tensor
from transformer_lab.blocks import ACTIVATIONS, Block, LayerNorm
from transformer_lab.masks import padding_mask_from_attention_mask
from transformer_lab.models._weights import load_weights
from transformer_lab.models.outputs import BertOutput, MaskedLMOutput, SequenceClassifierOutput
from transformer_lab.positional import LearnedPositionalEmbedding

__all__ = [
    "BertConfig",
    "BERT",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "apply_bert_masking",
]


@dataclass(frozen=True)
class BertConfig:
    """Shape and options of a :class:`BERT` (defaults: BERT-base, 110M parameters)."""

    vocab_size: int = 30522  # V: BERT's uncased WordPiece vocabulary
    max_len: int = 512  # rows of the learned position table (the longest input)
    positions: bool = (
        True  # False drops the position table: the encoder can no longer see word order
    )
    type_vocab_size: int = 2  # segments: sentence A and sentence B
    n_layers: int = 12  # encoder blocks
    n_heads: int = 12  # attention heads H
    d_model: int = 768  # width C
    d_ff: int | None = None  # MLP hidden width; None means 4 * d_model
    dropout: float = 0.1  # on embeddings, attention weights, sublayer outputs (training only)
    eps: float = 1e-12  # layer-norm epsilon (BERT: 1e-12)
    activation: str = "gelu"  # exact erf GELU
    pad_token_id: int = 0  # [PAD] in BERT's vocabulary
    n_labels: int = 2  # classes of BertForSequenceClassification
    fused: bool = True  # PyTorch's fused attention and layer-norm kernels (explicit path when weights are requested)

    def __post_init__(self) -> None:
        if self.d_ff is None:
            object.__setattr__(self, "d_ff", 4 * self.d_model)
        _validate.check_positive(
            self,
            "vocab_size",
            "max_len",
            "type_vocab_size",
            "n_layers",
            "n_heads",
            "d_model",
            "d_ff",
            "n_labels",
        )
        _validate.check_heads(self)
        _validate.check_probability(self, "dropout")
        _validate.check_eps(self)
        _validate.check_choice(self, "activation", ACTIVATIONS)
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"BertConfig.pad_token_id must lie in 0..vocab_size-1={self.vocab_size - 1}, "
                f"but received pad_token_id={self.pad_token_id}."
            )

    @classmethod
    def base(cls, **overrides: Any) -> BertConfig:
        """BERT-base: 12 layers, 12 heads, width 768."""
        return dataclasses.replace(cls(), **overrides)

    @classmethod
    def minilm(cls, **overrides: Any) -> BertConfig:
        """all-MiniLM-L6-v2's shape: 6 layers, 12 heads, width 384, MLP 1536."""
        return dataclasses.replace(cls(n_layers=6, n_heads=12, d_model=384, d_ff=1536), **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> BertConfig:
        """2 layers, 4 heads, width 128, 128 positions: trains on a CPU in minutes (pass vocab_size)."""
        return dataclasses.replace(
            cls(max_len=128, n_layers=2, n_heads=4, d_model=128, dropout=0.1), **overrides
        )


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


class BertForMaskedLM(nn.Module):
    """BERT with the masked-language-model head: predict the original token at every position.

    The head is dense -> activation (GELU) -> layer norm -> the token embedding transposed (tied) + a bias.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BERT(config)
        self.mlm_dense = nn.Linear(config.d_model, config.d_model)
        self._act = ACTIVATIONS[config.activation]
        self.mlm_norm = LayerNorm(config.d_model, config.eps, fused=config.fused)
        self.mlm_decoder = nn.Linear(config.d_model, config.vocab_size)  # (C -> V)
        self.mlm_decoder.weight = (
            self.bert.tok_emb.weight
        )  # tied: the same E reads and writes tokens
        _init_weights(self.mlm_dense)
        nn.init.zeros_(self.mlm_decoder.bias)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        """Logits (B, T, V) at every position; with ``labels`` (B, T), the loss where labels != -100."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions)
        logits = self.head(out.last_hidden_state)  # (B, T, V)
        loss = None
        if labels is not None:
            _check_same_shape("labels", labels, input_ids)
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten())  # (B*T, V) vs (B*T,)
        return MaskedLMOutput(logits, loss, out.attentions)

    def head(self, hidden: Tensor) -> Tensor:
        """The MLM head alone: (..., C) encoder outputs -> (..., V) token logits."""
        return self.mlm_decoder(self.mlm_norm(self._act(self.mlm_dense(hidden))))

    def masked_lm_loss(
        self,
        input_ids: Tensor,
        labels: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """The loss of ``forward(..., labels=labels)``, with the head run on labelled positions only.

        Only the ~15% of tokens chosen for masking carry a label, so skipping the (C -> V)
        decoder everywhere else gives the same value for a fraction of the cost in training.
        """
        _check_same_shape("labels", labels, input_ids)
        hidden = self.bert(input_ids, attention_mask, token_type_ids).last_hidden_state  # (B, T, C)
        chosen = labels != -100  # (B, T)
        return F.cross_entropy(
            self.head(hidden[chosen]), labels[chosen]
        )  # (M, V) vs (M,), M labelled

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> BertForMaskedLM:
        """Build from a Hugging Face ``BertForMaskedLM``; returns our model in eval mode."""
        config = config_from_huggingface(model.config)
        if not getattr(model.config, "tie_word_embeddings", True):
            raise ValueError(
                "BertForMaskedLM ties its decoder to the token embedding, but the model has tie_word_embeddings=False."
            )
        sd = model.state_dict()
        w = {
            f"bert.{k}": v for k, v in bert_weights(sd, "bert.", strict=False, pooler=False).items()
        }
        p = "cls.predictions."
        w.update(
            {
                "mlm_dense.weight": sd[p + "transform.dense.weight"],
                "mlm_dense.bias": sd[p + "transform.dense.bias"],
                "mlm_norm.weight": sd[p + "transform.LayerNorm.weight"],
                "mlm_norm.bias": sd[p + "transform.LayerNorm.bias"],
                "mlm_decoder.bias": sd.get(p + "decoder.bias", sd.get(p + "bias")),
            }
        )
        ours = cls(config)
        # BertForMaskedLM has no pooler, so ours keeps its initial one.
        load_weights(
            ours,
            w,
            source="the Hugging Face BERT weights",
            allow_missing=("bert.pooler.weight", "bert.pooler.bias"),
        )
        return ours.eval()


class BertForSequenceClassification(nn.Module):
    """BERT with a linear classifier on the pooled [CLS] output (dropout in between)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BERT(config)
        self.drop = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, config.n_labels)  # (C -> n_labels)
        _init_weights(self.classifier)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        """Logits (B, n_labels); with ``labels`` (B,), the cross-entropy loss."""
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions)
        logits = self.classifier(self.drop(out.pooler_output))  # (B, n_labels)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return SequenceClassifierOutput(logits, loss, out.attentions)

    @classmethod
    def from_huggingface(cls, model: nn.Module) -> BertForSequenceClassification:
        """Build from a Hugging Face ``BertForSequenceClassification``; returns ours in eval mode."""
        config = config_from_huggingface(model.config, n_labels=model.config.num_labels)
        sd = model.state_dict()
        w = {f"bert.{k}": v for k, v in bert_weights(sd, "bert.", strict=False).items()}
        w["classifier.weight"], w["classifier.bias"] = (
            sd["classifier.weight"],
            sd["classifier.bias"],
        )
        ours = cls(config)
        load_weights(ours, w, source="the Hugging Face BERT weights")
        return ours.eval()


def apply_bert_masking(
    input_ids: Tensor,
    mask_token_id: int,
    vocab_size: int,
    mlm_probability: float = 0.15,
    special_token_ids: Iterable[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """BERT's corruption for masked-language-model training.

    Each token (other than the special ones) is chosen with probability ``mlm_probability``.
    A chosen token becomes [MASK] 80% of the time, a uniformly random token 10% of the time,
    and stays unchanged 10% of the time, so the model cannot rely on seeing [MASK] and must
    keep a good representation of every token.

    Args:
        input_ids: (B, T) token ids.
        mask_token_id: id of [MASK].
        vocab_size: random replacements are drawn from 0..vocab_size-1.
        mlm_probability: fraction of tokens to predict (0.15 in BERT).
        special_token_ids: ids never chosen ([CLS], [SEP], [PAD], ...).
        generator: a seeded ``torch.Generator`` for reproducible masks.
    Returns:
        ``(inputs, labels)``, both (B, T): the corrupted ids, and the original id at chosen
        positions with -100 (ignored by the loss) elsewhere.
    """
    check_tensor("input_ids", input_ids, dims=2)
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must lie in (0, 1), but received {mlm_probability!r}.")
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(
            f"mask_token_id must lie in 0..{vocab_size - 1} (vocab_size={vocab_size}), but received {mask_token_id}."
        )
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)  # who is chosen
    r = torch.rand(
        input_ids.shape, generator=generator, device=input_ids.device
    )  # what they become
    chosen = u < mlm_probability
    for special in special_token_ids:
        chosen &= input_ids != special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    random_ids = torch.randint(
        vocab_size, input_ids.shape, generator=generator, device=input_ids.device
    )
    inputs = torch.where(chosen & (r < 0.8), torch.full_like(input_ids, mask_token_id), input_ids)
    inputs = torch.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, inputs)
    return inputs, labels


# --- Hugging Face conversion, shared with transformer_lab.pretrained -------------------------------


def config_from_huggingface(hf: Any, **overrides: Any) -> BertConfig:
    """Translate a Hugging Face ``BertConfig`` (object or dict from config.json) into ours."""
    get = hf.get if isinstance(hf, Mapping) else (lambda k, d=None: getattr(hf, k, d))
    acts = {
        "gelu": "gelu",
        "gelu_new": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh",
        "relu": "relu",
    }
    if get("model_type") != "bert":
        raise ValueError(f"expected a BERT model, but received model_type={get('model_type')!r}.")
    if get("hidden_act") not in acts:
        raise ValueError(
            f"BERT supports the activations {sorted(acts)}, but the model uses {get('hidden_act')!r}."
        )
    if get("position_embedding_type", "absolute") != "absolute" or get("is_decoder", False):
        raise ValueError(
            "BERT supports absolute position embeddings in an encoder only, but the model's config differs."
        )
    return BertConfig(
        vocab_size=get("vocab_size"),
        max_len=get("max_position_embeddings"),
        type_vocab_size=get("type_vocab_size"),
        n_layers=get("num_hidden_layers"),
        n_heads=get("num_attention_heads"),
        d_model=get("hidden_size"),
        d_ff=get("intermediate_size"),
        eps=get("layer_norm_eps"),
        activation=acts[get("hidden_act")],
        pad_token_id=get("pad_token_id") or 0,
        dropout=0.0,
        **overrides,
    )


def bert_weights(
    sd: Mapping[str, Tensor], prefix: str = "", strict: bool = True, pooler: bool = True
) -> dict[str, Tensor]:
    """Rename a Hugging Face BERT state dict (keys under ``prefix``) to our :class:`BERT` names.

    With ``strict``, every key under ``prefix`` must be used (``position_ids`` aside), so a
    checkpoint with parts BERT would ignore fails loudly.
    """
    used: set[str] = set()

    def take(key: str) -> Tensor:
        used.add(prefix + key)
        if prefix + key not in sd:
            raise KeyError(f"the BERT weights have no {prefix + key!r}.")
        return sd[prefix + key]

    e = "embeddings."
    w = {
        "tok_emb.weight": take(e + "word_embeddings.weight"),
        "pos_emb.weight": take(e + "position_embeddings.weight"),
        "seg_emb.weight": take(e + "token_type_embeddings.weight"),
        "emb_norm.weight": take(e + "LayerNorm.weight"),
        "emb_norm.bias": take(e + "LayerNorm.bias"),
    }
    n_layer = len(
        {k[len(prefix) :].split(".")[2] for k in sd if k.startswith(prefix + "encoder.layer.")}
    )
    for i in range(n_layer):
        h, o = f"encoder.layer.{i}.", f"blocks.{i}."
        pairs = {
            "self_attn.q_proj": "attention.self.query",
            "self_attn.k_proj": "attention.self.key",
            "self_attn.v_proj": "attention.self.value",
            "self_attn.out_proj": "attention.output.dense",
            "self_attn_norm": "attention.output.LayerNorm",
            "mlp.fc1": "intermediate.dense",
            "mlp.fc2": "output.dense",
            "mlp_norm": "output.LayerNorm",
        }
        for ours, theirs in pairs.items():
            w[o + ours + ".weight"] = take(h + theirs + ".weight")
            w[o + ours + ".bias"] = take(h + theirs + ".bias")
    if pooler:
        w["pooler.weight"], w["pooler.bias"] = (
            take("pooler.dense.weight"),
            take("pooler.dense.bias"),
        )
    if strict:
        unused = sorted(
            k
            for k in sd
            if k.startswith(prefix) and k not in used and not k.endswith("position_ids")
        )
        if unused:
            raise ValueError(
                f"the BERT weights contain parts BERT would ignore, starting with {unused[0]!r}."
            )
    return w


def _prefix(sd: Mapping[str, Tensor]) -> str:
    return "bert." if "bert.embeddings.word_embeddings.weight" in sd else ""


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
