// Helpers shared by test_prac.cpp and test_prac_model.cpp: the false-failure level kFail and the normal quantiles
// built on it, our own normals (Rng), small row-major double helpers (dgemm, sq_norm, block, orthonormal columns),
// the synthetic matrices with a chosen spectrum (Synth, make_synth, dominant_spectrum), and opts(mode).
#pragma once
#include <gtest/gtest.h>
#include <lapacke.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu_backend.h"
#include "prac/prac.h"

using dvec = std::vector<double>;
using fvec = std::vector<float>;
inline constexpr double kFail = 1e-6;  // false-failure probability of each statistical check

// ---- small statistics helpers ----

// z with P(Z > z) = p, Z standard normal (bisection on erfc; p down to ~1e-300)
inline double z_upper(double p) {
    double lo = 0, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}
inline double z_two_sided(double p) { return z_upper(p / 2); }
// Székely-Bakirov factor: P(Q >= kSB · E Q) <= 1e-6 for any nonnegative Gaussian quadratic form Q
inline double sb_factor() {
    double z = z_two_sided(kFail);
    return z * z;
}

// Our own normals (mt19937_64 + Box-Muller), identical on every standard library.
struct Rng {
    std::mt19937_64 g;
    explicit Rng(uint64_t seed) : g(seed) {}
    double uniform() { return ((double)(g() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
    double normal() {
        double u1 = uniform(), u2 = uniform();
        return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    }
    fvec normals_f(size_t n, double scale = 1) {
        fvec v(n);
        for (float& x : v) x = (float)(scale * normal());
        return v;
    }
};

// ---- small dense helpers (row-major, double) ----

// rows x cols with orthonormal columns (QR of a Gaussian matrix)
inline dvec orthonormal_columns(int rows, int cols, uint64_t seed) {
    Rng rng(seed);
    dvec A((size_t)rows * cols), tau(cols);
    for (double& a : A) a = rng.normal();
    EXPECT_EQ(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, rows, cols, A.data(), cols, tau.data()), 0);
    EXPECT_EQ(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, rows, cols, cols, A.data(), cols, tau.data()), 0);
    return A;
}

// C (M, N) = op(A) op(B), double
inline dvec dgemm(bool ta, bool tb, int M, int N, int K, const dvec& A, const dvec& B) {
    dvec C((size_t)M * N);
    gemm_cpu(ta, tb, M, N, K, 1.0, A.data(), ta ? M : K, B.data(), tb ? K : N, 0.0, C.data(), N);
    return C;
}

inline double sq_norm(const dvec& v) {
    double s = 0;
    for (double x : v) s += x * x;
    return s;
}

// columns [c0, c0 + c) of the (n, r) row-major P, times `scale`, as an (n, c) double matrix
inline dvec block(const float* P, int n, int r, int c0, int c, double scale = 1) {
    dvec B((size_t)n * c);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c; j++) B[(size_t)i * c + j] = scale * P[(size_t)i * r + c0 + j];
    return B;
}

// X (N, n) = U diag(s) Vᵀ with random orthonormal U (N, n), V (n, n), rounded to fp32
struct Synth {
    int N, n;
    dvec s;   // the singular values used
    fvec X;   // fp32 matrix
    dvec Xd;  // the same values in double (what the references are computed from)
};
inline Synth make_synth(int N, int n, const dvec& s, uint64_t seed) {
    dvec U = orthonormal_columns(N, n, seed), V = orthonormal_columns(n, n, seed + 1);
    Synth S{N, n, s, fvec((size_t)N * n), dvec((size_t)N * n)};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < n; j++) {
            double v = 0;
            for (int k = 0; k < n; k++) v += U[(size_t)i * n + k] * s[k] * V[(size_t)j * n + k];
            S.X[(size_t)i * n + j] = (float)v;
            S.Xd[(size_t)i * n + j] = (float)v;
        }
    return S;
}
// The spectrum of the estimator tests: 16 dominant values 10 .. 5.5, then a slowly decaying tail 1 .. 0.39
// (the paper's picture: a few large singular values and a long tail). Spectral gap after 16: 5.5² - 1 = 29.25.
inline dvec dominant_spectrum(int n, int top) {
    dvec s(n);
    for (int i = 0; i < n; i++) s[i] = i < top ? 10.0 - 0.3 * i : std::pow(0.98, i - top);
    return s;
}

inline PracOptions opts(PracMode mode) {
    PracOptions o;
    o.mode = mode;
    return o;
}
