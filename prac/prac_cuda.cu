// PRAC site ops on the GPU: CUDA twins of prac/prac.h (compress, reconstruct, factored weight gradient) and
// prac_cpu.cpp (Gaussian draw, basis refresh); the contract is prac/prac_cuda.cuh. Row-major on cuBLAS:
// prac_gemm_rm below runs each row-major GEMM as the column-major product of the transposes (operands and M, N swapped), and
// every GEMM here calls it with the same arguments as the CPU twin calls gemm_cpu. The refresh works on an fp32
// column-major copy of P, whose Q1 and Q2 blocks cuSOLVER and cublasSgemm take directly, and writes back only the
// parts that changed. Compiled WITHOUT --use_fast_math: the Gaussian draw's Box-Muller runs in double
// (prac/philox.h) so host and device agree to the final rounding to float. Details: docs/DESIGN.md sections 3.2, 4.4.
#include "prac/prac_cuda.cuh"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"
#include "kernels/matmul.cuh"  // matmul_dbias_cuda: the deterministic dbias reduction
#include "prac/fp8.h"
#include "prac/philox.h"
#include "prac/refresh_layout.h"

// ---------------------------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------------------------

template <typename T>
constexpr cudaDataType_t cuda_dtype();
template <>
constexpr cudaDataType_t cuda_dtype<float>() {
    return CUDA_R_32F;
}
template <>
constexpr cudaDataType_t cuda_dtype<__nv_bfloat16>() {
    return CUDA_R_16BF;
}

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
    return __float2bfloat16(v);  // round to nearest even
}

