"""The settings of one training run, validated when they are made."""

from __future__ import annotations

from dataclasses import dataclass

from transformer_lab.train.schedule import SCHEDULES

__all__ = ["TrainConfig"]


@dataclass(frozen=True)
class TrainConfig:
    """How :func:`~transformer_lab.train.train` trains (every field can also be passed to
    ``train`` as a keyword: ``train(model, batches, steps=500, lr=3e-4)``).

    The defaults are nanoGPT's small-model recipe: AdamW (lr 1e-3, betas (0.9, 0.99), weight
    decay 0.1 on matrices), linear warm-up then cosine decay to lr / 10, gradient clipping at 1.
    """

    steps: int = 1000  # optimizer steps (at most GRADING_MAX_STEPS in grading mode)
    lr: float = 1e-3  # peak learning rate
    weight_decay: float = 0.1  # AdamW decay for matrices (biases and norm gains get none)
    betas: tuple[float, float] = (0.9, 0.99)  # AdamW's moment coefficients
    warmup_steps: int | None = None  # linear warm-up; None: min(100, steps // 10)
    min_lr: float | None = None  # learning rate at the end of the decay; None: lr / 10
    schedule: str = "cosine"  # after the warm-up: "cosine", "linear" or "constant" (see lr_at)
    grad_clip: float | None = 1.0  # clip the global gradient norm (None: no clipping)
    eval_every: int | None = None  # steps between evaluations; None: a tenth of ``steps``
    eval_iters: int | None = 20  # batches per evaluation (None: one pass of an iterable)
    log_every: int | None = None  # steps between loss records (each one syncs); None: steps // 200
    seed: int | None = None  # if given, seed_everything(seed) first (batch order, dropout)
    progress: bool = True  # a tqdm bar with the loss
    desc: str = "training"  # the bar's label
    checkpoint: str | None = None  # save model, optimizer and step here at each evaluation point
    resume: bool = False  # continue from ``checkpoint``'s step (same schedule) if the file exists
    threads: int | None = None  # torch intra-op threads for this run (restored after); None: as set

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive integer, but received {self.steps!r}.")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, but received {self.lr}.")
        if self.grad_clip is not None and not self.grad_clip > 0:
            raise ValueError(f"grad_clip must be positive or None, but received {self.grad_clip}.")
        for name, least in (("eval_every", 1), ("log_every", 1), ("warmup_steps", 0)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < least):
                raise ValueError(
                    f"{name} must be an integer >= {least} or None, but received {value!r}."
                )
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise ValueError(
                f"threads must be a positive integer or None, but received {self.threads!r}."
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"schedule must be one of {SCHEDULES}, but received {self.schedule!r}."
            )
