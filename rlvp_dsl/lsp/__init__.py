"""`rlvp-lsp`: a language server for rule files (pygls over stdio; extra ``lsp``).

One module per job: `diagnostics` (the checks `rlvp-compile --json` runs, on the editor's text),
`index` (the names of a rule set: tools, constants, rules, tags, signals, includes, manifests, where
each is declared and used), `hover`, `definitions` (go to definition, find references),
`completion`, `symbols` (the outline), `actions` (did-you-mean quick fixes), `formatting` (the place
for `rlvp_dsl.syntax.fmt`), `positions` (spans <-> LSP ranges), `server` (the features wired to
pygls), `cli` (the command line).  docs/lsp.md says how to start it from an editor.
"""

from __future__ import annotations

import sys

#: The exit status after Ctrl-C (as the other CLIs: `rlvp_dsl.cli.EXIT_INTERRUPTED`).
_INTERRUPTED = 130


def command() -> None:
    """The ``rlvp-lsp`` console script: `cli.main`'s exit status; Ctrl-C (even while pygls loads)
    exits 130 quietly.  Not `rlvp_dsl.cli.console`: standard output is the protocol's channel, which
    pygls closes when the client says exit."""
    try:
        from .cli import main

        code = main()
    except KeyboardInterrupt:
        code = _INTERRUPTED
    sys.exit(code)
