// lower_matmul_pack.cpp — the packing steps of the packed matmul lowering (lower_matmul.cpp):
// B's NR-wide panels (row by row, panel by panel for B^T, run by run through a window: the
// implicit im2col), A's MR-tall panels, and the choices of what is not packed per job: B
// read in place (a 1x1 convolution into few channels), a stride-1 window's interior panels
// read in place or copied whole, and a side packed once for all the jobs (shared pack).
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

#include "core/loop/lower_matmul_impl.h"
#include "core/loop/matmul_epilogue.h"

namespace lathe::loop::matmul_lowering {

// Does one k of B read its columns at consecutive addresses (the innermost N dim has
// coefficient 1, or there is only one column)?
bool MatmulLowering::b_columns_contiguous() const {
  if (mm_.n_axes.empty()) return true;
  int din = mm_.n_axes.back();
  auto c = coef_of(mm_.b.addr, din);
  return !c || *c == 1 || s_[din] == SymInt(1);
}

// Can the micro-kernel read B where it lies, NR consecutive columns per k, instead of
// packing it? A 1x1 convolution's input (no window, no padding: one k is one contiguous
// row of positions, a group of dims that collapses to stride 1) into few output channels
// (a MobileNet projection: 144 -> 32): packing copies a K x NC block of B (over L1 for
// K >= 64) for only M <= 64 FMAs per element, as much time as the arithmetic; the
// micro-kernel's NR-wide row segments, reused across the MR panels of A, are as cheap
// to read in place. Measured (MobileNetV2, same binary) 10-30% faster for those layers;
// with K < 64 (an expansion 16 -> 96) the packed block is small and K strided row
// streams were no faster or slower (AVX2 host), and with many rows of A the copy is
// amortized, so those, strided 1x1 convolutions and plain matmuls keep their packed panels.
// K from 32, not 64 (AVX-512 host, one thread, 3 alternating rounds of 50 runs):
// MobileNetV2's 32 -> 16 at 112 x 112 (M 16) 88-91 -> 54-56 us, unet_small's 32 -> 2 head
// at 128 x 128 (M 2) 77-78 -> 35-36 us; below 32 (Winograd's 16-deep output transforms)
// B stays packed. LATHE_MATMUL_B_IN_PLACE=0 packs always; LATHE_MATMUL_B_IN_PLACE_K=N: the
// least K read in place (default 32; 64 the old) (A/B runs).
// Rows of A up to the host's M block (one MC block a job: each in-place B row segment is
// read by every MR panel of the job in turn, from L1 after the first), not only M <= 64:
// the copy costs a load and a store per element of B against M FMAs, and at M 128-256 that
// was still ~5% of a ResNet-50 1x1 layer (AVX-512 host, MC 256, one thread, min of 150-200
// runs, 2 alternating rounds: 512 -> 128 at 28 x 28 429-433 -> 401-409 us, 256 -> 128 at
// 56 x 56 834-845 -> 790-795, 512 -> 256 at 28 x 28 833-836 -> 810-816, 64 -> 256 at 56 x 56
// 407-414 -> 396; 128 -> 512 at 28 x 28, two MC blocks, level: left packed). More rows than
// the M block (ResNet's 256 -> 1024 at 14 x 14: its B packed once for both jobs) stay
// packed: 422-426 -> 450-459 us in place. LATHE_MATMUL_B_IN_PLACE_MC=0: M <= 64 (A/B runs).
int64_t b_in_place_max_m(const MatmulParams& P) {
  static const bool mc = [] {
    const char* e = std::getenv("LATHE_MATMUL_B_IN_PLACE_MC");
    return !(e && std::string(e) == "0");
  }();
  return mc ? std::max<int64_t>(64, P.mc) : 64;
}

static int64_t b_in_place_min_k() {
  const char* e = std::getenv("LATHE_MATMUL_B_IN_PLACE_K");  // (read per lowering: tests set it)
  return e && std::atoll(e) > 0 ? std::atoll(e) : 32;
}

bool MatmulLowering::reads_b_in_place(const OperandParts& B, const SymInt& Ms, const SymInt& Ks) const {
  static const bool enabled = [] {
    const char* e = std::getenv("LATHE_MATMUL_B_IN_PLACE");
    return !(e && std::string(e) == "0");
  }();
  if (P_.b_in_place == 0 || (!enabled && P_.b_in_place < 0) || G_ != 1 || !B.acc->bounds.empty() || mm_.n_axes.empty()) return false;
  const bool conv_like = mm_.n_axes.size() > 1 || mm_.k_axes.size() > 1;
  if (P_.b_in_place < 0 && (!conv_like || !Ms.is_const() || Ms.value() > b_in_place_max_m(P_) || !Ks.is_const() || Ks.value() < b_in_place_min_k())) return false;
  if (!B.rows[0].table.empty() || !B.ks[0].table.empty()) return false;
  auto c = collapsed(B.acc->addr, mm_.n_axes);
  return c && *c == SymInt(1);
}

// Can the micro-kernel broadcast A's MR rows where they lie instead of packing them? The
// broadcasts are scalar loads either way (one per row and depth, a constant row stride
// apart), so the packed copy only buys one contiguous stream, and it costs a load and a
// store per element of the block on every run. A job that feeds each A panel to few B
// panels (a small batched GEMM: 64 x 17x33 . 33x29, two panels of NR 16 a job, or
// attention's 64-wide heads) pays that copy for 2-4 uses. The ragged last panel is read
// by the ragged-rows kernel (exactly M mod MR rows, so M must be known and that kernel on)
// and never past A's last row. f32, no window (no bounds to test), no gathered tables; rows
// whose stride is a multiple of the L1's way size would share a set, so not those.
// LATHE_MATMUL_A_IN_PLACE=0 packs always (A/B runs); MatmulParams::a_in_place overrides.
bool MatmulLowering::reads_a_in_place(const OperandParts& A) const {
  static const bool enabled = [] {
    const char* e = std::getenv("LATHE_MATMUL_A_IN_PLACE");
    return !(e && std::string(e) == "0");
  }();
  static const bool ragged_kernel = [] {  // micro_kernel's LATHE_MATMUL_RAGGED_ROWS
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_ROWS");
    return !(e && std::string(e) == "0");
  }();
  if (P_.a_in_place == 0 || (!enabled && P_.a_in_place < 0) || G_ != 1 || prepacked_a_ || shared_a_) return false;
  if (!A.acc->bounds.empty() || mm_.m_axes.empty() || !A.rows[0].table.empty() || !A.ks[0].table.empty()) return false;
  if (!Ms_.is_const() || (Ms_.value() % P_.mr != 0 && !ragged_kernel)) return false;
  if (P_.a_in_place > 0) return true;
  if (!Ns_.is_const() || ceil_div(std::min(nc_blk_, Ns_.value()), int64_t(P_.nr)) > 4) return false;
  auto c = collapsed(A.acc->addr, mm_.m_axes);  // the row stride
  if (!c || !c->is_const()) return false;
  const int64_t way = 4096, bytes = std::abs(c->value()) * int64_t(sizeof(float)) % way;
  return bytes == 0 ? false : std::min<int64_t>(64, way / std::gcd(bytes, way)) >= 16;
}

// A stride-1 window's interior panels read in place. Packing B (the implicit im2col of a
// 3x3 convolution) copies every position once per k: for a layer with few output
// channels that copy is a fixed cost per element against only M FMAs (a 64 -> 64 layer
// at 56 x 56 took 0.93x the CPU time in place). A panel of NR positions that lies in
// one row of the map (one run: consecutive addresses, coefficient 1) and whose window
// is inside the bounds for every k of the layer (the sums of the k part's extremes, the
// static kmin / kmax below) needs no zeros and no gather: the micro-kernel reads its NR
// columns at depth kk straight from the input (the row's address plus the k part, a
// table load). Those panels are not packed; border panels (a row's first or last, the
// map's top and bottom rows, panels that cross rows) are packed as before.
// f32, not prepacked, not shared, M <= 64, no L1 set aliasing (below);
// LATHE_CONV_IN_PLACE=0 packs every panel (A/B runs).
// LATHE_CONV_IN_PLACE: unset / 1 the default; 0 packs every panel (interior ones by the
// unguarded copy); guarded packs every panel k by k with the bounds tested per k (A/B runs)
const std::string& MatmulLowering::in_place_mode() {
  static const std::string mode = [] {
    const char* e = std::getenv("LATHE_CONV_IN_PLACE");
    return std::string(e ? e : "1");
  }();
  return mode;
}
std::optional<MatmulLowering::WindowInPlace> MatmulLowering::window_in_place(const OperandParts& B, const SymInt& Ms) const {
  const OperandAccess& acc = *B.acc;
  if (in_place_mode() == "guarded" || G_ != 1 || acc.bounds.empty() || mm_.n_axes.empty()) return std::nullopt;
  const int din = mm_.n_axes.back();
  if (!s_[din].is_const() || s_[din].value() < P_.nr) return std::nullopt;  // no whole panel in a row
  auto ca = coef_of(acc.addr, din);
  if (!ca) return std::nullopt;
  // Read in place: a stride-1 window (a strided one's positions are not consecutive), few
  // rows of A (the 1x1 case's bound, reads_b_in_place: each MR panel re-reads the panel's
  // rows, and more rows amortize the pack; a 28 x 28 layer into 128 channels measured no
  // faster in place).
  bool in_place = in_place_mode() != "0" && *ca == 1 && Ms.is_const() && Ms.value() <= 64;
  // The micro-kernel reads one row per k and re-reads them for every MR panel of A, so
  // they must stay in L1: rows of consecutive channels whose distance is a multiple of
  // the L1's way size (4 KiB) share a set (a 64 x 64 or 128 x 128 map: every channel's
  // row lands in the same 8 ways) and evict each other: a 128 x 128 layer measured 5-8%
  // more CPU time read in place than packed, a 56 x 56 one 6-7% less. So only where the
  // largest k stride (the channel's) spreads the rows over >= 16 of the 64 sets.
  int64_t kstride = 0;
  for (auto& [d, k] : acc.addr.terms) {
    if (std::find(mm_.k_axes.begin(), mm_.k_axes.end(), d) == mm_.k_axes.end()) continue;
    if (!k.is_const() || !s_[d].is_const()) return std::nullopt;
    if (s_[d].value() > 1) kstride = std::max(kstride, std::abs(k.value()));
  }
  const int64_t way = 4096, bytes = kstride * int64_t(sizeof(float)) % way;
  if (kstride > 0 && std::min<int64_t>(64, way / std::gcd(bytes, way)) < 16) in_place = false;
  WindowInPlace w;
  w.ca = *ca;
  w.in_place = in_place;
  for (auto& b : acc.bounds) {
    auto c = coef_of(b.coord, din);
    if (!c) return std::nullopt;
    int64_t lo = 0, hi = 0;
    for (auto& [d, k] : b.coord.terms) {
      if (std::find(mm_.k_axes.begin(), mm_.k_axes.end(), d) == mm_.k_axes.end()) continue;
      if (!k.is_const() || !s_[d].is_const() || s_[d].value() < 1) return std::nullopt;
      const int64_t span = k.value() * (s_[d].value() - 1);
      (span < 0 ? lo : hi) += span;
    }
    w.cb.push_back(*c);
    w.kmin.push_back(lo);
    w.kmax.push_back(hi);
  }
  return w;
}
// Is the panel at local column p0 (of this job's block, n0 / nc) one run inside the bounds
// for every k? (see window_in_place)
ExprRef MatmulLowering::window_interior(const OperandParts& B, const WindowInPlace& w, ExprRef p0) const {
  const int64_t NR = P_.nr, inner = s_[mm_.n_axes.back()].value();
  ExprRef ok = logical_and(le(add(p0, const_int(NR)), var("nc")),
                           le(add(binary(Op::Mod, add(var("n0"), p0), const_int(inner)), const_int(NR)), const_int(inner)));
  for (size_t j = 0; j < B.acc->bounds.size(); ++j) {
    auto& b = B.acc->bounds[j];
    ExprRef base = add(batch_part(b.coord), at(B.rows[j + 1], p0));
    ok = logical_and(ok, logical_and(le(from_sym(b.lo), add(base, const_int(w.kmin[j]))),
                                     lt(add(base, const_int(w.cb[j] * (NR - 1) + w.kmax[j])), from_sym(b.hi))));
  }
  return ok;
}

// Jobs that split M (few N blocks for the threads: a 14 x 14 layer's 196 positions are
// one block) each packed all of B again: both threads gathered the same im2col panels,
// the costliest copy of a convolution. A convolution's jobs that split N into narrow
// blocks (a 16 x 16 layer: 2 blocks of 128 positions) each packed all of A the same way
// (see shared_a in run() for where A is left per job). Instead one parallel
// step packs that side once, all KC blocks and panels (the layout of prepack.h:
// [pc][panel][kk][NR or MR]) into a buffer the jobs share, its iterations chunks of
// panels of one KC block that any thread takes; the jobs' micro-kernels then read it as
// they read a prepacked operand. f32, one batch index (other batches' jobs would need
// their own copy), static sizes, enough repeated copying to pay for the extra parallel
// step (kSharedPackMinWaste elements), and at most kSharedPackMaxBytes (the buffer is the
// kernel's local array: the caller's stack in the llvm backend).
// LATHE_MATMUL_SHARED_PACK=0 packs per job (A/B runs).
int64_t MatmulLowering::shared_elems(int64_t rows, int64_t K, int64_t width) const {
  return ceil_div(K, kc_blk_) * ceil_div(rows, width) * kc_blk_ * width;
}
// rows: the packed side's size (N for B, M for A); copies: how many jobs pack all of it
bool MatmulLowering::shares_pack(const SymInt& rows, const SymInt& Ks, const SymInt& batch, int64_t copies, int64_t width) const {
  static const bool enabled = [] {
    const char* e = std::getenv("LATHE_MATMUL_SHARED_PACK");
    return !(e && std::string(e) == "0");
  }();
  if (!enabled || G_ != 1 || copies < 2 || !rows.is_const() || !Ks.is_const() || batch != SymInt(1)) return false;
  if (rows.value() < 1 || Ks.value() < 1 || (copies - 1) * rows.value() * Ks.value() < kSharedPackMinWaste) return false;
  return shared_elems(rows.value(), Ks.value(), width) * int64_t(sizeof(float)) <= kSharedPackMaxBytes;
}
// The shared pack step: for u over KC blocks x chunks of panels, make_pack's copy (into
// `local`, panel-major from the chunk's first row r0) moved to the chunk's place in
// `shared`. Its own tables, and its own r0/rc (n0/nc or m0/mc) and k0/kc.
Stmt MatmulLowering::shared_pack_loop(const OperandAccess& acc, const std::vector<int>& axes, int64_t rows, int64_t K,
                                      int64_t width, int64_t max_panels, int threads, const std::string& r0,
                                      const std::string& rc, const std::string& local, const std::string& shared,
                                      int64_t table_pad, const std::function<Stmt(const OperandParts&)>& make_pack) {
  const int64_t panels = ceil_div(rows, width), kblocks = ceil_div(K, kc_blk_);
  // chunks: about 8 per thread over all blocks (the pool's threads steal what is left),
  // whole panels, at most a job's block of them (the tables' size)
  const int64_t cpan = std::clamp<int64_t>(ceil_div(panels * kblocks, 8 * int64_t(threads)), 1, std::max<int64_t>(1, max_panels));
  const int64_t chunks = ceil_div(panels, cpan);
  auto saved = batch_;
  for (auto& [d, e] : batch_) e = const_int(0);  // the one batch index
  std::vector<Stmt> body{make_let("pc", DType::I64, binary(Op::IDiv, var("u"), const_int(chunks))),
                         make_let(r0, DType::I64, mul(binary(Op::Mod, var("u"), const_int(chunks)), const_int(cpan * width))),
                         make_let(rc, DType::I64, min_of(const_int(cpan * width), sub(const_int(rows), var(r0)))),
                         make_let("k0", DType::I64, mul(var("pc"), const_int(kc_blk_))),
                         make_let("kc", DType::I64, min_of(const_int(kc_blk_), sub(const_int(K), var("k0"))))};
  std::vector<Stmt> rfill, kfill, allocs;
  ExprRef rcap = mul(ceil_div(var(rc), width), const_int(width));
  OperandParts X = make_parts(acc, axes, var(r0), add(rcap, const_int(table_pad)), cpan * width + table_pad, rfill,
                              var("k0"), var("kc"), kfill, allocs);
  std::vector<Stmt> pack{make_pack(X)};
  batch_ = std::move(saved);
  // the chunk's panels start at panel r0 / width of KC block pc
  ExprRef off = mul(add(mul(var("pc"), const_int(panels)), binary(Op::IDiv, var(r0), const_int(width))),
                    const_int(kc_blk_ * width));
  walk(pack, [&](Stmt& st) {
    if (st.kind == StmtKind::LocalStore && st.var == local) {
      st.var = shared;
      st.index = add(off, st.index);
    }
    return true;
  });
  for (auto* v : {&allocs, &rfill, &kfill})
    for (auto& st : *v) body.push_back(st);
  body.push_back(std::move(pack[0]));
  Stmt u = make_for("u", const_int(kblocks * chunks), std::move(body), "pack " + std::string(local == "Bp" ? "B" : "A") +
                                                                          " once for all jobs: KC blocks x panel chunks");
  // a small pack (unet's 32 x 288 weights: 10K floats, ~10 us) runs on the calling thread:
  // a parallel region of its own would cost a wake-up of the pool's threads for nothing
  u.annot.parallel = kblocks * panels * kc_blk_ * width >= kSharedPackParallelMin;
  return u;
}

// LATHE_PACK_STRIDED: a strided window's interior panel copy is marked strided(S) so that
// the llvm backend copies it as deinterleaved whole vectors; 0 leaves it to LLVM's vectorizer,
// which for a stride-2 copy of 16 copies 8 by one vector and 8 scalar (an interleave group
// with a gap at its end needs a scalar epilogue). Unset: on where the host's vectors are 16
// lanes (AVX-512: ResNet-50's stem 1.33-1.37 -> 1.25-1.28 ms, one thread, 3 rounds; the
// backend's copy had never been taken before: its affine check did not see d0 + i, fixed with
// this default); on 8-lane hosts it measured no gain (README), so 1 there.
static bool strided_copies(int lanes) {
  static const std::string mode = [] {
    const char* e = std::getenv("LATHE_PACK_STRIDED");
    return std::string(e ? e : "");
  }();
  return mode == "1" || (mode.empty() && lanes >= 16);
}

// LATHE_PACK_MASKED_RUNS: a strided window's run copy (a variable trip of at most NR columns,
// ca = 2..4 apart in the source) is marked strided(ca <= NR), which the llvm backend copies on
// an AVX-512 host as masked whole vectors (a masked load of the run's span, a deinterleaving
// shuffle, a masked store; try_strided_copy), not LLVM's vectorizer's 64-bit-index gathers
// or one vector and a scalar remainder: a stride-2 3x3 layer at 28 x 28 on NR 32 packs up to
// 3 runs a panel per k, each 1-28 columns. Zen 5, one thread, 3 rounds: ResNet-50's
// layer2.0 conv2 (56 -> 28) 1.29-1.31 -> 1.18-1.21 ms; a 128 -> 16 stride-2 layer whose time
// is mostly the pack 0.525 -> 0.410 ms. Unset: on where the host's vectors are 16 lanes
// (an 8-lane AVX2 masked load is vmaskmov, slow on Zen); 1 on, 0 off (A/B runs).
static bool masked_runs(int lanes) {
  static const std::string mode = [] {
    const char* e = std::getenv("LATHE_PACK_MASKED_RUNS");
    return std::string(e ? e : "");
  }();
  return mode == "1" || (mode.empty() && lanes >= 16);
}

// LATHE_PACK_TAPS: a strided window's panel packed tap by tap (pack_b_taps); 0 k by k
// (pack_b_runs' per-k runs), all also for stride-1 windows (A/B runs). Read per lowering
// (tests set it).
static std::string taps_mode() {
  const char* e = std::getenv("LATHE_PACK_TAPS");
  return std::string(e ? e : "");
}

// LATHE_PACK_TAPS_BY_RUN=0: pack_b_taps' runs copied in one loop over a tap's channels, not
// one loop a run (A/B runs). Read per lowering (tests set it).
static bool taps_by_run() {
  const char* e = std::getenv("LATHE_PACK_TAPS_BY_RUN");
  return !(e && std::string(e) == "0");
}

// A panel's runs packed tap by tap. Along k a window's bounds read only its tap axes (a 3x3
// layer's kh, kw: the k axes after the channels), so the runs' first and last columns inside
// the bounds (lo, hi) are the same for every channel at one tap; pack_b_runs computed them,
// and the run's masks, for every k (a stride-2 3x3 layer at 28 x 28: 3 runs a panel per k,
// ~200 instructions a k against the micro-kernel's 256 FMAs). Here per panel: the runs'
// columns and row parts; per tap: each run's lo / hi; per channel at that tap (the depth kd =
// c·T + t - k0 of this K block): the row zeroed and the runs copied, their lengths
// invariant in the channel loop. Where the tap axes are the k axes' suffix, there are >= 2
// channels, T <= KC; strided windows (ca >= 2) unless LATHE_PACK_TAPS=all.
std::optional<Stmt> MatmulLowering::pack_b_taps(const OperandParts& B, int pb, int segs, const std::vector<int64_t>& cb,
                                                int64_t ca) const {
  const std::string mode = taps_mode();
  if (mode == "0" || (ca < 2 && mode != "all")) return std::nullopt;
  return pack_taps(B, pb, segs, cb, ca, TapSide{"Bp", "jp", "nc", "n0", P_.nr, mm_.n_axes.back()});
}

// The packing of pack_b_taps for either side: `side` names the panel buffer (Bp / Ap), the
// panel's index (jp / ip), the block's size and first row or column (nc, n0 / mc, m0), the
// panel's width (NR / MR) and the rows' innermost dim (the runs' direction).
std::optional<Stmt> MatmulLowering::pack_taps(const OperandParts& B, int pb, int segs, const std::vector<int64_t>& cb,
                                              int64_t ca, const TapSide& side) const {
  if (G_ != 1) return std::nullopt;
  const OperandAccess& acc = *B.acc;
  const size_t nk = mm_.k_axes.size();
  std::vector<bool> tap(nk, false);
  int64_t K = 1, T = 1;
  for (size_t i = 0; i < nk; ++i) {
    const int d = mm_.k_axes[i];
    if (!s_[d].is_const()) return std::nullopt;
    K *= s_[d].value();
    for (auto& b : acc.bounds)
      if (b.coord.uses(d)) tap[i] = true;
  }
  size_t first = nk;
  while (first > 0 && tap[first - 1]) --first;
  for (size_t i = 0; i < first; ++i)
    if (tap[i]) return std::nullopt;  // a bound reads a channel axis: not a window's taps
  for (size_t i = first; i < nk; ++i) T *= s_[mm_.k_axes[i]].value();
  // (no window: one tap, every k a channel, for an A side read at strided rows (pack_a_taps))
  const bool one_tap = acc.bounds.empty() && std::string(side.buf) == "Ap";
  if (first == 0 || (first == nk && !one_tap) || K / T < 2 || T > kc_blk_) return std::nullopt;
  const int64_t NR = side.width;
  if (!s_[side.din].is_const()) return std::nullopt;
  ExprRef p0 = mul(var(side.panel), const_int(NR)), nc = var(side.count), n0 = var(side.origin), k0 = var("k0"), kc = var("kc");
  ExprRef sin = const_int(s_[side.din].value());
  ExprRef pend = min_of(const_int(NR), sub(nc, p0));
  ExprRef e1 = min_of(min_of(const_int(NR), sub(sin, binary(Op::Mod, add(n0, p0), sin))), pend);
  auto clamp0 = [](ExprRef x) { return binary(Op::Max, x, const_int(0)); };
  auto sg = [](int seg, const char* what) { return "q" + std::to_string(seg) + "_" + what; };
  // per panel: each run's columns [cs, ce) and the row parts of its bounds and address
  std::vector<Stmt> panel;
  std::vector<ExprRef> cs(segs);
  for (int seg = 0; seg < segs; ++seg) {
    cs[seg] = seg == 0 ? const_int(0) : var(sg(seg - 1, "ce"));
    panel.push_back(make_let(sg(seg, "ce"), DType::I64, seg == 0 ? e1 : min_of(add(cs[seg], sin), pend)));
    for (size_t j = 0; j < acc.bounds.size(); ++j)
      panel.push_back(make_let(sg(seg, ("r" + std::to_string(j)).c_str()), DType::I64,
                               add(batch_part(acc.bounds[j].coord), at(B.rows[j + 1], add(p0, cs[seg])))));
    panel.push_back(make_let(sg(seg, "ra"), DType::I64, add(batch_part(acc.addr), at(B.rows[0], add(p0, cs[seg])))));
  }
  // per tap kt: the first channel at this tap in the block, how many, and a depth of this tap
  // (kr, for its bounds: clamped into the block when the tap has none)
  std::vector<Stmt> per_tap{
      make_let("kq0", DType::I64, binary(Op::IDiv, add(sub(k0, var("kt")), const_int(T - 1)), const_int(T))),
      make_let("kqn", DType::I64,
               sub(binary(Op::IDiv, add(sub(add(k0, kc), var("kt")), const_int(T - 1)), const_int(T)), var("kq0"))),
      make_let("kr", DType::I64, min_of(sub(add(mul(var("kq0"), const_int(T)), var("kt")), k0), sub(kc, const_int(1))))};
  for (int seg = 0; seg < segs; ++seg) {
    ExprRef lo = cs[seg], hi = var(sg(seg, "ce")), ok;
    for (size_t j = 0; j < acc.bounds.size(); ++j) {
      auto& b = acc.bounds[j];
      ExprRef base = add(var(sg(seg, ("r" + std::to_string(j)).c_str())), at(B.ks[j + 1], var("kr")));
      ExprRef blo = from_sym(b.lo), bhi = from_sym(b.hi);
      if (cb[j] == 0) {
        ok = logical_and(ok, logical_and(le(blo, base), lt(base, bhi)));
        continue;
      }
      lo = binary(Op::Max, lo, add(cs[seg], ceil_div(clamp0(sub(blo, base)), cb[j])));
      hi = min_of(hi, add(cs[seg], ceil_div(clamp0(sub(bhi, base)), cb[j])));
    }
    per_tap.push_back(make_let(sg(seg, "lo"), DType::I64, lo));
    per_tap.push_back(make_let(sg(seg, "hi"), DType::I64, ok ? select(ok, hi, var(sg(seg, "lo"))) : hi));
  }
  // per channel: the depth's row zeroed, then each run's columns inside the bounds copied
  // (by run: a loop over the channels zeroing their rows, then one per run copying it; the
  // masked copies' masks (the run's, the same for all channels) then stay in the mask
  // registers, where a panel's 3 runs' 18 masks, all in one channel loop, were reloaded from
  // the stack on every channel. LATHE_PACK_TAPS_BY_RUN=0: one loop over the channels.)
  ExprRef row = mul(add(mul(var(side.panel), const_int(kc_blk_)), var("kd")), const_int(NR));
  const Stmt kd_let = make_let("kd", DType::I64, sub(add(mul(add(var("kq0"), var("kq")), const_int(T)), var("kt")), k0));
  // One channel axis at a constant stride (a convolution's input channels): a run's source
  // steps by that stride from the tap's first channel (its k part once per tap, at kr), not
  // through the k table at each depth (a load on the copy's address chain).
  // LATHE_PACK_TAPS_STEP=0 reads the table per depth (A/B runs; read per lowering).
  std::optional<int64_t> cstep;
  if (const char* e = std::getenv("LATHE_PACK_TAPS_STEP"); first == 1 && !(e && std::string(e) == "0")) {
    auto c = acc.addr.const_coef(mm_.k_axes[0]);
    if (c) cstep = *c;
  }
  if (cstep) per_tap.push_back(make_let("kr_a", DType::I64, at(B.ks[0], var("kr"))));
  std::vector<Stmt> per_ch{kd_let};
  Stmt zero = make_for("c", const_int(NR), {make_local_store(side.buf, add(row, var("c")), const_of(0, DType::F32))}, "pack: zero the panel's depth");
  zero.annot.vectorize = true;
  per_ch.push_back(zero);
  const bool by_run = taps_by_run();
  if (by_run) {
    per_tap.push_back(make_for("kq", var("kqn"), std::move(per_ch), "pack: zero the channels' depths at this tap"));
    per_ch.clear();
  }
  for (int seg = 0; seg < segs; ++seg) {
    ExprRef lo = var(sg(seg, "lo")), hi = var(sg(seg, "hi"));
    std::vector<Stmt> copy{
        make_let(sg(seg, "d"), DType::I64, add(row, lo)),
        make_let(sg(seg, "s"), DType::I64,
                 add(add(var(sg(seg, "ra")), cstep ? add(var("kr_a"), mul(var("kq"), const_int(*cstep))) : at(B.ks[0], var("kd"))),
                     mul(sub(lo, cs[seg]), const_int(ca))))};
    Stmt c = make_for("c", sub(hi, lo),
                      {make_local_store(side.buf, add(var(sg(seg, "d")), var("c")),
                                        packed(pb, acc.src, DType::F32, add(var(sg(seg, "s")), mul(var("c"), const_int(ca))), nullptr))},
                      "pack: copy a run (one channel at a tap)");
    c.annot.vectorize = true;
    if (ca >= 1 && ca <= 4 && masked_runs(P_.lanes)) {
      c.annot.stride = static_cast<int>(ca);
      c.annot.max_trip = static_cast<int>(NR);
    }
    copy.push_back(std::move(c));
    if (by_run) {
      copy.insert(copy.begin(), kd_let);
      per_tap.push_back(make_if(lt(lo, hi), {make_for("kq", var("kqn"), std::move(copy), "pack: a run of the channels at this tap")}));
    } else {
      per_ch.push_back(make_if(lt(lo, hi), std::move(copy)));
    }
  }
  if (!by_run) per_tap.push_back(make_for("kq", var("kqn"), std::move(per_ch), "pack: the channels at this tap"));
  // (the panel's lets lead the tap loop's body, one statement for the caller; LLVM hoists them)
  panel.insert(panel.end(), per_tap.begin(), per_tap.end());
  return make_for("kt", const_int(T), std::move(panel), "pack: the window's taps (bounds per tap)");
}

// Pack B run by run: a panel of NR columns spans at most two runs of the innermost N dim
// when that dim has >= NR elements (1 + ceil((NR - 1) / rows) runs for shorter rows, up
// to 4); along a run every address and bound is affine in
// the column, so each run is one contiguous (or constant-stride) copy of the columns whose
// bounds hold, and the rest of the panel is zero. No per-element gather or mask.
std::optional<Stmt> MatmulLowering::pack_b_runs(const OperandParts& B, int pb) {
  const OperandAccess& acc = *B.acc;
  if (acc.bounds.empty() && (mm_.n_axes.size() == 1 || collapsed(acc.addr, mm_.n_axes)))
    return std::nullopt;  // already contiguous
  int din = mm_.n_axes.back();
  if (!s_[din].is_const()) return std::nullopt;
  // a panel spans at most `segs` runs: 2 for rows of >= NR positions, more for shorter
  // rows (3 for a 14-wide feature map); rows shorter than NR / 3 stay with the gather
  const int64_t inner = s_[din].value();
  const int segs = static_cast<int>(1 + ceil_div(P_.nr - 1, inner));
  if (inner < 1 || segs > 4) return std::nullopt;
  auto ca = coef_of(acc.addr, din);
  if (!ca) return std::nullopt;
  std::vector<int64_t> cb;
  for (auto& b : acc.bounds) {
    auto c = coef_of(b.coord, din);
    if (!c) return std::nullopt;
    cb.push_back(*c);
  }
  const int64_t NR = P_.nr;
  ExprRef p0 = mul(var("jp"), const_int(NR)), nc = var("nc"), n0 = var("n0");
  auto elem = [&](ExprRef addr) { return packed(pb, B.acc->src, bdt_, addr, nullptr); };
  ExprRef sin = const_int(s_[din].value());
  ExprRef pend = min_of(const_int(NR), sub(nc, p0));
  ExprRef e1 = min_of(min_of(const_int(NR), sub(sin, binary(Op::Mod, add(n0, p0), sin))), pend);
  auto clamp0 = [](ExprRef x) { return binary(Op::Max, x, const_int(0)); };
  // One depth kk of the panel: `body` gets the first run's lets, `general` the zeroing and
  // the run copies; *full is the condition for the whole panel being the first run (then
  // its address is the let px + "g0_a"), null when that fast path does not apply. Names
  // start with px (one set per member of an integer group).
  // Integer groups (G_ > 1) zero the group's whole panel at once (NR x G contiguous bytes)
  // and copy their runs with scalar loops: a run is at most NR (16) bytes stored at stride
  // G, which the vectorizer turned into interleaved shuffles with remainders per run; with
  // up to 4 runs x 4 members per group that was most of a 1x1 strided conv's compile time
  // (resnet50_qdq's 7x7 downsample: 2.1 s of codegen).
  const bool vec_runs = G_ == 1;
  // `fix` (integer groups, may be null): the stores of 0 that turn a whole contiguous NR-wide
  // copy of the panel into the packed panel (the columns of each run outside the bounds)
  auto one_k = [&](ExprRef kk, const std::string& px, std::function<ExprRef(ExprRef)> at_col, std::vector<Stmt>& body,
                   std::vector<Stmt>& general, ExprRef* full, std::vector<Stmt>* fix, ExprRef kkb, int fix_members,
                   int copy_members = 1, int64_t member_stride = 0) {
    if (!kkb) kkb = kk;  // the depth whose bounds this k takes (see shared_bounds)
    if (vec_runs) {
      Stmt zero = make_for("c", const_int(NR), {make_local_store("Bp", at_col(var("c")), const_of(0, bdt_))},
                           "pack B: zero the panel");
      zero.annot.vectorize = true;
      general.push_back(zero);
    }
    for (int seg = 0; seg < segs; ++seg) {
      std::vector<Stmt>& out = seg == 0 ? body : general;
      const size_t lets_from = out.size();
      std::string sg = px + "g" + std::to_string(seg) + "_";
      ExprRef cs = seg == 0 ? const_int(0) : var(px + "g" + std::to_string(seg - 1) + "_ce");
      ExprRef ce = seg == 0 ? e1 : min_of(add(cs, sin), pend);  // the next row's run
      out.push_back(make_let(sg + "ce", DType::I64, ce));
      ExprRef lo = cs, hi = var(sg + "ce"), ok;
      for (size_t j = 0; j < acc.bounds.size(); ++j) {
        auto& b = acc.bounds[j];
        ExprRef base = add(batch_part(b.coord), add(at(B.rows[j + 1], add(p0, cs)), at(B.ks[j + 1], kkb)));
        out.push_back(make_let(sg + "b" + std::to_string(j), DType::I64, base));
        base = var(sg + "b" + std::to_string(j));
        ExprRef blo = from_sym(b.lo), bhi = from_sym(b.hi);
        if (cb[j] == 0) {
          ok = logical_and(ok, logical_and(le(blo, base), lt(base, bhi)));
          continue;
        }
        lo = binary(Op::Max, lo, add(cs, ceil_div(clamp0(sub(blo, base)), cb[j])));
        hi = min_of(hi, add(cs, ceil_div(clamp0(sub(bhi, base)), cb[j])));
      }
      out.push_back(make_let(sg + "lo", DType::I64, lo));
      out.push_back(make_let(sg + "hi", DType::I64, hi));
      ExprRef addr = add(batch_part(acc.addr), add(at(B.rows[0], add(p0, cs)), at(B.ks[0], kk)));
      out.push_back(make_let(sg + "a", DType::I64, addr));
      ExprRef c = add(var(sg + "lo"), var("c"));
      // copy_members > 1 (a group whose members share their bounds, see shared_bounds): this
      // member's run copies the group's G members per column (member_stride apart in the
      // source, consecutive in the panel); 0: the run is copied by the group's first member
      std::vector<Stmt> copies;
      for (int m = 0; m < copy_members; ++m)
        copies.push_back(make_local_store("Bp", m ? add(at_col(c), const_int(m)) : at_col(c),
                                          elem(add(var(sg + "a"), add(mul(sub(c, cs), const_int(*ca)), const_int(m * member_stride))))));
      Stmt copy = make_for("c", sub(var(sg + "hi"), var(sg + "lo")), std::move(copies),
                           copy_members > 1 ? "pack B: copy a run (a group of k)" : "pack B: copy a run");
      copy.annot.vectorize = vec_runs;
      copy.annot.scalar = !vec_runs;
      if (vec_runs && copy_members == 1 && *ca >= 2 && *ca <= 4 && masked_runs(P_.lanes)) {  // at most NR columns, ca apart
        // the copy as dst[d + c] = src[s + ca·c] (the backend's strided copy takes that form)
        general.push_back(make_let(sg + "d", DType::I64, at_col(var(sg + "lo"))));
        general.push_back(make_let(sg + "s", DType::I64, add(var(sg + "a"), mul(sub(var(sg + "lo"), cs), const_int(*ca)))));
        copy = make_for("c", sub(var(sg + "hi"), var(sg + "lo")),
                        {make_local_store("Bp", add(var(sg + "d"), var("c")), elem(add(var(sg + "s"), mul(var("c"), const_int(*ca)))))},
                        "pack B: copy a run");
        copy.annot.vectorize = true;
        copy.annot.stride = static_cast<int>(*ca);
        copy.annot.max_trip = static_cast<int>(NR);
      }
      // the common case: the whole panel is one run inside the bounds (an interior panel of
      // a row at least NR wide): a fixed NR-wide copy, no zeroing, no variable-length loop
      // (whose short trip counts the vectorizer leaves to its scalar remainder)
      if (seg == 0 && inner >= NR)
        *full = logical_and(ok, logical_and(le(const_int(NR), var(sg + "ce")),
                                            logical_and(le(var(sg + "lo"), const_int(0)), le(const_int(NR), var(sg + "hi")))));
      if (copy_members > 0) general.push_back(ok ? make_if(ok, {copy}) : copy);  // after the zeroing
      if (fix) {
        if (seg > 0) fix->insert(fix->end(), out.begin() + lets_from, out.end());
        auto zeros = [&](ExprRef from, ExprRef to, const char* note) {
          std::vector<Stmt> st;  // fix_members: this member and the next ones of its group (their bytes follow)
          for (int m = 0; m < fix_members; ++m)
            st.push_back(make_local_store("Bp", add(at_col(add(from, var("c"))), const_int(m)), const_of(0, bdt_)));
          Stmt z = make_for("c", sub(to, from), std::move(st), note);
          z.annot.scalar = true;
          return z;
        };
        ExprRef cev = var(sg + "ce");
        Stmt ends = zeros(cs, min_of(var(sg + "lo"), cev), "pack B: zero a run's columns before the bounds");
        Stmt tail = zeros(binary(Op::Max, var(sg + "hi"), cs), cev, "pack B: zero a run's columns past the bounds");
        if (ok) {
          fix->push_back(make_if(ok, {ends, tail}, {zeros(cs, cev, "pack B: zero a run outside the bounds")}));
        } else {
          fix->push_back(ends);
          fix->push_back(tail);
        }
      }
    }
  };
  std::vector<Stmt> body, general;
  ExprRef full_cond;
  if (G_ == 1) {
    ExprRef kk = var("kk");
    ExprRef dst = mul(add(mul(var("jp"), const_int(kc_blk_)), kk), const_int(NR));
    one_k(kk, "", [&](ExprRef c) { return add(dst, c); }, body, general, &full_cond, nullptr, nullptr, 1);
    if (full_cond) {
      Stmt whole = make_for("c", const_int(NR), {make_local_store("Bp", add(dst, var("c")), elem(add(var("g0_a"), mul(var("c"), const_int(*ca)))))},
                            "pack B: copy a whole panel");
      whole.annot.vectorize = true;
      body.push_back(make_if(full_cond, {whole}, std::move(general)));
    } else {
      body.insert(body.end(), general.begin(), general.end());
    }
    Stmt k_loop = make_for("kk", var("kc"), std::move(body));
    if (auto t = pack_b_taps(B, pb, segs, cb, *ca)) k_loop = std::move(*t);
    if (win_ && win_->in_place) {  // interior panels are read in place by the micro-kernel
      k_loop = make_if(unary(Op::Not, window_interior(B, *win_, p0)), {std::move(k_loop)});
    } else if (win_) {  // an interior panel: one unguarded NR-wide copy per k, no bounds per k
      Stmt whole = make_for("c", const_int(NR),
                            {make_local_store("Bp", add(dst, var("c")),
                                              elem(add(add(var("wp"), at(B.ks[0], kk)), mul(var("c"), const_int(win_->ca)))))},
                            "pack B: copy an interior panel");
      whole.annot.vectorize = true;
      if (win_->ca >= 2 && win_->ca <= 4 && strided_copies(P_.lanes)) whole.annot.stride = static_cast<int>(win_->ca);
      k_loop = make_if(window_interior(B, *win_, p0),
                       {make_let("wp", DType::I64, add(batch_part(acc.addr), at(B.rows[0], p0))),
                        make_for("kk", var("kc"), {whole}, "pack B: k (interior panel)")},
                       {std::move(k_loop)});
    }
    return make_for("jp", ceil_div(nc, P_.nr), {std::move(k_loop)}, "pack B: NR-wide panels, by runs");
  }
  return pack_b_run_groups(B, pb, ca, one_k);
}

// pack B: this job's block, k by k into NR-wide panels (the parts give its addresses: this
// job's, or a shared pack step's: shared_pack_loop)
Stmt MatmulLowering::pack_b(const OperandParts& Bx) {
  const MatmulParams& P = P_;
  const ExprRef &kk = kk_, &nc = nc_, &kc = kc_, &kin = kin_, &kpack = kpack_;
  const bool cols_whole = cols_whole_, k_ragged = k_ragged_;
  const int pb = pb_;
  ExprRef col = add(mul(var("jp"), const_int(P.nr)), var("c"));
  Stmt packb_c = make_for("c", const_int(P.nr),
                          {make_local_store("Bp", panel_index(var("jp"), kk, var("c"), P.nr),
                                            packed(pb, mm_.b.src, bdt_, address(Bx, col, kk),
                                                   logical_and(kin, logical_and(cols_whole ? nullptr : lt(col, nc), in_range(Bx, col, kk)))))},
                          "pack B: panel column");
  packb_c.annot.vectorize = true;
  // integer panels (G k per column): one column iteration writes its whole group, G stores
  // at consecutive addresses that the vectorizer joins into an interleaved group (widen G
  // rows of B, interleave, store whole vectors). One k per iteration stored every element
  // alone (16 vpextrw a vector: ResNet-50 QDQ's 1x1 convs spent as long packing B as in
  // the micro-kernel). The group loop `kg` runs kpack / G times.
  ExprRef kg = var("kg");
  auto group_columns = [&](bool guard_cols, const char* note, ExprRef extent = nullptr) {
    std::vector<Stmt> stores;
    for (int j = 0; j < G_; ++j) {
      ExprRef kj = add(mul(kg, const_int(G_)), const_int(j));
      ExprRef kin_j = k_ragged ? lt(kj, kc) : nullptr;
      stores.push_back(make_local_store("Bp", group_panel_index(var("jp"), kg, j, var("c"), P.nr),
                                        packed(pb, mm_.b.src, bdt_, address(Bx, col, kj),
                                               logical_and(kin_j, logical_and(guard_cols ? lt(col, nc) : nullptr, in_range(Bx, col, kj))))));
    }
    Stmt f = make_for("c", extent ? extent : const_int(P.nr), std::move(stores), note);
    f.annot.vectorize = true;
    return f;
  };
  Stmt packb_g = G_ > 1 ? group_columns(!cols_whole, "pack B: panel column (a group of k)") : Stmt{};
  // row by row of B (k outer): each k reads one run of nc columns, in address order when
  // N is B's contiguous dim; panel by panel would walk down the columns a row stride apart
  // (a page apart for wide B), defeating the prefetchers and the TLB.
  Stmt packb;
  if (G_ > 1) {
    // Whole panels copy without the column guard, as the f32 panels below: a guarded load per
    // column became an element-by-element gather (32 x 4 vpinsrb a group of k), most of a 1x1
    // int8 conv's time where N is no multiple of NR (resnet50_qdq's 28x28 512 -> 128 layers:
    // 206 us against ORT's 110, one thread); the ragged last panel is zeroed, then its columns
    // copied (its 14x14 1x1 layers 4% faster). LATHE_INT8_WHOLE_PANELS=0 guards every panel.
    static const bool whole_panels = [] {
      const char* e = std::getenv("LATHE_INT8_WHOLE_PANELS");
      return !(e && std::string(e) == "0");
    }();
    Stmt jp_body = packb_g;
    if (!cols_whole && whole_panels) {
      // the ragged last panel: its group's bytes zeroed, then its columns copied without the
      // column guard (a guarded column was the same byte gather, for the one panel)
      ExprRef left = sub(nc, mul(var("jp"), const_int(P.nr)));
      Stmt zero = make_for("c", const_int(P.nr * G_),
                           {make_local_store("Bp", add(group_panel_index(var("jp"), kg, 0, const_int(0), P.nr), var("c")),
                                             const_of(0, bdt_))},
                           "pack B: zero the ragged panel (a group of k)");
      zero.annot.vectorize = true;
      jp_body = make_if(le(add(mul(var("jp"), const_int(P.nr)), const_int(P.nr)), nc),
                        {group_columns(false, "pack B: panel column (whole panel, a group of k)")},
                        {zero, group_columns(false, "pack B: panel column (ragged panel, a group of k)", left)});
    }
    packb = make_for("kg", ceil_div(kpack, G_), {make_for("jp", ceil_div(nc, P.nr), {jp_body}, "pack B: NR-wide panels")}, "pack B: k groups");
  } else {
    // A ragged last panel (N not a multiple of NR) copies its columns with a loop of that many
    // and zeroes the rest; whole panels copy without the column guard. A guard inside the
    // vectorized column loop became gathers or masked loads (slow on AVX2 hosts).
    std::vector<Stmt> jp_body{packb_c};
    if (!cols_whole) {
      auto copy_col = [&](ExprRef c) {
        ExprRef at_c = add(mul(var("jp"), const_int(P.nr)), c);
        return make_local_store("Bp", panel_index(var("jp"), kk, c, P.nr),
                                packed(pb, mm_.b.src, bdt_, address(Bx, at_c, kk), logical_and(kin, in_range(Bx, at_c, kk))));
  };
      ExprRef left = sub(nc, mul(var("jp"), const_int(P.nr)));
      Stmt whole = make_for("c", const_int(P.nr), {copy_col(var("c"))}, "pack B: panel column (whole panel)");
      Stmt copy = make_for("c", left, {copy_col(var("c"))}, "pack B: panel column (ragged panel)");
      Stmt zero = make_for("c", sub(const_int(P.nr), left),
                           {make_local_store("Bp", panel_index(var("jp"), kk, add(left, var("c")), P.nr), const_of(0, bdt_))},
                           "pack B: zero the ragged panel's rest");
      for (Stmt* l : {&whole, &copy, &zero}) l->annot.vectorize = true;
      jp_body = {make_if(le(add(mul(var("jp"), const_int(P.nr)), const_int(P.nr)), nc), {whole}, {copy, zero})};
    }
    packb = make_for("kk", kpack, {make_for("jp", ceil_div(nc, P.nr), jp_body, "pack B: NR-wide panels")}, "pack B: k");
  }
  std::optional<Stmt> runs;
  runs = pack_b_runs(Bx, pb);  // int8: a ragged last group of k zeroed there too
  if (runs) {
    packb = std::move(*runs);
  } else if (!b_columns_contiguous()) {
    // B is read across its rows (x @ W^T: a column of the panel is a row of W): panel by
    // panel, so each k reads one element from each of NR rows, the same NR cache lines for
    // 16 consecutive k. Row by row of B would touch nc lines per k, more than L1 holds.
    // Whole panels load without the column guard; only a ragged last panel keeps it.
    std::vector<Stmt> panel{G_ > 1 ? make_for("kg", ceil_div(kpack, G_), {packb_g}, "pack B: k groups") : make_for("kk", kpack, {packb_c}, "pack B: k")};
    if (!cols_whole) {
      Stmt whole = make_for("c", const_int(P.nr),
                            {make_local_store("Bp", panel_index(var("jp"), kk, var("c"), P.nr),
                                              packed(pb, mm_.b.src, bdt_, address(Bx, col, kk), logical_and(kin, in_range(Bx, col, kk))))},
                            "pack B: panel column (whole panel)");
      whole.annot.vectorize = true;
      Stmt whole_k = G_ > 1 ? make_for("kg", ceil_div(kpack, G_), {group_columns(false, "pack B: panel column (whole panel, a group of k)")}, "pack B: k groups")
                            : make_for("kk", kpack, {whole}, "pack B: k");
      panel = {make_if(le(add(mul(var("jp"), const_int(P.nr)), const_int(P.nr)), nc), {whole_k}, std::move(panel))};
    }
    packb = make_for("jp", ceil_div(nc, P.nr), std::move(panel), "pack B: NR-wide panels (B^T)");
  }
  // each loop gets its own name (kb, cb: pack B; ka, ra: pack A; kk: the micro-kernel; wr,
  // wc: the write-back), so a schedule primitive's loop name means one loop
  std::vector<Stmt> packb_v{std::move(packb)};
  rename_loops(packb_v, "kk", "kb");
  rename_loops(packb_v, "kg", "kb");
  rename_loops(packb_v, "c", "cb");
  return std::move(packb_v[0]);
}

// An f32 A read through a window (a convolution whose positions orient_matmul put on A: a
// 14 x 14 or 7 x 7 layer), packed tap by tap as pack_b_taps packs B: a panel's MR rows are at
// most `segs` runs along the map's rows (a stride-2 layer's rows 2 apart in the input), whose
// bounds per tap are taken once for all its channels, and each run a channel copies as one
// masked (strided) vector. The element-by-element pack took each row's table entries and its
// four bound tests for every depth: ResNet-50's layer3.0 conv2 (28 x 28 -> 14 x 14, 256 ->
// 256, swapped) packed its 196 x 2304 A twice a run (two N blocks of 128 channels), most of
// the time it lost to ORT. Stride 1 too (the runs' copies unstrided, masked). Rows of at
// least MR / 3 positions (segs <= 4). And without a window, where the rows are a stride apart
// (a strided 1x1 layer swapped: layer3.0's downsample, 28 x 28 -> 14 x 14, 512 -> 1024, one
// thread 909-927 -> 864-872 us): one tap, every k a channel. LATHE_PACK_A_TAPS=0 packs element
// by element (A/B runs; read per lowering: tests set it).
std::optional<Stmt> MatmulLowering::pack_a_taps(const OperandParts& Ax) const {
  const char* e = std::getenv("LATHE_PACK_A_TAPS");
  if ((e && std::string(e) == "0") || G_ != 1 || adt_ != DType::F32) return std::nullopt;
  const OperandAccess& acc = *Ax.acc;
  if (mm_.m_axes.empty()) return std::nullopt;
  const int din = mm_.m_axes.back();
  if (acc.bounds.empty()) {  // no window: only rows a stride apart (a strided 1x1 layer's positions)
    auto c = collapsed(acc.addr, mm_.m_axes);
    if (c && *c == SymInt(1)) return std::nullopt;
    // ... and only where the rows lie closer together than the depths (a layer's positions
    // against its channels' planes): a plain matmul's A (BERT's activations, rows K apart, k
    // contiguous) keeps the row-wise copy; the runs along m gathered it (bert_base 51 -> 60 ms)
    auto cm = coef_of(acc.addr, din);
    auto ck = mm_.k_axes.empty() ? std::nullopt : coef_of(acc.addr, mm_.k_axes.back());
    if (!cm || !ck || std::abs(*ck) <= std::abs(*cm)) return std::nullopt;
  }
  if (!s_[din].is_const() || s_[din].value() < 1) return std::nullopt;
  const int segs = static_cast<int>(1 + ceil_div(P_.mr - 1, s_[din].value()));
  if (segs > 4) return std::nullopt;
  auto ca = coef_of(acc.addr, din);
  if (!ca) return std::nullopt;
  std::vector<int64_t> cb;
  for (auto& b : acc.bounds) {
    auto c = coef_of(b.coord, din);
    if (!c) return std::nullopt;
    cb.push_back(*c);
  }
  return pack_taps(Ax, pa_, segs, cb, *ca, TapSide{"Ap", "ip", "mc", "m0", P_.mr, din});
}

// pack A: this MC block into MR-tall panels (the parts give its addresses: this job's, or a
// shared pack step's)
Stmt MatmulLowering::pack_a(const OperandParts& Ax) {
  const MatmulParams& P = P_;
  const ExprRef &kk = kk_, &mc = mc_, &kin = kin_, &kpack = kpack_;
  const bool rows_whole = rows_whole_;
  const int pa = pa_;
  ExprRef row = add(mul(var("ip"), const_int(P.mr)), var("r"));
  // k outer, the MR rows inner (unrolled): each k writes one contiguous MR-wide column of
  // the panel. (Rows outer made the vectorizer scatter the stores with stride MR, which
  // costs more than the micro-kernel's share of the data.)
  // Only the last panel of a block whose rows are no multiple of MR (M = 128 tokens, 64 or
  // 256 channels on MR 6) needs the row guard: the whole panels load without it (a guarded
  // load per element was a branch or an element insert each).
  auto packa_k = [&](bool guard) {
    Stmt r = make_for("r", const_int(P.mr),
                      {make_local_store("Ap", panel_index(var("ip"), kk, var("r"), P.mr),
                                        packed(pa, mm_.a.src, adt_, address(Ax, row, kk),
                                               logical_and(kin, logical_and(guard ? lt(row, mc) : nullptr, in_range(Ax, row, kk)))))},
                      guard ? "pack A: panel row (ragged panel)" : "pack A: panel row");
    r.annot.unroll = P.mr;
    return make_for("kk", kpack, {r}, guard ? "pack A: k (ragged panel)" : "pack A: k");
  };
  if (std::optional<Stmt> taps = pack_a_taps(Ax)) {  // every panel, the ragged last one too
    std::vector<Stmt> v{make_for("ip", ceil_div(mc, P.mr), {std::move(*taps)}, "pack A: MR-tall panels, tap by tap")};
    rename_loops(v, "c", "ca");
    return std::move(v[0]);
  }
  std::optional<Stmt> contig = pack_a_contig(Ax);
  Stmt whole = contig ? *contig : packa_k(false);
  Stmt ipbody = rows_whole ? whole
                           : make_if(le(add(mul(var("ip"), const_int(P.mr)), const_int(P.mr)), mc), {whole}, {packa_k(true)});
  std::vector<Stmt> packa_v{make_for("ip", ceil_div(mc, P.mr), {ipbody}, "pack A: MR-tall panels")};
  rename_loops(packa_v, "kk", "ka");
  rename_loops(packa_v, "r", "ra");
  return std::move(packa_v[0]);
}

}  // namespace lathe::loop::matmul_lowering

