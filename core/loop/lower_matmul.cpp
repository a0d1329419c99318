// lower_matmul.cpp — lower_matmul_kernel: a contraction (match_matmul) → a packed,
// cache-blocked, register-blocked loop nest (the BLIS structure), in backend-neutral loop IR.
//
//   parallel for t in [batch × N-blocks × M-splits]:      one B panel per thread
//     for pc over K in KC steps:
//       pack B[k0:k0+kc, n0:n0+nc] → Bp (NR-wide panels, zero padded)
//       for ic over the M range in MC steps:
//         pack A[m0:m0+mc, k0:k0+kc] → Ap (MR-tall panels, zero padded)
//         for jr over NR panels, ir over MR panels:        micro-kernel
//           acc[MR][NR/lanes] = 0      (vector registers)
//           for kk < kc: b = Bp[kk][0:NR]; for r < MR: acc[r] += broadcast(Ap[kk][r]) * b
//           C[tile] (+)= acc           (masked at the edges; the epilogue at the last pc)
//
// M, N and K may each be a group of dims and the operands any affine view with range
// conditions (a convolution's padded sliding window): the packing steps gather through it
// (implicit im2col). A group part of an address that is not affine in the group's flat index
// is precomputed once per block into a small table. The MR and NR/lanes loops of the
// micro-kernel are unrolled here (constant indices), so the accumulators live in registers.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/lower.h"
#include "core/loop/matmul_epilogue.h"
#include "core/loop/prepack.h"

namespace lathe::loop {

namespace {

ExprRef ceil_div(ExprRef a, int64_t b) { return binary(Op::IDiv, add(a, const_int(b - 1)), const_int(b)); }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

SymInt product(const Shape& s, const std::vector<int>& dims) {
  SymInt p = 1;
  for (int d : dims) p = p * s[d];
  return p;
}

class MatmulLowering {
 public:
  MatmulLowering(const KernelGraph& kg, const Kernel& k, const MatmulMatch& mm, const MatmulParams& P)
      : kg_(kg), k_(k), mm_(mm), P_(P), s_(mm.mul->shape) {}

  LoopFunc run();

 private:
  const KernelGraph& kg_;
  const Kernel& k_;
  const MatmulMatch& mm_;
  const MatmulParams& P_;
  const Shape& s_;
  LoopFunc f_;
  std::unordered_map<int, int> param_of_;
  std::map<int, ExprRef> batch_;   // batch dim -> its index in this job
  int tables_ = 0;

  int add_param(int buffer, bool written, const std::string& name) {
    auto it = param_of_.find(buffer);
    if (it != param_of_.end()) return it->second;
    f_.buffers.push_back({buffer, name, kg_.buffers[buffer].dtype, written});
    return param_of_[buffer] = (int)f_.buffers.size() - 1;
  }

  // The coefficient of a group's innermost dim when `a` is affine in the group's flat index.
  std::optional<SymInt> collapsed(const Affine& a, const std::vector<int>& g) const {
    auto coef = [&](int d) {
      SymInt c = 0;
      for (auto& [x, k] : a.terms)
        if (x == d) c = c + k;
      return c;
    };
    SymInt inner = coef(g.back()), want = inner;
    for (size_t i = g.size() - 1; i-- > 0;) {
      want = want * s_[g[i + 1]];
      if (coef(g[i]) != want) return std::nullopt;
    }
    return inner;
  }
  bool uses_any(const Affine& a, const std::vector<int>& g) const {
    for (int d : g)
      if (a.uses(d)) return true;
    return false;
  }
  // part of `a` over group g at flat index f, as index math (div/mod when not collapsible)
  ExprRef part(const Affine& a, const std::vector<int>& g, ExprRef f) const {
    if (!uses_any(a, g)) return const_int(0);
    if (auto c = collapsed(a, g)) return mul(f, from_sym(*c));
    return affine_part(a, group_coords(g, s_, f));
  }
  ExprRef batch_part(const Affine& a) const { return add(from_sym(a.c0), affine_part(a, batch_)); }

  // A group part read from a table filled for local indices [0, count) at flat index base+i,
  // when it is not affine in the flat index; else inline index math. Fill loops go to `fill`.
  struct Part {
    std::string table;  // "" = inline
    const Affine* a = nullptr;
    const std::vector<int>* g = nullptr;
    ExprRef base;
  };
  Part make_part(const Affine& a, const std::vector<int>& g, ExprRef base, ExprRef count, int64_t cap,
                 std::vector<Stmt>& fill, std::vector<Stmt>& allocs) {
    Part p{"", &a, &g, base};
    if (!uses_any(a, g) || g.size() == 1 || collapsed(a, g)) return p;
    p.table = "tab" + std::to_string(tables_++);
    allocs.push_back(make_alloc(p.table, DType::I64, 1, cap));
    fill.push_back(make_for("i", count, {make_local_store(p.table, var("i"), part(a, g, add(base, var("i"))))},
                            "table of a gathered group's offsets"));
    return p;
  }
  ExprRef at(const Part& p, ExprRef local) const {
    if (!p.table.empty()) return local_load(p.table, DType::I64, local);
    return part(*p.a, *p.g, add(p.base, local));
  }

  // address and mask of one operand element from its row-group part and K part
  struct OperandParts {
    const OperandAccess* acc = nullptr;
    std::vector<Part> rows, ks;  // [0] address, [1 + j] bound j
  };
  OperandParts make_parts(const OperandAccess& acc, const std::vector<int>& rows, ExprRef rbase, ExprRef rcount,
                          int64_t rcap, std::vector<Stmt>& rfill, ExprRef kbase, ExprRef kcount, std::vector<Stmt>& kfill,
                          std::vector<Stmt>& allocs) {
    OperandParts o;
    o.acc = &acc;
    o.rows.push_back(make_part(acc.addr, rows, rbase, rcount, rcap, rfill, allocs));
    o.ks.push_back(make_part(acc.addr, mm_.k_axes, kbase, kcount, kc_blk_, kfill, allocs));
    for (auto& b : acc.bounds) {
      o.rows.push_back(make_part(b.coord, rows, rbase, rcount, rcap, rfill, allocs));
      o.ks.push_back(make_part(b.coord, mm_.k_axes, kbase, kcount, kc_blk_, kfill, allocs));
    }
    return o;
  }
  ExprRef address(const OperandParts& o, ExprRef row, ExprRef kk) const {
    return add(batch_part(o.acc->addr), add(at(o.rows[0], row), at(o.ks[0], kk)));
  }
  ExprRef in_range(const OperandParts& o, ExprRef row, ExprRef kk) const {
    ExprRef m;
    for (size_t j = 0; j < o.acc->bounds.size(); ++j) {
      auto& b = o.acc->bounds[j];
      ExprRef c = add(batch_part(b.coord), add(at(o.rows[j + 1], row), at(o.ks[j + 1], kk)));
      m = logical_and(m, logical_and(le(from_sym(b.lo), c), lt(c, from_sym(b.hi))));
    }
    return m;
  }

