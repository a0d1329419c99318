// matmul_params.cpp — the choices made for a contraction before it is lowered
// (lower_matmul.cpp): the host's register tile and int8 dot grouping, the cache blocking of
// one contraction over the threads, and which operand goes on the A side.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>

#include "core/ir/diag.h"
#include "core/loop/lower.h"
#include "core/loop/prepack.h"

namespace lathe::loop {

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
}  // namespace

double split_efficiency(const std::vector<int64_t>& jobs, int threads) {
  threads = std::max(threads, 1);
  const int64_t n = static_cast<int64_t>(jobs.size());
  if (n == 0) return 1.0;
  const int parts = static_cast<int>(std::min<int64_t>(threads, n));
  // the pool's order (backends/llvm/parallel.cpp): thread t starts on its contiguous share of
  // the jobs, then claims what is left in the next shares; whichever is free first claims next
  std::vector<int64_t> next(static_cast<size_t>(parts)), clock(static_cast<size_t>(parts), 0);
  for (int p = 0; p < parts; ++p) next[p] = n * p / parts;
  int64_t total = 0, span = 0, left = n;
  for (int64_t w : jobs) total += w;
  while (left > 0) {
    const int t = int(std::min_element(clock.begin(), clock.end()) - clock.begin());
    bool took = false;
    for (int k = 0; k < parts && !took; ++k) {
      const int p = (t + k) % parts;
      if (next[p] >= n * (p + 1) / parts) continue;
      clock[t] += jobs[static_cast<size_t>(next[p]++)];
      span = std::max(span, clock[t]);
      took = true, --left;
    }
    if (!took) clock[t] = INT64_MAX;
  }
  return span > 0 ? double(total) / (double(threads) * double(span)) : 1.0;
}

namespace {
// How much of a whole panel's work the last N panel takes: `whole` units a panel, the last
// one `last` (the ragged-columns kernel's vectors of NR / lanes; matmul_blocking's ragged_q).
struct PanelCost {
  int64_t whole = 1, last = 1;
};
// the jobs of N blocks of `per` panels (the last one shorter) in each of `batch` matrices
// and `msplit` M ranges of `mpanels` MR panels (as the lowering cuts them: equal ranges of
// whole panels, the last shorter or empty), in the job loop's order, weighed in tiles (in
// `cost` units: the block with the last panel weighs it as cost.last)
std::vector<int64_t> block_jobs(int64_t panels, int64_t per, int64_t batch, int64_t msplit, int64_t mpanels = 1,
                                PanelCost cost = {}) {
  std::vector<int64_t> jobs;
  const int64_t blocks = ceil_div(panels, per), mper = ceil_div(mpanels, msplit);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < blocks; ++j) {
      const int64_t count = std::min(per, panels - j * per);
      const int64_t width = count * cost.whole - (j == blocks - 1 ? cost.whole - cost.last : 0);
      for (int64_t s = 0; s < msplit; ++s) jobs.push_back(width * std::clamp<int64_t>(mpanels - s * mper, 0, mper));
    }
  return jobs;
}
}  // namespace

