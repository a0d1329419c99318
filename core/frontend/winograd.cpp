// winograd.cpp — a stride-1 3×3 convolution with constant weights as Winograd F(2×2, 3×3)
// (Lavin & Gray 2015): each 2×2 output tile of each channel pair takes 16 products instead of
// 36. Built from the ops the scheduler already lowers to packed GEMMs:
//
//   V[ξ, c, n, t]     = Σ_{a,b} Bᵀ[i, a] Bᵀ[j, b] xp[n, c, 2·th + a, 2·tw + b]   input transform
//   M[ξ, k, (n, t)]   = Σ_c U[ξ, k, c] · V[ξ, c, (n, t)]         16 batched GEMMs (the bulk)
//   y[n, k, th, u, tw, v] = Σ_{i,j} Aᵀ[u, i] Aᵀ[v, j] M[(i, j), k, n, t]   output transform
//
// with U = G g Gᵀ folded on the host here (the weights are constant), ξ = (i, j) and the 1-D
// matrices of F(2, 3) at the points 0, 1, -1 (exact up to float rounding). The transforms are
// dense 16-term contractions (reductions); LATHE_WINOGRAD_SPARSE=1 builds them instead as
// the sparse ±1 forms, each one elementwise kernel over strided views: every row of Bᵀ and
// Aᵀ picks its nonzeros at indices affine in the row's index (see below). The output is
// cropped to OH × OW when it is odd.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/frontend/detail.h"
#include "core/frontend/nn.h"

