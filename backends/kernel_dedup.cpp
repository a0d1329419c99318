// kernel_dedup.cpp — see kernel_dedup.h.
#include "backends/kernel_dedup.h"

#include <cctype>
#include <unordered_map>
#include <unordered_set>

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

std::string shape_free_key(const loop::LoopFunc& f) {
  const std::string text = code_key(f);
  std::string out;
  out.reserve(text.size());
  // part of a name or of a float at text[k]: a letter, digit, '_', or a '.' that is not half
  // of a range's ".." (for i in 0..16)
  auto word = [&](size_t k) {
    char c = text[k];
    if (c == '.') return !((k > 0 && text[k - 1] == '.') || (k + 1 < text.size() && text[k + 1] == '.'));
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (size_t i = 0; i < text.size();) {
    // a literal: digits not inside a name (i3, tab0) or a float (0.5 stays: values are code)
    // (after a '-' that follows a name or a digit it is an exponent, 1e-05, and stays)
    bool minus = i > 0 && text[i - 1] == '-';
    bool starts = std::isdigit(static_cast<unsigned char>(text[i])) && (i == 0 || !word(i - 1)) &&
                  !(minus && i > 1 && word(i - 2));
    size_t j = i;
    while (starts && j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (starts && (j == text.size() || !word(j))) {
      if (minus) out.pop_back();  // a negative literal
      out += '#';
      i = j;
    } else {
      out += text[i++];
    }
  }
  return out;
}

size_t distinct_up_to_constants(const std::vector<const loop::LoopFunc*>& funcs) {
  std::unordered_set<std::string> keys;
  for (auto* f : funcs) keys.insert(shape_free_key(*f));
  return keys.size();
}

}  // namespace lathe
