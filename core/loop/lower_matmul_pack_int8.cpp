// lower_matmul_pack_int8.cpp — the integer (VNNI group-of-G) packing steps of the packed
// matmul lowering (lower_matmul_pack.cpp packs the f32 panels and calls these): B's panels
// run by run through a window a group of G k at a time (contiguous panels with a tap mask,
// shared bounds, group runs), and A's panels over a window's rows (contiguous or gathered,
// masked once per tap).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/loop/lower_matmul_impl.h"

namespace lathe::loop::matmul_lowering {

// Pack B run by run, integer panels (pack_b_runs's G > 1 part): `one_k` copies one depth of
// the panel run by run (its lets into the first list, the zeroing and run copies into the
// second; see pack_b_runs).
Stmt MatmulLowering::pack_b_run_groups(const OperandParts& B, int pb, const std::optional<int64_t>& ca,
                                       const RunCopy& one_k) {
  const OperandAccess& acc = *B.acc;
  const int64_t NR = P_.nr;
  ExprRef p0 = mul(var("jp"), const_int(NR)), nc = var("nc");
  auto elem = [&](ExprRef addr) { return packed(pb, B.acc->src, bdt_, addr, nullptr); };
  std::vector<Stmt> body, general;
  ExprRef full_cond;

  // integer panels: a group of G k at a time (the block's kc is a multiple of G here),
  // so a whole panel's G rows are copied by one loop whose G stores per column the
  // vectorizer interleaves into whole-vector stores (one k at a time stored each element
  // alone: the stride is G)
  // A K that is no multiple of G (a 7x7 stem over 3 channels: K = 147) leaves the block's
  // last group ragged: its members past kc are zero. Their addresses and bounds are taken at
  // kc - 1 (the lets stay inside the tables), their copies guarded by kk < kc, and a
  // ragged group never takes the whole-panel copy.
  ExprRef kg = var("kg");
  std::vector<Stmt> whole_stores, fixes, contig_stores;
  // A panel whose NR columns lie at consecutive addresses for every k (a stride-1 window over
  // a map as wide as the output, "same" padding: the N dims collapse to stride 1, so a panel
  // that crosses a row reads on across the row's end) but that is not one run inside the
  // bounds (it crosses a row, or touches the padding): copied whole like an interior panel,
  // then the few columns outside the bounds (a row's first or last column at a side tap, a
  // run above or below the map) set to 0. The general path zeroed the group's panel and copied
  // every run byte by byte: most panels of a 3x3 layer at 28 x 28 or less cross a row.
  // The whole copy reads [a, a + NR) of the source, so only where that lies inside it.
  // LATHE_INT8_CONTIG_PANELS=0 keeps the general path (A/B runs).
  static const bool contig_enabled = [] {
    const char* e = std::getenv("LATHE_INT8_CONTIG_PANELS");
    return !(e && std::string(e) == "0");
  }();
  std::optional<int64_t> extent = 1;
  for (auto& d : acc.src->shape) {
    if (!d.is_const() || !extent) { extent.reset(); break; }
    *extent *= d.value();
  }
  auto cn = collapsed(acc.addr, mm_.n_axes);
  const bool contig = contig_enabled && !k_ragged_ && *ca == 1 && cn && *cn == SymInt(1) && extent && !acc.bounds.empty();
  ExprRef contig_cond = contig ? le(add(p0, const_int(NR)), nc) : nullptr;
  // The G members of a group are G consecutive k of the innermost K dim (a convolution's
  // input channels) when that dim's size is a multiple of G; no bound reads that dim (the
  // bounds are the window's rows and columns), so the members share their bounds: each
  // member takes the first member's (the same table entries, which LLVM then computes once
  // per group instead of G times: the lets and tests of the run-by-run pack were most of its
  // time per group of a 3x3 layer). LATHE_INT8_SHARED_BOUNDS=0 computes them per member.
  static const bool shared_enabled = [] {
    const char* e = std::getenv("LATHE_INT8_SHARED_BOUNDS");
    return !(e && std::string(e) == "0");
  }();
  bool shared_bounds = shared_enabled && !k_ragged_ && !mm_.k_axes.empty() && kc_blk_ % G_ == 0;
  if (shared_bounds) {
    const int dk = mm_.k_axes.back();
    shared_bounds = s_[dk].is_const() && s_[dk].value() % G_ == 0;
    for (auto& b : acc.bounds)
      for (auto& [d, k] : b.coord.terms)
        if (d == dk && !(k.is_const() && k.value() == 0)) shared_bounds = false;
  }
  // Members that share their bounds also share their runs: the first member's run copies
  // copy all G members per column (their sources a channel's stride apart), so a group's
  // general path runs segs loops, not G x segs, each with its own bounds and lets (a stride-2
  // 3x3 layer's panels, 28 wide, never one run: every group took that path).
  // Strided windows only (a run's columns 2+ apart): a stride-1 window's panels mostly take
  // the contiguous copy, and its 3x3 layers measured 30-40 us slower with the group's runs
  // (resnet50_qdq on a VNNI host, one thread), the stride-2 ones 60-100 us faster.
  // LATHE_INT8_GROUP_RUNS=0 copies each member's runs alone, 1 also for stride 1 (A/B runs).
  static const std::string group_runs_mode = [] {
    const char* e = std::getenv("LATHE_INT8_GROUP_RUNS");
    return std::string(e ? e : "");
  }();
  int64_t member_stride = 0;
  if (shared_bounds && group_runs_mode != "0" && (*ca != 1 || group_runs_mode == "1")) {
    auto c = coef_of(acc.addr, mm_.k_axes.back());
    if (c && *c > 0) member_stride = *c;
  }
  {
    Stmt zero = make_for("c", const_int(NR * G_),
                         {make_local_store("Bp", add(group_panel_index(var("jp"), kg, 0, const_int(0), NR), var("c")),
                                           const_of(0, bdt_))},
                         "pack B: zero the group's panel");
    zero.annot.vectorize = true;
    general.push_back(zero);
  }
  for (int j = 0; j < G_; ++j) {
    std::string px = "k" + std::to_string(j) + "_";
    ExprRef kk = add(mul(kg, const_int(G_)), const_int(j));
    ExprRef kin = k_ragged_ && j > 0 ? lt(kk, var("kc")) : nullptr;
    ExprRef kat = kin ? min_of(kk, sub(var("kc"), const_int(1))) : kk;
    std::vector<Stmt> gen_j;
    ExprRef full_j;
    one_k(kat, px, [&, j](ExprRef c) { return group_panel_index(var("jp"), kg, j, c, NR); }, body, gen_j, &full_j,
          contig && (j == 0 || !shared_bounds) ? &fixes : nullptr, shared_bounds ? mul(kg, const_int(G_)) : nullptr,
          shared_bounds ? G_ : 1,  // shared bounds: member 0's fixes zero the whole group's columns
          member_stride ? (j == 0 ? G_ : 0) : 1, member_stride);
    if (contig) {
      ExprRef a = var(px + "g0_a");
      contig_cond = logical_and(contig_cond, logical_and(le(const_int(0), a), le(add(a, const_int(NR)), const_int(*extent))));
      contig_stores.push_back(make_local_store("Bp", group_panel_index(var("jp"), kg, j, var("c"), NR), elem(add(a, var("c")))));
    }
    if (kin && !gen_j.empty()) {  // after the group's zeroing: the run copies only for k < kc
      std::vector<Stmt> copies = std::move(gen_j);
      gen_j.clear();
      gen_j.push_back(make_if(kin, std::move(copies)));
    }
    general.insert(general.end(), gen_j.begin(), gen_j.end());
    if (full_j) {
      if (kin) full_j = logical_and(kin, full_j);
      full_cond = j == 0 ? full_j : logical_and(full_cond, full_j);
      whole_stores.push_back(make_local_store("Bp", group_panel_index(var("jp"), kg, j, var("c"), NR),
                                              elem(add(var(px + "g0_a"), mul(var("c"), const_int(*ca))))));
    }
  }
  // The fixes of a contiguous panel (which columns are outside the bounds) depend on the
  // window's tap only, not on the input channel: with the channels innermost in k and no
  // bound reading them (shared_bounds), every group of one tap zeroes the same columns. So
  // they run once per panel and tap, into a mask of the group's NR x G bytes (0xFF, 0 where
  // zeroed), and each group's contiguous copy ANDs its bytes with it: a 3x3 layer at 14 x 14
  // ran the fixes' lets and 1-column loops (up to 4 runs) for each of its 64 groups a tap.
  // LATHE_INT8_TAP_MASK=0 runs the fixes per group (A/B runs).
  static const bool tap_mask_enabled = [] {
    const char* e = std::getenv("LATHE_INT8_TAP_MASK");
    return !(e && std::string(e) == "0");
  }();
  const bool tap_mask = contig && shared_bounds && tap_mask_enabled && !fixes.empty() && !k_ragged_ &&
                        s_[mm_.k_axes.back()].is_const();
  std::vector<Stmt> jp_head;
  if (tap_mask) {
    const int64_t C = s_[mm_.k_axes.back()].value();
    jp_head.push_back(make_alloc("Mk", bdt_, 1, NR * G_));
    Stmt fill = make_for("c", const_int(NR * G_), {make_local_store("Mk", var("c"), const_of(255, bdt_))},
                         "pack B: the tap's column mask (all kept)");
    fill.annot.vectorize = true;
    std::vector<Stmt> build{fill};
    ExprRef base = group_panel_index(var("jp"), kg, 0, const_int(0), NR);
    // the fixes' zero stores into the mask instead; their runs' copies (member 0's runs past
    // the first, which the contiguous copy already wrote) dropped
    std::function<void(std::vector<Stmt>&)> drop_copies = [&](std::vector<Stmt>& v) {
      v.erase(std::remove_if(v.begin(), v.end(),
                             [](const Stmt& st) { return st.kind == StmtKind::For && st.note.rfind("pack B: copy a run", 0) == 0; }),
              v.end());
      for (auto& st : v) {
        drop_copies(st.body);
        drop_copies(st.else_body);
      }
    };
    std::vector<Stmt> fx = fixes;
    drop_copies(fx);
    walk(fx, [&](Stmt& st) {
      if (st.kind == StmtKind::LocalStore && st.var == "Bp") {
        st.var = "Mk";
        st.index = sub(st.index, base);
      }
      return true;
    });
    build.insert(build.end(), fx.begin(), fx.end());
    // a new tap: the panel's first group, or the flat k at a multiple of the channels
    ExprRef first = lt(kg, const_int(1));
    ExprRef at_tap = unary(Op::Not, binary(Op::CmpNE, binary(Op::Mod, add(var("k0"), mul(kg, const_int(G_))), const_int(C)),
                                           const_int(0)));
    body.push_back(make_if(binary(Op::Or, first, at_tap), std::move(build)));
    for (auto& st : contig_stores) {
      // the store's index is group_panel_index(jp, kg, j, c): its offset in the group is c*G + j
      ExprRef off = sub(st.index, base);
      st.value = binary(Op::And, st.value, local_load("Mk", bdt_, off));
    }
  }
  if (contig) {
    Stmt cwhole = make_for("c", const_int(NR), std::move(contig_stores), "pack B: copy a contiguous panel (a group of k)");
    cwhole.annot.vectorize = true;
    std::vector<Stmt> then{cwhole};
    if (!tap_mask) then.insert(then.end(), fixes.begin(), fixes.end());
    general = {make_if(contig_cond, std::move(then), std::move(general))};
  }
  if (full_cond && (int)whole_stores.size() == G_) {
    Stmt whole = make_for("c", const_int(NR), std::move(whole_stores), "pack B: copy a whole panel (a group of k)");
    whole.annot.vectorize = true;
    body.push_back(make_if(full_cond, {whole}, std::move(general)));
  } else {
    body.insert(body.end(), general.begin(), general.end());
  }
  jp_head.push_back(make_for("kg", ceil_div(var("kc"), G_), std::move(body)));
  return make_for("jp", ceil_div(nc, P_.nr), std::move(jp_head), "pack B: NR-wide panels, by runs");
}

// An integer A side read through a stride-1 window (a 7 x 7 map's 3x3 layer, its positions as
// the rows: the lowering puts the u8 activations on A where N is small) whose rows lie at
// consecutive addresses for every k (the M dims collapse to stride 1: "same" padding), with the
// input channels innermost in k (groups of G channels of one tap) and no bound reading them:
// a whole MR-tall panel's group is G runs of MR consecutive bytes (one per channel), copied
// whole and interleaved, then ANDed with a byte mask of the rows inside the bounds, made once
// per panel and tap (the bounds do not depend on the channel). The per-element path tested
// each byte's bounds through the window's tables (a 7 x 7 layer into 512 channels: 0.5 ms
// against ORT's 0.3 at one thread). A group whose runs would read outside the source keeps
// the per-element copy. LATHE_INT8_A_CONTIG=0 packs every element alone (A/B runs).
std::optional<Stmt> MatmulLowering::pack_a_contig(const OperandParts& Ax) {
  static const bool enabled = [] {
    const char* e = std::getenv("LATHE_INT8_A_CONTIG");
    return !(e && std::string(e) == "0");
  }();
  const OperandAccess& acc = *Ax.acc;
  if (!enabled || G_ == 1 || k_ragged_ || kc_blk_ % G_ != 0 || acc.bounds.empty() || mm_.m_axes.empty() ||
      mm_.k_axes.empty())
    return std::nullopt;
  auto cm = collapsed(acc.addr, mm_.m_axes);
  // rows at consecutive addresses (stride 1, "same" padding): each member's MR bytes are one
  // run; else (a strided window: a 14 x 14 map to 7 x 7) the MR rows' addresses are taken once
  // per panel and each group gathers its MR x G bytes, masked alike (no bounds per byte)
  const bool runs = cm && *cm == SymInt(1);
  const int dk = mm_.k_axes.back();
  if (!s_[dk].is_const() || s_[dk].value() % G_ != 0) return std::nullopt;
  for (auto& b : acc.bounds)
    for (auto& [d, k] : b.coord.terms)
      if (d == dk && !(k.is_const() && k.value() == 0)) return std::nullopt;
  int64_t extent = 1;
  for (auto& d : acc.src->shape) {
    if (!d.is_const()) return std::nullopt;
    extent *= d.value();
  }
  const int64_t MR = P_.mr, C = s_[dk].value();
  const int pa = pa_;
  ExprRef kg = var("kq"), row0 = mul(var("ip"), const_int(MR));
  std::vector<Stmt> kbody;
  {  // a new tap (the panel's first group, or the flat k at a multiple of the channels): its mask
    ExprRef first = lt(kg, const_int(1));
    ExprRef at_tap = unary(Op::Not, binary(Op::CmpNE, binary(Op::Mod, add(var("k0"), mul(kg, const_int(G_))), const_int(C)),
                                           const_int(0)));
    ExprRef inb = in_range(Ax, add(row0, var("rq")), mul(kg, const_int(G_)));
    ExprRef v = inb ? select(inb, const_of(255, adt_), const_of(0, adt_)) : const_of(255, adt_);
    std::vector<Stmt> st;
    for (int j = 0; j < G_; ++j) st.push_back(make_local_store("Ma", add(mul(var("rq"), const_int(G_)), const_int(j)), v));
    Stmt m = make_for("rq", const_int(MR), std::move(st), "pack A: the tap's row mask");
    m.annot.unroll = static_cast<int>(MR);
    kbody.push_back(make_if(binary(Op::Or, first, at_tap), {m}));
  }
  ExprRef cond;
  std::vector<Stmt> copies, guarded, head{make_alloc("Ma", adt_, 1, MR * G_)};
  if (!runs) {  // the panel's row addresses (the k part apart), their least and greatest
    for (int64_t r = 0; r < MR; ++r) {
      head.push_back(make_let("rw" + std::to_string(r), DType::I64,
                              add(batch_part(acc.addr), at(Ax.rows[0], add(row0, const_int(r))))));
      ExprRef v = var("rw" + std::to_string(r));
      head.push_back(make_let("rlo" + std::to_string(r), DType::I64, r ? min_of(var("rlo" + std::to_string(r - 1)), v) : v));
      head.push_back(make_let("rhi" + std::to_string(r), DType::I64,
                              r ? binary(Op::Max, var("rhi" + std::to_string(r - 1)), v) : v));
    }
  }
  const std::string rlo = "rlo" + std::to_string(MR - 1), rhi = "rhi" + std::to_string(MR - 1);
  for (int j = 0; j < G_; ++j) {
    ExprRef kj = add(mul(kg, const_int(G_)), const_int(j));
    std::string a = "aq" + std::to_string(j);
    ExprRef mask_of = nullptr;
    if (runs) {
      kbody.push_back(make_let(a, DType::I64, address(Ax, row0, kj)));
      cond = logical_and(cond, logical_and(le(const_int(0), var(a)), le(add(var(a), const_int(MR)), const_int(extent))));
      copies.push_back(make_local_store("Ap", group_panel_index(var("ip"), kg, j, var("rq"), MR),
                                        binary(Op::And, packed(pa, mm_.a.src, adt_, add(var(a), var("rq")), nullptr),
                                               local_load("Ma", adt_, add(mul(var("rq"), const_int(G_)), const_int(j))))));
    } else {
      kbody.push_back(make_let(a, DType::I64, at(Ax.ks[0], kj)));
      cond = logical_and(cond, logical_and(le(const_int(0), add(var(rlo), var(a))), lt(add(var(rhi), var(a)), const_int(extent))));
      for (int64_t r = 0; r < MR; ++r)
        copies.push_back(make_local_store("Ap", group_panel_index(var("ip"), kg, j, const_int(r), MR),
                                          binary(Op::And, packed(pa, mm_.a.src, adt_, add(var("rw" + std::to_string(r)), var(a)), nullptr),
                                                 local_load("Ma", adt_, const_int(r * G_ + j)))));
    }
    ExprRef row = add(row0, var("rq"));
    guarded.push_back(make_local_store("Ap", group_panel_index(var("ip"), kg, j, var("rq"), MR),
                                       packed(pa, mm_.a.src, adt_, address(Ax, row, kj), in_range(Ax, row, kj))));
  }
  Stmt slow = make_for("rq", const_int(MR), std::move(guarded), "pack A: panel row (a group of k)");
  slow.annot.unroll = static_cast<int>(MR);
  if (runs) {
    Stmt copy = make_for("rq", const_int(MR), std::move(copies), "pack A: copy a contiguous panel (a group of k)");
    copy.annot.vectorize = true;
    kbody.push_back(make_if(cond, {copy}, {slow}));
  } else {
    // (the stores in row order: member j of row r at r*G + j, one MR x G block a group)
    std::vector<Stmt> ordered(copies.size());
    for (int j = 0; j < G_; ++j)
      for (int64_t r = 0; r < MR; ++r) ordered[r * G_ + j] = copies[j * MR + r];
    kbody.push_back(make_if(cond, std::move(ordered), {slow}));
  }
  head.push_back(make_for("kq", ceil_div(kpack_, G_), std::move(kbody),
                          runs ? "pack A: k groups (contiguous panels)" : "pack A: k groups (gathered panels, masked)"));
  return make_for("ip_a", const_int(1), std::move(head));
}

}  // namespace lathe::loop::matmul_lowering
