// executor.cpp — Executable: bind inputs, plan memory, launch kernels, profile.
#include "core/schedule/executor.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "core/ir/diag.h"
#include "core/loop/cost.h"
#include "core/runtime/arena_alloc.h"
#include "core/runtime/machine.h"

namespace lathe {

namespace {

// A big output, allocated fresh on every run (the caller keeps the last one), in 2 MiB pages
// where the kernel allows it (transparent huge pages, madvise mode): GPT-2's 25 MB logits
// took 6272 page faults per run in 4 KiB pages, 13 in huge ones. Only outputs: at load, the
// same hint on hundreds of MB of weights made the kernel compact memory for seconds.
void prefer_huge_pages(const HostTensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (t.nbytes() < 2 * kHuge) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t lo = (reinterpret_cast<uintptr_t>(t.data()) + page - 1) / page * page;
  uintptr_t hi = (reinterpret_cast<uintptr_t>(t.data()) + t.nbytes()) / page * page;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);  // a hint
#else
  (void)t;
#endif
}

// A node's top provenance label: an imported ONNX node's "name:OpType" (its name may hold
// '/', the op type does not), else the first component of its composite path.
std::string top_source(const std::string& path) {
  size_t colon = path.find(':');
  size_t cut = colon != std::string::npos ? path.find('/', colon) : path.find('/');
  return path.substr(0, cut);
}

std::vector<std::string> kernel_sources(const Kernel& k) {
  std::vector<std::string> out;
  for (NodeRef n : k.nodes) {
    if (n->prov.path.empty()) continue;
    std::string s = top_source(n->prov.path);
    auto it = std::find(out.begin(), out.end(), s);
    if (it != out.end()) out.erase(it);
    out.push_back(s);  // ordered by last use: the root's source ends the list
  }
  return out;
}

// Per buffer of the program: whether a kernel's body loads or stores it (a kernel is handed
// every operand, but one that reads a prepacked copy of a weight never touches the weight).
std::vector<bool> buffers_read(const Program& p) {
  std::vector<bool> read(p.kg.buffers.size(), false);
  for (const loop::LoopFunc& f : p.funcs) {
    auto mark = [&](int param) {
      if (param >= 0 && param < static_cast<int>(f.buffers.size())) read.at(f.buffers[param].buffer) = true;
    };
    loop::walk(f.body, [&](const loop::Stmt& s) {
      if (s.kind == loop::StmtKind::Store) mark(s.buffer);
      return true;
    });
    std::unordered_set<const loop::Expr*> seen;  // (expressions share subtrees)
    std::vector<const loop::Expr*> stack;
    loop::walk_exprs(f.body, [&](const loop::ExprRef& top) {
      stack.push_back(top.get());
      while (!stack.empty()) {
        const loop::Expr* e = stack.back();
        stack.pop_back();
        if (!e || !seen.insert(e).second) continue;
        if (e->kind == loop::ExprKind::Load) mark(e->buffer);
        for (const loop::ExprRef& a : e->args) stack.push_back(a.get());
      }
    });
  }
  return read;
}

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


// Binds symbolic dims from the inputs' shapes and checks every input.
Bindings bind_dims(const Graph& g, const TensorMap& inputs) {
  DimBinder binder;
  for (NodeRef in : g.inputs) {
    const std::string& name = in->attrs.name;
    auto it = inputs.find(name);
    std::string want = std::string(dtype_name(in->dtype)) + shape_to_string(in->shape);
    if (it == inputs.end()) throw UserError("missing input '" + name + "' (expected " + want + ")");
    const HostTensor& t = it->second;
    if (t.dtype() != in->dtype)
      throw UserError("input '" + name + "' has dtype " + std::string(dtype_name(t.dtype())) + ", expected " + want);
    if (t.rank() != in->rank())
      throw UserError("input '" + name + "' has shape " + t.shape_string() + ", expected " + want);
    for (size_t d = 0; d < in->rank(); ++d)
      binder.bind(in->shape[d], t.shape()[d], "input '" + name + "' dim " + std::to_string(d), want);
  }
  return binder.finish();
}

}  // namespace

