"""The cases of notebook 02's multi-head attention check, with the tolerances every comparison with
them uses: self- and cross-attention (T = S and T != S), causal and padding masks, one head,
scores large enough to overflow a softmax that is not shifted, and a source sequence with no key
at all. Each case holds its inputs and weights and the reference's (out, weights), from the
package's MultiHeadAttention with the same weights. The check is in mha.py.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import heads as _ref
from transformer_lab.checks.engine.core import Case, describe_args, generator

__all__ = []


ATOL, RTOL = 1e-5, 1e-4
LARGE = "large scores"  # the case whose softmax overflows unless it is shifted


def _mha_cases(hidden: bool) -> list[Case]:
    g = generator(9606 if hidden else 606)
    r = lambda *s: torch.randn(*s, generator=g) / (s[-1] ** 0.5 if len(s) == 2 else 1.0)  # noqa: E731
    causal = lambda T: torch.ones(T, T, dtype=torch.bool).tril()  # noqa: E731

    def pad(lengths: list[int], S: int) -> Tensor:
        allowed = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
        return allowed[:, None, None, :]  # (B, 1, 1, S)

    x = r(2, 4, 8)
    specs = [
        ("self-attention, H=2", x, x, 2, None),
        ("cross-attention, T != S, H=4", r(2, 3, 8), r(2, 5, 8), 4, None),
        ("causal self-attention", r(2, 5, 8), None, 2, causal(5)),
        ("cross-attention with padding mask", r(2, 3, 12), r(2, 6, 12), 3, pad([6, 2], 6)),
        ("one head", r(1, 4, 6), None, 1, None),
        ("cross-attention, T = S", r(2, 4, 8), r(2, 4, 8), 2, None),
        # scores of a few hundred: exp() overflows float32 unless each row's maximum is subtracted
        (LARGE, r(2, 4, 8) * 12.0, None, 2, None),
        # sequence 1 has no key at all: its queries' weights are zeros (or NaN), never uniform
        ("an empty source sequence", r(2, 3, 8), r(2, 4, 8), 2, pad([3, 0], 4)),
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
        with torch.random.fork_rng(devices=[]):  # the init must not move the global RNG
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
        case.data["large_scores"] = name == LARGE
        cases.append(case)
    return cases