namespace {
MatmulBlocking blocking_for(int64_t m, int64_t n, int64_t k, int64_t batch, int threads, const MatmulParams& p,
                            bool a_packed, int jobs_per_thread, int b_elem_bytes, PanelCost cost) {
  MatmulBlocking b;
  threads = std::max(threads, 1);
  b.kc = p.kc;
  if (k > 0) {
    const int64_t cap = p.kc_max > 0 ? std::max(p.kc, p.kc_max) : p.kc;
    b.kc = std::min<int64_t>(round_up(cap, 8), round_up(ceil_div(k, ceil_div(k, cap)), 8));
  }
  b.nc = p.nc;
  if (n > 0 && batch > 0) {
    int64_t panels = ceil_div(n, p.nr), fewest = ceil_div(panels, p.nc / p.nr);
    int64_t per_block = ceil_div(panels, fewest);
    // Too few jobs for the threads: each extra N block packs all of A (M × K) again, each
    // extra M split all of B (N × K), so split the longer side (a late convolution layer:
    // 2048 channels × 49 positions splits M).
    // The splits make a job count the threads divide, when M has the rows for them.
    bool split_m = false;
    int64_t want_ms = 1, nblocks = ceil_div(panels, per_block);
    if (batch * nblocks < threads && m > n && !a_packed) {
      want_ms = threads / std::gcd<int64_t>(batch * nblocks, threads);
      split_m = want_ms <= ceil_div(m, p.mr);
    }
    // A packed at build: an N block copies nothing more, so cut N into at least
    // jobs_per_thread jobs a thread (the pool's threads then take over the jobs of one that
    // is late or slow), each block at least two panels
    int64_t least = fewest;
    if (a_packed && jobs_per_thread > 1)
      least = std::max(fewest, std::min(ceil_div(int64_t(jobs_per_thread) * threads, batch), panels / 2));
    // up to twice the fewest N blocks (or one per thread): the count whose jobs the threads
    // share best (split_efficiency: equal job counts are not enough, 64 + 64 + 64 + 4 columns
    // is four jobs), fewer blocks unless more are clearly better (each extra one reads A again)
    // The first count the threads divide stays (the blocks measured on the public models)
    // unless another shares the jobs more than 3% better.
    if (!split_m && batch * panels >= threads) {
      // (one more where the last panel is light: a block of it alone is a fraction of a job)
      const int64_t top = std::min(panels, std::max<int64_t>(2 * least, threads) + (cost.last < cost.whole ? 1 : 0));
      per_block = ceil_div(panels, least);
      for (int64_t blocks = least; blocks <= top; ++blocks)
        if ((batch * ceil_div(panels, ceil_div(panels, blocks))) % threads == 0) {
          per_block = ceil_div(panels, blocks);
          break;
        }
      double best = split_efficiency(block_jobs(panels, per_block, batch, 1, 1, cost), threads);
      for (int64_t blocks = least; blocks <= top; ++blocks) {
        const int64_t per = ceil_div(panels, blocks);
        if (blocks > least && per == ceil_div(panels, blocks - 1)) continue;  // the same cut
        const double eff = split_efficiency(block_jobs(panels, per, batch, 1, 1, cost), threads);
        if (eff > best + 0.03) best = eff, per_block = per;
      }
    }
    b.nc = per_block * p.nr;
    int64_t jobs = batch * ceil_div(n, b.nc);
    if (split_m) b.msplit = want_ms;
    else if (jobs < threads && m > 0) {
      // the fewest M splits that give every thread a job, or more where the threads share
      // those jobs clearly better (2 jobs on 3 threads: 4 jobs keep one thread idle half the
      // time, 6 none)
      const int64_t mpanels = ceil_div(m, p.mr), lo = std::min(ceil_div(threads, jobs), mpanels);
      b.msplit = lo;
      double best = split_efficiency(block_jobs(panels, per_block, batch, lo, mpanels, cost), threads);
      for (int64_t ms = lo + 1; ms <= std::min<int64_t>(mpanels, std::max<int64_t>(lo, threads)); ++ms) {
        const double eff = split_efficiency(block_jobs(panels, per_block, batch, ms, mpanels, cost), threads);
        if (eff > best + 0.03) best = eff, b.msplit = ms;
      }
    }
  }
  b.mc = p.mc;
  if (m > 0) {
    int64_t msz = b.msplit == 1 ? m : round_up(ceil_div(m, b.msplit), p.mr);
    int64_t rows = ceil_div(msz, p.mr), max_rows = p.mc / p.mr;
    b.mc = std::min<int64_t>(p.mc, ceil_div(rows, ceil_div(rows, max_rows)) * p.mr);
  }
  // the per-run B pack and the A block in the budget (p.b_block_bytes): the fewest equal K
  // blocks (multiples of 8, at least 64 deep) whose packs fit
  if (b_elem_bytes > 0 && p.b_block_bytes > 0 && k > 0 && n > 0 && m > 0) {
    const int64_t per_k = (std::min(b.nc, round_up(n, p.nr)) + b.mc) * b_elem_bytes;
    const int64_t cap = std::max<int64_t>(64, p.b_block_bytes / per_k / 8 * 8);
    if (b.kc > cap) b.kc = std::min<int64_t>(b.kc, round_up(ceil_div(k, ceil_div(k, cap)), 8));
  }
  return b;
}
}  // namespace

