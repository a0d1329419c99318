// app_actions.cpp — compile / adopt / profile / run commands of the app (see app_actions.h).
//
// [SECTION] compile and adopt
// [SECTION] profile
// [SECTION] run and node statistics
// [SECTION] names
#include "views/app_actions.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "core/interp/interp.h"
#include "core/ir/dot.h"
#include "core/runtime/random.h"

namespace lathe::views {

namespace {

// Runs f; a thrown error becomes the error panel's content and a log line.
template <class F>
bool guarded(AppState& s, const std::string& what, F&& f) {
  try {
    f();
    return true;
  } catch (const UserError& e) {
    s.error = LoadError{what, e.diag(), ""};
  } catch (const std::exception& e) {
    s.error = LoadError{what, Diagnostic{e.what()}, ""};
  }
  s.fail(what + ": " + s.error->diag.format());
  return false;
}

}  // namespace

double Compiled::kernel_ms(int k) const {
  if (!profile || k < 0 || k >= static_cast<int>(profile->kernels.size())) return -1;
  return profile->kernels[k].median_ms;
}

double Compiled::max_kernel_ms() const {
  double m = 0;
  if (profile)
    for (auto& kp : profile->kernels) m = std::max(m, kp.median_ms);
  return m;
}

//-----------------------------------------------------------------------------
// [SECTION] compile and adopt
//-----------------------------------------------------------------------------

bool compile_shown(AppState& s, const std::string& backend) {
  if (!s.has_graph) {
    s.warn("nothing to compile: no graph is open");
    return false;
  }
  if (!s.hooks.compile) {
    s.error = LoadError{"cannot compile", Diagnostic{"compiling needs the scripting layer and a backend, which are not in this build"}, ""};
    s.fail(s.error->diag.message);
    return false;
  }
  std::string err = s.hooks.compile(backend);
  if (!err.empty()) {
    s.error = LoadError{"compile failed" + (backend.empty() ? "" : " (" + backend + ")"), Diagnostic{err}, ""};
    s.fail("compile: " + err);
    return false;
  }
  poll_program(s);
  if (!s.compiled) {
    s.fail("compile: the command layer has no program afterwards");
    return false;
  }
  return true;
}

void adopt_program(AppState& s, std::shared_ptr<Executable> exe) {
  s.seen_program = exe.get();
  if (!exe || (s.compiled && s.compiled->exe == exe)) return;
  auto c = std::make_shared<Compiled>();
  c->exe = exe;
  c->backend = exe->backend();
  c->graph_version = s.version;
  const Program& p = exe->program();
  c->text.resize(p.kg.kernels.size());
  for (size_t k = 0; k < p.kg.kernels.size(); ++k)
    for (NodeRef n : p.kg.kernels[k].nodes) c->kernel_of.emplace(n->id, static_cast<int>(k));
  c->serial = (s.compiled ? s.compiled->serial : 0) + 1;
  s.compiled = std::move(c);
  s.info("compiled with " + s.compiled->backend + ": " + std::to_string(s.compiled->num_kernels()) + " kernels");
  s.selected_kernel = -1;
  if (s.selected >= 0) s.select_node(s.selected);   // picks the kernel of the selected node
  s.color_mode = ColorMode::Kernel;   // what compiling is for; the toolbar switches back
}

void poll_program(AppState& s) {
  if (!s.hooks.program) return;
  std::shared_ptr<Executable> exe;
  try {
    exe = s.hooks.program();
  } catch (const std::exception&) {
    return;
  }
  if (exe.get() != s.seen_program) adopt_program(s, std::move(exe));
}

//-----------------------------------------------------------------------------
// [SECTION] profile
//-----------------------------------------------------------------------------

TensorMap default_inputs(const Graph& g, std::string* note) {
  Bindings b;
  for (const std::string& sym : g.symbols()) {
    b[sym] = 64;
    if (note) *note += (note->empty() ? "" : " ") + sym + "=64";
  }
  TensorMap in;
  for (auto& [name, t] : random_inputs(g, 0, b)) in[name] = t;
  return in;
}

bool profile_compiled(AppState& s, int iters) {
  if (!s.compiled) {
    s.warn("profile: compile first (Compile in the Kernels panel, or :compile)");
    return false;
  }
  iters = std::clamp(iters, 1, 10000);
  return guarded(s, "profile failed", [&] {
    std::string note;
    TensorMap in = default_inputs(s.compiled->program().graph, &note);
    ProfileReport r = s.compiled->exe->profile(in, iters);
    s.compiled->profile = std::move(r);
    ++s.compiled->serial;
    s.color_mode = ColorMode::Heat;   // where the time goes; the toolbar switches back
    char line[160];
    std::snprintf(line, sizeof line, "profiled %d kernels × %d runs: %.4g ms per run%s%s",
                  static_cast<int>(s.compiled->profile->kernels.size()), iters, s.compiled->profile->total_ms,
                  note.empty() ? "" : "; dims ", note.c_str());
    s.info(line);
  });
}

//-----------------------------------------------------------------------------
// [SECTION] run and node statistics
//-----------------------------------------------------------------------------

bool run_values(AppState& s) {
  if (!s.has_graph) return false;
  return guarded(s, "run failed", [&] {
    RunValues rv;
    rv.graph_version = s.version;
    std::string dims;
    rv.inputs = default_inputs(s.graph, &dims);
    rv.note = "random inputs (seed 0)" + (dims.empty() ? "" : ", " + dims);
    s.run = std::move(rv);
    // Evaluate the outputs once now, so a graph that cannot run fails here, visibly.
    interpret(s.graph, s.run->inputs);
    s.info("ran the graph on " + s.run->note + ": select a node to see its values");
  });
}

namespace {

NodeStats compute_stats(const AppState& s, NodeRef n) {
  NodeStats st;
  st.dtype_shape = std::string(dtype_name(n->dtype)) + " " + shape_to_string(n->shape);
  Graph sub;
  sub.inputs = s.graph.inputs;
  sub.outputs = {{"value", n}};
  HostTensor t;
  try {
    t = interpret(sub, s.run->inputs).at("value");
  } catch (const UserError& e) {
    st.error = e.diag().format();
    return st;
  } catch (const std::exception& e) {
    st.error = e.what();
    return st;
  }
  st.count = t.numel();
  double sum = 0, sq = 0;
  int64_t finite = 0;
  st.min = INFINITY, st.max = -INFINITY;
  for (int64_t i = 0; i < st.count; ++i) {
    double v = t.get_f64(i);
    if (std::isnan(v)) { ++st.nans; continue; }
    if (std::isinf(v)) { ++st.infs; continue; }
    ++finite;
    sum += v, sq += v * v;
    st.min = std::min(st.min, v), st.max = std::max(st.max, v);
  }
  if (finite == 0) st.min = st.max = 0;
  st.mean = finite ? sum / finite : 0;
  st.stddev = finite ? std::sqrt(std::max(0.0, sq / finite - st.mean * st.mean)) : 0;
  st.hist.assign(24, 0);
  double w = st.max - st.min;
  for (int64_t i = 0; i < st.count; ++i) {
    double v = t.get_f64(i);
    if (!std::isfinite(v)) continue;
    int b = w > 0 ? static_cast<int>((v - st.min) / w * 24) : 12;
    ++st.hist[std::clamp(b, 0, 23)];
  }
  for (int64_t i = 0; i < std::min<int64_t>(st.count, 8); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", t.get_f64(i));
    st.preview += (i ? ", " : "") + std::string(buf);
  }
  if (st.count > 8) st.preview += ", …";
  st.ok = true;
  return st;
}

}  // namespace

const NodeStats* node_stats(AppState& s, uint32_t id) {
  if (!s.run || s.run->graph_version != s.version) return nullptr;
  auto it = s.run->stats.find(id);
  if (it != s.run->stats.end()) return &it->second;
  NodeRef n = node_by_id(id);
  if (!n || !s.topo_index.count(n)) return nullptr;
  return &s.run->stats.emplace(id, compute_stats(s, n)).first->second;
}

//-----------------------------------------------------------------------------
// [SECTION] names
//-----------------------------------------------------------------------------

const char* level_name(Level l) {
  return l == Level::Tensor ? "tensor" : l == Level::Primitive ? "primitive" : "kernel";
}

std::optional<Level> level_from_name(const std::string& n) {
  if (n == "tensor") return Level::Tensor;
  if (n == "primitive") return Level::Primitive;
  if (n == "kernel") return Level::Kernel;
  return std::nullopt;
}

const char* color_mode_name(ColorMode m) {
  return m == ColorMode::Category ? "category" : m == ColorMode::Kernel ? "kernel" : "heat";
}

std::optional<ColorMode> color_mode_from_name(const std::string& n) {
  if (n == "category") return ColorMode::Category;
  if (n == "kernel") return ColorMode::Kernel;
  if (n == "heat") return ColorMode::Heat;
  return std::nullopt;
}

int find_node(const AppState& s, const std::string& text) {
  for (NodeRef n : s.topo) {
    auto out = s.output_name.find(n);
    if (node_summary(n).find(text) != std::string::npos || (n->op == Op::Input && n->attrs.name == text) ||
        (out != s.output_name.end() && out->second == text))
      return static_cast<int>(n->id);
  }
  return -1;
}

}  // namespace lathe::views
