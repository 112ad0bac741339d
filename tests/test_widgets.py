"""The explorers: driven through their controls, checked against references nobody here wrote.

Every test moves a control by setting ``.value`` (exactly what a slider drag does in the kernel)
and asserts both that the picture changed and, where cheap, that what is plotted is right.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from widget_helpers import assert_blit_matches_full_draw, changes_picture

from transformer_lab import SelfAttention
from transformer_lab import widgets as tw

ROOT = Path(__file__).resolve().parents[1]
EXPLORERS = [
    "softmax_explorer",
    "scaling_explorer",
    "attention_explorer",
    "heads_explorer",
    "positional_explorer",
    "mask_explorer",
    "sampling_explorer",
    "equivariance_explorer",
    "cost_explorer",
    "head_layout_explorer",
    "position_kinds_explorer",
    "rope_explorer",
    "cross_attention_explorer",
    "masked_row_explorer",
    "leak_explorer",
]


@pytest.fixture(autouse=True)
def interactive(monkeypatch):
    """Build real explorers even if the suite itself runs under a grading flag."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


# --------------------------------------------------------------------------- import and grading


def test_importing_loads_neither_ipywidgets_nor_matplotlib_and_grading_builds_nothing():
    code = (
        "import sys, transformer_lab, transformer_lab.widgets as w\n"
        f"fns = [getattr(w, n) for n in {EXPLORERS!r}]\n"
        "assert 'ipywidgets' not in sys.modules and 'matplotlib' not in sys.modules, 'eager import'\n"
        "outs = [f() for f in fns]\n"
        "assert all(type(o).__name__ == 'GradingPlaceholder' for o in outs), outs\n"
        "assert 'ipywidgets' not in sys.modules and 'matplotlib' not in sys.modules, 'grading imported widgets'\n"
        "print(repr(outs[0]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    env["TLAB_GRADING"] = "1"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert "switched off while grading" in run.stdout


@pytest.mark.parametrize("name", EXPLORERS)
def test_under_nbgrader_every_explorer_is_a_placeholder(name, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    out = getattr(tw, name)()
    assert isinstance(out, tw.GradingPlaceholder)
    assert out.controls == {} and out.figure is None and out.state() == {}
    assert "grading" in out._repr_html_()


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_explorer"):
        tw.no_such_explorer  # noqa: B018


# --------------------------------------------------------------------------- shared machinery


def test_explorer_is_a_widget_redrawn_in_place():
    import ipywidgets

    ex = tw.softmax_explorer()
    assert isinstance(ex, ipywidgets.Widget) and isinstance(ex.image, ipywidgets.Image)
    assert ex.image.format == "png"
    figure, n_artists = ex.figure, [len(ax.get_children()) for ax in ex.figure.axes]
    for tau in (0.1, 0.5, 3.0):
        ex.controls["temperature"].value = tau
    assert ex.figure is figure
    assert [len(ax.get_children()) for ax in ex.figure.axes] == n_artists  # updated, not re-created
    assert ex.last_update_seconds > 0


def test_set_redraws_once_and_rejects_unknown_controls():
    ex = tw.sampling_explorer()
    before = ex.image.value
    ex.set(top_k=3, top_p=0.5)
    assert ex.image.value != before
    assert ex.state()["top_k"] == 3 and ex.state()["top_p"] == 0.5
    with pytest.raises(ValueError, match=r"controls must be among .* but received \['top_q'\]"):
        ex.set(top_q=0.5)


def test_state_returns_copies():
    ex = tw.softmax_explorer()
    ex.state()["probs"][:] = 0
    assert ex.state()["probs"].sum() == pytest.approx(1.0)


# --------------------------------------------------------------------------- softmax


def test_softmax_bars_are_torch_softmax_of_scores_over_temperature():
    scores = [1.5, -0.5, 0.25, 3.0]
    ex = tw.softmax_explorer(scores=scores, labels=list("abcd"))
    for tau in (0.05, 0.3, 1.0, 7.0, 20.0):
        ex.controls["temperature"].value = tau
        st = ex.state()
        expected = torch.softmax(torch.tensor(scores) / st["temperature"], dim=-1)
        torch.testing.assert_close(torch.from_numpy(st["probs"]), expected, rtol=1e-5, atol=1e-7)
        heights = [bar.get_height() for bar in ex.figure.axes[1].patches]
        np.testing.assert_allclose(heights, expected.numpy(), rtol=1e-5, atol=1e-7)  # what is drawn
        ref_entropy = torch.distributions.Categorical(probs=expected).entropy()
        assert st["entropy"] == pytest.approx(float(ref_entropy), abs=1e-5)


def test_softmax_temperature_changes_the_picture_and_the_shift_changes_nothing_that_matters():
    ex = tw.softmax_explorer()
    p1 = ex.state()["probs"]
    changes_picture(ex, "temperature", 0.2)
    assert ex.state()["probs"].max() > p1.max()  # colder = sharper
    p2 = ex.state()["probs"]
    changes_picture(ex, "shift", 3.0)  # the score bars move ...
    np.testing.assert_allclose(
        ex.state()["probs"], p2, rtol=1e-5, atol=1e-7
    )  # ... the softmax does not
    assert_blit_matches_full_draw(ex)


def test_softmax_explorer_bad_input():
    with pytest.raises(ValueError, match=r"scores must hold 2 to 32 values, but received 1\."):
        tw.softmax_explorer(scores=[1.0])
    with pytest.raises(ValueError, match=r"received 2 labels for 3 scores\."):
        tw.softmax_explorer(scores=[1.0, 2.0, 3.0], labels=["a", "b"])
    with pytest.raises(
        ValueError, match=r"temperature must lie between 0\.05 and 20, but received temperature=0\."
    ):
        tw.softmax_explorer(temperature=0)
    with pytest.raises(TypeError, match=r"scores must be a tensor or a list of numbers"):
        tw.softmax_explorer(scores=["a", "b"])
    with pytest.raises(ValueError, match=r"scores must have 1 dimensions"):
        tw.softmax_explorer(scores=torch.zeros(2, 2))


# --------------------------------------------------------------------------- scaling


def test_scaling_spread_grows_like_sqrt_dk_and_scaling_undoes_it():
    ex = tw.scaling_explorer(n_queries=256, n_keys=16)
    for d_k in (1, 16, 256):
        ex.controls["d_k"].value = d_k
        st = ex.state()
        # 4096 products: the sample std is within a few percent of sqrt(d_k).
        assert st["std_unscaled"] == pytest.approx(math.sqrt(d_k), rel=0.1)
        assert st["std_scaled"] == pytest.approx(1.0, rel=0.1)
        np.testing.assert_allclose(st["scaled"], st["unscaled"] / math.sqrt(d_k), rtol=1e-6)
        for kind in ("unscaled", "scaled"):
            ref = torch.softmax(torch.from_numpy(st[kind]).view(256, 16), dim=-1)
            ref = ref.sort(dim=-1, descending=True).values.mean(dim=0)
            np.testing.assert_allclose(
                st[f"sorted_weights_{kind}"], ref.numpy(), rtol=1e-5, atol=1e-6
            )
            assert st[f"max_weight_{kind}"] == pytest.approx(float(ref[0]), rel=1e-5)
    # Saturation: at d_k = 256 the unscaled softmax is nearly one-hot, the scaled one is not.
    assert st["max_weight_unscaled"] > 0.8 and st["max_weight_scaled"] < 0.5


def test_scaling_slider_changes_the_picture():
    ex = tw.scaling_explorer()
    changes_picture(ex, "d_k", 4)
    changes_picture(ex, "d_k", 512)
    assert_blit_matches_full_draw(ex)


def test_scaling_explorer_bad_input():
    with pytest.raises(
        ValueError, match=r"max_d_k must be a power of two up to 4096, but received max_d_k=100\."
    ):
        tw.scaling_explorer(max_d_k=100)
    with pytest.raises(
        ValueError, match=r"d_k must be a power of two up to max_d_k=512, but received d_k=3\."
    ):
        tw.scaling_explorer(d_k=3)
    with pytest.raises(ValueError, match=r"n_keys must be at least 2"):
        tw.scaling_explorer(n_keys=1)
    with pytest.raises(
        ValueError, match=r"n_queries must be a positive integer, but received n_queries=0\."
    ):
        tw.scaling_explorer(n_queries=0)


# --------------------------------------------------------------------------- attention maps


def test_attention_weights_match_torch_softmax_and_fused_attention():
    ex = tw.attention_explorer()
    D = ex.state()["q"].shape[-1]
    for factor in (1 / math.sqrt(D), 1.0, 1 / D, 2.0):
        ex.controls["scale"].value = factor
        st = ex.state()
        q, k, v = (torch.from_numpy(st[n]) for n in ("q", "k", "v"))
        assert st["factor"] == factor
        ref_w = torch.softmax(q @ k.T * factor, dim=-1)
        torch.testing.assert_close(torch.from_numpy(st["weights"]), ref_w, rtol=1e-5, atol=1e-6)
        ref_out = F.scaled_dot_product_attention(q, k, v, scale=factor)
        torch.testing.assert_close(torch.from_numpy(st["output"]), ref_out, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            ex.figure.axes[0].images[0].get_array(), st["weights"], rtol=1e-6
        )
        t = st["query"]
        out_bars = [b.get_height() for b in ex.figure.axes[2].patches]
        np.testing.assert_allclose(
            out_bars, ref_out[t].numpy(), rtol=1e-5, atol=1e-6
        )  # the output shown


def test_attention_scale_options_hold_the_three_named_factors():
    ex = tw.attention_explorer(d_model=12)
    options = dict(ex.controls["scale"].options)
    assert options["1/√D (standard)"] == 1 / math.sqrt(12)
    assert options["1 (unscaled)"] == 1.0 and options["1/D (over-scaled)"] == 1 / 12
    assert ex.state()["factor"] == 1 / math.sqrt(12)  # the standard factor is the default


def test_attention_query_and_scale_change_the_picture():
    ex = tw.attention_explorer(tokens="the cat sat on the mat")
    w = ex.state()["weights"]
    np.testing.assert_allclose(w[0], w[4], rtol=1e-6)  # the two "the"s: no positions, same row
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-6)
    changes_picture(ex, "query", 3)
    bars = [b.get_height() for b in ex.figure.axes[1].patches]
    np.testing.assert_allclose(bars, ex.state()["weights"][3], rtol=1e-6)  # the bars show query 3
    changes_picture(ex, "scale", 1.0)
    assert ex.state()["weights"].max(-1).mean() > w.max(-1).mean()  # unscaled = sharper
    D = ex.state()["q"].shape[-1]
    changes_picture(ex, "scale", 1 / D)
    assert ex.state()["weights"].max(-1).mean() < w.max(-1).mean()  # over-scaled = flatter
    assert_blit_matches_full_draw(ex)


def test_attention_explorer_uses_a_given_module_and_embeddings():
    torch.manual_seed(0)
    attn = SelfAttention(8, d_head=4)
    x = torch.randn(3, 8)
    ex = tw.attention_explorer(tokens=["a", "b", "c"], embeddings=x, attention=attn)
    with torch.no_grad():
        ref = attn.q_proj(x)
    torch.testing.assert_close(torch.from_numpy(ex.state()["q"]), ref)


def test_attention_explorer_bad_input():
    with pytest.raises(ValueError, match=r"tokens must hold 1 to 16 tokens, but received 0\."):
        tw.attention_explorer(tokens=[])
    with pytest.raises(TypeError, match=r"tokens must be a string or a list of strings"):
        tw.attention_explorer(tokens=[1, 2])
    with pytest.raises(ValueError, match=r"received 2 rows for 3 tokens\."):
        tw.attention_explorer(tokens="a b c", embeddings=torch.randn(2, 8))
    with pytest.raises(
        ValueError, match=r"inputs of width 8 like the embeddings, but its q_proj takes 6\."
    ):
        tw.attention_explorer(
            tokens="a b c", embeddings=torch.randn(3, 8), attention=SelfAttention(6)
        )
    with pytest.raises(TypeError, match=r"attention must have q_proj, k_proj and v_proj"):
        tw.attention_explorer(attention=torch.nn.Linear(16, 16))
    with pytest.raises(
        ValueError, match=r"d_model must be a positive integer, but received d_model=0\."
    ):
        tw.attention_explorer(d_model=0)
    with pytest.raises(
        ValueError, match=r"embeddings must have 2 dimensions, but received shape \(3,\)\."
    ):
        tw.attention_explorer(tokens="a b c", embeddings=torch.randn(3))


def _torch_mha_weights(mha, x):
    """Per-head weights and output of torch.nn.MultiheadAttention with our weights copied in."""
    C, H = mha.d_model, mha.n_heads
    ref = torch.nn.MultiheadAttention(C, H, bias=True, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])
        )
        ref.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
        out, w = ref(
            x, x, x, need_weights=True, average_attn_weights=False
        )  # (1, T, C), (1, H, T, S)
    return out[0], w[0]


