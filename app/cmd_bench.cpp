// cmd_bench.cpp — `lathe bench [--backend B] [--json] [--only NAME] [--iters N]`: the
// benchmark suite of SPEC.md. Each workload runs after a warm-up; the median of repeated
// runs gives time, GFLOP/s and GB/s (bytes = inputs read once + outputs written once), the
// share of the machine's measured ceiling, and the ratio to an in-process peer:
//   eltwise, softmax, layernorm → a STREAM triad loop moving the same bytes;
//   matmul → OpenBLAS cblas_sgemm, loaded with dlopen after setting OPENBLAS_CORETYPE to
//            SkylakeX (Debian's 0.3.21 does not recognize Zen 5 and would use AVX2 kernels).
// On a device backend (cuda) the peers are the device's: a device-to-device copy for the
// memory-bound workloads, cuBLAS sgemm for matmul, and the f32 peak from its attributes;
// times are whole-program runs with the inputs resident on the device (no transfers).
#include <CLI/CLI.hpp>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/bench_models.h"
#include "app/cli.h"
#include "app/commands.h"
#include "backends/backend.h"
#include "backends/library.h"
#include "backends/tune_measure.h"
#include "core/frontend/autodiff.h"
#include "core/frontend/samples.h"
#include "core/frontend/tensor.h"
#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/loop/cost.h"
#include "core/runtime/machine.h"
#include "core/rewrite/bench_graph.h"
#include "core/rewrite/quantize.h"
#include "core/frontend/nn.h"
#include "core/rewrite/session.h"
#include "core/runtime/random.h"
#ifdef HAVE_LATHE_SCRIPTING
#include "scripting/engine.h"
#include "scripting/rules_lua.h"
#endif

