"""Checker: tool table, constants, names, signs, bindings, meaning, lowering."""

from __future__ import annotations

import json

from rlvp_dsl import check_text
from rlvp_dsl.ir import ViolationRule

TOOLS = "tool get_item : read target item_id\ntool delete_item : write, destructive target item_id\n"


def errors(diagnostics):
    return [d for d in diagnostics if d.severity == "error"]


def codes(text, path="c.rlvp"):
    return [(d.code, d.severity) for d in check_text(text, path).diagnostics]


def test_clean_file_has_no_diagnostics():
    """A correct file checks with no diagnostics and a full rule set."""
    result = check_text(TOOLS + "repeat_error (-0.3)\nblind_destructive (-1)\n")
    assert result.ok and not result.diagnostics
    assert [r.kind for r in result.ruleset.rules] == ["repeat_error", "blind_destructive"]
    assert all(isinstance(r, ViolationRule) for r in result.ruleset.rules)


def test_unknown_tool_suggests_the_closest():
    """RV201 with a did-you-mean."""
    (d,) = errors(check_text(TOOLS + "violation v (-1) { on call delete_itme }").diagnostics)
    assert d.code == "RV201" and d.help == "did you mean 'delete_item'?"


def test_unknown_tag_lists_known_tags_when_nothing_is_close():
    """RV202 without a close match lists the declared tags."""
    (d,) = check_text(TOOLS + "violation v (-1) { on call tag zzz }").diagnostics
    assert d.code == "RV202" and "destructive, read, write" in d.help


def test_unknown_tag_suggests_the_standard_tag_over_a_misspelt_declared_one():
    """`tool d : wrte` and `on call tag writ`: the did-you-mean is the standard 'write' (one letter off),
    not the declared 'wrte'; the declaration gets its own RV212 pointing at 'write'."""
    found = check_text("tool d : wrte, destructive\nviolation v (-1) { on call tag writ }\n").diagnostics
    by_code = {d.code: d for d in found}
    assert by_code["RV202"].help == "did you mean 'write'?"
    assert "close to the standard tag 'write'" in by_code["RV212"].message


def test_duplicate_constant_and_conflicting_targets():
    """A constant defined twice and a tool with two targets are RV203."""
    text = TOOLS + "tool get_item : read target other\nconst A = -1\nconst A = -2\n"
    assert [c for c, _ in codes(text)] == ["RV203", "RV203"]


def test_tool_declarations_merge_tags():
    """Two declarations of one tool merge their tags."""
    result = check_text(TOOLS + "tool get_item : verify\n")
    assert result.ruleset.tools["get_item"].tags == frozenset({"read", "verify"})


def test_signs_of_each_rule_kind():
    """Violations negative, obligation credit >= 0 and expiry <= 0, progress positive."""
    assert codes(TOOLS + "violation v (0) { on call }") == [("RV204", "error")]
    assert codes(TOOLS + "repeat_error (0.3)") == [("RV204", "error")]
    assert codes(TOOLS + "progress p (-1) { signal g increasing }") == [("RV204", "error")]
    assert codes(TOOLS + "obligation o (0, expire 0) { open on call discharge on call }") == []


def test_constants_resolve_into_weights():
    """A named constant is the weight's value."""
    result = check_text(TOOLS + "const W = -0.25\nviolation v (W) { on call error }")
    assert result.ruleset.rules[0].weight == -0.25


def test_never_firing_rule_is_a_warning():
    """A violation no event can satisfy is RV210, a warning: the file still compiles."""
    result = check_text(TOOLS + "violation v (-1) { on call get_item and call delete_item }")
    assert [(d.code, d.severity) for d in result.diagnostics] == [("RV210", "warning")]
    assert result.ok


def test_credit_on_user_turn_from_an_obligation():
    """An obligation opened or discharged by user turns is RV208."""
    text = TOOLS + 'obligation o (1, expire -1) { open on call discharge on user says "thanks" }'
    assert ("RV208", "error") in codes(text)


def test_same_target_needs_a_target():
    """`same target` where no matched tool declares one is RV205."""
    text = (
        "tool a : read\ntool b : write\nobligation o (1, expire -1) { open on call b discharge on call a same target }"
    )
    assert ("RV205", "error") in codes(text)


def test_argument_test_checked_against_manifest_params(tmp_path):
    """With parameters known from a manifest, `arg` on a parameter no tool takes is RV205."""
    (tmp_path / "tools.json").write_text(
        json.dumps(
            {
                "format": "rlvp-tools/1",
                "tools": [{"name": "get_item", "tags": ["read"], "target": "item_id", "parameters": ["item_id"]}],
            }
        )
    )
    rules = tmp_path / "r.rlvp"
    rules.write_text('tools from "tools.json"\nviolation v (-1) { on call get_item arg itemid == "A" }\n')
    from rlvp_dsl import check_file

    (d,) = errors(check_file(str(rules)).diagnostics)
    assert d.code == "RV205" and d.help == "did you mean 'item_id'?"


def test_missing_manifest_is_rv001(tmp_path):
    """`tools from` a missing file is RV001 at the statement."""
    (d,) = check_text('tools from "nope.json"\n', str(tmp_path / "r.rlvp")).diagnostics
    assert d.code == "RV001" and d.span.line == 1