void DimBinder::bind(const SymInt& s, int64_t v, const std::string& where, const std::string& want) {
  if (s.is_const()) {
    if (s.value() != v) throw UserError(where + " is " + std::to_string(v) + ", expected " + want);
  } else if (s.expr()->kind == SymKind::Var) {
    auto [pos, fresh] = b_.emplace(s.expr()->name, v);
    if (!fresh && pos->second != v)
      throw UserError(where + ": " + s.expr()->name + " = " + std::to_string(v) + " conflicts with " +
                      std::to_string(pos->second) + " bound earlier");
  } else {
    later_.push_back({s, {v, where}});
  }
}

Bindings DimBinder::finish() const {
  for (auto& [s, vw] : later_) {
    auto v = s.eval(b_);
    if (!v) throw UserError(vw.second + ": cannot bind " + s.to_string() + " from the input shapes");
    if (*v != vw.first) throw UserError(vw.second + " is " + std::to_string(vw.first) + ", but " + s.to_string() + " = " + std::to_string(*v));
  }
  return b_;
}

Executable::Executable(Program program, std::shared_ptr<KernelLauncher> launcher, std::string backend)
    : program_(std::move(program)), launcher_(std::move(launcher)), backend_(std::move(backend)) {}

void Executable::bind(const TensorMap& inputs, bool fresh_outputs) {
  const KernelGraph& kg = program_.kg;
  Bindings dims = bind_dims(program_.graph, inputs);
  if (!bound_.valid || bound_.dims != dims) {
    bound_.dims = dims;
    bound_.dim_values.clear();
    for (auto& s : kg.symbols) {
      auto it = dims.find(s);
      bound_.dim_values.push_back(it == dims.end() ? 0 : it->second);
    }
    bound_.plan = plan_memory(kg, program_.funcs, dims);
    if (bound_.plan.arena_bytes > bound_.arena_capacity) {
      int64_t cap = (bound_.plan.arena_bytes + 63) / 64 * 64;
      bound_.arena = alloc_arena(cap);
      bound_.arena_capacity = cap;
    }
    bound_.outputs.assign(kg.buffers.size(), HostTensor());
    bound_.read = buffers_read(program_);
    bound_.valid = true;
    launcher_->bind_arena(bound_.arena.get(), bound_.arena_capacity);
  }
  bound_.ptrs.assign(kg.buffers.size(), nullptr);
  for (const BufferDesc& b : kg.buffers) {
    switch (b.kind) {
      case BufferKind::Input:
        bound_.ptrs[b.id] = const_cast<void*>(inputs.at(b.name).data());
        break;
      case BufferKind::Constant:
        if (b.node->op == Op::Input) bound_.ptrs[b.id] = const_cast<void*>(inputs.at(b.node->attrs.name).data());
        else if (const HostTensor& c = *b.node->attrs.data; c.materialized() || bound_.read[b.id])
          bound_.ptrs[b.id] = const_cast<void*>(c.data());
        else if (c.recomputable() && launcher_->runs_program_loops())  // its packed copies freed it (prepack.cpp): not computed again
          bound_.ptrs[b.id] = nullptr;  // (a kernel may take it as a parameter, but none reads it)
        else  // a weight only its packed copies are read from: left unread where it lies
          bound_.ptrs[b.id] = const_cast<std::byte*>(c.bytes());
        break;
      case BufferKind::Output: {
        HostTensor& t = bound_.outputs[b.id];
        if (fresh_outputs || !t.defined()) {
          t = HostTensor(b.dtype, shape_eval(b.shape, dims));
          prefer_huge_pages(t);
        }
        bound_.ptrs[b.id] = t.data();
        break;
      }
      case BufferKind::Intermediate:
        bound_.ptrs[b.id] = bound_.arena.get() + bound_.plan.offset[b.id];
        break;
    }
  }
}

