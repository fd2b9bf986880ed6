"""rlvp-score's command line: the options (`parser`) and what they read into (`ScoreArgs`)."""

from __future__ import annotations

import argparse
from typing import Any, Sequence

import attrs

from .options import ArgumentParser
from . import nonempty, version_text, whole_number

#: The trajectory formats ``--format`` takes: `rlvp_dsl.readers.loading.FORMATS`, named here so that
#: building the parser (and ``--help``) imports no reader (tests/unit/test_score_imports.py checks the two agree).
FORMATS = ("tau2", "tau_bench_v1", "openai", "swe_agent", "atif")


@attrs.frozen
class ScoreArgs:
    """rlvp-score's command line as `parser` reads it: one field per option (see its help)."""

    rules: str
    trajectories: list[str]
    format: str | None
    explain: bool
    json: bool
    limit: int
    domain: list[str]
    by: str | None
    csv: str | None
    html: str | None
    error_prefix: list[str]
    error_flag: list[str]
    atif_out: str | None = None
    ray: bool = False
    ray_out: str | None = None
    compare: bool = False


class _Version(argparse.Action):
    """``--version``: `version_text` worked out when asked for (it reads the installed package's
    metadata, ``importlib.metadata``: a cost every run would pay if the parser computed it)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: Any,
        values: str | Sequence[Any] | None,
        option: str | None = None,
    ) -> None:
        print(version_text("rlvp-score"))  # to standard output, as argparse's own "version" action
        parser.exit()


def parser() -> argparse.ArgumentParser:
    """rlvp-score's options (their names are `ScoreArgs`'s fields)."""
    p = ArgumentParser(
        prog="rlvp-score",
        description="Score agent trajectories with an .rlvp rule file: per-call credits, a summary per rule, "
        "and each rule's correlation with the outcome reward.",
        epilog="Formats: tau2 results, tau-bench v1, OpenAI chat (JSON/JSONL, MCP results), SWE-agent .traj. "
        "The JSON and CSV outputs: docs/scoring.md. "
        "Exit codes: 0 ok, 1 errors in the input, 2 usage or I/O error. "
        "A rule file checked without errors is cached ($RLVP_CACHE_DIR, else $XDG_CACHE_HOME/rlvp or "
        "~/.cache/rlvp); RLVP_NO_CACHE=1 turns that off.",
    )
    p.add_argument(
        "rules", help="the .rlvp rule file, - for standard input (with --compare: rule file A, then rule file B)"
    )
    p.add_argument("trajectories", nargs="+", help="trajectory files or folders; - reads standard input")
    p.add_argument(
        "--version",
        action=_Version,
        nargs=0,
        dest=argparse.SUPPRESS,
        default=argparse.SUPPRESS,
        help="show program's version number and exit",
    )
    p.add_argument(
        "--format",
        choices=list(FORMATS),
        help="the trajectory format (default: detected per file)",
    )
    p.add_argument("--explain", action="store_true", help="print every credit with its explanation")
    p.add_argument("--json", action="store_true", help="print the scores as JSON (per episode, per credit, summary)")
    p.add_argument(
        "--limit", type=whole_number(0), default=0, metavar="N", help="with --explain: show at most N episodes (0: all)"
    )
    p.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="NAME",
        type=nonempty("a domain name"),
        help="score only the episodes of this domain (as the trajectory records it: tau2's "
        "domain_name, tau-bench's policy heading, a chat record's meta.domain); repeatable",
    )
    p.add_argument(
        "--by", choices=["domain", "file"], help="one summary per domain or per file instead of one over all episodes"
    )
    p.add_argument(
        "--csv",
        metavar="PATH",
        type=nonempty(),
        help="write one CSV row per episode (outcome, totals, each rule's total) to PATH; - for stdout",
    )
    p.add_argument(
        "--html",
        metavar="PATH",
        type=nonempty(),
        help="write the HTML credit report (one self-contained file: rules, episodes, timelines) to PATH",
    )
    p.add_argument(
        "--error-prefix",
        action="append",
        default=[],
        metavar="TEXT",
        type=nonempty("some text"),
        help="a tool result starting with TEXT is an error (adds to the default of --format, which it needs)",
    )
    p.add_argument(
        "--error-flag",
        action="append",
        default=[],
        metavar="FIELD",
        type=nonempty("a field name"),
        help="a tool message with FIELD true is an error (adds to the default of --format, which it needs)",
    )
    p.add_argument(
        "--atif-out",
        metavar="DIR",
        type=nonempty(),
        help="write each episode as an ATIF v1.7 trajectory, DIR/<episode id>.json, credits in steps[].extra.rlvp "
        "and totals in final_metrics.extra.rlvp (docs/readers.md)",
    )
    p.add_argument(
        "--ray", action="store_true", help="score on Ray Data (docs/integrations.md, Ray); needs the ray extra"
    )
    p.add_argument(
        "--ray-out", metavar="DIR", type=nonempty(), help="with --ray: write a Parquet row per episode to DIR"
    )
    p.add_argument(
        "--compare",
        action="store_true",
        help="rlvp-score --compare A.rlvp B.rlvp TRAJECTORY...: the same episodes under both rule files, per rule "
        "and in total: correlation with the outcome, dead groups made live, B - A with a paired bootstrap 95%% CI, "
        "the episodes whose rank moves most, a verdict (docs/scoring.md); with --json, --csv, --html",
    )
    return p
