// rules_editor.cpp — the rules editor window (see rules_editor.h).
#include "views/rules_editor.h"

#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace lathe::views {

namespace {

bool is_builtin_name(const std::string& source) {
  return source.find('/') == std::string::npos && (source.size() < 4 || source.compare(source.size() - 4, 4, ".lua") != 0);
}

// The text of 1-based line `line` of `text` ("" when out of range).
std::string line_of(const std::string& text, int line) {
  size_t pos = 0;
  for (int i = 1; i < line && pos != std::string::npos; ++i) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos || pos >= text.size()) return "";
  size_t end = text.find('\n', pos);
  return text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

}  // namespace

bool open_rules_file(AppState& s, const std::string& source) {
  std::string file = source;
  if (s.resolve_rules) {
    try {
      file = s.resolve_rules(source);
    } catch (const std::exception& e) {
      s.error = LoadError{"cannot open rules " + source, Diagnostic{e.what()}, ""};
      s.fail(s.error->what + ": " + e.what());
      return false;
    }
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) {
    s.error = LoadError{"cannot open rules " + source, Diagnostic{"cannot read " + file, file}, ""};
    s.fail(s.error->what + ": cannot read " + file);
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  AppState::RulesDoc& doc = s.rules_doc;
  doc.path = file;
  doc.text = ss.str();
  doc.dirty = false;
  doc.builtin = is_builtin_name(source);
  doc.error.clear();
  doc.error_line = 0;
  s.info("editing " + file + (doc.builtin ? " (built-in: Save writes a copy under another path)" : ""));
  return true;
}

bool save_rules_file(AppState& s, const std::string& path, std::string* why) {
  AppState::RulesDoc& doc = s.rules_doc;
  std::string target = path.empty() ? doc.path : path;
  if (target.empty()) {
    *why = "no file: type a path to save to";
    return false;
  }
  if (doc.builtin && target == doc.path) {
    *why = "a built-in rule set: type another path to save a copy (the shipped file stays as it is)";
    return false;
  }
  std::ofstream f(target, std::ios::binary | std::ios::trunc);
  if (!f || !(f << doc.text) || !f.flush()) {
    *why = "cannot write " + target;
    return false;
  }
  doc.path = target;
  doc.builtin = false;
  doc.dirty = false;
  s.info("saved " + target);
  return true;
}

int RulesEditor::on_edit(ImGuiInputTextCallbackData* d) {
  auto* self = static_cast<RulesEditor*>(d->UserData);
  int line = 1, col = 1;
  for (int i = 0; i < d->CursorPos && i < d->BufTextLen; ++i) {
    if (d->Buf[i] == '\n') ++line, col = 1;
    else ++col;
  }
  self->cursor_line_ = line, self->cursor_col_ = col;
  return 0;
}

void RulesEditor::draw(AppState& s, const Fonts& fonts, Timeline& timeline) {
  AppState::RulesDoc& doc = s.rules_doc;
  if (!s.rules_open_request.empty()) {
    open_rules_file(s, s.rules_open_request);
    s.rules_open_request.clear();
  }
  if (doc.path != shown_path_) {
    shown_path_ = doc.path;
    std::snprintf(path_, sizeof path_, "%s", doc.path.c_str());
  }
  ImGui::SetNextItemWidth(std::max(200.0f, ImGui::GetContentRegionAvail().x * 0.35f));
  bool enter = ImGui::InputTextWithHint("##rules-path", "rules file (FILE.lua) or a built-in name", path_, sizeof path_,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Open") || enter) open_rules_file(s, path_);
  bool have = !doc.path.empty() || !doc.text.empty();
  ImGui::BeginDisabled(!have);
  ImGui::SameLine(0, 16);
  bool save_key = ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed('S') && ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows);
  bool save = ImGui::Button("Save") || save_key;
  ImGui::SameLine();
  bool reload = ImGui::Button("Save & reload");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("save, then :rules FILE: a new session on the graph shown with these rules");
  ImGui::SameLine();
  if (ImGui::Button("Revert") && !doc.path.empty()) {
    bool builtin = doc.builtin;
    if (open_rules_file(s, doc.path)) doc.builtin = builtin;
  }
  ImGui::EndDisabled();
  if (save || reload) {
    std::string why;
    if (save_rules_file(s, path_, &why)) {
      note_ = "saved";
      if (reload) note_ = timeline.load_rules(s, doc.path) ? "saved and reloaded" : "saved; the reload failed (see the error)";
    } else {
      note_ = why;
      s.warn("save rules: " + why);
    }
  }
  ImGui::SameLine(0, 16);
  if (doc.dirty) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarn), "modified");
  else if (!note_.empty()) ImGui::TextDisabled("%s", note_.c_str());
  ImGui::SameLine(0, 16);
  ImGui::TextDisabled("line %d, col %d", cursor_line_, cursor_col_);

  if (!have) {
    ImGui::TextDisabled("Open a rules file here (or press Edit in the Timeline) to edit, save and reload it.");
    return;
  }
  if (doc.builtin) ImGui::TextDisabled("built-in rule set: Save writes a copy to the path you type above");
  if (!doc.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(colors::kError));
    if (doc.error_line > 0) {   // the first line of the message; the error panel has all of it
      std::string first = doc.error.substr(0, doc.error.find('\n'));
      ImGui::Text("line %d: %s", doc.error_line, first.c_str());
      std::string src = line_of(doc.text, doc.error_line);
      ImGui::PushFont(fonts.mono);
      ImGui::Text("%4d | %s", doc.error_line, src.c_str());
      ImGui::PopFont();
    } else {
      ImGui::TextWrapped("%s", doc.error.c_str());
    }
    ImGui::PopStyleColor();
  }
  ImGui::PushFont(fonts.mono);
  ImGui::PushStyleColor(ImGuiCol_FrameBg, ImGui::ColorConvertU32ToFloat4(colors::kCanvas));
  if (ImGui::InputTextMultiline("##rules-text", &doc.text, ImVec2(-1, -1),
                                ImGuiInputTextFlags_AllowTabInput | ImGuiInputTextFlags_CallbackAlways, &RulesEditor::on_edit,
                                this))
    doc.dirty = true;
  ImGui::PopStyleColor();
  ImGui::PopFont();
}

}  // namespace lathe::views
