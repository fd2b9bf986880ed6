"""The limits of docs/language.md ("Limits"): include chains, rule-set size, huge tokens -- each an error
with a caret below or past the limit, never a RecursionError, a MemoryError or a 50 MB echo."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlvp_dsl import check_text, loads
from rlvp_dsl import loader
from rlvp_dsl.analysis import Universe
from rlvp_dsl.diagnostics import MAX_MESSAGE, Diagnostic, render_json, render_text, sort_and_cap
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.lints import lint
from rlvp_dsl.pipeline import check_file, load_program

HEAD = "tool a : read target x\ntool b : write target x\n"


def _chain(tmp_path: Path, n: int) -> Path:
    """f0 includes f1 includes ... f(n-1); file i declares tool ti and rule vi."""
    for i in range(n):
        include = f'include "f{i + 1}.rlvp"\n' if i + 1 < n else ""
        (tmp_path / f"f{i}.rlvp").write_text(
            include + f"tool t{i} : read\nviolation v{i} (-0.001) {{ on call t{i} error }}\n"
        )
    return tmp_path / "f0.rlvp"


@pytest.fixture
def default_recursion_limit():
    """Python's default recursion limit, whatever a plugin set: a recursive walk would trip it."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


# ---- include chains ------------------------------------------------------------


def test_include_chain_of_max_files_compiles(tmp_path, default_recursion_limit):
    """A chain of MAX_FILES (1,000) files checks, lints and compiles; includes come first, and it scores."""
    root = _chain(tmp_path, loader.MAX_FILES)
    result = check_file(str(root), lints=True)
    assert result.ok, result.diagnostics[:3]
    assert {d.code for d in result.diagnostics} <= {"RV304"}  # 1,000 rules together outweigh the outcome
    program = load_program(str(root))
    assert [r.name for r in program.rules[:2]] == ["v999", "v998"] and program.rules[-1].name == "v0"
    credits = program.score(Episode("e", (Event(0, "call", tool="t500", status="error"),)))
    assert [c.rule for c in credits] == ["v500"]


def test_include_chain_past_max_files_is_rv001_at_the_include(tmp_path, default_recursion_limit):
    """File 1,001 of a chain is RV001 at the include that names it (in file 1,000), nothing else."""
    root = _chain(tmp_path, loader.MAX_FILES + 1)
    result = check_file(str(root))
    assert [d.code for d in result.diagnostics] == ["RV001"]
    (d,) = result.diagnostics
    assert f"more than {loader.MAX_FILES} included files" in d.message
    assert d.span.file.endswith(f"f{loader.MAX_FILES - 1}.rlvp") and (d.span.line, d.span.column) == (1, 1)


def test_include_order_and_each_file_once(tmp_path):
    """A diamond (a -> b, c; b -> d; c -> d): d, b, c, a -- includes before the including file, d once."""
    (tmp_path / "a.rlvp").write_text('include "b.rlvp"\ninclude "c.rlvp"\ntool a : read\n')
    (tmp_path / "b.rlvp").write_text('include "d.rlvp"\ntool b : read\n')
    (tmp_path / "c.rlvp").write_text('include "d.rlvp"\ntool c : read\n')
    (tmp_path / "d.rlvp").write_text("tool d : read\n")
    files, _, diagnostics = loader.load_files(str(tmp_path / "a.rlvp"))
    assert diagnostics == []
    assert [Path(f.path).name for f in files] == ["d.rlvp", "b.rlvp", "c.rlvp", "a.rlvp"]


def test_include_cycle_and_missing_file_are_reported_at_the_include(tmp_path):
    """a -> b -> c -> a is RV003 at c's include, naming the whole cycle; a missing file is RV001 at its include."""
    (tmp_path / "a.rlvp").write_text('include "b.rlvp"\ntool a : read\n')
    (tmp_path / "b.rlvp").write_text('tool b : read\ninclude "c.rlvp"\ninclude "gone.rlvp"\n')
    (tmp_path / "c.rlvp").write_text('include "a.rlvp"\n')
    files, _, diagnostics = loader.load_files(str(tmp_path / "a.rlvp"))
    got = sorted((d.code, Path(d.span.file).name, d.span.line, d.message.split(":")[0]) for d in diagnostics)
    assert got == [("RV001", "b.rlvp", 3, "file not found"), ("RV003", "c.rlvp", 1, "include cycle")]
    cycle = next(d for d in diagnostics if d.code == "RV003")
    assert cycle.message == "include cycle: a.rlvp -> b.rlvp -> c.rlvp -> a.rlvp"
    assert [Path(f.path).name for f in files] == ["c.rlvp", "b.rlvp", "a.rlvp"]


# ---- rule-set size --------------------------------------------------------------------


