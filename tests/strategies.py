"""Shared hypothesis strategies: tool tables, rule files built as text, episodes, grammar programs.

Everything is built constructively (no heavy ``.filter``), so health checks stay green:

* `tool_tables()` -- 2..5 tools with tags drawn from read/write/destructive/verify/submit and a
  target argument (``item_id``) or none;
* `rule_files(table)` -- the text of a rule file over that table that the checker accepts
  (every rule kind; violations with and/or/not/seen/since/same, obligations with each deadline
  kind, with and without ``same``, repeat_error, blind_destructive, flat and per-unit progress);
* `episodes(table)` -- episodes over the table's tools (plus an undeclared tool), with colliding
  argument values so targets repeat, every call status, user/assistant turns whose text sometimes
  matches the rules' patterns, and an env signal;
* `grammar_programs()` -- syntactically valid programs generated from the grammar itself
  (`hypothesis.extra.lark.from_lark`), with sane terminals;
* `mutated_texts()` -- truncations and small edits of valid rule text.
"""

from __future__ import annotations

import json

import attrs
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from rlvp_dsl.events import Episode, Event

TAGS = ("read", "write", "destructive", "verify", "submit")
TOOL_NAMES = ("get_item", "list_items", "update_item", "delete_item", "run_check", "submit_all", "ping")
TARGET = "item_id"
#: An undeclared tool: episodes may call it, rules never name it.
UNKNOWN_TOOL = "mystery_tool"
ITEM_IDS = ("A", "B", "C")
SIGNAL = "goals"
#: Message texts: some match the rules' patterns (yes/confirm/done/TRANSFER), some don't.
USER_TEXTS = ("yes", "yes please", "I confirm", "no", "wait", "YES, go ahead", "")
ASSISTANT_TEXTS = ("Summary: I will change item A.", "done", "TRANSFERRED you", "ok", "")
RESULT_TEXTS = ("", '{"status": "ok"}', "found A", "nothing", '{"items": ["B", "C"]}', "AB C.")
ERROR_TEXTS = ("Error: not found", "Error: invalid item", "timeout")
#: Regexes and strings the rules test texts with (all valid for the linear-time matcher).
REGEXES = ("/yes/", "/\\b(yes|confirm)\\b/i", "/^Error/", "/d[aeiou]ne/", "/A|B/")
STRINGS = ('"yes"', '"Error"', '"A"', '"found"', '"TRANSFER"', '""')


@attrs.frozen
class ToolTable:
    """A generated tool table: name -> (sorted tags, target or None)."""

    tools: tuple[tuple[str, tuple[str, ...], str | None], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t[0] for t in self.tools)

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(sorted({tag for _, tags, _ in self.tools for tag in tags}))

    @property
    def all_targeted(self) -> bool:
        return all(target is not None for _, _, target in self.tools)

    def declarations(self) -> str:
        lines = []
        for name, tags, target in self.tools:
            line = f"tool {name}"
            if tags:
                line += " : " + ", ".join(tags)
            if target:
                line += f" target {target}"
            lines.append(line)
        return "\n".join(lines)


@st.composite
def tool_tables(draw) -> ToolTable:
    """2..5 distinct tools; the first is always a read tool and the second a write tool with a
    target, so that every structural rule has something to act on."""
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=2, max_size=5, unique=True))
    tools = []
    for i, name in enumerate(names):
        tags = set(draw(st.sets(st.sampled_from(TAGS), max_size=3)))
        if i == 0:
            tags.add("read")
        if i == 1:
            tags.add("write")
        target = TARGET if i < 2 else draw(st.sampled_from((TARGET, None)))
        tools.append((name, tuple(sorted(tags)), target))
    return ToolTable(tuple(tools))


# ---- conditions ------------------------------------------------------------------


def _tool_set(table: ToolTable):
    one = st.sampled_from(table.names)
    many = st.lists(st.sampled_from(table.names), min_size=1, max_size=3, unique=True).map(
        lambda ts: "{" + ", ".join(ts) + "}"
    )
    return st.one_of(one, many)


def call_heads(table: ToolTable):
    """A condition that only tool calls satisfy (`call`, `call X`, `call {X, Y}`, `call tag T`)."""
    return st.one_of(
        st.just("call"),
        _tool_set(table).map(lambda s: f"call {s}"),
        st.sampled_from(table.tags).map(lambda t: f"call tag {t}"),
    )


