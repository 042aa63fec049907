// Token (+ learned position) embedding, CUDA twins of kernels/encoder.h:
//   encoder_forward_cuda   <->  encoder_forward_cpu    out (B, T, C) = wte[tokens] (+ wpe[t])
//   encoder_backward_cuda  <->  encoder_backward_cpu   dwte[tokens] += dout, dwpe[t] += dout (accumulates)
// The backward is deterministic without float atomics (many rows can hit the same token): dwpe sums over b in the
// CPU twin's order; dwte sorts the rows by token on the device (a bitonic sort of token << 32 | row keys) and sums
// each token's run in one block in a fixed order. Scratch: encoder_backward_scratch_bytes(B, T) (8 bytes per row,
// rows rounded up to a power of two). tokens must lie in [0, V). The steps: docs/DESIGN.md section 3.2.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cuda_sizes.h"            // encoder_sort_len, encoder_backward_scratch_bytes
#include "kernels/elementwise_common.cuh"  // Pack, load_pack, to_float
#include "kernels/encoder.h"

constexpr int ENC_SORT_TILE = 2048;  // keys per shared-memory sort tile: 16 KiB, 1024 threads
constexpr int ENC_WARPS = 8;         // warps per block in the per-token sum

// the sort length P and the scratch bytes: encoder_sort_len, encoder_backward_scratch_bytes (kernels/cuda_sizes.h)

// ---- forward ----

// out (B*T, C): one thread per W channels of one row
template <typename T, int W>
__global__ void encoder_forward_kernel(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen,
                                       int C) {
    const size_t per_row = (size_t)(C / W), total = (size_t)B * Tlen * per_row;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (size_t)gridDim.x * blockDim.x) {
        const size_t n = p / per_row, c = (p % per_row) * W;
        const Pack<T, W> e = load_pack<W>(wte + (size_t)tokens[n] * C + c);
        Pack<T, W> o = e;
        if (wpe) {
            const Pack<T, W> q = load_pack<W>(wpe + (n % Tlen) * C + c);
#pragma unroll
            for (int k = 0; k < W; k++) o.v[k] = from_float<T>(to_float(e.v[k]) + to_float(q.v[k]));
        }
        store_pack<W>(out + n * C + c, o);
    }
}

// out (B, T, C) = wte[tokens] (+ wpe[t] when wpe is non-null: GPT-2; LLaMA has none). tokens: int32 on the device.
template <typename T>
void encoder_forward_cuda(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen, int C,
                          cudaStream_t stream) {
    constexpr int V = vec128<T>();
    const size_t total = (size_t)B * Tlen * C;
    if (total > 0) {
        if (C % V == 0 && aligned16(out, wte) && (!wpe || aligned16(wpe)))
            encoder_forward_kernel<T, V>
                <<<cuda_grid_1d(total / V, EW_BLOCK), EW_BLOCK, 0, stream>>>(out, tokens, wte, wpe, B, Tlen, C);
        else
            encoder_forward_kernel<T, 1>
                <<<cuda_grid_1d(total, EW_BLOCK), EW_BLOCK, 0, stream>>>(out, tokens, wte, wpe, B, Tlen, C);
    }
    cudaCheck(cudaGetLastError());
}

// ---- backward: dwpe ----

// dwpe (T, C) += sum over b of dout[b, t, :], b in order, fp32, from dwpe's own value (the CPU's order)
template <typename T, int W>
__global__ void encoder_backward_wpe_kernel(T* dwpe, const T* dout, int B, int Tlen, int C) {
    const size_t total = (size_t)Tlen * C / W;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (size_t)gridDim.x * blockDim.x) {
        const size_t e = p * W;  // = t * C + c, a whole pack inside one row since C % W == 0
        const Pack<T, W> d0 = load_pack<W>(dwpe + e);
        float acc[W];
#pragma unroll
        for (int k = 0; k < W; k++) acc[k] = to_float(d0.v[k]);
        for (int b = 0; b < B; b++) {
            const Pack<T, W> d = load_pack<W>(dout + (size_t)b * Tlen * C + e);
#pragma unroll
            for (int k = 0; k < W; k++) acc[k] += to_float(d.v[k]);
        }
        Pack<T, W> o;
#pragma unroll
        for (int k = 0; k < W; k++) o.v[k] = from_float<T>(acc[k]);
        store_pack<W>(dwpe + e, o);
    }
}

// ---- backward: grouping rows by token (bitonic sort of distinct 64-bit keys) ----

// (The sort kernels are templates over the key type, always uint64_t, only so that this header can be included
// by several translation units without duplicate kernel symbols.)

