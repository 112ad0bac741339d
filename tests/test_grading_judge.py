"""The grader's verdicts (grading/decide/judge.py) on functions that live in another namespace.

The graded kernel is replaced by this process's own ``checks.engine.serve`` reached through the same
text protocol (no nbgrader, no sandbox): what is tested here is the decision, the proxies and
the wire format. The real thing, a sandboxed kernel under ``tlab grade``, is tested in
test_grading_e2e.py and test_grading_adversarial.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from transformer_lab.blocks import Block, LayerNorm
from transformer_lab.checks.engine import serve as _serve
from transformer_lab.grading.decide.judge import graded_calls, judge_cell, visible_source
from transformer_lab.grading.decide.remote import RemoteError, RemoteKernel

REPO = Path(__file__).resolve().parents[1]
CELL = (
    "assert True\nchecks.{check}({name})\n### BEGIN HIDDEN TESTS\n"
    "checks.{check}({name}, hidden=True)\n### END HIDDEN TESTS\n"
)


@pytest.fixture
def kernel():
    """A 'kernel' in this process: a namespace and the text protocol of a real one."""
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "Block": Block}
    namespace["LayerNorm"] = LayerNorm
    _serve.NAMESPACES.append(namespace)

    def send(expression: str, timeout: float) -> str:
        return repr(eval(expression, {}))

    remote = RemoteKernel(send)
    remote.namespace = namespace
    yield remote
    _serve.NAMESPACES.remove(namespace)


def _define(kernel, source: str) -> None:
    exec(source, kernel.namespace)


def _judge(kernel, check: str, name: str):
    return judge_cell(kernel, CELL.format(check=check, name=name), secret="s3cret")


def test_cells_are_split_and_parsed():
    source = CELL.format(check="check_softmax", name="softmax")
    assert "BEGIN HIDDEN" not in visible_source(source) and "hidden=True" not in visible_source(
        source
    )
    calls = graded_calls(source)
    assert [(c.name, c.expression, c.hidden) for c in calls] == [
        ("check_softmax", "softmax", False),
        ("check_softmax", "softmax", True),
    ]
    assert graded_calls("x = 1\nassert x == 1\n") == []


SOFTMAX = """
def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(x - m)
    total = e.sum(dim=dim, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))
"""


def test_a_correct_function_passes_visible_and_hidden_cases(kernel):
    _define(kernel, SOFTMAX)
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert verdict.passed, verdict.failure
    assert len(verdict.lines) == 2 and "hidden cases" in verdict.lines[1]
    assert verdict.requests > 20  # every case went to the 'kernel'


def test_a_mistake_is_named_as_the_instant_check_names_it(kernel):
    _define(kernel, "def softmax(x, dim=-1):\n    return torch.exp(x) / torch.exp(x).sum(0)")
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and "dimension 0" in verdict.failure


def test_a_call_the_kernel_reports_is_a_flag_never_the_verdict(kernel):
    # PyTorch's softmax differs on an all -inf row: the values fail it, the call log only flags
    _define(kernel, "def softmax(x, dim=-1):\n    return torch.softmax(x, dim)")
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and "-inf" in verdict.failure
    assert any("reported a call of" in f and "built-in softmax" in f for f in verdict.flags)


def test_hidden_cases_depend_on_the_secret(kernel):
    seen = []
    _define(kernel, SOFTMAX)
    inner = kernel.namespace["softmax"]

    def spy(x, dim=-1):
        seen.append(x.clone())
        return inner(x, dim)

    kernel.namespace["spy"] = spy
    source = "checks.check_softmax(spy, hidden=True)"
    judge_cell(kernel, source, secret="one")
    first, seen[:] = list(seen), []
    judge_cell(kernel, source, secret="two")
    assert len(first) == len(seen)
    assert not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, seen))


def test_random_draws_are_judged_by_their_properties(kernel):
    # torch.rand instead of torch.randint: other draws, same contract.
    _define(
        kernel,
        "def next_token_batch(data, T, B, generator):\n"
        "    n = len(data) - T\n"
        "    starts = (torch.rand(B, generator=generator) * n).long().clamp(max=n - 1)\n"
        "    idx = starts[:, None] + torch.arange(T + 1)\n"
        "    w = data[idx]\n"
        "    return w[:, :-1], w[:, 1:]\n",
    )
    verdict = _judge(kernel, "check_next_token_batch", "next_token_batch")
    assert verdict.passed, verdict.failure


GPT_BLOCKS = """
class GPTFromBlocks(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = config
        {first}
        {second}
        self.blocks = nn.ModuleList(
            Block(c.d_model, c.n_heads, c.d_ff, activation=c.activation, bias=c.bias, eps=c.eps)
            for _ in range(c.n_layers)
        )
        self.norm_f = LayerNorm(c.d_model, c.eps, c.bias)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
        for block in self.blocks:
            x, _ = block(x, is_causal={causal})
        return self.lm_head(self.norm_f(x))
"""
TOK = "self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)"
POS = "self.pos_emb = nn.Embedding(c.max_len, c.d_model)"


@pytest.mark.parametrize("first, second", [(TOK, POS), (POS, TOK)], ids=["tok_first", "pos_first"])
def test_a_student_module_is_judged_by_behaviour_with_weights_copied_in(kernel, first, second):
    _define(kernel, GPT_BLOCKS.format(first=first, second=second, causal=True))
    verdict = _judge(kernel, "check_gpt_from_blocks", "GPTFromBlocks")
    assert verdict.passed, verdict.failure


def test_a_student_module_that_leaks_the_future_is_named(kernel):
    _define(kernel, GPT_BLOCKS.format(first=TOK, second=POS, causal=False))
    verdict = _judge(kernel, "check_gpt_from_blocks", "GPTFromBlocks")
    assert not verdict.passed and "future" in verdict.failure


LOSS = """
def causal_lm_loss(logits, ids, attention_mask=None):
    V = logits.shape[-1]
    targets = ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)
    return loss{suffix}
