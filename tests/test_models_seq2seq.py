"""The encoder-decoder against torch.nn.Transformer with weights copied across, and greedy decoding."""

import pytest
import torch
from torch import nn

from transformer_lab.models import Seq2SeqConfig, Seq2SeqTransformer

ATOL = 1e-4  # float32 tolerance on every output compared with torch.nn.Transformer
PAD, BOS, EOS = 0, 1, 2


def _config(norm_first=False, **kw):
    base = dict(
        src_vocab_size=23,
        tgt_vocab_size=29,
        d_model=32,
        n_heads=4,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=64,
        dropout=0.0,
        norm_first=norm_first,
        max_len=32,
    )
    base.update(kw)
    return Seq2SeqConfig(**base)


def _copy_attention(ours, theirs: nn.MultiheadAttention):
    """torch packs W_q, W_k, W_v into one (3C, C) in_proj_weight."""
    for name, w, b in zip("qkv", theirs.in_proj_weight.chunk(3), theirs.in_proj_bias.chunk(3)):
        getattr(ours, f"{name}_proj").weight.copy_(w)
        getattr(ours, f"{name}_proj").bias.copy_(b)
    ours.out_proj.weight.copy_(theirs.out_proj.weight)
    ours.out_proj.bias.copy_(theirs.out_proj.bias)


def _copy_linear_or_norm(ours, theirs):
    ours.weight.copy_(theirs.weight)
    ours.bias.copy_(theirs.bias)


def _reference_and_ours(norm_first):
    """A torch.nn.Transformer with random weights (norm gains too) and our model holding a copy."""
    cfg = _config(norm_first)
    torch.manual_seed(0)
    ref = nn.Transformer(
        cfg.d_model,
        cfg.n_heads,
        cfg.n_encoder_layers,
        cfg.n_decoder_layers,
        cfg.d_ff,
        dropout=0.0,
        batch_first=True,
        norm_first=norm_first,
        layer_norm_eps=cfg.eps,
    ).eval()
    g = torch.Generator().manual_seed(1)
    ours = Seq2SeqTransformer(cfg).eval()
    with torch.no_grad():
        for name, p in ref.named_parameters():
            if "norm" in name:  # norms start at (1, 0): perturb them so their copy is tested
                p.add_(torch.randn(p.shape, generator=g) * 0.2)
        for mine, theirs in zip(ours.encoder_layers, ref.encoder.layers):
            _copy_attention(mine.self_attn, theirs.self_attn)
            for a, b in (
                (mine.mlp.fc1, theirs.linear1),
                (mine.mlp.fc2, theirs.linear2),
                (mine.self_attn_norm, theirs.norm1),
                (mine.mlp_norm, theirs.norm2),
            ):
                _copy_linear_or_norm(a, b)
        for mine, theirs in zip(ours.decoder_layers, ref.decoder.layers):
            _copy_attention(mine.self_attn, theirs.self_attn)
            _copy_attention(mine.cross_attn, theirs.multihead_attn)
            for a, b in (
                (mine.mlp.fc1, theirs.linear1),
                (mine.mlp.fc2, theirs.linear2),
                (mine.self_attn_norm, theirs.norm1),
                (mine.cross_attn_norm, theirs.norm2),
                (mine.mlp_norm, theirs.norm3),
            ):
                _copy_linear_or_norm(a, b)
        _copy_linear_or_norm(ours.encoder_norm, ref.encoder.norm)
        _copy_linear_or_norm(ours.decoder_norm, ref.decoder.norm)
    return ref, ours


