// kernels_panel.cpp — the kernels window (see kernels_panel.h).
//
// [SECTION] compile bar
// [SECTION] kernel list
// [SECTION] the selected kernel's code (loop IR, source, assembly)
#include "views/kernels_panel.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "core/loop/loop_print.h"
#include "views/app_actions.h"

namespace lathe::views {

//-----------------------------------------------------------------------------
// [SECTION] compile bar
//-----------------------------------------------------------------------------

void KernelsPanel::compile_bar(AppState& s) {
  if (backends_.empty() && s.hooks.backends) {
    try {
      backends_ = s.hooks.backends();
    } catch (const std::exception&) {
    }
  }
  if (!backends_.empty()) {
    // The combo follows the program shown (compiled here or with :compile B).
    if (s.compiled && s.compiled.get() != followed_) {
      followed_ = s.compiled.get();
      for (size_t i = 0; i < backends_.size(); ++i)
        if (backends_[i] == s.compiled->backend) backend_ = static_cast<int>(i);
    }
    backend_ = std::clamp(backend_, 0, static_cast<int>(backends_.size()) - 1);
    ImGui::SetNextItemWidth(90);
    if (ImGui::BeginCombo("##backend", backends_[backend_].c_str())) {
      for (int i = 0; i < static_cast<int>(backends_.size()); ++i)
        if (ImGui::Selectable(backends_[i].c_str(), i == backend_)) backend_ = i;
      ImGui::EndCombo();
    }
    ImGui::SameLine();
  }
  bool can = s.has_graph && (s.hooks.build || s.hooks.compile) && !s.jobs.busy();
  bool compiling = s.jobs.busy() && s.jobs.kind() == "compile";
  ImGui::BeginDisabled(!can);
  if (ImGui::Button(compiling ? "Compiling…" : s.compiled ? "Recompile" : "Compile"))
    start_compile(s, backends_.empty() ? "" : backends_[backend_]);
  ImGui::EndDisabled();
  ImGui::SameLine();
  if (!s.compiled) {
    ImGui::TextDisabled(compiling ? "compiling in the background…"
                        : (s.hooks.build || s.hooks.compile) ? "not compiled yet" : "compiling needs the scripting layer");
    return;
  }
  ImGui::TextDisabled("%s · %d kernels", s.compiled->backend.c_str(), s.compiled->num_kernels());
  if (s.compiled->graph_version != s.version) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(0.95f, 0.75f, 0.35f, 1), "(from an earlier step)");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("the graph changed since it was compiled: Recompile to update");
  }
}

//-----------------------------------------------------------------------------
// [SECTION] kernel list
//-----------------------------------------------------------------------------

