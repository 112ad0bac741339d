"""Notebook 07's explorers, driven through their controls: generation with the trained GPT, its
attention over a prompt, and the sampling explorer with a student's filter beside the reference.
What they show is checked against Hugging Face's logits warpers and the model's own outputs.
"""

from __future__ import annotations

import re

import matplotlib.colors
import numpy as np
import pytest
import torch

from transformer_lab import widgets as tw
from transformer_lab.checkpoints import load_pretrained
from transformer_lab.models.gpt import filter_logits as package_filter
from transformer_lab.widgets import _common as ui


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    """Build real explorers even if the suite itself runs under a grading flag."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


@pytest.fixture(scope="module")
def tiny_gpt():
    model, extras = load_pretrained("tiny_gpt")
    return model, extras["tokenizer"]


def _changes(explorer, name, value) -> None:
    before = explorer.image.value
    explorer.controls[name].value = value
    after = explorer.image.value
    assert after[:8] == b"\x89PNG\r\n\x1a\n"
    assert after != before, f"moving {name} to {value!r} did not change the picture"


def student_filter(logits, temperature=1.0, top_k=None, top_p=None):
    return package_filter(logits / temperature, top_k or None, top_p)


def hf_filter(logits, tau, top_k, top_p):
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    scores = TemperatureLogitsWarper(tau)(None, logits[None].clone())
    if top_k:
        scores = TopKLogitsWarper(top_k)(None, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(None, scores)
    return scores[0]


# --------------------------------------------------------------------------- generation
def test_generation_explorer_sliders_change_the_picture_and_the_text(tiny_gpt):
    model, tok = tiny_gpt
    ex = tw.generation_explorer(model, tok, prompt="ROMEO:", max_new_tokens=12)
    first = ex.state()
    assert len(first["text"]) == 12 and first["yours"] is None
    _changes(ex, "step", 5)
    _changes(ex, "temperature", 3.0)  # a flat distribution: visibly different bars
    hot = ex.state()
    _changes(ex, "seed", 4)  # at a high temperature another seed writes another text
    assert ex.state()["text"] != hot["text"]
    _changes(ex, "top_k", 3)
    assert (ex.state()["final"] > 0).sum() == 3
    _changes(ex, "top_p", 0.3)
    _changes(ex, "prompt", "JULIET:")
    assert "JULIET:" in ex.readout.value


def test_generation_shows_the_models_distribution_filtered_like_hugging_face(tiny_gpt):
    model, tok = tiny_gpt
    ex = tw.generation_explorer(model, tok, prompt="KING:", max_new_tokens=8)
    ex.set(temperature=0.7, top_k=10, top_p=0.8, step=3)
    st = ex.state()
    prefix = "KING:" + st["text"][:3]
    with torch.no_grad():
        logits = model(torch.tensor([tok.encode(prefix)])).logits[0, -1]
    np.testing.assert_allclose(st["probs"], torch.softmax(logits, -1).numpy(), rtol=1e-5, atol=1e-7)
    ref = torch.softmax(hf_filter(logits, 0.7, 10, 0.8), -1).numpy()
    np.testing.assert_allclose(st["final"], ref, rtol=1e-5, atol=1e-7)
    assert st["final"][st["chosen"]] > 0, "the sampled character was allowed"
    assert tok.itos[st["chosen"]] == st["text"][3]


def test_generation_uses_and_compares_the_students_filter(tiny_gpt):
    model, tok = tiny_gpt
    right = tw.generation_explorer(model, tok, filter_fn=student_filter, max_new_tokens=6)
    right.set(temperature=0.8, top_k=5)
    assert "agrees with the reference" in right.readout.value
    np.testing.assert_allclose(right.state()["yours"], right.state()["final"], atol=1e-6)

    def multiplies(logits, temperature=1.0, top_k=None, top_p=None):  # a typical mistake
        return package_filter(logits * temperature, top_k or None, top_p)

    wrong = tw.generation_explorer(model, tok, filter_fn=multiplies, max_new_tokens=6)
    wrong.set(temperature=0.3)
    assert re.search("differs? from the reference", wrong.readout.value)

    def broken(logits, temperature=1.0, top_k=None, top_p=None):
        raise NotImplementedError()

    shown = tw.generation_explorer(model, tok, filter_fn=broken, max_new_tokens=4)
    assert "NotImplementedError" in shown.readout.value  # shown, not raised


def test_generation_explorer_bad_input(tiny_gpt):
    model, tok = tiny_gpt
    with pytest.raises(ValueError, match=r"max_new_tokens must be an integer from 1 to 200"):
        tw.generation_explorer(model, tok, max_new_tokens=0)
    with pytest.raises(ValueError, match=r"outside the vocabulary: \['é'\]"):
        tw.generation_explorer(model, tok, prompt="café")
    with pytest.raises(TypeError, match=r"filter_fn must be a function, but received str"):
        tw.generation_explorer(model, tok, filter_fn="top_k")


# --------------------------------------------------------------------------- attention
def test_attention_explorer_shows_the_models_causal_weights(tiny_gpt):
    model, tok = tiny_gpt
    ex = tw.gpt_attention_explorer(model, tok, prompt="To be, or not")
    _changes(ex, "layer", 2)
    _changes(ex, "head", 3)
    st = ex.state()
    with torch.no_grad():
        maps = model(torch.tensor([tok.encode("To be, or not")]), output_attentions=True).attentions
    np.testing.assert_allclose(st["weights"], maps[2][0, 3].numpy(), atol=1e-6)
    assert np.allclose(np.triu(st["weights"], 1), 0.0), "nothing above the diagonal"
    np.testing.assert_allclose(st["weights"].sum(-1), 1.0, atol=1e-5)
    _changes(ex, "prompt", "ROMEO:\nAy me")
    assert ex.state()["weights"].shape == (12, 12) and ex.state()["tokens"][6] == "⏎"


def test_explorers_are_placeholders_under_grading(monkeypatch, tiny_gpt):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    for name in ("generation_explorer", "gpt_attention_explorer"):
        assert "switched off while grading" in repr(getattr(tw, name)())


# --------------------------------------------------------------------------- sampling + student
def test_sampling_explorer_draws_the_students_filter_beside_the_reference():
    ex = tw.sampling_explorer(
        torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]), tokens=list("abcde"), filter_fn=student_filter
    )
    _changes(ex, "top_k", 2)
    st = ex.state()
    np.testing.assert_allclose(st["yours"], st["final"], atol=1e-6)
    assert "same distribution" in ex.readout.value
    yours = [
        b.get_height()
        for b in ex.view.fast
        if getattr(b, "get_facecolor", None)
        and b.get_facecolor()[:3] == matplotlib.colors.to_rgb(ui.ORANGE)
    ]
    assert len(yours) == 5 and np.allclose(yours, st["yours"], atol=1e-6)

    def ties_dropped(logits, temperature=1.0, top_k=None, top_p=None):
        z = logits / temperature
        if top_k:
            keep = torch.zeros_like(z, dtype=torch.bool)
            keep[torch.topk(z, top_k).indices] = True
            z = z.masked_fill(~keep, float("-inf"))
        return z

    tied = tw.sampling_explorer(
        torch.tensor([2.0, 1.0, 1.0, 0.0]), tokens=list("abcd"), filter_fn=ties_dropped
    )
    _changes(tied, "top_k", 2)
    assert "different distribution" in tied.readout.value

    def raises(logits, temperature=1.0, top_k=None, top_p=None):
        raise ValueError("oops")

    broken = tw.sampling_explorer(filter_fn=raises)
    assert "raised ValueError: oops" in broken.readout.value
    with pytest.raises(TypeError, match="filter_fn must be a function"):
        tw.sampling_explorer(filter_fn=3)


def test_explorers_start_where_the_next_character_is_uncertain(tiny_gpt):
    """After "ROMEO:" the model gives a newline 99%: no knob would visibly do anything there."""
    model, tok = tiny_gpt
    ex = tw.generation_explorer(model, tok, max_new_tokens=4)
    probs = ex.state()["probs"]  # the first step's distribution, after the default prompt
    assert probs.max() < 0.5 and (np.sort(probs)[::-1].cumsum() < 0.9).sum() >= 5


def test_attention_explorer_fits_on_a_laptop_screen(tiny_gpt):
    model, tok = tiny_gpt
    ex = tw.gpt_attention_explorer(model, tok)
    import io as _io

    from PIL import Image

    height = Image.open(_io.BytesIO(ex.image.value)).size[1]
    assert height <= 400, f"the attention picture alone is {height} px tall"