def test_more_than_max_items_is_rv004_at_the_first_item_over():
    """MAX_ITEMS + 1 items: RV004 with a caret at item MAX_ITEMS + 1 and a help line (refused before parsing)."""
    text = "tool a : read\n" + "".join(
        f"violation v{i} (-0.0001) {{ on call a error }}\n" for i in range(loader.MAX_ITEMS + 4)
    )
    result = check_text(text, "big.rlvp")
    assert [d.code for d in result.diagnostics] == ["RV004"]
    (d,) = result.diagnostics
    assert (d.span.line, d.span.column) == (loader.MAX_ITEMS + 1, 1) and "split the rule set" in d.help
    rendered = render_text(result.diagnostics, result.sources)
    assert f"{loader.MAX_ITEMS + 1} | violation v{loader.MAX_ITEMS - 1} " in rendered and "^^^^^^^^^" in rendered


def test_item_limit_counts_across_included_files(tmp_path, monkeypatch):
    """The limit is per rule set: items of every file count, and RV004 lands in the file that crosses it."""
    monkeypatch.setattr(loader, "MAX_ITEMS", 5)
    (tmp_path / "root.rlvp").write_text('include "more.rlvp"\ntool a : read\ntool b : read\n')
    (tmp_path / "more.rlvp").write_text("tool c : read\ntool d : read\ntool e : read\n")
    result = check_file(str(tmp_path / "root.rlvp"))
    (d,) = result.diagnostics
    assert d.code == "RV004" and Path(d.span.file).name == "more.rlvp" and d.span.line == 3
    (tmp_path / "more.rlvp").write_text("tool c : read\ntool d : read\n")
    assert check_file(str(tmp_path / "root.rlvp")).ok


def test_item_limit_after_parsing_is_exact(monkeypatch):
    """The parsed count backs up the text scan: with the scan silenced, RV004 still lands on item 6."""
    monkeypatch.setattr(loader, "MAX_ITEMS", 5)
    monkeypatch.setattr(loader, "_item_over_limit", lambda text, room: None)
    result = check_text("".join(f"tool t{i} : read\n" for i in range(8)), "x.rlvp")
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("RV004", 6)]


def test_the_item_scan_agrees_with_the_parser():
    """The scan finds the same last item as the parser in every stock, example and golden rule file (keywords in
    strings, comments, regexes, braces and `test` as a name are not items)."""
    repo = Path(__file__).resolve().parents[2]
    paths = sorted(repo.glob("rules/*.rlvp")) + sorted(repo.glob("tests/golden/**/*.rlvp"))
    paths.append(None)
    checked = 0
    for path in paths:
        if path is None:
            text = (
                'tool test : read # tool x\ntest "t" { episode { } expect total == 0 }\n'
                'violation v (-1) { on call {test, a} error_text contains "tool violation" } const k = 1\n'
            )
        else:
            text = path.read_text(encoding="utf-8-sig")
        files, sources, _ = loader.load_files(str(path or "x.rlvp"), text=text)
        if not files or not files[-1].items:
            continue
        items = files[-1].items
        source = sources[files[-1].path]
        assert loader._item_over_limit(text, len(items)) is None, path
        start, _ = loader._item_over_limit(text, len(items) - 1)
        assert source.position(start) == (items[-1].span.line, items[-1].span.column), path
        checked += 1
    assert checked > 20


def test_lints_of_many_equal_rules_report_the_group_once():
    """3,000 rules with one condition: one RV302 warning for the group, on the second rule, naming the
    first and counting the rest (not 2,999 warnings, nor 4.5 million pairs)."""
    text = HEAD + "".join(f"violation v{i} (-0.0001) {{ on call a error }}\n" for i in range(3000))
    result = check_text(text, "eq.rlvp", lints=True)
    double = [d for d in result.diagnostics if d.code == "RV302"]
    assert [d.message.split(" (")[0] for d in double] == [
        "rule 'v1' and 2998 other rules fire on exactly the events rule 'v0' fires on"
    ]
    assert "penalised 3000 times" in double[0].message
    assert double[0].help == "merge the 3000 rules into one rule with weight -0.3, or keep one"
    assert double[0].span.line == HEAD.count("\n") + 2


def test_equal_obligations_and_progress_rules_are_reported_once_per_group():
    body = "{ open on call a discharge on assistant deadline at end }"
    obligations = "".join(f"obligation o{i} (+0.1, expire -0.1) {body}\n" for i in range(4))
    progress = "".join(f"progress p{i} (+0.1) {{ signal g decreasing }}\n" for i in range(3))
    result = check_text(HEAD + obligations + progress, "g.rlvp", lints=True)
    double = sorted(d.message for d in result.diagnostics if d.code == "RV302")
    assert len(double) == 2
    assert double[0].startswith(
        "obligation 'o1' (and 2 other rules like it) opens and discharges on exactly the events obligation 'o0' does"
    ) and double[0].endswith("paid 4 times")
    assert double[1].startswith(
        "progress 'p1' (and 1 other rule like it) tracks signal 'g' decreasing, as progress 'p0' does"
    ) and double[1].endswith("paid 3 times")


