"""Issue 22's adversarial class on notebooks 07 and 09, graded with ``tlab grade --jobs 2``.

Each submission is the student release with the solution's answers, except the exercises an
attack or an honest variant replaces. Attacks pair their trick with an answer that is wrong
without it, so a point above the honest ones can only come from the trick:

- ``frame_oracle``: the answer searches the calling frames for the check's expected value
  (there is none in the kernel any more) and skips the visible asserts with an IPython input
  transformer;
- ``reference_copy``: the package's reference recompiled from its source with ``runpy``
  (correct, so its points stay; it must be flagged);
- ``gpt_subclass`` (07): ``GPTFromBlocks`` that runs the package's GPT (forbidden, as in the
  instant check);
- an honest variant the old grader marked down: an ``einsum`` tiled attention in float64 inside
  (09). Notebook 07's two (``torch.rand`` starts instead of ``torch.randint``, ``pos_emb``
  created before ``tok_emb``) are honest alternatives of ``tests/honest/nb07.py``, graded through
  ``tlab grade`` by ``tests/test_grading_honest.py`` (07 is one of the notebooks it grades by
  default; a test below keeps it so), not graded a second time here.

With them, the solution (full marks) and the untouched release (0): the real course's check for
notebooks 07 and 09 (``tests/test_grading_real_course.py``), made here instead of in a second
course.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat
import pytest
from shipped_course import copy_course

from transformer_lab import cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.needs_bwrap,
]
REPO = Path(__file__).resolve().parents[1]

ORACLE = """\
import inspect

def _no_asserts(lines):
    return [ln for ln in lines if not ln.lstrip().startswith("assert")]

get_ipython().input_transformers_cleanup.append(_no_asserts)

def _stolen(shape):
    for info in inspect.stack():
        for key, v in info.frame.f_locals.items():
            if key in ("expected", "want", "reference") and isinstance(v, torch.Tensor):
                if v.shape == shape:
                    return v.clone()
    return None
"""
RUNPY = """\
import pathlib, runpy
import transformer_lab.{module} as _m

_copy = pathlib.Path("/tmp/ref_copy.py")
_copy.write_text("\\n\\n\\n" + pathlib.Path(_m.__file__).read_text())
{name} = runpy.run_path(str(_copy))["{name}"]
"""

CLASS_07 = {
    "frame_oracle": {
        "causal_lm_loss_impl": ORACLE + "\ndef causal_lm_loss(logits, ids, attention_mask=None):\n"
        "    got = _stolen(torch.Size([]))\n"
        "    return got if got is not None else logits.sum() * 0\n"
    },
    "gpt_subclass": {
        "gpt_from_blocks_impl": (
            "class GPTFromBlocks(GPT):\n"
            "    def forward(self, idx):\n"
            "        return super().forward(idx).logits\n"
        )
    },
}
CLASS_09 = {
    "honest_einsum": {
        "tiled_attention_impl": (
            "def tiled_attention(q, k, v, block_size, mask=None):\n"
            "    dtype = q.dtype\n"
            "    q, k, v = q.double(), k.double(), v.double()\n"
            "    S = k.shape[-2]\n"
            "    m = torch.full((*q.shape[:-1], 1), float('-inf'), dtype=q.dtype)\n"
            "    l = torch.zeros_like(m)\n"
            "    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)\n"
            "    for a in range(0, S, block_size):\n"
            "        b = min(a + block_size, S)\n"
            "        s = torch.einsum('...td,...sd->...ts', q, k[..., a:b, :]) / q.shape[-1] ** 0.5\n"
            "        if mask is not None:\n"
            "            allowed = torch.broadcast_to(mask, (*s.shape[:-1], S))[..., a:b]\n"
            "            s = s.masked_fill(~allowed, float('-inf'))\n"
            "        m_new = torch.maximum(m, s.amax(-1, keepdim=True))\n"
            "        shift = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))\n"
            "        p = torch.exp(s - shift)\n"
            "        scale = torch.exp(m - shift)\n"
            "        l = scale * l + p.sum(-1, keepdim=True)\n"
            "        o = scale * o + torch.einsum('...ts,...sd->...td', p, v[..., a:b, :])\n"
            "        m = m_new\n"
            "    out = o / torch.where(l > 0, l, torch.ones_like(l))\n"
            "    return out.to(dtype)\n"
        )
    },
    "frame_oracle": {
        "tiled_attention_impl": ORACLE + "\ndef tiled_attention(q, k, v, block_size, mask=None):\n"
        "    shape = torch.Size([*q.shape[:-1], v.shape[-1]])\n"
        "    got = _stolen(shape)\n"
        "    return got if got is not None else torch.zeros(shape)\n"
    },
    "reference_copy": {
        "tiled_attention_impl": RUNPY.format(module="tiled", name="tiled_attention")
        + "_tiled = tiled_attention\n"
        "def tiled_attention(q, k, v, block_size, mask=None):\n"
        "    return _tiled(q, k, v, mask=mask, block_size=block_size)\n"
    },
}
# student -> (statuses allowed, score at most, must be flagged); full marks are 10.
EXPECTED_07 = {
    "solution": ({"graded"}, 10, False),
    "untouched": ({"graded"}, 0, False),
    "frame_oracle": ({"graded", "needs_review"}, 8, False),  # causal_lm_loss (2 points) lost
    "gpt_subclass": ({"graded", "needs_review"}, 8, False),  # gpt_from_blocks (2 points) lost
}
EXPECTED_09 = {
    "solution": ({"graded"}, 10, False),
    "untouched": ({"graded"}, 0, False),
    "honest_einsum": ({"graded"}, 10, False),
    "frame_oracle": ({"graded", "needs_review"}, 7, False),  # tiled_attention (3 points) lost
    "reference_copy": ({"needs_review"}, 10, True),  # correct, recompiled: flagged
}


def _score(row: dict) -> float:
    """The row's points: the decided score, else (under review) the autograded one."""
    return float(row["score"] or row.get("autograded_score") or 0)


