// timeline.cpp — the rewrite timeline window (see timeline.h).
#include "views/timeline.h"

#include <imgui.h>

namespace lathe::views {

void Timeline::command(AppState& s, const std::string& line) {
  ConsoleResult r;
  try {
    r = run(line, s);
  } catch (const std::exception& e) {
    r = {e.what(), false};
  }
  if (r.ok) s.info(line + (r.output.empty() ? "" : ": " + r.output));
  else s.fail(line + ": " + r.output);
  sync(s);
}

void Timeline::sync(AppState& s) {
  if (!session) return;
  std::shared_ptr<RewriteSession> ss = session();
  if (!ss) return;
  int cur = ss->current();
  if (ss.get() == shown_session_ && cur == shown_step_) return;
  shown_session_ = ss.get();
  shown_step_ = cur;
  s.show_version(ss->graph());
  s.step_root = -1;
  s.step_added.clear();
  if (cur > 0) {
    const StepInfo& st = ss->info(cur);
    s.step_root = st.replacement >= 0 ? st.replacement : -1;
    for (int id : st.added) s.step_added.insert(static_cast<uint32_t>(id));
  }
}

void Timeline::draw(AppState& s) {
  if (!run || !session) {
    ImGui::TextDisabled("Rewrite sessions need the scripting layer (Lua rules), which is not in this build.");
    ImGui::TextDisabled("Meanwhile: lathe rewrite FILE --rules R.lua --print-each");
    return;
  }
  sync(s);
  std::shared_ptr<RewriteSession> ss = session();
  ImGui::SetNextItemWidth(260);
  bool enter = ImGui::InputTextWithHint("##rules", "rules: FILE.lua or a built-in name", rules_, sizeof rules_,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Load rules") || enter) command(s, std::string(":rules \"") + rules_ + "\"");
  ImGui::BeginDisabled(!ss);
  ImGui::SameLine(0, 16);
  if (ImGui::Button("◀ Back")) command(s, ":back");
  ImGui::SameLine();
  if (ImGui::Button("Step ▶")) command(s, ":step");
  ImGui::SameLine();
  if (ImGui::Button("Run to fixpoint")) command(s, ":run");
  ImGui::EndDisabled();
  if (!ss) {
    ImGui::TextDisabled("No session: load a rules file (or a built-in set) to start one on the graph shown.");
    return;
  }
  int cur = ss->current(), last = ss->last();
  ImGui::SameLine(0, 16);
  ImGui::Text("step %d of %d", cur, last);
  ImGui::SetNextItemWidth(-1);
  int k = cur;
  if (ImGui::SliderInt("##history", &k, 0, std::max(last, 0), "step %d") && k != cur)
    command(s, ":seek " + std::to_string(k));
  ImGui::BeginChild("history");
  if (ImGui::Selectable("0: the graph as loaded", cur == 0)) command(s, ":seek 0");
  for (int i = 1; i <= last; ++i) {
    std::string line = ss->info(i).summary();
    ImGui::PushID(i);
    if (ImGui::Selectable(line.c_str(), cur == i)) command(s, ":seek " + std::to_string(i));
    ImGui::PopID();
    if (cur == i && ImGui::IsWindowAppearing()) ImGui::SetScrollHereY();
  }
  ImGui::EndChild();
}

}  // namespace lathe::views
