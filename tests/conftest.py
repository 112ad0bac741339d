"""Helpers shared by the test files, as plain functions (``from conftest import randomise``) and
as fixtures of the same names.

- :func:`randomise`: large random weights, so a weight copied to the wrong place shows up (with
  the small initial weights of most models, attention is nearly uniform and hides such mistakes).
- :func:`max_diff`: the largest absolute difference of two tensors, for messages.
- :func:`one_sentence`: an error message is one sentence (the package's rule for bad input).

Real components (``tests/components.py``): a test that needs bubblewrap, PostgreSQL or Chromium
carries the marker ``needs_bwrap`` / ``needs_postgres`` / ``needs_chromium``, or requests the
fixture ``bwrap`` / ``postgresql`` / ``chromium`` (directly or through another fixture, which
implies the marker). Where the component is missing such a test is skipped, naming what is
missing and how to install it; the header of every run lists what was found.

Parallel runs (``make test``: pytest-xdist, ``-n auto``; how tests are shared out is in
``tests/parallel.py``): each worker gets its own ``tmp_path`` tree and PostgreSQL cluster, and
torch a share of the cores (two workers with two threads each on two cores fight over them).
Every run ends with the seconds each test file took (``tests/timing.py``).

Graded builds (``grading/run/stripped.py``): every course a test grades would make its own build
of each notebook's package (about 2 s of CPU each, some forty per run); the run shares one folder
of builds instead (``$TLAB_CACHE_DIR``, made by the process that starts the run, inherited by
the workers and every ``tlab`` they start, removed at the end). A build's name holds a hash of the
package's sources, so a shared one is the same build. Tests about the cache set their own.
"""

import gc
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from components import COMPONENTS, report_lines
from parallel import make_scheduler, order_key
from timing import CpuPerPhase, FileTimes
from torch import nn

# As `tlab` does (transformer_lab/cli.py): jsonschema compiles the optional IRI grammars of
# rfc3987_syntax when a test module first imports nbformat, seconds of every test process's
# collection (8.6 -> 4 s measured); nothing here validates IRIs.
sys.modules.setdefault("rfc3987_syntax", None)


def pytest_configure(config):
    if not hasattr(config, "workerinput") and "TLAB_CACHE_DIR" not in os.environ:
        import tempfile

        config._tlab_cache = tempfile.mkdtemp(prefix="tlab-test-cache-")
        os.environ["TLAB_CACHE_DIR"] = config._tlab_cache
    # tests/timing.py: each process running tests measures CPU; the controller prints the table
    if not (config.getoption("numprocesses", None) and not hasattr(config, "workerinput")):
        config.pluginmanager.register(CpuPerPhase(), "cpu_per_phase")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileTimes(), "file_times")
    for c in COMPONENTS.values():
        config.addinivalue_line(
            "markers", f"{c.marker}: needs {c.what} (skipped, saying why, where it is missing)"
        )
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:  # share the cores between the workers (kernels and subprocesses inherit this)
        threads = max(1, (os.cpu_count() or 1) // int(workers))
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_report_header(config):
    return ["real components used by some tests (tests/components.py):", *report_lines()]


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: fine without it installed
def pytest_xdist_make_scheduler(config, log):
    """Under ``-n``: whole files when their tests share a set-up, else test by test."""
    if config.getvalue("dist") in ("load", "loadgroup"):
        return make_scheduler(config, log)
    return None


def pytest_collection_modifyitems(config, items):
    """Mark tests that request a component's fixture; skip those whose component is missing;
    put slow files first (see ``tests/parallel.py``)."""
    for item in items:
        missing = []
        for c in COMPONENTS.values():
            if c.fixture in item.fixturenames and item.get_closest_marker(c.marker) is None:
                item.add_marker(c.marker)
            if item.get_closest_marker(c.marker) is not None and c.missing() is not None:
                missing.append(c.missing())
        if missing:
            item.add_marker(pytest.mark.skip(reason="; and ".join(missing)))
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: order_key(item.path, slow_files))  # stable: files stay whole


def _component(name: str):
    why = COMPONENTS[name].missing()
    if why is not None:
        pytest.skip(why)


@pytest.fixture(scope="session")
def bwrap() -> str:
    """The path of bubblewrap (skips the test, saying why, where it cannot sandbox)."""
    import shutil

    _component("bwrap")
    return shutil.which("bwrap")


@pytest.fixture(scope="session")
def postgresql() -> Path:
    """The folder of PostgreSQL's server programs (skips the test where they are missing)."""
    from pg_server import find_pg_bin

    _component("postgres")
    return find_pg_bin()


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The path of Chromium (skips the test where it is missing); Playwright only drives it."""
    import shutil

    _component("chromium")
    return Path(shutil.which("chromium"))


def randomise(
    module: nn.Module,
    seed: int = 0,
    scale: float = 0.2,
    gain: Callable[[str], bool] | None = None,
) -> nn.Module:
    """Give every parameter N(0, scale^2) values, in place; returns ``module``.

    Args:
        gain: ``gain(name)`` is True for parameters to centre on 1 instead of 0 (norm gains), so
            the norms stay close to their usual scale.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            offset = 1.0 if gain is not None and gain(name) else 0.0
            p.copy_(torch.randn(p.shape, generator=g) * scale + offset)
    return module


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute elementwise difference."""
    return (a - b).abs().max().item()


def one_sentence(message: str) -> None:
    """Assert that ``message`` is one sentence: it ends with a full stop and holds no other."""
    assert message.rstrip("'\"").endswith("."), message
    assert ". " not in message[:-1] and "\n" not in message, message


@pytest.fixture(name="randomise")
def randomise_fixture():
    return randomise


@pytest.fixture(name="max_diff")
def max_diff_fixture():
    return max_diff


@pytest.fixture(name="one_sentence")
def one_sentence_fixture():
    return one_sentence


@pytest.fixture(scope="module")
def one_thread():
    """Small tensors: one thread is much faster than two on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After each test file (its fixtures torn down): collect, then freeze what is still alive.

    A test process holds torch, transformers and the package for the whole run, and the
    collector's full passes walked all of it again and again: 13.4 s of 90 s in six in-process
    files, measured with gc.callbacks. Frozen objects are skipped by later passes (6.6 s,
    the run 90 -> 83 s); what is frozen is alive at the end of a file, so little is kept that
    would have been freed.
    """
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """The run is over: spare this process the collector's last walk over its heap (torch,
    transformers, every model the tests built) at interpreter shutdown. Measured before the
    per-file freeze above (which now does most of this in the workers; pytest-xdist's controller
    runs no tests): 3.5 s of CPU and 2 s of wall time per two-worker run."""
    cache = getattr(config, "_tlab_cache", None)
    if cache is not None:  # the run's shared graded builds (pytest_configure)
        import shutil

        shutil.rmtree(cache, ignore_errors=True)
        os.environ.pop("TLAB_CACHE_DIR", None)
    gc.freeze()


@pytest.fixture(scope="session")
def executed_solution(tmp_path_factory):
    """``executed_solution(path)``: the solution notebook executed as a student would run it,
    once per run for all test files and pytest-xdist workers (``tests/executed_notebooks.py``)."""
    from executed_notebooks import ExecutedSolutions

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's base is a folder of the run's
        base = base.parent
    return ExecutedSolutions(base / "executed-solutions")
