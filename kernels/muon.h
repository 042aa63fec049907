// Muon, CPU twins: Nesterov momentum, the quintic Newton-Schulz orthogonalization and the scaled update.
// train/optim_muon.h decides which matrices get them; a CUDA backend supplies the same three ops (same
// argument order) as members muon_momentum, newton_schulz, muon_apply.
//
// Newton-Schulz (Keller Jordan's Muon, also used by Moonlight): X = G / (||G||_F + 1e-7), then `steps` times
//   A = X Xᵀ,  B = b A + c A²,  X = a X + B X        (a, b, c) = (3.4445, -4.7750, 2.0315)
// an approximate U Vᵀ whose singular values end up in [0.68, 1.21], not exactly 1; a tall X (rows > cols) runs the
// transposed iteration (A = XᵀX, X = a X + X B) without a transposed copy. Why: docs/DESIGN.md section 3.4 (Muon).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/matmul.h"  // gemm_cpu

constexpr float MUON_NS_A = 3.4445f, MUON_NS_B = -4.7750f, MUON_NS_C = 2.0315f;
constexpr int MUON_NS_STEPS = 5;

// buf (n) = mu * buf + g * grad_scale;  u (n) = g * grad_scale + mu * buf (nesterov) or buf (plain momentum).
// This is Moonlight's form (buf.mul_(mu).add_(g); g.add(buf, alpha=mu)); Keller Jordan's lerp form differs by
// the factor (1 - mu), which the Frobenius normalization of Newton-Schulz removes (up to its 1e-7).
template <typename G>
void muon_momentum_cpu(float* buf, float* u, const G* grads, size_t n, float mu, float grad_scale, bool nesterov) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float g = (float)grads[i] * grad_scale;
        float b = mu * buf[i] + g;
        buf[i] = b;
        u[i] = nesterov ? g + mu * b : b;
    }
}

// Elements of newton_schulz_cpu's workspace for a (rows, cols) matrix: A and B (m, m) and the next X (rows, cols),
// m = min(rows, cols).
inline size_t newton_schulz_work_numel(int rows, int cols) {
    size_t m = (size_t)std::min(rows, cols);
    return 2 * m * m + (size_t)rows * cols;
}

// X (rows, cols) row-major, replaced in place by its Newton-Schulz orthogonalization (see the top of the file).
// work: newton_schulz_work_numel(rows, cols) floats.
inline void newton_schulz_cpu(float* X, int rows, int cols, float* work, int steps = MUON_NS_STEPS,
                              float a = MUON_NS_A, float b = MUON_NS_B, float c = MUON_NS_C) {
    size_t n = (size_t)rows * cols;
    bool tall = rows > cols;
    int m = tall ? cols : rows;  // side of the Gram matrix
    float* A = work;
    float* B = A + (size_t)m * m;
    float* Y = B + (size_t)m * m;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)X[i] * X[i];
    float inv = (float)(1.0 / (std::sqrt(ss) + 1e-7));
    for (size_t i = 0; i < n; i++) X[i] *= inv;
    float* cur = X;
    float* next = Y;
    for (int it = 0; it < steps; it++) {
        if (tall) gemm_cpu(true, false, m, m, rows, 1.0f, cur, cols, cur, cols, 0.0f, A, m);  // A = XᵀX
        else gemm_cpu(false, true, m, m, cols, 1.0f, cur, cols, cur, cols, 0.0f, A, m);      // A = X Xᵀ
        std::memcpy(B, A, (size_t)m * m * sizeof(float));
        gemm_cpu(false, false, m, m, m, c, A, m, A, m, b, B, m);  // B = b A + c A²
        std::memcpy(next, cur, n * sizeof(float));
        if (tall) gemm_cpu(false, false, rows, cols, cols, 1.0f, cur, cols, B, m, a, next, cols);  // a X + X B
        else gemm_cpu(false, false, rows, cols, rows, 1.0f, B, m, cur, cols, a, next, cols);      // a X + B X
        std::swap(cur, next);
    }
    if (cur != X) std::memcpy(X, cur, n * sizeof(float));
}

// params (n) = params * (1 - lr * wd) - step * O: Moonlight's decoupled weight decay, then the orthogonalized
// update with step = lr * 0.2 * sqrt(max(rows, cols)) (train/optim_muon.h). fp32 params here (master unused).
template <typename T>
void muon_apply_cpu(T* params, const float* O, size_t n, float lr, float wd, float step) {
    float decay = 1.0f - lr * wd;
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) params[i] = (T)((float)params[i] * decay - step * O[i]);
}
