// console.cpp — the Lua console window (see console.h).
#include "views/console.h"

#include <imgui.h>

#include <cstring>

namespace lathe::views {

int Console::on_input(ImGuiInputTextCallbackData* d) {
  auto* self = static_cast<Console*>(d->UserData);
  if (d->EventFlag != ImGuiInputTextFlags_CallbackHistory || self->history_.empty()) return 0;
  int n = static_cast<int>(self->history_.size());
  if (d->EventKey == ImGuiKey_UpArrow) self->history_pos_ = self->history_pos_ < 0 ? n - 1 : std::max(0, self->history_pos_ - 1);
  else if (d->EventKey == ImGuiKey_DownArrow) self->history_pos_ = self->history_pos_ < 0 || self->history_pos_ + 1 >= n ? -1 : self->history_pos_ + 1;
  d->DeleteChars(0, d->BufTextLen);
  if (self->history_pos_ >= 0) d->InsertChars(0, self->history_[self->history_pos_].c_str());
  return 0;
}

void Console::draw(AppState& s, const Fonts& fonts) {
  if (!eval) {
    ImGui::TextDisabled("The Lua console needs the scripting layer, which is not in this build.");
    ImGui::TextDisabled("Use `lathe repl FILE` in a terminal meanwhile.");
    return;
  }
  float input_h = ImGui::GetFrameHeightWithSpacing();
  ImGui::BeginChild("console-out", ImVec2(0, -input_h), false, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::PushFont(fonts.mono);
  for (auto& e : transcript_) {
    ImVec4 col = e.kind == 0 ? ImVec4(0.55f, 0.75f, 1.0f, 1) : e.kind == 2 ? ImVec4(1.0f, 0.45f, 0.45f, 1)
                                                                      : ImGui::GetStyle().Colors[ImGuiCol_Text];
    ImGui::PushStyleColor(ImGuiCol_Text, col);
    ImGui::TextUnformatted(e.text.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::PopFont();
  if (scroll_) ImGui::SetScrollHereY(1.0f), scroll_ = false;
  ImGui::EndChild();
  ImGui::PushFont(fonts.mono);
  ImGui::SetNextItemWidth(-1);
  // While a background job runs the console waits: Lua could reschedule or run the very
  // program the job is using.
  bool busy = s.jobs.busy();
  std::string hint = busy ? "(waiting for the job: " + s.jobs.label() + ")" : "> Lua (the `lathe` module; g is the graph shown)";
  ImGui::BeginDisabled(busy);
  bool enter = ImGui::InputTextWithHint("##lua", hint.c_str(), line_, sizeof line_,
                                        ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_CallbackHistory,
                                        &Console::on_input, this);
  ImGui::EndDisabled();
  ImGui::PopFont();
  if (busy) enter = false;
  if (enter && line_[0]) {
    std::string line = line_;
    line_[0] = 0;
    history_.push_back(line);
    history_pos_ = -1;
    transcript_.push_back({"> " + line, 0});
    ConsoleResult r;
    try {
      r = eval(line, s);
    } catch (const std::exception& e) {
      r = {e.what(), false};
    }
    if (!r.output.empty()) transcript_.push_back({r.output, r.ok ? 1 : 2});
    scroll_ = true;
    ImGui::SetKeyboardFocusHere(-1);
  }
}

}  // namespace lathe::views
