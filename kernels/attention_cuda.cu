// Multi-head attention, CUDA twins of kernels/attention.h (attention_forward_cpu, attention_backward_cpu).
// See kernels/attention.cuh for the contract. Layout of this file:
//   1. helpers (tile loads, mma.sync wrapper, fragment loads)
//   2. SIMT kernels: fp32 FMA flash attention (forward, backward preprocess, dK/dV, dQ)
//   3. MMA kernels: bf16 tensor-core flash attention (forward, dK/dV, dQ), FlashAttention-2 style
//   4. naive kernels (test oracle)
//   5. launchers, and the dispatch between them and cuDNN (kernels/attention_cudnn.cu)
//
// Notation (per (b, h)): Q, K, V (T, HS) are strided views into qkv (row stride 3C); O, dO (T, HS) are strided
// views into out/dout (row stride C). S = scale Q K^T, P = exp(S - lse) (masked), D = rowsum(dO * O),
// dP = dO V^T, dS = P * (dP - D); dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
//
// Determinism: no kernel uses atomics; every output element is produced by exactly one thread with a fixed
// summation order, so the results are bitwise reproducible run to run (on the same GPU and build).
#include "kernels/attention.cuh"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "common/error.h"
#include "kernels/attention_cudnn.cuh"

// Internal to this file; a named namespace rather than an anonymous one so that the fp32 build, which never
// instantiates the tensor-core kernels, does not warn about their unused helpers.
namespace attention_detail {

using bf16 = __nv_bfloat16;

constexpr float kLog2e = 1.4426950408889634f;  // the tensor-core kernels work in the log2 domain

// =============================================================================================================
// 1. helpers
// =============================================================================================================

// Both implementations use square tiles of 64 rows: 64 queries per query tile, 64 keys per key tile. Tiles of
// the same size keep the causal bookkeeping simple: a query tile's diagonal key tile starts at the same row.
constexpr int kTile = 64;

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

// ---- MMA shared-memory tiles: bf16, rows padded to HS + 8 elements ----
// HS + 8 keeps every row 16-byte aligned (uint4 stores) and shifts consecutive rows by an odd multiple of 4
// banks (HS/2 + 4 words), so the fragment loads below (8 rows x 4 consecutive 32-bit words) touch 32 banks.
template <int HS>
constexpr int mma_ld() { return HS + 8; }

// dst (64, HS + 8) bf16 <- rows [0, rows_valid) of a strided (rows, HS) bf16 view, 16 bytes per load (the
// launcher checks 16-byte alignment; HS and C are multiples of 16 so every row start is aligned too).
template <int HS, int NTHREADS>
__device__ inline void mma_load_tile(bf16* dst, const bf16* src, size_t row_stride, int rows_valid) {
    constexpr int kChunks = HS / 8;  // 16-byte chunks per row
    for (int idx = threadIdx.x; idx < kTile * kChunks; idx += NTHREADS) {
        int r = idx / kChunks, c = idx % kChunks;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < rows_valid) v = *reinterpret_cast<const uint4*>(src + (size_t)r * row_stride + c * 8);
        *reinterpret_cast<uint4*>(dst + r * mma_ld<HS>() + c * 8) = v;
    }
}

// c (16x8 fp32) += a (16x16 bf16, row-major) * b (16x8 bf16, "col" = k-major pairs), one warp.
// Fragment layout (PTX ISA, mma.m16n8k16 .bf16), with g = lane / 4 and t = lane % 4:
//   a[0] = A[g][2t..2t+1]   a[1] = A[g+8][2t..2t+1]   a[2] = A[g][2t+8..2t+9]   a[3] = A[g+8][2t+8..2t+9]
//   b0   = B[2t..2t+1][g]   b1   = B[2t+8..2t+9][g]
//   c[0..1] = C[g][2t..2t+1]   c[2..3] = C[g+8][2t..2t+1]
// Each 32-bit register holds two bf16, the lower index in the low half.
__device__ inline void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#elif defined(PRAC_CUDA_EMU)
    cuda_emu::mma_m16n8k16_bf16(c, a, b0, b1);  // the CPU execution layer's warp-level emulation of the same PTX
#else
    __trap();  // bf16 mma.sync needs sm_80; the build targets sm_80 and newer only
#endif
}

__device__ inline uint32_t pack_bf16x2(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lo) is the low half
    return *reinterpret_cast<uint32_t*>(&v);
}
__device__ inline uint32_t ld_u32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ inline uint32_t ld_u16(const bf16* p) { return *reinterpret_cast<const unsigned short*>(p); }

