# make_qdq_sat16.py — writes qdq_sat16/CASE/ (model.onnx, test_data_set_0/input_0.pb and
# output_0.pb): tiny QDQ graphs, Q(x) -> DQ -> MatMul / Conv (int8 weights, per-channel scales,
# zero point 0) -> Q -> DQ -> y, whose u8 x s8 neighbouring products overflow int16 (many 255s
# against weights of both signs). output_0.pb is ONNX Runtime's fused run (all optimizations)
# on an x86 host with AVX2 and without VNNI (MLAS's U8S8 kernels, vpmaddubsw: pairs saturate),
# so the tests can check Lathe's qdq-sat16 form against ORT itself. Run with Debian's
# /usr/bin/python3 (onnx, numpy) and onnxruntime-node in ~/.cache/lathe-ort-peer
# (QDQ_REF_JS: ../shared/models/qdq_ref.js).
import json, os, subprocess, sys, tempfile

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "qdq_sat16")
QDQ_REF = os.environ.get("QDQ_REF_JS", "/work/shared/models/qdq_ref.js")
SX, SW = 0.5, 0.25

# name: (kind, batch, cin, cout, k, stride, pad, group, zx, rows/size)
CASES = {
    "conv3x3_c8": ("conv", 1, 8, 16, 3, 1, 1, 1, 0, 7),
    "conv3x3_c6_s2_b3_zp": ("conv", 3, 6, 5, 3, 2, 1, 1, 9, 9),   # padding reads the zero point
    "conv3x3_c10_g2": ("conv", 2, 10, 6, 3, 1, 1, 2, 3, 6),       # 5 channels a group: odd, stays exact
    "conv3x3_c12_g3": ("conv", 1, 12, 9, 3, 1, 1, 3, 0, 5),       # 4 a group
    "conv1x1_c5": ("conv", 2, 5, 7, 1, 1, 0, 1, 4, 5),            # one axis, odd K: the last alone
    "conv3x3_c3": ("conv", 1, 3, 4, 3, 1, 1, 1, 0, 6),            # odd channels: pairs across taps, exact here
    "matmul_k13_b3": ("matmul", 3, 13, 11, 1, 1, 0, 1, 6, 5),
    "conv3x3_c16_o29": ("conv", 1, 16, 29, 3, 1, 1, 1, 5, 7),     # N 49, M 29: the 12 x 8 tile, a ragged panel
    "conv3x3_c8_o13_s2_b2": ("conv", 2, 8, 13, 3, 2, 1, 1, 255, 9),  # N 2 x 25 at stride 2, zero point 255 in the padding
}


def build(kind, batch, cin, cout, k, stride, pad, group, zx, size, rng):
    if kind == "conv":
        w = rng.integers(-128, 128, (cout, cin // group, k, k)).astype(np.int8)
        xs = [batch, cin, size, size]
    else:
        w = rng.integers(-128, 128, (cin, cout)).astype(np.int8)
        xs = [batch, size, cin]
    xq = rng.integers(0, 256, xs).astype(np.uint8)
    xq[rng.random(xs) < 0.4] = 255
    nch = cout
    inits = [nh.from_array(np.array(SX, np.float32), "sx"), nh.from_array(np.array(zx, np.uint8), "zx"),
             nh.from_array(w, "w"), nh.from_array(np.full(nch, SW, np.float32), "sw"),
             nh.from_array(np.zeros(nch, np.int8), "zw"),
             nh.from_array(np.array(SX * SW * 64 * cin * k * k // group / 8, np.float32), "sy"),
             nh.from_array(np.array(128, np.uint8), "zy")]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
             h.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0 if kind == "conv" else 1)]
    if kind == "conv":
        nodes.append(h.make_node("Conv", ["xf", "wf"], ["yf"], kernel_shape=[k, k], strides=[stride, stride],
                                 pads=[pad] * 4, group=group))
    else:
        nodes.append(h.make_node("MatMul", ["xf", "wf"], ["yf"]))
    nodes += [h.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["yq"]),
              h.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    g = h.make_graph(nodes, "sat16", [h.make_tensor_value_info("x", T.FLOAT, xs)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    x = ((xq.astype(np.float32) - zx) * SX).astype(np.float32)
    return m, x


def main():
    rng = np.random.default_rng(18)
    tmp = tempfile.mkdtemp(prefix="qdq-sat16-")
    for name, spec in CASES.items():
        d = os.path.join(OUT, name)
        os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
        m, x = build(*spec, rng)
        onnx.save(m, os.path.join(d, "model.onnx"))
        xin = nh.from_array(x, "x")
        with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f: f.write(xin.SerializeToString())
        np.save(os.path.join(tmp, name + "_x.npy"), x)
        job = {"model": os.path.join(d, "model.onnx"), "opt": "all", "threads": 1, "mode": "save",
               "sets": [{"feeds": {"x": os.path.join(tmp, name + "_x.npy")}, "save": {"y": os.path.join(tmp, name + "_y.npy")}}],
               "result": os.path.join(tmp, name + ".json")}
        with open(os.path.join(tmp, name + ".job.json"), "w") as f: json.dump(job, f)
        subprocess.run(["node", QDQ_REF, os.path.join(tmp, name + ".job.json")], check=True,
                       env=dict(os.environ, ORT_PEER_DIR=os.path.expanduser("~/.cache/lathe-ort-peer")))
        y = np.load(os.path.join(tmp, name + "_y.npy"))
        with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f: f.write(nh.from_array(y, "y").SerializeToString())
        print(name, x.shape, "->", y.shape)


if __name__ == "__main__":
    sys.exit(main())
