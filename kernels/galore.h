// GaLore (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank Projection"), CPU twins
// of the four per-block operations train/optim_galore.h runs for every projected weight block.
//
// A block is one nn.Linear weight W (m, n) = (out, in), row-major, with gradient G of the same shape. GaLore's
// "std" projection picks the side by shape:
//   right (m >= n): P (n, r) = the top r right singular vectors of G (V[:, :r]);  R = G P    (m, r)
//                   the update N (m, r) goes back as N Pᵀ
//   left  (m <  n): P (m, r) = the top r left singular vectors of G  (U[:, :r]);  R = Pᵀ G   (r, n)
//                   the update N (r, n) goes back as P N
// so P always spans the smaller dimension and the Adam moments (shape of R) are r * max(m, n).
#pragma once
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "kernels/matmul.h"

// R = grad_scale * (G P) (right) or grad_scale * (Pᵀ G) (left). grad_scale carries global-norm clipping; the
// projection is linear, so scaling R equals projecting the scaled gradient.
inline void galore_project_cpu(float* R, const float* G, const float* P, int m, int n, int r, bool right,
                               float grad_scale) {
    if (right)
        gemm_cpu(false, false, m, r, n, grad_scale, G, n, P, r, 0.0f, R, r);
    else
        gemm_cpu(true, false, r, n, m, grad_scale, P, r, G, n, 0.0f, R, n);
}

// Adam in the projected space, in place: the moments m1, m2 (n elements each) absorb R, then R becomes the
// normalized update m1 / (sqrt(m2) + eps). Bias correction is not applied here: GaLore's AdamW (the Hugging
// Face formulation) folds it into the step size, lr * sqrt(1 - beta2^t) / (1 - beta1^t), with eps added to the
// uncorrected sqrt(m2) (unlike torch.optim.AdamW and kernels/adamw.h, which correct v before adding eps).
inline void galore_adam_cpu(float* R, float* m1, float* m2, size_t n, float beta1, float beta2, float eps) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float g = R[i];
        m1[i] = beta1 * m1[i] + (1.0f - beta1) * g;
        m2[i] = beta2 * m2[i] + (1.0f - beta2) * g * g;
        R[i] = m1[i] / (std::sqrt(m2[i]) + eps);
    }
}

// W <- (W - step * back(N)) * (1 - decay), back(N) = N Pᵀ (right) or P N (left). step = lr-derived step size
// times GaLore's scale alpha; decay = lr * weight_decay, applied after the update as GaLore's AdamW does. One
// GEMM: alpha = -step * (1 - decay), beta = 1 - decay.
inline void galore_apply_cpu(float* W, const float* N, const float* P, int m, int n, int r, bool right, float step,
                             float decay) {
    float keep = 1.0f - decay;
    if (right)
        gemm_cpu(false, true, m, n, r, -step * keep, N, r, P, r, keep, W, n);
    else
        gemm_cpu(false, false, m, n, r, -step * keep, P, r, N, n, keep, W, n);
}

// Column signs of P (k, r) made canonical: in every column the entry of largest magnitude (the first one on
// exact ties) is positive. Singular vectors are defined up to sign; GaLore keeps its Adam moments across a
// refresh, and m1 from the old basis plus R in a sign-flipped new basis is a different optimizer state, so
// two implementations (or two LAPACKs) only agree after a refresh when they pick the same signs.
inline void galore_canonical_signs(float* P, int k, int r) {
    for (int j = 0; j < r; j++) {
        int best = 0;
        for (int i = 1; i < k; i++)
            if (std::fabs(P[(size_t)i * r + j]) > std::fabs(P[(size_t)best * r + j])) best = i;
        if (P[(size_t)best * r + j] < 0)
            for (int i = 0; i < k; i++) P[(size_t)i * r + j] = -P[(size_t)i * r + j];
    }
}

// P (k, r) = the top r singular vectors of G (m, n) on the chosen side (k = n right, k = m left), canonical
// signs. fp32 SVD (LAPACK sgesdd, falling back to sgesvd if it does not converge), as GaLore runs
// torch.linalg.svd on the fp32 gradient. Host scratch: a copy of G plus U, s, Vᵀ, about
// m*n + min(m,n)*(m+n+1) floats, freed on return. Returns 0, -1 when G has a non-finite entry (nothing
// written), or LAPACK's positive info when neither driver converged.
inline int galore_projection_cpu(float* P, const float* G, int m, int n, int r, bool right) {
    size_t mn = (size_t)m * n;
    for (size_t i = 0; i < mn; i++)
        if (!std::isfinite(G[i])) return -1;
    int k = std::min(m, n);
    if (r > k) fail("galore_projection_cpu: rank %d exceeds min(m, n) of a (%d, %d) block", r, m, n);
    std::vector<float> a(G, G + mn), s(k), u((size_t)m * k), vt((size_t)k * n);
    int info = LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', m, n, a.data(), n, s.data(), u.data(), k, vt.data(), n);
    if (info > 0) {
        std::vector<float> superb(std::max(k - 1, 1));
        a.assign(G, G + mn);
        info = LAPACKE_sgesvd(LAPACK_ROW_MAJOR, 'S', 'S', m, n, a.data(), n, s.data(), u.data(), k, vt.data(), n,
                              superb.data());
    }
    if (info != 0) return info;
    // singular values come sorted descending: the first r columns of U (m, k) or rows of Vᵀ (k, n)
    if (right) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < r; j++) P[(size_t)i * r + j] = vt[(size_t)j * n + i];
        galore_canonical_signs(P, n, r);
    } else {
        for (int i = 0; i < m; i++)
            for (int j = 0; j < r; j++) P[(size_t)i * r + j] = u[(size_t)i * k + j];
        galore_canonical_signs(P, m, r);
    }
    return 0;
}
