// prepack.cpp — see prepack.h.
#include "core/loop/prepack.h"
#include "core/loop/repack.h"

#include "core/loop/lower_depthwise.h"
#include "core/loop/pack_defer.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "core/ir/build.h"
#include "core/ir/diag.h"
#include "core/runtime/host_tensor.h"
#include "core/runtime/machine.h"
#include "core/runtime/kernel_cache.h"
#include "core/runtime/mapped_file.h"
#include "core/runtime/page_release.h"
#include "core/runtime/tensor_cache.h"

namespace lathe::loop {

namespace {

// Offsets of a group's flat indices [0, count): Σ coef(d) · coord_d, coords row-major.
std::optional<std::vector<int64_t>> offsets(const Affine& a, const std::vector<int>& dims, const Shape& s) {
  std::vector<int64_t> sizes, coefs;
  int64_t count = 1;
  for (int d : dims) {
    auto c = a.const_coef(d);
    if (!c || !s[d].is_const()) return std::nullopt;
    sizes.push_back(s[d].value());
    coefs.push_back(*c);
    count *= s[d].value();
  }
  std::vector<int64_t> off(count);
  for (int64_t f = 0; f < count; ++f) {
    int64_t rest = f, o = 0;
    for (size_t i = sizes.size(); i-- > 0;) {
      o += (rest % sizes[i]) * coefs[i];
      rest /= sizes[i];
    }
    off[f] = o;
  }
  return off;
}

// Hands the pages of a weight whose packed copy replaced it in every kernel that read it
// back to the OS without losing its values, so that it does not count twice
// (page_release.h: a memory-mapped model's pages stay in the page cache for the next start).
// A computed weight (HostTensor::computed: Winograd's U, made from the 3x3 weights at import)
// is freed instead: its pages are anonymous, which page_release cannot take back without swap
// (resnet50: ~80 MB of U beside its packed copy), and whoever reads the graph's node later
// (the interpreter, --check, the REPL, a save) computes it again.
// LATHE_RELEASE_COMPUTED=0 keeps them (A/B runs).
bool release_computed() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_RELEASE_COMPUTED");
    return !(e && std::string(e) == "0");
  }();
  return on;
}
void page_out(const HostTensor& t) {
  if (!t.recomputable()) release_pages(t.bytes(), t.nbytes());
  else if (release_computed()) t.release();
}

// buffer -> the kernels (and graph outputs) that read all of it, or may: a kernel that only
// gathers a few rows of it (gathers_only) does not count, its few pages come back on a touch
std::map<int, int> count_readers(const KernelGraph& kg) {
  std::map<int, int> readers;
  for (const Kernel& k : kg.kernels)
    for (int b : k.inputs)
      if (!gathers_only(kg, k, b)) ++readers[b];
  for (const auto& [name, b] : kg.outputs) ++readers[b];
  return readers;
}

// An int8 contraction's panels (lower_matmul.cpp): groups of G consecutive k per row or
// column, as u8 × i8 (G = 4, VNNI) or both sides widened to i16 (G = 2). Which one the
// lowering takes for this contraction; G = 0 when it is not an integer contraction.
struct IntPanels {
  int g = 0;
  DType a = DType::F32, b = DType::F32;
};
IntPanels int_panels(const MatmulMatch& mm) {
  if (mm.reduce->dtype != DType::I32) return {};
  if ((mm.sat16 || host_int8_dot_group() == 4) && mm.a.src->dtype == DType::U8 && mm.b.src->dtype == DType::I8)
    return {4, DType::U8, DType::I8};
  if ((mm.sat16 || vnni_i8_u8()) && mm.a.src->dtype == DType::I8 && mm.b.src->dtype == DType::U8) return {4, DType::I8, DType::U8};
  return {2, DType::I16, DType::I16};
}

// Int8 panels of a constant 8-bit operand, for KC = kc and width w (NR or MR):
//     packed[((blk · panels + p) · (kc / G) + g) · w · G + c · G + j] = X[row p·w + c, k = blk·kc + g·G + j]
// (the f32 layout with each group of G k interleaved per row / column; zero past the end),
// X[row r, k] at c0 + roff[r] + koff[k]. Written as `dt` (i16, or i8 / u8 for VNNI).
template <int64_t G, class S, class D>
void pack_int8_into(const S* x, D* out, int64_t rows, int64_t K, int64_t kc, int64_t w, int64_t c0,
                    const std::vector<int64_t>& roff, const std::vector<int64_t>& koff) {
  const int64_t panels = (rows + w - 1) / w, groups = kc / G, kblocks = (K + kc - 1) / kc;
  const int64_t panel = groups * w * G;  // elements of one panel's KC block
  // read in address order: along the rows when they are adjacent (a [K, N] weight), else
  // along k (a [Cout, K] one); no division per element. Panels [p0, p1) per thread.
  const bool by_k = rows > 1 && roff[1] - roff[0] == 1;
  auto pack = [&](int64_t p0, int64_t p1) {
    if (by_k) {
      for (int64_t blk = 0; blk < kblocks; ++blk)
        for (int64_t g = 0; g < groups; ++g)
          for (int64_t j = 0; j < G; ++j) {
            const int64_t k = blk * kc + g * G + j;
            if (k >= K) break;
            const S* xk = x + c0 + koff[k];
            D* o = out + (blk * panels + p0) * panel + g * w * G + j;
            for (int64_t p = p0, r = p0 * w; p < p1; ++p, o += panel)
              for (int64_t c = 0; c < w && r < rows; ++c, ++r) o[c * G] = static_cast<D>(xk[roff[r]]);
          }
      return;
    }
    for (int64_t r = p0 * w; r < std::min(rows, p1 * w); ++r) {
      const S* xr = x + c0 + roff[r];
      for (int64_t blk = 0; blk < kblocks; ++blk) {
        D* o = out + (blk * panels + r / w) * panel + (r % w) * G;
        const int64_t kend = std::min(kc, K - blk * kc);
        const int64_t* ko = koff.data() + blk * kc;
        for (int64_t kk = 0; kk < kend; ++kk) o[(kk / G) * w * G + kk % G] = static_cast<D>(xr[ko[kk]]);
      }
    }
  };
  // a large weight (BERT's 768 x 3072) on every thread: the start pays for it
  const int64_t workers = rows * K >= (int64_t(1) << 20) ? std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), panels) : 1;
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < workers; ++t) pool.emplace_back(pack, panels * t / workers, panels * (t + 1) / workers);
  pack(0, panels / workers);
  for (auto& t : pool) t.join();
}

