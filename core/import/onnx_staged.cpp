// onnx_staged.cpp — StagedOnnx: runs a model as a chain of segments with host-side
// boundaries (data-dependent shapes, run-time Loop / If). The design is in onnx_staged.h.
#include "core/import/onnx_staged.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "core/import/onnx_stage.h"
#include "core/import/onnx_tensor.h"

namespace lathe {

using namespace onnx_import;

namespace {

constexpr int kMaxDepth = 16;         // bodies nested in bodies (as the importer's)
constexpr int kMaxSegments = 1 << 16;  // segments of one graph run (each does a node at least)
constexpr int kMaxSpecializations = 4;  // programs per node specialized on shape values; then the host
constexpr size_t kMaxImported = 1024;   // imported segments kept (least recently used dropped)

std::string value_key(const std::string& name, const HostTensor& t) {
  return name + ":" + std::string(dtype_name(t.dtype())) + t.shape_string() + ";";
}

HostTensor scalar_of(DType dt, int64_t v) {
  HostTensor t(dt, {});
  t.set_i64(0, v);
  return t;
}

// Stacks equal-shaped tensors along a new leading axis.
HostTensor stack_host(const std::vector<HostTensor>& parts, const std::string& where, size_t index) {
  std::vector<int64_t> shape = parts[0].shape();
  for (const HostTensor& p : parts)
    if (p.shape() != shape || p.dtype() != parts[0].dtype())
      throw UserError(where + ": scan output " + std::to_string(index) + " changes from " +
                      std::string(dtype_name(parts[0].dtype())) + parts[0].shape_string() + " to " +
                      std::string(dtype_name(p.dtype())) + p.shape_string() + " between iterations");
  shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  HostTensor r(parts[0].dtype(), shape);
  size_t off = 0;
  for (const HostTensor& p : parts) {
    if (p.nbytes()) std::memcpy(static_cast<std::byte*>(r.data()) + off, p.data(), p.nbytes());
    off += p.nbytes();
  }
  return r;
}

// Element `i` of t along `axis` (the axis dropped).
HostTensor take_along(const HostTensor& t, int axis, int64_t i) {
  std::vector<int64_t> shape = t.shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[static_cast<size_t>(axis)];
  shape.erase(shape.begin() + axis);
  HostTensor r(t.dtype(), shape);
  const std::byte* src = static_cast<const std::byte*>(t.data());
  std::byte* dst = static_cast<std::byte*>(r.data());
  for (int64_t o = 0; o < outer; ++o)
    if (inner) std::memcpy(dst + o * inner, src + (o * n + i) * inner, static_cast<size_t>(inner));
  return r;
}

// Equal-shaped parts stacked along a new axis `axis` (parts[k] at position k).
HostTensor stack_along(const std::vector<HostTensor>& parts, int axis) {
  std::vector<int64_t> shape = parts[0].shape();
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(parts[0].dtype()));
  for (int d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis); d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + axis, n);
  HostTensor r(parts[0].dtype(), shape);
  std::byte* dst = static_cast<std::byte*>(r.data());
  for (int64_t k = 0; k < n; ++k) {
    const std::byte* src = static_cast<const std::byte*>(parts[static_cast<size_t>(k)].data());
    for (int64_t o = 0; o < outer; ++o)
      if (inner) std::memcpy(dst + (o * n + k) * inner, src + o * inner, static_cast<size_t>(inner));
  }
  return r;
}

const onnx::GraphProto& graph_attr(const onnx::NodeProto& np, const std::string& name, const std::string& where) {
  for (const auto& a : np.attribute())
    if (a.name() == name && a.has_g()) return a.g();
  throw UserError(where + ": attribute '" + name + "' (a graph) is missing");
}

}  // namespace

struct StagedOnnx::Impl {
  std::string path;
  StagedOptions opt;
  SegmentRunner runner;
  onnx::ModelProto model;
  int opset = 0;
  StagedStats stats;
  std::map<const onnx::GraphProto*, HostValues> inits;  // per graph, converted once
  KeyedLru<Segment> imported{kMaxImported};            // segments with no host evaluation, by key
  std::map<std::string, std::set<std::string>> specialized;  // per node: the values it was specialized on
  bool trace = [] {
    const char* e = std::getenv("LATHE_STAGED_TRACE");
    return e && *e && std::string(e) != "0";
  }();

