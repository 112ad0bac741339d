"""Checks for notebook 7 (GPT), part 4: greedy decoding with a key/value cache.

Student-facing signature:

    generate_greedy(model, idx, max_new_tokens) -> (B, T0 + max_new_tokens) ids: the prompt,
        then greedy tokens, computed incrementally with one KVCache per block

The reference is greedy decoding by full recomputation with the package's GPT (seeded random
weights), computed before the student's code runs. Forward pre-hooks on the blocks record how
many tokens each call gets and what its cache holds, so a correct answer that does not use the
cache (or appends to it twice) is named too: the hooks are in kv_cache_hooks.py, the diagnosis
of a wrong decoder in kv_cache_evidence.py and kv_cache_mistakes.py.
"""

from __future__ import annotations

import torch

from transformer_lab import positional as _positional
from transformer_lab.checks.engine.core import Case, Runner, describe_args, generator
from transformer_lab.checks.engine.messages import signature_hint
from transformer_lab.checks.nb07_gpt.gpt_shared import forbidden_gpt, random_gpt, tuple_hint
from transformer_lab.checks.nb07_gpt.kv_cache_evidence import _diagnose_decoding
from transformer_lab.checks.nb07_gpt.kv_cache_hooks import _Recorder
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import gpt as _gpt

__all__ = ["check_generate_greedy"]


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
