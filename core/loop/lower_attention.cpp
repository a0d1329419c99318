// lower_attention.cpp — lower_attention_kernel: the fused attention Extern (core/ir/attention_op.h)
// → a FlashAttention-style loop nest in backend-neutral loop IR. The T×T score matrix is never
// stored: each job keeps a BQ × BK tile of scores, the running row maxima and sums (online
// softmax, in base 2) and a BQ × Ev output accumulator.
//
//   parallel for t in [batch·heads × ceil(L / BQ)]:        one query tile per job
//     qs = Q tile × scale·log2(e)        (zero rows past L)
//     m = -inf, l = 0, o = 0
//     for kt over K/V tiles up to the tile's last query when causal (tiles above the diagonal skipped):
//       kt = K tile, transposed (E × BK), zero past the end
//       sc = qs · kt                     (the j loop vectorized)
//       per row: x = sc (+ mask·log2(e)), -inf where j > i (causal) or past S
//                m' = max(m, max x); p = 2^(x - m'); alpha = 2^(m - m')
//                l = l·alpha + Σp;  o = o·alpha + p · V tile
//     out rows = o / l
// The stats form (autodiff's forward) writes rows of Ev + 1: the output, then m + log2(l).
// A row whose scores so far are all -inf shifts by 0 instead of -inf (so p and alpha are 0,
// not NaN); a row that stays so to the end gives 0/0 = NaN, as the unfused softmax does.
// `plain` lowers with BQ = 1 (one query row per iteration), the CUDA backend's form: its
// renderer gives each iteration of the outer loop a thread.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/ir/attention_op.h"
#include "core/ir/diag.h"
#include "core/loop/attention_layout.h"
#include "core/loop/lower.h"

