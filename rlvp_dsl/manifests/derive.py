"""Derive a rule file from a tool manifest's category tags (``rlvp-compile --auto-from-tags``).

`derive_rules(manifest)` builds the syntax tree (`ast.RuleFile`); `derive_text(manifest)`
prints it as a commented `.rlvp` file that parses back to the same tree.  What is derived,
from the tags alone (`rlvp_dsl.manifests.formats` explains where tags and targets come from):

1. ``tool`` declarations for every tool, with its tags (sorted) and target.
2. ``repeat_error`` -- always: a call identical to an earlier errored call, with no
   state-changing call between, repeats a known failure.
3. ``violation errored_call { on call error }`` -- always: the environment's error signal
   is the one verifiable process signal every manifest has.
4. ``blind_destructive`` -- when some write/destructive tool has a target and some read
   tool has one too: such a write must follow a successful read-tagged call with the same
   target value.  The rule lists exactly the write/destructive tools that have a target,
   except *additive* writes (tagged ``additive`` and not ``destructive``: MCP's
   ``destructiveHint: false``, "performs only additive updates"), which destroy nothing
   (the header names the writes left out).  A bare ``write`` (tau2, our format) may destroy.
5. ``redundant_read`` -- when some read-only tool is *closed-world* (tagged ``closed_world``:
   MCP's ``openWorldHint: false``): repeating a successful call of such a tool unchanged
   (same tool, same normalised arguments), with no write/destructive call and no user
   message in between, learns nothing new, and costs ``DeriveWeights.redundant_read``.
   A user turn resets it: the user may have changed the state (edited a file), and on
   the tau2 airline trajectories agents that re-read after a user turn succeed as often
   as they fail (docs/results.md).  An open-world read (a
   web fetch) may answer differently each time and is never listed; a call in the same
   message as the first is not a repeat (docs/language.md, "Information order").
6. ``progress`` -- for every progress signal the manifest declares (ours: top-level
   ``signals``, kind ``progress``, with a direction): a call that brings the signal to a new
   best earns ``DeriveWeights.progress`` (once per level: not farmable).  Credit lands on that call.
6a. ``violation S_flagged`` -- for every ``violation`` signal S (a 0/1 flag on each call result,
   1 = the environment judged this call wrong: BFCL's ``off_path``): ``on call signal S == 1``
   costs ``DeriveWeights.flagged``, landing on the flagged call.  A call that does not report S
   (or reports 0) costs nothing.
6b. For every ``done`` signal S (a 0/1 flag on each call result, 1 = the user's current request
   would be satisfied if the agent answered now: BFCL's ``turn_passing``), two rules:

   * ``obligation answer_when_done (+DeriveWeights.done_answer, expire 0)``: opened by a call
     reporting S == 1; discharged by an assistant turn when no call reporting S == 0 has been
     seen since the last call reporting S == 1 (the request is still done when the agent
     answers); deadline ``before user``.  The credit lands on the answer.  Not farmable: no
     ``same`` key, so one instance at a time (a second done call while one is open opens
     nothing); each instance is discharged at most once and only by an answer (a call never
     discharges it; a copied answer finds no open instance); an instance not discharged when
     the next user message arrives (or the episode ends) expires unpaid, with penalty 0, so
     a done call the agent then breaks or never answers costs nothing and earns nothing.
   * ``violation answer_not_done (DeriveWeights.answer_not_done)``: ``on assistant unless seen
     (call signal S == 1 since user)``: answering a request when no call since the user's
     message reported it done.  Lands on the answer.  Its limit: a request that needs no call
     can never be reported done by a call signal, so every answer to it is penalised -- do not
     declare a ``done`` signal for an environment with such requests (BFCL: 3 of the 734 user
     turns of ``multi_turn_base``).  A flag that stays 0 once an earlier request failed (BFCL's
     ``turn_passing`` does) makes every later answer of the episode an undone answer.

   With several done signals the rules are named with the signal (``answer_when_done_S``,
   ``answer_not_done_S``).
7. An obligation to verify writes -- only when a ``verify`` or ``test`` tag exists (and a
   write tool): opened by each write-tagged call, discharged by a successful verify/test
   call, due before the next ``submit``-tagged call (``verify_before_submit``) or, without
   a submit tag, at episode end (``verify_after_write``).  It is bound with ``same target``
   when every write-tagged and every verify-tagged tool has a target.  In particular, an
   obligation to *read back* a target after writing it is NOT derived unless a verify tag
   exists: a read tool is not evidence that the write did what was intended.

Tools on a non-agent side (tau2 telecom's user phone tools, tagged ``user_side``) are
left out of the rules' triggers: their calls are made by the user simulator, and credit
must land on the agent's own actions.

All weights are process weights, kept small next to an outcome reward of 1 (the
defaults of `DeriveWeights`); the trainer anneals them further.
"""

