// lower_text.cpp — ONNX TfIdfVectorizer over integer tokens.
//
// The n-gram pool is a constant (attributes), so the lowering is a few tensor ops per
// n-gram length n: for every skip distance d (1 … max_skip_count + 1; unigrams only d = 1,
// as ONNX Runtime and the reference count them once) and start position i, the tokens at
// i, i + d, …, i + (n-1)·d are gathered with one index_select into [rows, D, C, n]; they
// are compared with the pool's n-grams [G, n], all n positions must match and the window
// must fit in the row; the matches summed over (d, i) give each n-gram's count, and a 0/1
// matrix [G, outputs] (ngram_indexes) adds the counts into the output slots. TF gives the
// counts, IDF weights[slot] where the count is positive, TFIDF counts · weights[slot].
// As in the reference's trie, an n-gram listed twice counts only at its last entry, and
// the n-gram ids of lengths outside [min_gram_length, max_gram_length] are skipped.
// String tokens (pool_strings) are unsupported: Lathe has no string tensors.
#include <map>

#include "core/frontend/nn.h"
#include "core/import/onnx_lower.h"
#include "core/import/onnx_tensor.h"

namespace lathe::onnx_import {
namespace {

constexpr int64_t kMaxCompare = int64_t(1) << 26;  // elements of one n-gram comparison

void tfidf_op(NodeCtx& c) {
  c.only_outputs(1);
  Tensor x = c.in(0);
  if (c.has_attr("pool_strings"))
    c.unsupported("TfIdfVectorizer over strings (pool_strings): Lathe has no string tensors");
  if (!is_int(x.dtype())) c.fail("input must be int32 or int64 tokens, got " + x.describe());
  if (x.rank() > 2) c.fail("input must be [C] or [batch, C], got " + x.describe());
  std::string mode = c.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.fail("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  const int64_t min_n = c.attr_int("min_gram_length", 0), max_n = c.attr_int("max_gram_length", 0);
  const int64_t max_skip = c.attr_int("max_skip_count", 0);
  if (min_n < 1 || max_n < min_n)
    c.fail("the n-gram sizes must satisfy 1 <= min_gram_length <= max_gram_length, got " + std::to_string(min_n) + " and " +
           std::to_string(max_n));
  if (max_skip < 0) c.fail("max_skip_count must be >= 0, got " + std::to_string(max_skip));
  std::vector<int64_t> pool = c.attr_ints("pool_int64s"), counts = c.attr_ints("ngram_counts"),
                       indexes = c.attr_ints("ngram_indexes");
  std::vector<float> weights = c.attr_floats("weights");
  const int64_t P = static_cast<int64_t>(pool.size());
  if (counts.empty()) c.fail("ngram_counts is required");
  if (indexes.empty()) c.fail("ngram_indexes is required");
  if (static_cast<int64_t>(counts.size()) > c.max_elements()) c.fail("ngram_counts is too long");
  int64_t out_size = 0;
  for (size_t k = 0; k < indexes.size(); ++k) {
    if (indexes[k] < 0 || indexes[k] >= c.max_elements())
      c.fail("ngram_indexes[" + std::to_string(k) + "] = " + std::to_string(indexes[k]) + " is out of range");
    out_size = std::max(out_size, indexes[k] + 1);
  }
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < out_size)
    c.fail("weights has " + std::to_string(weights.size()) + " entries for " + std::to_string(out_size) + " outputs");

  // the pool's levels: n-grams of length n = level + 1 at pool[counts[level] … next)
  struct Level { int64_t n, first_id, start, grams; };
  std::vector<Level> levels;
  int64_t ids = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] < 0 || counts[k] > P)
      c.fail("ngram_counts[" + std::to_string(k) + "] = " + std::to_string(counts[k]) + " is outside the pool [0, " +
             std::to_string(P) + "]");
    if (k > 0 && counts[k] < counts[k - 1])
      c.fail("ngram_counts must be ascending, but ngram_counts[" + std::to_string(k) + "] = " + std::to_string(counts[k]) +
             " < " + std::to_string(counts[k - 1]));
  }
  for (size_t lv = 0; lv < counts.size(); ++lv) {
    int64_t start = counts[lv], end = lv + 1 < counts.size() ? counts[lv + 1] : P;
    int64_t n = static_cast<int64_t>(lv) + 1;
    if ((end - start) % n != 0)
      c.fail("the pool's " + std::to_string(n) + "-grams (" + std::to_string(end - start) + " items) are not a multiple of " +
             std::to_string(n));
    levels.push_back({n, ids, start, (end - start) / n});
    ids += (end - start) / n;
  }
  if (static_cast<int64_t>(indexes.size()) < ids)
    c.fail("ngram_indexes has " + std::to_string(indexes.size()) + " entries for the pool's " + std::to_string(ids) + " n-grams");

  // rows: [B, C] (a 1-D input is one row; a 0-D one is one token)
  const bool batched = x.rank() == 2;
  Tensor rows = batched ? x : reshape(x, {SymInt(1), x.rank() == 1 ? x.shape()[0] : SymInt(1)});
  if (!rows.shape()[1].is_const()) c.unsupported("TfIdfVectorizer over rows of symbolic length");
  const int64_t C = rows.shape()[1].value();
  const SymInt B = rows.shape()[0];
  rows = to(rows, DType::I64);
  Tensor freq = zeros({B, SymInt(out_size)}, DType::F32);
  for (const Level& lv : levels) {
    if (lv.n < min_n || lv.n > max_n || lv.grams == 0) continue;
    // an n-gram listed twice counts at its last entry only
    std::map<std::vector<int64_t>, int64_t> last;
    for (int64_t g = 0; g < lv.grams; ++g)
      last[std::vector<int64_t>(pool.begin() + lv.start + g * lv.n, pool.begin() + lv.start + (g + 1) * lv.n)] = g;
    const int64_t G = static_cast<int64_t>(last.size());
    int64_t D = lv.n == 1 ? 1 : std::min(max_skip + 1, C > 0 ? (C - 1) / (lv.n - 1) : 0);
    if (C == 0 || D == 0) continue;
    const int64_t nb = B.is_const() ? std::max<int64_t>(B.value(), 1) : 1;
    if (G * D > kMaxCompare / (C * lv.n) / nb)
      c.unsupported("TfIdfVectorizer comparing " + std::to_string(G) + " " + std::to_string(lv.n) + "-grams at " +
                    std::to_string(D * C) + " places in " + std::to_string(nb) + " rows (over " +
                    std::to_string(kMaxCompare) + " comparisons)");
    HostTensor grams(DType::I64, {G, lv.n}), onehot(DType::F32, {G, out_size});
    int64_t r = 0;
    for (const auto& [gram, g] : last) {
      for (int64_t j = 0; j < lv.n; ++j) grams.set_i64(r * lv.n + j, gram[static_cast<size_t>(j)]);
      onehot.set_f64(r * out_size + indexes[static_cast<size_t>(lv.first_id + g)], 1.0);
      ++r;
    }
    HostTensor idx(DType::I64, {D * C * lv.n}), valid(DType::Bool, {D, C});
    for (int64_t d = 1; d <= D; ++d)
      for (int64_t i = 0; i < C; ++i) {
        bool fits = i + (lv.n - 1) * d < C;
        valid.set_i64((d - 1) * C + i, fits ? 1 : 0);
        for (int64_t j = 0; j < lv.n; ++j) idx.set_i64(((d - 1) * C + i) * lv.n + j, fits ? i + j * d : i);
      }
    Tensor win = reshape(index_select(rows, 1, from_host(idx)), {B, SymInt(1), SymInt(D), SymInt(C), SymInt(lv.n)});
    Tensor pg = reshape(from_host(grams), {SymInt(1), SymInt(G), SymInt(1), SymInt(1), SymInt(lv.n)});
    Tensor hit = logical_and(all(eq(win, pg), {4}), from_host(valid));  // [B, G, D, C]
    Tensor cnt = sum(to(hit, DType::F32), {2, 3});                         // [B, G]
    freq = freq + matmul(cnt, from_host(onehot));
  }
  Tensor w;
  if (!weights.empty()) {
    HostTensor wh(DType::F32, {out_size});
    for (int64_t k = 0; k < out_size; ++k) wh.set_f64(k, weights[static_cast<size_t>(k)]);
    w = from_host(wh);
  }
  Tensor y = freq;
  if (mode == "IDF") y = where(gt(freq, 0.0), w.defined() ? expand(w, freq.shape()) : ones_like(freq), zeros_like(freq));
  else if (mode == "TFIDF" && w.defined()) y = freq * w;
  c.set(0, batched ? y : reshape(y, {SymInt(out_size)}));
}

}  // namespace

void add_text_ops(OpTable& t) { t["TfIdfVectorizer"] = tfidf_op; }

}  // namespace lathe::onnx_import
