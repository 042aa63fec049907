// The naive CUDA attention: the test oracle of test/test_attention_cuda.cu, not part of the trainer. One thread per
// output element, fp32 math, the scores materialised as (B*NH, T, T) fp32 in global memory (slow and memory-hungry:
// small T). Same contract as attention_forward_cuda / attention_backward_cuda (kernels/attention.cuh), whose kernels
// (kernels/attention_simt.cu, kernels/attention_mma.cu) the test compares with it; CPU twins: kernels/attention.h
// (attention_forward_cpu, attention_backward_cpu). Header-only, so its kernels are compiled into the test program;
// the emulated build rewrites it like every .cuh under test/, and kernels/cuda_emu/coverage.py counts its kernels.
//   forward scratch: B*NH*T*T floats (scores / probabilities)
//   backward scratch: 2*B*NH*T*T + B*NH*T floats (P, dS, D)
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

#include "common/cuda_common.cuh"
#include "common/error.h"
#include "kernels/attention.cuh"

namespace attention_naive {

// =============================================================================================================
// naive kernels (test oracle): one thread per output element, scores materialised as (B*NH, T, T) fp32
// =============================================================================================================

// Masked score (i, j) of batch row b: causal and j > i, or padding (kv_len not null and j >= kv_len[b])
__device__ inline bool naive_masked(int i, int j, int b, bool causal, const int* kv_len) {
    return (causal && j > i) || (kv_len && j >= kv_len[b]);
}

// S[bh][i][j] = scale q_i . k_j (masked: -inf)
template <typename X>
__global__ void naive_scores_kernel(float* S, const X* qkv, int B, int T, int NH, int HS, bool causal,
                                    const int* kv_len, float scale) {
    const size_t total = (size_t)B * NH * T * T;
    const int C = NH * HS;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(idx % T), i = (int)(idx / T % T);
        const size_t bh = idx / ((size_t)T * T);
        const int h = (int)(bh % NH), b = (int)(bh / NH);
        if (naive_masked(i, j, b, causal, kv_len)) {
            S[idx] = -INFINITY;
            continue;
        }
        const X* q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * HS;
        const X* k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * HS;
        float s = 0.0f;
        for (int d = 0; d < HS; d++) s += to_float(q[d]) * to_float(k[d]);
        S[idx] = s * scale;
    }
}

// rows of S -> probabilities in place, lse (B, NH, T) (row index bh * T + i is lse's layout)
static __global__ void naive_softmax_kernel(float* S, float* lse, size_t rows, int T) {
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (size_t)gridDim.x * blockDim.x) {
        float* s = S + r * T;
        float m = -INFINITY;
        for (int j = 0; j < T; j++) m = fmaxf(m, s[j]);
        float sum = 0.0f;
        for (int j = 0; j < T; j++) sum += expf(s[j] - m);
        for (int j = 0; j < T; j++) s[j] = expf(s[j] - m) / sum;
        lse[r] = m + logf(sum);
    }
}

// out[b][t][h*HS + d] = sum_j P[bh][t][j] v_j[d]
template <typename X>
__global__ void naive_pv_kernel(X* out, const float* P, const X* qkv, int B, int T, int NH, int HS) {
    const int C = NH * HS;
    const size_t total = (size_t)B * T * C;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int d = (int)(idx % HS), h = (int)(idx / HS % NH), t = (int)(idx / C % T), b = (int)(idx / ((size_t)T * C));
        const float* p = P + (((size_t)b * NH + h) * T + t) * T;
        float o = 0.0f;
        for (int j = 0; j < T; j++) o += p[j] * to_float(qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * HS + d]);
        out[idx] = from_float<X>(o);
    }
}

// D[bh * T + i] = dO_i . O_i, one thread per row (the fast path's warp-per-row kernel is not reused here, so the
// oracle stays independent)
template <typename X>
__global__ void naive_rowdot_kernel(float* D, const X* dout, const X* out, int B, int T, int NH, int HS) {
    const size_t rows = (size_t)B * NH * T;
    const int C = NH * HS;
    for (size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(r % T), h = (int)(r / T % NH), b = (int)(r / ((size_t)T * NH));
        const size_t off = ((size_t)b * T + i) * C + (size_t)h * HS;
        float s = 0.0f;
        for (int d = 0; d < HS; d++) s += to_float(dout[off + d]) * to_float(out[off + d]);
        D[r] = s;
    }
}

// P = exp(S - lse), dS = P (dO_i . v_j - D_i), both (B*NH, T, T); zero where masked
template <typename X>
__global__ void naive_bwd_scores_kernel(float* P, float* dS, const X* qkv, const X* dout, const float* lse,
                                        const float* D, int B, int T, int NH, int HS, bool causal,
                                        const int* kv_len, float scale) {
    const size_t total = (size_t)B * NH * T * T;
    const int C = NH * HS;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(idx % T), i = (int)(idx / T % T);
        const size_t bh = idx / ((size_t)T * T);
        const int h = (int)(bh % NH), b = (int)(bh / NH);
        if (naive_masked(i, j, b, causal, kv_len)) {
            P[idx] = dS[idx] = 0.0f;
            continue;
        }
        const X* q = qkv + ((size_t)b * T + i) * 3 * C + (size_t)h * HS;
        const X* k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * HS;
        const X* v = k + C;
        const X* g = dout + ((size_t)b * T + i) * C + (size_t)h * HS;
        float s = 0.0f, dp = 0.0f;
        for (int d = 0; d < HS; d++) {
            s += to_float(q[d]) * to_float(k[d]);
            dp += to_float(g[d]) * to_float(v[d]);
        }
        const float p = expf(s * scale - lse[bh * T + i]);
        P[idx] = p;
        dS[idx] = p * (dp - D[bh * T + i]);
    }
}

