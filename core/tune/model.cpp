// model.cpp — the analytic estimate and the ridge correction (see model.h).
#include "core/tune/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/loop/cost.h"
#include "core/loop/lower.h"
#include "core/loop/lower_depthwise.h"

namespace lathe::tune {

namespace {

constexpr double kGhz = 3.0;
constexpr double kRegionCycles = 15000;   // entering a parallel region (wake, join): ~5 µs
constexpr double kUnknownExtent = 1024;
constexpr double kFmaLatency = 4;        // cycles from an FMA to the next on its accumulator
constexpr double kMaskedStep = 20;       // a masked vector step (vmaskmov: ~30 cycles measured on Zen)

using Env = std::map<std::string, int64_t, std::less<>>;

bool transcendental(Op op) {
  return op == Op::Exp2 || op == Op::Log2 || op == Op::Sin || op == Op::Sqrt || op == Op::Recip;
}

struct Stats {
  double stmt_execs = 0, vec_execs = 0;      // executed statements, those in vectorized loops
  double accesses = 0, strided = 0;          // executed memory accesses, strided/gathered ones
  double latency_execs = 0;                  // scalar reduction updates (latency bound)
  double par_entries = 0, par_eff = 0;       // parallel regions entered; efficiency of the main one
  bool any_parallel = false;
};

class Walker {
 public:
  Walker(const loop::LoopFunc& f, const Machine& m, double bytes_total) : f_(f), m_(m) {
    // bytes per cycle per core: from cache when the kernel's buffers fit in L2, else DRAM
    bpc_ = bytes_total <= 768.0 * 1024 ? 24.0 : 6.0;
  }
  Stats st;

  // cycles of one execution of `body`; trips = how many times it runs (for the stats)
  double cycles(const std::vector<loop::Stmt>& body, Env& env, double trips) {
    double c = 0;
    for (const loop::Stmt& s : body) c += cycles(s, env, trips);
    return c;
  }

 private:
  const loop::LoopFunc& f_;
  const Machine& m_;
  double bpc_;
  std::string inner_;          // the innermost enclosing loop
  bool vec_ = false, reducing_ = false;

  int elem(int buffer) const {
    if (buffer < 0 || buffer >= (int)f_.buffers.size()) return 4;
    return static_cast<int>(dtype_size(f_.buffers[buffer].dtype));
  }

  // stride of an index along the innermost loop; false when it cannot be evaluated
  bool stride(const loop::ExprRef& idx, Env& env, int64_t& s) {
    if (inner_.empty()) { s = 0; return true; }
    int64_t a, b;
    auto it = env.find(inner_);
    int64_t saved = it != env.end() ? it->second : 0;
    env[inner_] = 0;
    bool ok = loop::eval_index(idx, env, a);
    env[inner_] = 1;
    ok = ok && loop::eval_index(idx, env, b);
    env[inner_] = saved;
    s = b - a;
    return ok;
  }

  struct Leaf {
    double ops = 0, bytes = 0, gathers = 0, accesses = 0;
  };

  void expr(const loop::ExprRef& e, Env& env, Leaf& l) {
    if (!e) return;
    if ((e->kind == loop::ExprKind::Unary || e->kind == loop::ExprKind::Binary) && is_float(e->dtype)) {
      double w = e->kind == loop::ExprKind::Unary && transcendental(e->op) ? 10 : 1;
      l.ops += w * (e->lanes > 1 ? 1.0 : (vec_ ? 1.0 / m_.lanes : 1.0));
    }
    if (e->kind == loop::ExprKind::Load) access(e->buffer, e->args[0], e->lanes, env, l);
    for (auto& a : e->args) expr(a, env, l);
  }

  void access(int buffer, const loop::ExprRef& idx, int lanes, Env& env, Leaf& l) {
    double el = elem(buffer);
    double per = vec_ ? 1.0 / m_.lanes : 1.0;  // cost share of one element of a vectorized loop
    l.accesses += lanes > 1 ? 1 : per;
    st.accesses += 1;
    if (lanes > 1) { l.bytes += el * lanes; return; }
    int64_t s = 0;
    bool ok = stride(idx, env, s);
    if (ok && s == 0) return;  // invariant: a register
    if (ok && (s == 1 || s == -1)) { l.bytes += el; return; }
    st.strided += 1;
    double line = ok ? std::min(64.0, el * std::abs((double)s)) : 64.0;
    l.bytes += line;
    if (vec_) l.gathers += 1;  // a gather: one element per cycle, no SIMD
  }

