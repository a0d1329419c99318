// inspector.cpp — the inspector window (see inspector.h).
//
// [SECTION] helpers: key/value rows, node links
// [SECTION] one node
// [SECTION] a composite group
// [SECTION] the graph summary
#include "views/inspector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "core/ir/text.h"
#include "core/runtime/host_tensor.h"
#include "views/display_graph.h"

namespace lathe::views {

namespace {

//-----------------------------------------------------------------------------
// [SECTION] helpers: key/value rows, node links
//-----------------------------------------------------------------------------

bool begin_props(const char* id) {
  if (!ImGui::BeginTable(id, 2, ImGuiTableFlags_RowBg)) return false;
  ImGui::TableSetupColumn("key", ImGuiTableColumnFlags_WidthFixed, 90.0f);
  ImGui::TableSetupColumn("value", ImGuiTableColumnFlags_WidthStretch);
  return true;
}

void prop(const char* key, const std::string& value) {
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextDisabled("%s", key);
  ImGui::TableSetColumnIndex(1);
  ImGui::TextWrapped("%s", value.c_str());
}

// A clickable line naming a node; clicking selects it and centres the graph view on it.
void node_link(AppState& s, NodeRef n, const char* prefix = "") {
  std::string label = std::string(prefix) + "%" + std::to_string(n->id) + "  " + node_summary(n) + "   " + node_type(n);
  ImGui::PushID(static_cast<int>(n->id));
  if (ImGui::Selectable(label.c_str(), false)) s.select_node(static_cast<int>(n->id), true);
  if (ImGui::IsItemHovered() && !n->prov.path.empty()) ImGui::SetTooltip("in %s", n->prov.path.c_str());
  ImGui::PopID();
}

// A long list of node links: only the rows on screen are formatted and submitted (a
// 50,000-node graph has thousands of inputs, and this runs every frame).
void node_links(AppState& s, const std::vector<NodeRef>& nodes) {
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(nodes.size()));
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) node_link(s, nodes[i]);
}

// What the summary and group views list, computed once per graph version (and group),
// not per frame.
struct InspectorCache {
  uint64_t version = ~0ull;
  std::vector<std::pair<std::string, int>> op_counts;
  std::string group;
  std::vector<NodeRef> group_members;
};
InspectorCache& cache_for(const AppState& s) {
  static InspectorCache c;
  if (c.version != s.version) c = InspectorCache{}, c.version = s.version;
  return c;
}

std::string ints_to_string(const std::vector<int>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

//-----------------------------------------------------------------------------
// [SECTION] one node
//-----------------------------------------------------------------------------

// The kernels that compute n (a node inlined into several kernels is recomputed in each);
// clicking one selects it.
void kernel_rows(AppState& s, NodeRef n) {
  const KernelGraph& kg = s.compiled->program().kg;
  ImGui::TableNextRow();
  ImGui::TableSetColumnIndex(0);
  ImGui::TextDisabled("kernel");
  ImGui::TableSetColumnIndex(1);
  auto it = kg.kernels_of.find(n);
  if (it == kg.kernels_of.end() || it->second.empty()) {
    ImGui::TextDisabled(kg.materialized(n) ? "none: a buffer (input or constant)" : "none");
    return;
  }
  for (int k : it->second) {
    ImGui::PushID(k);
    std::string label = kg.kernels[k].name;
    double ms = s.compiled->kernel_ms(k);
    char t[48];
    std::snprintf(t, sizeof t, "  (%.4f ms)", ms);
    if (ms >= 0) label += t;
    if (ImGui::Selectable(label.c_str(), s.selected_kernel == k)) s.select_kernel(k);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("select the kernel (Kernels panel shows its code)");
    ImGui::PopID();
  }
}

// A constant's values: min / max / mean / std over its elements (computed once per node
// and kept: a weight of millions of elements takes a few ms).
std::string const_stats(NodeRef n) {
  static std::map<uint32_t, std::string> cache;
  auto it = cache.find(n->id);
  if (it != cache.end()) return it->second;
  std::string r;
  if (!n->attrs.data) {
    r = is_float(n->dtype) ? std::to_string(n->attrs.f) : std::to_string(n->attrs.i);
  } else {
    const HostTensor& t = *n->attrs.data;
    double mn = 0, mx = 0, sum = 0, sq = 0;
    int64_t count = t.numel();
    for (int64_t i = 0; i < count; ++i) {
      double v = t.get_f64(i);
      if (i == 0 || v < mn) mn = v;
      if (i == 0 || v > mx) mx = v;
      sum += v, sq += v * v;
    }
    double mean = count ? sum / count : 0, var = count ? std::max(0.0, sq / count - mean * mean) : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, "min %.4g · max %.4g · mean %.4g · std %.4g", mn, mx, mean, std::sqrt(var));
    r = buf;
  }
  cache.emplace(n->id, r);
  return r;
}