def test_heads_weights_match_torch_multihead_attention():
    torch.manual_seed(1)
    x = torch.randn(5, 16)
    ex = tw.heads_explorer(tokens="a b c d e", embeddings=x)
    for H in (1, 4, 16):
        ex.controls["n_heads"].value = H
        st = ex.state()
        assert st["weights"].shape == (H, 5, 5)
        ref_out, ref_w = _torch_mha_weights(st["attention"], x[None])
        torch.testing.assert_close(torch.from_numpy(st["weights"]), ref_w, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(torch.from_numpy(st["output"]), ref_out, rtol=1e-5, atol=1e-5)


def test_heads_sliders_change_the_picture_and_the_head_index_follows_h():
    ex = tw.heads_explorer(n_heads=16)
    ex.controls["head"].value = 15
    changes_picture(ex, "head", 3)
    np.testing.assert_allclose(
        ex.figure.axes[0].images[0].get_array(), ex.state()["weights"][3], rtol=1e-6
    )
    ex.controls["head"].value = 15
    changes_picture(ex, "n_heads", 4)
    assert ex.controls["head"].max == 3 and ex.state()["head"] == 3  # clamped, and what is shown
    assert_blit_matches_full_draw(ex)


def test_heads_explorer_bad_input():
    with pytest.raises(
        ValueError,
        match=r"n_heads must divide the width C=16 \(one of \[1, 2, 4, 8, 16\]\), but received n_heads=3\.",
    ):
        tw.heads_explorer(n_heads=3)


# --------------------------------------------------------------------------- positional


def _paper_formula(T, C, base):
    """PE[t, 2i] = sin(t / base^(2i/C)), PE[t, 2i+1] = cos(...), written out in numpy."""
    t = np.arange(T)[:, None]
    i = np.arange(C // 2)[None, :]
    angle = t / base ** (2 * i / C)
    pe = np.zeros((T, C))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def test_positional_table_matches_huggingface_and_the_paper():
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings

    ex = tw.positional_explorer(n_positions=50, d_model=32)
    hf = create_sinusoidal_embeddings(50, 32, torch.empty(50, 32))  # base 10000
    np.testing.assert_allclose(ex.state()["pe"], hf.numpy(), atol=1e-5)
    ex.set(d_model=24, base=100.0)
    np.testing.assert_allclose(ex.state()["pe"], _paper_formula(50, 24, 100.0), atol=1e-5)
    np.testing.assert_allclose(ex.figure.axes[0].images[0].get_array(), ex.state()["pe"], atol=1e-6)


def test_positional_similarity_depends_on_offset_and_hands_are_the_encoding():
    ex = tw.positional_explorer(n_positions=64, d_model=16, position=10)
    st = ex.state()
    pe = _paper_formula(64, 16, 10000.0)
    np.testing.assert_allclose(st["similarity"], pe @ pe[10] / 8, atol=1e-5)
    ex.controls["position"].value = 20
    shifted = ex.state()["similarity"]
    np.testing.assert_allclose(
        shifted[20:], st["similarity"][10:54], atol=1e-5
    )  # same curve, moved by 10
    hands, pairs = ex.state()["hands"], ex.state()["pairs"]
    np.testing.assert_allclose(
        hands, np.stack([pe[20, 2 * pairs], pe[20, 2 * pairs + 1]], 1), atol=1e-5
    )
    np.testing.assert_allclose((hands**2).sum(1), 1.0, atol=1e-5)  # each hand is on the unit circle


def test_positional_sliders_change_the_picture():
    ex = tw.positional_explorer()
    changes_picture(ex, "position", 40)
    changes_picture(ex, "d_model", 8)
    changes_picture(ex, "base", 100.0)
    assert_blit_matches_full_draw(ex)
    changes_picture(ex, "d_model", 64)
    assert_blit_matches_full_draw(ex)


def test_positional_explorer_bad_input():
    with pytest.raises(
        ValueError, match=r"d_model must be an even integer from 2 to 256, but received d_model=7\."
    ):
        tw.positional_explorer(d_model=7)
    with pytest.raises(
        ValueError, match=r"base must lie between 10 and 100000, but received base=1\."
    ):
        tw.positional_explorer(base=1)
    with pytest.raises(
        ValueError, match=r"position must lie in 0\.\.63, but received position=64\."
    ):
        tw.positional_explorer(position=64)
    with pytest.raises(
        ValueError, match=r"n_positions must lie between 2 and 512, but received n_positions=1000\."
    ):
        tw.positional_explorer(n_positions=1000)
    with pytest.raises(
        ValueError, match=r"n_positions must be a positive integer, but received n_positions=0\."
    ):
        tw.positional_explorer(n_positions=0)


# --------------------------------------------------------------------------- masks


def test_masks_and_weights_match_an_independent_construction_and_fused_attention():
    ex = tw.mask_explorer(seq_len=6)
    for causal, lengths in ((True, (6, 4)), (False, (2, 5)), (True, (0, 3))):
        ex.set(causal=causal, length_0=lengths[0], length_1=lengths[1])
        st = ex.state()
        keys = torch.arange(6)
        ref_mask = torch.stack([(keys < n).expand(6, 6) for n in lengths])  # (B, T, S)
        if causal:
            ref_mask = ref_mask & torch.ones(6, 6).tril().bool()
        np.testing.assert_array_equal(st["mask"], ref_mask.numpy())
        w = torch.from_numpy(st["weights"])
        assert torch.all(w[~ref_mask] == 0)  # exactly zero, not merely small
        assert not torch.isnan(w).any()
        visible = ref_mask.any(-1)  # (B, T) rows with at least one key
        torch.testing.assert_close(w.sum(-1)[visible], torch.ones(int(visible.sum())))
        assert torch.all(w.sum(-1)[~visible] == 0)
        q, k, v = (torch.from_numpy(st[n]) for n in ("q", "k", "v"))
        ref_out = F.scaled_dot_product_attention(q, k, v, attn_mask=ref_mask)  # NaN on empty rows
        torch.testing.assert_close(
            torch.from_numpy(st["output"])[visible], ref_out[visible], rtol=1e-5, atol=1e-5
        )


def test_mask_controls_change_the_picture():
    ex = tw.mask_explorer()
    changes_picture(ex, "causal", False)
    changes_picture(ex, "length_1", 2)
    changes_picture(ex, "length_0", 0)
    assert "rows with nothing to attend to (all-zero weights, no NaN): 8" in ex.readout.value
    assert_blit_matches_full_draw(ex)


def test_mask_explorer_bad_input():
    with pytest.raises(
        ValueError, match=r"lengths must be two lengths in 0\.\.seq_len=8, but received \(9, 2\)\."
    ):
        tw.mask_explorer(lengths=(9, 2))
    with pytest.raises(
        ValueError, match=r"seq_len must lie between 2 and 16, but received seq_len=40\."
    ):
        tw.mask_explorer(seq_len=40)
    with pytest.raises(
        ValueError, match=r"d_head must be a positive integer, but received d_head=-1\."
    ):
        tw.mask_explorer(d_head=-1)


# --------------------------------------------------------------------------- sampling


def _hf_filtered(logits, tau, top_k, top_p):
    """Hugging Face's warpers, in generate()'s order: temperature, top-k, top-p."""
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


def test_sampling_matches_huggingface_warpers():
    ex = tw.sampling_explorer()
    logits = torch.from_numpy(ex.state()["logits"])
    for tau, k, p in ((1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.6), (2.0, 8, 0.85), (0.2, 3, 0.3)):
        ex.set(temperature=tau, top_k=k, top_p=p)
        st = ex.state()
        ref = _hf_filtered(logits, st["temperature"], k, p)
        np.testing.assert_array_equal(st["kept"], torch.isfinite(ref).numpy())
        np.testing.assert_allclose(
            st["final"], torch.softmax(ref, -1).numpy(), rtol=1e-5, atol=1e-7
        )
        heights = [bar.get_height() for bar in ex.view.fast if hasattr(bar, "get_height")]
        np.testing.assert_allclose(heights, st["final"], rtol=1e-5, atol=1e-7)


def test_filter_logits_matches_huggingface_on_random_batches():
    from transformer_lab.models.gpt import filter_logits as filter_top_k_top_p

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 50, generator=gen) * 2
    for k, p in ((10, 1.0), (0, 0.9), (7, 0.5), (50, 0.99)):
        ours = filter_top_k_top_p(logits, k, p)
        ref = torch.stack([_hf_filtered(row, 1.0, k, p) for row in logits])
        np.testing.assert_array_equal(torch.isfinite(ours).numpy(), torch.isfinite(ref).numpy())


def test_sampling_sliders_change_the_picture():
    ex = tw.sampling_explorer(torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]), tokens=list("abcde"))
    changes_picture(ex, "temperature", 0.3)
    changes_picture(ex, "top_k", 2)
    assert ex.state()["kept"].sum() == 2
    changes_picture(ex, "top_k", 0)
    changes_picture(ex, "top_p", 0.3)
    assert_blit_matches_full_draw(ex)