// A fragment of rows [m0, m0+16) x cols [k0, k0+16) of a row-major smem tile X[m][k].
__device__ inline void frag_a(uint32_t (&a)[4], const bf16* X, int ld, int m0, int k0, int lane) {
    int g = lane >> 2, t = lane & 3;
    a[0] = ld_u32(X + (m0 + g) * ld + k0 + 2 * t);
    a[1] = ld_u32(X + (m0 + g + 8) * ld + k0 + 2 * t);
    a[2] = ld_u32(X + (m0 + g) * ld + k0 + 8 + 2 * t);
    a[3] = ld_u32(X + (m0 + g + 8) * ld + k0 + 8 + 2 * t);
}
// B fragment (k [k0, k0+16) x n [n0, n0+8)) from a smem tile stored n-major, X[n][k] (e.g. K[key][d] for
// S = Q K^T): the two k of a register are adjacent in memory, one 32-bit load each.
__device__ inline void frag_b_nk(uint32_t& b0, uint32_t& b1, const bf16* X, int ld, int k0, int n0, int lane) {
    int g = lane >> 2, t = lane & 3;
    b0 = ld_u32(X + (n0 + g) * ld + k0 + 2 * t);
    b1 = ld_u32(X + (n0 + g) * ld + k0 + 8 + 2 * t);
}
// B fragment from a smem tile stored k-major, X[k][n] (e.g. V[key][d] for O = P V): the two k of a register
// are in different rows, so two 16-bit loads each. (ldmatrix.trans would do this in one instruction; the
// plain loads are the first, obviously-correct version.)
__device__ inline void frag_b_kn(uint32_t& b0, uint32_t& b1, const bf16* X, int ld, int k0, int n0, int lane) {
    int g = lane >> 2, t = lane & 3;
    const bf16* p = X + (k0 + 2 * t) * ld + n0 + g;
    b0 = ld_u16(p) | (ld_u16(p + ld) << 16);
    b1 = ld_u16(p + 8 * ld) | (ld_u16(p + 9 * ld) << 16);
}
// The C fragments of two adjacent 8-column tiles (16 x 16 fp32) as the A fragment of a 16 x 16 bf16 slab:
// the accumulator layout of m16n8 matches the A layout of m16k16 column-pair for column-pair, so P (or dS)
// goes from one mma's output to the next mma's input without leaving registers.
__device__ inline void c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
    a[0] = pack_bf16x2(c0[0], c0[1]);
    a[1] = pack_bf16x2(c0[2], c0[3]);
    a[2] = pack_bf16x2(c1[0], c1[1]);
    a[3] = pack_bf16x2(c1[2], c1[3]);
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
// One block per (query tile, head, batch); loops over key tiles with the online softmax (running max m and
// sum l per row, O rescaled by exp(m_old - m_new) whenever the max grows).
template <typename X, int HS>
__global__ void __launch_bounds__(kSimtThreads)
    attention_forward_simt_kernel(X* out, float* lse, const X* qkv, int T, int NH, bool causal, float scale) {
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

    simt_load_tile<X, HS>(Qs, base + (size_t)q0 * rs, rs, min(kTile, T - q0));

    float m[4], l[4], o[4][DPT];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < DPT; k++) o[i][k] = 0.0f;
    }
    const int kend = causal ? min(T, q0 + kTile) : T;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // everyone is done with the previous K/V tile
        int kv = min(kTile, T - k0);
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
                bool ok = key < T && (!causal || key <= row);
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
        const float inv = 1.0f / l[i];
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
// the query tiles that can see it (causal: from the key tile's own row on) and accumulates dK, dV (64, HS) in
// registers. Here a thread's 4 rows are keys and its 4 strided score columns are queries (S^T).
template <typename X, int HS>
__global__ void __launch_bounds__(kSimtThreads)
    attention_backward_dkdv_simt_kernel(X* dqkv, const X* dout, const X* qkv, const float* lse, const float* D,
                                        int T, int NH, bool causal, float scale) {
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

    const int kv = min(kTile, T - k0);
    simt_load_tile<X, HS>(Ks, base + (size_t)k0 * rs + C, rs, kv);
    simt_load_tile<X, HS>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);

    float dk[4][DPT], dv[4][DPT];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int k = 0; k < DPT; k++) dk[i][k] = dv[i][k] = 0.0f;

    for (int q0 = causal ? k0 : 0; q0 < T; q0 += kTile) {
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
#pragma unroll 4
        for (int d = 0; d < HS; d++) {
            float kr[4], vr[4], qc[4], gc[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                kr[i] = Ks[(ty * 4 + i) * LD + d];
                vr[i] = Vs[(ty * 4 + i) * LD + d];
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                qc[j] = Qs[(tx + 16 * j) * LD + d];
                gc[j] = dOs[(tx + 16 * j) * LD + d];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    s[i][j] = fmaf(kr[i], qc[j], s[i][j]);
                    dp[i][j] = fmaf(vr[i], gc[j], dp[i][j]);
                }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int key = k0 + ty * 4 + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int qi = tx + 16 * j, q = q0 + qi;
                const bool ok = key < T && q < T && (!causal || q >= key);
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
// (causal: up to the diagonal), recomputing P and dS, and accumulates dQ (64, HS) in registers. This second
// pass over the scores replaces FA2's atomicAdd into an fp32 dQ buffer, so dQ is deterministic.
template <typename X, int HS>
__global__ void __launch_bounds__(kSimtThreads)
    attention_backward_dq_simt_kernel(X* dqkv, const X* dout, const X* qkv, const float* lse, const float* D, int T,
                                      int NH, bool causal, float scale) {
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
    const int kend = causal ? min(T, q0 + kTile) : T;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();
        const int kv = min(kTile, T - k0);
        simt_load_tile<X, HS>(Ks, base + (size_t)k0 * rs + C, rs, kv);
        simt_load_tile<X, HS>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
        __syncthreads();

        float s[4][4] = {}, dp[4][4] = {};
#pragma unroll 4
        for (int d = 0; d < HS; d++) {
            float qr[4], gr[4], kc[4], vc[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                qr[i] = Qs[(ty * 4 + i) * LD + d];
                gr[i] = dOs[(ty * 4 + i) * LD + d];
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                kc[j] = Ks[(tx + 16 * j) * LD + d];
                vc[j] = Vs[(tx + 16 * j) * LD + d];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    s[i][j] = fmaf(qr[i], kc[j], s[i][j]);
                    dp[i][j] = fmaf(gr[i], vc[j], dp[i][j]);
                }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int row = q0 + ty * 4 + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int key = k0 + tx + 16 * j;
                const bool ok = key < T && row < T && (!causal || key <= row);
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
// 3. MMA kernels (bf16 tensor cores, fp32 accumulate). 128 threads = 4 warps; warp w owns the 16 rows
//    w*16 .. w*16+15 of the block's 64-row tile (queries in the forward and dQ kernels, keys in dK/dV).
//    Scores are handled in the log2 domain (scale * log2(e) folded into one multiply, exp2f = one MUFU op);
//    lse stays natural-log in memory, like the CPU twin.
// =============================================================================================================
constexpr int kMmaThreads = 128;

template <int HS>
constexpr size_t mma_forward_smem() { return 3 * (size_t)kTile * mma_ld<HS>() * sizeof(bf16); }  // Q, K, V

// out, lse <- qkv.  grid (ceil(T/64), NH, B), block 128.  FlashAttention-2 forward: Q fragments stay in
// registers; per 64-key tile a warp computes S (16 x 64) = Q K^T into 8 accumulator tiles, updates the
// online softmax on them, turns them into bf16 A fragments in place and accumulates O (16 x HS) += P V.
// The row sum l is kept per thread (16 of the 64 columns) and reduced over the 4 lanes of a row only at the end.
template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_forward_mma_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, bool causal,
                                 float scale_log2) {
    constexpr int LD = mma_ld<HS>(), KS = HS / 16, ND = HS / 8;
    constexpr float kLn2 = 0.6931471805599453f;  // lse back to natural log
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // (64, LD)
    bf16* Ks = Qs + kTile * LD;                    // (64, LD)
    bf16* Vs = Ks + kTile * LD;                    // (64, LD)
    const int C = NH * HS;
    const size_t rs = 3 * (size_t)C;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z, q0 = qt * kTile;
    const bf16* base = qkv + (size_t)b * T * rs + (size_t)h * HS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;  // the two query rows this thread's accumulators hold

    mma_load_tile<HS, kMmaThreads>(Qs, base + (size_t)q0 * rs, rs, min(kTile, T - q0));
    __syncthreads();
    uint32_t qa[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) frag_a(qa[kk], Qs, LD, warp * 16, kk * 16, lane);

    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    const int kend = causal ? min(T, q0 + kTile) : T;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // all warps are done with the previous K/V tile
        const int kv = min(kTile, T - k0);
        mma_load_tile<HS, kMmaThreads>(Ks, base + (size_t)k0 * rs + C, rs, kv);
        mma_load_tile<HS, kMmaThreads>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
        __syncthreads();

        float s[8][4];  // S (16 x 64): tile nt holds keys k0 + nt*8 .. +7
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                uint32_t b0, b1;
                frag_b_nk(b0, b1, Ks, LD, kk * 16, nt * 8, lane);
                mma_16816(s[nt], qa[kk], b0, b1);
            }
        }
        // Masks are needed only on the tail tile and (causal) the diagonal tile.
        const bool need_mask = k0 + kTile > T || (causal && k0 + kTile - 1 > q0);
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float v = s[nt][e] * scale_log2;
                if (need_mask) {
                    const int key = k0 + nt * 8 + 2 * t + (e & 1), row = e < 2 ? row0 : row1;
                    if (key >= T || (causal && key > row)) v = -INFINITY;
                }
                s[nt][e] = v;
                if (e < 2) mx0 = fmaxf(mx0, v);
                else mx1 = fmaxf(mx1, v);
            }
        // the 4 lanes of a quad (same g) hold one row's 64 columns
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
        const float mu0 = mn0 == -INFINITY ? 0.0f : mn0, mu1 = mn1 == -INFINITY ? 0.0f : mn1;  // no inf - inf
        const float alpha0 = exp2f(m0 - mu0), alpha1 = exp2f(m1 - mu1);
        m0 = mn0;
        m1 = mn1;
        float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = exp2f(s[nt][0] - mu0);
            s[nt][1] = exp2f(s[nt][1] - mu0);
            s[nt][2] = exp2f(s[nt][2] - mu1);
            s[nt][3] = exp2f(s[nt][3] - mu1);
            sum0 += s[nt][0] + s[nt][1];
            sum1 += s[nt][2] + s[nt][3];
        }
        l0 = l0 * alpha0 + sum0;  // fp32 P in the sum, bf16 P in the product below (as FA2)
        l1 = l1 * alpha1 + sum1;
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            o[nd][0] *= alpha0;
            o[nd][1] *= alpha0;
            o[nd][2] *= alpha1;
            o[nd][3] *= alpha1;
        }
        // O += P V: k runs over the 64 keys in 4 slabs of 16
