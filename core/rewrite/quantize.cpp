// quantize.cpp — the quantize pass (see quantize.h): find Reduce-add-over-Mul contractions
// whose one operand is a View chain of a constant 2-D f32 weight, quantize the weight on
// the host once, and rebuild the contraction on the quantized weight.
//
// The operand chains are folded into one ViewSpec each (view_compose), so the rebuilt
// operands are single Views of the new sources, and the scales are Views of small scale
// tensors laid out like the Reduce's output: a per-channel weight scale [C] is read with
// stride 1 along the Mul dims that walk the weight's channel axis, a per-row activation
// scale [.., 1] with the activation's row strides divided by K.
#include "core/rewrite/quantize.h"

#include <cmath>
#include <optional>

#include "core/frontend/tensor.h"
#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/loop/lower.h"
#include "core/runtime/host_tensor.h"

namespace lathe {

QuantMode parse_quant_mode(const std::string& s) {
  if (s == "dynamic") return QuantMode::Dynamic;
  if (s == "weight-int8") return QuantMode::WeightInt8;
  if (s == "weight-int4") return QuantMode::WeightInt4;
  throw UserError("quantize: unknown --mode '" + s + "' (expected dynamic, weight-int8 or weight-int4)");
}

const char* quant_mode_name(QuantMode m) {
  switch (m) {
    case QuantMode::Dynamic: return "dynamic";
    case QuantMode::WeightInt8: return "weight-int8";
    case QuantMode::WeightInt4: return "weight-int4";
  }
  return "?";
}

namespace {

// A View chain folded into one view of its source; the source itself when there is none.
struct Chain {
  NodeRef src = nullptr;
  ViewSpec view;
};

// Folds the outer views of x's chain into one view of the node below them, as far down
// as the views compose (a view that does not compose with those above it is the source).
std::optional<Chain> fold_chain(NodeRef x) {
  Chain c;
  c.src = x;
  c.view = ViewSpec::contiguous(x->shape);
  while (c.src->op == Op::View) {
    auto v = view_compose(*c.src->attrs.view, c.view);
    if (!v) break;
    c.view = *v;
    c.src = c.src->inputs[0];
  }
  if (c.view.has_mask()) return std::nullopt;
  return c;
}

bool is_weight(NodeRef n) { return n->op == Op::Const && n->attrs.data && n->dtype == DType::F32 && n->rank() == 2; }

// A contraction with a constant weight, analysed.
struct Site {
  NodeRef reduce, mul;
  int w_side;         // which Mul input reads the weight
  int k;              // the reduced Mul dim
  Chain w;            // the weight's chain
  int w_kaxis;        // the weight's K axis (0: [K, N], 1: [N, K])
  int64_t K, C;       // reduction length, output channels
};

std::optional<Site> analyse(NodeRef r) {
  if (r->op != Op::Reduce || r->attrs.reduce != ReduceOp::Add || r->dtype != DType::F32 || r->attrs.axes.size() != 1)
    return std::nullopt;
  NodeRef mul = r->inputs[0];
  if (mul->op != Op::Mul || mul->dtype != DType::F32) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto w = fold_chain(mul->inputs[side]);
    if (!w || !is_weight(w->src)) continue;
    Site s{r, mul, side, r->attrs.axes[0], *w, -1, 0, 0};
    const Shape& ws = w->src->shape;
    SymInt sk = w->view.strides[s.k];
    SymInt klen = mul->shape[s.k];
    if (!klen.is_const() || !sk.is_const()) return std::nullopt;
    if (sk == SymInt(1) && ws[1] == klen) s.w_kaxis = 1;
    else if (sk == ws[1] && ws[0] == klen) s.w_kaxis = 0;
    else return std::nullopt;
    s.K = klen.value();
    s.C = ws[1 - s.w_kaxis].value();
    SymInt cstride = s.w_kaxis == 1 ? ws[1] : SymInt(1);
    if (w->view.offset != SymInt(0)) return std::nullopt;
    for (size_t d = 0; d < mul->shape.size(); ++d) {
      if ((int)d == s.k || mul->shape[d] == SymInt(1)) continue;
      const SymInt& st = w->view.strides[d];
      if (st != SymInt(0) && st != cstride) return std::nullopt;
    }
    return s;
  }
  return std::nullopt;
}

Shape out_shape(const Site& s) {
  Shape o = s.mul->shape;
  o[s.k] = SymInt(1);
  return o;
}

// The per-channel scale [C] read in the Reduce's output layout.
Tensor channel_scale_view(const Site& s, const HostTensor& scale) {
  Tensor sc = from_host(scale);
  ViewSpec v;
  v.shape = out_shape(s);
  SymInt cstride = s.w_kaxis == 1 ? SymInt(s.K) : SymInt(1);
  for (size_t d = 0; d < v.shape.size(); ++d) {
    bool walks = (int)d != s.k && s.mul->shape[d] != SymInt(1) && s.w.view.strides[d] == cstride;
    v.strides.push_back(walks ? SymInt(1) : SymInt(0));
  }
  v.offset = SymInt(0);
  return Tensor(prim::view(sc.node(), v));
}

float round_half_even(float x) { return std::nearbyint(x); }

struct QuantWeight {
  HostTensor q;      // i8, the weight's shape
  HostTensor scale;  // f32: [C] per channel, [1] per tensor, blocks: [C, K/B] (in [N,K] order)
};

double at(const HostTensor& w, int kaxis, int64_t c, int64_t k, int64_t K, int64_t C) {
  return w.ptr<float>()[kaxis == 1 ? c * K + k : k * C + c];
}
int64_t flat(int kaxis, int64_t c, int64_t k, int64_t K, int64_t C) { return kaxis == 1 ? c * K + k : k * C + c; }

// Symmetric, per channel or per tensor, values in [-levels, levels] (127; 63 in dynamic mode).
QuantWeight quantize_int8(const HostTensor& w, const Site& s, bool per_channel, int levels = 127) {
  QuantWeight r{HostTensor(DType::I8, w.shape()), HostTensor(DType::F32, {per_channel ? s.C : 1})};
  auto* q = r.q.ptr<int8_t>();
  auto* sc = r.scale.ptr<float>();
  double all = 0;
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t k = 0; k < s.K; ++k) all = std::max(all, std::fabs(at(w, s.w_kaxis, c, k, s.K, s.C)));
  for (int64_t c = 0; c < s.C; ++c) {
    double m = all;
    if (per_channel) {
      m = 0;
      for (int64_t k = 0; k < s.K; ++k) m = std::max(m, std::fabs(at(w, s.w_kaxis, c, k, s.K, s.C)));
    }
    float scale = m > 0 ? static_cast<float>(m / levels) : 1.0f;
    if (per_channel || c == 0) sc[per_channel ? c : 0] = scale;
    for (int64_t k = 0; k < s.K; ++k) {
      float v = round_half_even(static_cast<float>(at(w, s.w_kaxis, c, k, s.K, s.C)) / scale);
      q[flat(s.w_kaxis, c, k, s.K, s.C)] = static_cast<int8_t>(std::fmax(-float(levels), std::fmin(float(levels), v)));
    }
  }
  return r;
}

