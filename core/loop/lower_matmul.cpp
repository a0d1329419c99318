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
//
// This file: operand addressing, the driver (sizes, blocks, which side is packed where, the
// job nest) and the write-back. Packing: lower_matmul_pack.cpp; the micro-kernels:
// lower_matmul_micro.cpp; the class: lower_matmul_impl.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/lower.h"
#include "core/loop/lower_matmul_impl.h"
#include "core/loop/matmul_epilogue.h"
#include "core/loop/prepack.h"

namespace lathe::loop {
namespace matmul_lowering {

int MatmulLowering::add_param(int buffer, bool written, const std::string& name) {
  auto it = param_of_.find(buffer);
  if (it != param_of_.end()) return it->second;
  f_.buffers.push_back({buffer, name, kg_.buffers[buffer].dtype, written});
  return param_of_[buffer] = (int)f_.buffers.size() - 1;
}

std::optional<SymInt> MatmulLowering::collapsed(const Affine& a, const std::vector<int>& g) const {
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

// LATHE_MATMUL_PACK_PER_PANEL=1 packs B per panel where one MC block holds the job's rows
// (see run()); unset / 0 packs each NC block up front, the default
static bool pack_per_panel_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_MATMUL_PACK_PER_PANEL");
    return e && std::string(e) == "1";
  }();
  return on;
}

bool MatmulLowering::uses_any(const Affine& a, const std::vector<int>& g) const {
  for (int d : g)
    if (a.uses(d)) return true;
  return false;
}

ExprRef MatmulLowering::part(const Affine& a, const std::vector<int>& g, ExprRef f) const {
  if (!uses_any(a, g)) return const_int(0);
  if (auto c = collapsed(a, g)) return mul(f, from_sym(*c));
  return affine_part(a, group_coords(g, s_, f));
}

MatmulLowering::Part MatmulLowering::make_part(const Affine& a, const std::vector<int>& g, ExprRef base, ExprRef count,
                                               int64_t cap, std::vector<Stmt>& fill, std::vector<Stmt>& allocs) {
  Part p{"", &a, &g, base};
  if (!uses_any(a, g) || g.size() == 1 || collapsed(a, g)) return p;
  p.table = "tab" + std::to_string(tables_++);
  allocs.push_back(make_alloc(p.table, DType::I64, 1, cap));
  fill.push_back(make_for("i", count, {make_local_store(p.table, var("i"), part(a, g, add(base, var("i"))))},
                          "table of a gathered group's offsets"));
  return p;
}

ExprRef MatmulLowering::at(const Part& p, ExprRef local) const {
  if (!p.table.empty()) return local_load(p.table, DType::I64, local);
  return part(*p.a, *p.g, add(p.base, local));
}

MatmulLowering::OperandParts MatmulLowering::make_parts(const OperandAccess& acc, const std::vector<int>& rows, ExprRef rbase,
                                                        ExprRef rcount, int64_t rcap, std::vector<Stmt>& rfill, ExprRef kbase,
                                                        ExprRef kcount, std::vector<Stmt>& kfill, std::vector<Stmt>& allocs) {
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

ExprRef MatmulLowering::address(const OperandParts& o, ExprRef row, ExprRef kk) const {
  return add(batch_part(o.acc->addr), add(at(o.rows[0], row), at(o.ks[0], kk)));
}

ExprRef MatmulLowering::in_range(const OperandParts& o, ExprRef row, ExprRef kk) const {
  ExprRef m;
  for (size_t j = 0; j < o.acc->bounds.size(); ++j) {
    auto& b = o.acc->bounds[j];
    ExprRef c = add(batch_part(b.coord), add(at(o.rows[j + 1], row), at(o.ks[j + 1], kk)));
    m = logical_and(m, logical_and(le(from_sym(b.lo), c), lt(c, from_sym(b.hi))));
  }
  return m;
}

ExprRef MatmulLowering::panel_index(ExprRef p, ExprRef kk, ExprRef c, int64_t width) const {
  if (G_ == 1) return add(mul(add(mul(p, const_int(kc_blk_)), kk), const_int(width)), c);
  ExprRef g = binary(Op::IDiv, kk, const_int(G_)), j = binary(Op::Mod, kk, const_int(G_));
  return add(mul(add(mul(add(mul(p, const_int(kc_blk_ / G_)), g), const_int(width)), c), const_int(G_)), j);
}

ExprRef MatmulLowering::group_panel_index(ExprRef p, ExprRef kg, int j, ExprRef c, int64_t width) const {
  return add(mul(add(mul(add(mul(p, const_int(kc_blk_ / G_)), kg), const_int(width)), c), const_int(G_)), const_int(j));
}

ExprRef MatmulLowering::packed(int param, NodeRef src, DType to, ExprRef addr, ExprRef mask) const {
  if (G_ == 1) return load(param, DType::F32, addr, mask);
  return cast(load(param, src->dtype, addr, mask), to);
}

std::optional<int64_t> MatmulLowering::coef_of(const Affine& a, int d) {
  SymInt c = 0;
  for (auto& [x, k] : a.terms)
    if (x == d) c = c + k;
  if (!c.is_const() || c.value() < 0) return std::nullopt;
  return c.value();
}

// The ragged last B panel's vectors (micro_kernel's ragged_cols_q_) as far as they are known
// before B's parts are cut, for the N blocks' weights (matmul_blocking's ragged_q): f32, N
// known and no multiple of NR, B neither a window (read in place, or its panels copied
// whole) nor possibly read in place (reads_b_in_place's sizes: its ragged panel runs the
// whole tile). 0 where unsure (the last panel weighs as a whole one, as before).
// mobilenet_v2's 96-row 1x1 projections at 14 x 14 (196 positions, six panels and one of 4
// columns): 4 + 2.5 panels a job (two threads' busy time 84 : 54 us), now 3 + 3.5.
// LATHE_MATMUL_RAGGED_WEIGH=0 weighs it whole (A/B runs).
int MatmulLowering::expected_ragged_q() const {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_WEIGH");
    const char* c = std::getenv("LATHE_MATMUL_RAGGED_COLS");
    return !(e && std::string(e) == "0") && !(c && std::string(c) == "0");
  }();
  const MatmulParams& P = P_;
  if (!on || G_ != 1 || NQ_ <= 1 || !Ns_.is_const() || !mm_.b.bounds.empty() || P.b_in_place > 0) return 0;
  const bool conv_like = mm_.n_axes.size() > 1 || mm_.k_axes.size() > 1;
  if (P.b_in_place < 0 && conv_like && (!Ms_.is_const() || Ms_.value() <= b_in_place_max_m(P)) && !ragged_cols_in_place()) return 0;
  const int64_t left = Ns_.value() % P.nr;
  const int qn = static_cast<int>((left + P.lanes - 1) / P.lanes);
  return left > 0 && qn < NQ_ && NQ_ % qn == 0 ? qn : 0;
}

void MatmulLowering::setup() {
  const MatmulParams& P = P_;
  R_ = mm_.reduce;
  f_.name = k_.name;
  f_.kernel = k_.id;
  f_.dims = kg_.symbols;
  f_.kind = "matmul";
  pout_ = add_param(k_.output, true, "out");
  pa_ = add_param(kg_.buffer_of.at(mm_.a.src), false, "a");
  pb_ = add_param(kg_.buffer_of.at(mm_.b.src), false, "b");
  for (int b : k_.inputs) add_param(b, false, "in" + std::to_string(f_.buffers.size()));
  epilogue_ = k_.root != R_;
  if (R_->dtype == DType::I32) {  // int8 contraction: VNNI's u8 × i8 groups of 4, else i16 pairs
    acc_ = DType::I32;
    if ((mm_.sat16 || host_int8_dot_group() == 4) && mm_.a.src->dtype == DType::U8 && mm_.b.src->dtype == DType::I8) {
      G_ = 4, adt_ = DType::U8, bdt_ = DType::I8;
    } else if ((mm_.sat16 || vnni_i8_u8()) && mm_.a.src->dtype == DType::I8 && mm_.b.src->dtype == DType::U8) {
      G_ = 4, adt_ = DType::I8, bdt_ = DType::U8;  // a conv: i8 weights broadcast, u8 columns
    } else {
      G_ = 2, adt_ = bdt_ = DType::I16;
    }
  }

  Ms_ = product(s_, mm_.m_axes), Ns_ = product(s_, mm_.n_axes), Ks_ = product(s_, mm_.k_axes);
  nbatch_ = product(s_, mm_.batch_axes);
  M_ = from_sym(Ms_), N_ = from_sym(Ns_), K_ = from_sym(Ks_);
  NQ_ = P.nr / P.lanes;

  threads_ = std::max(1u, std::thread::hardware_concurrency());
  auto known = [](const SymInt& v) -> int64_t { return v.is_const() ? v.value() : -1; };
  // int8 weights prepacked on the A side: N blocks copy no A, so N is split before M (see
  // matmul_blocking). ResNet-50 QDQ's 14 x 14 layers (196 positions, 256-1024 channels) split
  // M and both jobs packed (widened) the whole im2col of B, in 3-wide runs.
  // LATHE_INT8_SPLIT_N=0 keeps the M split (A/B runs).
  static const bool split_n = [] {
    const char* e = std::getenv("LATHE_INT8_SPLIT_N");
    return !(e && std::string(e) == "0");
  }();
  static const int f32_split_n = [] {
    const char* e = std::getenv("LATHE_MATMUL_F32_SPLIT_N");
    return e && *e ? std::atoi(e) : 0;
  }();
  static const int jobs_per_thread = [] {
    const char* e = std::getenv("LATHE_MATMUL_JOBS");
    return e && *e ? std::max(1, std::atoi(e)) : 1;
  }();
  const bool a_packed = packed_a_buffer(kg_, k_) >= 0 && (G_ > 1 ? split_n : f32_split_n == 1);
  // B copied into its block on every run (a padded window's panels copied whole): the block
  // within L2 (matmul_blocking, MatmulParams::b_block_bytes)
  const int b_run_bytes = G_ <= 1 && packs_b_window_whole(mm_, P) ? 4 : 0;
  MatmulBlocking bl = matmul_blocking(known(Ms_), known(Ns_), known(Ks_), known(nbatch_), threads_,
                                      kc_for_group(P, G_), a_packed, a_packed ? jobs_per_thread : 1, b_run_bytes,
                                      expected_ragged_q());
  // B packed at build (the weights of a plain or batched f32 matmul) and A packed by each
  // job: LATHE_MATMUL_M_JOBS=N (an experiment, off) splits M further where there are fewer
  // than N jobs a thread (m_splits_for_slack). BERT's 768-wide GEMMs (2 jobs) then run 4:
  // their chunks' CPU time and span moved -5% to +5% against the default (each B micro-panel
  // serves 11 MR panels of A, not 22; README), noise at load 7-9, so the default is 1 (none).
  // Read on every lowering (tests set it).
  int m_jobs = 1;
  if (const char* e = std::getenv("LATHE_MATMUL_M_JOBS"); e && *e) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (*end || v < 1 || v > 64) throw UserError("LATHE_MATMUL_M_JOBS='" + std::string(e) + "': expected the least jobs a thread, 1 to 64 (1: no extra M splits)");
    m_jobs = static_cast<int>(v);
  }
  const bool plain = mm_.a.bounds.empty() && mm_.b.bounds.empty() && mm_.m_axes.size() == 1 && mm_.n_axes.size() == 1 &&
                     mm_.k_axes.size() == 1;
  if (G_ == 1 && plain && !a_packed && packed_a_buffer(kg_, k_) < 0 && k_.packed_b >= 0 && k_.packed_kc == bl.kc &&
      k_.packed_nr == P.nr && kg_.buffers[k_.packed_b].dtype == bdt_)
    bl = m_splits_for_slack(bl, known(Ms_), known(Ns_), known(nbatch_), threads_, P, m_jobs);
  // B packed at build (a convolution's weights on the B side, swapped: a 7 x 7 layer) and
  // A packed by each job or read in place: an M split copies nothing more, so N blocks and
  // M splits are cut together where N's whole panels alone share the threads unevenly
  // (mobilenet_v2's 160 channels: 5 panels, 3 + 2 a thread). LATHE_MATMUL_BALANCE_M=0: not.
  static const bool balance_m = [] {
    const char* e = std::getenv("LATHE_MATMUL_BALANCE_M");
    return !(e && std::string(e) == "0");
  }();
  if (balance_m && G_ == 1 && !a_packed && packed_a_buffer(kg_, k_) < 0 && k_.packed_b >= 0 &&
      k_.packed_kc == bl.kc && k_.packed_nr == P.nr && kg_.buffers[k_.packed_b].dtype == bdt_ && m_jobs == 1)
    bl = m_splits_for_balance(bl, known(Ms_), known(Ns_), known(nbatch_), threads_, P);
  // B packed at build and A gathered through a window by each job (a convolution orient_matmul
  // swapped: ResNet-50's 14 x 14 and 7 x 7 3x3 layers, positions on A): every N block packs
  // all of A again (its implicit im2col, the costliest copy), where an M split packs only its
  // rows and copies no more B (prepacked). So the jobs split M instead, as many as there were
  // (all of N one block, up to NC). layer3.0 conv2 (28 x 28 -> 14 x 14, 256 -> 256, K 2304) ran
  // two N blocks of 128 that each packed its 196 x 2304 A. One batch entry, f32, each M range
  // at least 2 MR panels. LATHE_MATMUL_GATHER_SPLIT_M=0 keeps the N blocks (A/B runs; read per
  // lowering).
  if (const char* e = std::getenv("LATHE_MATMUL_GATHER_SPLIT_M");
      !(e && std::string(e) == "0") && G_ == 1 && !a_packed && packed_a_buffer(kg_, k_) < 0 && !mm_.a.bounds.empty() &&
      k_.packed_b >= 0 && k_.packed_kc == bl.kc && k_.packed_nr == P.nr && kg_.buffers[k_.packed_b].dtype == bdt_ &&
      m_jobs == 1 && known(nbatch_) == 1 && known(Ms_) > 0 && known(Ns_) > 0 && bl.msplit >= 1) {
    const int64_t m = known(Ms_), n = known(Ns_), mpanels = ceil_div(m, int64_t(P.mr));
    const int64_t nc = std::min<int64_t>(round_up(n, P.nr), std::max<int64_t>(P.nr, P.nc / P.nr * P.nr));
    const int64_t jobs = ceil_div(n, bl.nc) * bl.msplit, nb = ceil_div(n, nc);
    const int64_t ms = std::min<int64_t>(ceil_div(jobs, nb), mpanels / 2);
    if (nb < ceil_div(n, bl.nc) && ms >= 1 && nb * ms >= std::min<int64_t>(jobs, threads_)) {
      bl.nc = nc, bl.msplit = ms;
      const int64_t rows = ceil_div(round_up(ceil_div(m, ms), P.mr), P.mr), max_rows = P.mc / P.mr;
      bl.mc = std::min<int64_t>(P.mc, ceil_div(rows, ceil_div(rows, max_rows)) * P.mr);
    }
  }
  nc_blk_ = bl.nc, msplit_ = bl.msplit;
  kc_blk_ = bl.kc;
  mc_blk_ = bl.mc;
  // Tiles that are always whole: every M range (mc) a multiple of MR when M is, every N
  // block (nc) a multiple of NR when N is (MC, the M splits and nc_blk are multiples of
  // them). Their row / column guards are then always true and are left out: less code to
  // compile (no edge variant of the write-back) and unmasked packing loads.
  rows_whole_ = Ms_.is_const() && Ms_.value() % P.mr == 0;
  cols_whole_ = Ns_.is_const() && Ns_.value() % P.nr == 0;
}

