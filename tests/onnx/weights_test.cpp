// weights_test.cpp — models are read without copying their weights: load_onnx maps the
// file and the large initializers' tensors lie in that mapping (at any alignment the file
// gives them); the in-memory path gives the same values; a file cut short names the
// initializer or node it breaks off in; weights over the memory budget name the tensor.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/import/onnx_import.h"
#include "core/ir/text.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

// y = x @ W + B, with W f32[64, n] (8 KiB at n = 32: left in the file) and B f32[n] (parsed).
onnx::ModelProto matmul_model(const std::string& doc, double seed, int64_t n = 32) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  m.set_doc_string(doc);  // shifts where the weights lie in the file
  auto* g = m.mutable_graph();
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  tt->mutable_shape()->add_dim()->set_dim_value(64);
  auto add_init = [&](const std::string& name, std::vector<int64_t> dims, double s) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (auto d : dims) t->add_dims(d), n *= d;
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(s + 0.01 * static_cast<double>(i)));
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  };
  add_init("W", {64, n}, seed);
  add_init("B", {n}, seed + 1);
  auto* mm = g->add_node();
  mm->set_name("mm");
  mm->set_op_type("MatMul");
  mm->add_input("x");
  mm->add_input("W");
  mm->add_output("h");
  auto* add = g->add_node();
  add->set_name("bias");
  add->set_op_type("Add");
  add->add_input("h");
  add->add_input("B");
  add->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/lathe-weights-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string write_model(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::string p = dir + "/" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string load_error(const std::string& path) {
  try {
    load_onnx(path);
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

// The address ranges where `path` is mapped into this process.
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::vector<std::pair<uintptr_t, uintptr_t>> r;
  while (std::getline(maps, line))
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0)
      r.push_back({std::stoull(line.substr(0, line.find('-')), nullptr, 16),
                   std::stoull(line.substr(line.find('-') + 1), nullptr, 16)});
  return r;
}

const HostTensor* constant_of_shape(const Graph& g, std::vector<int64_t> shape) {
  for (NodeRef n : g.toposort())
    if (n->op == Op::Const && n->attrs.data && n->attrs.data->shape() == shape) return n->attrs.data.get();
  return nullptr;
}

TEST(OnnxWeights, MappedAtEveryAlignmentAndEqualToTheParsedValues) {
  TempDir d;
  for (int shift = 0; shift < 4; ++shift) {
    // each shift: new values, so hash-consing cannot hand back an earlier node
    onnx::ModelProto m = matmul_model(std::string(static_cast<size_t>(shift), 'd'), 10.0 * shift + 0.5);
    std::string bytes = m.SerializeAsString();
    std::string p = write_model(d.path, "m" + std::to_string(shift) + ".onnx", bytes);
    Graph mapped = load_onnx(p);
    const HostTensor* w = constant_of_shape(mapped, {64, 32});
    ASSERT_TRUE(w);
    // the values are W's, whichever way they were read
    std::vector<float> want(64 * 32);
    std::memcpy(want.data(), m.graph().initializer(0).raw_data().data(), want.size() * 4);
    for (int64_t i = 0; i < w->numel(); ++i) ASSERT_EQ(w->ptr<float>()[i], want[i]) << "element " << i;
    auto addr = reinterpret_cast<uintptr_t>(w->data());
    bool in_file = false;
    for (auto [lo, hi] : mappings_of(p)) in_file |= addr >= lo && addr < hi;
    size_t offset = bytes.find(m.graph().initializer(0).raw_data());
    if (offset % 4 == 0) EXPECT_TRUE(in_file) << "shift " << shift << ": W was copied, not used in the mapping";
    else EXPECT_FALSE(in_file) << "shift " << shift << ": a misaligned W must be copied";
    // the in-memory path (bytes, copied) gives the same graph
    EXPECT_EQ(print_graph(load_onnx_bytes(bytes.data(), bytes.size(), {}, "mem.onnx")), print_graph(mapped));
  }
}

// A large weight unaligned in the file is not copied at load: its tensor is deferred
// (HostTensor::deferred), its bytes() the mapping's, until something asks for data(); then
// it is read once into aligned memory, with the file's values.
TEST(OnnxWeights, LargeUnalignedWeightsAreReadOnFirstUse) {
  TempDir d;
  const int64_t n = 257;  // W: 64 x 257 f32, 65,792 bytes (>= kDeferUnalignedBytes)
  for (int shift = 0; shift < 4; ++shift) {
    onnx::ModelProto m = matmul_model(std::string(static_cast<size_t>(shift), 'u'), 20.0 * shift + 0.25, n);
    std::string bytes = m.SerializeAsString();
    std::string p = write_model(d.path, "big" + std::to_string(shift) + ".onnx", bytes);
    Graph g = load_onnx(p);
    const HostTensor* w = constant_of_shape(g, {64, n});
    ASSERT_TRUE(w);
    const size_t offset = bytes.find(m.graph().initializer(0).raw_data());
    auto in_file = [&](const void* q) {
      bool r = false;
      for (auto [lo, hi] : mappings_of(p)) r |= reinterpret_cast<uintptr_t>(q) >= lo && reinterpret_cast<uintptr_t>(q) < hi;
      return r;
    };
    EXPECT_TRUE(in_file(w->bytes())) << "shift " << shift;
    if (offset % 4 == 0) {
      EXPECT_TRUE(w->materialized());
      continue;
    }
    EXPECT_FALSE(w->materialized()) << "shift " << shift << ": read at load";
    std::vector<float> want(static_cast<size_t>(64 * n));
    std::memcpy(want.data(), m.graph().initializer(0).raw_data().data(), want.size() * 4);
    EXPECT_EQ(std::memcmp(w->bytes(), want.data(), want.size() * 4), 0) << "shift " << shift;
    const float* v = w->ptr<float>();  // read now
    EXPECT_TRUE(w->materialized());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v) % 64, 0u);
    EXPECT_FALSE(in_file(v)) << "shift " << shift;
    EXPECT_EQ(static_cast<const void*>(w->bytes()), static_cast<const void*>(v));
    for (int64_t i = 0; i < w->numel(); ++i) ASSERT_EQ(v[i], want[static_cast<size_t>(i)]) << "element " << i;
    EXPECT_EQ(print_graph(load_onnx_bytes(bytes.data(), bytes.size(), {}, "mem.onnx")), print_graph(g));
  }
}

