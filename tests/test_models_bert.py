"""BERT against Hugging Face's BertModel (random weights, copied across) and BERT's masking."""

import pytest
import torch
import torch.nn.functional as F

from transformer_lab.models import (
    BERT,
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    apply_bert_masking,
)

transformers = pytest.importorskip(
    "transformers", reason="the parity tests need Hugging Face transformers"
)

ATOL = 1e-4  # float32 tolerance on every output compared with Hugging Face
V = 101


def _hf_config(attn="eager", **kw):
    base = dict(
        vocab_size=V,
        hidden_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=96,
        max_position_embeddings=40,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=3,
        attn_implementation=attn,
    )
    base.update(kw)
    return transformers.BertConfig(**base)


def _randomise(model, seed=0, scale=0.2):
    """Large random weights (norm gains around 1) so that attention patterns are far from uniform."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            offset = 1.0 if "LayerNorm.weight" in name else 0.0
            p.copy_(torch.randn(p.shape, generator=g) * scale + offset)
    return model


def _padded_batch():
    """Three sequences of lengths 12, 7 and 3, right-padded with [PAD] = 0, two segments."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, V, (3, 12), generator=g)
    attention_mask = torch.ones(3, 12, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 3:] = 0
    ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros_like(ids)
    token_type_ids[:, 6:] = 1
    return ids, attention_mask, token_type_ids


def _max_diff(a, b):
    return (a - b).abs().max().item()


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("fused", [True, False])
def test_hidden_state_and_pooler_match_bert_model_on_a_padded_batch(attn, fused):
    hf = _randomise(transformers.BertModel(_hf_config(attn)).eval())
    ours = BERT.from_huggingface(hf)
    for block in ours.blocks:
        block.self_attn.fused = fused
    ids, mask, segments = _padded_batch()
    with torch.no_grad():
        a = ours(ids, attention_mask=mask, token_type_ids=segments)
        b = hf(input_ids=ids, attention_mask=mask, token_type_ids=segments)
    print(
        f"\nBERT vs BertModel ({attn}, fused={fused}): max diff last_hidden_state "
        f"{_max_diff(a.last_hidden_state, b.last_hidden_state):.2e}, pooler {_max_diff(a.pooler_output, b.pooler_output):.2e}"
    )
    torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state, atol=ATOL, rtol=0)
    torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=ATOL, rtol=0)


def test_padding_is_really_masked():
    """Changing what sits in the padded slots must not change the real tokens' outputs."""
    torch.manual_seed(0)
    model = BERT(BertConfig.tiny(vocab_size=V)).eval()
    ids, mask, _ = _padded_batch()
    other = ids.clone()
    other[mask == 0] = 7
    with torch.no_grad():
        a, b = model(ids, mask).last_hidden_state, model(other, mask).last_hidden_state
        unmasked = model(other).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=0)
    assert not torch.allclose(a[real], unmasked[real], atol=1e-3)  # without the mask it would leak


def test_without_positions_the_encoder_cannot_see_word_order():
    """positions=False: shuffling the tokens shuffles the outputs the same way, and the [CLS]
    summary of a sentence and of its shuffled words is identical; with positions it is not."""
    torch.manual_seed(0)
    ids = torch.randint(5, V, (2, 10))
    ids[:, 0] = 1  # a fixed first token, like [CLS]
    perm = torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(9)])  # keeps position 0
    for positions in (False, True):
        torch.manual_seed(0)
        model = BERT(BertConfig.tiny(vocab_size=V, positions=positions, dropout=0.0)).eval()
        with torch.no_grad():
            a, b = model(ids), model(ids[:, perm])
        same = torch.allclose(a.last_hidden_state[:, perm], b.last_hidden_state, atol=1e-5)
        assert same is (not positions)
        assert torch.allclose(a.pooler_output, b.pooler_output, atol=1e-5) is (not positions)
    names = [n for n, _ in BERT(BertConfig.tiny(vocab_size=V, positions=False)).named_parameters()]
    assert not any("pos_emb" in n for n in names)


