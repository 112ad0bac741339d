"""Checks for notebook 7 (GPT), part 1: next-token batches.

Student-facing signature:

    next_token_batch(data, T, B, generator) -> (x, y), both (B, T) long, y[:, t] = x[:, t + 1]

The other checks of notebook 7: :mod:`~transformer_lab.checks.nb07_gpt.lm_loss` (the causal LM loss),
:mod:`~transformer_lab.checks.nb07_gpt.gpt_model` (GPT from blocks), :mod:`~transformer_lab.checks.nb07_gpt.sampling`
(filtering), :mod:`~transformer_lab.checks.nb07_gpt.kv_cache`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_next_token_batch", "signature_hint"]


# ---------------------------------------------------------------------------------------------
# next-token batches
def _batch_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "from" in text and "to" in text and "random" in text:
        return (
            "with len(data) = T + 1 there is exactly one window (start 0): draw the starts with "
            "torch.randint(len(data) - T, (B,), generator=generator)"
        )
    if "stack expects each tensor to be equal size" in text or "must match the size" in text:
        return (
            "a window starting at len(data) - T has no target for its last token: the starts "
            "must be smaller than len(data) - T"
        )
    return signature_hint(exc, "next_token_batch(data, T, B, generator)")


def _batch_cases(hidden: bool) -> list[tuple[int, int, int, int]]:
    """(N, T, B, seed): a long stream, then the smallest streams that have one and two windows."""
    cases = [(200, 8, 6, 1), (9, 8, 4, 2), (10, 8, 64, 3), (50, 1, 16, 4)]
    if hidden:
        cases += [(500, 32, 12, 11), (6, 5, 3, 12), (34, 32, 80, 13), (300, 3, 40, 14)]
    return cases


def check_next_token_batch(next_token_batch, hidden: bool = False) -> None:
    """Check ``next_token_batch(data, T, B, generator) -> (x, y)`` by its properties: every row
    of x is T consecutive tokens of data, y is the same window one token later, every start
    0 .. len(data) - T - 1 can be drawn, and the batch depends on the generator only."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner("check_next_token_batch", next_token_batch, (), hidden, _batch_error_hint)
    for N, T, B, seed in _batch_cases(hidden):
        # Distinct token values, so each row's start in the stream can be read off its first token.
        data = (torch.randperm(N, generator=generator(seed)) + 3).long()  # (N,)
        where = torch.full((N + 3,), -1, dtype=torch.long)
        where[data] = torch.arange(N)
        case = Case(
            f"len(data)={N}, T={T}, B={B}",
            (data, T, B, generator(100 + seed)),
            {},
            describe_args(data=data, T=T, B=B),
        )
        global_rng = torch.get_rng_state()
        result = run.call(case)
        x, y = _batch_pair(run, result, case, B, T, N)
        starts = where[x[:, 0]]  # (B,)
        windows = [data[s : s + T] for s in starts.tolist()]
        for b, (row, s) in enumerate(zip(x, starts.tolist())):
            if s == N - T and TRUSTED.equal(row, windows[b]):
                run.fail(
                    f"row {b} starts at len(data) - T = {s}, where the last input token has no "
                    "next token: the starts must be below len(data) - T, "
                    "torch.randint(len(data) - T, (B,), generator=generator).",
                    case,
                )
            if s < 0 or s + T > N or not TRUSTED.equal(row, windows[b]):
                run.fail(f"row {b} of x is not T = {T} consecutive tokens of data.", case)
        _check_targets(run, case, data, x, y, starts, T)
        if B >= 8 and N - T > 1 and bool((starts == starts[0]).all()):
            run.fail(f"all {B} rows are the same window: draw B independent starts.", case)
        if N - T == 2 and set(starts.tolist()) != {0, 1}:
            run.fail(
                f"with len(data) = T + 2 there are two windows (starts 0 and 1), but in {B} rows "
                f"yours drew only start {starts[0].item()}: draw the starts from 0 .. len(data) - T - 1, "
                "e.g. torch.randint(len(data) - T, (B,), generator=generator).",
                case,
            )
        # Same seed, different global RNG state: the same batch, or the generator is ignored.
        torch.manual_seed(seed + 7)
        again = run.call(Case(case.name, (data, T, B, generator(100 + seed)), {}, case.describe))
        torch.set_rng_state(global_rng)
        x2, y2 = _batch_pair(run, again, case, B, T)
        if not (TRUSTED.equal(x, x2) and TRUSTED.equal(y, y2)):
            run.fail(
                "two calls with generators of the same seed gave different batches: draw the "
                "starts with the generator you are given (generator=generator), not the global RNG.",
                case,
            )
        if N - T >= 100:  # many windows: other seeds all giving this very batch is no chance
            others = [
                run.call(
                    Case(case.name, (data, T, B, generator(300 + seed + i)), {}, case.describe)
                )
                for i in range(2)
            ]
            if all(TRUSTED.equal(x, _batch_pair(run, o, case, B, T)[0]) for o in others):
                run.fail(
                    "generators with different seeds gave the same batch: the batch ignores the "
                    "generator's seed (is it reseeded with manual_seed, or replaced by a new "
                    "Generator, inside your function?). Draw from the generator you are given.",
                    case,
                )
    run.passed()


