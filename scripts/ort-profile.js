// ort-profile.js — ONNX Runtime's per-node times on a model directory of ../models/make_models.py
// (or any model.onnx with meta.json and npy inputs), for scripts/compare-profile.py.
//
//   node scripts/ort-profile.js MODEL_DIR [--iters N] [--warmup W] [--threads T] [--out FILE.json]
//
// Runs W warm-up and N timed runs with ORT's profiler on (CPU EP, intraOpNumThreads T,
// sequential, all graph optimizations, as ../shared/peers/ort_peer.js does), reads the trace ORT
// writes at endProfiling, and writes one JSON document (to --out, else stdout):
//   {model, ort, threads, warmup, iters, median_ms, min_ms,
//    nodes: [{order, name, op, provider, inputs: [[dims]...], outputs: [[dims]...], median_us, min_us, runs}]}
// nodes are in execution order; median_us / min_us are over the N timed runs (warm-up runs are
// dropped). ORT's optimized graph is what runs: fused nodes (Conv+Add+Relu as FusedConv, or a
// conv in NCHWc layout named after its output tensor with `_nchwc`) and layout nodes
// (ReorderInput / ReorderOutput) appear as ORT names them.
// onnxruntime-node lives in ORT_PEER_DIR (default ~/.cache/lathe-ort-peer); the wrapper
// scripts/ort-profile finds or installs it.
'use strict';
const fs = require('fs'), os = require('os'), path = require('path');
const ort = require(path.join(process.env.ORT_PEER_DIR || path.join(os.homedir(), '.cache/lathe-ort-peer'),
  'node_modules/onnxruntime-node'));

function arg(name, dflt) { const i = process.argv.indexOf(name); return i > 0 ? process.argv[i + 1] : dflt; }

const TYPES = { '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
                '|b1': ['bool', Uint8Array], '<f8': ['float64', Float64Array], '|u1': ['uint8', Uint8Array],
                '|i1': ['int8', Int8Array] };
function readNpy(file) {  // .npy v1/v2/v3, C order
  const b = fs.readFileSync(file);
  const major = b[6], hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8), off = major === 1 ? 10 : 12;
  const h = b.toString('latin1', off, off + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(h)[1];
  if (/'fortran_order':\s*True/.test(h)) throw new Error(file + ': fortran order');
  const shape = /'shape':\s*\(([^)]*)\)/.exec(h)[1].split(',').filter((s) => s.trim()).map(Number);
  const t = TYPES[descr];
  if (!t) throw new Error(file + ': dtype ' + descr);
  const bytes = b.subarray(off + hlen);
  const ab = new ArrayBuffer(bytes.length); new Uint8Array(ab).set(bytes);  // aligned copy
  return { type: t[0], shape, data: new t[1](ab) };
}

function median(a) { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.floor(s.length / 2)] : 0; }
// [{float: [1, 32, 128, 128]}, ...] -> [[1, 32, 128, 128], ...]
function shapes(list) { return (list || []).map((o) => Object.values(o)[0] || []); }

async function main() {
  const dir = process.argv[2];
  if (!dir || dir.startsWith('--')) {
    console.error('usage: ort-profile MODEL_DIR [--iters N] [--warmup W] [--threads T] [--out FILE.json]');
    process.exit(2);
  }
  const iters = Number(arg('--iters', 10)), warmup = Number(arg('--warmup', 2)), threads = Number(arg('--threads', 1));
  const out = arg('--out', '');
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8'));
  const feeds = {};
  for (const i of meta.inputs) { const a = readNpy(path.join(dir, i.npy)); feeds[i.name] = new ort.Tensor(a.type, a.data, a.shape); }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
  const sess = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: path.join(tmp, 'ort') });
  const times = [];
  for (let i = 0; i < warmup + iters; i++) {
    const t0 = performance.now();
    await sess.run(feeds);
    if (i >= warmup) times.push(performance.now() - t0);
  }
  sess.endProfiling();
  await sess.release();
  const files = fs.readdirSync(tmp).filter((f) => f.endsWith('.json'));
  if (files.length !== 1) throw new Error('expected one ORT profile in ' + tmp + ', found ' + files.length);
  const events = JSON.parse(fs.readFileSync(path.join(tmp, files[0]), 'utf8'));
  fs.rmSync(tmp, { recursive: true, force: true });

  // Each run lists every executed node once, in order: the k-th occurrence of a name is run k.
  const byName = new Map();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const name = e.name.slice(0, -'_kernel_time'.length);
    let n = byName.get(name);
    if (!n) {
      n = { order: byName.size, name, op: e.args.op_name, provider: e.args.provider,
            inputs: shapes(e.args.input_type_shape), outputs: shapes(e.args.output_type_shape), durs: [] };
      byName.set(name, n);
    }
    n.durs.push(e.dur);
  }
  const nodes = [];
  for (const n of byName.values()) {
    const timed = n.durs.slice(-iters);  // drop the warm-up runs
    nodes.push({ order: n.order, name: n.name, op: n.op, provider: n.provider, inputs: n.inputs, outputs: n.outputs,
                 median_us: median(timed), min_us: Math.min(...timed), runs: timed.length });
  }
  const doc = { model: meta.name || path.basename(dir), ort: ort.env.versions.node, threads, warmup, iters,
                median_ms: +median(times).toFixed(3), min_ms: +Math.min(...times).toFixed(3), nodes };
  const text = JSON.stringify(doc, null, 1) + '\n';
  if (out) fs.writeFileSync(out, text); else process.stdout.write(text);
}
main().catch((e) => { console.error('ort-profile: ' + String(e && e.message || e)); process.exit(1); });
