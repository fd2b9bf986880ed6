"""The rule sets a server serves: checked at start, named, hashed, and swapped whole on reload.

* `rule_names` -- each rule file's name (its file stem: ``rules/tau2_airline.rlvp`` is
  ``tau2_airline``), the name a request gives in ``?rules=`` when more than one is served.
* `check_rule_files` -- every file read and checked as ``rlvp-score`` does; `RulesFailed` carries
  the diagnostics rendered as ``rlvp-compile`` prints them.
* `rules_hash` -- ``sha256:<hex>`` of the canonical program (`Program.to_json`) and the rules'
  source locations: the same rules give the same hash; a rule moved to another line (which
  changes the ``location`` in every credit) gives another.
* `RuleHolder` -- the current `RuleSets`, one immutable object: a request reads it once and
  scores with it, so a reload (a new object put in its place) never mixes two rule sets in one
  answer; a reload that fails leaves the current one.
* `write_snapshot` / `read_snapshot` -- the checked rule sets as the parent process hands them to
  its worker processes (a private file, written whole then renamed): every worker serves the
  same rules, a worker restarted later included, whatever the rule files hold by then.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from rlvp_dsl.compile import Program, compile_ruleset
from rlvp_dsl.diagnostics import render_text, sort_and_cap
from rlvp_dsl.ir import RuleSet
from rlvp_dsl.pipeline import check_file

#: Checked rule sets by name: ``{name: (path, RuleSet)}`` (what a snapshot holds).
Checked = Mapping[str, tuple[str, RuleSet]]


class RulesFailed(Exception):
    """Rule files that cannot be served; ``str()`` is the diagnostics as ``rlvp-compile`` prints them."""


class UnknownRules(ValueError):
    """A request named no rule set (several are served) or one that is not served."""


@attrs.frozen
class ServedRules:
    """One compiled rule set and what names it.

    Attributes:
        name: the rule file's stem (``tau2_airline``).
        path: the rule file as given on the command line.
        program: the compiled rules (immutable, shared by concurrent requests).
        hash: `rules_hash` of the program (``sha256:`` and 64 hex digits).
    """

    name: str
    path: str
    program: Program = attrs.field(eq=False)
    hash: str

    def summary(self) -> dict[str, Any]:
        """``GET /rules``'s entry: name, file, hash, counts, and each rule's name, kind and location."""
        rules = self.program.rules
        kinds = Counter(r.kind for r in rules)
        return {
            "name": self.name,
            "path": self.path,
            "hash": self.hash,
            "rules": len(rules),
            "tools": len(self.program.tools),
            "kinds": dict(sorted(kinds.items())),
            "rule_list": [
                {"name": r.name, "kind": r.kind, "location": loc} for r, loc in zip(rules, self.program.locations)
            ],
        }


@attrs.frozen
class RuleSets:
    """Every rule set served, by name, as one immutable value.

    Attributes:
        by_name: name -> `ServedRules`, in command-line order.
        generation: 1 at start, one more at each successful reload.
        loaded_at: when they were loaded (seconds since the epoch).
    """

    by_name: Mapping[str, ServedRules]
    generation: int
    loaded_at: float

    def choose(self, name: str | None) -> ServedRules:
        """The rule set a request names (``?rules=NAME``); the only one when `name` is None.

        Raises:
            UnknownRules: `name` is not served, or None while several are.
        """
        names = ", ".join(self.by_name)
        if name is None:
            if len(self.by_name) == 1:
                return next(iter(self.by_name.values()))
            raise UnknownRules(f"this server serves several rule sets ({names}): name one with ?rules=NAME")
        found = self.by_name.get(name)
        if found is None:
            raise UnknownRules(f"no rule set named {name!r} is served (served: {names})")
        return found

    def hashes(self) -> dict[str, str]:
        """name -> hash."""
        return {name: served.hash for name, served in self.by_name.items()}


def rule_names(paths: Sequence[str]) -> dict[str, str]:
    """name -> path for the rule files on the command line (the name is the file stem).

    Raises:
        ValueError: two files with one stem (``a/x.rlvp`` and ``b/x.rlvp``), or the same file twice.
    """
    out: dict[str, str] = {}
    for path in paths:
        name = Path(path).stem
        if name in out:
            raise ValueError(
                f"two rule files are named {name!r} ({out[name]} and {path}): a request names a rule set by "
                "its file stem, so give each file its own name"
            )
        out[name] = path
    return out


def check_rule_files(named: Mapping[str, str]) -> dict[str, tuple[str, RuleSet]]:
    """Read and check every rule file (and its includes and manifests).

    Returns:
        name -> (path, checked `RuleSet`), in the order of `named`.

    Raises:
        RulesFailed: a file is missing, not a regular file, or has errors; the message is every
            failing file's diagnostics as ``rlvp-compile`` renders them.
    """
    out: dict[str, tuple[str, RuleSet]] = {}
    problems: list[str] = []
    for name, path in named.items():
        if not os.path.isfile(path):
            what = "is a directory, not a rule file" if os.path.isdir(path) else "rule file not found"
            problems.append(f"{what}: {path}")
            continue
        result = check_file(path)
        if not result.ok or result.ruleset is None:
            kept, dropped = sort_and_cap(result.diagnostics)
            problems.append(render_text(kept, result.sources, dropped=dropped))
            continue
        out[name] = (path, result.ruleset)
    if problems:
        raise RulesFailed("\n".join(problems))
    return out


def rules_hash(program: Program) -> str:
    """``sha256:<hex>`` of the canonical program JSON and the rules' source locations."""
    document = {"program": program.to_json(), "locations": list(program.locations)}
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def compile_sets(checked: Checked, generation: int) -> RuleSets:
    """The served form of checked rule sets: each compiled and hashed."""
    by_name = {}
    for name, (path, ruleset) in checked.items():
        program = compile_ruleset(ruleset)
        by_name[name] = ServedRules(name=name, path=path, program=program, hash=rules_hash(program))
    return RuleSets(by_name=by_name, generation=generation, loaded_at=time.time())


