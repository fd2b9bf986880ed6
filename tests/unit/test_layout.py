"""The package layout: the layers of docs/pipeline.md "Layers", checked on the import graph of rlvp_dsl/,
trainer/, benchmarks/ and examples/ (lazy imports included: imports inside functions, PEP 562 tables,
``importlib.import_module`` of a literal name, ``module:attribute`` references); the graph has no
cycles, and the language core never imports torch.

Layers, lowest first; a module may import only its own layer or lower ones::

    0 language core   <- 1 credit maths <- 2 trainer core <- 3 integrations <- 4 experiments and front doors
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGES = ("rlvp_dsl", "trainer")
#: Script folders: every ``*.py`` in them is a module ``<folder>.<name>`` of the top layer.
SCRIPT_FOLDERS = ("benchmarks", "examples")

LAYER_NAMES = ("language core", "credit maths", "trainer core", "integrations", "experiments and front doors")

#: Layer 4 inside trainer/: the experiments and the command-line front doors.
TRAINER_FRONT_DOORS = (
    "trainer.experiments",
    "trainer.cli",
)

#: Imports allowed against the layers, one by one: ``(importer, imported): reason``.
ALLOWED_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("rlvp_dsl.cli.score", "rlvp_dsl.integrations.ray"): (
        "rlvp-score --ray hands the run to Ray Data scoring (the issue names the module "
        "rlvp_dsl.integrations.ray); imported only with --ray, and it imports no torch"
    ),
}

#: Top-level names that rlvp_dsl/ and trainer/ never import (tests and benchmarks sit above everything).
NEVER_IMPORTED = ("benchmarks", "examples", "tests", "conftest")


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def layer_of(module: str) -> int:
    """The layer of a module of the graph (see the module docstring)."""
    if _within(module, "rlvp_dsl.advantages"):
        return 1
    if _within(module, "rlvp_dsl.integrations"):
        return 3
    if _within(module, "rlvp_dsl"):
        return 0
    if any(_within(module, p) for p in TRAINER_FRONT_DOORS):
        return 4
    if _within(module, "trainer"):
        return 2
    if any(_within(module, f) for f in SCRIPT_FOLDERS):
        return 4
    raise ValueError(f"module {module!r} belongs to no layer")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    for folder in SCRIPT_FOLDERS:
        for path in (REPO / folder).glob("*.py"):
            found[f"{folder}.{path.stem}"] = path
    return found


def _resolve(name: str, package: list[str]) -> str:
    """A module name, relative (leading dots) to `package` or absolute."""
    level = len(name) - len(name.lstrip("."))
    if not level:
        return name
    base = ".".join(package[: len(package) - level + 1])
    return ".".join(p for p in (base, name[level:]) if p)


def _named_imports(tree: ast.AST, package: list[str]) -> set[str]:
    """Modules imported by name: ``importlib.import_module("literal"[, __name__])``, the values of a
    PEP 562 ``_LAZY`` table, and ``"module:attribute"`` references."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.add(_resolve(node.args[0].value, package))
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_LAZY" for t in node.targets):
            if isinstance(node.value, ast.Dict):
                out.update(
                    _resolve(v.value, package)
                    for v in node.value.values
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)
                )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", node.value):
                out.add(node.value.split(":")[0])
    return out


