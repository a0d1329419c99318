// launch: grid-stride over 64 blocks of 128 threads (block-wide reductions)
// kernel k0_reduce (reduce)
extern "C" __global__ void k0_reduce(float* __restrict__ out, const float* __restrict__ in0) {
  for (long long lathe_b = blockIdx.x; lathe_b < 64LL; lathe_b += gridDim.x) {  // one block per row
    const long long i0 = lathe_b;
    float acc1 = 0.0f;
    for (long long lathe_r0 = threadIdx.x; lathe_r0 < 512LL; lathe_r0 += blockDim.x) {  // r0: reduce axis 1
      const long long r0 = lathe_r0;
      acc1 = (acc1 + in0[((i0 * 512LL) + r0)]);
    }
    {
      __shared__ float lathe_smem[32];
      acc1 = lathe_block_reduce(acc1, lathe_smem, [](float a, float b) { return (a + b); });
    }
    if (threadIdx.x == 0) out[i0] = acc1;
  }
}