  const HostValues& initializers(const onnx::GraphProto& g, const std::string& prefix) {
    auto it = inits.find(&g);
    if (it != inits.end()) return it->second;
    HostValues v;
    for (const auto& t : g.initializer())
      v[t.name()] = tensor_from_proto(t, opt.onnx.max_elements, prefix + "initializer '" + t.name() + "'");
    return inits[&g] = std::move(v);
  }

  // Runs graph g (the model's or a body) over host values `host` (its inputs and the
  // enclosing scopes' values it reads); returns its outputs in order.
  std::vector<HostTensor> run_graph(const onnx::GraphProto& g, HostValues host, int depth, const std::string& prefix) {
    HostValues consts = initializers(g, prefix);
    std::set<int> done;
    std::string spec;  // the values earlier segments were specialized on (constants they folded depend on them)
    const std::string gid = std::to_string(reinterpret_cast<uintptr_t>(&g)) + "|";
    for (int seg = 0;; ++seg) {
      if (seg >= kMaxSegments) throw UserError(prefix + "more than " + std::to_string(kMaxSegments) + " run-time segments");
      std::string pre = gid;
      for (int k : done) pre += std::to_string(k) + ",";
      pre += "|" + spec + "|";
      for (const auto& [name, t] : host) pre += value_key(name, t);
      Segment s;
      size_t consts_before = consts.size();
      if (const Segment* hit = imported.find(pre)) {
        s = *hit;
      } else {
        StageCtx st{host, done, consts, prefix, {}};
        st.run_control = [&, depth](const onnx::NodeProto& np, const std::string& where, const HostValues& reads) {
          if (depth + 1 > kMaxDepth)
            throw UserError(where + ": control-flow bodies nest more than " + std::to_string(kMaxDepth) + " deep");
          if (np.op_type() == "Loop") return run_loop(np, where, reads, depth + 1);
          if (np.op_type() == "Scan") return run_scan(np, where, reads, depth + 1);
          return run_if(np, where, reads, depth + 1);
        };
        st.may_specialize = [&](int k, const std::string& values) {
          std::set<std::string>& seen = specialized[gid + std::to_string(k)];
          if (seen.count(values)) return true;
          if (static_cast<int>(seen.size()) >= kMaxSpecializations) return false;
          seen.insert(values);
          return true;
        };
        s = lower_segment(g, opset, opt.onnx, path, st);
        ++stats.imports;
        stats.host_ops += st.host_evals;
        // the import is a function of the key unless it evaluated something on the host
        if (st.host_evals == 0 && st.host_checks == 0 && st.spec.empty() && consts.size() == consts_before) imported.put(pre, s);
      }
      if (!s.graph.outputs.empty()) {
        std::string key = pre + "#";
        TensorMap ins;
        for (const NodeRef& in : s.graph.inputs) {
          const HostTensor& t = host.at(in->attrs.name);
          ins[in->attrs.name] = t;
          key += value_key(in->attrs.name, t);
        }
        key += "#" + std::to_string(s.barrier) + "#" + s.spec;
        if (trace)
          std::cerr << "staged: " << (prefix.empty() ? "graph" : prefix) << " segment " << seg << ": " << s.graph.size()
                    << " nodes, " << s.graph.inputs.size() << " inputs, " << s.graph.outputs.size() << " outputs"
                    << (s.barrier >= 0 ? ", stops before node " + std::to_string(s.barrier) : "")
                    << (s.spec.empty() ? "" : ", specialized on " + s.spec) << "\n";
        TensorMap outs = runner(s.graph, key, ins);
        ++stats.segments;
        for (const auto& [name, node] : s.graph.outputs) host[name] = outs.at(name);
      }
      done.insert(s.lowered.begin(), s.lowered.end());
      spec += s.spec;
      if (s.barrier < 0) break;
      if (s.lowered.empty() && s.graph.outputs.empty())
        throw InternalError(prefix + "a run-time segment made no progress");
    }
    std::vector<HostTensor> r;
    for (const auto& vi : g.output()) {
      if (auto h = host.find(vi.name()); h != host.end()) r.push_back(h->second);
      else if (auto c = consts.find(vi.name()); c != consts.end()) r.push_back(c->second);
      else throw UserError(prefix + "graph output '" + vi.name() + "' is never produced");
    }
    return r;
  }

