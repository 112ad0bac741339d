"""Naming a wrong greedy decoder (notebook 07): the known mistakes (kv_cache_mistakes.py) first,
then what the recorded calls (kv_cache_hooks.py) show: the inputs the blocks received, the
prompt's rows, the head's inputs, how the cache was used, argmax against the logits.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.checks.engine.core import _clone
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.nb07_gpt.kv_cache_mistakes import _DECODE_MISTAKES, _decode_variant

__all__ = []


def _diagnose_decoding(run, case, model, idx, n, out, expected, recorder, n_layers) -> None:
    __tracebackhide__ = True
    calls = recorder.calls
    if not TRUSTED.equal(out[:, : idx.shape[1]], idx):
        run.fail(
            _prompt_rows(idx, out) or "the output must start with the prompt idx, unchanged.", case
        )
    prompt_calls = calls[:n_layers]
    later = calls[n_layers:]
    ids = [c[2] for c in prompt_calls if c[2] is not None]
    if len(set(ids)) < len(ids):
        run.fail(
            "several blocks were given the same KVCache: each block caches its own keys and "
            "values, so make one cache per block, [KVCache() for _ in model.blocks].",
            case,
        )
    if any(c[2] is not None and c[3] > 0 and c[1] > 1 for c in later):
        run.fail(
            "after the prompt you run more than the newest token through blocks whose cache "
            "already holds the earlier ones: their keys and values get appended twice. Feed "
            "only the newest token (B, 1).",
            case,
        )
    if not TRUSTED.equal(out, expected):
        with torch.no_grad():
            for kw, message in _DECODE_MISTAKES:
                try:
                    variant = _decode_variant(model, idx, n, **kw)
                except Exception:
                    continue
                if TRUSTED.equal(out, variant):
                    run.fail(message + ".", case)
            message = _input_evidence(model, idx, out, recorder.inputs)
        if message is not None:
            run.fail(message, case)
        message = (
            _structure_evidence(calls, n, n_layers)
            or _chain_evidence(recorder.io, n_layers)
            or _argmax_evidence(idx, out, recorder.logits, n)
            or _head_evidence(model, idx, out, recorder.logits)
        )
        if message is not None:
            run.fail(message, case)
        if _random(run, case, out):
            run.fail(
                "two runs on the same prompt gave different tokens: your decoding is random. "
                "Greedy decoding takes the argmax of the logits (no sampling, no multinomial).",
                case,
            )
        wrong_rows = (out != expected).any(-1).nonzero()[:, 0].tolist()
        if out.shape[0] > 1 and 0 not in wrong_rows:
            run.fail(
                f"sequence 0 is right but sequence {wrong_rows[0]} is not: each row of the batch "
                "needs its own next token, argmax(dim=-1, keepdim=True) over its own logits.",
                case,
            )
        differ = (out != expected).nonzero()[0].tolist()
        run.fail(
            "the tokens differ from greedy decoding by full recomputation, first at sequence "
            f"{differ[0]}, index {differ[1]} (yours {out[differ[0], differ[1]].item()}, "
            f"expected {expected[differ[0], differ[1]].item()}).",
            case,
            named=False,
        )
    if not calls or all(c[2] is None for c in calls):
        run.fail(
            "the tokens are right, but no KV cache was used: pass one KVCache per block "
            "(block(x, cache=cache)) and, after the prompt, feed only the newest token.",
            case,
        )
    if any(c[2] is not None and c[3] == 0 for c in later):
        run.fail(
            "the tokens are right, but the caches start empty at a later step (rebuilt inside "
            "the loop, so everything is recomputed): make one KVCache per block once, before "
            "the loop, then feed only the newest token.",
            case,
        )
    if any(c[1] > 1 for c in later):
        run.fail(
            "the tokens are right, but after the prompt you recompute more than the newest "
            "token: with the cache, each step runs one token (B, 1) through the blocks.",
            case,
        )
    if prompt_calls and any(c[1] != idx.shape[1] for c in prompt_calls):
        run.fail(
            "run the whole prompt through the blocks in one pass first (it fills the caches).", case
        )


def _input_evidence(model, idx, out, inputs: list[Tensor]) -> str | None:
    """What the first block received, taken apart: token embedding + which position row?"""
    table = model.pos_emb.weight.detach()  # (max_len, C)
    T0 = idx.shape[1]
    with torch.no_grad():
        if inputs and tuple(inputs[0].shape[:2]) == tuple(idx.shape):
            rest = inputs[0] - model.tok_emb(idx)  # (B, T0, C): the prompt's positions
            if TRUSTED.allclose(rest, torch.zeros_like(rest), atol=1e-6):
                return (
                    "the prompt gets no position embeddings: x = tok_emb(idx) + pos_emb.weight[:T0] "
                    "(positions 0 .. T0 - 1)."
                )
            for r in range(1, table.shape[0] - T0 + 1):
                if TRUSTED.allclose(rest, table[r : r + T0].expand_as(rest), atol=1e-5):
                    return (
                        f"the prompt's positions start at {r}: the prompt fills positions "
                        f"0 .. T0 - 1, x = tok_emb(idx) + pos_emb.weight[:T0]."
                    )
        for step, x in enumerate(inputs[1:], start=1):
            L = T0 + step - 1  # index of the token fed at this step
            if x.shape[1] != 1 or L >= out.shape[1]:
                return None
            rest = x[:, 0] - model.tok_emb(out[:, L])  # (B, C)
            if TRUSTED.allclose(rest, table[L].expand_as(rest), atol=1e-5):
                continue
            if TRUSTED.allclose(rest, torch.zeros_like(rest), atol=1e-6):
                return (
                    "the new tokens get no position embedding: add pos_emb.weight[L : L + 1] to the "
                    f"embedding of the token at index L (here L = {L})."
                )
            for r in range(table.shape[0]):
                if TRUSTED.allclose(rest, table[r].expand_as(rest), atol=1e-5):
                    return (
                        f"the token at index {L} of the sequence got the embedding of position "
                        f"{r}: its position is its index in the whole sequence, prompt included "
                        f"(pos_emb.weight[{L} : {L + 1}])."
                    )
            return (
                f"after the prompt, the first block's input is not the new token's embedding "
                f"plus its position: feed tok_emb(new_id) + pos_emb.weight[L : L + 1] (at index {L})."
            )
    return None


def _random(run, case, out: Tensor) -> bool:
    """Rerun under another global seed: different tokens mean the decoding samples."""
    state = torch.get_rng_state()
    try:
        torch.manual_seed(12345)
        with torch.no_grad():
            again, error, _ = run.attempt(_clone(case.args), _clone(case.kwargs))
    finally:
        torch.set_rng_state(state)
    return (
        error is None
        and TRUSTED.is_tensor(again)
        and again.shape == out.shape
        and not TRUSTED.equal(again, out)
    )


def _prompt_rows(idx: Tensor, out: Tensor) -> str | None:
    """Each row of the output starts with SOME row of the prompt, not its own: the batch is lost."""
    B, T0 = idx.shape
    if B < 2 or out.dim() != 2 or out.shape[0] != B or out.shape[1] < T0:
        return None
    starts = out[:, :T0]
    for b in range(B):
        if TRUSTED.equal(starts[b], idx[b]):
            continue
        source = [r for r in range(B) if TRUSTED.equal(starts[b], idx[r])]
        if source:
            return (
                f"row {b} of your output starts with the prompt of row {source[0]}: each row of "
                "the batch continues its own prompt; keep all B rows through the loop (idx is "
                "(B, T0), the next token (B, 1))."
            )
        return None
    return None


def _head_evidence(model, idx: Tensor, out: Tensor, logits: list[Tensor]) -> str | None:
    """lm_head never ran, and each new token is the argmax of the hidden state instead."""
    T0 = idx.shape[1]
    if logits or out.shape[1] <= T0 or out.shape[0] != idx.shape[0]:
        return None
    with torch.no_grad():
        L = out.shape[1] - 1
        x = model.tok_emb(out[:, :L]) + model.pos_emb(L)  # (B, L, C)
        for block in model.blocks:
            x, _ = block(x, is_causal=True)
        for h in (model.norm_f(x), x):
            if TRUSTED.equal(h[:, T0 - 1 :].argmax(-1), out[:, T0:]):
                return (
                    "your new tokens are the argmax of the hidden state (B, C), not of the "
                    "logits: apply the head first, model.lm_head(model.norm_f(x[:, -1])), and "
                    "take the argmax over the vocabulary."
                )
    return None


def _structure_evidence(calls, n: int, n_layers: int) -> str | None:
    """What went through the blocks after the prompt, and with which caches."""
    prompt_ids = {c[2] for c in calls[:n_layers] if c[2] is not None}
    later = calls[n_layers:]
    if (
        calls[:n_layers]
        and not prompt_ids
        and later
        and all(c[2] is not None for c in later)
        and all(c[3] == 0 for c in later[:n_layers])
    ):
        return (
            "the prompt goes through the blocks without the caches, so its keys and values are "
            "never stored and the new tokens cannot attend to the prompt: pass cache=cache in "
            "the prompt's pass too."
        )
    if n > 1 and calls and not later:
        return (
            "after the prompt, the new tokens never go through the blocks: each step, run the "
            "newest token through every block (with its cache) before reading its logits."
        )
    if prompt_ids and later and all(c[2] is not None and c[2] not in prompt_ids for c in later):
        if all(c[3] == 0 for c in later[:n_layers]):
            return (
                "after the prompt, the blocks get new, empty caches: the new tokens must attend "
                "to the prompt's keys and values, so keep passing the caches the prompt filled."
            )
    return None


def _argmax_evidence(idx, out, logits: list[Tensor], n: int) -> str | None:
    """Is each appended token the argmax of the logits the student's own head computed?"""
    if len(logits) != n:
        return None  # lm_head not called once per step: nothing to line up
    T0, B = idx.shape[1], idx.shape[0]
    if _flattened_argmax(T0, B, out, logits):
        return (
            "every sequence gets the same token, the argmax over the whole batch's logits at "
            "once (flattened, modulo V): take one argmax per sequence, over its own vocabulary, "
            "logits.argmax(dim=-1, keepdim=True) -> (B, 1)."
        )
    for step, z in enumerate(logits):
        z = z[:, -1] if z.dim() == 3 else z
        if z.dim() != 2 or z.shape[0] != B or T0 + step >= out.shape[1]:
            return None
        chosen, best = out[:, T0 + step], z.argmax(-1)
        wrong = (chosen != best).nonzero()[:, 0].tolist()
        if not wrong:
            continue
        if all(chosen[b] == best[0] for b in wrong) and 0 not in wrong:
            return None  # row 0's token for every row: the per-row message says it
        return (
            f"at step {step} the appended token of sequence {wrong[0]} is not the argmax of the "
            "logits your head computed: greedy decoding appends logits.argmax(dim=-1, "
            "keepdim=True), with no sampling (no multinomial)."
        )
    return None


