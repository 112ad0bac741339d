"""Multi-head attention: H attention patterns in parallel, each on a D = C / H slice.

    head_h = Attention(X_q W_q^h, X_kv W_k^h, X_kv W_v^h)
    MultiHead(X_q, X_kv) = concat(head_1, ..., head_H) W_o       (Vaswani et al., 2017, sec. 3.2.2)

Splitting one C-wide projection into H heads of width C / H keeps the cost and the number of
parameters the same as a single head of width C. With ``key_value=None`` the module is
self-attention; with a second sequence it is cross-attention (queries from one sequence,
keys and values from the other).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transformer_lab._hugepages import hugepage_copy
from transformer_lab._validate import check_divisible, check_mask, check_tensor
from transformer_lab.attention import attend
from transformer_lab.masks import causal_mask, combine_masks

__all__ = ["split_heads", "merge_heads", "KVCache", "MultiHeadAttention"]


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, C) -> (B, H, T, D): give every head its own contiguous slice of the features."""
    check_tensor("x", x, dims=3)
    B, T, C = x.shape
    check_divisible(C, n_heads)
    # The transpose matters: a bare reshape to (B, H, T, D) would mix positions across heads.
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2)  # (B, T, H, D) -> (B, H, T, D)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, D) -> (B, T, C): concatenate the heads' outputs feature-wise (inverse of split_heads)."""
    check_tensor("x", x, dims=4)
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H, D) -> (B, T, C)


def _inference_copy(owner: nn.Module, slot: str, params: list[Tensor], build) -> Tensor:
    """``build(params)``, kept on ``owner`` between calls while gradients are off.

    Rebuilt whenever one of ``params`` is replaced, moved, or changed in place (its storage
    or version counter differs); with gradients on it is built every call, so autograd
    reaches the parameters.
    """
    if torch.is_grad_enabled() and any(p.requires_grad for p in params):
        return build(params)
    key = tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in params)
    cached = owner.__dict__.get(slot)
    if cached is None or cached[0] != key:
        cached = (key, build(params))
        owner.__dict__[slot] = cached  # a plain attribute: not a parameter, not in state_dict
    return cached[1]


def one_row_linear(layer: nn.Linear, x: Tensor) -> Tensor:
    """``layer(x)``; when ``x`` is a single row (one generated token) and no gradient is needed,
    multiply it by a kept copy of the weight instead, in huge pages (:mod:`._hugepages`).

    A widening product (out >= in) keeps the copy as (in, out), GPT-2's own ``Conv1D``
    layout: on a CPU a one-row product reads it faster than the (out, in) one ``nn.Linear``
    stores (768 -> 3072 with the weights out of cache: 506 us against 777 us, one thread, AMD
    EPYC, MKL). A narrowing product is the other way round (3072 -> 768: 712 us against
    592 us), so its copy keeps (out, in). The copy costs the weight's memory once more and
    is made only on this path. Modules with hooks go through their normal call.
    """
    if (
        x.numel() != x.shape[-1]
        or (torch.is_grad_enabled() and layer.weight.requires_grad)
        or layer._forward_hooks
        or layer._forward_pre_hooks
    ):
        return layer(x)
    if layer.in_features > layer.out_features:
        w = _inference_copy(layer, "_w", [layer.weight], lambda p: hugepage_copy(p[0]))
        return F.linear(x, w, layer.bias)  # (..., out)
    w_t = _inference_copy(layer, "_w_t", [layer.weight], lambda p: hugepage_copy(p[0].t()))
    row = x.reshape(1, -1)  # (1, in)
    out = row @ w_t if layer.bias is None else torch.addmm(layer.bias, row, w_t)  # (1, out)
    return out.view(*x.shape[:-1], w_t.shape[1])


