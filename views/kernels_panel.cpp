// kernels_panel.cpp — the kernels window (see kernels_panel.h): a placeholder until the
// scheduler and backends can be called from the app.
#include "views/kernels_panel.h"

#include <imgui.h>

namespace lathe::views {

void draw_kernels_panel(AppState& s) {
  if (!s.has_graph) {
    ImGui::TextDisabled("No graph loaded.");
    return;
  }
  ImGui::TextWrapped("Not compiled yet. Compile with :compile in the console (or `lathe kernels FILE`) "
                     "to list the fused kernels here with their loop IR and generated C / LLVM IR / assembly.");
}

}  // namespace lathe::views