TEST(OnnxWeights, CutShortNamesTheInitializer) {
  TempDir d;
  std::string bytes = matmul_model("", 100.5).SerializeAsString();
  // cut in the middle of W's 8192 bytes
  std::string p = write_model(d.path, "cut.onnx", bytes.substr(0, bytes.size() / 2));
  std::string e = load_error(p);
  EXPECT_NE(e.find("truncated or malformed"), std::string::npos) << e;
  EXPECT_NE(e.find("initializer 0 'W'"), std::string::npos) << e;
  EXPECT_NE(e.find("raw_data declares 8192 bytes"), std::string::npos) << e;
}

TEST(OnnxWeights, CutShortNamesTheNode) {
  TempDir d;
  onnx::ModelProto m = matmul_model("", 200.5);
  // nodes after the initializers: move the initializers first by serializing a graph
  // whose last field is a node, then cut into that node's bytes
  std::string bytes = m.SerializeAsString();
  size_t at = bytes.rfind("bias");  // node 1's name
  ASSERT_NE(at, std::string::npos);
  std::string p = write_model(d.path, "cutnode.onnx", bytes.substr(0, at + 6));
  std::string e = load_error(p);
  EXPECT_NE(e.find("the file ends inside node 1 'bias'"), std::string::npos) << e;
}

TEST(OnnxWeights, RawDataOfTheWrongSizeNamesTheInitializer) {
  TempDir d;
  onnx::ModelProto m = matmul_model("", 300.5);
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(8000);  // still left in the file
  std::string e = load_error(write_model(d.path, "short.onnx", m.SerializeAsString()));
  EXPECT_NE(e.find("initializer 'W': raw_data has 8000 bytes but the dims declare 2048 float elements"), std::string::npos)
      << e;
}

TEST(OnnxWeights, WeightsOverTheMemoryBudgetNameTheTensor) {
  TempDir d;
  std::string p = write_model(d.path, "m.onnx", matmul_model("", 400.5).SerializeAsString());
  setenv("LATHE_MEMORY_LIMIT", "6K", 1);
  std::string e = load_error(p);
  unsetenv("LATHE_MEMORY_LIMIT");
  EXPECT_NE(e.find("initializer 'W' (f32[64, 32], 8.0 KiB) brings the weights to 8.0 KiB, more than the 6.0 KiB"),
            std::string::npos)
      << e;
  EXPECT_EQ(load_error(p), "");
}

}  // namespace
}  // namespace lathe
