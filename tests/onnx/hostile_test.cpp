// hostile_test.cpp — malformed and hostile ONNX files give a clear UserError, never a
// crash, an InternalError or a huge allocation: truncated and bit-flipped real models,
// data lengths that disagree with dims, huge declared shapes, cycles, undefined inputs,
// attributes of the wrong type, missing outputs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/import/onnx_import.h"

namespace lathe {
namespace {

const std::string kData = LATHE_ONNX_TESTDATA;

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Loads bytes; returns "" on success or the UserError message. Any other exception fails.
std::string try_load(const std::string& bytes) {
  try {
    load_onnx_bytes(bytes.data(), bytes.size(), {}, "hostile.onnx");
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

void expect_error(const onnx::ModelProto& m, const std::string& needle) {
  std::string msg = try_load(m.SerializeAsString());
  EXPECT_NE(msg, "") << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

onnx::ModelProto base_model() {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  return m;
}

onnx::NodeProto* add_node(onnx::ModelProto& m, const std::string& op, std::vector<std::string> ins,
                          std::vector<std::string> outs) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  for (auto& i : ins) n->add_input(i);
  for (auto& o : outs) n->add_output(o);
  return n;
}

TEST(OnnxHostile, TruncatedModels) {
  std::string p = kData + "/pytorch-converted/test_Conv2d/model.onnx";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string bytes = read_file(p);
  int errors = 0;
  for (size_t len = 0; len < bytes.size(); len += 1 + len / 64) errors += !try_load(bytes.substr(0, len)).empty();
  EXPECT_GT(errors, 0);
  EXPECT_EQ(try_load(bytes), "");
}

TEST(OnnxHostile, FlippedBytes) {
  std::string p = kData + "/pytorch-converted/test_Conv2d/model.onnx";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << "libonnx-testdata is not installed";
  std::string bytes = read_file(p);
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 400; ++iter) {
    std::string b = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] ^= static_cast<char>(1 + rng() % 255);
    try_load(b);  // may load or fail; must not crash or throw anything but UserError
  }
}

TEST(OnnxHostile, GarbageAndEmpty) {
  EXPECT_NE(try_load(""), "");
  EXPECT_NE(try_load("this is not a protobuf at all \xff\xff\xff\xff"), "");
}

TEST(OnnxHostile, RawDataLengthDisagreesWithDims) {
  onnx::ModelProto m = base_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(10);
  t->set_raw_data(std::string(8, '\0'));
  add_node(m, "Add", {"x", "w"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "raw_data has 8 bytes");
}

TEST(OnnxHostile, TypedDataCountDisagreesWithDims) {
  onnx::ModelProto m = base_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->add_float_data(1.0f);
  add_node(m, "Add", {"x", "w"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "float_data holds 1 values");
}

TEST(OnnxHostile, HugeDeclaredShapeIsRefusedBeforeAllocating) {
  onnx::ModelProto m = base_model();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(int64_t(1) << 40);
  t->add_dims(int64_t(1) << 40);  // the product overflows int64
  add_node(m, "Add", {"x", "w"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "more than");
}

TEST(OnnxHostile, HugeComputedShapeIsRefused) {
  onnx::ModelProto m = base_model();
  auto* c = add_node(m, "Constant", {}, {"s"});
  auto* a = c->add_attribute();
  a->set_name("value_ints");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(int64_t(1) << 30);
  a->add_ints(int64_t(1) << 30);
  add_node(m, "ConstantOfShape", {"s"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "elements");
}

TEST(OnnxHostile, NegativeInputDim) {
  onnx::ModelProto m = base_model();
  m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(-3);
  add_node(m, "Relu", {"x"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "negative");
}

TEST(OnnxHostile, Cycle) {
  onnx::ModelProto m = base_model();
  add_node(m, "Add", {"x", "b"}, {"a"});
  add_node(m, "Relu", {"a"}, {"b"});
  m.mutable_graph()->add_output()->set_name("b");
  expect_error(m, "cycle");
}

TEST(OnnxHostile, UndefinedInput) {
  onnx::ModelProto m = base_model();
  add_node(m, "Add", {"x", "nowhere"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "'nowhere'");
}

TEST(OnnxHostile, ValueDefinedTwice) {
  onnx::ModelProto m = base_model();
  add_node(m, "Relu", {"x"}, {"y"});
  add_node(m, "Neg", {"x"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "more than once");
}

TEST(OnnxHostile, AttributeOfTheWrongType) {
  onnx::ModelProto m = base_model();
  auto* n = add_node(m, "Softmax", {"x"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.5f);
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "attribute 'axis' must be INT");
}

TEST(OnnxHostile, OutputNeverProduced) {
  onnx::ModelProto m = base_model();
  add_node(m, "Relu", {"x"}, {"y"});
  m.mutable_graph()->add_output()->set_name("z");
  expect_error(m, "graph output 'z' is never produced");
}

TEST(OnnxHostile, MissingRequiredInput) {
  onnx::ModelProto m = base_model();
  add_node(m, "Add", {"x"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  expect_error(m, "required input 1 is missing");
}

TEST(OnnxHostile, TensorFileWithBadLength) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(3);
  t.set_raw_data(std::string(7, '\1'));
  std::string path = std::filesystem::temp_directory_path() / "lathe_hostile_tensor.pb";
  {
    std::ofstream f(path, std::ios::binary);
    f << t.SerializeAsString();
  }
  EXPECT_THROW(read_onnx_tensor(path), UserError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace lathe