namespace lathe::loop {

namespace {

ExprRef ceil_div(ExprRef a, int64_t b) { return binary(Op::IDiv, add(a, const_int(b - 1)), const_int(b)); }
ExprRef f32(double v) { return const_float(v, DType::F32); }
ExprRef fvar(const std::string& n) { return var(n, DType::F32); }

}  // namespace

Layout attention_layout(const KernelGraph& kg, NodeRef n) {
  Layout l;
  const Shape& s = n->shape;
  l.strides.resize(s.size());
  if (auto it = kg.buffer_of.find(n); it != kg.buffer_of.end()) {
    l.buffer = it->second;
    l.offset = const_int(0);
    ExprRef acc = const_int(1);
    for (size_t d = s.size(); d-- > 0;) {
      l.strides[d] = s[d] == SymInt(1) ? const_int(0) : acc;
      acc = mul(acc, from_sym(s[d]));
    }
    return l;
  }
  LATHE_CHECK(n->op == Op::View && n->attrs.view && !n->attrs.view->has_mask() && kg.buffer_of.count(n->inputs[0]),
              "attention operand " + std::to_string(n->id) + " is neither a buffer nor a strided view of one");
  const ViewSpec& v = *n->attrs.view;
  l.buffer = kg.buffer_of.at(n->inputs[0]);
  l.offset = from_sym(v.offset);
  for (size_t d = 0; d < s.size(); ++d) l.strides[d] = s[d] == SymInt(1) ? const_int(0) : from_sym(v.strides[d]);
  return l;
}


AttentionOperands attention_operands(const KernelGraph& kg, LoopFunc& f, const std::vector<NodeRef>& inputs,
                                     const std::vector<std::string>& names) {
  AttentionOperands r;
  for (size_t i = 0; i < inputs.size(); ++i) {
    r.lay.push_back(attention_layout(kg, inputs[i]));
    int p = -1;
    for (size_t b = 0; b < f.buffers.size(); ++b)
      if (f.buffers[b].buffer == r.lay.back().buffer) p = (int)b;
    if (p < 0) {
      p = (int)f.buffers.size();
      f.buffers.push_back({r.lay.back().buffer, names.at(i), kg.buffers[r.lay.back().buffer].dtype, false});
    }
    r.param.push_back(p);
  }
  return r;
}

AttentionDescOperands describe_attention_operands(const KernelGraph& kg, const Kernel& k, AttentionDesc& d,
                                                  const char* what) {
  NodeRef R = k.root;
  const Shape &qs = R->inputs[0]->shape, &ks = R->inputs[1]->shape, &vs = R->inputs[2]->shape;
  const size_t r = qs.size();
  LATHE_CHECK(qs[r - 1].is_const() && vs[r - 1].is_const(), std::string(what) + ": the head dims must be constant");
  d.E = qs[r - 1].value(), d.Ev = vs[r - 1].value();
  d.L = from_sym(qs[r - 2]), d.S = from_sym(ks[r - 2]);
  SymInt Bs = 1;
  for (size_t i = 0; i + 2 < r; ++i) Bs = Bs * qs[i];
  d.B = from_sym(Bs);
  // the buffer parameters as the kernel's lowering numbers them: out, then each new buffer
  AttentionDescOperands o;
  std::vector<int> bufs{k.output};
  for (NodeRef in : R->inputs) {
    o.lay.push_back(attention_layout(kg, in));
    auto it = std::find(bufs.begin(), bufs.end(), o.lay.back().buffer);
    o.param.push_back((int)(it - bufs.begin()));
    if (it == bufs.end()) bufs.push_back(o.lay.back().buffer);
  }
  for (auto& l : o.lay) o.off.push_back(l.offset);
  ExprRef rem = var("bh");
  for (size_t i = r - 2; i-- > 0;) {
    ExprRef c = i == 0 ? rem : binary(Op::Mod, rem, from_sym(qs[i]));
    if (i > 0) rem = binary(Op::IDiv, rem, from_sym(qs[i]));
    for (size_t n = 0; n < o.lay.size(); ++n)
      o.off[n] = add(o.off[n], mul(n == 1 || n == 2 ? kv_index(c, qs[i], R->inputs[n]->shape[i]) : c, o.lay[n].strides[i]));
  }
  const auto& lay = o.lay;
  d.q = o.param[0], d.k = o.param[1], d.v = o.param[2], d.mask = d.has_mask ? o.param[3] : -1;
  d.qoff = o.off[0], d.koff = o.off[1], d.voff = o.off[2];
  d.qsL = lay[0].strides[r - 2], d.qsE = lay[0].strides[r - 1], d.ksS = lay[1].strides[r - 2], d.ksE = lay[1].strides[r - 1];
  d.vsS = lay[2].strides[r - 2], d.vsC = lay[2].strides[r - 1];
  if (d.has_mask) d.moff = o.off[3], d.msL = lay[3].strides[r - 2], d.msS = lay[3].strides[r - 1];
  return o;
}

AttentionDesc attention_desc(const KernelGraph& kg, int kernel) {
  const Kernel& k = kg.kernels.at(kernel);
  auto spec = attention_spec(k.root);
  LATHE_CHECK(spec.has_value(), "attention_desc on a kernel that is not fused attention");
  AttentionDesc d;
  d.causal = spec->causal, d.has_mask = spec->has_mask, d.stats = spec->stats, d.scale = spec->scale;
  describe_attention_operands(kg, k, d, "attention");
  return d;
}

// The host's vectors (host_matmul_params: 16 lanes with AVX-512, 8 with AVX2). On 16 lanes
// the register tiles are 8 rows x 32 (16 zmm accumulators, as the GEMM's); GPT-2's attention
// (T 128, heads of 64) ran its inner products on 8-lane vectors at half the FMA width.
// LATHE_ATTENTION_LANES=8 keeps the 8-lane 4 x 16 tiles (A/B runs); LATHE_ATTENTION_CAUSAL_SKIP=0
// computes a causal tile's masked panels (A/B runs).
AttentionParams host_attention_params() {
  AttentionParams p;
  p.lanes = host_matmul_params().lanes == 16 ? 16 : 8;
  if (const char* e = std::getenv("LATHE_ATTENTION_LANES"); e && *e) {
    const std::string v(e);
    if (v != "8" && v != "16") throw UserError("LATHE_ATTENTION_LANES='" + v + "': expected 8 or 16");
    p.lanes = v == "16" ? 16 : 8;
  }
  if (const char* e = std::getenv("LATHE_ATTENTION_CAUSAL_SKIP"); e && std::string(e) == "0") p.causal_skip = false;
  if (const char* e = std::getenv("LATHE_ATTENTION_CAUSAL_ROWS"); e && std::string(e) == "0") p.causal_rows = false;
  if (const char* e = std::getenv("LATHE_ATTENTION_TRANSPOSE"); e && std::string(e) == "0") p.transpose = false;
  if (const char* e = std::getenv("LATHE_ATTENTION_TILE"); e && *e) {
    int bq = 0, bk = 0, mr = p.mr;
    int n = std::sscanf(e, "%dx%dx%d", &bq, &bk, &mr);
    if (n < 2 || bq < 1 || bk < 1 || bq > 256 || bk > 1024 || mr < 1 || mr > 8 || bq % mr)
      throw UserError("LATHE_ATTENTION_TILE='" + std::string(e) +
                      "': expected BQxBK[xMR], e.g. 64x64x4 (BQ <= 256 a multiple of MR, BK <= 1024, MR <= 8)");
    p.bq = bq, p.bk = bk, p.mr = mr;
    if (n == 3) p.mr16 = mr;  // (an MR given is every tile's)
  }
  return p;
}

namespace {
ExprRef max_of(ExprRef a, ExprRef b) { return select(lt(a, b), b, a); }
}  // namespace

LoopFunc lower_attention_kernel(const KernelGraph& kg, int kernel, const AttentionParams& P) {
  const Kernel& k = kg.kernels.at(kernel);
  auto spec = attention_spec(k.root);
  LATHE_CHECK(spec.has_value(), "lower_attention_kernel on a kernel that is not fused attention");
  LATHE_CHECK(P.bq >= 1 && P.bk >= 1, "attention tile sizes must be positive");
  NodeRef R = k.root;
  const Shape &qs = R->inputs[0]->shape, &ks = R->inputs[1]->shape, &vs = R->inputs[2]->shape;
  size_t r = qs.size();
  LoopFunc f;
  f.name = k.name;
  f.kernel = k.id;
  f.kind = "attention";
  f.dims = kg.symbols;
  f.buffers.push_back({k.output, "out", DType::F32, true});
  const AttentionOperands ops = attention_operands(kg, f, R->inputs, {"q", "k", "v", "mask"});
  const std::vector<Layout>& lay = ops.lay;
  const std::vector<int>& param = ops.param;
  const int pq = param[0], pk = param[1], pv = param[2], pm = spec->has_mask ? param[3] : -1;
  // per shape: tiles no larger than the sequence (rounded to the register tile), so short
  // sequences do not compute padding
  int64_t BQ = P.bq, BK = P.bk;
  auto round_up = [](int64_t a, int64_t b) { return (a + b - 1) / b * b; };
  if (ks[r - 2].is_const() && ks[r - 2].value() > 0 && P.vector && P.bk % 8 == 0)
    BK = std::min<int64_t>(BK, round_up(ks[r - 2].value(), P.bk % 16 == 0 ? 16 : 8));
  // the vectors of the score tile (BK a multiple of them) and of P·V (Ev a multiple of them),
  // and the rows of the register tiles on them
  const int LN = P.lanes == 16 && BK % 16 == 0 ? 16 : 8;
  const int MR = LN == 16 ? P.mr16 : P.mr;
  if (qs[r - 2].is_const() && qs[r - 2].value() > 0)
    BQ = std::min<int64_t>(BQ, round_up(qs[r - 2].value(), std::max(MR, 1)));
  ExprRef L = from_sym(qs[r - 2]), S = from_sym(ks[r - 2]), Ev = from_sym(vs[r - 1]);
  LATHE_CHECK(qs[r - 1].is_const() && vs[r - 1].is_const(), "attention: the head dims must be constant");
  const int64_t Ec = qs[r - 1].value(), Evc = vs[r - 1].value();
  SymInt Bs = 1;
  for (size_t d = 0; d + 2 < r; ++d) Bs = Bs * qs[d];
  ExprRef B = from_sym(Bs);
  const double log2e = 1.4426950408889634;

  // batch coordinates of bh, and the Q, K, V and mask offsets they give
  ExprRef bh = var("bh"), qoff = lay[0].offset, koff = lay[1].offset, voff = lay[2].offset;
  ExprRef moff = spec->has_mask ? lay[3].offset : const_int(0);
  const Shape* ms = spec->has_mask ? &R->inputs[3]->shape : nullptr;
  std::vector<ExprRef> mst = ms ? lay[3].strides : std::vector<ExprRef>{};
  ExprRef rem = bh;
  for (size_t d = r - 2; d-- > 0;) {
    ExprRef n = from_sym(qs[d]);
    ExprRef c = d == 0 ? rem : binary(Op::Mod, rem, n);
    if (d > 0) rem = binary(Op::IDiv, rem, n);
    qoff = add(qoff, mul(c, lay[0].strides[d]));
    koff = add(koff, mul(kv_index(c, qs[d], ks[d]), lay[1].strides[d]));
    voff = add(voff, mul(kv_index(c, qs[d], vs[d]), lay[2].strides[d]));
    if (ms) moff = add(moff, mul(c, mst[d]));
  }
  ExprRef qsL = lay[0].strides[r - 2], qsE = lay[0].strides[r - 1], ksS = lay[1].strides[r - 2], ksE = lay[1].strides[r - 1];
  ExprRef vsS = lay[2].strides[r - 2], vsC = lay[2].strides[r - 1];
  const bool v_rows = is_const(vsC, 1);  // V's rows are contiguous: vector loads

  std::vector<Stmt> job;
  job.push_back(make_let("bh", DType::I64, binary(Op::IDiv, var("t"), ceil_div(L, BQ))));
  job.push_back(make_let("q0", DType::I64, mul(binary(Op::Mod, var("t"), ceil_div(L, BQ)), const_int(BQ))));
  job.push_back(make_let("qn", DType::I64, min_of(const_int(BQ), sub(L, var("q0")))));
  job.push_back(make_let("qoff", DType::I64, qoff));
  job.push_back(make_let("koff", DType::I64, koff));
  job.push_back(make_let("voff", DType::I64, voff));
  if (ms) job.push_back(make_let("moff", DType::I64, moff));
  job.push_back(make_alloc("qs", DType::F32, 1, BQ * Ec));
  job.push_back(make_alloc("kt", DType::F32, 1, Ec * BK));
  job.push_back(make_alloc("sc", DType::F32, 1, BQ * BK));
  job.push_back(make_alloc("o", DType::F32, 1, BQ * Evc));
  job.push_back(make_alloc("mrow", DType::F32, 1, BQ));
  job.push_back(make_alloc("lrow", DType::F32, 1, BQ));
  ExprRef i = var("i"), j = var("j"), e = var("e"), c = var("c");
  ExprRef qrow = add(var("q0"), i);  // the query position of tile row i
  auto vec_for = [](const std::string& v, ExprRef ext, std::vector<Stmt> body, const std::string& note) {
    Stmt s = make_for(v, std::move(ext), std::move(body), note);
    s.annot.vectorize = true;
    return s;
  };
  // init and the scaled Q tile
  {
    std::vector<Stmt> row{make_local_store("mrow", i, f32(-INFINITY)), make_local_store("lrow", i, f32(0)),
                          vec_for("c", const_int(Evc), {make_local_store("o", add(mul(i, const_int(Evc)), c), f32(0))}, "zero the output row")};
    ExprRef qaddr = add(var("qoff"), add(mul(qrow, qsL), mul(e, qsE)));
    row.push_back(vec_for("e", const_int(Ec),
                          {make_local_store("qs", add(mul(i, const_int(Ec)), e),
                                            binary(Op::Mul, load(pq, DType::F32, qaddr, lt(i, var("qn"))), f32((double)spec->scale * log2e)))},
                          "Q tile row × scale·log2(e)"));
    job.push_back(make_for("i", const_int(BQ), std::move(row), "init the query tile"));
  }
  // the key range: up to the tile's last query when causal (top-left aligned: j <= i)
  job.push_back(make_let("kend", DType::I64, spec->causal ? min_of(S, add(var("q0"), var("qn"))) : S));
  std::vector<Stmt> tile;
  tile.push_back(make_let("k0", DType::I64, mul(var("kb"), const_int(BK))));
  tile.push_back(make_let("kn", DType::I64, min_of(const_int(BK), sub(var("kend"), var("k0")))));
  ExprRef k0 = var("k0"), kn = var("kn");
  // K tile, transposed. K's rows contiguous (ksE 1): marked a transpose (annot.transpose: the
  // source index a row base + e, the destination e·BK + j), which the llvm backend copies as
  // 16 x 16 blocks transposed in registers (LLVM's vectorizer scattered it, ~1.7 cycles an
  // element: a quarter of GPT-2's attention time)
  const bool k_rows = P.transpose && is_const(ksE, 1);
  ExprRef kaddr = k_rows ? add(add(var("koff"), mul(add(k0, j), ksS)), e) : add(var("koff"), add(mul(add(k0, j), ksS), mul(e, ksE)));
  Stmt ktile = make_for("j", const_int(BK),
                        {make_for("e", const_int(Ec), {make_local_store("kt", add(mul(e, const_int(BK)), j), load(pk, DType::F32, kaddr, lt(j, kn)))},
                                  "K tile: embedding")},
                        "K tile (transposed): key");
  ktile.annot.transpose = ktile.body[0].annot.transpose = k_rows;
  tile.push_back(std::move(ktile));
  // scores: an MR × NR register tile (NQ vectors of LN lanes per row), the embedding loop
  // inside, as the matmul micro-kernel: each K vector feeds MR rows
  // causal: the last query row of the MR block at ib (keys after it are masked for all its rows)
  const bool skip = spec->causal && P.causal_skip;
  ExprRef qlast = add(var("q0"), add(mul(var("ib"), const_int(MR)), const_int(MR - 1)));
  const bool vec = P.vector && BK % LN == 0 && BQ % MR == 0;
  const bool pv_tiles = vec && Evc % 8 == 0 && v_rows;  // P·V on register tiles (else row by row)
  const bool short_rows = skip && pv_tiles && P.causal_rows;  // (vec: BK a multiple of LN)
  const int NQ = (BK % (2 * LN) == 0) ? 2 : 1;
  const int64_t NR = (int64_t)NQ * LN;
  ExprRef i0 = mul(var("ib"), const_int(MR));
  if (!vec) {  // scalar: one score at a time (the GPU's form, and tiles the register tile does not divide)
    ExprRef sidx = add(mul(i, const_int(BK)), j);
    std::vector<Stmt> row{make_for("j", const_int(BK), {make_local_store("sc", sidx, f32(0))}, "zero the score row")};
    row.push_back(make_for("e", const_int(Ec),
                           {make_let("qv", DType::F32, local_load("qs", DType::F32, add(mul(i, const_int(Ec)), e))),
                            vec_for("j", const_int(BK),
                                    {make_local_store("sc", sidx,
                                                      binary(Op::Add, local_load("sc", DType::F32, sidx),
                                                             binary(Op::Mul, fvar("qv"), local_load("kt", DType::F32, add(mul(e, const_int(BK)), j)))))},
                                    "scores: keys")},
                           "scores: embedding"));
    tile.push_back(make_for("i", var("qn"), std::move(row), "scores: query rows"));
  } else {
    ExprRef j0 = mul(var("jb"), const_int(NR));
    std::vector<Stmt> micro;
    micro.push_back(make_alloc("acc", DType::F32, LN, (int64_t)MR * NQ, /*registers=*/true));
    for (int a = 0; a < MR * NQ; ++a) micro.push_back(make_local_store("acc", const_int(a), broadcast(f32(0), LN)));
    std::vector<Stmt> kb;
    for (int q = 0; q < NQ; ++q)
      kb.push_back(make_let("b" + std::to_string(q), DType::F32,
                            local_load("kt", DType::F32, add(add(mul(e, const_int(BK)), j0), const_int(q * LN)), LN)));
    for (int r = 0; r < MR; ++r) {
      ExprRef a = broadcast(local_load("qs", DType::F32, add(mul(add(i0, const_int(r)), const_int(Ec)), e)), LN);
      for (int q = 0; q < NQ; ++q) {
        ExprRef cur = local_load("acc", DType::F32, const_int(r * NQ + q), LN);
        kb.push_back(make_local_store("acc", const_int(r * NQ + q),
                                      binary(Op::Add, cur, binary(Op::Mul, a, var("b" + std::to_string(q), DType::F32, LN)))));
      }
    }
    Stmt eloop = make_for("e", const_int(Ec), std::move(kb), "scores: embedding (micro-kernel)");
    eloop.reduces = {"acc"};
    micro.push_back(std::move(eloop));
    for (int r = 0; r < MR; ++r)
      for (int q = 0; q < NQ; ++q)
        micro.push_back(make_local_store("sc", add(add(mul(add(i0, const_int(r)), const_int(BK)), j0), const_int(q * LN)),
                                         local_load("acc", DType::F32, const_int(r * NQ + q), LN)));
    // causal: only the panels whose first key is at or before the block's last query (the
    // others' scores are masked to -inf below, whatever sc holds)
    ExprRef panels = const_int(BK / NR);
    if (skip)
      panels = min_of(panels, binary(Op::IDiv, max_of(const_int(0), add(sub(qlast, k0), const_int(NR))), const_int(NR)));
    tile.push_back(make_for("ib", ceil_div(var("qn"), MR),
                            {make_for("jb", panels, std::move(micro), "scores: NR keys")}, "scores: MR query rows"));
  }
  // online softmax and P·V, row by row
  {
    ExprRef sidx = add(mul(i, const_int(BK)), j);
    ExprRef valid = lt(j, kn);
    if (spec->causal) valid = logical_and(valid, le(add(k0, j), qrow));
    ExprRef x = local_load("sc", DType::F32, sidx);
    if (ms) {
      size_t rr = ms->size();
      ExprRef maddr = add(var("moff"), add(mul(qrow, mst[rr - 2]), mul(add(k0, j), mst[rr - 1])));
      x = binary(Op::Add, x, binary(Op::Mul, load(pm, DType::F32, maddr, valid), f32(log2e)));
    }
    std::vector<Stmt> row;
    // causal, P·V on register tiles: a row's max and probabilities only over the keys its MR
    // block's P·V reads (up to the block's last query), in whole vectors; the later columns
    // of a diagonal tile (masked: their probabilities would be 0) are neither set nor read
    ExprRef jext = const_int(BK);
    if (short_rows) {
      ExprRef blast = add(var("q0"), add(mul(binary(Op::IDiv, i, const_int(MR)), const_int(MR)), const_int(MR - 1)));
      ExprRef keys = min_of(kn, max_of(const_int(0), add(sub(blast, k0), const_int(1))));
      row.push_back(make_let("jend", DType::I64, min_of(const_int(BK), mul(ceil_div(keys, LN), const_int(LN)))));
      jext = var("jend");
    }
    row.push_back(make_let("mold", DType::F32, local_load("mrow", DType::F32, i)));
    row.push_back(make_let("mx", DType::F32, fvar("mold")));
    Stmt mloop = make_for("j", jext,
                          {make_let("x", DType::F32, select(valid, x, f32(-INFINITY))), make_local_store("sc", sidx, fvar("x")),
                           make_assign("mx", binary(Op::Max, fvar("mx"), fvar("x")))},
                          "row max of the tile");
    mloop.reduces = {"mx"};
    mloop.reduce_op = ReduceOp::Max;
    mloop.annot.vectorize = true;
    if (short_rows) mloop.annot.width = LN;  // whole vectors: the trip is a multiple of LN
    row.push_back(std::move(mloop));
    // shift by 0 while the row is all -inf (p and alpha are then 0, not NaN)
    row.push_back(make_let("sh", DType::F32, select(binary(Op::CmpNE, fvar("mx"), f32(-INFINITY)), fvar("mx"), f32(0))));
    row.push_back(make_let("alpha", DType::F32, unary(Op::Exp2, binary(Op::Add, fvar("mold"), unary(Op::Neg, fvar("sh"))))));
    row.push_back(make_local_store("mrow", i, fvar("mx")));
    row.push_back(make_let("ls", DType::F32, f32(0)));
    Stmt ploop = vec_for("j", jext,
                         {make_let("p", DType::F32, unary(Op::Exp2, binary(Op::Add, local_load("sc", DType::F32, sidx), unary(Op::Neg, fvar("sh"))))),
                          make_local_store("sc", sidx, fvar("p")), make_assign("ls", binary(Op::Add, fvar("ls"), fvar("p")))},
                         "probabilities of the tile");
    ploop.reduces = {"ls"};
    if (short_rows) ploop.annot.width = LN;
    row.push_back(std::move(ploop));
    row.push_back(make_local_store("lrow", i, binary(Op::Add, binary(Op::Mul, local_load("lrow", DType::F32, i), fvar("alpha")), fvar("ls"))));
    ExprRef oidx = add(mul(i, const_int(Evc)), c);
    row.push_back(vec_for("c", const_int(Evc),
                          {make_local_store("o", oidx, binary(Op::Mul, local_load("o", DType::F32, oidx), fvar("alpha")))},
                          "rescale the output row"));
    if (!pv_tiles) {
      row.push_back(make_for("j", kn,
                             {make_let("pj", DType::F32, local_load("sc", DType::F32, sidx)),
                              vec_for("c", const_int(Evc),
                                      {make_local_store("o", oidx,
                                                        binary(Op::Add, local_load("o", DType::F32, oidx),
                                                               binary(Op::Mul, fvar("pj"), load(pv, DType::F32, add(var("voff"), add(mul(add(k0, j), vsS), mul(c, vsC)))))))},
                                      "P·V: value dim")},
                             "P·V: keys of the tile"));
    }
    tile.push_back(make_for("i", var("qn"), std::move(row), "online softmax: query rows"));
    if (pv_tiles) {  // P·V: an MR × NV register tile over the value dim, the keys inside
      const int LV = LN == 16 && Evc % 16 == 0 ? 16 : 8;
      const int NV = Evc % (2 * LV) == 0 ? 2 : 1;
      const int64_t NC = (int64_t)NV * LV;
      ExprRef c0 = mul(var("cb"), const_int(NC));
      std::vector<Stmt> micro;
      micro.push_back(make_alloc("pacc", DType::F32, LV, (int64_t)MR * NV, /*registers=*/true));
      for (int a = 0; a < MR * NV; ++a) micro.push_back(make_local_store("pacc", const_int(a), broadcast(f32(0), LV)));
      std::vector<Stmt> jb;
      for (int q = 0; q < NV; ++q)
        jb.push_back(make_let("w" + std::to_string(q), DType::F32,
                              load(pv, DType::F32, add(var("voff"), add(add(mul(add(k0, j), vsS), c0), const_int(q * LV))), nullptr, LV)));
      for (int r = 0; r < MR; ++r) {
        ExprRef a = broadcast(local_load("sc", DType::F32, add(mul(add(i0, const_int(r)), const_int(BK)), j)), LV);
        for (int q = 0; q < NV; ++q) {
          ExprRef cur = local_load("pacc", DType::F32, const_int(r * NV + q), LV);
          jb.push_back(make_local_store("pacc", const_int(r * NV + q),
                                        binary(Op::Add, cur, binary(Op::Mul, a, var("w" + std::to_string(q), DType::F32, LV)))));
        }
      }
      // causal: the keys up to the block's last query (the later ones' probabilities are 0)
      ExprRef keys = skip ? min_of(kn, max_of(const_int(0), add(sub(qlast, k0), const_int(1)))) : kn;
      Stmt jloop = make_for("j", keys, std::move(jb), "P·V: keys (micro-kernel)");
      jloop.reduces = {"pacc"};
      micro.push_back(std::move(jloop));
      for (int r = 0; r < MR; ++r)
        for (int q = 0; q < NV; ++q) {
          ExprRef oi = add(add(mul(add(i0, const_int(r)), const_int(Evc)), c0), const_int(q * LV));
          micro.push_back(make_local_store("o", oi, binary(Op::Add, local_load("o", DType::F32, oi, LV),
                                                               local_load("pacc", DType::F32, const_int(r * NV + q), LV))));
        }
      tile.push_back(make_for("ib", ceil_div(var("qn"), MR),
                              {make_for("cb", const_int(Evc / NC), std::move(micro), "P·V: NV value columns")}, "P·V: MR query rows"));
    }
  }
  job.push_back(make_for("kb", ceil_div(var("kend"), BK), std::move(tile),
                         spec->causal ? "K/V tiles up to the diagonal" : "K/V tiles"));
  // write back
  {
    ExprRef oidx = add(mul(i, const_int(Evc)), c);
    ExprRef ow = spec->stats ? add(Ev, const_int(1)) : Ev;  // the stats form: the row's log-sum-exp after it
    ExprRef orow = mul(add(mul(bh, L), qrow), ow);
    std::vector<Stmt> wr{make_let("inv", DType::F32, unary(Op::Recip, local_load("lrow", DType::F32, i))),
                         vec_for("c", const_int(Evc),
                                 {make_store(0, add(orow, c), binary(Op::Mul, local_load("o", DType::F32, oidx), fvar("inv")))},
                                 "output row / row sum")};
    if (spec->stats)
      wr.push_back(make_store(0, add(orow, Ev),
                              binary(Op::Add, local_load("mrow", DType::F32, i), unary(Op::Log2, local_load("lrow", DType::F32, i)))));
    job.push_back(make_for("i", var("qn"), std::move(wr), "write the output tile"));
  }
  Stmt tloop = make_for("t", mul(B, ceil_div(L, BQ)), std::move(job), "jobs: batch·heads × query tiles");
  tloop.annot.parallel = true;
  f.body.push_back(std::move(tloop));
  f.schedule_log.push_back("attention: BQ=" + std::to_string(BQ) + " BK=" + std::to_string(BK) +
                           (P.vector ? " MR=" + std::to_string(MR) + " lanes=" + std::to_string(LN) : std::string()) +
                           (skip && vec ? " skip-masked" : "") + (short_rows ? " short-rows" : "") + (k_rows ? " k-transpose" : "") +
                           (spec->causal ? " causal" : "") + (ms ? " +mask" : "") + (spec->stats ? " +lse" : ""));
  unique_loop_names(f);
  return f;
}

}  // namespace lathe::loop
