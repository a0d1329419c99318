// text.h — the .lathe text IR: readable, line-oriented, one node per line.
//
// print_graph → parse_graph → print_graph is the identity for every graph. The grammar is
// documented at the top of text_parse.cpp and in the README. Parse errors throw UserError
// with file:line:col, the source line with a caret, and what was expected.
#pragma once
#include <string>
#include <string_view>

#include "core/ir/graph.h"

namespace lathe {

struct SidecarPlan;

std::string print_graph(const Graph& g);
// The same with every Const tensor of more than kInlineElements elements (sidecar.h) as
// `{bin=[OFFSET, NBYTES] check=HEX}`, its bytes added to *sidecar for the caller to write.
std::string print_graph(const Graph& g, SidecarPlan* sidecar);
// One node as it appears in print_graph (with %N numbering from `ids`, or node ids).
std::string print_node(NodeRef n);
Graph parse_graph(std::string_view text, const std::string& filename = "<text>");
// The same for a file whose large constants are in a sidecar at sidecar_path (mapped, not
// copied). A missing, truncated or foreign sidecar is a UserError at the Const's line.
Graph parse_graph(std::string_view text, const std::string& filename, const std::string& sidecar_path);

}  // namespace lathe
