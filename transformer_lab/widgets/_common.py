"""The machinery every explorer shares: controls, a readout line and a figure shown as a PNG.

Why a PNG in an ``ipywidgets.Image`` rather than ``plt.show()`` or ipympl: the figure is drawn
by matplotlib's Agg renderer inside the kernel, so it looks the same in JupyterLab, classic
Notebook, VS Code and a headless test, needs no extra front-end extension, and a browser test can
see the picture change. Updates change the existing artists' data in the same figure (nothing is
re-created), and :class:`FigureView` redraws only the artists that changed over a cached
background, so a slider step costs a few artists' drawing plus a fast PNG encode (tens of ms).

This module imports ipywidgets and matplotlib; explorer modules import it only after the grading
check, so grading never loads either.
"""

from __future__ import annotations

import html
import io
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image as PILImage

from transformer_lab.threads import torch_threads
from transformer_lab.widgets.a11y import describe_figure

__all__ = [
    "Explorer", "FigureView", "new_figure", "render_png", "encode_png", "set_bar_heights",
    "Rectangle", "widgets", "STYLE", "BLUE", "ORANGE", "GREY", "RED", "GREEN",
    "diff_overlay", "set_diff", "bar_colors", "TEXT_OK", "TEXT_ERROR", "DIFFER_HATCH",
    "DIFFER_MARKER", "add_colour_bars", "HeatmapValues", "VALUES_MAX_CELLS",
    "VALUES_MAX_PER_FIGURE",
]  # fmt: skip

DPI = 80  # ~800 px wide figures: sharp enough, and cheap to draw and encode
STYLE = {"description_width": "initial"}  # never truncate a control's label
# The course's colours, in one place (issue 40): Okabe & Ito's colour-blind-safe palette
# (transformer_lab.widgets.a11y.OKABE_ITO), each at >= 3:1 against white for lines and bars.
# "Matches" (GREEN, bluish green) and "differs" (RED, vermillion) stay apart under
# deuteranopia, and a differing bar or cell also carries a hatch or an X mark, and the readout
# says it in words.
BLUE = "#0072B2"  # blue, 5.2:1
ORANGE = "#CC79A7"  # reddish purple, 3.1:1: the second series and highlight boxes
GREY = "#767676"  # 4.5:1
RED = "#D55E00"  # vermillion, 3.9:1: differs
GREEN = "#009E73"  # bluish green, 3.4:1: matches
TEXT_OK, TEXT_ERROR = "#1b6e1b", "#b3261e"  # readout text, >= 4.5:1 (AA)
DIFFER_HATCH = "xxx"  # on a differing bar
DIFFER_MARKER = "X"  # on a differing heat-map cell

UpdateFn = Callable[[], tuple[dict[str, Any], str]]


def new_figure(
    ncols: int = 1,
    figsize: tuple[float, float] = (10.0, 3.2),
    width_ratios: list[float] | None = None,
) -> tuple[Figure, list[Any]]:
    """A figure with ``ncols`` axes in a row, on its own Agg canvas (never pyplot's global state,
    so the inline backend does not also print it)."""
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False, gridspec_kw={"width_ratios": width_ratios})[0]
    return fig, list(axes)


def encode_png(fig: Figure) -> bytes:
    """Encode the canvas's current pixels as PNG.

    Pillow at zlib level 1 is several times faster than ``savefig``'s default and the file is
    only slightly larger, which is what matters for a slider.
    """
    width, height = fig.canvas.get_width_height(physical=True)
    pixels = PILImage.frombuffer(
        "RGBA", (width, height), fig.canvas.buffer_rgba(), "raw", "RGBA", 0, 1
    )
    buf = io.BytesIO()
    pixels.save(buf, format="png", compress_level=1)
    return buf.getvalue()


