// space.cpp — schedule replay and the per-kind search spaces (see space.h).
#include "core/tune/space.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/loop_print.h"
#include "core/loop/lower_depthwise.h"
#include "core/loop/row_reduce.h"
#include "core/loop/split_k.h"
#include "core/loop/transform.h"
#include "core/loop/transform_jam.h"

namespace lathe::tune {

namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> w;
  for (std::string t; in >> t;) w.push_back(t);
  return w;
}

int64_t to_int(const std::string& s, const std::string& line) {
  try {
    size_t used = 0;
    int64_t v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw UserError("schedule line '" + line + "': expected a number, got '" + s + "'");
}

int64_t const_extent(const loop::Stmt& s) { return loop::is_const(s.extent) ? s.extent->i : -1; }

// the perfectly nested output loops (no reductions) from the first top-level loop
std::vector<std::string> outer_chain(const loop::LoopFunc& f) {
  std::vector<std::string> chain;
  const loop::Stmt* cur = nullptr;
  for (auto& s : f.body)
    if (s.kind == loop::StmtKind::For) { cur = &s; break; }
  while (cur && cur->reduces.empty()) {
    chain.push_back(cur->var);
    if (cur->body.size() != 1 || cur->body[0].kind != loop::StmtKind::For) break;
    cur = &cur->body[0];
  }
  return chain;
}

struct LeafInfo {
  std::string var;
  int64_t extent;
};
// innermost loops worth vectorizing (as the default schedule picks them)
std::vector<LeafInfo> leaves(const loop::LoopFunc& f) {
  std::vector<LeafInfo> r;
  loop::walk(f.body, [&](const loop::Stmt& s) {
    if (s.kind != loop::StmtKind::For) return true;
    bool inner = false;
    loop::walk(s.body, [&](const loop::Stmt& c) { inner |= c.kind == loop::StmtKind::For; return !inner; });
    int64_t e = const_extent(s);
    if (!inner && (e < 0 || e >= 4) && s.note != loop::kEdgeNote) r.push_back({s.var, e});
    return true;
  });
  return r;
}

// output loops (no reductions) that contain a reduction loop, innermost first
std::vector<std::string> reducing_output_loops(const loop::LoopFunc& f) {
  std::vector<std::string> r;
  loop::walk(f.body, [&](const loop::Stmt& s) {
    if (s.kind != loop::StmtKind::For || !s.reduces.empty()) return s.kind != loop::StmtKind::For;
    bool red = false;
    loop::walk(s.body, [&](const loop::Stmt& c) { red |= c.kind == loop::StmtKind::For && !c.reduces.empty(); return !red; });
    if (red) r.push_back(s.var);
    return true;
  });
  std::reverse(r.begin(), r.end());
  return r;
}

// the constant extent of loop `var` (-1: not found or not constant)
int64_t extent_of(const loop::LoopFunc& f, const std::string& var) {
  int64_t e = -1;
  loop::walk(f.body, [&](const loop::Stmt& s) {
    if (s.kind == loop::StmtKind::For && s.var == var) e = const_extent(s);
    return e < 0;
  });
  return e;
}

bool is_parallel(const loop::LoopFunc& f, const std::string& var) {
  bool p = false;
  loop::walk(f.body, [&](const loop::Stmt& s) {
    if (s.kind == loop::StmtKind::For && s.var == var) p = s.annot.parallel;
    return !p;
  });
  return p;
}

template <class F>
bool attempt(loop::LoopFunc& f, F&& fn) {
  loop::LoopFunc backup = f;
  try {
    fn();
    return true;
  } catch (const UserError&) {
    f = std::move(backup);
    return false;
  }
}

}  // namespace

std::string code_key(const loop::LoopFunc& f) {
  std::string text = loop::print_loop(f);
  std::string head = "kernel " + f.name + "(";
  if (text.compare(0, head.size(), head) == 0) text.replace(0, head.size(), "kernel (");
  // the schedule comments are not code
  std::string out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("  # schedule: ", 0) != 0) out += l + "\n";
  return out;
}

