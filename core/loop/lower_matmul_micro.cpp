// lower_matmul_micro.cpp — the micro-kernels of the packed matmul lowering (lower_matmul.cpp):
// an MR × NR register tile of accumulators (MR × NR/lanes vectors, unrolled: constant
// indices, so they live in registers) over one depth kk at a time, f32 FMAs or int8 dot
// groups of G k; the ragged A panel's kernel of only its rows; partial sums kept in tiles
// across K blocks for a layer whose output columns lie a stride apart.
#include <algorithm>
#include <cstdlib>

#include "core/loop/lower_matmul_impl.h"

namespace lathe::loop::matmul_lowering {

// Output columns a stride apart (a late convolution layer with its sides swapped: the
// positions are the rows, the channels the columns, 49 floats apart at 7 x 7): the write-back
// of every K block gathered and scattered each tile element alone (8 inserts and 8 extracts
// a vector, ~200 instructions a tile: 18 K blocks of a 512-channel 3x3). Instead the partial
// sums of the K blocks before the last stay in a scratch of this job's tiles, in the
// registers' layout (MR x NR contiguous: whole-vector loads and stores), the accumulators
// start from it, and only the last K block writes the output, once, through the epilogue.
// f32, static M and K, more than one K block. LATHE_MATMUL_TILE_SUMS=0 turns it off (A/B).
void MatmulLowering::plan_tile_sums(std::vector<Stmt>& allocs) {
  const MatmulParams& P = P_;
  narrow_ = epilogue_ && kg_.buffers[k_.output].dtype != acc_;
  tile_sums_ = false;
  if (G_ == 1 && !narrow_ && Ms_.is_const() && Ks_.is_const() && ceil_div(Ks_.value(), kc_blk_) > 1) {
    std::optional<SymInt> cstride = collapsed(caff_, mm_.n_axes);
    const char* e = std::getenv("LATHE_MATMUL_TILE_SUMS");
    // (columns through a table, a group such as batch x positions, are runs of contiguous
    // columns: their write-back is whole vectors already)
    tile_sums_ = cstride && *cstride != SymInt(1) && !(e && std::string(e) == "0");
  }
  // this tile's place in Ct: MR-row panel (m0 - ms0) / MR + ir of the job, NR panel jr
  if (tile_sums_) {
    const int64_t msz_max = msplit_ == 1 ? Ms_.value() : round_up(ceil_div(Ms_.value(), msplit_), P.mr);
    allocs.push_back(make_alloc("Ct", DType::F32, 1, round_up(msz_max, P.mr) * nc_blk_));
    tbase_ = mul(add(mul(add(binary(Op::IDiv, sub(m0_, var("ms0")), const_int(P.mr)), var("ir")), const_int(nc_blk_ / P.nr)),
                     var("jr")),
                 const_int((int64_t)P.mr * P.nr));
  }
}

void MatmulLowering::zero_acc(int rows, std::vector<Stmt>& out) const {
  for (int a = 0; a < rows * NQ_; ++a)
    out.push_back(make_local_store("acc", const_int(a), broadcast(const_of(0, acc_), P_.lanes)));
}

void MatmulLowering::store_tile(int rows, std::vector<Stmt>& out) const {
  for (int a = 0; a < rows * NQ_; ++a)
    out.push_back(make_local_store("tile", const_int(a * P_.lanes), local_load("acc", acc_, const_int(a), P_.lanes)));
}

// tile sums (plan_tile_sums): from the second K block on the accumulators resume the sums
// kept in Ct; every K block but the last keeps them there, the last one hands them to the tile
void MatmulLowering::resume_sums(int rows, std::vector<Stmt>& out) const {
  if (!tile_sums_) return;
  std::vector<Stmt> resume;
  for (int a = 0; a < rows * NQ_; ++a)
    resume.push_back(make_local_store("acc", const_int(a), local_load("Ct", DType::F32, add(tbase_, const_int(a * P_.lanes)), P_.lanes)));
  out.push_back(make_if(lt(const_int(0), var("pc")), std::move(resume)));
}

void MatmulLowering::finish_tile(int rows, std::vector<Stmt>& out) const {
  if (!tile_sums_) return store_tile(rows, out);
  std::vector<Stmt> keep, last;
  for (int a = 0; a < rows * NQ_; ++a)
    keep.push_back(make_local_store("Ct", add(tbase_, const_int(a * P_.lanes)), local_load("acc", acc_, const_int(a), P_.lanes)));
  store_tile(rows, last);
  out.push_back(make_if(lt(var("pc"), last_pc_), std::move(keep), std::move(last)));
}

// integer: one group of G k per step over `rows` rows of the A panel
std::vector<Stmt> MatmulLowering::int_kbody(int rows) const {
  const MatmulParams& P = P_;
  const ExprRef& kk = kk_;
  std::vector<Stmt> kbody;
  if (G_ > 1) {  // one group of G k per step: acc[r][q] = dot(acc, A group of row r, B groups of NR/NQ columns)
    ExprRef bb = mul(mul(add(mul(var("jr"), const_int(kc_blk_ / G_)), kk), const_int(P.nr)), const_int(G_));
    ExprRef ab = mul(mul(add(mul(var("ir"), const_int(kc_blk_ / G_)), kk), const_int(P.mr)), const_int(G_));
    // prepacked panels (prepack.h): this job's start in all of them, KC block pc
    if (prepacked_)
      bb = add(bb, mul(add(mul(var("pc"), ceil_div(N_, P.nr)), binary(Op::IDiv, n0_, const_int(P.nr))), const_int(kc_blk_ * P.nr)));
    if (prepacked_a_)
      ab = add(ab, mul(add(mul(var("pc"), ceil_div(M_, P.mr)), binary(Op::IDiv, m0_, const_int(P.mr))), const_int(kc_blk_ * P.mr)));
    for (int q = 0; q < NQ_; ++q) {
      ExprRef at_q = add(bb, const_int(q * P.lanes * G_));
      kbody.push_back(make_let("bq" + std::to_string(q), bdt_,
                               prepacked_ ? load(pbp_, bdt_, at_q, nullptr, P.lanes * G_) : local_load("Bp", bdt_, at_q, P.lanes * G_)));
    }
    for (int r = 0; r < rows; ++r) {
      ExprRef at_r = add(ab, const_int(r * G_));
      ExprRef ar = prepacked_a_ ? load(pap_, adt_, at_r, nullptr, G_) : local_load("Ap", adt_, at_r, G_);
      for (int q = 0; q < NQ_; ++q) {
        ExprRef cur = local_load("acc", acc_, const_int(r * NQ_ + q), P.lanes);
        kbody.push_back(make_local_store("acc", const_int(r * NQ_ + q), dot_acc(cur, ar, var("bq" + std::to_string(q), bdt_, P.lanes * G_), mm_.sat16)));
      }
    }
  }
  return kbody;
}

// f32: one depth of the tile. (Depth `ki`, accumulators from `acc0`, its lets' names ending
// in `sfx`: a ragged panel's kernel runs several depths per step into separate accumulators,
// see f32_micro.)
std::vector<Stmt> MatmulLowering::f32_kbody(BSrc src, int rows, ExprRef ki, int acc0, const std::string& sfx, int qn) const {
  const MatmulParams& P = P_;
  if (!ki) ki = kk_;
  if (qn <= 0) qn = NQ_;  // (the ragged last panel's kernel reads and updates only its first qn vectors)
  ExprRef bb = substitute(bbase_, "kk", ki), ab = substitute(abase_, "kk", ki);
  std::vector<Stmt> body;
  for (int q = 0; q < qn; ++q) {
    ExprRef off = const_int(q * P.lanes), v;
    switch (src) {
      case BSrc::Panel: v = local_load("Bp", DType::F32, add(bb, off), P.lanes); break;
      case BSrc::Prepacked: v = load(pbp_, DType::F32, add(bb, off), nullptr, P.lanes); break;
      case BSrc::Shared: v = local_load("Bs", DType::F32, add(bb, off), P.lanes); break;
      case BSrc::InPlace: v = load(pb_, DType::F32, address(B_, add(mul(var("jr"), const_int(P.nr)), off), ki), nullptr, P.lanes); break;
      case BSrc::RaggedPanel: v = local_load("Bp", DType::F32, add(mul(ki, const_int(P.nr)), off), P.lanes); break;
      case BSrc::Window: v = load(pb_, DType::F32, add(add(var("wa"), at(B_.ks[0], ki)), off), nullptr, P.lanes); break;
    }
    body.push_back(make_let("bq" + std::to_string(q) + sfx, DType::F32, v));
  }
  // the next panel's line at this depth toward the cache (see prefetch_next_b)
  if (prefetch_b_ && src == BSrc::Prepacked)
    for (int l = 0; l < pf_lines_; ++l)  // (each 64-byte line of a depth's row where no spread covers it)
      body.push_back(make_prefetch(pbp_, add(add(substitute(pfbase_, "kk", ki), var("pfb")), const_int(l * 16)), /*write=*/false));
  for (int r = 0; r < rows; ++r) {
    ExprRef ar = broadcast(prepacked_a_ ? load(pap_, DType::F32, add(ab, const_int(r)))
                           : shared_a_  ? local_load("As", DType::F32, add(ab, const_int(r)))
                           : direct_a_  ? load(pa_, DType::F32, address(A_, add(mul(var("ir"), const_int(P.mr)), const_int(r)), ki))
                                        : local_load("Ap", DType::F32, add(ab, const_int(r))),
                           P.lanes);
    for (int q = 0; q < qn; ++q) {
      ExprRef cur = local_load("acc", DType::F32, const_int(acc0 + r * NQ_ + q), P.lanes);
      ExprRef bq = var("bq" + std::to_string(q) + sfx, DType::F32, P.lanes);
      body.push_back(make_local_store("acc", const_int(acc0 + r * NQ_ + q), binary(Op::Add, cur, binary(Op::Mul, ar, bq))));
    }
  }
  return body;
}

Stmt MatmulLowering::k_loop(std::vector<Stmt> body) const {
  Stmt l = make_for("kk", G_ == 1 ? kc_ : ceil_div(kc_, G_), std::move(body), G_ == 1 ? "micro-kernel: k" : "micro-kernel: k groups");
  l.reduces = {"acc"};
  return l;
}

// The f32 micro-kernel over `rows` rows of the A panel: zero, the k loop, the tile.
// With few rows the FMAs of one depth are too few chains to cover the FMA latency (1 row:
// NR/lanes accumulators, each waiting on the last), so a kernel of fewer than MR rows runs
// `split` depths per step into their own accumulators (at least 8 chains, within the MR x
// NR/lanes registers), a remainder loop for the last kc % split depths, then sums them.
std::vector<Stmt> MatmulLowering::f32_micro(int rows) const {
  const MatmulParams& P = P_;
  const ExprRef &kk = kk_, &kc = kc_, &nc = nc_;
  const int NQ = NQ_;
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
  } else if (!direct_) {
    for (Stmt& st : loops(prepacked_ ? BSrc::Prepacked : shared_b_ ? BSrc::Shared : BSrc::Panel)) out.push_back(std::move(st));
  } else if (cols_whole_) {
    for (Stmt& st : loops(BSrc::InPlace)) out.push_back(std::move(st));
  } else {  // whole panels read B in place, the ragged last one its zero-padded copy
    std::vector<Stmt> ragged = loops(BSrc::RaggedPanel);
    rename_loops(ragged, "kk", "kq");
    rename_loops(ragged, "kt", "kqt");
    out.push_back(make_if(le(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr)), nc), loops(BSrc::InPlace), std::move(ragged)));
  }
  finish_tile(rows, out);
  return out;
}

