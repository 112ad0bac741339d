"""Checks for notebook 5: the decoder block.

Student-facing signature:

    decoder_block(x, memory, layer, norm_first, memory_mask=None) -> (B, T, C)
        causal self-attention, cross-attention to memory (with memory_mask), MLP; each with its
        residual connection, pre-norm or post-norm

``layer`` is a :class:`~transformer_lab.checks.nb05_transformer_block.sublayers.Sublayers` of a
``torch.nn.TransformerDecoderLayer``; the expected output is that layer's, same weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.nb05_transformer_block.block_trace import wiring_message
from transformer_lab.checks.nb05_transformer_block.placement import (
    other_placement,
    placement_message,
)
from transformer_lab.checks.nb05_transformer_block.residual import (
    ATOL,
    RTOL,
    _block_cases,
    _error_hint,
    _forbidden,
    _padding,
    _shape_hint,
)
from transformer_lab.checks.nb05_transformer_block.sublayers import (
    Sublayers,
    _torch_layer,
    sublayers_of,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_decoder_block"]


def _causal(T: int) -> Tensor:
    return torch.ones(T, T, dtype=torch.bool).tril()


def _decoder(
    x: Tensor,
    memory: Tensor,
    L: Sublayers,
    pre: bool,
    memory_mask: Tensor | None,
    *,
    causal: Tensor | None | str = "causal",
    norm_memory=False,
    cross=True,
    cross_residual=True,
    use_memory_mask=True,
    mlp_first=False,
    self_on_memory=False,
    causal_cross=False,
    mask_swap=False,
    swap_cross=False,
    norms=(0, 1, 2),
) -> Tensor:
    """The decoder block with one deliberate mistake switched on."""
    T = x.shape[1]
    self_mask = _causal(T) if isinstance(causal, str) else causal
    mm = memory_mask if use_memory_mask else None
    if causal_cross == "instead" or (causal_cross and mm is None):
        mm = _causal(T)
    elif causal_cross:
        mm = mm & _causal(T)
    if mask_swap:
        self_mask, mm = memory_mask, self_mask
    all_norms = (L.self_attn_norm, L.cross_attn_norm, L.mlp_norm)
    n_self, n_cross, n_mlp = (all_norms[i] for i in norms)

    def self_part(x: Tensor) -> Tensor:
        h = n_self(x) if pre else x
        kv = memory if self_on_memory else h
        a = L.self_attn(h, kv, self_mask)
        return x + a if pre else n_self(x + a)

    def cross_part(x: Tensor) -> Tensor:
        if not cross:
            return x
        h = n_cross(x) if pre else x
        mem = n_cross(memory) if norm_memory else memory
        a = L.cross_attn(mem, h, mm) if swap_cross else L.cross_attn(h, mem, mm)
        if not cross_residual:
            return a if pre else n_cross(a)
        return x + a if pre else n_cross(x + a)

    def mlp_part(x: Tensor) -> Tensor:
        f = L.mlp(n_mlp(x) if pre else x)
        return x + f if pre else n_mlp(x + f)

    x = self_part(x)
    if mlp_first:
        return cross_part(mlp_part(x))
    return mlp_part(cross_part(x))


_DECODER_MISTAKES: list[tuple[str, dict[str, Any], bool]] = [
    # (message, options, needs a memory mask to show)
    (
        "the self-attention is not causal: pass causal_mask(T) (True on and below the diagonal) so "
        "no position sees later ones",
        {"causal": None},
        False,
    ),
    (
        "the causal mask's polarity is reversed: True = may attend, i.e. the lower triangle",
        {"causal": "reversed"},
        False,
    ),
    (
        "the causal mask excludes the diagonal: every position may attend to itself (tril with "
        "diagonal=0)",
        {"causal": "no diagonal"},
        False,
    ),
    (
        "the memory is normalised with cross_attn_norm: only the decoder's stream is normalised; "
        "the encoder's output goes into cross_attn as it is (the encoder already normalised it)",
        {"norm_memory": True},
        False,
    ),
    (
        "the cross-attention is missing: after the masked self-attention, attend to the encoder's "
        "output with layer.cross_attn(h, memory, memory_mask)",
        {"cross": False},
        False,
    ),
    (
        "there is no residual connection around the cross-attention: add its output to x",
        {"cross_residual": False},
        False,
    ),
    ("memory_mask is not passed to the cross-attention", {"use_memory_mask": False}, True),
    (
        "the MLP comes before the cross-attention; the order is self-attention, cross-attention, MLP",
        {"mlp_first": True},
        False,
    ),
    (
        "the self-attention attends to the memory; its keys and values come from the decoder's own "
        "stream (the memory is for cross_attn)",
        {"self_on_memory": True},
        False,
    ),
    (
        "the cross-attention is causal too: the whole source is known, so only memory_mask (the "
        "source's padding) applies to it",
        {"causal_cross": True},
        False,
    ),
    (
        "the cross-attention gets the causal mask instead of memory_mask: the whole source is "
        "known, so only memory_mask (the source's padding) applies to it",
        {"causal_cross": "instead"},
        True,
    ),
    (
        "the cross-attention's queries come from memory and its keys and values from x; the "
        "decoder asks (queries from its stream x), the memory answers: cross_attn(h, memory, "
        "memory_mask)",
        {"swap_cross": True},
        False,
    ),
    (
        "the masks are swapped: the causal mask goes to self_attn, memory_mask to cross_attn",
        {"mask_swap": True},
        True,
    ),
    (
        "the norms are mixed up: self_attn_norm before self_attn, cross_attn_norm before "
        "cross_attn, mlp_norm before the MLP",
        {"norms": (1, 0, 2)},
        False,
    ),
    (
        "the norms are mixed up: self_attn_norm before self_attn, cross_attn_norm before "
        "cross_attn, mlp_norm before the MLP",
        {"norms": (0, 2, 1)},
        False,
    ),
    (
        "the norms are mixed up: self_attn_norm before self_attn, cross_attn_norm before "
        "cross_attn, mlp_norm before the MLP",
        {"norms": (0, 0, 0)},
        False,
    ),
]


def _decoder_mistakes(x, memory, L, pre, memory_mask) -> list[Mistake]:
    T = x.shape[1]
    causal_variants = {"reversed": ~_causal(T), "no diagonal": _causal(T).tril(-1)}
    out = [Mistake(other_placement(pre), lambda: _decoder(x, memory, L, not pre, memory_mask))]
    for message, options, needs_mask in _DECODER_MISTAKES:
        if needs_mask and memory_mask is None:
            continue
        opts = dict(options)
        if opts.get("causal") in causal_variants:
            opts["causal"] = causal_variants[opts["causal"]]
        out.append(Mistake(message, lambda o=opts: _decoder(x, memory, L, pre, memory_mask, **o)))
    return out


def _decoder_shape_hint(S: int, T: int) -> Callable[[tuple], str | None]:
    def hint(got: tuple) -> str | None:
        if len(got) == 3 and got[1] == S != T:
            return (
                "your output has the memory's length S: in cross-attention the queries come from "
                "the decoder's stream x (T positions), keys and values from memory"
            )
        return _shape_hint(got)

    return hint


def check_decoder_block(decoder_block, hidden: bool = False) -> None:
    """Check ``decoder_block(x, memory, layer, norm_first, memory_mask=None)`` against
    ``torch.nn.TransformerDecoderLayer`` (same weights, causal target mask)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_decoder_block",
        decoder_block,
        _forbidden(),
        hidden,
        _error_hint("decoder_block(x, memory, layer, norm_first, memory_mask=None)"),
    )
    g = generator(9525 if hidden else 525)
    for name, B, T, S, C, H, pre, masked in _block_cases(hidden, decoder=True):
        torch_layer = _torch_layer(C, H, 4 * C, pre, True, g)
        L = sublayers_of(torch_layer)
        x, memory = torch.randn(B, T, C, generator=g), torch.randn(B, S, C, generator=g)
        mask = _padding(B, S, g) if masked else None
        with torch.enable_grad():
            expected = torch_layer(
                x,
                memory,
                tgt_mask=~_causal(T),  # PyTorch: True = may NOT attend
                memory_key_padding_mask=None if mask is None else ~mask[:, 0, 0, :],
            ).detach()
        kwargs = {"norm_first": pre} | ({} if mask is None else {"memory_mask": mask})
        case = Case(
            name, (x, memory, L), kwargs, describe_args(x=x, memory=memory, memory_mask=mask)
        )
        with torch.no_grad():
            value = run.call(case)
        out = run.expect_tensor(
            value, case, expected.shape, expected.dtype, shape_hint=_decoder_shape_hint(S, T)
        )
        if not run.close(out, expected, ATOL, RTOL):
            with torch.no_grad():
                mistakes = _decoder_mistakes(x, memory, L, pre, mask)
                message = run.diagnose(out, mistakes, ATOL, RTOL)
            if message == other_placement(pre):
                block = lambda p: _decoder(x, memory, L, p, mask)  # noqa: E731
                message = placement_message(run, case, pre, block, ATOL, RTOL)
            message = message or wiring_message(
                run,
                case,
                2,
                lambda T_: _decoder(x, memory, T_, pre, mask),
                [(x, "x"), (memory, "memory")],
                {"causal_mask(T)": _causal(T), "memory_mask": mask},
            )
            message, named = verdict(message, out, expected, dims={"C": C}, atol=ATOL)
            run.fail(message, case, named=named)
    run.passed()


register(
    Exercise(
        "decoder_block",
        "05_transformer_block",
        "decoder_block(x, memory, layer, norm_first, memory_mask=None) -> (B, T, C)",
        cells=(Cell("decoder_block_tests", "decoder_block", 2),),
        check=check_decoder_block,
        against="torch.nn.TransformerDecoderLayer",
    )
)
