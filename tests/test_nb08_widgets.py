"""Notebook 8's explorers, driven through their sliders: patches, [CLS] attention, confusion."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from transformer_lab import widgets as tw
from transformer_lab.interpret import attention_rollout
from transformer_lab.models import ViT, ViTConfig
from transformer_lab.models.vit import patchify
from transformer_lab.widgets import GradingPlaceholder


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def _moves(explorer, name, value) -> None:
    before = explorer.image.value
    explorer.controls[name].value = value
    after = explorer.image.value
    assert np.abs(_pixels(after) - _pixels(before)).max() > 50, (
        f"{name}={value!r} changed nothing visible"
    )


def _column_major(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


def test_patches_explorer_counts_and_draws_the_patches():
    ex = tw.patches_explorer()
    for P, N in [(1, 64), (4, 4), (8, 1), (2, 16)]:
        ex.controls["patch_size"].value = P
        state = ex.state()
        assert state["n_patches"] == N and state["attention_entries"] == (N + 1) ** 2
        assert f"N = (8/{P})² = {N}" in ex.readout.value
    image = ex.state()["patches"]
    _moves(ex, "image", 5)
    assert not np.array_equal(image, ex.state()["patches"])
    _moves(ex, "patch_size", 4)


def test_patches_explorer_marks_a_students_wrong_patches():
    right = tw.patches_explorer(patchify)
    assert not right.state()["differs"].any() and "matches the reference" in right.readout.value
    wrong = tw.patches_explorer(_column_major)
    assert wrong.state()["differs"].any() and "differs" in wrong.readout.value
    ex = tw.patches_explorer(lambda images, P: 1 / 0)
    assert "raised ZeroDivisionError" in ex.readout.value  # shown in the widget, no traceback


@pytest.fixture(scope="module")
def small_vit():
    torch.manual_seed(0)
    return ViT(ViTConfig.tiny(patch_size=2, n_layers=2, dropout=0.0)).eval()


def test_attention_explorer_moves_with_layer_head_image_and_rollout(small_vit):
    ex = tw.vit_attention_explorer(small_vit)
    first = ex.state()["map"]
    assert first.shape == (8, 8) and first.max() == pytest.approx(1.0)
    _moves(ex, "image", 3)
    _moves(ex, "layer", 0)
    _moves(ex, "head", 1)
    ex.set(rollout=True, head=-1, layer=1)
    with torch.no_grad():
        out = small_vit(ex_digits_x(3), output_attentions=True)
    expected = attention_rollout(list(out.attentions))[0, 0, 1:]
    assert np.allclose(ex.state()["cls_weights"], expected.numpy(), atol=1e-6)


def ex_digits_x(i):
    from transformer_lab.data import load_digits_data

    return load_digits_data(seed=0, normalize=True).x_test[i : i + 1]


def test_attention_explorer_compares_the_students_rollout(small_vit):
    right = tw.vit_attention_explorer(small_vit, rollout=attention_rollout)
    right.set(rollout=True)
    assert right.state()["student_verdict"] == "matches the reference"

    def wrong_order(attentions):
        out = None
        for a in attentions:
            m = 0.5 * a.mean(1) + 0.5 * torch.eye(a.shape[-1])
            out = m if out is None else out @ m
        return out

    wrong = tw.vit_attention_explorer(small_vit, rollout=wrong_order)
    wrong.set(rollout=True)
    assert wrong.state()["student_verdict"].startswith("differs")


def test_confusion_explorer_on_the_shipped_model():
    ex = tw.confusion_explorer()
    state = ex.state()
    assert state["confusion"].sum() == 360 and state["accuracy"] > 0.97
    assert state["n_mistakes"] == 360 - np.trace(state["confusion"])
    true, predicted = state["shown"]
    assert true != predicted
    if state["n_mistakes"] > 1:
        _moves(ex, "mistake", 1)


def test_explorers_build_nothing_under_grading(monkeypatch):
    monkeypatch.setenv("TLAB_GRADING", "1")
    for name in ["patches_explorer", "vit_attention_explorer", "confusion_explorer"]:
        assert isinstance(getattr(tw, name)(), GradingPlaceholder)


def test_patch_strip_is_labelled_with_patch_numbers_and_counts_in_the_singular():
    ex = tw.patches_explorer(patchify)
    ex.controls["patch_size"].value = 4  # N = 4 patches of 4 x 4, each followed by a blank column
    strips = [ax for ax in ex.figure.axes if ax.get_xticklabels()]
    assert len(strips) == 2  # the reference's sequence and the student's
    for ax in strips:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3"]
        assert list(ax.get_xticks()) == [1.5, 6.5, 11.5, 16.5]  # the centre of each patch
    ex.controls["patch_size"].value = 8
    assert "= 1 patch of" in ex.readout.value and "1 patches" not in ex.readout.value
    ex.controls["patch_size"].value = 1  # 64 patches: at most 16 labels
    assert len(strips[0].get_xticklabels()) == 16


def test_rollout_panels_are_drawn_alike_with_a_colour_bar(small_vit):
    ex = tw.vit_attention_explorer(small_vit, rollout=attention_rollout)
    assert len(ex.figure.axes) == 4, "image, reference map, your map and one colour bar"
    mine = ex.figure.axes[2].images[0].get_array()
    assert np.isnan(np.asarray(mine, dtype=float)).all(), "nothing drawn (not black) before ticking"
    assert "tick" in ex.figure.axes[2].get_title()
    ex.set(rollout=True)
    reference, yours = (ex.figure.axes[i].images for i in (1, 2))
    np.testing.assert_allclose(yours[0].get_array(), reference[0].get_array())
    assert len(reference) == len(yours) == 2  # each map with the digit over it
    np.testing.assert_allclose(yours[1].get_array(), reference[1].get_array())
