"""Feedback that does not leak hidden tests and runs no script.

nbgrader's ``ClearHiddenTests`` removes the hidden region from a test cell's source, but the
traceback of a failing cell still quotes the lines around the failure, hidden ones included.
:class:`ClearHiddenTracebacks` keeps only the final ``ErrorName: message`` line of errors in
graded test cells: the checks' messages name the mistake, which is what a student needs.

:class:`SanitizeOutputs` and :class:`SanitizedHTMLExporter` make the page inert (see below);
``nbgrader_config.py`` turns both on.
"""

from __future__ import annotations

import base64
from html import escape as html_escape
from html.parser import HTMLParser

from nbconvert.exporters import HTMLExporter
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

from transformer_lab.grading.channels.page_style import accessible_feedback_page

__all__ = [
    "ClearHiddenTracebacks",
    "SanitizeOutputs",
    "SanitizedHTMLExporter",
    "sanitize_html",
    "sanitize_page",
]


class ClearHiddenTracebacks(NbGraderPreprocessor):
    """Shorten error tracebacks in graded test cells to their last line."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [
                        f"\x1b[0;31m{output.get('ename', 'Error')}\x1b[0m: {output.get('evalue', '')}"
                    ]
        return cell, resources


# -- sanitized feedback pages ------------------------------------------------------------------
# A feedback page is opened in a browser that may be logged in to Jupyter; nothing a student
# wrote or a kernel printed may run there. Two layers: the notebook's outputs are reduced to
# inert types before rendering (SanitizeOutputs), and the rendered page's body goes through
# nh3 (Rust's ammonia), an allow-list HTML sanitizer, with a Content-Security-Policy that
# forbids every script even if something were missed (SanitizedHTMLExporter).

# Output types rendered in feedback; everything else (application/javascript, widget views,
# custom types) is dropped. SVG becomes an <img> with a data: URL, in which scripts never run.
SAFE_MIMES = ("text/plain", "text/html", "text/markdown", "text/latex", "image/png", "image/jpeg")
SAFE_IMAGE_URL = ("data:image/png;", "data:image/jpeg;", "data:image/gif;", "data:image/svg+xml;")
URL_SCHEMES = {"http", "https", "mailto"}
# Long grader messages wrap at the page's edge instead of running off it.
WRAP_CSS = (
    "pre, .jp-RenderedText pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }"
)
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; "
    "form-action 'none'; base-uri 'none'"
)


def _allowed_attributes() -> dict[str, set[str]]:
    import nh3

    attributes = {tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()}
    attributes["*"] = {"class", "id", "title", "lang", "dir"}  # nbconvert's layout, anchors
    return attributes


def _keep_attribute(tag: str, attr: str, value: str) -> str | None:
    """nh3's attribute filter: data: URLs only as images, and only of image types."""
    if attr == "src" and value.strip().lower().startswith("data:"):
        return value if tag == "img" and value.strip().lower().startswith(SAFE_IMAGE_URL) else None
    return value


def sanitize_html(fragment: str) -> str:
    """``fragment`` without scripts, event handlers, ``javascript:`` URLs, forms or frames."""
    import nh3

    return nh3.clean(
        fragment,
        tags=set(nh3.ALLOWED_TAGS) - {"area", "map"},
        clean_content_tags={"script", "style"},
        attributes=_allowed_attributes(),
        attribute_filter=_keep_attribute,
        url_schemes=URL_SCHEMES | {"data"},  # data: then limited to images by the filter
        strip_comments=True,
    )


class _StyleCollector(HTMLParser):
    """The text of the <style> elements of the page's head (written by nbconvert's template)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.css: list[str] = []
        self._inside = False

    def handle_starttag(self, tag, attrs):
        self._inside = tag == "style"

    def handle_endtag(self, tag):
        self._inside = False

    def handle_data(self, data):
        if self._inside:
            self.css.append(data)


def sanitize_page(page: str, title: str = "Feedback") -> str:
    """A feedback page rebuilt from ``page``: the template's CSS, a strict CSP, a clean body.

    Student content only ever appears in the body (after the template's ``<body``); the head
    contributes only its stylesheets. MathJax and every other script are dropped, so formulas
    show as their LaTeX source.
    """
    head, _, body = page.partition("<body")
    styles = _StyleCollector()
    styles.feed(head)
    body = body.split(">", 1)[1] if ">" in body else body
    css = "\n".join(styles.css).replace("</", "<\\/")
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        f"<title>{html_escape(title)}</title>\n<style>\n{css}\n{WRAP_CSS}\n</style>\n</head>\n"
        f"<body>\n{sanitize_html(body)}\n</body>\n</html>\n"
    )


class SanitizeOutputs(NbGraderPreprocessor):
    """Keep only inert output types; SVG as an image; drop notebook-level widget state."""

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        for output in cell.get("outputs", []):
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            svg = data.get("image/svg+xml")
            if isinstance(svg, (str, list)):
                raw = ("".join(svg) if isinstance(svg, list) else svg).encode("utf-8")
                url = "data:image/svg+xml;base64," + base64.b64encode(raw).decode("ascii")
                data.setdefault("text/html", f'<img src="{url}" alt="SVG output">')
            for mime in [m for m in data if m not in SAFE_MIMES]:
                del data[mime]
        return cell, resources


class SanitizedHTMLExporter(HTMLExporter):
    """nbgrader's feedback HTML, sanitized (see :func:`sanitize_page`)."""

    def from_notebook_node(self, nb, resources=None, **kw):
        output, resources = super().from_notebook_node(nb, resources, **kw)
        info = (resources or {}).get("nbgrader") or {}
        name = info.get("notebook") or "Feedback"
        # AA contrast, wrapped lines, alt text on every image, a language (issue 40)
        page = accessible_feedback_page(sanitize_page(output, str(name)))
        if self.config.get("GuardedExecute", {}).get("hidden_secret"):
            return (
                page,
                resources,
            )  # tlab grade: its record step writes the box (channels/publish.settle)
        return _with_record(page, info, self.log), resources


def _with_record(page: str, info: dict, log) -> str:
    """The page with the grade record applied (:mod:`.publish`) when nbgrader's own
    ``generate_feedback`` writes it in the course folder; as written by nbgrader otherwise."""
    import os
    from pathlib import Path

    root = Path(os.getcwd())
    student, assignment = info.get("student"), info.get("assignment")
    if not (student and assignment and (root / "nbgrader_config.py").is_file()):
        return page
    try:
        from transformer_lab.grading.channels.publish import page_for
        from transformer_lab.grading.course import read_course_dirs

        graded = root / read_course_dirs(root)["autograded"] / student / assignment
        return page_for(root, assignment, student, page, graded / f"{info.get('notebook')}.ipynb")
    except Exception as exc:  # the page is still nbgrader's: say so, never lose the page
        log.warning("tlab: the grade record could not be applied to the feedback page: %s", exc)
        return page
