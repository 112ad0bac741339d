"""Checks for notebook 2: splitting and merging heads, and multi-head attention.

Student-facing signatures (row vectors, weights without bias):

    split_heads(x, n_heads)   (B, T, C) -> (B, H, T, D)
    merge_heads(x)            (B, H, T, D) -> (B, T, C)
    multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None) -> out or (out, weights)
        x_q (B, T, C), x_kv (B, S, C), every w (C, C); Q = x_q @ w_q, ...; out (B, T, C)
    to_torch_mha(w_q, w_k, w_v, w_o, n_heads) -> nn.MultiheadAttention(C, H, bias=False, batch_first=True), eval()
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab import heads as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._guards import TRUSTED, Forbidden, verify
from transformer_lab.checks.attention import _optional_weights, _signature_hint

__all__ = [
    "check_split_heads",
    "check_merge_heads",
    "check_multi_head_attention",
    "check_to_torch_mha",
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
    specs = [((2, 3, 8), 2), ((1, 4, 12), 3), ((2, 5, 6), 1), ((2, 4, 4), 4)]
    if hidden:
        specs += [((3, 2, 16), 4), ((1, 7, 10), 5)]
    cases = []
    for shape, H in specs:
        x = torch.randn(*shape, generator=g)
        case = Case(f"H={H}", (x, H), {}, describe_args(x=x, n_heads=H))
        case.data.update(x=x, H=H, expected=_ref.split_heads(x, H))
        cases.append(case)
    return cases


def check_split_heads(split_heads, hidden: bool = False) -> None:
    """Check ``split_heads(x, n_heads)``: (B, T, C) -> (B, H, T, D) with D = C / H."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference split_heads", function=_ref.split_heads)]
    run = Runner(
        "check_split_heads",
        split_heads,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "split_heads(x, n_heads)"),
    )
    for case in _split_cases(hidden):
        x, H, expected = case.data["x"], case.data["H"], case.data["expected"]
        B, T, C = x.shape

        def hint(got: tuple, B=B, T=T, H=H, C=C) -> str | None:
            if got == (B, T, H, C // H):
                return "that is (B, T, H, D): transpose(1, 2) to put the heads before the positions"
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, expected.dtype, shape_hint=hint
        )
        if not run.close(out, expected, 0.0, 0.0):
            run.fail(
                run.diagnose(out, _split_mistakes(x, H), 0.0, 0.0) or run.mismatch(out, expected),
                case,
            )
    run.passed()


