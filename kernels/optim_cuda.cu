// The CUDA backend's Muon, Adam-mini, 8-bit AdamW, GaLore and RSO ops (declared in kernels/cuda_backend.cuh, contract and rounding
// seeds in kernels/optim_cuda.cuh). Each kernel and member names its CPU twin; shapes are row-major as there. GEMMs
// go through sgemm_rm (row-major mapped to cuBLAS's column-major, with gemm_cpu's arguments): cublasSgemm on fp32
// without TF32, except Newton-Schulz (ns_gemm: strided-batched over same-shape matrices), which in the bf16 build
// multiplies bf16 copies of its operands with fp32 accumulation as reference Muon does, and GaLore's Gram matrix
// (cublasDsyrk on fp64, with its eigensolve: galore_refresh). Compiled
// WITHOUT --use_fast_math (the elementwise updates must round like the CPU twins). docs/DESIGN.md sections 3.2, 3.4.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "kernels/cuda_backend.cuh"
#include "kernels/muon.h"  // MUON_NS_A/B/C: the same coefficients as the CPU twin
#include "kernels/optim_cuda.cuh"  // optim_step_seed, optim_call_seed, optim_round

namespace {

constexpr int OPT_BLOCK = 256;

// Row-major C (M, N) = alpha op(A) (M, K) op(B) (K, N) + beta C, gemm_cpu's arguments (kernels/matmul.h), as the
// column-major Cᵀ = op(B)ᵀ op(A)ᵀ. alpha, beta are host scalars (the handle's pointer mode is set to host).
void sgemm_rm(cublasHandle_t h, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
    cublasCheck(cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                            &alpha, B, ldb, A, lda, &beta, C, ldc));
}

