"""What an ``rlvp-score`` process imports, checked by module name (never by time): the command
line alone (``--help``, ``--version``) imports no scoring machinery; a real scoring run of tau2
results imports neither the heavy optional libraries nor the code of the commands and formats it
does not use; Ctrl-C while scoring's libraries load still exits 130 quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules" / "tau2_airline.rlvp"
TAU2 = REPO / "examples" / "episodes" / "airline_tau2_results.json"

#: Never in a plain scoring process: optional extras (HTML report, Ray, the server, plots, the
#: trainer) and what only --version needs (package metadata).
HEAVY = {
    "jinja2",
    "torch",
    "ray",
    "fastapi",
    "uvicorn",
    "matplotlib",
    "numpy",
    "pandas",
    "trainer",
    "importlib.metadata",
}
#: Never in a scoring run of tau2 results: other commands' and other formats' code.
UNUSED = {
    "rlvp_dsl.html",
    "rlvp_dsl.compare",
    "rlvp_dsl.integrations",
    "rlvp_dsl.serve",
    "rlvp_dsl.cli.score_compare",
    "rlvp_dsl.readers.atif",
    "rlvp_dsl.readers.messages",
    "rlvp_dsl.readers.openai_chat",
    "rlvp_dsl.readers.call_markers",
    "rlvp_dsl.readers.swe_agent",
    "rlvp_dsl.readers.tau_bench_v1",
}
#: What scoring needs, imported only once the command line has parsed (lark and the checker only when
#: the checked rule set is not in the cache).
SCORING = {"lark", "rlvp_dsl.pipeline", "rlvp_dsl.compile", "rlvp_dsl.readers.loading", "rlvp_dsl.report"}


def _modules(*argv: str, cache: Path | None = None) -> tuple[set[str], dict[str, object]]:
    """Run rlvp-score's `main` on `argv` in a fresh interpreter (`cache`: its cache folder, else the
    user's); (the modules it imported, and its exit code and output)."""
    code = (
        "import contextlib, io, json, sys\n"
        "from rlvp_dsl.cli.score import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "    try:\n"
        f"        code = main({list(argv)!r})\n"
        "    except SystemExit as exc:\n"
        "        code = exc.code\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'code': code, 'out': out.getvalue()}))\n"
    )
    env = {**os.environ, "RLVP_CACHE_DIR": str(cache)} if cache is not None else None
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return set(result.pop("modules")), result


def _loaded(modules: set[str], names: set[str]) -> set[str]:
    """The `names` imported, a package counting when any module inside it is."""
    return {n for n in names if any(m == n or m.startswith(n + ".") for m in modules)}


def test_importing_the_command_imports_no_scoring_machinery() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import json, sys, rlvp_dsl.cli.score; print(json.dumps(sorted(sys.modules)))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = set(json.loads(done.stdout))
    assert _loaded(modules, HEAVY | UNUSED | SCORING) == set()
    assert "rlvp_dsl.cli.score_args" in modules


def test_help_and_version_import_no_scoring_machinery() -> None:
    modules, result = _modules("--help")
    assert result["code"] == 0 and "usage: rlvp-score" in str(result["out"])
    assert _loaded(modules, HEAVY | UNUSED | SCORING) == set()
    modules, result = _modules("--version")
    assert result["code"] == 0 and str(result["out"]).startswith("rlvp-score ")
    assert "importlib.metadata" in modules  # read when asked, and only then
    assert _loaded(modules, (HEAVY - {"importlib.metadata"}) | UNUSED | SCORING) == set()


def test_a_scoring_run_imports_what_it_uses_only(tmp_path: Path) -> None:
    """A run that checks the rule file (an empty cache folder; a run whose check is cached imports
    no lark: tests/unit/test_check_cache.py)."""
    modules, result = _modules(str(RULES), str(TAU2), cache=tmp_path)
    assert result["code"] == 0 and "credit hash: sha256:" in str(result["out"])
    assert _loaded(modules, SCORING) == SCORING  # it did score: the guard below is not vacuous
    assert _loaded(modules, HEAVY | UNUSED) == set()


def test_the_formats_of_the_command_line_are_the_readers() -> None:
    from rlvp_dsl.cli.score_args import FORMATS
    from rlvp_dsl.readers.loading import FORMATS as READERS

    assert FORMATS == READERS


def test_ctrl_c_while_scoring_libraries_load_exits_130_quietly() -> None:
    """The command line parses before lark loads: Ctrl-C then (a module finder raising
    KeyboardInterrupt at ``import lark``) still ends the installed console script with 130, silently."""
    code = (
        "import sys\n"
        "class _CtrlC:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'lark':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, _CtrlC())\n"
        "sys.argv[0] = 'rlvp-score'\n"
        "from rlvp_dsl.cli import score_command\n"
        "sys.exit(score_command())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(RULES), str(TAU2)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stdout == "" and done.stderr == ""
