// lower_depthwise.cpp — lower_depthwise_kernel: a depthwise convolution kernel → a direct,
// vectorized loop nest over zero-padded, stride-split copies of its input rows (see
// lower_depthwise.h for the scheme).
//
// The model, in the Mul's dims: out dims sel… (planes: batch, channel), oh, ow (the
// innermost); tap dims kh, kw (the reduced ones). The input X is read at
//   c0 + sel part + RW·u + e,  u = uh·oh + ukh·kh (a row),  e = s·ow + akw·kw (along the row)
// with range conditions of three kinds: per column (on e), per row (on u) and per plane.
// The weight W is read at c0 + sel part + ckh·kh + ckw·kw, without conditions.
#include "core/loop/lower_depthwise.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <unordered_map>

#include "core/loop/lower.h"
#include "core/loop/matmul_epilogue.h"

namespace lathe::loop {

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// elements of a constant shape (0: a symbolic dim)
int64_t const_numel(const Shape& s) {
  int64_t n = 1;
  for (auto& d : s) {
    if (!d.is_const()) return 0;
    n *= d.value();
  }
  return n;
}

constexpr int64_t kBandFloats = 16384;     // a band's input copy: 64 KiB (L2, and the C backend's stack)
// One plane's band (a depthwise layer) within L1d (24 KiB of 32): the taps read each copied
// row up to KH times right after the copy wrote it. MobileNetV2's 56 x 56 stride-2 layer copied
// 113 rows (51 KiB) a plane; in bands of 19 output rows, one thread, minima of 3 x 150
// alternating (load 8): 300 -> 272 us, the other layers within 1%. The stem (several input
// channels a band) keeps the larger band: its 4-row bands measured 410 -> 425 us.
constexpr int64_t kPlaneBandFloats = 6144;
constexpr int64_t kMaxBandFloats = 1 << 18;  // one row band larger than this: the generic lowering
constexpr int64_t kMaxTaps = 64;
constexpr int64_t kMaxDirectTaps = 160;     // several outputs per plane (a stem: 7x7 x 3 = 147)
constexpr int64_t kMaxDirectChannels = 8;   // a matmul kernel's input channels, at most
constexpr int64_t kMaxTapLoopChannels = 4;  // ... and with over kMaxTaps taps (measured: 3)
constexpr int64_t kMinTasks = 16;           // parallel tasks wanted (planes x row bands), when rows allow

// output channels per pass (2 rows x OCB register accumulators, + 2 input vectors and a
// weight): the one that wastes least of the FMA units, counting the independent
// accumulators needed to cover the FMA latency (4 cycles x 2 units on AVX2 machines: 8) and
// the last pass redoing channels when OCB does not divide OC. With 8 lanes (AVX2, 16 vector
// registers) at most 4 channels: 5-6 of them (10-12 accumulators) left too few registers
// for the weight broadcasts LLVM hoists out of the row loop and it spilled accumulators and
// input vectors (one thread, llvm: MobileNet's 3->32 stem 0.370 -> 0.333 ms, 3->64 at 96x96
// 0.54 -> 0.38 ms, 1->16 at 101x101 0.076 -> 0.045 ms). With 16 lanes (32 registers) up to 6
// and 10 accumulators for the unrolled pass; the tap loop (Plan::tap_loop: no hoisted
// broadcasts) up to 8 and 16 accumulators (16 + 2 inputs + a weight of 32 registers): a 7x7 x 3
// stem, one thread, 5x2 1016-1019 us, 8x2 948-997, 4x3 941-1004, 6x2 969-973, 6x4 1028, 8x1
// 1152-1192 (stem21). With 8 lanes the tap loop keeps 4x2: 8 accumulators + 2 inputs + a weight
// of AVX2's 16 registers, as the unrolled pass's rule.
int64_t outputs_per_pass(int64_t OC, int lanes, bool tap_loop) {
  const int64_t max_b = lanes <= 8 ? 4 : tap_loop ? 8 : 6;
  const double need = lanes <= 8 ? 8 : tap_loop ? 16 : 10;
  int64_t best = 1;
  double best_eff = 0;
  for (int64_t b = max_b; b >= 1; --b) {
    double eff = std::min(1.0, 2.0 * b / need) * OC / double(cdiv(std::max(OC, b), b) * b);
    if (eff > best_eff + 1e-9) best = b, best_eff = eff;
  }
  return best;
}

// LATHE_STEM_DIRECT=0 (read at each lowering, so a test can set it): the direct nest as before
// session 22, for A/B runs: a matmul kernel over at most kMaxTaps taps, every pass's taps
// unrolled, 6 x 2 accumulators at most
bool stem_direct_on() {
  const char* e = std::getenv("LATHE_STEM_DIRECT");
  return !(e && std::string(e) == "0");
}

struct Plan {
  NodeRef R = nullptr, mul = nullptr;
  OperandAccess x, w;
  std::vector<int> sel;
  int oh = -1, ow = -1, kh = -1, kw = -1, kc = -1;  // kc: a grouped convolution's input channels
  int64_t OH = 1, OW = 1, KH = 1, KW = 1, CG = 1, ackc = 0, ckc = 0;
  int64_t s = 1, akw = 0, RW = 1, uh = 0, ukh = 0, ckh = 0, ckw = 0;
  std::vector<size_t> col_b, row_b, plane_b;  // X bounds by kind
  int64_t E = 0, Q = 0, BH = 1, NB = 1, UB = 1;
  // several outputs per input plane (a stem convolution, a grouped convolution with several
  // outputs per group): oc, an output dim X does not read and W does; OCB of them per pass
  // share each load of the input rows (register accumulators)
  int oc = -1;
  int64_t OC = 1, OCB = 1, cwoc = 0;
  std::vector<int> xsel;  // the plane dims: sel without oc
  int64_t RP = 2;         // output rows per pass (they share the loads of the input rows both read)
  bool band_major = false;  // the parallel index runs over the planes of a band, then the next band
  bool acc = false;       // register accumulators (always with several outputs per plane)
  // the pass loops over input channels and tap rows (kw unrolled) instead of unrolling every
  // tap: LLVM hoisted an unrolled pass's weight broadcasts (loop-invariant in v) out of the
  // row loops and spilled them (a 7x7 x 3 stem: 147 x OCB vectors, past L1d)
  bool tap_loop = false;
  bool multi() const { return oc >= 0; }
  bool accumulate() const { return multi() || acc; }
};

std::optional<Plan> analyse(const KernelGraph& kg, const Kernel& k, int L, const DirectParams& dp) {
  if (k.kind != "reduce" && k.kind != "matmul") return std::nullopt;
  Plan p;
  for (NodeRef n : k.nodes)
    if (n->op == Op::Reduce) {
      if (p.R) return std::nullopt;
      p.R = n;
    }
  if (!p.R || p.R->attrs.reduce != ReduceOp::Add || p.R->dtype != DType::F32) return std::nullopt;
  p.mul = p.R->inputs[0];
  if (p.mul->op != Op::Mul || p.mul->dtype != DType::F32) return std::nullopt;
  if (k.root != p.R) {
    std::set<NodeRef> mat;
    for (auto& [n, b] : kg.buffer_of) mat.insert(n);
    if (!fusable_epilogue(k.root, p.R, mat)) return std::nullopt;
  }
  OperandAccess a = operand_access(p.mul->inputs[0]), b = operand_access(p.mul->inputs[1]);
  for (auto* acc : {&a, &b})
    if (!kg.materialized(acc->src) || acc->src->dtype != DType::F32) return std::nullopt;
  const Shape& s = p.mul->shape;
  const auto& axes = p.R->attrs.axes;
  std::vector<int> outs, taps;
  for (int d = 0; d < (int)s.size(); ++d) {
    if (s[d] == SymInt(1)) continue;
    (std::find(axes.begin(), axes.end(), d) != axes.end() ? taps : outs).push_back(d);
  }
  if (outs.empty() || taps.empty() || taps.size() > 3) return std::nullopt;
  p.ow = outs.back();
  if (a.uses(p.ow) && !b.uses(p.ow)) p.x = a, p.w = b;
  else if (b.uses(p.ow) && !a.uses(p.ow)) p.x = b, p.w = a;
  else return std::nullopt;
  if (!p.w.bounds.empty() || !s[p.ow].is_const()) return std::nullopt;
  p.OW = s[p.ow].value();
  auto aw = p.x.addr.const_coef(p.ow);
  if (!aw || *aw < 1) return std::nullopt;
  p.s = *aw;
  // oh: the next output dim out, when only X reads it
  if (outs.size() >= 2) {
    int d = outs[outs.size() - 2];
    auto c = p.x.addr.const_coef(d);
    if (c && *c > 0 && !p.w.uses(d) && s[d].is_const()) p.oh = d;
  }
  for (int t : taps) {
    auto c = p.x.addr.const_coef(t);
    if (!c || *c < 0 || !s[t].is_const()) return std::nullopt;
  }
  // three taps: a grouped convolution's input channels (C/groups of them) are the one no
  // condition names with the largest step in X (a plane apart); each is a plane of its own
  if (taps.size() == 3) {
    for (int t : taps) {
      bool bounded = false;
      for (auto& bd : p.x.bounds) bounded |= bd.coord.uses(t);
      if (!bounded && (p.kc < 0 || *p.x.addr.const_coef(t) > *p.x.addr.const_coef(p.kc))) p.kc = t;
    }
    if (p.kc < 0) return std::nullopt;
    p.CG = s[p.kc].value();
    p.ackc = *p.x.addr.const_coef(p.kc);
    auto c = p.w.addr.const_coef(p.kc);
    if (!c) return std::nullopt;
    p.ckc = *c;
    taps.erase(std::find(taps.begin(), taps.end(), p.kc));
  }
  // kw: the tap that moves along the row with ow (named by a column condition when there is one)
  auto uses_tap = [&](const Affine& c) {
    int found = -1;
    for (int t : taps)
      if (c.uses(t)) found = found < 0 ? t : -2;
    return found;
  };
  for (auto& bd : p.x.bounds) {
    if (!bd.coord.uses(p.ow)) continue;
    int t = uses_tap(bd.coord);
    if (t == -2 || (t >= 0 && p.kw >= 0 && t != p.kw)) return std::nullopt;
    if (t >= 0) p.kw = t;
  }
  if (p.kw < 0)
    for (auto& bd : p.x.bounds) {
      int t = uses_tap(bd.coord);
      if (!bd.coord.uses(p.ow) && t >= 0 && p.kh < 0) p.kh = t;
    }
  if (p.kw < 0 && p.kh < 0) {
    if (taps.size() == 2) {
      bool first_smaller = *p.x.addr.const_coef(taps[0]) < *p.x.addr.const_coef(taps[1]);
      p.kw = first_smaller ? taps[0] : taps[1];
    } else {
      int t = taps[0];
      if (p.oh < 0 || *p.x.addr.const_coef(t) < *p.x.addr.const_coef(p.oh)) p.kw = t;
      else p.kh = t;
    }
  }
  for (int t : taps)
    if (t != p.kw && t != p.kh) {
      if (p.kh < 0 && t != p.kw) p.kh = t;
      else if (p.kw < 0 && t != p.kh) p.kw = t;
      else return std::nullopt;
    }
  if (p.oh >= 0) p.OH = s[p.oh].value();
  // LATHE_STEM_DIRECT_OCB / LATHE_STEM_DIRECT_ROWS (1..8; read at each lowering) set a
  // matmul kernel's pass sizes where dp leaves them to the heuristic (A/B runs)
  auto env_int = [](const char* name) {
    const char* e = std::getenv(name);
    return e ? std::atoi(e) : 0;
  };
  const bool stem_direct = stem_direct_on();
  const int stem_ocb = k.kind == "matmul" ? std::clamp(env_int("LATHE_STEM_DIRECT_OCB"), 0, 8) : 0;
  const int stem_rows = k.kind == "matmul" ? std::clamp(env_int("LATHE_STEM_DIRECT_ROWS"), 0, 8) : 0;
  if (dp.rows > 0) p.RP = dp.rows;
  else if (stem_rows > 0) p.RP = stem_rows;
  p.acc = dp.acc;
  if (p.kh >= 0) p.KH = s[p.kh].value();
  if (p.kw >= 0) p.KW = s[p.kw].value();
  p.akw = p.kw >= 0 ? *p.x.addr.const_coef(p.kw) : 0;
  int64_t ah = p.oh >= 0 ? *p.x.addr.const_coef(p.oh) : 0, akh = p.kh >= 0 ? *p.x.addr.const_coef(p.kh) : 0;
  for (int d : outs)
    if (d != p.oh && d != p.ow) p.sel.push_back(d);
  if (p.w.uses(p.oh) || p.w.uses(p.ow)) return std::nullopt;
  // per-channel taps: W reads a different filter for some plane dim (a vector-matrix
  // product, x[k] · W[k, n], has the same shape of reduction with the matrix as "X")
  if (std::none_of(p.sel.begin(), p.sel.end(), [&](int d) { return p.w.uses(d); })) return std::nullopt;
  // an output channel dim X does not read: the widest such
  for (int d : p.sel)
    if (!p.x.uses(d) && p.w.uses(d) && s[d].is_const() && p.w.addr.const_coef(d) && (p.oc < 0 || s[d].value() > p.OC))
      p.oc = d, p.OC = s[d].value();
  for (int d : p.sel)
    if (d != p.oc) p.xsel.push_back(d);
  const int64_t ntaps = p.CG * p.KH * p.KW;
  if (p.multi()) {
    p.cwoc = *p.w.addr.const_coef(p.oc);
    // The pass loops over input channels and tap rows, kw unrolled (Plan::tap_loop), where
    // the unrolled pass's weight broadcasts (ntaps x OCB, loop-invariant in v: LLVM hoists
    // them) and its accumulators would not fit the register file (32 with 16 lanes, 16 with
    // 8): every stem and grouped convolution with several outputs per group but the smallest
    const int64_t regs = L >= 16 ? 32 : 16;
    p.OCB = std::min<int64_t>(p.OC, dp.ocb > 0 ? dp.ocb : stem_ocb > 0 ? stem_ocb : outputs_per_pass(p.OC, L, stem_direct));
    p.tap_loop = stem_direct && ntaps * p.OCB + p.RP * (p.OCB + 1) > regs;
    if (stem_direct && !p.tap_loop && dp.ocb <= 0 && stem_ocb <= 0)
      p.OCB = std::min<int64_t>(p.OC, outputs_per_pass(p.OC, L, false));
    // a GEMM (matmul kernel) stays one unless its contraction is a small window over few
    // input channels (a stem): there the direct nest reads the input once per band instead
    // of packing taps x positions of it. The heuristic takes a matmul kernel up to
    // kMaxDirectTaps over at most kMaxTapLoopChannels input channels (a 7x7 x 3-channel stem,
    // 147 taps: one thread 1166-1202 us as the GEMM, 941-997 us direct with the tap loop,
    // stem21), else up to kMaxTaps (the unrolled pass of a 7x7 stem measured no faster than
    // the GEMM; so under LATHE_STEM_DIRECT=0); a tuning candidate, dp.force, to kMaxDirectTaps
    const int64_t max_taps =
        k.kind == "matmul" && !dp.force && !(stem_direct && p.CG <= kMaxTapLoopChannels) ? kMaxTaps : kMaxDirectTaps;
    if (ntaps > max_taps ||
        (k.kind == "matmul" && (p.KH < 2 || p.KW < 2 || p.oh < 0 || p.CG > kMaxDirectChannels)))
      return std::nullopt;
  } else if (ntaps > kMaxTaps || k.kind == "matmul") {
    return std::nullopt;
  }
  if (p.kh >= 0) {
    auto c = p.w.addr.const_coef(p.kh);
    if (!c) return std::nullopt;
    p.ckh = *c;
  }
  if (p.kw >= 0) {
    auto c = p.w.addr.const_coef(p.kw);
    if (!c) return std::nullopt;
    p.ckw = *c;
  }
  // the X conditions: per column (e), per row (u) or per plane
  auto cf = [](const Affine& c, int d) -> std::optional<int64_t> { return d < 0 ? std::optional<int64_t>(0) : c.const_coef(d); };
  bool have_row = false;
  for (size_t j = 0; j < p.x.bounds.size(); ++j) {
    const Affine& c = p.x.bounds[j].coord;
    bool on_col = c.uses(p.ow) || (p.kw >= 0 && c.uses(p.kw));
    bool on_row = (p.oh >= 0 && c.uses(p.oh)) || (p.kh >= 0 && c.uses(p.kh));
    if (on_col && on_row) return std::nullopt;
    if (on_col) {
      if (cf(c, p.ow) != p.s || cf(c, p.kw) != p.akw) return std::nullopt;
      p.col_b.push_back(j);
    } else if (on_row) {
      auto bh = cf(c, p.oh), bkh = cf(c, p.kh);
      if (!bh || !bkh || *bh < 0 || *bkh < 0) return std::nullopt;
      if (have_row && (*bh != p.uh || *bkh != p.ukh)) return std::nullopt;
      have_row = true;
      p.uh = *bh, p.ukh = *bkh;
      p.row_b.push_back(j);
    } else {
      p.plane_b.push_back(j);
    }
  }
  if (have_row) {
    if (p.uh > 0) {
      if (ah % p.uh) return std::nullopt;
      p.RW = ah / p.uh;
    } else {
      if (p.ukh == 0 || akh % p.ukh) return std::nullopt;
      p.RW = akh / p.ukh;
    }
    if (p.uh * p.RW != ah || p.ukh * p.RW != akh || p.RW <= 0) return std::nullopt;
  } else {
    int64_t g = std::gcd(ah, akh);
    if (g > 0) p.RW = g, p.uh = ah / g, p.ukh = akh / g;
  }
  if (p.oh >= 0 && p.uh == 0) return std::nullopt;
  // a matmul kernel's window lies along rows of the input (a plain GEMM read as a "window"
  // of K taps a column apart does not)
  if (k.kind == "matmul" && (p.akw * (p.KW - 1) >= p.RW || (p.CG > 1 && p.ukh * (p.KH - 1) * p.RW >= p.ackc)))
    return std::nullopt;
  p.E = p.s * (p.OW - 1) + p.akw * (p.KW - 1) + 1;
  int64_t owv = cdiv(p.OW, L) * L;
  p.Q = std::max(cdiv(p.E, p.s), owv + p.akw * (p.KW - 1) / p.s);
  auto rows = [&](int64_t bh) { return p.uh * (bh - 1) + p.ukh * (p.KH - 1) + 1; };
  p.BH = p.OH;
  static const int64_t band_env = [] {
    const char* e = std::getenv("LATHE_DEPTHWISE_BAND_FLOATS");
    return e && std::atoll(e) > 0 ? std::atoll(e) : 0;  // LATHE_DEPTHWISE_BAND_FLOATS=N: A/B runs
  }();
  const int64_t band_floats = band_env > 0 ? band_env : p.multi() || p.CG > 1 ? kBandFloats : kPlaneBandFloats;
  if (rows(p.BH) * p.CG * p.s * p.Q > band_floats && p.uh > 0)
    p.BH = std::clamp<int64_t>((band_floats / (p.CG * p.s * p.Q) - p.ukh * (p.KH - 1) - 1) / p.uh + 1, 1, p.OH);
  p.NB = cdiv(p.OH, p.BH);
  if (p.multi() && p.uh > 0) {  // few planes (a batch-1 stem): enough bands for the cores
    int64_t planes = 1;
    for (int d : p.xsel) planes = s[d].is_const() ? planes * s[d].value() : kMinTasks;
    if (planes * p.NB < kMinTasks) p.NB = std::max(p.NB, std::min(cdiv(kMinTasks, planes), cdiv(p.OH, 2)));
  }
  // LATHE_DEPTHWISE_ROW_SPLIT=1 (off: not yet measured apart from the noise): the threads
  // split a depthwise layer over its rows, as the 1x1 convolutions around it split over
  // positions, instead of over its channels: each thread's contiguous share of the parallel
  // index is then whole bands of every plane (NB a multiple of the threads), and it reads the
  // rows its core wrote in the layer before (mobilenet_v2: with the channel split half of each
  // input was written on the other core; at two threads each kernel's chunks took ~20 us more
  // CPU than at one)
  static const bool row_split = [] {
    const char* e = std::getenv("LATHE_DEPTHWISE_ROW_SPLIT");
    return e && std::string(e) == "1";
  }();
  const int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  if (row_split && !p.multi() && p.uh > 0 && threads > 1 && p.OH >= 2 * threads) {
    p.NB = cdiv(p.NB, threads) * threads;
    p.band_major = true;
  }
  p.BH = cdiv(p.OH, p.NB);
  if (p.multi() && p.BH % p.RP && p.BH < p.OH) p.BH += p.RP - p.BH % p.RP;  // whole passes: a partial one runs at part speed
  p.NB = cdiv(p.OH, p.BH);
  p.UB = rows(p.BH);
  if (p.CG * p.UB * p.s * p.Q > kMaxBandFloats) return std::nullopt;
  // the copy must not cost more than the taps it serves
  if (p.NB * p.UB * p.s * p.Q > 4 * p.KH * p.KW * p.OH * p.OW + 4096) return std::nullopt;  // per input channel
  return p;
}

class DepthwiseLowering {
 public:
  DepthwiseLowering(const KernelGraph& kg, const Kernel& k, const Plan& p, int lanes) : kg_(kg), k_(k), p_(p), L_(lanes) {}

