"""Datasets for the course: everything ships in the package or is generated, nothing downloads.

    text         tiny Shakespeare, CharTokenizer, 90/10 split, random (x, y) windows  (GPT)
    digits       scikit-learn's 8x8 handwritten digits, seeded stratified split      (ViT)
    translation  numbers in digits -> English words, seeded disjoint split       (encoder-decoder)
    word_order   Shakespeare lines: original vs shuffled word order, MLM text        (BERT)
      word_tokenizer, shakespeare_lines, unigram: its tokenizer, corpus and baseline
    batching     padding, random batches, ordered mini-batches

Tiny Shakespeare comes from Andrej Karpathy's char-rnn repository
(https://github.com/karpathy/char-rnn); Shakespeare's works are in the public domain.
"""

from transformer_lab.data.batching import IGNORE_INDEX, iterate_batches, pad_sequences, sample_batch
from transformer_lab.data.digits import DigitsData, load_digits_data
from transformer_lab.data.shakespeare_lines import shakespeare_lines
from transformer_lab.data.text import (
    CharTokenizer,
    TextData,
    get_batch,
    load_shakespeare,
    shakespeare,
    split_data,
)
from transformer_lab.data.translation import (
    NumberTranslation,
    TranslationBatch,
    Vocab,
    number_to_words,
)
from transformer_lab.data.unigram import unigram_cross_entropy, unigram_entropy
from transformer_lab.data.word_order import ClassificationBatch, MLMBatch, WordOrderTask
from transformer_lab.data.word_tokenizer import WordTokenizer

__all__ = [
    "IGNORE_INDEX",
    "pad_sequences",
    "sample_batch",
    "iterate_batches",
    "load_shakespeare",
    "CharTokenizer",
    "split_data",
    "get_batch",
    "TextData",
    "shakespeare",
    "DigitsData",
    "load_digits_data",
    "number_to_words",
    "Vocab",
    "TranslationBatch",
    "NumberTranslation",
    "WordTokenizer",
    "shakespeare_lines",
    "ClassificationBatch",
    "MLMBatch",
    "WordOrderTask",
    "unigram_entropy",
    "unigram_cross_entropy",
]
