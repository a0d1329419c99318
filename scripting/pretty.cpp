// pretty.cpp — NumPy-like tensor printing, graph summaries and node one-liners.
#include "scripting/pretty.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "core/ir/text.h"

namespace lathe::script {

std::string format_scalar(double v, DType dt) {
  if (dt == DType::Bool) return v != 0 ? "true" : "false";
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (!is_float(dt)) {
    std::snprintf(buf, sizeof buf, "%lld", (long long)v);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.6g", v);
  std::string s = buf;
  if (s.find_first_of(".eni") == std::string::npos) s += ".";
  return s;
}

namespace {

struct Printer {
  const HostTensor& t;
  bool summarize;
  int edge;
  size_t width = 1;
  std::vector<int64_t> strides;

  std::string elem(int64_t i) const {
    if (is_float(t.dtype()) || t.dtype() == DType::Bool) return format_scalar(t.get_f64(i), t.dtype());
    if (t.dtype() == DType::U64) return std::to_string(static_cast<uint64_t>(t.get_i64(i)));
    return std::to_string(t.get_i64(i));
  }
  std::string pad(std::string s) const { return std::string(width > s.size() ? width - s.size() : 0, ' ') + s; }

  // Visits the indices printed along a dim of size n: all, or edge … edge.
  template <class F>
  void each(int64_t n, F f) const {
    if (!summarize || n <= 2 * edge) {
      for (int64_t i = 0; i < n; ++i) f(i, false);
      return;
    }
    for (int64_t i = 0; i < edge; ++i) f(i, false);
    f(-1, true);
    for (int64_t i = n - edge; i < n; ++i) f(i, false);
  }
  void measure(size_t dim, int64_t base) {
    if (dim == t.rank()) { width = std::max(width, elem(base).size()); return; }
    each(t.shape()[dim], [&](int64_t i, bool gap) { if (!gap) measure(dim + 1, base + i * strides[dim]); });
  }
  void print(std::ostringstream& os, size_t dim, int64_t base, int indent) const {
    if (dim == t.rank()) { os << pad(elem(base)); return; }
    os << '[';
    bool first = true;
    each(t.shape()[dim], [&](int64_t i, bool gap) {
      if (!first) {
        os << ',';
        if (dim + 1 == t.rank()) os << ' ';
        else os << std::string(t.rank() - dim - 1, '\n') << std::string(indent + 1, ' ');
      }
      first = false;
      if (gap) { os << "..."; return; }
      print(os, dim + 1, base + i * strides[dim], indent + 1);
    });
    os << ']';
  }
};

}  // namespace

std::string format_value(const HostTensor& t, int64_t threshold, int edge) {
  std::ostringstream os;
  const std::string prefix = "tensor(";
  if (!t.defined() && t.numel() != 0) return "tensor(<undefined>)";
  Printer p{t, t.numel() > threshold, edge};
  p.strides.assign(t.rank(), 1);
  for (int d = (int)t.rank() - 2; d >= 0; --d) p.strides[d] = p.strides[d + 1] * t.shape()[d + 1];
  os << prefix;
  if (t.numel() == 0) {
    os << "[]";
  } else {
    p.measure(0, 0);
    p.print(os, 0, 0, (int)prefix.size());
  }
  os << ", " << dtype_name(t.dtype());
  if (t.numel() == 0 || p.summarize) os << ", shape=" << t.shape_string();
  os << ")";
  return os.str();
}

std::string node_line(NodeRef n) {
  std::string s = print_node(n);
  if (!n->prov.path.empty()) s += "  (from " + n->prov.path + ")";
  if (n->prov.step >= 0) s += "  (step " + std::to_string(n->prov.step) + ")";
  return s;
}

std::string graph_summary(const Graph& g) {
  std::ostringstream os;
  auto nodes = g.toposort();
  std::map<std::string, int> by_op;
  std::map<std::string, int> by_composite;
  for (NodeRef n : nodes) {
    ++by_op[std::string(op_name(n->op))];
    if (!n->prov.path.empty()) ++by_composite[n->prov.path.substr(0, n->prov.path.find('/'))];
  }
  auto count = [](size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); };
  os << "graph: " << count(nodes.size(), "node") << ", " << count(g.inputs.size(), "input") << ", " << count(g.outputs.size(), "output") << "\n";
  os << "  ops:";
  for (auto& [op, c] : by_op) os << " " << op << "×" << c;
  os << "\n";
  if (!by_composite.empty()) {
    os << "  from:";
    for (auto& [name, c] : by_composite) os << " " << name << "×" << c;
    os << "\n";
  }
  for (NodeRef in : g.inputs)
    os << "  in  " << in->attrs.name << " : " << dtype_name(in->dtype) << shape_to_string(in->shape) << "\n";
  for (auto& [name, n] : g.outputs)
    os << "  out " << name << " : " << dtype_name(n->dtype) << shape_to_string(n->shape) << "  (%" << n->id << " "
       << op_name(n->op) << ")\n";
  auto syms = g.symbols();
  if (!syms.empty()) {
    os << "  symbols:";
    for (auto& s : syms) os << " " << s;
    os << "\n";
  }
  std::string s = os.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace lathe::script
