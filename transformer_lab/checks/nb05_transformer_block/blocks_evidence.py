"""Evidence for notebook 5's layer norm and MLP checks, from the structure of the output.

Layer norm: is the output a per-feature scale and shift of the right x_hat (the affine step is
wrong), each token's x_hat scaled (the denominator is wrong) or shifted (the centring is wrong)?
MLP: does the same input give another output (something random inside), does changing one token
change the others (tokens are mixed)?
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner, _clone
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint

__all__ = [
    "ln_evidence",
    "ln_error_hint",
    "affine_probe",
    "repeatable",
    "mixing",
    "unused_weight",
    "activation_probe",
    "bias_probe",
]

ATOL, RTOL = 1e-5, 1e-4


def _close(a: Tensor, b: Tensor, atol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, atol=atol, rtol=1e-3))


def ln_evidence(out: Tensor, x: Tensor, g: Tensor, b: Tensor, eps: float) -> str | None:
    """Where the student's layer norm goes wrong, from the structure of its output: the affine
    step (a per-feature scale and shift of the right x_hat), the denominator (each token's
    x_hat the right direction, the wrong length) or the centring (each token shifted)."""
    if x.shape[-1] < 2 or not torch.isfinite(out).all():
        return None
    x, out, g, b = (t.double() for t in (x, out, g, b))
    C = x.shape[-1]
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    xhat = (x - mean) / torch.sqrt(var + eps)
    rows_x, rows_y = xhat.reshape(-1, C), out.reshape(-1, C)
    if rows_x.shape[0] >= 3:  # y = x_hat * a + c with a, c per feature?
        design = torch.stack([rows_x, torch.ones_like(rows_x)], dim=-1)  # (N, C, 2)
        coef = torch.linalg.lstsq(design.transpose(0, 1), rows_y.T[..., None]).solution[..., 0]
        a, c = coef[:, 0], coef[:, 1]
        if _close(rows_x * a + c, rows_y, 1e-5):
            if _close(a, g) and _close(c, b * g):
                return (
                    "the bias is added before the gain scales: (x_hat + bias) * gain; scale first, "
                    "then shift: y = x_hat * gain + bias"
                )
            if _close(a, g):
                return "the normalisation and the gain are right, but the shift is not bias: y = x_hat * gain + bias"
            if _close(c, b):
                return "the normalisation and the bias are right, but the scale is not gain: y = x_hat * gain + bias"
            return (
                "x_hat is right, but the gain and bias are applied wrongly: y = x_hat * gain + bias "
                "(gain scales each feature, bias shifts it)"
            )
    if (g.abs() < 1e-3).any():
        return None
    z = (out - b) / g  # the student's x_hat, if the affine step is right
    scale = (z * xhat).sum(-1, keepdim=True) / (xhat * xhat).sum(-1, keepdim=True).clamp(min=1e-12)
    if _close(z, scale * xhat, 1e-5) and not _close(scale, torch.ones_like(scale)):
        denominator = torch.sqrt(var + eps) / scale  # what the student divided by
        named = {
            "the variance (var + eps) instead of its square root, the standard deviation": var
            + eps,
            "the variance instead of its square root, the standard deviation": var,
            "the standard deviation without eps": var.sqrt(),
            "the standard deviation from the unbiased variance (divides by C - 1)": torch.sqrt(
                var * C / (C - 1) + eps
            ),
        }
        for what, value in named.items():
            if _close(denominator, value, 1e-6):
                return f"each token is divided by {what}: x_hat = (x - mean) / sqrt(var + eps)"
        return (
            "each token's normalised vector points the right way but has the wrong length: the "
            "denominator is wrong; divide by sqrt(var + eps), var the mean of (x - mean)**2"
        )
    shift = (z - xhat).mean(-1, keepdim=True)
    if _close(z, xhat + shift, 1e-5) and not _close(shift, torch.zeros_like(shift)):
        return (
            "each token is shifted by a constant: the mean is not subtracted properly (your "
            "normalised tokens do not have mean 0); x_hat = (x - mean) / sqrt(var + eps)"
        )
    return None


def ln_error_hint(exc: BaseException, case: Case) -> str:
    if "must match the size" in str(exc):
        return (
            "a broadcasting error: keep the reduced dimension (keepdim=True) on the mean and the "
            "variance, so both are (..., 1) and broadcast over the C features"
        )
    return _signature_hint(exc, "layer_norm(x, gain, bias, eps=1e-5)")


def repeatable(run: Runner, case: Case, out: Tensor) -> str | None:
    """A function that gives another output for the same input is random (dropout is on by
    default in F.dropout): no other diagnosis is meaningful then."""
    again, error, _ = run.attempt(_clone(case.args), _clone(case.kwargs))
    if error is None and torch.is_tensor(again) and again.shape == out.shape:
        if not torch.allclose(again.detach(), out, atol=ATOL, rtol=RTOL, equal_nan=True):
            return (
                "your function gives a different output each time for the same input: something "
                "random runs inside (F.dropout is active unless training=False); remove it, the "
                "MLP is deterministic"
            )
    return None


def mixing(run: Runner, case: Case, out: Tensor) -> str | None:
    """Does changing token 0 change other tokens' outputs? (The MLP acts on each token alone.)"""
    x = case.args[0]
    if x.dim() < 2 or x.shape[-2] < 2:
        return None
    changed = x.clone()
    changed[..., 0, :] = changed[..., 0, :] + 1.0
    got, error, _ = run.attempt((changed, *_clone(case.args[1:])), {})
    if error is None and torch.is_tensor(got) and got.shape == out.shape:
        if not torch.allclose(got[..., 1:, :].detach(), out[..., 1:, :], atol=ATOL, rtol=RTOL):
            return (
                "changing token 0 changes other tokens' outputs: your MLP mixes tokens (a sum, "
                "mean or norm over the token axis?); it must act on each token (row) separately"
            )
    return None


