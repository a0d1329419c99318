#!/usr/bin/env python3
"""compare-profile.py's join on a QDQ model's shapes and names (resnet50_qdq's, cut down):
ORT runs its QLinearConv NHWC and names it "<node>_token_N"; Lathe pads the stem's input in a
kernel of its own ahead of the conv; two blocks share one compiled conv whose sources list the
first block's nodes too; ORT names a fused attention MatMul "<node>/MatMulScaleFusion/". Plain python3; exits 1 on a wrong join."""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("cp", sys.argv[1])
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)


def k(name, kind, shape, sources, us):
    return {"name": name, "kind": kind, "shape": shape, "sources": sources, "min_us": us, "median_us": us,
            "flops": 1e6 if kind == "matmul" else 1e3}


def n(name, op, shape, us, order):
    return {"name": name, "op": op, "outputs": [shape], "min_us": us, "median_us": us, "order": order}


lathe = {"kernels": [
    k("k0_pad", "elementwise", [1, 3, 230, 230], ["image_QuantizeLinear:QuantizeLinear", "/conv1/Conv:Conv"], 10),
    k("k1_conv", "matmul", [1, 64, 112, 112], ["image_QuantizeLinear:QuantizeLinear", "/conv1/Conv:Conv",
                                               "/relu/Relu_output_0_QuantizeLinear:QuantizeLinear"], 100),
    k("k2_conv", "matmul", [1, 64, 112, 112], ["/conv1/Conv:Conv", "/relu/Relu:Relu", "/b1/conv/Conv:Conv",
                                               "/b1/relu/Relu_output_0_QuantizeLinear:QuantizeLinear"], 50),
    k("k3_conv", "matmul", [1, 64, 112, 112], ["/conv1/Conv:Conv", "/relu/Relu:Relu", "/b2/conv/Conv:Conv",
                                               "/b2/relu/Relu_output_0_QuantizeLinear:QuantizeLinear"], 40),
    k("k4_attn", "matmul", [1, 12, 128, 128, 1], ["/b2/relu/Relu:Relu", "/b3/attn/MatMul:MatMul"], 30)]}
ort = {"nodes": [
    n("image_QuantizeLinear", "QuantizeLinear", [1, 3, 224, 224], 7, 0),
    n("Transpose", "Transpose", [1, 224, 224, 3], 5, 1),
    n("/conv1/Conv_token_1", "QLinearConv", [1, 112, 112, 64], 90, 2),
    n("/b1/conv/Conv_token_5", "QLinearConv", [1, 112, 112, 64], 45, 3),
    n("/b2/conv/Conv_token_9", "QLinearConv", [1, 112, 112, 64], 44, 4),
    n("/b3/attn/MatMul/MatMulScaleFusion/", "FusedMatMul", [1, 12, 128, 128], 25, 5)]}
rows = cp.join(lathe, ort, "min")
got = {r["kernels"][0]: (r["layer"], r["ort_ops"], r["ort_us"]) for r in rows}
want = {"k0_pad": ("k0 /conv1/Conv (Conv)", "QuantizeLinear", 7),
        "k1_conv": ("k1 /conv1/Conv (Conv)", "Transpose+QLinearConv", 95),
        "k2_conv": ("k2 /b1/conv/Conv (Conv)", "QLinearConv", 45),
        "k3_conv": ("k3 /b2/conv/Conv (Conv)", "QLinearConv", 44),
        "k4_attn": ("k4 /b3/attn/MatMul (MatMul)", "FusedMatMul", 25)}
bad = [f"{key}: {got.get(key)} != {w}" for key, w in want.items() if got.get(key) != w]
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("compare-profile-qdq-ok")