#pragma unroll
        for (int ks = 0; ks < kTile / 16; ks++) {
            uint32_t pa[4];
            c_to_a(pa, s[2 * ks], s[2 * ks + 1]);
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                uint32_t b0, b1;
                frag_b_kn(b0, b1, Vs, LD, ks * 16, nd * 8, lane);
                mma_16816(o[nd], pa, b0, b1);
            }
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
    if (row0 < T) {
        bf16* orow = out + ((size_t)b * T + row0) * C + (size_t)h * HS + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
            *reinterpret_cast<uint32_t*>(orow + nd * 8) = pack_bf16x2(o[nd][0] * inv0, o[nd][1] * inv0);
        if (t == 0) lse[((size_t)b * NH + h) * T + row0] = (m0 + log2f(l0)) * kLn2;
    }
    if (row1 < T) {
        bf16* orow = out + ((size_t)b * T + row1) * C + (size_t)h * HS + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
            *reinterpret_cast<uint32_t*>(orow + nd * 8) = pack_bf16x2(o[nd][2] * inv1, o[nd][3] * inv1);
        if (t == 0) lse[((size_t)b * NH + h) * T + row1] = (m1 + log2f(l1)) * kLn2;
    }
}

template <int HS>
constexpr size_t mma_bwd_smem() {  // four (64, LD) bf16 tiles + two 64-float rows (lse, D; dK/dV kernel)
    return 4 * (size_t)kTile * mma_ld<HS>() * sizeof(bf16) + 2 * kTile * sizeof(float);
}

