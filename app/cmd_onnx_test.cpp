// cmd_onnx_test.cpp — `lathe onnx-test PATH… [--backend B] [--json] [--timeout S]`: runs
// ONNX backend-test directories (model.onnx + test_data_set_K/{input,output}_I.pb) and
// prints one line per test — `PASS name`, `FAIL name: why`, `SKIP name: why` — then exactly
// `N passed, N failed, N skipped`. Exit code 0 when nothing failed (SPEC.md).
//
// A PATH is a test directory (it holds model.onnx) or a directory of them (one level,
// sorted by name). Inputs bind to the model's graph inputs in order (initializers listed
// as inputs by old opsets are skipped); outputs compare with rtol 1e-3, atol 1e-7 as the
// ONNX runner does (--rtol / --atol change them; --max-rel compares max|d| against
// rtol·max|ref| instead, the rule for real-size models). SKIP means Lathe does not
// support something the test needs (an op, a dtype, a dynamic shape input); anything else that goes wrong is a FAIL. Each test runs
// inside try/catch; with --timeout each also runs in a forked child, so a hang or a crash
// fails that test alone.
//
// Input and output files are read as the model declares them: TensorProto, SequenceProto
// or OptionalProto. A sequence's length and element shapes and an optional's presence are
// fixed at import (OnnxOptions::sequence_inputs / absent_optionals), so such a model is
// imported per data set; a sequence output NAME compares element-wise as NAME[0], NAME[1], ….
// bf16 outputs compare at bf16 precision (rtol at least 2^-7), and uint16 data where the
// model says bfloat16 (older test data) is read as bf16 bits.
//
// This file also registers the .onnx loader with load_graph() for every command.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <nlohmann/json.hpp>

#include "app/cli.h"
#include "app/commands.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"

#ifdef HAVE_LATHE_IMPORT
#include "backends/backend.h"
#include "core/import/onnx_import.h"
#include "core/import/onnx_staged.h"
#endif

namespace lathe::app {
namespace {

namespace fs = std::filesystem;

#ifdef HAVE_LATHE_IMPORT

[[maybe_unused]] const bool kOnnxLoaderRegistered = (register_onnx_loader(), true);


struct Result {
  std::string name, status, reason;  // status: PASS / FAIL / SKIP
  double seconds = 0;
};

std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (auto& ch : s) if (ch == '\n' || ch == '\r') ch = ' ';
  return s;
}

// Files named PREFIX<K>.pb in dir, ordered by K.
std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) {
    std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) != 0 || e.path().extension() != ".pb") continue;
    std::string num = f.substr(prefix.size(), f.size() - prefix.size() - 3);
    if (num.empty() || !std::all_of(num.begin(), num.end(), ::isdigit) || num.size() > 6) continue;
    found.emplace_back(std::stol(num), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> r;
  for (size_t i = 0; i < found.size(); ++i) {
    if (found[i].first != static_cast<long>(i))
      throw UserError(dir.string() + ": " + prefix + std::to_string(i) + ".pb is missing");
    r.push_back(found[i].second);
  }
  return r;
}

std::vector<fs::path> data_sets(const fs::path& dir) {
  std::vector<fs::path> r;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

// Largest relative error over the elements (for the FAIL message).
double max_rel_error(const HostTensor& got, const HostTensor& want) {
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = got.get_f64(i), b = want.get_f64(i);
    if (std::isfinite(a) && std::isfinite(b) && b != 0) worst = std::max(worst, std::fabs(a - b) / std::fabs(b));
  }
  return worst;
}

// Runs every data set of one test; throws on any problem, returns "" on success or the
// reason of the first mismatching output. A model that needs an input's value at import
// time (a Reshape whose shape is a graph input, …) is specialized per data set: its
// integer and bool inputs (or, if that is not enough, all of them) are fixed to that data
// set's values, so they become constants.
struct Tolerance {
  double rtol = 1e-3, atol = 1e-7;
  bool max_rel = false;  // max|got - want| <= atol + rtol * max|want| (per output)
  bool staged = false;   // --staged: every input stays a run-time input (StagedOnnx)
};

