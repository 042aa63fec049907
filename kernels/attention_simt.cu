// Multi-head attention, the Simt implementation (AttentionImpl::Simt): fp32 FMA flash attention kernels (forward,
// backward preprocess D = rowsum(dO * O), dK/dV, dQ) and their launchers (declared in kernels/attention_impl.cuh,
// called by the dispatch in kernels/attention_cuda.cu; the contract is kernels/attention.cuh). The only path of the
// fp32 build; in the bf16 build the fallback for unaligned tensors, or forced (PRAC_ATTENTION=simt). The rowdot
// pre-pass serves the Mma backward (kernels/attention_mma.cu) as well.
// CPU twins: kernels/attention.h (attention_forward_cpu, attention_backward_cpu).
// Notation (Q, K, V, O, dO, S, P, D, dP, dS) and determinism: see the head of kernels/attention_cuda.cu.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>

#include "common/cuda_common.cuh"
#include "kernels/attention_impl.cuh"

namespace attention_detail {

// =============================================================================================================
// 1. shared-memory tiles (the tile size kTile is in kernels/attention_impl.cuh)
// =============================================================================================================

// ---- SIMT shared-memory tiles: fp32, rows padded to HS + 1 floats ----
// The odd row stride puts row r's element d in bank (r * (HS + 1) + d) % 32, so 16 threads reading 16
// different rows at the same d hit 16 different banks (an odd stride is invertible mod 32).
template <int HS>
constexpr int simt_ld() { return HS + 1; }
constexpr int kSimtPLd = kTile + 1;  // the (64, 64) P / dS tiles, same reason

// dst (64, HS + 1) fp32 <- rows [0, rows_valid) of a strided (rows, HS) view; rows past the end are zero so
// they contribute nothing (their scores are masked as well).
template <typename X, int HS>
__device__ inline void simt_load_tile(float* dst, const X* src, size_t row_stride, int rows_valid) {
    for (int idx = threadIdx.x; idx < kTile * HS; idx += blockDim.x) {
        int r = idx / HS, d = idx % HS;  // consecutive threads read consecutive d: coalesced
        dst[r * simt_ld<HS>() + d] = r < rows_valid ? to_float(src[(size_t)r * row_stride + d]) : 0.0f;
    }
}

// The backward's two 4x4 register tiles of thread (tx, ty) over one pair of shared tiles:
//   s[i][j] = rows_a[ty*4+i] . cols_a[tx+16j],  dp[i][j] = rows_b[ty*4+i] . cols_b[tx+16j]   (dot products over HS)
// dK/dV kernel: rows K, V and columns Q, dO (s = K·Q, dp = V·dO); dQ kernel: rows Q, dO and columns K, V.
template <int HS>
__device__ __forceinline__ void simt_backward_tiles(float (&s)[4][4], float (&dp)[4][4], const float* rows_a,
                                                    const float* rows_b, const float* cols_a, const float* cols_b,
                                                    int tx, int ty) {
    constexpr int LD = simt_ld<HS>();
#pragma unroll 4
    for (int d = 0; d < HS; d++) {
        float ra[4], rb[4], ca[4], cb[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            ra[i] = rows_a[(ty * 4 + i) * LD + d];
            rb[i] = rows_b[(ty * 4 + i) * LD + d];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            ca[j] = cols_a[(tx + 16 * j) * LD + d];
            cb[j] = cols_b[(tx + 16 * j) * LD + d];
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = fmaf(ra[i], ca[j], s[i][j]);
                dp[i][j] = fmaf(rb[i], cb[j], dp[i][j]);
            }
    }
}

// Sum / max over the 16 lanes of a half-warp (lanes differing in bits 0..3). In the SIMT kernels the 16
// threads that share a row group ty are exactly one half-warp, so a row's statistics reduce with 4 shuffles.
__device__ inline float halfwarp_sum(float v) {
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline float halfwarp_max(float v) {
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// =============================================================================================================
// 2. SIMT kernels (fp32 FMA). 256 threads = a 16 x 16 grid (ty, tx); ty = threadIdx.x / 16 is one half-warp.
//    Each thread owns 4 rows of the tile (ty*4 .. ty*4+3) and, of the (64, 64) score tile, the 4 columns
//    tx, tx+16, tx+32, tx+48 (strided, so the 16 threads read 16 different padded rows: no bank conflicts);
//    of a (64, HS) accumulator it owns the same 4 rows and the HS/16 columns tx + 16k.
// =============================================================================================================
constexpr int kSimtThreads = 256;

template <int HS>
constexpr size_t simt_forward_smem() {  // Q, K, V tiles + P
    return (3 * (size_t)kTile * simt_ld<HS>() + (size_t)kTile * kSimtPLd) * sizeof(float);
}

// out (B, T, C), lse (B, NH, T) <- qkv (B, T, 3C).  grid (ceil(T/64), NH, B), block 256.   twin: attention_forward_cpu
// One block per (query tile, head, batch); loops over the key tiles before the key end (causal: up to the
// diagonal; padding: up to kv_len[b]) with the online softmax (running max m and sum l per row, O rescaled by
// exp(m_old - m_new) whenever the max grows).
template <typename X, int HS>
__global__ void __launch_bounds__(kSimtThreads)
    attention_forward_simt_kernel(X* out, float* lse, const X* qkv, int T, int NH, bool causal, const int* kv_len,
                                  float scale) {
    constexpr int LD = simt_ld<HS>(), DPT = HS / 16;
    extern __shared__ float smem[];
    float* Qs = smem;              // (64, LD)
    float* Ks = Qs + kTile * LD;   // (64, LD)
    float* Vs = Ks + kTile * LD;   // (64, LD)
    float* Ps = Vs + kTile * LD;   // (64, 65)
    const int C = NH * HS;
    const size_t rs = 3 * (size_t)C;                   // qkv row stride
    const int qt = gridDim.x - 1 - blockIdx.x;         // causal: the longest (last) query tiles start first
    const int h = blockIdx.y, b = blockIdx.z, q0 = qt * kTile;
    const X* base = qkv + (size_t)b * T * rs + (size_t)h * HS;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int kvl = attention_kv_end(kv_len, b, T);  // keys [kvl, T) are padding

    simt_load_tile<X, HS>(Qs, base + (size_t)q0 * rs, rs, min(kTile, T - q0));

    float m[4], l[4], o[4][DPT];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < DPT; k++) o[i][k] = 0.0f;
    }
    const int kend = causal ? min(kvl, q0 + kTile) : kvl;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // everyone is done with the previous K/V tile
        int kv = min(kTile, kvl - k0);
        simt_load_tile<X, HS>(Ks, base + (size_t)k0 * rs + C, rs, kv);
        simt_load_tile<X, HS>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
        __syncthreads();

        float s[4][4] = {};
#pragma unroll 8
        for (int d = 0; d < HS; d++) {
            float a[4], bk[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = Qs[(ty * 4 + i) * LD + d];
#pragma unroll
            for (int j = 0; j < 4; j++) bk[j] = Ks[(tx + 16 * j) * LD + d];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) s[i][j] = fmaf(a[i], bk[j], s[i][j]);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = q0 + ty * 4 + i;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int key = k0 + tx + 16 * j;
                bool ok = key < kvl && (!causal || key <= row);
                s[i][j] = ok ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            const float m_new = fmaxf(m[i], halfwarp_max(mx));
            // A row with no valid key so far keeps m = -inf; subtract 0 then, so exp gives 0 rather than NaN.
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float alpha = expf(m[i] - m_use);  // exp(-inf) = 0 on the first tile
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float p = expf(s[i][j] - m_use);
                sum += p;
                Ps[(ty * 4 + i) * kSimtPLd + tx + 16 * j] = p;
            }
            l[i] = l[i] * alpha + halfwarp_sum(sum);
            m[i] = m_new;
#pragma unroll
            for (int k = 0; k < DPT; k++) o[i][k] *= alpha;
        }
        // P rows ty*4.. are written and read only by this half-warp: a warp barrier is enough.
        __syncwarp();
#pragma unroll 4
        for (int j = 0; j < kTile; j++) {
            float p[4], v[DPT];
#pragma unroll
            for (int i = 0; i < 4; i++) p[i] = Ps[(ty * 4 + i) * kSimtPLd + j];
#pragma unroll
            for (int k = 0; k < DPT; k++) v[k] = Vs[j * LD + tx + 16 * k];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int k = 0; k < DPT; k++) o[i][k] = fmaf(p[i], v[k], o[i][k]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int row = q0 + ty * 4 + i;
        if (row >= T) continue;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;  // l = 0 only without keys (kv_len 0): out 0, as the twin
        X* orow = out + ((size_t)b * T + row) * C + (size_t)h * HS;
#pragma unroll
        for (int k = 0; k < DPT; k++) orow[tx + 16 * k] = from_float<X>(o[i][k] * inv);
        if (tx == 0) lse[((size_t)b * NH + h) * T + row] = m[i] + logf(l[i]);
    }
}