  LoopFunc run() {
    const Plan& p = p_;
    f_.name = k_.name;
    f_.kernel = k_.id;
    f_.dims = kg_.symbols;
    f_.kind = k_.kind;
    int pout = add_param(k_.output, true, "out");
    int px = add_param(kg_.buffer_of.at(p.x.src), false, "x");
    int pw = add_param(kg_.buffer_of.at(p.w.src), false, "w");
    for (int b : k_.inputs) add_param(b, false, "in" + std::to_string(f_.buffers.size()));
    const Shape& s = p.mul->shape;
    const int64_t S = p.s, Q = p.Q, owv = cdiv(p.OW, L_) * L_;

    std::vector<Stmt> body;
    SymInt planes = 1;
    for (int d : p.xsel) planes = planes * s[d];
    ExprRef t = var("t"), plane = t, band = const_int(0);
    if (p.NB > 1 && p.band_major) {
      body.push_back(make_let("band", DType::I64, binary(Op::IDiv, t, from_sym(planes))));
      body.push_back(make_let("plane", DType::I64, binary(Op::Mod, t, from_sym(planes))));
      band = var("band"), plane = var("plane");
    } else if (p.NB > 1) {
      body.push_back(make_let("band", DType::I64, binary(Op::Mod, t, const_int(p.NB))));
      body.push_back(make_let("plane", DType::I64, binary(Op::IDiv, t, const_int(p.NB))));
      band = var("band"), plane = var("plane");
    }
    std::map<int, ExprRef> co;
    if (!p.xsel.empty()) co = group_coords(p.xsel, s, plane);
    for (auto& [d, e] : co)
      if (e->kind != ExprKind::Var) {
        std::string n = "c" + std::to_string(d);
        body.push_back(make_let(n, DType::I64, e));
        e = var(n);
      }
    auto part = [&](const Affine& a) { return add(from_sym(a.c0), affine_part(a, co)); };
    body.push_back(make_let("oh0", DType::I64, mul(band, const_int(p.BH))));
    body.push_back(make_let("nh", DType::I64, min_of(const_int(p.BH), sub(const_int(p.OH), var("oh0")))));
    ExprRef u0 = mul(var("oh0"), const_int(p.uh));  // the band's first input row
    body.push_back(make_let("xa", DType::I64, add(part(p.x.addr), mul(u0, const_int(p.RW)))));
    if (!p.multi()) body.push_back(make_let("wa", DType::I64, part(p.w.addr)));
    // the valid part of a row, [elo, ehi) along e: the column conditions
    ExprRef elo = const_int(0), ehi = const_int(p.E);
    for (size_t j : p.col_b) {
      auto& bd = p.x.bounds[j];
      ExprRef base = part(bd.coord);
      elo = binary(Op::Max, elo, sub(from_sym(bd.lo), base));
      ehi = min_of(ehi, sub(from_sym(bd.hi), base));
    }
    body.push_back(make_let("elo", DType::I64, min_of(elo, const_int(p.E))));
    body.push_back(make_let("ehi", DType::I64, binary(Op::Max, ehi, var("elo"))));
    body.push_back(make_let("qlo", DType::I64, binary(Op::IDiv, add(var("elo"), const_int(S - 1)), const_int(S))));
    body.push_back(make_let("qhi", DType::I64, binary(Op::Max, var("qlo"), binary(Op::IDiv, var("ehi"), const_int(S)))));
    // the taps' weights, once per plane (register accumulators: read at each use)
    if (!p.accumulate())
    for (int64_t c = 0; c < p.CG; ++c)
      for (int64_t i = 0; i < p.KH; ++i)
        for (int64_t j = 0; j < p.KW; ++j)
          body.push_back(make_let(wname(c, i, j), DType::F32,
                                  load(pw, DType::F32, add(var("wa"), const_int(p.ckc * c + p.ckh * i + p.ckw * j)))));
    body.push_back(make_alloc("pb", DType::F32, 1, p.CG * p.UB * S * Q));
    body.push_back(make_alloc("rowt", DType::F32, 1, p.RP * p.OCB * owv));

    // fill: buffer row u = input row u0 + u, split into S phases of Q
    ExprRef u = var("u"), ug = add(u0, u);
    ExprRef cc = p.CG > 1 ? var("cc") : const_int(0);  // the input channel of a group
    ExprRef rb = mul(add(mul(cc, const_int(p.UB)), u), const_int(S * Q));
    ExprRef xr = add(add(var("xa"), mul(cc, const_int(p.ackc))), mul(u, const_int(p.RW)));
    ExprRef hv;
    for (size_t j : p.plane_b) {
      auto& bd = p.x.bounds[j];
      ExprRef c = part(bd.coord);
      hv = logical_and(hv, logical_and(le(from_sym(bd.lo), c), lt(c, from_sym(bd.hi))));
    }
    for (size_t j : p.row_b) {
      auto& bd = p.x.bounds[j];
      ExprRef c = add(part(bd.coord), ug);
      hv = logical_and(hv, logical_and(le(from_sym(bd.lo), c), lt(c, from_sym(bd.hi))));
    }
    auto copy = [&](const std::string& q, ExprRef qv, bool masked) {
      std::vector<Stmt> st;
      for (int64_t r = 0; r < S; ++r) {
        ExprRef e = add(mul(qv, const_int(S)), const_int(r));
        ExprRef m = masked ? logical_and(le(var("elo"), e), lt(e, var("ehi"))) : nullptr;
        st.push_back(make_local_store("pb", add(rb, add(const_int(r * Q), qv)), load(px, DType::F32, add(xr, e), m)));
      }
      return st;
    };
    // a row: zeros, the run of whole stride groups copied (vectorized), and with a stride
    // above 1 the partly valid group at each end (masked); every other group is padding
    Stmt zero = make_for("z", const_int(S * Q), {make_local_store("pb", add(rb, var("z")), const_float(0, DType::F32))},
                         "fill: zeros");
    zero.annot.vectorize = true;
    // A row inside the input: zeros only where the copies below write nothing, [0, qlo) and
    // [qhi, Q) of each phase (with a stride above 1 the masked groups at qlo - 1 and qhi write
    // their own zeros). Zeroing the whole row first stored it twice: MobileNet's 56 x 56
    // stride-2 layer spent ~15 vector stores a row on zeros the copy overwrote.
    auto zero_run = [&](const std::string& z, ExprRef lo, ExprRef n, const char* what) {
      std::vector<Stmt> zs;
      for (int64_t r = 0; r < S; ++r)
        zs.push_back(make_local_store("pb", add(rb, add(const_int(r * Q), add(lo, var(z)))), const_float(0, DType::F32)));
      Stmt f = make_for(z, n, std::move(zs), what);
      f.annot.vectorize = true;
      return f;
    };
    ExprRef zl = S > 1 ? binary(Op::Max, const_int(0), sub(var("qlo"), const_int(1))) : var("qlo");
    ExprRef zh = S > 1 ? min_of(add(var("qhi"), const_int(1)), const_int(Q)) : var("qhi");
    std::vector<Stmt> valid;
    if (whole_zero_rows()) valid.push_back(zero);  // LATHE_DEPTHWISE_ZERO_ROWS=1: the old fill (A/B runs)
    else
      valid = {zero_run("zl", const_int(0), zl, "fill: the left padding"),
               zero_run("zh", zh, binary(Op::Max, const_int(0), sub(const_int(Q), zh)), "fill: the right padding")};
    if (S > 1) valid.push_back(make_if(lt(const_int(0), var("qlo")), copy("ql", sub(var("qlo"), const_int(1)), true)));
    Stmt mid = make_for("qm", sub(var("qhi"), var("qlo")), copy("qm", add(var("qlo"), var("qm")), false), "fill: the row");
    mid.annot.vectorize = true;
    // The run as whole vectors: a row that is not a whole number of them (7, 14, 28 wide)
    // copied its last up to L - 1 groups one scalar at a time, as slow as the rest of the row.
    // The wide copy reads on into the next input row (so only where that stays inside X) and
    // writes up to L - 1 groups past qhi, inside the phase (qlo + cap <= Q); of those only the
    // groups the valid outputs read (up to (E - 1) / S: right padding) must be zeros again,
    // the rest are read by the lanes past OW only, whose outputs are not kept.
    const int64_t xsize = const_numel(kg_.buffers[kg_.buffer_of.at(p.x.src)].shape);
    if (S > 1 && xsize > 0 && wide_epilogue_on()) {  // stride 1: measured slower (14 x 14: 46 -> 53 us)
      ExprRef n = sub(var("qhi"), var("qlo")), cap = mul(binary(Op::IDiv, add(n, const_int(L_ - 1)), const_int(L_)), const_int(L_));
      ExprRef fits = logical_and(le(add(var("qlo"), cap), const_int(Q)),
                                 le(add(add(xr, mul(add(var("qlo"), cap), const_int(S))), const_int(0)), const_int(xsize)));
      Stmt wide = make_for("qw", cap, copy("qw", add(var("qlo"), var("qw")), false), "fill: the row, whole vectors");
      wide.annot.vectorize = true;
      // re-zero [qhi (+1 past the masked group of a stride above 1), (E - 1) / S] of each phase
      ExprRef zlo = add(var("qhi"), const_int(S > 1 ? 1 : 0));
      ExprRef zn = binary(Op::Max, const_int(0), sub(min_of(add(var("qlo"), cap), const_int((p.E - 1) / S + 1)), zlo));
      std::vector<Stmt> zs;
      for (int64_t r = 0; r < S; ++r)
        zs.push_back(make_local_store("pb", add(rb, add(const_int(r * Q), add(zlo, var("zr")))), const_float(0, DType::F32)));
      Stmt rez = make_for("zr", zn, std::move(zs), "fill: the right padding again");
      valid.push_back(make_if(fits, {std::move(wide), std::move(rez)}, {std::move(mid)}));
    } else {
      valid.push_back(std::move(mid));
    }
    if (S > 1) valid.push_back(make_if(lt(var("qhi"), const_int(Q)), copy("qr", var("qhi"), true)));
    std::vector<Stmt> fill_body = hv ? std::vector<Stmt>{make_if(hv, std::move(valid), {zero})} : std::move(valid);
    ExprRef nu = add(mul(sub(var("nh"), const_int(1)), const_int(p.uh)), const_int(p.ukh * (p.KH - 1) + 1));
    Stmt fill = make_for("u", nu, std::move(fill_body), "fill the band's input rows (zero padded, split by stride)");
    body.push_back(p.CG > 1 ? make_for("cc", const_int(p.CG), {std::move(fill)}, "input channels of the group") : std::move(fill));

    // compute: two output rows at a time (they share the loads of the input rows both
    // read), L outputs per vector, one chain per tap row; then the epilogue of each row
    ExprRef v = var("v");
    auto row_sum = [&](ExprRef i) {
      ExprRef acc;
      for (int64_t c = 0; c < p.CG; ++c)
      for (int64_t kh = 0; kh < p.KH; ++kh) {
        ExprRef chain;
        for (int64_t kw = 0; kw < p.KW; ++kw) {
          ExprRef row = add(mul(add(mul(i, const_int(p.uh)), const_int(c * p.UB + p.ukh * kh)), const_int(S)), const_int(p.akw * kw % S));
          ExprRef idx = add(add(mul(row, const_int(Q)), mul(v, const_int(L_))), const_int(p.akw * kw / S));
          ExprRef term = binary(Op::Mul, broadcast(var(wname(c, kh, kw), DType::F32), L_), local_load("pb", DType::F32, idx, L_));
          chain = chain ? binary(Op::Add, chain, term) : term;
        }
        acc = acc ? binary(Op::Add, acc, chain) : chain;
      }
      return acc;
    };
    auto cstr = contiguous_strides(p.R->shape);
    wide_rows_ = p.oh >= 0 && cstr[p.ow] == SymInt(1) && cstr[p.oh] == SymInt(p.OW) && wide_epilogue_on();
    int variants = 0;
    // output row i, channel o0 + j of the pass, from rowt[slot · owv …]
    auto epilogue = [&](ExprRef i, int64_t slot, int64_t j) {
      std::string a = "a" + std::to_string(variants);
      ExprRef ow = var("ow");
      std::vector<ExprRef> ridx(p.R->shape.size(), const_int(0));
      for (auto& [d, e] : co) ridx[d] = e;
      if (p.multi()) ridx[p.oc] = add(var("o0"), const_int(j));
      if (p.oh >= 0) ridx[p.oh] = add(var("oh0"), i);
      ridx[p.ow] = ow;
      ExprRef caddr = const_int(0);
      for (int d = 0; d < (int)p.R->shape.size(); ++d)
        if (p.R->shape[d] != SymInt(1)) caddr = add(caddr, mul(ridx[d], from_sym(cstr[d])));
      std::vector<Stmt> ep{make_let(a, DType::F32, local_load("rowt", DType::F32, add(ow, const_int(slot * owv))))};
      ExprRef val = var(a, DType::F32);
      if (k_.root != p.R) val = build_epilogue(kg_, k_.root, p.R, ridx, val, param_of_, ep, "e" + std::to_string(variants) + "_");
      ++variants;
      // A row of OW outputs that is not a whole number of vectors (a 7 x 7 or 14 x 14 map)
      // left the vectorized loop a scalar remainder of up to L - 1 elements per row, as slow
      // as the rest of the row (MobileNet's stride-2 layers at 7/14/28 wide took about twice
      // ONNX Runtime's time). When the output rows are contiguous (row stride OW) and the
      // epilogue reads nothing along the row but rowt, every row of the band but its last is
      // stored as whole vectors: the owv - OW (< OW) values past its end land at the start of
      // the next row of this plane and channel, which this task stores after (the pass order:
      // rows ascending), so they are overwritten before anything reads them.
      bool wide = wide_rows_ && owv > p.OW && owv - p.OW < p.OW;
      for (size_t e = 1; e < ep.size() && wide; ++e) wide = !mentions(ep[e].value, "ow") && !mentions(ep[e].index, "ow");
      ep.push_back(make_store(pout, caddr, val));
      // The wide row's trip count as a constant in each branch (owv, or OW on the band's last
      // row): as one loop of trip `i + 1 < nh ? owv : OW` (known only at run time) a 16-wide
      // row (14 x 14 out) measured slow, likely LLVM's interleave of several vectors per step
      // leaving the row to its scalar remainder; with a constant trip under 128 it does not
      // interleave (one thread, min of 1000, 192 channels 28 -> 14 stride 2 with the trip
      // fixed at one vector per step: 57-67 -> 45-47 us; 7, 28 and 56 wide unchanged)
      auto row_loop = [&](int64_t n, const char* note) {
        Stmt l = make_for("ow", const_int(n), ep, note);
        l.annot.vectorize = true;
        return l;
      };
      if (!wide) return row_loop(p.OW, "epilogue: the output row");
      return make_if(lt(add(i, const_int(1)), var("nh")), {row_loop(owv, "epilogue: the output row, whole vectors")},
                     {row_loop(p.OW, "epilogue: the output row")});
    };
    // the input vector of tap (c, kh, kw) for output row i
    auto tap_load = [&](ExprRef i, int64_t c, int64_t kh, int64_t kw) {
      ExprRef row = add(mul(add(mul(i, const_int(p.uh)), const_int(c * p.UB + p.ukh * kh)), const_int(S)), const_int(p.akw * kw % S));
      ExprRef idx = add(add(mul(row, const_int(Q)), mul(v, const_int(L_))), const_int(p.akw * kw / S));
      return local_load("pb", DType::F32, idx, L_);
    };
    // one vector of each of rows `is` (× OCB output channels): rowt[(r · OCB + j) · owv + v · L]
    auto pass = [&](const std::vector<ExprRef>& is, const std::string& note) {
      std::vector<Stmt> vb;
      if (!p.accumulate()) {
        for (size_t r = 0; r < is.size(); ++r) vb.push_back(make_local_store("rowt", add(mul(v, const_int(L_)), const_int((int64_t)r * owv)), row_sum(is[r])));
        return make_for("v", const_int(owv / L_), std::move(vb), note);
      }
      // register accumulators acc[r · OCB + j]; per tap one load per row, one weight per channel
      const int64_t R = (int64_t)is.size(), n = R * p.OCB;
      vb.push_back(make_alloc("acc", DType::F32, L_, n, /*registers=*/true));
      for (int64_t a = 0; a < n; ++a) vb.push_back(make_local_store("acc", const_int(a), broadcast(const_float(0, DType::F32), L_)));
      if (p.tap_loop) {
        // for c: for kh: the KW taps unrolled (the weights' addresses depend on the loops)
        ExprRef cv = var("tc"), khv = var("tkh");
        std::vector<Stmt> tb;
        for (int64_t kw = 0; kw < p.KW; ++kw) {
          std::string ts = std::to_string(kw);
          for (int64_t r = 0; r < R; ++r) {
            ExprRef row = add(mul(add(add(mul(is[r], const_int(p.uh)), mul(cv, const_int(p.UB))), mul(khv, const_int(p.ukh))), const_int(S)),
                              const_int(p.akw * kw % S));
            ExprRef idx = add(add(mul(row, const_int(Q)), mul(v, const_int(L_))), const_int(p.akw * kw / S));
            tb.push_back(make_let("x" + std::to_string(r) + "_" + ts, DType::F32, local_load("pb", DType::F32, idx, L_)));
          }
          for (int64_t j = 0; j < p.OCB; ++j) {
            ExprRef wi = add(add(add(var("wa"), mul(cv, const_int(p.ckc))), mul(khv, const_int(p.ckh))), const_int(p.cwoc * j + p.ckw * kw));
            std::string wn = "wv" + std::to_string(j) + "_" + ts;
            tb.push_back(make_let(wn, DType::F32, broadcast(load(pw, DType::F32, wi), L_)));
            for (int64_t r = 0; r < R; ++r) {
              ExprRef cur = local_load("acc", DType::F32, const_int(r * p.OCB + j), L_);
              ExprRef term = binary(Op::Mul, var(wn, DType::F32, L_), var("x" + std::to_string(r) + "_" + ts, DType::F32, L_));
              tb.push_back(make_local_store("acc", const_int(r * p.OCB + j), binary(Op::Add, cur, term)));
            }
          }
        }
        Stmt khl = make_for("tkh", const_int(p.KH), std::move(tb), "tap rows");
        vb.push_back(make_for("tc", const_int(p.CG), {std::move(khl)}, "input channels"));
        for (int64_t a = 0; a < n; ++a)
          vb.push_back(make_local_store("rowt", add(mul(v, const_int(L_)), const_int(a * owv)), local_load("acc", DType::F32, const_int(a), L_)));
        return make_for("v", const_int(owv / L_), std::move(vb), note);
      }
      int tap = 0;
      for (int64_t c = 0; c < p.CG; ++c)
        for (int64_t kh = 0; kh < p.KH; ++kh)
          for (int64_t kw = 0; kw < p.KW; ++kw, ++tap) {
            std::string ts = std::to_string(tap);
            for (int64_t r = 0; r < R; ++r)
              vb.push_back(make_let("x" + std::to_string(r) + "_" + ts, DType::F32, tap_load(is[r], c, kh, kw)));
            for (int64_t j = 0; j < p.OCB; ++j) {
              ExprRef w = broadcast(load(pw, DType::F32, add(var("wa"), const_int(p.cwoc * j + p.ckc * c + p.ckh * kh + p.ckw * kw))), L_);
              std::string wn = "wv" + std::to_string(j) + "_" + ts;
              vb.push_back(make_let(wn, DType::F32, w));
              for (int64_t r = 0; r < R; ++r) {
                ExprRef cur = local_load("acc", DType::F32, const_int(r * p.OCB + j), L_);
                ExprRef term = binary(Op::Mul, var(wn, DType::F32, L_), var("x" + std::to_string(r) + "_" + ts, DType::F32, L_));
                vb.push_back(make_local_store("acc", const_int(r * p.OCB + j), binary(Op::Add, cur, term)));
              }
            }
          }
      for (int64_t a = 0; a < n; ++a)
        vb.push_back(make_local_store("rowt", add(mul(v, const_int(L_)), const_int(a * owv)), local_load("acc", DType::F32, const_int(a), L_)));
      return make_for("v", const_int(owv / L_), std::move(vb), note);
    };
    std::vector<Stmt> rows_body;
    const int64_t RP = p.RP;
    std::vector<ExprRef> is;
    for (int64_t r = 0; r < RP; ++r) is.push_back(add(mul(var("ip"), const_int(RP)), const_int(r)));
    std::vector<Stmt> group{pass(is, RP == 1 ? "vectors of an output row" : "vectors of " + std::to_string(RP) + " output rows")};
    for (int64_t r = 0; r < RP; ++r)
      for (int64_t j = 0; j < p.OCB; ++j) group.push_back(epilogue(is[r], r * p.OCB + j, j));
    rows_body.push_back(make_for("ip", binary(Op::IDiv, var("nh"), const_int(RP)), std::move(group),
                                 RP == 2 ? "pairs of output rows of the band" : "passes of output rows of the band"));
    if (RP > 1) {  // the band's last nh % RP rows, one at a time
      ExprRef il = add(mul(binary(Op::IDiv, var("nh"), const_int(RP)), const_int(RP)), var("ir"));
      std::vector<Stmt> last{pass({il}, "vectors of a last output row")};
      for (int64_t j = 0; j < p.OCB; ++j) last.push_back(epilogue(il, j, j));
      rows_body.push_back(make_for("ir", binary(Op::Mod, var("nh"), const_int(RP)), std::move(last), "the last rows"));
    }
    if (p.multi()) {
      // passes of OCB output channels; the last starts at OC - OCB (it may redo a few)
      std::vector<Stmt> ob{make_let("o0", DType::I64, min_of(mul(var("ob"), const_int(p.OCB)), const_int(p.OC - p.OCB))),
                           make_let("wa", DType::I64, add(part(p.w.addr), mul(var("o0"), const_int(p.cwoc))))};
      for (auto& st : rows_body) ob.push_back(std::move(st));
      body.push_back(make_for("ob", const_int(cdiv(p.OC, p.OCB)), std::move(ob), "passes of output channels"));
    } else {
      for (auto& st : rows_body) body.push_back(std::move(st));
    }

    Stmt tl = make_for("t", mul(from_sym(planes), const_int(p.NB)), std::move(body), "planes × row bands");
    tl.annot.parallel = true;
    f_.body.push_back(std::move(tl));
    std::string taps = (p.CG > 1 ? std::to_string(p.CG) + " channels x " : std::string()) + std::to_string(p.KH) + "x" +
                       std::to_string(p.KW) + " taps, stride " + std::to_string(p.s) + ", " + std::to_string(L_) +
                       " lanes, bands of " + std::to_string(p.BH) + " rows, " +
                       (p.RP == 2 ? std::string("rows in pairs") : std::to_string(p.RP) + " rows per pass");
    if (p.multi())
      f_.schedule_log.push_back("direct conv: " + taps + ", " + std::to_string(p.OCB) + " of " + std::to_string(p.OC) +
                                " output channels per pass" + (p.tap_loop ? ", tap loop" : ""));
    else
      f_.schedule_log.push_back("depthwise: " + taps + (p.acc ? ", register accumulators" : "") +
                                (p.band_major ? ", split over rows" : ""));
    unique_loop_names(f_);
    return std::move(f_);
  }

