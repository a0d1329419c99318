// eval_attention.cpp — the interpreter's fused attention (Extern "attention", core/ir/attention_op.h):
// the oracle the tiled kernels are checked against. It computes what the unfused graph
// computes, row by row: scores rounded to f32 as the matmul and scale produce them, then
// softmax and the product with V accumulated in double. A row with every score -inf is NaN.
// kernel_attention_bwd is the oracle of the fused backward (Extern "attention_bwd").
#include <cmath>
#include <limits>

#include "core/interp/kernels.h"
#include "core/ir/attention_op.h"
#include "core/ir/attr_bits.h"

namespace lathe::interp {

namespace {

// Row-major strides of `shape`, 0 where a dim is 1 and `want` (the broadcast shape) is not.
std::vector<int64_t> bcast_strides(const std::vector<int64_t>& shape, const std::vector<int64_t>& want) {
  std::vector<int64_t> st(shape.size(), 0);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    st[d] = (shape[d] == 1 && want[d] != 1) ? 0 : s;
    s *= shape[d];
  }
  return st;
}

// Q's batch dims (all but its last two) and where batch b reads K/V (the first of its
// matrices: broadcast or grouped heads share theirs) and the mask (its first element); m_st
// are the mask's strides over (batch…, L, S), 0 along broadcast dims.
struct Batches {
  std::vector<int64_t> dims, kv_shape, kv_st, m_st;
  int64_t count = 1;
  Batches(const HostTensor& q, const HostTensor& k, const HostTensor* mask, int64_t L, int64_t S)
      : dims(q.shape().begin(), q.shape().end() - 2), kv_shape(k.shape().begin(), k.shape().end() - 2) {
    for (int64_t d : dims) count *= d;
    kv_st = bcast_strides(kv_shape, dims);
    std::vector<int64_t> sc_shape = dims;
    sc_shape.push_back(L);
    sc_shape.push_back(S);
    if (mask) m_st = bcast_strides(mask->shape(), sc_shape);
  }
  void at(int64_t b, int64_t& kvb, int64_t& mb) const {
    kvb = 0, mb = 0;
    int64_t rem = b;
    for (size_t d = dims.size(); d-- > 0;) {
      int64_t i = rem % dims[d];
      rem /= dims[d];
      kvb += i / (kv_shape[d] > 1 ? dims[d] / kv_shape[d] : 1) * kv_st[d];  // grouped heads share K/V
      if (!m_st.empty()) mb += i * m_st[d];
    }
  }
};

// One score as the unfused graph computes it: q·k summed in double and rounded to f32, times
// the scale, plus the mask's element m (when there is a mask); -inf where causal hides it.
float score(const float* q, const float* k, int64_t E, float scale, const float* m, bool hidden) {
  double dot = 0;
  for (int64_t e = 0; e < E; ++e) dot += static_cast<double>(q[e]) * k[e];
  float x = static_cast<float>(dot) * scale;
  if (m) x += *m;
  return hidden ? -std::numeric_limits<float>::infinity() : x;
}

}  // namespace

HostTensor kernel_attention(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints) {
  if ((in.size() != 3 && in.size() != 4) || ints.size() < 2 || ints.size() > 3)
    throw UserError("Extern attention: expected (Q, K, V [, mask]) and ints {causal, scale [, stats]}");
  const bool stats = ints.size() == 3 && ints[2] != 0;
  const HostTensor &q = in[0], &k = in[1], &v = in[2];
  const HostTensor* mask = in.size() == 4 ? &in[3] : nullptr;
  bool causal = ints[0] != 0;
  float scale = f32_of_attr_bits(ints[1]);
  size_t r = q.rank();
  int64_t L = q.shape()[r - 2], E = q.shape()[r - 1], S = k.shape()[r - 2], Ev = v.shape()[r - 1];
  std::vector<int64_t> oshape = q.shape();
  oshape[r - 1] = stats ? Ev + 1 : Ev;
  const int64_t ow = oshape[r - 1];  // the output row's width
  HostTensor out(DType::F32, oshape);
  const Batches bs(q, k, mask, L, S);
  const std::vector<int64_t>& m_st = bs.m_st;
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>();
  const float* M = mask ? mask->ptr<float>() : nullptr;
  float* O = out.ptr<float>();
  std::vector<float> s(static_cast<size_t>(S));
  std::vector<double> acc(static_cast<size_t>(Ev));
  for (int64_t b = 0; b < bs.count; ++b) {
    int64_t kvb, mb;
    bs.at(b, kvb, mb);
    const float* Kb = K + kvb * S * E;
    const float* Vb = V + kvb * S * Ev;
    for (int64_t i = 0; i < L; ++i) {
      const float* qi = Q + (b * L + i) * E;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < S; ++j) {
        float x = score(qi, Kb + j * E, E, scale, M ? M + mb + i * m_st[r - 2] + j * m_st[r - 1] : nullptr, causal && j > i);
        s[j] = x;
        if (std::isnan(x) || x > mx) mx = x;
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < S; ++j) {
        double p = std::exp(static_cast<double>(s[j]) - mx);
        sum += p;
        for (int64_t c = 0; c < Ev; ++c) acc[c] += p * Vb[j * Ev + c];
      }
      float* oi = O + (b * L + i) * ow;
      for (int64_t c = 0; c < Ev; ++c) oi[c] = static_cast<float>(acc[c] / sum);
      if (stats) oi[Ev] = static_cast<float>((static_cast<double>(mx) + std::log(sum)) * 1.4426950408889634);
    }
  }
  return out;
}

