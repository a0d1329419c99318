// import_test.cpp — the ONNX importer on real models from Debian's libonnx-testdata and on
// small models built here: names, dtypes, symbolic dims, provenance, weights as inputs,
// numeric results against the test data, and how unsupported things are reported.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "core/ir/loader.h"
#include "core/runtime/compare.h"

namespace lathe {
namespace {

const std::string kData = LATHE_ONNX_TESTDATA;

bool have_data() { return std::filesystem::exists(kData + "/node/test_add/model.onnx"); }
#define NEED_DATA() \
  if (!have_data()) GTEST_SKIP() << "libonnx-testdata is not installed"

// Runs data set 0 of a backend test and compares every output.
void expect_test_passes(const std::string& dir) {
  Graph g = load_onnx(dir + "/model.onnx");
  TensorMap in;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    std::string p = dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb";
    if (std::filesystem::exists(p)) in[g.inputs[i]->attrs.name] = read_onnx_tensor(p);
  }
  TensorMap out = interpret(g, in);
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    HostTensor want = read_onnx_tensor(dir + "/test_data_set_0/output_" + std::to_string(i) + ".pb");
    const HostTensor& got = out.at(g.outputs[i].first);
    std::string why;
    EXPECT_EQ(got.dtype(), want.dtype()) << dir;
    EXPECT_TRUE(allclose(got, want, 1e-3, 1e-7, &why)) << dir << ": " << why;
  }
}

TEST(OnnxImport, AddKeepsNamesDtypesShapes) {
  NEED_DATA();
  Graph g = load_onnx(kData + "/node/test_add/model.onnx");
  ASSERT_EQ(g.inputs.size(), 2u);
  EXPECT_EQ(g.inputs[0]->attrs.name, "x");
  EXPECT_EQ(g.inputs[1]->attrs.name, "y");
  EXPECT_EQ(g.inputs[0]->dtype, DType::F32);
  EXPECT_EQ(shape_to_string(g.inputs[0]->shape), "[3, 4, 5]");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0].first, "sum");
  expect_test_passes(kData + "/node/test_add");
}

TEST(OnnxImport, RealModelsRunCorrectly) {
  NEED_DATA();
  for (const char* t : {"simple/test_sign_model", "simple/test_single_relu_model", "node/test_matmul_2d",
                        "node/test_softmax_axis_0", "node/test_gather_0", "node/test_conv_with_strides_padding", "node/test_transpose_default",
                        "pytorch-converted/test_Conv2d", "pytorch-converted/test_MaxPool2d",
                        "pytorch-operator/test_operator_addmm", "node/test_reduce_mean_keepdims_example"})
    expect_test_passes(kData + "/" + t);
}

TEST(OnnxImport, ProvenanceNamesTheOnnxNode) {
  NEED_DATA();
  Graph g = load_onnx(kData + "/simple/test_sign_model/model.onnx");  // node "test" (Sign)
  bool found = false;
  for (NodeRef n : g.toposort())
    if (n->prov.path.find("test:Sign") != std::string::npos) found = true;
  EXPECT_TRUE(found);
  Graph h = load_onnx(kData + "/node/test_add/model.onnx");  // unnamed node 0
  EXPECT_NE(h.outputs[0].second->prov.path.find("Add#0"), std::string::npos) << h.outputs[0].second->prov.path;
}

TEST(OnnxImport, WeightsAsInputs) {
  NEED_DATA();
  std::string m = kData + "/pytorch-converted/test_Conv2d/model.onnx";
  Graph consts = load_onnx(m);
  EXPECT_EQ(consts.inputs.size(), 1u);
  OnnxOptions o;
  o.weights_as_inputs = true;
  Graph ins = load_onnx(m, o);
  EXPECT_EQ(ins.inputs.size(), 3u);  // x, then weight and bias
  EXPECT_EQ(ins.inputs[0]->attrs.name, consts.inputs[0]->attrs.name);
}

TEST(OnnxImport, RegisteredLoader) {
  NEED_DATA();
  register_onnx_loader();
  Graph g = load_graph(kData + "/node/test_relu/model.onnx");
  EXPECT_EQ(g.outputs.size(), 1u);
}

// ---- models built here --------------------------------------------------------------------

onnx::ModelProto tiny_model(const std::string& op, int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(opset);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  tt->mutable_shape()->add_dim();  // neither value nor name
  auto* n = g->add_node();
  n->set_op_type(op);
  n->add_input("x");
  n->add_output("y");
  n->set_name("n0");
  g->add_output()->set_name("y");
  return m;
}

Graph load_proto(const onnx::ModelProto& m, const OnnxOptions& o = {}) {
  std::string bytes = m.SerializeAsString();
  return load_onnx_bytes(bytes.data(), bytes.size(), o, "test.onnx");
}

TEST(OnnxImport, SymbolicDims) {
  Graph g = load_proto(tiny_model("Relu"));
  const Shape& s = g.inputs[0]->shape;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].to_string(), "batch");
  EXPECT_EQ(s[1], SymInt(4));
  EXPECT_FALSE(s[2].is_const());
  // runs with the dims bound from the input
  HostTensor x(DType::F32, {2, 4, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(i % 5) - 2);
  TensorMap out = interpret(g, {{"x", x}});
  EXPECT_EQ(out.at("y").shape(), (std::vector<int64_t>{2, 4, 3}));
  EXPECT_EQ(out.at("y").get_f64(0), 0.0);
  EXPECT_EQ(out.at("y").get_f64(4), 2.0);
}

TEST(OnnxImport, UnsupportedOpIsNamed) {
  try {
    load_proto(tiny_model("FancyNewOp"));
    FAIL() << "expected OnnxUnsupported";
  } catch (const OnnxUnsupported& e) {
    EXPECT_NE(std::string(e.what()).find("unsupported ONNX op 'FancyNewOp'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n0"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, DynamicShapeInputIsReported) {
  // Reshape whose shape comes from a graph input cannot be folded at import time
  onnx::ModelProto m = tiny_model("Reshape");
  auto* g = m.mutable_graph();
  auto* s = g->add_input();
  s->set_name("shape");
  s->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  s->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(2);
  g->mutable_node(0)->add_input("shape");
  try {
    load_proto(m);
    FAIL() << "expected OnnxUnsupported";
  } catch (const OnnxUnsupported& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic shape input not supported"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
