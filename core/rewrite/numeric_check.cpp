// numeric_check.cpp — seeded inputs, evaluation and output comparison for rewrite checks.
#include "core/rewrite/numeric_check.h"

#include "core/runtime/compare.h"
#include "core/runtime/random.h"

namespace lathe {

NumericChecker::NumericChecker(const Graph& g0, uint64_t seed, Bindings bindings, Evaluator eval, int64_t default_dim)
    : bindings_(std::move(bindings)), eval_(std::move(eval)) {
  for (const std::string& s : g0.symbols())
    if (!bindings_.count(s)) bindings_[s] = default_dim;
  inputs_ = random_inputs(g0, seed, bindings_);
  if (!eval_) eval_ = [](const Graph& g, const TensorMap& in) { return interpret(g, in); };
}

TensorMap NumericChecker::run(const Graph& g) const { return eval_(g, inputs_); }

std::string NumericChecker::compare(const TensorMap& before, const TensorMap& after) const {
  for (auto& [name, b] : before) {
    auto it = after.find(name);
    if (it == after.end()) return "output '" + name + "' is missing";
    const HostTensor& a = it->second;
    if (a.dtype() != b.dtype())
      return "output '" + name + "' changed dtype: " + std::string(dtype_name(b.dtype())) + " -> " +
             std::string(dtype_name(a.dtype()));
    if (a.shape() != b.shape()) return "output '" + name + "' changed shape: " + b.shape_string() + " -> " + a.shape_string();
    Tolerance tol = default_tolerance(b.dtype());
    std::string why;
    if (!allclose(a, b, tol.rtol, tol.atol, &why)) return "output '" + name + "' changed: " + why;
  }
  return "";
}

}  // namespace lathe
