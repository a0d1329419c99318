// lower_attention_bwd.cpp — lower_attention_bwd_kernel: the fused attention backward (Extern
// "attention_bwd", core/ir/attention_op.h) → loop IR. FlashAttention-2's backward: the
// probabilities are recomputed tile by tile from the forward's saved row log-sum-exp (lse2,
// base 2), so no L×S matrix is stored (part 2, the mask's gradient dS, is itself L×S):
//
//   D_i = Σ_c dO_ic·O_ic,  x_ij = (q_i·k_j·scale + mask_ij)·log2 e  (-inf where j > i when causal)
//   p_ij = 2^(x_ij - lse2_i),  dp_ij = dO_i·v_j,  ds_ij = p_ij·(dp_ij - D_i)
//
// Parts 0 (dQ = Σ_j ds_ij·k_j·scale) and 2 (dS): one parallel job per (batch·head, query tile
// of BQ rows); K/V tiles of BK keys staged (transposed for the key-vectorized inner products),
// up to the tile's last query when causal.
// Part 1 (dK_j = Σ_i ds_ij·q_i·scale, dV_j = Σ_i p_ij·dO_i, written side by side): one job per
// (batch·head, key tile of BK keys), so no two jobs write one row (no atomics); it walks the
// query rows from the tile's first key on when causal (earlier rows see none of its keys).
// dQ and dK|dV are separate kernels, so each recomputes the scores: 7 products of T×T×d
// instead of FlashAttention-2's 5, for race-free parallel jobs on the CPU.
// `plain` (the GPU's form) lowers with one row per job.
#include <algorithm>
#include <cmath>
#include <functional>

#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/loop/attention_layout.h"
#include "core/loop/lower.h"

