"""Checks for notebook 7 (GPT), part 1b: the causal language-model loss.

Student-facing signature:

    causal_lm_loss(logits, ids, attention_mask=None) -> scalar tensor, the mean next-token
        cross-entropy over the positions whose target is a real token

A wrong loss is matched against a catalogue of known mistakes, then probed: the loss is rerun
with the inputs changed where a correct loss must not look (the logits or ids whose target is
padding, the last position's logits, ids[:, 0]); a change names the class of the mistake.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_causal_lm_loss", "reference_lm_loss"]

ATOL, RTOL = 1e-5, 1e-4


def reference_lm_loss(logits: Tensor, ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Mean cross-entropy of logits[:, t] against ids[:, t + 1] over real targets (PyTorch's loss)."""
    V = logits.shape[-1]
    targets = ids[:, 1:]  # (B, T - 1): the token after each position
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def _nll(logp: Tensor, targets: Tensor) -> Tensor:
    return -logp.gather(-1, targets[..., None])[..., 0]  # (B, T')


def _lm_variant(
    logits, ids, mask, align="shift", mask_at="targets", reduce="mean", logp="log_softmax"
) -> Tensor:
    """The loss with one known mistake (alignment, where the mask is read, the reduction, ...)."""
    B, T, V = logits.shape
    if (
        align == "flat"
    ):  # shifted after flattening: the last position of a sequence predicts the next one's first token
        flat_ids = ids.reshape(-1)[1:]
        flat_keep = (
            torch.ones_like(flat_ids, dtype=torch.bool)
            if mask is None
            else mask.reshape(-1)[1:] == 1
        )
        nll = _nll(torch.log_softmax(logits.reshape(-1, V)[:-1], -1), flat_ids)
        return nll[flat_keep].mean()
    if align == "shift":
        z, tgt, keep_idx = logits[:, :-1], ids[:, 1:], slice(1, None)
    elif align == "none":
        z, tgt, keep_idx = logits, ids, slice(None)
    elif align == "reversed":
        z, tgt, keep_idx = logits[:, 1:], ids[:, :-1], slice(None, -1)
    else:  # "roll": the last position is scored against the first token
        z, tgt, keep_idx = logits, torch.roll(ids, -1, dims=1), slice(None)
        if mask is not None:
            mask = torch.roll(
                mask, -1, dims=1
            )  # the rolled mask, read where the rolled targets are
    if logp == "log_softmax":
        lp = torch.log_softmax(z, dim=-1)
    elif logp == "time":
        lp = torch.log_softmax(z, dim=1)
    elif logp == "raw":  # F.nll_loss on the logits: -z[target], no log-softmax
        lp = z
    elif logp == "double":
        lp = torch.log_softmax(torch.softmax(z, dim=-1), dim=-1)
    else:  # "prob": -p instead of -log p
        lp = torch.softmax(z, dim=-1)
    nll = _nll(lp, tgt)  # (B, T')
    if mask is None or mask_at == "ignored":
        keep = torch.ones_like(nll, dtype=torch.bool)
    elif mask_at == "targets":
        keep = mask[:, keep_idx] == 1
    elif mask_at == "inverted":  # 0 read as real, 1 as padding
        keep = mask[:, keep_idx] == 0
    else:  # the mask read at the inputs' positions
        keep = (mask[:, :-1] if align == "shift" else mask) == 1
    keep = keep[:, : nll.shape[1]]
    if reduce == "mean":
        return nll[keep].mean()
    if reduce == "sum":
        return nll[keep].sum()
    if reduce == "mean_all":  # padding zeroed, but still counted in the denominator
        return (nll * keep).mean()
    if reduce == "per_position":  # averaged over the batch at each position, then over positions
        count = keep.sum(0)  # (T',)
        per_pos = (nll * keep).sum(0) / count.clamp(min=1)  # (T',)
        return per_pos[count > 0].mean()
    per_seq = (nll * keep).sum(1) / keep.sum(1).clamp(min=1)  # (B,)
    return per_seq.mean()


