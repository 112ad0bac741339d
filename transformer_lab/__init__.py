"""transformer-lab: a tested reference implementation of every transformer building block.

The file tree reads like the course:

    attention   softmax, scaled dot-product attention, single-head self-attention
    heads       multi-head self- and cross-attention, split/merge heads, key/value cache
    positional  sinusoidal, learned, rotary and 2-D positional encodings
    masks       causal and padding masks (True = may attend)
    blocks      layer norm, feed-forward, the one Block (pre- or post-norm, optional cross-attention)
    models      GPT, BERT, ViT and an encoder-decoder
    tiled, gqa, interpret, bert_inputs, bpe   the rest of the core (notebooks 00, 06, 08, 09)

    data, train, threads, pretrained, checkpoints, widgets, checks, grading   course support
    lessons     helpers that serve one notebook's demonstrations each

Dimension letters: B batch, T query length, S key length, H heads, D head size,
C model width, V vocabulary, N patches.
"""

from transformer_lab._mode import grading_mode
from transformer_lab._renames import install_module_aliases
from transformer_lab.attention import SelfAttention, scaled_dot_product_attention, softmax
from transformer_lab.blocks import Block, BlockWeights, FeedForward, LayerNorm, layer_norm
from transformer_lab.heads import KVCache, MultiHeadAttention, merge_heads, split_heads
from transformer_lab.masks import (
    causal_mask,
    combine_masks,
    padding_mask_from_attention_mask,
    padding_mask_from_ids,
    padding_mask_from_lengths,
)
from transformer_lab.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rotary,
    sinusoidal_encoding,
    sinusoidal_encoding_2d,
    sinusoidal_shift_matrix,
)

install_module_aliases()

__version__ = "0.1.0"

__all__ = [
    "grading_mode",
    "softmax",
    "scaled_dot_product_attention",
    "SelfAttention",
    "split_heads",
    "merge_heads",
    "KVCache",
    "MultiHeadAttention",
    "causal_mask",
    "padding_mask_from_lengths",
    "padding_mask_from_ids",
    "padding_mask_from_attention_mask",
    "combine_masks",
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "sinusoidal_encoding_2d",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "RotaryEmbedding",
    "apply_rotary",
    "layer_norm",
    "LayerNorm",
    "FeedForward",
    "Block",
    "BlockWeights",
]