class FigureView:
    """A figure whose changing artists are redrawn over a cached background (blitting).

    Drawing text (tick labels, titles) is most of the cost of a matplotlib frame, and most of it
    never changes. Three layers are kept:

    - the background: everything not registered below; redrawn only when some axes' limits
      change or after :meth:`invalidate` (call it after changing a static artist);
    - slow artists (``animate(..., slow=True)``), e.g. labels that depend on one control only:
      drawn over the background and cached; redrawn after :meth:`invalidate_slow`;
    - fast artists (``animate(...)``): drawn on every frame.

    Args:
        fig: a figure from :func:`new_figure`.
    """

    def __init__(self, fig: Figure) -> None:
        self.fig = fig
        self.fast: list[Any] = []
        self.slow: list[Any] = []
        self._background: Any = None
        self._middle: Any = None
        self._limits: Any = None
        self.full_draws = 0  # frames that needed a full draw (the benchmark reports it)

    def animate(self, *artists: Any, slow: bool = False) -> None:
        """Register artists (or lists of them, e.g. ``list(ax.bar(...))``) that change between frames."""
        layer = self.slow if slow else self.fast
        for a in artists:
            for artist in a if isinstance(a, (list, tuple)) else [a]:
                artist.set_animated(True)
                layer.append(artist)

    def invalidate(self) -> None:
        """Redraw the background (and the slow layer) on the next frame."""
        self._background = None

    def invalidate_slow(self) -> None:
        """Redraw the slow layer on the next frame."""
        self._middle = None

    def _draw(self, artists: list[Any]) -> None:
        for artist in artists:
            if artist.get_visible():
                self.fig.draw_artist(artist)
                marks = getattr(artist, "tlab_marks", None)  # a diff overlay's X marks
                if marks is not None and marks.get_visible():
                    self.fig.draw_artist(marks)

    def render_png(self) -> bytes:
        """Draw the current frame and return it as PNG bytes."""
        canvas = self.fig.canvas
        limits = [(ax.get_xlim(), ax.get_ylim()) for ax in self.fig.axes]
        if self._background is None or limits != self._limits:
            canvas.draw()  # everything except the animated artists
            self._background = canvas.copy_from_bbox(self.fig.bbox)
            self._limits = limits
            self._middle = None
            self.full_draws += 1
        if self._middle is None:
            canvas.restore_region(self._background)
            self._draw(self.slow)
            self._middle = canvas.copy_from_bbox(self.fig.bbox)
        else:
            canvas.restore_region(self._middle)
        self._draw(self.fast)
        # Redraw the axes frames: a heatmap drawn over the cached background would hide them.
        self._draw([spine for ax in self.fig.axes if ax.axison for spine in ax.spines.values()])
        return encode_png(self.fig)


def render_png(fig: Figure) -> bytes:
    """Draw every artist of ``fig`` and return PNG bytes (no caching)."""
    fig.canvas.draw()
    return encode_png(fig)


