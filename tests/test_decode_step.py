"""The per-token generation path (Block.decode_step) gives the module path's numbers."""

import torch

from transformer_lab.blocks import Block
from transformer_lab.heads import KVCache
from transformer_lab.models import GPT, GPTConfig


def _block(fused: bool) -> Block:
    torch.manual_seed(0)
    return Block(32, 4, activation="gelu_tanh", norm_first=True, fused=fused).eval()


def test_decode_step_equals_block_call_with_cache():
    for fused in (True, False):
        block = _block(fused)
        x = torch.randn(2, 7, 32)  # (B, T, C)
        with torch.no_grad():
            ref_cache, fast_cache = KVCache(), KVCache()
            block(x[:, :5], is_causal=True, cache=ref_cache)
            block(x[:, :5], is_causal=True, cache=fast_cache)
            for t in (5, 6):
                ref, _ = block(x[:, t : t + 1], is_causal=True, cache=ref_cache)
                fast = block.decode_step(x[:, t : t + 1], fast_cache)
                torch.testing.assert_close(fast, ref, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(fast_cache.k, ref_cache.k)


def test_plain_is_false_with_hooks_or_a_patched_forward():
    block = _block(True)
    assert block.plain()
    handle = block.mlp.fc1.register_forward_hook(lambda *args: None)
    assert not block.plain()
    handle.remove()
    block.self_attn_norm.forward = lambda x: x
    assert not block.plain()


def test_generate_calls_hooks_of_every_step():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(max_len=32)).eval()
    prompt = torch.randint(0, model.config.vocab_size, (1, 4))
    calls = []
    handle = model.blocks[0].mlp.register_forward_hook(lambda *args: calls.append(1))
    hooked = model.generate(prompt, 5, temperature=0.0, progress=False)
    handle.remove()
    assert len(calls) == 5  # the prompt, then one call per new token after the first
    plain = model.generate(prompt, 5, temperature=0.0, progress=False)
    assert torch.equal(hooked, plain)


def test_hugepage_copy_is_an_equal_contiguous_copy():
    from transformer_lab._hugepages import hugepage_copy

    for t in (torch.randn(10), torch.randn(1024, 768).t()):  # small; over one huge page
        c = hugepage_copy(t)
        assert torch.equal(c, t) and c.is_contiguous() and c.data_ptr() != t.data_ptr()