// The handle's pointer mode set to HOST for the scope (alpha/beta below are host scalars), restored after.
struct CublasHostPointers {
    cublasHandle_t h;
    cublasPointerMode_t saved;
    explicit CublasHostPointers(cublasHandle_t handle) : h(handle) {
        cublasCheck(cublasGetPointerMode(h, &saved));
        if (saved != CUBLAS_POINTER_MODE_HOST) cublasCheck(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
    }
    ~CublasHostPointers() {
        if (saved != CUBLAS_POINTER_MODE_HOST) cublasSetPointerMode(h, saved);
    }
};

// Row-major on column-major cuBLAS (prac_cuda.cuh) as C^T = op(B)^T op(A)^T:
//   cublasGemmEx(transa = op of B, transb = op of A, m = N, n = M, k = K, A := B (ldb), B := A (lda), C (ldc)).
void prac_gemm_rm(cublasHandle_t h, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                  cudaDataType_t a_type, int lda, const void* B, cudaDataType_t b_type, int ldb, float beta, void* C,
                  cudaDataType_t c_type, int ldc) {
    cublasCheck(cublasGemmEx(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K,
                             &alpha, B, b_type, ldb, A, a_type, lda, &beta, C, c_type, ldc, CUBLAS_COMPUTE_32F,
                             CUBLAS_GEMM_DEFAULT));
}

// ---------------------------------------------------------------------------------------------------------------
// compress / reconstruct / weight gradient
// ---------------------------------------------------------------------------------------------------------------

// xc (N, r) = x (N, n) @ P (n, r). Row-major gemm(N, N, M=N, N=r, K=n) -> cuBLAS (N, N, m=r, n=N, k=n):
// A = P as column-major (r, n) ld r, B = x as column-major (n, N) ld n, C = xc^T column-major (r, N) ld r.
template <typename T>
void prac_compress_cuda(T* xc, const T* x, const T* P, int N, int n, int r, const PracCudaHandles& h, int ld_x) {
    cublasCheck(cublasSetStream(h.cublas, h.stream));
    CublasHostPointers pm(h.cublas);
    const cudaDataType_t t = cuda_dtype<T>();
    // twin: gemm_cpu(false, false, N, r, n, 1, x, ld_x, P, r, 0, xc, r)
    prac_gemm_rm(h.cublas, false, false, N, r, n, 1.0f, x, t, ld_x ? ld_x : n, P, t, r, 0.0f, xc, t, r);
}

// x (N, n) = xc (N, r) @ P (n, r)^T. Row-major gemm(N, T, M=N, N=n, K=r) -> cuBLAS (T, N, m=n, n=N, k=r):
// A = P column-major (r, n) ld r, transposed to (n, r); B = xc column-major (r, N) ld r; C = x^T (n, N) ld n.
template <typename T>
void prac_reconstruct_cuda(T* x, const T* xc, const T* P, int N, int n, int r, const PracCudaHandles& h, int ld_x) {
    cublasCheck(cublasSetStream(h.cublas, h.stream));
    CublasHostPointers pm(h.cublas);
    const cudaDataType_t t = cuda_dtype<T>();
    // twin: gemm_cpu(false, true, N, n, r, 1, xc, r, P, r, 0, x, ld_x)
    prac_gemm_rm(h.cublas, false, true, N, n, r, 1.0f, xc, t, r, P, t, r, 0.0f, x, t, ld_x ? ld_x : n);
}

// dW (OC, n) += (dY (N, OC)^T @ xc (N, r)) @ P (n, r)^T via tmp (OC, r) stored as T (see the header).
//  1. tmp = dY^T xc.  Row-major gemm(T, N, M=OC, N=r, K=N) -> cuBLAS (N, T, m=r, n=OC, k=N):
//     A = xc column-major (r, N) ld r; B = dY column-major (OC, N) ld OC, transposed to (N, OC);
//     C = tmp^T column-major (r, OC) ld r.
//  2. dW += tmp P^T.  Row-major gemm(N, T, M=OC, N=n, K=r, beta=1) -> cuBLAS (T, N, m=n, n=OC, k=r):
//     A = P column-major (r, n) ld r, transposed to (n, r); B = tmp column-major (r, OC) ld r;
//     C = dW^T column-major (n, OC) ld n, type G, read and written (beta = 1).
//  3. dbias += column sums of dY: the uncompressed path's deterministic two-stage sum (matmul_dbias_cuda,
//     kernels/matmul.cuh), ceil(OC/32) x G blocks (a single-stage sum over all N rows would launch only
//     ceil(OC/32): 24-96 blocks for GPT-2, a fraction of a GPU). Its (G, OC) fp32 partial sums go to tmp, which
//     step 2 is done with (same stream) and which holds OC * r floats, so G = min(matmul_dbias_groups(N), r):
//     at every real width r >= 64 >= matmul_dbias_groups(N) (GPT-2 124M at the default ranks: r = 448 at ln1
//     and ln2, 1840 at fch_gelu), so a compressed site's bias gradient is the uncompressed site's bit for bit;
//     only toy ranks below 64 with N > 256 r group more coarsely (still deterministic). No extra memory: the
//     planner's factored-gradient scratch (prac/site.h factored_grad_scratch) is unchanged.
template <typename T, typename G>
void prac_weight_grad_cuda(G* dW, G* dbias, const T* dY, const T* xc, const T* P, int N, int n, int r, int OC,
                           float* tmp, const PracCudaHandles& h, int ld_dy) {
    cublasCheck(cublasSetStream(h.cublas, h.stream));
    CublasHostPointers pm(h.cublas);
    const cudaDataType_t t = cuda_dtype<T>(), g = cuda_dtype<G>();
    T* tmp_t = reinterpret_cast<T*>(tmp);  // fp32 build: the fp32 tmp itself; bf16 build: its first half
    ld_dy = ld_dy ? ld_dy : OC;
    // twin: gemm_cpu(true, false, OC, r, N, 1, dY, ld_dy, xc, r, 0, tmp, r)
    prac_gemm_rm(h.cublas, true, false, OC, r, N, 1.0f, dY, t, ld_dy, xc, t, r, 0.0f, tmp_t, t, r);
    // twin: gemm_cpu(false, true, OC, n, r, 1, tmp, r, P, r, 1, dW, n)
    prac_gemm_rm(h.cublas, false, true, OC, n, r, 1.0f, tmp_t, t, r, P, t, r, 1.0f, dW, g, n);
    if (dbias && N > 0 && OC > 0) {
        if (r < 1) throw std::runtime_error("prac_weight_grad_cuda: dbias needs r >= 1 (tmp holds the partial sums)");
        const int groups = std::min(matmul_dbias_groups(N), r);
        matmul_dbias_cuda<T, G>(dbias, dY, N, OC, groups, tmp, h.stream, ld_dy);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Gaussian draw (twin of prac_gaussian_cpu)
// ---------------------------------------------------------------------------------------------------------------

// Element (i, j) of the (n, cols) draw is normal number e = i * cols + j, i.e. value j' = e % 4 of Philox block
// e / 4, stored at S[i * row_stride + j * col_stride]: row-major (ld, 1) for prac_gaussian_cuda, column-major
// (1, n) for the refresh's working copy. One thread per block of four (grid-stride).
__global__ void prac_gaussian_kernel(float* S, int n, int cols, size_t row_stride, size_t col_stride, uint32_t k0,
                                     uint32_t k1, uint32_t stream_hi, uint32_t stream_lo) {
    size_t total = (size_t)n * cols;
    size_t blocks = (total + 3) / 4;
    for (size_t b = blockIdx.x * (size_t)blockDim.x + threadIdx.x; b < blocks; b += (size_t)gridDim.x * blockDim.x) {
        double z[4];
        philox_normal4(k0, k1, stream_hi, stream_lo, b, z);
        for (int j = 0; j < 4 && 4 * b + j < total; j++) {
            size_t e = 4 * b + j;
            S[(e / cols) * row_stride + (e % cols) * col_stride] = (float)z[j];
        }
    }
}

static void gaussian_strided(float* S, int n, int cols, size_t row_stride, size_t col_stride, const PracDrawKey& key,
                             cudaStream_t stream) {
    size_t total = (size_t)n * cols;
    if (total == 0) return;
    PracPhiloxWords w = prac_philox_words(key);  // the CPU twin's words (prac/prac.h)
    prac_gaussian_kernel<<<cuda_grid_1d((total + 3) / 4, 256, 65536), 256, 0, stream>>>(
        S, n, cols, row_stride, col_stride, w.k0, w.k1, w.stream_hi, w.stream_lo);
    cudaCheck(cudaGetLastError());
}

void prac_gaussian_cuda(float* S, int n, int cols, int ld, const PracDrawKey& key, cudaStream_t stream) {
    gaussian_strided(S, n, cols, (size_t)ld, 1, key, stream);
}

// ---------------------------------------------------------------------------------------------------------------
// fp8 storage (twins of prac_fp8_quantize_cpu / prac_fp8_dequantize_cpu)
// ---------------------------------------------------------------------------------------------------------------

// Row i of xc (N, r): its largest finite |value| (a block max: exact in any order), the scale exponent k, then each
// thread takes whole Philox blocks of the row's words (e0 = (row0 + i)·r, word e for element e - e0; a block that
// straddles two rows is computed by both rows' blocks, each using its own words). One block per row (grid-stride).
template <typename T>
__global__ void prac_fp8_quantize_kernel(uint8_t* q, float* scale, const T* xc, int N, int r, uint64_t row0,
                                         uint32_t k0, uint32_t k1, uint32_t stream_hi, uint32_t stream_lo) {
    __shared__ float warp_max[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
    for (int i = blockIdx.x; i < N; i += gridDim.x) {
        const T* x = xc + (size_t)i * r;
        float amax = 0.0f;
        for (int j = threadIdx.x; j < r; j += blockDim.x) {
            float v = to_f32(x[j]);
            if (isfinite(v)) amax = fmaxf(amax, fabsf(v));
        }
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        if (lane == 0) warp_max[warp] = amax;
        __syncthreads();
        amax = 0.0f;
        for (int w = 0; w < warps; w++) amax = fmaxf(amax, warp_max[w]);
        __syncthreads();  // warp_max is rewritten by the next row
        const int k = fp8_row_exponent(amax);
        const float up = fp8_pow2(k);
        if (threadIdx.x == 0) scale[i] = fp8_pow2(-k);
        const uint64_t e0 = (row0 + (uint64_t)i) * (uint64_t)r, e1 = e0 + (uint64_t)r;
        for (uint64_t b = (e0 >> 2) + threadIdx.x; 4 * b < e1; b += blockDim.x) {
            Philox4x32 bits = philox_stream_block(k0, k1, stream_hi, stream_lo, b);
            for (int t = 0; t < 4; t++) {
                uint64_t e = 4 * b + t;
                if (e >= e0 && e < e1) q[(size_t)i * r + (e - e0)] = fp8_e4m3_sr(to_f32(x[e - e0]) * up, bits.v[t]);
            }
        }
    }
}

template <typename T>
void prac_fp8_quantize_cuda(uint8_t* q, float* scale, const T* xc, int N, int r, uint64_t row0, const PracDrawKey& key,
                            cudaStream_t stream) {
    if (N <= 0 || r <= 0) return;
    PracPhiloxWords w = prac_philox_words(key);
    // a thread per element of the row up to 256: a row of r = 16 left 240 threads idle at every barrier (on the CPU
    // execution layer, a fiber switch each). Any block size gives the same codes: the max is exact in any order, and
    // an element's rounding bits are its Philox word's, not its thread's.
    const int threads = std::min(256, (r + 31) / 32 * 32);
    prac_fp8_quantize_kernel<T><<<cuda_grid_1d((size_t)N, 1, 65536), threads, 0, stream>>>(
        q, scale, xc, N, r, row0, w.k0, w.k1, w.stream_hi, w.stream_lo);
    cudaCheck(cudaGetLastError());
}

// xc[e] = decode(q[e]) · scale[e / r]: the e4m3 -> half conversion (cvt.rn.f16x2.e4m3x2 on sm_89+), exact.
template <typename T>
__global__ void prac_fp8_dequantize_kernel(T* xc, const uint8_t* q, const float* scale, size_t count, int r) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x) {
        float v = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)q[e], __NV_E4M3)));
        xc[e] = from_f32<T>(v * scale[e / r]);
    }
}

