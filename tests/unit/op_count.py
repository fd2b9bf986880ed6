"""Operation counts for scaling tests: deterministic, unlike wall-clock time (timings live in benchmarks/).

`count_steps(fn, *args)` runs ``fn`` under `sys.settrace` and counts its steps: every
Python function call (any module, the parser's included) plus every line executed in
a frame of ``rlvp_dsl``.  The count depends on the code and the input only, not on
the machine or its load, so "doubling the input at most doubles the work" can be
asserted exactly.  (Work inside one C call -- a ``list.index`` -- counts once.)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

PACKAGE = str(Path(__file__).resolve().parents[2] / "rlvp_dsl")


class StepLimit(AssertionError):
    """More steps than the caller allowed: the work grows faster than it should."""


def count_steps(fn: Callable[..., Any], *args: Any, limit: int | None = None, prefix: str = PACKAGE) -> int:
    """Python calls + lines executed under ``prefix`` while ``fn(*args)`` runs.

    Raises `StepLimit` as soon as the count passes ``limit`` (so a blow-up fails
    quickly instead of running for hours).
    """
    n = 0

    def bump() -> None:
        nonlocal n
        n += 1
        if limit is not None and n > limit:
            raise StepLimit(f"more than {limit} steps")

    def local(frame, event, arg):
        if event == "line":
            bump()
        return local

    def on_call(frame, event, arg):
        bump()
        return local if frame.f_code.co_filename.startswith(prefix) else None

    old = sys.gettrace()
    sys.settrace(on_call)
    try:
        fn(*args)
    finally:
        sys.settrace(old)
    return n


def assert_linear(fn: Callable[[int], Any], n: int, ratio: float = 2.5) -> tuple[int, int]:
    """Steps of ``fn(2 n)`` are at most ``ratio`` times those of ``fn(n)`` (linear: ~2, quadratic: ~4).

    ``fn(n)`` runs once first, untraced, so caches are warm for both counts.
    """
    fn(n)
    small = count_steps(fn, n)
    large = count_steps(fn, 2 * n, limit=int(ratio * small) + 1)
    assert large <= ratio * small, (small, large)
    return small, large