// max|got - want| <= atol + rtol * max|want|; NaN anywhere in got (not in want) fails.
bool close_to_max(const HostTensor& got, const HostTensor& want, const Tolerance& tol, std::string* why) {
  if (got.shape() != want.shape()) {
    *why = "shape " + got.shape_string() + ", expected " + want.shape_string();
    return false;
  }
  double dmax = 0, rmax = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = got.get_f64(i), b = want.get_f64(i);
    if (std::isnan(a) != std::isnan(b)) { *why = "NaN mismatch at element " + std::to_string(i); return false; }
    if (std::isnan(a)) continue;
    if (std::isfinite(b)) rmax = std::max(rmax, std::fabs(b));
    if (a == b) continue;
    double d = std::fabs(a - b);
    if (!(d <= dmax)) dmax = d;
  }
  if (dmax <= tol.atol + tol.rtol * rmax) return true;
  char buf[128];
  std::snprintf(buf, sizeof buf, "max|d| %.3g > %.3g + %.3g * max|ref| %.3g (max|d|/max|ref| %.3g)", dmax, tol.atol,
                tol.rtol, rmax, rmax > 0 ? dmax / rmax : dmax);
  *why = buf;
  return false;
}

// ONNX's test data before bfloat16 had a TensorProto type stored bfloat16 tensors as uint16
// bit patterns: read those as bf16 where the model says bf16.
HostTensor bf16_from_bits(const HostTensor& t) {
  HostTensor r(DType::BF16, t.shape());
  if (t.nbytes()) std::memcpy(r.data(), t.data(), t.nbytes());
  return r;
}

// --staged: one StagedOnnx per test, its segment programs compiled once per key.
std::unique_ptr<StagedOnnx> make_staged(const std::string& model, const std::string& backend,
                                        KeyedLru<std::shared_ptr<Executable>>& cache) {
  SegmentRunner run = [&cache, backend](const Graph& g, const std::string& key, const TensorMap& ins) {
    if (backend == "interp") return interpret(g, ins);
    std::shared_ptr<Executable>* e = cache.find(key);
    if (!e) {
      std::string why = get_backend(backend).supports_graph(g);
      if (!why.empty()) throw OnnxUnsupported("backend '" + backend + "' cannot run " + why);
      e = &cache.put(key, std::make_shared<Executable>(compile_graph(g, backend)));
    }
    return (*e)->run(ins);
  };
  return std::make_unique<StagedOnnx>(model, StagedOptions{}, run);
}

