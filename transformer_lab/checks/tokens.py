"""Notebook 0's exercises (tokens and embeddings), declared in one place for the checks package.

    check_count_pairs    count_pairs(words) -> {(left, right): count}
    check_merge_pair     merge_pair(ids, pair, new_id) -> list of ids
    check_train_merges   train_merges(text, n_merges) -> [(left, right), ...]
    check_bpe_encode     encode(text, merges) -> list of ids
    check_bpe_decode     decode(ids, merges) -> str
    check_one_hot_embed  one_hot_embed(ids, w_emb) -> (..., C)

``EXERCISES`` lists (exercise name, check, reference with the student's signature);
``transformer_lab.checks`` registers them and seals ``MODULES``.
"""

from __future__ import annotations

from transformer_lab import bpe as _bpe
from transformer_lab.checks import bpe as _bpe_checks
from transformer_lab.checks import bpe_codec as _codec_checks
from transformer_lab.checks import bpe_training as _training_checks
from transformer_lab.checks import embedding as _embedding_checks
from transformer_lab.checks.bpe import check_count_pairs, check_merge_pair
from transformer_lab.checks.bpe_codec import check_bpe_decode, check_bpe_encode
from transformer_lab.checks.bpe_training import check_train_merges
from transformer_lab.checks.embedding import check_one_hot_embed

__all__ = ["EXERCISES", "MODULES"]

EXERCISES = (
    ("count_pairs", check_count_pairs, _bpe.count_pairs),
    ("merge_pair", check_merge_pair, _bpe.merge_pair),
    ("train_merges", check_train_merges, _bpe.train_merges),
    ("bpe_encode", check_bpe_encode, _bpe.encode),
    ("bpe_decode", check_bpe_decode, _bpe.decode),
    ("one_hot_embed", check_one_hot_embed, lambda ids, w_emb: w_emb[ids]),
)
MODULES = (_bpe_checks, _training_checks, _codec_checks, _embedding_checks)