void node_attributes(NodeRef n) {
  const Attrs& a = n->attrs;
  switch (n->op) {
    case Op::Input: prop("name", a.name); break;
    case Op::Const:
      if (a.data) prop("value", "tensor literal " + a.data->shape_string()), prop("stats", const_stats(n));
      else prop("value", is_float(n->dtype) ? std::to_string(a.f) : std::to_string(a.i));
      break;
    case Op::Index: prop("axis", std::to_string(a.axis)); break;
    case Op::Take: prop("axis", std::to_string(a.axis)); break;
    case Op::Reduce:
      prop("reduce", std::string(reduce_op_name(a.reduce)));
      prop("axes", ints_to_string(a.axes));
      break;
    case Op::View:
      if (a.view) {
        prop("view", a.view->to_string());
        if (!n->inputs.empty()) prop("contiguous", a.view->is_contiguous_of(n->inputs[0]->shape) ? "yes" : "no");
        prop("masked", a.view->has_mask() ? "yes (padding)" : "no");
      }
      break;
    case Op::Extern: {
      prop("kernel", a.name);
      std::string ints;
      for (size_t i = 0; i < a.ints.size(); ++i) ints += (i ? ", " : "") + std::to_string(a.ints[i]);
      prop("ints", "[" + ints + "]");
      break;
    }
    default: break;
  }
}

