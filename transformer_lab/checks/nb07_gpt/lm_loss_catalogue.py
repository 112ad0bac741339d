"""What notebook 07's causal LM loss is checked with: the reference loss, the seeded cases, and the
catalogue of known wrong losses (each a variant of the reference: unshifted targets, padding
counted, a sum instead of a mean, ...). The check is in lm_loss.py, its probes in lm_loss_probes.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lab.checks.engine.core import Case, describe_args, generator

__all__ = ["reference_lm_loss", "ATOL", "RTOL"]


ATOL, RTOL = 1e-5, 1e-4


def reference_lm_loss(logits: Tensor, ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
    """Mean cross-entropy of logits[:, t] against ids[:, t + 1] over real targets (PyTorch's loss)."""
    V = logits.shape[-1]
    targets = ids[:, 1:]  # (B, T - 1): the token after each position
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), ignore_index=-100)


def _nll(logp: Tensor, targets: Tensor) -> Tensor:
    return -logp.gather(-1, targets[..., None])[..., 0]  # (B, T')


def _lm_variant(
    logits, ids, mask, align="shift", mask_at="targets", reduce="mean", logp="log_softmax"
) -> Tensor:
    """The loss with one known mistake (alignment, where the mask is read, the reduction, ...)."""
    B, T, V = logits.shape
    if (
        align == "flat"
    ):  # shifted after flattening: the last position of a sequence predicts the next one's first token
        flat_ids = ids.reshape(-1)[1:]
        flat_keep = (
            torch.ones_like(flat_ids, dtype=torch.bool)
            if mask is None
            else mask.reshape(-1)[1:] == 1
        )
        nll = _nll(torch.log_softmax(logits.reshape(-1, V)[:-1], -1), flat_ids)
        return nll[flat_keep].mean()
    if align == "shift":
        z, tgt, keep_idx = logits[:, :-1], ids[:, 1:], slice(1, None)
    elif align == "none":
        z, tgt, keep_idx = logits, ids, slice(None)
    elif align == "reversed":
        z, tgt, keep_idx = logits[:, 1:], ids[:, :-1], slice(None, -1)
    else:  # "roll": the last position is scored against the first token
        z, tgt, keep_idx = logits, torch.roll(ids, -1, dims=1), slice(None)
        if mask is not None:
            mask = torch.roll(
                mask, -1, dims=1
            )  # the rolled mask, read where the rolled targets are
    if logp == "log_softmax":
        lp = torch.log_softmax(z, dim=-1)
    elif logp == "time":
        lp = torch.log_softmax(z, dim=1)
    elif logp == "raw":  # F.nll_loss on the logits: -z[target], no log-softmax
        lp = z
    elif logp == "double":
        lp = torch.log_softmax(torch.softmax(z, dim=-1), dim=-1)
    else:  # "prob": -p instead of -log p
        lp = torch.softmax(z, dim=-1)
    nll = _nll(lp, tgt)  # (B, T')
    if mask is None or mask_at == "ignored":
        keep = torch.ones_like(nll, dtype=torch.bool)
    elif mask_at == "targets":
        keep = mask[:, keep_idx] == 1
    elif mask_at == "inverted":  # 0 read as real, 1 as padding
        keep = mask[:, keep_idx] == 0
    else:  # the mask read at the inputs' positions
        keep = (mask[:, :-1] if align == "shift" else mask) == 1
    keep = keep[:, : nll.shape[1]]
    if reduce == "mean":
        return nll[keep].mean()
    if reduce == "sum":
        return nll[keep].sum()
    if reduce == "mean_all":  # padding zeroed, but still counted in the denominator
        return (nll * keep).mean()
    if reduce == "per_position":  # averaged over the batch at each position, then over positions
        count = keep.sum(0)  # (T',)
        per_pos = (nll * keep).sum(0) / count.clamp(min=1)  # (T',)
        return per_pos[count > 0].mean()
    per_seq = (nll * keep).sum(1) / keep.sum(1).clamp(min=1)  # (B,)
    return per_seq.mean()


