"""Checks for notebook 5: the block with its residual connections, pre-norm and post-norm.

Student-facing signature:

    encoder_block(x, layer, norm_first, mask=None) -> (B, T, C)
        pre-norm:  x = x + layer.self_attn(n(x), n(x), mask), n = layer.self_attn_norm;
                   x = x + layer.mlp(layer.mlp_norm(x))
        post-norm: x = layer.self_attn_norm(x + layer.self_attn(x, x, mask));
                   x = layer.mlp_norm(x + layer.mlp(x))

``layer`` is a :class:`Sublayers` (see :func:`sublayers_of`, both in sublayers.py): the
sublayers of a ``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` as plain
functions, so the expected output is PyTorch's own layer with the same weights. The decoder block is checked in
``decoder.py`` beside this module, the parameter count in ``sizes.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from transformer_lab import blocks as _ref
from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.fallback import verdict
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.engine.messages import signature_hint as _signature_hint
from transformer_lab.checks.nb05_transformer_block.block_trace import wiring_message
from transformer_lab.checks.nb05_transformer_block.placement import (
    other_placement,
    placement_message,
)
from transformer_lab.checks.nb05_transformer_block.sublayers import (
    Sublayers,
    _torch_layer,
    sublayers_of,
)
from transformer_lab.checks.registry import Cell, Exercise, register

__all__ = ["check_encoder_block"]


ATOL, RTOL = 2e-5, 1e-4


def _forbidden() -> list[Forbidden]:
    items = []
    for name in ("Block", "EncoderBlock", "DecoderBlock"):
        cls = getattr(_ref, name, None)
        if cls is not None:
            items.append(Forbidden(f"transformer_lab's {name}", function=cls.forward))
    codes = {
        nn.TransformerEncoderLayer.forward.__code__,
        nn.TransformerDecoderLayer.forward.__code__,
        nn.TransformerEncoder.forward.__code__,
        nn.TransformerDecoder.forward.__code__,
    }
    items.append(Forbidden("PyTorch's TransformerEncoderLayer/DecoderLayer", codes=codes))
    return items


def _error_hint(signature: str) -> Callable[[BaseException, Case], str]:
    """A hint for an error raised inside the student's block: a sublayer called the wrong way,
    or the student's own signature."""

    def hint(exc: BaseException, case: Case) -> str:
        if "attend()" in str(exc):
            return (
                "call the sublayers as layer.self_attn(query, key_value, mask), "
                "layer.cross_attn(query, key_value, mask), layer.mlp(x) and the norms as norm(x)"
            )
        return _signature_hint(exc, signature)

    return hint


def _shape_hint(got: tuple) -> str:
    return (
        "a block maps (B, T, C) to (B, T, C): the queries come from x, so the output has x's shape"
    )


# ---------------------------------------------------------------------------------------------
# the encoder block: residual connections, pre-norm and post-norm
def _encoder(
    x: Tensor,
    L: Sublayers,
    pre: bool,
    mask: Tensor | None,
    *,
    add_normed=False,
    norm_on_branch=False,
    swap_norms=False,
    one_norm=False,
    attn_residual=True,
    mlp_residual=True,
    parallel=False,
    kv_raw=False,
    use_mask=True,
    extra_norm=False,
) -> Tensor:
    """The encoder block with one deliberate mistake switched on."""
    n1, n2 = (L.mlp_norm, L.self_attn_norm) if swap_norms else (L.self_attn_norm, L.mlp_norm)
    if one_norm:
        n2 = n1
    m = mask if use_mask else None
    start = x
    if pre:
        h = n1(x)
        a = L.self_attn(h, x if kv_raw else h, m)
        x = (h if add_normed else x) + a if attn_residual else a
        h2 = n2(start if parallel else x)
        f = L.mlp(h2)
        x = (h2 if add_normed else x) + f if mlp_residual else f
        return n2(x) if extra_norm else x
    a = L.self_attn(x, x, m)
    if norm_on_branch:
        x = x + n1(a)
        return x + n2(L.mlp(start if parallel else x))
    x = n1(x + a) if attn_residual else n1(a)
    f = L.mlp(start if parallel else x)
    return n2(x + f) if mlp_residual else n2(f)


_ENCODER_MISTAKES: list[tuple[str, dict[str, Any], str]] = [
    # (message, options, placements it applies to: "pre", "post" or "both")
    (
        "the residual adds the normalised x: in pre-norm the skip path carries the block's input "
        "untouched, x = x + self_attn(norm(x), norm(x)), not norm(x) + ...",
        {"add_normed": True},
        "pre",
    ),
    (
        "the norm is on the branch, x = x + norm(self_attn(x)); post-norm normalises the sum: "
        "x = self_attn_norm(x + self_attn(x, x))",
        {"norm_on_branch": True},
        "post",
    ),
    (
        "self_attn_norm and mlp_norm are swapped: the attention uses self_attn_norm, the MLP mlp_norm",
        {"swap_norms": True},
        "both",
    ),
    (
        "self_attn_norm is used for the MLP as well; the MLP has its own norm, layer.mlp_norm",
        {"one_norm": True},
        "both",
    ),
    (
        "there is no residual connection around the attention: add its output to x "
        "(x = x + ... in pre-norm, norm(x + ...) in post-norm)",
        {"attn_residual": False},
        "both",
    ),
    (
        "there is no residual connection around the MLP: add its output to x",
        {"mlp_residual": False},
        "both",
    ),
    (
        "the MLP reads the block's input instead of the stream after the attention's residual "
        "(that is the 'parallel' block of GPT-J); here the MLP comes after the attention",
        {"parallel": True},
        "both",
    ),
    (
        "only the queries are normalised: keys and values come from x; in pre-norm all three come "
        "from h = self_attn_norm(x): self_attn(h, h, mask)",
        {"kv_raw": True},
        "pre",
    ),
    (
        "the mask is not passed to the attention: self_attn(h, h, mask)",
        {"use_mask": False},
        "both",
    ),
    (
        "there is a norm after the block: a pre-norm block ends with the residual sum; the final "
        "norm belongs once at the end of the whole stack, not in every block",
        {"extra_norm": True},
        "pre",
    ),
]


