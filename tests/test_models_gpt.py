"""GPT against Hugging Face GPT-2 (random weights, copied across), and generation with a KV cache."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.models import GPT, GPTConfig, filter_logits

transformers = pytest.importorskip(
    "transformers", reason="the parity tests need Hugging Face transformers"
)

ATOL = 1e-4  # float32 tolerance on every output compared with Hugging Face


def _hf_config(attn="eager", **kw):
    base = dict(
        vocab_size=97,
        n_positions=32,
        n_embd=48,
        n_layer=3,
        n_head=4,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        attn_implementation=attn,
    )
    base.update(kw)
    return transformers.GPT2Config(**base)


def _randomise(model, seed=0, scale=0.2):
    """Replace GPT-2's small initial weights with larger random ones: with std-0.02 weights the
    attention is nearly uniform, and a swapped query/key mapping would go unnoticed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            offset = (
                1.0
                if (".ln_" in name or name.endswith("ln_f.weight")) and name.endswith("weight")
                else 0.0
            )
            p.copy_(torch.randn(p.shape, generator=g) * scale + offset)
    return model


def _hf_gpt2(attn="eager", seed=0, **kw):
    torch.manual_seed(seed)
    return _randomise(transformers.GPT2LMHeadModel(_hf_config(attn, **kw)).eval(), seed)


def _max_diff(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("fused", [True, False])
def test_logits_match_gpt2(attn, fused):
    hf = _hf_gpt2(attn)
    ours = GPT.from_huggingface(hf)
    for block in ours.blocks:
        block.self_attn.fused = fused  # both attention paths must agree with the reference
    idx = torch.randint(0, 97, (3, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = ours(idx).logits, hf(idx).logits
    print(
        f"\nGPT vs GPT2LMHeadModel ({attn}, fused={fused}): max |logits diff| = {_max_diff(a, b):.2e}"
    )
    assert b.abs().max() > 1.0  # the reference is not trivially small
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_loss_matches_gpt2():
    hf = _hf_gpt2()
    ours = GPT.from_huggingface(hf)
    idx = torch.randint(0, 97, (2, 16), generator=torch.Generator().manual_seed(2))
    targets = torch.roll(idx, -1, dims=1)  # targets[t] = idx[t + 1] ...
    targets[:, -1] = -100  # ... except at the last position, which has no next token
    with torch.no_grad():
        ours_loss = ours(idx, targets).loss
        hf_loss = hf(idx, labels=idx).loss  # Hugging Face shifts the labels itself
    print(f"\nGPT vs GPT2LMHeadModel: |loss diff| = {_max_diff(ours_loss, hf_loss):.2e}")
    torch.testing.assert_close(ours_loss, hf_loss, atol=ATOL, rtol=0)


def test_untied_head_matches_gpt2_with_its_own_lm_head():
    hf = _hf_gpt2(tie_word_embeddings=False)
    assert hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr()
    ours = GPT.from_huggingface(hf)
    assert not ours.config.tie_weights and ours.lm_head.weight is not ours.tok_emb.weight
    idx = torch.randint(0, 97, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = ours(idx).logits, hf(idx).logits
    print(f"\nGPT (untied) vs GPT2LMHeadModel: max |logits diff| = {_max_diff(a, b):.2e}")
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    tied = GPT(GPTConfig.tiny())
    untied = GPT(GPTConfig.tiny(tie_weights=False))
    assert untied.num_parameters() - tied.num_parameters() == 65 * 128  # one more (V, C) matrix


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_greedy_generation_matches_gpt2(attn):
    hf = _hf_gpt2(attn, seed=3)
    ours = GPT.from_huggingface(hf)
    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(4))
    expected = hf.generate(prompt, max_new_tokens=20, do_sample=False)
    for use_cache in (True, False):
        got = ours.generate(prompt, 20, temperature=0, use_cache=use_cache)
        assert torch.equal(got, expected), (use_cache, got, expected)


def test_top_k_and_top_p_match_hugging_face_warpers():
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(5)) * 3
    for k in (1, 5, 50):
        expected = TopKLogitsWarper(top_k=k)(None, logits.clone())
        assert torch.equal(torch.isinf(filter_logits(logits, top_k=k)), torch.isinf(expected))
    for p in (0.05, 0.5, 0.9, 0.99):
        expected = TopPLogitsWarper(top_p=p)(None, logits.clone())
        assert torch.equal(torch.isinf(filter_logits(logits, top_p=p)), torch.isinf(expected)), p


@pytest.mark.parametrize("fused", [True, False])
def test_cache_gives_the_same_tokens_greedy_and_sampled(fused):
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(vocab_size=50, max_len=16, n_layers=2, n_heads=2, d_model=32, fused=fused)
    )
    prompt = torch.randint(0, 50, (3, 4))
    # 4 + 20 tokens run past max_len=16, so the sliding-window fallback is exercised too.
    greedy = [model.generate(prompt, 20, temperature=0, use_cache=c) for c in (True, False)]
    assert torch.equal(*greedy)
    for kw in ({"top_k": 5}, {"top_p": 0.8, "temperature": 0.7}):
        sampled = [
            model.generate(
                prompt, 20, use_cache=c, generator=torch.Generator().manual_seed(7), **kw
            )
            for c in (True, False)
        ]
        assert torch.equal(*sampled), kw
    assert greedy[0].shape == (3, 24)


def test_generate_restores_training_mode_and_is_seeded():
    model = GPT(GPTConfig.tiny(n_layers=1, dropout=0.1)).train()
    prompt = torch.zeros(1, 1, dtype=torch.long)
    a = model.generate(prompt, 10, generator=torch.Generator().manual_seed(0))
    b = model.generate(prompt, 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b) and model.training
    c = model.generate(
        prompt, 10, generator=torch.Generator().manual_seed(0), progress=True
    )  # with a tqdm bar
    assert torch.equal(a, c)


def test_future_tokens_do_not_change_earlier_logits():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(n_layers=2)).eval()
    idx = torch.randint(0, 65, (2, 20))
    changed = idx.clone()
    changed[:, 12:] = torch.randint(0, 65, (2, 8))
    with torch.no_grad():
        a, b = model(idx).logits, model(changed).logits
    torch.testing.assert_close(a[:, :12], b[:, :12], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 12:], b[:, 12:])