def test_masked_lm_head_matches_hugging_face():
    hf = _randomise(transformers.BertForMaskedLM(_hf_config()).eval())
    ours = BertForMaskedLM.from_huggingface(hf)
    assert ours.mlm_decoder.weight is ours.bert.tok_emb.weight  # tied
    ids, mask, segments = _padded_batch()
    labels = torch.where(mask.bool(), ids, torch.full_like(ids, -100))  # predict every real token
    with torch.no_grad():
        a = ours(ids, mask, segments, labels=labels)
        b = hf(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels)
    print(
        f"\nBertForMaskedLM: max |logits diff| {_max_diff(a.logits, b.logits):.2e}, |loss diff| {_max_diff(a.loss, b.loss):.2e}"
    )
    torch.testing.assert_close(a.logits, b.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(a.loss, b.loss, atol=ATOL, rtol=0)


def test_sequence_classifier_matches_hugging_face():
    hf = _randomise(transformers.BertForSequenceClassification(_hf_config()).eval())
    ours = BertForSequenceClassification.from_huggingface(hf)
    ids, mask, segments = _padded_batch()
    labels = torch.tensor([0, 2, 1])
    with torch.no_grad():
        a = ours(ids, mask, segments, labels=labels)
        b = hf(input_ids=ids, attention_mask=mask, token_type_ids=segments, labels=labels)
    print(f"\nBertForSequenceClassification: max |logits diff| {_max_diff(a.logits, b.logits):.2e}")
    torch.testing.assert_close(a.logits, b.logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(a.loss, b.loss, atol=ATOL, rtol=0)


def test_attention_maps_ignore_padding():
    torch.manual_seed(0)
    model = BERT(BertConfig.tiny(vocab_size=V)).eval()
    ids, mask, _ = _padded_batch()
    out = model(ids, mask, output_attentions=True)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (3, 4, 12, 12)
    assert (out.attentions[0][2, :, :, 3:] == 0).all()  # sequence 2 has 3 real tokens
    torch.testing.assert_close(out.attentions[1].sum(-1), torch.ones(3, 4, 12))


def test_masking_proportions():
    """15% of tokens chosen; of those 80% [MASK], 10% random, 10% unchanged."""
    n, vocab, mask_id = 400_000, 30_000, 4
    ids = torch.randint(10, vocab, (4, n // 4), generator=torch.Generator().manual_seed(0))
    inputs, labels = apply_bert_masking(
        ids, mask_id, vocab, generator=torch.Generator().manual_seed(1)
    )
    chosen = labels != -100
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])  # unchosen tokens are never touched
    n_chosen = chosen.sum().item()
    masked = (inputs[chosen] == mask_id).float().mean().item()
    unchanged = (inputs[chosen] == ids[chosen]).float().mean().item()
    randomised = 1.0 - masked - unchanged
    # 4 standard deviations of a binomial proportion: the test fails for a wrong rule, not by chance.
    assert abs(n_chosen / n - 0.15) < 4 * (0.15 * 0.85 / n) ** 0.5
    for observed, p in ((masked, 0.8), (randomised, 0.1), (unchanged, 0.1)):
        assert abs(observed - p) < 4 * (p * (1 - p) / n_chosen) ** 0.5 + 1e-4, (observed, p)


def test_masking_skips_special_tokens_and_is_seeded():
    ids = torch.randint(5, 50, (8, 64), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 1, 2  # [CLS] ... [SEP]
    inputs, labels = apply_bert_masking(
        ids,
        3,
        50,
        mlm_probability=0.5,
        special_token_ids=(1, 2),
        generator=torch.Generator().manual_seed(4),
    )
    assert (labels[:, 0] == -100).all() and (labels[:, -1] == -100).all()
    assert torch.equal(inputs[:, 0], ids[:, 0])
    again = apply_bert_masking(
        ids,
        3,
        50,
        mlm_probability=0.5,
        special_token_ids=(1, 2),
        generator=torch.Generator().manual_seed(4),
    )
    assert torch.equal(inputs, again[0]) and torch.equal(labels, again[1])


def test_mlm_loss_only_counts_chosen_positions():
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig.tiny(vocab_size=V))
    ids, mask, _ = _padded_batch()
    inputs, labels = apply_bert_masking(
        ids,
        3,
        V,
        mlm_probability=0.5,
        special_token_ids=(0,),
        generator=torch.Generator().manual_seed(3),
    )
    out = model(inputs, mask, labels=labels)
    chosen = labels != -100
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits[chosen], labels[chosen]))
    model.eval()  # no dropout, so the two paths see the same activations
    fast = model.masked_lm_loss(inputs, labels, attention_mask=mask)
    torch.testing.assert_close(fast, model(inputs, mask, labels=labels).loss, atol=1e-5, rtol=0)


def test_presets():
    assert (BertConfig.base().n_layers, BertConfig.base().d_model, BertConfig.base().eps) == (
        12,
        768,
        1e-12,
    )
    m = BertConfig.minilm()
    assert (m.n_layers, m.n_heads, m.d_model, m.d_ff) == (6, 12, 384, 1536)
    assert BertConfig.tiny(vocab_size=500).vocab_size == 500
