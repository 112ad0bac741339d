"""Generation with and without the key/value cache: same tokens, how much faster.

A tiny GPT (``GPTConfig.tiny(max_len=512)``: 4 layers, width 128) extends a 256-token
prompt by 256 tokens, so the context grows to fill the position table and never slides.
Without the cache every step recomputes the whole context (cost per token grows with T); with
it each step runs one token through the layers and attends to the cached keys and values. The
two runs must give identical tokens, greedy and sampled (same seeded generator); the script
asserts it. At this size a cached step is mostly fixed per-call overhead (~3 ms), so the
speed-up grows with the context: with a 64-token prompt (max_len 320) it measured 3.0x
greedy and 2.6x sampled on the loaded machine; with the 256-token prompt see the README.

The weights are random (nothing to download), with the token embedding widened to std 1 so the
next-token distribution is peaked and greedy choices are not near-ties that rounding could flip.

Target: the cache is at least 3x faster for 256 new tokens.

Against Hugging Face (``--hf-new-tokens``, skipped if ``transformers`` is missing): GPT-2 small
(124M, random weights from ``GPT2Config()``, copied into ours with ``GPT.from_huggingface``), a
128-token prompt, 64 greedy tokens, ``generate`` on both sides, with and without the cache,
interleaved; the tokens must be the same. Target: ours takes <= 0.8x Hugging Face's time with
the cache. The thread count is stated (``--threads``, default every usable CPU) and printed.
On a shared machine wall-clock time says little; ``--cpu-time`` times both sides by the CPU
time of this process (``time.process_time``), best at ``--threads 1``, where it does not
count waiting for a core. ``--hf-only`` skips the tiny model; ``--hf-no-cache-tokens N``
shortens the slow run without the cache (0: skip it).

    python benchmarks/bench_kv_cache.py [--repeats 3] [--threads 2] [--quick]
    python benchmarks/bench_kv_cache.py --hf-only --cpu-time --threads 1 --repeats 5
"""

from __future__ import annotations

import statistics
import time

import torch

# _common also puts the repository on sys.path, so the scripts run without installing.
from _common import base_parser, finish, setup, verdict

from transformer_lab.data import shakespeare
from transformer_lab.models import GPT, GPTConfig

TARGET_SPEEDUP = 3.0
TARGET_HF_RATIO = 0.8  # our cached generation's time over transformers' at GPT-2 small


def _clock(args):
    """The timer both sides are measured with: CPU time of the process, or wall-clock time."""
    return time.process_time if args.cpu_time else time.perf_counter


def against_huggingface(args) -> list[bool]:
    """GPT-2 small, ours vs ``transformers``' ``generate``, greedy, with and without the cache."""
    try:
        import transformers
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        print("SKIP  against Hugging Face: transformers is not installed (pip install -e '.[dev]')")
        return [True]
    torch.manual_seed(args.seed)
    hf = GPT2LMHeadModel(GPT2Config()).eval()
    ours = GPT.from_huggingface(hf)
    prompt = torch.randint(0, hf.config.vocab_size, (1, args.hf_prompt_tokens))  # (1, T0)
    clock, what = _clock(args), "CPU time" if args.cpu_time else "wall-clock"

    def theirs(use_cache: bool) -> torch.Tensor:
        n = args.hf_new_tokens if use_cache else args.hf_no_cache_tokens
        with torch.no_grad():
            return hf.generate(
                prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                use_cache=use_cache, pad_token_id=0,
            )  # fmt: skip

    def mine(use_cache: bool) -> torch.Tensor:
        n = args.hf_new_tokens if use_cache else args.hf_no_cache_tokens
        return ours.generate(prompt, n, temperature=0.0, use_cache=use_cache, progress=False)

    print(
        f"\nGPT-2 small ({ours.num_parameters() / 1e6:.0f}M, random weights) against transformers "
        f"{transformers.__version__}: prompt {args.hf_prompt_tokens} tokens, greedy, "
        f"{torch.get_num_threads()} threads, {what}, median of {args.repeats}"
    )
    results = []
    for use_cache in (True, False) if args.hf_no_cache_tokens > 0 else (True,):
        n = args.hf_new_tokens if use_cache else args.hf_no_cache_tokens
        sides = {"ours": mine, "transformers": theirs}
        for side in sides.values():
            side(use_cache)  # warm-up
        times, outs = {k: [] for k in sides}, {}
        for _ in range(args.repeats):  # interleaved: a busy machine slows both alike
            for name, side in sides.items():
                start = clock()
                outs[name] = side(use_cache)
                times[name].append(clock() - start)
        same = torch.equal(outs["ours"], outs["transformers"])
        t_ours, t_hf = (statistics.median(times[k]) for k in ("ours", "transformers"))
        label = f"{n} tokens " + ("with the cache" if use_cache else "without the cache")
        print(
            f"{label}: ours {t_ours:.2f} s ({1e3 * t_ours / n:.1f} ms/token), transformers "
            f"{t_hf:.2f} s ({1e3 * t_hf / n:.1f} ms/token), ratio {t_ours / t_hf:.2f}x, "
            f"same tokens: {'yes' if same else 'NO'}"
        )
        assert same, f"{label}: our tokens differ from transformers'"
        if use_cache:
            results.append(
                verdict(
                    f"GPT-2 small with the cache <= {TARGET_HF_RATIO}x transformers' time",
                    t_ours / t_hf <= TARGET_HF_RATIO,
                    f"{t_ours / t_hf:.2f}x at {torch.get_num_threads()} threads",
                    args.quick,
                )
            )
    return results