HostTensor pack_int8(const HostTensor& data, DType dt, int G, int64_t rows, int64_t K, int64_t kc, int64_t w, int64_t c0,
                     const std::vector<int64_t>& roff, const std::vector<int64_t>& koff) {
  const int64_t panels = (rows + w - 1) / w, kblocks = (K + kc - 1) / kc;
  HostTensor out(dt, {kblocks, panels, kc, w});
  std::memset(out.data(), 0, out.nbytes());
  auto run = [&](auto* o) {  // G a constant: the k group's index math without a division
    LATHE_CHECK(G == 2 || G == 4, "int8 panels group 2 or 4 k");
    if (data.dtype() == DType::U8) {
      if (G == 2) pack_int8_into<2>(reinterpret_cast<const uint8_t*>(data.bytes()), o, rows, K, kc, w, c0, roff, koff);
      else pack_int8_into<4>(reinterpret_cast<const uint8_t*>(data.bytes()), o, rows, K, kc, w, c0, roff, koff);
    } else {
      if (G == 2) pack_int8_into<2>(reinterpret_cast<const int8_t*>(data.bytes()), o, rows, K, kc, w, c0, roff, koff);
      else pack_int8_into<4>(reinterpret_cast<const int8_t*>(data.bytes()), o, rows, K, kc, w, c0, roff, koff);
    }
  };
  if (dt == DType::I16) run(out.ptr<int16_t>());
  else if (dt == DType::U8) run(out.ptr<uint8_t>());
  else run(out.ptr<int8_t>());
  return out;
}

}  // namespace

bool gathers_only(const KernelGraph& kg, const Kernel& k, int buffer) {
  const NodeRef src = kg.buffers.at(buffer).node;
  if (!src || src->shape.empty()) return false;
  const SymInt total = shape_numel(src->shape);
  if (!total.is_const()) return false;
  std::set<NodeRef> of_src{src};  // src and the views of it
  int64_t gathered = 0;
  bool any = false;
  for (NodeRef n : k.nodes) {
    bool uses = false;
    for (NodeRef in : n->inputs) uses = uses || of_src.count(in);
    if (!uses) continue;
    if (n->op == Op::View && n->inputs.size() == 1) {
      of_src.insert(n);
    } else if (n->op == Op::Take && n->inputs.size() == 2 && of_src.count(n->inputs[0]) && !of_src.count(n->inputs[1])) {
      const SymInt e = shape_numel(n->shape);
      if (!e.is_const()) return false;
      gathered += e.value();
      any = true;
    } else {
      return false;  // read some other way: possibly all of it
    }
  }
  if (k.root && of_src.count(k.root)) return false;  // the kernel copies (a view of) it out
  return any && gathered * 8 <= total.value();
}

int release_gathered_constants(const KernelGraph& kg) {
  std::map<int, int> readers = count_readers(kg);  // kernels that read all of a buffer, and outputs
  int released = 0;
  for (const BufferDesc& b : kg.buffers) {
    if (b.kind != BufferKind::Constant || !b.node || b.node->op != Op::Const || !b.node->attrs.data) continue;
    if (readers[b.id] != 0) continue;
    bool read = false;
    for (const Kernel& k : kg.kernels) read = read || std::count(k.inputs.begin(), k.inputs.end(), b.id);
    if (!read) continue;
    const HostTensor& data = *b.node->attrs.data;
    if (!data.recomputable()) page_out(data);  // (a computed one would only be computed again for the gathers)
    ++released;
  }
  return released;
}

