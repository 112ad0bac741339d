"""Data-parallel training with torchrun: steps and tokens per second for 1 and 2 processes.

Trains nanoGPT's tiny character model (GPTConfig.tiny) on tiny Shakespeare with the package's
train(), batch 12 x 64 tokens per process, once as one plain process and once under
``torchrun --nproc_per_node=2`` (gloo). Two processes do twice the tokens per step; on a 2-core
machine they also share the two cores, so the speed-up in tokens per second is what the
all-reduce and the core sharing leave of the ideal 2x.

Run the same worker on more GPUs or machines with torchrun directly, e.g.
    torchrun --nproc_per_node=8 benchmarks/bench_ddp.py --worker --steps 2000
    torchrun --nnodes=2 --node_rank=0 --master_addr=HOST --nproc_per_node=8 benchmarks/bench_ddp.py --worker
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from _common import REPO, base_parser, setup, verdict

BLOCK, BATCH = 64, 12


def worker(steps: int, seed: int, threads: int | None) -> None:
    import torch

    from transformer_lab.data import shakespeare
    from transformer_lab.models import GPT, GPTConfig
    from transformer_lab.train import train
    from transformer_lab.train.distributed import is_main_process

    if threads is not None:
        torch.set_num_threads(threads)
    data = shakespeare()
    torch.manual_seed(seed)
    model = GPT(GPTConfig.tiny())
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    history = train(model, lambda: data.get_batch("train", BLOCK, BATCH, generator=gen), steps=steps,
                    lr=1e-3, seed=seed, progress=is_main_process() and sys.stderr.isatty())  # fmt: skip
    seconds = time.perf_counter() - start
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if is_main_process():
        print(json.dumps({"processes": world, "seconds": seconds, "steps": history.steps,
                          "tokens_per_step": world * BATCH * BLOCK, "loss": history.train_loss[-1]}))  # fmt: skip


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--worker", action="store_true", help="train (what torchrun starts)")
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.seed, args.threads)
        return
    if args.quick:
        args.steps = 20
    setup(args)
    common = [__file__, "--worker", "--steps", str(args.steps), "--seed", str(args.seed)]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rows = []
    for label, cmd, threads in [
        ("1 process", [sys.executable], None),
        ("2 processes", torchrun, 1),
    ]:
        extra = [] if threads is None else ["--threads", str(threads)]  # 2 processes share 2 cores
        done = subprocess.run(
            [*cmd, *common, *extra], capture_output=True, text=True, env=env, cwd=REPO
        )
        if done.returncode != 0:
            sys.exit(f"{label} failed:\n{done.stderr[-3000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        rows.append(row)
        steps_s = row["steps"] / row["seconds"]
        print(f"{label:<12} {row['steps']} steps in {row['seconds']:6.1f} s: {steps_s:6.1f} steps/s, "
              f"{steps_s * row['tokens_per_step']:8,.0f} tokens/s, final loss {row['loss']:.3f}")  # fmt: skip
    one, two = ((r["steps"] * r["tokens_per_step"] / r["seconds"]) for r in rows)
    ok = verdict(
        "2 processes train", two > 0, f"{two / one:.2f}x the tokens/s of one process", args.quick
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
