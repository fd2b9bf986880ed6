"""BFCL v4 multi-turn tasks, read from the installed ``bfcl-eval`` package (nothing is copied).

A task (`BfclTask`) is one line of ``bfcl_eval/data/BFCL_v4_<category>.json`` -- its user turns,
``initial_config``, ``involved_classes``, ``excluded_function`` -- joined with its ground truth (the
call strings per user turn, ``data/possible_answer/``) and the function docs of its involved classes
(``data/multi_turn_func_doc/``, minus the excluded functions).

Only the package's data files and ``bfcl_eval.constants.executable_backend_config`` (plain
dictionaries) are read here; ``bfcl_eval``'s top-level package is empty, and its heavy declared
dependencies (LLM clients, sentence-transformers, faiss) are never imported.

Errors: `BfclNotInstalled` (a ModuleNotFoundError whose message is the pip line) when the package
is absent; ValueError naming the category, or the task id and its category, for a bad choice.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

import attrs

PACKAGE = "bfcl_eval"
VERSION = "2026.3.23"
INSTALL = f'pip install --no-deps "bfcl-eval=={VERSION}" "mpmath>=1.3"'
#: Categories whose tasks this environment plays: the same layout; long_context loads the
#: backends' long-context scenarios; miss_param has user turns whose ground truth is empty
#: (the policy should answer without a call; BFCL's irrelevance check).  multi_turn_miss_func
#: (functions that appear in later turns) is not supported.
CATEGORIES = ("multi_turn_base", "multi_turn_long_context", "multi_turn_miss_param")


class BfclNotInstalled(ModuleNotFoundError):
    """``bfcl-eval`` is not installed; the message says how to install it."""

    def __init__(self) -> None:
        super().__init__(
            f"the bfcl environment needs the bfcl-eval package (its data, backends and checker): {INSTALL} "
            "(--no-deps: its declared dependencies are LLM clients the environment never imports; "
            "or install this project with the 'bfcl' extra and then that line)",
            name=PACKAGE,
        )


def package_root() -> Path:
    """The folder of the installed ``bfcl_eval`` package (found without importing it)."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise BfclNotInstalled()
    return Path(next(iter(spec.submodule_search_locations)))


def available() -> bool:
    """True when ``bfcl-eval`` is installed."""
    try:
        package_root()
    except BfclNotInstalled:
        return False
    return True


@attrs.frozen
class BfclTask:
    """One BFCL multi-turn task.

    Attributes:
        id: BFCL's id (``multi_turn_base_0``).
        category: its category (``multi_turn_base``).
        turns: the user messages, one per user turn (a turn's messages joined by newlines).
        initial_config: per backend class, the scenario ``_load_scenario`` loads.
        involved_classes: the backend classes (``GorillaFileSystem``, ``TwitterAPI``, ...).
        excluded: functions BFCL withholds from the docs of this task.
        ground_truth: per user turn, the ground-truth call strings (``cd(folder='document')``).
        docs: the function docs (decoded JSON) of the involved classes, minus ``excluded``.
    """

    id: str
    category: str
    turns: tuple[str, ...]
    initial_config: dict[str, Any] = attrs.field(eq=False, repr=False)
    involved_classes: tuple[str, ...]
    excluded: tuple[str, ...]
    ground_truth: tuple[tuple[str, ...], ...] = attrs.field(repr=False)
    docs: tuple[dict[str, Any], ...] = attrs.field(eq=False, repr=False)

    @property
    def long_context(self) -> bool:
        return "long_context" in self.category

    def doc(self, name: str) -> dict[str, Any] | None:
        return next((d for d in self.docs if d["name"] == name), None)


def _read_lines(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@functools.lru_cache(maxsize=None)
def class_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    """The function docs of one backend class (``data/multi_turn_func_doc/<file>.json``)."""
    from bfcl_eval.constants.executable_backend_config import MULTI_TURN_FUNC_DOC_FILE_MAPPING

    return tuple(
        _read_lines(package_root() / "data" / "multi_turn_func_doc" / MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name])
    )


def doc_files() -> list[Path]:
    """Every function-doc file of the package (for the manifest reader and its tests)."""
    return sorted((package_root() / "data" / "multi_turn_func_doc").glob("*.json"))


@functools.lru_cache(maxsize=None)
def load_category(category: str) -> tuple[BfclTask, ...]:
    """Every task of `category`, in BFCL's order.  Raises ValueError for an unknown category."""
    if category not in CATEGORIES:
        hint = difflib.get_close_matches(category, CATEGORIES, n=1)
        raise ValueError(
            f"bfcl: 'category' must be one of {', '.join(CATEGORIES)} (got {category!r})"
            + (f"; did you mean {hint[0]!r}?" if hint else "")
        )
    root = package_root() / "data"
    questions = _read_lines(root / f"BFCL_v4_{category}.json")
    answers = {a["id"]: a["ground_truth"] for a in _read_lines(root / "possible_answer" / f"BFCL_v4_{category}.json")}
    out = []
    for q in questions:
        classes = tuple(q["involved_classes"])
        excluded = tuple(q.get("excluded_function", ()))
        docs = tuple(d for c in classes for d in class_docs(c) if d["name"] not in excluded)
        out.append(
            BfclTask(
                id=q["id"],
                category=category,
                turns=tuple("\n".join(m["content"] for m in turn if m.get("role") == "user") for turn in q["question"]),
                initial_config=q["initial_config"],
                involved_classes=classes,
                excluded=excluded,
                ground_truth=tuple(tuple(turn) for turn in answers[q["id"]]),
                docs=docs,
            )
        )
    return tuple(out)


def task_by_id(category: str, task_id: str) -> BfclTask:
    """The task `task_id` of `category`; ValueError naming both when it is not there."""
    tasks = {t.id: t for t in load_category(category)}
    if task_id not in tasks:
        hint = difflib.get_close_matches(task_id, list(tasks), n=1)
        raise ValueError(
            f"bfcl: 'task_ids': unknown task id {task_id!r} in category {category!r} ({len(tasks)} tasks, "
            f"{category}_0 .. {category}_{len(tasks) - 1})" + (f"; did you mean {hint[0]!r}?" if hint else "")
        )
    return tasks[task_id]
