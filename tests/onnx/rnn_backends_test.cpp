// rnn_backends_test.cpp — the recurrent layers (ONNX LSTM / GRU / RNN, lower_rnn.cpp)
// compiled by a backend (LATHE_TEST_BACKEND: c, llvm) against the interpreter, at odd sizes,
// batch 1, an odd batch and batch 64, both directions, sequence lengths, peepholes and clip;
// and their steps compiled once: the distinct kernels do not grow with the sequence length.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "backends/kernel_dedup.h"
#include "backends/library.h"
#include "backends/library_rnn_math.h"
#include "backends/rnn_chooser.h"
#include "core/frontend/autodiff.h"
#include "core/import/onnx_import.h"
#include "core/ir/build.h"
#include "core/ir/rnn_op.h"
#include "tests/backends/diff_util.h"
#include "tests/backends/test_env.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using test::randt;

// the ONNX model of one recurrent node (opset 14)
struct Model : test::OnnxBuilder {
  Model() : test::OnnxBuilder(14) {}
  Graph load() { return test::OnnxBuilder::load("rnn.onnx"); }
};

struct Case {
  std::string op;  // LSTM, GRU, RNN
  int64_t T, B, I, H;
  std::string direction = "forward";
  bool lens = false, peep = false, states = false, clip = false;
  int lbr = 0;            // GRU linear_before_reset
  bool r_input = false;   // R a graph input rather than a weight
  std::vector<std::string> acts = {};  // activations (empty: the defaults)
  std::vector<float> alphas = {}, betas = {};
  bool input_forget = false;
  int layout = 0;
  bool lens_input = false;  // sequence_lens a graph input (values outside [0, T] too)
  bool bias = true;
  bool w_input = false;     // W a graph input rather than a weight
};

