// loader.h — load_graph(path) for every FILE kind the commands accept.
//
// The core handles .lathe; other layers register loaders for their extensions at start-up
// (scripting: .lua, import: .onnx), so commands just call load_graph().
#pragma once
#include <functional>
#include <string>

#include "core/ir/graph.h"

namespace lathe {

using GraphLoader = std::function<Graph(const std::string& path)>;
void register_graph_loader(const std::string& extension, GraphLoader fn);  // ".lua"
// Loads by extension; UserError for unknown extensions (listing the known ones), missing
// or unreadable files, and whatever the loader reports.
Graph load_graph(const std::string& path);
void save_graph(const Graph& g, const std::string& path);  // .lathe only; atomic write

}  // namespace lathe
