"""What a trained embedding table holds: cosine similarity and nearest neighbours (notebook 00).

Rows of a trained ``W_emb`` that the model uses alike end up pointing alike. The cosine
similarity of rows i and j, w_i . w_j / (|w_i| |w_j|), ignores their lengths;
:func:`nearest` lists the rows most similar to one token's row.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["cosine_matrix", "nearest", "mean_similarity"]


def cosine_matrix(table: torch.Tensor) -> torch.Tensor:
    """(V, C) rows -> (V, V) cosine similarities of every pair of rows."""
    if table.dim() != 2:
        raise ValueError(f"table must have shape (V, C), but received shape {tuple(table.shape)}.")
    unit = torch.nn.functional.normalize(table.detach().float(), dim=1)  # (V, C), |row| = 1
    return unit @ unit.T  # (V, V)


def nearest(
    table: torch.Tensor, labels: Sequence[str], query: str, k: int = 5
) -> list[tuple[str, float]]:
    """The ``k`` tokens whose rows are most similar to ``query``'s row, with the similarity."""
    if len(labels) != table.shape[0]:
        raise ValueError(f"labels must name all {table.shape[0]} rows, but received {len(labels)}.")
    if query not in labels:
        raise ValueError(f"query {query!r} is not one of the labels.")
    i = list(labels).index(query)
    sims = cosine_matrix(table)[i]  # (V,)
    sims[i] = float("-inf")  # a row is always most similar to itself
    top = sims.topk(min(k, len(labels) - 1))
    return [(labels[j], round(float(s), 3)) for s, j in zip(top.values, top.indices)]


def mean_similarity(
    table: torch.Tensor,
    labels: Sequence[str],
    a: Sequence[str],
    b: Sequence[str],
    paired: bool = False,
) -> float:
    """Mean cosine similarity of the rows of tokens ``a`` with those of ``b``.

    ``paired``: only ``a[k]`` with ``b[k]``; otherwise every pair of different tokens.
    """
    index = {label: i for i, label in enumerate(labels)}
    missing = sorted((set(a) | set(b)) - set(index))
    if missing:
        raise ValueError(f"tokens {missing} are not among the labels.")
    sims = cosine_matrix(table)
    ia, ib = [index[t] for t in a], [index[t] for t in b]
    if paired:
        if len(ia) != len(ib):
            raise ValueError(
                f"paired needs as many tokens in a as in b, but received {len(ia)} and {len(ib)}."
            )
        return float(sims[ia, ib].mean())
    block = sims[ia][:, ib]  # (len(a), len(b))
    keep = torch.tensor([[i != j for j in ib] for i in ia])  # a token with itself says nothing
    return float(block[keep].mean())
