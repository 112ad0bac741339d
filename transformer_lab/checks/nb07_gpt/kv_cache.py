"""Checks for notebook 7 (GPT), part 4: greedy decoding with a key/value cache.

Student-facing signature:

    generate_greedy(model, idx, max_new_tokens) -> (B, T0 + max_new_tokens) ids: the prompt,
        then greedy tokens, computed incrementally with one KVCache per block

The reference is greedy decoding by full recomputation with the package's GPT (seeded random
weights), computed before the student's code runs. Forward pre-hooks on the blocks record how
many tokens each call gets and what its cache holds, so a correct answer that does not use the
cache (or appends to it twice) is named too.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab import positional as _positional
from transformer_lab.checks.engine.core import Case, Runner, _clone, describe_args, generator
from transformer_lab.checks.engine.guards import TRUSTED
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.nb07_gpt.gpt_model import forbidden_gpt, random_gpt, tuple_hint
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.heads import KVCache
from transformer_lab.models import gpt as _gpt

__all__ = ["check_generate_greedy"]


def _decode_variant(
    model, idx, n, offset="right", prompt_mask=True, logits_at=-1, fresh=False, final_norm=True
) -> Tensor:
    """Greedy decoding with the cache and one known mistake."""
    caches = [KVCache() for _ in model.blocks]
    out = idx
    table = model.pos_emb.weight  # (max_len, C)
    for step in range(n):
        if step == 0:
            tokens, start = idx, 0
        else:
            tokens = out[:, -1:]  # (B, 1)
            start = {"right": out.shape[1] - 1, "zero": 0, "plus1": out.shape[1]}[offset]
            if fresh:
                caches = [KVCache() for _ in model.blocks]
        T = tokens.shape[1]
        x = model.tok_emb(tokens) + table[start : start + T]  # (B, T, C)
        if x.shape[1] != T:
            raise IndexError("past the position table")
        for block, cache in zip(model.blocks, caches):
            x, _ = block(x, is_causal=prompt_mask or step > 0, cache=cache)
        h = x[:, logits_at if step == 0 else -1]  # (B, C)
        logits = model.lm_head(model.norm_f(h) if final_norm else h)  # (B, V)
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
    return out


_DECODE_MISTAKES = [
    (
        dict(offset="zero"),
        "the new tokens' positions are not offset: the token at index L of the sequence sits "
        "at position L, so add row L of the table, pos_emb.weight[L : L + 1], not position 0",
    ),
    (
        dict(offset="plus1"),
        "the positions are off by one: the newest token, at index L - 1 of a sequence of "
        "length L, sits at position L - 1 (the prompt fills 0 .. T0 - 1)",
    ),
    (
        dict(prompt_mask=False),
        "the prompt runs without the causal mask: the first pass over the T0 prompt tokens "
        "needs it (is_causal=True), or early prompt tokens see later ones",
    ),
    (
        dict(logits_at=0),
        "after the prompt, the next token comes from the LAST position's logits (x[:, -1]), "
        "not the first",
    ),
    (
        dict(fresh=True),
        "a new, empty cache each step forgets the context: make one KVCache per block once, "
        "before the loop, and keep passing the same ones",
    ),
    (
        dict(final_norm=False),
        "the final layer norm is missing: logits = lm_head(norm_f(x[:, -1]))",
    ),
]


class _Recorder:
    """Forward pre-hooks on the blocks: how many tokens each call got and what its cache held.

    Under grading the student's decoder runs in the graded kernel on a pickled copy of the
    model, hooks and recorder included; the attributes in ``_tlab_sync`` come back after the
    call (the model carries its recorder as ``_tlab_recorder``, see checks.engine.serve)."""

    _tlab_sync = ("calls", "inputs", "logits", "io")

    def __init__(self, model) -> None:
        self.calls: list[tuple[int, int, int | None, int]] = []  # (block, T, cache id, cached)
        self.inputs: list[Tensor] = []  # what the first block received, call by call
        self.caches: list[KVCache] = []
        self.logits: list[Tensor] = []  # what lm_head returned, call by call
        self.io: list[tuple[int, Tensor, Tensor]] = []  # (block, input, output), first calls
        self.handles = [
            block.register_forward_pre_hook(_PreHook(self, i), with_kwargs=True)
            for i, block in enumerate(model.blocks)
        ]
        self.handles.append(model.lm_head.register_forward_hook(_HeadHook(self)))
        self.handles += [
            block.register_forward_hook(_IOHook(self, i), with_kwargs=True)
            for i, block in enumerate(model.blocks)
        ]
        self.model = model
        model._tlab_recorder = self

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.model.__dict__.pop("_tlab_recorder", None)


class _PreHook:
    """Before block i: the tokens it gets and the cache it is given."""

    def __init__(self, recorder: _Recorder, i: int) -> None:
        self.recorder, self.i = recorder, i

    def __call__(self, module, args, kwargs):
        rec, i = self.recorder, self.i
        x = args[0] if args else kwargs.get("x")
        cache = kwargs.get("cache", args[5] if len(args) > 5 else None)
        cached = cache.length if isinstance(cache, KVCache) else 0
        if cache is not None:
            rec.caches.append(cache)  # held, so that no later cache can reuse its id
        rec.calls.append((i, x.shape[1], None if cache is None else id(cache), cached))
        if i == 0 and isinstance(x, torch.Tensor) and len(rec.inputs) < 64:
            rec.inputs.append(x.detach().clone())


class _IOHook:
    """After block i: what went in and what came out (first calls only)."""

    def __init__(self, recorder: _Recorder, i: int) -> None:
        self.recorder, self.i = recorder, i

    def __call__(self, module, args, kwargs, output):
        x = args[0] if args else kwargs.get("x")
        y = output[0] if isinstance(output, tuple) else output
        io = self.recorder.io
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and len(io) < 16:
            io.append((self.i, x.detach().clone(), y.detach().clone()))


class _HeadHook:
    """After the head: the logits of each call."""

    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    def __call__(self, module, args, output) -> None:
        if isinstance(output, torch.Tensor) and len(self.recorder.logits) < 64:
            self.recorder.logits.append(output.detach().clone())


def _decode_cases(hidden: bool) -> list[tuple[_gpt.GPTConfig, int, int, int, int]]:
    C = _gpt.GPTConfig
    small = C(vocab_size=19, max_len=16, n_layers=2, n_heads=2, d_model=16)
    cases = [(small, 2, 5, 6, 0), (small, 1, 1, 4, 1), (small, 3, 10, 6, 2)]  # 10 + 6 = max_len
    if hidden:
        other = C(vocab_size=31, max_len=20, n_layers=3, n_heads=4, d_model=32, tie_weights=False)
        cases += [(other, 4, 2, 7, 3), (small, 2, 15, 1, 5)]
    return cases


def _raised_in_position_table(exc: BaseException) -> bool:
    """Did the error happen inside the package's LearnedPositionalEmbedding.forward?"""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "forward" and code.co_filename == _positional.__file__:
            return True
        tb = tb.tb_next
    return False


