// log_panel.h — the log window: what the app did (files opened, groups expanded, layout
// times) and every error, newest at the bottom, coloured by kind, with a Clear button.
#pragma once
#include "views/app_state.h"
#include "views/theme.h"

namespace lathe::views {

void draw_log_panel(AppState& s, const Fonts& fonts);

}  // namespace lathe::views