namespace lathe::loop {

namespace {

ExprRef ceil_div(ExprRef a, int64_t b) { return binary(Op::IDiv, add(a, const_int(b - 1)), const_int(b)); }
ExprRef f32(double v) { return const_float(v, DType::F32); }
ExprRef fvar(const std::string& n) { return var(n, DType::F32); }
ExprRef fadd(ExprRef a, ExprRef b) { return binary(Op::Add, std::move(a), std::move(b)); }
ExprRef fmul(ExprRef a, ExprRef b) { return binary(Op::Mul, std::move(a), std::move(b)); }
ExprRef fsub(ExprRef a, ExprRef b) { return binary(Op::Add, std::move(a), unary(Op::Neg, std::move(b))); }

Stmt vec_for(const std::string& v, ExprRef ext, std::vector<Stmt> body, const std::string& note) {
  Stmt s = make_for(v, std::move(ext), std::move(body), note);
  s.annot.vectorize = true;
  return s;
}

// acc[base + j] += a · b(j) over j < n (vectorized)
Stmt axpy(const std::string& acc, ExprRef base, const std::string& j, int64_t n, ExprRef a, ExprRef b, const std::string& note) {
  ExprRef idx = add(base, var(j));
  return vec_for(j, const_int(n), {make_local_store(acc, idx, fadd(local_load(acc, DType::F32, idx), fmul(a, b)))}, note);
}

}  // namespace

LoopFunc lower_attention_bwd_kernel(const KernelGraph& kg, int kernel, const AttentionParams& P) {
  const Kernel& kn_ = kg.kernels.at(kernel);
  auto spec = attention_bwd_spec(kn_.root);
  LATHE_CHECK(spec.has_value(), "lower_attention_bwd_kernel on a kernel that is not the fused attention backward");
  NodeRef R = kn_.root;
  const int part = spec->part;
  const Shape &qs = R->inputs[0]->shape, &ks = R->inputs[1]->shape, &vs = R->inputs[2]->shape;
  const size_t r = qs.size();
  LATHE_CHECK(qs[r - 1].is_const() && vs[r - 1].is_const(), "attention backward: the head dims must be constant");
  const int64_t Ec = qs[r - 1].value(), Evc = vs[r - 1].value();
  LoopFunc f;
  f.name = kn_.name;
  f.kernel = kn_.id;
  f.kind = "attention_bwd";
  f.dims = kg.symbols;
  f.buffers.push_back({kn_.output, "out", DType::F32, true});
  std::vector<std::string> names{"q", "k", "v"};
  if (spec->has_mask) names.push_back("mask");
  names.push_back("os");
  names.push_back("dout");
  const AttentionOperands ops = attention_operands(kg, f, R->inputs, names);
  const std::vector<Layout>& lay = ops.lay;
  const std::vector<int>& param = ops.param;
  const int pq = param[0], pk = param[1], pv = param[2], pm = spec->has_mask ? param[3] : -1;
  const size_t ios = R->inputs.size() - 2, ido = R->inputs.size() - 1;
  const int pos = param[ios], pdo = param[ido];
  int64_t BQ = std::max(P.bq, 1), BK = std::max(P.bk, 1);
  const int MR = std::max(P.mr, 1), LN = 8;
  // register-tiled products (the forward's micro-kernels) when every product's columns are
  // whole 8-lane vectors; else plain row loops (the GPU's form and odd head dims)
  bool tiled = P.vector && Ec % LN == 0 && Evc % LN == 0 && BK % LN == 0 && BQ % MR == 0 && BK % MR == 0;
  auto round_up = [](int64_t a, int64_t b) { return (a + b - 1) / b * b; };
  auto clamp = [&](bool t) {  // tiles no larger than the sequences (rounded to the register tile)
    BQ = std::max(P.bq, 1), BK = std::max(P.bk, 1);
    if (qs[r - 2].is_const() && qs[r - 2].value() > 0) BQ = std::min<int64_t>(BQ, t ? round_up(qs[r - 2].value(), MR) : qs[r - 2].value());
    if (ks[r - 2].is_const() && ks[r - 2].value() > 0) BK = std::min<int64_t>(BK, t ? round_up(ks[r - 2].value(), LN) : ks[r - 2].value());
  };
  clamp(tiled);
  if (tiled && (BK % MR != 0 || BQ % MR != 0)) clamp(tiled = false);
  ExprRef L = from_sym(qs[r - 2]), S = from_sym(ks[r - 2]), E = const_int(Ec), Ev = const_int(Evc);
  SymInt Bs = 1;
  for (size_t d = 0; d + 2 < r; ++d) Bs = Bs * qs[d];
  ExprRef B = from_sym(Bs);
  const double log2e = 1.4426950408889634;
  const double c2 = (double)spec->scale * log2e;

  // batch offsets of every operand from bh
  std::vector<ExprRef> off;
  for (auto& l : lay) off.push_back(l.offset);
  ExprRef rem = var("bh");
  for (size_t d = r - 2; d-- > 0;) {
    ExprRef c = d == 0 ? rem : binary(Op::Mod, rem, from_sym(qs[d]));
    if (d > 0) rem = binary(Op::IDiv, rem, from_sym(qs[d]));
    for (size_t o = 0; o < lay.size(); ++o)
      off[o] = add(off[o], mul(o == 1 || o == 2 ? kv_index(c, qs[d], R->inputs[o]->shape[d]) : c, lay[o].strides[d]));
  }
  auto at = [&](size_t o, ExprRef row, ExprRef col) {  // operand o's element (row, col) of this batch
    return add(var("off" + std::to_string(o)), add(mul(row, lay[o].strides[r - 2]), mul(col, lay[o].strides[r - 1])));
  };
  ExprRef i = var("i"), j = var("j"), e = var("e"), c = var("c");
  std::vector<Stmt> job;
  const bool by_query = part != 1;
  ExprRef ntiles = by_query ? ceil_div(L, BQ) : ceil_div(S, BK);
  job.push_back(make_let("bh", DType::I64, binary(Op::IDiv, var("t"), ntiles)));
  for (size_t o = 0; o < lay.size(); ++o) job.push_back(make_let("off" + std::to_string(o), DType::I64, off[o]));

  // one query row against the staged K/V tile (kt: E × BK, vt: Ev × BK, both transposed):
  // sc[j] = p_ij and dp[j] = ds_ij for j < BK (0 past the tile or where masked). The query row
  // is qrow (scaled by scale·log2 e) and the dO row gvec, both local; lse and D in lets.
  auto probs = [&](ExprRef qpos, const std::string& qrow, ExprRef qbase, const std::string& gvec, ExprRef gbase) {
    std::vector<Stmt> st;
    st.push_back(vec_for("j", const_int(BK), {make_local_store("sc", j, f32(0)), make_local_store("dp", j, f32(0))}, "zero the row"));
    st.push_back(make_for("e", E,
                          {make_let("qe", DType::F32, local_load(qrow, DType::F32, add(qbase, e))),
                           axpy("sc", const_int(0), "j", BK, fvar("qe"), local_load("kt", DType::F32, add(mul(e, const_int(BK)), j)),
                                "scores: keys")},
                          "scores: embedding"));
    st.push_back(make_for("c", Ev,
                          {make_let("gc", DType::F32, local_load(gvec, DType::F32, add(gbase, c))),
                           axpy("dp", const_int(0), "j", BK, fvar("gc"), local_load("vt", DType::F32, add(mul(c, const_int(BK)), j)),
                                "dO·Vᵀ: keys")},
                          "dO·Vᵀ: value dim"));
    ExprRef valid = lt(j, var("kn"));
    if (spec->causal) valid = logical_and(valid, le(add(var("k0"), j), qpos));
    ExprRef x = local_load("sc", DType::F32, j);
    if (spec->has_mask) x = fadd(x, fmul(load(pm, DType::F32, at(3, qpos, add(var("k0"), j)), valid), f32(log2e)));
    st.push_back(vec_for("j", const_int(BK),
                         {make_let("p", DType::F32, select(valid, unary(Op::Exp2, fsub(x, fvar("lse"))), f32(0))),
                          make_local_store("sc", j, fvar("p")),
                          make_local_store("dp", j, fmul(fvar("p"), fsub(local_load("dp", DType::F32, j), fvar("dd"))))},
                         "p = 2^(x - lse), ds = p·(dp - D)"));
    return st;
  };
  // D = dO·O of a query row, from dO (local gvec at gbase) and OS in memory
  auto row_d = [&](ExprRef qpos, const std::string& gvec, ExprRef gbase) {
    std::vector<Stmt> st;
    st.push_back(make_let("dd", DType::F32, f32(0)));
    Stmt dl = vec_for("c", Ev,
                      {make_assign("dd", fadd(fvar("dd"), fmul(local_load(gvec, DType::F32, add(gbase, c)), load(pos, DType::F32, at(ios, qpos, c)))))},
                      "D = dO·O");
    dl.reduces = {"dd"};
    st.push_back(std::move(dl));
    st.push_back(make_let("lse", DType::F32, load(pos, DType::F32, at(ios, qpos, Ev))));
    return st;
  };
  auto stage_kv = [&](bool rows) {  // kt, vt (and kr, K's rows, for dQ) of keys k0 .. k0+kn
    std::vector<Stmt> st;
    ExprRef ok = lt(j, var("kn"));
    std::vector<Stmt> kb{make_local_store("kt", add(mul(e, const_int(BK)), j), load(pk, DType::F32, at(1, add(var("k0"), j), e), ok))};
    if (rows) kb.push_back(make_local_store("kr", add(mul(j, E), e), load(pk, DType::F32, at(1, add(var("k0"), j), e), ok)));
    st.push_back(make_for("j", const_int(BK), {make_for("e", E, std::move(kb), "K tile: embedding")}, "K tile: key"));
    st.push_back(make_for("j", const_int(BK),
                          {make_for("c", Ev, {make_local_store("vt", add(mul(c, const_int(BK)), j), load(pv, DType::F32, at(2, add(var("k0"), j), c), ok))},
                                    "V tile: value dim")},
                          "V tile: key"));
    return st;
  };
  // C[m, n] (=|+=) Σ_k A(m, k) · B[k, n] over m < Mn (in blocks of MR rows), n < N (whole
  // vectors), k < K: an MR × NQ·8 register tile per step, as the forward's micro-kernels.
  // A(m, k) is a scalar local load (broadcast), B's rows are vectors of the local array Bn.
  auto product = [&](const std::string& C, int64_t N, ExprRef Mn, ExprRef K, const std::function<ExprRef(ExprRef, ExprRef)>& A,
                     const std::string& Bn, bool accumulate, const std::string& note) {
    const int NQ = N % (2 * LN) == 0 ? 2 : 1;
    const int64_t NR = (int64_t)NQ * LN;
    std::string u = C + "_";  // names unique per product
    ExprRef m0 = mul(var(u + "mb"), const_int(MR)), n0 = mul(var(u + "nb"), const_int(NR)), kk = var(u + "k");
    std::vector<Stmt> micro;
    micro.push_back(make_alloc(u + "acc", DType::F32, LN, (int64_t)MR * NQ, /*registers=*/true));
    for (int a = 0; a < MR * NQ; ++a) micro.push_back(make_local_store(u + "acc", const_int(a), broadcast(f32(0), LN)));
    std::vector<Stmt> kb;
    for (int q = 0; q < NQ; ++q)
      kb.push_back(make_let(u + "b" + std::to_string(q), DType::F32,
                            local_load(Bn, DType::F32, add(add(mul(kk, const_int(N)), n0), const_int(q * LN)), LN)));
    for (int rr = 0; rr < MR; ++rr) {
      ExprRef a = broadcast(A(add(m0, const_int(rr)), kk), LN);
      for (int q = 0; q < NQ; ++q) {
        ExprRef cur = local_load(u + "acc", DType::F32, const_int(rr * NQ + q), LN);
        kb.push_back(make_local_store(u + "acc", const_int(rr * NQ + q),
                                      fadd(cur, fmul(a, var(u + "b" + std::to_string(q), DType::F32, LN)))));
      }
    }
    Stmt kloop = make_for(u + "k", std::move(K), std::move(kb), note + " (micro-kernel)");
    kloop.reduces = {u + "acc"};
    micro.push_back(std::move(kloop));
    for (int rr = 0; rr < MR; ++rr)
      for (int q = 0; q < NQ; ++q) {
        ExprRef ci = add(add(mul(add(m0, const_int(rr)), const_int(N)), n0), const_int(q * LN));
        ExprRef v = local_load(u + "acc", DType::F32, const_int(rr * NQ + q), LN);
        micro.push_back(make_local_store(C, ci, accumulate ? fadd(local_load(C, DType::F32, ci, LN), v) : v));
      }
    return make_for(u + "mb", ceil_div(std::move(Mn), MR), {make_for(u + "nb", const_int(N / NR), std::move(micro), note + ": columns")},
                    note + ": MR rows");
  };
  // the probabilities and dS of a BQ × BK tile in place: sc = p, dp = ds (rows i < qn, the
  // query at qbase + i; lse and D of row i in the local arrays lses and dds)
  auto tile_probs = [&](ExprRef qbase) {
    ExprRef qpos = add(qbase, i), idx = add(mul(i, const_int(BK)), j);
    ExprRef valid = lt(j, var("kn"));
    if (spec->causal) valid = logical_and(valid, le(add(var("k0"), j), qpos));
    ExprRef x = local_load("sc", DType::F32, idx);
    if (spec->has_mask) x = fadd(x, fmul(load(pm, DType::F32, at(3, qpos, add(var("k0"), j)), valid), f32(log2e)));
    return make_for("i", var("qn"),
                    {make_let("lse", DType::F32, local_load("lses", DType::F32, i)), make_let("dd", DType::F32, local_load("dds", DType::F32, i)),
                     vec_for("j", const_int(BK),
                             {make_let("p", DType::F32, select(valid, unary(Op::Exp2, fsub(x, fvar("lse"))), f32(0))),
                              make_local_store("sc", idx, fvar("p")),
                              make_local_store("dp", idx, fmul(fvar("p"), fsub(local_load("dp", DType::F32, idx), fvar("dd"))))},
                             "p = 2^(x - lse), ds = p·(dp - D)")},
                    "probabilities of the tile: query rows");
  };
  // the query tile at qbase (qn rows): Q × scale·log2 e, dO, lse, D
  auto load_queries = [&](ExprRef qbase) {
    ExprRef qpos = add(qbase, i);
    std::vector<Stmt> row;
    row.push_back(vec_for("e", E, {make_local_store("qs", add(mul(i, E), e), fmul(load(pq, DType::F32, at(0, qpos, e)), f32(c2)))},
                          "Q row × scale·log2(e)"));
    row.push_back(vec_for("c", Ev, {make_local_store("gs", add(mul(i, Ev), c), load(pdo, DType::F32, at(ido, qpos, c)))}, "dO row"));
    for (auto& st : row_d(qpos, "gs", mul(i, Ev))) row.push_back(std::move(st));
    row.push_back(make_local_store("lses", i, fvar("lse")));
    row.push_back(make_local_store("dds", i, fvar("dd")));
    return make_for("i", var("qn"), std::move(row), "load the query tile");
  };
  auto scores_and_dp = [&](std::vector<Stmt>& out) {  // sc = qs·kt, dp = gs·vt over the tile
    out.push_back(product("sc", BK, var("qn"), E, [&](ExprRef m, ExprRef k) { return local_load("qs", DType::F32, add(mul(m, E), k)); },
                          "kt", false, "scores Q·Kᵀ"));
    out.push_back(product("dp", BK, var("qn"), Ev, [&](ExprRef m, ExprRef k) { return local_load("gs", DType::F32, add(mul(m, Ev), k)); },
                          "vt", false, "dP = dO·Vᵀ"));
  };
  // part 0's end: the query tile's dQ rows × scale
  auto write_dq = [&]() {
    ExprRef qpos = add(var("q0"), i);
    return make_for("i", var("qn"),
                    {vec_for("e", E,
                             {make_store(0, add(mul(add(mul(var("bh"), L), qpos), E), e),
                                         fmul(local_load("dq", DType::F32, add(mul(i, E), e)), f32(spec->scale)))},
                             "dQ row × scale")},
                    "write dQ");
  };
  // a key-tile job's start: the tile k0 .. k0 + kn of job t, K and V staged, dK|dV zeroed
  auto key_tile_start = [&]() {
    job.push_back(make_let("k0", DType::I64, mul(binary(Op::Mod, var("t"), ntiles), const_int(BK))));
    job.push_back(make_let("kn", DType::I64, min_of(const_int(BK), sub(S, var("k0")))));
    job.push_back(make_alloc("dk", DType::F32, 1, BK * Ec));
    job.push_back(make_alloc("dv", DType::F32, 1, BK * Evc));
    for (auto& st : stage_kv(false)) job.push_back(std::move(st));
    job.push_back(make_for("j", const_int(BK),
                           {vec_for("e", E, {make_local_store("dk", add(mul(j, E), e), f32(0))}, "zero dK"),
                            vec_for("c", Ev, {make_local_store("dv", add(mul(j, Ev), c), f32(0))}, "zero dV")},
                           "zero the dK|dV tile"));
  };
  // a key-tile job's end. dK was accumulated against Q·scale·log2 e: × 1/log2 e gives dSᵀ·Q·scale
  auto write_dkdv = [&]() {
    ExprRef orow = mul(add(mul(var("bh"), S), add(var("k0"), j)), add(E, Ev));
    return make_for("j", var("kn"),
                    {vec_for("e", E, {make_store(0, add(orow, e), fmul(local_load("dk", DType::F32, add(mul(j, E), e)), f32(1 / log2e)))},
                             "dK row"),
                     vec_for("c", Ev, {make_store(0, add(add(orow, E), c), local_load("dv", DType::F32, add(mul(j, Ev), c)))}, "dV row")},
                    "write dK|dV");
  };
  if (tiled) {
    job.push_back(make_alloc("kt", DType::F32, 1, Ec * BK));
    job.push_back(make_alloc("vt", DType::F32, 1, Evc * BK));
    job.push_back(make_alloc("sc", DType::F32, 1, BQ * BK));
    job.push_back(make_alloc("dp", DType::F32, 1, BQ * BK));
    job.push_back(make_alloc("qs", DType::F32, 1, BQ * Ec));
    job.push_back(make_alloc("gs", DType::F32, 1, BQ * Evc));
    job.push_back(make_alloc("lses", DType::F32, 1, BQ));
    job.push_back(make_alloc("dds", DType::F32, 1, BQ));
    if (by_query) {
      job.push_back(make_let("q0", DType::I64, mul(binary(Op::Mod, var("t"), ntiles), const_int(BQ))));
      job.push_back(make_let("qn", DType::I64, min_of(const_int(BQ), sub(L, var("q0")))));
      if (part == 0) job.push_back(make_alloc("kr", DType::F32, 1, BK * Ec));
      if (part == 0) job.push_back(make_alloc("dq", DType::F32, 1, BQ * Ec));
      job.push_back(load_queries(var("q0")));
      if (part == 0)
        job.push_back(make_for("i", const_int(BQ), {vec_for("e", E, {make_local_store("dq", add(mul(i, E), e), f32(0))}, "zero")}, "zero dQ"));
      job.push_back(make_let("kend", DType::I64, spec->causal && part == 0 ? min_of(S, add(var("q0"), var("qn"))) : S));
      std::vector<Stmt> tile;
      tile.push_back(make_let("k0", DType::I64, mul(var("kb"), const_int(BK))));
      tile.push_back(make_let("kn", DType::I64, min_of(const_int(BK), sub(var("kend"), var("k0")))));
      for (auto& st : stage_kv(part == 0)) tile.push_back(std::move(st));
      scores_and_dp(tile);
      tile.push_back(tile_probs(var("q0")));
      if (part == 0) {
        tile.push_back(product("dq", Ec, var("qn"), var("kn"),
                               [&](ExprRef m, ExprRef k) { return local_load("dp", DType::F32, add(mul(m, const_int(BK)), k)); }, "kr", true,
                               "dQ += dS·K"));
      } else {
        ExprRef qpos = add(var("q0"), i);
        tile.push_back(make_for("i", var("qn"),
                                {make_for("j", var("kn"),
                                          {make_store(0, add(mul(add(mul(var("bh"), L), qpos), S), add(var("k0"), j)),
                                                      local_load("dp", DType::F32, add(mul(i, const_int(BK)), j)))},
                                          "write dS: keys")},
                                "write dS: query rows"));
      }
      job.push_back(make_for("kb", ceil_div(var("kend"), BK), std::move(tile), spec->causal && part == 0 ? "K/V tiles up to the diagonal" : "K/V tiles"));
      if (part == 0) job.push_back(write_dq());
    } else {
      key_tile_start();
      job.push_back(make_let("qst", DType::I64, spec->causal ? min_of(var("k0"), L) : const_int(0)));
      std::vector<Stmt> qt;
      qt.push_back(make_let("q0", DType::I64, add(var("qst"), mul(var("qb"), const_int(BQ)))));
      qt.push_back(make_let("qn", DType::I64, min_of(const_int(BQ), sub(L, var("q0")))));
      qt.push_back(load_queries(var("q0")));
      scores_and_dp(qt);
      qt.push_back(tile_probs(var("q0")));
      qt.push_back(product("dv", Evc, var("kn"), var("qn"),
                           [&](ExprRef m, ExprRef k) { return local_load("sc", DType::F32, add(mul(k, const_int(BK)), m)); }, "gs", true,
                           "dV += Pᵀ·dO"));
      qt.push_back(product("dk", Ec, var("kn"), var("qn"),
                           [&](ExprRef m, ExprRef k) { return local_load("dp", DType::F32, add(mul(k, const_int(BK)), m)); }, "qs", true,
                           "dK += dSᵀ·Q"));
      job.push_back(make_for("qb", ceil_div(sub(L, var("qst")), BQ), std::move(qt),
                             spec->causal ? "query tiles from the tile's first key" : "query tiles"));
      job.push_back(write_dkdv());
    }
  } else {
  job.push_back(make_alloc("kt", DType::F32, 1, Ec * BK));
  job.push_back(make_alloc("vt", DType::F32, 1, Evc * BK));
  job.push_back(make_alloc("sc", DType::F32, 1, BK));
  job.push_back(make_alloc("dp", DType::F32, 1, BK));
  if (by_query) {
    job.push_back(make_let("q0", DType::I64, mul(binary(Op::Mod, var("t"), ntiles), const_int(BQ))));
    job.push_back(make_let("qn", DType::I64, min_of(const_int(BQ), sub(L, var("q0")))));
    job.push_back(make_alloc("qs", DType::F32, 1, BQ * Ec));
    job.push_back(make_alloc("gs", DType::F32, 1, BQ * Evc));
    job.push_back(make_alloc("lses", DType::F32, 1, BQ));
    job.push_back(make_alloc("ds_", DType::F32, 1, BQ));
    if (part == 0) job.push_back(make_alloc("kr", DType::F32, 1, BK * Ec));
    if (part == 0) job.push_back(make_alloc("dq", DType::F32, 1, BQ * Ec));
    ExprRef qpos = add(var("q0"), i);
    {  // the query tile: Q × scale·log2 e, dO, lse, D; dQ zeroed
      std::vector<Stmt> row;
      row.push_back(vec_for("e", E,
                            {make_local_store("qs", add(mul(i, E), e), fmul(load(pq, DType::F32, at(0, qpos, e)), f32(c2)))},
                            "Q row × scale·log2(e)"));
      row.push_back(vec_for("c", Ev, {make_local_store("gs", add(mul(i, Ev), c), load(pdo, DType::F32, at(ido, qpos, c)))}, "dO row"));
      for (auto& s : row_d(qpos, "gs", mul(i, Ev))) row.push_back(std::move(s));
      row.push_back(make_local_store("lses", i, fvar("lse")));
      row.push_back(make_local_store("ds_", i, fvar("dd")));
      if (part == 0) row.push_back(vec_for("e", E, {make_local_store("dq", add(mul(i, E), e), f32(0))}, "zero the dQ row"));
      job.push_back(make_for("i", var("qn"), std::move(row), "load the query tile"));
    }
    // dS must be written everywhere (zeros above the diagonal): part 2 visits every tile
    ExprRef kend = spec->causal && part == 0 ? min_of(S, add(var("q0"), var("qn"))) : S;
    job.push_back(make_let("kend", DType::I64, kend));
    std::vector<Stmt> tile;
    tile.push_back(make_let("k0", DType::I64, mul(var("kb"), const_int(BK))));
    tile.push_back(make_let("kn", DType::I64, min_of(const_int(BK), sub(var("kend"), var("k0")))));
    for (auto& s : stage_kv(part == 0)) tile.push_back(std::move(s));
    std::vector<Stmt> row{make_let("lse", DType::F32, local_load("lses", DType::F32, i)),
                          make_let("dd", DType::F32, local_load("ds_", DType::F32, i))};
    for (auto& s : probs(qpos, "qs", mul(i, E), "gs", mul(i, Ev))) row.push_back(std::move(s));
    if (part == 0) {
      row.push_back(make_for("j", var("kn"),
                             {make_let("dsj", DType::F32, local_load("dp", DType::F32, j)),
                              axpy("dq", mul(i, E), "e", Ec, fvar("dsj"), local_load("kr", DType::F32, add(mul(j, E), e)), "dQ += ds·K")},
                             "dQ: keys of the tile"));
    } else {
      row.push_back(make_for("j", var("kn"),
                             {make_store(0, add(mul(add(mul(var("bh"), L), qpos), S), add(var("k0"), j)), local_load("dp", DType::F32, j))},
                             "write dS"));
    }
    tile.push_back(make_for("i", var("qn"), std::move(row), "query rows"));
    job.push_back(make_for("kb", ceil_div(var("kend"), BK), std::move(tile), spec->causal && part == 0 ? "K/V tiles up to the diagonal" : "K/V tiles"));
    if (part == 0) job.push_back(write_dq());
  } else {
    job.push_back(make_alloc("qv", DType::F32, 1, Ec));
    job.push_back(make_alloc("gv", DType::F32, 1, Evc));
    key_tile_start();
    // causal: query rows before the tile's first key see none of its keys
    ExprRef qstart = spec->causal ? min_of(var("k0"), L) : const_int(0);
    job.push_back(make_let("qst", DType::I64, qstart));
    ExprRef qpos = add(var("qst"), i);
    std::vector<Stmt> row;
    row.push_back(vec_for("e", E, {make_local_store("qv", e, fmul(load(pq, DType::F32, at(0, qpos, e)), f32(c2)))}, "Q row × scale·log2(e)"));
    row.push_back(vec_for("c", Ev, {make_local_store("gv", c, load(pdo, DType::F32, at(ido, qpos, c)))}, "dO row"));
    for (auto& s : row_d(qpos, "gv", const_int(0))) row.push_back(std::move(s));
    for (auto& s : probs(qpos, "qv", const_int(0), "gv", const_int(0))) row.push_back(std::move(s));
    row.push_back(make_for("j", var("kn"),
                           {make_let("pj", DType::F32, local_load("sc", DType::F32, j)),
                            make_let("dsj", DType::F32, local_load("dp", DType::F32, j)),
                            axpy("dv", mul(j, Ev), "c", Evc, fvar("pj"), local_load("gv", DType::F32, c), "dV += p·dO"),
                            axpy("dk", mul(j, E), "e", Ec, fvar("dsj"), local_load("qv", DType::F32, e), "dK += ds·Q")},
                           "dK|dV: keys of the tile"));
    job.push_back(make_for("i", sub(L, var("qst")), std::move(row), spec->causal ? "query rows from the tile's first key" : "query rows"));
    job.push_back(write_dkdv());
  }
  }  // plain row loops
  Stmt tloop = make_for("t", mul(B, ntiles), std::move(job), by_query ? "jobs: batch·heads × query tiles" : "jobs: batch·heads × key tiles");
  tloop.annot.parallel = true;
  f.body.push_back(std::move(tloop));
  f.schedule_log.push_back(std::string("attention backward (") + (part == 0 ? "dQ" : part == 1 ? "dK|dV" : "dS") +
                           "): BQ=" + std::to_string(BQ) + " BK=" + std::to_string(BK) + (tiled ? " MR=" + std::to_string(MR) + " tiled" : "") +
                           (spec->causal ? " causal" : "") +
                           (spec->has_mask ? " +mask" : ""));
  unique_loop_names(f);
  return f;
}

AttentionDesc attention_bwd_desc(const KernelGraph& kg, int kernel) {
  const Kernel& k = kg.kernels.at(kernel);
  auto spec = attention_bwd_spec(k.root);
  LATHE_CHECK(spec.has_value(), "attention_bwd_desc on a kernel that is not the fused attention backward");
  AttentionDesc d;
  d.causal = spec->causal, d.has_mask = spec->has_mask, d.stats = false, d.scale = spec->scale, d.part = spec->part;
  AttentionDescOperands o = describe_attention_operands(kg, k, d, "attention backward");
  // after Q, K, V (and the mask): OS (the stats forward's output) and dO, the last two inputs
  const size_t r = k.root->inputs[0]->shape.size();
  const size_t ios = k.root->inputs.size() - 2, ido = k.root->inputs.size() - 1;
  d.os = o.param[ios], d.dout = o.param[ido];
  d.ooff = o.off[ios], d.goff = o.off[ido];
  d.osL = o.lay[ios].strides[r - 2], d.osC = o.lay[ios].strides[r - 1];
  d.gsL = o.lay[ido].strides[r - 2], d.gsC = o.lay[ido].strides[r - 1];
  return d;
}

}  // namespace lathe::loop
