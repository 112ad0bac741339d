"""Check for notebook 6's masked-language-model corruption: a statistical check over many seeds.

Student-facing signature:

    mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None)
        -> (inputs (B, T) long, labels (B, T) long)

A correct corruption is random, so no single output can be compared with a reference. The check
runs the student's function on padded batches ([CLS] a [SEP] b [SEP] [PAD]...) under many seeds
and tests what must hold on *every* call (specials never chosen, labels exactly the original ids
at the chosen positions and -100 elsewhere, nothing changed outside the chosen positions,
random replacements never special, the same seed giving the same output), then the proportions
over all calls: the share of non-special tokens chosen within ``RATE_TOL`` of ``p``, and
[MASK] / random / kept within ``SPLIT_TOL`` of 80 / 10 / 10 %. With about 2,000 chosen tokens
per round these tolerances are more than five standard deviations wide. What every call must
satisfy is tested in bert_masking_calls.py.
"""

from __future__ import annotations

import torch

from transformer_lab import bert_inputs as _ref
from transformer_lab.checks.engine.core import Case, Runner, generator
from transformer_lab.checks.engine.forbid import Forbidden
from transformer_lab.checks.nb06_bert.bert import _signature_hint
from transformer_lab.checks.nb06_bert.bert_masking_calls import IGNORE, _determinism, _one_call
from transformer_lab.checks.registry import Cell, Exercise, register
from transformer_lab.models import apply_bert_masking as _apply_bert_masking

__all__ = ["check_mlm_corrupt", "RATE_TOL", "SPLIT_TOL"]


RATE_TOL = 0.025  # |share of non-special tokens chosen - p|


SPLIT_TOL = 0.05  # |share of the chosen that became [MASK] / random / stayed - 0.8 / 0.1 / 0.1|


def _layout(last: bool):
    """Vocabulary size and special ids: the specials' ids first (0..3) or ``last`` (V-4..V-1)."""
    if last:
        V = 57
        pad, cls_, sep, mask = V - 1, V - 2, V - 3, V - 4
    else:
        V = 40
        pad, cls_, sep, mask = 0, 1, 2, 3
    return V, pad, cls_, sep, mask


