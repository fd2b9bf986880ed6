"""The checker: parsed files -> a `RuleSet` the compiler can trust, or diagnostics.

Stages, in order (each needs the one before), one module each:

1. tools     (`tools.py`)      -- ``tools from`` manifests and ``tool`` declarations, merged into
                                  one table;
2. constants (`weights.py`)    -- ``const`` names, then weights resolved (unknown constant: RV207)
                                  and their signs checked (RV204);
3. rules     (`rules.py`, `conditions.py`) -- duplicate names (RV203), names of tools and tags
                                  (RV201/RV202, with did-you-mean), regexes (RV105), bindings (RV205);
4. meaning   (`meaning.py`)    -- credit that would land on user text (RV208), obligations that can
                                  never be discharged (RV206), rules that can never fire (RV210, a
                                  warning), declared tags close to a standard tag that no rule tests
                                  (RV212, a warning; `tags.py`);
5. lowering  (`lowering.py`)   -- ``repeat_error`` and ``blind_destructive`` become violations over
                                  ``seen``.

Stages 3 to 5 run rule by rule; the files' ``test`` blocks are collected last (`inline_tests.py`).
What the stages share is a `CheckState` (`state.py`).
"""

from __future__ import annotations

from typing import Mapping

from .. import ast
from ..diagnostics import Diagnostic
from ..ir import RuleSet
from ..manifests import Manifest
from .inline_tests import collect_tests
from .rules import check_rules
from .state import CheckState
from .tags import tag_typos
from .tools import collect_tools
from .weights import collect_consts


def check(
    files: list[ast.RuleFile],
    manifests: Mapping[tuple[str, str], Manifest] | None = None,
) -> tuple[RuleSet, list[Diagnostic]]:
    """Check parsed files (includes first) and lower them to a `RuleSet`.

    `manifests` holds the tool manifests the files name in ``tools from``, keyed by
    (rule file path, path as written), as `rlvp_dsl.loader.load_manifests` reads them;
    the checker itself reads no file.

    Returns:
        (the rule set -- usable only when the diagnostics hold no error --, diagnostics).
    """
    state = CheckState(files, manifests or {})
    collect_tools(state)  # 1: the tool table (then the universe of event classes)
    collect_consts(state)  # 2: constants, before any weight is resolved
    rules, rule_names = check_rules(state)  # 3-5, rule by rule
    tag_typos(state)  # needs every rule's tags
    ruleset = RuleSet(dict(sorted(state.tools.items())), tuple(rules), collect_tests(state, rule_names))
    return ruleset, state.diagnostics