from __future__ import annotations

import os

import attrs

from .. import ast
from ..syntax.printer import print_item
from ..tools import ToolSpec
from .formats import Manifest
from .signals import SignalSpec

_WRITE = ("write", "destructive")
_VERIFY = ("verify", "test")
_SUBMIT = "submit"


def _negative(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value < 0:
        raise ValueError(f"'{attribute.name}' must be negative (got {value})")


def _positive(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value > 0:
        raise ValueError(f"'{attribute.name}' must be positive (got {value})")


@attrs.frozen
class DeriveWeights:
    """Weights of the derived rules, in units of the outcome reward (success = 1)."""

    repeat_error: float = attrs.field(default=-0.1, validator=_negative)
    """Per call that repeats an errored call unchanged (no state change between)."""

    errored_call: float = attrs.field(default=-0.1, validator=_negative)
    """Per call whose result is an error; small, since exploring can legitimately fail."""

    blind_destructive: float = attrs.field(default=-0.2, validator=_negative)
    """Per write/destructive call whose target was not read successfully first: the
    largest penalty, as acting on an unseen object is the costliest process mistake."""

    redundant_read: float = attrs.field(default=-0.05, validator=_negative)
    """Per repeat of a successful closed-world read, unchanged, with no write since: half a
    failed call, as the repeat wastes a step but breaks nothing."""

    verify_credit: float = attrs.field(default=0.1, validator=_positive)
    """Credit on the call that verifies (discharges) a write."""

    verify_expire: float = attrs.field(default=-0.1, validator=_negative)
    """Penalty where a write is left unverified at its deadline."""

    flagged: float = attrs.field(default=-0.1, validator=_negative)
    """Per call a declared ``violation`` signal flags (1): as much as a failed call -- the
    environment says the call was wrong, not that the episode is lost."""

    done_answer: float = attrs.field(default=0.1, validator=_positive)
    """Credit on the answer that closes a request a ``done`` signal reported satisfied:
    small, as the environment's outcome (and a progress signal) already pays the result."""

    answer_not_done: float = attrs.field(default=-0.3, validator=_negative)
    """Per answer with no call since the user's message that a ``done`` signal reported
    satisfied: larger than a failed call's cost, so that trying is cheaper than not trying."""

    progress: float = attrs.field(default=1.0, validator=_positive)
    """Credit per new best value of a declared progress signal (a stage done): the
    positive counterweight that keeps a rule set of penalties from rewarding inaction.
    As large as the outcome, like the hand-written chain rules' +1 per stage: the
    environment itself vouches for each level (docs/results.md, "derived rules").
    Paid once per level reached (returning to an old value earns nothing), so it
    cannot be farmed."""


@attrs.frozen
class _Derived:
    """One derived item with the one-line comment printed above it ('' for none)."""

    item: ast.Item
    comment: str = ""


def _n(text: str) -> ast.Name:
    return ast.Name(text)


def _w(value: float) -> ast.Weight:
    return ast.Weight(float(value))


def _and(*items: ast.Expr) -> ast.Expr:
    flat = tuple(i for i in items if i is not None)
    return flat[0] if len(flat) == 1 else ast.And(flat)


def _any_tag(tags: list[str]) -> ast.Expr:
    atoms = tuple(ast.TagAtom(_n(t)) for t in tags)
    return atoms[0] if len(atoms) == 1 else ast.Or(atoms)


def _side_tags(tools: tuple[ToolSpec, ...]) -> list[str]:
    """Tags that mark a non-agent side (``user_side``)."""
    return sorted({t for spec in tools for t in spec.tags if t.endswith("_side")})


def _is_write(spec: ToolSpec) -> bool:
    return any(t in spec.tags for t in _WRITE)


def _is_additive(spec: ToolSpec) -> bool:
    """A write the manifest says destroys nothing (MCP ``destructiveHint: false``)."""
    return "additive" in spec.tags and "destructive" not in spec.tags


def _is_closed_read(spec: ToolSpec) -> bool:
    """A read-only tool whose answer changes only through the episode's own writes (MCP ``openWorldHint: false``)."""
    return "read" in spec.tags and not _is_write(spec) and "closed_world" in spec.tags and "open_world" not in spec.tags


def _about(signal: SignalSpec) -> str:
    return f" ({signal.description})" if signal.description else ""


def _flag(signal: SignalSpec, value: float) -> ast.Expr:
    """``call signal S == value``."""
    return _and(ast.CallAtom(), ast.SignalTest(_n(signal.name), "==", float(value)))


def _flagged(signal: SignalSpec, weights: DeriveWeights, not_side: list[ast.Not]) -> _Derived:
    """``violation S_flagged { on call signal S == 1 }`` for a ``violation`` signal."""
    on = _and(ast.CallAtom(), ast.SignalTest(_n(signal.name), "==", 1.0), *not_side)
    return _Derived(
        ast.Violation(_n(f"{signal.name}_flagged"), _w(weights.flagged), on),
        f"the environment's declared violation signal {signal.name}"
        + _about(signal)
        + ": a call it flags (== 1) was judged wrong by the environment, and costs a little",
    )


def _done(signal: SignalSpec, weights: DeriveWeights, suffix: str) -> list[_Derived]:
    """The obligation paying the answer that closes a done request, and the penalty on an answer
    no call reported done (module docstring, 6b)."""
    done, undone = _flag(signal, 1), _flag(signal, 0)
    still_done = ast.Not(ast.Seen(undone, None, done))
    return [
        _Derived(
            ast.Obligation(
                _n(f"answer_when_done{suffix}"),
                _w(weights.done_answer),
                _w(0.0),
                done,
                _and(ast.KindAtom("assistant"), still_done),
                None,
                ast.Deadline("before", ast.KindAtom("user")),
            ),
            f"the environment's declared done signal {signal.name}"
            + _about(signal)
            + ": the answer that closes a request a call reported done (== 1), with no call reporting it undone"
            " (== 0) since, earns credit. Not farmable: one instance at a time (no key), discharged at most once"
            " and only by an answer, expired unpaid (expire 0) at the next user message",
        ),
        _Derived(
            ast.Violation(
                _n(f"answer_not_done{suffix}"),
                _w(weights.answer_not_done),
                ast.KindAtom("assistant"),
                ast.Seen(done, None, ast.KindAtom("user")),
            ),
            f"answering when no call since the user's message reported {signal.name} == 1 costs more than a"
            " failed call (a request that needs no call can never be reported done by a call signal: declare"
            " no done signal for an environment with such requests)",
        ),
    ]


def _derive(manifest: Manifest, weights: DeriveWeights) -> tuple[list[_Derived], list[str]]:
    """The items (with comments) and the header notes about what was not derived."""
    tools = manifest.tools
    items: list[_Derived] = []
    skipped: list[str] = []
    for spec in tools:
        items.append(
            _Derived(
                ast.ToolDecl(
                    _n(spec.name),
                    tuple(_n(t) for t in sorted(spec.tags)),
                    _n(spec.target) if spec.target is not None else None,
                    None,
                )
            )
        )

    sides = _side_tags(tools)
    agent = [s for s in tools if not any(t in s.tags for t in sides)]
    not_side = [ast.Not(ast.TagAtom(_n(t))) for t in sides]
    present = {t for s in agent for t in s.tags}

    items.append(
        _Derived(
            ast.RepeatError(
                _n("repeat_error"), _w(weights.repeat_error), on=_and(ast.CallAtom(), *not_side) if not_side else None
            ),
            "repeating a call that just failed, unchanged, repeats a known failure",
        )
    )

    items.append(
        _Derived(
            ast.Violation(
                _n("errored_call"), _w(weights.errored_call), _and(ast.CallAtom(), ast.StatusAtom("error"), *not_side)
            ),
            "the environment's error signal: every failed tool call costs a little",
        )
    )

    targeted = [s for s in agent if _is_write(s) and s.target is not None]
    writes = [s for s in targeted if not _is_additive(s)]
    additive = [s.name for s in targeted if _is_additive(s)]
    reads = [s for s in agent if "read" in s.tags and not _is_write(s) and s.target is not None]
    if additive and reads:
        skipped.append(
            "additive writes (MCP destructiveHint: false) left out of blind_destructive: " + ", ".join(additive)
        )
    if writes and reads:
        items.append(
            _Derived(
                ast.BlindDestructive(
                    _n("blind_destructive"),
                    _w(weights.blind_destructive),
                    ast.CallAtom(tuple(_n(s.name) for s in writes)),
                    _and(ast.CallAtom(), ast.TagAtom(_n("read")), ast.StatusAtom("ok")),
                ),
                "changing an object the agent has not looked at: each write with a target needs a successful read of it first",
            )
        )
    elif writes or additive:
        skipped.append("no blind_destructive rule: no read tool has a target")
    else:
        skipped.append("no blind_destructive rule: no write/destructive tool has a target")

    closed = [s for s in agent if _is_closed_read(s)]
    if closed:
        changing = [t for t in _WRITE if any(t in s.tags for s in tools)]
        user = ast.KindAtom("user")  # the other actor: between turns the user may change the state (edit a file)
        since = ast.Or((_and(ast.CallAtom(), _any_tag(changing)), user)) if changing else user
        repeat = ast.Seen(_and(ast.CallAtom(), ast.StatusAtom("ok")), ast.Binding("call"), since)
        items.append(
            _Derived(
                ast.Violation(
                    _n("redundant_read"),
                    _w(weights.redundant_read),
                    _and(ast.CallAtom(tuple(_n(s.name) for s in closed)), repeat),
                ),
                "asking a closed-world read-only tool the same question again, with nothing written since, learns nothing",
            )
        )

    done_signals = [s for s in manifest.signals if s.kind == "done"]
    for signal in manifest.signals:
        if signal.kind == "violation":
            items.append(_flagged(signal, weights, not_side))
        elif signal.kind == "done":
            items += _done(signal, weights, f"_{signal.name}" if len(done_signals) > 1 else "")
        else:
            items.append(
                _Derived(
                    ast.Progress(
                        _n(f"progress_{signal.name}"), _w(weights.progress), _n(signal.name), signal.direction
                    ),
                    f"the environment's declared progress signal: {signal.name} reaching a new best"
                    + _about(signal)
                    + " earns credit, once per level",
                )
            )

    verify_tags = [t for t in _VERIFY if t in present]
    write_tools = [s for s in agent if "write" in s.tags]
    if verify_tags and write_tools:
        verifiers = [s for s in agent if any(t in s.tags for t in verify_tags)]
        bound = all(s.target is not None for s in write_tools + verifiers)
        submit = _SUBMIT in present
        name = "verify_before_submit" if submit else "verify_after_write"
        deadline = (
            ast.Deadline("before", _and(ast.CallAtom(), ast.TagAtom(_n(_SUBMIT)))) if submit else ast.Deadline("end")
        )
        items.append(
            _Derived(
                ast.Obligation(
                    _n(name),
                    _w(weights.verify_credit),
                    _w(weights.verify_expire),
                    _and(ast.CallAtom(), ast.TagAtom(_n("write")), *not_side),
                    _and(ast.CallAtom(), _any_tag(verify_tags), ast.StatusAtom("ok")),
                    ast.Binding("target") if bound else None,
                    deadline,
                ),
                "every write must be verified ("
                + " or ".join(f"tag {t}" for t in verify_tags)
                + ") "
                + ("before the next submit" if submit else "by the end of the episode")
                + (", on the same target" if bound else ""),
            )
        )
    elif write_tools:
        skipped.append(
            "no verify obligation: no tool is tagged verify or test "
            "(reading back after a write is not derived without one)"
        )
    return items, skipped


def _default_path(manifest: Manifest) -> str:
    return os.path.splitext(os.path.basename(manifest.path))[0] + ".rlvp"


def derive_rules(
    manifest: Manifest, *, weights: DeriveWeights = DeriveWeights(), path: str | None = None
) -> ast.RuleFile:
    """The derived rule file as a syntax tree (`path` defaults to ``<manifest stem>.rlvp``)."""
    items, _ = _derive(manifest, weights)
    return ast.RuleFile(path or _default_path(manifest), tuple(d.item for d in items))


#: How the first line of a derived rule file begins: `rlvp-compile -o` replaces such a file, not a hand-written one.
DERIVED_HEADER = "# generated by rlvp-compile --auto-from-tags"


def is_derived_file(path: str) -> bool:
    """Whether the file at `path` was written by `rlvp-compile --auto-from-tags` (its first line is the header).

    A file that cannot be read, or is not UTF-8 text, is not derived."""
    try:
        with open(path, "rb") as fh:
            first = fh.readline(4096)
    except OSError:
        return False
    return first.decode("utf-8-sig", errors="replace").startswith(DERIVED_HEADER)


def derive_text(
    manifest: Manifest, *, weights: DeriveWeights = DeriveWeights(), drop: dict[str, str] | None = None
) -> str:
    """The derived rule file as commented `.rlvp` text (parses back to `derive_rules(manifest)`).

    `drop` maps names of derived rules to leave out to the reason (said in the header)."""
    items, skipped = _derive(manifest, weights)
    drop = drop or {}
    items = [d for d in items if not (isinstance(d.item, ast.RULE_TYPES) and d.item.name.text in drop)]
    skipped = skipped + [f"left out {name}: {why}" for name, why in drop.items()]
    lines = [
        f"{DERIVED_HEADER} from {manifest.path}",
        f"# manifest format: {manifest.format}, {len(manifest.tools)} tools",
    ]
    lines += [f"# {note}" for note in manifest.notes]
    lines += [f"# {note}" for note in skipped]
    lines.append("")
    previous_rule = False
    for derived in items:
        is_rule = isinstance(derived.item, ast.RULE_TYPES)
        if is_rule or previous_rule:
            lines.append("")
        if derived.comment:
            lines.append(f"# {derived.comment}")
        lines.append(print_item(derived.item))
        previous_rule = is_rule
    from ..syntax.fmt import format_source

    # the formatter's layout (aligned tool tables, long conditions wrapped), as `rlvp-compile --fmt` leaves it
    return format_source("\n".join(lines) + "\n", path=manifest.path)
