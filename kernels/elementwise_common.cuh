// Helpers shared by the elementwise CUDA kernel family (encoder, layernorm, rmsnorm, residual, gelu, swiglu,
// rope, adamw .cuh): 128-bit packs, a flat elementwise map, warp sums, the deterministic row-chunked column sums
// that the norms' weight gradients use, the scratch-size check, and the counter-based hash + stochastic rounding
// of the optimizer.
//
// Storage type T is float or __nv_bfloat16 (floatX, common/cuda_common.cuh); every sum is fp32 (the gradient
// norm: fp64). Nothing here uses float atomics: every reduction has a fixed order that depends only on the
// shapes (and on which pointers are 16-byte aligned, which fixes the vector width), never on timing, so results
// are bitwise reproducible run to run.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/cuda_common.cuh"
#include "kernels/cuda_sizes.h"  // colsum_chunks and the other scratch sizes the planner counts

// ---------------------------------------------------------------------------------------------------------------
// 128-bit packs
// ---------------------------------------------------------------------------------------------------------------

// W elements of T moved as one aligned access: W = 16 / sizeof(T) (8 bf16 or 4 fp32) is one 128-bit load/store,
// W = 1 is the scalar fallback for widths that are not a multiple of W or pointers that are not 16-byte aligned.
template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
    T v[W];
};

// elements of T per 128-bit access
template <typename T>
constexpr int vec128() {
    return (int)(16 / sizeof(T));
}

template <int W, typename T>
__device__ __forceinline__ Pack<T, W> load_pack(const T* p) {
    return *reinterpret_cast<const Pack<T, W>*>(p);
}
template <int W, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, W>& x) {
    *reinterpret_cast<Pack<T, W>*>(p) = x;
}

// true when every non-null pointer is 16-byte aligned (cudaMalloc gives 256; offsets into a buffer may not)
inline bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }
template <typename... Ps>
inline bool aligned16(const void* p, Ps... rest) {
    return aligned16(p) && aligned16(rest...);
}

// grid-stride launch size for `count` work items (common/cuda_check.h's cuda_grid_1d caps at 2^20 blocks)
constexpr int EW_BLOCK = 256;

// ---------------------------------------------------------------------------------------------------------------
// flat elementwise map: out[i] = op(x[i], y[i]) over n elements (residual add, GeLU forward/backward)
// ---------------------------------------------------------------------------------------------------------------

// Each thread loads its pack of x and y before storing out, so out may alias x or y (in place). y may be null
// when NIN == 1. The tail (n not a multiple of W) is done by a scalar loop in the same kernel.
template <typename T, int W, int NIN, typename Op>
__global__ void ew_map_kernel(T* out, const T* x, const T* y, size_t n, Op op) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t npack = n / W;
    for (size_t p = tid; p < npack; p += stride) {
        const Pack<T, W> a = load_pack<W>(x + p * W);
        const Pack<T, W> b = NIN == 2 ? load_pack<W>(y + p * W) : a;
        Pack<T, W> o;
#pragma unroll
        for (int k = 0; k < W; k++)
            o.v[k] = from_float<T>(op(to_float(a.v[k]), NIN == 2 ? to_float(b.v[k]) : 0.0f));
        store_pack<W>(out + p * W, o);
    }
    for (size_t i = npack * W + tid; i < n; i += stride)
        out[i] = from_float<T>(op(to_float(x[i]), NIN == 2 ? to_float(y[i]) : 0.0f));
}

