"""Check for notebook 09's KV-cache size: the bytes a cache of keys and values takes.

kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2) -> int
"""

from __future__ import annotations

import math

from transformer_lab import gqa as _gqa
from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import _hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_kv_cache_bytes"]


# ---------------------------------------------------------------------------------------------
_KV_ARGS = ("n_layers", "n_kv_heads", "d_head", "seq_len", "batch", "bytes_per_value")


def _ignored_argument(run: Runner, args: tuple, kwargs: dict, value) -> tuple[str, str] | None:
    """An argument whose change leaves the result unchanged is ignored (e.g. a fixed 4 bytes in
    place of bytes_per_value): found by calling again with that one argument tripled."""
    full = dict(zip(_KV_ARGS, args), **{"batch": 1, "bytes_per_value": 2, **kwargs})
    for name in _KV_ARGS:
        changed = {**full, name: full[name] * 3}
        again, error, calls = run.attempt(tuple(changed[n] for n in _KV_ARGS[:4]),
                                          {n: changed[n] for n in _KV_ARGS[4:]})  # fmt: skip
        if error is None and not calls and again == value:
            return name, (
                f"{name} is ignored: tripling it leaves your result at {value!r}; the cache grows "
                f"in proportion to it (use the argument, not a fixed number)."
            )
    return None


