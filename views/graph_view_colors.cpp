// graph_view_colors.cpp — how the graph view colours its boxes and the legend that says
// so: by op category, by kernel (each fused kernel its own colour, at every level), or by
// profile time (heat: the share of the slowest kernel's time). Also which boxes hold a
// node of the selected kernel, so the primitive and tensor levels can outline a kernel
// selected at the kernel level (or in the kernels / profile panels).
#include <algorithm>
#include <cstdio>

#include "views/graph_view.h"

namespace lathe::views {

namespace {

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }

}  // namespace

int GraphView::selected_box(const AppState& s) const {
  if (!shown_) return -1;
  if (s.level == Level::Kernel && s.selected_kernel >= 0 &&
      s.selected_kernel < static_cast<int>(shown_->kernel_box.size()))
    return shown_->kernel_box[s.selected_kernel];
  if (s.selected < 0) return -1;
  auto it = shown_->box_of.find(static_cast<uint32_t>(s.selected));
  return it == shown_->box_of.end() ? -1 : it->second;
}

void GraphView::update_colors(const AppState& s) {
  if (!shown_) return;
  const Compiled* c = s.compiled.get();
  uint64_t key = 1469598103934665603ull;
  key = mix(key, shown_->key);
  key = mix(key, static_cast<uint64_t>(s.color_mode));
  key = mix(key, reinterpret_cast<uintptr_t>(c));
  key = mix(key, c ? c->serial : 0);
  key = mix(key, static_cast<uint64_t>(s.selected_kernel + 1));
  if (key == colors_key_ && fills_.size() == shown_->nodes.size()) return;
  colors_key_ = key;
  const size_t n = shown_->nodes.size();
  fills_.assign(n, 0);
  in_kernel_.assign(n, 0);
  highlighted_ = 0;

  // The kernel each box belongs to: its own (kernel level) or its representative node's.
  auto kernel_of_box = [&](const DisplayNode& b) {
    if (b.kernel >= 0) return b.kernel;
    if (!c) return -1;
    auto it = c->kernel_of.find(b.rep);
    if (it != c->kernel_of.end()) return it->second;
    for (uint32_t id : b.members)   // a group: the first member some kernel computes
      if (auto m = c->kernel_of.find(id); m != c->kernel_of.end()) return m->second;
    return -1;
  };
  double max_ms = c ? c->max_kernel_ms() : 0;
  for (size_t i = 0; i < n; ++i) {
    const DisplayNode& b = shown_->nodes[i];
    int k = kernel_of_box(b);
    ImU32 fill = b.fill;
    if (!b.group.empty()) {   // a scope holds many kernels: it keeps its own colour
      fills_[i] = fill;
      continue;
    }
    if (s.color_mode == ColorMode::Kernel && c) {
      fill = k >= 0 ? kernel_fill(k) : (b.kernel < 0 && s.level == Level::Kernel ? b.fill : kNoKernelFill);
    } else if (s.color_mode == ColorMode::Heat && c && c->profile && max_ms > 0) {
      double ms = c->kernel_ms(k);
      fill = ms >= 0 ? heat_fill(static_cast<float>(ms / max_ms)) : (s.level == Level::Kernel ? b.fill : kNoKernelFill);
    }
    fills_[i] = fill;
  }
  // Provenance: boxes holding a node of the selected kernel.
  if (c && s.selected_kernel >= 0 && s.selected_kernel < c->num_kernels()) {
    const Kernel& kn = c->program().kg.kernels[s.selected_kernel];
    if (s.level == Level::Kernel) {
      if (s.selected_kernel < static_cast<int>(shown_->kernel_box.size())) in_kernel_[shown_->kernel_box[s.selected_kernel]] = 1;
    } else {
      for (NodeRef nd : kn.nodes)
        if (auto it = shown_->box_of.find(nd->id); it != shown_->box_of.end() && it->second >= 0) in_kernel_[it->second] = 1;
    }
  }
  for (char h : in_kernel_) highlighted_ += h ? 1 : 0;
}

