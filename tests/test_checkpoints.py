"""The shipped checkpoints load, and still do what they were trained for (no training here)."""

import pytest
import torch

from transformer_lab import checkpoints
from transformer_lab.checkpoints import PRETRAINED, checkpoint_path, load_pretrained
from transformer_lab.data import CharTokenizer, load_digits_data, shakespeare
from transformer_lab.models import GPT, ViT
from transformer_lab.train import accuracy, estimate_loss

MAX_MB = 5.0  # "a few MB at most" each: they ship inside the wheel


@pytest.fixture(scope="module")
def tiny_gpt():
    return load_pretrained("tiny_gpt")


@pytest.fixture(scope="module")
def vit_digits():
    return load_pretrained("vit_digits")


@pytest.mark.parametrize("name", sorted(PRETRAINED))
def test_checkpoint_files_are_small(name):
    assert checkpoint_path(name).stat().st_size / 1e6 < MAX_MB


def test_tiny_gpt_loads_in_eval_mode_with_the_shakespeare_tokenizer(tiny_gpt):
    model, extras = tiny_gpt
    assert isinstance(model, GPT) and not model.training
    c = model.config
    assert (c.n_layers, c.n_heads, c.d_model, c.max_len) == (4, 4, 128, 64)  # nanoGPT's CPU recipe
    assert c.bias and not c.tie_weights  # the benchmark's default model (biases, a head of its own)
    assert extras["val_loss"] <= 1.88  # the figure measured when it was saved (200 batches)
    tok = extras["tokenizer"]
    assert isinstance(tok, CharTokenizer)
    assert tok.chars == shakespeare().tokenizer.chars  # ids mean the same characters as the data's


def test_tiny_gpt_validation_loss_below_2(tiny_gpt):
    model, _ = tiny_gpt
    data = shakespeare()
    gen = torch.Generator().manual_seed(0)
    loss = estimate_loss(model, lambda: data.get_batch("val", 64, 12, generator=gen), iters=8)
    # An untrained model sits at ln(65) = 4.17; the recipe reaches about 1.86 on 200 batches.
    assert loss < 2.0, loss


def test_tiny_gpt_generates_known_characters(tiny_gpt):
    model, extras = tiny_gpt
    tok = extras["tokenizer"]
    prompt = torch.tensor([tok.encode("ROMEO:")])  # (1, 6)
    out = model.generate(prompt, 20, temperature=0.8, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 26)
    assert tok.decode(out[0]).startswith("ROMEO:")


def test_vit_digits_accuracy_above_95_percent(vit_digits):
    model, extras = vit_digits
    assert isinstance(model, ViT) and not model.training
    data = load_digits_data(
        test_fraction=extras["test_fraction"],
        seed=extras["split_seed"],
        normalize=extras["normalize"],
    )
    acc = accuracy(model, data.batches("test", 512))
    assert acc > 0.95, acc
    assert acc == pytest.approx(extras["test_accuracy"], abs=1e-6)  # the figure saved with it


def test_unknown_name_is_rejected():
    with pytest.raises(
        ValueError, match=r"name must be one of \['tiny_gpt', 'vit_digits'\], but received 'gpt2'"
    ):
        load_pretrained("gpt2")


def test_missing_file_is_reported(monkeypatch):
    monkeypatch.setitem(checkpoints.PRETRAINED, "tiny_gpt", "no_such_file.pt")
    with pytest.raises(FileNotFoundError, match="no_such_file.pt.*--save"):
        load_pretrained("tiny_gpt")


def test_the_shipped_files_use_the_old_names_and_still_load():
    """The files predate the frozen vocabulary; loading renames their config and weights."""
    raw = torch.load(checkpoint_path("tiny_gpt"), weights_only=True)
    if "block_size" not in raw["config"]:
        pytest.skip("the shipped tiny GPT has been re-saved with today's names")
    assert "blocks.0.norm1.weight" in raw["model"] and "blocks.0.ffn.fc1.weight" in raw["model"]
    model, _ = load_pretrained("tiny_gpt")
    torch.testing.assert_close(
        model.blocks[0].mlp_norm.weight, raw["model"]["blocks.0.norm3.weight"], atol=0, rtol=0
    )


def _old_names(state: dict) -> dict:
    """Today's block parameter names back to the ones used before the rename."""
    old = {}
    for key, value in state.items():
        decoder = "decoder_layers." in key
        for new, was in (
            ("self_attn_norm", "norm1"),
            ("cross_attn_norm", "norm2"),
            ("mlp_norm", "norm3" if decoder else "norm2"),
            ("mlp.", "ffn."),
        ):
            key = key.replace(new, was)
        old[key] = value
    return old


def test_a_checkpoint_saved_with_the_old_names_loads_into_todays_model(tmp_path):
    from transformer_lab.models import Seq2SeqConfig, Seq2SeqTransformer
    from transformer_lab.train import load_checkpoint

    torch.manual_seed(0)
    model = Seq2SeqTransformer(Seq2SeqConfig.tiny(n_heads=2)).eval()
    old_config = {**vars(model.config), "n_head": 2}
    del old_config["n_heads"]
    state = _old_names(model.state_dict())
    assert "decoder_layers.0.norm3.weight" in state and "encoder_layers.0.norm2.bias" in state
    path = tmp_path / "old.pt"
    torch.save({"model": state, "config": old_config}, path)
    ckpt = load_checkpoint(path)
    restored = Seq2SeqTransformer(Seq2SeqConfig(**ckpt["config"])).eval()
    restored.load_state_dict(ckpt["model"])  # strict: every name matched
    src, tgt = torch.randint(1, 32, (2, 5)), torch.randint(1, 64, (2, 4))
    torch.testing.assert_close(restored(src, tgt).logits, model(src, tgt).logits, atol=0, rtol=0)
