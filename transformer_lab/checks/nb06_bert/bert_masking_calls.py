"""What notebook 06's MLM-corruption check asks of each single call of ``mlm_corrupt``: the
shapes and dtypes, special tokens never chosen, labels only where a token was chosen, the
original ids in the labels, and the same result for the same generator seed. The statistics over
many calls are in bert_masking.py.
"""

from __future__ import annotations

import torch

from transformer_lab import bert_inputs as _ref
from transformer_lab.checks.engine.core import Case, Runner, generator
from transformer_lab.checks.engine.guards import TRUSTED

__all__ = []


IGNORE = _ref.IGNORE_INDEX


def _one_call(run: Runner, case: Case, ids, special, mask_id: int, specials: list[int]):
    """Everything that must hold on every single call."""
    result = run.call(case)
    if result is None:
        run.fail("your function returned None: return the tuple (inputs, labels).", case)
    if not isinstance(result, tuple) or len(result) != 2:
        run.fail(
            f"return the tuple (inputs, labels), but received a {type(result).__name__}.", case
        )
    first, second = result
    if TRUSTED.is_tensor(first) and TRUSTED.is_tensor(second) and (first == IGNORE).any():
        run.fail("the first tensor holds -100: return (inputs, labels) in this order.", case)
    inputs = run.expect_tensor(first, case, ids.shape, torch.long, what="inputs")
    labels = run.expect_tensor(second, case, ids.shape, torch.long, what="labels")
    chosen = labels != IGNORE
    if (~special).any() and TRUSTED.equal(labels[~special], ids[~special]):
        run.fail(
            "labels everywhere: every token carries its id as a label. Only the chosen positions "
            "keep their original id; all others must be -100 (ignored by the loss).",
            case,
        )
    changed = inputs != ids
    if (
        changed.any()
        and (labels[changed] == IGNORE).all()
        and chosen.float().mean() > 0.5
        and TRUSTED.equal(labels[chosen], ids[chosen])
    ):
        run.fail(
            "the labels are the wrong way round (inverted): yours are -100 at the corrupted "
            "positions and the ids elsewhere; labels hold the original id where a token was "
            "chosen and -100 everywhere else.",
            case,
        )
    wrong = chosen & (labels != ids)
    if wrong.any() and TRUSTED.equal(labels[wrong], inputs[wrong]):
        run.fail(
            "the labels hold the corrupted ids ([MASK], random tokens): labels are the ORIGINAL "
            "ids at the chosen positions (clone input_ids before replacing anything).",
            case,
        )
    odd = labels[wrong]
    if odd.numel() and (odd == odd[0]).all():
        run.fail(
            f"labels must be -100 (cross_entropy's ignore_index) at the positions that are not "
            f"chosen, but yours uses {odd[0].item()}: any other value is a real class the loss "
            "would train on.",
            case,
        )
    if (chosen & special).any():
        run.fail(
            "special tokens were chosen ([CLS], [SEP] or [PAD] have a label): choose only among "
            "the non-special tokens, e.g. `chosen &= ~torch.isin(input_ids, special)`.",
            case,
        )
    if wrong.any():
        run.fail(
            "labels must be the original id at the chosen positions and -100 elsewhere; yours "
            f"holds {labels[wrong][0].item()} where the original is {ids[wrong][0].item()}.",
            case,
        )
    changed = inputs != ids
    outside = changed & ~chosen
    if outside.any():
        if (inputs[chosen] == mask_id).all() and chosen.any():
            run.fail(
                "labels only at the [MASK] positions: the random and the kept tokens are chosen "
                "too and need their label (the model must predict every chosen token).",
                case,
            )
        run.fail(
            f"{int(outside.sum())} token(s) without a label were changed: the 80/10/10 split "
            "applies to the chosen positions only, not to the whole sequence (combine each case "
            "with `chosen &`).",
            case,
        )
    randoms = inputs[changed & (inputs != mask_id)]
    if torch.isin(randoms, torch.tensor(specials)).any() or (inputs[special] != ids[special]).any():
        run.fail(
            "a random replacement is a special token ([PAD], [CLS], [SEP] or [MASK]): draw random "
            "tokens from the non-special ids only (e.g. sample from a tensor of the allowed ids).",
            case,
        )
    if randoms.numel() >= 5 and (randoms == randoms[0]).all():
        run.fail(
            f"all {randoms.numel()} random replacements are the same token: draw one random id per "
            "position (a tensor of the input's shape), not a single number.",
            case,
        )
    eligible = ~special
    first = chosen[0] & eligible[0]
    if int(first.sum()) >= 2 and all(
        TRUSTED.equal(chosen[0][both], chosen[b][both])
        for b in range(1, ids.shape[0])
        for both in [eligible[0] & eligible[b]]
    ):
        run.fail(
            "every sequence has the same chosen positions: draw one random number per token, "
            "torch.rand(input_ids.shape), not one per position shared by the batch.",
            case,
        )
    return inputs, labels


def _determinism(run: Runner, case: Case, inputs, labels, seed: int, other_seed: int) -> None:
    """Same seed -> same output (whatever the global RNG does); another seed -> another output."""
    saved = torch.get_rng_state()  # the notebook's global random state is left as it was
    torch.manual_seed(12345)
    try:
        again = run.call(Case(case.name, case.args, {**case.kwargs, "generator": generator(seed)}))
    finally:
        torch.set_rng_state(saved)
    if not (
        isinstance(again, tuple)
        and len(again) == 2
        and TRUSTED.equal(again[0], inputs)
        and TRUSTED.equal(again[1], labels)
    ):
        run.fail(
            "the same generator seed gave a different corruption: draw every random number from "
            "the `generator` argument (torch.rand(..., generator=generator), torch.randint(..., "
            "generator=generator)), not from the global random state.",
            case,
        )
    other = run.call(
        Case(case.name, case.args, {**case.kwargs, "generator": generator(other_seed)})
    )
    if isinstance(other, tuple) and len(other) == 2 and TRUSTED.equal(other[1], labels):
        run.fail(
            "two different generator seeds chose the same positions: your function ignores the "
            "`generator` argument (a generator made inside the function always starts the same).",
            case,
        )
