"""The verl.plugins entry point: installed, loaded by `import verl`, idempotent; and
`python -m rlvp_dsl.integrations.verl --check` (exit 0, or 1 naming what failed)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytest.importorskip("verl")

import rlvp_dsl.integrations.verl as plugin  # noqa: E402
from rlvp_dsl.integrations.verl._registry import PIECES, expected, held, register_all  # noqa: E402

MODULE = "rlvp_dsl.integrations.verl"


def _check(env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", MODULE, "--check"], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_entry_point_is_installed_and_registers_every_piece():
    """verl.plugins has 'rlvp' -> the package; loading it leaves rlvp's object under each name."""
    (ep,) = [ep for ep in entry_points(group="verl.plugins") if ep.name == "rlvp"]
    assert ep.value == MODULE and ep.load() is plugin
    assert plugin.REGISTRATION_ERRORS == {}
    assert {p.name: held(p) for p in PIECES} == {p.name: expected(p) for p in PIECES}


def test_importing_twice_does_not_raise():
    """Re-executing the package (and a piece's module) registers nothing twice and raises nothing,
    where verl's own register_adv_est would raise for the second object."""
    importlib.reload(plugin)
    assert plugin.REGISTRATION_ERRORS == {} and register_all() == {}
    from rlvp_dsl.integrations.verl import estimator

    importlib.reload(estimator)  # a new function object under the same name
    assert register_all() == {}
    from verl.trainer.ppo.core_algos import register_adv_est

    with pytest.raises(ValueError, match="has already been registered"):
        register_adv_est("rlvp_token")(estimator.rlvp_token_advantage)


def test_check_exits_0_and_names_what_it_registered():
    """--check (whose worker view is a fresh `import verl`, as in every Ray worker) prints the verl
    version, each piece's name and registry, and exits 0."""
    out = _check()
    assert out.returncode == 0, out.stderr + out.stdout
    assert "rlvp verl plugin: ok (verl 0.9.1" in out.stdout
    for piece in PIECES:
        assert piece.name in out.stdout and piece.registry in out.stdout


def test_check_exits_1_when_verl_would_not_load_the_plugin():
    """With plugins turned off, --check fails and names the entry point."""
    out = _check({"VERL_USE_EXTERNAL_PLUGINS": "none"})
    assert out.returncode == 1
    assert "error: entry point: VERL_USE_EXTERNAL_PLUGINS='none'" in out.stderr
    assert "error: worker view: `import verl` did not load" in out.stderr
