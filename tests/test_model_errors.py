"""Bad configs and bad inputs to the models give one sentence naming what was expected and received."""

import dataclasses

import pytest
import torch

from transformer_lab.models import (
    BERT,
    GPT,
    BertConfig,
    GPTConfig,
    Seq2SeqConfig,
    Seq2SeqTransformer,
    ViT,
    ViTConfig,
    apply_bert_masking,
)
from transformer_lab.models._weights import load_weights


def _one_sentence(message: str) -> None:
    assert message.count(". ") == 0, message
    assert message.rstrip("'\"").endswith("."), message


def _raises(exc, match, fn, *args, **kwargs):
    with pytest.raises(exc, match=match) as err:
        fn(*args, **kwargs)
    _one_sentence(str(err.value.args[0]))
    return err


# --- configs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: GPTConfig(d_model=10, n_heads=3),
            r"GPTConfig\.d_model must be divisible by n_heads.*d_model=10 and n_heads=3",
        ),
        (
            lambda: GPTConfig(n_layers=0),
            r"GPTConfig\.n_layers must be a positive integer, but received n_layers=0",
        ),
        (
            lambda: GPTConfig(dropout=1.5),
            r"GPTConfig\.dropout must be a probability in \[0, 1\), but received dropout=1\.5",
        ),
        (lambda: GPTConfig(activation="swish"), r"GPTConfig\.activation must be one of .*'swish'"),
        (lambda: GPTConfig(eps=0.0), r"GPTConfig\.eps must be a small positive number"),
        (
            lambda: BertConfig(d_model=100, n_heads=12),
            r"BertConfig\.d_model must be divisible by n_heads",
        ),
        (
            lambda: BertConfig(vocab_size=10, pad_token_id=10),
            r"BertConfig\.pad_token_id must lie in 0\.\.vocab_size-1=9",
        ),
        (
            lambda: ViTConfig(image_size=30, patch_size=4),
            r"ViTConfig\.image_size must be a multiple of patch_size.*image_size=30 and patch_size=4",
        ),
        (
            lambda: ViTConfig(position="rotary"),
            r"ViTConfig\.position must be one of \['learned', 'sinusoidal_2d'\]",
        ),
        (
            lambda: ViTConfig.tiny(d_model=66, n_heads=3, position="sinusoidal_2d"),
            r"ViTConfig\.d_model must be divisible by 4",
        ),
        (lambda: Seq2SeqConfig(d_model=33, n_heads=3), r"Seq2SeqConfig\.d_model must be even"),
        (
            lambda: Seq2SeqConfig.tiny(max_len=-1),
            r"Seq2SeqConfig\.max_len must be a positive integer",
        ),
    ],
)
def test_invalid_configs_name_the_field(make, match):
    _raises(ValueError, match, make)


def test_configs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GPTConfig.tiny().n_layers = 8


def test_models_want_their_own_config():
    _raises(
        TypeError,
        r"GPT expects a GPTConfig, but received BertConfig",
        GPT,
        BertConfig.tiny(vocab_size=10),
    )


# --- token ids and lengths -----------------------------------------------------------------------


def test_token_ids_outside_the_vocabulary():
    gpt = GPT(GPTConfig.tiny(n_layers=1))
    _raises(
        ValueError,
        r"idx must lie in 0\.\.64 \(vocab_size=65\), but received token id 65",
        gpt,
        torch.tensor([[1, 65]]),
    )
    _raises(ValueError, r"received token id -1", gpt, torch.tensor([[-1, 3]]))
    _raises(ValueError, r"idx must lie in 0\.\.64", gpt.generate, torch.tensor([[70]]), 3)
    bert = BERT(BertConfig.tiny(vocab_size=50, n_layers=1))
    _raises(
        ValueError,
        r"input_ids must lie in 0\.\.49 \(vocab_size=50\), but received token id 50",
        bert,
        torch.tensor([[50]]),
    )
    _raises(
        ValueError,
        r"token_type_ids must lie in 0\.\.1",
        bert,
        torch.tensor([[5]]),
        token_type_ids=torch.tensor([[2]]),
    )
    s2s = Seq2SeqTransformer(Seq2SeqConfig.tiny(n_encoder_layers=1, n_decoder_layers=1))
    _raises(ValueError, r"src must lie in 0\.\.31", s2s, torch.tensor([[40]]), torch.tensor([[1]]))
    _raises(ValueError, r"tgt must lie in 0\.\.63", s2s, torch.tensor([[4]]), torch.tensor([[99]]))


def test_float_ids_and_wrong_rank():
    gpt = GPT(GPTConfig.tiny(n_layers=1))
    _raises(
        TypeError,
        r"idx must hold integer token ids \(torch\.long\), but received dtype torch\.float32",
        gpt,
        torch.zeros(1, 3),
    )
    _raises(
        ValueError,
        r"idx must have 2 dimensions, but received shape \(3,\)",
        gpt,
        torch.zeros(3, dtype=torch.long),
    )


def test_sequences_longer_than_the_position_table():
    gpt = GPT(GPTConfig.tiny(n_layers=1))
    _raises(
        ValueError,
        r"idx has 65 tokens per sequence, but the position table holds only 64 positions",
        gpt,
        torch.zeros(1, 65, dtype=torch.long),
    )
    bert = BERT(BertConfig.tiny(vocab_size=50, n_layers=1, max_len=16))
    _raises(
        ValueError,
        r"input_ids has 17 tokens per sequence, but the position table holds only 16",
        bert,
        torch.zeros(2, 17, dtype=torch.long),
    )
    # generate() crops the context instead of failing.
    assert gpt.generate(torch.zeros(1, 70, dtype=torch.long), 2).shape == (1, 72)