namespace lathe::loop {

bool packs_b_window_whole(const MatmulMatch& mm, const MatmulParams& P) {
  const OperandAccess& acc = mm.b;
  const char* env = std::getenv("LATHE_CONV_IN_PLACE");  // MatmulLowering::in_place_mode
  const std::string mode = env ? env : "1";
  if (mode == "guarded" || mm.sat16 || acc.bounds.empty() || mm.n_axes.empty() ||
      !acc.src || acc.src->op == Op::Const || mm.reduce->dtype != DType::F32)
    return false;
  const Shape& s = mm.mul->shape;
  const int din = mm.n_axes.back();
  if (!s[din].is_const() || s[din].value() < P.nr) return false;
  auto ca = acc.addr.const_coef(din);
  if (!ca) return false;
  int64_t m = 1;
  for (int d : mm.m_axes) {
    if (!s[d].is_const()) return false;
    m *= s[d].value();
  }
  // window_in_place's choice: in place for a stride-1 window over few rows whose channels'
  // rows spread over the L1 sets
  bool in_place = mode != "0" && *ca == 1 && m <= 64;
  int64_t kstride = 0;
  for (auto& [d, k] : acc.addr.terms) {
    if (std::find(mm.k_axes.begin(), mm.k_axes.end(), d) == mm.k_axes.end()) continue;
    if (!k.is_const() || !s[d].is_const()) return false;
    if (s[d].value() > 1) kstride = std::max(kstride, std::abs(k.value()));
  }
  const int64_t way = 4096, bytes = kstride * int64_t(sizeof(float)) % way;
  if (kstride > 0 && std::min<int64_t>(64, way / std::gcd(bytes, way)) < 16) in_place = false;
  return !in_place;
}

}  // namespace lathe::loop
