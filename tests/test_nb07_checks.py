"""Notebook 07's checks: correct answers in several styles pass, a catalogue of realistic wrong
answers (at least eight per exercise) is caught WITH the right diagnosis, and the references
are disabled while the student's function runs.

The catalogue (correct variants and wrong implementations, each written the way a student would
write it) is tests/catalogues/nb07.py, in the holdout's format; the one floor test
(tests/holdout/test_holdout.py) holds it to its recorded share too. Each entry carries the
words its message must contain; ``test_share_named`` reports the share of the catalogue whose
message names the mistake (target >= 95%) and fails on any misleading one.
"""

from __future__ import annotations

import pytest
from torch import nn

from tests.catalogues.nb07 import (
    CATALOGUE,
    GOOD,
)
from transformer_lab import checks


def _name(fn) -> str:
    return getattr(fn, "__name__", "impl")


@pytest.mark.parametrize("hidden", [False, True], ids=["visible", "hidden"])
@pytest.mark.parametrize("check,impl", GOOD, ids=[_name(i) for _, i in GOOD])
def test_correct_implementations_pass(check, impl, hidden, capsys):
    check(impl, hidden=hidden)
    assert "passed" in capsys.readouterr().out


_DIAGNOSES: dict[tuple[int, int], str | None] = {}


def _diagnosis(check, impl) -> str | None:
    """The check's message for ``impl`` (None if the check passed); computed once per pair."""
    key = (id(check), id(impl))
    if key not in _DIAGNOSES:
        try:
            check(impl)
            _DIAGNOSES[key] = None
        except AssertionError as exc:
            _DIAGNOSES[key] = str(exc)
    return _DIAGNOSES[key]


@pytest.mark.parametrize(
    "check,impl,words", CATALOGUE, ids=[f"{c.__name__[6:]}-{_name(i)}" for c, i, _ in CATALOGUE]
)
def test_catalogue_of_mistakes_is_diagnosed(check, impl, words):
    message = _diagnosis(check, impl)
    assert message is not None, "the check passed a wrong implementation"
    assert message.startswith(check.__name__ + ":")
    assert words in message, message


def test_share_named_and_at_least_eight_per_exercise():
    per_check: dict[str, list[bool]] = {}
    misleading = []
    for check, impl, words in CATALOGUE:
        message = _diagnosis(check, impl)
        named = message is not None and words in message
        per_check.setdefault(check.__name__, []).append(named)
        if message is not None and not named:
            misleading.append((check.__name__, _name(impl), message))
    total = sum(len(v) for v in per_check.values())
    share = sum(sum(v) for v in per_check.values()) / total
    print(f"\nnotebook 07 mistake catalogue: {share:.0%} of {total} named")
    for name, flags in per_check.items():
        print(f"  {name}: {sum(flags)}/{len(flags)}")
    assert all(len(v) >= 8 for v in per_check.values()), {k: len(v) for k, v in per_check.items()}
    assert share >= 0.95 and not misleading, misleading


def _untouched(*args, **kwargs):
    raise NotImplementedError()


@pytest.mark.parametrize("name", sorted({c.__name__ for c, _ in GOOD}))
def test_untouched_answer_says_not_implemented(name):
    with pytest.raises(AssertionError, match="not implemented yet"):
        getattr(checks, name)(_untouched)


# ---------------------------------------------------------------------------------------------
# The references are disabled while the student's code runs.
def _uses_package_filter(logits, temperature=1.0, top_k=None, top_p=None):
    from transformer_lab.models.gpt import filter_logits as package_filter

    return package_filter(logits / temperature, top_k, top_p)


class _DelegatesToGPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        from transformer_lab.models import GPT

        inner = GPT(config)
        self.tok_emb, self.pos_emb, self.blocks = inner.tok_emb, inner.pos_emb, inner.blocks
        self.norm_f, self.lm_head = inner.norm_f, inner.lm_head
        self._forward = type(inner).forward
        self._inner = [inner]

    def forward(self, idx):
        return self._forward(self._inner[0], idx).logits


def _uses_generate(model, idx, max_new_tokens):
    return model.generate(idx, max_new_tokens, temperature=0)


@pytest.mark.parametrize(
    "check,impl",
    [
        (checks.check_filter_logits, _uses_package_filter),
        (checks.check_gpt_from_blocks, _DelegatesToGPT),
        (checks.check_generate_greedy, _uses_generate),
    ],
    ids=["package-filter", "gpt-forward", "gpt-generate"],
)
def test_references_are_disabled(check, impl):
    message = _diagnosis(check, impl)
    assert message is not None and "disable" in message, message