void attr_strings(onnx::NodeProto* n, const std::string& k, const std::vector<std::string>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRINGS);
  for (auto& x : v) a->add_strings(x);
}
void attr_floats(onnx::NodeProto* n, const std::string& k, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

// [T, B, …] -> [B, T, …] for layout 1
std::vector<int64_t> lay(const Case& c, std::vector<int64_t> d) {
  if (c.layout == 1) std::swap(d[0], d[1]);
  return d;
}

Graph recurrent_graph(const Case& c, TensorMap& inputs) {
  std::mt19937 rng(static_cast<unsigned>(c.T * 131 + c.B * 17 + c.H));
  const int G = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1;
  const int D = c.direction == "bidirectional" ? 2 : 1;
  Model m;
  m.input("X", lay(c, {c.T, c.B, c.I}));
  inputs["X"] = randt(lay(c, {c.T, c.B, c.I}), rng, 1.0);
  if (c.w_input) {
    m.input("W", {D, G * c.H, c.I});
    inputs["W"] = randt({D, G * c.H, c.I}, rng);
  } else {
    m.init("W", randt({D, G * c.H, c.I}, rng));
  }
  if (c.r_input) {
    m.input("R", {D, G * c.H, c.H});
    inputs["R"] = randt({D, G * c.H, c.H}, rng);
  } else {
    m.init("R", randt({D, G * c.H, c.H}, rng));
  }
  if (c.bias) m.init("B", randt({D, 2 * G * c.H}, rng));
  std::vector<std::string> ins{"X", "W", "R", c.bias ? "B" : "", "", "", ""};
  if (c.lens) {
    HostTensor L(DType::I32, {c.B});
    for (int64_t b = 0; b < c.B; ++b) L.set_i64(b, b == 0 ? c.T : 1 + (b * 7) % c.T);
    m.init("L", L);
    ins[4] = "L";
  } else if (c.lens_input) {
    HostTensor L(DType::I32, {c.B});
    for (int64_t b = 0; b < c.B; ++b) L.set_i64(b, b % 4 == 0 ? c.T + 3 : b % 4 == 1 ? -2 : (b * 5) % (c.T + 1));
    m.input("L", {c.B}, onnx::TensorProto::INT32);
    inputs["L"] = L;
    ins[4] = "L";
  }
  if (c.states) {
    m.init("h0", randt(lay(c, {D, c.B, c.H}), rng));
    ins[5] = "h0";
    if (c.op == "LSTM") {
      m.init("c0", randt(lay(c, {D, c.B, c.H}), rng));
      ins[6] = "c0";
    }
  }
  if (c.peep) {
    m.init("P", randt({D, 3 * c.H}, rng));
    ins.push_back("P");
  }
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  std::vector<std::string> outs{"Y", "Yh"};
  if (c.op == "LSTM") outs.push_back("Yc");
  auto* n = m.node(c.op, ins, outs);
  test::attr_i(n, "hidden_size", c.H);
  test::attr_s(n, "direction", c.direction);
  if (c.clip) test::attr_f(n, "clip", 0.8f);
  if (c.op == "GRU") test::attr_i(n, "linear_before_reset", static_cast<int64_t>(c.lbr));
  if (!c.acts.empty()) attr_strings(n, "activations", c.acts);
  if (!c.alphas.empty()) attr_floats(n, "activation_alpha", c.alphas);
  if (!c.betas.empty()) attr_floats(n, "activation_beta", c.betas);
  if (c.input_forget) test::attr_i(n, "input_forget", 1);
  if (c.layout) test::attr_i(n, "layout", c.layout);
  return m.load();
}

std::string label(const Case& c) {
  return c.op + " T" + std::to_string(c.T) + " B" + std::to_string(c.B) + " I" + std::to_string(c.I) + " H" +
         std::to_string(c.H) + " " + c.direction + (c.lens ? " lens" : "") + (c.peep ? " peep" : "") +
         (c.states ? " states" : "") + (c.clip ? " clip" : "") + (c.lbr ? " lbr" : "") + (c.r_input ? " R-input" : "") +
         (c.acts.empty() ? "" : " acts " + c.acts[0] + "…") + (c.input_forget ? " input_forget" : "") +
         (c.layout ? " layout1" : "") + (c.lens_input ? " lens-input" : "") + (c.bias ? "" : " no-bias") +
         (c.w_input ? " W-input" : "");
}

void expect_matches_interp(const Case& c) {
  TensorMap in;
  Graph g = recurrent_graph(c, in);
  TensorMap want = interpret(g, in);
  Executable exe = compile_graph(g, test::test_backend());
  EXPECT_EQ(test::compare_outputs(exe.run(in), want, 4), "") << label(c);
}

TEST(RecurrentBackends, LstmOddSizes) {
  expect_matches_interp({"LSTM", 7, 1, 5, 13});
  expect_matches_interp({"LSTM", 5, 3, 11, 7, "bidirectional", true, true, true, true});
  expect_matches_interp({"LSTM", 4, 64, 3, 9, "reverse", true, false, true});
  expect_matches_interp({"LSTM", 3, 1, 4, 257});  // a hidden size past one row block
}

TEST(RecurrentBackends, GruBothResetModes) {
  expect_matches_interp({"GRU", 6, 1, 5, 11, "forward", false, false, false, false, 0});
  expect_matches_interp({"GRU", 5, 3, 7, 6, "bidirectional", true, false, true, true, 1});
  expect_matches_interp({"GRU", 4, 64, 2, 5, "reverse", false, false, false, false, 0});
}

TEST(RecurrentBackends, RnnAndARecurrentWeightThatIsAnInput) {
  expect_matches_interp({"RNN", 9, 1, 3, 17, "bidirectional", false, false, true});
  expect_matches_interp({"RNN", 5, 5, 4, 6, "forward", true, false, false, true});
  expect_matches_interp({"LSTM", 5, 2, 3, 7, "forward", false, false, false, false, 0, true});
  expect_matches_interp({"GRU", 4, 1, 3, 5, "forward", false, false, false, false, 0, true});
}

size_t distinct_kernels(const Case& c) {
  TensorMap in;
  Program p = build_program(recurrent_graph(c, in));
  std::vector<const loop::LoopFunc*> fs;
  for (auto& f : p.funcs) fs.push_back(&f);
  return same_code(fs).distinct();
}

TEST(RecurrentBackends, StepsCompileOnce) {
  // every step but the first (zero initial state) is the same code at another offset; only
  // the concatenation tree of Y grows, by a level each time T doubles
  for (Case c : {Case{"LSTM", 0, 1, 6, 10, "bidirectional", true, true, true}, Case{"GRU", 0, 3, 5, 7}}) {
    c.T = 4;
    size_t few = distinct_kernels(c);
    c.T = 32;
    size_t many = distinct_kernels(c);
    EXPECT_LE(many, few + 4) << label(c) << ": " << few << " distinct kernels at T 4";
  }
}

// ---- the fused recurrence (core/ir/rnn_op.h): one Extern "rnn" kernel per direction ----

// LATHE_RNN=unrolled for the lifetime of this object: the importer's step-by-step graph
struct Unrolled : test::ScopedEnv {
  Unrolled() : ScopedEnv("LATHE_RNN", "unrolled") {}
};

int count_rnn_nodes(const Graph& g) {
  int n = 0;
  for (NodeRef x : g.toposort()) n += x->op == Op::Extern && x->attrs.name == "rnn";
  return n;
}

// The fused graph against the unrolled one (both in the interpreter: the fused node's
// reference against the composition of primitives), and compiled by the backend.
void expect_fused_matches_unrolled(const Case& c) {
  TensorMap in;
  Graph fused = recurrent_graph(c, in);
  Graph unrolled;
  {
    Unrolled u;
    TensorMap unused;
    unrolled = recurrent_graph(c, unused);
  }
  const int D = c.direction == "bidirectional" ? 2 : 1;
  EXPECT_EQ(count_rnn_nodes(fused), D) << label(c);
  EXPECT_EQ(count_rnn_nodes(unrolled), 0) << label(c);
  TensorMap want = interpret(unrolled, in);
  EXPECT_EQ(test::compare_outputs(interpret(fused, in), want, 4), "") << label(c) << " (interpreter)";
  Executable exe = compile_graph(fused, test::test_backend());
  EXPECT_EQ(test::compare_outputs(exe.run(in), want, 4), "") << label(c) << " (" << test::test_backend() << ")";
}

TEST(FusedRecurrence, LstmAtOddSizesAndBatches) {
  expect_fused_matches_unrolled({"LSTM", 7, 1, 5, 13});
  expect_fused_matches_unrolled({"LSTM", 5, 3, 11, 7, "bidirectional", true, true, true, true});
  expect_fused_matches_unrolled({"LSTM", 4, 64, 3, 9, "reverse", true, false, true});
  expect_fused_matches_unrolled({"LSTM", 3, 1, 4, 257});      // a hidden size past the 16-column tiles
  expect_fused_matches_unrolled({"LSTM", 6, 67, 5, 17, "forward", false, true, true, true});  // row tiles + remainder rows, threads
  expect_fused_matches_unrolled({"LSTM", 3, 5, 2, 3, "bidirectional", false, false, false, false, 0, true});  // R an input
  Case w{"LSTM", 4, 3, 7, 5, "bidirectional", true};
  w.w_input = true;  // W known only at run time: its transpose a copy kernel, the projection still inside
  expect_fused_matches_unrolled(w);
  // a batch big enough that threads take blocks of rows (and first strips of the projections'
  // columns): odd batch and hidden size
  expect_fused_matches_unrolled({"LSTM", 17, 67, 5, 61, "forward", false, false, true});
  expect_fused_matches_unrolled({"GRU", 17, 64, 3, 75, "reverse", false, false, false, false, 1});
}

// The CPU library kernel's register tiles (c and llvm only: the cuda rendering has its own
// tests above, and emulated these took ~3 min each).
//
// the projections inside the kernel run over copies of 16-column strips of WT in 6×16 tiles,
// the last 1..5 rows of each 72-row block in narrower tiles and the last G·H mod 16 columns
// apart: every row remainder (T·B 6..11, 73 = 72 + 1, 77 = 72 + 5), both directions (the
// second reads WT from column G·H on), odd input widths, batch 1 and 64
TEST(CpuRecurrenceTiles, ProjectionRowAndColumnRemainders) {
  for (int64_t T : {6, 7, 8, 9, 10, 11}) expect_fused_matches_unrolled({"LSTM", T, 1, 13, 19, "bidirectional"});
  expect_fused_matches_unrolled({"GRU", 73, 1, 7, 5, "reverse"});  // G·H 15: no full strip
  expect_fused_matches_unrolled({"RNN", 77, 1, 31, 33, "bidirectional"});
  expect_fused_matches_unrolled({"LSTM", 3, 64, 17, 31, "bidirectional", false, false, true});
  expect_fused_matches_unrolled({"GRU", 5, 7, 1, 7, "forward", false, false, false, false, 1});  // I 1
}

// steps of 2 rows or more read a copy of RT by 16-column strips in 6×16 tiles (the last 1..5
// rows in narrower ones, each gate's last H mod 16 columns in place): batches 2..7 and 64 (two
// threads take blocks of rows, the last one ragged), hidden sizes of one strip and a
// remainder, of whole strips, and under 16 (no strips), both GRU modes (the candidate gate's
// product apart), RNN, the attributes that touch the gates
TEST(CpuRecurrenceTiles, BatchRowsOverStripsOfTheRecurrentWeight) {
  for (int64_t B : {2, 3, 5, 7}) expect_fused_matches_unrolled({"LSTM", 5, B, 6, 19, "bidirectional"});
  expect_fused_matches_unrolled({"LSTM", 4, 4, 3, 32, "forward", true, true, true, true});
  expect_fused_matches_unrolled({"LSTM", 3, 6, 5, 15});  // H under 16: no strips
  expect_fused_matches_unrolled({"GRU", 4, 6, 3, 33, "reverse", false, false, true, false, 0});
  expect_fused_matches_unrolled({"GRU", 4, 3, 3, 17, "bidirectional", true, false, true, true, 1});
  expect_fused_matches_unrolled({"RNN", 6, 2, 2, 47, "forward"});
  expect_fused_matches_unrolled({"LSTM", 3, 65, 4, 20, "forward", true, false, true});
  expect_fused_matches_unrolled({"LSTM", 2, 1, 3, 31});  // batch 1: the row reduction
}

TEST(FusedRecurrence, LstmAttributes) {
  Case c{"LSTM", 5, 3, 4, 6, "bidirectional", false, true, true, true};
  c.input_forget = true;
  c.layout = 1;
  expect_fused_matches_unrolled(c);
  Case a{"LSTM", 4, 2, 3, 5, "bidirectional"};
  a.acts = {"HardSigmoid", "LeakyRelu", "ScaledTanh", "sigmoid", "Softsign", "Elu"};
  a.alphas = {0.3f, 0.05f, 0.9f, 1.1f};
  a.betas = {0.4f, 1.3f};
  expect_fused_matches_unrolled(a);
  Case l{"LSTM", 6, 9, 3, 5, "bidirectional"};
  l.lens_input = true;  // lengths known only at run time, some outside [0, T]
  expect_fused_matches_unrolled(l);
}

TEST(FusedRecurrence, GruAndRnn) {
  expect_fused_matches_unrolled({"GRU", 6, 1, 5, 11, "forward", false, false, false, false, 0});
  expect_fused_matches_unrolled({"GRU", 5, 3, 7, 6, "bidirectional", true, false, true, true, 1});
  expect_fused_matches_unrolled({"GRU", 4, 64, 2, 5, "reverse", false, false, true, true, 0});
  expect_fused_matches_unrolled({"GRU", 3, 7, 3, 19, "forward", false, false, false, false, 1});
  expect_fused_matches_unrolled({"RNN", 9, 1, 3, 17, "bidirectional", false, false, true});
  expect_fused_matches_unrolled({"RNN", 5, 64, 4, 6, "forward", true, false, false, true});
  Case g{"GRU", 4, 3, 2, 5, "forward"};
  g.acts = {"Relu", "Affine"};
  g.alphas = {0.7f};
  g.betas = {0.2f};
  g.layout = 1;
  expect_fused_matches_unrolled(g);
  Case nb{"GRU", 4, 2, 3, 6, "bidirectional", false, false, true, false, 1};
  nb.bias = false;  // linear_before_reset without a recurrent bias
  expect_fused_matches_unrolled(nb);
  Case r{"RNN", 5, 4, 3, 7, "reverse"};
  r.acts = {"Softplus"};
  r.lens_input = true;
  expect_fused_matches_unrolled(r);
}

// a recurrent weight of 256 KiB or more at a small batch: the CPU kernel splits the hidden
// units between threads that meet every step (odd unit counts: the last share is partial)
TEST(FusedRecurrence, HiddenUnitsSplitBetweenThreads) {
  test::ScopedEnv three("LATHE_RNN_THREADS", "3");  // split even on a busy machine (the kernel otherwise keeps one thread then)
  expect_fused_matches_unrolled({"LSTM", 5, 1, 3, 130, "bidirectional", true, true, true, true});
  expect_fused_matches_unrolled({"GRU", 4, 2, 3, 150, "reverse", false, false, true, false, 0});
  expect_fused_matches_unrolled({"GRU", 4, 3, 3, 149, "forward", true, false, true, true, 1});
  Case r{"RNN", 6, 1, 2, 261, "forward"};
  r.lens_input = true;
  expect_fused_matches_unrolled(r);
}

// (The CPU library kernel only, as the tiles below.) RT read by blocks of 16 units (packed once for a constant RT, by the Team's round 0 for one
// that is an input) and WT by strips packed once: one thread and two (the Team), batch 1
// (registers over a block) and 4 / 5 (tiles over a block), hidden sizes of whole blocks and
// of a partial last block (100, 513, 149), both directions, T 1, GRU's two phases, R and W
// inputs (the Team takes RT of 256 KiB and more, T 4 and more; the rest runs on one thread
// either way); the second run of each program reads the cached copies
TEST(CpuRecurrenceTiles, RecurrentWeightByBlocksOneThreadAndTwo) {
  for (const char* threads : {"1", "2"}) {
    test::ScopedEnv limit("LATHE_RNN_THREADS", threads);
    for (Case c : {Case{"LSTM", 9, 1, 7, 100, "bidirectional", true, true, true}, Case{"LSTM", 5, 1, 13, 513},
                   Case{"LSTM", 1, 1, 5, 256, "reverse"}, Case{"LSTM", 6, 4, 3, 160, "forward", false, false, true, true},
                   Case{"GRU", 7, 1, 5, 160, "bidirectional", false, false, true, false, 0},
                   Case{"GRU", 4, 5, 3, 149, "reverse", false, false, false, true, 1}, Case{"RNN", 5, 1, 3, 300}}) {
      TensorMap in;
      Graph g = recurrent_graph(c, in);
      TensorMap want = interpret(g, in);
      Executable exe = compile_graph(g, test::test_backend());
      for (int run = 0; run < 2; ++run)
        EXPECT_EQ(test::compare_outputs(exe.run(in), want, 4), "") << label(c) << " threads " << threads << " run " << run;
    }
    Case r{"LSTM", 6, 1, 4, 200, "bidirectional"};
    r.r_input = true, r.w_input = true;
    expect_fused_matches_unrolled(r);
  }
}

// LATHE_RNN_THREADS unset: the chooser's warm-up runs one thread, the Team and one thread for
// the steps with the partners projecting chunks of steps ahead (taken over by the caller when
// a partner holds one too long) in turn: each run the interpreter's, batch 1 and 3, odd hidden
// sizes (a partial last block), T not a multiple of the chunk, both directions, W and R as
// inputs (no cached strips or blocks), and partners that stall inside a chunk
// (LATHE_RNN_STALL_US)
TEST(CpuRecurrenceTiles, StepsOnOneThreadWithTheProjectionsAhead) {
  // (no record: each layer's chooser warms up in this process)
  test::ScopedEnv chooser("LATHE_RNN_THREADS", nullptr), warm("LATHE_RNN_WARM", "3"), record("LATHE_RNN_RECORD", "0");
  for (const char* stall : {"0", "200"}) {
    test::ScopedEnv stalls("LATHE_RNN_STALL_US", stall);
    Case wr{"LSTM", 6, 1, 9, 136, "bidirectional"};
    wr.r_input = true, wr.w_input = true;
    for (const Case& c : {Case{"LSTM", 19, 1, 11, 149, "reverse", true, true, true}, Case{"LSTM", 5, 3, 6, 128},
                          Case{"GRU", 13, 1, 5, 161, "bidirectional", false, false, true, false, 0},
                          Case{"GRU", 4, 1, 3, 147, "forward", false, false, false, false, 1}, Case{"RNN", 5, 1, 7, 263},
                          wr}) {
      TensorMap in;
      Graph g = recurrent_graph(c, in);
      TensorMap want = interpret(g, in);
      Executable exe = compile_graph(g, test::test_backend());
      for (int run = 0; run < 10; ++run)  // the warm-up (LATHE_RNN_WARM=3): the first call, each of the three modes three times
        EXPECT_EQ(test::compare_outputs(exe.run(in), want, 4), "") << label(c) << " stall " << stall << " run " << run;
    }
  }
}

// LATHE_RNN_THREADS unset, the chooser's probes on: past the warm-up its picks include retries
// and probes of the ways not chosen, in an order that follows the calls' timings; every run is
// the interpreter's whichever way it took: hidden 17 (one thread: RT under 256 KiB), 129 and
// 147 (a partial last block), batch 1 and 3, both directions, LSTM and GRU
TEST(CpuRecurrenceTiles, EveryRunTheInterpretersWhileTheChooserProbes) {
  test::ScopedEnv chooser("LATHE_RNN_THREADS", nullptr), probe("LATHE_RNN_PROBE", "1"), record("LATHE_RNN_RECORD", "0");
  for (int64_t H : {17, 129, 147})
    for (int64_t B : {1, 3})
      for (const Case& c : {Case{"LSTM", 9, B, 11, H, "bidirectional", false, B == 3, B == 3},
                            Case{"GRU", 6, B, 7, H, "reverse", false, false, true, false, 1}}) {
        TensorMap in;
        Graph g = recurrent_graph(c, in);
        TensorMap want = interpret(g, in);
        Executable exe = compile_graph(g, test::test_backend());
        for (int run = 0; run < 40; ++run) {
          const std::string err = test::compare_outputs(exe.run(in), want, 4);
          EXPECT_EQ(err, "") << label(c) << " run " << run;
          if (!err.empty()) break;
        }
      }
}

// The kernel's AVX-512 arithmetic and its AVX2 arithmetic (LATHE_RNN_AVX512=0), each against the
// interpreter: hidden sizes under one 16-unit block, of one and a few units past whole blocks
// (the masked last block, strip and activations), batch 1 (the block's registers) and 3 (tiles
// over the gates of a block or over strips), both directions, on one thread and two (the Team,
// H 129 and 147), GRU's two phases and RNN (1..3 gates a block), R and W as inputs (the row
// reduction and tiles over RT in place, the projections' strips copied one by one). On a CPU
// without AVX-512 both runs take the AVX2 path.
TEST(CpuRecurrenceTiles, Avx512AndAvx2PathsAtOddHiddenSizes) {
  std::vector<Case> cases;
  for (int64_t H : {1, 13, 17, 31, 129, 147})
    for (int64_t B : {1, 3}) {
      cases.push_back({"LSTM", 6, B, 19, H, "bidirectional", false, B == 3, B == 3});
      if (H >= 129 || H == 17) {
        cases.push_back({"GRU", 5, B, 7, H, H == 17 ? "reverse" : "bidirectional", false, false, true, false, 0});
        cases.push_back({"GRU", 4, B, 5, H, "forward", false, false, false, false, 1});
        cases.push_back({"RNN", 5, B, 3, H, "reverse"});
      }
    }
  Case rw{"LSTM", 5, 3, 11, 147, "bidirectional"};
  rw.r_input = true, rw.w_input = true;
  cases.push_back(rw);
  rw.B = 1;
  cases.push_back(rw);
  for (const char* avx512 : {"1", "0"}) {
    setenv("LATHE_RNN_AVX512", avx512, 1);
    rnn_math::select_isa();
    EXPECT_EQ(rnn_math::avx512(), avx512[0] == '1' && __builtin_cpu_supports("avx512f") && rnn_math::kAvx2);
    for (const char* threads : {"1", "2"}) {
      setenv("LATHE_RNN_THREADS", threads, 1);
      for (const Case& c : cases) {
        TensorMap in;
        Graph g = recurrent_graph(c, in);
        TensorMap want = interpret(g, in);
        Executable exe = compile_graph(g, test::test_backend());
        EXPECT_EQ(test::compare_outputs(exe.run(in), want, 4), "")
            << label(c) << " LATHE_RNN_AVX512=" << avx512 << " threads " << threads;
      }
    }
  }
  unsetenv("LATHE_RNN_THREADS");
  unsetenv("LATHE_RNN_AVX512");
  rnn_math::select_isa();
}

// two callers at once share the persistent partner threads: whichever call a partner joins,
// both results are the interpreter's
TEST(CpuRecurrenceTiles, ConcurrentCallsShareThePartnerThreads) {
  test::ScopedEnv two("LATHE_RNN_THREADS", "2");
  Case c1{"LSTM", 12, 1, 5, 192}, c2{"GRU", 10, 2, 3, 176, "bidirectional"};
  TensorMap in1, in2;
  Graph g1 = recurrent_graph(c1, in1), g2 = recurrent_graph(c2, in2);
  TensorMap want1 = interpret(g1, in1), want2 = interpret(g2, in2);
  Executable e1 = compile_graph(g1, test::test_backend()), e2 = compile_graph(g2, test::test_backend());
  std::string err1, err2;
  std::thread t([&] {
    for (int i = 0; i < 20 && err2.empty(); ++i) err2 = test::compare_outputs(e2.run(in2), want2, 4);
  });
  for (int i = 0; i < 20 && err1.empty(); ++i) err1 = test::compare_outputs(e1.run(in1), want1, 4);
  t.join();
  EXPECT_EQ(err1, "") << label(c1);
  EXPECT_EQ(err2, "") << label(c2);
}

// one thread or the Team, by the medians of their recent wall times: warm-up alternates,
// the faster is then used with the other tried every kExplore calls, and a change of load
// (the chosen mode turning slow) switches back
TEST(FusedRecurrence, ChooserKeepsTheFasterModeAndNoticesALoadChange) {
  RnnModeChooser c;
  double cost[2] = {1000, 700};  // µs: the Team faster
  int team_calls = 0;
  for (int call = 0; call < 64; ++call) {
    const int next = c.peek();  // what the kernel wakes the partners by: the next pick
    int m = c.pick();
    EXPECT_EQ(m, next) << "call " << call;
    team_calls += m;
    c.record(m, cost[m] + (call % 3) * 10);
  }
  EXPECT_GE(c.calls(0), RnnModeChooser::kWarm);
  // the untimed first call, the warm-up, the retries and the probes that fill one thread's times
  EXPECT_GE(team_calls, 64 - 1 - 1 - 64 / RnnModeChooser::kExplore - (RnnModeChooser::kSettle - RnnModeChooser::kWarm));
  EXPECT_LT(c.median(1), c.median(0));
  cost[1] = 3000;  // the other core taken: the Team slows down
  int late_team = 0;
  for (int call = 0; call < 64; ++call) {
    int m = c.pick();
    if (call >= 16) late_team += m;
    c.record(m, cost[m]);
  }
  EXPECT_LE(late_team, 48 / RnnModeChooser::kExplore + 1);  // back to one thread, exploring only
  EXPECT_LT(c.median(0), c.median(1));
}

// a process that runs a model ten times after a first (`lathe run --iters 10`, the model bench):
// the first call is not timed, the warm-up is one call of each mode, so most of the ten run
// the fastest mode and their median is its time (with three calls of each, LATHE_RNN_WARM=3,
// the median was the warm-up's); a first time of the fastest mode made slow by load does not
// keep the chooser away from it until the retries: the probes retry a mode with fewer than
// kSettle times
TEST(FusedRecurrence, ChooserDecidesWithinTheFirstCalls) {
  for (int modes : {2, 3})
    for (int warm : {RnnModeChooser::kWarm, 3}) {
      RnnModeChooser c(modes, true, warm);
      const double cost[3] = {1000, 600, 900};  // µs: one thread, the Team, the projections ahead
      std::vector<double> ten;
      for (int call = 1; call <= 11; ++call) {
        const int m = c.pick();
        const double us = cost[m] * (call == 1 ? 1.5 : 1);  // the first call: cold
        if (call > 1) ten.push_back(us);
        c.record(m, us);
      }
      std::sort(ten.begin(), ten.end());
      const double median = 0.5 * (ten[4] + ten[5]);
      if (warm == RnnModeChooser::kWarm) {
        EXPECT_EQ(median, cost[1]) << "modes " << modes;
        // the others' warm-up calls and a probe while their times are fewer than kSettle
        EXPECT_GE(std::count(ten.begin(), ten.end(), cost[1]), 7) << "modes " << modes;
      } else if (modes == 3) {
        EXPECT_GT(median, cost[1]);  // the earlier warm-up (nine calls), for A/B
      }
    }
  for (int modes : {2, 3}) {
    RnnModeChooser c(modes, true);
    const double cost[3] = {900, 600, 1000};
    int first_team = 0;  // the first call after which the Team's median is the lowest
    auto team_best = [&] { return c.median(1) < c.median(0) && (modes < 3 || c.median(1) < c.median(2)); };
    for (int call = 1; call <= 64; ++call) {
      const int m = c.pick();
      const bool slow = m == 1 && c.calls(1) == 0;  // the Team's first timed call: 2.5x, under load
      c.record(m, slow ? 1500 : cost[m]);
      if (c.calls(m) > 0 && team_best() && !first_team) first_team = call;
    }
    EXPECT_GT(first_team, 0) << "modes " << modes;
    EXPECT_LE(first_team, 24) << "modes " << modes;  // (the retries and probes alone: call 36, three modes)
    EXPECT_LT(c.median(1), c.median(0)) << "modes " << modes;
  }
}

// a burst of load slows the Team for a few calls and passes: the chooser leaves the Team, and
// comes back after a retry and a few probes (kProbe calls after a Team call whose time beat the
// chosen mode's median), not after three retries of one in kExplore calls (two
// modes) or 2·kExplore (three); a probe that comes out slow ends the probes (a Team slow three
// calls in four is tried little more than the retries try it); with the probes off
// (LATHE_RNN_PROBE=0's default) the return takes the retries
TEST(FusedRecurrence, ChooserReturnsToTheTeamSoonAfterABurstOfLoad) {
  for (int modes : {2, 3})
    for (bool probe : {true, false}) {
      RnnModeChooser c(modes, probe);
      double cost[3] = {1000, 600, 900};  // µs: one thread, the Team, the projections ahead
      auto run = [&](int calls) {
        int per_mode[3] = {0, 0, 0};
        for (int i = 0; i < calls; ++i) {
          const int next = c.peek();
          const int m = c.pick();
          EXPECT_EQ(m, next);
          ++per_mode[m];
          c.record(m, cost[m] + (i % 3) * 5);
        }
        return std::array<int, 3>{per_mode[0], per_mode[1], per_mode[2]};
      };
      run(48);
      EXPECT_LT(c.median(1), c.median(0));
      cost[1] = 1500;  // the burst: the other core taken
      run(12);
      EXPECT_GT(c.median(1), c.median(0)) << "left the Team, modes " << modes;
      cost[1] = 600;   // the core is free again
      // how many calls until the Team's median is the lowest again
      auto team_best = [&] { return c.median(1) < c.median(0) && (modes < 3 || c.median(1) < c.median(2)); };
      int back = 0;
      while (back < 400 && !team_best()) run(1), ++back;
      const int team = run(32)[1];
      // a burst long enough to leave only slow kept times takes a retry first (one in kExplore
      // calls among modes - 1 others), then two probes
      const int bound = RnnModeChooser::kExplore * (modes - 1) + 2 * RnnModeChooser::kProbe + 2;
      if (probe) EXPECT_LE(back, bound) << "modes " << modes;
      else EXPECT_GT(back, bound) << "modes " << modes;
      EXPECT_GE(team, 32 - 32 / RnnModeChooser::kExplore - 1) << "modes " << modes << " probe " << probe;
      // a Team that stays slow: probed only until a probe is slow
      cost[1] = 3000;
      run(16);
      int64_t before = c.calls(1);
      run(64);
      EXPECT_LE(c.calls(1) - before, 64 / RnnModeChooser::kExplore + 1) << "modes " << modes << " probe " << probe;
      // a partner that gets the other core one call in four: the Team's median stays slow, and a
      // fast retry buys one probe more, not one call in kProbe for as long as a fast time is kept
      before = c.calls(1);
      int64_t team_calls = 0;
      for (int i = 0; i < 256; ++i) {
        const int m = c.pick();
        team_calls += m == 1;
        c.record(m, m == 1 ? (team_calls % 4 == 0 ? 600 : 1500) : cost[m]);
      }
      EXPECT_GT(c.median(1), c.median(0)) << "modes " << modes;
      EXPECT_LE(c.calls(1) - before, 2 * 256 / RnnModeChooser::kExplore + 2) << "modes " << modes << " probe " << probe;
    }
}

// What a chooser learnt, saved and restored (the record kept between processes): a restored
// chooser runs the mode chosen last time from its first call (a fresh one runs one thread, then
// the warm-up's one call of each), and saves the same record; a record that is not whole, names
// another number of modes or holds a time that is not a positive finite number is refused and
// leaves the chooser as it was (fresh: it chooses)
TEST(FusedRecurrence, ChooserRecordsRestoreTheChoiceAndRefuseBadOnes) {
  for (int modes : {2, 3}) {
    RnnModeChooser c(modes, true);
    const double cost[3] = {1000, 600, 900};
    for (int call = 0; call < 40; ++call) {
      const int m = c.pick();
      c.record(m, cost[m] + (call % 3) * 5);
    }
    ASSERT_TRUE(c.decided());
    const std::string rec = c.save();
    RnnModeChooser d(modes, true);
    EXPECT_FALSE(d.decided());
    ASSERT_TRUE(d.restore(rec)) << rec;
    EXPECT_TRUE(d.decided());
    EXPECT_EQ(d.save(), rec);
    for (int m = 0; m < modes; ++m) EXPECT_EQ(d.median(m), c.median(m)) << "mode " << m;
    // every mode settled and no kept time beating the Team's median: the Team until the
    // first exploring call
    for (int call = 1; call < RnnModeChooser::kExplore; ++call) {
      const int m = d.pick();
      EXPECT_EQ(m, 1) << "modes " << modes << " call " << call;
      d.record(m, cost[m]);
    }
    RnnModeChooser fresh(modes, true);
    EXPECT_EQ(fresh.pick(), 0);  // (the untimed first call, then the warm-up)
    // records refused whole
    std::string three_times = "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n";
    for (int m = 0; m < modes; ++m) three_times += "3 900 910 920\n";
    std::string other_modes = "lathe-rnn-chooser 1 " + std::to_string(5 - modes) + "\n3 900 910 920\n3 600 610 620\n";
    if (modes == 2) other_modes += "3 800 810 820\n";
    ASSERT_TRUE(RnnModeChooser(modes, true).restore(three_times));
    for (const std::string& bad :
         {std::string(), std::string("garbage"), rec.substr(0, rec.size() / 2), rec.substr(0, rec.size() - 3) + "x\n",
          rec + "1 2 3\n", other_modes, "lathe-rnn-chooser 2" + three_times.substr(19),
          "lathe-rnn-chooserX" + three_times.substr(17), std::string("lathe-rnn-chooser 1 ") + std::to_string(modes) + "\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n0\n3 1 2 3\n3 1 2 3\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n6 1 2 3 4 5 6\n3 1 2 3\n3 1 2 3\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n3 1 -2 3\n3 1 2 3\n3 1 2 3\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n3 1 0 3\n3 1 2 3\n3 1 2 3\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n3 1 nan 3\n3 1 2 3\n3 1 2 3\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n3 1 inf 3\n3 1 2 3\n3 1 2 3\n",
          "lathe-rnn-chooser 1 " + std::to_string(modes) + "\n3 1 1e300 3\n3 1 2 3\n3 1 2 3\n"}) {
      RnnModeChooser e(modes, true);
      EXPECT_FALSE(e.restore(bad)) << "modes " << modes << ": " << bad;
      EXPECT_FALSE(e.decided());
      EXPECT_EQ(e.pick(), 0);
      EXPECT_EQ(e.calls(0) + e.calls(1), 0);
    }
  }
}

// The records of the kernel's choosers, kept with the kernel cache (LATHE_RNN_RECORD): written
// for each layer that ran (forget_rnn_choosers: as in a new process), restored by the next
// process's chooser; a corrupt, truncated or empty record is refused and rewritten whole; every
// run the interpreter's either way (LSTM and GRU, batch 1 and 3, odd hidden sizes, both
// directions); LATHE_RNN_RECORD=0 neither reads nor writes
TEST(CpuRecurrenceTiles, ChooserRecordsCarryToTheNextProcess) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one hardware thread: no chooser";
  test::ScopedEnv chooser("LATHE_RNN_THREADS", nullptr), record("LATHE_RNN_RECORD", "1");
  for (int64_t B : {1, 3})
    for (const Case& c : {Case{"LSTM", 7, B, 5, 131, "bidirectional", false, B == 3, B == 3},
                          Case{"GRU", 9, B, 6, 149, "reverse", false, false, true, false, 1}}) {
      TensorMap in;
      Graph g = recurrent_graph(c, in);
      TensorMap want = interpret(g, in);
      Executable exe = compile_graph(g, test::test_backend());
      auto runs = [&](int n, const std::string& what) {
        for (int run = 0; run < n; ++run) {
          const std::string err = test::compare_outputs(exe.run(in), want, 4);
          EXPECT_EQ(err, "") << label(c) << " " << what << " run " << run;
          if (!err.empty()) break;
        }
      };
      auto records = [&] {
        std::vector<std::string> v;
        for (auto& st : rnn_choosers()) v.push_back(st.record);
        return v;
      };
      auto read = [](const std::string& path) {
        std::ifstream f(path, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      };
      forget_rnn_choosers();
      runs(8, "first process");
      const std::vector<std::string> paths = records();
      ASSERT_EQ(paths.size(), c.direction == "bidirectional" ? 2u : 1u) << label(c);
      for (auto& p : paths) std::remove(p.c_str());  // (a record from an earlier test run)
      forget_rnn_choosers();
      runs(8, "first process");
      for (auto& st : rnn_choosers()) {
        EXPECT_FALSE(st.restored) << label(c);
        EXPECT_EQ(st.calls, 8) << label(c);
      }
      save_rnn_chooser_records();
      for (auto& p : paths) {
        const std::string text = read(p);
        EXPECT_TRUE(RnnModeChooser(2, true).restore(text) || RnnModeChooser(3, true).restore(text))
            << p << ":\n" << text;
      }
      forget_rnn_choosers();
      runs(3, "restored");
      for (auto& st : rnn_choosers()) {
        EXPECT_TRUE(st.restored) << label(c);
        int64_t kept = 0;  // the restored times (the next process's three calls: one untimed)
        for (int64_t n : st.mode_calls) kept += n;
        EXPECT_GE(kept, static_cast<int64_t>(st.mode_calls.size()) + 2) << label(c);
      }
      for (const std::string& bad : {std::string(), std::string("lathe-rnn-chooser 1 2\n3 1 2"),
                                     std::string("\x01\xff garbage"), std::string(5000, '7')}) {
        save_rnn_chooser_records();
        for (auto& p : paths) {
          std::ofstream f(p, std::ios::binary | std::ios::trunc);
          f << bad;
        }
        forget_rnn_choosers();
        runs(4, "bad record");
        for (auto& st : rnn_choosers()) EXPECT_FALSE(st.restored) << label(c) << " record " << bad.substr(0, 40);
        save_rnn_chooser_records();  // rewritten whole
        for (auto& p : paths) EXPECT_NE(read(p), bad) << p;
      }
      {
        test::ScopedEnv off("LATHE_RNN_RECORD", "0");
        for (auto& p : paths) std::remove(p.c_str());
        forget_rnn_choosers();
        runs(4, "records off");
        for (auto& st : rnn_choosers()) {
          EXPECT_FALSE(st.restored);
          EXPECT_EQ(st.record, "");
        }
        save_rnn_chooser_records();
        for (auto& p : paths) EXPECT_FALSE(std::ifstream(p).good()) << p;
      }
      forget_rnn_choosers();
    }
}

// threads descheduled inside a piece (LATHE_RNN_STALL_US makes a claimed piece sleep now and
// then): the others take over its pieces, claim the stalled ones again, and the late commits
// are dropped; the results stay the interpreter's
TEST(FusedRecurrence, ThreadsThatStallAreWorkedAround) {
  test::ScopedEnv three("LATHE_RNN_THREADS", "3"), stall("LATHE_RNN_STALL_US", "300");
  expect_fused_matches_unrolled({"LSTM", 6, 1, 3, 140, "reverse", true, true, true, true});
  expect_fused_matches_unrolled({"GRU", 5, 2, 3, 131, "forward", true, false, true, false, 0});
  expect_fused_matches_unrolled({"GRU", 4, 1, 2, 160, "bidirectional", false, false, false, true, 1});
}

// one kernel per direction whatever T is: the steps are a loop inside it
TEST(FusedRecurrence, OneKernelPerDirection) {
  for (Case c : {Case{"LSTM", 0, 1, 6, 10, "bidirectional", true, true, true}, Case{"GRU", 0, 3, 5, 7}}) {
    size_t kernels[2];
    int i = 0;
    for (int64_t T : {4, 64}) {
      c.T = T;
      TensorMap in;
      Program p = build_program(recurrent_graph(c, in));
      int rnn = 0;
      for (int k = 0; k < p.num_kernels(); ++k)
        rnn += p.funcs[k].kind == "extern" && p.kg.kernels[k].root->attrs.name == "rnn";
      EXPECT_EQ(rnn, c.direction == "bidirectional" ? 2 : 1) << label(c);
      kernels[i++] = static_cast<size_t>(p.num_kernels());
    }
    EXPECT_EQ(kernels[0], kernels[1]) << label(c);
    EXPECT_LE(kernels[1], 16u) << label(c);  // the rnn kernels (their projections inside), copies of the states and outputs
  }
}

// Stacked layers as PyTorch exports them (LSTM, Squeeze of Y's direction axis, LSTM): each
// layer is its one Extern, which computes its projections itself (no GEMM kernel) and reads its
// X in place (the model's input reshaped, the last layer's Y rows of its result: no copy
// kernel before it); only the outputs' copies and the concatenated last states remain.
TEST(FusedRecurrence, StackedLayersAreTheirExternsAlone) {
  for (int64_t B : {1, 3, 64}) {
    std::mt19937 rng(static_cast<unsigned>(B));
    const int64_t T = 7, I = 5, H = 11;
    Model m;
    m.input("X", {T, B, I});
    m.init("W1", randt({1, 4 * H, I}, rng));
    m.init("R1", randt({1, 4 * H, H}, rng));
    m.init("B1", randt({1, 8 * H}, rng));
    m.init("W2", randt({1, 4 * H, H}, rng));
    m.init("R2", randt({1, 4 * H, H}, rng));
    HostTensor axes(DType::I64, {1});
    axes.set_i64(0, 1);
    m.init("axes", axes);
    test::attr_i(m.node("LSTM", {"X", "W1", "R1", "B1"}, {"", "", ""}), "hidden_size", H);
    m.g()->mutable_node(0)->set_output(0, "Y1");
    m.node("Squeeze", {"Y1", "axes"}, {""})->set_output(0, "X2");
    test::attr_i(m.node("LSTM", {"X2", "W2", "R2"}, {"Y", "Yh", ""}), "hidden_size", H);
    Graph g = m.load();
    Program p = build_program(g);
    int rnn = 0, extern_inputs_copied = 0;
    for (int k = 0; k < p.num_kernels(); ++k) {
      const Kernel& kk = p.kg.kernels[k];
      EXPECT_NE(kk.kind, "matmul") << kk.name << " (B " << B << ")";
      if (kk.kind == "extern" && kk.root->attrs.name == "rnn") {
        ++rnn;
        for (int b : kk.inputs)  // each operand a buffer no kernel writes just for it: an input, a constant, the last layer's result
          for (int j = 0; j < p.num_kernels(); ++j)
            if (p.kg.kernels[j].output == b && !(p.kg.kernels[j].kind == "extern")) ++extern_inputs_copied;
      }
    }
    EXPECT_EQ(rnn, 2) << "B " << B;
    EXPECT_EQ(extern_inputs_copied, 0) << "B " << B;
    EXPECT_LE(p.num_kernels(), 4) << "B " << B;  // 2 rnn, Y's copy out of the result, Yh
    TensorMap in{{"X", randt({T, B, I}, rng, 1.0)}};
    Executable exe = compile_graph(g, test::test_backend());
    EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in), 4), "") << "B " << B;
  }
}

