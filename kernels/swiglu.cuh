// SwiGLU (LLaMA MLP), CUDA twins of kernels/swiglu.h. The fused gate|up matmul writes one (N, 2F) row per
// token: gate in columns [0, F), up in [F, 2F).
//   swiglu_forward_cuda   <->  swiglu_forward_cpu     out (N, F) = silu(inp[:, :F]) * inp[:, F:]
//   swiglu_backward_cuda  <->  swiglu_backward_cpu    dinp (N, 2F) = [dgate | dup]   (overwrites)
// One thread per W consecutive features of one row: 128-bit packs when F is a multiple of W (8 bf16 / 4 fp32)
// and the pointers are 16-byte aligned, scalar otherwise (LLaMA-1B's F = 5461 is odd: scalar). fp32 math with
// the CPU twins' expressions (expf, not __expf: no --use_fast_math), one rounding to T per output.
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"
#include "kernels/swiglu.h"

// out (N, F); inp (N, 2F). p indexes the N * F / W packs row-major.
template <typename T, int W>
__global__ void swiglu_forward_kernel(T* out, const T* inp, int N, int F) {
    const size_t per_row = (size_t)(F / W), total = (size_t)N * per_row;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (size_t)gridDim.x * blockDim.x) {
        const size_t n = p / per_row, f = (p % per_row) * W;
        const Pack<T, W> g = load_pack<W>(inp + n * 2 * F + f);
        const Pack<T, W> u = load_pack<W>(inp + n * 2 * F + F + f);
        Pack<T, W> o;
#pragma unroll
        for (int k = 0; k < W; k++) {
            float gv = to_float(g.v[k]), uv = to_float(u.v[k]);
            float sig = 1.0f / (1.0f + expf(-gv));
            o.v[k] = from_float<T>(gv * sig * uv);
        }
        store_pack<W>(out + n * F + f, o);
    }
}

// dinp (N, 2F) = [dout * u * silu'(g) | dout * silu(g)]. All loads of a pack happen before its stores.
template <typename T, int W>
__global__ void swiglu_backward_kernel(T* dinp, const T* inp, const T* dout, int N, int F) {
    const size_t per_row = (size_t)(F / W), total = (size_t)N * per_row;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (size_t)gridDim.x * blockDim.x) {
        const size_t n = p / per_row, f = (p % per_row) * W;
        const Pack<T, W> g = load_pack<W>(inp + n * 2 * F + f);
        const Pack<T, W> u = load_pack<W>(inp + n * 2 * F + F + f);
        const Pack<T, W> dy = load_pack<W>(dout + n * F + f);
        Pack<T, W> dg, du;
#pragma unroll
        for (int k = 0; k < W; k++) {
            float gv = to_float(g.v[k]), uv = to_float(u.v[k]), d = to_float(dy.v[k]);
            float sig = 1.0f / (1.0f + expf(-gv));
            float silu = gv * sig;
            du.v[k] = from_float<T>(d * silu);
            dg.v[k] = from_float<T>(d * uv * (sig + gv * sig * (1.0f - sig)));
        }
        store_pack<W>(dinp + n * 2 * F + f, dg);
        store_pack<W>(dinp + n * 2 * F + F + f, du);
    }
}

// out (N, F) = silu(inp[:, :F]) * inp[:, F:]
template <typename T>
void swiglu_forward_cuda(T* out, const T* inp, int N, int F, cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (N > 0 && F > 0) {
        if (F % V == 0 && aligned16(out, inp))
            swiglu_forward_kernel<T, V>
                <<<cuda_grid_1d((size_t)N * F / V, EW_BLOCK), EW_BLOCK, 0, stream>>>(out, inp, N, F);
        else
            swiglu_forward_kernel<T, 1><<<cuda_grid_1d((size_t)N * F, EW_BLOCK), EW_BLOCK, 0, stream>>>(out, inp, N, F);
    }
    cudaCheck(cudaGetLastError());
}

// dinp (N, 2F) = [dgate | dup], overwritten. dinp must not alias dout. (dinp == inp would work here, since every
// thread loads g and u before storing, but the CPU twin reads u after writing dup: do not rely on it.)
template <typename T>
void swiglu_backward_cuda(T* dinp, const T* inp, const T* dout, int N, int F, cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (N > 0 && F > 0) {
        if (F % V == 0 && aligned16(dinp, inp, dout))
            swiglu_backward_kernel<T, V>
                <<<cuda_grid_1d((size_t)N * F / V, EW_BLOCK), EW_BLOCK, 0, stream>>>(dinp, inp, dout, N, F);
        else
            swiglu_backward_kernel<T, 1>
                <<<cuda_grid_1d((size_t)N * F, EW_BLOCK), EW_BLOCK, 0, stream>>>(dinp, inp, dout, N, F);
    }
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void swiglu_forward_cuda<float>(float*, const float*, int, int, cudaStream_t);
extern template void swiglu_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int, int,
                                                        cudaStream_t);
extern template void swiglu_backward_cuda<float>(float*, const float*, const float*, int, int, cudaStream_t);
extern template void swiglu_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                         const __nv_bfloat16*, int, int, cudaStream_t);
#endif
