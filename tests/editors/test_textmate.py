"""The editor package (editors/vscode) tested in node: `npm ci` into tests/editors when its node_modules
is missing, then ``node --test`` on the grammar/configuration tests (test_textmate.mjs) and the client
tests (test_client.mjs), which must exit 0.

Skips, with the reason, when node or npm is not installed.  The client test that launches
``python -m rlvp_dsl.lsp`` over stdio runs when this Python has pygls (the ``lsp`` extra); otherwise
node reports it skipped.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE_TESTS = ["test_textmate.mjs", "test_client.mjs"]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (the editor grammar tests run in node 20+ with npm)")
    return path


def _npm_ci(npm: str) -> None:
    """Install the pinned vscode-textmate and vscode-oniguruma (package-lock.json) when missing."""
    if (HERE / "node_modules" / "vscode-textmate").is_dir() and (HERE / "node_modules" / "vscode-oniguruma").is_dir():
        return
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--prefix", str(HERE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"`npm ci --prefix tests/editors` failed (exit {done.returncode}):\n{done.stderr[-3000:]}")


def test_editor_package_in_node() -> None:
    node = _tool("node")
    npm = _tool("npm")
    _npm_ci(npm)
    env = dict(os.environ)
    env.pop("RLVP_PYTHON", None)
    if importlib.util.find_spec("pygls") is not None:
        env["RLVP_PYTHON"] = sys.executable
    done = subprocess.run(
        [node, "--test", *(str(HERE / name) for name in NODE_TESTS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-6000:]
    # Every test ran: a renamed or emptied file must not pass on nothing.
    assert "# fail 0" in report
    # 12 tests, and the launch of the real server when this Python can run it.
    passed = int(report.rsplit("# pass ", 1)[1].split()[0])
    assert passed >= (13 if "RLVP_PYTHON" in env else 12), report[-3000:]