def test_equal_narrower_rules_are_reported_once_as_a_group():
    text = HEAD + "violation broad (-0.1) { on call error }\n"
    text += "".join(f"violation narrow{i} (-0.1) {{ on call a error }}\n" for i in range(3))
    result = check_text(text, "n.rlvp", lints=True)
    messages = [d.message for d in result.diagnostics if d.code == "RV302"]
    assert len(messages) == 2
    assert any(
        m.startswith(
            "every event that fires rule 'narrow0' (and the 2 other rules with its condition) also fires rule 'broad'"
        )
        for m in messages
    )
    assert any(
        m.startswith("rule 'narrow1' and 1 other rule fire on exactly the events rule 'narrow0'") for m in messages
    )


def test_a_narrower_rule_is_reported_once_naming_the_first_broader_rule():
    """A narrowing of three equal broad rules: one warning naming the first broad rule and counting the others."""
    text = HEAD + "".join(f"violation broad{i} (-0.1) {{ on call error }}\n" for i in range(3))
    text += "violation narrow (-0.1) { on call a error }\n"
    result = check_text(text, "n.rlvp")
    narrow = [d.message for d in lint(result.ruleset) if "'narrow'" in d.message]
    assert narrow == [narrow[0]] and "also fires rule 'broad0'" in narrow[0]
    assert "and 2 other rules with a broader condition" in narrow[0]


@pytest.mark.parametrize(
    "rule",
    [
        "violation v{i} (-0.0001) {{ on call t{i} error }}",
        'violation v{i} (-0.0001) {{ on call error and arg x == "{i}" }}',
        "violation v{i} (-0.0001) {{ on call (error or no_result) and arg x{i} exists }}",
    ],
    ids=["own_tool", "every_tool", "every_tool_distinct_args"],
)
def test_checking_many_tools_builds_each_shared_set_once(monkeypatch, rule):
    """N rules over N tools build O(N) event classes in all (each set over every tool once), not O(N^2)."""
    built = []
    original = Universe.calls_of

    def counting(self, tools, *args):
        out = original(self, tools, *args)
        built.append(len(out))
        return out

    monkeypatch.setattr(Universe, "calls_of", counting)
    n = 1000
    text = "".join(f"tool t{i} : read\n" for i in range(n))
    text += "".join(rule.format(i=i) + "\n" for i in range(n))
    result = check_text(text, "tools.rlvp", lints=True)
    assert result.ok
    assert sum(built) < 40 * n, sum(built)  # a rule's own tool (4 classes), the sets over every tool once


# ---- huge tokens ----------------------------------------------------------------------


def _report(text: str) -> tuple[list[Diagnostic], str, str]:
    result = check_text(text, "huge.rlvp")
    kept, dropped = sort_and_cap(result.diagnostics)
    return result.diagnostics, render_text(kept, result.sources, dropped=dropped), render_json(kept, dropped=dropped)


@pytest.mark.parametrize(
    "make,size,code",
    [
        (lambda n: "w" * n, 5_000_000, "RV101"),
        (lambda n: "tool a : read\nviolation v (-1) { on call a } " + "z" * n + "\n", 5_000_000, "RV101"),
        (lambda n: '"' + "s" * n + '"', 5_000_000, "RV101"),
        (lambda n: "tool a : read\nviolation v (-1) { on call " + "b" * n + " }\n", 5_000_000, "RV201"),
    ],
    ids=["word", "word_after_a_rule", "string", "unknown_tool"],
)
def test_a_huge_token_is_shortened_never_echoed(make, size, code):
    """A 5 MB token: named by its first 40 characters and its length; message, source and caret lines bounded
    (50 MB by hand: rlvp-compile reports a 50 MB word in 3 s, a 50 MB string in 2.5 s and 230 MB)."""
    diagnostics, text, js = _report(make(size))
    assert [d.code for d in diagnostics] == [code]
    (d,) = diagnostics
    assert len(d.message) < 400 and "..." in d.message
    assert f"({size:,} characters)" in d.message or f"({size + 2:,} characters)" in d.message
    source_line, caret_line = text.splitlines()[1:3]
    assert len(text) < 2000 and len(source_line) < 200 and len(caret_line) < 200 and "^" in caret_line
    assert json.loads(js)["diagnostics"][0]["code"] == code and len(js) < 2000


def test_a_huge_message_is_cut_in_the_middle():
    """Whatever a site forgot to shorten: a message or help longer than MAX_MESSAGE keeps its ends and the count."""
    d = Diagnostic("RV101", "start " + "x" * 1_000_000 + " end", help="h" * 5000)
    assert len(d.message) < MAX_MESSAGE + 100 and d.message.startswith("start ") and d.message.endswith(" end")
    assert "characters not shown" in d.message and len(d.help) < MAX_MESSAGE + 100


def test_a_huge_string_inside_a_rule_compiles():
    """A 5 MB string literal in a valid rule is data: it compiles and matches."""
    program = loads('tool a : read\nviolation v (-1) { on call a error_text contains "' + "q" * 5_000_000 + '" }\n')
    hit = Event(0, "call", tool="a", status="error", error_text="q" * 5_000_001)
    assert [c.rule for c in program.score(Episode("e", (hit,)))] == ["v"]
