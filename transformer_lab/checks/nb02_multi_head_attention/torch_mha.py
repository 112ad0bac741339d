"""Check for notebook 2, exercise 5: row-vector weights copied into nn.MultiheadAttention.

to_torch_mha(w_q, w_k, w_v, w_o, n_heads) -> nn.MultiheadAttention(C, H, bias=False,
    batch_first=True) in eval mode
"""

from __future__ import annotations

import math

import torch
from torch import nn

from transformer_lab import heads as _ref
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.guards import TRUSTED, verify
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb02_multi_head_attention.torch_mha_layout import weight_hint
from transformer_lab.checks.registry import Cell, Exercise, register

ATOL, RTOL = 1e-5, 1e-4

__all__ = ["check_to_torch_mha"]


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


def _aliased(run: Runner, case: Case) -> str:
    """The module's parameters change when the caller changes its weights after the call: they
    are views of them (``.data = w_o.T``, ``nn.Parameter(w_o.T)``), not copies. (Under grading the
    module lives in the student's kernel, out of reach of these tensors: nothing is found.)"""
    try:
        ws = tuple(w.clone() for w in case.data["w"])
        module, error, calls = run.attempt((*ws, case.data["H"]), {})
        if error is not None or calls or not isinstance(module, nn.MultiheadAttention):
            return ""
        params = {
            "in_proj_weight": module.in_proj_weight,
            "out_proj.weight": module.out_proj.weight,
        }
        before = {n: p.detach().clone() for n, p in params.items() if TRUSTED.is_tensor(p)}
        with torch.no_grad():
            for w in ws:
                w.add_(1.0)  # the caller changes its weights after the call
        changed = [n for n, b in before.items() if not TRUSTED.equal(params[n].detach(), b)]
    except Exception:  # a probe that cannot run is no evidence
        return ""
    if not changed:
        return ""
    return (
        f"your module's {' and '.join(changed)} {'share' if len(changed) > 1 else 'shares'} "
        f"memory with the caller's weights (a view such as `.data = w_o.T` or "
        f"nn.Parameter(w_o.T)): changing them after the call changes the module; copy the "
        f"values with parameter.copy_(...) under torch.no_grad()"
    )


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
        lambda e, c: (
            "copy into the parameters under `with torch.no_grad():` (an in-place copy into a "
            "parameter that requires grad is refused otherwise)"
            if "leaf Variable" in str(e)
            else "in_proj_weight is one (3C, C) matrix: torch.cat([w_q.T, w_k.T, w_v.T], dim=0)"
            if "must match the size" in str(e)
            else f"the module's embed_dim is C = w_q.shape[0] (here {c.args[0].shape[0]}), "
            f"divisible by num_heads = n_heads ({c.args[4]}): read both from the arguments, "
            f"not from hard-coded numbers"
            if "embed_dim must be divisible" in str(e)
            else _signature_hint(e, "to_torch_mha(w_q, w_k, w_v, w_o, n_heads)")
        ),
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
            run.fail(
                "call .eval() on the module before returning it: in training mode its dropout "
                f"(dropout={module.dropout}) is active and the outputs change from call to call.",
                case,
            )
        extras = [
            n for n in ("in_proj_bias", "bias_k", "bias_v") if getattr(module, n, None) is not None
        ]
        if module.out_proj.bias is not None:
            extras.append("out_proj.bias")
        if extras:
            run.fail(
                f"your module has biases ({', '.join(extras)}): the course's attention has none; "
                f"create it with bias=False (and without add_bias_kv).",
                case,
            )
        for pname, param, shape in (
            ("in_proj_weight", module.in_proj_weight, (3 * C, C)),
            ("out_proj.weight", module.out_proj.weight, (C, C)),
        ):
            if param is not None and tuple(param.shape) != shape:
                run.fail(
                    f"{pname} has shape {tuple(param.shape)}, but the module needs {shape}: "
                    f"PyTorch stores (out, in), so in_proj_weight is torch.cat([w_q.T, w_k.T, "
                    f"w_v.T], dim=0) and out_proj.weight is w_o.T (copy them in place).",
                    case,
                )
        try:
            with torch.no_grad():
                got, got_w = module(x, x, x, need_weights=True, average_attn_weights=False)
        except Exception as exc:  # a module the student broke: say so instead of crashing
            run.fail(
                f"your module raised {type(exc).__name__} when called: {exc}", case, named=False
            )
        verify(run.name)  # the module ran outside the call monitor: nothing may have been patched
        if not TRUSTED.allclose(got, want, atol=1e-5):
            with torch.no_grad():
                hint = weight_hint(module, C, H, case.data["w"])
            run.fail(
                f"for C={C}, H={H} PyTorch's output differs from the reference.{hint}",
                case,
                named=bool(hint),
            )
        if not TRUSTED.allclose(got_w, want_w, atol=1e-5):
            run.fail(f"for C={C}, H={H} the attention weights differ.", case)
        shared = _aliased(run, case)
        if shared:
            run.fail(shared, case)
    run.passed()


register(
    Exercise(
        "to_torch_mha",
        "02_multi_head_attention",
        "to_torch_mha(w_q, w_k, w_v, w_o, n_heads) -> nn.MultiheadAttention",
        cells=(Cell("torch_mha_tests", "to_torch_mha", 2),),
        check=check_to_torch_mha,
        against="torch.nn.MultiheadAttention",
    )
)
