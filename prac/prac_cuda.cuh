// PRAC site ops, CUDA twins of prac/prac.h's *_cpu functions (same argument order, same semantics, row-major):
//   prac_compress_cuda      <-> prac_compress_cpu       xc (N, r) = x (N, n) @ P (n, r)
//   prac_reconstruct_cuda   <-> prac_reconstruct_cpu    x (N, n) = xc (N, r) @ P (n, r)^T
//   prac_weight_grad_cuda   <-> prac_weight_grad_cpu    dW (OC, n) += (dY^T xc) P^T;  dbias += colsum(dY)
//   prac_gaussian_cuda      <-> prac_gaussian_cpu       the same Philox draw, element for element
//   prac_refresh_cuda       <-> prac_refresh_cpu        Q1 from the Gram matrix's eigenvectors, Q2 from S
//   prac_fp8_quantize_cuda  <-> prac_fp8_quantize_cpu   e4m3 codes + row scales of xc, stochastic rounding
//   prac_fp8_dequantize_cuda <-> prac_fp8_dequantize_cpu xc = decode(codes) · row scale
// Activations T: __nv_bfloat16 (bf16 build) or float (fp32 build); GEMMs accumulate in fp32, the refresh solves in
// fp32. Everything runs on h.stream. The cuBLAS handle must be in CUBLAS_POINTER_MODE_HOST (the default) and, for the
// fp32 build to match the CPU at 1e-4, in CUBLAS_DEFAULT_MATH (no TF32). More: docs/DESIGN.md section 4.4.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "prac/prac.h"  // SiteDims, PracDrawKey, PracRefreshResult, GramReducer

// Where prac_refresh_cuda's time goes (tools/bench_gpu_refresh). With PracCudaHandles::profile set, the refresh
// brackets each of its library calls and kernels with timing events on its stream and adds their GPU time to the
// part they belong to (sgemm, syrk, potrf, trsm, syevd, ...). A call's wall time less the parts' sum is time the
// GPU waited for the host: launches, and the host_reads of solver info words and finiteness flags between calls.
// Summed over the calls made with it; events are made on first use and destroyed with the profile.
struct PracRefreshProfile {
    struct Part {
        std::string name;
        double ms = 0;  // GPU milliseconds
        int calls = 0;  // library calls or kernel groups timed
    };
    std::vector<Part> parts;  // in first-use order
    double wall_ms = 0;
    int calls = 0, host_reads = 0;
    double parts_ms() const;  // the sum of the parts' ms
    ~PracRefreshProfile();
    // prac_refresh_cuda's: the call in flight's (part, start, end) events, timed when it ends, and the event pool
    std::vector<std::pair<const char*, std::pair<cudaEvent_t, cudaEvent_t>>> marks;
    std::vector<cudaEvent_t> pool;
};

struct PracCudaHandles {
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;        // GEMMs (cublasGemmEx, cublasSgemm)
    cusolverDnHandle_t cusolver = nullptr;  // prac_refresh_cuda only: Xsyevd, Xgeqrf, Sorgqr
    PracRefreshProfile* profile = nullptr;  // prac_refresh_cuda only: time its parts (above); null in training
};

// Row-major C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C by cublasGemmEx, leading dimensions in
// elements: the same arguments as gemm_cpu (kernels/matmul.h), each pointer followed by its cuBLAS type; fp32
// accumulation and fp32 alpha/beta (CUBLAS_COMPUTE_32F) whatever the storage types. Every GEMM of the ops below
// goes through it (tools/bench_gpu_stride times them with other leading dimensions).
void prac_gemm_rm(cublasHandle_t h, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A,
                  cudaDataType_t a_type, int lda, const void* B, cudaDataType_t b_type, int ldb, float beta, void* C,
                  cudaDataType_t c_type, int ldc);

// The full activation's row stride: a trailing ld_x / ld_dy (elements, 0 = contiguous), as the CPU twins'.

// xc (N, r) = x (N, n) @ P (n, r); x rows at stride ld_x                  twin of prac_compress_cpu
template <typename T>
void prac_compress_cuda(T* xc, const T* x, const T* P, int N, int n, int r, const PracCudaHandles& h, int ld_x = 0);

// x (N, n) = xc (N, r) @ P (n, r)^T; x rows at stride ld_x               twin of prac_reconstruct_cpu
template <typename T>
void prac_reconstruct_cuda(T* x, const T* xc, const T* P, int N, int n, int r, const PracCudaHandles& h,
                           int ld_x = 0);

// dW (OC, n) += (dY (N, OC)^T @ xc (N, r)) @ P (n, r)^T through tmp (OC, r); dbias (OC) += column sums of dY
// (fp32 sums; dbias may be null); dY rows at stride ld_dy.                twin of prac_weight_grad_cpu
// G (the gradient type) is float, or __nv_bfloat16 with T = __nv_bfloat16.
// tmp is the site's fp32 (OC, r) buffer (ActSite::wgrad_tmp). With T = float it holds dY^T xc in fp32. With
// T = bf16 it holds dY^T xc as bf16 in its first OC*r*2 bytes: cublasGemmEx needs A and B of one type, so
// the (OC, r) intermediate meets the bf16 P as bf16. It is accumulated over N in fp32 inside the GEMM and
// rounded once (relative 2^-9), the same order as the bf16 rounding of dW itself.
template <typename T, typename G>
void prac_weight_grad_cuda(G* dW, G* dbias, const T* dY, const T* xc, const T* P, int N, int n, int r, int OC,
                           float* tmp, const PracCudaHandles& h, int ld_dy = 0);

