// cmd_dot.cpp — `lathe dot FILE [--level tensor|primitive|kernel] [-o OUT.{dot,svg,png}]`:
// draws a graph with Graphviz. .dot writes the DOT text; .svg/.png (and .pdf) render in
// process with libgvc; without -o the DOT text goes to stdout.
#include <CLI/CLI.hpp>

#include <memory>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "core/schedule/kernel_view.h"
#include "core/schedule/program.h"
#include "app/graphviz_render.h"
#include "core/ir/diag.h"
#include "core/ir/dot.h"
#include "core/ir/loader.h"

namespace lathe::app {
namespace {

int run_dot(const std::vector<std::string>& args) {
  CLI::App cli{"Draws a graph with Graphviz.\n\n"
               "Levels: tensor (composites such as softmax as single boxes, the default), primitive\n"
               "(every principal op), kernel (the fused kernels of `lathe kernels`, an edge per buffer a\n"
               "kernel reads, as the app draws them). The output kind follows\n"
               "OUT's extension: .dot (DOT text), .svg, .png or .pdf (rendered with Graphviz).",
               "lathe dot"};
  std::string file, out, level_name = "tensor";
  cli.add_option("FILE", file, "graph to draw (.lathe, .lua or .onnx)")->required();
  cli.add_option("--level", level_name, "tensor | primitive | kernel")
      ->check(CLI::IsMember({"tensor", "primitive", "kernel"}));
  cli.add_option("-o,--output", out, "OUT.dot, OUT.svg, OUT.png or OUT.pdf (default: DOT text on stdout)");
  if (int rc = parse_cli(cli, args); rc >= 0) return rc;

  std::string ext = std::filesystem::path(out).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (!out.empty() && ext != ".dot" && ext != ".svg" && ext != ".png" && ext != ".pdf") {
    std::cerr << "lathe dot: -o " << out << ": the output must end in .dot, .svg, .png or .pdf\n";
    return 2;
  }

  Graph g = load_graph(file);
  DotOptions opt;
  opt.level = *dot_level_from_name(level_name);
  opt.title = std::filesystem::path(file).filename().string() + " (" + level_name + " level)";
  std::string dot;
  if (opt.level == DotLevel::Kernel) {
    // the kernels `lathe kernels` lists (build_program's, rescheduling included), drawn as
    // the app draws them: a box per kernel and per source buffer, an edge per buffer read
    BuildOptions bo;
    bo.default_schedule = false;
    dot = kernel_level_to_dot(build_program(g, bo).kg, opt.title);
  } else {
    dot = graph_to_dot(g, opt);
  }

  if (out.empty()) {
    std::cout << dot;
  } else if (ext == ".dot") {
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    if (!(f << dot)) throw UserError("cannot write " + out + ": " + std::strerror(errno));
  } else {
    render_dot_to_file(dot, ext.substr(1), out);
  }
  return 0;
}

LATHE_COMMAND("dot", "draw a graph with Graphviz (.dot, .svg, .png)", run_dot);

}  // namespace
}  // namespace lathe::app
