// timeline.cpp — the rewrite timeline window (see timeline.h).
//
// [SECTION] what commands answered (breakpoint stops, rule-load errors)
// [SECTION] following the session
// [SECTION] the window: controls, history, rules with breakpoints and stats
#include "views/timeline.h"

#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "views/theme.h"

namespace lathe::views {

//-----------------------------------------------------------------------------
// [SECTION] what commands answered (breakpoint stops, rule-load errors)
//-----------------------------------------------------------------------------

Diagnostic diagnostic_from_lua(const std::string& message) {
  // Lua stacks "chunk:line: " prefixes ("lathe-command:73: rules.lua:5: <pattern>:1:7: …"):
  // the place to show is the innermost one that names a file on disk.
  Diagnostic d{message};
  size_t pos = 0;
  while (pos < message.size()) {
    size_t colon = message.find(':', pos);
    size_t newline = message.find('\n', pos);
    if (colon == std::string::npos || colon == pos || newline < colon) break;
    size_t end = colon + 1;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end == colon + 1 || end >= message.size() || message[end] != ':') break;
    std::string file = message.substr(pos, colon - pos);
    size_t text = end + 1;
    while (text < message.size() && message[text] == ' ') ++text;
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec)) {
      d.file = file;
      d.line = std::atoi(message.c_str() + colon + 1);
      d.message = message.substr(text);
    }
    pos = text;
  }
  return d;
}

void note_rewrite(AppState& s, const std::string& line, bool ok, const std::string& output) {
  s.break_rule.clear();
  s.break_node = -1;
  if (!ok) {
    s.fail(line + ": " + output);
    return;
  }
  s.info(line + (output.empty() ? "" : ": " + output));
  // "breakpoint: rule NAME is about to fire at %ID (at step K of N)" (commands_lua.cpp)
  const std::string head = "breakpoint: rule ", mid = " is about to fire at %";
  size_t a = output.find(head);
  if (a == std::string::npos) return;
  size_t b = output.find(mid, a + head.size());
  if (b == std::string::npos) return;
  s.break_rule = output.substr(a + head.size(), b - a - head.size());
  s.break_node = std::atoi(output.c_str() + b + mid.size());
}

void note_rules_load(AppState& s, const std::string& source, bool ok, const std::string& output) {
  AppState::RulesDoc& doc = s.rules_doc;
  if (ok) {
    s.rules_source = source;
    s.break_rule.clear();
    s.break_node = -1;
    s.info(":rules " + source + ": " + output);
    doc.error.clear();
    doc.error_line = 0;
    if (s.error && s.error->what.rfind("cannot load rules", 0) == 0) s.error.reset();   // fixed now
    return;
  }
  Diagnostic d = diagnostic_from_lua(output);
  if (d.file.empty()) d.file = source;
  if (d.line > 0) {   // show the rule as written in the file, beside the message
    std::ifstream f(d.file);
    std::string text;
    for (int i = 0; i < d.line && std::getline(f, text); ++i) {
    }
    size_t first = text.find_first_not_of(" \t");
    if (f && first != std::string::npos) d.note = "line " + std::to_string(d.line) + ": " + text.substr(first);
  }
  s.error = LoadError{"cannot load rules " + source + " (the rules loaded before stay)", d, ""};
  s.fail(":rules " + source + ": " + output);
  if (!doc.path.empty() && (d.file == doc.path || source == doc.path)) {
    doc.error_line = d.file == doc.path ? d.line : 0;
    doc.error = d.message;
  }
}

//-----------------------------------------------------------------------------
// [SECTION] following the session
//-----------------------------------------------------------------------------

void Timeline::command(AppState& s, const std::string& line) {
  ConsoleResult r;
  try {
    r = run(line, s);
  } catch (const std::exception& e) {
    r = {e.what(), false};
  }
  note_rewrite(s, line, r.ok, r.output);
  sync(s);
}

bool Timeline::load_rules(AppState& s, const std::string& source) {
  if (!run) return false;
  std::string quoted;
  for (char c : source) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  ConsoleResult r;
  try {
    r = run(":rules \"" + quoted + "\"", s);
  } catch (const std::exception& e) {
    r = {e.what(), false};
  }
  note_rules_load(s, source, r.ok, r.output);
  if (r.ok) std::snprintf(rules_, sizeof rules_, "%s", source.c_str());
  sync(s);
  return r.ok;
}

