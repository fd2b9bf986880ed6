"""Read a rule file and everything it names: includes, tool manifests, test episode files.

`load_files(path)` reads the root file, parses it, and follows ``include``
statements (paths relative to the including file), each file once.  Missing files,
unreadable files and include cycles become diagnostics at the ``include``; so do the
limits (`MAX_FILES` files, RV001; `MAX_ITEMS` items, RV004 -- docs/language.md, "Limits").
The walk is iterative: an include chain `MAX_FILES` long never recurses.
`load_manifests(files)` reads the manifests of their ``tools from`` statements and
checks that every ``test`` block's episode file exists (relative to the rule file), so
that the checker reads no file.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Iterator, Mapping

import attrs

from . import ast
from .diagnostics import Diagnostic
from .input_files import check_regular, read_input_bytes
from .manifests import Manifest, ManifestError, load_manifest
from .parser import parse as parse_source
from .source import NO_SPAN, SourceFile, Span, undecodable

#: Parses one source: (its tree, or None when it has syntax errors; the diagnostics).
Parse = Callable[[SourceFile], "tuple[ast.RuleFile | None, list[Diagnostic]]"]

#: The most files one rule set may include (directly or not).
MAX_FILES = 1000

#: The most top-level items (declarations, rules, tests) one rule set may hold, across its files
#: (RV004): the checker and the lints stay near-linear below it, and it keeps their time and memory
#: bounded (docs/language.md, "Limits").
MAX_ITEMS = 50_000


def _base_of(path: str, named: str) -> str:
    """Where a relative path written in the rule file `path` starts, in words: `named` (its folder),
    or the current folder for a rule text with no folder of its own (``<stdin>``, ``<string>``)."""
    if path.startswith("<") and path.endswith(">"):
        return f"the current folder, {os.getcwd()}"
    return named


def read_source(path: str, *, at: Span = NO_SPAN) -> tuple[SourceFile | None, list[Diagnostic]]:
    """Read one file as UTF-8 (BOM tolerated).  Errors become RV001 diagnostics at `at`."""
    try:
        data = read_input_bytes(path)
    except FileNotFoundError:
        if at.line > 0:  # named by an include (the file asked for has no place: line 0)
            where = f"relative paths start at {_base_of(at.file, 'the including file')}"
        elif os.path.isabs(path):
            where = ""
        else:  # the file a caller named: the current folder
            where = f"a relative path starts at the current folder, {os.getcwd()}"
        return None, [
            Diagnostic("RV001", f"file not found: {path}", at, help=f"check the path{f' ({where})' if where else ''}")
        ]
    except IsADirectoryError:
        return None, [Diagnostic("RV001", f"is a directory, not a rule file: {path}", at)]
    except OSError as exc:
        return None, [Diagnostic("RV001", f"cannot read {path}: {exc.strerror}", at)]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [
            Diagnostic("RV001", f"{path} is not UTF-8 text: {undecodable(exc)}", at, help="save the file as UTF-8")
        ]
    return SourceFile(path, text), []


def load_files(
    path: str,
    *,
    text: str | None = None,
    parse: Parse | None = None,
    overlay: Mapping[str, str] | None = None,
) -> tuple[list[ast.RuleFile], dict[str, SourceFile], list[Diagnostic]]:
    """Parse `path` (or `text`, named `path`) and every file it includes.

    `parse` parses one source (None: `rlvp_dsl.parser.parse`); the language server passes one
    that re-parses only the items an edit touched (`rlvp_dsl.lsp.incremental.cached_parse`), which
    must give the same trees and diagnostics.  `overlay`: the text of included files by normalised
    absolute path (``os.path.normpath(os.path.abspath(p))``), taken instead of reading them (the
    language server's open documents, unsaved edits included).

    Returns:
        (parsed files in include order -- includes before the file that includes them --,
        sources by path, diagnostics).  Files with syntax errors are left out of the list.
    """
    parse_one = parse or parse_source
    sources: dict[str, SourceFile] = {}
    files: list[ast.RuleFile] = []
    diagnostics: list[Diagnostic] = []
    done: set[str] = set()
    items = 0

    def enter(file_path: str, at: Span, stack: list[_Frame], inline: str | None = None) -> _Frame | None:
        """Read and parse one file; its frame (to walk its includes), or None when it is skipped."""
        nonlocal items
        key = os.path.normpath(os.path.abspath(file_path)) if inline is None else file_path
        if key in on_stack:
            keys = [frame.key for frame in stack]
            chain = " -> ".join(os.path.basename(p) for p in (*keys[keys.index(key) :], key))
            diagnostics.append(Diagnostic("RV003", f"include cycle: {chain}", at, help="remove one of these includes"))
            return None
        if key in done:
            return None
        if len(done) >= MAX_FILES:
            diagnostics.append(
                Diagnostic(
                    "RV001",
                    f"more than {MAX_FILES} included files: this include would be file {MAX_FILES + 1} of the rule set",
                    at,
                    help='merge some of the included files (docs/language.md, "Limits")',
                )
            )
            return None
        done.add(key)
        source: SourceFile | None
        if inline is not None:
            source = SourceFile(file_path, inline)
        elif overlay is not None and key in overlay:
            source = SourceFile(file_path, overlay[key])
        else:
            source, problems = read_source(file_path, at=at)
            diagnostics.extend(problems)
            if source is None:
                return None
        sources[source.path] = source
        if items > MAX_ITEMS:  # reported (RV004): the rest is not parsed
            return None
        over = _item_over_limit(source.text, MAX_ITEMS - items)
        if over is not None:  # refused before parsing: a parse tree of that size is what costs the memory
            diagnostics.append(_too_many_items(source.span(*over)))
            items = MAX_ITEMS + 1
            return None
        tree, problems = parse_one(source)
        diagnostics.extend(problems)
        if tree is None:
            return None
        if items <= MAX_ITEMS < items + len(tree.items):  # the exact count (the scan above estimates it)
            diagnostics.append(_too_many_items(tree.items[MAX_ITEMS - items].span))
        items += len(tree.items)
        base = os.path.dirname(file_path)
        includes = [(os.path.join(base, i.path), i.span) for i in tree.items if isinstance(i, ast.Include)]
        return _Frame(key, tree, iter(includes))

    # Depth first with an explicit stack (an include chain as long as MAX_FILES must not recurse):
    # a file is appended once all its includes are, so includes come before the file that includes them.
    stack: list[_Frame] = []
    on_stack: set[str] = set()
    root = enter(path, Span(path, 0, 0), stack, inline=text)
    if root is not None:
        stack.append(root)
        on_stack.add(root.key)
    while stack:
        frame = stack[-1]
        nxt = next(frame.includes, None)
        if nxt is None:
            stack.pop()
            on_stack.discard(frame.key)
            files.append(frame.tree)
            continue
        child = enter(nxt[0], nxt[1], stack)
        if child is not None:
            stack.append(child)
            on_stack.add(child.key)
    return files, sources, diagnostics


def _too_many_items(at: Span) -> Diagnostic:
    return Diagnostic(
        "RV004",
        f"the rule set has more than {MAX_ITEMS} items (declarations, rules and tests, counted across "
        "its included files)",
        at,
        "this is the first item over the limit; split the rule set into several, or fold rules that differ "
        'only in a value into one condition (`call {a, b}`, `arg x in ["a", "b"]`)',
    )


#: The shortest top-level item (`tool a`) and a separator.
_MIN_ITEM_CHARS = 7

# What must be skipped to find the items (strings, regexes, quoted names and comments, as the
# grammar's terminals, cut at the end of the line), the braces around rule bodies and test blocks,
# and whole words (the grammar's NAME), so a keyword is recognised as a word and a 50 MB word is one
# match.  `test` is a soft keyword (a name too): it starts an item only before a string (group `q`).
_ITEM_SCAN = re.compile(
    r'#[^\n]*|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?|/[^/\\\n]*(?:\\.[^/\\\n]*)*/?|`[^`\n]*`?|[{}]'
    r'|[^\W\d][\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]*(?:(?=\s*")(?P<q>))?'
)
_ITEM_WORDS = frozenset(
    {"include", "tools", "tool", "const", "violation", "obligation", "repeat_error", "blind_destructive", "progress"}
)


def item_keywords(text: str) -> Iterator[tuple[int, int]]:
    """The offsets (start, end) of each top-level item's keyword, in order: a scan of the text (linear,
    no parse tree; strings, regexes, comments and braced bodies skipped).  The language server cuts
    a file into items with it (`rlvp_dsl.lsp.incremental`)."""
    depth = 0
    for m in _ITEM_SCAN.finditer(text):
        token = m.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth = max(0, depth - 1)
        elif depth == 0 and (token in _ITEM_WORDS or (token == "test" and m.group("q") is not None)):
            yield m.span()


def _item_over_limit(text: str, room: int) -> tuple[int, int] | None:
    """The offsets (start, end) of the keyword of the first top-level item beyond `room` more items, or
    None.  A file too short to hold that many is not scanned."""
    if len(text) <= _MIN_ITEM_CHARS * room:
        return None
    for count, span in enumerate(item_keywords(text), 1):
        if count > room:
            return span
    return None


@attrs.define
class _Frame:
    """One file being walked: its key (normalised path), its tree, its includes not yet followed."""

    key: str
    tree: ast.RuleFile
    includes: Iterator[tuple[str, Span]]


def load_manifests(files: list[ast.RuleFile]) -> tuple[dict[tuple[str, str], Manifest], list[Diagnostic]]:
    """Read every manifest named by ``tools from`` and check the test episode files exist.

    Returns:
        (manifests keyed by (rule file path, path as written), diagnostics: RV001 for a
        missing file, RV002 for a manifest that cannot be read).
    """
    manifests: dict[tuple[str, str], Manifest] = {}
    diagnostics: list[Diagnostic] = []
    for f in files:
        base = os.path.dirname(f.path)
        for item in f.items:
            if isinstance(item, ast.ToolsFrom) and (f.path, item.path) not in manifests:
                path = os.path.join(base, item.path)
                try:
                    check_regular(path)
                    manifests[(f.path, item.path)] = load_manifest(path)
                except FileNotFoundError:
                    diagnostics.append(
                        Diagnostic(
                            "RV001",
                            f"manifest not found: {path}",
                            item.span,
                            f"paths are relative to {_base_of(f.path, 'the rule file that names them')}",
                        )
                    )
                except OSError as exc:
                    diagnostics.append(
                        Diagnostic("RV002", f"cannot read the tool manifest {path}: {exc.strerror or exc}", item.span)
                    )
                except (ManifestError, ValueError) as exc:
                    diagnostics.append(Diagnostic("RV002", f"cannot read the tool manifest: {exc}", item.span))
            elif isinstance(item, ast.InlineTest) and item.episode_file is not None:
                path = os.path.join(base, item.episode_file)
                if os.path.isdir(path):
                    diagnostics.append(
                        Diagnostic(
                            "RV001",
                            f"the test episode file is a directory: {path}",
                            item.span,
                            "name one trajectory file (.json, .jsonl, .traj) of the folder",
                        )
                    )
                elif not os.path.isfile(path):
                    diagnostics.append(
                        Diagnostic(
                            "RV001",
                            f"test episode file not found: {path}",
                            item.span,
                            f"paths are relative to {_base_of(f.path, 'the rule file that names them')}",
                        )
                    )
    return manifests, diagnostics
