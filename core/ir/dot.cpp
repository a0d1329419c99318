// dot.cpp — node grouping per drawing level, and the Graphviz DOT text of a grouped graph.
#include "core/ir/dot.h"

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "core/ir/diag.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

std::optional<DotLevel> dot_level_from_name(std::string_view name) {
  if (name == "primitive") return DotLevel::Primitive;
  if (name == "tensor") return DotLevel::Tensor;
  if (name == "kernel") return DotLevel::Kernel;
  return std::nullopt;
}

std::string_view dot_level_name(DotLevel level) {
  switch (level) {
    case DotLevel::Primitive: return "primitive";
    case DotLevel::Tensor: return "tensor";
    case DotLevel::Kernel: return "kernel";
  }
  return "?";
}

std::string_view op_color(Op op) {
  if (op == Op::Input) return "#cfe2ff";
  if (op == Op::Const) return "#e8e8e8";
  switch (op_info(op).category) {
    case OpCategory::Source: return "#e2dcf5";
    case OpCategory::Movement: return "#fff2cc";
    case OpCategory::Memory: return "#f4cccc";
    case OpCategory::Unary: return "#d9ead3";
    case OpCategory::Binary: return "#d0e0e3";
    case OpCategory::Ternary: return "#d9d2e9";
    case OpCategory::Reduce: return "#fce5cd";
    case OpCategory::Extern: return "#ead1dc";
  }
  return "#ffffff";
}

