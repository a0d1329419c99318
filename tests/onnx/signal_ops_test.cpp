// signal_ops_test.cpp — DFT, STFT, MelWeightMatrix and TfIdfVectorizer on models built
// here, on the interpreter, against host references written from the ONNX definitions
// (a direct O(N²) DFT; TfIdfVectorizer's n-gram walk as the reference implementation does
// it) on shapes the node tests do not have: prime and odd lengths, complex signals, batch 1
// and 64, every axis, zero-padding and truncating dft_length, skips
// with n-grams of three lengths, duplicates, IDF / TFIDF weights. Then hostile models
// (an axis out of range, dft_length 0 or 2^40, n-gram sizes or pool offsets out of range)
// that must be errors naming the node. LATHE_WRITE_ONNX_SEEDS=DIR writes those models to
// DIR (they are the fuzzer's seeds in tests/onnx/fuzz/seeds and `lathe run` CLI tests).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "core/import/onnx_import.h"
#include "core/interp/interp.h"
#include "tests/onnx/onnx_builder.h"

namespace lathe {
namespace {

using Builder = test::OnnxBuilder;
using test::attr_f;
using test::attr_i;
using test::attr_s;
using test::randt;

constexpr double kPi = 3.14159265358979323846;

void ints_attr(onnx::NodeProto* n, const std::string& k, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void floats_attr(onnx::NodeProto* n, const std::string& k, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
HostTensor scalar_i64(int64_t v) {
  HostTensor t(DType::I64, {});
  t.set_i64(0, v);
  return t;
}

std::string load_error(Builder& m) {
  try {
    m.load();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// ---- DFT ----

// y = DFT of x (row-major, shape s, last dim 1 or 2) along axis a, length n, as ONNX defines it.
HostTensor dft_ref(const HostTensor& x, int a, int64_t n, bool inverse, bool onesided) {
  std::vector<int64_t> s = x.shape(), o = s;
  int r = static_cast<int>(s.size());
  int64_t K = onesided ? n / 2 + 1 : n, L = s[a], cc = s[r - 1];
  o[a] = K;
  o[r - 1] = 2;
  HostTensor y(x.dtype(), o);
  std::vector<int64_t> xs(r, 1), ys(r, 1);
  for (int d = r - 2; d >= 0; --d) { xs[d] = xs[d + 1] * s[d + 1]; ys[d] = ys[d + 1] * o[d + 1]; }
  for (int64_t e = 0; e < y.numel() / 2; ++e) {
    int64_t rem = e * 2, xbase = 0, k = 0;
    for (int d = 0; d < r - 1; ++d) {
      int64_t i = rem / ys[d];
      rem %= ys[d];
      if (d == a) k = i; else xbase += i * xs[d];
    }
    double re = 0, im = 0;
    for (int64_t t = 0; t < std::min(n, L); ++t) {
      double xr = x.get_f64(xbase + t * xs[a]), xi = cc == 2 ? x.get_f64(xbase + t * xs[a] + 1) : 0.0;
      double th = (inverse ? 2 : -2) * kPi * static_cast<double>(k * t % n) / static_cast<double>(n);
      re += xr * std::cos(th) - xi * std::sin(th);
      im += xr * std::sin(th) + xi * std::cos(th);
    }
    if (inverse) { re /= static_cast<double>(n); im /= static_cast<double>(n); }
    y.set_f64(e * 2, re);
    y.set_f64(e * 2 + 1, im);
  }
  return y;
}

void expect_close(const HostTensor& got, const HostTensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double worst = 0, scale = 1e-6;
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::fabs(got.get_f64(i) - want.get_f64(i)));
    scale = std::max(scale, std::fabs(want.get_f64(i)));
  }
  EXPECT_LE(worst, tol * scale) << what << ": max|d| " << worst << ", max|ref| " << scale;
}

struct DftCase {
  std::vector<int64_t> shape;
  int64_t axis;
  int64_t length;  // 0: none
  bool inverse, onesided;
};

TEST(OnnxSignal, DftMatchesTheDefinition) {
  std::mt19937 rng(7);
  std::vector<DftCase> cases = {
      {{1, 7, 1}, 1, 0, false, false},        // prime length, real, batch 1
      {{64, 13, 2}, 1, 0, true, false},       // complex inverse, batch 64
      {{3, 5, 11, 1}, 2, 16, false, true},    // onesided, zero-padded to 16
      {{2, 10, 3, 2}, -3, 6, false, false},   // truncated to 6, a negative axis
      {{1, 9, 1}, 1, 0, true, true},          // onesided inverse of a real signal
      {{2, 4, 5, 2}, 0, 3, false, false},     // the batch axis itself
      {{1, 1, 1}, 1, 0, false, false},        // length 1
  };
  for (const DftCase& k : cases) {
    Builder m(17);
    m.input("x", k.shape);
    std::vector<std::string> ins = {"x"};
    if (k.length) { m.init("n", scalar_i64(k.length)); ins.push_back("n"); }
    auto* n = m.node("DFT", ins, {"y"});
    attr_i(n, "axis", k.axis);
    if (k.inverse) attr_i(n, "inverse", 1);
    if (k.onesided) attr_i(n, "onesided", 1);
    HostTensor x = randt(k.shape, rng);
    HostTensor y = interpret(m.load(), {{"x", x}}).at("y");
    int r = static_cast<int>(k.shape.size());
    int a = static_cast<int>(k.axis < 0 ? k.axis + r : k.axis);
    int64_t len = k.length ? k.length : k.shape[a];
    expect_close(y, dft_ref(x, a, len, k.inverse, k.onesided), 1e-5,
                 "DFT of " + std::to_string(k.shape[a]) + " along " + std::to_string(a));
  }
}

TEST(OnnxSignal, DftThenInverseIsTheIdentity) {
  std::mt19937 rng(3);
  Builder m(17);
  m.input("x", {5, 31, 2});
  attr_i(m.node("DFT", {"x"}, {"f"}), "axis", 1);
  m.g()->mutable_output()->Clear();
  auto* inv = m.node("DFT", {"f"}, {"y"});
  attr_i(inv, "axis", 1);
  attr_i(inv, "inverse", 1);
  HostTensor x = randt({5, 31, 2}, rng);
  expect_close(interpret(m.load(), {{"x", x}}).at("y"), x, 1e-5, "inverse(DFT(x))");
}

// ---- STFT ----

TEST(OnnxSignal, StftMatchesFramesOfTheDefinition) {
  std::mt19937 rng(11);
  struct Case { std::vector<int64_t> shape; int64_t step, flen; bool window, onesided; };
  for (const Case& k : std::vector<Case>{{{2, 37, 1}, 5, 8, true, true},     // step not dividing the length
                                         {{1, 23, 2}, 3, 7, false, false},   // complex, frame_length input
                                         {{64, 16, 1}, 16, 16, true, true},  // one frame, batch 64
                                         {{3, 29, 1}, 2, 5, true, false}}) { // two-sided, odd frame
    Builder m(17);
    m.input("s", k.shape);
    m.init("step", scalar_i64(k.step));
    std::vector<std::string> ins = {"s", "step"};
    HostTensor w = randt({k.flen}, rng);
    if (k.window) { m.input("w", {k.flen}); ins.push_back("w"); } else { ins.push_back(""); }
    if (!k.window) { m.init("len", scalar_i64(k.flen)); ins.push_back("len"); }
    auto* n = m.node("STFT", ins, {"y"});
    if (!k.onesided) attr_i(n, "onesided", 0);
    HostTensor s = randt(k.shape, rng);
    TensorMap in{{"s", s}};
    if (k.window) in["w"] = w;
    HostTensor y = interpret(m.load(), in).at("y");
    // reference: frame f of batch b, windowed, DFT'd on its own
    int64_t B = k.shape[0], L = k.shape[1], cc = k.shape[2], F = (L - k.flen) / k.step + 1;
    HostTensor frames(DType::F32, {B, F, k.flen, cc});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t j = 0; j < k.flen; ++j)
          for (int64_t q = 0; q < cc; ++q)
            frames.set_f64(((b * F + f) * k.flen + j) * cc + q,
                           s.get_f64((b * L + f * k.step + j) * cc + q) * (k.window ? w.get_f64(j) : 1.0));
    expect_close(y, dft_ref(frames, 2, k.flen, false, k.onesided), 1e-5, "STFT step " + std::to_string(k.step));
  }
}

// ---- MelWeightMatrix ----

TEST(OnnxSignal, MelWeightMatrixIsTriangularFilters) {
  Builder m(17);
  m.init("mels", scalar_i64(10));
  m.init("dft", scalar_i64(64));
  m.init("rate", scalar_i64(16000));
  HostTensor lo(DType::F32, {}), hi(DType::F32, {});
  lo.set_f64(0, 100);
  hi.set_f64(0, 7000);
  m.init("lo", lo);
  m.init("hi", hi);
  m.node("MelWeightMatrix", {"mels", "dft", "rate", "lo", "hi"}, {"y"});
  HostTensor y = interpret(m.load(), {}).at("y");
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{33, 10}));
  for (int64_t i = 0; i < 10; ++i) {
    // each filter rises to 1 and falls: values in [0, 1], one 1, nonzeros contiguous
    int ones = 0, runs = 0;
    bool in_run = false;
    for (int64_t j = 0; j < 33; ++j) {
      double v = y.get_f64(j * 10 + i);
      EXPECT_GE(v, 0);
      EXPECT_LE(v, 1);
      ones += v == 1.0;
      if (v > 0 && !in_run) ++runs;
      in_run = v > 0;
    }
    EXPECT_EQ(ones, 1) << "filter " << i;
    EXPECT_EQ(runs, 1) << "filter " << i;
  }
}

// ---- TfIdfVectorizer ----

struct TfIdf {
  int64_t min_n, max_n, skip;
  std::string mode;
  std::vector<int64_t> counts, indexes, pool;
  std::vector<float> weights;
};

// As the reference: a trie of the pool's n-grams of lengths [min_n, max_n] (a repeated
// n-gram keeps its last id), walked from every start for every skip distance; unigrams
// are counted on the first distance only.
HostTensor tfidf_ref(const TfIdf& t, const HostTensor& x) {
  int64_t out = 0;
  for (int64_t i : t.indexes) out = std::max(out, i + 1);
  std::map<std::vector<int64_t>, int64_t> id;  // n-gram -> id (0-based)
  std::set<std::vector<int64_t>> prefixes;
  int64_t next = 0, P = static_cast<int64_t>(t.pool.size());
  for (size_t lv = 0; lv < t.counts.size(); ++lv) {
    int64_t n = static_cast<int64_t>(lv) + 1, s = t.counts[lv], e = lv + 1 < t.counts.size() ? t.counts[lv + 1] : P;
    for (int64_t g = s; g < e; g += n, ++next) {
      if (n < t.min_n || n > t.max_n) continue;
      std::vector<int64_t> gram(t.pool.begin() + g, t.pool.begin() + g + n);
      id[gram] = next;
      for (int64_t k = 1; k <= n; ++k) prefixes.insert(std::vector<int64_t>(gram.begin(), gram.begin() + k));
    }
  }
  bool batched = x.rank() == 2;
  int64_t B = batched ? x.shape()[0] : 1, C = x.shape().back();
  HostTensor y(DType::F32, batched ? std::vector<int64_t>{B, out} : std::vector<int64_t>{out});
  std::vector<double> f(static_cast<size_t>(B * out), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    int64_t start_n = t.min_n;
    for (int64_t d = 1; d <= t.skip + 1; ++d) {
      for (int64_t i = 0; i < C; ++i) {
        if (i + d * (start_n - 1) >= C) break;
        std::vector<int64_t> key;
        for (int64_t n = 1; n <= t.max_n && i + (n - 1) * d < C; ++n) {
          key.push_back(x.get_i64(b * C + i + (n - 1) * d));
          if (!prefixes.count(key)) break;
          auto it = id.find(key);
          if (n >= start_n && it != id.end()) f[b * out + t.indexes[it->second]] += 1;
        }
      }
      if (start_n == 1 && ++start_n > t.max_n) break;
    }
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < out; ++o) {
      double v = f[b * out + o], w = t.weights.empty() ? 1.0 : t.weights[o];
      y.set_f64(b * out + o, t.mode == "TF" ? v : t.mode == "IDF" ? (v > 0 ? w : 0.0) : v * w);
    }
  return y;
}

onnx::NodeProto* tfidf_node(Builder& m, const TfIdf& t) {
  auto* n = m.node("TfIdfVectorizer", {"x"}, {"y"});
  attr_i(n, "min_gram_length", t.min_n);
  attr_i(n, "max_gram_length", t.max_n);
  attr_i(n, "max_skip_count", t.skip);
  attr_s(n, "mode", t.mode);
  ints_attr(n, "ngram_counts", t.counts);
  ints_attr(n, "ngram_indexes", t.indexes);
  ints_attr(n, "pool_int64s", t.pool);
  if (!t.weights.empty()) floats_attr(n, "weights", t.weights);
  return n;
}

TEST(OnnxText, TfIdfVectorizerMatchesTheReferenceWalk) {
  std::mt19937 rng(5);
  // unigrams 1 2 3, bigrams (1 2) (2 3) (3 3) (1 2 again: its last id wins), trigrams (1 2 3) (2 1 2);
  // ids 0-2, 3-6, 7-8 into 6 slots, two ids sharing slot 4
  TfIdf base{1, 3, 2, "TF", {0, 3, 11}, {0, 1, 2, 3, 4, 5, 4, 2, 5}, {1, 2, 3, 1, 2, 2, 3, 3, 3, 1, 2, 1, 2, 3, 2, 1, 2}, {}};
  std::vector<TfIdf> cases;
  cases.push_back(base);
  TfIdf t = base; t.min_n = 2; cases.push_back(t);                     // bigrams and trigrams only
  t = base; t.max_n = 1; cases.push_back(t);                            // unigrams only
  t = base; t.skip = 100; cases.push_back(t);                           // every distance that fits
  t = base; t.skip = 0; t.mode = "IDF"; t.weights = {0.5f, 1, 2, 3, 4, 5}; cases.push_back(t);
  t = base; t.mode = "TFIDF"; t.weights = {0.5f, 1, 2, 3, 4, 5}; cases.push_back(t);
  t = base; t.mode = "IDF"; cases.push_back(t);                         // no weights: 0 / 1
  struct Shape { std::vector<int64_t> dims; int type; };
  for (const Shape& s : std::vector<Shape>{{{13}, onnx::TensorProto::INT64},
                                           {{64, 11}, onnx::TensorProto::INT32},
                                           {{1, 2}, onnx::TensorProto::INT64},
                                           {{3, 1}, onnx::TensorProto::INT32},
                                           {{2, 29}, onnx::TensorProto::INT64}})
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      Builder m(9);
      m.input("x", s.dims, s.type);
      tfidf_node(m, cases[ci]);
      HostTensor x(s.type == onnx::TensorProto::INT32 ? DType::I32 : DType::I64, s.dims);
      std::uniform_int_distribution<int> tok(0, 4);
      for (int64_t i = 0; i < x.numel(); ++i) x.set_i64(i, tok(rng));
      HostTensor y = interpret(m.load(), {{"x", x}}).at("y");
      HostTensor want = tfidf_ref(cases[ci], x);
      ASSERT_EQ(y.shape(), want.shape());
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_EQ(y.get_f64(i), want.get_f64(i)) << "case " << ci << " rows " << x.shape_string() << " element " << i;
    }
}