void inspect_node(AppState& s, NodeRef n, const Fonts& fonts) {
  ImGui::Text("%s", node_summary(n).c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("%%%u · %s", n->id, std::string(category_name(n->info().category)).c_str());
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("%s", std::string(n->info().doc).c_str());
  ImGui::PopStyleColor();
  if (begin_props("node")) {
    prop("dtype", std::string(dtype_name(n->dtype)));
    prop("shape", shape_to_string(n->shape));
    prop("numel", shape_numel(n->shape).to_string());
    auto out = s.output_name.find(n);
    if (out != s.output_name.end()) prop("output", out->second);
    node_attributes(n);
    ImGui::EndTable();
  }

  // Weights and constants it reads are drawn as its attributes, not boxes: listed here.
  std::vector<NodeRef> weights;   // the Const or Input behind each (through views)
  for (NodeRef in : n->inputs)
    if (NodeRef w = weight_root(in); w && std::find(weights.begin(), weights.end(), w) == weights.end()) weights.push_back(w);
  std::string w_label = "Weights and constants (" + std::to_string(weights.size()) + ")###weights";
  if (!weights.empty() && ImGui::CollapsingHeader(w_label.c_str(), ImGuiTreeNodeFlags_DefaultOpen) &&
      ImGui::BeginTable("weights", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("name");
    ImGui::TableSetupColumn("dtype");
    ImGui::TableSetupColumn("shape");
    ImGui::TableSetupColumn("values");
    ImGui::TableHeadersRow();
    for (NodeRef w : weights) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::PushID(static_cast<int>(w->id));
      std::string name = w->op == Op::Input ? w->attrs.name : "%" + std::to_string(w->id) + " const";
      if (ImGui::Selectable(name.c_str(), false)) s.select_node(static_cast<int>(w->id), true);
      ImGui::PopID();
      ImGui::TableSetColumnIndex(1);
      ImGui::TextUnformatted(std::string(dtype_name(w->dtype)).c_str());
      ImGui::TableSetColumnIndex(2);
      ImGui::TextUnformatted(shape_to_string(w->shape).c_str());
      ImGui::TableSetColumnIndex(3);
      if (w->op == Op::Const) ImGui::TextWrapped("%s", const_stats(w).c_str());
      else ImGui::TextDisabled("an input: Run (Values) for its values");
    }
    ImGui::EndTable();
  }

  inspect_quantization(s, n);

  // After a run the values come first: that is what the user ran for.
  const bool ran = s.run && s.run->graph_version == s.version;
  if (ran && ImGui::CollapsingHeader("Values", ImGuiTreeNodeFlags_DefaultOpen)) inspect_values(s, n);
  if (ImGui::CollapsingHeader("Provenance", ImGuiTreeNodeFlags_DefaultOpen) && begin_props("prov")) {
    prop("composite", n->prov.path.empty() ? "(written by the user)" : n->prov.path);
    prop("made by", n->prov.step < 0 ? "the original graph" : "rewrite step " + std::to_string(n->prov.step));
    prop("pass", n->prov.backward ? "backward (autodiff)" : "forward");
    if (s.compiled) kernel_rows(s, n);
    ImGui::EndTable();
  }
  std::string in_label = "Inputs (" + std::to_string(n->inputs.size()) + ")###inputs";
  if (ImGui::CollapsingHeader(in_label.c_str(), ImGuiTreeNodeFlags_DefaultOpen)) {
    for (size_t i = 0; i < n->inputs.size(); ++i) node_link(s, n->inputs[i], (std::to_string(i) + ": ").c_str());
    if (n->inputs.empty()) ImGui::TextDisabled("none: a source");
  }
  auto u = s.users.find(n);
  size_t nusers = u == s.users.end() ? 0 : u->second.size();
  std::string users_label = "Users (" + std::to_string(nusers) + ")###users";
  if (ImGui::CollapsingHeader(users_label.c_str(), ImGuiTreeNodeFlags_DefaultOpen)) {
    if (nusers)
      for (NodeRef user : u->second) node_link(s, user);
    else ImGui::TextDisabled(s.output_name.count(n) ? "none: a graph output" : "none");
  }
  if (ImGui::CollapsingHeader("Text IR", ImGuiTreeNodeFlags_DefaultOpen)) {
    std::string text;
    try {
      text = print_node(n);
    } catch (const std::exception& e) {
      text = std::string("(cannot print: ") + e.what() + ")";
    }
    ImGui::PushFont(fonts.mono);
    ImGui::TextWrapped("%s", text.c_str());
    ImGui::PopFont();
  }
  if (!ran && ImGui::CollapsingHeader("Values", ImGuiTreeNodeFlags_DefaultOpen)) inspect_values(s, n);
}

//-----------------------------------------------------------------------------
// [SECTION] a composite group
//-----------------------------------------------------------------------------

void inspect_group(AppState& s, const std::string& path) {
  ImGui::Text("scope %s", path.c_str());
  InspectorCache& c = cache_for(s);
  if (c.group != path || c.group_members.empty()) {
    c.group = path;
    c.group_members.clear();
    for (NodeRef n : s.topo)
      if (n->prov.path == path || n->prov.path.rfind(path + "/", 0) == 0) c.group_members.push_back(n);
  }
  const std::vector<NodeRef>& members = c.group_members;
  ImGui::TextDisabled("%zu primitive node%s", members.size(), members.size() == 1 ? "" : "s");
  if (ImGui::Button("Expand")) {
    if (s.level == Level::Primitive) s.set_level(Level::Tensor);
    s.expand(path);
  }
  ImGui::Separator();
  node_links(s, members);
}

//-----------------------------------------------------------------------------
// [SECTION] the graph summary
//-----------------------------------------------------------------------------

void graph_summary(AppState& s) {
  if (!s.has_graph) {
    ImGui::TextDisabled("No graph loaded. File > Open… or `lathe gui FILE`.");
    return;
  }
  ImGui::Text("%s", s.title.c_str());
  ImGui::TextDisabled("%zu nodes · %zu inputs · %zu outputs — click a box to inspect it", s.topo.size(),
                      s.graph.inputs.size(), s.graph.outputs.size());
  if (ImGui::CollapsingHeader("Inputs", ImGuiTreeNodeFlags_DefaultOpen))
    node_links(s, s.graph.inputs);
  if (ImGui::CollapsingHeader("Outputs", ImGuiTreeNodeFlags_DefaultOpen))
    for (auto& [name, n] : s.graph.outputs) node_link(s, n, (name + " = ").c_str());
  if (ImGui::CollapsingHeader("Ops", ImGuiTreeNodeFlags_DefaultOpen) && begin_props("ops")) {
    InspectorCache& cache = cache_for(s);
    if (cache.op_counts.empty()) {
      std::map<std::string, int> count;
      for (NodeRef n : s.topo) ++count[std::string(n->info().name)];
      cache.op_counts.assign(count.begin(), count.end());
    }
    for (auto& [op, c] : cache.op_counts) prop(op.c_str(), std::to_string(c));
    ImGui::EndTable();
  }
}

}  // namespace

void draw_inspector(AppState& s, const Fonts& fonts) {
  if (NodeRef n = s.selected_node()) inspect_node(s, n, fonts);
  else if (!s.selected_group.empty()) inspect_group(s, s.selected_group);
  else graph_summary(s);
}

}  // namespace lathe::views