def test_an_unread_manifest_hides_the_unknown_names_it_may_declare(tmp_path):
    """With `tools from` a missing or unreadable manifest, the tools and tags the rules name are
    not reported unknown (the manifest may declare them): one error at the `tools from` line, and
    the check still fails; without such a statement they are RV201/RV202."""
    body = "violation v (-1) {\n  on call cancel and not seen (call tag lookup)\n}\n"
    (tmp_path / "bad.json").write_text('{"tools": [', encoding="utf-8")
    for manifest, code in (("nope.json", "RV001"), ("bad.json", "RV002")):
        result = check_text(f'tools from "{manifest}"\n' + TOOLS + body, str(tmp_path / "r.rlvp"))
        assert [(d.code, d.span.line) for d in result.diagnostics] == [(code, 1)]
        assert not result.ok
    result = check_text(TOOLS + body, str(tmp_path / "r.rlvp"))
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("RV201", 4), ("RV202", 4)]
    # nor a test episode's call of a tool the manifest may declare (a warning otherwise)
    test = 'test "t" {\n  episode {\n    call cancel ok\n  }\n  expect total == 0\n}\n'
    result = check_text('tools from "nope.json"\n' + TOOLS + test, str(tmp_path / "r.rlvp"))
    assert [d.code for d in result.diagnostics] == ["RV001"]
    assert [(d.code, d.severity) for d in check_text(TOOLS + test, str(tmp_path / "r.rlvp")).diagnostics] == [
        ("RV201", "warning")
    ]


def test_a_test_episode_that_is_a_folder_is_named_as_one(tmp_path):
    """`episode "."`: RV001 says the path is a directory (not "not found") and what to name."""
    rules = tmp_path / "r.rlvp"
    rules.write_text('tool a : read\nviolation v (-1) { on call a }\ntest "t" {\n  episode "."\n  expect v == -1\n}\n')
    from rlvp_dsl import check_file

    (d,) = errors(check_file(str(rules)).diagnostics)
    assert (d.code, d.message, d.span.line) == ("RV001", f"the test episode file is a directory: {tmp_path}/.", 3)
    assert d.help == "name one trajectory file (.json, .jsonl, .traj) of the folder"


def test_invalid_regex_is_rv105():
    """A regex the matcher cannot compile is RV105, not an exception."""
    assert ("RV105", "error") in codes(TOOLS + "violation v (-1) { on call result matches /a{2,1}/ }")


def test_ruleset_json_is_sorted_and_complete():
    """The canonical JSON lists tools by name and every rule in source order."""
    result = check_text(
        "tool b : write target x\ntool a : read target x\nrepeat_error (-1)\nviolation z (-1) { on call a }\n"
    )
    doc = result.ruleset.to_json()
    assert [t["name"] for t in doc["tools"]] == ["a", "b"]
    assert [r["name"] for r in doc["rules"]] == ["repeat_error", "z"]


def test_a_declared_tag_close_to_a_standard_tag_is_rv212():
    """`tool get_x : raed` with no rule testing `raed`: RV212 at the tag, suggesting `read`; a rule testing
    the spelling silences it, and a tag far from every standard one (`agent_side`) is left alone."""
    result = check_text("tool get_x : raed target id\nrepeat_error (-0.3)\n")
    ((code, severity, message, help, col),) = [
        (d.code, d.severity, d.message, d.help, d.span.column) for d in result.diagnostics
    ]
    assert (code, severity, col) == ("RV212", "warning", 14) and result.ok
    assert "'raed'" in message and "standard tag 'read'" in message and help.startswith("did you mean 'read'?")
    assert codes("tool get_x : raed\nviolation v (-1) { on call tag raed error }\n") == []
    assert codes("tool get_x : agent_side\nrepeat_error (-0.3)\n") == []


def test_unknown_standard_tag_points_at_the_misspelt_declaration():
    """`tool w : wirte, destructve` with `on call tag write`: RV202's help says to fix the declaration (not to
    copy the typo), and blind_destructive's RV210 says no tool carries the tags, not that targets are missing."""
    text = (
        "tool w : wirte, destructve target id\nviolation v (-0.5) { on call tag write }\nblind_destructive bd (-0.5)\n"
    )
    by_code = {d.code: d for d in check_text(text, "t.rlvp").diagnostics}
    assert by_code["RV202"].help == "did you mean to declare 'write'? tool 'w' at t.rlvp:1:10 declares 'wirte'"
    assert "target" not in by_code["RV210"].message
    assert "no declared tool carries the tag 'destructive', or 'write' without 'additive'" in by_code["RV210"].message
    assert by_code["RV212"].severity == "warning"


def test_paths_in_rule_text_without_a_folder_are_said_to_start_at_the_current_folder(tmp_path, monkeypatch):
    """Rules read from standard input (`<stdin>`) or a string have no folder: a missing include or
    manifest says relative paths start at the current folder, not at "the rule file"."""
    monkeypatch.chdir(tmp_path)
    for text, code, help in (
        ('tools from "m.json"\n', "RV001", f"paths are relative to the current folder, {tmp_path}"),
        ('include "nope.rlvp"\n', "RV001", f"check the path (relative paths start at the current folder, {tmp_path})"),
    ):
        (d,) = check_text(text, "<stdin>").diagnostics
        assert (d.code, d.help) == (code, help)
    (d,) = check_text('tools from "m.json"\n', str(tmp_path / "r.rlvp")).diagnostics
    assert d.help == "paths are relative to the rule file that names them"
