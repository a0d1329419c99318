// attention.cpp — scaled dot-product attention and GPT-2-style multi-head self-attention.
#include <cmath>

#include "core/frontend/nn.h"
#include "core/frontend/detail.h"

namespace lathe {

using detail::fail;

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const std::optional<Tensor>& attn_mask, bool causal, std::optional<double> scale) {
  if (q_in.rank() < 2 || k_in.rank() < 2 || v_in.rank() < 2)
    fail("attention", "q, k, v must be [.., L, E], [.., S, E], [.., S, Ev], got " + q_in.describe() + ", " +
                          k_in.describe() + ", " + v_in.describe());
  if (q_in.dim(-1) != k_in.dim(-1))
    fail("attention", "query " + q_in.describe() + " and key " + k_in.describe() + " differ in the last (embedding) dim");
  if (k_in.dim(-2) != v_in.dim(-2))
    fail("attention", "key " + k_in.describe() + " and value " + v_in.describe() + " differ in sequence length (dim -2)");
  ProvenanceScope ps("attention");
  Tensor q = detail::as_float(q_in), k = detail::as_float(k_in), v = detail::as_float(v_in);
  double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(detail::const_dim(q.dim(-1), "attention", "embedding dim")));
  Tensor scores = matmul(q, transpose(k, -1, -2)) * s;  // [.., L, S]
  Shape ls{q.dim(-2), k.dim(-2)};
  if (causal) {
    ProvenanceScope cm("causal_mask");
    Tensor i(prim::index(DType::I64, ls, 0)), j(prim::index(DType::I64, ls, 1));
    scores = where(le(j, i), scores, full({}, -INFINITY, scores.dtype()));
  }
  if (attn_mask) {
    if (attn_mask->dtype() == DType::Bool) scores = where(*attn_mask, scores, full({}, -INFINITY, scores.dtype()));
    else scores = scores + *attn_mask;
  }
  return matmul(softmax(scores, -1), v);
}

Tensor multi_head_attention(const Tensor& x, const Tensor& w_qkv, const std::optional<Tensor>& b_qkv,
                            const Tensor& w_out, const std::optional<Tensor>& b_out, int64_t heads, bool causal) {
  if (x.rank() != 3) fail("multi_head_attention", "input must be [B, T, D], got " + x.describe());
  int64_t D = detail::const_dim(x.dim(2), "multi_head_attention", "model dim D");
  if (heads <= 0 || D % heads)
    fail("multi_head_attention", "model dim " + std::to_string(D) + " is not divisible by heads=" + std::to_string(heads));
  if (w_qkv.shape() != Shape{D, 3 * D})
    fail("multi_head_attention", "w_qkv " + w_qkv.describe() + " must be [" + std::to_string(D) + ", " +
                                     std::to_string(3 * D) + "] (x · w layout)");
  if (w_out.shape() != Shape{D, D})
    fail("multi_head_attention", "w_out " + w_out.describe() + " must be [" + std::to_string(D) + ", " + std::to_string(D) + "]");
  ProvenanceScope ps("multi_head_attention");
  SymInt B = x.dim(0), T = x.dim(1);
  int64_t hd = D / heads;
  Tensor qkv = matmul(x, w_qkv);
  if (b_qkv) qkv = qkv + *b_qkv;
  auto parts = split(qkv, D, -1);  // q, k, v: [B, T, D]
  auto heads_of = [&](const Tensor& t) { return permute(reshape(t, {B, T, heads, hd}), {0, 2, 1, 3}); };
  Tensor o = scaled_dot_product_attention(heads_of(parts[0]), heads_of(parts[1]), heads_of(parts[2]), std::nullopt, causal);
  Tensor merged = reshape(permute(o, {0, 2, 1, 3}), {B, T, D});
  Tensor y = matmul(merged, w_out);
  if (b_out) y = y + *b_out;
  return y;
}

}  // namespace lathe
