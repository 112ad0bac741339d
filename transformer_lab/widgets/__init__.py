"""Explorers: sliders next to a plot that redraws in place, one per idea of the course.

    softmax_explorer      softmax with a temperature (and a shift that changes nothing)
    scaling_explorer      why scores are divided by sqrt(d_k): spread of dot products, saturation
    attention_explorer    one head's attention weights over a sentence, query selectable
    heads_explorer        every head's pattern as the number of heads H changes
    positional_explorer   sinusoidal encodings: the table, similarity against offset, the clocks
    mask_explorer         causal and padding masks, combined, and the weights they leave
    sampling_explorer     temperature, top-k and top-p on a next-token distribution
    equivariance_explorer shuffle the tokens: self-attention's outputs move with them
    cost_explorer         the T^2 cost: measured time and counted multiply-adds as T and C grow
    head_layout_explorer  split_heads / merge_heads drawn as blocks, and W_o mixing the heads
    position_kinds_explorer  learned vs sinusoidal positions, adding vs concatenating them
    rope_explorer         rotary encodings: rotating pairs, scores that depend only on the offset
    cross_attention_explorer  queries from one sequence over another's keys, with padding
    masked_row_explorer   a fully masked row: NaN spreading through layers with a naive softmax
    leak_explorer         perturb a future token and see which outputs change
    patches_explorer      an image cut into P x P patches: the sequence a ViT reads, and its cost
    vit_attention_explorer  where a trained ViT's [CLS] looks, per layer and head, and rollout
    confusion_explorer    a classifier's confusion matrix and its misclassified digits
    online_softmax_explorer  the online softmax block by block: running max, sum and output
    attention_cost_explorer  memory and time of attention as T grows, naive vs tiled
    receptive_field_explorer how far a sliding window sees through stacked layers
    bpe_explorer          byte-pair encoding: how a sentence splits as the merges grow

Explorers whose idea is an exercise take the student's function as their first argument, e.g.
``softmax_explorer(softmax)``: it runs on the same inputs as the reference at every slider step,
its result is drawn beside the reference with the differing entries marked, a function that
raises or returns the wrong shape gets one line instead of a traceback, and the exercise's check
diagnosis is shown under the plot.
    layer_norm_explorer   one token before and after layer norm (optionally your own layer_norm)
    residual_explorer     the residual stream's norm and each branch's share, pre- vs post-norm
    mlm_explorer / minilm_attention_explorer / similarity_explorer   BERT (notebook 6)
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

from transformer_lab.threads import ensure_threads_configured
from transformer_lab.widgets import a11y as _a11y
from transformer_lab.widgets._placeholder import GradingPlaceholder

ensure_threads_configured()  # the course's thread count (transformer_lab.threads), once
# Every figure a notebook shows gets a text alternative (issue 40; transformer_lab.widgets.a11y):
# a display formatter, registered by name, so matplotlib is still not imported here.
_a11y.install_figure_descriptions()

# explorer name -> module that defines it; loaded on first attribute access (PEP 562).
_EXPLORERS = {
    "bpe_explorer": "bpe",
    "bigram_explorer": "bigram",
    "softmax_explorer": "softmax",
    "scaling_explorer": "scaling",
    "attention_explorer": "attention_maps",
    "heads_explorer": "head_patterns",
    "positional_explorer": "positional",
    "mask_explorer": "masks",
    "sampling_explorer": "sampling",
    "equivariance_explorer": "equivariance",
    "cost_explorer": "cost",
    "head_layout_explorer": "head_layout",
    "position_kinds_explorer": "position_kinds",
    "rope_explorer": "rope",
    "cross_attention_explorer": "cross_attention",
    "masked_row_explorer": "masked_rows",
    "leak_explorer": "leaks",
    "patches_explorer": "patches",
    "vit_attention_explorer": "vit_attention",
    "confusion_explorer": "confusion",
    "online_softmax_explorer": "scale",
    "attention_cost_explorer": "scale",
    "receptive_field_explorer": "scale",
    "layer_norm_explorer": "layer_norm",
    "residual_explorer": "residual",
    "mlm_explorer": "bert",
    "minilm_attention_explorer": "minilm",
    "similarity_explorer": "minilm",
    "generation_explorer": "generation",
    "gpt_attention_explorer": "gpt_attention",
}

__all__ = [*_EXPLORERS, "GradingPlaceholder"]


def __getattr__(name: str) -> Any:
    if name in _EXPLORERS:
        module = importlib.import_module(f"{__name__}.{_EXPLORERS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
