// nn_test.cpp — matmul, linear, conv, pooling, softmax, norms, attention and losses run
// through the interpreter and compared with direct nested-loop references written here.
#include <cmath>

#include "core/frontend/nn.h"
#include "core/ir/diag.h"
#include "tests/frontend/test_util.h"

namespace lathe {
namespace {

using namespace lathe::testing;

std::vector<double> ref_matmul(const std::vector<double>& a, const std::vector<double>& b, int M, int K, int N) {
  std::vector<double> c(M * N, 0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) c[i * N + j] += a[i * K + k] * b[k * N + j];
  return c;
}

TEST(Matmul, BatchedBroadcastAnd1D) {
  HostTensor a = randt({2, 3, 4}, 1), b = randt({4, 5}, 2), v = randt({4}, 3);
  Tensor A = input("a", {2, 3, 4}), B = input("b", {4, 5}), V = input("v", {4});
  auto r = run_all({matmul(A, B), matmul(V, B), matmul(A, V), matmul(V, V)}, {{"a", a}, {"b", b}, {"v", v}});
  auto av = values(a), bv = values(b), vv = values(v);
  std::vector<double> want;
  for (int bi = 0; bi < 2; ++bi) {
    auto c = ref_matmul(std::vector<double>(av.begin() + bi * 12, av.begin() + bi * 12 + 12), bv, 3, 4, 5);
    want.insert(want.end(), c.begin(), c.end());
  }
  EXPECT_EQ(dims(r[0]), (std::vector<int64_t>{2, 3, 5}));
  expect_close(r[0], want, 1e-5, 1e-5, "batched");
  expect_close(r[1], ref_matmul(vv, bv, 1, 4, 5), 1e-5, 1e-5, "vec x mat");
  EXPECT_EQ(dims(r[2]), (std::vector<int64_t>{2, 3}));
  expect_close(r[2], ref_matmul(av, vv, 6, 4, 1), 1e-5, 1e-5, "mat x vec");
  EXPECT_EQ(dims(r[3]), (std::vector<int64_t>{}));
  double d = 0;
  for (double x : vv) d += x * x;
  expect_close(r[3], {d}, 1e-5, 1e-5, "dot");
  EXPECT_EQ(matmul(A, B).node()->prov.path.rfind("matmul", 0), 0u);
  EXPECT_THROW(matmul(A, input("c", {3, 5})), UserError);
}

TEST(Matmul, LinearAndSymbolicBatch) {
  HostTensor x = randt({3, 4}, 4), w = randt({2, 4}, 5), bias = randt({2}, 6);
  Tensor X = input("x", {SymInt::var("B"), 4}), W = input("w", {2, 4}), Bi = input("bias", {2});
  HostTensor r = run1(linear(X, W, Bi), {{"x", x}, {"w", w}, {"bias", bias}});
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 2; ++o) {
      double s = bias.get_f64(o);
      for (int k = 0; k < 4; ++k) s += x.get_f64(i * 4 + k) * w.get_f64(o * 4 + k);
      want.push_back(s);
    }
  expect_close(r, want, 1e-5, 1e-5);
}

struct ConvCase { int N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw, G; };

std::vector<double> ref_conv(const ConvCase& c, const HostTensor& x, const HostTensor& w, const HostTensor& b, int& OH,
                             int& OW) {
  OH = (c.H + 2 * c.ph - c.dh * (c.R - 1) - 1) / c.sh + 1;
  OW = (c.W + 2 * c.pw - c.dw * (c.S - 1) - 1) / c.sw + 1;
  int Cg = c.C / c.G, Kg = c.K / c.G;
  std::vector<double> out;
  for (int n = 0; n < c.N; ++n)
    for (int k = 0; k < c.K; ++k)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          double s = b.get_f64(k);
          int g = k / Kg;
          for (int ci = 0; ci < Cg; ++ci)
            for (int r = 0; r < c.R; ++r)
              for (int q = 0; q < c.S; ++q) {
                int ih = oh * c.sh - c.ph + r * c.dh, iw = ow * c.sw - c.pw + q * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                int cc = g * Cg + ci;
                s += x.get_f64(((n * c.C + cc) * c.H + ih) * c.W + iw) * w.get_f64(((k * Cg + ci) * c.R + r) * c.S + q);
              }
          out.push_back(s);
        }
  return out;
}

