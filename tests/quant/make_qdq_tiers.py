# make_qdq_tiers.py — writes qdq_tiers/<case>/ (model.onnx + test_data_set_0/input_N.pb) for
# qdq_tiers_test.cpp: QDQ graphs whose u8 outputs every llvm tier (the quick first-run code
# and the optimized code) must compute exactly as the interpreter does. A residual sum of two
# dequantized tensors, requantized (ResNet's bottleneck end): the f32 products q·s must stay
# rounded on their own, as the interpreter rounds them, or the sums cross the requantization's
# rounding boundaries now and then. `pairs_*`: every (a, b) of u8 values at once, with scales
# that put many sums near a half step; `conv_*`: a quantized input, a 3x3 conv (odd channels,
# stride 1 and 2, maps 7/9/13/14, batch 1 and 3) requantized, plus a shortcut, Relu, requantized.
# Run with Debian's /usr/bin/python3 (onnx, numpy).
import os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T

rng = np.random.default_rng(21)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qdq_tiers")


def save(name, nodes, inputs, outputs, inits, data):
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for i, (n, v) in enumerate(data):
        onnx.save_tensor(nh.from_array(v, n), os.path.join(d, "test_data_set_0", "input_%d.pb" % i))


def sz(inits, v, s, z, t=np.uint8):
    inits.extend([nh.from_array(np.array(s, np.float32), v + "_s"), nh.from_array(np.array(z, t), v + "_z")])
    return [v + "_s", v + "_z"]


# y = Q(Relu(DQ(a) + DQ(b))) over all 65536 pairs of u8 values (a along rows, b along columns);
# s_b and s_y are s_a times powers of two (k_b, k_y), so that the exact sum of many pairs lies
# on a half step of s_y: which side each product's f32 rounding leaves it decides the u8, and
# an FMA that keeps one product unrounded decides some of them the other way (2801 and 181 of
# the 65536 with LATHE_LLVM_CONTRACT_DQ=1)
def pairs(name, sa, za, kb, zb, ky, zy):
    sa = np.float32(sa)
    sb, sy = np.float32(sa * np.float32(kb)), np.float32(sa * np.float32(ky))
    inits, nodes = [], []
    nodes.append(h.make_node("DequantizeLinear", ["a"] + sz(inits, "a", sa, za), ["ad"]))
    nodes.append(h.make_node("DequantizeLinear", ["b"] + sz(inits, "b", sb, zb), ["bd"]))
    nodes.append(h.make_node("Add", ["ad", "bd"], ["s"]))
    nodes.append(h.make_node("Relu", ["s"], ["r"]))
    nodes.append(h.make_node("QuantizeLinear", ["r"] + sz(inits, "y", sy, zy), ["y"]))
    a = np.repeat(np.arange(256, dtype=np.uint8), 256).reshape(1, 1, 256, 256)
    b = np.tile(np.arange(256, dtype=np.uint8), 256).reshape(1, 1, 256, 256)
    shape = [1, 1, 256, 256]
    save(name, nodes, [h.make_tensor_value_info("a", T.UINT8, shape), h.make_tensor_value_info("b", T.UINT8, shape)],
         [h.make_tensor_value_info("y", T.UINT8, shape)], inits, [("a", a), ("b", b)])


# x (f32) → Q → DQ → Conv 3x3 (per-channel i8 weights, i32 bias) → Q → DQ, + DQ(r) (a u8
# shortcut of the conv's output shape) → Relu → Q: outputs the conv's u8 (c) and the sum's (y)
def conv(name, n, cin, cout, hw, stride, zx, zc, zr, zy):
    x = (rng.standard_normal([n, cin, hw, hw]) * 2).astype(np.float32)
    w = (rng.standard_normal([cout, cin, 3, 3]) * 0.2).astype(np.float32)
    inits, nodes = [], []
    nodes.append(h.make_node("QuantizeLinear", ["x"] + sz(inits, "x", 0.031, zx), ["xq"]))
    nodes.append(h.make_node("DequantizeLinear", ["xq", "x_s", "x_z"], ["xd"]))
    ws = (np.abs(w).max(axis=(1, 2, 3)) / 127).astype(np.float32)
    wq = np.clip(np.rint(w / ws.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
    bias = rng.integers(-3000, 3000, cout).astype(np.int32)
    inits.extend([nh.from_array(wq, "w_q"), nh.from_array(ws, "w_s"), nh.from_array(np.zeros(cout, np.int8), "w_z"),
                  nh.from_array(bias, "b_q"), nh.from_array((ws * np.float32(0.031)).astype(np.float32), "b_s")])
    nodes.append(h.make_node("DequantizeLinear", ["w_q", "w_s", "w_z"], ["wd"], axis=0))
    nodes.append(h.make_node("DequantizeLinear", ["b_q", "b_s"], ["bd"], axis=0))
    nodes.append(h.make_node("Conv", ["xd", "wd", "bd"], ["cf"], strides=[stride, stride], pads=[1, 1, 1, 1]))
    nodes.append(h.make_node("QuantizeLinear", ["cf"] + sz(inits, "c", 0.0437, zc), ["c"]))
    nodes.append(h.make_node("DequantizeLinear", ["c", "c_s", "c_z"], ["cd"]))
    nodes.append(h.make_node("DequantizeLinear", ["r"] + sz(inits, "r", 0.0291, zr), ["rd"]))
    nodes.append(h.make_node("Add", ["cd", "rd"], ["s"]))
    nodes.append(h.make_node("Relu", ["s"], ["sr"]))
    nodes.append(h.make_node("QuantizeLinear", ["sr"] + sz(inits, "y", 0.0583, zy), ["y"]))
    o = (hw - 1) // stride + 1
    r = rng.integers(0, 256, [n, cout, o, o]).astype(np.uint8)
    save(name, nodes, [h.make_tensor_value_info("x", T.FLOAT, [n, cin, hw, hw]),
                       h.make_tensor_value_info("r", T.UINT8, [n, cout, o, o])],
         [h.make_tensor_value_info("c", T.UINT8, [n, cout, o, o]), h.make_tensor_value_info("y", T.UINT8, [n, cout, o, o])],
         inits, [("x", x), ("r", r)])


pairs("pairs_z0", 0.0417, 0, 1, 0, 2, 0)
pairs("pairs_z", 0.0213, 131, 4, 255, 2, 7)
conv("conv_c5_m14_s2_b3", 3, 5, 17, 14, 2, 128, 3, 200, 0)
conv("conv_c17_m13_s1", 1, 17, 5, 13, 1, 0, 255, 77, 131)
conv("conv_c3_m9_s2", 1, 3, 7, 9, 2, 255, 120, 0, 255)
conv("conv_c8_m7_s1_b3", 3, 8, 13, 7, 1, 17, 64, 255, 9)
