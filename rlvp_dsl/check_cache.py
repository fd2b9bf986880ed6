"""The checked rule set, kept between runs: a rule file checked once without errors is not parsed
or checked again until something it depends on changes.

`rlvp-score` and `load_program` (and `check_file`/`check_text` with ``cache=True``) look
here first.  A hit returns the rule set, the diagnostics (warnings: an error-free result is the
only kind kept) and the sources exactly as the check gave them, without importing lark, the parser
or the checker; the program is then compiled as usual (a `Program` holds closures: it is not kept).

Where: the parser-table folder (`rlvp_dsl.user_cache`: ``$RLVP_CACHE_DIR``, else ``$XDG_CACHE_HOME/rlvp``,
else ``~/.cache/rlvp``), one file per rule file (``checked-<hash>.pickle``), written atomically (a
temporary file, then a rename).  Turn both caches off with ``RLVP_NO_CACHE=1``; a folder that cannot
be written only means no cache.  At most `MAX_ENTRIES` files are kept (the oldest written go first).

The file's name is the hash of what the result depends on apart from file contents: the format of
this file (`FORMAT`), the Python implementation and version, the content of every file of the
installed ``rlvp_dsl`` package (``*.py`` and the grammar: `package_digest`; a new release or an
edited checkout gets new names, never a stale hit -- the package version itself would need
``importlib.metadata``, and every release changes files anyway) and of lark's ``__init__.py`` (its
version), whether lints ran, the path as given and as an absolute path, and, for text in memory,
the text.  Inside, first the inputs the check read -- every rule file (the sha256 of its text), every
``tools from`` manifest (of its bytes), every ``test`` block's episode file (that it exists) -- then
the pickled result.  A hit needs every input unchanged; anything else (a missing, unreadable,
truncated or corrupt file, an edited include or manifest, a pickle of another version) is a miss,
silently, and the check runs in full.

Trust: the file is a pickle in the user's own cache folder, the trust the parser-table cache
(lark's ``cache=``, also a pickle) already asks for: whoever can write that folder can run code as
the user.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import pickle
import sys
from typing import TYPE_CHECKING, Any

from . import ast
from .input_files import read_input_bytes
from .user_cache import cache_dir as cache_dir  # the folder (rlvp_dsl.user_cache), re-exported
from .user_cache import cache_folder, disabled, discard

if TYPE_CHECKING:
    from .diagnostics import Diagnostic
    from .ir import RuleSet
    from .source import SourceFile

#: The layout of a cache file; a new layout gets new names.
FORMAT = 1

#: The most checked rule sets kept in the folder; past it, the oldest written are removed.
MAX_ENTRIES = 256

#: One input of a check: (kind, path as the loader opened it, digest).  Kinds: ``"text"`` a rule
#: file (sha256 of its decoded text), ``"inline"`` the text in memory, ``"bytes"`` a manifest
#: (sha256 of its bytes), ``"exists"`` a test episode file (a regular file; digest "").
Input = tuple[str, str, str]

#: A checked result: (rule set, diagnostics, sources by path).
Checked = tuple["RuleSet", "list[Diagnostic]", "dict[str, SourceFile]"]


def _off() -> bool:
    """No checked-rule-set cache: turned off, or no package source to key it by."""
    return disabled() or not package_digest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tree_files(root: str, suffixes: tuple[str, ...]) -> list[str]:
    """Every file under `root` ending in `suffixes` (``__pycache__`` skipped), sorted."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        found += [os.path.join(folder, f) for f in files if f.endswith(suffixes)]
    return sorted(found)


def _search_locations(name: str) -> list[str]:
    """The folders of package `name`, found without importing it ([] when it is not installed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec is not None else []


@functools.lru_cache(maxsize=1)
def package_digest() -> str:
    """sha256 over the path (inside the package) and content of every ``*.py`` and ``*.lark`` file of
    the installed ``rlvp_dsl`` package and its grammar folder (``rlvp_dsl.grammars``, a folder of its
    own in a development checkout), and of lark's ``__init__.py``; about 1.5 ms for 1 MB of source.
    "" (no cache) when no source file is found: a package imported from a zip, say."""
    digest = hashlib.sha256()
    roots = _search_locations("rlvp_dsl") + _search_locations("rlvp_dsl.grammars")
    files_seen = 0
    for root in dict.fromkeys(roots):
        for path in _tree_files(root, (".py", ".lark")):
            files_seen += 1
            digest.update(os.path.relpath(path, root).encode("utf-8", "surrogateescape") + b"\0")
            try:
                with open(path, "rb") as handle:
                    digest.update(_sha(handle.read()).encode("ascii"))
            except OSError:
                digest.update(b"unreadable")
    if not files_seen:  # not a folder of files (a zip, say): nothing to tell releases apart by, so no cache
        return ""
    lark_spec = importlib.util.find_spec("lark")
    if lark_spec is not None and lark_spec.origin:
        try:
            with open(lark_spec.origin, "rb") as handle:
                digest.update(b"lark\0" + handle.read())
        except OSError:
            digest.update(b"lark unreadable")
    return digest.hexdigest()


def entry_path(path: str, text: str | None, lints: bool) -> str:
    """The cache file of checking `path` (with `text` in memory, or read from disk) and `lints`."""
    impl = sys.implementation
    parts = [
        f"rlvp-checked/{FORMAT}",
        f"{impl.name}-{impl.cache_tag}-{'.'.join(map(str, sys.version_info[:3]))}",
        package_digest(),
        "lints" if lints else "no lints",
        "text" if text is not None else "file",
        path,
        os.path.abspath(path),
        _sha(text.encode("utf-8", "surrogatepass")) if text is not None else "",
    ]
    key = _sha("\0".join(parts).encode("utf-8", "surrogateescape"))[:32]
    return os.path.join(cache_folder(), f"checked-{key}.pickle")


def _read_text_digest(path: str) -> str | None:
    """The digest a rule file's text has now (None: unreadable, not UTF-8): as the loader reads it."""
    try:
        return _sha(read_input_bytes(path).decode("utf-8-sig").encode("utf-8", "surrogatepass"))
    except (OSError, UnicodeError):
        return None


