"""rlvp credit inside verl (0.9.1): a reward manager, an advantage estimator, an agent loop.

Installed with the ``verl`` extra, this package is verl's ``verl.plugins`` entry point
``rlvp``: every ``import verl`` -- in the driver and in every Ray worker -- imports it, and
importing it registers (idempotently, `_registry`):

* ``rlvp`` -- reward manager (`reward_manager`): outcome + w * rule credit, one number per
  trajectory (scalar mode; works with verl's stock ``grpo``);
* ``rlvp_token`` -- advantage estimator (`estimator`): group-normalised outcome plus
  per-token credit read from ``token_level_rewards`` (the token channel, `channel`);
* ``rlvp_tool_agent`` -- agent loop (`agent_loop`): verl's tool agent loop, which scores
  the episode it ran and writes its per-token credit for ``rlvp_token``.

Module map: `settings` (rlvp's keys in a verl config, the compiled rule programs),
`channel` (outcome and credit in one tensor), `transcript` (episodes and call spans from
verl's turns or text), `scoring` (rules -> per-call credit, the metric keys),
`estimator`, `reward_manager`, `agent_loop`, `_registry` (the registrations),
`__main__` (``python -m rlvp_dsl.integrations.verl --check``).

verl swallows a plugin's import error at debug level (the first sign is "Unknown
advantage estimator" much later), so a piece that fails to register is logged as a
warning here, kept in `REGISTRATION_ERRORS`, and reported by ``--check``.
"""

from __future__ import annotations

import sys

_NEEDS_VERL = (
    "rlvp_dsl.integrations.verl needs verl: install the project with its verl extra "
    "(bash tests/integrations/verl/setup.sh, or pip install -e '.[verl]' after torch==2.13.0)"
)

try:
    import verl  # noqa: F401  (when verl imports us as its plugin, this is verl itself, mid-import)
except ImportError as exc:  # pragma: no cover - the extra installs verl
    if sys.argv[:1] == ["-m"]:  # `python -m rlvp_dsl.integrations.verl --check`: one line, no traceback
        print(f"rlvp-verl-check: error: {_NEEDS_VERL}", file=sys.stderr)
        raise SystemExit(1) from None
    raise ImportError(_NEEDS_VERL) from exc

from ._registry import PIECES, VERL_VERSION, register_all  # noqa: E402

#: ``{name: error}`` of the pieces that failed to register at import (empty when all did).
REGISTRATION_ERRORS = register_all()

__all__ = ["PIECES", "REGISTRATION_ERRORS", "VERL_VERSION", "register_all"]
