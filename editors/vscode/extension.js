"use strict";
// The VS Code client of rlvp-lsp: starts the server over stdio for .rlvp files, restarts it when its
// settings change or on the command "rlvp: Restart Language Server".  Everything the server does
// (diagnostics, hover, definitions, completion, outline, quick fixes, formatting) comes from it.

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");
const { SettingError, serverCommand, startFailureMessage } = require("./lib/server");

/** @type {LanguageClient | undefined} */
let client;

function currentCommand() {
  const config = vscode.workspace.getConfiguration("rlvp.server");
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  return serverCommand({ path: config.get("path"), args: config.get("args") }, { workspaceFolder: folder });
}

async function start() {
  let cmd;
  try {
    cmd = currentCommand();
  } catch (error) {
    if (error instanceof SettingError) {
      void vscode.window.showErrorMessage(`rlvp: ${error.message}`);
      return;
    }
    throw error;
  }
  const executable = { command: cmd.command, args: cmd.args, transport: TransportKind.stdio };
  client = new LanguageClient(
    "rlvp",
    "rlvp language server",
    { run: executable, debug: executable },
    {
      documentSelector: [
        { scheme: "file", language: "rlvp" },
        { scheme: "untitled", language: "rlvp" },
      ],
    },
  );
  try {
    await client.start();
  } catch (error) {
    const failed = client;
    client = undefined;
    void failed.dispose().catch(() => undefined);
    void vscode.window.showErrorMessage(startFailureMessage(cmd, error), "Open Settings").then((choice) => {
      if (choice) void vscode.commands.executeCommand("workbench.action.openSettings", "rlvp.server");
    });
  }
}

async function stop() {
  const running = client;
  client = undefined;
  if (running) await running.stop();
}

async function restart() {
  await stop();
  await start();
}

/** @param {vscode.ExtensionContext} context */
async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("rlvp.restartServer", restart),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("rlvp.server")) void restart();
    }),
  );
  await start();
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate };
