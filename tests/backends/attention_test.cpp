// attention_test.cpp — the fused attention kernel (Extern "attention", lowered by
// core/loop/lower_attention.cpp) against the interpreter: odd sequence lengths (1, 7, 129),
// causal or not, with and without an additive mask (broadcast and full), batch 1 and 2, K/V
// shared across heads, head dims the register tile does not divide, and a self-attention
// with L != S; the causal shapes `lathe run` fuses by default (T 77 / 128, head dims 32 / 64 /
// 80, batch 4). Also checks that the interpreter's fused op equals the unfused composite.
#include <gtest/gtest.h>

#include <cmath>

#include "core/frontend/nn.h"
#include "core/frontend/tensor.h"
#include "core/ir/attention_op.h"
#include "core/ir/build.h"
#include "tests/backends/diff_util.h"
#include "tests/backends/test_env.h"

namespace lathe {
namespace {

Graph fused(int64_t B, int64_t H, int64_t L, int64_t S, int64_t E, int64_t Ev, bool causal, int mask_kind, bool shared_kv = false,
            int64_t kv_heads = 0) {
  int64_t kvh = kv_heads ? kv_heads : shared_kv ? 1 : H;
  NodeRef q = prim::input("q", DType::F32, {B, H, L, E});
  NodeRef k = prim::input("k", DType::F32, {B, kvh, S, E});
  NodeRef v = prim::input("v", DType::F32, {B, kvh, S, Ev});
  NodeRef m = nullptr;
  if (mask_kind == 1) m = prim::input("m", DType::F32, {B, 1, 1, S});  // padding-style, broadcast
  if (mask_kind == 2) m = prim::input("m", DType::F32, {B, H, L, S});
  return Graph::from_outputs({{"out", attention_call(q, k, v, m, causal, 1.0 / std::sqrt((double)E))}});
}

TEST(FusedAttention, MatchesTheInterpreter) {
  test::DiffBatch batch;
  for (int64_t T : {1, 7, 129})
    for (bool causal : {false, true})
      for (int mk : {0, 1, 2}) {
        if (T == 129 && mk == 2 && !causal) continue;  // keep it fast
        std::string label = "T=" + std::to_string(T) + (causal ? " causal" : "") + " mask=" + std::to_string(mk);
        batch.add(label + " B=1", fused(1, 2, T, T, 16, 16, causal, mk));
        if (T != 129) batch.add(label + " B=2", fused(2, 3, T, T, 16, 16, causal, mk));
      }
  batch.add("E=5 Ev=3 (scalar P·V)", fused(1, 2, 33, 33, 5, 3, true, 0));
  batch.add("E=64 Ev=64 T=70", fused(1, 1, 70, 70, 64, 64, true, 1));
  batch.add("Ev=8 (one vector)", fused(2, 1, 20, 20, 12, 8, false, 1));
  batch.add("K/V shared by heads", fused(2, 3, 17, 17, 16, 16, true, 0, true));
  batch.add("grouped heads (GQA 6/2)", fused(2, 6, 33, 33, 16, 16, true, 1, false, 2));
  batch.add("grouped heads (GQA 6/3) E=5", fused(1, 6, 9, 12, 5, 3, false, 2, false, 3));
  batch.add("L=5 S=40", fused(1, 2, 5, 40, 16, 16, false, 1));
  batch.add("L=40 S=5 causal", fused(1, 2, 40, 5, 16, 16, true, 0));
  // the shapes `lathe run` now fuses by default (causal ONNX exports: scripting/attention_on_load.h):
  // GPT-2's T 128 and d 64, odd T, head dims 32 / 80, batch 4
  batch.add("causal T=128 E=64", fused(1, 2, 128, 128, 64, 64, true, 0));
  batch.add("causal T=77 E=32 B=4", fused(4, 3, 77, 77, 32, 32, true, 0));
  batch.add("causal T=77 E=80 B=4 mask", fused(4, 2, 77, 77, 80, 80, true, 1));
  batch.add("causal T=128 E=80 mask", fused(1, 2, 128, 128, 80, 80, true, 1));
  EXPECT_EQ(batch.run(), 0);
}

// Q, K, V as head-split views of one [B, T, 3·H·E] buffer (GPT-2's layout): the kernel reads
// them in place (no copies), and V's transposed view takes the scalar P·V path.
TEST(FusedAttention, ReadsStridedViewsInPlace) {
  test::DiffBatch batch;
  for (int64_t T : {7, 33}) {
    int64_t H = 3, E = 16;
    Tensor qkv = input("qkv", {2, T, 3 * H * E});
    auto heads = [&](int64_t part) { return permute(reshape(narrow(qkv, 2, part * H * E, H * E), {2, T, H, E}), {0, 2, 1, 3}); };
    Tensor q = heads(0), k = heads(1), v = heads(2);
    NodeRef o = attention_call(q.node(), k.node(), v.node(), nullptr, true, 0.25);
    Graph g = Graph::from_outputs({{"out", o}});
    Program p = build_program(g);
    for (auto& kk : p.kg.kernels)
      if (kk.kind == "attention") {
        EXPECT_EQ(kk.inputs.size(), 1u) << "reads the qkv buffer once, no copies";
      }
    batch.add("views T=" + std::to_string(T), g);
    // V read transposed ([.., E, T] viewed as [.., T, E]): columns are not contiguous
    Tensor vt = input("vt", {2, H, E, T});
    NodeRef o2 = attention_call(q.node(), k.node(), transpose(vt, -1, -2).node(), nullptr, false, 0.25);
    batch.add("transposed V T=" + std::to_string(T), Graph::from_outputs({{"out", o2}}));
  }
  EXPECT_EQ(batch.run(), 0);
}

// The register tiles on the host's 16 lanes (8 rows x 32 keys / value columns; P·V on 8
// lanes where Ev is no multiple of 16) and a causal tile's masked panels skipped (score panels
// above the diagonal, P·V keys after an MR block's last query), each on and off, against the
// interpreter: odd T (1, 7, 33, 77, 129), L != S both ways, head dims 5 / 3 (scalar), 16 / 8,
// 48 / 24, 64 / 80, batch 1 and 3, tiles whose BK is 48 (one 16-lane panel) or 24 (8 lanes).
// With the skip, a diagonal tile's softmax rows stop at their MR block's last key, rounded up
// to whole vectors ("short-rows"; LATHE_ATTENTION_CAUSAL_ROWS=0 runs them over the whole tile);
// MR 3 puts blocks across a vector's boundary (a row's own keys rounded up do not cover its block).
TEST(FusedAttention, HostLanesAndCausalSkipMatchTheInterpreter) {
  // (the CPU lowering's tiles: cuda renders its own attention kernel)
  if (test::test_backend() != "llvm" && test::test_backend() != "c") GTEST_SKIP() << "CPU backends only";
  struct Mode {
    const char *lanes, *skip, *tile, *rows = "1", *transpose = "1";
  };
  for (Mode m : {Mode{"16", "1", nullptr}, Mode{"16", "0", nullptr}, Mode{"8", "1", nullptr}, Mode{"16", "1", "32x48"},
                 Mode{"16", "1", "64x24x8"}, Mode{"16", "1", nullptr, "0"}, Mode{"16", "1", "16x48x8"},
                 Mode{"16", "1", "48x32x3"}, Mode{"16", "1", nullptr, "1", "0"}, Mode{"16", "1", "40x40x4"}}) {
    test::ScopedEnv lanes("LATHE_ATTENTION_LANES", m.lanes), skip("LATHE_ATTENTION_CAUSAL_SKIP", m.skip),
        tile("LATHE_ATTENTION_TILE", m.tile), rows("LATHE_ATTENTION_CAUSAL_ROWS", m.rows),
        transpose("LATHE_ATTENTION_TRANSPOSE", m.transpose);
    const std::string mode = std::string("lanes=") + m.lanes + " skip=" + m.skip + " tile=" + (m.tile ? m.tile : "-") +
                             " rows=" + m.rows + " transpose=" + m.transpose;
    // the schedule says which tile ran (so this test fails if the 16-lane form is never taken)
    const std::string log = test::default_schedule_log(fused(1, 2, 77, 77, 64, 64, true, 0));
    const bool eight = m.tile && (std::string(m.tile) == "64x24x8" || std::string(m.tile) == "40x40x4");
    const std::string want = std::string(" lanes=") + (eight ? "8" : m.lanes);
    EXPECT_NE(log.find(want), std::string::npos) << mode << ": " << log;
    EXPECT_EQ(log.find("skip-masked") != std::string::npos, std::string(m.skip) == "1") << mode << ": " << log;
    EXPECT_EQ(log.find("short-rows") != std::string::npos, std::string(m.skip) == "1" && std::string(m.rows) == "1")
        << mode << ": " << log;
    // K's rows are contiguous here: its tile copy is marked a transpose (LATHE_ATTENTION_TRANSPOSE=0: not)
    EXPECT_EQ(log.find("k-transpose") != std::string::npos, std::string(m.transpose) == "1") << mode << ": " << log;
    test::DiffBatch batch;
    for (int64_t T : {1, 7, 33, 77, 129})
      for (int64_t B : {1, 3}) {
        const std::string t = mode + " T=" + std::to_string(T) + " B=" + std::to_string(B);
        batch.add(t + " causal E=64", fused(B, 2, T, T, 64, 64, true, 0));
        if (T == 1 || T == 33 || T == 129) {
          batch.add(t + " causal E=48 Ev=24 mask", fused(B, 2, T, T, 48, 24, true, 1));
          batch.add(t + " E=64 Ev=80", fused(B, 1, T, T, 64, 80, false, 0));
        }
      }
    batch.add(mode + " causal E=16 Ev=8 B=3", fused(3, 2, 37, 37, 16, 8, true, 2));
    batch.add(mode + " causal E=5 Ev=3", fused(1, 2, 33, 33, 5, 3, true, 0));
    batch.add(mode + " causal L=40 S=7", fused(1, 2, 40, 7, 16, 16, true, 0));
    batch.add(mode + " causal L=7 S=41", fused(3, 1, 7, 41, 32, 32, true, 1));
    batch.add(mode + " causal L=97 S=131", fused(1, 1, 97, 131, 64, 64, true, 0));
    EXPECT_EQ(batch.run(), 0) << mode;
  }
}

TEST(FusedAttention, InterpreterEqualsTheComposite) {
  for (bool causal : {false, true}) {
    Shape s{2, 3, 29, 16};
    Tensor q = input("q", s), k = input("k", s), v = input("v", s), m = input("m", {2, 1, 1, 29});
    Graph want = Graph::from_outputs({{"out", scaled_dot_product_attention(q, k, v, m, causal).node()}});
    Graph got = Graph::from_outputs({{"out", attention_call(q.node(), k.node(), v.node(), m.node(), causal, 0.25)}});
    TensorMap in = random_inputs(want, 3);
    std::string why = test::compare_outputs(interpret(got, in), interpret(want, in));
    EXPECT_EQ(why, "") << (causal ? "causal" : "");
  }
}

TEST(FusedAttention, ShapeErrorsAreUserErrors) {
  NodeRef q = prim::input("q", DType::F32, {1, 2, 8, 16});
  NodeRef k = prim::input("k", DType::F32, {1, 2, 8, 15});
  NodeRef v = prim::input("v", DType::F32, {1, 2, 8, 16});
  EXPECT_THROW(attention_call(q, k, v, nullptr, false, 1.0), UserError);
  NodeRef k2 = prim::input("k2", DType::F32, {1, 2, 8, 16});
  NodeRef bad_mask = prim::input("m", DType::F32, {1, 2, 3, 8});
  EXPECT_THROW(attention_call(q, k2, v, bad_mask, false, 1.0), UserError);
}

}  // namespace
}  // namespace lathe
