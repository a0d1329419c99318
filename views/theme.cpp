// theme.cpp — fonts, the dark style and the category colour key.
#include "views/theme.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace lathe::views {

namespace {
constexpr const char* kSansPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
constexpr const char* kMonoPath = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";

ImFont* add_font(const char* path, float size) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nullptr;   // AddFontFromFileTTF asserts
  static const ImWchar ranges[] = {0x0020, 0x00FF, 0x2013, 0x2026, 0x2190, 0x2193, 0x2264, 0x2265, 0x25A0, 0x25CF, 0};
  ImFontConfig cfg;
  cfg.OversampleH = 2;
  cfg.OversampleV = 2;
  return ImGui::GetIO().Fonts->AddFontFromFileTTF(path, size, &cfg, ranges);
}
}  // namespace

Fonts load_fonts(float pixel_size) {
  Fonts f;
  f.size = pixel_size;
  f.ui = add_font(kSansPath, pixel_size);
  f.mono = add_font(kMonoPath, pixel_size - 1.0f);
  if (!f.ui) f.ui = ImGui::GetIO().Fonts->AddFontDefault();
  if (!f.mono) f.mono = f.ui;
  ImGui::GetIO().FontDefault = f.ui;
  return f;
}

void apply_dark_theme() {
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0.0f;
  s.ChildRounding = 3.0f;
  s.FrameRounding = 3.0f;
  s.PopupRounding = 3.0f;
  s.TabRounding = 3.0f;
  s.GrabRounding = 3.0f;
  s.ScrollbarRounding = 3.0f;
  s.WindowBorderSize = 0.0f;
  s.FramePadding = ImVec2(7, 4);
  s.ItemSpacing = ImVec2(8, 5);
  s.WindowPadding = ImVec2(8, 8);
  ImVec4* c = s.Colors;
  c[ImGuiCol_WindowBg] = ImGui::ColorConvertU32ToFloat4(colors::kWindowBg);
  // Child windows draw no background: the panels' colour is cleared by the frame loop
  // (gui_app.cpp), and a nested child on the same colour would only repaint it.
  c[ImGuiCol_ChildBg] = ImVec4(0, 0, 0, 0);
  c[ImGuiCol_PopupBg] = ImVec4(0.12f, 0.13f, 0.15f, 0.98f);
  c[ImGuiCol_Border] = ImVec4(0.22f, 0.24f, 0.28f, 1.0f);
  c[ImGuiCol_FrameBg] = ImVec4(0.18f, 0.19f, 0.23f, 1.0f);
  c[ImGuiCol_FrameBgHovered] = ImVec4(0.24f, 0.26f, 0.31f, 1.0f);
  c[ImGuiCol_FrameBgActive] = ImVec4(0.28f, 0.30f, 0.36f, 1.0f);
  c[ImGuiCol_TitleBg] = c[ImGuiCol_TitleBgActive] = ImVec4(0.09f, 0.10f, 0.12f, 1.0f);
  c[ImGuiCol_MenuBarBg] = ImVec4(0.09f, 0.10f, 0.12f, 1.0f);
  c[ImGuiCol_Header] = ImVec4(0.22f, 0.32f, 0.48f, 0.70f);
  c[ImGuiCol_HeaderHovered] = ImVec4(0.26f, 0.40f, 0.60f, 0.80f);
  c[ImGuiCol_HeaderActive] = ImVec4(0.30f, 0.46f, 0.70f, 1.0f);
  c[ImGuiCol_Button] = ImVec4(0.20f, 0.24f, 0.31f, 1.0f);
  c[ImGuiCol_ButtonHovered] = ImVec4(0.27f, 0.36f, 0.50f, 1.0f);
  c[ImGuiCol_ButtonActive] = ImVec4(0.31f, 0.44f, 0.64f, 1.0f);
  c[ImGuiCol_Tab] = ImVec4(0.15f, 0.17f, 0.21f, 1.0f);
  c[ImGuiCol_TabHovered] = ImVec4(0.28f, 0.40f, 0.58f, 1.0f);
  c[ImGuiCol_TabActive] = ImVec4(0.22f, 0.32f, 0.48f, 1.0f);
  c[ImGuiCol_Separator] = ImVec4(0.22f, 0.24f, 0.28f, 1.0f);
  c[ImGuiCol_SeparatorHovered] = ImVec4(0.35f, 0.50f, 0.75f, 1.0f);
  c[ImGuiCol_SeparatorActive] = ImVec4(0.40f, 0.60f, 0.90f, 1.0f);
  c[ImGuiCol_Text] = ImVec4(0.90f, 0.91f, 0.94f, 1.0f);
  c[ImGuiCol_TextDisabled] = ImVec4(0.52f, 0.55f, 0.62f, 1.0f);
}