void Timeline::sync(AppState& s) {
  if (!session) return;
  std::shared_ptr<RewriteSession> ss = session();
  if (!ss) return;
  int cur = ss->current();
  if (ss.get() == shown_session_ && cur == shown_step_) return;
  if (ss.get() != shown_session_) s.break_rule.clear(), s.break_node = -1;
  shown_session_ = ss.get();
  shown_step_ = cur;
  s.show_version(ss->graph());
  s.quant_float.reset();
  s.quant_step.clear();
  for (int k = cur; k >= 1; --k) {   // the last quantize step at or before this one
    const StepInfo& st = ss->info(k);
    if (st.kind == StepKind::Pass && st.rule.rfind("quantize", 0) == 0) {
      s.quant_float = ss->graph_at(k - 1);
      s.quant_step = "step " + std::to_string(k) + ": " + st.rule;
      break;
    }
  }
  s.step_root = -1;
  s.step_added.clear();
  if (cur > 0) {
    const StepInfo& st = ss->info(cur);
    s.step_root = st.replacement >= 0 ? st.replacement : -1;
    for (int id : st.added) s.step_added.insert(static_cast<uint32_t>(id));
  }
}

//-----------------------------------------------------------------------------
// [SECTION] the window: controls, history, rules with breakpoints and stats
//-----------------------------------------------------------------------------

void Timeline::rules_table(AppState& s, const RewriteSession& ss) {
  RuleStatsTable stats = ss.stats();
  const std::set<std::string>& bps = ss.breakpoints();
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                          ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("rules", 6, flags)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("break", ImGuiTableColumnFlags_WidthFixed);
  ImGui::TableSetupColumn("rule", ImGuiTableColumnFlags_WidthStretch);
  ImGui::TableSetupColumn("fired");
  ImGui::TableSetupColumn("tried");
  ImGui::TableSetupColumn("matched");
  ImGui::TableSetupColumn("ms");
  ImGui::TableHeadersRow();
  for (const Ruleset& rs : ss.rulesets())
    for (const auto& rule : rs.rules()) {
      const std::string& name = rule->name;
      ImGui::PushID(name.c_str());
      ImGui::TableNextRow();
      bool is_break = s.break_rule == name;
      if (is_break) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, colors::kBreakRow);
      ImGui::TableNextColumn();
      bool on = bps.count(name) > 0;
      ImGui::PushStyleColor(ImGuiCol_CheckMark, ImGui::ColorConvertU32ToFloat4(colors::kBreakpoint));
      if (ImGui::Checkbox("##bp", &on)) {
        std::string quoted;
        for (char c : name) {
          if (c == '"' || c == '\\') quoted += '\\';
          quoted += c;
        }
        command(s, "s:breakpoint(\"" + quoted + "\", " + (on ? "true" : "false") + ")");
      }
      ImGui::PopStyleColor();
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("Run stops before %s fires", name.c_str());
      ImGui::TableNextColumn();
      bool enabled = rs.enabled(name);
      if (!enabled) ImGui::TextDisabled("%s (disabled)", name.c_str());
      else ImGui::TextUnformatted(name.c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %s -> %s", rs.name().c_str(), rule->pattern.source.c_str(), rule->replacement_text().c_str());
      auto it = stats.find(name);
      RuleStats st = it == stats.end() ? RuleStats{} : it->second;
      ImGui::TableNextColumn();
      if (st.fired > 0) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kOk), "%llu", static_cast<unsigned long long>(st.fired));
      else ImGui::TextDisabled("0");
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(st.tried));
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(st.matched));
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", st.seconds * 1000.0);
      ImGui::PopID();
    }
  ImGui::EndTable();
}

// "Quantize…": the quantize pass as one session step (`:quantize`; a session with no rules
// is started when there is none). The inspector shows each node's scale and zero point
// and measures the error against the float graph.
void Timeline::quantize_button(AppState& s) {
  if (ImGui::Button("Quantize…")) ImGui::OpenPopup("quantize");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("quantize the MatMul/Gemm-like contractions with constant weights, as one step (:quantize)");
  if (!ImGui::BeginPopup("quantize")) return;
  static const char* modes[] = {"dynamic", "weight-int8", "weight-int4"};
  ImGui::SetNextItemWidth(160);
  ImGui::Combo("mode", &quant_mode_, modes, 3);
  if (quant_mode_ < 2) ImGui::Checkbox("per channel", &quant_per_channel_);
  else {
    ImGui::SetNextItemWidth(160);
    ImGui::InputInt("block", &quant_block_);
    quant_block_ = std::max(quant_block_, 1);
  }
  ImGui::TextDisabled(quant_mode_ == 0   ? "int8 weights, int8 activations per row: the int8 GEMM"
                      : quant_mode_ == 1 ? "int8 weights dequantized at run time, f32 contraction"
                                         : "4-bit values in blocks along K, one f32 scale per block");
  if (ImGui::Button("Quantize")) {
    std::string line = std::string(":quantize ") + modes[quant_mode_];
    if (quant_mode_ < 2) line += quant_per_channel_ ? " per-channel" : " per-tensor";
    else line += " block=" + std::to_string(quant_block_);
    command(s, line + " error=none");   // the inspector measures the error, as a background job
    ImGui::CloseCurrentPopup();
  }
  ImGui::EndPopup();
}

