// compile_program.cpp — kernels → object files on several threads; the cache bundle.
// See compile_program.h.
#include "backends/llvm/compile_program.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <future>
#include <thread>

#include "backends/llvm/emit.h"
#include "backends/llvm/jit.h"

namespace lathe::llvmjit {

size_t ir_size(const loop::LoopFunc& f) {
  size_t n = 0;
  std::function<void(const loop::ExprRef&)> count = [&](const loop::ExprRef& e) {
    ++n;
    for (auto& a : e->args) count(a);
  };
  loop::walk(f.body, [&](const loop::Stmt&) { ++n; return true; });
  loop::walk_exprs(f.body, count);
  return n;
}

namespace {

std::vector<char> compile_group(const std::vector<const loop::LoopFunc*>& group, const std::string& name,
                                const DimRanges* ranges, bool quick) {
  static const bool timing = [] { const char* e = std::getenv("LATHE_LLVM_TIMING"); return e && *e && *e != '0'; }();
  auto t0 = std::chrono::steady_clock::now();
  llvm::LLVMContext ctx;
  auto m = emit_module(group, ctx, name, ranges);
  double emit_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CompileOutput out = compile_module(*m, false, false, quick);
  if (timing) {
    std::string names;
    for (auto* f : group) names += " " + f->name + "(" + std::to_string(ir_size(*f)) + ")";
    std::fprintf(stderr, "llvm-timing%s: %s emit %.1f opt %.1f codegen %.1f ms, %zu bytes:%s\n", quick ? "(quick)" : "", name.c_str(), emit_ms,
                 out.opt_ms, out.codegen_ms, out.object.size(), names.c_str());
  }
  return std::move(out.object);
}

constexpr char kMagic[] = "LATHEOBJS";  // 9 bytes, then u64 count, then (u64 size, bytes)*

void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }

}  // namespace

std::vector<std::vector<char>> compile_kernels(const std::vector<const loop::LoopFunc*>& funcs, int threads,
                                               const DimRanges* ranges, bool quick) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* e = std::getenv("LATHE_LLVM_TIMING"); e && std::string(e) == "each") {
    std::vector<std::vector<char>> objects;  // one kernel per module, one thread: per-kernel times
    for (auto* f : funcs) objects.push_back(compile_group({f}, f->name, ranges, quick));
    return objects;
  }
  size_t groups = std::min<size_t>({static_cast<size_t>(threads), funcs.size(), 16});
  if (groups <= 1) return {compile_group(funcs, "lathe_program", ranges, quick)};
  // longest first onto the lightest group (LPT), so the threads finish together
  std::vector<std::pair<size_t, const loop::LoopFunc*>> bysize;
  for (auto* f : funcs) bysize.push_back({ir_size(*f), f});
  std::stable_sort(bysize.begin(), bysize.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<std::vector<const loop::LoopFunc*>> part(groups);
  std::vector<size_t> load(groups, 0);
  for (auto& [size, f] : bysize) {
    size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    part[g].push_back(f);
    load[g] += size;
  }
  std::vector<std::future<std::vector<char>>> rest;
  for (size_t g = 1; g < groups; ++g)
    rest.push_back(std::async(std::launch::async, compile_group, part[g], "lathe_program." + std::to_string(g), ranges, quick));
  std::vector<std::vector<char>> objects;
  std::exception_ptr failed;
  try {
    objects.push_back(compile_group(part[0], "lathe_program.0", ranges, quick));
  } catch (...) {
    failed = std::current_exception();
  }
  for (auto& r : rest) {  // wait for every thread before leaving, even after a failure
    try {
      objects.push_back(r.get());
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  return objects;
}

std::string pack_objects(const std::vector<std::vector<char>>& objects) {
  std::string s(kMagic, sizeof kMagic - 1);
  put_u64(s, objects.size());
  for (auto& o : objects) {
    put_u64(s, o.size());
    s.append(o.data(), o.size());
  }
  return s;
}

bool unpack_objects(const std::vector<char>& blob, std::vector<std::vector<char>>& objects) {
  objects.clear();
  size_t pos = sizeof kMagic - 1;
  auto get_u64 = [&](uint64_t& v) {
    if (blob.size() - pos < sizeof v) return false;
    std::memcpy(&v, blob.data() + pos, sizeof v);
    pos += sizeof v;
    return true;
  };
  if (blob.size() < pos || std::memcmp(blob.data(), kMagic, pos) != 0) return false;
  uint64_t n = 0;
  if (!get_u64(n) || n == 0 || n > 1024) return false;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t size = 0;
    if (!get_u64(size) || size == 0 || blob.size() - pos < size) return false;
    objects.emplace_back(blob.begin() + static_cast<std::ptrdiff_t>(pos), blob.begin() + static_cast<std::ptrdiff_t>(pos + size));
    pos += size;
  }
  return pos == blob.size();
}

}  // namespace lathe::llvmjit
