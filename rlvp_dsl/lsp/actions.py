"""Quick fixes: every diagnostic whose help says "did you mean 'X'?" gets a code action replacing
the diagnostic's range with X."""

from __future__ import annotations

import re
from collections.abc import Sequence

from lsprotocol import types

_DID_YOU_MEAN = re.compile(r"did you mean '([^'\n]+)'\?")


def suggestion(help_text: str) -> str | None:
    """X of a help line "... did you mean 'X'? ...", or None."""
    m = _DID_YOU_MEAN.search(help_text)
    return m.group(1) if m else None


def quick_fixes(uri: str, diagnostics: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
    """One quick fix per diagnostic (of those the client sends back, with the help the server put
    in ``data["help"]``) that suggests a name."""
    actions = []
    for d in diagnostics:
        data = d.data if isinstance(d.data, dict) else {}
        name = suggestion(str(data.get("help", "")))
        if name is None:
            continue
        actions.append(
            types.CodeAction(
                title=f"Replace with '{name}'",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[d],
                is_preferred=True,
                edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=d.range, new_text=name)]}),
            )
        )
    return actions
