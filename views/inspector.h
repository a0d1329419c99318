// inspector.h — the inspector window: everything about the selected node (op, dtype,
// shape, attributes, inputs and users as links, provenance, its line of text IR), or the
// selected composite, or, with nothing selected, a summary of the graph (inputs, outputs,
// op counts by category).
#pragma once
#include "views/app_state.h"
#include "views/theme.h"

namespace lathe::views {

// Inspector > Values: Run, then the selected node's min / max / mean / NaN count and a
// histogram (inspector_values.cpp).
void inspect_values(AppState& s, NodeRef n);

void draw_inspector(AppState& s, const Fonts& fonts);

}  // namespace lathe::views
