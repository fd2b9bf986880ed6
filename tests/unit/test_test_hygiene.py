"""Issue 9, section 5: a broken project module fails the suite; it never turns tests into skips.

The project's own packages are imported plainly everywhere under tests/: no
``pytest.importorskip`` on them, and no ``try: import ... except ImportError: skip``.
Third-party optional packages (verl, ray, trl, ...) may still be skipped.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OWN = {p.name for p in REPO.iterdir() if (p / "__init__.py").is_file()} | {"rlvp_dsl", "trainer", "tests"}
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _root(name: str) -> str:
    return name.split(".", 1)[0]


def _called(node: ast.AST) -> str | None:
    """The name a call calls (``pytest.skip`` -> ``skip``), None for anything else."""
    func = node.func if isinstance(node, ast.Call) else None
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _is_skip(node: ast.AST) -> bool:
    return _called(node) in ("skip", "importorskip", "skipif", "xfail")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(getattr(t, "id", getattr(t, "attr", None)) in IMPORT_ERRORS for t in types)


def offences(source: str, path: str = "<test>") -> list[str]:
    """Where `source` would skip instead of fail when a project module cannot be imported."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if _called(node) == "importorskip":
            arg = node.args[0] if node.args else None
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                found.append((node.lineno, "importorskip of a computed name (cannot tell whose)"))
            elif _root(arg.value) in OWN:
                found.append((node.lineno, f"importorskip({arg.value!r}) on the project's own module"))
        if isinstance(node, ast.Try):
            own = [
                a.name
                for n in node.body
                for a in getattr(n, "names", [])
                if isinstance(n, ast.Import) and _root(a.name) in OWN
            ]
            own += [
                n.module
                for n in node.body
                if isinstance(n, ast.ImportFrom) and n.module and n.level == 0 and _root(n.module) in OWN
            ]
            skips = any(
                _catches_import_error(h) and any(_is_skip(x) for b in h.body for x in ast.walk(b))
                for h in node.handlers
            )
            if own and skips:
                found.append((node.lineno, f"import of {own} skips on ImportError"))
    return [f"{path}:{line}: {what}" for line, what in sorted(found)]


def test_no_test_skips_on_the_projects_own_modules():
    """No file under tests/ skips when rlvp_dsl, trainer or another package of the repository fails to import."""
    found = [
        o
        for f in sorted((REPO / "tests").rglob("*.py"))
        for o in offences(f.read_text(encoding="utf-8"), str(f.relative_to(REPO)))
    ]
    assert found == []


def test_the_check_catches_each_form():
    """The scan itself flags importorskip on own modules, computed names and try/except-skip, not third parties."""
    bad = (
        'import pytest\nm = pytest.importorskip("trainer.loss")\nn = pytest.importorskip(NAME)\n'
        'try:\n    from rlvp_dsl.attach import score_calls\nexcept ImportError:\n    pytest.skip("no")\n'
    )
    assert [o.split(": ", 1)[1].split(" ", 1)[0] for o in offences(bad)] == [
        "importorskip('trainer.loss')",
        "importorskip",
        "import",
    ]
    assert (
        offences(
            'import pytest\npytest.importorskip("verl")\ntry:\n    import ray\nexcept ImportError:\n'
            '    pytest.skip("no ray")\n'
        )
        == []
    )
