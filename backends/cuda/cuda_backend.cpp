// cuda_backend.cpp — the `cuda` backend: loop IR → CUDA C (render.cpp) → NVRTC cubin
// (nvrtc.cpp) → driver API launch (driver.cpp), behind backends/backend.h.
//
// Compiles: one NVRTC call per compile_many; the cubin goes through the kernel cache
// (core/runtime/kernel_cache.h), keyed by the source, the architecture and NVRTC's version.
// Supports: every dtype (f16/bf16 computed in float) and every primitive op except Extern.
// Memory: intermediates live in one device arena that mirrors the host memory plan (same
// offsets, so buffer reuse and in-place updates carry over); inputs, constants and outputs
// have a device copy keyed by host address. A run (begin_run … end_run) queues its launches
// on one stream: inputs are copied in on the runs that upload, results are copied back at
// the end of the runs that download, and intermediates never leave the device. Each
// launch is bracketed by CUDA events, read at end_run (device_ms) for the profiler.
#include "backends/cuda/cuda_backend.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>

#include "backends/cuda/driver.h"
#include "backends/cuda/peers.h"
#include "core/ir/diag.h"
#include "core/runtime/kernel_cache.h"
#include "core/loop/cost.h"
#include "core/loop/attention_layout.h"
#include "core/loop/lower.h"
#include "core/loop/lower_depthwise.h"