def _chain_evidence(io: list[tuple[int, Tensor, Tensor]], n_layers: int) -> str | None:
    """In the prompt pass, block i + 1 must read block i's output."""
    first = io[:n_layers]
    if [i for i, _, _ in first] != list(range(n_layers)):
        return None
    for (i, _, out), (j, x_next, _) in zip(first, first[1:]):
        if out.shape == x_next.shape and not TRUSTED.allclose(out, x_next, atol=1e-6):
            return (
                f"block {j} does not read block {i}'s output: chain the blocks, "
                "x, _ = block(x, is_causal=True, cache=cache), each taking the previous output."
            )
    return None


def _flattened_argmax(T0: int, B: int, out: Tensor, logits: list[Tensor]) -> bool:
    """Every step appends, to every row, the argmax over the flattened (B, V) logits (modulo V),
    and at some step that maximum lies outside row 0 (so it is not row 0's argmax copied)."""
    if B < 2 or out.shape[1] < T0 + len(logits):
        return False
    outside_row0 = False
    for step, z in enumerate(logits):
        z = z[:, -1] if z.dim() == 3 else z
        if z.dim() != 2 or z.shape[0] != B:
            return False
        flat = int(z.reshape(-1).argmax())
        if not bool((out[:, T0 + step] == flat % z.shape[-1]).all()):
            return False
        outside_row0 |= flat >= z.shape[-1]
    return outside_row0
