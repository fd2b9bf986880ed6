"""Scoring stored rollouts at scale on Ray Data (extra ``ray``; tested with ray 2.60).

    import ray
    from rlvp_dsl.integrations.ray import read_rollouts, score_dataset, dataset_hash
    ray.init()
    scored = score_dataset(read_rollouts(["runs/", "more.parquet"]), "rules/tau2_airline.rlvp")
    scored.write_parquet("scored/")          # one row per episode, credits as a list column
    dataset_hash(scored)                      # == the "credit hash" serial rlvp-score prints

`read_rollouts` turns files into rows of ``path``, ``line``, ``record`` (`RECORD_SCHEMA`): a JSONL line (an
OpenAI chat episode), a Parquet row's ``record`` column (the same JSON text), or, for whole-file formats
(tau2, tau-bench v1, OpenAI chat JSON, SWE-agent ``.traj``), the file itself (``line`` 0, ``record`` empty).
Files are split into rows by Ray tasks; `score_dataset` scores the rows with ``map_batches`` on a pool of
`RolloutScorer` actors, each holding one compiled program, into rows of `RESULT_SCHEMA`. A record that cannot
be read becomes a row with ``error`` set (the reader's message, naming file and line) and no credits: it is
counted and named, never fatal. The rule file must be readable on every node (a shared path).

Actors are restarted and their batches retried when they die (Ray Data's default ``max_restarts=-1``, ``max_task_retries=-1``):
scoring is pure, so a retried batch gives the same rows.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]
import ray

from ..cli.score_hash import credit_hash, episode_digest
from ..pipeline import load_program
from ..readers import DEFAULT_ERROR_SIGNALS, ReaderError, read_report
from ..readers.errors import load_json_text
from ..readers.loading import FOLDER_SUFFIXES, JSONL_SUFFIXES
from ..readers.openai_chat import _episode

if TYPE_CHECKING:
    from ..events import Credit, Episode

#: rlvp-score's exit codes (rlvp_dsl.cli; not imported: rlvp_dsl.cli.score imports this module).
EXIT_OK, EXIT_INPUT_ERRORS, EXIT_USAGE = 0, 1, 2

#: The rows `read_rollouts` gives and `score_dataset` takes: a record's file, its line (1-based; a Parquet
#: row's number; 0: the whole file) and its JSON text ("" for a whole file).
RECORD_SCHEMA = pa.schema([("path", pa.string()), ("line", pa.int64()), ("record", pa.string())])

#: One credit in the ``credits`` list column.
CREDIT_TYPE = pa.struct(
    [
        ("event_index", pa.int64()),
        ("rule", pa.string()),
        ("value", pa.float64()),
        ("kind", pa.string()),
        ("location", pa.string()),
        ("reason", pa.string()),
    ]
)

#: A row per episode: where it came from, its id and outcome (reward; null when unknown), its total credit
#: (reward units), its credits, ``digest`` (`rlvp_dsl.cli.score_hash.episode_digest`) and ``error`` (null; or the
#: reader's message for a record that could not be read, then ``id`` is null and ``credits`` empty).
RESULT_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("line", pa.int64()),
        ("id", pa.string()),
        ("outcome", pa.float64()),
        ("total", pa.float64()),
        ("credits", pa.list_(CREDIT_TYPE)),
        ("digest", pa.string()),
        ("error", pa.string()),
    ]
)

#: Suffixes `read_rollouts` takes from folders: the readers' (``.json``, ``.jsonl``, ``.ndjson``, ``.traj``) and Parquet.
ROLLOUT_SUFFIXES = (*FOLDER_SUFFIXES, ".parquet")


def rollout_files(paths: list[str]) -> list[str]:
    """The files of `paths` (folders walked in sorted order for `ROLLOUT_SUFFIXES`), each once.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    out: list[str] = []
    for item in paths:
        path = Path(item)
        if path.is_dir():
            out += sorted(str(p) for p in path.rglob("*") if p.is_file() and p.suffix.lower() in ROLLOUT_SUFFIXES)
        elif path.exists():
            out.append(str(path))
        else:
            raise FileNotFoundError(f"no such file or folder: {item}")
    unique: dict[str, str] = {}
    for p in out:
        unique.setdefault(os.path.realpath(p), p)
    return list(unique.values())