def _padded_pair():
    g = torch.Generator().manual_seed(2)
    src = torch.randint(3, 23, (3, 10), generator=g)
    src[1, 6:] = PAD
    src[2, 2:] = PAD
    tgt = torch.randint(3, 29, (3, 8), generator=g)
    tgt[:, 0] = BOS
    tgt[0, 5:] = PAD
    tgt[2, 3:] = PAD
    return src, tgt


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # torch's own fast-path notices
@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("fused", [True, False])
def test_matches_torch_transformer_with_masks_on_both_sides(norm_first, fused):
    ref, ours = _reference_and_ours(norm_first)
    for layer in [*ours.encoder_layers, *ours.decoder_layers]:
        for attn in (layer.self_attn, getattr(layer, "cross_attn", None)):
            if attn is not None:
                attn.fused = fused
    src, tgt = _padded_pair()
    T = tgt.shape[1]
    with torch.no_grad():
        out = ours(src, tgt)
        # torch's boolean masks mean the opposite of ours: True = may NOT attend.
        expected = ref(
            ours.embed_source(src),
            ours.embed_target(tgt),
            tgt_mask=~torch.ones(T, T, dtype=torch.bool).tril(),
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD,
        )
        expected_logits = ours.out_proj(expected)
        memory = ref.encoder(ours.embed_source(src), src_key_padding_mask=src == PAD)
    real = src != PAD  # torch's fast path may zero the padded memory rows; compare real ones
    print(
        f"\nSeq2Seq vs nn.Transformer (norm_first={norm_first}, fused={fused}): max |logits diff| = "
        f"{(out.logits - expected_logits).abs().max().item():.2e}, memory {(out.encoder_output[real] - memory[real]).abs().max().item():.2e}"
    )
    torch.testing.assert_close(out.logits, expected_logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(out.encoder_output[real], memory[real], atol=ATOL, rtol=0)


def test_source_padding_is_masked_and_decoder_is_causal():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(_config()).eval()
    src, tgt = _padded_pair()
    with torch.no_grad():
        base = model(src, tgt).logits
        other_src = src.clone()
        other_src[src == PAD] = 0  # padding stays padding ...
        longer = torch.cat(
            [src, torch.full((3, 4), PAD)], dim=1
        )  # ... and more of it changes nothing
        torch.testing.assert_close(model(longer, tgt).logits, base, atol=1e-5, rtol=0)
        future = tgt.clone()
        future[:, 4:] = 5
        changed = model(src, future).logits
    torch.testing.assert_close(changed[:, :4], base[:, :4], atol=1e-5, rtol=0)


def _manual_greedy(model, src, max_new_tokens):
    """Greedy decoding written with the teacher-forced forward pass only."""
    out = torch.full((src.shape[0], 1), BOS)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_new_tokens):
        nxt = model(src, out).logits[:, -1].argmax(-1)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS
        if done.all():
            break
    return out


@pytest.mark.parametrize("norm_first", [False, True])
def test_greedy_decode_with_cache_equals_recomputation(norm_first):
    torch.manual_seed(0)
    model = Seq2SeqTransformer(_config(norm_first)).eval()
    src, _ = _padded_pair()
    with torch.no_grad():
        expected = _manual_greedy(model, src, 12)
    for use_cache in (True, False):
        assert torch.equal(model.greedy_decode(src, 12, BOS, EOS, use_cache=use_cache), expected)


def test_greedy_decode_stops_at_eos():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(_config()).eval()
    with torch.no_grad():
        model.out_proj.bias[EOS] = 1e4  # end-of-sequence always wins
    out = model.greedy_decode(torch.tensor([[5, 6, 7], [8, PAD, PAD]]), 10, BOS, EOS)
    assert out.tolist() == [[BOS, EOS], [BOS, EOS]]


def test_small_model_learns_to_reverse_a_few_sequences():
    torch.manual_seed(0)
    cfg = Seq2SeqConfig.tiny(
        src_vocab_size=12,
        tgt_vocab_size=12,
        dropout=0.0,
        d_model=32,
        n_encoder_layers=1,
        n_decoder_layers=1,
    )
    model = Seq2SeqTransformer(cfg)
    src = torch.randint(3, 12, (8, 4))
    tgt = torch.cat(
        [torch.full((8, 1), BOS), src.flip(1), torch.full((8, 1), EOS)], dim=1
    )  # (8, 6)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only pays for thread synchronisation
    try:
        for _ in range(100):
            loss = model(src, tgt[:, :-1], targets=tgt[:, 1:]).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    assert loss.item() < 0.05
    assert torch.equal(model.greedy_decode(src, 5, BOS, EOS), tgt)


def test_attention_outputs_and_presets():
    torch.manual_seed(0)
    model = Seq2SeqTransformer(_config()).eval()
    src, tgt = _padded_pair()
    out = model(src, tgt, output_attentions=True)
    att = out.attentions
    assert att["encoder"][0].shape == (3, 4, 10, 10)
    assert att["decoder_self"][0].shape == (3, 4, 8, 8) and att["cross"][1].shape == (3, 4, 8, 10)
    assert (att["cross"][0][2, :, :, 2:] == 0).all()  # source 2 has two real tokens
    base = Seq2SeqConfig.base()
    assert (base.d_model, base.n_heads, base.n_encoder_layers, base.d_ff, base.norm_first) == (
        512,
        8,
        6,
        2048,
        False,
    )
