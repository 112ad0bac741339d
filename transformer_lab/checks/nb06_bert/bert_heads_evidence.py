"""Evidence for notebook 6's output checks (the MLM loss, the [CLS] classifier).

MLM loss: which vectors the head was run on (all labelled ones, or only the first sequence's),
and whether a gradient reaches ``hidden``. Classifier: hooks on the pooler and the classifier
show what each receives (the [CLS] vectors? tanh of the pooler's output?) and whether the
classifier's output is returned as it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lab import bert_inputs as _ref
from transformer_lab.checks.engine.core import Case, Runner, _clone
from transformer_lab.checks.engine.guards import TRUSTED

__all__ = ["which_rows", "gradient_to_hidden", "cls_trace", "loss_transform", "loss_evidence"]


def which_rows(head, h, labels, M: int) -> str | None:
    """The head ran on vectors other than the M labelled ones: which?"""
    seen = torch.cat(head.seen) if head.seen else h.new_zeros(0, h.shape[-1])
    chosen = labels != _ref.IGNORE_INDEX
    if seen.shape[0] == M:
        return None
    if seen.shape[0] and seen.shape == h[0][chosen[0]].shape and torch.equal(seen, h[0][chosen[0]]):
        return (
            "only the first sequence of the batch is used (hidden[0]): select the labelled "
            "positions of every sequence at once, hidden[labels != -100] (an (M, C) matrix)"
        )
    return (
        f"your function ran the head on {seen.shape[0]} vectors, but the batch has {M} labelled "
        "positions: select them all with hidden[labels != -100]"
    )


def gradient_to_hidden(run: Runner, h, labels, head) -> str | None:
    """The loss must let gradients reach the encoder: d loss / d hidden is not all zero."""
    hh = h.clone().requires_grad_(True)
    out, error, _ = run.attempt((hh, labels.clone(), head), {})
    if error is not None or not TRUSTED.is_tensor(out) or not out.requires_grad:
        return None
    (grad,) = torch.autograd.grad(out, hh, allow_unused=True)
    if grad is None or not bool((grad != 0).any()):
        return (
            "no gradient reaches `hidden` (the encoder's output): do not .detach() it or index a "
            "detached copy; the MLM loss trains the encoder through hidden"
        )
    return None


_ACTIVATIONS = {
    "no activation": lambda p: p,
    "ReLU": torch.relu,
    "sigmoid": torch.sigmoid,
    "GELU": F.gelu,
    "softmax": lambda p: p.softmax(-1),
}


def cls_trace(run: Runner, case: Case) -> str | None:
    """Run the student's function with hooks on the pooler and the classifier: what does each
    receive, and what happens to the classifier's output?"""
    h, pooler, classifier = case.args
    seen: dict[str, list] = {"pooler": [], "classifier": []}
    hooks = [
        module.register_forward_hook(
            lambda m, i, o, k=key: seen[k].append((i[0].detach().clone(), o.detach().clone()))
        )
        for key, module in (("pooler", pooler), ("classifier", classifier))
    ]
    try:
        out, error, _ = run.attempt((_clone(h), pooler, classifier), {})
    finally:
        for hook in hooks:
            hook.remove()
    if error is None and not seen["pooler"] and len(seen["classifier"]) == 1:
        c_in = seen["classifier"][0][0]
        if c_in.shape == h[:, 0].shape and torch.allclose(c_in, h[:, 0], atol=1e-5, rtol=1e-5):
            return (
                "the pooler is skipped: the classifier gets the [CLS] vectors directly; BERT "
                "computes classifier(tanh(pooler(hidden[:, 0])))"
            )
        return "the pooler is never called: BERT computes classifier(tanh(pooler(hidden[:, 0])))"
    if error is None and len(seen["pooler"]) > 1:
        first = _pooler_repeated(seen["pooler"], h)
        return (
            first
            if first
            and _pooler_repeated(_pooler_calls(run, -0.7 * h, pooler, classifier), -0.7 * h)
            else None
        )
    if error is not None or len(seen["pooler"]) != 1:
        return None
    if not seen["classifier"]:
        return (
            "the classifier module is never called: apply it as classifier(...), which adds its "
            "bias to the product with its weight"
        )
    if len(seen["classifier"]) != 1:
        return None
    (p_in, p_out), (c_in, c_out) = seen["pooler"][0], seen["classifier"][0]
    same = lambda a, b: a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)  # noqa: E731
    if not same(p_in, h[:, 0]):
        for t in range(1, h.shape[1]):
            if same(p_in, h[:, t]):
                return f"the pooler reads token {t}; [CLS] is the first token, hidden[:, 0]"
        if same(p_in, torch.tanh(h[:, 0])):
            return "tanh is applied before the pooler; it comes after: tanh(pooler(hidden[:, 0]))"
        return "the pooler does not get the [CLS] vectors hidden[:, 0] (one per sequence)"
    if not same(c_in, torch.tanh(p_out)):
        for name, f in _ACTIVATIONS.items():
            if same(c_in, f(p_out)):
                return f"the pooler's activation is tanh, but yours is {name}: tanh(pooler(h_CLS))"
        return "the classifier does not get tanh(pooler(hidden[:, 0])): the pooler's activation is tanh"
    if TRUSTED.is_tensor(out) and not same(out.detach(), c_out):
        return (
            "the classifier's output is changed before it is returned: return the logits "
            "classifier(tanh(pooler(hidden[:, 0]))) as they are"
        )
    return None


