// transform_detail.h — helpers shared by the schedule primitives' files (transform.cpp,
// transform_cache.cpp): finding a loop by name, refusing with a reason, fresh names.
// Internal to core/loop; users call the primitives in transform.h.
#pragma once
#include <string>
#include <vector>

#include "core/loop/loop_ir.h"

namespace lathe::loop::detail {

// A loop found by name: where it sits and the loops around it.
struct Found {
  std::vector<Stmt>* parent = nullptr;
  size_t index = 0;
  std::vector<const Stmt*> ancestors;  // enclosing loops, outermost first
  Stmt* get() const { return &(*parent)[index]; }
};

// The loop named `loop`, or UserError "<prim> <loop>: no such loop in k (loops: …)".
Found must_find(LoopFunc& f, const std::string& prim, const std::string& loop);
// Throws UserError "<prim> <what>: <why>".
[[noreturn]] void refuse(const std::string& prim, const std::string& what, const std::string& why);
// `base`, or base2, base3 … : a name no statement of f declares yet.
std::string fresh(const LoopFunc& f, const std::string& base);
// Why the iterations of `loop` are not independent (a store every iteration makes to the
// same element, an outer local they update), or "" (what parallel checks).
std::string racing_store_in(const Stmt& loop);

}  // namespace lathe::loop::detail
