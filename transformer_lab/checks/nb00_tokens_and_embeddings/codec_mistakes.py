"""The mistakes of encode and decode replayed on a case's inputs, and decode's cases and error
hints (the checks are in bpe_codec.py). Encode: merges in another order (reversed, the most
frequent pair first, one greedy pass) or across words, code points, one merge per word, merges of
merges skipped, unseen characters dropped, merge ids from 255 or 257 or all 256, and every wrong
merge of a pair the student's loop may inherit (:data:`~.merge_mistakes.INNER`). Decode: token
256 + i is merge i, whose bytes are its left token's followed by its right token's, all the way
down to bytes; a character cut between tokens is joined before decoding.

    encode_variants(text, merges) -> [(message, () -> ids), ...]
    training_text() -> the text the cases' merges are learned from
    decode_variants(ids, merges) -> [(message, () -> text), ...]
    decode_cases(hidden) -> [Case, ...]
    decode_error_hint(exc, case) -> hint
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, generator
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe import random_words
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe_probes import CHAINED
from transformer_lab.checks.nb00_tokens_and_embeddings.merge_mistakes import INNER

__all__ = [
    "encode_variants",
    "training_text",
    "decode_variants",
    "decode_cases",
    "decode_error_hint",
]

_ENCODE = _ref.encode
_TOKEN_BYTES = _ref.token_bytes
_TRAIN = _ref.train_merges
_MERGE = _ref.merge_pair


def training_text() -> str:
    from transformer_lab.data.text import load_shakespeare

    return load_shakespeare()[:3000]


def _apply_in_order(ids: list, merges: list, order, merge=_MERGE, first_id: int = 256) -> list:
    for i in order:
        ids = merge(ids, merges[i], first_id + i)
    return ids


def encode_variants(text: str, merges: list) -> list[tuple[str, Callable[[], list]]]:
    n = len(merges)
    words = _ref.split_words(text)

    def per_word(units, order, merge=_MERGE, first_id: int = 256) -> list:
        return [
            t
            for w in units
            for t in _apply_in_order(list(w.encode("utf-8")), merges, order, merge, first_id)
        ]

    def code_points() -> list:
        return [t for w in words for t in _apply_in_order([ord(c) for c in w], merges, range(n))]

    def one_merge_per_word() -> list:
        rank = {tuple(p): i for i, p in enumerate(merges)}
        out = []
        for w in words:
            ids = list(w.encode("utf-8"))
            found = [rank[p] for p in zip(ids, ids[1:]) if p in rank]
            out += _MERGE(ids, merges[min(found)], 256 + min(found)) if found else ids
        return out

    def bytes_merges_only(raw_pairs: bool) -> list:
        """Only merges whose pair is in the word's original bytes (or of two bytes) apply."""
        out = []
        for w in words:
            ids = list(w.encode("utf-8"))
            present = set(zip(ids, ids[1:]))
            for i, pair in enumerate(merges):
                if (tuple(pair) in present) if raw_pairs else max(pair) < 256:
                    ids = _MERGE(ids, pair, 256 + i)
            out += ids
        return out

    def one_greedy_pass() -> list:
        """One left-to-right pass over the bytes, merging any learned pair as it comes."""
        rank = {tuple(p): i for i, p in enumerate(merges)}
        out = []
        for w in words:
            ids, i = list(w.encode("utf-8")), 0
            while i < len(ids):
                pair = tuple(ids[i : i + 2])
                out.append(256 + rank[pair] if pair in rank else ids[i])
                i += 2 if pair in rank else 1
        return out

    def most_frequent_first(by_rank: bool) -> list:
        """The word's most frequent learned pair merged first (ties: by rank, or the first
        seen), not the merges in their order."""
        rank = {tuple(p): i for i, p in enumerate(merges)}
        out = []
        for w in words:
            ids = list(w.encode("utf-8"))
            while True:
                counts = _ref.count_pairs({tuple(ids): 1})
                known = [p for p in counts if p in rank]
                if not known:
                    break
                pair = max(known, key=lambda p: (counts[p], -rank[p] if by_rank else 0))
                ids = _MERGE(ids, pair, 256 + rank[pair])
            out += ids
        return out

    frequent = (
        "the merges are applied in the order learned (merge 0 first, the order of the list), "
        "not the pair that occurs most often in the word first"
    )

    def ascii_only() -> list:
        return per_word([w for w in words if w.isascii()], range(n))

    def chars_dropped() -> list:
        return per_word(["".join(c for c in w if c.isascii()) for w in words], range(n))

    return [
        (
            "apply the merges in the order they were learned (merge 0 first): a later merge "
            "may build on an earlier one",
            lambda: per_word(words, list(reversed(range(n)))),
        ),
        (
            "you merge across word boundaries: split the text with bpe.split_words(text) and "
            "encode each word on its own",
            lambda: per_word([text], range(n)),
        ),
        (
            "text.split() loses the spaces and newlines: split with bpe.split_words(text), "
            "whose words keep them (' be'), so decode gives back the text",
            lambda: per_word(text.split(), range(n)),
        ),
        (
            "the start ids are the UTF-8 bytes (word.encode('utf-8')), not code points "
            "(ord(ch)); a character beyond ASCII is several bytes",
            code_points,
        ),
        (
            "only one merge per word is applied: keep merging until none of the learned merges "
            "applies (every merge, in the order learned)",
            one_merge_per_word,
        ),
        (
            "you merge in one pass over the bytes, left to right, taking any learned pair as "
            "it comes: apply the merges one at a time, in the order learned (merge 0 on the "
            "whole word first), so a later merge can build on an earlier one",
            one_greedy_pass,
        ),
        (frequent, lambda: most_frequent_first(by_rank=True)),
        (frequent, lambda: most_frequent_first(by_rank=False)),
        (
            "every merge creates the same token 256: merge i of the list creates token 256 + i, "
            "one id more per merge",
            lambda: per_word(words, range(n), lambda ids, pair, _: _MERGE(ids, pair, 256)),
        ),
        (CHAINED, lambda: bytes_merges_only(raw_pairs=True)),
        (CHAINED, lambda: bytes_merges_only(raw_pairs=False)),
        (
            "characters never seen in training are dropped: every character is UTF-8 bytes "
            "(ids 0..255), so nothing is unknown; encode them as bytes",
            ascii_only,
        ),
        (
            "characters never seen in training are dropped: every character is UTF-8 bytes "
            "(ids 0..255), so nothing is unknown; encode them as bytes",
            chars_dropped,
        ),
        (
            "merge i of the list must create token 256 + i (ids 0..255 are the bytes); yours "
            "starts at 255",
            lambda: per_word(words, range(n), first_id=255),
        ),
        (
            "merge i of the list must create token 256 + i (ids 0..255 are the bytes); yours "
            "starts at 257",
            lambda: per_word(words, range(n), first_id=257),
        ),
    ] + [
        (message, lambda merge=merge: per_word(words, range(n), merge)) for message, merge in INNER
    ]