std::string matmul_line(const loop::MatmulParams& p) {
  return "matmul mr=" + std::to_string(p.mr) + " nr=" + std::to_string(p.nr) + " lanes=" + std::to_string(p.lanes) +
         " kc=" + std::to_string(p.kc) + " mc=" + std::to_string(p.mc) + " nc=" + std::to_string(p.nc) +
         (p.b_in_place >= 0 ? " bplace=" + std::to_string(p.b_in_place) : "");
}

bool parse_matmul_line(const std::string& line, loop::MatmulParams& p) {
  auto w = words(line);
  if (w.empty() || w[0] != "matmul") return false;
  int seen = 0;
  for (size_t i = 1; i < w.size(); ++i) {
    size_t eq = w[i].find('=');
    if (eq == std::string::npos) throw UserError("schedule line '" + line + "': expected key=value, got '" + w[i] + "'");
    std::string k = w[i].substr(0, eq);
    int v = static_cast<int>(to_int(w[i].substr(eq + 1), line));
    if (k == "bplace") {  // optional: B read in place (1) or packed (0); absent: the heuristic's
      if (v != 0 && v != 1) throw UserError("schedule line '" + line + "': expected bplace=0|1, got '" + w[i] + "'");
      p.b_in_place = v;
      continue;
    }
    int* dst = k == "mr" ? &p.mr : k == "nr" ? &p.nr : k == "lanes" ? &p.lanes : k == "kc" ? &p.kc : k == "mc" ? &p.mc : k == "nc" ? &p.nc : nullptr;
    if (!dst) throw UserError("schedule line '" + line + "': unknown matmul parameter '" + k + "' (mr nr lanes kc mc nc [bplace])");
    *dst = v;
    ++seen;
  }
  if (seen != 6) throw UserError("schedule line '" + line + "': give all of mr nr lanes kc mc nc");
  p.kc_max = p.kc;  // a record's kc is its largest K block (as before kc_max)
  if (p.mr < 1 || p.mr > 16 || (p.lanes != 4 && p.lanes != 8 && p.lanes != 16) || p.nr < p.lanes || p.nr % p.lanes || p.nr > 128 ||
      p.kc < 8 || p.mc < p.mr || p.mc % p.mr || p.nc < p.nr || p.nc % p.nr)
    throw UserError("schedule line '" + line + "': block sizes must nest (nr a multiple of lanes ≤ 128, mc of mr, nc of nr, kc ≥ 8)");
  return true;
}

std::string direct_line(const loop::DirectParams& p, int lanes) {
  return "direct ocb=" + std::to_string(p.ocb) + " rows=" + std::to_string(p.rows) + (p.acc ? " acc=1" : "") +
         " lanes=" + std::to_string(lanes);
}

bool parse_direct_line(const std::string& line, loop::DirectParams& p, int* lanes) {
  auto w = words(line);
  if (w.empty() || w[0] != "direct") return false;
  for (size_t i = 1; i < w.size(); ++i) {
    size_t eq = w[i].find('=');
    if (eq == std::string::npos) throw UserError("schedule line '" + line + "': expected key=value, got '" + w[i] + "'");
    std::string k = w[i].substr(0, eq);
    int v = static_cast<int>(to_int(w[i].substr(eq + 1), line));
    if (k == "ocb" && v >= 0 && v <= 8) p.ocb = v;
    else if (k == "rows" && v >= 0 && v <= 8) p.rows = v;
    else if (k == "acc" && (v == 0 || v == 1)) p.acc = v == 1;
    else if (k == "lanes" && (v == 4 || v == 8 || v == 16)) {
      if (lanes) *lanes = v;
    } else throw UserError("schedule line '" + line + "': expected ocb=0..8 rows=0..8 acc=0|1 lanes=4|8|16, got '" + w[i] + "'");
  }
  p.force = true;
  return true;
}

