// launch: grid-stride over N threads, 256 per block
// kernel k0_max (elementwise)
extern "C" __global__ void k0_max(__half* __restrict__ out, const __half* __restrict__ in0, const __half* __restrict__ in1, long long d_N) {
  for (long long lathe_t = (long long)blockIdx.x * blockDim.x + threadIdx.x; lathe_t < d_N; lathe_t += (long long)gridDim.x * blockDim.x) {  // i0: output dim 0
    const long long i0 = lathe_t;
    out[i0] = __float2half_rn(lathe_maxf(lathe_rh((__half2float(in0[i0]) * __half2float(in1[i0]))), 0.0f));
  }
}
