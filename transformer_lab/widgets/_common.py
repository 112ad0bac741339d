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

__all__ = [
    "Explorer", "FigureView", "new_figure", "render_png", "encode_png", "set_bar_heights",
    "Rectangle", "widgets", "STYLE", "BLUE", "ORANGE", "GREY", "RED", "GREEN",
    "diff_overlay", "set_diff", "bar_colors",
]  # fmt: skip

DPI = 80  # ~800 px wide figures: sharp enough, and cheap to draw and encode
STYLE = {"description_width": "initial"}  # never truncate a control's label
BLUE, ORANGE, GREY, RED = "#1f77b4", "#ff7f0e", "#b0b0b0", "#d62728"
GREEN = "#2ca02c"

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
        image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%", height="auto"))
        readout = widgets.HTML()
        header = widgets.HTML(f"<b>{html.escape(title)}</b>")
        row = widgets.HBox(list(controls.values()), layout=widgets.Layout(flex_flow="row wrap"))
        footer_html = widgets.HTML(footer)
        super().__init__(children=[header, row, readout, image, footer_html])
        self.footer = footer_html
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
        self.refresh()
        # Lay out once with constrained layout, then freeze it: re-solving the layout on every
        # redraw would double the cost of a slider step for no visible gain.
        self.figure.set_layout_engine("none")

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
            self.readout.value = f"<span style='color:{RED}'>{html.escape(message)}</span>"
            raise
        finally:
            self._busy = False
        self._state = state
        self.readout.value = readout
        self.image.value = self.view.render_png()
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


_MARKS = {"red": (0.84, 0.15, 0.16, 0.45), "black": (0.0, 0.0, 0.0, 0.6)}


def diff_overlay(ax: Any, shape: tuple[int, int], mark: str = "red", **imshow_kwargs: Any) -> Any:
    """A transparent image over a heatmap; :func:`set_diff` paints the differing cells.

    ``mark`` is "red" (over blue maps) or "black" (over red-blue maps, where red would hide).
    """
    kwargs = {"interpolation": "nearest", "aspect": "auto", **imshow_kwargs}
    overlay = ax.imshow(np.zeros((*shape, 4)), **kwargs)
    overlay.tlab_mark = np.array(_MARKS[mark])
    return overlay


def set_diff(overlay: Any, differs: np.ndarray) -> None:
    """Show ``differs`` (a bool array of the heatmap's shape) as marked cells on ``overlay``."""
    rgba = np.zeros((*differs.shape, 4))
    rgba[differs] = overlay.tlab_mark
    overlay.set_data(rgba)


def bar_colors(bars: Any, differs: np.ndarray, same: str = GREEN, other: str = RED) -> None:
    """Colour the student's bars: ``same`` where they match the reference, ``other`` where not."""
    for bar, d in zip(bars, differs):
        bar.set_color(other if d else same)


def set_bar_heights(bars: Any, heights: np.ndarray) -> None:
    """Update a bar container's heights in place."""
    for bar, h in zip(bars, heights):
        bar.set_height(float(h))
