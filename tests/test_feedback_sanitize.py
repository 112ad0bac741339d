"""Feedback pages run no script (issue 22, item 5).

A submission full of payloads (a markdown ``<script>``, ``<img onerror>``, ``javascript:``
links, an iframe, and text/html, application/javascript and image/svg+xml outputs with scripts)
is graded by ``tlab grade``; its feedback page is opened in headless Chromium (Debian's, driven
by Playwright; ``playwright install`` is never used). Every payload would append its name to
``window.__pwned``, change ``document.title`` and request ``/hit/NAME`` from a local HTTP
server; none may. The page is opened as written (with its Content-Security-Policy) and with the
CSP removed, so the sanitizer alone is shown to be enough.
"""

from __future__ import annotations

import datetime
import http.server
import shutil
import threading
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from transformer_lab import cli
from transformer_lab.grading.autograde import GradeOptions, grade
from transformer_lab.grading.channels.feedback import CSP, sanitize_html
from transformer_lab.grading.record.report import GRADED, NEEDS_REVIEW

REPO = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "course"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
A = "fx_attention"


def _mark(name: str, port: int) -> str:
    """JavaScript that leaves three markers if it ever runs."""
    return (
        f"window.__pwned=(window.__pwned||[]).concat('{name}');"
        f"document.title='PWNED {name}';"
        f"new Image().src='http://127.0.0.1:{port}/hit/{name}'"
    )


def payload_cells(port: int) -> list:
    m = lambda name: _mark(name, port)  # noqa: E731
    markdown = (
        "# Payloads\n\n"
        f"<script>{m('md-script')}</script>\n\n"
        f'<img src="x" onerror="{m("md-onerror")}">\n\n'
        f"[a markdown link](javascript:{m('md-js-link')})\n\n"
        f'<a href="javascript:{m("md-a-href")}" id="jslink">an html link</a>\n\n'
        f'<svg onload="{m("md-svg-onload")}"><script>{m("md-svg-script")}</script></svg>\n\n'
        f'<iframe srcdoc="<script>{m("md-iframe")}</script>"></iframe>\n\n'
        f'<details open ontoggle="{m("md-ontoggle")}"><summary>x</summary></details>\n\n'
        f"<style>body {{ background: url(http://127.0.0.1:{port}/hit/md-css) }}</style>\n"
    )
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' onload=\"{m('svg-onload')}\">"
        f"<script>{m('svg-script')}</script><circle r='5'/></svg>"
    )
    code = (
        "from IPython.display import display\n"
        f"display({{'text/html': {('<script>' + m('html-script') + '</script>')!r}, "
        "'text/plain': 'html'}, raw=True)\n"
        f"display({{'text/html': {('<img src=x onerror=' + repr(m('html-onerror')) + '>')!r}, "
        "'text/plain': 'img'}, raw=True)\n"
        f"display({{'application/javascript': {m('app-js')!r}, 'text/plain': 'js'}}, raw=True)\n"
        f"display({{'image/svg+xml': {svg!r}, 'text/plain': 'svg'}}, raw=True)\n"
        f"display({{'text/markdown': {('<script>' + m('text-md') + '</script>')!r}, "
        "'text/plain': 'md'}, raw=True)\n"
        f"print({('<script>' + m('stdout') + '</script>')!r})\n"
    )
    return [nbformat.v4.new_markdown_cell(markdown), nbformat.v4.new_code_cell(code)]


def test_the_sanitizer_removes_every_active_part():
    dirty = (
        "<p>ok</p><script>alert(1)</script><img src=x onerror=alert(2)>"
        "<a href='javascript:alert(3)'>a</a><a href='JaVaScRiPt&colon;alert(4)'>b</a>"
        "<svg onload=alert(5)><script>alert(6)</script></svg><iframe src=x></iframe>"
        "<img src='data:text/html;base64,PHNjcmlwdD4='><img src='data:image/png;base64,iVBO'>"
        "<form action=x><input></form><a href='https://example.org'>c</a>"
    )
    clean = sanitize_html(dirty).lower()
    for bad in ("<script", "onerror", "onload", "javascript", "<svg", "<iframe", "<form"):
        assert bad not in clean
    assert "data:text/html" not in clean and "data:image/png;base64,ivbo" in clean
    assert "<p>ok</p>" in clean and 'href="https://example.org"' in clean


