// gui_settings.h — what the app remembers between runs: window size and the panel splits.
//
// Two files in the XDG config directory ($XDG_CONFIG_HOME/lathe, else ~/.config/lathe):
//   imgui.ini   ImGui's own (window and table state), path from imgui_ini_path()
//   gui.ini     ours, `key = value` lines: window_w, window_h, split_x, split_y, last_file
// A missing or unreadable file gives the defaults; a bad line is ignored. Headless runs
// (--screenshot) neither read nor write these so screenshots are reproducible.
#pragma once
#include <string>

namespace lathe::views {

struct GuiSettings {
  int window_w = 1280, window_h = 800;
  float split_x = 0.68f;   // graph view width as a fraction of the window
  float split_y = 0.74f;   // top row height as a fraction of the area under the menu bar
  std::string last_file;   // the last file opened (offered in File > Open)

  void clamp();
};

std::string config_dir();        // "" when neither XDG_CONFIG_HOME nor HOME is set
std::string imgui_ini_path();    // "" when there is no config dir
GuiSettings load_gui_settings();
void save_gui_settings(const GuiSettings& s);   // silently does nothing on I/O errors

}  // namespace lathe::views
