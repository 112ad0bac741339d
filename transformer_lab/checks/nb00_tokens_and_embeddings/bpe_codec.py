"""Checks for notebook 0, exercises 4-5: encoding and decoding with learned merges.

    encode(text, merges) -> list of ids     words, UTF-8 bytes, merges applied in learned order
    decode(ids, merges) -> str              the tokens' bytes joined, then decoded as UTF-8

Any text must round-trip, including characters never seen in training: they are bytes too.
The replayed mistakes (and decode's cases) are in codec_mistakes.py; the probes both fall back on,
in bpe_probes.py.
"""

from __future__ import annotations

from transformer_lab import bpe as _bpe
from transformer_lab import bpe as _ref
from transformer_lab.checks.engine.core import Case, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe import is_int_list, random_words
from transformer_lab.checks.nb00_tokens_and_embeddings.bpe_probes import (
    DECODE_FAMILIES,
    encode_families,
    family_of,
    probe_errors,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.codec_mistakes import (
    decode_cases,
    decode_error_hint,
    decode_variants,
    encode_variants,
    training_text,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.confirm import (
    confirmed_variant,
    first_variant,
)
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_bpe_encode", "check_bpe_decode"]

_ENCODE = _ref.encode
_DECODE = _ref.decode
_TOKEN_BYTES = _ref.token_bytes
_MERGE = _ref.merge_pair
_TRAIN = _ref.train_merges


def _encode_cases(hidden: bool) -> list[Case]:
    g = generator(7600 if hidden else 600)
    merges = _TRAIN(training_text(), 40)
    specs = [
        # the graded cell's examples
        ("bytes alone", "hi", []),
        ("a word with its space", "hi hi", [(104, 105)]),
        ("a character of two bytes", "é", []),
        ("a merge of merges", "ab", [(97, 98), (256, 256)]),
        ("a merge built on a merge", "abc cab abcabc", [(97, 98), (256, 99)]),
        ("a merge that would cross words", "e c", [(101, 32)]),
        # a pair twice in one word; byte 132 ('Ą' is 196 132) holds '32 97' in '132 97'
        ("a pair twice in a word", "abab xabab abab", [(97, 98)]),
        ("bytes 132 and 32", "Ąa a", [(32, 97)]),
        (
            "a seen sentence",
            "First Citizen:\nBefore we proceed any further, hear me speak.",
            merges,
        ),
        # runs of 3-5 equal tokens: an overlapping or right-to-left merge differs here
        ("runs of one letter", "aaa baaaa aaaaa", [(97, 97), (256, 97), (98, 256)]),
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


def _not_flat_ints(got, want: list[int]) -> str | None:
    """What is wrong with a result that is not a flat list of ints: nested per word, tokens as
    bytes or strings, a tensor or an array, ints of another type."""
    if hasattr(got, "tolist") and not isinstance(got, (list, tuple)):
        return f"return a list of Python ints, not {kind_of(got)}: convert it with .tolist()"
    if not isinstance(got, (list, tuple)):
        return None
    if got and all(isinstance(g, (list, tuple)) for g in got):
        flat = [i for part in got for i in part]
        verdict = "the ids are right, but" if flat == want else "your result is nested:"
        return (
            f"{verdict} you return a list of lists (one list per word); encode returns one flat "
            f"list of ids: extend (concatenate) the words' ids into a single list"
        )
    if got and all(isinstance(g, (bytes, str)) for g in got):
        return (
            "your list holds the tokens themselves (bytes or strings), not their ids: return "
            "the int id of each token (a byte's value, or 256 + the merge's index)"
        )
    if type(got) is tuple and all(type(g) is int for g in got):
        return "return a list of ids, not a tuple: list(...) around it"
    if all(hasattr(g, "item") for g in got):
        return "your ids are tensors or numpy numbers, not Python ints: use int(...) or .item()"
    return None


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
    probe_errors(run, encode_families, _encode_error_hint)
    cases = _encode_cases(hidden)
    for case in cases:
        text, merges = case.args
        want = _ENCODE(text, merges)
        got = run.call(case)
        if got is None:
            run.fail("your function returned None: return the list of token ids.", case)
        if not is_int_list(got):
            problem = _not_flat_ints(got, want)
            run.fail(
                (problem or f"return a list of Python ints, but yours is {kind_of(got)}") + ".",
                case,
            )
        if got == want:
            continue
        message = confirmed_variant(run, case, cases, encode_variants, got)
        message = message or family_of(run, encode_families())
        message = message or first_variant(encode_variants, case.args, got)
        if message is not None:
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
        decode_error_hint,
        function="decode",
    )
    probe_errors(run, lambda: DECODE_FAMILIES, decode_error_hint)
    cases = decode_cases(hidden)
    for case in cases:
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
        message = confirmed_variant(run, case, cases, decode_variants, got)
        message = message or family_of(run, DECODE_FAMILIES)
        message = message or first_variant(decode_variants, case.args, got)
        if message is not None:
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
