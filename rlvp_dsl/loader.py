"""Read a rule file and everything it names: includes, tool manifests, test episode files.

`load_files(path)` reads the root file, parses it, and follows ``include``
statements (paths relative to the including file), each file once.  Missing files,
unreadable files and include cycles become diagnostics at the ``include``.
`load_manifests(files)` reads the manifests of their ``tools from`` statements and
checks that every ``test`` block's episode file exists (relative to the rule file), so
that the checker reads no file.
"""

from __future__ import annotations

import os

from . import ast
from .diagnostics import Diagnostic
from .manifests import Manifest, ManifestError, load_manifest
from .parser import parse
from .source import NO_SPAN, SourceFile, Span

#: The most files one rule set may include (directly or not).
MAX_FILES = 1000


def read_source(path: str, *, at: Span = NO_SPAN) -> tuple[SourceFile | None, list[Diagnostic]]:
    """Read one file as UTF-8 (BOM tolerated).  Errors become RV001 diagnostics at `at`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None, [Diagnostic("RV001", f"file not found: {path}", at, help="check the path (relative paths start at the including file)")]
    except IsADirectoryError:
        return None, [Diagnostic("RV001", f"is a directory, not a rule file: {path}", at)]
    except OSError as exc:
        return None, [Diagnostic("RV001", f"cannot read {path}: {exc.strerror}", at)]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return None, [Diagnostic("RV001", f"{path} is not UTF-8 text (byte {exc.start})", at, help="save the file as UTF-8")]
    return SourceFile(path, text), []


def load_files(
    path: str, *, text: str | None = None
) -> tuple[list[ast.RuleFile], dict[str, SourceFile], list[Diagnostic]]:
    """Parse `path` (or `text`, named `path`) and every file it includes.

    Returns:
        (parsed files in include order -- includes before the file that includes them --,
        sources by path, diagnostics).  Files with syntax errors are left out of the list.
    """
    sources: dict[str, SourceFile] = {}
    files: list[ast.RuleFile] = []
    diagnostics: list[Diagnostic] = []
    done: set[str] = set()

    def visit(file_path: str, at: Span, stack: tuple[str, ...], inline: str | None = None) -> None:
        key = os.path.normpath(os.path.abspath(file_path)) if inline is None else file_path
        if key in stack:
            chain = " -> ".join(os.path.basename(p) for p in (*stack[stack.index(key):], key))
            diagnostics.append(Diagnostic("RV003", f"include cycle: {chain}", at, help="remove one of these includes"))
            return
        if key in done:
            return
        if len(done) >= MAX_FILES:
            diagnostics.append(Diagnostic("RV001", f"more than {MAX_FILES} included files", at))
            return
        done.add(key)
        if inline is not None:
            source = SourceFile(file_path, inline)
        else:
            source, problems = read_source(file_path, at=at)
            diagnostics.extend(problems)
            if source is None:
                return
        sources[source.path] = source
        tree, problems = parse(source)
        diagnostics.extend(problems)
        if tree is None:
            return
        base = os.path.dirname(file_path)
        for item in tree.items:
            if isinstance(item, ast.Include):
                visit(os.path.join(base, item.path), item.span, (*stack, key))
        files.append(tree)

    visit(path, Span(path, 0, 0), (), inline=text)
    return files, sources, diagnostics


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
                    manifests[(f.path, item.path)] = load_manifest(path)
                except FileNotFoundError:
                    diagnostics.append(Diagnostic("RV001", f"manifest not found: {path}", item.span,
                                                  "paths are relative to the rule file that names them"))
                except (ManifestError, OSError, ValueError) as exc:
                    diagnostics.append(Diagnostic("RV002", f"cannot read the tool manifest: {exc}", item.span))
            elif isinstance(item, ast.InlineTest) and item.episode_file is not None:
                path = os.path.join(base, item.episode_file)
                if not os.path.isfile(path):
                    diagnostics.append(Diagnostic("RV001", f"test episode file not found: {path}", item.span,
                                                  "paths are relative to the rule file that names them"))
    return manifests, diagnostics
