// log_panel.cpp — the log window (see log_panel.h).
#include "views/log_panel.h"

namespace lathe::views {

void draw_log_panel(AppState& s, const Fonts& fonts) {
  if (ImGui::SmallButton("Clear")) s.log.clear();
  ImGui::SameLine();
  ImGui::TextDisabled("%zu lines", s.log.size());
  ImGui::BeginChild("log-lines", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(fonts.mono);
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(s.log.size()));
  while (clip.Step())
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const LogLine& l = s.log[i];
      ImVec4 col = l.kind == LogLine::Kind::Error  ? ImVec4(1.0f, 0.45f, 0.45f, 1)
                   : l.kind == LogLine::Kind::Warn ? ImVec4(0.95f, 0.75f, 0.35f, 1)
                                                   : ImGui::GetStyle().Colors[ImGuiCol_Text];
      ImGui::PushStyleColor(ImGuiCol_Text, col);
      ImGui::TextUnformatted(l.text.c_str());
      ImGui::PopStyleColor();
    }
  ImGui::PopFont();
  if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 1) ImGui::SetScrollHereY(1.0f);   // follow the tail
  ImGui::EndChild();
}

}  // namespace lathe::views
