"""The public strategies (rlvp_dsl.testing): valid episodes, literals mined from rules, shrinking."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import find, given, settings

from rlvp_dsl import load_program
from rlvp_dsl.events import STATUSES
from rlvp_dsl.manifests import load_manifest
from rlvp_dsl.regex import compile_regex
from rlvp_dsl.testing import calls, episodes, events, regex_samples, vocabulary

from conftest import REPO, data_path

AIRLINE = REPO / "rules" / "tau2_airline.rlvp"
MANIFEST = data_path("tau2/airline/tools_manifest.json")  # shipped in examples/data
program = load_program(str(AIRLINE))


def _valid(episode, tool_params):
    for i, e in enumerate(episode.events):
        assert e.index == i
        assert e.status in STATUSES
        if e.kind == "call":
            assert e.tool in tool_params
            params = tool_params[e.tool]
            if params:
                assert set(e.arguments) <= set(params), (e.tool, e.arguments)
            if e.status == "malformed":
                assert e.arguments == {} and e.raw_arguments is not None
        else:
            assert e.kind in ("user", "assistant") and e.tool is None


@settings(max_examples=40)
@given(data=episodes(load_manifest(str(MANIFEST)), rules=program))
def test_episodes_over_the_tau2_manifest_are_valid(data):
    """Episodes over the tau2 airline manifest call its tools with its parameters only."""
    manifest = load_manifest(str(MANIFEST))
    _valid(data, {t.name: t.params for t in manifest.tools})
    assert len(data.events) <= 12


@settings(max_examples=40)
@given(episodes(program, max_events=6))
def test_episodes_over_a_program_use_its_tool_table(episode):
    """Episodes over a Program call only its declared tools and carry their tags."""
    _valid(episode, {name: info.params for name, info in program.tools.items()})
    for e in episode.calls:
        assert e.tags == program.tools[e.tool].tags


@settings(max_examples=30)
@given(calls(program, index=3), events(program, messages=False))
def test_calls_and_events(call, event):
    """`calls` draws a call at the given index; `events(messages=False)` only calls."""
    assert call.kind == "call" and call.index == 3
    assert event.kind == "call" and event.index == 0


# A user-style property, written the way the docs tell rule authors to write theirs: the
# airline rules pay positive credit on calls only for reads, and only once per episode
# (locating a reservation +0.2, a search +0.1); on an assistant turn at most 0.4 (the report
# +0.1 and a confirmed change +0.3).
@settings(max_examples=60)
@given(episodes(program, max_events=10))
def test_user_style_positive_credit_is_bounded(episode):
    """Positive airline credit lands on reads (0.3 at most per episode) and assistant turns (0.4 each)."""
    credits = program.score(episode)
    paid = [(episode.events[c.event_index], c.value) for c in credits if c.value > 0]
    assert all(e.kind == "assistant" or "read" in e.tags for e, _ in paid)
    assert sum(v for e, v in paid if e.kind == "call") <= 0.3 + 1e-9
    turns = sum(1 for e in episode.events if e.kind == "assistant")
    assert sum(v for e, v in paid if e.kind == "assistant") <= 0.4 * turns + 1e-9


def test_counterexamples_shrink_to_one_small_event():
    """A search for 'an unconfirmed write' shrinks to one call with at most its target argument."""

    def unconfirmed(ep):
        return any(c.rule == "write_unconfirmed" for c in program.score(ep))

    found = find(episodes(program), unconfirmed, settings=settings(derandomize=True, database=None))
    assert len(found.events) == 1
    assert found.events[0].status == "ok" and len(found.events[0].arguments) <= 1


def test_vocabulary_mines_the_rules_literals():
    """Texts and argument values the rules test are in the pools, and regex samples really match."""
    vocab = vocabulary(program)
    assert "TRANSFERRED TO A HUMAN AGENT" in vocab.assistant_texts
    assert "yes" in vocab.user_texts
    swe = vocabulary(load_program(str(REPO / "rules" / "swe.rlvp")))
    assert {"str_replace", "view"} <= set(swe.values_for("command"))
    pattern = r"\brm\s+-[a-zA-Z]*(rf|fr)[a-zA-Z]*\s+(\/|~|\*)(\s|$)|\bmkfs\b"
    samples = regex_samples(pattern)
    assert len(samples) >= 2
    assert all(compile_regex(pattern).search(s) for s in samples)
    assert regex_samples(r"[^a]+") == ["b"]
    assert regex_samples(r"[^ab]x") == ["cx"]  # a negated class: the first pool character it accepts
    assert regex_samples(r"(?=x)") == []  # outside the supported syntax: no sample


def test_bad_arguments_are_clear_errors():
    """Wrong tool tables, statuses and sizes raise TypeError/ValueError naming the problem."""
    with pytest.raises(TypeError, match="tools must be"):
        episodes(42)
    with pytest.raises(ValueError, match="statuses"):
        calls(program, statuses=["fine"])
    with pytest.raises(ValueError, match="min_events"):
        episodes(program, min_events=5, max_events=2)
    with pytest.raises(ValueError, match="at least one tool"):
        episodes([])


def test_core_library_imports_without_hypothesis():
    """Without hypothesis, `import rlvp_dsl` and the in-file test runner work, and the
    strategies of rlvp_dsl.testing name the pip command."""
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import rlvp_dsl, rlvp_dsl.compile, rlvp_dsl.testing.rule_tests\n"
        "try:\n    from rlvp_dsl.testing import episodes\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert "pip install hypothesis" in out.stdout


def test_the_docs_pytest_example_runs(tmp_path):
    """The pytest file shown in docs/testing-rules.md passes as written (run from the repo root)."""
    import re

    text = (REPO / "docs" / "testing-rules.md").read_text(encoding="utf-8")
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    path = tmp_path / "test_doc_example.py"
    path.write_text(code, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