def test_shapes_that_do_not_match_the_input_ids():
    bert = BERT(BertConfig.tiny(vocab_size=50, n_layers=1))
    ids = torch.ones(2, 5, dtype=torch.long)
    _raises(
        ValueError,
        r"attention_mask must have the shape of input_ids \(2, 5\), but received shape \(2, 4\)",
        bert,
        ids,
        torch.ones(2, 4),
    )
    gpt = GPT(GPTConfig.tiny(n_layers=1))
    _raises(
        ValueError,
        r"targets must have the shape of idx \(2, 5\), but received shape \(2, 4\)",
        gpt,
        ids,
        ids[:, :4],
    )


def test_generation_arguments():
    gpt = GPT(GPTConfig.tiny(n_layers=1))
    prompt = torch.zeros(1, 2, dtype=torch.long)
    _raises(
        ValueError,
        r"temperature must be >= 0 \(0 means greedy\), but received -1",
        gpt.generate,
        prompt,
        3,
        temperature=-1,
    )
    _raises(
        ValueError,
        r"top_k must be a positive integer or None, but received 0",
        gpt.generate,
        prompt,
        3,
        top_k=0,
    )
    _raises(
        ValueError,
        r"top_p must lie in \(0, 1\] or be None, but received 1\.5",
        gpt.generate,
        prompt,
        3,
        top_p=1.5,
    )
    _raises(ValueError, r"max_new_tokens must be a non-negative integer", gpt.generate, prompt, -2)
    s2s = Seq2SeqTransformer(Seq2SeqConfig.tiny(n_encoder_layers=1, n_decoder_layers=1))
    _raises(
        ValueError,
        r"max_new_tokens must lie in 1\.\.64",
        s2s.greedy_decode,
        torch.tensor([[4, 5]]),
        100,
        1,
        2,
    )


# --- images --------------------------------------------------------------------------------------


def test_image_size_not_a_multiple_of_the_patch_size():
    vit = ViT(ViTConfig.tiny(n_layers=1))
    _raises(
        ValueError,
        r"image height and width must be multiples of patch_size=2, but received an image of 9x9",
        vit,
        torch.randn(1, 1, 9, 9),
    )
    _raises(
        ValueError,
        r"images must be 8x8 \(the configured image_size.*but received 10x10",
        vit,
        torch.randn(1, 1, 10, 10),
    )


def test_wrong_number_of_channels():
    vit = ViT(ViTConfig.tiny(n_layers=1))
    _raises(
        ValueError,
        r"pixel_values must have n_channels=1 channels.*received shape \(2, 3, 8, 8\)",
        vit,
        torch.randn(2, 3, 8, 8),
    )
    _raises(
        ValueError,
        r"pixel_values must have 4 dimensions, but received shape \(8, 8\)",
        vit,
        torch.randn(8, 8),
    )


# --- weights -------------------------------------------------------------------------------------


def test_loading_weights_of_the_wrong_shape_names_parameter_and_shapes():
    gpt = GPT(GPTConfig.tiny(n_layers=1))
    weights = {name: p.detach().clone() for name, p in gpt.named_parameters()}
    weights["blocks.0.self_attn.q_proj.weight"] = torch.zeros(128, 64)
    _raises(
        ValueError,
        r"cannot load 'blocks\.0\.self_attn\.q_proj\.weight' from the given weights: the model expects shape "
        r"\(128, 128\), but the weights have shape \(128, 64\)",
        load_weights,
        gpt,
        weights,
    )
    del weights["blocks.0.self_attn.q_proj.weight"]
    with pytest.raises(
        KeyError, match="no weight for parameter 'blocks.0.self_attn.q_proj.weight'"
    ):
        load_weights(gpt, weights)
    with pytest.raises(KeyError, match="'nonsense.weight', which is not a parameter of GPT"):
        load_weights(gpt, {**weights, "nonsense.weight": torch.zeros(1)})


def test_from_huggingface_with_a_mismatched_tensor():
    transformers = pytest.importorskip("transformers")
    hf = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(
            vocab_size=20,
            n_positions=8,
            n_embd=16,
            n_layer=1,
            n_head=2,
            bos_token_id=None,
            eos_token_id=None,
        )
    )
    hf.transformer.wpe.weight = torch.nn.Parameter(
        torch.zeros(9, 16)
    )  # one row more than n_positions says
    _raises(
        ValueError,
        r"cannot load 'pos_emb\.weight'.*expects shape \(8, 16\), but the weights have shape \(9, 16\)",
        GPT.from_huggingface,
        hf,
    )


def test_masking_arguments():
    ids = torch.ones(2, 4, dtype=torch.long)
    _raises(
        ValueError,
        r"mlm_probability must lie in \(0, 1\), but received 1\.5",
        apply_bert_masking,
        ids,
        3,
        10,
        mlm_probability=1.5,
    )
    _raises(
        ValueError,
        r"mask_token_id must lie in 0\.\.9 \(vocab_size=10\), but received 12",
        apply_bert_masking,
        ids,
        12,
        10,
    )


def test_from_huggingface_untied_model_without_its_head():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        vocab_size=20,
        n_positions=8,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=None,
        eos_token_id=None,
        tie_word_embeddings=False,
    )
    bare = transformers.GPT2Model(
        config
    )  # the transformer alone: an untied head's weights are not in it
    _raises(
        ValueError,
        r"tie_word_embeddings=False but no lm_head: load a GPT2LMHeadModel",
        GPT.from_huggingface,
        bare,
    )