def _pooler_calls(run: Runner, h, pooler, classifier) -> list:
    """(input, output) of every call of the pooler on the student's function run on h."""
    calls: list = []
    hook = pooler.register_forward_hook(
        lambda m, i, o: calls.append((i[0].detach().clone(), o.detach().clone()))
    )
    try:
        _, error, _ = run.attempt((_clone(h), pooler, classifier), {})
    finally:
        hook.remove()
    return calls if error is None else []


def _pooler_repeated(calls: list, h) -> str | None:
    """The pooler called more than once: named when the calls form a chain (each call reads the
    previous one's output, through some activation) starting from the [CLS] vectors."""
    same = lambda a, b: a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-5)  # noqa: E731
    if len(calls) < 2 or not same(calls[0][0], h[:, 0]):
        return None
    acts = [torch.tanh, *_ACTIVATIONS.values()]
    for (_, out), (nxt, _) in zip(calls, calls[1:]):
        if not any(same(nxt, f(out)) for f in acts):
            return None
    return (
        f"the pooler is applied {len(calls)} times in a row (twice or more, each on the previous "
        "output); apply it once: classifier(tanh(pooler(hidden[:, 0])))"
    )


def _smoothing(h, labels, head) -> tuple[Tensor, Tensor]:
    """(plain cross-entropy, mean over the vocabulary of -log p) over the labelled positions."""
    chosen = labels != _ref.IGNORE_INDEX
    with torch.no_grad():
        logp = head(h[chosen]).log_softmax(-1)  # (M, V)
        plain = F.nll_loss(logp, labels[chosen])
        uniform = -logp.mean(-1).mean()
    return plain, uniform


def loss_transform(run: Runner, h, labels, head, loss) -> str | None:
    """The right loss passed through a function (exp: the perplexity; a sign; a log), or label
    smoothing of some strength: read from this case and confirmed on a second input (2 h)."""
    second = h * 2.0
    got2, error, _ = run.attempt((second.clone(), labels.clone(), head), {})
    if error is not None or not TRUSTED.is_tensor(got2) or got2.numel() != 1:
        return None
    got = [float(loss.detach()), float(got2.detach())]
    pairs = [_smoothing(h, labels, head), _smoothing(second, labels, head)]
    want = [float(p) for p, _ in pairs]
    near = lambda a, b: abs(a - b) <= 1e-4 * max(1.0, abs(b))  # noqa: E731
    transforms = {
        "exp(loss), the perplexity, is returned; return the mean cross-entropy itself": math.exp,
        "the loss has the wrong sign: cross-entropy is -log p(label), a positive number": lambda v: (
            -v
        ),
        "log(loss) is returned; return the mean cross-entropy itself": lambda v: math.log(v),
        "the loss is squared; return the mean cross-entropy itself": lambda v: v * v,
    }
    for message, f in transforms.items():
        if all(near(g, f(w)) for g, w in zip(got, want)):
            return message
    eps = [(g - p) / (u - p) for g, (p, u) in zip(got, ((float(a), float(b)) for a, b in pairs))]
    if 0.0 < eps[0] < 0.6 and abs(eps[0] - eps[1]) < 1e-3:
        return (
            f"label smoothing ({eps[0]:.2g}) is applied: the MLM loss is the plain cross-entropy, "
            "F.cross_entropy(logits, labels) without label_smoothing"
        )
    return None


def _other_losses(h, labels, head) -> dict[str, float]:
    """Plausible wrong losses of the same logits, each a message: a squared error between the
    probabilities and the one-hot labels; labels paired with the wrong positions."""
    chosen = labels != _ref.IGNORE_INDEX
    with torch.no_grad():
        logits = head(h[chosen])  # (M, V), rows in row-major order of (B, T)
        probs, onehot = logits.softmax(-1), F.one_hot(labels[chosen], logits.shape[-1]).float()
        squared = (probs - onehot) ** 2  # (M, V)
        column_order = labels.T[chosen.T]  # the same labels, in column-major order
    brier = (
        "this is a squared error between the probabilities and the one-hot labels, not the "
        "cross-entropy: the MLM loss is F.cross_entropy(logits, labels), -log p(label)"
    )
    aligned = (
        "the labels are paired with the wrong positions: the hidden vectors are taken in one "
        "order and the labels in another (a transpose?); select both with the same mask, "
        "hidden[chosen] and labels[chosen]"
    )
    return {
        brier: float(squared.sum(-1).mean()),
        brier + " ": float(squared.mean()),
        aligned: float(F.cross_entropy(logits, column_order)),
    }


