// text_print.cpp — the .lathe printer: print_graph() and print_node().
//
// The printed form is the exact inverse of text_parse.cpp (whose header comment holds the
// grammar): nodes are numbered densely %0..%N-1 in Graph::toposort() order, every field of
// Attrs an op uses is printed, and numbers print exactly (shortest round-trip decimal for
// the node's dtype; nan/inf/-inf as tokens), so print → parse → print is the identity.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/ir/sidecar.h"
#include "core/ir/text.h"
#include "core/ir/text_util.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

namespace {

bool is_bare_name(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  return true;
}

std::string quoted(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string r = "\"";
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
      ++i;
    } else if (c >= 0x20 && c < 0x7F) {
      r += static_cast<char>(c);
      ++i;
    } else if (size_t n = c >= 0x80 ? utf8_sequence_length(s, i) : 0) {
      r.append(s.substr(i, n));
      i += n;
    } else {
      r += "\\x";
      r += kHex[c >> 4];
      r += kHex[c & 15];
      ++i;
    }
  }
  return r + "\"";
}

std::string name_text(std::string_view s) { return is_bare_name(s) ? std::string(s) : quoted(s); }

// Exact text for a floating value held by a node of dtype dt (f32/f16/bf16 values are
// floats, so the shortest float form is exact and shorter than the double form).
std::string float_text(double v, DType dt) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = dt == DType::F64 ? std::to_chars(buf, buf + sizeof buf, v)
                              : std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, res.ptr);
}

std::string int_text(int64_t v, DType dt) {
  if (dt == DType::Bool) return v ? "true" : "false";
  if (dt == DType::U64) return std::to_string(static_cast<uint64_t>(v));  // the value, not its bits as i64
  return std::to_string(v);
}

std::string sym_list(const std::vector<SymInt>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + v[i].to_string();
  return r + "]";
}

template <class T>
std::string int_list(const std::vector<T>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

std::string tensor_literal(const HostTensor& t) {
  std::string r = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) r += ", ";
    r += is_float(t.dtype()) ? float_text(t.get_f64(i), t.dtype()) : int_text(t.get_i64(i), t.dtype());
  }
  return r + "]";
}

// The `{key=value …}` block: exactly the Attrs fields the op uses.
std::string attrs_text(NodeRef n, SidecarPlan* sidecar) {
  const Attrs& a = n->attrs;
  std::vector<std::string> kv;
  switch (n->op) {
    case Op::Input: kv.push_back("name=" + quoted(a.name)); break;
    case Op::Const:
      if (a.data && sidecar && a.data->numel() > kInlineElements) {
        uint64_t off = sidecar->add(a.data);
        kv.push_back("bin=[" + std::to_string(off) + ", " + std::to_string(a.data->nbytes()) + "]");
        kv.push_back("check=" + check_text(sidecar_check(a.data->data(), a.data->nbytes())));
      } else if (a.data) kv.push_back("data=" + tensor_literal(*a.data));
      else kv.push_back("value=" + (is_float(n->dtype) ? float_text(a.f, n->dtype) : int_text(a.i, n->dtype)));
      break;
    case Op::Index: case Op::Take: kv.push_back("axis=" + std::to_string(a.axis)); break;
    case Op::View:
      if (!a.view) break;
      kv.push_back("strides=" + sym_list(a.view->strides));
      if (a.view->offset != SymInt(0)) kv.push_back("offset=" + a.view->offset.to_string());
      if (a.view->has_mask()) {
        std::string m = "mask=[";
        for (size_t i = 0; i < a.view->mask.size(); ++i)
          m += (i ? ", [" : "[") + a.view->mask[i].first.to_string() + ", " + a.view->mask[i].second.to_string() + "]";
        kv.push_back(m + "]");
      }
      break;
    case Op::Reduce:
      kv.push_back("op=" + std::string(reduce_op_name(a.reduce)));
      kv.push_back("axes=" + int_list(a.axes));
      break;
    case Op::Extern:
      kv.push_back("name=" + quoted(a.name));
      if (!a.ints.empty()) kv.push_back("ints=" + int_list(a.ints));
      break;
    default: break;
  }
  if (kv.empty()) return "";
  std::string r = " {";
  for (size_t i = 0; i < kv.size(); ++i) r += (i ? " " : "") + kv[i];
  return r + "}";
}

std::string type_text(NodeRef n) { return std::string(dtype_name(n->dtype)) + shape_to_string(n->shape); }

std::string provenance_text(const Provenance& p) {
  std::string r;
  if (!p.path.empty()) r += " " + quoted(p.path);
  if (p.step >= 0) r += " step=" + std::to_string(p.step);
  if (p.backward) r += " backward";
  return r.empty() ? "" : "@" + r;
}

using IdOf = std::function<std::string(NodeRef)>;

// The statement without provenance: `%3 = Add(%1, %2) : f32[4]` or `in %0 x : f32[4]`.
std::string statement_text(NodeRef n, const IdOf& id, bool declared_input, SidecarPlan* sidecar = nullptr) {
  if (declared_input) return "in " + id(n) + " " + name_text(n->attrs.name) + " : " + type_text(n);
  std::string r = id(n) + " = " + std::string(op_name(n->op));
  if (!n->inputs.empty()) {
    r += "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) r += (i ? ", " : "") + id(n->inputs[i]);
    r += ")";
  }
  return r + attrs_text(n, sidecar) + " : " + type_text(n);
}

}  // namespace

std::string print_node(NodeRef n) {
  IdOf id = [](NodeRef x) { return "%" + std::to_string(x->id); };
  std::string s = statement_text(n, id, false);
  std::string p = provenance_text(n->prov);
  return p.empty() ? s : s + "  " + p;
}

std::string print_graph(const Graph& g) { return print_graph(g, nullptr); }

std::string print_graph(const Graph& g, SidecarPlan* sidecar) {
  std::vector<NodeRef> order = g.toposort();
  std::unordered_map<NodeRef, size_t> number;
  number.reserve(order.size());
  for (size_t i = 0; i < order.size(); ++i) number.emplace(order[i], i);
  IdOf id = [&](NodeRef x) { return "%" + std::to_string(number.at(x)); };
  std::unordered_set<NodeRef> declared(g.inputs.begin(), g.inputs.end());

  std::vector<std::pair<std::string, std::string>> lines;  // statement, provenance
  lines.reserve(order.size());
  size_t width = 0;
  for (NodeRef n : order) {
    lines.emplace_back(statement_text(n, id, n->op == Op::Input && declared.count(n), sidecar), provenance_text(n->prov));
    if (!lines.back().second.empty()) width = std::max(width, lines.back().first.size());
  }
  width = std::min<size_t>(width, 72);  // align provenance, but not past a long line

  std::string out = "# lathe 1\ngraph {\n";
  for (auto& [stmt, prov] : lines) {
    out += "  " + stmt;
    if (!prov.empty()) out += std::string(stmt.size() < width ? width - stmt.size() : 0, ' ') + "  " + prov;
    out += "\n";
  }
  for (auto& [name, n] : g.outputs) out += "  out " + name_text(name) + " = " + (n ? id(n) : "%?") + "\n";
  return out + "}\n";
}

}  // namespace lathe