def affine_probe(run: Runner, case: Case, x: Tensor, eps: float) -> str | None:
    """Rerun with gain = 1 and bias = 0: right then means x_hat is right and the gain and bias
    are applied wrongly."""
    C = x.shape[-1]
    plain = torch.nn.functional.layer_norm(x, (C,), None, None, eps)
    got, error, _ = run.attempt((x.clone(), torch.ones(C), torch.zeros(C)), _clone(case.kwargs))
    if error is None and torch.is_tensor(got) and _close(got.detach(), plain, 1e-5):
        return (
            "with gain = 1 and bias = 0 your result is right, so x_hat is right; the gain and bias "
            "are applied wrongly: y = x_hat * gain + bias, after normalising"
        )
    return None


_ACTIVATIONS = {
    "ReLU": torch.relu,
    "the tanh approximation of GELU": lambda h: torch.nn.functional.gelu(h, approximate="tanh"),
    "SiLU": torch.nn.functional.silu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "no activation (the identity)": lambda h: h,
}


def _scaled_input(run: Runner, values: Tensor) -> str | None:
    """GELU(a * h) for a constant a? Probed with C = 7, d_ff = 14 (w_1 = [I 0], w_2 = [I; 0])."""
    n = values.numel()
    x = values[None, None, :]  # (1, 1, C)
    w1 = torch.cat([torch.eye(n), torch.zeros(n, n)], dim=1)  # (C, 2C)
    got, error, _ = run.attempt(
        (x.clone(), w1, torch.zeros(2 * n), w1.T.clone(), torch.zeros(n)), {}
    )
    if error is not None or not torch.is_tensor(got) or got.shape != x.shape:
        return None
    y = got.detach().double()[0, 0]
    h = values.double()
    for name, a in (("1/sqrt(C)", n**-0.5), ("1/sqrt(d_ff)", (2 * n) ** -0.5), ("1/C", 1 / n),
                    ("1/d_ff", 1 / (2 * n)), ("sqrt(C)", n**0.5), ("sqrt(d_ff)", (2 * n) ** 0.5)):  # fmt: skip
        if torch.allclose(y, torch.nn.functional.gelu(a * h), atol=1e-5):
            return (
                f"the hidden layer is scaled by {name} before GELU: F.gelu(x @ w_1 + b_1), "
                f"with no scale factor"
            )
    return None


