// cmd_quantize.cpp — `lathe quantize FILE [-o OUT] [--mode dynamic|weight-int8|weight-int4]
// [--per-channel] [--block N]`: rewrites the MatMul/Gemm-like contractions with constant
// weights (core/rewrite/quantize.h), prints one line per rewritten contraction, the weight
// bytes before and after, and per output the error against the float graph on seeded
// inputs (max|d| / max|ref| and cosine similarity), then writes OUT (.lathe).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "app/cli.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "core/ir/diag.h"
#include "core/ir/loader.h"
#include "core/rewrite/quantize.h"

namespace lathe::app {
namespace {

int run_quantize(const std::vector<std::string>& args) {
  CLI::App app{"Quantize the MatMul/Gemm-like contractions with constant weights; everything else stays float.\n"
               "  dynamic      int8 weights (once) and int8 activations per row (at run time): the int8 GEMM;\n"
               "               without VNNI, even K: 7-bit weights, so it runs as vpmaddubsw u8 x i8 pairs\n"
               "  weight-int8  int8 weights, dequantized at run time, f32 contraction\n"
               "  weight-int4  4-bit values in blocks of --block weights along K, one f32 scale per block (q4_0);\n"
               "               up to 16 rows: packed two a byte, dequantized in the gemv_q4 kernel\n"
               "Prints the error against the float graph per output on seeded inputs:\n"
               "max|d|/max|ref| and the cosine similarity.",
               "lathe quantize"};
  std::string file, out, mode = "dynamic", backend = default_backend();
  bool per_channel = false, no_report = false;
  int64_t block = 32, seed = 0;
  app.add_option("FILE", file, "graph: .lua, .lathe or .onnx")->required();
  app.add_option("-o,--output", out, "write the quantized graph (.lathe)");
  app.add_option("--mode", mode, "dynamic | weight-int8 | weight-int4")->capture_default_str();
  app.add_flag("--per-channel", per_channel, "int8 modes: one weight scale per output channel (default: per tensor)");
  app.add_option("--block", block, "weight-int4: weights per block along K")->capture_default_str();
  app.add_option("--backend", backend, "backend that runs both graphs for the error report")->capture_default_str();
  app.add_option("--seed", seed, "seed of the random inputs of the error report")->capture_default_str();
  app.add_flag("--no-report", no_report, "skip the error report");
  if (int rc = parse_cli(app, args); rc >= 0) return rc;

  QuantizeOptions o;
  o.mode = parse_quant_mode(mode);
  o.per_channel = per_channel;
  o.block = block;
  if (block <= 0) throw UserError("quantize: --block must be positive, got " + std::to_string(block));
  Graph g = load_graph(file);
  QuantizeResult r = quantize_graph(g, o);
  for (auto& n : r.notes) std::printf("  %s\n", n.c_str());
  std::printf("%s: %d contraction%s quantized, %d left float; weights %.2f MB -> %.2f MB\n", quant_mode_name(o.mode),
              r.quantized, r.quantized == 1 ? "" : "s", r.skipped, r.weight_bytes_before / 1e6, r.weight_bytes_after / 1e6);
  std::fflush(stdout);
  if (!no_report && r.quantized > 0) {
    Evaluator eval;
    if (backend != "interp")
      eval = [backend](const Graph& gg, const TensorMap& in) { return compile_graph(gg, backend).run(in); };
    for (auto& e : quantization_error(g, r.graph, static_cast<uint64_t>(seed), eval))
      std::printf("output %s: max|d|/max|ref| %.4g  cosine %.6f\n", e.output.c_str(), e.rel_max, e.cosine);
  }
  if (!out.empty()) save_graph(r.graph, out);
  return 0;
}

LATHE_COMMAND("quantize", "int8/int4 quantization of constant-weight matmuls, with the error it introduces", run_quantize);

}  // namespace
}  // namespace lathe::app