def atoms(table: ToolTable):
    """Leaf conditions over the table (any event kind)."""
    arg_value = st.sampled_from(('"A"', '"B"', "1", "2.5", "true", "null"))
    return st.one_of(
        call_heads(table),
        st.sampled_from(("ok", "error", "malformed", "no_result", "assistant", "user")),
        st.sampled_from(table.tags).map(lambda t: f"tag {t}"),
        st.sampled_from(REGEXES + STRINGS).map(lambda p: f"user says {p}"),
        st.sampled_from(REGEXES + STRINGS).map(lambda p: f"assistant says {p}"),
        st.sampled_from(STRINGS).map(lambda s: f"error_text contains {s}"),
        st.sampled_from(REGEXES).map(lambda r: f"result matches {r}"),
        st.sampled_from(STRINGS).map(lambda s: f"text startswith {s}"),
        st.sampled_from(STRINGS).map(lambda s: f"result == {s}"),
        st.just(f"arg {TARGET} exists"),
        arg_value.map(lambda v: f"arg {TARGET} == {v}"),
        st.just(f'arg {TARGET} in ["A", "C"]'),
        st.just(f'arg {TARGET} startswith "A"'),
        st.sampled_from(("<", "<=", ">", ">=", "==", "!=")).map(lambda op: f"signal {SIGNAL} {op} 2"),
    )


def _binding(table: ToolTable):
    choices = ["call", TARGET] + (["target"] if table.all_targeted else [])
    return st.sampled_from(choices)


def conditions(table: ToolTable, depth: int = 2, bound: bool = False):
    """Any condition over the table: and (written `and` or juxtaposed) / or / not / seen with
    optional `same` and `since`.  May be unsatisfiable (the checker only warns).

    `bound`: the condition is tested on a tool call (a rule's `on call ...`), so its `seen`s may
    bind `same ARG` / `same target` / `same call` / `returned ARG` -- each of them over a condition
    only calls satisfy (a message turn carries no argument: RV205/RV206).  Elsewhere (the event may
    be a message turn) only `same message` is drawn, which every event has."""
    if depth <= 0:
        return atoms(table)
    sub = conditions(table, depth - 1, bound)

    @st.composite
    def seen(draw):
        how = draw(st.sampled_from(("", "same", "returned") if bound else ("", "same")))
        if how and bound:
            binding = draw(_binding(table) | st.just("message") if how == "same" else _binding(table))
        else:
            binding = "message"
        # the earlier event a binding compares with must be a call too (except `same message`)
        inner = draw(call_conditions(table, depth - 1) if how and binding != "message" else sub)
        # `same message` looks inside the event's own message; `returned message` is an error (RV205)
        text = f"seen ({inner}" + (f" {how} {binding}" if how else "")
        if draw(st.booleans()):
            text += f" since {draw(sub)}"
        return text + ")"

    return st.one_of(
        atoms(table),
        st.tuples(sub, sub, st.sampled_from((" and ", " "))).map(lambda t: f"({t[0]}{t[2]}{t[1]})"),
        st.tuples(sub, sub).map(lambda t: f"({t[0]} or {t[1]})"),
        sub.map(lambda c: f"not {c}" if not c.startswith("not ") else f"not ({c})"),
        seen(),
    )


def call_conditions(table: ToolTable, depth: int = 2):
    """A condition only tool calls can satisfy: a call head, and-ed with anything (its `seen`s
    may bind arguments: `conditions(bound=True)`)."""
    return st.one_of(
        call_heads(table),
        st.tuples(call_heads(table), conditions(table, depth, bound=True)).map(lambda t: f"{t[0]} and ({t[1]})"),
    )


def discharge_conditions(table: ToolTable):
    """A satisfiable call condition (the checker rejects obligations that can never be
    discharged): a call head, optionally `ok`, optionally and-ed with a history test, a
    negation or an `or` (those never make it unsatisfiable)."""
    extra = st.one_of(
        st.just(""),
        conditions(table, 1).map(lambda c: f" and seen ({c})"),
        conditions(table, 1, bound=True).map(lambda c: f" and not ({c})"),
        st.sampled_from(REGEXES).map(lambda r: f" and (result matches {r} or arg {TARGET} exists)"),
    )
    return st.tuples(call_heads(table), st.sampled_from(("", " ok")), extra).map("".join)


