// Fixed sizes of the CUDA backend's library and kernel scratch. A plain C++ header: the memory planner
// (train/planner.cpp) counts exactly these bytes without seeing any CUDA code.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

constexpr size_t CUBLASLT_WORKSPACE_BYTES = 32ull << 20;  // one cuBLASLt workspace per stream (kernels/matmul.cuh)
constexpr size_t CUDA_LOSS_SUM_BYTES = sizeof(float);      // the step's device loss sum (CudaBackend::loss_add)
constexpr int CUDA_CLASSIFIER_CHUNK = 2048;  // rows of logits per chunk in the fused classifier (kernels/classifier.cuh)
// Leading dimension (elements) of the fused classifier's fp32 logits rows: V rounded up to 4, so every row starts
// 16-byte aligned (cuBLASLt's fast kernels and TMA want 16-byte aligned rows; V = 50257 is odd).
inline int classifier_logits_ld(int V) { return (V + 3) / 4 * 4; }
// Floats of the fused classifier's logits scratch for N rows: CUDA_CLASSIFIER_CHUNK * V, or N rows of
// classifier_logits_ld(V) when a batch has fewer rows than a chunk holds (B*T = 1024 at V = 50257: 206 MB, not 412).
inline size_t classifier_cuda_scratch_floats(size_t N, int V) {
    return std::min((size_t)CUDA_CLASSIFIER_CHUNK * V, N * classifier_logits_ld(V));
}
// The head sizes the CUDA attention's hand-written kernels take (the fallback whenever cuDNN declines a shape; the
// kernels unroll over HS: kernels/attention_impl.cuh). Here so that --plan knows a CUDA run would be refused.
constexpr bool cuda_attention_takes_head_size(int HS) { return HS >= 16 && HS <= 128 && HS % 16 == 0; }
// The head sizes cuDNN's fused attention takes (attention_cudnn_supports_head_size in a build with it): the planner
// counts cuDNN's workspace for these.
constexpr bool cudnn_attention_takes_head_size(int HS) { return HS > 0 && HS % 8 == 0 && HS <= 128; }

// cuDNN fused attention's backward workspace for one layer (kernels/attention_cudnn.cu), an ESTIMATE from reading
// cudnn-frontend 1.32 (node/scaled_dot_product_flash_attention.h), to reconcile with the graph's measured
// get_workspace_size on the GPU (test_attention_cuda prints both at the planner's reference shapes and checks
// measured <= estimate). The frontend carves softmax_sum (B, NH, T) fp32 out of the workspace, plus either
//   - the fp32 dQ accumulator (B, NH, T, HS): the non-deterministic backward (PRAC_CUDNN_DETERMINISTIC=0), or
//   - the engine's bf16 dP scratch (B, NH, T, T), T rounded up to 64: the deterministic backward we ask for by
//     default (on Hopper with cuDNN < 9.25 the frontend then builds its dP-workspace graph; it no longer caps dP
//     at CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT's 256 MiB, which only applied to cuDNN 8.9.5 - 9.0).
// The larger of the two is counted, so the plan holds in both modes. On top of the frontend's pieces the engine
// asks for its own scratch, forward and backward: 256 bytes in every graph measured (cuDNN 9.19.0 on an H100,
// 2026-11-27, docs/VERIFICATION.md; the estimate without it was short by exactly those 256 bytes at all four
// reference shapes). It is counted as CUDNN_SDPA_ENGINE_SCRATCH_BYTES, a few KiB, so that a cuDNN asking for a
// little more still fits the plan; the GPU test checks measured <= estimate < measured + 1 MiB.
constexpr size_t CUDNN_SDPA_ENGINE_SCRATCH_BYTES = 4096;
inline size_t cudnn_sdpa_workspace_estimate(int B, int T, int NH, int HS) {
    const size_t rows = (size_t)B * NH * T, t64 = ((size_t)T + 63) / 64 * 64;
    const size_t softmax_sum = rows * 4, dq_accum = rows * HS * 4, dp = (size_t)B * NH * t64 * t64 * 2;
    return softmax_sum + std::max(dq_accum, dp) + CUDNN_SDPA_ENGINE_SCRATCH_BYTES;
}