void apply_line(loop::LoopFunc& f, const std::string& line) {
  auto w = words(line);
  auto need = [&](size_t n, const char* form) {
    if (w.size() < n) throw UserError("schedule line '" + line + "': expected '" + form + "'");
  };
  if (w.empty()) throw UserError("schedule line is empty");
  const std::string& op = w[0];
  if (op == "split") {
    need(4, "split LOOP by FACTOR");
    loop::split(f, w[1], to_int(w[3], line));
  } else if (op == "reorder") {
    need(3, "reorder OUTER INNER");
    loop::reorder(f, w[1], w[2]);
  } else if (op == "tile") {
    need(5, "tile A B by FAxFB");
    size_t x = w[4].find('x');
    if (x == std::string::npos) throw UserError("schedule line '" + line + "': expected FAxFB, got '" + w[4] + "'");
    loop::tile(f, w[1], w[2], to_int(w[4].substr(0, x), line), to_int(w[4].substr(x + 1), line));
  } else if (op == "fuse") {
    need(3, "fuse OUTER INNER");
    loop::fuse(f, w[1], w[2]);
  } else if (op == "vectorize") {
    need(2, "vectorize LOOP");
    loop::vectorize(f, w[1]);
  } else if (op == "peel") {
    need(4, "peel LOOP by WIDTH [masked]");
    if (w.size() > 5 || (w.size() == 5 && w[4] != "masked"))
      throw UserError("schedule line '" + line + "': expected 'peel LOOP by WIDTH [masked]'");
    loop::peel(f, w[1], to_int(w[3], line), w.size() == 5);
  } else if (op == "unroll") {
    need(4, "unroll LOOP by N");
    loop::unroll(f, w[1], static_cast<int>(to_int(w[3], line)));
  } else if (op == "jam") {
    need(4, "jam LOOP by R");
    loop::jam(f, w[1], static_cast<int>(to_int(w[3], line)));
  } else if (op == "parallel") {
    need(2, "parallel LOOP");
    loop::parallel(f, w[1]);
  } else if (op == "reduce_rows") {
    need(4, "reduce_rows LOOP by BLOCK");
    loop::reduce_rows(f, w[1], to_int(w[3], line));
  } else if (op == "split_k") {
    need(4, "split_k LOOP by PARTS");
    loop::split_k(f, w[1], to_int(w[3], line));
  } else if (op == "cache") {
    need(4, "cache BUFFER at LOOP");
    loop::cache(f, w[3], w[1]);
  } else {
    throw UserError("schedule line '" + line + "': unknown primitive '" + op +
                    "' (split reorder tile fuse vectorize peel unroll jam parallel reduce_rows split_k cache; matmul first)");
  }
}

loop::LoopFunc replay(const KernelGraph& kg, int kernel, const std::vector<std::string>& schedule) {
  if (kernel < 0 || kernel >= (int)kg.kernels.size()) throw UserError("replay: no kernel " + std::to_string(kernel));
  const Kernel& k = kg.kernels[kernel];
  if (k.kind == "extern") throw UserError("kernel " + k.name + " is a library call: it has no loops to schedule");
  size_t first = 0;
  loop::LoopFunc f;
  loop::MatmulParams mp;
  loop::DirectParams dp;
  int lanes = 0;  // (a line without lanes=, written before they were logged: the host's)
  if (!schedule.empty() && parse_direct_line(schedule[0], dp, &lanes)) {
    auto d = loop::lower_depthwise_kernel(kg, kernel, lanes > 0 ? lanes : host_machine().lanes, dp);
    if (!d) throw UserError("schedule line 1 '" + schedule[0] + "': kernel " + k.name + " is no convolution the direct nest takes");
    f = std::move(*d);
    first = 1;
  } else if (!schedule.empty() && parse_matmul_line(schedule[0], mp)) {
    if (k.kind != "matmul") throw UserError("schedule line 1 '" + schedule[0] + "': kernel " + k.name + " is not a matmul");
    f = loop::lower_matmul_kernel(kg, kernel, mp);
    first = 1;
  } else {
    f = loop::lower_kernel(kg, kernel, /*plain=*/true);
  }
  for (size_t i = first; i < schedule.size(); ++i) {
    try {
      apply_line(f, schedule[i]);
    } catch (const UserError& e) {
      throw UserError("schedule line " + std::to_string(i + 1) + " '" + schedule[i] + "': " + e.what());
    }
  }
  return f;
}