def test_sampling_explorer_bad_input():
    with pytest.raises(
        ValueError, match=r"logits must hold 2 to 40 values \(one per bar\), but received 100\."
    ):
        tw.sampling_explorer(torch.zeros(100))
    with pytest.raises(ValueError, match=r"received 2 tokens for 3 logits\."):
        tw.sampling_explorer([1.0, 2.0, 3.0], tokens=["a", "b"])


# --------------------------------------------------------------------------- equivariance


def test_equivariance_outputs_move_with_the_tokens_until_positions_are_added():
    ex = tw.equivariance_explorer(tokens="the dog bit the man")
    for shuffle in (0, 3, 7):
        ex.controls["shuffle"].value = shuffle
        st = ex.state()
        perm = torch.from_numpy(st["perm"])
        assert sorted(perm.tolist()) == list(range(5))
        np.testing.assert_allclose(st["out_shuffled"], st["out"][perm.numpy()], atol=1e-6)
        assert st["gap"].max() < 1e-5
    ex.controls["positions"].value = True
    assert ex.state()["gap"].max() > 0.05  # positions make the order visible
    assert "positions make order visible" in ex.readout.value


def test_equivariance_outputs_match_torch_attention():
    ex = tw.equivariance_explorer(tokens="a b c d", d_model=8, d_head=4, seed=2)
    st = ex.state()
    from transformer_lab.widgets._inputs import seeded_embeddings

    x = seeded_embeddings(["a", "b", "c", "d"], 8, 2)
    gen = torch.Generator().manual_seed(3)
    w_q, w_k, w_v = (torch.randn(8, 4, generator=gen) / math.sqrt(8) for _ in range(3))
    ref = F.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    np.testing.assert_allclose(st["out"], ref.numpy(), rtol=1e-5, atol=1e-6)