template <typename T>
void prac_fp8_dequantize_cuda(T* xc, const uint8_t* q, const float* scale, int N, int r, cudaStream_t stream) {
    size_t count = (size_t)N * (r > 0 ? r : 0);
    if (count == 0) return;
    prac_fp8_dequantize_kernel<T><<<cuda_grid_1d(count, 256, 65536), 256, 0, stream>>>(xc, q, scale, count, r);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------------------------
// refresh (twin of prac_refresh_cpu)
// ---------------------------------------------------------------------------------------------------------------

// W (n, r) column-major fp32 <- P (n, r) row-major T (all columns).
template <typename T>
__global__ void prac_load_basis_kernel(float* W, const T* P, int n, int r) {
    size_t total = (size_t)n * r;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / r, j = e % r;
        W[j * n + i] = to_f32(P[e]);
    }
}

// P[:, c0:c1] (row-major T) <- W[:, c0:c1] (column-major fp32).
template <typename T>
__global__ void prac_store_basis_kernel(T* P, const float* W, int n, int r, int c0, int c1) {
    int w = c1 - c0;
    size_t total = (size_t)n * w;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t i = e / w, j = c0 + e % w;
        P[i * r + j] = from_f32<T>(W[j * n + i]);
    }
}

// W[:, j] = G[:, n-1-j] for j < r1: the top-r1 eigenvectors in descending order (syevd: ascending eigenvalues,
// eigenvectors as the columns of the column-major G).
__global__ void prac_top_eigvecs_kernel(float* W, const float* G, int n, int r1) {
    size_t total = (size_t)n * r1;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x) {
        size_t j = e / n, i = e % n;
        W[e] = G[(size_t)(n - 1 - j) * n + i];
    }
}

__global__ void prac_scale_kernel(float* y, size_t count, float s) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x)
        y[e] *= s;
}

// *flag = 1 if any of x[0:count) is NaN or +-Inf (flag zeroed by the caller).
__global__ void prac_nonfinite_kernel(const float* x, size_t count, int* flag) {
    bool bad = false;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x)
        bad |= !isfinite(x[e]);
    if (bad) atomicExch(flag, 1);
}

// S (c, c) column-major: the strict lower triangle set to 0 (potrf leaves it as it was; the R product reads it).
__global__ void prac_upper_kernel(float* S, int c) {
    size_t total = (size_t)c * c;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < total; e += (size_t)gridDim.x * blockDim.x)
        if (e % c > e / c) S[e] = 0.0f;
}

// A (c, c) column-major: A += v I.
__global__ void prac_add_diag_kernel(float* A, int c, float v) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < c; i += gridDim.x * blockDim.x) A[(size_t)i * c + i] += v;
}

// S (c, c) column-major += s I with s = rel · tr(S) (the trace in double; one block): shifted Cholesky-QR's shift,
// formed on the device so that taking it costs no host read. twin: shifted_cholqr (prac_cpu.cpp)
constexpr int SHIFT_THREADS = 256;
__global__ void prac_shift_diag_kernel(float* S, int c, double rel) {
    __shared__ double acc[SHIFT_THREADS];
    double t = 0;
    for (int i = threadIdx.x; i < c; i += SHIFT_THREADS) t += S[(size_t)i * c + i];
    acc[threadIdx.x] = t;
    __syncthreads();
    for (int o = SHIFT_THREADS / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) acc[threadIdx.x] += acc[threadIdx.x + o];
        __syncthreads();
    }
    const float shift = (float)(rel * acc[0]);
    for (int i = threadIdx.x; i < c; i += SHIFT_THREADS) S[(size_t)i * c + i] += shift;
}

// y += a x
__global__ void prac_axpy_kernel(float* y, const float* x, size_t count, float a) {
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x)
        y[e] += a * x[e];
}

// Sums of squares in double, deterministic (the grid a function of count; fixed tree order). sym_c == 0: x[0:count) plain;
// sym_c = c > 0: x is a symmetric (c, c) column-major with only its upper triangle valid, and the sum is
// ||x - I||_F^2 (off-diagonal entries counted twice). partial[blockIdx.x] = this block's sum.
constexpr int SUMSQ_THREADS = 256;  // REFRESH_SUMSQ_BLOCKS: prac/refresh_layout.h (the workspace holds the partials)
static_assert((SUMSQ_THREADS & (SUMSQ_THREADS - 1)) == 0, "the tree below halves SUMSQ_THREADS");
__global__ void prac_sumsq_partial_kernel(const float* x, size_t count, int sym_c, double* partial) {
    __shared__ double acc[SUMSQ_THREADS];
    double s = 0;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x) {
        double v = x[e];
        if (sym_c > 0) {
            size_t j = e / sym_c, i = e % sym_c;
            if (i > j) continue;
            v -= (i == j);
            s += (i == j ? 1 : 2) * v * v;
        } else {
            s += v * v;
        }
    }
    acc[threadIdx.x] = s;
    __syncthreads();
    for (int o = SUMSQ_THREADS / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) acc[threadIdx.x] += acc[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = acc[0];
}
// *total = the sum of partial[0:blocks) in a fixed order (one thread).
__global__ void prac_sumsq_final_kernel(const double* partial, int blocks, double* total) {
    double s = 0;
    for (int i = 0; i < blocks; i++) s += partial[i];
    *total = s;
}


// Largest cuSOLVER device buffer of the refresh (bytes), and the host buffers (bytes) of syevd and geqrf. The
// pointers may be null (size queries only) or the real ones.
struct SolverBytes {
    size_t device = 0, host = 0;
};
static SolverBytes query_syevd(cusolverDnHandle_t s, cusolverDnParams_t p, int n, const float* G, const float* w) {
    SolverBytes b;
    cusolverCheck(cusolverDnXsyevd_bufferSize(s, p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, (int64_t)n,
                                              CUDA_R_32F, G, (int64_t)n, CUDA_R_32F, w, CUDA_R_32F, &b.device,
                                              &b.host));
    return b;
}
static SolverBytes query_potrf(cusolverDnHandle_t s, int c, float* A) {
    SolverBytes b;
    int lwork = 0;
    cusolverCheck(cusolverDnSpotrf_bufferSize(s, CUBLAS_FILL_MODE_UPPER, c, A, c, &lwork));
    b.device = (size_t)lwork * sizeof(float);
    return b;
}
static SolverBytes query_qr(cusolverDnHandle_t s, cusolverDnParams_t p, int n, int c, const float* A,
                            const float* tau) {
    SolverBytes b;
    if (c == 0) return b;
    cusolverCheck(cusolverDnXgeqrf_bufferSize(s, p, (int64_t)n, (int64_t)c, CUDA_R_32F, A, (int64_t)n, CUDA_R_32F,
                                              tau, CUDA_R_32F, &b.device, &b.host));
    int lwork = 0;
    cusolverCheck(cusolverDnSorgqr_bufferSize(s, n, c, c, A, n, tau, &lwork));
    size_t orgqr = (size_t)lwork * sizeof(float);
    if (orgqr > b.device) b.device = orgqr;
    return b;
}

