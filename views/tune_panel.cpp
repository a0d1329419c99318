// tune_panel.cpp — the Tune tab (see tune_panel.h).
//
// [SECTION] toolbar and progress
// [SECTION] tuned kernels
// [SECTION] the plot: each candidate's time against the trial number
// [SECTION] the best schedule and its loop IR beside the heuristic's
#include "views/tune_panel.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

namespace lathe::views {

namespace {

std::string fmt_ms(double ms) {
  if (ms < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, ms < 0.01 ? "%.5f ms" : ms < 1 ? "%.4f ms" : "%.3f ms", ms);
  return b;
}

// The heuristic's time for the plot's line: the record's pair when the kernel is done,
// else the median of the heuristic runs measured beside the candidates so far.
double heuristic_ms(const TuneKernel& tk) {
  if (tk.has_record) return tk.record.baseline_ms;
  std::vector<double> b;
  for (auto& t : tk.trials)
    if (t.baseline_ms > 0) b.push_back(t.baseline_ms);
  if (b.empty()) return tk.baseline_ms;
  std::nth_element(b.begin(), b.begin() + b.size() / 2, b.end());
  return b[b.size() / 2];
}

const ImU32 kPlotBg = IM_COL32(18, 30, 52, 255);         // the plot's area (tests look for it)
const ImU32 kPoint = IM_COL32(150, 160, 185, 255);       // a candidate slower than the heuristic
const ImU32 kPointFast = colors::kOk;                     // one faster (by the apply margin)
const ImU32 kHeuristic = colors::kSearchHit;              // the heuristic's line
const ImU32 kBest = colors::kKernelHit;                   // the best so far

}  // namespace

//-----------------------------------------------------------------------------
// [SECTION] toolbar and progress
//-----------------------------------------------------------------------------

void TunePanel::toolbar(AppState& s, const TuneRun::Live* live) {
  const bool running = s.jobs.busy() && s.jobs.kind() == "tune";
  const bool can = s.compiled && !s.jobs.busy();
  std::string kname = s.compiled && s.selected_kernel >= 0 ? s.compiled->program().kg.kernels[s.selected_kernel].name : "";
  TuneRequest req;
  req.trials = trials_;
  req.measure = measure_ == 1 ? "model" : "time";
  ImGui::BeginDisabled(!can || kname.empty());
  if (ImGui::Button(("Tune " + (kname.empty() ? std::string("kernel") : kname)).c_str())) {
    req.kernel = s.selected_kernel;
    start_tune(s, req);
  }
  ImGui::EndDisabled();
  if (kname.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip(s.compiled ? "select a kernel (Kernels panel or the graph) to tune it alone" : "compile first");
  ImGui::SameLine();
  ImGui::BeginDisabled(!can);
  if (ImGui::Button("Tune graph")) start_tune(s, req);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  if (ImGui::InputInt("trials", &trials_, 8, 32)) trials_ = std::clamp(trials_, 1, 100000);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("candidates measured per kernel");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  ImGui::Combo("##measure", &measure_, "time\0model\0");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("time: compile and run candidates on the backend\nmodel: rank by the cost model alone (fast, deterministic)");
  ImGui::SameLine();
  if (running) {
    bool stopping = s.tune && s.tune->stop;
    ImGui::BeginDisabled(stopping);
    if (ImGui::Button(stopping ? "Cancelling…" : "Cancel")) cancel_tune(s);
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("stop after the batch in flight; what was found is kept");
  } else {
    const TuneRun* run = s.tune.get();
    int faster = 0;
    if (live)
      for (auto& tk : live->kernels) faster += tk.faster;
    bool can_apply = run && run->finished && !run->applied && faster > 0 && !s.jobs.busy() && run->document == s.document;
    ImGui::BeginDisabled(!can_apply);
    if (ImGui::Button(run && run->applied ? "Applied" : "Apply")) apply_tune(s);
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("replay the schedules that beat the heuristic onto p (recompiles) and write the records");
  }
  ImGui::SameLine();
  // What runs, or what the last run gave.
  const TuneRun* run = s.tune.get();
  if (!s.compiled && !run) {
    ImGui::TextDisabled("compile first (Kernels panel), then tune a kernel or the whole graph");
    return;
  }
  if (!run) {
    ImGui::TextDisabled("search schedules for %s on %s", kname.empty() ? "the graph's kernels" : kname.c_str(),
                        s.compiled->backend.c_str());
    return;
  }
  if (running && live) {
    const tune::Progress& pr = live->progress;
    char text[256];
    float frac = 0;
    if (!live->started) {
      std::snprintf(text, sizeof text, "%s: compiling the heuristic program… %.1f s", run->scope.c_str(), s.jobs.seconds());
    } else if (pr.count == 0) {
      std::snprintf(text, sizeof text, "%s: starting… %.1f s", run->scope.c_str(), s.jobs.seconds());
    } else {
      double within = run->req.measure == "model" ? (pr.done ? 1.0 : 0.5)
                                                  : std::min(1.0, pr.trials / double(std::max(pr.max_trials, 1)));
      frac = static_cast<float>((pr.index - 1 + within) / pr.count);
      std::snprintf(text, sizeof text, "[%d/%d %s] trials %d  best %s  heuristic %s  %.1f s%s", pr.index, pr.count,
                    pr.kernel.c_str(), pr.trials, fmt_ms(pr.best_ms).c_str(), fmt_ms(pr.baseline_ms).c_str(),
                    s.jobs.seconds(), run->stop ? "  (cancelling)" : "");
    }
    ImGui::ProgressBar(frac, ImVec2(-1, 0), text);
    return;
  }
  if (!run->finished) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kError), "tuning %s failed: %s", run->scope.c_str(),
                       s.jobs.last_kind == "tune" ? s.jobs.last_error.c_str() : "see the log");
    return;
  }
  int faster = 0;
  for (auto& tk : live->kernels) faster += tk.faster;
  char text[320];
  std::snprintf(text, sizeof text, "%s%s in %.1f s (%s): %d tuned, %d faster%s", run->interrupted ? "cancelled: " : "",
                run->scope.c_str(), run->seconds, run->req.measure == "model" ? "cost model" : run->backend.c_str(),
                static_cast<int>(run->records.size()), faster,
                run->applied ? ("; applied to p, records in " + run->records_path).c_str() : "");
  ImGui::TextUnformatted(text);
  if (run->document != s.document) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kWarn), "(of a graph no longer shown)");
  }
}