def _batch(g: torch.Generator, B: int, T: int, last: bool) -> torch.Tensor:
    """(B, T) rows [CLS] a [SEP] b [SEP] [PAD]...; about half the rows are half padding."""
    V, pad, cls_, sep, mask = _layout(last)
    words = torch.tensor([i for i in range(V) if i not in (pad, cls_, sep, mask)])
    ids = torch.full((B, T), pad, dtype=torch.long)
    for row in range(B):
        length = T if row % 2 == 0 else int(torch.randint(T // 3, T // 2 + 1, (1,), generator=g))
        n_words = length - 3
        la = int(torch.randint(1, n_words, (1,), generator=g))
        body = words[torch.randint(len(words), (n_words,), generator=g)]
        ids[row, 0] = cls_
        ids[row, 1 : 1 + la] = body[:la]
        ids[row, 1 + la] = sep
        ids[row, 2 + la : length - 1] = body[la:]
        ids[row, length - 1] = sep
    return ids


def _rounds(hidden: bool) -> list[tuple[float, list[int], int, int, bool]]:
    """(p, seeds, B, T, specials last) of each round of calls: both layouts in either run."""
    if hidden:
        return [
            (0.15, list(range(500, 530)), 12, 60, True),
            (0.25, list(range(900, 924)), 16, 40, False),
        ]
    return [(0.15, list(range(30)), 16, 48, False), (0.4, list(range(100, 120)), 16, 48, True)]


class _Tally:
    def __init__(self) -> None:
        self.eligible = self.chosen = self.masked = self.random = self.kept = 0
        self.by_length = 0.0  # chosen count if p * T (whole row) were chosen among the eligible
        self.pairs = self.equal_pairs = 0  # random replacements at one position in two rows
        self.rows = self.rows_uniform = self.rows_all = 0  # rows all chosen or none (>= 4 eligible)
        self.calls = self.calls_uniform = 0  # calls whose whole batch is all chosen or none


def check_mlm_corrupt(mlm_corrupt, hidden: bool = False) -> None:
    """Check ``mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None)``
    on every call and in its statistics over many seeds."""
    __tracebackhide__ = True
    run = Runner(
        "check_mlm_corrupt",
        mlm_corrupt,
        [
            Forbidden("transformer_lab.bert_inputs.mlm_corrupt", function=_ref.mlm_corrupt),
            Forbidden("transformer_lab.models.apply_bert_masking", function=_apply_bert_masking),
        ],
        hidden,
        lambda e, c: _signature_hint(
            e, "mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None)"
        ),
    )
    data_gen = generator(6303 if hidden else 603)
    summary = []
    for p, seeds, B, T, last in _rounds(hidden):
        V, pad, cls_, sep, mask_id = _layout(last)
        specials = [pad, cls_, sep, mask_id]
        tally = _Tally()
        ids = _batch(data_gen, B, T, last)
        special = torch.isin(ids, torch.tensor(specials))
        for seed in seeds:
            case = Case(
                f"p={p}, seed {seed}",
                (ids, mask_id, V, list(specials)),
                {"p": p, "generator": generator(seed)},
                f"input_ids ({B}, {T}) with [CLS]={cls_}, [SEP]={sep}, [PAD]={pad}, "
                f"[MASK]={mask_id}, vocab_size={V}",
            )
            inputs, labels = _one_call(run, case, ids, special, mask_id, specials)
            if seed == seeds[0]:
                _determinism(run, case, inputs, labels, seed, seeds[1])
            _count(tally, ids, special, inputs, labels, mask_id, p, T)
        summary.append(_proportions(run, tally, p, B, T))
    run.passed(
        f" ({'; '.join(summary)}; tolerances ±{RATE_TOL * 100:.1f} points on the rate and "
        f"±{SPLIT_TOL * 100:.0f} on the split)"
    )


def _count(tally: _Tally, ids, special, inputs, labels, mask_id: int, p: float, T: int) -> None:
    chosen = labels != IGNORE
    eligible = ~special
    tally.eligible += int(eligible.sum())
    tally.chosen += int(chosen.sum())
    tally.masked += int((chosen & (inputs == mask_id)).sum())
    tally.kept += int((chosen & (inputs == ids)).sum())
    random = chosen & (inputs != mask_id) & (inputs != ids)
    tally.random += int(random.sum())
    for t in range(ids.shape[1]):  # two rows with a random token at the same position
        drawn = inputs[random[:, t], t]
        if drawn.numel() >= 2:
            tally.pairs += drawn.numel() - 1
            tally.equal_pairs += int((drawn[1:] == drawn[0]).sum())
    n_eligible, n_chosen = eligible.sum(1), (chosen & eligible).sum(1)
    wide = n_eligible >= 4
    tally.rows += int(wide.sum())
    uniform = wide & ((n_chosen == 0) | (n_chosen == n_eligible))
    tally.rows_uniform += int(uniform.sum())
    tally.rows_all += int((wide & (n_chosen == n_eligible)).sum())
    tally.calls += 1
    tally.calls_uniform += int(int(n_chosen.sum()) in (0, int(n_eligible.sum())))
    per_row = eligible.sum(1).float()
    tally.by_length += float(torch.minimum(per_row, torch.full_like(per_row, p * T)).sum())


def _proportions(run: Runner, tally: _Tally, p: float, B: int, T: int) -> str:
    case = Case(f"p={p}, statistics over many seeds", describe=f"input_ids ({B}, {T}), many seeds")
    rate = tally.chosen / max(tally.eligible, 1)
    shares = [n / max(tally.chosen, 1) for n in (tally.masked, tally.random, tally.kept)]
    measured = f"[MASK] {shares[0]:.1%}, random {shares[1]:.1%}, kept {shares[2]:.1%} of the chosen"
    if tally.rows >= 20 and tally.rows_all >= 2 and tally.rows_uniform == tally.rows:
        once = "batch" if tally.calls_uniform == tally.calls else "sequence"
        run.fail(
            f"the choice is made once per {once}: in every call each {once} has all its "
            "non-special tokens chosen or none. Choose each token on its own, with one uniform "
            "number per token: torch.rand(input_ids.shape, generator=generator) < p.",
            case,
        )
    if abs(rate - p) > RATE_TOL:
        by_length = tally.by_length / max(tally.eligible, 1)
        if abs(rate - by_length) <= RATE_TOL:
            run.fail(
                f"you chose {rate:.1%} of the non-special tokens, not {p:.0%}: the count was taken "
                f"as {p:.0%} of ALL positions (padding and specials included). Choose each "
                f"non-special token with probability p (or p times the number of non-special tokens).",
                case,
            )
        if abs(rate - (1 - p)) <= RATE_TOL:
            run.fail(
                f"you chose {rate:.1%} of the non-special tokens instead of {p:.0%}: the comparison "
                "is reversed; choose where the uniform number is < p.",
                case,
            )
        if abs(rate - 0.15) <= RATE_TOL:
            run.fail(
                f"you chose 15% of the non-special tokens, but p={p}: the argument p (the share "
                "of tokens chosen) is ignored; use it instead of a hard-coded 0.15 (0.15 is only "
                "its default).",
                case,
            )
        run.fail(
            f"you chose {rate:.1%} of the non-special tokens; expected p = {p:.0%} "
            f"(± {RATE_TOL * 100:.1f} points).",
            case,
        )
    masked, random, kept = shares
    if masked > 0.97:
        run.fail(
            f"every chosen token became [MASK] ({measured}): 10% must get a random token and "
            "10% stay unchanged, so the model cannot rely on seeing [MASK].",
            case,
        )
    if (
        abs(masked - 0.8) <= SPLIT_TOL
        and abs(random - 0.02) <= 0.02
        and abs(kept - 0.18) <= SPLIT_TOL
    ):
        run.fail(
            f"{measured}: a random token went to 10% of the REMAINING 20% only. Of the chosen "
            "tokens not masked, half get a random token (probability 0.5, not 0.1).",
            case,
        )
    if (
        abs(masked - 0.72) <= 0.03
        and abs(random - 0.1) <= SPLIT_TOL
        and abs(kept - 0.18) <= SPLIT_TOL
    ):
        run.fail(
            f"{measured}: the random replacements were drawn independently of the [MASK]s and "
            "overwrote some of them. Split the chosen positions with ONE uniform number u per "
            "token: u < 0.8 [MASK], 0.8 <= u < 0.9 random, u >= 0.9 kept.",
            case,
        )
    if tally.pairs >= 5 and tally.equal_pairs == tally.pairs:
        run.fail(
            "the random replacements are shared by the sequences of the batch: wherever two rows "
            "get a random token at the same position, it is the same token; draw one random id per "
            "token, a tensor of input_ids' shape.",
            case,
        )
    if kept <= 0.02 and masked > 0.5:
        run.fail(
            f"no labelled token stays unchanged ({measured}): either nothing is kept (u >= 0.9 "
            "must keep the original id), or the kept tokens get no label; every chosen token, "
            "the 10% kept unchanged too, keeps its label.",
            case,
        )
    if max(abs(masked - 0.8), abs(random - 0.1), abs(kept - 0.1)) > SPLIT_TOL:
        run.fail(
            f"{measured}; expected 80% / 10% / 10% (± {SPLIT_TOL * 100:.0f} points).",
            case,
        )
    return f"p={p}: chose {rate:.1%} of the non-special tokens, {measured}"


register(
    Exercise(
        "mlm_corrupt",
        "06_bert",
        "mlm_corrupt(input_ids, mask_id, vocab_size, special_ids, p=0.15, generator=None) -> (inputs, labels)",
        cells=(Cell("mlm_corrupt_tests", "mlm_corrupt", 3),),
        check=check_mlm_corrupt,
        against="BERT's 15% / 80-10-10 statistics over many seeds (transformer_lab.bert_inputs.mlm_corrupt)",
        kind="random",
    )
)
