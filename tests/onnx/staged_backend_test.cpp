// staged_backend_test.cpp — the staged executor's segment programs compiled by each CPU
// backend (c, llvm where built) against the same models run on the interpreter: a NonZero
// whose count sizes later kernels, a run-time Loop whose body is a compiled program, TopK
// with a run-time k and a Reshape to a run-time shape. The interpreter is the oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backends/backend.h"
#include "core/import/onnx_staged.h"
#include "core/interp/interp.h"
#include "core/runtime/compare.h"
#include "tests/onnx/staged_models.h"

namespace lathe {
namespace {

using namespace staged_test;

std::vector<std::string> compiled_backends() {
  std::vector<std::string> r;
  for (const std::string& b : backend_names())
    if (b == "c" || b == "llvm") r.push_back(b);
  return r;
}

struct Compiled {
  std::string backend;
  std::map<std::string, std::shared_ptr<Executable>> cache;
  int64_t launches = 0;
  SegmentRunner fn() {
    return [this](const Graph& g, const std::string& key, const TensorMap& ins) {
      auto it = cache.find(key);
      if (it == cache.end()) it = cache.emplace(key, std::make_shared<Executable>(compile_graph(g, backend))).first;
      ++launches;
      return it->second->run(ins);
    };
  }
};

SegmentRunner interp_runner() {
  return [](const Graph& g, const std::string&, const TensorMap& ins) { return interpret(g, ins); };
}

// Runs `model` on every input set with the interpreter and with each backend; the outputs
// must agree and the backend must have run compiled segments.
void check_model(Model m, const std::string& tag, const std::vector<TensorMap>& sets, int64_t min_programs) {
  std::string path = m.save(tag);
  StagedOnnx ref(path, {}, interp_runner());
  for (const std::string& b : compiled_backends()) {
    Compiled c{b};
    StagedOnnx s(path, {}, c.fn());
    for (size_t k = 0; k < sets.size(); ++k) {
      TensorMap want = ref.run(sets[k]), got = s.run(sets[k]);
      for (const auto& [name, t] : want) {
        std::string why;
        ASSERT_TRUE(got.count(name)) << b << " " << tag << " set " << k << ": no output " << name;
        EXPECT_EQ(got.at(name).shape(), t.shape()) << b << " " << tag << " set " << k << " " << name;
        EXPECT_TRUE(allclose(got.at(name), t, 1e-5, 1e-6, &why)) << b << " " << tag << " set " << k << " " << name << ": " << why;
      }
    }
    EXPECT_GE(static_cast<int64_t>(c.cache.size()), min_programs) << b << " " << tag;
    EXPECT_GT(c.launches, 0) << b << " " << tag;
  }
}

TEST(OnnxStagedBackends, NonZeroSizesLaterKernels) {
  check_model(nonzero_model(), "be_nonzero",
              {{{"x", f32({2, 3}, {0, 2, -1, 3, 0, 5})}},
               {{"x", f32({2, 3}, {1, 1, 1, 1, 1, 0})}},
               {{"x", f32({2, 3}, {-1, -1, -1, -1, -1, -1})}}},  // no hits: a [2, 0] result
              2);
}

TEST(OnnxStagedBackends, RunTimeLoopRunsACompiledBody) {
  HostTensor x = f32({3}, {1, 2, 3});
  check_model(loop_model(true), "be_loop",
              {{{"x", x}, {"M", scalar_i64(5)}}, {{"x", x}, {"M", scalar_i64(0)}}, {{"x", x}, {"M", scalar_i64(17)}}}, 1);
}

TEST(OnnxStagedBackends, TopKAndReshapeOnRunTimeShapeInputs) {
  HostTensor x(DType::F32, {12});
  for (int i = 0; i < 12; ++i) x.set_f64(i, std::sin(1.7 * i));
  check_model(topk_reshape_model(), "be_topk",
              {{{"x", x}, {"k", i64({1}, {6})}, {"shape", i64({2}, {2, 3})}},
               {{"x", x}, {"k", i64({1}, {6})}, {"shape", i64({2}, {3, -1})}},
               {{"x", x}, {"k", i64({1}, {4})}, {"shape", i64({2}, {1, 4})}}},
              3);
}

}  // namespace
}  // namespace lathe