size_t prac_refresh_workspace_bytes(cusolverDnHandle_t cusolver, int n, const SiteDims& d, const void* stand_in) {
    CusolverParams params;
    // The queries never touch the matrices; a real device pointer stands in for them in case cuSOLVER checks that
    // they are not null.
    float* dummy = (float*)stand_in;
    if (!stand_in) cudaCheck(cudaMalloc(&dummy, 256));
    int r1 = d.r1, r2 = d.r2, b = d.block(n);
    size_t dev = 0;
    if (r1 > 0) dev = std::max(dev, query_syevd(cusolver, params.p, b ? b : n, dummy, dummy).device);
    if (b > 0) {
        dev = std::max(dev, query_potrf(cusolver, b, dummy).device);
        dev = std::max(dev, query_qr(cusolver, params.p, n, b, dummy, dummy).device);  // Householder fallback
    }
    dev = std::max(dev, query_qr(cusolver, params.p, n, r1, dummy, dummy).device);  // the fallback Q1
    dev = std::max(dev, query_qr(cusolver, params.p, n, r2, dummy, dummy).device);  // Q2's Householder fallback
    if (r2 > 0) dev = std::max(dev, query_potrf(cusolver, r2, dummy).device);       // Q2's CholQR2
    if (!stand_in) cudaCheck(cudaFree(dummy));
    return refresh_layout(n, d).solver + align256(dev);
}

double PracRefreshProfile::parts_ms() const {
    double sum = 0;
    for (const auto& p : parts) sum += p.ms;
    return sum;
}
PracRefreshProfile::~PracRefreshProfile() {
    for (cudaEvent_t e : pool) cudaEventDestroy(e);  // no check: a destructor has nobody to tell
}

namespace {

// Everything one refresh call works with.
struct Refresh {
    const PracCudaHandles& h;
    cusolverDnParams_t params;
    int n;
    float *G, *w, *W, *t, *tau;
    RefreshChecks* checks;  // device: the check words, read back together (read_checks)
    float *V, *Y, *B, *S1, *S2;  // the subspace refresh's (n, b), (n, b), (b, b) x 3
    double* sums;
    void* solver;
    size_t solver_bytes;
    std::vector<char> host_buf;
    PracRefreshProfile* prof = nullptr;  // h.profile
    PracRefreshResult* res = nullptr;     // counts the orthonormalization fallbacks
    int shifted_passes = 0;               // PracSubspaceParams::shifted_passes

    // fn's GPU work, added to `part` when profiling (PracRefreshProfile): between two events on the stream
    template <class F>
    void timed(const char* part, F&& fn) {
        if (!prof) return fn();
        const size_t i = 2 * prof->marks.size();
        while (prof->pool.size() < i + 2) {
            cudaEvent_t e;
            cudaCheck(cudaEventCreate(&e));
            prof->pool.push_back(e);
        }
        cudaCheck(cudaEventRecord(prof->pool[i], h.stream));
        fn();  // never another timed(): its events would take this one's place in the pool
        cudaCheck(cudaEventRecord(prof->pool[i + 1], h.stream));
        prof->marks.push_back({part, {prof->pool[i], prof->pool[i + 1]}});
    }
    void count_host_read() {
        if (prof) prof->host_reads++;
    }

    // The one way the host learns what the device found: every check word at once, after all the work queued so
    // far (one copy, one wait). The checks are queued beside the work and judged in batches, each batch where the
    // twin's next decision needs them, so that a refresh waits on the device a dozen times instead of thirty.
    RefreshChecks read_checks() {
        RefreshChecks v;
        cudaCheck(cudaMemcpyAsync(&v, checks, sizeof v, cudaMemcpyDeviceToHost, h.stream));
        cudaCheck(cudaStreamSynchronize(h.stream));
        count_host_read();
        return v;
    }
    // *flag = 1 if any of x[0:count) is NaN or +-Inf, else 0 (queued)
    void queue_nonfinite(const float* x, size_t count, int* flag) {
        timed("checks", [&] {
            cudaCheck(cudaMemsetAsync(flag, 0, sizeof(int), h.stream));
            if (count > 0) {
                prac_nonfinite_kernel<<<cuda_grid_1d(count, 256, 4096), 256, 0, h.stream>>>(x, count, flag);
                cudaCheck(cudaGetLastError());
            }
        });
    }
    // twin: all_finite (prac_cpu.cpp)
    bool all_finite(const float* x, size_t count) {
        if (count == 0) return true;
        queue_nonfinite(x, count, &checks->nonfinite[0]);
        return read_checks().nonfinite[0] == 0;
    }
    void check_solver_bytes(const SolverBytes& b, const char* what) {
        if (b.device > solver_bytes)
            throw std::runtime_error(format("prac_refresh_cuda: %s needs %zu bytes of device workspace, only %zu left "
                                            "(size the workspace with prac_refresh_workspace_bytes)",
                                            what, b.device, solver_bytes));
        if (b.host > host_buf.size()) host_buf.resize(b.host);
    }
    void* host_ptr() { return host_buf.empty() ? nullptr : host_buf.data(); }

    // A (m, m) column-major: eigenvectors of the symmetric A in place, eigenvalues ascending into w; info into
    // checks->info[0] (queued). The buffers passed are the whole solver region and host buffer (at least what the
    // query asked for). twin: syevd_cm (prac_cpu.cpp)
    void queue_syevd(float* A, int m) {
        check_solver_bytes(query_syevd(h.cusolver, params, m, A, w), "cusolverDnXsyevd");
        timed("syevd", [&] {
            cusolverCheck(cusolverDnXsyevd(h.cusolver, params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                           (int64_t)m, CUDA_R_32F, A, (int64_t)m, CUDA_R_32F, w, CUDA_R_32F, solver,
                                           solver_bytes, host_ptr(), host_buf.size(), &checks->info[0]));
        });
    }

    // twin: orth_cm (prac_cpu.cpp). Y (n, c) column-major, ld n, in place: Householder QR (Xgeqrf), then the
    // explicit Q (Sorgqr). Returns cuSOLVER's info (Xgeqrf's, else Sorgqr's), or -1000 (non-finite). One host
    // read: Sorgqr runs even after a failed Xgeqrf, whose info is returned first, Y being garbage either way.
    int orthonormalize(float* Y, int c) {
        if (c == 0) return 0;
        check_solver_bytes(query_qr(h.cusolver, params, n, c, Y, tau), "cusolverDnXgeqrf/Sorgqr");
        size_t lw = solver_bytes / sizeof(float);
        int lwork = lw > (size_t)INT_MAX ? INT_MAX : (int)lw;
        timed("geqrf_orgqr", [&] {
            cusolverCheck(cusolverDnXgeqrf(h.cusolver, params, (int64_t)n, (int64_t)c, CUDA_R_32F, Y, (int64_t)n,
                                           CUDA_R_32F, tau, CUDA_R_32F, solver, solver_bytes, host_ptr(),
                                           host_buf.size(), &checks->info[1]));
            cusolverCheck(cusolverDnSorgqr(h.cusolver, n, c, c, Y, n, tau, (float*)solver, lwork, &checks->info[2]));
        });
        queue_nonfinite(Y, (size_t)n * c, &checks->nonfinite[0]);
        RefreshChecks v = read_checks();
        if (v.info[1] != 0) return v.info[1];
        if (v.info[2] != 0) return v.info[2];
        return v.nonfinite[0] ? -1000 : 0;
    }

