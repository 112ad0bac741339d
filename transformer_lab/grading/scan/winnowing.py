"""Winnowed fingerprints of a piece of code, from the token kinds that survive disguise.

1. NFKC-normalise the text (Python does the same to identifiers), drop comments and docstrings;
2. tokenize with Python's :mod:`tokenize`; the student's own names become ``V``, numbers ``N``,
   strings ``S``; keywords, operators, attribute names after a dot (``.amax``, ``.transpose``)
   and the names of well-known modules and built-ins (``torch``, ``math``, ``range``) stay;
3. hash every run of ``K`` tokens and keep, in each window of ``W`` consecutive hashes, the
   smallest (winnowing: Schleimer, Wilkerson and Aiken, SIGMOD 2003, the algorithm of MOSS).
   Any shared run of at least ``W + K - 1`` tokens is guaranteed to share a fingerprint.

Used by :mod:`.similarity`, which compares a student's units with the package's. Nothing here
imports torch or the package.
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize
import unicodedata
import zlib

__all__ = ["K", "W", "normalise", "token_kinds", "fingerprints"]

K = 10  # tokens per k-gram (a line of code is about 10 tokens)
W = 4  # winnowing window: any shared run of K + W - 1 = 13 tokens is detected

# Names kept as they are: what a student cannot rename without changing what the code does.
_KEPT_NAMES = frozenset(
    "torch nn F np numpy math functional einsum self cls super None True False "
    "range len zip enumerate float int bool list tuple dict min max sum abs isinstance "
    "print sorted reversed any all map".split()
)


def normalise(text: str) -> str:
    """NFKC normal form: full-width and other compatibility characters become plain ASCII."""
    return unicodedata.normalize("NFKC", text)


def _python_lines(text: str) -> str:
    """Blank out IPython lines (``%magic``, ``!shell``) that Python's tokenizer cannot read."""
    return "\n".join("" if re.match(r"\s*[%!]", ln) else ln for ln in text.splitlines())


def _raw_tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def token_kinds(source: str) -> list[tuple[str, int]]:
    """(kind, line) for every meaningful token of ``source`` (see the module docstring).

    Source that Python cannot tokenize falls back to a plain word/symbol split.
    """
    text = _python_lines(normalise(source))
    raw = _raw_tokens(text)
    if not raw:
        return [
            (_kind_of_word(m.group(), prev=None), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"[A-Za-z_]\w*|\d[\w.]*|\S", text)
        ]
    out: list[tuple[str, int]] = []
    statement_start = True  # a string alone at the start of a statement is a docstring
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    for i, tok in enumerate(raw):
        if tok.type in skip or tok.type == tokenize.ENDMARKER:
            continue
        if tok.type == tokenize.NEWLINE or tok.string == ";":
            if out and out[-1][0] != ";":
                out.append((";", tok.start[0]))
            statement_start = True
            continue
        if tok.type == tokenize.STRING and statement_start and _alone(raw, i):
            continue
        statement_start = False
        prev = out[-1][0] if out else None
        if tok.type == tokenize.NAME:
            kind = _kind_of_word(tok.string, prev)
        elif tok.type == tokenize.NUMBER:
            kind = "N"
        elif tok.type == tokenize.STRING or tok.type >= getattr(tokenize, "FSTRING_START", 999):
            kind = "S"
            if out and out[-1][0] == "S":
                continue  # one placeholder for adjacent string parts (implicit concatenation)
        else:
            kind = tok.string
        out.append((kind, tok.start[0]))
    return out


def _alone(raw: list[tokenize.TokenInfo], i: int) -> bool:
    """Is the string token ``raw[i]`` a whole statement (followed by the end of the line)?"""
    for tok in raw[i + 1 :]:
        if tok.type in (tokenize.COMMENT, tokenize.NL):
            continue
        return tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or tok.string == ";"
    return True


def _kind_of_word(word: str, prev: str | None) -> str:
    if word[0].isdigit():
        return "N"
    if not (word[0].isalpha() or word[0] == "_"):
        return word
    if keyword.iskeyword(word) or word in _KEPT_NAMES or prev == ".":
        return word
    return "V"


def fingerprints(kinds: list[tuple[str, int]], k: int = K, w: int = W) -> dict[int, int]:
    """Winnowed fingerprints of a token sequence: {hash: first line where it starts}.

    Hashes are CRC-32 and Adler-32 of the k-gram side by side (64 bits, the same in every
    process, unlike Python's salted ``hash``: scores are reproducible run to run).
    """
    words = [kind for kind, _ in kinds]
    grams = ["\x1f".join(words[i : i + k]).encode() for i in range(len(words) - k + 1)]
    hashes = [zlib.crc32(g) << 32 | zlib.adler32(g) for g in grams]
    chosen: dict[int, int] = {}
    for start in range(max(1, len(hashes) - w + 1)):
        best = start
        for j in range(start + 1, min(start + w, len(hashes))):
            if hashes[j] <= hashes[best]:  # rightmost minimum, as in the paper
                best = j
        if best < len(hashes):
            chosen.setdefault(hashes[best], kinds[best][1])
    return chosen
