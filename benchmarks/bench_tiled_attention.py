"""Tiled attention (online softmax) against the naive formula and PyTorch's fused kernel.

For one head of width D at sequence lengths T, each path runs in a fresh subprocess so that its
peak resident memory can be read (``ru_maxrss``) above a baseline taken after the inputs exist:

    naive   softmax(q k^T / sqrt(D)) v, forming the (T, T) scores   (transformer_lab.attention)
    tiled   key blocks with a running max, sum and output          (transformer_lab.tiled)
    fused   torch.nn.functional.scaled_dot_product_attention       (PyTorch's CPU kernel)

Targets: tiled equals naive to 1e-5 at every T; at T = 8192 the tiled path's extra peak memory
is under a tenth of the naive path's. Times are printed as ratios to the fused kernel.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

from _common import REPO, base_parser, setup, timer, verdict


def measure(path: str, T: int, D: int, block: int, seed: int) -> dict:
    """Run in this process (a fresh subprocess): time and extra peak memory of one attention call."""
    import torch
    import torch.nn.functional as F

    from transformer_lab.attention import scaled_dot_product_attention
    from transformer_lab.tiled import tiled_attention

    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(T, D, generator=g) for _ in range(3))
    fns = {
        "naive": lambda: scaled_dot_product_attention(q, k, v)[0],
        "tiled": lambda: tiled_attention(q, k, v, block_size=block),
        "fused": lambda: F.scaled_dot_product_attention(
            q[None, None], k[None, None], v[None, None]
        )[0, 0],
    }
    with torch.no_grad():  # warm up on small inputs: code pages and thread pools count in RSS too
        small = (q[:64], k[:64], v[:64])
        scaled_dot_product_attention(*small), tiled_attention(*small, block_size=16)
        F.scaled_dot_product_attention(*(x[None, None] for x in small))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    with torch.no_grad(), timer() as seconds:
        out = fns[path]()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    reference = torch.softmax(q[:512] @ k.T / D**0.5, -1) @ v  # first 512 queries, for equality
    error = float((out[:512] - reference).abs().max())
    return {"seconds": seconds(), "extra_mib": (peak - base) / 1024, "error": error}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192])
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--measure", nargs=2, metavar=("PATH", "T"), help=argparse_hidden)
    args = parser.parse_args()
    if args.measure:
        path, T = args.measure[0], int(args.measure[1])
        print(json.dumps(measure(path, T, args.d_head, args.block_size, args.seed)))
        return
    if args.quick:  # one length: three processes prove the script works
        args.lengths = [256]
    setup(args)
    print(
        f"one head, D = {args.d_head}, key blocks of {args.block_size}; extra peak memory above the inputs"
    )
    print(
        f"{'T':>6} {'path':>6} {'time (s)':>9} {'x fused':>8} {'extra MiB':>10} {'max |err|':>10}"
    )
    rows = {}
    for T in args.lengths:
        for path in ("fused", "naive", "tiled"):
            cmd = [sys.executable, __file__, "--measure", path, str(T), "--d-head", str(args.d_head),
                   "--block-size", str(args.block_size), "--seed", str(args.seed)]  # fmt: skip
            if args.threads is not None:
                cmd += ["--threads", str(args.threads)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
            rows[T, path] = row = json.loads(done.stdout.strip().splitlines()[-1])
            ratio = row["seconds"] / rows[T, "fused"]["seconds"]
            print(
                f"{T:>6} {path:>6} {row['seconds']:>9.4f} {ratio:>8.2f} {row['extra_mib']:>10.1f} {row['error']:>10.2e}"
            )
    ok = True
    exact = max(rows[T, "tiled"]["error"] for T in args.lengths)
    ok &= verdict(
        "tiled equals the softmax formula",
        exact <= 1e-5,
        f"max |error| {exact:.1e} (<= 1e-5)",
        args.quick,
    )
    T = max(args.lengths)
    naive, tiled = rows[T, "naive"]["extra_mib"], rows[T, "tiled"]["extra_mib"]
    share = tiled / max(naive, 1e-9)
    ok &= verdict(
        f"tiled memory at T = {T}", share < 0.1,
        f"{tiled:.1f} MiB vs naive {naive:.1f} MiB = {share:.1%} (target < 10%)", args.quick,
    )  # fmt: skip
    sys.exit(0 if ok or args.quick else 1)


argparse_hidden = "internal: measure one path in this process"

if __name__ == "__main__":
    main()
