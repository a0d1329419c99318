// staged_gen.cpp — writes the staged-executor models of staged_models.h and their inputs
// (.onnx + .npy) into a directory, for the `lathe run` tests in CMakeLists.txt: hostile
// models must exit 1 naming the node, never crash or hang.
#include <iostream>

#include "core/runtime/npy.h"
#include "tests/onnx/staged_models.h"

using namespace lathe;
using namespace lathe::staged_test;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_staged_gen DIR\n";
    return 2;
  }
  std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  loop_model(true).save_to(dir + "/loop.onnx");
  loop_model(false).save_to(dir + "/loop_nocond.onnx");
  loop_model(true, true).save_to(dir + "/loop_forever.onnx");
  nonzero_model().save_to(dir + "/nonzero.onnx");
  nonzero_huge_model().save_to(dir + "/nonzero_huge.onnx");
  deep_loop_model(18).save_to(dir + "/deep.onnx");
  loop_model(false, false, 5000).save_to(dir + "/loop_const_5000.onnx");
  loop_model(false, false, int64_t(1) << 40).save_to(dir + "/loop_const_huge.onnx");
  scan_model(5000).save_to(dir + "/scan_5000.onnx");
  scan_model(70000).save_to(dir + "/scan_70000.onnx");
  scatter_model(true).save_to(dir + "/scatter_computed.onnx");
  write_npy(dir + "/xq.npy", f32({3}, {1, 0.5, 0.25}));
  write_npy(dir + "/x4.npy", f32({4}, {1, 1, 1, 1}));
  write_npy(dir + "/idx_bad.npy", i64({2}, {1, -9}));
  write_npy(dir + "/s2.npy", f32({2}, {1, 2}));
  write_npy(dir + "/xs5000.npy", HostTensor(DType::F32, {2, 5000}));
  write_npy(dir + "/xs70000.npy", HostTensor(DType::F32, {2, 70000}));
  write_npy(dir + "/x3.npy", f32({3}, {1, 2, 3}));
  write_npy(dir + "/x2.npy", f32({2}, {1, 2}));
  write_npy(dir + "/x23.npy", f32({2, 3}, {0, 2, -1, 3, 0, 5}));
  write_npy(dir + "/v4.npy", i64({4}, {0, 3, 0, 1}));
  write_npy(dir + "/m4.npy", scalar_i64(4));
  write_npy(dir + "/m1.npy", scalar_i64(1));
  write_npy(dir + "/m_neg.npy", scalar_i64(-5));
  write_npy(dir + "/m_huge.npy", scalar_i64(int64_t(1) << 62));
  return 0;
}