namespace lathe::app {
namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  std::string name, backend, status = "ok", note;
  double median_ms = 0, gflops = 0, gbps = 0, ceiling_ratio = 0;
  std::string peer;
  double peer_median_ms = 0, peer_ratio = 0;
  double warm_ms = -1;
  double arena_mb = -1;  // the program's planned intermediate memory (attention-long)
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double sgemm_ms(int n, int iters) {
  SgemmFn f = openblas_sgemm(nullptr);
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  std::vector<double> t;
  for (int i = 0; i < iters + 2; ++i) {
    auto t0 = Clock::now();
    f(101, 111, 111, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // row-major, no transposes
    if (i >= 2) t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(t);
}

// A built-in rule set (assets/rules/NAME.lua), loaded through the Lua layer as users do.
Ruleset builtin_rules(const std::string& name) {
#ifdef HAVE_LATHE_SCRIPTING
  static script::Engine* engine = new script::Engine();  // rules call back into it: keep it alive
  return script::load_rules_file(engine->L(), script::builtin_rules_path(name));
#else
  throw UserError("the built-in rule sets are Lua files; this lathe was built without the Lua layer");
#endif
}

// attention-grad: one causal attention's backward (12 heads, T = $LATHE_BENCH_ATTENTION_T or
// 1024, d 64, f32): dQ, dK, dV of sum(attention(q, k, v) · w) by the fused backward, or with
// `definition` by differentiating the op's definition (LATHE_ATTENTION_BWD=unfused: the L×S
// matrices materialized), its peer.
Graph attention_grad_graph(bool definition) {
  int64_t T = 1024;
  if (const char* e = std::getenv("LATHE_BENCH_ATTENTION_T"); e && *e) T = std::atoll(e);
  if (T < 1 || T > 65536) throw UserError("LATHE_BENCH_ATTENTION_T must be in 1..65536");
  Tensor q = input("q", {1, 12, T, 64}), k = input("k", {1, 12, T, 64}), v = input("v", {1, 12, T, 64}), w = input("w", {1, 12, T, 64});
  Tensor y(attention_call(q.node(), k.node(), v.node(), nullptr, true, 0.125));
  const char* prev = std::getenv("LATHE_ATTENTION_BWD");
  std::string saved = prev ? prev : "";
  if (definition) setenv("LATHE_ATTENTION_BWD", "unfused", 1);
  else unsetenv("LATHE_ATTENTION_BWD");
  auto g = grad(sum(y * w), {q, k, v});
  if (prev) setenv("LATHE_ATTENTION_BWD", saved.c_str(), 1);
  else unsetenv("LATHE_ATTENTION_BWD");
  return Graph::from_outputs({{"dq", g[0].node()}, {"dk", g[1].node()}, {"dv", g[2].node()}});
}

// gemv, gemv-int8, gemv-int4: a batch-1 matrix-vector product with GPT-2's head size, y[1, 50257]
// = x[1, 768] · W^T, W a constant [50257, 768] f32 (seeded uniform values in ±0.05), or W
// quantized by `lathe quantize --mode weight-int8 --per-channel` / `--mode weight-int4`
// (packed two a byte, blocks of 32, the gemv_q4 kernel). Memory-bound: the bytes counted
// are the weight's as stored (constants included), x and y. gemv-int4's peer is the read
// bandwidth measured in the same run (issue 18: at least 60% of it), gemv-int8's the f32 gemv.
// gemv-int4-big: the same kernel on a weight past the last-level cache, y[1, 50257] =
// x[1, 4096] · W^T (a 4096-wide model's vocabulary head): 103 MB packed + 25.7 MB of f32
// block scales. The packed weight and scales are seeded random bytes and scales built in
// the kernel's layout (its f32 original would take 823 MB); its peer is the read bandwidth.
bool is_gemv(const std::string& name) {
  return name == "gemv" || name == "gemv-int8" || name == "gemv-int4" || name == "gemv-int4-big";
}

Graph gemv_int4_big_graph() {
  const int64_t K = 4096, N = 50257, B = 32;
  HostTensor w(DType::U8, {N, K / 2}), sc(DType::F32, {N, K / B});
  uint64_t st = 0x9E3779B97F4A7C15ull;
  auto next = [&] { return st ^= st << 13, st ^= st >> 7, st ^= st << 17; };
  uint64_t* wp = reinterpret_cast<uint64_t*>(w.ptr<uint8_t>());
  for (int64_t i = 0; i < N * K / 16; ++i) wp[i] = next();
  float* sp = sc.ptr<float>();
  for (int64_t i = 0; i < N * (K / B); ++i) sp[i] = static_cast<float>((next() >> 40) * (1e-3 / 16777216.0));
  NodeRef y = prim::extern_call("gemv_q4", {input("x", {1, K}).node(), from_host(w).node(), from_host(sc).node()}, DType::F32,
                                {SymInt(1), SymInt(N)}, {1, N, K, B});
  return Graph::from_outputs({{"y", y}});
}

Graph gemv_graph(const std::string& name) {
  if (name == "gemv-int4-big") return gemv_int4_big_graph();
  const int64_t K = 768, N = 50257;
  HostTensor w(DType::F32, {N, K});
  float* p = w.ptr<float>();
  uint64_t st = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < N * K; ++i) {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    p[i] = static_cast<float>((static_cast<double>(st >> 11) / 9007199254740992.0 - 0.5) * 0.1);
  }
  Graph g = Graph::from_outputs({{"y", linear(input("x", {1, K}), from_host(w)).node()}});
  if (name == "gemv") return g;
  QuantizeOptions o;
  o.mode = name == "gemv-int8" ? QuantMode::WeightInt8 : QuantMode::WeightInt4;
  o.per_channel = true;
  return quantize_graph(g, o).graph;
}

// The workload's graph; matmul-lib is matmul with the BLAS rule applied to a fixpoint,
// attention-long the sample with the flash-attention rules applied (its peer is the sample).
Graph workload_graph(const std::string& name) {
  if (name == "attention-grad") return attention_grad_graph(false);
  if (is_gemv(name)) return gemv_graph(name);
  if (name == "attention-long") {
    RewriteSession s(build_sample(name), builtin_rules("flash-attention"), SessionOptions{});
    s.run();
    for (NodeRef n : s.graph().toposort())
      if (n->op == Op::Extern) return s.graph();
    throw UserError("the flash-attention rule did not fire on the attention-long workload");
  }
  if (name != "matmul-lib") return build_sample(name);
  RewriteSession s(build_sample("matmul"), builtin_rules("blas"), SessionOptions{});
  s.run();
  for (NodeRef n : s.graph().toposort())
    if (n->op == Op::Extern) return s.graph();
  throw UserError("the BLAS rule did not fire on the matmul workload");
}

// The built-in simplify + fold sets to a fixpoint on a ~100k-node graph (issue 3's goal: 1 s).
Result bench_rewrite(const std::string& backend) {
  Result r;
  r.name = "rewrite";
  r.backend = backend;
  std::vector<Ruleset> rules{builtin_rules("simplify"), builtin_rules("fold")};
  Graph g = make_rewrite_benchmark_graph(112000, 42);
  size_t before = g.size();
  auto t0 = Clock::now();
  RewriteSession s(g, rules, SessionOptions{});
  s.run();
  r.median_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  r.note = std::to_string(before) + " -> " + std::to_string(s.graph().size()) + " nodes (one run, not a median)";
  return r;
}

// What the workloads are measured against: the CPU's (STREAM triad, OpenBLAS, the machine
// ceiling) or, for a device backend, the device's (copy bandwidth, cuBLAS, its f32 peak).
struct Peers {
  bool device = false;
  double bw_gbps = 0;          // the memory-bound peer's bandwidth
  std::string bw_name;         // "triad" / "device-copy"
  double ceil_gflops = 0, ceil_gbps = 0;
};

Result bench_graph(const std::string& name, const std::string& backend, int iters, const Peers& peers,
                   const std::vector<tune::Record>& tuned) {
  Result r;
  r.name = name;
  r.backend = backend;
  Graph g = workload_graph(name);
  Backend& b = get_backend(backend);
  if (auto why = b.supports_graph(g); !why.empty()) {
    r.status = "skip";
    r.note = why;
    return r;
  }
  TensorMap inputs = random_inputs(g, 1);
  std::vector<std::string> notes;
  Executable exe = compile_tuned(g, backend, tuned, &notes);
  for (auto& n : notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  bool long_attention = name == "attention-long" || name == "attention-grad";
  if (long_attention) iters = std::min(iters, 3);  // seconds per run for the unfused peer
  // gemv-int4's peer: the machine's read bandwidth now, a plain read of a buffer past the
  // last-level cache on every thread, best of the rounds before and after the kernel's runs
  double read_bw = 0;
  size_t read_bytes = std::max<size_t>(size_t(64) << 20, static_cast<size_t>(4 * last_level_cache_bytes()));
  // on the threads the kernel runs on: LATHE_POOL_THREADS=N caps gemv_q4's too
  int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* e = std::getenv("LATHE_POOL_THREADS"); e && std::atoi(e) > 0) hw = std::atoi(e);
  const bool int4 = name == "gemv-int4" || name == "gemv-int4-big";
  if (int4 && !peers.device) read_bw = read_gbps(hw, read_bytes, 5);
  r.median_ms = exe.time_ms(inputs, iters, long_attention ? 1 : 2);
  if (int4 && !peers.device) read_bw = std::max(read_bw, read_gbps(hw, read_bytes, 5));
  if (long_attention) r.arena_mb = static_cast<double>(exe.memory_plan().arena_bytes) / (1 << 20);
  double bytes = 0, flops = 0;
  for (auto& [n, t] : inputs) bytes += static_cast<double>(t.nbytes());
  for (auto& [n, node] : g.outputs) {
    double e = static_cast<double>(dtype_size(node->dtype));
    for (auto& d : node->shape) e *= static_cast<double>(d.value());
    bytes += e;
  }
  if (is_gemv(name))  // the weight is a constant: its bytes as stored
    for (NodeRef n : g.toposort())
      if (n->op == Op::Const && n->attrs.data) bytes += static_cast<double>(n->attrs.data->nbytes());
  for (size_t i = 0; i < exe.program().funcs.size(); ++i)  // extern sgemm: 2·M·N·K
    flops += loop::estimate_cost(exe.program().funcs[i], exe.program().kg, {}).flops;
  if (name == "matmul-int8") flops = 2.0 * 1024 * 1024 * 1024;  // integer multiply-adds (GOP/s in the GFLOP/s column)
  double s = r.median_ms / 1000;
  r.gflops = flops / s / 1e9;
  r.gbps = bytes / s / 1e9;
  bool compute = name == "matmul" || name == "matmul-int8" || name == "matmul-lib" || name == "conv2d" || name == "mlp" ||
                 name == "gpt2-block" || long_attention;
  r.ceiling_ratio = compute ? r.gflops / peers.ceil_gflops : r.gbps / peers.ceil_gbps;
  if (r.ceiling_ratio > 1) {  // above the roof: measure the host's ceiling again (it only rises), else say why
    if (!peers.device) {
      MachineCeiling m = remeasure_machine();
      r.ceiling_ratio = compute ? r.gflops / m.gflops : r.gbps / m.gbps;
    }
    std::string why = peers.device ? (r.ceiling_ratio > 1 ? "above the device ceiling measured" : "")
                                   : above_roof_reason(r.ceiling_ratio, !compute, bytes);
    if (!why.empty()) r.note = "* " + why;
  }
  if (name == "eltwise" || name == "softmax" || name == "layernorm") {
    r.peer = peers.bw_name;
    r.peer_median_ms = bytes / (peers.bw_gbps * 1e9) * 1000;
    r.peer_ratio = r.gbps / peers.bw_gbps;
  } else if (peers.device && name == "matmul") {
    std::string why;
    double ms = b.device_sgemm_ms(1024, iters, &why);
    if (ms > 0) {
      r.peer = "cublas-sgemm";
      r.peer_median_ms = ms;
      r.peer_ratio = ms / r.median_ms;
    } else {
      r.note += (r.note.empty() ? "" : "; ") + ("no peer: " + why);
    }
  } else if (name == "attention-grad") {  // the peer: the definition's gradient (the L×S matrices materialized)
    Executable pe = compile_graph(attention_grad_graph(true), backend);
    r.peer = "lathe-definition-grad";
    r.peer_median_ms = pe.time_ms(inputs, iters, 1);
    r.peer_ratio = r.peer_median_ms / r.median_ms;
    r.note += (r.note.empty() ? "" : "; ") + ("peer arena " + std::to_string((int)(pe.memory_plan().arena_bytes >> 20)) + " MiB");
  } else if (long_attention) {  // the peer: Lathe's unfused path (the score matrix materialized)
    Graph unfused = build_sample(name);
    Executable pe = compile_graph(unfused, backend);
    r.peer = "lathe-unfused";
    r.peer_median_ms = pe.time_ms(inputs, iters, 1);
    r.peer_ratio = r.peer_median_ms / r.median_ms;
    r.note += (r.note.empty() ? "" : "; ") + ("unfused arena " + std::to_string((int)(pe.memory_plan().arena_bytes >> 20)) + " MiB");
  } else if (read_bw > 0) {  // gemv-int4: the share of the read bandwidth measured in this run; f32 gemv in the note
    r.peer = "read-bw";
    r.peer_median_ms = bytes / (read_bw * 1e9) * 1000;
    r.peer_ratio = r.gbps / read_bw;
    char buf[160];
    if (name == "gemv-int4-big") {  // no f32 original (823 MB)
      std::snprintf(buf, sizeof buf, "read %.1f GB/s now (%zu MiB, %d threads); weight %.0f MB, LLC %.0f MB", read_bw,
                    read_bytes >> 20, hw, bytes / 1e6, last_level_cache_bytes() / 1e6);
    } else {
      double f32_ms = compile_graph(gemv_graph("gemv"), backend).time_ms(inputs, iters, 2);
      std::snprintf(buf, sizeof buf, "read %.1f GB/s now (%zu MiB, %d threads); f32 gemv %.3f ms (%.1fx)", read_bw,
                    read_bytes >> 20, hw, f32_ms, f32_ms / r.median_ms);
    }
    r.note += (r.note.empty() ? "" : "; ") + std::string(buf);
  } else if (name == "gemv-int8" || name == "gemv-int4") {  // the peer: Lathe's f32 gemv, same backend, same run
    Graph gf = gemv_graph("gemv");
    r.peer = "lathe-f32-gemv";
    r.peer_median_ms = compile_graph(gf, backend).time_ms(inputs, iters, 2);
    r.peer_ratio = r.peer_median_ms / r.median_ms;
  } else if (name == "matmul-int8") {  // the peer is Lathe's own f32 matmul, same backend, same run
    Graph gf = workload_graph("matmul");
    TensorMap fin = random_inputs(gf, 1);
    r.peer = "lathe-f32-matmul";
    r.peer_median_ms = compile_graph(gf, backend).time_ms(fin, iters, 2);
    r.peer_ratio = r.peer_median_ms / r.median_ms;
  } else if (!peers.device && (name == "matmul" || name == "matmul-lib")) {
    std::string why;
    if (openblas_sgemm(&why)) {
      r.peer = "openblas-sgemm";
      r.peer_median_ms = sgemm_ms(1024, iters);
      r.peer_ratio = r.peer_median_ms / r.median_ms;
    } else {
      r.note += (r.note.empty() ? "" : "; ") + ("no peer: " + why);
    }
  }
  return r;
}

Result bench_compile(const std::string& backend) {
  Result r;
  r.name = "compile";
  r.backend = backend;
  Graph g = build_sample("gpt2-block");
  Backend& b = get_backend(backend);
  auto once = [&](bool cache) {
    auto t0 = Clock::now();
    Program p = build_program(g);
    CompileOptions o;
    o.use_cache = cache;
    b.compile(p, o);
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  r.median_ms = once(false);  // cold: the compiler runs
  once(true);                 // make sure the cache holds it
  r.warm_ms = once(true);
  r.note = "cold (no kernel cache) " + std::to_string(r.median_ms) + " ms, warm " + std::to_string(r.warm_ms) + " ms";
  return r;
}

void print_row(const Result& r, bool json) {
  if (json) {
    nlohmann::json j = {{"name", r.name}, {"backend", r.backend}, {"status", r.status}, {"median_ms", r.median_ms},
                        {"gflops", r.gflops}, {"gbps", r.gbps}, {"ceiling_ratio", r.ceiling_ratio},
                        {"peer", r.peer.empty() ? nlohmann::json() : nlohmann::json(r.peer)},
                        {"peer_median_ms", r.peer.empty() ? nlohmann::json() : nlohmann::json(r.peer_median_ms)},
                        {"peer_ratio", r.peer.empty() ? nlohmann::json() : nlohmann::json(r.peer_ratio)}};
    if (r.warm_ms >= 0) j["warm_ms"] = r.warm_ms;
    if (r.arena_mb >= 0) j["arena_mb"] = r.arena_mb;
    if (!r.note.empty()) j["note"] = r.note;
    std::cout << j.dump() << std::endl;
    return;
  }
  if (r.status != "ok") {
    std::printf("%-11s %-7s SKIP  %s\n", r.name.c_str(), r.backend.c_str(), r.note.c_str());
    return;
  }
  std::printf("%-11s %-7s %10.3f ms %9.1f %8.1f %8.0f%%%s", r.name.c_str(), r.backend.c_str(), r.median_ms, r.gflops, r.gbps,
              100 * r.ceiling_ratio, r.ceiling_ratio > 1 ? "*" : " ");
  if (!r.peer.empty()) std::printf("   %-15s %9.3f ms %6.0f%%", r.peer.c_str(), r.peer_median_ms, 100 * r.peer_ratio);
  if (r.arena_mb >= 0) std::printf("   arena %.1f MiB", r.arena_mb);
  if (!r.note.empty()) std::printf("   %s", r.note.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

int run_bench(const std::vector<std::string>& args) {
  CLI::App cli{"Runs the benchmark suite (SPEC.md): median time, GFLOP/s, GB/s, share of the machine's\n"
               "ceiling, and the ratio to an in-process peer (triad loop, OpenBLAS sgemm).",
               "lathe bench"};
  std::string backend = default_backend(), only;
  bool json = false;
  int iters = 10;
  cli.add_option("--backend", backend, "interp | c | llvm | cuda");
  cli.add_flag("--json", json, "one JSON object per line");
  cli.add_option("--only", only, "run one workload");
  cli.add_option("--iters", iters, "timed runs per workload (default 10)")->check(CLI::Range(1, 100000));
  BenchModelsOptions mo;
  cli.add_option("--models", mo.dir,
                 "whole networks instead: DIR is a model directory (model.onnx, npy/, meta.json) or a folder of them; "
                 "cold and warm start, median run, peak memory, error vs the reference");
  cli.add_option("--ort-peer", mo.ort_peer,
                 "with --models: ONNX Runtime beside Lathe via this script (../shared/peers/run-ort-peer); the median "
                 "of --iters runs each, Lathe's after one untimed run (`lathe run --iters`), ORT's after two (the peer's "
                 "default warm-up)");
  cli.add_option("--threads", mo.threads, "with --ort-peer: the peer's threads (default: all hardware threads)")
      ->check(CLI::Range(1, 1024));
  cli.add_option("--timeout", mo.timeout_s, "with --models: seconds each child process may take (default 900)")
      ->check(CLI::Range(1, 86400));
  std::string tuned_path;
  cli.add_option("--tuned", tuned_path, "tuning records to apply (`lathe tune`; default: the records file in the cache dir, 'none': no records)");
  std::string qdq_sat16 = "auto";
  add_qdq_sat16_option(cli, qdq_sat16);
  if (int rc = parse_cli(cli, args); rc >= 0) return rc;
  apply_qdq_sat16_option(qdq_sat16);
  if (!mo.dir.empty()) {
    mo.backend = backend;
    mo.only = only;
    mo.iters = iters;
    mo.json = json;
    return run_bench_models(mo);
  }
  if (!mo.ort_peer.empty()) {
    std::cerr << "lathe bench: --ort-peer needs --models DIR\n";
    return 2;
  }
  Backend& b = get_backend(backend);
  if (auto why = b.available(); !why.empty()) throw UserError("backend '" + backend + "' is not available: " + why);
  std::vector<tune::Record> tuned = tune::load_tuned(tuned_path);
  std::vector<std::string> names = {"eltwise", "softmax", "layernorm", "matmul", "matmul-int8", "matmul-lib", "gemv", "gemv-int8", "gemv-int4", "gemv-int4-big", "conv2d", "dwconv", "mlp", "gpt2-block", "attention-long", "attention-grad", "compile", "rewrite"};
  if (!only.empty() && std::find(names.begin(), names.end(), only) == names.end()) {
    std::string known;
    for (auto& n : names) known += " " + n;
    std::cerr << "lathe bench: unknown workload '" << only << "' (known:" << known << ")\n";
    return 2;
  }
  Peers peers;
  std::string why;
  if (double copy = b.device_copy_gbps(&why); copy > 0) {
    peers.device = true;
    peers.bw_gbps = peers.ceil_gbps = copy;
    peers.bw_name = "device-copy";
    peers.ceil_gflops = b.device_peak_gflops(&why);
    if (!json)
      std::printf("# device (%s): f32 peak %.0f GFLOP/s from its attributes; device-to-device copy now %.1f GB/s\n",
                  b.description().c_str(), peers.ceil_gflops, copy);
  } else {
    MachineCeiling mc = machine_ceiling();
    int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    peers.bw_gbps = triad_gbps(threads, size_t(1) << 24, 10);
    if (peers.bw_gbps > mc.gbps) {  // the ceiling's own benchmark did better now: raise it (it never drops)
      MachineCeiling now = mc;
      now.gbps = peers.bw_gbps;
      raise_machine_ceiling(now);
      mc = machine_ceiling();
    }
    peers.bw_name = "triad";
    peers.ceil_gflops = mc.gflops;
    peers.ceil_gbps = mc.gbps;
    // and the FMA peak now: under load a compute-bound kernel's share of the ceiling (taken
    // at low load) says as little as a memory-bound one's; scripts/bench-tune.sh divides by both
    if (!json)
      std::printf("# machine: %s, %d threads; ceiling %.0f GFLOP/s, %.1f GB/s; triad peer now %.1f GB/s; FMA peak now %.0f GFLOP/s\n",
                  mc.cpu.c_str(), mc.threads, mc.gflops, mc.gbps, peers.bw_gbps, measure_machine(threads, 1).gflops);
  }
  if (!json)
    std::printf("%-11s %-7s %13s %9s %8s %9s   %-15s %12s %7s\n", "workload", "backend", "median", "GFLOP/s", "GB/s",
                "ceiling", "peer", "peer median", "vs peer");
  int failures = 0;
  for (auto& n : names) {
    if (!only.empty() && n != only) continue;
    Result r;
    try {
      if (n == "compile") r = bench_compile(backend);
      else if (n == "rewrite") r = bench_rewrite(backend);
      else r = bench_graph(n, backend, iters, peers, tuned);
    } catch (const UserError& e) {
      r.name = n;
      r.backend = backend;
      r.status = "error";
      r.note = e.what();
      ++failures;
    }
    print_row(r, json);
  }
  return failures ? 1 : 0;
}

LATHE_COMMAND("bench", "run the benchmark suite (eltwise, softmax, layernorm, matmul, …) with peers; --models DIR: whole networks", run_bench);

}  // namespace
}  // namespace lathe::app
