"""Helpers of the browser tests: open a local page, measure a screenshot."""

from __future__ import annotations

import io
import os


def open_page(driver, path) -> None:
    """Open a local file (``get`` returns after the load event: the page's inline script has run)."""
    driver.get(f"file://{os.path.abspath(path)}")


def pixel_spread(png: bytes) -> tuple[float, int]:
    """(the variance of the grey levels, the number of distinct colours) of a screenshot."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    grey = ImageStat.Stat(image.convert("L"))
    colours = image.getcolors(maxcolors=1 << 20) or []
    return grey.var[0], len(colours)
