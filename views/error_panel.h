// error_panel.h — the error panel: the last failed load (or script) with its location,
// the offending source line and a caret, and buttons to retry or dismiss. It sits above
// the graph view; the app keeps running and the previous graph stays usable.
#pragma once
#include "views/app_state.h"
#include "views/theme.h"

namespace lathe::views {

// Draws the panel when s.error is set (nothing otherwise). Returns its height.
float draw_error_panel(AppState& s, const Fonts& fonts);

}  // namespace lathe::views
