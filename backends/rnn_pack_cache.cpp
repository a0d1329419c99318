// rnn_pack_cache.cpp — see rnn_pack_cache.h.
#include "backends/rnn_pack_cache.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "core/ir/diag.h"

namespace lathe {

const float* cached_pack(NodeRef node, const float* src, std::vector<int64_t> key, size_t floats,
                         const std::function<void(float*)>& pack) {
  if (node->op != Op::Const || !node->attrs.data) return nullptr;
  constexpr size_t kCacheBytes = size_t(256) << 20;
  struct Entry {
    std::unique_ptr<float, decltype(&std::free)> p{nullptr, &std::free};
  };
  static std::mutex* mu = new std::mutex;
  static auto* cache = new std::map<std::tuple<NodeRef, const float*, std::vector<int64_t>>, Entry>;
  static size_t total = 0;
  const size_t bytes = (sizeof(float) * floats + 63) / 64 * 64;
  std::lock_guard<std::mutex> lock(*mu);
  Entry& e = (*cache)[{node, src, std::move(key)}];
  if (!e.p) {
    if (total + bytes > kCacheBytes) return nullptr;
    e.p.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!e.p) return nullptr;
    pack(e.p.get());
    total += bytes;
  }
  return e.p.get();
}

PackPool& PackPool::get() {
  static PackPool* p = new PackPool;  // never destroyed: a late partner may return a buffer at exit
  return *p;
}

float* PackPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i)
      if (free_[i].first == bytes) {
        float* f = free_[i].second;
        free_.erase(free_.begin() + static_cast<long>(i));
        return f;
      }
  }
  return static_cast<float*>(std::aligned_alloc(64, bytes));
}

void PackPool::give(float* f, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back({bytes, f});
  if (free_.size() > 4) {
    std::free(free_.front().second);
    free_.erase(free_.begin());
  }
}

PoolBuffer::~PoolBuffer() {
  if (p_) PackPool::get().give(p_, bytes_);
}

float* PoolBuffer::take(size_t floats, const char* what) {
  LATHE_CHECK(p_ == nullptr, "PoolBuffer::take: the buffer is taken already");
  bytes_ = (sizeof(float) * floats + 63) / 64 * 64;
  p_ = PackPool::get().take(bytes_);
  LATHE_CHECK(p_ != nullptr, std::string("rnn: out of memory for ") + what);
  return p_;
}

}  // namespace lathe
