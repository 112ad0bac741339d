"""Latency of the explorers: time from setting a control's value to the new PNG being ready.

Setting ``control.value`` in the kernel runs the explorer's update synchronously (read the
controls, compute, update the artists, draw, encode the PNG the browser shows), so the time of
the assignment is the kernel's share of a slider step. The browser's share (sending ~20-60 kB
over the websocket and decoding the PNG) comes on top and is not measured here.

Usage:  python benchmarks/bench_widgets.py [--changes 20] [--quick]
Prints one markdown row per (explorer, control): median and 90th percentile wall time, median
CPU time of this process (less sensitive to other load on the machine), and how many of the
changes needed a full redraw instead of a blit. The target is a median under 100 ms.
"""

from __future__ import annotations

import os
import statistics
import time

# _common also puts the repository on sys.path, so the scripts run without installing.
from _common import base_parser, finish, setup, verdict

os.environ.pop("NBGRADER_EXECUTION", None)
os.environ.pop("TLAB_GRADING", None)

from transformer_lab import widgets  # noqa: E402

TARGET_MS = 100.0  # median wall time of one slider step

# explorer -> (control, values to cycle through); consecutive values always differ.
CASES = [
    ("softmax_explorer", "temperature", [0.1, 0.3, 1.0, 3.0, 10.0]),
    ("softmax_explorer", "shift", [-4.0, -1.0, 0.0, 2.0, 5.0]),
    ("scaling_explorer", "d_k", [1, 4, 16, 64, 256, 512]),
    ("attention_explorer", "query", [0, 1, 2, 3, 4, 5]),
    ("attention_explorer", "scale", [1 / 16, 0.125, 0.25, 0.5, 1.0]),
    ("heads_explorer", "head", [0, 1, 2, 3]),
    ("heads_explorer", "n_heads", [1, 2, 4, 8, 16]),
    ("positional_explorer", "position", [0, 5, 10, 20, 40, 63]),
    ("positional_explorer", "d_model", [8, 16, 32, 64, 128]),
    ("positional_explorer", "base", [10.0, 100.0, 1000.0, 10000.0]),
    ("mask_explorer", "length_1", [0, 2, 4, 6, 8]),
    ("mask_explorer", "causal", [False, True]),
    ("sampling_explorer", "temperature", [0.1, 0.3, 1.0, 3.0]),
    ("sampling_explorer", "top_p", [0.3, 0.5, 0.8, 1.0]),
]


def measure(name: str, control: str, values: list, changes: int) -> dict:
    explorer = getattr(widgets, name)()
    slider = explorer.controls[control]
    slider.value = values[1] if slider.value == values[0] else values[0]  # warm-up step, not timed
    walls, cpus = [], []
    full_before = explorer.view.full_draws
    for i in range(changes):
        value = values[i % len(values)]
        if value == slider.value:
            value = values[(i + 1) % len(values)]
        t0, c0 = time.perf_counter(), time.process_time()
        slider.value = value
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    walls.sort()
    return {
        "explorer": name,
        "control": control,
        "median_ms": 1000 * statistics.median(walls),
        "p90_ms": 1000 * walls[int(0.9 * (len(walls) - 1))],
        "cpu_ms": 1000 * statistics.median(cpus),
        "full": explorer.view.full_draws - full_before,
        "png_kb": len(explorer.image.value) / 1024,
        "changes": changes,
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20, help="slider changes per control")
    args = parser.parse_args()
    if args.quick:
        args.changes = 2
    setup(args)
    print("| explorer | control | median ms | p90 ms | median CPU ms | full redraws | PNG kB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name, control, values in CASES:
        r = measure(name, control, values, args.changes)
        worst = max(worst, r["median_ms"])
        print(
            f"| {r['explorer']} | {r['control']} | {r['median_ms']:.0f} | {r['p90_ms']:.0f} | "
            f"{r['cpu_ms']:.0f} | {r['full']}/{r['changes']} | {r['png_kb']:.0f} |",
            flush=True,
        )
    print()
    finish(
        [
            verdict(
                "worst median slider step < 100 ms",
                worst < TARGET_MS,
                f"{worst:.0f} ms",
                args.quick,
            )
        ]
    )


if __name__ == "__main__":
    main()
