"""A real browser: JupyterLab in Chromium, run the explorer cell, move a slider, see the plot change.

Opens the student notebook ``notebooks/01_self_attention/01_self_attention.ipynb`` (or any
notebook named by the environment variable ``TLAB_BROWSER_NOTEBOOK``) as a trimmed temporary
copy: its set-up cells, the answer cells that only define the (unsolved) functions, and one
explorer cell: the first one (the softmax explorer, given the student's unsolved ``softmax``),
and, in a second test, the permutation-equivariance explorer (a new one, also given the
student's unsolved ``self_attention``: it must show the reference and a one-line "not
implemented yet", never a traceback). Screenshots and the measured round trip go to
``tests/screenshots/``.

Chromium is the system's (Debian's ``chromium``, found on ``PATH`` by the ``chromium`` fixture of
``tests/conftest.py``; the test skips, saying how to install it, where it is missing; it never
installs anything). Playwright only drives it (``playwright install`` is never used). Every wait
has its own timeout and a watchdog ends the test after 150 s, so it can never hang CI; how long
the test takes is not asserted.
"""

from __future__ import annotations

import io
import re
import secrets
import signal
import time

import numpy as np
import pytest
from browser_helpers import (
    CHROMIUM_ARGS,
    ROOT,
    explorer_notebook,
    free_port,
    notebook_to_open,
    start_lab,
    stop,
)

pytestmark = pytest.mark.browser
SHOTS = ROOT / "tests" / "screenshots"
BUDGET_S = 150  # the watchdog's limit: a hang fails instead of blocking CI
KERNEL_STATUS = ".jp-Notebook-ExecutionIndicator"
WIDGET_IMG = ".jp-OutputArea-output img.widget-image"
ERROR_OUTPUT = ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"


# (explorer to open, or None for the notebook's first; name of the screenshots)
EXPLORERS = [(None, "browser"), ("equivariance_explorer", "browser_equivariance")]


@pytest.fixture
def lab(tmp_path, request):
    """A JupyterLab serving a temporary copy of the explorer notebook."""
    root = tmp_path / "root"
    root.mkdir()
    explorer, _ = request.param
    notebook, n_cells, explorer_source = explorer_notebook(notebook_to_open(), root, explorer)
    token = secrets.token_hex(16)
    port = free_port()
    proc = start_lab(root, tmp_path, port, token, tmp_path / "jupyterlab.log")
    try:
        yield {
            "url": f"http://127.0.0.1:{port}/lab/tree/{notebook.name}?token={token}",
            "n_cells": n_cells,
            "explorer_source": explorer_source,
            "log": tmp_path / "jupyterlab.log",
        }
    finally:
        stop(proc)


