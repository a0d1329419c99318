// profile_panel.h — the profile window: Profile (iterations), then per-kernel time,
// GFLOP/s, GB/s and share of the machine ceiling in a sortable table, a bar chart of time
// per kernel and a roofline plot (roofline.h). Clicking a row, a bar or a point selects
// that kernel everywhere. Before a compile / profile it says how to get one (no made-up
// data).
#pragma once
#include <vector>

#include <imgui.h>

#include "views/app_state.h"

namespace lathe::views {

class ProfilePanel {
 public:
  void draw(AppState& s);

 private:
  void table(AppState& s);
  void bars(AppState& s);
  int iters_ = 10;
  std::vector<int> order_;     // table rows: kernel indices in the current sort order
  uint64_t sorted_serial_ = 0;
};

// The roofline plot of the profile: one point per kernel on log-log axes (x: FLOP/byte,
// y: GFLOP/s) under the machine's roof. Fills the space given.
void draw_roofline(AppState& s, ImVec2 size);

}  // namespace lathe::views
