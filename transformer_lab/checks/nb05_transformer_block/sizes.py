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

from transformer_lab.checks.engine.core import Case, Runner
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb05_transformer_block.sizes_fit import (
    fit,
    fit_message,
    holds_on_probes,
)
from transformer_lab.checks.registry import Cell, Exercise, register

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
    if mistake.get("untied_head_bias"):
        emb += c["vocab_size"] * C + c["vocab_size"]
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
        "an output layer (an untied unembedding head, V x C weights and V biases) was added: the "
        "course's count stops at the last layer norm (GPT-2 and BERT tie the output to the token "
        "table and reuse it, so it adds nothing)",
        {"untied_head_bias": True},
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
    # every config field the hidden cases vary, visible too: here a model without a token table
    cases += [("no token table", base | dict(vocab_size=0, max_len=10, n_layers=2, n_heads=2,
                                               d_model=10, d_ff=14))]  # fmt: skip
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
            found = [
                m for m in found if holds_on_probes(run, dict(_COUNT_MISTAKES)[m], _count_formula)
            ]
            message = found[0] if len(found) == 1 else None
            if len(found) > 1:  # two slips give this number here: name both, claim neither
                message = "one of these: " + "; or ".join(found)
            off = f"yours is {got:,}, PyTorch's modules of these sizes have {expected:,} ({got - expected:+,})"
            named = message is not None
            if message is None:
                terms = fit(run, reference_count)
                fitted = fit_message(terms) if terms else None
                if fitted is not None:
                    message, named = fitted
            run.fail(f"{message}; {off}" if message else off, case, named=named)
    run.passed()


register(
    Exercise(
        "count_parameters",
        "05_transformer_block",
        "count_parameters(config) -> int",
        cells=(Cell("count_parameters_tests", "count_parameters", 2),),
        check=check_count_parameters,
        against="PyTorch's modules of the same sizes, counted on the meta device",
    )
)
