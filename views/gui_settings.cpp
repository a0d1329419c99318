// gui_settings.cpp — reading and writing gui.ini in the XDG config directory.
#include "views/gui_settings.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lathe::views {

void GuiSettings::clamp() {
  window_w = std::clamp(window_w, 480, 16384);
  window_h = std::clamp(window_h, 360, 16384);
  split_x = std::clamp(split_x, 0.2f, 0.9f);
  split_y = std::clamp(split_y, 0.25f, 0.92f);
}

std::string config_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/lathe";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.config/lathe";
  return "";
}

std::string imgui_ini_path() {
  std::string d = config_dir();
  return d.empty() ? "" : d + "/imgui.ini";
}

GuiSettings load_gui_settings() {
  GuiSettings s;
  std::string d = config_dir();
  if (d.empty()) return s;
  std::ifstream in(d + "/gui.ini");
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos || line[0] == '#') continue;
    std::string key = line.substr(0, eq), val = line.substr(eq + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    val.erase(0, val.find_first_not_of(" \t"));
    try {
      if (key == "window_w") s.window_w = std::stoi(val);
      else if (key == "window_h") s.window_h = std::stoi(val);
      else if (key == "split_x") s.split_x = std::stof(val);
      else if (key == "split_y") s.split_y = std::stof(val);
      else if (key == "last_file") s.last_file = val;
    } catch (...) {
      // a malformed value keeps the default
    }
  }
  s.clamp();
  return s;
}

void save_gui_settings(const GuiSettings& s) {
  std::string d = config_dir();
  if (d.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  if (ec) return;
  std::ostringstream out;
  out << "# Lathe desktop app: window and panel sizes (rewritten on exit)\n"
      << "window_w = " << s.window_w << "\nwindow_h = " << s.window_h << "\nsplit_x = " << s.split_x
      << "\nsplit_y = " << s.split_y << "\n";
  if (!s.last_file.empty()) out << "last_file = " << s.last_file << "\n";
  std::string tmp = d + "/gui.ini.tmp";
  {
    std::ofstream f(tmp);
    if (!f) return;
    f << out.str();
  }
  std::filesystem::rename(tmp, d + "/gui.ini", ec);
}

}  // namespace lathe::views
