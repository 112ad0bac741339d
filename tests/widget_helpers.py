"""Helpers shared by the explorer tests: compare the PNGs an explorer shows."""

from __future__ import annotations

import io

import numpy as np


def pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.int16)


def changes_picture(explorer, name, value) -> bytes:
    """Set one control and assert the shown PNG changed; return the new PNG."""
    before = explorer.image.value
    explorer.controls[name].value = value
    after = explorer.image.value
    assert after[:8] == b"\x89PNG\r\n\x1a\n"
    assert after != before, f"moving {name} to {value!r} did not change the picture"
    assert np.abs(pixels(after) - pixels(before)).max() > 50, (
        f"moving {name} changed no visible pixel"
    )
    return after


def assert_blit_matches_full_draw(explorer, max_fraction=0.003):
    """The cached-background frame must show what a full redraw shows (no stale layer).

    Animated artists are drawn on top rather than in z-order, so a few pixels where a static
    line crosses a bar may differ; anything stale would differ in many more.
    """
    blitted = pixels(explorer.image.value)
    view = explorer.view
    artists = view.fast + view.slow
    artists += [a.tlab_marks for a in artists if getattr(a, "tlab_marks", None) is not None]
    for a in artists:
        a.set_animated(False)
    try:
        from transformer_lab.widgets._common import render_png

        full = pixels(render_png(explorer.figure))
    finally:
        for a in artists:
            a.set_animated(True)
        view.invalidate()
    differing = (np.abs(blitted - full).max(axis=-1) > 40).mean()
    assert differing < max_fraction, f"{differing:.1%} of pixels differ from a full redraw"
