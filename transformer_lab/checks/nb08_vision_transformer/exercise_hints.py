"""Hints for exceptions raised by the students' code in notebooks 8 and 9 (each exercise has
its own shapes to check), and the ValueError those exercises ask for. Shared by notebooks 08 and
09, it lives with the earliest of them."""

from __future__ import annotations

import os

from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.messages import signature_hint


def _hint(expected: str, shape_tip=None):
    """Hints for an exception of the student's code. ``shape_tip(exc, case)``: what to check
    when a shape error is raised (each exercise has its own shapes; None: no hint)."""

    def hint(exc: BaseException, case: Case) -> str:
        text = str(exc)
        if signature_hint(exc, expected):
            return signature_hint(exc, expected)
        shape_error = isinstance(exc, (RuntimeError, IndexError)) and any(
            word in text
            for word in ("shape", "size", "must match", "multiplied", "dimension", "dims")
        )
        if shape_error and shape_tip is not None:
            return shape_tip(exc, case) or ""
        return ""

    return hint


def _patchify_tip(exc: BaseException, case: Case) -> str:
    return "check each reshape against the shape comments: (B, C, H/P, P, W/P, P) first"


def _embed_tip(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "Sizes of tensors must match" in text or "Tensors must have same number of dim" in text:
        return "the pieces you concatenate differ in shape: expand cls_token to (B, 1, C)"
    if "cannot be multiplied" in text:
        return (
            "w_e is (C_in, C) in the course's row convention: compute patches @ w_e (F.linear "
            "would transpose it)"
        )
    return "check each shape: patchify gives (B, N, C_in), @ w_e (B, N, C), [CLS] (B, 1, C), pos (N + 1, C)"


def _conv_tip(exc: BaseException, case: Case) -> str:
    P, ch, C = case.data["P"], case.data["ch"], case.data["C"]
    return (
        f"the convolution is nn.Conv2d(n_channels, C, kernel_size=patch_size, stride=patch_size) "
        f"= Conv2d({ch}, {C}, kernel_size={P}, stride={P}); its weight has shape ({C}, {ch}, {P}, "
        f"{P}) (out_channels, in_channels, P, P): view linear.weight as that"
    )


_PACKAGE = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # transformer_lab/
_CHECKS = os.path.join(_PACKAGE, "checks")


def _package_origin(exc: BaseException) -> str | None:
    """``sinusoidal_encoding()`` when the package's own code (not a check) raised ``exc``: the
    package function the student's code called."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        path = os.path.abspath(tb.tb_frame.f_code.co_filename)
        ours = path.startswith(_PACKAGE + os.sep) and not path.startswith(_CHECKS + os.sep)
        frames.append((ours, tb.tb_frame.f_code.co_name))
        tb = tb.tb_next
    if not frames or not frames[-1][0]:
        return None
    i = len(frames) - 1
    while i > 0 and frames[i - 1][0]:
        i -= 1  # back to the package function the student's code called
    return f"{frames[i][1]}()"


def _expect_value_error(run: Runner, call, case: Case, must_name: list[str], what: str) -> None:
    """The text asks for a ValueError whose message names ``must_name``; fail clearly otherwise."""
    __tracebackhide__ = True
    try:
        call()
    except ValueError as exc:
        missing = [word for word in must_name if word not in str(exc)]
        origin = _package_origin(exc)
        if missing and origin is not None:
            run.fail(
                f"{what}: the ValueError came from the package's {origin} (it says "
                f"{str(exc).strip()[:100]!r}), not from a test of your own: check the size "
                f"yourself at the start of your function and raise a ValueError naming "
                f"{must_name} (the values received).",
                case,
            )
        if missing:
            run.fail(
                f"{what}: your ValueError is right, but its message should name {must_name} "
                f"(the values received); yours says {str(exc)!r}.",
                case,
            )
        return
    except Exception as exc:  # the wrong kind of error, e.g. torch's RuntimeError from a reshape
        run.fail(
            f"{what}: expected a ValueError naming {must_name}, but your function raised "
            f"{type(exc).__name__}: {str(exc).strip()[:120]}. Check the sizes first and raise "
            f"ValueError yourself.",
            case,
        )
    run.fail(f"{what}: expected a ValueError naming {must_name}, but nothing was raised.", case)


def _merge_tip(exc: BaseException, case: Case) -> str:
    m = case.data["args"][0]
    o = case.data["args"][2]
    return (
        f"m and l are {tuple(m.shape)} (..., T, 1) and o is {tuple(o.shape)} (..., T, Dv): keep the "
        f"trailing 1 (keepdim) so that exp(m1 - m) broadcasts over o's Dv columns"
    )


def _tiled_tip(exc: BaseException, case: Case) -> str:
    q, k, v = (case.data[x] for x in "qkv")
    T, D, S, Dv = q.shape[-2], q.shape[-1], k.shape[-2], v.shape[-1]
    tip = (
        f"the scores come from the queries and a block of keys, q @ k[..., start:stop, :]^T -> "
        f"(..., T, b), the output from the weights and the same block of values, "
        f"p @ v[..., start:stop, :] -> (..., T, Dv); here T={T}, S={S}, D={D}, Dv={Dv}"
    )
    if case.data.get("mask") is not None:
        tip = (
            f"it fails with a mask ({tuple(case.data['mask'].shape)}, broadcastable to (..., T, S)): "
            f"its columns are the keys, so slice it like them, mask[..., start:stop]; " + tip
        )
    return tip
