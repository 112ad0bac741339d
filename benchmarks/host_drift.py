"""Does this machine keep its speed? Time the tiny GPT's training step in windows over minutes.

The same step (nanoGPT's CPU recipe: batch 12 x 64, forward, backward, clipping, AdamW) is
repeated ``--steps`` times and the mean time per step is printed for every ``--every`` steps.
A steady machine prints a flat column; a host that boosts and then throttles prints a step
down. Run it on its own, after a pause, before quoting absolute times from the other scripts.
Not a ``bench_*`` script, so ``make benchmarks`` does not run it (it takes about 3.5 minutes).

    python benchmarks/host_drift.py [--steps 5000] [--every 250]
"""

from __future__ import annotations

from _common import base_parser, setup

import statistics
import time

import torch

from transformer_lab.data import shakespeare
from transformer_lab.models import GPT, GPTConfig
from transformer_lab.train import make_optimizer


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--every", type=int, default=250)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.every = 20, 10
    setup(args)

    torch.manual_seed(args.seed)
    data = shakespeare()
    B, T = 12, 64
    model = GPT(GPTConfig.tiny(block_size=T, dropout=0.0, vocab_size=data.vocab_size, bias=True, tie_weights=False))
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(args.seed)

    windows: list[float] = []  # ms per step, one entry per window
    start = window_start = time.perf_counter()
    for step in range(1, args.steps + 1):
        loss = model(*data.get_batch("train", T, B, generator=gen)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % args.every == 0:
            now = time.perf_counter()
            windows.append(1e3 * (now - window_start) / args.every)
            print(f"{now - start:7.1f} s   steps {step - args.every + 1:>5}-{step:<5}  {windows[-1]:5.1f} ms/step", flush=True)
            window_start = now
    if windows:
        print(f"fastest window {min(windows):.1f} ms/step, slowest {max(windows):.1f} "
              f"(ratio {max(windows) / min(windows):.2f}), median {statistics.median(windows):.1f}")


if __name__ == "__main__":
    main()