// q4_0: per block, d = (the element of largest magnitude) / -8, q = clamp(round(x / d), -8, 7).
QuantWeight quantize_int4(const HostTensor& w, const Site& s, int64_t B) {
  int64_t nb = s.K / B;
  QuantWeight r{HostTensor(DType::I8, w.shape()), HostTensor(DType::F32, {s.C, nb})};
  auto* q = r.q.ptr<int8_t>();
  auto* sc = r.scale.ptr<float>();
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t b = 0; b < nb; ++b) {
      double m = 0, amax = 0;
      for (int64_t k = b * B; k < (b + 1) * B; ++k) {
        double v = at(w, s.w_kaxis, c, k, s.K, s.C);
        if (std::fabs(v) > amax) amax = std::fabs(v), m = v;
      }
      float d = static_cast<float>(m / -8.0);
      sc[c * nb + b] = d;
      for (int64_t k = b * B; k < (b + 1) * B; ++k) {
        float v = d != 0 ? round_half_even(static_cast<float>(at(w, s.w_kaxis, c, k, s.K, s.C)) / d) : 0.f;
        q[flat(s.w_kaxis, c, k, s.K, s.C)] = static_cast<int8_t>(std::fmax(-8.f, std::fmin(7.f, v)));
      }
    }
  return r;
}

