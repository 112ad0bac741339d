"""Checks for notebook 2, exercises 1 and 2: splitting and merging heads.

split_heads(x, n_heads)   (B, T, C) -> (B, H, T, D), D = C // H; ValueError naming C and
                          n_heads when C % n_heads != 0
merge_heads(x)            (B, H, T, D) -> (B, T, H * D)
"""

from __future__ import annotations

import re

import torch
from torch import Tensor

from transformer_lab import heads as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = [
    "check_split_heads",
    "check_merge_heads",
]

ATOL, RTOL = 1e-5, 1e-4


def _split_mistakes(x: Tensor, H: int) -> list[Mistake]:
    B, T, C = x.shape
    D = C // H
    return [
        Mistake(
            "heads split with a reshape but no transpose: x.reshape(B, H, T, D) mixes positions across heads; "
            "use x.view(B, T, H, D).transpose(1, 2)",
            lambda: x.reshape(B, H, T, D),
        ),
        Mistake(
            "each head must get a contiguous slice of the C features (head h gets features h*D .. h*D + D - 1); "
            "you interleave them: view as (B, T, H, D), not (B, T, D, H)",
            lambda: x.view(B, T, D, H).permute(0, 3, 1, 2),
        ),
    ]


def _split_cases(hidden: bool) -> list[Case]:
    g = generator(9505 if hidden else 505)
    f32, f64 = torch.float32, torch.float64
    specs = [((2, 3, 8), 2, f32), ((1, 4, 12), 3, f32), ((2, 5, 6), 1, f32), ((2, 4, 4), 4, f32)]
    specs += [((2, 3, 6), 3, f64)]  # a new buffer must take the input's dtype
    if hidden:
        specs += [((3, 2, 16), 4, f32), ((1, 7, 10), 5, f32), ((2, 2, 8), 2, f64)]
    cases = []
    for shape, H, dtype in specs:
        x = torch.randn(*shape, generator=g, dtype=dtype)
        name = f"H={H}" + (", float64" if dtype == f64 else "")
        case = Case(name, (x, H), {}, describe_args(x=x, n_heads=H))
        case.data.update(x=x, H=H, expected=_ref.split_heads(x, H))
        cases.append(case)
    return cases


