// console.h — the Lua console window: a line of input, the transcript above it, and
// Up/Down history. Views do not link Lua: the app hands in `eval`, a function that runs a
// line through the scripting layer's command layer and returns what it printed (or the
// error). Without one the window says the scripting layer is not in this build.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "views/app_state.h"
#include "views/theme.h"

namespace lathe::views {

struct ConsoleResult {
  std::string output;   // what the line printed (and its value, REPL-style)
  bool ok = true;       // false: output is an error message
};
using ConsoleEval = std::function<ConsoleResult(const std::string& line, AppState& s)>;

class Console {
 public:
  ConsoleEval eval;   // set by the app when scripting is available
  void draw(AppState& s, const Fonts& fonts);

 private:
  struct Entry { std::string text; int kind; };   // 0 input, 1 output, 2 error
  std::vector<Entry> transcript_;
  std::vector<std::string> history_;
  int history_pos_ = -1;
  char line_[1024] = {};
  bool scroll_ = false;
  static int on_input(struct ImGuiInputTextCallbackData* d);
};

}  // namespace lathe::views
