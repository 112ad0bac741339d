"""Check for notebook 0, exercise 6: the embedding as a one-hot vector times W_emb.

    one_hot_embed(ids, w_emb) -> (..., C)      ids (...,) long in [0, V), w_emb (V, C)

The result must equal the row lookup ``w_emb[ids]`` and carry the gradient to ``w_emb``: row v
of the gradient is the sum of the upstream gradients of the positions holding token v (rows of
tokens that do not occur get exactly zero).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from transformer_lab.checks.engine.core import Case, generator, kind_of
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb00_tokens_and_embeddings.runner import WatchedRunner
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_one_hot_embed"]


def _reference(ids: torch.Tensor, w_emb: torch.Tensor) -> torch.Tensor:
    return w_emb[ids]  # (..., C): row ids[t] of W_emb at every position


def _error_hint(exc: BaseException, case: Case) -> str:
    text = str(exc)
    if "shapes cannot be multiplied" in text or "size mismatch" in text:
        return (
            "F.one_hot(ids) guesses V from ids.max() + 1; pass num_classes=w_emb.shape[0] so "
            "the one-hot rows have length V"
        )
    if "smaller than num_classes" in text:
        return (
            "num_classes must be V = w_emb.shape[0], the number of rows of W_emb (one row per "
            "token), not its width C"
        )
    if "unsupported ScalarType" in text or "numpy" in text.lower():
        return (
            "stay in PyTorch: NumPy has no bfloat16 (and .numpy() cuts the gradient); "
            "F.one_hot(ids, V).to(w_emb.dtype) @ w_emb"
        )
    if "expected scalar type" in text or "dtype" in text:
        if "long" in text.lower():
            return "F.one_hot returns integers: convert it with .to(w_emb.dtype) before the product"
        return (
            f"your one-hot matrix and w_emb have different dtypes (w_emb is "
            f"{case.args[1].dtype} here): convert the one-hot with .to(w_emb.dtype), not "
            f".float(); W_emb is not always float32"
        )
    return _signature_hint(exc, "one_hot_embed(ids, w_emb)")


def _cases(hidden: bool) -> list[Case]:
    g = generator(7800 if hidden else 800)
    specs = [
        ("a sequence", torch.tensor([3, 0, 7, 3, 9]), (10, 4)),
        ("a batch", torch.randint(12, (2, 6), generator=g), (12, 5)),
        ("only small ids", torch.tensor([0, 1, 1, 2]), (8, 3)),
        ("square W_emb", torch.tensor([1, 4, 2, 2, 0]), (6, 6)),
        # the graded cell's examples
        ("the graded batch", torch.tensor([[3, 0, 3], [9, 1, 2]]), (10, 4)),
        ("ids 0 and 1 of 10", torch.tensor([0, 1]), (10, 4)),
        # W_emb's dtype is kept
        ("a float64 W_emb", torch.tensor([2, 0, 5, 2]), (6, 3, torch.float64)),
        (
            "a float16 W_emb",
            torch.tensor([[1, 3], [3, 0]]),
            (5, 4, torch.float16),
        ),  # NumPy and the grader carry it
    ]
    if hidden:
        specs.append(("another batch", torch.randint(20, (3, 4, 5), generator=g), (20, 7)))
    cases = []
    for name, ids, (V, C, *dtype) in specs:
        w = torch.randn(V, C, generator=g).to(*dtype)
        case = Case(name, (ids, w), {}, f"ids {tuple(ids.shape)}, w_emb ({V}, {C}) {w.dtype}")
        case.data["expected"] = _reference(ids, w)
        cases.append(case)
    return cases


def _variants(ids: torch.Tensor, w: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    V, C = w.shape
    found = []
    if V == C:
        found.append(
            (
                "you multiply by W_emb transposed: the one-hot row (length V) times W_emb "
                "(V, C) picks row ids[t]; W_emb.T would pick a column",
                F.one_hot(ids, V).to(w.dtype) @ w.T,
            )
        )
        found.append(
            (
                "you summed over the wrong axis, C (the width) instead of V: one_hot (..., V) @ "
                "W_emb (V, C) sums over V and leaves (..., C)",
                F.one_hot(ids, V).to(w.dtype) * w.sum(-1),
            )
        )
    found += [
        (
            "the rows are off by one: token v is row v of W_emb (ids start at 0), "
            "F.one_hot(ids, V) with no shift",
            w[(ids - 1) % V],
        ),
        (
            "the rows are off by one: token v is row v of W_emb (ids start at 0), "
            "F.one_hot(ids, V) with no shift",
            w[(ids + 1) % V],
        ),
        (
            "you average over V (a mean) instead of summing: the one-hot product sums over V, "
            "one_hot (..., V) @ W_emb (V, C), which picks row ids[t] as it is",
            w[ids] / V,
        ),
        (
            "the embedding is the plain product one_hot(ids) @ W_emb, with no scaling by "
            "sqrt(C) (some models scale later; this exercise does not)",
            w[ids] * C**0.5,
        ),
    ]
    return found


def _reduction_hint(ids: torch.Tensor, w: torch.Tensor, got: torch.Tensor) -> str:
    """A shape left by the product's sum over V done wrong: over C, not at all, or over both."""
    V, C = w.shape
    lead, shape = tuple(ids.shape), tuple(got.shape)
    product = "one_hot (..., V) @ W_emb (V, C) sums over V and leaves (..., C)"
    if shape == lead + (V,) and TRUSTED.equal(
        got.detach().to(w.dtype), F.one_hot(ids, V).to(w.dtype)
    ):
        return f" You return the one-hot vectors themselves: multiply them by W_emb; {product}."
    if shape == lead + (V,) and V != C:
        return (
            f" Yours ends in V = {V}: you summed over the wrong axis, C (the width) instead of "
            f"V; {product}."
        )
    if shape in (lead + (V, C), lead + (C, V)):
        return (
            f" You kept the V axis: the broadcast product one_hot[..., None] * W_emb must be "
            f"summed over V (dim -2), or use {product}."
        )
    if shape == lead:
        return f" You summed over both V and C: sum over V only; {product}."
    return ""


