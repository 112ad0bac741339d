"""A block that computes the other norm placement: does it read ``norm_first`` the other way
round (both placements swapped), or ignore it (one placement for both values)? Rerunning the
student's block with the flag flipped tells the two apart."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Runner

__all__ = ["other_placement", "placement_message"]

_FORMULA = {True: "x = x + sublayer(norm(x))", False: "x = norm(x + sublayer(x))"}
_NAME = {True: "pre-norm", False: "post-norm"}


def other_placement(pre: bool) -> str:
    """The verdict for a block that computes the other placement on one case."""
    how = "norm before each sublayer" if not pre else "norm after each residual sum"
    return (
        f"your block computes {_NAME[not pre]} ({how}), but norm_first={pre} asks for "
        f"{_NAME[pre]}: {_FORMULA[pre]}"
    )


def placement_message(
    run: Runner, case: Case, pre: bool, block: Callable[[bool], Tensor], atol: float, rtol: float
) -> str:
    """The verdict for a block whose output on ``case`` (norm_first=``pre``) is the other
    placement's; ``block(p)`` is the right output for norm_first=p on the case's inputs."""
    args = tuple(a.clone() if isinstance(a, Tensor) else a for a in case.args)
    with torch.no_grad():
        got, error, calls = run.attempt(args, {**case.kwargs, "norm_first": not pre})
        if error is None and not calls and isinstance(got, Tensor):
            if run.matches(got, block(pre), atol, rtol):
                return (
                    f"your block computes {_NAME[not pre]} for norm_first={pre} and {_NAME[pre]} "
                    f"for norm_first={not pre}: the two placements are swapped (the other way "
                    f"round); norm_first=True asks for pre-norm, {_FORMULA[True]}, and "
                    f"norm_first=False for post-norm, {_FORMULA[False]}"
                )
            if run.matches(got, block(not pre), atol, rtol):
                return (
                    f"your block computes {_NAME[not pre]} whatever norm_first says: "
                    f"norm_first={pre} asks for {_NAME[pre]}, {_FORMULA[pre]} (read the "
                    f"norm_first argument)"
                )
    return other_placement(pre)
