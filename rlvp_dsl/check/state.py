"""What the checker's stages share: the files, the diagnostics found so far, and the tables the
earlier stages built (tools, constants, tags) for the later ones."""

from __future__ import annotations

from typing import Iterator, Mapping, TypeVar

import attrs

from .. import ast
from ..analysis import Universe
from ..diagnostics import WARNING, Diagnostic, quoted
from ..manifests import Manifest
from ..source import Span
from ..tools import ToolSpec

Item = TypeVar("Item")


@attrs.frozen
class TargetOrigin:
    """Where a tool's target came from: a ``target`` clause (at its argument name), or a
    manifest read by ``tools from`` (at that line), which may have inferred it."""

    span: Span
    manifest: str | None = None  # the path as written in `tools from`; None: a `target` clause
    inferred: bool = False  # the manifest declares no target: `rlvp_dsl.manifests.targets` inferred it

    def now(self, tool: str, target: str) -> str:
        """The first half of RV203's message, for the declaration that conflicts."""
        if self.manifest is None:
            return f"tool {quoted(tool)} declared with target {quoted(target)}"
        how = " (inferred from its parameters)" if self.inferred else ""
        return f"the manifest {quoted(self.manifest)} gives tool {quoted(tool)} target {quoted(target)}{how}"

    def before(self, target: str) -> str:
        """The second half of RV203's message, for the declaration that came first."""
        if self.manifest is None:
            return f"earlier declared with target {quoted(target)} (at {self.span.location})"
        how = "inferred from its parameters by " if self.inferred else ""
        return (
            f"earlier the manifest {quoted(self.manifest)} gave it target {quoted(target)} "
            f"({how}`tools from` at {self.span.location})"
        )


class CheckState:
    """The state of one `rlvp_dsl.check.check` run, passed from stage to stage.

    Attributes:
        files: the parsed rule files (includes first).
        manifests: (rule file path, path as written) -> the manifest it names in ``tools from``.
        diagnostics: every diagnostic so far, in the order found.
        errors: how many of them are errors (counted, not recounted per rule).
        tools: the tool table (stage 1), name -> `ToolSpec`.
        tag_origins: declared tag -> (the first tool declaring it, where).
        target_origins: tool name -> where its target came from (`rlvp_dsl.check.tools`; tools
            with a target only).
        universe: the event classes the tool table allows (`rlvp_dsl.analysis.Universe`; after stage 1).
        declared_tags / known_tags: the tools' tags, and those plus `rlvp_dsl.check.tags.BUILTIN_TAGS`.
        consts: constant name -> (value, where) (stage 2).
        used_tags: the tags the rules test (stage 3).
        errors_before_rule: `errors` when the current rule's check began.
        unread_manifest: where the first ``tools from`` names a manifest the loader could not
            read (it reported why: RV001, RV002), else None.  The tool table is incomplete then,
            so an unknown tool or tag is not reported (`follow_on_error`): the manifest may
            declare it, and one error at the ``tools from`` line says what to fix.
    """

    def __init__(self, files: list[ast.RuleFile], manifests: Mapping[tuple[str, str], Manifest]) -> None:
        self.files = files
        self.manifests = manifests
        self.diagnostics: list[Diagnostic] = []
        self.errors = 0
        self.tools: dict[str, ToolSpec] = {}
        self.tag_origins: dict[str, tuple[str, Span]] = {}
        self.target_origins: dict[str, TargetOrigin] = {}
        self.universe = Universe({})
        self.declared_tags: set[str] = set()
        self.known_tags: set[str] = set()
        self.consts: dict[str, tuple[float, Span]] = {}
        self.used_tags: set[str] = set()
        self.errors_before_rule = 0
        self.unread_manifest: Span | None = None

    def error(self, code: str, message: str, span: Span, help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, help))
        self.errors += 1

    def follow_on_error(self) -> None:
        """An error that follows from one already reported (a name the unread manifest may
        declare): counted, so the rule is not compiled, but not shown."""
        self.errors += 1

    def warn(self, code: str, message: str, span: Span, help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, help, WARNING))

    def items(self, kind: type[Item]) -> Iterator[tuple[ast.RuleFile, Item]]:
        """Every item of the given kind, with its file, in file then source order."""
        for f in self.files:
            for item in f.items:
                if isinstance(item, kind):
                    yield f, item

    def rule_has_errors(self) -> bool:
        """Whether the current rule's check has found an error."""
        return self.errors > self.errors_before_rule