Machine host_machine() {
  Machine m;
  m.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  loop::MatmulParams hp = loop::host_matmul_params();
  m.lanes = hp.lanes;
  m.vregs = hp.lanes >= 16 ? 32 : 16;
  return m;
}

size_t Space::size() const {
  size_t n = 1;
  for (auto& k : knobs) n *= k.values.size();
  return n;
}

int Space::knob(const std::string& name) const {
  for (size_t i = 0; i < knobs.size(); ++i)
    if (knobs[i].name == name) return static_cast<int>(i);
  return -1;
}

Space make_space(const KernelGraph& kg, int kernel, const Machine& m) {
  const Kernel& k = kg.kernels.at(kernel);
  Space s;
  s.kind = k.kind;
  s.lanes = m.lanes;
  s.threads = std::max(1, m.threads);
  if (k.kind == "extern") return s;
  // a depthwise or stem convolution: the direct nest (1) with its passes' sizes, or (0) the
  // GEMM / the plain reduction with the knobs below
  if (loop::takes_direct_conv(kg, kernel, m.lanes, /*candidate=*/true)) {
    s.knobs.push_back({"direct", {1, 0}});
    loop::DirectParams dp;
    dp.force = true;
    auto f = loop::lower_depthwise_kernel(kg, kernel, m.lanes, dp);
    if (f && f->schedule_log.at(0).rfind("direct conv: ", 0) == 0) s.knobs.push_back({"ocb", {0, 2, 3, 4, 5, 6, 8}});
    s.knobs.push_back({"direct_rows", {0, 1, 3, 4, 6, 8}});  // 6, 8: more rows share each input row's loads
    // one output per plane (a depthwise convolution): its rows' sums in register accumulators
    if (f && f->schedule_log.at(0).rfind("depthwise: ", 0) == 0) s.knobs.push_back({"direct_acc", {0, 1}});
  }
  if (k.kind == "matmul") {
    // 0 = the packed GEMM nest (BLIS), 1 = the plain reduction scheduled with the generic knobs
    s.knobs.push_back({"mode", {0, 1}});
    std::vector<int64_t> nr;
    for (int q = 1; q <= 4; ++q) nr.push_back((int64_t)q * m.lanes);
    s.knobs.push_back({"mr", {1, 2, 4, 6, 8, 12}});
    s.knobs.push_back({"nr", nr});
    s.knobs.push_back({"kc", {64, 128, 192, 256, 384, 512}});
    s.knobs.push_back({"mc_panels", {2, 4, 8, 16, 24, 32}});   // MC = mr × this
    s.knobs.push_back({"nc_panels", {2, 4, 8, 16, 32, 64}});   // NC = nr × this
    // B read in place (1: no packing, where its columns are contiguous) or the heuristic's
    // choice (-1): a batched matmul with few rows of A re-reads each packed B element only
    // M times
    s.knobs.push_back({"bplace", {-1, 1}});
  }
  // split_k: the first reduction split into this many per-thread parts plus a combine (0:
  // none), offered when the kernel's reduction takes it: a long reduction with few outputs
  {
    std::string r;
    if (s.threads > 1 && loop::split_k_candidate(loop::lower_kernel(kg, kernel, /*plain=*/true), s.threads, r))
      s.knobs.push_back({"split_k", {0, s.threads, 2 * s.threads}});
  }
  // reduction rows block (0: none; the codes < 0 are shares of the row loop, rows_block)
  s.knobs.push_back({"rows", {0, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, kRowsPerCore, kRowsPerHalfCore,
                              kRowsWhole}});
  s.knobs.push_back({"fuse", {0, 1, 2}});                             // fuse the first n+1 outer loops
  s.knobs.push_back({"tile", {0, 8, 16, 32, 64}});                    // square tile of the innermost two output loops
  // row blocking: R rows of a row-wise reduction together (their short passes' chains
  // interleave). Off unless LATHE_TUNE_JAM=1: softmax-77's tuned kernel measured no faster
  // with it (one core, load 12: 0.083-0.085 ms per launch with R 1, 2, 4), and the knob
  // triples the space of every reduction
  if (const char* e = std::getenv("LATHE_TUNE_JAM"); e && std::string(e) == "1" &&
      !reducing_output_loops(loop::lower_kernel(kg, kernel, /*plain=*/true)).empty())
    s.knobs.push_back({"jam", {0, 2, 4}});
  s.knobs.push_back({"parallel", {1, 0}});                            // parallel outermost loop
  s.knobs.push_back({"vectorize", {1, 0, 8, 16, 32, 64, 256}});       // 1: innermost loops; w: split by w first
  // peel the vectorized innermost loops whose extent the vector width does not divide: whole
  // vectors of W lanes then a scalar tail (W), or one masked vector (-W); 0: the compiler's
  // interleaved loop (its scalar remainder can be most of a short row: 13 of 77)
  {
    loop::LoopFunc plain = loop::lower_kernel(kg, kernel, /*plain=*/true);
    bool odd = false;
    for (auto& l : leaves(plain)) odd |= l.extent < 0 || l.extent % m.lanes != 0 || l.extent < 4 * m.lanes;
    if (odd && !loop::is_packed_matmul(plain)) s.knobs.push_back({"peel", {0, m.lanes, -m.lanes, 2 * m.lanes}});
  }
  s.knobs.push_back({"unroll", {0, 2, 4, 8}});                        // unroll hint on the innermost loops
  return s;
}

