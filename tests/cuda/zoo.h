// zoo.h — the graphs the cuda tests render, compile and (with a GPU) run: every primitive
// op in every dtype the backend claims, views, reductions, fusion patterns (softmax,
// layernorm, matmul), the test_graphs zoo of tests/passes, and the samples + bench workloads.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "../passes/test_graphs.h"
#include "core/frontend/autodiff.h"
#include "core/frontend/nn.h"
#include "core/frontend/samples.h"
#include "core/frontend/tensor.h"
#include "core/ir/attention_op.h"
#include "core/ir/build.h"

namespace lathe::cuda_test {

using Named = std::pair<std::string, Graph>;

inline Graph one(NodeRef n) { return Graph::from_outputs({{"y", n}}); }

inline std::vector<Named> op_graphs() {
  std::vector<Named> r;
  for (DType dt : test_graphs::kAllDTypes) {
    std::string d(dtype_name(dt));
    NodeRef x = prim::input("x", dt, {3, 37});
    std::vector<std::pair<std::string, NodeRef>> outs;
    for (Op op : {Op::Neg, Op::Recip, Op::Sin, Op::Exp2, Op::Log2, Op::Sqrt, Op::Not})
      if (prim::check_node(op, dt, x->shape, {x}, {}).empty()) outs.push_back({std::string(op_name(op)), prim::unary(op, x)});
    NodeRef b = prim::input("b", dt, {3, 37});
    for (Op op : {Op::Add, Op::Mul, Op::IDiv, Op::Mod, Op::Max, Op::And, Op::Or, Op::Xor, Op::CmpLT, Op::CmpNE}) {
      DType rt = (op == Op::CmpLT || op == Op::CmpNE) ? DType::Bool : dt;
      if (prim::check_node(op, rt, x->shape, {x, b}, {}).empty()) outs.push_back({std::string(op_name(op)), prim::binary(op, x, b)});
    }
    for (DType to : test_graphs::kAllDTypes)
      if (to != dt) outs.push_back({"cast_" + std::string(dtype_name(to)), prim::cast(x, to)});
    for (ReduceOp ro : {ReduceOp::Add, ReduceOp::Max, ReduceOp::Mul})
      for (std::vector<int> axes : {std::vector<int>{1}, {0}, {0, 1}})
        outs.push_back({"reduce_" + std::string(reduce_op_name(ro)) + std::to_string(axes.size()) + std::to_string(axes[0]),
                        prim::reduce(ro, x, axes)});
    NodeRef c = prim::input("c", DType::Bool, {3, 37});
    outs.push_back({"where", prim::where(c, x, b)});
    r.push_back({"ops_" + d, Graph::from_outputs(outs)});
  }
  return r;
}

inline std::vector<Named> pattern_graphs() {
  std::vector<Named> r;
  NodeRef x = prim::input("x", DType::F32, {64, 512});
  ViewSpec base = ViewSpec::contiguous(x->shape);
  r.push_back({"views", Graph::from_outputs({{"perm", prim::view(x, view_permute(base, {1, 0}))},
                                             {"flip", prim::view(x, view_flip(base, {0, 1}))},
                                             {"shrink", prim::view(x, view_shrink(base, {{1, 3}, {2, 500}}))},
                                             {"pad", prim::view(x, view_pad(base, {{1, 2}, {0, 3}}))}})});
  NodeRef col = prim::input("col", DType::F32, {64, 1});
  r.push_back({"broadcast", one(prim::binary(Op::Add, x, prim::view(col, view_expand(ViewSpec::contiguous(col->shape), {64, 512}))))});
  r.push_back({"row_sum", one(prim::reduce(ReduceOp::Add, x, {1}))});
  r.push_back({"col_max", one(prim::reduce(ReduceOp::Max, x, {0}))});
  r.push_back({"full_sum", one(prim::reduce(ReduceOp::Add, x, {0, 1}))});
  // few output tiles and a long K: the tiled kernel splits K over blocks (the partial tiles
  // meet in a workspace); with an epilogue (bias + relu) and with sizes that divide nothing
  NodeRef a = prim::input("a", DType::F32, {64, 2048}), w = prim::input("w", DType::F32, {2048, 96});
  NodeRef bias = prim::input("bias", DType::F32, {1, 96});
  auto mm = [](NodeRef l, NodeRef r) {
    int64_t m = l->shape[0].value(), k = l->shape[1].value(), n = r->shape[1].value();
    NodeRef lv = prim::view(l, view_expand(*view_reshape(ViewSpec::contiguous(l->shape), {m, k, 1}), {m, k, n}));
    NodeRef rv = prim::view(r, view_expand(*view_reshape(ViewSpec::contiguous(r->shape), {1, k, n}), {m, k, n}));
    return prim::view(prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, lv, rv), {1}),
                      *view_reshape(ViewSpec::contiguous(Shape{m, 1, n}), {m, n}));
  };
  NodeRef biased = prim::binary(Op::Add, mm(a, w), prim::view(bias, view_expand(ViewSpec::contiguous(bias->shape), {64, 96})));
  r.push_back({"split_k_bias_relu", one(prim::binary(Op::Max, biased, prim::constant(0, DType::F32, {64, 96})))});
  r.push_back({"split_k_odd", one(mm(prim::input("p", DType::F32, {130, 1100}), prim::input("q", DType::F32, {1100, 70})))});
  for (const char* s : {"softmax", "layernorm", "matmul", "eltwise", "mlp", "conv2d"})
    r.push_back({std::string("bench_") + s, build_sample(s)});
  // 8-bit integer contractions (the dp4a tiles): u8 x i8, i8 x i8, u8 x u8 at prime sizes, K
  // no multiple of 4 or 32, a batch; with an epilogue reading the i32 sum
  {
    Tensor ua = input("ua", {37, 70}, DType::U8), sb = input("sb", {70, 29}, DType::I8);
    r.push_back({"matmul_u8_i8_odd", one(matmul_integer(ua, sb).node())});
    Tensor sa = input("sa", {3, 17, 33}, DType::I8), sb3 = input("sb3", {3, 33, 9}, DType::I8);
    r.push_back({"matmul_i8_i8_batched", one(matmul_integer(sa, sb3).node())});
    Tensor ub = input("ub", {70, 131}, DType::U8);
    r.push_back({"matmul_u8_u8_epilogue", one(to(matmul_integer(ua, ub), DType::F32).node())});
  }
  // the fused attention op (flash-attention rules): causal with a broadcast additive mask,
  // plain, and head dims of odd size
  {
    NodeRef q = prim::input("aq", DType::F32, {2, 3, 37, 16}), k = prim::input("ak", DType::F32, {2, 3, 37, 16});
    NodeRef v = prim::input("av", DType::F32, {2, 3, 37, 16}), m = prim::input("am", DType::F32, {2, 1, 1, 37});
    r.push_back({"attention_causal_mask", one(attention_call(q, k, v, m, true, 0.25))});
    r.push_back({"attention_plain", one(attention_call(q, k, v, nullptr, false, 0.125))});
    NodeRef q5 = prim::input("q5", DType::F32, {1, 2, 9, 5}), k5 = prim::input("k5", DType::F32, {1, 1, 11, 5});
    NodeRef v3 = prim::input("v3", DType::F32, {1, 1, 11, 3});
    r.push_back({"attention_odd_dims", one(attention_call(q5, k5, v3, nullptr, true, 0.5))});
    // several query tiles (64 rows) and key tiles (32 keys) of the FlashAttention kernel, a full
    // mask, K/V shared by heads, L != S
    NodeRef ql = prim::input("ql", DType::F32, {1, 2, 130, 24}), kl = prim::input("kl", DType::F32, {1, 1, 130, 24});
    NodeRef vl = prim::input("vl", DType::F32, {1, 1, 130, 20}), ml = prim::input("ml", DType::F32, {1, 2, 130, 130});
    r.push_back({"attention_tiles_causal_full_mask", one(attention_call(ql, kl, vl, ml, true, 0.2))});
    NodeRef ks = prim::input("ks", DType::F32, {1, 2, 70, 24}), vs = prim::input("vs", DType::F32, {1, 2, 70, 20});
    r.push_back({"attention_tiles_L130_S70", one(attention_call(ql, ks, vs, nullptr, false, 0.2))});
    r.push_back({"attention_tiles_L130_S70_causal_stats", one(attention_call(ql, ks, vs, nullptr, true, 0.2, true))});
    NodeRef qg = prim::input("qg", DType::F32, {2, 6, 40, 16}), kg = prim::input("kg", DType::F32, {2, 2, 40, 16});
    NodeRef vg = prim::input("vg", DType::F32, {2, 2, 40, 16});
    r.push_back({"attention_grouped_heads", one(attention_call(qg, kg, vg, nullptr, true, 0.25))});
    // the fused backward (Extern "attention_bwd": dQ, dK|dV, dS) and the stats forward
    for (bool causal : {true, false}) {
      Tensor tq(q), tk(k), tv(v), tm(m), tq5(q5), tk5(k5), tv3(v3);
      Tensor y(attention_call(q, k, v, m, causal, 0.25));
      auto g = grad(sum(y * y), {tq, tk, tv, tm});
      std::string c = causal ? "_causal" : "";
      r.push_back({"attention_grad" + c, Graph::from_outputs({{"dq", g[0].node()}, {"dk", g[1].node()}, {"dv", g[2].node()}, {"dm", g[3].node()}})});
      Tensor y5(attention_call(q5, k5, v3, nullptr, causal, 0.5));
      auto g5 = grad(sum(y5), {tq5, tk5, tv3});
      r.push_back({"attention_grad_odd_dims" + c,
                   Graph::from_outputs({{"dq", g5[0].node()}, {"dk", g5[1].node()}, {"dv", g5[2].node()}})});
      // several query and key tiles (32 rows each on cuda), L != S, head dims 24/20 (no float4
      // chunks), and K/V shared by groups of query heads
      Tensor tql(ql), tks(ks), tvs(vs), tqg(qg), tkg(kg), tvg(vg);
      Tensor yl(attention_call(ql, ks, vs, nullptr, causal, 0.2));
      auto gl = grad(sum(yl * yl), {tql, tks, tvs});
      r.push_back({"attention_grad_tiles_L130_S70" + c,
                   Graph::from_outputs({{"dq", gl[0].node()}, {"dk", gl[1].node()}, {"dv", gl[2].node()}})});
      Tensor yg(attention_call(qg, kg, vg, nullptr, causal, 0.25));
      auto gg = grad(sum(yg * yg), {tqg, tkg, tvg});
      r.push_back({"attention_grad_grouped_heads" + c,
                   Graph::from_outputs({{"dq", gg[0].node()}, {"dk", gg[1].node()}, {"dv", gg[2].node()}})});
    }
  }
  return r;
}

inline std::vector<Named> sample_graphs() {
  std::vector<Named> r;
  for (auto& n : sample_names()) r.push_back({n, build_sample(n)});
  for (auto& [n, g] : test_graphs::all_test_graphs())
    if (n != "extern") r.push_back({"test_graphs_" + n, g});
  return r;
}

}  // namespace lathe::cuda_test
