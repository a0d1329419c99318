# make_qdq_tiny.py — writes qdq_tiny/ (model.onnx + test_data_set_0), a tiny QDQ graph in
# ONNX Runtime's layout: DQ(x u8) -> Conv(DQ(w i8 per channel), DQ(b i32)) -> Relu -> Q -> DQ
# -> MatMul(DQ(W i8 per column)) -> Q -> DQ -> y. The reference is the float graph op by op
# (numpy); Lathe fuses each QDQ group into an int8 kernel, so the test allows a few
# quantization steps (--max-rel). Run with Debian's /usr/bin/python3 (onnx, numpy).
import os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T

rng = np.random.default_rng(3)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qdq_tiny")
C, M, H, W, N = 3, 5, 7, 6, 9
x = rng.standard_normal((1, C, H, W)).astype(np.float32)
wf = rng.standard_normal((M, C, 3, 3)).astype(np.float32) * 0.3
bf = rng.standard_normal(M).astype(np.float32) * 0.1
Wf = rng.standard_normal((W, N)).astype(np.float32) * 0.3

def rq(v, s, z, lo, hi): return np.clip(np.rint(v / s) + z, lo, hi)
sx, zx = np.float32((x.max() - min(x.min(), 0)) / 255), np.uint8(round(-min(x.min(), 0) / ((x.max() - min(x.min(), 0)) / 255)))
sw = (np.abs(wf).reshape(M, -1).max(1) / 127).astype(np.float32)
wq = np.clip(np.rint(wf / sw[:, None, None, None]), -127, 127).astype(np.int8)
bq = np.rint(bf / (sx * sw)).astype(np.int32)
sW = (np.abs(Wf).max(0) / 127).astype(np.float32)
Wq = np.clip(np.rint(Wf / sW), -127, 127).astype(np.int8)
s1, s2 = np.float32(0.05), np.float32(0.04)
z2 = np.uint8(128)

inits = [nh.from_array(np.array(sx), "sx"), nh.from_array(np.array(zx, np.uint8), "zx"), nh.from_array(wq, "wq"),
         nh.from_array(sw, "sw"), nh.from_array(np.zeros(M, np.int8), "zw"), nh.from_array(bq, "bq"),
         nh.from_array((sx * sw).astype(np.float32), "sb"), nh.from_array(np.zeros(M, np.int32), "zb"),
         nh.from_array(np.array(s1), "s1"), nh.from_array(np.array(0, np.uint8), "z1"),
         nh.from_array(Wq, "Wq"), nh.from_array(sW, "sW"), nh.from_array(np.zeros(N, np.int8), "zW"),
         nh.from_array(np.array(s2), "s2"), nh.from_array(np.array(z2, np.uint8), "z2")]
nodes = [
    h.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
    h.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"], axis=0), h.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["bd"], axis=0),
    h.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
    h.make_node("QuantizeLinear", ["r", "s1", "z1"], ["rq"]), h.make_node("DequantizeLinear", ["rq", "s1", "z1"], ["rd"]),
    h.make_node("DequantizeLinear", ["Wq", "sW", "zW"], ["Wd"], axis=1), h.make_node("MatMul", ["rd", "Wd"], ["m"]),
    h.make_node("QuantizeLinear", ["m", "s2", "z2"], ["mq"]), h.make_node("DequantizeLinear", ["mq", "s2", "z2"], ["y"]),
]
g = h.make_graph(nodes, "qdq_tiny", [h.make_tensor_value_info("x", T.FLOAT, [1, C, H, W])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, M, H, N])], inits)
model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
onnx.checker.check_model(model)
os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))

# float reference, op by op
xd = (rq(x, sx, zx, 0, 255) - zx) * sx
wd = wq.astype(np.float32) * sw[:, None, None, None]
xp = np.pad(xd, ((0, 0), (0, 0), (1, 1), (1, 1)))
c = np.zeros((1, M, H, W), np.float32)
for m in range(M):
    for i in range(H):
        for j in range(W):
            c[0, m, i, j] = (xp[0, :, i:i + 3, j:j + 3] * wd[m]).sum() + bq[m] * sx * sw[m]
rd = rq(np.maximum(c, 0), s1, 0, 0, 255) * s1
m_ = rd @ (Wq.astype(np.float32) * sW)
y = ((rq(m_, s2, z2, 0, 255) - z2) * s2).astype(np.float32)
onnx.save_tensor(nh.from_array(x, "x"), os.path.join(out, "test_data_set_0", "input_0.pb"))
onnx.save_tensor(nh.from_array(y, "y"), os.path.join(out, "test_data_set_0", "output_0.pb"))