  double leaf(const loop::Stmt& s, Env& env, double trips) {
    Leaf l;
    expr(s.value, env, l);
    if (s.kind == loop::StmtKind::Store) {
      expr(s.index, env, l);
      access(s.buffer, s.index, s.value ? s.value->lanes : 1, env, l);
    } else if (s.kind == loop::StmtKind::LocalStore) {
      expr(s.index, env, l);
      l.accesses += vec_ ? 1.0 / m_.lanes : 1.0;
    }
    st.stmt_execs += trips;
    if (vec_) st.vec_execs += trips;
    double compute = l.ops * 0.5 + l.gathers + l.accesses * 0.5;
    // a scalar floating-point reduction: each update waits for the previous one (~4 cycles)
    if (s.kind == loop::StmtKind::Assign && reducing_ && !vec_ && s.value && is_float(s.value->dtype)) {
      compute = std::max(compute, 4.0);
      st.latency_execs += trips;
    }
    return std::max(compute, l.bytes / bpc_);
  }

  double cycles(const loop::Stmt& s, Env& env, double trips) {
    switch (s.kind) {
      case loop::StmtKind::For: {
        int64_t e = 0;
        double ext = loop::eval_index(s.extent, env, e) ? (double)std::max<int64_t>(e, 0) : kUnknownExtent;
        std::string saved_inner = inner_;
        bool saved_vec = vec_, saved_red = reducing_;
        inner_ = s.var;
        vec_ = s.annot.vectorize;
        reducing_ = !s.reduces.empty();
        env[s.var] = 0;
        // A vectorized loop runs whole chunks of vectors and leaves the remainder scalar: the
        // compiler's chunk is lanes x its interleave (4; 2 for a body with a transcendental;
        // one vector below a chunk), a peeled loop's one vector of its width; a masked loop
        // has no remainder but pays for its masked loads and stores (slow on some x86).
        double rem = 0;
        if (s.annot.vectorize && !s.annot.masked) {
          double w = s.annot.width > 0 ? s.annot.width : m_.lanes;
          if (s.annot.width <= 0) {
            bool heavy = false;
            std::vector<loop::Stmt> one{s};
            loop::walk_exprs(one, [&](const loop::ExprRef& x) { heavy |= x->kind == loop::ExprKind::Unary && transcendental(x->op); });
            if (ext >= w * (heavy ? 2 : 4)) w *= heavy ? 2 : 4;
          }
          rem = std::fmod(ext, w);
        }
        double body = cycles(s.body, env, trips * (ext - rem));
        double body_scalar = 0;
        if (rem > 0) {
          vec_ = false;
          body_scalar = cycles(s.body, env, trips * rem);
        }
        env.erase(s.var);
        inner_ = saved_inner;
        vec_ = saved_vec;
        reducing_ = saved_red;
        double overhead = s.annot.vectorize ? 1.0 / m_.lanes : s.annot.unroll > 1 ? 1.0 / s.annot.unroll : 1.0;
        double total = (ext - rem) * (body + overhead) + rem * (body_scalar + 1);
        if (s.annot.masked) {
          double w = s.annot.width > 0 ? s.annot.width : m_.lanes;
          total = std::ceil(ext / w) * (w * (body + overhead) + kMaskedStep);
        }
        if (s.annot.parallel) {
          double t = m_.threads;
          double speed = ext >= 1 ? ext / std::ceil(ext / t) : 1;
          if (!st.any_parallel) st.par_eff = speed / t;
          st.any_parallel = true;
          st.par_entries += trips;
          total = total / speed + kRegionCycles;
        }
        return total;
      }
      case loop::StmtKind::If: {
        int64_t c;
        if (loop::eval_index(s.cond, env, c)) return 1 + cycles(c ? s.body : s.else_body, env, trips);
        return 1 + std::max(cycles(s.body, env, trips), cycles(s.else_body, env, trips));
      }
      case loop::StmtKind::Let: {
        int64_t v;
        if (s.dtype == DType::I64 && loop::eval_index(s.value, env, v)) env[s.var] = v;
        return leaf(s, env, trips);
      }
      case loop::StmtKind::Alloc: return 0;
      case loop::StmtKind::Prefetch: return 0;  // a hint, issued off the critical path
      default: return leaf(s, env, trips);
    }
  }
};

double product(const Shape& s, const std::vector<int>& axes, const Bindings& dims) {
  double p = 1;
  for (int a : axes) p *= static_cast<double>(s[a].eval(dims).value_or((int64_t)kUnknownExtent));
  return p;
}

// the packed GEMM nest, from its block sizes (the lowering's first log line)
bool packed_estimate(const loop::LoopFunc& f, const KernelGraph& kg, const Bindings& dims, const Machine& m,
                     double& cycles, double& spill, double& edge) {
  if (!loop::is_packed_matmul(f)) return false;
  long mr = 0, nr = 0, kc = 0, mc = 0, nc = 0, msplit = 1;
  if (std::sscanf(f.schedule_log[0].c_str(), "matmul: MR=%ld NR=%ld KC=%ld MC=%ld NC=%ld msplit=%ld", &mr, &nr, &kc, &mc, &nc,
                  &msplit) < 6)
    return false;
  const Kernel& k = kg.kernels.at(f.kernel);
  auto mm = match_matmul(k.matmul ? k.matmul : k.root);
  if (!mm) return false;
  loop::MatmulParams op;  // the sides the lowering chose
  op.mr = static_cast<int>(mr), op.nr = static_cast<int>(nr);
  loop::orient_matmul(*mm, op);
  const Shape& s = mm->mul->shape;
  double M = product(s, mm->m_axes, dims), N = product(s, mm->n_axes, dims), K = product(s, mm->k_axes, dims);
  double B = product(s, mm->batch_axes, dims);
  double nq = std::max(1.0, (double)nr / m.lanes);
  // accumulators, B vectors and a broadcast must fit with one register to spare: a tile that
  // needs all 16 (MR=4 NR=24 on AVX2) spills accumulators to the stack on every k step in
  // LLVM's code (measured 1.8x slower than MR=6 NR=16, which needs 15)
  double regs = mr * nq + nq + 1, budget = m.vregs - 1;
  spill = regs > budget ? 1 : 0;
  // per k step: two FMA ports, two load ports (nq B vectors, mr broadcasts of A), and each
  // accumulator's chain of dependent FMAs: fewer than latency × ports accumulators (an MR=2,
  // NR=16 tile has 4) wait ~4 cycles per k step (measured: MR=2 NR=16 on a 1x1 convolution
  // ~1.6x slower than MR=6 NR=16, where the issue rate alone called them even)
  double per_kk = std::max({mr * nq / 2.0, (mr + nq) / 2.0, kFmaLatency}) * (spill ? 1.5 + (regs - budget) / 8.0 : 1.0);
  double mt = std::ceil(M / mr), nt = std::ceil(N / nr);
  edge = (M * N) / (mt * mr * nt * nr);
  double tiles = B * mt * nt;
  double pcs = std::ceil(K / kc);
  double compute = tiles * K * per_kk + tiles * pcs * (mr * nq * 3 + 20);  // + write-back per KC block
  double nblocks = std::ceil(N / nc);
  // B: packed when the program was built ("B prepacked": a heuristic's KC and NR on constant
  // weights; a candidate with other blocks loses it and copies B on every run) or read in
  // place: no per-run copy. Else each job copies its KC x NC blocks: a read and a write per
  // element, at cache speed when B fits in L2, at memory speed when it does not (the
  // weights of a late 1x1 convolution, 320 x 1280: measured ~2x slower with the copy).
  const std::string& log = f.schedule_log[0];
  bool b_copied = log.find(" B prepacked") == std::string::npos && log.find(" B in place") == std::string::npos;
  double b_bytes = N * K * 4.0;
  // a side "packed once" (one parallel step for all the jobs) is copied once, not per job
  const bool b_once = log.find(" B packed once") != std::string::npos, a_once = log.find(" A packed once") != std::string::npos;
  double b_copy = b_copied ? B * N * K * (b_once ? 1 : msplit) * std::max(0.3, 8.0 / (b_bytes <= 768.0 * 1024 ? 24.0 : 6.0)) : 0;
  double pack = B * M * K * (a_once ? 1 : nblocks) * 1.0 + b_copy;  // A gathered, B copied in runs
  double cache = 1;
  if (kc * nr * 4.0 > 32 * 1024) cache *= 1.25;      // the B micro-panel leaves L1
  if (mc * kc * 4.0 > 512 * 1024) cache *= 1.3;      // the A block leaves L2
  if (kc * nc * 4.0 > 4 * 1024 * 1024) cache *= 1.2;  // the B panel leaves L3's share
  double jobs = B * nblocks * msplit, t = m.threads;
  double speed = jobs / std::ceil(jobs / t);
  cycles = (compute * cache + pack) / speed + kRegionCycles * (b_once || a_once ? 2 : 1);  // the pack step's region
  return true;
}

}  // namespace

Estimate estimate(const loop::LoopFunc& f, const KernelGraph& kg, const Bindings& dims, const Machine& m) {
  loop::KernelCost kc = loop::estimate_cost(f, kg, dims);
  Estimate e;
  double cycles = 0, spill = 0, edge = 1;
  Walker w(f, m, kc.bytes);
  bool packed = packed_estimate(f, kg, dims, m, cycles, spill, edge);
  if (!packed) {
    Env env(dims.begin(), dims.end());
    cycles = w.cycles(f.body, env, 1);
    // a depthwise nest that holds its plane's taps as values (not register accumulators):
    // with more weights than the vector registers leave (a 5x5 window's 25 on AVX2's 16)
    // LLVM spills weights and the shared input vectors around every output vector (5x5:
    // ~75 instructions per row vector, checked in the assembly, against ~45 with
    // accumulators and 2 rows per pass)
    if (loop::is_depthwise(f) && f.schedule_log[0].rfind("depthwise: ", 0) == 0 &&
        f.schedule_log[0].find("register accumulators") == std::string::npos) {
      int weights = 0;
      for (auto& st : f.body)
        if (st.kind == loop::StmtKind::For)
          for (auto& b : st.body) weights += b.kind == loop::StmtKind::Let && b.dtype == DType::F32;
      if (weights > m.vregs - 4) {
        spill = 1;
        cycles *= 1.6;
      }
    }
  }
  e.ms = std::max(cycles, 1.0) / (kGhz * 1e6);
  const Stats& s = w.st;
  auto frac = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // a reduction split into per-thread parts (split_k): parts per core (0: none); the
  // partial nest's parallel loop has few iterations, its combine runs on one core
  double split = 0;
  for (auto& l : f.schedule_log) {
    long parts = 0;
    char loopname[64];
    if (std::sscanf(l.c_str(), "split_k %63s by %ld", loopname, &parts) == 2) split = (double)parts / std::max(1, m.threads);
  }
  e.features = {std::log(e.ms),
                std::log1p(kc.flops),
                std::log1p(kc.bytes),
                frac(s.vec_execs, s.stmt_execs),
                frac(s.strided, s.accesses),
                frac(s.latency_execs, s.stmt_execs),
                packed ? 1.0 : s.par_eff,
                std::log1p(s.par_entries),
                packed ? 1.0 : 0.0,
                spill,
                edge,
                split};
  return e;
}

void CostModel::add(const std::vector<double>& x, double log_ratio) {
  x_.push_back(x);
  y_.push_back(log_ratio);
  fit();
}

void CostModel::fit() {
  size_t n = x_.size(), d = x_.empty() ? 0 : x_[0].size();
  w_.clear();
  if (n < 4) return;
  mean_.assign(d, 0);
  scale_.assign(d, 0);
  for (auto& x : x_)
    for (size_t j = 0; j < d; ++j) mean_[j] += x[j] / n;
  for (auto& x : x_)
    for (size_t j = 0; j < d; ++j) scale_[j] += (x[j] - mean_[j]) * (x[j] - mean_[j]) / n;
  for (auto& s : scale_) s = s > 1e-12 ? std::sqrt(s) : 1;
  lo_.assign(x_[0].begin(), x_[0].end());
  hi_ = lo_;
  for (auto& x : x_)
    for (size_t j = 0; j < d; ++j) lo_[j] = std::min(lo_[j], x[j]), hi_[j] = std::max(hi_[j], x[j]);
  bias_ = 0;
  for (double y : y_) bias_ += y / n;
  // normal equations (XᵀX + λI) w = Xᵀ(y - ȳ), solved by Gaussian elimination
  std::vector<std::vector<double>> A(d, std::vector<double>(d + 1, 0));
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> z(d);
    for (size_t j = 0; j < d; ++j) z[j] = (x_[i][j] - mean_[j]) / scale_[j];
    for (size_t a = 0; a < d; ++a) {
      for (size_t b = 0; b < d; ++b) A[a][b] += z[a] * z[b];
      A[a][d] += z[a] * (y_[i] - bias_);
    }
  }
  for (size_t a = 0; a < d; ++a) A[a][a] += 1.0;  // λ = 1
  for (size_t c = 0; c < d; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < d; ++r)
      if (std::abs(A[r][c]) > std::abs(A[piv][c])) piv = r;
    std::swap(A[c], A[piv]);
    for (size_t r = 0; r < d; ++r) {
      if (r == c) continue;
      double q = A[r][c] / A[c][c];
      for (size_t k = c; k <= d; ++k) A[r][k] -= q * A[c][k];
    }
  }
  w_.resize(d);
  for (size_t j = 0; j < d; ++j) w_[j] = A[j][d] / A[j][j];
}

double CostModel::predict(const Estimate& e) const {
  if (w_.empty() || e.features.size() != w_.size()) {
    if (y_.empty()) return e.ms;
    double mean = 0;  // a few points: the mean correction
    for (double y : y_) mean += y / y_.size();
    return e.ms * std::exp(mean);
  }
  // the correction of the nearest point of the measured range: a linear fit extrapolated
  // far past it can cancel the estimate (fitted on packed GEMMs of ~4 ms estimates all
  // measured ~18 ms, log(estimate)'s weight went near -1 and a plain nest estimated at
  // 14 s was predicted at ~20 ms, measured, and ran 11 s a launch)
  double r = bias_;
  for (size_t j = 0; j < w_.size(); ++j) r += w_[j] * (std::clamp(e.features[j], lo_[j], hi_[j]) - mean_[j]) / scale_[j];
  r = std::clamp(r, -5.0, 5.0);
  return e.ms * std::exp(r);
}

}  // namespace lathe::tune