def test_equivariance_sliders_change_the_picture():
    ex = tw.equivariance_explorer()
    changes_picture(ex, "shuffle", 4)
    changes_picture(ex, "positions", True)
    assert_blit_matches_full_draw(ex)


# --------------------------------------------------------------------------- cost


def test_cost_counts_the_formula_and_times_every_point():
    ex = tw.cost_explorer(T=16, C=32)
    for T, C in ((16, 32), (64, 32), (64, 128), (256, 16)):
        ex.set(T=T, C=C)
        st = ex.state()
        assert st["counted"] == 3 * T * C * C + 2 * T * T * C
        assert st["counted"] == st["projections"] + st["attention"]
        assert 0 < st["seconds"] < 5
    assert set(ex.state()["measured"]) == {(16, 32), (64, 32), (64, 128), (256, 16)}


def test_cost_sliders_change_the_picture():
    ex = tw.cost_explorer()
    changes_picture(ex, "T", 512)
    changes_picture(ex, "C", 16)
    assert_blit_matches_full_draw(ex, max_fraction=0.01)


def test_cost_explorer_bad_input():
    with pytest.raises(ValueError, match=r"T must be one of \[8, .*\], but received T=100\."):
        tw.cost_explorer(T=100)


# --------------------------------------------------------------------------- head layout


