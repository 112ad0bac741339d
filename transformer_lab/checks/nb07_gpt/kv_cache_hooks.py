"""What notebook 07's greedy-decoding check records while the student's decoder runs: forward
hooks on the blocks and the head (how many tokens each call got, what its cache held, what went
in and came out). Under grading they travel with the model to the graded kernel and back.
"""

from __future__ import annotations

import torch
from torch import Tensor

from transformer_lab.heads import KVCache

__all__ = []


class _Recorder:
    """Forward pre-hooks on the blocks: how many tokens each call got and what its cache held.

    Under grading the student's decoder runs in the graded kernel on a pickled copy of the
    model, hooks and recorder included; the attributes in ``_tlab_sync`` come back after the
    call (the model carries its recorder as ``_tlab_recorder``, see checks.engine.serve)."""

    _tlab_sync = ("calls", "inputs", "logits", "io")

    def __init__(self, model) -> None:
        self.calls: list[tuple[int, int, int | None, int]] = []  # (block, T, cache id, cached)
        self.inputs: list[Tensor] = []  # what the first block received, call by call
        self.caches: list[KVCache] = []
        self.logits: list[Tensor] = []  # what lm_head returned, call by call
        self.io: list[tuple[int, Tensor, Tensor]] = []  # (block, input, output), first calls
        self.handles = [
            block.register_forward_pre_hook(_PreHook(self, i), with_kwargs=True)
            for i, block in enumerate(model.blocks)
        ]
        self.handles.append(model.lm_head.register_forward_hook(_HeadHook(self)))
        self.handles += [
            block.register_forward_hook(_IOHook(self, i), with_kwargs=True)
            for i, block in enumerate(model.blocks)
        ]
        self.model = model
        model._tlab_recorder = self

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.model.__dict__.pop("_tlab_recorder", None)


class _PreHook:
    """Before block i: the tokens it gets and the cache it is given."""

    def __init__(self, recorder: _Recorder, i: int) -> None:
        self.recorder, self.i = recorder, i

    def __call__(self, module, args, kwargs):
        rec, i = self.recorder, self.i
        x = args[0] if args else kwargs.get("x")
        cache = kwargs.get("cache", args[5] if len(args) > 5 else None)
        cached = cache.length if isinstance(cache, KVCache) else 0
        if cache is not None:
            rec.caches.append(cache)  # held, so that no later cache can reuse its id
        rec.calls.append((i, x.shape[1], None if cache is None else id(cache), cached))
        if i == 0 and isinstance(x, torch.Tensor) and len(rec.inputs) < 64:
            rec.inputs.append(x.detach().clone())


class _IOHook:
    """After block i: what went in and what came out (first calls only)."""

    def __init__(self, recorder: _Recorder, i: int) -> None:
        self.recorder, self.i = recorder, i

    def __call__(self, module, args, kwargs, output):
        x = args[0] if args else kwargs.get("x")
        y = output[0] if isinstance(output, tuple) else output
        io = self.recorder.io
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and len(io) < 16:
            io.append((self.i, x.detach().clone(), y.detach().clone()))


class _HeadHook:
    """After the head: the logits of each call."""

    def __init__(self, recorder: _Recorder) -> None:
        self.recorder = recorder

    def __call__(self, module, args, output) -> None:
        if isinstance(output, torch.Tensor) and len(self.recorder.logits) < 64:
            self.recorder.logits.append(output.detach().clone())
