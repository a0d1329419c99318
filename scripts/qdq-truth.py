#!/usr/bin/python3
"""qdq-truth.py — which integer sums a QDQ model's reference assumes (issue 18).

  /usr/bin/python3 scripts/qdq-truth.py MODEL_DIR [--lathe build/lathe] [--backend llvm] [--tmp DIR]

Runs on MODEL_DIR's stored inputs (meta.json, npy/in_*.npy):
  ort-fused    ONNX Runtime, all graph optimizations (its int8 kernels: on x86 without VNNI, MLAS's
               AVX2 U8S8 kernels, whose u8 x s8 pair sums saturate at int16); the stored reference
               npy/out_*.npy is this run
  ort-opdisab  ONNX Runtime with graph optimizations disabled: DequantizeLinear, a float MatMul/Conv,
               QuantizeLinear op by op (exact sums, float rounding only)
  lathe-exact  Lathe with LATHE_QDQ_SAT16=0 (exact int32 sums)
  lathe-sat16  Lathe with LATHE_QDQ_SAT16=1 (the pair sums saturating as MLAS's AVX2 kernels do)
and prints every pair's cosine and max|d| / max|ref| per output. ONNX Runtime runs through
../shared/models/qdq_ref.js (onnxruntime-node in ~/.cache/lathe-ort-peer).
"""
import argparse, json, os, subprocess, sys, tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
QDQ_REF = os.environ.get("QDQ_REF_JS", "/work/shared/models/qdq_ref.js")


def stats(got, ref):
    g, r = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    cos = float(g @ r / np.sqrt((g @ g) * (r @ r))) if (g @ g) > 0 and (r @ r) > 0 else float("nan")
    return cos, float(np.abs(g - r).max() / max(np.abs(r).max(), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--lathe", default=os.path.join(HERE, "..", "build", "lathe"))
    ap.add_argument("--backend", default="llvm")
    ap.add_argument("--tmp", default=None)
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.model_dir, "meta.json")))
    tmp = a.tmp or tempfile.mkdtemp(prefix="qdq-truth-")
    os.makedirs(tmp, exist_ok=True)
    model = os.path.join(a.model_dir, "model.onnx")
    feeds = {i["name"]: os.path.join(a.model_dir, i["npy"]) for i in meta["inputs"]}
    runs = {"ort-fused": {o["name"]: np.load(os.path.join(a.model_dir, o["npy"])) for o in meta["outputs"]}}

    # ONNX Runtime op by op
    save = {o["name"]: os.path.join(tmp, "ort_disabled_" + o["name"] + ".npy") for o in meta["outputs"]}
    job = {"model": model, "opt": "disabled", "threads": 2, "mode": "save", "sets": [{"feeds": feeds, "save": save}],
           "result": os.path.join(tmp, "ort_disabled.result.json")}
    with open(os.path.join(tmp, "ort_disabled.job.json"), "w") as f: json.dump(job, f)
    subprocess.run(["node", QDQ_REF, os.path.join(tmp, "ort_disabled.job.json")], check=True,
                   env=dict(os.environ, ORT_PEER_DIR=os.path.expanduser("~/.cache/lathe-ort-peer")))
    runs["ort-opdisab"] = {k: np.load(v) for k, v in save.items()}

    # Lathe, exact and saturating
    for tag, sat in (("lathe-exact", "0"), ("lathe-sat16", "1")):
        out = os.path.join(tmp, tag)
        cmd = [a.lathe, "run", model, "--backend", a.backend, "--output-dir", out, "--tuned", "none"]
        cmd += sum((["--input", f"{k}={v}"] for k, v in feeds.items()), [])
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, LATHE_QDQ_SAT16=sat))
        runs[tag] = {o["name"]: np.load(os.path.join(out, o["name"] + ".npy")) for o in meta["outputs"]}

    names = list(runs)
    print(f"{meta['name']} (qdq): cosine / max|d|/max|ref| per output")
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            cells = []
            for o in meta["outputs"]:
                c, e = stats(runs[x][o["name"]], runs[y][o["name"]])
                cells.append(f"{o['name']} {c:.6f} / {e:.4f}")
            print(f"  {x:12s} vs {y:12s}  " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
