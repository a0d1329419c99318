// registry.cpp — the backend registry, Backend's shared helpers, and compile_graph().
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "core/ir/diag.h"
#include "core/runtime/kernel_cache.h"

namespace lathe {

namespace {

std::map<std::string, std::shared_ptr<Backend>>& table() {
  static std::map<std::string, std::shared_ptr<Backend>> t;
  return t;
}

// The compiles kept by keep_background_compile. Created on first use (after LLVM's own
// statics), so at exit it is destroyed, and waits, before them.
struct BackgroundCompiles {
  std::mutex mu;
  std::vector<std::thread> threads;
  void wait() {
    for (;;) {
      std::vector<std::thread> ts;
      {
        std::lock_guard<std::mutex> lock(mu);
        ts.swap(threads);
      }
      if (ts.empty()) return;
      for (auto& t : ts) t.join();
    }
  }
  ~BackgroundCompiles() { wait(); }
};

BackgroundCompiles& background() {
  static BackgroundCompiles b;
  return b;
}

struct DetachedCompiles {
  std::mutex mu;
  std::vector<DetachedCompile> kept;
};

DetachedCompiles& detached() {
  static DetachedCompiles d;
  return d;
}

// In the forked child: only this thread exists; run the compiles and leave without running
// the parent's atexit handlers or flushing its stdio buffers (_exit).
[[noreturn]] void run_detached_child(const std::vector<DetachedCompile>& cs, const std::vector<int>& locks) {
  ::setsid();
  int null = ::open("/dev/null", O_RDWR);
  if (null >= 0) {
    for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
    if (null > 2) ::close(null);
  }
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  for (int fd = 3; fd < max_fd; ++fd)
    if (std::find(locks.begin(), locks.end(), fd) == locks.end()) ::close(fd);
  int rc = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    try {
      cs[i].run();
    } catch (...) {
      rc = 1;
    }
    ::close(locks[i]);  // released as soon as its entry is written
  }
  ::_exit(rc);
}

}  // namespace

void keep_background_compile(std::thread t) {
  if (!t.joinable()) return;
  auto& b = background();
  std::lock_guard<std::mutex> lock(b.mu);
  b.threads.push_back(std::move(t));
}

void wait_background_compiles() { background().wait(); }

void keep_detached_compile(DetachedCompile c) {
  auto& d = detached();
  std::lock_guard<std::mutex> lock(d.mu);
  d.kept.push_back(std::move(c));
}

int detach_background_compiles() {
  wait_background_compiles();
  std::vector<DetachedCompile> kept;
  {
    auto& d = detached();
    std::lock_guard<std::mutex> lock(d.mu);
    kept.swap(d.kept);
  }
  std::vector<DetachedCompile> mine;
  std::vector<int> locks;
  for (auto& c : kept) {
    int fd = try_lock_exclusive(c.lock_path);
    if (fd < 0) continue;  // another process is writing that entry
    mine.push_back(std::move(c));
    locks.push_back(fd);
  }
  if (mine.empty()) return 0;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) run_detached_child(mine, locks);
  if (pid < 0) {
    for (auto& c : mine) {  // no child: compile here, as before
      try {
        c.run();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: %s\n", e.what());
      }
    }
  }
  for (int fd : locks) ::close(fd);  // the child holds them now
  return pid > 0 ? static_cast<int>(pid) : 0;
}

std::vector<std::shared_ptr<CompiledProgram>> Backend::compile_many(const std::vector<const Program*>& ps,
                                                                    const CompileOptions& o) {
  std::vector<std::shared_ptr<CompiledProgram>> r;
  for (const Program* p : ps) r.push_back(compile(*p, o));
  return r;
}

std::string Backend::supports_graph(const Graph& g) const {
  for (NodeRef n : g.toposort()) {
    std::string why = supports(n);
    if (!why.empty())
      return "node %" + std::to_string(n->id) + " (" + std::string(op_name(n->op)) + " " +
             std::string(dtype_name(n->dtype)) + shape_to_string(n->shape) + "): " + why;
  }
  return "";
}

void register_backend(std::shared_ptr<Backend> b) { table()[b->name()] = std::move(b); }

Backend* find_backend(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : it->second.get();
}

std::vector<std::string> backend_names() {
  std::vector<std::string> r;
  for (auto& [n, b] : table()) r.push_back(n);
  return r;
}

Backend& get_backend(const std::string& name) {
  if (Backend* b = find_backend(name)) return *b;
  std::string known;
  for (auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw UserError("unknown backend '" + name + "' (built into this binary: " + (known.empty() ? "none" : known) + ")");
}

std::string default_backend() {
  for (const char* n : {"llvm", "c", "interp"})
    if (Backend* b = find_backend(n); b && b->available().empty()) return n;
  return "interp";
}

Executable compile_graph(const Graph& g, const std::string& name, const BuildOptions& build, const CompileOptions& opts) {
  Backend& b = get_backend(name);
  if (std::string why = b.available(); !why.empty()) throw UserError("backend '" + name + "' is not available here: " + why);
  if (std::string why = b.supports_graph(g); !why.empty()) throw UserError("backend '" + name + "' cannot run " + why);
  Program p = build_program(g, build);
  auto compiled = b.compile(p, opts);
  return Executable(std::move(p), std::move(compiled), name);
}

}  // namespace lathe
