"""Evidence for notebook 5's parameter count: how the student's count depends on the config.

The student's error (yours - PyTorch's) is fitted, over many probe configurations, as an integer
combination of terms (per block: C^2, C, C*d_ff, d_ff, ...; once: the tables, C ...). The fit
says which part of the count is off and by how much, for mistakes nobody listed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from transformer_lab.checks.engine.core import Runner

__all__ = ["fit", "fit_message", "holds_on_probes"]


# Each feature is a function of the config; the student's error (yours - PyTorch's) is fitted as
# an integer combination of them over many probe configurations, which says *which* part of the
# count is off and by how much, for mistakes nobody listed.
_FEATURES: dict[str, Any] = {
    # per block (times n_layers)
    "C^2": lambda c, N, C, F, H, X: N * C * C,
    "C": lambda c, N, C, F, H, X: N * C,
    "C*d_ff": lambda c, N, C, F, H, X: N * C * F,
    "d_ff": lambda c, N, C, F, H, X: N * F,
    "H*C^2": lambda c, N, C, F, H, X: N * H * C * C,
    "H*C": lambda c, N, C, F, H, X: N * H * C,
    "C^2/H": lambda c, N, C, F, H, X: N * C * C // H,
    "cross C^2/H": lambda c, N, C, F, H, X: N * X * C * C // H,
    "cross C^2": lambda c, N, C, F, H, X: N * X * C * C,
    "cross C": lambda c, N, C, F, H, X: N * X * C,
    "cross C*d_ff": lambda c, N, C, F, H, X: N * X * C * F,
    "cross d_ff": lambda c, N, C, F, H, X: N * X * F,
    # once
    "once C^2": lambda c, N, C, F, H, X: C * C,
    "once C": lambda c, N, C, F, H, X: C,
    "once C*d_ff": lambda c, N, C, F, H, X: C * F,
    "once d_ff": lambda c, N, C, F, H, X: F,
    "V*C": lambda c, N, C, F, H, X: c["vocab_size"] * C,
    "V": lambda c, N, C, F, H, X: c["vocab_size"],
    "max_len*C": lambda c, N, C, F, H, X: c["max_len"] * C,
    "n_segments*C": lambda c, N, C, F, H, X: c["n_segments"] * C,
    "1": lambda c, N, C, F, H, X: 1,
    # the tables counted in every block
    "n_layers*V*C": lambda c, N, C, F, H, X: N * c["vocab_size"] * C,
    "n_layers*max_len*C": lambda c, N, C, F, H, X: N * c["max_len"] * C,
    "n_layers*n_segments*C": lambda c, N, C, F, H, X: N * c["n_segments"] * C,
}


def _probe_configs() -> list[dict]:
    g = torch.Generator().manual_seed(1234)
    r = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=g))  # noqa: E731
    configs = []
    for i in range(64):
        H = (1, 2, 4)[r(0, 2)]
        configs.append(
            dict(
                vocab_size=r(0, 90),
                max_len=r(1, 60),
                n_segments=r(0, 4),
                n_layers=r(1, 6),
                n_heads=H,
                d_model=H * r(1, 7),
                d_ff=r(2, 70),
                cross_attention=bool(i % 2),
            )
        )
    return configs


def fit(run: Runner, reference_count: Callable[[dict], int]) -> dict[str, int] | None:
    """{feature: integer coefficient} of (student - reference) over the probes, if exact."""
    rows, diffs = [], []
    for config in _probe_configs():
        got, error, calls = run.attempt((dict(config),), {})
        if error is not None or calls or isinstance(got, bool) or not isinstance(got, int):
            return None
        args = (
            config,
            config["n_layers"],
            config["d_model"],
            config["d_ff"],
            config["n_heads"],
            int(config["cross_attention"]),
        )
        rows.append([float(f(*args)) for f in _FEATURES.values()])
        diffs.append(float(got - reference_count(config)))
    A, y = torch.tensor(rows, dtype=torch.float64), torch.tensor(diffs, dtype=torch.float64)
    coef = torch.linalg.lstsq(A, y[:, None]).solution[:, 0].round()
    if not torch.equal(A @ coef, y):
        return None
    return {name: int(k) for name, k in zip(_FEATURES, coef.tolist()) if k != 0}


def holds_on_probes(run: Runner, options: dict, count: Callable[..., int]) -> bool:
    """Does the catalogue's ``count(config, **options)`` equal the student's on every probe? (One
    number can match a wrong mistake by coincidence: n_layers * C = n_segments * C.)"""
    for config in _probe_configs()[:16]:
        got, error, calls = run.attempt((dict(config),), {})
        if error is not None or calls or got != count(config, **options):
            return False
    return True


def _poly(terms: dict[str, int]) -> str:
    """{"C^2": 4, "C": -2, "d_ff": 1} -> "4 C^2 - 2 C + d_ff"."""
    text = ""
    for name, k in terms.items():
        base = name.replace("cross ", "").replace("once ", "")
        size = str(abs(k)) if base == "1" else (base if abs(k) == 1 else f"{abs(k)} {base}")
        if not text:
            text = ("-" if k < 0 else "") + size
        else:
            text += (" - " if k < 0 else " + ") + size
    return text or "0"


_PATTERNS: list[tuple[dict[str, int], str]] = [
    (
        {"C": -4},
        "each block is 4C short: the attention's four biases (W_q, W_k, W_v and W_o have a bias "
        "of C each), or two of its layer norms (gain and bias, 2C each)",
    ),
    (
        {"C": -4, "cross C": -4},
        "every attention is 4C short: its four biases (W_q, W_k, W_v and W_o have a bias of C "
        "each) are missing",
    ),
    (
        {"C": -2},
        "each block is 2C short: one layer norm (a gain and a bias of C each); an encoder block "
        "has two norms, a decoder block three",
    ),
    (
        {"C": -1},
        "each block is C short: a bias of C is missing, the MLP's second bias b_2 (C) or one "
        "layer norm's bias (a norm has a gain and a bias, 2C)",
    ),
    ({"C": -1, "d_ff": -1}, "the MLP's biases are missing: b_1 (d_ff) and b_2 (C) in every block"),
    ({"d_ff": -1}, "the MLP's first bias b_1 (d_ff per block) is missing"),
    ({"C": 1, "d_ff": -1}, "b_1 has d_ff entries (one per hidden unit), not C"),
    ({"C": -1, "d_ff": 1}, "b_2 has C entries (one per output feature of the MLP), not d_ff"),
    (
        {"C": 2, "once C": -2},
        "the extra layer norm is counted in every block: it appears once, outside the n_layers "
        "blocks (BERT's after the embeddings, GPT-2's at the end)",
    ),
    (
        {"C^2": -1, "C": -1},
        "one C x C projection with its bias is missing per block: attention has four, W_q, W_k, "
        "W_v and the output W_o",
    ),
]


def fit_message(terms: dict[str, int]) -> tuple[str, bool] | None:
    for pattern, message in _PATTERNS:
        if terms == pattern:
            return message, True
    heads = {k: v for k, v in terms.items() if "H" in k}
    if heads:  # the true count does not depend on n_heads
        share = terms.get("C^2/H", 0)
        if share > 0 and terms.get("C^2", 0) == -share:
            what = f"{share} projections counted as C x C/H each, one head's share"
            return (
                f"your count changes with n_heads ({what}): the heads split the C columns of each "
                "projection among themselves, so W_q, W_k, W_v and W_o are C x C whatever n_heads",
                True,
            )
        return (
            "your count changes with n_heads, but the number of heads does not appear in it: the "
            "heads split the C columns of each projection, which stays C x C",
            True,
        )
    if terms.get("V*C", 0) > 0 and set(terms) <= {"V*C", "V", "once C"}:
        head = _poly({k: v for k, v in terms.items() if k != "once C"})
        extra = terms.get("once C", 0)
        more = "too many" if extra > 0 else "too few"
        rest = f"; besides, {abs(extra)} C {more} outside the blocks" if extra else ""
        return (
            f"your count has an output layer (an untied unembedding head, {head}): the course's "
            f"count stops at the last layer norm; GPT-2 and BERT tie the output to the token "
            f"table and reuse it, so it adds nothing{rest}",
            True,
        )
    tables = ("V*C", "max_len*C", "n_segments*C")
    if all(terms.get(f"n_layers*{t}", 0) == -terms.get(t, 0) for t in tables) and any(
        terms.get(f"n_layers*{t}") for t in tables
    ):
        return (
            "the embedding tables are counted once per block: they appear once, outside the "
            "n_layers blocks",
            True,
        )
    if terms in ({"once C": -1}, {"once C": 1}):
        more = "too many" if terms["once C"] > 0 else "too few"
        return (
            f"one vector of C {more} outside the blocks: a table with one row {more} (max_len, "
            "vocab_size or n_segments rows of C), or the extra layer norm counted as C instead "
            "of 2C (gain and bias)",
            True,
        )
    cross = {k: v for k, v in terms.items() if k.startswith("cross ")}
    if cross and len(cross) == len(terms):
        need = {"cross C^2": 4, "cross C": 6}
        yours = {k: need.get(k, 0) + cross.get(k, 0) for k in {*need, *cross}}
        yours = {k: yours[k] for k in sorted(yours, key=list(_FEATURES).index) if yours[k]}
        return (
            "with cross_attention=True each block gains a cross-attention (four C x C projections "
            f"with biases: 4 C^2 + 4 C) and its layer norm (2 C), 4 C^2 + 6 C in all; yours adds "
            f"{_poly(yours)} per block",
            True,
        )
    per_block = {
        k: v
        for k, v in terms.items()
        if not k.startswith(("once ", "V", "max_len", "n_seg", "1", "n_layers*"))
    }
    once = {k: v for k, v in terms.items() if k not in per_block}
    parts = []
    if per_block:
        parts.append(f"{_poly(per_block)} per block")
    if once:
        parts.append(f"{_poly(once)} once (outside the blocks)")
    return "your count is off by " + " and ".join(parts) + " (C = d_model)", False
