// The extension's client side under node:test: the settings -> server command line (editors/vscode/lib/
// server.js, which has no `vscode` import), extension.js parses, and the command the extension builds
// for `python -m rlvp_dsl.lsp` really starts rlvp-lsp over stdio and answers `initialize` and a broken
// document's diagnostics (needs RLVP_PYTHON: a python with the repository and its `lsp` extra; the
// pytest wrapper tests/editors/test_textmate.py sets it).
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import { EXTENSION, ROOT } from "./tokenize.mjs";

const require = createRequire(import.meta.url);
const { DEFAULT_COMMAND, SettingError, serverCommand, startFailureMessage } = require(join(EXTENSION, "lib", "server.js"));

test("the default server command is rlvp-lsp with no arguments", () => {
  assert.equal(DEFAULT_COMMAND, "rlvp-lsp");
  assert.deepEqual(serverCommand({}), { command: "rlvp-lsp", args: [] });
  assert.deepEqual(serverCommand({ path: "  ", args: [] }), { command: "rlvp-lsp", args: [] });
});

test("paths: ~, ${workspaceFolder}, relative to the workspace; arguments expanded too", () => {
  const where = { workspaceFolder: "/ws", home: "/home/me" };
  assert.deepEqual(serverCommand({ path: "~/venv/bin/rlvp-lsp" }, where), { command: "/home/me/venv/bin/rlvp-lsp", args: [] });
  assert.deepEqual(serverCommand({ path: "${workspaceFolder}/.venv/bin/python", args: ["-m", "rlvp_dsl.lsp"] }, where), {
    command: "/ws/.venv/bin/python",
    args: ["-m", "rlvp_dsl.lsp"],
  });
  assert.equal(serverCommand({ path: ".venv/bin/rlvp-lsp" }, where).command, "/ws/.venv/bin/rlvp-lsp");
  // A bare command stays a command looked up on PATH.
  assert.equal(serverCommand({ path: "my-rlvp-lsp" }, where).command, "my-rlvp-lsp");
  assert.deepEqual(serverCommand({ path: "python3", args: ["${userHome}/x"] }, where).args, ["/home/me/x"]);
});

test("wrong settings are one clear message naming the setting", () => {
  assert.throws(() => serverCommand({ path: 3 }), (e) => e instanceof SettingError && /rlvp\.server\.path must be a string/.test(e.message));
  assert.throws(() => serverCommand({ args: "-m rlvp_dsl.lsp" }), (e) => e instanceof SettingError && /rlvp\.server\.args must be a list of strings/.test(e.message));
  assert.throws(() => serverCommand({ path: "${workspaceFolder}/x" }, {}), /no folder is open/);
  const message = startFailureMessage({ command: "rlvp-lsp", args: [] }, new Error("spawn rlvp-lsp ENOENT"));
  assert.match(message, /`rlvp-lsp`: spawn rlvp-lsp ENOENT/);
  assert.match(message, /rlvp\.server\.path/);
});

test("extension.js parses", () => {
  const result = spawnSync(process.execPath, ["--check", join(EXTENSION, "extension.js")], { encoding: "utf8" });
  assert.equal(result.status, 0, result.stderr);
});

/** A minimal LSP peer over a child's stdio: Content-Length framing, requests and notifications. */
function lspPeer(child) {
  let buffer = Buffer.alloc(0);
  const waiting = [];
  const received = [];
  child.stdout.on("data", (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, end).toString("ascii"))[1]);
      if (buffer.length < end + 4 + length) return;
      received.push(JSON.parse(buffer.subarray(end + 4, end + 4 + length).toString("utf8")));
      buffer = buffer.subarray(end + 4 + length);
      for (const w of waiting.splice(0)) w();
    }
  });
  const send = (message) => {
    const body = Buffer.from(JSON.stringify({ jsonrpc: "2.0", ...message }), "utf8");
    child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
    child.stdin.write(body);
  };
  const next = async (predicate) => {
    for (;;) {
      const found = received.find(predicate);
      if (found) return found;
      await new Promise((resolve) => waiting.push(resolve));
    }
  };
  return { send, next };
}

const PYTHON = process.env.RLVP_PYTHON;

test("the command the extension builds starts rlvp-lsp over stdio", { skip: PYTHON ? false : "RLVP_PYTHON is not set", timeout: 20000 }, async () => {
  const cmd = serverCommand({ path: PYTHON, args: ["-m", "rlvp_dsl.lsp"] }, { workspaceFolder: ROOT });
  const child = spawn(cmd.command, cmd.args, { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  try {
    const peer = lspPeer(child);
    peer.send({ id: 1, method: "initialize", params: { processId: process.pid, rootUri: pathToFileURL(ROOT).href, capabilities: {} } });
    const init = await peer.next((m) => m.id === 1);
    assert.ok(init.result, `initialize failed: ${JSON.stringify(init)} ${stderr}`);
    assert.ok(init.result.capabilities.hoverProvider);
    assert.ok(init.result.capabilities.documentFormattingProvider);
    peer.send({ method: "initialized", params: {} });
    const uri = pathToFileURL(join(ROOT, "tests", "editors", "unsaved.rlvp")).href;
    const text = "tool x : read\nviolation v (-0.1) {\n  on call y\n}\n";
    peer.send({ method: "textDocument/didOpen", params: { textDocument: { uri, languageId: "rlvp", version: 1, text } } });
    const published = await peer.next((m) => m.method === "textDocument/publishDiagnostics" && m.params.uri === uri);
    const codes = published.params.diagnostics.map((d) => d.code);
    assert.deepEqual(codes, ["RV201"], JSON.stringify(published.params.diagnostics));
    assert.equal(published.params.diagnostics[0].range.start.line, 2);
    peer.send({ id: 2, method: "shutdown" });
    await peer.next((m) => m.id === 2);
    peer.send({ method: "exit" });
    assert.equal(await exited, 0, stderr);
  } finally {
    child.kill();
  }
});
