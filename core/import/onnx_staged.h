// onnx_staged.h — running an ONNX model whose shapes or control flow depend on run-time
// data: the staged executor.
//
// load_onnx() turns a model into one Graph, so everything that decides a shape (NonZero's
// count, Compress's condition, Unique, NonMaxSuppression, TopK's k, a Reshape's target, a
// Loop's trip count and condition) must be known at import time. StagedOnnx lifts that:
// every graph input stays a run-time input, and the model runs as a chain of segments.
//
//   * The importer lowers nodes in order into a segment. A node that needs a run-time
//     value to decide a shape (the importer's "dynamic shape input" case) is a boundary.
//     If all its inputs are known on the host (graph inputs, earlier segments' results),
//     it runs there at once, on the true data — the data-dependent ops through their own
//     lowering over constant inputs, a Loop or If by host-side control flow (below) — and
//     its outputs enter the segment as new inputs of their true size. Otherwise the
//     segment ends there: its outputs are the values live across the boundary.
//   * run() runs a segment (compiled through the SegmentRunner the caller gives, e.g. a
//     backend), keeps its results on the host, runs the pending boundary node, and imports
//     the next segment with those results bound as inputs of concrete shape: later ops see
//     the true size. A segment's program is cached by a key of the node positions already
//     done and the dtypes and shapes of its inputs — values never enter a program, so a new
//     input of a seen shape (or a NonZero that finds a seen count) reuses the compiled code.
//   * Loop: the body is a program of its own (a StagedOnnx graph run, so it may hold
//     boundaries itself), run by a host loop with iteration number, condition and carried
//     values as inputs; scan outputs stack on the host. Every iteration counts against
//     StagedOptions::max_loop_iterations (error naming the Loop); a negative trip count is
//     an error. A Loop or Scan (opset 9+) with a constant length too long for the importer
//     to unroll (onnx_needs_staged) runs the same way, Scan slicing its inputs on the host. If with a run-time condition runs the branch taken (its outputs may differ
//     in shape from the other branch's). Bodies nest at most 16 deep.
//   * A shape-deciding input known on the host (a Reshape's target, an Expand's shape, TopK's
//     k: a small integer tensor) does not force the node onto the host: it is bound as a
//     constant, the node lowers into the segment, and the values join the program's key.
//   * Caches are bounded (KeyedLru): imported segments, and the programs of the callers'
//     runners (lathe run, onnx-test --staged) keep the most recently used.
//   * Every tensor made on the host obeys OnnxOptions::max_elements. LATHE_STAGED_TRACE=1
//     prints each segment run, host op and Loop to stderr.
//
// Not staged: sequences and optionals crossing a boundary, boundary ops inside an
// unrolled (import-time) If / Scan body.
#pragma once
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/import/onnx_import.h"

namespace lathe {

using TensorMap = std::map<std::string, HostTensor>;  // as executor.h and interp.h

// Runs one segment program: g with the given inputs; key identifies g's structure (equal
// keys, equal graphs), so an implementation may cache a compiled program per key.
using SegmentRunner = std::function<TensorMap(const Graph& g, const std::string& key, const TensorMap& inputs)>;

// In an OnnxUnsupported message: a Loop or Scan with more iterations than the importer unrolls.
inline constexpr const char* kTooLongToUnroll = "too many to unroll";
// Whether a load_onnx failure's message means the model runs through the staged executor:
// a shape decided by run-time data, or a Loop / Scan too long to unroll.
bool onnx_needs_staged(const std::string& message);

// A map from segment keys to T that keeps at most `capacity` entries, dropping the least
// recently used: the staged executor's imported segments and the callers' compiled programs.
// A Loop whose carried values change shape every iteration makes a new key each time; its
// programs must not all stay alive.
template <class T>
class KeyedLru {
 public:
  explicit KeyedLru(size_t capacity) : cap_(capacity < 1 ? 1 : capacity) {}
  T* find(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  T& put(const std::string& key, T value) {
    if (T* v = find(key)) return *v = std::move(value);
    order_.emplace_front(key, std::move(value));
    map_[key] = order_.begin();
    if (order_.size() > cap_) {
      map_.erase(order_.back().first);
      order_.pop_back();
      ++evicted_;
    }
    return order_.front().second;
  }
  size_t size() const { return order_.size(); }
  size_t evicted() const { return evicted_; }

 private:
  size_t cap_, evicted_ = 0;
  std::list<std::pair<std::string, T>> order_;
  std::unordered_map<std::string, typename std::list<std::pair<std::string, T>>::iterator> map_;
};

struct StagedOptions {
  OnnxOptions onnx;                    // max_elements applies; fixed_inputs etc. are ignored
  int64_t max_loop_iterations = 1 << 16;  // over all iterations of one Loop node's run
};

struct StagedStats {
  int64_t segments = 0;     // segment programs run
  int64_t imports = 0;      // segments imported (the rest came from the import cache)
  int64_t host_ops = 0;     // nodes evaluated on the host (data-dependent ops, Loop, If)
  int64_t iterations = 0;   // Loop iterations run on the host
};

class StagedOnnx {
 public:
  StagedOnnx(const std::string& path, StagedOptions opt, SegmentRunner run);
  // The same from bytes in memory (fuzzing); `name` is used in messages.
  StagedOnnx(const void* data, size_t size, const std::string& name, StagedOptions opt, SegmentRunner run);
  ~StagedOnnx();
  // inputs by the model's graph input names; returns the graph outputs by name
  TensorMap run(const TensorMap& inputs);
  // The inputs run() would use (the model's graph inputs), checked against the declared
  // dtypes and static dims: a UserError naming the input that does not fit.
  TensorMap check_inputs(const TensorMap& inputs) const;
  const StagedStats& stats() const;
  // The model's tensor graph inputs and their declared dtypes.
  std::map<std::string, DType> input_dtypes() const;
  // Their declared dims (-1 where the model gives none or a name), for inputs with a shape.
  std::map<std::string, std::vector<int64_t>> input_dims() const;

 private:
  void init(const std::string& path, StagedOptions opt, SegmentRunner run);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe
