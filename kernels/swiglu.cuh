// SwiGLU (LLaMA MLP), CUDA twins of kernels/swiglu.h. gate and up are separate (N, F) buffers, so both ops are
// elementwise over n = N * F:
//   swiglu_forward_cuda   <->  swiglu_forward_cpu     out (n) = silu(gate) * up
//   swiglu_backward_cuda  <->  swiglu_backward_cpu    dgate (n), dup (n)   (overwritten; in place allowed)
// 128-bit packs when every pointer is 16-byte aligned (any n: scalar tail), scalar otherwise. fp32 math with the
// CPU twins' expressions (expf, not __expf: no --use_fast_math), one rounding to T per output.
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"
#include "kernels/swiglu.h"

struct SwigluForwardOp {  // (gate, up) -> out
    __device__ float operator()(float g, float u) const {
        float sig = 1.0f / (1.0f + expf(-g));
        return g * sig * u;
    }
};

// dgate = dy * u * silu'(g), dup = dy * silu(g), from fp32 values
__device__ __forceinline__ void swiglu_grads(float g, float u, float dy, float& dg, float& du) {
    float sig = 1.0f / (1.0f + expf(-g));
    float silu = g * sig;
    du = dy * silu;
    dg = dy * u * (sig + g * sig * (1.0f - sig));
}

// Each thread loads its pack (or element) of gate, up and dout before storing dgate and dup, and no other thread
// touches those elements, so dgate may alias gate and dup may alias up (the model's in-place backward).
template <typename T, int W>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* gate, const T* up, const T* dout, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t npack = n / W;
    for (size_t p = tid; p < npack; p += stride) {
        const Pack<T, W> g = load_pack<W>(gate + p * W), u = load_pack<W>(up + p * W), dy = load_pack<W>(dout + p * W);
        Pack<T, W> dg, du;
#pragma unroll
        for (int k = 0; k < W; k++) {
            float a, b;
            swiglu_grads(to_float(g.v[k]), to_float(u.v[k]), to_float(dy.v[k]), a, b);
            dg.v[k] = from_float<T>(a);
            du.v[k] = from_float<T>(b);
        }
        store_pack<W>(dgate + p * W, dg);
        store_pack<W>(dup + p * W, du);
    }
    for (size_t i = npack * W + tid; i < n; i += stride) {
        float a, b;
        swiglu_grads(to_float(gate[i]), to_float(up[i]), to_float(dout[i]), a, b);
        dgate[i] = from_float<T>(a);
        dup[i] = from_float<T>(b);
    }
}

// out (n) = silu(gate) * up. out may alias gate or up.
template <typename T>
void swiglu_forward_cuda(T* out, const T* gate, const T* up, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 2>(out, gate, up, n, SwigluForwardOp{}, stream);
    cudaCheck(cudaGetLastError());
}

// dgate (n), dup (n) overwritten; in place (dgate == gate, dup == up) allowed.
template <typename T>
void swiglu_backward_cuda(T* dgate, T* dup, const T* gate, const T* up, const T* dout, size_t n,
                          cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (n > 0) {
        if (aligned16(dgate, dup, gate, up, dout))
            swiglu_backward_kernel<T, V><<<cuda_grid_1d(n / V > 0 ? n / V : 1, EW_BLOCK), EW_BLOCK, 0, stream>>>(
                dgate, dup, gate, up, dout, n);
        else
            swiglu_backward_kernel<T, 1>
                <<<cuda_grid_1d(n, EW_BLOCK), EW_BLOCK, 0, stream>>>(dgate, dup, gate, up, dout, n);
    }
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void swiglu_forward_cuda<float>(float*, const float*, const float*, size_t, cudaStream_t);
extern template void swiglu_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                        size_t, cudaStream_t);
extern template void swiglu_backward_cuda<float>(float*, float*, const float*, const float*, const float*, size_t,
                                                 cudaStream_t);
extern template void swiglu_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                                         const __nv_bfloat16*, const __nv_bfloat16*, size_t,
                                                         cudaStream_t);
#endif