// D (B, NH, T) = rowsum(dO * O) per (b, t, h), fp32.  One warp per row, lanes over HS, fixed shuffle order.
// Shared by both implementations.
template <typename X>
__global__ void attention_backward_rowdot_kernel(float* D, const X* dout, const X* out, int B, int T, int NH,
                                                 int HS) {
    const size_t rows = (size_t)B * T * NH;
    const int lane = threadIdx.x % 32;
    const size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        // r = (b * T + t) * NH + h: consecutive warps read consecutive heads of one row of out/dout
        const int h = (int)(r % NH);
        const size_t bt = r / NH;
        const int t = (int)(bt % T), b = (int)(bt / T);
        const X* o = out + bt * NH * HS + (size_t)h * HS;
        const X* g = dout + bt * NH * HS + (size_t)h * HS;
        float s = 0.0f;
        for (int d = lane; d < HS; d += 32) s = fmaf(to_float(g[d]), to_float(o[d]), s);
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if (lane == 0) D[((size_t)b * NH + h) * T + t] = s;
    }
}

template <int HS>
constexpr size_t simt_dkdv_smem() {  // K, V, Q, dO tiles + P, dS + lse, D
    return (4 * (size_t)kTile * simt_ld<HS>() + 2 * (size_t)kTile * kSimtPLd + 2 * kTile) * sizeof(float);
}

