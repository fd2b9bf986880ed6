"""Fixtures of tests/lsp: `lsp`, one real server process per test module (`client.Session`).
Skipped without the extra ``lsp`` (pygls)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pygls", reason="rlvp-lsp needs the extra lsp (pygls)")


@pytest.fixture(scope="module")
def lsp() -> Iterator[Any]:
    from .client import Session

    session = Session()
    yield session
    session.stop()