MatmulBlocking matmul_blocking(int64_t m, int64_t n, int64_t k, int64_t batch, int threads, const MatmulParams& p,
                               bool a_packed, int jobs_per_thread, int b_elem_bytes, int ragged_q) {
  const MatmulBlocking plain = blocking_for(m, n, k, batch, threads, p, a_packed, jobs_per_thread, b_elem_bytes, {});
  // the last panel's cost (ragged_q of the tile's vectors) where N is known and ragged: the
  // blocks chosen so, where the jobs they give (M splits included) share the threads
  // better, in those units, than the blocks chosen with the last panel whole
  if (!(ragged_q > 0 && n > 0 && batch > 0 && n % p.nr != 0 && p.lanes > 0 && p.nr % p.lanes == 0 &&
        ragged_q < p.nr / p.lanes))
    return plain;
  const PanelCost cost{p.nr / p.lanes, ragged_q};
  const MatmulBlocking light = blocking_for(m, n, k, batch, threads, p, a_packed, jobs_per_thread, b_elem_bytes, cost);
  const int64_t panels = ceil_div(n, p.nr), mpanels = m > 0 ? ceil_div(m, p.mr) : 1;
  auto eff = [&](const MatmulBlocking& b) {
    return split_efficiency(block_jobs(panels, b.nc / p.nr, batch, b.msplit, mpanels, cost), threads);
  };
  return eff(light) > eff(plain) + 1e-9 ? light : plain;
}

MatmulBlocking m_splits_for_slack(MatmulBlocking b, int64_t m, int64_t n, int64_t batch, int threads, const MatmulParams& p,
                                  int per_thread) {
  threads = std::max(threads, 1);
  if (per_thread <= 1 || threads <= 1 || b.msplit != 1 || m <= 0 || n <= 0 || batch <= 0 || b.nc <= 0) return b;
  const int64_t mpanels = ceil_div(m, p.mr), most = mpanels / 4;  // at least 4 MR panels a range
  const int64_t panels = ceil_div(n, p.nr), per = b.nc / p.nr, jobs = batch * ceil_div(panels, per);
  const int64_t want = int64_t(per_thread) * threads;
  if (jobs >= want || most < 2) return b;
  // the fewest splits that reach `want` jobs, or up to `threads` more where the threads share
  // the jobs clearly better (split_efficiency: 3 splits of 2 jobs on 2 threads, 6 jobs, not 5)
  const int64_t lo = std::min(most, ceil_div(want, jobs));
  int64_t ms = lo;
  double best = split_efficiency(block_jobs(panels, per, batch, lo, mpanels), threads);
  for (int64_t s = lo + 1; s <= std::min(most, lo + threads); ++s) {
    const double eff = split_efficiency(block_jobs(panels, per, batch, s, mpanels), threads);
    if (eff > best + 0.03) best = eff, ms = s;
  }
  if (ms < 2) return b;
  b.msplit = ms;
  const int64_t rows = ceil_div(round_up(ceil_div(m, ms), p.mr), p.mr), max_rows = p.mc / p.mr;
  b.mc = std::min<int64_t>(p.mc, ceil_div(rows, ceil_div(rows, max_rows)) * p.mr);
  return b;
}