@pytest.fixture
def watchdog():
    """Fail (rather than hang) if the test outlives its budget."""

    def expire(signum, frame):
        raise TimeoutError(f"browser test exceeded its {BUDGET_S} s budget")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(BUDGET_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _png_pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def _wait_until_stable(img, seconds: float = 1.0, timeout: float = 20.0) -> str:
    """Wait until the image's src has not changed for ``seconds`` (the kernel finished redrawing)."""
    deadline = time.monotonic() + timeout
    src, since = img.get_attribute("src"), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = img.get_attribute("src")
        if now != src:
            src, since = now, time.monotonic()
        elif time.monotonic() - since >= seconds:
            return src
    return src


def _run_cell(page, cell, attempts: int = 5):
    """Select a cell and run it (Ctrl+Enter); retry while the prompt shows it was never queued.

    Right after the page loads, Lab can drop a shortcut while the notebook finishes connecting
    to its kernel; a set-up cell or explorer cell run twice is harmless.
    """
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(attempts):
        prompt.click()
        page.keyboard.press("Control+Enter")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if prompt.inner_text().strip() != "[ ]:":
                return prompt
            time.sleep(0.2)
    raise AssertionError(f"the cell never started running after {attempts} attempts")


def _step(page, handle, img, key: str) -> float | None:
    """Press ``key`` on the slider handle; return seconds until a new picture arrives (None: none did)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    src = img.get_attribute("src")
    t0 = time.perf_counter()
    handle.press(key)
    try:
        page.wait_for_function(
            "([sel, before]) => { const i = document.querySelector(sel); return i && i.src !== before; }",
            arg=[WIDGET_IMG, src],
            timeout=30_000 if key == "ArrowLeft" else 10_000,
            polling=10,
        )
    except PlaywrightTimeout:
        return None
    return time.perf_counter() - t0


@pytest.mark.parametrize("lab", EXPLORERS, ids=["first-explorer", "equivariance"], indirect=True)
def test_slider_redraws_the_explorer_in_jupyterlab(chromium, lab, watchdog, request):
    from playwright.sync_api import expect, sync_playwright

    explorer, shot = request.node.callspec.params["lab"]
    SHOTS.mkdir(exist_ok=True)
    (SHOTS / f"{shot}_failure.png").unlink(missing_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            page.goto(lab["url"], wait_until="domcontentloaded", timeout=60_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            page.wait_for_selector(f"{KERNEL_STATUS}[data-status='idle']", timeout=60_000)
            # Run the set-up cells, each to completion, then the explorer cell (command mode).
            cells = page.locator(".jp-Notebook .jp-CodeCell")
            for i in range(lab["n_cells"]):
                prompt = _run_cell(page, cells.nth(i))
                if i < lab["n_cells"] - 1:
                    expect(prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=90_000)
            # The first output is either the explorer's picture or a traceback.
            page.wait_for_selector(f"{WIDGET_IMG}, {ERROR_OUTPUT}", timeout=90_000)
            if page.locator(WIDGET_IMG).count() == 0:
                page.screenshot(path=str(SHOTS / f"{shot}_failure.png"))
                pytest.fail(
                    f"the explorer cell failed in the browser: {page.locator(ERROR_OUTPUT).first.inner_text()[:2000]}"
                )
            img = page.locator(WIDGET_IMG).first
            img.scroll_into_view_if_needed()
            _wait_until_stable(img)
            output = page.locator(
                ".jp-OutputArea-output", has=page.locator("img.widget-image")
            ).first
            shot_before = output.screenshot(path=str(SHOTS / f"{shot}_before.png"))
            shown_text = output.inner_text()
            if explorer is not None:  # the student's unsolved function: one line, no traceback
                assert "not implemented yet" in shown_text, shown_text[:500]
            assert "Traceback" not in shown_text

            # Move the first slider with the keyboard, as a user tabbing to it would, one step at a
            # time: each step must come back as a new picture (this also times the round trip).
            handle = output.locator(".widget-slider .noUi-handle").first
            handle.focus()
            round_trips, key = [], "ArrowRight"
            for _ in range(8):
                elapsed = _step(page, handle, img, key)
                if elapsed is None:  # the slider sits at its maximum: go the other way
                    key = "ArrowLeft"
                    elapsed = _step(page, handle, img, key)
                assert elapsed is not None, (
                    "a slider step did not produce a new picture within 30 s"
                )
                round_trips.append(elapsed)
            _wait_until_stable(img)
            median_ms = 1000 * sorted(round_trips)[len(round_trips) // 2]
            (SHOTS / f"{shot}_latency.txt").write_text(
                f"arrow key to new picture in the browser, median of {len(round_trips)}: {median_ms:.0f} ms\n"
            )
            print(f"slider round trip in the browser ({shot}): median {median_ms:.0f} ms")
            shot_after = output.screenshot(path=str(SHOTS / f"{shot}_after.png"))
            page.screenshot(path=str(SHOTS / f"{shot}_page.png"))
        except Exception:
            page.screenshot(path=str(SHOTS / f"{shot}_failure.png"))
            raise
        finally:
            browser.close()

    before, after = _png_pixels(shot_before), _png_pixels(shot_after)
    assert before.shape == after.shape
    changed = (np.abs(after - before).max(axis=-1) > 40).mean()
    assert changed > 0.002, (
        f"only {changed:.2%} of the output area's pixels changed after moving the slider"
    )
