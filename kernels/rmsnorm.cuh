// RMSNorm (LLaMA; Hugging Face LlamaRMSNorm), CUDA twins of kernels/rmsnorm.h:
//   rmsnorm_forward_cuda   <->  rmsnorm_forward_cpu    out (N, C) = weight * (x * rstd), rstd = 1/sqrt(mean(x^2)+eps)
//   rmsnorm_backward_cuda  <->  rmsnorm_backward_cpu   dinp (N, C) += ..., dweight (C) += ...
// Same structure as layernorm.cuh: one warp per row with fp32 warp-butterfly sums, 128-bit packs when C is a
// multiple of W and the pointers are 16-byte aligned; dweight by the deterministic two-stage column sums of
// elementwise_common.cuh. Scratch: rmsnorm_backward_scratch_bytes(N, C) = colsum_chunks(N) * C * 4 bytes
// (at most 1 KiB per channel: 4 MiB at C = 4096).
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"
#include "kernels/rmsnorm.h"

template <typename T, int W>
__global__ void rmsnorm_forward_kernel(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T* x = inp + (size_t)row * C;
    float ss = 0.0f;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> a = load_pack<W>(x + c);
#pragma unroll
        for (int k = 0; k < W; k++) ss += to_float(a.v[k]) * to_float(a.v[k]);
    }
    const float s = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    T* o = out + (size_t)row * C;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> a = load_pack<W>(x + c), w = load_pack<W>(weight + c);
        Pack<T, W> y;
#pragma unroll
        for (int k = 0; k < W; k++) y.v[k] = from_float<T>(to_float(w.v[k]) * (to_float(a.v[k]) * s));
        store_pack<W>(o + c, y);
    }
    if (lane == 0 && rstd) rstd[row] = s;
}

// out (N, C); rstd (N) fp32 (may be null: recompute); inp (N, C); weight (C). out must not alias inp.
template <typename T>
void rmsnorm_forward_cuda(T* out, float* rstd, const T* inp, const T* weight, int N, int C, float eps,
                          cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (N > 0 && C > 0) {
        const unsigned grid = (unsigned)ceil_div(N, EW_BLOCK / 32);
        if (C % V == 0 && aligned16(out, inp, weight))
            rmsnorm_forward_kernel<T, V><<<grid, EW_BLOCK, 0, stream>>>(out, rstd, inp, weight, N, C, eps);
        else
            rmsnorm_forward_kernel<T, 1><<<grid, EW_BLOCK, 0, stream>>>(out, rstd, inp, weight, N, C, eps);
    }
    cudaCheck(cudaGetLastError());
}

// dinp (N, C) += rstd * (dy*w - x*rstd * mean_c(dy*w*x*rstd)). One warp per row.
template <typename T, int W>
__global__ void rmsnorm_backward_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight,
                                             const float* rstd, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T* x = inp + (size_t)row * C;
    const T* dy = dout + (size_t)row * C;
    const float s = rstd[row];
    float b = 0.0f;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> xv = load_pack<W>(x + c), d = load_pack<W>(dy + c), w = load_pack<W>(weight + c);
#pragma unroll
        for (int k = 0; k < W; k++) b += to_float(d.v[k]) * to_float(w.v[k]) * to_float(xv.v[k]) * s;
    }
    b = warp_sum(b) / C;
    T* dx = dinp + (size_t)row * C;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> xv = load_pack<W>(x + c), d = load_pack<W>(dy + c), w = load_pack<W>(weight + c);
        Pack<T, W> g = load_pack<W>(dx + c);
#pragma unroll
        for (int k = 0; k < W; k++) {
            const float delta = s * (to_float(d.v[k]) * to_float(w.v[k]) - to_float(xv.v[k]) * s * b);
            g.v[k] = from_float<T>(to_float(g.v[k]) + delta);
        }
        store_pack<W>(dx + c, g);
    }
}

// dinp (N, C) += input gradient (residual stream); dweight (C) += parameter gradient. dout, inp (N, C);
// weight (C); rstd (N) from the forward. scratch: >= rmsnorm_backward_scratch_bytes(N, C) bytes, 16-byte
// aligned, contents ignored. dinp must alias neither dout nor inp.
template <typename T>
void rmsnorm_backward_cuda(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const float* rstd,
                           int N, int C, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (N > 0 && C > 0) {
        ew_check_scratch("rmsnorm_backward_cuda", scratch, scratch_bytes, rmsnorm_backward_scratch_bytes(N, C));
        const unsigned grid = (unsigned)ceil_div(N, EW_BLOCK / 32);
        if (C % V == 0 && aligned16(dinp, dout, inp, weight))
            rmsnorm_backward_dinp_kernel<T, V><<<grid, EW_BLOCK, 0, stream>>>(dinp, dout, inp, weight, rstd, N, C);
        else
            rmsnorm_backward_dinp_kernel<T, 1><<<grid, EW_BLOCK, 0, stream>>>(dinp, dout, inp, weight, rstd, N, C);
        cudaCheck(cudaGetLastError());
        colsum_launch<T, false>(dweight, (T*)nullptr, static_cast<float*>(scratch), dout, inp, (const float*)nullptr,
                                rstd, N, C, C % V == 0 && aligned16(dout, inp), stream);
    }
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void rmsnorm_forward_cuda<float>(float*, float*, const float*, const float*, int, int, float,
                                                 cudaStream_t);
extern template void rmsnorm_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*,
                                                         const __nv_bfloat16*, int, int, float, cudaStream_t);
extern template void rmsnorm_backward_cuda<float>(float*, float*, const float*, const float*, const float*,
                                                  const float*, int, int, void*, size_t, cudaStream_t);
extern template void rmsnorm_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                                          const __nv_bfloat16*, const __nv_bfloat16*, const float*,
                                                          int, int, void*, size_t, cudaStream_t);
#endif
