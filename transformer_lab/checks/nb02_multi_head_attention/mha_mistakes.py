"""The known mistakes of notebook 02's multi-head attention, each computed on the case's inputs:
:func:`_mha_mistakes` lists them, with their messages, in the order the check tries them (the
output projection missing, a reshape without a transpose, the wrong scale, the mask ignored or
applied after the softmax, w_o per head, the heads out of order, one weight in another's role,
...). Each is one switch of the deliberately wrong multi-head attention in mha_variants.py; the
check is in mha.py.
"""

from __future__ import annotations

import itertools

from transformer_lab.checks.engine.attention_mistakes import (
    POLARITY,
    UNASKED_CAUSAL,
    causal_variants,
)
from transformer_lab.checks.engine.core import Mistake
from transformer_lab.checks.nb02_multi_head_attention.mha_variants import (
    _mha,
    _mha_heads_order,
    _mha_loop,
    _mha_v_from,
    _plus,
)

__all__ = []


def _mha_mistakes(xq, xkv, wq, wk, wv, wo, H, mask) -> list[Mistake]:
    """The known mistakes of multi-head attention on one case, in the order they are tried."""

    def M(msg: str, **kw) -> Mistake:  # tried on both softmaxes of an all -inf row
        return Mistake(
            msg, lambda sm: _mha(xq, xkv, wq, wk, wv, wo, H, mask, sm=sm, **kw), softmax=True
        )

    mistakes = [
        M("the output projection is missing: multiply the merged heads by w_o", out_proj=False),
        M(
            "heads split with a reshape but no transpose: use .view(B, T, H, D).transpose(1, 2)",
            split="reshape",
        ),
        M(
            "heads merged with a reshape but no transpose: use .transpose(1, 2).reshape(B, T, C)",
            merge="reshape",
        ),
        M(
            "the scores are scaled by sqrt(C) (the model width) instead of sqrt(D) = "
            "sqrt(C / H) (the head width)",
            scale="C",
        ),
        M(
            "the scores are scaled by sqrt(H) (the number of heads) instead of sqrt(D) = "
            "sqrt(C / H) (the head width)",
            scale="H",
        ),
        M("the 1/sqrt(D) scaling is missing (D = C / H, the head width)", scale="none"),
        *(
            M(
                f"the scores are scaled by sqrt({n}) (the number of {what}) instead of sqrt(D) = "
                f"sqrt(C / H) (the head width)",
                scale=n,
            )
            for n, what in (("T", "queries"), ("S", "keys"))
        ),
        M(
            "the scores are divided by D instead of sqrt(D) (D = C / H, the head width); "
            "scaling both q and k by 1/sqrt(D) does this: scale the scores once",
            scale="D2",
        ),
        Mistake(
            "the softmax runs over the heads axis (dim=1): each query's weights over the "
            "keys must sum to 1, so take the softmax over the last dim",
            lambda: _mha(xq, xkv, wq, wk, wv, wo, H, mask, sm=lambda t, dim: t.softmax(1)),
        ),
        M(
            "w_o multiplies the values before attention (x_kv @ w_v @ w_o): w_o mixes the "
            "heads, so apply it once to the merged heads' output (B, T, C) @ w_o",
            wo_on_values=True,
        ),
        M(
            "the weights are applied as x @ w.T: the course uses row vectors, Q = x_q @ w_q",
            transpose_w=True,
        ),
        M(
            "keys and values must come from x_kv (the second argument); you computed them from x_q",
            kv_from_q=True,
        ),
        M(
            "queries and keys are swapped in the scores: K Q^T is the transpose of Q K^T; one "
            "row per query, scores = q @ k.transpose(-2, -1)",
            keys_first=True,
        ),
        M(
            "W_o is applied per head (each head's output through its own D x D block): W_o "
            "mixes all heads, so apply it once to the concatenation (B, T, C) @ w_o",
            wo_per_head=True,
        ),
    ]
    if mask is not None:
        mistakes.append(
            M(
                "the mask is ignored: fill the scores with -inf where mask is False, before "
                "the softmax",
                use_mask=False,
            )
        )
        mistakes.append(
            M(
                "the masked scores are set to 0, but a score of 0 still gets weight after "
                "the softmax: fill them with float('-inf') (scores.masked_fill(~mask, -inf))",
                use_mask="zero",
            )
        )
        mistakes.append(
            M(
                "the mask is applied after the softmax (weights * mask): masked keys get weight "
                "0 but the rows no longer sum to 1; fill the scores with -inf before the softmax",
                use_mask="after",
            )
        )
        mistakes.append(
            M(
                "the mask is added to the scores as numbers (+1 where allowed), which blocks "
                "nothing: fill the scores with -inf where mask is False, before the softmax",
                use_mask="add",
            )
        )
        mistakes.append(
            Mistake(
                POLARITY,
                lambda sm: _mha(xq, xkv, wq, wk, wv, wo, H, mask, use_mask="reversed", sm=sm),
                softmax=True,
            )
        )
    mistakes += [
        M(
            "each head must take a contiguous slice of the channels (head h: columns "
            "h*D .. h*D + D - 1); yours interleaves them (head h takes h, h + H, ...)",
            split="strided",
        ),
        M(
            "every head uses the columns of the first head (0 .. D - 1): head h takes columns h*D .. "
            "(h+1)*D - 1 of Q, K and V",
            split="first",
        ),
        M(
            "every head goes through the first D rows of w_o: head h's output meets rows "
            "h*D .. (h+1)*D - 1 of w_o; concatenate the heads and multiply by the whole w_o",
            wo_first_block=True,
        ),
    ]
    mistakes += [
        Mistake(
            "the values come from x_q: keys and values must both come from x_kv (the second "
            "argument), queries from x_q",
            lambda: _mha_v_from(xq, xkv, wq, wk, wv, wo, H, mask, "v"),
        ),
        Mistake(
            "the keys come from x_q: keys and values must both come from x_kv (the second "
            "argument), queries from x_q",
            lambda: _mha_v_from(xq, xkv, wq, wk, wv, wo, H, mask, "k"),
        ),
        Mistake(
            "your output is the right one plus x_q: the residual connection (x + attention) "
            "belongs to the block around attention; return merged_heads @ w_o only",
            lambda: _plus(_mha(xq, xkv, wq, wk, wv, wo, H, mask), xq),
        ),
        Mistake(
            "each head projects only its own D input channels (x[..., cols] @ w_q[cols, cols]): "
            "every head sees all C input channels; project first (x @ w_q), then give head h "
            "the columns h*D .. (h+1)*D - 1",
            lambda: _mha_loop(xq, xkv, wq, wk, wv, wo, H, mask, own_channels=True),
        ),
    ]
    if 1 < H <= 4:
        for perm in itertools.permutations(range(H)):
            if list(perm) != list(range(H)):
                mistakes.append(
                    Mistake(
                        f"the heads are concatenated in the wrong order (yours: heads "
                        f"{', '.join(map(str, perm))}): head h's output goes to channels "
                        f"h*D .. (h+1)*D - 1, in order, before w_o",
                        lambda perm=perm: _mha_heads_order(xq, xkv, wq, wk, wv, wo, H, mask, perm),
                    )
                )
    if mask is not None and (mask.dim() < 4 or mask.shape[1] == 1):
        mistakes.append(
            Mistake(
                "in your loop over heads the mask is indexed per head (mask[:, h]) but it has "
                f"no head axis (shape {tuple(mask.shape)}): expand it first, "
                "mask.expand(B, H, T, S)[:, h], or let it broadcast",
                lambda: _mha_loop(xq, xkv, wq, wk, wv, wo, H, mask, head_mask="index"),
            )
        )
    for causal in causal_variants(mask, xq.shape[1], xkv.shape[1]):
        mistakes.append(
            Mistake(
                UNASKED_CAUSAL,
                lambda sm, m=causal: _mha(xq, xkv, wq, wk, wv, wo, H, m, sm=sm),
                softmax=True,
            )
        )
    # one weight in another's role (or transposed): name the role and the weight
    given = {"w_q": wq, "w_k": wk, "w_v": wv, "w_o": wo}
    role_text = {"w_q": "queries", "w_k": "keys", "w_v": "values", "w_o": "output projection"}
    for i, role in enumerate(given):
        for name, w in [*given.items(), *((n + ".T", w.T) for n, w in given.items())]:
            if name == role:
                continue
            roles = list(given.values())
            roles[i] = w
            mistakes.append(
                M(
                    f"the {role_text[role]} {'uses' if role == 'w_o' else 'use'} {name} "
                    f"instead of {role}"
                    + (
                        f" ({role} transposed, as in x @ w.T; the course uses row vectors, x @ w)"
                        if name == role + ".T"
                        else ""
                    ),
                    roles=tuple(roles),
                )
            )
    return mistakes
