"""The user's cache folder, shared by the parser tables (`rlvp_dsl.syntax.grammar`) and the checked rule
sets (`rlvp_dsl.check_cache`): where it is, and whether the caches are turned off.  Imports nothing of
the stages (the parser stage and the cache of its result both read it)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def cache_folder() -> str:
    """The cache folder: ``$RLVP_CACHE_DIR``, else ``$XDG_CACHE_HOME/rlvp``, else ``~/.cache/rlvp``."""
    given = os.environ.get("RLVP_CACHE_DIR")
    if given:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rlvp")


def cache_dir() -> Path:
    """`cache_folder` as a `Path` (pathlib is imported here: a cache hit never needs it)."""
    from pathlib import Path

    return Path(cache_folder())


def disabled() -> bool:
    """Whether ``RLVP_NO_CACHE`` turns the caches off (any value but "" and "0")."""
    return os.environ.get("RLVP_NO_CACHE", "") not in ("", "0")


def discard(path: str | os.PathLike[str]) -> None:
    """Remove the temporary file a cache write left at `path`, if it is still there (renamed into
    place, it is not); a file that cannot be removed stays (the cache is an optimisation)."""
    try:
        os.unlink(path)
    except OSError:
        pass