MatmulBlocking m_splits_for_balance(MatmulBlocking b, int64_t m, int64_t n, int64_t batch, int threads,
                                    const MatmulParams& p) {
  if (threads <= 1 || m <= 0 || n <= 0 || batch <= 0 || b.nc <= 0 || b.msplit < 1) return b;
  const int64_t panels = ceil_div(n, p.nr), mpanels = ceil_div(m, p.mr);
  auto jobs_of = [&](int64_t per, int64_t ms) { return block_jobs(panels, per, batch, ms, mpanels); };
  const double now = split_efficiency(jobs_of(b.nc / p.nr, b.msplit), threads);
  if (now >= 0.9) return b;
  int64_t best_per = b.nc / p.nr, best_ms = b.msplit, best_jobs = 0;
  double best = now + 0.05;
  for (int64_t ms = 1; ms <= std::min<int64_t>(mpanels / 2, 2 * int64_t(threads)); ++ms) {
    if (mpanels - (ms - 1) * ceil_div(mpanels, ms) < 2) continue;  // (a last range of one MR panel)
    for (int64_t per = std::min<int64_t>(panels, b.nc / p.nr); per >= 1; --per) {
      if (per < panels && ceil_div(panels, per) == ceil_div(panels, per + 1) && per + 1 <= b.nc / p.nr) continue;
      const std::vector<int64_t> jobs = jobs_of(per, ms);
      const double eff = split_efficiency(jobs, threads);
      const int64_t count = static_cast<int64_t>(jobs.size());
      if (eff > best + 1e-9 || (best_jobs > 0 && eff > best - 1e-9 && count < best_jobs))
        best = std::max(best, eff), best_per = per, best_ms = ms, best_jobs = count;
    }
  }
  if (best_jobs == 0) return b;
  b.nc = best_per * p.nr;
  b.msplit = best_ms;
  const int64_t rows = ceil_div(round_up(ceil_div(m, best_ms), p.mr), p.mr), max_rows = p.mc / p.mr;
  b.mc = std::min<int64_t>(p.mc, ceil_div(rows, ceil_div(rows, max_rows)) * p.mr);
  return b;
}

namespace {
// one cache's size from sysfs ("32K", "512K", "32M"; 0 when unreadable)
int64_t sysfs_size(const std::string& dir) {
  std::ifstream f(dir + "/size");
  std::string v;
  if (!(f >> v) || v.empty()) return 0;
  int64_t n = std::atoll(v.c_str());
  if (v.back() == 'K') n <<= 10;
  else if (v.back() == 'M') n <<= 20;
  return n;
}

int64_t env_block(const char* name, int64_t lo, int64_t hi, const char* what) {
  const char* e = std::getenv(name);
  if (!e || !*e) return 0;
  char* end = nullptr;
  long v = std::strtol(e, &end, 10);
  if (!end || *end || v < lo || v > hi) throw UserError(std::string(name) + "='" + e + "': expected " + what);
  return v;
}
}  // namespace

HostCaches host_caches() {
  static const HostCaches caches = [] {
    HostCaches c;
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
      std::ifstream lf(dir + "/level"), tf(dir + "/type");
      int level = 0;
      std::string type;
      if (!(lf >> level) || !(tf >> type) || type == "Instruction") continue;
      const int64_t bytes = sysfs_size(dir);
      if (level == 1 && type == "Data") c.l1d = bytes;
      else if (level == 2) c.l2 = bytes;
      else if (level == 3) c.l3 = bytes;
    }
    return c;
  }();
  return caches;
}

MatmulParams blocks_for_caches(MatmulParams p, const HostCaches& c) {
  // KC: the B micro-panel (KC x NR, 4 bytes a value), which stays in L1 while the A
  // micro-panels stream past it, in half of L1d (the other half: the A micro-panels and the C
  // tile). MC: the A block (MC x KC), read again for every B micro-panel, in 9/32 of L2 (the
  // rest: the B micro-panels coming in from L3, C, the packing's sources). On the 2-core Zen 3
  // (32 KiB, 512 KiB) that is 256 x 144, the blocks measured there; fuller caches (the B
  // panel and two A panels in all of L1d, A in half of L2: 288 x 222) measured no faster
  // (one thread, CPU ms per run, 6 alternating rounds at load 11: 1024^3 35.4 vs 33.3 with
  // MC 210 vs 132, 128x768x3072 10.3 vs 11.3). A size that is unknown keeps the compiled-in
  // block; a derived one stays within [1/2, 2] of it (a sysfs that reports something odd).
  auto within = [](int64_t v, int64_t base, int64_t step) {
    return std::clamp(v, std::max(step, base / 2 / step * step), base * 2 / step * step);
  };
  if (c.l1d > 0) p.kc = static_cast<int>(within(c.l1d / 2 / (4 * int64_t(p.nr)) / 32 * 32, p.kc, 8));
  if (c.l2 > 0) p.mc = static_cast<int>(within(c.l2 * 9 / 32 / (4 * int64_t(p.kc)) / p.mr * p.mr, p.mc, p.mr));
  static const bool b_block = [] {
    const char* e = std::getenv("LATHE_MATMUL_B_BLOCK");
    return !(e && std::string(e) == "0");
  }();
  if (c.l2 > 0 && b_block) p.b_block_bytes = c.l2 * 3 / 4;
  return p;
}

