// staged_test.cpp — the staged executor (core/import/onnx_staged.h): data-dependent shapes
// (NonZero, Compress, Unique, TopK with a run-time k) and run-time Loop / If on models whose
// inputs all stay run-time inputs, checked against host references; the program cache (a new
// value of a seen shape compiles nothing new); and hostile models (a Loop whose trip count is
// negative or huge, a NonZero feeding a huge shape, bodies nested too deep) that must be
// UserErrors naming the node, never a crash or a hang.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/import/onnx_staged.h"
#include "core/interp/interp.h"
#include "tests/onnx/staged_models.h"

namespace lathe {
namespace {

using namespace staged_test;

// Runs segments on the interpreter and records the distinct program keys.
struct Runner {
  std::set<std::string> keys;
  int64_t runs = 0;
  SegmentRunner fn() {
    return [this](const Graph& g, const std::string& key, const TensorMap& ins) {
      keys.insert(key);
      ++runs;
      return interpret(g, ins);
    };
  }
};

std::string run_error(const std::string& path, const TensorMap& ins, StagedOptions opt = {}) {
  Runner r;
  try {
    StagedOnnx s(path, opt, r.fn());
    s.run(ins);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(OnnxStaged, NonZeroOfAComputedValueSplitsTheProgram) {
  std::string path = nonzero_model().save("nonzero");
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  TensorMap out = s.run({{"x", f32({2, 3}, {0, 2, -1, 3, 0, 5})}});
  EXPECT_EQ(out.at("y").shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(out.at("y")), (std::vector<double>{0, 1, 1, 1, 0, 2}));
  EXPECT_EQ(values(out.at("n")), (std::vector<double>{2, 3}));
  EXPECT_EQ(values(out.at("z")), (std::vector<double>{1, 3, 0, 4, 1, 6}));
  EXPECT_EQ(values(out.at("s")), (std::vector<double>{5}));  // the true size: no padding summed
  EXPECT_GE(s.stats().segments, 2);
  EXPECT_EQ(s.stats().host_ops, 1);
  // another count: the later segment runs at the new size
  out = s.run({{"x", f32({2, 3}, {1, 1, 1, 1, 1, 0})}});
  EXPECT_EQ(out.at("y").shape(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(values(out.at("n")), (std::vector<double>{2, 5}));
  // the same count at other positions: no new program
  size_t keys = r.keys.size();
  out = s.run({{"x", f32({2, 3}, {0, 1, 1, 1, 1, 1})}});
  EXPECT_EQ(values(out.at("y")), (std::vector<double>{0, 0, 1, 1, 1, 1, 2, 0, 1, 2}));
  EXPECT_EQ(r.keys.size(), keys);
}

TEST(OnnxStaged, CompressOnARunTimeConditionThenScales) {
  Model m(11);
  m.input("x", {5});
  m.input("c", {5}, onnx::TensorProto::BOOL);
  auto* n = m.node("Compress", {"x", "c"}, {"y"});
  attr_i(n, "axis", 0);
  m.node("Add", {"y", "y"}, {"z"});
  m.output("z");
  std::string path = m.save("compress");
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  HostTensor c(DType::Bool, {5});
  for (int i : {1, 3, 4}) c.set_i64(i, 1);
  TensorMap out = s.run({{"x", f32({5}, {1, 2, 3, 4, 5})}, {"c", c}});
  EXPECT_EQ(values(out.at("z")), (std::vector<double>{4, 8, 10}));
  HostTensor none(DType::Bool, {5});
  out = s.run({{"x", f32({5}, {1, 2, 3, 4, 5})}, {"c", none}});
  EXPECT_EQ(out.at("z").shape(), (std::vector<int64_t>{0}));
}

TEST(OnnxStaged, TopKWithARunTimeK) {
  Model m(11);
  m.input("x", {6});
  m.input("k", {1}, onnx::TensorProto::INT64);
  m.node("TopK", {"x", "k"}, {"v", "i"});
  m.output("v");
  m.output("i");
  std::string path = m.save("topk");
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  HostTensor x = f32({6}, {3, 9, 1, 7, 5, 8});
  TensorMap out = s.run({{"x", x}, {"k", i64({1}, {2})}});
  EXPECT_EQ(values(out.at("v")), (std::vector<double>{9, 8}));
  out = s.run({{"x", x}, {"k", i64({1}, {4})}});
  EXPECT_EQ(values(out.at("i")), (std::vector<double>{1, 5, 3, 4}));
}


TEST(OnnxStaged, LoopWithARunTimeTripCountRunsTheBodyProgram) {
  Model m = loop_model(true);
  std::string path = m.save("loop");
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  HostTensor x = f32({3}, {1, 2, 3});
  for (int64_t trip : {0, 1, 4, 9}) {
    TensorMap out = s.run({{"x", x}, {"M", scalar_i64(trip)}});
    double tri = static_cast<double>(trip * (trip - 1) / 2);
    EXPECT_EQ(values(out.at("acc")), (std::vector<double>{tri, 2 * tri, 3 * tri})) << trip;
    ASSERT_EQ(out.at("accs").shape(), (std::vector<int64_t>{trip, 3}));
    if (trip >= 2) {
      EXPECT_EQ(out.at("accs").get_f64(1 * 3 + 2), 3.0);  // after i = 0, 1: x * 1
    }
  }
  EXPECT_EQ(s.stats().iterations, 14);
  // the body compiles once (one shape), however many iterations ran
  EXPECT_LE(r.keys.size(), 3u);
}

TEST(OnnxStaged, HostileLoopTripCounts) {
  HostTensor x = f32({3}, {1, 2, 3});
  {  // negative
    std::string e = run_error(loop_model(true).save("loop_neg"), {{"x", x}, {"M", scalar_i64(-5)}});
    EXPECT_NE(e.find("the_Loop"), std::string::npos) << e;
    EXPECT_NE(e.find("negative"), std::string::npos) << e;
  }
  {  // huge with no condition: refused before running
    std::string e = run_error(loop_model(false).save("loop_huge"), {{"x", x}, {"M", scalar_i64(int64_t(1) << 62)}});
    EXPECT_NE(e.find("the_Loop"), std::string::npos) << e;
    EXPECT_NE(e.find("exceeds the limit"), std::string::npos) << e;
  }
  {  // huge with a condition that stays true: stopped at the iteration limit
    StagedOptions opt;
    opt.max_loop_iterations = 200;
    std::string e = run_error(loop_model(true, true).save("loop_forever"), {{"x", x}, {"M", scalar_i64(int64_t(1) << 62)}}, opt);
    EXPECT_NE(e.find("the_Loop"), std::string::npos) << e;
    EXPECT_NE(e.find("200 iterations"), std::string::npos) << e;
  }
}

// A Loop with a constant trip count too long for the importer to unroll: load_onnx says it
// needs a staged run, which runs the body program on the host.
TEST(OnnxStaged, LoopWithAConstantTripCountTooLongToUnroll) {
  std::string path = loop_model(false, false, 5000).save("loop_const");
  try {
    load_onnx(path);
    ADD_FAILURE() << "load_onnx unrolled 5000 iterations";
  } catch (const OnnxUnsupported& e) {
    EXPECT_TRUE(onnx_needs_staged(e.what())) << e.what();
  }
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  TensorMap out = s.run({{"x", f32({3}, {1, 0.5, 0.25})}});  // sums exact in f32
  const double tri = 5000.0 * 4999.0 / 2;
  EXPECT_EQ(values(out.at("acc")), (std::vector<double>{tri, tri / 2, tri / 4}));
  EXPECT_EQ(out.at("accs").shape(), (std::vector<int64_t>{5000, 3}));
  EXPECT_EQ(s.stats().iterations, 5000);
  EXPECT_LE(r.keys.size(), 3u);  // the body program is the same every iteration
}

// A Scan longer than the importer unrolls runs on the host: inputs sliced along their scan
// axis (backwards here), outputs stacked along theirs; checked against a host reference.
TEST(OnnxStaged, ScanTooLongToUnrollRunsOnTheHost) {
  const int64_t T = 4099;
  std::string path = scan_model(T).save("scan_long");
  try {
    load_onnx(path);
    ADD_FAILURE() << "load_onnx unrolled the Scan";
  } catch (const OnnxUnsupported& e) {
    EXPECT_TRUE(onnx_needs_staged(e.what())) << e.what();
  }
  std::vector<double> xv(static_cast<size_t>(2 * T));
  for (int64_t t = 0; t < T; ++t) xv[static_cast<size_t>(t)] = t % 7, xv[static_cast<size_t>(T + t)] = -(t % 5);
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  TensorMap out = s.run({{"s0", f32({2}, {1, 10})}, {"xs", f32({2, T}, xv)}});
  double a = 1, b = 10;
  std::vector<double> ya(static_cast<size_t>(T)), yb(static_cast<size_t>(T));
  for (int64_t k = 0; k < T; ++k) {  // iteration k reads position T - 1 - k and writes output k
    a += xv[static_cast<size_t>(T - 1 - k)], b += xv[static_cast<size_t>(T + T - 1 - k)];
    ya[static_cast<size_t>(k)] = 2 * a, yb[static_cast<size_t>(k)] = 2 * b;
  }
  EXPECT_EQ(values(out.at("sf")), (std::vector<double>{a, b}));
  ASSERT_EQ(out.at("ys").shape(), (std::vector<int64_t>{2, T}));
  std::vector<double> ys = values(out.at("ys"));
  EXPECT_EQ(std::vector<double>(ys.begin(), ys.begin() + T), ya);
  EXPECT_EQ(std::vector<double>(ys.begin() + T, ys.end()), yb);
  EXPECT_EQ(s.stats().iterations, T);
  EXPECT_LE(r.keys.size(), 3u);
  // over the iteration limit: refused before running, naming the node
  StagedOptions opt;
  opt.max_loop_iterations = 1000;
  std::string e = run_error(path, {{"s0", f32({2}, {1, 10})}, {"xs", f32({2, T}, xv)}}, opt);
  EXPECT_NE(e.find("the_Scan"), std::string::npos) << e;
  EXPECT_NE(e.find("exceeds the limit"), std::string::npos) << e;
}

TEST(OnnxStaged, KeyedLruKeepsTheMostRecentlyUsed) {
  KeyedLru<int> c(2);
  c.put("a", 1);
  c.put("b", 2);
  ASSERT_NE(c.find("a"), nullptr);  // a is now the most recent
  c.put("c", 3);                    // drops b
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(c.find("b"), nullptr);
  EXPECT_EQ(*c.find("a"), 1);
  EXPECT_EQ(*c.find("c"), 3);
  EXPECT_EQ(c.evicted(), 1u);
  c.put("a", 4);  // replaces in place
  EXPECT_EQ(*c.find("a"), 4);
  EXPECT_EQ(c.size(), 2u);
}

// A NonZero whose count, scaled, becomes a shape: the element cap, naming the node.
TEST(OnnxStaged, NonZeroFeedingAHugeShapeNamesTheNode) {
  Model m = nonzero_huge_model();
  std::string e = run_error(m.save("nz_huge"), {{"v", i64({4}, {0, 3, 0, 1})}});
  EXPECT_NE(e.find("huge_fill"), std::string::npos) << e;
  EXPECT_NE(e.find("elements"), std::string::npos) << e;
  // an Expand to a run-time shape given as an input
  Model m2;
  m2.input("x", {1});
  m2.input("shape", {2}, onnx::TensorProto::INT64);
  m2.node("Expand", {"x", "shape"}, {"y"}, "huge_expand");
  m2.output("y");
  e = run_error(m2.save("expand_huge"), {{"x", f32({1}, {1})}, {"shape", i64({2}, {int64_t(1) << 31, int64_t(1) << 31})}});
  EXPECT_NE(e.find("huge_expand"), std::string::npos) << e;
}

// Loops nested 18 deep (about what the protobuf parser's recursion limit of 64 lets through),
// each with a run-time trip count: the nesting limit, not a stack overflow.
TEST(OnnxStaged, BodiesNestedTooDeepNameTheNode) {
  Model m = deep_loop_model(18);
  std::string e = run_error(m.save("deep"), {{"M", scalar_i64(1)}, {"x", f32({2}, {1, 2})}});
  EXPECT_NE(e.find("nest more than"), std::string::npos) << e;
  EXPECT_NE(e.find("node 'loop"), std::string::npos) << e;
}

// If on a run-time condition whose branches give different shapes: the branch taken runs.
TEST(OnnxStaged, IfWithBranchesOfDifferentShapes) {
  Model m;
  m.input("c", {}, onnx::TensorProto::BOOL);
  m.input("x", {4});
  auto* n = m.node("If", {"c"}, {"y"});
  auto* t = attr_g(n, "then_branch");
  Model::init_i64(t, "two", {2});
  Model::node(t, "Concat", {"x", "x"}, {"yt"}, "cat");
  attr_i(t->mutable_node(0), "axis", 0);
  t->add_output()->set_name("yt");
  auto* e = attr_g(n, "else_branch");
  Model::node(e, "Neg", {"x"}, {"ye"}, "neg");
  e->add_output()->set_name("ye");
  m.output("y");
  std::string path = m.save("if_shapes");
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  HostTensor x = f32({4}, {1, 2, 3, 4}), yes(DType::Bool, {}), no(DType::Bool, {});
  yes.set_i64(0, 1);
  EXPECT_EQ(s.run({{"c", yes}, {"x", x}}).at("y").shape(), (std::vector<int64_t>{8}));
  EXPECT_EQ(values(s.run({{"c", no}, {"x", x}}).at("y")), (std::vector<double>{-1, -2, -3, -4}));
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

using namespace staged_test;

// Indices given at run time are checked on the host every run (a valid run first, so a
// cached import cannot skip the check), and a Resize to a run-time size of 0 or 2^40.
TEST(OnnxStaged, RunTimeIndicesAndSizesOutOfRangeNameTheNode) {
  Model m(16);
  m.input("x", {3, 4});
  m.input("i", {1, 2}, onnx::TensorProto::INT64);
  m.input("u", {1, 2});
  m.node("ScatterElements", {"x", "i", "u"}, {"y"});
  m.node("Gather", {"x", "i"}, {"g"});
  m.output("y");
  m.output("g");
  std::string path = m.save("scatter");
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  HostTensor x(DType::F32, {3, 4});
  TensorMap out = s.run({{"x", x}, {"i", i64({1, 2}, {2, 1})}, {"u", f32({1, 2}, {5, 6})}});
  EXPECT_EQ(out.at("y").get_f64(2 * 4 + 0), 5.0);
  EXPECT_EQ(out.at("y").get_f64(1 * 4 + 1), 6.0);
  for (int64_t bad : {int64_t(7), int64_t(-4), int64_t(1) << 40}) {
    try {
      s.run({{"x", x}, {"i", i64({1, 2}, {1, bad})}, {"u", f32({1, 2}, {5, 6})}});
      ADD_FAILURE() << "index " << bad << " was accepted";
    } catch (const UserError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("the_ScatterElements"), std::string::npos) << msg;
      EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
    }
  }
  // indices computed in the program: load_onnx refuses to compile an unchecked scatter, the
  // staged run ends the segment before it and checks them on the host
  for (bool computed : {false, true}) {
    std::string sp = scatter_model(computed).save(computed ? "scatter_computed" : "scatter_input");
    try {
      load_onnx(sp);
      ADD_FAILURE() << "load_onnx compiled a scatter of run-time indices";
    } catch (const OnnxUnsupported& e) {
      EXPECT_TRUE(onnx_needs_staged(e.what())) << e.what();
    }
    StagedOnnx sc(sp, {}, r.fn());
    HostTensor x4(DType::F32, {4});
    EXPECT_EQ(values(sc.run({{"x", x4}, {"idx", i64({2}, {3, -4})}}).at("y")), (std::vector<double>{6, 0, 0, 5}));
    std::string e = run_error(sp, {{"x", x4}, {"idx", i64({2}, {1, -9})}});
    EXPECT_NE(e.find("the_ScatterElements"), std::string::npos) << e;
    EXPECT_NE(e.find("out of range"), std::string::npos) << e;
  }
  Model rs(13);
  rs.input("x", {1, 1, 4, 4});
  rs.input("sizes", {4}, onnx::TensorProto::INT64);
  rs.node("Resize", {"x", "", "", "sizes"}, {"y"});
  rs.output("y");
  std::string rpath = rs.save("resize");
  StagedOnnx rsz(rpath, {}, r.fn());
  HostTensor xr(DType::F32, {1, 1, 4, 4});
  EXPECT_EQ(rsz.run({{"x", xr}, {"sizes", i64({4}, {1, 1, 8, 6})}}).at("y").shape(), (std::vector<int64_t>{1, 1, 8, 6}));
  for (int64_t bad : {int64_t(0), int64_t(1) << 40}) {
    try {
      rsz.run({{"x", xr}, {"sizes", i64({4}, {1, 1, bad, 4})}});
      ADD_FAILURE() << "size " << bad << " was accepted";
    } catch (const UserError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("the_Resize"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

using namespace staged_test;

// Fuzzer find (tests/onnx/fuzz/finds/staged_no_progress.onnx): a Loop with a run-time trip
// count whose body reads 'conD_in', which nothing defines (a mutated name).
// The segment waited for a value it could never compute: an InternalError. Now a UserError
// naming the Loop and the name.
TEST(OnnxStaged, FuzzFindUndefinedBodyNameIsAUserError) {
  std::string path = std::string(LATHE_SOURCE_DIR) + "/tests/onnx/fuzz/finds/staged_no_progress.onnx";
  Runner r;
  StagedOnnx s(path, {}, r.fn());
  TensorMap ins;
  auto dtypes = s.input_dtypes();
  for (const auto& [name, dims] : s.input_dims()) {
    std::vector<int64_t> shape;
    for (int64_t d : dims) shape.push_back(d < 0 ? 2 : d);
    HostTensor t(dtypes.at(name), shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, 1);
    ins[name] = t;
  }
  try {
    s.run(ins);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("(Loop)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'conD_in'"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace lathe
