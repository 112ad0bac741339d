"""A sealed working folder, bounded outputs and a CPU share of its own (issue 22, items 4-6).

Unit level: copying a submission never follows a symlink or opens a FIFO; a notebook that is a
symlink is not graded; outputs of every MIME type are bounded per cell and per notebook. Sandbox
level (bubblewrap, as ``tlab grade`` starts a kernel): the working folder is a size-limited tmpfs
(300 MB written to it stop at its size and nothing lands on the host), fontconfig finds its
configuration, the kernel's cgroup has the CPU share we asked for and torch as many threads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from nbformat import NotebookNode

from transformer_lab.grading.preflight.integrity import fingerprint, preflight
from transformer_lab.grading.preflight.nofollow import copy_without_links
from transformer_lab.grading.run import bwrap, cpushare, sandbox
from transformer_lab.grading.run.outputs import (
    CELL_BYTES,
    NOTEBOOK_BYTES,
    bound_outputs,
    output_bytes,
)

REPO = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
SECRET = "TOP-SECRET-6d1f0c"  # the content of a mode-600 file outside the course


def _submission_with_traps(tmp_path: Path) -> tuple[Path, Path]:
    """A submission folder with a data file, a helper folder, and every kind of trap."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "answer.py").write_text("SOLUTION = 42")
    sub = tmp_path / "submitted" / "s1" / "A"
    sub.mkdir(parents=True)
    (sub / "data.csv").write_text("1,2,3")
    (sub / "helpers").mkdir()
    (sub / "helpers" / "util.py").write_text("X = 1")
    (sub / "secret_link.txt").symlink_to(secret)
    (sub / "helpers" / "deep_link.txt").symlink_to(secret)
    (sub / "solutions_link").symlink_to(solutions, target_is_directory=True)
    os.mkfifo(sub / "pipe.txt")
    return sub, secret


def test_copy_never_follows_a_symlink_nor_opens_a_fifo(tmp_path):
    sub, _ = _submission_with_traps(tmp_path)
    dest = tmp_path / "staging"
    dest.mkdir()
    notes = copy_without_links(sub, dest)
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert copied == ["data.csv", "helpers", "helpers/util.py"]
    assert all(not p.is_symlink() for p in dest.rglob("*"))
    joined = "\n".join(notes)
    for name in ("secret_link.txt", "helpers/deep_link.txt", "solutions_link", "pipe.txt"):
        assert name in joined
    assert "a FIFO" in joined and "a symbolic link" in joined
    assert SECRET not in joined  # the notes name the link, never what it points to
    # fingerprint() must not block on the FIFO nor read through the links either
    assert len(fingerprint(sub)) == 16


def _released(tmp_path: Path) -> dict:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("x = 1"))
    return {"A": nb}


def test_a_notebook_that_is_a_symlink_is_not_graded(tmp_path):
    sub, _ = _submission_with_traps(tmp_path)
    target = tmp_path / "solutions" / "A.ipynb"
    nbformat.write(_released(tmp_path)["A"], target)
    (sub / "A.ipynb").symlink_to(target)
    result = preflight("s1", sub, _released(tmp_path), tmp_path / "staging")
    assert not result.ok and "A.ipynb is a symbolic link" in result.reason
    assert not (tmp_path / "staging").exists() or not any((tmp_path / "staging").iterdir())


def test_preflight_stages_a_submission_without_its_links(tmp_path):
    sub, _ = _submission_with_traps(tmp_path)
    nbformat.write(_released(tmp_path)["A"], sub / "A.ipynb")
    staging = tmp_path / "staging"
    result = preflight("s1", sub, _released(tmp_path), staging)
    assert result.ok, result.reason
    assert sorted(p.name for p in staging.iterdir()) == ["A.ipynb", "data.csv", "helpers"]
    assert any("secret_link.txt not copied" in n for n in result.notes)
    assert any("pipe.txt not copied: it is a FIFO" in n for n in result.notes)
    for path in staging.rglob("*"):
        assert path.is_dir() or SECRET not in path.read_text()


# -- outputs --------------------------------------------------------------------------------------


