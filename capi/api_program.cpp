// api_program.cpp — compile, inspect (kernels, loop IR, source, assembly), run and profile
// for the C API. lathe_program_run is the zero-copy path: it binds symbolic dims from the
// caller's descriptors, plans memory once per set of dim values (as Executable does), points
// the kernels at the caller's input and output buffers and launches them; only intermediates
// live in Lathe's arena. Nothing here touches Lua.
#include <chrono>

#include "capi/internal.h"
#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/runtime/arena_alloc.h"
#include "core/runtime/random.h"

using namespace lathe;
using namespace lathe::capi;

namespace {

lathe_program_s& prog(lathe_program p) { return need(p, "program"); }

int kernel_index(lathe_program_s& p, int32_t k) {
  int n = p.exe->program().num_kernels();
  if (n == 0) throw UserError("this program has no kernels (the " + p.backend + " backend runs the graph as a whole)");
  if (k < 0 || k >= n) throw BadArg("kernel " + std::to_string(k) + " is out of range (0.." + std::to_string(n - 1) + ")");
  return k;
}

std::string want_text(NodeRef in) { return std::string(dtype_name(in->dtype)) + shape_to_string(in->shape); }

// Graph input i → the caller's argument (by name, or by position when the name is NULL).
std::vector<const lathe_arg*> match_inputs(const Graph& g, const lathe_arg* args, size_t n) {
  if (n && !args) throw BadArg("inputs is NULL");
  std::vector<const lathe_arg*> by(g.inputs.size(), nullptr);
  for (size_t i = 0; i < n; ++i) {
    size_t idx = g.inputs.size();
    if (args[i].name) {
      for (size_t j = 0; j < g.inputs.size(); ++j)
        if (g.inputs[j]->attrs.name == args[i].name) { idx = j; break; }
      if (idx == g.inputs.size()) {
        std::string known;
        for (NodeRef in : g.inputs) known += (known.empty() ? "" : ", ") + in->attrs.name;
        throw UserError("the graph has no input '" + std::string(args[i].name) + "' (inputs: " + (known.empty() ? "none" : known) + ")");
      }
    } else {
      idx = i;
      if (idx >= g.inputs.size()) throw UserError("input " + std::to_string(i) + " is out of range: the graph has " + std::to_string(g.inputs.size()) + " inputs");
    }
    if (by[idx]) throw UserError("input '" + g.inputs[idx]->attrs.name + "' is given twice");
    by[idx] = &args[i];
  }
  return by;
}

// Binds symbolic dims from the given inputs' shapes and checks dtypes and shapes (the
// messages of Executable's binder). Missing inputs are an error when `all` is set.
Bindings bind_inputs(const Graph& g, const std::vector<const lathe_arg*>& by, bool all) {
  DimBinder binder;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    NodeRef in = g.inputs[i];
    const std::string& name = in->attrs.name;
    if (!by[i]) {
      if (all) throw UserError("missing input '" + name + "' (expected " + want_text(in) + ")");
      continue;
    }
    const lathe_dltensor& t = by[i]->tensor;
    std::string what = "input '" + name + "'";
    DType dt = dl_dtype(t, what);
    std::vector<int64_t> shape = dl_shape(t, what);
    if (!t.data && !shape.empty()) {
      int64_t n = 1;
      for (auto d : shape) n *= d;
      if (n) throw BadArg(what + ": data is NULL");
    }
    if (dt != in->dtype) throw UserError(what + " has dtype " + std::string(dtype_name(dt)) + ", expected " + want_text(in));
    if (shape.size() != in->rank()) throw UserError(what + " has rank " + std::to_string(shape.size()) + ", expected " + want_text(in));
    for (size_t d = 0; d < shape.size(); ++d)
      binder.bind(in->shape[d], shape[d], what + " dim " + std::to_string(d), want_text(in));
  }
  return binder.finish();
}