 private:
  const KernelGraph& kg_;
  const Kernel& k_;
  const Plan& p_;
  const int L_;
  LoopFunc f_;
  std::unordered_map<int, int> param_of_;
  bool wide_rows_ = false;  // output rows contiguous, OW apart (see epilogue)

  // LATHE_DEPTHWISE_WIDE_ROWS=0: every row's epilogue stops at OW (A/B runs)
  static bool whole_zero_rows() {
    static const bool on = [] {
      const char* e = std::getenv("LATHE_DEPTHWISE_ZERO_ROWS");
      return e && std::string(e) == "1";
    }();
    return on;
  }
  static bool wide_epilogue_on() {
    static const bool on = [] {
      const char* e = std::getenv("LATHE_DEPTHWISE_WIDE_ROWS");
      return !(e && std::string(e) == "0");
    }();
    return on;
  }

  static std::string wname(int64_t c, int64_t i, int64_t j) {
    return "w" + std::to_string(c) + "_" + std::to_string(i) + "_" + std::to_string(j);
  }

  int add_param(int buffer, bool written, const std::string& name) {
    auto it = param_of_.find(buffer);
    if (it != param_of_.end()) return it->second;
    f_.buffers.push_back({buffer, name, kg_.buffers[buffer].dtype, written});
    return param_of_[buffer] = (int)f_.buffers.size() - 1;
  }
};

bool depthwise_off() {
  static const bool off = [] {
    const char* e = std::getenv("LATHE_DEPTHWISE");
    return e && std::string(e) == "0";
  }();
  return off;  // LATHE_DEPTHWISE=0: the generic reduction / the GEMM (A/B runs)
}

// LATHE_DEPTHWISE_NARROW=0: rows of at most 8 outputs run on the host's full vectors (16
// lanes with AVX-512), not 8 (A/B runs; read at each lowering, so a test can set it)
bool narrow_short_rows() {
  const char* e = std::getenv("LATHE_DEPTHWISE_NARROW");
  return !(e && std::string(e) == "0");
}

}  // namespace

