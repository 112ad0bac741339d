"""Shared bits of the benchmark scripts: the machine line, PASS/FAIL lines, timing, paths."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import platform
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
CHECKPOINT_DIR = REPO / "transformer_lab" / "checkpoints"

if str(REPO) not in sys.path:  # run from anywhere without installing the package
    sys.path.insert(0, str(REPO))

# Every script and the processes it starts (torchrun workers, measurements) import this module.
# At their exit, spare interpreter shutdown its walk over the heap (torch, the models) with the
# cyclic collector: about half a second of CPU per process, for memory the OS takes back anyway.
atexit.register(gc.freeze)


def cpu_model() -> str:
    """The CPU's name from /proc/cpuinfo (Linux), else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load_average() -> str:
    try:
        return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "n/a"


def print_machine() -> None:
    """One line saying where the figures come from (the load matters on a shared machine)."""
    print(
        f"machine: {os.cpu_count()} CPUs ({cpu_model()}), torch {torch.__version__}, "
        f"{torch.get_num_threads()} torch threads, Python {platform.python_version()}, "
        f"load average {load_average()}"
    )


def base_parser(description: str) -> argparse.ArgumentParser:
    """argparse with the options every script shares: --quick, --seed, --threads."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run of a few seconds (targets not checked)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: every CPU this process may use)",
    )
    return parser


def setup(args: argparse.Namespace) -> None:
    """Set the thread count the run states (``--threads``, else every usable CPU) and print it.

    Without this the count would depend on what the script imported: ``transformer_lab.train``
    applies the course's one-thread default, torch alone one thread per core.
    """
    from transformer_lab.threads import usable_cpus

    threads = usable_cpus() if args.threads is None else args.threads
    if threads < 1:
        sys.exit(f"--threads must be at least 1, but is {threads}.")
    torch.set_num_threads(threads)
    print_machine()


@contextmanager
def timer():
    """``with timer() as t: ...`` then ``t()`` gives the seconds the block took."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def verdict(name: str, ok: bool, detail: str, quick: bool = False) -> bool:
    """Print one ``PASS``/``FAIL`` line (``SKIP`` under --quick, where targets are not meaningful)."""
    word = "SKIP" if quick else ("PASS" if ok else "FAIL")
    print(f"{word}  {name}: {detail}")
    return ok or quick


def finish(results: list[bool]) -> None:
    """Exit with status 1 if any target failed, so scripts can gate CI."""
    sys.exit(0 if all(results) else 1)