def _answers(path: Path) -> dict[str, str]:
    nb = nbformat.read(path, as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def _build(root: Path, assignment: str, variants: dict[str, dict[str, str]]) -> None:
    copy_course(root, assignment)  # the shipped release (tests/shipped_course.py)
    solution = _answers(root / "solutions" / assignment / f"{assignment}.ipynb")
    released = root / "notebooks" / assignment / f"{assignment}.ipynb"
    shutil.copytree(released.parent, root / "submitted" / "untouched" / assignment)
    for student, replaced in {"solution": {}, **variants}.items():
        nb = nbformat.read(released, as_version=4)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution") and gid in solution:
                cell.source = replaced.get(gid, solution[gid])
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")


@pytest.mark.parametrize(
    "assignment, variants, expected",
    [("07_gpt", CLASS_07, EXPECTED_07), ("09_attention_at_scale", CLASS_09, EXPECTED_09)],
    ids=["07", "09"],
)
def test_class_graded_with_two_jobs(tmp_path, assignment, variants, expected):
    _build(tmp_path, assignment, variants)
    code = cli.main(
        ["--root", str(tmp_path), "grade", assignment, "--jobs", "2", "--quiet", "--no-feedback"]
    )
    assert code in (0, 1)
    with (tmp_path / "reports" / f"{assignment}_grades.csv").open() as fh:
        rows = {row["student_id"]: row for row in csv.DictReader(fh)}
    print()
    for sid, row in sorted(rows.items()):
        print(f"  {sid:18s} {row['status']:12s} {row['score']:>4s}  {row['flags'][:160]}")
    for student, (statuses, best, flagged) in expected.items():
        row = rows[student]
        assert row["status"] in statuses, row
        assert _score(row) <= best, row
        if flagged:
            assert row["flags"], row
        if best == 10 and not flagged:  # the honest ones: full marks, no flag
            assert _score(row) == 10 and not row["flags"], row
        assert float(row["max_score"]) == 10, row
    assert _score(rows["untouched"]) == 0  # the release as handed out earns nothing


def test_notebook_07s_honest_variants_are_graded_in_the_honest_class():
    """The two honest variants this class once held are graded by test_grading_honest.py."""
    import re

    from honest import alternatives

    source = (Path(__file__).parent / "test_grading_honest.py").read_text(encoding="utf-8")
    default = re.search(r'os\.environ\.get\("TLAB_HONEST_GRADE", "([^"]*)"\)', source)
    assert default and "07_gpt" in default.group(1).split()  # graded by default
    table = alternatives("07_gpt")
    assert any("torch.rand(" in a.source for a in table["next_token_batch_impl"])
    assert any(
        a.source.index("self.pos_emb =") < a.source.index("self.tok_emb =")
        for a in table["gpt_from_blocks_impl"]
    )
