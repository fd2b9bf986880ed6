"""The language server: pygls's `LanguageServer` with the features of this package wired to it.

Every open document is checked on open, on every change and whenever any file is saved (its
includes may have changed), with the live text of every open document (`diagnostics.check_document`'s
overlay); a change, open or close of a document also re-checks the open documents whose last check
read it (they include it).  Diagnostics are published on the files they belong to (the document, an
included file), merged with those other open documents find in the same file, with the version of
that file's open document.  Malformed and early client messages: `protocol`.
"""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from urllib.parse import unquote
from pygls.workspace import TextDocument

from ..diagnostics import Diagnostic
from . import incremental
from .actions import quick_fixes
from .completion import completion_items
from .definitions import Target, definitions, references
from .diagnostics import check_document, key, more_lsp, to_lsp
from .formatting import format_edits
from .hover import hover_text
from .index import Index, build_index
from .positions import from_position, to_range
from .protocol import PARSE_ERRORS, RuleProtocol
from .symbols import document_symbols

#: The server's name and version, as the client shows them.
NAME, VERSION = "rlvp-lsp", "0.1.0"


class RuleServer(LanguageServer):
    """The server and what it keeps per open document: the diagnostics each document's check
    found, by the file they belong to (`found`), the files that check read (`read`), and the last
    index built without syntax errors."""

    def __init__(self) -> None:
        super().__init__(NAME, VERSION, protocol_cls=RuleProtocol)
        # root document uri -> target uri -> (LSP diagnostics, the rlvp diagnostics they came from)
        self.found: dict[str, dict[str, tuple[list[types.Diagnostic], list[Diagnostic]]]] = {}
        self.read: dict[str, frozenset[str]] = {}  # root document uri -> `key`s of the files its check read
        self.indexes: dict[str, tuple[str, Index]] = {}  # uri -> (text it was built from, index)
        self.shut_down = False  # the client sent `shutdown`

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls's error hook: a message body that is not JSON is answered with -32700 (`protocol`),
        not with pygls's ``window/showMessage`` pop-up; every other error as pygls reports it."""
        if source is JsonRpcException and isinstance(error, PARSE_ERRORS) and isinstance(self.protocol, RuleProtocol):
            self.protocol.parse_error(error)
            return
        super().report_server_error(error, source)

    # ---- paths -----------------------------------------------------------------------------

    @staticmethod
    def path_of(uri: str) -> str:
        """The file system path of a document (its uri itself for an unsaved ``untitled:`` one)."""
        return to_fs_path(uri) or uri

    def uri_of(self, path: str, root_uri: str) -> str:
        if path == self.path_of(root_uri):
            return root_uri
        return from_fs_path(os.path.abspath(path)) or path

    # ---- diagnostics -----------------------------------------------------------------------

    def refresh(self, uris: set[str]) -> None:
        """Check the open documents `uris` and every open document whose last check read one of them
        (it includes it), then publish what changed."""
        self.publish(self.recheck(uris))

    def recheck(self, uris: set[str]) -> set[str]:
        """`refresh` without the publishing: the uris whose diagnostics the checks changed."""
        changed = {key(self.path_of(uri)) for uri in uris}
        roots = {uri for uri in uris if self.document(uri) is not None}
        roots |= {root for root, read in self.read.items() if read & changed}
        targets: set[str] = set()
        for root in sorted(roots):
            targets |= self.check(root)
        return targets

    def check(self, uri: str) -> set[str]:
        """Check the open document `uri` (with every open document's live text); the uris whose
        diagnostics it changed, to publish."""
        doc = self.workspace.get_text_document(uri)
        overlay = {key(self.path_of(d.uri)): d.source for d in self.workspace.text_documents.values()}
        checked = check_document(doc.source, self.path_of(uri), overlay)
        codec = self.workspace.position_codec
        found: dict[str, tuple[list[types.Diagnostic], list[Diagnostic]]] = {}
        for path, diagnostics in checked.by_file.items():
            source = checked.result.sources.get(path)
            found[self.uri_of(path, uri)] = ([to_lsp(d, source, codec) for d in diagnostics], diagnostics)
        for path, (count, first) in checked.more.items():
            lsp_diagnostics, _ = found.setdefault(self.uri_of(path, uri), ([], []))
            lsp_diagnostics.append(more_lsp(count, first, checked.result.sources.get(path), codec))
        previous = set(self.found.get(uri, {}))
        self.found[uri] = found
        self.read[uri] = checked.read
        return previous | set(found)

    def forget(self, uri: str) -> None:
        """A closed document: its findings withdrawn (published again without them), and the open
        documents that include it re-checked with its text on disk."""
        previous = set(self.found.pop(uri, {}))
        self.read.pop(uri, None)
        self.indexes.pop(uri, None)
        incremental.forget(self.path_of(uri))
        self.publish(previous | self.recheck({uri}))  # once each, after the re-checks

    def publish(self, targets: set[str]) -> None:
        """Publish the merged diagnostics of each uri of `targets`, with the version of its open
        document (every check reads the open documents' live text; none for a file not open)."""
        for target in sorted(targets):
            merged: list[types.Diagnostic] = []
            for by_target in self.found.values():
                for d in by_target.get(target, ([], []))[0]:
                    if d not in merged:
                        merged.append(d)
            doc = self.document(target)
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=target, diagnostics=merged, version=doc.version if doc else None)
            )

    def rlvp_diagnostics(self, uri: str) -> list[Diagnostic]:
        """The rlvp diagnostics published on `uri` (from every open document's check)."""
        out: list[Diagnostic] = []
        for by_target in self.found.values():
            out += by_target.get(uri, ([], []))[1]
        return out

    def document(self, uri: str) -> TextDocument | None:
        """The open document `uri`; None when the client has not opened it (requests on it get an
        empty answer)."""
        found: TextDocument | None = self.workspace.text_documents.get(unquote(uri))
        return found

    # ---- the index -------------------------------------------------------------------------

    def index(self, doc: TextDocument) -> Index | None:
        """The document's index, rebuilt when its text changed; while the text has syntax errors,
        the last index built without them (None if there never was one)."""
        kept = self.indexes.get(doc.uri)
        if kept is not None and kept[0] == doc.source:
            return kept[1]
        index, complete = build_index(doc.source, self.path_of(doc.uri))
        if complete or kept is None:
            self.indexes[doc.uri] = (doc.source, index)
            return index
        return kept[1]

    def where(self, doc: TextDocument, position: types.Position) -> tuple[str, int, int]:
        """The document's path and the 1-based (line, column) of an LSP position in it."""
        line, column = from_position(position, list(doc.lines), self.workspace.position_codec)
        return self.path_of(doc.uri), line, column

    def locations(self, targets: list[Target], root_uri: str) -> list[types.Location]:
        out = []
        codec = self.workspace.position_codec
        for t in targets:
            uri = self.uri_of(t.path, root_uri)
            if t.span is None:
                rng = types.Range(types.Position(0, 0), types.Position(0, 0))
            else:
                rng = to_range(t.span, _source(self, uri, t.path), codec)
            out.append(types.Location(uri=uri, range=rng))
        return out