class Explorer(widgets.VBox):
    """Controls, a readout and a figure that is redrawn in place whenever a control changes.

    Attributes:
        controls: name -> control widget; setting a control's ``.value`` redraws synchronously.
        figure: the matplotlib Figure whose artists are updated.
        view: the :class:`FigureView` that draws it.
        image: the ``ipywidgets.Image`` holding the current PNG (``image.value`` is its bytes).
        readout: an ``ipywidgets.HTML`` line with the numbers behind the plot.
        last_update_seconds: wall time of the last redraw, from reading the controls to new PNG bytes.
        last_update_cpu_seconds: the same in CPU time of this process (less noisy on a busy machine).

    Args:
        title: shown above the controls.
        controls: name -> control, in display order.
        view: the figure the update function draws into (a :class:`FigureView`).
        update: reads the controls, updates the artists, returns ``(state, readout_html)`` where
            ``state`` holds the plotted arrays (see :meth:`state`).
        footer: HTML shown under the plot (e.g. the check's diagnosis of the student's function);
            kept in ``.footer``.
    """

    def __init__(
        self,
        title: str,
        controls: dict[str, widgets.Widget],
        view: FigureView,
        update: UpdateFn,
        footer: str = "",
    ) -> None:
        from transformer_lab.widgets.a11y import explorer_a11y_children

        image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        readout = widgets.HTML()
        readout.add_class("tlab-readout")  # a polite live region (set by the a11y script)
        header = widgets.HTML(f"<b>{html.escape(title)}</b>")
        row = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        footer_html = widgets.HTML(footer)
        style, description, script = explorer_a11y_children()
        super().__init__(
            children=[header, row, readout, image, footer_html, description, style, script]
        )
        self.footer = footer_html
        self.description = description  # the figure's text alternative (visually hidden)
        self.a11y_script = script
        self.add_class("tlab-explorer")
        self.controls = dict(controls)
        self.view = view
        self.figure = view.fig
        self.image = image
        self.readout = readout
        self.last_update_seconds = float("nan")
        self.last_update_cpu_seconds = float("nan")
        self._update = update
        self._state: dict[str, Any] = {}
        self._busy = False  # True while the update runs, so the controls it adjusts don't recurse
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        add_colour_bars(self.figure)
        self.heatmap_values = [HeatmapValues(view, im) for im in heat_maps(self.figure)]
        self.refresh()
        # Lay out once with constrained layout, then freeze it: re-solving the layout on every
        # redraw would double the cost of a slider step for no visible gain.
        self.figure.set_layout_engine("none")
        if any(values.shown for values in self.heatmap_values):
            self.refresh()  # the printed values' size follows the cells' size after layout

    def _on_change(self, change: dict[str, Any]) -> None:
        if not self._busy:
            self.refresh()

    def refresh(self) -> None:
        """Read the controls, update the plot and the readout, and re-encode the PNG."""
        start, start_cpu = time.perf_counter(), time.process_time()
        self._busy = True
        # One thread: an explorer's tensors are tiny, and on a busy machine a second intra-op
        # thread makes each small product ~100x slower (measured: 22 us vs 2.2 ms per matmul).
        try:
            with torch_threads(1):
                state, readout = self._update()
        except Exception as err:
            message = f"{type(err).__name__}: {err}"
            self.readout.value = f"<span style='color:{TEXT_ERROR}'>{html.escape(message)}</span>"
            raise
        finally:
            self._busy = False
        self._state = state
        self.readout.value = readout
        printed = [v.image.get_array().size for v in self.heatmap_values if v.small()]
        for values in self.heatmap_values:  # all or none, within the per-frame budget
            values.update(allowed=sum(printed) <= VALUES_MAX_PER_FIGURE)
        self.image.value = self.view.render_png()
        self.description.value = html.escape(describe_figure(self.figure))
        self.last_update_seconds = time.perf_counter() - start
        self.last_update_cpu_seconds = time.process_time() - start_cpu

    def state(self) -> dict[str, Any]:
        """The values and arrays currently plotted (copies), e.g. ``{"probs": array, ...}``."""
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self._state.items()}

    def set(self, **values: Any) -> None:
        """Set several controls at once and redraw once, e.g. ``ex.set(top_k=5, top_p=0.9)``."""
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            raise ValueError(
                f"controls must be among {sorted(self.controls)}, but received {unknown}."
            )
        self._busy = True
        try:
            for name, value in values.items():
                self.controls[name].value = value
        finally:
            self._busy = False
        self.refresh()


_MARKS = {"red": (0.835, 0.369, 0.0, 0.45), "black": (0.0, 0.0, 0.0, 0.6)}


