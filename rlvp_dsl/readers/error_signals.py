"""Where a tool error is recognised: how a tool *result* is told to be an error -- TRL's
``{'error': ...}`` text, tau2's ``error: true`` flag, MCP's ``isError``, verl's and SWE-agent's
messages, an ``Error`` prefix --, one `ErrorSignal` per trajectory format and trainer loop, by
name, in the one table `ERROR_SIGNALS`, and the one resolver of those names (`error_signal`).

The episode builder (`rlvp_dsl.readers.builder`) asks a reader's signal about every result;
a file that cannot be read at all is a `rlvp_dsl.readers.errors.ReaderError` instead."""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

import attrs

from .errors import expected_got

#: The episode meta key listing the tool results whose error flag is not a boolean, one entry each,
#: the record and the field named (``simulations[11].messages[5]: field 'error': expected true or
#: false, got 'yes' (not read as an error)``; `ErrorSignal.odd_flags`); `rlvp-score` notes them.
BAD_ERROR_FLAGS = "bad_error_flags"


def _names(value: Any) -> tuple[str, ...]:
    """A tuple of strings; a single string stays one name (not its characters)."""
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.frozen
class ErrorSignal:
    """How a tool result is recognised as an error.

    A result is an error when ANY of these holds:

    * a flag field is ``true`` -- looked up on the tool message and, for MCP
      ``tools/call`` results, on the result object (``{"content": [...], "isError": true}``);
    * the result text, leading whitespace stripped, starts with one of ``prefixes``;
    * the result text contains one of ``markers`` (plain substring tests, linear time).

    Defaults per format are in :data:`DEFAULT_ERROR_SIGNALS`.  To override, pass
    ``error_signal=ErrorSignal(prefixes=("Error", "ERROR"))`` to a reader (this
    replaces the format's default), or extend the default with
    ``DEFAULT_ERROR_SIGNALS["openai"].extended(prefixes=("Failed",))``.  The CLI's
    ``--error-prefix`` / ``--error-flag`` map onto ``prefixes`` / ``flags``.

    Attributes:
        flags: boolean field names (``error``, ``isError``).
        prefixes: text prefixes (``Error``).
        markers: substrings anywhere in the text (``Traceback (most recent call last)``).
        case_sensitive: when false, prefixes and markers match ignoring case.
    """

    flags: tuple[str, ...] = attrs.field(default=(), converter=_names)
    prefixes: tuple[str, ...] = attrs.field(default=(), converter=_names)
    markers: tuple[str, ...] = attrs.field(default=(), converter=_names)
    case_sensitive: bool = True

    def extended(
        self, flags: Iterable[str] = (), prefixes: Iterable[str] = (), markers: Iterable[str] = ()
    ) -> "ErrorSignal":
        """A copy with more flags, prefixes and markers (duplicates dropped)."""

        def merge(old: tuple[str, ...], new: Iterable[str]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*old, *new)))

        return attrs.evolve(
            self,
            flags=merge(self.flags, flags),
            prefixes=merge(self.prefixes, prefixes),
            markers=merge(self.markers, markers),
        )

    def flagged(self, *records: Any) -> bool:
        """True when one of ``records`` (dicts) has a flag field set to ``true`` (JSON ``true`` only:
        see `odd_flags`)."""
        for record in records:
            if isinstance(record, dict):
                for name in self.flags:
                    if record.get(name) is True:
                        return True
        return False

    def text_matches(self, text: str) -> bool:
        """True when ``text`` starts with a prefix or contains a marker."""
        if not (self.prefixes or self.markers):
            return False
        if not self.case_sensitive:
            text = text.lower()
        head = text.lstrip()
        for prefix in self.prefixes:
            if head.startswith(prefix if self.case_sensitive else prefix.lower()):
                return True
        for marker in self.markers:
            if (marker if self.case_sensitive else marker.lower()) in text:
                return True
        return False

    def is_error(self, text: str, *records: Any) -> bool:
        """True when the result (its text and its raw records) signals an error: `flagged` or
        `text_matches` (written out: the readers ask once per tool result).  Only a flag of JSON
        ``true`` is an error; any other value is not read as one (the readers name it: `odd_flags`)."""
        flags = self.flags
        if flags:
            for record in records:
                if isinstance(record, dict):
                    for name in flags:
                        if record.get(name) is True:
                            return True
        return bool(self.prefixes or self.markers) and self.text_matches(text)

    def odd_flags(self, *records: Any) -> list[str]:
        """The flag fields of a tool result's `records` (the tool message first, then the records
        inside it: an MCP result) that are not booleans, each worded for a note:
        ``field 'error': expected true or false, got 'yes' (not read as an error)``; a field of a
        record inside the message is named ``content.<name>``.  ``null`` is an absent flag.

        Semantics (docs/readers.md, "When a tool result is an error"): only JSON ``true`` marks an
        error; ``"true"``, ``1`` or ``"yes"`` are not guessed at -- the call is scored by its text
        alone, and `rlvp-score` notes the field."""
        out = []
        for k, record in enumerate(records):
            if isinstance(record, dict):
                for name in self.flags:
                    value = record.get(name)
                    if value is not None and value is not True and value is not False:
                        field = name if k == 0 else f"content.{name}"
                        out.append(f"field {field!r}: {expected_got('true or false', value)} (not read as an error)")
        return out