void KernelsPanel::kernel_table(AppState& s) {
  const Program& p = s.compiled->program();
  const int nk = p.num_kernels();
  const bool timed = s.compiled->profile.has_value();
  double total = 0;
  if (timed)
    for (auto& kp : s.compiled->profile->kernels) total += kp.median_ms;
  float rows = std::min(nk, 9) + 2.2f;   // + header + horizontal scrollbar
  float h = std::min(rows * ImGui::GetTextLineHeightWithSpacing() + 6, ImGui::GetContentRegionAvail().y * 0.45f);
  ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                          ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
  float name_w = 80;
  for (const Kernel& kn : p.kg.kernels) name_w = std::max(name_w, ImGui::CalcTextSize(kn.name.c_str()).x + 8);
  if (!ImGui::BeginTable("kernels", timed ? 5 : 4, flags, ImVec2(0, h))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("#");
  ImGui::TableSetupColumn("kernel", ImGuiTableColumnFlags_WidthFixed, std::min(name_w, 260.0f));
  ImGui::TableSetupColumn("kind");
  ImGui::TableSetupColumn("nodes");
  if (timed) ImGui::TableSetupColumn("time");
  ImGui::TableHeadersRow();
  for (int k = 0; k < nk; ++k) {
    const Kernel& kn = p.kg.kernels[k];
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::PushID(k);
    kernel_swatch(k);
    bool sel = s.selected_kernel == k;
    if (ImGui::Selectable(std::to_string(k + 1).c_str(), sel, ImGuiSelectableFlags_SpanAllColumns))
      s.select_kernel(k, true);
    if (sel && scrolled_to_ != k) ImGui::SetScrollHereY(0.5f), scrolled_to_ = k;
    ImGui::TableSetColumnIndex(1);
    ImGui::TextUnformatted(kn.name.c_str());
    ImGui::TableSetColumnIndex(2);
    ImGui::TextDisabled("%s", kn.kind.c_str());
    ImGui::TableSetColumnIndex(3);
    ImGui::Text("%zu", kn.nodes.size());
    if (timed) {
      ImGui::TableSetColumnIndex(4);
      double ms = s.compiled->kernel_ms(k);
      if (ms >= 0) ImGui::Text("%.4g ms  %4.1f%%", ms, total > 0 ? 100 * ms / total : 0.0);
    }
    ImGui::PopID();
  }
  if (s.selected_kernel < 0) scrolled_to_ = -1;
  ImGui::EndTable();
}

//-----------------------------------------------------------------------------
// [SECTION] the selected kernel's code (loop IR, source, assembly)
//-----------------------------------------------------------------------------

void KernelsPanel::kernel_code(AppState& s, const Fonts& fonts) {
  const int k = s.selected_kernel;
  if (k < 0 || k >= s.compiled->num_kernels()) {
    ImGui::TextDisabled("Select a kernel (here, in the graph or in the profile) to read its code.");
    return;
  }
  const Kernel& kn = s.compiled->program().kg.kernels[k];
  ImGui::Text("%s", kn.name.c_str());
  ImGui::SameLine();
  ImGui::TextDisabled("%s · %zu nodes%s", kn.kind.c_str(), kn.nodes.size(),
                      kn.root ? (" · computes %" + std::to_string(kn.root->id)).c_str() : "");
  ImGui::SameLine();
  if (ImGui::SmallButton("Tune…")) s.bottom_tab_request = "Tune";   // the Tune tab: Tune <this kernel>
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("search schedules for this kernel (the Tune tab)");
  KernelText& t = s.compiled->text[k];
  std::string req = s.code_tab_request;
  s.code_tab_request.clear();
  if (!ImGui::BeginTabBar("code-tabs")) return;
  auto tab = [&](const char* label, const char* key) {
    return ImGui::BeginTabItem(label, nullptr, req == key ? ImGuiTabItemFlags_SetSelected : 0);
  };
  if (tab("Loop IR", "loop")) {
    if (!t.have_loop) {
      try {
        t.loop = loop::print_loop(s.compiled->program().funcs.at(k));
      } catch (const std::exception& e) {
        t.loop = std::string("(cannot print the loop IR: ") + e.what() + ")";
      }
      t.have_loop = true;
    }
    code_.draw("loop-code", t.loop, CodeLang::Loop, fonts);
    ImGui::EndTabItem();
  }
  auto fetch = [&](bool assembly) {
    if (!s.hooks.code) {
      t.code.note = "rendering source needs the backends, which are not in this build";
      return;
    }
    try {
      KernelCode c = s.hooks.code(*s.compiled->exe, k, assembly);
      t.code.source = c.source;
      if (assembly) t.code.assembly = c.assembly;
      t.code.note = c.note;
    } catch (const std::exception& e) {
      t.code.note = e.what();
    }
  };
  std::string src_label = (s.compiled->backend == "llvm" ? "LLVM IR" : s.compiled->backend == "cuda" ? "CUDA C" : "Source");
  src_label += "###source";
  if (tab(src_label.c_str(), "source")) {
    if (!t.have_source) fetch(false), t.have_source = true;
    if (t.code.source.empty()) ImGui::TextWrapped("%s", t.code.note.empty() ? "(no source)" : t.code.note.c_str());
    else code_.draw("source-code", t.code.source, source_lang(s.compiled->backend), fonts);
    ImGui::EndTabItem();
  }
  if (tab("Assembly", "asm")) {
    if (!t.have_asm) fetch(true), t.have_asm = t.have_source = true;
    if (t.code.assembly.empty())
      ImGui::TextWrapped("%s", t.code.note.empty() ? ("the " + s.compiled->backend + " backend cannot show assembly").c_str()
                                                   : t.code.note.c_str());
    else code_.draw("asm-code", t.code.assembly, CodeLang::Asm, fonts);
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

void KernelsPanel::draw(AppState& s, const Fonts& fonts) {
  if (!s.has_graph) {
    ImGui::TextDisabled("No graph loaded.");
    return;
  }
  compile_bar(s);
  if (!s.compiled) {
    ImGui::Spacing();
    ImGui::TextWrapped("Compile the graph shown to list its fused kernels here with their loop IR and generated "
                       "source (C, LLVM IR, assembly). The console's :compile [backend] does the same.");
    return;
  }
  if (s.compiled->num_kernels() == 0) {
    ImGui::TextWrapped("The %s backend runs the graph as a whole: there are no kernels. Compile with c or llvm.",
                       s.compiled->backend.c_str());
    return;
  }
  kernel_table(s);
  ImGui::Separator();
  kernel_code(s, fonts);
}

}  // namespace lathe::views
