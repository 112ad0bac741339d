"""What happened during training: losses, learning rates and evaluations, ready to plot."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["History"]


@dataclass
class History:
    """What happened during :func:`train`, for plots and reports.

    Attributes:
        step: optimizer steps completed at each train-loss record.
        train_loss: mean training loss since the previous record.
        lr: learning rate used at that step.
        eval_step: steps completed at each evaluation (0 = before training).
        eval: each evaluation metric's values, e.g. ``{"loss": [...], "accuracy": [...]}``.
        elapsed: wall-clock seconds of the training loop (evaluations included).
        steps: steps actually taken; ``capped`` is True when grading mode reduced them.
        threads: torch's intra-op thread count during the run (times compare only at equal counts).
    """

    step: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    eval: dict[str, list[float]] = field(default_factory=dict)
    elapsed: float = 0.0
    steps: int = 0
    capped: bool = False
    threads: int = 0

    @property
    def eval_loss(self) -> list[float]:
        """Evaluation losses (empty if the evaluation reported no ``"loss"``)."""
        return self.eval.get("loss", [])

    @property
    def final_train_loss(self) -> float:
        return self.train_loss[-1] if self.train_loss else math.nan

    @property
    def final_eval_loss(self) -> float:
        return self.eval_loss[-1] if self.eval_loss else math.nan

    def plot(self, ax=None, show_lr: bool = False, title: str | None = None):
        """Plot train (and eval) loss against steps; optionally the learning rate on a twin axis.

        Returns:
            the matplotlib Axes.
        """
        import matplotlib.pyplot as plt  # imported lazily: only plotting needs it

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(self.step, self.train_loss, label="train loss", lw=1.2)
        for name, values in self.eval.items():
            ax.plot(self.eval_step, values, "o-", ms=3, label=f"eval {name}")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        if title:
            ax.set_title(title)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if show_lr and self.lr:
            ax2 = ax.twinx()
            (line,) = ax2.plot(
                self.step, self.lr, color="grey", ls="--", lw=1, label="learning rate"
            )
            ax2.set_ylabel("learning rate")
            handles, labels = handles + [line], labels + ["learning rate"]
        ax.legend(handles, labels, loc="upper right")
        return ax

    def __repr__(self) -> str:
        parts = [f"steps={self.steps}", f"train_loss={self.final_train_loss:.4f}"]
        parts += [f"eval_{k}={v[-1]:.4f}" for k, v in self.eval.items() if v]
        parts.append(f"elapsed={self.elapsed:.1f}s")
        if self.capped:
            parts.append("capped by grading mode")
        return f"History({', '.join(parts)})"
