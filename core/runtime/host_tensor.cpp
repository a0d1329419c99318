// host_tensor.cpp — storage, element access and conversions.
#include "core/runtime/host_tensor.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>

#include "core/ir/diag.h"
#include "core/runtime/mapped_file.h"

namespace lathe {

namespace {
constexpr size_t kMapThreshold = size_t(1) << 20;

// Zeroed, 64-byte aligned. Large blocks come straight from mmap: the kernel's zero pages
// cost nothing until written, so a buffer that is filled at once is touched once.
std::shared_ptr<std::byte[]> alloc_aligned(size_t n, const std::string& shape) {
  size_t sz = (std::max<size_t>(n, 1) + 63) / 64 * 64;
  if (sz >= kMapThreshold) {
    check_memory(sz, "a tensor of shape " + shape);
    void* p = ::mmap(nullptr, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw UserError("out of memory allocating a tensor of shape " + shape + " (" + format_bytes(n) + ")");
    return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [sz](std::byte* q) { ::munmap(q, sz); });
  }
  void* p = std::aligned_alloc(64, sz);
  if (!p) throw UserError("out of memory allocating a tensor of shape " + shape + " (" + format_bytes(n) + ")");
  std::memset(p, 0, sz);
  return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

int64_t checked_numel(const std::vector<int64_t>& shape, const std::string& text) {
  int64_t numel = 1;
  for (auto d : shape) {
    if (d < 0) throw UserError("negative dimension " + std::to_string(d) + " in tensor shape");
    if (d != 0 && numel > (int64_t(1) << 40) / d)
      throw UserError("tensor of shape " + text + " is too large (over 2^40 elements)");
    numel *= d;
  }
  return numel;
}
}  // namespace

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = checked_numel(shape_, shape_string());
  storage_ = alloc_aligned(nbytes(), shape_string());
}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<std::byte[]> storage)
    : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = checked_numel(shape_, shape_string());
  LATHE_CHECK(storage != nullptr || nbytes() == 0, "HostTensor: wrapped storage is null");
  LATHE_CHECK(reinterpret_cast<uintptr_t>(storage.get()) % dtype_size(dtype_) == 0,
              "HostTensor: wrapped storage is not aligned for its dtype");
  storage_ = storage ? std::move(storage) : alloc_aligned(0, shape_string());
}

struct HostTensor::Deferred {
  const std::byte* source = nullptr;
  std::shared_ptr<const void> keep;
  std::function<void(void*)> fill;
  bool computed = false;  // computed(): no source, and release() may free the storage
  std::mutex mu;          // guards filling and release()
  std::atomic<std::byte*> ready{nullptr};
  std::shared_ptr<std::byte[]> storage;
};

HostTensor HostTensor::deferred(DType dtype, std::vector<int64_t> shape, const std::byte* source,
                                std::shared_ptr<const void> keep, std::function<void(void* dst)> fill) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = checked_numel(t.shape_, t.shape_string());
  t.deferred_ = std::make_shared<Deferred>();
  t.deferred_->source = source;
  t.deferred_->keep = std::move(keep);
  t.deferred_->fill = std::move(fill);
  return t;
}

HostTensor HostTensor::computed(DType dtype, std::vector<int64_t> shape, std::function<void(void* dst)> fill) {
  HostTensor t = deferred(dtype, std::move(shape), nullptr, nullptr, std::move(fill));
  t.deferred_->computed = true;
  return t;
}

bool HostTensor::recomputable() const { return deferred_ && deferred_->computed; }

size_t HostTensor::release() const {
  if (!recomputable()) return 0;
  Deferred& d = *deferred_;
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.ready.load(std::memory_order_acquire)) return 0;
  d.ready.store(nullptr, std::memory_order_release);
  d.storage.reset();
  return nbytes();
}

const void* HostTensor::identity() const { return recomputable() ? static_cast<const void*>(deferred_.get()) : bytes(); }

std::byte* HostTensor::fill() const {
  if (!deferred_) return nullptr;
  Deferred& d = *deferred_;
  if (std::byte* p = d.ready.load(std::memory_order_acquire)) return p;
  std::lock_guard<std::mutex> lock(d.mu);
  if (std::byte* p = d.ready.load(std::memory_order_acquire)) return p;
  d.storage = alloc_aligned(nbytes(), shape_string());
  if (nbytes()) d.fill(d.storage.get());
  d.ready.store(d.storage.get(), std::memory_order_release);
  return d.storage.get();
}

const std::byte* HostTensor::bytes() const {
  if (storage_ || !deferred_) return storage_.get();
  if (std::byte* p = deferred_->ready.load(std::memory_order_acquire)) return p;
  return deferred_->computed ? fill() : deferred_->source;
}

bool HostTensor::materialized() const {
  return storage_ || !deferred_ || deferred_->ready.load(std::memory_order_acquire) != nullptr;
}

