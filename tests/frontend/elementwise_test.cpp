// elementwise_test.cpp — broadcasting, dtype promotion, operators, comparisons and the
// elementwise math composites against <cmath> closed forms.
#include <cmath>
#include <functional>

#include "core/frontend/tensor.h"
#include "core/ir/diag.h"
#include "tests/frontend/test_util.h"

namespace lathe {
namespace {

using namespace lathe::testing;

TEST(Broadcast, ShapesAndValues) {
  Tensor a = input("a", {2, 1, 3});
  Tensor b = input("b", {4, 1});
  Tensor c = a + b;
  EXPECT_EQ(c.shape(), (Shape{2, 4, 3}));
  HostTensor av = host_f32({2, 1, 3}, {1, 2, 3, 4, 5, 6}), bv = host_f32({4, 1}, {10, 20, 30, 40});
  HostTensor r = run1(c, {{"a", av}, {"b", bv}});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back((i * 3 + k + 1) + (j + 1) * 10);
  expect_close(r, want);
}

TEST(Broadcast, SymbolicDims) {
  Tensor a = input("a", {SymInt::var("B"), 3});
  Tensor b = input("b", {3});
  EXPECT_EQ((a * b).shape(), (Shape{SymInt::var("B"), 3}));
  Tensor c = input("c", {SymInt::var("T"), 3});
  EXPECT_THROW(a + c, UserError);
}

TEST(Broadcast, MismatchNamesOpAndShapes) {
  try {
    (void)(input("a", {4, 3}) - input("b", {5}));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("sub"), std::string::npos) << m;
    EXPECT_NE(m.find("[4, 3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[5]"), std::string::npos) << m;
  }
}

TEST(Promotion, TensorsAndScalars) {
  Tensor i32 = input("i", {2}, DType::I32);
  Tensor f16 = input("h", {2}, DType::F16);
  EXPECT_EQ((i32 + 2).dtype(), DType::I32);
  EXPECT_EQ((i32 + 2.5).dtype(), DType::F32);
  EXPECT_EQ((f16 * 2.0).dtype(), DType::F16);
  EXPECT_EQ((i32 + f16).dtype(), DType::F16);
  EXPECT_EQ((i32 / i32).dtype(), DType::F32);
  EXPECT_EQ(lt(i32, f16).dtype(), DType::Bool);
  HostTensor r = run1(i32 * 3 - 1, {{"i", host(DType::I32, {2}, {4, -7})}});
  EXPECT_EQ(values(r), (std::vector<double>{11, -22}));
}

TEST(Operators, ArithmeticAndScalarsOnTheLeft) {
  Tensor x = input("x", {4});
  HostTensor xv = host_f32({4}, {1, 2, -4, 0.5});
  auto r = run_all({x + 1.5, 1.5 - x, x / 2, 2 / x, -x, x * x}, {{"x", xv}});
  expect_close(r[0], {2.5, 3.5, -2.5, 2});
  expect_close(r[1], {0.5, -0.5, 5.5, 1});
  expect_close(r[2], {0.5, 1, -2, 0.25});
  expect_close(r[3], {2, 1, -0.5, 4});
  expect_close(r[4], {-1, -2, 4, -0.5});
  expect_close(r[5], {1, 4, 16, 0.25});
}

TEST(Compare, AllSixAndNaN) {
  Tensor a = input("a", {4}), b = input("b", {4});
  HostTensor av = host_f32({4}, {1, 2, 3, NAN}), bv = host_f32({4}, {2, 2, 1, 1});
  auto r = run_all({lt(a, b), le(a, b), gt(a, b), ge(a, b), eq(a, b), ne(a, b)}, {{"a", av}, {"b", bv}});
  EXPECT_EQ(values(r[0]), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{1, 0, 1, 1}));
}

TEST(Logic, AndOrXorNotWhere) {
  Tensor a = input("a", {4}, DType::Bool), b = input("b", {4}, DType::Bool);
  HostTensor av = host(DType::Bool, {4}, {0, 0, 1, 1}), bv = host(DType::Bool, {4}, {0, 1, 0, 1});
  Tensor x = arange(4, DType::F32);
  auto r = run_all({logical_and(a, b), logical_or(a, b), logical_xor(a, b), logical_not(a), where(a, x, -x)},
                   {{"a", av}, {"b", bv}});
  EXPECT_EQ(values(r[0]), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{-0.0, -1, 2, 3}));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::function<double(double)> ref;
  double lo, hi, tol;
};