// The packed kernel is a matrix-vector product: it does not block for reuse across rows of
// X as the f32 GEMM does, so contractions with more rows keep the unpacked form.
constexpr int64_t kPackedMaxRows = 16;

// The packed int4 contraction: Extern "gemv_q4" (backends/library.h) on X's rows [M, K], the
// weight as [C, K/2] bytes (per block of B: byte j holds weights j and j + B/2 in its low and
// high nibbles, stored + 8) and the scales [C, K/B], its [M, C] result laid back out as the
// Reduce's. nullptr when the contraction is not a plain X · W (one Mul dim walks the weight's
// channels and not X, the other dims constant), X has more than kPackedMaxRows rows, or the
// block is odd: the caller keeps the unpacked form then.
NodeRef packed_int4(const Site& s, const QuantWeight& qw, int64_t B) {
  if (B % 2 != 0) return nullptr;
  const Shape& S = s.mul->shape;
  int dn = -1, walkers = 0;
  for (size_t d = 0; d < S.size(); ++d)
    if ((int)d != s.k && S[d] != SymInt(1) && s.w.view.strides[d] != SymInt(0)) dn = static_cast<int>(d), ++walkers;
  if (walkers != 1 || S[dn] != SymInt(s.C)) return nullptr;
  Tensor p(s.mul->inputs[1 - s.w_side]);
  auto pc = fold_chain(p.node());
  if (!pc || pc->view.strides[dn] != SymInt(0)) return nullptr;  // X must not walk the channels
  int64_t M = 1;
  std::vector<int> perm;
  Shape ys;
  for (size_t d = 0; d < S.size(); ++d) {
    if ((int)d == s.k || (int)d == dn) continue;
    if (!S[d].is_const()) return nullptr;
    M *= S[d].value();
    perm.push_back(static_cast<int>(d));
    ys.push_back(S[d]);
  }
  if (M > kPackedMaxRows) return nullptr;
  perm.push_back(dn);
  perm.push_back(s.k);
  ys.push_back(SymInt(s.C));
  ys.push_back(SymInt(1));
  int64_t h = B / 2, nb = s.K / B;
  HostTensor pk(DType::U8, {s.C, s.K / 2});
  const int8_t* q = qw.q.ptr<int8_t>();
  uint8_t* dst = pk.ptr<uint8_t>();
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t j = 0; j < h; ++j) {
        int lo = q[flat(s.w_kaxis, c, b * B + j, s.K, s.C)] + 8, hi = q[flat(s.w_kaxis, c, b * B + h + j, s.K, s.C)] + 8;
        dst[c * (s.K / 2) + b * h + j] = static_cast<uint8_t>(lo | (hi << 4));
      }
  Tensor x = reshape(permute(narrow(p, dn, SymInt(0), SymInt(1)), perm), {SymInt(M), SymInt(s.K)});
  NodeRef y = prim::extern_call("gemv_q4", {x.node(), from_host(pk).node(), from_host(qw.scale).node()}, DType::F32,
                                {SymInt(M), SymInt(s.C)}, {M, s.C, s.K, B});
  std::vector<int> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int>(i);
  return permute(reshape(Tensor(y), ys), inv).node();
}