HostTensor kernel_attention_bwd(const std::vector<HostTensor>& in, const std::vector<int64_t>& ints) {
  if ((in.size() != 5 && in.size() != 6) || ints.size() != 3 || ints[2] < 0 || ints[2] > 2)
    throw UserError("Extern attention_bwd: expected (Q, K, V [, mask], OS, dO) and ints {causal, scale, part}");
  const HostTensor &q = in[0], &k = in[1], &v = in[2], &os = in[in.size() - 2], &dout = in.back();
  const HostTensor* mask = in.size() == 6 ? &in[3] : nullptr;
  const bool causal = ints[0] != 0;
  const float scale = f32_of_attr_bits(ints[1]);
  const int part = static_cast<int>(ints[2]);
  const double log2e = 1.4426950408889634;
  size_t r = q.rank();
  int64_t L = q.shape()[r - 2], E = q.shape()[r - 1], S = k.shape()[r - 2], Ev = v.shape()[r - 1];
  const Batches bs(q, k, mask, L, S);
  const std::vector<int64_t>& m_st = bs.m_st;
  std::vector<int64_t> oshape = bs.dims;
  if (part == 0) oshape.insert(oshape.end(), {L, E});
  if (part == 1) oshape.insert(oshape.end(), {S, E + Ev});
  if (part == 2) oshape.insert(oshape.end(), {L, S});
  HostTensor out(DType::F32, oshape);
  const float *Q = q.ptr<float>(), *K = k.ptr<float>(), *V = v.ptr<float>(), *OS = os.ptr<float>(), *dO = dout.ptr<float>();
  const float* M = mask ? mask->ptr<float>() : nullptr;
  float* R = out.ptr<float>();
  std::vector<double> ds(static_cast<size_t>(S)), p(static_cast<size_t>(S)), acc;
  for (int64_t b = 0; b < bs.count; ++b) {
    int64_t kvb, mb;
    bs.at(b, kvb, mb);
    const float* Kb = K + kvb * S * E;
    const float* Vb = V + kvb * S * Ev;
    if (part == 1) acc.assign(static_cast<size_t>(S * (E + Ev)), 0.0);
    for (int64_t i = 0; i < L; ++i) {
      const float* qi = Q + (b * L + i) * E;
      const float* oi = OS + (b * L + i) * (Ev + 1);
      const float* gi = dO + (b * L + i) * Ev;
      double lse2 = oi[Ev], D = 0;
      for (int64_t c = 0; c < Ev; ++c) D += static_cast<double>(gi[c]) * oi[c];
      for (int64_t j = 0; j < S; ++j) {
        float x = score(qi, Kb + j * E, E, scale, M ? M + mb + i * m_st[r - 2] + j * m_st[r - 1] : nullptr, causal && j > i);
        p[j] = std::exp2(static_cast<double>(x) * log2e - lse2);
        double dp = 0;
        for (int64_t c = 0; c < Ev; ++c) dp += static_cast<double>(gi[c]) * Vb[j * Ev + c];
        ds[j] = p[j] == 0 ? 0.0 : p[j] * (dp - D);
      }
      if (part == 0) {
        for (int64_t e = 0; e < E; ++e) {
          double a = 0;
          for (int64_t j = 0; j < S; ++j) a += ds[j] * Kb[j * E + e];
          R[(b * L + i) * E + e] = static_cast<float>(a * scale);
        }
      } else if (part == 2) {
        for (int64_t j = 0; j < S; ++j) R[(b * L + i) * S + j] = static_cast<float>(ds[j]);
      } else {
        for (int64_t j = 0; j < S; ++j) {
          double* aj = acc.data() + j * (E + Ev);
          for (int64_t e = 0; e < E; ++e) aj[e] += ds[j] * qi[e] * scale;
          for (int64_t c = 0; c < Ev; ++c) aj[E + c] += p[j] * gi[c];
        }
      }
    }
    if (part == 1)
      for (int64_t x = 0; x < S * (E + Ev); ++x) R[b * S * (E + Ev) + x] = static_cast<float>(acc[x]);
  }
  return out;
}

}  // namespace lathe::interp
