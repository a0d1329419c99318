// samples.h — builders for the sample gallery (samples/NN-name.lathe) and for the
// `lathe bench` workloads, so that the gallery, the benchmarks and the tests share one
// definition of each graph. Weights are graph Inputs (fill them with `lathe run --seed`).
#pragma once
#include <string>
#include <vector>

#include "core/ir/graph.h"

namespace lathe {

// Gallery, in order: "01-mlp", "02-convnet", "03-softmax", "04-layernorm", "05-attention",
// "06-gpt2-block", "07-mlp-train-step".
std::vector<std::string> sample_names();
// `lathe bench` workloads (SPEC.md): "eltwise", "softmax", "layernorm", "matmul",
// "conv2d", "mlp", "gpt2-block".
std::vector<std::string> bench_workload_names();
// Builds a gallery sample or a bench workload by name; UserError listing the known names
// otherwise.
Graph build_sample(const std::string& name);
// One-line description of a sample or workload (for README, `lathe help`, the app).
std::string sample_description(const std::string& name);

}  // namespace lathe
