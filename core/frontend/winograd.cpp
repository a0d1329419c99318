// winograd.cpp — a stride-1 3×3 convolution with constant weights as Winograd F(2×2, 3×3)
// (Lavin & Gray 2015): each 2×2 output tile of each channel pair takes 16 products instead of
// 36. Built from the ops the scheduler already lowers to packed GEMMs:
//
//   d[n, c, t, a, b]  = xp[n, c, 2·th + a, 2·tw + b]            4×4 input tiles (one View)
//   V[ξ, c, n, t]     = Σ_{a,b} Bt[ξ, a, b] · d[n, c, t, a, b]   input transform (K = 16)
//   M[ξ, k, (n, t)]   = Σ_c U[ξ, k, c] · V[ξ, c, (n, t)]         16 batched GEMMs (the bulk)
//   y[n, k, th, u, tw, v] = Σ_ξ At[u, v, ξ] · M[ξ, k, n, t]       output transform (K = 16)
//
// with U = G g Gᵀ folded on the host here (the weights are constant), Bt[ξ=(i,j), a, b] =
// Bᵀ[i, a] Bᵀ[j, b] and At[(u, v), ξ=(i,j)] = Aᵀ[u, i] Aᵀ[v, j] (the 1-D matrices of
// F(2, 3) at the points 0, 1, -1: exact up to float rounding). The transforms are dense
// 16-term contractions (16× the adds of the sparse ones, ~6% of the GEMM's work at 256
// channels). The output is cropped to OH × OW when it is odd.
#include <cstdlib>
#include <string>

#include "core/frontend/detail.h"
#include "core/frontend/nn.h"