// S (n, cols) with leading dimension ld, fp32 in device memory: element (i, j) is normal number i * cols + j of
// the key's Philox stream, bit for bit what prac_gaussian_cpu writes (up to a rare last-ulp difference of the
// double-precision log/sin/cos between libm and CUDA before the final rounding to float).
void prac_gaussian_cuda(float* S, int n, int cols, int ld, const PracDrawKey& key, cudaStream_t stream);

// Device workspace bytes prac_refresh_cuda needs for a site of width n and dims d: the fp32 Gram matrix (n, n),
// eigenvalues, an fp32 working copy of P, the projection scratch, tau, info words; with d.block(n) = b > 0 (the
// subspace refresh) the blocks V, Y (n, b) and three (b, b), and the largest device buffer of cusolverDnXsyevd (b),
// cusolverDnSpotrf (b) and cusolverDnXgeqrf / Sorgqr (n x b); with b = 0 of cusolverDnXsyevd (n); always of
// Xgeqrf / Sorgqr at n x r1 and n x r2. The solver sizes come from the *_bufferSize queries, which need a live
// cuSOLVER handle (and so a GPU): call it after the handle exists. The queries take device pointers for the
// matrices they never touch: `stand_in`, any live device allocation; without one the call allocates and frees 256
// bytes, and cudaFree waits for all the device's work (with --prac-refresh-overlap, a solve in flight on the
// worker's stream: the step stalled for it). Does not depend on N (the Gram GEMM needs no workspace of ours).
// CudaBackend sizes its scratch from this function; the planner (plan_cuda_refresh_workspace, train/planner.h)
// counts the same layout (prac/refresh_layout.h) with LAPACK's minima standing in for the solver buffers, which
// test_prac_cuda checks against this function within 2% + 8 KiB.
size_t prac_refresh_workspace_bytes(cusolverDnHandle_t cusolver, int n, const SiteDims& d,
                                    const void* stand_in = nullptr);

// fp8 storage (prac/fp8.h): q (N, r) e4m3 codes and scale (N) of xc (N, r), bit for bit what prac_fp8_quantize_cpu
// writes for the same values (row scale exponent and stochastic rounding are the integer functions of prac/fp8.h;
// the rounding bits word (row0 + i)·r + j of the key's Philox stream). One block per row.   twin: prac_fp8_quantize_cpu
template <typename T>
void prac_fp8_quantize_cuda(uint8_t* q, float* scale, const T* xc, int N, int r, uint64_t row0, const PracDrawKey& key,
                            cudaStream_t stream);
// xc (N, r) = decode(q) · scale per row, decoded by the __nv_fp8_e4m3 conversion to half (exact: every e4m3 value
// is a half), then scaled (exact) and stored as T (exact unless below bf16's normal range). twin: prac_fp8_dequantize_cpu
template <typename T>
void prac_fp8_dequantize_cuda(T* xc, const uint8_t* q, const float* scale, int N, int r, cudaStream_t stream);

// Refresh of one site's basis P (n, r) (row-major, T) from the full activation x (N, n), in place, with the
// exact semantics of prac_refresh_cpu (which parts are redrawn, the fallback random Q1, Q2 redrawn when Q1
// changed, projection twice, sqrt(k) scaling, failure handling and the flags/message of the result). A part
// that is not replaced keeps its bits in P.
// Q1 as d says: the exact eigensolver (cusolverDnXsyevd on the device Gram matrix) or, when d.block(n) > 0, the
// subspace refresh with prac_refresh_cpu's steps, draws and fallbacks (GEMMs on the device Gram matrix, Cholesky-QR2
// by cublasSsyrk / cusolverDnSpotrf / cublasStrsm, then shifted Cholesky-QR and Householder QR as fallbacks, the
// b x b eigenproblem by Xsyevd).
// The workspace (device, >= prac_refresh_workspace_bytes(h.cusolver, n, d) bytes, 256-byte aligned)
// is scratch. Synchronises h.stream several times (solver info words and finiteness flags are read on the
// host): keep it out of CUDA-graph capture. Solver host workspaces, if cuSOLVER asks for any, are allocated
// on the host per call. x null: the Gram matrix is already in the workspace (prac_refresh_gram_cuda below, which
// puts it there).
template <typename T>
PracRefreshResult prac_refresh_cuda(T* P, const T* x, int N, int n, const SiteDims& d, bool refresh_q1,
                                    bool refresh_q2, bool had_basis, const PracDrawKey& key,
                                    const PracCudaHandles& h, void* workspace, size_t workspace_bytes,
                                    const GramReducer* reduce_gram = nullptr, int ld_x = 0);

// Whether a refresh forms G = xᵀx: only for a Q1 found from x (due, or the first), not for a provisional random one
// (SiteDims::random_q1) or a site without Q1 (r1 = 0: its workspace has no room for G)
inline bool prac_refresh_forms_gram(const SiteDims& d, bool refresh_q1, bool had_basis) {
    return d.r1 > 0 && !d.random_q1 && (refresh_q1 || !had_basis);
}
// G = xᵀx into the refresh workspace by prac_refresh_cuda's own GEMM, then reduce_gram: --prac-refresh-overlap forms
// G on the step's stream while x is live and solves later on another stream (CudaBackend::prac_refresh_begin), when
// prac_refresh_forms_gram says the solve will read it (throws for r1 = 0).
template <typename T>
void prac_refresh_gram_cuda(const T* x, int N, int n, const SiteDims& d, const PracCudaHandles& h, void* workspace,
                            const GramReducer* reduce_gram = nullptr, int ld_x = 0);
