#!/usr/bin/env python3
"""bench-quant.py MODEL_DIR [--mode dynamic] [--pairs 2] [--iters 5] [--lathe build/lathe] [--lock /tmp/bench.lock]

A float model against its `lathe quantize` version, in the same run: the model directory's
model.onnx (meta.json and npy/ as ../shared/models/make_models.py writes them) is quantized
once (`lathe quantize --mode MODE --per-channel`), then PAIRS alternating pairs of `lathe run
--iters N --stats` on the float model and on the quantized one, with the directory's inputs.
Per pair: each side's median and minimum wall ms and its CPU ms per run (all threads, user +
system: on a shared machine it moves less with the load than the wall time), and the
speedups float / quantized. Then each output of the quantized model against the float
model's on the same inputs: cosine similarity and max|d|/max|ref| (and the top-1 agreement
along the last axis, for logits). With --lock, each pair holds that lock (flock), so that
no other timing run shares the machine with it (the quantize step runs outside it).
Only the Python standard library (the .npy files are read with `array`).
"""
import argparse
import array
import ast
import fcntl
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time


def read_npy(path):
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise SystemExit(f"{path}: not a .npy file")
        major = f.read(2)[0]
        hlen = int.from_bytes(f.read(2 if major == 1 else 4), "little")
        header = ast.literal_eval(f.read(hlen).decode("latin1"))
        if header["descr"] not in ("<f4", "<f8") or header["fortran_order"]:
            raise SystemExit(f"{path}: only little-endian f32/f64 C-order arrays are compared (got {header['descr']})")
        a = array.array("f" if header["descr"] == "<f4" else "d")
        a.frombytes(f.read())
        return a, tuple(header["shape"])


def compare(ref, got, shape):
    dot = rr = gg = 0.0
    mref = md = 0.0
    for a, b in zip(ref, got):
        dot += a * b
        rr += a * a
        gg += b * b
        mref = max(mref, abs(a))
        md = max(md, abs(a - b))
    cos = dot / math.sqrt(rr * gg) if rr > 0 and gg > 0 else float(rr == gg)
    top1 = None
    if len(shape) >= 2 and shape[-1] > 1:
        n = shape[-1]
        rows = len(ref) // n
        same = 0
        for r in range(rows):
            x, y = ref[r * n:(r + 1) * n], got[r * n:(r + 1) * n]
            same += x.index(max(x)) == y.index(max(y))
        top1 = (same, rows)
    return cos, md / mref if mref > 0 else md, top1


def run_stats(lathe, graph, inputs, iters, out_dir):
    cmd = [lathe, "run", graph, "--iters", str(iters), "--stats", "--output-dir", out_dir] + [f"--input={i}" for i in inputs]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    line = [l for l in p.stdout.splitlines() if l.startswith("stats: ")][-1]
    return json.loads(line[7:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--mode", default="dynamic")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--lathe", default="build/lathe")
    ap.add_argument("--lock", default="")
    ap.add_argument("--quantized", default="", help="reuse this .lathe (from an earlier `lathe quantize`) instead of quantizing")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.model_dir, "meta.json")))
    inputs = [f"{i['name']}={os.path.join(a.model_dir, i['npy'])}" for i in meta["inputs"]]
    model = os.path.join(a.model_dir, "model.onnx")
    tmp = tempfile.mkdtemp(prefix="lathe-bench-quant-")
    q = a.quantized
    if not q:
        q = os.path.join(tmp, "q.lathe")
        p = subprocess.run([a.lathe, "quantize", model, "--mode", a.mode, "--per-channel", "--no-report", "-o", q],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"lathe quantize: exit {p.returncode}\n{p.stderr[-2000:]}")
    print(f"# {meta.get('name', a.model_dir)}: float vs quantize --mode {a.mode} --per-channel; "
          f"{a.pairs} alternating pairs of `lathe run --iters {a.iters}`; load {os.getloadavg()[0]:.2f}")
    print(f"{'pair':>4} {'float med':>10} {'min':>8} {'cpu':>8}   {a.mode + ' med':>12} {'min':>8} {'cpu':>8}   "
          f"{'speedup med':>11} {'min':>6} {'cpu':>6}  load")
    rows = []
    for i in range(a.pairs):
        lock = open(a.lock, "w") if a.lock else None
        if lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            load0 = os.getloadavg()[0]
            f = run_stats(a.lathe, model, inputs, a.iters, os.path.join(tmp, "f"))
            d = run_stats(a.lathe, q, inputs, a.iters, os.path.join(tmp, "q"))
            load1 = os.getloadavg()[0]
        finally:
            if lock:
                lock.close()
        r = [f["median_ms"], f["min_ms"], f.get("cpu_ms", -1), d["median_ms"], d["min_ms"], d.get("cpu_ms", -1)]
        rows.append(r)
        print(f"{i + 1:>4} {r[0]:10.1f} {r[1]:8.1f} {r[2]:8.1f}   {r[3]:12.1f} {r[4]:8.1f} {r[5]:8.1f}   "
              f"{r[0] / r[3]:10.2f}x {r[1] / r[4]:5.2f}x {r[2] / r[5]:5.2f}x  {load0:.1f}-{load1:.1f}", flush=True)
    if len(rows) > 1:
        med = [statistics.median(c) for c in zip(*rows)]
        print(f"{'med':>4} {med[0]:10.1f} {med[1]:8.1f} {med[2]:8.1f}   {med[3]:12.1f} {med[4]:8.1f} {med[5]:8.1f}   "
              f"{med[0] / med[3]:10.2f}x {med[1] / med[4]:5.2f}x {med[2] / med[5]:5.2f}x")
    for o in meta["outputs"]:
        ref, shape = read_npy(os.path.join(tmp, "f", o["name"] + ".npy"))
        got, _ = read_npy(os.path.join(tmp, "q", o["name"] + ".npy"))
        cos, rel, top1 = compare(ref, got, shape)
        t = f", top-1 equal at {top1[0]} of {top1[1]} rows" if top1 else ""
        print(f"output {o['name']} {list(shape)}: {a.mode} vs float cosine {cos:.6f}, max|d|/max|ref| {rel:.4g}{t}")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
