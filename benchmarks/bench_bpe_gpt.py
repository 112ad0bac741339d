"""The same tiny GPT on characters and on BPE tokens (notebook 0's tokenizer), loss per character.

Both models are ``GPTConfig.tiny`` (4 layers, 4 heads, width 128) trained with the package's
``train()`` on the first 90% of tiny Shakespeare, the same number of steps and batch size: one on
characters (65 symbols, context 64), one on byte-level BPE tokens (256 + 512 merges learned on
the same training text with ``transformer_lab.bpe``, context 32 tokens, about as many characters).
A loss per token does not compare across tokenizers, so both are measured as the total
cross-entropy on the held-out 10% divided by the number of characters it covers (nats per
character; tiny Shakespeare is ASCII, so characters = bytes).

Reported, not a target: which tokenizer reaches the lower loss per character after the same
steps, and what a step costs. (The one check: both losses are finite and below the entropy of
the training text's character frequencies, computed here.)

    python benchmarks/bench_bpe_gpt.py [--steps 1000] [--merges 512] [--quick]
"""

from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F
from _common import base_parser, finish, setup, timer, verdict

from transformer_lab import bpe
from transformer_lab.data import get_batch, load_shakespeare, shakespeare
from transformer_lab.models import GPT, GPTConfig
from transformer_lab.train import model_loss, seed_everything, train


def unigram_nats(text: str) -> float:
    """Entropy of the character frequencies of ``text``, in nats per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log(n / len(text)) for n in counts.values())


def nats_per_char(model: GPT, stream: torch.Tensor, T: int, chars_of, windows: int) -> float:
    """Total cross-entropy of non-overlapping windows of ``stream`` per character predicted."""
    total, chars = 0.0, 0
    model.eval()
    with torch.no_grad():
        for start in range(0, min(len(stream) - T - 1, windows * T), T):
            x = stream[start : start + T][None]  # (1, T)
            y = stream[start + 1 : start + T + 1]  # (T,)
            logits = model(x).logits[0]  # (T, V)
            total += F.cross_entropy(logits, y, reduction="sum").item()
            chars += sum(chars_of(int(t)) for t in y)
    return total / chars


def run(name, vocab_size, T, train_stream, val_stream, chars_of, args) -> dict:
    seed_everything(args.seed)
    model = GPT(GPTConfig.tiny(vocab_size=vocab_size, max_len=T))
    gen = torch.Generator().manual_seed(args.seed)
    history = train(
        model,
        lambda: get_batch(train_stream, T, args.batch_size, generator=gen),
        loss_fn=model_loss,
        steps=args.steps,
        lr=1e-3,
        min_lr=1e-4,
        warmup_steps=min(100, args.steps // 10),
        schedule="cosine",
        betas=(0.9, 0.99),
        weight_decay=0.1,
        grad_clip=1.0,
        desc=name,
        progress=False,
    )
    with timer() as eval_time:
        loss = nats_per_char(model, val_stream, T, chars_of, args.eval_windows)
    return {
        "name": name,
        "params": model.num_parameters(),
        "seconds": history.elapsed,
        "loss": loss,
        "eval_seconds": eval_time(),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--merges", type=int, default=512)
    parser.add_argument("--eval-windows", type=int, default=400)
    parser.set_defaults(seed=1337)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.merges, args.eval_windows = 20, 64, 10
    setup(args)

    text = load_shakespeare()
    split = int(0.9 * len(text))  # the same split as data.shakespeare()
    chars = shakespeare()
    with timer() as bpe_time:
        merges = bpe.train_merges(text[:split], args.merges)
        train_ids = torch.tensor(bpe.encode(text[:split], merges))
        val_ids = torch.tensor(bpe.encode(text[split:], merges))
    sizes = [len(b) for b in bpe.token_bytes(merges)]
    print(
        f"BPE: {len(merges)} merges learned and the text encoded in {bpe_time():.1f} s; "
        f"{len(text) - split:,} held-out characters -> {len(val_ids):,} tokens "
        f"({(len(text) - split) / len(val_ids):.2f} characters per token)"
    )
    results = [
        run("characters", chars.vocab_size, 64, chars.train, chars.val, lambda t: 1, args),
        run("BPE tokens", 256 + len(merges), 32, train_ids, val_ids, lambda t: sizes[t], args),
    ]
    print(
        f"\n{'':12}{'vocab':>7}{'params':>9}{'train s':>9}{'ms/step':>9}{'nats/char':>11}{'bits/char':>11}"
    )
    for r, vocab in zip(results, (chars.vocab_size, 256 + len(merges))):
        print(
            f"{r['name']:12}{vocab:>7}{r['params'] / 1e6:>8.2f}M{r['seconds']:>9.1f}"
            f"{1e3 * r['seconds'] / args.steps:>9.1f}{r['loss']:>11.3f}{r['loss'] / math.log(2):>11.3f}"
        )
    unigram = unigram_nats(text[:split])
    print(f"unigram entropy of the training text's characters: {unigram:.3f} nats/char")
    ok = all(math.isfinite(r["loss"]) and r["loss"] < unigram for r in results)
    finish(
        [
            verdict(
                "both models beat the unigram entropy per character",
                ok,
                ", ".join(f"{r['name']} {r['loss']:.3f}" for r in results),
                args.quick,
            )
        ]
    )


if __name__ == "__main__":
    main()
