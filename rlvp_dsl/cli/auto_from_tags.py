"""`rlvp-compile --auto-from-tags MANIFEST`: derive a rule file from a tool manifest, optionally
weighed on trajectories first (`--validate`, `--drop-harmful`).

`derive_rules` is the whole mode: load the manifest, validate, derive, write; each step says its
own warnings, and a step that cannot go on raises `Stop` (cli/__init__.py) with the message.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
import sys
from typing import TYPE_CHECKING

from . import EXIT_INPUT_ERRORS, EXIT_OK, EXIT_USAGE, Stop, write_output
from ..diagnostics import counted
from ..input_files import check_regular

if TYPE_CHECKING:
    from ..manifests import Manifest

#: Endings of files that are surely no manifest: a trajectory, or a rule file.
_NOT_MANIFEST_SUFFIXES = (".jsonl", ".ndjson", ".traj", ".rlvp")


@dataclasses.dataclass(frozen=True)
class Validation:
    """What `--validate` found: the exit status so far (1 when a trajectory file could not be
    read: the others are still used), the harmful rules to leave out (name -> why; empty without
    `--drop-harmful`) and the evidence table."""

    status: int
    drop: dict[str, str]
    evidence: str


def derive_rules(
    manifest_path: str, *, output: str | None, force: bool, validate: list[str] | None, drop_harmful: bool
) -> int:
    """Derive the rule file of `manifest_path` and write it to `output` (standard output when
    None), weighed on the `validate` trajectories first; the exit status.

    Raises:
        Stop: `output` is a hand-written file (without `force`), the manifest cannot be read, or
            `validate` found no evidence.
    """
    from ..manifests.derive import derive_text

    _refuse_hand_written(output, force)
    manifest = _load_manifest(manifest_path)
    if not manifest.tools:
        print(f"rlvp-compile: warning: {manifest_path} declares no tools", file=sys.stderr)
    for note in manifest.notes:
        if "no annotations" in note:  # an assumption the user should see, not only a comment
            print(f"rlvp-compile: warning: {manifest_path}: {note}", file=sys.stderr)
    found = _validate(manifest, validate, drop_harmful) if validate else Validation(EXIT_OK, {}, "")
    text = derive_text(manifest, drop=found.drop)
    # The file first, then the evidence table: a reader that stops early (`| head`) loses no file.
    if output is None:
        if found.evidence:
            print(found.evidence, file=sys.stderr)
        sys.stdout.write(text)
        return found.status
    if not write_output("rlvp-compile", output, text):
        return EXIT_USAGE
    if found.evidence:
        print(found.evidence)
    print(f"{output}: derived {counted(len(manifest.tools), 'tool')} from {manifest_path}", file=sys.stderr)
    return found.status


def _refuse_hand_written(output: str | None, force: bool) -> None:
    """Raise `Stop` (exit 2) when `output` is a non-empty file rlvp did not derive, unless `force`."""
    from ..manifests.derive import is_derived_file

    if output and os.path.isfile(output) and os.path.getsize(output) and not force and not is_derived_file(output):
        raise Stop(
            EXIT_USAGE,
            f"-o {output} exists and was not derived by rlvp-compile --auto-from-tags "
            "(a hand-written rule file?): write to another path, or add --force to replace it",
        )


def _load_manifest(path: str) -> Manifest:
    """The manifest at `path`.

    Raises:
        Stop: exit 2 when `path` is missing, a folder, unreadable, or a trajectory or rule file;
            exit 1 when it is no manifest.
    """
    from ..manifests import ManifestError, load_manifest

    try:
        check_regular(path)
        return load_manifest(path)
    except FileNotFoundError:
        raise Stop(EXIT_USAGE, f"manifest not found: {path}") from None
    except IsADirectoryError:
        raise Stop(EXIT_USAGE, f"{path} is a directory, not a manifest file") from None
    except (ManifestError, ValueError) as exc:
        if path.lower().endswith(_NOT_MANIFEST_SUFFIXES):
            what = "a rule file" if path.lower().endswith(".rlvp") else "a trajectory"
            raise Stop(
                EXIT_USAGE,
                f"{path} is {what}, not a tool manifest: --auto-from-tags "
                "reads a manifest (rlvp tools, tau2, MCP tools/list, OpenAI tools)",
            ) from None
        raise Stop(EXIT_INPUT_ERRORS, str(exc)) from None
    except OSError as exc:
        raise Stop(EXIT_USAGE, f"cannot read {path}: {exc.strerror or exc}") from None


def _validate(manifest: Manifest, trajectories: list[str], drop_harmful: bool) -> Validation:
    """Score the derived rules on the `trajectories` with an outcome: the evidence per rule
    (printed once the rules are written: stdout when they go to -o, else stderr), and a warning
    naming the rules that penalise success more often than failure (left out with `drop_harmful`).

    Raises:
        Stop: a trajectory path is missing (exit 2), or no episode with an outcome was read (exit 1).
    """
    from ..manifests.derive import derive_text
    from ..manifests.validate import render, validate
    from ..pipeline import loads
    from ..readers import ReaderError, read_report

    missing = [p for p in trajectories if not os.path.exists(p)]
    if missing:
        raise Stop(EXIT_USAGE, f"no such file or folder: {', '.join(missing)}")
    try:
        report = read_report(trajectories, keep_going=True)
    except ReaderError as exc:
        raise Stop(EXIT_INPUT_ERRORS, str(exc)) from None
    for error in report.errors:
        print(f"rlvp-compile: error: {error}", file=sys.stderr)
    from .score_notes import domain_of, domains_text

    domains = Counter(domain_of(e) for e in report.episodes)
    if len([d for d in domains if d is not None]) > 1:  # one manifest is one domain's tools
        print(
            f"rlvp-compile: warning: --validate read episodes of {len([d for d in domains if d])} domains "
            f"({domains_text(domains)}); the evidence blends them: give the trajectories of the "
            f"manifest's own domain",
            file=sys.stderr,
        )
    evidence, used = validate(loads(derive_text(manifest), manifest.path), report.episodes)
    if not used:
        raise Stop(EXIT_INPUT_ERRORS, "--validate found no episodes with an outcome in " + ", ".join(trajectories))
    harmful = {
        e.name: (
            f"penalised {e.success_rate:.1%} of successful and {e.failure_rate:.1%} of failed episodes in --validate"
        )
        for e in evidence
        if e.harmful
    }
    if harmful and not drop_harmful:
        print(
            f"rlvp-compile: warning: {counted(len(harmful), 'derived rule penalises', 'derived rules penalise')} "
            f"success more often than failure: {', '.join(harmful)} (--drop-harmful leaves them out)",
            file=sys.stderr,
        )
    status = EXIT_INPUT_ERRORS if report.errors else EXIT_OK
    return Validation(status, harmful if drop_harmful else {}, render(evidence, used))
