"""The grading sandbox and the code scan, without nbgrader.

The sandbox test starts Python exactly as ``tlab grade`` starts a kernel (bwrap + setpriv +
prlimit) with this repository as the course, and checks from inside what it can see and do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from transformer_lab.grading.preflight.repair import match_by_content
from transformer_lab.grading.scan import flags as review

REPO = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, os, socket, sys
out = {"uid": os.getuid(), "home": os.environ.get("HOME"), "env": sorted(os.environ)}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except Exception as exc:
        out[name] = type(exc).__name__
repo = sys.argv[1]
attempt("list_solutions", lambda: os.listdir(os.path.join(repo, "solutions")))
attempt("list_repo", lambda: out.__setitem__("repo_view", sorted(os.listdir(repo))))
attempt("home_view", lambda: out.__setitem__("root_view", sorted(os.listdir("/root"))))
attempt("write_package", lambda: open(os.path.join(repo, "transformer_lab", "x.py"), "w"))
attempt("write_tmp", lambda: open("/tmp/x", "w").write("x"))
attempt("write_home", lambda: open("x", "w").write("x"))
attempt("read_seed", lambda: out.__setitem__("seeded", open("data.txt").read()))
attempt("network", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2))
attempt("import_package", lambda: __import__("transformer_lab.checks"))
attempt("big_file", lambda: open("/tmp/big", "wb").write(b"x" * (80 << 20)))
attempt("big_memory", lambda: bytearray(6 << 30))
print(json.dumps(out))
"""


@pytest.mark.needs_bwrap
def test_the_sandbox_sees_only_python_and_its_own_folders(tmp_path):
    import socket

    from transformer_lab.grading.run.bwrap import sandbox_command, sandbox_env
    from transformer_lab.grading.run.sandbox import probe

    probe(REPO)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    seed, ipc = tmp_path / "seed", tmp_path / "ipc"
    seed.mkdir()
    ipc.mkdir()
    (seed / "data.txt").write_text("seeded")
    uid = 1_500_000_123
    if os.geteuid() == 0:
        for folder in (seed, ipc):
            os.chown(folder, uid, uid)
    cmd = sandbox_command(
        [sys.executable, "-c", PROBE, str(REPO), str(server.getsockname()[1])],
        course_root=REPO,
        seed=seed,
        ipc_dir=ipc,
        uid=uid,
    )
    env = sandbox_env({**os.environ, "TLAB_TEST_INSTRUCTOR_SECRET": "x"})
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    server.close()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["list_solutions"] == "FileNotFoundError"
    assert "solutions" not in seen["repo_view"] and "transformer_lab" in seen["repo_view"]
    # The instructor's home shows only what holds the Python installation (here pyenv's).
    home = [
        p for p in os.listdir("/root") if not Path(sys.base_prefix).is_relative_to(f"/root/{p}")
    ]
    assert seen.get("root_view", []) == sorted(set(os.listdir("/root")) - set(home))
    assert seen["write_package"] in ("OSError", "PermissionError")  # read-only bind
    assert seen["write_tmp"] == "ok" and seen["write_home"] == "ok"  # its own folders
    assert seen["network"] == "ConnectionRefusedError"  # an empty loopback of its own
    assert seen["import_package"] == "ok"
    assert seen["big_file"] == "OSError"  # RLIMIT_FSIZE (64 MB)
    assert seen["big_memory"] == "MemoryError"  # RLIMIT_AS (4 GB)
    assert seen["home"] == "/home/student" and "TLAB_TEST_INSTRUCTOR_SECRET" not in seen["env"]
    if os.geteuid() == 0:
        assert seen["uid"] == uid
    assert seen["seeded"] == "seeded"  # the seed's files were copied into the working folder
    assert sorted(os.listdir(seed)) == ["data.txt"]  # and what the kernel wrote stayed inside


def test_a_missing_bwrap_is_a_clear_error(monkeypatch):
    from transformer_lab.grading.run import sandbox
    from transformer_lab.grading.run.bwrap import SandboxError

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="bubblewrap.*--no-sandbox"):
        sandbox.probe(REPO)


def test_folders_of_a_grading_process_that_is_gone_are_removed_at_once(tmp_path, monkeypatch):
    """A grading process killed with its kernels (SIGKILL, the watchdog) leaves its private
    folders; the next kernel's start removes them when the process named in them is gone,
    keeps those of a live process, and leaves folders without a process id to the age rule."""
    import tempfile

    from transformer_lab.grading.run import sandbox

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(sandbox, "_memory_dir", lambda: None)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = tmp_path / f"tlab-seed-{gone.pid}-abc"
    alive = tmp_path / f"tlab-ipc-{os.getpid()}-abc"
    legacy = tmp_path / "tlab-seed-abc"
    for folder in (dead, alive, legacy):
        folder.mkdir()
    made = sandbox._private_dir("tlab-seed-", base=str(tmp_path))
    assert made.name.startswith(f"tlab-seed-{os.getpid()}-")
    sandbox._remove_stale_dirs()
    assert not dead.exists()
    assert alive.exists() and legacy.exists() and made.exists()


def test_the_solutions_raise_no_review_flag():
    for path in sorted(REPO.glob("solutions/*/*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                assert review.scan_source(cell.source) == [], (path.name, cell.source[:80])


def test_tricks_raise_flags():
    assert review.scan_source('sys.modules["transformer_lab.checks"] = fake')
    assert review.scan_source("class Liar(torch.Tensor):\n    pass")
    assert review.scan_source("with MyMode(TorchFunctionMode):\n    pass")
    assert review.scan_source("print(os.environ)")
    assert review.scan_source("return module.eval()") == []


def test_a_notebook_without_metadata_is_matched_by_content():
    released = nbformat.read(REPO / "notebooks/01_self_attention/01_self_attention.ipynb", 4)
    answer = next(c for c in released.cells if c.metadata.get("nbgrader", {}).get("solution"))
    fresh = nbformat.v4.new_notebook()
    fresh.cells = [
        nbformat.v4.new_code_cell(c.source)
        if c.cell_type == "code"
        else nbformat.v4.new_markdown_cell(c.source)
        for c in released.cells
    ]
    mine = next(c for c in fresh.cells if c.source == answer.source)
    mine.source = answer.source.replace("raise NotImplementedError()", "return x")
    nb, matched, unmatched = match_by_content(fresh, released)
    assert unmatched == [] and answer.metadata.nbgrader.grade_id in matched
    got = next(c for c in nb.cells if c.source == mine.source)
    assert got.metadata.nbgrader == answer.metadata.nbgrader