namespace {

std::string short_number(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

std::string int_list(const std::vector<int>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

std::string last_component(const std::string& path) {
  size_t k = path.rfind('/');
  return k == std::string::npos ? path : path.substr(k + 1);
}

}  // namespace

std::string node_summary(NodeRef n) {
  std::string op(op_name(n->op));
  const Attrs& a = n->attrs;
  switch (n->op) {
    case Op::Input: return op + " " + a.name;
    case Op::Const:
      if (a.data) return op + " tensor" + a.data->shape_string();
      return op + " " + short_number(n->const_value());
    case Op::Index: case Op::Take: return op + " axis=" + std::to_string(a.axis);
    case Op::Reduce: return op + " " + std::string(reduce_op_name(a.reduce)) + " " + int_list(a.axes);
    case Op::Extern: return op + " " + a.name;
    case Op::View: return a.view && a.view->has_mask() ? op + " (masked)" : op;
    default: return op;
  }
}

GroupedGraph group_graph(const Graph& g, const DotOptions& opt) {
  if (opt.level == DotLevel::Kernel && !opt.group_of)
    throw UserError("the kernel level needs the scheduler's kernels (no kernel grouping is available yet)");
  GroupedGraph gg;
  gg.order = g.toposort();
  std::map<int, int> kernel_box;  // kernel index -> group
  for (NodeRef n : gg.order) {
    int box = -1;
    if (opt.level == DotLevel::Tensor && n->op != Op::Input && !n->prov.path.empty() && !gg.groups.empty()) {
      // joins the previous box when it is the same composite call (consecutive, same path)
      NodeGroup& last = gg.groups.back();
      if (last.collapsed && last.path == n->prov.path) box = static_cast<int>(gg.groups.size()) - 1;
    } else if (opt.level == DotLevel::Kernel) {
      int k = opt.group_of(n);
      if (k >= 0) {
        auto it = kernel_box.find(k);
        if (it != kernel_box.end()) box = it->second;
        else {
          NodeGroup kg;
          kg.name = static_cast<size_t>(k) < opt.group_names.size() ? opt.group_names[k] : "kernel " + std::to_string(k);
          kg.collapsed = true;
          gg.groups.push_back(std::move(kg));
          box = kernel_box[k] = static_cast<int>(gg.groups.size()) - 1;
        }
      }
    }
    if (box < 0) {
      NodeGroup ng;
      if (opt.level == DotLevel::Tensor && n->op != Op::Input && !n->prov.path.empty()) {
        ng.name = last_component(n->prov.path);
        ng.path = n->prov.path;
        ng.collapsed = true;
      } else {
        ng.name = node_summary(n);
      }
      gg.groups.push_back(std::move(ng));
      box = static_cast<int>(gg.groups.size()) - 1;
    }
    gg.groups[box].nodes.push_back(n);
    gg.group_of[n] = box;
  }
  std::set<std::tuple<int, int, NodeRef>> seen;
  for (NodeRef n : gg.order)
    for (NodeRef in : n->inputs) {
      int from = gg.group_of.at(in), to = gg.group_of.at(n);
      if (from == to) continue;
      if (seen.insert({from, to, in}).second) gg.edges.push_back({from, to, in});
    }
  for (auto& [name, n] : g.outputs)
    if (n) gg.outputs.push_back({name, gg.group_of.at(n)});
  return gg;
}

namespace {


std::string type_text(NodeRef n) { return std::string(dtype_name(n->dtype)) + shape_to_string(n->shape); }

// A cluster tree over provenance path prefixes, so nested composites nest visually.
struct Cluster {
  std::map<std::string, Cluster> children;  // by component name
  std::vector<int> boxes;
};

void emit_cluster(std::ostringstream& os, const Cluster& c, const std::string& prefix, const std::string& indent,
                  int& counter, const std::vector<std::string>& box_lines) {
  for (int b : c.boxes) os << indent << box_lines[b] << "\n";
  for (auto& [name, child] : c.children) {
    std::string path = prefix.empty() ? name : prefix + "/" + name;
    os << indent << "subgraph cluster_" << counter++ << " {\n"
       << indent << "  label=" << dot_quote(name) << "; tooltip=" << dot_quote(path)
       << "; style=\"rounded,dashed\"; color=\"#999999\"; fontcolor=\"#666666\";\n";
    emit_cluster(os, child, path, indent + "  ", counter, box_lines);
    os << indent << "}\n";
  }
}

}  // namespace

std::string dot_quote(std::string_view s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    if (static_cast<unsigned char>(c) < 0x20) continue;
    r += c;
  }
  return r + "\"";
}

std::string graph_to_dot(const Graph& g, const DotOptions& opt) {
  GroupedGraph gg = group_graph(g, opt);
  std::unordered_map<NodeRef, size_t> number;
  for (size_t i = 0; i < gg.order.size(); ++i) number[gg.order[i]] = i;

  std::ostringstream os;
  os << "digraph lathe {\n"
     << "  rankdir=TB; newrank=true;\n"
     << "  graph [fontname=\"Helvetica\", fontsize=11";
  if (!opt.title.empty()) os << ", label=" << dot_quote(opt.title) << ", labelloc=t";
  os << "];\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
     << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";

  std::vector<std::string> box_lines(gg.groups.size());
  for (size_t b = 0; b < gg.groups.size(); ++b) {
    const NodeGroup& grp = gg.groups[b];
    std::ostringstream line;
    line << "g" << b << " [";
    if (grp.collapsed) {
      NodeRef last = grp.nodes.back();
      std::string label = grp.name + "\n" + std::to_string(grp.nodes.size()) + " op" +
                          (grp.nodes.size() == 1 ? "" : "s") + " → " + type_text(last);
      line << "label=" << dot_quote(label) << ", fillcolor=\"" << kCompositeColor << "\", peripheries=2"
           << ", tooltip=" << dot_quote(grp.path.empty() ? grp.name : grp.path);
    } else {
      NodeRef n = grp.nodes.front();
      std::string label = "%" + std::to_string(number.at(n)) + " " + node_summary(n) + "\n" + type_text(n);
      line << "label=" << dot_quote(label) << ", fillcolor=\"" << op_color(n->op) << "\"";
      if (n->op == Op::Input) line << ", shape=invhouse";
      if (!n->prov.path.empty()) line << ", tooltip=" << dot_quote(n->prov.path);
    }
    line << "];";
    box_lines[b] = line.str();
  }

  // Tensor level: composite boxes sit in clusters for their enclosing path.
  // A box whose path also encloses other boxes ("mlp" beside "mlp/matmul") sits inside
  // that cluster; any other box sits in the cluster of its parent path.
  std::set<std::string> enclosing;
  for (auto& grp : gg.groups)
    for (size_t k = grp.path.find('/'); k != std::string::npos; k = grp.path.find('/', k + 1))
      enclosing.insert(grp.path.substr(0, k));
  Cluster root;
  for (size_t b = 0; b < gg.groups.size(); ++b) {
    Cluster* c = &root;
    const NodeGroup& grp = gg.groups[b];
    if (opt.level == DotLevel::Tensor && grp.collapsed) {
      std::string where = enclosing.count(grp.path) ? grp.path : grp.path.substr(0, grp.path.size() - grp.name.size());
      std::istringstream parts(where);
      for (std::string part; std::getline(parts, part, '/');)
        if (!part.empty()) c = &c->children[part];
    }
    c->boxes.push_back(static_cast<int>(b));
  }
  int counter = 0;
  emit_cluster(os, root, "", "  ", counter, box_lines);

  for (auto& e : gg.edges) {
    os << "  g" << e.from << " -> g" << e.to;
    bool from_collapsed = gg.groups[e.from].collapsed || gg.groups[e.to].collapsed;
    if (opt.edge_labels && from_collapsed) os << " [label=" << dot_quote(type_text(e.value)) << "]";
    os << ";\n";
  }
  for (size_t i = 0; i < gg.outputs.size(); ++i) {
    os << "  out" << i << " [label=" << dot_quote(gg.outputs[i].first)
       << ", shape=house, style=filled, fillcolor=\"#ffe599\"];\n"
       << "  g" << gg.outputs[i].second << " -> out" << i << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace lathe