// dK, dV parts of dqkv.  grid (ceil(T/64), NH, B), block 128.  One block per 64-key tile; warp w owns keys
// w*16.. and keeps their K and V A fragments in registers. Per 64-query tile (Q, dO, lse, D in smem) it walks
// 4 chunks of 16 queries: S^T = K Q^T and dP^T = V dO^T (16 x 16 each), P^T = exp2(S^T - lse), dS^T =
// P^T (dP^T - D), then dV += P^T dO and dK += dS^T Q with P^T, dS^T fed back as A fragments (k = queries).
template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dkdv_mma_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                       const float* D, int T, int NH, bool causal, float scale,
                                       float scale_log2) {
    constexpr int LD = mma_ld<HS>(), KS = HS / 16, ND = HS / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Ks = reinterpret_cast<bf16*>(smem_raw);  // (64 keys, LD)
    bf16* Vs = Ks + kTile * LD;                    // (64 keys, LD)
    bf16* Qs = Vs + kTile * LD;                    // (64 queries, LD)
    bf16* dOs = Qs + kTile * LD;                   // (64 queries, LD)
    float* lse_s = reinterpret_cast<float*>(dOs + kTile * LD);  // (64), log2 units
    float* D_s = lse_s + kTile;                                   // (64)
    const int C = NH * HS;
    const size_t rs = 3 * (size_t)C;
    const int h = blockIdx.y, b = blockIdx.z, k0 = blockIdx.x * kTile;
    const bf16* base = qkv + (size_t)b * T * rs + (size_t)h * HS;
    const bf16* gbase = dout + (size_t)b * T * C + (size_t)h * HS;
    const float* lse_bh = lse + ((size_t)b * NH + h) * T;
    const float* D_bh = D + ((size_t)b * NH + h) * T;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int wk0 = k0 + warp * 16;          // this warp's first key
    const int key0 = wk0 + g, key1 = key0 + 8;  // the keys of this thread's accumulator rows

    const int kv = min(kTile, T - k0);
    mma_load_tile<HS, kMmaThreads>(Ks, base + (size_t)k0 * rs + C, rs, kv);
    mma_load_tile<HS, kMmaThreads>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
    __syncthreads();
    uint32_t ka[KS][4], va[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        frag_a(ka[kk], Ks, LD, warp * 16, kk * 16, lane);
        frag_a(va[kk], Vs, LD, warp * 16, kk * 16, lane);
    }
    float dk[ND][4], dv[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[nd][e] = dv[nd][e] = 0.0f;

    for (int q0 = causal ? k0 : 0; q0 < T; q0 += kTile) {
        __syncthreads();  // previous Q/dO tile no longer read
        const int nq = min(kTile, T - q0);
        mma_load_tile<HS, kMmaThreads>(Qs, base + (size_t)q0 * rs, rs, nq);
        mma_load_tile<HS, kMmaThreads>(dOs, gbase + (size_t)q0 * C, C, nq);
        if (threadIdx.x < kTile) {
            lse_s[threadIdx.x] = threadIdx.x < nq ? lse_bh[q0 + threadIdx.x] * kLog2e : 0.0f;
            D_s[threadIdx.x] = threadIdx.x < nq ? D_bh[q0 + threadIdx.x] : 0.0f;
        }
        __syncthreads();
        const bool need_mask = q0 + kTile > T || k0 + kTile > T || (causal && q0 < k0 + kTile - 1);
#pragma unroll 1
        for (int qc = 0; qc < kTile; qc += 16) {
            // causal: every query of this chunk is before every key of this warp -> P = 0, nothing to add
            if (causal && q0 + qc + 15 < wk0) continue;
            float st[2][4], dpt[2][4];  // S^T, dP^T (16 keys x 16 queries) as two 8-query tiles
#pragma unroll
            for (int j = 0; j < 2; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) st[j][e] = dpt[j][e] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < KS; kk++) {
                    uint32_t b0, b1;
                    frag_b_nk(b0, b1, Qs, LD, kk * 16, qc + j * 8, lane);
                    mma_16816(st[j], ka[kk], b0, b1);
                    frag_b_nk(b0, b1, dOs, LD, kk * 16, qc + j * 8, lane);
                    mma_16816(dpt[j], va[kk], b0, b1);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = qc + j * 8 + 2 * t + (e & 1), key = e < 2 ? key0 : key1;
                    bool ok = true;
                    if (need_mask) ok = key < T && q0 + qi < T && (!causal || q0 + qi >= key);
                    const float p = ok ? exp2f(st[j][e] * scale_log2 - lse_s[qi]) : 0.0f;
                    st[j][e] = p;
                    dpt[j][e] = p * (dpt[j][e] - D_s[qi]);
                }
            uint32_t pa[4], dsa[4];
            c_to_a(pa, st[0], st[1]);
            c_to_a(dsa, dpt[0], dpt[1]);
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                uint32_t b0, b1;
                frag_b_kn(b0, b1, dOs, LD, qc, nd * 8, lane);
                mma_16816(dv[nd], pa, b0, b1);
                frag_b_kn(b0, b1, Qs, LD, qc, nd * 8, lane);
                mma_16816(dk[nd], dsa, b0, b1);
            }
        }
    }
    // rows key0 / key1, columns nd*8 + 2t, +1
    if (key0 < T) {
        bf16* drow = dqkv + ((size_t)b * T + key0) * rs + (size_t)h * HS + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            *reinterpret_cast<uint32_t*>(drow + C + nd * 8) = pack_bf16x2(dk[nd][0] * scale, dk[nd][1] * scale);
            *reinterpret_cast<uint32_t*>(drow + 2 * C + nd * 8) = pack_bf16x2(dv[nd][0], dv[nd][1]);
        }
    }
    if (key1 < T) {
        bf16* drow = dqkv + ((size_t)b * T + key1) * rs + (size_t)h * HS + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++) {
            *reinterpret_cast<uint32_t*>(drow + C + nd * 8) = pack_bf16x2(dk[nd][2] * scale, dk[nd][3] * scale);
            *reinterpret_cast<uint32_t*>(drow + 2 * C + nd * 8) = pack_bf16x2(dv[nd][2], dv[nd][3]);
        }
    }
}

