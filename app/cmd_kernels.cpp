// cmd_kernels.cpp — `lathe kernels FILE [--backend B] [--show loop|source|asm|none]`:
// the fused kernels of a graph (which primitive nodes each contains, what it reads and
// writes) and their code: loop IR, the backend's source, or assembly.
#include <CLI/CLI.hpp>

#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "app/load_model.h"
#include "backends/backend.h"
#include "core/frontend/samples.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/loop/transform.h"
#include "core/tune/records.h"

namespace lathe::app {
namespace {

std::string buffer_text(const KernelGraph& kg, int b) {
  const BufferDesc& d = kg.buffers[b];
  return d.name + ":" + std::string(dtype_name(d.dtype)) + shape_to_string(d.shape);
}

int run_kernels(const std::vector<std::string>& args) {
  CLI::App cli{"Prints the fused kernels of a graph and their code.\n\n"
               "--show loop    the loop IR after the default schedule (the default)\n"
               "--show source  the backend's source (C for c, LLVM IR for llvm, CUDA C for cuda)\n"
               "--show optimized  the backend's source after its optimizer (llvm: the IR after O3)\n"
               "--show asm     assembly (c: cc -S with the same flags; llvm: the JIT's; cuda: PTX, no driver needed)\n"
               "--show none    only the kernel list\n"
               "--no-schedule  plain loops, before the default heuristics (a matmul as its plain\n"
               "               reduction, not the packed GEMM nest; what p:kernel(i):reset(true) gives)",
               "lathe kernels"};
  std::string file, backend = default_backend(), show = "loop";
  bool no_schedule = false;
  std::string sample;
  auto* file_opt = cli.add_option("FILE", file, "graph (.lathe, .lua or .onnx)");
  auto* sample_opt = cli.add_option("--sample", sample, "a built-in sample or bench workload instead of FILE (e.g. softmax)");
  file_opt->excludes(sample_opt);
  cli.add_option("--backend", backend, "interp | c | llvm | cuda (default: " + default_backend() + ")");
  cli.add_option("--show", show, "loop | source | optimized | asm | none")
      ->check(CLI::IsMember({"loop", "source", "optimized", "asm", "none"}));
  cli.add_flag("--no-schedule", no_schedule, "show the loops before the default schedule");
  std::string tuned;
  cli.add_option("--tuned", tuned, "tuning records to apply (`lathe tune`; default: the records file in the cache dir, 'none': no records)");
  std::string qdq_sat16 = "auto";
  add_qdq_sat16_option(cli, qdq_sat16);
  if (int rc = parse_cli(cli, args); rc >= 0) return rc;
  apply_qdq_sat16_option(qdq_sat16);
  if (file.empty() && sample.empty()) {
    std::cerr << "lathe kernels: give FILE or --sample NAME\n";
    return 2;
  }
  Backend& b = get_backend(backend);
  int fused = 0;  // the graph `lathe run` runs: an .onnx model's attention fused (load_model.h)
  Graph g = sample.empty() ? load_model(file, backend, &fused) : build_sample(sample);
  BuildOptions bo;
  bo.default_schedule = !no_schedule;
  Program p = build_program(g, bo);
  if (!no_schedule)
    for (auto& n : tune::apply_records(p, tune::load_tuned(tuned), tune::target_of(backend),
                                          sample.empty() ? tune::graph_name(file) : "sample " + sample).notes) std::cerr << "note: " << n << "\n";
  std::shared_ptr<CompiledProgram> compiled;
  if (show == "asm") {
    if (auto why = b.can_compile(); !why.empty()) throw UserError("--show asm needs backend '" + backend + "': " + why);
    if (auto why = b.supports_graph(g); !why.empty()) throw UserError("backend '" + backend + "' cannot run " + why);
    compiled = b.compile(p);
  }
  auto count = [](size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); };
  std::cout << "# " << count(p.num_kernels(), "kernel") << " from " << count(g.size(), "node") << " (backend " << backend
            << (fused ? "; " + fused_note(fused) : std::string()) << ")\n";
  for (int i = 0; i < p.num_kernels(); ++i) {
    const Kernel& k = p.kg.kernels[i];
    std::cout << "\n## " << k.name << "  (" << k.kind << ", " << count(k.nodes.size(), "node") << ":";
    size_t shown = 0;
    for (NodeRef n : k.nodes) {
      if (++shown > 12) { std::cout << " …"; break; }
      std::cout << " %" << n->id << ":" << op_name(n->op);
    }
    std::cout << ")\n   writes " << buffer_text(p.kg, k.output) << "; reads";
    if (k.inputs.empty()) std::cout << " nothing";
    for (int in : k.inputs) std::cout << " " << buffer_text(p.kg, in);
    std::cout << "\n";
    if (show == "loop") std::cout << loop::print_loop(p.funcs[i]);
    else if (show == "source") std::cout << b.render(p, i);
    else if (show == "optimized") {
      std::string o = b.render_optimized(p, i);
      std::cout << (o.empty() ? "(backend '" + backend + "' has no optimizer stage: --show source is what it compiles)\n" : o);
    }
    else if (show == "asm") {
      std::string a = compiled->assembly(i);
      std::cout << (a.empty() ? "(backend '" + backend + "' cannot show assembly)\n" : a);
    }
  }
  return 0;
}

LATHE_COMMAND("kernels", "print the fused kernels of a graph and their loop IR, source or assembly", run_kernels);

}  // namespace
}  // namespace lathe::app