// The element offset of this job's entry in a constant packed per batch entry (prepack.h):
// its flat index over the batch axes the operand reads, times one entry's size (all of the
// packed shape past its first dim).
ExprRef MatmulLowering::packed_entry(const OperandAccess& x, const Shape& packed) const {
  ExprRef e = const_int(0);
  for (int d : packed_batch_axes(mm_, x)) e = add(mul(e, from_sym(s_[d])), batch_.at(d));
  SymInt per = 1;
  for (size_t i = 1; i < packed.size(); ++i) per = per * packed[i];
  return mul(e, from_sym(per));
}

LoopFunc MatmulLowering::run() {
  setup();
  const MatmulParams& P = P_;
  const SymInt &Ms = Ms_, &Ns = Ns_, &Ks = Ks_, &batch = nbatch_;
  const ExprRef &M = M_, &N = N_, &K = K_;
  const int64_t nc_blk = nc_blk_, msplit = msplit_;
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
  prepacked_ = k_.packed_b >= 0 && k_.packed_kc == kc_blk_ && k_.packed_nr == P.nr &&
               kg_.buffers[k_.packed_b].dtype == bdt_;
  pbp_ = prepacked_ ? add_param(k_.packed_b, false, "bp") : -1;
  // a B packed per batch entry (f32 only, rank 2, prepack.h): this job's entry's copy (the
  // integer panels have their own ranks and are never packed per entry)
  b_entry_ = prepacked_ && G_ == 1 && kg_.buffers[k_.packed_b].shape.size() == 2 ? packed_entry(mm_.b, kg_.buffers[k_.packed_b].shape) : nullptr;
  if (!prepacked_) allocs.push_back(make_alloc("Bp", bdt_, 1, kc_blk_ * nc_blk));
  // A the same (prepack_constant_a): MC blocks start at multiples of MR, so this block's
  // panels are those of all M from m0 / MR
  const int packed_a = packed_a_buffer(kg_, k_);
  const size_t a_rank = packed_a >= 0 ? kg_.buffers[packed_a].shape.size() : 0;
  prepacked_a_ = packed_a >= 0 && kg_.buffers[packed_a].shape[a_rank - 2] == SymInt(kc_blk_) &&
                 kg_.buffers[packed_a].shape[a_rank - 1] == SymInt(P.mr) && mc_blk_ % P.mr == 0 &&
                 kg_.buffers[packed_a].dtype == adt_ && (a_rank == 4 || G_ == 1);
  pap_ = prepacked_a_ ? add_param(packed_a, false, "ap") : -1;
  // an A packed per batch entry (rank 5, prepack.h): this job's entry's copy
  a_entry_ = prepacked_a_ && a_rank == 5 ? packed_entry(mm_.a, kg_.buffers[packed_a].shape) : nullptr;
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
  shared_a_ = !prepacked_a_ && !prepacked_ && msplit == 1 && conv_like && nc_blk <= 256 &&
              shares_pack(Ms, Ks, batch, Ns.is_const() ? ceil_div(Ns.value(), nc_blk) : 0, P.mr);
  // A plain matmul (a transformer's linear layer: activations x weights prepacked at build)
  // whose jobs are more N blocks than there are threads: every thread packed all of A (the
  // MR-panel transpose of M x K activations) once per job, GPT-2's LM head (128 x 768 x 50257)
  // 158 times a run. A packed once, the jobs read it from L2 / L3. One thread, min of 40-200
  // runs, 3 alternating rounds: 128 x 768 x 8192 6423-6452 -> 6274-6296 us, x 3072 (6 jobs)
  // 2341-2381 -> 2307-2331 us. Where each thread has one job (two N blocks on two threads)
  // its own copy is one pack either way and it stays per job. LATHE_MATMUL_SHARED_A_PLAIN=0:
  // per job always (A/B runs).
  static const bool shared_a_plain = [] {
    const char* e = std::getenv("LATHE_MATMUL_SHARED_A_PLAIN");
    return !(e && std::string(e) == "0");
  }();
  const bool plain = mm_.a.bounds.empty() && mm_.b.bounds.empty() && mm_.m_axes.size() == 1 && mm_.n_axes.size() == 1 &&
                     mm_.k_axes.size() == 1;
  if (!shared_a_ && shared_a_plain && plain && G_ == 1 && prepacked_ && !prepacked_a_ && msplit == 1 && Ns.is_const() &&
      ceil_div(Ns.value(), nc_blk) > threads_)
    shared_a_ = shares_pack(Ms, Ks, batch, ceil_div(Ns.value(), nc_blk), P.mr);
  if (!prepacked_a_ && !shared_a_) allocs.push_back(make_alloc("Ap", adt_, 1, mc_blk_ * kc_blk_));
  allocs.push_back(make_alloc("tile", acc_, 1, (int64_t)P.mr * P.nr));

  kk_ = var("kk"), n0_ = var("n0"), nc_ = var("nc"), k0_ = var("k0"), kc_ = var("kc");
  const ExprRef &n0 = n0_, &nc = nc_, &k0 = k0_, &kc = kc_;
  // integer panels pack whole groups of G k: a ragged last group is zero (masked loads)
  k_ragged_ = G_ > 1 && !(Ks.is_const() && Ks.value() % G_ == 0);
  kpack_ = k_ragged_ ? mul(ceil_div(kc, G_), const_int(G_)) : kc;
  kin_ = k_ragged_ ? lt(kk_, kc) : nullptr;
  m0_ = var("m0"), mc_ = var("mc");
  const ExprRef &m0 = m0_, &mc = mc_;
  std::vector<Stmt> nfill, kfill, mfill;
  ExprRef ncap = mul(ceil_div(nc, P.nr), const_int(P.nr)), mcap = mul(ceil_div(mc, P.mr), const_int(P.mr));
  // N-side tables hold one entry past the last panel (pack_b_runs reads a run's end there)
  // (a side packed once for all the jobs, shared_a / shared_b, needs no tables in the jobs)
  std::vector<Stmt> bfill_n, bfill_k, ballocs, unused;
  B_ = make_parts(mm_.b, mm_.n_axes, n0, add(ncap, const_int(1)), nc_blk + 1, bfill_n, k0, kc, bfill_k, ballocs);
  // (A's the same: pack_a_taps reads a run's end there)
  A_ = shared_a_ ? make_parts(mm_.a, mm_.m_axes, m0, mcap, mc_blk_, unused, k0, kc, unused, unused)
                 : make_parts(mm_.a, mm_.m_axes, m0, add(mcap, const_int(1)), mc_blk_ + 1, mfill, k0, kc, kfill, allocs);
  // the output: row-major over the reduce's shape
  auto cstr = contiguous_strides(R_->shape);
  for (int d = 0; d < (int)R_->shape.size(); ++d)
    if (R_->shape[d] != SymInt(1)) caff_.terms.push_back({d, cstr[d]});
  crow_ = make_part(caff_, mm_.m_axes, m0, mcap, mc_blk_, mfill, allocs);
  // A read in place (no packing): see reads_a_in_place
  direct_a_ = !shared_a_ && reads_a_in_place(A_);
  if (direct_a_)
    allocs.erase(std::remove_if(allocs.begin(), allocs.end(), [](const Stmt& st) { return st.var == "Ap"; }), allocs.end());
  // B read in place (no packing): see reads_b_in_place
  direct_ = !prepacked_ && reads_b_in_place(B_, Ms, Ks);
  if (direct_) {
    allocs.erase(std::remove_if(allocs.begin(), allocs.end(), [](const Stmt& st) { return st.var == "Bp"; }), allocs.end());
    if (!cols_whole_) allocs.push_back(make_alloc("Bp", bdt_, 1, kc_blk_ * P.nr));  // the ragged last panel
  }
  // B packed once for all the jobs (they split M and would each pack all of it): see shares_pack
  shared_b_ = !prepacked_ && !direct_ && shares_pack(Ns, Ks, batch, msplit, P.nr);
  if (shared_b_)
    allocs.erase(std::remove_if(allocs.begin(), allocs.end(), [](const Stmt& st) { return st.var == "Bp"; }), allocs.end());
  else
    for (auto [from, to] : {std::pair{&bfill_n, &nfill}, {&bfill_k, &kfill}, {&ballocs, &allocs}})
      to->insert(to->end(), from->begin(), from->end());
  ccol_ = make_part(caff_, mm_.n_axes, n0, ncap, nc_blk, nfill, allocs);
  // B's interior panels read where they lie (a stride-1 window): see window_in_place
  if (!prepacked_ && !direct_ && !shared_b_) win_ = window_in_place(B_, Ms);

  Stmt packb = shared_b_ ? Stmt{} : pack_b(B_);
  Stmt packa = shared_a_ ? Stmt{} : pack_a(A_);
  last_pc_ = sub(ceil_div(K, kc_blk_), const_int(1));
  plan_tile_sums(allocs);
  std::vector<Stmt> micro = micro_kernel();

  // A root narrower than the sum (an int8 contraction requantized to u8 in its write-back):
  // the partial sums of the K blocks before the last go to a scratch of this job's msz × nc
  // outputs (static sizes: fusable_epilogue), the last block's sum straight through the
  // epilogue into the output. With one K block there is no scratch and no condition.
  if (narrow_) {
    LATHE_CHECK(Ks.is_const() && Ms.is_const(), "matmul epilogue of another dtype with symbolic sizes");
    kblocks_ = ceil_div(Ks.value(), kc_blk_);
    const int64_t msz_max = msplit == 1 ? Ms.value() : round_up(ceil_div(Ms.value(), msplit), P.mr);
    if (kblocks_ > 1) allocs.push_back(make_alloc("Cs", acc_, 1, round_up(msz_max, P.mr) * nc_blk));
  }
  // A ragged last B panel (f32_micro_cols): the if between its kernel and the whole panel's
  // goes around the whole tile, each branch with its own accumulators and write-back. Under
  // an if that joined before the write-back, LLVM merged the two branches' tile stores into
  // phis of both kernels' accumulators, and its register allocator then rotated the twelve
  // accumulators through copies and a stack slot on every k step of the WHOLE panels' loop:
  // MobileNetV2's 14 x 14 expansions (64 -> 384, 96 -> 576: 196 columns, 12 panels and one of
  // 4) ran at half speed, 233 vs 132 us with the ragged kernel off (one thread, min of 300).
  // LATHE_MATMUL_RAGGED_SPLIT=0: the if inside the tile, as before (A/B runs).
  static const bool split_tile = [] {
    const char* e = std::getenv("LATHE_MATMUL_RAGGED_SPLIT");
    return !(e && std::string(e) == "0");
  }();
  if (ragged_cols_q_ > 0 && split_tile) {
    cols_only_ = 1;
    std::vector<Stmt> ragged = micro_kernel();
    add_write_back(ragged);
    cols_only_ = 2;
    std::vector<Stmt> whole = micro_kernel();
    add_write_back(whole);
    cols_only_ = 0;
    micro.clear();
    micro.push_back(make_if(lt(nc_, add(mul(var("jr"), const_int(P.nr)), const_int(P.nr))), std::move(ragged), std::move(whole)));
  } else {
    add_write_back(micro);
  }

  Stmt ir_loop = make_for("ir", ceil_div(mc, P.mr), std::move(micro), "MR panels of A");
  std::vector<Stmt> jrbody;
  // Opt-in (LATHE_MATMUL_PACK_PER_PANEL=1): B packed panel by panel just before its
  // micro-kernels, where one MC block holds every row of the job (few output channels:
  // M <= MC): no block of A reuses the panels later, so packing the whole NC block up front
  // sends it through L2 (NC x KC: 300-512 KB for a 3x3 layer's block, as much as the
  // 512 KiB L2 of a Zen 3 core) to be read back from there; packed per panel the copy is
  // read by the MR panels of A from L1 while it is hot. A window's border panels (those not
  // read in place) are packed the same way. Off by default: on the shared 2-core Zen 3 host
  // (load 10-12, task-clock per run, 4 alternating rounds) it measured within the noise,
  // -20% to +27% by shape (unet's 128->64 at 64x64 and ResNet's 128->128 at 28x28 faster,
  // 64->32 at 128x128 and the 7x7 stem slower), which a quiet machine has to settle.
  const bool pack_per_panel = pack_per_panel_enabled() && !prepacked_ && !direct_ && !shared_b_ && G_ == 1 &&
                              packb.kind == StmtKind::For && packb.var == "jp" && msplit == 1 && Ms.is_const() &&
                              Ms.value() <= mc_blk_;
  if (pack_per_panel) {
    std::vector<Stmt> pb = packb.body;
    substitute(pb, "jp", var("jr"));
    for (auto& st : pb) jrbody.push_back(std::move(st));
  }
  if (win_ && win_->in_place) {  // is this panel read in place, and where its row starts
    ExprRef p0 = mul(var("jr"), const_int(P.nr));
    jrbody.push_back(make_let("wi", DType::I64, select(window_interior(B_, *win_, p0), const_int(1), const_int(0))));
    jrbody.push_back(make_let("wa", DType::I64, add(batch_part(mm_.b.addr), at(B_.rows[0], p0))));
  }
  jrbody.push_back(std::move(ir_loop));
  Stmt jr_loop = make_for("jr", ceil_div(nc, P.nr), std::move(jrbody), "NR panels of B");

  std::vector<Stmt> icbody{make_let("m0", DType::I64, add(var("ms0"), mul(var("ic"), const_int(mc_blk_)))),
                           make_let("mc", DType::I64, min_of(const_int(mc_blk_), sub(add(var("ms0"), var("msz")), m0)))};
  for (auto& st : mfill) icbody.push_back(st);
  if (!prepacked_a_ && !shared_a_ && !direct_a_) icbody.push_back(packa);
  icbody.push_back(jr_loop);
  Stmt ic_loop = make_for("ic", ceil_div(var("msz"), mc_blk_), std::move(icbody), "MC blocks of M");
  std::vector<Stmt> pcbody{make_let("k0", DType::I64, mul(var("pc"), const_int(kc_blk_))),
                           make_let("kc", DType::I64, min_of(const_int(kc_blk_), sub(K, k0)))};
  for (auto& st : kfill) pcbody.push_back(st);
  if (direct_ && !cols_whole_) {  // the ragged last panel (fewer than NR columns), zero padded
    ExprRef full = binary(Op::IDiv, nc, const_int(P.nr));
    ExprRef colr = add(mul(full, const_int(P.nr)), var("cr"));
    Stmt c = make_for("cr", const_int(P.nr),
                      {make_local_store("Bp", add(mul(var("kr"), const_int(P.nr)), var("cr")),
                                        load(pb_, DType::F32, address(B_, colr, var("kr")), lt(colr, nc)))},
                      "pack B: the ragged last panel");
    c.annot.vectorize = true;
    pcbody.push_back(make_if(lt(mul(full, const_int(P.nr)), nc), {make_for("kr", kc, {c}, "pack B: k (ragged panel)")}));
  } else if (!prepacked_ && !direct_ && !shared_b_ && !pack_per_panel) {
    pcbody.push_back(packb);
  }
  pcbody.push_back(ic_loop);
  for (auto& st : allocs) tbody.push_back(st);
  for (auto& st : nfill) tbody.push_back(st);
  tbody.push_back(make_for("pc", ceil_div(K, kc_blk_), std::move(pcbody), "KC blocks of K"));
  ExprRef jobs = mul(mul(from_sym(batch), nJC), const_int(msplit));
  Stmt tloop = make_for("t", jobs, std::move(tbody), "jobs: batch × N blocks × M splits");
  tloop.annot.parallel = true;
  auto packb_of = [this](const OperandParts& X) { return pack_b(X); };
  auto packa_of = [this](const OperandParts& X) { return pack_a(X); };
  if (shared_b_) {
    f_.body.push_back(make_alloc("Bs", DType::F32, 1, shared_elems(Ns.value(), Ks.value(), P.nr)));
    f_.body.push_back(shared_pack_loop(mm_.b, mm_.n_axes, Ns.value(), Ks.value(), P.nr, nc_blk / P.nr, threads_, "n0", "nc",
                                       "Bp", "Bs", 1, packb_of));
  }
  if (shared_a_) {
    f_.body.push_back(make_alloc("As", DType::F32, 1, shared_elems(Ms.value(), Ks.value(), P.mr)));
    f_.body.push_back(shared_pack_loop(mm_.a, mm_.m_axes, Ms.value(), Ks.value(), P.mr, mc_blk_ / P.mr, threads_, "m0", "mc",
                                       "Ap", "As", 1, packa_of));
  }
  f_.body.push_back(std::move(tloop));
  f_.schedule_log.push_back("matmul: MR=" + std::to_string(P.mr) + (G_ == 4 ? std::string(" int8 ") + (adt_ == DType::I8 ? "i8xu8" : "u8xi8") + (mm_.sat16 ? " dot4sat16" : " dot4") : G_ == 2 ? std::string(" int8 i16 dot2") : std::string()) + " NR=" + std::to_string(P.nr) + " KC=" +
                            std::to_string(kc_blk_) + " MC=" + std::to_string(mc_blk_) + " NC=" + std::to_string(nc_blk) +
                            " msplit=" + std::to_string(msplit) + (epilogue_ ? narrow_ ? " +epilogue(" + std::string(dtype_name(kg_.buffers[k_.output].dtype)) + ")" : " +epilogue" : "") +
                            (prepacked_ ? " B prepacked" : "") + (shared_b_ ? " B packed once" : "") + (shared_a_ ? " A packed once" : "") + (prepacked_a_ ? " A prepacked" : "") + (direct_a_ ? " A in place" : "") + (direct_ ? " B in place" : "") + (win_ ? win_->in_place ? " B interior in place" : " B interior copied whole" : "") +
                            (tile_sums_ ? " sums in tiles" : "") +
                            (tables_ ? " gather(" + std::to_string(tables_) + " tables)" : ""));
  // K == 0: the loops above write nothing; zero the output first (never with an epilogue)
  if (!(Ks.is_const() && Ks.value() > 0)) {
    LATHE_CHECK(!epilogue_, "matmul epilogue with a K that may be 0");
    ExprRef total = from_sym(shape_numel(R_->shape));
    Stmt z = make_for("z", total, {make_store(pout_, var("z"), const_of(0, acc_))}, "zero (K may be 0)");
    f_.body.insert(f_.body.begin(), make_if(lt(K, const_int(1)), {z}));
  }
  unique_loop_names(f_);   // the write-back variants and gather tables repeat their loops
  return std::move(f_);
}

