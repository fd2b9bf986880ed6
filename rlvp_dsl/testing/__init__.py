"""Testing tools for rule authors.

* `strategies` -- public Hypothesis strategies: episodes generated from a manifest or a
  program (`episodes`, `events`, `calls`, `vocabulary`, ...), importable from here;
* `properties` -- the built-in properties of ``rlvp-compile --check``;
* `reachability` -- why a rule never fired;
* `rule_tests` -- runs the ``test`` blocks inside rule files (``rlvp-compile --test``);
* `regex_sampling` -- short strings that match a rule's regex, to seed generated episodes.

Only `strategies` and `properties` need Hypothesis; the names of `strategies` are loaded
when first used, so ``rlvp-compile --test`` works without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the lazy names below, for type checkers (at run time they load on first use)
    from .regex_sampling import regex_samples
    from .strategies import Vocabulary, calls, episodes, events, noop_read, read_only_tools, reindexed, vocabulary

__all__ = [
    "Vocabulary",
    "vocabulary",
    "calls",
    "events",
    "episodes",
    "regex_samples",
    "reindexed",
    "noop_read",
    "read_only_tools",
]

_STRATEGIES = tuple(__all__)


def __getattr__(name: str) -> object:
    if name in _STRATEGIES:
        return getattr(importlib.import_module(".strategies", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