TEST(Math, UnaryCompositesMatchCmath) {
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  const double kSqrt2 = std::sqrt(2.0);
  std::vector<UnaryCase> cases{
      {"exp", [](auto& x) { return exp(x); }, [](double v) { return std::exp(v); }, -10, 10, 2e-6},
      {"log", [](auto& x) { return log(x); }, [](double v) { return std::log(v); }, 0.01, 100, 1e-6},
      {"log1p", [](auto& x) { return log1p(x); }, [](double v) { return std::log1p(v); }, -0.9, 10, 1e-6},
      {"expm1", [](auto& x) { return expm1(x); }, [](double v) { return std::expm1(v); }, -3, 3, 1e-6},
      {"sin", [](auto& x) { return sin(x); }, [](double v) { return std::sin(v); }, -6, 6, 1e-6},
      {"cos", [](auto& x) { return cos(x); }, [](double v) { return std::cos(v); }, -6, 6, 1e-6},
      {"tan", [](auto& x) { return tan(x); }, [](double v) { return std::tan(v); }, -1.2, 1.2, 1e-5},
      {"tanh", [](auto& x) { return tanh(x); }, [](double v) { return std::tanh(v); }, -8, 8, 1e-6},
      {"sigmoid", [](auto& x) { return sigmoid(x); }, sig, -20, 20, 1e-6},
      {"relu", [](auto& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0; }, -3, 3, 0},
      {"leaky_relu", [](auto& x) { return leaky_relu(x, 0.1); }, [](double v) { return v > 0 ? v : 0.1 * v; }, -3, 3, 1e-7},
      {"elu", [](auto& x) { return elu(x); }, [](double v) { return v > 0 ? v : std::expm1(v); }, -3, 3, 1e-6},
      {"selu", [](auto& x) { return selu(x); },
       [](double v) { return 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * std::expm1(v)); }, -3, 3, 1e-6},
      {"erf", [](auto& x) { return erf(x); }, [](double v) { return std::erf(v); }, -4, 4, 4e-7},
      {"gelu", [](auto& x) { return gelu(x); }, [=](double v) { return 0.5 * v * (1 + std::erf(v / kSqrt2)); }, -5, 5, 1e-6},
      {"gelu_tanh", [](auto& x) { return gelu(x, "tanh"); },
       [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }, -5, 5, 1e-6},
      {"silu", [](auto& x) { return silu(x); }, [=](double v) { return v * sig(v); }, -8, 8, 1e-6},
      {"softplus", [](auto& x) { return softplus(x); }, [](double v) { return std::log1p(std::exp(v)); }, -30, 30, 1e-6},
      {"sqrt", [](auto& x) { return sqrt(x); }, [](double v) { return std::sqrt(v); }, 0, 50, 1e-6},
      {"rsqrt", [](auto& x) { return rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.1, 50, 1e-6},
      {"reciprocal", [](auto& x) { return reciprocal(x); }, [](double v) { return 1 / v; }, 0.1, 50, 1e-6},
      {"abs", [](auto& x) { return abs(x); }, [](double v) { return std::fabs(v); }, -5, 5, 0},
      {"sign", [](auto& x) { return sign(x); }, [](double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }, -5, 5, 0},
      {"square", [](auto& x) { return square(x); }, [](double v) { return v * v; }, -5, 5, 1e-6},
      {"pow3", [](auto& x) { return pow(x, 3); }, [](double v) { return v * v * v; }, -3, 3, 1e-6},
      {"pow-2", [](auto& x) { return pow(x, -2); }, [](double v) { return 1 / (v * v); }, 0.5, 3, 1e-6},
      {"pow1.5", [](auto& x) { return pow(x, 1.5); }, [](double v) { return std::pow(v, 1.5); }, 0.1, 9, 2e-6},
      {"hardsigmoid", [](auto& x) { return hardsigmoid(x); }, [](double v) { return std::clamp(v / 6 + 0.5, 0.0, 1.0); }, -5, 5, 1e-6},
      {"hardswish", [](auto& x) { return hardswish(x); }, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }, -5, 5, 1e-6},
      {"clamp", [](auto& x) { return clamp(x, Scalar(-1.0), Scalar(2.0)); }, [](double v) { return std::clamp(v, -1.0, 2.0); }, -5, 5, 0},
      {"floor", [](auto& x) { return floor(x); }, [](double v) { return std::floor(static_cast<float>(v)); }, -5, 5, 0},
      {"ceil", [](auto& x) { return ceil(x); }, [](double v) { return std::ceil(static_cast<float>(v)); }, -5, 5, 0},
      {"trunc", [](auto& x) { return trunc(x); }, [](double v) { return std::trunc(static_cast<float>(v)); }, -5, 5, 0},
  };
  const int n = 61;
  for (auto& c : cases) {
    std::vector<double> xs, want;
    for (int i = 0; i < n; ++i) {
      double v = static_cast<float>(c.lo + (c.hi - c.lo) * i / (n - 1));
      xs.push_back(v);
      want.push_back(c.ref(v));
    }
    Tensor x = input("x", {n});
    HostTensor r = run1(c.f(x), {{"x", host_f32({n}, xs)}});
    expect_close(r, want, c.tol, c.tol, c.name);
  }
}