_LM_MISTAKES = [
    (
        dict(align="none"),
        "the targets are not shifted: logits[:, t] must be scored against the NEXT token "
        "ids[:, t + 1], not ids[:, t] (use logits[:, :-1] with ids[:, 1:]).",
    ),
    (
        dict(align="reversed"),
        "shifted the wrong way: position t predicts token t + 1, so pair logits[:, :-1] with "
        "ids[:, 1:] (yours pairs logits[:, 1:] with ids[:, :-1]).",
    ),
    *(
        (
            dict(align="roll", mask_at=where),
            "the loss includes the last position, whose target wraps around to the first token "
            "(torch.roll): the last position has no next token, drop it (logits[:, :-1], ids[:, 1:]).",
        )
        for where in ("targets", "ignored")
    ),
    (
        dict(mask_at="ignored"),
        "the padding targets are counted: leave out every position whose TARGET is padding "
        "(attention_mask[:, 1:] == 0), e.g. set those targets to -100 (ignore_index).",
    ),
    (
        dict(mask_at="inputs"),
        "the mask is read at the inputs' positions: a target is padding when attention_mask[:, 1:] "
        "is 0 (shift the mask like the targets), not attention_mask[:, :-1].",
    ),
    (
        dict(reduce="per_sequence"),
        "averaged per sequence, then over the batch: average over all real target tokens at once, "
        "so every token weighs the same (short sequences must not count more).",
    ),
    (
        dict(reduce="per_position"),
        "averaged over the batch at each position, then over the positions: average over all "
        "real target tokens at once, so every token weighs the same (positions with padding in "
        "some rows must not count more per token).",
    ),
    (dict(reduce="sum"), "the loss is summed over the tokens: return the mean."),
    (
        dict(reduce="mean_all"),
        "the padding's losses are zeroed but still counted in the average: divide by the number "
        "of real targets, not by the number of positions.",
    ),
    (
        dict(align="flat"),
        "the shift crosses sequences: you flattened the batch and then shifted, so the last "
        "position of each sequence predicts the first token of the next. Shift within each "
        "sequence (logits[:, :-1], ids[:, 1:]) before flattening.",
    ),
    (
        dict(logp="time"),
        "the log-softmax runs over the positions (dim=1): it must run over the vocabulary, the "
        "last dimension.",
    ),
    (
        dict(logp="double"),
        "softmax applied twice: F.cross_entropy takes raw logits and applies log_softmax itself; "
        "do not pass probabilities.",
    ),
    (
        dict(mask_at="inverted"),
        "the mask's polarity is reversed: your loss keeps the padding targets and drops the real "
        "ones; attention_mask is 1 for a real token and 0 for padding (leave out targets where it "
        "is 0).",
    ),
    (
        dict(logp="raw"),
        "the loss scores the raw logits, -logits[target], as if they were log-probabilities "
        "(F.nll_loss on logits): take log_softmax over the vocabulary first, or use "
        "F.cross_entropy, which does.",
    ),
    (
        dict(logp="prob"),
        "the loss uses the probability of the target, -p, instead of its log-probability -log p.",
    ),
]


def _lm_cases(hidden: bool) -> list[Case]:
    g = generator(9707 if hidden else 707)
    specs = [
        (2, 6, 11, "pad"),
        (3, 5, 7, None),
        (1, 2, 5, None),
        (4, 7, 13, "pad"),
        (2, 4, 9, "ones"),
    ]
    if hidden:
        specs += [(5, 9, 31, "pad"), (1, 12, 300, None), (3, 3, 4, "pad"), (6, 16, 65, "pad")]
    cases = []
    for B, T, V, kind in specs:
        logits = torch.randn(B, T, V, generator=g) * 2.0
        ids = torch.randint(0, V, (B, T), generator=g)
        mask = None
        if kind == "ones":
            mask = torch.ones(B, T, dtype=torch.long)
        elif kind == "pad":  # right padding: lengths from 2 to T, the first sequence full
            lengths = torch.randint(2, T + 1, (B,), generator=g)
            lengths[0] = T
            if B > 1:
                lengths[1] = 2
            mask = (torch.arange(T)[None, :] < lengths[:, None]).long()  # (B, T)
            ids = ids.masked_fill(mask == 0, 0)  # pad id 0
        kwargs = {} if mask is None else {"attention_mask": mask}
        case = Case(
            f"B={B}, T={T}, V={V}" + (", right-padded" if kind == "pad" else ""),
            (logits, ids),
            kwargs,
            describe_args(logits=logits, ids=ids, attention_mask=mask),
        )
        case.data.update(logits=logits, ids=ids, mask=mask)
        cases.append(case)
    return cases