void Executable::launch_all(std::vector<double>* kernel_ms, std::vector<TraceEvent>* events, double t_origin_us) {
  std::vector<void*> args;
  const int64_t* dims = bound_.dim_values.empty() ? nullptr : bound_.dim_values.data();
  for (int k = 0; k < program_.num_kernels(); ++k) {
    const loop::LoopFunc& f = program_.funcs[k];
    args.clear();
    for (auto& p : f.buffers) {
      auto* base = static_cast<std::byte*>(bound_.ptrs[p.buffer]);  // (null: a freed weight no kernel reads)
      args.push_back(base ? base + p.offset * static_cast<int64_t>(dtype_size(p.dtype)) : nullptr);
    }
    auto t0 = Clock::now();
    launcher_->launch(k, args.data(), dims);
    if (kernel_ms) {
      auto t1 = Clock::now();
      double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      (*kernel_ms)[k] = ms;
      if (events) {
        double start = std::chrono::duration<double, std::micro>(t0.time_since_epoch()).count() - t_origin_us;
        events->push_back({f.name, start, ms * 1000, 1});
      }
    }
  }
}

// Device backends queue their launches: the host clock measured only the enqueue, so take
// the device's own per-kernel times, and lay the trace events end to end from the first
// launch (the device runs them in order on one stream).
void Executable::use_device_times(std::vector<double>& kernel_ms, std::vector<TraceEvent>* events, double t_origin_us) {
  if (program_.num_kernels() == 0 || launcher_->device_ms(0) < 0) return;
  double start = events && !events->empty() ? events->front().start_us : 0;
  for (int k = 0; k < program_.num_kernels(); ++k) {
    kernel_ms[k] = launcher_->device_ms(k);
    if (events && k < static_cast<int>(events->size())) {
      (*events)[k].start_us = start;
      (*events)[k].dur_us = kernel_ms[k] * 1000;
      start += kernel_ms[k] * 1000;
    }
  }
}

TensorMap Executable::collect(const TensorMap& inputs, TensorMap* updated, bool clone) {
  TensorMap out;
  const KernelGraph& kg = program_.kg;
  for (auto& [name, b] : kg.outputs) {
    const BufferDesc& d = kg.buffers[b];
    HostTensor t;
    if (d.kind == BufferKind::Output) t = clone ? bound_.outputs[b].clone() : bound_.outputs[b];
    else if (d.node->op == Op::Input) t = inputs.at(d.node->attrs.name).clone();
    else t = d.node->attrs.data->clone();
    out[name] = t;
    if (updated && d.node->op == Op::Assign) (*updated)[d.node->inputs[0]->attrs.name] = t;
  }
  return out;
}

TensorMap Executable::run(const TensorMap& inputs, TensorMap* updated) {
  if (launcher_->runs_whole_graph()) {
    bind_dims(program_.graph, inputs);
    return launcher_->run_graph(program_.graph, inputs, updated);
  }
  bind(inputs, /*fresh_outputs=*/true);
  launcher_->begin_run(/*upload=*/true);
  launch_all(nullptr, nullptr, 0);
  launcher_->end_run(/*download=*/true);
  return collect(inputs, updated, false);
}

