// LM head fused with softmax cross-entropy, CPU twin. Never materializes all (N, V) logits: rows are processed
// in chunks through a (chunk, V) scratch. In training it also performs the head's backward on the spot
// (dinp and dweight), so neither the logits nor the head's input need to be kept for a later pass.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include "kernels/matmul.h"

// losses (N): cross-entropy per row (0 where targets[n] < 0, the ignore index).
// inp (N, C), weight (Vp, C) of which the first V rows are real (the rest is alignment padding).
// If dinp != null: dlogits = (softmax - onehot) * grad_scale for non-ignored rows, dinp (N, C) = dlogits @ W
// (overwrites) and dweight (Vp, C) += dlogits^T @ inp. scratch holds chunk * V values.
template <typename T>
void classifier_forward_backward_cpu(T* losses, T* dinp, T* dweight, const T* inp, const T* weight,
                                     const int32_t* targets, int N, int C, int V, float grad_scale, T* scratch,
                                     int chunk) {
    for (int n0 = 0; n0 < N; n0 += chunk) {
        int rows = N - n0 < chunk ? N - n0 : chunk;
        T* logits = scratch;  // (rows, V)
        gemm_cpu(false, true, rows, V, C, T(1), inp + (size_t)n0 * C, C, weight, C, T(0), logits, V);
#pragma omp parallel for
        for (int r = 0; r < rows; r++) {
            T* l = logits + (size_t)r * V;
            int target = targets[n0 + r];
            if (target < 0) {
                losses[n0 + r] = 0;
                for (int v = 0; v < V; v++) l[v] = 0;  // no gradient from ignored rows
                continue;
            }
            T m = l[0];
            for (int v = 1; v < V; v++) m = l[v] > m ? l[v] : m;
            T sum = 0;
            for (int v = 0; v < V; v++) sum += std::exp(l[v] - m);
            T lse = m + std::log(sum);
            losses[n0 + r] = lse - l[target];
            if (dinp) {
                for (int v = 0; v < V; v++) l[v] = std::exp(l[v] - lse) * T(grad_scale);
                l[target] -= T(grad_scale);
            }
        }
        if (dinp) {
            gemm_cpu(false, false, rows, C, V, T(1), logits, V, weight, C, T(0), dinp + (size_t)n0 * C, C);
            gemm_cpu(true, false, V, C, rows, T(1), logits, V, inp + (size_t)n0 * C, C, T(1), dweight, C);
        }
    }
}