  std::vector<HostTensor> run_loop(const onnx::NodeProto& np, const std::string& where, const HostValues& reads, int depth) {
    const onnx::GraphProto& body = graph_attr(np, "body", where);
    auto input = [&](int i) -> const HostTensor* {
      if (i >= np.input_size() || np.input(i).empty()) return nullptr;
      return &reads.at(np.input(i));
    };
    const int64_t cap = opt.max_loop_iterations;
    int64_t trip = -1;  // none: run while the condition holds
    if (const HostTensor* m = input(0)) {
      if (m->numel() != 1) throw UserError(where + ": the trip count must hold one value, got shape " + m->shape_string());
      trip = m->get_i64(0);
      if (trip < 0) throw UserError(where + ": the trip count " + std::to_string(trip) + " is negative");
    }
    bool cond = true;
    const HostTensor* c0 = input(1);
    if (c0) {
      if (c0->numel() != 1) throw UserError(where + ": the loop condition must hold one value, got shape " + c0->shape_string());
      cond = c0->get_f64(0) != 0;
    }
    if (!c0 && trip > cap)
      throw UserError(where + ": the trip count " + std::to_string(trip) + " exceeds the limit of " + std::to_string(cap) +
                      " iterations (StagedOptions::max_loop_iterations)");
    std::vector<HostTensor> carried;
    for (int i = 2; i < np.input_size(); ++i) {
      if (np.input(i).empty()) throw OnnxUnsupported(where + ": an empty loop-carried input");
      carried.push_back(reads.at(np.input(i)));
    }
    size_t n_carried = carried.size();
    if (body.input_size() != static_cast<int>(2 + n_carried))
      throw UserError(where + ": the body takes " + std::to_string(body.input_size()) + " inputs, the Loop gives " +
                      std::to_string(2 + n_carried));
    if (body.output_size() < static_cast<int>(1 + n_carried)) throw UserError(where + ": the body has too few outputs");
    size_t n_scan = static_cast<size_t>(body.output_size()) - 1 - n_carried;
    if (static_cast<size_t>(np.output_size()) != n_carried + n_scan)
      throw UserError(where + ": the node has " + std::to_string(np.output_size()) + " outputs, the body gives " +
                      std::to_string(n_carried + n_scan));
    HostValues outer;  // what the body reads from enclosing scopes
    for (const std::string& name : free_names(body))
      if (auto it = reads.find(name); it != reads.end()) outer[name] = it->second;
    std::vector<std::vector<HostTensor>> scans(n_scan);
    int64_t scan_elements = 0;
    for (int64_t it = 0; (trip < 0 || it < trip) && cond; ++it) {
      if (it >= cap)
        throw UserError(where + ": the loop ran " + std::to_string(cap) + " iterations without stopping (the limit, "
                        "StagedOptions::max_loop_iterations)");
      HostValues h = outer;
      h[body.input(0).name()] = scalar_of(DType::I64, it);
      h[body.input(1).name()] = scalar_of(DType::Bool, 1);
      for (size_t i = 0; i < n_carried; ++i) h[body.input(static_cast<int>(2 + i)).name()] = carried[i];
      std::vector<HostTensor> outs = run_graph(body, std::move(h), depth, where + " > ");
      ++stats.iterations;
      if (outs[0].numel() != 1) throw UserError(where + ": the body's condition output must hold one value");
      cond = outs[0].get_f64(0) != 0;
      for (size_t i = 0; i < n_carried; ++i) {
        if (outs[1 + i].dtype() != carried[i].dtype())
          throw UserError(where + ": loop-carried value " + std::to_string(i) + " changes dtype");
        carried[i] = outs[1 + i];
      }
      for (size_t i = 0; i < n_scan; ++i) {
        scan_elements += outs[1 + n_carried + i].numel();
        if (scan_elements > opt.onnx.max_elements)
          throw UserError(where + ": the scan outputs exceed the limit of " + std::to_string(opt.onnx.max_elements) + " elements");
        scans[i].push_back(outs[1 + n_carried + i]);
      }
    }
    std::vector<HostTensor> r = carried;
    for (size_t i = 0; i < n_scan; ++i) {
      if (!scans[i].empty()) {
        r.push_back(stack_host(scans[i], where, i));
        continue;
      }
      // zero iterations: [0, declared shape…] when the body declares a static shape
      const auto& vi = body.output(static_cast<int>(1 + n_carried + i));
      const auto& tt = vi.type().tensor_type();
      std::vector<int64_t> shape{0};
      bool known = tt.has_shape() && dtype_from_onnx(tt.elem_type());
      if (known)
        for (const auto& d : tt.shape().dim()) {
          known &= d.has_dim_value();
          shape.push_back(d.dim_value());
        }
      if (!known) throw OnnxUnsupported(where + ": a Loop of zero iterations whose scan output has no static shape");
      r.push_back(HostTensor(*dtype_from_onnx(tt.elem_type()), shape));
    }
    return r;
  }

