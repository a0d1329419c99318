// tier_helpers.h — what the tiered-compile tests share (tier_test.cpp, tier_detach_test.cpp):
// a salt for cache keys no earlier run wrote, the interpreter comparison, whether a compile
// started on quick code, and a later start that must load the full tier from the cache.
#pragma once
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>

#include "backends/backend.h"
#include "core/runtime/compare.h"

namespace lathe::tier_test {

inline double fresh_salt() { return 1 + static_cast<double>(std::random_device{}() % 1000003) * 1e-7; }

inline void expect_like_interp(Executable& exe, const TensorMap& in, const TensorMap& want, const std::string& what) {
  TensorMap got = exe.run(in);
  for (auto& [name, t] : want) {
    std::string why;
    EXPECT_TRUE(allclose(got.at(name), t, 1e-4, 1e-4, &why)) << what << ", " << name << ": " << why;
  }
}

inline bool is_quick(const CompiledProgram& cp) { return cp.command.find("quick tier") != std::string::npos; }

// A later start, tiered or not, loads the full tier's entry from the cache, and its results
// are the interpreter's.
inline void expect_full_from_cache(Backend& b, const Graph& g, const TensorMap& in, const TensorMap& want,
                                   const std::string& what) {
  for (bool tier : {true, false}) {
    CompileOptions o;
    o.tier = tier;
    Program p = build_program(g);
    auto cp = b.compile(p, o);
    EXPECT_TRUE(cp->from_cache) << what << ", tier " << tier;
    EXPECT_FALSE(is_quick(*cp)) << what << ": " << cp->command;
    Executable exe(std::move(p), cp, "llvm");
    expect_like_interp(exe, in, want, what + ": the full code from the cache, tier " + std::to_string(tier));
  }
}

}  // namespace lathe::tier_test