def timed_generate(
    model: GPT, prompt: torch.Tensor, n: int, use_cache: bool, temperature: float, seed: int
):
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    out = model.generate(
        prompt, n, temperature=temperature, use_cache=use_cache, generator=gen, progress=False
    )
    return out, time.perf_counter() - start


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hf-prompt-tokens", type=int, default=128)
    parser.add_argument(
        "--hf-new-tokens", type=int, default=64, help="GPT-2 small against transformers (0: skip)"
    )
    parser.add_argument(
        "--hf-no-cache-tokens", type=int, default=None, help="tokens without the cache (0: skip)"
    )
    parser.add_argument("--hf-only", action="store_true", help="only GPT-2 small against HF")
    parser.add_argument("--cpu-time", action="store_true", help="time by process CPU time")
    args = parser.parse_args()
    if args.quick:
        args.new_tokens, args.repeats, args.hf_new_tokens = 16, 1, 4
    if args.hf_no_cache_tokens is None:
        args.hf_no_cache_tokens = args.hf_new_tokens
    setup(args)
    if args.hf_only:
        finish(against_huggingface(args))
        return

    torch.manual_seed(args.seed)
    block = args.prompt_tokens + args.new_tokens
    config = GPTConfig.tiny(max_len=block)  # exactly filled: the window never slides
    model = GPT(config).eval()
    with torch.no_grad():
        model.tok_emb.weight.normal_(0.0, 1.0)  # peaked logits: see the module docstring
    data = shakespeare()
    prompt = data.val[: args.prompt_tokens].repeat(args.batch_size, 1)  # (B, T0)
    print(
        f"model: {model.num_parameters() / 1e6:.2f}M parameters, max_len {config.max_len}; "
        f"prompt {tuple(prompt.shape)}, {args.new_tokens} new tokens, median of {args.repeats}"
    )

    results = []
    for label, temperature in (("greedy", 0.0), ("sampled, T=1", 1.0)):
        timed_generate(model, prompt, 4, True, temperature, args.seed)  # warm-up
        times = {True: [], False: []}
        outputs = {}
        for _ in range(args.repeats):  # interleaved, so a busy machine slows both alike
            for use_cache in (True, False):
                out, seconds = timed_generate(
                    model, prompt, args.new_tokens, use_cache, temperature, args.seed
                )
                times[use_cache].append(seconds)
                outputs[use_cache] = out
        same = torch.equal(outputs[True], outputs[False])
        assert same, f"{label}: generation with the cache differs from generation without it"
        cached, uncached = statistics.median(times[True]), statistics.median(times[False])
        n = args.new_tokens * args.batch_size
        print(
            f"{label}: with cache {cached:.2f} s ({n / cached:,.0f} tokens/s, "
            f"{1e3 * cached / args.new_tokens:.1f} ms/token), "
            f"without {uncached:.2f} s ({n / uncached:,.0f} tokens/s, "
            f"{1e3 * uncached / args.new_tokens:.1f} ms/token), "
            f"speed-up {uncached / cached:.1f}x, identical tokens: {same}"
        )
        results.append(
            verdict(
                f"{label}: cache >= {TARGET_SPEEDUP:.0f}x faster, same tokens",
                same and uncached / cached >= TARGET_SPEEDUP,
                f"{uncached / cached:.1f}x",
                args.quick,
            )
        )
    if args.hf_new_tokens > 0:
        results += against_huggingface(args)
    finish(results)


if __name__ == "__main__":
    main()
