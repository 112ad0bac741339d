"""Notebook 05's checks: correct implementations in several styles pass, a catalogue of realistic
wrong implementations (at least eight per exercise) is diagnosed with the right words, the share
named is reported, and "check passes" implies "graded cell passes" (the graded cells are run from
the solution notebook itself).

The catalogue (correct variants and wrong implementations, each written the way a student would
write it) is tests/catalogues/nb05.py, in the holdout's format; the one floor test
(tests/holdout/test_holdout.py) holds it to its recorded share too.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.catalogues.nb05 import (
    CATALOGUE,
    GOOD,
    count_good,
    enc_good,
    ln_good,
    mlp_good,
)
from transformer_lab import checks
from transformer_lab.checks.nb05_transformer_block.sizes import reference_count

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solutions" / "05_transformer_block" / "05_transformer_block.ipynb"


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("check,impl", GOOD, ids=[impl.__name__ for _, impl in GOOD])
def test_correct_implementations_pass(check, impl, hidden, capsys):
    check(impl, hidden=hidden)
    line = capsys.readouterr().out.strip()
    assert line.startswith("✓ ") and "passed" in line


def test_reference_count_matches_huggingface_bert_and_gpt2():
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=101,
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=40,
            max_position_embeddings=23,
            type_vocab_size=2,
        ),
        add_pooling_layer=False,
    )
    gpt2 = transformers.GPT2Model(
        transformers.GPT2Config(vocab_size=57, n_positions=19, n_embd=12, n_layer=3, n_head=3)
    )
    bert_config = dict(
        vocab_size=101,
        max_len=23,
        n_segments=2,
        n_layers=2,
        n_heads=2,
        d_model=16,
        d_ff=40,
        cross_attention=False,
    )
    gpt2_config = dict(
        vocab_size=57,
        max_len=19,
        n_segments=0,
        n_layers=3,
        n_heads=3,
        d_model=12,
        d_ff=48,
        cross_attention=False,
    )
    assert reference_count(bert_config) == sum(p.numel() for p in bert.parameters())
    assert reference_count(gpt2_config) == sum(p.numel() for p in gpt2.parameters())


GENERIC = re.compile(
    r"differs? from the reference by up to|contains NaN or inf|^check_\w+: yours is"
)


def _message(check, impl) -> str | None:
    try:
        check(impl)
    except AssertionError as exc:
        return str(exc)
    return None


def _classify(message: str | None, words: str) -> str:
    if message is None:
        return "passed"
    if words in message:
        return "named"
    return "generic" if GENERIC.search(message) else "misleading"


@pytest.mark.parametrize(
    "check,impl,words", CATALOGUE, ids=[f"{c.__name__}-{i.__name__}" for c, i, _ in CATALOGUE]
)
def test_catalogue_mistake_is_named(check, impl, words):
    message = _message(check, impl)
    assert message is not None, f"{impl.__name__} passed {check.__name__}"
    assert message.startswith(check.__name__ + ":")
    assert words in message, message


def test_catalogue_share_named_and_none_misleading():
    per_check: dict[str, list[int]] = {}
    misleading = []
    for check, impl, words in CATALOGUE:
        verdict = _classify(_message(check, impl), words)
        counts = per_check.setdefault(check.__name__, [0, 0])
        counts[0] += verdict == "named"
        counts[1] += 1
        if verdict in ("misleading", "passed"):
            misleading.append((impl.__name__, verdict))
    named = sum(n for n, _ in per_check.values())
    total = sum(t for _, t in per_check.values())
    print(f"\nnotebook 05 catalogue: {named}/{total} named ({named / total:.0%})")
    for name, (n, t) in per_check.items():
        print(f"  {name:26s} {n}/{t}")
    assert all(t >= 8 for _, t in per_check.values()), per_check
    assert named / total >= 0.95
    assert not misleading, misleading


# ---------------------------------------------------------------------------------------------
# "check passes" implies "graded cell passes", with the graded cells of the solution notebook.
GRADED = {
    checks.check_layer_norm: ("layer_norm", "layer_norm_tests"),
    checks.check_mlp: ("mlp", "mlp_tests"),
    checks.check_encoder_block: ("encoder_block", "encoder_block_tests"),
    checks.check_decoder_block: ("decoder_block", "decoder_block_tests"),
    checks.check_count_parameters: ("count_parameters", "count_parameters_tests"),
}


@pytest.fixture(scope="module")
def notebook_cells():
    nb = nbformat.read(SOLUTION, as_version=4)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells}
    setup = next(c.source for c in nb.cells if c.cell_type == "code")
    setup = "\n".join(line for line in setup.splitlines() if not line.startswith("%"))
    return setup, by_id


def _graded_cell_passes(setup: str, source: str, name: str, impl) -> bool:
    namespace: dict = {}
    exec(setup, namespace)  # noqa: S102  (the notebook's own import cell)
    namespace[name] = impl
    try:
        exec(source, namespace)  # noqa: S102
    except Exception:  # AssertionError from an assert or a check, or any error of the impl
        return False
    return True


EXTRA_NEAR_MISSES = [
    (checks.check_layer_norm, lambda x, gain, bias, eps=1e-5: ln_good(x, gain, bias, eps).double()),
    (
        checks.check_mlp,
        lambda x, w_1, b_1, w_2, b_2: mlp_good(x.reshape(-1, x.shape[-1]), w_1, b_1, w_2, b_2),
    ),
    (
        checks.check_encoder_block,
        lambda x, layer, norm_first, mask=None: (
            enc_good(x, layer, norm_first, mask).detach().clone()[:, :]
        ),
    ),
    (checks.check_count_parameters, lambda c: torch.tensor(count_good(c))),
]


@pytest.mark.parametrize(
    "check,impl",
    [(c, i) for c, i, _ in CATALOGUE] + GOOD + EXTRA_NEAR_MISSES,
    ids=lambda v: getattr(v, "__name__", "impl"),
)
def test_check_passing_implies_graded_cell_passing(check, impl, notebook_cells, capsys):
    setup, cells = notebook_cells
    name, grade_id = GRADED[check]
    check_ok = _message(check, impl) is None
    graded_ok = _graded_cell_passes(setup, cells[grade_id], name, impl)
    assert graded_ok or not check_ok, (
        f"{check.__name__} passed but the graded cell {grade_id} failed"
    )
    if check in {c for c, _ in GOOD} and impl in {i for _, i in GOOD}:
        assert graded_ok, f"a correct implementation failed the graded cell {grade_id}"


# ---------------------------------------------------------------------------------------------
# The reference and PyTorch's built-ins are disabled while the student's function runs.
@pytest.mark.parametrize(
    "check,impl,words",
    [
        (
            checks.check_layer_norm,
            lambda x, g, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], g, b, eps),
            "built-in layer norm",
        ),
        (
            checks.check_mlp,
            lambda x, w_1, b_1, w_2, b_2: _feed_forward(x, w_1, b_1, w_2, b_2),
            "FeedForward",
        ),
        (
            checks.check_encoder_block,
            lambda x, layer, norm_first, mask=None: _torch_encoder(x, norm_first),
            "TransformerEncoderLayer",
        ),
    ],
    ids=["F.layer_norm", "FeedForward", "nn.TransformerEncoderLayer"],
)
def test_references_are_disabled(check, impl, words):
    with pytest.raises(AssertionError, match=words):
        check(impl)


def _feed_forward(x, w_1, b_1, w_2, b_2):
    from transformer_lab.blocks import FeedForward

    ff = FeedForward(w_1.shape[0], w_1.shape[1], activation="gelu")
    with torch.no_grad():
        ff.fc1.weight.copy_(w_1.T)
        ff.fc1.bias.copy_(b_1)
        ff.fc2.weight.copy_(w_2.T)
        ff.fc2.bias.copy_(b_2)
    return ff(x)


def _torch_encoder(x, norm_first):
    layer = nn.TransformerEncoderLayer(x.shape[-1], 2, 4 * x.shape[-1], batch_first=True)
    return layer.eval()(x)


def test_untouched_functions_say_not_implemented():
    def untouched(*args, **kwargs):
        raise NotImplementedError()

    for check in GRADED:
        with pytest.raises(AssertionError, match="not implemented yet"):
            check(untouched)


def test_checks_leave_the_global_rng_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    for check, impl in GOOD[:: max(1, len(GOOD) // 5)]:
        check(impl)
    assert torch.equal(torch.rand(3), expected)
