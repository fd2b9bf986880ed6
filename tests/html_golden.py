"""The golden episodes of the HTML report's tests (tests/unit/test_html_report.py, tests/browser/).

Three rules over three tools, two episodes; `EXPECTED` is written by hand from the rules'
meaning (docs/language.md), not copied from the program's output.
"""

from __future__ import annotations

from rlvp_dsl.events import Episode, Event

RULES = """\
tool read_file : read target path
tool edit_file : write target path
tool run_tests : verify

violation edit_unread (-0.5) {
  on call edit_file
  unless seen (call read_file ok)
}

violation errored (-0.1) { on call error }

obligation test_after_edit (+0.5, expire -0.3) {
  open on call edit_file ok
  discharge on call run_tests ok
  deadline within 2 calls
}
"""
RULES_PATH = "golden.rlvp"
#: rule -> its line in RULES
RULE_LINES = {"edit_unread": 5, "errored": 10, "test_after_edit": 12}


def _call(i, tool, args, status="ok", result="", error=""):
    return Event(index=i, kind="call", tool=tool, arguments=args, status=status, result=result, error_text=error)


GOLDEN = Episode(
    "golden",
    [
        Event(index=0, kind="user", text="Fix the bug in a.py, then b.py."),
        _call(1, "edit_file", {"path": "a.py"}, result="edited a.py"),
        _call(2, "run_tests", {}, status="error", result="Error: collection failed", error="Error: collection failed"),
        _call(3, "run_tests", {}, result="3 passed " + "x" * 400),
        Event(index=4, kind="assistant", text="a.py is fixed; now b.py."),
        _call(5, "read_file", {"path": "b.py"}, result="def f(): ..."),
        _call(6, "edit_file", {"path": "b.py"}, result="edited b.py"),
        _call(7, "read_file", {"path": "c.py"}, result="..."),
        _call(8, "read_file", {"path": "d.py"}, result="..."),
        _call(9, "read_file", {"path": "e.py"}, result="..."),
        Event(index=10, kind="assistant", text="Done </script><b>not bold</b>"),
    ],
    outcome=0.0,
    source="golden.jsonl",
)

CLEAN = Episode(
    "clean",
    [
        Event(index=0, kind="user", text="Fix a.py."),
        _call(1, "read_file", {"path": "a.py"}, result="def g(): ..."),
        _call(2, "edit_file", {"path": "a.py"}, result="edited a.py"),
        _call(3, "run_tests", {}, result="3 passed"),
        Event(index=4, kind="assistant", text="Fixed."),
    ],
    outcome=1.0,
    source="golden.jsonl",
)

#: (episode id, event index, rule, value, trigger): every credit of the golden episodes.
EXPECTED = [
    ("golden", 1, "edit_unread", -0.5, "fire"),  # edited a.py without reading it
    ("golden", 2, "errored", -0.1, "fire"),  # the failed test run
    ("golden", 3, "test_after_edit", 0.5, "discharge"),  # tests pass 2 calls after the edit at 1
    ("golden", 6, "test_after_edit", -0.3, "expire"),  # the edit at 6: no test run in the 2 calls after it
    ("clean", 3, "test_after_edit", 0.5, "discharge"),
]
#: obligation credits -> the other event they link: (episode, credit's event) -> (linked event, what)
LINKS = {("golden", 3): (1, "opened"), ("golden", 6): (9, "expired"), ("clean", 3): (2, "opened")}