std::string check_test(const fs::path& dir, const std::string& backend, const Tolerance& tol) {
  std::string model = (dir / "model.onnx").string();
  OnnxSignature sig = onnx_signature(model);
  KeyedLru<std::shared_ptr<Executable>> staged_cache(64);
  std::unique_ptr<StagedOnnx> staged;
  if (tol.staged) staged = make_staged(model, backend, staged_cache);
  // sequence and optional inputs are structure fixed at import (OnnxOptions): no generic graph
  bool structured = false;
  for (auto& [name, kind] : sig.inputs) structured |= kind != OnnxValueKind::Tensor;
  std::optional<Graph> generic;
  if (!structured && !staged) {
    try {
      generic = load_onnx(model);
    } catch (const OnnxUnsupported& e) {
      if (std::string(e.what()).find("dynamic shape input not supported") == std::string::npos) throw;
    }
  }
  auto sets = data_sets(dir);
  if (sets.empty()) throw UserError("no test_data_set_* directories in " + dir.string());
  std::optional<Executable> exe;
  for (const auto& set : sets) {
    std::string set_name = set.filename().string();
    auto in_files = numbered(set, "input_"), out_files = numbered(set, "output_");
    if (in_files.size() > sig.inputs.size())
      throw UserError(set_name + " has " + std::to_string(in_files.size()) + " inputs but the model takes " +
                      std::to_string(sig.inputs.size()));
    if (out_files.size() != sig.outputs.size())
      throw UserError(set_name + " has " + std::to_string(out_files.size()) + " outputs but the model declares " +
                      std::to_string(sig.outputs.size()));
    TensorMap inputs;
    std::set<std::string> element_inputs;  // sequence elements: fixed only as a last resort
    OnnxOptions structure;
    for (size_t i = 0; i < in_files.size(); ++i) {
      const auto& [name, kind] = sig.inputs[i];
      OnnxValue v = read_onnx_value(in_files[i].string(), kind);
      if (v.none) {
        structure.absent_optionals.insert(name);
      } else if (v.sequence) {
        auto& shapes = structure.sequence_inputs[name];
        for (size_t k = 0; k < v.elements.size(); ++k) {
          std::string en = name + "[" + std::to_string(k) + "]";
          shapes.push_back(v.elements[k].shape());
          inputs[en] = v.elements[k];
          element_inputs.insert(en);
        }
      } else {
        inputs[name] = v.elements.at(0);
      }
    }
    if (generic) {
      std::set<NodeRef> read;  // inputs some node or output reads
      for (const auto& [node, users] : generic->users())
        if (node->op == Op::Input && !users.empty()) read.insert(node);
      for (const auto& [name, out] : generic->outputs) read.insert(out);
      for (const NodeRef& in : generic->inputs) {
        auto it = inputs.find(in->attrs.name);
        if (it == inputs.end()) continue;
        if (in->dtype == DType::BF16 && it->second.dtype() == DType::U16) it->second = bf16_from_bits(it->second);
        bool fixed = true;
        for (const SymInt& d : in->shape) fixed &= d.is_const();
        if (!fixed || shape_eval(in->shape, {}) == it->second.shape()) continue;
        // a few data sets contradict the model they test: castlike's `like` is [1] where the
        // model declares [3, 4] (onnx/onnx#4684). The program never reads such an input (only
        // its dtype mattered, at import), so as in the ONNX reference, which does not check
        // declared shapes, the data's shape does not matter: zeros of the declared shape and
        // the data's (checked) dtype stand in. An input the program reads is the data's defect.
        std::vector<int64_t> declared = shape_eval(in->shape, {});
        const int64_t cap = int64_t(1) << 24;
        int64_t numel = 1;
        for (int64_t d : declared) numel = d == 0 || numel == 0 ? 0 : numel > cap / d ? cap + 1 : numel * d;
        if (!read.count(in) && it->second.dtype() == in->dtype && numel <= cap) {
          it->second = HostTensor(in->dtype, declared);
          continue;
        }
        throw OnnxUnsupported(set_name + ": the test data's input '" + in->attrs.name + "' is " + it->second.shape_string() +
                              " but the model declares " + shape_to_string(in->shape));
      }
    }
    Graph g;
    if (staged) {
      if (structured) throw OnnxUnsupported("sequence and optional inputs are not supported in a staged run");
      for (const auto& [name, dt] : staged->input_dtypes()) {
        auto it = inputs.find(name);
        if (it != inputs.end() && dt == DType::BF16 && it->second.dtype() == DType::U16) it->second = bf16_from_bits(it->second);
      }
      try {  // data that contradicts the model is the data's defect, as below
        staged->check_inputs(inputs);
      } catch (const UserError& e) {
        throw OnnxUnsupported(set_name + ": the test data does not fit the model: " + e.diag().message);
      }
    } else if (generic) {
      g = *generic;
    } else {
      // fix the integer/bool inputs first; if that is not enough, every input
      OnnxOptions opt = structure;
      TensorMap rest;
      for (auto& [name, t] : inputs)
        (is_float(t.dtype()) || element_inputs.count(name) ? rest : opt.fixed_inputs)[name] = t;
      try {
        g = load_onnx(model, opt);
        inputs = rest;
      } catch (const OnnxUnsupported& e) {
        if (std::string(e.what()).find("dynamic shape input not supported") == std::string::npos) throw;
        opt.fixed_inputs = inputs;  // sequence elements too ("NAME[k]")
        g = load_onnx(model, opt);
        inputs.clear();
      }
      exe.reset();
    }
    // the expected outputs, a sequence output as its elements NAME[k]
    std::vector<std::pair<std::string, HostTensor>> expected;
    for (size_t i = 0; i < out_files.size(); ++i) {
      const auto& [name, kind] = sig.outputs[i];
      OnnxValue v = read_onnx_value(out_files[i].string(), kind);
      if (v.none) throw OnnxUnsupported(set_name + " output '" + name + "' is an empty optional");
      if (!v.sequence) expected.emplace_back(name, v.elements.at(0));
      else
        for (size_t k = 0; k < v.elements.size(); ++k) expected.emplace_back(name + "[" + std::to_string(k) + "]", v.elements[k]);
    }
    if (!staged && expected.size() != g.outputs.size())
      return set_name + ": the model produces " + std::to_string(g.outputs.size()) + " output tensors, the test data has " +
             std::to_string(expected.size());
    TensorMap outputs;
    if (staged) {
      outputs = staged->run(inputs);
    } else if (backend == "interp") {
      outputs = interpret(g, inputs);
    } else {
      if (!exe) {
        // a node the backend cannot run (e.g. an f16 tensor on c) is unsupported, not wrong
        std::string why = get_backend(backend).supports_graph(g);
        if (!why.empty()) throw OnnxUnsupported("backend '" + backend + "' cannot run " + why);
        exe.emplace(compile_graph(g, backend));
      }
      outputs = exe->run(inputs);
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string& name = expected[i].first;
      HostTensor want = expected[i].second;
      auto it = outputs.find(name);
      if (it == outputs.end()) return set_name + ": output '" + name + "' was not produced";
      const HostTensor& got = it->second;
      if (got.dtype() == DType::BF16 && want.dtype() == DType::U16) want = bf16_from_bits(want);
      std::string where = set_name + " output " + std::to_string(i) + " '" + name + "'";
      if (got.dtype() != want.dtype())
        return where + ": dtype " + std::string(dtype_name(got.dtype())) + ", expected " +
               std::string(dtype_name(want.dtype()));
      // bf16 holds 8 significant bits: compare at that precision (one unit in the last place;
      // the older test data truncates where Lathe rounds to nearest even)
      Tolerance t = tol;
      if (want.dtype() == DType::BF16) t.rtol = std::max(t.rtol, 1.0 / 128);
      std::string why;
      if (t.max_rel ? !close_to_max(got, want, t, &why) : !allclose(got, want, t.rtol, t.atol, &why)) {
        if (got.shape() == want.shape()) {
          char buf[64];
          std::snprintf(buf, sizeof buf, "; max rel err %.3g", max_rel_error(got, want));
          why += buf;
        }
        return where + ": " + why;
      }
    }
  }
  return "";
}

