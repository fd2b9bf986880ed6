"""Fresh BFCL backend instances for one task, and parsed calls executed on them as method calls.

`Backends(task)` imports each involved class from ``bfcl_eval.eval_checker.multi_turn_eval.
func_source_code`` (modules that import only the standard library and mpmath), creates a fresh
instance and loads the task's scenario into it (``_load_scenario(deepcopy(initial_config[class]),
long_context=...)``; MathAPI is stateless and loads nothing), as BFCL's own executor does.

`Backends.execute(name, arguments)` calls the public method ``name`` with keyword arguments.  No
text is ever evaluated: the arguments are values (parsed with `calls.parse_call`, or value texts
converted by the doc's parameter types in `coerce`).  What comes back (`Execution`):

* the result text exactly as BFCL's executor writes it (``multi_turn_utils.execute_multi_turn_func_call``:
  a string as is, a dict as ``json.dumps`` (``str`` when that fails), anything else ``str``; an
  exception ``"Error during execution: <message>"``), which is what BFCL's response check compares;
* ``ok``: False when the backend signalled an error (a dict with an ``"error"`` key, or a list
  holding one) or raised;
* a bad call is an error result, never a crash and never executed: an unknown function, an unknown
  or missing required parameter, a number past `COST_LIMITS`, a value of the wrong type for the doc (``integer``: int; ``float``:
  int or float; ``boolean``: bool; ``string``: str; ``array``: list; ``dict``: dict).
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
from typing import Any, Mapping

import attrs

from trainer.envs.bfcl.tasks import BfclTask, package_root

_TYPES: dict[str, tuple[str, Any]] = {
    "string": ("a string", lambda v: isinstance(v, str)),
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "boolean": ("true or false", lambda v: isinstance(v, bool)),
    "array": ("a list", lambda v: isinstance(v, list)),
    "dict": ("a dict", lambda v: isinstance(v, dict)),
}


#: Arguments whose size sets a backend's running time (MathAPI's digits of precision, a power's
#: exponent): a larger value is refused rather than computed (``power(67410, 67410)`` has 326,000
#: digits).  The largest in the ground truth of every category is far below these.
COST_LIMITS = {"precision": 100, "decimal_places": 100, "exponent": 1000}


@attrs.frozen
class Execution:
    """One executed call: ``ok`` (False: the backend signalled an error, or the call was refused)
    and ``text`` (the result as BFCL's executor renders it)."""

    ok: bool
    text: str


def render_result(value: Any) -> str:
    """A method's return value as BFCL's executor writes it (see the module docstring)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def _is_error(value: Any) -> bool:
    if isinstance(value, dict):
        return "error" in value
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "error" in value[0]
    return False


def coerce(value: Any, kind: str) -> Any:
    """A value text the decoder emitted -> the doc type's value (non-strings pass unchanged).

    ``integer`` / ``float`` parse the number, ``boolean`` takes True/False (any case), ``array`` /
    ``dict`` read a Python literal (`ast.literal_eval`, never eval); a text that does not convert is
    returned unchanged (the type check then refuses the call)."""
    if not isinstance(value, str) or kind == "string":
        return value
    text = value.strip()
    try:
        if kind == "integer":
            return int(text)
        if kind == "float":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        if kind in ("array", "dict"):
            parsed = ast.literal_eval(text)
            return list(parsed) if kind == "array" and isinstance(parsed, tuple) else parsed
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    return value


class Backends:
    """The backend instances of one task, loaded from its ``initial_config``."""

    def __init__(self, task: BfclTask) -> None:
        package_root()  # BfclNotInstalled before any import
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

        self.task = task
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        for class_name in task.involved_classes:
            instance = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(
                    copy.deepcopy(task.initial_config.get(class_name, {})), long_context=task.long_context
                )
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method
        self.docs = {d["name"]: d for d in task.docs}

    def problem(self, name: str, arguments: Mapping[str, Any]) -> str | None:
        """Why the call cannot be made (unknown function, parameter, missing or mistyped value), or None."""
        doc = self.docs.get(name)
        if doc is None or name not in self.methods:
            return f"unknown function {name!r}"
        props = doc["parameters"].get("properties", {})
        for key, value in arguments.items():
            if key not in props:
                return f"{name}: unknown parameter {key!r} (parameters: {', '.join(props) or 'none'})"
            want, fits = _TYPES.get(props[key].get("type", ""), ("", lambda v: True))
            if not fits(value):
                return f"{name}: parameter {key!r} must be {want} (got {value!r})"
        missing = [p for p in doc["parameters"].get("required", ()) if p not in arguments]
        if missing:
            return f"{name}: missing required parameter {missing[0]!r}"
        for key, limit in COST_LIMITS.items():
            value = arguments.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > limit:
                return f"{name}: parameter {key!r} must be at most {limit} in this environment (got {value!r})"
        return None

    def types(self, name: str) -> dict[str, str]:
        """Parameter name -> doc type of function `name` (empty when unknown)."""
        doc = self.docs.get(name)
        return {k: v.get("type", "") for k, v in (doc or {}).get("parameters", {}).get("properties", {}).items()}

    def execute(self, name: str, arguments: Mapping[str, Any], check: bool = True) -> Execution:
        """Call method `name` with `arguments` (values, converted by `coerce` when texts).

        ``check=False`` (the ground truth's calls) skips the doc checks of `problem` but for the
        function's existence: the checker runs the ground truth as BFCL does."""
        types = self.types(name)
        args = {k: coerce(v, types.get(k, "")) for k, v in arguments.items()}
        why = self.problem(name, args) if check else (None if name in self.methods else f"unknown function {name!r}")
        if why is not None:
            return Execution(False, f"Error during execution: {why}")
        try:
            value = self.methods[name](**args)
            text = render_result(value)
        except Exception as exc:  # a backend bug on odd input is the call's error, as in BFCL's executor
            return Execution(False, f"Error during execution: {exc}")
        return Execution(not _is_error(value), text)
