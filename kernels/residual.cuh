// Residual add, CUDA twin of kernels/residual.h:
//   residual_forward_cuda  <->  residual_forward_cpu      out (n) = a (n) + b (n)
// Its backward is the identity (the trainer's single residual-gradient buffer), so there is no backward kernel.
// Elementwise, fp32 add of the two stored values, one rounding to T; 128-bit packs when all three pointers are
// 16-byte aligned (any n: the tail runs scalar), scalar otherwise.
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"
#include "kernels/residual.h"

struct ResidualAddOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};

// out (n) = a + b. out may alias a or b (each thread loads before it stores).
template <typename T>
void residual_forward_cuda(T* out, const T* a, const T* b, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 2>(out, a, b, n, ResidualAddOp{}, stream);
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void residual_forward_cuda<float>(float*, const float*, const float*, size_t, cudaStream_t);
extern template void residual_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                          const __nv_bfloat16*, size_t, cudaStream_t);
#endif
