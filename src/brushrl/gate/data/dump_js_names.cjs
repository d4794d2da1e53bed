// Dump the names the gate needs from the installed browser libraries, as JSON on stdout:
//   brush_exports: every property of the p5.brush global (the library's export table);
//   p5_globals:    every name p5 binds onto `window` in global mode (non-underscore own names of
//                  p5.prototype after p5.brush registered its addon, plus an instance's own names:
//                  the two loops in p5's constructor, p5/lib/p5.js "Attach its properties to the window");
//   ecmascript_globals: the globals V8 defines in a fresh context (the language's built-ins).
// Usage: node dump_js_names.cjs [JS_ROOT]   (JS_ROOT defaults to <repo>/js/node_modules)
// Both libraries are evaluated in a bare node:vm context with no window/document, so only their
// load-time code runs; a p5 instance is constructed in instance mode and captured by its sketch
// closure (p5's later asynchronous start-up fails without a DOM and is ignored).
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const root = path.resolve(process.argv[2] || path.join(__dirname, "../../../../js/node_modules"));
const read = (rel) => fs.readFileSync(path.join(root, rel), "utf8");
const version = (pkg) => JSON.parse(read(path.join(pkg, "package.json"))).version;

process.on("unhandledRejection", () => {});
const ctx = vm.createContext({
  console: { log() {}, warn() {}, error() {}, info() {} },
  performance: require("perf_hooks").performance,
  navigator: { userAgent: "node", language: "en" },
  setTimeout: () => 0,
  clearTimeout: () => {},
  requestAnimationFrame: () => 0,
  TextEncoder,
  TextDecoder,
  URL,
  AbortController,
});
vm.runInContext(read("p5/lib/p5.js") + "\n;globalThis.p5 = p5;", ctx, { filename: "p5.js" });
vm.runInContext(read("p5.brush/dist/p5.brush.js"), ctx, { filename: "p5.brush.js" });
try {
  vm.runInContext("new p5((p) => { globalThis.__inst = p; });", ctx);
} catch (err) {
  // start-up needs a DOM; the instance was already captured by the sketch closure
}
if (!ctx.__inst) throw new Error("could not construct a p5 instance");

const names = new Set();
for (const name of Object.getOwnPropertyNames(ctx.p5.prototype)) names.add(name);
for (const name of Object.getOwnPropertyNames(ctx.__inst)) names.add(name);
const p5Globals = [...names].filter((n) => n[0] !== "_" && n !== "constructor" && n !== "length").sort();

process.stdout.write(
  JSON.stringify(
    {
      p5_version: version("p5"),
      p5_brush_version: version("p5.brush"),
      brush_exports: Object.keys(ctx.brush).sort(),
      p5_globals: p5Globals,
      ecmascript_globals: Object.getOwnPropertyNames(vm.runInNewContext("globalThis")).sort(),
    },
    null,
    1
  ) + "\n"
);
setImmediate(() => process.exit(0));
