// profile.cpp — ProfileReport's table and Chrome trace export.
#include "core/runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/ir/diag.h"

namespace lathe {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

std::string ProfileReport::table() const {
  std::vector<const KernelProfile*> rows;
  for (auto& k : kernels) rows.push_back(&k);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->median_ms > b->median_ms; });
  double sum = 0;
  for (auto& k : kernels) sum += k.median_ms;
  size_t w = 6;
  for (auto* k : rows) w = std::max(w, k->name.size());
  std::vector<std::string> head{"Kernel", "Kind", "Nodes", "Time %", "Median", "Min", "Calls", "GFLOP/s", "GB/s", "Roof %", "Bound"};
  std::vector<size_t> widths{w, 11, 5, 7, 10, 10, 5, 8, 8, 6, 7};
  std::string out;
  auto line = [&]() { for (size_t i = 0; i < widths.size(); ++i) out += std::string(widths[i], '-') + "  "; out += "\n"; };
  auto cell = [&](const std::string& s, size_t i, bool left) {
    std::string c = s.size() > widths[i] ? s.substr(0, widths[i]) : s;
    std::string padding(widths[i] - c.size(), ' ');
    out += (left ? c + padding : padding + c) + "  ";
  };
  line();
  for (size_t i = 0; i < head.size(); ++i) cell(head[i], i, i < 2);
  out += "\n";
  line();
  for (auto* k : rows) {
    cell(k->name, 0, true);
    cell(k->kind, 1, true);
    cell(std::to_string(k->nodes), 2, false);
    cell(fmt("%.1f%%", sum > 0 ? 100 * k->median_ms / sum : 0), 3, false);
    cell(fmt("%.3f ms", k->median_ms), 4, false);
    cell(fmt("%.3f ms", k->min_ms), 5, false);
    cell(std::to_string(k->calls), 6, false);
    cell(fmt("%.1f", k->gflops), 7, false);
    cell(fmt("%.1f", k->gbps), 8, false);
    cell(fmt("%.0f", 100 * k->roof) + (k->above_roof.empty() ? "" : "*"), 9, false);
    cell(k->bound, 10, true);
    out += "\n";
  }
  line();
  for (auto* k : rows)  // never a share above the roof without saying why
    if (!k->above_roof.empty()) out += "* " + k->name + ": " + fmt("%.0f%%", 100 * k->roof) + " of the ceiling: " + k->above_roof + "\n";
  out += "Total (median of whole runs): " + fmt("%.3f ms", total_ms) + "   backend: " + backend +
         "   ceiling: " + fmt("%.0f GFLOP/s", peak_gflops) + ", " + fmt("%.1f GB/s", peak_gbps) + "\n";
  if (peak_bytes > 0)
    out += "Memory: arena " + fmt("%.1f MiB", arena_bytes / 1048576.0) + ", peak " + fmt("%.1f MiB", peak_bytes / 1048576.0) + "\n";
  return out;
}

std::string ProfileReport::trace_json() const {
  nlohmann::json ev = nlohmann::json::array();
  for (auto& e : events)
    ev.push_back({{"name", e.name}, {"cat", "kernel"}, {"ph", "X"}, {"ts", e.start_us}, {"dur", e.dur_us}, {"pid", 1}, {"tid", e.tid}});
  for (auto& k : kernels)
    ev.push_back({{"name", "profile " + k.name}, {"ph", "i"}, {"ts", 0}, {"pid", 1}, {"tid", 0}, {"s", "g"},
                  {"args", {{"median_ms", k.median_ms}, {"gflops", k.gflops}, {"gbps", k.gbps}, {"roof", k.roof}, {"above_roof", k.above_roof}}}});
  nlohmann::json j = {{"traceEvents", ev}, {"displayTimeUnit", "ms"}, {"otherData", {{"backend", backend}}}};
  return j.dump(1);
}

void ProfileReport::write_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw UserError("cannot write trace file '" + path + "'");
  f << trace_json();
  if (!f) throw UserError("error writing trace file '" + path + "'");
}

std::string ProfileReport::json() const {
  std::vector<const KernelProfile*> rows;
  for (auto& k : kernels) rows.push_back(&k);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) { return a->order < b->order; });
  nlohmann::json ks = nlohmann::json::array();
  for (auto* k : rows)
    ks.push_back({{"order", k->order}, {"name", k->name}, {"kind", k->kind}, {"nodes", k->nodes}, {"shape", k->shape},
                  {"sources", k->sources}, {"calls", k->calls}, {"median_us", k->median_ms * 1000},
                  {"min_us", k->min_ms * 1000}, {"flops", k->flops}, {"bytes", k->bytes}, {"roof", k->roof},
                  {"bound", k->bound}});
  nlohmann::json j = {{"backend", backend},         {"total_ms", total_ms},     {"peak_gflops", peak_gflops},
                      {"peak_gbps", peak_gbps},     {"arena_bytes", arena_bytes}, {"kernels", ks}};
  return j.dump(1);
}

void ProfileReport::write_json(const std::string& path) const {
  std::ofstream f(path);
  if (!f) throw UserError("cannot write profile file '" + path + "'");
  f << json() << "\n";
  if (!f) throw UserError("error writing profile file '" + path + "'");
}

}  // namespace lathe