// write back: C (+)= tile; at the last K block the epilogue computes the kernel's root
Stmt MatmulLowering::write_back(ExprRef colpart) {
  const MatmulParams& P = P_;
  const ExprRef &m0 = m0_, &n0 = n0_, &mc = mc_, &nc = nc_;
  ExprRef mrow = add(mul(var("ir"), const_int(P.mr)), var("r"));
  ExprRef ncol = add(mul(var("jr"), const_int(P.nr)), var("c"));
  ExprRef caddr = add(batch_part(caff_), add(at(crow_, mrow), colpart));
  ExprRef tv = local_load("tile", acc_, add(mul(var("r"), const_int(P.nr)), var("c")));
  ExprRef saddr = add(mul(add(sub(m0, var("ms0")), mrow), const_int(nc_blk_)), ncol);  // narrow: the scratch
  ExprRef prev = narrow_ ? (kblocks_ > 1 ? select(lt(const_int(0), var("pc")), local_load("Cs", acc_, saddr), const_of(0, acc_)) : nullptr)
                 : tile_sums_ ? nullptr  // the tile holds the whole sum (written at the last K block only)
                              : select(lt(const_int(0), var("pc")), load(pout_, acc_, caddr), const_of(0, acc_));
  ExprRef sum = prev ? binary(Op::Add, prev, tv) : tv;
  // a full tile writes without per-element conditions (plain vector loads and stores)
  ExprRef full = logical_and(le(add(mul(var("ir"), const_int(P.mr)), const_int(P.mr)), mc),
                             le(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr)), nc));
  // An epilogue with a transcendental (exp2, log2, reciprocal, sin, sqrt: a GELU, a sigmoid)
  // computes its full-tile row (NR = 2 or more vectors) as one straight body of NR / lanes
  // vectors (the vectorizer's interleave count), not a loop of one vector per step: its
  // constants (a GELU's ~10) are loaded once a row, not once a vector (the rows' loops keep
  // the micro-kernel's accumulators live, so LLVM rematerialises them in the loop), and the
  // two vectors' long chains (a tanh's exp2 and reciprocal) overlap. 128x768 -> 3072 with
  // the tanh GELU: 2.88-2.97 -> 2.80-2.87 ms one thread (3 alternating rounds); a bias-only
  // epilogue ran 1-2% slower so (2.51-2.60 -> 2.54-2.63 ms): not taken there. In the models
  // (weights prepacked) the GELU costs less: GPT-2's 12 fc1 GEMMs 27.89-27.94 -> 27.61-27.85 ms
  // (fc2's, no GELU: 27.2-27.4), BERT's (erf form) 27.71-27.73 -> 27.65-27.83 (noise).
  // LATHE_MATMUL_EPILOGUE_INTERLEAVE=0: one vector per step (A/B runs).
  static const bool interleave_epi = [] {
    const char* e = std::getenv("LATHE_MATMUL_EPILOGUE_INTERLEAVE");
    return !(e && std::string(e) == "0");
  }();
  auto heavy = [](const std::vector<Stmt>& body) {
    bool found = false;
    std::function<void(const ExprRef&)> visit = [&](const ExprRef& e) {
      if (!e || found) return;
      if (e->kind == ExprKind::Unary && e->op != Op::Neg && e->op != Op::Not) found = true;
      for (const ExprRef& a : e->args) visit(a);
    };
    walk_exprs(body, visit);
    return found;
  };
  auto loops = [&](std::vector<Stmt> body, bool epi = false) {
    epi = epi && heavy(body);
    Stmt c = make_for("c", const_int(P.nr), body, "write back: column");
    c.annot.vectorize = true;
    if (epi && interleave_epi && P.lanes > 0 && P.nr % P.lanes == 0 && P.nr / P.lanes > 1)
      c.annot.interleave = P.nr / P.lanes;
    Stmt rows = make_for("r", const_int(P.mr), {c}, "write back: row");
    if (rows_whole_ && cols_whole_) return rows;
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
  Stmt plain = narrow_ ? loops({make_local_store("Cs", saddr, sum)}) : loops({make_store(pout_, caddr, sum)});
  if (!epilogue_) return tile_sums_ ? make_if(le(last_pc_, var("pc")), {plain}) : plain;
  std::vector<ExprRef> ridx(R_->shape.size(), const_int(0));
  auto mco = group_coords(mm_.m_axes, s_, add(m0, mrow)), nco = group_coords(mm_.n_axes, s_, add(n0, ncol));
  for (auto* co : {&mco, &nco, &batch_})
    for (auto& [d, e] : *co) ridx[d] = e;
  std::vector<Stmt> body{make_let("s" + std::to_string(variants_), acc_, sum)};
  ExprRef v = build_epilogue(kg_, k_.root, R_, ridx, var("s" + std::to_string(variants_), acc_), param_of_,
                             body, "e" + std::to_string(variants_) + "_");
  ++variants_;
  body.push_back(make_store(pout_, caddr, v));
  if (narrow_ && kblocks_ == 1) return loops(std::move(body), true);
  if (tile_sums_) return make_if(le(last_pc_, var("pc")), {loops(std::move(body), true)});
  return make_if(lt(var("pc"), last_pc_), {plain}, {loops(std::move(body), true)});
}

