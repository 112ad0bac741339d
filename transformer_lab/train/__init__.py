"""One small training loop for every model in the course.

``train(model, batches, loss_fn)`` runs AdamW with linear warm-up then cosine decay, gradient
clipping, periodic evaluation and a progress bar, and returns a :class:`History` you can plot.
It knows nothing about the model: ``loss_fn(model, batch) -> loss`` says how to get a scalar
loss from one batch (the default handles ``(inputs, targets)`` batches of any classifier or
language model). Its settings are a :class:`TrainConfig`, or the same names as keywords.

    loop         train(): the recipe
    config       TrainConfig: steps, learning rate, schedule, clipping, evaluation and logging
    schedule     lr_at (warm-up + cosine/linear/constant), make_optimizer (AdamW)
    losses       cross_entropy_loss, model_loss
    batches      BatchStream: batches from a function or an iterable; to_device
    evaluation   estimate_loss, accuracy
    history      History and its plot
    checkpoints  save_checkpoint, load_checkpoint
    runtime      seed_everything, pick_device

Under the autograder (``NBGRADER_EXECUTION`` set, or ``TLAB_GRADING=1``) ``train`` runs at most
``GRADING_MAX_STEPS`` steps and ``GRADING_MAX_EVAL_ITERS`` evaluation batches, without a bar
(see :mod:`transformer_lab._mode`), so a notebook's training cell finishes in seconds.

References: AdamW (Loshchilov and Hutter, 2019, "Decoupled Weight Decay Regularization");
warm-up and cosine decay as in GPT-2/3 and nanoGPT (no decay on biases and norm gains).
"""

from transformer_lab._mode import GRADING_MAX_EVAL_ITERS, GRADING_MAX_STEPS
from transformer_lab.threads import ensure_threads_configured
from transformer_lab.train.checkpoints import load_checkpoint, save_checkpoint
from transformer_lab.train.config import TrainConfig
from transformer_lab.train.evaluation import accuracy, estimate_loss
from transformer_lab.train.history import History
from transformer_lab.train.loop import train
from transformer_lab.train.losses import cross_entropy_loss, model_loss
from transformer_lab.train.runtime import pick_device, seed_everything
from transformer_lab.train.schedule import lr_at, make_optimizer

ensure_threads_configured()  # the course's thread count (transformer_lab.threads), once

__all__ = [
    "GRADING_MAX_STEPS",
    "GRADING_MAX_EVAL_ITERS",
    "TrainConfig",
    "History",
    "lr_at",
    "make_optimizer",
    "cross_entropy_loss",
    "model_loss",
    "estimate_loss",
    "accuracy",
    "train",
    "seed_everything",
    "pick_device",
    "save_checkpoint",
    "load_checkpoint",
]
