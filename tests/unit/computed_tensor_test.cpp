// computed_tensor_test.cpp — HostTensor::computed (core/runtime/host_tensor.h): values made on
// first use, freed by release() for every copy, made again on the next read; identity() is
// stable across that and computes nothing. A tensor that is not computed() is never released.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/runtime/host_tensor.h"

namespace lathe {
namespace {

TEST(ComputedTensor, MadeOnFirstReadFreedAndMadeAgain) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  HostTensor t = HostTensor::computed(DType::F32, {3, 5}, [calls](void* dst) {
    ++*calls;
    for (int i = 0; i < 15; ++i) static_cast<float*>(dst)[i] = 0.5f * static_cast<float>(i);
  });
  const HostTensor copy = t;
  EXPECT_TRUE(t.recomputable());
  EXPECT_FALSE(t.materialized());
  const void* id = t.identity();
  EXPECT_EQ(*calls, 0) << "identity() computes nothing";
  EXPECT_EQ(copy.release(), 0u) << "nothing to free yet";
  EXPECT_FLOAT_EQ(copy.ptr<float>()[7], 3.5f);
  EXPECT_TRUE(t.materialized()) << "copies share the values";
  EXPECT_EQ(*calls, 1);
  EXPECT_EQ(t.release(), 15u * 4);
  EXPECT_FALSE(copy.materialized());
  EXPECT_EQ(t.identity(), id);
  EXPECT_FLOAT_EQ(static_cast<const float*>(static_cast<const void*>(t.bytes()))[14], 7.0f) << "bytes() computes it";
  EXPECT_EQ(*calls, 2);
  EXPECT_EQ(t.get_f64(2), 1.0);
  EXPECT_EQ(*calls, 2);
}

TEST(ComputedTensor, ComputedOnceUnderConcurrentReads) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  HostTensor t = HostTensor::computed(DType::F32, {1024}, [calls](void* dst) {
    ++*calls;
    for (int i = 0; i < 1024; ++i) static_cast<float*>(dst)[i] = static_cast<float>(i);
  });
  std::vector<std::thread> pool;
  std::atomic<int> wrong{0};
  for (int w = 0; w < 4; ++w)
    pool.emplace_back([&] {
      if (t.ptr<float>()[1000] != 1000.0f) ++wrong;
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(*calls, 1);
  EXPECT_EQ(wrong, 0);
}

TEST(ComputedTensor, OtherTensorsAreNotReleased) {
  HostTensor h(DType::F32, {4});
  h.set_f64(1, 2.0);
  EXPECT_FALSE(h.recomputable());
  EXPECT_EQ(h.release(), 0u);
  EXPECT_EQ(h.get_f64(1), 2.0);
  EXPECT_EQ(h.identity(), static_cast<const void*>(h.bytes()));
}

}  // namespace
}  // namespace lathe
