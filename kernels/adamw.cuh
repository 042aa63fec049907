// AdamW with fp32 master weights + stochastic rounding, and the gradient norm's sum of squares: CUDA twins of
// kernels/adamw.h:
//   adamw_update_cuda   <->  adamw_update_cpu   PyTorch AdamW (decay first, then the bias-corrected step)
//   sum_squares_cuda    <->  sum_squares_cpu    sum of g^2 in double, deterministic, result on the host
// The update repeats the CPU twin's fp32 operations in its order with explicit _rn intrinsics (no FMA contraction),
// so master weights, m and v should match an x86-64 CPU twin bitwise. master != null (bf16 build): params = master
// rounded stochastically to bf16 with bits from (seed, element index); master == null: params updated in place. The
// seed must change every step and differ between tensors. sum_squares adds in a fixed, device-independent order.
// Why and how: docs/DESIGN.md sections 3.3 (the update, master weights, the rounding) and 3.2 (the sum's order).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/adamw.h"
#include "kernels/cuda_sizes.h"            // SUMSQ_BLOCKS, SUM_SQUARES_SCRATCH_BYTES
#include "kernels/elementwise_common.cuh"  // stochastic_round, to_float, 128-bit packs

// ---- AdamW ----

// adamw_element (kernels/adamw.h) in fp32 with explicit _rn intrinsics (no FMA contraction), so that its bits are
// the CPU twin's: the moments m, v absorb g, then p0 decays and takes the step; returns the new parameter. s holds
// the twin's scalars; one_minus_beta1/2 are 1 - beta1/2 in float, as the twin computes them.
__device__ inline float adamw_element_rn(float p0, float g, float& m, float& v, const AdamWScalars<float>& s,
                                         float one_minus_beta1, float one_minus_beta2) {
    // CPU: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g; p = p * (1 - lr*wd);
    //      p = p - step_size * m / (sqrt(v) / bc2_sqrt + eps)
    m = __fadd_rn(__fmul_rn(s.beta1, m), __fmul_rn(one_minus_beta1, g));
    v = __fadd_rn(__fmul_rn(s.beta2, v), __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
    const float p = __fmul_rn(p0, s.decay);
    const float den = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bc2_sqrt), s.eps);
    return __fsub_rn(p, __fdiv_rn(__fmul_rn(s.step_size, m), den));
}

template <typename T>
__global__ void adamw_kernel(T* params, float* master, const T* grads, float* m, float* v, size_t n,
                             AdamWScalars<float> s, float one_minus_beta1, float one_minus_beta2, float grad_scale,
                             uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i];
        const float p1 = adamw_element_rn(master ? master[i] : to_float(params[i]),
                                          __fmul_rn(to_float(grads[i]), grad_scale), mi, vi, s, one_minus_beta1,
                                          one_minus_beta2);
        m[i] = mi;
        v[i] = vi;
        if (master) master[i] = p1;
        params[i] = stochastic_round<T>(p1, seed, i);
    }
}

// params (n) T; master (n) fp32 or null (see above); grads (n) T; m, v (n) fp32, updated in place. t is the
// 1-based step; wd = 0 for tensors that are not decayed; grad_scale carries the global-norm clipping.
template <typename T>
void adamw_update_cuda(T* params, float* master, const T* grads, float* m, float* v, size_t n, float lr, float beta1,
                       float beta2, float eps, float wd, int t, float grad_scale, uint64_t seed, cudaStream_t stream) {
    if (n > 0) {
        const AdamWScalars<float> s(lr, beta1, beta2, eps, wd, t);  // the CPU twin's scalars
        adamw_kernel<T><<<cuda_grid_1d(n, EW_BLOCK), EW_BLOCK, 0, stream>>>(params, master, grads, m, v, n, s,
                                                                            1.0f - beta1, 1.0f - beta2, grad_scale,
                                                                            seed);
    }
    cudaCheck(cudaGetLastError());
}

// ---- sum of squares ----

// SUMSQ_BLOCKS (the most stage-1 blocks: partial sums, and the stage-2 block size) and SUM_SQUARES_SCRATCH_BYTES (its
// partials + the result) are in kernels/cuda_sizes.h, which the planner reads
constexpr int SUMSQ_THREADS = 256;

// fixed-tree block sum of a double (blockDim.x a multiple of 32, <= 1024); the result is valid in thread 0
__device__ inline double block_sum_double(double x) {
    __shared__ double warp_part[32];
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
    x = warp_sum(x);
    if (lane == 0) warp_part[wid] = x;
    __syncthreads();
    double s = 0.0;
    if (wid == 0) {
        s = lane < nw ? warp_part[lane] : 0.0;
        s = warp_sum(s);
    }
    __syncthreads();  // warp_part may be reused by a following call
    return s;
}