def diff_overlay(ax: Any, shape: tuple[int, int], mark: str = "red", **imshow_kwargs: Any) -> Any:
    """A transparent image over a heatmap; :func:`set_diff` shades the differing cells and puts
    an X on each (a shape, so colour is not the only sign).

    ``mark`` is "red" (vermillion, over blue maps) or "black" (over red-blue maps).
    """
    kwargs = {"interpolation": "nearest", "aspect": "auto", **imshow_kwargs}
    overlay = ax.imshow(np.zeros((*shape, 4)), **kwargs)
    overlay.tlab_mark = np.array(_MARKS[mark])
    colour = RED if mark == "red" else "black"
    marks = ax.scatter(
        [], [], marker=DIFFER_MARKER, s=60, color=colour, edgecolors="white", linewidths=0.8
    )
    marks.set_animated(True)  # drawn with the overlay (FigureView._draw)
    overlay.tlab_marks = marks
    return overlay


def set_diff(overlay: Any, differs: np.ndarray) -> None:
    """Show ``differs`` (a bool array of the heatmap's shape) as marked cells on ``overlay``."""
    rgba = np.zeros((*differs.shape, 4))
    rgba[differs] = overlay.tlab_mark
    overlay.set_data(rgba)
    rows, cols = np.nonzero(differs)
    overlay.tlab_marks.set_offsets(np.column_stack([cols, rows]) if len(rows) else np.empty((0, 2)))


def bar_colors(bars: Any, differs: np.ndarray, same: str = GREEN, other: str = RED) -> None:
    """Colour the student's bars: ``same`` where they match the reference, ``other`` (and a
    hatch) where not."""
    for bar, d in zip(bars, differs):
        bar.set_color(other if d else same)
        bar.set_hatch(DIFFER_HATCH if d else None)
        if d:
            bar.set_edgecolor("black")


def _is_heat_map(im: Any) -> bool:
    """A 2-D image drawn through a colour map (not a grey picture, not an RGBA overlay)."""
    return getattr(im.get_array(), "ndim", 0) == 2 and not im.get_cmap().name.startswith("gray")


def heat_maps(fig: Figure) -> list[Any]:
    """Every heat map of ``fig`` (colour bars' own axes left out)."""
    return [
        im
        for ax in fig.axes
        if not hasattr(ax, "_colorbar")
        for im in ax.get_images()
        if _is_heat_map(im)
    ]


def add_colour_bars(fig: Figure) -> None:
    """Give every heat map (a 2-D image with a colour map, not a grey picture) a colour bar."""
    for ax in list(fig.axes):
        if hasattr(ax, "_colorbar") or getattr(ax, "tlab_has_colour_bar", False):
            continue
        images = [im for im in ax.get_images() if _is_heat_map(im)]
        if images and ax.get_visible():
            fig.colorbar(images[0], ax=ax, shrink=0.8, pad=0.02)
            ax.tlab_has_colour_bar = True


def set_bar_heights(bars: Any, heights: np.ndarray) -> None:
    """Update a bar container's heights in place."""
    for bar, h in zip(bars, heights):
        bar.set_height(float(h))


# Heat maps of at most 12 x 12 cells get each cell's value printed on it, when the digits fit at
# MIN_VALUE_PT or more; larger maps rely on the colour bar and the readout (docs/accessibility.md).
VALUES_MAX_CELLS = 12
# Each printed value costs ~0.6 ms of drawing per frame (measured): past 72 cells in one figure
# (e.g. mask_explorer's four 8 x 8 maps) none are printed, to keep a slider step fast.
VALUES_MAX_PER_FIGURE = 72
MIN_VALUE_PT, MAX_VALUE_PT = 7.0, 9.0
EM_PER_CHAR, CELL_FILL = 0.64, 0.8  # a digit is ~0.64 em wide; text fills <= 80% of a cell


