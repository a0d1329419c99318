# make_bad_quant.py — writes bad/zero_scale.onnx (QuantizeLinear with y_scale 0) and
# bad/axis_mismatch.onnx (DequantizeLinear whose per-axis scale has the wrong length):
# importing either must exit 1 naming the node. Run with Debian's /usr/bin/python3.
import os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as T

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bad")
os.makedirs(out, exist_ok=True)
g = h.make_graph([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q_zero")], "zero_scale",
                 [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.UINT8, [2, 3])],
                 [nh.from_array(np.array(0, np.float32), "s"), nh.from_array(np.array(3, np.uint8), "z")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), os.path.join(out, "zero_scale.onnx"))
g = h.make_graph([h.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq_axis", axis=1)], "axis_mismatch",
                 [h.make_tensor_value_info("x", T.INT8, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                 [nh.from_array(np.array([0.5, 0.25], np.float32), "s"), nh.from_array(np.zeros(2, np.int8), "z")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), os.path.join(out, "axis_mismatch.onnx"))