template <typename T, int W>
__global__ void sum_squares_partial_kernel(double* partials, const T* g, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x, tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    double acc = 0.0;
    const size_t npack = n / W;
    for (size_t p = tid; p < npack; p += stride) {
        const Pack<T, W> a = load_pack<W>(g + p * W);
#pragma unroll
        for (int k = 0; k < W; k++) {
            const double x = (double)to_float(a.v[k]);
            acc += x * x;
        }
    }
    for (size_t i = npack * W + tid; i < n; i += stride) {
        const double x = (double)to_float(g[i]);
        acc += x * x;
    }
    const double s = block_sum_double(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// *out = (accumulate ? *out : 0) + sum of the `blocks` partials (one block of SUMSQ_BLOCKS threads; those past
// `blocks` add 0, what a block without elements summed)
template <int Dummy = 0>  // a template only so that the header can be included by several translation units
__global__ void __launch_bounds__(SUMSQ_BLOCKS)
    sum_squares_final_kernel(double* out, const double* partials, int blocks, bool accumulate) {
    const double s = block_sum_double((int)threadIdx.x < blocks ? partials[threadIdx.x] : 0.0);
    if (threadIdx.x == 0) *out = accumulate ? *out + s : s;
}


// Device-side variant, no synchronisation: *out (device double) = sum of g^2 (accumulate = false) or += it
// (accumulate = true: sum several tensors into one total, still in a fixed order). scratch: >= SUMSQ_BLOCKS
// doubles (SUM_SQUARES_SCRATCH_BYTES suffices), 16-byte aligned; out may be scratch's last double.
template <typename T>
void sum_squares_device_cuda(double* out, const T* g, size_t n, bool accumulate, void* scratch,
                             size_t scratch_bytes, cudaStream_t stream) {
    ew_check_scratch("sum_squares_device_cuda", scratch, scratch_bytes, SUMSQ_BLOCKS * sizeof(double));
    double* partials = static_cast<double*>(scratch);
    constexpr int V = vec128<T>();
    const bool packed = aligned16(g);
    // Stage 1's grid: a block per SUMSQ_THREADS packs, at most SUMSQ_BLOCKS. Every pack stays with thread p (one pack
    // a thread up to SUMSQ_BLOCKS x SUMSQ_THREADS packs, the full grid beyond), and the blocks left out summed exactly
    // 0: the full grid's result to the bit, without its idle blocks (a small model's gradient norm, Muon's per-matrix
    // norms: on the CPU execution layer each idle thread still passed every barrier).
    const int blocks = (int)cuda_grid_1d(packed ? n / V : n, SUMSQ_THREADS, SUMSQ_BLOCKS);
    if (packed)
        sum_squares_partial_kernel<T, V><<<blocks, SUMSQ_THREADS, 0, stream>>>(partials, g, n);
    else
        sum_squares_partial_kernel<T, 1><<<blocks, SUMSQ_THREADS, 0, stream>>>(partials, g, n);
    cudaCheck(cudaGetLastError());
    sum_squares_final_kernel<<<1, SUMSQ_BLOCKS, 0, stream>>>(out, partials, blocks, accumulate);
    cudaCheck(cudaGetLastError());
}

// sum of squares of g (n) in double, returned to the host: synchronises `stream`. scratch: >=
// SUM_SQUARES_SCRATCH_BYTES bytes of device memory, 16-byte aligned.
template <typename T>
double sum_squares_cuda(const T* g, size_t n, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
    ew_check_scratch("sum_squares_cuda", scratch, scratch_bytes, SUM_SQUARES_SCRATCH_BYTES);
    double* result = static_cast<double*>(scratch) + SUMSQ_BLOCKS;
    sum_squares_device_cuda<T>(result, g, n, false, scratch, scratch_bytes, stream);
    double host = 0.0;
    cudaCheck(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaGetLastError());
    return host;
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void adamw_update_cuda<float>(float*, float*, const float*, float*, float*, size_t, float, float,
                                              float, float, float, int, float, uint64_t, cudaStream_t);
extern template void adamw_update_cuda<__nv_bfloat16>(__nv_bfloat16*, float*, const __nv_bfloat16*, float*, float*,
                                                      size_t, float, float, float, float, float, int, float, uint64_t,
                                                      cudaStream_t);
extern template void sum_squares_device_cuda<float>(double*, const float*, size_t, bool, void*, size_t,
                                                    cudaStream_t);
extern template void sum_squares_device_cuda<__nv_bfloat16>(double*, const __nv_bfloat16*, size_t, bool, void*,
                                                            size_t, cudaStream_t);
extern template double sum_squares_cuda<float>(const float*, size_t, void*, size_t, cudaStream_t);
extern template double sum_squares_cuda<__nv_bfloat16>(const __nv_bfloat16*, size_t, void*, size_t, cudaStream_t);
#endif
