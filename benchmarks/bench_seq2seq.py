"""Encoder-decoder transformer on the toy translation task (numbers in digits -> English words).

``Seq2SeqConfig.tiny()`` (2 + 2 post-norm layers, width 64) learns "4207" -> "four thousand two
hundred and seven" on the seeded 90/10 split of 0..9999, trained by the package's ``train()``
with teacher forcing, then translates the held-out numbers with greedy decoding (KV cache).
Only 100 of the 10,000 numbers have one or two digits, so uniform sampling would show them
rarely; training batches therefore draw the number of digits uniformly first, then a number of
that length. Accuracy is reported per length so a weak spot cannot hide in the average.

Target: exact-match accuracy >= 95% on the held-out numbers within 60 s of training.

    python benchmarks/bench_seq2seq.py [--quick]
"""

from __future__ import annotations

import torch

# _common also puts the repository on sys.path, so the scripts run without installing.
from _common import base_parser, finish, setup, timer, verdict

from transformer_lab.data import NumberTranslation, TranslationBatch, number_to_words
from transformer_lab.models import Seq2SeqConfig, Seq2SeqTransformer
from transformer_lab.train import model_loss, seed_everything, train

TARGET_ACCURACY = 0.95
TARGET_SECONDS = 60.0


def whole_split(task: NumberTranslation, split: str) -> TranslationBatch:
    """Every example of a split as one batch (the split is small: at most 9,000 rows)."""
    n = len(task.numbers(split))
    return next(task.batches(split, batch_size=n))


def length_balanced_sampler(task: NumberTranslation, batch_size: int, generator: torch.Generator):
    """A function returning training batches whose number of digits is uniform over 1..4."""
    full = whole_split(task, "train")
    lengths = torch.tensor([len(str(k)) for k in task.numbers("train")])  # (N,)
    counts = torch.bincount(lengths)  # (max_len + 1,)
    weights = 1.0 / counts[lengths].double()  # each length gets the same total weight

    def batch() -> TranslationBatch:
        idx = torch.multinomial(weights, batch_size, replacement=True, generator=generator)  # (B,)
        return TranslationBatch(*(t[idx] for t in full))

    return batch


@torch.no_grad()
def exact_match(
    model: Seq2SeqTransformer, task: NumberTranslation, split: str = "test"
) -> dict[int, tuple[int, int]]:
    """Greedy-translate a split; return {number of digits: (correct, total)}."""
    full = whole_split(task, split)
    out = model.greedy_decode(
        full.src, max_new_tokens=task.max_tgt_len - 1, bos_id=task.bos_id, eos_id=task.eos_id
    )  # (N, L)
    by_len: dict[int, list[int]] = {}
    for (source, words), row in zip(task.pairs(split), out):
        stats = by_len.setdefault(len(source), [0, 0])
        stats[0] += task.decode_target(row) == words
        stats[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(by_len.items())}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument(
        "--uniform", action="store_true", help="sample training numbers uniformly instead"
    )
    args = parser.parse_args()
    if args.quick:
        args.steps = 20
    setup(args)

    seed_everything(args.seed)
    task = NumberTranslation()  # 0..9999, seed 0: the split the notebook uses
    config = Seq2SeqConfig.tiny(
        src_vocab_size=task.src_vocab.size, tgt_vocab_size=task.tgt_vocab.size, max_len=16
    )
    model = Seq2SeqTransformer(config)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e3:.1f}k parameters, {config}")
    print(f"task: {task}")

    gen = torch.Generator().manual_seed(args.seed)
    if args.uniform:
        batches = lambda: task.get_batch("train", args.batch_size, generator=gen)  # noqa: E731
    else:
        batches = length_balanced_sampler(task, args.batch_size, gen)
    history = train(
        model,
        batches,
        loss_fn=model_loss,
        steps=args.steps,
        lr=args.lr,
        min_lr=args.lr / 20,
        warmup_steps=min(100, args.steps // 10),
        betas=(0.9, 0.98),
        weight_decay=0.01,
        grad_clip=1.0,
        desc="seq2seq",
    )
    train_s = history.elapsed
    with timer() as eval_time:
        by_len = exact_match(model, task, "test")
    correct = sum(c for c, _ in by_len.values())
    total = sum(n for _, n in by_len.values())
    acc = correct / total

    print(
        f"\ntraining: {history.steps} steps in {train_s:.1f} s = {history.steps / train_s:.1f} steps/s, "
        f"final train loss {history.final_train_loss:.4f}"
    )
    print(
        f"held-out exact match: {acc:.2%} ({correct}/{total}), greedy decoding took {eval_time():.2f} s"
    )
    for length, (c, n) in by_len.items():
        print(f"  {length} digit{'s' if length > 1 else ' '}: {c / n:7.2%} ({c}/{n})")
    full = whole_split(task, "test")
    examples = model.greedy_decode(
        full.src[:8], max_new_tokens=task.max_tgt_len - 1, bos_id=task.bos_id, eos_id=task.eos_id
    )
    # The held-out split has few short numbers (none with one digit), so also check 0..99 (mostly
    # training numbers): the length-balanced sampling is there to get these right.
    short = list(range(100))
    decoded = model.greedy_decode(
        task.encode_source(short),
        max_new_tokens=task.max_tgt_len - 1,
        bos_id=task.bos_id,
        eos_id=task.eos_id,
    )
    short_ok = sum(task.decode_target(row) == number_to_words(k) for k, row in zip(short, decoded))
    print(f"  all of 0..99 (train and test): {short_ok}/100 correct")
    print("examples:")
    for (source, words), row in zip(task.pairs("test")[:8], examples):
        pred = task.decode_target(row)
        print(f"  {source:>5} -> {pred:45s} {'ok' if pred == words else 'expected ' + words}")

    results = [
        verdict(
            f"held-out exact match >= {TARGET_ACCURACY:.0%}",
            acc >= TARGET_ACCURACY,
            f"{acc:.2%}",
            args.quick,
        ),
        verdict(
            f"training time <= {TARGET_SECONDS:.0f} s",
            train_s <= TARGET_SECONDS,
            f"{train_s:.1f} s",
            args.quick,
        ),
    ]
    finish(results)


if __name__ == "__main__":
    main()