def test_head_layout_split_and_merge_match_an_independent_layout():
    ex = tw.head_layout_explorer(d_model=12, n_tokens=4)
    for H in (1, 2, 3, 4, 6, 12):
        ex.controls["n_heads"].value = H
        st = ex.state()
        D = 12 // H
        x = st["x"]
        for h in range(H):
            np.testing.assert_array_equal(st["split"][h], x[:, h * D : (h + 1) * D])
        np.testing.assert_array_equal(st["merged"], x)
    # The einops pattern the course quotes, as an independent statement of the same layout.
    ex.controls["n_heads"].value = 3
    st = ex.state()
    ref = torch.from_numpy(st["x"]).view(4, 3, 4).permute(1, 0, 2)
    np.testing.assert_array_equal(st["split"], ref.numpy())


def test_head_layout_sliders_change_the_picture():
    ex = tw.head_layout_explorer()
    changes_picture(ex, "head", 2)
    changes_picture(ex, "n_heads", 6)
    assert ex.controls["head"].value == 2
    changes_picture(ex, "n_heads", 2)
    assert ex.state()["head"] == 1  # clamped to the new H
    assert_blit_matches_full_draw(ex)


def test_head_layout_explorer_bad_input():
    with pytest.raises(ValueError, match=r"n_heads must divide d_model=12 .* received n_heads=5\."):
        tw.head_layout_explorer(n_heads=5)


