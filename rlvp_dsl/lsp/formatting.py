"""Document formatting (``textDocument/formatting``): `rlvp-compile --fmt`'s layout,
`rlvp_dsl.syntax.fmt.format_source`, as one edit.

The document's text formatted; when it differs, one `TextEdit` replacing the whole document (from
0:0 to the end of its last line, in the client's position units); no edit when the text is already
formatted or does not parse (`format_source` refuses it: its syntax errors are already the
document's diagnostics).
"""

from __future__ import annotations

from lsprotocol import types

from ..diagnostics import RuleError
from ..syntax.fmt import format_source
from .positions import Codec


def format_edits(text: str, path: str, codec: Codec) -> list[types.TextEdit]:
    """The edits that format `text` (the document at `path`): [] or one whole-document edit."""
    try:
        formatted = format_source(text, path=path)
    except RuleError:
        return []
    if formatted == text:
        return []
    lines = text.split("\n")
    end = types.Position(len(lines) - 1, codec.client_num_units(lines[-1]))
    return [types.TextEdit(types.Range(types.Position(0, 0), end), formatted)]
