// Multi-head attention, the Mma implementation (AttentionImpl::Mma): bf16 tensor-core flash attention kernels
// (mma.sync m16n8k16, fp32 accumulate; forward, dK/dV, dQ; FlashAttention-2 style), their fragment helpers and
// launchers (declared in kernels/attention_impl.cuh, called by the dispatch in kernels/attention_cuda.cu; the
// contract is kernels/attention.cuh). bf16 build only: in the fp32 build this file compiles to nothing. The
// backward's D = rowsum(dO * O) pre-pass is the Simt one (kernels/attention_simt.cu).
// CPU twins: kernels/attention.h (attention_forward_cpu, attention_backward_cpu).
// Notation (Q, K, V, O, dO, S, P, D, dP, dS) and determinism: see the head of kernels/attention_cuda.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/cuda_common.cuh"
#include "kernels/attention_impl.cuh"

#if !defined(PRAC_FP32)
namespace attention_detail {

constexpr float kLog2e = 1.4426950408889634f;  // the tensor-core kernels work in the log2 domain

// =============================================================================================================
// 1. helpers: shared-memory tiles (the tile size kTile is in kernels/attention_impl.cuh), the mma.sync wrapper,
//    fragment loads
// =============================================================================================================

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
// 2. MMA kernels (bf16 tensor cores, fp32 accumulate). 128 threads = 4 warps; warp w owns the 16 rows
//    w*16 .. w*16+15 of the block's 64-row tile (queries in the forward and dQ kernels, keys in dK/dV).
//    Scores are handled in the log2 domain (scale * log2(e) folded into one multiply, exp2f = one MUFU op);
//    lse stays natural-log in memory, like the CPU twin.
// =============================================================================================================
constexpr int kMmaThreads = 128;

template <int HS>
constexpr size_t mma_forward_smem() { return 3 * (size_t)kTile * mma_ld<HS>() * sizeof(bf16); }  // Q, K, V

// out, lse <- qkv.  grid (ceil(T/64), NH, B), block 128.  FlashAttention-2 forward: Q fragments stay in
// registers; per 64-key tile before the key end (causal: the diagonal; padding: kv_len[b]) a warp computes
// S (16 x 64) = Q K^T into 8 accumulator tiles, updates the online softmax on them, turns them into bf16 A
// fragments in place and accumulates O (16 x HS) += P V.
// The row sum l is kept per thread (16 of the 64 columns) and reduced over the 4 lanes of a row only at the end.
template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_forward_mma_kernel(bf16* out, float* lse, const bf16* qkv, int T, int NH, bool causal,
                                 const int* kv_len, float scale_log2) {
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
    const int kvl = attention_kv_end(kv_len, b, T);         // keys [kvl, T) are padding

    mma_load_tile<HS, kMmaThreads>(Qs, base + (size_t)q0 * rs, rs, min(kTile, T - q0));
    __syncthreads();
    uint32_t qa[KS][4];
#pragma unroll
    for (int kk = 0; kk < KS; kk++) frag_a(qa[kk], Qs, LD, warp * 16, kk * 16, lane);

    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

    const int kend = causal ? min(kvl, q0 + kTile) : kvl;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // all warps are done with the previous K/V tile
        const int kv = min(kTile, kvl - k0);
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
        // Masks are needed only on the last real tile (the tail or kv_len) and (causal) the diagonal tile.
        const bool need_mask = k0 + kTile > kvl || (causal && k0 + kTile - 1 > q0);
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float v = s[nt][e] * scale_log2;
                if (need_mask) {
                    const int key = k0 + nt * 8 + 2 * t + (e & 1), row = e < 2 ? row0 : row1;
                    if (key >= kvl || (causal && key > row)) v = -INFINITY;
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
    const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;  // l = 0: no keys
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

// dK, dV parts of dqkv.  grid (ceil(T/64), NH, B), block 128.  One block per 64-key tile (a tile of padding
// keys just writes zeros); warp w owns keys w*16.. and keeps their K and V A fragments in registers. Per 64-query
// tile (Q, dO, lse, D in smem) it walks 4 chunks of 16 queries: S^T = K Q^T and dP^T = V dO^T (16 x 16 each),
// P^T = exp2(S^T - lse), dS^T = P^T (dP^T - D), then dV += P^T dO and dK += dS^T Q with P^T, dS^T fed back as A
// fragments (k = queries).
template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dkdv_mma_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                       const float* D, int T, int NH, bool causal, const int* kv_len,
                                       float scale, float scale_log2) {
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
    const int kvl = attention_kv_end(kv_len, b, T);

    const int kv = min(kTile, kvl - k0);  // <= 0: a tile of padding keys
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

    const int qend = k0 < kvl ? T : 0;  // a tile of padding keys sees no query
    for (int q0 = causal ? k0 : 0; q0 < qend; q0 += kTile) {
        __syncthreads();  // previous Q/dO tile no longer read
        const int nq = min(kTile, T - q0);
        mma_load_tile<HS, kMmaThreads>(Qs, base + (size_t)q0 * rs, rs, nq);
        mma_load_tile<HS, kMmaThreads>(dOs, gbase + (size_t)q0 * C, C, nq);
        if (threadIdx.x < kTile) {
            lse_s[threadIdx.x] = threadIdx.x < nq ? lse_bh[q0 + threadIdx.x] * kLog2e : 0.0f;
            D_s[threadIdx.x] = threadIdx.x < nq ? D_bh[q0 + threadIdx.x] : 0.0f;
        }
        __syncthreads();
        const bool need_mask = q0 + kTile > T || k0 + kTile > kvl || (causal && q0 < k0 + kTile - 1);
#pragma unroll 1
        for (int qc = 0; qc < kTile; qc += 16) {
            // this warp's keys are all padding, or (causal) every query of this chunk is before every key of this
            // warp -> P = 0, nothing to add
            if (wk0 >= kvl || (causal && q0 + qc + 15 < wk0)) continue;
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
                    if (need_mask) ok = key < kvl && q0 + qi < T && (!causal || q0 + qi >= key);
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
// w*16.. with their Q and dO A fragments in registers. Per 64-key tile (up to the key end, as the forward) it
// walks the chunks of 16 keys that hold a real one:
// S = Q K^T, dP = dO V^T, P, dS, then dQ += dS K (dS fed back as an A fragment, k = keys).
template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dq_mma_kernel(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse,
                                     const float* D, int T, int NH, bool causal, const int* kv_len, float scale,
                                     float scale_log2) {
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
    const int kvl = attention_kv_end(kv_len, b, T);

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

    const int kend = causal ? min(kvl, q0 + kTile) : kvl;
    for (int k0 = 0; k0 < kend; k0 += kTile) {
        __syncthreads();  // previous K/V tile no longer read
        const int kv = min(kTile, kvl - k0);
        mma_load_tile<HS, kMmaThreads>(Ks, base + (size_t)k0 * rs + C, rs, kv);
        mma_load_tile<HS, kMmaThreads>(Vs, base + (size_t)k0 * rs + 2 * C, rs, kv);
        __syncthreads();
        const bool need_mask = q0 + kTile > T || k0 + kTile > kvl || (causal && k0 + kTile - 1 > q0);
#pragma unroll 1
        for (int kc = 0; kc < kTile; kc += 16) {
            if (k0 + kc >= kvl) break;  // the rest of the tile is padding
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
                    if (need_mask) ok = key < kvl && row < T && (!causal || key <= row);
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
// 3. launchers (kernels/attention_impl.cuh)
// =============================================================================================================

void launch_forward_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int HS, bool causal,
                        const int* kv_len, float scale, cudaStream_t stream) {
    const dim3 grid(ceil_div(T, kTile), NH, B);
    dispatch_head_size(HS, [&](auto hs) {
        constexpr int kHS = decltype(hs)::value;
        auto kernel = attention_forward_mma_kernel<kHS>;
        set_smem(kernel, mma_forward_smem<kHS>());
        kernel<<<grid, kMmaThreads, mma_forward_smem<kHS>(), stream>>>(out, lse, qkv, T, NH, causal, kv_len,
                                                                       scale * kLog2e);
        cudaCheck(cudaGetLastError());
    });
}

void launch_backward_mma(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* D, int B,
                         int T, int NH, int HS, bool causal, const int* kv_len, float scale, cudaStream_t stream) {
    const dim3 grid(ceil_div(T, kTile), NH, B);
    dispatch_head_size(HS, [&](auto hs) {
        constexpr int kHS = decltype(hs)::value;
        auto k1 = attention_backward_dkdv_mma_kernel<kHS>;
        set_smem(k1, mma_bwd_smem<kHS>());
        k1<<<grid, kMmaThreads, mma_bwd_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal, kv_len,
                                                               scale, scale * kLog2e);
        cudaCheck(cudaGetLastError());
        auto k2 = attention_backward_dq_mma_kernel<kHS>;
        set_smem(k2, mma_bwd_smem<kHS>());
        k2<<<grid, kMmaThreads, mma_bwd_smem<kHS>(), stream>>>(dqkv, dout, qkv, lse, D, T, NH, causal, kv_len,
                                                               scale, scale * kLog2e);
        cudaCheck(cudaGetLastError());
    });
}

}  // namespace attention_detail
#endif  // !PRAC_FP32
