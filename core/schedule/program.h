// program.h — a compiled-to-loops program and the pipeline that builds it.
//
// build_program() is the whole CPU/GPU code-generation pipeline, listed in order in one
// function (like Halide's lower()): verify → schedule (fusion) → lower (loop IR) →
// default schedule → ready for a backend to render. Each stage is timed and recorded in
// Program::passes; BuildOptions::on_stage sees the program after every stage.
// The memory plan depends on dim values, so the executor makes it when it binds inputs.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/loop/loop_ir.h"
#include "core/loop/transform.h"
#include "core/schedule/kernel_graph.h"

namespace lathe {

struct PassRecord {
  std::string name;    // "schedule", "lower", "default-schedule"
  double ms = 0;
  std::string detail;  // "5 kernels from 23 nodes"
};

struct Program {
  Graph graph;
  KernelGraph kg;
  std::vector<loop::LoopFunc> funcs;  // one per kernel (extern kernels: kind "extern", empty body)
  std::vector<PassRecord> passes;

  int num_kernels() const { return static_cast<int>(kg.kernels.size()); }
  // kernel -> primitive nodes: kg.kernels[i].nodes; node -> kernels: kg.kernels_of.
};

struct BuildOptions {
  bool default_schedule = true;              // false: plain loops (matmuls too), for hand scheduling
  loop::ScheduleOptions schedule;
  std::function<void(const std::string& stage, const Program&)> on_stage;  // optional
};

Program build_program(const Graph& g, const BuildOptions& opts = {});

// Re-lowers kernel i from the kernel graph to its plain loops (dropping any schedule; a
// matmul becomes the plain reduction, not the packed GEMM nest).
void reset_kernel(Program& p, int kernel);

}  // namespace lathe
