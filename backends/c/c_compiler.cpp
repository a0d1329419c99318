// c_compiler.cpp — running the system C compiler and loading its output (see header).
#include "backends/c/c_compiler.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/ir/diag.h"
#include "core/runtime/kernel_cache.h"

namespace lathe {

namespace {

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string first_lines(const std::string& text, int n) {
  std::string r;
  std::istringstream in(text);
  std::string line;
  for (int i = 0; i < n && std::getline(in, line); ++i) r += "    " + line + "\n";
  return r;
}

// Runs a shell command; returns its exit status, with stdout+stderr in *output.
int run_command(const std::string& cmd, std::string* output) {
  std::string log = temp_path_for(cache_path("c", "log"));
  int rc = std::system((cmd + " > " + shell_quote(log) + " 2>&1").c_str());
  if (output) *output = read_file(log);
  std::remove(log.c_str());
  if (rc == -1) return -1;
  if ((WIFSIGNALED(rc) && WTERMSIG(rc) == SIGINT) || (WIFEXITED(rc) && WEXITSTATUS(rc) == 128 + SIGINT)) {
    // Ctrl-C reached the compiler, but system() kept it from this process: pass it on
    // (`lathe tune` and the REPL stop after the batch; elsewhere it ends the process)
    std::raise(SIGINT);
    throw UserError("C backend: the compiler was interrupted (Ctrl-C)");
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

}  // namespace

// Never dlclose: OpenMP worker threads (and the profiler's callers) may still hold code
// addresses in the object at process exit; unloading it then crashes. Kernels stay mapped
// for the life of the process, like JIT code.
SharedObject::~SharedObject() = default;

void* SharedObject::symbol(const std::string& name) const {
  void* p = dlsym(handle, name.c_str());
  if (!p) throw UserError("C backend: symbol '" + name + "' missing from " + path);
  return p;
}

std::string c_compiler() {
  const char* cc = std::getenv("CC");
  return cc && *cc ? cc : "cc";
}

std::string c_compiler_identity() {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mu);
  std::string cc = c_compiler();
  auto it = known.find(cc);
  if (it != known.end()) return it->second;
  std::string out;
  int rc = run_command(shell_quote(cc) + " --version", &out);
  if (rc != 0)
    throw UserError("C backend: no working C compiler: '" + cc + " --version' failed (exit " + std::to_string(rc) +
                    "). Install gcc or set CC to a C compiler, or use --backend interp.");
  std::string id = out.substr(0, out.find('\n'));
  known[cc] = id;
  return id;
}

// -O2 plus the vectorizer, not -O3: GCC 12.2 at -O3 miscompiles a max-reduction under a
// loop-invariant condition (tests/backends/regressions_test.cpp, ReduceUnderShiftedView;
// also with AVX2 only). The kernels' hot loops are unrolled and blocked in the loop IR, so
// -O3's extra unrolling buys little. No -fno-trapping-math: with it GCC folds
// (float)(int)x into truncf(x), which keeps -0.0 (IntRoundTripKeepsPositiveZero).
std::string c_default_flags() {
  return "-O2 -ftree-vectorize -fvect-cost-model=dynamic -march=native -std=gnu11 -fPIC -shared -fopenmp "
         "-fno-math-errno -fwrapv -w";
}

CCompileResult compile_c_shared(const std::string& source, const std::string& extra, bool use_cache) {
  auto t0 = std::chrono::steady_clock::now();
  std::string cc = c_compiler();
  std::string id = c_compiler_identity();
  std::string flags = c_default_flags() + (extra.empty() ? "" : " " + extra);
  std::string key = cache_key({source, "c", cc, id, flags, cpu_model()});
  std::string so_path = cache_path("c", key + ".so");
  CCompileResult r;
  r.command = cc + " " + flags + " -o " + so_path + " " + key + ".c";
  auto load = [&](const std::string& path) -> std::shared_ptr<SharedObject> {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) return nullptr;
    auto so = std::make_shared<SharedObject>();
    so->handle = h;
    so->path = path;
    if (!dlsym(h, "lathe_c_abi_v1")) return nullptr;  // not ours / truncated: rebuild
    return so;
  };
  if (use_cache && file_exists(so_path)) {
    if (auto so = load(so_path)) {
      r.so = so;
      r.from_cache = true;
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return r;
    }
    std::remove(so_path.c_str());  // corrupt or unloadable: rebuild, never trust it
  }
  std::string c_path = temp_path_for(cache_path("c", key)) + ".c";
  std::string tmp_so = temp_path_for(so_path);
  {
    std::ofstream f(c_path);
    f << source << "\nconst int lathe_c_abi_v1 = 1;\n";
    if (!f) throw UserError("C backend: cannot write " + c_path + " (is the cache directory writable?)");
  }
  std::string out;
  int rc = run_command(shell_quote(cc) + " " + flags + " -o " + shell_quote(tmp_so) + " " + shell_quote(c_path), &out);
  if (rc != 0) {
    std::remove(tmp_so.c_str());
    std::string kept = c_path;
    throw UserError("C backend: the C compiler failed (exit " + std::to_string(rc) + ") on generated code; source kept at " +
                    kept + "\n  command: " + cc + " " + flags + "\n  compiler output (first lines):\n" + first_lines(out, 12));
  }
  std::remove(c_path.c_str());
  std::string final_path = so_path;
  if (!use_cache || std::rename(tmp_so.c_str(), so_path.c_str()) != 0) final_path = tmp_so;
  auto so = load(final_path);
  if (!so) {
    const char* err = dlerror();
    throw UserError("C backend: cannot load the compiled kernels " + final_path + ": " + (err ? err : "missing ABI marker"));
  }
  if (final_path == tmp_so) std::remove(tmp_so.c_str());  // loaded; the file is no longer needed
  r.so = so;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string compile_c_asm(const std::string& source, const std::string& extra) {
  std::string cc = c_compiler();
  c_compiler_identity();
  std::string flags = c_default_flags() + (extra.empty() ? "" : " " + extra);
  // drop -shared/-fPIC irrelevance: -S works with them
  std::string base = temp_path_for(cache_path("c", "asm"));
  std::string c_path = base + ".c", s_path = base + ".s";
  {
    std::ofstream f(c_path);
    f << source;
  }
  std::string out;
  int rc = run_command(shell_quote(cc) + " " + flags + " -S -fno-asynchronous-unwind-tables -o " + shell_quote(s_path) + " " +
                           shell_quote(c_path), &out);
  std::remove(c_path.c_str());
  if (rc != 0) {
    std::remove(s_path.c_str());
    throw UserError("C backend: cc -S failed:\n" + first_lines(out, 12));
  }
  std::string text = read_file(s_path);
  std::remove(s_path.c_str());
  return text;
}

}  // namespace lathe
