"""BFCL v4 multi-turn as an environment (`BfclEnv`); needs ``bfcl-eval`` installed ``--no-deps``.

Modules: `tasks` (the package's data), `calls` (call strings parsed without eval), `backends`
(fresh backend instances, parsed calls as method calls), `checker` (BFCL's verdict), `values`
(per-task value sets), `env` (the environment and its knobs).
"""

from trainer.envs.bfcl.env import END_TURN, BfclConfig, BfclEnv
from trainer.envs.bfcl.tasks import CATEGORIES, INSTALL, BfclNotInstalled, available

__all__ = ["CATEGORIES", "END_TURN", "INSTALL", "BfclConfig", "BfclEnv", "BfclNotInstalled", "available"]