TEST(Math, RoundHalfToEvenAndSpecialValues) {
  Tensor x = input("x", {9});
  HostTensor xv = host_f32({9}, {0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, 1e20, INFINITY, NAN});
  auto r = run_all({round(x), floor(x), ceil(x)}, {{"x", xv}});
  const double big = static_cast<float>(1e20);
  expect_close(r[0], {0, 2, 2, -0.0, -2, 0, big, INFINITY, NAN}, 0, 0, "round");
  expect_close(r[1], {0, 1, 2, -1, -2, 0, big, INFINITY, NAN}, 0, 0, "floor");
  expect_close(r[2], {1, 2, 3, -0.0, -1, 1, big, INFINITY, NAN}, 0, 0, "ceil");
}

TEST(Math, MinMaxRemainderFloorDivide) {
  Tensor a = input("a", {4}), b = input("b", {4});
  HostTensor av = host_f32({4}, {7, -7, 7, -7}), bv = host_f32({4}, {3, 3, -3, -3});
  auto r = run_all({minimum(a, b), maximum(a, b), fmod(a, b), remainder(a, b), floor_divide(a, b)}, {{"a", av}, {"b", bv}});
  expect_close(r[0], {3, -7, -3, -7});
  expect_close(r[1], {7, 3, 7, -3});
  expect_close(r[2], {1, -1, 1, -1});
  expect_close(r[3], {1, 2, -2, -1});
  expect_close(r[4], {2, -3, -3, 2});
  Tensor ia = input("ia", {4}, DType::I32), ib = input("ib", {4}, DType::I32);
  HostTensor iav = host(DType::I32, {4}, {7, -7, 7, -7}), ibv = host(DType::I32, {4}, {3, 3, -3, -3});
  auto ri = run_all({remainder(ia, ib), floor_divide(ia, ib), minimum(ia, ib), abs(ia)}, {{"ia", iav}, {"ib", ibv}});
  EXPECT_EQ(values(ri[0]), (std::vector<double>{1, 2, -2, -1}));
  EXPECT_EQ(values(ri[1]), (std::vector<double>{2, -3, -3, 2}));
  EXPECT_EQ(values(ri[2]), (std::vector<double>{3, -7, -3, -7}));
  EXPECT_EQ(values(ri[3]), (std::vector<double>{7, 7, 7, 7}));
  EXPECT_EQ(ri[1].dtype(), DType::I32);
}

TEST(Math, PowTensorExponent) {
  Tensor a = input("a", {5}), b = input("b", {5});
  HostTensor av = host_f32({5}, {2, -2, -2, 0, 9}), bv = host_f32({5}, {3, 3, 0.5, 0, 0.5});
  HostTensor r = run1(pow(a, b), {{"a", av}, {"b", bv}});
  expect_close(r, {8, -8, NAN, 1, 3}, 1e-6, 1e-6);
}

TEST(Sources, ArangeEyeFullCast) {
  auto r = run_all({arange(2.0, 11.0, 3.0), arange(0.0, 1.0, 0.25, DType::F32), eye(2, 3), full({2}, 7, DType::I8),
                    to(arange(3, DType::F32) * 0.6, DType::I32), to(arange(3, DType::F32) - 1.0, DType::Bool)});
  EXPECT_EQ(values(r[0]), (std::vector<double>{2, 5, 8}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(r[3].dtype(), DType::I8);
  EXPECT_EQ(values(r[4]), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(values(r[5]), (std::vector<double>{1, 0, 1}));
  HostTensor lit = host(DType::I32, {2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(values(run1(from_host(lit) * 2)), (std::vector<double>{2, 4, 6, 8}));
}

TEST(Provenance, CompositesRecordTheirPath) {
  ProvenanceScope user("block0");
  Tensor y = gelu(input("x", {3}));
  EXPECT_EQ(y.node()->prov.path.rfind("block0/gelu", 0), 0u) << y.node()->prov.path;
  bool saw_erf = false;
  for (NodeRef n : Graph::from_outputs({{"y", y.node()}}).toposort())
    saw_erf |= n->prov.path.find("block0/gelu/erf") == 0;
  EXPECT_TRUE(saw_erf);
}

}  // namespace
}  // namespace lathe
