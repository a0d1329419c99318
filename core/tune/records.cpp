// records.cpp — records as JSON lines, structural hashes, applying records (see records.h).
#include "core/tune/records.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/lower.h"
#include "core/loop/repack.h"
#include "core/runtime/kernel_cache.h"
#include "core/tune/space.h"

namespace lathe::tune {

std::string structural_hash(const KernelGraph& kg, int kernel) {
  const Kernel& k = kg.kernels.at(kernel);
  if (k.kind == "extern") return cache_key({"lathe-tune-1", "extern", k.root ? k.root->attrs.name : ""});
  loop::LoopFunc f = loop::lower_kernel(kg, kernel, /*plain=*/true);
  return cache_key({"lathe-tune-1", k.kind, code_key(f)});
}

std::string target_of(const std::string& backend) {
  return backend + " | " + cpu_model() + " | threads=" + std::to_string(std::max(1u, std::thread::hardware_concurrency()));
}

std::string default_records_path() { return cache_dir() + "/tuned.jsonl"; }

std::string format_ms(double ms) {
  if (ms < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, ms < 1 ? "%.4f ms" : "%.3f ms", ms);
  return b;
}

std::string to_json_line(const Record& r) {
  nlohmann::ordered_json j;
  j["hash"] = r.hash;
  j["target"] = r.target;
  j["kernel"] = r.kernel;
  j["kind"] = r.kind;
  j["schedule"] = r.schedule;
  j["ms"] = r.ms;
  j["baseline_ms"] = r.baseline_ms;
  j["trials"] = r.trials;
  j["measure"] = r.measure;
  if (!r.graph.empty()) j["graph"] = r.graph;
  return j.dump();
}

std::vector<Record> read_records(const std::string& path, bool missing_ok) {
  std::ifstream in(path);
  if (!in) {
    if (missing_ok) return {};
    throw UserError(path + ": cannot read the tuning records file");
  }
  std::vector<Record> out;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = path + ":" + std::to_string(no) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw UserError(where + "not a JSON record (" + std::string(e.what()) + ")");
    }
    try {
      Record r;
      r.hash = j.at("hash").get<std::string>();
      r.target = j.at("target").get<std::string>();
      r.schedule = j.at("schedule").get<std::vector<std::string>>();
      r.ms = j.at("ms").get<double>();
      r.baseline_ms = j.at("baseline_ms").get<double>();
      r.trials = j.value("trials", 0);
      r.kernel = j.value("kernel", "");
      r.kind = j.value("kind", "");
      r.measure = j.value("measure", "time");
      r.graph = j.value("graph", "");
      out.push_back(std::move(r));
    } catch (const std::exception& e) {
      throw UserError(where + "a record needs hash, target (strings), schedule (a list of strings), ms and baseline_ms (numbers): " +
                      e.what());
    }
  }
  return out;
}

std::vector<Record> merged_records(std::vector<Record> all, const std::vector<Record>& fresh) {
  for (const Record& r : fresh) {
    bool replaced = false;
    for (Record& o : all)
      if (o.hash == r.hash && o.target == r.target) {
        bool from_default = o.from_default;
        o = r;
        o.from_default = from_default;
        replaced = true;
      }
    if (!replaced) all.push_back(r);
  }
  return all;
}

void merge_records(const std::string& path, const std::vector<Record>& fresh) {
  std::vector<Record> all = merged_records(read_records(path, true), fresh);
  std::string text;
  for (auto& r : all) text += to_json_line(r) + "\n";
  if (!atomic_write(path, text)) throw UserError(path + ": cannot write the tuning records");
}

std::string graph_name(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

ApplyReport apply_records(Program& p, const std::vector<Record>& records, const std::string& target,
                          const std::string& graph) {
  ApplyReport rep;
  if (records.empty()) return rep;
  std::multimap<std::string, const Record*> by_hash;
  std::multimap<std::string, const Record*> by_name;
  for (auto& r : records) {
    by_hash.emplace(r.hash, &r);
    if (!r.kernel.empty() && !graph.empty() && r.graph == graph) by_name.emplace(r.kernel, &r);
  }
  int model_skipped = 0, model_applied = 0;
  for (int i = 0; i < p.num_kernels(); ++i) {
    const Kernel& k = p.kg.kernels[i];
    if (k.kind == "extern") continue;
    std::string h = structural_hash(p.kg, i);
    const Record* match = nullptr;
    std::string other_target;
    for (auto [it, end] = by_hash.equal_range(h); it != end; ++it) {
      if (it->second->target == target) match = it->second;
      else other_target = it->second->target;
    }
    if (!match) {
      if (!other_target.empty())
        rep.notes.push_back("tuning record for " + k.name + " ignored: it was measured on '" + other_target + "', not '" + target + "'");
      else
        for (auto [it, end] = by_name.equal_range(k.name); it != end; ++it)
          if (it->second->target == target) {
            rep.notes.push_back("tuning record for " + k.name + " ignored: the kernel has changed since it was tuned (hash " +
                                it->second->hash.substr(0, 12) + ", now " + h.substr(0, 12) + ")");
            break;
          }
      continue;
    }
    // never slower than the heuristic: a record must have beaten it by more than the noise
    if (!(match->ms < match->baseline_ms * kApplyMargin)) continue;
    // a cost-model prediction, not a time: only from a file the user named
    const bool model = match->measure == "model";
    if (model && match->from_default) {
      ++model_skipped;
      continue;
    }
    try {
      // GEMM blocks other than the build's: its prepacked weights packed again in the
      // record's layout, once, here (else the tuned kernel would pack them on every run)
      loop::MatmulParams mp;
      if (!match->schedule.empty() && parse_matmul_line(match->schedule[0], mp)) loop::repack_for(p.kg, i, mp);
      loop::LoopFunc f = replay(p.kg, i, match->schedule);
      f.name = p.funcs[i].name;
      p.funcs[i] = std::move(f);
      ++rep.applied;
      model_applied += model;
    } catch (const UserError& e) {
      rep.notes.push_back("tuning record for " + k.name + " ignored: " + e.what());
    }
  }
  auto records_word = [](int n) { return "tuning records for " + std::to_string(n) + (n == 1 ? " kernel" : " kernels"); };
  if (model_skipped)
    rep.notes.push_back(records_word(model_skipped) + " of `lathe tune --measure model` in the default records file not applied: " +
                        "they are cost-model predictions, not times (apply them with --tuned " + default_records_path() +
                        ", or tune with --measure time)");
  if (model_applied)
    rep.notes.push_back(records_word(model_applied) + " applied are cost-model predictions (`--measure model`), not measured");
  return rep;
}

std::vector<Record> load_tuned(const std::string& path) {
  if (path == "none") return {};
  if (path.empty()) {
    std::vector<Record> r = read_records(default_records_path(), true);
    for (auto& x : r) x.from_default = true;
    return r;
  }
  return read_records(path);
}

}  // namespace lathe::tune
