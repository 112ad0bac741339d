"""The cases of the tiled-attention check: random blocks (some masked, with a query that sees no
key), one block holding every key, scores in the hundreds, and float64 inputs."""

from __future__ import annotations

import torch

from transformer_lab.checks.engine.core import Case, describe_args, generator

__all__ = ["tiled_cases"]


def tiled_cases(hidden: bool) -> list[Case]:
    """The visible cases, or the hidden ones (the same kinds, other seeds, two more)."""
    g = generator(9902 if hidden else 902)
    specs = [((2, 6), 10, 4, 3, 4, False), ((5,), 7, 3, 2, 3, True), ((1, 2, 4), 9, 8, 5, 4, True)]
    specs += [((3,), 4, 2, 4, 16, False)]  # one block holds every key
    if hidden:
        specs += [((2, 3, 7), 13, 4, 6, 5, True), ((11,), 20, 6, 2, 7, False)]
    cases = []
    for q_shape, S, D, Dv, block, masked in specs:
        *batch, T = q_shape
        q = torch.randn(*batch, T, D, generator=g) * 2
        k, v = torch.randn(*batch, S, D, generator=g) * 2, torch.randn(*batch, S, Dv, generator=g)
        mask = None
        if masked:
            mask = torch.rand(*batch, T, S, generator=g) > 0.4
            mask.view(-1, T, S)[0, 0] = False  # one query with nothing to attend to
        kwargs = {} if mask is None else {"mask": mask}
        describe = describe_args(q=q, k=k, v=v, block_size=block, mask=mask)
        case = Case(
            f"T={T}, S={S}, blocks of {block}" + (", masked" if masked else ""),
            (q, k, v, block),
            kwargs,
            describe,
        )
        case.data.update(q=q, k=k, v=v, block=block, mask=mask)
        cases.append(case)
    cases.append(_large_scores_case(g))
    cases.append(_float64_case(g))
    return cases


def _float64_case(g: torch.Generator) -> Case:
    """float64 inputs: the running m, l and o must keep the inputs' dtype (not float32 buffers)."""
    T, S, D, Dv, block = 5, 7, 4, 3, 3
    q, k = torch.randn(2, T, D, generator=g).double(), torch.randn(2, S, D, generator=g).double()
    v = torch.randn(2, S, Dv, generator=g).double()
    mask = torch.rand(2, T, S, generator=g) > 0.4
    case = Case(f"T={T}, S={S}, blocks of {block}, float64, masked", (q, k, v, block),
                {"mask": mask}, describe_args(q=q, k=k, v=v, block_size=block, mask=mask))  # fmt: skip
    case.data.update(q=q, k=k, v=v, block=block, mask=mask)
    return case


def _large_scores_case(g: torch.Generator) -> Case:
    """Scores in the hundreds (exp overflows float32 above ~88), exact in float32: integer
    q and k with D = 4, so every order of the products and the 1/sqrt(D) = 1/2 agrees."""
    T, S, D, Dv, block = 6, 10, 4, 3, 4
    q = torch.randint(-12, 13, (2, T, D), generator=g).float()
    k = torch.randint(-12, 13, (2, S, D), generator=g).float()
    v = torch.randn(2, S, Dv, generator=g)
    case = Case(f"T={T}, S={S}, blocks of {block}, large scores (hundreds)", (q, k, v, block), {},
                describe_args(q=q, k=k, v=v, block_size=block))  # fmt: skip
    case.data.update(q=q, k=k, v=v, block=block, mask=None, large=True)
    return case