def loss_evidence(run: Runner, h, labels, head, loss) -> str | None:
    """The loss, compared on this case and a second input (2 h), with plausible wrong losses and
    with the right one times a constant: the sum over the labelled positions divided by a count
    other than their number M (B, T, B*T ...)."""
    second = h * 2.0
    got2, error, _ = run.attempt((second.clone(), labels.clone(), head), {})
    if error is not None or not TRUSTED.is_tensor(got2) or got2.numel() != 1:
        return None
    got = [float(loss.detach()), float(got2.detach())]
    near = lambda a, b: abs(a - b) <= 1e-4 * max(1.0, abs(b))  # noqa: E731
    inputs = (h, second)
    others = [_other_losses(x, labels, head) for x in inputs]
    right = [float(_smoothing(x, labels, head)[0]) for x in inputs]
    for message in others[0]:
        close_to_right = any(near(others[i][message], right[i]) for i in range(2))
        if not close_to_right and all(near(got[i], others[i][message]) for i in range(2)):
            return message.strip()
    B, T = labels.shape
    M = int((labels != _ref.IGNORE_INDEX).sum())
    if right[0] == 0 or right[1] == 0:
        return None
    ratios = [g / w for g, w in zip(got, right)]
    if abs(ratios[0] - 1) < 1e-3 or abs(ratios[0] - ratios[1]) > 1e-4 * abs(ratios[0]):
        return None
    D = M / ratios[0]  # got = (sum over the M labelled) / D
    counts = {"B, the number of sequences": B, "T, the sequence length": T}
    named = [what for what, n in counts.items() if abs(D - n) < 1e-3]
    if len(named) == 1 and len({B, T, M}) == 3:
        return (
            f"the sum over the labelled positions is divided by {named[0]} ({round(D)}); the mean "
            f"divides by the number of labelled positions ({M} here): F.cross_entropy's default"
        )
    return None


def _scale_roots(logits: Tensor, target: Tensor, loss: float) -> list[float]:
    """The factors c > 0 for which cross_entropy(c * logits, target) equals ``loss`` (the loss
    is convex in c, so at most two), found on a grid and refined by bisection."""
    f = lambda c: float(F.cross_entropy(c * logits, target)) - loss  # noqa: E731
    grid = torch.logspace(-2, 2, 81, dtype=torch.float64).tolist()
    values = [f(c) for c in grid]
    roots = []
    for (a, fa), (b, fb) in zip(zip(grid, values), zip(grid[1:], values[1:])):
        if fa == 0 or fa * fb < 0:
            for _ in range(50):
                mid = (a + b) / 2
                if (f(mid) < 0) == (fa < 0):
                    a, fa = mid, f(mid)
                else:
                    b = mid
            roots.append((a + b) / 2)
    return roots


def logit_scale(run: Runner, h, labels, head, loss) -> str | None:
    """The cross-entropy of the logits times one constant c (a temperature, 1 / sqrt(C), ...):
    c read from this case and confirmed on a second input (2 h)."""
    second = h * 2.0
    got2, error, _ = run.attempt((second.clone(), labels.clone(), head), {})
    if error is not None or not TRUSTED.is_tensor(got2) or got2.numel() != 1:
        return None
    chosen = labels != _ref.IGNORE_INDEX
    with torch.no_grad():
        fits = [
            _scale_roots(head(x[chosen]).double(), labels[chosen], float(g.detach()))
            for x, g in ((h, loss), (second, got2))
        ]
    common = [c for c in fits[0] if any(abs(c - d) < 1e-4 * c for d in fits[1])]
    if len(common) != 1 or abs((c := common[0]) - 1) < 1e-3:
        return None
    C, V = h.shape[-1], head(h[:1, :1]).shape[-1]
    usual = {"1 / sqrt(C)": C**-0.5, "1 / C": 1 / C, "sqrt(C)": C**0.5, "1 / V": 1 / V}
    what = next((f" ({n})" for n, v in usual.items() if abs(c - v) < 1e-3 * v), "")
    return (
        f"the logits are scaled by {c:.4g}{what} before the cross-entropy (a temperature, or a "
        "division by a width): the MLM loss takes the head's logits as they are, "
        "F.cross_entropy(head(hidden[chosen]), labels[chosen])"
    )