def _file_records(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The `RECORD_SCHEMA` rows of one file (a Ray Data ``flat_map``)."""
    path = str(row["path"])
    suffix = Path(path).suffix.lower()
    if suffix in JSONL_SUFFIXES:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    yield {"path": path, "line": lineno, "record": line.rstrip("\r\n")}
    elif suffix == ".parquet":
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        table = pq.read_table(path)
        if "record" not in table.column_names:
            yield {"path": path, "line": 0, "record": "\0no-record-column"}
            return
        for k, text in enumerate(table.column("record").to_pylist(), start=1):
            yield {"path": path, "line": k, "record": "" if text is None else str(text)}
    else:
        yield {"path": path, "line": 0, "record": ""}


def read_rollouts(paths: str | list[str], *, parallelism: int = -1) -> ray.data.Dataset:
    """A Ray dataset of `RECORD_SCHEMA` rows from trajectory files and folders (split into records by Ray tasks).

    Args:
        paths: files or folders: JSONL (OpenAI chat, a record per line), Parquet (a string column ``record``
            holding one such record per row), and the whole-file formats the readers take.
        parallelism: Ray Data's ``override_num_blocks`` for the list of files (-1: Ray's choice).

    Raises:
        FileNotFoundError: a path does not exist.
    """
    files = rollout_files([paths] if isinstance(paths, str) else list(paths))
    blocks = {"override_num_blocks": min(parallelism, len(files))} if parallelism > 0 and files else {}
    return ray.data.from_items([{"path": f} for f in files], **blocks).flat_map(_file_records, num_cpus=0.25)


class RolloutScorer:
    """A Ray Data callable class: one compiled program per actor, a batch of `RECORD_SCHEMA` rows in, a
    ``pyarrow.Table`` of `RESULT_SCHEMA` rows out (one per episode; whole files may hold many).

    Raises (at construction, in the actor):
        RuleError: the rule file has errors (`score_dataset` checks it first on the driver).
    """

    def __init__(self, rules: str, format: str | None = None) -> None:
        self.program = load_program(rules)
        self.format = format

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows: list[dict[str, Any]] = []
        for row in batch.to_pylist():
            rows += self.score_row(str(row["path"]), int(row["line"]), row.get("record") or "")
        return pa.Table.from_pylist(rows, schema=RESULT_SCHEMA)

    def score_row(self, path: str, line: int, record: str) -> list[dict[str, Any]]:
        """The result rows of one record (one row), or of a whole file (line 0; a row per episode)."""
        try:
            episodes = self._episodes(path, line, record)
        except ReaderError as exc:
            return [_error_row(path, line, str(exc))]
        except RecursionError:
            return [_error_row(path, line, f"{path}: line {line}: values nested too deeply")]
        return [_episode_row(path, line, e, self.program.score(e)) for e in episodes]

    def _episodes(self, path: str, line: int, record: str) -> list[Episode]:
        if record == "\0no-record-column":
            raise ReaderError(
                path, detail="a Parquet file of rollouts needs a string column 'record' (JSON of one episode)"
            )
        if line == 0:
            report = read_report([path], format=self.format, keep_going=True)
            if report.errors:
                raise report.errors[0]
            return list(report.episodes)
        if self.format not in (None, "openai"):
            raise ReaderError(
                path, f"line {line}", detail=f"a record per line is read as 'openai', not {self.format!r}"
            )
        name = Path(path).name
        value = load_json_text(record, path, line_offset=line - 1)
        return [_episode(value, path, name, f"line {line}", f"{name}:{line}", DEFAULT_ERROR_SIGNALS["openai"])]


def _episode_row(path: str, line: int, episode: Episode, credits: list[Credit]) -> dict[str, Any]:
    triples = [(c.event_index, c.rule, c.value) for c in credits]
    return {
        "path": path,
        "line": line,
        "id": episode.id,
        "outcome": episode.outcome,
        "total": float(sum(c.value for c in credits)),
        "credits": [
            {
                "event_index": c.event_index,
                "rule": c.rule,
                "value": c.value,
                "kind": c.kind,
                "location": c.location,
                "reason": c.reason,
            }
            for c in credits
        ],
        "digest": episode_digest(episode.id, triples),
        "error": None,
    }


def _error_row(path: str, line: int, message: str) -> dict[str, Any]:
    return {
        "path": path,
        "line": line,
        "id": None,
        "outcome": None,
        "total": 0.0,
        "credits": [],
        "digest": None,
        "error": message,
    }


def score_dataset(
    ds: ray.data.Dataset,
    rules: str | os.PathLike[str],
    *,
    format: str | None = None,
    concurrency: int = 2,
    batch_size: int = 64,
    num_cpus: float = 0.75,
    scorer: type[RolloutScorer] = RolloutScorer,
) -> ray.data.Dataset:
    """Score a dataset of `RECORD_SCHEMA` rows (`read_rollouts`) on a pool of `concurrency` actors.

    Args:
        ds: rows with ``path``, ``line`` and ``record`` (see the module docstring).
        rules: the ``.rlvp`` rule file (readable on every node); checked here first.
        format: the whole-file format (None: detected per file); records are read as OpenAI chat.
        concurrency: actors in the pool, one CPU and one compiled program each.
        batch_size: records per batch (a retried batch is scored again).
        num_cpus: logical CPUs per actor: below 1 leaves room for `read_rollouts`' tasks (0.25 each), so that
            ``concurrency`` equal to the cluster's CPUs does not starve them.
        scorer: the callable class (`RolloutScorer` or a subclass).

    Returns:
        A lazy dataset of `RESULT_SCHEMA` rows, one per episode or unreadable record.

    Raises:
        RuleError: the rule file has errors.
    """
    rules = os.fspath(rules)
    load_program(rules)  # the rule file's errors on the driver, before any actor starts
    return ds.map_batches(
        scorer,
        fn_constructor_args=(os.path.abspath(rules), format),
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=concurrency),  # `concurrency=` is deprecated since Ray 2.51
        num_cpus=num_cpus,
    )


def dataset_hash(scored: ray.data.Dataset) -> tuple[str, int, list[str]]:
    """(`rlvp_dsl.cli.score_hash.credit_hash` of the scored episodes, how many, the errors of unreadable records);
    equal to serial rlvp-score's credit hash for the same input. Materialises only ``digest`` and ``error``."""
    digests: list[str] = []
    errors: list[str] = []
    for batch in scored.select_columns(["digest", "error"]).iter_batches(batch_format="pyarrow"):
        table: Any = batch
        for digest, error in zip(table.column("digest").to_pylist(), table.column("error").to_pylist()):
            if error is not None:
                errors.append(str(error))
            elif digest is not None:
                digests.append(str(digest))
    return credit_hash(digests), len(digests), sorted(errors)