ImU32 category_color(OpCategory c) {
  switch (c) {
    case OpCategory::Source:   return IM_COL32(46, 110, 72, 255);    // green: where data comes from
    case OpCategory::Movement: return IM_COL32(52, 84, 140, 255);    // blue: views move no data
    case OpCategory::Memory:   return IM_COL32(92, 92, 104, 255);    // grey: copies and writes
    case OpCategory::Unary:    return IM_COL32(32, 118, 124, 255);   // teal
    case OpCategory::Binary:   return IM_COL32(160, 96, 36, 255);    // orange
    case OpCategory::Ternary:  return IM_COL32(118, 70, 140, 255);   // purple
    case OpCategory::Reduce:   return IM_COL32(164, 52, 60, 255);    // red: reductions
    case OpCategory::Extern:   return IM_COL32(150, 130, 30, 255);   // yellow: library kernels
  }
  return IM_COL32(80, 80, 80, 255);
}

ImU32 group_color() { return IM_COL32(58, 64, 82, 255); }

ImU32 kernel_color(int k) {
  static const ImU32 palette[] = {
      IM_COL32(78, 121, 167, 255), IM_COL32(242, 142, 43, 255), IM_COL32(225, 87, 89, 255),
      IM_COL32(118, 183, 178, 255), IM_COL32(89, 161, 79, 255), IM_COL32(237, 201, 72, 255),
      IM_COL32(176, 122, 161, 255), IM_COL32(255, 157, 167, 255), IM_COL32(156, 117, 95, 255),
      IM_COL32(186, 176, 172, 255)};
  return palette[((k % 10) + 10) % 10];
}

ImU32 heat_color(float t) {
  t = std::clamp(t, 0.0f, 1.0f);
  float r = std::min(1.0f, 2.0f * t), g = t < 0.5f ? 0.35f + t : 1.0f - (t - 0.5f) * 1.6f, b = 0.8f * (1.0f - t);
  return IM_COL32(int(40 + 200 * r), int(40 + 200 * std::max(0.0f, g) * 0.8f), int(40 + 200 * b), 255);
}

ImU32 kernel_fill(int k) {
  ImU32 c = kernel_color(k);
  auto ch = [&](int shift) { return static_cast<int>(((c >> shift) & 0xFF) * 0.62f); };
  return IM_COL32(ch(IM_COL32_R_SHIFT), ch(IM_COL32_G_SHIFT), ch(IM_COL32_B_SHIFT), 255);
}

ImU32 heat_fill(float t) {
  // dark blue (cold) -> ochre -> deep red (hot); every stop keeps white text readable.
  static const float stops[3][3] = {{38, 62, 120}, {150, 112, 28}, {178, 40, 36}};
  t = std::clamp(t, 0.0f, 1.0f);
  int i = t < 0.5f ? 0 : 1;
  float u = t < 0.5f ? t * 2 : (t - 0.5f) * 2;
  auto mix = [&](int c) { return static_cast<int>(stops[i][c] + (stops[i + 1][c] - stops[i][c]) * u); };
  return IM_COL32(mix(0), mix(1), mix(2), 255);
}

void kernel_swatch(int k) {
  ImVec2 c = ImGui::GetCursorScreenPos();
  float sz = ImGui::GetTextLineHeight() * 0.7f;
  ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(c.x, c.y + 3), ImVec2(c.x + sz, c.y + 3 + sz), kernel_fill(k), 2);
  ImGui::Dummy(ImVec2(sz + 2, 0));
  ImGui::SameLine();
}

}  // namespace lathe::views
