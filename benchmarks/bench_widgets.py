"""Latency of the explorers: time from setting a control's value to the new PNG being ready.

Setting ``control.value`` in the kernel runs the explorer's update synchronously (read the
controls, compute, update the artists, draw, encode the PNG the browser shows), so the time of
the assignment is the kernel's share of a slider step. The browser's share (sending ~20-60 kB
over the websocket and decoding the PNG) comes on top and is not measured here.

Usage:  python benchmarks/bench_widgets.py [--changes 20] [--quick]
Every control of every explorer is timed twice: alone, and with a "student" function (the
package's reference under the exercise's signature) that the explorer runs and compares at every
step ("(yours)" rows). Prints one markdown row per (explorer, control): median and 90th
percentile wall time, median
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


import torch  # noqa: E402

from transformer_lab import attention, heads, masks, positional, widgets  # noqa: E402

TARGET_MS = 100.0  # median wall time of one slider step


# "Student" functions for the explorers that run one: the package's references under the
# exercises' signatures, so the timings include calling a function and marking differences.
def _self_attention(x, w_q, w_k, w_v):
    return attention.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)


def _mha(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = (heads.split_heads(t, n_heads) for t in (x_q @ w_q, x_kv @ w_k, x_kv @ w_v))
    out, w = attention.scaled_dot_product_attention(q, k, v, mask)
    return heads.merge_heads(out) @ w_o, w


def _cross_attention(x_q, x_kv, w_q, w_k, w_v, mask=None):
    return attention.scaled_dot_product_attention(x_q @ w_q, x_kv @ w_k, x_kv @ w_v, mask)


def _apply_rope(x, base=10000.0):
    return positional.RotaryEmbedding(x.shape[-1], base)(x)


def _future_leaks(attend, T, C, seed=0):
    x = torch.randn(T, C, generator=torch.Generator().manual_seed(seed))
    base = attend(x)
    for j in range(1, T):
        moved = x.clone()
        moved[j] += 1.0
        if not torch.equal(attend(moved)[:j], base[:j]):
            return True
    return False


STUDENT = {
    "softmax_explorer": {"softmax": attention.softmax},
    "scaling_explorer": {"scaled_dot_product_attention": attention.scaled_dot_product_attention},
    "attention_explorer": {"scaled_dot_product_attention": attention.scaled_dot_product_attention},
    "heads_explorer": {"multi_head_attention": _mha},
    "positional_explorer": {"sinusoidal_encoding": positional.sinusoidal_encoding},
    "mask_explorer": {
        "causal_mask": masks.causal_mask,
        "padding_mask": masks.padding_mask_from_lengths,
    },
    "equivariance_explorer": {"self_attention": _self_attention},
    "cost_explorer": {"self_attention_macs": lambda T, C, D: 3 * T * C * D + 2 * T * T * D},
    "head_layout_explorer": {"split_heads": heads.split_heads, "merge_heads": heads.merge_heads},
    "position_kinds_explorer": {"sinusoidal_encoding": positional.sinusoidal_encoding},
    "rope_explorer": {"apply_rope": _apply_rope},
    "cross_attention_explorer": {"cross_attention": _cross_attention},
    "masked_row_explorer": {"softmax": attention.softmax},
    "leak_explorer": {"future_leaks": _future_leaks},
}

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
    ("equivariance_explorer", "shuffle", [0, 1, 2, 3, 4, 5]),
    ("equivariance_explorer", "positions", [False, True]),
    ("cost_explorer", "T", [8, 16, 32, 64, 128, 256, 512]),
    ("cost_explorer", "C", [16, 32, 64, 128, 256]),
    ("head_layout_explorer", "n_heads", [1, 2, 3, 4, 6, 12]),
    ("head_layout_explorer", "head", [0, 1, 2]),
    ("position_kinds_explorer", "strength", [0.0, 0.5, 1.0, 2.0, 3.0]),
    (
        "position_kinds_explorer",
        "kind",
        ["sinusoidal", "learned (trained GPT)", "learned (at init)"],
    ),
    ("position_kinds_explorer", "combine", ["add", "concatenate"]),
    ("rope_explorer", "t", [0, 5, 10, 20, 30, 40]),
    ("rope_explorer", "offset", [-16, -5, 0, 5, 16]),
    ("rope_explorer", "pair", [0, 2, 4, 7]),
    ("cross_attention_explorer", "query", [0, 1, 2, 3]),
    ("cross_attention_explorer", "source_length", [1, 3, 5, 7]),
    ("cross_attention_explorer", "sharpness", [0.25, 1.0, 4.0]),
    ("masked_row_explorer", "softmax", ["naive", "safe"]),
    ("masked_row_explorer", "padding", [0, 1, 2, 3]),
    ("masked_row_explorer", "layer", [1, 2, 3, 4, 5, 6]),
    ("leak_explorer", "layer", ["causal mask (correct)", "no mask", "mask after the softmax"]),
    ("leak_explorer", "token", [0, 2, 4, 6, 7]),
    ("leak_explorer", "size", [0.001, 0.01, 0.1, 1.0, 10.0]),
]


def measure(name: str, control: str, values: list, changes: int, yours: bool = False) -> dict:
    explorer = getattr(widgets, name)(**(STUDENT[name] if yours else {}))
    if yours and control == "softmax":
        values = [*values, "yours"]
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
        "explorer": name + (" (yours)" if yours else ""),
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
    chosen = CASES
    if args.quick:  # every explorer once, on its first control
        chosen = [case for i, case in enumerate(CASES) if case[0] not in {c[0] for c in CASES[:i]}]
    cases = [(*case, False) for case in chosen]
    cases += [(*case, True) for case in chosen if case[0] in STUDENT]  # with a student function
    for name, control, values, yours in cases:
        r = measure(name, control, values, args.changes, yours)
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