// ---- the step's kernel scratch (CudaBackend's grow-only buffer; the planner takes the largest, rounded to 1 MiB)

// Row chunks of the norms' column sums for N rows: about 64 rows per chunk, at most 256 chunks (enough blocks to fill
// a GPU at C = 768: 3 column tiles x 256 chunks; kernels/elementwise_common.cuh colsum_*). Depends only on N, so the
// scratch formula needs no device.
inline int colsum_chunks(int N) {
    int r = (N + 63) / 64;
    return r < 1 ? 1 : (r > 256 ? 256 : r);
}
// layernorm_backward_cuda's partials: dweight's and dbias's, colsum_chunks(N) x C fp32 each (at most 2 KiB a channel)
inline size_t layernorm_backward_scratch_bytes(int N, int C) {
    return 2 * (size_t)colsum_chunks(N) * (size_t)C * sizeof(float);
}
// rmsnorm_backward_cuda's partials: dweight's alone (at most 1 KiB a channel: 4 MiB at C = 4096)
inline size_t rmsnorm_backward_scratch_bytes(int N, int C) {
    return (size_t)colsum_chunks(N) * (size_t)C * sizeof(float);
}
// encoder_backward_cuda sorts a 64-bit (token, row) key per row, padded to a power of two P >= 2 (kernels/encoder.cuh)
inline size_t encoder_sort_len(int B, int Tlen) {
    size_t n = (size_t)B * Tlen, p = 2;
    while (p < n) p <<= 1;
    return p;
}
inline size_t encoder_backward_scratch_bytes(int B, int Tlen) { return encoder_sort_len(B, Tlen) * sizeof(uint64_t); }
// The hand-written attention backward's fp32 D = rowsum(dO * O), (B, NH, T); no dQ accumulator (dQ is computed in
// registers by its own query-parallel kernel). cuDNN's backward takes its own workspace instead (estimate above).
inline size_t attention_backward_scratch_floats(int B, int T, int NH) { return (size_t)B * NH * T; }
// sum_squares_cuda (gradient clipping; Muon's norms take SUMSQ_BLOCKS + one per matrix): stage 1's partials and the
// result, in double
constexpr int SUMSQ_BLOCKS = 1024;  // the most stage-1 blocks: partial sums (and the stage-2 block size)
constexpr size_t SUM_SQUARES_SCRATCH_BYTES = (SUMSQ_BLOCKS + 1) * sizeof(double);

// GaLore's refresh (CudaBackend::galore_refresh, kernels/optim_cuda.cu) in the backend's scratch, for a gradient
// block (m, n) projected on the side of size k: [G (m, n) fp64][Gram matrix, then its eigenvectors (k, k) fp64]
// [eigenvalues (k) fp64][4 words: flags, syevd's info], each part 256-byte aligned, then cuSOLVER's syevd
// workspace from byte `solver` on. Only cuSOLVER can size that workspace (cusolverDnXsyevd_bufferSize, on a GPU);
// the planner counts LAPACK's documented minimum for dsyevd with eigenvectors, 1 + 6k + 2k² doubles and 3 + 5k
// integers (galore_syevd_bytes_estimate: what the emulated cuSOLVER asks for, within 2% + 8 KiB; test_optim_cuda
// checks it there and prints cuSOLVER's own size on a GPU).
struct GaloreRefreshScratch {
    size_t gram, eigenvalues, words, solver;  // byte offsets
};
inline GaloreRefreshScratch galore_refresh_scratch(size_t m, size_t n, size_t k) {
    auto a256 = [](size_t b) { return (b + 255) & ~(size_t)255; };
    GaloreRefreshScratch s;
    s.gram = a256(m * n * sizeof(double));
    s.eigenvalues = s.gram + a256(k * k * sizeof(double));
    s.words = s.eigenvalues + a256(k * sizeof(double));
    s.solver = s.words + 256;
    return s;
}
inline size_t galore_syevd_bytes_estimate(size_t k) {
    return (1 + 6 * k + 2 * k * k) * sizeof(double) + (3 + 5 * k) * sizeof(int);
}