// Σ_k a·w (u8 a, i8 w: views of one shape, k the reduced dim) as an i32 Reduce. When K is
// even and dn (the dim walking the weight's channels) is the output's innermost non-unit dim
// (the int8 GEMM's vector side), in the form of qdq-sat16's saturating pairs, which the
// int8 GEMM runs as u8 × i8 groups of 4 (vpmaddubsw + vpmaddwd on AVX2, without VNNI):
//   Reduce_k(−max(−max(a[2j]·w[2j] + a[2j+1]·w[2j+1], −2^15), −(2^15 − 1)))
// equal to the plain sum here, as the callers' values cannot reach the clamp (|a·w| ≤ 255 · 63
// a product). Otherwise (and on hosts with VNNI, whose vpdpbusd takes the plain u8 × i8 sum
// in groups of 4) the plain sum (without VNNI the i16 GEMM: both operands widened to i16).
// pairs_form says which (dn: the Mul dim walking the weight's channels, or -1).
bool pairs_form(const Shape& mul_shape, int k, int64_t K, int dn) {
  int inner = -1;
  for (size_t d = 0; d < mul_shape.size(); ++d)
    if ((int)d != k && mul_shape[d] != SymInt(1)) inner = static_cast<int>(d);
  // with VNNI the plain u8 × i8 sum already runs as groups of 4 (vpdpbusd, 8-bit weights)
  return loop::host_int8_dot_group() != 4 && K % 2 == 0 && dn >= 0 && inner == dn;
}
NodeRef int8_sum(NodeRef a, NodeRef w, int k, bool pairs) {
  auto i32 = [](NodeRef x) { return prim::cast(x, DType::I32); };
  if (!pairs) return prim::reduce(ReduceOp::Add, prim::binary(Op::Mul, i32(a), i32(w)), {k});
  const int64_t K = a->shape[k].value();
  auto half = [&](NodeRef x, int64_t start) {  // x at k = 2j + start, j < K / 2
    ViewSpec v = ViewSpec::contiguous(x->shape);
    v.offset = v.strides[k] * SymInt(start);
    v.shape[k] = SymInt(K / 2);
    v.strides[k] = v.strides[k] * SymInt(2);
    return prim::view(x, v);
  };
  NodeRef pair = prim::binary(Op::Add, prim::binary(Op::Mul, i32(half(a, 0)), i32(half(w, 0))),
                              prim::binary(Op::Mul, i32(half(a, 1)), i32(half(w, 1))));
  NodeRef lo = prim::binary(Op::Max, pair, prim::constant_int(-32768, DType::I32, pair->shape));
  NodeRef hi = prim::unary(Op::Neg, prim::binary(Op::Max, prim::unary(Op::Neg, lo),
                                                 prim::constant_int(-32767, DType::I32, pair->shape)));
  return prim::reduce(ReduceOp::Add, hi, {k});
}

// "%12 (fc1/linear/matmul)": the node id and where it came from (an ONNX node's name).
std::string node_name(NodeRef n) {
  std::string s = "%" + std::to_string(n->id);
  if (!n->prov.path.empty()) s += " (" + n->prov.path + ")";
  return s;
}

// The activation source whose rows can be quantized on their own: walking down P's View
// chain, the deepest node X such that the views above it fold into one view of X in which
// the K dim reads X's row-major elements with stride 1 and every other stride (and the
// offset) is a multiple of K, so X is [numel / K, K] rows and the scale of the row an
// element is in is found by dividing its index by K; the output-channel dims must not
// walk X (no per-channel broadcast copy of the rows gets quantized).
// The number of rows of K elements in a tensor of shape `sh`: the trailing dims must be
// constants whose product K divides (the leading ones may be symbolic, e.g. a batch dim).
std::optional<SymInt> rows_of(const Shape& sh, int64_t K) {
  int64_t suffix = 1;
  for (size_t i = sh.size(); i-- > 0;) {
    if (!sh[i].is_const()) return std::nullopt;
    suffix *= sh[i].value();
    if (suffix % K == 0) {
      SymInt rows(suffix / K);
      for (size_t j = 0; j < i; ++j) rows = rows * sh[j];
      return rows;
    }
  }
  return std::nullopt;
}

std::optional<Chain> row_source(const Site& s) {
  auto ok = [&](const Chain& c) {
    NodeRef a = c.src;
    auto multiple = [&](const SymInt& v) {
      auto k = v.try_value();
      return k ? *k % s.K == 0 : (v % SymInt(s.K)) == SymInt(0);
    };
    if (a->dtype != DType::F32 || c.view.has_mask() || !rows_of(a->shape, s.K)) return false;
    if (c.view.strides[s.k] != SymInt(1) || !multiple(c.view.offset)) return false;
    for (size_t d = 0; d < s.mul->shape.size(); ++d) {
      if ((int)d == s.k || s.mul->shape[d] == SymInt(1)) continue;
      if (!multiple(c.view.strides[d])) return false;
      // not a broadcast copy of the rows (the N dims, which the weight walks, read no new rows)
      if (s.w.view.strides[d] != SymInt(0) && c.view.strides[d] != SymInt(0)) return false;
    }
    return true;
  };
  NodeRef x = s.mul->inputs[1 - s.w_side];
  Chain c{x, ViewSpec::contiguous(x->shape)};
  std::optional<Chain> best;
  while (true) {
    if (ok(c)) best = c;
    if (c.src->op != Op::View) break;
    auto v = view_compose(*c.src->attrs.view, c.view);
    if (!v) break;
    c.view = *v;
    c.src = c.src->inputs[0];
  }
  return best;
}

