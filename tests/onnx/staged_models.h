// staged_models.h — small ONNX models built in memory for the staged-executor tests
// (staged_test.cpp checks them against hand-computed values on the interpreter,
// staged_backend_test.cpp runs them on each compiled backend against the interpreter).
#pragma once
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/runtime/host_tensor.h"

namespace lathe::staged_test {

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
  void save_to(const std::string& path) { std::ofstream(path, std::ios::binary) << m.SerializeAsString(); }
  // written to a file (StagedOnnx reads a path)
  std::string save(const std::string& tag) {
    auto dir = std::filesystem::temp_directory_path() / ("lathe_staged_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::string p = (dir / (tag + ".onnx")).string();
    std::ofstream(p, std::ios::binary) << m.SerializeAsString();
    return p;
  }
};

inline void attr_i(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

inline onnx::GraphProto* attr_g(onnx::NodeProto* n, const std::string& k) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::GRAPH);
  return a->mutable_g();
}

inline HostTensor f32(std::vector<int64_t> shape, std::vector<double> v) {
  HostTensor t(DType::F32, shape);
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  return t;
}
inline HostTensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t(DType::I64, shape);
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  return t;
}
inline std::vector<double> values(const HostTensor& t) {
  std::vector<double> r;
  for (int64_t i = 0; i < t.numel(); ++i) r.push_back(t.get_f64(i));
  return r;
}

// y = NonZero(Relu(x)) computed inside a segment, then later ops on its true size:
// n = Shape(y), z = x + 1 (x live across the boundary), s = ReduceSum(y).
inline Model nonzero_model() {
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
  return m;
}

// Loop(M, cond, acc): body (i, c, a) -> (c, a + x * i, a + x * i); x from the outer scope.
// const_trip >= 0: M is that constant (an initializer) rather than a graph input.
inline Model loop_model(bool with_cond, bool cond_from_body = false, int64_t const_trip = -1) {
  Model m;
  m.input("x", {3});
  if (const_trip >= 0) Model::init_i64(m.g(), "M", {const_trip}, true);
  else m.input("M", {}, onnx::TensorProto::INT64);
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

inline HostTensor scalar_i64(int64_t v) { return i64({}, {v}); }

// TopK with a run-time k over a computed value, then a Reshape to a run-time shape:
// y = Reshape(TopK(Exp(x) * 2, k).values + 1, shape); both k and shape stay graph inputs.
inline Model topk_reshape_model() {
  Model m(13);
  m.input("x", {12});
  m.input("k", {1}, onnx::TensorProto::INT64);
  m.input("shape", {2}, onnx::TensorProto::INT64);
  m.node("Exp", {"x"}, {"e"});
  m.node("Add", {"e", "e"}, {"e2"});
  m.node("TopK", {"e2", "k"}, {"v", "i"});
  m.node("Reshape", {"v", "shape"}, {"y"});
  m.output("y");
  m.output("i");
  return m;
}

// v (i64[4]) -> NonZero -> Shape · 2^30 -> ConstantOfShape 'huge_fill': a count that becomes a huge shape.
inline Model nonzero_huge_model() {
  Model m;
  m.input("v", {4}, onnx::TensorProto::INT64);
  m.node("NonZero", {"v"}, {"nz"});
  m.node("Shape", {"nz"}, {"s"});
  Model::init_i64(m.g(), "big", {int64_t(1) << 30, int64_t(1) << 30});
  m.node("Mul", {"s", "big"}, {"shape"});
  m.node("ConstantOfShape", {"shape"}, {"y"}, "huge_fill");
  m.output("y");
  return m;
}

// Loops nested kDeep deep, each with the run-time trip count M read from the outer scope.
inline Model deep_loop_model(int kDeep) {
  Model m;
  m.input("M", {}, onnx::TensorProto::INT64);
  m.input("x", {2});
  onnx::GraphProto* g = m.g();
  std::string carried = "x";
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
  return m;
}

// ScatterElements(x [4], idx, [5, 6]) with run-time indices: the graph input itself, or
// (computed) idx + 0 computed in the program before the scatter.
inline Model scatter_model(bool computed) {
  Model m(16);
  m.input("x", {4});
  m.input("idx", {2}, onnx::TensorProto::INT64);
  auto* u = m.g()->add_initializer();
  u->set_name("u");
  u->set_data_type(onnx::TensorProto::FLOAT);
  u->add_dims(2);
  u->add_float_data(5);
  u->add_float_data(6);
  std::string i = "idx";
  if (computed) {
    Model::init_i64(m.g(), "zero", {0});
    m.node("Add", {"idx", "zero"}, {"idx2"}, "index_add");
    i = "idx2";
  }
  m.node("ScatterElements", {"x", i, "u"}, {"y"});
  m.output("y");
  return m;
}

// Scan (opset 11) over xs [2, T] along axis 1, read backwards: state s [2],
// body (s, x) -> (s + x, (s + x) * 2); the scan output stacks along axis 1 ([2, T]).
inline Model scan_model(int64_t T) {
  Model m(11);
  m.input("s0", {2});
  m.input("xs", {2, T});
  auto* n = m.node("Scan", {"s0", "xs"}, {"sf", "ys"});
  attr_i(n, "num_scan_inputs", 1);
  auto ints = [&](const char* k, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(k);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(v);
  };
  ints("scan_input_axes", 1);
  ints("scan_input_directions", 1);
  ints("scan_output_axes", 1);
  auto* b = attr_g(n, "body");
  b->set_name("body");
  Model::input(b, "s", {2}, onnx::TensorProto::FLOAT);
  Model::input(b, "x", {2}, onnx::TensorProto::FLOAT);
  Model::node(b, "Add", {"s", "x"}, {"s2"}, "inner_add");
  Model::node(b, "Add", {"s2", "s2"}, {"y"}, "inner_double");
  b->add_output()->set_name("s2");
  b->add_output()->set_name("y");
  m.output("sf");
  m.output("ys");
  return m;
}

}  // namespace lathe::staged_test