def check_merge_heads(merge_heads, hidden: bool = False) -> None:
    """Check ``merge_heads(x)``: (B, H, T, D) -> (B, T, C), the inverse of split_heads."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [Forbidden("transformer_lab's reference merge_heads", function=_ref.merge_heads)]
    run = Runner(
        "check_merge_heads",
        merge_heads,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "merge_heads(x)"),
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
            shape_hint=lambda got: "the result is (B, T, H * D)",
        )
        if not run.close(out, expected, 0.0, 0.0):
            mistakes = [
                Mistake(
                    "heads merged with a reshape but no transpose: x.reshape(B, T, C) mixes heads and positions; "
                    "use x.transpose(1, 2).reshape(B, T, H * D)",
                    lambda: x.reshape(B, T, H * D),
                ),
                Mistake(
                    "the features are interleaved across heads: transpose to (B, T, H, D) and then reshape",
                    lambda: x.permute(0, 2, 3, 1).reshape(B, T, H * D),
                ),
            ]
            run.fail(
                run.diagnose(out, mistakes, 0.0, 0.0) or run.mismatch(out, expected), merge_case
            )
    run.passed()


# ---------------------------------------------------------------------------------------------
def _mha(
    x_q,
    x_kv,
    wq,
    wk,
    wv,
    wo,
    H,
    mask=None,
    *,
    split="ok",
    merge="ok",
    out_proj=True,
    transpose_w=False,
    scale="D",
    kv_from_q=False,
    use_mask=True,
):
    """Functional multi-head attention with exactly one deliberate mistake switched on."""
    if transpose_w:
        wq, wk, wv, wo = wq.T, wk.T, wv.T, wo.T
    src = x_q if kv_from_q else x_kv
    q, k, v = x_q @ wq, src @ wk, src @ wv  # (B, T, C), (B, S, C), (B, S, C)
    B, T, C = q.shape
    S, D = k.shape[1], C // H

    def sp(t: Tensor, L: int) -> Tensor:
        if split == "reshape":
            return t.reshape(B, H, L, D)  # the bug: no transpose
        return t.view(B, L, H, D).transpose(1, 2)  # (B, H, L, D)

    q, k, v = sp(q, T), sp(k, S), sp(v, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D if scale == "D" else C)  # (B, H, T, S)
    if mask is not None and use_mask:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v  # (B, H, T, D)
    out = out.reshape(B, T, C) if merge == "reshape" else out.transpose(1, 2).reshape(B, T, C)
    return (out @ wo if out_proj else out), weights


def _mha_cases(hidden: bool) -> list[Case]:
    g = generator(9606 if hidden else 606)
    r = lambda *s: torch.randn(*s, generator=g) / (s[-1] ** 0.5 if len(s) == 2 else 1.0)  # noqa: E731
    causal = lambda T: torch.ones(T, T, dtype=torch.bool).tril()  # noqa: E731
    pad = lambda lengths, S: (torch.arange(S)[None, :] < torch.tensor(lengths)[:, None])[
        :, None, None, :
    ]  # noqa: E731
    x = r(2, 4, 8)
    specs = [
        ("self-attention, H=2", x, x, 2, None),
        ("cross-attention, T != S, H=4", r(2, 3, 8), r(2, 5, 8), 4, None),
        ("causal self-attention", r(2, 5, 8), None, 2, causal(5)),
        ("cross-attention with padding mask", r(2, 3, 12), r(2, 6, 12), 3, pad([6, 2], 6)),
        ("one head", r(1, 4, 6), None, 1, None),
    ]
    if hidden:
        specs += [
            ("H=4, causal", r(3, 6, 16), None, 4, causal(6)),
            ("cross-attention, H=8", r(2, 2, 16), r(2, 7, 16), 8, pad([7, 3], 7)),
        ]
    cases = []
    for name, xq, xkv, H, mask in specs:
        xkv = xq if xkv is None else xkv
        C = xq.shape[-1]
        wq, wk, wv, wo = (r(C, C) for _ in range(4))
        kwargs = {} if mask is None else {"mask": mask}
        case = Case(
            name,
            (xq, xkv, wq, wk, wv, wo, H),
            kwargs,
            describe_args(x_q=xq, x_kv=xkv, n_heads=H, mask=mask),
        )
        module = _ref.MultiHeadAttention(C, H, bias=False)
        with (
            torch.no_grad()
        ):  # nn.Linear stores W^T: y = x @ weight.T, and our w is applied as x @ w
            for lin, w in (
                (module.q_proj, wq),
                (module.k_proj, wk),
                (module.v_proj, wv),
                (module.out_proj, wo),
            ):
                lin.weight.copy_(w.T)
            out, weights = module(xq, xkv, mask=mask, need_weights=True)
        case.data.update(
            xq=xq, xkv=xkv, w=(wq, wk, wv, wo), H=H, mask=mask, expected=(out, weights)
        )
        cases.append(case)
    return cases


def _mha_forbidden() -> list[Forbidden]:
    return [
        Forbidden("transformer_lab's MultiHeadAttention", function=_ref.MultiHeadAttention.forward),
        Forbidden(
            "PyTorch's nn.MultiheadAttention / F.multi_head_attention_forward",
            codes={F.multi_head_attention_forward.__code__, nn.MultiheadAttention.forward.__code__},
            builtin_names=("_native_multi_head_attention",),
        ),
    ]


def check_multi_head_attention(multi_head_attention, hidden: bool = False) -> None:
    """Check ``multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)``.

    Compared with ``transformer_lab.MultiHeadAttention`` (no bias) after copying the weights.
    Returns ``out`` (B, T, C) or ``(out, weights)`` with weights (B, H, T, S).
    """
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_multi_head_attention",
        multi_head_attention,
        _mha_forbidden(),
        hidden,
        lambda e, c: _signature_hint(
            e, "multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None)"
        ),
    )
    for case in _mha_cases(hidden):
        xq, xkv, (wq, wk, wv, wo), H, mask = (case.data[n] for n in ("xq", "xkv", "w", "H", "mask"))
        exp_out, exp_w = case.data["expected"]
        out, weights = _optional_weights(run, run.call(case), case)
        out = run.expect_tensor(
            out,
            case,
            exp_out.shape,
            exp_out.dtype,
            shape_hint=lambda got: "merge the heads back to (B, T, C) and apply w_o",
        )
        if weights is not None:
            weights = run.expect_tensor(
                weights,
                case,
                exp_w.shape,
                exp_w.dtype,
                what="attention weights",
                shape_hint=lambda got: "the weights of every head: (B, H, T, S)",
            )
        if run.close(out, exp_out, ATOL, RTOL) and (
            weights is None or run.close(weights, exp_w, ATOL, RTOL)
        ):
            continue
        M = lambda msg, **kw: Mistake(msg, lambda: _mha(xq, xkv, wq, wk, wv, wo, H, mask, **kw))  # noqa: E731
        mistakes = [
            M("the output projection is missing: multiply the merged heads by w_o", out_proj=False),
            M(
                "heads split with a reshape but no transpose: use .view(B, T, H, D).transpose(1, 2)",
                split="reshape",
            ),
            M(
                "heads merged with a reshape but no transpose: use .transpose(1, 2).reshape(B, T, C)",
                merge="reshape",
            ),
            M(
                "the scores are scaled by sqrt(C) (the model width) instead of sqrt(D) = sqrt(C / H) (the head width)",
                scale="C",
            ),
            M(
                "the weights are applied as x @ w.T: the course uses row vectors, Q = x_q @ w_q",
                transpose_w=True,
            ),
            M(
                "keys and values must come from x_kv (the second argument); you computed them from x_q",
                kv_from_q=True,
            ),
        ]
        if mask is not None:
            mistakes.append(
                M(
                    "the mask is ignored: fill the scores with -inf where mask is False, before the softmax",
                    use_mask=False,
                )
            )
        message = run.diagnose(out, mistakes, ATOL, RTOL, pick=lambda r: r[0])
        if message is None and weights is not None and not run.close(weights, exp_w, ATOL, RTOL):
            message = run.diagnose(weights, mistakes, ATOL, RTOL, pick=lambda r: r[1])
        if message is None:
            message = (
                run.mismatch(out, exp_out)
                if not run.close(out, exp_out, ATOL, RTOL)
                else "the returned attention weights are wrong"
            )
        run.fail(message, case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# copying row-vector weights into PyTorch's nn.MultiheadAttention
def _to_torch_cases(hidden: bool) -> list[Case]:
    g = generator(7 if hidden else 0)
    sizes = [(6, 1), (6, 6), (20, 5), (32, 8)] if hidden else [(8, 2), (12, 3), (16, 4)]
    cases = []
    for C, H in sizes:
        ws = tuple(
            torch.randn(C, C, generator=g) / math.sqrt(C) for _ in range(4)
        )  # w_q, w_k, w_v, w_o
        x = torch.randn(2, 5, C, generator=g)
        with torch.random.fork_rng(
            devices=[]
        ):  # the module's init must not move the notebook's global RNG
            reference = _ref.MultiHeadAttention(C, H, bias=False).eval()
        with torch.no_grad():
            for proj, w in zip(
                (reference.q_proj, reference.k_proj, reference.v_proj, reference.out_proj), ws
            ):
                proj.weight.copy_(w.T)  # nn.Linear stores (out, in)
            expected = reference(x, need_weights=True)
        case = Case(f"C={C}, H={H}", (*ws, H), {}, describe_args(w_q=ws[0], n_heads=H))
        case.data.update(C=C, H=H, w=ws, x=x, expected=expected)
        cases.append(case)
    return cases


def check_to_torch_mha(to_torch_mha, hidden: bool = False) -> None:
    """Check ``to_torch_mha(w_q, w_k, w_v, w_o, n_heads)``: the returned ``nn.MultiheadAttention``
    must compute the package's MultiHeadAttention (no bias) with these row-vector weights."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    forbidden = [
        Forbidden("transformer_lab's MultiHeadAttention", function=_ref.MultiHeadAttention.forward)
    ]
    run = Runner(
        "check_to_torch_mha",
        to_torch_mha,
        forbidden,
        hidden,
        lambda e, c: _signature_hint(e, "to_torch_mha(w_q, w_k, w_v, w_o, n_heads)"),
    )
    for case in _to_torch_cases(hidden):
        C, H, x = case.data["C"], case.data["H"], case.data["x"]
        w_q, w_k, w_v, w_o = case.data["w"]
        want, want_w = case.data["expected"]
        module = run.call(case)
        if module is None:
            run.fail("your function returned None: did you forget `return module`?", case)
        if not isinstance(module, nn.MultiheadAttention):
            run.fail(
                f"return a torch.nn.MultiheadAttention, but received {type(module).__name__}.", case
            )
        if module.embed_dim != C or module.num_heads != H:
            run.fail(
                f"the module should have embed_dim={C} and num_heads={H}, but yours has embed_dim="
                f"{module.embed_dim} and num_heads={module.num_heads}.",
                case,
            )
        if not module.batch_first:
            run.fail(
                "create the module with batch_first=True: the course's inputs are (B, T, C).", case
            )
        if module.training:
            run.fail("call .eval() on the module before returning it.", case)
        with torch.no_grad():
            got, got_w = module(x, x, x, need_weights=True, average_attn_weights=False)
        verify(run.name)  # the module ran outside the call monitor: nothing may have been patched
        if not TRUSTED.allclose(got, want, atol=1e-5):
            hint = ""
            with torch.no_grad():
                in_proj = module.in_proj_weight
                if in_proj is not None and C > 1 and TRUSTED.allclose(in_proj[:C], w_q, atol=1e-6):
                    hint = " in_proj_weight holds W_q untransposed: PyTorch stores (out, in), so copy w_q.T."
                elif TRUSTED.allclose(module.out_proj.weight, w_o, atol=1e-6):
                    hint = " out_proj.weight holds W_o untransposed: copy w_o.T."
                elif in_proj is not None and TRUSTED.allclose(in_proj[:C], w_k.T, atol=1e-6):
                    hint = " the rows of in_proj_weight are queries, then keys, then values."
            run.fail(f"for C={C}, H={H} PyTorch's output differs from the reference.{hint}", case)
        if not TRUSTED.allclose(got_w, want_w, atol=1e-5):
            run.fail(f"for C={C}, H={H} the attention weights differ.", case)
    run.passed()