def check_kv_cache_bytes(kv_cache_bytes, hidden: bool = False) -> None:
    """Check ``kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2)``."""
    __tracebackhide__ = True
    signature = "kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2)"
    forbidden = [Forbidden("transformer_lab's kv_cache_bytes", function=_gqa.kv_cache_bytes)]
    run = Runner("check_kv_cache_bytes", kv_cache_bytes, forbidden, hidden, _hint(signature))
    specs = [  # the first case tells every factor apart (2, batch 3, 8 bytes, 32 layers)
        ((32, 8, 128, 100), {"batch": 3, "bytes_per_value": 8}),
        ((12, 12, 64, 1024), {}),
        ((80, 8, 128, 4096), {"batch": 4}),
        ((4, 4, 32, 64), {"bytes_per_value": 4}),
    ]
    specs += [((2, 1, 16, 10), {})]
    specs += [((9, 5, 7, 11), {"batch": 3, "bytes_per_value": 4})]  # every factor apart
    if hidden:
        specs += [
            ((48, 8, 128, 32768), {"batch": 2}),
            ((6, 3, 24, 77), {"batch": 5, "bytes_per_value": 1}),
        ]
    first_failure = None
    for args, kwargs in specs:
        L, H_kv, D, T = args
        B, nbytes = kwargs.get("batch", 1), kwargs.get("bytes_per_value", 2)
        described = ", ".join(
            [f"n_layers={L}, n_kv_heads={H_kv}, d_head={D}, seq_len={T}"]
            + [f"{k}={v}" for k, v in kwargs.items()]
        )
        case = Case(described, args, kwargs, described)
        expected = 2 * L * H_kv * D * T * B * nbytes
        value = run.call(case)
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (isinstance(value, float) and not value.is_integer())
        ):
            run.fail(
                f"expected a whole number of bytes (an int), but your function returned {value!r}.",
                case,
            )
        if isinstance(value, float):
            run.fail(
                f"return an int (a count of bytes), not the float {value!r}; use // or int().", case
            )
        if value == expected:
            continue
        known = [
            (
                expected // 2,
                "the factor 2 is missing: the cache holds a key AND a value per layer, head and token",
            ),
            (
                expected // nbytes,
                "bytes_per_value is missing: each stored number takes bytes_per_value bytes",
            ),
            (expected // B, "the batch is missing: every sequence of the batch has its own cache"),
            (expected // L, "n_layers is missing: every layer keeps its own keys and values"),
            (expected // (B * nbytes), "both the batch and bytes_per_value are missing"),
            (
                expected // 2 // nbytes,
                "the factor 2 (keys and values) and bytes_per_value are missing",
            ),
            (2 * L * H_kv * D * T * B * 2, "bytes_per_value is ignored (2 used for every dtype)"),
            (
                expected // H_kv,
                "n_kv_heads is missing: every key/value head keeps its own keys and values",
            ),
            (expected // D, "d_head is missing: each key and value holds d_head numbers"),
            (expected // T, "seq_len is missing: the cache holds every token's key and value"),
            (expected * T, "seq_len is counted twice: the cache grows linearly with the tokens"),
        ]
        for unit, name in ((2**10, "KiB"), (2**20, "MiB"), (2**30, "GiB")):
            known.append((expected // unit, f"that is {name} (bytes // 2**{unit.bit_length() - 1}), "
                          f"not bytes; return the number of bytes"))  # fmt: skip
        if 8 not in (L, H_kv, D, T, B, nbytes):  # else a factor 8 may be an argument's
            known.append((expected * 8, "that is bits, not bytes: bytes_per_value already counts "
                          "bytes"))  # fmt: skip
            known.append((expected // 8, "your result is divided by 8 (bits to bytes?): "
                          "bytes_per_value already counts bytes, so multiply by it and do not "
                          "divide"))  # fmt: skip
        known.append((expected // T * (T + 1), "one token too many: the cache holds exactly "
                      "seq_len tokens (seq_len + 1 used)"))  # fmt: skip
        for name, f in (("n_layers", L), ("n_kv_heads", H_kv), ("d_head", D), ("seq_len", T),
                        ("batch", B), ("bytes_per_value", nbytes)):  # fmt: skip
            for d in (-1, 1):
                if f >= 3 and (name, d) != ("seq_len", 1):  # f, f +- 1 tell apart
                    known.append((expected // f * (f + d), f"{name} is off by one: you used "
                                  f"{name} {'-' if d < 0 else '+'} 1 (the formula takes {name} "
                                  f"itself, {f} here)"))  # fmt: skip
        matches = {message for n, message in known if n == value and n != expected}
        ignored = _ignored_argument(run, args, kwargs, value)  # (name, message) or None
        if ignored is not None:  # a formula that fits by coincidence must not hide it
            matches = {m for m in matches if ignored[0] in m} or {ignored[1]}
        hint = matches.pop() if len(matches) == 1 else None  # two explanations fit: name neither
        if hint is None and len(kwargs) < 2:  # the defaults: rerun with them spelled out
            full = {"batch": B, "bytes_per_value": nbytes}
            again, error, _ = run.attempt(args, full)
            if error is None and again == expected:
                hint = (
                    f"right when batch and bytes_per_value are passed, wrong with the defaults: "
                    f"the signature's defaults must be batch=1 and bytes_per_value=2 (yours give "
                    f"{value:,})"
                )
        if hint is None and not matches:
            hint = _factor_evidence(value, expected, L, H_kv, D, T, B, nbytes)
        if hint:
            run.fail(hint, case)
        if first_failure is None:  # no unique explanation here: another case may tell them apart
            first_failure = (
                f"expected {expected:,} bytes = 2 x {L} x {H_kv} x {D} x {T} x {B} x {nbytes}, "
                f"but yours gives {value:,}.",
                case,
            )
    if first_failure is not None:
        run.fail(*first_failure, named=False)
    run.passed()


def _factor_evidence(value, expected, L, H_kv, D, T, B, nbytes) -> str | None:
    """The one set of the formula's factors that the student's number lacks (or has twice)."""
    import itertools

    factors = [("the factor 2 (a key and a value)", 2), ("n_layers", L), ("n_kv_heads", H_kv),
               ("d_head", D), ("seq_len", T), ("batch", B), ("bytes_per_value", nbytes)]  # fmt: skip
    fits = []
    for r in (1, 2):
        for combo in itertools.combinations(factors, r):
            p = math.prod(v for _, v in combo)
            if p == 1:
                continue
            names = " and ".join(n for n, _ in combo)
            if value * p == expected:
                fits.append(f"{names} {'is' if r == 1 else 'are'} missing from your product")
            elif value == expected * p:
                fits.append(f"{names} {'is' if r == 1 else 'are'} counted twice")
        if fits:
            break
    return fits[0] + f" (expected {expected:,}, yours {value:,})" if len(fits) == 1 else None


register(
    Exercise(
        "kv_cache_bytes",
        "09_attention_at_scale",
        "kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2) -> int",
        cells=(Cell("kv_cache_bytes_tests", "kv_cache_bytes", 1),),
        check=check_kv_cache_bytes,
        reference=_gqa.kv_cache_bytes,
    )
)