void GraphView::draw_legend(AppState& s, ImDrawList* dl, ImVec2 min, ImVec2 max) {
  s.view_legend_items = 0;
  if (!shown_ || shown_->nodes.empty()) return;
  std::vector<std::pair<std::string, ImU32>> items;
  const Compiled* c = s.compiled.get();
  float x = min.x + 10, y = max.y - 24;
  if (s.color_mode == ColorMode::Heat && c && c->profile && c->max_kernel_ms() > 0) {
    // A gradient bar from 0 to the slowest kernel's time.
    char hi[64];
    std::snprintf(hi, sizeof hi, "%.3g ms (slowest kernel)", c->max_kernel_ms());
    const char* lo = "kernel time: 0";
    float lw = ImGui::CalcTextSize(lo).x, hw = ImGui::CalcTextSize(hi).x, bar = 140;
    dl->AddRectFilled(ImVec2(x - 6, y - 4), ImVec2(x + lw + bar + hw + 18, y + 20), IM_COL32(24, 26, 31, 215), 4);
    dl->AddText(ImVec2(x, y), colors::kTextDim, lo);
    float bx = x + lw + 6;
    for (int i = 0; i < 28; ++i)
      dl->AddRectFilled(ImVec2(bx + bar * i / 28, y + 3), ImVec2(bx + bar * (i + 1) / 28 + 0.5f, y + 15), heat_fill(i / 27.0f));
    dl->AddText(ImVec2(bx + bar + 6, y), colors::kTextDim, hi);
    legend_h_ = 30;
    return;
  }
  if (s.color_mode == ColorMode::Kernel && c) {
    int nk = c->num_kernels();
    for (int k = 0; k < nk; ++k) items.push_back({c->program().kg.kernels[k].name, kernel_fill(k)});
    if (s.level != Level::Kernel) items.push_back({"no kernel (input/const)", kNoKernelFill});
  } else {
    static const OpCategory cats[] = {OpCategory::Source, OpCategory::Movement, OpCategory::Memory, OpCategory::Unary,
                                      OpCategory::Binary, OpCategory::Ternary, OpCategory::Reduce, OpCategory::Extern};
    bool present[8] = {}, groups = false, kernels = false;
    for (auto& b : shown_->nodes) {
      if (b.category >= 0 && b.category < 8) present[b.category] = true;
      else if (b.kernel >= 0) kernels = true;
      else groups = true;
    }
    for (OpCategory cat : cats)
      if (present[static_cast<int>(cat)]) items.push_back({std::string(category_name(cat)), category_color(cat)});
    if (groups) items.push_back({s.level == Level::Kernel ? "scope (kernels)" : "scope / composite", group_color()});
    if (kernels) items.push_back({"kernel", kernel_fill(0)});
  }
  // Wraps into as many lines as it needs (upward from the bottom), leaving the
  // bottom-right corner to the view's info line; the fit keeps boxes clear of it.
  float right = std::max(min.x + 200, max.x - 340);
  std::vector<std::vector<size_t>> lines(1);
  float lx = x;
  for (size_t i = 0; i < items.size(); ++i) {
    float iw = 26 + ImGui::CalcTextSize(items[i].first.c_str()).x;
    if (lx + iw - 10 > right && !lines.back().empty()) lines.emplace_back(), lx = x;
    lines.back().push_back(i);
    lx += iw;
  }
  // At most kLegendLines lines show; a longer legend (a model's hundred kernels) scrolls
  // with the wheel in a child window of that height, so every entry can be read.
  constexpr size_t kLegendLines = 4;
  const float lh = 20;
  const size_t shown = std::min(lines.size(), kLegendLines);
  float top = y - (shown - 1) * lh;
  float wmax = 0;
  for (auto& line : lines) {
    float w = 0;
    for (size_t i : line) w += 26 + ImGui::CalcTextSize(items[i].first.c_str()).x;
    wmax = std::max(wmax, w);
  }
  s.view_legend_items = items.size();
  auto draw_lines = [&](ImDrawList* d, ImVec2 at) {
    const float clip_y0 = d->GetClipRectMin().y - lh, clip_y1 = d->GetClipRectMax().y;
    for (size_t l = 0; l < lines.size(); ++l) {
      float cx = at.x, cy = at.y + l * lh;
      if (cy < clip_y0 || cy > clip_y1) continue;   // scrolled out of the legend's window
      for (size_t i : lines[l]) {
        auto& [name, col] = items[i];
        d->AddRectFilled(ImVec2(cx, cy + 3), ImVec2(cx + 12, cy + 15), col, 2);
        d->AddText(ImVec2(cx + 16, cy), colors::kTextDim, name.c_str());
        cx += 26 + ImGui::CalcTextSize(name.c_str()).x;
      }
    }
  };
  const float scrollbar = lines.size() > shown ? ImGui::GetStyle().ScrollbarSize : 0.0f;
  dl->AddRectFilled(ImVec2(x - 6, top - 4), ImVec2(x + wmax - 4 + scrollbar, y + 20), IM_COL32(24, 26, 31, 215), 4);
  if (lines.size() <= shown) {
    draw_lines(dl, ImVec2(x, top));
  } else {
    ImVec2 keep = ImGui::GetCursorScreenPos();
    ImGui::SetCursorScreenPos(ImVec2(x, top));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
    ImGui::BeginChild("##legend", ImVec2(wmax - 8 + scrollbar, shown * lh), false, ImGuiWindowFlags_NoBackground);
    ImVec2 at = ImGui::GetCursorScreenPos();
    draw_lines(ImGui::GetWindowDrawList(), at);
    ImGui::Dummy(ImVec2(wmax - 8, lines.size() * lh));
    ImGui::EndChild();
    ImGui::PopStyleVar();
    ImGui::SetCursorScreenPos(keep);
  }
  legend_h_ = (y + 24) - (top - 4);
}

}  // namespace lathe::views