# ---- rules -----------------------------------------------------------------------

_neg = st.sampled_from(("-0.5", "-1", "-0.25", "-2", "NEG"))
_pos = st.sampled_from(("+0.5", "1", "0.25", "0", "POS"))
_nonpos = st.sampled_from(("-0.5", "0", "-1", "NEG"))


@st.composite
def violations(draw, table: ToolTable, name: str) -> str:
    on = draw(call_conditions(table) | st.just("assistant").map(lambda a: a + " " + "says /done/"))
    text = f"violation {name} ({draw(_neg)}) {{\n  on {on}\n"
    if draw(st.booleans()):
        text += f"  unless {draw(conditions(table, bound=on.startswith('call')))}\n"
    return text + "}"


@st.composite
def obligations(draw, table: ToolTable, name: str) -> str:
    opener = draw(call_conditions(table, 1) | st.just("assistant says /Summary/"))
    discharge = draw(discharge_conditions(table) | st.just("assistant"))
    same = ""
    if draw(st.booleans()) and not discharge.startswith("assistant") and not opener.startswith("assistant"):
        same = f" same {draw(_binding(table) | st.just('message'))}"
    deadline = draw(
        st.one_of(
            st.just(""),
            call_heads(table).map(lambda c: f"  deadline before {c}\n"),
            conditions(table, 1).map(lambda c: f"  deadline before {c}\n"),
            st.integers(1, 4).map(lambda n: f"  deadline within {n} calls\n"),
            st.just("  deadline at end\n"),
        )
    )
    return (
        f"obligation {name} ({draw(_pos)}, expire {draw(_nonpos)}) {{\n"
        f"  open on {opener}\n  discharge on {discharge}{same}\n{deadline}}}"
    )


@st.composite
def repeat_errors(draw, table: ToolTable, name: str) -> str:
    text = f"repeat_error {name} ({draw(_neg)})"
    on = f"on {draw(call_conditions(table, 1))} " if draw(st.booleans()) else ""
    reset = f"reset on {draw(conditions(table, 1))} " if draw(st.booleans()) else ""
    if on or reset:
        text += f" {{ {on}{reset}}}"
    return text


@st.composite
def blind_destructives(draw, table: ToolTable, name: str) -> str:
    text = f"blind_destructive {name} ({draw(_neg)})"
    mode = draw(st.integers(0, 2))
    if mode == 1:
        text += f" {{ inspected_by {draw(conditions(table, 1))} }}"
    elif mode == 2:
        text += f" {{ on {draw(call_heads(table))} inspected_by {draw(call_heads(table))} ok }}"
    return text


@st.composite
def progresses(draw, table: ToolTable, name: str) -> str:
    direction = draw(st.sampled_from(("decreasing", "increasing")))
    start = draw(st.sampled_from(("", " from 5", " from 0")))
    if draw(st.booleans()):
        weight = (
            f"{draw(st.sampled_from(('+0.2', '0.5', 'POS')))} per unit, max {draw(st.sampled_from(('1.0', '0.3')))}"
        )
    else:
        weight = draw(st.sampled_from(("+0.2", "1", "POS")))
        if draw(st.booleans()):
            weight += ", max 0.1"
    return f"progress {name} ({weight}) {{ signal {SIGNAL} {direction}{start} }}"


RULE_KINDS = (violations, obligations, repeat_errors, blind_destructives, progresses)


@st.composite
def rule_files(draw, table: ToolTable, min_rules: int = 1, max_rules: int = 6) -> str:
    """The text of a rule file over `table` that checks without errors."""
    kinds = draw(st.lists(st.sampled_from(RULE_KINDS), min_size=min_rules, max_size=max_rules))
    parts = [table.declarations(), "const NEG = -0.75", "const POS = 0.75"]
    for i, kind in enumerate(kinds):
        parts.append(f"# rule {i}")
        parts.append(draw(kind(table, f"r{i}_{kind.__name__}")))
    return "\n".join(parts) + "\n"


# ---- episodes --------------------------------------------------------------------


