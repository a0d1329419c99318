// runtime_test.cpp — host runtime utilities: .npy round trips for every dtype and
// malformed files, allclose and default tolerances, counter-based random tensors.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/runtime/compare.h"
#include "core/runtime/npy.h"
#include "core/runtime/random.h"
#include "helpers.h"

namespace lathe::test {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("lathe_interp_tests_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// A v1 .npy file with the given header dict and data bytes.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  std::string h = dict + "\n";
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  if (major >= 2) out += std::string(2, '\0');
  return out + h + data;
}

void expect_npy_error(const std::string& bytes, const std::string& part) {
  std::string p = temp_path("bad.npy");
  write_bytes(p, bytes);
  try {
    read_npy(p);
    ADD_FAILURE() << "expected a UserError mentioning '" << part << "'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Npy, RoundTripEveryDType) {
  for (DType dt : kAllDTypes) {
    if (dt == DType::BF16) continue;
    for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 3}, {5}, {}, {0, 4}}) {
      HostTensor t = random_tensor(dt, shape, 11);
      std::string p = temp_path("rt.npy");
      write_npy(p, t);
      HostTensor r = read_npy(p);
      EXPECT_EQ(r.dtype(), dt);
      EXPECT_EQ(r.shape(), shape);
      EXPECT_TRUE(r.same_content(t)) << dtype_name(dt);
    }
  }
}

TEST(Npy, HeaderIsNumPyCompatible) {
  std::string p = temp_path("hdr.npy");
  write_npy(p, tensor(DType::F32, {3}, {1, 2, 3}));
  std::ifstream f(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + len) % 64, 0u);
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"), std::string::npos);
  EXPECT_EQ(bytes.size(), 10 + len + 12);
}