//-----------------------------------------------------------------------------
// [SECTION] tuned kernels
//-----------------------------------------------------------------------------

// One row per distinct kernel of the run; returns the row shown below (the one clicked,
// else the latest).
int TunePanel::kernel_table(AppState& s, const TuneRun::Live& live, float height) {
  const int n = static_cast<int>(live.kernels.size());
  // the row of the kernel selected in the app, else the row clicked last, else the latest
  int shown = s.tune_selected >= 0 && s.tune_selected < n ? s.tune_selected : n - 1;
  if (s.compiled && s.selected_kernel >= 0 && s.selected_kernel < s.compiled->num_kernels())
    for (int i = 0; i < n; ++i)
      if (live.kernels[i].name == s.compiled->program().kg.kernels[s.selected_kernel].name) shown = i;
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                          ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("tuned", 5, flags, ImVec2(0, height))) return shown;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("kernel", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("trials");
  ImGui::TableSetupColumn("best");
  ImGui::TableSetupColumn("heuristic");
  ImGui::TableSetupColumn("speed-up", ImGuiTableColumnFlags_WidthFixed, ImGui::CalcTextSize("speed-up").x + 10);
  ImGui::TableHeadersRow();
  for (int i = 0; i < n; ++i) {
    const TuneKernel& tk = live.kernels[i];
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::PushID(i);
    kernel_swatch(tk.kernel);
    std::string label = tk.name + (tk.done ? "" : "  …");
    if (ImGui::Selectable(label.c_str(), i == shown, ImGuiSelectableFlags_SpanAllColumns)) {
      s.tune_selected = i;
      // the same kernel in the program shown, when it is there
      if (s.compiled)
        for (int k = 0; k < s.compiled->num_kernels(); ++k)
          if (s.compiled->program().kg.kernels[k].name == tk.name) s.select_kernel(k);
    }
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s (%s)", tk.name.c_str(), tk.kind.c_str());
    ImGui::PopID();
    ImGui::TableSetColumnIndex(1);
    ImGui::Text("%d", static_cast<int>(tk.trials.size()));
    ImGui::TableSetColumnIndex(2);
    ImGui::TextUnformatted(fmt_ms(tk.best_ms).c_str());
    ImGui::TableSetColumnIndex(3);
    ImGui::TextUnformatted(fmt_ms(tk.baseline_ms).c_str());
    ImGui::TableSetColumnIndex(4);
    if (tk.best_ms > 0 && tk.baseline_ms > 0) {
      double x = tk.baseline_ms / tk.best_ms;
      bool faster = tk.has_record ? tk.faster : x > 1 / tune::kApplyMargin;
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(faster ? colors::kOk : colors::kTextDim), "%.2fx", x);
    } else {
      ImGui::TextDisabled("-");
    }
  }
  ImGui::EndTable();
  return shown;
}