// The rebuilt Reduce (same shape and dtype as s.reduce).
NodeRef rebuild(const Site& s, const std::optional<Chain>& pc, const QuantizeOptions& o, QuantizeResult& res) {
  NodeRef p_src = pc ? pc->src : nullptr;
  const HostTensor& w = *s.w.src->attrs.data;
  Tensor p_old(s.mul->inputs[1 - s.w_side]);
  std::string shape = "[" + std::to_string(w.shape()[0]) + ", " + std::to_string(w.shape()[1]) + "]";
  res.weight_bytes_before += w.numel() * 4;
  if (o.mode == QuantMode::WeightInt4) {
    if (s.K % o.block != 0)
      throw UserError(Diagnostic{"quantize: --block " + std::to_string(o.block) + " does not divide the row of " +
                                     std::to_string(s.K) + " weights of the contraction " + node_name(s.reduce) +
                                     " (weight " + node_name(s.w.src) + " " + shape + ")",
                                 "", 0, 0, static_cast<int>(s.reduce->id)});
    QuantWeight qw = quantize_int4(w, s, o.block);
    res.weight_bytes_after += w.numel() / 2 + qw.scale.numel() * 4;
    int64_t nb = s.K / o.block;
    if (NodeRef y = packed_int4(s, qw, o.block)) {
      res.notes.push_back(node_name(s.reduce) + " weight " + shape + " int4 packed two a byte, blocks of " +
                          std::to_string(o.block) + " (gemv_q4 kernel)");
      return y;
    }
    Tensor q = to(from_host(qw.q), DType::F32);
    Tensor sc = from_host(qw.scale);  // [C, nb]
    Tensor deq;
    if (s.w_kaxis == 1) {  // [C, K]
      deq = reshape(reshape(q, {SymInt(s.C), SymInt(nb), SymInt(o.block)}) * reshape(sc, {SymInt(s.C), SymInt(nb), SymInt(1)}),
                    {SymInt(s.C), SymInt(s.K)});
    } else {  // [K, C]: the scales transposed to [nb, 1, C]
      Tensor sct = reshape(permute(sc, {1, 0}), {SymInt(nb), SymInt(1), SymInt(s.C)});
      deq = reshape(reshape(q, {SymInt(nb), SymInt(o.block), SymInt(s.C)}) * sct, {SymInt(s.K), SymInt(s.C)});
    }
    Tensor wv(prim::view(deq.node(), s.w.view));
    Tensor prod = s.w_side == 0 ? wv * p_old : p_old * wv;
    res.notes.push_back(node_name(s.reduce) + " weight " + shape + " int4, blocks of " + std::to_string(o.block));
    return prim::reduce(ReduceOp::Add, prod.node(), {s.k});
  }
  // The Mul dim that walks the weight's channels (dn, when exactly one does).
  int dn = -1, walkers = 0;
  for (size_t d = 0; d < s.mul->shape.size(); ++d)
    if ((int)d != s.k && s.mul->shape[d] != SymInt(1) && s.w.view.strides[d] != SymInt(0)) dn = static_cast<int>(d), ++walkers;
  if (walkers != 1) dn = -1;
  // dynamic with the int8 GEMM's u8 × i8 pairs (int8_sum): 7-bit weights, so that u8
  // activations times them never saturate vpmaddubsw's i16 pair sums (2 · 255 · 63 = 32130 <
  // 2^15; ONNX Runtime's reduce_range does the same); else 8-bit
  const bool pairs = o.mode == QuantMode::Dynamic && p_src && pairs_form(s.mul->shape, s.k, s.K, dn);
  QuantWeight qw = quantize_int8(w, s, o.per_channel, pairs ? 63 : 127);
  res.weight_bytes_after += w.numel() + qw.scale.numel() * 4;
  Tensor wscale = o.per_channel ? channel_scale_view(s, qw.scale) : scalar(static_cast<double>(qw.scale.ptr<float>()[0]), DType::F32);
  Tensor q = from_host(qw.q);
  std::string gran = o.per_channel ? "per-channel" : "per-tensor";
  if (o.mode == QuantMode::WeightInt8 || !p_src) {
    Tensor wv(prim::view(to(q, DType::F32).node(), s.w.view));
    Tensor prod = s.w_side == 0 ? wv * p_old : p_old * wv;
    Tensor acc(prim::reduce(ReduceOp::Add, prod.node(), {s.k}));
    res.notes.push_back(node_name(s.reduce) + " weight " + shape + " int8 " + gran +
                        (o.mode == QuantMode::Dynamic ? " (activation left float: its rows are not contiguous)" : ""));
    return (acc * wscale).node();
  }
  // dynamic: the activation source quantized per row (symmetric i8) at run time
  // the source materialized once: the row max and the quantization both read it, and
  // without a buffer each would recompute the chain that produces it (layer norm, residual)
  Tensor a(p_src->op == Op::Input || p_src->op == Op::Const || p_src->op == Op::Copy ? p_src : prim::copy(p_src));
  a = reshape(a, {*rows_of(a.shape(), s.K), SymInt(s.K)});  // rows of K (row-major)
  Tensor amax = max(abs(a), {-1}, true);                                     // [.., 1]
  Tensor ascale = maximum(amax, scalar(1e-30, DType::F32)) * (1.0 / 127.0);  // [.., 1]
  // stored + 128 as u8 [1, 255] (vpmaddubsw's unsigned operand); the + 128 comes back out
  // of the sum as 128 · Σ_k w, a constant per output channel
  // round half to even in the f32 addition itself (v + 1.5·2^23 lies where the f32 spacing
  // is 1, as core/import/lower_quant.cpp's round_i32), then − (1.5·2^23 − 128) leaves the
  // rounded v + 128 exactly: two vector adds where round() took a truncation through i64
  // and an fmod for the tie (scalar code on AVX2: 0.2-0.75 ms a site on gpt2_small, the
  // GEMM after it 0.9-3.6 ms). The clamp comes first (same result for integer bounds) and
  // keeps backends from contracting the product and the addition into an FMA.
  Tensor v = clamp(a * (127.0 / maximum(amax, scalar(1e-30, DType::F32))), Scalar(-127.0), Scalar(127.0));
  Tensor aq = to((v + scalar(12582912.0, DType::F32)) - scalar(12582784.0, DType::F32), DType::U8);
  aq = Tensor(prim::copy(aq.node()));  // materialized once: the int8 GEMM packs it
  // The weight is stored as [K, Cp]: an [N, K] weight transposed, and the channels padded
  // with zero columns to a multiple of 16 when one Mul dim walks them, the sum sliced back
  // to C before it is materialized. The int8 GEMM runs a ragged last column block several
  // times slower (GPT-2's 768 x 50257 head: 229 ms as is, 69 ms padded, 97 ms in f32).
  bool pad = dn >= 0 && s.mul->shape[dn] == SymInt(s.C) && s.C % 16 != 0;
  int64_t Cp = pad ? (s.C + 15) / 16 * 16 : s.C;
  ViewSpec wview = s.w.view, aview = pc->view;
  if (s.w_kaxis == 1 || pad) {
    HostTensor t(DType::I8, {s.K, Cp});
    const int8_t* src = qw.q.ptr<int8_t>();
    int8_t* dst = t.ptr<int8_t>();
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t k = 0; k < s.K; ++k) dst[k * Cp + c] = src[flat(s.w_kaxis, c, k, s.K, s.C)];
    q = from_host(t);
    for (size_t d = 0; d < wview.strides.size(); ++d)
      wview.strides[d] = (int)d == s.k ? SymInt(Cp) : wview.strides[d] == SymInt(0) ? SymInt(0) : SymInt(1);
    if (pad) wview.shape[dn] = aview.shape[dn] = SymInt(Cp);
  }
  // 128 · Σ_k w per (padded) channel (the activations' + 128), taken from the sum, read in the
  // sum's layout: stride 1 along the dims that walk the weight's channels ([K, Cp], contiguous)
  HostTensor corr(DType::I32, {Cp});
  for (int64_t c = 0; c < Cp; ++c) {
    int64_t t = 0;
    for (int64_t k = 0; c < s.C && k < s.K; ++k) t += qw.q.ptr<int8_t>()[flat(s.w_kaxis, c, k, s.K, s.C)];
    corr.ptr<int32_t>()[c] = static_cast<int32_t>(128 * t);
  }
  ViewSpec cv;
  cv.shape = out_shape(s);
  if (pad) cv.shape[dn] = SymInt(Cp);
  for (size_t d = 0; d < cv.shape.size(); ++d)
    cv.strides.push_back((int)d != s.k && wview.strides[d] != SymInt(0) ? SymInt(1) : SymInt(0));
  cv.offset = SymInt(0);
  NodeRef sum = int8_sum(prim::view(aq.node(), aview), prim::view(q.node(), wview), s.k, pairs);
  // sum − 128 · Σ_k w: the sums' zero point, as the inspector (quant_info) reads x − zp
  sum = prim::binary(Op::Add, sum, prim::unary(Op::Neg, prim::view(from_host(corr).node(), cv)));
  if (pad) {
    std::vector<std::pair<SymInt, SymInt>> keep;
    for (size_t d = 0; d < sum->shape.size(); ++d) keep.push_back({SymInt(0), (int)d == dn ? SymInt(s.C) : sum->shape[d]});
    sum = prim::view(sum, view_shrink(ViewSpec::contiguous(sum->shape), keep));
  }
  // no Copy of the i32 sum: the int8 GEMM (a matched contraction) writes it to a buffer of
  // its own, which the consumer reads (through the slice when padded); a Copy was a second
  // pass over it (gpt2_small: 49 copy kernels, the head's 25.7 MB)
  Tensor acc = to(Tensor(sum), DType::F32);
  ViewSpec sv;
  sv.shape = out_shape(s);
  for (size_t d = 0; d < sv.shape.size(); ++d)
    sv.strides.push_back((int)d == s.k ? SymInt(0) : floordiv(pc->view.strides[d], SymInt(s.K)));
  sv.offset = floordiv(pc->view.offset, SymInt(s.K));
  Tensor as(prim::view(ascale.node(), sv));
  res.notes.push_back(node_name(s.reduce) + " weight " + shape + (pairs ? " int8 (7-bit) " : " int8 ") + gran + ", activations int8 per row");
  return (acc * as * wscale).node();
}

}  // namespace