def check_generate_greedy(generate_greedy, hidden: bool = False) -> None:
    """Check ``generate_greedy(model, idx, max_new_tokens)``: exactly the tokens of greedy
    decoding by full recomputation, while each step after the prompt runs only the newest
    token through the blocks, with one cache per block kept across steps."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message

    def hint(e: BaseException, c: Case) -> str:
        if _raised_in_position_table(e):
            return (
                "the error is inside model.pos_emb: the package's GPT holds a "
                "LearnedPositionalEmbedding, called as pos_emb(T, offset=...), not an "
                "nn.Embedding called with a tensor of positions as in Exercise 3; use its rows "
                "directly, model.pos_emb.weight[offset : offset + T], which works for both"
            )
        if "Sizes of tensors must match" in str(e):
            return "take the argmax over the vocabulary, argmax(dim=-1, keepdim=True): one (B, 1) token per sequence"
        return tuple_hint(e) or signature_hint(e, "generate_greedy(model, idx, max_new_tokens)")

    run = Runner("check_generate_greedy", generate_greedy, forbidden_gpt(), hidden, hint)
    models: dict[int, _gpt.GPT] = {}
    for config, B, T0, n, seed in _decode_cases(hidden):
        key = id(config)
        if key not in models:
            models[key] = random_gpt(config, seed=710 + seed)
        model = models[key]
        idx = torch.randint(0, config.vocab_size, (B, T0), generator=generator(70 + seed))
        with torch.no_grad():
            expected = idx
            for _ in range(n):  # full recomputation, no cache
                nxt = model(expected).logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
                expected = torch.cat([expected, nxt], dim=1)
        case = Case(
            f"prompt {(B, T0)}, {n} new tokens",
            (model, idx, n),
            {},
            f"{describe_args(idx=idx)}, max_new_tokens={n}, max_len={config.max_len}",
        )
        recorder = _Recorder(model)
        try:
            with torch.no_grad():
                value = run.call(case)
        finally:
            recorder.remove()

        def hint(got: tuple, B=B, T0=T0, n=n) -> str | None:
            if got == (B, n):
                return "return the prompt followed by the new tokens, (B, T0 + max_new_tokens)"
            if got[:1] == (B,) and len(got) == 2 and abs(got[1] - (T0 + n)) == 1:
                what = "one token short" if got[1] < T0 + n else "one token too many"
                return (
                    f"{what}: append exactly max_new_tokens = {n} new tokens (the loop runs "
                    "max_new_tokens times, one token each)"
                )
            return None

        out = run.expect_tensor(value, case, expected.shape, torch.long, "token ids", hint)
        _diagnose_decoding(run, case, model, idx, n, out, expected, recorder, config.n_layers)
    run.passed()


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


register(
    Exercise(
        "generate_greedy",
        "07_gpt",
        "generate_greedy(model, idx, max_new_tokens) -> (B, T0 + max_new_tokens)",
        cells=(Cell("generate_greedy_tests", "generate_greedy", 2),),
        check=check_generate_greedy,
        against="greedy decoding by full recomputation with transformer_lab.models.GPT",
    )
)