std::optional<LoopFunc> lower_depthwise_kernel(const KernelGraph& kg, int kernel, int lanes, const DirectParams& dp) {
  if (depthwise_off() && !dp.force) return std::nullopt;
  const Kernel& k = kg.kernels.at(kernel);
  auto plan = analyse(kg, k, lanes, dp);
  if (!plan) return std::nullopt;
  if (narrow_short_rows() && lanes == 16 && !plan->multi() && plan->OW <= 8) {
    // rows of at most 8 outputs (MobileNetV2's 7 x 7 layers): one vector of 8 lanes a row,
    // not 16 of which 9 are idle: the copied rows are half as wide (Q 18 -> 10 at 7 x 7)
    if (auto p8 = analyse(kg, k, 8, dp)) return DepthwiseLowering(kg, k, *p8, 8).run();
  }
  return DepthwiseLowering(kg, k, *plan, lanes).run();
}

bool takes_direct_conv(const KernelGraph& kg, int kernel, int lanes, bool candidate) {
  DirectParams dp;
  dp.force = candidate;
  return (candidate || !depthwise_off()) && analyse(kg, kg.kernels.at(kernel), lanes, dp).has_value();
}

bool is_depthwise(const LoopFunc& f) {
  return !f.schedule_log.empty() &&
         (f.schedule_log.front().rfind("depthwise: ", 0) == 0 || f.schedule_log.front().rfind("direct conv: ", 0) == 0);
}

}  // namespace lathe::loop