def _image_output(nbytes: int) -> NotebookNode:
    return nbformat.v4.new_output(
        "display_data",
        data={"image/png": "A" * nbytes, "text/plain": "<Figure>"},
    )


def test_four_huge_images_are_bounded_per_cell_and_per_notebook():
    nb = nbformat.v4.new_notebook()
    for _ in range(15):
        cell = nbformat.v4.new_code_cell("show()")
        cell.outputs = [_image_output(48 << 20) for _ in range(4)]
        cell.outputs.append(nbformat.v4.new_output("error", ename="E", evalue="v" * 10**6))
        nb.cells.append(cell)
        bound_outputs(cell, nb)
        kept = sum(output_bytes(o) for o in cell.outputs)
        assert kept <= CELL_BYTES + 25_000  # + the error (never dropped) and the note
        assert cell.outputs[-2].output_type == "error"  # the error stays, shortened
        assert "not kept by the grader" in cell.outputs[-1].text
    total = sum(output_bytes(o) for c in nb.cells for o in c.outputs)
    assert total <= NOTEBOOK_BYTES + 15 * 25_000
    assert len(nbformat.writes(nb)) < 3_000_000


def test_small_outputs_of_every_type_are_kept_and_big_ones_of_every_type_dropped():
    cell = nbformat.v4.new_code_cell("x")
    small = {
        "text/html": "<b>hi</b>",
        "application/json": {"a": 1},
        "image/svg+xml": "<svg></svg>",
        "application/x-custom": "c",
    }
    cell.outputs = [nbformat.v4.new_output("display_data", data=dict(small))]
    bound_outputs(cell)
    assert set(cell.outputs[0].data) == set(small)
    big = {k: "x" * (CELL_BYTES + 1) for k in ("text/html", "image/svg+xml", "application/x-c")}
    cell.outputs = [nbformat.v4.new_output("display_data", data={**big, "text/plain": "ok"})]
    cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text="y" * 10**6))
    bound_outputs(cell, text_chars=1000)
    assert cell.outputs[0].data == {"text/plain": "ok"}
    assert len(cell.outputs[1].text) == 1000 - len("ok")  # one text budget per cell
    assert "not kept by the grader" in cell.outputs[-1].text


# -- the sandbox ----------------------------------------------------------------------------------


def _run_in_sandbox(code: str, cpus: float | None = None, seed_files=None):
    """Run ``code`` as a graded kernel would run; returns (completed process, share or None)."""
    uid = bwrap.new_uid() if os.geteuid() == 0 else bwrap.NOBODY
    seed = sandbox._private_dir("tlab-test-seed-", uid)
    ipc = sandbox._private_dir("tlab-test-ipc-", uid)
    for name, text in (seed_files or {}).items():
        (seed / name).write_text(text)
    share = cpushare.CpuShare.create(f"test-{uid}", cpus) if cpus else None
    limits = bwrap.SandboxLimits(cpus=cpus)
    cmd = bwrap.sandbox_command(
        [sys.executable, "-c", code],
        course_root=REPO,
        ipc_dir=ipc,
        seed=seed,
        limits=limits,
        uid=uid,
        cgroup_procs=share.procs if share else None,
    )
    env = bwrap.sandbox_env(dict(os.environ), limits.cpu_share())
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        return proc, share, (seed, ipc)
    except BaseException:
        shutil.rmtree(seed, ignore_errors=True)
        shutil.rmtree(ipc, ignore_errors=True)
        raise


def _finish(proc, share, folders, timeout=180):
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
        if share is not None:
            share.remove()
    return out, err


def _host_usage(folders) -> int:
    return sum(p.stat().st_size for f in folders for p in Path(f).rglob("*") if p.is_file())


FILL_CWD = r"""
import json, os
written = 0
try:
    for i in range(10):  # 300 MB in 30 MB files (each under the 64 MB file-size limit)
        with open(f"fill{i}.bin", "wb") as fh:
            for _ in range(30):
                fh.write(b"x" * (1 << 20))
                written += 1
except OSError as exc:
    print(json.dumps({"written_mb": written, "error": exc.errno, "cwd": os.getcwd(),
                      "seed": open("data.txt").read()}))
"""


