// LM head fused with softmax cross-entropy, CUDA twin of classifier_forward_backward_cpu (kernels/classifier.h),
// implemented in kernels/matmul_cuda.cu. Never materializes the (N, V) logits: rows go through a fp32 scratch of
// classifier_cuda_scratch_floats(N, V) values (kernels/cuda_sizes.h; the model's `logits_chunk`, which the planner
// counts).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/cuda_common.cuh"
#include "kernels/matmul.cuh"
#include "kernels/cuda_sizes.h"  // CUDA_CLASSIFIER_CHUNK, classifier_logits_ld

// Rows per chunk: CUDA_CLASSIFIER_CHUNK when V is a multiple of 4 (32000, 50304), else as many rows of
// classifier_logits_ld(V) as fit in CUDA_CLASSIFIER_CHUNK * V floats (2047 for V = 50257). A call of N rows uses
// at most min(N, rows per chunk) rows of the ld: within classifier_cuda_scratch_floats(N, V) either way.
inline int classifier_rows_per_chunk(int V) {
    size_t fit = (size_t)CUDA_CLASSIFIER_CHUNK * (size_t)V / (size_t)classifier_logits_ld(V);
    return fit < (size_t)CUDA_CLASSIFIER_CHUNK ? (int)fit : CUDA_CLASSIFIER_CHUNK;
}

// losses (N, fp32): cross-entropy per row, 0 where targets[n] < 0 (the ignore index; targets must be < V,
// a target >= V gives a NaN loss and no gradient). inp (N, C), weight (Vp, C) of which the first V rows are
// real (padding rows are neither read nor written).
// Per chunk of classifier_rows_per_chunk(V) rows:
//   logits (rows, V) fp32 = inp_chunk @ weight[:V]^T                      (cuBLASLt, bf16 in, fp32 out)
//   a row kernel: loss = logsumexp(logits) - logits[target] (fp32, single pass with a running max), and, when
//     training (dinp != nullptr), dlogits = (softmax - onehot) * grad_scale (0 for ignored rows), stored as
//     floatX IN PLACE over the row's fp32 logits (no second scratch; see matmul_cuda.cu);
//   dinp_chunk (rows, C) = dlogits @ weight[:V]                           (overwrite)
//   dweight[:V] (V, C) += dlogits^T @ inp_chunk                           (beta = 1)
// dinp == nullptr: inference (losses only; dweight not touched and may be null).
// logits_scratch: >= classifier_cuda_scratch_floats(N, V) floats of device memory, 16-byte aligned.
// Deterministic (see CublasLt in matmul.cuh; the row kernel sums in a fixed order).
//                                                                 twin of classifier_forward_backward_cpu
void classifier_cuda(float* losses, floatX* dinp, floatX* dweight, const floatX* inp, const floatX* weight,
                     const int32_t* targets, int N, int C, int V, float grad_scale, float* logits_scratch,
                     CublasLt& lt, cudaStream_t stream);
