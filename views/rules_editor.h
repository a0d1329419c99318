// rules_editor.h — the rules editor window (bottom "Rules" tab): the text of a rules file
// in an editable buffer, Save, Save & reload (through the timeline's `:rules`, so the
// session restarts on the graph shown with the new rules) and Revert. A rule file that
// fails to load puts its file:line and message in the error panel and above the text,
// and the session loaded before stays. A built-in set (assets/rules) opens read-only in
// spirit: Save asks for another path, so the shipped file is never overwritten.
//
// The document lives in AppState::rules_doc so the `gui` Lua table (gui.edit_rules,
// gui.rules_text, gui.save_rules) sees what the window shows.
#pragma once
#include <string>

#include "views/app_state.h"
#include "views/theme.h"
#include "views/timeline.h"

namespace lathe::views {

// Opens a rules file (or a built-in set by name, through AppState::resolve_rules) in the
// editor. False, with the error panel, when it cannot be read.
bool open_rules_file(AppState& s, const std::string& source);
// Writes the buffer to `path` ("" = the file open). False with *why when it cannot (a
// built-in set saved over itself, an unwritable path).
bool save_rules_file(AppState& s, const std::string& path, std::string* why);

class RulesEditor {
 public:
  void draw(AppState& s, const Fonts& fonts, Timeline& timeline);

 private:
  char path_[512] = {};
  std::string shown_path_;    // the doc path path_ was last filled from
  int cursor_line_ = 1, cursor_col_ = 1;
  std::string note_;          // the last save's outcome
  static int on_edit(struct ImGuiInputTextCallbackData* d);
};

}  // namespace lathe::views
