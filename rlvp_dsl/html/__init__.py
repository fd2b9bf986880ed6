"""The HTML credit report of `rlvp-score --html`: one self-contained page (CSS and script inline).

`model.py` decides what goes where (pure Python, no jinja2); `render.py` lays it out with
the jinja2 templates in ``templates/``.  docs/scoring.md, "The HTML report".
"""

from .model import Report, SideBySide, build_report
from .render import render_comparison, render_report, write_report

__all__ = ["Report", "SideBySide", "build_report", "render_comparison", "render_report", "write_report"]
