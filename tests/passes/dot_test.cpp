// dot_test.cpp — the drawing levels: which nodes collapse into which boxes (tensor level by
// provenance path, kernel level by a caller's grouping), the DOT text, and rendering it to
// SVG in process with libgvc (app/graphviz_render.cpp).
#include <gtest/gtest.h>

#include "app/graphviz_render.h"
#include "core/ir/diag.h"
#include "core/ir/dot.h"
#include "tests/passes/test_graphs.h"

using namespace lathe;

TEST(Dot, PrimitiveLevelHasOneBoxPerNode) {
  Graph g = test_graphs::mlp_graph();
  GroupedGraph gg = group_graph(g, {DotLevel::Primitive});
  EXPECT_EQ(gg.groups.size(), g.toposort().size());
  for (auto& grp : gg.groups) EXPECT_FALSE(grp.collapsed);
  EXPECT_EQ(gg.edges.size(), 9u);  // x, w -> views; mul(2); reduce; add(2); max(2)
}

TEST(Dot, TensorLevelCollapsesCompositeCalls) {
  Graph g = test_graphs::mlp_graph();
  GroupedGraph gg = group_graph(g, {DotLevel::Tensor});
  std::vector<std::string> names;
  for (auto& grp : gg.groups) names.push_back(grp.name + ":" + std::to_string(grp.nodes.size()));
  EXPECT_EQ(names, (std::vector<std::string>{"Input x:1", "Input w:1", "matmul:4", "mlp:2", "relu:2"}));
  EXPECT_EQ(gg.groups[2].path, "mlp/matmul");
  ASSERT_EQ(gg.outputs.size(), 1u);
  EXPECT_EQ(gg.outputs[0].second, 4);
  std::string dot = graph_to_dot(g, {DotLevel::Tensor});
  EXPECT_NE(dot.find("subgraph cluster_0"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"matmul\\n4 ops → f32[B, 1, 10]\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("g0 -> g2 [label=\"f32[B, 784]\"]"), std::string::npos) << dot;
}

TEST(Dot, KernelLevelNeedsAGrouping) {
  Graph g = test_graphs::mlp_graph();
  EXPECT_THROW(group_graph(g, {DotLevel::Kernel}), UserError);
  DotOptions opt;
  opt.level = DotLevel::Kernel;
  opt.group_of = [](NodeRef n) { return n->op == Op::Input ? -1 : n->op == Op::Max ? 1 : 0; };
  opt.group_names = {"fused_matmul_add"};
  GroupedGraph gg = group_graph(g, opt);
  ASSERT_EQ(gg.groups.size(), 4u);
  EXPECT_EQ(gg.groups[2].name, "fused_matmul_add");
  EXPECT_EQ(gg.groups[3].name, "kernel 1");
  EXPECT_EQ(gg.groups[3].nodes.size(), 1u);
}

TEST(Dot, EveryTestGraphRendersToSvg) {
  for (auto& [name, g] : test_graphs::all_test_graphs())
    for (DotLevel level : {DotLevel::Primitive, DotLevel::Tensor}) {
      std::string svg = app::render_dot(graph_to_dot(g, {level}), "svg");
      EXPECT_NE(svg.find("<svg"), std::string::npos) << name;
    }
}

TEST(Dot, RenderErrorsAreUserErrors) {
  try {
    app::render_dot("digraph { a -> ", "svg");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("syntax error"), std::string::npos) << e.what();
  }
  EXPECT_THROW(app::render_dot("digraph { a -> b }", "no-such-format"), UserError);
}