  int64_t kc_blk_ = 0, mc_blk_ = 0;
  // integer contractions (u8/i8 operands, i32 sums): panels hold groups of G consecutive k
  // per row/column (G = 1 for floats), as elements of adt_ / bdt_ (the Dot's operands)
  int G_ = 1;
  DType adt_ = DType::F32, bdt_ = DType::F32, acc_ = DType::F32;
  // Bp / Ap element of panel p, depth kk, column / row c
  ExprRef panel_index(ExprRef p, ExprRef kk, ExprRef c, int64_t width) const {
    if (G_ == 1) return add(mul(add(mul(p, const_int(kc_blk_)), kk), const_int(width)), c);
    ExprRef g = binary(Op::IDiv, kk, const_int(G_)), j = binary(Op::Mod, kk, const_int(G_));
    return add(mul(add(mul(add(mul(p, const_int(kc_blk_ / G_)), g), const_int(width)), c), const_int(G_)), j);
  }
  // the same for depth kg·G + j, group kg and member j given apart
  ExprRef group_panel_index(ExprRef p, ExprRef kg, int j, ExprRef c, int64_t width) const {
    return add(mul(add(mul(add(mul(p, const_int(kc_blk_ / G_)), kg), const_int(width)), c), const_int(G_)), const_int(j));
  }
  // a packed element: the operand's value (floats) or it widened to the panel's type
  ExprRef packed(int param, NodeRef src, DType to, ExprRef addr, ExprRef mask) const {
    if (G_ == 1) return load(param, DType::F32, addr, mask);
    return cast(load(param, src->dtype, addr, mask), to);
  }

  // Coefficient of dim d in `a` when it is a non-negative constant.
  static std::optional<int64_t> coef_of(const Affine& a, int d) {
    SymInt c = 0;
    for (auto& [x, k] : a.terms)
      if (x == d) c = c + k;
    if (!c.is_const() || c.value() < 0) return std::nullopt;
    return c.value();
  }