// dK, dV parts of dqkv (B, T, 3C).  grid (ceil(T/64), NH, B), block 256.  One block per key tile; loops over
// the query tiles that can see it (causal: from the key tile's own row on; none when the tile is all padding, whose
// dK, dV are then zero) and accumulates dK, dV (64, HS) in registers. Here a thread's 4 rows are keys and its 4
// strided score columns are queries (S^T).
template <typename X, int HS>
__global__ void __launch_bounds__(kSimtThreads)
    attention_backward_dkdv_simt_kernel(X* dqkv, const X* dout, const X* qkv, const float* lse, const float* D,
                                        int T, int NH, bool causal, const int* kv_len, float scale) {
    constexpr int LD = simt_ld<HS>(), DPT = HS / 16;
    extern __shared__ float smem[];
    float* Ks = smem;                   // (64 keys, LD)
    float* Vs = Ks + kTile * LD;        // (64 keys, LD)
    float* Qs = Vs + kTile * LD;        // (64 queries, LD)
    float* dOs = Qs + kTile * LD;       // (64 queries, LD)
    float* Ps = dOs + kTile * LD;       // (64 keys, 65 queries)
    float* dSs = Ps + kTile * kSimtPLd; // (64 keys, 65 queries)
    float* lse_s = dSs + kTile * kSimtPLd;
    float* D_s = lse_s + kTile;
    const int C = NH * HS;
    const size_t rs = 3 * (size_t)C;
    const int h = blockIdx.y, b = blockIdx.z, k0 = blockIdx.x * kTile;  // causal: key tile 0 is the longest
    const X* base = qkv + (size_t)b * T * rs + (size_t)h * HS;
    const X* gbase = dout + (size_t)b * T * C + (size_t)h * HS;
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int kvl = attention_kv_end(kv_len, b, T);

    const int kv = min(kTile, kvl - k0);  // <= 0: a tile of padding keys
    simt_load_tile<X, HS>(Ks, base + (size_t)k0 * rs + C, rs, kv);
    simt_load_tile<X, HS>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);

    float dk[4][DPT], dv[4][DPT];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int k = 0; k < DPT; k++) dk[i][k] = dv[i][k] = 0.0f;

    const int qend = k0 < kvl ? T : 0;  // a tile of padding keys sees no query
    for (int q0 = causal ? k0 : 0; q0 < qend; q0 += kTile) {
        __syncthreads();  // previous Q/dO tile no longer read (first pass: K/V stores are ordered by the next one)
        const int nq = min(kTile, T - q0);
        simt_load_tile<X, HS>(Qs, base + (size_t)q0 * rs, rs, nq);
        simt_load_tile<X, HS>(dOs, gbase + (size_t)q0 * C, C, nq);
        if (threadIdx.x < kTile) {
            lse_s[threadIdx.x] = threadIdx.x < nq ? lse_bh[q0 + threadIdx.x] : 0.0f;
            D_s[threadIdx.x] = threadIdx.x < nq ? D_bh[q0 + threadIdx.x] : 0.0f;
        }
        __syncthreads();

        float s[4][4] = {}, dp[4][4] = {};
        simt_backward_tiles<HS>(s, dp, Ks, Vs, Qs, dOs, tx, ty);  // s = K·Q, dp = V·dO
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int key = k0 + ty * 4 + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int qi = tx + 16 * j, q = q0 + qi;
                const bool ok = key < kvl && q < T && (!causal || q >= key);
                const float p = ok ? expf(s[i][j] * scale - lse_s[qi]) : 0.0f;
                Ps[(ty * 4 + i) * kSimtPLd + qi] = p;
                dSs[(ty * 4 + i) * kSimtPLd + qi] = p * (dp[i][j] - D_s[qi]);
            }
        }
        __syncwarp();  // P / dS rows ty*4.. belong to this half-warp