int64_t rows_block(int64_t value, int64_t extent, int threads, int lanes) {
  if (value >= 0) return value;
  if (extent < 1) return 0;
  threads = std::max(1, threads);
  auto round_up = [&](int64_t b) { return (b + lanes - 1) / lanes * lanes; };
  switch (value) {
    case kRowsPerCore:
    case kRowsPerHalfCore: {
      int64_t nb = (extent + loop::kMaxThreadRow - 1) / loop::kMaxThreadRow;
      nb = (nb + threads - 1) / threads * threads * (value == kRowsPerHalfCore ? 2 : 1);
      return std::min(extent, round_up((extent + nb - 1) / nb));
    }
    case kRowsWhole: return extent;
    default: return 0;
  }
}

Built build(const KernelGraph& kg, int kernel, const Space& s, const Point& p) {
  auto val = [&](const char* name, int64_t dflt) {
    int i = s.knob(name);
    return i < 0 ? dflt : s.knobs[i].values.at(p.at(i));
  };
  Built b;
  const Kernel& k = kg.kernels.at(kernel);
  if (val("direct", 0) == 1) {
    loop::DirectParams dp;
    dp.ocb = (int)val("ocb", 0);
    dp.rows = (int)val("direct_rows", 0);
    dp.acc = val("direct_acc", 0) == 1;
    dp.force = true;
    if (auto f = loop::lower_depthwise_kernel(kg, kernel, s.lanes, dp)) {
      b.schedule.push_back(direct_line(dp, s.lanes));
      b.f = std::move(*f);
      return b;  // the nest comes scheduled (parallel planes x bands, vectorized rows)
    }
  }
  if (k.kind == "matmul" && val("mode", 1) == 0) {
    loop::MatmulParams mp;
    mp.mr = (int)val("mr", 6);
    mp.nr = (int)val("nr", 16);
    mp.lanes = s.lanes;
    mp.kc = (int)val("kc", 256);
    mp.kc_max = mp.kc;  // the candidate's kc caps its K blocks
    mp.mc = mp.mr * (int)val("mc_panels", 16);
    mp.nc = mp.nr * (int)val("nc_panels", 16);
    mp.b_in_place = (int)val("bplace", -1);
    b.schedule.push_back(matmul_line(mp));
    b.f = loop::lower_matmul_kernel(kg, kernel, mp);
    return b;  // the packed nest comes scheduled (parallel jobs, unrolled micro-kernel)
  }
  loop::LoopFunc& f = b.f;
  f = loop::lower_kernel(kg, kernel, /*plain=*/true);
  size_t log0 = f.schedule_log.size();
  bool split = false;  // the parts loop leads the outer chain: no fuse or tile of it
  if (int64_t parts = val("split_k", 0); parts > 0) {
    std::string r;
    if (loop::split_k_candidate(f, parts, r)) split = attempt(f, [&] { loop::split_k(f, r, parts); });
  }
  if (int64_t rows = val("rows", 0); rows != 0)
    for (auto& l : reducing_output_loops(f)) {
      int64_t block = rows_block(rows, extent_of(f, l), s.threads, s.lanes);
      if (block > 0 && attempt(f, [&] { loop::reduce_rows(f, l, block); })) break;
    }
  for (int64_t n = split ? 0 : val("fuse", 0); n > 0; --n) {
    auto chain = outer_chain(f);
    if (chain.size() < 2 || !attempt(f, [&] { loop::fuse(f, chain[0], chain[1]); })) break;
  }
  if (int64_t t = split ? 0 : val("tile", 0); t > 0) {
    auto chain = outer_chain(f);
    if (chain.size() >= 2) {
      std::string a = chain[chain.size() - 2], c = chain.back();
      attempt(f, [&] { loop::tile(f, a, c, t, t); });
    }
  }
  if (int64_t r = val("jam", 0); r > 0) {
    auto outs = reducing_output_loops(f);
    if (!outs.empty()) attempt(f, [&] { loop::jam(f, outs[0], (int)r); });
  }
  if (val("parallel", 1)) {
    auto chain = outer_chain(f);
    if (!chain.empty() && !f.body.empty() && !is_parallel(f, chain[0])) attempt(f, [&] { loop::parallel(f, chain[0]); });
  }
  std::vector<std::string> inner;
  if (int64_t v = val("vectorize", 1); v > 0) {
    for (auto& l : leaves(f)) {
      if (v > 1 && (l.extent < 0 || l.extent > v)) {
        loop::LoopFunc backup = f;
        try {
          loop::split(f, l.var, v);
          const std::string& last = f.schedule_log.back();
          std::string in = last.substr(last.rfind(", ") + 2);
          loop::vectorize(f, in);
          inner.push_back(in);
        } catch (const UserError&) {
          f = std::move(backup);
        }
      } else if (attempt(f, [&] { loop::vectorize(f, l.var); })) {
        inner.push_back(l.var);
      }
    }
  }
  if (int64_t w = val("peel", 0); w != 0) {
    for (auto& l : inner) {
      int64_t e = extent_of(f, l);
      if (e >= 0 && e % std::abs(w) == 0 && e >= 4 * std::abs(w)) continue;  // whole interleaved vectors
      attempt(f, [&] { loop::peel(f, l, std::abs(w), w < 0); });
    }
  }
  if (int64_t u = val("unroll", 0); u > 0) {
    if (inner.empty())
      for (auto& l : leaves(f)) inner.push_back(l.var);
    for (auto& l : inner) attempt(f, [&] { loop::unroll(f, l, (int)u); });
  }
  b.schedule.assign(f.schedule_log.begin() + (long)log0, f.schedule_log.end());
  return b;
}

}  // namespace lathe::tune
