// host_tensor.h — a dense, row-major tensor in host memory: the value type that flows
// between the interpreter, backends, .npy files, Lua and the ONNX loader.
//
// Storage is shared (copying a HostTensor shares its bytes; clone() copies) and 64-byte
// aligned so vectorized kernels can read it directly.
#pragma once
#include <cstddef>
#include <cstdint>
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

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }
  bool defined() const { return storage_ != nullptr; }

  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
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
};

// Float conversion used by Cast and set_f64 for integer targets: truncate toward zero,
// saturate to the type's range, NaN -> 0.
int64_t float_to_int_saturating(double v, DType target);
// Wraps an int64 into the given integer dtype's range (two's complement), as C would.
int64_t wrap_int(int64_t v, DType t);

}  // namespace lathe