def _read_bytes_digest(path: str) -> str | None:
    try:
        return _sha(read_input_bytes(path, stdin=False))
    except OSError:
        return None


def _unchanged(item: Input, text: str | None) -> bool:
    kind, path, digest = item
    if kind == "text":
        return _read_text_digest(path) == digest
    if kind == "inline":
        return text is not None and _sha(text.encode("utf-8", "surrogatepass")) == digest
    if kind == "bytes":
        return _read_bytes_digest(path) == digest
    if kind == "exists":
        return os.path.isfile(path)
    return False


def lookup(path: str, text: str | None, lints: bool) -> Checked | None:
    """The cached result of checking `path` (or `text` named `path`), or None: no cache file, an input
    changed, or the file cannot be read back (any error: the caller then checks in full)."""
    if _off():
        return None
    from .diagnostics import Diagnostic
    from .ir import RuleSet
    from .source import SourceFile

    try:
        with open(entry_path(path, text, lints), "rb") as handle:
            inputs = pickle.load(handle)
            if not (isinstance(inputs, list) and inputs and all(_unchanged(tuple(i), text) for i in inputs)):
                return None
            ruleset, diagnostics, sources = pickle.load(handle)
    except Exception:  # missing, truncated, corrupt, from another version: a miss
        return None
    if not (
        isinstance(ruleset, RuleSet)
        and isinstance(diagnostics, list)
        and all(isinstance(d, Diagnostic) for d in diagnostics)
        and isinstance(sources, dict)
        and all(isinstance(f, SourceFile) for f in sources.values())
    ):
        return None
    return ruleset, diagnostics, sources


def manifest_inputs(files: list[ast.RuleFile]) -> list[Input]:
    """The files `rlvp_dsl.loader.load_manifests` will read or look at, with their digests taken now
    (before it reads them: `store` keeps the result only when they still match afterwards)."""
    out: list[Input] = []
    for f in files:
        base = os.path.dirname(f.path)
        for item in f.items:
            if isinstance(item, ast.ToolsFrom):
                path = os.path.join(base, item.path)
                out.append(("bytes", path, _read_bytes_digest(path) or "unreadable"))
            elif isinstance(item, ast.InlineTest) and item.episode_file is not None:
                out.append(("exists", os.path.join(base, item.episode_file), ""))
    return out


def store(path: str, text: str | None, lints: bool, checked: Checked, manifests: list[Input]) -> None:
    """Keep an error-free `checked` result of `path`; `manifests`: `manifest_inputs` taken before the
    check read them.  Nothing is kept when an input changed during the check, or when the folder
    cannot be written (no error: the cache is an optimisation)."""
    if _off():
        return
    _, _, sources = checked
    inputs: list[Input] = []
    for source_path, source in sources.items():
        if text is not None and source_path == path:
            inputs.append(("inline", source_path, _sha(text.encode("utf-8", "surrogatepass"))))
        else:
            inputs.append(("text", source_path, _sha(source.text.encode("utf-8", "surrogatepass"))))
    inputs += manifests
    if not all(_unchanged(item, text) for item in inputs):  # edited while it was checked
        return
    import tempfile

    target = entry_path(path, text, lints)
    folder = os.path.dirname(target)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(target) + ".", suffix=".tmp", dir=folder)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(inputs, handle, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(checked, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
    except Exception:  # unpicklable (a bug to see in tests, not a user's problem), disk full, ...
        return
    finally:
        discard(tmp)
    _prune(folder)


def _prune(folder: str) -> None:
    """Remove the oldest written cache files past `MAX_ENTRIES` (errors ignored: another process may
    prune at the same time)."""
    try:
        entries: list[Any] = [
            e for e in os.scandir(folder) if e.name.startswith("checked-") and e.name.endswith(".pickle")
        ]
        if len(entries) <= MAX_ENTRIES:
            return
        entries.sort(key=lambda e: e.stat().st_mtime_ns)
        for entry in entries[: len(entries) - MAX_ENTRIES]:
            os.unlink(entry.path)
    except OSError:
        pass
