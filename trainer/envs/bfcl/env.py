"""`BfclEnv`: BFCL v4 multi-turn tasks as a conversation environment (trainer/envs/base.py).

One task = one episode: the user turns in order; per user turn the policy calls functions of the
task's backend classes (`step`), executed on fresh instances loaded from the task's
``initial_config`` (`backends.Backends`), until it answers (`end_turn`), which brings the next user
turn.  The outcome is BFCL's own checker verdict on the conversation (`checker.TaskChecker`); the
signal ``turns_matched`` (on every result, declared in the manifest, increasing) counts the leading
user turns that passed BFCL's checks (state equal to the ground truth's, its results returned, a
call made when one was needed), the current turn counted while its calls so far would pass it
(so a call that passes a turn reports the rise): it rises only with the verdict.  Every call's
result also carries two 0/1 flags, declared in the manifest with their meaning (`manifest`):
``off_path`` (kind ``violation``): whether the call left the ground truth's path in its turn
(`checker.TaskChecker.off_path`), and ``turn_passing`` (kind ``done``): whether the current turn
would pass BFCL's checks if the policy answered now (`checker.TaskChecker.passing_now`), so a rule
can pay the answer that closes a passed turn; ``rlvp-compile --auto-from-tags`` derives
``off_path_flagged``, ``answer_when_done`` and ``answer_not_done`` from them
(`rlvp_dsl.manifests.derive`).

Knobs (`BfclConfig`, the ``env_args`` of a training config with ``env = "bfcl"``):

=======================  ===================  ==================================================
knob                     default              meaning
=======================  ===================  ==================================================
category                 multi_turn_base      BFCL category (`tasks.CATEGORIES`)
task_ids                 (all)                the tasks to play (BFCL ids); others are left out
max_gt_calls_per_turn    none                 keep tasks whose every turn's ground truth has at
                                              most this many calls
max_user_turns           none                 keep tasks with at most this many user turns
max_calls_per_turn       8                    the rollout ends a user turn after this many calls
max_turns                40                   calls per episode (all turns together)
tools                    classes              ``classes``: every function of the involved
                                              classes (BFCL's docs); ``path``: only the functions
                                              the task's ground truth uses
max_values               10                   values per parameter (`values`)
max_tool_calls           1000                 calls per function (value-set product)
playable_only            true                 leave out tasks whose ground truth the value sets
                                              cannot write (`expressible`)
returned_values          true                 value sets also hold what the ground truth's calls
                                              return (`values`)
system_prompt            rlvp                 ``rlvp``: the rollout's own system message only;
                                              ``bfcl``: the first user message also carries
                                              BFCL's default system prompt for prompting models
                                              (`bfcl_system_prompt`, the offered functions' docs),
                                              ahead of the user's text as BFCL sends it to a
                                              model without a system role; set the rollout's
                                              ``gen_args = { system_prompt = false }`` with it
draw                     seed                 which subset task a trainer task plays: ``seed``:
                                              ``subset[task.seed % len(subset)]`` (a random draw,
                                              with replacement); ``cycle``: ``subset[k %
                                              len(subset)]`` for the id's trailing number k, so
                                              with ``tasks_per_iteration = len(subset)`` every
                                              iteration plays every task once
=======================  ===================  ==================================================

A `Task`'s id picks the BFCL task when it is one of the subset's ids; any other id (the trainer's
``bfcl-0``, ``bfcl-1``, ...: the group's position in its iteration) plays a subset task by `draw`.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import attrs

from rlvp_dsl.manifests.bfcl_tags import (
    BFCL_DONE_SIGNAL_DESCRIPTION,
    BFCL_SIGNAL,
    BFCL_SIGNAL_DESCRIPTION,
    BFCL_VIOLATION_SIGNAL_DESCRIPTION,
    bfcl_tags,
)
from rlvp_dsl.tools import ToolSpec
from trainer.envs.base import END_TURN, Task, ToolCall, ToolResult, manifest_from_schema
from trainer.envs.bfcl.backends import Backends, coerce
from trainer.envs.bfcl.checker import TaskChecker, ground_truth_calls
from trainer.envs.bfcl.tasks import BfclTask, load_category, package_root, task_by_id
from trainer.envs.bfcl.values import OMIT, param_values, task_candidates, trim, value_text

TOOL_SETS = ("classes", "path")
SYSTEM_PROMPTS = ("rlvp", "bfcl")
DRAWS = ("seed", "cycle")

#: The per-call signal: 1.0 when the call left the ground truth's path in its turn
#: (`checker.TaskChecker.off_path`), else 0.0.  Declared in the manifest as kind ``violation``
#: (`rlvp_dsl.manifests.bfcl_tags.BFCL_VIOLATION_SIGNAL`, the same name).
OFF_PATH = "off_path"
#: The per-call signal: 1.0 when the turn would pass if the policy answered after this call
#: (`checker.TaskChecker.passing_now`), else 0.0.  Declared in the manifest as kind ``done``
#: (`rlvp_dsl.manifests.bfcl_tags.BFCL_DONE_SIGNAL`, the same name).
TURN_PASSING = "turn_passing"


def _optional_positive(name: str):
    def check(_instance, _attribute, value):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"bfcl: '{name}' must be a positive integer or absent (got {value!r})")

    return check


def _task_ids(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"bfcl: 'task_ids' must be a list of BFCL task ids (got {value!r})")
    if not value:
        raise ValueError("bfcl: 'task_ids' must name at least one task (leave it out for every task of the category)")
    return tuple(value)


@attrs.frozen
class BfclConfig:
    """The knobs of `BfclEnv` (the table in the module docstring).  Raises ValueError naming the
    knob for a bad value, an unknown category or task id, or an empty subset."""

    category: str = "multi_turn_base"
    task_ids: tuple[str, ...] | None = attrs.field(default=None, converter=_task_ids)
    max_gt_calls_per_turn: int | None = attrs.field(default=None, validator=_optional_positive("max_gt_calls_per_turn"))
    max_user_turns: int | None = attrs.field(default=None, validator=_optional_positive("max_user_turns"))
    max_calls_per_turn: int = attrs.field(default=8, validator=_optional_positive("max_calls_per_turn"))
    max_turns: int = attrs.field(default=40, validator=_optional_positive("max_turns"))
    tools: str = "classes"
    max_values: int = attrs.field(default=10, validator=_optional_positive("max_values"))
    max_tool_calls: int = attrs.field(default=1000, validator=_optional_positive("max_tool_calls"))
    playable_only: bool = True
    returned_values: bool = True
    system_prompt: str = "rlvp"
    draw: str = "seed"

    def __attrs_post_init__(self) -> None:
        if self.draw not in DRAWS:
            raise ValueError(f"bfcl: 'draw' must be one of {', '.join(DRAWS)} (got {self.draw!r})")
        if self.tools not in TOOL_SETS:
            raise ValueError(f"bfcl: 'tools' must be one of {', '.join(TOOL_SETS)} (got {self.tools!r})")
        if self.system_prompt not in SYSTEM_PROMPTS:
            raise ValueError(
                f"bfcl: 'system_prompt' must be one of {', '.join(SYSTEM_PROMPTS)} (got {self.system_prompt!r})"
            )
        for name in ("playable_only", "returned_values"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"bfcl: {name!r} must be true or false (got {getattr(self, name)!r})")


def _trailing_number(task_id: str) -> int:
    """The number a trainer task id ends with (``bfcl-3`` -> 3); ValueError naming the id if none."""
    digits = len(task_id) - len(task_id.rstrip("0123456789"))
    if not digits:
        raise ValueError(f"bfcl: draw = 'cycle' needs task ids that end in a number (got {task_id!r})")
    return int(task_id[-digits:])


def task_schema(task: BfclTask, cfg: BfclConfig) -> list[ToolSpec]:
    """The functions offered in `task` (docs order), each with its tags, target and value sets."""
    outputs: list[str] = []
    if cfg.returned_values:
        backends = Backends(task)
        outputs = [
            backends.execute(n, a, check=False).text for turn in ground_truth_calls(task, backends) for n, a in turn
        ]
    pools = task_candidates(task.turns, {c: task.initial_config.get(c, {}) for c in task.involved_classes}, outputs)
    used = {text.partition("(")[0].strip() for turn in task.ground_truth for text in turn}
    specs = []
    for doc in task.docs:
        if cfg.tools == "path" and doc["name"] not in used:
            continue
        params = doc["parameters"].get("properties", {})
        required = set(doc["parameters"].get("required", ()))
        sets = {p: param_values(p, prop, p in required, pools, cfg.max_values) for p, prop in params.items()}
        sets = trim(sets, cfg.max_tool_calls)
        tags, target = bfcl_tags(doc["name"])
        specs.append(
            ToolSpec(
                doc["name"],
                tags=tags,
                target=target if target in params else None,
                params=tuple(params),
                values=sets,
                description=doc.get("description", ""),
            )
        )
    return specs


def bfcl_system_prompt(task: BfclTask, schema: Sequence[ToolSpec]) -> str:
    """BFCL's default system prompt for prompting (non function-calling) models, built by the
    installed ``bfcl_eval`` from the docs of the functions `schema` offers (docs order; with
    ``tools = "classes"`` every doc BFCL gives the task).

    The steps of BFCL's inference for a prompting model: the docs get BFCL's language hint
    (``bfcl_eval.utils.add_language_specific_hint_to_function_doc``), the prompt format is the
    task id's (``extract_prompt_format_from_id``: BFCL's default format), and the text is composed
    from ``bfcl_eval.constants.default_prompts`` exactly as ``formulate_system_prompt``
    (``bfcl_eval.model_handler.utils``, which itself cannot be imported without ``tree_sitter``)
    composes it.  Raises ValueError for a prompt format whose function docs are not JSON (only
    format-sensitivity ids name one; no multi-turn task does)."""
    import copy
    import json

    from bfcl_eval.constants import default_prompts as bfcl
    from bfcl_eval.utils import add_language_specific_hint_to_function_doc, extract_prompt_format_from_id

    offered = {spec.name for spec in schema}
    docs = copy.deepcopy([doc for doc in task.docs if doc["name"] in offered])
    (entry,) = add_language_specific_hint_to_function_doc([{"id": task.id, "function": docs}])
    fmt = dict(part.partition("=")[::2] for part in extract_prompt_format_from_id(task.id).split("&"))
    if fmt.get("func_doc_fmt") != "json":
        raise ValueError(f"bfcl: prompt format {fmt} of {task.id!r}: only JSON function docs are supported")
    style = bfcl.PROMPT_STYLE_TEMPLATES[fmt["style"]]
    call_format = style["tool_call_with_tag" if fmt["tool_call_tag"] == "True" else "tool_call_no_tag"].format(
        output_format=bfcl.OUTPUT_FORMAT_MAPPING[fmt["ret_fmt"]], param_types=bfcl.PARAM_TYPE_MAPPING[fmt["ret_fmt"]]
    )
    return bfcl.PROMPT_TEMPLATE_MAPPING[fmt["prompt_fmt"]].format(
        persona=style["persona"],
        task=style["task"],
        tool_call_format=call_format,
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(
            format=fmt["func_doc_fmt"], functions=json.dumps(entry["function"], indent=4)
        ),
    )


def expressible(task: BfclTask, schema: Sequence[ToolSpec], backends: Backends) -> str | None:
    """Why the ground truth of `task` cannot be written with `schema`'s value sets (None: it can).

    Every ground-truth call's function must be offered and each of its arguments be a value of the
    set (compared after `coerce` by the doc type), an omitted argument needing `OMIT`; the call must
    also pass the environment's doc checks (a ground truth that breaks the doc's types cannot be
    played through the environment)."""
    specs = {s.name: s for s in schema}
    for turn in ground_truth_calls(task, backends):
        for name, args in turn:
            spec = specs.get(name)
            if spec is None:
                return f"{name}: not offered"
            types = backends.types(name)
            if backends.problem(name, args) is not None:
                return f"{name}: the ground truth breaks the doc ({backends.problem(name, args)})"
            for param in spec.params or ():
                values = spec.values_for(param)
                if param not in args:
                    if OMIT not in values:
                        return f"{name}.{param}: omitted, and required"
                    continue
                kind = types.get(param, "")
                if not any(v != OMIT and coerce(v, kind) == args[param] for v in values):
                    return f"{name}.{param}: {args[param]!r} is not among {len(values)} values"
    return None


@functools.lru_cache(maxsize=16)
def subset(cfg: BfclConfig) -> tuple[tuple[BfclTask, ...], dict[str, str]]:
    """The tasks `cfg` plays, and for each task left out, why."""
    if cfg.task_ids is not None:
        chosen = [task_by_id(cfg.category, t) for t in cfg.task_ids]
    else:
        chosen = list(load_category(cfg.category))
    kept, dropped = [], {}
    for task in chosen:
        if cfg.max_user_turns is not None and len(task.turns) > cfg.max_user_turns:
            dropped[task.id] = f"{len(task.turns)} user turns > max_user_turns"
            continue
        most = max((len(t) for t in task.ground_truth), default=0)
        if cfg.max_gt_calls_per_turn is not None and most > cfg.max_gt_calls_per_turn:
            dropped[task.id] = f"{most} ground-truth calls in a turn > max_gt_calls_per_turn"
            continue
        if cfg.playable_only and cfg.task_ids is None:
            why = expressible(task, task_schema(task, cfg), Backends(task))
            if why is not None:
                dropped[task.id] = why
                continue
        kept.append(task)
    if not kept:
        raise ValueError(
            f"bfcl: no task of {cfg.category!r} is left with these knobs ({len(dropped)} left out, e.g. "
            f"{next(iter(dropped.items()), ('', ''))[0]}: {next(iter(dropped.values()), '')})"
        )
    return tuple(kept), dropped


@functools.lru_cache(maxsize=16)
def _all_tools(cfg: BfclConfig) -> tuple[ToolSpec, ...]:
    tools: dict[str, ToolSpec] = {}
    for task in subset(cfg)[0]:
        for spec in task_schema(task, cfg):
            tools.setdefault(spec.name, spec)
    return tuple(tools.values())


@functools.lru_cache(maxsize=16)
def _vocabulary(cfg: BfclConfig) -> frozenset[str]:
    words: set[str] = set()
    for task in subset(cfg)[0]:
        texts = list(task.turns)
        if cfg.system_prompt == "bfcl":
            texts.append(bfcl_system_prompt(task, task_schema(task, cfg)))
        for spec in task_schema(task, cfg):
            texts += [spec.name, *(spec.params or ())]
            texts += [str(v) for p in spec.params or () for v in spec.values_for(p)]
        backends = Backends(task)
        for turn in ground_truth_calls(task, backends):
            texts += [backends.execute(name, args, check=False).text for name, args in turn]
        for text in texts:
            words.update(text.split())
    return frozenset(words | {END_TURN, OMIT, "Error", "during", "execution:"})


class BfclEnv:
    """A BFCL multi-turn conversation environment (`ToolEnv` + the conversation protocol)."""

    name = "bfcl"

    def __init__(self, config: BfclConfig | None = None, **knobs: Any) -> None:
        package_root()  # BfclNotInstalled (exit 2 in rlvp-train) before anything else
        self.config = config if config is not None else BfclConfig(**knobs)
        self.max_turns = self.config.max_turns
        self.max_calls_per_turn = self.config.max_calls_per_turn
        self.tasks, self.left_out = subset(self.config)
        self.task: BfclTask | None = None
        self._schema: list[ToolSpec] = []
        self._backends: Backends | None = None
        self._checker: TaskChecker | None = None
        self._turn = 0
        self._results: list[str] = []
        self._over = False

    # --- the task set -----------------------------------------------------
    def pick(self, task: Task) -> BfclTask:
        """The BFCL task a `Task` plays (its id when it is one of the subset's, else by seed)."""
        for t in self.tasks:
            if t.id == task.task_id:
                return t
        if task.task_id.startswith("multi_turn_"):
            raise ValueError(
                f"bfcl: task {task.task_id!r} is not in this environment's subset of {self.config.category!r}"
            )
        if self.config.draw == "cycle":
            return self.tasks[_trailing_number(task.task_id) % len(self.tasks)]
        return self.tasks[task.seed % len(self.tasks)]

    # --- the protocol -----------------------------------------------------
    def reset(self, task: Task) -> str:
        """Start the conversation of `task`; returns the first user message (with
        ``system_prompt = "bfcl"``: BFCL's system prompt, a blank line, the user's text)."""
        self.task = self.pick(task)
        self._schema = task_schema(self.task, self.config)
        self._backends = Backends(self.task)
        self._checker = TaskChecker(self.task)
        self._turn = 0
        self._results = []
        self._over = False
        if self.config.system_prompt == "bfcl":
            # BFCL's convert_system_prompt_into_user_prompt + combine_consecutive_user_prompts
            return self.system_prompt() + "\n\n" + self.task.turns[0]
        return self.task.turns[0]

    def system_prompt(self) -> str:
        """BFCL's system prompt for the current task (`bfcl_system_prompt`; valid after `reset`),
        whatever the ``system_prompt`` knob says."""
        assert self.task is not None, "reset() first"
        return bfcl_system_prompt(self.task, self._schema)

    def schema(self) -> Sequence[ToolSpec]:
        """The functions of the current task with their value sets (valid after `reset`)."""
        return list(self._schema)

    def manifest(self) -> dict[str, Any]:
        """The `rlvp-tools/1` manifest of every function any task of the subset offers (names, tags,
        targets, parameters: the same in every task), with the progress signal ``turns_matched``
        (increasing) and the per-call flags ``off_path`` (kind ``violation``) and ``turn_passing``
        (kind ``done``), each with its description (`rlvp_dsl.manifests.bfcl_tags`)."""
        schema = _all_tools(self.config)
        return manifest_from_schema(
            schema,
            signals=[
                {"name": BFCL_SIGNAL, "direction": "increasing", "description": BFCL_SIGNAL_DESCRIPTION},
                {"name": OFF_PATH, "kind": "violation", "description": BFCL_VIOLATION_SIGNAL_DESCRIPTION},
                {"name": TURN_PASSING, "kind": "done", "description": BFCL_DONE_SIGNAL_DESCRIPTION},
            ],
        )

    def vocabulary(self) -> set[str]:
        """Every word of the subset's user turns, value sets, function and parameter names, and of
        the ground truth's results (other tool output words are the tokenizer's unknown word)."""
        return set(_vocabulary(self.config))

    def signals(self) -> Mapping[str, float]:
        """``turns_matched``: the leading user turns passed, plus 1 while the current turn's calls so
        far would pass it if the policy answered now (`TaskChecker.passing_now`)."""
        if self._checker is None or self._backends is None:
            return {BFCL_SIGNAL: 0.0}
        now = not self._over and self._checker.passing_now(self._backends, self._results)
        return {BFCL_SIGNAL: float(self._checker.turns_matched + now)}

    def initial_signals(self) -> dict[str, float]:
        return dict(self.signals())

    def step(self, call: ToolCall) -> ToolResult:
        """Execute one call in the current user turn.  RuntimeError before `reset` or after the end."""
        if self._backends is None or self._over:
            raise RuntimeError(
                "bfcl: step() called "
                + ("before reset()" if self._backends is None else "after the conversation ended")
            )
        arguments = {k: v for k, v in call.arguments.items() if v != OMIT}
        result = self._backends.execute(call.tool, arguments)
        self._results.append(result.text)
        off = self._checker is not None and self._checker.off_path(self._backends, result.text)
        signals = dict(self.signals())
        passing = self._checker is not None and signals[BFCL_SIGNAL] > self._checker.turns_matched
        signals.update({OFF_PATH: float(off), TURN_PASSING: float(passing)})
        return ToolResult(ok=result.ok, text=result.text, done=False, signals=signals)

    def end_turn(self, answer: str = "") -> str | None:
        """The policy answered the current user turn; returns the next user message, or None at the end."""
        if self._backends is None or self._checker is None or self.task is None or self._over:
            raise RuntimeError(
                "bfcl: end_turn() called "
                + ("before reset()" if self._backends is None else "after the conversation ended")
            )
        self._checker.end_turn(self._backends, self._results)
        self._results = []
        self._turn += 1
        if self._turn >= len(self.task.turns):
            self._over = True
            return None
        return self.task.turns[self._turn]

    def outcome(self) -> float:
        """1.0 when BFCL's checker passes the conversation (every turn played), else 0.0."""
        return 1.0 if self._checker is not None and self._checker.verdict()["valid"] else 0.0

    def verdict(self) -> dict[str, Any]:
        """BFCL's checker result (``valid``, and ``error_type`` / ``error_message`` on failure)."""
        return self._checker.verdict() if self._checker else {"valid": False, "error_type": "not started"}

    def ground_truth(self) -> list[list[ToolCall]]:
        """The current task's ground truth per user turn as calls with value texts (tests, demonstrations)."""
        assert self.task is not None and self._backends is not None, "reset() first"
        return [
            [ToolCall(name, {k: value_text(v) for k, v in args.items()}) for name, args in turn]
            for turn in ground_truth_calls(self.task, self._backends)
        ]
