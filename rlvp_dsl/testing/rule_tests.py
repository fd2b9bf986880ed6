"""Tests inside rule files: run each ``test`` block's episode and compare credits.

    test "a write after a read is not blind" {
      episode {
        call get_reservation_details {"reservation_id": "ABC"} ok
        call cancel_reservation {"reservation_id": "ABC"} ok
      }
      expect inspect_before_write == 0
      expect write_unconfirmed at call 1 == -0.5
    }

An expectation sums the credits of one rule (or of all rules: ``total``) over the
whole episode, or over one event (``at call N`` -- the N-th tool call, from 0 --
or ``at event N``), and compares with the value (absolute tolerance 1e-9).
`rlvp-compile --test` runs them like a test runner.
"""

from __future__ import annotations

import os

import attrs

from ..compile import Program
from ..events import CALL, Credit, Episode, Event
from ..ir import RuleTest

TOLERANCE = 1e-9


@attrs.frozen
class RuleTestResult:
    """The result of one test block: its failures (empty when it passed) and the credits seen."""

    name: str
    location: str
    failures: tuple[str, ...]
    credits: tuple[Credit, ...] = ()
    episode: Episode | None = None

    @property
    def passed(self) -> bool:
        return not self.failures


class EpisodeLoadError(Exception):
    """A test's episode file cannot be read (missing, not a trajectory, not exactly one episode)."""


def episode_of_test(test: RuleTest) -> Episode:
    """The episode of a test block: built from the inline events, or read from its file.

    Raises:
        EpisodeLoadError: the file is missing, unreadable, or holds other than one episode.
    """
    block = test.block
    if block.episode_file is None:
        events = []
        for i, e in enumerate(block.events or ()):
            if e.kind == CALL:
                assert e.tool is not None  # the grammar gives every call event its tool
                events.append(
                    Event(
                        i,
                        CALL,
                        tool=e.tool.text,
                        arguments=dict(e.arguments),
                        status=e.status,
                        error_text=e.error_text or (f"{e.status}" if e.status != "ok" else ""),
                        result=e.result,
                        signals=dict(e.signals),
                        message=e.message,
                    )
                )
            else:
                events.append(Event(i, e.kind, text=e.text, message=e.message))
        return Episode(f"test {block.name!r}", tuple(events), source=test.file)
    from ..readers import ReaderError, read_episodes

    path = os.path.join(os.path.dirname(test.file), block.episode_file)
    try:
        episodes = read_episodes(path)
    except FileNotFoundError:
        raise EpisodeLoadError(f"episode file not found: {path}") from None
    except (ReaderError, OSError, ValueError) as exc:
        raise EpisodeLoadError(f"cannot read episode file {path}: {exc}") from None
    if len(episodes) != 1:
        raise EpisodeLoadError(f"{path} holds {len(episodes)} episodes; a test needs exactly one")
    return episodes[0]


def _describe_credits(credits: list[Credit]) -> str:
    if not credits:
        return "no credit"
    return "; ".join(f"{c.rule} {c.value:+g} ({c.reason})" for c in credits)


def run_test(program: Program, test: RuleTest) -> RuleTestResult:
    """Run one test block against the compiled program."""
    block = test.block
    try:
        episode = episode_of_test(test)
    except EpisodeLoadError as exc:
        return RuleTestResult(block.name, block.span.location, (str(exc),))
    credits = program.score(episode)
    calls = [e.index for e in episode.events if e.kind == CALL]
    failures = []
    for expect in block.expects:
        chosen = [c for c in credits if expect.rule is None or c.rule == expect.rule.text]
        what = "total" if expect.rule is None else expect.rule.text
        where = ""
        if expect.at is not None:
            where = f" at {expect.at} {expect.index}"
            limit = len(calls) if expect.at == "call" else len(episode.events)
            if expect.index >= limit:
                failures.append(
                    f"{expect.span.location}: expect {what}{where}: the episode has only {limit} "
                    f"{'calls' if expect.at == 'call' else 'events'}"
                )
                continue
            index = calls[expect.index] if expect.at == "call" else expect.index
            chosen = [c for c in chosen if c.event_index == index]
        got = sum(c.value for c in chosen)
        if abs(got - expect.value) > TOLERANCE:
            failures.append(
                f"{expect.span.location}: expect {what}{where} == {expect.value:g}: got {got:g} "
                f"({_describe_credits(chosen)})"
            )
    return RuleTestResult(block.name, block.span.location, tuple(failures), tuple(credits), episode)


def run_tests(program: Program) -> list[RuleTestResult]:
    """Run every test block of the program's rule files, in source order."""
    return [run_test(program, t) for t in program.ruleset.tests]