  // Scan (opset 9+) too long to unroll: the body runs once per position along the scan
  // axes, a program of its own (a StagedOnnx graph run); scan outputs stack on the host.
  // Every iteration counts against StagedOptions::max_loop_iterations.
  std::vector<HostTensor> run_scan(const onnx::NodeProto& np, const std::string& where, const HostValues& reads, int depth) {
    if (opset < 9) throw OnnxUnsupported(where + ": a Scan (opset 8) too long to unroll");
    const onnx::GraphProto& body = graph_attr(np, "body", where);
    auto ints = [&](const char* name) {
      std::vector<int64_t> v;
      for (const auto& a : np.attribute())
        if (a.name() == name) v.assign(a.ints().begin(), a.ints().end());
      return v;
    };
    int64_t n_in = -1;
    for (const auto& a : np.attribute())
      if (a.name() == "num_scan_inputs") n_in = a.i();
    const size_t total = static_cast<size_t>(np.input_size());
    if (n_in < 1 || static_cast<size_t>(n_in) > total) throw UserError(where + ": num_scan_inputs must be in [1, number of inputs]");
    const size_t n_state = total - static_cast<size_t>(n_in);
    std::vector<HostTensor> state, xs;
    for (size_t i = 0; i < total; ++i) {
      const std::string& name = np.input(static_cast<int>(i));
      if (name.empty()) throw UserError(where + ": input " + std::to_string(i) + " is empty");
      (i < n_state ? state : xs).push_back(reads.at(name));
    }
    std::vector<int64_t> in_axes = ints("scan_input_axes"), in_dirs = ints("scan_input_directions");
    if (in_axes.empty()) in_axes.assign(xs.size(), 0);
    if (in_dirs.empty()) in_dirs.assign(xs.size(), 0);
    if (in_axes.size() != xs.size() || in_dirs.size() != xs.size())
      throw UserError(where + ": scan_input_axes / directions have the wrong length");
    int64_t T = -1;
    std::vector<int> axes;
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t r = static_cast<int64_t>(xs[i].rank());
      int64_t a = in_axes[i] < 0 ? in_axes[i] + r : in_axes[i];
      if (a < 0 || a >= r) throw UserError(where + ": scan_input_axes entry " + std::to_string(in_axes[i]) + " is out of range for rank " + std::to_string(r));
      axes.push_back(static_cast<int>(a));
      const int64_t n = xs[i].shape()[static_cast<size_t>(a)];
      if (T >= 0 && n != T) throw UserError(where + ": scan inputs differ in length along their scan axes");
      T = n;
    }
    if (T > opt.max_loop_iterations)
      throw UserError(where + ": a Scan of " + std::to_string(T) + " iterations exceeds the limit of " +
                      std::to_string(opt.max_loop_iterations) + " (StagedOptions::max_loop_iterations)");
    if (body.input_size() != static_cast<int>(total))
      throw UserError(where + ": the body takes " + std::to_string(body.input_size()) + " inputs, the Scan gives " + std::to_string(total));
    if (body.output_size() < static_cast<int>(n_state)) throw UserError(where + ": the body has too few outputs");
    const size_t n_out = static_cast<size_t>(body.output_size()) - n_state;
    if (static_cast<size_t>(np.output_size()) != n_state + n_out)
      throw UserError(where + ": the node has " + std::to_string(np.output_size()) + " outputs, the body gives " + std::to_string(n_state + n_out));
    std::vector<int64_t> out_axes = ints("scan_output_axes"), out_dirs = ints("scan_output_directions");
    if (out_axes.empty()) out_axes.assign(n_out, 0);
    if (out_dirs.empty()) out_dirs.assign(n_out, 0);
    if (out_axes.size() != n_out || out_dirs.size() != n_out) throw UserError(where + ": scan_output_axes / directions have the wrong length");
    HostValues outer;
    for (const std::string& name : free_names(body))
      if (auto it = reads.find(name); it != reads.end()) outer[name] = it->second;
    std::vector<std::vector<HostTensor>> ys(n_out);
    int64_t scan_elements = 0;
    for (int64_t t = 0; t < T; ++t) {
      HostValues h = outer;
      for (size_t i = 0; i < n_state; ++i) h[body.input(static_cast<int>(i)).name()] = state[i];
      for (size_t i = 0; i < xs.size(); ++i)
        h[body.input(static_cast<int>(n_state + i)).name()] = take_along(xs[i], axes[i], in_dirs[i] ? T - 1 - t : t);
      std::vector<HostTensor> outs = run_graph(body, std::move(h), depth, where + " > ");
      ++stats.iterations;
      for (size_t i = 0; i < n_state; ++i) {
        if (outs[i].dtype() != state[i].dtype())
          throw UserError(where + ": state " + std::to_string(i) + " changes dtype from " + std::string(dtype_name(state[i].dtype())) +
                          " to " + std::string(dtype_name(outs[i].dtype())));
        state[i] = outs[i];
      }
      for (size_t i = 0; i < n_out; ++i) {
        const HostTensor& y = outs[n_state + i];
        scan_elements += y.numel();
        if (scan_elements > opt.onnx.max_elements)
          throw UserError(where + ": the scan outputs exceed the limit of " + std::to_string(opt.onnx.max_elements) + " elements");
        if (!ys[i].empty() && (y.shape() != ys[i][0].shape() || y.dtype() != ys[i][0].dtype()))
          throw UserError(where + ": scan output " + std::to_string(i) + " changes shape between iterations");
        ys[i].push_back(y);
      }
    }
    std::vector<HostTensor> r = state;
    for (size_t i = 0; i < n_out; ++i) {
      if (ys[i].empty()) throw OnnxUnsupported(where + ": a Scan of length 0 with scan outputs");
      if (out_dirs[i]) std::reverse(ys[i].begin(), ys[i].end());
      const int64_t rank = static_cast<int64_t>(ys[i][0].rank()) + 1;
      int64_t a = out_axes[i] < 0 ? out_axes[i] + rank : out_axes[i];
      if (a < 0 || a >= rank) throw UserError(where + ": scan_output_axes entry " + std::to_string(out_axes[i]) + " is out of range for rank " + std::to_string(rank));
      r.push_back(stack_along(ys[i], static_cast<int>(a)));
    }
    return r;
  }

  std::vector<HostTensor> run_if(const onnx::NodeProto& np, const std::string& where, const HostValues& reads, int depth) {
    const HostTensor& c = reads.at(np.input(0));
    if (c.numel() != 1) throw UserError(where + ": the condition must hold one value, got shape " + c.shape_string());
    const onnx::GraphProto& branch = graph_attr(np, c.get_f64(0) != 0 ? "then_branch" : "else_branch", where);
    HostValues outer;
    for (const std::string& name : free_names(branch))
      if (auto it = reads.find(name); it != reads.end()) outer[name] = it->second;
    std::vector<HostTensor> r = run_graph(branch, std::move(outer), depth, where + " > ");
    if (r.size() != static_cast<size_t>(np.output_size()))
      throw UserError(where + ": the branch returns " + std::to_string(r.size()) + " outputs for " + std::to_string(np.output_size()));
    return r;
  }
};