def _check_values(run: WatchedRunner, case: Case) -> None:
    """One case: the output's type, dtype, shape and values (named when a variant matches)."""
    __tracebackhide__ = True
    ids, w = case.args
    want = case.data["expected"]
    got = run.call(case)
    if got is None:
        run.fail("your function returned None: return the (..., C) embeddings.", case)
    if not TRUSTED.is_tensor(got):
        run.fail(f"return a tensor, but yours is {kind_of(got)}.", case)
    if got.dtype != w.dtype:
        run.fail(
            f"the embeddings should have W_emb's dtype {w.dtype}, but yours have {got.dtype}: "
            f"convert the one-hot matrix with .to(w_emb.dtype)"
            + (
                ", not .float() (W_emb is not always float32)."
                if got.dtype == torch.float32
                else " (F.one_hot gives integers)."
            ),
            case,
        )
    if tuple(got.shape) != tuple(want.shape):
        hint = ""
        if tuple(got.shape) == tuple(want.shape[:-2]) + (want.shape[-1],):
            hint = " You summed over the sequence: keep one row per position."
        elif ids.dim() > 1 and tuple(got.shape) == tuple(want.shape[-2:]):
            hint = " You embedded the first sequence only: embed every sequence of the batch."
        else:
            hint = _reduction_hint(ids, w, got)
        run.fail(
            f"the embeddings should have shape {tuple(want.shape)} (ids' shape + (C,)), but "
            f"yours have {tuple(got.shape)}.{hint}",
            case,
            named=bool(hint),
        )
    if TRUSTED.allclose(got.detach(), want, atol=1e-6, rtol=1e-5):
        return
    for message, variant in _variants(ids, w):
        if TRUSTED.allclose(got.detach(), variant, atol=1e-5, rtol=1e-4):
            run.fail(message + ".", case)
    run.fail(
        f"position 0 should be row {int(ids.reshape(-1)[0])} of W_emb, "
        f"{[round(v, 4) for v in want.reshape(-1, want.shape[-1])[0].tolist()]}, but yours "
        f"is {[round(v, 4) for v in got.detach().reshape(-1, got.shape[-1])[0].tolist()]}.",
        case,
        named=False,
    )


def check_one_hot_embed(one_hot_embed, hidden: bool = False) -> None:
    """Check ``one_hot_embed(ids, w_emb)``: the lookup's values and the gradient to ``w_emb``."""
    __tracebackhide__ = True
    run = WatchedRunner(
        "check_one_hot_embed",
        one_hot_embed,
        [Forbidden("torch.nn.functional.embedding", codes={F.embedding.__code__})],
        hidden,
        _error_hint,
        function="one_hot_embed",
    )
    cases = _cases(hidden)
    for case in (c for c in cases if c.args[1].dtype == torch.float32):
        _check_values(run, case)
    # The gradient: the runner passes copies without autograd, so probe it directly.
    g = generator(7900 if hidden else 900)
    ids = torch.tensor([[2, 5, 2, 0], [5, 5, 1, 2]])
    w = torch.randn(7, 3, generator=g).requires_grad_(True)
    upstream = torch.randn(2, 4, 3, generator=g)
    out, error, _ = run.attempt((ids, w), {})
    if error is not None and "numpy" in str(error).lower():
        run.fail(
            "no gradient reaches w_emb: .numpy() leaves autograd (it fails on a w_emb that "
            "requires a gradient); stay in PyTorch, F.one_hot(ids, V).to(w_emb.dtype) @ w_emb."
        )
    if error is not None or not TRUSTED.is_tensor(out):
        text = f": {type(error).__name__}: {str(error).strip()[:120]}" if error else ""
        run.fail(f"your function failed on a w_emb that requires a gradient{text}.")
    if out.grad_fn is None:
        run.fail(
            "no gradient reaches w_emb: your embeddings are detached from it (no .detach(), "
            ".numpy() or torch.no_grad() inside); training needs d loss / d W_emb."
        )
    (grad,) = torch.autograd.grad((out * upstream).sum(), w, allow_unused=True)
    want_grad = F.one_hot(ids, 7).float().reshape(-1, 7).T @ upstream.reshape(-1, 3)  # (V, C)
    if grad is None or not TRUSTED.allclose(grad, want_grad, atol=1e-5, rtol=1e-4):
        run.fail(
            "the gradient reaching w_emb is wrong: row v should be the sum of the upstream "
            "gradients of the positions holding token v (zero for tokens that do not occur)."
        )
    run.n_cases += 1
    # W_emb's dtype is kept (after the gradient, so a detached float32 product is named first).
    for case in (c for c in cases if c.args[1].dtype != torch.float32):
        _check_values(run, case)
    run.passed()


def _embed_reference(ids, w_emb):
    return w_emb[ids]  # the row lookup the one-hot product equals


register(
    Exercise(
        "one_hot_embed",
        "00_tokens_and_embeddings",
        "one_hot_embed(ids, w_emb) -> (..., C)",
        cells=(Cell("one_hot_embed_tests", "one_hot_embed", 1),),
        check=check_one_hot_embed,
        reference=_embed_reference,
    )
)
