"""``rlvp serve --workers N``: uvicorn's worker supervisor, with a reload that checks the rules first.

uvicorn's supervisor (`uvicorn.supervisors.Multiprocess`, pinned by the ``serve`` extra) starts the
workers, restarts one that dies, and on SIGHUP would restart them all.  Here SIGHUP checks the rule
files in the parent instead: rules with errors are logged and change nothing (every worker keeps
serving the old set); good rules are written to the snapshot, then each worker is sent SIGHUP and
reloads it in place (`rlvp_dsl.serve.rulesets.snapshot_loader`), with no connection dropped.  Each
reload is counted here, once (``rlvp_serve_reloads_total``: `rlvp_dsl.serve.metrics`).  A
worker started later (one that died) reads the same snapshot: every worker serves one rule set,
whatever the files hold by then.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping
from socket import socket

from uvicorn.config import Config
from uvicorn.supervisors.multiprocess import Multiprocess

from .metrics import count_parent_reload, multiprocess_dir
from .rulesets import RulesFailed, check_rule_files, read_snapshot, write_snapshot

log = logging.getLogger("rlvp_dsl.serve")


class RulesSupervisor(Multiprocess):
    """uvicorn's `Multiprocess`, whose SIGHUP reloads the rules (module docstring).

    Args:
        config: the uvicorn configuration (workers, the app factory).
        sockets: the bound listening socket(s).
        named: rule-set name -> rule file.
        snapshot: the snapshot file the workers read.
    """

    def __init__(self, config: Config, sockets: list[socket], named: Mapping[str, str], snapshot: str) -> None:
        super().__init__(config, sockets)
        self.named = dict(named)
        self.snapshot = snapshot

    def handle_hup(self) -> None:
        try:
            checked = check_rule_files(self.named)
        except RulesFailed as exc:
            log.error("reload failed; every worker keeps serving the rules it has:\n%s", exc)
            self._count(ok=False)
            return
        _, generation = read_snapshot(self.snapshot)
        write_snapshot(self.snapshot, checked, generation + 1)
        self._count(ok=True)
        log.info("rules checked (generation %d): telling %d workers to reload", generation + 1, len(self.processes))
        for process in self.processes:
            if process.pid is not None and process.exitcode is None:
                try:
                    os.kill(process.pid, signal.SIGHUP)
                except ProcessLookupError:  # it died just now; its replacement reads the new snapshot
                    pass

    def _count(self, ok: bool) -> None:
        """Count the reload once, for every worker's ``/metrics`` (`rlvp_dsl.serve.metrics`)."""
        folder = multiprocess_dir()
        if folder:
            count_parent_reload(folder, ok)