    // twin: project_out (prac_cpu.cpp). Y (n, c) -= Q (n, q) @ (Q^T Y), all column-major with ld n, `passes` times
    // (after two, Y is orthogonal to Q to fp32 precision whatever Y was):
    //   t (q, c) = Q^T Y:     Sgemm(T, N, m=q, n=c, k=n, A=Q ld n, B=Y ld n, C=t ld q)
    //   Y -= Q t:             Sgemm(N, N, m=n, n=c, k=q, alpha=-1, A=Q ld n, B=t ld q, beta=1, C=Y ld n)
    void project_out(float* Y, int c, const float* Q, int q, float* tq, int passes = 2) {  // tq: q x c floats
        if (q == 0 || c == 0) return;
        const float one = 1.0f, zero = 0.0f, minus_one = -1.0f;
        timed("sgemm", [&] {
            for (int pass = 0; pass < passes; pass++) {
                cublasCheck(cublasSgemm(h.cublas, CUBLAS_OP_T, CUBLAS_OP_N, q, c, n, &one, Q, n, Y, n, &zero, tq, q));
                cublasCheck(
                    cublasSgemm(h.cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, c, q, &minus_one, Q, n, tq, q, &one, Y, n));
            }
        });
    }

    // ---- the subspace refresh (twins of prac_cpu.cpp's functions of the same names) ----

