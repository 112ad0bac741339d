"""Check for notebook 4, exercise 2: a detector of information flowing from future tokens.

    future_leaks(attend, T, C, seed=0) -> bool, True if an output depends on a later token

The detector is run on small attention layers that do and do not leak (transformer_lab.utils);
the layers record what the detector feeds them, which names its mistake.
"""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Case, Runner, kind_of
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.utils import LEAK_MODES as _UTILS_MODES
from transformer_lab.utils import attention_layer

# the layers of transformer_lab.utils leak into output 0 when they leak at all; this one leaks
# only from the last token into the output before it, so comparing out[0] alone misses it
_LATER_ONLY = "last token to the one before"
LEAK_MODES = {**_UTILS_MODES, _LATER_ONLY: True}

__all__ = ["check_future_leaks"]

# ---------------------------------------------------------------------------------------------
# a leak detector: small attention layers that do and do not let the future in
_LEAK_HINTS = {
    "after softmax": " It leaks through the softmax's denominator, more weakly than the allowed "
    "keys: compare exactly (torch.equal), not with a tolerance.",
    "faint leak": " Later tokens change the outputs by a few parts in 10 million: compare "
    "exactly (torch.equal), not with a relative tolerance.",
    "last token to first": " The only leak is from the LAST token to the FIRST query: change every "
    "j and compare all t < j.",
    "second token to first": " The only leak is from token 1 to query 0: change every later "
    "token j (1 .. T - 1), not only the last one.",
    "strictly past": " This mask is wrong (no token sees itself) but causal: nothing from the "
    "future enters.",
}


class _OneHole:
    """Causal attention with one hole: query t also sees the later key j (t < j).

    Rebuilt from (T, C, seed, t, j) when pickled, like the layers of transformer_lab.utils."""

    def __init__(self, T: int, C: int, seed: int, t: int, j: int) -> None:
        self.T, self.C, self.seed, self.t, self.j = T, C, seed, t, j
        self.layer = attention_layer(T, C, "causal", seed)  # its weights, its (T, T) mask

    def __reduce__(self):
        return (_OneHole, (self.T, self.C, self.seed, self.t, self.j))

    def __call__(self, x):
        from transformer_lab.attention import scaled_dot_product_attention as sdpa

        layer = self.layer
        mask = layer.causal.clone()  # (T, T)
        mask[self.t, self.j] = True
        return sdpa(x @ layer.w_q, x @ layer.w_k, x @ layer.w_v, mask)[0]


def _layer(T: int, C: int, mode: str, seed: int):
    if mode == _LATER_ONLY:  # query T - 2 also sees key T - 1
        return _OneHole(T, C, seed, T - 2, T - 1)
    return attention_layer(T, C, mode, seed)


def _leak_map(run: Runner, T: int, C: int, seed: int) -> set[tuple[int, int]] | None:
    """The holes (t, j) the detector finds when the only leak is token j into output t: one
    layer per hole (None when the detector crashes or answers no bool on one of them)."""
    found = set()
    for j in range(1, T):
        for t in range(j):
            got, error, calls = run.attempt((_OneHole(T, C, seed, t, j), T, C), {})
            if error is not None or calls or not isinstance(got, bool):
                return None
            if got:
                found.add((t, j))
    return found