// Newton-Schulz's GEMMs over `count` matrices stored one after the other (A, B, C at i * stride_a, stride_b,
// stride_c elements for matrix i): one strided-batched call, or sgemm_rm for one matrix. T = float: fp32 operands
// (cublasSgemm); T = bf16: bf16 operands, fp32 C, fp32 accumulation (tensor cores: the bf16 build's Newton-Schulz).
template <typename T>
void ns_gemm(cublasHandle_t h, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const T* A, int lda,
             size_t stride_a, const T* B, int ldb, size_t stride_b, float beta, float* C, int ldc, size_t stride_c,
             int count) {
    const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if constexpr (std::is_same<T, float>::value) {
        if (count == 1) return sgemm_rm(h, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        cublasCheck(cublasSgemmStridedBatched(h, tb, ta, N, M, K, &alpha, B, ldb, (long long)stride_b, A, lda,
                                              (long long)stride_a, &beta, C, ldc, (long long)stride_c, count));
    } else {
        if (count == 1)
            cublasCheck(cublasGemmEx(h, tb, ta, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C,
                                     CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        else
            cublasCheck(cublasGemmStridedBatchedEx(h, tb, ta, N, M, K, &alpha, B, CUDA_R_16BF, ldb,
                                                   (long long)stride_b, A, CUDA_R_16BF, lda, (long long)stride_a,
                                                   &beta, C, CUDA_R_32F, ldc, (long long)stride_c, count,
                                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

// The backend's cuBLAS handle on its stream with host scalars for the scope of one op (other code may have
// changed either), restored after.
struct HostScalars {
    cublasHandle_t h;
    cublasPointerMode_t saved;
    HostScalars(cublasHandle_t handle, cudaStream_t stream) : h(handle) {
        cublasCheck(cublasSetStream(h, stream));
        cublasCheck(cublasGetPointerMode(h, &saved));
        if (saved != CUBLAS_POINTER_MODE_HOST) cublasCheck(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    }
    ~HostScalars() {
        if (saved != CUBLAS_POINTER_MODE_HOST) cublasSetPointerMode(h, saved);
    }
};

// ---- Muon ----

// twin: muon_momentum_cpu. buf, u (n) fp32; grads (n) G. buf = mu buf + g; u = g + mu buf (nesterov) or buf,
// g = grads * grad_scale, in the twin's order.
template <typename G>
__global__ void muon_momentum_kernel(float* buf, float* u, const G* grads, size_t n, float mu, float grad_scale,
                                     bool nesterov) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float g = __fmul_rn(to_float(grads[i]), grad_scale);
        const float b = __fadd_rn(__fmul_rn(mu, buf[i]), g);
        buf[i] = b;
        u[i] = nesterov ? __fadd_rn(g, __fmul_rn(mu, b)) : b;
    }
}

// twin: the normalization at the top of newton_schulz_cpu, for matrix blockIdx.y of a batch: X (gridDim.y, n),
// matrix j *= (float)(1 / (sqrt(ss[j]) + 1e-7)), ss (gridDim.y) the device double sums of squares; every thread
// computes its matrix's scalar in double (IEEE sqrt and division).
__global__ void ns_normalize_kernel(float* X, size_t n, const double* ss) {
    float* x = X + (size_t)blockIdx.y * n;
    const float inv = (float)(1.0 / (sqrt(ss[blockIdx.y]) + 1e-7));
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __fmul_rn(x[i], inv);
}

// twin: muon_apply_cpu, plus master weights and stochastic rounding (adamw_kernel's scheme, seed per
// optim_cuda.cuh). params (n) T; master (n) fp32 or null; O (n) fp32. p = p decay - step O.
template <typename T>
__global__ void muon_apply_kernel(T* params, float* master, const float* O, size_t n, float decay, float step,
                                  uint64_t call_seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float p0 = master ? master[i] : to_float(params[i]);
        const float p1 = __fsub_rn(__fmul_rn(p0, decay), __fmul_rn(step, O[i]));
        if (master) master[i] = p1;
        params[i] = optim_round<T>(p1, call_seed, i);
    }
}

// ---- Adam-mini ----

// twin: adam_mini_update_cpu. One CUDA block per Adam-mini block k (grid-stride over the nblocks blocks):
// params, grads, m (nblocks * block); v (nblocks), one value per block; master (nblocks * block) fp32 or null.
// The block's sum of g² is a per-thread double sum then block_sum_double's fixed tree (deterministic; differs
// from the CPU's sequential double sum only by double rounding, far below the float the mean is stored in).
// Thread 0 updates v_b and the denominator, shared with the block; then every element does AdamW's update in
// the twin's operation order.
template <typename T>
__global__ void adam_mini_kernel(T* params, float* master, const T* grads, float* m, float* v, size_t nblocks,
                                 size_t block, float beta1, float one_minus_beta1, float beta2, float one_minus_beta2,
                                 float eps, float decay, float step_size, float bc2_sqrt, float grad_scale,
                                 uint64_t seed) {
    __shared__ float den_shared;
    for (size_t k = blockIdx.x; k < nblocks; k += gridDim.x) {
        const size_t base = k * block;
        double ss = 0.0;
        for (size_t i = threadIdx.x; i < block; i += blockDim.x) {
            const float gi = __fmul_rn(to_float(grads[base + i]), grad_scale);
            ss += (double)gi * (double)gi;  // exact product, as the twin's (double)gi * gi
        }
        ss = block_sum_double(ss);  // valid in thread 0
        if (threadIdx.x == 0) {
            const float mean = (float)(ss / (double)block);
            const float vb = __fadd_rn(__fmul_rn(beta2, v[k]), __fmul_rn(one_minus_beta2, mean));
            v[k] = vb;
            den_shared = __fadd_rn(__fdiv_rn(__fsqrt_rn(vb), bc2_sqrt), eps);
        }
        __syncthreads();
        const float den = den_shared;
        for (size_t i = threadIdx.x; i < block; i += blockDim.x) {
            const size_t j = base + i;
            const float gi = __fmul_rn(to_float(grads[j]), grad_scale);
            const float mi = __fadd_rn(__fmul_rn(beta1, m[j]), __fmul_rn(one_minus_beta1, gi));
            m[j] = mi;
            const float p0 = master ? master[j] : to_float(params[j]);
            const float p1 = __fsub_rn(__fmul_rn(p0, decay), __fdiv_rn(__fmul_rn(step_size, mi), den));
            if (master) master[j] = p1;
            params[j] = stochastic_round<T>(p1, seed, j);
        }
        __syncthreads();  // den_shared is rewritten for the next block
    }
}

// ---- AdamW, 8-bit states ----

constexpr int ADAMW8_THREADS = 256;
constexpr int ADAMW8_PER_THREAD = (int)(ADAMW8_BLOCK / ADAMW8_THREADS);
static_assert(ADAMW8_BLOCK % ADAMW8_THREADS == 0, "a quantization block is whole threads' elements");

// max of x over the block (blockDim.x a multiple of 32, <= 1024), returned to every thread. fmaxf ignores a NaN as
// the twin's std::max does (a max has no order to get wrong, so the result is the twin's).
__device__ float block_max(float x) {
    __shared__ float warp_part[32];
    __shared__ float result;
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32, nw = blockDim.x / 32;
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    if (lane == 0) warp_part[wid] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        float r = warp_part[0];
        for (int w = 1; w < nw; w++) r = fmaxf(r, warp_part[w]);
        result = r;
    }
    __syncthreads();
    const float r = result;
    __syncthreads();  // warp_part and result may be rewritten by the next call
    return r;
}

// twin: adamw8_update_cpu. One CUDA block of ADAMW8_THREADS threads per quantization block b (grid-stride over the
// blocks): thread i owns elements lo + i + k * ADAMW8_THREADS, dequantizes them (code value * the block's absmax),
// runs adamw_element_rn, and quantizes the new moments by the block's new absmax (block_max) with the twin's
// encoder. The code tables (4.6 KB) are staged in shared memory. params, grads, m_codes, v_codes (n);
// m_absmax, v_absmax (ceil(n / ADAMW8_BLOCK)); master (n) fp32 or null, as adamw_kernel.
template <typename T>
__global__ void adamw8_kernel(T* params, float* master, const T* grads, uint8_t* m_codes, uint8_t* v_codes,
                              float* m_absmax, float* v_absmax, size_t n, const AdamW8Codes* codes,
                              AdamWScalars<float> s, float one_minus_beta1, float one_minus_beta2, float grad_scale,
                              uint64_t seed) {
    __shared__ AdamW8Codes tab;
    static_assert(sizeof(AdamW8Codes) % 4 == 0, "the tables are copied as words");
    for (int w = threadIdx.x; w < (int)(sizeof(AdamW8Codes) / 4); w += blockDim.x)
        reinterpret_cast<uint32_t*>(&tab)[w] = reinterpret_cast<const uint32_t*>(codes)[w];
    __syncthreads();
    const size_t nblocks = (n + ADAMW8_BLOCK - 1) / ADAMW8_BLOCK;
    for (size_t b = blockIdx.x; b < nblocks; b += gridDim.x) {
        const size_t lo = b * ADAMW8_BLOCK, len = n - lo < ADAMW8_BLOCK ? n - lo : ADAMW8_BLOCK;
        const float m_scale = m_absmax[b], v_scale = v_absmax[b];
        float m[ADAMW8_PER_THREAD], v[ADAMW8_PER_THREAD], m_max = 0.0f, v_max = 0.0f;
#pragma unroll
        for (int k = 0; k < ADAMW8_PER_THREAD; k++) {
            const size_t i = threadIdx.x + (size_t)k * ADAMW8_THREADS, j = lo + i;
            if (i >= len) continue;
            m[k] = __fmul_rn(tab.m.value[m_codes[j]], m_scale);
            v[k] = __fmul_rn(tab.v.value[v_codes[j]], v_scale);
            const float p1 = adamw_element_rn(master ? master[j] : to_float(params[j]),
                                              __fmul_rn(to_float(grads[j]), grad_scale), m[k], v[k], s,
                                              one_minus_beta1, one_minus_beta2);
            if (master) master[j] = p1;
            params[j] = stochastic_round<T>(p1, seed, j);
            m_max = fmaxf(m_max, fabsf(m[k]));
            v_max = fmaxf(v_max, fabsf(v[k]));
        }
        m_max = block_max(m_max);  // its barriers also order every thread's read of m_absmax[b] before the write
        v_max = block_max(v_max);
#pragma unroll
        for (int k = 0; k < ADAMW8_PER_THREAD; k++) {
            const size_t i = threadIdx.x + (size_t)k * ADAMW8_THREADS, j = lo + i;
            if (i >= len) continue;
            m_codes[j] = dynamic_code_encode(tab.m, m_max > 0.0f ? __fdiv_rn(m[k], m_max) : 0.0f);
            v_codes[j] = dynamic_code_encode(tab.v, v_max > 0.0f ? __fdiv_rn(v[k], v_max) : 0.0f);
        }
        if (threadIdx.x == 0) {
            m_absmax[b] = m_max;
            v_absmax[b] = v_max;
        }
    }
}

// ---- GaLore ----

// twin: galore_adam_cpu. R, m1, m2 (n) fp32: moments absorb R, then R = m1 / (sqrt(m2) + eps), twin's order.
__global__ void galore_adam_kernel(float* R, float* m1, float* m2, size_t n, float beta1, float one_minus_beta1,
                                   float beta2, float one_minus_beta2, float eps) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float g = R[i];
        const float a = __fadd_rn(__fmul_rn(beta1, m1[i]), __fmul_rn(one_minus_beta1, g));
        const float b = __fadd_rn(__fmul_rn(beta2, m2[i]), __fmul_rn(__fmul_rn(one_minus_beta2, g), g));
        m1[i] = a;
        m2[i] = b;
        R[i] = __fdiv_rn(a, __fadd_rn(__fsqrt_rn(b), eps));
    }
}

// twin: the isfinite scan of galore_projection_cpu, plus the largest magnitude (0: G is zero). g (n) G.
// flags[0] |= 1 when an entry is not finite; flags[1] = max over finite entries of the bits of |x| (non-negative
// floats order like their bit patterns, so an integer atomicMax is an exact, order-independent float max). flags
// zeroed by the caller.
template <typename G>
__global__ void galore_scan_kernel(const G* g, size_t n, unsigned* flags) {
    unsigned bad = 0, maxbits = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float x = to_float(g[i]);
        if (!isfinite(x)) bad = 1;
        else maxbits = max(maxbits, __float_as_uint(fabsf(x)));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        bad |= __shfl_xor_sync(0xffffffffu, bad, o);
        maxbits = max(maxbits, __shfl_xor_sync(0xffffffffu, maxbits, o));
    }
    if ((threadIdx.x & 31) == 0) {
        if (bad) atomicOr(&flags[0], 1u);
        atomicMax(&flags[1], maxbits);
    }
}

// dst (n) D = src (n) G, exactly: D = float or double, G = float or bf16 (every value of G is one of D)
template <typename D, typename G>
__global__ void widen_kernel(D* dst, const G* src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (D)to_float(src[i]);
}

// P (k, r) row-major = the first r columns of the (k, k) identity: what LAPACK's sgesdd returns for a zero
// matrix (U = I, Vᵀ = I, checked against OpenBLAS), so a zero gradient block gets the CPU twin's P.
__global__ void identity_columns_kernel(float* P, int k, int r) {
    const size_t total = (size_t)k * r;
    for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        P[e] = (e / r == e % r) ? 1.0f : 0.0f;
}

// twin: the copy-out of galore_projection_cpu + galore_canonical_signs. Z (k, k) fp64 column-major: syevd's
// eigenvectors, eigenvalues ascending, so P's column j (the j-th largest) is Z's column k-1-j (contiguous).
// One block per j: the entry of largest magnitude (the first on exact ties, as the twin) sets the sign, then
// P[i * r + j] = ±float(Z[i, k-1-j]): the sign is chosen on the rounded column, as the twin chooses it on its
// fp32 vectors (negation is exact). P (k, r) row-major. blockDim.x = OPT_BLOCK.
__global__ void top_vectors_kernel(float* P, const double* Z, int k, int r) {
    __shared__ float best_v[OPT_BLOCK / 32];
    __shared__ int best_i[OPT_BLOCK / 32];
    __shared__ int flip;
    const int j = blockIdx.x;
    const double* z = Z + (size_t)(k - 1 - j) * k;
    float bv = -1.0f;
    int bi = 0;  // (a column of NaN, never "larger", keeps index 0: INT_MAX was read as z[INT_MAX])
    for (int i = threadIdx.x; i < k; i += blockDim.x) {  // increasing i: a thread keeps its first maximum
        const float a = fabsf((float)z[i]);
        if (a > bv) {
            bv = a;
            bi = i;
        }
    }
    // (larger magnitude, then smaller index) wins: the global first maximum, whatever the reduction order
    auto better = [](float av, int ai, float cv, int ci) { return cv > av || (cv == av && ci < ai); };
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(bv, bi, ov, oi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) {
        best_v[wid] = bv;
        best_i[wid] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float v = best_v[0];
        int ix = best_i[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++)
            if (better(v, ix, best_v[w], best_i[w])) {
                v = best_v[w];
                ix = best_i[w];
            }
        flip = (float)z[ix] < 0.0f;
    }
    __syncthreads();
    const bool neg = flip != 0;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        const float zi = (float)z[i];
        P[(size_t)i * r + j] = neg ? -zi : zi;
    }
}

