"""The four models of the course, each built from the blocks in :mod:`transformer_lab.blocks`.

    gpt       GPT: decoder-only, causal language model, generation with a KV cache     (pre-norm)
    bert      BERT: bidirectional encoder (bert_config, bert_weights: its config and HF loader),
              bert_heads: masked-LM and classification heads, MLM corruption          (post-norm)
      sampling  temperature, top-k and top-p filtering for generation
    vit       ViT: image patches as tokens, [CLS] classification, attention maps       (pre-norm)
      patches   patchify and PatchEmbedding
    seq2seq   the original encoder-decoder with cross-attention, greedy decoding      (post-norm)
    outputs   the dataclasses the models return

``GPT``, ``BERT`` and ``ViT`` load Hugging Face ``transformers`` models with
``from_huggingface(model)``; the tests prove equal outputs with weights copied across.
"""

from transformer_lab.models.bert import BERT, BertConfig
from transformer_lab.models.bert_heads import (
    BertForMaskedLM,
    BertForSequenceClassification,
    apply_bert_masking,
)
from transformer_lab.models.gpt import GPT, GPTConfig, filter_logits, sample_next_token
from transformer_lab.models.outputs import (
    BertOutput,
    CausalLMOutput,
    MaskedLMOutput,
    ModelOutput,
    Seq2SeqOutput,
    SequenceClassifierOutput,
    ViTOutput,
)
from transformer_lab.models.seq2seq import Seq2SeqConfig, Seq2SeqTransformer
from transformer_lab.models.vit import PatchEmbedding, ViT, ViTConfig, patchify

__all__ = [
    "GPTConfig",
    "GPT",
    "filter_logits",
    "sample_next_token",
    "BertConfig",
    "BERT",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "apply_bert_masking",
    "ViTConfig",
    "ViT",
    "PatchEmbedding",
    "patchify",
    "Seq2SeqConfig",
    "Seq2SeqTransformer",
    "ModelOutput",
    "CausalLMOutput",
    "BertOutput",
    "MaskedLMOutput",
    "SequenceClassifierOutput",
    "ViTOutput",
    "Seq2SeqOutput",
]
