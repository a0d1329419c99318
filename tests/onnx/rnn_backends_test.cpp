// rnn_backends_test.cpp — the recurrent layers (ONNX LSTM / GRU / RNN, lower_rnn.cpp)
// compiled by a backend (LATHE_TEST_BACKEND: c, llvm) against the interpreter, at odd sizes,
// batch 1, an odd batch and batch 64, both directions, sequence lengths, peepholes and clip;
// and their steps compiled once: the distinct kernels do not grow with the sequence length.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <random>

#include "backends/kernel_dedup.h"
#include "core/import/onnx_import.h"
#include "tests/backends/diff_util.h"
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
};

Graph recurrent_graph(const Case& c, TensorMap& inputs) {
  std::mt19937 rng(static_cast<unsigned>(c.T * 131 + c.B * 17 + c.H));
  const int G = c.op == "LSTM" ? 4 : c.op == "GRU" ? 3 : 1;
  const int D = c.direction == "bidirectional" ? 2 : 1;
  Model m;
  m.input("X", {c.T, c.B, c.I});
  inputs["X"] = randt({c.T, c.B, c.I}, rng, 1.0);
  m.init("W", randt({D, G * c.H, c.I}, rng));
  if (c.r_input) {
    m.input("R", {D, G * c.H, c.H});
    inputs["R"] = randt({D, G * c.H, c.H}, rng);
  } else {
    m.init("R", randt({D, G * c.H, c.H}, rng));
  }
  m.init("B", randt({D, 2 * G * c.H}, rng));
  std::vector<std::string> ins{"X", "W", "R", "B", "", "", ""};
  if (c.lens) {
    HostTensor L(DType::I32, {c.B});
    for (int64_t b = 0; b < c.B; ++b) L.set_i64(b, b == 0 ? c.T : 1 + (b * 7) % c.T);
    m.init("L", L);
    ins[4] = "L";
  }
  if (c.states) {
    m.init("h0", randt({D, c.B, c.H}, rng));
    ins[5] = "h0";
    if (c.op == "LSTM") {
      m.init("c0", randt({D, c.B, c.H}, rng));
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
  return m.load();
}

std::string label(const Case& c) {
  return c.op + " T" + std::to_string(c.T) + " B" + std::to_string(c.B) + " I" + std::to_string(c.I) + " H" +
         std::to_string(c.H) + " " + c.direction + (c.lens ? " lens" : "") + (c.peep ? " peep" : "") +
         (c.states ? " states" : "") + (c.clip ? " clip" : "") + (c.lbr ? " lbr" : "") + (c.r_input ? " R-input" : "");
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

}  // namespace
}  // namespace lathe