namespace lathe::cuda {

loop::LoopFunc gpu_loop_func(const Program& p, int kernel) {
  const loop::LoopFunc& f = p.funcs.at(kernel);
  if (f.kind == "extern") return f;
  const KernelGraph& kg = p.kg;
  if (f.kind == "attention") {  // one query row per thread (the CPU's query tiles would be per-thread arrays)
    loop::LoopFunc g = loop::lower_kernel(kg, kernel, /*plain=*/true);
    g.schedule_log.push_back("cuda: one query row per thread");
    return g;
  }
  if (f.kind == "attention_bwd") {  // one query row (dQ, dS) or one key row (dK|dV) per thread
    loop::LoopFunc g = loop::lower_kernel(kg, kernel, /*plain=*/true);
    g.schedule_log.push_back("cuda: one row per thread");
    return g;
  }
  if (loop::is_packed_matmul(f)) {  // lower the matmul as the plain reduction it is
    loop::LoopFunc g = loop::lower_kernel(kg, kernel, /*plain=*/true);
    g.schedule_log.push_back("cuda: re-lowered as a reduction (one output element per thread)");
    return g;
  }
  // the CPU's direct depthwise nest (vectors, per-thread copies): the plain loops, as before it
  if (loop::is_depthwise(f)) return loop::lower_kernel(kg, kernel, /*plain=*/true);
  if (f.kind == "matmul") return f;  // the plain reduction (p:kernel(i):reset(true)), maybe hand-scheduled
  // The CPU's default schedule (fused outer loops, parallel, vectorize) means nothing on the
  // GPU, where the renderer flattens the output loops itself: start from the plain loops
  // unless the user scheduled this kernel by hand (its log differs from the default's).
  if (f.schedule_log.empty()) return f;
  loop::LoopFunc plain = loop::lower_kernel(kg, kernel);
  loop::LoopFunc dflt = plain;
  try {
    loop::apply_default_schedule(dflt);
  } catch (const std::exception&) {
    return f;
  }
  return dflt.schedule_log == f.schedule_log ? plain : f;
}

CudaKernel render_gemv_q4(const loop::LoopFunc& f, NodeRef n);  // render_gemv_q4.cpp
bool is_gemv_q4(NodeRef n) { return n && n->op == Op::Extern && n->attrs.name == "gemv_q4"; }
CudaKernel render_rnn(const loop::LoopFunc& f, NodeRef n);  // render_rnn.cpp
bool is_rnn(NodeRef n) { return n && n->op == Op::Extern && n->attrs.name == "rnn"; }
bool flash_attention_applies(const loop::AttentionDesc& d);                      // render_attention.cpp
CudaKernel render_flash_attention(const loop::LoopFunc& f, const loop::AttentionDesc& d);  // render_attention.cpp
bool attention_bwd_applies(const loop::AttentionDesc& d);                        // render_attention_bwd.cpp
CudaKernel render_attention_bwd(const loop::LoopFunc& f, const loop::AttentionDesc& d);    // render_attention_bwd.cpp

CudaKernel render_program_kernel(const Program& p, int kernel, const std::string& prefix, const RenderOptions& o,
                                 loop::LoopFunc* out) {
  loop::LoopFunc f = gpu_loop_func(p, kernel);
  // `peel` is a CPU SIMD schedule: the thread mapping does not take its tail loops. Checked
  // on the loops the GPU gets: the default schedule's peeled rows become the plain loops.
  bool peeled = false;
  loop::walk(f.body, [&](const loop::Stmt& s) { peeled |= s.kind == loop::StmtKind::For && s.annot.width > 0; return !peeled; });
  if (peeled)
    throw UserError("backend 'cuda' cannot run kernel " + f.name +
                    ": its schedule peels a loop (peel is a CPU SIMD primitive; k:reset() for the default schedule)");
  f.name = prefix + f.name;
  CudaKernel k;
  if (f.kind == "extern" && (is_gemv_q4(p.kg.kernels.at(kernel).root) || is_rnn(p.kg.kernels.at(kernel).root))) {
    NodeRef root = p.kg.kernels.at(kernel).root;
    k = is_rnn(root) ? render_rnn(f, root) : render_gemv_q4(f, root);
    f.schedule_log.push_back("cuda: " + k.launch.tiled);
    if (out) *out = std::move(f);
    return k;
  }
  const char* flash = std::getenv("LATHE_CUDA_FLASH");
  bool use_flash = f.kind == "attention" && !(flash && std::string(flash) == "0");
  loop::AttentionDesc d;
  if (use_flash) {
    d = loop::attention_desc(p.kg, kernel);
    use_flash = flash_attention_applies(d);
  }
  // the backward likewise (LATHE_CUDA_FLASH=0: the loop IR kernel, one row per thread)
  bool use_bwd = f.kind == "attention_bwd" && !(flash && std::string(flash) == "0");
  if (use_bwd) {
    d = loop::attention_bwd_desc(p.kg, kernel);
    use_bwd = attention_bwd_applies(d);
  }
  if (use_flash || use_bwd) {
    k = use_flash ? render_flash_attention(f, d) : render_attention_bwd(f, d);
    f.schedule_log.push_back("cuda: " + k.launch.tiled);
  } else {
    k = render_cuda_kernel(f, o);
  }
  if (out) *out = std::move(f);
  return k;
}

CudaUnit render_unit(const Program& p, const std::string& prefix, const RenderOptions& o) {
  CudaUnit u;
  u.source = "// generated by lathe (cuda backend)\n" + cuda_prelude();
  for (int k = 0; k < p.num_kernels(); ++k) {
    if (p.funcs[k].kind == "extern" && !is_gemv_q4(p.kg.kernels.at(k).root) && !is_rnn(p.kg.kernels.at(k).root)) throw UserError("backend 'cuda' cannot run kernel " + p.funcs[k].name + ": Extern library calls are not supported by cuda yet");
    u.funcs.emplace_back();
    u.kernels.push_back(render_program_kernel(p, k, prefix, o, &u.funcs.back()));
    u.source += "\n" + u.kernels.back().source;
  }
  return u;
}

std::string target_arch() {
  if (const char* e = std::getenv("LATHE_CUDA_ARCH"); e && *e) return e;
  if (availability().empty()) return device().arch();
  return "sm_90";
}

namespace {

// LATHE_CUDA_DEBUG=1: every transfer and launch on stderr, and a synchronize after each
// launch so an error names its kernel.
bool debug_on() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_CUDA_DEBUG");
    return e && *e && std::string(e) != "0";
  }();
  return on;
}

