"""Notebook 03: sinusoidal encodings, the shift matrix, the offset dot product, RoPE."""

from tests.catalogues._source import right, wrong

NAMED_AT_LEAST = 1.0  # every entry named (the floor since the feedback work; see _source.py)

_PE_HEAD = """
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got d_model={d_model}")
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]
"""


def _pe(body: str, comment: str) -> str:
    return f"# {comment}" + _PE_HEAD + body


_ROPE_HEAD = """
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, got D={D}")
"""


def _rope(body: str, comment: str) -> str:
    return f"# {comment}" + _ROPE_HEAD + body


_ROT = """
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    e, o = x[..., 0::2], x[..., 1::2]
    return torch.stack([e * cos - o * sin, e * sin + o * cos], dim=-1).flatten(-2)
"""

_SHIFT_HEAD = """
def shift_matrix(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
"""

MISTAKES = [
    # ---------------------------------------------------------------- sinusoidal_encoding
    wrong(
        "sinusoidal_encoding",
        "swapped",
        _pe(
            """
    a = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.cos(a), torch.sin(a)
    return pe.float()
""",
            "sin and cos swapped",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "sines first",
        _pe(
            """
    a = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(a), torch.cos(a)], dim=-1).float()
""",
            "all sines then all cosines",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "factor of 2",
        _pe(
            """
    a = t * base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
    return pe.float()
""",
            "exponent i/C",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "column index",
        _pe(
            """
    j = torch.arange(d_model, dtype=torch.float64)
    a = t / base ** (j / d_model)
    pe = torch.where(torch.arange(d_model) % 2 == 0, torch.sin(a), torch.cos(a))
    return pe.float()
""",
            "exponent from the column index",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "t * base",
        _pe(
            """
    a = t * base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
    return pe.float()
""",
            "positive exponent",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "start at 1",
        _pe(
            """
    a = (t + 1) * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
    return pe.float()
""",
            "positions from 1",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "base & ignore",
        _pe(
            """
    a = t * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
    return pe.float()
""",
            "base ignored",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "dtype",
        _pe(
            """
    a = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
    return pe
""",
            "returns float64",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "d_model, n_positions",
        _pe(
            """
    a = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(a), torch.cos(a)
    return pe.T.float()
""",
            "transposed",
        ),
    ),
    wrong(
        "sinusoidal_encoding",
        "valueerror",
        """
# no ValueError for an odd width
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]
    a = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(a)
    pe[:, 1::2] = torch.cos(a)[:, : d_model // 2]
    return pe.float()
""",
    ),
    wrong(
        "sinusoidal_encoding",
        "valueerror",
        """
# odd width crashes with a RuntimeError
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    t = torch.arange(n_positions, dtype=torch.float64)[:, None]
    a = t * base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(a)
    pe[:, 1::2] = torch.cos(a)
    return pe.float()
""",
    ),
    # ---------------------------------------------------------------- shift_matrix
    wrong(
        "shift_matrix",
        "transpose",
        "# column-vector form (-sin bottom-left)"
        + _SHIFT_HEAD
        + """
    c, s = torch.cos(k * theta), torch.sin(k * theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(-s), torch.diag(c)
    return m.float()
""",
    ),
    wrong(
        "shift_matrix",
        "exponent",
        """
# exponent i/C
def shift_matrix(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * theta), torch.sin(k * theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(-s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(s), torch.diag(c)
    return m.float()
""",
    ),
    wrong(
        "shift_matrix",
        "pairs",
        "# blocks of halves"
        + _SHIFT_HEAD
        + """
    c, s = torch.diag(torch.cos(k * theta)), torch.diag(torch.sin(k * theta))
    h = d_model // 2
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[:h, :h], m[:h, h:], m[h:, :h], m[h:, h:] = c, -s, s, c
    return m.float()
""",
    ),
    wrong(
        "shift_matrix",
        "base & ignore",
        """
# base ignored
def shift_matrix(k, d_model, base=10000.0):
    theta = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * theta), torch.sin(k * theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(-s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(s), torch.diag(c)
    return m.float()
""",
    ),
    wrong(
        "shift_matrix",
        "dtype",
        "# returns float64"
        + _SHIFT_HEAD
        + """
    c, s = torch.cos(k * theta), torch.sin(k * theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(-s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(s), torch.diag(c)
    return m
""",
    ),
    wrong(
        "shift_matrix",
        "k * theta",
        "# divides by theta"
        + _SHIFT_HEAD
        + """
    c, s = torch.cos(k / theta), torch.sin(k / theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(-s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(s), torch.diag(c)
    return m.float()
""",
    ),
    wrong(
        "shift_matrix",
        "minus",
        "# no minus sign"
        + _SHIFT_HEAD
        + """
    c, s = torch.cos(k * theta), torch.sin(k * theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(s), torch.diag(c)
    return m.float()
""",
    ),
    wrong(
        "shift_matrix",
        "ignore & `k`",
        "# one step, whatever k"
        + _SHIFT_HEAD
        + """
    c, s = torch.cos(theta), torch.sin(theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    m[0::2, 0::2], m[0::2, 1::2] = torch.diag(c), torch.diag(-s)
    m[1::2, 0::2], m[1::2, 1::2] = torch.diag(s), torch.diag(c)
    return m.float()
""",
    ),
    # ---------------------------------------------------------------- offset_dot_product
    wrong(
        "offset_dot_product",
        "twice",
        """
# counts every frequency twice
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return 2 * torch.cos(k.double()[..., None] * theta).sum(-1).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "k[..., none]",
        """
# no trailing dimension on k
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(k.double() * theta).sum(-1).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "sin",
        """
# adds the sines
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    a = k.double()[..., None] * theta
    return (torch.cos(a) + torch.sin(a)).sum(-1).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "mean where a sum",
        """
# mean over the frequencies
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(k.double()[..., None] * theta).mean(-1).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "dtype",
        """
# returns float64
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(k.double()[..., None] * theta).sum(-1)
""",
    ),
    wrong(
        "offset_dot_product",
        "exponent",
        """
# exponent i/C
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(d_model // 2, dtype=torch.float64) / d_model)
    return torch.cos(k.double()[..., None] * theta).sum(-1).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "base & ignore",
        """
# base ignored
def offset_dot_product(k, d_model, base=10000.0):
    theta = 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(k.double()[..., None] * theta).sum(-1).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "frequenc",
        """
# frequencies forgotten
def offset_dot_product(k, d_model, base=10000.0):
    return (d_model // 2 * torch.cos(k.double())).float()
""",
    ),
    wrong(
        "offset_dot_product",
        "shape of k",
        """
# flattens k
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cos(k.double().reshape(-1, 1) * theta).sum(-1).float()
""",
    ),
    # ---------------------------------------------------------------- apply_rope
    wrong(
        "apply_rope",
        "wrong way",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = -torch.arange(T, dtype=torch.float64)[:, None] * theta
"""
            + _ROT,
            "rotated the wrong way",
        ),
    ),
    wrong(
        "apply_rope",
        "start at 1",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(1, T + 1, dtype=torch.float64)[:, None] * theta
"""
            + _ROT,
            "positions from 1",
        ),
    ),
    wrong(
        "apply_rope",
        "exponent",
        _rope(
            """
    theta = base ** (-torch.arange(D // 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
"""
            + _ROT,
            "exponent i/D",
        ),
    ),
    wrong(
        "apply_rope",
        "(i, i + d/2)",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
""",
            "pairs (i, i + D/2)",
        ),
    ),
    wrong(
        "apply_rope",
        "position & axis",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    P = x.shape[-3] if x.dim() > 2 else 1
    ang = torch.arange(P, dtype=torch.float64)[:, None, None] * theta
"""
            + _ROT,
            "positions along the head axis",
        ),
    ),
    wrong(
        "apply_rope",
        "frequenc",
        _rope(
            """
    ang = torch.arange(T, dtype=torch.float64)[:, None] * torch.ones(D // 2, dtype=torch.float64)
"""
            + _ROT,
            "frequency forgotten",
        ),
    ),
    wrong(
        "apply_rope",
        "not rotated & input",
        _rope(
            """
    return x.clone()
""",
            "no rotation",
        ),
    ),
    wrong(
        "apply_rope",
        "nan",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    e, o = x[..., 0::2], x[..., 1::2]
    r = torch.stack([e * cos - o * sin, e * sin + o * cos], dim=-1).flatten(-2)
    return r / (r.norm(dim=-1, keepdim=True) - x.norm(dim=-1, keepdim=True))
""",
            "NaN (0/0)",
        ),
    ),
    wrong(
        "apply_rope",
        "dtype",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    e, o = x[..., 0::2], x[..., 1::2]
    return torch.stack([e * cos - o * sin, e * sin + o * cos], dim=-1).flatten(-2)
""",
            "float64 result",
        ),
    ),
    wrong(
        "apply_rope",
        "valueerror",
        """
# no ValueError for odd D
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    e, o = x[..., 0::2], x[..., 1::2]
    return torch.stack([e * cos - o * sin, e * sin + o * cos], dim=-1).flatten(-2)
""",
    ),
    wrong(
        "apply_rope",
        "in place",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    e, o = x[..., 0::2].clone(), x[..., 1::2].clone()
    x[..., 0::2] = e * cos - o * sin
    x[..., 1::2] = e * sin + o * cos
    return x
""",
            "rotates x in place",
        ),
    ),
    wrong(
        "apply_rope",
        "odd channels",
        _rope(
            """
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    out = x.clone()
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    return out
""",
            "only the even channels rotated",
        ),
    ),
]

CORRECT = [
    right(
        "sinusoidal_encoding",
        """
# exp-log form in float32
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError(f"odd d_model={d_model}")
    pos = torch.arange(n_positions).float().unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(base) / d_model))
    pe = torch.zeros(n_positions, d_model)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe
""",
    ),
    right(
        "sinusoidal_encoding",
        """
# loops
def sinusoidal_encoding(n_positions, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"d_model must be even, received {d_model}")
    pe = torch.zeros(n_positions, d_model)
    for t in range(n_positions):
        for i in range(d_model // 2):
            a = t / base ** (2 * i / d_model)
            pe[t, 2 * i] = math.sin(a)
            pe[t, 2 * i + 1] = math.cos(a)
    return pe
""",
    ),
    right(
        "shift_matrix",
        """
# block by block
def shift_matrix(k, d_model, base=10000.0):
    m = torch.zeros(d_model, d_model)
    for i in range(d_model // 2):
        a = k * base ** (-2 * i / d_model)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    return m
""",
    ),
    right(
        "shift_matrix",
        """
# block_diag
def shift_matrix(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    blocks = [torch.tensor([[math.cos(k * t), -math.sin(k * t)], [math.sin(k * t), math.cos(k * t)]])
              for t in theta.tolist()]
    return torch.block_diag(*blocks).float()
""",
    ),
    right(
        "offset_dot_product",
        """
# float32 throughout
def offset_dot_product(k, d_model, base=10000.0):
    theta = base ** (-torch.arange(0, d_model, 2).float() / d_model)
    return torch.cos(k.unsqueeze(-1).float() * theta).sum(dim=-1)
""",
    ),
    right(
        "offset_dot_product",
        """
# einsum-free loop over frequencies
def offset_dot_product(k, d_model, base=10000.0):
    total = torch.zeros(k.shape, dtype=torch.float64)
    for i in range(d_model // 2):
        total = total + torch.cos(k.double() * base ** (-2 * i / d_model))
    return total.float()
""",
    ),
    right(
        "apply_rope",
        """
# complex numbers
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D={D} is odd")
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    rot = torch.polar(torch.ones(T, D // 2, dtype=torch.float64),
                      torch.arange(T, dtype=torch.float64)[:, None] * theta)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], D // 2, 2).contiguous())
    return torch.view_as_real(z * rot).flatten(-2).to(x.dtype)
""",
    ),
    right(
        "apply_rope",
        """
# rotation matrices, float64 inputs kept float64
def apply_rope(x, base=10000.0):
    T, D = x.shape[-2:]
    if D % 2:
        raise ValueError(f"D must be even, received D={D}")
    theta = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * theta
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    pairs = x.unflatten(-1, (D // 2, 2))
    a, b = pairs[..., 0], pairs[..., 1]
    return torch.stack((a * c - b * s, a * s + b * c), -1).flatten(-2)
""",
    ),
]