//-----------------------------------------------------------------------------
// [SECTION] the plot: each candidate's time against the trial number
//-----------------------------------------------------------------------------

void TunePanel::plot(const TuneKernel& tk, const std::string& measure, float height) {
  const double base = heuristic_ms(tk);
  int failed = 0;
  double lo = base > 0 ? base : INFINITY, hi = base > 0 ? base : 0;
  for (auto& t : tk.trials) {
    if (t.ms <= 0) {
      ++failed;
      continue;
    }
    lo = std::min(lo, t.ms), hi = std::max(hi, t.ms);
  }
  ImGui::Text("%s: %s of each candidate", tk.name.c_str(), measure == "model" ? "estimated time" : "time");
  ImGui::SameLine();
  ImGui::TextDisabled("(%d trials%s)", static_cast<int>(tk.trials.size()),
                      failed ? (", " + std::to_string(failed) + " failed").c_str() : "");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(measure == "time"
                          ? "each candidate is timed beside a run of the heuristic (green: faster than that run);\n"
                            "the dashed line is the record's heuristic time, taken when the winner was timed again"
                          : "the cost model's estimates (deterministic); green: below the heuristic's estimate");
  ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImVec2 size(ImGui::GetContentRegionAvail().x, std::max(60.0f, height - ImGui::GetFrameHeightWithSpacing()));
  ImGui::InvisibleButton("plot", size);
  bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 p1(p0.x + size.x, p0.y + size.y);
  dl->AddRectFilled(p0, p1, kPlotBg, 3);
  dl->AddRect(p0, p1, colors::kGrid, 3);
  if (!(hi > 0) || !std::isfinite(lo)) {
    const char* t = tk.trials.empty() ? "no candidate measured yet" : "no candidate could be measured";
    dl->AddText(ImVec2(p0.x + 10, p0.y + 8), colors::kTextDim, t);
    return;
  }
  // log scale, at least a factor of 3 tall
  double ly0 = std::log10(lo / 1.25), ly1 = std::log10(hi * 1.25);
  if (ly1 - ly0 < 0.5) {
    double mid = (ly0 + ly1) / 2;
    ly0 = mid - 0.25, ly1 = mid + 0.25;
  }
  const float fs = ImGui::GetFontSize();
  // the legend takes the top line; the points go below it
  const float left = p0.x + fs * 4.6f, right = p1.x - 8, top = p0.y + fs + 14, bottom = p1.y - fs - 6;
  const int n = std::max<int>(1, static_cast<int>(tk.trials.size()));
  auto X = [&](double trial) { return static_cast<float>(left + (right - left) * (n > 1 ? (trial - 1) / (n - 1) : 0.5)); };
  auto Y = [&](double ms) { return static_cast<float>(bottom - (bottom - top) * (std::log10(ms) - ly0) / (ly1 - ly0)); };
  dl->PushClipRect(p0, p1, true);
  // y ticks: 1, 2, 5 × 10^k inside the range
  char lab[32];
  float last_label = 1e30f;   // labels at least a line apart (a short plot shows fewer)
  for (int e = static_cast<int>(std::floor(ly0)); e <= static_cast<int>(std::ceil(ly1)); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      double v = m * std::pow(10.0, e);
      double lv = std::log10(v);
      if (lv < ly0 || lv > ly1) continue;
      if (m != 1.0 && ly1 - ly0 > 2.2) continue;   // a tall range: decades only
      float y = Y(v);
      if (last_label - y < fs + 2) continue;
      last_label = y;
      dl->AddLine(ImVec2(left, y), ImVec2(right, y), colors::kGrid);
      std::snprintf(lab, sizeof lab, "%g ms", v);
      ImVec2 ts = ImGui::CalcTextSize(lab);
      dl->AddText(ImVec2(left - ts.x - 5, y - ts.y / 2), colors::kTextDim, lab);
    }
  // x ticks: every 1, 2, 5 × 10^k trials, about six of them
  double step = 1;
  for (double m = 1; n / step > 6; m *= 10)
    for (double f : {1.0, 2.0, 5.0})
      if (n / step > 6) step = f * m;
  for (double t = step; t <= n; t += step) {
    float x = X(t);
    dl->AddLine(ImVec2(x, bottom), ImVec2(x, bottom + 3), colors::kTextDim);
    std::snprintf(lab, sizeof lab, "%g", t);
    ImVec2 ts = ImGui::CalcTextSize(lab);
    dl->AddText(ImVec2(x - ts.x / 2, bottom + 3), colors::kTextDim, lab);
  }
  dl->AddLine(ImVec2(left, bottom), ImVec2(right, bottom), colors::kTextDim);
  dl->AddText(ImVec2(p0.x + 6, bottom + 3), colors::kTextDim, "trial");
  // the heuristic's time
  if (base > 0) {
    float y = Y(base);
    for (float x = left; x < right; x += 10) dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 6, right), y), kHeuristic, 1.5f);
    std::string t = "heuristic " + fmt_ms(base);
    ImVec2 ts = ImGui::CalcTextSize(t.c_str());
    dl->AddText(ImVec2(right - ts.x - 4, y - ts.y - 1), kHeuristic, t.c_str());
  }
  // the best so far (a step line) and each candidate
  double best = INFINITY;
  ImVec2 prev(0, 0);
  int best_i = -1;
  for (size_t i = 0; i < tk.trials.size(); ++i) {
    double ms = tk.trials[i].ms;
    if (ms <= 0) continue;
    if (ms < best) {
      ImVec2 at(X(static_cast<double>(i + 1)), Y(ms));
      if (best_i >= 0) {
        dl->AddLine(prev, ImVec2(at.x, prev.y), kBest, 1.5f);
        dl->AddLine(ImVec2(at.x, prev.y), at, kBest, 1.5f);
      }
      best = ms, prev = at, best_i = static_cast<int>(i);
    }
  }
  if (best_i >= 0) dl->AddLine(prev, ImVec2(right, prev.y), kBest, 1.5f);
  int hover_i = -1;
  float hover_d = 64;
  ImVec2 mouse = ImGui::GetIO().MousePos;
  for (size_t i = 0; i < tk.trials.size(); ++i) {
    const tune::Trial& t = tk.trials[i];
    float x = X(static_cast<double>(i + 1));
    if (t.ms <= 0) {   // failed: a red cross on the top edge
      dl->AddLine(ImVec2(x - 3, top), ImVec2(x + 3, top + 6), colors::kError, 1.5f);
      dl->AddLine(ImVec2(x + 3, top), ImVec2(x - 3, top + 6), colors::kError, 1.5f);
      continue;
    }
    float y = Y(t.ms);
    double b = t.baseline_ms > 0 ? t.baseline_ms : base;
    dl->AddCircleFilled(ImVec2(x, y), 2.8f, b > 0 && t.ms < b * tune::kApplyMargin ? kPointFast : kPoint, 8);
    float d = (mouse.x - x) * (mouse.x - x) + (mouse.y - y) * (mouse.y - y);
    if (hovered && d < hover_d) hover_d = d, hover_i = static_cast<int>(i);
  }
  if (best_i >= 0) dl->AddCircle(prev, 6, kBest, 12, 1.5f);
  // legend, top left
  float lx = left + 8, ly = p0.y + 5;
  dl->AddCircleFilled(ImVec2(lx + 4, ly + fs / 2), 3, kPointFast, 8);
  dl->AddText(ImVec2(lx + 12, ly), colors::kTextDim, "faster");
  lx += 12 + ImGui::CalcTextSize("faster").x + 12;
  dl->AddCircleFilled(ImVec2(lx + 4, ly + fs / 2), 3, kPoint, 8);
  dl->AddText(ImVec2(lx + 12, ly), colors::kTextDim, "slower");
  lx += 12 + ImGui::CalcTextSize("slower").x + 12;
  dl->AddLine(ImVec2(lx, ly + fs / 2), ImVec2(lx + 14, ly + fs / 2), kBest, 1.5f);
  dl->AddText(ImVec2(lx + 18, ly), colors::kTextDim, "best so far");
  dl->PopClipRect();
  if (hover_i >= 0) {
    const tune::Trial& t = tk.trials[hover_i];
    if (t.baseline_ms > 0)
      ImGui::SetTooltip("trial %d: %s (heuristic %s beside it)", t.trial, fmt_ms(t.ms).c_str(), fmt_ms(t.baseline_ms).c_str());
    else
      ImGui::SetTooltip("trial %d: %s", t.trial, fmt_ms(t.ms).c_str());
  }
}