// what the fused kernel does not cover keeps the unrolled graph: f64, a symbolic batch
TEST(FusedRecurrence, FallsBackToTheUnrolledGraph) {
  {
    Model m;
    m.input("X", {3, 2, 4}, onnx::TensorProto::DOUBLE);
    HostTensor w(DType::F64, {1, 4 * 5, 4}), r(DType::F64, {1, 4 * 5, 5});
    for (int64_t i = 0; i < w.numel(); ++i) w.set_f64(i, 0.01 * static_cast<double>(i % 7));
    for (int64_t i = 0; i < r.numel(); ++i) r.set_f64(i, 0.02 * static_cast<double>(i % 5));
    m.input("W", {1, 20, 4}, onnx::TensorProto::DOUBLE);
    m.input("R", {1, 20, 5}, onnx::TensorProto::DOUBLE);
    test::attr_i(m.node("LSTM", {"X", "W", "R"}, {"Y", "", ""}), "hidden_size", 5);
    EXPECT_EQ(count_rnn_nodes(m.load()), 0);
  }
  {
    Model m;
    m.input("X", {4, 1, 3});
    m.g()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("N");
    std::mt19937 rng(3);
    m.init("W", randt({1, 3 * 5, 3}, rng));
    m.init("R", randt({1, 3 * 5, 5}, rng));
    test::attr_i(m.node("GRU", {"X", "W", "R"}, {"Y", "Yh"}), "hidden_size", 5);
    Graph g = m.load();
    EXPECT_EQ(count_rnn_nodes(g), 0);
    TensorMap in{{"X", randt({4, 3, 3}, rng)}};
    Executable exe = compile_graph(g, test::test_backend());
    EXPECT_EQ(test::compare_outputs(exe.run(in), interpret(g, in), 4), "");
  }
}

