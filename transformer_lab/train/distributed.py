"""Data-parallel training across processes started by ``torchrun``.

When a script is launched with ``torchrun --nproc_per_node=N script.py`` (or ``--nnodes`` for
several machines), PyTorch sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and the rendezvous
address. :func:`~transformer_lab.train.train` then, without any change to the script:

- joins the process group (NCCL when CUDA is available, gloo on CPUs) and puts each process on
  its own GPU (``cuda:LOCAL_RANK``) when there are GPUs;
- wraps the model in ``DistributedDataParallel``, which averages the gradients over the
  processes (an all-reduce during the backward pass), so every copy takes the same step;
- gives each process its shard of the batches: at every step all processes draw N batches from
  the same stream and process r keeps batch r, so N processes training on batches of b equal one
  process training on the N batches concatenated (a batch of N b), step for step;
- averages the logged loss over the processes, and evaluates, checkpoints and shows the progress
  bar on process 0 only.

The batch stream must produce the same batches on every process (seed its generator the same
way everywhere, as the course's ``get_batch(..., generator=...)`` calls do).
"""

from __future__ import annotations

import atexit
import gc
import os
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from transformer_lab.train.batches import BatchStream

__all__ = ["Distributed", "join_process_group", "is_main_process"]


@dataclass(frozen=True)
class Distributed:
    """This process's place in a data-parallel run."""

    rank: int  # 0 .. world_size - 1; process 0 evaluates, checkpoints and shows the bar
    world_size: int  # number of processes N
    local_rank: int  # index on this machine (which GPU)
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: nn.Module) -> nn.Module:
        """``DistributedDataParallel(model)``; process 0's weights are broadcast to the others."""
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        """The mean of ``value`` over the processes (every process gets it)."""
        import torch.distributed as dist

        total = value.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total / self.world_size


class ShardedStream:
    """Each process's share of a batch stream: N batches drawn per step, batch ``rank`` kept."""

    def __init__(self, stream: BatchStream, rank: int, world_size: int) -> None:
        self.stream, self.rank, self.world_size = stream, rank, world_size

    def next(self) -> Any:
        mine = None
        for r in range(self.world_size):  # every process reads the whole step, keeps its own
            batch = self.stream.next()
            if r == self.rank:
                mine = batch
        return mine


def is_main_process() -> bool:
    """False on every process but process 0 of a ``torchrun`` launch (True when not distributed)."""
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0


def join_process_group() -> Distributed | None:
    """Join the run ``torchrun`` started (once per process); ``None`` when there is none.

    Returns:
        this process's :class:`Distributed`, or ``None`` for an ordinary single-process run
        (``WORLD_SIZE`` unset or 1).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if not dist.is_initialized():
        if cuda:
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl" if cuda else "gloo")
        atexit.register(_leave_process_group)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    return Distributed(dist.get_rank(), dist.get_world_size(), local_rank, device)


def _leave_process_group() -> None:
    """Destroy the process group while Python is still fully alive (registered with ``atexit``).

    Left to interpreter shutdown, a run can abort at exit (about 1 in 20 runs on a 2-core CPU):
    a gloo worker thread releases the tensor of the last all-reduce after Python has finalised,
    tries to take the GIL and kills the process ("terminate called without an active
    exception", SIGABRT). Here the group is destroyed, reference cycles are collected, and the GIL
    is released for a moment so the workers finish releasing their last tensors.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    gc.collect()
    time.sleep(0.05)  # releases the GIL: a worker waiting for it to drop a tensor finishes now
