// Fixed sizes of the CUDA backend's library and kernel scratch. A plain C++ header: the memory planner
// (train/planner.cpp) counts exactly these bytes without seeing any CUDA code.
#pragma once
#include <algorithm>
#include <cstddef>

constexpr size_t CUBLASLT_WORKSPACE_BYTES = 32ull << 20;  // one cuBLASLt workspace per stream (kernels/matmul.cuh)
constexpr int CUDA_CLASSIFIER_CHUNK = 2048;  // rows of logits per chunk in the fused classifier (kernels/classifier.cuh)

// cuDNN fused attention's backward workspace for one layer (kernels/attention_cudnn.cu), an ESTIMATE from reading
// cudnn-frontend 1.32 (node/scaled_dot_product_flash_attention.h), to reconcile with the graph's measured
// get_workspace_size on the GPU (test_attention_cuda prints both at the planner's reference shapes and checks
// measured <= estimate). The frontend carves softmax_sum (B, NH, T) fp32 out of the workspace, plus either
//   - the fp32 dQ accumulator (B, NH, T, HS): the non-deterministic backward (PRAC_CUDNN_DETERMINISTIC=0), or
//   - the engine's bf16 dP scratch (B, NH, T, T), T rounded up to 64: the deterministic backward we ask for by
//     default (on Hopper with cuDNN < 9.25 the frontend then builds its dP-workspace graph; it no longer caps dP
//     at CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT's 256 MiB, which only applied to cuDNN 8.9.5 - 9.0).
// The larger of the two is counted, so the plan holds in both modes; the forward needs no frontend workspace
// (its engine's own few bytes are within the 1 MiB rounding of the scratch).
inline size_t cudnn_sdpa_workspace_estimate(int B, int T, int NH, int HS) {
    const size_t rows = (size_t)B * NH * T, t64 = ((size_t)T + 63) / 64 * 64;
    const size_t softmax_sum = rows * 4, dq_accum = rows * HS * 4, dp = (size_t)B * NH * t64 * t64 * 2;
    return softmax_sum + std::max(dq_accum, dp);
}
