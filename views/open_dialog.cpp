// open_dialog.cpp — the File > Open modal (see open_dialog.h).
#include "views/open_dialog.h"

#include <imgui.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace lathe::views {

std::vector<std::string> list_graph_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    auto ext = it->path().extension().string();
    if (ext == ".lathe" || ext == ".lua" || ext == ".onnx") out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void OpenDialog::open(const std::string& initial) {
  want_open_ = true;
  focus_ = true;
  std::snprintf(path_, sizeof path_, "%s", initial.c_str());
  samples_ = list_graph_files("samples");
}

void OpenDialog::draw(AppState& s) {
  if (want_open_) {
    ImGui::OpenPopup("Open graph");
    want_open_ = false;
  }
  ImVec2 center(ImGui::GetIO().DisplaySize.x * 0.5f, ImGui::GetIO().DisplaySize.y * 0.4f);
  ImGui::SetNextWindowPos(center, ImGuiCond_Appearing, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowSize(ImVec2(620, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal("Open graph", nullptr, ImGuiWindowFlags_NoSavedSettings)) return;
  ImGui::TextDisabled("A .lathe text IR file, a .lua script returning a graph, or an .onnx model");
  if (focus_) {
    ImGui::SetKeyboardFocusHere();
    focus_ = false;
  }
  ImGui::SetNextItemWidth(-1);
  bool go = ImGui::InputTextWithHint("##path", "path/to/graph.lathe", path_, sizeof path_,
                                     ImGuiInputTextFlags_EnterReturnsTrue);
  auto pick_list = [&](const char* title, const std::vector<std::string>& files) {
    if (files.empty()) return;
    ImGui::TextDisabled("%s", title);
    for (auto& f : files)
      if (ImGui::Selectable(f.c_str(), f == path_, ImGuiSelectableFlags_AllowDoubleClick)) {
        std::snprintf(path_, sizeof path_, "%s", f.c_str());
        if (ImGui::IsMouseDoubleClicked(0)) go = true;
      }
  };
  pick_list("recent", recent);
  pick_list("samples/", samples_);
  ImGui::Separator();
  go |= ImGui::Button("Open", ImVec2(100, 0));
  ImGui::SameLine();
  bool cancel = ImGui::Button("Cancel", ImVec2(100, 0)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape));
  if (go && path_[0]) {
    std::string p = path_;
    if (s.open(p)) {
      recent.erase(std::remove(recent.begin(), recent.end(), p), recent.end());
      recent.insert(recent.begin(), p);
      if (recent.size() > 8) recent.pop_back();
    }
    ImGui::CloseCurrentPopup();   // a failure shows in the error panel
  } else if (cancel) {
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

}  // namespace lathe::views