//-----------------------------------------------------------------------------
// [SECTION] the best schedule and its loop IR beside the heuristic's
//-----------------------------------------------------------------------------

void TunePanel::code(const TuneKernel& tk, const Fonts& fonts) {
  if (!tk.has_record) {
    ImGui::TextDisabled(tk.done ? "%s: no candidate could be measured" : "%s: the best schedule shows when its search ends",
                        tk.name.c_str());
    return;
  }
  const tune::Record& r = tk.record;
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(tk.faster ? colors::kOk : colors::kTextDim), "%s: %s vs heuristic %s  %.2fx",
                     tk.name.c_str(), fmt_ms(r.ms).c_str(), fmt_ms(r.baseline_ms).c_str(),
                     r.ms > 0 ? r.baseline_ms / r.ms : 0.0);
  ImGui::SameLine();
  bool timed = r.measure == "time";
  ImGui::TextDisabled(tk.faster ? (timed ? "(re-timed; Apply replays it)" : "(Apply replays it)")
                                : "(not faster: Apply keeps the heuristic's)");
  // the primitive log: what p:kernel(i) would replay
  ImGui::TextDisabled("best schedule (%d primitive%s, a p:kernel(i) log):", static_cast<int>(r.schedule.size()),
                      r.schedule.size() == 1 ? "" : "s");
  float lh = ImGui::GetTextLineHeightWithSpacing();
  // the log takes at most a third of the height: the loop IRs below get the rest
  float max_lines = std::max(1.5f, std::floor(ImGui::GetContentRegionAvail().y / 3 / lh) + 0.5f);
  float log_h = std::min<float>(std::max<size_t>(r.schedule.size(), 1), std::min(4.5f, max_lines)) * lh + 8;
  ImGui::PushStyleColor(ImGuiCol_ChildBg, IM_COL32(20, 22, 27, 255));
  ImGui::BeginChild("schedule", ImVec2(0, log_h), true);
  ImGui::PushFont(fonts.mono);
  if (r.schedule.empty()) ImGui::TextDisabled("(none: the plain lowering)");
  for (auto& l : r.schedule) ImGui::TextUnformatted(l.c_str());
  ImGui::PopFont();
  ImGui::EndChild();
  ImGui::PopStyleColor();
  // the two loop IRs side by side
  ImVec2 avail = ImGui::GetContentRegionAvail();
  float half = std::floor((avail.x - 6) / 2);
  ImGui::BeginChild("heuristic-loop", ImVec2(half, avail.y), false);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kHeuristic), "heuristic");
  ImGui::SameLine();
  heuristic_view_.draw("heuristic-code", tk.heuristic_loop, CodeLang::Loop, fonts);
  ImGui::EndChild();
  ImGui::SameLine(0, 6);
  ImGui::BeginChild("best-loop", ImVec2(0, avail.y), false);
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(kBest), "best");
  ImGui::SameLine();
  best_view_.draw("best-code", tk.best_loop, CodeLang::Loop, fonts);
  ImGui::EndChild();
}

