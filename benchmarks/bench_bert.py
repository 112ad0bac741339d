"""Tiny BERT on Shakespeare lines: masked-LM pretraining, then the word-order classifier.

1. Pretrain ``BertForMaskedLM`` (``BertConfig.tiny``: 2 post-norm layers, width 128) on the
   original lines with BERT's masking (15% chosen; 80% [MASK], 10% random, 10% kept).
   Validation MLM loss is measured on a fixed, seeded masking of the validation lines and
   compared with the unigram baseline: the loss of predicting every masked token from its
   training frequency alone (about 5.76 nats).
2. Fine-tune ``BertForSequenceClassification`` from the pretrained encoder to tell an original
   line from the same words shuffled (punctuation left in place), and report held-out accuracy.
3. The same fine-tuning from the same pretrained weights, but with ``BertConfig(positions=False)``:
   no position table. Without positions the encoder is permutation-equivariant and its [CLS]
   summary cannot tell two orders of the same words apart, so it must stay at chance: the
   lesson of the positional-encoding notebook.

Speed notes (measured, one MLM step of batch 64 x 32 tokens): the full-vocabulary MLM logits
and torch's CPU dropout each took about half of a 230 ms step, so the MLM loss here runs the
head on the masked positions only (same value) and dropout defaults to 0 (``--dropout 0.1``
for BERT's value): 63 ms per step.

Targets: MLM validation loss well below the baseline (here: at least 1 nat below); the
classifier with positions well above chance (>= 70% on the test lines); without positions
within 3 points of 50%.

    python benchmarks/bench_bert.py [--quick]
"""

from __future__ import annotations

import dataclasses
import itertools

import torch

# _common also puts the repository on sys.path, so the scripts run without installing.
from _common import base_parser, finish, setup, verdict

from transformer_lab.data import WordOrderTask
from transformer_lab.models import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    apply_bert_masking,
)
from transformer_lab.train import accuracy, estimate_loss, model_loss, seed_everything, train

MLM_MARGIN = 1.0  # nats below the unigram baseline that count as "well below"
TARGET_WITH_POSITIONS = 0.70
CHANCE_BAND = 0.03