@needs_bwrap
def test_a_kernel_filling_its_working_folder_stops_at_the_tmpfs_size(tmp_path):
    host_tmp = Path(tempfile.gettempdir())
    before = {p.name for p in host_tmp.iterdir()}
    proc, share, folders = _run_in_sandbox(FILL_CWD, seed_files={"data.txt": "seed"})
    out, err = _finish(proc, share, folders)
    try:
        result = json.loads(out.strip().splitlines()[-1])
        work_mb = bwrap.SandboxLimits().work_mb
        assert result["error"] == 28 and result["written_mb"] <= work_mb  # ENOSPC
        assert result["cwd"] == "/home/student" and result["seed"] == "seed"
        assert _host_usage(folders) < 1 << 20  # the seed's 4 bytes, the sockets: nothing else
        for name in {p.name for p in host_tmp.iterdir()} - before:
            assert not list((host_tmp / name).rglob("fill*.bin"))
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


FONTS = r"""
import matplotlib
matplotlib.use("Agg")
from matplotlib import font_manager
import matplotlib.pyplot as plt
fonts = font_manager.findSystemFonts()  # runs fc-list, as the kernel's user
plt.plot([1, 2]); plt.savefig("plot.png")
print(len(fonts))
"""


@needs_bwrap
def test_fontconfig_finds_its_configuration_inside_the_sandbox(tmp_path):
    proc, share, folders = _run_in_sandbox(FONTS)
    out, err = _finish(proc, share, folders)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    assert proc.returncode == 0, err
    assert "Fontconfig error" not in err and "Fontconfig error" not in out
    assert int(out.strip().splitlines()[-1]) > 0


THREADS = r"""
import os, time, torch
print(os.environ["OMP_NUM_THREADS"], torch.get_num_threads(), flush=True)
time.sleep(3)
"""


@needs_bwrap
@pytest.mark.skipif(
    cpushare.cpu_share_backend() is None, reason="no writable cgroup cpu controller"
)
def test_each_kernel_gets_its_cpu_share_and_as_many_threads(tmp_path):
    proc, share, folders = _run_in_sandbox(THREADS, cpus=1.0)
    try:
        assert share is not None and share.quota() == pytest.approx(1.0)  # read back
        deadline = time.monotonic() + 60
        members: list[str] = []
        while time.monotonic() < deadline and proc.poll() is None:
            members = share.procs.read_text().split()
            if members:
                break
            time.sleep(0.05)
        assert proc.pid in map(int, members)  # bwrap joined the group before starting
        out, err = _finish(proc, share, folders)
        assert out.split()[:2] == ["1", "1"], err  # OMP_NUM_THREADS and torch's threads
        assert not share.path.exists()  # removed once its processes were gone
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.needs_bwrap  # sandbox_command looks bubblewrap up
def test_without_a_writable_cgroup_there_is_no_share_and_no_error(monkeypatch, tmp_path):
    monkeypatch.setattr(cpushare, "ROOT", tmp_path)  # an empty /sys/fs/cgroup
    assert cpushare.cpu_share_backend() is None
    assert cpushare.CpuShare.create("kernel-x", 1.0) is None
    cmd = bwrap.sandbox_command(["python"], course_root=REPO, ipc_dir=tmp_path, cgroup_procs=None)
    assert cmd[0].endswith("bwrap")  # started directly, no cgroup step


def test_starved_dead_and_undecided_submissions_are_graded_again():
    # issue 41: a busy machine can use up a limit (the kernel's clock says so: "starved"),
    # kill a kernel or leave a request unanswered; such a submission is graded once more. A
    # cell stopped on the kernel's own clock is the submission's time: not graded again.
    from transformer_lab.grading.record.outcome import grade_again

    assert not grade_again({"success": True, "timeouts": 2, "starved": 0})
    assert grade_again({"success": True, "timeouts": 2, "starved": 1})
    assert not grade_again({"success": True, "timeouts": 0})
    assert grade_again({"success": False, "error": "the grading process stopped responding on x"})
    assert grade_again({"success": False, "autograde": {"error": "DeadKernelError"}})
    undecided = "softmax_tests: undecided: check_softmax: the graded kernel could not answer"
    assert grade_again({"success": True, "timeouts": 0, "flags": [undecided]})
    assert not grade_again({"success": True, "flags": ["code: runs generated code"]})
    assert not grade_again({"success": False, "error": "nbgrader failed: ValueError: x"})
    assert not grade_again(None)


