"""What `rlvp-score` says about the episodes it read, before their scores: the domains (kept by
`--domain`, or blended in one summary) and the notes on the data (calls to undeclared tools, tool
names that are not text or missing, error flags that are not booleans, malformed arguments, episodes
without events)."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..diagnostics import counted, quoted

if TYPE_CHECKING:
    from ..compile import Program
    from ..events import Episode

#: What a malformed call's problem says when its arguments (not its name or its length) are what broke it.
_BAD_ARGUMENTS = (
    "arguments are not valid JSON",
    "arguments must be a JSON object",
    "tool call is not valid JSON",
    "tool call arguments are not valid JSON",
)


def domain_of(episode: Episode) -> str | None:
    """The episode's domain as its trajectory records it (``meta["domain"]``), or None."""
    domain = episode.meta.get("domain")
    return str(domain) if domain not in (None, "") else None


def domains_text(counts: Counter[str | None]) -> str:
    """``airline 3, telecom 1; 2 with no domain recorded``: the episodes per domain, most first."""
    named = sorted(((d, n) for d, n in counts.items() if d is not None), key=lambda x: (-x[1], x[0]))
    text = ", ".join(f"{d} {n}" for d, n in named)
    if counts.get(None):
        text += ("; " if text else "") + f"{counts[None]} with no domain recorded"
    return text


def domain_hints(wanted: Sequence[str], counts: Counter[str | None]) -> str:
    """Did-you-mean over the domains found, for each wanted domain that matched none (`airlin`: 'airline')."""
    found = {d.casefold(): d for d in counts if d is not None}
    hints = []
    for name in wanted:
        if name.casefold() not in found:
            close = difflib.get_close_matches(name.casefold(), sorted(found), n=1, cutoff=0.6)
            if close:
                hints.append(f"--domain {name}: did you mean {quoted(found[close[0]])}?")
    return "; ".join(hints)


def select_domains(episodes: Sequence[Episode], wanted: Sequence[str]) -> tuple[list[Episode], str]:
    """The episodes of the `wanted` domains (case-insensitive), and a note on what was left out."""
    keep = {w.casefold() for w in wanted}
    kept = [e for e in episodes if (domain_of(e) or "").casefold() in keep]
    left = Counter(domain_of(e) for e in episodes if e not in kept)
    note = (
        f"--domain {', '.join(wanted)}: {counted(len(kept), 'episode')}; left out {domains_text(left)}" if left else ""
    )
    return kept, note


def data_notes(program: Program, episodes: Sequence[Episode]) -> list[str]:
    """The notes and warnings on the episodes' data (each "" when there is nothing to say, left out):
    tool names that are not text, error flags that are not booleans, calls without a tool name,
    malformed arguments, episodes without events, calls to tools the rules do not declare."""
    notes = (
        _bad_names_note(episodes),
        _bad_flags_note(episodes),
        _no_names_note(episodes),
        _bad_arguments_note(episodes),
        _empty_note(episodes),
        _undeclared_note(program, episodes),
    )
    return [note for note in notes if note]


def _first(problems: Sequence[str]) -> str:
    """The first of `problems`, and how many more: ``a.json: simulations[2]... (and 3 more)``."""
    return problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")


def _bad_flags_note(episodes: Sequence[Episode]) -> str:
    """A warning when tool results carry an error flag that is not a boolean (``"error": "yes"``,
    ``1``): only JSON ``true`` marks an error (docs/readers.md), so such a result is read by its
    text alone; the first one is named (file, record, field: the readers' ``meta["bad_error_flags"]``)."""
    problems = [
        f"{episode.source}: {problem}" for episode in episodes for problem in episode.meta.get("bad_error_flags", ())
    ]
    if not problems:
        return ""
    results = "1 tool result has" if len(problems) == 1 else f"{len(problems):,} tool results have"
    return (
        f"warning: {results} an error flag that is not true or false (only true marks an error; "
        f"its result is judged by its text alone): {_first(problems)}"
    )


#: The problem of a call whose tool name is missing (`rlvp_dsl.readers.builder.EpisodeBuilder.call`).
_NO_NAME = "call has no tool name"


def _no_names_note(episodes: Sequence[Episode]) -> str:
    """A note when calls have no tool name: they are scored as failed (malformed) calls, as calls
    with malformed arguments are; the first one is named (its episode and event)."""
    places = [
        f"{episode.source}: episode {episode.id}, event {event.index}"
        for episode in episodes
        for event in episode.calls
        if event.tool is None and event.status == "malformed" and (event.error_text or "").startswith(_NO_NAME)
    ]
    if not places:
        return ""
    had = "1 call had" if len(places) == 1 else f"{len(places):,} calls had"
    them = "it" if len(places) == 1 else "them"
    return f"note: {had} no tool name (scored as malformed; --explain shows {them}): {_first(places)}"


def _empty_note(episodes: Sequence[Episode]) -> str:
    """A note when episodes have no events (a JSONL line ``[]`` or ``{"messages": []}``): each is
    scored 0 and counted in the summary's means; the first is named by its file and record (the
    chat reader's ``meta["empty_record"]``, ``line 3``; else the episode's id)."""
    places = [
        f"{episode.source}: {episode.meta.get('empty_record') or episode.id}"
        for episode in episodes
        if not episode.events
    ]
    if not places:
        return ""
    have = "1 episode has" if len(places) == 1 else f"{len(places):,} episodes have"
    return f"note: {have} no events (no messages; scored 0 and counted in the means): {_first(places)}"


def _undeclared_note(program: Program, episodes: Sequence[Episode]) -> str:
    """A note when calls go to tools the rules do not declare (the wrong rule file?)."""
    counts: dict[str, int] = {}
    calls = 0
    for episode in episodes:
        for event in episode.calls:
            calls += 1
            if event.tool is not None and event.tool not in program.tools:  # no name: a malformed call
                counts[event.tool] = counts.get(event.tool, 0) + 1
    if not counts:
        return ""
    names = sorted(counts, key=lambda t: (-counts[t], str(t)))
    shown = ", ".join(str(n) for n in names[:6]) + (", ..." if len(names) > 6 else "")
    return (
        f"note: {sum(counts.values()):,} of {counted(calls, 'call goes', 'calls go')} to "
        f"{counted(len(counts), 'tool')} the rules do not declare "
        f"({shown}); rules that name tools or tags never match them"
    )


def _bad_names_note(episodes: Sequence[Episode]) -> str:
    """A warning when calls have a tool name that is not text (``"name": 5``): a data problem, not
    the agent's; the calls are scored as malformed, and the first one is named."""
    problems = [
        f"{episode.source}: {problem}" for episode in episodes for problem in episode.meta.get("bad_tool_names", ())
    ]
    if not problems:
        return ""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    calls = "1 call has" if len(problems) == 1 else f"{len(problems)} calls have"
    return f"warning: {calls} a tool name that is not text (scored as malformed): {problems[0]}{more}"


def _bad_arguments_note(episodes: Sequence[Episode]) -> str:
    """A note when calls had arguments that are not a JSON object: they are scored as failed (malformed)
    calls, which is easy to miss without --explain."""
    calls = sum(
        1
        for episode in episodes
        for event in episode.calls
        if event.status == "malformed" and any(p in (event.error_text or "") for p in _BAD_ARGUMENTS)
    )
    if not calls:
        return ""
    had = "1 call had" if calls == 1 else f"{calls:,} calls had"
    return f"note: {had} malformed arguments (not a JSON object; scored as failed calls; --explain shows them)"