  // Does one k of B read its columns at consecutive addresses (the innermost N dim has
  // coefficient 1, or there is only one column)?
  bool b_columns_contiguous() const {
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
  // streams were no faster or slower, and with many rows of A the copy is amortized, so
  // those, strided 1x1 convolutions and plain matmuls keep their packed panels.
  // LATHE_MATMUL_B_IN_PLACE=0 packs always (A/B runs).
  bool reads_b_in_place(const OperandParts& B, const SymInt& Ms, const SymInt& Ks) const {
    static const bool enabled = [] {
      const char* e = std::getenv("LATHE_MATMUL_B_IN_PLACE");
      return !(e && std::string(e) == "0");
    }();
    if (!enabled || G_ != 1 || !B.acc->bounds.empty() || mm_.n_axes.empty()) return false;
    const bool conv_like = mm_.n_axes.size() > 1 || mm_.k_axes.size() > 1;
    if (!conv_like || !Ms.is_const() || Ms.value() > 64 || !Ks.is_const() || Ks.value() < 64) return false;
    if (!B.rows[0].table.empty() || !B.ks[0].table.empty()) return false;
    auto c = collapsed(B.acc->addr, mm_.n_axes);
    return c && *c == SymInt(1);
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
  struct WindowInPlace {
    std::vector<int64_t> cb, kmin, kmax;  // per bound: the coefficient along a run, the k part's range
    int64_t ca = 1;                       // the address's coefficient along a run
    bool in_place = false;                // interior panels read by the micro-kernel (else packed)
  };
  // LATHE_CONV_IN_PLACE: unset / 1 the default; 0 packs every panel (interior ones by the
  // unguarded copy); guarded packs every panel k by k with the bounds tested per k (A/B runs)
  static const std::string& in_place_mode() {
    static const std::string mode = [] {
      const char* e = std::getenv("LATHE_CONV_IN_PLACE");
      return std::string(e ? e : "1");
    }();
    return mode;
  }
  std::optional<WindowInPlace> window_in_place(const OperandParts& B, const SymInt& Ms) const {
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
  ExprRef window_interior(const OperandParts& B, const WindowInPlace& w, ExprRef p0) const {
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
  std::optional<WindowInPlace> win_;  // a window whose interior panels are read in place or copied whole

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
  static constexpr int64_t kSharedPackMaxBytes = int64_t(3) << 20, kSharedPackMinWaste = int64_t(1) << 15;
  static constexpr int64_t kSharedPackParallelMin = int64_t(1) << 16;  // elements
  int64_t shared_elems(int64_t rows, int64_t K, int64_t width) const {
    return ceil_div(K, kc_blk_) * ceil_div(rows, width) * kc_blk_ * width;
  }
  // rows: the packed side's size (N for B, M for A); copies: how many jobs pack all of it
  bool shares_pack(const SymInt& rows, const SymInt& Ks, const SymInt& batch, int64_t copies, int64_t width) const {
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
  Stmt shared_pack_loop(const OperandAccess& acc, const std::vector<int>& axes, int64_t rows, int64_t K, int64_t width,
                        int64_t max_panels, int threads, const std::string& r0, const std::string& rc,
                        const std::string& local, const std::string& shared, int64_t table_pad,
                        const std::function<Stmt(const OperandParts&)>& make_pack) {
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

  // Pack B run by run: a panel of NR columns spans at most two runs of the innermost N dim
  // when that dim has >= NR elements (1 + ceil((NR - 1) / rows) runs for shorter rows, up
  // to 4); along a run every address and bound is affine in
  // the column, so each run is one contiguous (or constant-stride) copy of the columns whose
  // bounds hold, and the rest of the panel is zero. No per-element gather or mask.
  std::optional<Stmt> pack_b_runs(const OperandParts& B, int pb) {
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
    auto one_k = [&](ExprRef kk, const std::string& px, std::function<ExprRef(ExprRef)> at_col, std::vector<Stmt>& body,
                     std::vector<Stmt>& general, ExprRef* full) {
      Stmt zero = make_for("c", const_int(NR), {make_local_store("Bp", at_col(var("c")), const_of(0, bdt_))},
                           "pack B: zero the panel");
      zero.annot.vectorize = true;
      general.push_back(zero);
      for (int seg = 0; seg < segs; ++seg) {
        std::vector<Stmt>& out = seg == 0 ? body : general;
        std::string sg = px + "g" + std::to_string(seg) + "_";
        ExprRef cs = seg == 0 ? const_int(0) : var(px + "g" + std::to_string(seg - 1) + "_ce");
        ExprRef ce = seg == 0 ? e1 : min_of(add(cs, sin), pend);  // the next row's run
        out.push_back(make_let(sg + "ce", DType::I64, ce));
        ExprRef lo = cs, hi = var(sg + "ce"), ok;
        for (size_t j = 0; j < acc.bounds.size(); ++j) {
          auto& b = acc.bounds[j];
          ExprRef base = add(batch_part(b.coord), add(at(B.rows[j + 1], add(p0, cs)), at(B.ks[j + 1], kk)));
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
        Stmt copy = make_for("c", sub(var(sg + "hi"), var(sg + "lo")),
                             {make_local_store("Bp", at_col(c), elem(add(var(sg + "a"), mul(sub(c, cs), const_int(*ca)))))},
                             "pack B: copy a run");
        copy.annot.vectorize = true;
        // the common case: the whole panel is one run inside the bounds (an interior panel of
        // a row at least NR wide): a fixed NR-wide copy, no zeroing, no variable-length loop
        // (whose short trip counts the vectorizer leaves to its scalar remainder)
        if (seg == 0 && inner >= NR)
          *full = logical_and(ok, logical_and(le(const_int(NR), var(sg + "ce")),
                                              logical_and(le(var(sg + "lo"), const_int(0)), le(const_int(NR), var(sg + "hi")))));
        general.push_back(ok ? make_if(ok, {copy}) : copy);  // after the zeroing
      }
    };
    std::vector<Stmt> body, general;
    ExprRef full_cond;
    if (G_ == 1) {
      ExprRef kk = var("kk");
      ExprRef dst = mul(add(mul(var("jp"), const_int(kc_blk_)), kk), const_int(NR));
      one_k(kk, "", [&](ExprRef c) { return add(dst, c); }, body, general, &full_cond);
      if (full_cond) {
        Stmt whole = make_for("c", const_int(NR), {make_local_store("Bp", add(dst, var("c")), elem(add(var("g0_a"), mul(var("c"), const_int(*ca)))))},
                              "pack B: copy a whole panel");
        whole.annot.vectorize = true;
        body.push_back(make_if(full_cond, {whole}, std::move(general)));
      } else {
        body.insert(body.end(), general.begin(), general.end());
      }
      Stmt k_loop = make_for("kk", var("kc"), std::move(body));
      if (win_ && win_->in_place) {  // interior panels are read in place by the micro-kernel
        k_loop = make_if(unary(Op::Not, window_interior(B, *win_, p0)), {std::move(k_loop)});
      } else if (win_) {  // an interior panel: one unguarded NR-wide copy per k, no bounds per k
        Stmt whole = make_for("c", const_int(NR),
                              {make_local_store("Bp", add(dst, var("c")),
                                                elem(add(add(var("wp"), at(B.ks[0], kk)), mul(var("c"), const_int(win_->ca)))))},
                              "pack B: copy an interior panel");
        whole.annot.vectorize = true;
        k_loop = make_if(window_interior(B, *win_, p0),
                         {make_let("wp", DType::I64, add(batch_part(acc.addr), at(B.rows[0], p0))),
                          make_for("kk", var("kc"), {whole}, "pack B: k (interior panel)")},
                         {std::move(k_loop)});
      }
      return make_for("jp", ceil_div(nc, P_.nr), {std::move(k_loop)}, "pack B: NR-wide panels, by runs");
    }
    // integer panels: a group of G k at a time (the block's kc is a multiple of G here),
    // so a whole panel's G rows are copied by one loop whose G stores per column the
    // vectorizer interleaves into whole-vector stores (one k at a time stored each element
    // alone: the stride is G)
    ExprRef kg = var("kg");
    std::vector<Stmt> whole_stores;
    for (int j = 0; j < G_; ++j) {
      std::string px = "k" + std::to_string(j) + "_";
      ExprRef kk = add(mul(kg, const_int(G_)), const_int(j));
      std::vector<Stmt> gen_j;
      ExprRef full_j;
      one_k(kk, px, [&, j](ExprRef c) { return group_panel_index(var("jp"), kg, j, c, NR); }, body, gen_j, &full_j);
      general.insert(general.end(), gen_j.begin(), gen_j.end());
      if (full_j) {
        full_cond = j == 0 ? full_j : logical_and(full_cond, full_j);
        whole_stores.push_back(make_local_store("Bp", group_panel_index(var("jp"), kg, j, var("c"), NR),
                                                elem(add(var(px + "g0_a"), mul(var("c"), const_int(*ca))))));
      }
    }
    if (full_cond && (int)whole_stores.size() == G_) {
      Stmt whole = make_for("c", const_int(NR), std::move(whole_stores), "pack B: copy a whole panel (a group of k)");
      whole.annot.vectorize = true;
      body.push_back(make_if(full_cond, {whole}, std::move(general)));
    } else {
      body.insert(body.end(), general.begin(), general.end());
    }
    return make_for("jp", ceil_div(nc, P_.nr), {make_for("kg", ceil_div(var("kc"), G_), std::move(body))}, "pack B: NR-wide panels, by runs");
  }
};

LoopFunc MatmulLowering::run() {
  const MatmulParams& P = P_;
  NodeRef R = mm_.reduce;
  f_.name = k_.name;
  f_.kernel = k_.id;
  f_.dims = kg_.symbols;
  f_.kind = "matmul";
  int pout = add_param(k_.output, true, "out");
  int pa = add_param(kg_.buffer_of.at(mm_.a.src), false, "a");
  int pb = add_param(kg_.buffer_of.at(mm_.b.src), false, "b");
  for (int b : k_.inputs) add_param(b, false, "in" + std::to_string(f_.buffers.size()));
  bool epilogue = k_.root != R;
  if (R->dtype == DType::I32) {  // int8 contraction: VNNI's u8 × i8 groups of 4, else i16 pairs
    acc_ = DType::I32;
    if ((mm_.sat16 || host_int8_dot_group() == 4) && mm_.a.src->dtype == DType::U8 && mm_.b.src->dtype == DType::I8) {
      G_ = 4, adt_ = DType::U8, bdt_ = DType::I8;
    } else {
      G_ = 2, adt_ = bdt_ = DType::I16;
    }
  }

  SymInt Ms = product(s_, mm_.m_axes), Ns = product(s_, mm_.n_axes), Ks = product(s_, mm_.k_axes);
  SymInt batch = product(s_, mm_.batch_axes);
  ExprRef M = from_sym(Ms), N = from_sym(Ns), K = from_sym(Ks);
  const int NQ = P.nr / P.lanes;

  int threads = std::max(1u, std::thread::hardware_concurrency());
  auto known = [](const SymInt& v) -> int64_t { return v.is_const() ? v.value() : -1; };
  MatmulBlocking bl = matmul_blocking(known(Ms), known(Ns), known(Ks), known(batch), threads, P);
  const int64_t nc_blk = bl.nc, msplit = bl.msplit;
  kc_blk_ = bl.kc;
  mc_blk_ = bl.mc;
  // Tiles that are always whole: every M range (mc) a multiple of MR when M is, every N
  // block (nc) a multiple of NR when N is (MC, the M splits and nc_blk are multiples of
  // them). Their row / column guards are then always true and are left out: less code to
  // compile (no edge variant of the write-back) and unmasked packing loads.
  const bool rows_whole = Ms.is_const() && Ms.value() % P.mr == 0;
  const bool cols_whole = Ns.is_const() && Ns.value() % P.nr == 0;
  ExprRef nJC = ceil_div(N, nc_blk);
  ExprRef msz = msplit == 1 ? M : mul(ceil_div(ceil_div(M, msplit), P.mr), const_int(P.mr));

  // t -> (batch index, jc, ms)
  std::vector<Stmt> tbody, allocs;
  ExprRef rest = var("t");
  auto peel = [&](ExprRef extent, const std::string& name) {
    ExprRef v = binary(Op::Mod, rest, extent);
    tbody.push_back(make_let(name, DType::I64, v));
    rest = binary(Op::IDiv, rest, extent);
    return var(name);
  };
  ExprRef ms = msplit == 1 ? const_int(0) : peel(const_int(msplit), "ms");
  ExprRef jc = peel(nJC, "jc");
  for (size_t i = mm_.batch_axes.size(); i-- > 0;) {
    int d = mm_.batch_axes[i];
    batch_[d] = i == 0 ? rest : peel(from_sym(s_[d]), "b" + std::to_string(d));
  }
  tbody.push_back(make_let("n0", DType::I64, mul(jc, const_int(nc_blk))));
  tbody.push_back(make_let("nc", DType::I64, min_of(const_int(nc_blk), sub(N, var("n0")))));
  tbody.push_back(make_let("ms0", DType::I64, mul(ms, msz)));
  tbody.push_back(make_let("msz", DType::I64, min_of(msz, sub(M, var("ms0")))));
  // B packed once when the program was built (prepack.h), for these very blocks: the
  // micro-kernel reads its panels in place and there is no per-run copy (f32 panels only)
  // (int8: the integer panels of this G, whose element type tells: prepack.h)
  const bool prepacked = k_.packed_b >= 0 && k_.packed_kc == kc_blk_ && k_.packed_nr == P.nr &&
                         kg_.buffers[k_.packed_b].dtype == bdt_;
  const int pbp = prepacked ? add_param(k_.packed_b, false, "bp") : -1;
  if (!prepacked) allocs.push_back(make_alloc("Bp", bdt_, 1, kc_blk_ * nc_blk));
  // A the same (prepack_constant_a): MC blocks start at multiples of MR, so this block's
  // panels are those of all M from m0 / MR
  const int packed_a = packed_a_buffer(kg_, k_);
  const bool prepacked_a = packed_a >= 0 && kg_.buffers[packed_a].shape[2] == SymInt(kc_blk_) &&
                           kg_.buffers[packed_a].shape[3] == SymInt(P.mr) && mc_blk_ % P.mr == 0 &&
                           kg_.buffers[packed_a].dtype == adt_;
  const int pap = prepacked_a ? add_param(packed_a, false, "ap") : -1;
  // A packed once for all the jobs when they split N (see shares_pack), for a convolution
  // (a window or grouped dims: its A is a gather or a many-dim weight copy); a plain
  // matmul's A (activations) is one streaming copy per job that also brings it into the
  // job's L2, left as it is. Not with B prepacked either (a late layer after the swap: the
  // jobs stream their weight panels from memory, and each job's A gather overlapped that;
  // a 512->512 3x3 at 7 x 7 measured 7-16% more CPU time with A shared, task-clock, load 5-6)
  const bool conv_like = !mm_.a.bounds.empty() || !mm_.b.bounds.empty() || mm_.m_axes.size() > 1 ||
                         mm_.n_axes.size() > 1 || mm_.k_axes.size() > 1;
  // And only for N blocks of at most 256 columns (a 16 x 16 layer's two jobs): over wider
  // blocks each job's copy of A is a few percent of its work (unet's 32- and 64-channel
  // layers at 64 x 64 and 128 x 128 measured within noise, ±5%).
  const bool shared_a = !prepacked_a && !prepacked && msplit == 1 && conv_like && nc_blk <= 256 &&
                        shares_pack(Ms, Ks, batch, Ns.is_const() ? ceil_div(Ns.value(), nc_blk) : 0, P.mr);
  if (!prepacked_a && !shared_a) allocs.push_back(make_alloc("Ap", adt_, 1, mc_blk_ * kc_blk_));
  allocs.push_back(make_alloc("tile", acc_, 1, (int64_t)P.mr * P.nr));

  ExprRef kk = var("kk"), n0 = var("n0"), nc = var("nc"), k0 = var("k0"), kc = var("kc");
  // integer panels pack whole groups of G k: a ragged last group is zero (masked loads)
  const bool k_ragged = G_ > 1 && !(Ks.is_const() && Ks.value() % G_ == 0);
  ExprRef kpack = k_ragged ? mul(ceil_div(kc, G_), const_int(G_)) : kc;
  ExprRef kin = k_ragged ? lt(kk, kc) : nullptr;
  ExprRef m0 = var("m0"), mc = var("mc");
  std::vector<Stmt> nfill, kfill, mfill;
  ExprRef ncap = mul(ceil_div(nc, P.nr), const_int(P.nr)), mcap = mul(ceil_div(mc, P.mr), const_int(P.mr));
  // N-side tables hold one entry past the last panel (pack_b_runs reads a run's end there)
  // (a side packed once for all the jobs, shared_a / shared_b, needs no tables in the jobs)
  std::vector<Stmt> bfill_n, bfill_k, ballocs, unused;
  OperandParts B = make_parts(mm_.b, mm_.n_axes, n0, add(ncap, const_int(1)), nc_blk + 1, bfill_n, k0, kc, bfill_k, ballocs);
  OperandParts A = shared_a ? make_parts(mm_.a, mm_.m_axes, m0, mcap, mc_blk_, unused, k0, kc, unused, unused)
                            : make_parts(mm_.a, mm_.m_axes, m0, mcap, mc_blk_, mfill, k0, kc, kfill, allocs);
  // the output: row-major over the reduce's shape
  Affine caff;
  auto cstr = contiguous_strides(R->shape);
  for (int d = 0; d < (int)R->shape.size(); ++d)
    if (R->shape[d] != SymInt(1)) caff.terms.push_back({d, cstr[d]});
  Part crow = make_part(caff, mm_.m_axes, m0, mcap, mc_blk_, mfill, allocs);
  // B read in place (no packing): see reads_b_in_place
  const bool direct = !prepacked && reads_b_in_place(B, Ms, Ks);
  if (direct) {
    allocs.erase(std::remove_if(allocs.begin(), allocs.end(), [](const Stmt& st) { return st.var == "Bp"; }), allocs.end());
    if (!cols_whole) allocs.push_back(make_alloc("Bp", bdt_, 1, kc_blk_ * P.nr));  // the ragged last panel
  }
  // B packed once for all the jobs (they split M and would each pack all of it): see shares_pack
  const bool shared_b = !prepacked && !direct && shares_pack(Ns, Ks, batch, msplit, P.nr);
  if (shared_b)
    allocs.erase(std::remove_if(allocs.begin(), allocs.end(), [](const Stmt& st) { return st.var == "Bp"; }), allocs.end());
  else
    for (auto [from, to] : {std::pair{&bfill_n, &nfill}, {&bfill_k, &kfill}, {&ballocs, &allocs}})
      to->insert(to->end(), from->begin(), from->end());
  Part ccol = make_part(caff, mm_.n_axes, n0, ncap, nc_blk, nfill, allocs);
  // B's interior panels read where they lie (a stride-1 window): see window_in_place
  if (!prepacked && !direct && !shared_b) win_ = window_in_place(B, Ms);

  // pack B (the parts give its addresses: this job's, or a shared pack step's)
  auto make_packb = [&](const OperandParts& Bx) {
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
  auto group_columns = [&](bool guard_cols, const char* note) {
    std::vector<Stmt> stores;
    for (int j = 0; j < G_; ++j) {
      ExprRef kj = add(mul(kg, const_int(G_)), const_int(j));
      ExprRef kin_j = k_ragged ? lt(kj, kc) : nullptr;
      stores.push_back(make_local_store("Bp", group_panel_index(var("jp"), kg, j, var("c"), P.nr),
                                        packed(pb, mm_.b.src, bdt_, address(Bx, col, kj),
                                               logical_and(kin_j, logical_and(guard_cols ? lt(col, nc) : nullptr, in_range(Bx, col, kj))))));
    }
    Stmt f = make_for("c", const_int(P.nr), std::move(stores), note);
    f.annot.vectorize = true;
    return f;
  };
  Stmt packb_g = G_ > 1 ? group_columns(!cols_whole, "pack B: panel column (a group of k)") : Stmt{};
  // row by row of B (k outer): each k reads one run of nc columns, in address order when
  // N is B's contiguous dim; panel by panel would walk down the columns a row stride apart
  // (a page apart for wide B), defeating the prefetchers and the TLB.
  Stmt packb;
  if (G_ > 1) {
    packb = make_for("kg", ceil_div(kpack, G_), {make_for("jp", ceil_div(nc, P.nr), {packb_g}, "pack B: NR-wide panels")}, "pack B: k groups");
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
  if (G_ == 1 || !k_ragged) runs = pack_b_runs(Bx, pb);  // int8: whole groups of G k in every block
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
  };
  Stmt packb = shared_b ? Stmt{} : make_packb(B);
  // pack A (the parts give its addresses: this job's, or a shared pack step's)
  auto make_packa = [&](const OperandParts& Ax) {
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
  Stmt ipbody = rows_whole ? packa_k(false)
                           : make_if(le(add(mul(var("ip"), const_int(P.mr)), const_int(P.mr)), mc), {packa_k(false)}, {packa_k(true)});
  std::vector<Stmt> packa_v{make_for("ip", ceil_div(mc, P.mr), {ipbody}, "pack A: MR-tall panels")};
  rename_loops(packa_v, "kk", "ka");
  rename_loops(packa_v, "r", "ra");
  return std::move(packa_v[0]);
  };
  Stmt packa = shared_a ? Stmt{} : make_packa(A);
  // micro-kernel
  ExprRef last_pc = sub(ceil_div(K, kc_blk_), const_int(1));
  // Output columns a stride apart (a late convolution layer with its sides swapped: the
  // positions are the rows, the channels the columns, 49 floats apart at 7 x 7): the write-back
  // of every K block gathered and scattered each tile element alone (8 inserts and 8 extracts
  // a vector, ~200 instructions a tile: 18 K blocks of a 512-channel 3x3). Instead the partial
  // sums of the K blocks before the last stay in a scratch of this job's tiles, in the
  // registers' layout (MR x NR contiguous: whole-vector loads and stores), the accumulators
  // start from it, and only the last K block writes the output, once, through the epilogue.
  // f32, static M and K, more than one K block. LATHE_MATMUL_TILE_SUMS=0 turns it off (A/B).
  const bool narrow = epilogue && kg_.buffers[k_.output].dtype != acc_;
  bool tile_sums = false;
  if (G_ == 1 && !narrow && Ms.is_const() && Ks.is_const() && ceil_div(Ks.value(), kc_blk_) > 1) {
    std::optional<SymInt> cstride = collapsed(caff, mm_.n_axes);
    const char* e = std::getenv("LATHE_MATMUL_TILE_SUMS");
    // (columns through a table, a group such as batch x positions, are runs of contiguous
    // columns: their write-back is whole vectors already)
    tile_sums = cstride && *cstride != SymInt(1) && !(e && std::string(e) == "0");
  }
  ExprRef tbase;  // this tile's place in Ct: MR-row panel (m0 - ms0) / MR + ir of the job, NR panel jr
  if (tile_sums) {
    const int64_t msz_max = msplit == 1 ? Ms.value() : round_up(ceil_div(Ms.value(), msplit), P.mr);
    allocs.push_back(make_alloc("Ct", DType::F32, 1, round_up(msz_max, P.mr) * nc_blk));
    tbase = mul(add(mul(add(binary(Op::IDiv, sub(m0, var("ms0")), const_int(P.mr)), var("ir")), const_int(nc_blk / P.nr)),
                    var("jr")),
                const_int((int64_t)P.mr * P.nr));
  }
  std::vector<Stmt> micro;
  micro.push_back(make_alloc("acc", acc_, P.lanes, (int64_t)P.mr * NQ, /*registers=*/true));
  auto zero_acc = [&](int rows, std::vector<Stmt>& out) {
    for (int a = 0; a < rows * NQ; ++a)
      out.push_back(make_local_store("acc", const_int(a), broadcast(const_of(0, acc_), P.lanes)));
  };
  auto store_tile = [&](int rows, std::vector<Stmt>& out) {
    for (int a = 0; a < rows * NQ; ++a)
      out.push_back(make_local_store("tile", const_int(a * P.lanes), local_load("acc", acc_, const_int(a), P.lanes)));
  };
  // tile sums (above): from the second K block on the accumulators resume the sums kept in
  // Ct; every K block but the last keeps them there, the last one hands them to the tile
  auto resume_sums = [&](int rows, std::vector<Stmt>& out) {
    if (!tile_sums) return;
    std::vector<Stmt> resume;
    for (int a = 0; a < rows * NQ; ++a)
      resume.push_back(make_local_store("acc", const_int(a), local_load("Ct", DType::F32, add(tbase, const_int(a * P.lanes)), P.lanes)));
    out.push_back(make_if(lt(const_int(0), var("pc")), std::move(resume)));
  };
  auto finish_tile = [&](int rows, std::vector<Stmt>& out) {
    if (!tile_sums) return store_tile(rows, out);
    std::vector<Stmt> keep, last;
    for (int a = 0; a < rows * NQ; ++a)
      keep.push_back(make_local_store("Ct", add(tbase, const_int(a * P.lanes)), local_load("acc", acc_, const_int(a), P.lanes)));
    store_tile(rows, last);
    out.push_back(make_if(lt(var("pc"), last_pc), std::move(keep), std::move(last)));
  };
  // integer: one group of G k per step over `rows` rows of the A panel
  auto int_kbody = [&](int rows) {
  std::vector<Stmt> kbody;
  if (G_ > 1) {  // one group of G k per step: acc[r][q] = dot(acc, A group of row r, B groups of NR/NQ columns)
    ExprRef bb = mul(mul(add(mul(var("jr"), const_int(kc_blk_ / G_)), kk), const_int(P.nr)), const_int(G_));
    ExprRef ab = mul(mul(add(mul(var("ir"), const_int(kc_blk_ / G_)), kk), const_int(P.mr)), const_int(G_));
    // prepacked panels (prepack.h): this job's start in all of them, KC block pc
    if (prepacked)
      bb = add(bb, mul(add(mul(var("pc"), ceil_div(N, P.nr)), binary(Op::IDiv, n0, const_int(P.nr))), const_int(kc_blk_ * P.nr)));
    if (prepacked_a)
      ab = add(ab, mul(add(mul(var("pc"), ceil_div(M, P.mr)), binary(Op::IDiv, m0, const_int(P.mr))), const_int(kc_blk_ * P.mr)));
    for (int q = 0; q < NQ; ++q) {
      ExprRef at_q = add(bb, const_int(q * P.lanes * G_));
      kbody.push_back(make_let("bq" + std::to_string(q), bdt_,
                               prepacked ? load(pbp, bdt_, at_q, nullptr, P.lanes * G_) : local_load("Bp", bdt_, at_q, P.lanes * G_)));
    }
    for (int r = 0; r < rows; ++r) {
      ExprRef at_r = add(ab, const_int(r * G_));
      ExprRef ar = prepacked_a ? load(pap, adt_, at_r, nullptr, G_) : local_load("Ap", adt_, at_r, G_);
      for (int q = 0; q < NQ; ++q) {
        ExprRef cur = local_load("acc", acc_, const_int(r * NQ + q), P.lanes);
        kbody.push_back(make_local_store("acc", const_int(r * NQ + q), dot_acc(cur, ar, var("bq" + std::to_string(q), bdt_, P.lanes * G_), mm_.sat16)));
      }
    }
  }
  return kbody;
  };
  ExprRef bbase = mul(add(mul(var("jr"), const_int(kc_blk_)), kk), const_int(P.nr));
  ExprRef abase = mul(add(mul(var("ir"), const_int(kc_blk_)), kk), const_int(P.mr));
  if (prepacked || shared_b)  // panels of all N: this job's start at n0 / NR, KC block pc
    bbase = add(bbase, mul(add(mul(var("pc"), ceil_div(N, P.nr)), binary(Op::IDiv, n0, const_int(P.nr))),
                           const_int(kc_blk_ * P.nr)));
  if (prepacked_a || shared_a)
    abase = add(abase, mul(add(mul(var("pc"), ceil_div(M, P.mr)), binary(Op::IDiv, m0, const_int(P.mr))),
                           const_int(kc_blk_ * P.mr)));
  // f32: B's NR columns at depth kk from the panel, the prepacked panels, or B itself
  enum class BSrc { Panel, Prepacked, Shared, InPlace, RaggedPanel, Window };
  // (depth `ki`, accumulators from `acc0`, its lets' names ending in `sfx`: a ragged panel's
  // kernel runs several depths per step into separate accumulators, see f32_micro)
  auto f32_kbody = [&](BSrc src, int rows, ExprRef ki = nullptr, int acc0 = 0, const std::string& sfx = "") {
    if (!ki) ki = kk;
    ExprRef bb = substitute(bbase, "kk", ki), ab = substitute(abase, "kk", ki);
    std::vector<Stmt> body;
    for (int q = 0; q < NQ; ++q) {
      ExprRef off = const_int(q * P.lanes), v;
      switch (src) {
        case BSrc::Panel: v = local_load("Bp", DType::F32, add(bb, off), P.lanes); break;
        case BSrc::Prepacked: v = load(pbp, DType::F32, add(bb, off), nullptr, P.lanes); break;
        case BSrc::Shared: v = local_load("Bs", DType::F32, add(bb, off), P.lanes); break;
        case BSrc::InPlace: v = load(pb, DType::F32, address(B, add(mul(var("jr"), const_int(P.nr)), off), ki), nullptr, P.lanes); break;
        case BSrc::RaggedPanel: v = local_load("Bp", DType::F32, add(mul(ki, const_int(P.nr)), off), P.lanes); break;
        case BSrc::Window: v = load(pb, DType::F32, add(add(var("wa"), at(B.ks[0], ki)), off), nullptr, P.lanes); break;
      }
      body.push_back(make_let("bq" + std::to_string(q) + sfx, DType::F32, v));
    }
    for (int r = 0; r < rows; ++r) {
      ExprRef ar = broadcast(prepacked_a ? load(pap, DType::F32, add(ab, const_int(r)))
                             : shared_a  ? local_load("As", DType::F32, add(ab, const_int(r)))
                                         : local_load("Ap", DType::F32, add(ab, const_int(r))),
                             P.lanes);
      for (int q = 0; q < NQ; ++q) {
        ExprRef cur = local_load("acc", DType::F32, const_int(acc0 + r * NQ + q), P.lanes);
        ExprRef bq = var("bq" + std::to_string(q) + sfx, DType::F32, P.lanes);
        body.push_back(make_local_store("acc", const_int(acc0 + r * NQ + q), binary(Op::Add, cur, binary(Op::Mul, ar, bq))));
      }
    }
    return body;
  };
  auto k_loop = [&](std::vector<Stmt> body) {
    Stmt l = make_for("kk", G_ == 1 ? kc : ceil_div(kc, G_), std::move(body), G_ == 1 ? "micro-kernel: k" : "micro-kernel: k groups");
    l.reduces = {"acc"};
    return l;
  };
  // The f32 micro-kernel over `rows` rows of the A panel: zero, the k loop, the tile.
  // With few rows the FMAs of one depth are too few chains to cover the FMA latency (1 row:
  // NR/lanes accumulators, each waiting on the last), so a kernel of fewer than MR rows runs
  // `split` depths per step into their own accumulators (at least 8 chains, within the MR x
  // NR/lanes registers), a remainder loop for the last kc % split depths, then sums them.
  auto f32_micro = [&](int rows) {
    const int split = rows == P.mr ? 1 : std::max(1, std::min(P.mr / rows, static_cast<int>(ceil_div(int64_t(8), int64_t(rows) * NQ))));
    std::vector<Stmt> out;
    zero_acc(rows * split, out);
    resume_sums(rows, out);
    auto loops = [&](BSrc src) {
      if (split == 1) return std::vector<Stmt>{k_loop(f32_kbody(src, rows))};
      std::vector<Stmt> body;
      for (int sp = 0; sp < split; ++sp)
        for (Stmt& st : f32_kbody(src, rows, add(mul(kk, const_int(split)), const_int(sp)), sp * rows * NQ, "_" + std::to_string(sp)))
          body.push_back(std::move(st));
      Stmt main = make_for("kk", binary(Op::IDiv, kc, const_int(split)), std::move(body), "micro-kernel: k, " + std::to_string(split) + " depths a step");
      main.reduces = {"acc"};
      std::vector<Stmt> rest{make_for("kk", binary(Op::Mod, kc, const_int(split)),
                                      f32_kbody(src, rows, add(mul(binary(Op::IDiv, kc, const_int(split)), const_int(split)), kk)),
                                      "micro-kernel: the last depths")};
      rest[0].reduces = {"acc"};
      rename_loops(rest, "kk", "kt");
      std::vector<Stmt> v{std::move(main), std::move(rest[0])};
      for (int sp = 1; sp < split; ++sp)
        for (int a = 0; a < rows * NQ; ++a)
          v.push_back(make_local_store("acc", const_int(a), binary(Op::Add, local_load("acc", DType::F32, const_int(a), P.lanes),
                                                                     local_load("acc", DType::F32, const_int(sp * rows * NQ + a), P.lanes))));
      return v;
    };
    if (win_ && win_->in_place) {  // an interior panel of the window read in place, a border one packed
      std::vector<Stmt> packed_k = loops(BSrc::Panel);
      rename_loops(packed_k, "kk", "kq");
      rename_loops(packed_k, "kt", "kqt");
      out.push_back(make_if(lt(const_int(0), var("wi")), loops(BSrc::Window), std::move(packed_k)));
    } else if (!direct) {
      for (Stmt& st : loops(prepacked ? BSrc::Prepacked : shared_b ? BSrc::Shared : BSrc::Panel)) out.push_back(std::move(st));
    } else if (cols_whole) {
      for (Stmt& st : loops(BSrc::InPlace)) out.push_back(std::move(st));
    } else {  // whole panels read B in place, the ragged last one its zero-padded copy
      std::vector<Stmt> ragged = loops(BSrc::RaggedPanel);
      rename_loops(ragged, "kk", "kq");
      rename_loops(ragged, "kt", "kqt");
      out.push_back(make_if(le(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr)), nc), loops(BSrc::InPlace), std::move(ragged)));
    }
    finish_tile(rows, out);
    return out;
  };
  // The ragged panel: when M is no multiple of MR, one panel (the last of M: every MC block,
  // M split and shared or prepacked panel starts at a multiple of MR) has M % MR rows. It
  // runs a micro-kernel of that many rows instead of MR rows of zero padding (T = 128 tokens
  // on MR 6: the 22nd panel of 2 rows did the work of 6; a single row, M = 1, did 6 times
  // its work). The write-back reads only the panel's valid rows of the tile. Integer
  // contractions (int8 groups of G k) the same.
  // LATHE_MATMUL_RAGGED_ROWS=0 runs it with all MR rows (A/B runs).
  static const bool ragged_kernel = [] {
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_ROWS");
    return !(e && std::string(e) == "0");
  }();
  const int ragged_rows = ragged_kernel && !rows_whole && Ms.is_const() ? static_cast<int>(Ms.value() % P.mr) : 0;
  auto int_micro = [&](int rows) {
    std::vector<Stmt> out;
    zero_acc(rows, out);
    out.push_back(k_loop(int_kbody(rows)));
    store_tile(rows, out);
    return out;
  };
  if (G_ > 1 && ragged_rows == 0) {
    for (Stmt& st : int_micro(P.mr)) micro.push_back(std::move(st));
  } else if (G_ > 1) {
    std::vector<Stmt> few = int_micro(ragged_rows);
    for (Stmt& st : few) {
      std::vector<Stmt> one{std::move(st)};
      rename_loops(one, "kk", "km");
      st = std::move(one[0]);
    }
    micro.push_back(make_if(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc), int_micro(P.mr), std::move(few)));
  } else if (ragged_rows == 0) {
    for (Stmt& st : f32_micro(P.mr)) micro.push_back(std::move(st));
  } else {
    std::vector<Stmt> few = f32_micro(ragged_rows);
    for (Stmt& st : few) {  // its own loop names (the full panel's k loop is kk)
      std::vector<Stmt> one{std::move(st)};
      rename_loops(one, "kk", "km");
      rename_loops(one, "kq", "kqm");
      rename_loops(one, "kt", "kmt");
      rename_loops(one, "kqt", "kqmt");
      st = std::move(one[0]);
    }
    micro.push_back(make_if(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc), f32_micro(P.mr), std::move(few)));
  }

  // write back: C (+)= tile; at the last K block the epilogue computes the kernel's root
  ExprRef mrow = add(mul(var("ir"), const_int(P.mr)), var("r"));
  ExprRef ncol = add(mul(var("jr"), const_int(P.nr)), var("c"));
  // A root narrower than the sum (an int8 contraction requantized to u8 in its write-back):
  // the partial sums of the K blocks before the last go to a scratch of this job's msz × nc
  // outputs (static sizes: fusable_epilogue), the last block's sum straight through the
  // epilogue into the output. With one K block there is no scratch and no condition.
  int64_t kblocks = 0;
  if (narrow) {
    LATHE_CHECK(Ks.is_const() && Ms.is_const(), "matmul epilogue of another dtype with symbolic sizes");
    kblocks = ceil_div(Ks.value(), kc_blk_);
    const int64_t msz_max = msplit == 1 ? Ms.value() : round_up(ceil_div(Ms.value(), msplit), P.mr);
    if (kblocks > 1) allocs.push_back(make_alloc("Cs", acc_, 1, round_up(msz_max, P.mr) * nc_blk));
  }
  int variants = 0;
  auto write_back = [&](ExprRef colpart) {
    ExprRef caddr = add(batch_part(caff), add(at(crow, mrow), colpart));
    ExprRef tv = local_load("tile", acc_, add(mul(var("r"), const_int(P.nr)), var("c")));
    ExprRef saddr = add(mul(add(sub(m0, var("ms0")), mrow), const_int(nc_blk)), ncol);  // narrow: the scratch
    ExprRef prev = narrow ? (kblocks > 1 ? select(lt(const_int(0), var("pc")), local_load("Cs", acc_, saddr), const_of(0, acc_)) : nullptr)
                   : tile_sums ? nullptr  // the tile holds the whole sum (written at the last K block only)
                               : select(lt(const_int(0), var("pc")), load(pout, acc_, caddr), const_of(0, acc_));
    ExprRef sum = prev ? binary(Op::Add, prev, tv) : tv;
    // a full tile writes without per-element conditions (plain vector loads and stores)
    ExprRef full = logical_and(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc),
                               le(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr)), nc));
    auto loops = [&](std::vector<Stmt> body) {
      Stmt c = make_for("c", const_int(P.nr), body, "write back: column");
      c.annot.vectorize = true;
      Stmt rows = make_for("r", const_int(P.mr), {c}, "write back: row");
      if (rows_whole && cols_whole) return rows;
      // an edge tile: loops over its valid rows and columns only (variable extents: a vector
      // body and a scalar remainder), not the whole tile under a per-element condition, which
      // the vectorizer turns into masked loads and stores (vmaskmovps: ~40 cycles per store
      // on the AVX2 Zen 3 host; 64 × 17×33·33×29 ran 3x slower than 18×32·32×32)
      ExprRef rows_left = min_of(const_int(P.mr), sub(mc, mul(var("ir"), const_int(P.mr))));
      ExprRef cols_left = min_of(const_int(P.nr), sub(nc, mul(var("jr"), const_int(P.nr))));
      Stmt edge = make_for("c", cols_left, std::move(body), "write back: column (edge)");
      edge.annot.vectorize = true;
      return make_if(full, {rows}, {make_for("r", rows_left, {edge}, "write back: row (edge)")});
    };
    Stmt plain = narrow ? loops({make_local_store("Cs", saddr, sum)}) : loops({make_store(pout, caddr, sum)});
    if (!epilogue) return tile_sums ? make_if(le(last_pc, var("pc")), {plain}) : plain;
    std::vector<ExprRef> ridx(R->shape.size(), const_int(0));
    auto mco = group_coords(mm_.m_axes, s_, add(m0, mrow)), nco = group_coords(mm_.n_axes, s_, add(n0, ncol));
    for (auto* co : {&mco, &nco, &batch_})
      for (auto& [d, e] : *co) ridx[d] = e;
    std::vector<Stmt> body{make_let("s" + std::to_string(variants), acc_, sum)};
    ExprRef v = build_epilogue(kg_, k_.root, R, ridx, var("s" + std::to_string(variants), acc_), param_of_,
                               body, "e" + std::to_string(variants) + "_");
    ++variants;
    body.push_back(make_store(pout, caddr, v));
    if (narrow && kblocks == 1) return loops(std::move(body));
    if (tile_sums) return make_if(le(last_pc, var("pc")), {loops(std::move(body))});
    return make_if(lt(var("pc"), last_pc), {plain}, {loops(std::move(body))});
  };
  if (ccol.table.empty()) {
    micro.push_back(write_back(at(ccol, ncol)));
  } else {  // a contiguous run of output columns: vector stores; else scattered
    ExprRef first = local_load(ccol.table, DType::I64, mul(var("jr"), const_int(P.nr)));
    ExprRef lastc = local_load(ccol.table, DType::I64, add(mul(var("jr"), const_int(P.nr)), const_int(P.nr - 1)));
    ExprRef contiguous = logical_and(lt(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr - 1)), nc),
                                     logical_and(le(sub(lastc, first), const_int(P.nr - 1)),
                                                 le(const_int(P.nr - 1), sub(lastc, first))));
    Stmt fast = write_back(add(first, var("c")));
    Stmt slow = write_back(at(ccol, ncol));
    micro.push_back(make_if(contiguous, {fast}, {slow}));
  }
  for (Stmt& st : micro) {  // the write-back's loops (after the k loop)
    std::vector<Stmt> one{std::move(st)};
    rename_loops(one, "r", "wr");
    rename_loops(one, "c", "wc");
    st = std::move(one[0]);
  }
  Stmt ir_loop = make_for("ir", ceil_div(mc, P.mr), std::move(micro), "MR panels of A");
  std::vector<Stmt> jrbody;
  if (win_ && win_->in_place) {  // is this panel read in place, and where its row starts
    ExprRef p0 = mul(var("jr"), const_int(P.nr));
    jrbody.push_back(make_let("wi", DType::I64, select(window_interior(B, *win_, p0), const_int(1), const_int(0))));
    jrbody.push_back(make_let("wa", DType::I64, add(batch_part(mm_.b.addr), at(B.rows[0], p0))));
  }
  jrbody.push_back(std::move(ir_loop));
  Stmt jr_loop = make_for("jr", ceil_div(nc, P.nr), std::move(jrbody), "NR panels of B");