// The last NR panel of B when N is no multiple of NR and its N % NR columns fill qn < NQ
// vectors (a 14 x 14 map's 196 positions: 12 panels of 16 and one of 4, ~6% of the layer's
// FMAs on zero padding; 49, 100, 1000 columns alike): its kernel loads and multiplies only
// those qn vectors. Alone its MR x qn accumulators are too few chains for the FMA latency
// (6 on MR 6, qn 1: 8 wanted), so each step runs NQ / qn depths, depth sp into the tile's
// unused vectors sp * qn.. (no new registers), summed into the first qn after the loop.
// The columns past qn are never written back (they lie past N). MR rows, f32, B from a
// packed panel. LATHE_MATMUL_RAGGED_COLS=0 runs the panel with all NQ vectors (A/B runs).
std::vector<Stmt> MatmulLowering::f32_micro_cols(int qn) const {
  const MatmulParams& P = P_;
  const ExprRef &kk = kk_, &kc = kc_;
  const int NQ = NQ_, rows = P.mr, split = NQ / qn;
  // (B read in place, direct_: the ragged last panel is the zero-padded copy in Bp)
  const BSrc src = direct_ ? BSrc::RaggedPanel : prepacked_ ? BSrc::Prepacked : shared_b_ ? BSrc::Shared : BSrc::Panel;
  std::vector<Stmt> out;
  zero_acc(rows, out);
  resume_sums(rows, out);
  if (tile_sums_)  // the depth accumulators start at zero, not at the partial sums resumed there
    for (int sp = 1; sp < split; ++sp)
      for (int r = 0; r < rows; ++r)
        for (int q = 0; q < qn; ++q)
          out.push_back(make_local_store("acc", const_int(r * NQ + sp * qn + q), broadcast(const_of(0, DType::F32), P.lanes)));
  std::vector<Stmt> body;
  for (int sp = 0; sp < split; ++sp)
    for (Stmt& st : f32_kbody(src, rows, add(mul(kk, const_int(split)), const_int(sp)), sp * qn, "_" + std::to_string(sp), qn))
      body.push_back(std::move(st));
  Stmt main = make_for("kk", binary(Op::IDiv, kc, const_int(split)), std::move(body),
                       "micro-kernel: k, the ragged last panel, " + std::to_string(split) + " depths a step");
  main.reduces = {"acc"};
  std::vector<Stmt> rest{make_for("kk", binary(Op::Mod, kc, const_int(split)),
                                  f32_kbody(src, rows, add(mul(binary(Op::IDiv, kc, const_int(split)), const_int(split)), kk), 0, "", qn),
                                  "micro-kernel: the ragged last panel's last depths")};
  rest[0].reduces = {"acc"};
  rename_loops(rest, "kk", "knt");
  std::vector<Stmt> loops{std::move(main)};
  rename_loops(loops, "kk", "kn");
  out.push_back(std::move(loops[0]));
  out.push_back(std::move(rest[0]));
  for (int sp = 1; sp < split; ++sp)
    for (int r = 0; r < rows; ++r)
      for (int q = 0; q < qn; ++q) {
        const int a = r * NQ + q, b = r * NQ + sp * qn + q;
        out.push_back(make_local_store("acc", const_int(a), binary(Op::Add, local_load("acc", DType::F32, const_int(a), P.lanes),
                                                                   local_load("acc", DType::F32, const_int(b), P.lanes))));
      }
  finish_tile(rows, out);
  return out;
}

