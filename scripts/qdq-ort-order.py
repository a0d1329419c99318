#!/usr/bin/python3
"""qdq-ort-order.py — how ONNX Runtime on this host sums u8 x s8 products in QDQ MatMul / Conv.

  /usr/bin/python3 scripts/qdq-ort-order.py [--tmp DIR]

Builds tiny QDQ models (Q(x) -> DQ -> MatMul/Conv with int8 per-channel weights -> Q -> DQ) whose
values make neighbouring u8 x s8 products overflow int16, runs them through ONNX Runtime with all
optimizations (qdq_ref.js: the int8 kernels), and compares the quantized outputs with numpy
emulations of the integer sum:
  exact      Σ a·w in int32
  pairs-tap  k ordered (kh, kw, ci): each pair of neighbouring input channels of one tap summed in
             a saturating int16 (an odd channel count leaves the last channel of each tap alone)
  pairs-flat the same over the flattened (kh, kw, ci) (pairs cross taps when Cin is odd)
  pairs-chw  pairs over the flattened (ci, kh, kw) (NCHW im2col order)
An emulation matches when every output is within one quantization step of ORT's. A grouped conv
is emulated group by group.
"""
import argparse, json, os, subprocess, tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QDQ_REF = os.environ.get("QDQ_REF_JS", "/work/shared/models/qdq_ref.js")
SX, SW, SY = 0.5, 0.25, None


