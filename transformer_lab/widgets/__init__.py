"""Explorers: sliders next to a plot that redraws in place, one per idea of the course.

    softmax_explorer      softmax with a temperature (and a shift that changes nothing)
    scaling_explorer      why scores are divided by sqrt(d_k): spread of dot products, saturation
    attention_explorer    one head's attention weights over a sentence, query selectable
    heads_explorer        every head's pattern as the number of heads H changes
    positional_explorer   sinusoidal encodings: the table, similarity against offset, the clocks
    mask_explorer         causal and padding masks, combined, and the weights they leave
    sampling_explorer     temperature, top-k and top-p on a next-token distribution
    generation_explorer   a trained GPT writing, with every step's next-token distribution
    gpt_attention_explorer  the trained GPT's attention over a prompt, by layer and head

Each call returns an ``ipywidgets`` widget (an :class:`~transformer_lab.widgets._common.Explorer`)
with ``.controls`` (name -> control; set ``.value`` to drive it), ``.figure`` (the matplotlib
figure), ``.image`` (the PNG the notebook shows) and ``.state()`` (the plotted arrays). The plot
is a PNG in an ``ipywidgets.Image``, so it works in any Jupyter front end without ipympl.

**Under grading** (``transformer_lab.grading_mode()`` is true: nbgrader's ``NBGRADER_EXECUTION``
or ``TLAB_GRADING=1``) an explorer builds nothing interactive: it returns a
:class:`GradingPlaceholder`, a plain object that prints one line, has empty ``controls`` and
imports neither ipywidgets nor matplotlib, so an autograder can never wait on a widget.

Importing this package is cheap: the explorer modules load on first use, and ipywidgets and
matplotlib load only when an explorer is actually built.
"""

from __future__ import annotations

import importlib
from typing import Any

from transformer_lab.widgets._placeholder import GradingPlaceholder

# explorer name -> module that defines it; loaded on first attribute access (PEP 562).
_EXPLORERS = {
    "softmax_explorer": "softmax",
    "scaling_explorer": "scaling",
    "attention_explorer": "attention_maps",
    "heads_explorer": "attention_maps",
    "positional_explorer": "positional",
    "mask_explorer": "masks",
    "sampling_explorer": "sampling",
    **{"generation_explorer": "gpt", "gpt_attention_explorer": "gpt"},
}

__all__ = [*_EXPLORERS, "GradingPlaceholder"]


def __getattr__(name: str) -> Any:
    if name in _EXPLORERS:
        module = importlib.import_module(f"{__name__}.{_EXPLORERS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
