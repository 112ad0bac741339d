"""Checks for notebook 7 (GPT), part 3: GPT assembled from the package's blocks.

Student-facing signature:

    GPTFromBlocks(config) -> nn.Module with tok_emb, pos_emb, blocks, norm_f, lm_head;
        model(idx (B, T)) -> logits (B, T, V), equal to the package's GPT with the same weights

Compared with the package's :class:`~transformer_lab.models.GPT` (proved equal to Hugging Face's
``GPT2LMHeadModel`` in the tests) on seeded random weights, computed before the student's code
runs (the random GPTs are gpt_shared.py's); a mismatch is probed in gpt_model_probes.py.
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_lab.blocks import Block
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.nb07_gpt.gpt_mistakes import gpt_mistakes
from transformer_lab.checks.nb07_gpt.gpt_model_probes import (
    _ablation_probe,
    _block_field_mismatch,
    _check_eps,
    _leak_probe,
)
from transformer_lab.checks.nb07_gpt.gpt_shared import forbidden_gpt, random_gpt, tuple_hint
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import gpt as _gpt

__all__ = ["check_gpt_from_blocks"]


ATOL, RTOL = 1e-5, 1e-4


# ---------------------------------------------------------------------------------------------
# GPT from the package's blocks
def _gpt_configs(hidden: bool) -> list[_gpt.GPTConfig]:
    C = _gpt.GPTConfig
    configs = [
        C(vocab_size=29, max_len=10, n_layers=2, n_heads=2, d_model=16, tie_weights=True),
        C(vocab_size=23, max_len=8, n_layers=1, n_heads=4, d_model=16, tie_weights=False),
        # every other config field the hidden cases vary, so nothing passes here and fails there
        C(vocab_size=19, max_len=8, n_layers=2, n_heads=2, d_model=16, d_ff=24, eps=1e-6),
        C(
            vocab_size=21,
            max_len=7,
            n_layers=1,
            n_heads=2,
            d_model=12,
            activation="gelu",
            bias=False,
            tie_weights=False,
        ),  # fmt: skip
    ]
    if hidden:
        configs += [
            C(vocab_size=41, max_len=12, n_layers=3, n_heads=2, d_model=24, d_ff=40, eps=1e-6),
            C(
                vocab_size=17,
                max_len=9,
                n_layers=2,
                n_heads=2,
                d_model=8,
                activation="gelu",
                bias=False,
                tie_weights=False,
            ),
        ]
    return configs


def _param(run, case, module, attr: str, shape: tuple, what: str) -> nn.Parameter:
    __tracebackhide__ = True
    p = getattr(module, attr, None)
    if not isinstance(p, torch.Tensor):
        run.fail(f"{what} has no `.{attr}` tensor; build it as the exercise says.", case)
    if tuple(p.shape) != shape:
        run.fail(f"{what}.{attr} should have shape {shape}, but yours has {tuple(p.shape)}.", case)
    return p


def _install(run: Runner, case: Case, model, ref, config) -> None:
    """Check the student's modules and copy the reference weights into them."""
    __tracebackhide__ = True
    V, C, L = config.vocab_size, config.d_model, config.max_len
    if not isinstance(model, nn.Module):
        run.fail(
            f"GPTFromBlocks(config) should give an nn.Module, but gave a {type(model).__name__}.",
            case,
        )
    for name in ("tok_emb", "pos_emb", "blocks", "norm_f", "lm_head"):
        if not hasattr(model, name):
            run.fail(
                f"your model has no attribute `{name}`; the exercise names the parts tok_emb, "
                "pos_emb, blocks, norm_f, lm_head (the check copies weights into them).",
                case,
            )
    tok = _param(run, case, model.tok_emb, "weight", (V, C), "tok_emb")
    pos = getattr(model.pos_emb, "weight", None)
    if isinstance(pos, torch.Tensor) and tuple(pos.shape) == (V, C) and V != L:
        run.fail(
            f"pos_emb has one row per token of the vocabulary ({V}); it needs one per "
            f"position: (max_len, C) = {(L, C)}.",
            case,
        )
    pos = _param(run, case, model.pos_emb, "weight", (L, C), "pos_emb")
    if isinstance(model.blocks, (list, tuple)):
        run.fail(
            f"blocks is a Python {type(model.blocks).__name__}: wrap it in nn.ModuleList, or "
            "the blocks' parameters are not registered (model.parameters(), state_dict(), "
            ".to() and the optimiser would miss them).",
            case,
        )
    blocks = (
        list(model.blocks)
        if isinstance(model.blocks, (nn.ModuleList, nn.Sequential, list, tuple))
        else None
    )
    if blocks is None or len(blocks) != config.n_layers:
        got = "no list of blocks" if blocks is None else f"{len(blocks)}"
        run.fail(
            f"blocks should hold config.n_layers = {config.n_layers} blocks (an "
            f"nn.ModuleList), but yours holds {got}.",
            case,
        )
    for i, mine in enumerate(blocks):
        for j in range(i):
            if mine is blocks[j]:
                run.fail(
                    f"blocks[{i}] is the same module as blocks[{j}]: `[Block(...)] * n_layers` "
                    "repeats one block (shared weights); build a new Block for each layer, e.g. "
                    "nn.ModuleList(Block(...) for _ in range(config.n_layers)).",
                    case,
                )
    for i, (mine, theirs) in enumerate(zip(blocks, ref.blocks)):
        if not isinstance(mine, Block):
            run.fail(
                f"blocks[{i}] is a {type(mine).__name__}: build each with the package's Block "
                "(from transformer_lab.blocks import Block).",
                case,
            )
        try:
            mine.load_state_dict(theirs.state_dict())
        except RuntimeError as exc:
            named = _block_field_mismatch(mine, theirs, config)
            if named:
                run.fail(f"blocks[{i}]: {named}", case)
            detail = " ".join(str(exc).split())[:160]
            run.fail(
                f"blocks[{i}] has different parameters from Block(d_model, n_heads, d_ff, "
                f"bias=config.bias) ({detail}).",
                case,
            )
    try:
        model.norm_f.load_state_dict(ref.norm_f.state_dict())
    except (RuntimeError, AttributeError) as exc:
        detail = " ".join(str(exc).split())[:120]
        run.fail(
            f"norm_f should be a layer norm over C = {C} (bias={config.bias}), like the "
            f"blocks' norms ({detail}).",
            case,
        )
    _check_eps(run, case, model, blocks, config.eps)
    head = _param(run, case, model.lm_head, "weight", (V, C), "lm_head")
    if getattr(model.lm_head, "bias", None) is not None:
        run.fail("GPT-2's output head has no bias: nn.Linear(C, V, bias=False).", case)
    if config.tie_weights and head is not tok:
        same = TRUSTED.equal(head.detach(), tok.detach())
        run.fail(
            "config.tie_weights is True: tie the head, self.lm_head.weight = "
            "self.tok_emb.weight (the same Parameter"
            + (
                "; copying the values is not tying: they would drift apart in training)."
                if same
                else ")."
            ),
            case,
        )
    if not config.tie_weights and head is tok:
        run.fail(
            "config.tie_weights is False: the head needs its own (V, C) matrix, not "
            "tok_emb.weight.",
            case,
        )
    with torch.no_grad():
        tok.copy_(ref.tok_emb.weight)
        pos.copy_(ref.pos_emb.weight)
        if not config.tie_weights:
            head.copy_(ref.lm_head.weight)
    n_mine = sum(p.numel() for p in model.parameters())
    n_ref = sum(p.numel() for p in ref.parameters())
    if n_mine > n_ref:
        run.fail(
            f"your model has {n_mine:,} parameters, the reference {n_ref:,}: build exactly the "
            "five parts, nothing more.",
            case,
        )
    if n_mine < n_ref:
        run.fail(
            f"your model has {n_mine:,} parameters, the reference {n_ref:,}: some of the "
            "reference's parameters are missing from your model.parameters().",
            case,
            named=False,
        )
    model.eval()