// grad() through an imported layer (its fused nodes: the gradient of their unrolled steps,
// core/frontend/rnn_unrolled.h) equals grad() through the LATHE_RNN=unrolled import, in the
// interpreter and with the gradient graph compiled by the backend
Graph loss_grads(const Graph& g) {
  Tensor loss;
  for (auto& [name, node] : g.outputs) {
    Tensor o(node);
    Tensor l = sum(o * o);
    loss = loss.defined() ? loss + l : l;
  }
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (NodeRef i : g.inputs)
    if (is_float(i->dtype)) params.emplace_back(i), names.push_back("d" + i->attrs.name);
  std::vector<Tensor> gs = grad(loss, params);
  std::vector<std::pair<std::string, NodeRef>> outs;
  for (size_t k = 0; k < gs.size(); ++k) outs.push_back({names[k], gs[k].node()});
  return Graph::from_outputs(outs);
}

TEST(RecurrentGrad, ImportedLayersMatchTheUnrolledImport) {
  Case l{"LSTM", 5, 2, 3, 6, "bidirectional", false, true, true, true, 0, true};  // R an input
  l.lens_input = true;
  Case g{"GRU", 4, 3, 2, 5, "reverse", false, false, true, false, 1, true};
  Case r{"RNN", 6, 1, 3, 4, "forward", false, false, false, true, 0, true};
  for (const Case& c : {l, g, r}) {
    TensorMap in;
    Graph fused = loss_grads(recurrent_graph(c, in));
    Graph unrolled;
    {
      Unrolled u;
      TensorMap unused;
      unrolled = loss_grads(recurrent_graph(c, unused));
    }
    ASSERT_EQ(fused.outputs.size(), 2u) << label(c) << ": dX and dR";
    TensorMap want = interpret(unrolled, in);
    EXPECT_EQ(test::compare_outputs(interpret(fused, in), want, 4), "") << label(c) << " (interpreter)";
    Executable exe = compile_graph(fused, test::test_backend());
    EXPECT_EQ(test::compare_outputs(exe.run(in), want, 4), "") << label(c) << " (" << test::test_backend() << ")";
  }
}

