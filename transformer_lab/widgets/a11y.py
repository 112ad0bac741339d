"""Accessibility of the course's outputs (issue 40): figure descriptions, colours, keyboard.

- :func:`describe_figure`: a text alternative built from what a matplotlib figure plots (titles,
  axis labels and ranges, series names, heat maps' sizes and value ranges).
- :func:`install_figure_descriptions`: an IPython display formatter that shows every figure a
  notebook displays as ``<img alt="...">`` (``text/html``) and puts the same text in the PNG's
  ``alt`` metadata, which nbconvert's HTML templates read. Called when ``transformer_lab.widgets``
  is imported in an IPython kernel (every notebook's set-up cell does), never under grading.
- :func:`explorer_a11y_children`: what each explorer adds for screen readers and the keyboard:
  a style sheet (focus ring, pressed toggle buttons, a visually hidden figure description) and
  a small script (``SHIM_JS``) run by an Output widget: ipywidgets 8 has no API to name a
  slider's handle, give it a readable ``aria-valuetext``, keep notebook shortcuts out of a
  focused control or mark a live region (see docs/accessibility.md for the upstream report).
The feedback page's own style is the grader's: ``grading/channels/page_style.py``.

No network: the script is inline, nothing is loaded from a CDN.
"""

from __future__ import annotations

import base64
import html
import re
from typing import Any

__all__ = [
    "OKABE_ITO", "contrast_ratio", "describe_figure", "figure_html",
    "install_figure_descriptions", "explorer_a11y_children", "SHIM_JS",
]  # fmt: skip

# Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2008).
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}