def model(kind, cin, cout, k, stride, pad, zx, w, sy, x_shape, group=1):
    """Q(x) -> DQ -> op -> Q(y) -> DQ, the weight an int8 initializer with per-channel scale SW."""
    inits = [numpy_helper.from_array(np.float32(SX), "sx"), numpy_helper.from_array(np.uint8(zx), "zx"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(w.shape[0] if kind == "conv" else w.shape[1], SW, np.float32), "sw"),
             numpy_helper.from_array(np.zeros(w.shape[0] if kind == "conv" else w.shape[1], np.int8), "zw"),
             numpy_helper.from_array(np.float32(sy), "sy"), numpy_helper.from_array(np.uint8(128), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0 if kind == "conv" else 1)]
    if kind == "conv":
        nodes.append(helper.make_node("Conv", ["xf", "wf"], ["yf"], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[pad] * 4, group=group))
    else:
        nodes.append(helper.make_node("MatMul", ["xf", "wf"], ["yf"]))
    nodes += [helper.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    g = helper.make_graph(nodes, "probe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def sat_pairs(prod):
    """prod [..., K] int64: Σ_j clamp16(p_2j + p_2j+1), an odd last k alone."""
    K = prod.shape[-1]
    if K % 2: prod = np.concatenate([prod, np.zeros(prod.shape[:-1] + (1,), prod.dtype)], -1)
    p = prod[..., 0::2] + prod[..., 1::2]
    return np.clip(p, -32768, 32767).sum(-1)


def conv_cols(xq, zx, k, stride, pad):
    """xq [N, C, H, W] u8 -> cols [N, OH, OW, kh, kw, C] (padding reads zx)."""
    N, C, H, W = xq.shape
    xp = np.full((N, C, H + 2 * pad, W + 2 * pad), zx, np.int64)
    xp[:, :, pad:pad + H, pad:pad + W] = xq
    OH, OW = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    cols = np.zeros((N, OH, OW, k, k, C), np.int64)
    for i in range(k):
        for j in range(k):
            cols[:, :, :, i, j, :] = xp[:, :, i:i + stride * OH:stride, j:j + stride * OW:stride].transpose(0, 2, 3, 1)
    return cols


def emulate(kind, xq, zx, w, k, stride, pad, how, group=1):
    w = w.astype(np.int64)
    if kind == "conv" and group > 1:  # each group alone, its outputs concatenated
        cg, og = xq.shape[1] // group, w.shape[0] // group
        return np.concatenate([emulate(kind, xq[:, g * cg:(g + 1) * cg], zx, w[g * og:(g + 1) * og], k, stride, pad, how)
                               for g in range(group)], 1)
    if kind == "matmul":  # xq [M, K], w [K, N]
        prod = xq.astype(np.int64)[:, None, :] * w.T[None, :, :]  # [M, N, K]
        s = prod.sum(-1) if how == "exact" else sat_pairs(prod)
        return s - zx * w.sum(0)[None, :]
    cols = conv_cols(xq, zx, k, stride, pad)  # [N, OH, OW, kh, kw, C]
    wt = w.transpose(0, 2, 3, 1)  # [Co, kh, kw, C]
    prod = cols[:, :, :, None] * wt[None, None, None]  # [N, OH, OW, Co, kh, kw, C]
    if how == "exact": s = prod.sum((-3, -2, -1))
    elif how == "pairs-tap": s = sat_pairs(prod).sum((-2, -1))
    elif how == "pairs-flat": s = sat_pairs(prod.reshape(prod.shape[:4] + (-1,)))
    else: s = sat_pairs(prod.transpose(0, 1, 2, 3, 6, 4, 5).reshape(prod.shape[:4] + (-1,)))
    s = s - zx * wt.sum((1, 2, 3))[None, None, None, :]
    return s.transpose(0, 3, 1, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", default=None)
    a = ap.parse_args()
    tmp = a.tmp or tempfile.mkdtemp(prefix="qdq-order-")
    os.makedirs(tmp, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = [("matmul", 16, 8, 1, 1, 0), ("matmul", 13, 8, 1, 1, 0),
             ("conv", 8, 16, 3, 1, 1), ("conv", 3, 16, 3, 1, 1), ("conv", 5, 8, 1, 1, 0), ("conv", 16, 8, 3, 2, 1),
             ("conv", 3, 8, 7, 2, 3), ("conv", 7, 8, 3, 1, 0), ("conv", 64, 32, 3, 1, 1),
             ("conv", 8, 8, 3, 1, 1, 2), ("conv", 12, 6, 3, 1, 1, 3), ("conv", 8, 8, 3, 1, 1, 8), ("conv", 16, 16, 3, 2, 1, 16)]
    for zx in (0, 7):
        for kind, cin, cout, k, stride, pad, *grp in cases:
            group = grp[0] if grp else 1
            if kind == "matmul":
                xq = rng.integers(0, 256, (5, cin)).astype(np.uint8)
                w = rng.integers(-128, 128, (cin, cout)).astype(np.int8)
                xs = [5, cin]
            else:
                xq = rng.integers(0, 256, (2, cin, 9, 9)).astype(np.uint8)
                w = rng.integers(-128, 128, (cout, cin // group, k, k)).astype(np.int8)
                xs = [2, cin, 9, 9]
            xq[rng.random(xq.shape) < 0.4] = 255  # many 255 x ±128 neighbours: pairs past int16
            exact = emulate(kind, xq, zx, w, k, stride, pad, "exact", group)
            sy = float(SX * SW * (np.abs(exact).max() / 120.0))
            m = model(kind, cin, cout, k, stride, pad, zx, w, sy, xs, group)
            path = os.path.join(tmp, f"{kind}_{cin}_{k}_{stride}_{zx}_g{group}")
            onnx.save(m, path + ".onnx")
            x = ((xq.astype(np.float32) - zx) * SX).astype(np.float32)
            np.save(path + "_x.npy", x)
            job = {"model": path + ".onnx", "opt": "all", "threads": 1, "mode": "save",
                   "sets": [{"feeds": {"x": path + "_x.npy"}, "save": {"y": path + "_y.npy"}}], "result": path + ".json"}
            with open(path + ".job.json", "w") as f: json.dump(job, f)
            subprocess.run(["node", QDQ_REF, path + ".job.json"], check=True,
                           env=dict(os.environ, ORT_PEER_DIR=os.path.expanduser("~/.cache/lathe-ort-peer")))
            got = np.rint(np.load(path + "_y.npy") / sy).astype(np.int64)
            cells = []
            hows = ["exact", "pairs-flat"] if kind == "matmul" else ["exact", "pairs-tap", "pairs-flat", "pairs-chw"]
            for how in hows:
                s = emulate(kind, xq, zx, w, k, stride, pad, how, group)
                q = np.clip(np.rint(s * np.float32(SX * SW / sy)), -128, 127)
                d = np.abs(q - got)
                cells.append(f"{how} {int(d.max())}/{int((d > 1).sum())}")
            print(f"{kind:6s} cin {cin:2d} k {k} s {stride} g {group:2d} zx {zx}: " + "  ".join(cells) + "   (max steps off / outputs > 1 off)")


if __name__ == "__main__":
    main()
