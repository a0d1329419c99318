// onnx_builder.h — small ONNX models built in a test: graph inputs, initializers from
// HostTensors, nodes whose (non-empty) outputs become graph outputs, attributes, and random
// f32 tensors, a Resize node. Shared by the tests that import models made here
// (new_ops_test.cpp, rnn_backends_test.cpp, resize_backends_test.cpp, upsample_conv_test.cpp).
#pragma once
#include <onnx/onnx_pb.h>

#include <random>
#include <string>
#include <vector>

#include "core/import/onnx_import.h"
#include "core/runtime/host_tensor.h"

namespace lathe::test {

struct OnnxBuilder {
  onnx::ModelProto m;
  explicit OnnxBuilder(int opset = 14) {
    m.set_ir_version(7);
    m.add_opset_import()->set_version(opset);
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  void input(const std::string& name, std::vector<int64_t> dims, int type = onnx::TensorProto::FLOAT) {
    auto* in = g()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    tt->mutable_shape();  // rank 0 when dims is empty
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  // f32 as FLOAT, i32 as INT32, i8 as INT8, any other dtype as INT64
  void init(const std::string& name, const HostTensor& t) {
    auto* p = g()->add_initializer();
    p->set_name(name);
    for (int64_t d : t.shape()) p->add_dims(d);
    if (t.dtype() == DType::F32) {
      p->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t i = 0; i < t.numel(); ++i) p->add_float_data(static_cast<float>(t.get_f64(i)));
    } else if (t.dtype() == DType::I32 || t.dtype() == DType::I8) {
      p->set_data_type(t.dtype() == DType::I8 ? onnx::TensorProto::INT8 : onnx::TensorProto::INT32);
      for (int64_t i = 0; i < t.numel(); ++i) p->add_int32_data(static_cast<int32_t>(t.get_i64(i)));
    } else {
      p->set_data_type(onnx::TensorProto::INT64);
      for (int64_t i = 0; i < t.numel(); ++i) p->add_int64_data(t.get_i64(i));
    }
  }
  // a node named "the_<op>"; each non-empty output is also a graph output
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs) {
    auto* n = g()->add_node();
    n->set_op_type(op);
    n->set_name("the_" + op);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) {
      n->add_output(o);
      if (!o.empty()) g()->add_output()->set_name(o);
    }
    return n;
  }
  Graph load(const std::string& file = "t.onnx") {
    std::string b = m.SerializeAsString();
    return load_onnx_bytes(b.data(), b.size(), {}, file);
  }
};

inline void attr_i(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void attr_ints(onnx::NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

inline void attr_f(onnx::NodeProto* n, const std::string& k, float v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void attr_s(onnx::NodeProto* n, const std::string& k, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// A Resize of `x` into `out` (also a graph output where `output`) by `scales` (an initializer
// "scales") or else by `sizes` ("sizes"), with its mode, coordinate transformation mode and,
// where not empty, nearest_mode
inline onnx::NodeProto* resize_node(OnnxBuilder& m, const std::string& x, const std::string& out, bool output,
                                    const std::string& mode, const std::string& coord, const std::vector<float>& scales,
                                    const std::vector<int64_t>& sizes, const std::string& nearest = "") {
  std::vector<std::string> rin{x, ""};
  if (!scales.empty()) {
    HostTensor s(DType::F32, {static_cast<int64_t>(scales.size())});
    for (size_t i = 0; i < scales.size(); ++i) s.set_f64(static_cast<int64_t>(i), scales[i]);
    m.init("scales", s);
    rin.push_back("scales");
  } else {
    HostTensor s(DType::I64, {static_cast<int64_t>(sizes.size())});
    for (size_t i = 0; i < sizes.size(); ++i) s.set_i64(static_cast<int64_t>(i), sizes[i]);
    m.init("sizes", s);
    rin.push_back("");
    rin.push_back("sizes");
  }
  auto* r = m.node("Resize", rin, {output ? out : ""});
  if (!output) r->set_output(0, out);
  attr_s(r, "mode", mode);
  attr_s(r, "coordinate_transformation_mode", coord);
  if (!nearest.empty()) attr_s(r, "nearest_mode", nearest);
  return r;
}

// uniform in [-scale, scale]
inline HostTensor randt(std::vector<int64_t> shape, std::mt19937& rng, double scale = 0.5) {
  HostTensor t(DType::F32, std::move(shape));
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, u(rng));
  return t;
}

}  // namespace lathe::test
