// app_actions.cpp — compile / adopt / profile / run commands of the app (see app_actions.h).
//
// [SECTION] compile and adopt
// [SECTION] profile
// [SECTION] run and node statistics
// [SECTION] names
#include "views/app_actions.h"

#include <regex>

#include "views/display_graph.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>

#include "core/interp/interp.h"
#include "core/ir/dot.h"
#include "core/runtime/random.h"

namespace lathe::views {

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

namespace {

// The old synchronous path, for a build without ProgramHooks::build.
bool compile_through_command_layer(AppState& s, const std::string& backend) {
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

bool refuse_when_busy(AppState& s, const char* what) {
  if (!s.jobs.busy()) return false;
  s.warn(std::string(what) + ": wait for the running job (" + s.jobs.label() + ") to finish");
  return true;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool start_compile(AppState& s, const std::string& backend) {
  if (!s.has_graph) {
    s.warn("nothing to compile: no graph is open");
    return false;
  }
  if (refuse_when_busy(s, "compile")) return false;
  if (!s.hooks.build) return compile_through_command_layer(s, backend);
  Graph g = s.graph;   // a snapshot: rewrite steps may go on while it compiles
  uint64_t document = s.document, version = s.version;
  auto build = s.hooks.build;
  std::string with = backend.empty() ? "" : " with " + backend;
  return s.jobs.start("compile", "compiling" + with, "compile failed" + (backend.empty() ? "" : " (" + backend + ")"),
                      [g = std::move(g), backend, build, document, version]() -> JobRunner::Apply {
                        auto t0 = std::chrono::steady_clock::now();
                        BuiltProgram bp = build(g, backend);
                        double secs = seconds_since(t0);
                        return [bp, document, version, secs](AppState& s) {
                          if (s.document != document) {
                            s.warn("compile finished after another graph was opened: result dropped");
                            return;
                          }
                          if (s.hooks.publish) s.hooks.publish(bp);
                          adopt_program(s, bp.exe, static_cast<int64_t>(version));
                          char line[96];
                          std::snprintf(line, sizeof line, "compile took %.2f s%s", secs,
                                        version != s.version ? " (the graph changed meanwhile: Recompile to update)" : "");
                          s.info(line);
                        };
                      });
}

bool finish_job(AppState& s) {
  if (!s.jobs.busy()) return true;
  s.jobs.wait();
  s.jobs.poll(s);
  return s.jobs.last_error.empty();
}

bool compile_shown(AppState& s, const std::string& backend) {
  finish_job(s);
  if (!s.hooks.build) return compile_through_command_layer(s, backend);
  uint64_t before = s.jobs.finished;
  if (!start_compile(s, backend)) return false;
  return finish_job(s) && s.jobs.finished > before && s.compiled != nullptr;
}

void adopt_program(AppState& s, std::shared_ptr<Executable> exe, int64_t version) {
  s.seen_program = exe.get();
  if (!exe || (s.compiled && s.compiled->exe == exe)) return;
  auto c = std::make_shared<Compiled>();
  c->exe = exe;
  c->backend = exe->backend();
  c->graph_version = version < 0 ? s.version : static_cast<uint64_t>(version);
  const Program& p = exe->program();
  c->text.resize(p.kg.kernels.size());
  for (size_t k = 0; k < p.kg.kernels.size(); ++k)
    for (NodeRef n : p.kg.kernels[k].nodes) c->kernel_of.emplace(n->id, static_cast<int>(k));
  c->serial = (s.compiled ? s.compiled->serial : 0) + 1;
  s.compiled = std::move(c);
  s.info("compiled with " + s.compiled->backend + ": " + std::to_string(s.compiled->num_kernels()) + (s.compiled->num_kernels() == 1 ? " kernel" : " kernels"));
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

bool start_profile(AppState& s, int iters) {
  if (!s.compiled) {
    s.warn("profile: compile first (Compile in the Kernels panel, or :compile)");
    return false;
  }
  if (refuse_when_busy(s, "profile")) return false;
  iters = std::clamp(iters, 1, 10000);
  std::shared_ptr<Compiled> c = s.compiled;   // the worker runs c->exe; the UI only reads it
  char label[64];
  std::snprintf(label, sizeof label, "profiling %d kernels × %d runs", c->num_kernels(), iters);
  return s.jobs.start("profile", label, "profile failed", [c, iters]() -> JobRunner::Apply {
    std::string note;
    TensorMap in = default_inputs(c->program().graph, &note);
    auto report = std::make_shared<ProfileReport>(c->exe->profile(in, iters));
    return [c, iters, note, report](AppState& s) {
      if (s.compiled != c) {
        s.warn("profile finished after the program was replaced: result dropped");
        return;
      }
      c->profile = std::move(*report);
      ++c->serial;
      s.color_mode = ColorMode::Heat;   // where the time goes; the toolbar switches back
      char line[160];
      std::snprintf(line, sizeof line, "profiled %d kernels × %d runs: %.4g ms per run%s%s",
                    static_cast<int>(c->profile->kernels.size()), iters, c->profile->total_ms,
                    note.empty() ? "" : "; dims ", note.c_str());
      s.info(line);
    };
  });
}

bool profile_compiled(AppState& s, int iters) {
  finish_job(s);
  uint64_t before = s.jobs.finished;
  if (!start_profile(s, iters)) return false;
  return finish_job(s) && s.jobs.finished > before && s.compiled && s.compiled->profile;
}

//-----------------------------------------------------------------------------
// [SECTION] run and node statistics
//-----------------------------------------------------------------------------

bool start_run(AppState& s) {
  if (!s.has_graph) return false;
  if (refuse_when_busy(s, "run")) return false;
  Graph g = s.graph;
  uint64_t version = s.version;
  return s.jobs.start("run", "running the interpreter", "run failed", [g = std::move(g), version]() -> JobRunner::Apply {
    auto rv = std::make_shared<RunValues>();
    rv->graph_version = version;
    std::string dims;
    rv->inputs = default_inputs(g, &dims);
    rv->note = "random inputs (seed 0)" + (dims.empty() ? "" : ", " + dims);
    // Evaluate the outputs once now, so a graph that cannot run fails here, visibly.
    interpret(g, rv->inputs);
    return [rv](AppState& s) {
      if (s.version != rv->graph_version) {
        s.warn("run finished after the graph changed: run again to see this graph's values");
        return;
      }
      s.run = std::move(*rv);
      s.info("ran the graph on " + s.run->note + ": select a node to see its values");
    };
  });
}

bool run_values(AppState& s) {
  finish_job(s);
  uint64_t before = s.jobs.finished;
  if (!start_run(s)) return false;
  return finish_job(s) && s.jobs.finished > before && s.run && s.run->graph_version == s.version;
}

bool start_quant_error(AppState& s, const std::string& backend) {
  if (!s.has_graph || !s.quant_float) {
    s.warn("quantization error: the graph shown does not come from a quantize step (Timeline > Quantize…, :quantize)");
    return false;
  }
  if (refuse_when_busy(s, "quantization error")) return false;
  Graph before = *s.quant_float, after = s.graph;
  uint64_t version = s.version;
  std::function<BuiltProgram(const Graph&, const std::string&)> build = s.hooks.build;
  std::string label = "measuring the quantization error" + (backend.empty() ? "" : " on " + backend);
  return s.jobs.start("quant_error", label, "quantization error failed",
                      [before = std::move(before), after = std::move(after), version, build, backend]() -> JobRunner::Apply {
    auto r = std::make_shared<AppState::QuantErrors>();
    r->version = version;
    auto used = std::make_shared<std::string>("interp");
    Evaluator eval;   // the interpreter, unless a backend compiles the graphs
    if (backend != "interp" && build)
      eval = [build, backend, used](const Graph& g, const TensorMap& in) {
        BuiltProgram b = build(g, backend);
        *used = b.backend;
        return b.exe->run(in);
      };
    r->errors = quantization_error(before, after, 0, eval);
    r->backend = *used;
    return [r](AppState& s) {
      if (s.version != r->version) {
        s.warn("the quantization error was measured on a graph no longer shown: measure again");
        return;
      }
      std::string line = "quantization error (" + s.quant_step + ", seeded inputs, " + r->backend + "):";
      char buf[96];
      for (const QuantError& e : r->errors) {
        std::snprintf(buf, sizeof buf, " %s max|d|/max|ref| %.4g cosine %.6f;", e.output.c_str(), e.rel_max, e.cosine);
        line += buf;
      }
      s.info(line);
      s.quant_errors = std::move(*r);
    };
  });
}

bool measure_quant_error(AppState& s, const std::string& backend) {
  finish_job(s);
  uint64_t before = s.jobs.finished;
  if (!start_quant_error(s, backend)) return false;
  return finish_job(s) && s.jobs.finished > before && s.quant_errors && s.quant_errors->version == s.version;
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

namespace {

std::string folded(std::string t) {
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t;
}

}  // namespace

std::vector<uint32_t> find_nodes(const AppState& s, const std::string& text, bool regex) {
  std::vector<uint32_t> exact, partial;
  if (text.empty()) return exact;
  const std::string q = folded(text);
  std::string id_text = !q.empty() && q[0] == '%' ? q.substr(1) : q;
  std::optional<std::regex> re;
  if (regex) try {
      re.emplace(text, std::regex::icase | std::regex::optimize);
    } catch (const std::regex_error&) {
      // not a regex: substrings only
    }
  for (NodeRef n : s.topo) {
    auto out = s.output_name.find(n);
    std::vector<std::string> names;   // what a user calls this node
    if (n->op == Op::Input) names.push_back(n->attrs.name);
    if (out != s.output_name.end()) {
      std::string all = out->second;   // "a, b": each name on its own
      for (size_t p = 0; p <= all.size();) {
        size_t c = all.find(", ", p);
        names.push_back(all.substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (c == std::string::npos) break;
        p = c + 2;
      }
    }
    bool is_exact = id_text == std::to_string(n->id);
    for (auto& nm : names) is_exact = is_exact || folded(nm) == q;
    const std::string& path = n->prov.path;
    if (!is_exact && !path.empty()) {
      std::string fp = folded(path);
      is_exact = fp == q || folded(scope_title(path)) == q;
    }
    if (is_exact) {
      exact.push_back(n->id);
      continue;
    }
    std::string summary = node_summary(n), type = node_type(n);
    bool m = folded(summary).find(q) != std::string::npos || folded(type).find(q) != std::string::npos ||
             folded(path).find(q) != std::string::npos;
    for (auto& nm : names) m = m || folded(nm).find(q) != std::string::npos;
    if (!m && re) m = std::regex_search(summary, *re) || std::regex_search(path, *re);
    if (m) partial.push_back(n->id);
  }
  exact.insert(exact.end(), partial.begin(), partial.end());
  return exact;
}

int find_node(const AppState& s, const std::string& text) {
  auto hits = find_nodes(s, text);
  return hits.empty() ? -1 : static_cast<int>(hits.front());
}

}  // namespace lathe::views
