// demo_graph.h — a small MLP built with the prim:: builders, for `lathe gui --demo` and
// for screenshots and frame-time checks that must not depend on any file format.
//
// make_demo_mlp(layers) builds  x[32,784] -> (linear -> relu) x layers -> linear -> softmax
// with composite provenance ("layer0/linear/matmul", "softmax", …), so the tensor level
// has groups to collapse. About 11 primitive nodes per layer; layers = 200 gives ~2,000.
#pragma once
#include "core/ir/graph.h"

namespace lathe::views {

Graph make_demo_mlp(int layers = 2);

}  // namespace lathe::views
