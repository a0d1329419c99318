// pack_defer.h — filling a build's large packed weights on a thread of their own.
//
// Prepacking (prepack.h) copies each constant GEMM weight into its kernel's panel layout
// while the program is built: GPT-2 small packs ~0.5 GB, most of a cold start's build time on
// one core while the other waits. With a PackFiller made current on the building thread
// (DeferPacks), a float weight's copy of at least kDeferPackMinBytes is allocated and
// registered as before but filled on the filler's thread, so the copying overlaps the rest of
// the build and the backend's compile (`lathe run`). The caller must wait() before a run
// reads the copies (no tensor knows it is unfilled); a filler being dropped first finishes
// what it was given, so no half-filled weight outlives it. Each deferred copy's Const node
// carries a name unique in the process, so hash-consing (which would compare the unfilled
// zeros) never merges two of them, nor one with a later build's.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace lathe::loop {

constexpr int64_t kDeferPackMinBytes = int64_t(1) << 20;

class PackFiller {
 public:
  PackFiller();
  ~PackFiller();  // finishes every fill it was given, then stops
  PackFiller(const PackFiller&) = delete;
  PackFiller& operator=(const PackFiller&) = delete;
  void push(std::function<void()> fill);
  void wait();  // until every fill pushed so far has run; throws what a fill threw
  int pushed() const;
  double busy_ms() const;  // the fills' wall time on the filler's thread

 private:
  struct State;
  std::shared_ptr<State> s_;
};

// While alive, the building thread's prepacking (prepack_constant_b) hands its large float
// copies to `filler` (nullptr: fills them at once, the default).
class DeferPacks {
 public:
  explicit DeferPacks(PackFiller* filler);
  ~DeferPacks();
  DeferPacks(const DeferPacks&) = delete;
  DeferPacks& operator=(const DeferPacks&) = delete;

 private:
  PackFiller* saved_;
};

PackFiller* current_pack_filler();  // this thread's, or nullptr

}  // namespace lathe::loop
