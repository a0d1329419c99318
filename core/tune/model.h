// model.h — the tuner's cost model: an analytic estimate of a schedule's time from its loop
// IR, corrected by a ridge regression fitted to the measurements so far.
//
// The analytic part walks the loop nest with the trip counts of the run's shapes: per
// statement it counts arithmetic (divided by the SIMD lanes in a vectorized loop), memory
// traffic by each access's stride along the innermost loop (contiguous, invariant, or a
// cache line per element), the latency chain of a scalar reduction loop, loop and guard
// overhead, and the speed-up of the parallel loop (its iterations over the cores, whole
// rounds only) less a fixed cost per parallel region. The packed GEMM nest is costed from
// its block sizes: micro-kernel issue rate (FMA and load ports, spills past the vector
// registers), padding of the edge tiles, packing traffic, cache fit of the blocks and the
// number of parallel jobs. It is deterministic: `--measure model` ranks with it alone.
//
// features() turns the same walk into a short vector (log time estimate, log FLOPs and
// bytes, vector and strided fractions, parallel efficiency, …); CostModel fits
// log(measured / estimate) on them (ridge, λ = 1, standardized) and predicts with it.
#pragma once
#include <vector>

#include "core/ir/symbolic.h"
#include "core/loop/loop_ir.h"
#include "core/schedule/kernel_graph.h"
#include "core/tune/space.h"

namespace lathe::tune {

struct Estimate {
  double ms = 0;                 // the analytic estimate
  std::vector<double> features;  // for CostModel (features[0] = log(ms))
};
Estimate estimate(const loop::LoopFunc& f, const KernelGraph& kg, const Bindings& dims, const Machine& m);

class CostModel {
 public:
  void add(const std::vector<double>& x, double log_ratio);  // a measurement: log(measured / estimate)
  // predicted time: estimate × exp(fitted correction); the estimate alone until 4 points.
  // Each feature is clipped to the range of the measured points before the correction (a
  // candidate far outside it gets the correction of the range's edge, not an extrapolation).
  double predict(const Estimate& e) const;
  int samples() const { return static_cast<int>(y_.size()); }

 private:
  void fit();
  std::vector<std::vector<double>> x_;
  std::vector<double> y_;
  std::vector<double> mean_, scale_, w_, lo_, hi_;
  double bias_ = 0;
};

}  // namespace lathe::tune
