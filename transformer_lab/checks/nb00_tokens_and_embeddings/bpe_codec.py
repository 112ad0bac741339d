"""Checks for notebook 0, exercises 4-5: encoding and decoding with learned merges.

    encode(text, merges) -> list of ids     words, UTF-8 bytes, merges applied in learned order
    decode(ids, merges) -> str              the tokens' bytes joined, then decoded as UTF-8

Any text must round-trip, including characters never seen in training: they are bytes too.

About 300 lines, kept whole: encode and decode share the learned merges, the training text and the
round trip each check tests.
"""

from __future__ import annotations

from collections.abc import Callable

from transformer_lab import bpe as _bpe
from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe import (
    STRING_MERGE,
    first_only_merge,
    is_int_list,
    random_words,
    string_merge,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_bpe_encode", "check_bpe_decode"]

_ENCODE = _ref.encode
_DECODE = _ref.decode
_TOKEN_BYTES = _ref.token_bytes
_MERGE = _ref.merge_pair
_TRAIN = _ref.train_merges


def _apply_in_order(ids: list, merges: list, order, merge=_MERGE) -> list:
    for i in order:
        ids = merge(ids, merges[i], 256 + i)
    return ids


def _encode_variants(text: str, merges: list) -> list[tuple[str, Callable[[], list]]]:
    n = len(merges)
    words = _ref.split_words(text)

    def per_word(units, order, merge=_MERGE) -> list:
        return [
            t for w in units for t in _apply_in_order(list(w.encode("utf-8")), merges, order, merge)
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
            "each merge replaces only the first occurrence of its pair in a word: every "
            "occurrence becomes the new token (your merge_pair must replace them all)",
            lambda: per_word(words, range(n), first_only_merge),
        ),
        (STRING_MERGE, lambda: per_word(words, range(n), string_merge)),
        (
            STRING_MERGE,
            lambda: per_word(words, range(n), lambda *a: string_merge(*a, padded=True)),
        ),
    ]


def _training_text() -> str:
    from transformer_lab.data.text import load_shakespeare

    return load_shakespeare()[:3000]


def _encode_cases(hidden: bool) -> list[Case]:
    g = generator(7600 if hidden else 600)
    merges = _TRAIN(_training_text(), 40)
    specs = [
        # the graded cell's examples
        ("bytes alone", "hi", []),
        ("a word with its space", "hi hi", [(104, 105)]),
        ("a character of two bytes", "é", []),
        ("a merge of merges", "ab", [(97, 98), (256, 256)]),
        ("a merge that would cross words", "e c", [(101, 32)]),
        # a pair twice in one word; byte 132 ('Ą' is 196 132) holds '32 97' in '132 97'
        ("a pair twice in a word", "abab xabab abab", [(97, 98)]),
        ("bytes 132 and 32", "Ąa a", [(32, 97)]),
        (
            "a seen sentence",
            "First Citizen:\nBefore we proceed any further, hear me speak.",
            merges,
        ),
        ("no merges", "to be", []),
        ("spaces and newlines", "  two  spaces\n\nand lines \n", merges),
        ("unseen characters", "naïve — café ☕ λόγος", merges),
        ("empty text", "", merges),
        ("merges that would cross words", "the cat ate", [(101, 32), (32, 99), (256, 99)]),
    ]
    specs.append(("a random text", " ".join(random_words(g, 30)), merges))
    other = _TRAIN(" ".join(random_words(g, 200)), 30)
    specs.append(("random merges", " ".join(random_words(g, 40)), other))
    if hidden:
        other = _TRAIN(" ".join(random_words(g, 200)), 30)
        specs.append(("more random merges", " ".join(random_words(g, 40)), other))
    return [
        Case(name, (text, [tuple(p) for p in m]), {}, f"text={text[:50]!r}, {len(m)} merges")
        for name, text, m in specs
    ]


def _encode_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if isinstance(exc, KeyError) or (isinstance(exc, ValueError) and "not in list" in text):
        return (
            "look a pair up only when it is one of the merges (`if pair in rank`): most "
            "adjacent pairs of a word were never learned"
        )
    if isinstance(exc, ValueError) and ("empty" in text or "arg is an empty" in text):
        return (
            "a word can have no pair left (one token) or no learned pair: stop merging that "
            "word when nothing is left to merge"
        )
    if isinstance(exc, IndexError):
        return (
            "a word of one token has no pair: look at ids[i + 1] only while i + 1 < len(ids); "
            "with no merges, the ids are the bytes"
        )
    return _signature_hint(exc, "encode(text, merges)")


