// The editor package (editors/vscode) under node:test: the TextMate grammar tokenises every .rlvp file of the
// repository with every non-blank character in a scope of its own, the golden file gets the scopes in
// golden.json, every keyword of grammars/rlvp.lark is a keyword to the editor, and the language
// configuration's word pattern and brackets are what the language needs.
// Run: npm ci --prefix tests/editors && node --test tests/editors/test_textmate.mjs
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { test } from "node:test";

import { EXTENSION, HERE, ROOT, tokenize } from "./tokenize.mjs";

/** Every *.rlvp file under `dir` (recursively), sorted. */
function rlvpFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...rlvpFiles(path));
    else if (entry.endsWith(".rlvp")) out.push(path);
  }
  return out;
}

const FILES = ["rules", "examples", join("tests", "golden")].flatMap((d) => rlvpFiles(join(ROOT, d)));
// The diagnostics goldens are broken on purpose (curled quotes, single quotes...): there, and only there,
// a character may be scoped invalid.illegal.
const BROKEN_ON_PURPOSE = join("tests", "golden", "diagnostics") + sep;

/** The places in `lines` where a non-blank character has no scope but source.rlvp, or an invalid one. */
function badTokens(lines, allowInvalid) {
  const bad = [];
  lines.forEach((tokens, i) => {
    for (const t of tokens) {
      if (!t.text.trim()) continue;
      if (t.scopes.length < 2) bad.push(`line ${i + 1}: ${JSON.stringify(t.text)} unscoped`);
      else if (!allowInvalid && t.scopes.some((s) => s.startsWith("invalid."))) {
        bad.push(`line ${i + 1}: ${JSON.stringify(t.text)} ${t.scopes.at(-1)}`);
      }
    }
  });
  return bad;
}

test("the repository has the .rlvp files this test walks", () => {
  // rules/ 8, examples/ 5, tests/golden/ 50-odd: a moved folder must not make the next test pass on nothing.
  assert.ok(FILES.length >= 40, `only ${FILES.length} .rlvp files found under ${ROOT}`);
  assert.ok(FILES.some((f) => f.endsWith(join("rules", "tau2_airline.rlvp"))));
});

test("every .rlvp file tokenises with every non-blank character scoped", async () => {
  const failures = [];
  for (const file of FILES) {
    const rel = relative(ROOT, file);
    const bad = badTokens(await tokenize(readFileSync(file, "utf8")), rel.startsWith(BROKEN_ON_PURPOSE));
    if (bad.length) failures.push(`${rel}:\n  ${bad.slice(0, 5).join("\n  ")}`);
  }
  assert.deepEqual(failures, []);
});

test("the broken diagnostics files show their breakage as invalid", async () => {
  const invalid = async (name) =>
    (await tokenize(readFileSync(join(ROOT, "tests", "golden", "diagnostics", name), "utf8")))
      .flat()
      .filter((t) => t.scopes.at(-1).startsWith("invalid."))
      .map((t) => t.text);
  assert.deepEqual(await invalid("typographic_quote.rlvp"), ["“", "”"]);
  assert.ok((await invalid("single_quotes.rlvp")).includes("'"));
});