namespace {

// Element i of f32 values at `p`, which may be unaligned (a weight packed straight from its
// model file's mapping: HostTensor::bytes()).
inline float ldf(const std::byte* p, int64_t i) {
  float v;
  std::memcpy(&v, p + 4 * i, sizeof v);
  return v;
}

// A constant operand's packed entries: one per batch index the weight differs by (f32 only,
// packed_batch_axes), each at its offset into the weight; one entry at 0 where it reads no
// batch axis. Nothing where it cannot be packed per entry (integer panels, switched off, or
// offsets that are not constant).
struct PackedEntries {
  std::vector<int> baxes;     // the batch axes (empty: one entry)
  std::vector<int64_t> eoff;  // each entry's offset into the weight
};
std::optional<PackedEntries> packed_entries(const MatmulMatch& mm, const OperandAccess& x, const Shape& s, bool int_panels) {
  PackedEntries pe{packed_batch_axes(mm, x), {0}};
  if (pe.baxes.empty()) return pe;
  if (int_panels || !prepack_batched_enabled()) return std::nullopt;
  auto off = offsets(x.addr, pe.baxes, s);
  if (!off) return std::nullopt;
  pe.eoff = std::move(*off);
  return pe;
}

// Every element the packing reads, c0 + one offset of each group, lies in [0, total).
bool reads_within(int64_t c0, const std::vector<int64_t>& rows, const std::vector<int64_t>& ks,
                  const std::vector<int64_t>& entries, int64_t total) {
  const int64_t lo = c0 + *std::min_element(rows.begin(), rows.end()) + *std::min_element(ks.begin(), ks.end()) +
                     *std::min_element(entries.begin(), entries.end());
  const int64_t hi = c0 + *std::max_element(rows.begin(), rows.end()) + *std::max_element(ks.begin(), ks.end()) +
                     *std::max_element(entries.begin(), entries.end());
  return lo >= 0 && hi < total;
}

// step when off[i] == i * step for every i (off[0] is 0: offsets()), else nothing
std::optional<int64_t> uniform_step(const std::vector<int64_t>& off) {
  const int64_t step = off.size() > 1 ? off[1] - off[0] : 1;
  for (size_t i = 0; i < off.size(); ++i)
    if (off[i] != static_cast<int64_t>(i) * step) return std::nullopt;
  return step;
}

// dst[k * ld + c] = src[c * row + k] for c < cols, k < ks: `cols` rows of B^T (one panel's
// columns), each read along k in address order, written as the panel's k-major block.
// 4 x 4 tiles through SSE registers where the host has them (baseline x86-64), the ragged
// edges element by element.
void transpose_panel(const std::byte* src, int64_t row, int64_t cols, int64_t ks, float* dst, int64_t ld) {
  int64_t c = 0;
#if defined(__SSE2__)
  auto at = [&](int64_t i) { return reinterpret_cast<const float*>(src + 4 * i); };  // (unaligned loads)
  for (; c + 4 <= cols; c += 4) {
    const int64_t r0 = c * row;
    int64_t k = 0;
    for (; k + 4 <= ks; k += 4) {
      __m128 a = _mm_loadu_ps(at(r0 + k)), b = _mm_loadu_ps(at(r0 + row + k)), d = _mm_loadu_ps(at(r0 + 2 * row + k)),
             e = _mm_loadu_ps(at(r0 + 3 * row + k));
      _MM_TRANSPOSE4_PS(a, b, d, e);
      _mm_storeu_ps(dst + k * ld + c, a);
      _mm_storeu_ps(dst + (k + 1) * ld + c, b);
      _mm_storeu_ps(dst + (k + 2) * ld + c, d);
      _mm_storeu_ps(dst + (k + 3) * ld + c, e);
    }
    for (; k < ks; ++k)
      for (int64_t i = 0; i < 4; ++i) dst[k * ld + c + i] = ldf(src, r0 + i * row + k);
  }
#endif
  for (; c < cols; ++c)
    for (int64_t k = 0; k < ks; ++k) dst[k * ld + c] = ldf(src, c * row + k);
}

// Registers a packed copy as a Constant buffer of kg named `name`; returns its id.
// node_name: the Const node's name (a deferred copy's, unique: pack_defer.h).
int add_packed_buffer(KernelGraph& kg, const HostTensor& packed, const std::string& name, PackMemo* memo,
                      const std::string& key, const std::string& node_name = "") {
  auto make = [&] {
    if (node_name.empty()) return prim::constant_tensor(packed);  // its content hash is taken once
    Attrs a;
    a.data = std::make_shared<HostTensor>(packed);
    a.name = node_name;
    return make_node(Op::Const, packed.dtype(), shape_from(packed.shape()), {}, std::move(a));
  };
  NodeRef node;
  if (memo) {
    NodeRef& seen = memo->packed[key];
    if (!seen) seen = make();
    node = seen;
  } else {
    node = make();
  }
  BufferDesc desc;
  desc.id = static_cast<int>(kg.buffers.size());
  desc.name = name;
  desc.dtype = packed.dtype();
  desc.shape = node->shape;
  desc.kind = BufferKind::Constant;
  desc.node = node;
  kg.buffer_of[node] = desc.id;
  kg.buffers.push_back(desc);
  return desc.id;
}

// The memo's key of one packing: the weight's bytes, the side, the panel layout and every
// offset the copy reads.
// (The weight's identity last: layout_of strips it for the pack cache's key.)
std::string pack_key(char side, const HostTensor& data, DType dt, int64_t g, int64_t kc, int64_t w, int64_t c0,
                     const std::vector<int64_t>& outer, const std::vector<int64_t>& koff) {
  std::string key(1, side);
  key.reserve(1 + 8 * (10 + outer.size() + koff.size()));
  auto put = [&](int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<int64_t>(data.nbytes()));
  put(static_cast<int64_t>(data.dtype()));
  put(static_cast<int64_t>(dt));
  for (int64_t v : {g, kc, w, c0, static_cast<int64_t>(outer.size())}) put(v);
  for (int64_t v : outer) put(v);
  for (int64_t v : koff) put(v);
  put(static_cast<int64_t>(reinterpret_cast<uintptr_t>(data.identity())));
  return key;
}

// The packed weights' cache on disk (tensor_cache.h), for the build's packings (memo set)
// of at least kPackCacheMinBytes: a smaller copy packs faster than its file is found, mapped
// and checked. Its key: the weight's model file and offset where it lies unchanged in one
// (file_identity: a rewritten file is another), else every byte of the weight (content_digest:
// a weight changed anywhere is packed again), the layout (the memo key without the weight's address), the format of
// this file's packings (bump kPackFormat when a layout changes) and the CPU.
constexpr int64_t kPackCacheMinBytes = int64_t(256) << 10;
constexpr const char* kPackFormat = "lathe-packed-weight-1";

std::string disk_key(PackMemo* memo, const HostTensor& data, const std::string& key, int64_t packed_bytes) {
  if (!memo || packed_bytes < kPackCacheMinBytes || !tensor_cache_enabled()) return "";
  // each weight digested once per build (one weight, several layouts: the memo keeps it alive)
  std::string& digest = memo->digests[{data.identity(), data.nbytes()}];
  if (digest.empty()) {
    // a weight where it lies in its model file: the file's identity and the offset
    // (mapped_file.h; 0.5 GB not read on GPT-2's warm start); else every byte
    const std::string file = data.recomputable() ? "" : file_identity(data.bytes(), data.nbytes());
    digest = file.empty() ? content_digest(data.bytes(), data.nbytes()) : "file " + file;
  }
  const std::string_view layout(key.data(), key.size() - 8);
  return cache_key({kPackFormat, cpu_model(), digest, layout});
}

// The copy under dkey in the pack cache, mapped, or an undefined tensor (dkey empty: not used).
HostTensor packed_on_disk(PackMemo* memo, const std::string& dkey, DType dt, const std::vector<int64_t>& shape) {
  if (dkey.empty()) return {};
  HostTensor t = tensor_cache_load(dkey, dt, shape);
  if (t.defined()) ++memo->from_disk;
  return t;
}

// Packs with `pack` unless the pack cache has the copy; a fresh copy is stored there.
template <class F>
HostTensor cached_or_packed(PackMemo* memo, const HostTensor& data, const std::string& key, DType dt,
                            const std::vector<int64_t>& shape, F pack) {
  int64_t bytes = static_cast<int64_t>(dtype_size(dt));
  for (int64_t d : shape) bytes *= d;
  const std::string dkey = disk_key(memo, data, key, bytes);
  HostTensor t = packed_on_disk(memo, dkey, dt, shape);
  if (t.defined()) return t;
  t = pack();
  if (!dkey.empty()) tensor_cache_store_later(dkey, t);
  return t;
}

// The copy packed before under this key (memo may be null), or an undefined tensor.
HostTensor packed_before(const PackMemo* memo, const std::string& key) {
  if (!memo) return {};
  auto it = memo->packed.find(key);
  return it == memo->packed.end() || !it->second ? HostTensor() : *it->second->attrs.data;
}
HostTensor packed_before(PackMemo* memo, const std::string& key) {
  HostTensor t = packed_before(static_cast<const PackMemo*>(memo), key);
  if (t.defined()) ++memo->reused;
  return t;
}

// Few rows share each element of B per run (a transformer's projections at T = 128 tokens:
// M = 128): the per-run copy of B, which streams the weight from memory without a multiply
// to hide it behind, is a large share of the kernel at any size (BERT-base: 13% of its kernels'
// CPU time). M x batch static and at most kPrepackFewRows; LATHE_PREPACK=large keeps only the
// size rule (A/B runs).
bool few_rows_per_weight(const MatmulMatch& mm) {
  if (const char* e = std::getenv("LATHE_PREPACK"); e && std::string(e) == "large") return false;
  const Shape& s = mm.mul->shape;
  int64_t rows = 1;
  for (const std::vector<int>* g : {&mm.m_axes, &mm.batch_axes})
    for (int d : *g) {
      if (!s[d].is_const()) return false;
      rows *= s[d].value();
    }
  return rows <= kPrepackFewRows;
}

}  // namespace

