"""Notebook 9's explorers, driven through their sliders."""

from __future__ import annotations

import io

import numpy as np
import pytest

from transformer_lab import widgets as tw
from transformer_lab.tiled import merge_softmax_stats
from transformer_lab.widgets import GradingPlaceholder


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


def _moves(explorer, name, value) -> None:
    from PIL import Image

    def pixels(png):
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)

    before = explorer.image.value
    explorer.controls[name].value = value
    assert np.abs(pixels(explorer.image.value) - pixels(before)).max() > 50, (
        f"{name}={value} changed nothing"
    )


def test_online_softmax_reaches_the_exact_answer_after_the_last_block():
    ex = tw.online_softmax_explorer(merge_softmax_stats)
    _moves(ex, "step", 2)
    ex.set(block_size=5, step=4)  # 16 keys in blocks of 5: 4 blocks
    state = ex.state()
    assert state["output"] == pytest.approx(state["final"], abs=1e-5)
    assert state["student_output"] == pytest.approx(state["final"], abs=1e-5)
    ex.set(step=1)
    assert ex.state()["output"] != pytest.approx(ex.state()["final"], abs=1e-3)


def test_online_softmax_shows_a_students_unrescaled_merge():
    def no_rescale(m1, l1, o1, m2, l2, o2):
        import torch

        return torch.maximum(m1, m2), l1 + l2, o1 + o2

    ex = tw.online_softmax_explorer(no_rescale)
    ex.set(block_size=2, step=8)
    assert "differs" in ex.readout.value
    broken = tw.online_softmax_explorer(lambda *a: 1 / 0)
    assert "raised ZeroDivisionError" in broken.readout.value


def test_attention_cost_counts_memory_and_measures_time():
    ex = tw.attention_cost_explorer(max_len=512)
    ex.set(T=8192, block_size=128)
    state = ex.state()
    assert state["naive_bytes"] == 4 * 8192**2 and state["tiled_bytes"] == 4 * 8192 * 128
    assert state["naive_seconds"] > 0 and state["tiled_seconds"] > 0
    _moves(ex, "T", 256)
    _moves(ex, "block_size", 16)


def test_receptive_field_grows_linearly_with_depth():
    ex = tw.receptive_field_explorer(T=32)
    for w, L in [(4, 1), (4, 3), (5, 2), (32, 1), (3, 12)]:
        ex.set(window=w, layers=L)
        assert ex.state()["field"] == min(32, L * (w - 1) + 1)
    ex.set(window=4, layers=1)
    _moves(ex, "layers", 5)
    _moves(ex, "window", 2)


def test_scale_explorers_build_nothing_under_grading(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    for name in ["online_softmax_explorer", "attention_cost_explorer", "receptive_field_explorer"]:
        assert isinstance(getattr(tw, name)(), GradingPlaceholder)
