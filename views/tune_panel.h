// tune_panel.h — the Tune tab (bottom panel): Tune the selected kernel or the whole graph
// (trials, time or cost model), progress and Cancel while the job runs (tune_job.h), then
// per tuned kernel: its candidates' times against the trial number (a log-scale scatter
// with the best so far and the heuristic's time as a line), the best schedule's primitive
// log, and its loop IR beside the heuristic's. Apply replays the schedules that beat the
// heuristic onto `p` and writes the records. The kernel shown is the one selected in the
// app (a row clicked selects its kernel), else the latest.
#pragma once
#include <string>

#include "views/app_state.h"
#include "views/code_view.h"
#include "views/theme.h"
#include "views/tune_job.h"

namespace lathe::views {

class TunePanel {
 public:
  void draw(AppState& s, const Fonts& fonts);

 private:
  void toolbar(AppState& s, const TuneRun::Live* live);
  int kernel_table(AppState& s, const TuneRun::Live& live, float height);
  void plot(const TuneKernel& tk, const std::string& measure, float height);
  void code(const TuneKernel& tk, const Fonts& fonts);
  int trials_ = 16;
  int measure_ = 0;   // 0 time, 1 model
  CodeView heuristic_view_, best_view_;
};

}  // namespace lathe::views
