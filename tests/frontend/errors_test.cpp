// errors_test.cpp — bad arguments to frontend composites raise UserError whose message
// names the op, the operand shapes and what was expected (never a crash).
#include <functional>

#include "core/frontend/nn.h"
#include "core/ir/diag.h"
#include "tests/frontend/test_util.h"

namespace lathe {
namespace {

void expect_message(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError mentioning " << parts[0];
  } catch (const UserError& e) {
    std::string m = e.what();
    for (auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << "message: " << m << "\nmissing: " << p;
  }
}

TEST(FrontendErrors, MessagesNameOpShapesAndExpectation) {
  Tensor a = input("a", {2, 3}), b = input("b", {4, 5});
  expect_message([&] { matmul(a, b); }, {"matmul", "f32[2, 3]", "f32[4, 5]", "expected"});
  expect_message([&] { conv2d(input("x", {1, 3, 8, 8}), input("w", {4, 2, 3, 3})); },
                 {"conv2d", "[1, 3, 8, 8]", "[4, 2, 3, 3]", "groups"});
  expect_message([&] { reshape(a, {4, 2}); }, {"reshape", "[2, 3]", "[4, 2]"});
  expect_message([&] { where(gt(a, 0), a, b); }, {"where", "cannot broadcast"});
  expect_message([&] { layer_norm(a, 3, std::nullopt, std::nullopt); }, {"layer_norm", "rank"});
  expect_message([&] { softmax(a, 2); }, {"softmax", "axis 2", "rank 2"});
  expect_message([&] { cross_entropy(a, input("t", {3}, DType::I64)); }, {"nll_loss", "target"});
  expect_message([&] { gelu(a, "fast"); }, {"gelu", "\"none\" or \"tanh\""});
  expect_message([&] { rand({3}, 1, DType::I32); }, {"rand", "float"});
  expect_message([&] { -to(a, DType::Bool); }, {"neg", "bool"});
  Pool2dOptions big;
  big.kernel = {5, 5};
  expect_message([&] { max_pool2d(input("p", {1, 1, 3, 3}), big); }, {"max_pool2d", "larger than"});
  expect_message([&] { scaled_dot_product_attention(a, b, b); }, {"attention", "query"});
  expect_message([&] { Tensor u; (void)(u + a); }, {"add", "undefined"});
}

}  // namespace
}  // namespace lathe
