// peers.h — what `lathe bench --backend cuda` measures the generated kernels against, on
// the same GPU in the same process: the device-to-device copy bandwidth (the memory-bound
// ceiling), cuBLAS sgemm (loaded with dlopen, like the driver; TF32 off), and the f32 peak
// the device's attributes imply. Each returns < 0 and says why when it cannot measure.
#pragma once
#include <string>

namespace lathe::cuda {

// GB/s of cuMemcpyDtoD over `bytes`, counting bytes read + written (median of iters).
double copy_gbps(size_t bytes, int iters, std::string* why);
// Median ms of an n×n×n row-major sgemm through cuBLAS (CUBLAS_DEFAULT_MATH: no TF32).
double cublas_sgemm_ms(int n, int iters, std::string* why);
// SMs × clock × FP32 lanes per SM × 2, in GFLOP/s.
double peak_gflops(std::string* why);

}  // namespace lathe::cuda
