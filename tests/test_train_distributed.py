"""train() under torchrun: two processes equal one process on the concatenated batches, step for
step, and a resumed run continues the same schedule and lands on the same weights.

These start real ``torchrun`` processes (gloo on the CPU) on this machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "ddp_train_script.py"
TOL = {"atol": 1e-6, "rtol": 1e-5}  # float32 sums in a different order (all-reduce vs one batch)

pytestmark = pytest.mark.slow


def _torchrun() -> list[str]:
    exe = Path(sys.executable).with_name("torchrun")
    launcher = [str(exe)] if exe.exists() else [sys.executable, "-m", "torch.distributed.run"]
    return [*launcher, "--standalone", "--nproc_per_node=2"]


def _run(args: list[str], distributed: bool, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    cmd = [*(_torchrun() if distributed else [sys.executable]), str(SCRIPT), *args]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )


def _load(path: Path) -> dict:
    return torch.load(path, weights_only=True)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    _run([str(tmp / "ddp.pt"), "--steps", "6"], True, tmp)
    return tmp, _load(tmp / "ddp.pt")


def test_two_processes_equal_one_process_on_the_concatenated_batches(two_processes, tmp_path):
    _, ddp = two_processes
    _run([str(tmp_path / "single.pt"), "--steps", "6", "--concat", "2"], False, tmp_path)
    single = _load(tmp_path / "single.pt")
    assert ddp["step"] == single["step"] == [1, 2, 3, 4, 5, 6]
    torch.testing.assert_close(torch.tensor(ddp["loss"]), torch.tensor(single["loss"]), **TOL)
    assert ddp["lr"] == single["lr"]
    for name, weight in single["state"].items():
        torch.testing.assert_close(ddp["state"][name], weight, **TOL, msg=f"weight {name}")


def test_a_resumed_run_continues_the_same_schedule(two_processes, tmp_path):
    _, straight = two_processes
    ckpt = tmp_path / "run.ckpt"
    _run(
        [str(tmp_path / "a.pt"), "--steps", "6", "--checkpoint", str(ckpt), "--interrupt-at", "5"],
        True,
        tmp_path,
    )
    assert (
        not (tmp_path / "a.pt").exists() and _load(ckpt)["step"] == 4
    )  # saved at step 4, stopped in 5
    _run(
        [str(tmp_path / "b.pt"), "--steps", "6", "--checkpoint", str(ckpt), "--resume"],
        True,
        tmp_path,
    )
    resumed = _load(tmp_path / "b.pt")
    assert resumed["step"] == [5, 6]
    assert resumed["lr"] == straight["lr"][4:], "the learning rate picks up where the schedule was"
    torch.testing.assert_close(
        torch.tensor(resumed["loss"]), torch.tensor(straight["loss"][4:]), **TOL
    )
    for name, weight in straight["state"].items():
        torch.testing.assert_close(resumed["state"][name], weight, **TOL, msg=f"weight {name}")


def test_torchrun_is_installed_with_torch():
    assert shutil.which("torchrun") or Path(sys.executable).with_name("torchrun").exists()
