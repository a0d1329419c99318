// profile_panel.h — the profile window: per-kernel time, FLOPs, bytes and a roofline plot
// after a run. Until a profile exists it says how to get one (no made-up data).
#pragma once
#include "views/app_state.h"

namespace lathe::views {

void draw_profile_panel(AppState& s);

}  // namespace lathe::views
