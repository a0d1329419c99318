// kernels_panel.h — the kernels window: Compile (backend choice), the fused kernels with
// their kinds, node counts and (after a profile) times; for the selected kernel its loop
// IR, generated source and assembly (when the backend gives one) in a code viewer with
// line numbers and highlighting. Selecting a kernel here selects it everywhere (the graph
// view outlines its primitive nodes, the kernel level its box). Before a compile it says
// how to compile (no made-up data).
#pragma once
#include <string>
#include <vector>

#include "views/app_state.h"
#include "views/code_view.h"
#include "views/theme.h"

namespace lathe::views {

class KernelsPanel {
 public:
  void draw(AppState& s, const Fonts& fonts);

 private:
  void compile_bar(AppState& s);
  void kernel_table(AppState& s);
  void kernel_code(AppState& s, const Fonts& fonts);
  CodeView code_;
  std::vector<std::string> backends_;
  int backend_ = 0;
  const void* followed_ = nullptr;   // the Compiled the backend combo last followed
  int tab_ = 0;                  // 0 loop IR, 1 source, 2 assembly
  int scrolled_to_ = -1;         // the kernel the list last scrolled to
};

}  // namespace lathe::views
