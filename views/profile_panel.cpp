// profile_panel.cpp — the profile window (see profile_panel.h): a placeholder until the
// runtime's profiler can be called from the app.
#include "views/profile_panel.h"

#include <imgui.h>

namespace lathe::views {

void draw_profile_panel(AppState& s) {
  (void)s;
  ImGui::TextWrapped("No profile yet. Compile with :compile, then run with :profile (or `lathe run FILE --profile`) "
                     "to see per-kernel time, GFLOP/s, GB/s and the roofline here.");
}

}  // namespace lathe::views