int64_t float_to_int_saturating(double v, DType t) {
  if (std::isnan(v)) return 0;
  if (t == DType::Bool) return v != 0;
  double lo, hi;
  switch (t) {
    case DType::U8: lo = 0; hi = 255; break;
    case DType::I8: lo = -128; hi = 127; break;
    case DType::I16: lo = -32768; hi = 32767; break;
    case DType::I32: lo = -2147483648.0; hi = 2147483647.0; break;
    case DType::U16: lo = 0; hi = 65535; break;
    case DType::U32: lo = 0; hi = 4294967295.0; break;
    case DType::U64:  // the bit pattern of the uint64 value
      if (v <= 0) return 0;
      if (v >= 18446744073709551616.0) return -1;
      return static_cast<int64_t>(static_cast<uint64_t>(std::trunc(v)));
    default:
      if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(std::trunc(v));
  }
  v = std::trunc(v);
  return static_cast<int64_t>(v < lo ? lo : v > hi ? hi : v);
}

int64_t wrap_int(int64_t v, DType t) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::U8: return static_cast<uint8_t>(v);
    case DType::I8: return static_cast<int8_t>(v);
    case DType::I16: return static_cast<int16_t>(v);
    case DType::I32: return static_cast<int32_t>(v);
    case DType::U16: return static_cast<uint16_t>(v);
    case DType::U32: return static_cast<uint32_t>(v);
    default: return v;
  }
}

double HostTensor::get_f64(int64_t i) const {
  const std::byte* p = static_cast<const std::byte*>(data());
  switch (dtype_) {
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] != 0;
    case DType::U8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::I16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::I64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::F16: return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F64: return reinterpret_cast<const double*>(p)[i];
    case DType::U16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::U32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::U64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
  }
  return 0;
}

int64_t HostTensor::get_i64(int64_t i) const {
  const std::byte* p = static_cast<const std::byte*>(data());
  switch (dtype_) {
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] != 0;
    case DType::U8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::I8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::I16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::I64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::U16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::U32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::U64: return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[i]);  // wraps above 2^63
    default: return float_to_int_saturating(get_f64(i), DType::I64);
  }
}

void HostTensor::set_f64(int64_t i, double v) {
  std::byte* p = static_cast<std::byte*>(data());
  switch (dtype_) {
    case DType::F16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); return;
    case DType::BF16: reinterpret_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); return;
    case DType::F32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); return;
    case DType::F64: reinterpret_cast<double*>(p)[i] = v; return;
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = (v != 0 || std::isnan(v)); return;
    default: set_i64(i, float_to_int_saturating(v, dtype_)); return;
  }
}

void HostTensor::set_i64(int64_t i, int64_t v) {
  std::byte* p = static_cast<std::byte*>(data());
  switch (dtype_) {
    case DType::Bool: reinterpret_cast<uint8_t*>(p)[i] = v != 0; return;
    case DType::U8: reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); return;
    case DType::I8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); return;
    case DType::I16: reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); return;
    case DType::I32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); return;
    case DType::I64: reinterpret_cast<int64_t*>(p)[i] = v; return;
    case DType::U16: reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); return;
    case DType::U32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); return;
    case DType::U64: reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); return;
    default: set_f64(i, static_cast<double>(v)); return;
  }
}

HostTensor HostTensor::clone() const {
  HostTensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data(), bytes(), nbytes());
  return t;
}

HostTensor HostTensor::reshaped(std::vector<int64_t> shape) const {
  HostTensor t = *this;
  int64_t n = 1;
  for (auto d : shape) n *= d;
  LATHE_CHECK(n == numel_, "HostTensor::reshaped: element count must not change");
  t.shape_ = std::move(shape);
  return t;
}

std::string HostTensor::shape_string() const {
  std::string r = "[";
  for (size_t i = 0; i < shape_.size(); ++i) r += (i ? ", " : "") + std::to_string(shape_[i]);
  return r + "]";
}

size_t HostTensor::content_hash() const {
  // FNV-1a-style over 8-byte words (a byte at a time cost ~1.3 ms per MiB of weights, 12% of
  // the lstm model's warm start), sampled for big tensors, mixed with dtype and shape.
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(dtype_);
  for (auto d : shape_) h = (h ^ static_cast<uint64_t>(d)) * 1099511628211ull;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes());
  const size_t n = nbytes(), words = n / 8;
  const size_t step = words > (1u << 17) ? words / (1u << 14) : 1;
  for (size_t i = 0; i < words; i += step) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    h = (h ^ w) * 1099511628211ull;
    h ^= h >> 29;
  }
  for (size_t i = 8 * words; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return static_cast<size_t>(h);
}

bool HostTensor::same_content(const HostTensor& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ &&
         ((storage_ && storage_ == o.storage_) || (deferred_ && deferred_ == o.deferred_) ||
          std::memcmp(bytes(), o.bytes(), nbytes()) == 0);
}

}  // namespace lathe
