"""Shared pytest set-up: hypothesis profiles and the location of the shared data.

Profiles (select with ``HYPOTHESIS_PROFILE=ci`` or ``--hypothesis-profile ci``):

* ``default`` -- 60 examples per property, no deadline (the machine is shared);
* ``ci``      -- 30 examples, derandomised so CI runs are reproducible;
* ``long``    -- 500 examples, for a soak run by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", max_examples=60, deadline=None)
settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``<repo>/../shared/data``; the test is skipped when it is missing."""
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA}")
    return DATA