@st.composite
def call_events(draw, table: ToolTable, index: int) -> Event:
    tool = draw(st.sampled_from(table.names + (UNKNOWN_TOOL,)))
    status = draw(st.sampled_from(("ok", "ok", "ok", "error", "malformed", "no_result")))
    arguments: dict = {}
    if draw(st.integers(0, 4)) > 0:
        arguments[TARGET] = draw(st.sampled_from(ITEM_IDS + (1,)))
    if draw(st.booleans()):
        arguments["n"] = draw(st.integers(0, 2))
    raw = None
    if status == "malformed" and draw(st.booleans()):
        raw = json.dumps(arguments)[:-3] if arguments else '{"item_id": "A'
        arguments = {}
    signals = {}
    if draw(st.integers(0, 2)) == 0:
        signals[SIGNAL] = draw(st.sampled_from((0, 1, 2, 3, 5, 2.5)))
    return Event(
        index,
        "call",
        tool=tool,
        arguments=arguments,
        raw_arguments=raw,
        status=status,
        error_text=draw(st.sampled_from(ERROR_TEXTS)) if status in ("error", "malformed") else "",
        result=draw(st.sampled_from(RESULT_TEXTS)) if status == "ok" else "",
        signals=signals,
        call_id=f"c{index}",
    )


@st.composite
def episodes(draw, table: ToolTable, max_events: int = 14) -> Episode:
    """An episode over the table's tools: calls, user and assistant turns."""
    n = draw(st.integers(0, max_events))
    events = []
    for i in range(n):
        kind = draw(st.sampled_from(("call", "call", "call", "repeat", "user", "assistant")))
        earlier = [e for e in events if e.kind == "call"]
        if kind == "repeat" and earlier:
            # the same call again (same tool and arguments), with a fresh status: repeats
            # are what repeat_error and "spamming the discharge" are about
            again = draw(st.sampled_from(earlier))
            status = draw(st.sampled_from(("ok", "error", "error")))
            events.append(
                attrs.evolve(
                    again,
                    index=i,
                    status=status,
                    call_id=f"c{i}",
                    error_text="Error: again" if status == "error" else "",
                    result="found A" if status == "ok" else "",
                )
            )
        elif kind in ("call", "repeat"):
            events.append(draw(call_events(table, i)))
        else:
            texts = USER_TEXTS if kind == "user" else ASSISTANT_TEXTS
            events.append(Event(i, kind, text=draw(st.sampled_from(texts))))
    if draw(st.booleans()):
        events = draw(grouped_into_messages(events))
    return Episode("generated", tuple(events))


@st.composite
def grouped_into_messages(draw, events: list[Event]) -> list[Event]:
    """The events with source messages: a user turn is a message of its own; assistant text
    and calls join the current assistant message or start a new one (issued together)."""
    out, message, open_assistant = [], -1, False
    for event in events:
        if event.kind == "user" or not open_assistant or not draw(st.booleans()):
            message += 1
        open_assistant = event.kind != "user"
        out.append(attrs.evolve(event, message=message))
    return out


@st.composite
def programs_and_episodes(draw, max_rules: int = 6, max_events: int = 14):
    """(rule text, episode) over one generated tool table."""
    table = draw(tool_tables())
    return draw(rule_files(table, max_rules=max_rules)), draw(episodes(table, max_events=max_events))


# ---- programs from the grammar ---------------------------------------------------

_SAFE_NAMES = (
    "x",
    "read",
    "write",
    "item_id",
    "goals",
    "αβγ",
    "工具",
    "discharge_check",
    "whenever_x",
    "`open`",
    "`call`",
)


def grammar_programs():
    """Syntactically valid programs generated from `grammars/rlvp.lark` with `from_lark`.

    Every keyword and punctuation terminal is drawn with spaces around it, and names,
    strings, numbers and regexes come from small sane sets, so the lexer always sees the
    tokens the generator meant (a name is never glued to a keyword)."""
    from rlvp_dsl.syntax import get_parser

    parser = get_parser()
    explicit = {}
    for term in parser.terminals:
        if term.pattern.type == "str":
            explicit[term.name] = st.just(f" {term.pattern.value} ")
    explicit.update(
        NAME=st.sampled_from(tuple(n for n in _SAFE_NAMES if not n.startswith("`"))).map(lambda s: f" {s} "),
        QUOTED_NAME=st.sampled_from(("`open`", "`call`", "`x y`")).map(lambda s: f" {s} "),
        STRING=st.sampled_from(('"yes"', '""', '"a \\"b\\""', '"é"')).map(lambda s: f" {s} "),
        REGEX=st.sampled_from(("/yes/", "/a|b/i", "/\\/x/", "/^E.*r$/m")).map(lambda s: f" {s} "),
        SIGNED_NUMBER=st.sampled_from(("1", "-0.5", "+2", "3", ".5", "1e1")).map(lambda s: f" {s} "),
        COMPARE=st.sampled_from(("==", "!=", "<", ">=")).map(lambda s: f" {s} "),
        WS=st.just(" "),
        COMMENT=st.just("# c\n"),
    )
    return from_lark(parser, explicit=explicit)