def check_gpt_from_blocks(GPTFromBlocks, hidden: bool = False) -> None:
    """Check ``GPTFromBlocks(config)``: its parts take the reference GPT's weights, and its
    logits equal the reference's for several batch sizes and lengths (T = 1 .. max_len)."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    hint = lambda e, c: tuple_hint(e) or signature_hint(e, "GPTFromBlocks(config)")  # noqa: E731
    run = Runner("check_gpt_from_blocks", GPTFromBlocks, forbidden_gpt(), hidden, hint)
    for n, config in enumerate(_gpt_configs(hidden)):
        ref = random_gpt(config, seed=(900 if hidden else 90) + n)
        ref._tlab_activation = config.activation  # for the variants' rebuilt blocks
        for b in ref.blocks:
            b._tlab_activation = config.activation
        label = f"config {n}: n_layers={config.n_layers}, d_model={config.d_model}, tie_weights={config.tie_weights}"
        case = Case(label, (config,), {}, label)
        model = run.call(case)
        _install(run, case, model, ref, config)
        forward = Runner(run.name, model, forbidden_gpt(), hidden, lambda e, c: tuple_hint(e))
        g = generator(31 + n)
        for B, T in ((2, config.max_len), (1, 1)) if n else ((3, 5), (2, config.max_len), (1, 1)):
            idx = torch.randint(0, config.vocab_size, (B, T), generator=g)
            with torch.no_grad():
                expected = ref(idx).logits  # (B, T, V)
            fcase = Case(f"{label}, idx {(B, T)}", (idx,), {}, describe_args(idx=idx))
            with torch.no_grad():
                value = forward.call(fcase)
            run.n_cases += 1
            if TRUSTED.is_tensor(value) or value is None:
                pass
            elif hasattr(value, "logits") or isinstance(value, (tuple, list)):
                run.fail("forward should return the logits tensor (B, T, V) itself.", fcase)

            def shape_hint(got: tuple, B=B, T=T, C=config.d_model) -> str | None:
                if got == (B, T, C):
                    return (
                        "that is (B, T, d_model), the hidden states: apply the head, "
                        "self.lm_head(self.norm_f(x)), to get one logit per vocabulary entry"
                    )
                return None

            out = run.expect_tensor(
                value, fcase, expected.shape, torch.float32, "logits", shape_hint
            )
            if not run.close(out, expected, ATOL, RTOL):
                message = run.diagnose(out, gpt_mistakes(ref, idx, config.activation), 1e-4, 1e-3)
                if message is not None:
                    run.fail(message, fcase)
                message = _leak_probe(forward, idx, out, config.vocab_size)
                if message is not None:
                    run.fail(message, fcase)
                found = _ablation_probe(forward, model, ref, idx)
                if found is not None:
                    run.fail(found[0], fcase, named=found[1])
                run.fail(run.mismatch(out, expected, "logits"), fcase, named=False)
    run.passed()


register(
    Exercise(
        "gpt_from_blocks",
        "07_gpt",
        "GPTFromBlocks(config) -> nn.Module; model(idx (B, T)) -> logits (B, T, V)",
        cells=(Cell("gpt_from_blocks_tests", "GPTFromBlocks", 2),),
        check=check_gpt_from_blocks,
        against="transformer_lab.models.GPT",
        kind="class",
    )
)
