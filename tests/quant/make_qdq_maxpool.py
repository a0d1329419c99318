# make_qdq_maxpool.py — writes qdq_maxpool/<case>/ (model.onnx + test_data_set_0/input_0.pb):
# QuantizeLinear → DequantizeLinear → MaxPool → QuantizeLinear → DequantizeLinear, for the
# `qdq-maxpool` rule's test (qdq_rules_test.cpp). The rule must pool the integers where the
# pool's DQ and Q share one positive scale and zero point, and leave the float pool alone
# otherwise (negative scale, different zero points or scales). Odd channels, prime sizes,
# batch 1 and 3, zero points at the type's edges, stride 2, padding, dilation, a window of
# padding only. Run with Debian's /usr/bin/python3 (onnx, numpy).
import os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T

rng = np.random.default_rng(11)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qdq_maxpool")


def case(name, shape, qtype, s_in, z_in, s_out, z_out, pool, spread=3.0):
    np_t = np.uint8 if qtype == T.UINT8 else np.int8
    x = (rng.standard_normal(shape) * spread).astype(np.float32)
    inits = [nh.from_array(np.array(s_in, np.float32), "s_in"), nh.from_array(np.array(z_in, np_t), "z_in"),
             nh.from_array(np.array(s_out, np.float32), "s_out"), nh.from_array(np.array(z_out, np_t), "z_out")]
    nodes = [h.make_node("QuantizeLinear", ["x", "s_in", "z_in"], ["q"]),
             h.make_node("DequantizeLinear", ["q", "s_in", "z_in"], ["dq"]),
             h.make_node("MaxPool", ["dq"], ["p"], **pool),
             h.make_node("QuantizeLinear", ["p", "s_out", "z_out"], ["q2"]),
             h.make_node("DequantizeLinear", ["q2", "s_out", "z_out"], ["y"])]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, [shape[0], shape[1], None, None])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    onnx.save_tensor(nh.from_array(x, "x"), os.path.join(d, "test_data_set_0", "input_0.pb"))


k3s2p1 = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
# fires
case("u8_z0_s2", [1, 5, 13, 11], T.UINT8, 0.05, 0, 0.05, 0, k3s2p1)
case("u8_z255_b3", [3, 7, 17, 19], T.UINT8, 0.03, 255, 0.03, 255, k3s2p1)
case("u8_z128_ceil", [1, 3, 23, 29], T.UINT8, 0.02, 128, 0.02, 128,
     dict(kernel_shape=[2, 3], strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1))
case("i8_zm128_k2", [1, 3, 11, 7], T.INT8, 0.04, -128, 0.04, -128, dict(kernel_shape=[2, 2]))
case("i8_z127_dil", [3, 5, 13, 17], T.INT8, 0.05, 127, 0.05, 127,
     dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], dilations=[2, 2]))
case("i8_z0_padonly", [1, 3, 2, 2], T.INT8, 0.05, 0, 0.05, 0,
     dict(kernel_shape=[2, 2], pads=[1, 1, 1, 1], dilations=[3, 3]))
# refused
case("neg_scale", [1, 5, 13, 11], T.UINT8, -0.05, 128, -0.05, 128, k3s2p1)
case("zp_differs", [1, 5, 13, 11], T.UINT8, 0.05, 3, 0.05, 4, k3s2p1)
case("scale_differs", [1, 5, 13, 11], T.INT8, 0.05, 0, 0.06, 0, k3s2p1)


# A residual sum of two requantized convs (ResNet's bottleneck end, odd channels, batch 3, a
# stride-2 shortcut): DQ(Q(conv_a)) + DQ(Q(conv_b)) → Relu. The int8 GEMMs write the u8
# requantized values, the sum's kernel reads those (qdq_rules_test.cpp, QdqResidual).
def residual(name, n, c, m, hw):
    x = (rng.standard_normal([n, c, hw, hw]) * 2).astype(np.float32)
    wa = (rng.standard_normal([m, c, 1, 1]) * 0.3).astype(np.float32)
    wb = (rng.standard_normal([m, c, 3, 3]) * 0.1).astype(np.float32)
    inits, nodes = [], []
    def q(v, s, z, t=np.uint8):
        inits.extend([nh.from_array(np.array(s, np.float32), v + "_s"), nh.from_array(np.array(z, t), v + "_z")])
        nodes.append(h.make_node("QuantizeLinear", [v, v + "_s", v + "_z"], [v + "_q"]))
        nodes.append(h.make_node("DequantizeLinear", [v + "_q", v + "_s", v + "_z"], [v + "_dq"]))
        return v + "_dq"
    def wq(wname, w):
        s = (np.abs(w).max(axis=(1, 2, 3)) / 127).astype(np.float32)
        qw = np.clip(np.rint(w / s.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
        inits.extend([nh.from_array(qw, wname + "_q"), nh.from_array(s, wname + "_s"), nh.from_array(np.zeros(len(s), np.int8), wname + "_z")])
        nodes.append(h.make_node("DequantizeLinear", [wname + "_q", wname + "_s", wname + "_z"], [wname + "_dq"], axis=0))
        return wname + "_dq"
    xd = q("x", 0.03, 131)
    nodes.append(h.make_node("Conv", [xd, wq("wa", wa)], ["a"], strides=[2, 2]))
    nodes.append(h.make_node("Conv", [xd, wq("wb", wb)], ["b"], strides=[2, 2], pads=[1, 1, 1, 1]))
    ad, bd = q("a", 0.05, 120), q("b", 0.04, 255)
    nodes.append(h.make_node("Add", [ad, bd], ["s"]))
    nodes.append(h.make_node("Relu", ["s"], ["y"]))
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, [n, c, hw, hw])],
                     [h.make_tensor_value_info("y", T.FLOAT, [n, m, None, None])], inits)
    mdl = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    onnx.checker.check_model(mdl)
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(mdl, os.path.join(d, "model.onnx"))
    onnx.save_tensor(nh.from_array(x, "x"), os.path.join(d, "test_data_set_0", "input_0.pb"))


residual("residual_b3", 3, 13, 37, 23)