namespace {

// only >= 0: that kernel alone (repack_for)
std::atomic<int64_t> deferred_packs{0};  // names the deferred copies' nodes apart

std::vector<int> prepack_b_impl(KernelGraph& kg, const MatmulParams& Phost, int64_t min_bytes, int64_t min_int8_bytes,
                                PackMemo* memo, int only) {
  std::vector<int> changed;
  std::map<int, int> readers = count_readers(kg);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  for (Kernel& k : kg.kernels) {
    if (only >= 0 && &k != &kg.kernels[only]) continue;
    if (k.kind != "matmul" || k.packed_b >= 0 || takes_direct_conv(kg, k.id, Phost.lanes)) continue;  // (no GEMM)
    auto mm = match_matmul(k.matmul ? k.matmul : k.root);
    if (!mm) continue;
    const MatmulParams P = conv_matmul_params(*mm, Phost);  // the tile the lowering takes
    // a late conv layer's weights on the B side: few rows (its positions) share each packed
    // element, so the per-run copy is a large share of the kernel at any size
    const bool few_rows = orient_matmul(*mm, P);
    const OperandAccess& B = mm->b;
    NodeRef src = B.src;
    const IntPanels ints = int_panels(*mm);
    if (src->op != Op::Const || !src->attrs.data || src->dtype != (ints.g ? src->dtype : DType::F32) || !B.bounds.empty()) continue;
    if (!B.addr.c0.is_const()) continue;
    const Shape& s = mm->mul->shape;
    const std::optional<PackedEntries> pe = packed_entries(*mm, B, s, ints.g != 0);
    if (!pe) continue;
    const std::vector<int>& baxes = pe->baxes;
    const std::vector<int64_t>& eoff = pe->eoff;
    const int64_t entries = static_cast<int64_t>(eoff.size());
    auto noff = offsets(B.addr, mm->n_axes, s), koff = offsets(B.addr, mm->k_axes, s);
    if (!noff || !koff) continue;
    const HostTensor& data = *src->attrs.data;
    // int8 weights: packed at any size (min_int8_bytes): their per-run packing widens and
    // interleaves every element, a large share of the kernel for few rows
    if (static_cast<int64_t>(data.nbytes()) < (ints.g ? min_int8_bytes : min_bytes) && !few_rows &&
        !(few_rows_per_weight(*mm) && static_cast<int64_t>(data.nbytes()) >= kPrepackFewRowsMinBytes))
      continue;
    const int64_t N = noff->size(), K = koff->size(), total = data.numel(), c0 = B.addr.c0.value();
    const int64_t kc = matmul_blocking(-1, N, K, -1, threads, kc_for_group(P, ints.g)).kc, nr = P.nr;
    const int64_t panels = (N + nr - 1) / nr, kblocks = (K + kc - 1) / kc;
    // every address in range (the access is affine and non-negative at the corners)
    if (!reads_within(c0, *noff, *koff, eoff, total)) continue;
    if (ints.g) {
      if (kc % ints.g != 0) continue;
      const std::string key = pack_key('b', data, ints.b, ints.g, kc, nr, c0, *noff, *koff);
      HostTensor packed = packed_before(memo, key);
      if (!packed.defined())
        packed = cached_or_packed(memo, data, key, ints.b, {kblocks, panels, kc, nr},
                                  [&] { return pack_int8(data, ints.b, ints.g, N, K, kc, nr, c0, *noff, *koff); });
      k.packed_b = add_packed_buffer(kg, packed, "packed_" + kg.buffers[kg.buffer_of.at(src)].name, memo, key);
      k.packed_kc = kc;
      k.packed_nr = nr;
      changed.push_back(k.id);
      if (readers[kg.buffer_of.at(src)] == 1 && mm->a.src != src) page_out(data);
      continue;
    }
    // (batched: entry e's copy at e · kblocks · panels · KC · NR, read at c0 + eoff[e])
    std::vector<int64_t> outer = *noff;
    if (!baxes.empty()) outer.insert(outer.end(), eoff.begin(), eoff.end());
    const std::string key = pack_key(baxes.empty() ? 'b' : 'B', data, DType::F32, 0, kc, nr, c0, outer, *koff);
    const int64_t per = kblocks * panels * kc * nr;  // one entry's elements
    HostTensor packed = packed_before(memo, key);
    // a weight read by this kernel alone is read only through its packed copy: its pages go
    // back once it is packed, so the two never both count (peak memory)
    const bool sole = readers[kg.buffer_of.at(src)] == 1 && mm->a.src != src;
    const std::vector<int64_t> shape = baxes.empty() ? std::vector<int64_t>{per} : std::vector<int64_t>{entries, per};
    const std::string dkey = packed.defined() ? "" : disk_key(memo, data, key, entries * per * 4);
    if (!packed.defined()) packed = packed_on_disk(memo, dkey, DType::F32, shape);
    if (!packed.defined()) {
      // the copy, by value: it may run later, on another thread (PackMemo::defer)
      auto fill = [data, noff = *noff, koff = *koff, eoff, N, K, kc, nr, c0, panels, kblocks, per, threads, sole](void* dst) {
        for (size_t e = 0; e < eoff.size(); ++e) {
        float* out = static_cast<float*>(dst) + static_cast<int64_t>(e) * per;
        const std::byte* b = data.bytes() + 4 * eoff[e];  // (a deferred weight's bytes in its file: not copied)
        // the threads take equal ranges of panels; each goes through its range 64 panels at a
        // time, row by row of B (reads in address order, writes within 64 panels' KC block)
        // B read across its rows (W^T: consecutive k adjacent, columns a row apart, a conv's
        // weights after the swap): panel by panel, each of its NR rows read along k in address
        // order into the panel's KC block (16 KB, in L1); row by row of B would touch a page
        // per column for every k.
        const bool k_contiguous = K > 1 && N > 1 && (koff)[1] - (koff)[0] == 1 && (noff)[1] - (noff)[0] != 1;
        // A weight laid out plainly (every k and n at a fixed step from the first, the usual
        // [K, N] or [N, K] tensor): whole runs copied or transposed, not element by element
        // through the offset tables (GPT-2's 768 x 50257 projection took ~40% of its start's
        // packing time so).
        const std::optional<int64_t> kstep = uniform_step(koff), nstep = uniform_step(noff);
        auto pack_by_panel = [&](int64_t p_begin, int64_t p_end) {
          if (k_contiguous && kstep == int64_t(1) && nstep) {
            for (int64_t jp = p_begin; jp < p_end; ++jp)
              for (int64_t pc = 0; pc < kblocks; ++pc)
                transpose_panel(b + 4 * (c0 + jp * nr * *nstep + pc * kc), *nstep, std::min(nr, N - jp * nr), std::min(kc, K - pc * kc),
                                out + (pc * panels + jp) * kc * nr, nr);
            return;
          }
          for (int64_t jp = p_begin; jp < p_end; ++jp)
            for (int64_t c = 0, n = jp * nr; c < nr && n < N; ++c, ++n)
              for (int64_t pc = 0; pc < kblocks; ++pc) {
                float* blk = out + (pc * panels + jp) * kc * nr + c;
                for (int64_t kk = 0; kk < kc && pc * kc + kk < K; ++kk) blk[kk * nr] = ldf(b, c0 + (koff)[pc * kc + kk] + (noff)[n]);
              }
        };
        auto pack = [&](int64_t p_begin, int64_t p_end) {
          if (k_contiguous) return pack_by_panel(p_begin, p_end);
          if (nstep == int64_t(1) && kstep) {  // [K, N]: each k's columns of a panel are one run
            for (int64_t pc = 0; pc < kblocks; ++pc)
              for (int64_t kk = 0; kk < kc && pc * kc + kk < K; ++kk) {
                const std::byte* krow = b + 4 * (c0 + (pc * kc + kk) * *kstep);
                for (int64_t jp = p_begin; jp < p_end; ++jp)
                  std::memcpy(out + ((pc * panels + jp) * kc + kk) * nr, krow + 4 * jp * nr,
                              sizeof(float) * static_cast<size_t>(std::min(nr, N - jp * nr)));
              }
            return;
          }
          for (int64_t g = p_begin; g < p_end; g += 64)
            for (int64_t pc = 0; pc < kblocks; ++pc)
              for (int64_t kk = 0; kk < kc && pc * kc + kk < K; ++kk) {
                int64_t krow = c0 + (koff)[pc * kc + kk];
                for (int64_t jp = g; jp < std::min(g + 64, p_end); ++jp) {
                  float* row = out + ((pc * panels + jp) * kc + kk) * nr;
                  for (int64_t c = 0, n = jp * nr; c < nr && n < N; ++c, ++n) row[c] = ldf(b, krow + (noff)[n]);
                }
              }
        };
        const int64_t workers = std::min<int64_t>(threads, (panels + 63) / 64);
        std::vector<std::thread> pool;
        for (int64_t w = 1; w < workers; ++w) pool.emplace_back(pack, panels * w / workers, panels * (w + 1) / workers);
        pack(0, panels / std::max<int64_t>(workers, 1));
        for (auto& t : pool) t.join();
        }
        if (sole) page_out(data);
      };
      PackFiller* filler = current_pack_filler();
      if (filler && entries * per * 4 >= kDeferPackMinBytes) {
        // filled on the filler's thread (pack_defer.h); its node named apart from every other.
        // Mapped read-only with the zero page in every entry (one call, nothing allocated), so
        // the node's content hash reads its zeros without a fault per page; the filler makes it
        // writable, and each of its writes is then a copy-on-write fault (with a TLB shootdown
        // to the build's other threads: GPT-2's cold start +300 ms CPU, load 4-6). Allocating
        // the pages here instead (MAP_POPULATE, writable) kept the build thread as long as
        // packing it there (prepack 885-924 ms against 999-1076).
        const size_t bytes = static_cast<size_t>(entries * per) * 4;
        void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (m == MAP_FAILED) throw UserError("out of memory packing weight " + kg.buffers[kg.buffer_of.at(src)].name);
        packed = HostTensor(DType::F32, shape,
                            std::shared_ptr<std::byte[]>(static_cast<std::byte*>(m), [bytes](std::byte* q) { ::munmap(q, bytes); }));
        k.packed_b = add_packed_buffer(kg, packed, "packed_" + kg.buffers[kg.buffer_of.at(src)].name, memo, key,
                                       "deferred-pack-" + std::to_string(++deferred_packs));
        filler->push([packed, fill, bytes, dkey]() mutable {
          if (::mprotect(packed.data(), bytes, PROT_READ | PROT_WRITE) != 0)
            throw UserError("cannot make a packed weight writable");
          fill(packed.data());
          if (!dkey.empty()) tensor_cache_store_later(dkey, packed);
        });
        k.packed_kc = kc;
        k.packed_nr = nr;
        changed.push_back(k.id);
        continue;
      }
      packed = HostTensor(DType::F32, shape);
      fill(packed.data());
      if (!dkey.empty()) tensor_cache_store_later(dkey, packed);
    } else if (sole) {
      page_out(data);
    }
    k.packed_b = add_packed_buffer(kg, packed, "packed_" + kg.buffers[kg.buffer_of.at(src)].name, memo, key);
    k.packed_kc = kc;
    k.packed_nr = nr;
    changed.push_back(k.id);
  }
  return changed;
}

std::vector<int> prepack_a_impl(KernelGraph& kg, const MatmulParams& Phost, int64_t max_n, int64_t max_bytes,
                                int64_t max_int8_bytes, int64_t few_n, int64_t few_n_max_bytes, PackMemo* memo, int only) {
  std::vector<int> changed;
  std::map<int, int> readers = count_readers(kg);
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  for (Kernel& k : kg.kernels) {
    if (only >= 0 && &k != &kg.kernels[only]) continue;
    if (k.kind != "matmul" || packed_a_buffer(kg, k) >= 0 || takes_direct_conv(kg, k.id, Phost.lanes)) continue;
    auto mm = match_matmul(k.matmul ? k.matmul : k.root);
    if (!mm) continue;
    const MatmulParams P = conv_matmul_params(*mm, Phost);  // the tile the lowering takes
    orient_matmul(*mm, P);  // the sides the lowering uses
    const OperandAccess& A = mm->a;
    NodeRef src = A.src;
    const IntPanels ints = int_panels(*mm);
    if (src->op != Op::Const || !src->attrs.data || src->dtype != (ints.g ? src->dtype : DType::F32) || !A.bounds.empty()) continue;
    if (!A.addr.c0.is_const()) continue;
    const Shape& s = mm->mul->shape;
    const std::optional<PackedEntries> pe = packed_entries(*mm, A, s, ints.g != 0);
    if (!pe) continue;
    const std::vector<int>& baxes = pe->baxes;
    const std::vector<int64_t>& eoff = pe->eoff;
    const int64_t entries = static_cast<int64_t>(eoff.size());
    auto moff = offsets(A.addr, mm->m_axes, s), koff = offsets(A.addr, mm->k_axes, s);
    SymInt Ns = 1, Bs = 1;
    for (int d : mm->n_axes) Ns = Ns * s[d];
    for (int d : mm->batch_axes) Bs = Bs * s[d];
    if (!moff || !koff || !Ns.is_const() || Ns.value() > max_n) continue;
    const HostTensor& data = *src->attrs.data;
    const int64_t M = moff->size(), K = koff->size(), total = data.numel(), c0 = A.addr.c0.value();
    // (few columns: each packed element serves few of them per run, any size up to few_n_max_bytes)
    const int64_t cap = std::max(ints.g ? max_int8_bytes : max_bytes, Ns.value() <= few_n ? few_n_max_bytes : 0);
    if (entries * M * K * static_cast<int64_t>(ints.g ? dtype_size(ints.a) : sizeof(float)) > cap) continue;
    // the blocks the lowering will choose (it uses the packed copy only when KC agrees)
    // (the saturating pairs' rows: those whose tile fits the registers, as the lowering fits them)
    const MatmulParams Pk = mm->sat16 ? sat16_params(P, Ns.value()) : P;
    // (B packed on every run, f32: the lowering's cut of KC for its block, matmul_blocking)
    const int b_run_bytes = !ints.g && packs_b_window_whole(*mm, Pk) ? 4 : 0;
    const MatmulBlocking bl = matmul_blocking(M, Ns.value(), K, Bs.is_const() ? Bs.value() : -1, threads,
                                              kc_for_group(Pk, ints.g), false, 1, b_run_bytes);
    const int64_t kc = bl.kc, mr = Pk.mr;
    if (kc <= 0 || bl.mc % mr != 0) continue;
    const int64_t panels = (M + mr - 1) / mr, kblocks = (K + kc - 1) / kc;
    if (!reads_within(c0, *moff, *koff, eoff, total)) continue;
    if (ints.g) {  // int8: the interleaved groups of the integer panels (pack_int8)
      if (kc % ints.g != 0) continue;
      const std::string key = pack_key('a', data, ints.a, ints.g, kc, mr, c0, *moff, *koff);
      HostTensor packed = packed_before(memo, key);
      if (!packed.defined())
        packed = cached_or_packed(memo, data, key, ints.a, {kblocks, panels, kc, mr},
                                  [&] { return pack_int8(data, ints.a, ints.g, M, K, kc, mr, c0, *moff, *koff); });
      add_packed_buffer(kg, packed, "packed_a_" + k.name, memo, key);
      changed.push_back(k.id);
      if (readers[kg.buffer_of.at(src)] == 1 && mm->b.src != src) page_out(data);
      continue;
    }
    //   packed[((pc · panels + ip) · KC + kk) · MR + r] = A[m = ip·MR + r, k = pc·KC + kk], zero outside
    // (batched: entry e's copy at e · kblocks · panels · KC · MR, read at c0 + eoff[e])
    std::vector<int64_t> outer = *moff;
    if (!baxes.empty()) outer.insert(outer.end(), eoff.begin(), eoff.end());
    const std::string key = pack_key(baxes.empty() ? 'a' : 'A', data, DType::F32, 0, kc, mr, c0, outer, *koff);
    HostTensor packed = packed_before(memo, key);
    const std::vector<int64_t> shape =
        baxes.empty() ? std::vector<int64_t>{kblocks, panels, kc, mr} : std::vector<int64_t>{entries, kblocks, panels, kc, mr};
    const std::string dkey = packed.defined() ? "" : disk_key(memo, data, key, entries * kblocks * panels * kc * mr * 4);
    if (!packed.defined()) packed = packed_on_disk(memo, dkey, DType::F32, shape);
    if (!packed.defined()) {
      packed = HostTensor(DType::F32, shape);
      auto pack_entries = [&, eoff, moff = *moff, koff = *koff](int64_t e_begin, int64_t e_end) {
      for (int64_t e = e_begin; e < e_end; ++e) {
      const std::byte* a = data.bytes() + 4 * eoff[e];
      float* out = packed.ptr<float>() + e * kblocks * panels * kc * mr;
      // each row of a panel is read along k (a convolution's weights: in address order) into
      // its KC block, MR floats apart
      auto pack = [&](int64_t p_begin, int64_t p_end) {
        std::fill(out + p_begin * kc * mr, out + p_end * kc * mr, 0.0f);  // the first K block's
        for (int64_t pc = 0; pc < kblocks; ++pc) {
          const int64_t kend = std::min(kc, K - pc * kc);
          const int64_t* ko = koff.data() + pc * kc;
          for (int64_t ip = p_begin; ip < p_end; ++ip) {
            float* blk = out + (pc * panels + ip) * kc * mr;
            if (pc > 0) std::fill(blk, blk + kc * mr, 0.0f);
            for (int64_t r = 0, m = ip * mr; r < mr && m < M; ++r, ++m) {
              const std::byte* row = a + 4 * (c0 + moff[m]);
              for (int64_t kk = 0; kk < kend; ++kk) blk[kk * mr + r] = ldf(row, ko[kk]);
            }
          }
        }
      };
      pack(0, panels);
      }
      };
      // one entry per thread at most, and a thread only for at least 2 MiB packed (Winograd's
      // U per ξ of a 256-channel layer and up: 16 · 256 · 256 floats): a small weight
      // stays on this thread (a thread's start costs more under load)
      const int64_t bytes = entries * kblocks * panels * kc * mr * 4;
      const int64_t workers = std::max<int64_t>(1, std::min<int64_t>({threads, entries, bytes >> 21}));
      std::vector<std::thread> pool;
      for (int64_t w = 1; w < workers; ++w) pool.emplace_back(pack_entries, entries * w / workers, entries * (w + 1) / workers);
      pack_entries(0, entries / workers);
      for (auto& t : pool) t.join();
      if (!dkey.empty()) tensor_cache_store_later(dkey, packed);
    }
    add_packed_buffer(kg, packed, "packed_a_" + k.name, memo, key);
    changed.push_back(k.id);
    if (readers[kg.buffer_of.at(src)] == 1 && mm->b.src != src) page_out(data);
  }
  return changed;
}

}  // namespace

