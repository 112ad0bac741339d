"""Checks for notebook 5: the block (residuals, pre- and post-norm), the decoder block, and
counting parameters.

Student-facing signatures:

    encoder_block(x, layer, norm_first, mask=None) -> (B, T, C)
        pre-norm:  x = x + layer.self_attn(n(x), n(x), mask), n = layer.self_attn_norm;
                   x = x + layer.mlp(layer.mlp_norm(x))
        post-norm: x = layer.self_attn_norm(x + layer.self_attn(x, x, mask));
                   x = layer.mlp_norm(x + layer.mlp(x))
    decoder_block(x, memory, layer, norm_first, memory_mask=None) -> (B, T, C)
        causal self-attention, cross-attention to memory (with memory_mask), MLP
    count_parameters(config) -> int

``layer`` is a :class:`Sublayers` (see :func:`sublayers_of`): the sublayers of a
``torch.nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` as plain functions, so the
expected output is PyTorch's own layer with the same weights.
(This module is longer than 300 lines because each exercise keeps its catalogue of mistakes
next to its check.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from transformer_lab import blocks as _ref
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._integrity import TRUSTED, Forbidden
from transformer_lab.checks.attention import _signature_hint

__all__ = [
    "Sublayers",
    "sublayers_of",
    "check_encoder_block",
    "check_decoder_block",
    "check_count_parameters",
]

ATOL, RTOL = 2e-5, 1e-4


@dataclass(frozen=True)
class Sublayers:
    """The parts of one block, as functions of tensors (names as in ``transformer_lab.blocks.Block``).

    ``self_attn(query, key_value, mask=None)`` and ``cross_attn(query, key_value, mask=None)``:
    multi-head attention with its own projections, (B, T, C) and (B, S, C) -> (B, T, C); the
    mask is boolean, True = may attend, broadcastable to (B, H, T, S). ``mlp(x)``: the
    position-wise MLP. ``self_attn_norm``, ``cross_attn_norm``, ``mlp_norm``: layer norms.
    """

    self_attn: Callable[..., Tensor]
    self_attn_norm: Callable[[Tensor], Tensor]
    mlp: Callable[[Tensor], Tensor]
    mlp_norm: Callable[[Tensor], Tensor]
    cross_attn: Callable[..., Tensor] | None = None
    cross_attn_norm: Callable[[Tensor], Tensor] | None = None


def _attention_fn(mha: nn.MultiheadAttention) -> Callable[..., Tensor]:
    def attend(query: Tensor, key_value: Tensor, mask: Tensor | None = None) -> Tensor:
        B, T, S, H = query.shape[0], query.shape[1], key_value.shape[1], mha.num_heads
        blocked = None
        if mask is not None:
            if mask.dtype != torch.bool:
                raise TypeError(
                    f"mask must be a boolean tensor (True = may attend), but received dtype {mask.dtype}."
                )
            allowed = torch.broadcast_to(mask, (B, H, T, S)).reshape(B * H, T, S)
            blocked = ~allowed  # torch's convention: True = may NOT attend
        return mha(query, key_value, key_value, attn_mask=blocked, need_weights=False)[0]

    return attend


def sublayers_of(layer: nn.Module) -> Sublayers:
    """View a ``torch.nn.TransformerEncoderLayer`` or ``TransformerDecoderLayer`` (``batch_first``)
    as :class:`Sublayers` sharing its weights."""
    if not isinstance(layer, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        raise TypeError(
            f"sublayers_of expects a torch.nn.TransformerEncoderLayer or TransformerDecoderLayer, "
            f"but received {type(layer).__name__}."
        )
    if not layer.self_attn.batch_first:
        raise ValueError("sublayers_of expects a layer built with batch_first=True.")

    def mlp(x: Tensor) -> Tensor:
        return layer.linear2(layer.activation(layer.linear1(x)))

    if isinstance(layer, nn.TransformerDecoderLayer):
        return Sublayers(
            _attention_fn(layer.self_attn),
            layer.norm1,
            mlp,
            layer.norm3,
            _attention_fn(layer.multihead_attn),
            layer.norm2,
        )
    return Sublayers(_attention_fn(layer.self_attn), layer.norm1, mlp, layer.norm2)


def _torch_layer(
    C: int, H: int, d_ff: int, norm_first: bool, decoder: bool, g: torch.Generator
) -> nn.Module:
    """A seeded PyTorch layer (GELU, no dropout); the notebook's global RNG is left alone."""
    kind = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    with torch.random.fork_rng(devices=[]):
        layer = kind(
            C, H, d_ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=norm_first
        )
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.startswith("norm"):
                p.copy_(
                    (1.0 if name.endswith("weight") else 0.0)
                    + 0.3 * torch.randn(p.shape, generator=g)
                )
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
    return layer.eval()


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
    other = (
        "post-norm (norm after each residual sum), but norm_first=True asks for pre-norm: "
        "x = x + sublayer(norm(x))"
        if pre
        else "pre-norm (norm before each sublayer), but norm_first=False asks for post-norm: "
        "x = norm(x + sublayer(x))"
    )
    out = [Mistake(f"your block computes {other}", lambda: _encoder(x, L, not pre, mask))]
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
        lambda e, c: _signature_hint(e, "encoder_block(x, layer, norm_first, mask=None)"),
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
            run.fail(message or run.mismatch(out, expected), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# the decoder block: causal self-attention, cross-attention, MLP
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
    other = "post-norm" if pre else "pre-norm"
    asked = "pre-norm (norm_first=True)" if pre else "post-norm (norm_first=False)"
    out = [
        Mistake(
            f"your block computes {other}, but the case asks for {asked}",
            lambda: _decoder(x, memory, L, not pre, memory_mask),
        )
    ]
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
        lambda e, c: _signature_hint(
            e, "decoder_block(x, memory, layer, norm_first, memory_mask=None)"
        ),
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
            run.fail(message or run.mismatch(out, expected), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# counting parameters
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
            run.fail(f"{message}; {off}" if message else off, case)
    run.passed()