MatmulParams host_matmul_params() {
  static const MatmulParams params = [] {
    MatmulParams p;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (!__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx")) {
      p.mr = 6, p.nr = 16, p.lanes = 8;
      p.mc = 144;
    } else if (!__builtin_cpu_supports("avx")) {  // SSE: 16 registers of 4 lanes (8-lane vectors take two)
      p.mr = 6, p.nr = 8, p.lanes = 8;
      p.mc = 144;
    }
#endif
    // the AVX-512 default (32 registers): convolutions may widen it (conv_matmul_params)
    p.wide_conv = p.lanes == 16;
    p.host_kc = !std::getenv("LATHE_MATMUL_KC") && !std::getenv("LATHE_MATMUL_KC_MAX");
    if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) {
      p.wide_conv = false, p.host_kc = false;
      int mr = 0, nr = 0, lanes = 0;
      if (std::sscanf(e, "%dx%dx%d", &mr, &nr, &lanes) == 3 && mr > 0 && (lanes == 8 || lanes == 16) &&
          nr > 0 && nr % lanes == 0 &&
          mr <= 16 && nr <= 128) {
        p.mr = mr, p.nr = nr, p.lanes = lanes;
        p.mc = std::max(1, 128 / mr) * mr;
        p.nc = std::max(1, 512 / nr) * nr;
      } else {
        throw UserError("LATHE_MATMUL_TILE='" + std::string(e) + "': expected MRxNRxLANES, LANES 8 or 16 and NR a multiple of it (e.g. 6x16x8)");
      }
    }
    if (const char* e = std::getenv("LATHE_MATMUL_CACHE_BLOCKS"); !(e && std::string(e) == "0"))
      p = blocks_for_caches(p, host_caches());
    if (int64_t kc = env_block("LATHE_MATMUL_KC", 8, 4096, "the K block, a multiple of 8 from 8 to 4096 (e.g. 256)")) {
      if (kc % 8) throw UserError("LATHE_MATMUL_KC='" + std::to_string(kc) + "': expected a multiple of 8 (e.g. 256)");
      p.kc = static_cast<int>(kc);
    }
    if (int64_t mc = env_block("LATHE_MATMUL_MC", 1, 4096, "the M block, 1 to 4096 rows (rounded up to MR)"))
      p.mc = static_cast<int>((mc + p.mr - 1) / p.mr * p.mr);
    if (int64_t nc = env_block("LATHE_MATMUL_NC", 1, 8192, "the N block, 1 to 8192 columns (rounded up to NR)"))
      p.nc = static_cast<int>((nc + p.nr - 1) / p.nr * p.nr);
    if (const char* e = std::getenv("LATHE_MATMUL_KC_MAX"); e && *e) {
      char* end = nullptr;
      long v = std::strtol(e, &end, 10);
      if (!end || *end || v < 8 || v > 4096)
        throw UserError("LATHE_MATMUL_KC_MAX='" + std::string(e) + "': expected the largest K block, 8 to 4096 (e.g. 256)");
      p.kc_max = static_cast<int>(v);
      p.kc = std::min(p.kc, p.kc_max);
    }
    return p;
  }();
  return params;
}