QuantizeResult quantize_graph(const Graph& g, const QuantizeOptions& opts) {
  if (opts.block <= 0) throw UserError("quantize: --block must be positive, got " + std::to_string(opts.block));
  QuantizeResult res;
  ProvenanceScope ps("quantize");
  res.graph = graph_map(g, [&](NodeRef n, const std::vector<NodeRef>& ins) -> NodeRef {
    if (n->op != Op::Reduce) return nullptr;
    // analyse the node as rebuilt on its new inputs (the Mul may hold replaced operands)
    NodeRef mul = ins[0];
    NodeRef r = ins[0] == n->inputs[0] ? n : make_node(n->op, n->dtype, n->shape, {mul}, n->attrs, n->prov);
    auto s = analyse(r);
    if (!s) {
      if (r->inputs[0]->op == Op::Mul)
        for (NodeRef x : r->inputs[0]->inputs) {
          auto c = fold_chain(x);
          if (c && is_weight(c->src) && r->dtype == DType::F32) ++res.skipped;
        }
      return r == n ? nullptr : r;
    }
    if (s->K * s->C < opts.min_elements) return r == n ? nullptr : r;
    std::optional<Chain> pc = opts.mode == QuantMode::Dynamic ? row_source(*s) : std::nullopt;
    ++res.quantized;
    return rebuild(*s, pc, opts, res);
  });
  return res;
}

std::vector<QuantError> quantization_error(const Graph& before, const Graph& after, uint64_t seed, Evaluator eval) {
  NumericChecker chk(before, seed, {}, std::move(eval), 3);
  TensorMap f = chk.run(before), q = chk.run(after);
  std::vector<QuantError> out;
  for (auto& [name, ref] : f) {
    auto it = q.find(name);
    if (it == q.end() || !is_float(ref.dtype()) || it->second.numel() != ref.numel()) continue;
    QuantError e;
    e.output = name;
    double mref = 0, md = 0, dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      double a = ref.get_f64(i), b = it->second.get_f64(i);
      mref = std::max(mref, std::fabs(a));
      md = std::max(md, std::fabs(a - b));
      dot += a * b, na += a * a, nb += b * b;
    }
    e.rel_max = mref > 0 ? md / mref : md;
    e.cosine = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
    out.push_back(e);
  }
  return out;
}

}  // namespace lathe
