// Builds the one script proton-view --html inlines: src/main.js with d3-flame-graph and the d3
// modules it uses, minified, to ../static/flamegraph.bundle.js.  Beside it, the licence texts
// of every package that went into the bundle (taken from esbuild's list of inputs), since the
// bundle, and every HTML file made from it, redistributes them.
//
//     npm ci && npm run build
import { build } from "esbuild";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "static");

const result = await build({
  entryPoints: [join(here, "src", "main.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2020"],
  loader: { ".css": "text" },
  legalComments: "none",
  metafile: true,
  write: false,
  banner: { js: "/* proton-view flame graph. Contains d3-flame-graph (Apache-2.0) and d3 modules (ISC); licence texts: THIRD_PARTY_LICENSES.txt beside this file, and in every HTML page made with it. */" },
});

// Packages whose code is in the bundle: node_modules/<name>/... inputs.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) packages.add(m[1]);
}
const notices = [...packages].sort().map((name) => {
  const dir = join(here, "node_modules", name);
  const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const file = ["LICENSE", "LICENSE.md", "LICENSE.txt", "license"].map((f) => join(dir, f)).find(existsSync);
  if (!file) throw new Error(`${name}: no licence file to redistribute`);
  return `${"=".repeat(78)}\n${name} ${meta.version} (${meta.license})\n${"=".repeat(78)}\n\n${readFileSync(file, "utf8").trim()}\n`;
});

writeFileSync(join(out, "flamegraph.bundle.js"), result.outputFiles[0].text);
writeFileSync(
  join(out, "THIRD_PARTY_LICENSES.txt"),
  "Third-party code in flamegraph.bundle.js (built by proton_core/viewer/js/build.mjs)\n\n" + notices.join("\n"),
);
console.log(`flamegraph.bundle.js: ${result.outputFiles[0].text.length} bytes; packages: ${[...packages].sort().join(", ")}`);