def _raw_imports(tree: ast.AST) -> set[str]:
    """Every absolute module name an import statement names."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _resolve("." * node.level + (node.module or ""), package)
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in modules else target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    out |= _named_imports(tree, package)
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def upward_imports(graph: dict[str, set[str]], allowed: dict[tuple[str, str], str] = ALLOWED_EXCEPTIONS) -> list[str]:
    """One sentence per import from a lower layer into a higher one that `allowed` does not name."""
    found = []
    for importer in sorted(graph):
        for imported in sorted(graph[importer]):
            low, high = layer_of(importer), layer_of(imported)
            if high > low and (importer, imported) not in allowed:
                found.append(
                    f"{importer} ({LAYER_NAMES[low]}, layer {low}) imports {imported} "
                    f"({LAYER_NAMES[high]}, layer {high})"
                )
    return found


def _package_graph(graph: dict[str, set[str]]) -> dict[int, set[int]]:
    """The layers each layer imports (itself excluded)."""
    layers: dict[int, set[int]] = {k: set() for k in range(len(LAYER_NAMES))}
    for importer, imported in graph.items():
        layers[layer_of(importer)].update(layer_of(m) for m in imported)
    return {k: v - {k} for k, v in layers.items()}


def test_the_import_graph_has_no_cycles():
    """No module reaches itself through imports, module-level or lazy."""
    assert _cycle(_graph()) is None


def test_the_cycle_check_finds_a_cycle():
    """The check itself fails on a graph with a cycle."""
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_every_module_imports_only_its_own_layer_or_lower_ones():
    """No import, module-level or lazy, runs up the layers (save the named exceptions)."""
    assert upward_imports(_graph()) == []


def test_each_layer_imports_only_lower_layers():
    """At package level: the layers import downwards only (the arrows of docs/pipeline.md)."""
    graph = _graph()
    allowed = {(layer_of(a), layer_of(b)) for a, b in ALLOWED_EXCEPTIONS}
    for layer, imported in _package_graph(graph).items():
        assert all(other < layer or (layer, other) in allowed for other in imported), (layer, imported)


def test_the_layer_check_names_an_upward_import():
    """A constructed upward import (trainer core -> integrations) fails the check, naming the edge."""
    graph = {
        "trainer.loop": {"rlvp_dsl.integrations.trl", "rlvp_dsl.advantages", "rlvp_dsl.attach"},
        "rlvp_dsl.integrations.trl": {"rlvp_dsl.advantages"},
        "rlvp_dsl.advantages": {"rlvp_dsl.attach"},
        "rlvp_dsl.attach": set(),
    }
    assert upward_imports(graph) == [
        "trainer.loop (trainer core, layer 2) imports rlvp_dsl.integrations.trl (integrations, layer 3)"
    ]
    assert upward_imports(graph, {("trainer.loop", "rlvp_dsl.integrations.trl"): "a reason"}) == []
    assert upward_imports({"rlvp_dsl.attach": {"rlvp_dsl.advantages"}, "rlvp_dsl.advantages": set()}) == [
        "rlvp_dsl.attach (language core, layer 0) imports rlvp_dsl.advantages (credit maths, layer 1)"
    ]


def test_every_module_has_a_layer():
    """Each module of the graph falls in one layer (a new folder must be placed in docs/pipeline.md)."""
    for name in _graph():
        assert 0 <= layer_of(name) < len(LAYER_NAMES)


def test_the_exceptions_are_real_upward_imports():
    """Each named exception is an import that exists and runs upward (no stale entries)."""
    graph = _graph()
    for importer, imported in ALLOWED_EXCEPTIONS:
        assert imported in graph.get(importer, set()), (importer, imported)
        assert layer_of(imported) > layer_of(importer), (importer, imported)


def test_the_libraries_never_import_tests_or_benchmarks():
    """Nothing in rlvp_dsl/ or trainer/ imports the tests, the benchmarks or the examples."""
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            names = _raw_imports(ast.parse(path.read_text(encoding="utf-8")))
            assert not any(n.split(".")[0] in NEVER_IMPORTED for n in names), path


def test_the_core_language_never_imports_torch():
    """No module of the language core (rlvp_dsl but its credit maths and integrations) imports torch or trainer."""
    for path in (REPO / "rlvp_dsl").rglob("*.py"):
        parts = path.relative_to(REPO).parts
        if parts[1] in ("advantages", "integrations"):
            continue
        names = _raw_imports(ast.parse(path.read_text(encoding="utf-8")))
        assert not any(n.split(".")[0] in ("torch", "trainer") for n in names), path


def test_the_credit_maths_never_import_a_trainer():
    """rlvp_dsl.advantages imports torch and the language core, never trainer/ or an integration."""
    for path in (REPO / "rlvp_dsl" / "advantages").rglob("*.py"):
        names = _raw_imports(ast.parse(path.read_text(encoding="utf-8")))
        assert not any(n.split(".")[0] in ("trainer", "trl", "verl") for n in names), path