# --------------------------------------------------------------------------- kinds of positions


def test_position_kinds_tables_and_the_cross_terms():
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings

    ex = tw.position_kinds_explorer(tokens="the cat saw the cat")
    st = ex.state()
    hf = create_sinusoidal_embeddings(5, 128, torch.empty(5, 128))
    scale = st["table"][1, 0] / hf[1, 0].item()  # the table is rescaled to the tokens' size
    np.testing.assert_allclose(st["table"], scale * hf.numpy(), atol=1e-4)
    assert st["parts"][2] > 0.01  # adding: cross terms
    ex.controls["combine"].value = "concatenate"
    assert ex.state()["parts"][2] == 0.0  # concatenating keeps content and position apart
    ex.controls["strength"].value = 0.0
    sim = ex.state()["token_similarity"]
    assert sim[0, 3] == pytest.approx(1.0, abs=1e-5)  # "the" and "the": the same without positions
    for kind in ("learned (trained GPT)", "learned (at init)"):
        ex.controls["kind"].value = kind
        t = ex.state()["table"]
        assert t.shape == (5, 128) and np.isfinite(t).all()
        np.testing.assert_allclose(np.linalg.norm(t, axis=1).mean(), math.sqrt(128), rtol=1e-4)


def test_position_kinds_trained_table_is_the_shipped_gpt_and_smoother_than_init():
    from transformer_lab.checkpoints import load_pretrained

    model, _ = load_pretrained("tiny_gpt")
    table = next(v for k, v in model.state_dict().items() if "pos" in k and v.dim() == 2)[:11]
    ex = tw.position_kinds_explorer()
    ex.controls["kind"].value = "learned (trained GPT)"
    shown = torch.from_numpy(ex.state()["table"])
    cos = F.cosine_similarity(shown, table.float(), dim=-1)
    assert torch.all(cos > 0.9999)
    neighbours = np.diag(ex.state()["position_similarity"], 1).mean()
    ex.controls["kind"].value = "learned (at init)"
    assert neighbours > np.abs(np.diag(ex.state()["position_similarity"], 1)).mean()