def check_bpe_encode(encode, hidden: bool = False) -> None:
    """Check ``encode(text, merges) -> list of ids`` against the reference."""
    __tracebackhide__ = True
    run = WatchedRunner(
        "check_bpe_encode",
        encode,
        [Forbidden("transformer_lab.bpe.encode", function=_ENCODE)],
        hidden,
        _encode_error_hint,
        function="encode",
    )
    for case in _encode_cases(hidden):
        text, merges = case.args
        want = _ENCODE(text, merges)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the list of token ids.", case)
        if not is_int_list(got):
            run.fail(f"return a list of Python ints, but yours is {kind_of(got)}.", case)
        if got == want:
            continue
        for message, variant in _encode_variants(text, merges):
            try:
                candidate = variant()
            except Exception:  # this mistake would crash on this input: not the student's
                continue
            if candidate == got and candidate != want:
                run.fail(message + ".", case)
        top = 255 + len(merges)
        bad = [i for i in got if not 0 <= i <= top]
        if bad:
            run.fail(
                f"ids run from 0 to {top} (255 + the number of merges); yours include {bad[0]}.",
                case,
            )
        back = _DECODE(got, merges)
        if back != text:
            run.fail(
                f"your ids decode to {back[:60]!r}, not to the text {text[:60]!r}: every byte "
                f"of every word must be kept.",
                case,
            )
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        start = max(k - 3, 0)
        run.fail(
            f"your ids decode back to the text, but they first differ at position {k}: from "
            f"position {start} yours are {got[start : k + 6]}, the merges give "
            f"{want[start : k + 6]}; apply every learned merge, in order, inside each word.",
            case,
            named=False,
        )
    run.passed()


def _decode_variants(ids: list, merges: list) -> list[tuple[str, Callable[[], str]]]:
    vocab = _TOKEN_BYTES(merges)
    joined = b"".join(vocab[i] for i in ids)
    swapped = [bytes([b]) for b in range(256)]
    for a, b in merges:
        swapped.append(swapped[b] + swapped[a])
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
        (
            "the text comes back stripped: keep leading and trailing spaces and newlines",
            lambda: joined.decode("utf-8", errors="replace").strip(),
        ),
        (
            "merge i's token is the bytes of its left token followed by those of its right "
            "token (vocab[left] + vocab[right]); yours are in the other order",
            lambda: b"".join(swapped[i] for i in ids).decode("utf-8", errors="replace"),
        ),
    ]


def _decode_cases(hidden: bool) -> list[Case]:
    g = generator(7700 if hidden else 700)
    merges = _TRAIN(_training_text(), 40)
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
    if hidden:
        specs.append(("random ids", _ENCODE(" ".join(random_words(g, 50)), merges), merges))
    return [
        Case(name, (list(ids), [tuple(p) for p in m]), {}, f"ids={ids[:10]}..., {len(m)} merges")
        for name, ids, m in specs
    ]


def _decode_error_hint(exc: BaseException, case: Case) -> str:
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


def check_bpe_decode(decode, hidden: bool = False) -> None:
    """Check ``decode(ids, merges) -> str`` against the reference."""
    __tracebackhide__ = True
    run = WatchedRunner(
        "check_bpe_decode",
        decode,
        [
            Forbidden("transformer_lab.bpe.decode", function=_DECODE),
            Forbidden("transformer_lab.bpe.token_strings", function=_ref.token_strings),
            Forbidden("transformer_lab.bpe.token_bytes", function=_TOKEN_BYTES),
        ],
        hidden,
        _decode_error_hint,
        function="decode",
    )
    for case in _decode_cases(hidden):
        ids, merges = case.args
        want = _DECODE(ids, merges)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the decoded text (a str).", case)
        if type(got) is bytes:
            run.fail(
                "return a str: decode the joined bytes with .decode('utf-8', errors='replace').",
                case,
            )
        if type(got) is not str:
            run.fail(f"return a str, but yours is {kind_of(got)}.", case)
        if got == want:
            continue
        for message, variant in _decode_variants(ids, merges):
            try:
                candidate = variant()
            except Exception:  # this mistake would crash on this input: not the student's
                continue
            if candidate == got and candidate != want:
                run.fail(message + ".", case)
        if got.count("\ufffd") > want.count("\ufffd"):
            run.fail(
                f"your text has U+FFFD (�) where the right one has a character: expected "
                f"{want[:60]!r}, but received {got[:60]!r}; a character's bytes were decoded "
                f"apart (tokens decoded one by one or in groups): join the bytes of all the "
                f"tokens first, then decode once.",
                case,
            )
        run.fail(f"expected {want[:60]!r}, but received {got[:60]!r}.", case, named=False)
    run.passed()


register(
    Exercise(
        "bpe_encode",
        "00_tokens_and_embeddings",
        "encode(text, merges) -> list of ids",
        cells=(Cell("bpe_encode_tests", "encode", 2),),
        check=check_bpe_encode,
        reference=_bpe.encode,
    )
)
register(
    Exercise(
        "bpe_decode",
        "00_tokens_and_embeddings",
        "decode(ids, merges) -> str",
        cells=(Cell("bpe_decode_tests", "decode", 1),),
        check=check_bpe_decode,
        reference=_bpe.decode,
    )
)