test("the golden file gets the expected scopes", async () => {
  const lines = await tokenize(readFileSync(join(HERE, "golden.rlvp"), "utf8"));
  assert.deepEqual(badTokens(lines, false), []);
  const expected = JSON.parse(readFileSync(join(HERE, "golden.json"), "utf8"));
  assert.ok(expected.length >= 50);
  const wrong = [];
  for (const { line, text, nth = 1, scope } of expected) {
    const matching = (lines[line - 1] ?? []).filter((t) => t.text === text);
    const token = matching[nth - 1];
    if (!token) wrong.push(`line ${line}: no token ${JSON.stringify(text)} (#${nth})`);
    else if (token.scopes.at(-1) !== scope) {
      wrong.push(`line ${line}: ${JSON.stringify(text)} is ${token.scopes.at(-1)}, expected ${scope}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test("every keyword of grammars/rlvp.lark is a keyword to the editor, never a name", async () => {
  const lark = readFileSync(join(ROOT, "grammars", "rlvp.lark"), "utf8");
  // The quoted words of the grammar's rules (not of its comments).
  const code = lark
    .split("\n")
    .map((l) => l.replace(/\/\/.*$/, ""))
    .join("\n");
  const words = [...new Set([...code.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]))].sort();
  assert.ok(words.length >= 60, `only ${words.length} keywords read from the grammar`);
  const wrong = [];
  for (const word of words) {
    const [tokens] = await tokenize(word);
    const scope = tokens.length === 1 ? tokens[0].scopes.at(-1) : `${tokens.length} tokens`;
    if (!/^(keyword|storage\.type|support\.function|constant\.language)\./.test(scope)) wrong.push(`${word}: ${scope}`);
    // In backticks a keyword is a name.
    const [quoted] = await tokenize(`\`${word}\``);
    if (quoted.length !== 1 || quoted[0].scopes.at(-1) !== "variable.other.quoted.rlvp") wrong.push(`\`${word}\``);
  }
  assert.deepEqual(wrong, []);
});

test("names of any script, numbers with signs and exponents, escapes", async () => {
  const scopesOf = async (text) => (await tokenize(text))[0].map((t) => [t.text, t.scopes.at(-1)]);
  assert.deepEqual(await scopesOf("const τέλος = +2.0e-1"), [
    ["const", "storage.type.const.rlvp"],
    [" ", "source.rlvp"],
    ["τέλος", "variable.other.constant.rlvp"],
    [" ", "source.rlvp"],
    ["=", "keyword.operator.assignment.rlvp"],
    [" ", "source.rlvp"],
    ["+2.0e-1", "constant.numeric.rlvp"],
  ]);
  // NFD: the combining acute accent stays inside the name.
  assert.deepEqual(await scopesOf("call cafe\u0301"), [
    ["call", "support.function.event.rlvp"],
    [" ", "source.rlvp"],
    ["cafe\u0301", "variable.function.tool.rlvp"],
  ]);
  const str = await scopesOf('"a\\n\\u00e9\\q"');
  assert.deepEqual(
    str.map((x) => x[1]),
    [
      "punctuation.definition.string.begin.rlvp",
      "string.quoted.double.rlvp",
      "constant.character.escape.rlvp",
      "constant.character.escape.rlvp",
      "invalid.illegal.unknown-escape.rlvp",
      "punctuation.definition.string.end.rlvp",
    ],
  );
  // An unclosed string or regex ends at the end of its line: the next line is read afresh.
  const lines = await tokenize('user says "no end\ntool x : read');
  assert.equal(lines[1][0].scopes.at(-1), "storage.type.tool.rlvp");
  const lines2 = await tokenize("text matches /no end\ncall x");
  assert.equal(lines2[1][0].scopes.at(-1), "support.function.event.rlvp");
  // An unclosed rule head ends at its body's brace: the body is read as a body.
  const lines3 = await tokenize("violation x (-0.1 {\n  on call y\n}");
  assert.deepEqual(
    lines3[1].filter((t) => t.text.trim()).map((t) => t.scopes.slice(1)),
    [["keyword.control.rlvp"], ["support.function.event.rlvp"], ["variable.function.tool.rlvp"]],
  );
});

test("the language configuration: comments, brackets, auto-closing pairs, the word pattern", () => {
  const config = JSON.parse(readFileSync(join(EXTENSION, "language-configuration.json"), "utf8"));
  assert.equal(config.comments.lineComment, "#");
  assert.deepEqual(config.brackets, [
    ["{", "}"],
    ["[", "]"],
    ["(", ")"],
  ]);
  const pairs = config.autoClosingPairs.map((p) => p.open + p.close);
  for (const p of ["{}", "[]", "()", '""', "``"]) assert.ok(pairs.includes(p), p);
  const word = new RegExp(config.wordPattern.pattern, config.wordPattern.flags + "g");
  const words = (s) => [...s.matchAll(word)].map((m) => m[0]);
  assert.deepEqual(words("tool get_user_details : read, destructive"), ["tool", "get_user_details", "read", "destructive"]);
  assert.deepEqual(words("call `open` ok"), ["call", "`open`", "ok"]);
  assert.deepEqual(words("const τέλος=-0.5 提交 cafe\u0301"), ["const", "τέλος", "提交", "cafe\u0301"]);
  assert.deepEqual(words("write_unconfirmed(UNCONFIRMED)"), ["write_unconfirmed", "UNCONFIRMED"]);
});

test("the extension manifest wires the grammar, the configuration and the server setting", () => {
  const pkg = JSON.parse(readFileSync(join(EXTENSION, "package.json"), "utf8"));
  const [language] = pkg.contributes.languages;
  assert.equal(language.id, "rlvp");
  assert.deepEqual(language.extensions, [".rlvp"]);
  const [grammar] = pkg.contributes.grammars;
  assert.equal(grammar.scopeName, "source.rlvp");
  for (const path of [language.configuration, grammar.path, pkg.main]) {
    assert.ok(statSync(join(EXTENSION, path)).isFile(), path);
  }
  const settings = pkg.contributes.configuration.properties;
  assert.equal(settings["rlvp.server.path"].default, "rlvp-lsp");
  assert.ok(pkg.activationEvents.includes("onLanguage:rlvp"));
});
