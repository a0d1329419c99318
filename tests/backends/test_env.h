// test_env.h — two small helpers the backend, tune and import tests share: deterministic
// weights (sin_weights) and an environment variable set for a scope (ScopedEnv).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/host_tensor.h"

namespace lathe::test {

// An f32 tensor of sin(seed + step·i) over its flat index i: smooth, deterministic, in
// [-1, 1], distinct per seed. The step is the caller's (0.61 in the prepack tests, 0.37 in
// the convolution ones): it is part of what each test has always computed.
inline HostTensor sin_weights(std::vector<int64_t> shape, double seed, double step = 0.61) {
  HostTensor t(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, std::sin(seed + step * static_cast<double>(i)));
  return t;
}

// Sets (or, with nullptr, unsets) an environment variable for the guard's lifetime and puts
// back what was there before: the old value, or no variable. The switches the tests flip are
// mostly read when a program is built, so the guard must outlive build_program, not run().
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const char* value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) setenv(name_.c_str(), value, 1);
    else unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_) setenv(name_.c_str(), old_->c_str(), 1);
    else unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace lathe::test
