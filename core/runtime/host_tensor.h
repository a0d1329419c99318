// host_tensor.h — a dense, row-major tensor in host memory: the value type that flows
// between the interpreter, backends, .npy files, Lua and the ONNX loader.
//
// Storage is shared (copying a HostTensor shares its bytes; clone() copies) and 64-byte
// aligned so vectorized kernels can read it directly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/dtype.h"

namespace lathe {

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);  // zero-filled
  // Wraps bytes that already hold the values (at least nbytes, aligned for the dtype)
  // without copying; `storage` keeps them alive (e.g. an aliasing pointer into a mapping).
  HostTensor(DType dtype, std::vector<int64_t> shape, std::shared_ptr<std::byte[]> storage);

  // A tensor whose values are the `nbytes()` bytes at `source` (any alignment; `keep` keeps
  // them alive: a model file's mapping), copied into aligned storage by `fill` on the first
  // data() / ptr() and shared from then on by every copy of the tensor. Until then nothing
  // is allocated: a weight that the build packs straight from `source` (prepack.cpp) and
  // no kernel reads is never copied (an ONNX initializer that is unaligned in its file).
  static HostTensor deferred(DType dtype, std::vector<int64_t> shape, const std::byte* source,
                             std::shared_ptr<const void> keep, std::function<void(void* dst)> fill);
  // A tensor whose values `fill` computes (from data it captures: Winograd's U from its
  // weights) on the first data() / ptr() / bytes(), and again after release(). Until then
  // nothing is allocated.
  static HostTensor computed(DType dtype, std::vector<int64_t> shape, std::function<void(void* dst)> fill);
  // Whether this is a computed() tensor: its storage may be released and computed again.
  bool recomputable() const;
  // A computed() tensor's storage freed (every copy's: they share it); the next data(),
  // ptr() or bytes() computes the values again. Returns the bytes freed (0 when it was not
  // materialized or is not recomputable). Pointers taken from data() before are invalid
  // after: call it only where nothing holds one (prepack.cpp: a weight that every kernel of
  // the program reads through its packed copy; executors take data() again on every bind).
  size_t release() const;
  // Which values these are, without computing or copying them: bytes() for a tensor that
  // has its bytes (stored or a file's), the shared state for a computed() one (stable across
  // release()). For memo keys (prepack.cpp), never to read through.
  const void* identity() const;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool defined() const { return storage_ != nullptr || deferred_ != nullptr; }

  // Aligned for the dtype (a deferred tensor is filled here, once; thread-safe).
  void* data() { return storage_ ? storage_.get() : fill(); }
  const void* data() const { return storage_ ? storage_.get() : fill(); }
  // The values' bytes without filling a deferred tensor: data() once it is filled, else its
  // source, which may be unaligned for the dtype (read it with memcpy or unaligned loads).
  // A computed() tensor has no source: computed here.
  const std::byte* bytes() const;
  // Whether the values are in aligned storage already (false only for a deferred tensor
  // that nothing has asked for data() yet).
  bool materialized() const;
  template <class T> T* ptr() { return static_cast<T*>(data()); }
  template <class T> const T* ptr() const { return static_cast<const T*>(data()); }

  // Element access by flat index, converting through double / int64 (exact for every
  // dtype's range where the target can hold it).
  double get_f64(int64_t i) const;
  int64_t get_i64(int64_t i) const;
  void set_f64(int64_t i, double v);   // float->int conversion as Cast does
  void set_i64(int64_t i, int64_t v);

  HostTensor clone() const;
  HostTensor reshaped(std::vector<int64_t> shape) const;  // shares storage; numel must match
  std::string shape_string() const;  // "[4, 784]"
  // Content hash (dtype, shape, bytes), for hash-consing tensor constants and caches.
  size_t content_hash() const;
  bool same_content(const HostTensor& o) const;

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte[]> storage_;
  struct Deferred;
  std::shared_ptr<Deferred> deferred_;  // set only for deferred(); then storage_ is null
  std::byte* fill() const;
};

// Float conversion used by Cast and set_f64 for integer targets: truncate toward zero,
// saturate to the type's range, NaN -> 0.
int64_t float_to_int_saturating(double v, DType target);
// Wraps an int64 into the given integer dtype's range (two's complement), as C would.
int64_t wrap_int(int64_t v, DType t);

}  // namespace lathe