class KVCache:
    """Keys and values of the tokens seen so far, so generation need not recompute them.

    ``k`` and ``v`` are (B, H, S, D), growing by one position per generated token. Without
    gradients (generation) they live in a preallocated (B, H, capacity, D) buffer that each step
    writes into, instead of copying the whole cache into a new tensor per token; the buffer
    doubles when full. With gradients enabled each append concatenates, so autograd sees
    ordinary tensors.

    Args:
        k, v: optional (B, H, S, D) keys and values to start from.
        capacity: positions to reserve at the first append (e.g. the model's ``max_len``).
    """

    def __init__(
        self, k: Tensor | None = None, v: Tensor | None = None, capacity: int | None = None
    ) -> None:
        self.capacity = capacity
        self._k: Tensor | None = None  # (B, H, capacity, D) buffer, or the tensor itself
        self._v: Tensor | None = None
        self._length = 0
        if (k is None) != (v is None):
            raise ValueError("KVCache needs both k and v, or neither.")
        if k is not None:
            self.append(k, v)

    @property
    def k(self) -> Tensor | None:
        """The cached keys, (B, H, S, D), or ``None`` before the first append."""
        return None if self._k is None else self._k[:, :, : self._length]

    @property
    def v(self) -> Tensor | None:
        """The cached values, (B, H, S, D), or ``None`` before the first append."""
        return None if self._v is None else self._v[:, :, : self._length]

    @property
    def length(self) -> int:
        """Number of cached positions S."""
        return self._length

    def __repr__(self) -> str:
        shape = None if self._k is None else (*self._k.shape[:2], self._length, self._k.shape[3])
        return f"KVCache(length={self._length}, shape={shape})"

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add new (B, H, T, D) keys and values; return the full (B, H, S, D) tensors."""
        start, end = self._length, self._length + k.shape[2]
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
            if self._k is None:  # autograd: plain tensors, concatenated
                self._k, self._v = k, v
            else:
                self._k = torch.cat([self.k, k], dim=2)  # (B, H, S + T, D)
                self._v = torch.cat([self.v, v], dim=2)
            self._length = end
            return self._k, self._v
        buf = self._k
        if (
            buf is None
            or end > buf.shape[2]
            or buf.shape[:2] != k.shape[:2]
            or buf.shape[3] != k.shape[3]
            or buf.dtype != k.dtype
            or buf.device != k.device
        ):
            self._grow(k, v, end)
        self._k[:, :, start:end].copy_(k)  # (B, H, T, D) into its slot: no copy of the rest
        self._v[:, :, start:end].copy_(v)
        self._length = end
        return self.k, self.v

    def _grow(self, k: Tensor, v: Tensor, needed: int) -> None:
        """A new buffer with room for ``needed`` positions (or more), holding what is cached."""
        old = self._k.shape[2] if self._k is not None else 0
        size = max(needed, self.capacity or 0, 2 * old)
        B, H, _, D = k.shape
        new_k = k.new_empty(B, H, size, D)  # (B, H, capacity, D)
        new_v = v.new_empty(B, H, size, v.shape[3])
        if self._length:
            new_k[:, :, : self._length].copy_(self.k)
            new_v[:, :, : self._length].copy_(self.v)
        self._k, self._v = new_k, new_v


class MultiHeadAttention(nn.Module):
    """Multi-head self- or cross-attention with projections W_q, W_k, W_v and W_o.

    Args:
        d_model: width C of the queries' sequence (and of the output).
        n_heads: number of heads H; must divide ``d_model``.
        bias: whether the four projections have biases.
        dropout: dropout on the attention weights during training.
        kv_dim: width of the key/value sequence for cross-attention (defaults to ``d_model``).
        fused: use PyTorch's fused kernel (``F.scaled_dot_product_attention``) when the weights
            are not requested, and one (C -> 3C) product for self-attention's three projections;
            same numbers, faster. The explicit path is the teaching path.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        kv_dim: int | None = None,
        fused: bool = False,
    ) -> None:
        super().__init__()
        check_divisible(d_model, n_heads)
        kv_dim = d_model if kv_dim is None else kv_dim
        self.d_model, self.n_heads, self.kv_dim = d_model, n_heads, kv_dim
        self.d_head = d_model // n_heads
        self.dropout, self.fused = dropout, fused
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W_q: (C, C), all heads at once
        self.k_proj = nn.Linear(kv_dim, d_model, bias=bias)  # W_k
        self.v_proj = nn.Linear(kv_dim, d_model, bias=bias)  # W_v
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W_o mixes the heads

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None = None,
        mask: Tensor | None = None,
        is_causal: bool = False,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key_value`` (or to itself).

        Args:
            query: (B, T, C).
            key_value: (B, S, kv_dim) for cross-attention; ``None`` for self-attention.
            mask: boolean, broadcastable to (B, H, T, S); ``True`` = may attend.
            is_causal: also apply the causal mask: query t sees keys up to its own position
                (the last T of the S positions when a cache holds earlier ones). Combined with
                ``mask`` if both are given; the fused kernel builds it internally when it can.
            cache: a :class:`KVCache` for incremental self-attention; the new keys and values
                are appended and the queries attend to everything cached.
            need_weights: also return the attention weights.
        Returns:
            ``(out, weights)``: out (B, T, C); weights (B, H, T, S) or ``None``.
        """
        check_tensor("query", query, dims=3, last_dim=self.d_model, last_dim_name="d_model")
        if key_value is not None:
            check_tensor(
                "key_value", key_value, dims=3, last_dim=self.kv_dim, last_dim_name="kv_dim"
            )
            if key_value.shape[0] != query.shape[0]:
                raise ValueError(
                    f"query and key_value must have the same batch size, but received "
                    f"{query.shape[0]} and {key_value.shape[0]}."
                )
        q, k, v = self._project(query, key_value)  # (B, H, T, D), (B, H, S, D), (B, H, S, D)
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, S_cached + S, D)
        T, S = q.shape[2], k.shape[2]
        if mask is not None:
            check_mask(mask, (q.shape[0], self.n_heads, T, S))  # the one check of this call
        p = self.dropout if self.training else 0.0
        if self.fused and not need_weights and is_causal and mask is None and T == S:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
            return one_row_linear(self.out_proj, merge_heads(out)), None  # (B, T, C)
        if is_causal and T > 1:  # a single query is the newest token: it may see every key
            mask = combine_masks(causal_mask(T, S, device=q.device), mask)  # (..., T, S)
        if self.fused and not need_weights:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            if mask is not None:
                # Fully masked rows: some kernels give NaN there; ours gives zeros, so force them.
                out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # (B, H, T, D)
            weights = None
        else:
            out, weights = attend(q, k, v, mask, dropout_p=p)  # (B, H, T, D), (B, H, T, S)
        out = one_row_linear(self.out_proj, merge_heads(out))  # (B, T, C)
        return out, (weights if need_weights else None)

    def decode_step(self, x: Tensor, cache: KVCache) -> Tensor:
        """Self-attention of one new token per sequence to itself and the cached tokens.

        The same numbers as ``self(x, is_causal=True, cache=cache)[0]`` (a single query may see
        every key, so no mask is built), without that call's checks and module dispatch: the
        per-token path of generation, called only in eval mode with gradients off.

        Args:
            x: (B, 1, C) the newest token's normalised features.
            cache: the layer's :class:`KVCache`; the new key and value are appended.
        Returns:
            (B, 1, C).
        """
        B, H, D = x.shape[0], self.n_heads, self.d_head
        if self.fused:
            q, k, v = self._qkv_product(x).view(B, 3, H, 1, D).unbind(1)  # (B, H, 1, D) each, views
        else:
            q, k, v = self._project(x, None)  # (B, H, 1, D) each
        k, v = cache.append(k, v)  # (B, H, S, D)
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v)  # (B, H, 1, D)
        else:
            out = attend(q, k, v)[0]
        return one_row_linear(self.out_proj, out.reshape(B, 1, H * D))  # (B, 1, C)

    def _project(self, query: Tensor, key_value: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """Queries from ``query``, keys and values from ``key_value`` (or ``query``), split into heads."""
        if self.fused and key_value is None:
            return tuple(split_heads(t, self.n_heads) for t in self._project_qkv(query))
        source = query if key_value is None else key_value
        q = split_heads(self.q_proj(query), self.n_heads)  # (B, H, T, D)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, H, S, D)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, H, S, D)
        return q, k, v

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's three projections as one (C -> 3C) matrix product: the same numbers
        as calling q_proj, k_proj and v_proj, with one large multiply instead of three small ones.

        Without gradients the stacked (3C, C) matrix is kept between calls (restacking it
        copied 3C^2 numbers per layer per generated token, a fifth of GPT-2's decoding time on
        a CPU), and a single row (one generated token) uses its (C, 3C) transpose, the layout a
        one-row product reads fastest (:func:`one_row_linear`).
        """
        return self._qkv_product(x).split(self.d_model, dim=-1)  # (..., C) each

    def _qkv_product(self, x: Tensor) -> Tensor:
        """(..., C) -> (..., 3C): queries, keys and values side by side (see :meth:`_project_qkv`)."""
        params = [self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]
        if self.q_proj.bias is not None:
            params += [self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]
        if x.numel() == x.shape[-1] and not (
            torch.is_grad_enabled() and any(p.requires_grad for p in params)
        ):
            w_t, bias = _inference_copy(self, "_qkv_t", params, _stack_transposed)
            row = x.reshape(1, -1)  # (1, C)
            out = row @ w_t if bias is None else torch.addmm(bias, row, w_t)  # (1, 3C)
            return out.view(*x.shape[:-1], 3 * self.d_model)
        weight, bias = _inference_copy(self, "_qkv", params, _stack)  # (3C, C), (3C,) or None
        return F.linear(x, weight, bias)  # (..., 3C)


def _stack(params: list[Tensor]) -> tuple[Tensor, Tensor | None]:
    """[W_q, W_k, W_v, (b_q, b_k, b_v)] -> the (3C, C) stack and the (3C,) bias or None."""
    weight = torch.cat(params[:3])  # (3C, C)
    bias = torch.cat(params[3:]) if len(params) > 3 else None  # (3C,)
    return weight, bias


def _stack_transposed(params: list[Tensor]) -> tuple[Tensor, Tensor | None]:
    """As :func:`_stack`, with the weight as a contiguous (C, 3C) matrix."""
    weight, bias = _stack(params)
    return hugepage_copy(weight.t()), bias