// params (n) T = src (n) fp32 rounded per optim_round (the identity for T = float)
template <typename T>
__global__ void round_params_kernel(T* params, const float* src, size_t n, uint64_t call_seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        params[i] = optim_round<T>(src[i], call_seed, i);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Muon (train/optim_muon.h)
// ---------------------------------------------------------------------------------------------------------------

// twin: muon_momentum_cpu. buf (momentum), u (n) fp32; g (n) grad_t.
void CudaBackend::muon_momentum(float* buf, float* u, const grad_t* g, size_t n, float mu, float grad_scale,
                                bool nesterov) {
    if (n == 0) return;
    muon_momentum_kernel<grad_t><<<cuda_grid_1d(n, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(buf, u, g, n, mu, grad_scale,
                                                                                      nesterov);
    cudaCheck(cudaGetLastError());
}

// twin: newton_schulz_cpu on each of `count` matrices. X (count, rows, cols) fp32 row-major, in place; work
// count * newton_schulz_work_numel(rows, cols) floats. A tall X runs the transposed iteration (A = XᵀX,
// X = a X + X B) so the Gram matrix is the small one, as the twin. Every GEMM covers the whole batch (one
// strided-batched call: train/optim_muon.h batches the matrices of one shape, which alone are too small to fill a
// GPU at GPT-2 widths); each matrix gets the operations it would get alone.
//
// FP32 build: the twin's fp32 GEMMs, work laid out as the twin's, per batch: A, B (count, m, m) then the next X
// (count, rows, cols), m = min(rows, cols).
//
// bf16 build: reference Muon's precision. Every GEMM multiplies bf16 operands (rounded to nearest even from the fp32
// values) with fp32 accumulation and an fp32 result: 5 iterations x 3 GEMMs per matrix are ~64 TFLOP per LLaMA-1B
// step, estimated ~1.3 s as fp32 SGEMM on an H100 (more than forward + backward) and ~0.07 s at its bf16 peak.
// The iterate X, the Gram matrix A, the sum b A and the a X term stay fp32 (they enter as C with beta, not as
// operands), so the only roundings are the three operand copies per iteration (2^-9 relative each); Newton-Schulz
// needs no more (its fixed point is a band of singular values, [0.68, 1.21], not an exact value). One iteration:
//   Xh = bf16(X);  A = Xh Xhᵀ;  Ah = bf16(A);  A = b A + c Ah Ah;  Ah = bf16(A);  X = a X + Ah Xh
// (tall: A = Xhᵀ Xh, X = a X + Xh Ah), A updated in place (its old value is read as C only) and X too (the
// operands are the copies). work (count (2 m² + rows·cols) floats) holds [A (count, m, m) fp32][Xh (count, rows,
// cols) bf16][Ah (count, m, m) bf16]: count (4 m² + 2 rows·cols + 2 m²) bytes, within count (8 m² + 4 rows·cols)
// since m² <= rows·cols. (The copies are 16-byte aligned when work is and m is even and rows·cols a multiple of 8,
// as at every model width.)
void CudaBackend::newton_schulz(float* X, int rows, int cols, float* work, int steps, int count) {
    const size_t n = (size_t)rows * cols;
    if (n == 0 || count <= 0) return;
    if (count > 65535) fail("newton_schulz: %d matrices in one batch (at most 65535)", count);
    const bool tall = rows > cols;
    const int m = tall ? cols : rows;
    const size_t mm = (size_t)m * m, cn = (size_t)count * n, cmm = (size_t)count * mm;
    float* A = work;
    // X /= ||X||_F + 1e-7 per matrix: each sum of squares in double on the device (adamw.cuh's deterministic
    // two-stage sum; the partials are reused, the count results follow them), read by the scaling kernel from
    // device memory (no host round trip)
    void* ws = scratch_at_least((SUMSQ_BLOCKS + (size_t)count) * sizeof(double));
    double* ss = static_cast<double*>(ws) + SUMSQ_BLOCKS;
    for (int i = 0; i < count; i++)
        sum_squares_device_cuda<float>(ss + i, X + (size_t)i * n, n, false, ws, SUM_SQUARES_SCRATCH_BYTES, stream);
    ns_normalize_kernel<<<dim3(cuda_grid_1d(n, OPT_BLOCK), (unsigned)count), OPT_BLOCK, 0, stream>>>(X, n, ss);
    cudaCheck(cudaGetLastError());
    HostScalars hs(cublas, stream);
#if defined(PRAC_FP32)
    float* B = A + cmm;
    float* Y = B + cmm;
    float* cur = X;
    float* next = Y;
    for (int it = 0; it < steps; it++) {
        if (tall) ns_gemm(cublas, true, false, m, m, rows, 1.0f, cur, cols, n, cur, cols, n, 0.0f, A, m, mm, count);
        else ns_gemm(cublas, false, true, m, m, cols, 1.0f, cur, cols, n, cur, cols, n, 0.0f, A, m, mm, count);
        cudaCheck(cudaMemcpyAsync(B, A, cmm * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        ns_gemm(cublas, false, false, m, m, m, MUON_NS_C, A, m, mm, A, m, mm, MUON_NS_B, B, m, mm, count);  // b A + c A²
        cudaCheck(cudaMemcpyAsync(next, cur, cn * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        if (tall)
            ns_gemm(cublas, false, false, rows, cols, cols, 1.0f, cur, cols, n, B, m, mm, MUON_NS_A, next, cols, n,
                    count);  // a X + X B
        else
            ns_gemm(cublas, false, false, rows, cols, rows, 1.0f, B, m, mm, cur, cols, n, MUON_NS_A, next, cols, n,
                    count);  // a X + B X
        std::swap(cur, next);
    }
    if (cur != X) cudaCheck(cudaMemcpyAsync(X, cur, cn * sizeof(float), cudaMemcpyDeviceToDevice, stream));
#else
    static_assert(std::is_same<floatX, __nv_bfloat16>::value, "the bf16 build's floatX is bf16");
    __nv_bfloat16* Xh = reinterpret_cast<__nv_bfloat16*>(A + cmm);
    __nv_bfloat16* Ah = Xh + cn;
    for (int it = 0; it < steps; it++) {
        f32_to_floatx_kernel<<<ceil_div((long long)cn, 256), 256, 0, stream>>>(Xh, X, cn);
        cudaCheck(cudaGetLastError());
        if (tall) ns_gemm(cublas, true, false, m, m, rows, 1.0f, Xh, cols, n, Xh, cols, n, 0.0f, A, m, mm, count);
        else ns_gemm(cublas, false, true, m, m, cols, 1.0f, Xh, cols, n, Xh, cols, n, 0.0f, A, m, mm, count);
        f32_to_floatx_kernel<<<ceil_div((long long)cmm, 256), 256, 0, stream>>>(Ah, A, cmm);
        cudaCheck(cudaGetLastError());
        ns_gemm(cublas, false, false, m, m, m, MUON_NS_C, Ah, m, mm, Ah, m, mm, MUON_NS_B, A, m, mm, count);  // b A + c A²
        f32_to_floatx_kernel<<<ceil_div((long long)cmm, 256), 256, 0, stream>>>(Ah, A, cmm);
        cudaCheck(cudaGetLastError());
        if (tall)
            ns_gemm(cublas, false, false, rows, cols, cols, 1.0f, Xh, cols, n, Ah, m, mm, MUON_NS_A, X, cols, n,
                    count);  // a X + X B
        else
            ns_gemm(cublas, false, false, rows, cols, rows, 1.0f, Ah, m, mm, Xh, cols, n, MUON_NS_A, X, cols, n,
                    count);  // a X + B X
    }
#endif
}

// twin: muon_apply_cpu. params (n) act_t; master (n) fp32 or null; O (n) fp32 (the orthogonalized update).
// step = lr * 0.2 * sqrt(max(rows, cols)); salt = the matrix's element offset in the parameter buffer.
void CudaBackend::muon_apply(act_t* params, float* master, const float* O, size_t n, float lr, float wd, float step,
                             uint64_t salt) {
    if (n == 0) return;
    const float decay = 1.0f - lr * wd;  // the twin's scalar, computed the same way on the host
    muon_apply_kernel<act_t><<<cuda_grid_1d(n, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(
        params, master, O, n, decay, step, optim_call_seed(seed, salt, lr, step));
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------------------------
// Adam-mini (train/optim_adam_mini.h)
// ---------------------------------------------------------------------------------------------------------------

// twin: adam_mini_update_cpu. params, grads, m (n); v (n / block); master (n) fp32 or null; salt = the segment's
// element offset in the parameter buffer (adamw_update's rounding seed with step t).
void CudaBackend::adam_mini_update(act_t* params, float* master, const grad_t* grads, float* m, float* v, size_t n,
                                   size_t block, float lr, float beta1, float beta2, float eps, float wd, int t,
                                   float grad_scale, uint64_t salt) {
    if (n == 0) return;
    if (block == 0 || n % block != 0) fail("adam_mini_update: %zu elements are not blocks of %zu", n, block);
    // the twin's scalars, computed the same way (double bias corrections, then float)
    const double bc1 = 1.0 - std::pow((double)beta1, t), bc2 = 1.0 - std::pow((double)beta2, t);
    const float step_size = (float)(lr / bc1), bc2_sqrt = (float)std::sqrt(bc2);
    const float decay = 1.0f - lr * wd;
    const size_t nblocks = n / block;
    // threads per block: 256, or the block rounded up to a warp (block_sum_double needs whole warps)
    const int threads = block >= OPT_BLOCK ? OPT_BLOCK : (int)((block + 31) / 32 * 32);
    const unsigned grid = cuda_grid_1d(nblocks, 1);  // (grid-stride over the blocks)
    adam_mini_kernel<act_t><<<grid, threads, 0, stream>>>(params, master, grads, m, v, nblocks, block, beta1,
                                                          1.0f - beta1, beta2, 1.0f - beta2, eps, decay, step_size,
                                                          bc2_sqrt, grad_scale, optim_step_seed(seed, t, salt));
    cudaCheck(cudaGetLastError());
}

// twin: adamw8_update_cpu. params, grads, m_codes, v_codes (n); m_absmax, v_absmax (ceil(n / ADAMW8_BLOCK)); codes
// (device); master (n) fp32 or null; salt = the segment's element offset (adamw_update's rounding seed with step t).
void CudaBackend::adamw8_update(act_t* params, float* master, const grad_t* grads, uint8_t* m_codes, uint8_t* v_codes,
                                float* m_absmax, float* v_absmax, size_t n, const AdamW8Codes* codes, float lr,
                                float beta1, float beta2, float eps, float wd, int t, float grad_scale, uint64_t salt) {
    if (n == 0) return;
    const AdamWScalars<float> s(lr, beta1, beta2, eps, wd, t);  // the twin's scalars
    const unsigned grid = cuda_grid_1d(n, ADAMW8_BLOCK);  // (grid-stride over the quantization blocks)
    adamw8_kernel<act_t><<<grid, ADAMW8_THREADS, 0, stream>>>(params, master, grads, m_codes, v_codes, m_absmax,
                                                              v_absmax, n, codes, s, 1.0f - beta1, 1.0f - beta2,
                                                              grad_scale, optim_step_seed(seed, t, salt));
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------------------------
// GaLore (train/optim_galore.h)
// ---------------------------------------------------------------------------------------------------------------

// twin: galore_projection_cpu. P (k, r) fp32 row-major, k = n (right) or m (left); G (m, n) grad_t row-major.
// The twin takes an SVD (sgesdd); here the top r eigenvectors of the Gram matrix on the chosen side (right:
// GᵀG (n, n), its eigenvectors are V; left: G Gᵀ (m, m), U) by cusolverDnXsyevd, the solver PRAC's refresh
// uses: one SYRK and a k x k eigensolve instead of an m x n SVD (cuSOLVER's gesvd is many times slower at GaLore's
// shapes, and GaLore refreshes every block of every layer). In fp64: the Gram matrix squares the condition
// number, so a singular vector is resolved to about eps * s_1² / (s_i² - s_(i+1)²) instead of the SVD's
// eps * s_1 / (s_i - s_(i+1)). With fp32's eps that lost the top-r subspace wherever s_r / s_1 fell below about
// 3e-4 (a gradient's spectrum may; the test plants one at 1e-4); with fp64's it is at least the twin's fp32
// precision down to s_i / s_1 ~ 1e-9. G enters exactly (fp32 and bf16 values are doubles) and needs no rescaling:
// squares of floats neither overflow nor underflow in fp64. The cost over fp32: the fp64 SYRK and eigensolve of
// a refresh GaLore takes once every T steps (to be timed on a GPU: test_optim_cuda's llama-1b refresh line).
// Returns as the twin: 0; -1 when G has a non-finite entry (P untouched); cuSOLVER's positive info when syevd
// did not converge (P untouched). Scratch (the backend's): kernels/cuda_sizes.h's galore_refresh_scratch.
int CudaBackend::galore_refresh(float* P, const grad_t* G, int m, int n, int r, bool right) {
    const size_t mn = (size_t)m * n;
    const int k = right ? n : m;
    if (mn == 0 || r <= 0) return 0;
    if (r > std::min(m, n))  // the twin's SVD has min(m, n) vectors on either side
        fail("galore_refresh: rank %d exceeds min(m, n) of a (%d, %d) block", r, m, n);
    HostScalars hs(cublas, stream);
    cusolverCheck(cusolverDnSetStream(cusolver, stream));

    const GaloreRefreshScratch at = galore_refresh_scratch(m, n, k);
    char* base = (char*)scratch_at_least(at.solver);
    CusolverParams params;  // destroyed on the failure path too
    size_t dev_bytes = 0, host_bytes = 0;
    cusolverCheck(cusolverDnXsyevd_bufferSize(cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                              (int64_t)k, CUDA_R_64F, base + at.gram, (int64_t)k, CUDA_R_64F,
                                              base + at.eigenvalues, CUDA_R_64F, &dev_bytes, &host_bytes));
    base = (char*)scratch_at_least(at.solver + dev_bytes);  // may move: pointers are taken after
    double* Gd = (double*)base;
    double* gram = (double*)(base + at.gram);
    double* w = (double*)(base + at.eigenvalues);
    unsigned* words = (unsigned*)(base + at.words);  // [0] non-finite flag, [1] max |G| bits, [2] syevd info
    int* info = (int*)(words + 2);
    std::vector<char> host_buf(host_bytes);

    // 1. finiteness, and whether G is zero (one read back)
    cudaCheck(cudaMemsetAsync(words, 0, 2 * sizeof(unsigned), stream));
    galore_scan_kernel<grad_t><<<cuda_grid_1d(mn, OPT_BLOCK, 4096), OPT_BLOCK, 0, stream>>>(G, mn, words);
    cudaCheck(cudaGetLastError());
    unsigned scan[2] = {0, 0};
    cudaCheck(cudaMemcpyAsync(scan, words, sizeof scan, cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    int ret = 0;
    if (scan[0]) {
        ret = -1;
    } else if (scan[1] == 0) {  // G == 0: LAPACK's U = I, Vᵀ = I
        identity_columns_kernel<<<cuda_grid_1d((size_t)k * r, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(P, k, r);
        cudaCheck(cudaGetLastError());
    } else {
        // 2. Gd (m, n) = G in fp64
        widen_kernel<double, grad_t><<<cuda_grid_1d(mn, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(Gd, G, mn);
        cudaCheck(cudaGetLastError());
        // 3. the Gram matrix's upper triangle, column-major (k, k). Row-major Gd (m, n) is the column-major
        //    A = Gdᵀ (n, m), lda n:  right: GdᵀGd = A Aᵀ (SYRK 'N', n x n, k = m);
        //                            left:  Gd Gdᵀ = Aᵀ A (SYRK 'T', m x m, k = n).
        const double one = 1.0, zero = 0.0;
        if (right)
            cublasCheck(cublasDsyrk(cublas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, n, m, &one, Gd, n, &zero, gram, n));
        else
            cublasCheck(cublasDsyrk(cublas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, m, n, &one, Gd, n, &zero, gram, m));
        // 4. eigenvectors in place of the Gram matrix, eigenvalues ascending
        cusolverCheck(cusolverDnXsyevd(cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                       (int64_t)k, CUDA_R_64F, gram, (int64_t)k, CUDA_R_64F, w, CUDA_R_64F,
                                       base + at.solver, dev_bytes, host_buf.empty() ? nullptr : host_buf.data(),
                                       host_bytes, info));
        int h_info = 0;
        cudaCheck(cudaMemcpyAsync(&h_info, info, sizeof h_info, cudaMemcpyDeviceToHost, stream));
        cudaCheck(cudaStreamSynchronize(stream));
        if (h_info < 0) fail("galore_refresh: cusolverDnXsyevd rejected parameter %d (k = %d)", -h_info, k);
        ret = h_info;
        if (ret == 0) {
            // 5. the top r, descending, canonical signs, into P
            top_vectors_kernel<<<r, OPT_BLOCK, 0, stream>>>(P, gram, k, r);
            cudaCheck(cudaGetLastError());
        }
    }
    return ret;
}

// twin: galore_project_cpu. R (m, r) = grad_scale G P (right) or R (r, n) = grad_scale Pᵀ G (left); G (m, n)
// grad_t, P (k, r) fp32. A bf16 G is first widened to fp32 in the backend's scratch (m n floats, exact), so the
// product is the twin's fp32 GEMM; P is never rounded to bf16.
void CudaBackend::galore_project(float* R, const grad_t* G, const float* P, int m, int n, int r, bool right,
                                 float grad_scale) {
    const size_t mn = (size_t)m * n;
    if (mn == 0 || r <= 0) return;
    const float* Gf;
    if constexpr (std::is_same_v<grad_t, float>) {  // (a non-template member: both branches must compile)
        Gf = reinterpret_cast<const float*>(G);
    } else {
        float* tmp = (float*)scratch_at_least(mn * sizeof(float));
        widen_kernel<float, grad_t><<<cuda_grid_1d(mn, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(tmp, G, mn);
        cudaCheck(cudaGetLastError());
        Gf = tmp;
    }
    HostScalars hs(cublas, stream);
    if (right) sgemm_rm(cublas, false, false, m, r, n, grad_scale, Gf, n, P, r, 0.0f, R, r);
    else sgemm_rm(cublas, true, false, r, n, m, grad_scale, P, r, Gf, n, 0.0f, R, n);
}

// twin: galore_adam_cpu. R, m1, m2 (n) fp32, in place.
void CudaBackend::galore_adam(float* R, float* m1, float* m2, size_t n, float b1, float b2, float eps) {
    if (n == 0) return;
    galore_adam_kernel<<<cuda_grid_1d(n, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(R, m1, m2, n, b1, 1.0f - b1, b2,
                                                                            1.0f - b2, eps);
    cudaCheck(cudaGetLastError());
}

// ---- RSO (train/optim_rso.h): GaLore's ops plus two element-wise steps on the subspace variable B ----

// twin: rso_prox_cpu. R, B (n) fp32: R += prox B.
static __global__ void rso_prox_kernel(float* R, const float* B, size_t n, float prox) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        R[i] = __fadd_rn(R[i], __fmul_rn(prox, B[i]));
}
// twin: rso_track_cpu. B, N (n) fp32: B -= step N.
static __global__ void rso_track_kernel(float* B, const float* N, size_t n, float step) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        B[i] = __fsub_rn(B[i], __fmul_rn(step, N[i]));
}

// twin: galore_apply_cpu. W (m, n) act_t; master (m, n) fp32 or null; N (m, r) (right) or (r, n) (left);
// P (k, r). One GEMM as the twin: W = keep W - step keep back(N), keep = 1 - decay (alpha = -step keep,
// beta = keep), on the fp32 copy: master when there is one (then W = master stochastically rounded), W itself
// in the fp32 build, else (bf16 without master) a widened copy in the scratch, rounded back.
void CudaBackend::galore_apply(act_t* W, float* master, const float* N, const float* P, int m, int n, int r,
                               bool right, float step, float decay, uint64_t salt) {
    const size_t mn = (size_t)m * n;
    if (mn == 0) return;
    const float keep = 1.0f - decay;
    const float alpha = -step * keep;  // the twin's scalars
    float* Wf = master;
    if (!Wf) {
        if constexpr (std::is_same_v<act_t, float>) {
            Wf = reinterpret_cast<float*>(W);
        } else {
            Wf = (float*)scratch_at_least(mn * sizeof(float));
            widen_kernel<float, act_t><<<cuda_grid_1d(mn, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(Wf, W, mn);
            cudaCheck(cudaGetLastError());
        }
    }
    {
        HostScalars hs(cublas, stream);
        if (right) sgemm_rm(cublas, false, true, m, n, r, alpha, N, r, P, r, keep, Wf, n);
        else sgemm_rm(cublas, false, false, m, n, r, alpha, P, r, N, n, keep, Wf, n);
    }
    if ((void*)Wf != (void*)W) {
        round_params_kernel<act_t><<<cuda_grid_1d(mn, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(
            W, Wf, mn, optim_call_seed(seed, salt, step, decay));
        cudaCheck(cudaGetLastError());
    }
}

void CudaBackend::rso_prox(float* R, const float* B, size_t n, float prox) {
    if (n == 0) return;
    rso_prox_kernel<<<cuda_grid_1d(n, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(R, B, n, prox);
    cudaCheck(cudaGetLastError());
}
void CudaBackend::rso_track(float* B, const float* N, size_t n, float step) {
    if (n == 0) return;
    rso_track_kernel<<<cuda_grid_1d(n, OPT_BLOCK), OPT_BLOCK, 0, stream>>>(B, N, n, step);
    cudaCheck(cudaGetLastError());
}