// B read in place (reads_b_in_place: a 1x1 convolution's input) copies its ragged last panel
// into Bp, zero padded; its kernel is the ragged-columns one too (f32_micro_cols), not the
// whole tile's: since B is read in place for up to the M block of rows (ResNet-50's and
// MobileNetV2's 96-256-channel 1x1 layers at 14 x 14: 196 positions, the last of 7 panels 4
// columns) the last panel is light again, as the N blocks are weighed (expected_ragged_q).
// LATHE_MATMUL_RAGGED_COLS_IN_PLACE=0: the whole tile (A/B runs).
bool ragged_cols_in_place() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_COLS_IN_PLACE");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// The kernel of a panel of MR rows: with a ragged last B panel (ragged_cols_q_) an if between
// that panel's kernel and the whole one, or one of them (cols_only_: the driver puts the if
// around the whole tile, write-back included; see MatmulLowering::run).
std::vector<Stmt> MatmulLowering::f32_full_rows() const {
  if (ragged_cols_q_ == 0 || cols_only_ == 2) return f32_micro(P_.mr);
  if (cols_only_ == 1) return f32_micro_cols(ragged_cols_q_);
  Stmt pick = make_if(lt(nc_, add(mul(var("jr"), const_int(P_.nr)), const_int(P_.nr))), f32_micro_cols(ragged_cols_q_), f32_micro(P_.mr));
  return {std::move(pick)};
}

