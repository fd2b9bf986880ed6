"""The checker: parsed files -> a `RuleSet` the compiler can trust, or diagnostics.

Stages, in order (each needs the one before):

1. tools     -- ``tools from`` manifests and ``tool`` declarations, merged into one table;
2. constants -- ``const`` names, then weights resolved (unknown constant: RV207);
3. rules     -- duplicate names (RV203), weight signs (RV204), names of tools and tags
                (RV201/RV202, with did-you-mean), regexes (RV105), bindings (RV205);
4. meaning   -- credit that would land on user text (RV208), obligations that can never
                be discharged (RV206), rules that can never fire (RV210, a warning),
                declared tags close to a standard tag that no rule tests (RV212, a warning);
5. lowering  -- ``repeat_error`` and ``blind_destructive`` become violations over ``seen``.
"""

from __future__ import annotations

import difflib
from typing import Iterable, Mapping

from . import ast
from .analysis import Universe, has_unknown, tools_of, walk
from .diagnostics import WARNING, Diagnostic, did_you_mean, quoted
from .events import OK, USER
from .ir import ObligationRule, ProgressRule, RuleSet, RuleTest, ViolationRule
from .manifests import Manifest
from .source import Span
from .syntax.errors import keyword_suggestion
from .tools import ToolSpec

#: Tags the readers give events themselves (`user_side`: a call the user makes, tau2 telecom).
BUILTIN_TAGS = frozenset({"user_side"})

#: Tags with a meaning of their own: the structural rules' defaults (read, write, destructive), the derived
#: rules (verify, test, submit), the manifest formats (think, generic, idempotent, additive, open_world,
#: closed_world), the readers (user_side) and the stock rules (search). A declared tag close to one of these
#: is a likely typo (RV212).
STANDARD_TAGS = frozenset(
    {
        "read",
        "write",
        "destructive",
        "verify",
        "test",
        "submit",
        "search",
        "think",
        "generic",
        "idempotent",
        "additive",
        "open_world",
        "closed_world",
        "user_side",
    }
)

#: How close (difflib ratio) a declared tag must be to a standard one to be flagged: `raed`/`read` is 0.75,
#: `agent_side`/`user_side` (a real tag) 0.63.
TAG_TYPO_CUTOFF = 0.75

# Defaults of the structural rules (docs/language.md, "repeat_error" and "blind_destructive").
_WRITE_LIKE = ast.Or((ast.TagAtom(ast.Name("write")), ast.TagAtom(ast.Name("destructive"))))
DEFAULT_RESET = ast.And((ast.CallAtom(), ast.StatusAtom("ok"), _WRITE_LIKE))
#: `call (tag destructive or tag write and not tag additive)`: an additive write (MCP destructiveHint false) destroys nothing.
DEFAULT_DESTRUCTIVE = ast.And(
    (
        ast.CallAtom(),
        ast.Or(
            (
                ast.TagAtom(ast.Name("destructive")),
                ast.And((ast.TagAtom(ast.Name("write")), ast.Not(ast.TagAtom(ast.Name("additive"))))),
            )
        ),
    )
)
DEFAULT_INSPECTED = ast.And((ast.CallAtom(), ast.TagAtom(ast.Name("read")), ast.StatusAtom("ok")))