// The saturating u8 x i8 pairs (qdq-sat16's dot4sat16) take two instructions a step where
// there is no VNNI: vpmaddubsw into a temporary, then vpmaddwd of it by a register of ones.
// Besides the MR x NR/lanes accumulators and the NR/lanes B vectors, a step holds the
// broadcast A group, that temporary and the ones: on AVX2 (16 ymm registers) the 6 x 16 tile
// needs 17, and LLVM spilled and shuffled ten accumulators through the stack every step
// (BERT QDQ's sat16 GEMMs ran at about half the speed of the exact i16 ones). The rows are
// cut to the most that fit. A prepacked A side (a conv's weights) is packed in panels of
// that MR too (prepack.cpp takes sat16_params).
// Few columns (N <= 64: a 7x7 map's 49) on two B vectors a step pad N to whole 16s (64) where
// one vector a step pads to 8s (56) and fits 12 rows (12 x 8): the narrower tile there.
MatmulParams sat16_params(MatmulParams P, int64_t n) {
  if (host_int8_dot_group() == 4) return P;
  static const bool narrow = [] {
    const char* e = std::getenv("LATHE_INT8_NARROW_N");
    return !(e && std::string(e) == "0");
  }();
  const bool narrowed = narrow && n > 0 && n <= 64 && P.nr == 2 * P.lanes && round_up(n, P.lanes) < round_up(n, P.nr);
  if (narrowed) {
    P.nr = P.lanes;
    P.nc = std::max(1, P.nc / P.nr) * P.nr;
  }
  const int regs = P.lanes == 16 ? 32 : 16, nq = P.nr / P.lanes;
  const int fit = std::min((regs - nq - 3) / nq, 16);  // (the narrow tile: more rows than the host's MR)
  if (fit < 1 || (fit >= P.mr && !narrowed)) return P;
  P.mr = fit;
  P.mc = std::max(1, P.mc / fit) * fit;
  return P;
}
static MatmulParams fit_sat16_rows(const KernelGraph& kg, const Kernel& k, MatmulParams P) {
  if (k.kind != "matmul") return P;
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  if (!mm || !mm->sat16) return P;
  int64_t n = 1;
  for (int d : mm->n_axes) n = mm->mul->shape[d].is_const() ? n * mm->mul->shape[d].value() : -1 << 30;
  return sat16_params(P, n);
}

namespace {
// the K block rounded down to a power of two (conv_matmul_params)
MatmulParams pow2_kc(MatmulParams P) {
  if (!P.host_kc || P.kc < 8) return P;
  const char* e = std::getenv("LATHE_MATMUL_KC_POW2");  // (read on every call: tests set it)
  if (e && std::string(e) == "0") return P;
  int kc = 8;
  while (kc * 2 <= P.kc) kc *= 2;
  P.kc = kc;
  return P;
}
}  // namespace

MatmulParams conv_matmul_params(const MatmulMatch& mm, MatmulParams P) {
  if (mm.sat16 || !mm.reduce || mm.reduce->dtype != DType::F32) return P;
  const bool conv_like = !mm.a.bounds.empty() || !mm.b.bounds.empty() || mm.m_axes.size() > 1 || mm.n_axes.size() > 1 ||
                         mm.k_axes.size() > 1;
  const bool batched_weights = !mm.batch_axes.empty() && (mm.a.src->op == Op::Const || mm.b.src->op == Op::Const);
  if (!conv_like && !batched_weights) return P;
  // (a K within one block stays one block: a stem's 3 x 7 x 7 = 147 in one of 152, not two of 80)
  int64_t k = 1;
  for (int d : mm.k_axes) k = mm.mul->shape[d].is_const() ? k * mm.mul->shape[d].value() : int64_t(1) << 40;
  if (k > P.kc) P = pow2_kc(P);
  // (read on every call: tests set it)
  const char* e = std::getenv("LATHE_MATMUL_CONV_TILE");
  if (!conv_like || !(e && std::string(e) == "1") || !P.wide_conv || P.lanes != 16 || P.nr != 32) return P;
  // the host's params as LATHE_MATMUL_TILE=8x48x16 would make them (the K and M blocks from
  // the caches for the wider B micro-panel, then the LATHE_MATMUL_KC / MC / NC overrides)
  static const MatmulParams wide = [](const MatmulParams& h) {
    MatmulParams w;
    w.mr = h.mr, w.nr = 48, w.lanes = 16;
    w.mc = std::max(1, 128 / w.mr) * w.mr;
    w.nc = std::max(1, 512 / w.nr) * w.nr;
    if (const char* e = std::getenv("LATHE_MATMUL_CACHE_BLOCKS"); !(e && std::string(e) == "0"))
      w = blocks_for_caches(w, host_caches());
    if (std::getenv("LATHE_MATMUL_KC")) w.kc = h.kc;
    if (std::getenv("LATHE_MATMUL_MC")) w.mc = std::max(1, h.mc / w.mr) * w.mr;
    if (std::getenv("LATHE_MATMUL_NC")) w.nc = std::max(1, h.nc / w.nr) * w.nr;
    if (h.kc_max > 0) w.kc_max = h.kc_max, w.kc = std::min(w.kc, w.kc_max);
    w.b_in_place = h.b_in_place, w.a_in_place = h.a_in_place;
    return w;
  }(host_matmul_params());
  if (P.mr != wide.mr) return P;  // (another row tile: not the host's default)
  MatmulParams w = wide;
  w.b_in_place = P.b_in_place, w.a_in_place = P.a_in_place, w.host_kc = P.host_kc;
  return k > w.kc ? pow2_kc(w) : w;
}

