"use strict";
// How the extension finds the language server: the settings `rlvp.server.path` and `rlvp.server.args`
// made into the command line it launches over stdio.  No `vscode` import, so node tests run it as is
// (tests/editors/test_textmate.mjs).

const os = require("os");
const path = require("path");

/** The default server command: `rlvp-lsp` on PATH (pip install -e '.[lsp]' puts it in the venv's bin). */
const DEFAULT_COMMAND = "rlvp-lsp";

/** A user mistake in the settings, shown as one message naming the setting (never a stack trace). */
class SettingError extends Error {}

/**
 * Expand `~` and `${workspaceFolder}` / `${userHome}` in one setting value.
 * @param {string} value
 * @param {{workspaceFolder?: string, home?: string}} where
 * @returns {string}
 */
function expand(value, where) {
  const home = where.home ?? os.homedir();
  let out = value.replace(/^~(?=$|[\\/])/, home).replace(/\$\{userHome\}/g, home);
  if (out.includes("${workspaceFolder}")) {
    if (!where.workspaceFolder) {
      throw new SettingError(`rlvp.server.path / rlvp.server.args use \${workspaceFolder}, but no folder is open`);
    }
    out = out.replace(/\$\{workspaceFolder\}/g, where.workspaceFolder);
  }
  return out;
}

/**
 * The command line that starts the server.
 *
 * @param {{path?: unknown, args?: unknown}} settings the values of `rlvp.server.path` (a command on PATH,
 *   or a file path; a relative path with a slash is taken from the first workspace folder) and
 *   `rlvp.server.args` (a list of strings); undefined or "" means the default `rlvp-lsp`, no arguments.
 * @param {{workspaceFolder?: string, home?: string}} [where] the first workspace folder, the home folder.
 * @returns {{command: string, args: string[]}}
 * @throws {SettingError} when a setting has the wrong type, or uses ${workspaceFolder} with no folder open.
 */
function serverCommand(settings, where = {}) {
  const rawPath = settings.path ?? "";
  if (typeof rawPath !== "string") {
    throw new SettingError(`rlvp.server.path must be a string (a command or a file), not ${JSON.stringify(rawPath)}`);
  }
  const rawArgs = settings.args ?? [];
  if (!Array.isArray(rawArgs) || !rawArgs.every((a) => typeof a === "string")) {
    throw new SettingError(`rlvp.server.args must be a list of strings, not ${JSON.stringify(rawArgs)}`);
  }
  let command = rawPath.trim() === "" ? DEFAULT_COMMAND : expand(rawPath.trim(), where);
  const isPath = command.includes("/") || command.includes("\\");
  if (isPath && !path.isAbsolute(command) && where.workspaceFolder) {
    command = path.join(where.workspaceFolder, command);
  }
  return { command, args: rawArgs.map((a) => expand(a, where)) };
}

/**
 * The message shown when the server cannot start: what was run, and the setting to change.
 * @param {{command: string, args: string[]}} cmd
 * @param {unknown} error what the start rejected with
 * @returns {string}
 */
function startFailureMessage(cmd, error) {
  const what = [cmd.command, ...cmd.args].join(" ");
  const why = error instanceof Error ? error.message : String(error);
  return (
    `rlvp: the language server did not start (\`${what}\`: ${why}). ` +
    "Install it with pip install -e '.[lsp]' (it puts rlvp-lsp in the venv's bin), " +
    "or set rlvp.server.path to the full path of rlvp-lsp (or to a python with rlvp.server.args " +
    '["-m", "rlvp_dsl.lsp"]).'
  );
}

module.exports = { DEFAULT_COMMAND, SettingError, serverCommand, startFailureMessage };
