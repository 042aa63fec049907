// LayerNorm (GPT-2), CUDA twins of kernels/layernorm.h:
//   layernorm_forward_cuda   <->  layernorm_forward_cpu    out (N, C) = (x - mean) * rstd * weight + bias;
//                                                          mean, rstd (N) fp32
//   layernorm_backward_cuda  <->  layernorm_backward_cpu   dinp (N, C) += ..., dweight, dbias (C) += ...
// One warp per row, fp32 warp-butterfly sums, two passes (mean, then variance) as the CPU twin; 128-bit packs when C
// is a multiple of W and the pointers are 16-byte aligned. dweight and dbias by the deterministic two-stage column
// sums of elementwise_common.cuh (colsum_*) through the caller's scratch of layernorm_backward_scratch_bytes(N, C)
// (at most 2 KiB per channel). Rows, packs and the scratch's size: docs/DESIGN.md section 3.2 (norms).
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"  // colsum_*, warp_sum, Pack, load_pack
#include "kernels/layernorm.h"

template <typename T, int W>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                                         const T* bias, int N, int C, float eps) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;  // whole warps leave together
    const T* x = inp + (size_t)row * C;
    float sum = 0.0f;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> a = load_pack<W>(x + c);
#pragma unroll
        for (int k = 0; k < W; k++) sum += to_float(a.v[k]);
    }
    const float m = warp_sum(sum) / C;
    float var = 0.0f;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> a = load_pack<W>(x + c);
#pragma unroll
        for (int k = 0; k < W; k++) {
            const float d = to_float(a.v[k]) - m;
            var += d * d;
        }
    }
    const float s = 1.0f / sqrtf(warp_sum(var) / C + eps);
    T* o = out + (size_t)row * C;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> a = load_pack<W>(x + c), w = load_pack<W>(weight + c), b = load_pack<W>(bias + c);
        Pack<T, W> y;
#pragma unroll
        for (int k = 0; k < W; k++)
            y.v[k] = from_float<T>((to_float(a.v[k]) - m) * s * to_float(w.v[k]) + to_float(b.v[k]));
        store_pack<W>(o + c, y);
    }
    if (lane == 0) {
        if (mean) mean[row] = m;
        if (rstd) rstd[row] = s;
    }
}

// out (N, C); mean, rstd (N) fp32 (either may be null when not needed, e.g. a recompute pass); inp (N, C);
// weight, bias (C). out must not alias inp (the row is read three times).
template <typename T>
void layernorm_forward_cuda(T* out, float* mean, float* rstd, const T* inp, const T* weight, const T* bias, int N,
                            int C, float eps, cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (N > 0 && C > 0) {
        const int rows_per_block = EW_BLOCK / 32;
        const unsigned grid = (unsigned)ceil_div(N, rows_per_block);
        if (C % V == 0 && aligned16(out, inp, weight, bias))
            layernorm_forward_kernel<T, V><<<grid, EW_BLOCK, 0, stream>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
        else
            layernorm_forward_kernel<T, 1><<<grid, EW_BLOCK, 0, stream>>>(out, mean, rstd, inp, weight, bias, N, C, eps);
    }
    cudaCheck(cudaGetLastError());
}

// dinp (N, C) += rstd * (dy*w - mean_c(dy*w) - norm * mean_c(dy*w*norm)), norm = (x - mean) * rstd. One warp per
// row; every element is read before it is written by the same lane.
template <typename T, int W>
__global__ void layernorm_backward_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight,
                                               const float* mean, const float* rstd, int N, int C) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N) return;
    const T* x = inp + (size_t)row * C;
    const T* dy = dout + (size_t)row * C;
    const float m = mean[row], s = rstd[row];
    float a = 0.0f, b = 0.0f;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> xv = load_pack<W>(x + c), d = load_pack<W>(dy + c), w = load_pack<W>(weight + c);
#pragma unroll
        for (int k = 0; k < W; k++) {
            const float dn = to_float(d.v[k]) * to_float(w.v[k]);
            a += dn;
            b += dn * (to_float(xv.v[k]) - m) * s;
        }
    }
    a = warp_sum(a) / C;
    b = warp_sum(b) / C;
    T* dx = dinp + (size_t)row * C;
    for (int c = lane * W; c < C; c += 32 * W) {
        const Pack<T, W> xv = load_pack<W>(x + c), d = load_pack<W>(dy + c), w = load_pack<W>(weight + c);
        Pack<T, W> g = load_pack<W>(dx + c);
#pragma unroll
        for (int k = 0; k < W; k++) {
            const float norm = (to_float(xv.v[k]) - m) * s;
            const float delta = s * (to_float(d.v[k]) * to_float(w.v[k]) - a - norm * b);
            g.v[k] = from_float<T>(to_float(g.v[k]) + delta);
        }
        store_pack<W>(dx + c, g);
    }
}

// dinp (N, C) += input gradient (the residual stream's gradient); dweight, dbias (C) += parameter gradients.
// dout, inp (N, C); weight (C); mean, rstd (N) from the forward. scratch: >= layernorm_backward_scratch_bytes(N, C)
// bytes, 16-byte aligned, contents ignored. dinp must alias neither dout nor inp (as on the CPU, whose
// parameter gradients would then read the updated dinp).
template <typename T>
void layernorm_backward_cuda(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                             const float* mean, const float* rstd, int N, int C, void* scratch, size_t scratch_bytes,
                             cudaStream_t stream) {
    constexpr int V = vec128<T>();
    if (N > 0 && C > 0) {
        ew_check_scratch("layernorm_backward_cuda", scratch, scratch_bytes, layernorm_backward_scratch_bytes(N, C));
        const bool vec = C % V == 0 && aligned16(dinp, dout, inp, weight);
        const unsigned grid = (unsigned)ceil_div(N, EW_BLOCK / 32);
        if (vec)
            layernorm_backward_dinp_kernel<T, V>
                <<<grid, EW_BLOCK, 0, stream>>>(dinp, dout, inp, weight, mean, rstd, N, C);
        else
            layernorm_backward_dinp_kernel<T, 1>
                <<<grid, EW_BLOCK, 0, stream>>>(dinp, dout, inp, weight, mean, rstd, N, C);
        cudaCheck(cudaGetLastError());
        colsum_launch<T, true>(dweight, dbias, static_cast<float*>(scratch), dout, inp, mean, rstd, N, C,
                               C % V == 0 && aligned16(dout, inp), stream);
    }
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void layernorm_forward_cuda<float>(float*, float*, float*, const float*, const float*, const float*,
                                                   int, int, float, cudaStream_t);
extern template void layernorm_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, float*, float*, const __nv_bfloat16*,
                                                           const __nv_bfloat16*, const __nv_bfloat16*, int, int,
                                                           float, cudaStream_t);
extern template void layernorm_backward_cuda<float>(float*, float*, float*, const float*, const float*,
                                                    const float*, const float*, const float*, int, int, void*,
                                                    size_t, cudaStream_t);
extern template void layernorm_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*,
                                                            const __nv_bfloat16*, const __nv_bfloat16*,
                                                            const __nv_bfloat16*, const float*, const float*, int,
                                                            int, void*, size_t, cudaStream_t);
#endif