def _luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of a ``#rrggbb`` colour."""
    value = colour.lstrip("#")
    if not re.fullmatch(r"[0-9a-fA-F]{6}", value):
        raise ValueError(f"colour must be written #rrggbb, but received {colour!r}.")
    channels = [int(value[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(foreground: str, background: str = "#ffffff") -> float:
    """WCAG 2.1 contrast ratio of two ``#rrggbb`` colours (1 to 21)."""
    a, b = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _axes_sentence(ax: Any) -> str:
    """One sentence about one axes: title, labels, ranges, series, images."""
    parts = []
    title = ax.get_title() or ax.get_title("left") or ax.get_title("right")
    parts.append(f"Panel '{title}'" if title else "Panel")
    images = [im for im in ax.get_images() if im.get_visible()]
    for im in images:
        data = im.get_array()
        if data is None or getattr(data, "ndim", 0) < 2:
            continue
        if data.ndim == 3:  # an RGB(A) picture or an overlay of marks
            continue
        lo, hi = im.get_clim()
        cmap = im.get_cmap().name
        parts.append(
            f"heat map of {data.shape[0]} rows by {data.shape[1]} columns, values from "
            f"{_fmt(lo)} to {_fmt(hi)} (colour map {cmap})"
            + (", each cell's value printed on it" if getattr(im, "tlab_values_shown", 0) else "")
        )
    if any(getattr(im.get_array(), "ndim", 0) == 3 for im in images) and not parts[1:]:
        parts.append("a picture")
    xlabel, ylabel = ax.get_xlabel(), ax.get_ylabel()
    if ax.axison and (ax.lines or ax.patches or ax.collections) and not images:
        x0, x1 = ax.get_xlim()
        y0, y1 = ax.get_ylim()
        parts.append(
            f"x axis {xlabel or 'unlabelled'} from {_fmt(x0)} to {_fmt(x1)}, "
            f"y axis {ylabel or 'unlabelled'} from {_fmt(y0)} to {_fmt(y1)}"
        )
    elif xlabel or ylabel:
        parts.append(f"x axis {xlabel or 'unlabelled'}, y axis {ylabel or 'unlabelled'}")
    handles, labels = ax.get_legend_handles_labels()
    labels = [lab for lab in labels if lab and not lab.startswith("_")]
    if labels:
        parts.append("series: " + ", ".join(labels))
    n_bars = sum(1 for p in ax.patches if type(p).__name__ == "Rectangle" and p.get_visible())
    if n_bars and not labels:
        parts.append(f"{n_bars} bars")
    return "; ".join(parts) + "."


def describe_figure(fig: Any, limit: int = 1000) -> str:
    """A text alternative for a matplotlib figure, from what it plots (at most ``limit`` chars).

    Colour bars are described with their heat map; axes without anything drawn are skipped.
    """
    sentences = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text():
        sentences.append(f"Figure: {suptitle.get_text()}.")
    axes = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    if not axes:
        return sentences[0] if sentences else "An empty figure."
    sentences.append(f"Figure with {len(axes)} panel{'s' if len(axes) > 1 else ''}.")
    sentences += [_axes_sentence(ax) for ax in axes]
    text = " ".join(sentences)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def figure_html(fig: Any, png: bytes | None = None) -> str:
    """``fig`` as an ``<img>`` with its description as alt text (PNG inline, no file)."""
    if png is None:
        import io

        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        png = buf.getvalue()
    data = base64.b64encode(png).decode("ascii")
    alt = html.escape(describe_figure(fig), quote=True)
    return f'<img src="data:image/png;base64,{data}" alt="{alt}" style="max-width:100%">'


def _png_with_alt(png_formatter_fn: Any) -> Any:
    def formatter(fig: Any) -> Any:
        data = png_formatter_fn(fig)
        if data is None:
            return None
        if isinstance(data, tuple):
            data, metadata = data
        else:
            metadata = {}
        return data, {**(metadata or {}), "alt": describe_figure(fig)}

    formatter.tlab_alt = True
    return formatter


def install_figure_descriptions(shell: Any = None) -> bool:
    """Show the notebook's matplotlib figures with a text alternative; True if installed.

    Registers, for ``matplotlib.figure.Figure`` (by name: matplotlib is not imported here), a
    ``text/html`` formatter (an ``<img>`` with alt text, which JupyterLab and nbconvert's HTML
    show in place of the bare PNG) and wraps the ``image/png`` formatter to add ``alt`` to the
    PNG's metadata. Does nothing outside IPython or under grading. Idempotent.
    """
    from transformer_lab._mode import grading_mode

    if grading_mode():
        return False
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    formatters = shell.display_formatter.formatters
    html_formatter = formatters["text/html"]
    html_formatter.for_type_by_name("matplotlib.figure", "Figure", _figure_html_repr)
    if not getattr(shell, "_tlab_png_alt_hook", False):
        shell._tlab_png_alt_hook = True
        shell.events.register("pre_run_cell", lambda *_: _wrap_png_formatter(shell))
    _wrap_png_formatter(shell)
    return True


def _figure_html_repr(fig: Any) -> str:
    return figure_html(fig)


def _wrap_png_formatter(shell: Any) -> None:
    """Add alt metadata to the PNG formatter ``%matplotlib inline`` registers (it may come later)."""
    png = shell.display_formatter.formatters["image/png"]
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return
    current = png.type_printers.get(Figure) or png.deferred_printers.get(
        ("matplotlib.figure", "Figure")
    )
    if current is not None and not getattr(current, "tlab_alt", False):
        png.for_type(Figure, _png_with_alt(current))


EXPLORER_CSS = """
.tlab-explorer :focus-visible { outline: 3px solid #0b57d0 !important; outline-offset: 2px; }
.tlab-explorer .noUi-handle:focus { outline: 3px solid #0b57d0 !important; outline-offset: 2px; }
.tlab-explorer .widget-toggle-button.mod-active {
  font-weight: bold; text-decoration: underline; box-shadow: inset 0 -4px 0 #000 !important;
}
.tlab-explorer .widget-toggle-button.mod-active::before { content: "\u2713 "; }
.tlab-explorer .widget-label, .tlab-explorer .widget-readout, .tlab-explorer .widget-html-content {
  color: #1a1a1a;
}
.tlab-sr-only {
  position: absolute !important; width: 1px; height: 1px; padding: 0; margin: -1px;
  overflow: hidden; clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0;
}
"""

SHIM_JS = r"""// Accessibility fixes for the course's explorers (transformer_lab/widgets/a11y.py), run in the
// browser by an Output widget inside each explorer. ipywidgets 8 has no API for any of these:
// - notebook shortcuts ("b", "a", "d d", "m", Up/Down...) must not fire while a control has the
//   focus. Lumino looks for a binding's selector from the event's target up to the first element
//   carrying [data-lm-suppress-shortcuts], and the notebook's command-mode selector ends in
//   ":focus", which the focused control itself matches: so the attribute goes on every focusable
//   control (handles, number boxes, selects, buttons, inputs), not only on the explorer;
// - a slider's handle (div role=slider) and its number box get the control's label as aria-label,
//   and aria-valuetext is the value the readout shows (not an option's index or a log exponent);
// - toggle buttons say which one is pressed (aria-pressed);
// - the readout line is a polite live region; the figure's <img> gets the description the
//   kernel wrote beside it as its alt text.
// Idempotent: every explorer view re-runs it; one MutationObserver per page does the work.
(function () {
  if (window.__tlabA11y) { window.__tlabA11y(); return; }
  var FOCUSABLE = '.noUi-handle, .widget-readout, select, button, input, textarea, [tabindex]';
  function set(el, name, value) { if (el.getAttribute(name) !== value) el.setAttribute(name, value); }
  function fix(root) {
    set(root, 'data-lm-suppress-shortcuts', 'true');
    set(root, 'role', 'group');
    root.querySelectorAll(FOCUSABLE).forEach(function (el) {
      set(el, 'data-lm-suppress-shortcuts', 'true');
    });
    root.querySelectorAll('.widget-slider, .widget-hslider, .widget-vslider').forEach(function (s) {
      var label = s.querySelector('.widget-label');
      var name = label ? label.textContent.trim() : '';
      var handle = s.querySelector('.noUi-handle');
      var box = s.querySelector('.widget-readout');
      if (handle && name) set(handle, 'aria-label', name);
      if (box) {
        if (name) set(box, 'aria-label', name + ', value');
        set(box, 'role', 'textbox');
        var text = box.textContent.trim();
        if (handle && text) set(handle, 'aria-valuetext', text);
      }
    });
    root.querySelectorAll('.widget-toggle-buttons').forEach(function (g) {
      var label = g.querySelector('.widget-label');
      if (label && label.textContent.trim()) g.setAttribute('aria-label', label.textContent.trim());
      g.setAttribute('role', 'group');
      g.querySelectorAll('button').forEach(function (b) {
        set(b, 'aria-pressed', b.classList.contains('mod-active') ? 'true' : 'false');
      });
    });
    root.querySelectorAll('.tlab-readout').forEach(function (r) {
      set(r, 'role', 'status');
      set(r, 'aria-live', 'polite');
    });
    var desc = root.querySelector('.tlab-figure-description');
    var img = root.querySelector('img.widget-image');
    if (desc && img) {
      set(img, 'alt', desc.textContent.trim());
    }
  }
  function fixAll() { document.querySelectorAll('.tlab-explorer').forEach(fix); }
  window.__tlabA11y = fixAll;
  var pending = false;
  new MutationObserver(function () {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(function () { pending = false; fixAll(); });
  }).observe(document.body, {
    subtree: true, childList: true, characterData: true, attributes: true,
    attributeFilter: ['class', 'aria-valuetext', 'aria-valuenow'],
  });
  fixAll();
})();
"""


def explorer_a11y_children() -> tuple[Any, Any, Any]:
    """(style sheet, figure description, script runner) widgets for an explorer.

    The description is a visually hidden HTML widget (class ``tlab-figure-description``) whose
    text the script copies into the figure's ``alt``; the script runs from an Output widget,
    whose outputs JupyterLab treats as trusted. Both are inert where scripts do not run.
    """
    import ipywidgets as widgets
    from IPython.display import Javascript

    style = widgets.HTML(f"<style>{EXPLORER_CSS}</style>")
    style.add_class("tlab-sr-only")
    description = widgets.HTML()
    description.add_class("tlab-figure-description")
    description.add_class("tlab-sr-only")
    runner = widgets.Output(layout=widgets.Layout(height="0px", overflow="hidden"))
    runner.outputs = (
        {
            "output_type": "display_data",
            "data": {"application/javascript": Javascript(SHIM_JS).data, "text/plain": ""},
            "metadata": {},
        },
    )
    return style, description, runner
