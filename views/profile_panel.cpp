// profile_panel.cpp — the profile window (see profile_panel.h): the Profile button, the
// sortable per-kernel table and the time-per-kernel bar chart. The roofline is in
// roofline.cpp.
#include "views/profile_panel.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "views/app_actions.h"
#include "views/theme.h"

namespace lathe::views {

namespace {

enum Col { kName, kTime, kShare, kGflops, kGbps, kRoof, kBound, kCols };

}  // namespace

void ProfilePanel::table(AppState& s) {
  const ProfileReport& r = *s.compiled->profile;
  const int nk = static_cast<int>(r.kernels.size());
  double total = 0;
  for (auto& kp : r.kernels) total += kp.median_ms;
  // Every column in view: the numbers take what they need, the kernel names the rest (a
  // name cut short shows whole in its tooltip).
  ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                          ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  float h = std::min((std::min(nk, 8) + 2.2f) * ImGui::GetTextLineHeightWithSpacing() + 6,
                     ImGui::GetContentRegionAvail().y * 0.4f);
  if (!ImGui::BeginTable("profile", kCols, flags, ImVec2(0, h))) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  ImGui::TableSetupColumn("kernel", ImGuiTableColumnFlags_WidthStretch | ImGuiTableColumnFlags_NoHide);
  ImGui::TableSetupColumn("ms", ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableSetupColumn("%", ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableSetupColumn("GFLOP/s", ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableSetupColumn("GB/s", ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableSetupColumn("roof", ImGuiTableColumnFlags_PreferSortDescending);
  ImGui::TableSetupColumn("bound");
  ImGui::TableHeadersRow();

  ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs();
  if (specs && (specs->SpecsDirty || sorted_serial_ != s.compiled->serial || static_cast<int>(order_.size()) != nk)) {
    order_.resize(nk);
    std::iota(order_.begin(), order_.end(), 0);
    auto key = [&](int k, int col) -> double {
      const KernelProfile& kp = r.kernels[k];
      switch (col) {
        case kName: return k;
        case kTime: case kShare: return kp.median_ms;
        case kGflops: return kp.gflops;
        case kGbps: return kp.gbps;
        case kRoof: return kp.roof;
        default: return kp.bound == "memory" ? 0 : 1;
      }
    };
    if (specs->SpecsCount > 0) {
      const ImGuiTableColumnSortSpecs& sp = specs->Specs[0];
      std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
        double ka = key(a, sp.ColumnIndex), kb = key(b, sp.ColumnIndex);
        return sp.SortDirection == ImGuiSortDirection_Ascending ? ka < kb : ka > kb;
      });
    }
    specs->SpecsDirty = false;
    sorted_serial_ = s.compiled->serial;
  }
  for (int k : order_) {
    const KernelProfile& kp = r.kernels[k];
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(kName);
    ImGui::PushID(k);
    kernel_swatch(k);
    if (ImGui::Selectable(kp.name.c_str(), s.selected_kernel == k, ImGuiSelectableFlags_SpanAllColumns))
      s.select_kernel(k, true);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %.4g ms · %.2f GFLOP/s · %.2f GB/s", kp.name.c_str(), kp.median_ms, kp.gflops, kp.gbps);
    ImGui::TableSetColumnIndex(kTime);
    ImGui::Text("%.4g", kp.median_ms);
    ImGui::TableSetColumnIndex(kShare);
    ImGui::Text("%.1f", total > 0 ? 100 * kp.median_ms / total : 0.0);
    ImGui::TableSetColumnIndex(kGflops);
    ImGui::Text("%.2f", kp.gflops);
    ImGui::TableSetColumnIndex(kGbps);
    ImGui::Text("%.2f", kp.gbps);
    ImGui::TableSetColumnIndex(kRoof);
    if (kp.above_roof.empty()) {
      ImGui::Text("%.1f%%", 100 * kp.roof);
    } else {  // above the roof: say why
      ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.3f, 1), "%.1f%% *", 100 * kp.roof);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kp.above_roof.c_str());
    }
    ImGui::TableSetColumnIndex(kBound);
    ImGui::TextDisabled("%s", kp.bound.c_str());
    ImGui::PopID();
  }
  s.view_profile_columns = 0;
  for (int c = 0; c < kCols; ++c)
    if (ImGui::TableGetColumnFlags(c) & ImGuiTableColumnFlags_IsVisible) ++s.view_profile_columns;
  ImGui::EndTable();
}