#pragma unroll 4
        for (int j = 0; j < kTile; j++) {
            float p[4], ds[4], g[DPT], q[DPT];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                p[i] = Ps[(ty * 4 + i) * kSimtPLd + j];
                ds[i] = dSs[(ty * 4 + i) * kSimtPLd + j];
            }
#pragma unroll
            for (int k = 0; k < DPT; k++) {
                g[k] = dOs[j * LD + tx + 16 * k];
                q[k] = Qs[j * LD + tx + 16 * k];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int k = 0; k < DPT; k++) {
                    dv[i][k] = fmaf(p[i], g[k], dv[i][k]);
                    dk[i][k] = fmaf(ds[i], q[k], dk[i][k]);
                }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int key = k0 + ty * 4 + i;
        if (key >= T) continue;
        X* drow = dqkv + ((size_t)b * T + key) * rs + (size_t)h * HS;
#pragma unroll
        for (int k = 0; k < DPT; k++) {
            drow[C + tx + 16 * k] = from_float<X>(dk[i][k] * scale);
            drow[2 * C + tx + 16 * k] = from_float<X>(dv[i][k]);
        }
    }
}

template <int HS>
constexpr size_t simt_dq_smem() {  // Q, dO, K, V tiles + dS
    return (4 * (size_t)kTile * simt_ld<HS>() + (size_t)kTile * kSimtPLd) * sizeof(float);
}

// dQ part of dqkv.  grid (ceil(T/64), NH, B), block 256.  One block per query tile; loops over key tiles
// (causal: up to the diagonal; padding: up to kv_len[b]), recomputing P and dS, and accumulates dQ (64, HS) in
// registers. This second
// pass over the scores replaces FA2's atomicAdd into an fp32 dQ buffer, so dQ is deterministic.
template <typename X, int HS>
__global__ void __launch_bounds__(kSimtThreads)
    attention_backward_dq_simt_kernel(X* dqkv, const X* dout, const X* qkv, const float* lse, const float* D, int T,
                                      int NH, bool causal, const int* kv_len, float scale) {
    constexpr int LD = simt_ld<HS>(), DPT = HS / 16;
    extern __shared__ float smem[];
    float* Qs = smem;               // (64 queries, LD)
    float* dOs = Qs + kTile * LD;   // (64 queries, LD)
    float* Ks = dOs + kTile * LD;   // (64 keys, LD)
    float* Vs = Ks + kTile * LD;    // (64 keys, LD)
    float* dSs = Vs + kTile * LD;   // (64 queries, 65 keys)
    const int C = NH * HS;
    const size_t rs = 3 * (size_t)C;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z, q0 = qt * kTile;
    const X* base = qkv + (size_t)b * T * rs + (size_t)h * HS;
    const X* gbase = dout + (size_t)b * T * C + (size_t)h * HS;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int kvl = attention_kv_end(kv_len, b, T);

    const int nq = min(kTile, T - q0);
    simt_load_tile<X, HS>(Qs, base + (size_t)q0 * rs, rs, nq);
    simt_load_tile<X, HS>(dOs, gbase + (size_t)q0 * C, C, nq);
    float L[4], Dr[4], dq[4][DPT];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int row = q0 + ty * 4 + i;
        L[i] = row < T ? lse[((size_t)b * NH + h) * T + row] : 0.0f;
        Dr[i] = row < T ? D[((size_t)b * NH + h) * T + row] : 0.0f;
#pragma unroll
        for (int k = 0; k < DPT; k++) dq[i][k] = 0.0f;
    }
    const int kend = causal ? min(kvl, q0 + kTile) : kvl;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();
        const int kv = min(kTile, kvl - k0);
        simt_load_tile<X, HS>(Ks, base + (size_t)k0 * rs + C, rs, kv);
        simt_load_tile<X, HS>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
        __syncthreads();

        float s[4][4] = {}, dp[4][4] = {};
        simt_backward_tiles<HS>(s, dp, Qs, dOs, Ks, Vs, tx, ty);  // s = Q·K, dp = dO·V
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = q0 + ty * 4 + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int key = k0 + tx + 16 * j;
                const bool ok = key < kvl && row < T && (!causal || key <= row);
                const float p = ok ? expf(s[i][j] * scale - L[i]) : 0.0f;
                dSs[(ty * 4 + i) * kSimtPLd + tx + 16 * j] = p * (dp[i][j] - Dr[i]);
            }
        }
        __syncwarp();
