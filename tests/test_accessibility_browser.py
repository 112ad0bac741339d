"""Accessibility in a real browser (issue 40): axe-core on the course's outputs, and the keyboard.

Each notebook is opened in JupyterLab (headless Chromium, as in ``tests/test_browser.py``) as a
trimmed copy holding its set-up cells and every explorer cell (``explorers_notebook``); every
cell is run, then axe-core 4.12 (shipped by ``axe-playwright-python``, the dev extra) checks the
page against WCAG 2.0/2.1 A and AA. Each failing node is attributed to the course (a cell's
output, a widget view) or to JupyterLab itself: the course must cause no serious or critical
violation; JupyterLab's own are written to ``tests/screenshots/axe_NN.json`` and listed in
``docs/accessibility.md``, not fixed here.

The keyboard test drives one explorer with key presses only: Tab order, arrows on a slider and a
dropdown, a notebook shortcut letter inside the widget, the redraw, the names and values a
screen reader reads, and the live readout.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import time

import pytest
from browser_helpers import (
    CHROMIUM_ARGS,
    ROOT,
    explorer_notebook,
    explorers_notebook,
    free_port,
    run_axe,
    start_lab,
    stop,
)

pytestmark = pytest.mark.browser
SHOTS = ROOT / "tests" / "screenshots"
BUDGET_S = 240
KERNEL_STATUS = ".jp-Notebook-ExecutionIndicator"
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
QUICK = ["01_self_attention", "04_masking_and_cross_attention", "07_gpt"]
ALL = sorted(p.name for p in NOTEBOOKS.iterdir() if p.is_dir()) if NOTEBOOKS.is_dir() else []
SERIOUS = {"serious", "critical"}


@pytest.fixture
def watchdog():
    def expire(signum, frame):
        raise TimeoutError(f"browser test exceeded its {BUDGET_S} s budget")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(BUDGET_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _lab(tmp_path, notebook):
    token, port = secrets.token_hex(16), free_port()
    proc = start_lab(notebook.parent, tmp_path, port, token, tmp_path / "jupyterlab.log")
    return proc, f"http://127.0.0.1:{port}/lab/tree/{notebook.name}?token={token}"


def _open(pw, chromium, url):
    browser = pw.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.set_default_timeout(30_000)
    page.goto(url, wait_until="domcontentloaded", timeout=60_000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_selector(f"{KERNEL_STATUS}[data-status='idle']", timeout=60_000)
    return browser, page


def _run_cell(page, cell, attempts: int = 5):
    """Select a cell, run it (Ctrl+Enter) and wait until its prompt shows a number."""
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(attempts):
        prompt.click()
        page.keyboard.press("Control+Enter")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if prompt.inner_text().strip() != "[ ]:":
                break
            time.sleep(0.2)
        else:
            continue
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if re.fullmatch(r"\[\d+\]:", prompt.inner_text().strip()):
                return
            time.sleep(0.2)
        raise AssertionError("a cell did not finish within 120 s")
    raise AssertionError(f"the cell never started running after {attempts} attempts")


def _run_all(page, n_cells):
    cells = page.locator(".jp-Notebook .jp-CodeCell")
    for i in range(n_cells):
        _run_cell(page, cells.nth(i))
    time.sleep(1.0)  # widget views render after the kernel's reply


def _summary(rows):
    out = {}
    for origin in ("course", "jupyterlab"):
        mine = [r for r in rows if r["origin"] == origin]
        out[origin] = {
            impact: sum(r["nodes"] for r in mine if r["impact"] == impact)
            for impact in ("critical", "serious", "moderate", "minor")
        }
        out[origin]["rules"] = sorted({f"{r['rule']} ({r['impact']})" for r in mine})
    return out


def _audit(chromium, tmp_path, name):
    from playwright.sync_api import sync_playwright

    source = NOTEBOOKS / name / f"{name}.ipynb"
    root = tmp_path / "root"
    root.mkdir()
    notebook, n_cells = explorers_notebook(source, root)
    proc, url = _lab(tmp_path, notebook)
    SHOTS.mkdir(exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser, page = _open(pw, chromium, url)
            try:
                _run_all(page, n_cells)
                rows = run_axe(page)
                page.screenshot(path=str(SHOTS / f"axe_{name[:2]}.png"))
            finally:
                browser.close()
    finally:
        stop(proc)
    summary = _summary(rows)
    (SHOTS / f"axe_{name[:2]}.json").write_text(
        json.dumps({"summary": summary, "violations": rows}, indent=1)
    )
    print(f"axe {name}: {json.dumps(summary)}")
    return rows


def _assert_course_clean(rows):
    bad = [r for r in rows if r["origin"] == "course" and r["impact"] in SERIOUS]
    assert not bad, "the course's outputs cause serious or critical violations: " + "; ".join(
        f"{r['rule']} ({r['impact']}, {r['nodes']} nodes, e.g. {r['targets'][:2]})" for r in bad
    )


@pytest.mark.parametrize("name", QUICK)
def test_axe_finds_no_serious_violation_in_the_course_outputs(chromium, tmp_path, watchdog, name):
    _assert_course_clean(_audit(chromium, tmp_path, name))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ALL if n not in QUICK])
def test_axe_other_notebooks(chromium, tmp_path, watchdog, name):
    _assert_course_clean(_audit(chromium, tmp_path, name))


WIDGET_IMG = ".tlab-explorer img.widget-image"
FOCUSABLE = ".noUi-handle, .widget-readout[contenteditable=true], select, button, input, textarea"


def _focus_info(page):
    return page.evaluate(
        """() => { const e = document.activeElement; const cell = e.closest('.jp-Cell');
        return {inside: !!e.closest('.tlab-explorer'), cls: e.className, tag: e.tagName,
                name: e.getAttribute('aria-label') || (e.labels && e.labels[0] ?
                      e.labels[0].textContent : '') || (e.tagName === 'BUTTON' ?
                      e.innerText : '') || '',
                outline: getComputedStyle(e).outlineStyle}; }"""
    )


def _img_changes(page, press):
    src = page.locator(WIDGET_IMG).first.get_attribute("src")
    press()
    page.wait_for_function(
        "([sel, before]) => document.querySelector(sel).src !== before",
        arg=[WIDGET_IMG, src],
        timeout=20_000,
    )


# (notebook, explorer): sliders and toggle buttons; a dropdown
KEYBOARD = [
    ("04_masking_and_cross_attention", "masked_row_explorer"),
    ("04_masking_and_cross_attention", "leak_explorer"),
]


@pytest.mark.xfail(
    reason="open (issue 40): JupyterLab's command-mode shortcuts (b, a) still fire inside a focused "
    "slider handle although the explorer carries data-lm-suppress-shortcuts",
    strict=False,
)
@pytest.mark.parametrize("name, explorer", KEYBOARD, ids=[e for _, e in KEYBOARD])
def test_explorer_works_from_the_keyboard_alone(chromium, tmp_path, watchdog, name, explorer):
    from playwright.sync_api import sync_playwright

    root = tmp_path / "root"
    root.mkdir()
    source = NOTEBOOKS / name / f"{name}.ipynb"
    notebook, n_cells, _ = explorer_notebook(source, root, explorer)
    proc, url = _lab(tmp_path, notebook)
    try:
        with sync_playwright() as pw:
            browser, page = _open(pw, chromium, url)
            try:
                _run_all(page, n_cells)
                page.wait_for_selector(WIDGET_IMG, timeout=60_000)
                page.wait_for_function(
                    "() => document.querySelector('.tlab-explorer[data-lm-suppress-shortcuts]')",
                    timeout=20_000,
                )
                explorer_el = page.locator(".tlab-explorer").first
                controls = explorer_el.locator(FOCUSABLE)
                n_controls = controls.count()
                assert n_controls >= 1
                # Tab from the first control reaches every control, in document order.
                controls.first.focus()
                seen = [_focus_info(page)]
                for _ in range(n_controls - 1):
                    page.keyboard.press("Tab")
                    seen.append(_focus_info(page))
                assert all(s["inside"] for s in seen), seen
                assert all(s["name"].strip() for s in seen), f"a control has no name: {seen}"
                assert all(s["outline"] != "none" for s in seen), f"focus not visible: {seen}"
                n_cells_before = page.locator(".jp-Notebook .jp-Cell").count()
                # Sliders: a name, the shown value as aria-valuetext, arrows redraw.
                handles = explorer_el.locator(".noUi-handle")
                for i in range(handles.count()):
                    handle = handles.nth(i)
                    handle.focus()
                    assert handle.get_attribute("aria-label")
                    box = explorer_el.locator(".widget-slider .widget-readout").nth(i)
                    assert box.get_attribute("aria-label")
                    key = (
                        "ArrowRight"
                        if handle.get_attribute("aria-valuenow")
                        != handle.get_attribute("aria-valuemax")
                        else "ArrowLeft"
                    )
                    _img_changes(page, lambda h=handle, k=key: h.press(k))
                    page.wait_for_timeout(300)
                    assert handle.get_attribute("aria-valuetext") == box.inner_text().strip()
                    handle.press("b")  # "insert a cell below" in command mode
                    handle.press("a")
                # Dropdowns: Up/Down change the value (not the active cell) and redraw.
                selects = explorer_el.locator("select")
                for i in range(selects.count()):
                    select = selects.nth(i)
                    select.focus()
                    before = select.input_value()
                    last = select.evaluate("s => s.selectedIndex === s.options.length - 1")
                    key = "ArrowUp" if last else "ArrowDown"
                    _img_changes(page, lambda s=select, k=key: s.press(k))
                    assert select.input_value() != before
                    assert _focus_info(page)["inside"]
                # Toggle buttons say which is pressed, not by colour alone.
                toggles = explorer_el.locator(".widget-toggle-buttons button")
                if toggles.count() > 1:
                    assert toggles.first.get_attribute("aria-pressed") in ("true", "false")
                    toggles.nth(1).focus()
                    _img_changes(page, lambda: page.keyboard.press("Enter"))
                    page.wait_for_timeout(300)
                    assert toggles.nth(1).get_attribute("aria-pressed") == "true"
                assert page.locator(".jp-Notebook .jp-Cell").count() == n_cells_before, (
                    "a notebook shortcut fired inside the explorer"
                )
                readout = explorer_el.locator(".tlab-readout")
                assert readout.get_attribute("aria-live") == "polite"
                assert explorer_el.locator("img.widget-image").get_attribute("alt")
                page.screenshot(path=str(SHOTS / f"keyboard_{explorer}.png"))
            finally:
                browser.close()
    finally:
        stop(proc)
