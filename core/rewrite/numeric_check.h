// numeric_check.h — "did this rewrite keep the graph's meaning?", by running it.
//
// The checker runs graphs on the same seeded random inputs (random_inputs, with every
// symbolic dim bound — by default to 3) through an evaluator (the reference interpreter
// unless a test or backend supplies another) and compares outputs with allclose under
// default_tolerance(dtype). Sessions use it before/after each step (check=true) and for
// final_check()'s bisection.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "core/interp/interp.h"

namespace lathe {

using Evaluator = std::function<TensorMap(const Graph&, const TensorMap&)>;

class NumericChecker {
 public:
  // `g0` fixes the inputs (names, dtypes, shapes); unbound symbolic dims get `default_dim`.
  NumericChecker(const Graph& g0, uint64_t seed, Bindings bindings = {}, Evaluator eval = {}, int64_t default_dim = 3);

  TensorMap run(const Graph& g) const;  // UserError from the evaluator propagates
  // "" when every output of `before` has a close counterpart in `after`; otherwise which
  // output differs and where ("output 'y' changed: element 3: 6 vs 3").
  std::string compare(const TensorMap& before, const TensorMap& after) const;
  const TensorMap& inputs() const { return inputs_; }
  const Bindings& bindings() const { return bindings_; }

 private:
  Bindings bindings_;
  TensorMap inputs_;
  Evaluator eval_;
};

}  // namespace lathe
