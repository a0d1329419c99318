// session_errors_test.cpp — what stops a session: cycles, planted wrong rules (caught by
// per-step checks and by bisection), ill-typed replacements, throwing callbacks.
#include <gtest/gtest.h>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/rewrite/session.h"

namespace lathe {
namespace {

NodeRef cf(double v) { return prim::constant(v, DType::F32, {4}); }

Graph times_two_plus_zero() {  // y = Add(Mul(x, 2), 0)
  NodeRef x = prim::input("x", DType::F32, {4});
  return Graph::from_outputs({{"y", prim::binary(Op::Add, prim::binary(Op::Mul, x, cf(2)), cf(0))}});
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(SessionErrors, TwoRulesUndoingEachOtherAreACycle) {
  Ruleset rs("loop", {make_rule("double", "Mul(x, 2)", "Add(x, x)"), make_rule("undouble", "Add(x, x)", "Mul(x, 2)")});
  for (bool batch : {true, false}) {
    SessionOptions o;
    o.batch = batch;
    RewriteSession s(times_two_plus_zero(), rs, o);
    std::string e = error_of([&] { s.run(); });
    EXPECT_NE(e.find("cycle"), std::string::npos) << e;
    EXPECT_NE(e.find("'double'"), std::string::npos) << e;
    EXPECT_NE(e.find("'undouble'"), std::string::npos) << e;
  }
}

TEST(SessionErrors, GrowingRulesHitTheCap) {
  Ruleset rs("grow", {make_rule("grow", "Neg(x)", [](const Match& m) {
    return prim::unary(Op::Neg, prim::binary(Op::Add, m.node("x"), prim::constant(1, m.dtype(), m.shape())));
  })});
  SessionOptions o;
  o.batch = false;
  o.max_steps = 20;
  NodeRef x = prim::input("x", DType::F32, {4});
  RewriteSession s(Graph::from_outputs({{"y", prim::unary(Op::Neg, x)}}), rs, o);
  std::string e = error_of([&] { s.run(); });
  EXPECT_NE(e.find("no fixpoint after 20 rewrites"), std::string::npos) << e;
  EXPECT_NE(e.find("'grow'"), std::string::npos) << e;
}

// A rule whose replacement holds its own pattern: run() stops once the graph has grown
// past RunawayGuard's limit, long before max_steps (100000) rewrites, with one message.
TEST(SessionErrors, GrowingRulesAreStoppedEarly) {
  Ruleset rs("grow", {make_rule("grow", "Neg(x)", [](const Match& m) {
    return prim::unary(Op::Neg, prim::binary(Op::Add, m.node("x"), prim::constant(1, m.dtype(), m.shape())));
  })});
  SessionOptions o;
  o.batch = false;
  NodeRef x = prim::input("x", DType::F32, {4});
  RewriteSession s(Graph::from_outputs({{"y", prim::unary(Op::Neg, x)}}), rs, o);
  std::string e = error_of([&] { s.run(); });
  EXPECT_NE(e.find("runaway rewrite: the graph grew from 2 to"), std::string::npos) << e;
  EXPECT_NE(e.find("'grow'"), std::string::npos) << e;
  EXPECT_LE(s.last(), 2001);  // the limit: 2 + 2000 nodes, one node a step
}

Ruleset planted() {  // add-zero is right, wrong-double is wrong
  return Ruleset("planted", {make_rule("wrong-double", "Mul(x, 2)", "x"), make_rule("add-zero", "Add(x, 0)", "x")});
}

TEST(SessionErrors, CheckCatchesAPlantedWrongRuleAtItsStep) {
  SessionOptions o;
  o.check = true;
  RewriteSession s(times_two_plus_zero(), planted(), o);
  Graph before = s.graph();
  std::string e = error_of([&] { s.run(); });
  EXPECT_NE(e.find("step 1 (rule 'wrong-double'"), std::string::npos) << e;
  EXPECT_NE(e.find("check failed: output 'y' changed"), std::string::npos) << e;
  EXPECT_EQ(s.last(), 0);
  EXPECT_EQ(s.graph().output("y"), before.output("y"));
}

TEST(SessionErrors, BisectionFindsTheWrongStepWithoutPerStepChecks) {
  NodeRef x = prim::input("x", DType::F32, {4});
  // three good rewrites around one bad one
  NodeRef y = prim::binary(Op::Add, prim::binary(Op::Add, prim::binary(Op::Mul, prim::binary(Op::Add, x, cf(0)), cf(2)), cf(0)), cf(0));
  SessionOptions o;
  o.batch = false;
  RewriteSession s(Graph::from_outputs({{"y", y}}), planted(), o);
  s.run();
  ASSERT_EQ(s.last(), 4);
  CheckReport r = s.final_check();
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.rule, "wrong-double");
  EXPECT_EQ(r.bad_step, 2);
  EXPECT_NE(r.message.find("changed the result"), std::string::npos) << r.message;
  // with sweeps, bisection names the sweep and replays it to find the rule
  RewriteSession b(Graph::from_outputs({{"y", y}}), planted());
  b.run();
  CheckReport rb = b.final_check();
  EXPECT_FALSE(rb.ok);
  EXPECT_EQ(rb.bad_step, 1);
  EXPECT_EQ(rb.rule, "wrong-double") << rb.message;
  RewriteSession good(Graph::from_outputs({{"y", y}}), Ruleset("ok", {make_rule("add-zero", "Add(x, 0)", "x")}));
  good.run();
  EXPECT_TRUE(good.final_check().ok);
}

TEST(SessionErrors, WrongShapeOrDtypeStopsWithTheGraphUnchanged) {
  Ruleset shape("bad-shape", {make_rule("shrink", "Mul(x, 2)", [](const Match& m) {
    return prim::reduce(ReduceOp::Add, m.node("x"), {0});
  })});
  Ruleset dtype("bad-dtype", {make_rule("to-int", "Mul(x, 2)", [](const Match& m) { return prim::cast(m.node("x"), DType::I32); })});
  for (const Ruleset& rs : {shape, dtype})
    for (bool batch : {true, false}) {
      SessionOptions o;
      o.batch = batch;
      RewriteSession s(times_two_plus_zero(), rs, o);
      NodeRef before = s.graph().output("y");
      std::string e = error_of([&] { s.run(); });
      EXPECT_NE(e.find("rule '" + rs.rules()[0]->name + "' at step 1"), std::string::npos) << e;
      EXPECT_NE(e.find("expected f32[4]"), std::string::npos) << e;
      EXPECT_EQ(s.last(), 0);
      EXPECT_EQ(s.graph().output("y"), before);
      EXPECT_THROW(s.step(), UserError);
      EXPECT_EQ(s.last(), 0);
    }
}

TEST(SessionErrors, AThrowingCallbackStopsWithTheGraphUnchanged) {
  Ruleset rs("throws", {make_rule("boom", "Mul(x, 2)", [](const Match&) -> NodeRef { throw std::runtime_error("kaboom"); })});
  RewriteSession s(times_two_plus_zero(), rs);
  NodeRef before = s.graph().output("y");
  std::string e = error_of([&] { s.step(); });
  EXPECT_NE(e.find("rule 'boom' at step 1"), std::string::npos) << e;
  EXPECT_NE(e.find("kaboom"), std::string::npos) << e;
  EXPECT_EQ(s.graph().output("y"), before);
  Ruleset ws("where-throws", {make_rule("w", "Mul(x, 2)", "x", {[](const Match&) -> bool { throw UserError("bad where"); }})});
  RewriteSession s2(times_two_plus_zero(), ws);
  EXPECT_NE(error_of([&] { s2.run(); }).find("bad where"), std::string::npos);
}

}  // namespace
}  // namespace lathe
