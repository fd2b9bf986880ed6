"""Lay a `Report` out as one self-contained HTML file (jinja2; CSS and script inline).

The page embeds the episodes as JSON (`Report.data_json`) and its script draws an
episode's timeline only when it is opened, so a report of thousands of episodes opens
at once.  Nothing is loaded from the network: no font, no stylesheet, no script.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..compare import Comparison
from ..report import fixed
from .model import RESULT_PREVIEW, Report, SideBySide, sign_of

if TYPE_CHECKING:  # imported where used: only the HTML commands load jinja2
    import jinja2

TEMPLATES = Path(__file__).resolve().parent / "templates"


@functools.lru_cache(maxsize=None)
def environment(folder: str = str(TEMPLATES)) -> jinja2.Environment:
    """The jinja2 environment of the templates in `folder` (autoescaped, strict about undefined names)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _signed(x: float | None, spec: str = "+.2f") -> str:
    """`x` formatted by `spec`, never a negative zero (a correlation of -4e-17 is ``+0.000``)."""
    return "n/a" if x is None else fixed(x, spec)


def render_report(report: Report, side: SideBySide | None = None) -> str:
    """The report page as HTML text; with `side`, the comparison page of `rlvp-score --compare`
    (`report` is then ``side.b``)."""
    template = environment().get_template("report.html.j2")
    return template.render(
        report=report, side=side, data_json=report.data_json(), preview=RESULT_PREVIEW, signed=_signed, sign=sign_of
    )


def render_comparison(a: Report, b: Report, comparison: Comparison) -> str:
    """The comparison page: `comparison` (`rlvp_dsl.compare.compare` of A and B), A's and B's rule tables
    side by side, and the episodes under B."""
    return render_report(b, SideBySide(a, b, comparison))


def write_report(report: Report, path: str | os.PathLike[str]) -> Path:
    """Write the page to `path`, creating its folder; returns the path.

    Raises:
        OSError: the folder or the file cannot be written.
    """
    out = Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_report(report), encoding="utf-8")
    return out
