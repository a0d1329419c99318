// unswitch_test.cpp — the default schedule's loop unswitching (core/loop/unswitch.h): a
// concat's input test and a pad's border tests on an outer loop become an if-tree with one
// copy of the body per version, inner loops free of them; taken for a concat of a resampled
// input (a bilinear Resize's gathers, unet's up-sampling path), three-way concats and row
// pads, at batch 1 and 3, odd and prime sizes; left alone where the test is on the innermost
// loop. Every case against the interpreter on the backend under test.
#include <cstdlib>

#include "core/frontend/tensor.h"
#include "core/ir/build.h"
#include "diff_util.h"

namespace lathe {
namespace {

Graph one(const Tensor& y) { return Graph::from_outputs({{"y", y.node()}}); }

int versions(const Program& p) {  // the most versions of any unswitched loop, 0 if none
  int best = 0;
  for (auto& f : p.funcs)
    for (auto& l : f.schedule_log)
      if (l.rfind("unswitch ", 0) == 0) best = std::max(best, std::atoi(l.c_str() + l.find('(') + 1));
  return best;
}

Tensor ids(std::vector<int64_t> v) {
  HostTensor t(DType::I64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return from_host(t);
}

Tensor weights(int64_t n, double base) {
  HostTensor t(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i) t.set_f64(i, base + 0.1 * static_cast<double>(i % 7));
  return from_host(t);
}

// a 2-tap linear resampling along the last two axes (as the Resize lowering writes it), x2 or x3
Tensor resample(const Tensor& x, int64_t s) {
  Tensor y = x;
  for (int ax : {2, 3}) {
    int64_t in = y.shape()[ax].value(), out = in * s;
    std::vector<int64_t> lo, hi;
    for (int64_t o = 0; o < out; ++o) {
      lo.push_back(o / s);
      hi.push_back(std::min(o / s + 1, in - 1));
    }
    std::vector<SymInt> shape(4, SymInt(1));
    shape[ax] = out;
    Tensor wl = reshape(weights(out, 0.25), shape), wh = reshape(weights(out, 0.5), shape);
    y = index_select(y, ax, ids(lo)) * wl + index_select(y, ax, ids(hi)) * wh;
  }
  return y;
}

TEST(Unswitch, ConcatAndPadTestsLeaveTheInnerLoops) {
  test::DiffBatch batch;
  struct Case { int64_t n, c, h, w, s; };
  for (auto [n, c, h, w, s] : std::vector<Case>{{1, 5, 7, 9, 2}, {3, 3, 5, 11, 2}, {1, 7, 4, 5, 3}, {3, 2, 3, 7, 3}}) {
    std::string name = std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
    Tensor small = input("small", {n, c, h, w}), skip = input("skip", {n, c + 2, h * s, w * s});
    Graph g = one(concat({skip, resample(small, s) + Scalar(0.5)}, 1) * Scalar(1.5));
    Program p = build_program(g);
    if (n == 1) EXPECT_EQ(versions(p), 2) << name << "\n" << test::loop_ir_of(p);
    batch.add("resampled concat " + name + " x" + std::to_string(s), g);
    Tensor a = input("a", {n, c, h, w}), b = input("b", {n, 2, h, w}), d = input("d", {n, 3, h, w});
    Graph three = one(relu(concat({a, b, d}, 1) - Scalar(0.25)));
    if (n == 1) EXPECT_EQ(versions(build_program(three)), 3) << name << "\n" << test::loop_ir_of(build_program(three));
    batch.add("three-way concat " + name, three);
    Tensor x = input("x", {n, c, h, w});
    Graph rows = one(pad(x, {{0, 0}, {0, 0}, {1, 2}, {0, 0}}, Scalar(-1.0)) * Scalar(2.0));
    batch.add("row pad " + name, rows);
  }
  {  // a concat along the innermost axis: its test stays in the vectorized loop
    Tensor a = input("a", {3, 13, 5}), b = input("b", {3, 13, 7});
    Graph g = one(concat({a, b}, 2) + Scalar(1.0));
    EXPECT_EQ(versions(build_program(g)), 0) << test::loop_ir_of(build_program(g));
    batch.add("innermost concat", g);
  }
  EXPECT_EQ(batch.run(), 0);
}

TEST(Unswitch, SwitchOffKeepsTheGuards) {
  Tensor a = input("a", {1, 5, 7, 9}), b = input("b", {1, 3, 7, 9});
  Graph g = one(concat({a, b}, 1) * Scalar(2.0));
  EXPECT_EQ(versions(build_program(g)), 2);
  setenv("LATHE_UNSWITCH", "0", 1);
  int off = versions(build_program(g));
  unsetenv("LATHE_UNSWITCH");
  EXPECT_EQ(off, 0);
}

}  // namespace
}  // namespace lathe