def _split_error_hint(exc: BaseException, case: Case) -> str:
    x, H = (case.args + (None, None))[:2]
    if TRUSTED.is_tensor(x) and x.dim() == 3 and isinstance(H, int) and H > 0:
        B, T, C = x.shape
        hint = _foreign_size_hint(exc, {"B": B, "T": T, "C": C, "H": H, "D": C // H})
        if hint:
            return hint
    return _signature_hint(exc, "split_heads(x, n_heads)")


def check_split_heads(split_heads, hidden: bool = False) -> None:
    """Check ``split_heads(x, n_heads)``: (B, T, C) -> (B, H, T, D) with D = C / H."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference split_heads", function=_ref.split_heads)]
    run = Runner(
        "check_split_heads",
        split_heads,
        forbidden,
        hidden,
        lambda e, c: _split_error_hint(e, c),
    )
    for case in _split_cases(hidden):
        x, H, expected = case.data["x"], case.data["H"], case.data["expected"]
        B, T, C = x.shape

        def hint(got: tuple, B=B, T=T, H=H, C=C) -> str | None:
            if got == (B, T, H, C // H):
                return "that is (B, T, H, D): transpose(1, 2) to put the heads before the positions"
            if got == (B, C // H, T, H) and H != C // H:
                return (
                    f"your tensor has {C // H} heads of width {H}: n_heads={H} is the number of "
                    f"heads H, not the head width; each head has width D = C // H = {C // H} "
                    f"(x.split(n) cuts chunks of size n: x.chunk(H, dim=-1) makes H of them)"
                )
            if len(got) == 4 and got[1] != H and got[0] == B and got[2] == T:
                return f"your tensor has {got[1]} heads, but n_heads={H}: use the n_heads argument"
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, expected.dtype, shape_hint=hint, expected=expected
        )
        if not run.close(out, expected, 0.0, 0.0):
            case.data["axes"] = ("batch element", "head", "position", "feature")
            run.explain(out, expected, case, _split_mistakes(x, H), 0.0, 0.0)
    x = torch.randn(2, 5, 12, generator=generator(1))
    for C, H in ((12, 5),) + (((12, 8), (10, 4)) if hidden else ()):
        x = torch.randn(2, 3, C, generator=generator(C + H))
        case = Case(f"C={C}, n_heads={H}", (x, H), {}, describe_args(x=x, n_heads=H))
        run.expect_raises(
            case, ValueError, f"C={C} is not divisible by n_heads={H}: this", (str(C), str(H))
        )
    run.passed()


def _merge_hint(got: tuple, B: int, H: int, T: int, D: int) -> str:
    if got == (B, H * T, D):
        return "that is (B, H * T, D): concatenate the heads along the features (the last dim)"
    if got == (B, T, H, D):
        return "that is (B, T, H, D): reshape it to (B, T, H * D)"
    if got == (B, H, T * D) and H != T:
        return (
            "that is (B, H, T * D): x is (B, H, T, D), heads before positions; you unpacked its "
            "shape as (B, T, H, D), which swaps H and T: b, h, t, d = x.shape"
        )
    if len(got) == 3 and got[1:] == (T, H * D) and got[0] != B:
        return (
            f"yours has {got[0]} batch element(s) instead of B={B}: merge every batch element "
            f"(x[0] keeps only the first); keep the batch dimension"
        )
    if got == (B, T, D):
        return (
            "that is the width of one head (summed, averaged or a single head?): concatenate "
            "all the heads: (B, T, H * D)"
        )
    return "the result is (B, T, H * D)"


def _foreign_size_hint(exc: BaseException, sizes: dict[str, int]) -> str:
    """A reshape whose target holds a size that is none of this input's: hard-coded."""
    found = re.search(r"shape '\[([-\d, ]+)\]' is invalid for input of size", str(exc))
    if not found:
        return ""
    known = set(sizes.values()) | {-1, 1}
    foreign = [int(n) for n in found.group(1).split(",") if int(n) not in known]
    if not foreign:
        return ""
    have = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return (
        f"your reshape asks for a size {foreign[0]} that is none of this input's sizes ({have}): "
        f"a size hard-coded from the visible test? Read every size from x.shape (and n_heads)"
    )


def _merge_error_hint(exc: BaseException, case: Case) -> str:
    if "view size is not compatible" in str(exc):
        return (
            "after a transpose the tensor is not contiguous: use .reshape(...) (or "
            ".contiguous().view(...))"
        )
    x = case.args[0] if case.args else None
    if TRUSTED.is_tensor(x) and x.dim() == 4:
        B, H, T, D = x.shape
        hint = _foreign_size_hint(exc, {"B": B, "H": H, "T": T, "D": D, "H*D": H * D})
        if hint:
            return hint
    return _signature_hint(exc, "merge_heads(x)")


def check_merge_heads(merge_heads, hidden: bool = False) -> None:
    """Check ``merge_heads(x)``: (B, H, T, D) -> (B, T, C), the inverse of split_heads."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference merge_heads", function=_ref.merge_heads)]
    run = Runner(
        "check_merge_heads",
        merge_heads,
        forbidden,
        hidden,
        _merge_error_hint,
    )
    for case in _split_cases(hidden):
        x = case.data["expected"].contiguous()  # (B, H, T, D): merging must give back the original
        B, H, T, D = x.shape
        merge_case = Case(case.name, (x,), {}, describe_args(x=x))
        expected = _ref.merge_heads(x)
        out = run.expect_tensor(
            run.call(merge_case),
            merge_case,
            expected.shape,
            expected.dtype,
            shape_hint=lambda got, B=B, H=H, T=T, D=D: _merge_hint(got, B, H, T, D),
            expected=expected,
        )
        if not run.close(out, expected, 0.0, 0.0):
            mistakes = [
                Mistake(
                    "heads merged with a reshape but no transpose: x.reshape(B, T, C) mixes heads and positions; "
                    "use x.transpose(1, 2).reshape(B, T, H * D)",
                    lambda: x.reshape(B, T, H * D),
                ),
                Mistake(
                    "the features are interleaved across heads: transpose to (B, T, H, D) and "
                    "then reshape",
                    lambda: x.permute(0, 2, 3, 1).reshape(B, T, H * D),
                ),
                *[
                    Mistake(
                        f"every block of D features holds the {how} of the heads: merging "
                        f"concatenates them, head h in features h*D .. (h+1)*D - 1: "
                        f"x.transpose(1, 2).reshape(B, T, H * D)",
                        lambda f=f: f(x).repeat(1, 1, H),
                    )
                    for how, f in (
                        ("average", lambda t: t.mean(dim=1)),
                        ("sum", lambda t: t.sum(dim=1)),
                    )
                ],
                Mistake(
                    "the heads are concatenated in reverse order: head 0 comes first, in "
                    "features 0 .. D - 1",
                    lambda: torch.cat(list(reversed(x.unbind(1))), dim=-1),
                ),
            ]
            run.explain(out, expected, merge_case, mistakes, 0.0, 0.0)
    run.passed()


register(
    Exercise(
        "split_heads",
        "02_multi_head_attention",
        "split_heads(x, n_heads): (B, T, C) -> (B, H, T, D)",
        cells=(Cell("split_heads_tests", "split_heads", 2),),
        check=check_split_heads,
        reference=_ref.split_heads,
    )
)


register(
    Exercise(
        "merge_heads",
        "02_multi_head_attention",
        "merge_heads(x): (B, H, T, D) -> (B, T, C)",
        cells=(Cell("merge_heads_tests", "merge_heads", 1),),
        check=check_merge_heads,
        reference=_ref.merge_heads,
    )
)