MatmulParams fit_matmul_rows(const KernelGraph& kg, int kernel, MatmulParams P) {
  if (const char* e = std::getenv("LATHE_MATMUL_TILE"); e && *e) return P;  // an explicit tile stays
  if (const char* e = std::getenv("LATHE_MATMUL_FIT_ROWS"); e && std::string(e) == "0") return P;
  const Kernel& k = kg.kernels.at(kernel);
  if (MatmulParams sat = fit_sat16_rows(kg, k, P); sat.mr != P.mr || sat.nr != P.nr) return sat;
  const int mr = P.mr - 1;
  // f32 only (the int8 kernels' panels are sized for MR), A packed per run (prepacked A
  // panels are MR tall), and enough accumulators to cover the FMA latency (2 pipes x 4
  // cycles: 8 independent sums)
  if (k.kind != "matmul" || mr * (P.nr / P.lanes) < 8 || packed_a_buffer(kg, k) >= 0) return P;
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  if (!mm || mm->reduce->dtype != DType::F32) return P;
  const bool swapped = orient_matmul(*mm, P);
  int64_t m = 1;
  for (int d : mm->m_axes) {
    if (!mm->mul->shape[d].is_const()) return P;
    m *= mm->mul->shape[d].value();
  }
  // at least 5% fewer padded rows (49 positions: 50 rows on MR 5, not 54 on MR 6)
  if (round_up(m, mr) * 100 > round_up(m, P.mr) * 95) return P;
  MatmulParams fit = P;
  fit.mr = mr;
  fit.mc = std::max(1, P.mc / mr) * mr;
  // the sides must stay where the weights were packed for (orient_matmul weighs the padding)
  auto again = match_matmul(k.matmul ? k.matmul : k.root);
  if (orient_matmul(*again, fit) != swapped) return P;
  return fit;
}

// Int8 panels are 1 byte a value (i16 pairs 2): at the f32 KC they fill a quarter of the
// cache the block was sized for, and K = 768 took three micro-kernel calls per tile, each
// zeroing, storing and writing back (reading the i32 sums again) its accumulators.
MatmulParams int_kc(MatmulParams P, int elem_bytes) {
  static const int64_t env = [] {
    const char* e = std::getenv("LATHE_INT8_KC");
    if (!e || !*e) return int64_t(-1);
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (*end || v < 0 || (v > 0 && v % 8 != 0))
      throw UserError("LATHE_INT8_KC='" + std::string(e) + "': expected 0 (the f32 KC) or a multiple of 8");
    return int64_t(v);
  }();
  if (env == 0) return P;
  P.kc = env > 0 ? static_cast<int>(env) : P.kc * 4 / std::max(1, elem_bytes);
  return P;
}

MatmulParams kc_for_group(MatmulParams P, int group) {
  return group > 1 ? int_kc(P, group == 4 ? 1 : 2) : P;
}

