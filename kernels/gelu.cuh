// GeLU, CUDA twins of kernels/gelu.h: the tanh approximation (GPT-2's "gelu_new") and the exact erf form
// (BERT/RoBERTa's "gelu"):
//   gelu_forward_cuda       <->  gelu_forward_cpu         out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   gelu_backward_cuda      <->  gelu_backward_cpu        dinp (n) = dout * gelu'(inp)   (overwrites)
//   gelu_erf_forward_cuda   <->  gelu_erf_forward_cpu     out (n) = x Φ(x) = 0.5 x (1 + erf(x / sqrt(2)))
//   gelu_erf_backward_cuda  <->  gelu_erf_backward_cpu    dinp (n) = dout * (Φ(x) + x φ(x))   (overwrites)
// Same expressions as the CPU twins, in fp32 on the stored values (tanhf, erff, expf: CUDA's accurate versions;
// this library is built without --use_fast_math), one rounding to T. 128-bit packs when the pointers are 16-byte
// aligned. out may alias inp; dinp may alias dout (each element is read before it is written, by one thread).
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"
#include "kernels/gelu.h"  // GELU_SCALING_FACTOR

struct GeluForwardOp {
    __device__ float operator()(float x, float) const {
        const float s = (float)GELU_SCALING_FACTOR;
        float u = s * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
};
struct GeluBackwardOp {  // (inp, dout) -> dinp
    __device__ float operator()(float x, float dy) const {
        const float s = (float)GELU_SCALING_FACTOR;
        float u = s * (x + 0.044715f * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = s * (1.0f + (float)(3 * 0.044715) * x * x);
        return dy * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du);
    }
};

struct GeluErfForwardOp {
    __device__ float operator()(float x, float) const { return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); }
};
struct GeluErfBackwardOp {  // (inp, dout) -> dinp
    __device__ float operator()(float x, float dy) const {
        const float cdf = 0.5f * (1.0f + erff(x * (float)M_SQRT1_2));
        const float pdf = expf(-0.5f * x * x) * 0.3989422804014327f;  // 1 / sqrt(2π)
        return dy * (cdf + x * pdf);
    }
};

// out (n) = gelu(inp). out may alias inp.
template <typename T>
void gelu_forward_cuda(T* out, const T* inp, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 1>(out, inp, (const T*)nullptr, n, GeluForwardOp{}, stream);
    cudaCheck(cudaGetLastError());
}

// dinp (n) = dout * gelu'(inp), overwriting dinp. In place (dinp == dout) is allowed: each element is read
// before it is written, by the same thread.
template <typename T>
void gelu_backward_cuda(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 2>(dinp, inp, dout, n, GeluBackwardOp{}, stream);
    cudaCheck(cudaGetLastError());
}

// out (n) = x Φ(x), the exact GeLU. out may alias inp.
template <typename T>
void gelu_erf_forward_cuda(T* out, const T* inp, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 1>(out, inp, (const T*)nullptr, n, GeluErfForwardOp{}, stream);
    cudaCheck(cudaGetLastError());
}

// dinp (n) = dout * (Φ(x) + x φ(x)), overwriting dinp; dinp == dout is allowed.
template <typename T>
void gelu_erf_backward_cuda(T* dinp, const T* inp, const T* dout, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 2>(dinp, inp, dout, n, GeluErfBackwardOp{}, stream);
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void gelu_forward_cuda<float>(float*, const float*, size_t, cudaStream_t);
extern template void gelu_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, size_t, cudaStream_t);
extern template void gelu_backward_cuda<float>(float*, const float*, const float*, size_t, cudaStream_t);
extern template void gelu_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                       size_t, cudaStream_t);
extern template void gelu_erf_forward_cuda<float>(float*, const float*, size_t, cudaStream_t);
extern template void gelu_erf_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, size_t,
                                                          cudaStream_t);
extern template void gelu_erf_backward_cuda<float>(float*, const float*, const float*, size_t, cudaStream_t);
extern template void gelu_erf_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                           const __nv_bfloat16*, size_t, cudaStream_t);
#endif