void Timeline::draw(AppState& s) {
  if (!run || !session) {
    ImGui::TextDisabled("Rewrite sessions need the scripting layer (Lua rules), which is not in this build.");
    ImGui::TextDisabled("Meanwhile: lathe rewrite FILE --rules R.lua --print-each");
    return;
  }
  sync(s);
  if (s.rules_source != shown_source_) {   // loaded elsewhere (console, script, editor)
    shown_source_ = s.rules_source;
    if (!shown_source_.empty()) std::snprintf(rules_, sizeof rules_, "%s", shown_source_.c_str());
  }
  std::shared_ptr<RewriteSession> ss = session();
  ImGui::SetNextItemWidth(220);
  bool enter = ImGui::InputTextWithHint("##rules", "rules: FILE.lua or a built-in name", rules_, sizeof rules_,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Load rules") || enter) load_rules(s, rules_);
  ImGui::SameLine();
  if (ImGui::Button("Edit")) {
    s.rules_open_request = s.rules_source.empty() ? std::string(rules_) : s.rules_source;
    s.bottom_tab_request = "Rules";
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("open these rules in the Rules tab (edit, save, reload)");
  ImGui::SameLine();
  quantize_button(s);
  ImGui::BeginDisabled(!ss);
  ImGui::SameLine(0, 16);
  if (ImGui::Button("◀ Back")) command(s, ":back");
  ImGui::SameLine();
  if (ImGui::Button("Step ▶")) command(s, ":step");
  ImGui::SameLine();
  if (ImGui::Button("Run ▶▶")) command(s, ":run");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("rewrite to a fixpoint; stops before a rule marked as a breakpoint fires");
  ImGui::EndDisabled();
  if (!ss) {
    ImGui::TextDisabled("No session: load a rules file (or a built-in set), or Quantize…, to start one on the graph shown.");
    return;
  }
  int cur = ss->current(), last = ss->last();
  ImGui::SameLine(0, 16);
  ImGui::Text("step %d of %d", cur, last);
  if (!s.break_rule.empty()) {
    ImGui::SameLine(0, 16);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(colors::kBreakpoint), "■ stopped before %s at %%%d",
                       s.break_rule.c_str(), s.break_node);
  }
  ImGui::SetNextItemWidth(-1);
  int k = cur;
  if (ImGui::SliderInt("##history", &k, 0, std::max(last, 0), "step %d") && k != cur)
    command(s, ":seek " + std::to_string(k));

  float rules_w = std::max(360.0f, ImGui::GetContentRegionAvail().x * 0.45f);
  ImGui::BeginChild("history", ImVec2(ImGui::GetContentRegionAvail().x - rules_w - 8, 0), true);
  if (ImGui::Selectable("0: the graph as loaded", cur == 0)) command(s, ":seek 0");
  ImGuiListClipper clip;
  clip.Begin(last);
  while (clip.Step())
    for (int i = clip.DisplayStart + 1; i <= clip.DisplayEnd; ++i) {
      std::string line = ss->info(i).summary();
      ImGui::PushID(i);
      if (ImGui::Selectable(line.c_str(), cur == i)) command(s, ":seek " + std::to_string(i));
      if (ImGui::IsItemHovered()) {   // the step's diff, by node id
        const StepInfo& st = ss->info(i);
        auto ids = [](const std::vector<int>& v) {
          std::string t;
          for (size_t j = 0; j < v.size() && j < 24; ++j) t += (j ? " %" : "%") + std::to_string(v[j]);
          if (v.size() > 24) t += " … (" + std::to_string(v.size()) + ")";
          return t.empty() ? std::string("none") : t;
        };
        std::string fired;
        for (auto& [rule, n] : st.fired) fired += "\n  " + rule + " × " + std::to_string(n);
        ImGui::SetTooltip("removed: %s\nadded:   %s%s%s", ids(st.removed).c_str(), ids(st.added).c_str(),
                          fired.empty() ? "" : "\nfired:", fired.c_str());
      }
      ImGui::PopID();
    }
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("rule-stats", ImVec2(0, 0), true);
  rules_table(s, *ss);
  ImGui::EndChild();
}

}  // namespace lathe::views
