// patterns_test.cpp — pattern parsing and its errors, matching (commutative, same-name,
// numbers behind broadcasts, attribute constraints), templates, and why().
#include <gtest/gtest.h>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/rewrite/match.h"
#include "core/rewrite/rule.h"
#include "core/rewrite/session.h"

namespace lathe {
namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_pattern(text);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

bool matches(const std::string& pat, NodeRef n) {
  Pattern p = parse_pattern(pat);
  Match m;
  return match_pattern(p, n, m);
}

TEST(Patterns, ParsesTheSpecForms) {
  for (const char* s : {"Add(x, 0)", "Mul(x, 2)", "Add(Const(a), Const(b))", "Recip(Recip(x))", "Reduce{op=\"add\"}(x)",
                        "Reduce{op=\"add\", axes=[1]}(x)", "_", "2.5", "-1", "Where(c, x, x)", "Input{name=\"x\"}"})
    EXPECT_NO_THROW(parse_pattern(s)) << s;
  Pattern p = parse_pattern("Add(Const(a), Mul(x, a))");
  EXPECT_EQ(p.names, (std::vector<std::string>{"a", "x"}));
  EXPECT_EQ(p.root_op(), Op::Add);
}

TEST(Patterns, ErrorsPointAtTheColumnWithASuggestion) {
  std::string e = parse_error("Add(Mull(x, 2), 0)");
  EXPECT_NE(e.find("unknown op 'Mull'"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean Mul?"), std::string::npos) << e;
  EXPECT_NE(e.find(":1:5:"), std::string::npos) << e;  // column of Mull
  EXPECT_NE(e.find("    ^"), std::string::npos) << e;
  EXPECT_NE(parse_error("add(x, 0)").find("did you mean Add?"), std::string::npos);
  EXPECT_NE(parse_error("Add(x)").find("Add takes 2 operand(s), got 1"), std::string::npos);
  EXPECT_NE(parse_error("Add(x, 0").find("expected ')'"), std::string::npos);
  EXPECT_NE(parse_error("Reduce{op=\"avg\"}(x)").find("unknown reduce op 'avg'"), std::string::npos);
  EXPECT_NE(parse_error("Reduce{foo=1}(x)").find("unknown attribute 'foo'"), std::string::npos);
  EXPECT_NE(parse_error("Add(x, 0) y").find("after the end"), std::string::npos);
  EXPECT_NE(parse_error("").find("empty pattern"), std::string::npos);
  EXPECT_NE(parse_error("Neg").find("needs its 1 operand"), std::string::npos);
}

TEST(Matching, CommutativeOpsMatchBothOrders) {
  NodeRef x = prim::input("x", DType::F32, {4});
  NodeRef zero = prim::constant(0, DType::F32, {4});
  EXPECT_TRUE(matches("Add(x, 0)", prim::binary(Op::Add, x, zero)));
  EXPECT_TRUE(matches("Add(x, 0)", prim::binary(Op::Add, zero, x)));
  NodeRef lt = prim::binary(Op::CmpLT, zero, x);
  EXPECT_TRUE(matches("CmpLT(0, x)", lt));
  EXPECT_FALSE(matches("CmpLT(x, 0)", lt));  // not commutative
}

TEST(Matching, SameNameMeansSameNode) {
  NodeRef x = prim::input("x", DType::F32, {4}), y = prim::input("y", DType::F32, {4});
  EXPECT_TRUE(matches("Max(x, x)", prim::binary(Op::Max, x, x)));
  EXPECT_FALSE(matches("Max(x, x)", prim::binary(Op::Max, x, y)));
  // backtracking: the inner commutative choice must agree with the outer binding
  NodeRef inner = prim::binary(Op::Mul, y, x);
  EXPECT_TRUE(matches("Add(Mul(x, y), x)", prim::binary(Op::Add, inner, x)));
}

TEST(Matching, NumbersMatchConstantsAlsoBehindABroadcast) {
  NodeRef x = prim::input("x", DType::F32, {4, 3});
  NodeRef two_full = prim::constant(2, DType::F32, {4, 3});
  NodeRef two_scalar = prim::constant(2, DType::F32, {});
  ViewSpec v = view_expand(*view_reshape(ViewSpec::contiguous({}), {1, 1}), {4, 3});
  NodeRef two_bcast = prim::view(two_scalar, v);
  EXPECT_TRUE(matches("Mul(x, 2)", prim::binary(Op::Mul, x, two_full)));
  EXPECT_TRUE(matches("Mul(x, 2)", prim::binary(Op::Mul, x, two_bcast)));
  EXPECT_FALSE(matches("Mul(x, 3)", prim::binary(Op::Mul, x, two_bcast)));
  NodeRef i7 = prim::constant_int(7, DType::I32, {2});
  Pattern p = parse_pattern("Add(Const(a), y)");
  Match m;
  ASSERT_TRUE(match_pattern(p, prim::binary(Op::Add, prim::input("k", DType::I32, {2}), i7), m));
  EXPECT_EQ(*m.value("a"), 7);
  EXPECT_EQ(m.node("a"), i7);
}

TEST(Matching, AttributeConstraints) {
  NodeRef x = prim::input("x", DType::F32, {4, 3});
  NodeRef sum1 = prim::reduce(ReduceOp::Add, x, {1});
  NodeRef max1 = prim::reduce(ReduceOp::Max, x, {1});
  EXPECT_TRUE(matches("Reduce{op=\"add\"}(x)", sum1));
  EXPECT_FALSE(matches("Reduce{op=\"add\"}(x)", max1));
  EXPECT_TRUE(matches("Reduce{op=\"add\", axes=[1]}(x)", sum1));
  EXPECT_FALSE(matches("Reduce{op=\"add\", axes=[0]}(x)", sum1));
  EXPECT_TRUE(matches("Reduce{dtype=\"f32\"}(_)", max1));
  EXPECT_FALSE(matches("Reduce{dtype=\"f16\"}(_)", max1));
}

TEST(Matching, WhyNamesTheDeepestFailure) {
  NodeRef x = prim::input("x", DType::F32, {4});
  NodeRef three = prim::constant(3, DType::F32, {4});
  NodeRef mul = prim::binary(Op::Mul, x, three);
  std::string why = explain_mismatch(parse_pattern("Mul(x, 2)"), mul);
  EXPECT_NE(why.find("at Mul(x, 2): operand 1 is %" + std::to_string(three->id) + " Const 3 f32[4], expected 2"),
            std::string::npos) << why;
  std::string why2 = explain_mismatch(parse_pattern("Neg(Neg(x))"), prim::unary(Op::Neg, x));
  EXPECT_NE(why2.find("at Neg(Neg(x)): operand 0 is %" + std::to_string(x->id) + " Input"), std::string::npos) << why2;
  EXPECT_NE(why2.find("expected Neg"), std::string::npos) << why2;
  EXPECT_EQ(explain_mismatch(parse_pattern("Mul(x, 3)"), mul), "");
}

TEST(Templates, BuildWellTypedNodesAndRejectUnboundNames) {
  NodeRef x = prim::input("x", DType::I32, {2, 2});
  Rule r = make_rule("double", "Mul(x, 2)", "Add(x, x)");
  Match m;
  NodeRef root = prim::binary(Op::Mul, x, prim::constant_int(2, DType::I32, {2, 2}));
  ASSERT_TRUE(match_pattern(r.pattern, root, m));
  EXPECT_EQ(r.build_replacement(m), prim::binary(Op::Add, x, x));
  Rule z = make_rule("zero", "Mul(x, 0)", "Add(x, 1)");  // numbers take their sibling's type
  ASSERT_TRUE(match_pattern(z.pattern, prim::binary(Op::Mul, x, prim::constant_int(0, DType::I32, {2, 2})), m));
  EXPECT_EQ(z.build_replacement(m), prim::binary(Op::Add, x, prim::constant_int(1, DType::I32, {2, 2})));
  try {
    make_rule("bad", "Add(x, 0)", "Mul(x, y)");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'y' is not bound by the pattern"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_rule("bad", "Add(x, 0)", "View(x)"), UserError);
  EXPECT_THROW(make_rule("bad", "Add(x, 0)", "_"), UserError);
}

TEST(Why, SessionExplainsEveryKindOfRefusal) {
  NodeRef x = prim::input("x", DType::F32, {4});
  NodeRef y = prim::binary(Op::Mul, x, prim::constant(3, DType::F32, {4}));
  Ruleset rs("t", {make_rule("double", "Mul(x, 2)", "Add(x, x)"),
                   make_rule("guarded", "Mul(x, 3)", "x", {[](const Match&) { return false; }}),
                   make_rule("declines", "Mul(x, 3)", [](const Match&) -> NodeRef { return nullptr; })});
  RewriteSession s(Graph::from_outputs({{"y", y}}), rs);
  EXPECT_NE(s.why("double", y).find("operand 1 is"), std::string::npos);
  EXPECT_NE(s.why("guarded", y).find("where condition is false"), std::string::npos);
  EXPECT_NE(s.why("declines", y).find("returned nil"), std::string::npos);
  s.set_enabled("double", false);
  EXPECT_NE(s.why("double", y).find("disabled"), std::string::npos);
  EXPECT_THROW(s.why("nope", y), UserError);
}

}  // namespace
}  // namespace lathe
