// Matmul family, CUDA twins of kernels/matmul.h (cuBLASLt), implemented in kernels/matmul_cuda.cu:
//   gemm_cuda                    <-> gemm_cpu                     C (M,N) = alpha op(A) op(B) + beta C [+ bias]
//   matmul_forward_cuda          <-> matmul_forward_cpu           out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias
//   matmul_backward_input_cuda   <-> matmul_backward_input_cpu    dinp (N,C) (+)= dout (N,OC) @ weight (OC,C)
//   matmul_backward_weight_cuda  <-> matmul_backward_weight_cpu   dweight += dout^T inp;  dbias += colsum(dout)
// Same layout and argument order as the CPU twins (row-major, weight (OC, C) as nn.Linear); storage floatX,
// accumulation fp32, no TF32. Everything is enqueued on the `stream` argument; nothing synchronises. One CublasLt
// context per stream (its workspace serves its GEMMs and the dbias kernels given no scratch of their own). Bitwise
// reproducible for a fixed shape, pointer alignment, GPU and cuBLASLt version (CublasLt and the dbias kernels
// below; docs/DESIGN.md section 3.2).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "common/cuda_common.cuh"  // floatX
#include "kernels/cuda_sizes.h"  // CUBLASLT_WORKSPACE_BYTES

// cuBLAS data type of floatX
#if defined(PRAC_FP32)
constexpr cudaDataType_t FLOATX_CUDA_DTYPE = CUDA_R_32F;
#else
constexpr cudaDataType_t FLOATX_CUDA_DTYPE = CUDA_R_16BF;
#endif

// Everything that decides which cuBLASLt descriptors and algorithm a GEMM gets. All int32 (no padding bytes),
// so it hashes and compares as plain memory. Pointer alignments are part of it because the heuristic is told
// the real alignments of A, B, C/D (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES: its default is 256 bytes,
// and an algorithm chosen for 256-byte-aligned operands may reject, or read past, a less aligned chunk view).
struct GemmKey {
    int32_t transa, transb;             // row-major transpose flags, as gemm_cpu's
    int32_t M, N, K, lda, ldb, ldc;     // row-major sizes and leading dimensions (elements)
    int32_t a_type, b_type, c_type;     // cudaDataType_t of A, B and C (= D)
    int32_t epilogue;                   // cublasLtEpilogue_t (DEFAULT or BIAS)
    int32_t bias_type;                  // cudaDataType_t of the bias (-1 without)
    int32_t beta_nonzero;               // beta != 0: C is read (and the heuristic may then choose otherwise)
    int32_t align_a, align_b, align_c, align_bias;  // min(256, largest power of two dividing the address)
    bool operator==(const GemmKey& o) const;
};
struct GemmKeyHash {
    size_t operator()(const GemmKey& k) const;
};

// One cached GEMM configuration: descriptors, layouts and the algorithm chosen by the heuristic once.
struct GemmPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS (column-major) A, B, C (= D)
    cublasLtMatmulAlgo_t algo{};
    size_t workspace_bytes = 0;  // what the chosen algorithm needs (<= the context's workspace)
};

// cuBLASLt context: handle, workspace and the per-shape cache. llm.c's matmul_cublaslt runs the heuristic and
// creates/destroys descriptors on every call; here each distinct GemmKey does that once (first call) and every
// later call is a map lookup, one descriptor attribute (the bias pointer, when there is a bias) and
// cublasLtMatmul with the cached algorithm.
//
// Determinism: cuBLAS documents ("Results reproducibility") that its routines give bitwise identical results
// run to run on GPUs of the same architecture and SM count with the same library version, and that
// cublasLtMatmul with a user-owned workspace keeps this even with several streams. A fixed algorithm per key
// (this cache) removes the remaining freedom. The split-K reduction schemes cuBLASLt may pick
// (cublasLtReductionScheme_t: INPLACE uses counters "to guarantee the sequentiality", COMPUTE_TYPE/OUTPUT_TYPE
// reduce in a separate step) are all ordered; none is atomics-based. The preference sets the mask to exactly
// those schemes so that the assumption is written down, not inherited from a default. For a bf16 D it allows only
// COMPUTE_TYPE: INPLACE and OUTPUT_TYPE keep the partial sums in D's type, one bf16 rounding (2^-9) per K slice
// where one rounding of the fp32 sum is the contract (the emulated heuristic picks them when allowed, and
// test_matmul_cuda's "rounded once" check sees it).
//
// Not copyable; needs a CUDA device (cublasLtCreate fails without one). Not thread-safe (one host thread).
struct CublasLt {
    cublasLtHandle_t handle = nullptr;
    void* workspace = nullptr;  // device, 256-byte aligned
    size_t workspace_bytes = 0;
    bool owns_workspace = false;
    std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> cache;

    // workspace: device memory of workspace_bytes (e.g. from the backend's tracked allocator, which the planner
    // counts as CUBLASLT_WORKSPACE_BYTES), or nullptr to cudaMalloc (and later free) one of that size here.
    explicit CublasLt(void* workspace = nullptr, size_t workspace_bytes = CUBLASLT_WORKSPACE_BYTES);
    ~CublasLt();
    CublasLt(const CublasLt&) = delete;
    CublasLt& operator=(const CublasLt&) = delete;
};

