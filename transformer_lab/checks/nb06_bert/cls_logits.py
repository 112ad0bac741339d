"""Check for notebook 06 (BERT), what comes out: the [CLS] classifier.

cls_logits(hidden, pooler, classifier) -> (B, n_classes)
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab import bert_inputs as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb06_bert.bert import _signature_hint
from transformer_lab.checks.nb06_bert.bert_heads_evidence import (
    cls_trace,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_cls_logits"]

_REF_CLS = _ref.cls_logits


# ---------------------------------------------------------------------------------------------
# Exercise 5: the classifier on [CLS]
def _cls_cases(hidden: bool) -> list[Case]:
    g = generator(6505 if hidden else 605)
    shapes = [(3, 5, 8, 2), (2, 7, 6, 3), (1, 3, 4, 2)] + (
        [(1, 4, 12, 5), (4, 9, 8, 2)] if hidden else []
    )
    cases = []
    for B, T, C, n in shapes:
        h = torch.randn(B, T, C, generator=g)
        pooler, classifier = nn.Linear(C, C), nn.Linear(C, n)
        with torch.no_grad():
            for layer in (pooler, classifier):
                layer.weight.copy_(torch.randn(layer.weight.shape, generator=g))
                layer.bias.copy_(torch.randn(layer.bias.shape, generator=g))
        pooler.requires_grad_(False)
        classifier.requires_grad_(False)
        case = Case(
            f"B={B}, T={T}, C={C}, {n} classes",
            (h, pooler, classifier),
            {},
            f"hidden ({B}, {T}, {C})",
        )
        case.data.update(expected=_REF_CLS(h, pooler, classifier), parts=(h, pooler, classifier))
        cases.append(case)
    return cases


def _cls_mistakes(h, pooler, classifier) -> list[Mistake]:
    return [
        Mistake(
            "the mean over the tokens is pooled; BERT's classifier reads the [CLS] vector, hidden[:, 0]",
            lambda: classifier(torch.tanh(pooler(h.mean(1)))),
        ),
        Mistake(
            "the last token is used; [CLS] is the first token, hidden[:, 0]",
            lambda: classifier(torch.tanh(pooler(h[:, -1]))),
        ),
        Mistake(
            "the second token is used; [CLS] is at position 0, hidden[:, 0]",
            lambda: classifier(torch.tanh(pooler(h[:, 1]))),
        ),
        Mistake(
            "hidden[0] is the first sequence of the batch, not the [CLS] token: use hidden[:, 0]",
            lambda: classifier(torch.tanh(pooler(h[0]))),
        ),
        Mistake("the tanh after the pooler is missing", lambda: classifier(pooler(h[:, 0]))),
        Mistake(
            "the pooler's activation is tanh, not ReLU",
            lambda: classifier(torch.relu(pooler(h[:, 0]))),
        ),
        Mistake(
            "the pooler is skipped: classifier(tanh(pooler(h_CLS)))",
            lambda: classifier(torch.tanh(h[:, 0])),
        ),
        Mistake(
            "return the logits; the softmax belongs to the loss (cross_entropy takes logits)",
            lambda: classifier(torch.tanh(pooler(h[:, 0]))).softmax(-1),
        ),
        Mistake(
            "the max over the tokens is pooled; BERT's classifier reads the [CLS] vector, hidden[:, 0]",
            lambda: classifier(torch.tanh(pooler(h.amax(1)))),
        ),
    ]


def check_cls_logits(cls_logits, hidden: bool = False) -> None:
    """Check ``cls_logits(hidden, pooler, classifier) -> classifier(tanh(pooler(hidden[:, 0])))``."""
    __tracebackhide__ = True
    run = Runner(
        "check_cls_logits",
        cls_logits,
        [Forbidden("transformer_lab.bert_inputs.cls_logits", function=_REF_CLS)],
        hidden,
        lambda e, c: _signature_hint(e, "cls_logits(hidden, pooler, classifier)"),
    )
    for case in _cls_cases(hidden):
        want = case.data["expected"]
        B, n = want.shape
        T = case.args[0].shape[1]

        def hint(got, B=B, T=T, n=n):
            if got == (B, T, n):
                return "you classified every token; classify the [CLS] vector only, hidden[:, 0]"
            if got == (B, 1, n):
                return "hidden[:, :1] keeps the token axis; hidden[:, 0] picks the [CLS] vectors, (B, C)"
            if got == (T, n):
                return "hidden[0] is the first sequence of the batch, not the [CLS] token: use hidden[:, 0]"
            return None

        out = run.expect_tensor(
            run.call(case), case, want.shape, torch.float32, what="logits", shape_hint=hint
        )
        if not run.close(out, want, atol=1e-5, rtol=1e-5):
            message = run.diagnose(out, _cls_mistakes(*case.data["parts"]), 1e-5, 1e-5)
            message = message or cls_trace(run, case)
            message, named = verdict(message, out, want, "logits")
            run.fail(message, case, named=named)
    run.passed()


register(
    Exercise(
        "cls_logits",
        "06_bert",
        "cls_logits(hidden, pooler, classifier) -> (B, n_classes)",
        cells=(Cell("cls_logits_tests", "cls_logits", 1),),
        check=check_cls_logits,
        against="transformer_lab.bert_inputs.cls_logits",
    )
)