def masked(
    task: WordOrderTask, ids: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    tok = task.tokenizer
    return apply_bert_masking(
        ids, tok.mask_id, tok.vocab_size, special_token_ids=tok.never_mask_ids, generator=generator
    )


def mlm_loss_fn(task: WordOrderTask, generator: torch.Generator):
    """Loss of one MLM batch: mask it freshly (a new masking every time a line is seen).

    Only the ~15% chosen positions have a label, so the head (dense, GELU, norm, and the
    (C -> V) decoder, V = 4,188) runs on those positions only (``masked_lm_loss``): the same
    loss as ``model(..., labels=labels).loss``, which computes logits everywhere, for half the step time.
    """

    def loss(model: BertForMaskedLM, batch):
        inputs, labels = masked(task, batch.input_ids, generator)
        return model.masked_lm_loss(inputs, labels, attention_mask=batch.attention_mask)

    return loss


def fixed_val_mlm_batches(task: WordOrderTask, batch_size: int = 512):
    """The validation lines masked once with a fixed seed, so every run scores the same positions."""
    full = task.mlm_tensors("val")
    inputs, labels = masked(task, full.input_ids, torch.Generator().manual_seed(2024))
    mask = full.attention_mask
    return [
        {
            "input_ids": inputs[i : i + batch_size],
            "attention_mask": mask[i : i + batch_size],
            "labels": labels[i : i + batch_size],
        }
        for i in range(0, len(inputs), batch_size)
    ]


def scored(batches, quick: bool):
    """The batches a result is measured on: all of them, or under --quick (where nothing is
    judged) the first only, which spares the smoke test four-fifths of its time."""
    return itertools.islice(batches, 1) if quick else batches


def classify(m, batch):
    return m(batch.input_ids, attention_mask=batch.attention_mask).logits, batch.labels


def fine_tune(
    pretrained: BertForMaskedLM, task: WordOrderTask, args, use_positions: bool, desc: str
):
    """A classifier with the pretrained encoder; returns (model, history, val acc, test acc)."""
    seed_everything(args.seed)
    model = BertForSequenceClassification(
        dataclasses.replace(pretrained.config, positions=use_positions)
    )
    weights = pretrained.bert.state_dict()
    if not use_positions:
        weights = {k: v for k, v in weights.items() if not k.startswith("pos_emb.")}
    model.bert.load_state_dict(weights)  # strict: every other weight carries over
    gen = torch.Generator().manual_seed(args.seed + 1)
    history = train(
        model,
        lambda: task.get_batch("train", args.batch_size, generator=gen),
        loss_fn=model_loss,
        steps=args.cls_steps,
        lr=args.cls_lr,
        warmup_steps=min(100, args.cls_steps // 10),
        weight_decay=0.01,
        betas=(0.9, 0.999),
        desc=desc,
    )
    val_acc = accuracy(model, scored(task.batches("val", 512), args.quick), predict_fn=classify)
    test_acc = accuracy(model, scored(task.batches("test", 512), args.quick), predict_fn=classify)
    return model, history, val_acc, test_acc


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--mlm-steps", type=int, default=1500)
    parser.add_argument("--cls-steps", type=int, default=800)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--mlm-lr", type=float, default=1e-3)
    parser.add_argument("--cls-lr", type=float, default=3e-4)
    args = parser.parse_args()
    if args.quick:
        args.mlm_steps, args.cls_steps = 20, 20
    setup(args)

    seed_everything(args.seed)
    task = WordOrderTask()  # max_len 32, seed 0: the split the notebook uses
    baseline = task.unigram_baseline("val")
    config = BertConfig.tiny(vocab_size=task.vocab_size, max_len=task.max_len, dropout=args.dropout)
    print(f"task: {task}; unigram baseline on val: {baseline:.3f} nats")
    print(f"config: {config}")

    # 1. masked-LM pretraining
    mlm = BertForMaskedLM(config)
    print(f"MLM model: {sum(p.numel() for p in mlm.parameters()) / 1e6:.2f}M parameters")
    gen = torch.Generator().manual_seed(args.seed)
    val_batches = list(scored(fixed_val_mlm_batches(task), args.quick))
    mlm_history = train(
        mlm,
        lambda: task.mlm_batch("train", args.batch_size, generator=gen),
        loss_fn=mlm_loss_fn(task, gen),
        steps=args.mlm_steps,
        lr=args.mlm_lr,
        warmup_steps=min(200, args.mlm_steps // 10),
        weight_decay=0.01,
        betas=(0.9, 0.999),
        desc="BERT MLM",
    )
    val_mlm = estimate_loss(mlm, val_batches, model_loss, iters=None)
    print(
        f"\nMLM: {mlm_history.steps} steps in {mlm_history.elapsed:.1f} s "
        f"({mlm_history.steps / mlm_history.elapsed:.1f} steps/s); val MLM loss {val_mlm:.3f} nats "
        f"vs unigram baseline {baseline:.3f} (difference {baseline - val_mlm:.3f})"
    )

    # 2. and 3. fine-tuning, with and without positions
    _, h_pos, val_pos, test_pos = fine_tune(mlm, task, args, True, "classifier")
    print(
        f"classifier with positions: {h_pos.steps} steps in {h_pos.elapsed:.1f} s; "
        f"accuracy val {val_pos:.2%}, test {test_pos:.2%}"
    )
    _, h_nopos, val_nopos, test_nopos = fine_tune(
        mlm, task, args, False, "classifier, no positions"
    )
    print(
        f"classifier without positions: {h_nopos.steps} steps in {h_nopos.elapsed:.1f} s; "
        f"accuracy val {val_nopos:.2%}, test {test_nopos:.2%}"
    )
    total = mlm_history.elapsed + h_pos.elapsed + h_nopos.elapsed
    print(f"total training time {total:.1f} s")

    results = [
        verdict(
            f"MLM val loss <= baseline - {MLM_MARGIN:.0f} nat",
            val_mlm <= baseline - MLM_MARGIN,
            f"{val_mlm:.3f} vs {baseline:.3f}",
            args.quick,
        ),
        verdict(
            f"word order with positions >= {TARGET_WITH_POSITIONS:.0%} (test)",
            test_pos >= TARGET_WITH_POSITIONS,
            f"{test_pos:.2%}",
            args.quick,
        ),
        verdict(
            f"word order without positions within {CHANCE_BAND:.0%} of chance (test)",
            abs(test_nopos - 0.5) <= CHANCE_BAND,
            f"{test_nopos:.2%}",
            args.quick,
        ),
    ]
    finish(results)


if __name__ == "__main__":
    main()