_LM_MISTAKES = [
    (
        dict(align="none"),
        "the targets are not shifted: logits[:, t] must be scored against the NEXT token "
        "ids[:, t + 1], not ids[:, t] (use logits[:, :-1] with ids[:, 1:]).",
    ),
    (
        dict(align="reversed"),
        "shifted the wrong way: position t predicts token t + 1, so pair logits[:, :-1] with "
        "ids[:, 1:] (yours pairs logits[:, 1:] with ids[:, :-1]).",
    ),
    *(
        (
            dict(align="roll", mask_at=where),
            "the loss includes the last position, whose target wraps around to the first token "
            "(torch.roll): the last position has no next token, drop it (logits[:, :-1], ids[:, 1:]).",
        )
        for where in ("targets", "ignored")
    ),
    (
        dict(mask_at="ignored"),
        "the padding targets are counted: leave out every position whose TARGET is padding "
        "(attention_mask[:, 1:] == 0), e.g. set those targets to -100 (ignore_index).",
    ),
    (
        dict(mask_at="inputs"),
        "the mask is read at the inputs' positions: a target is padding when attention_mask[:, 1:] "
        "is 0 (shift the mask like the targets), not attention_mask[:, :-1].",
    ),
    (
        dict(reduce="per_sequence"),
        "averaged per sequence, then over the batch: average over all real target tokens at once, "
        "so every token weighs the same (short sequences must not count more).",
    ),
    (
        dict(reduce="per_position"),
        "averaged over the batch at each position, then over the positions: average over all "
        "real target tokens at once, so every token weighs the same (positions with padding in "
        "some rows must not count more per token).",
    ),
    (dict(reduce="sum"), "the loss is summed over the tokens: return the mean."),
    (
        dict(reduce="mean_all"),
        "the padding's losses are zeroed but still counted in the average: divide by the number "
        "of real targets, not by the number of positions.",
    ),
    (
        dict(align="flat"),
        "the shift crosses sequences: you flattened the batch and then shifted, so the last "
        "position of each sequence predicts the first token of the next. Shift within each "
        "sequence (logits[:, :-1], ids[:, 1:]) before flattening.",
    ),
    (
        dict(logp="time"),
        "the log-softmax runs over the positions (dim=1): it must run over the vocabulary, the "
        "last dimension.",
    ),
    (
        dict(logp="double"),
        "softmax applied twice: F.cross_entropy takes raw logits and applies log_softmax itself; "
        "do not pass probabilities.",
    ),
    (
        dict(mask_at="inverted"),
        "the mask's polarity is reversed: your loss keeps the padding targets and drops the real "
        "ones; attention_mask is 1 for a real token and 0 for padding (leave out targets where it "
        "is 0).",
    ),
    (
        dict(logp="raw"),
        "the loss scores the raw logits, -logits[target], as if they were log-probabilities "
        "(F.nll_loss on logits): take log_softmax over the vocabulary first, or use "
        "F.cross_entropy, which does.",
    ),
    (
        dict(logp="prob"),
        "the loss uses the probability of the target, -p, instead of its log-probability -log p.",
    ),
]


def _lm_error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "NoneType" in text and "subscriptable" in text:
        return "attention_mask=None means every token is real: handle the None case first"
    if "Expected target size" in text or "expected input batch_size" in text:
        return (
            "F.cross_entropy expects (N, V) logits and (N,) targets: flatten with "
            ".reshape(-1, V) and .reshape(-1)"
        )
    if "Target" in text and "out of bounds" in text and "-" in text.split("Target")[1][:3]:
        return (
            "F.cross_entropy skips only the targets equal to ignore_index (-100 by default): "
            "mark the padding targets with -100 (or pass the marker you used as ignore_index)"
        )
    return signature_hint(exc, "causal_lm_loss(logits, ids, attention_mask=None)")


def _lm_cases(hidden: bool) -> list[Case]:
    g = generator(9707 if hidden else 707)
    specs = [
        (2, 6, 11, "pad"),
        (3, 5, 7, None),
        (1, 2, 5, None),
        (4, 7, 13, "pad"),
        (2, 4, 9, "ones"),
    ]
    if hidden:
        specs += [(5, 9, 31, "pad"), (1, 12, 300, None), (3, 3, 4, "pad"), (6, 16, 65, "pad")]
    cases = []
    for B, T, V, kind in specs:
        logits = torch.randn(B, T, V, generator=g) * 2.0
        ids = torch.randint(0, V, (B, T), generator=g)
        mask = None
        if kind == "ones":
            mask = torch.ones(B, T, dtype=torch.long)
        elif kind == "pad":  # right padding: lengths from 2 to T, the first sequence full
            lengths = torch.randint(2, T + 1, (B,), generator=g)
            lengths[0] = T
            if B > 1:
                lengths[1] = 2
            mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T)
            ids = ids.masked_fill(mask == 0, 0)  # pad id 0
        kwargs = {} if mask is None else {"attention_mask": mask}
        case = Case(
            f"B={B}, T={T}, V={V}" + (", right-padded" if kind == "pad" else ""),
            (logits, ids),
            kwargs,
            describe_args(logits=logits, ids=ids, attention_mask=mask),
        )
        case.data.update(logits=logits, ids=ids, mask=mask)
        cases.append(case)
    return cases


