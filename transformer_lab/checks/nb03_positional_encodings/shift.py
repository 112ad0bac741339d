"""Check for notebook 03, exercise 2: moving by k positions is a fixed linear map.

shift_matrix(k, d_model, base=10000.0) -> (C, C) float32, p_(t+k) = p_t @ M_k for every t

Exercise 3 (the offset dot product) is checked in offset.py.
"""

from __future__ import annotations

import torch

from transformer_lab import positional as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_shift_matrix"]


# ---------------------------------------------------------------------------------------------
# the shift matrix M_k: p_t M_k = p_(t+k), checked on the reference encodings
def _shift(k, C, base, *, expo=2.0, layout="pairs", tr=-1.0, bl=1.0, divide=False):
    """M_k with one deliberate mistake (for diagnosis)."""
    theta = base ** (-expo * torch.arange(C // 2, dtype=torch.float64) / C)  # (C/2,)
    angle = k / theta if divide else k * theta
    c, s = torch.cos(angle), torch.sin(angle)
    top_right, bottom_left = tr * s, bl * s  # row form: [[cos, -sin], [sin, cos]]
    m = torch.zeros(C, C, dtype=torch.float64)
    if layout == "pairs":
        m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(top_right)
        m[1::2, 0::2], m[1::2, 1::2] = torch.diag(bottom_left), torch.diag(c)
    else:
        h = C // 2
        m[:h, :h], m[:h, h:], m[h:, :h], m[h:, h:] = (
            torch.diag(c),
            torch.diag(top_right),
            torch.diag(bottom_left),
            torch.diag(c),
        )
    return m.float()


def _shift_mistakes(k, C, base) -> list[Mistake]:
    # the positive k come first: on a negative k, M_|k| (also the transpose of M_k) means the
    # shifts forward were right and only the sign of k was lost
    lost_sign = [
        Mistake(
            f"the sign of k is lost: for k={k} your matrix is M_{abs(k)}, the shift forward by "
            f"{abs(k)}; a negative k shifts backward, so the angles k * theta_i are negative "
            f"(abs(k), or a loop over range(abs(k)), drops the sign)",
            lambda: _shift(abs(k), C, base),
        )
    ]
    no_shift = Mistake(
        (
            f"for k={k} your matrix is the identity (no shift at all): a negative k shifts "
            f"backward, to earlier positions, by the angles k * theta_i < 0 (a loop over "
            f"range(k) runs zero times when k < 0; build the angles k * theta_i directly)"
        )
        if k < 0
        else f"your matrix is the identity (M_0, no shift) for k={k}: the angles are k * theta_i",
        lambda: torch.eye(C),
    )
    others = [
        Mistake(
            "your matrix is the transpose of M_k (it shifts by -k): with row vectors p_t M_k, "
            "the -sin goes top-right in each 2x2 block, [[cos, -sin], [sin, cos]]",
            lambda: _shift(k, C, base, tr=1.0, bl=-1.0),
        ),
        Mistake(
            "the exponent of theta_i = base^(-2i/C) uses i/C (i the pair index) instead of 2i/C",
            lambda: _shift(k, C, base, expo=1.0),
        ),
        Mistake(
            "the 2x2 blocks must act on the pairs (2i, 2i+1), the channels the encoding "
            "interleaves, not on channels (i, i + C/2)",
            lambda: _shift(k, C, base, layout="halves"),
        ),
        Mistake("the `base` argument is ignored (you always use 10000)", lambda: _shift(k, C, 1e4)),
        Mistake(
            "the angle is k * theta_i (theta_i = base^(-2i/C)); you divide k by theta_i",
            lambda: _shift(k, C, base, divide=True),
        ),
        Mistake(
            "the block is not a rotation: one sin needs a minus sign, [[cos, -sin], [sin, cos]]",
            lambda: _shift(k, C, base, tr=1.0, bl=1.0),
        ),
        Mistake(
            "you raised M_1 to the power k element by element (m ** k): the shift by k is the "
            "matrix power M_1 @ ... @ M_1 (torch.linalg.matrix_power), i.e. the rotation by "
            "the angles k * theta_i",
            lambda: _shift(1, C, base).double().pow(k).float(),
        ),
        Mistake(
            "your matrix is M_1 whatever `k` is: the function ignores `k` (the angles are "
            "k * theta_i)",
            lambda: _shift(1, C, base),
        ),
    ]
    return lost_sign * (k < 0) + [no_shift] + others + _off_by_one(k, C, base)


def _off_by_one(k, C, base) -> list[Mistake]:
    """M_(k-1) and M_(k+1): a loop of matrix products one step too short or too long."""
    return [
        Mistake(
            f"your matrix shifts by {j} positions instead of k={k}, off by one (k "
            f"{'+' if j > k else '-'} 1: one step too {'few' if abs(j) < abs(k) else 'many'}): "
            f"the angles are exactly k * theta_i; a loop multiplying M_1 runs k times, from the "
            f"identity",
            lambda j=j: _shift(j, C, base),
        )
        for j in (k - 1, k + 1)
        if j != 0
    ]


def _block_evidence(m, expected, k: int, base: float) -> str | None:
    """Name what is wrong with the 2x2 blocks of M_k from the matrix alone."""
    a, e = m.detach().double(), expected.double()
    C = a.shape[-1]
    pair = torch.arange(C) // 2
    inside = pair[:, None] == pair[None, :]  # the 2x2 blocks on the diagonal
    if (a[~inside].abs() > 1e-5).any():
        r, c = (a.abs() * ~inside).flatten().argmax().item() // C, None
        c = (a.abs() * ~inside)[r].argmax().item()
        return (
            f"M_k is block diagonal: one 2x2 block per pair (2i, 2i+1), zeros elsewhere; your "
            f"entry ({r}, {c}) links two different pairs"
        )
    tl, tr, bl, br = (
        a[0::2, 0::2].diag(),
        a[0::2, 1::2].diag(),
        a[1::2, 0::2].diag(),
        a[1::2, 1::2].diag(),
    )
    cos, sin = e[0::2, 0::2].diag(), e[1::2, 0::2].diag()
    close = lambda u, v: torch.allclose(u, v, atol=1e-5)  # noqa: E731
    if (
        close(tl, cos)
        and close(br, cos)
        and close(tr, 0 * cos)
        and close(bl, 0 * cos)
        and not close(sin, 0 * sin)
    ):
        return "the sin entries are missing: each 2x2 block is [[cos, -sin], [sin, cos]], not diag(cos)"
    if close(tl, sin) and close(br, sin) and not close(sin, cos):
        return "sin and cos are swapped: the diagonal of each block holds cos(k theta_i), the off-diagonal -sin and sin"
    if close(tl, cos) and close(br, cos) and close(tr, bl) and not close(sin, 0 * sin):
        return (
            "the two sin entries of each block have the same sign: the block is a rotation, "
            "[[cos, -sin], [sin, cos]] (one sign minus, one plus)"
        )
    return _angle_evidence(tl, tr, bl, br, cos, sin, k, base)


def _angle_evidence(tl, tr, bl, br, cos, sin, k, base) -> str | None:
    """Blocks that are rotations by the wrong angles: pairs left unrotated, or other angles."""
    close = lambda u, v: torch.allclose(u, v, atol=1e-5)  # noqa: E731
    if not (close(tl, br) and close(tr, -bl) and close(tl**2 + bl**2, torch.ones_like(tl))):
        return None  # not every block is a rotation: no angle to read
    right = ((tl - cos).abs() < 1e-5) & ((bl - sin).abs() < 1e-5)
    if right.all():
        return None
    identity = ((tl - 1).abs() < 1e-5) & (bl.abs() < 1e-5)
    wrong = (~right).nonzero().flatten().tolist()
    shown = ", ".join(str(i) for i in wrong[:6]) + (", ..." if len(wrong) > 6 else "")
    if right.any() and identity[~right].all():
        return (
            f"the pairs {shown} are not rotated (identity blocks) while the others are right: "
            f"every one of the C/2 pairs gets its own rotation by k theta_i (loop over all pairs)"
        )
    j = _shift_read(tl, bl, k, base)
    if j is not None:
        return (
            f"your matrix is M_{j}, the shift by {j} positions, not by k={k}: each pair turns by "
            f"{j} theta_i instead of k theta_i (check how k enters the angles)"
        )
    mine = torch.atan2(bl, tl)
    want = torch.atan2(sin, cos)
    return (
        f"each block is a rotation, but pairs {shown} turn by the wrong angle (pair {wrong[0]}: "
        f"{mine[wrong[0]].item():.4g} rad instead of k theta_{wrong[0]} = "
        f"{want[wrong[0]].item():.4g}, modulo 2 pi): check the frequencies theta_i = "
        f"base^(-2i/C), with i the pair index counted from 0"
    )


def _shift_read(cos_got, sin_got, k: int, base: float) -> int | None:
    """The whole number of positions j != k the blocks rotate by (angles j theta_i), if any."""
    theta = _theta(2 * cos_got.shape[0], base)
    for j in range(-3 * abs(k) - 3, 3 * abs(k) + 4):
        angle = j * theta
        if (
            j != k
            and torch.allclose(cos_got, angle.cos(), atol=1e-5)
            and torch.allclose(sin_got, angle.sin(), atol=1e-5)
        ):
            return j
    return None


def check_shift_matrix(shift_matrix, hidden: bool = False) -> None:
    """Check ``shift_matrix(k, d_model, base=10000.0)``: a float32 (C, C) matrix with
    p_t @ M_k = p_(t+k) for every t."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden(
            "transformer_lab's sinusoidal_shift_matrix", function=_ref.sinusoidal_shift_matrix
        )
    ]
    run = Runner(
        "check_shift_matrix",
        shift_matrix,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "shift_matrix(k, d_model, base=10000.0)"),
        reference=_ref.sinusoidal_shift_matrix,
    )
    specs = [(3, 16, 10000.0), (1, 8, 10000.0), (-2, 6, 100.0), (7, 32, 10000.0)]
    if hidden:
        specs = [(11, 12, 10000.0), (-5, 64, 10000.0), (2, 10, 500.0)]
    n = 40  # positions of the reference encoding
    for k, C, base in specs:
        pe = _ref.sinusoidal_encoding(n, C, base)  # (n, C), computed before the student's code runs
        expected = _ref.sinusoidal_shift_matrix(k, C, base).float()
        case = Case(
            f"k={k}, C={C}, base={base}", (k, C, base), {}, f"k={k}, d_model={C}, base={base}"
        )
        case.data["expected"] = expected
        m = run.expect_tensor(run.call(case), case, (C, C), torch.float32, expected=expected)
        lo, hi = max(0, -k), n - max(0, k)  # the t with both t and t + k inside the table
        if TRUSTED.allclose(pe[lo:hi] @ m, pe[lo + k : hi + k], atol=1e-4):
            continue
        mistakes = _shift_mistakes(k, C, base)
        known = run.diagnose(m, mistakes, 1e-5, 1e-4, expected=expected)
        if known is not None:
            run.fail(known, case)
        try:
            found = _block_evidence(m, expected, k, base)
        except Exception:  # evidence that cannot be computed here is no evidence
            found = None
        if found is not None:
            run.fail(found, case)
        run.explain(m, expected, case, (), 1e-5, 1e-4)
    run.passed()


def _theta(d: int, base: float) -> torch.Tensor:
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


register(
    Exercise(
        "shift_matrix",
        "03_positional_encodings",
        "shift_matrix(k, d_model, base=10000.0) -> (C, C), p_t M_k = p_(t+k)",
        cells=(Cell("shift_matrix_tests", "shift_matrix", 2),),
        check=check_shift_matrix,
        reference=_ref.sinusoidal_shift_matrix,
    )
)