#: Observation markers of a failed SWE-agent command (substrings, case-sensitive).
SWE_AGENT_MARKERS = (
    "Traceback (most recent call last)",
    "command not found",
    "Your proposed edit has introduced new syntax error",
    "No such file",  # "No such file or directory", "No such file: x"
    "syntax error near unexpected token",
    "Permission denied",
    "Is a directory",
    "cannot access",
    "Segmentation fault",
    "No file open. Use the open command first.",
    "Usage: ",
)

#: Every error signal, by name (docs/readers.md lists them): one per trajectory format
#: (each format's default) and one per trainer loop:
#:
#: * ``tau2`` -- an ``error: true`` flag on the tool message;
#: * ``tau_bench_v1`` -- an ``Error`` prefix;
#: * ``openai`` -- the chat default: an ``error``/``isError`` flag or an ``Error`` prefix;
#: * ``swe_agent`` -- the markers of a failed command (`SWE_AGENT_MARKERS`);
#: * ``trl`` -- TRL's GRPOTrainer (1.x) writes a failed tool as the Python repr of a dict,
#:   ``{'error': "multiply() got an unexpected keyword argument 'x'"}`` or
#:   ``{'error': 'Tool divide not found.'}`` (and JSON ``{"error": ...}`` from user tools);
#: * ``verl`` -- verl's tool agent loop (0.9): ``Unknown function 'NAME'. Available tools: [...]``,
#:   ``Invalid JSON in arguments for 'NAME': ...``, ``Error executing tool 'NAME': ...``, and the
#:   ``Error...`` texts tools return themselves;
#: * ``mcp`` -- an MCP ``tools/call`` result with ``isError`` (or ``is_error``) true.
ERROR_SIGNALS: Mapping[str, ErrorSignal] = {
    "tau2": ErrorSignal(flags=("error",)),
    "tau_bench_v1": ErrorSignal(prefixes=("Error",)),
    "openai": ErrorSignal(flags=("error", "isError", "is_error"), prefixes=("Error",)),
    "swe_agent": ErrorSignal(markers=SWE_AGENT_MARKERS),
    "trl": ErrorSignal(flags=("error", "isError", "is_error"), prefixes=("{'error':", '{"error":', "Error")),
    "verl": ErrorSignal(
        flags=("isError", "is_error"), prefixes=("Unknown function '", "Invalid JSON in arguments for '", "Error")
    ),
    "mcp": ErrorSignal(flags=("isError", "is_error")),
}

#: The error signal each trajectory format uses unless the caller passes its own (entries of `ERROR_SIGNALS`).
DEFAULT_ERROR_SIGNALS: Mapping[str, ErrorSignal] = {
    fmt: ERROR_SIGNALS[fmt] for fmt in ("tau2", "tau_bench_v1", "openai", "swe_agent")
}


def error_signal(signal: "ErrorSignal | str | None", default: str = "openai") -> ErrorSignal:
    """An `ErrorSignal`, or one of `ERROR_SIGNALS` by name; None gives `default`'s.

    The one resolver of error-signal names: every API that takes ``error_signal=`` (the file
    readers, `episode_from_messages`, TRL's `RlvpReward`, verl's settings) goes through it.

    Raises:
        ValueError: an unknown name (the message lists the known ones and, for a near miss,
            says which was meant).
        TypeError: neither an `ErrorSignal`, a name nor None.
    """
    if isinstance(signal, ErrorSignal):
        return signal
    name = default if signal is None else signal
    if not isinstance(name, str):
        raise TypeError(
            f"error_signal must be an ErrorSignal or one of {', '.join(ERROR_SIGNALS)} "
            f"(got {type(name).__name__} {name!r})"
        )
    if name not in ERROR_SIGNALS:
        close = difflib.get_close_matches(name, list(ERROR_SIGNALS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"unknown error signal {name!r}{hint}: expected an ErrorSignal or one of {', '.join(ERROR_SIGNALS)}"
        )
    return ERROR_SIGNALS[name]