def _source(server: RuleServer, uri: str, path: str) -> Any:
    """The text of a file a location points into (open document, else read from disk), for columns."""
    from ..loader import read_source
    from ..source import SourceFile

    if uri in server.workspace.text_documents:
        return SourceFile(path, server.workspace.get_text_document(uri).source)
    source, _problems = read_source(path)
    return source


def create_server() -> RuleServer:
    """A server with every feature registered (not yet started)."""
    server = RuleServer()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: RuleServer, params: None) -> None:
        ls.shut_down = True

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: RuleServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.refresh({params.text_document.uri})
        doc = ls.document(params.text_document.uri)
        if doc is not None:  # indexed now, so that completion has names while later edits do not parse
            ls.index(doc)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: RuleServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.refresh({params.text_document.uri})

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: RuleServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.refresh(set(ls.found))  # a file saved (an include, a manifest): every open document

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: RuleServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: RuleServer, params: types.HoverParams) -> types.Hover | None:
        doc = ls.document(params.text_document.uri)
        if doc is None:
            return None
        path, line, column = ls.where(doc, params.position)
        word = doc.word_at_position(params.position)
        text = hover_text(ls.index(doc), path, line, column, word, ls.rlvp_diagnostics(doc.uri))
        if text is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: RuleServer, params: types.DefinitionParams) -> list[types.Location]:
        doc = ls.document(params.text_document.uri)
        index = ls.index(doc) if doc is not None else None
        if doc is None or index is None:
            return []
        return ls.locations(definitions(index, *ls.where(doc, params.position)), doc.uri)

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    def find_references(ls: RuleServer, params: types.ReferenceParams) -> list[types.Location]:
        doc = ls.document(params.text_document.uri)
        index = ls.index(doc) if doc is not None else None
        if doc is None or index is None:
            return []
        found = references(index, *ls.where(doc, params.position), declarations=params.context.include_declaration)
        return ls.locations(found, doc.uri)

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[" ", "{", ","]))
    def completion(ls: RuleServer, params: types.CompletionParams) -> types.CompletionList:
        doc = ls.document(params.text_document.uri)
        if doc is None:
            return types.CompletionList(is_incomplete=False, items=[])
        _path, line, column = ls.where(doc, params.position)
        lines = doc.lines
        prefix = lines[line - 1][: column - 1] if line - 1 < len(lines) else ""
        return types.CompletionList(is_incomplete=False, items=completion_items(ls.index(doc), prefix))

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: RuleServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        from ..source import SourceFile

        doc = ls.document(params.text_document.uri)
        if doc is None:
            return []
        index = ls.index(doc)
        path = ls.path_of(doc.uri)
        tree = next((f for f in index.files if f.path == path), None) if index else None
        if tree is None:
            return []
        return document_symbols(tree, SourceFile(path, ls.indexes[doc.uri][0]), ls.workspace.position_codec)

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(ls: RuleServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return quick_fixes(params.text_document.uri, params.context.diagnostics)

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    def formatting(ls: RuleServer, params: types.DocumentFormattingParams) -> list[types.TextEdit]:
        doc = ls.document(params.text_document.uri)
        if doc is None:
            return []
        return format_edits(doc.source, ls.path_of(doc.uri), ls.workspace.position_codec)

    return server


def serve() -> bool:
    """Serve over standard input and output until the client says exit (or is gone); whether it
    said ``shutdown`` first."""
    server = create_server()
    server.start_io()
    return server.shut_down
