"""Load an ONNX model (the layout of ../shared/models: DIR/model.onnx, DIR/meta.json,
DIR/npy/in_*.npy and out_*.npy = PyTorch's outputs), step a rule set, compile with llvm,
run on the NumPy inputs and compare with PyTorch's outputs.

    python3 samples/python/onnx_model.py /work/models/full/resnet50 [--backend llvm] [--rules simplify] [--steps 20]
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import lathe


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--backend", default="llvm")
    ap.add_argument("--rules", default="simplify")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args(argv)
    d = Path(a.model_dir)
    meta = json.loads((d / "meta.json").read_text())

    t0 = time.perf_counter()
    g = lathe.load(d / "model.onnx")
    print(f"loaded {d / 'model.onnx'}: {len(g)} nodes ({time.perf_counter() - t0:.1f} s)")
    s = lathe.rewrite(g, lathe.rules.builtin(a.rules))
    for line in s.step(a.steps):
        print("  " + line)
    print(f"{a.rules}: {s.current()} steps, {len(s.graph())} nodes")
    t0 = time.perf_counter()
    p = lathe.compile(s.graph(), backend=a.backend)
    print(f"compiled with {a.backend}: {len(p.kernels())} kernels ({time.perf_counter() - t0:.1f} s)")
    feeds = {i["name"]: np.load(d / i["npy"]) for i in meta["inputs"]}
    t0 = time.perf_counter()
    out = p.run(feeds)
    print(f"ran in {(time.perf_counter() - t0) * 1000:.1f} ms")
    worst = 0.0
    for o in meta["outputs"]:
        ref = np.load(d / o["npy"])
        got = out[o["name"]]
        err = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(1.0, float(np.max(np.abs(ref)))))
        worst = max(worst, err)
        print(f"{o['name']}: {got.shape}, max error vs PyTorch {err:.2e} (relative to max |ref|)")
    ok = worst <= a.tol
    print("OK" if ok else f"FAIL: error {worst:.2e} > {a.tol}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