def test_position_kinds_controls_change_the_picture():
    ex = tw.position_kinds_explorer()
    changes_picture(ex, "strength", 2.5)
    changes_picture(ex, "combine", "concatenate")
    changes_picture(ex, "kind", "learned (trained GPT)")
    assert_blit_matches_full_draw(ex)


# --------------------------------------------------------------------------- RoPE


def _rope_complex(x: np.ndarray, base: float) -> np.ndarray:
    """RoPE written with complex numbers: pair (2i, 2i+1) times exp(1j * t * theta_i)."""
    T, D = x.shape
    z = x[:, 0::2] + 1j * x[:, 1::2]
    theta = base ** (-np.arange(0, D, 2) / D)
    z = z * np.exp(1j * np.arange(T)[:, None] * theta[None, :])
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


def test_rope_scores_match_a_complex_number_rotation_and_depend_on_the_offset_only():
    ex = tw.rope_explorer(d_head=16, base=100.0, seed=0)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=gen).numpy(), torch.randn(16, generator=gen).numpy()
    rq = _rope_complex(np.tile(q, (64, 1)), 100.0)
    rk = _rope_complex(np.tile(k, (64, 1)), 100.0)
    st = ex.state()
    np.testing.assert_allclose(st["scores"], rq @ rk.T, atol=1e-4)
    scores = st["scores"]
    for off in (-5, 0, 7):  # constant along every diagonal
        diag = np.diag(scores, off)
        np.testing.assert_allclose(diag, diag[0], atol=1e-3)
    ex.controls["t"].value = 30
    ok = ~np.isnan(ex.state()["curve"])
    np.testing.assert_allclose(ex.state()["curve"][ok], ex.state()["other_curve"][ok], atol=1e-3)


def test_rope_sliders_change_the_picture():
    ex = tw.rope_explorer()
    changes_picture(ex, "t", 20)
    changes_picture(ex, "offset", -7)
    changes_picture(ex, "pair", 3)
    assert_blit_matches_full_draw(ex)