// Row-major C (M, N) = alpha * op(A) (M, K) @ op(B) (K, N) + beta * C [+ bias (N), broadcast over rows],
// leading dimensions in elements: the same arguments as gemm_cpu, each pointer followed by its type.
// A and B: CUDA_R_16BF or CUDA_R_32F (one type for both); C (= D): the same, or CUDA_R_32F with bf16 A/B.
// bias (may be null): N values of bias_type, added in fp32 by the BIAS epilogue before C is rounded.
// beta == 0: C is not read (may hold garbage). alpha, beta: host floats. M = 0 or N = 0: nothing to do;
// K = 0 is allowed only as a no-op (beta == 1, no bias).
void gemm_cuda(bool transa, bool transb, int M, int N, int K, float alpha, const void* A, cudaDataType_t a_type,
               int lda, const void* B, cudaDataType_t b_type, int ldb, float beta, void* C, cudaDataType_t c_type,
               int ldc, CublasLt& lt, cudaStream_t stream, const void* bias = nullptr,
               cudaDataType_t bias_type = FLOATX_CUDA_DTYPE);

// Row strides (elements) of the activation operands: trailing arguments, 0 = contiguous, as the CPU twins'
// (kernels/matmul.h).

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC, may be null; BIAS epilogue); out rows at stride ld_out,
// inp at ld_inp                                                            twin of matmul_forward_cpu
void matmul_forward_cuda(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int N, int C,
                         int OC, CublasLt& lt, cudaStream_t stream, int ld_out = 0, int ld_inp = 0);

// dinp (N, C) = dout (N, OC) @ weight (OC, C); accumulate = true adds to dinp (beta = 1); dinp rows at stride
// ld_dinp, dout at ld_dout                                                 twin of matmul_backward_input_cpu
void matmul_backward_input_cuda(floatX* dinp, const floatX* dout, const floatX* weight, int N, int C, int OC,
                                bool accumulate, CublasLt& lt, cudaStream_t stream, int ld_dinp = 0, int ld_dout = 0);

// Row groups of the deterministic dbias reduction and the fp32 scratch it needs: G(N) = min(64, ceil(N / 256))
// groups of ceil(N / G) rows each; scratch holds G * OC floats (at most 64 * OC: 768 KiB at OC = 3072). Both
// depend on N and OC only (never on the GPU), so the summation order is the same on every device.
constexpr int MATMUL_DBIAS_MAX_GROUPS = 64;
constexpr int MATMUL_DBIAS_ROWS_PER_GROUP = 256;
inline int matmul_dbias_groups(int N) {
    int g = (N + MATMUL_DBIAS_ROWS_PER_GROUP - 1) / MATMUL_DBIAS_ROWS_PER_GROUP;
    return g < 1 ? 1 : (g > MATMUL_DBIAS_MAX_GROUPS ? MATMUL_DBIAS_MAX_GROUPS : g);
}
inline size_t matmul_dbias_scratch_floats(int N, int OC) { return (size_t)matmul_dbias_groups(N) * (size_t)OC; }

// dbias (OC) += column sums of dout (N, OC), the reduction of matmul_backward_weight_cuda's dbias for other callers
// (the PRAC factored weight gradient, prac/prac_cuda.cu): fp32 partial sums over `groups` fixed row groups of
// ceil(N / groups) rows into scratch (groups, OC), then a fixed-order fp32 sum of the groups added to dbias and
// rounded once. No atomics: deterministic, and the order depends on (N, OC, groups) only. The partial kernel runs
// ceil(OC / 32) x groups blocks. groups = matmul_dbias_groups(N) gives matmul_backward_weight_cuda's sums bit for bit.
// T (dout) and G (dbias): float/float, bf16/bf16 or bf16/float. scratch >= groups * OC fp32 values, free from the
// point this is enqueued on `stream` until the finish kernel is done. dout rows at stride ld_dout (0: OC).
template <typename T, typename G>
void matmul_dbias_cuda(G* dbias, const T* dout, int N, int OC, int groups, float* scratch, cudaStream_t stream,
                       int ld_dout = 0);

// dweight (OC, C) += dout (N, OC)^T @ inp (N, C)   (beta = 1: gradient accumulation over micro-steps)
// dbias (OC) += column sums of dout (may be null): fp32 partial sums over fixed row groups, then a fixed-order
// sum of the groups (no atomics), added to dbias in fp32 and rounded once.
// scratch: >= matmul_dbias_scratch_floats(N, OC) fp32 values, or nullptr to use lt's workspace (stream order
// makes that safe: the GEMM is done with it before the dbias kernels start, and the next GEMM on the stream
// starts after them). With nullptr the planner needs no extra bytes. dout rows at stride ld_dout, inp at ld_inp.
//                                                                          twin of matmul_backward_weight_cpu
void matmul_backward_weight_cuda(floatX* dweight, floatX* dbias, const floatX* dout, const floatX* inp, int N, int C,
                                 int OC, float* scratch, CublasLt& lt, cudaStream_t stream, int ld_dout = 0,
                                 int ld_inp = 0);