namespace lathe {

namespace {

constexpr double kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
constexpr double kG[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
constexpr double kAt[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

// LATHE_WINOGRAD_SPARSE=1: the transforms as ±1 sums of strided views (sparse_transforms)
// instead of the dense 16-term contractions. Off by default: on the 2-core Zen 3 it is
// slower (64 ch at 56x56, one thread, min of 20: input 0.43 + 0.08 pad copy vs 0.45-0.62 ms
// dense, output 0.89 vs 0.43-0.61 ms: its innermost axis is the tile's 2 columns, not
// vectorized; without the pad's copy the input one reads masked views at 1.8 ms).
bool sparse_enabled() {
  const char* e = std::getenv("LATHE_WINOGRAD_SPARSE");
  return e && std::string(e) == "1";
}

// LATHE_WINOGRAD_SPARSE_OUT=1: the dense input transform with the sparse output one. Off: a
// tie in noise at load ~9 (one thread, min of 40, 5 alternating rounds, output kernel): 64 ch
// at 56x56 417-419 us vs 421-582 dense; 512 ch at 7x7 75-109 vs 47-75 (there TW is 4).
bool sparse_output_enabled() {
  const char* e = std::getenv("LATHE_WINOGRAD_SPARSE_OUT");
  return e && std::string(e) == "1";
}

// u [16, K, C] with zero rows appended up to [16, Kp, C]
HostTensor pad_rows(const HostTensor& u, int64_t Kp) {
  const int64_t K = u.shape()[1], C = u.shape()[2];
  HostTensor up(u.dtype(), {16, Kp, C});
  const int64_t esz = static_cast<int64_t>(dtype_size(u.dtype()));
  auto* dst = static_cast<std::byte*>(up.data());
  std::memset(dst, 0, static_cast<size_t>(16 * Kp * C * esz));
  for (int64_t x = 0; x < 16; ++x)
    std::memcpy(dst + x * Kp * C * esz, u.bytes() + x * K * C * esz, static_cast<size_t>(K * C * esz));
  return up;
}

// vals reshaped to shape and broadcast to full
Tensor signs(DType dt, const std::vector<double>& vals, const Shape& shape, const Shape& full) {
  HostTensor h(dt, {static_cast<int64_t>(vals.size())});
  for (size_t i = 0; i < vals.size(); ++i) h.set_f64(static_cast<int64_t>(i), vals[i]);
  return expand(reshape(from_host(h), shape), full);
}

// The output transform y = Aᵀ M A as sums of strided views of m = M [16 = (i, j), Kp, N·TH·TW]
// (rows K..Kp-1 unread): row u of Aᵀ is M[1] + s_u·(M[2u] + M[2 + u]) with s = (1, -1), so
// one elementwise kernel writes y as [N, K, TH, 2, TW, 2] (9 views, 8 adds and 3 sign
// multiplies per output) and returns it as [N, K, 2·TH, 2·TW].
Tensor sparse_output(const Tensor& m, const SymInt& N, int64_t K, int64_t Kp, int64_t TH, int64_t TW) {
  const SymInt P = N * SymInt(TH * TW);
  const SymInt tplane(TH * TW);
  const SymInt mplane = SymInt(Kp) * P;
  const Shape yshape{N, K, TH, 2, TW, 2};
  // term t of an axis: 0 -> index 1 (coefficient 1), 1 -> index 2u, 2 -> index 2 + u
  auto out_view = [&](int ti, int tj) {
    const int64_t off_i[3] = {4, 0, 8}, str_i[3] = {0, 8, 4};
    const int64_t off_j[3] = {1, 0, 2}, str_j[3] = {0, 2, 1};
    ViewSpec s;
    s.shape = yshape;
    s.strides = {tplane, P, SymInt(TW), SymInt(str_i[ti]) * mplane, SymInt(1), SymInt(str_j[tj]) * mplane};
    s.offset = SymInt(off_i[ti] + off_j[tj]) * mplane;
    return Tensor(prim::view(m.node(), s));
  };
  Tensor su = signs(m.dtype(), {1, -1}, {1, 1, 1, 2, 1, 1}, yshape);
  Tensor sv = signs(m.dtype(), {1, -1}, {1, 1, 1, 1, 1, 2}, yshape);
  auto row = [&](int ti) { return out_view(ti, 0) + sv * (out_view(ti, 1) + out_view(ti, 2)); };
  return reshape(row(0) + su * (row(1) + row(2)), {N, K, 2 * TH, 2 * TW});
}

}  // namespace

// U[ξ, k, c] for f32 weights. Each k's C × 9 weights are first turned around into nine
// rows of C doubles, so that every step below is one loop over c (vectorized) instead of a
// 3 × 3 block per (k, c) with 16 stores a plane apart; the ks are split among threads. The
// products are exact (G's entries are 0, ±1/2 and 1, and sgn ±1), and each sum is taken in the
// same order as the scalar form, so U is the same bit for bit however it is split.
void winograd_weight_transform(const float* g, int64_t K, int64_t C, bool negate_row3, float* u, int threads) {
  const double sgn[4] = {1, 1, 1, negate_row3 ? -1.0 : 1.0};
  auto run = [&](int64_t k_begin, int64_t k_end) {
    std::vector<double> gt(9 * static_cast<size_t>(C)), gg(12 * static_cast<size_t>(C));
    for (int64_t k = k_begin; k < k_end; ++k) {
      const float* gk = g + k * C * 9;
      for (int64_t c = 0; c < C; ++c)
        for (int r = 0; r < 9; ++r) gt[r * C + c] = gk[c * 9 + r];
      // gg[i][s] = Σ_r G[i, r] g[r][s], g[r][s] at row 3r + s
      for (int i = 0; i < 4; ++i)
        for (int s = 0; s < 3; ++s) {
          double* out = gg.data() + (i * 3 + s) * C;
          const double *g0 = gt.data() + s * C, *g1 = gt.data() + (3 + s) * C, *g2 = gt.data() + (6 + s) * C;
          const double a = kG[i][0], b = kG[i][1], d = kG[i][2];
          for (int64_t c = 0; c < C; ++c) out[c] = a * g0[c] + b * g1[c] + d * g2[c];
        }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const double sg = sgn[i] * sgn[j], a = kG[j][0], b = kG[j][1], d = kG[j][2];
          const double *h0 = gg.data() + (i * 3) * C, *h1 = h0 + C, *h2 = h1 + C;
          float* out = u + ((i * 4 + j) * K + k) * C;
          for (int64_t c = 0; c < C; ++c) out[c] = static_cast<float>(sg * (h0[c] * a + h1[c] * b + h2[c] * d));
        }
    }
  };
  // a thread only where it has at least 16K (k, c) pairs (~1 ms) to do: under load a thread's
  // start costs more than a small weight's transform
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>({threads, K, K * C / 16384}));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < workers; ++t) pool.emplace_back(run, K * t / workers, K * (t + 1) / workers);
  run(0, K / workers);
  for (auto& t : pool) t.join();
}