// keys[i] = token << 32 | i for i < BT, UINT64_MAX (sorts last) for BT <= i < P
template <typename K>
__global__ void encoder_keys_kernel(K* keys, const int32_t* tokens, size_t BT, size_t P) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < P; i += (size_t)gridDim.x * blockDim.x)
        keys[i] = i < BT ? ((K)(uint32_t)tokens[i] << 32) | (K)i : ~(K)0;
}

// Bitonic network, ascending overall: at stage k (block size being merged) and step j, the pair (i, i + j) with
// bit j of i clear is put in ascending order when bit k of i is clear, descending otherwise.
// One step with j >= the tile size: one thread per pair, in global memory.
template <typename K>
__global__ void bitonic_step_global_kernel(K* keys, size_t P, size_t k, size_t j) {
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < P / 2; t += (size_t)gridDim.x * blockDim.x) {
        const size_t i = (t / j) * 2 * j + (t % j), l = i + j;
        const bool asc = (i & k) == 0;
        const K a = keys[i], b = keys[l];
        if ((a > b) == asc) {
            keys[i] = b;
            keys[l] = a;
        }
    }
}
// All steps with j < S of stages k_lo..k_hi inside tiles of S keys (one block of S/2 threads per tile, S*8
// bytes of dynamic shared memory); the first stage starts at step j_first.
// (launched with up to ENC_SORT_TILE / 2 = 1024 threads: the bound keeps nvcc's register budget within what a block
// that size may use, or the launch would fail on the GPU alone)
template <typename K>
__global__ void __launch_bounds__(ENC_SORT_TILE / 2) bitonic_tile_kernel(K* keys, int S, size_t k_lo, size_t k_hi,
                                                                          size_t j_first) {
    extern __shared__ unsigned char bitonic_smem[];
    K* sk = reinterpret_cast<K*>(bitonic_smem);
    const size_t base = (size_t)blockIdx.x * S;
    for (int x = threadIdx.x; x < S; x += blockDim.x) sk[x] = keys[base + x];
    __syncthreads();
    for (size_t k = k_lo; k <= k_hi; k <<= 1) {
        for (size_t j = (k == k_lo ? j_first : k >> 1); j > 0; j >>= 1) {
            for (int t = threadIdx.x; t < S / 2; t += blockDim.x) {
                const int i = (int)((t / j) * 2 * j + (t % j)), l = i + (int)j;
                const bool asc = ((base + i) & k) == 0;
                const K a = sk[i], b = sk[l];
                if ((a > b) == asc) {
                    sk[i] = b;
                    sk[l] = a;
                }
            }
            __syncthreads();
        }
    }
    for (int x = threadIdx.x; x < S; x += blockDim.x) keys[base + x] = sk[x];
}

// Sorts keys[0, P) ascending, P a power of two >= 2.
inline void encoder_sort_keys(uint64_t* keys, size_t P, cudaStream_t stream) {
    const int S = (int)(P < (size_t)ENC_SORT_TILE ? P : (size_t)ENC_SORT_TILE);
    const unsigned tiles = (unsigned)(P / S);
    const size_t smem = (size_t)S * sizeof(uint64_t);
    bitonic_tile_kernel<uint64_t><<<tiles, S / 2, smem, stream>>>(keys, S, 2, (size_t)S, 1);  // sort each tile
    cudaCheck(cudaGetLastError());
    for (size_t k = 2 * (size_t)S; k <= P; k <<= 1) {
        for (size_t j = k >> 1; j >= (size_t)S; j >>= 1) {
            bitonic_step_global_kernel<uint64_t><<<cuda_grid_1d(P / 2, EW_BLOCK), EW_BLOCK, 0, stream>>>(keys, P, k, j);
            cudaCheck(cudaGetLastError());
        }
        bitonic_tile_kernel<uint64_t><<<tiles, S / 2, smem, stream>>>(keys, S, k, k, (size_t)S / 2);
        cudaCheck(cudaGetLastError());
    }
}

// ---- backward: dwte, one block per (token run, channel tile) ----

