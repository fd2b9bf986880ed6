"""The signals a manifest declares: what an environment reports on its events, and what each means
(`SignalSpec`, the kinds ``progress``, ``violation`` and ``done``); `read_signals` reads our format's
top-level ``signals`` list, `BFCL_SIGNALS` are the ones a ``bfcl`` manifest declares.
`rlvp_dsl.manifests.derive` turns each kind into rules (docs/readers.md, "Manifest signals")."""

from __future__ import annotations

from typing import Any

import attrs

from ..diagnostics import did_you_mean
from .bfcl_tags import (
    BFCL_DONE_SIGNAL,
    BFCL_DONE_SIGNAL_DESCRIPTION,
    BFCL_SIGNAL,
    BFCL_SIGNAL_DESCRIPTION,
    BFCL_VIOLATION_SIGNAL,
    BFCL_VIOLATION_SIGNAL_DESCRIPTION,
)
from .records import JsonObject, ManifestError, kind_of, need, shown, tool_name, tool_records

#: The kinds of a declared signal (`SignalSpec.kind`).
SIGNAL_KINDS = ("progress", "violation", "done")


@attrs.frozen
class SignalSpec:
    """A numeric signal the environment reports on its events, and what it means (`kind`):

    * ``progress`` -- a level (``stages_remaining``) whose `direction` (``decreasing`` or
      ``increasing``) means progress;
    * ``violation`` -- a 0/1 flag on each call result: 1 = the environment judged this call
      wrong (BFCL's ``off_path``); `direction` is ``""``;
    * ``done`` -- a 0/1 flag on each call result: 1 = the user's current request would be
      satisfied if the agent answered now (BFCL's ``turn_passing``); `direction` is ``""``.
    """

    name: str
    direction: str
    description: str = ""
    kind: str = "progress"


#: The signals a `bfcl` manifest declares (the BFCL environment's, `trainer.envs.bfcl.env`).
BFCL_SIGNALS = (
    SignalSpec(BFCL_SIGNAL, "increasing", BFCL_SIGNAL_DESCRIPTION),
    SignalSpec(BFCL_VIOLATION_SIGNAL, "", BFCL_VIOLATION_SIGNAL_DESCRIPTION, "violation"),
    SignalSpec(BFCL_DONE_SIGNAL, "", BFCL_DONE_SIGNAL_DESCRIPTION, "done"),
)


def read_signals(data: JsonObject, path: str) -> tuple[SignalSpec, ...]:
    """The top-level ``signals`` list: ``[{"name": "stages_remaining", "direction": "decreasing"},
    {"name": "off_path", "kind": "violation"}, {"name": "turn_passing", "kind": "done"}]``.

    Raises:
        ManifestError: naming the file, the record (``signals[2]``) and the field: an unknown
            ``kind`` (with the closest kind), a ``direction`` on a flag (``violation`` / ``done``),
            a progress signal without one, a ``description`` that is not a string.
    """
    if "signals" not in data:
        return ()
    out: list[SignalSpec] = []
    for record, rec in tool_records(data["signals"], path, "signals"):
        name = tool_name(rec, path, record)
        kind: Any = rec.get("kind", "progress")  # (one of three words, checked below)
        if kind not in SIGNAL_KINDS:
            hint = did_you_mean(kind, SIGNAL_KINDS) if isinstance(kind, str) else ""
            raise ManifestError(
                path,
                f"expected one of {', '.join(repr(k) for k in SIGNAL_KINDS)}, got "
                + ("null" if kind is None else f"{kind_of(kind)} {shown(kind)}")
                + (f" ({hint})" if hint else ""),
                record=record,
                field="kind",
            )
        direction: Any = rec.get("direction")  # (one of two words, checked below)
        if kind == "progress":
            need(
                direction in ("decreasing", "increasing"),
                path,
                record,
                "direction",
                "'decreasing' or 'increasing' (a progress signal needs the direction that means progress)",
                direction,
            )
        elif "direction" in rec:
            raise ManifestError(
                path,
                f"a {kind} signal is a 0/1 flag on each call result and has no direction "
                f"(got {shown(direction)}); leave 'direction' out, or declare kind 'progress'",
                record=record,
                field="direction",
            )
        description = rec.get("description", "")
        need(isinstance(description, str), path, record, "description", "a string", description)
        out.append(SignalSpec(name, direction if kind == "progress" else "", description, kind))
    return tuple(out)