def check_causal_lm_loss(causal_lm_loss, hidden: bool = False) -> None:
    """Check ``causal_lm_loss(logits, ids, attention_mask=None)`` against PyTorch's cross-entropy
    on the shifted targets (padding targets ignored), value and gradient."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner("check_causal_lm_loss", causal_lm_loss, (), hidden, _lm_error_hint)
    for case in _lm_cases(hidden):
        logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
        expected = reference_lm_loss(logits, ids, mask)
        value = run.call(case)
        if isinstance(value, (float, int)) and not isinstance(value, bool):
            run.fail(
                "return the loss as a tensor (e.g. without .item()): training calls loss.backward().",
                case,
            )
        if TRUSTED.is_tensor(value) and value.numel() == 1 and value.dim() > 0:
            run.fail(
                f"the loss should be a 0-dimensional tensor (a scalar), but yours has shape "
                f"{tuple(value.shape)}: average over every real target token.",
                case,
            )
        if TRUSTED.is_tensor(value) and value.dim() > 0:
            run.fail(
                f"the loss should be one number (a 0-dimensional tensor), but yours has shape "
                f"{tuple(value.shape)}: average over every real target token of every sequence.",
                case,
            )
        out = run.expect_tensor(value, case, (), torch.float32, "loss")
        if not run.close(out, expected, ATOL, RTOL):
            mistakes = [
                Mistake(message, lambda kw=kw: _lm_variant(logits, ids, mask, **kw))
                for kw, message in _LM_MISTAKES
            ]
            message = (
                run.diagnose(out, mistakes, ATOL, RTOL)
                or _lm_family(run, case, out, expected)
                or _lm_probe(run, case, out)
            )
            if message is not None:
                run.fail(message, case)
            run.fail(run.mismatch(out, expected, "loss"), case, named=False)
    _check_lm_gradient(run, causal_lm_loss, hidden)
    run.passed()


def _real_nll(logits: Tensor, ids: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """(B, T - 1) next-token losses and (B, T - 1) bool: which targets are real."""
    nll = _nll(torch.log_softmax(logits[:, :-1], -1), ids[:, 1:])
    keep = torch.ones_like(nll, dtype=torch.bool) if mask is None else mask[:, 1:] == 1
    return nll, keep


_SMOOTHING = (0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def _lm_family(run: Runner, case: Case, out: Tensor, expected: Tensor) -> str | None:
    """The student's value against a family of plausible formulas on the same inputs: another
    denominator, the exponential of the loss, label smoothing, a target id taken for padding,
    logits and targets flattened in different orders, a softmax over another axis."""
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    B, T, V = logits.shape
    value = float(out.detach().reshape(()))
    if not torch.isfinite(out.detach()).all():
        return None
    nll, keep = _real_nll(logits, ids, mask)
    total = float(nll[keep].sum())
    n_targets = int(keep.sum())
    n_tokens = B * T if mask is None else int(mask.sum())

    def near(a: float, b: float) -> bool:
        return abs(a - b) <= ATOL + RTOL * abs(b)

    ref = float(expected)
    if (
        abs(ref) > 1e-3
        and near(value, -ref)
        and _confirm(run, case, lambda z, i, m: -reference_lm_loss(z, i, m))
    ):
        return (
            "your loss has the wrong sign: it is the mean log-likelihood (log p of the targets), "
            "which training would push up without bound; the loss is its negative, the mean "
            "-log p (F.cross_entropy gives it)."
        )
    if value > 0 and near(math.log(value), ref):
        return (
            "your loss is the exponential of the cross-entropy (the perplexity, exp(loss)): "
            "return the mean cross-entropy itself; perplexity is for reporting, not for training."
        )
    denominators = [
        (
            n_tokens,
            "the sum is divided by the number of real TOKENS (attention_mask.sum()); "
            "divide by the number of real TARGETS (attention_mask[:, 1:].sum()): the first token "
            "of each sequence is never a target.",
        ),
        (
            B,
            "the losses are summed over the positions and averaged over the batch: average over "
            "every real target token instead (the sum divided by their number).",
        ),
        (
            B * T,
            "the sum is divided by B * T, the number of positions; divide by the number of "
            "real targets (there are T - 1 per full sequence, fewer with padding).",
        ),
    ]
    for count, message in denominators:
        if count != n_targets and near(value, total / count):
            return message
    numerators = [(total, "the real targets' losses")]
    if not bool(keep.all()):
        numerators.append((float(nll.sum()), "the losses of every target, padding included,"))
    for numerator, what in numerators:  # a sum over the right terms, by a whole number
        c = numerator / value if value > 0 else 0.0
        whole = round(c)
        if (
            1 <= whole <= 4 * B * T
            and abs(c - whole) < 2e-5 * c
            and (numerator != total or whole != n_targets)
        ):
            return (
                f"your loss is {what} summed and divided by {whole}: the loss is the mean over "
                f"the real targets, their sum divided by their number ({n_targets} here)."
            )
    uniform = float((-torch.log_softmax(logits[:, :-1], -1).mean(-1))[keep].mean())
    if abs(uniform - ref) > 1e-3:
        eps = (value - ref) / (uniform - ref)
        for e in _SMOOTHING:
            if abs(eps - e) < 1e-4:
                return (
                    f"your loss has label smoothing ({e:g}): the course's loss is the plain "
                    "cross-entropy, without label_smoothing."
                )
    zero = keep & (ids[:, 1:] != 0)
    if bool(zero.any()) and not TRUSTED.equal(zero, keep) and near(value, float(nll[zero].mean())):
        return (
            "the targets equal to token 0 are left out: token 0 is a real token; mark only the "
            "padding targets, with -100 (ignore_index), not with 0."
        )
    if mask is not None and B > 1:
        first = (mask[:1, 1:] == 1).expand(B, -1)
        if not TRUSTED.equal(first, keep) and near(value, float(nll[first].mean())):
            return (
                "every sequence uses the padding of sequence 0: read the mask of each row, "
                "attention_mask[:, 1:] (one row per sequence)."
            )
    return None


def _confirm(run: Runner, case: Case, formula) -> bool:
    """Does the student's loss equal ``formula(logits, ids, mask)`` on another case too?"""
    for other in _lm_cases(run.hidden):
        if other.name == case.name and TRUSTED.equal(other.data["logits"], case.data["logits"]):
            continue
        logits, ids, mask = other.data["logits"], other.data["ids"], other.data["mask"]
        kwargs = {} if mask is None else {"attention_mask": mask.clone()}
        value, error, calls = run.attempt((logits.clone(), ids.clone()), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return False
        want = float(formula(logits, ids, mask))
        return abs(float(value.detach().reshape(())) - want) <= ATOL + RTOL * abs(want)
    return False


def _gradient_pairs(run: Runner, case: Case) -> tuple[Tensor, Tensor] | None:
    """Which positions the student's loss scores, and against which token: the gradient of a
    cross-entropy is zero at unscored positions and negative only at the target."""
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    leaf = logits.clone().requires_grad_(True)
    kwargs = {} if mask is None else {"attention_mask": mask.clone()}
    with torch.enable_grad():
        value, error, calls = run.attempt((leaf, ids.clone()), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return None
        if not value.requires_grad:
            return None
        (grad,) = torch.autograd.grad(value.reshape(()), leaf)
    used = grad.abs().amax(-1) > 1e-9  # (B, T)
    return used, grad.argmin(-1)  # (B, T) each


def _lm_probe(run: Runner, case: Case, out: Tensor) -> str | None:
    """Rerun the student's loss with inputs changed where the loss must NOT look (logits or ids
    whose target is padding, the last position's logits, ids[:, 0]): a change names the class."""
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    B, T, V = logits.shape
    if not bool(TRUSTED.isfinite(out).all()):
        return None  # NaN or inf never equals itself: a rerun would prove nothing
    g = generator(77)

    def moves(new_logits: Tensor, new_ids: Tensor) -> bool:
        kwargs = {} if mask is None else {"attention_mask": mask.clone()}
        value, error, calls = run.attempt((new_logits, new_ids), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return False
        if not bool(TRUSTED.isfinite(value.detach()).all()):
            return False
        return not TRUSTED.allclose(value.detach().reshape(()), out.reshape(()), atol=1e-6)

    def shifts(new_logits: Tensor) -> bool:
        kwargs = {} if mask is None else {"attention_mask": mask.clone()}
        value, error, calls = run.attempt((new_logits, ids.clone()), kwargs)
        if error is not None or calls or not TRUSTED.is_tensor(value) or value.numel() != 1:
            return False
        v = value.detach().reshape(()).double()
        return bool(TRUSTED.isfinite(v)) and abs(float(v) - float(out)) > 1e-3 * max(
            1.0, abs(float(out))
        )

    offsets = torch.randn(B, T, 1, generator=g) * 3.0  # one constant per position
    if shifts(logits + offsets):
        return (
            "your loss changes when the same constant is added to all V logits of a position, "
            "which a softmax over the vocabulary cancels: normalise over the last dimension, "
            "log_softmax(logits, dim=-1), or use F.cross_entropy on (N, V) logits."
        )
    pairs = _gradient_pairs(run, case)
    if pairs is not None:
        used, paired = pairs
        targets = ids[:, 1:]
        real = torch.ones_like(targets, dtype=torch.bool) if mask is None else mask[:, 1:] == 1
        want = targets[real].sort().values
        got = paired[used].sort().values
        right = TRUSTED.equal(used[:, :-1], real) and not bool(used[:, -1].any())
        if right and not TRUSTED.equal(paired[:, :-1][real], targets[real]):
            right = False
        nxt = torch.cat([ids[:, 1:], ids[:, -1:] + 1], dim=1)  # (B, T): the next token (or none)
        if (
            not right
            and bool(used.any())
            and TRUSTED.equal(paired[used], ids[used])
            and not TRUSTED.equal(ids[used], nxt[used])
        ):
            return (
                "each position is scored against its own token ids[:, t], not shifted: "
                "logits[:, t] must be scored against the NEXT token ids[:, t + 1] (pair "
                "logits[:, :-1] with ids[:, 1:])."
            )
        if not right and got.shape == want.shape and TRUSTED.equal(got, want):
            return (
                "your loss scores the right number of predictions against the right target "
                "tokens, but pairs them up differently: logits[b, t] must be scored against "
                "ids[b, t + 1]. Flatten logits[:, :-1] and ids[:, 1:] in the same order "
                "(.reshape(-1, V) and .reshape(-1)), without transposing only one of them."
            )
    noise = torch.randn(B, T, V, generator=g) * 3.0
    if mask is not None and bool((mask[:, 1:] == 0).any()):
        pad_target = torch.zeros(B, T, dtype=torch.bool)
        pad_target[:, :-1] = mask[:, 1:] == 0  # positions whose target is padding
        other_ids = torch.where(mask == 0, (ids + 1) % V, ids)
        if moves(torch.where(pad_target[..., None], logits + noise, logits), ids) or moves(
            logits, other_ids
        ):
            return (
                "your loss changes when the logits or ids at positions whose TARGET is padding "
                "change: leave those positions out (attention_mask[:, 1:] == 0), e.g. set their "
                "targets to -100."
            )
    last = torch.zeros(B, T, 1, dtype=torch.bool)
    last[:, -1] = True
    if moves(torch.where(last, logits + noise, logits), ids):
        return (
            "your loss changes with the LAST position's logits, which have no next token to "
            "predict: score logits[:, :-1] against ids[:, 1:]."
        )
    first_ids = ids.clone()
    first_ids[:, 0] = (ids[:, 0] + 1) % V
    if moves(logits, first_ids):
        return (
            "your loss changes with ids[:, 0], which is never a target (nothing predicts the "
            "first token): the targets are ids[:, 1:], scored against logits[:, :-1]."
        )
    return None


def _check_lm_gradient(run: Runner, causal_lm_loss, hidden: bool) -> None:
    """The loss must stay connected to the logits: its gradient equals the reference's."""
    __tracebackhide__ = True
    case = _lm_cases(hidden)[0]
    logits, ids, mask = case.data["logits"], case.data["ids"], case.data["mask"]
    leaf = logits.clone().requires_grad_(True)
    reference_lm_loss(leaf, ids, mask).backward()
    expected = leaf.grad.clone()

    def with_gradient(z, i, attention_mask=None):
        z = z.clone().requires_grad_(True)
        loss = causal_lm_loss(z, i, attention_mask=attention_mask)
        if not (TRUSTED.is_tensor(loss) and loss.requires_grad):
            return None
        loss.backward()
        return z.grad

    grad_run = Runner(run.name, with_gradient, (), run.hidden, _lm_error_hint)
    grad = grad_run.call(Case(case.name + ", gradient", case.args, case.kwargs, case.describe))
    run.n_cases += 1
    if grad is None:
        run.fail(
            "the loss is not connected to the logits (no gradient): compute it with torch "
            "operations on the logits, without .item(), .detach() or torch.tensor(...).",
            case,
        )
    if not run.close(grad, expected, 1e-6, 1e-4):
        run.fail("the loss's gradient with respect to the logits differs from the reference.", case)


register(
    Exercise(
        "causal_lm_loss",
        "07_gpt",
        "causal_lm_loss(logits, ids, attention_mask=None) -> scalar tensor",
        cells=(Cell("causal_lm_loss_tests", "causal_lm_loss", 2),),
        check=check_causal_lm_loss,
        against="torch.nn.functional.cross_entropy on the shifted targets",
    )
)
