// Tokenise .rlvp text with the editor grammar (editors/vscode/syntaxes/rlvp.tmLanguage.json), the way
// VS Code does: vscode-textmate driven by the Oniguruma regex engine compiled to WebAssembly.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

export const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, "..", "..");
export const EXTENSION = join(ROOT, "editors", "vscode");
export const GRAMMAR_PATH = join(EXTENSION, "syntaxes", "rlvp.tmLanguage.json");

let grammarPromise = null;

/** The compiled source.rlvp grammar (loaded once). */
export function loadGrammar() {
  if (grammarPromise === null) {
    const wasm = readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
    const onigLib = oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength)).then(() => ({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }));
    const registry = new vsctm.Registry({
      onigLib,
      loadGrammar: async (scopeName) =>
        scopeName === "source.rlvp" ? vsctm.parseRawGrammar(readFileSync(GRAMMAR_PATH, "utf8"), GRAMMAR_PATH) : null,
    });
    grammarPromise = registry.loadGrammar("source.rlvp");
  }
  return grammarPromise;
}

/**
 * Tokenise `text`: a list of lines, each a list of {text, scopes} (scopes outermost first, always
 * starting with "source.rlvp"), carrying the rule stack from line to line as the editor does.
 */
export async function tokenize(text) {
  const grammar = await loadGrammar();
  let stack = vsctm.INITIAL;
  const lines = [];
  for (const line of text.split(/\r?\n/)) {
    const result = grammar.tokenizeLine(line, stack);
    if (result.stoppedEarly) throw new Error(`tokenising stopped early on line ${lines.length + 1}`);
    lines.push(
      result.tokens.map((t, i) => ({
        text: line.slice(t.startIndex, i + 1 < result.tokens.length ? result.tokens[i + 1].startIndex : line.length),
        scopes: t.scopes,
      })),
    );
    stack = result.ruleStack;
  }
  return lines;
}
