"""ViT against Hugging Face's ViTModel / ViTForImageClassification, and the patch embedding."""

import pytest
import torch
from torch import nn

from transformer_lab import sinusoidal_encoding_2d
from transformer_lab.models import PatchEmbedding, ViT, ViTConfig, patchify

transformers = pytest.importorskip(
    "transformers", reason="the parity tests need Hugging Face transformers"
)

ATOL = 1e-4  # float32 tolerance on every output compared with Hugging Face


def _hf_config(attn="eager", **kw):
    base = dict(
        image_size=16,
        patch_size=4,
        num_channels=3,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        num_labels=5,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation=attn,
    )
    base.update(kw)
    return transformers.ViTConfig(**base)


def _randomise(model, seed=0, scale=0.2):
    """Large random weights (norm gains around 1) so that attention patterns are far from uniform."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            offset = 1.0 if "layernorm" in name and name.endswith("weight") else 0.0
            p.copy_(torch.randn(p.shape, generator=g) * scale + offset)
    return model


def _images(B=2, ch=3, size=16, seed=1):
    return torch.randn(B, ch, size, size, generator=torch.Generator().manual_seed(seed))


def _max_diff(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("fused", [True, False])
def test_logits_match_vit_for_image_classification(attn, fused):
    hf = _randomise(transformers.ViTForImageClassification(_hf_config(attn)).eval())
    ours = ViT.from_huggingface(hf)
    for block in ours.blocks:
        block.self_attn.fused = fused
    x = _images()
    with torch.no_grad():
        a, b = ours(x).logits, hf(x).logits
    print(
        f"\nViT vs ViTForImageClassification ({attn}, fused={fused}): max |logits diff| = {_max_diff(a, b):.2e}"
    )
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_last_hidden_state_matches_vit_model(attn):
    hf = _randomise(transformers.ViTModel(_hf_config(attn)).eval())
    ours = ViT.from_huggingface(hf)
    x = _images(B=3, seed=2)
    with torch.no_grad():
        a, b = ours(x).last_hidden_state, hf(x).last_hidden_state
    print(f"\nViT vs ViTModel ({attn}): max |last_hidden_state diff| = {_max_diff(a, b):.2e}")
    assert a.shape == (3, 17, 48)
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_attention_maps_match_hugging_face_eager():
    hf = _randomise(transformers.ViTForImageClassification(_hf_config("eager")).eval())
    ours = ViT.from_huggingface(hf)
    x = _images()
    with torch.no_grad():
        a, b = ours(x, output_attentions=True).attentions, hf(x, output_attentions=True).attentions
    assert len(a) == 2 and a[0].shape == (2, 4, 17, 17)  # (B, H, N + 1, N + 1)
    for ours_map, theirs in zip(a, b):
        torch.testing.assert_close(ours_map, theirs, atol=ATOL, rtol=0)
    print(
        f"\nViT attention maps vs Hugging Face: max diff = {max(_max_diff(p, q) for p, q in zip(a, b)):.2e}"
    )


def test_patch_embedding_equals_a_strided_convolution():
    """Flattened patches times a matrix is a Conv2d with kernel = stride = P."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 24, kernel_size=4, stride=4)  # PyTorch's, initialised by PyTorch
    embed = PatchEmbedding(4, 3, 24)
    with torch.no_grad():
        embed.proj.weight.copy_(conv.weight.reshape(24, -1))  # (C, ch, P, P) -> (C, ch*P*P)
        embed.proj.bias.copy_(conv.bias)
    x = _images(B=2, ch=3, size=12)
    expected = conv(x).flatten(2).transpose(1, 2)  # (B, C, 3, 3) -> (B, N, C), patches row by row
    torch.testing.assert_close(embed(x), expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(embed.to_conv2d()(x), conv(x), atol=1e-5, rtol=0)


def test_patchify_order():
    x = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)
    patches = patchify(x, 2)  # (1, 4, 8)
    assert patches.shape == (1, 4, 8)
    # Patch 1 is the top-right 2x2 square: channel 0 then channel 1, each row by row.
    assert patches[0, 1].tolist() == [2, 3, 6, 7, 18, 19, 22, 23]


def test_sinusoidal_2d_positions():
    torch.manual_seed(0)
    model = ViT(ViTConfig.tiny(position="sinusoidal_2d")).eval()
    assert model.pos_emb is None
    torch.testing.assert_close(model.pos_table[1:], sinusoidal_encoding_2d(4, 4, 64))
    assert (model.pos_table[0] == 0).all()
    out = model(torch.randn(3, 1, 8, 8), labels=torch.tensor([1, 2, 3]))
    assert out.logits.shape == (3, 10) and out.loss.ndim == 0
    assert not any(
        name.startswith("pos") for name, _ in model.named_parameters()
    )  # fixed, not learned


def test_tiny_preset_trains_a_step_and_maps_sum_to_one():
    torch.manual_seed(0)
    model = ViT(ViTConfig.tiny())
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 3])
    out = model(x, labels=y, output_attentions=True)
    out.loss.backward()
    assert model.cls_token.grad is not None and model.patch_emb.proj.weight.grad is not None
    assert len(out.attentions) == 4 and out.attentions[0].shape == (4, 4, 17, 17)
    with torch.no_grad():  # in training mode attention dropout zeroes some weights; not in eval
        maps = model.eval()(x, output_attentions=True).attentions
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(4, 4, 17))
    base = ViTConfig.base()
    assert (base.n_patches, base.d_model, base.n_layers) == (196, 768, 12)