    // C (m, c) = op(A) op(B), column-major fp32 (cublasSgemm), alpha 1 / beta 0
    void gemm_cm(bool ta, bool tb, int m, int c, int k, const float* A, int lda, const float* Bm, int ldb, float* C,
                 int ldc) {
        const float one = 1.0f, zero = 0.0f;
        timed("sgemm", [&] {
            cublasCheck(cublasSgemm(h.cublas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, c,
                                    k, &one, A, lda, Bm, ldb, &zero, C, ldc));
        });
    }
    void upper(float* S, int c) {
        timed("small_kernels", [&] {
            prac_upper_kernel<<<cuda_grid_1d((size_t)c * c, 256, 65536), 256, 0, h.stream>>>(S, c);
            cudaCheck(cudaGetLastError());
        });
    }
    void copy(float* dst, const float* src, size_t count) {
        timed("copies", [&] {
            cudaCheck(cudaMemcpyAsync(dst, src, count * sizeof(float), cudaMemcpyDeviceToDevice, h.stream));
        });
    }
    // checks->sumsq = the sum of squares of x[0:count) (sym_c = 0), or ||S - I||_F^2 of the symmetric (c, c) S,
    // upper triangle valid (queued)
    void queue_sum_squares(const float* x, size_t count, int sym_c) {
        timed("checks", [&] {
            // a block per SUMSQ_THREADS elements, at most REFRESH_SUMSQ_BLOCKS: the checks sum (c, c) and (n, c)
            // matrices, most far below the full grid's 65536 threads, whose idle ones each passed the tree's barriers
            // (on the CPU execution layer a fiber switch each: a third of an emulated PRAC run's time)
            const int blocks = (int)cuda_grid_1d(count, SUMSQ_THREADS, REFRESH_SUMSQ_BLOCKS);
            prac_sumsq_partial_kernel<<<blocks, SUMSQ_THREADS, 0, h.stream>>>(x, count, sym_c, sums);
            cudaCheck(cudaGetLastError());
            prac_sumsq_final_kernel<<<1, 1, 0, h.stream>>>(sums, blocks, &checks->sumsq);
            cudaCheck(cudaGetLastError());
        });
    }
    // Cholesky factorization A = UᵀU of the symmetric A (c, c) (upper triangle), in place; its info into *info
    // (queued)
    void queue_potrf(float* A, int c, int* info) {
        SolverBytes need = query_potrf(h.cusolver, c, A);
        check_solver_bytes(need, "cusolverDnSpotrf");
        timed("potrf", [&] {
            cusolverCheck(cusolverDnSpotrf(h.cusolver, CUBLAS_FILL_MODE_UPPER, c, A, c, (float*)solver,
                                           (int)(need.device / sizeof(float)), info));
        });
    }
    // Q (rows, c) = Q U⁻¹ with U (c, c) upper (cublasStrsm, right side), ld rows / c
    void trsm_right_upper(float* Q, int rows, int c, const float* U) {
        const float one = 1.0f;
        timed("trsm", [&] {
            cublasCheck(cublasStrsm(h.cublas, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                    CUBLAS_DIAG_NON_UNIT, rows, c, &one, U, c, Q, rows));
        });
    }
    // S (c, c) = QᵀQ, upper triangle (cublasSsyrk)
    void gram_of_columns(const float* Q, int c, float* S) {
        const float one = 1.0f, zero = 0.0f;
        timed("syrk", [&] {
            cublasCheck(cublasSsyrk(h.cublas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, c, n, &one, Q, n, &zero, S, c));
        });
    }
    // twin: cholqr2 (prac_cpu.cpp), queued whole: Q (n, c) in place; R1 into Sa, R2 into Sb (Sa may be Sb when
    // R is not wanted). Judged by cholqr2_ok once read. Where the twin stops at a failed check, this goes on, so a
    // failure leaves Q garbage: for callers that start again from their input when it fails.
    void queue_cholqr2(float* Q, int c, float* Sa, float* Sb) {
        gram_of_columns(Q, c, Sa);
        queue_potrf(Sa, c, &checks->info[1]);
        trsm_right_upper(Q, n, c, Sa);
        gram_of_columns(Q, c, Sb);  // the second pass's Gram measures the first pass's loss of orthogonality
        queue_sum_squares(Sb, (size_t)c * c, c);
        queue_potrf(Sb, c, &checks->info[2]);
        trsm_right_upper(Q, n, c, Sb);
        queue_nonfinite(Q, (size_t)n * c, &checks->nonfinite[1]);
    }
    // the twin's verdict: false when a Cholesky fails, the first pass leaves ||QᵀQ - I||_F > 1/2, or Q is not
    // finite
    static bool cholqr2_ok(const RefreshChecks& v) {
        return v.info[1] == 0 && v.sumsq <= 0.25 && v.info[2] == 0 && v.nonfinite[1] == 0;
    }
    bool cholqr2(float* Q, int c, float* Sa, float* Sb) {
        queue_cholqr2(Q, c, Sa, Sb);
        return cholqr2_ok(read_checks());
    }
    // twin: shifted_cholqr (prac_cpu.cpp). Up to shifted_passes Cholesky-QR passes on QᵀQ + s I, each followed
    // by a CholQR2 attempt. A failed shifted Cholesky ends it (the caller then runs Householder QR on its input,
    // so Q may be garbage); a failed CholQR2 leaves the Q the next pass starts from, which must be the twin's: it
    // is read where the twin stops (three reads a pass), except after the last pass, which nothing starts from.
    bool shifted_cholqr(float* Q, int c, float* Sa, float* Sb) {
        for (int pass = 0; pass < shifted_passes; pass++) {
            res->q1_shifted_passes++;
            gram_of_columns(Q, c, Sa);
            timed("small_kernels", [&] {
                prac_shift_diag_kernel<<<1, SHIFT_THREADS, 0, h.stream>>>(Sa, c, prac_shifted_cholqr_rel(n, c));
                cudaCheck(cudaGetLastError());
            });
            queue_potrf(Sa, c, &checks->info[0]);
            trsm_right_upper(Q, n, c, Sa);
            if (pass + 1 == shifted_passes) {
                queue_cholqr2(Q, c, Sa, Sb);
                RefreshChecks v = read_checks();
                return v.info[0] == 0 && cholqr2_ok(v);
            }
            gram_of_columns(Q, c, Sa);  // CholQR2's first pass
            queue_potrf(Sa, c, &checks->info[1]);
            RefreshChecks v = read_checks();
            if (v.info[0] != 0) return false;
            if (v.info[1] != 0) continue;
            trsm_right_upper(Q, n, c, Sa);
            gram_of_columns(Q, c, Sb);
            queue_sum_squares(Sb, (size_t)c * c, c);
            queue_potrf(Sb, c, &checks->info[2]);  // run even when the twin stops at the sum: Sb is not kept
            v = read_checks();
            if (!(v.sumsq <= 0.25) || v.info[2] != 0) continue;  // a NaN sum fails too
            trsm_right_upper(Q, n, c, Sb);
            if (all_finite(Q, (size_t)n * c)) return true;
        }
        return false;
    }
    // twin: orth_into (prac_cpu.cpp). Q (n, c) = orth(Y (n, c)) by CholQR2, shifted Cholesky-QR when that fails,
    // Householder when both do (counted in res); Rout (c, c; S1 or a buffer apart from Q, Y and S2), when given,
    // receives R with Y = Q R.
    int orth_into(float* Q, const float* Ysrc, int c, float* Rout = nullptr) {
        copy(Q, Ysrc, (size_t)n * c);
        if (!cholqr2(Q, c, S1, S2)) {  // on the untouched input; R = QᵀY (upper triangular up to rounding)
            copy(Q, Ysrc, (size_t)n * c);
            int inf = 0;
            if (shifted_cholqr(Q, c, S1, S2)) {
                res->q1_shifted_qr++;
            } else {
                res->q1_householder_qr++;
                copy(Q, Ysrc, (size_t)n * c);
                inf = orthonormalize(Q, c);
            }
            if (inf == 0 && Rout) gemm_cm(true, false, c, c, n, Q, n, Ysrc, n, Rout, c);
            return inf;
        }
        if (Rout) {  // Y = Q R2 R1: R = R2 R1 (cublasStrmm, in place on R1 when Rout is S1)
            upper(S1, c);  // potrf leaves the strict lower part as it was; trmm reads B in full
            const float one = 1.0f;
            timed("trmm", [&] {
                cublasCheck(cublasStrmm(h.cublas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N,
                                        CUBLAS_DIAG_NON_UNIT, c, c, &one, S2, c, S1, c, Rout, c));
            });
        }
        return 0;
    }
    // W (n, r1) = V (n, b) times the eigenvectors of the symmetric M (b, b) of its r1 largest eigenvalues,
    // largest first (through Z, b x r1 floats). M is checked before the eigensolver sees it; W is written whatever
    // syevd's info (one read for both), so a failure leaves it garbage (the caller then restores the previous P).
    int top_ritz_vectors(float* M, int b, int r1, float* Z) {
        if (!all_finite(M, (size_t)b * b)) return -1000;
        queue_syevd(M, b);
        timed("small_kernels", [&] {
            prac_top_eigvecs_kernel<<<cuda_grid_1d((size_t)b * r1, 256, 65536), 256, 0, h.stream>>>(Z, M, b, r1);
            cudaCheck(cudaGetLastError());
        });
        gemm_cm(false, false, n, r1, b, V, n, Z, b, W, n);
        queue_nonfinite(W, (size_t)n * r1, &checks->nonfinite[0]);
        RefreshChecks v = read_checks();
        if (v.info[0] != 0) return v.info[0];
        return v.nonfinite[0] ? -1000 : 0;
    }
    // twin: subspace_q1 (prac_cpu.cpp): the same draws, steps and fallbacks; G is the full symmetric (n, n) here,
    // so its products are GEMMs.
    int subspace_q1(int r1, int b, bool warm, int iters, bool nystrom, const PracDrawKey& key) {
        PracDrawKey ks = key;
        ks.purpose = PRAC_DRAW_Q1_SUBSPACE;
        int c0 = warm ? r1 : 0;
        timed("gaussian", [&] { gaussian_strided(Y + (size_t)c0 * n, n, b - c0, 1, (size_t)n, ks, h.stream); });
        if (warm) {
            copy(V, W, (size_t)n * r1);
            project_out(Y + (size_t)r1 * n, b - r1, W, r1, S2);
        }
        int inf = orth_into(V + (size_t)c0 * n, Y + (size_t)c0 * n, b - c0);
        for (int it = 0; it < iters && inf == 0; it++) {
            gemm_cm(false, false, n, b, n, G, n, V, n, Y, n);  // Y = G V
            inf = orth_into(V, Y, b);
        }
        if (inf != 0) return inf;
        gemm_cm(false, false, n, b, n, G, n, V, n, Y, n);  // Y = G V
        // Y scaled by the power of two that brings ||Y||_F into [1/2, 1) (exact): the same bits for G and G 2^k
        queue_sum_squares(Y, (size_t)n * b, 0);
        double ynorm2 = read_checks().sumsq;
        if (!std::isfinite(ynorm2)) return -1000;
        int e2 = 0;
        std::frexp(std::sqrt(ynorm2), &e2);
        float s = std::ldexp(1.0f, -e2);
        timed("small_kernels", [&] {
            prac_scale_kernel<<<cuda_grid_1d((size_t)n * b, 256, 65536), 256, 0, h.stream>>>(Y, (size_t)n * b, s);
            cudaCheck(cudaGetLastError());
        });
        ynorm2 *= (double)s * s;
        gemm_cm(true, false, b, b, n, V, n, Y, n, B, b);   // VᵀG V (b, b)
        queue_nonfinite(B, (size_t)b * b, &checks->nonfinite[0]);
        float nu = (float)(std::sqrt((double)n * ynorm2) * 5.96e-8);
        timed("small_kernels", [&] {
            prac_add_diag_kernel<<<cuda_grid_1d((size_t)b, 256, 65536), 256, 0, h.stream>>>(B, b, nu);
            cudaCheck(cudaGetLastError());
        });
        if (nystrom) queue_potrf(B, b, &checks->info[0]);  // judged with B's finiteness (on a failure B is not kept)
        RefreshChecks v = read_checks();
        if (v.nonfinite[0]) return -1000;
        if (!nystrom || v.info[0] != 0) {  // Rayleigh-Ritz on V instead
            gemm_cm(true, false, b, b, n, V, n, Y, n, B, b);
            return top_ritz_vectors(B, b, r1, Y);
        }
        timed("small_kernels", [&] {
            prac_axpy_kernel<<<cuda_grid_1d((size_t)n * b, 256, 65536), 256, 0, h.stream>>>(Y, V, (size_t)n * b, nu);
            cudaCheck(cudaGetLastError());
        });
        // V = Q and R (b, b) into S1; then T = R C⁻¹ there and T Tᵀ (upper: the triangle this file's syevd
        // reads) into B
        float* Rm = S1;
        inf = orth_into(V, Y, b, Rm);
        if (inf != 0) return inf;
        trsm_right_upper(Rm, b, b, B);
        const float one = 1.0f, zero = 0.0f;
        timed("syrk", [&] {
            cublasCheck(cublasSsyrk(h.cublas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, b, b, &one, Rm, b, &zero, B, b));
        });
        return top_ritz_vectors(B, b, r1, Y);
    }