// ---- hostile models: errors naming the node ----

struct Hostile {
  std::string name;  // also the seed file's name
  std::function<void(Builder&)> build;
  std::string node, needle;
};

void dft_model(Builder& m, int64_t axis, std::optional<int64_t> length) {
  m.input("x", {2, 8, 1});
  std::vector<std::string> ins = {"x"};
  if (length) { m.init("n", scalar_i64(*length)); ins.push_back("n"); }
  attr_i(m.node("DFT", ins, {"y"}), "axis", axis);
}

void tfidf_model(Builder& m, TfIdf t) {
  m.input("x", {2, 6}, onnx::TensorProto::INT64);
  tfidf_node(m, t);
}

std::vector<Hostile> hostile_models() {
  TfIdf ok{2, 2, 0, "TF", {0, 4}, {0, 1, 2, 3, 4, 5, 6}, {2, 3, 5, 4, 5, 6, 7, 8, 6, 7}, {}};
  auto tf = [ok](std::function<void(TfIdf&)> f) {
    return [ok, f](Builder& m) { TfIdf t = ok; f(t); tfidf_model(m, t); };
  };
  return {
      {"dft_axis_last", [](Builder& m) { dft_model(m, 2, std::nullopt); }, "the_DFT", "axis 2 is out of range"},
      {"dft_axis_huge", [](Builder& m) { dft_model(m, 1 << 30, std::nullopt); }, "the_DFT", "out of range"},
      {"dft_length_zero", [](Builder& m) { dft_model(m, 1, 0); }, "the_DFT", "dft_length must be in"},
      {"dft_length_huge", [](Builder& m) { dft_model(m, 1, int64_t(1) << 40); }, "the_DFT", "dft_length must be in"},
      {"dft_basis_too_large", [](Builder& m) { dft_model(m, 1, int64_t(1) << 20); }, "the_DFT", "dense basis"},
      {"dft_length_negative", [](Builder& m) { dft_model(m, 1, -4); }, "the_DFT", "dft_length must be in"},
      {"stft_step_zero", [](Builder& m) {
         m.input("s", {1, 32, 1});
         m.init("step", scalar_i64(0));
         m.init("len", scalar_i64(8));
         m.node("STFT", {"s", "step", "", "len"}, {"y"});
       }, "the_STFT", "frame_step must be positive"},
      {"stft_frame_too_long", [](Builder& m) {
         m.input("s", {1, 32, 1});
         m.init("step", scalar_i64(4));
         m.init("len", scalar_i64(33));
         m.node("STFT", {"s", "step", "", "len"}, {"y"});
       }, "the_STFT", "frame_length must be in"},
      {"mel_upper_too_high", [](Builder& m) {
         m.init("mels", scalar_i64(8));
         m.init("dft", scalar_i64(16));
         m.init("rate", scalar_i64(8000));
         HostTensor lo(DType::F32, {}), hi(DType::F32, {});
         hi.set_f64(0, 9000);
         m.init("lo", lo);
         m.init("hi", hi);
         m.node("MelWeightMatrix", {"mels", "dft", "rate", "lo", "hi"}, {"y"});
       }, "the_MelWeightMatrix", "past the last DFT bin"},
      {"tfidf_min_over_max", tf([](TfIdf& t) { t.min_n = 3; }), "the_TfIdfVectorizer", "n-gram sizes"},
      {"tfidf_min_zero", tf([](TfIdf& t) { t.min_n = 0; }), "the_TfIdfVectorizer", "n-gram sizes"},
      {"tfidf_counts_past_pool", tf([](TfIdf& t) { t.counts = {0, 99}; }), "the_TfIdfVectorizer", "ngram_counts[1] = 99 is outside the pool [0, 10]"},
      {"tfidf_counts_descending", tf([](TfIdf& t) { t.counts = {4, 0}; }), "the_TfIdfVectorizer", "must be ascending"},
      {"tfidf_index_negative", tf([](TfIdf& t) { t.indexes[3] = -1; }), "the_TfIdfVectorizer", "ngram_indexes[3] = -1 is out of range"},
      {"tfidf_index_huge", tf([](TfIdf& t) { t.indexes[0] = int64_t(1) << 50; }), "the_TfIdfVectorizer", "out of range"},
      {"tfidf_too_few_indexes", tf([](TfIdf& t) { t.indexes = {0, 1}; }), "the_TfIdfVectorizer", "ngram_indexes has 2 entries"},
      {"tfidf_ragged_bigrams", tf([](TfIdf& t) { t.pool.pop_back(); }), "the_TfIdfVectorizer", "not a multiple of 2"},
      {"tfidf_short_weights", tf([](TfIdf& t) { t.mode = "TFIDF"; t.weights = {1, 2}; }), "the_TfIdfVectorizer", "weights has 2"},
  };
}

TEST(OnnxHostileOps, SignalAndTextOpsNameTheNode) {
  const char* dir = std::getenv("LATHE_WRITE_ONNX_SEEDS");
  for (const Hostile& h : hostile_models()) {
    Builder m(17);
    h.build(m);
    std::string e = load_error(m);
    EXPECT_NE(e.find(h.node), std::string::npos) << h.name << ": " << e;
    EXPECT_NE(e.find(h.needle), std::string::npos) << h.name << ": " << e;
    if (dir) {
      std::ofstream f(std::filesystem::path(dir) / (h.name + ".onnx"), std::ios::binary);
      f << m.m.SerializeAsString();
    }
  }
  // a huge max_skip_count is fine: the distances are bounded by the row
  Builder m(17);
  tfidf_model(m, TfIdf{2, 2, int64_t(1) << 40, "TF", {0, 4}, {0, 1, 2, 3, 4, 5, 6}, {2, 3, 5, 4, 5, 6, 7, 8, 6, 7}, {}});
  EXPECT_EQ(load_error(m), "");
}

}  // namespace
}  // namespace lathe
