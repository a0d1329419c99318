// error_panel.cpp — the error panel (see error_panel.h).
#include "views/error_panel.h"

#include <algorithm>

namespace lathe::views {

float draw_error_panel(AppState& s, const Fonts& fonts) {
  if (!s.error) return 0;
  const LoadError& e = *s.error;
  std::string text = e.diag.format();
  while (!text.empty() && text.back() == '\n') text.pop_back();
  int lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  float line_h = ImGui::GetTextLineHeightWithSpacing();
  float h = std::min(ImGui::GetContentRegionAvail().y * 0.5f, line_h * (lines + 3.2f));

  ImGui::PushStyleColor(ImGuiCol_ChildBg, ImVec4(0.22f, 0.08f, 0.09f, 1.0f));
  ImGui::PushStyleColor(ImGuiCol_Border, ImVec4(0.85f, 0.30f, 0.30f, 1.0f));
  ImGui::PushStyleVar(ImGuiStyleVar_ChildBorderSize, 1.5f);
  ImGui::BeginChild("error-panel", ImVec2(0, h), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.45f, 1.0f), "error: %s", e.what.c_str());
  // Retry re-opens a file that failed to load; other errors (compile, profile, run,
  // script) have nothing to retry here.
  ImGui::SameLine(ImGui::GetContentRegionAvail().x + ImGui::GetCursorPosX() - (e.file.empty() ? 70 : 150));
  if (!e.file.empty()) {
    if (ImGui::SmallButton("Retry")) {
      std::string file = e.file;   // copy: open() replaces s.error
      s.open(file);
    }
    ImGui::SameLine();
  }
  bool dismiss = ImGui::SmallButton("Dismiss");
  ImGui::PushFont(fonts.mono);
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopFont();
  if (s.has_graph && !e.file.empty()) ImGui::TextDisabled("still showing the previous graph: %s", s.title.c_str());
  ImGui::EndChild();
  ImGui::PopStyleVar();
  ImGui::PopStyleColor(2);
  if (dismiss) s.error.reset();
  return h;
}

}  // namespace lathe::views
