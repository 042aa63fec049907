// Rotary position embedding (rotate-half, Hugging Face LLaMA), CUDA twin of kernels/rope.h:
//   rope_cuda  <->  rope_cpu    qkv (B, T, 3C) rotated in place, q and k parts; backward = inverse rotation
// The (cos, sin) table freqs (T, HS/2, 2) is NOT computed here: the backend computes it once on the host with
// rope_table_cpu (float; angles in fp32, cos/sin in double, as the reference) and uploads it, so both backends
// rotate by the very same table values.
// One thread per (row, q|k, head, W consecutive i of the first half): it rotates the pairs (i, i + HS/2).
// 128-bit packs when HS/2 is a multiple of W (8 bf16 / 4 fp32) and qkv is 16-byte aligned, scalar otherwise.
// fp32 math, one rounding to T per element. v (the third C block of each row) is never touched.
#pragma once
#include <cstddef>

#include "kernels/elementwise_common.cuh"
#include "kernels/rope.h"

template <typename T, int W>
__global__ void rope_kernel(T* qkv, const float* freqs, int B, int Tlen, int C, int NH, float dir) {
    const int HS = C / NH, h = HS / 2, per_head = h / W;
    const size_t total = (size_t)B * Tlen * 2 * NH * per_head;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(p % per_head) * W;
        size_t rest = p / per_head;
        const int head = (int)(rest % NH);
        rest /= NH;
        const int part = (int)(rest % 2);  // 0 = q, 1 = k
        const size_t n = rest / 2;         // row b * T + t
        const int t = (int)(n % Tlen);
        T* x = qkv + n * 3 * C + (size_t)part * C + (size_t)head * HS;
        const Pack<T, W> a = load_pack<W>(x + i), b = load_pack<W>(x + i + h);
        const float2* f = reinterpret_cast<const float2*>(freqs) + (size_t)t * h + i;  // (cos, sin) pairs
        Pack<T, W> oa, ob;
#pragma unroll
        for (int k = 0; k < W; k++) {
            const float2 cs = f[k];
            const float c = cs.x, s = dir * cs.y;
            const float x1 = to_float(a.v[k]), x2 = to_float(b.v[k]);
            oa.v[k] = from_float<T>(x1 * c - x2 * s);
            ob.v[k] = from_float<T>(x2 * c + x1 * s);
        }
        store_pack<W>(x + i, oa);
        store_pack<W>(x + i + h, ob);
    }
}

// qkv (B, T, 3C) in place; freqs (T, HS/2, 2) fp32 on the device (rope_table_cpu's output, uploaded; it needs
// 8-byte alignment, which any cudaMalloc'd or float2-indexed offset has). backward = true rotates by -angle.
// HS = C / NH must be even (as on the CPU).
template <typename T>
void rope_cuda(T* qkv, const float* freqs, int B, int Tlen, int C, int NH, bool backward, cudaStream_t stream) {
    constexpr int V = vec128<T>();
    const int h = C / NH / 2;
    const float dir = backward ? -1.0f : 1.0f;
    const size_t pairs = (size_t)B * Tlen * 2 * NH * h;
    if (pairs > 0) {
        if (h % V == 0 && aligned16(qkv))
            rope_kernel<T, V><<<cuda_grid_1d(pairs / V, EW_BLOCK), EW_BLOCK, 0, stream>>>(qkv, freqs, B, Tlen, C,
                                                                                           NH, dir);
        else
            rope_kernel<T, 1><<<cuda_grid_1d(pairs, EW_BLOCK), EW_BLOCK, 0, stream>>>(qkv, freqs, B, Tlen, C, NH,
                                                                                       dir);
    }
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void rope_cuda<float>(float*, const float*, int, int, int, int, bool, cudaStream_t);
extern template void rope_cuda<__nv_bfloat16>(__nv_bfloat16*, const float*, int, int, int, int, bool, cudaStream_t);
#endif