StagedOnnx::StagedOnnx(const std::string& path, StagedOptions opt, SegmentRunner run) : impl_(std::make_unique<Impl>()) {
  impl_->model = read_model_file(path);
  init(path, std::move(opt), std::move(run));
}

StagedOnnx::StagedOnnx(const void* data, size_t size, const std::string& name, StagedOptions opt, SegmentRunner run)
    : impl_(std::make_unique<Impl>()) {
  impl_->model = read_model_bytes(data, size, name);
  init(name, std::move(opt), std::move(run));
}

void StagedOnnx::init(const std::string& path, StagedOptions opt, SegmentRunner run) {
  impl_->path = path;
  impl_->opt = std::move(opt);
  impl_->runner = std::move(run);
  if (!impl_->model.has_graph()) throw UserError(path + ": the model has no graph");
  impl_->opset = model_opset_of(impl_->model, path);
  if (impl_->model.graph().sparse_initializer_size()) throw OnnxUnsupported(path + ": sparse initializers are not supported");
}

StagedOnnx::~StagedOnnx() = default;

const StagedStats& StagedOnnx::stats() const { return impl_->stats; }

std::map<std::string, std::vector<int64_t>> StagedOnnx::input_dims() const {
  std::map<std::string, std::vector<int64_t>> r;
  for (const auto& vi : impl_->model.graph().input()) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
    std::vector<int64_t>& dims = r[vi.name()];
    for (const auto& d : vi.type().tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  return r;
}

std::map<std::string, DType> StagedOnnx::input_dtypes() const {
  std::map<std::string, DType> r;
  for (const auto& vi : impl_->model.graph().input())
    if (vi.type().has_tensor_type())
      if (auto dt = dtype_from_onnx(vi.type().tensor_type().elem_type())) r[vi.name()] = *dt;
  return r;
}

TensorMap StagedOnnx::run(const TensorMap& inputs) {
  const onnx::GraphProto& g = impl_->model.graph();
  HostValues host = check_inputs(inputs);
  std::vector<HostTensor> outs = impl_->run_graph(g, std::move(host), 0, "");
  TensorMap r;
  for (int i = 0; i < g.output_size(); ++i) r[g.output(i).name()] = outs[static_cast<size_t>(i)];
  return r;
}

TensorMap StagedOnnx::check_inputs(const TensorMap& inputs) const {
  const onnx::GraphProto& g = impl_->model.graph();
  const std::string& file = impl_->path;
  std::set<std::string> inits;
  for (const auto& t : g.initializer()) inits.insert(t.name());
  HostValues host;
  for (const auto& vi : g.input()) {
    auto it = inputs.find(vi.name());
    if (inits.count(vi.name()) && it == inputs.end()) continue;  // an initializer listed as an input
    std::string what = file + ": graph input '" + vi.name() + "'";
    if (!vi.type().has_tensor_type()) throw OnnxUnsupported(what + " is not a tensor (not supported in a staged run)");
    const auto& tt = vi.type().tensor_type();
    DType dt = require_dtype(tt.elem_type(), what);
    if (it == inputs.end()) throw UserError("missing input '" + vi.name() + "'");
    const HostTensor& t = it->second;
    if (t.dtype() != dt)
      throw UserError("input '" + vi.name() + "' has dtype " + std::string(dtype_name(t.dtype())) + ", the model declares " +
                      std::string(dtype_name(dt)));
    if (tt.has_shape()) {
      if (tt.shape().dim_size() != static_cast<int>(t.rank()))
        throw UserError("input '" + vi.name() + "' has shape " + t.shape_string() + ", the model declares rank " +
                        std::to_string(tt.shape().dim_size()));
      for (int d = 0; d < tt.shape().dim_size(); ++d)
        if (tt.shape().dim(d).has_dim_value() && tt.shape().dim(d).dim_value() != t.shape()[static_cast<size_t>(d)])
          throw UserError("input '" + vi.name() + "' has shape " + t.shape_string() + ", the model declares dim " +
                          std::to_string(d) + " = " + std::to_string(tt.shape().dim(d).dim_value()));
    }
    host[vi.name()] = t;
  }
  return host;
}

}  // namespace lathe