  std::vector<Stmt> icbody{make_let("m0", DType::I64, add(var("ms0"), mul(var("ic"), const_int(mc_blk_)))),
                           make_let("mc", DType::I64, min_of(const_int(mc_blk_), sub(add(var("ms0"), var("msz")), m0)))};
  for (auto& st : mfill) icbody.push_back(st);
  if (!prepacked_a && !shared_a) icbody.push_back(packa);
  icbody.push_back(jr_loop);
  Stmt ic_loop = make_for("ic", ceil_div(var("msz"), mc_blk_), std::move(icbody), "MC blocks of M");
  std::vector<Stmt> pcbody{make_let("k0", DType::I64, mul(var("pc"), const_int(kc_blk_))),
                           make_let("kc", DType::I64, min_of(const_int(kc_blk_), sub(K, k0)))};
  for (auto& st : kfill) pcbody.push_back(st);
  if (direct && !cols_whole) {  // the ragged last panel (fewer than NR columns), zero padded
    ExprRef full = binary(Op::IDiv, nc, const_int(P.nr));
    ExprRef colr = add(mul(full, const_int(P.nr)), var("cr"));
    Stmt c = make_for("cr", const_int(P.nr),
                      {make_local_store("Bp", add(mul(var("kr"), const_int(P.nr)), var("cr")),
                                        load(pb, DType::F32, address(B, colr, var("kr")), lt(colr, nc)))},
                      "pack B: the ragged last panel");
    c.annot.vectorize = true;
    pcbody.push_back(make_if(lt(mul(full, const_int(P.nr)), nc), {make_for("kr", kc, {c}, "pack B: k (ragged panel)")}));
  } else if (!prepacked && !direct && !shared_b) {
    pcbody.push_back(packb);
  }
  pcbody.push_back(ic_loop);
  for (auto& st : allocs) tbody.push_back(st);
  for (auto& st : nfill) tbody.push_back(st);
  tbody.push_back(make_for("pc", ceil_div(K, kc_blk_), std::move(pcbody), "KC blocks of K"));
  ExprRef jobs = mul(mul(from_sym(batch), nJC), const_int(msplit));
  Stmt tloop = make_for("t", jobs, std::move(tbody), "jobs: batch × N blocks × M splits");
  tloop.annot.parallel = true;
  if (shared_b) {
    f_.body.push_back(make_alloc("Bs", DType::F32, 1, shared_elems(Ns.value(), Ks.value(), P.nr)));
    f_.body.push_back(shared_pack_loop(mm_.b, mm_.n_axes, Ns.value(), Ks.value(), P.nr, nc_blk / P.nr, threads, "n0", "nc",
                                       "Bp", "Bs", 1, make_packb));
  }
  if (shared_a) {
    f_.body.push_back(make_alloc("As", DType::F32, 1, shared_elems(Ms.value(), Ks.value(), P.mr)));
    f_.body.push_back(shared_pack_loop(mm_.a, mm_.m_axes, Ms.value(), Ks.value(), P.mr, mc_blk_ / P.mr, threads, "m0", "mc",
                                       "Ap", "As", 0, make_packa));
  }
  f_.body.push_back(std::move(tloop));
  f_.schedule_log.push_back("matmul: MR=" + std::to_string(P.mr) + (G_ == 4 ? " int8 u8xi8 dot4" : G_ == 2 ? " int8 i16 dot2" : "") + " NR=" + std::to_string(P.nr) + " KC=" +
                            std::to_string(kc_blk_) + " MC=" + std::to_string(mc_blk_) + " NC=" + std::to_string(nc_blk) +
                            " msplit=" + std::to_string(msplit) + (epilogue ? narrow ? " +epilogue(" + std::string(dtype_name(kg_.buffers[k_.output].dtype)) + ")" : " +epilogue" : "") +
                            (prepacked ? " B prepacked" : "") + (shared_b ? " B packed once" : "") + (shared_a ? " A packed once" : "") + (prepacked_a ? " A prepacked" : "") + (direct ? " B in place" : "") + (win_ ? win_->in_place ? " B interior in place" : " B interior copied whole" : "") +
                            (tile_sums ? " sums in tiles" : "") +
                            (tables_ ? " gather(" + std::to_string(tables_) + " tables)" : ""));
  // K == 0: the loops above write nothing; zero the output first (never with an epilogue)
  if (!(Ks.is_const() && Ks.value() > 0)) {
    LATHE_CHECK(!epilogue, "matmul epilogue with a K that may be 0");
    ExprRef total = from_sym(shape_numel(R->shape));
    Stmt z = make_for("z", total, {make_store(pout, var("z"), const_of(0, acc_))}, "zero (K may be 0)");
    f_.body.insert(f_.body.begin(), make_if(lt(K, const_int(1)), {z}));
  }
  unique_loop_names(f_);   // the write-back variants and gather tables repeat their loops
  return std::move(f_);
}

}  // namespace

LoopFunc lower_matmul_kernel(const KernelGraph& kg, int kernel, const MatmulParams& P) {
  const Kernel& k = kg.kernels.at(kernel);
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  LATHE_CHECK(mm.has_value(), "lower_matmul_kernel on a kernel that is not a matmul");
  orient_matmul(*mm, P);
  LATHE_CHECK(P.nr % P.lanes == 0 && P.mc % P.mr == 0 && P.nc % P.nr == 0, "matmul block sizes must nest");
  return MatmulLowering(kg, k, *mm, P).run();
}

}  // namespace lathe::loop