def activation_probe(run: Runner) -> str | None:
    """Call the MLP with identity weights and zero biases: the output is then the activation
    itself, evaluated at known points (checked to act element by element and to scale with w_2)."""
    n = 7
    values = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    x = values[(torch.arange(n)[:, None] + torch.arange(n)[None, :]) % n][None]  # (1, n, n)
    eye, zero = torch.eye(n), torch.zeros(n)
    outs = []
    for w1_scale, w2_scale in ((1.0, 1.0), (1.0, 2.0), (2.0, 1.0)):
        got, error, _ = run.attempt((x.clone(), w1_scale * eye, zero, w2_scale * eye, zero), {})
        if error is not None or not torch.is_tensor(got) or got.shape != x.shape:
            return None
        outs.append(got.detach().double())
    f = {v: outs[0][x == v] for v in values.tolist()}
    if not _close(outs[1], 2 * outs[0], 1e-5):
        return None  # not an activation followed by w_2
    nudged = x.clone()
    nudged[0, 0, 0] += 1.0  # an element-wise activation changes that one output only
    got, error, _ = run.attempt((nudged, eye, zero, eye, zero), {})
    if error is not None or not torch.is_tensor(got) or got.shape != x.shape:
        return None
    others = (got.detach().double() - outs[0]).abs()
    others[0, 0, 0] = 0.0
    if others.max() > 1e-6 or not all(
        torch.allclose(t, t[0].expand_as(t), atol=1e-6) for t in f.values()
    ):
        return (
            "your activation does not act on each hidden unit separately (a softmax or a norm "
            "over the hidden features?): GELU is applied element by element, F.gelu(h)"
        )
    for v in (-1.0, -0.5, 0.5, 1.0):  # w_1 = 2I evaluates the same function at 2h
        if not torch.allclose(outs[2][x == v], f[2 * v][0].expand_as(outs[2][x == v]), atol=1e-5):
            return None
    act = torch.tensor([float(f[v][0]) for v in values.tolist()], dtype=torch.float64)
    gelu = torch.nn.functional.gelu(values.double())
    if torch.allclose(act, gelu, atol=1e-5):
        return None
    for name, fn in _ACTIVATIONS.items():
        if torch.allclose(act, fn(values.double()), atol=1e-5):
            return f"your activation is {name}, not the exact GELU: F.gelu(x @ w_1 + b_1)"
    scaled = _scaled_input(run, values)
    if scaled:
        return scaled
    nonzero = gelu.abs() > 1e-3
    ratio = act[nonzero] / gelu[nonzero]
    if torch.allclose(ratio, ratio[0].expand_as(ratio), atol=1e-5) and abs(ratio[0] - 1) > 1e-3:
        return (
            f"with identity weights your MLP returns {float(ratio[0]):.3g} x GELU(h): the activation "
            "is right, but something scales the result; GELU(x W_1 + b_1) W_2 + b_2 has no scale "
            "factor"
        )
    shown = ", ".join(f"{a:.3g}" for a in act.tolist())
    want = ", ".join(f"{a:.3g}" for a in gelu.tolist())
    return (
        f"your activation is not the exact GELU: with identity weights your MLP maps h = -2, -1, "
        f"-0.5, 0, 0.5, 1, 2 to {shown}; F.gelu gives {want}"
    )


def bias_probe(run: Runner, case: Case) -> str | None:
    """Rerun with one bias set to zero (two different inputs): right both times while the real
    bias gives a wrong output means only that bias is used wrongly (added twice, in the wrong
    place, multiplied in ...)."""
    x, w1, b1, w2, b2 = case.args
    gelu = torch.nn.functional.gelu
    for index, name, where in ((4, "b_2", "once, after the second layer: ... @ w_2 + b_2"),
                               (2, "b_1", "once, inside the activation: GELU(x @ w_1 + b_1)")):  # fmt: skip
        confirmed = 0
        for scale in (1.0, -0.5):  # the same verdict on a second input
            args = [x * scale, w1, b1, w2, b2]
            args[index] = torch.zeros_like(args[index])
            want = gelu(args[0] @ w1 + args[2]) @ w2 + args[4]
            got, error, _ = run.attempt(tuple(a.clone() for a in args), {})
            if error is None and torch.is_tensor(got) and _close(got.detach(), want, 1e-5):
                confirmed += 1
        if confirmed == 2:
            return (
                f"with {name} = 0 your output is right, so only {name} is used wrongly (added "
                f"twice, in the wrong place or to a weight?): add it {where}"
            )
    return None


def unused_weight(run: Runner, case: Case) -> str | None:
    """Rerun with one weight changed (two different changes): an output that stays the same both
    times does not depend on that weight, so another tensor stands in its place."""
    x, w1, b1, w2, b2 = case.args
    g = torch.Generator().manual_seed(505)
    for index, name, where in ((3, "w_2", "the second layer is ... @ w_2 + b_2"),
                               (1, "w_1", "the first layer is x @ w_1 + b_1")):  # fmt: skip
        base, error, _ = run.attempt(tuple(a.clone() for a in case.args), {})
        if error is not None or not torch.is_tensor(base):
            return None
        unchanged = 0
        for _ in range(2):  # two different replacements: the same verdict twice
            args = [a.clone() for a in case.args]
            args[index] = args[index] + torch.randn(args[index].shape, generator=g)
            got, error, _ = run.attempt(tuple(args), {})
            if error is None and torch.is_tensor(got) and torch.equal(got.detach(), base.detach()):
                unchanged += 1
        if unchanged == 2:
            return (
                f"your output does not change when {name} changes, so {name} is never used (another "
                f"weight, transposed, stands in its place?): {where}"
            )
    return None
