"""Helpers that serve one notebook's demonstrations each, kept out of the core.

    baselines        notebook 00: a dense layer, a convolution and a GRU beside one attention layer
    bigram           notebook 00: a bigram language model read from an embedding table; weight tying
    pretokenize      notebook 00: GPT-2's pre-tokenizer regex, special tokens, token cost
    embedding_space  notebook 00: cosine similarity and nearest neighbours in a trained table
    assoc_recall     notebook 00: associative recall (content, not position, finds the answer)
    why_attention    notebook 00: causal averaging, Vaswani's cost table, steps and paths measured
    extrapolation    notebook 03: a model trained on short sequences, measured past its length
    span             notebook 05: how far vectors lie from the span of the values
    length_batching  notebook 05: batches formed by length against random batches
    readouts         notebook 06: classifying from [CLS] or from the last real token
    tokens_compare   notebook 07: the same GPT on characters and on BPE tokens
    induction        notebook 07: a two-layer attention-only model learns to copy (induction heads)

The core (attention, heads, positional, masks, blocks, models, ...) imports nothing from here
(``tests/test_layers.py``). The old top-level names (``transformer_lab.baselines``, ...) still
import, with a DeprecationWarning (``transformer_lab._renames.MOVED_MODULES``).
"""