// dQ part of dqkv.  grid (ceil(T/64), NH, B), block 128.  One block per 64-query tile; warp w owns queries
// w*16.. with their Q and dO A fragments in registers. Per 64-key tile it walks 4 chunks of 16 keys:
// S = Q K^T, dP = dO V^T, P, dS, then dQ += dS K (dS fed back as an A fragment, k = keys).
template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dq_mma_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                     const float* D, int T, int NH, bool causal, float scale, float scale_log2) {
    constexpr int LD = mma_ld<HS>(), KS = HS / 16, ND = HS / 8;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* Qs = reinterpret_cast<bf16*>(smem_raw);  // (64 queries, LD)
    bf16* dOs = Qs + kTile * LD;                   // (64 queries, LD)
    bf16* Ks = dOs + kTile * LD;                   // (64 keys, LD)
    bf16* Vs = Ks + kTile * LD;                    // (64 keys, LD)
    const int C = NH * HS;
    const size_t rs = 3 * (size_t)C;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int h = blockIdx.y, b = blockIdx.z, q0 = qt * kTile;
    const bf16* base = qkv + (size_t)b * T * rs + (size_t)h * HS;
    const bf16* gbase = dout + (size_t)b * T * C + (size_t)h * HS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int wq0 = q0 + warp * 16;
    const int row0 = wq0 + g, row1 = row0 + 8;

    const int nq = min(kTile, T - q0);
    mma_load_tile<HS, kMmaThreads>(Qs, base + (size_t)q0 * rs, rs, nq);
    mma_load_tile<HS, kMmaThreads>(dOs, gbase + (size_t)q0 * C, C, nq);
    __syncthreads();
    uint32_t qa[KS][4], ga[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        frag_a(qa[kk], Qs, LD, warp * 16, kk * 16, lane);
        frag_a(ga[kk], dOs, LD, warp * 16, kk * 16, lane);
    }
    const size_t bh = ((size_t)b * NH + h) * T;
    const float L0 = row0 < T ? lse[bh + row0] * kLog2e : 0.0f, L1 = row1 < T ? lse[bh + row1] * kLog2e : 0.0f;
    const float D0 = row0 < T ? D[bh + row0] : 0.0f, D1 = row1 < T ? D[bh + row1] : 0.0f;
    float dq[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) dq[nd][0] = dq[nd][1] = dq[nd][2] = dq[nd][3] = 0.0f;

    const int kend = causal ? min(T, q0 + kTile) : T;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // previous K/V tile no longer read
        const int kv = min(kTile, T - k0);
        mma_load_tile<HS, kMmaThreads>(Ks, base + (size_t)k0 * rs + C, rs, kv);
        mma_load_tile<HS, kMmaThreads>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
        __syncthreads();
        const bool need_mask = q0 + kTile > T || k0 + kTile > T || (causal && k0 + kTile - 1 > q0);
#pragma unroll 1
        for (int kc = 0; kc < kTile; kc += 16) {
            // causal: every key of this chunk is after every query of this warp -> P = 0
            if (causal && k0 + kc > wq0 + 15) continue;
            float s[2][4], dp[2][4];  // S, dP (16 queries x 16 keys) as two 8-key tiles
#pragma unroll
            for (int j = 0; j < 2; j++) {
#pragma unroll
                for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < KS; kk++) {
                    uint32_t b0, b1;
                    frag_b_nk(b0, b1, Ks, LD, kk * 16, kc + j * 8, lane);
                    mma_16816(s[j], qa[kk], b0, b1);
                    frag_b_nk(b0, b1, Vs, LD, kk * 16, kc + j * 8, lane);
                    mma_16816(dp[j], ga[kk], b0, b1);
                }
            }
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + kc + j * 8 + 2 * t + (e & 1), row = e < 2 ? row0 : row1;
                    bool ok = true;
                    if (need_mask) ok = key < T && row < T && (!causal || key <= row);
                    const float p = ok ? exp2f(s[j][e] * scale_log2 - (e < 2 ? L0 : L1)) : 0.0f;
                    dp[j][e] = p * (dp[j][e] - (e < 2 ? D0 : D1));
                }
            uint32_t dsa[4];
            c_to_a(dsa, dp[0], dp[1]);
