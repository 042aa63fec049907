// RSO (Chen et al. 2025, "A Memory Efficient Randomized Subspace Optimization Method for Training Large Language
// Models"), CPU twins of the two element-wise steps train/optim_rso.h runs on a weight's subspace variable
// B (m, r) besides GaLore's project / adam / apply (kernels/galore.h, always the "right" side: R = G P, update
// N Pᵀ, P (n, r) spanning part of the weight's input space).
#pragma once
#include <cstddef>

// R (m, r) += prox * B: the gradient of the subproblem's proximal term (prox / 2) ||B||².
inline void rso_prox_cpu(float* R, const float* B, size_t n, float prox) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) R[i] += prox * B[i];
}

// B (m, r) -= step * N: B follows the update galore_apply puts into W (W = W_k + B Pᵀ until the next draw).
inline void rso_track_cpu(float* B, const float* N, size_t n, float step) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) B[i] -= step * N[i];
}