class _Checker:
    def __init__(self, files: list[ast.RuleFile], manifests: Mapping[tuple[str, str], Manifest]):
        self.files = files
        self.manifests = manifests
        self.diagnostics: list[Diagnostic] = []
        self.tools: dict[str, ToolSpec] = {}
        self.consts: dict[str, tuple[float, Span]] = {}
        self.errors = 0  # the errors among the diagnostics (counted, not recounted per rule)
        self.tag_origins: dict[str, tuple[str, Span]] = {}  # declared tag -> (the first tool declaring it, where)
        self.used_tags: set[str] = set()  # the tags the rules test

    def error(self, code: str, message: str, span: Span, help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, help))
        self.errors += 1

    def warn(self, code: str, message: str, span: Span, help: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, message, span, help, WARNING))

    def items(self, kind) -> Iterable:
        for f in self.files:
            for item in f.items:
                if isinstance(item, kind):
                    yield f, item

    # ---- 1. tools -----------------------------------------------------
    def collect_tools(self) -> None:
        for f, item in self.items((ast.ToolsFrom, ast.ToolDecl)):
            if isinstance(item, ast.ToolsFrom):
                self.tools_from(f, item)
            else:
                for tag in item.tags:
                    self.tag_origins.setdefault(tag.text, (item.name.text, tag.span))
                self.declare(
                    ToolSpec(
                        item.name.text,
                        frozenset(t.text for t in item.tags),
                        item.target.text if item.target else None,
                        item.params,
                        span=item.name.span,
                    )
                )

    def tools_from(self, f: ast.RuleFile, item: ast.ToolsFrom) -> None:
        manifest = self.manifests.get((f.path, item.path))
        if manifest is None:  # the loader reported why (RV001, RV002)
            return
        for spec in manifest.tools:
            for tag in sorted(spec.tags):
                self.tag_origins.setdefault(tag, (spec.name, item.span))
            self.declare(ToolSpec(spec.name, spec.tags, spec.target, spec.params, span=item.span))

    def declare(self, tool: ToolSpec) -> None:
        old = self.tools.get(tool.name)
        if old is None:
            self.tools[tool.name] = tool
            return
        if old.target and tool.target and old.target != tool.target:
            self.error(
                "RV203",
                f"tool {quoted(tool.name)} declared with target {quoted(tool.target)}, "
                f"but earlier with target {quoted(old.target)} (at {old.span.location})",
                tool.span,
                "a tool has one target; remove one of the declarations",
            )
            return
        params = (
            old.params
            if tool.params is None
            else (tool.params if old.params is None else tuple(dict.fromkeys(old.params + tool.params)))
        )
        self.tools[tool.name] = ToolSpec(
            tool.name, old.tags | tool.tags, old.target or tool.target, params, span=old.span
        )

    # ---- 2. constants --------------------------------------------------
    def collect_consts(self) -> None:
        for _, item in self.items(ast.ConstDecl):
            name = item.name.text
            if name in self.consts:
                self.error(
                    "RV203",
                    f"constant {quoted(name)} is defined twice (first at {self.consts[name][1].location})",
                    item.name.span,
                    "rename one of them",
                )
                continue
            self.consts[name] = (item.value, item.name.span)

    def weight(self, w: ast.Weight) -> float | None:
        if w.const is None:
            return w.value
        if w.const.text in self.consts:
            return self.consts[w.const.text][0]
        self.error(
            "RV207",
            f"unknown constant {quoted(w.const.text)}",
            w.const.span,
            did_you_mean(w.const.text, self.consts) or "define it with `const NAME = -0.5`",
        )
        return None

    def sign(self, rule_kind: str, field: str, value: float | None, want: str, span: Span) -> float:
        if value is None:
            return 0.0
        bad = (
            (want == "negative" and value >= 0)
            or (want == "positive" and value <= 0)
            or (want == "non-negative" and value < 0)
            or (want == "non-positive" and value > 0)
        )
        if bad:
            helps = {
                "violation": "violations are penalties; to give credit use an obligation or a progress rule",
                "obligation": "an obligation pays `+credit` on discharge and `expire` (a penalty) when its deadline passes",
                "progress": "progress pays credit for a new best value; penalise with a violation instead",
            }
            self.error(
                "RV204",
                f"'{field}' must be {want} for {rule_kind} (got {value:g})",
                span,
                helps.get(rule_kind.removeprefix("an ").removeprefix("a "), helps["violation"]),
            )
        return value

    # ---- 3. names inside conditions -----------------------------------
    def check_expr(self, expr: ast.Expr) -> None:
        declared_tags, known_tags = self.declared_tags, self.known_tags
        for node in walk(expr):
            if isinstance(node, ast.CallAtom):
                for name in node.tools:
                    if name.text not in self.tools:
                        hint = (
                            did_you_mean(name.text, self.tools)
                            or keyword_suggestion(name.text, "a tool name")
                            or ('declare it with `tool NAME : TAGS` or `tools from "manifest.json"`')
                        )
                        self.error("RV201", f"unknown tool {quoted(name.text)}", name.span, hint)
            elif isinstance(node, ast.TagAtom):
                self.used_tags.add(node.tag.text)
                if node.tag.text not in known_tags:
                    hint = (
                        self.misdeclared(node.tag.text)
                        or did_you_mean(node.tag.text, known_tags)
                        or (f"no declared tool carries it; declared tags: {', '.join(sorted(declared_tags)) or 'none'}")
                    )
                    self.error("RV202", f"unknown tag {quoted(node.tag.text)}", node.tag.span, hint)
            elif isinstance(node, (ast.TextTest, ast.ArgTest)) and node.op == "matches":
                self.check_regex(node)
            elif isinstance(node, ast.And):
                self.check_args_in(node)
            elif isinstance(node, ast.Seen) and node.same is not None and not node.returned:
                self.check_binding(node.same, self.universe.possible(node.cond), "the `seen` condition", "RV205")
        if isinstance(expr, ast.ArgTest):
            self.check_args_in(ast.And((expr,), expr.span))

    def misdeclared(self, tag: str) -> str:
        """For a standard tag no tool carries: a help line pointing at the declared tag that looks like a
        misspelling of it (the declaration is what to fix), or ""."""
        if tag not in STANDARD_TAGS:
            return ""
        close = difflib.get_close_matches(
            tag, sorted(set(self.tag_origins) - STANDARD_TAGS), n=1, cutoff=TAG_TYPO_CUTOFF
        )
        if not close:
            return ""
        tool, span = self.tag_origins[close[0]]
        return (
            f"did you mean to declare {quoted(tag)}? tool {quoted(tool)} at {span.location} declares {quoted(close[0])}"
        )

    def tag_typos(self) -> None:
        """RV212: a declared tag close to a standard tag, that no rule tests by its own spelling."""
        for tag, (tool, span) in self.tag_origins.items():
            if tag in STANDARD_TAGS or tag in self.used_tags:
                continue
            close = difflib.get_close_matches(tag, sorted(STANDARD_TAGS), n=1, cutoff=TAG_TYPO_CUTOFF)
            if close:
                self.warn(
                    "RV212",
                    f"tool {quoted(tool)} declares tag {quoted(tag)}, which no rule tests; it is close "
                    f"to the standard tag {quoted(close[0])}",
                    span,
                    f"did you mean {quoted(close[0])}? fix the declaration; if {quoted(tag)} is meant, "
                    f"test it in a rule (`tag {tag}`)",
                )

    def check_regex(self, node) -> None:
        try:
            from .regex import RegexSyntaxError, compile_regex
        except ImportError:  # pragma: no cover - the regex module ships with the package
            return
        try:
            compile_regex(node.value, node.flags)
        except RegexSyntaxError as exc:
            self.error("RV105", f"invalid regular expression: {exc.message}", node.span, exc.hint or "")

    def check_args_in(self, node: ast.And) -> None:
        others = [i for i in node.items if not isinstance(i, ast.ArgTest)]
        context = self.universe.possible(ast.And(tuple(others))) if others else self.universe.calls
        if has_unknown(context):
            return
        tools = [self.tools[t] for t in tools_of(context)]
        if not tools or any(t.params is None for t in tools):
            return
        for item in node.items:
            if isinstance(item, ast.ArgTest) and not any(item.arg.text in t.params for t in tools):
                names = ", ".join(sorted(t.name for t in tools))
                self.error(
                    "RV205",
                    f"argument {quoted(item.arg.text)} is not a parameter of any tool this condition "
                    f"can match ({names})",
                    item.arg.span,
                    did_you_mean(item.arg.text, {p for t in tools for p in t.params}),
                )

    def check_binding(self, binding: ast.Binding, classes, where: str, code: str) -> bool:
        """False when no tool that `where` can match carries a value for `binding`."""
        if binding.kind == "call" or has_unknown(classes):
            return True
        tools = [self.tools[t] for t in tools_of(classes)]
        if binding.kind == "target":
            if tools and not any(t.target for t in tools):
                self.error(
                    code,
                    f"no tool matched by {where} declares a target",
                    binding.span,
                    "declare one with `tool NAME : TAGS target ARG`, or bind an argument: `same ARG`",
                )
                return False
            return True
        if tools and all(t.params is not None for t in tools) and not any(binding.arg.text in t.params for t in tools):
            self.error(
                code,
                f"argument {quoted(binding.arg.text)} is not bound by {where}: none of its tools "
                f"({', '.join(sorted(t.name for t in tools))}) takes it",
                binding.span,
                did_you_mean(binding.arg.text, {p for t in tools for p in t.params}),
            )
            return False
        return True

    # ---- 4. meaning ----------------------------------------------------
    errors_before_rule = 0

    def rule_has_errors(self) -> bool:
        return self.errors > self.errors_before_rule

    def lands_on_calls(self, name: str, what: str, expr: ast.Expr, span: Span) -> None:
        if (USER, None, OK) in self.universe.possible(expr):  # the one class of user messages
            self.error(
                "RV208",
                f"rule {quoted(name)} could give credit to a user message ({what} matches user turns)",
                span,
                "credit lands only on tool calls and assistant turns: add `call` or `assistant`",
            )

    def never_fires(self, name: str, expr: ast.Expr, span: Span) -> bool:
        if self.rule_has_errors():
            return False  # an unknown tool or tag already explains it
        if not self.universe.possible(expr):
            self.warn(
                "RV210",
                f"rule {quoted(name)} can never fire: no event satisfies its condition",
                span,
                "check the tool names, tags and statuses it combines with `and`",
            )
            return True
        return False

    # ---- rules ---------------------------------------------------------
    def run(self) -> RuleSet | None:
        self.collect_tools()
        self.universe = Universe(self.tools)
        # the tool table is final here: its tags once, not once per condition (10,000 tools, 10,000 rules)
        self.declared_tags = set().union(*(t.tags for t in self.tools.values()))
        self.known_tags = self.declared_tags | BUILTIN_TAGS
        self.collect_consts()
        rules = []
        seen_names: dict[str, Span] = {}
        for _, item in self.items(ast.RULE_TYPES):
            name = item.name.text
            if name in seen_names:
                self.error(
                    "RV203",
                    f"duplicate rule name {quoted(name)} (first defined at {seen_names[name].location})",
                    item.name.span,
                    "rule names must be unique: explanations and summaries use them",
                )
                continue
            seen_names[name] = item.name.span
            self.errors_before_rule = self.errors
            rule = getattr(self, "rule_" + item.kind)(item)
            if rule is not None:
                rules.append(rule)
        self.tag_typos()
        return RuleSet(dict(sorted(self.tools.items())), tuple(rules), self.collect_tests(seen_names))

    # ---- tests inside rule files -------------------------------------------
    def collect_tests(self, rule_names: dict[str, Span]) -> tuple[RuleTest, ...]:
        tests = []
        names: dict[str, Span] = {}
        for f, block in self.items(ast.InlineTest):
            if block.name in names:
                self.error(
                    "RV203",
                    f"duplicate test name {block.name!r} (first at {names[block.name].location})",
                    block.span,
                    "test names must be unique: the test runner reports by name",
                )
            names.setdefault(block.name, block.span)
            for expect in block.expects:
                if expect.rule is not None and expect.rule.text not in rule_names:
                    self.error(
                        "RV211",
                        f"unknown rule {quoted(expect.rule.text)} in an expectation",
                        expect.rule.span,
                        did_you_mean(expect.rule.text, rule_names) or "name a rule of this file, or `total`",
                    )
            for event in block.events or ():
                if event.tool is not None and event.tool.text not in self.tools:
                    self.warn(
                        "RV201",
                        f"the test episode calls tool {quoted(event.tool.text)}, which is not declared",
                        event.tool.span,
                        did_you_mean(event.tool.text, self.tools)
                        or "undeclared tools carry no tags; declare it if the rules should see its tags",
                    )
            tests.append(RuleTest(f.path, block))
        return tuple(tests)

    def rule_violation(self, r: ast.Violation) -> ViolationRule:
        w = self.sign("a violation", "weight", self.weight(r.weight), "negative", r.weight.span)
        self.check_expr(r.on)
        cond = r.on
        if r.unless is not None:
            self.check_expr(r.unless)
            cond = ast.And((r.on, ast.Not(r.unless, r.unless.span)), r.on.span)
        self.lands_on_calls(r.name.text, "`on`", r.on, r.on.span)
        self.never_fires(r.name.text, cond, r.name.span)
        return ViolationRule(r.name.text, "violation", w, cond, r.span)

    def rule_obligation(self, r: ast.Obligation) -> ObligationRule:
        credit = self.sign("an obligation", "credit", self.weight(r.credit), "non-negative", r.credit.span)
        expire = self.sign("an obligation", "expire", self.weight(r.expire), "non-positive", r.expire.span)
        for expr in (r.open, r.discharge, r.deadline.cond):
            if expr is not None:
                self.check_expr(expr)
        self.lands_on_calls(r.name.text, "`open`", r.open, r.open.span)
        self.lands_on_calls(r.name.text, "`discharge`", r.discharge, r.discharge.span)
        open_classes = self.universe.possible(r.open)
        discharge_classes = self.universe.possible(r.discharge)
        self.never_fires(r.name.text, r.open, r.name.span)
        if not discharge_classes:
            self.error(
                "RV206",
                f"obligation {quoted(r.name.text)} can never be discharged: no event satisfies its "
                "`discharge` condition",
                r.discharge.span,
                "check the tool names, tags and statuses it combines with `and`",
            )
        elif r.same is not None:
            if self.check_binding(r.same, open_classes, "`open`", "RV205"):
                self.check_binding(r.same, discharge_classes, "`discharge`", "RV206")
        d = r.deadline
        return ObligationRule(r.name.text, credit, expire, r.open, r.discharge, r.same, d.kind, d.cond, d.calls, r.span)

    def rule_repeat_error(self, r: ast.RepeatError) -> ViolationRule:
        w = self.sign("repeat_error", "weight", self.weight(r.weight), "negative", r.weight.span)
        reset = DEFAULT_RESET
        if r.reset is not None:
            self.check_expr(r.reset)
            reset = r.reset
        on = ast.CallAtom()
        if r.on is not None:
            self.check_expr(r.on)
            self.lands_on_calls(r.name.text, "`on`", r.on, r.on.span)
            on = r.on
        failed = ast.And((ast.CallAtom(), ast.StatusAtom("error")))
        earlier = ast.Seen(failed, ast.Binding("call"), reset)
        cond = ast.And((on, earlier))
        return ViolationRule(r.name.text, "repeat_error", w, cond, r.span, failed_call=earlier)

    def rule_blind_destructive(self, r: ast.BlindDestructive) -> ViolationRule:
        w = self.sign("blind_destructive", "weight", self.weight(r.weight), "negative", r.weight.span)
        on, inspected = DEFAULT_DESTRUCTIVE, DEFAULT_INSPECTED
        if r.on is not None:
            self.check_expr(r.on)
            self.lands_on_calls(r.name.text, "`on`", r.on, r.on.span)
            on = r.on
        if r.inspected_by is not None:
            self.check_expr(r.inspected_by)
            inspected = r.inspected_by
        target = ast.Binding("target")
        matched = tools_of(self.universe.possible(on))
        destructive = [t for t in matched if self.tools[t].target]
        if self.tools and not matched and not self.rule_has_errors():
            carries = (
                "the tag 'destructive', or 'write' without 'additive'"
                if r.on is None
                else "a tool its `on` condition matches"
            )
            self.warn(
                "RV210",
                f"rule {quoted(r.name.text)} can never fire: no declared tool carries {carries}",
                r.name.span,
                "tag the state-changing tools: `tool NAME : write target ARG` (check the tags for typos)"
                if r.on is None
                else "check the tool names and tags of its `on` condition",
            )
        elif self.tools and not destructive:
            self.warn(
                "RV210",
                f"rule {quoted(r.name.text)} can never fire: no write/destructive tool it matches declares a target",
                r.name.span,
                "declare targets: `tool NAME : write target ARG`",
            )
        looked_at = ast.Or((ast.Seen(inspected, target), ast.Seen(inspected, target, returned=True)))
        cond = ast.And((on, ast.HasBinding(target), ast.Not(looked_at)))
        return ViolationRule(r.name.text, "blind_destructive", w, cond, r.span)

    def rule_progress(self, r: ast.Progress) -> ProgressRule:
        w = self.sign("progress", "weight", self.weight(r.weight), "positive", r.weight.span)
        if r.per_unit and r.max is None:
            self.error(
                "RV209",
                f"per-unit progress {quoted(r.name.text)} needs a cap",
                r.weight.span,
                "add one, e.g. `(+0.2 per unit, max 1.0)`: credit must stay bounded",
            )
        if r.max is not None and r.max <= 0:
            self.error("RV209", f"'max' must be positive (got {r.max:g})", r.span)
        return ProgressRule(r.name.text, w, r.signal.text, r.direction, r.per_unit, r.max, r.start, r.span)


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
    checker = _Checker(files, manifests or {})
    ruleset = checker.run()
    return ruleset, checker.diagnostics