std::vector<int> prepack_constant_b(KernelGraph& kg, const MatmulParams& P, int64_t min_bytes, int64_t min_int8_bytes,
                                    PackMemo* memo) {
  return prepack_b_impl(kg, P, min_bytes, min_int8_bytes, memo, -1);
}

std::vector<int> prepack_constant_a(KernelGraph& kg, const MatmulParams& P, int64_t max_n, int64_t max_bytes,
                                    int64_t max_int8_bytes, int64_t few_n, int64_t few_n_max_bytes, PackMemo* memo) {
  return prepack_a_impl(kg, P, max_n, max_bytes, max_int8_bytes, few_n, few_n_max_bytes, memo, -1);
}

bool repack_for(KernelGraph& kg, int kernel, const MatmulParams& P) {
  Kernel& k = kg.kernels.at(kernel);
  const int old_a = packed_a_buffer(kg, k), old_b = k.packed_b;
  if (old_a < 0 && old_b < 0) return false;  // the build packs nothing here: the candidate neither
  const int64_t old_kc = k.packed_kc, old_nr = k.packed_nr;
  const size_t nbuf = kg.buffers.size();
  // the build's packings out of the lowering's sight (still there: other kernels may share them)
  k.packed_b = -1;
  const std::string a_name = old_a >= 0 ? kg.buffers[old_a].name : "";
  if (old_a >= 0) kg.buffers[old_a].name += "~heuristic";
  // packed as the build packs them, with P's blocks (a weight the build packed is packed at
  // any size: its size qualified it, whatever the blocks)
  prepack_b_impl(kg, P, old_b >= 0 ? 0 : prepack_min_bytes(), 0, nullptr, kernel);
  prepack_a_impl(kg, P, kPrepackAMaxN, old_a >= 0 ? INT64_MAX : kPrepackAMaxBytes, kPrepackAInt8MaxBytes, kPrepackAFewN,
                 old_a >= 0 ? INT64_MAX : kPrepackAFewNMaxBytes, nullptr, kernel);
  const int new_a = packed_a_buffer(kg, k);
  // the same layouts as before (P's blocks come to the heuristic's): keep the build's copies
  const bool same_b = (old_b < 0) == (k.packed_b < 0) && (old_b < 0 || (k.packed_kc == old_kc && k.packed_nr == old_nr &&
                                                                         kg.buffers[k.packed_b].dtype == kg.buffers[old_b].dtype));
  const bool same_a = (old_a < 0) == (new_a < 0) &&
                      (old_a < 0 || (kg.buffers[new_a].shape == kg.buffers[old_a].shape && kg.buffers[new_a].dtype == kg.buffers[old_a].dtype));
  if (same_a && same_b) {
    for (size_t b = nbuf; b < kg.buffers.size(); ++b) kg.buffer_of.erase(kg.buffers[b].node);
    kg.buffers.resize(nbuf);
    k.packed_b = old_b;
    k.packed_kc = old_kc;
    k.packed_nr = old_nr;
    if (old_a >= 0) kg.buffers[old_a].name = a_name;
    return false;
  }
  return true;
}

int packed_a_buffer(const KernelGraph& kg, const Kernel& k) {
  const std::string name = "packed_a_" + k.name;
  for (const BufferDesc& b : kg.buffers)
    if (b.kind == BufferKind::Constant && b.name == name && (b.shape.size() == 4 || b.shape.size() == 5)) return b.id;
  return -1;
}

std::vector<int> packed_batch_axes(const MatmulMatch& mm, const OperandAccess& x) {
  std::vector<int> axes;
  for (int d : mm.batch_axes)
    if (x.uses(d)) axes.push_back(d);
  return axes;
}

bool prepack_batched_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LATHE_PREPACK_BATCHED");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

int64_t prepack_min_bytes() {
  int64_t llc = last_level_cache_bytes();
  return llc > 0 ? llc : int64_t(32) << 20;
}

}  // namespace lathe::loop
