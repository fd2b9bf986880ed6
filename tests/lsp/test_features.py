"""Hover, go to definition, find references, completion, the outline and the did-you-mean quick
fix, by value, on a small rule set (tests/lsp/data: shop.rlvp including weights.rlvp, with the
tools and a signal of shop_tools.json)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types

from .client import REPO

DATA = REPO / "tests" / "lsp" / "data"
SHOP = DATA / "shop.rlvp"
LINES = SHOP.read_text(encoding="utf-8").split("\n")


def at(line: int, word: str, shift: int = 1) -> types.Position:
    """The position `shift` characters into the first `word` on 0-based `line` of shop.rlvp."""
    return types.Position(line, LINES[line].index(word) + shift)


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri)


def hover(lsp, uri: str, position: types.Position) -> str:
    found = lsp.call(lsp.client.text_document_hover_async(types.HoverParams(doc(uri), position)))
    return found.contents.value if found is not None else ""


def places(locations) -> list[tuple[str, int, int, int]]:
    return sorted(
        (
            Path(loc.uri.removeprefix("file://")).name,
            loc.range.start.line,
            loc.range.start.character,
            loc.range.end.character,
        )
        for loc in locations
    )


def test_hover(lsp):
    uri = lsp.open(SHOP)
    assert lsp.published[uri] == []
    tool = hover(lsp, uri, at(5, "cancel_order"))
    assert "tool `cancel_order`" in tool and "tags: destructive, write" in tool and "target: order_id" in tool
    assert "shop_tools.json" in tool
    declared = hover(lsp, uri, at(9, "notify"))
    assert "tags: customer_facing, write" in declared and "target: order_id" in declared
    assert hover(lsp, uri, at(4, "PENALTY")) == "const `PENALTY` = -0.2"
    kind = hover(lsp, uri, at(4, "violation"))
    assert kind.startswith("**violation** (rule kind)") and "every call or assistant turn" in kind
    rule = hover(lsp, uri, at(7, "confirm"))
    assert rule.startswith("obligation `confirm` (+0.1, expire PENALTY)")
    assert hover(lsp, uri, at(11, "items_left")) == "signal `items_left`: progress, decreasing"
    assert hover(lsp, uri, types.Position(3, 0)) == ""  # an empty line
    lsp.close(uri)


def test_hover_on_a_diagnostic_gives_its_code_text(lsp, tmp_path):
    from rlvp_dsl.diagnostic_docs import DOCS

    rules = tmp_path / "typo.rlvp"
    rules.write_text("tool search : read\n# RV207 is an unknown constant\nviolation v (-0.1) { on call serch }\n")
    uri = lsp.open(rules)
    [d] = lsp.published[uri]
    text = hover(lsp, uri, d.range.start)
    assert (
        text.startswith("tool `serch`: not declared")
        and "**RV201**: unknown tool" in text
        and DOCS["RV201"].cause in text
    )
    assert "Here: did you mean 'search'?" in text
    assert hover(lsp, uri, types.Position(1, 4)).startswith("**RV207**: unknown constant")
    lsp.close(uri)


def test_definitions(lsp):
    uri = lsp.open(SHOP)

    def definition(position: types.Position) -> list:
        return places(lsp.call(lsp.client.text_document_definition_async(types.DefinitionParams(doc(uri), position))))

    assert definition(at(4, "PENALTY")) == [("weights.rlvp", 0, 6, 13)]
    assert definition(at(9, "notify")) == [("shop.rlvp", 2, 5, 11)]
    manifest = (DATA / "shop_tools.json").read_text().split("\n")
    line = next(i for i, text in enumerate(manifest) if '"cancel_order"' in text)
    column = manifest[line].index('"cancel_order"')
    assert definition(at(5, "cancel_order")) == [("shop_tools.json", line, column, column + len('"cancel_order"'))]
    assert definition(at(0, "weights")) == [("weights.rlvp", 0, 0, 0)]
    assert definition(at(1, "shop_tools")) == [("shop_tools.json", 0, 0, 0)]
    assert definition(types.Position(3, 0)) == []
    lsp.close(uri)


def test_references(lsp):
    uri = lsp.open(SHOP)

    def refs(position: types.Position, declaration: bool) -> list:
        params = types.ReferenceParams(
            context=types.ReferenceContext(include_declaration=declaration), text_document=doc(uri), position=position
        )
        return places(lsp.call(lsp.client.text_document_references_async(params)))

    def word(line: int, name: str) -> tuple[str, int, int, int]:
        return ("shop.rlvp", line, LINES[line].index(name), LINES[line].index(name) + len(name))

    uses = [word(4, "PENALTY"), word(7, "PENALTY")]
    assert refs(at(7, "PENALTY"), True) == [*uses, ("weights.rlvp", 0, 6, 13)]
    assert refs(at(7, "PENALTY"), False) == uses
    assert refs(at(2, "notify"), True) == [word(2, "notify"), word(9, "notify")]
    assert refs(at(8, "destructive"), True) == [word(8, "destructive")]
    lsp.close(uri)


def test_completion_keeps_the_last_index_while_the_text_does_not_parse(lsp):
    uri = lsp.open(SHOP)
    text = SHOP.read_text(encoding="utf-8")

    def labels(line_text: str) -> list[str]:
        lsp.replace(uri, text + line_text)  # unfinished: a syntax error, the last good index is kept
        end = types.Position(len(LINES) - 1, len(line_text))
        found = lsp.call(lsp.client.text_document_completion_async(types.CompletionParams(doc(uri), end)))
        return [item.label for item in found.items]

    assert labels("violation v (-0.1) { on call ") == ["cancel_order", "get_order", "notify"]
    assert labels("violation v (-0.1) { on call {get_order, ") == ["cancel_order", "get_order", "notify"]
    tags = labels("violation v (-0.1) { on call tag ")
    assert {"read", "write", "destructive", "customer_facing", "verify"} <= set(tags) and tags == sorted(tags)
    assert labels("progress p (+0.1) { signal ") == ["items_left"]
    anywhere = labels("")
    assert anywhere[:5] == ["violation", "obligation", "repeat_error", "blind_destructive", "progress"]
    assert {"include", "tools", "on", "unless", "cancel_order", "PENALTY"} <= set(anywhere)
    lsp.close(uri)


def test_outline(lsp):
    uri = lsp.open(SHOP)
    found = lsp.call(lsp.client.text_document_document_symbol_async(types.DocumentSymbolParams(doc(uri))))
    assert [(s.name, s.kind, s.detail, s.range.start.line, s.range.end.line) for s in found] == [
        ("notify", types.SymbolKind.Function, "tool: write, customer_facing", 2, 2),
        ("blind_cancel", types.SymbolKind.Event, "violation", 4, 6),
        ("confirm", types.SymbolKind.Event, "obligation", 7, 10),
        ("items", types.SymbolKind.Event, "progress", 11, 11),
    ]
    lsp.close(uri)


def test_did_you_mean_quick_fix_repairs_the_file(lsp, tmp_path):
    rules = tmp_path / "fix.rlvp"
    text = "tool delete_item : write, destructive target item_id\nviolation d (-0.5) { on call tag destructve }\n"
    rules.write_text(text, encoding="utf-8")
    uri = lsp.open(rules)
    [d] = lsp.published[uri]
    params = types.CodeActionParams(doc(uri), d.range, types.CodeActionContext(diagnostics=[d]))
    [action] = lsp.call(lsp.client.text_document_code_action_async(params))
    assert action.title == "Replace with 'destructive'" and action.kind == types.CodeActionKind.QuickFix
    [edit] = action.edit.changes[uri]
    line = text.split("\n")[1]
    assert (edit.range.start.character, edit.range.end.character, edit.new_text) == (
        line.index("destructve"),
        line.index("destructve") + len("destructve"),
        "destructive",
    )
    lsp.replace(uri, text.replace("destructve", "destructive"))
    assert lsp.published[uri] == []
    lsp.close(uri)


def test_formatting_is_rlvp_compile_fmt_as_one_edit(lsp, tmp_path):
    """textDocument/formatting: one whole-document edit whose text is `format_source`'s (what
    `rlvp-compile --fmt` writes), kept comments included; none for formatted or unparsable text."""
    from rlvp_dsl.syntax.fmt import format_source

    rules = tmp_path / "messy.rlvp"
    text = "# header\ntool   a :read target   id\nviolation   v (-0.5) { on call a error }  # trailing\n"
    rules.write_text(text, encoding="utf-8")
    uri = lsp.open(rules)
    options = types.FormattingOptions(tab_size=2, insert_spaces=True)

    def edits() -> list:
        return lsp.call(lsp.client.text_document_formatting_async(types.DocumentFormattingParams(doc(uri), options)))

    [edit] = edits()
    expected = format_source(text, path=str(rules))
    assert expected != text and "# trailing" in expected and expected.startswith("# header\n")
    assert edit.new_text == expected
    assert (edit.range.start.line, edit.range.start.character) == (0, 0)
    assert (edit.range.end.line, edit.range.end.character) == (3, 0)  # after the final newline
    lsp.replace(uri, expected)
    assert not edits()  # already formatted (an empty answer)
    lsp.replace(uri, "violation v (-0.5) { on call }}\n")
    assert not edits()  # a syntax error: its diagnostic says why, nothing is formatted
    lsp.close(uri)