double Executable::time_ms(const TensorMap& inputs, int iters, int warmup) {
  finish_tiers();
  std::vector<double> t;
  if (launcher_->runs_whole_graph()) {
    for (int i = 0; i < warmup + iters; ++i) {
      auto t0 = Clock::now();
      launcher_->run_graph(program_.graph, inputs, nullptr);
      if (i >= warmup) t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    return median(t);
  }
  bind(inputs, false);
  for (int i = 0; i < warmup + iters; ++i) {
    auto t0 = Clock::now();
    launcher_->begin_run(/*upload=*/i == 0);
    launch_all(nullptr, nullptr, 0);
    launcher_->end_run(/*download=*/i == warmup + iters - 1);
    if (i >= warmup) t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(t);
}

ProfileReport Executable::profile(const TensorMap& inputs, int iters, int warmup) {
  finish_tiers();
  iters = std::max(1, iters);
  ProfileReport r;
  r.backend = backend_;
  MachineCeiling host = machine_ceiling();
  struct { double gflops, gbps; } mc{host.gflops, host.gbps};
  bool device = launcher_->device_ceiling(mc.gflops, mc.gbps);
  r.peak_gflops = mc.gflops;
  r.peak_gbps = mc.gbps;
  r.device_ceiling = device;
  if (launcher_->runs_whole_graph()) {
    KernelProfile kp;
    kp.name = "interpret";
    kp.kind = "graph";
    kp.nodes = static_cast<int>(program_.graph.size());
    kp.calls = iters;
    std::vector<double> t;
    for (int i = 0; i < warmup + iters; ++i) {
      auto t0 = Clock::now();
      launcher_->run_graph(program_.graph, inputs, nullptr);
      if (i >= warmup) t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    kp.median_ms = median(t);
    kp.min_ms = *std::min_element(t.begin(), t.end());
    r.total_ms = kp.median_ms;
    r.kernels.push_back(kp);
    r.events.push_back({"interpret", 0, kp.median_ms * 1000, 1});
    return r;
  }
  bind(inputs, false);
  int nk = program_.num_kernels();
  std::vector<std::vector<double>> per(nk);
  std::vector<double> totals, ms(nk);
  double origin = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    bool last = i == warmup + iters - 1;
    if (last) origin = std::chrono::duration<double, std::micro>(Clock::now().time_since_epoch()).count();
    auto t0 = Clock::now();
    launcher_->begin_run(/*upload=*/i == 0);
    launch_all(&ms, last ? &r.events : nullptr, origin);
    launcher_->end_run(/*download=*/last);
    double total = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    use_device_times(ms, last ? &r.events : nullptr, origin);
    if (i < warmup) continue;
    totals.push_back(total);
    for (int k = 0; k < nk; ++k) per[k].push_back(ms[k]);
  }
  r.total_ms = median(totals);
  for (int k = 0; k < nk; ++k) {
    const loop::LoopFunc& f = program_.funcs[k];
    KernelProfile kp;
    kp.name = f.name;
    kp.kind = f.kind;
    kp.nodes = static_cast<int>(program_.kg.kernels[k].nodes.size());
    kp.calls = iters;
    kp.median_ms = median(per[k]);
    kp.min_ms = *std::min_element(per[k].begin(), per[k].end());
    auto cost = loop::estimate_cost(f, program_.kg, bound_.dims);
    kp.flops = cost.flops;
    kp.bytes = cost.bytes;
    kp.order = k;
    const Kernel& kk = program_.kg.kernels[k];
    if (kk.output >= 0) kp.shape = shape_eval(program_.kg.buffers[kk.output].shape, bound_.dims);
    kp.sources = kernel_sources(kk);
    double s = std::max(kp.median_ms, 1e-6) / 1000;
    kp.gflops = cost.flops / s / 1e9;
    kp.gbps = cost.bytes / s / 1e9;
    r.kernels.push_back(kp);
  }
  // The roof: memory or compute bound, and the share of that ceiling reached.
  auto place = [&] {
    for (KernelProfile& kp : r.kernels) {
      double intensity = kp.bytes > 0 ? kp.flops / kp.bytes : 1e9;
      bool memory_bound = intensity * mc.gbps < mc.gflops;
      kp.bound = memory_bound ? "memory" : "compute";
      kp.roof = memory_bound ? (mc.gbps > 0 ? kp.gbps / mc.gbps : 0) : (mc.gflops > 0 ? kp.gflops / mc.gflops : 0);
      kp.above_roof = device ? (kp.roof > 1 ? "above the device ceiling measured" : "")
                             : above_roof_reason(kp.roof, memory_bound, kp.bytes);
    }
  };
  place();
  // A kernel above the host's ceiling: the ceiling may have been measured under load.
  // Measure again (once per process; it only rises) and place the kernels anew.
  bool above = std::any_of(r.kernels.begin(), r.kernels.end(), [](auto& k) { return k.roof > 1; });
  if (above && !device) {
    host = remeasure_machine();
    mc = {host.gflops, host.gbps};
    r.peak_gflops = mc.gflops;
    r.peak_gbps = mc.gbps;
    place();
  }
  r.arena_bytes = bound_.plan.arena_bytes;
  r.peak_bytes = bound_.plan.arena_bytes + bound_.plan.io_bytes;
  return r;
}

}  // namespace lathe
