"""Checks for notebook 5: counting a model's parameters from its configuration.

Student-facing signature:

    count_parameters(config) -> int
        token, position and segment tables, n_layers blocks (with cross-attention if asked) and
        one extra layer norm; config is a dict (keys in CONFIG_KEYS)

The reference counts PyTorch's own modules of the same sizes, built on the meta device.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from transformer_lab.checks._core import Case, Runner
from transformer_lab.checks._integrity import TRUSTED

__all__ = ["check_count_parameters", "reference_count"]


CONFIG_KEYS = (
    "vocab_size",
    "max_len",
    "n_segments",
    "n_layers",
    "n_heads",
    "d_model",
    "d_ff",
    "cross_attention",
)


def _count_module(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def reference_count(config: dict) -> int:
    """Parameters of embeddings + blocks + one extra layer norm, counted on PyTorch's modules
    (built on the meta device: no memory, any size)."""
    V, L, G = config["vocab_size"], config["max_len"], config["n_segments"]
    C, H, F_, N = config["d_model"], config["n_heads"], config["d_ff"], config["n_layers"]
    kind = nn.TransformerDecoderLayer if config["cross_attention"] else nn.TransformerEncoderLayer
    with torch.device("meta"):
        block = kind(C, H, F_, batch_first=True)
        norm = nn.LayerNorm(C)
    return (V + L + G) * C + _count_module(norm) + N * _count_module(block)


def _count_formula(c: dict, **mistake: Any) -> int:
    """The count with one deliberate mistake (the options say which)."""
    C, F_, N, H = c["d_model"], c["d_ff"], c["n_layers"], c["n_heads"]
    bias = not mistake.get("no_bias", False)
    norm = 0 if mistake.get("no_norms") else (C if mistake.get("gain_only") or not bias else 2 * C)
    n_proj = 3 if mistake.get("no_w_o") else 4
    if mistake.get("per_head"):
        attn = H * n_proj * (C * C + (C if bias else 0))
    else:
        attn = n_proj * (C * C + (C if bias else 0))
    if mistake.get("d_ff_4c"):
        F_ = 4 * C
    mlp = C * F_ + (F_ if bias else 0)
    if not mistake.get("one_mlp_matrix"):
        mlp += F_ * C + (C if bias else 0)
    block = attn + mlp + 2 * norm
    if c["cross_attention"] and not mistake.get("no_cross"):
        block += attn + (0 if mistake.get("no_cross_norm") else norm)
    layers = N + mistake.get("layers_off", 0)
    if mistake.get("one_block"):
        layers = 1
    emb = c["vocab_size"] * C
    if not mistake.get("no_positions"):
        emb += c["max_len"] * C
    if not mistake.get("no_segments"):
        emb += c["n_segments"] * C
    if mistake.get("untied_head"):
        emb += c["vocab_size"] * C
    extra = 0 if mistake.get("no_final_norm") else norm
    return emb + layers * block + extra


_COUNT_MISTAKES: list[tuple[str, dict[str, Any]]] = [
    (
        "the biases are missing: every linear layer has one (C for W_q, W_k, W_v, W_o and W_2, "
        "d_ff for W_1), and every layer norm a bias of C",
        {"no_bias": True},
    ),
    (
        "the layer norms are missing: each has a gain and a bias of C (two per block, three with "
        "cross-attention, plus one outside the blocks)",
        {"no_norms": True},
    ),
    ("each layer norm has a gain AND a bias: 2C parameters, not C", {"gain_only": True}),
    (
        "W_o is missing: attention has four C x C projections (W_q, W_k, W_v and the output W_o), "
        "each with a bias",
        {"no_w_o": True},
    ),
    (
        "attention was counted once per head: the H heads split the C columns of W_q, W_k, W_v, "
        "so the projections are C x C in total whatever H is",
        {"per_head": True},
    ),
    ("the MLP's hidden width is config['d_ff'], not always 4C", {"d_ff_4c": True}),
    (
        "the MLP has two matrices: W_1 (C x d_ff, bias d_ff) and W_2 (d_ff x C, bias C)",
        {"one_mlp_matrix": True},
    ),
    ("the position table (max_len x C) is missing", {"no_positions": True}),
    ("the segment table (n_segments x C) is missing", {"no_segments": True}),
    (
        "the layer norm outside the blocks is missing (BERT's after the embeddings, GPT-2's and "
        "ViT's final norm): 2C",
        {"no_final_norm": True},
    ),
    (
        "an output head of V x C was added: the course's count stops at the last layer norm (GPT-2 "
        "and BERT reuse the token table for their output, so it adds nothing)",
        {"untied_head": True},
    ),
    (
        "cross_attention=True: each block has a cross-attention (another four C x C projections "
        "with biases) and its own layer norm",
        {"no_cross": True},
    ),
    ("the cross-attention's own layer norm (2C per block) is missing", {"no_cross_norm": True}),
    ("one block too few: there are n_layers blocks", {"layers_off": -1}),
    ("one block too many: there are n_layers blocks", {"layers_off": 1}),
    ("only one block was counted: multiply by n_layers", {"one_block": True}),
]


def _count_cases(hidden: bool) -> list[tuple[str, dict]]:
    base = dict(n_segments=0, cross_attention=False)
    cases = [
        (
            "a small BERT with three segment types",
            dict(
                vocab_size=101,
                max_len=17,
                n_segments=3,
                n_layers=3,
                n_heads=2,
                d_model=12,
                d_ff=40,
                cross_attention=False,
            ),
        ),
        (
            "a small GPT",
            base | dict(vocab_size=53, max_len=29, n_layers=2, n_heads=4, d_model=16, d_ff=64),
        ),
        (
            "a decoder with cross-attention",
            base
            | dict(
                vocab_size=37,
                max_len=11,
                n_layers=2,
                n_heads=2,
                d_model=8,
                d_ff=24,
                cross_attention=True,
            ),
        ),
        (
            "BERT-base",
            dict(
                vocab_size=30522,
                max_len=512,
                n_segments=2,
                n_layers=12,
                n_heads=12,
                d_model=768,
                d_ff=3072,
                cross_attention=False,
            ),
        ),
    ]
    if hidden:
        cases += [
            (
                "GPT-2 small",
                base
                | dict(
                    vocab_size=50257, max_len=1024, n_layers=12, n_heads=12, d_model=768, d_ff=3072
                ),
            ),
            (
                "no token table (ViT-like)",
                base | dict(vocab_size=0, max_len=65, n_layers=4, n_heads=4, d_model=20, d_ff=36),
            ),
            (
                "one layer, cross-attention",
                dict(
                    vocab_size=7,
                    max_len=5,
                    n_segments=3,
                    n_layers=1,
                    n_heads=1,
                    d_model=6,
                    d_ff=10,
                    cross_attention=True,
                ),
            ),
        ]
    return cases


# ---------------------------------------------------------------------------------------------
# generic evidence: how the student's count depends on the configuration
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
    "max_len*C": lambda c, N, C, F, H, X: c["max_len"] * C,
    "n_segments*C": lambda c, N, C, F, H, X: c["n_segments"] * C,
    "1": lambda c, N, C, F, H, X: 1,
}


def _probe_configs() -> list[dict]:
    g = torch.Generator().manual_seed(1234)
    r = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=g))  # noqa: E731
    configs = []
    for i in range(48):
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


def _fit(run: Runner) -> dict[str, int] | None:
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


def _fit_message(terms: dict[str, int]) -> tuple[str, bool] | None:
    for pattern, message in _PATTERNS:
        if terms == pattern:
            return message, True
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
        k: v for k, v in terms.items() if not k.startswith(("once ", "V*", "max_len", "n_seg", "1"))
    }
    once = {k: v for k, v in terms.items() if k not in per_block}
    parts = []
    if per_block:
        parts.append(f"{_poly(per_block)} per block")
    if once:
        parts.append(f"{_poly(once)} once (outside the blocks)")
    return "your count is off by " + " and ".join(parts) + " (C = d_model)", False


def check_count_parameters(count_parameters, hidden: bool = False) -> None:
    """Check ``count_parameters(config) -> int`` against PyTorch modules of the same sizes."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_count_parameters",
        count_parameters,
        (),
        hidden,
        lambda e, c: (
            "the config is a dict: read config['d_model'], config['n_layers'], ..."
            if isinstance(e, (KeyError, TypeError, AttributeError))
            else ""
        ),
    )
    for name, config in _count_cases(hidden):
        case = Case(name, (dict(config),), {}, ", ".join(f"{k}={v}" for k, v in config.items()))
        expected = reference_count(config)
        got = run.call(case)
        if TRUSTED.is_tensor(got) or isinstance(got, float) or not isinstance(got, int):
            kind = type(got).__name__
            run.fail(
                f"return a Python int (e.g. int(total)), but your function returned {kind}.", case
            )
        if isinstance(got, bool):
            run.fail("return the number of parameters as an int, not a bool.", case)
        if got != expected:
            found = [msg for msg, opts in _COUNT_MISTAKES if _count_formula(config, **opts) == got]
            message = found[0] if len(found) == 1 else None
            if len(found) > 1:  # two slips give this number here: name both, claim neither
                message = "one of these: " + "; or ".join(found)
            off = f"yours is {got:,}, PyTorch's modules of these sizes have {expected:,} ({got - expected:+,})"
            named = message is not None
            if message is None:
                terms = _fit(run)
                fitted = _fit_message(terms) if terms else None
                if fitted is not None:
                    message, named = fitted
            run.fail(f"{message}; {off}" if message else off, case, named=named)
    run.passed()
