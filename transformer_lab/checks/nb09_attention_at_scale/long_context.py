"""Checks for notebook 9, part 2: grouped-query attention, the cache's size, sliding windows.

grouped_query_attention(q, k, v) -> (B, H, T, D); k, v have H_kv heads, H a multiple of H_kv
kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch=1, bytes_per_value=2) -> int
sliding_window_mask(T, window) -> (T, T) bool, query t sees keys t - window + 1 .. t
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from transformer_lab import gqa as _gqa
from transformer_lab import masks as _masks
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import _expect_value_error, _hint
from transformer_lab.checks.nb09_attention_at_scale.tiled import _TORCH_ATTENTION
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_grouped_query_attention", "check_kv_cache_bytes", "check_sliding_window_mask"]


# ---------------------------------------------------------------------------------------------
def _attend(q, k, v, scale=True, mask=None):
    s = q @ k.transpose(-2, -1)
    if scale is True:
        s = s / math.sqrt(q.shape[-1])
    elif scale:
        s = s / scale
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def _gqa_mistakes(q, k, v) -> list[Mistake]:
    H, H_kv = q.shape[1], k.shape[1]
    group = H // H_kv
    T, S, D = q.shape[2], k.shape[2], q.shape[3]
    kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    return [
        Mistake(
            "query head h reads key/value head h % H_kv (k.repeat tiles the heads); it should read "
            "head h // (H / H_kv): consecutive query heads share one key/value head, so use "
            "repeat_interleave",
            lambda: _attend(q, k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)),
        ),
        Mistake(
            "every query head reads key/value head 0; query head h reads head h // (H / H_kv)",
            lambda: _attend(q, k[:, :1], v[:, :1]),
        ),
        Mistake(
            "the scores are not divided by sqrt(D)",
            lambda: _attend(
                q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), scale=False
            ),
        ),
        Mistake(
            "the query heads of a group are averaged into one; each query head keeps its own "
            "output, only the keys and values are shared",
            lambda: _attend(q.unflatten(1, (H_kv, group)).mean(2), k, v).repeat_interleave(
                group, 1
            ),
        ),
        Mistake(
            "keys are shared correctly but the values are not: repeat v exactly like k "
            "(repeat_interleave over the head dimension)",
            lambda: _attend(q, k.repeat_interleave(group, 1), v.repeat(1, group, 1, 1)),
        ),
        Mistake(
            "the keys are used as the values too: the weights must average v, attend(q, k, v)",
            lambda: _attend(q, kr, kr),
        ),
        Mistake(
            "the keys and the values are swapped: scores come from q and k, the output averages v",
            lambda: _attend(q, vr, kr),
        ),
        Mistake(
            "a causal mask is applied; this exercise has no mask: every query sees every key",
            lambda: _attend(q, kr, vr, mask=torch.ones(T, S, dtype=torch.bool).tril(S - T)),
        ),
        Mistake(
            "a causal mask is applied; this exercise has no mask: every query sees every key",
            lambda: _attend(q, kr, vr, mask=torch.ones(T, S, dtype=torch.bool).tril()),
        ),
    ] + [
        Mistake(
            f"the scores are divided by {name} instead of sqrt(D) = sqrt({D})",
            lambda value=value: _attend(q, kr, vr, scale=value),
        )
        for name, value in (
            (f"D = {D}", D), (f"sqrt(S) = sqrt({S})", math.sqrt(S)), (f"sqrt(T) = sqrt({T})", math.sqrt(T)),
            (f"sqrt(H) = sqrt({H})", math.sqrt(H)), ("sqrt(H * D)", math.sqrt(H * D)), ("2", 2.0),
            (f"sqrt(D * H / H_kv) = sqrt({D * group})", math.sqrt(D * group)),
            (f"sqrt(D / (H / H_kv)) = sqrt({D / group:g})", math.sqrt(D / group)),
            (f"sqrt(H_kv * D) = sqrt({H_kv * D})", math.sqrt(H_kv * D)),
        )
        if abs(value - math.sqrt(D)) > 1e-9
    ]  # fmt: skip


def _gqa_tip(exc: BaseException, case: Case) -> str:
    q, k = case.args[0], case.args[1]
    H, H_kv = q.shape[1], k.shape[1]
    return (
        f"dim 1 holds the heads: q has H={H}, k and v H_kv={H_kv}; repeat each key/value head "
        f"H // H_kv = {H // H_kv} times along dim 1 (repeat_interleave(H // H_kv, dim=1)) so "
        f"that they have H heads too"
    )


def _window_tip(exc: BaseException, case: Case) -> str:
    T, w = case.args
    if w > T:
        return (
            f"it fails when the window ({w}) is longer than the sequence (T={T}): then every "
            f"query sees all earlier keys, the plain causal mask"
        )
    return ""


def check_grouped_query_attention(grouped_query_attention, hidden: bool = False) -> None:
    """Check ``grouped_query_attention(q, k, v)`` against the repeated-heads formula."""
    __tracebackhide__ = True
    run = Runner(
        "check_grouped_query_attention",
        grouped_query_attention,
        [
            Forbidden(
                "transformer_lab's grouped_query_attention", function=_gqa.grouped_query_attention
            ),
            _TORCH_ATTENTION,
        ],
        hidden,
        _hint("grouped_query_attention(q, k, v)", _gqa_tip),
    )
    g = generator(9903 if hidden else 903)
    specs = [(2, 4, 2, 5, 7, 3), (1, 6, 3, 4, 4, 8), (2, 4, 1, 3, 6, 4), (1, 2, 2, 5, 5, 4)]
    if hidden:
        specs += [(3, 8, 2, 6, 9, 5), (1, 12, 4, 2, 3, 6)]
    for B, H, H_kv, T, S, D in specs:
        q = torch.randn(B, H, T, D, generator=g)
        k, v = torch.randn(B, H_kv, S, D, generator=g), torch.randn(B, H_kv, S, D, generator=g)
        case = Case(f"H={H}, H_kv={H_kv}", (q, k, v), {}, describe_args(q=q, k=k, v=v))
        expected = _attend(q, k.repeat_interleave(H // H_kv, 1), v.repeat_interleave(H // H_kv, 1))
        out = run.expect_tensor(run.call(case), case, expected.shape, expected.dtype, "output")
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(out, _gqa_mistakes(q, k, v), 1e-5, 1e-5)
            message = message or _scale_fit(run, out, q, k, v)
            if message:
                run.fail(message, case)
            case.data.update(
                axes=("batch element", "head", "query", "feature"), dims={"D": D, "H": H, "S": S}
            )
            run.explain(out, expected, case, (), 1e-5, 1e-5)
    q, k = torch.zeros(1, 6, 2, 4), torch.zeros(1, 4, 2, 4)
    bad = Case("H=6 query heads, H_kv=4", (q, k, k), {}, "q (1, 6, 2, 4), k and v (1, 4, 2, 4)")
    _expect_value_error(
        run,
        lambda: grouped_query_attention(q.clone(), k.clone(), k.clone()),
        bad,
        ["6", "4"],
        "H not a multiple of H_kv",
    )
    run.passed()


def _scale_fit(run: Runner, out: Tensor, q: Tensor, k: Tensor, v: Tensor) -> str | None:
    """Is the output right for some other divisor c of the scores (q k^T / c)? Found by a scan."""
    group = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    D = q.shape[-1]
    for c in torch.logspace(-2, 3, 400, dtype=torch.float64).tolist():
        if abs(c - math.sqrt(D)) > 1e-3 * c and run.close(
            out, _attend(q, kr, vr, scale=c), 1e-4, 1e-4
        ):
            return (
                f"your scores are divided by about {c:.3g}, not by sqrt(D) = {math.sqrt(D):.3g}: "
                f"scale q k^T by 1 / sqrt(d_head), the size of one head"
            )
    return None


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
            (expected * 8, "that is bits, not bytes: bytes_per_value already counts bytes"),
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
        known.append((expected // 8, "your result is divided by 8 (bits to bytes?): "
                      "bytes_per_value already counts bytes, so multiply by it and do not divide"))  # fmt: skip
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


# ---------------------------------------------------------------------------------------------
def _window_mistakes(T: int, w: int) -> list[Mistake]:
    ones = torch.ones(T, T, dtype=torch.bool)
    band = ones.tril() & ~ones.tril(-w)
    return [
        Mistake("off by one: each query sees window + 1 keys; it should see exactly window keys (itself included)",
                lambda: ones.tril() & ~ones.tril(-w - 1)),
        Mistake("off by one: each query sees window - 1 keys; it should see exactly window keys (itself included)",
                lambda: ones.tril() & ~ones.tril(-w + 1)),
        Mistake("the window is not causal: keys after the query are visible; keep the lower triangle (s <= t)",
                lambda: ~ones.tril(-w) & ~ones.triu(w)),
        Mistake("the polarity is reversed: True must mean 'may attend'", lambda: ~band),
        Mistake("the mask is transposed: row t is query t, which may attend to the keys just before it",
                lambda: band.T),
        Mistake("the window is measured from the start (keys 0..window-1); it slides with the "
                "query: t - window + 1 .. t",
                lambda: ones.tril() & (torch.arange(T)[None, :] < w)),
        Mistake("that is the plain causal mask: limit it to the last window keys", lambda: ones.tril()),
        Mistake("a query must see itself: the diagonal belongs to the window, t - window < s <= t "
                "(window keys, the query's own included)",
                lambda: ones.tril(-1) & ~ones.tril(-w - 1)),
    ]  # fmt: skip


def check_sliding_window_mask(sliding_window_mask, hidden: bool = False) -> None:
    """Check ``sliding_window_mask(T, window)``: (T, T) bool, True for t - window < s <= t."""
    __tracebackhide__ = True
    run = Runner("check_sliding_window_mask", sliding_window_mask,
                 [Forbidden("transformer_lab's sliding_window_mask", function=_masks.sliding_window_mask)],
                 hidden, lambda e, c: _window_tip(e, c) or _hint("sliding_window_mask(T, window)")(e, c))  # fmt: skip
    specs = [(7, 3), (5, 1), (6, 6), (4, 9), (8, 2)] + (
        [(13, 4), (20, 7), (3, 2)] if hidden else []
    )
    for T, w in specs:
        case = Case(f"T={T}, window={w}", (T, w), {}, f"T={T}, window={w}")
        expected = _masks.sliding_window_mask(T, w)
        out = run.expect_tensor(run.call(case), case, (T, T), torch.bool, "mask")
        if not torch.equal(out, expected):
            message = run.diagnose(out, _window_mistakes(T, w), 0, 0)
            future = out & ~torch.ones(T, T, dtype=torch.bool).tril()
            if message is None and future.any():
                t, s = future.nonzero()[0].tolist()
                message = (
                    f"the mask is not causal: query {t} may attend to key {s}, which comes after it; "
                    f"a sliding window only looks back (t - window < s <= t)"
                )
            if message:
                run.fail(message, case)
            case.data["axes"] = ("query", "key")
            run.explain(out, expected, case, (), 0, 0, what="mask")
    bad = Case("window=0", (5, 0), {}, "T=5, window=0")
    _expect_value_error(run, lambda: sliding_window_mask(5, 0), bad, ["0"], "a window of 0 keys")
    bad = Case("window=-2", (5, -2), {}, "T=5, window=-2")
    _expect_value_error(
        run, lambda: sliding_window_mask(5, -2), bad, ["-2"], "a negative window (window < 1)"
    )
    run.passed()


register(
    Exercise(
        "grouped_query_attention",
        "09_attention_at_scale",
        "grouped_query_attention(q, k, v) -> (B, H, T, D)",
        cells=(Cell("grouped_query_attention_tests", "grouped_query_attention", 2),),
        check=check_grouped_query_attention,
        reference=_gqa.grouped_query_attention,
    )
)


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


register(
    Exercise(
        "sliding_window_mask",
        "09_attention_at_scale",
        "sliding_window_mask(T, window) -> (T, T) bool",
        cells=(Cell("sliding_window_mask_tests", "sliding_window_mask", 2),),
        check=check_sliding_window_mask,
        reference=_masks.sliding_window_mask,
    )
)