    // Gaussian draw into columns [c0, c0 + cols) of the column-major working copy: element (i, j) of the draw
    // (normal number i * cols + j, as prac_gaussian_cpu writes it row-major) goes to W[(c0 + j) * n + i].
    void gaussian(int c0, int cols, const PracDrawKey& key) {
        timed("gaussian", [&] { gaussian_strided(W + (size_t)c0 * n, n, cols, 1, (size_t)n, key, h.stream); });
    }
    // twin: draw_q2 (prac_cpu.cpp). W[:, r1:r1+r2] = orth((I - Q1 Q1ᵀ) Z), Z the key's Gaussian, Q1 = W[:, 0:r1]:
    // CholQR2 in place, and when that fails the same projected Gaussian again through Householder QR (*householder).
    int draw_q2(int r1, int r2, const PracDrawKey& key, bool* householder) {
        float* Q2 = W + (size_t)r1 * n;
        auto projected_gaussian = [&] {
            gaussian(r1, r2, key);
            project_out(Q2, r2, W, r1, t, prac_q2_projection_passes(n, r1, r2));
        };
        projected_gaussian();
        if (cholqr2(Q2, r2, S1, S1)) return 0;
        *householder = true;
        projected_gaussian();
        return orthonormalize(Q2, r2);
    }
};

// G (n, n) = x^T x in fp32 (x in T, fp32 accumulation and output). Row-major gemm(T, N, M=n, N=n, K=N)
// -> cuBLAS (N, T, m=n, n=n, k=N): x as column-major (n, N) ld ld_x times its transpose; C = G ld n
// (symmetric, so row- and column-major G are the same matrix). twin: cblas_ssyrk(upper, trans)
template <typename T>
void gram_into(float* G, const T* x, int N, int n, const PracCudaHandles& h, const GramReducer* reduce_gram, int ld_x) {
    const int ldx = ld_x ? ld_x : n;
    prac_gemm_rm(h.cublas, true, false, n, n, N, 1.0f, x, cuda_dtype<T>(), ldx, x, cuda_dtype<T>(), ldx, 0.0f, G,
                 CUDA_R_32F, n);
    // shared subspace across data-parallel ranks: the reducer averages the DEVICE Gram matrix (NCCL, ordered
    // on h.stream by the communicator's events), so every rank solves the same eigenproblem
    if (reduce_gram) (*reduce_gram)(G, (size_t)n * n);
}

}  // namespace

template <typename T>
void prac_refresh_gram_cuda(const T* x, int N, int n, const SiteDims& d, const PracCudaHandles& h, void* workspace,
                            const GramReducer* reduce_gram, int ld_x) {
    if (d.r1 <= 0)
        throw std::runtime_error(format("prac_refresh_gram_cuda: a site without Q1 (r1 = %d, n = %d) has no Gram matrix "
                                        "in its refresh workspace", d.r1, n));
    cublasCheck(cublasSetStream(h.cublas, h.stream));
    CublasHostPointers pm(h.cublas);
    gram_into((float*)((char*)workspace + refresh_layout(n, d).G), x, N, n, h, reduce_gram, ld_x);
}