def _encoder_mistakes(x: Tensor, L: Sublayers, pre: bool, mask: Tensor | None) -> list[Mistake]:
    want = "pre" if pre else "post"
    out = [Mistake(other_placement(pre), lambda: _encoder(x, L, not pre, mask))]
    for message, options, where in _ENCODER_MISTAKES:
        if where in (want, "both"):
            out.append(Mistake(message, lambda o=options: _encoder(x, L, pre, mask, **o)))
    return out


def _block_cases(
    hidden: bool, decoder: bool
) -> list[tuple[str, int, int, int, int, int, bool, bool]]:
    """(name, B, T, S, C, H, norm_first, masked)."""
    # The decoder's first case has S = T: slips that mix up x and memory then give a wrong
    # output (which can be named) rather than a shape error.
    cases = [("pre-norm, S = T", 2, 4, 4, 8, 2, True, True)] if decoder else []
    cases += [
        ("pre-norm", 2, 5, 4, 8, 2, True, False),
        ("post-norm", 2, 5, 4, 8, 2, False, False),
        ("pre-norm, padding mask", 2, 6, 5, 8, 2, True, True),
        ("post-norm, padding mask", 2, 6, 5, 8, 2, False, True),
        ("pre-norm, 4 heads, padding mask", 2, 3, 4, 12, 4, True, True),  # as the hidden cases
    ]
    if hidden:
        cases += [
            ("pre-norm, 4 heads", 3, 7, 3, 16, 4, True, True),
            ("post-norm, 4 heads", 3, 7, 9, 16, 4, False, True),
            ("post-norm, one token", 1, 1, 2, 12, 3, False, False),
        ]
    return cases


def _padding(B: int, S: int, g: torch.Generator) -> Tensor:
    """(B, 1, 1, S) bool: a random number of real keys (at least one) per sequence."""
    lengths = torch.randint(1, S + 1, (B,), generator=g)
    lengths[0] = max(1, S - 2)
    return (torch.arange(S)[None, :] < lengths[:, None])[:, None, None, :]


def check_encoder_block(encoder_block, hidden: bool = False) -> None:
    """Check ``encoder_block(x, layer, norm_first, mask=None)`` against
    ``torch.nn.TransformerEncoderLayer`` (same weights), for pre-norm and post-norm."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    run = Runner(
        "check_encoder_block",
        encoder_block,
        _forbidden(),
        hidden,
        _error_hint("encoder_block(x, layer, norm_first, mask=None)"),
    )
    g = generator(9515 if hidden else 515)
    for name, B, T, _S, C, H, pre, masked in _block_cases(hidden, decoder=False):
        torch_layer = _torch_layer(C, H, 4 * C, pre, False, g)
        L = sublayers_of(torch_layer)
        x = torch.randn(B, T, C, generator=g)
        mask = _padding(B, T, g) if masked else None
        pad = None if mask is None else ~mask[:, 0, 0, :]  # PyTorch: True = padding
        with torch.enable_grad():  # gradients on: PyTorch's inference fast path stays out of it
            expected = torch_layer(x, src_key_padding_mask=pad).detach()
        kwargs = {"norm_first": pre} | ({} if mask is None else {"mask": mask})
        case = Case(name, (x, L), kwargs, describe_args(x=x, norm_first=pre, mask=mask))
        with torch.no_grad():
            value = run.call(case)
        out = run.expect_tensor(value, case, expected.shape, expected.dtype, shape_hint=_shape_hint)
        if not run.close(out, expected, ATOL, RTOL):
            with torch.no_grad():
                message = run.diagnose(out, _encoder_mistakes(x, L, pre, mask), ATOL, RTOL)
            if message == other_placement(pre):
                block = lambda p: _encoder(x, L, p, mask)  # noqa: E731
                message = placement_message(run, case, pre, block, ATOL, RTOL)
            message = message or wiring_message(
                run, case, 1, lambda T: _encoder(x, T, pre, mask), [(x, "x")], {"mask": mask}
            )
            message, named = verdict(message, out, expected, dims={"C": C}, atol=ATOL)
            run.fail(message, case, named=named)
    run.passed()


register(
    Exercise(
        "encoder_block",
        "05_transformer_block",
        "encoder_block(x, layer, norm_first, mask=None) -> (B, T, C)",
        cells=(Cell("encoder_block_tests", "encoder_block", 2),),
        check=check_encoder_block,
        against="torch.nn.TransformerEncoderLayer",
    )
)
