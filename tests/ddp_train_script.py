"""Train a small character GPT with the package's train(); run by tests/test_train_distributed.py,
either directly (one process) or under ``torchrun --nproc_per_node=2``.

    python tests/ddp_train_script.py OUT --steps N [--concat K] [--checkpoint PATH --resume]

``--concat K`` makes each batch the concatenation of K consecutive draws (one process doing the
work of K). Process 0 writes the losses, learning rates and final weights to OUT.
"""

from __future__ import annotations

import argparse
import gc
import os

import torch

from transformer_lab.data import shakespeare
from transformer_lab.models import GPT, GPTConfig
from transformer_lab.train import train
from transformer_lab.train.distributed import is_main_process


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--concat", type=int, default=1)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument(
        "--interrupt-at", type=int, default=None, help="fail while reading this step"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = shakespeare()
    torch.manual_seed(0)
    # No biases: a key's bias gets a gradient of exactly zero (softmax ignores a constant per
    # query), i.e. pure rounding noise, which Adam would blow up differently on each path.
    model = GPT(
        GPTConfig.tiny(n_layers=2, d_model=32, n_heads=2, max_len=16, dropout=0.0, bias=False)
    )
    gen = torch.Generator().manual_seed(1)

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.resume and args.checkpoint and os.path.exists(args.checkpoint):
        done = torch.load(args.checkpoint, weights_only=True)["step"]
        for _ in range(done * world * args.concat):  # the batches the first run already used
            data.get_batch("train", 16, 4, generator=gen)
    reads = [0]

    def batches():
        if args.interrupt_at is not None and reads[0] == args.interrupt_at * world:
            raise KeyboardInterrupt("stopped on purpose")
        reads[0] += 1
        parts = [data.get_batch("train", 16, 4, generator=gen) for _ in range(args.concat)]
        return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])

    try:
        history = train(
            model,
            batches,
            steps=args.steps,
            lr=3e-3,
            warmup_steps=2,
            log_every=1,
            eval_every=2,
            progress=False,
            checkpoint=args.checkpoint,
            resume=args.resume,
        )
    except KeyboardInterrupt:
        return  # the checkpoint of the last evaluation point is on disk
    if is_main_process():
        torch.save(
            {"loss": history.train_loss, "lr": history.lr, "step": history.step,
             "state": model.state_dict()},
            args.out,
        )  # fmt: skip


if __name__ == "__main__":
    main()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    gc.freeze()  # no collector's walk over torch's heap at exit: ~0.4 s of CPU per process