void MatmulLowering::add_write_back(std::vector<Stmt>& micro) {
  const MatmulParams& P = P_;
  ExprRef ncol = add(mul(var("jr"), const_int(P.nr)), var("c"));
  if (ccol_.table.empty()) {
    micro.push_back(write_back(at(ccol_, ncol)));
  } else {  // a contiguous run of output columns: vector stores; else scattered
    ExprRef first = local_load(ccol_.table, DType::I64, mul(var("jr"), const_int(P.nr)));
    ExprRef lastc = local_load(ccol_.table, DType::I64, add(mul(var("jr"), const_int(P.nr)), const_int(P.nr - 1)));
    ExprRef contiguous = logical_and(lt(add(mul(var("jr"), const_int(P.nr)), const_int(P.nr - 1)), nc_),
                                     logical_and(le(sub(lastc, first), const_int(P.nr - 1)),
                                                 le(const_int(P.nr - 1), sub(lastc, first))));
    Stmt fast = write_back(add(first, var("c")));
    Stmt slow = write_back(at(ccol_, ncol));
    micro.push_back(make_if(contiguous, {fast}, {slow}));
  }
  for (Stmt& st : micro) {  // the write-back's loops (after the k loop)
    std::vector<Stmt> one{std::move(st)};
    rename_loops(one, "r", "wr");
    rename_loops(one, "c", "wc");
    st = std::move(one[0]);
  }
}

}  // namespace matmul_lowering

LoopFunc lower_matmul_kernel(const KernelGraph& kg, int kernel, const MatmulParams& P) {
  const Kernel& k = kg.kernels.at(kernel);
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  LATHE_CHECK(mm.has_value(), "lower_matmul_kernel on a kernel that is not a matmul");
  orient_matmul(*mm, P);
  LATHE_CHECK(P.nr % P.lanes == 0 && P.mc % P.mr == 0 && P.nc % P.nr == 0, "matmul block sizes must nest");
  return matmul_lowering::MatmulLowering(kg, k, *mm, P).run();
}

}  // namespace lathe::loop
