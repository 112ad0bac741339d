"""Check for notebook 08, part 2: the ViT's input sequence (the fixed 2-D positions are checked
in sinusoidal_2d.py).

vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N + 1, C)
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import Case, Mistake, Runner, describe_args, generator
from transformer_lab.checks.engine.evidence import _constant_factor
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb08_vision_transformer.exercise_hints import (
    _embed_tip,
    _hint,
)
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import vit as _vit

__all__ = ["check_vit_embed"]


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
            "[CLS] gets no position embedding: row 0 of the table, pos[0], is the [CLS] position; "
            "prepend [CLS] first, then add the whole (N + 1, C) table",
            lambda: torch.cat([cls, patches + pos[1:]], dim=1),
        ),
        Mistake(
            "the positions are shifted: the patches get rows 0..N-1 of the position table and "
            "[CLS] row N; prepend [CLS] first, then add the table, so [CLS] gets row 0",
            lambda: torch.cat([cls + pos[-1:], patches + pos[:-1]], dim=1),
        ),
        Mistake(
            "the patch positions are shifted by one: patch n gets row n of the position table "
            "(pos[:-1]), but row 0 is [CLS]'s, so patch n gets row n + 1 (pos[1:]); prepend "
            "[CLS] first, then add the whole (N + 1, C) table",
            lambda: torch.cat([cls + pos[0], patches + pos[:-1]], dim=1),
        ),
        Mistake(
            "the bias b_e is missing from the patch projection",
            lambda: _reference_embed(x, P, w_e, torch.zeros_like(b_e), cls_token, pos),
        ),
        Mistake("the position embeddings are missing", lambda: torch.cat([cls, patches], dim=1)),
        Mistake(
            "cls_token is added to each patch as well (broadcast over all tokens): it is one "
            "extra token prepended at position 0 (torch.cat along the sequence axis), the "
            "patches stay as projected",
            lambda: torch.cat([cls, patches + cls], dim=1) + pos,
        ),
        Mistake(
            "the patches get no position embeddings (only [CLS] does): add the whole (N + 1, C) "
            "table to the sequence",
            lambda: torch.cat([cls + pos[0], patches], dim=1),
        ),
        Mistake(
            "the patch positions are shifted by one and [CLS] gets none: the patches get rows "
            "0..N-1 of the position table; prepend [CLS] first, then add the whole (N + 1, C) "
            "table",
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
        _hint("vit_embed(images, patch_size, w_e, b_e, cls_token, pos)", _embed_tip),
    )
    for case in _embed_cases(hidden):
        args = tuple(case.data[k] for k in ("x", "P", "w_e", "b_e", "cls", "pos"))
        expected = _reference_embed(*args)
        B, N1, C = expected.shape

        def shape_hint(got: tuple, N1=N1, C=C) -> str | None:
            if got[:1] == (B,) and len(got) == 3 and got[1] == N1 - 1:
                return "one token short: prepend the [CLS] token to the N patch embeddings"
            return _batch_shape_hint(got, B, N1, C)

        out = run.expect_tensor(
            run.call(case), case, expected.shape, expected.dtype, "sequence", shape_hint
        )
        if not run.close(out, expected, 1e-4, 1e-4):
            message = run.diagnose(out, _embed_mistakes(*args), 1e-4, 1e-4)
            message = message or _embed_evidence(run, out, expected, args)
            if message:
                run.fail(message, case)
            case.data.update(axes=("batch element", "token", "feature"), dims={"C": C})
            run.explain(out, expected, case, (), 1e-4, 1e-4, what="sequence")
    run.passed()


def _batch_shape_hint(got: tuple, B: int, N1: int, C: int) -> str | None:
    """The batch axis lost, or only some of the B images embedded."""
    if got == (N1, C):
        return (
            f"the batch axis is missing: there are B={B} images, and each image needs its own "
            f"(N + 1, C) sequence; keep the batch axis first"
        )
    if len(got) == 3 and got[1:] == (N1, C) and got[0] != B:
        return (
            f"{got[0]} sequence(s) for a batch of B={B} images: embed each image of the batch "
            f"(work on the whole (B, ...) tensor, and expand cls_token to (B, 1, C))"
        )
    return None


def _embed_evidence(run: Runner, out: Tensor, expected: Tensor, args) -> str | None:
    """Which part is wrong ([CLS] or the patches), and by what: an input added where it does
    not belong, a constant factor, or patches that are not patchify's."""
    x, P, w_e, b_e, cls_token, pos = args
    C = w_e.shape[1]
    close = lambda a, b: a.shape == b.shape and run.close(a, b, 1e-4, 1e-4)  # noqa: E731
    cls_ok, patches_ok = close(out[:, 0], expected[:, 0]), close(out[:, 1:], expected[:, 1:])
    terms = {"b_e": b_e, "pos[0]": pos[0], "cls_token": cls_token, "pos[1]": pos[1]}
    if close(out - expected, pos.expand_as(out)):
        return "the position table pos is added twice, to every token: add it once"
    if patches_ok and not cls_ok:
        delta = out[:, 0] - expected[:, 0]  # (B, C)
        for name, term in terms.items():
            for sign, verb in ((1, "an extra"), (-1, "no")):
                if close(delta, sign * term.expand_as(delta)):
                    return (
                        f"the patches are right, but token 0 ([CLS]) has {verb} {name} in it: it "
                        f"should be exactly cls_token + pos[0] (the bias b_e belongs to the patch "
                        f"projection only)"
                    )
        for row in range(1, pos.shape[0]):
            if close(delta, (pos[row] - pos[0]).expand_as(delta)):
                return (
                    f"the patches are right, but [CLS] gets row {row} of the position table "
                    f"(pos[{row}]): [CLS] is token 0, its position is row 0 (pos[0])"
                )
        return None
    if not cls_ok or patches_ok:
        return None
    mine, want = out[:, 1:] - pos[1:], expected[:, 1:] - pos[1:]  # patch embeddings, no positions
    for name, term in (("b_e", b_e), ("their positions pos[1:]", pos[1:])):
        if close(mine - want, term.expand_as(mine)):
            return (
                f"[CLS] is right, but the patch embeddings have {name} added twice: add each "
                f"term once (the position table once, to the whole sequence)"
            )
    for shown, a, e in (("patches @ w_e + b_e", mine, want),
                        ("patches @ w_e", mine - b_e, want - b_e)):  # fmt: skip
        found = _constant_factor(a.double(), e.double(), {"D": C, "C_in": w_e.shape[0]})
        if found is not None and found.named:
            return f"[CLS] is right, but the patch embeddings ({shown}): {found.message}"
    if w_e.shape[0] <= w_e.shape[1]:  # the projection can be undone: which patches went in?
        pixels = (mine - b_e).double() @ torch.linalg.pinv(w_e.double())  # (B, N, C_in)
        true = _vit.patchify(x, P).double()
        if not close(pixels, true) and all(
            close(p.flatten().sort().values, t.flatten().sort().values)
            for p, t in zip(pixels, true)
        ):
            return (
                "[CLS] and the positions are right, but the vectors you project are not "
                "patchify(images, P)'s patches: the same pixels in another order; call your "
                "patchify (a reshape alone cuts strips of pixel rows, not squares)"
            )
    return None


register(
    Exercise(
        "vit_embed",
        "08_vision_transformer",
        "vit_embed(images, patch_size, w_e, b_e, cls_token, pos) -> (B, N+1, C)",
        cells=(Cell("vit_embed_tests", "vit_embed", 2),),
        check=check_vit_embed,
        reference=_reference_embed,
        against="transformer_lab.models.vit.patchify, then [CLS] and positions",
    )
)
