// kernel_dedup.cpp — see kernel_dedup.h.
#include "backends/kernel_dedup.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

#include "core/loop/loop_print.h"

namespace lathe {

namespace {

void mention(const loop::ExprRef& e, std::vector<int>& order, std::vector<char>& seen) {
  if (!e) return;
  if (e->kind == loop::ExprKind::Load && e->buffer >= 0 && e->buffer < static_cast<int>(seen.size()) && !seen[e->buffer]) {
    seen[e->buffer] = 1;
    order.push_back(e->buffer);
  }
  for (auto& a : e->args) mention(a, order, seen);
}

}  // namespace

std::vector<int> canonical_buffer_order(const loop::LoopFunc& f) {
  std::vector<int> order;
  std::vector<char> seen(f.buffers.size(), 0);
  loop::walk(f.body, [&](const loop::Stmt& s) {
    // a store's index and value are read before it writes its buffer
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value}) mention(*e, order, seen);
    bool names_buffer = s.kind == loop::StmtKind::Store || s.kind == loop::StmtKind::Prefetch;
    if (names_buffer && s.buffer >= 0 && s.buffer < static_cast<int>(seen.size()) && !seen[s.buffer]) {
      seen[s.buffer] = 1;
      order.push_back(s.buffer);
    }
    return true;
  });
  for (size_t b = 0; b < seen.size(); ++b)
    if (!seen[b]) order.push_back(static_cast<int>(b));
  return order;
}

std::string code_key(const loop::LoopFunc& f) {
  // launch offsets (base_offsets.h) are arguments, not code; nor are the parameters' names
  // ('$' cannot start a local's name, so loads of a buffer and of a local array stay apart)
  // and their order
  std::vector<int> order = canonical_buffer_order(f);
  loop::LoopFunc g;
  g.dims = f.dims;
  g.kind = f.kind;
  g.schedule_log = f.schedule_log;
  g.body = f.body;
  g.buffers = f.buffers;
  for (size_t c = 0; c < order.size(); ++c) {
    auto& b = g.buffers[static_cast<size_t>(order[c])];
    b.offset = 0;
    b.name = "$" + std::to_string(c);
  }
  std::string text = loop::print_loop(g);
  // the header lists the parameters in the canonical order: print it from a body-less copy
  loop::LoopFunc head;
  head.dims = g.dims;
  head.kind = g.kind;
  for (int b : order) head.buffers.push_back(g.buffers[static_cast<size_t>(b)]);
  std::string line = loop::print_loop(head);
  line = line.substr(0, line.find('\n'));
  return line + text.substr(std::min(text.size(), text.find('\n')));
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
  for (auto* f : funcs) {
    r.keys.push_back(code_key(*f));
    r.orders.push_back(canonical_buffer_order(*f));
  }
  for (size_t i = 0; i < funcs.size(); ++i) {
    int j = first.emplace(r.keys[i], static_cast<int>(i)).first->second;
    r.first.push_back(j);
    r.args.emplace_back();
    const std::vector<int>& mine = r.orders[i];
    const std::vector<int>& theirs = r.orders[static_cast<size_t>(j)];
    if (mine == theirs) continue;
    // the first's parameter p sits at canonical position c (theirs[c] == p); this
    // function's buffer at that position is mine[c]
    std::vector<int>& a = r.args.back();
    a.assign(theirs.size(), -1);
    for (size_t c = 0; c < theirs.size(); ++c) a[static_cast<size_t>(theirs[c])] = mine[c];
  }
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
