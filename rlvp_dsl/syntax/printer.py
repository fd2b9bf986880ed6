"""Print a syntax tree (`rlvp_dsl.ast`) back as canonical, readable `.rlvp` text.

`print_rule_file(tree)` and `print_expr(expr)` are the inverse of the parser:
``parse(print_rule_file(tree)) == tree`` for every tree the parser can produce
(spans are not compared).  Canonical form:

* conditions use explicit ``and`` / ``or``, except that an ``and`` of only ``call``,
  ``tag`` and status atoms is written by juxtaposition (``call tag read ok``; with
  ``juxtapose=True``, the formatter's choice, every run of them within an ``and`` is, and the
  ``arg``, ``signal`` and text tests that follow one); an ``or`` inside an ``and``, an ``and`` or ``or`` inside ``not``, and an ``and`` directly
  inside an ``and`` (which the parser would otherwise flatten) are parenthesised;
* a name that is a keyword (`parser.keywords()`) or not a plain identifier is
  written in backticks;
* strings are double-quoted with ``\\\\ \\" \\n \\t \\r`` and ``\\uXXXX`` escapes for other
  control characters; regexes are ``/.../flags`` with ``/`` escaped;
* numbers print as the shortest text that reads back as the same float; weights of
  rules carry an explicit sign (``+0.5``, ``-0.5``);
* every obligation states its deadline, ``deadline at end`` included.

Raises ValueError for a tree no text can produce: internal nodes (``HasBinding``,
``Const``), an ``and``/``or`` with fewer than two items, a name containing a backtick
or a newline, a regex that is empty or ends in a lone backslash, an infinite or NaN
number.  A regex containing the escape ``\\/`` prints as ``\\/``, which the parser
reads back as ``/`` (the same regex).
"""

from __future__ import annotations

import functools
import math
import re
from typing import cast

from .. import ast
from .grammar import get_parser, keywords

INDENT = "  "


@functools.lru_cache(maxsize=1)
def _name_re() -> re.Pattern[str]:
    for term in get_parser().terminals:
        if term.name == "NAME":
            return re.compile(term.pattern.to_regexp())
    raise RuntimeError("the grammar has no NAME terminal")


def print_name(name: ast.Name | str) -> str:
    """A name as the lexer reads it back: plain, or in backticks."""
    text = name.text if isinstance(name, ast.Name) else name
    if _name_re().fullmatch(text) and text not in keywords():
        return text
    if not text or "`" in text or "\n" in text:
        raise ValueError(f"name {text!r} cannot be written in a rule file (empty, or contains ` or a newline)")
    return f"`{text}`"


def print_number(value: float) -> str:
    """Shortest text that parses back to the same float (``3``, ``0.25``, ``1e-05``)."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"number {value!r} cannot be written in a rule file (must be finite)")
    if value.is_integer() and abs(value) < 1e16:
        text = str(int(value))
        return "-0" if text == "0" and math.copysign(1.0, value) < 0 else text
    return repr(value)


def print_weight(weight: ast.Weight) -> str:
    """A rule weight: a signed number (``+0.5``, ``-1``; zero as ``0``) or a constant's name."""
    if weight.const is not None:
        return print_name(weight.const)
    assert weight.value is not None  # a weight is a number or a constant's name
    text = print_number(weight.value)
    return text if text.startswith("-") or text == "0" else "+" + text


def print_string(value: str) -> str:
    """A double-quoted string literal with escapes."""
    out = ['"']
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ch in "\x7f\u2028\u2029":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def print_regex(body: str, flags: str = "") -> str:
    """``/body/flags`` with ``/`` escaped."""
    if not body:
        raise ValueError("an empty regular expression cannot be written in a rule file")
    if set(flags) - set("imsx"):
        raise ValueError(f"regex flags must be among 'imsx' (got {flags!r})")
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            if i + 1 >= len(body):
                raise ValueError(f"regular expression {body!r} ends in a lone backslash")
            nxt = body[i + 1]
            out.append("\\n" if nxt == "\n" else ch + nxt)
            i += 2
            continue
        out.append("\\/" if ch == "/" else "\\n" if ch == "\n" else ch)
        i += 1
    return "/" + "".join(out) + "/" + flags


