"""Accessibility of the course's outputs without a browser (issue 40).

Colours (WCAG 2.1 contrast against white, a colour-blind-safe palette in one place), the text
alternative of figures (explorers' and the notebooks' own, in JupyterLab and in nbconvert's HTML
export), the explorer's parts for screen readers, and the feedback page's style. The browser
side (axe-core, the keyboard) is ``tests/test_accessibility_browser.py``.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from transformer_lab.grading.channels import page_style
from transformer_lab.widgets import _common as ui
from transformer_lab.widgets import a11y


@pytest.fixture(autouse=True)
def _as_a_student(monkeypatch):
    """The explorers as a student sees them, whatever an earlier test in this process set."""
    monkeypatch.delenv("TLAB_GRADING", raising=False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)


def test_contrast_ratio_matches_wcag_examples():
    assert a11y.contrast_ratio("#000000") == pytest.approx(21.0)
    assert a11y.contrast_ratio("#ffffff") == pytest.approx(1.0)
    assert a11y.contrast_ratio("#767676") == pytest.approx(4.54, abs=0.01)
    with pytest.raises(ValueError, match="#rrggbb"):
        a11y.contrast_ratio("red")


@pytest.mark.parametrize("name", ["BLUE", "ORANGE", "GREY", "RED", "GREEN"])
def test_line_and_bar_colours_reach_3_to_1_against_white(name):
    assert a11y.contrast_ratio(getattr(ui, name)) >= 3.0, name


def test_palette_is_okabe_ito_and_match_differs_are_told_apart_without_colour():
    okabe = {c.lower() for c in a11y.OKABE_ITO.values()}
    for name in ("BLUE", "ORANGE", "RED", "GREEN"):
        assert getattr(ui, name).lower() in okabe, name
    assert ui.GREEN.lower() != ui.RED.lower()
    assert ui.DIFFER_HATCH and ui.DIFFER_MARKER  # shape, not only colour


def test_text_colours_of_readouts_reach_aa():
    for colour in (ui.TEXT_OK, ui.TEXT_ERROR):
        assert a11y.contrast_ratio(colour) >= 4.5, colour


def test_differing_bars_are_hatched_not_only_coloured():
    import numpy as np

    fig, (ax,) = ui.new_figure()
    bars = ax.bar(range(3), [1, 2, 3])
    ui.bar_colors(bars, np.array([False, True, False]))
    assert [b.get_hatch() for b in bars] == [None, ui.DIFFER_HATCH, None]


def test_describe_figure_names_titles_axes_ranges_and_series():
    import numpy as np

    fig, (ax1, ax2) = ui.new_figure(2)
    ax1.plot([0, 1, 2], [0, 1, 4], label="reference")
    ax1.plot([0, 1, 2], [0, 1, 3], label="yours")
    ax1.set(title="softmax", xlabel="position", ylabel="weight")
    ax1.legend()
    ax2.imshow(np.arange(12.0).reshape(3, 4), cmap="Blues", vmin=0, vmax=11)
    ax2.set_title("weights")
    text = a11y.describe_figure(fig)
    for part in ("2 panels", "softmax", "position", "weight", "reference, yours", "3 rows by 4"):
        assert part in text, (part, text)
    assert "0 to 11" in text


def test_every_explorer_image_has_a_description_and_screen_reader_parts():
    from transformer_lab import widgets

    ex = widgets.softmax_explorer()
    assert ex.description.value.startswith("Figure with"), ex.description.value
    assert "tlab-figure-description" in ex.description._dom_classes
    assert "tlab-readout" in ex.readout._dom_classes
    script = ex.a11y_script.outputs[0]["data"]["application/javascript"]
    for needle in ("data-lm-suppress-shortcuts", "aria-label", "aria-valuetext", "aria-live"):
        assert needle in script
    assert "http" not in script  # nothing from a CDN
    before = ex.description.value
    ex.controls[next(iter(ex.controls))].value = ex.controls[next(iter(ex.controls))].max
    assert ex.description.value  # refreshed with the plot (may or may not change)
    assert isinstance(before, str)


def test_heat_maps_get_a_colour_bar():
    from transformer_lab import widgets

    ex = widgets.attention_explorer()
    assert any(hasattr(ax, "_colorbar") for ax in ex.figure.axes)


def _values_on(shape, values=None, **imshow):
    """A FigureView with one heat map of ``shape`` and its printed values, updated once."""
    import numpy as np

    fig, (ax,) = ui.new_figure(figsize=(4, 4))
    data = np.linspace(0, 1, shape[0] * shape[1]).reshape(shape) if values is None else values
    im = ax.imshow(data, **{"cmap": "Blues", "vmin": 0, "vmax": 1, **imshow})
    view = ui.FigureView(fig)
    printed = ui.HeatmapValues(view, im)
    printed.update()
    view.render_png()
    shown = {k: t.get_text() for k, t in printed.texts.items() if t.get_visible()}
    return printed, shown


def test_small_heat_maps_print_every_value_and_large_ones_none():
    printed, shown = _values_on((3, 4))
    assert len(shown) == 12 and shown[(0, 0)] == "0" and shown[(2, 3)] == "1"
    assert printed.shown and "each cell's value printed" in a11y.describe_figure(
        printed.image.figure
    )
    printed, shown = _values_on((13, 13))
    assert not printed.shown and not shown  # the colour bar and the readout suffice


def test_printed_values_contrast_with_their_cell_and_follow_the_data():
    import numpy as np

    printed, shown = _values_on((1, 2), np.array([[0.0, 1.0]]))
    light, dark = printed.texts[(0, 0)], printed.texts[(0, 1)]
    assert light.get_color() == "black" and dark.get_color() == "white"  # Blues: 0 light, 1 dark
    printed.image.set_data(np.array([[0.25, -np.inf]]))
    printed.image.set_clim(-1, 1)
    printed.update()
    assert printed.texts[(0, 0)].get_text() == ".25"
    assert not printed.texts[(0, 1)].get_visible()  # imshow masks -inf: an empty cell, no text


def test_printed_values_keep_their_format_and_nan_when_the_map_shows_it():
    import matplotlib
    import numpy as np

    cmap = matplotlib.colormaps["Blues"].with_extremes(bad=ui.RED)
    _, shown = _values_on((1, 3), np.array([[1.5, np.nan, 3.0]]), cmap=cmap, vmax=6)
    assert list(shown.values()) == ["1.50", "NaN", "3.00"]
    _, shown = _values_on((1, 2), np.array([[np.nan, 2.0]]), vmax=6)  # transparent bad colour
    assert list(shown.values()) == ["2"]


def test_printed_values_are_left_out_when_the_digits_would_not_fit():
    import numpy as np

    fig, (ax,) = ui.new_figure(figsize=(1.2, 1.2))
    im = ax.imshow(np.full((12, 12), 0.123456), cmap="Blues", vmin=0, vmax=1)
    printed = ui.HeatmapValues(ui.FigureView(fig), im)
    printed.update()
    assert not printed.shown


def test_figure_formatter_gives_html_with_alt_and_png_metadata():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    assert a11y.install_figure_descriptions(shell)
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.plot([1, 2, 3])
    ax.set_title("a line")
    data, metadata = shell.display_formatter.format(fig)
    assert "text/html" in data
    assert re.search(
        r'<img src="data:image/png;base64,[^"]+" alt="Figure with 1 panel', data["text/html"]
    )
    if "image/png" in data:
        assert "a line" in metadata["image/png"]["alt"]


def test_nbconvert_export_shows_the_alt_text(tmp_path):
    from matplotlib.figure import Figure
    from nbconvert import HTMLExporter

    fig = Figure()
    fig.subplots().plot([1, 2, 3])
    fig.axes[0].set_title("exported line")
    cell = nbformat.v4.new_code_cell("fig")
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/html": a11y.figure_html(fig), "text/plain": "<Figure>"},
        )
    ]
    nb = nbformat.v4.new_notebook(cells=[cell])
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    assert "No description has been provided" not in body
    assert "exported line" in body


def test_feedback_page_gets_contrast_css_lang_and_alt():
    page = (
        "<!DOCTYPE html>\n<html>\n<head><style>p{}</style></head><body>"
        '<img src="data:image/png;base64,AA==">'
        '<img src="x.png" alt="No description has been provided for this image"></body></html>'
    )
    out = page_style.accessible_feedback_page(page)
    assert '<html lang="en">' in out and "tlab-a11y-css" in out
    assert "No description has been provided" not in out
    assert all("alt=" in tag for tag in re.findall(r"<img\b[^>]*>", out))
    assert page_style.accessible_feedback_page(out) == out
    assert "white-space: pre-wrap" in page_style.FEEDBACK_CSS


def test_grading_mode_installs_nothing(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("TLAB_GRADING", "1")
    assert not a11y.install_figure_descriptions(InteractiveShell.instance())
