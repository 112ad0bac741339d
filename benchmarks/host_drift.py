"""Does this machine keep its speed? Time the tiny GPT's training step in windows over minutes.

The GPT benchmark's training (its network, batch 12 x 64, the package's ``train()``: forward,
backward, clipping, AdamW) runs ``--steps`` steps in windows of ``--every``, and the mean time per
step of each window is printed.
A steady machine prints a flat column; a host that boosts and then throttles prints a step
down. Run it on its own, after a pause, before quoting absolute times from the other scripts.
Not a ``bench_*`` script, so ``make benchmarks`` does not run it (it takes about 3.5 minutes).

    python benchmarks/host_drift.py [--steps 5000] [--every 250]
"""

from __future__ import annotations

import statistics

import torch
from _common import base_parser, setup
from bench_gpt_shakespeare import recipe_config

from transformer_lab.data import shakespeare
from transformer_lab.models import GPT
from transformer_lab.train import make_optimizer, model_loss, train


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
    model = GPT(recipe_config(data.vocab_size, T))
    opt = make_optimizer(
        model, lr=1e-3, weight_decay=0.1, betas=(0.9, 0.99)
    )  # one optimizer across windows
    gen = torch.Generator().manual_seed(args.seed)

    windows: list[float] = []  # ms per step, one entry per window
    clock = 0.0
    for first in range(1, args.steps - args.every + 2, args.every):
        history = train(
            model,
            lambda: data.get_batch("train", T, B, generator=gen),
            loss_fn=model_loss,
            steps=args.every,
            optimizer=opt,
            lr=1e-3,
            progress=False,
        )
        clock += history.elapsed
        windows.append(1e3 * history.elapsed / args.every)
        print(
            f"{clock:7.1f} s   steps {first:>5}-{first + args.every - 1:<5}  {windows[-1]:5.1f} ms/step",
            flush=True,
        )
    if windows:
        print(
            f"fastest window {min(windows):.1f} ms/step, slowest {max(windows):.1f} "
            f"(ratio {max(windows) / min(windows):.2f}), median {statistics.median(windows):.1f}"
        )


if __name__ == "__main__":
    main()