#pragma unroll
            for (int nd = 0; nd < ND; nd++) {
                uint32_t b0, b1;
                frag_b_kn(b0, b1, Ks, LD, kc, nd * 8, lane);
                mma_16816(dq[nd], dsa, b0, b1);
            }
        }
    }
    if (row0 < T) {
        bf16* drow = dqkv + ((size_t)b * T + row0) * rs + (size_t)h * HS + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
            *reinterpret_cast<uint32_t*>(drow + nd * 8) = pack_bf16x2(dq[nd][0] * scale, dq[nd][1] * scale);
    }
    if (row1 < T) {
        bf16* drow = dqkv + ((size_t)b * T + row1) * rs + (size_t)h * HS + 2 * t;
#pragma unroll
        for (int nd = 0; nd < ND; nd++)
            *reinterpret_cast<uint32_t*>(drow + nd * 8) = pack_bf16x2(dq[nd][2] * scale, dq[nd][3] * scale);
    }
}

// =============================================================================================================
// 4. naive kernels (test oracle): one thread per output element, scores materialised as (B*NH, T, T) fp32
// =============================================================================================================

// S[bh][i][j] = scale q_i . k_j (causal: -inf above the diagonal)
template <typename X>
__global__ void naive_scores_kernel(float* S, const X* qkv, int B, int T, int NH, int HS, bool causal,
                                    float scale) {
    const size_t total = (size_t)B * NH * T * T;
    const int C = NH * HS;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(idx % T), i = (int)(idx / T % T);
        const size_t bh = idx / ((size_t)T * T);
        const int h = (int)(bh % NH), b = (int)(bh / NH);
        if (causal && j > i) {
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
__global__ void naive_softmax_kernel(float* S, float* lse, size_t rows, int T) {
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
                                        const float* D, int B, int T, int NH, int HS, bool causal, float scale) {
    const size_t total = (size_t)B * NH * T * T;
    const int C = NH * HS;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int j = (int)(idx % T), i = (int)(idx / T % T);
        const size_t bh = idx / ((size_t)T * T);
        const int h = (int)(bh % NH), b = (int)(bh / NH);
        if (causal && j > i) {
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
// 5. launchers
// =============================================================================================================

// Calls f(std::integral_constant<int, HS>) for the supported head sizes; the kernels unroll over HS.
template <typename F>
void dispatch_head_size(int HS, F&& f) {
    switch (HS) {
        case 16: f(std::integral_constant<int, 16>{}); break;
        case 32: f(std::integral_constant<int, 32>{}); break;
        case 48: f(std::integral_constant<int, 48>{}); break;
        case 64: f(std::integral_constant<int, 64>{}); break;
        case 80: f(std::integral_constant<int, 80>{}); break;
        case 96: f(std::integral_constant<int, 96>{}); break;
        case 112: f(std::integral_constant<int, 112>{}); break;
        case 128: f(std::integral_constant<int, 128>{}); break;
        default: fail("CUDA attention: head size %d is not supported", HS);  // check_shape said why
    }
}

void check_shape(const char* what, int B, int T, int C, int NH) {
    CHECK_USER(B >= 0 && T >= 0 && NH > 0 && C > 0 && C % NH == 0,
               "%s: bad shape B=%d T=%d C=%d NH=%d (C must be a positive multiple of NH)", what, B, T, C, NH);
    CHECK_USER(attention_cuda_supports_head_size(C / NH),
               "%s: head size %d (C=%d / NH=%d) is not supported\n---> HINT: the CUDA attention kernels take head "
               "sizes 16, 32, 48, 64, 80, 96, 112 and 128",
               what, C / NH, C, NH);
}

bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

// Mma for this call? Auto: in the bf16 build when every tensor is 16-byte aligned (uint4 tile loads).
template <typename X>
bool resolve_mma(AttentionImpl impl, std::initializer_list<const void*> ptrs) {
    if (impl == AttentionImpl::Simt) return false;
    if constexpr (!std::is_same<X, bf16>::value) {
        CHECK_USER(impl != AttentionImpl::Mma, "CUDA attention: the tensor-core path needs the bf16 build");
        return false;
    } else {
        bool ok = true;
        for (const void* p : ptrs) ok = ok && aligned16(p);
        CHECK_USER(ok || impl != AttentionImpl::Mma, "CUDA attention: the tensor-core path needs 16-byte aligned tensors");
        return ok;
    }
}

// Kernels with more than 48 KiB of dynamic shared memory must opt in (done on every launch, as llm.c does; the
// call is cheap and not a stream operation, so it is legal during graph capture).
template <typename K>
void set_smem(K kernel, size_t bytes) {
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <typename X>
void forward_impl(X* out, float* lse, const X* qkv, int B, int T, int C, int NH, bool causal, cudaStream_t stream,
                  AttentionImpl impl) {
    check_shape("attention_forward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt((float)HS);
    const dim3 grid(ceil_div(T, kTile), NH, B);
    const bool mma = resolve_mma<X>(impl, {out, qkv});  // lse: scalar stores, any float alignment
    dispatch_head_size(HS, [&](auto hs) {
        constexpr int kHS = decltype(hs)::value;
        if constexpr (std::is_same<X, bf16>::value) {
            if (mma) {
                auto kernel = attention_forward_mma_kernel<kHS>;
                set_smem(kernel, mma_forward_smem<kHS>());
                kernel<<<grid, kMmaThreads, mma_forward_smem<kHS>(), stream>>>(out, lse, qkv, T, NH, causal,
                                                                               scale * kLog2e);
                cudaCheck(cudaGetLastError());
                return;
            }
        }
        auto kernel = attention_forward_simt_kernel<X, kHS>;
        set_smem(kernel, simt_forward_smem<kHS>());
        kernel<<<grid, kSimtThreads, simt_forward_smem<kHS>(), stream>>>(out, lse, qkv, T, NH, causal, scale);
        cudaCheck(cudaGetLastError());
    });
}

template <typename X>
void backward_impl(X* dqkv, const X* dout, const X* qkv, const X* out, const float* lse, int B, int T, int C,
                   int NH, bool causal, float* scratch, cudaStream_t stream, AttentionImpl impl) {
    check_shape("attention_backward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt((float)HS);
    float* D = scratch;  // (B, NH, T)
    {
        const int block = 256;
        const size_t threads = (size_t)B * T * NH * 32;
        attention_backward_rowdot_kernel<X><<<cuda_grid_1d(threads, block), block, 0, stream>>>(D, dout, out, B, T,
                                                                                               NH, HS);
        cudaCheck(cudaGetLastError());
    }
    const dim3 grid(ceil_div(T, kTile), NH, B);
    const bool mma = resolve_mma<X>(impl, {dqkv, dout, qkv, out});
    dispatch_head_size(HS, [&](auto hs) {
        constexpr int kHS = decltype(hs)::value;
        if constexpr (std::is_same<X, bf16>::value) {
            if (mma) {
                auto k1 = attention_backward_dkdv_mma_kernel<kHS>;
                set_smem(k1, mma_bwd_smem<kHS>());
                k1<<<grid, kMmaThreads, mma_bwd_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal, scale,
                                                                       scale * kLog2e);
                cudaCheck(cudaGetLastError());
                auto k2 = attention_backward_dq_mma_kernel<kHS>;
                set_smem(k2, mma_bwd_smem<kHS>());
                k2<<<grid, kMmaThreads, mma_bwd_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal, scale,
                                                                       scale * kLog2e);
                cudaCheck(cudaGetLastError());
                return;
            }
        }
        auto k1 = attention_backward_dkdv_simt_kernel<X, kHS>;
        set_smem(k1, simt_dkdv_smem<kHS>());
        k1<<<grid, kSimtThreads, simt_dkdv_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal, scale);
        cudaCheck(cudaGetLastError());
        auto k2 = attention_backward_dq_simt_kernel<X, kHS>;
        set_smem(k2, simt_dq_smem<kHS>());
        k2<<<grid, kSimtThreads, simt_dq_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal, scale);
        cudaCheck(cudaGetLastError());
    });
}

}  // namespace attention_detail
using namespace attention_detail;

bool attention_cuda_supports_head_size(int HS) {
    return HS >= 16 && HS <= 128 && HS % 16 == 0;
}

bool attention_cuda_impl_available(AttentionImpl impl) {
    if (impl == AttentionImpl::Mma) return std::is_same<floatX, bf16>::value;
    if (impl == AttentionImpl::Cudnn) return attention_cudnn_compiled();
    return true;
}

const char* attention_impl_name(AttentionImpl impl) {
    switch (impl) {
        case AttentionImpl::Auto: return "auto";
        case AttentionImpl::Simt: return "simt";
        case AttentionImpl::Mma: return "mma";
        case AttentionImpl::Cudnn: return "cudnn";
    }
    return "?";
}

AttentionImpl attention_impl_from_env() {
    const char* v = std::getenv("PRAC_ATTENTION");
    if (!v || !*v) return AttentionImpl::Auto;
    for (AttentionImpl impl : {AttentionImpl::Auto, AttentionImpl::Simt, AttentionImpl::Mma, AttentionImpl::Cudnn}) {
        if (std::strcmp(v, attention_impl_name(impl)) != 0) continue;
        CHECK_USER(attention_cuda_impl_available(impl),
                   "PRAC_ATTENTION=%s: this build cannot run it (%s)\n---> HINT: unset PRAC_ATTENTION (auto picks "
                   "what the build has)",
                   v, impl == AttentionImpl::Mma ? "the tensor-core kernels need the bf16 build"
                                                 : "cuDNN attention needs the bf16 build compiled with cudnn-frontend");
        return impl;
    }
    fail("PRAC_ATTENTION=%s: expected auto, cudnn, mma or simt", v);
}

// Cudnn for this call? Forced: every precondition must hold (UserError otherwise). Auto: only when all hold; the
// graph may still be declined for the shape, and then the caller falls back to the hand-written kernels.
static bool want_cudnn(AttentionImpl impl, const AttentionCudnn* cudnn, int HS,
                       std::initializer_list<const void*> ptrs) {
    if (impl != AttentionImpl::Cudnn && impl != AttentionImpl::Auto) return false;
    const bool forced = impl == AttentionImpl::Cudnn;
    bool aligned = true;
    for (const void* p : ptrs) aligned = aligned && aligned16(p);
    if (forced) {
        CHECK_USER(attention_cudnn_compiled(),
                   "CUDA attention: the cuDNN path needs the bf16 build compiled with cudnn-frontend");
        CHECK_USER(cudnn != nullptr, "CUDA attention: the cuDNN path needs an AttentionCudnn context");
        CHECK_USER(attention_cudnn_supports_head_size(HS),
                   "CUDA attention: cuDNN takes head sizes that are multiples of 8 up to 128 (got %d)", HS);
        CHECK_USER(aligned, "CUDA attention: the cuDNN path needs 16-byte aligned tensors");
        return true;
    }
    return attention_cudnn_compiled() && cudnn != nullptr && attention_cudnn_supports_head_size(HS) && aligned;
}

void attention_forward_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, bool causal,
                            cudaStream_t stream, AttentionImpl impl, AttentionCudnn* cudnn) {
    check_shape("attention_forward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    if (want_cudnn(impl, cudnn, C / NH, {out, lse, qkv}) &&
        attention_cudnn_forward(cudnn, out, lse, qkv, B, T, C, NH, causal, stream, impl == AttentionImpl::Auto))
        return;
    forward_impl<floatX>(out, lse, qkv, B, T, C, NH, causal, stream, impl);
}

size_t attention_backward_scratch_floats(int B, int T, int C, int NH) {
    (void)C;
    return (size_t)B * NH * T;
}

void attention_backward_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                             const float* lse, int B, int T, int C, int NH, bool causal, float* scratch,
                             cudaStream_t stream, AttentionImpl impl, AttentionCudnn* cudnn) {
    check_shape("attention_backward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    if (want_cudnn(impl, cudnn, C / NH, {dqkv, dout, qkv, out, lse}) &&
        attention_cudnn_backward(cudnn, dqkv, dout, qkv, out, lse, B, T, C, NH, causal, stream,
                                 impl == AttentionImpl::Auto))
        return;
    backward_impl<floatX>(dqkv, dout, qkv, out, lse, B, T, C, NH, causal, scratch, stream, impl);
}