def test_rope_explorer_bad_input():
    with pytest.raises(ValueError, match=r"d_head must be an even integer from 2 to 64"):
        tw.rope_explorer(d_head=7)


# --------------------------------------------------------------------------- cross-attention


def test_cross_attention_weights_match_torch_with_the_source_padding_masked():
    ex = tw.cross_attention_explorer(n_queries=4)
    for n_real, sharp in ((7, 1.0), (4, 2.0), (1, 0.25)):
        ex.set(source_length=n_real, sharpness=sharp)
        st = ex.state()
        w = torch.from_numpy(st["weights"])
        assert w.shape == (4, 7)
        assert torch.all(w[:, n_real:] == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(4))
    # Same numbers as PyTorch's fused attention (identity projections, the factor in q).
    ex.set(source_length=5, sharpness=2.0)
    from transformer_lab.widgets import cross_attention as ca

    gen = torch.Generator().manual_seed(0)
    meanings = {m: torch.randn(32, generator=gen) for m in sorted(set(ca.MEANING.values()))}
    src = torch.stack(
        [meanings[ca.MEANING[w]] + 0.3 * torch.randn(32, generator=gen) for w in ca.SOURCE]
    )
    tgt = torch.stack([meanings[w] + 0.3 * torch.randn(32, generator=gen) for w in ca.TARGET[:4]])
    mask = torch.arange(7) < 5
    ref = F.scaled_dot_product_attention(tgt * 2.0, src, src, attn_mask=mask[None, :])
    torch.testing.assert_close(torch.from_numpy(ex.state()["output"]), ref, rtol=1e-5, atol=1e-5)


def test_cross_attention_controls_change_the_picture():
    ex = tw.cross_attention_explorer()
    changes_picture(ex, "query", 2)
    changes_picture(ex, "source_length", 3)
    changes_picture(ex, "sharpness", 4.0)
    assert_blit_matches_full_draw(ex)


# --------------------------------------------------------------------------- fully masked rows


def test_masked_row_nan_spreads_with_the_naive_softmax_only():
    ex = tw.masked_row_explorer(seq_len=6)
    st = ex.state()
    assert st["nan"][0].tolist() == [True] + [False] * 5  # layer 1: only the empty row
    assert st["nan"][1:].all()  # layer 2 on: everything
    assert not st["mask"][0].any()
    # torch.softmax does the same as the naive one on an all -inf row: NaN.
    assert torch.isnan(torch.softmax(torch.full((3,), float("-inf")), -1)).all()
    ex.controls["softmax"].value = "safe"
    st = ex.state()
    assert not st["nan"].any()
    np.testing.assert_array_equal(st["weights"][0], 0.0)  # the empty row gets zero weights
    ex.controls["padding"].value = 0
    ex.controls["softmax"].value = "naive"
    assert not ex.state()["nan"].any()  # no empty row, nothing to spread


def test_masked_row_controls_change_the_picture():
    ex = tw.masked_row_explorer()
    changes_picture(ex, "softmax", "safe")
    changes_picture(ex, "padding", 3)
    changes_picture(ex, "layer", 4)
    assert_blit_matches_full_draw(ex)


# --------------------------------------------------------------------------- leaks


def test_leak_influence_is_lower_triangular_exactly_for_causal_layers():
    from transformer_lab.utils import LEAK_MODES
    from transformer_lab.widgets.leaks import LAYERS

    ex = tw.leak_explorer(seq_len=6)
    for kind, mode in LAYERS.items():
        leaks = LEAK_MODES[mode]
        ex.controls["layer"].value = kind
        inf = ex.state()["influence"]
        upper = np.triu(np.ones((6, 6), bool), 1)
        assert bool((inf[upper] > 0).any()) == leaks, kind
        assert (np.diag(inf) > 0).any()  # an input always moves some output at or after it
    ex.set(layer="mask after the softmax", token=5, size=0.001)
    st = ex.state()
    assert st["leaked"][:5].all() and st["moved"][:5].max() < 1e-3  # small, but exactly nonzero


def test_leak_controls_change_the_picture():
    ex = tw.leak_explorer()
    changes_picture(ex, "layer", "no mask")
    changes_picture(ex, "token", 2)
    changes_picture(ex, "size", 0.01)
    assert_blit_matches_full_draw(ex)
