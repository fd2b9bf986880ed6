"""The data-only conformance suite in tests/golden/.

* ``diagnostics/<case>.rlvp`` -> ``<case>.expected``: the rendered diagnostics
  (``file:line:col: error[CODE]: message``, source line, caret, help);
* ``lints/<case>.rlvp`` -> ``<case>.expected``: the rendered lint warnings (RV3xx, `rlvp_dsl.lints`);
* ``credits/<case>.rlvp`` + ``<case>.jsonl`` (OpenAI chat, read with
  `rlvp_dsl.readers.read_episodes`) or ``<case>.events.json`` (a list of events in
  `Event.to_json` form, for env signals) -> ``<case>.expected.json``: the credits.

``RLVP_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` rewrites the expected files; review
the diff by hand against the semantics in rlvp_dsl/compile.py before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlvp_dsl import check_file, load_program
from rlvp_dsl.diagnostics import render_text, sort_and_cap
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.readers import read_episodes

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("RLVP_UPDATE_GOLDEN") == "1"
INTERNAL_NAMES = ("__ANON", "$END", "LPAR", "RPAR", "LBRACE", "RBRACE", "SIGNED_NUMBER", "QUOTED_NAME")

DIAGNOSTIC_CASES = sorted(p.stem for p in (GOLDEN / "diagnostics").glob("*.rlvp"))
CREDIT_CASES = sorted(p.stem for p in (GOLDEN / "credits").glob("*.rlvp"))
LINT_CASES = sorted(p.stem for p in (GOLDEN / "lints").glob("*.rlvp"))

#: Cases whose checked-in expectation is right and the library is wrong (reported; strict xfail).
KNOWN_BUGS: dict[str, str] = {}


def _cases(cases):
    return [
        pytest.param(c, marks=pytest.mark.xfail(reason=KNOWN_BUGS[c], strict=True)) if c in KNOWN_BUGS else c
        for c in cases
    ]


@pytest.fixture(autouse=True)
def _at_repo_root(monkeypatch):
    monkeypatch.chdir(REPO)


def _compare(path: Path, actual: str) -> None:
    if UPDATE and path.stem.split(".")[0] not in KNOWN_BUGS:
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with RLVP_UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(encoding="utf-8")


def render_case(rel: str, lints: bool = False) -> str:
    result = check_file(rel, lints=lints)
    kept, dropped = sort_and_cap(result.diagnostics)
    return render_text(kept, result.sources, dropped=dropped) + "\n"


@pytest.mark.parametrize("case", _cases(DIAGNOSTIC_CASES))
def test_diagnostics(case):
    """The rule file's rendered diagnostics equal the checked-in expectation."""
    rel = f"tests/golden/diagnostics/{case}.rlvp"
    actual = render_case(rel)
    _compare(GOLDEN / "diagnostics" / f"{case}.expected", actual)
    assert actual.startswith("tests/golden/diagnostics/") and ": error[RV" in actual
    assert "\n   | " in actual or "\n    | " in actual, "a caret line"
    for name in INTERNAL_NAMES:
        assert name not in actual


@pytest.mark.parametrize("case", LINT_CASES)
def test_lints(case):
    """The rule file compiles, and its rendered lint warnings equal the checked-in expectation."""
    rel = f"tests/golden/lints/{case}.rlvp"
    assert check_file(rel).ok
    actual = render_case(rel, lints=True)
    _compare(GOLDEN / "lints" / f"{case}.expected", actual)
    assert ": warning[RV3" in actual and ": error[" not in actual


def read_case_episodes(case: str) -> list[Episode]:
    jsonl = GOLDEN / "credits" / f"{case}.jsonl"
    if jsonl.exists():
        return read_episodes(f"tests/golden/credits/{case}.jsonl")
    events = json.loads((GOLDEN / "credits" / f"{case}.events.json").read_text(encoding="utf-8"))
    return [Episode(case, tuple(Event(**e) for e in events))]


def credits_json(case: str) -> str:
    program = load_program(f"tests/golden/credits/{case}.rlvp")
    out = []
    for episode in read_case_episodes(case):
        credits = sorted(program.score(episode), key=lambda c: (c.event_index, c.rule, c.trigger))
        out.append({"episode": episode.id, "credits": [c.to_json() for c in credits]})
    return json.dumps(out, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", CREDIT_CASES)
def test_credits(case):
    """Scoring the case's episodes gives exactly the checked-in credits."""
    _compare(GOLDEN / "credits" / f"{case}.expected.json", credits_json(case))


@pytest.mark.parametrize("case", CREDIT_CASES)
def test_credits_reference(case):
    """The reference interpreter agrees with the golden credits."""
    from rlvp_dsl import reference

    result = check_file(f"tests/golden/credits/{case}.rlvp")
    program = load_program(f"tests/golden/credits/{case}.rlvp")
    for episode in read_case_episodes(case):
        key = lambda c: (c.event_index, c.rule, c.value, c.trigger, c.reason, c.related_event, c.deadline, c.location)  # noqa: E731
        assert sorted(map(key, reference.score_reference(result.ruleset, episode))) == sorted(
            map(key, program.score(episode))
        )


def test_every_case_has_expectations():
    """Every golden rule file has its expected file (no silently skipped case)."""
    for case in DIAGNOSTIC_CASES:
        assert (GOLDEN / "diagnostics" / f"{case}.expected").exists(), case
    for case in LINT_CASES:
        assert (GOLDEN / "lints" / f"{case}.expected").exists(), case
    for case in CREDIT_CASES:
        assert (GOLDEN / "credits" / f"{case}.expected.json").exists(), case
        assert any((GOLDEN / "credits" / f"{case}{ext}").exists() for ext in (".jsonl", ".events.json")), case