class _Hits(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        _Hits.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hits)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()


def _solution(root: Path, grade_id: str) -> str:
    nb = nbformat.read(root / "solutions" / A / f"{A}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(ln for ln in cell.source.splitlines() if "SOLUTION" not in ln)


@pytest.fixture(scope="module")
def feedback_page(tmp_path_factory, server, bwrap) -> Path:
    root = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(FIXTURE / "solutions", root / "solutions")
    assert cli.main(["--root", str(root), "release"]) == 0
    nb = nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.endswith("_impl"):
            cell.source = _solution(root, gid)
    nb.cells[1:1] = payload_cells(server)
    folder = root / "submitted" / "attacker" / A
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{A}.ipynb")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    (folder / "timestamp.txt").write_text(stamp)
    report = grade(root, A, GradeOptions(timeout=30, quiet=True))
    result = report.students["attacker"]
    # The code scan may flag `from IPython.display import display`; the points are the solution's.
    assert result.status in (GRADED, NEEDS_REVIEW) and result.score == 6, result.reason
    page = root / "feedback" / "attacker" / A / f"{A}.html"
    assert page.is_file()
    return page


def test_the_feedback_page_keeps_the_student_work_but_no_active_content(feedback_page):
    html = feedback_page.read_text(encoding="utf-8")
    assert ">Payloads<" in html and ">softmax<" in html  # the student's work is still shown
    assert f'content="{CSP}"' in html
    assert _active_parts(html) == []  # (the payloads' source code is shown as escaped text)
    assert "data:image/svg+xml;base64," in html  # the SVG output as an inert image


class _ActiveParts(HTMLParser):
    """Elements and attributes of a page that could run script or load something."""

    ACTIVE_TAGS = {"script", "iframe", "frame", "object", "embed", "svg", "math", "form", "base"}

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.ACTIVE_TAGS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            value = "".join((value or "").split()).lower()
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}>")
            elif name in ("href", "src", "action", "formaction", "xlink:href") and (
                value.startswith(("javascript:", "vbscript:"))
                or (value.startswith("data:") and not value.startswith("data:image/"))
            ):
                self.found.append(f"<{tag} {name}={value[:30]}>")


def _active_parts(html: str) -> list[str]:
    parser = _ActiveParts()
    parser.feed(html)
    return parser.found


def test_the_checker_sees_active_parts():
    dirty = "<script></script><img src=x onerror=a><a href=' JavaScript:x'>y</a><svg></svg>"
    assert len(_active_parts(dirty)) == 4


@pytest.mark.needs_chromium
@pytest.mark.parametrize("csp", [True, False], ids=["as-written", "without-csp"])
def test_no_payload_runs_in_chromium(feedback_page, server, tmp_path, csp):
    from playwright.sync_api import sync_playwright

    html = feedback_page.read_text(encoding="utf-8")
    if not csp:
        html = html.replace(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">', "")
        assert "Content-Security-Policy" not in html
    page_file = tmp_path / "feedback.html"
    page_file.write_text(html, encoding="utf-8")
    _Hits.hits.clear()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(page_file.as_uri(), wait_until="load", timeout=60_000)
            page.wait_for_timeout(1500)  # onerror/onload handlers and image loads
            # Click every link that stays on the page: a javascript: href would run.
            page.evaluate(
                "() => document.querySelectorAll('a:not([href^=http]):not([href^=mailto])')"
                ".forEach(a => a.click())"
            )
            page.wait_for_timeout(500)
            pwned = page.evaluate("window.__pwned || []")
            title = page.title()
            scripts = page.evaluate("document.querySelectorAll('script, iframe, svg').length")
            handlers = page.evaluate(
                "[...document.querySelectorAll('*')].flatMap(e => [...e.attributes])"
                ".filter(a => a.name.startsWith('on')).length"
            )
        finally:
            browser.close()
    assert pwned == [] and "PWNED" not in title and dialogs == []
    assert scripts == 0 and handlers == 0
    assert _Hits.hits == []  # nothing reached the local server