def _literal(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return print_string(value)
    if isinstance(value, (int, float)):
        return print_number(value)
    raise ValueError(f"not a literal: {value!r}")


# ---- conditions -----------------------------------------------------------

# precedence levels: 0 = or, 1 = and, 2 = not / atom
_OR, _AND, _UNARY = 0, 1, 2
_PHRASE_ATOMS = (ast.CallAtom, ast.TagAtom, ast.StatusAtom)


def _says(expr: ast.Expr) -> tuple[ast.KindAtom, ast.TextTest] | None:
    """``user says ...`` / ``assistant says ...``: the parser's And(KindAtom, TextTest), as that
    pair (None for any other condition)."""
    if not (isinstance(expr, ast.And) and len(expr.items) == 2):
        return None
    kind, test = expr.items
    if (
        isinstance(kind, ast.KindAtom)
        and isinstance(test, ast.TextTest)
        and test.field == "text"
        and (test.op == "matches" or (test.op == "contains" and not test.flags))
    ):
        return kind, test
    return None


def _text_test(op: str, value: str, flags: str) -> str:
    if op == "matches":
        return "matches " + print_regex(value, flags)
    if flags:
        raise ValueError(f"flags {flags!r} only go with `matches` (got op {op!r})")
    return f"{op} {print_string(value)}"


def _binding(binding: ast.Binding) -> str:
    if binding.kind == "arg":
        if binding.arg is None:
            raise ValueError("an argument binding needs the argument's name")
        return print_name(binding.arg)
    if binding.kind in ("target", "call", "message"):
        return binding.kind
    raise ValueError(f"unknown binding kind {binding.kind!r}")


def _atom(expr: ast.Expr, runs: bool) -> str:
    if isinstance(expr, ast.CallAtom):
        if not expr.tools:
            return "call"
        if len(expr.tools) == 1:
            return "call " + print_name(expr.tools[0])
        return "call {" + ", ".join(print_name(t) for t in expr.tools) + "}"
    if isinstance(expr, ast.KindAtom):
        if expr.kind not in ("user", "assistant"):
            raise ValueError(f"unknown message kind {expr.kind!r}")
        return expr.kind
    if isinstance(expr, ast.TagAtom):
        return "tag " + print_name(expr.tag)
    if isinstance(expr, ast.StatusAtom):
        if expr.status not in ("ok", "error", "malformed", "no_result"):
            raise ValueError(f"unknown status {expr.status!r}")
        return expr.status
    if isinstance(expr, ast.TextTest):
        if expr.field not in ("error_text", "result", "text"):
            raise ValueError(f"unknown text field {expr.field!r}")
        return f"{expr.field} {_text_test(expr.op, expr.value, expr.flags)}"
    if isinstance(expr, ast.ArgTest):
        head = "arg " + print_name(expr.arg)
        if expr.op == "exists":
            return head + " exists"
        if expr.op in ("contains", "startswith", "matches"):
            # (`ast.ArgTest`: a text test's value is a str, an `in`'s a tuple of literals)
            return f"{head} {_text_test(expr.op, cast(str, expr.value), expr.flags)}"
        if expr.op == "in":
            values = tuple(cast("tuple[object, ...]", expr.value))
            if not values:
                raise ValueError("`in` needs at least one value")
            return f"{head} in [" + ", ".join(_literal(v) for v in values) + "]"
        return f"{head} {expr.op} {_literal(expr.value)}"
    if isinstance(expr, ast.SignalTest):
        return f"signal {print_name(expr.signal)} {expr.op} {print_number(expr.value)}"
    if isinstance(expr, ast.Seen):
        text = "seen (" + _expr(expr.cond, _OR, runs)
        if expr.same is not None:
            text += (" returned " if expr.returned else " same ") + _binding(expr.same)
        if expr.since is not None:
            text += " since " + _expr(expr.since, _OR, runs)
        return text + ")"
    raise ValueError(f"{type(expr).__name__} is an internal node and has no rule-file syntax")


def _expr(expr: ast.Expr, context: int, runs: bool) -> str:
    """`expr` as text, parenthesised when its level is below `context` (`runs`: `print_expr`'s `juxtapose`)."""
    says = _says(expr)
    if says is not None:
        kind, test = says
        pattern = print_regex(test.value, test.flags) if test.op == "matches" else print_string(test.value)
        return f"{kind.kind} says {pattern}"
    if isinstance(expr, (ast.And, ast.Or)):
        if len(expr.items) < 2:
            raise ValueError(f"{type(expr).__name__} needs at least two items (got {len(expr.items)})")
        if isinstance(expr, ast.Or):
            level, word = _OR, " or "
            parts = [_expr(item, _AND, runs) for item in expr.items]
        else:
            level, word = _AND, " and "
            # an And directly inside an And must keep its parentheses, or the parser flattens it
            parts = [
                _expr(item, _UNARY if isinstance(item, ast.And) and _says(item) is None else _AND, runs)
                for item in expr.items
            ]
            parts = _juxtaposed(expr.items, parts, runs)
        text = word.join(parts)
        return f"({text})" if level < context else text
    if isinstance(expr, ast.Not):
        return "not " + _expr(expr.item, _UNARY, runs)
    return _atom(expr, runs)


def _juxtaposed(items: tuple[ast.Expr, ...], parts: list[str], runs: bool) -> list[str]:
    """The printed items of an ``and`` with juxtaposed ones joined by a space: all of them when every
    item is a ``call``, ``tag`` or status atom (``call tag read ok``); with `runs`, each run of such
    atoms and the ``arg``, ``signal`` and text tests that follow one (``call x ok result matches /y/``)."""
    if not runs:
        return [" ".join(parts)] if all(isinstance(item, _PHRASE_ATOMS) for item in items) else parts
    joined_parts: list[str] = []
    after_phrase = False
    for item, part in zip(items, parts):
        phrase = isinstance(item, _PHRASE_ATOMS)
        joined = after_phrase and (phrase or isinstance(item, (ast.TextTest, ast.ArgTest, ast.SignalTest)))
        if joined:
            joined_parts[-1] += " " + part
        else:
            joined_parts.append(part)
        after_phrase = phrase or joined
    return joined_parts


def print_expr(expr: ast.Expr, *, juxtapose: bool = False) -> str:
    """One condition as text (no surrounding parentheses at the top).  An ``and`` is written with
    explicit ``and``s, except that one of only ``call``, ``tag`` and status atoms is juxtaposed
    (``call tag read ok``); with `juxtapose` (the formatter's layout), every run of such atoms is,
    with the ``arg``, ``signal`` and text tests that follow it (``call x ok result matches /y/ and
    seen (...)``)."""
    return _expr(expr, _OR, juxtapose)


# ---- declarations and rules -------------------------------------------------


def _deadline(deadline: ast.Deadline, juxtapose: bool) -> str:
    if deadline.kind == "before":
        if deadline.cond is None:
            raise ValueError("a `before` deadline needs a condition")
        return "before " + print_expr(deadline.cond, juxtapose=juxtapose)
    if deadline.kind == "within":
        if deadline.calls < 1:
            raise ValueError(f"`within` needs at least 1 call (got {deadline.calls})")
        return f"within {deadline.calls} calls"
    if deadline.kind == "end":
        return "at end"
    raise ValueError(f"unknown deadline kind {deadline.kind!r}")


def _block(head: str, lines: list[str]) -> str:
    return head + " {\n" + "".join(f"{INDENT}{line}\n" for line in lines) + "}"


def print_item(item: ast.Item, *, juxtapose: bool = False) -> str:
    """One top-level item (declaration or rule) as text, without a trailing newline (`juxtapose`:
    how its conditions are written, see `print_expr`)."""
    cond = functools.partial(print_expr, juxtapose=juxtapose)
    if isinstance(item, ast.Include):
        return "include " + print_string(item.path)
    if isinstance(item, ast.ToolsFrom):
        return "tools from " + print_string(item.path)
    if isinstance(item, ast.ToolDecl):
        text = "tool " + print_name(item.name)
        if item.tags:
            text += " : " + ", ".join(print_name(t) for t in item.tags)
        if item.target is not None:
            text += " target " + print_name(item.target)
        return text
    if isinstance(item, ast.ConstDecl):
        return f"const {print_name(item.name)} = {print_number(item.value)}"
    if isinstance(item, ast.Violation):
        lines = ["on " + cond(item.on)]
        if item.unless is not None:
            lines.append("unless " + cond(item.unless))
        return _block(f"violation {print_name(item.name)} ({print_weight(item.weight)})", lines)
    if isinstance(item, ast.Obligation):
        discharge = "discharge on " + cond(item.discharge)
        if item.same is not None:
            discharge += " same " + _binding(item.same)
        lines = ["open on " + cond(item.open), discharge, "deadline " + _deadline(item.deadline, juxtapose)]
        head = f"obligation {print_name(item.name)} ({print_weight(item.credit)}, expire {print_weight(item.expire)})"
        return _block(head, lines)
    if isinstance(item, ast.RepeatError):
        head = "repeat_error" + ("" if item.name.text == "repeat_error" else " " + print_name(item.name))
        head += f" ({print_weight(item.weight)})"
        lines = ([] if item.on is None else ["on " + cond(item.on)]) + (
            [] if item.reset is None else ["reset on " + cond(item.reset)]
        )
        return _block(head, lines) if lines else head
    if isinstance(item, ast.BlindDestructive):
        head = "blind_destructive" + ("" if item.name.text == "blind_destructive" else " " + print_name(item.name))
        head += f" ({print_weight(item.weight)})"
        if item.inspected_by is None:
            if item.on is not None:
                raise ValueError("blind_destructive with `on` needs `inspected_by` too")
            return head
        lines = [] if item.on is None else ["on " + cond(item.on)]
        return _block(head, lines + ["inspected_by " + cond(item.inspected_by)])
    if isinstance(item, ast.Progress):
        inside = print_weight(item.weight)
        if item.per_unit:
            inside += " per unit"
        if item.max is not None:
            inside += ", max " + print_number(item.max)
        body = f"signal {print_name(item.signal)} {item.direction}"
        if item.direction not in ("decreasing", "increasing"):
            raise ValueError(f"unknown direction {item.direction!r}")
        if item.start is not None:
            body += " from " + print_number(item.start)
        return _block(f"progress {print_name(item.name)} ({inside})", [body])
    if isinstance(item, ast.InlineTest):
        return _test_block(item)
    raise ValueError(f"not a rule-file item: {type(item).__name__}")


def _json_text(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{print_string(k)}: {_json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    return _literal(value)


def _episode_event(event: ast.EpisodeEvent) -> str:
    if event.kind != "call":
        return f"{event.kind} {print_string(event.text)}"
    assert event.tool is not None  # every call event names its tool
    text = "call " + print_name(event.tool)
    if event.arguments:
        # the pairs as written: a key given twice stays twice (the tree keeps both)
        text += " {" + ", ".join(f"{print_string(k)}: {_json_text(v)}" for k, v in event.arguments) + "}"
    if event.status in ("error", "malformed") and event.error_text:
        text += f" {event.status} {print_string(event.error_text)}"
    else:
        text += " " + event.status
    if event.result:
        text += " result " + print_string(event.result)
    for name, value in event.signals:
        text += f" signal {print_name(name)} = {print_number(value)}"
    return text


def _episode_events(events: tuple[ast.EpisodeEvent, ...]) -> list[str]:
    """The events' lines; a run of events of one message group inside ``message { ... }``."""
    lines: list[str] = []
    k = 0
    while k < len(events):
        group = events[k].message
        if group is None:
            lines.append(_episode_event(events[k]))
            k += 1
            continue
        end = k
        while end < len(events) and events[end].message == group:
            end += 1
        lines += ["message {"] + ["  " + _episode_event(e) for e in events[k:end]] + ["}"]
        k = end
    return lines


def _expect_target(rule: ast.Name) -> str:
    """The rule an `expect` names: ``repeat_error`` and ``blind_destructive`` (the default names of
    those rules) are written as the grammar's words, not in backticks."""
    return rule.text if rule.text in ("repeat_error", "blind_destructive") else print_name(rule)


def _test_block(item: ast.InlineTest) -> str:
    if item.episode_file is not None:
        lines = ["episode " + print_string(item.episode_file)]
    else:
        lines = ["episode {"] + ["  " + line for line in _episode_events(item.events or ())] + ["}"]
    for expect in item.expects:
        target = "total" if expect.rule is None else _expect_target(expect.rule)
        where = "" if expect.at is None else f" at {expect.at} {expect.index}"
        lines.append(f"expect {target}{where} == {print_number(expect.value)}")
    return _block(f"test {print_string(item.name)}", lines)


def print_rule_file(tree: ast.RuleFile) -> str:
    """The whole file: declarations and rules in order, a blank line before each rule."""
    chunks: list[str] = []
    previous_rule = False
    for item in tree.items:
        is_rule = isinstance(item, (*ast.RULE_TYPES, ast.InlineTest))
        if chunks and (is_rule or previous_rule):
            chunks.append("")
        chunks.append(print_item(item))
        previous_rule = is_rule
    return "\n".join(chunks) + "\n" if chunks else ""
