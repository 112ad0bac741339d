"""Checks for notebook 8 (ViT): patches, the patch embedding as a convolution, the input
sequence with [CLS] and positions, 2-D sinusoidal positions and attention rollout.

Student-facing signatures:

    patchify(images, patch_size) -> (B, N, C*P*P), patches row by row, features (channel, row, column)
    linear_to_conv(linear, patch_size, n_channels) -> nn.Conv2d computing the same patch embedding
    vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N + 1, C)
    sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0) -> (N, C), rows in the first half
    attention_rollout(attentions) -> (B, T, T), attentions a list of (B, H, T, T), first layer first
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from transformer_lab import interpret as _interpret
from transformer_lab import positional as _positional
from transformer_lab.checks._core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks._integrity import TRUSTED, Forbidden
from transformer_lab.models import vit as _vit

__all__ = [
    "check_patchify",
    "check_linear_to_conv",
    "check_vit_embed",
    "check_sinusoidal_2d",
    "check_attention_rollout",
]


def _hint(expected: str):
    def hint(exc: BaseException, case: Case) -> str:
        text = str(exc)
        if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
            return f"keep the signature `{expected}`"
        if "Sizes of tensors must match" in text or "Tensors must have same number of dim" in text:
            return "the pieces you concatenate differ in shape: expand cls_token to (B, 1, C)"
        if "cannot be multiplied" in text:
            return "w_e is (C_in, C) in the course's row convention: compute patches @ w_e"
        if isinstance(exc, RuntimeError) and ("shape" in text or "size" in text):
            return "check each reshape against the shape comments: (B, C, H/P, P, W/P, P) first"
        return ""

    return hint


def _expect_value_error(run: Runner, call, case: Case, must_name: list[str], what: str) -> None:
    """The text asks for a ValueError whose message names ``must_name``; fail clearly otherwise."""
    __tracebackhide__ = True
    try:
        call()
    except ValueError as exc:
        missing = [word for word in must_name if word not in str(exc)]
        if missing:
            run.fail(
                f"{what}: your ValueError is right, but its message should name {must_name} "
                f"(the values received); yours says {str(exc)!r}.",
                case,
            )
        return
    except Exception as exc:  # the wrong kind of error, e.g. torch's RuntimeError from a reshape
        run.fail(
            f"{what}: expected a ValueError naming {must_name}, but your function raised "
            f"{type(exc).__name__}: {str(exc).strip()[:120]}. Check the sizes first and raise "
            f"ValueError yourself.",
            case,
        )
    run.fail(f"{what}: expected a ValueError naming {must_name}, but nothing was raised.", case)


# ---------------------------------------------------------------------------------------------
# patchify
def _patchify_mistakes(x: Tensor, P: int) -> list[Mistake]:
    B, C, H, W = x.shape
    gh, gw = H // P, W // P
    grid = x.reshape(B, C, gh, P, gw, P)  # (B, C, gh, P, gw, P)

    def order(*dims: int) -> Tensor:
        return grid.permute(*dims).reshape(B, gh * gw, C * P * P)

    return [
        Mistake(
            "the features inside a patch are ordered (row, column, channel); the course and "
            "Conv2d's kernel use (channel, row, column): permute to (B, H/P, W/P, C, P, P)",
            lambda: order(0, 2, 4, 3, 5, 1),
        ),
        Mistake(
            "you reshaped without permuting: each 'patch' is a run of consecutive pixels in memory "
            "(pieces of image rows), not a P x P square. Reshape to (B, C, H/P, P, W/P, P), then "
            "permute the two grid axes in front",
            lambda: x.reshape(B, gh * gw, C * P * P),
        ),
        Mistake(
            "the patches are numbered column by column; number them row by row (the grid's row "
            "index H/P varies slowest): permute to (B, H/P, W/P, ...)",
            lambda: order(0, 4, 2, 1, 3, 5),
        ),
        Mistake(
            "inside each patch rows and columns are swapped (every patch is transposed); keep the "
            "pixel order (channel, row, column)",
            lambda: order(0, 2, 4, 1, 5, 3),
        ),
        Mistake(
            "your patches are strided (every (H/P)-th pixel), not contiguous squares: split the "
            "height as (H/P, P), not (P, H/P), and the width likewise",
            lambda: (
                x.reshape(B, C, P, gh, P, gw).permute(0, 3, 5, 1, 2, 4).reshape(B, -1, C * P * P)
            ),
        ),
        Mistake(
            "the patches are right but each is flattened (column, row, channel)-wise; flatten as "
            "(channel, row, column)",
            lambda: order(0, 2, 4, 5, 3, 1),
        ),
    ]


def _patchify_cases(hidden: bool) -> list[Case]:
    g = generator(9801 if hidden else 801)
    specs = [(2, 3, 4, 6, 2), (2, 1, 8, 8, 2), (1, 2, 6, 6, 3), (3, 3, 8, 8, 4), (1, 1, 4, 4, 1)]
    if hidden:
        specs += [(2, 3, 10, 15, 5), (4, 2, 12, 8, 4), (1, 3, 14, 14, 7)]
    cases = []
    for B, C, H, W, P in specs:
        x = torch.randn(B, C, H, W, generator=g)
        case = Case(f"{B}x{C}x{H}x{W}, P={P}", (x, P), {}, describe_args(images=x, patch_size=P))
        case.data.update(x=x, P=P)
        cases.append(case)
    return cases


def check_patchify(patchify, hidden: bool = False) -> None:
    """Check ``patchify(images, patch_size)``: (B, C, H, W) -> (B, N, C*P*P)."""
    __tracebackhide__ = True
    forbidden = [Forbidden("transformer_lab's reference patchify", function=_vit.patchify)]
    run = Runner(
        "check_patchify", patchify, forbidden, hidden, _hint("patchify(images, patch_size)")
    )
    for case in _patchify_cases(hidden):
        x, P = case.data["x"], case.data["P"]
        B, C, H, W = x.shape
        N = (H // P) * (W // P)

        def shape_hint(got: tuple, N=N, C=C, P=P) -> str | None:
            if got == (B, C * P * P, N) and N != C * P * P:
                return "that is (B, C*P*P, N): the patches should be the rows, transpose the last two axes"
            if len(got) == 3 and got[0] == B and got[1] > N:
                return f"N should be (H/P)(W/P) = {N}: patches must not overlap (stride = P)"
            return None

        expected = _vit.patchify(x, P)
        out = run.expect_tensor(
            run.call(case), case, expected.shape, x.dtype, "patches", shape_hint
        )
        if not run.close(out, expected, 0.0, 0.0):
            message = run.diagnose(out, _patchify_mistakes(x, P), 0.0, 0.0)
            run.fail(message or run.mismatch(out, expected, "patches"), case)
    x = torch.zeros(1, 1, 6, 4)
    bad = Case("an image of 6 x 4 with P=4", (x, 4), {}, "images (1, 1, 6, 4), patch_size=4")
    _expect_value_error(
        run,
        lambda: patchify(x.clone(), 4),
        bad,
        ["6", "4"],
        "an image whose height is not a multiple of P",
    )
    run.passed()


# ---------------------------------------------------------------------------------------------
# the patch embedding as a convolution
def _conv_cases(hidden: bool) -> list[Case]:
    g = generator(9802 if hidden else 802)
    specs = [(2, 3, 6), (4, 1, 8), (3, 2, 5)] + ([(5, 3, 7), (2, 4, 12)] if hidden else [])
    cases = []
    for P, ch, C in specs:
        linear = nn.Linear(ch * P * P, C)
        with torch.no_grad():
            linear.weight.copy_(torch.randn(C, ch * P * P, generator=g))
            linear.bias.copy_(torch.randn(C, generator=g))
        x = torch.randn(2, ch, 3 * P, 2 * P, generator=g)
        case = Case(
            f"P={P}, channels={ch}, C={C}", (linear, P, ch), {}, f"Linear({ch * P * P}, {C}), P={P}"
        )
        case.data.update(x=x, P=P, ch=ch, C=C, linear=linear)
        cases.append(case)
    return cases


def check_linear_to_conv(linear_to_conv, hidden: bool = False) -> None:
    """Check ``linear_to_conv(linear, patch_size, n_channels)`` -> an equivalent ``nn.Conv2d``."""
    __tracebackhide__ = True
    run = Runner(
        "check_linear_to_conv",
        linear_to_conv,
        [
            Forbidden(
                "transformer_lab's PatchEmbedding.to_conv2d", function=_vit.PatchEmbedding.to_conv2d
            )
        ],
        hidden,
        _hint("linear_to_conv(linear, patch_size, n_channels)"),
    )
    for case in _conv_cases(hidden):
        x, P, ch, C, linear = (case.data[k] for k in ("x", "P", "ch", "C", "linear"))
        before = linear.weight.detach().clone(), linear.bias.detach().clone()
        conv = run.call(case)
        if conv is None:
            run.fail("your function returned None: did you forget `return conv`?", case)
        if not isinstance(conv, nn.Conv2d):
            run.fail(
                f"expected an nn.Conv2d, but your function returned a {type(conv).__name__}.", case
            )
        if not (TRUSTED.equal(linear.weight, before[0]) and TRUSTED.equal(linear.bias, before[1])):
            run.fail(
                "your function changed the Linear layer's weights; copy them into the Conv2d instead.",
                case,
            )
        kernel, stride = tuple(conv.kernel_size), tuple(conv.stride)
        if (conv.in_channels, conv.out_channels) != (ch, C):
            run.fail(
                f"the convolution should map {ch} image channels to C={C} features, but yours maps "
                f"{conv.in_channels} to {conv.out_channels}.",
                case,
            )
        if kernel != (P, P):
            run.fail(f"the kernel should be P x P = {P} x {P}, but yours is {kernel}.", case)
        if stride != (P, P):
            run.fail(
                f"the stride should equal the patch size ({P}) so patches do not overlap, but yours "
                f"is {stride}.",
                case,
            )
        if tuple(conv.padding) != (0, 0) or tuple(conv.dilation) != (1, 1) or conv.groups != 1:
            run.fail(
                "use no padding, no dilation and groups=1: one patch per kernel position.", case
            )
        with torch.no_grad():
            expected = linear(_vit.patchify(x, P))  # (B, N, C)
            got = conv(x).flatten(2).transpose(1, 2)  # (B, C, gh, gw) -> (B, N, C)
        if conv.bias is None:
            run.fail(
                "your Conv2d has no bias (bias=False); the Linear layer's bias must be copied too.",
                case,
            )
        if run.close(got, expected, 1e-4, 1e-4):
            continue
        w, b = linear.weight.detach(), linear.bias.detach()
        cw, cb = conv.weight.detach(), conv.bias.detach()
        right_weight = run.close(cw, w.view(C, ch, P, P), 1e-6, 1e-6)
        if right_weight:
            run.fail(
                "the weights are right but the bias is not the Linear's: copy linear.bias into "
                "conv.bias (a new Conv2d starts with a random bias).",
                case,
            )
        if not run.close(cb, b, 1e-6, 1e-6):
            run.fail(
                "neither the weight nor the bias is the Linear's: copy linear.weight (viewed as "
                "(C, channels, P, P)) and linear.bias into the Conv2d, under torch.no_grad().",
                case,
            )
        candidates = [
            (
                w.view(C, P, P, ch).permute(0, 3, 1, 2),
                "the weight is read as (C, P, P, channels); a flattened patch runs (channel, row, "
                "column), so view it as (C, channels, P, P)",
            ),
            (
                w.view(C, ch, P, P).transpose(2, 3),
                "each kernel is transposed (rows and columns swapped): view the weight as "
                "(C, channels, P, P) without transposing",
            ),
            (
                w.T.reshape(C, ch, P, P),
                "the weight was transposed before reshaping: nn.Linear already stores it as "
                "(out, in) = (C, channels*P*P), the layout Conv2d wants; view it as (C, channels, P, P)",
            ),
        ]
        for candidate, message in candidates:
            if run.close(cw, candidate, 1e-6, 1e-6):
                run.fail(message + ".", case)
        run.fail(
            "the bias is right but the weight is not the Linear's weight viewed as (C, channels, P, P).",
            case,
        )
        run.fail(run.mismatch(got, expected, "convolution's patch embeddings"), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# [CLS] and positions
def _embed_cases(hidden: bool) -> list[Case]:
    g = generator(9803 if hidden else 803)
    specs = [(2, 1, 8, 8, 2, 6), (1, 3, 4, 6, 2, 5), (3, 2, 6, 6, 3, 4)]
    if hidden:
        specs += [(2, 3, 10, 5, 5, 7), (4, 1, 8, 8, 4, 9)]
    cases = []
    for B, ch, H, W, P, C in specs:
        N = (H // P) * (W // P)
        x = torch.randn(B, ch, H, W, generator=g)
        w_e, b_e = torch.randn(ch * P * P, C, generator=g), torch.randn(C, generator=g)
        cls_token, pos = torch.randn(C, generator=g), torch.randn(N + 1, C, generator=g)
        args = (x, P, w_e, b_e, cls_token, pos)
        describe = describe_args(images=x, patch_size=P, w_e=w_e, cls_token=cls_token, pos=pos)
        case = Case(f"{B}x{ch}x{H}x{W}, P={P}, C={C}", args, {}, describe)
        case.data.update(zip(("x", "P", "w_e", "b_e", "cls", "pos"), args))
        cases.append(case)
    return cases


def _reference_embed(x, P, w_e, b_e, cls_token, pos) -> Tensor:
    patches = _vit.patchify(x, P) @ w_e + b_e  # (B, N, C)
    cls = cls_token.expand(x.shape[0], 1, -1)  # (B, 1, C)
    return torch.cat([cls, patches], dim=1) + pos  # (B, N + 1, C)


def _hwc_patches(x: Tensor, P: int) -> Tensor:
    B, C, H, W = x.shape
    grid = x.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)  # (B, gh, gw, P, P, C)
    return grid.reshape(B, (H // P) * (W // P), C * P * P)


def _embed_mistakes(x, P, w_e, b_e, cls_token, pos) -> list[Mistake]:
    B = x.shape[0]
    patches = _vit.patchify(x, P) @ w_e + b_e  # (B, N, C)
    cls = cls_token.expand(B, 1, -1)  # (B, 1, C)
    return [
        Mistake(
            "[CLS] is at the end of the sequence; it goes first (position 0), before the patches",
            lambda: torch.cat([patches, cls], dim=1) + pos,
        ),
        Mistake(
            "[CLS] gets no position embedding: add the whole (N + 1, C) table after prepending [CLS]",
            lambda: torch.cat([cls, patches + pos[1:]], dim=1),
        ),
        Mistake(
            "the patches get rows 0..N-1 of the position table and [CLS] row N; prepend [CLS] first, "
            "then add the table, so [CLS] gets row 0",
            lambda: torch.cat([cls + pos[-1:], patches + pos[:-1]], dim=1),
        ),
        Mistake(
            "the bias b_e is missing from the patch projection",
            lambda: _reference_embed(x, P, w_e, torch.zeros_like(b_e), cls_token, pos),
        ),
        Mistake("the position embeddings are missing", lambda: torch.cat([cls, patches], dim=1)),
        Mistake(
            "the patches get no position embeddings (only [CLS] does): add the whole (N + 1, C) "
            "table to the sequence",
            lambda: torch.cat([cls + pos[0], patches], dim=1),
        ),
        Mistake(
            "the patches get rows 0..N-1 of the position table and [CLS] none; prepend [CLS] "
            "first, then add the whole (N + 1, C) table",
            lambda: torch.cat([cls, patches + pos[:-1]], dim=1),
        ),
        Mistake(
            "the patches are flattened (row, column, channel)-wise: use the course's patch order "
            "(channel, row, column), the order patchify and Conv2d's kernel use",
            lambda: torch.cat([cls, _hwc_patches(x, P) @ w_e + b_e], dim=1) + pos,
        ),
    ]


def check_vit_embed(vit_embed, hidden: bool = False) -> None:
    """Check ``vit_embed(images, patch_size, w_e, b_e, cls_token, pos)`` -> (B, N + 1, C)."""
    __tracebackhide__ = True
    run = Runner(
        "check_vit_embed",
        vit_embed,
        [Forbidden("transformer_lab's ViT", function=_vit.ViT.forward)],
        hidden,
        _hint("vit_embed(images, patch_size, w_e, b_e, cls_token, pos)"),
    )
    for case in _embed_cases(hidden):
        args = tuple(case.data[k] for k in ("x", "P", "w_e", "b_e", "cls", "pos"))
        expected = _reference_embed(*args)
        B, N1, C = expected.shape

        def shape_hint(got: tuple, N1=N1) -> str | None:
            if got[:1] == (B,) and len(got) == 3 and got[1] == N1 - 1:
                return "one token short: prepend the [CLS] token to the N patch embeddings"
            return None

        out = run.expect_tensor(
            run.call(case), case, expected.shape, expected.dtype, "sequence", shape_hint
        )
        if not run.close(out, expected, 1e-4, 1e-4):
            message = run.diagnose(out, _embed_mistakes(*args), 1e-4, 1e-4)
            run.fail(message or run.mismatch(out, expected, "sequence"), case)
    run.passed()


# ---------------------------------------------------------------------------------------------
# 2-D sinusoidal positions
def _sin2d_mistakes(h: int, w: int, C: int, base: float) -> list[Mistake]:
    rows = _positional.sinusoidal_encoding(h, C // 2, base)  # (h, C/2)
    cols = _positional.sinusoidal_encoding(w, C // 2, base)  # (w, C/2)

    def grid(first: Tensor, second: Tensor, a: int, b: int) -> Tensor:
        return torch.cat(
            [first[:, None, :].expand(a, b, C // 2), second[None, :, :].expand(a, b, C // 2)],
            dim=-1,
        )  # (a, b, C)

    def narrow(n: int) -> Tensor:  # frequencies of the full width C, cut to C/2 channels
        return _positional.sinusoidal_encoding(n, C, base)[:, : C // 2]

    return [
        Mistake(
            "each half's frequencies come from the full width C; encode the rows and the columns "
            "each at width C/2 (omega_i = base^(-2i / (C/2)))",
            lambda: grid(narrow(h), narrow(w), h, w).reshape(h * w, C),
        ),
        Mistake(
            "the halves are swapped: the first C/2 channels should encode the patch's row and the "
            "last C/2 its column",
            lambda: torch.cat(
                [cols[None, :, :].expand(h, w, C // 2), rows[:, None, :].expand(h, w, C // 2)],
                dim=-1,
            ).reshape(h * w, C),
        ),
        Mistake(
            "the patches are in column-major order; number them row by row (row index slowest), as "
            "patchify does",
            lambda: grid(rows, cols, h, w).transpose(0, 1).reshape(h * w, C),
        ),
        Mistake(
            "you used the 1-D encoding of the patch index 0..N-1: that ignores the grid (patches "
            "above each other are far apart); encode the row and the column separately",
            lambda: _positional.sinusoidal_encoding(h * w, C, base),
        ),
        Mistake(
            "each axis uses the full width C and the two are added; give each axis half the "
            "channels (width C/2) and concatenate",
            lambda: (
                _positional.sinusoidal_encoding(h, C, base)[:, None, :]
                + _positional.sinusoidal_encoding(w, C, base)[None, :, :]
            ).reshape(h * w, C),
        ),
        Mistake(
            "the row and column channels are interleaved; put all C/2 row channels first, then the "
            "C/2 column channels",
            lambda: torch.stack(
                [rows[:, None, :].expand(h, w, C // 2), cols[None, :, :].expand(h, w, C // 2)],
                dim=-1,
            ).reshape(h * w, C),
        ),
        Mistake(
            "the rows are encoded with the column count and the columns with the row count (h and "
            "w swapped); the row index runs over grid_h",
            lambda: grid(
                _positional.sinusoidal_encoding(w, C // 2, base),
                _positional.sinusoidal_encoding(h, C // 2, base),
                w,
                h,
            ).reshape(h * w, C),
        ),
    ]


def check_sinusoidal_2d(sinusoidal_2d, hidden: bool = False) -> None:
    """Check ``sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0)`` -> (grid_h * grid_w, C)."""
    __tracebackhide__ = True
    forbidden = [
        Forbidden(
            "transformer_lab's sinusoidal_encoding_2d", function=_positional.sinusoidal_encoding_2d
        )
    ]
    run = Runner(
        "check_sinusoidal_2d",
        sinusoidal_2d,
        forbidden,
        hidden,
        _hint("sinusoidal_2d(grid_h, grid_w, d_model, base=10000.0)"),
    )
    specs = [(3, 5, 8, 10000.0), (4, 4, 16, 10000.0), (2, 6, 12, 100.0), (1, 3, 4, 10000.0)]
    if hidden:
        specs += [(7, 3, 20, 10000.0), (5, 5, 32, 50.0), (2, 9, 24, 10000.0)]
    for h, w, C, base in specs:
        case = Case(
            f"{h}x{w} grid, C={C}, base={base:g}",
            (h, w, C),
            {"base": base},
            f"grid_h={h}, grid_w={w}, d_model={C}, base={base:g}",
        )
        expected = _positional.sinusoidal_encoding_2d(h, w, C, base)
        out = run.expect_tensor(run.call(case), case, expected.shape, torch.float32, "encoding")
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(out, _sin2d_mistakes(h, w, C, base), 1e-5, 1e-5)
            if message is None and base != 10000.0:
                default = _positional.sinusoidal_encoding_2d(h, w, C)
                if run.close(out, default, 1e-5, 1e-5):
                    message = "the base argument is ignored: pass it on to the 1-D encoding"
            run.fail(message or run.mismatch(out, expected, "encoding"), case)
    bad = Case("d_model=6", (3, 3, 6), {}, "grid_h=3, grid_w=3, d_model=6")
    _expect_value_error(
        run, lambda: sinusoidal_2d(3, 3, 6), bad, ["6"], "a width not divisible by 4"
    )
    run.passed()


# ---------------------------------------------------------------------------------------------
# attention rollout
def _random_attentions(g: torch.Generator, L: int, B: int, H: int, T: int) -> list[Tensor]:
    return [torch.softmax(2.0 * torch.randn(B, H, T, T, generator=g), dim=-1) for _ in range(L)]


def _rollout_mistakes(attentions: list[Tensor]) -> list[Mistake]:
    T = attentions[0].shape[-1]
    eye = torch.eye(T)

    def compose(layers: list[Tensor], right_to_left: bool = True) -> Tensor:
        out = layers[0]
        for a in layers[1:]:
            out = a @ out if right_to_left else out @ a
        return out

    mixed = [0.5 * a.mean(dim=1) + 0.5 * eye for a in attentions]
    return [
        Mistake(
            "the product is in the wrong order: later layers go on the left, R = A_L ... A_2 A_1 "
            "(rollout = mixed @ rollout)",
            lambda: compose(mixed, right_to_left=False),
        ),
        Mistake(
            "the residual path is missing: mix each layer's head-averaged weights with the "
            "identity, 0.5 * W + 0.5 * I, before multiplying",
            lambda: compose([a.mean(dim=1) for a in attentions]),
        ),
        Mistake(
            "after adding the identity the rows sum to 2, not 1: renormalise each layer (or use "
            "0.5 * W + 0.5 * I)",
            lambda: compose([a.mean(dim=1) + eye for a in attentions]),
        ),
        Mistake(
            "the heads are fused with a max; average them (mean over dim 1)",
            lambda: compose([0.5 * a.amax(dim=1) + 0.5 * eye for a in attentions]),
        ),
        Mistake(
            "only the last layer is used; compose every layer's mixed weights",
            lambda: mixed[-1],
        ),
        Mistake(
            "the layers are summed (or averaged) instead of multiplied; information flows through "
            "them in sequence, so compose them with matrix products",
            lambda: sum(mixed) / len(mixed),
        ),
        Mistake(
            "the layers are summed instead of multiplied; compose them with matrix products",
            lambda: sum(mixed),
        ),
        Mistake(
            "the first layer is left out of the product (the loop starts at layer 1 with an "
            "identity?); include every layer",
            lambda: compose(mixed[1:]) if len(mixed) > 1 else eye.expand_as(mixed[0]),
        ),
    ]


def check_attention_rollout(attention_rollout, hidden: bool = False) -> None:
    """Check ``attention_rollout(attentions)``: list of (B, H, T, T) -> (B, T, T)."""
    __tracebackhide__ = True
    run = Runner(
        "check_attention_rollout",
        attention_rollout,
        [Forbidden("transformer_lab's attention_rollout", function=_interpret.attention_rollout)],
        hidden,
        _hint("attention_rollout(attentions)"),
    )
    g = generator(9804 if hidden else 804)
    specs = [(3, 2, 2, 5), (1, 1, 3, 4), (2, 3, 1, 6), (4, 1, 4, 3)]
    if hidden:
        specs += [(6, 2, 3, 7), (5, 3, 2, 9)]
    for L, B, H, T in specs:
        attentions = _random_attentions(g, L, B, H, T)
        case = Case(
            f"{L} layers of (B={B}, H={H}, T={T})", (attentions,), {}, f"{L} x ({B}, {H}, {T}, {T})"
        )
        expected = _interpret.attention_rollout(attentions)
        value = run.call(case)
        if isinstance(value, (list, tuple)):
            run.fail(
                f"expected one (B, T, T) tensor (the composed rollout), but your function "
                f"returned a {type(value).__name__} of length {len(value)}.",
                case,
            )

        def shape_hint(got: tuple, B=B, T=T) -> str | None:
            if got == (B, T):
                return "that is one row ([CLS]'s); return the whole (B, T, T) matrix"
            if len(got) == 4:
                return "the heads are still there: average them (dim 1) in every layer"
            return None

        out = run.expect_tensor(value, case, expected.shape, expected.dtype, "rollout", shape_hint)
        if not run.close(out, expected, 1e-5, 1e-5):
            message = run.diagnose(out, _rollout_mistakes(attentions), 1e-5, 1e-5)
            run.fail(message or run.mismatch(out, expected, "rollout"), case)
    run.passed()
