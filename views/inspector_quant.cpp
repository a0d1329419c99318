// inspector_quant.cpp — Inspector > Quantization: the quantization sites near the selected
// node (core/rewrite/quant_info.h: the integer tensor, its scales and zero point, each a
// link), and, when the graph shown comes from a quantize step, the error it introduced per
// output against the float graph (measured on seeded inputs as a background job).
#include <imgui.h>

#include <cstdio>

#include "views/app_actions.h"
#include "views/inspector.h"

namespace lathe::views {

const std::vector<QuantSite>& quant_sites(const AppState& s, NodeRef n) {
  static uint64_t version = ~0ull;
  static uint32_t node = ~0u;
  static std::vector<QuantSite> sites;
  if (!n) {
    static const std::vector<QuantSite> none;
    return none;
  }
  if (version != s.version || node != n->id) {
    version = s.version, node = n->id;
    sites = describe_quantization(n, [&s](NodeRef x) {
      auto it = s.users.find(x);
      return it == s.users.end() ? std::vector<NodeRef>{} : it->second;
    });
  }
  return sites;
}

namespace {

void quant_errors_table(AppState& s) {
  const bool measured = s.quant_errors && s.quant_errors->version == s.version;
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  ImGui::TextWrapped("error against the float graph before %s, on seeded inputs:", s.quant_step.c_str());
  ImGui::PopStyleColor();
  if (measured) {
    if (ImGui::BeginTable("quant-errors", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
      ImGui::TableSetupColumn("output");
      ImGui::TableSetupColumn("max|d| / max|ref|");
      ImGui::TableSetupColumn("cosine");
      ImGui::TableHeadersRow();
      for (const QuantError& e : s.quant_errors->errors) {
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        ImGui::TextUnformatted(e.output.c_str());
        ImGui::TableSetColumnIndex(1);
        ImGui::Text("%.4g", e.rel_max);
        ImGui::TableSetColumnIndex(2);
        ImGui::Text("%.6f", e.cosine);
      }
      ImGui::EndTable();
    }
    ImGui::TextDisabled("(run on %s)", s.quant_errors->backend.c_str());
  }
  ImGui::BeginDisabled(s.jobs.busy());
  if (ImGui::Button(measured ? "Measure again" : "Measure the error")) start_quant_error(s);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("run the float graph and this one on the same seeded inputs (default backend) and compare each output");
}

}  // namespace

void inspect_quantization(AppState& s, NodeRef n) {
  const std::vector<QuantSite>& sites = quant_sites(s, n);
  if (sites.empty() && !s.quant_float) return;
  std::string label = "Quantization (" + std::to_string(sites.size()) + ")###quantization";
  if (!ImGui::CollapsingHeader(label.c_str(), ImGuiTreeNodeFlags_DefaultOpen)) return;
  if (sites.empty()) ImGui::TextDisabled("no quantize / dequantize near this node");
  for (size_t i = 0; i < sites.size(); ++i) {
    const QuantSite& q = sites[i];
    std::vector<std::string> lines = q.lines();
    // the node each line names: the site, each scale, the zero point
    std::vector<NodeRef> refs{q.site};
    for (const QuantScale& sc : q.scales) refs.push_back(sc.node);
    refs.push_back(q.zero_point);
    ImGui::PushID(static_cast<int>(i));
    for (size_t l = 0; l < lines.size(); ++l) {
      NodeRef r = l < refs.size() ? refs[l] : nullptr;
      if (l > 0) ImGui::Indent();
      ImGui::PushID(static_cast<int>(l));
      if (!r) {
        ImGui::TextDisabled("%s", lines[l].c_str());
      } else {   // wrapped text that selects the node it names when clicked
        if (r == n) ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_ButtonActive]);
        ImGui::TextWrapped("%s", lines[l].c_str());
        if (r == n) ImGui::PopStyleColor();
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("click: select %%%u", r->id);
        if (ImGui::IsItemClicked()) s.select_node(static_cast<int>(r->id), true);
      }
      ImGui::PopID();
      if (l > 0) ImGui::Unindent();
    }
    ImGui::PopID();
    if (i + 1 < sites.size()) ImGui::Separator();
  }
  if (s.quant_float) {
    if (!sites.empty()) ImGui::Separator();
    quant_errors_table(s);
  }
}

}  // namespace lathe::views
