"""The feedback page made readable for everyone (WCAG 2.1 AA; issue 40).

AA text contrast, long lines wrapped at the page's edge, alt text on every image, and a language;
applied to the finished, sanitized page (:mod:`.feedback`). Standard library only.
"""

from __future__ import annotations

import re

__all__ = ["FEEDBACK_CSS", "accessible_feedback_page"]

FEEDBACK_CSS = """
body { color: #1a1a1a; background: #ffffff; font-size: 16px; line-height: 1.5; }
a { color: #0b57d0; text-decoration: underline; }
pre, code, .jp-OutputArea-output pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.jp-InputPrompt, .jp-OutputPrompt, .prompt { color: #4a4a4a !important; }
.cm-comment, .c1, .c, .cm { color: #3d6b3d !important; }
.highlight .ow, .highlight .nd { color: #7a1fb8 !important; }
.highlight .ne { color: #a52a22 !important; }
.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"] { background: #fde7e7; color: #1a1a1a; }
img { max-width: 100%; height: auto; }
.panel-primary > .panel-heading { background-color: #285e8e; border-color: #285e8e; }
.panel-primary > .panel-heading, .panel-primary > .panel-heading a,
.panel-primary > .panel-heading a:visited { color: #ffffff !important; }
"""


def accessible_feedback_page(page: str) -> str:
    """A feedback page with AA contrast CSS, wrapped long lines, alt text on every image and a
    language; ``page`` is the finished (sanitized) HTML. Idempotent."""
    if "tlab-a11y-css" in page:
        return page
    page = page.replace("<html>", '<html lang="en">', 1)
    page = page.replace("</head>", f'<style id="tlab-a11y-css">{FEEDBACK_CSS}</style>\n</head>', 1)
    page = page.replace('alt="No description has been provided for this image"', 'alt="A figure"')

    def add_alt(match: re.Match) -> str:
        tag = match.group(0)
        return tag if re.search(r"\balt\s*=", tag) else tag[:-1].rstrip("/") + ' alt="A figure">'

    return re.sub(r"<img\b[^>]*>", add_alt, page)
