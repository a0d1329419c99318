// inspector_values.cpp — Inspector > Values: after Run (the reference interpreter on
// seeded random inputs, app_actions.h), the selected node's count, min / max / mean /
// stddev, NaN and Inf counts, its first values and a 24-bin histogram of the finite ones.
// Values are computed for a node the first time it is shown, then cached until the graph
// changes.
#include <imgui.h>

#include <algorithm>

#include "views/app_actions.h"
#include "views/inspector.h"
#include "views/theme.h"

namespace lathe::views {

namespace {

void histogram(const NodeStats& st) {
  int64_t top = 1;
  for (int64_t c : st.hist) top = std::max(top, c);
  ImVec2 p = ImGui::GetCursorScreenPos();
  float w = std::max(120.0f, ImGui::GetContentRegionAvail().x - 4), h = 70;
  ImGui::InvisibleButton("hist", ImVec2(w, h + 18));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + w, p.y + h), colors::kCanvas, 3);
  float bw = w / st.hist.size();
  int hot = -1;
  if (ImGui::IsItemHovered()) hot = static_cast<int>((ImGui::GetIO().MousePos.x - p.x) / bw);
  for (size_t i = 0; i < st.hist.size(); ++i) {
    float bh = (h - 4) * static_cast<float>(st.hist[i]) / top;
    if (st.hist[i] > 0) bh = std::max(bh, 1.5f);
    ImU32 col = static_cast<int>(i) == hot ? IM_COL32(140, 200, 255, 255) : IM_COL32(86, 140, 210, 255);
    dl->AddRectFilled(ImVec2(p.x + i * bw + 1, p.y + h - bh), ImVec2(p.x + (i + 1) * bw - 1, p.y + h), col);
  }
  char lo[32], hi[32];
  std::snprintf(lo, sizeof lo, "%.4g", st.min);
  std::snprintf(hi, sizeof hi, "%.4g", st.max);
  dl->AddText(ImVec2(p.x, p.y + h + 2), colors::kTextDim, lo);
  dl->AddText(ImVec2(p.x + w - ImGui::CalcTextSize(hi).x, p.y + h + 2), colors::kTextDim, hi);
  if (hot >= 0 && hot < static_cast<int>(st.hist.size())) {
    double b0 = st.min + (st.max - st.min) * hot / st.hist.size(), b1 = st.min + (st.max - st.min) * (hot + 1) / st.hist.size();
    ImGui::SetTooltip("[%.4g, %.4g): %lld values", b0, b1, static_cast<long long>(st.hist[hot]));
  }
}

}  // namespace

void inspect_values(AppState& s, NodeRef n) {
  bool fresh = s.run && s.run->graph_version == s.version;
  bool running = s.jobs.busy() && s.jobs.kind() == "run";
  ImGui::BeginDisabled(s.jobs.busy());
  if (ImGui::SmallButton(running ? "Running…" : fresh ? "Run again" : "Run")) start_run(s);
  ImGui::EndDisabled();
  ImGui::SameLine();
  if (running) {
    ImGui::TextDisabled("running the interpreter in the background…");
    return;
  }
  if (!fresh) {
    ImGui::TextDisabled(s.run ? "the graph changed since the last run" : "runs the interpreter on random inputs");
    return;
  }
  ImGui::TextDisabled("%s", s.run->note.c_str());
  const NodeStats* st = node_stats(s, n->id);
  if (!st) return;
  if (!st->ok) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.45f, 0.45f, 1));
    ImGui::TextWrapped("cannot evaluate: %s", st->error.c_str());
    ImGui::PopStyleColor();
    return;
  }
  if (ImGui::BeginTable("stats", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchSame)) {
    auto cell = [](const char* k, const char* fmt, double v) {
      ImGui::TableNextColumn();
      ImGui::TextDisabled("%s", k);
      ImGui::TableNextColumn();
      ImGui::Text(fmt, v);
    };
    cell("min", "%.5g", st->min);
    cell("max", "%.5g", st->max);
    cell("mean", "%.5g", st->mean);
    cell("std", "%.5g", st->stddev);
    cell("count", "%.0f", static_cast<double>(st->count));
    ImGui::TableNextColumn();
    ImGui::TextDisabled("NaN / Inf");
    ImGui::TableNextColumn();
    bool bad = st->nans > 0 || st->infs > 0;
    if (bad) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.95f, 0.45f, 0.45f, 1));
    ImGui::Text("%lld / %lld", static_cast<long long>(st->nans), static_cast<long long>(st->infs));
    if (bad) ImGui::PopStyleColor();
    ImGui::EndTable();
  }
  ImGui::TextDisabled("first: %s", st->preview.c_str());
  histogram(*st);
}

}  // namespace lathe::views
