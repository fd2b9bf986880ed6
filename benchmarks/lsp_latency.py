"""rlvp-lsp latency: re-checking a 1,000-line rule file after a one-character edit.

The real server (``python -m rlvp_dsl.lsp``) over stdio, driven by pygls's `LanguageClient`: the
file is opened, then `--edits` one-character edits are sent (``didChange``, incremental: a weight's
digit typed over, alternately 1 and 2, so every edit changes the text and keeps it valid); each
edit's latency is the time from sending it to receiving the diagnostics published for that version
(the server re-checks the whole rule set: parse, check, lints).  Printed: the median and the 90th
percentile in ms, the same check in-process (`check_text` alone, with the server's incremental parse, no protocol), the goal (< 50 ms),
and the machine's load average (a shared machine's clock runs ahead of its CPU).

    python benchmarks/lsp_latency.py                    # 1,000 lines, 25 edits
    python benchmarks/lsp_latency.py --lines 5000 --edits 40
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

#: The goal of issue 21: a one-character edit of a 1,000-line file re-checked in under this many ms.
GOAL_MS = 50.0

#: One block of the generated file (7 lines): two tools, a violation, an obligation.
_BLOCK = (
    "tool get_item_{i} : read target item_id",
    "tool delete_item_{i} : write, destructive target item_id",
    "violation blind_delete_{i} (PENALTY) {{",
    "  on call delete_item_{i} unless seen (call get_item_{i} same target)",
    "}}",
    "obligation check_{i} (+0.0001, expire -0.0002) {{ open on call delete_item_{i} discharge on call get_item_{i} same target }}",
    "",
)


def rule_file(lines: int) -> str:
    """A valid rule file of exactly `lines` lines: a constant, then blocks of tools and rules."""
    out = ["const PENALTY = -0.001", ""]
    i = 0
    while len(out) + len(_BLOCK) <= lines:
        out += [line.format(i=i) for line in _BLOCK]
        i += 1
    out += ["# end"] * (lines - len(out))
    return "\n".join(out) + "\n"


async def measure(text: str, edits: int, path: str) -> list[float]:
    """Milliseconds from each edit sent to its diagnostics received."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("lsp-latency", "1")
    arrived: dict[int, float] = {}
    waiting: dict[int, asyncio.Future[None]] = {}

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def published(ls: LanguageClient, params: types.PublishDiagnosticsParams) -> None:  # `ls`: pygls passes the client
        if params.version is not None and params.version in waiting:
            arrived[params.version] = time.perf_counter()
            if params.diagnostics:
                print(f"unexpected diagnostics: {params.diagnostics[0].message}", file=sys.stderr)
            waiting[params.version].set_result(None)

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": REPO}
    await client.start_io(sys.executable, "-m", "rlvp_dsl.lsp", cwd=REPO, env=env)
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
    client.initialized(types.InitializedParams())
    uri = "file://" + path
    loop = asyncio.get_running_loop()
    waiting[1] = loop.create_future()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "rlvp", 1, text)))
    await waiting[1]
    line = text.split("\n").index(
        "obligation check_0 (+0.0001, expire -0.0002) { open on call delete_item_0 "
        "discharge on call get_item_0 same target }"
    )
    column = len("obligation check_0 (+0.000")
    latencies = []
    for k in range(edits):
        version = k + 2
        waiting[version] = loop.create_future()
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, column), types.Position(line, column + 1)), text=str(1 + k % 2)
        )
        params = types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri), [change]
        )
        sent = time.perf_counter()
        client.text_document_did_change(params)
        await asyncio.wait_for(waiting[version], 60)
        latencies.append((arrived[version] - sent) * 1000)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies


def in_process(text: str, edits: int, path: str) -> list[float]:
    """Milliseconds of the server's check alone (`check_document`: `check_text` with the lints and the
    incremental parse, as the server runs it) on the edited texts."""
    from rlvp_dsl.lsp.diagnostics import check_document

    out = []
    for k in range(edits):
        edited = text.replace("(+0.0001,", f"(+0.000{1 + k % 2},", 1)
        start = time.perf_counter()
        check_document(edited, path)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=1000, help="lines of the generated rule file (default 1000)")
    parser.add_argument("--edits", type=int, default=25, help="one-character edits measured (default 25, at least 20)")
    args = parser.parse_args()
    text = rule_file(args.lines)
    path = os.path.join(REPO, "build", "lsp_latency.rlvp")  # never written: the server checks the text sent
    served = asyncio.run(measure(text, max(args.edits, 20), path))
    alone = in_process(text, max(args.edits, 20), path)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"file: {args.lines} lines, {text.count('violation ')} violations, {text.count('obligation ')} obligations")
    print(f"edits: {len(served)} one-character edits (didChange, incremental)")
    print(
        f"server, edit -> diagnostics: median {statistics.median(served):.1f} ms, "
        f"p90 {statistics.quantiles(served, n=10)[-1]:.1f} ms"
    )
    print(f"in-process check alone:      median {statistics.median(alone):.1f} ms")
    verdict = "met" if statistics.median(served) < GOAL_MS else "NOT met"
    print(f"goal: median < {GOAL_MS:.0f} ms: {verdict}")
    print(f"load average (1, 5, 15 min): {load} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