HostTensor copy_in(const lathe_dltensor& t, const std::string& what) {
  HostTensor h(dl_dtype(t, what), dl_shape(t, what));
  if (h.nbytes()) std::memcpy(h.data(), dl_data(t), h.nbytes());
  return h;
}

int output_index(const lathe_program_s& p, const lathe_arg& a, size_t pos) {
  if (!a.name) {
    if (pos >= p.output_names.size()) throw UserError("output " + std::to_string(pos) + " is out of range: the program has " + std::to_string(p.output_names.size()) + " outputs");
    return (int)pos;
  }
  for (size_t j = 0; j < p.output_names.size(); ++j)
    if (p.output_names[j] == a.name) return (int)j;
  std::string known;
  for (auto& n : p.output_names) known += (known.empty() ? "" : ", ") + n;
  throw UserError("the program has no output '" + std::string(a.name) + "' (outputs: " + known + ")");
}

void check_output(const lathe_dltensor& t, DType dt, const std::vector<int64_t>& shape, const std::string& name) {
  std::string what = "output '" + name + "'";
  DType got = dl_dtype(t, what);
  std::vector<int64_t> s = dl_shape(t, what);
  if (got != dt || s != shape) {
    std::string want = std::string(dtype_name(dt)) + "[";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    std::string gs = std::string(dtype_name(got)) + "[";
    for (size_t i = 0; i < s.size(); ++i) gs += (i ? ", " : "") + std::to_string(s[i]);
    throw UserError(what + " is " + gs + "], the program computes " + want + "]");
  }
}

void* aligned(std::shared_ptr<std::byte[]>& store, int64_t& cap, int64_t bytes) {
  if (bytes > cap || !store) {
    int64_t c = (std::max<int64_t>(bytes, 1) + 63) / 64 * 64;
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, c));
    if (!p) throw UserError("out of memory allocating " + std::to_string(c) + " bytes");
    store = std::shared_ptr<std::byte[]>(p, [](std::byte* q) { std::free(q); });
    cap = c;
  }
  return store.get();
}

// The whole-graph path (the interp backend): copies in and out.
void run_whole_graph(lathe_program_s& p, const std::vector<const lathe_arg*>& by, const lathe_arg* outs, size_t nout) {
  const Graph& g = p.exe->program().graph;
  TensorMap in;
  for (size_t i = 0; i < g.inputs.size(); ++i) in[g.inputs[i]->attrs.name] = copy_in(by[i]->tensor, "input");
  TensorMap res = p.exe->run(in);
  for (size_t i = 0; i < nout; ++i) {
    int o = output_index(p, outs[i], i);
    const HostTensor& t = res.at(p.output_names[o]);
    check_output(outs[i].tensor, t.dtype(), t.shape(), p.output_names[o]);
    if (t.nbytes()) std::memcpy(dl_data(outs[i].tensor), t.data(), t.nbytes());
  }
}

}  // namespace