Result run_test(const fs::path& dir, const std::string& backend, const Tolerance& tol) {
  Result r;
  r.name = dir.filename().string();
  auto t0 = std::chrono::steady_clock::now();
  try {
    std::string why = check_test(dir, backend, tol);
    r.status = why.empty() ? "PASS" : "FAIL";
    r.reason = why;
  } catch (const OnnxUnsupported& e) {
    r.status = "SKIP";
    r.reason = e.diag().message;
  } catch (const UserError& e) {
    r.status = "FAIL";
    r.reason = e.diag().message;
  } catch (const InternalError& e) {
    r.status = "FAIL";
    r.reason = std::string("internal error: ") + e.what();
  } catch (const std::bad_alloc&) {
    r.status = "FAIL";
    r.reason = "out of memory";
  } catch (const std::exception& e) {
    r.status = "FAIL";
    r.reason = e.what();
  }
  // drop the model path prefix the importer puts in messages: the test name says it
  std::string prefix = (dir / "model.onnx").string() + ": ";
  if (r.reason.rfind(prefix, 0) == 0) r.reason = r.reason.substr(prefix.size());
  r.reason = one_line(r.reason);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Runs one test in a forked child with a time limit; the child reports through a pipe.
Result run_isolated(const fs::path& dir, const std::string& backend, const Tolerance& tol, double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return run_test(dir, backend, tol);
  std::cout.flush();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return run_test(dir, backend, tol);
  }
  if (pid == 0) {
    close(fds[0]);
    Result r = run_test(dir, backend, tol);
    std::string msg = r.status + "\n" + std::to_string(r.seconds) + "\n" + r.reason;
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  Result r;
  r.name = dir.filename().string();
  auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  bool done = false;
  while (!done) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) { done = true; break; }
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      close(fds[0]);
      r.status = "FAIL";
      r.reason = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
      r.seconds = el;
      return r;
    }
    usleep(el < 1 ? 2000 : 20000);
  }
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t a = msg.find('\n'), b = a == std::string::npos ? a : msg.find('\n', a + 1);
  if (WIFSIGNALED(status) || b == std::string::npos) {
    r.status = "FAIL";
    r.reason = WIFSIGNALED(status) ? "crashed (signal " + std::to_string(WTERMSIG(status)) + ")" : "the test process died";
    return r;
  }
  r.status = msg.substr(0, a);
  r.reason = msg.substr(b + 1);
  return r;
}

