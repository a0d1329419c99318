// rnn_pack_cache.h — packed copies of the constant weights of the CPU recurrence kernel
// (library_rnn.cpp: RT by blocks of 16 units, WT by 16-column strips), made once per process.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "core/ir/node.h"

namespace lathe {

// A packed copy of a weight that is a constant of the program (a Const node: nodes are
// immutable and never freed, so its values at this address are those of the first call),
// made by `pack` on the first call and kept for the process, as the matmuls' constant
// operands are packed once when a program is built (core/loop/prepack.h); nullptr for a
// weight computed at run time (an input), or past 256 MiB of packed weights. `key` tells
// apart the layouts of one weight; `floats`: the copy's size.
const float* cached_pack(NodeRef node, const float* src, std::vector<int64_t> key, size_t floats,
                         const std::function<void(float*)>& pack);

// Buffers for packed weights and scratch, kept between calls: a fresh allocation of that size
// is pages the kernel maps and zeroes again on every call (measured: a 3x slower median at
// load 9). 64-byte aligned; take() returns nullptr when out of memory.
class PackPool {
 public:
  static PackPool& get();
  float* take(size_t bytes);
  void give(float* f, size_t bytes);

 private:
  std::mutex mu_;
  std::vector<std::pair<size_t, float*>> free_;
};

// A buffer of the pool held for the length of one call (the projections' scratch, RT by strips
// or blocks): take() rounds the size up to whole 64-byte lines and fails loudly when out of
// memory, the destructor gives it back.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  ~PoolBuffer();
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  // `floats` floats (once per buffer); `what` names them in the error ("the input projections")
  float* take(size_t floats, const char* what);
  float* get() const { return p_; }

 private:
  float* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lathe