"""


def test_gradients_flow_back_through_the_kernel(kernel):
    _define(kernel, LOSS.format(suffix=""))
    verdict = _judge(kernel, "check_causal_lm_loss", "causal_lm_loss")
    assert verdict.passed, verdict.failure


def test_a_detached_loss_is_named(kernel):
    _define(kernel, LOSS.format(suffix=".detach()"))
    verdict = _judge(kernel, "check_causal_lm_loss", "causal_lm_loss")
    assert not verdict.passed and "not connected" in verdict.failure


def test_an_in_place_change_of_an_input_is_seen(kernel):
    _define(
        kernel,
        SOFTMAX.replace("    m = x.amax", "    x.mul_(1.0)\n    x.add_(0.5)\n    m = x.amax"),
    )
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and "in place" in verdict.failure


def test_a_kernel_answer_that_is_not_plain_data_fails_with_a_flag(monkeypatch, kernel):
    kernel._send = lambda expression, timeout: "__import__('os').system('true')"
    _define(kernel, SOFTMAX)
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and any(f.startswith("kernel:") for f in verdict.flags)
    with pytest.raises(Exception, match="refused"):
        kernel.answer(kernel.request(op="len", target={"handle": 1}))


def _answering(kernel, answer: dict) -> None:
    """The 'kernel' answers every call with ``answer`` (a shim on the channel)."""
    real = kernel._send

    def send(expression: str, timeout: float) -> str:
        if "'op': 'call'" in repr(_request(expression)):
            return repr(json.dumps(answer))
        return real(expression, timeout)

    kernel._send = send


def _request(expression: str) -> dict:
    import base64
    import pickle

    payload = expression.split(".serve(", 1)[1].rstrip(")")
    return pickle.loads(base64.b64decode(eval(payload)))


@pytest.mark.parametrize("claim", ["KeyboardInterrupt", "StopIteration", "ReferenceUsed"])
def test_an_error_type_the_kernel_names_is_the_student_functions_error(kernel, claim):
    _define(kernel, SOFTMAX)
    _answering(kernel, {"error": {"type": claim, "message": "claimed"}, "calls": []})
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed  # a failed call of the student's function: no timeout, no crash
    assert not any(f.startswith(("timeout", "undecided")) for f in verdict.flags)


def test_answers_over_the_stated_limits_are_refused_and_flagged(kernel, monkeypatch):
    from transformer_lab.grading.decide import plain_data, remote

    _define(kernel, SOFTMAX)
    deep: object = {"seq": "list", "items": []}
    for _ in range(plain_data.MAX_DEPTH + 5):
        deep = {"seq": "list", "items": [deep]}
    _answering(kernel, {"out": deep, "calls": []})
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and any("nested deeper" in f for f in verdict.flags)
    monkeypatch.setattr(remote, "MAX_ANSWER", 1000)
    _answering(kernel, {"out": "x" * 600, "calls": []})  # its repr: within twice, over once
    kernel.raw = True
    kernel._send = lambda payload, timeout: json.dumps({"out": "x" * 1200})
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and any("over the stated size" in f for f in verdict.flags)


def test_a_kernel_that_never_answers_leaves_the_cell_undecided(kernel):
    def dead(expression: str, timeout: float) -> str:
        raise RemoteError("the kernel died")

    kernel._send = dead
    verdict = _judge(kernel, "check_softmax", "softmax")
    assert not verdict.passed and any(f.startswith("undecided: ") for f in verdict.flags)


HIDDEN_ASSERT = (
    "checks.check_softmax(softmax)\n### BEGIN HIDDEN TESTS\n"
    "checks.check_softmax(softmax, hidden=True)\n"
    "assert softmax(torch.zeros(4)).sum() == {total}, 'softmax must sum to {total}'\n"
    "### END HIDDEN TESTS\n"
)


def test_an_instructors_hidden_assert_counts(kernel):
    _define(kernel, SOFTMAX)
    verdict = judge_cell(kernel, HIDDEN_ASSERT.format(total=1), secret="s")
    assert verdict.passed and verdict.lines[-1] == "✓ hidden tests passed"
    verdict = judge_cell(kernel, HIDDEN_ASSERT.format(total=2), secret="s")
    assert not verdict.passed
    assert verdict.failure == "a hidden test failed: softmax must sum to 2"  # no code shown
    assert "assert" not in verdict.failure and not verdict.flags


def test_a_hidden_block_without_asserts_runs_nothing_more(kernel):
    from transformer_lab.grading.decide.judge import hidden_statements

    assert hidden_statements(CELL.format(check="check_softmax", name="softmax")) is None


def test_tensors_are_decoded_from_bytes_only(kernel):
    bad = {"tensor": "object", "shape": [1], "data": ""}
    with pytest.raises(RemoteError):
        kernel.decode(bad)
    wrong_size = {"tensor": "float32", "shape": [3], "data": "AAAAAA=="}
    with pytest.raises(RemoteError):
        kernel.decode(wrong_size)
    good = json.loads(json.dumps(_serve._encode(torch.arange(3.0))))
    assert torch.equal(kernel.decode(good), torch.arange(3.0))


def _solution(notebook: str, grade_id: str) -> str:
    import nbformat

    path = next((REPO / "solutions").glob(f"{notebook}*/*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return cell.source


@pytest.mark.parametrize(
    "notebook, grade_id, check, name",
    [
        ("04", "future_leaks_impl", "check_future_leaks", "future_leaks"),
        ("07", "generate_greedy_impl", "check_generate_greedy", "generate_greedy"),
        ("02", "torch_mha_impl", "check_to_torch_mha", "to_torch_mha"),
        ("08", "linear_to_conv_impl", "check_linear_to_conv", "linear_to_conv"),
        ("00", "count_pairs_impl", "check_count_pairs", "count_pairs"),
    ],
)
def test_solutions_whose_arguments_or_results_are_objects(kernel, notebook, grade_id, check, name):
    from transformer_lab import bpe
    from transformer_lab.heads import KVCache

    kernel.namespace.update(KVCache=KVCache, bpe=bpe)
    _define(kernel, _solution(notebook, grade_id))
    verdict = _judge(kernel, check, name)
    assert verdict.passed, verdict.failure


def test_dicts_with_tuple_keys_and_counters_come_back_as_dicts(kernel):
    _define(
        kernel,
        "from collections import Counter\n"
        "def count_pairs(words):\n"
        "    c = Counter()\n"
        "    for word, n in words.items():\n"
        "        for a, b in zip(word, word[1:]):\n"
        "            c[(a, b)] += n\n"
        "    return c\n",
    )
    verdict = _judge(kernel, "check_count_pairs", "count_pairs")
    assert verdict.passed, verdict.failure


def test_a_remote_function_has_the_exercises_declared_signature():
    """Under grading a check's message names the parameter as the instant check does ("changed
    its input `q` in place", not `args`): the proxy's signature is the declared one, never the
    kernel's word."""
    import inspect

    from transformer_lab.grading.decide.remote import RemoteFunction

    proxy = RemoteFunction(
        None, {"name": "scaled_dot_product_attention"}, "scaled_dot_product_attention"
    )
    assert list(inspect.signature(proxy).parameters) == ["q", "k", "v", "mask"]
    other = RemoteFunction(None, {"name": "helper"}, "helper")  # not an exercise: as before
    assert list(inspect.signature(other).parameters) == ["args", "kwargs"]