def test_attention_maps_are_causal_and_explicit_path_matches_fused():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(n_layers=2)).eval()
    idx = torch.randint(0, 65, (2, 10))
    with torch.no_grad():
        out = model(idx, output_attentions=True)
        fused = model(idx)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 4, 10, 10)
    upper = torch.ones(10, 10, dtype=torch.bool).triu(1)
    assert (out.attentions[0][..., upper] == 0).all()
    torch.testing.assert_close(out.attentions[1].sum(-1), torch.ones(2, 4, 10))
    torch.testing.assert_close(out.logits, fused.logits, atol=1e-5, rtol=0)


def test_tied_head_presets_and_parameter_count():
    model = GPT(GPTConfig.tiny())
    assert model.lm_head.weight is model.tok_emb.weight
    cfg = GPTConfig.tiny()
    assert (cfg.n_layers, cfg.n_heads, cfg.d_model, cfg.max_len, cfg.vocab_size) == (
        4,
        4,
        128,
        64,
        65,
    )
    assert 0.7e6 < model.num_parameters() < 0.9e6
    g = GPTConfig.gpt2()
    assert (g.n_layers, g.n_heads, g.d_model, g.max_len, g.vocab_size, g.d_ff) == (
        12,
        12,
        768,
        1024,
        50257,
        3072,
    )
    assert GPTConfig.tiny(n_layers=2).n_layers == 2


def test_loss_ignores_minus_100_and_matches_cross_entropy():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(n_layers=1))
    idx = torch.randint(0, 65, (2, 8))
    targets = torch.randint(0, 65, (2, 8))
    targets[0, :3] = -100
    out = model(idx, targets)
    expected = F.cross_entropy(out.logits.reshape(-1, 65), targets.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)
    out.loss.backward()
    assert model.tok_emb.weight.grad is not None


@pytest.mark.slow
def test_gpt2_small_full_size_mapping():
    """GPT-2 small's real shape (124M parameters, random weights): the mapping holds at scale."""
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(
        _hf_config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
    ).eval()
    ours = GPT.from_huggingface(hf)
    assert ours.config == GPTConfig.gpt2()
    assert 124e6 < ours.num_parameters() < 125e6
    idx = torch.randint(0, 50257, (1, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = ours(idx).logits, hf(idx).logits
    print(f"\nGPT-2 small (124M): max |logits diff| = {_max_diff(a, b):.2e}")
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    expected = hf.generate(idx[:, :8], max_new_tokens=5, do_sample=False)
    assert torch.equal(ours.generate(idx[:, :8], 5, temperature=0), expected)