std::vector<Stmt> MatmulLowering::int_micro(int rows) const {
  std::vector<Stmt> out;
  zero_acc(rows, out);
  out.push_back(k_loop(int_kbody(rows)));
  store_tile(rows, out);
  return out;
}

// The output tile's rows (its first and last column: 64 bytes may straddle two lines), to be
// brought toward L1 while the k loop runs: the write-back read each K block's C tile from L3
// (a job's C, 1024 x 512 floats, outlives L2 between K blocks) and stalled on it, ~12% of
// the 1024^3 GEMM's samples (perf, cpu-clock, one thread) on the loads after the k loop.
// Prefetch statements for a write at locality 3 (llvm.prefetch / __builtin_prefetch: prefetchw
// on x86 with PRFCHW). Full tiles only (the others' rows may lie past M).
// LATHE_MATMUL_PREFETCH_C=0 leaves them out (A/B runs).
// An epilogue's inputs of the output's shape (a residual: ResNet's skip tensor, read at the
// tile's own offsets) are prefetched alike (for reading), on the integer GEMMs
// (whose epilogue is the requantization): a 5 x 16 tile's rows lie a row of the feature map
// apart (12.5 KB for 56 x 56 floats), which the hardware prefetchers did not follow; resnet50_qdq's
// fused residual kernel over 56 x 56 took 2.2 ms where the GEMM, the add and the quantize
// apart took 1.5. LATHE_MATMUL_PREFETCH_EPILOGUE=0 leaves them out (A/B runs).
Stmt MatmulLowering::prefetch_tile() const {
  const MatmulParams& P = P_;
  static const bool prefetch_epi = [] {
    const char* e = std::getenv("LATHE_MATMUL_PREFETCH_EPILOGUE");
    return !(e && std::string(e) == "0");
  }();
  auto squeezed = [](const Shape& s) {
    Shape r;
    for (auto& d : s)
      if (!(d.is_const() && d.value() == 1)) r.push_back(d);
    return r;
  };
  std::vector<int> same;  // the epilogue's inputs laid out as the output
  if (prefetch_epi && epilogue_ && G_ > 1) {
    const Shape os = squeezed(kg_.buffers[k_.output].shape);
    for (int b : k_.inputs) {
      auto it = param_of_.find(b);
      if (it == param_of_.end() || it->second == pa_ || it->second == pb_) continue;
      if (squeezed(kg_.buffers[b].shape) == os) same.push_back(b);
    }
  }
  std::vector<Stmt> pf;
  for (int r = 0; r < P.mr; ++r)
    for (int c : {0, P.nr - 1}) {
      ExprRef row = add(mul(var("ir"), const_int(P.mr)), const_int(r)), col = add(mul(var("jr"), const_int(P.nr)), const_int(c));
      ExprRef addr = add(batch_part(caff_), add(at(crow_, row), at(ccol_, col)));
      pf.push_back(make_prefetch(pout_, addr, /*write=*/true));
      for (int b : same) pf.push_back(make_prefetch(param_of_.at(b), addr, /*write=*/false));
    }
  ExprRef full = logical_and(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc_),
                             le(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr)), nc_));
  return make_if(full, std::move(pf));
}