VALID_SAMPLE = """\
tool get_item : read target item_id
tool delete_item : write, destructive target item_id
tool submit_all : submit
const NEG = -0.5
violation unconfirmed (NEG) {
  on call tag write
  unless seen (user says /\\b(yes|confirm)\\b/i since assistant)
}
obligation verify (+0.5, expire -0.5) {
  open on call tag write
  discharge on call get_item ok same item_id
  deadline before call submit_all
}
repeat_error (-0.3)
blind_destructive (-1) { inspected_by call tag read ok }
progress p (+0.2 per unit, max 1.0) { signal goals decreasing from 5 }
"""

_JUNK = (
    "{",
    "}",
    "(",
    ")",
    '"',
    "/",
    "`",
    "and",
    "or",
    "not",
    "violation",
    "-",
    "#",
    "\n",
    "é",
    "\\",
    ",",
    ":",
    "same",
    "0",
    "\x00",
    "'",
)


@st.composite
def mutated_texts(draw, base: str = VALID_SAMPLE) -> str:
    """`base` truncated, with spans deleted, or with junk inserted (any of those, up to 3 times)."""
    text = base
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(("truncate", "delete", "insert", "duplicate")))
        if not text:
            text = draw(st.sampled_from(_JUNK))
            continue
        i = draw(st.integers(0, len(text)))
        if op == "truncate":
            text = text[:i]
        elif op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 12)) :]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(_JUNK)) + text[i:]
        else:
            j = draw(st.integers(i, min(len(text), i + 40)))
            text = text[:j] + text[i:j] + text[j:]
    return text


# ---- rule files for the monotonicity property --------------------------------------


@st.composite
def disjoint_obligations(draw, table: ToolTable, name: str) -> str:
    """An obligation whose opening and discharging tools are disjoint sets and whose
    discharge does not look at history, so a repeated discharging call can never find a
    fresh instance to discharge (the rule of "spamming the discharge earns nothing")."""
    names = list(table.names)
    opens = draw(st.lists(st.sampled_from(names[:-1]), min_size=1, max_size=len(names) - 1, unique=True))
    rest = [n for n in names if n not in opens]
    discharges = draw(st.lists(st.sampled_from(rest), min_size=1, max_size=len(rest), unique=True))
    opener = "call {" + ", ".join(opens) + "}"
    if draw(st.booleans()):
        opener += f" and ({draw(conditions(table, 1))})"
    discharge = "call {" + ", ".join(discharges) + "}" + draw(st.sampled_from(("", " ok", " ok arg item_id exists")))
    same = draw(st.sampled_from(("", " same item_id", " same call")))
    deadline = draw(
        st.sampled_from(
            ("", "  deadline at end\n", "  deadline within 2 calls\n", f"  deadline before call {names[-1]}\n")
        )
    )
    return (
        f"obligation {name} ({draw(_pos)}, expire {draw(_nonpos)}) {{\n"
        f"  open on {opener}\n  discharge on {discharge}{same}\n{deadline}}}"
    )


@st.composite
def monotone_rule_files(draw, table: ToolTable) -> str:
    """Like `rule_files`, with obligations from `disjoint_obligations`."""
    kinds = draw(
        st.lists(
            st.sampled_from(
                (violations, disjoint_obligations, disjoint_obligations, repeat_errors, blind_destructives, progresses)
            ),
            min_size=1,
            max_size=5,
        )
    )
    parts = [table.declarations(), "const NEG = -0.75", "const POS = 0.75"]
    for i, kind in enumerate(kinds):
        parts.append(draw(kind(table, f"r{i}")))
    return "\n".join(parts) + "\n"


def reindexed(events) -> tuple[Event, ...]:
    """The events with their indices renumbered 0, 1, 2, ..."""
    return tuple(attrs.evolve(e, index=i) for i, e in enumerate(events))
