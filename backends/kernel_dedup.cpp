// kernel_dedup.cpp — see kernel_dedup.h.
#include "backends/kernel_dedup.h"

#include <unordered_map>

#include "core/loop/loop_print.h"

namespace lathe {

std::string code_key(const loop::LoopFunc& f) {
  // launch offsets (base_offsets.h) are arguments, not code
  bool offsets = false;
  for (auto& b : f.buffers) offsets |= b.offset != 0;
  if (offsets) {
    loop::LoopFunc g = f;
    for (auto& b : g.buffers) b.offset = 0;
    return code_key(g);
  }
  std::string text = loop::print_loop(f);
  // print_loop starts with "kernel NAME(": drop the name
  std::string head = "kernel " + f.name + "(";
  if (text.compare(0, head.size(), head) == 0) text.replace(0, head.size(), "kernel (");
  return text;
}

size_t SameCode::distinct() const {
  size_t n = 0;
  for (size_t i = 0; i < first.size(); ++i) n += is_first(i);
  return n;
}

SameCode same_code(const std::vector<const loop::LoopFunc*>& funcs) {
  SameCode r;
  std::unordered_map<std::string_view, int> first;
  r.keys.reserve(funcs.size());
  for (auto* f : funcs) r.keys.push_back(code_key(*f));
  for (size_t i = 0; i < funcs.size(); ++i)
    r.first.push_back(first.emplace(r.keys[i], static_cast<int>(i)).first->second);
  return r;
}

}  // namespace lathe
