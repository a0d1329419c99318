// gradcheck.h — finite-difference gradient checks: builds f on f64 Inputs, contracts its
// output with a random weight tensor (so the whole Jacobian is exercised), takes grad()
// and compares it with central differences (h = 1e-6) computed by the interpreter.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/frontend/autodiff.h"
#include "tests/frontend/test_util.h"

namespace lathe::testing {

struct GradInput {
  std::vector<int64_t> shape;
  std::function<double(double)> map = [](double v) { return v; };  // applied to N(0,1) samples
  bool differentiate = true;
  DType dtype = DType::F64;
  std::vector<double> fixed;  // explicit values instead of random ones
};

inline void gradcheck(const std::string& what, const std::vector<GradInput>& spec,
                      const std::function<Tensor(const std::vector<Tensor>&)>& f, uint64_t seed = 1,
                      double rtol = 1e-4, double atol = 1e-6) {
  std::vector<Tensor> ins, params;
  TensorMap vals;
  for (size_t i = 0; i < spec.size(); ++i) {
    std::string name = "x" + std::to_string(i);
    ins.push_back(input(name, shape_from(spec[i].shape), spec[i].dtype));
    if (spec[i].differentiate) params.push_back(ins.back());
    HostTensor r = randt(spec[i].shape, seed * 100 + i, DType::F64);
    HostTensor v(spec[i].dtype, spec[i].shape);
    for (int64_t k = 0; k < v.numel(); ++k)
      v.set_f64(k, spec[i].fixed.empty() ? spec[i].map(r.get_f64(k)) : spec[i].fixed.at(k));
    vals[name] = v;
  }
  Tensor out = f(ins);
  Tensor w = input("w_out", out.shape(), out.dtype());
  vals["w_out"] = randt(shape_values(out.shape()), seed * 100 + 99, out.dtype());
  Tensor loss = sum(out * w);
  std::vector<Tensor> grads = grad(loss, params);
  for (auto& gt : grads) {
    bool any_backward = false;
    for (NodeRef n : Graph::from_outputs({{"g", gt.node()}}).toposort()) any_backward |= n->prov.backward;
    EXPECT_TRUE(any_backward || gt.node()->op == Op::Const) << what << ": no node marked backward";
  }
  std::vector<Tensor> outs{loss};
  outs.insert(outs.end(), grads.begin(), grads.end());
  std::vector<HostTensor> got = run_all(outs, vals);
  Graph loss_only = Graph::from_outputs({{"loss", loss.node()}});
  for (auto& in : ins) (void)in;
  size_t p = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    if (!spec[i].differentiate) continue;
    std::string name = "x" + std::to_string(i);
    const HostTensor& analytic = got[1 + p++];
    ASSERT_EQ(analytic.shape(), spec[i].shape) << what << ": gradient shape of " << name;
    for (int64_t k = 0; k < analytic.numel(); ++k) {
      const double h = 1e-6;
      TensorMap plus = vals, minus = vals;
      plus[name] = vals[name].clone();
      minus[name] = vals[name].clone();
      plus[name].set_f64(k, vals[name].get_f64(k) + h);
      minus[name].set_f64(k, vals[name].get_f64(k) - h);
      double lp = interpret(loss_only, plus).at("loss").get_f64(0);
      double lm = interpret(loss_only, minus).at("loss").get_f64(0);
      double numeric = (lp - lm) / (2 * h);
      double a = analytic.get_f64(k);
      EXPECT_NEAR(a, numeric, atol + rtol * std::fabs(numeric)) << what << ": d loss / d " << name << "[" << k << "]";
    }
  }
}

}  // namespace lathe::testing