// Horizontal bars, slowest kernel first; click a bar to select its kernel.
void ProfilePanel::bars(AppState& s) {
  const ProfileReport& r = *s.compiled->profile;
  std::vector<int> order(r.kernels.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r.kernels[a].median_ms > r.kernels[b].median_ms; });
  double mx = s.compiled->max_kernel_ms();
  ImGui::BeginChild("bars", ImVec2(0, 0), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  float row = ImGui::GetTextLineHeight() + 6;
  float name_w = 0;
  for (auto& kp : r.kernels) name_w = std::max(name_w, ImGui::CalcTextSize(kp.name.c_str()).x);
  name_w = std::min(name_w + 8, ImGui::GetContentRegionAvail().x * 0.4f);
  for (int k : order) {
    const KernelProfile& kp = r.kernels[k];
    ImVec2 p = ImGui::GetCursorScreenPos();
    float w = ImGui::GetContentRegionAvail().x;
    ImGui::PushID(k);
    if (ImGui::InvisibleButton("bar", ImVec2(std::max(w, 10.0f), row))) s.select_kernel(k, true);
    bool hot = ImGui::IsItemHovered();
    if (hot) ImGui::SetTooltip("%s: %.4g ms", kp.name.c_str(), kp.median_ms);   // the name may be cut short
    ImGui::PopID();
    char ms[48];
    std::snprintf(ms, sizeof ms, "%.4g ms", kp.median_ms);
    float ms_w = ImGui::CalcTextSize(ms).x + 8;
    float bar_w = std::max(2.0f, (w - name_w - ms_w) * static_cast<float>(mx > 0 ? kp.median_ms / mx : 0));
    bool sel = s.selected_kernel == k;
    if (sel || hot) dl->AddRectFilled(p, ImVec2(p.x + w, p.y + row), IM_COL32(255, 255, 255, sel ? 28 : 14), 3);
    dl->PushClipRect(p, ImVec2(p.x + name_w - 4, p.y + row), true);
    dl->AddText(ImVec2(p.x + 2, p.y + 3), colors::kText, kp.name.c_str());
    dl->PopClipRect();
    dl->AddRectFilled(ImVec2(p.x + name_w, p.y + 3), ImVec2(p.x + name_w + bar_w, p.y + row - 3),
                      heat_fill(static_cast<float>(mx > 0 ? kp.median_ms / mx : 0)), 2);
    if (sel) dl->AddRect(ImVec2(p.x + name_w - 1, p.y + 2), ImVec2(p.x + name_w + bar_w + 1, p.y + row - 2), colors::kSelected, 2);
    dl->AddText(ImVec2(p.x + name_w + bar_w + 6, p.y + 3), colors::kTextDim, ms);
  }
  ImGui::EndChild();
}

void ProfilePanel::draw(AppState& s) {
  if (!s.compiled) {
    ImGui::TextWrapped("No profile yet: compile first (the Kernels panel's Compile, or :compile in the console), "
                       "then Profile here to see per-kernel time, GFLOP/s, GB/s and the roofline.");
    return;
  }
  if (s.compiled->num_kernels() == 0) {
    ImGui::TextWrapped("The %s backend runs the graph as a whole: there are no kernels to profile.", s.compiled->backend.c_str());
    return;
  }
  bool busy = s.jobs.busy();
  ImGui::BeginDisabled(busy);
  if (ImGui::Button(busy && s.jobs.kind() == "profile" ? "Profiling…" : "Profile")) start_profile(s, iters_);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(90);
  ImGui::InputInt("runs", &iters_, 5, 50);
  iters_ = std::clamp(iters_, 1, 10000);
  if (!s.compiled->profile) {
    ImGui::TextWrapped("Profile runs every kernel %d times on seeded random inputs (symbolic dims = 64) and shows "
                       "the median per kernel.", iters_);
    return;
  }
  const ProfileReport& r = *s.compiled->profile;
  ImGui::SameLine();
  ImGui::TextDisabled("%s · %.4g ms per run", r.backend.c_str(), r.total_ms);
  ImGui::TextDisabled("machine ceiling: %.1f GFLOP/s · %.1f GB/s", r.peak_gflops, r.peak_gbps);
  table(s);
  std::string req = s.profile_view_request;
  s.profile_view_request.clear();
  if (ImGui::BeginTabBar("profile-views")) {
    if (ImGui::BeginTabItem("Roofline", nullptr, req == "roofline" ? ImGuiTabItemFlags_SetSelected : 0)) {
      draw_roofline(s, ImGui::GetContentRegionAvail());
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Time per kernel", nullptr, req == "bars" ? ImGuiTabItemFlags_SetSelected : 0)) {
      bars(s);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
}

}  // namespace lathe::views