def test_an_undecided_cell_makes_the_row_not_graded_never_zero():
    from transformer_lab.grading.record.outcome import student_result
    from transformer_lab.grading.record.report import NOT_GRADED

    event = {
        "success": True,
        "flags": ["softmax_tests: undecided: check_softmax: the graded kernel could not answer"],
    }
    row = student_result("s1", event, {"score": 0, "max_score": 10}, 10, "f", None, 30)
    assert row.status == NOT_GRADED and row.score is None and "could not decide" in row.reason


def test_a_forked_kernel_is_named_as_the_reason():
    from transformer_lab.grading.record.outcome import classify_failure

    event = {"success": False, "autograde": {"error": "ValueError: Invalid Signature: b'6264'"}}
    assert "os.fork or a fork bomb" in classify_failure(event)


def test_the_share_is_the_machine_divided_by_the_lanes(monkeypatch):
    monkeypatch.setenv("TLAB_SANDBOX_CPUS", "1")
    assert bwrap.SandboxLimits().cpu_share() == 1.0
    assert bwrap.sandbox_env({}, 1.0)["OMP_NUM_THREADS"] == "1"
    # the grader's thread decision (transformer_lab.threads), never above the share
    assert bwrap.sandbox_env({"TLAB_SANDBOX_THREADS": "1"}, 2.0)["OMP_NUM_THREADS"] == "1"
    assert bwrap.sandbox_env({"TLAB_SANDBOX_THREADS": "4"}, 2.0)["MKL_NUM_THREADS"] == "2"


def test_each_kernel_runs_the_course_threads_within_its_share(monkeypatch):
    """One thread per kernel unless TLAB_THREADS asks for more; lanes share the usable CPUs."""
    from transformer_lab.threads import decide_threads

    monkeypatch.delenv("TLAB_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert decide_threads(cpus=2) == 1
    monkeypatch.setenv("TLAB_THREADS", "2")
    assert decide_threads(cpus=2) == 2 and decide_threads(cpus=1) == 1
    assert bwrap.SandboxLimits(cpus=1000).cpu_share() == float(os.cpu_count())


# -- through `tlab grade --jobs 2` -----------------------------------------------------------------

A = "fx_attention"
HANG = "def scaled_dot_product_attention(q, k, v, mask=None):\n    while True:\n        pass"
BIG_IMAGES = (
    "from IPython.display import display\n"
    "blob = 'iVBORw0KGgo' + 'A' * (8 << 20)\n"
    "for _ in range(4):\n"
    "    display({'image/png': blob, 'text/plain': '<big image>'}, raw=True)\n"
)
FILL_DISK = (
    "import os, sys\n"
    "try:\n"
    "    for i in range(10):\n"
    "        open(f'fill{i}.bin', 'wb').write(b'x' * (30 << 20))\n"
    "except OSError as exc:\n"
    "    print('disk full at file', i, exc.errno)\n"
    "sockets = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])  # the one host folder\n"
    "try:\n"
    "    open(os.path.join(sockets, 'fill.bin'), 'wb').write(b'x' * (1 << 20))\n"
    "    print('socket folder written')\n"
    "except OSError as exc:\n"
    "    print('socket folder refused', exc.errno)\n"
)


def _course(root: Path) -> None:
    from transformer_lab import cli

    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(Path(__file__).parent / "fixtures" / "course" / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0


def _submit(root: Path, student: str, answers: dict[str, str], extra: str = "") -> Path:
    import datetime

    solution = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4)
    nb = nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("_impl"):
            src = next(
                c for c in solution.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid
            )
            lines = [ln for ln in src.source.splitlines() if "SOLUTION" not in ln]
            cell.source = answers.get(gid, "\n".join(lines))
    if extra:
        nb.cells.append(nbformat.v4.new_code_cell(extra))
    folder = root / "submitted" / student / A
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{A}.ipynb")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    (folder / "timestamp.txt").write_text(stamp)
    return folder


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bwrap):
    from transformer_lab.grading.autograde import GradeOptions, grade

    base = tmp_path_factory.mktemp("isolation")
    root = base / "course"
    root.mkdir()
    _course(root)
    secret = base / "secret.txt"  # outside the course, readable by root only
    secret.write_text(SECRET)
    secret.chmod(0o600)
    links = _submit(root, "links", {})
    (links / "secret.txt").symlink_to(secret)
    (links / "solutions").symlink_to(root / "solutions", target_is_directory=True)
    os.mkfifo(links / "pipe")
    nb_link = _submit(root, "nb_link", {})
    (nb_link / f"{A}.ipynb").unlink()
    (nb_link / f"{A}.ipynb").symlink_to(root / "solutions" / A / f"{A}.ipynb")
    _submit(root, "big_images", {}, BIG_IMAGES)
    _submit(root, "disk_filler", {}, FILL_DISK)
    _submit(root, "hanging", {"attention_impl": HANG})
    report = grade(root, A, GradeOptions(timeout=6, budget=6.0, quiet=True, jobs=2))
    return root, report