//-----------------------------------------------------------------------------

void TunePanel::draw(AppState& s, const Fonts& fonts) {
  std::optional<TuneRun::Live> live;
  if (s.tune) live = s.tune->snapshot();
  toolbar(s, live ? &*live : nullptr);
  if (!s.tune) {
    ImGui::Spacing();
    ImGui::TextDisabled(
        "Tune searches schedules (Lathe's primitives: split, tile, reorder, vectorize, unroll, parallel, the packed GEMM's\n"
        "block sizes) for the selected kernel or every kernel, as `lathe tune` does. Each candidate's time is plotted against\n"
        "the trial number; the best schedule's loop IR shows beside the heuristic's. Apply replays the winners onto p.");
    return;
  }
  if (live->kernels.empty()) {
    if (s.jobs.busy() && s.jobs.kind() == "tune") ImGui::TextDisabled("no candidate measured yet…");
    else if (s.tune->finished) ImGui::TextDisabled("nothing was tuned: %s", s.tune->notes.empty() ? "" : s.tune->notes[0].c_str());
    return;
  }
  ImVec2 avail = ImGui::GetContentRegionAvail();
  float left_w = std::floor(avail.x * 0.42f);
  ImGui::BeginChild("tune-left", ImVec2(left_w, avail.y), false);
  float rows = static_cast<float>(live->kernels.size()) + 1.4f;
  float table_h = std::min(rows * ImGui::GetTextLineHeightWithSpacing() + 8, avail.y * 0.36f);
  int row = kernel_table(s, *live, table_h);
  plot(live->kernels[row], s.tune->req.measure, ImGui::GetContentRegionAvail().y);
  ImGui::EndChild();
  ImGui::SameLine(0, 8);
  ImGui::BeginChild("tune-right", ImVec2(0, avail.y), false);
  code(live->kernels[row], fonts);
  ImGui::EndChild();
}

}  // namespace lathe::views