template <typename T>
PracRefreshResult prac_refresh_cuda(T* P, const T* x, int N, int n, const SiteDims& d, bool refresh_q1,
                                    bool refresh_q2, bool had_basis, const PracDrawKey& key,
                                    const PracCudaHandles& h, void* workspace, size_t workspace_bytes,
                                    const GramReducer* reduce_gram, int ld_x) {
    PracRefreshResult res;
    const int r1 = d.r1, r2 = d.r2, r = d.r();
    if (r == 0) return res;
    const auto wall0 = std::chrono::steady_clock::now();
    if (h.profile) h.profile->marks.clear();  // a call that threw left its marks
    cublasCheck(cublasSetStream(h.cublas, h.stream));
    cusolverCheck(cusolverDnSetStream(h.cusolver, h.stream));
    CublasHostPointers pm(h.cublas);
    CusolverParams params;

    const int b = d.block(n);
    RefreshLayout L = refresh_layout(n, d);
    if (workspace_bytes < L.solver)
        throw std::runtime_error(format("prac_refresh_cuda: workspace of %zu bytes is below the %zu bytes of its "
                                        "fixed part (n = %d, r1 = %d, r2 = %d)",
                                        workspace_bytes, L.solver, n, r1, r2));
    char* ws = (char*)workspace;
    Refresh R{h,
              params.p,
              n,
              (float*)(ws + L.G),
              (float*)(ws + L.w),
              (float*)(ws + L.W),
              (float*)(ws + L.t),
              (float*)(ws + L.tau),
              (RefreshChecks*)(ws + L.checks),
              (float*)(ws + L.V),
              (float*)(ws + L.Y),
              (float*)(ws + L.B),
              (float*)(ws + L.S1),
              (float*)(ws + L.S2),
              (double*)(ws + L.sums),
              ws + L.solver,
              workspace_bytes - L.solver,
              {},
              h.profile,
              &res,
              d.subspace.shifted_passes};
    // the working copy's columns [0, r) = P's (cpu: fresh = P); also to undo a failed Q1 refresh
    auto load_basis = [&] {
        R.timed("small_kernels", [&] {
            prac_load_basis_kernel<T><<<cuda_grid_1d((size_t)n * r, 256, 65536), 256, 0, h.stream>>>(R.W, P, n, r);
            cudaCheck(cudaGetLastError());
        });
    };

    // the working copy starts as the previous P; only the parts that change go back to P
    load_basis();
    bool q1_changed = false, q2_new = false, restored_all = false;

    auto random_q1 = [&] {  // an orthonormal Q1 independent of x: the key's own stream, orthonormalized (cpu: the same)
        PracDrawKey k1 = key;
        k1.purpose = PRAC_DRAW_Q1_FALLBACK;
        R.gaussian(0, r1, k1);
        R.orthonormalize(R.W, r1);  // result ignored, as on the CPU
        q1_changed = true;
    };

    if (r1 > 0 && (refresh_q1 || !had_basis) && d.random_q1) {
        random_q1();  // a provisional basis (PracOptions::initial_spread): no Gram matrix, no solver
    } else if (r1 > 0 && (refresh_q1 || !had_basis)) {
        if (x) R.timed("gram", [&] { gram_into(R.G, x, N, n, h, reduce_gram, ld_x); });  // else _gram_cuda wrote it
        int info = -1000;
        if (!R.all_finite(R.G, (size_t)n * n)) {
            // info stays -1000
        } else if (b > 0) {
            int iters = had_basis ? d.subspace.warm_iters : d.subspace.cold_iters;
            info = R.subspace_q1(r1, b, had_basis, iters, d.subspace.nystrom, key);
        } else {  // exact: the full eigensolver on G; its top r1 eigenvectors, largest first, into W
            R.queue_syevd(R.G, n);
            R.queue_nonfinite(R.G, (size_t)n * n, &R.checks->nonfinite[0]);
            RefreshChecks v = R.read_checks();
            info = v.info[0] != 0 ? v.info[0] : v.nonfinite[0] ? -1000 : 0;
            if (info == 0) {
                R.timed("small_kernels", [&] {
                    prac_top_eigvecs_kernel<<<cuda_grid_1d((size_t)n * r1, 256, 65536), 256, 0, h.stream>>>(
                        R.W, R.G, n, r1);
                    cudaCheck(cudaGetLastError());
                });
            }
        }
        if (info == 0) {
            q1_changed = true;
        } else {
            // a failed subspace refresh may have overwritten the working copy's Q1 columns: back to the previous P
            load_basis();
            res.q1_ok = false;
            res.message = format("Q1 refresh failed (%s info %d%s)", b > 0 ? "subspace" : "syevd", info,
                                 info == -1000 ? ", non-finite values" : "");
            if (!had_basis) {
                random_q1();  // no previous Q1: a random orthonormal Q1 keeps the estimator unbiased
                res.message += "; no previous basis, using a random Q1";
            } else {
                res.message += "; keeping the previous basis";
            }
        }
    }
    if (r2 > 0 && (refresh_q2 || q1_changed || !had_basis)) {
        float* Q2 = R.W + (size_t)r1 * n;
        res.q2_drawn = true;
        int info = R.draw_q2(r1, r2, key, &res.q2_householder);
        if (info == 0) {
            float s = std::sqrt(d.k);
            R.timed("small_kernels", [&] {
                prac_scale_kernel<<<cuda_grid_1d((size_t)n * r2, 256, 65536), 256, 0, h.stream>>>(Q2, (size_t)n * r2,
                                                                                                    s);
                cudaCheck(cudaGetLastError());
            });
            q2_new = true;
        } else {
            res.q2_ok = false;
            std::string m = format("Q2 refresh failed (QR info %d)", info);
            if (q1_changed && had_basis) {
                // the old Q2 is not orthogonal to the new Q1: keep the whole previous basis
                restored_all = true;
                m += "; keeping the previous Q1 and Q2";
            } else {
                m += "; keeping the previous Q2";
            }
            res.message += (res.message.empty() ? "" : "; ") + m;
        }
    }
    // write back what changed (the rest of P keeps its bits, as the CPU's copy-back of the previous P does)
    auto store = [&](int c0, int c1) {
        size_t total = (size_t)n * (c1 - c0);
        R.timed("small_kernels", [&] {
            prac_store_basis_kernel<T><<<cuda_grid_1d(total, 256, 65536), 256, 0, h.stream>>>(P, R.W, n, r, c0, c1);
            cudaCheck(cudaGetLastError());
        });
    };
    bool write_q1 = q1_changed && !restored_all;
    if (write_q1 && q2_new)
        store(0, r);
    else if (write_q1)
        store(0, r1);
    else if (q2_new)
        store(r1, r);
    cudaCheck(cudaStreamSynchronize(h.stream));  // the workspace is free for the caller's next use when we return
    if (PracRefreshProfile* p = h.profile) {
        for (const auto& mark : p->marks) {
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, mark.second.first, mark.second.second));
            auto it = std::find_if(p->parts.begin(), p->parts.end(),
                                   [&](const PracRefreshProfile::Part& e) { return e.name == mark.first; });
            if (it == p->parts.end()) it = p->parts.insert(p->parts.end(), {mark.first, 0.0, 0});
            it->ms += ms;
            it->calls++;
        }
        p->marks.clear();
        p->wall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
        p->calls++;
    }
    res.q1_changed = q1_changed && res.q2_ok;  // a failed Q2 after a new Q1 restored the whole previous basis
    return res;
}

// ---------------------------------------------------------------------------------------------------------------
// instantiations: fp32 build (float, float), bf16 build (bf16, bf16), and bf16 activations with fp32 gradients
// ---------------------------------------------------------------------------------------------------------------
template void prac_compress_cuda<float>(float*, const float*, const float*, int, int, int, const PracCudaHandles&, int);
template void prac_compress_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int, int,
                                                int, const PracCudaHandles&, int);
template void prac_reconstruct_cuda<float>(float*, const float*, const float*, int, int, int,
                                           const PracCudaHandles&, int);
template void prac_reconstruct_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*, int,
                                                   int, int, const PracCudaHandles&, int);
template void prac_weight_grad_cuda<float, float>(float*, float*, const float*, const float*, const float*, int, int,
                                                  int, int, float*, const PracCudaHandles&, int);
template void prac_weight_grad_cuda<__nv_bfloat16, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*,
                                                                  const __nv_bfloat16*, const __nv_bfloat16*,
                                                                  const __nv_bfloat16*, int, int, int, int, float*,
                                                                  const PracCudaHandles&, int);
template void prac_weight_grad_cuda<__nv_bfloat16, float>(float*, float*, const __nv_bfloat16*, const __nv_bfloat16*,
                                                          const __nv_bfloat16*, int, int, int, int, float*,
                                                          const PracCudaHandles&, int);
template PracRefreshResult prac_refresh_cuda<float>(float*, const float*, int, int, const SiteDims&, bool, bool, bool,
                                                    const PracDrawKey&, const PracCudaHandles&, void*, size_t,
                                                    const GramReducer*, int);
template PracRefreshResult prac_refresh_cuda<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int, int,
                                                            const SiteDims&, bool, bool, bool, const PracDrawKey&,
                                                            const PracCudaHandles&, void*, size_t,
                                                            const GramReducer*, int);
template void prac_refresh_gram_cuda<float>(const float*, int, int, const SiteDims&, const PracCudaHandles&, void*,
                                            const GramReducer*, int);
template void prac_refresh_gram_cuda<__nv_bfloat16>(const __nv_bfloat16*, int, int, const SiteDims&,
                                                    const PracCudaHandles&, void*, const GramReducer*, int);
template void prac_fp8_quantize_cuda<float>(uint8_t*, float*, const float*, int, int, uint64_t, const PracDrawKey&,
                                            cudaStream_t);
template void prac_fp8_quantize_cuda<__nv_bfloat16>(uint8_t*, float*, const __nv_bfloat16*, int, int, uint64_t,
                                                    const PracDrawKey&, cudaStream_t);
template void prac_fp8_dequantize_cuda<float>(float*, const uint8_t*, const float*, int, int, cudaStream_t);
template void prac_fp8_dequantize_cuda<__nv_bfloat16>(__nv_bfloat16*, const uint8_t*, const float*, int, int,
                                                      cudaStream_t);
