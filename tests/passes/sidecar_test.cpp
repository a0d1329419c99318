// sidecar_test.cpp — .lathe files keep large constants in NAME.lathe.bin: the round trip
// print → parse → print is byte-identical (text and sidecar), small constants stay inline,
// the sidecar's bytes are used in place, and a missing, truncated, resized or foreign
// sidecar is a UserError at the Const's line naming the node.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/ir/loader.h"
#include "core/ir/sidecar.h"
#include "core/ir/text.h"
#include "core/runtime/host_tensor.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

HostTensor filled(DType dt, std::vector<int64_t> shape, double seed) {
  HostTensor t(dt, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = std::sin(seed + 0.1 * static_cast<double>(i)) * 100;
    if (is_float(dt)) t.set_f64(i, v);
    else t.set_i64(i, static_cast<int64_t>(v));
  }
  return t;
}

// Big constants of several dtypes (odd sizes: the sidecar pads each to 64 bytes), a small one.
Graph sample_graph(double seed) {
  NodeRef x = prim::input("x", DType::F32, {SymInt(33), SymInt(7)});
  NodeRef w = prim::constant_tensor(filled(DType::F32, {33, 7}, seed));
  NodeRef b = prim::constant_tensor(filled(DType::F32, {33, 7}, seed + 1).reshaped({33, 7}));
  NodeRef small = prim::constant_tensor(filled(DType::F32, {7}, seed + 2));
  NodeRef idx = prim::constant_tensor(filled(DType::I64, {101}, seed + 3));
  NodeRef half = prim::constant_tensor(filled(DType::F16, {3, 67}, seed + 4));
  NodeRef y = prim::binary(Op::Add, prim::binary(Op::Mul, x, w), b);
  return Graph::from_outputs({{"y", y}, {"small", small}, {"idx", idx}, {"half", half}});
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void spit(const std::string& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/lathe-sidecar-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
};

// The message of the UserError load_graph throws ("" when it loads).
std::string load_error(const std::string& path) {
  try {
    load_graph(path);
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

TEST(Sidecar, SaveLoadKeepsValuesAndTextStaysSmall) {
  TempDir d;
  std::string p = d.path + "/m.lathe";
  Graph g = sample_graph(1);
  save_graph(g, p);
  ASSERT_TRUE(fs::exists(p + ".bin"));
  std::string text = slurp(p);
  EXPECT_NE(text.find("bin=[64, 924]"), std::string::npos) << text;  // f32[33, 7] first, right after the header
  EXPECT_NE(text.find("data=["), std::string::npos) << "the 7-element constant stays inline:\n" << text;
  EXPECT_LT(text.size(), 2000u) << text;
  for (auto& e : fs::directory_iterator(d.path))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
  Graph back = load_graph(p);
  EXPECT_EQ(print_graph(back), print_graph(g));  // every value, inline, equal
}

TEST(Sidecar, RoundTripIsByteIdentical) {
  TempDir d;
  SidecarPlan plan1;
  std::string text1 = print_graph(sample_graph(2), &plan1);
  write_sidecar(d.path + "/a.bin", plan1);
  Graph g2 = parse_graph(text1, d.path + "/a.lathe", d.path + "/a.bin");
  SidecarPlan plan2;
  std::string text2 = print_graph(g2, &plan2);
  write_sidecar(d.path + "/b.bin", plan2);
  EXPECT_EQ(text1, text2);
  EXPECT_EQ(slurp(d.path + "/a.bin"), slurp(d.path + "/b.bin"));
  EXPECT_EQ(fs::file_size(d.path + "/a.bin"), plan1.size);
}

TEST(Sidecar, ConstantsAreUsedInPlace) {
  // Written by hand, so that no node in this process holds these values yet (nodes are
  // hash-consed: an equal constant made earlier would be returned instead).
  TempDir d;
  std::string p = d.path + "/m.lathe";
  SidecarPlan plan;
  auto w = std::make_shared<HostTensor>(filled(DType::F32, {5, 41}, 123.25));
  auto v = std::make_shared<HostTensor>(filled(DType::I32, {70}, 321.5));
  uint64_t ow = plan.add(w), ov = plan.add(v);
  write_sidecar(p + ".bin", plan);
  spit(p, "graph {\n  %0 = Const {bin=[" + std::to_string(ow) + ", 820] check=" + check_text(sidecar_check(w->data(), 820)) +
              "} : f32[5, 41]\n  %1 = Const {bin=[" + std::to_string(ov) + ", 280] check=" +
              check_text(sidecar_check(v->data(), 280)) + "} : i32[70]\n  out w = %0\n  out v = %1\n}\n");
  Graph g = load_graph(p);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  while (std::getline(maps, line))
    if (line.find(p + ".bin") != std::string::npos) {
      uintptr_t lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
      uintptr_t hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
      ranges.push_back({lo, hi});
    }
  ASSERT_FALSE(ranges.empty()) << "m.lathe.bin is not mapped";
  int mapped = 0;
  for (auto& [name, n] : g.outputs) {
    ASSERT_TRUE(n->attrs.data);
    EXPECT_TRUE(n->attrs.data->same_content(name == "w" ? *w : *v));
    auto a = reinterpret_cast<uintptr_t>(n->attrs.data->data());
    for (auto [lo, hi] : ranges) mapped += a >= lo && a < hi;
  }
  EXPECT_EQ(mapped, 2) << "the constants were copied instead of used in place";
}

TEST(Sidecar, MissingSidecarNamesTheNode) {
  TempDir d;
  std::string p = d.path + "/m.lathe";
  save_graph(sample_graph(4), p);
  fs::remove(p + ".bin");
  std::string e = load_error(p);
  EXPECT_NE(e.find(p + ":"), std::string::npos) << e;
  EXPECT_NE(e.find("(f32[33, 7])"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot open " + p + ".bin"), std::string::npos) << e;
}

TEST(Sidecar, TruncatedSidecarNamesTheTensorPastTheEnd) {
  TempDir d;
  std::string p = d.path + "/m.lathe";
  save_graph(sample_graph(5), p);
  fs::resize_file(p + ".bin", fs::file_size(p + ".bin") - 10);
  std::string e = load_error(p);
  EXPECT_NE(e.find("lie past the end"), std::string::npos) << e;
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find("(f16[3, 67])"), std::string::npos) << "the last tensor is the one cut: " << e;
  fs::resize_file(p + ".bin", 30);
  e = load_error(p);
  EXPECT_NE(e.find("not a Lathe sidecar"), std::string::npos) << e;
}

TEST(Sidecar, WrongSizesAndForeignSidecarsAreErrors) {
  TempDir d;
  std::string p = d.path + "/m.lathe", q = d.path + "/other.lathe";
  save_graph(sample_graph(6), p);
  save_graph(sample_graph(7), q);  // same layout, other values
  std::string text = slurp(p);
  // NBYTES that disagree with the type
  std::string bad = text;
  bad.replace(bad.find("bin=[64, 924]"), 13, "bin=[64, 920]");
  spit(p, bad);
  std::string e = load_error(p);
  EXPECT_NE(e.find("bin= says 920 bytes but the type holds 924"), std::string::npos) << e;
  spit(p, text);
  EXPECT_EQ(load_error(p), "");
  // another save's sidecar
  fs::copy_file(q + ".bin", p + ".bin", fs::copy_options::overwrite_existing);
  e = load_error(p);
  EXPECT_NE(e.find("belongs to another save"), std::string::npos) << e;
  // bytes appended
  save_graph(sample_graph(6), p);
  spit(p + ".bin", slurp(p + ".bin") + "junk");
  e = load_error(p);
  EXPECT_NE(e.find("header says"), std::string::npos) << e;
  // an offset that is not a tensor's place
  save_graph(sample_graph(6), p);
  bad = slurp(p);
  bad.replace(bad.find("bin=[64, 924]"), 13, "bin=[65, 924]");
  spit(p, bad);
  EXPECT_NE(load_error(p).find("offset 65"), std::string::npos);
}

TEST(Sidecar, TextWithoutAFileCannotReferToOne) {
  SidecarPlan plan;
  std::string text = print_graph(sample_graph(8), &plan);
  try {
    parse_graph(text, "mem.lathe");
    FAIL() << "parsed a bin= constant without a sidecar";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("not read from a file"), std::string::npos) << e.what();
  }
}

TEST(Sidecar, SavingWithoutLargeConstantsRemovesAStaleSidecar) {
  TempDir d;
  std::string p = d.path + "/m.lathe";
  save_graph(sample_graph(9), p);
  ASSERT_TRUE(fs::exists(p + ".bin"));
  NodeRef x = prim::input("x", DType::F32, {SymInt(4)});
  save_graph(Graph::from_outputs({{"y", prim::binary(Op::Add, x, x)}}), p);
  EXPECT_FALSE(fs::exists(p + ".bin"));
  EXPECT_EQ(load_error(p), "");
}

}  // namespace
}  // namespace lathe
