"""What each diagnostic code means: its cause, its fix and an example, for
``docs/diagnostics.md`` and ``rlvp-compile --explain-code CODE``.

The codes and their one-line summaries are `diagnostics.CODES`; this module adds to
each code the longer text a user needs.  ``python docs/gen_diagnostics.py`` writes the
page from `render_page` (and ``--check`` says whether it is up to date; the test suite
runs that).  An example is a small rule file: the page shows what ``rlvp-compile`` prints
for it, produced by the checker itself when the page is generated, so the messages on the
page are the real ones.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from .diagnostics import CODES, sort_and_cap, render_text

#: The name examples are checked under (a file that never exists, so nothing on disk is read).
EXAMPLE_PATH = "example.rlvp"


@attrs.frozen
class CodeDoc:
    """The documentation of one code.

    Attributes:
        cause: when the code is reported (Markdown).
        fix: what to change (Markdown).
        example: a rule file that is reported with this code, or "" when a code needs other
            files (a manifest, an include) to show; its output is generated.
    """

    cause: str
    fix: str
    example: str = ""


DOCS: Mapping[str, CodeDoc] = {
    "RV001": CodeDoc(
        "A rule file, an included file (`include`), a manifest (`tools from`) or a test episode file "
        "cannot be read: it does not exist, is a directory, is not readable, or is not UTF-8 text (a "
        "binary file, a file saved as Latin-1 or UTF-16). Also reported at the include that would make "
        "a rule set of more than 1,000 files. While a `tools from` manifest cannot be read (this code or "
        "RV002), the tools and tags it could declare are not reported unknown (RV201, RV202): the one "
        "error at the `tools from` line is what to fix.",
        "Check the path: paths in `include`, `tools from` and `test ... episode` are relative to the "
        "rule file that names them, not to the current directory. Save the file as UTF-8.",
        'include "shared/no_such_file.rlvp"\n',
    ),
    "RV002": CodeDoc(
        "A manifest named by `tools from` exists but cannot be understood: invalid JSON, or a JSON "
        "document that is none of the manifest formats (ours `rlvp-tools/1`, tau2 `tools_manifest.json`, "
        "MCP `tools/list`, OpenAI tools), or a tool entry with a wrong field. The message names the "
        "record and the field. The unknown tools and tags that follow from it are not reported (see RV001).",
        "Fix the manifest where the message points. `rlvp-compile --auto-from-tags MANIFEST` reads the "
        "same formats and reports the same errors, one manifest at a time.",
    ),
    "RV003": CodeDoc(
        "A file includes itself, directly or through other files. The message shows the chain "
        "(`a.rlvp -> b.rlvp -> a.rlvp`).",
        "Remove one include of the chain; move what both files need into a third file that both "
        "include (each file is read once, however often it is included).",
    ),
    "RV004": CodeDoc(
        "A rule set holds more than 50,000 top-level items (declarations, rules and `test` blocks, "
        "counted across all its included files); the caret is at the first item over the limit.",
        "Split the rule set, or fold rules that differ only in a value into one condition "
        '(`call {a, b}`, `arg x in ["a", "b"]`).',
    ),
    "RV101": CodeDoc(
        "The parser met something it did not expect: a misspelled keyword, a missing `{` or `)`, "
        "a character that is not part of the language (`//` comments, single quotes), a string not "
        "closed on its line. The message names what it found and what it expected there, in the "
        "language's words; a name that looks like a misspelled keyword gets `did you mean 'unless'?`, "
        "and the help line often names the mistake.",
        "Follow the help line. Comments start with `#`; strings use double quotes; a regular "
        "expression is `/.../flags` on one line; a rule is `violation NAME (WEIGHT) { on COND }` "
        "(docs/language.md).",
        'violation unconfirmed (-0.5) {\n  on call cancel_reservation\n  unles seen (user says "yes")\n}\n',
    ),
    "RV102": CodeDoc(
        "A keyword of the language (`call`, `open`, `error`, `text`, `target`, ...) is used as a "
        "tool, argument, rule or constant name. The full list is `rlvp_dsl.syntax.keywords()`.",
        'Write the name in backticks: `` tool `open` : read ``, `` arg `text` == "x" ``, or rename it.',
        "tool open : read\n",
    ),
    "RV103": CodeDoc(
        "A block `{`, a parenthesis `(` or a bracket `[` is never closed before the end of the file; "
        "the caret points at the opener, not at the end of the file.",
        "Close it where the block ends.",
        "tool cancel_reservation : write\nviolation unconfirmed (-0.5) {\n  on call cancel_reservation\n",
    ),
    "RV104": CodeDoc(
        "A string or number that cannot be read: an unknown escape in a string (the escapes are "
        '`\\n \\t \\r \\" \\\\ \\/ \\uXXXX`), a bad `\\u` escape, or a number so large it overflows to '
        "infinity.",
        "Fix the literal: write a backslash as `\\\\`; keep numbers below 1e308 (weights are small "
        "numbers: rewards are about 1).",
        "tool a : read\nviolation v (-1e999) { on call a }\n",
    ),
    "RV105": CodeDoc(
        "A regular expression that is invalid, or uses something the linear-time matcher does not "
        "support: backreferences (`\\1`), lookahead and lookbehind (`(?=`, `(?<=`), possessive or atomic "
        "groups. Rule files never run a backtracking matcher, so no regex can blow up on adversarial "
        "text.",
        "The hint names the construct. Rewrite without it: usually a `not` condition or a second test "
        "(`text matches /a/ and not text matches /b/`) says what a lookaround said.",
        "tool a : read\nviolation v (-0.5) {\n  on call a result matches /(ok)\\1/\n}\n",
    ),
    "RV106": CodeDoc(
        "A condition nested more than 100 deep: `not`, `seen` and alternations of `and`/`or` count. "
        "Long flat chains (`a or b or c ...`) and redundant parentheses do not.",
        "Flatten it: write long chains without parentheses, or split the rule in two.",
    ),
    "RV201": CodeDoc(
        "A condition names a tool that no `tool` declaration and no `tools from` manifest declares. "
        "As a warning: a `test` episode calls an undeclared tool (it then carries no tags).",
        "Take the did-you-mean, or declare the tool: `tool NAME : TAGS [target ARG]`, or `tools from` "
        "the agent's manifest.",
        "tool search_flights : read\nviolation v (-0.5) {\n  on call serch_flights error\n}\n",
    ),
    "RV202": CodeDoc(
        "A condition tests a tag (`tag destructive`) that no declared tool carries, so the test can never hold.",
        "Take the did-you-mean, or tag a tool with it (`tool cancel : write, destructive`).",
        "tool cancel : write, destructive\nviolation v (-0.5) {\n  on call tag destuctive\n}\n",
    ),
    "RV203": CodeDoc(
        "A name defined twice: two rules, two constants or two `test` blocks with one name (across "
        "the included files), or one tool given two different targets -- by two `target` clauses, or "
        "by a `target` clause and a `tools from` manifest, which may have inferred the target from the "
        "tools' parameters (the message says which, and where each came from).",
        "Rename one: explanations, summaries and the test runner report by name. For a tool, keep one "
        "target (declaring a tool again may only add tags): drop a `target` clause that disagrees with "
        "the manifest's, or fix its spelling.",
        "tool a : read\nviolation v (-0.5) { on call a }\nviolation v (-0.3) { on call a error }\n",
    ),
    "RV204": CodeDoc(
        "A weight of the wrong sign: a violation, `repeat_error` or `blind_destructive` weight that is "
        "not negative, an obligation's credit below 0 or its `expire` above 0, a progress weight that "
        "is not positive.",
        "Penalties are negative, credits positive: `violation v (-0.5)`, `obligation o (+0.2, expire -0.2)`.",
        "tool a : read\nviolation v (0.5) { on call a }\n",
    ),
    "RV205": CodeDoc(
        "An argument name (`arg X ...`, `same X`) that none of the tools the condition can match takes, "
        "when their parameters are known (from a manifest); `same target` where no matched tool "
        "declares a target; `same X`, `same target` or `same call` asked of an event that can only be "
        "a message turn (a message has no arguments: only `same message` compares messages) -- the "
        "earlier event of `seen (C same X)`, the event the `seen` is tested at (`on assistant and not "
        "seen (... same X)` holds on every assistant turn), or an obligation's `open`; or `returned "
        "message` (a source message is not a value a tool returns). The test could never hold.",
        "Take the did-you-mean over the tools' parameters, or bind an argument those tools take. On "
        "message turns, drop the binding (`seen (C)` asks for any earlier such event) or test a call "
        "that takes the argument. Tools declared inline have no known parameters besides their target: "
        "declare them with `tools from` a manifest to have argument names checked (RV307 flags likely "
        "typos meanwhile).",
        "tool get : read\nviolation v (-0.5) {\n  on call get\n  unless seen (call get ok same target)\n}\n",
    ),
    "RV206": CodeDoc(
        "An obligation that can never be discharged: no event satisfies its `discharge` condition (the "
        "message names two tests that never hold on one event), or no event its discharge can match "
        "carries the `same` binding -- no matched tool takes the argument, or the discharge matches "
        "only message turns (`discharge on assistant same reservation_id`: a message has no arguments). "
        "Every opened instance would expire: a pure penalty.",
        "Check the tools, tags and statuses the discharge combines with `and`; bind an argument the "
        "discharging tools take, or, for a discharge on a message turn, drop `same` (one instance is "
        "open at a time, and the first matching turn after the opener discharges it).",
        "tool a : write\nobligation o (+0.2, expire -0.2) {\n  open on call a ok\n"
        "  discharge on call a error and call a ok\n}\n",
    ),
    "RV207": CodeDoc(
        "A weight names a constant that no `const` defines.",
        "Take the did-you-mean, or define it: `const PENALTY = -0.5`.",
        "const PENALTY = -0.5\ntool a : read\nviolation v (PENALTI) { on call a }\n",
    ),
    "RV208": CodeDoc(
        "A rule could put credit on a user message: its `on` (or an obligation's `open` or `discharge`) "
        "matches user turns. The policy never produced those tokens, so credit there teaches nothing.",
        "Credit lands on tool calls and assistant turns only: narrow the condition with `call` or "
        "`assistant` (test user text inside `seen (...)` instead).",
        'violation rude (-0.5) {\n  on user says "stupid"\n}\n',
    ),
    "RV209": CodeDoc(
        "A value out of its range: `within 0 calls`, a count or cap that is not positive, per-unit "
        "progress without `max`, `<`/`>` on text, an expectation that is not a number.",
        "As the message says; credit must stay bounded, so per-unit progress needs a cap (`(+0.2 per unit, max 1.0)`).",
        "progress closer (+0.2 per unit) { signal distance decreasing }\n",
    ),
    "RV210": CodeDoc(
        "A warning: a rule that can never fire, because no event can satisfy its condition (one event "
        "is never a call of two tools, and a call has no `text`: the message names the two tests that "
        "never hold on one event; a `blind_destructive` whose tools declare no target).",
        "Check what its `and` combines: `call a and call b` is never true; `call {a, b}` means either.",
        "tool a : read\ntool b : write\nviolation v (-0.5) { on call a and call b }\n",
    ),
    "RV211": CodeDoc(
        "An `expect` in a `test` block names a rule that the file does not define.",
        "Take the did-you-mean, name a rule of this file, or expect `total`.",
        'tool a : read\nviolation v (-0.5) { on call a }\ntest "t" {\n  episode {\n    call a {} ok\n  }\n'
        "  expect w at call 0 == -0.5\n}\n",
    ),
    "RV212": CodeDoc(
        "A warning: a tool declares a tag (`tool cancel : wirte`) that no rule tests by that spelling and "
        "that is close to a standard tag, one the language gives meaning (`read`, `write`, `destructive`, "
        "`verify`, `test`, `submit`, `search`, `think`, `generic`, `idempotent`, `additive`, `open_world`, "
        "`closed_world`, `user_side`). The default rules (`repeat_error`, `blind_destructive`) and derived rules see only "
        "the standard spelling, so the tool is silently left out. When a rule tests the standard tag, "
        "RV202 points at the same declaration.",
        "Fix the declaration's spelling (`tool cancel : write`). If the tag is meant, test it in a rule "
        "(`tag wirte`) and the warning goes.",
        "tool get_order : raed target id\nrepeat_error (-0.3)\n",
    ),
    "RV301": CodeDoc(
        "A lint (warning): credit that nothing can penalise. An obligation with credit > 0 whose "
        "`open` and `discharge` meet no violation and no obligation with a negative `expire`, so "
        "opening it is free and a policy is paid for every open-then-discharge pair it makes; or "
        "progress in a rule set that can penalise no call.",
        "Give the obligation an `expire` penalty, open it on the action that must be checked (not on "
        "a free read), or add the penalties that matter. `rlvp-compile --check` shows a farm as a "
        "shrunk episode (docs/testing-rules.md).",
        "tool get : read\nobligation look (+0.5, expire 0) {\n  open on call get ok\n  discharge on assistant\n}\n",
    ),
    "RV302": CodeDoc(
        "A lint (warning): double counting. Two violations whose conditions are equal, or one whose "
        "condition is the other's plus only scope tests (tool, tag, status, kind), so every event of "
        "the narrower rule also fires the broader one; two obligations with equal `open`, `discharge` "
        "and `same`; two progress rules on one signal in one direction.",
        "Merge them, or write the narrower events out of the broader rule with `unless`.",
        "tool a : write\nviolation failed (-0.2) { on call error }\n"
        "violation failed_write (-0.3) { on call a error }\n",
    ),
    "RV303": CodeDoc(
        "A lint (warning): every event that opens the obligation also satisfies its discharge (shown "
        "conjunct by conjunct). An event that discharges never opens an instance, so the obligation "
        "can never open.",
        "Make the discharge something only a later event does (a different tool, `same` a value the opener carries).",
        "tool a : write\nobligation o (+0.2, expire -0.2) {\n  open on call a ok\n  discharge on call a\n}\n",
    ),
    "RV304": CodeDoc(
        "A lint (warning): weights that dwarf the outcome reward. One rule's per-event bound above 1 x "
        "the outcome scale, or the rule set's `Program.event_bound()` (the sum of the bounds) above "
        "5 x the outcome scale (options of `rlvp_dsl.lints.lint`).",
        "Scale the weights down: process credit that swamps the outcome hurt it on tau2 (docs/results.md).",
        "tool a : write\nviolation v (-3.0) { on call a }\n",
    ),
    "RV305": CodeDoc(
        "A lint (warning): an obligation with `deadline before C` where no event can satisfy C, so "
        "its instances expire only at the end of the episode.",
        "Fix C, or write `deadline at end`.",
        "tool a : write\ntool b : read\nobligation o (+0.2, expire -0.2) {\n  open on call a ok\n"
        "  discharge on call b ok\n  deadline before call a and call b\n}\n",
    ),
    "RV306": CodeDoc(
        "A warning: the rule set has no rules: the file is empty, holds only comments, or only "
        "declares tools and constants. It compiles, and gives every episode a credit of 0.",
        "Add a rule (docs/language.md), or check that the file is the one you meant. A file that only "
        "declares tools for other files to `include` is fine: compile the file that includes it.",
        "# rules to come\ntool get_reservation_details : read target reservation_id\n",
    ),
    "RV307": CodeDoc(
        "A warning: an argument name in `arg X ...` or `same X` that no tool is known to take (not a "
        "declared `target`, not a parameter in a manifest, not passed by a `test` episode of the file) "
        "and that is close to a name some tool is known to take: most likely a typo, which would make "
        "the test silently false. Reported for tools declared inline, whose parameters the checker "
        "cannot know (with a manifest's parameters an unknown name is the error RV205).",
        "Take the did-you-mean. If the name is right, declare the tools with `tools from` a manifest "
        "that lists their parameters, or pass the argument in a `test` episode (both make it known).",
        "tool get_reservation_details : read target reservation_id\n"
        "tool cancel_reservation : write target reservation_id\n"
        "violation blind_cancel (-0.3) {\n  on call cancel_reservation\n"
        "  unless seen (call get_reservation_details ok same reservation_ids)\n}\n",
    ),
    "RV308": CodeDoc(
        "A warning: `same message` (the source message the events came in, `Event.message`) in a file "
        "where some tool is known to take an argument called `message` (a declared `target`, a "
        "manifest parameter, or an argument a `test` episode passes). `message` became a keyword with "
        "the source-message binding; a file written before it, where `same message` bound the "
        "argument, now compares source messages instead.",
        "For the argument, write it in backticks: ``same `message` ``. If the source message is meant, "
        "the warning can stay (the rule is right).",
        "tool send_message : write target `message`\n"
        "violation resend (-0.1) {\n  on call send_message and seen (call send_message ok same message)\n}\n",
    ),
}


def missing_docs() -> list[str]:
    """Codes of `diagnostics.CODES` without an entry here, and entries for unknown codes."""
    return sorted(set(CODES) ^ set(DOCS))


def example_output(code: str) -> str:
    """What ``rlvp-compile`` prints for the code's example ("" when it has none)."""
    from .pipeline import check_text

    doc = DOCS[code]
    if not doc.example:
        return ""
    result = check_text(doc.example, EXAMPLE_PATH, lints=True)
    kept, dropped = sort_and_cap(result.diagnostics)
    return render_text(kept, result.sources, dropped=dropped)