// block (32, ENC_WARPS). Work item = (sorted position i, channel tile); only the first position of each token's
// run does work (the condition is the same for the whole block, so the __syncthreads are uniform).
template <typename T, int W>
__global__ void encoder_backward_wte_kernel(T* dwte, const T* dout, const uint64_t* keys, int BT, int C) {
    constexpr int TILE = 32 * W;
    __shared__ float part[ENC_WARPS][TILE];
    const int lane = threadIdx.x, w = threadIdx.y;
    const int ntiles = (C + TILE - 1) / TILE;
    const size_t items = (size_t)BT * ntiles;
    for (size_t item = blockIdx.x; item < items; item += gridDim.x) {
        const int i = (int)(item / ntiles), tile = (int)(item % ntiles);
        const uint32_t tok = (uint32_t)(keys[i] >> 32);
        if (i > 0 && (uint32_t)(keys[i - 1] >> 32) == tok) continue;  // not the first row of this token's run
        const int c = tile * TILE + lane * W;
        float acc[W];
#pragma unroll
        for (int k = 0; k < W; k++) acc[k] = 0.0f;
        if (c < C) {
            for (int j = i + w; j < BT; j += ENC_WARPS) {
                const uint64_t key = keys[j];
                if ((uint32_t)(key >> 32) != tok) break;  // sorted: the run has ended
                const Pack<T, W> d = load_pack<W>(dout + (size_t)(uint32_t)key * C + c);
#pragma unroll
                for (int k = 0; k < W; k++) acc[k] += to_float(d.v[k]);
            }
        }
#pragma unroll
        for (int k = 0; k < W; k++) part[w][lane * W + k] = acc[k];
        __syncthreads();
        for (int x = w * 32 + lane; x < TILE; x += 32 * ENC_WARPS) {
            const int cc = tile * TILE + x;
            if (cc < C) {
                float s = 0.0f;
                for (int ww = 0; ww < ENC_WARPS; ww++) s += part[ww][x];  // warp order
                T* dst = dwte + (size_t)tok * C + cc;
                *dst = from_float<T>(to_float(*dst) + s);
            }
        }
        __syncthreads();  // part is reused by the next item
    }
}

// dwte (V, C) += dout rows of each token; dwpe (T, C) += dout summed over the batch (dwpe may be null: LLaMA).
// dout (B, T, C); tokens (B, T) int32 on the device. scratch: >= encoder_backward_scratch_bytes(B, T) bytes,
// 16-byte aligned, contents ignored (overwritten).
template <typename T>
void encoder_backward_cuda(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tlen, int C,
                           void* scratch, size_t scratch_bytes, cudaStream_t stream) {
    constexpr int V = vec128<T>();
    const size_t BT = (size_t)B * Tlen;
    if (BT > 0 && C > 0) {
        const bool vec = C % V == 0 && aligned16(dwte, dout) && (!dwpe || aligned16(dwpe));
        if (dwpe) {
            if (vec)
                encoder_backward_wpe_kernel<T, V><<<cuda_grid_1d((size_t)Tlen * C / V, EW_BLOCK), EW_BLOCK, 0,
                                                    stream>>>(dwpe, dout, B, Tlen, C);
            else
                encoder_backward_wpe_kernel<T, 1>
                    <<<cuda_grid_1d((size_t)Tlen * C, EW_BLOCK), EW_BLOCK, 0, stream>>>(dwpe, dout, B, Tlen, C);
            cudaCheck(cudaGetLastError());
        }
        const size_t P = encoder_sort_len(B, Tlen);
        ew_check_scratch("encoder_backward_cuda", scratch, scratch_bytes, P * sizeof(uint64_t));
        uint64_t* keys = static_cast<uint64_t*>(scratch);
        encoder_keys_kernel<uint64_t><<<cuda_grid_1d(P, EW_BLOCK), EW_BLOCK, 0, stream>>>(keys, tokens, BT, P);
        cudaCheck(cudaGetLastError());
        encoder_sort_keys(keys, P, stream);
        const int W = vec ? V : 1;
        const size_t items = BT * (size_t)ceil_div(C, 32 * W);
        const unsigned grid = (unsigned)(items < 4096 ? items : 4096);
        if (vec)
            encoder_backward_wte_kernel<T, V><<<grid, dim3(32, ENC_WARPS), 0, stream>>>(dwte, dout, keys, (int)BT, C);
        else
            encoder_backward_wte_kernel<T, 1><<<grid, dim3(32, ENC_WARPS), 0, stream>>>(dwte, dout, keys, (int)BT, C);
    }
    cudaCheck(cudaGetLastError());
}

#if !defined(PRAC_ELEMENTWISE_INSTANTIATE)
extern template void encoder_forward_cuda<float>(float*, const int32_t*, const float*, const float*, int, int, int,
                                                 cudaStream_t);
extern template void encoder_forward_cuda<__nv_bfloat16>(__nv_bfloat16*, const int32_t*, const __nv_bfloat16*,
                                                         const __nv_bfloat16*, int, int, int, cudaStream_t);
extern template void encoder_backward_cuda<float>(float*, float*, const float*, const int32_t*, int, int, int,
                                                  void*, size_t, cudaStream_t);
extern template void encoder_backward_cuda<__nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, const __nv_bfloat16*,
                                                          const int32_t*, int, int, int, void*, size_t,
                                                          cudaStream_t);
#endif