// a malformed Extern rnn (hand-written IR, a hostile .lathe file) is a user error naming the fault
TEST(FusedRecurrence, MalformedNodesAreUserErrors) {
  RnnSpec sp;
  sp.T = 3, sp.B = 2, sp.H = 4, sp.XW = 16, sp.col0 = 0;
  auto f32 = [](std::vector<int64_t> d) {
    Shape s;
    for (int64_t x : d) s.push_back(SymInt(x));
    return prim::input("t" + std::to_string(d.size()) + std::to_string(d[0]), DType::F32, s);
  };
  NodeRef xp = f32({6, 16}), rt = f32({4, 16});
  Shape out{SymInt(5), SymInt(2), SymInt(4)};
  auto message = [&](const std::string& name, std::vector<NodeRef> in, Shape shape, std::vector<int64_t> ints) {
    try {
      prim::extern_call(name, std::move(in), DType::F32, std::move(shape), std::move(ints));
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("rnn", {xp, rt}, out, rnn_ints(sp)), "no error");
  EXPECT_NE(message("rnn", {xp, rt}, out, {2, 3, 2}).find("Extern rnn takes 18 ints"), std::string::npos);
  EXPECT_NE(message("rnn", {xp, f32({5, 16})}, out, rnn_ints(sp)).find("RT must be"), std::string::npos);
  EXPECT_NE(message("rnn", {xp, rt}, {SymInt(4), SymInt(2), SymInt(4)}, rnn_ints(sp)).find("result shape"), std::string::npos);
  RnnSpec bad = sp;
  bad.col0 = 1;  // gates past XW
  EXPECT_NE(message("rnn", {xp, rt}, out, rnn_ints(bad)).find("exceed XW"), std::string::npos);
  bad = sp;
  bad.has_lens = true;  // lens present but f32
  EXPECT_NE(message("rnn", {xp, rt, f32({2})}, out, rnn_ints(bad)).find("lens must be i32"), std::string::npos);
  std::vector<int64_t> ints = rnn_ints(sp);
  ints[9] = 99;  // no such activation
  EXPECT_NE(message("rnn", {xp, rt}, out, ints).find("Extern rnn takes"), std::string::npos);
  // the projection inside: X [T·B, I], WT [I, XW] (+ xb [XW]) after the other operands, I the 19th int
  RnnSpec pj = sp;
  pj.has_proj = true, pj.I = 3;
  NodeRef x = f32({6, 3}), wt = f32({3, 16}), xb = f32({16});
  EXPECT_EQ(message("rnn", {x, rt, wt}, out, rnn_ints(pj)), "no error");
  EXPECT_NE(message("rnn", {x, rt, f32({4, 16})}, out, rnn_ints(pj)).find("WT must be"), std::string::npos);
  EXPECT_NE(message("rnn", {xp, rt, wt}, out, rnn_ints(pj)).find("X must be"), std::string::npos);
  EXPECT_NE(message("rnn", {x, rt}, out, rnn_ints(pj)).find("call for 3 inputs"), std::string::npos);
  pj.has_xb = true;
  EXPECT_EQ(message("rnn", {x, rt, wt, xb}, out, rnn_ints(pj)), "no error");
  EXPECT_NE(message("rnn", {x, rt, wt, f32({15})}, out, rnn_ints(pj)).find("xb must be"), std::string::npos);
  ints = rnn_ints(pj);
  ints.pop_back();  // the flag without I
  EXPECT_NE(message("rnn", {x, rt, wt, xb}, out, ints).find("Extern rnn takes"), std::string::npos);
  for (int64_t bad_i : {int64_t(0), int64_t(-4), int64_t(1) << 62}) {
    ints = rnn_ints(pj);
    ints.back() = bad_i;
    EXPECT_NE(message("rnn", {x, rt, wt, xb}, out, ints).find("I must be positive"), std::string::npos) << bad_i;
  }
  RnnSpec nopj = sp;
  nopj.has_xb = true;  // xb without the projection
  EXPECT_NE(message("rnn", {xp, rt, xb}, out, rnn_ints(nopj)).find("xb is for the projection only"), std::string::npos);
}

}  // namespace
}  // namespace lathe