TEST(Npy, ReadsVersion2AndVersion3Headers) {
  std::string data(8, '\0');
  data[0] = 1;
  data[4] = 2;
  for (int major : {2, 3}) {
    std::string p = temp_path("v2.npy");
    write_bytes(p, npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", data, major));
    EXPECT_EQ(ivalues(read_npy(p)), (std::vector<int64_t>{1, 2}));
  }
}

TEST(Npy, BF16IsRefusedClearly) {
  try {
    write_npy(temp_path("bf.npy"), HostTensor(DType::BF16, {2}));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
  }
}

TEST(Npy, MalformedFilesGiveUserErrors) {
  std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  expect_npy_error("", "magic");
  expect_npy_error("not a numpy file at all", "magic");
  expect_npy_error(std::string("\x93NUMPY\x09\x00\x10\x00", 10) + "{}", "version");
  expect_npy_error(npy_bytes(ok, std::string(4, '\0')), "truncated data");
  expect_npy_error(npy_bytes(ok, "").substr(0, 30), "truncated header");
  expect_npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", std::string(8, '\0')), "Fortran");
  expect_npy_error(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')), "big-endian");
  expect_npy_error(npy_bytes("{'descr': '<m8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')), "'<m8'");
  expect_npy_error(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')), "'<c8'");
  expect_npy_error(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", ""), "structured");
  expect_npy_error(npy_bytes("{'descr': '<f4', 'shape': (2,), }", std::string(8, '\0')), "fortran_order");
  expect_npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", ""), "expected");
  expect_npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", ""), "True or False");
  expect_npy_error(npy_bytes("{'descr': '<f4, 'fortran_order': False}", ""), "descr");
  expect_npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", ""), "expected");
  expect_npy_error(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000000, 1000000), }", ""),
                   "truncated data");
  EXPECT_THROW(read_npy(temp_path("does_not_exist.npy")), UserError);
  EXPECT_THROW(write_npy("/nonexistent_dir_lathe/x.npy", HostTensor(DType::F32, {1})), UserError);
}

TEST(Npy, BoolBytesAreNormalized) {
  std::string p = temp_path("b.npy");
  write_bytes(p, npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x00\x01\x07", 3)));
  auto t = read_npy(p);
  EXPECT_EQ(t.dtype(), DType::Bool);
  EXPECT_EQ(t.ptr<uint8_t>()[2], 1);
}

TEST(Compare, AllcloseRules) {
  auto a = tensor(DType::F32, {4}, {1, kNaN, kInf, -kInf});
  EXPECT_TRUE(allclose(a, a.clone(), 0, 0));
  EXPECT_FALSE(allclose(tensor(DType::F32, {1}, {kInf}), tensor(DType::F32, {1}, {-kInf}), 1, 1));
  EXPECT_FALSE(allclose(tensor(DType::F32, {1}, {kNaN}), tensor(DType::F32, {1}, {1}), 1, 1));
  EXPECT_TRUE(allclose(tensor(DType::F64, {2}, {1.0001, 100.01}), tensor(DType::F64, {2}, {1, 100}), 1e-4, 1e-4));
  std::string why;
  EXPECT_FALSE(allclose(tensor(DType::F64, {2, 2}, {0, 0, 0, 1.1}), tensor(DType::F64, {2, 2}, {0, 0, 0, 1}), 1e-3, 0, &why));
  EXPECT_NE(why.find("[1, 1]"), std::string::npos) << why;
  EXPECT_NE(why.find("1 of 4"), std::string::npos) << why;
  EXPECT_FALSE(allclose(HostTensor(DType::F32, {2}), HostTensor(DType::F32, {3}), 1, 1, &why));
  EXPECT_NE(why.find("shape"), std::string::npos);
  int64_t big = (int64_t(1) << 60) + 1;
  EXPECT_FALSE(allclose(itensor(DType::I64, {1}, {big}), itensor(DType::I64, {1}, {big - 1}), 0, 0));
  EXPECT_TRUE(allclose(itensor(DType::I64, {1}, {big}), itensor(DType::I64, {1}, {big}), 0, 0));
}

TEST(Compare, DefaultTolerances) {
  EXPECT_EQ(default_tolerance(DType::F64).rtol, 1e-9);
  EXPECT_EQ(default_tolerance(DType::F64).atol, 1e-12);
  EXPECT_EQ(default_tolerance(DType::F32).rtol, 1e-4);
  EXPECT_EQ(default_tolerance(DType::F32).atol, 1e-5);
  EXPECT_EQ(default_tolerance(DType::BF16).rtol, 1e-2);
  EXPECT_EQ(default_tolerance(DType::I32).rtol, 0);
  EXPECT_EQ(default_tolerance(DType::Bool).atol, 0);
}

TEST(Random, DeterministicAndCounterBased) {
  auto a = random_tensor(DType::F32, {1000}, 42), b = random_tensor(DType::F32, {1000}, 42);
  EXPECT_TRUE(a.same_content(b));
  EXPECT_FALSE(a.same_content(random_tensor(DType::F32, {1000}, 43)));
  // Element i depends on (seed, i) only: a prefix of a bigger tensor is the same.
  auto c = random_tensor(DType::F32, {20, 100}, 42);
  EXPECT_EQ(std::memcmp(a.data(), c.data(), a.nbytes()), 0);
}

TEST(Random, DistributionsLookRight) {
  auto n = random_tensor(DType::F64, {20000}, 7);
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n.numel(); ++i) {
    double v = n.get_f64(i);
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += v * v;
  }
  double mean = sum / n.numel(), var = sq / n.numel() - mean * mean;
  EXPECT_NEAR(mean, 0, 0.05);
  EXPECT_NEAR(var, 1, 0.05);
  auto k = random_tensor(DType::I32, {1000}, 1);
  std::vector<int> hist(10);
  for (auto v : ivalues(k)) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 10);
    ++hist[v];
  }
  for (int h : hist) EXPECT_GT(h, 50);
  auto bits = random_tensor(DType::Bool, {1000}, 1);
  int64_t ones = 0;
  for (auto v : ivalues(bits)) ones += v;
  EXPECT_GT(ones, 400);
  EXPECT_LT(ones, 600);
  for (DType dt : kAllDTypes) EXPECT_EQ(random_tensor(dt, {0, 3}, 1).numel(), 0);
}

TEST(Random, InputsPerPositionAndSymbols) {
  NodeRef x = prim::input("x", DType::F32, {SymInt::var("B"), 4});
  NodeRef y = prim::input("y", DType::F32, {SymInt::var("B"), 4});
  Graph g = Graph::from_outputs({{"s", prim::binary(Op::Add, x, y)}});
  auto in = random_inputs(g, 5, {{"B", 3}});
  EXPECT_EQ(in.at("x").shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(in.at("x").same_content(in.at("y")));  // different positions, different data
  EXPECT_TRUE(in.at("x").same_content(random_inputs(g, 5, {{"B", 3}}).at("x")));
  try {
    random_inputs(g, 5);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe::test