def write_snapshot(path: str, checked: Checked, generation: int) -> None:
    """Write the checked rule sets to `path` for the worker processes: to a temporary file in the
    same folder, then renamed over `path` (a reader sees the old file or the new one, whole)."""
    folder = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=".rules-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump({"generation": generation, "checked": dict(checked)}, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def read_snapshot(path: str) -> tuple[dict[str, tuple[str, RuleSet]], int]:
    """The checked rule sets and their generation, as `write_snapshot` wrote them.

    The file is this server's own (a folder only its user can read, made at start); it is never
    a file a request names.

    Raises:
        RulesFailed: the file cannot be read.
    """
    try:
        with open(path, "rb") as handle:
            data = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError) as exc:
        raise RulesFailed(f"cannot read the rule snapshot {path}: {exc}") from None
    return data["checked"], int(data["generation"])


@attrs.frozen
class ReloadOutcome:
    """What a reload did: `ok`, and one line saying so (the hashes now served, or why the old rules stay)."""

    ok: bool
    message: str


class RuleHolder:
    """The rule sets being served, replaced whole by `reload`.

    Args:
        loader: makes new `RuleSets` from the current ones (reads the rule files, or the
            snapshot); raises `RulesFailed` when they cannot be served.
        initial: the rule sets to serve first.
    """

    def __init__(self, loader: Callable[[RuleSets], RuleSets], initial: RuleSets) -> None:
        self._loader = loader
        self._current = initial
        self._lock = threading.Lock()  # one reload at a time; readers never wait

    @property
    def current(self) -> RuleSets:
        """The rule sets now served: read it once per request (one attribute read: never half-replaced)."""
        return self._current

    def reload(self) -> ReloadOutcome:
        """Load the rule sets again and serve them; on failure keep serving the current ones."""
        with self._lock:
            old = self._current
            try:
                new = self._loader(old)
            except RulesFailed as exc:
                return ReloadOutcome(False, f"reload failed; still serving {describe(old)}:\n{exc}")
            self._current = new
            return ReloadOutcome(True, f"reloaded: now serving {describe(new)}")


def describe(sets: RuleSets) -> str:
    """``tau2_airline sha256:... (15 rules) (generation 1)``: what is served, for the log."""
    served = ", ".join(f"{s.name} {s.hash} ({len(s.program.rules)} rules)" for s in sets.by_name.values())
    return f"{served} (generation {sets.generation})"


def file_loader(named: Mapping[str, str]) -> Callable[[RuleSets], RuleSets]:
    """A `RuleHolder` loader that checks the rule files again (one server process)."""

    def load(current: RuleSets) -> RuleSets:
        return compile_sets(check_rule_files(named), current.generation + 1)

    return load


def snapshot_loader(path: str) -> Callable[[RuleSets], RuleSets]:
    """A `RuleHolder` loader that reads the parent's snapshot (a worker process)."""

    def load(current: RuleSets) -> RuleSets:
        checked, generation = read_snapshot(path)
        return compile_sets(checked, generation)

    return load