def _map_diagnosis(found: set[tuple[int, int]], T: int, sees_full_leak: bool) -> str | None:
    """Name the pattern of the leaks a detector misses: which outputs it compares, which tokens
    it changes (``sees_full_leak``: it finds the leak of a layer without a mask)."""
    holes = {(t, j) for j in range(1, T) for t in range(j)}
    missed = holes - found
    js = {j for _, j in found}
    if not missed or not found and not (sees_full_leak and T > 2):
        return None
    if not found:
        return (
            "it finds a leak when every token leaks but not when one token leaks into one "
            "output: return True as soon as one comparison differs (any, not all)"
        )
    if missed == {(j - 1, j) for j in range(1, T)}:
        return (
            "it misses a leak from token j into the output just before it, out[j - 1] (an "
            "off-by-one: out[:j - 1]); compare all of out[:j]"
        )
    if found == {(0, j) for j in range(1, T)}:
        return (
            "it compares only the first output (position 0), but a leak can reach any earlier "
            "output: compare all of out[:j]"
        )
    if found == {(j - 1, j) for j in range(1, T)}:
        return (
            "it compares only the output just before the changed token, out[j - 1], but a leak "
            "can reach every earlier output: compare all of out[:j]"
        )
    if missed == {(t, T - 1) for t in range(T - 1)}:
        return (
            f"it never changes the last token (j = {T - 1}; a range that stops one short?): "
            f"change every token j = 1 .. T - 1, range(1, T)"
        )
    if len(js) == 1:
        return (
            f"it finds leaks from token {min(js)} only (a return inside the loop, or one token "
            f"changed?): change every token j = 1 .. T - 1 in turn"
        )
    return None


def _not_reproducible(future_leaks, run: Runner, T: int, C: int, seed: int) -> bool:
    """Whether two runs with the same seed feed the causal layer different first inputs."""
    firsts = []
    for _ in range(2):
        rec = _Recorder(attention_layer(T, C, "causal", seed))
        run.call(Case("mask variant 'causal', again", (rec, T, C), {}, f"T={T}, C={C}"))
        firsts.append(rec.inputs[0] if rec.inputs else None)
    a, b = firsts
    return a is not None and b is not None and (a.shape != b.shape or not torch.equal(a, b))


class _Recorder:
    """An attention layer that remembers what the student's detector feeds it.

    Under grading the detector runs in the graded kernel: the recorder travels there pickled,
    and the attributes named in ``_tlab_sync`` come back after the call (checks.engine.serve)."""

    _tlab_sync = ("inputs", "first")

    def __init__(self, attend) -> None:
        self.attend, self.inputs, self.first = attend, [], None

    def __call__(self, x):
        if self.first is None:
            self.first = x  # the object itself: a later in-place change shows
        self.inputs.append(x.detach().clone())
        return self.attend(x)


def _columns_changed(rec: _Recorder) -> bool:
    """Every changed input differs from the first in one feature (column) of several tokens."""
    base, changed = rec.inputs[0], rec.inputs[1:]
    if not changed or any(x.shape != base.shape or x.dim() != 2 for x in changed):
        return False
    diffs = [x != base for x in changed if (x != base).any()]
    return bool(diffs) and all(
        int(d.any(dim=0).sum()) == 1 and int(d.any(dim=1).sum()) > 1 for d in diffs
    )