def explain(code: str) -> str | None:
    """The plain-text explanation ``rlvp-compile --explain-code CODE`` prints; None for an unknown code."""
    code = code.strip().upper()
    if code not in CODES or code not in DOCS:
        return None
    doc = DOCS[code]
    lines = [f"{code}: {CODES[code]}", "", "Cause: " + doc.cause, "", "Fix: " + doc.fix]
    if doc.example:
        lines += [
            "",
            f"Example ({EXAMPLE_PATH}):",
            "",
            *("    " + line for line in doc.example.splitlines()),
            "",
            "prints:",
            "",
            *("    " + line for line in example_output(code).splitlines()),
        ]
    return "\n".join(lines)


HEADER = """\
# Diagnostics

<!-- Generated by `python docs/gen_diagnostics.py` from rlvp_dsl/diagnostics.py (CODES) and
rlvp_dsl/diagnostic_docs.py (DOCS); edit those, not this page. -->

`rlvp-compile` prints each problem as `file:line:col: error[CODE]: message`, the source
line, a caret under the column and a help line; `--json` prints the same as JSON
(code, severity, message, help, span, location). At most 10 diagnostics per file are
shown, sorted by position (`--max-diagnostics N` changes that). Exit status: 0 ok
(warnings allowed unless `--warnings-as-errors`), 1 errors in the input, 2 usage or I/O
error. `rlvp-compile --explain-code CODE` prints an entry of this page.

Codes by stage: RV0xx reading files, RV1xx syntax, RV2xx meaning (the checker), RV3xx
lints (warnings about rules that compile but shape the gradient badly).
"""


def render_page() -> str:
    """The Markdown of docs/diagnostics.md."""
    out = [HEADER, "| code | summary |", "| --- | --- |"]
    out += [f"| [{code}](#{code.lower()}) | {CODES[code]} |" for code in CODES]
    for code in CODES:
        doc = DOCS.get(code)
        out += ["", f"## {code}", "", CODES[code][:1].upper() + CODES[code][1:] + ".", ""]
        if doc is None:
            out.append("(not documented yet: add it to rlvp_dsl/diagnostic_docs.py)")
            continue
        out += [f"**Cause.** {doc.cause}", "", f"**Fix.** {doc.fix}"]
        if doc.example:
            out += [
                "",
                "```",
                f"# {EXAMPLE_PATH}",
                doc.example.rstrip("\n"),
                "```",
                "",
                "```",
                f"$ rlvp-compile {EXAMPLE_PATH}",
                example_output(code),
                "```",
            ]
    return "\n".join(out) + "\n"
