"""``python -m rlvp_dsl.lsp``: the language server over stdio (as ``rlvp-lsp``)."""

from . import command

command()
