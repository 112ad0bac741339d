"""Notebook 01, the wide catalogue (issue 39): mistakes a student makes reading the notebook's
text, written without looking at what the checks detect (self-attention's softmax, scaled
dot-product attention, projections and cost). Measured by ``python -m tests.holdout report 01``;
figures in the module's NAMED_AT_LEAST and in the commit that changed them."""

from tests.catalogues._source import wrong

# Before the fixes of issue 39: 18/1/2/0 named/generic/misleading/passed; after: 20 of 21 named, 1 generic.
# h16: softmax divided by the sum of the raw inputs named: 21 of 21.
NAMED_AT_LEAST = 1.0

MISTAKES = [
    wrong(
        "softmax",
        "sum|normalis",
        """
# exponentials never normalised
def softmax(x, dim=-1):
    return torch.exp(x - x.amax(dim=dim, keepdim=True))
""",
    ),
    wrong(
        "softmax",
        "in place",
        """
# exp_ on the input itself
def softmax(x, dim=-1):
    x.sub_(x.amax(dim=dim, keepdim=True)).exp_()
    return x / x.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "maximum|max",
        """
# max over dim 0 subtracted, sums over dim
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=0, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "dtype|float64",
        """
# float64 result
def softmax(x, dim=-1):
    x = x.double()
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "overflow|maximum|max",
        """
# mean subtracted instead of the maximum
def softmax(x, dim=-1):
    e = torch.exp(x - x.mean(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "softmax",
        "raw inputs|exponentials",
        """
# normalised by the sum of the inputs
def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / x.sum(dim=dim, keepdim=True)
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "after the softmax|sum to 1",
        """
# scaled after the softmax
def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-1) / math.sqrt(q.shape[-1])
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "mask",
        """
# mask multiplied into the scores
def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s * mask
    w = softmax(s, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "1/d|twice|scale|sqrt",
        """
# both q and k scaled by 1/sqrt(D)
def scaled_dot_product_attention(q, k, v, mask=None):
    d = math.sqrt(q.shape[-1])
    s = (q / d) @ (k / d).transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "mask",
        """
# mask transposed
def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask.transpose(-2, -1), float("-inf"))
    w = softmax(s, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "weights",
        """
# weights returned before masking
def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w0 = softmax(s, dim=-1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-1)
    return w @ v, w0
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "dtype|float64",
        """
# float64 throughout
def scaled_dot_product_attention(q, k, v, mask=None):
    q, k, v = q.double(), k.double(), v.double()
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "scaled_dot_product_attention",
        "in place",
        """
# q scaled in place
def scaled_dot_product_attention(q, k, v, mask=None):
    q /= math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = softmax(s, dim=-1)
    return w @ v, w
""",
    ),
    wrong(
        "self_attention",
        "w_k|w_v|keys|values",
        """
# keys and values projections swapped
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_v, x @ w_k
    return scaled_dot_product_attention(q, k, v)
""",
    ),
    wrong(
        "self_attention",
        "w_v|values",
        """
# values projected with w_k
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_k
    return scaled_dot_product_attention(q, k, v)
""",
    ),
    wrong(
        "self_attention",
        "transpos",
        """
# weights returned transposed
def self_attention(x, w_q, w_k, w_v):
    out, w = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    return out, w.transpose(-2, -1)
""",
    ),
    wrong(
        "self_attention",
        "after the softmax|sum to 1|scale",
        """
# scores scaled after the softmax
def self_attention(x, w_q, w_k, w_v):
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    w = softmax(q @ k.transpose(-2, -1), dim=-1) / math.sqrt(q.shape[-1])
    return w @ v, w
""",
    ),
    wrong(
        "self_attention",
        "queries|keys|swapped",
        """
# q from w_k and k from w_q
def self_attention(x, w_q, w_k, w_v):
    return scaled_dot_product_attention(x @ w_k, x @ w_q, x @ w_v)
""",
    ),
    wrong(
        "self_attention_macs",
        "value|projection|three",
        """
# two projections counted
def self_attention_macs(T, C, D):
    return 2 * T * C * D + 2 * T * T * D
""",
    ),
    wrong(
        "self_attention_macs",
        "softmax",
        """
# softmax's exponentials counted too
def self_attention_macs(T, C, D):
    return 3 * T * C * D + 2 * T * T * D + T * T
""",
    ),
    wrong(
        "self_attention_macs",
        "T x T|T*T|scores",
        """
# scores counted over C
def self_attention_macs(T, C, D):
    return 3 * T * C * D + T * T * C + T * T * D
""",
    ),
]
