"""``python -m rlvp_dsl.serve serve RULES...``: the ``rlvp`` command (`rlvp_dsl.serve.cli`)."""

from rlvp_dsl.serve.cli import run

run()
