// program.cpp — build_program: the code-generation pipeline, stage by stage.
#include "core/schedule/program.h"

#include <chrono>
#include <cstdlib>
#include <set>

#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/ir/graph.h"
#include "core/ir/verify.h"
#include "core/loop/base_offsets.h"
#include "core/loop/lower.h"
#include "core/schedule/operand_place.h"
#include "core/schedule/flat_view.h"
#include "core/loop/prepack.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

namespace {

class StageTimer {
 public:
  StageTimer(Program& p, const BuildOptions& o, std::string name) : p_(p), o_(o), name_(std::move(name)) {}
  void done(std::string detail) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
    p_.passes.push_back({name_, ms, std::move(detail)});
    if (o_.on_stage) o_.on_stage(name_, p_);
  }

 private:
  Program& p_;
  const BuildOptions& o_;
  std::string name_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

loop::LoopFunc lower_one(const KernelGraph& kg, int i, bool plain) {
  const Kernel& k = kg.kernels[i];
  if (k.kind == "extern") {
    loop::LoopFunc f;
    f.name = k.name;
    f.kernel = k.id;
    f.kind = "extern";
    f.dims = kg.symbols;
    f.buffers.push_back({k.output, "out", kg.buffers[k.output].dtype, true});
    for (NodeRef in : k.root->inputs) {
      // a flat-prefix view the scheduler left unmaterialized (flat_view.h): its source's buffer
      auto it = kg.buffer_of.find(in);
      if (it == kg.buffer_of.end() && reads_flat_prefix(in)) it = kg.buffer_of.find(in->inputs[0]);
      LATHE_CHECK(it != kg.buffer_of.end(), "extern kernel " + k.name + ": an operand has no buffer");
      int b = it->second;
      f.buffers.push_back({b, "in" + std::to_string(f.buffers.size() - 1), kg.buffers[b].dtype, false});
    }
    return f;
  }
  return loop::lower_kernel(kg, i, plain);
}

}  // namespace

Program build_program(const Graph& given, const BuildOptions& opts) {
  Program p;
  p.graph = share_attention_stats(given);  // a training graph's two attention forwards computed once
  const Graph& g = p.graph;
  {
    StageTimer t(p, opts, "verify");
    verify_or_throw(g, "compile");
    t.done(std::to_string(g.size()) + (g.size() == 1 ? " node" : " nodes"));
  }
  // schedule + prepack + lower, rescheduling when lowering finds a fused reduction that
  // would be recomputed in an inner loop
  std::set<NodeRef> force;
  const char* prepack_env = std::getenv("LATHE_PREPACK");
  const char* a_env = std::getenv("LATHE_PREPACK_A");  // =0: A packed per run (A/B runs)
  loop::PackMemo packed;  // a second attempt reuses the first one's packed weights
  for (int attempt = 0;; ++attempt) {
    StageTimer ts(p, opts, "schedule");
    p.kg = schedule_graph(g, force);
    ts.done(std::to_string(p.kg.kernels.size()) + (p.kg.kernels.size() == 1 ? " kernel" : " kernels") + " from " +
            std::to_string(g.size()) + (g.size() == 1 ? " node" : " nodes"));
    // LATHE_RELEASE_GATHERED=1: embedding tables, which runs read a few rows of, give their
    // pages back before the packed copies below are made (GPT-2 peak RSS 948 -> 797 MB). Off by
    // default since its MADV_PAGEOUT evicted a memory-mapped model's pages from the page cache
    // (GPT-2's warm start: +0.1-0.2 s of load); release_pages (page_release.h) now keeps them
    // cached, but the default has not been measured again.
    if (const char* e = std::getenv("LATHE_RELEASE_GATHERED"); e && std::string(e) == "1")
      loop::release_gathered_constants(p.kg);
    if (opts.default_schedule && !(prepack_env && std::string(prepack_env) == "0")) {
      // constant GEMM operands (B; A where N is small) packed now, not on every run; before
      // lowering, so each kernel is lowered once, reading the packed copy
      StageTimer t(p, opts, "prepack");
      bool all = prepack_env && std::string(prepack_env) == "all";
      std::vector<int> changed = loop::prepack_constant_b(p.kg, loop::host_matmul_params(), all ? 0 : loop::prepack_min_bytes(), 0, &packed);
      if (!(a_env && std::string(a_env) == "0")) {
        // LATHE_PREPACK_A=small: only weights under kPrepackAMaxBytes, whatever N (A/B runs)
        const bool small = a_env && std::string(a_env) == "small";
        std::vector<int> packed_a = loop::prepack_constant_a(
            p.kg, loop::host_matmul_params(), loop::kPrepackAMaxN, loop::kPrepackAMaxBytes, loop::kPrepackAInt8MaxBytes,
            loop::kPrepackAFewN, small ? 0 : loop::kPrepackAFewNMaxBytes, &packed);
        changed.insert(changed.end(), packed_a.begin(), packed_a.end());
      }
      int64_t bytes = 0;
      for (const Kernel& k : p.kg.kernels)
        for (int buf : {k.packed_b, loop::packed_a_buffer(p.kg, k)})
          if (buf >= 0) bytes += static_cast<int64_t>(p.kg.buffers[buf].node->attrs.data->nbytes());
      t.done(std::to_string(changed.size()) + " constant matmul operand" + (changed.size() == 1 ? "" : "s") + ", " +
             std::to_string(bytes >> 20) + " MiB" +
             (packed.reused ? ", " + std::to_string(packed.reused) + " packed before (reused)" : "") +
             (packed.from_disk ? ", " + std::to_string(packed.from_disk) + " from the pack cache" : ""));
      packed.reused = 0;
      packed.from_disk = 0;
    }
    StageTimer tl(p, opts, "lower");
    p.funcs.clear();
    try {
      for (int i = 0; i < p.num_kernels(); ++i) p.funcs.push_back(lower_one(p.kg, i, !opts.default_schedule));
    } catch (const loop::NeedsMaterialize& m) {
      LATHE_CHECK(!force.count(m.node) && attempt < 1000, "rescheduling did not converge");
      force.insert(m.node);
      tl.done("materialize %" + std::to_string(m.node->id) + ": " + m.why);
      continue;
    }
    tl.done(std::to_string(p.funcs.size()) + " loop nests");
    break;
  }
  if (opts.default_schedule) {
    StageTimer t(p, opts, "default-schedule");
    for (auto& f : p.funcs) loop::apply_default_schedule(f, opts.schedule);
    t.done("parallel outer loops, vectorized inner loops");
    // concat operands that the concat kernel would copy unchanged live inside its output
    // (operand_place.h; off unless LATHE_CONCAT_IN_PLACE=1)
    StageTimer tp(p, opts, "place-operands");
    const int placed = place_concat_operands(p.kg, p.funcs);
    tp.done(std::to_string(placed) + " concat operand" + (placed == 1 ? "" : "s") + " placed in the output");
  }
  {
    // constant slice positions become launch offsets, so kernels equal up to them are
    // compiled once (an unrolled recurrence's steps)
    StageTimer t(p, opts, "base-offsets");
    int moved = 0;
    for (auto& f : p.funcs) moved += loop::hoist_base_offsets(f);
    t.done(std::to_string(moved) + " buffer offset" + (moved == 1 ? "" : "s") + " moved to the launch");
  }
  return p;
}

void reset_kernel(Program& p, int kernel) {
  LATHE_CHECK(kernel >= 0 && kernel < p.num_kernels(), "reset_kernel: no such kernel");
  p.funcs[kernel] = lower_one(p.kg, kernel, /*plain=*/true);
}

}  // namespace lathe
