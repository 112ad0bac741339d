"""Forward + backward time of our MultiHeadAttention against torch.nn.MultiheadAttention.

Shape: B=8, T=256, C=256, H=8 (self-attention, no mask, float32, CPU). Both modules hold the
same weights; the script checks they agree, then times them interleaved (A, B, A, B, ...) so a
busy machine slows both alike, and prints median times and the ratio ours / torch for the
explicit teaching path and for the fused fast path (``fused=True``).

Target: the fused path at most 1.3x ``torch.nn.MultiheadAttention``. The explicit path, which
writes out the (B, H, T, T) weights as the notebooks do, is reported beside it.

    python benchmarks/bench_attention.py [--repeats 30] [--quick]
"""

from __future__ import annotations

import statistics
import time

import torch

# _common also puts the repository on sys.path, so the scripts run without installing.
from _common import base_parser, finish, setup, verdict

from transformer_lab import MultiHeadAttention

TARGET_RATIO = 1.3  # fused path / torch.nn.MultiheadAttention


def time_fwd_bwd(module, x, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = module(x)[0]
        out.sum().backward()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    if args.quick:
        args.repeats = 2
    setup(args)
    torch.manual_seed(args.seed)
    B, T, C, H = 8, 256, 256, 8
    theirs = torch.nn.MultiheadAttention(C, H, batch_first=True)
    explicit = MultiHeadAttention(C, H)
    fused = MultiHeadAttention(C, H, fused=True)
    with torch.no_grad():
        for ours in (explicit, fused):
            w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)
            b_q, b_k, b_v = theirs.in_proj_bias.chunk(3)
            for proj, w, b in (
                (ours.q_proj, w_q, b_q),
                (ours.k_proj, w_k, b_k),
                (ours.v_proj, w_v, b_v),
            ):
                proj.weight.copy_(w)
                proj.bias.copy_(b)
            ours.out_proj.load_state_dict(theirs.out_proj.state_dict())
    x = torch.randn(B, T, C, requires_grad=True)
    reference = theirs(x, x, x, need_weights=False)[0]
    for ours in (explicit, fused):
        diff = (ours(x)[0] - reference).abs().max().item()
        assert diff < 1e-5, f"outputs differ by {diff}"

    torch_call = lambda inp: theirs(inp, inp, inp, need_weights=False)  # noqa: E731
    for fn in (torch_call, explicit, fused):  # warm-up
        time_fwd_bwd(fn, x, 3)
    results = {"torch.nn.MultiheadAttention": [], "ours, explicit": [], "ours, fused": []}
    for _ in range(args.repeats):
        for name, fn in zip(results, (torch_call, explicit, fused)):
            results[name] += time_fwd_bwd(fn, x, 1)
    medians = {name: statistics.median(t) * 1e3 for name, t in results.items()}
    base = medians["torch.nn.MultiheadAttention"]
    print(
        f"forward+backward, B={B} T={T} C={C} H={H}, {torch.get_num_threads()} threads, "
        f"median of {args.repeats}"
    )
    for name, ms in medians.items():
        print(f"  {name:30s} {ms:8.2f} ms   ratio to torch {ms / base:5.2f}")
    ratio = medians["ours, fused"] / base
    finish(
        [
            verdict(
                f"fused path <= {TARGET_RATIO}x torch",
                ratio <= TARGET_RATIO,
                f"{ratio:.2f}x",
                args.quick,
            )
        ]
    )


if __name__ == "__main__":
    main()