def _leak_diagnosis(answers: dict, records: dict, T: int, C: int, run: Runner, seed: int) -> str:
    wrong = [m for m, got in answers.items() if got != LEAK_MODES[m]]
    if len(wrong) == len(answers):
        return (
            "your detector is inverted: it returns True when nothing leaks and False when the "
            "future leaks; return True when an earlier output changed"
        )
    rec = records[wrong[0]]
    base = rec.inputs[0] if rec.inputs else None
    if rec.first is not None and base is not None and not torch.equal(rec.first, base):
        return (
            "your detector changes x itself (changed = x, then changed[j] = ...): every test "
            "must start from the same input, so copy it with x.clone()"
        )
    changed = set()
    for x in rec.inputs[1:]:
        if x.shape == base.shape:
            changed |= set((x != base).any(dim=-1).nonzero().flatten().tolist())
    if len(rec.inputs) > 1 and not changed:
        return (
            "your detector never changed a token: every input it passed to attend equals the "
            "first one; set changed[j] to new random values"
        )
    mode = wrong[0]
    if changed == {0} and LEAK_MODES[mode]:  # output 0 may read token 0: no test of the future
        return (
            f"attention with mask variant '{mode}' leaks, yet your detector said False: it "
            f"changes only token 0, which every output may read; change each later token "
            f"j = 1 .. T - 1 in turn and compare only the outputs before it, out[:j]"
        )
    if _columns_changed(rec):
        return (
            "your detector changes a column of x (feature j of every token, changed[:, j]) "
            "instead of a row: x is (T, C), one row per token, so token j is the row "
            "changed[j]; change one token (one row) at a time and compare out[:j]"
        )
    fresh = [x for x in rec.inputs[1:] if x.shape == base.shape and (x != base).any(dim=-1).all()]
    if not LEAK_MODES[mode] and T > 2 and fresh:  # every token changed, token 0 included
        return (
            "your detector passes attend inputs in which every token differs from x, token 0 "
            "included: start each test from the same input, changed = x.clone(), change only "
            "token j, then compare out[:j] with the base output"
        )
    if not LEAK_MODES[mode]:
        return (
            f"the causal layer '{mode}' does not leak, yet your detector said True: changing "
            f"token j may change outputs j, j + 1, ... without any leak, so compare only the "
            f"outputs before the changed token, out[:j] (and change tokens j >= 1)"
        )
    if changed and changed <= {T - 1} and mode == "second token to first":
        return (
            "attention with mask variant 'second token to first' leaks, yet your detector "
            "said False: you change only the last token; change every later token j (1 .. T - 1)"
        )
    if mode == _LATER_ONLY and T - 1 in changed:
        return (
            f"attention in which token {T - 1} leaks only into output {T - 2} leaks, yet your "
            f"detector said False although it changed token {T - 1}: you compare only some "
            f"outputs (position 0?); a leak can reach any earlier output: compare all of out[:j]"
        )
    found = _leak_map(run, T, C, seed)
    pattern = _map_diagnosis(found, T, answers.get("none") is True) if found is not None else None
    if pattern:
        return (
            f"attention with mask variant '{mode}' leaks, yet your detector said False: "
            f"{pattern}.{_LEAK_HINTS.get(mode, '')}"
        )
    return (
        f"attention with mask variant '{mode}' (T={T}, C={C}) leaks, yet your detector said "
        f"False.{_LEAK_HINTS.get(mode, '')}"
    )


def check_future_leaks(future_leaks, hidden: bool = False) -> None:
    """Check ``future_leaks(attend, T, C)`` on attention layers that do and do not leak the future."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_future_leaks",
        future_leaks,
        (),
        hidden,
        lambda e, c: _signature_hint(e, "future_leaks(attend, T, C, seed=0)"),
    )
    sizes, seed = ([(2, 3), (12, 8)], 5) if hidden else ([(6, 4)], 0)
    for T, C in sizes:
        answers, records = {}, {}
        for mode in LEAK_MODES:
            if mode == _LATER_ONLY and T < 3:
                continue
            records[mode] = _Recorder(_layer(T, C, mode, seed))
            case = Case(f"mask variant '{mode}'", (records[mode], T, C), {}, f"T={T}, C={C}")
            got = run.call(case)
            if not isinstance(got, bool):
                tip = " (convert with bool(...) or .item())" if TRUSTED.is_tensor(got) else ""
                run.fail(f"return True or False, but received {kind_of(got)}{tip}.", case)
            answers[mode] = got
        if any(got != LEAK_MODES[m] for m, got in answers.items()):
            run.fail(_leak_diagnosis(answers, records, T, C, run, seed), Case(f"T={T}, C={C}"))
        if _not_reproducible(future_leaks, run, T, C, seed):
            run.fail(
                "your detector is not reproducible: two calls with the same seed fed attend "
                "different inputs; draw x and the changed tokens from "
                "g = torch.Generator().manual_seed(seed) (torch.randn(..., generator=g))",
                Case(f"T={T}, C={C}, seed={seed}"),
            )
    run.passed()


register(
    Exercise(
        "future_leaks",
        "04_masking_and_cross_attention",
        "future_leaks(attend, T, C, seed=0) -> bool",
        cells=(Cell("future_leaks_tests", "future_leaks", 2),),
        check=check_future_leaks,
        against="attention layers that do and do not leak (transformer_lab.utils)",
    )
)