def _everything_written(root: Path) -> list[Path]:
    folders = [root / ".tlab" / "staging", root / "autograded", root / "feedback"]
    return [p for f in folders if f.exists() for p in f.rglob("*")]


def test_links_and_fifos_are_reported_and_never_followed(graded):
    root, report = graded
    links = report.students["links"]
    assert links.score == 6, (links.status, links.reason)
    notes = "; ".join(links.notes)
    assert "secret.txt not copied" in notes and "solutions not copied" in notes
    assert "pipe not copied: it is a FIFO" in notes
    nb_link = report.students["nb_link"]
    assert nb_link.status == "not_graded" and "symbolic link" in nb_link.reason
    written = _everything_written(root)
    assert written and not any(p.is_symlink() for p in written)
    hidden = "BEGIN HIDDEN TESTS"  # in solutions/ only; feedback and autograded strip it
    for path in written:
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            assert SECRET not in text, path
            assert path.name != "secret.txt" and "solutions" not in path.relative_to(root).parts
            assert hidden not in text or path.suffix == ".ipynb", path


def test_huge_image_outputs_are_bounded(graded):
    root, report = graded
    assert report.students["big_images"].score == 6
    autograded = root / "autograded" / "big_images" / A / f"{A}.ipynb"
    feedback = root / "feedback" / "big_images" / A / f"{A}.html"
    # 4 x 8 MB images were displayed; the notebook budget is 2 MB, the template ~0.3 MB.
    assert autograded.stat().st_size < NOTEBOOK_BYTES + 500_000
    assert feedback.stat().st_size < NOTEBOOK_BYTES + 800_000
    assert "not kept by the grader" in autograded.read_text()


def test_a_kernel_filling_its_disk_costs_nobody_anything(graded):
    root, report = graded
    assert report.students["disk_filler"].score == 6
    out = (root / "autograded" / "disk_filler" / A / f"{A}.ipynb").read_text()
    assert "disk full at file" in out and "28" in out  # ENOSPC inside its own tmpfs
    if os.geteuid() == 0:  # the socket folder was taken back before the first cell ran
        assert "socket folder refused 13" in out  # EACCES
    assert not [p for p in root.rglob("fill*.bin")]


def test_a_timeout_is_marked_for_review(graded):
    _, report = graded
    hanging = report.students["hanging"]
    assert hanging.score == 3 and hanging.status == "needs_review"
    assert hanging.timeouts >= 1
    assert "flag(s): timeout: 1 cell(s) stopped at the 6 s time limit" in hanging.reason
    # The report's summary and the run's summary count the same submissions as needing review.
    from transformer_lab.grading.run.parallel import run_summary

    n_review = sum(r.status == "needs_review" for r in report.students.values())
    assert f"({n_review} of the graded need review)" in report.summary()
    assert f"({n_review} of the graded need review)" in run_summary(report, 1.0, jobs=2)