template <typename T, int NIN, typename Op>
void ew_map_launch(T* out, const T* x, const T* y, size_t n, Op op, cudaStream_t stream) {
    if (n == 0) return;
    constexpr int V = vec128<T>();
    bool vec = aligned16(out) && aligned16(x) && (NIN == 1 || aligned16(y));
    if (vec) {
        unsigned grid = cuda_grid_1d(n / V > 0 ? n / V : 1, EW_BLOCK);
        ew_map_kernel<T, V, NIN><<<grid, EW_BLOCK, 0, stream>>>(out, x, y, n, op);
    } else {
        ew_map_kernel<T, 1, NIN><<<cuda_grid_1d(n, EW_BLOCK), EW_BLOCK, 0, stream>>>(out, x, y, n, op);
    }
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------------------------
// warp sums (butterfly: every lane ends with the same, fixed-order sum)
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ double warp_sum(double x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// ---------------------------------------------------------------------------------------------------------------
// scratch checks (internal errors: print and exit like cudaCheck)
// ---------------------------------------------------------------------------------------------------------------
inline void ew_check_scratch(const char* op, const void* scratch, size_t have, size_t need) {
    if (need == 0) return;
    if (!scratch || have < need || ((uintptr_t)scratch & 15u)) {
        std::fprintf(stderr, "[CUDA ERROR] %s: scratch %p of %zu bytes, needs %zu bytes, 16-byte aligned\n", op,
                     scratch, have, need);
        std::exit(EXIT_FAILURE);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// deterministic column sums over rows (the norms' dweight / dbias)
// ---------------------------------------------------------------------------------------------------------------
// Stage 1 (colsum_partial_kernel): block (32, COLSUM_WARPS) owns a tile of 32*W columns and one of `chunks`
// contiguous row ranges. Warp w sums rows r0 + w, r0 + w + COLSUM_WARPS, ... in order; the warps' sums are then
// added in warp order and written to partial[s][chunk][c]. Stage 2 (colsum_finalize_kernel): one thread per
// column adds the chunk partials in chunk order and adds the total into the gradient once (+=).
// The order depends only on N, C and W, so the result is bitwise reproducible; it differs from the CPU's plain
// row order only by rounding.
constexpr int COLSUM_WARPS = 8;

// LN = true: layernorm, sums s0 = dy * (x - mean) * rstd (dweight) and s1 = dy (dbias).
// LN = false: rmsnorm, sum s0 = dy * x * rstd (dweight). The expressions are the CPU twins'.
template <typename T, int W, bool LN>
__global__ void colsum_partial_kernel(float* partial, const T* dout, const T* inp, const float* mean,
                                      const float* rstd, int N, int C, int chunks) {
    constexpr int NS = LN ? 2 : 1;
    constexpr int TILE = 32 * W;
    __shared__ float part[NS][COLSUM_WARPS][TILE];
    const int lane = threadIdx.x, w = threadIdx.y;
    const int c = blockIdx.x * TILE + lane * W;
    const int chunk = blockIdx.y;
    const int rows_per = (N + chunks - 1) / chunks;
    const int r0 = chunk * rows_per;
    const int r1 = min(N, r0 + rows_per);
    float acc[NS][W];
#pragma unroll
    for (int s = 0; s < NS; s++)
#pragma unroll
        for (int k = 0; k < W; k++) acc[s][k] = 0.0f;
    if (c < C) {  // C % W == 0, so a pack is all in range or all out
        for (int r = r0 + w; r < r1; r += COLSUM_WARPS) {
            Pack<T, W> dy = load_pack<W>(dout + (size_t)r * C + c), x = load_pack<W>(inp + (size_t)r * C + c);
            const float m = LN ? mean[r] : 0.0f, sd = rstd[r];
#pragma unroll
            for (int k = 0; k < W; k++) {
                float d = to_float(dy.v[k]), xv = to_float(x.v[k]);
                if (LN) {
                    acc[0][k] += d * (xv - m) * sd;
                    acc[NS - 1][k] += d;
                } else {
                    acc[0][k] += d * xv * sd;
                }
            }
        }
    }
#pragma unroll
    for (int s = 0; s < NS; s++)
#pragma unroll
        for (int k = 0; k < W; k++) part[s][w][lane * W + k] = acc[s][k];
    __syncthreads();
    for (int j = w * 32 + lane; j < TILE; j += 32 * COLSUM_WARPS) {
        int cc = blockIdx.x * TILE + j;
        if (cc >= C) continue;
#pragma unroll
        for (int s = 0; s < NS; s++) {
            float sum = 0.0f;
            for (int ww = 0; ww < COLSUM_WARPS; ww++) sum += part[s][ww][j];  // warp order
            partial[((size_t)s * chunks + chunk) * C + cc] = sum;
        }
    }
}

// out0[c] += sum_k partial[0][k][c]; out1 (nullable) likewise from partial[1]. Chunk order.
template <typename T>
__global__ void colsum_finalize_kernel(T* out0, T* out1, const float* partial, int chunks, int C) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        float s0 = 0.0f, s1 = 0.0f;
        for (int k = 0; k < chunks; k++) s0 += partial[(size_t)k * C + c];
        out0[c] = from_float<T>(to_float(out0[c]) + s0);
        if (out1) {
            for (int k = 0; k < chunks; k++) s1 += partial[((size_t)chunks + k) * C + c];
            out1[c] = from_float<T>(to_float(out1[c]) + s1);
        }
    }
}

// Both stages on `stream`. partial: NS * colsum_chunks(N) * C floats.
template <typename T, bool LN>
void colsum_launch(T* out0, T* out1, float* partial, const T* dout, const T* inp, const float* mean,
                   const float* rstd, int N, int C, bool vec, cudaStream_t stream) {
    const int chunks = colsum_chunks(N);
    dim3 block(32, COLSUM_WARPS);
    if (vec) {
        constexpr int V = vec128<T>();
        dim3 grid(ceil_div(C, 32 * V), chunks);
        colsum_partial_kernel<T, V, LN><<<grid, block, 0, stream>>>(partial, dout, inp, mean, rstd, N, C, chunks);
    } else {
        dim3 grid(ceil_div(C, 32), chunks);
        colsum_partial_kernel<T, 1, LN><<<grid, block, 0, stream>>>(partial, dout, inp, mean, rstd, N, C, chunks);
    }
    cudaCheck(cudaGetLastError());
    colsum_finalize_kernel<T><<<ceil_div(C, EW_BLOCK), EW_BLOCK, 0, stream>>>(out0, out1, partial, chunks, C);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------------------------
// counter-based hash and stochastic rounding to bf16 (host and device: tests and resume re-rounding use it too)
// ---------------------------------------------------------------------------------------------------------------

// 64-bit finalizer (SplitMix64's mixing function): a bijection with full avalanche.
__host__ __device__ inline uint64_t ew_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// 32 random bits for element `idx` under `seed`: a pure function of (seed, idx), so every launch configuration
// gives the same bits (no per-thread RNG state).
__host__ __device__ inline uint32_t ew_hash32(uint64_t seed, uint64_t idx) {
    return (uint32_t)(ew_mix64(ew_mix64(seed) ^ (idx * 0x9E3779B97F4A7C15ull)) >> 32);
}

// The bits of x, on the device and on the host alike.
__host__ __device__ inline uint32_t ew_float_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
#endif
}

// bf16 bits of x rounded stochastically with 16 random bits r: add r to the 16 bits that bf16 drops, then drop
// them. The magnitude rounds up with probability (dropped bits) / 2^16, so E[result] = x up to 2^-16 ulp
// (unbiased for either sign, since the bits are sign-magnitude). Inf and NaN round to nearest (NaN stays NaN);
// a finite x above the largest bf16 may round up to inf, as round-to-nearest would.
__host__ __device__ inline uint16_t stochastic_round_bf16_bits(float x, uint32_t r) {
    uint32_t u = ew_float_bits(x);
    if ((u & 0x7F800000u) == 0x7F800000u) {  // inf / NaN
        if (u & 0x007FFFFFu) return (uint16_t)((u >> 16) | 0x0040u);
        return (uint16_t)(u >> 16);
    }
    return (uint16_t)((u + (r & 0xFFFFu)) >> 16);
}

// T's value of x: stochastic rounding for bf16 (random bits from (seed, idx)), identity for fp32
template <typename T>
__host__ __device__ inline T stochastic_round(float x, uint64_t seed, uint64_t idx);
template <>
__host__ __device__ inline float stochastic_round<float>(float x, uint64_t, uint64_t) {
    return x;
}
template <>
__host__ __device__ inline __nv_bfloat16 stochastic_round<__nv_bfloat16>(float x, uint64_t seed, uint64_t idx) {
    __nv_bfloat16_raw raw;
    raw.x = stochastic_round_bf16_bits(x, ew_hash32(seed, idx));
    return __nv_bfloat16(raw);
}
