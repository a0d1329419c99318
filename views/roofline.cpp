// roofline.cpp — the profile's roofline plot: x = arithmetic intensity (FLOP per byte
// moved), y = achieved GFLOP/s, both log scale; the roof is min(peak GFLOP/s, intensity ×
// peak GB/s) from the machine's measured ceilings (core/runtime/machine.h, as recorded in
// the ProfileReport). One point per kernel, its size by share of the time; hover for
// numbers, click to select the kernel everywhere.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "views/profile_panel.h"
#include "views/theme.h"

namespace lathe::views {

namespace {

std::string tick_label(double v) {
  char b[32];
  if (v >= 1000) std::snprintf(b, sizeof b, "%gk", v / 1000);
  else std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace

void draw_roofline(AppState& s, ImVec2 size) {
  const ProfileReport& r = *s.compiled->profile;
  struct Pt { int k; double x, y, ms; };
  std::vector<Pt> pts;
  int skipped = 0;
  double total = 0;
  for (auto& kp : r.kernels) total += kp.median_ms;
  for (int k = 0; k < static_cast<int>(r.kernels.size()); ++k) {
    const KernelProfile& kp = r.kernels[k];
    if (kp.flops > 0 && kp.bytes > 0 && kp.gflops > 0) pts.push_back({k, kp.flops / kp.bytes, kp.gflops, kp.median_ms});
    else ++skipped;
  }
  const double peak = r.peak_gflops, bw = r.peak_gbps;
  const bool roof = peak > 0 && bw > 0;
  const double ridge = roof ? peak / bw : 1;

  // Axis ranges, whole decades around the points and the ridge.
  double x0 = ridge, x1 = ridge, y0 = roof ? peak : 1, y1 = roof ? peak : 1;
  for (auto& p : pts) x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  double lx0 = std::floor(std::log10(x0) - 0.3), lx1 = std::ceil(std::log10(x1) + 0.3);
  double ly0 = std::floor(std::log10(y0) - 0.3), ly1 = std::ceil(std::log10(y1) + 0.2);
  if (lx1 - lx0 < 2) lx1 = lx0 + 2;
  if (ly1 - ly0 < 2) ly0 = ly1 - 2;

  ImVec2 p0 = ImGui::GetCursorScreenPos();
  size.x = std::max(size.x, 120.0f);
  size.y = std::max(size.y, 120.0f);
  ImGui::InvisibleButton("roofline", size);
  bool hovered = ImGui::IsItemHovered();
  bool clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float left = 52, bottom = 36, top = 24, right = 12;
  ImVec2 a(p0.x + left, p0.y + top), b(p0.x + size.x - right, p0.y + size.y - bottom);
  auto X = [&](double v) { return static_cast<float>(a.x + (std::log10(v) - lx0) / (lx1 - lx0) * (b.x - a.x)); };
  auto Y = [&](double v) { return static_cast<float>(b.y - (std::log10(v) - ly0) / (ly1 - ly0) * (b.y - a.y)); };
  dl->AddRectFilled(p0, ImVec2(p0.x + size.x, p0.y + size.y), colors::kCanvas, 4);
  dl->PushClipRect(p0, ImVec2(p0.x + size.x, p0.y + size.y), true);

  // Grid and tick labels at every decade.
  for (double e = lx0; e <= lx1 + 1e-9; e += 1) {
    float x = X(std::pow(10, e));
    dl->AddLine(ImVec2(x, a.y), ImVec2(x, b.y), colors::kGrid);
    std::string t = tick_label(std::pow(10, e));
    dl->AddText(ImVec2(x - ImGui::CalcTextSize(t.c_str()).x * 0.5f, b.y + 3), colors::kTextDim, t.c_str());
  }
  for (double e = ly0; e <= ly1 + 1e-9; e += 1) {
    float y = Y(std::pow(10, e));
    dl->AddLine(ImVec2(a.x, y), ImVec2(b.x, y), colors::kGrid);
    std::string t = tick_label(std::pow(10, e));
    dl->AddText(ImVec2(a.x - ImGui::CalcTextSize(t.c_str()).x - 6, y - 8), colors::kTextDim, t.c_str());
  }
  dl->AddRect(a, b, IM_COL32(90, 96, 110, 255));
  const char* xt = "arithmetic intensity (FLOP / byte)";
  dl->AddText(ImVec2((a.x + b.x - ImGui::CalcTextSize(xt).x) * 0.5f, b.y + 18), colors::kTextDim, xt);
  dl->AddText(ImVec2(p0.x + 6, p0.y + 3), colors::kTextDim, "GFLOP/s (achieved)");

  // The roof: memory slope up to the ridge, then the compute ceiling.
  if (roof) {
    double xl = std::pow(10, lx0), xr = std::pow(10, lx1);
    ImVec2 r0(X(xl), Y(xl * bw)), r1(X(ridge), Y(peak)), r2(X(xr), Y(peak));
    dl->PushClipRect(a, b, true);
    dl->AddLine(r0, r1, colors::kWarn, 2.5f);
    dl->AddLine(r1, r2, colors::kWarn, 2.5f);
    dl->PopClipRect();
    char t[64];
    std::snprintf(t, sizeof t, "%.1f GFLOP/s peak", peak);
    ImVec2 ts = ImGui::CalcTextSize(t);
    dl->AddText(ImVec2(std::max(r1.x + 6, b.x - ts.x - 6), r1.y - ts.y - 2), colors::kWarn, t);
    std::snprintf(t, sizeof t, "%.1f GB/s", bw);
    float lx = std::clamp(r1.x - 110.0f, a.x + 4, b.x - 80);
    double xv = std::pow(10, lx0 + (lx - a.x) / (b.x - a.x) * (lx1 - lx0));
    dl->AddText(ImVec2(lx, Y(xv * bw) - 20), colors::kWarn, t);
  }

  // Points, largest first so small ones stay clickable on top.
  std::sort(pts.begin(), pts.end(), [](const Pt& p, const Pt& q) { return p.ms > q.ms; });
  ImVec2 mouse = ImGui::GetIO().MousePos;
  int hot = -1, above = 0;
  float best = 1e9f;
  for (const Pt& p : pts) {
    ImVec2 c(X(p.x), Y(p.y));
    float rad = 4 + 8 * static_cast<float>(total > 0 ? std::sqrt(p.ms / total) : 0);
    dl->AddCircleFilled(c, rad, kernel_color(p.k));
    dl->AddCircle(c, rad, IM_COL32(10, 10, 12, 255), 0, 1.2f);
    if (!r.kernels[p.k].above_roof.empty()) {  // above the roof: a warning ring, the reason on hover
      dl->AddCircle(c, rad + 2, colors::kWarn, 0, 1.5f);
      ++above;
    }
    if (p.k == s.selected_kernel) {
      dl->AddCircle(c, rad + 4, colors::kSelected, 0, 2.5f);
      dl->AddText(ImVec2(c.x + rad + 6, c.y - 8), colors::kText, r.kernels[p.k].name.c_str());
    }
    float d = std::hypot(mouse.x - c.x, mouse.y - c.y);
    if (hovered && d <= rad + 4 && d < best) best = d, hot = p.k;
  }
  dl->PopClipRect();
  if (skipped > 0) {
    std::string t = std::to_string(skipped) + (skipped == 1 ? " kernel" : " kernels") + " without FLOPs not shown";
    dl->AddText(ImVec2(b.x - ImGui::CalcTextSize(t.c_str()).x - 4, b.y - 20), colors::kTextDim, t.c_str());
  }
  if (above > 0) {
    std::string t = std::to_string(above) + (above == 1 ? " kernel" : " kernels") + " above the roof (ringed): hover for why";
    dl->AddText(ImVec2(a.x + 6, a.y + 4), colors::kWarn, t.c_str());
  }
  if (hot >= 0) {
    const KernelProfile& kp = r.kernels[hot];
    ImGui::SetTooltip("%s (%s)\n%.4f ms · %.3g FLOP/byte\n%.2f GFLOP/s · %.2f GB/s\n%.1f%% of the %s roof%s%s\nclick to select",
                      kp.name.c_str(), kp.kind.c_str(), kp.median_ms, kp.flops / kp.bytes, kp.gflops, kp.gbps,
                      100 * kp.roof, kp.bound.c_str(), kp.above_roof.empty() ? "" : "\n", kp.above_roof.c_str());
    if (clicked) s.select_kernel(hot, true);
  }
}

}  // namespace lathe::views