int host_int8_dot_group() {
  static const int g = [] {
    int v = 2;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("avx512vnni")) v = 4;
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
    if (__builtin_cpu_supports("avxvnni")) v = 4;
#endif
#endif
    if (const char* e = std::getenv("LATHE_INT8_DOT"); e && *e) {
      std::string s(e);
      if (s == "vnni" || s == "4") v = 4;
      else if (s == "i16" || s == "2") v = 2;
      else throw UserError("LATHE_INT8_DOT='" + s + "': expected vnni (u8 x i8 groups of 4) or i16 (pairs)");
    }
    return v;
  }();
  return g;
}

bool vnni_i8_u8() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_INT8_VNNI_I8U8");
    return !(e && std::string(e) == "0");
  }();
  return on && host_int8_dot_group() == 4;
}

bool orient_matmul(MatmulMatch& mm, const MatmulParams& P) {
  // (int8 too: both sides widen to i16 alike, and VNNI's u8 × i8 groups want the u8
  // activations on A, where the swap puts them)
  if (mm.sat16) return false;  // its u8 side stays A (the saturating dot's first operand)
  const Shape& s = mm.mul->shape;
  auto size = [&](const std::vector<int>& g) -> int64_t {
    int64_t n = 1;
    for (int d : g) {
      if (!s[d].is_const()) return -1;
      n *= s[d].value();
    }
    return n;
  };
  const int64_t M = size(mm.m_axes), N = size(mm.n_axes), K = size(mm.k_axes);
  if (M < 0 || N < 0 || mm.n_axes.empty()) return false;
  // a convolution's im2col side: a window (range conditions) or a group of positions
  const bool conv_like = !mm.b.bounds.empty() || mm.n_axes.size() > 1 || mm.k_axes.size() > 1;
  // Up to 8 NR positions (a 14 x 14 map: 196 on NR 32, the last panel 4 of 32 columns) where
  // K >= 512: swapped, the positions are rows (196 on MR 8: 4 of 200 padded) and the output's
  // channels whole panels; its write-back goes down the output's columns (a channel's
  // positions apart), so only where K FMAs per output element hide it (256 -> 1024 channels,
  // K 256, measured 452 -> 522 us swapped; 1024 -> 256, K 1024, 497 -> 423; one thread,
  // ResNet-50's 14 x 14 layers). f32 only (int8 unmeasured). LATHE_MATMUL_SWAP_WIDE=0: 4 NR.
  // Also where K >= 3 M (few output channels, e.g. MobileNet's 14 x 14 projections: 384 -> 64
  // 46.7 -> 40.5 us swapped, 384 -> 96 65.0 -> 60.6, 192 -> 64 23.2 -> 22.1; not at K < 3 M:
  // 192 -> 96 33.2 -> 33.0, 384 -> 256 166 -> 165, 192 -> 256 81 -> 88, 64 -> 64 8.2 -> 10.2;
  // one thread, 3 alternated rounds). LATHE_MATMUL_SWAP_THIN=0: K >= 512 only.
  const char* e = std::getenv("LATHE_MATMUL_SWAP_WIDE");  // (read per call: tests set it)
  const bool swap_wide = !(e && std::string(e) == "0");
  const char* et = std::getenv("LATHE_MATMUL_SWAP_THIN");
  const bool swap_thin = !(et && std::string(et) == "0");
  const bool deep = K >= 512 || (swap_thin && K >= 3 * M);
  const bool wide = swap_wide && N < 8 * P.nr && deep && mm.reduce->dtype == DType::F32;
  if (!conv_like || !mm.a.bounds.empty() || (N >= 4 * P.nr && !wide)) return false;
  const int64_t inner = s[mm.n_axes.back()].value();
  if (inner >= P.nr) return false;  // rows of >= NR positions: B is packed run by run
  const int64_t now = round_up(N, P.nr) * round_up(M, P.mr), swapped = round_up(M, P.nr) * round_up(N, P.mr);
  if (swapped * 20 > now * 19) return false;
  std::swap(mm.a, mm.b);
  std::swap(mm.m_axes, mm.n_axes);
  return true;
}

}  // namespace lathe::loop
