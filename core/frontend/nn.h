// nn.h — neural-network composites over the lazy Tensor (tensor.h): matmul and linear,
// convolution and pooling, normalization, softmax, attention, losses.
//
// Layouts follow PyTorch: activations NCHW / NCL, conv weights [K, C/groups, R, S],
// linear weights [out, in]. Every function opens a ProvenanceScope with its own name, so
// e.g. the primitives of softmax inside attention record "attention/softmax".
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/frontend/tensor.h"

namespace lathe {

// ---- linear algebra (linalg.cpp) ----------------------------------------------------------
// torch.matmul: 1-D operands are promoted to matrices and the added dim removed again;
// batch dims broadcast. Built as a [.., M, N, K] broadcast Mul and a Reduce add over K
// (provenance "matmul"); backends turn that pattern into a GEMM.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);  // [B, M, K] x [B, K, N], no broadcasting
// x [.., in] · weight[out, in]^T + bias[out]
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
// Integer matmul (ONNX MatMulInteger without zero points): integer operands, each element
// widened to i32 before the product, products summed in i32 (wrapping). u8/i8 operands make
// the contraction the scheduler lowers to the packed int8 GEMM (see lower_matmul.cpp).
Tensor matmul_integer(const Tensor& a, const Tensor& b);

// ---- convolution and pooling (conv.cpp) ----------------------------------------------------
struct Conv2dOptions {
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
};
// x [N, C, H, W], weight [K, C/groups, R, S], bias [K] -> [N, K, OH, OW] with
// OH = (H + 2*pad - dil*(R-1) - 1) / stride + 1. The patches of the zero-padded input are
// one strided View [N, G, Kg, OH, OW, C/G, R, S] (im2col without a copy), multiplied by
// the broadcast weight and reduced over (C/G, R, S).
Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              const Conv2dOptions& opt = {});
// Integer conv2d (ONNX ConvInteger without zero points): the input is padded with
// `pad_value` (the input's zero point), products and sums in i32 as in matmul_integer.
Tensor conv2d_integer(const Tensor& x, const Tensor& weight, const Conv2dOptions& opt = {}, int64_t pad_value = 0);
// A stride-1, undilated, one-group 3x3 conv2d with constant weights `w` [K, C, 3, 3] as
// Winograd F(2x2, 3x3) (winograd.cpp): 16 products per 2x2 output tile instead of 36, the
// weight transform folded on the host. pads: top, left, bottom, right.
Tensor conv2d_winograd(const Tensor& x, const HostTensor& w, const std::optional<Tensor>& bias,
                       const std::array<int64_t, 4>& pads);
// LATHE_WINOGRAD: 0 / off never, all wherever it applies, else (unset, 1) where
// winograd_pays: C and K >= 64 over an output map of at most 128 x 128 with at least 16
// 2x2 tiles (7 x 7).
enum class WinogradMode { Off, Auto, All };
// Winograd's weight transform U[ξ, k, c] = Σ_{r,s} G[i, r] g[k, c, r, s] G[j, s] (ξ = 4i + j)
// of f32 weights g [K, C, 3, 3] into u [16, K, C], in double and rounded once; negate_row3:
// G's row 3 negated (the sparse transforms). threads: at most that many (0: one per core); U
// does not depend on it.
void winograd_weight_transform(const float* g, int64_t K, int64_t C, bool negate_row3, float* u, int threads = 0);
WinogradMode winograd_mode();
bool winograd_pays(int64_t C, int64_t K, int64_t OH, int64_t OW);
// The rows K' >= K that U is padded to (with zeros) for the sparse output transform
// (LATHE_WINOGRAD_SPARSE, LATHE_WINOGRAD_SPARSE_OUT), so that its reads of M's planes, K' x
// cols floats apart, fall in distinct L1 sets: the least K' < K + 16 at which
// no 4 KiB offset (at 64-byte line granularity) is shared by more than 2 of the planes
// (LATHE_WINOGRAD_PAD=0: K). 64 ch at 56x56 (28 x 28 tiles) gives 65, 512 at 7x7 513.
int64_t winograd_padded_rows(int64_t K, int64_t cols);
// x [N, C, L], weight [K, C/groups, R]: conv2d with H = 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);

struct Pool2dOptions {
  std::vector<int64_t> kernel{2, 2};
  std::vector<int64_t> stride{};   // empty: = kernel
  std::vector<int64_t> padding{0, 0};
  std::vector<int64_t> dilation{1, 1};
  bool count_include_pad = true;   // avg_pool2d only
};
// Windows are a strided View of the padded input (padded with -inf for max, 0 for avg),
// reduced over the window dims. ceil_mode is false.
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& opt);
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& opt);
// Output [N, C, OH, OW]: exact windows when H % OH == 0 (avg_pool2d); otherwise PyTorch's
// [floor(i*H/OH), ceil((i+1)*H/OH)) windows as constant averaging matrices (P_h x P_w^T).
Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);
Tensor global_avg_pool2d(const Tensor& x);  // mean over H, W with keepdim -> [N, C, 1, 1]

// ---- normalization and activations over an axis (nn.cpp) -----------------------------------
Tensor softmax(const Tensor& x, int axis = -1);       // exp(x - max) / sum(exp(x - max))
Tensor log_softmax(const Tensor& x, int axis = -1);   // x - max - log(sum(exp(x - max)))
// Normalizes over the last `normalized_dims` dims (biased variance), then * weight + bias
// (weight/bias have the shape of those dims).
Tensor layer_norm(const Tensor& x, int normalized_dims, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps = 1e-5);
// x * rsqrt(mean(x^2 over the last dims) + eps) * weight
Tensor rms_norm(const Tensor& x, int normalized_dims, const std::optional<Tensor>& weight, double eps = 1e-6);
// Inference batch norm on x [N, C, ...] with per-channel running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps = 1e-5);
// x [N, C, ...]: statistics per (sample, group of C/groups channels); weight/bias [C].
Tensor group_norm(const Tensor& x, int64_t groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps = 1e-5);
Tensor instance_norm(const Tensor& x, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                     double eps = 1e-5);
// Inference: the identity. Training: zero with probability p (counter-based rand(seed)),
// scale the rest by 1/(1-p).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = false, uint64_t seed = 0);

// ---- attention (attention.cpp) ---------------------------------------------------------------
// q [.., L, E], k [.., S, E], v [.., S, Ev] -> [.., L, Ev]:
// softmax(q k^T * scale + mask) v, scale defaults to 1/sqrt(E). causal keeps key j <= query
// i (top-left aligned, as PyTorch). attn_mask: bool (true = keep) or float (added).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, bool causal = false,
                                    std::optional<double> scale = std::nullopt);
// Self-attention on x [B, T, D] with GPT-2's packed layout: qkv = x · w_qkv [D, 3D] + b_qkv,
// split into heads [B, H, T, D/H], attention, merge, then · w_out [D, D] + b_out.
Tensor multi_head_attention(const Tensor& x, const Tensor& w_qkv, const std::optional<Tensor>& b_qkv,
                            const Tensor& w_out, const std::optional<Tensor>& b_out, int64_t heads,
                            bool causal = true);

// ---- losses (nn.cpp) ------------------------------------------------------------------------
// logits [N, C] (or [N, C, d...]); target: integer class indices [N] ([N, d...]) or
// probabilities with logits' shape. Mean over the batch: -mean(sum(target * log_softmax)).
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target);  // integer targets, mean
Tensor mse_loss(const Tensor& a, const Tensor& b);               // mean((a-b)^2)
Tensor l1_loss(const Tensor& a, const Tensor& b);
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);

}  // namespace lathe