// A host buffer's copy on the device. Inputs, constants and outputs get one allocation
// each (keyed by host address); intermediates live in one device arena laid out by the
// host's memory plan (device = arena + the same offset), so buffer reuse carries over.
struct Mirror {
  CUdeviceptr ptr = 0;
  size_t bytes = 0;         // allocated
  size_t cur_bytes = 0;     // the host buffer's size in the current run (≤ bytes: a host
                            // address can come back holding a smaller tensor)
  bool written = false;     // the device copy was produced by a kernel (newer than the host's)
  bool uploaded = false;    // copied in during the current run
  bool used = false;        // touched during the current run (stale mirrors are freed)
  bool dirty = false;       // written during the current run and not yet copied back
  BufferKind kind = BufferKind::Intermediate;
};

class CudaProgram : public CompiledProgram {
 public:
  CudaProgram(const Program& p, CudaUnit unit, std::shared_ptr<const NvrtcResult> bin)
      : unit_(std::move(unit)), bin_(std::move(bin)) {
    kinds_.resize(p.kg.buffers.size());
    shapes_.resize(p.kg.buffers.size());
    for (auto& b : p.kg.buffers) {
      kinds_[b.id] = b.kind;
      shapes_[b.id] = b.shape;
    }
    for (int k = 0; k < p.num_kernels(); ++k) {  // executor order -> rendered parameter order
      std::vector<int> perm;
      std::vector<int64_t> off;
      for (auto& bp : unit_.funcs[k].buffers) {
        int at = -1;
        for (size_t i = 0; i < p.funcs[k].buffers.size(); ++i)
          if (p.funcs[k].buffers[i].buffer == bp.buffer) at = static_cast<int>(i);
        LATHE_CHECK(at >= 0, "cuda: kernel " + bp.name + " parameter has no executor buffer");
        perm.push_back(at);
        // the executor hands the address plus the program's launch offset (base_offsets.h)
        off.push_back(p.funcs[k].buffers[at].offset * static_cast<int64_t>(dtype_size(p.funcs[k].buffers[at].dtype)));
      }
      perm_.push_back(perm);
      exec_offset_.push_back(off);
    }
    symbols_ = p.kg.symbols;
    kernel_ms_.assign(p.num_kernels(), 0);
    events_.assign(p.num_kernels(), {nullptr, nullptr});
    launched_.assign(p.num_kernels(), false);
  }
  ~CudaProgram() override {
    if (availability().empty()) {
      const Driver& d = driver();
      for (auto& [h, m] : mirrors_) d.MemFree(m.ptr);
      if (arena_) d.MemFree(arena_);
      for (auto& [a, b] : events_) {
        if (a) d.EventDestroy(a);
        if (b) d.EventDestroy(b);
      }
      if (scratch_) d.MemFree(scratch_);
      if (module_) d.ModuleUnload(module_);
    }
  }

  std::string source(int k) const override { return unit_.kernels.at(k).source; }
  std::string full_source() const override { return unit_.source; }
  std::string assembly(int k) const override {  // PTX of kernel k
    NvrtcOptions o;
    o.arch = bin_->arch;
    o.ptx = true;
    std::string ptx = nvrtc_compile(unit_.source, "lathe.cu", o).ptx;
    auto at = ptx.find(".entry " + unit_.kernels.at(k).name + "(");
    if (at == std::string::npos) return ptx;
    auto start = ptx.rfind("\n.", at);
    auto end = ptx.find("\n}\n", at);
    return ptx.substr(start == std::string::npos ? 0 : start + 1, end == std::string::npos ? std::string::npos : end + 3 - start - 1);
  }
  double device_ms(int k) const override { return kernel_ms_.at(k); }
  // it renders the plain loops (gpu_loop_func), which may read a weight the CPU loops read
  // only through its packed copy
  bool runs_program_loops() const override { return false; }
  bool device_ceiling(double& gflops, double& gbps) override {
    static const std::pair<double, double> c = [] {  // measured once per process
      std::string why;
      return std::make_pair(peak_gflops(&why), copy_gbps(size_t(256) << 20, 10, &why));
    }();
    if (c.first <= 0 || c.second <= 0) return false;
    gflops = c.first;
    gbps = c.second;
    return true;
  }