#if !PRAC_ATTENTION_CUDNN
// ---- builds without cuDNN attention (no cudnn-frontend, or the fp32 build): kernels/attention_cudnn.cu is not
// compiled; these stubs say so. attention_cudnn_create returns null, so Auto never picks Cudnn.
bool attention_cudnn_compiled() { return false; }
bool attention_cudnn_supports_head_size(int) { return false; }
AttentionCudnn* attention_cudnn_create(cudaStream_t, AttentionWorkspaceFn, void*) { return nullptr; }
void attention_cudnn_destroy(AttentionCudnn*) {}
AttentionCudnnStats attention_cudnn_stats(const AttentionCudnn*) { return {}; }
bool attention_cudnn_deterministic(const AttentionCudnn*) { return false; }
std::string attention_cudnn_describe() {
    return std::is_same<floatX, float>::value ? "not in the fp32 build"
                                              : "not compiled in (cmake found no cudnn-frontend, or no NVRTC)";
}
bool attention_cudnn_prepare(AttentionCudnn*, int, int, int, int, bool, bool, cudaStream_t, size_t*,
                             std::string* why) {
    if (why) *why = attention_cudnn_describe();
    return false;
}
bool attention_cudnn_forward(AttentionCudnn*, floatX*, float*, const floatX*, int, int, int, int, bool, cudaStream_t,
                             bool) {
    fail("cuDNN attention is %s", attention_cudnn_describe().c_str());
}
bool attention_cudnn_backward(AttentionCudnn*, floatX*, const floatX*, const floatX*, const floatX*, const float*, int,
                              int, int, int, bool, cudaStream_t, bool) {
    fail("cuDNN attention is %s", attention_cudnn_describe().c_str());
}
#endif