// The next B panel toward L1 while this one is read. B packed once for the run (prepacked
// weights, streamed from memory) or once for all the jobs (a shared pack, from L3) reaches
// the micro-kernel of the first MR panel of A cold: one 64-byte line a depth, ~13 bytes a
// cycle, more than one core draws from memory, so that kernel stalls while the later MR
// panels find the panel in L1. With few rows of A (ResNet-50's 7 x 7 layers: 49 positions
// on the A side, ten micro-kernels a panel, 9.4 MB of 3 x 3 weights read once) that first
// kernel was a tenth of the work at a fraction of the speed. So each depth's step also
// prefetches the same depth of the next panel (the panels lie in order, [pc][panel][kk][NR]):
// the first MR panel starts its fetch, the others find it in flight or present (a hit costs
// one load slot of the step's eight). `pfb` is the next panel's offset, 0 for the last panel
// of the buffer (the prefetch stays inside it). f32, convolutions (a window or grouped dims)
// and plain matmuls (a transformer's projections: weights packed at build for few rows,
// streamed from memory every run; BERT-base's and GPT-2's first micro-kernel of each panel
// stalled the same way). LATHE_MATMUL_PREFETCH_B=0: none; =conv: the old default (convolutions
// only, one line a depth, spread only in k x k windows); =all: that and plain matmuls as one
// burst of one line a depth (the old opt-in) (A/B runs).
void MatmulLowering::prefetch_next_b(std::vector<Stmt>& micro) {
  static const std::string mode = [] {
    const char* e = std::getenv("LATHE_MATMUL_PREFETCH_B");
    return std::string(e && *e ? e : "1");
  }();
  const bool conv_like = !mm_.a.bounds.empty() || !mm_.b.bounds.empty() || mm_.m_axes.size() > 1 ||
                         mm_.n_axes.size() > 1 || mm_.k_axes.size() > 1;
  prefetch_b_ = G_ == 1 && prepacked_ && mode != "0" && (conv_like || mode != "conv");
  pf_lines_ = 1, pf_spread_ = 1, pf_line_ = nullptr;
  if (!prefetch_b_) return;
  const MatmulParams& P = P_;
  ExprRef panels = ceil_div(N_, P.nr);
  ExprRef panel = add(add(mul(var("pc"), panels), binary(Op::IDiv, n0_, const_int(P.nr))), var("jr"));
  ExprRef total = mul(ceil_div(K_, kc_blk_), panels);
  micro.push_back(make_let("pfb", DType::I64, select(lt(add(panel, const_int(1)), total), const_int(kc_blk_ * P.nr), const_int(0))));
  // Spread: the panel feeds D = ceil(min(MC, M / M splits) / MR) micro-kernels in a row (jr
  // outer, ir inner), and the first of them alone used to issue all KC line prefetches of the
  // next panel (256 lines in ~1300 cycles: more misses in flight than a core holds, so that
  // kernel stalled on DRAM, worse with two threads streaming). Now micro-kernel ir at depth
  // kk prefetches line min((ir KC + kk) L / D, KC L - 1) of the next panel, L = NR / 16 the
  // 64-byte lines of a depth's row (1 on AVX2; 2 on AVX-512's 32 columns, where one line a
  // depth fetched half the panel): kernel ir covers lines [ir KC L / D, (ir + 1) KC L / D),
  // each issued about D / L times in a row (merged in flight), the stream spread over the
  // panel's whole use. Fewer kernels a panel than lines (D < L: one MR panel of rows) issue
  // all L lines of each depth. LATHE_MATMUL_PREFETCH_B_SPREAD=0: the one-kernel burst (A/B runs).
  static const bool spread = [] {
    const char* e = std::getenv("LATHE_MATMUL_PREFETCH_B_SPREAD");
    return !(e && std::string(e) == "0");
  }();
  int64_t rows = mc_blk_;  // a job's rows: M over its M splits, at most one MC block
  if (Ms_.is_const()) rows = std::min<int64_t>(rows, (Ms_.value() + msplit_ - 1) / msplit_);
  const int64_t d = std::max<int64_t>(1, (rows + P.mr - 1) / P.mr);
  if (mode == "conv" || mode == "all") {
    // the old rule: one line a depth, spread in dense k x k windows only (k > 1: the
    // reduction runs over channels and taps), a burst elsewhere
    if (spread && conv_like && mm_.k_axes.size() > 1) pf_spread_ = static_cast<int>(d);
    return;
  }
  const int lines = std::max(1, P.nr * 4 / 64);
  if (spread && d >= lines) {
    pf_spread_ = static_cast<int>(d);
    ExprRef line = binary(Op::IDiv, mul(add(mul(var("ir"), const_int(kc_blk_)), kk_), const_int(lines)), const_int(d));
    pf_line_ = min_of(line, const_int(kc_blk_ * lines - 1));
  } else {
    pf_lines_ = lines;
  }
}