def _batch_pair(
    run: Runner, result, case: Case, B: int, T: int, N: int | None = None
) -> tuple[Tensor, Tensor]:
    __tracebackhide__ = True
    if result is None:
        run.fail("your function returned None: return the tuple (x, y).", case)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = f"a {type(result).__name__}"
        if TRUSTED.is_tensor(result):
            got += f" of shape {tuple(result.shape)}"
        run.fail(f"return the tuple (x, y), but your function returned {got}.", case)
    pair = []
    for name, value in zip("xy", result):

        def hint(got: tuple, name=name) -> str | None:
            if got == (T, B):
                return "that is (T, B): stack the B windows as rows"
            if got == (B, T + 1):
                return f"that is the whole window of T + 1 tokens: {name} holds T of them"
            if N is not None and got == (N - T, T) and N - T < B:
                return (
                    f"only len(data) - T = {N - T} windows exist and yours returns one row per "
                    "window: the B starts are drawn with replacement, "
                    "torch.randint(len(data) - T, (B,), generator=generator), not as a permutation"
                )
            return None

        if TRUSTED.is_tensor(value) and value.dtype != torch.long and tuple(value.shape) == (B, T):
            run.fail(
                f"{name} should hold token ids as torch.long, but yours has dtype {value.dtype} "
                "(nn.Embedding and F.cross_entropy need integer ids).",
                case,
            )
        pair.append(run.expect_tensor(value, case, (B, T), torch.long, name, hint))
    return pair[0], pair[1]


def _check_targets(run: Runner, case: Case, data, x, y, starts, T) -> None:
    __tracebackhide__ = True
    want = torch.stack([data[s + 1 : s + 1 + T] for s in starts.tolist()])  # (B, T)
    if TRUSTED.equal(y, want):
        return
    if TRUSTED.equal(y, x):
        run.fail(
            "the targets equal the inputs: y[:, t] must be the token AFTER x[:, t], i.e. the "
            "window shifted by one (x = window[:-1], y = window[1:]).",
            case,
        )
    before = [data[s - 1 : s - 1 + T] if s >= 1 else None for s in starts.tolist()]
    if all(w is not None for w in before) and TRUSTED.equal(y, torch.stack(before)):
        run.fail(
            "shifted the wrong way: y[:, t] is the token BEFORE x[:, t]; it must be the one after. "
            "Did you swap them? Return (x, y) with x = window[:-1], y = window[1:].",
            case,
        )
    if T > 1 and TRUSTED.equal(y, torch.roll(x, -1, dims=1)):
        run.fail(
            "the last target wraps around to the first input token (torch.roll): take T + 1 "
            "tokens and split them, x = window[:-1], y = window[1:].",
            case,
        )
    if T > 1 and TRUSTED.equal(y[:, :-1], x[:, 1:]):
        run.fail(
            "y[:, :-1] matches, but the last target is wrong: it is the token right after the "
            "window, data[start + T].",
            case,
        )
    run.fail(
        "y is not x shifted by one token: x and y must come from the same window "
        "(one start per row, x = data[s : s + T], y = data[s + 1 : s + T + 1]).",
        case,
    )


register(
    Exercise(
        "next_token_batch",
        "07_gpt",
        "next_token_batch(data, T, B, generator) -> (x, y), both (B, T), y[:, t] = x[:, t + 1]",
        cells=(Cell("next_token_batch_tests", "next_token_batch", 2),),
        check=check_next_token_batch,
        against="slices of data at the starts the generator draws",
        kind="random",
    )
)