namespace lathe {

namespace {

constexpr double kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kAt[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

}  // namespace

WinogradMode winograd_mode() {
  const char* e = std::getenv("LATHE_WINOGRAD");
  if (!e || !*e) return WinogradMode::Auto;
  std::string s = e;
  if (s == "0" || s == "off") return WinogradMode::Off;
  if (s == "all") return WinogradMode::All;
  return WinogradMode::Auto;
}

bool winograd_pays(int64_t C, int64_t K, int64_t OH, int64_t OW) {
  switch (winograd_mode()) {
    case WinogradMode::Off: return false;
    case WinogradMode::All: return true;
    case WinogradMode::Auto: break;
  }
  // Many channels (the GEMMs' sides) over a map of at least 25 tiles: the 16 GEMMs read U
  // (a constant that varies with ξ, so packed on every run, not prepacked) for every 2×2
  // tile column, and below ~25 tiles that pack outweighs the saved products (measured one
  // thread, min of 20: 512 ch at 7×7 (16 tiles) 3.8 ms vs 2.8 direct; 256 at 14×14 2.3 vs
  // 3.1; 128 at 28×28 1.8 vs 2.7; 64 at 56×56 2.3 vs 3.0; 256 at 10×10 (25 tiles) 1.27-1.35
  // vs 1.76-2.22; 64 at 64×64 2.9-3.7 vs 4.6-4.8; 64 at 128×128 22-28 vs 32). Maps over 128
  // are unmeasured (and the transforms' intermediates grow with them).
  const int64_t tiles = ((OH + 1) / 2) * ((OW + 1) / 2);
  return C >= 64 && K >= 64 && tiles >= 25 && OH <= 128 && OW <= 128;
}

Tensor conv2d_winograd(const Tensor& x_in, const HostTensor& w, const std::optional<Tensor>& bias,
                       const std::array<int64_t, 4>& pads) {
  if (x_in.rank() != 4) detail::fail("conv2d_winograd", "input must be [N, C, H, W], got " + x_in.describe());
  if (!is_float(x_in.dtype())) detail::fail("conv2d_winograd", "input must be floating point, got " + x_in.describe());
  if (w.rank() != 4 || w.shape()[2] != 3 || w.shape()[3] != 3)
    detail::fail("conv2d_winograd", "weight must be [K, C, 3, 3], got " + w.shape_string());
  ProvenanceScope ps("conv2d_winograd");
  const Tensor& x = x_in;
  const int64_t K = w.shape()[0], C = w.shape()[1];
  if (detail::const_dim(x.dim(1), "conv2d_winograd", "channel count C") != C)
    detail::fail("conv2d_winograd", "weight " + w.shape_string() + " does not match the input " + x.describe());
  const int64_t H = detail::const_dim(x.dim(2), "conv2d_winograd", "H");
  const int64_t W = detail::const_dim(x.dim(3), "conv2d_winograd", "W");
  const auto [pt, pl, pb, pr] = pads;
  const int64_t OH = H + pt + pb - 2, OW = W + pl + pr - 2;
  if (OH < 1 || OW < 1) detail::fail("conv2d_winograd", "the 3x3 kernel is larger than the padded input " + x.describe());
  const int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, Hp = 2 * TH + 2, Wp = 2 * TW + 2;
  const DType dt = x.dtype();

  // U[ξ, k, c] = Σ_{r,s} G[i, r] g[k, c, r, s] G[j, s]
  HostTensor u(dt, {16, K, C});
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c) {
      double g[3][3], gg[4][3];
      for (int r = 0; r < 3; ++r)
        for (int s = 0; s < 3; ++s) g[r][s] = w.get_f64(((k * C + c) * 3 + r) * 3 + s);
      for (int i = 0; i < 4; ++i)
        for (int s = 0; s < 3; ++s) gg[i][s] = kG[i][0] * g[0][s] + kG[i][1] * g[1][s] + kG[i][2] * g[2][s];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          u.set_f64(((i * 4 + j) * K + k) * C + c, gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2]);
    }
  HostTensor bt(dt, {16, 4, 4}), at(dt, {2, 2, 16});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) bt.set_f64(((i * 4 + j) * 4 + a) * 4 + b, kBt[i][a] * kBt[j][b]);
  for (int uu = 0; uu < 2; ++uu)
    for (int vv = 0; vv < 2; ++vv)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) at.set_f64((uu * 2 + vv) * 16 + i * 4 + j, kAt[uu][i] * kAt[vv][j]);

  // the padded input covers every tile: [pt, Hp - H - pt] rows, likewise columns
  Tensor xp = pad(x, {{0, 0}, {0, 0}, {pt, Hp - H - pt}, {pl, Wp - W - pl}}, Scalar(0));
  const SymInt N = x.dim(0);
  const SymInt plane(Hp * Wp);
  ViewSpec tiles;  // [16 (broadcast), C, N, TH, TW, 4, 4]
  tiles.shape = {16, C, N, TH, TW, 4, 4};
  tiles.strides = {SymInt(0), plane, SymInt(C) * plane, SymInt(2 * Wp), SymInt(2), SymInt(Wp), SymInt(1)};
  Tensor d(prim::view(xp.node(), tiles));
  Tensor btv = expand(reshape(from_host(bt), {16, 1, 1, 1, 1, 4, 4}), d.shape());
  Tensor v = sum(d * btv, {5, 6}, false);  // [16, C, N, TH, TW]
  const SymInt P = N * SymInt(TH * TW);
  Tensor m = matmul(from_host(u), reshape(v, {16, C, P}));  // [16, K, N·TH·TW]
  // [16, K, N, TH, TW] -> [N, K, TH, 2, TW, 2, 16] (broadcast over u, v) times At
  Tensor mv = permute(reshape(m, {16, K, N, TH, TW}), {2, 1, 3, 4, 0});
  Shape full{N, K, TH, 2, TW, 2, 16};
  Tensor me = expand(reshape(mv, {N, K, TH, 1, TW, 1, 16}), full);
  Tensor ae = expand(reshape(from_host(at), {1, 1, 1, 2, 1, 2, 16}), full);
  Tensor y = reshape(sum(me * ae, {6}, false), {N, K, 2 * TH, 2 * TW});
  if (2 * TH != OH) y = narrow(y, 2, 0, OH);
  if (2 * TW != OW) y = narrow(y, 3, 0, OW);
  if (bias) {
    if (bias->rank() != 1 || bias->dim(0) != SymInt(K))
      detail::fail("conv2d_winograd", "bias must be [" + std::to_string(K) + "], got " + bias->describe());
    y = y + reshape(*bias, {K, 1, 1});
  }
  return y;
}

}  // namespace lathe
