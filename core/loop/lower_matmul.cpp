// lower_matmul.cpp — lower_matmul_kernel: a matmul-like Reduce → a packed, cache-blocked,
// register-blocked loop nest (the BLIS structure), written in backend-neutral loop IR.
//
//   parallel for t in [batch × N-blocks × M-splits]:      one B panel per thread
//     for pc over K in KC steps:
//       pack B[k0:k0+kc, n0:n0+nc] → Bp (NR-wide panels, zero padded)
//       for ic over the M range in MC steps:
//         pack A[m0:m0+mc, k0:k0+kc] → Ap (MR-tall panels, zero padded)
//         for jr over NR panels, ir over MR panels:        micro-kernel
//           acc[MR][NR/lanes] = 0      (vector registers)
//           for kk < kc: b = Bp[kk][0:NR]; for r < MR: acc[r] += broadcast(Ap[kk][r]) * b
//           C[tile] (+)= acc           (masked at the edges)
//
// The MR and NR/lanes loops of the micro-kernel are unrolled here (constant indices), so
// the accumulators live in registers in every backend.
#include <algorithm>
#include <thread>

#include "core/ir/diag.h"
#include "core/loop/lower.h"

namespace lathe::loop {

namespace {

ExprRef ceil_div(ExprRef a, int64_t b) { return binary(Op::IDiv, add(a, const_int(b - 1)), const_int(b)); }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

}  // namespace

LoopFunc lower_matmul_kernel(const KernelGraph& kg, int kernel, const MatmulParams& P) {
  const Kernel& k = kg.kernels.at(kernel);
  auto mm = match_matmul(k.root);
  LATHE_CHECK(mm.has_value(), "lower_matmul_kernel on a kernel that is not a matmul");
  LATHE_CHECK(P.nr % P.lanes == 0 && P.mc % P.mr == 0 && P.nc % P.nr == 0, "matmul block sizes must nest");
  LoopFunc f;
  f.name = k.name;
  f.kernel = k.id;
  f.dims = kg.symbols;
  f.kind = "matmul";
  auto add_param = [&](int buffer, bool written, const std::string& name) {
    for (size_t i = 0; i < f.buffers.size(); ++i)
      if (f.buffers[i].buffer == buffer) return (int)i;
    f.buffers.push_back({buffer, name, kg.buffers[buffer].dtype, written});
    return (int)f.buffers.size() - 1;
  };
  int pc_out = add_param(k.output, true, "out");
  int pa = add_param(kg.buffer_of.at(mm->a), false, "a");
  int pb = add_param(kg.buffer_of.at(mm->b), false, "b");

  const Shape& s = k.root->inputs[0]->shape;  // the Mul's shape
  const ViewSpec& av = *mm->a_view;
  const ViewSpec& bv = *mm->b_view;
  auto cstr = contiguous_strides(k.root->shape);
  ExprRef M = from_sym(s[mm->m_axis]), N = from_sym(s[mm->n_axis]), K = from_sym(s[mm->k_axis]);
  const int NQ = P.nr / P.lanes;

  // Block sizes: spread N blocks (and, when N is small, M ranges) over the threads.
  int threads = std::max(1u, std::thread::hardware_concurrency());
  int64_t nc_blk = P.nc, msplit = 1;
  SymInt batch = 1;
  for (int d : mm->batch_axes) batch = batch * s[d];
  if (s[mm->n_axis].is_const() && s[mm->m_axis].is_const() && batch.is_const()) {
    int64_t n = s[mm->n_axis].value(), m = s[mm->m_axis].value(), bt = batch.value();
    nc_blk = std::min<int64_t>(P.nc, std::max<int64_t>(P.nr, round_up(ceil_div(n, threads), P.nr)));
    int64_t jobs = bt * ceil_div(n, nc_blk);
    if (jobs < threads) msplit = std::min<int64_t>(ceil_div(threads, jobs), ceil_div(m, P.mr));
  }
  ExprRef nJC = ceil_div(N, nc_blk);
  ExprRef msz = msplit == 1 ? M : mul(ceil_div(ceil_div(M, msplit), P.mr), const_int(P.mr));

  // t -> (batch index, jc, ms)
  std::vector<Stmt> tbody;
  ExprRef t = var("t");
  ExprRef rest = t;
  auto peel = [&](ExprRef extent, const std::string& name) {
    ExprRef v = binary(Op::Mod, rest, extent);
    tbody.push_back(make_let(name, DType::I64, v));
    rest = binary(Op::IDiv, rest, extent);
    return var(name);
  };
  ExprRef ms = msplit == 1 ? const_int(0) : peel(const_int(msplit), "ms");
  ExprRef jc = peel(nJC, "jc");
  std::vector<ExprRef> bidx(s.size(), const_int(0));
  for (size_t i = mm->batch_axes.size(); i-- > 0;) {
    int d = mm->batch_axes[i];
    bidx[d] = i == 0 ? rest : peel(from_sym(s[d]), "b" + std::to_string(d));
  }
  tbody.push_back(make_let("n0", DType::I64, mul(jc, const_int(nc_blk))));
  tbody.push_back(make_let("nc", DType::I64, min_of(const_int(nc_blk), sub(N, var("n0")))));
  tbody.push_back(make_let("ms0", DType::I64, mul(ms, msz)));
  tbody.push_back(make_let("msz", DType::I64, min_of(msz, sub(M, var("ms0")))));
  tbody.push_back(make_alloc("Bp", DType::F32, 1, P.kc * nc_blk));
  tbody.push_back(make_alloc("Ap", DType::F32, 1, (int64_t)P.mc * P.kc));
  tbody.push_back(make_alloc("tile", DType::F32, 1, (int64_t)P.mr * P.nr));

  // element addresses
  auto a_at = [&](ExprRef m, ExprRef kk) {
    ExprRef e = add(from_sym(av.offset), add(mul(m, from_sym(av.strides[mm->m_axis])), mul(kk, from_sym(av.strides[mm->k_axis]))));
    for (int d : mm->batch_axes) e = add(e, mul(bidx[d], from_sym(av.strides[d])));
    return e;
  };
  auto b_at = [&](ExprRef kk, ExprRef n) {
    ExprRef e = add(from_sym(bv.offset), add(mul(n, from_sym(bv.strides[mm->n_axis])), mul(kk, from_sym(bv.strides[mm->k_axis]))));
    for (int d : mm->batch_axes) e = add(e, mul(bidx[d], from_sym(bv.strides[d])));
    return e;
  };
  auto c_at = [&](ExprRef m, ExprRef n) {
    ExprRef e = add(mul(m, from_sym(cstr[mm->m_axis])), mul(n, from_sym(cstr[mm->n_axis])));
    for (int d : mm->batch_axes) e = add(e, mul(bidx[d], from_sym(cstr[d])));
    return e;
  };

  ExprRef kk = var("kk"), n0 = var("n0"), nc = var("nc"), k0 = var("k0"), kc = var("kc");
  ExprRef m0 = var("m0"), mc = var("mc");
  // pack B
  ExprRef col = add(mul(var("jp"), const_int(P.nr)), var("c"));
  Stmt packb_c = make_for("c", const_int(P.nr),
                          {make_local_store("Bp", add(mul(add(mul(var("jp"), const_int(P.kc)), kk), const_int(P.nr)), var("c")),
                                            load(pb, DType::F32, b_at(add(k0, kk), add(n0, col)), lt(col, nc)))},
                          "pack B: panel column");
  packb_c.annot.vectorize = true;
  Stmt packb = make_for("jp", ceil_div(nc, P.nr), {make_for("kk", kc, {packb_c})}, "pack B: NR-wide panels");
  // pack A
  ExprRef row = add(mul(var("ip"), const_int(P.mr)), var("r"));
  Stmt packa = make_for(
      "ip", ceil_div(mc, P.mr),
      {make_for("r", const_int(P.mr),
                {make_for("kk", kc,
                          {make_local_store("Ap", add(mul(add(mul(var("ip"), const_int(P.kc)), kk), const_int(P.mr)), var("r")),
                                            load(pa, DType::F32, a_at(add(m0, row), add(k0, kk)), lt(row, mc)))},
                          "pack A: k")},
                "pack A: panel row")},
      "pack A: MR-tall panels");
  // micro-kernel
  std::vector<Stmt> micro;
  micro.push_back(make_alloc("acc", DType::F32, P.lanes, (int64_t)P.mr * NQ, /*registers=*/true));
  for (int a = 0; a < P.mr * NQ; ++a)
    micro.push_back(make_local_store("acc", const_int(a), broadcast(const_float(0, DType::F32), P.lanes)));
  std::vector<Stmt> kbody;
  ExprRef bbase = mul(add(mul(var("jr"), const_int(P.kc)), kk), const_int(P.nr));
  ExprRef abase = mul(add(mul(var("ir"), const_int(P.kc)), kk), const_int(P.mr));
  for (int q = 0; q < NQ; ++q)
    kbody.push_back(make_let("bq" + std::to_string(q), DType::F32,
                             local_load("Bp", DType::F32, add(bbase, const_int(q * P.lanes)), P.lanes)));
  for (int r = 0; r < P.mr; ++r) {
    ExprRef ar = broadcast(local_load("Ap", DType::F32, add(abase, const_int(r))), P.lanes);
    for (int q = 0; q < NQ; ++q) {
      ExprRef cur = local_load("acc", DType::F32, const_int(r * NQ + q), P.lanes);
      ExprRef bq = var("bq" + std::to_string(q), DType::F32, P.lanes);
      kbody.push_back(make_local_store("acc", const_int(r * NQ + q),
                                       binary(Op::Add, cur, binary(Op::Mul, ar, bq))));
    }
  }
  Stmt kloop = make_for("kk", kc, std::move(kbody), "micro-kernel: k");
  kloop.reduces = {"acc"};
  micro.push_back(std::move(kloop));
  for (int a = 0; a < P.mr * NQ; ++a)
    micro.push_back(make_local_store("tile", const_int(a * P.lanes), local_load("acc", DType::F32, const_int(a), P.lanes)));
  ExprRef mrow = add(mul(var("ir"), const_int(P.mr)), var("r"));
  ExprRef ncol = add(mul(var("jr"), const_int(P.nr)), var("c"));
  ExprRef caddr = c_at(add(m0, mrow), add(n0, ncol));
  ExprRef tv = local_load("tile", DType::F32, add(mul(var("r"), const_int(P.nr)), var("c")));
  ExprRef prev = select(lt(const_int(0), var("pc")), load(pc_out, DType::F32, caddr), const_float(0, DType::F32));
  Stmt store_c = make_for("c", const_int(P.nr),
                          {make_if(logical_and(lt(mrow, mc), lt(ncol, nc)), {make_store(pc_out, caddr, binary(Op::Add, prev, tv))})},
                          "write back: column");
  store_c.annot.vectorize = true;
  micro.push_back(make_for("r", const_int(P.mr), {store_c}, "write back: row"));
  Stmt ir_loop = make_for("ir", ceil_div(mc, P.mr), std::move(micro), "MR panels of A");
  Stmt jr_loop = make_for("jr", ceil_div(nc, P.nr), {ir_loop}, "NR panels of B");

  std::vector<Stmt> icbody{make_let("m0", DType::I64, add(var("ms0"), mul(var("ic"), const_int(P.mc)))),
                           make_let("mc", DType::I64, min_of(const_int(P.mc), sub(add(var("ms0"), var("msz")), m0))), packa,
                           jr_loop};
  Stmt ic_loop = make_for("ic", ceil_div(var("msz"), P.mc), std::move(icbody), "MC blocks of M");
  std::vector<Stmt> pcbody{make_let("k0", DType::I64, mul(var("pc"), const_int(P.kc))),
                           make_let("kc", DType::I64, min_of(const_int(P.kc), sub(K, k0))), packb, ic_loop};
  tbody.push_back(make_for("pc", ceil_div(K, P.kc), std::move(pcbody), "KC blocks of K"));
  ExprRef jobs = mul(mul(from_sym(batch), nJC), const_int(msplit));
  Stmt tloop = make_for("t", jobs, std::move(tbody), "jobs: batch × N blocks × M splits");
  tloop.annot.parallel = true;
  f.body.push_back(std::move(tloop));
  f.schedule_log.push_back("matmul: MR=" + std::to_string(P.mr) + " NR=" + std::to_string(P.nr) + " KC=" +
                           std::to_string(P.kc) + " MC=" + std::to_string(P.mc) + " NC=" + std::to_string(nc_blk) +
                           " msplit=" + std::to_string(msplit));
  // K == 0: the loops above write nothing; zero the output first
  if (!(s[mm->k_axis].is_const() && s[mm->k_axis].value() > 0)) {
    ExprRef total = from_sym(shape_numel(k.root->shape));
    Stmt z = make_for("z", total, {make_store(pc_out, var("z"), const_float(0, DType::F32))}, "zero (K may be 0)");
    f.body.insert(f.body.begin(), make_if(lt(K, const_int(1)), {z}));
  }
  return f;
}

}  // namespace lathe::loop