int64_t winograd_padded_rows(int64_t K, int64_t cols) {
  const char* e = std::getenv("LATHE_WINOGRAD_PAD");
  if (e && std::string(e) == "0") return K;
  // plane offsets mod 4 KiB in 64-byte lines (f32: 1024 floats, 16 a line)
  auto worst = [&](int64_t rows) {
    int count[64] = {};
    int most = 0;
    for (int64_t x = 0; x < 16; ++x) most = std::max(most, ++count[((x * rows * cols) % 1024) / 16]);
    return most;
  };
  for (int64_t kp = K; kp < K + 16; ++kp)
    if (worst(kp) <= 2) return kp;
  return K;
}

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
  // Many channels (the GEMMs' sides) over a map of at least 16 tiles (7 × 7). U varies with ξ
  // and is prepacked once per entry (prepack.cpp; with LATHE_PREPACK_BATCHED=0 it is packed on
  // every run and below ~25 tiles that pack outweighs the saved products: 512 ch at 7×7 3.8 ms
  // vs 2.8 direct). Measured one thread, min of 20-60 runs: 256 at 14×14 2.3 vs 3.1; 128 at
  // 28×28 1.8 vs 2.7; 64 at 56×56 2.3 vs 3.0; 256 at 10×10 1.27-1.35 vs 1.76-2.22; 64 at
  // 64×64 2.9-3.7 vs 4.6-4.8; 64 at 128×128 22-28 vs 32; with U prepacked, 16 tiles: 512 at
  // 7×7 1.71-1.93 vs 2.73-2.78, 256 at 8×8 0.46-0.48 vs 0.88-0.89, 128 at 7×7 0.15-0.21 vs
  // 0.24, 64 at 7×7 0.055-0.066 vs 0.084-0.145; 9 tiles: 512 at 6×6 1.60-1.72 vs 1.98-2.05
  // but 256 at 5×5 0.43 vs 0.39, so not below 16. Maps over 128 are unmeasured (and the
  // transforms' intermediates grow with them).
  const int64_t tiles = ((OH + 1) / 2) * ((OW + 1) / 2);
  return C >= 64 && K >= 64 && tiles >= 16 && OH <= 128 && OW <= 128;
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
  const int64_t pt = pads[0], pl = pads[1], pb = pads[2], pr = pads[3];  // (not a structured binding: the lambdas below capture them, which clang before 16 refuses)
  const int64_t OH = H + pt + pb - 2, OW = W + pl + pr - 2;
  if (OH < 1 || OW < 1) detail::fail("conv2d_winograd", "the 3x3 kernel is larger than the padded input " + x.describe());
  const int64_t TH = (OH + 1) / 2, TW = (OW + 1) / 2, Hp = 2 * TH + 2, Wp = 2 * TW + 2;
  const DType dt = x.dtype();

  // U[ξ, k, c] = Σ_{r,s} G[i, r] g[k, c, r, s] G[j, s]
  // the sparse transforms negate row 3 of Bᵀ (see there), so U's row and column 3 too
  const bool sparse = sparse_enabled();
  const double sgn[4] = {1, 1, 1, sparse ? -1.0 : 1.0};
  // f32 (the ONNX import's case) read from the weight's bytes, which may be its model file's
  // (a deferred tensor: get_f64 would first copy all of it to the heap), and written straight
  // into U (winograd_weight_transform). U is a computed tensor (HostTensor::computed): made
  // from w when first read, freed by the build once its packed copy is the only one the
  // program reads (prepack.cpp), and made again if the graph's node is read after that.
  const HostTensor u = HostTensor::computed(dt, {16, K, C}, [w, dt, K, C, sparse, sgn0 = sgn[3]](void* dst) {
    if (w.dtype() == DType::F32 && dt == DType::F32) {
      winograd_weight_transform(reinterpret_cast<const float*>(w.bytes()), K, C, sparse, static_cast<float*>(dst));
      return;
    }
    HostTensor out(dt, {16, K, C}, std::shared_ptr<std::byte[]>(static_cast<std::byte*>(dst), [](std::byte*) {}));
    const double sg[4] = {1, 1, 1, sgn0};
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c) {
        double g[3][3], gg[4][3];
        for (int r = 0; r < 3; ++r)
          for (int s = 0; s < 3; ++s) g[r][s] = w.get_f64(((k * C + c) * 3 + r) * 3 + s);
        for (int i = 0; i < 4; ++i)
          for (int s = 0; s < 3; ++s) gg[i][s] = kG[i][0] * g[0][s] + kG[i][1] * g[1][s] + kG[i][2] * g[2][s];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j)
            out.set_f64(((i * 4 + j) * K + k) * C + c,
                        sg[i] * sg[j] * (gg[i][0] * kG[j][0] + gg[i][1] * kG[j][1] + gg[i][2] * kG[j][2]));
      }
  });
  Tensor y = sparse ? [&]() {
    // the padded input covers every tile: [pt, Hp - H - pt] rows, likewise columns
    Tensor xp = contiguous(pad(x, {{0, 0}, {0, 0}, {pt, Hp - H - pt}, {pl, Wp - W - pl}}, Scalar(0)));
    const SymInt N = x.dim(0);
    const SymInt plane(Hp * Wp);
    // Input transform, each row k = (k1, k0) of Bᵀ (row 3 negated, G's too) is d[p] + s_k·d[q]
    // with p = 2·k1 + k0 and q = 2 - k1: two strided views per axis, so V is one elementwise
    // kernel over [i1, i0, j1, j0, C, N, TH, TW] of four shifted views of xp (3 adds, 3 sign
    // multiplies per element instead of 16 multiply-adds).
    auto in_view = [&](bool row_q, bool col_q) {
      ViewSpec s;
      s.shape = {2, 2, 2, 2, C, N, TH, TW};
      s.strides = {SymInt(row_q ? -Wp : 2 * Wp), SymInt(row_q ? 0 : Wp), SymInt(col_q ? -1 : 2), SymInt(col_q ? 0 : 1),
                   plane, SymInt(C) * plane, SymInt(2 * Wp), SymInt(2)};
      s.offset = SymInt((row_q ? 2 * Wp : 0) + (col_q ? 2 : 0));
      return Tensor(prim::view(xp.node(), s));
    };
    const Shape vshape{2, 2, 2, 2, C, N, TH, TW};
    Tensor si = signs(dt, {-1, 1, -1, -1}, {2, 2, 1, 1, 1, 1, 1, 1}, vshape);
    Tensor sj = signs(dt, {-1, 1, -1, -1}, {1, 1, 2, 2, 1, 1, 1, 1}, vshape);
    Tensor v = (in_view(false, false) + sj * in_view(false, true)) + si * (in_view(true, false) + sj * in_view(true, true));
    const SymInt P = N * SymInt(TH * TW);
    // The output transform reads M at 9 offsets a multiple of its plane (K' × P) apart; when
    // that plane is a multiple of 4 KiB they alias in L1 (64 ch at 56x56: 0.89 vs 0.41 ms), so
    // U gets zero rows up to K' = winograd_padded_rows (M's rows past K are never read).
    const int64_t Kp = winograd_padded_rows(K, N.is_const() ? N.value() * TH * TW : TH * TW);
    Tensor m = matmul(from_host(Kp == K ? u : pad_rows(u, Kp)), reshape(v, {16, C, P}));  // [16, K', N·TH·TW]
    return sparse_output(m, N, K, Kp, TH, TW);
  }() : [&]() {
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
    // LATHE_WINOGRAD_SPARSE_OUT=1: the sparse output transform (9 strided views of M), with U
    // padded as in the sparse path; the dense one (a 16-term contraction, lowered as a small
    // GEMM) showed no loss to the aliasing (64 ch at 56x56, one thread, min of 40 over 5 rounds:
    // 421-582 us unpadded, 473-680 padded), so it keeps K' = K
    const bool sparse_out = sparse_output_enabled();
    const int64_t Kp = sparse_out ? winograd_padded_rows(K, N.is_const() ? N.value() * TH * TW : TH * TW) : K;
    Tensor m = matmul(from_host(Kp == K ? u : pad_rows(u, Kp)), reshape(v, {16, C, P}));  // [16, K', N·TH·TW]
    if (sparse_out) return sparse_output(m, N, K, Kp, TH, TW);
    // [16, K, N, TH, TW] -> [N, K, TH, 2, TW, 2, 16] (broadcast over u, v) times At
    Tensor mv = permute(reshape(m, {16, K, N, TH, TW}), {2, 1, 3, 4, 0});
    Shape full{N, K, TH, 2, TW, 2, 16};
    Tensor me = expand(reshape(mv, {N, K, TH, 1, TW, 1, 16}), full);
    Tensor ae = expand(reshape(from_host(at), {1, 1, 1, 2, 1, 2, 16}), full);
    return reshape(sum(me * ae, {6}, false), {N, K, 2 * TH, 2 * TW});
  }();
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