  void bind_arena(const std::byte* host, int64_t bytes) override {
    host_arena_ = host;
    if (static_cast<size_t>(bytes) <= arena_bytes_) return;
    const Driver& d = ready_driver();
    if (arena_) check(d.MemFree(arena_), "cuMemFree");
    arena_ = 0;
    check(d.MemAlloc(&arena_, std::max<size_t>(bytes, 4)), "cuMemAlloc (buffer arena)");
    arena_bytes_ = static_cast<size_t>(bytes);
  }

  void begin_run(bool upload) override {
    ready_driver();
    in_run_ = true;
    upload_ = upload;
    for (auto& [h, m] : mirrors_) m.uploaded = m.used = m.dirty = false;
    std::fill(launched_.begin(), launched_.end(), false);
  }

  void end_run(bool download) override {
    const Driver& d = ready_driver();
    in_run_ = false;
    check(d.CtxSynchronize(), "running the cuda kernels");
    for (size_t k = 0; k < launched_.size(); ++k) {
      if (!launched_[k]) continue;
      float ms = 0;
      check(d.EventElapsedTime(&ms, events_[k].first, events_[k].second), "cuEventElapsedTime");
      kernel_ms_[k] = ms;
    }
    for (auto it = mirrors_.begin(); it != mirrors_.end();) {
      Mirror& m = it->second;
      if (download && m.dirty && m.kind != BufferKind::Intermediate) {
        check(d.MemcpyDtoH(const_cast<std::byte*>(it->first), m.ptr, m.cur_bytes), "cuMemcpyDtoH");
        if (debug_on()) std::fprintf(stderr, "cuda: download %zu bytes to %p\n", m.cur_bytes, static_cast<const void*>(it->first));
      }
      if (!m.used) {  // a host buffer of an earlier run (fresh outputs each run): free it
        check(d.MemFree(m.ptr), "cuMemFree");
        it = mirrors_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void launch(int k, void* const* bufs, const int64_t* dims) override {
    if (!in_run_) {  // a lone launch is a whole run
      begin_run(true);
      launch(k, bufs, dims);
      end_run(true);
      return;
    }
    const Driver& d = ready_driver();
    load_module();
    const loop::LoopFunc& f = unit_.funcs.at(k);
    const CudaKernel& ck = unit_.kernels.at(k);
    Bindings env;
    for (size_t i = 0; i < symbols_.size(); ++i) env[symbols_[i]] = dims[i];
    std::vector<CUdeviceptr> args(f.buffers.size());
    for (size_t i = 0; i < f.buffers.size(); ++i) {
      const auto& bp = f.buffers[i];
      const std::byte* host = static_cast<const std::byte*>(bufs[perm_[k][i]]) - exec_offset_[k][i];
      const CUdeviceptr at = static_cast<CUdeviceptr>(bp.offset * static_cast<int64_t>(dtype_size(bp.dtype)));
      size_t bytes = dtype_size(bp.dtype);
      for (int64_t n : shape_eval(shapes_[bp.buffer], env)) bytes *= static_cast<size_t>(n);
      BufferKind kind = kinds_[bp.buffer];
      if (kind == BufferKind::Intermediate && arena_ && host >= host_arena_ &&
          host + bytes <= host_arena_ + arena_bytes_) {
        args[i] = arena_ + static_cast<CUdeviceptr>(host - host_arena_) + at;
        continue;
      }
      Mirror& m = mirrors_[host];
      if (!m.used) m.cur_bytes = 0;  // first use in this run
      m.used = true;
      m.kind = kind;
      m.cur_bytes = std::max(m.cur_bytes, bytes);
      if (m.bytes < bytes) {
        if (m.ptr) check(d.MemFree(m.ptr), "cuMemFree");
        m.ptr = 0;
        check(d.MemAlloc(&m.ptr, std::max<size_t>(bytes, 4)), "cuMemAlloc");
        m.bytes = bytes;
        m.written = false;
      }
      // Inputs and constants come from the host once per run that uploads (not when a
      // kernel of this run already updated them in place); anything else only when no
      // kernel has produced it on the device yet.
      bool host_newer = (kind == BufferKind::Input || kind == BufferKind::Constant)
                            ? (upload_ && !m.uploaded && !m.dirty) || !m.written
                            : !m.written;
      if (debug_on())
        std::fprintf(stderr, "cuda: %s param %s: host %p kind %d, %zu bytes, device %llx%s%s\n", f.name.c_str(), bp.name.c_str(),
                     static_cast<const void*>(host), static_cast<int>(kind), bytes, static_cast<unsigned long long>(m.ptr),
                     bp.written ? " written" : "", !bp.written && host_newer ? " upload" : "");
      // (a null host pointer: a weight only its packed copy is read from, freed: nothing to upload)
      if (!bp.written && host_newer && bytes && bufs[perm_[k][i]]) {
        check(d.MemcpyHtoD(m.ptr, host, bytes), "cuMemcpyHtoD");
        m.uploaded = m.written = true;
      }
      if (bp.written) m.written = m.dirty = true;
      args[i] = m.ptr + at;
    }
    std::vector<long long> dimv;  // the kernel's dims, in its parameter order
    for (auto& name : f.dims) {
      auto it = env.find(name);
      LATHE_CHECK(it != env.end(), "cuda: kernel " + f.name + " needs dim " + name + ", which the program does not bind");
      dimv.push_back(it->second);
    }
    std::vector<void*> params;
    for (auto& a : args) params.push_back(&a);
    if (ck.scratch_bytes > 0) {  // the kernel's scratch after its buffers, one for the program (launches run in order)
      if (scratch_bytes_ < static_cast<size_t>(ck.scratch_bytes)) {
        if (scratch_) check(d.MemFree(scratch_), "cuMemFree");
        scratch_ = 0;
        check(d.MemAlloc(&scratch_, static_cast<size_t>(ck.scratch_bytes)), "cuMemAlloc (kernel scratch)");
        scratch_bytes_ = static_cast<size_t>(ck.scratch_bytes);
      }
      params.push_back(&scratch_);
    }
    for (auto& v : dimv) params.push_back(&v);  // (kernels without dim parameters ignore these)
    // launch shape: blocks of L.block threads, 0 when there is no work
    std::map<std::string, int64_t, std::less<>> ienv(env.begin(), env.end());
    auto grid_of = [&](const LaunchShape& L) -> unsigned {
      if (!L.work) return 1;
      int64_t work = 0;
      LATHE_CHECK(loop::eval_index(L.work, ienv, work), "cuda: cannot evaluate the launch size of " + f.name);
      if (work <= 0) return 0;
      int64_t blocks = L.per_block ? work : (work + L.block - 1) / L.block;
      int64_t cap = L.per_block ? int64_t(dev_->sm_count) * 64 : int64_t(dev_->sm_count) * 32;
      return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
    };
    unsigned grid = grid_of(ck.launch), block = static_cast<unsigned>(ck.launch.block);
    if (grid == 0) {
      kernel_ms_[k] = 0;
      return;
    }
    auto& [e0, e1] = events_[k];
    if (!e0) check(d.EventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    if (!e1) check(d.EventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    check(d.EventRecord(e0, nullptr), "cuEventRecord");
    if (!ck.pre_name.empty()) {  // the phase before it (same parameters), inside the kernel's events
      unsigned pg = grid_of(ck.pre_launch), pb = static_cast<unsigned>(ck.pre_launch.block);
      if (pg)
        check(d.LaunchKernel(pre_fns_.at(k), pg, 1, 1, pb, 1, 1, 0, nullptr, params.data(), nullptr), ("cuLaunchKernel " + ck.pre_name).c_str());
      if (debug_on()) {
        std::fprintf(stderr, "cuda: launch %s grid %u block %u\n", ck.pre_name.c_str(), pg, pb);
        check(d.CtxSynchronize(), ("running kernel " + ck.pre_name).c_str());
      }
    }
    check(d.LaunchKernel(fns_.at(k), grid, 1, 1, block, 1, 1, 0, nullptr, params.data(), nullptr), ("cuLaunchKernel " + f.name).c_str());
    check(d.EventRecord(e1, nullptr), "cuEventRecord");
    launched_[k] = true;
    if (debug_on()) {
      std::fprintf(stderr, "cuda: launch %s grid %u block %u\n", f.name.c_str(), grid, block);
      check(d.CtxSynchronize(), ("running kernel " + f.name).c_str());
    }
  }

 private:
  // The device, with its context current on the calling thread (every entry point calls
  // this: the executor may call from another thread than the one that compiled).
  const Driver& ready_driver() {
    try {
      dev_ = &device();
    } catch (const UserError& e) {  // compiled without a driver (NVRTC needs none): inspect, not run
      throw UserError("cuda backend: cannot run here: " + e.diag().message +
                      " (the program is compiled: its source and PTX can be inspected, e.g. p:source(1), p:asm(1))");
    }
    return driver();
  }
  void load_module() {
    if (module_) return;
    const Driver& d = driver();
    check(d.ModuleLoadData(&module_, bin_->binary.data()), ("cuModuleLoadData (" + bin_->arch + ")").c_str());
    for (auto& k : unit_.kernels) {
      CUfunction fn = nullptr, pre = nullptr;
      check(d.ModuleGetFunction(&fn, module_, k.name.c_str()), ("cuModuleGetFunction " + k.name).c_str());
      if (!k.pre_name.empty()) check(d.ModuleGetFunction(&pre, module_, k.pre_name.c_str()), ("cuModuleGetFunction " + k.pre_name).c_str());
      fns_.push_back(fn);
      pre_fns_.push_back(pre);
    }
  }

  CudaUnit unit_;
  std::shared_ptr<const NvrtcResult> bin_;  // shared by the programs of one compile_many
  std::vector<BufferKind> kinds_;
  std::vector<Shape> shapes_;
  std::vector<std::vector<int>> perm_;
  std::vector<std::vector<int64_t>> exec_offset_;  // per kernel, per parameter: bytes the executor added
  std::vector<std::string> symbols_;
  std::vector<double> kernel_ms_;
  std::vector<std::pair<CUevent, CUevent>> events_;  // per kernel, reused across runs
  std::vector<bool> launched_;                        // in the current run
  Device* dev_ = nullptr;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> fns_, pre_fns_;  // per kernel: its function, the one launched before it (or null)
  CUdeviceptr scratch_ = 0;                 // the kernels' scratch (CudaKernel::scratch_bytes), the largest
  size_t scratch_bytes_ = 0;
  std::map<const std::byte*, Mirror> mirrors_;
  const std::byte* host_arena_ = nullptr;
  CUdeviceptr arena_ = 0;
  size_t arena_bytes_ = 0;
  bool in_run_ = false, upload_ = true;
};

class CudaBackend : public Backend {
 public:
  std::string name() const override { return "cuda"; }
  std::string description() const override {
    std::string nvrtc = nvrtc_unavailable().empty() ? "NVRTC " + nvrtc_version() : "NVRTC (" + nvrtc_unavailable() + ")";
    return "CUDA C compiled in process by " + nvrtc + ", run through the driver API (libcuda.so.1 and NVRTC loaded at run time)";
  }
  std::string available() const override { return availability(); }
  std::string can_compile() const override { return nvrtc_unavailable(); }  // NVRTC needs no driver
  double device_copy_gbps(std::string* why) override { return copy_gbps(size_t(256) << 20, 20, why); }
  double device_sgemm_ms(int n, int iters, std::string* why) override { return cublas_sgemm_ms(n, iters, why); }
  double device_peak_gflops(std::string* why) override { return peak_gflops(why); }
  std::string supports(NodeRef n) const override {
    if (n->op == Op::Extern && n->attrs.name != "attention" && n->attrs.name != "attention_bwd" && n->attrs.name != "gemv_q4" && n->attrs.name != "rnn") return "Extern library calls are not supported by the cuda backend yet (use interp)";
    return "";
  }
  std::string render(const Program& p, int kernel) const override {
    return render_program_kernel(p, kernel).source;
  }
  std::shared_ptr<CompiledProgram> compile(const Program& p, const CompileOptions& o) override {
    return compile_many({&p}, o).at(0);
  }
  // One NVRTC call for all programs (kernel names prefixed "pN_" when there are several).
  std::vector<std::shared_ptr<CompiledProgram>> compile_many(const std::vector<const Program*>& ps,
                                                             const CompileOptions& o) override {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<CudaUnit> units;
    std::string all = "// generated by lathe (cuda backend)\n" + cuda_prelude();
    for (size_t i = 0; i < ps.size(); ++i) {
      if (auto why = supports_graph(ps[i]->graph); !why.empty()) throw UserError("backend 'cuda' cannot run " + why);
      units.push_back(render_unit(*ps[i], ps.size() == 1 ? "" : "p" + std::to_string(i) + "_"));
      for (auto& k : units.back().kernels) all += "\n" + k.source;
    }
    NvrtcOptions no;
    no.arch = target_arch();
    // LATHE_CUDA_LOAD_SOURCE=1: hand the driver the CUDA C instead of the cubin (the test
    // driver, tests/cuda/fake_driver, compiles it for the CPU and runs it)
    const char* ls = std::getenv("LATHE_CUDA_LOAD_SOURCE");
    bool load_source = ls && std::string(ls) == "1";
    // cubins go through the kernel cache, keyed by everything that shapes them
    std::string path = cache_path("cuda", cache_key({"cuda-cubin-1", all, no.arch, nvrtc_version()}) + ".cubin");
    NvrtcResult r;
    bool cached = false;
    if (o.use_cache && !load_source) {
      std::ifstream in(path, std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (data.size() > 64 && data.compare(0, 4, "\x7f" "ELF") == 0) {  // a cubin is an ELF image; else rebuild
        r.arch = no.arch;
        r.binary.assign(data.begin(), data.end());
        r.command = "(kernel cache) " + path;
        cached = true;
      }
    }
    if (!cached) {
      r = nvrtc_compile(all, "lathe.cu", no);
      if (o.use_cache && !load_source) atomic_write(path, std::string(r.binary.begin(), r.binary.end()));
    }
    if (load_source) {
      r.binary.assign(all.begin(), all.end());
      r.binary.push_back('\0');
    }
    auto bin = std::make_shared<const NvrtcResult>(std::move(r));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::shared_ptr<CompiledProgram>> out;
    for (size_t i = 0; i < ps.size(); ++i) {
      auto cp = std::make_shared<CudaProgram>(*ps[i], std::move(units[i]), bin);
      cp->compile_ms = cached ? 0 : ms;
      cp->from_cache = cached;
      cp->command = bin->command;
      out.push_back(cp);
    }
    return out;
  }
};

LATHE_REGISTER_BACKEND(CudaBackend);

}  // namespace

}  // namespace lathe::cuda
