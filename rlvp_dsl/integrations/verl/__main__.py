"""``python -m rlvp_dsl.integrations.verl --check``: is rlvp registered where verl looks?

verl swallows a plugin's import error at debug level, so a broken install shows up only
as "Unknown advantage estimator simply: rlvp_token" (or an unknown reward manager, or an
agent loop "not registered") deep into a run.  The check makes that failure loud, in
this order:

1. the ``verl.plugins`` entry point ``rlvp`` is installed (`importlib.metadata`);
2. ``VERL_USE_EXTERNAL_PLUGINS`` does not keep verl from loading it;
3. a fresh Python process that runs only ``import verl`` -- what every Ray worker does --
   ends up with each piece in verl's registry (the process reports what it holds, and
   why our module failed to import when it did);
4. the same in this process, and each registry entry is rlvp's object;
5. the verl version is the tested one (a warning otherwise, not a failure).

Exit codes (`rlvp_dsl.cli`): 0 all registered, 1 a piece is missing (the message names
it), 2 usage.  ``--json`` prints the report as one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any

from rlvp_dsl.cli import EXIT_INPUT_ERRORS, EXIT_OK, EXIT_USAGE
from rlvp_dsl.cli.options import ArgumentParser

from . import REGISTRATION_ERRORS
from ._registry import PIECES, VERL_VERSION, expected, held

GROUP, ENTRY, MODULE = "verl.plugins", "rlvp", "rlvp_dsl.integrations.verl"
PROBE_TIMEOUT_S = 180

# Runs in a fresh interpreter: import verl only (as a Ray worker does), report the registries.
_PROBE = r"""
import json, sys, traceback
out = {}
import verl
out["verl"] = getattr(verl, "__version__", "?")
out["loaded_by_import_verl"] = %(module)r in sys.modules
if not out["loaded_by_import_verl"]:
    try:
        import %(module)s
    except Exception as exc:
        out["import_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
from rlvp_dsl.integrations.verl._registry import PIECES, held
out["held"] = {p.name: held(p) for p in PIECES}
mod = sys.modules.get(%(module)r)
out["registration_errors"] = dict(getattr(mod, "REGISTRATION_ERRORS", {}) or {})
print("RLVP-PROBE " + json.dumps(out))
""" % {"module": MODULE}


def _entry_point() -> str | None:
    for ep in entry_points(group=GROUP):
        if ep.name == ENTRY:
            return ep.value
    return None


def _probe() -> dict[str, Any]:
    """What a fresh ``import verl`` registers (run in a subprocess)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=dict(os.environ),
        )
    except subprocess.TimeoutExpired:
        return {"error": f"a fresh `import verl` did not finish within {PROBE_TIMEOUT_S} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RLVP-PROBE "):
            return json.loads(line[len("RLVP-PROBE ") :])
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"a fresh `import verl` failed (exit {proc.returncode}): {tail}"}


def check() -> dict[str, Any]:
    """The report: ``ok``, ``errors`` (one sentence each, naming the piece), ``warnings``,
    and what is registered where."""
    import verl

    errors: list[str] = []
    warnings: list[str] = []
    value = _entry_point()
    if value != MODULE:
        errors.append(
            f"entry point: {GROUP} '{ENTRY}' must point at {MODULE} (got {value!r}); "
            "reinstall the project with its verl extra: pip install -e '.[verl]'"
        )
    policy = os.environ.get("VERL_USE_EXTERNAL_PLUGINS", "auto").strip().lower()
    modules = [m.strip() for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m.strip()]
    allowed = policy == "auto" or ENTRY in {p.strip() for p in policy.split(",")}
    if not allowed and MODULE not in modules:
        errors.append(
            f"entry point: VERL_USE_EXTERNAL_PLUGINS={policy!r} keeps verl from loading '{ENTRY}'; "
            f"unset it, add '{ENTRY}' to it, or set VERL_USE_EXTERNAL_MODULES={MODULE}"
        )
    probe = _probe()
    if "error" in probe:
        errors.append(f"worker view: {probe['error']}")
    elif not probe.get("loaded_by_import_verl"):
        why = probe.get("import_error") or "it was not imported"
        errors.append(f"worker view: `import verl` did not load {MODULE}: {why}")
    pieces = []
    for piece in PIECES:
        here, there = held(piece), (probe.get("held") or {}).get(piece.name)
        want = expected(piece)
        row = {
            "kind": piece.kind,
            "name": piece.name,
            "registry": piece.registry,
            "object": here,
            "worker_view": there,
            "config": piece.config,
        }
        pieces.append(row)
        failure = REGISTRATION_ERRORS.get(piece.name) or (probe.get("registration_errors") or {}).get(piece.name)
        if here != want:
            reason = failure or (f"the name is taken by {here}" if here else "it is not in the registry")
            errors.append(f"{piece.kind} '{piece.name}': not registered in {piece.registry}: {reason}")
        elif "error" not in probe and there != want:
            errors.append(
                f"{piece.kind} '{piece.name}': a fresh `import verl` does not register it "
                f"(holds {there!r}){': ' + failure if failure else ''}"
            )
    version = getattr(verl, "__version__", "?")
    if version != VERL_VERSION:
        warnings.append(
            f"verl {version} is installed; rlvp's verl integration is tested with {VERL_VERSION} "
            f"(the verl extra pins it)"
        )
    return {
        "ok": not errors,
        "verl": version,
        "tested_with": VERL_VERSION,
        "entry_point": f"{GROUP}: {ENTRY} = {value}",
        "loaded_by_import_verl": probe.get("loaded_by_import_verl"),
        "pieces": pieces,
        "errors": errors,
        "warnings": warnings,
    }


def render(report: dict[str, Any]) -> str:
    """The report as text: a verdict line, then the pieces, then the errors."""
    lines = [
        f"rlvp verl plugin: {'ok' if report['ok'] else 'FAILED'} "
        f"(verl {report['verl']}, tested with {report['tested_with']})",
        f"  entry point          {report['entry_point']}"
        + ("  (loaded by a fresh `import verl`)" if report["loaded_by_import_verl"] else ""),
    ]
    for p in report["pieces"]:
        lines.append(f"  {p['kind']:<20} {p['name']:<16} {p['registry']}  ->  {p['object'] or '(missing)'}")
    lines.append("  select with: " + " | ".join(p["config"] for p in report["pieces"]))
    lines += [f"warning: {w}" for w in report["warnings"]]
    lines += [f"error: {e}" for e in report["errors"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="python -m rlvp_dsl.integrations.verl",
        description="Check that rlvp's verl plugin is registered where verl looks.",
    )
    parser.add_argument(
        "--check", action="store_true", help="verify the registrations (in this process and in a fresh `import verl`)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: nothing to do (give --check)", file=sys.stderr)
        return EXIT_USAGE
    report = check()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(render(report), file=sys.stdout if report["ok"] else sys.stderr)
    return EXIT_OK if report["ok"] else EXIT_INPUT_ERRORS


if __name__ == "__main__":
    from rlvp_dsl.cli import console

    console(main)
