// kernels_panel.h — the kernels window: the fused kernels with their times and, for the
// selected one, its loop IR and generated source. Until the graph is compiled it says how
// to compile (no made-up data).
#pragma once
#include "views/app_state.h"

namespace lathe::views {

void draw_kernels_panel(AppState& s);

}  // namespace lathe::views