// The micro-kernel of one MR panel ir of A and NR panel jr of B: the accumulators, and the
// kernel of MR rows, or for the ragged panel one of its rows.
// The ragged panel: when M is no multiple of MR, one panel (the last of M: every MC block,
// M split and shared or prepacked panel starts at a multiple of MR) has M % MR rows. It
// runs a micro-kernel of that many rows instead of MR rows of zero padding (T = 128 tokens
// on MR 6: the 22nd panel of 2 rows did the work of 6; a single row, M = 1, did 6 times
// its work). The write-back reads only the panel's valid rows of the tile. Integer
// contractions (int8 groups of G k) the same.
// LATHE_MATMUL_RAGGED_ROWS=0 runs it with all MR rows (A/B runs).
std::vector<Stmt> MatmulLowering::micro_kernel() {
  const MatmulParams& P = P_;
  std::vector<Stmt> micro;
  micro.push_back(make_alloc("acc", acc_, P.lanes, (int64_t)P.mr * NQ_, /*registers=*/true));
  static const bool prefetch_c = [] {
    const char* e = std::getenv("LATHE_MATMUL_PREFETCH_C");
    return !(e && std::string(e) == "0");
  }();
  if (prefetch_c) micro.push_back(prefetch_tile());
  prefetch_next_b(micro);
  bbase_ = mul(add(mul(var("jr"), const_int(kc_blk_)), kk_), const_int(P.nr));
  abase_ = mul(add(mul(var("ir"), const_int(kc_blk_)), kk_), const_int(P.mr));
  if (prepacked_ || shared_b_)  // panels of all N: this job's start at n0 / NR, KC block pc
    bbase_ = add(bbase_, mul(add(mul(var("pc"), ceil_div(N_, P.nr)), binary(Op::IDiv, n0_, const_int(P.nr))),
                             const_int(kc_blk_ * P.nr)));
  if (prepacked_ && b_entry_) bbase_ = add(bbase_, b_entry_);
  pfbase_ = bbase_;
  if (prefetch_b_ && pf_line_) {  // the panel's start (bbase_ at depth 0) and a line of 16 floats
    pfbase_ = add(substitute(bbase_, "kk", const_int(0)), mul(pf_line_, const_int(16)));
  } else if (prefetch_b_ && pf_spread_ > 1) {
    ExprRef line = binary(Op::IDiv, add(mul(var("ir"), const_int(kc_blk_)), kk_), const_int(pf_spread_));
    pfbase_ = substitute(bbase_, "kk", min_of(line, const_int(kc_blk_ - 1)));
  }
  if (prepacked_a_ || shared_a_)
    abase_ = add(abase_, mul(add(mul(var("pc"), ceil_div(M_, P.mr)), binary(Op::IDiv, m0_, const_int(P.mr))),
                             const_int(kc_blk_ * P.mr)));
  if (prepacked_a_ && a_entry_) abase_ = add(abase_, a_entry_);
  static const bool ragged_kernel = [] {
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_ROWS");
    return !(e && std::string(e) == "0");
  }();
  ragged_rows_ = ragged_kernel && !rows_whole_ && Ms_.is_const() ? static_cast<int>(Ms_.value() % P.mr) : 0;
  static const bool ragged_cols = [] {
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_COLS");
    return !(e && std::string(e) == "0");
  }();
  ragged_cols_q_ = 0;  // see f32_micro_cols
  if (ragged_cols && G_ == 1 && NQ_ > 1 && Ns_.is_const() && (!direct_ || ragged_cols_in_place()) && !(win_ && win_->in_place)) {
    const int64_t left = Ns_.value() % P.nr;
    const int qn = static_cast<int>(ceil_div(left, int64_t(P.lanes)));
    if (left > 0 && qn < NQ_ && NQ_ % qn == 0) ragged_cols_q_ = qn;
  }
  const int ragged_rows = ragged_rows_;
  if (G_ > 1 && ragged_rows == 0) {
    for (Stmt& st : int_micro(P.mr)) micro.push_back(std::move(st));
  } else if (G_ > 1) {
    std::vector<Stmt> few = int_micro(ragged_rows);
    for (Stmt& st : few) {
      std::vector<Stmt> one{std::move(st)};
      rename_loops(one, "kk", "km");
      st = std::move(one[0]);
    }
    micro.push_back(make_if(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc_), int_micro(P.mr), std::move(few)));
  } else if (ragged_rows == 0) {
    for (Stmt& st : f32_full_rows()) micro.push_back(std::move(st));
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
    micro.push_back(make_if(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc_), f32_full_rows(), std::move(few)));
  }
  return micro;
}

}  // namespace lathe::loop::matmul_lowering
