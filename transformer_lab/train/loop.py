"""The training loop: ``train(model, batches, loss_fn)`` runs one recipe for every model.

Each step: set the learning rate from the schedule, read a batch, compute the loss, backpropagate,
clip the gradient norm, take an AdamW step. Every ``log_every`` steps the mean loss is recorded
(the only device sync), every ``eval_every`` steps the model is evaluated; a tqdm bar shows both.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from transformer_lab._mode import grading_caps, grading_mode
from transformer_lab.threads import torch_threads
from transformer_lab.train.batches import Batches, BatchStream, to_device
from transformer_lab.train.checkpoints import load_checkpoint, save_checkpoint
from transformer_lab.train.config import TrainConfig
from transformer_lab.train.distributed import Distributed, ShardedStream, join_process_group
from transformer_lab.train.evaluation import EvalMode, as_metrics, mean_loss
from transformer_lab.train.history import History
from transformer_lab.train.losses import LossFn, cross_entropy_loss
from transformer_lab.train.runtime import model_device, pick_device, seed_everything
from transformer_lab.train.schedule import lr_at, make_optimizer

__all__ = ["train"]

Evaluate = Callable[[nn.Module], Any]


def train(
    model: nn.Module,
    batches: Batches,
    loss_fn: LossFn | None = None,
    *,
    eval_batches: Batches | None = None,
    eval_fn: Evaluate | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    device: torch.device | str | None = None,
    config: TrainConfig | None = None,
    **settings: Any,
) -> History:
    """Train ``model`` and return its :class:`History`.

    Example (a GPT on tiny Shakespeare)::

        data = shakespeare()
        history = train(
            model, lambda: data.get_batch("train", 64, 12),
            eval_batches=lambda: data.get_batch("val", 64, 12), steps=2000, lr=1e-3,
        )
        history.plot()

    Args:
        model: any ``nn.Module``; it is left in eval mode when training ends.
        batches: a function returning one training batch (called every step), or an iterable
            such as a DataLoader (cycled over epochs).
        loss_fn: ``loss_fn(model, batch) -> scalar loss``. Default :func:`cross_entropy_loss`
            (batches ``(x, y)``, model returns logits or an output with ``.logits``);
            :func:`model_loss` uses the model's own ``.loss``.
        eval_batches: held-out batches (function or iterable); evaluation then reports the mean
            ``loss_fn`` over ``eval_iters`` of them.
        eval_fn: ``eval_fn(model) -> loss or {"name": value}``, run in eval mode without
            gradients; overrides ``eval_batches``.
        optimizer: use this optimizer (e.g. to checkpoint it) instead of :func:`make_optimizer`;
            the schedule sets the lr of all its groups.
        device: move the model there first (``"auto"``: :func:`pick_device`); default: leave the
            model where it is (under ``torchrun`` with GPUs: this process's GPU). Batches are
            moved to the model's device.
        config: a :class:`TrainConfig`; keywords (``steps=``, ``lr=``, ...) override its fields.
    Returns:
        the :class:`History`.

    Started by ``torchrun``, the same call trains data-parallel across the processes (see
    :mod:`transformer_lab.train.distributed`). With ``checkpoint=PATH`` the model, optimizer and
    step are saved there (by process 0) at every evaluation point and at the end; with
    ``resume=True`` a run continues from that file's step on the same schedule.
    """
    cfg = _settings(config, settings)
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"train expects an nn.Module as model, but received {type(model).__name__}."
        )
    steps, eval_iters = grading_caps(cfg.steps, cfg.eval_iters)
    if cfg.seed is not None:
        seed_everything(cfg.seed)
    parallel = join_process_group()
    if parallel is not None and device is None and parallel.device.type == "cuda":
        device = parallel.device
    device = _place(model, device)
    loss_fn = cross_entropy_loss if loss_fn is None else loss_fn
    if eval_fn is None and eval_batches is not None:
        eval_stream = BatchStream(eval_batches, "eval_batches")
        eval_fn = lambda m: mean_loss(m, eval_stream, loss_fn, eval_iters, device)  # noqa: E731
    opt = (
        make_optimizer(model, cfg.lr, cfg.weight_decay, cfg.betas)
        if optimizer is None
        else optimizer
    )
    history = History(capped=steps < cfg.steps)
    first = _resume(model, opt, cfg) if cfg.resume else 0
    stream = BatchStream(batches, "batches")
    if parallel is not None:
        stream = ShardedStream(stream, parallel.rank, parallel.world_size)
        eval_fn = eval_fn if parallel.is_main else None  # process 0 evaluates; the others wait
    run = _Run(model, parallel.wrap(model) if parallel else model, opt, cfg, parallel)
    threads = torch.get_num_threads() if cfg.threads is None else cfg.threads
    with torch_threads(threads):  # the stated count for this run, the caller's afterwards
        history.threads = threads
        start = time.perf_counter()
        try:
            _loop(run, stream, loss_fn, eval_fn, steps, history, first)
        finally:
            history.elapsed = time.perf_counter() - start
            model.eval()
    return history


@dataclasses.dataclass
class _Run:
    """What the loop works with: the model, what computes the loss (the model, or its
    DistributedDataParallel wrapper under torchrun), the optimizer and the settings."""

    model: nn.Module
    net: nn.Module
    opt: torch.optim.Optimizer
    cfg: TrainConfig
    parallel: Distributed | None

    @property
    def is_main(self) -> bool:
        return self.parallel is None or self.parallel.is_main


def _loop(run: _Run, stream, loss_fn, eval_fn, steps: int, history: History, first: int) -> None:
    """Steps ``first`` .. ``steps - 1``, recording into ``history``."""
    model, cfg = run.model, run.cfg
    warmup = min(100, steps // 10) if cfg.warmup_steps is None else min(cfg.warmup_steps, steps)
    log_every = max(1, steps // 200) if cfg.log_every is None else cfg.log_every
    # From the requested length, so a capped run (grading mode) evaluates only at its ends.
    eval_every = max(1, cfg.steps // 10) if cfg.eval_every is None else cfg.eval_every
    params = [p for group in run.opt.param_groups for p in group["params"]]
    device = model_device(model)
    desc = f"{cfg.desc} ({history.threads} thread{'s' * (history.threads != 1)})"
    bar = _Bar(steps, desc, enabled=cfg.progress and not grading_mode() and run.is_main)
    running, count = torch.zeros((), device=device), 0
    model.train()
    with bar:
        bar.tqdm.update(first)
        if eval_fn is not None and first == 0:
            bar.show(_evaluate(model, eval_fn, history, done=0))
        for step in range(first, steps):
            lr = lr_at(step, cfg.lr, steps, warmup, cfg.min_lr, cfg.schedule)
            batch = to_device(stream.next(), device)
            running += _step(run.net, run.opt, params, loss_fn, batch, lr, cfg)
            count, done = count + 1, step + 1
            if done % log_every == 0 or done == steps:
                mean = running if run.parallel is None else run.parallel.mean(running)
                bar.show({"loss": _record_loss(history, mean, count, done, lr, cfg.lr)}, done)
                running.zero_()
                count = 0
            boundary = done % eval_every == 0 or done == steps
            if eval_fn is not None and boundary:
                bar.show(_evaluate(model, eval_fn, history, done))
            if cfg.checkpoint is not None and boundary and run.is_main:
                save_checkpoint(cfg.checkpoint, model, run.opt, step=done)
            history.steps = done


def _resume(model: nn.Module, opt: torch.optim.Optimizer, cfg: TrainConfig) -> int:
    """Load ``cfg.checkpoint`` (model and optimizer) if it exists; return the step to go on from."""
    if cfg.checkpoint is None:
        raise ValueError("resume=True needs checkpoint=PATH, the file to continue from.")
    try:
        ckpt = load_checkpoint(cfg.checkpoint, model, opt)
    except FileNotFoundError:
        return 0  # nothing saved yet: start from the beginning
    return int(ckpt.get("step") or 0)


def _step(model, opt, params, loss_fn, batch, lr: float, cfg: TrainConfig) -> Tensor:
    """One optimizer step at learning rate ``lr``; returns the detached loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    loss = loss_fn(model, batch)
    loss.backward()
    if cfg.grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def _record_loss(history: History, running: Tensor, count: int, done: int, lr, peak_lr) -> float:
    """Append the mean training loss since the last record (this reads the device: one sync)."""
    mean = running.item() / count
    if not math.isfinite(mean):
        raise FloatingPointError(
            f"the training loss became {mean} at step {done}; try a smaller lr "
            f"(received lr={peak_lr}) or check the data for invalid targets."
        )
    history.step.append(done)
    history.train_loss.append(mean)
    history.lr.append(lr)
    return mean


def _evaluate(model: nn.Module, eval_fn: Evaluate, history: History, done: int) -> dict:
    """Run ``eval_fn`` in eval mode without gradients and record its metrics."""
    with EvalMode(model):
        metrics = as_metrics(eval_fn(model))
    history.eval_step.append(done)
    for name, value in metrics.items():
        history.eval.setdefault(name, []).append(value)
    return {f"val_{name}": value for name, value in metrics.items()}


def _settings(config: TrainConfig | None, settings: dict[str, Any]) -> TrainConfig:
    """``config`` (default: ``TrainConfig()``) with the keyword ``settings`` applied."""
    config = TrainConfig() if config is None else config
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, but received {type(config).__name__}.")
    unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(TrainConfig)})
    if unknown:
        raise TypeError(
            f"train got the unknown setting {unknown[0]!r}; the settings are TrainConfig's fields "
            f"({', '.join(f.name for f in dataclasses.fields(TrainConfig))})."
        )
    return dataclasses.replace(config, **settings) if settings else config


def _place(model: nn.Module, device: torch.device | str | None) -> torch.device:
    """Move the model to ``device`` if given (``"auto"`` picks one); return where it is."""
    if device is not None:
        model.to(pick_device() if device == "auto" else torch.device(device))
    return model_device(model)


class _Bar:
    """A tqdm progress bar (or nothing, when disabled) showing the latest loss and metrics."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        from tqdm.auto import tqdm  # a widget in notebooks, text elsewhere

        self.tqdm = tqdm(total=total, desc=desc, disable=not enabled, dynamic_ncols=True)
        self.postfix: dict[str, str] = {}

    def show(self, values: dict[str, float], done: int | None = None) -> None:
        self.postfix.update({k: f"{v:.4f}" for k, v in values.items()})
        if done is not None:
            self.tqdm.update(done - self.tqdm.n)
        self.tqdm.set_postfix(self.postfix, refresh=False)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.tqdm.close()
