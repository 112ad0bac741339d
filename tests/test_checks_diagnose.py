"""The generic evidence of checks.engine.diagnose, the public checks.diagnose API, and what a student
sees in a real kernel when a check fails."""

from __future__ import annotations

import pytest
import torch

from transformer_lab import checks
from transformer_lab.checks.engine.diagnose import DEFAULT, explain, softmax_zeros

g = torch.Generator().manual_seed(0)
E = torch.randn(2, 3, 4, 5, generator=g)
AXES = ("batch element", "head", "query", "key")


@pytest.mark.parametrize(
    "actual,kwargs,words,named",
    [
        (E.transpose(2, 3).contiguous(), {}, "dims 2 and 3", True),
        (E * 2.0, {"dims": {"D": 4}}, "sqrt(d)", True),
        (E * 5.0, {"dims": {"S": 5}}, "number of keys", True),
        (-E, {}, "sign", True),
        (E * 1.37, {"dims": {"D": 4}}, "constant 1.37", False),
        (torch.cat([E[:1], E[1:] + 1.0]), {"axes": AXES}, "first batch element", True),
        (torch.cat([E[:, :, :1], E[:, :, :-1]], dim=2), {"axes": AXES}, "shifted by one", True),
        (E.flatten()[torch.randperm(E.numel(), generator=g)].reshape(E.shape), {}, "numbers", True),
        (E + torch.where(E.abs() > 1.5, 1.0, 0.0), {}, "differs from the reference", False),
    ],
)
def test_generic_evidence(actual, kwargs, words, named):
    finding = explain(actual, E, **kwargs)
    assert words in finding.message.lower() and finding.named is named, finding


def test_fully_masked_rows_nan_and_uniform():
    scores = torch.randn(3, 4, generator=g)
    mask = torch.tensor([[True, False, True, True], [False] * 4, [True] * 4])
    want = softmax_zeros(scores.masked_fill(~mask, float("-inf")))
    empty = ~mask.any(-1)
    nan = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1)
    assert "nan" in explain(nan, want, masked_rows=empty).message.lower()
    uniform = softmax_zeros(scores.masked_fill(~mask, -1e9))
    assert "-1e9" in explain(uniform, want, masked_rows=empty).message


def test_ignored_argument_found_by_rerun():
    def reference(x, base=10000.0):
        return x / base

    def student(x, base=10000.0):
        return x / 10000.0

    x = torch.randn(4, generator=g)

    def rerun(override):
        kw = {k: v for k, v in {"base": 100.0, **override}.items() if v is not DEFAULT}
        return student(x, **kw), reference(x, **kw)

    finding = explain(
        student(x, 100.0),
        reference(x, 100.0),
        variations=[("base", {"base": DEFAULT})],
        rerun=rerun,
    )
    assert "ignores `base`" in finding.message and finding.named


def _good_softmax(x, dim=-1):
    return softmax_zeros(x, dim)


def test_diagnose_api_passes_fails_and_never_raises():
    assert checks.diagnose("softmax", _good_softmax) is None
    d = checks.diagnose("softmax", lambda x, dim=-1: torch.exp(x) / torch.exp(x).sum(dim, True))
    assert d.named and "overflow" in d.message and d.student is not None and d.reference is not None
    broken = checks.diagnose("softmax", lambda x, dim=-1: 1 / 0)
    assert broken is not None and "ZeroDivisionError" in broken.message
    x = torch.randn(3, 4, generator=g)
    custom = checks.diagnose("softmax", lambda x, dim=-1: x, case=(x,))
    assert torch.equal(custom.student, x) and torch.allclose(custom.reference, x.softmax(-1))
    assert (
        checks.diagnose("softmax", _good_softmax, case={"args": (x,), "kwargs": {"dim": 0}}) is None
    )
    assert set(checks.EXERCISES) >= {"softmax", "apply_rope", "pad_and_truncate", "future_leaks"}


def test_check_failed_is_an_assertion_error_with_one_line():
    with pytest.raises(AssertionError) as info:
        checks.check_softmax(lambda x, dim=-1: x * 0)
    assert isinstance(info.value, checks.CheckFailed) and "\n" not in str(info.value)
    rendered = info.value._render_traceback_()
    assert rendered[-1].endswith(str(info.value)) and not any("_core.py" in r for r in rendered)


def test_numpy_result_is_called_a_numpy_array():
    with pytest.raises(checks.CheckFailed, match="numpy array"):
        checks.check_causal_mask(
            lambda T: __import__("numpy").tril(__import__("numpy").ones((T, T)))
        )


def test_a_real_kernel_shows_the_students_line_and_the_message():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import torch\nfrom transformer_lab import checks\n"
            "def softmax(x, dim=-1):\n    return torch.exp(x) / torch.exp(x).sum(dim, keepdim=True)"
        ),
        nbformat.v4.new_code_cell("x = 1\nchecks.check_softmax(softmax)"),
    ]
    nbclient.NotebookClient(
        nb, allow_errors=True, timeout=120, shutdown_kernel="immediate"
    ).execute()
    error = nb.cells[1].outputs[0]
    assert error.ename == "CheckFailed"
    text = "\n".join(error.traceback)
    assert "checks.check_softmax(softmax)" in text and "overflow" in text
    assert "_core.py" not in text and "Runner" not in text and len(error.traceback) == 2
