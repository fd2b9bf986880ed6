"""Pausing Python's cyclic garbage collector while a large acyclic structure is built.

Parsing a rule file and reading a trajectory file allocate millions of small objects
(lark trees, syntax nodes, JSON values, events) and no garbage cycles: reference counting
frees all of it.  With the collector on, every full pass walks every live object -- the
ones being built and everything the process already holds (a trainer's model, episodes
read before) -- so building grows superlinear in its size.  Pausing it for the build
leaves memory use unchanged; the previous state is restored after, and an exception
passes through.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """``with collector_paused(): ...`` -- the cyclic collector is off inside (if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
