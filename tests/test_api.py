"""The frozen public names: every one is documented in docs/api.md, and the old names are gone."""

import importlib
from pathlib import Path

import pytest

API = (Path(__file__).parent.parent / "docs" / "api.md").read_text()
MODULES = [
    "transformer_lab",
    "transformer_lab.attention",
    "transformer_lab.heads",
    "transformer_lab.masks",
    "transformer_lab.tiled",
    "transformer_lab.gqa",
    "transformer_lab.interpret",
    "transformer_lab.positional",
    "transformer_lab.blocks",
    "transformer_lab.models",
    "transformer_lab.data",
    "transformer_lab.train",
    "transformer_lab.checkpoints",
    "transformer_lab.bpe",
    "transformer_lab.lessons.baselines",
]


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_is_in_docs_api(module):
    names = importlib.import_module(module).__all__
    missing = [n for n in names if f"`{n}`" not in API]
    assert not missing, f"{module} exports {missing} but docs/api.md does not list them"


@pytest.mark.parametrize(
    "module, old",
    [
        ("transformer_lab", "EncoderBlock"),
        ("transformer_lab", "DecoderBlock"),
        ("transformer_lab.blocks", "EncoderBlock"),
        ("transformer_lab.blocks", "DecoderBlock"),
    ],
)
def test_the_old_block_classes_are_gone(module, old):
    assert not hasattr(importlib.import_module(module), old)


@pytest.mark.parametrize("config", ["GPTConfig", "BertConfig", "ViTConfig", "Seq2SeqConfig"])
def test_configs_speak_one_vocabulary(config):
    fields = set(
        getattr(importlib.import_module("transformer_lab.models"), config).__dataclass_fields__
    )
    assert "n_heads" in fields and "d_model" in fields
    assert not fields & {"n_head", "n_layer", "block_size", "n_embd"}
