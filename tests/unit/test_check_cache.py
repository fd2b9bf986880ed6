"""The cache of checked rule sets (`rlvp_dsl.check_cache`): a hit equals a check (rule set, diagnostics,
sources, and the compiled program's credits on real episodes), any changed input is a miss, a damaged
cache file is a silent miss, and a scoring process that hits imports neither lark nor the checker."""

from __future__ import annotations

import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from conftest import DATA, REPO
from rlvp_dsl import check_cache, loader
from rlvp_dsl.compile import compile_ruleset
from rlvp_dsl.diagnostics import render_text
from rlvp_dsl.pipeline import CheckResult, check_file, check_text, load_program

#: Every rule file of the repository that checks without errors (the others are never cached).
RULE_FILES = sorted(
    p for folder in ("rules", "examples", "tests") for p in (REPO / folder).rglob("*.rlvp") if check_file(str(p)).ok
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder for this test (the parser tables stay in this process's memory)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("RLVP_CACHE_DIR", str(folder))
    monkeypatch.delenv("RLVP_NO_CACHE", raising=False)
    return folder


def _canon(value: object) -> object:
    """`value` with every field (spans too: the trees' == leaves them out) and sets sorted (a set
    unpickled in another process may iterate in another order, as one built there would)."""
    if attrs.has(type(value)):
        return (type(value).__name__, [(f.name, _canon(getattr(value, f.name))) for f in attrs.fields(type(value))])
    if isinstance(value, (set, frozenset)):
        return ("set", sorted((_canon(v) for v in value), key=repr))
    if isinstance(value, dict):
        return ("dict", [(_canon(k), _canon(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    return value


def _same(a: CheckResult, b: CheckResult) -> None:
    """Equal results, spans included."""
    assert a.ok and b.ok
    assert a.ruleset == b.ruleset and _canon(a.ruleset) == _canon(b.ruleset)
    assert a.diagnostics == b.diagnostics and _canon(a.diagnostics) == _canon(b.diagnostics)
    assert {k: v.text for k, v in a.sources.items()} == {k: v.text for k, v in b.sources.items()}
    assert render_text(a.diagnostics, a.sources) == render_text(b.diagnostics, b.sources)


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("checked-*.pickle"))


def test_the_corpus_of_rule_files_is_not_empty() -> None:
    assert len(RULE_FILES) >= 20 and any(p.parent.name == "rules" for p in RULE_FILES)


def test_a_hit_equals_the_check_and_scores_the_same_on_real_episodes(cache: Path) -> None:
    """Every rule file: the cached result equals a full check, and the programs compiled from both
    give equal credits (reasons and spans included) on the shared tau2 corpus, or on the shipped
    tau2 sample without it."""
    from rlvp_dsl import read_paths

    corpus = DATA / "tau2_simulations"
    episodes = read_paths(corpus if corpus.is_dir() else REPO / "examples" / "episodes" / "airline_tau2_results.json")
    assert episodes
    for path in RULE_FILES:
        fresh = check_file(str(path))
        miss = check_file(str(path), cache=True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(loader, "load_files", None)  # a hit must not read or parse (TypeError if it does)
            hit = check_file(str(path), cache=True)
        _same(fresh, miss)
        _same(fresh, hit)
        assert fresh.ruleset is not None and hit.ruleset is not None
        ours, cached = compile_ruleset(fresh.ruleset), compile_ruleset(hit.ruleset)
        assert ours.to_json() == cached.to_json()
        for episode in episodes:
            a, b = ours.score(episode), cached.score(episode)
            assert a == b and _canon(a) == _canon(b), (path, episode.id)
    assert len(_entries(cache)) == len(RULE_FILES)


def test_load_program_uses_the_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(REPO / "rules" / "tau2_airline.rlvp")
    first = load_program(path)
    assert len(_entries(cache)) == 1
    monkeypatch.setattr(loader, "load_files", None)
    assert load_program(path).to_json() == first.to_json()


def _project(tmp_path: Path) -> Path:
    """main.rlvp, which includes inc.rlvp, reads manifest.json and tests with episode.json."""
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "format": "rlvp-tools/1",
                "tools": [{"name": "get_order", "tags": ["read"]}, {"name": "cancel", "tags": ["write"]}],
            }
        )
    )
    (tmp_path / "inc.rlvp").write_text("violation failed (-0.2) { on call error }\n")
    (tmp_path / "episode.json").write_text("[]")
    main = tmp_path / "main.rlvp"
    main.write_text(
        'include "inc.rlvp"\ntools from "manifest.json"\n'
        "violation blind (-0.5) { on call tag write }\n"
        'test "t" { episode "episode.json" expect total == 0 }\n'
    )
    return main


def test_an_edited_include_or_manifest_or_a_removed_episode_file_is_a_miss(tmp_path: Path, cache: Path) -> None:
    main = _project(tmp_path)
    first = check_file(str(main), cache=True)
    assert first.ok, first.diagnostics
    assert first.ruleset is not None and {r.name for r in first.ruleset.rules} == {"failed", "blind"}

    (tmp_path / "inc.rlvp").write_text("violation failed_twice (-0.3) { on call error }\n")
    second = check_file(str(main), cache=True)
    _same(second, check_file(str(main)))
    assert second.ruleset is not None and "failed_twice" in {r.name for r in second.ruleset.rules}

    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["tools"][0]["tags"] = ["write"]  # get_order now a write: `tag write` matches it too
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    third = check_file(str(main), cache=True)
    _same(third, check_file(str(main)))
    assert third.ruleset is not None and third.ruleset != second.ruleset

    (tmp_path / "episode.json").unlink()
    gone = check_file(str(main), cache=True)
    assert not gone.ok and any("test episode file not found" in d.message for d in gone.diagnostics)


def test_an_edited_root_file_is_a_miss(tmp_path: Path, cache: Path) -> None:
    rules = tmp_path / "r.rlvp"
    rules.write_text("violation a (-0.5) { on call error }\n")
    assert check_file(str(rules), cache=True).ok
    rules.write_text("violation a (-0.5) { on call error }\nviolation b (-0.1) { on call ok }\n")
    result = check_file(str(rules), cache=True)
    assert result.ruleset is not None and [r.name for r in result.ruleset.rules] == ["a", "b"]
    rules.write_text("violation a (+0.5) { on call error }\n")  # now an error (RV204): never served from the cache
    assert not check_file(str(rules), cache=True).ok


def _inputs(data: bytes) -> bytes:
    """The first record of a cache file (its inputs), as bytes."""
    stream = io.BytesIO(data)
    pickle.load(stream)
    return data[: stream.tell()]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: b"",
        lambda data: data[: len(data) // 2],
        lambda data: data[:-3],
        lambda data: b"not a pickle at all" + data,
        lambda data: pickle.dumps([("text", "elsewhere.rlvp", "0" * 64)]) + data,  # an input that no longer matches
        lambda data: _inputs(data) + pickle.dumps(("a rule set", "of the wrong", "shape")),
        lambda data: _inputs(data) + b"crlvp_dsl.ast\nNoSuchNode\n.",  # a class this version lacks
        lambda data: pickle.dumps([]) + data,  # no inputs recorded: never a hit
    ],
    ids=["empty", "half", "cut", "garbage", "stale", "wrong-shape", "missing-class", "no-inputs"],
)
def test_a_damaged_cache_file_is_a_silent_miss(tmp_path: Path, cache: Path, damage) -> None:
    rules = str(REPO / "rules" / "tau2_airline.rlvp")
    fresh = check_file(rules)
    check_file(rules, cache=True)
    [entry] = _entries(cache)
    entry.write_bytes(damage(entry.read_bytes()))
    result = check_file(rules, cache=True)
    _same(fresh, result)
    with pytest.MonkeyPatch.context() as mp:  # rewritten whole: the next run hits
        mp.setattr(loader, "load_files", None)
        _same(fresh, check_file(rules, cache=True))


def test_warnings_on_a_hit_equal_a_miss(cache: Path) -> None:
    """A lint run (RV3xx warnings) of a rule file that farms and double counts: the hit's diagnostics
    (three warnings) render the same."""
    path = str(REPO / "tests" / "golden" / "credits" / "progress.rlvp")
    fresh = check_file(path, lints=True)
    assert fresh.ok and [d.code for d in fresh.diagnostics] == ["RV301", "RV301", "RV302"]
    check_file(path, lints=True, cache=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loader, "load_files", None)
        _same(fresh, check_file(path, lints=True, cache=True))
    assert check_file(path, cache=True).diagnostics == check_file(path).diagnostics  # lints are part of the key


def test_a_check_warning_on_a_hit_equals_a_miss(tmp_path: Path, cache: Path) -> None:
    """A warning of the check itself (RV212, a tag close to a standard one), no lints."""
    rules = tmp_path / "r.rlvp"
    rules.write_text("tool a : wrte\nviolation v (-0.5) { on call error }\n")
    fresh = check_file(str(rules))
    assert fresh.ok and [d.code for d in fresh.diagnostics] == ["RV212"]
    check_file(str(rules), cache=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loader, "load_files", None)
        _same(fresh, check_file(str(rules), cache=True))


def test_text_in_memory_is_cached_by_its_text(cache: Path) -> None:
    one, two = "violation a (-0.5) { on call error }\n", "violation b (-0.5) { on call error }\n"
    assert check_text(one, "x.rlvp", cache=True).ok and check_text(two, "x.rlvp", cache=True).ok
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loader, "load_files", None)
        hit = check_text(two, "x.rlvp", cache=True)
    assert hit.ruleset is not None and [r.name for r in hit.ruleset.rules] == ["b"]


def test_no_cache_when_turned_off_or_unwritable(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rules = str(REPO / "rules" / "tau2_airline.rlvp")
    monkeypatch.setenv("RLVP_NO_CACHE", "1")
    assert check_file(rules, cache=True).ok and not cache.exists()
    monkeypatch.delenv("RLVP_NO_CACHE")
    with pytest.MonkeyPatch.context() as mp:  # no package source found (imported from a zip): no key, no cache
        mp.setattr(check_cache, "package_digest", lambda: "")
        assert check_file(rules, cache=True).ok and not cache.exists()
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("RLVP_CACHE_DIR", str(blocker / "cache"))  # cannot be made
    _same(check_file(rules), check_file(rules, cache=True))


def test_the_folder_keeps_at_most_max_entries(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        (tmp_path / f"r{i}.rlvp").write_text(f"violation v{i} (-0.5) {{ on call error }}\n")
        assert check_file(str(tmp_path / f"r{i}.rlvp"), cache=True).ok
    assert len(_entries(cache)) == 3


def test_a_new_package_or_python_is_another_file(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key holds the package's source digest: a changed file of rlvp_dsl names another entry."""
    path = str(REPO / "rules" / "tau2_airline.rlvp")
    digest = check_cache.package_digest.__wrapped__  # uncached
    assert digest() == digest() == check_cache.package_digest() and len(digest()) == 64
    before = check_cache.entry_path(path, None, False)
    assert check_cache.entry_path(path, None, True) != before  # lints or not
    monkeypatch.setattr(check_cache, "package_digest", lambda: "another release")
    assert check_cache.entry_path(path, None, False) != before


# ---- whole processes ---------------------------------------------------------------------------

RULES = REPO / "rules" / "tau2_airline.rlvp"
TAU2 = REPO / "examples" / "episodes" / "airline_tau2_results.json"

_RUN = (
    "import contextlib, io, json, sys\n"
    "from rlvp_dsl.cli.score import main\n"
    "out, err = io.StringIO(), io.StringIO()\n"
    "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
    "    code = main(sys.argv[1:])\n"
    "print(json.dumps({'modules': sorted(sys.modules), 'code': code, 'out': out.getvalue(), 'err': err.getvalue()}))\n"
)


def _score(cache_dir: Path, *argv: str) -> dict:
    env = {**os.environ, "RLVP_CACHE_DIR": str(cache_dir)}
    env.pop("RLVP_NO_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", _RUN, *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_scoring_run_that_hits_imports_no_lark_nor_checker_and_prints_the_same(tmp_path: Path) -> None:
    checker = {"lark", "rlvp_dsl.check", "rlvp_dsl.parser", "rlvp_dsl.loader", "rlvp_dsl.syntax.transform"}
    cold = _score(tmp_path, str(RULES), str(TAU2))
    warm = _score(tmp_path, str(RULES), str(TAU2))
    assert cold["code"] == warm["code"] == 0
    assert checker <= set(cold["modules"])  # the first run checked: the guard below is not vacuous
    assert not checker & set(warm["modules"]) and not any(m.startswith("lark.") for m in warm["modules"])
    assert "credit hash: sha256:" in warm["out"]
    assert (warm["out"], warm["err"]) == (cold["out"], cold["err"])