def decode_variants(ids: list, merges: list) -> list[tuple[str, Callable[[], str]]]:
    vocab = _TOKEN_BYTES(merges)
    joined = b"".join(vocab[i] for i in ids)
    swapped = [bytes([b]) for b in range(256)]
    for a, b in merges:
        swapped.append(swapped[b] + swapped[a])
    text = joined.decode("utf-8", errors="replace")
    stripped = "the text comes back stripped: keep leading and trailing spaces and newlines"
    return [
        (
            "the tokens are joined with spaces: the spaces are already inside the tokens "
            "(' be'), so join the bytes with nothing in between",
            lambda: " ".join(vocab[i].decode("utf-8", errors="replace") for i in ids),
        ),
        (
            "you decode each token on its own: a character split across two tokens then breaks "
            "into U+FFFD; join the bytes of all tokens first, then decode once",
            lambda: "".join(vocab[i].decode("utf-8", errors="replace") for i in ids),
        ),
        (
            "invalid UTF-8 must become U+FFFD (errors='replace'), not be dropped (errors='ignore')",
            lambda: joined.decode("utf-8", errors="ignore"),
        ),
        (
            "each byte is not a character: decode the joined bytes as UTF-8, not with chr(b) "
            "(Latin-1)",
            lambda: joined.decode("latin-1"),
        ),
        (stripped, lambda: text.strip()),
        (stripped, lambda: text.lstrip()),
        (stripped, lambda: text.rstrip()),
        (
            "the bytes are UTF-8, not ASCII: decode them with .decode('utf-8', "
            "errors='replace'); a character beyond ASCII is several bytes",
            lambda: joined.decode("ascii", errors="replace"),
        ),
        (
            "the tokens come back in reverse order: join their bytes in the order of ids",
            lambda: b"".join(vocab[i] for i in ids[::-1]).decode("utf-8", errors="replace"),
        ),
        (
            "merge i's token is the bytes of its left token followed by those of its right "
            "token (vocab[left] + vocab[right]); yours are in the other order",
            lambda: b"".join(swapped[i] for i in ids).decode("utf-8", errors="replace"),
        ),
    ]


def decode_cases(hidden: bool) -> list[Case]:
    g = generator(7700 if hidden else 700)
    merges = _TRAIN(training_text(), 40)
    texts = [
        ("a sentence", " First Citizen:\nYou are all resolved rather to die than to famish? \n"),
        ("unseen characters", "naïve — café ☕ λόγος"),
        ("empty", ""),
        ("a random text", " ".join(random_words(g, 30))),
    ]
    specs = [(name, _ENCODE(text, merges), merges) for name, text in texts]
    specs.append(("half a character", [ord("a"), 0xC3], []))  # cut inside 'é' (C3 A9)
    # the graded cell's examples
    specs.append(("two bytes", [104, 105], []))
    specs.append(("a merge and a space", [256, 32, 256], [(104, 105)]))
    specs.append(("a character of two bytes", [195, 169], []))
    specs.append(("a character over two tokens", list("é".encode()) + [32, 97], []))
    specs.append(("a token holding a character", [99, 97, 102, 256], [(195, 169)]))  # café
    if hidden:
        specs.append(("random ids", _ENCODE(" ".join(random_words(g, 50)), merges), merges))
    return [
        Case(name, (list(ids), [tuple(p) for p in m]), {}, f"ids={ids[:10]}..., {len(m)} merges")
        for name, ids, m in specs
    ]


def decode_error_hint(exc: BaseException, case: Case) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return (
            "bytes cut inside a character are not valid UTF-8: decode with errors='replace' "
            "(they become U+FFFD)"
        )
    text = str(exc)
    if isinstance(exc, ValueError) and "range(0, 256)" in text or isinstance(exc, OverflowError):
        return (
            "ids from 256 up are merges, not bytes: build each merge's bytes first "
            "(vocab[256 + i] = vocab[left] + vocab[right]) and join those"
        )
    if isinstance(exc, (KeyError, IndexError)):
        return "build the bytes of every token first: ids 0..255 are bytes, 256 + i is merge i"
    return _signature_hint(exc, "decode(ids, merges)")
