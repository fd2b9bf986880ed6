"""Tag names: the tags with a meaning of their own, and the checks that a declared tag is not a
misspelling of one (the help of RV202 when a rule tests a standard tag no tool carries; the
RV212 warning for a declared tag close to a standard one that no rule tests)."""

from __future__ import annotations

import difflib

from ..diagnostics import quoted
from .state import CheckState

#: Tags the readers give events themselves (`user_side`: a call the user makes, tau2 telecom).
BUILTIN_TAGS = frozenset({"user_side"})

#: Tags with a meaning of their own: the structural rules' defaults (read, write, destructive), the derived
#: rules (verify, test, submit), the manifest formats (think, generic, idempotent, additive, open_world,
#: closed_world), the readers (user_side) and the stock rules (search). A declared tag close to one of these
#: is a likely typo (RV212).
STANDARD_TAGS = frozenset(
    {
        "read",
        "write",
        "destructive",
        "verify",
        "test",
        "submit",
        "search",
        "think",
        "generic",
        "idempotent",
        "additive",
        "open_world",
        "closed_world",
        "user_side",
    }
)

#: How close (difflib ratio) a declared tag must be to a standard one to be flagged: `raed`/`read` is 0.75,
#: `agent_side`/`user_side` (a real tag) 0.63.
TAG_TYPO_CUTOFF = 0.75


def misdeclared(state: CheckState, tag: str) -> str:
    """For a standard tag no tool carries: a help line pointing at the declared tag that looks like a
    misspelling of it (the declaration is what to fix), or ""."""
    if tag not in STANDARD_TAGS:
        return ""
    close = difflib.get_close_matches(tag, sorted(set(state.tag_origins) - STANDARD_TAGS), n=1, cutoff=TAG_TYPO_CUTOFF)
    if not close:
        return ""
    tool, span = state.tag_origins[close[0]]
    return f"did you mean to declare {quoted(tag)}? tool {quoted(tool)} at {span.location} declares {quoted(close[0])}"


def tag_typos(state: CheckState) -> None:
    """RV212: a declared tag close to a standard tag, that no rule tests by its own spelling."""
    for tag, (tool, span) in state.tag_origins.items():
        if tag in STANDARD_TAGS or tag in state.used_tags:
            continue
        close = difflib.get_close_matches(tag, sorted(STANDARD_TAGS), n=1, cutoff=TAG_TYPO_CUTOFF)
        if close:
            state.warn(
                "RV212",
                f"tool {quoted(tool)} declares tag {quoted(tag)}, which no rule tests; it is close "
                f"to the standard tag {quoted(close[0])}",
                span,
                f"did you mean {quoted(close[0])}? fix the declaration; if {quoted(tag)} is meant, "
                f"test it in a rule (`tag {tag}`)",
            )
