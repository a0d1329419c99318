// rnn_pack_cache.cpp — see rnn_pack_cache.h.
#include "backends/rnn_pack_cache.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

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

}  // namespace lathe