// dqkv[b][t][part*C + h*HS + d]: part 0 dQ = scale dS K, part 1 dK = scale dS^T Q, part 2 dV = P^T dO
template <typename X>
__global__ void naive_bwd_grads_kernel(X* dqkv, const float* P, const float* dS, const X* qkv, const X* dout, int B,
                                       int T, int NH, int HS, float scale) {
    const int C = NH * HS;
    const size_t total = (size_t)B * T * 3 * C;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int col = (int)(idx % (3 * C)), t = (int)(idx / (3 * C) % T), b = (int)(idx / ((size_t)3 * C * T));
        const int part = col / C, h = col % C / HS, d = col % HS;
        const size_t bh = (size_t)b * NH + h;
        float acc = 0.0f;
        if (part == 0) {
            for (int j = 0; j < T; j++)
                acc += dS[(bh * T + t) * T + j] * to_float(qkv[((size_t)b * T + j) * 3 * C + C + (size_t)h * HS + d]);
            acc *= scale;
        } else if (part == 1) {
            for (int i = 0; i < T; i++)
                acc += dS[(bh * T + i) * T + t] * to_float(qkv[((size_t)b * T + i) * 3 * C + (size_t)h * HS + d]);
            acc *= scale;
        } else {
            for (int i = 0; i < T; i++)
                acc += P[(bh * T + i) * T + t] * to_float(dout[((size_t)b * T + i) * C + (size_t)h * HS + d]);
        }
        dqkv[idx] = from_float<X>(acc);
    }
}

// =============================================================================================================
// launchers
// =============================================================================================================

inline size_t attention_forward_naive_scratch_floats(int B, int T, int NH) { return (size_t)B * NH * T * T; }
inline size_t attention_backward_naive_scratch_floats(int B, int T, int NH) {
    return 2 * (size_t)B * NH * T * T + (size_t)B * NH * T;
}

inline void attention_forward_naive_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                         bool causal, const int* kv_len, float* scratch, cudaStream_t stream) {
    attention_cuda_check_shape("attention_forward_naive_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH, block = 256;
    const float scale = 1.0f / std::sqrt((float)HS);
    const size_t nscores = (size_t)B * NH * T * T, rows = (size_t)B * NH * T;
    naive_scores_kernel<floatX><<<cuda_grid_1d(nscores, block), block, 0, stream>>>(scratch, qkv, B, T, NH, HS,
                                                                                     causal, kv_len, scale);
    cudaCheck(cudaGetLastError());
    naive_softmax_kernel<<<cuda_grid_1d(rows, block), block, 0, stream>>>(scratch, lse, rows, T);
    cudaCheck(cudaGetLastError());
    naive_pv_kernel<floatX><<<cuda_grid_1d((size_t)B * T * C, block), block, 0, stream>>>(out, scratch, qkv, B, T,
                                                                                            NH, HS);
    cudaCheck(cudaGetLastError());
}

inline void attention_backward_naive_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                          const float* lse, int B, int T, int C, int NH, bool causal,
                                          const int* kv_len, float* scratch, cudaStream_t stream) {
    attention_cuda_check_shape("attention_backward_naive_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH, block = 256;
    const float scale = 1.0f / std::sqrt((float)HS);
    const size_t nscores = (size_t)B * NH * T * T;
    float* P = scratch;
    float* dS = P + nscores;
    float* D = dS + nscores;
    naive_rowdot_kernel<floatX><<<cuda_grid_1d((size_t)B * NH * T, block), block, 0, stream>>>(D, dout, out, B, T,
                                                                                               NH, HS);
    cudaCheck(cudaGetLastError());
    naive_bwd_scores_kernel<floatX><<<cuda_grid_1d(nscores, block), block, 0, stream>>>(P, dS, qkv, dout, lse, D, B,
                                                                                         T, NH, HS, causal, kv_len,
                                                                                         scale);
    cudaCheck(cudaGetLastError());
    naive_bwd_grads_kernel<floatX><<<cuda_grid_1d((size_t)B * T * 3 * C, block), block, 0, stream>>>(
        dqkv, P, dS, qkv, dout, B, T, NH, HS, scale);
    cudaCheck(cudaGetLastError());
}

}  // namespace attention_naive

using attention_naive::attention_backward_naive_cuda;
using attention_naive::attention_backward_naive_scratch_floats;
using attention_naive::attention_forward_naive_cuda;
using attention_naive::attention_forward_naive_scratch_floats;