def score_command(args: Any) -> int:
    """``rlvp-score RULES FILES --ray [--ray-out DIR]``: score on Ray (a running cluster at ``RAY_ADDRESS``,
    else a local one), print the episodes, the unreadable records and the credit hash; with ``--ray-out``
    write the result rows as Parquet. `args` is rlvp-score's ``ScoreArgs`` (not imported: rlvp_dsl.cli.score
    imports this module). The exit status as rlvp-score's: 1 when a record could not be read."""
    other = [
        flag
        for flag, given in (
            ("--explain", args.explain),
            ("--json", args.json),
            ("--csv", args.csv),
            ("--html", args.html),
            ("--domain", args.domain),
            ("--by", args.by),
            ("--error-prefix", args.error_prefix),
            ("--error-flag", args.error_flag),
            ("--atif-out", getattr(args, "atif_out", None)),
        )
        if given
    ]
    problem = (
        f"--ray prints the credit hash and writes Parquet (--ray-out); it does not go with {', '.join(other)}"
        if other
        else "standard input (-) cannot be scored on Ray: name files"
        if "-" in args.trajectories
        else "--ray-out goes with --ray"
        if not args.ray
        else ""
    )
    if problem:
        print(f"rlvp-score: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from ..diagnostics import RuleError

    try:
        load_program(args.rules)
        files = rollout_files(args.trajectories)
    except (RuleError, FileNotFoundError) as exc:
        print(f"rlvp-score: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERRORS if isinstance(exc, RuleError) else EXIT_USAGE
    return _run_on_ray(args, files)


def _run_on_ray(args: Any, files: list[str]) -> int:
    """Score `files` on Ray (started here, and shut down, unless the caller already started it); print the result."""
    started = not ray.is_initialized()
    if started:
        ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        scored = score_dataset(read_rollouts(files), args.rules, format=args.format).materialize()
        if args.ray_out is not None:
            scored.write_parquet(args.ray_out)
        digest, episodes, errors = dataset_hash(scored)
    finally:
        if started:
            ray.shutdown()
    for error in errors:
        print(f"rlvp-score: error: {error}", file=sys.stderr)
    if args.ray_out is not None:
        print(f"rlvp-score: wrote {episodes} episodes to {args.ray_out} (Parquet)", file=sys.stderr)
    print(f"episodes: {episodes}   unreadable records: {len(errors)}   files: {len(files)}")
    print(f"credit hash: {digest}")
    return EXIT_INPUT_ERRORS if errors else EXIT_OK
