// open_dialog.h — File > Open: a modal with a path box (Enter opens), the samples found
// next to the working directory, and the recently opened files. Opening goes through
// AppState::open, so a bad file lands in the error panel like any other.
#pragma once
#include <string>
#include <vector>

#include "views/app_state.h"

namespace lathe::views {

class OpenDialog {
 public:
  void open(const std::string& initial = "");   // shows the dialog from the next frame
  void draw(AppState& s);                         // call every frame
  std::vector<std::string> recent;                // newest first

 private:
  bool want_open_ = false;
  bool focus_ = false;
  char path_[1024] = {};
  std::vector<std::string> samples_;
};

// *.lathe, *.lua and *.onnx files in DIR (sorted), or nothing when DIR is missing.
std::vector<std::string> list_graph_files(const std::string& dir);

}  // namespace lathe::views
