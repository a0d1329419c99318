// structure_test.cpp — the unsigned dtypes (u16 / u32 / u64 tensors, BitShift, Max, Mod)
// and sequence / optional graph inputs and outputs (OnnxOptions::sequence_inputs and
// absent_optionals, SequenceMap, Optional*), on models built here, run on the interpreter.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"

namespace lathe {
namespace {

struct Model {
  onnx::ModelProto m;
  explicit Model(int opset) {
    m.set_ir_version(8);
    m.add_opset_import()->set_version(opset);
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  static void tensor_type(onnx::TypeProto* t, int elem, const std::vector<int64_t>& dims) {
    auto* tt = t->mutable_tensor_type();
    tt->set_elem_type(elem);
    tt->mutable_shape();
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void input(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    auto* in = g()->add_input();
    in->set_name(name);
    tensor_type(in->mutable_type(), elem, dims);
  }
  // a sequence of rank-`rank` tensors (dims left unknown), optionally inside an optional
  void seq_input(const std::string& name, int elem, int rank, bool optional = false) {
    auto* in = g()->add_input();
    in->set_name(name);
    onnx::TypeProto* t = in->mutable_type();
    if (optional) t = t->mutable_optional_type()->mutable_elem_type();
    auto* tt = t->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (int i = 0; i < rank; ++i) tt->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(i));
  }
  void opt_tensor_input(const std::string& name, int elem, const std::vector<int64_t>& dims) {
    auto* in = g()->add_input();
    in->set_name(name);
    tensor_type(in->mutable_type()->mutable_optional_type()->mutable_elem_type(), elem, dims);
  }
  onnx::NodeProto* node(onnx::GraphProto* gr, const std::string& op, std::vector<std::string> ins,
                        std::vector<std::string> outs, bool graph_outputs = true) {
    auto* n = gr->add_node();
    n->set_op_type(op);
    n->set_name("the_" + op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) {
      n->add_output(o);
      if (graph_outputs) gr->add_output()->set_name(o);
    }
    return n;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    return node(g(), op, std::move(ins), std::move(outs));
  }
  Graph load(const OnnxOptions& opt = {}) {
    std::string b = m.SerializeAsString();
    return load_onnx_bytes(b.data(), b.size(), opt, "t.onnx");
  }
};

HostTensor u64s(std::vector<uint64_t> v) {
  HostTensor t(DType::U64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.ptr<uint64_t>()[i] = v[i];
  return t;
}
std::vector<uint64_t> as_u64(const HostTensor& t) {
  EXPECT_EQ(t.dtype(), DType::U64);
  return std::vector<uint64_t>(t.ptr<uint64_t>(), t.ptr<uint64_t>() + t.numel());
}

TEST(OnnxUnsigned, BitShiftKeepsU64ValuesAbove2To63) {
  Model md(11);
  md.input("x", onnx::TensorProto::UINT64, {4});
  md.input("y", onnx::TensorProto::UINT64, {4});
  auto* n = md.node("BitShift", {"x", "y"}, {"z"});
  auto* a = n->add_attribute();
  a->set_name("direction");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("RIGHT");
  Graph g = md.load();
  const uint64_t big = 0x8000000000000010ull;
  // a shift by >= 64 (even one that is negative as an int64) shifts everything out
  TensorMap out = interpret(g, {{"x", u64s({big, big, 7, big})}, {"y", u64s({4, 0, 1, ~0ull})}});
  EXPECT_EQ(as_u64(out.at("z")), (std::vector<uint64_t>{big >> 4, big, 3, 0}));
}

TEST(OnnxUnsigned, MaxAndModCompareUnsigned) {
  Model md(13);
  md.input("a", onnx::TensorProto::UINT32, {3});
  md.input("b", onnx::TensorProto::UINT32, {3});
  md.node("Max", {"a", "b"}, {"m"});
  md.node("Mod", {"a", "b"}, {"r"});
  Graph g = md.load();
  HostTensor a(DType::U32, {3}), b(DType::U32, {3});
  uint32_t av[] = {0x80000000u, 5, 4000000000u}, bv[] = {1, 0xFFFFFFFFu, 7};
  for (int i = 0; i < 3; ++i) { a.ptr<uint32_t>()[i] = av[i]; b.ptr<uint32_t>()[i] = bv[i]; }
  TensorMap out = interpret(g, {{"a", a}, {"b", b}});
  const auto* m = out.at("m").ptr<uint32_t>();
  const auto* r = out.at("r").ptr<uint32_t>();
  EXPECT_EQ(out.at("m").dtype(), DType::U32);
  EXPECT_EQ(m[0], 0x80000000u);
  EXPECT_EQ(m[1], 0xFFFFFFFFu);
  EXPECT_EQ(m[2], 4000000000u);
  EXPECT_EQ(r[0], 0u);
  EXPECT_EQ(r[1], 5u);
  EXPECT_EQ(r[2], 4000000000u % 7);
}

// y = SequenceMap(x, c) with body out = Add(in, c): a sequence input of two differently
// shaped elements in, a sequence output of two elements out.
TEST(OnnxSequence, SequenceInputMapAndOutput) {
  Model md(17);
  md.seq_input("x", onnx::TensorProto::FLOAT, 1);
  md.input("c", onnx::TensorProto::FLOAT, {1});
  auto* n = md.node("SequenceMap", {"x", "c"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  onnx::GraphProto* body = a->mutable_g();
  body->set_name("body");
  body->add_input()->set_name("in");
  body->add_input()->set_name("cc");
  md.node(body, "Add", {"in", "cc"}, {"out"});

  // without the structure the input is unsupported, not a crash
  EXPECT_THROW(md.load(), OnnxUnsupported);
  OnnxOptions opt;
  opt.sequence_inputs["x"] = {{3}, {2}};
  Graph g = md.load(opt);
  ASSERT_EQ(g.outputs.size(), 2u);
  EXPECT_EQ(g.outputs[0].first, "y[0]");
  EXPECT_EQ(g.outputs[1].first, "y[1]");
  HostTensor x0(DType::F32, {3}), x1(DType::F32, {2}), c(DType::F32, {1});
  for (int i = 0; i < 3; ++i) x0.set_f64(i, i);
  for (int i = 0; i < 2; ++i) x1.set_f64(i, 10 + i);
  c.set_f64(0, 0.5);
  TensorMap out = interpret(g, {{"x[0]", x0}, {"x[1]", x1}, {"c", c}});
  EXPECT_EQ(out.at("y[0]").shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(out.at("y[1]").shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(out.at("y[0]").get_f64(2), 2.5);
  EXPECT_EQ(out.at("y[1]").get_f64(1), 11.5);

  // an element of the wrong rank is an error naming the input
  opt.sequence_inputs["x"] = {{3, 1}};
  try {
    md.load(opt);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("graph input 'x'"), std::string::npos) << e.what();
  }
}

TEST(OnnxSequence, OptionalPresentAndAbsent) {
  Model md(18);
  md.opt_tensor_input("o", onnx::TensorProto::FLOAT, {2});
  md.node("OptionalHasElement", {"o"}, {"has"});
  Graph absent = [&] {
    OnnxOptions opt;
    opt.absent_optionals.insert("o");
    return md.load(opt);
  }();
  EXPECT_TRUE(absent.inputs.empty());
  EXPECT_EQ(interpret(absent, {}).at("has").get_i64(0), 0);
  Graph present = md.load();
  ASSERT_EQ(present.inputs.size(), 1u);
  EXPECT_EQ(interpret(present, {{"o", HostTensor(DType::F32, {2})}}).at("has").get_i64(0), 1);

  // OptionalGetElement of an empty optional is an error naming the node
  Model md2(18);
  md2.opt_tensor_input("o", onnx::TensorProto::FLOAT, {2});
  md2.node("OptionalGetElement", {"o"}, {"v"});
  OnnxOptions opt;
  opt.absent_optionals.insert("o");
  try {
    md2.load(opt);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("OptionalGetElement"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds no value"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
