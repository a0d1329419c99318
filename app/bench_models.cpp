// bench_models.cpp — `lathe bench --models DIR`: whole networks, measured as a user meets
// them. For each model directory (ONNX backend-test layout + meta.json, as
// ../shared/models/make_models.py writes it):
//   cold start  a fresh `lathe run` process with an empty kernel cache (a temp
//               LATHE_CACHE_DIR): exec, import, compile, first run, outputs written, until
//               its `stats:` line (the first result) appears; the process's wall time to
//               its exit is reported beside it (cold_exit_s: with a tiered compile, the
//               optimized code it compiles for the cache after the first result, unless a
//               detached child compiles it: then detached_s, the wait for that child);
//   warm start  the same process again, the cache as the cold one left it (same two times),
//               once the cold start's detached compile (if any) has written it;
//   median      a third process's median of N runs after its first (`lathe run --iters N`);
//   memory      each process's peak resident set (wait4's ru_maxrss);
//   error       per output, max|got − ref| / max|ref| against npy/out_*.npy (ok ≤ 1e-3), and the
//               cosine similarity. A quantized model (meta.json "qdq": true, ../shared/models/make_qdq.py)
//               has ONNX Runtime's fused int8 kernels as its reference, which its own op-by-op run misses
//               by up to 0.04: there an output is right when cosine ≥ 0.999 and the error ≤ 0.05
//               (issue 18's criterion).
// With --ort-peer, ONNX Runtime runs the same directory (run-ort-peer prints create_ms,
// median_ms and its own errors) and the table shows the ratios beside Lathe's.
#include "app/bench_models.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backends/backend.h"
#include "core/ir/diag.h"
#include "core/runtime/kernel_cache.h"
#include "core/runtime/machine.h"
#include "core/runtime/npy.h"

