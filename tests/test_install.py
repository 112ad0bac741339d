"""The first hour on a fresh machine: which PyTorch build the Makefile installs, what a student
installs, and how the suite behaves where a real component (bubblewrap, PostgreSQL, Chromium) is
missing.

- ``make torch-choice`` prints the build ``make lab``/``make install`` would choose: the CPU build
  on Linux without an NVIDIA GPU, PyPI's default build elsewhere, ``TORCH=...`` overriding it.
- A dry-run resolution of that choice on this machine holds no ``nvidia-*`` package.
- ``make lab`` installs no test tooling; ``make test`` installs the ``dev`` extra.
- A test that needs a missing component is skipped, naming it and how to install it (a small
  suite run with the components hidden: an empty ``PATH`` and ``TLAB_PG_BIN`` pointing nowhere).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from components import COMPONENTS

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
GPU_ONLY = re.compile(r"^(nvidia-|triton$|cuda-)", re.IGNORECASE)

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="`make` is not installed")


def _make(*args: str) -> str:
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(REPO), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _choice(*args: str) -> tuple[str, list[str]]:
    """(build, pip arguments) from `make torch-choice`."""
    line = _make("torch-choice", *args).strip()
    match = re.fullmatch(r"TORCH=\S+ -> (\S+): pip install (.*)", line)
    assert match, line
    return match[1], match[2].replace('"', "").split()


# ---------------------------------------------------------------- which PyTorch build
@needs_make
@pytest.mark.parametrize(
    "uname, nvidia, torch, build",
    [
        ("Linux", "", "auto", "cpu"),  # a laptop or CI machine without a GPU
        ("Linux", "yes", "auto", "pypi"),  # PyPI's Linux wheel is the CUDA build
        ("Darwin", "", "auto", "pypi"),  # macOS wheels on PyPI have no CUDA
        ("Linux", "", "cuda", "pypi"),
        ("Linux", "yes", "cpu", "cpu"),  # the one-word override wins
        ("Darwin", "", "cpu", "cpu"),
        ("Linux", "yes", "cu128", "cu128"),  # any PyTorch index by name
    ],
)
def test_torch_build_follows_platform_and_override(uname, nvidia, torch, build):
    chosen, pip_args = _choice(f"UNAME={uname}", f"NVIDIA={nvidia}", f"TORCH={torch}")
    assert chosen == build
    if build == "pypi":
        assert pip_args == ["torch"]
    else:
        assert pip_args == ["torch", "--index-url", f"https://download.pytorch.org/whl/{build}"]


@needs_make
def test_this_machine_gets_the_build_its_hardware_calls_for():
    gpu = Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None
    expected = "cpu" if sys.platform.startswith("linux") and not gpu else "pypi"
    assert _choice()[0] == expected


@needs_make
@pytest.mark.slow
def test_the_cpu_choice_resolves_without_any_gpu_package(tmp_path):
    """A dry run of exactly the Makefile's pip command for the CPU build (no download of torch
    where pip's cache or a local wheel has it)."""
    _, pip_args = _choice("TORCH=cpu")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
        + ["--retries", "0", "--timeout", "20", "--report", str(report), *pip_args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.skip(
            "pip could not resolve torch from PyTorch's CPU index (no network to "
            f"download.pytorch.org and no local wheel?): {done.stderr.strip()[-300:]}"
        )
    installs = {i["metadata"]["name"].lower(): i for i in json.loads(report.read_text())["install"]}
    assert "torch" in installs
    gpu_only = sorted(name for name in installs if GPU_ONLY.match(name))
    assert gpu_only == [], f"the CPU build pulled GPU packages: {gpu_only}"
    version = installs["torch"]["metadata"]["version"]
    print(f"\ntorch {version} from {installs['torch']['download_info']['url']}")


# ---------------------------------------------------------------- what each install holds
TEST_TOOLS = {"pytest", "pytest-xdist", "playwright", "ruff", "psycopg", "transformers"}


def _requirements() -> dict[str | None, set[str]]:
    """The package's requirements by extra (None: the base install)."""
    found: dict[str | None, set[str]] = {}
    for req in importlib.metadata.requires("transformer-lab") or []:
        name = re.match(r"[A-Za-z0-9_.-]+", req)[0].lower()
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        found.setdefault(extra[1] if extra else None, set()).add(name)
    return found


def test_the_student_install_holds_no_test_tooling():
    requires = _requirements()
    student = requires[None] | requires.get("pretrained", set())
    assert not student & TEST_TOOLS, student & TEST_TOOLS
    assert TEST_TOOLS <= requires["dev"], TEST_TOOLS - requires["dev"]


@needs_make
def test_make_lab_installs_the_student_extras_and_make_test_the_dev_extra(tmp_path):
    venv = f"VENV={tmp_path / 'venv'}"  # a venv that does not exist: make shows every step
    lab, test = _make("-n", "lab", venv), _make("-n", "test", venv)
    installs = [ln for ln in lab.splitlines() if "pip install -e" in ln]
    assert [ln.split("pip install ")[1] for ln in installs] == ['-e ".[pretrained]"'], lab
    assert 'pip install -e ".[dev,pretrained]"' in test
    assert "pytest -n" in test
    for plan in (lab, test):  # torch first, from the index the choice names
        torch_line = next(ln for ln in plan.splitlines() if 'pip install "torch"' in ln)
        assert plan.index(torch_line) < plan.index("pip install -e")


# ---------------------------------------------------------------- missing components skip
SAMPLE = """
import pytest

@pytest.mark.needs_bwrap
def test_marked():
    pass

def test_wants_chromium(chromium):
    pass

@pytest.fixture(scope="module")
def gradebook(postgresql):
    return postgresql

def test_through_another_fixture(gradebook):
    pass

def test_needs_nothing():
    pass
"""
# The suite's conftest, loaded under another name (a conftest cannot import one called conftest).
CONFTEST = f"""
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("tlab_conftest", {str(TESTS / "conftest.py")!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
globals().update({{k: v for k, v in vars(module).items() if not k.startswith("__")}})
"""


def _run_sample(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(SAMPLE))
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rs"]
        + ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )


def test_tests_needing_a_missing_component_skip_saying_how_to_install_it(tmp_path):
    empty = tmp_path / "empty_bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty), TLAB_PG_BIN=str(tmp_path / "nowhere"))
    done = _run_sample(tmp_path, env)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "1 passed, 3 skipped" in out, out
    for name, hint in [
        ("bwrap", "apt-get install bubblewrap"),
        ("postgres", "apt-get install postgresql"),
        ("chromium", "apt-get install chromium"),
    ]:
        assert re.search(rf"^  {name}\s+MISSING: .*{re.escape(hint)}", out, re.M), out  # header
    skipped = [ln for ln in out.splitlines() if ln.startswith("SKIPPED")]
    assert len(skipped) == 3, out
    assert any("bubblewrap" in ln and "`bwrap` is not on PATH" in ln for ln in skipped), out
    assert any("Chromium" in ln and "`chromium` is not on PATH" in ln for ln in skipped), out
    assert any("PostgreSQL" in ln and "nowhere" in ln for ln in skipped), out
    assert all("sudo make deps" in ln for ln in skipped), out


def test_with_the_components_present_nothing_is_skipped(tmp_path):
    missing = [c.name for c in COMPONENTS.values() if c.missing() is not None]
    done = _run_sample(tmp_path, dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = f", {len(missing)} skipped" if missing else ""
    assert f"{4 - len(missing)} passed{skipped}" in done.stdout, (missing, done.stdout)
