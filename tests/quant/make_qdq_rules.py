# make_qdq_rules.py — writes qdq_rules/<case>/ (model.onnx + test_data_set_0/input_0.pb), small QDQ
# graphs in ONNX Runtime's layout for the `qdq` rule set's test (qdq_rules_test.cpp): the rules
# must fire where expected, and the rewritten graph must match the plain Q/DQ graph on the
# interpreter and on the compiled backends. Odd sizes, batch 1 and 64. Run with Debian's
# /usr/bin/python3 (onnx, numpy). No reference output: the test compares Lathe with itself.
import os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T

rng = np.random.default_rng(7)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qdq_rules")


def act_q(v):  # u8 asymmetric per tensor, range widened to 0
    lo, hi = min(v.min(), 0), max(v.max(), 0)
    s = np.float32((hi - lo) / 255)
    return s, np.uint8(round(-lo / s))


def w_q(w, axis, per_channel=True):  # i8 symmetric
    if per_channel:
        red = tuple(d for d in range(w.ndim) if d != axis)
        s = (np.abs(w).max(axis=red) / 127).astype(np.float32)
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.clip(np.rint(w / s.reshape(shape)), -127, 127).astype(np.int8)
    else:
        s = np.float32(np.abs(w).max() / 127)
        q = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
    return q, s


def save(case, nodes, inits, x, outs, shape):
    d = os.path.join(root, case)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    g = h.make_graph(nodes, case, [h.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                     [h.make_tensor_value_info(n, T.FLOAT, shape) for n in outs], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(d, "model.onnx"))
    onnx.save_tensor(nh.from_array(x, "x"), os.path.join(d, "test_data_set_0", "input_0.pb"))


def qdq_in(name, v, inits, nodes):  # float name -> Q -> DQ -> name + "_d"
    s, z = act_q(v)
    inits += [nh.from_array(np.array(s), name + "_s"), nh.from_array(np.array(z, np.uint8), name + "_z")]
    nodes += [h.make_node("QuantizeLinear", [name, name + "_s", name + "_z"], [name + "_q"]),
              h.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name + "_d"])]
    return s


def q_out(name, s, z, inits, nodes):  # name -> Q -> DQ -> name + "_o"
    inits += [nh.from_array(np.array(s, np.float32), name + "_os"), nh.from_array(np.array(z, np.uint8), name + "_oz")]
    nodes += [h.make_node("QuantizeLinear", [name, name + "_os", name + "_oz"], [name + "_oq"]),
              h.make_node("DequantizeLinear", [name + "_oq", name + "_os", name + "_oz"], [name + "_o"])]


def weight(name, w, axis, per_channel, inits, nodes):
    q, s = w_q(w, axis, per_channel)
    inits += [nh.from_array(q, name + "_q"), nh.from_array(np.array(s), name + "_s")]
    nodes.append(h.make_node("DequantizeLinear", [name + "_q", name + "_s"], [name + "_d"], axis=axis))
    return s


def bias(name, b, scale, inits, nodes):
    scale = np.asarray(scale, np.float32) * np.ones(b.shape, np.float32)
    inits += [nh.from_array(np.rint(b / scale).astype(np.int32), name + "_q"), nh.from_array(scale, name + "_s")]
    nodes.append(h.make_node("DequantizeLinear", [name + "_q", name + "_s"], [name + "_d"], axis=0))


# conv: batch 2, 5 -> 8 channels in 2 groups, 3x3 stride 2 pad 1 (the padding reads the input's
# zero point), per-channel weights, int32 bias, Relu, requantized; then a 1x1 conv, per-tensor
# weights, no bias, requantized with a zero point
x = rng.standard_normal((2, 6, 11, 9)).astype(np.float32) + 0.7
nodes, inits = [], []
sx = qdq_in("x", x, inits, nodes)
sw = weight("w1", rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, 0, True, inits, nodes)
bias("b1", rng.standard_normal(8).astype(np.float32) * 0.2, sx * sw, inits, nodes)
nodes += [h.make_node("Conv", ["x_d", "w1_d", "b1_d"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2], group=2),
          h.make_node("Relu", ["c1"], ["r1"])]
q_out("r1", 0.03, 0, inits, nodes)
weight("w2", rng.standard_normal((7, 8, 1, 1)).astype(np.float32) * 0.3, 0, False, inits, nodes)
nodes.append(h.make_node("Conv", ["r1_o", "w2_d"], ["c2"]))
q_out("c2", 0.02, 131, inits, nodes)
save("conv", nodes, inits, x, ["c2_o"], [2, 7, 6, 5])

# gemm: batch 1, 37 -> 23 with transB (per-channel along axis 0) and an int32 bias; then a MatMul
# with per-column weights 23 -> 13 (no bias, requantized)
x = rng.standard_normal((1, 37)).astype(np.float32)
nodes, inits = [], []
sx = qdq_in("x", x, inits, nodes)
sw = weight("w1", rng.standard_normal((23, 37)).astype(np.float32) * 0.2, 0, True, inits, nodes)
bias("b1", rng.standard_normal(23).astype(np.float32) * 0.2, sx * sw, inits, nodes)
nodes.append(h.make_node("Gemm", ["x_d", "w1_d", "b1_d"], ["g1"], transB=1))
q_out("g1", 0.04, 120, inits, nodes)
weight("w2", rng.standard_normal((23, 13)).astype(np.float32) * 0.2, 1, True, inits, nodes)
nodes.append(h.make_node("MatMul", ["g1_o", "w2_d"], ["m2"]))
q_out("m2", 0.03, 128, inits, nodes)
save("gemm_b1", nodes, inits, x, ["m2_o"], [1, 13])

# matmul: batch 64 (3-D [4, 16, 29]) x [29, 19] per column, Relu, requantized; a second MatMul
# with per-tensor weights whose result is read in float (no QuantizeLinear: no requant)
x = rng.standard_normal((4, 16, 29)).astype(np.float32)
nodes, inits = [], []
qdq_in("x", x, inits, nodes)
weight("w1", rng.standard_normal((29, 19)).astype(np.float32) * 0.2, 1, True, inits, nodes)
nodes += [h.make_node("MatMul", ["x_d", "w1_d"], ["m1"]), h.make_node("Relu", ["m1"], ["r1"])]
q_out("r1", 0.02, 0, inits, nodes)
weight("w2", rng.standard_normal((19, 5)).astype(np.float32) * 0.2, 1, False, inits, nodes)
nodes.append(h.make_node("MatMul", ["r1_o", "w2_d"], ["y"]))
save("matmul_b64", nodes, inits, x, ["y"], [4, 16, 5])

# conv over a large input (67500 elements: more than single_value evaluates as a whole; its zero
# point is read through the broadcast), 3x3 stride 4 pad 1 to 48 channels, per-channel, Relu, and
# a QuantizeLinear of 69312 elements (its 1/s_y too is read through the broadcast)
x = rng.standard_normal((1, 3, 150, 150)).astype(np.float32) + 0.3
nodes, inits = [], []
qdq_in("x", x, inits, nodes)
weight("w1", rng.standard_normal((48, 3, 3, 3)).astype(np.float32) * 0.3, 0, True, inits, nodes)
nodes += [h.make_node("Conv", ["x_d", "w1_d"], ["c1"], pads=[1, 1, 1, 1], strides=[4, 4]), h.make_node("Relu", ["c1"], ["r1"])]
q_out("r1", 0.02, 0, inits, nodes)
save("conv_big_input", nodes, inits, x, ["r1_o"], [1, 48, 38, 38])