namespace lathe::app {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Child {
  int status = -1;        // exit code; -1 killed or not started
  bool timed_out = false;
  double wall_ms = 0;     // fork to exit
  double result_ms = -1;  // fork to the first `stats: ` line on stdout (-1: none)
  double rss_mb = 0;      // peak resident set
  std::string out, err;   // captured stdout, stderr
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs argv with extra environment variables, stdout and stderr captured through files in
// `tmp`, killed after timeout_s. The wall time counts from fork to exit.
Child run_child(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
                const std::string& tmp, int timeout_s) {
  Child c;
  std::string out_path = tmp + "/child.out", err_path = tmp + "/child.err";
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::unlink(out_path.c_str());  // not the last child's output (its stats line) while this one starts
  ::unlink(err_path.c_str());
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid < 0) throw UserError(std::string("cannot start a child process: ") + std::strerror(errno));
  if (pid == 0) {
    int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(127);
    dup2(o, 1);
    dup2(e, 2);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    setpgid(0, 0);  // its own group, so a timeout kills what it started too
    for (auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    execv(args[0], args.data());
    _exit(127);
  }
  setpgid(pid, pid);
  struct rusage ru {};
  int status = 0;
  off_t seen = 0;  // stdout's size when last read
  auto look_for_result = [&] {  // the stats line, once complete
    struct stat sb {};
    if (c.result_ms >= 0 || ::stat(out_path.c_str(), &sb) != 0 || sb.st_size == seen) return;
    seen = sb.st_size;
    std::string out = slurp(out_path);
    size_t p = out.rfind("stats: ");
    if (p != std::string::npos && (p == 0 || out[p - 1] == '\n') && out.find('\n', p) != std::string::npos)
      c.result_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  for (;;) {
    look_for_result();
    pid_t r = wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) {
      kill(-pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      c.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  c.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  c.rss_mb = ru.ru_maxrss / 1024.0;
  c.status = !c.timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  c.out = slurp(out_path);
  c.err = slurp(err_path);
  if (c.result_ms < 0 && c.out.find("stats: ") != std::string::npos) c.result_ms = c.wall_ms;  // (seen at exit)
  return c;
}

// The last line of text that is not empty.
std::string last_line(const std::string& s) {
  std::istringstream in(s);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// The JSON after "stats: " in `lathe run --stats` output; null when absent.
nlohmann::json run_stats(const std::string& out) {
  size_t p = out.rfind("stats: ");
  if (p == std::string::npos) return nullptr;
  size_t e = out.find('\n', p);
  try {
    return nlohmann::json::parse(out.substr(p + 7, e == std::string::npos ? e : e - p - 7));
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::string self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw UserError("lathe bench --models: cannot find its own executable (/proc/self/exe)");
  return p.string();
}

struct ModelDir {
  std::string name, dir;
  nlohmann::json meta;
};

std::vector<ModelDir> find_models(const std::string& dir, const std::string& only) {
  std::vector<std::string> dirs;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UserError("lathe bench --models: '" + dir + "' is not a directory");
  if (fs::exists(fs::path(dir) / "meta.json")) {
    dirs.push_back(dir);
  } else {
    for (auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory() && fs::exists(e.path() / "meta.json")) dirs.push_back(e.path().string());
    std::sort(dirs.begin(), dirs.end());
  }
  if (dirs.empty())
    throw UserError("lathe bench --models: no model directories in '" + dir +
                    "' (each needs meta.json, model.onnx and npy/, as ../shared/models/make_models.py writes them)");
  std::vector<std::string> wanted;
  for (size_t b = 0; b < only.size();) {
    size_t e = std::min(only.size(), only.find(',', b));
    if (e > b) wanted.push_back(only.substr(b, e - b));
    b = e + 1;
  }
  std::vector<ModelDir> r;
  for (auto& d : dirs) {
    ModelDir m;
    m.dir = d;
    m.name = fs::path(d).filename().string();
    std::string meta_path = (fs::path(d) / "meta.json").string();
    try {
      m.meta = nlohmann::json::parse(slurp(meta_path));
    } catch (const std::exception& e) {
      throw UserError(meta_path + ": not valid JSON (" + e.what() + ")");
    }
    if (m.meta.contains("name") && m.meta["name"].is_string()) m.name = m.meta["name"].get<std::string>();
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), m.name) == wanted.end() &&
        std::find(wanted.begin(), wanted.end(), fs::path(d).filename().string()) == wanted.end())
      continue;
    r.push_back(std::move(m));
  }
  if (r.empty()) throw UserError("lathe bench --models: no model named '" + only + "' in " + dir);
  return r;
}

struct OutputError {
  std::string name;
  double rel = 0, max_abs = 0;
  double cosine = 1;  // got·ref / (|got| |ref|); 1 when both are zero
  std::string problem;
};

// What an output must meet to be right.
struct Tolerance {
  double max_rel = 1e-3;    // max|got − ref| / max|ref|
  double min_cosine = -2;   // no check
  bool ok(const OutputError& e) const { return e.problem.empty() && e.rel <= max_rel && e.cosine >= min_cosine; }
  std::string describe() const {
    char b[96];
    if (min_cosine > -1)
      std::snprintf(b, sizeof b, "error over %g or cosine under %g", max_rel, min_cosine);
    else
      std::snprintf(b, sizeof b, "error over %g", max_rel);
    return b;
  }
};

// The verdict's tolerance for a model: the float one, or issue 18's for QDQ models.
Tolerance tolerance_for(const nlohmann::json& meta) {
  Tolerance t;
  if (meta.contains("qdq") && meta["qdq"].is_boolean() && meta["qdq"].get<bool>()) {
    t.max_rel = 0.05;
    t.min_cosine = 0.999;
  }
  return t;
}

// max|got − ref| / max|ref| (NaN anywhere → inf) and the cosine similarity (NaN → -1).
OutputError compare_output(const std::string& name, const std::string& got_path, const std::string& ref_path) {
  OutputError r;
  r.name = name;
  try {
    HostTensor got = read_npy(got_path), ref = read_npy(ref_path);
    if (got.shape() != ref.shape()) {
      r.problem = "shape " + got.shape_string() + ", reference " + ref.shape_string();
      r.rel = INFINITY;
      r.cosine = -1;
      return r;
    }
    double max_ref = 0, dot = 0, gg = 0, rr = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      double a = got.get_f64(i), b = ref.get_f64(i), d = std::fabs(a - b);
      if (std::isnan(d)) d = INFINITY;
      r.max_abs = std::max(r.max_abs, d);
      max_ref = std::max(max_ref, std::fabs(b));
      dot += a * b;
      gg += a * a;
      rr += b * b;
    }
    r.rel = r.max_abs / std::max(max_ref, 1e-30);
    if (gg == 0 && rr == 0)
      r.cosine = 1;
    else if (gg == 0 || rr == 0)
      r.cosine = 0;
    else
      r.cosine = dot / std::sqrt(gg * rr);
    if (std::isnan(r.cosine) || std::isinf(r.max_abs)) r.cosine = -1;
  } catch (const UserError& e) {
    r.problem = e.diag().message;
    r.rel = INFINITY;
    r.cosine = -1;
  }
  return r;
}

struct Row {
  std::string name, backend, status = "ok", note;
  double cold_s = 0, warm_s = 0, median_ms = 0, rss_mb = 0, cold_rss_mb = 0;  // cold_s, warm_s: to the first result
  double cold_exit_s = 0, warm_exit_s = 0;  // the processes' wall time to their exit
  double detached_s = 0;  // after the cold exit, the wait for its detached compile (*.lock in the cache)
  double gflop = -1;  // the program's work per run (`lathe run --stats`), for GFLOP/s and the share of peak
  nlohmann::json cold_stats, warm_stats;
  std::vector<OutputError> errors;
  double max_error = 0, min_cosine = 1;
  Tolerance tol;
  bool peer = false;
  std::string peer_note;
  double ort_create_ms = 0, ort_median_ms = 0, ort_rss_mb = 0, ort_max_error = 0;
};

std::string why_failed(const Child& c) {
  if (c.timed_out) return "timed out";
  std::string l = last_line(c.err);
  if (l.empty()) l = last_line(c.out);
  if (l.empty()) l = "exit code " + std::to_string(c.status);
  return l;
}

Row bench_model(const ModelDir& m, const BenchModelsOptions& o, const std::string& exe, const std::string& tmp) {
  Row r;
  r.name = m.name;
  r.backend = o.backend;
  r.tol = tolerance_for(m.meta);
  std::vector<std::string> argv = {exe, "run", (fs::path(m.dir) / "model.onnx").string(), "--backend", o.backend,
                                   "--output-dir", tmp + "/out", "--stats"};
  std::vector<std::pair<std::string, std::string>> outputs;  // name, reference npy
  try {
    for (auto& in : m.meta.at("inputs"))
      argv.push_back("--input=" + in.at("name").get<std::string>() + "=" +
                     (fs::path(m.dir) / in.at("npy").get<std::string>()).string());
    for (auto& out : m.meta.at("outputs"))
      outputs.push_back({out.at("name").get<std::string>(), (fs::path(m.dir) / out.at("npy").get<std::string>()).string()});
  } catch (const std::exception& e) {
    r.status = "error";
    r.note = m.dir + "/meta.json: " + e.what();
    return r;
  }
  std::string cache = tmp + "/cache";
  std::error_code ec;
  fs::remove_all(cache, ec);
  fs::remove_all(tmp + "/out", ec);
  fs::create_directories(cache);
  std::vector<std::pair<std::string, std::string>> env = {{"LATHE_CACHE_DIR", cache}};

  Child cold = run_child(argv, env, tmp, o.timeout_s);
  if (cold.status != 0) {
    std::string why = why_failed(cold);
    r.status = why.find("unsupported") != std::string::npos || why.find("not supported") != std::string::npos ? "skip" : "error";
    r.note = why;
    return r;
  }
  r.cold_s = (cold.result_ms >= 0 ? cold.result_ms : cold.wall_ms) / 1000;
  r.cold_exit_s = cold.wall_ms / 1000;
  r.cold_rss_mb = cold.rss_mb;
  r.cold_stats = run_stats(cold.out);
  for (auto& [name, ref] : outputs) {
    r.errors.push_back(compare_output(name, tmp + "/out/" + name + ".npy", ref));
    r.max_error = std::max(r.max_error, r.errors.back().rel);
    r.min_cosine = std::min(r.min_cosine, r.errors.back().cosine);
  }
  {  // a detached full-tier compile holds a lock beside the entry it writes: the warm start
     // is measured on the cache it leaves
    auto t0 = std::chrono::steady_clock::now();
    for (auto& e : fs::recursive_directory_iterator(cache, ec))
      if (e.path().extension() == ".lock") wait_unlocked(e.path().string(), o.timeout_s * 1000.0);
    r.detached_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Child warm = run_child(argv, env, tmp, o.timeout_s);
  if (warm.status != 0) {
    r.status = "error";
    r.note = "warm start: " + why_failed(warm);
    return r;
  }
  r.warm_s = (warm.result_ms >= 0 ? warm.result_ms : warm.wall_ms) / 1000;
  r.warm_exit_s = warm.wall_ms / 1000;
  r.rss_mb = warm.rss_mb;
  r.warm_stats = run_stats(warm.out);
  std::vector<std::string> timed = argv;
  timed.push_back("--iters");
  timed.push_back(std::to_string(o.iters));
  Child runs = run_child(timed, env, tmp, o.timeout_s);
  nlohmann::json st = run_stats(runs.out);
  if (runs.status != 0 || !st.is_object() || !st.contains("median_ms")) {
    r.status = "error";
    r.note = "timed runs: " + why_failed(runs);
    return r;
  }
  r.median_ms = st["median_ms"].get<double>();
  if (st.contains("gflop") && st["gflop"].is_number()) r.gflop = st["gflop"].get<double>();

  if (!o.ort_peer.empty()) {
    std::vector<std::string> pargv = {o.ort_peer, m.dir, "--iters", std::to_string(o.iters), "--threads",
                                      std::to_string(o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency()))};
    Child peer = run_child(pargv, {}, tmp, o.timeout_s);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(last_line(peer.out));
    } catch (const std::exception&) {
    }
    if (peer.status == 0 && j.is_object() && j.contains("median_ms") && j.contains("create_ms")) {
      r.peer = true;
      r.ort_create_ms = j["create_ms"].get<double>();
      r.ort_median_ms = j["median_ms"].get<double>();
      r.ort_rss_mb = peer.rss_mb;
      if (j.contains("errors") && j["errors"].is_object())
        for (auto& [k, v] : j["errors"].items())
          if (v.contains("max_rel_to_max") && v["max_rel_to_max"].is_number())
            r.ort_max_error = std::max(r.ort_max_error, v["max_rel_to_max"].get<double>());
    } else {
      r.peer_note = "ONNX Runtime: " + (j.is_object() && j.contains("error") ? j["error"].dump() : why_failed(peer));
    }
  }
  for (auto& e : r.errors)
    if (!r.tol.ok(e)) {
      r.status = "wrong";
      char b[64];
      std::snprintf(b, sizeof b, " (error %.2g, cosine %.5f)", e.rel, e.cosine);
      r.note += (r.note.empty() ? "" : "; ") + e.name + (e.problem.empty() ? std::string(b) : ": " + e.problem);
    }
  return r;
}

// ORT's start (session creation + one run) over Lathe's.
double start_ratio(const Row& r, double lathe_s) { return (r.ort_create_ms + r.ort_median_ms) / 1000 / lathe_s; }

void print_row(const Row& r, bool json, double peak_gflops) {
  if (json) {
    nlohmann::json j = {{"name", r.name}, {"backend", r.backend}, {"status", r.status}};
    if (r.status == "ok" || r.status == "wrong") {
      j["cold_start_s"] = r.cold_s;
      j["warm_start_s"] = r.warm_s;
      j["cold_exit_s"] = r.cold_exit_s;
      j["warm_exit_s"] = r.warm_exit_s;
      j["detached_s"] = r.detached_s;
      j["median_ms"] = r.median_ms;
      j["peak_rss_mb"] = r.rss_mb;
      j["cold_peak_rss_mb"] = r.cold_rss_mb;
      j["max_error"] = r.max_error;
      j["min_cosine"] = r.min_cosine;
      j["tolerance"] = {{"max_rel_to_max", r.tol.max_rel}};
      if (r.tol.min_cosine > -1) j["tolerance"]["min_cosine"] = r.tol.min_cosine;
      nlohmann::json errs = nlohmann::json::object();
      for (auto& e : r.errors) errs[e.name] = {{"max_abs", e.max_abs}, {"max_rel_to_max", e.rel}, {"cosine", e.cosine}};
      j["errors"] = errs;
      if (r.gflop >= 0) {
        j["gflop"] = r.gflop;
        j["gflops"] = r.gflop / (r.median_ms / 1000);
        if (peak_gflops > 0) j["peak_share"] = r.gflop / (r.median_ms / 1000) / peak_gflops;
      }
      j["cold"] = r.cold_stats;
      j["warm"] = r.warm_stats;
      j["peer"] = r.peer ? nlohmann::json("onnxruntime") : nlohmann::json();
      if (r.peer) {
        j["peer_create_ms"] = r.ort_create_ms;
        j["peer_median_ms"] = r.ort_median_ms;
        j["peer_rss_mb"] = r.ort_rss_mb;
        j["peer_max_error"] = r.ort_max_error;
        j["peer_ratio"] = r.ort_median_ms / r.median_ms;
        j["cold_start_ratio"] = start_ratio(r, r.cold_s);
        j["warm_start_ratio"] = start_ratio(r, r.warm_s);
        j["rss_ratio"] = r.rss_mb / r.ort_rss_mb;
      }
      if (!r.peer_note.empty()) j["peer_note"] = r.peer_note;
    }
    if (!r.note.empty()) j["note"] = r.note;
    std::cout << j.dump() << std::endl;
    return;
  }
  if (r.status != "ok" && r.status != "wrong") {
    std::printf("%-14s %-7s %s  %s\n", r.name.c_str(), r.backend.c_str(), r.status == "skip" ? "SKIP " : "ERROR", r.note.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("%-14s %-7s %7.2f %7.2f %7.2f %10.3f", r.name.c_str(), r.backend.c_str(), r.cold_s, r.cold_exit_s, r.warm_s,
              r.median_ms);
  if (r.gflop >= 0 && r.median_ms > 0) {
    double gf = r.gflop / (r.median_ms / 1000);
    std::printf(" %8.1f", gf);
    if (peak_gflops > 0) std::printf(" %5.0f%%", 100 * gf / peak_gflops);
    else std::printf(" %6s", "-");
  } else {
    std::printf(" %8s %6s", "-", "-");
  }
  std::printf(" %8.0f %9.1e", r.rss_mb, r.max_error);
  if (r.peer)
    std::printf("   %7.2f %10.3f %8.0f   %6.2fx %6.2fx %6.2fx %6.2fx", (r.ort_create_ms + r.ort_median_ms) / 1000,
                r.ort_median_ms, r.ort_rss_mb, r.ort_median_ms / r.median_ms, start_ratio(r, r.cold_s),
                start_ratio(r, r.warm_s), r.rss_mb / r.ort_rss_mb);
  if (r.status == "wrong") std::printf("   WRONG (%s: %s)", r.tol.describe().c_str(), r.note.c_str());
  else if (r.tol.min_cosine > -1)
    std::printf("   ok (QDQ: cosine %.5f >= %g, error <= %g)", r.min_cosine, r.tol.min_cosine, r.tol.max_rel);
  if (!r.peer_note.empty()) std::printf("   %s", r.peer_note.c_str());
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace

int run_bench_models(const BenchModelsOptions& o) {
  std::vector<ModelDir> models = find_models(o.dir, o.only);
  std::string exe = self_exe();
  if (!o.ort_peer.empty() && access(o.ort_peer.c_str(), X_OK) != 0)
    throw UserError("lathe bench --ort-peer: '" + o.ort_peer + "' is not an executable (../shared/peers/run-ort-peer)");
  char tmpl[] = "/tmp/lathe-bench-models-XXXXXX";
  if (!mkdtemp(tmpl)) throw UserError(std::string("cannot create a temp directory: ") + std::strerror(errno));
  std::string tmp = tmpl;
  // The ceiling GFLOP/s is divided by: the device's f32 peak (cuda), else the host's measured FMA peak.
  double peak_gflops = 0;
  std::string peak_what = "the host's FMA peak over all threads (machine ceiling)";
  if (o.backend == "cuda") {
    std::string why;
    peak_gflops = get_backend(o.backend).device_peak_gflops(&why);
    peak_what = "the device's f32 peak";
  } else if (o.backend != "interp") {
    peak_gflops = machine_ceiling().gflops;
  }
  if (!o.json) {
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0) load[0] = -1;
    std::printf("# %zu model(s) from %s; cold = fresh process, empty kernel cache, to its first result (exit s: to its exit,\n"
                "# the optimized code a tiered start compiles for the cache included); warm = fresh process, the cache the cold\n"
                "# one left, to its first result; median of %d runs; RSS = peak resident MB; error = max|got-ref|/max|ref|;\n"
                "# load average %.2f\n",
                models.size(), o.dir.c_str(), o.iters, load[0]);
    if (peak_gflops > 0)
      std::printf("# GFLOP/s = the program's work / median (2*M*N*K per contraction, int8 ones too); peak = its share of %s, "
                  "%.0f GFLOP/s\n",
                  peak_what.c_str(), peak_gflops);
    std::printf("%-14s %-7s %7s %7s %7s %10s %8s %6s %8s %9s", "model", "backend", "cold s", "exit s", "warm s", "median ms",
                "GFLOP/s", "peak", "RSS MB", "error");
    if (!o.ort_peer.empty())
      std::printf("   %7s %10s %8s   %7s %7s %7s %7s", "ORT s", "ORT ms", "ORT MB", "speed", "cold", "warm", "RSS");
    std::printf("\n");
    if (!o.ort_peer.empty())
      std::printf("%-14s %-7s %7s %7s %7s %10s %8s %6s %8s %9s   %-28s   %s\n", "", "", "", "", "", "", "", "", "", "",
                  "(ORT s = create + one run)", "(ratios: ORT/Lathe time; RSS Lathe/ORT)");
  }
  int failures = 0;
  for (auto& m : models) {
    Row r;
    try {
      r = bench_model(m, o, exe, tmp);
    } catch (const UserError& e) {
      r.name = m.name;
      r.backend = o.backend;
      r.status = "error";
      r.note = e.diag().message;
    }
    if (r.status == "error" || r.status == "wrong") ++failures;
    print_row(r, o.json, peak_gflops);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return failures ? 1 : 0;
}

}  // namespace lathe::app
