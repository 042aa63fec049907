// The CUDA refresh's device workspace (prac_refresh_cuda, prac/prac_cuda.cu): byte offsets of its parts, the same
// for the refresh and the memory planner (train/planner.cpp), which counts them without seeing any CUDA code.
// Everything from `solver` on is cuSOLVER's device buffer, which only cuSOLVER can size
// (prac_refresh_workspace_bytes asks it; the planner estimates it).
#pragma once
#include <algorithm>
#include <cstddef>

#include "prac/prac.h"  // SiteDims

constexpr int REFRESH_SUMSQ_BLOCKS = 256;  // blocks of the refresh's sum-of-squares reduction (partials kept in `sums`)

inline size_t align256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

// The words a refresh's checks write on the device, in the workspace's `checks`; the host copies them back
// together, once for a batch of checks (prac_refresh_cuda's read_checks).
struct RefreshChecks {
    int info[3];       // cuSOLVER infos: [0] a call judged alone (or a shifted Cholesky), [1] [2] CholQR2's two
    int nonfinite[2];  // prac_nonfinite_kernel's flags: [0] a check judged alone, [1] CholQR2's result
    double sumsq;      // prac_sumsq_final_kernel's total
};

// b = d.block(n) > 0: the subspace refresh's buffers (V, Y, B, S1, S2 as in prac_cpu.cpp's RefreshArena), and no
// (n, n) eigensolver.
struct RefreshLayout {
    size_t G = 0, w = 0, W = 0, t = 0, tau = 0, checks = 0, V = 0, Y = 0, B = 0, S1 = 0, S2 = 0, sums = 0, solver = 0;
};
inline RefreshLayout refresh_layout(int n, const SiteDims& d) {
    RefreshLayout L;
    size_t off = 0;
    auto take = [&](size_t bytes) {
        size_t o = off;
        off += align256(bytes);
        return o;
    };
    int r1 = d.r1, r2 = d.r2, r = r1 + r2, b = d.block(n);
    size_t fb = sizeof(float);
    L.G = take(r1 > 0 ? (size_t)n * n * fb : 0);                 // Gram matrix (then its eigenvectors when exact)
    L.w = take(r1 > 0 ? (size_t)(b ? b : n) * fb : 0);           // eigenvalues (of G, or of the b x b projection)
    L.W = take((size_t)n * r * fb);                              // working copy of P, column-major (n, r)
    L.t = take((size_t)(r1 > 0 ? r1 : 1) * (r2 > 0 ? r2 : 1) * fb);  // Q1^T Y (r1, r2)
    L.tau = take((size_t)std::max({r, b, 1}) * fb);              // Householder scalars
    L.checks = take(sizeof(RefreshChecks));                     // solver infos, non-finite flags, a sum
    L.V = take((size_t)n * b * fb);                              // subspace block (n, b)
    L.Y = take((size_t)n * b * fb);                              // G V (n, b)
    L.B = take((size_t)b * b * fb);                              // V^T G V, its Cholesky factor, the Nystrom core
    size_t sq = (size_t)std::max(b, r2);
    L.S1 = take(sq * sq * fb);                                   // Cholesky-QR's Gram / R factors (b, b), Q2's (r2, r2)
    L.S2 = take((size_t)b * b * fb);
    L.sums = take(b || r2 ? REFRESH_SUMSQ_BLOCKS * sizeof(double) : 0);  // sum-of-squares partials (the total: checks)
    L.solver = off;
    return L;
}
