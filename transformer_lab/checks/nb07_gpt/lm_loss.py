"""Checks for notebook 7 (GPT), part 1b: the causal language-model loss.

Student-facing signature:

    causal_lm_loss(logits, ids, attention_mask=None) -> scalar tensor, the mean next-token
        cross-entropy over the positions whose target is a real token

A wrong loss is matched against a catalogue of known mistakes (lm_loss_catalogue.py, with the
reference and the cases), then probed (lm_loss_probes.py): the loss is rerun with the inputs
changed where a correct loss must not look (the logits or ids whose target is padding, the last
position's logits, ids[:, 0]); a change names the class of the mistake.
"""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Case, Mistake, Runner
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.nb07_gpt.lm_loss_catalogue import (
    _LM_MISTAKES,
    ATOL,
    RTOL,
    _lm_cases,
    _lm_variant,
    reference_lm_loss,
)
from transformer_lab.checks.nb07_gpt.lm_loss_probes import _lm_family, _lm_probe
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_causal_lm_loss"]


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
