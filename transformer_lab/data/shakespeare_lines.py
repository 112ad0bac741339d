"""The distinct spoken lines of tiny Shakespeare, tokenized into words: the word-order corpus.

Speaker tags ("KING RICHARD III:") and blank lines are dropped and duplicates removed, so each
line appears once (the word-order task then splits these distinct lines into train/val/test).
"""

from __future__ import annotations

import re
from functools import lru_cache

from transformer_lab.data.text import load_shakespeare
from transformer_lab.data.word_tokenizer import WordTokenizer

__all__ = ["shakespeare_lines"]

_SPEAKER_RE = re.compile(r"^(?:[A-Z][\w'-]*\s?){1,4}:$")


def _is_speaker_tag(line: str) -> bool:
    return bool(_SPEAKER_RE.match(line))


@lru_cache(maxsize=1)
def _all_lines() -> dict[str, tuple[str, ...]]:
    """Distinct non-empty, non-speaker lines of tiny Shakespeare (in order of first appearance),
    each mapped to its tokens; cached because several tasks read them."""
    lines: dict[str, tuple[str, ...]] = {}
    for raw in load_shakespeare().split("\n"):
        line = raw.strip()
        if line and line not in lines and not _is_speaker_tag(line):
            lines[line] = tuple(WordTokenizer.tokenize(line))
    return lines


def shakespeare_lines(min_words: int = 1, max_tokens: int | None = None) -> list[str]:
    """Distinct lines of tiny Shakespeare's speeches (speaker tags and blank lines removed).

    Args:
        min_words: keep lines with at least this many words.
        max_tokens: keep lines of at most this many tokens (words + punctuation).
    """
    out = []
    for line, tokens in _all_lines().items():
        n_words = sum(t[0].isalpha() for t in tokens)
        if n_words >= min_words and (max_tokens is None or len(tokens) <= max_tokens):
            out.append(line)
    return out