def _short(v: float) -> str:
    """A weight in [-1, 1] with two decimals and no leading zero: '.25', '1', '0', '-.5'."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    text = "0" if text in ("0", "-0") else text
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text


def _value_format(values: np.ndarray) -> Callable[[float], str]:
    """One format for a whole map: integers as such, weights in [-1, 1] short, else 3 digits."""
    finite = values[np.isfinite(values)]
    if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e4:
        return lambda v: f"{v:.0f}"
    if not finite.size or np.abs(finite).max() <= 1:
        return _short
    if np.abs(finite).max() < 10:
        return lambda v: f"{v:.2f}"
    return lambda v: f"{v:.3g}"


def _cell_text(v: float, fmt: Callable[[float], str], nan: str) -> str:
    if np.isnan(v):
        return nan
    if np.isinf(v):
        return "\u2212\u221e" if v < 0 else "\u221e"
    return fmt(v).replace("-", "\u2212")


class HeatmapValues:
    """The value of every cell printed on a small heat map (WCAG 1.4.1: colour is not the only
    way the number is given).

    Text artists are made on demand, one per cell, and drawn with the fast layer of the
    :class:`FigureView`; black or white, whichever contrasts with the cell's colour. Shown only
    while the map has at most :data:`VALUES_MAX_CELLS` rows and columns and the digits fit in a
    cell at :data:`MIN_VALUE_PT` or more.
    """

    def __init__(self, view: FigureView, image: Any) -> None:
        self.view = view
        self.image = image
        self.texts: dict[tuple[int, int], Any] = {}
        self.shown = False

    def _text(self, i: int, j: int) -> Any:
        if (i, j) not in self.texts:
            text = self.image.axes.text(
                0, 0, "", ha="center", va="center", fontsize=MAX_VALUE_PT, clip_on=True
            )
            self.view.animate(text)
            self.texts[(i, j)] = text
        return self.texts[(i, j)]

    def _font_size(self, rows: int, cols: int, width: int) -> float:
        """Largest size (pt) at which ``width`` characters fit in one cell, capped."""
        box = self.image.axes.get_window_extent()
        cell_w, cell_h = box.width / cols, box.height / rows
        px_per_pt = self.image.axes.figure.dpi / 72
        return min(MAX_VALUE_PT, CELL_FILL * cell_w / (EM_PER_CHAR * max(width, 1)) / px_per_pt,
                   0.6 * cell_h / px_per_pt)  # fmt: skip

    def small(self) -> bool:
        """True if the map is small enough for its values to be printed."""
        rows, cols = self.image.get_array().shape
        return rows <= VALUES_MAX_CELLS and cols <= VALUES_MAX_CELLS and self.image.get_visible()

    def update(self, allowed: bool = True) -> None:
        """Print the image's current values (or hide them when the map is too large or not
        ``allowed``)."""
        data = np.ma.filled(np.ma.asarray(self.image.get_array(), dtype=float), np.nan)
        rows, cols = data.shape
        for text in self.texts.values():
            text.set_visible(False)
        self.shown = self.image.tlab_values_shown = False
        if not (allowed and self.small()):
            return
        fmt = _value_format(data)
        nan = "NaN" if self.image.cmap.get_bad()[3] > 0 else ""  # a visible "bad" colour
        labels = [[_cell_text(v, fmt, nan) for v in row] for row in data]
        size = self._font_size(rows, cols, max(len(t) for row in labels for t in row))
        if size < MIN_VALUE_PT:
            return
        left, right, bottom, top = self.image.get_extent()
        if self.image.origin == "upper":
            ys = top + (np.arange(rows) + 0.5) * (bottom - top) / rows
        else:
            ys = bottom + (np.arange(rows) + 0.5) * (top - bottom) / rows
        xs = left + (np.arange(cols) + 0.5) * (right - left) / cols
        colours = self.image.cmap(self.image.norm(np.nan_to_num(data, posinf=1e30, neginf=-1e30)))
        for i in range(rows):
            for j in range(cols):
                if not labels[i][j]:
                    continue
                r, g, b = colours[i, j, :3]
                dark = 0.2126 * r**2.2 + 0.7152 * g**2.2 + 0.0722 * b**2.2 < 0.18
                text = self._text(i, j)
                text.set_position((xs[j], ys[i]))
                text.set_text(labels[i][j])
                text.set_fontsize(size)
                text.set_color("white" if dark else "black")
                text.set_visible(True)
        self.shown = self.image.tlab_values_shown = True
