"""Bad input gives one sentence naming what was expected and what was received."""

import pytest
import torch

from transformer_lab import (
    Block,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    SinusoidalPositionalEncoding,
    causal_mask,
    combine_masks,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    softmax,
    split_heads,
)


def _one_sentence(message: str) -> None:
    assert message.endswith("."), message
    assert ". " not in message[:-1] and "\n" not in message, message  # no second sentence


def test_d_model_not_divisible_by_n_heads():
    with pytest.raises(ValueError, match=r"d_model=10 and n_heads=3") as err:
        MultiHeadAttention(10, 3)
    _one_sentence(str(err.value))
    with pytest.raises(ValueError, match="divisible"):
        Block(10, 4, 20)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(torch.randn(1, 2, 10), 4)


def test_query_key_widths_that_do_not_match():
    with pytest.raises(ValueError, match=r"q has D=4 and k has D=5") as err:
        scaled_dot_product_attention(torch.randn(3, 4), torch.randn(3, 5), torch.randn(3, 5))
    _one_sentence(str(err.value))
    with pytest.raises(ValueError, match=r"k has S=3 and v has S=4"):
        scaled_dot_product_attention(torch.randn(3, 4), torch.randn(3, 4), torch.randn(4, 4))
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"d_model=8, but received shape \(2, 5, 6\)"):
        mha(torch.randn(2, 5, 6))
    with pytest.raises(ValueError, match=r"kv_dim=8, but received shape \(2, 5, 7\)"):
        mha(torch.randn(2, 5, 8), torch.randn(2, 5, 7))


def test_mask_that_does_not_broadcast():
    q = torch.randn(2, 5, 4)
    with pytest.raises(
        ValueError, match=r"mask of shape \(4, 4\) does not broadcast .* \(2, 5, 5\)"
    ) as err:
        scaled_dot_product_attention(q, q, q, causal_mask(4))
    _one_sentence(str(err.value))
    with pytest.raises(ValueError, match="does not broadcast"):
        MultiHeadAttention(4, 2)(q, mask=torch.ones(3, 1, 1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="do not broadcast together"):
        combine_masks(causal_mask(3), causal_mask(4))


def test_mask_of_the_wrong_dtype():
    q = torch.randn(5, 4)
    with pytest.raises(TypeError, match=r"torch.bool .* received dtype torch.int64") as err:
        scaled_dot_product_attention(q, q, q, causal_mask(5).long())
    assert "True = may attend" in str(err.value)
    with pytest.raises(TypeError, match="torch.float32"):
        MultiHeadAttention(4, 2)(q[None], mask=causal_mask(5).float())


def test_odd_width_for_sinusoidal_encodings():
    with pytest.raises(ValueError, match=r"even number .* received d_model=7") as err:
        sinusoidal_encoding(10, 7)
    _one_sentence(str(err.value))
    with pytest.raises(ValueError, match="d_model=5"):
        SinusoidalPositionalEncoding(5)


def test_sequence_longer_than_the_learned_table():
    emb = LearnedPositionalEmbedding(max_len=8, d_model=4)
    with pytest.raises(ValueError, match=r"needs 9 positions, but max_len=8") as err:
        emb(9)
    _one_sentence(str(err.value))
    with pytest.raises(ValueError, match="max_len=16"):
        SinusoidalPositionalEncoding(4, max_len=16)(torch.randn(1, 17, 4))


def test_non_tensor_input():
    with pytest.raises(TypeError, match="must be a torch.Tensor, but received list"):
        softmax([1.0, 2.0])
