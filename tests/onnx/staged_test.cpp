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

namespace lathe {
namespace {

struct Model {
  onnx::ModelProto m;
  explicit Model(int opset = 13) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  static void input(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, int type) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    tt->mutable_shape();
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void input(const std::string& name, std::vector<int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    input(g(), name, dims, type);
  }
  void output(const std::string& name) { g()->add_output()->set_name(name); }
  static onnx::NodeProto* node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> ins,
                               std::vector<std::string> outs, const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? "the_" + op : name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return n;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                        const std::string& name = "") {
    return node(g(), op, ins, outs, name);
  }
  static void init_i64(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> v, bool scalar = false) {
    auto* p = g->add_initializer();
    p->set_name(name);
    p->set_data_type(onnx::TensorProto::INT64);
    if (!scalar) p->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) p->add_int64_data(x);
  }
  // written to a file (StagedOnnx reads a path)
  std::string save(const std::string& tag) {
    auto dir = std::filesystem::temp_directory_path() / ("lathe_staged_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string p = (dir / (tag + ".onnx")).string();
    std::ofstream(p, std::ios::binary) << m.SerializeAsString();
    return p;
  }
};

void attr_i(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

onnx::GraphProto* attr_g(onnx::NodeProto* n, const std::string& k) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

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

HostTensor f32(std::vector<int64_t> shape, std::vector<double> v) {
  HostTensor t(DType::F32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  return t;
}
HostTensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t(DType::I64, shape);
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  return t;
}
std::vector<double> values(const HostTensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_f64(i));
  return r;
}

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

// y = NonZero(Relu(x)) computed inside a segment, then later ops on its true size:
// n = Shape(y) and z = x + 1 (x live across the boundary).
TEST(OnnxStaged, NonZeroOfAComputedValueSplitsTheProgram) {
  Model m;
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"r"});
  m.node("NonZero", {"r"}, {"y"});
  m.node("Shape", {"y"}, {"n"});
  Model::init_i64(m.g(), "one", {1});
  m.node("Cast", {"one"}, {"onef"});
  attr_i(m.g()->mutable_node(3), "to", onnx::TensorProto::FLOAT);
  m.node("Add", {"x", "onef"}, {"z"});
  m.node("ReduceSum", {"y"}, {"s"});
  attr_i(m.g()->mutable_node(5), "keepdims", 0);
  for (const char* o : {"y", "n", "z", "s"}) m.output(o);
  std::string path = m.save("nonzero");
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

// Loop(M, cond, acc): body (i, c, a) -> (c, a + x * i, a + x * i); x from the outer scope.
Model loop_model(bool with_cond, bool cond_from_body = false) {
  Model m;
  m.input("x", {3});
  m.input("M", {}, onnx::TensorProto::INT64);
  auto* cp = m.g()->add_initializer();
  cp->set_name("cond");
  cp->set_data_type(onnx::TensorProto::BOOL);
  cp->add_int32_data(1);
  auto* acc = m.g()->add_initializer();
  acc->set_name("acc0");
  acc->set_data_type(onnx::TensorProto::FLOAT);
  acc->add_dims(3);
  for (int k = 0; k < 3; ++k) acc->add_float_data(0);
  auto* n = m.node("Loop", {"M", with_cond ? "cond" : "", "acc0"}, {"acc", "accs"});
  auto* b = attr_g(n, "body");
  b->set_name("body");
  Model::input(b, "i", {}, onnx::TensorProto::INT64);
  Model::input(b, "c_in", {}, onnx::TensorProto::BOOL);
  Model::input(b, "a_in", {3}, onnx::TensorProto::FLOAT);
  if (cond_from_body) {  // keep going while sum(acc) < 1e30: practically forever
    Model::node(b, "ReduceSum", {"a_in"}, {"sum"}, "inner_sum");
    auto* lim = b->add_initializer();
    lim->set_name("lim");
    lim->set_data_type(onnx::TensorProto::FLOAT);
    lim->add_float_data(1e30f);
    Model::node(b, "Less", {"sum", "lim"}, {"c_out"}, "inner_less");
  } else {
    Model::node(b, "Identity", {"c_in"}, {"c_out"}, "inner_id");
  }
  attr_i(Model::node(b, "Cast", {"i"}, {"fi"}, "inner_cast"), "to", onnx::TensorProto::FLOAT);
  Model::node(b, "Mul", {"x", "fi"}, {"xi"}, "inner_mul");
  Model::node(b, "Add", {"a_in", "xi"}, {"a_out"}, "inner_add");
  Model::node(b, "Identity", {"a_out"}, {"scan_out"}, "inner_scan");
  for (const char* o : {"c_out", "a_out", "scan_out"}) {
    auto* vi = b->add_output();
    vi->set_name(o);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(o[0] == 'c' ? onnx::TensorProto::BOOL : onnx::TensorProto::FLOAT);
    if (o[0] != 'c') tt->mutable_shape()->add_dim()->set_dim_value(3);
  }
  m.output("acc");
  m.output("accs");
  return m;
}

HostTensor scalar_i64(int64_t v) { return i64({}, {v}); }

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
    if (trip >= 2) EXPECT_EQ(out.at("accs").get_f64(1 * 3 + 2), 3.0);  // after i = 0, 1: x * 1
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

// A NonZero whose count, scaled, becomes a shape: the element cap, naming the node.
TEST(OnnxStaged, NonZeroFeedingAHugeShapeNamesTheNode) {
  Model m;
  m.input("v", {4}, onnx::TensorProto::INT64);
  m.node("NonZero", {"v"}, {"nz"});
  m.node("Shape", {"nz"}, {"s"});
  Model::init_i64(m.g(), "big", {int64_t(1) << 30, int64_t(1) << 30});
  m.node("Mul", {"s", "big"}, {"shape"});
  m.node("ConstantOfShape", {"shape"}, {"y"}, "huge_fill");
  m.output("y");
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
  Model m;
  m.input("M", {}, onnx::TensorProto::INT64);
  m.input("x", {2});
  onnx::GraphProto* g = m.g();
  std::string carried = "x";
  const int kDeep = 18;
  for (int d = 0; d < kDeep; ++d) {
    auto* n = Model::node(g, "Loop", {"M", "", carried}, {"out" + std::to_string(d)}, "loop" + std::to_string(d));
    auto* b = attr_g(n, "body");
    std::string s = std::to_string(d);
    Model::input(b, "i" + s, {}, onnx::TensorProto::INT64);
    Model::input(b, "c" + s, {}, onnx::TensorProto::BOOL);
    Model::input(b, "v" + s, {2}, onnx::TensorProto::FLOAT);
    Model::node(b, "Identity", {"c" + s}, {"co" + s}, "cid" + s);
    b->add_output()->set_name("co" + s);
    if (d == kDeep - 1) {
      Model::node(b, "Neg", {"v" + s}, {"vo" + s}, "neg");
      b->add_output()->set_name("vo" + s);
    } else {
      b->add_output()->set_name("out" + std::to_string(d + 1));
    }
    carried = "v" + s;
    g = b;
  }
  m.output("out0");
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
