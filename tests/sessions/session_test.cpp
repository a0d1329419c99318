// session_test.cpp — stepping, time travel, diffs, breakpoints, stats, sweeps and passes.
#include <gtest/gtest.h>

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/rewrite/session.h"

namespace lathe {
namespace {

NodeRef cf(double v) { return prim::constant(v, DType::F32, {4}); }

Ruleset basic_rules() {
  return Ruleset("basic", {make_rule("add-zero", "Add(x, 0)", "x"), make_rule("double", "Mul(x, 2)", "Add(x, x)"),
                           make_rule("neg-neg", "Neg(Neg(x))", "x")});
}

// y = Neg(Neg(Mul(Add(x, 0), 2)))
Graph sample() {
  NodeRef x = prim::input("x", DType::F32, {4});
  NodeRef y = prim::unary(Op::Neg, prim::unary(Op::Neg, prim::binary(Op::Mul, prim::binary(Op::Add, x, cf(0)), cf(2))));
  return Graph::from_outputs({{"y", y}});
}

TEST(Session, StepsInTopologicalOrderAndRecordsProvenance) {
  RewriteSession s(sample(), basic_rules());
  auto st = s.step();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->index, 1);
  EXPECT_EQ(st->rule, "add-zero");  // the deepest node comes first in topological order
  EXPECT_FALSE(st->removed.empty());
  EXPECT_EQ(s.step()->rule, "double");
  NodeRef add = node_by_id(s.info(2).replacement);
  EXPECT_EQ(add->op, Op::Add);
  EXPECT_EQ(add->prov.step, 2);
  EXPECT_EQ(s.step()->rule, "neg-neg");
  EXPECT_FALSE(s.step());
  NodeRef x = s.graph().inputs[0];
  EXPECT_EQ(s.graph().output("y"), prim::binary(Op::Add, x, x));
  EXPECT_EQ(s.last(), 3);
  EXPECT_NE(s.info(1).summary().find("step 1: add-zero"), std::string::npos);
}

TEST(Session, TimeTravelGivesTheSameGraphsAsReplaying) {
  RewriteSession s(sample(), basic_rules());
  s.step(3);
  std::vector<NodeRef> outs;
  for (int k = 0; k <= 3; ++k) outs.push_back(s.graph_at(k).output("y"));
  s.back();
  EXPECT_EQ(s.current(), 2);
  EXPECT_EQ(s.graph().output("y"), outs[2]);
  s.seek(0);
  EXPECT_EQ(s.graph().output("y"), outs[0]);
  for (int k = 1; k <= 3; ++k) {
    RewriteSession fresh(sample(), basic_rules());
    fresh.step(k);
    EXPECT_EQ(fresh.graph().output("y"), outs[k]) << "step " << k;
  }
  // stepping from an earlier point drops the future, like undo
  s.seek(1);
  s.step();
  EXPECT_EQ(s.last(), 2);
  EXPECT_EQ(s.graph().output("y"), outs[2]);
  EXPECT_THROW(s.seek(7), UserError);
  s.seek(0);
  EXPECT_THROW(s.back(), UserError);
}

TEST(Session, DiffSeparatesRewritesFromRebuiltUsers) {
  RewriteSession s(sample(), basic_rules());
  s.step(2);
  GraphDiff d = s.diff(1, 2);  // double: Mul(x, 2) -> Add(x, x); the Neg chain is rebuilt
  ASSERT_EQ(d.removed.size(), 2u);  // the Mul and its constant 2
  EXPECT_EQ(d.removed.back()->op, Op::Mul);
  ASSERT_EQ(d.added.size(), 1u);
  EXPECT_EQ(d.added[0]->op, Op::Add);
  ASSERT_EQ(d.changed.size(), 2u);  // the two Negs
  EXPECT_EQ(d.changed[0].first->op, Op::Neg);
  EXPECT_EQ(d.changed[0].second->op, Op::Neg);
  EXPECT_FALSE(d.text().empty());
  GraphDiff whole = s.diff(0, 2);
  EXPECT_TRUE(s.diff(2, 2).added.empty());
  EXPECT_FALSE(whole.removed.empty());
}

TEST(Session, BreakpointStopsBeforeTheRuleFires) {
  RewriteSession s(sample(), basic_rules());
  s.breakpoint("double");
  RunResult r = s.run();
  EXPECT_EQ(r.stop, RunResult::Stop::Breakpoint);
  EXPECT_EQ(r.breakpoint_rule, "double");
  EXPECT_EQ(s.last(), 1);  // add-zero fired, double did not
  RunResult r2 = s.run();  // continuing steps over the breakpoint
  EXPECT_EQ(r2.stop, RunResult::Stop::Fixpoint);
  EXPECT_EQ(s.last(), 3);
  EXPECT_THROW(s.breakpoint("no-such-rule"), UserError);
}

TEST(Session, RunUsesSweepsAndReachesTheSameFixpoint) {
  RewriteSession batch(sample(), basic_rules());
  RunResult r = batch.run();
  EXPECT_EQ(r.steps, 1);
  EXPECT_EQ(r.rewrites, 3);
  EXPECT_EQ(batch.info(1).kind, StepKind::Sweep);
  EXPECT_EQ(batch.info(1).fired.at("double"), 1);
  SessionOptions single;
  single.batch = false;
  RewriteSession one(sample(), basic_rules(), single);
  one.run();
  EXPECT_EQ(one.last(), 3);
  EXPECT_EQ(one.graph().output("y"), batch.graph().output("y"));
  auto st = batch.stats();
  EXPECT_EQ(st.at("double").fired, 1u);
  EXPECT_GE(st.at("add-zero").tried, 1u);
  EXPECT_NE(batch.stats_text().find("neg-neg"), std::string::npos);
}

TEST(Session, DisabledRulesDoNotFire) {
  RewriteSession s(sample(), basic_rules());
  s.set_enabled("double", false);
  s.run();
  EXPECT_EQ(s.graph().output("y")->op, Op::Mul);
  Ruleset rs = basic_rules();
  rs.set_enabled("neg-neg", false);
  RewriteSession s2(sample(), rs);
  s2.run();
  EXPECT_EQ(s2.graph().output("y")->op, Op::Neg);
}

TEST(Session, CustomPassIsRecordedLikeAStep) {
  RewriteSession s(sample(), basic_rules());
  auto st = s.apply_pass("strip-negs", [](const Graph& g) {
    NodeRef y = g.output("y");
    return Graph::from_outputs({{"y", y->inputs[0]->inputs[0]}});
  });
  ASSERT_TRUE(st);
  EXPECT_EQ(st->kind, StepKind::Pass);
  EXPECT_EQ(s.graph().output("y")->op, Op::Mul);
  EXPECT_FALSE(s.apply_pass("nothing", [](const Graph& g) { return g; }));
  EXPECT_THROW(s.apply_pass("throws", [](const Graph&) -> Graph { throw std::runtime_error("boom"); }), UserError);
  EXPECT_EQ(s.last(), 1);
}

}  // namespace
}  // namespace lathe
