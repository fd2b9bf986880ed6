"""Document formatting (``textDocument/formatting``): the place for `rlvp-compile --fmt`'s
`rlvp_dsl.syntax.fmt.format_source(text, path=...) -> str`, written on another branch.

Not served yet: `server.py` registers no formatting feature.  To wire it, register
``types.TEXT_DOCUMENT_FORMATTING`` in `server.py` with a handler that calls `format_edits` below,
implemented as: the document's text formatted by `format_source`; when it differs, one `TextEdit`
replacing the whole document (range 0:0 to the end of its last line); no edit when the text has
syntax errors (`format_source` refuses them) or is already formatted.
"""

from __future__ import annotations
