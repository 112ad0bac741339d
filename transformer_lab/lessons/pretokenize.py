"""Pre-tokenization as GPT-2 does it, special tokens, and where a tokenizer fails (notebook 00).

Before BPE runs, GPT-2 (Radford et al., 2019) cuts the text with one regular expression,
:data:`GPT2_PATTERN` (from OpenAI's released ``encoder.py``; Hugging Face's ByteLevel
pre-tokenizer uses the same one): English contractions (``'s``, ``'t``, ``'re``, ``'ve``,
``'m``, ``'ll``, ``'d``), then runs of letters, of digits, or of other symbols, each with at most
one space in front, then whitespace. Merges never cross these pieces, so a word never fuses with
the punctuation after it, and letters never fuse with digits. The notebook's own
:func:`transformer_lab.bpe.split_words` is simpler: it cuts at spaces only.

**Special tokens** (``<|endoftext|>`` in GPT-2, ``[CLS]`` and ``[SEP]`` in BERT) are cut out of
the text *before* pre-tokenization and get ids of their own, after the merges
(:func:`encode_with_specials`), so no ordinary text can produce them.

:func:`token_cost` measures what a text costs in tokens, to show the failure cases: numbers cut
into arbitrary chunks, whitespace runs, and text in a language the merges were not trained on.
"""

from __future__ import annotations

from collections.abc import Sequence

import regex

from transformer_lab import bpe

__all__ = [
    "GPT2_PATTERN",
    "pretokenize",
    "split_special",
    "encode_pretokenized",
    "encode_with_specials",
    "token_cost",
]

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
"""GPT-2's pre-tokenizer: contractions, letters, digits, other symbols, whitespace."""

_GPT2 = regex.compile(GPT2_PATTERN)


def _text(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, but received {type(text).__name__}.")
    return text


def pretokenize(text: str) -> list[str]:
    """GPT-2's pieces of ``text``: ``"it's 2024!"`` -> ``["it", "'s", " 2024", "!"]``.

    The pieces concatenate back to ``text``.
    """
    return _GPT2.findall(_text(text))


def split_special(text: str, specials: Sequence[str]) -> list[tuple[str, bool]]:
    """Cut ``text`` at every occurrence of a special token: ``[(piece, is_special), ...]``.

    Longer special tokens are matched first; empty pieces are dropped.
    """
    _text(text)
    if not specials or any(not isinstance(s, str) or not s for s in specials):
        raise ValueError("specials must be a non-empty list of non-empty strings.")
    alternatives = "|".join(regex.escape(s) for s in sorted(specials, key=len, reverse=True))
    out = []
    for i, piece in enumerate(regex.split(f"({alternatives})", text)):
        if piece:
            out.append((piece, i % 2 == 1))  # split with one group: odd pieces are the matches
    return out


def encode_pretokenized(text: str, merges: Sequence[tuple[int, int]]) -> list[int]:
    """Byte-level BPE applied inside GPT-2's pieces instead of :func:`bpe.split_words`' words."""
    ids: list[int] = []
    for piece in pretokenize(text):
        ids.extend(bpe.encode(piece, merges))
    return ids


def encode_with_specials(
    text: str, merges: Sequence[tuple[int, int]], specials: Sequence[str]
) -> list[int]:
    """Token ids of ``text`` where special token j gets id 256 + len(merges) + j.

    Ordinary pieces go through :func:`encode_pretokenized`; a special token is one id, never
    spelled out in bytes.
    """
    first = bpe.N_BYTES + len(merges)
    ids: list[int] = []
    for piece, special in split_special(text, specials):
        ids.extend(
            [first + list(specials).index(piece)] if special else encode_pretokenized(piece, merges)
        )
    return ids


def token_cost(text: str, merges: Sequence[tuple[int, int]]) -> dict[str, float]:
    """What ``text`` costs: characters, UTF-8 bytes, tokens, and characters per token."""
    n_tokens = len(bpe.encode(_text(text), merges))
    return {
        "characters": len(text),
        "bytes": len(text.encode("utf-8")),
        "tokens": n_tokens,
        "chars_per_token": len(text) / max(n_tokens, 1),
    }
