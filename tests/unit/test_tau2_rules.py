"""rules/tau2_airline.rlvp and rules/tau2_telecom.rlvp on real tau2 episodes: the procedure credits fire
there, and `--check`'s not_farmable perturbations, applied to those episodes, never raise the credit.

`rlvp-compile --check` searches generated episodes, on which the procedure credits (a profile that
listed the reservation the agent then reads, a confirmed change after a read that returned its
target) fire rarely at the default budget; the real simulations hold them, so the same two
perturbations are applied here: (a) a copy of an event that earned positive credit, right after it,
never raises the episode's total; (b) a no-op read (ok, empty result) of a read tool, aimed at a fresh
target or at any target the episode uses, inserted anywhere, never raises the positive credit of the
other events (`rlvp_dsl.testing.properties`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvp_dsl import load_program
from rlvp_dsl.events import Episode, normalise_value
from rlvp_dsl.readers import read_paths
from rlvp_dsl.testing.strategies import noop_read, reindexed

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "data" / "tau2_simulations"
SHARED = ROOT.parent / "shared" / "data" / "tau2_simulations"
TOL = 1e-9
PER_RULE = 3

#: rule file -> (the tau2 domains it is for, the positive rules that must fire on the real episodes)
RULES = {
    "tau2_airline.rlvp": (
        ("airline",),
        ("locate_reservation", "search_for_change", "confirmed_change", "report_change"),
    ),
    "tau2_telecom.rlvp": (("telecom", "telecom-workflow"), ("guided_fix",)),
}


def _episodes(domains: tuple[str, ...]) -> list[Episode]:
    paths = [SAMPLES] + ([SHARED] if SHARED.is_dir() else [])
    return [e for e in read_paths(paths, format="tau2") if e.meta.get("domain") in domains]


def _insert(episode: Episode, at: int, event) -> Episode:
    events = list(episode.events)
    events.insert(at, event)
    return Episode(episode.id, reindexed(events))


@pytest.mark.parametrize("name", sorted(RULES))
def test_procedure_credits_fire_on_real_episodes_and_are_not_farmed(name):
    """Each positive rule pays on some real episode; no copy of an earning event and no no-op read
    raises what an episode earns."""
    program = load_program(str(ROOT / "rules" / name))
    domains, positive_rules = RULES[name]
    episodes = _episodes(domains)
    assert episodes
    reads = [t for t in program.tools.values() if "read" in t.tags and not t.tags & {"write", "destructive"}]
    scored = [(e, program.score(e)) for e in episodes]
    paid = {c.rule for _, credits in scored for c in credits if c.value > 0}
    # (a) on every episode; (b) -- a scoring per read tool, target and position -- on the first
    # PER_RULE episodes that each positive rule pays on (the suite stays fast)
    probe = {
        id(e)
        for rule in sorted(paid)
        for e in [e for e, cs in scored if any(c.rule == rule and c.value > 0 for c in cs)][:PER_RULE]
    }
    for episode, credits in scored:
        total = sum(c.value for c in credits)
        positive = sum(c.value for c in credits if c.value > 0)
        for i in sorted({c.event_index for c in credits if c.value > 0}):
            copied = _insert(episode, i + 1, episode.events[i])
            assert sum(c.value for c in program.score(copied)) <= total + TOL, (episode.id, i)
        if id(episode) not in probe:
            continue
        used = sorted(
            {
                normalise_value(e.arguments[t.target])
                for e in episode.calls
                if (t := program.tools.get(e.tool or "")) is not None and t.target and t.target in e.arguments
            }
        )
        for read in reads:
            for value in ["fresh0"] + (used if read.target else []):
                for at in range(len(episode.events) + 1):
                    variant = _insert(episode, at, noop_read(read, at, value))
                    after = sum(
                        c.value
                        for c in program.score(variant)
                        if c.value > 0 and not (c.event_index == at and c.trigger == "discharge")
                    )
                    assert after <= positive + TOL, (episode.id, read.name, value, at)
    if SHARED.is_dir():  # the shipped samples are too few to hold every procedure step
        assert set(positive_rules) <= paid, f"never paid on the real episodes: {set(positive_rules) - paid}"