size_t attention_forward_naive_scratch_floats(int B, int T, int NH) { return (size_t)B * NH * T * T; }
size_t attention_backward_naive_scratch_floats(int B, int T, int NH) {
    return 2 * (size_t)B * NH * T * T + (size_t)B * NH * T;
}

void attention_forward_naive_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                  bool causal, float* scratch, cudaStream_t stream) {
    check_shape("attention_forward_naive_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH, block = 256;
    const float scale = 1.0f / std::sqrt((float)HS);
    const size_t nscores = (size_t)B * NH * T * T, rows = (size_t)B * NH * T;
    naive_scores_kernel<floatX><<<cuda_grid_1d(nscores, block), block, 0, stream>>>(scratch, qkv, B, T, NH, HS,
                                                                                     causal, scale);
    cudaCheck(cudaGetLastError());
    naive_softmax_kernel<<<cuda_grid_1d(rows, block), block, 0, stream>>>(scratch, lse, rows, T);
    cudaCheck(cudaGetLastError());
    naive_pv_kernel<floatX><<<cuda_grid_1d((size_t)B * T * C, block), block, 0, stream>>>(out, scratch, qkv, B, T,
                                                                                            NH, HS);
    cudaCheck(cudaGetLastError());
}

void attention_backward_naive_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                   const float* lse, int B, int T, int C, int NH, bool causal, float* scratch,
                                   cudaStream_t stream) {
    check_shape("attention_backward_naive_cuda", B, T, C, NH);
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
                                                                                         T, NH, HS, causal, scale);
    cudaCheck(cudaGetLastError());
    naive_bwd_grads_kernel<floatX><<<cuda_grid_1d((size_t)B * T * 3 * C, block), block, 0, stream>>>(
        dqkv, P, dS, qkv, dout, B, T, NH, HS, scale);
    cudaCheck(cudaGetLastError());
}
