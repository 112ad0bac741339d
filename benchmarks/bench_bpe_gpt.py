"""The same tiny GPT on characters and on BPE tokens (notebook 0's tokenizer), loss per character.

Both models are ``GPTConfig.tiny`` (4 layers, 4 heads, width 128) trained with the package's
``train()`` on the first 90% of tiny Shakespeare, the same number of steps and batch size: one on
characters (65 symbols, context 64), one on byte-level BPE tokens (256 + 512 merges learned on
the same training text with ``transformer_lab.bpe``, context 32 tokens, about as many characters).
A loss per token does not compare across tokenizers, so both are measured as the total
cross-entropy on the first ``--eval-chars`` held-out characters divided by the number of
characters it covers (nats per character): ``transformer_lab.lessons.tokens_compare``, which notebook 07's
"Characters or subwords?" cell also uses. With ``--threads 1`` and the default seed this is that
cell's full run (``FULL_COMPARISON = True``), number for number.

Reported, not a target: which tokenizer reaches the lower loss per character after the same
steps, and what a step costs. (The one check: both losses are finite and below the entropy of
the training text's character frequencies, computed here.)

    python benchmarks/bench_bpe_gpt.py [--steps 1000] [--merges 512] [--eval-chars 32768] [--quick]
"""

from __future__ import annotations

import math
from collections import Counter

from _common import base_parser, finish, setup, timer, verdict

from transformer_lab.data import load_shakespeare
from transformer_lab.lessons.tokens_compare import (
    EncodedText,
    encode_bpe,
    encode_characters,
    loss_per_char,
    train_tokens_model,
)


def unigram_nats(text: str) -> float:
    """Entropy of the character frequencies of ``text``, in nats per character."""
    counts = Counter(text)
    return -sum(n / len(text) * math.log(n / len(text)) for n in counts.values())


def run(encoded: EncodedText, block_size: int, args) -> dict:
    model, history = train_tokens_model(
        encoded,
        block_size,
        args.steps,
        batch_size=args.batch_size,
        eval_chars=args.eval_chars,
        eval_every=args.steps,  # evaluated before training and at the end only
        seed=args.seed,
        progress=False,
    )
    held_out = encoded.val_prefix(args.eval_chars)
    with timer() as eval_time:
        loss = loss_per_char(model, held_out, encoded.char_counts, block_size)
    assert loss == history.eval_loss[-1]  # the same evaluation as the one train() recorded
    return {
        "name": encoded.name,
        "vocab": encoded.vocab_size,
        "params": model.num_parameters(),
        "seconds": history.elapsed - 2 * eval_time(),  # the two evaluations taken out
        "loss": loss,
        "per_token": loss * encoded.chars(held_out[1:]) / (len(held_out) - 1),
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--merges", type=int, default=512)
    parser.add_argument("--eval-chars", type=int, default=32768)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.merges, args.eval_chars = 20, 64, 2048
    setup(args)

    text = load_shakespeare()
    chars = encode_characters(text)
    with timer() as bpe_time:
        subwords = encode_bpe(text, args.merges)
    held_out = subwords.val_prefix(args.eval_chars)
    print(
        f"BPE: {len(subwords.merges)} merges learned and the text encoded in {bpe_time():.1f} s; "
        f"{subwords.chars(subwords.val):,} held-out characters -> {len(subwords.val):,} tokens "
        f"({subwords.chars(subwords.val) / len(subwords.val):.2f} characters per token); "
        f"evaluated on the first {subwords.chars(held_out):,} characters"
    )
    results = [run(chars, 64, args), run(subwords, 32, args)]
    print(
        f"\n{'':18}{'vocab':>7}{'params':>9}{'train s':>9}{'ms/step':>9}"
        f"{'nats/token':>12}{'nats/char':>11}{'bits/char':>11}"
    )
    for r in results:
        print(
            f"{r['name']:18}{r['vocab']:>7}{r['params'] / 1e6:>8.2f}M{r['seconds']:>9.1f}"
            f"{1e3 * r['seconds'] / args.steps:>9.1f}{r['per_token']:>12.3f}{r['loss']:>11.3f}"
            f"{r['loss'] / math.log(2):>11.3f}"
        )
    unigram = unigram_nats(text[: int(0.9 * len(text))])
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