#pragma unroll 4
        for (int j = 0; j < kTile; j++) {
            float ds[4], kv_[DPT];
#pragma unroll
            for (int i = 0; i < 4; i++) ds[i] = dSs[(ty * 4 + i) * kSimtPLd + j];
#pragma unroll
            for (int k = 0; k < DPT; k++) kv_[k] = Ks[j * LD + tx + 16 * k];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int k = 0; k < DPT; k++) dq[i][k] = fmaf(ds[i], kv_[k], dq[i][k]);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int row = q0 + ty * 4 + i;
        if (row >= T) continue;
        X* drow = dqkv + ((size_t)b * T + row) * rs + (size_t)h * HS;
#pragma unroll
        for (int k = 0; k < DPT; k++) drow[tx + 16 * k] = from_float<X>(dq[i][k] * scale);
    }
}


// =============================================================================================================
// 3. launchers (kernels/attention_impl.cuh)
// =============================================================================================================

void launch_backward_rowdot(float* D, const floatX* dout, const floatX* out, int B, int T, int NH, int HS,
                            cudaStream_t stream) {
    const int block = 256;
    const size_t threads = (size_t)B * T * NH * 32;
    attention_backward_rowdot_kernel<floatX><<<cuda_grid_1d(threads, block), block, 0, stream>>>(D, dout, out, B, T,
                                                                                                NH, HS);
    cudaCheck(cudaGetLastError());
}

void launch_forward_simt(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH, int HS, bool causal,
                         const int* kv_len, float scale, cudaStream_t stream) {
    const dim3 grid(ceil_div(T, kTile), NH, B);
    dispatch_head_size(HS, [&](auto hs) {
        constexpr int kHS = decltype(hs)::value;
        auto kernel = attention_forward_simt_kernel<floatX, kHS>;
        set_smem(kernel, simt_forward_smem<kHS>());
        kernel<<<grid, kSimtThreads, simt_forward_smem<kHS>(), stream>>>(out, lse, qkv, T, NH, causal, kv_len,
                                                                         scale);
        cudaCheck(cudaGetLastError());
    });
}

void launch_backward_simt(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* D, int B,
                          int T, int NH, int HS, bool causal, const int* kv_len, float scale, cudaStream_t stream) {
    const dim3 grid(ceil_div(T, kTile), NH, B);
    dispatch_head_size(HS, [&](auto hs) {
        constexpr int kHS = decltype(hs)::value;
        auto k1 = attention_backward_dkdv_simt_kernel<floatX, kHS>;
        set_smem(k1, simt_dkdv_smem<kHS>());
        k1<<<grid, kSimtThreads, simt_dkdv_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal,
                                                                  kv_len, scale);
        cudaCheck(cudaGetLastError());
        auto k2 = attention_backward_dq_simt_kernel<floatX, kHS>;
        set_smem(k2, simt_dq_smem<kHS>());
        k2<<<grid, kSimtThreads, simt_dq_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal,
                                                                  kv_len, scale);
        cudaCheck(cudaGetLastError());
    });
}

}  // namespace attention_detail