TEST(Conv, Conv2dMatchesLoopsAcrossOptions) {
  std::vector<ConvCase> cases{
      {2, 3, 5, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},  // plain
      {1, 2, 7, 7, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // stride + padding
      {1, 2, 7, 8, 3, 3, 2, 1, 2, 2, 1, 2, 3, 1},  // dilation, asymmetric
      {2, 4, 5, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // groups
      {1, 4, 4, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 4},  // depthwise 1x1
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const ConvCase& c = cases[i];
    HostTensor x = randt({c.N, c.C, c.H, c.W}, 10 + i), w = randt({c.K, c.C / c.G, c.R, c.S}, 20 + i), b = randt({c.K}, 30 + i);
    Conv2dOptions o;
    o.stride = {c.sh, c.sw};
    o.padding = {c.ph, c.pw};
    o.dilation = {c.dh, c.dw};
    o.groups = c.G;
    Tensor y = conv2d(input("x", shape_from(x.shape())), input("w", shape_from(w.shape())), input("b", {c.K}), o);
    int OH, OW;
    auto want = ref_conv(c, x, w, b, OH, OW);
    HostTensor r = run1(y, {{"x", x}, {"w", w}, {"b", b}});
    EXPECT_EQ(dims(r), (std::vector<int64_t>{c.N, c.K, OH, OW})) << "case " << i;
    expect_close(r, want, 1e-5, 1e-5, "conv case " + std::to_string(i));
  }
  EXPECT_THROW(conv2d(input("x", {1, 3, 5, 5}), input("w", {4, 2, 3, 3})), UserError);
}

TEST(Conv, Conv1d) {
  HostTensor x = randt({1, 2, 9}, 40), w = randt({3, 2, 3}, 41), b = randt({3}, 42);
  Tensor y = conv1d(input("x", {1, 2, 9}), input("w", {3, 2, 3}), input("b", {3}), 2, 1);
  ConvCase c{1, 2, 1, 9, 3, 1, 3, 1, 2, 0, 1, 1, 1, 1};
  int OH, OW;
  auto want = ref_conv(c, x, w.reshaped({3, 2, 1, 3}), b, OH, OW);
  expect_close(run1(y, {{"x", x}, {"w", w}, {"b", b}}), want, 1e-5, 1e-5);
}

TEST(Pool, MaxAvgAdaptiveGlobal) {
  HostTensor x = randt({1, 2, 5, 5}, 50);
  Tensor X = input("x", {1, 2, 5, 5});
  Pool2dOptions mp;
  mp.kernel = {3, 3};
  mp.stride = {2, 2};
  mp.padding = {1, 1};
  Pool2dOptions ap = mp;
  Pool2dOptions ap_excl = mp;
  ap_excl.count_include_pad = false;
  auto r = run_all({max_pool2d(X, mp), avg_pool2d(X, ap), avg_pool2d(X, ap_excl), adaptive_avg_pool2d(X, 2, 3),
                    global_avg_pool2d(X)},
                   {{"x", x}});
  std::vector<double> wmax, wavg, wexcl;
  for (int c = 0; c < 2; ++c)
    for (int oh = 0; oh < 3; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        double m = -INFINITY, s = 0;
        int cnt = 0;
        for (int r = 0; r < 3; ++r)
          for (int q = 0; q < 3; ++q) {
            int ih = oh * 2 - 1 + r, iw = ow * 2 - 1 + q;
            if (ih < 0 || ih >= 5 || iw < 0 || iw >= 5) continue;
            double v = x.get_f64((c * 5 + ih) * 5 + iw);
            m = std::max(m, v);
            s += v;
            ++cnt;
          }
        wmax.push_back(m);
        wavg.push_back(s / 9);
        wexcl.push_back(s / cnt);
      }
  expect_close(r[0], wmax, 1e-6, 1e-6, "max_pool2d");
  expect_close(r[1], wavg, 1e-5, 1e-6, "avg_pool2d");
  expect_close(r[2], wexcl, 1e-5, 1e-6, "avg_pool2d exclude pad");
  std::vector<double> wad, wg;
  for (int c = 0; c < 2; ++c) {
    double all = 0;
    for (int i = 0; i < 25; ++i) all += x.get_f64(c * 25 + i);
    wg.push_back(all / 25);
    for (int oh = 0; oh < 2; ++oh)
      for (int ow = 0; ow < 3; ++ow) {
        int h0 = oh * 5 / 2, h1 = ((oh + 1) * 5 + 1) / 2, w0 = ow * 5 / 3, w1 = ((ow + 1) * 5 + 2) / 3;
        double s = 0;
        for (int h = h0; h < h1; ++h)
          for (int w = w0; w < w1; ++w) s += x.get_f64((c * 5 + h) * 5 + w);
        wad.push_back(s / ((h1 - h0) * (w1 - w0)));
      }
  }
  expect_close(r[3], wad, 1e-5, 1e-6, "adaptive_avg_pool2d");
  expect_close(r[4], wg, 1e-5, 1e-6, "global_avg_pool2d");
}

TEST(Norm, SoftmaxLogSoftmaxLayerRmsBatchGroup) {
  HostTensor x = randt({3, 4}, 60), g = randt({4}, 61), b = randt({4}, 62);
  Tensor X = input("x", {3, 4}), G = input("g", {4}), B = input("b", {4});
  Tensor x4 = reshape(X, {1, 4, 3, 1});  // [N, C, H, W] view for the channel norms
  auto r = run_all({softmax(X, -1), log_softmax(X, 1), layer_norm(X, 1, G, B, 1e-5), rms_norm(X, 1, G, 1e-6),
                    batch_norm(x4, G * 0.1, G * G + 1.0, B, std::nullopt, 1e-5), group_norm(x4, 2, G, B, 1e-5)},
                   {{"x", x}, {"g", g}, {"b", b}});
  std::vector<double> sm, lsm, ln, rms;
  for (int i = 0; i < 3; ++i) {
    double m = -INFINITY, s = 0, mu = 0, var = 0, sq = 0;
    for (int j = 0; j < 4; ++j) m = std::max(m, x.get_f64(i * 4 + j));
    for (int j = 0; j < 4; ++j) s += std::exp(x.get_f64(i * 4 + j) - m);
    for (int j = 0; j < 4; ++j) mu += x.get_f64(i * 4 + j) / 4, sq += x.get_f64(i * 4 + j) * x.get_f64(i * 4 + j) / 4;
    for (int j = 0; j < 4; ++j) var += std::pow(x.get_f64(i * 4 + j) - mu, 2) / 4;
    for (int j = 0; j < 4; ++j) {
      double v = x.get_f64(i * 4 + j);
      sm.push_back(std::exp(v - m) / s);
      lsm.push_back(v - m - std::log(s));
      ln.push_back((v - mu) / std::sqrt(var + 1e-5) * g.get_f64(j) + b.get_f64(j));
      rms.push_back(v / std::sqrt(sq + 1e-6) * g.get_f64(j));
    }
  }
  expect_close(r[0], sm, 1e-5, 1e-6, "softmax");
  expect_close(r[1], lsm, 1e-5, 1e-5, "log_softmax");
  expect_close(r[2], ln, 1e-4, 1e-5, "layer_norm");
  expect_close(r[3], rms, 1e-5, 1e-5, "rms_norm");
  // x4[0, c, h, 0] = x[c, h]: channel c is row c of x... with C = 4 and H = 3 it is x's flat
  // elements 3c .. 3c+2.
  std::vector<double> bn, gn;
  for (int c = 0; c < 4; ++c)
    for (int h = 0; h < 3; ++h) {
      double gc = g.get_f64(c);
      bn.push_back((x.get_f64(c * 3 + h) - 0.1 * gc) / std::sqrt(gc * gc + 1 + 1e-5) * b.get_f64(c));
    }
  for (int grp = 0; grp < 2; ++grp) {
    double mu = 0, var = 0;
    for (int i = 0; i < 6; ++i) mu += x.get_f64(grp * 6 + i) / 6;
    for (int i = 0; i < 6; ++i) var += std::pow(x.get_f64(grp * 6 + i) - mu, 2) / 6;
    for (int i = 0; i < 6; ++i) {
      int c = grp * 2 + i / 3;
      gn.push_back((x.get_f64(grp * 6 + i) - mu) / std::sqrt(var + 1e-5) * g.get_f64(c) + b.get_f64(c));
    }
  }
  expect_close(r[4], bn, 1e-4, 1e-5, "batch_norm");
  expect_close(r[5], gn, 1e-4, 1e-5, "group_norm");
  EXPECT_THROW(layer_norm(X, 1, input("bad", {3}), std::nullopt), UserError);
}

TEST(Attention, MatchesLoopReferenceWithCausalMask) {
  const int H = 2, L = 3, S = 3, E = 4;
  HostTensor q = randt({H, L, E}, 70), k = randt({H, S, E}, 71), v = randt({H, S, E}, 72);
  Tensor Q = input("q", {H, L, E}), K = input("k", {H, S, E}), Vt = input("v", {H, S, E});
  auto r = run_all({scaled_dot_product_attention(Q, K, Vt), scaled_dot_product_attention(Q, K, Vt, std::nullopt, true)},
                   {{"q", q}, {"k", k}, {"v", v}});
  for (int causal = 0; causal < 2; ++causal) {
    std::vector<double> want;
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < L; ++i) {
        std::vector<double> p(S);
        double m = -INFINITY, s = 0;
        for (int j = 0; j < S; ++j) {
          double d = 0;
          for (int e = 0; e < E; ++e) d += q.get_f64((h * L + i) * E + e) * k.get_f64((h * S + j) * E + e);
          p[j] = (causal && j > i) ? -INFINITY : d / std::sqrt(double(E));
          m = std::max(m, p[j]);
        }
        for (int j = 0; j < S; ++j) s += p[j] = std::exp(p[j] - m);
        for (int e = 0; e < E; ++e) {
          double o = 0;
          for (int j = 0; j < S; ++j) o += p[j] / s * v.get_f64((h * S + j) * E + e);
          want.push_back(o);
        }
      }
    expect_close(r[causal], want, 1e-5, 1e-5, causal ? "causal attention" : "attention");
  }
}

TEST(Loss, CrossEntropyMseAndProvenance) {
  HostTensor lg = host_f32({2, 3}, {1, 2, 3, 0, 0, 0});
  Tensor logits = input("logits", {2, 3});
  Tensor target = from_host(host(DType::I64, {2}, {2, 0}));
  auto r = run_all({cross_entropy(logits, target), mse_loss(logits, zeros({2, 3}))}, {{"logits", lg}});
  double l0 = -(3 - std::log(std::exp(1) + std::exp(2) + std::exp(3))), l1 = std::log(3.0);
  expect_close(r[0], {(l0 + l1) / 2});
  expect_close(r[1], {14.0 / 6});
}

TEST(Random, DeterministicWithReasonableMoments) {
  Tensor u = rand({20000}, 7), n = randn({20000}, 7), u2 = rand({20000}, 8);
  auto r = run_all({u, n, u2, rand({20000}, 7)});
  EXPECT_EQ(values(r[0]), values(r[3]));  // same seed, same numbers
  EXPECT_NE(values(r[0]), values(r[2]));
  double mu = 0, m2 = 0, nmu = 0, nm2 = 0, lo = 1, hi = 0;
  for (double v : values(r[0])) mu += v / 20000, m2 += v * v / 20000, lo = std::min(lo, v), hi = std::max(hi, v);
  for (double v : values(r[1])) nmu += v / 20000, nm2 += v * v / 20000;
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(mu, 0.5, 0.01);
  EXPECT_NEAR(m2 - mu * mu, 1.0 / 12, 0.005);
  EXPECT_NEAR(nmu, 0.0, 0.03);
  EXPECT_NEAR(nm2 - nmu * nmu, 1.0, 0.04);
}

}  // namespace
}  // namespace lathe
