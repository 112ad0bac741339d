"""How fast the data pipeline is: tokenizing all of tiny Shakespeare, and drawing GPT batches.

The tokenizer target (the whole 1.1M-character text in under a second) used to be asserted in
the test suite, where a busy machine made it flake; it is a speed figure, so it lives here. The
median of ``--repeats`` runs is reported.

    python benchmarks/bench_data.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import statistics
import time

import torch
from _common import base_parser, finish, setup, verdict

from transformer_lab.data import CharTokenizer, get_batch, load_shakespeare

TARGET_TOKENIZE_S = 1.0  # encode_tensor on the whole text
TARGET_BATCH_MS = 1.0  # one 12 x 64 batch from the training stream


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    setup(args)
    text = load_shakespeare()
    tok = CharTokenizer(text)
    tokenize_s = median_seconds(lambda: tok.encode_tensor(text), args.repeats)
    ids = tok.encode_tensor(text)
    gen = torch.Generator().manual_seed(args.seed)
    batch_s = median_seconds(lambda: get_batch(ids, 64, 12, generator=gen), 20 * args.repeats)
    print(f"tokenize {len(text):,} characters: {tokenize_s:.3f} s (median of {args.repeats})")
    print(f"one 12 x 64 batch: {1e3 * batch_s:.3f} ms")
    finish(
        [
            verdict(
                f"tokenizing the whole text <= {TARGET_TOKENIZE_S:.1f} s",
                tokenize_s <= TARGET_TOKENIZE_S,
                f"{tokenize_s:.3f} s",
                args.quick,
            ),
            verdict(
                f"one batch <= {TARGET_BATCH_MS:.1f} ms",
                1e3 * batch_s <= TARGET_BATCH_MS,
                f"{1e3 * batch_s:.3f} ms",
                args.quick,
            ),
        ]
    )


if __name__ == "__main__":
    main()