extern "C" {

lathe_status lathe_compile(lathe_graph g, const lathe_value* opts, size_t nopts, lathe_program* out) {
  return guard([&] {
    const Graph& graph = need(g, "graph").g;
    need(out, "out");
    if (nopts && !opts) throw BadArg("opts is NULL");
    std::string backend = default_backend();
    BuildOptions build;
    CompileOptions co;
    for (size_t i = 0; i < nopts; ++i) {
      const lathe_value& v = opts[i];
      std::string k = v.key ? v.key : "";
      auto want_bool = [&] {
        if (v.kind != LATHE_BOOL && v.kind != LATHE_INT) throw UserError("compile option '" + k + "' must be a boolean");
        return v.u.i != 0;
      };
      auto want_string = [&] {
        if (v.kind != LATHE_STRING || !v.u.s) throw UserError("compile option '" + k + "' must be a string");
        return std::string(v.u.s);
      };
      if (v.kind == LATHE_NIL) continue;
      if (k == "backend") backend = want_string();
      else if (k == "cache") co.use_cache = want_bool();
      else if (k == "flags") co.extra_flags = want_string();
      else if (k == "schedule") build.default_schedule = want_bool();
      else throw UserError("lathe.compile: unknown option '" + k + "' (backend, cache, flags, schedule)");
    }
    Backend& b = get_backend(backend);
    if (std::string why = b.available(); !why.empty()) throw UserError("backend '" + backend + "' is not available here: " + why);
    if (std::string no = b.supports_graph(graph); !no.empty()) throw UserError("backend '" + backend + "' cannot run " + no);
    auto h = std::make_unique<lathe_program_s>();
    h->backend = backend;
    Program program = build_program(graph, build);
    h->compiled = b.compile(program, co);
    for (auto& [name, buf] : program.kg.outputs) h->output_names.push_back(name);
    h->exe = std::make_shared<Executable>(std::move(program), h->compiled, backend);
    *out = h.release();
  });
}

void lathe_program_destroy(lathe_program p) { delete p; }

const char* lathe_program_backend(lathe_program p) { return p ? p->backend.c_str() : ""; }

lathe_status lathe_program_graph(lathe_program p, lathe_graph* out) {
  return guard([&] {
    need(out, "out");
    auto* h = new lathe_graph_s;
    h->g = prog(p).exe->program().graph;
    for (auto& [name, n] : h->g.outputs) h->output_names.push_back(name);
    *out = h;
  });
}

lathe_status lathe_program_num_kernels(lathe_program p, int32_t* n) {
  return guard([&] { need(n, "n") = prog(p).exe->program().num_kernels(); });
}

lathe_status lathe_program_kernel(lathe_program p, int32_t k, lathe_kernel_info* out) {
  return guard([&] {
    auto& h = prog(p);
    const Kernel& kn = h.exe->program().kg.kernels[kernel_index(h, k)];
    lathe_kernel_info& o = need(out, "out");
    o.name = kn.name.c_str();
    o.kind = kn.kind.c_str();
    o.nodes = (int32_t)kn.nodes.size();
  });
}

lathe_status lathe_program_loop(lathe_program p, int32_t k, char** out) {
  return guard([&] {
    auto& h = prog(p);
    put_string(out, loop::print_loop(h.exe->program().funcs[kernel_index(h, k)]));
  });
}

lathe_status lathe_program_source(lathe_program p, int32_t k, char** out) {
  return guard([&] {
    auto& h = prog(p);
    put_string(out, get_backend(h.backend).render(h.exe->program(), kernel_index(h, k)));
  });
}

lathe_status lathe_program_asm(lathe_program p, int32_t k, char** out) {
  return guard([&] {
    auto& h = prog(p);
    int i = kernel_index(h, k);
    std::lock_guard lk(h.mu);
    std::string text = h.compiled ? h.compiled->assembly(i) : "";
    if (text.empty()) throw UserError("the " + h.backend + " backend cannot show assembly (lathe_program_source shows its code)");
    put_string(out, text);
  });
}

lathe_status lathe_program_output_shape(lathe_program p, const lathe_arg* inputs, size_t ninputs, size_t out_index,
                                        int64_t* shape, int32_t capacity, int32_t* ndim) {
  return guard([&] {
    auto& h = prog(p);
    const Program& pr = h.exe->program();
    if (out_index >= h.output_names.size()) throw BadArg("output " + std::to_string(out_index) + " is out of range");
    Bindings dims = bind_inputs(pr.graph, match_inputs(pr.graph, inputs, ninputs), false);
    const Shape& s = pr.kg.buffers[pr.kg.outputs[out_index].second].shape;
    for (const SymInt& d : s)
      if (!d.eval(dims)) throw UserError("output '" + h.output_names[out_index] + "' dim " + d.to_string() + " depends on inputs not given");
    std::vector<int64_t> v = shape_eval(s, dims);
    if (ndim) *ndim = (int32_t)v.size();
    if ((int32_t)v.size() > capacity) throw BadArg("shape capacity " + std::to_string(capacity) + " < rank " + std::to_string(v.size()));
    if (!v.empty() && !shape) throw BadArg("shape is NULL");
    for (size_t i = 0; i < v.size(); ++i) shape[i] = v[i];
  });
}

lathe_status lathe_program_run(lathe_program p, const lathe_arg* inputs, size_t ninputs, const lathe_arg* outputs,
                               size_t noutputs) {
  return guard([&] {
    auto& h = prog(p);
    if (noutputs && !outputs) throw BadArg("outputs is NULL");
    std::lock_guard lk(h.mu);
    Program& pr = h.exe->program();
    const Graph& g = pr.graph;
    const KernelGraph& kg = pr.kg;
    std::vector<const lathe_arg*> by = match_inputs(g, inputs, ninputs);
    Bindings dims = bind_inputs(g, by, true);
    if (h.compiled->runs_whole_graph()) return run_whole_graph(h, by, outputs, noutputs);

    auto& B = h.bound;
    if (!B.valid || B.dims != dims) {
      B.dims = dims;
      B.dim_values.clear();
      for (auto& s : kg.symbols) {
        auto it = dims.find(s);
        B.dim_values.push_back(it == dims.end() ? 0 : it->second);
      }
      B.plan = plan_memory(kg, pr.funcs, dims);
      if (B.plan.arena_bytes > B.arena_capacity || !B.arena) {
        B.arena_capacity = (std::max<int64_t>(B.plan.arena_bytes, 1) + 63) / 64 * 64;
        B.arena = alloc_arena(B.arena_capacity);
      }
      B.scratch.assign(kg.buffers.size(), nullptr);
      B.scratch_bytes.assign(kg.buffers.size(), 0);
      B.input_buffer.assign(g.inputs.size(), -1);
      h.compiled->bind_arena(B.arena.get(), B.arena_capacity);
      B.valid = true;
    }
    // which graph input feeds each Input buffer, and which caller output each Output
    // buffer writes straight into
    B.ptrs.assign(kg.buffers.size(), nullptr);
    auto input_data = [&](const std::string& name) -> void* {
      for (size_t i = 0; i < g.inputs.size(); ++i)
        if (g.inputs[i]->attrs.name == name) return dl_data(by[i]->tensor);
      throw InternalError("buffer for unknown input '" + name + "'");
    };
    std::vector<int> out_of(noutputs);
    std::vector<bool> direct(noutputs, false);
    for (size_t i = 0; i < noutputs; ++i) {
      int o = output_index(h, outputs[i], i);
      out_of[i] = o;
      const BufferDesc& d = kg.buffers[kg.outputs[o].second];
      check_output(outputs[i].tensor, d.dtype, shape_eval(d.shape, dims), h.output_names[o]);
      if (d.kind == BufferKind::Output && !B.ptrs[d.id]) {
        B.ptrs[d.id] = dl_data(outputs[i].tensor);
        direct[i] = true;
      }
    }
    for (const BufferDesc& b : kg.buffers) {
      switch (b.kind) {
        case BufferKind::Input: B.ptrs[b.id] = input_data(b.name); break;
        case BufferKind::Constant:
          B.ptrs[b.id] = b.node->op == Op::Input ? input_data(b.node->attrs.name) : const_cast<void*>(b.node->attrs.data->data());
          break;
        case BufferKind::Output:
          if (!B.ptrs[b.id]) {
            int64_t bytes = 1;
            for (auto d : shape_eval(b.shape, dims)) bytes *= d;
            bytes *= (int64_t)dtype_size(b.dtype);
            B.ptrs[b.id] = aligned(B.scratch[b.id], B.scratch_bytes[b.id], bytes);
          }
          break;
        case BufferKind::Intermediate: B.ptrs[b.id] = B.arena.get() + B.plan.offset[b.id]; break;
      }
    }
    const int64_t* dv = B.dim_values.empty() ? nullptr : B.dim_values.data();
    h.compiled->begin_run(true);
    for (int k = 0; k < pr.num_kernels(); ++k) {
      B.args.clear();
      for (auto& prm : pr.funcs[k].buffers)  // plus the launch offset (core/loop/base_offsets.h)
        B.args.push_back(static_cast<std::byte*>(B.ptrs[prm.buffer]) + prm.offset * static_cast<int64_t>(dtype_size(prm.dtype)));
      h.compiled->launch(k, B.args.data(), dv);
    }
    h.compiled->end_run(true);
    // outputs that alias another output, pass an input through, or are constants
    for (size_t i = 0; i < noutputs; ++i) {
      if (direct[i]) continue;
      const BufferDesc& d = kg.buffers[kg.outputs[out_of[i]].second];
      int64_t bytes = 1;
      for (auto x : shape_eval(d.shape, dims)) bytes *= x;
      bytes *= (int64_t)dtype_size(d.dtype);
      if (bytes) std::memmove(dl_data(outputs[i].tensor), B.ptrs[d.id], bytes);
    }
  });
}

lathe_status lathe_program_profile(lathe_program p, const lathe_arg* inputs, size_t ninputs, int32_t iters,
                                   double* total_ms, int32_t* rows) {
  return guard([&] {
    auto& h = prog(p);
    if (iters < 1) throw UserError("iters must be at least 1, got " + std::to_string(iters));
    std::lock_guard lk(h.mu);
    const Graph& g = h.exe->program().graph;
    std::vector<const lathe_arg*> by = match_inputs(g, inputs, ninputs);
    Bindings dims = bind_inputs(g, by, false);
    TensorMap in;
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (by[i]) in[g.inputs[i]->attrs.name] = copy_in(by[i]->tensor, "input '" + g.inputs[i]->attrs.name + "'");
    for (auto& [n, t] : random_inputs(g, 0, dims))
      if (!in.count(n)) in[n] = t;
    h.profile = std::make_shared<ProfileReport>(h.exe->profile(in, iters));
    if (total_ms) *total_ms = h.profile->total_ms;
    if (rows) *rows = (int32_t)h.profile->kernels.size();
  });
}

lathe_status lathe_program_profile_kernel(lathe_program p, int32_t k, lathe_kernel_profile* out) {
  return guard([&] {
    auto& h = prog(p);
    if (!h.profile) throw UserError("no profile yet (call lathe_program_profile first)");
    if (k < 0 || k >= (int32_t)h.profile->kernels.size()) throw BadArg("profile row " + std::to_string(k) + " is out of range");
    const KernelProfile& r = h.profile->kernels[k];
    lathe_kernel_profile& o = need(out, "out");
    o.name = r.name.c_str();
    o.kind = r.kind.c_str();
    o.bound = r.bound.c_str();
    o.nodes = r.nodes;
    o.calls = r.calls;
    o.ms = r.median_ms;
    o.min_ms = r.min_ms;
    o.flops = r.flops;
    o.bytes = r.bytes;
    o.gflops = r.gflops;
    o.gbps = r.gbps;
    o.roof = r.roof;
  });
}

lathe_status lathe_program_profile_text(lathe_program p, char** out) {
  return guard([&] {
    auto& h = prog(p);
    if (!h.profile) throw UserError("no profile yet (call lathe_program_profile first)");
    put_string(out, h.profile->table());
  });
}

lathe_status lathe_program_trace(lathe_program p, const char* path) {
  return guard([&] {
    auto& h = prog(p);
    std::string file = need(path, "path");
    if (!h.profile) throw UserError("no profile yet (call lathe_program_profile first)");
    h.profile->write_trace(file);
  });
}

}  // extern "C"