std::vector<fs::path> collect_tests(const std::vector<std::string>& paths) {
  std::vector<fs::path> tests;
  for (const auto& p : paths) {
    fs::path path(p);
    std::error_code ec;
    if (fs::exists(path / "model.onnx", ec)) {
      tests.push_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec))
      throw UserError("onnx-test: '" + p + "' is neither a test directory (with model.onnx) nor a directory of tests");
    std::vector<fs::path> found;
    for (auto& e : fs::directory_iterator(path, ec))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) found.push_back(e.path());
    if (found.empty()) throw UserError("onnx-test: no test directories (with model.onnx) in '" + p + "'");
    std::sort(found.begin(), found.end());
    tests.insert(tests.end(), found.begin(), found.end());
  }
  return tests;
}

int run_onnx_test(const std::vector<std::string>& args) {
  CLI::App app{"Runs ONNX backend-test directories (model.onnx + test_data_set_K/input_I.pb, output_I.pb),\n"
               "e.g. /usr/share/libonnx-testdata/data/node. One line per test: PASS name, FAIL name: why,\n"
               "SKIP name: why (unsupported op, dtype or dynamic shape); then `N passed, N failed, N skipped`.\n"
               "Outputs compare element-wise: |got - want| <= atol + rtol * |want| (default rtol 1e-3,\n"
               "atol 1e-7, as the ONNX runner); --max-rel: max|got - want| <= atol + rtol * max|want| per\n"
               "output (bf16 outputs: rtol at least 2^-7). Sequence and optional inputs are read as the model\n"
               "declares them and fix the model's structure per data set. Input data must have the declared\n"
               "shape, except for an input the program never reads (CastLike's `like`): its dtype only is\n"
               "checked, as in the ONNX reference. Exit code 0 when nothing failed.",
               "lathe onnx-test"};
  std::vector<std::string> paths;
  std::string backend = "interp";
  bool json = false;
  double timeout = 0;
  Tolerance tol;
  app.add_option("PATH", paths, "a test directory, or a directory of test directories")->required();
  app.add_option("--backend", backend, "interp (the reference interpreter), c, llvm, …")->capture_default_str();
  app.add_flag("--json", json, "one JSON object per test instead of the text line");
  app.add_option("--rtol", tol.rtol, "relative tolerance")->capture_default_str();
  app.add_option("--atol", tol.atol, "absolute tolerance")->capture_default_str();
  app.add_flag("--max-rel", tol.max_rel, "per output, max|got - want| <= atol + rtol * max|want| (real-size models)");
  app.add_flag("--staged", tol.staged,
               "leave every input a run-time input: data-dependent shapes and run-time Loop / If run through\n"
               "the staged executor (segments split at host-side boundaries) instead of specializing the\n"
               "model on the test data's values");
  app.add_option("--timeout", timeout, "seconds per test; runs each test in a child process (0: in-process)");
  if (int rc = parse_cli(app, args); rc >= 0) return rc;
  if (timeout < 0) {
    std::cerr << "lathe onnx-test: --timeout must be >= 0\n";
    return 2;
  }
  if (!(tol.rtol >= 0) || !(tol.atol >= 0)) {
    std::cerr << "lathe onnx-test: --rtol and --atol must be >= 0\n";
    return 2;
  }
  if (backend != "interp") get_backend(backend);  // UserError listing the known backends
  std::vector<fs::path> tests = collect_tests(paths);
  int passed = 0, failed = 0, skipped = 0;
  for (const auto& dir : tests) {
    Result r = timeout > 0 ? run_isolated(dir, backend, tol, timeout) : run_test(dir, backend, tol);
    (r.status == "PASS" ? passed : r.status == "SKIP" ? skipped : failed)++;
    if (json) {
      nlohmann::json j{{"name", r.name}, {"status", r.status}, {"backend", backend}, {"seconds", r.seconds}};
      if (!r.reason.empty()) j["reason"] = r.reason;
      std::cout << j.dump() << std::endl;
    } else if (r.status == "PASS") {
      std::cout << "PASS " << r.name << std::endl;
    } else {
      std::cout << r.status << " " << r.name << ": " << r.reason << std::endl;
    }
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped" << std::endl;
  return failed == 0 ? 0 : 1;
}

#else  // built without libonnx

int run_onnx_test(const std::vector<std::string>&) {
  std::cerr << "lathe onnx-test: this lathe was built without ONNX support (install libonnx-dev and rebuild)\n";
  return 1;
}

#endif

LATHE_COMMAND("onnx-test", "run ONNX backend-test directories and print PASS/FAIL/SKIP per test", run_onnx_test);

}  // namespace
}  // namespace lathe::app
