// PRAC options and the LAPACK-based CPU refresh.
#include <lapacke.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/error.h"
#include "prac/fp8.h"
#include "prac/philox.h"
#include "prac/prac.h"

const char* prac_mode_name(PracMode m) {
    switch (m) {
        case PracMode::NONE: return "none";
        case PracMode::PAC: return "pac";
        case PracMode::RAC: return "rac";
        case PracMode::PRAC: return "prac";
    }
    return "?";
}

const char* prac_refresh_name(PracRefresh m) { return m == PracRefresh::EXACT ? "exact" : "subspace"; }

PracRefresh prac_refresh_parse(const std::string& s) {
    for (PracRefresh m : {PracRefresh::EXACT, PracRefresh::SUBSPACE})
        if (s == prac_refresh_name(m)) return m;
    fail("--prac-refresh must be exact or subspace (got \"%s\")", s.c_str());
}

const char* prac_storage_name(PracStorage s) { return s == PracStorage::FP8 ? "fp8" : "act"; }

PracStorage prac_storage_parse(const std::string& s) {
    for (PracStorage m : {PracStorage::ACT, PracStorage::FP8})
        if (s == prac_storage_name(m)) return m;
    fail("--prac-storage must be act (the activation dtype: bf16 in the CUDA bf16 build, fp32 otherwise) or fp8 "
         "(got \"%s\")", s.c_str());
}

PracMode prac_mode_parse(const std::string& s) {
    for (PracMode m : {PracMode::NONE, PracMode::PAC, PracMode::RAC, PracMode::PRAC})
        if (s == prac_mode_name(m)) return m;
    fail("--prac must be none, pac, rac or prac (got \"%s\")", s.c_str());
}

int prac_overlap_slots(const PracOptions& o, int units) {
    if (o.overlap <= 0) return 0;
    if (!o.stagger) return units;
    auto per_phase = [&](int t) { return t > 0 ? (units + t - 1) / t : 0; };
    int64_t per_step = per_phase(o.t1) + (o.t2 != o.t1 ? per_phase(o.t2) : 0) +
                       per_phase(prac_spread_steps(o.initial_spread, units));
    return (int)std::min<int64_t>(units, per_step * o.overlap);
}

int prac_round_rank(float frac, int n) {
    if (frac <= 0) return 0;
    // in exact integer millionths: the decimal that was written, not its float (0.42f·1200 / 8 is 62.99999, whose
    // floor gave rank 496 where 0.42·1200 = 504 is a multiple of 8); a float below 1 keeps six decimals exactly
    const long long millionths = std::llround((double)frac * 1e6);
    int r = (int)(millionths * n / 8000000) * 8;
    return r < 8 ? 8 : r;
}

SiteDims prac_site_dims(const PracOptions& o, SiteClass cls, int n, const std::string& site) {
    SiteDims d;
    bool lin = cls == SiteClass::LINEAR;
    if (o.rso_rank > 0) {  // --optimizer rso: linear sites store X·P of the optimizer's basis (prac.h)
        if (o.mode != PracMode::NONE)
            fail("--optimizer rso stores its own projections of the linear layers' inputs and cannot be combined "
                 "with --prac %s\n---> HINT: use --prac none with --optimizer rso", prac_mode_name(o.mode));
        if (!lin) return d;
        if (o.rso_rank >= n)
            fail("RSO rank %d is not below the width %d of site %s (the input of a linear layer)\n---> HINT: lower "
                 "--rso-rank below %d", o.rso_rank, n, site.c_str(), n);
        d.compressed = true;
        d.r2 = o.rso_rank;
        return d;
    }
    if (o.mode == PracMode::NONE || (lin && !o.linear) || (!lin && !o.nonlinear)) return d;
    int abs1 = lin ? o.linear_r1_abs : o.nonlinear_r1_abs, abs2 = lin ? o.linear_r2_abs : o.nonlinear_r2_abs;
    int r1 = abs1 >= 0 ? abs1 : prac_round_rank(lin ? o.linear_r1 : o.nonlinear_r1, n);
    int r2 = abs2 >= 0 ? abs2 : prac_round_rank(lin ? o.linear_r2 : o.nonlinear_r2, n);
    const char* cname = lin ? "linear" : "nonlinear";
    const long long total = (long long)r1 + r2;  // (ranks up to INT_MAX each: their int sum could wrap negative)
    if (o.mode == PracMode::PAC && total < n) {
        r1 += r2;  // equal total rank, all of it principal
        r2 = 0;
    } else if (o.mode == PracMode::RAC && total < n) {
        r2 += r1;  // equal total rank, all of it random
        r1 = 0;
    }
    if (total == 0)
        fail("PRAC site %s (%s, width %d): total rank is 0%s\n---> HINT: raise the %s ranks, or leave the %s sites "
             "uncompressed with --prac-classes %s", site.c_str(), cname, n,
             o.mode == PracMode::RAC ? " (mode rac draws all of r1 + r2 at random: it needs r1 + r2 > 0)" : "", cname,
             cname, std::strcmp(cname, "linear") == 0 ? "nonlinear" : "linear");
    const bool from_fractions = abs1 < 0 && abs2 < 0;
    if (total >= n)
        fail("PRAC site %s (%s, width %d): ranks r1 = %d + r2 = %d leave nothing to compress (must be below %d)\n"
             "---> HINT: %s", site.c_str(), cname, n, r1, r2, n,
             from_fractions && r1 <= 8 && r2 <= 8  // (a fraction's rank is 0 or at least 8: none is low enough)
                 ? format("a fraction's rank is at least 8: pass absolute ranks below %d in all, --prac-%s-ranks R1,R2, "
                          "or leave the %s sites uncompressed with --prac-classes %s", n, cname, cname,
                          lin ? "nonlinear" : "linear").c_str()
                 : format("lower the %s rank fractions or absolute ranks", cname).c_str());
    if (o.mode == PracMode::PRAC && r2 == 0)
        fail("PRAC site %s (%s, width %d): mode prac needs r2 > 0 (r2 = 0 is mode pac)\n"
             "---> HINT: use --prac pac, or a positive r2", site.c_str(), cname, n);
    if (!(o.k_mult > 0))
        fail("PRAC site %s: the k multiplier (--prac-k-mult) must be positive (got %g)", site.c_str(), o.k_mult);
    d.compressed = true;
    d.fp8 = o.storage == PracStorage::FP8;
    d.r1 = r1;
    d.r2 = r2;
    d.refresh = o.refresh;
    d.k = r2 > 0 ? o.k_mult * (float)(n - r1) / (float)r2 : 1.0f;
    return d;
}

// Element (i, j) of the (n, cols) draw is normal number i * cols + j of the key's stream, stored at
// S[i * row_stride + j * col_stride] (row-major for prac_gaussian_cpu, column-major for the refresh).
static void gaussian_strided(float* S, int n, int cols, size_t row_stride, size_t col_stride, const PracDrawKey& key) {
    PracPhiloxWords w = prac_philox_words(key);
    size_t total = (size_t)n * cols;
#pragma omp parallel for
    for (size_t b = 0; b < (total + 3) / 4; b++) {
        double z[4];
        philox_normal4(w.k0, w.k1, w.stream_hi, w.stream_lo, b, z);
        for (int j = 0; j < 4 && 4 * b + j < total; j++) {
            size_t e = 4 * b + j;
            S[(e / cols) * row_stride + (e % cols) * col_stride] = (float)z[j];
        }
    }
}

void prac_gaussian_cpu(float* S, int n, int cols, int ld, const PracDrawKey& key) {
    gaussian_strided(S, n, cols, (size_t)ld, 1, key);
}

void prac_fp8_quantize_cpu(uint8_t* q, float* scale, const float* xc, int N, int r, uint64_t row0,
                           const PracDrawKey& key) {
    PracPhiloxWords w = prac_philox_words(key);
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* x = xc + (size_t)i * r;
        float amax = 0;
        for (int j = 0; j < r; j++)
            if (std::isfinite(x[j])) amax = std::max(amax, std::fabs(x[j]));
        int k = fp8_row_exponent(amax);
        float up = fp8_pow2(k);
        scale[i] = fp8_pow2(-k);
        uint64_t e0 = (row0 + (uint64_t)i) * (uint64_t)r;  // word e of the stream: Philox block e / 4, word e % 4
        for (uint64_t e = e0 & ~(uint64_t)3; e < e0 + (uint64_t)r; e += 4) {
            Philox4x32 bits = philox_stream_block(w.k0, w.k1, w.stream_hi, w.stream_lo, e >> 2);
            for (int t = 0; t < 4; t++)
                if (e + t >= e0 && e + t < e0 + (uint64_t)r)
                    q[(size_t)i * r + (e + t - e0)] = fp8_e4m3_sr(x[e + t - e0] * up, bits.v[t]);
        }
    }
}

void prac_fp8_dequantize_cpu(float* xc, const uint8_t* q, const float* scale, int N, int r) {
#pragma omp parallel for
    for (int i = 0; i < N; i++)
        for (int j = 0; j < r; j++) xc[(size_t)i * r + j] = fp8_e4m3_decode(q[(size_t)i * r + j]) * scale[i];
}

static bool all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(x[i])) return false;
    return true;
}

// Orthonormal basis of Y (n, c) row-major in place (leading dimension ld), through Householder QR. Returns
// LAPACK's info (or -1000 for non-finite input/output).
static int orthonormalize(float* Y, int n, int c, int ld) {
    if (c == 0) return 0;
    std::vector<float> tau(c);
    int info = LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, n, c, Y, ld, tau.data());
    if (info == 0) info = LAPACKE_sorgqr(LAPACK_ROW_MAJOR, n, c, c, Y, ld, tau.data());
    if (info == 0) {
        for (int i = 0; i < n; i++)
            if (!all_finite(Y + (size_t)i * ld, c)) return -1000;
    }
    return info;
}

int prac_random_basis_cpu(float* Q, int n, int r, const PracDrawKey& key) {
    prac_gaussian_cpu(Q, n, r, r, key);
    return orthonormalize(Q, n, r, r);
}

// ---- the refresh: every buffer column-major (LAPACK's own layout: no hidden transposed copies) in one arena ----

// LAPACK work sizes the refresh passes (fixed, so the planner can count them): Householder QR of (n, c) with
// blocks of QR_BLOCK columns; the symmetric eigensolver's documented minimum for eigenvectors (ssyevd, JOBZ = V).
constexpr int QR_BLOCK = 64;
static size_t qr_work(int c) { return (size_t)QR_BLOCK * (c > 0 ? c : 1); }
static size_t syevd_work(int m) { return 1 + 6 * (size_t)m + 2 * (size_t)m * m; }
static size_t syevd_iwork(int m) { return 3 + 5 * (size_t)m; }

// The arena's layout in floats (ints counted as floats: both 4 bytes).
struct RefreshArena {
    size_t W = 0, G, w, work, iwork, V, Y, B, S1, S2, tau, t, total;
    RefreshArena(int n, const SiteDims& d) {
        int r1 = d.r1, r2 = d.r2, r = d.r(), b = d.block(n);
        size_t at = 0;
        auto take = [&](size_t count) {
            size_t o = at;
            at += count;
            return o;
        };
        W = take((size_t)n * r);                              // the new P, column-major (n, r)
        G = take(r1 > 0 ? (size_t)n * n : 0);                 // Gram matrix (lower), then its eigenvectors
        w = take(r1 > 0 ? (size_t)(b ? b : n) : 0);           // eigenvalues (of G, or of the b x b projection)
        size_t wk = std::max(qr_work(r1), qr_work(r2));       // fallback Q1, Q2
        if (r1 > 0) wk = std::max(wk, b ? std::max(syevd_work(b), qr_work(b)) : syevd_work(n));
        work = take(wk);
        iwork = take(r1 > 0 ? syevd_iwork(b ? b : n) : 0);
        V = take((size_t)n * b);                              // subspace block (n, b)
        Y = take((size_t)n * b);                              // G V (n, b)
        B = take((size_t)b * b);                              // Vᵀ G V (b, b), its Cholesky factor, the Nyström core
        S1 = take((size_t)std::max(b, r2) * std::max(b, r2));  // Cholesky-QR's Gram / R factors (b, b), Q2's (r2, r2)
        S2 = take((size_t)b * b);
        tau = take((size_t)std::max({b, r1, r2, 1}));         // Householder scalars
        t = take((size_t)std::max(r1, 1) * std::max(r2, 1));  // Q1ᵀ Q2 (r1, r2) of the projection
        total = at;
    }
};

size_t prac_refresh_cpu_workspace_bytes(int n, const SiteDims& d) { return RefreshArena(n, d).total * sizeof(float); }

// Q (n, c) column-major (ld n) in place: Householder QR, then the explicit Q. LAPACK's info, -1000 if not finite.
static int orth_cm(float* Q, int n, int c, float* tau, float* work) {
    if (c == 0) return 0;
    int lwork = (int)qr_work(c);
    int info = LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, n, c, Q, n, tau, work, lwork);
    if (info == 0) info = LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, n, c, c, Q, n, tau, work, lwork);
    if (info == 0 && !all_finite(Q, (size_t)n * c)) return -1000;
    return info;
}

// One Cholesky-QR pass on Q (n, c) in place: S = QᵀQ = RᵀR (R upper, into S), Q = Q R⁻¹. False when the Cholesky
// factorization fails (QᵀQ not numerically positive definite: Q's columns dependent to fp32 precision).
static bool cholqr_pass(float* Q, int n, int c, float* S) {
    cblas_ssyrk(CblasColMajor, CblasUpper, CblasTrans, c, n, 1.0f, Q, n, 0.0f, S, c);
    if (LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', c, S, c) != 0) return false;
    cblas_strsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, n, c, 1.0f, S, c, Q, n);
    return true;
}

// CholQR2 on Q (n, c) in place (two Cholesky-QR passes: BLAS-3 only, about the flops of a Householder QR at GEMM
// speed): the first pass leaves Q with ‖QᵀQ - I‖ ≈ κ(Q)² u, the second makes it orthonormal to u provided the first
// left QᵀQ = I + E with ‖E‖_F ≤ 1/2 (then κ(Q)² ≤ 3). R1 in S1 and R2 in S2 (c, c; upper, with Q_in = Q R2 R1; S1
// may be S2 when R is not wanted). False when a Cholesky fails, E is larger (Q too ill-conditioned for fp32: κ
// beyond about u^(-1/2)) or the result is not finite; Q is then garbage.
static bool cholqr2(float* Q, int n, int c, float* S1, float* S2) {
    if (!cholqr_pass(Q, n, c, S1)) return false;
    // the second pass's Gram (before the Cholesky) measures the first pass's loss of orthogonality
    cblas_ssyrk(CblasColMajor, CblasUpper, CblasTrans, c, n, 1.0f, Q, n, 0.0f, S2, c);
    double e2 = 0;
    for (int j = 0; j < c; j++)
        for (int i = 0; i <= j; i++) {
            double e = S2[(size_t)j * c + i] - (i == j);
            e2 += (i == j ? 1 : 2) * e * e;
        }
    if (!(e2 <= 0.25) || LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', c, S2, c) != 0) return false;
    cblas_strsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, n, c, 1.0f, S2, c, Q, n);
    return all_finite(Q, (size_t)n * c);
}

// Shifted Cholesky-QR on Q (n, c) in place, for Q beyond CholQR2 (κ above about u^(-1/2)): a Cholesky-QR pass on
// QᵀQ + s I (s: prac_shifted_cholqr_rel) keeps Q's span and divides its condition number by up to ‖Q‖/sqrt(s),
// then CholQR2 is tried; up to max_passes such passes (PracSubspaceParams::shifted_passes; one pass is Fukaya et
// al.'s shifted CholQR3), counted in *passes. A failed CholQR2 leaves Q untouched (its Cholesky failed) or a basis
// of the same span (its check failed), either of which the next pass takes. False when a shifted Cholesky fails
// or the passes run out (Q is then garbage).
static bool shifted_cholqr(float* Q, int n, int c, float* S1, float* S2, int max_passes, int* passes) {
    for (int pass = 0; pass < max_passes; pass++) {
        ++*passes;
        cblas_ssyrk(CblasColMajor, CblasUpper, CblasTrans, c, n, 1.0f, Q, n, 0.0f, S1, c);
        double trace = 0;
        for (int j = 0; j < c; j++) trace += S1[(size_t)j * c + j];
        const float shift = (float)(prac_shifted_cholqr_rel(n, c) * trace);
        for (int j = 0; j < c; j++) S1[(size_t)j * c + j] += shift;
        if (LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', c, S1, c) != 0) return false;
        cblas_strsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, n, c, 1.0f, S1, c, Q, n);
        if (cholqr2(Q, n, c, S1, S2)) return true;
    }
    return false;
}

// Q (n, c) = an orthonormal basis of Y (n, c) (both column-major, ld n; Y is kept), R (c, c) upper with Y = Q R when
// R is given: CholQR2; when that fails, shifted Cholesky-QR (on real activations the first power step of a refresh
// needs it: the new columns G·Ω lean on the previous Q1's images, or, cold, on the top eigenvector); Householder QR
// of Y only when a shifted Cholesky factorization fails or the passes run out. Counts the fallbacks in *res.
// Returns LAPACK's info or -1000 (non-finite).
static int orth_into(float* Q, const float* Y, int n, int c, float* S1, float* S2, float* tau, float* work,
                     int shifted_passes, PracRefreshResult* res, float* R = nullptr) {
    std::memcpy(Q, Y, (size_t)n * c * sizeof(float));
    if (!cholqr2(Q, n, c, S1, S2)) {  // on the untouched input; R = QᵀY (upper triangular up to rounding)
        std::memcpy(Q, Y, (size_t)n * c * sizeof(float));
        int info = 0;
        if (shifted_cholqr(Q, n, c, S1, S2, shifted_passes, &res->q1_shifted_passes)) {
            res->q1_shifted_qr++;
        } else {
            res->q1_householder_qr++;
            std::memcpy(Q, Y, (size_t)n * c * sizeof(float));
            info = orth_cm(Q, n, c, tau, work);
        }
        if (info == 0 && R) cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, c, c, n, 1.0f, Q, n, Y, n, 0.0f, R, c);
        return info;
    }
    if (R) {  // Y = Q R2 R1: R = R2 R1 (upper times upper)
        for (int j = 0; j < c; j++)
            for (int i = j + 1; i < c; i++) S1[(size_t)j * c + i] = 0.0f;  // potrf leaves the strict lower part
        cblas_strmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, c, c, 1.0f, S2, c, S1, c);
        if (R != S1) std::memcpy(R, S1, (size_t)c * c * sizeof(float));
    }
    return 0;
}

// S (n, c) -= Q (Qᵀ S) with Q (n, q) orthonormal, `passes` times (after two, S ⟂ Q to fp32 precision whatever S
// was). t: q x c floats. All column-major, ld n.
static void project_out(float* S, const float* Q, int n, int q, int c, float* t, int passes = 2) {
    for (int pass = 0; pass < passes && q > 0; pass++) {
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, q, c, n, 1.0f, Q, n, S, n, 0.0f, t, q);
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, c, q, -1.0f, Q, n, t, q, 1.0f, S, n);
    }
}

// Q2 (n, r2) = an orthonormal basis of (I - Q1 Q1ᵀ) Z, Z the Gaussian (n, r2) of `key` (uniform on the Stiefel
// manifold of Q1's complement): CholQR2 in place, and when that fails the same projected Gaussian drawn again and
// Householder-orthonormalized (*householder set). Q1 (n, r1) orthonormal; t: r1 x r2, S: r2 x r2 floats. Returns
// LAPACK's info / -1000.
static int draw_q2(float* Q2, const float* Q1, int n, int r1, int r2, const PracDrawKey& key, float* t, float* S,
                   float* tau, float* work, bool* householder) {
    auto projected_gaussian = [&] {
        gaussian_strided(Q2, n, r2, 1, (size_t)n, key);
        project_out(Q2, Q1, n, r1, r2, t, prac_q2_projection_passes(n, r1, r2));
    };
    projected_gaussian();
    if (cholqr2(Q2, n, r2, S, S)) return 0;
    *householder = true;
    projected_gaussian();
    return orth_cm(Q2, n, r2, tau, work);
}

// Eigenvectors of the symmetric A (m, m) (column-major, lower triangle) in place, eigenvalues ascending in w.
static int syevd_cm(float* A, int m, float* w, float* work, int* iwork) {
    return LAPACKE_ssyevd_work(LAPACK_COL_MAJOR, 'V', 'L', m, A, m, w, work, (int)syevd_work(m), iwork,
                               (int)syevd_iwork(m));
}

// W (n, r1) = V (n, b) times the eigenvectors of the symmetric M (b, b, lower; destroyed) of its r1 largest
// eigenvalues, largest first (through Y, which must hold b x r1 floats).
static int top_ritz_vectors(float* W, const float* V, float* M, int n, int b, int r1, float* Y, float* w,
                            float* work, int* iwork) {
    if (!all_finite(M, (size_t)b * b)) return -1000;
    int info = syevd_cm(M, b, w, work, iwork);  // eigenvalues ascending
    if (info != 0) return info;
    for (int j = 0; j < r1; j++)
        std::memcpy(Y + (size_t)j * b, M + (size_t)(b - 1 - j) * b, (size_t)b * sizeof(float));
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, r1, b, 1.0f, V, n, Y, b, 0.0f, W, n);
    return all_finite(W, (size_t)n * r1) ? 0 : -1000;
}

// Subspace iteration for the top r1 eigenvectors of G (n, n, lower triangle) into W[:, 0:r1] (see prac.h).
// warm: W[:, 0:r1] holds the previous Q1. Returns 0, LAPACK's info, or -1000 (non-finite).
//   V = orth([previous Q1 | Gaussian] or Gaussian); `iters` times V = orth(G V); then the Nyström extraction from
//   Y = G V: G ≈ Y (VᵀY)⁻¹ Yᵀ, whose eigenvectors lie in span(Y), i.e. one power step more than a Rayleigh-Ritz
//   step on V for the same multiplication by G. With Y = Q R (orthonormal Q) and VᵀY = CᵀC (Cholesky), the
//   approximation is Q (R C⁻¹)(R C⁻¹)ᵀ Qᵀ: Q1 = Q times the top eigenvectors of T Tᵀ (b, b), T = R C⁻¹. Both
//   sides are shifted by ν = sqrt(n) u ‖Y‖_F (Y + ν V, VᵀY + ν I: the Nyström approximation of G + ν I), which
//   keeps the Cholesky factorization defined when G is rank-deficient on span(V) (Tropp et al. 2017); should it
//   fail anyway (or nystrom is false), Rayleigh-Ritz on V (eigenvectors of VᵀG V) instead.
static int subspace_q1(float* W, const float* G, int n, int r1, int b, bool warm, int iters, bool nystrom,
                       int shifted_passes, const PracDrawKey& key, float* V, float* Y, float* B, float* S1, float* S2,
                       float* w, float* tau, float* work, int* iwork, PracRefreshResult* res) {
    PracDrawKey ks = key;
    ks.purpose = PRAC_DRAW_Q1_SUBSPACE;
    int c0 = warm ? r1 : 0;  // Gaussian columns [c0, b): a fresh stream, independent of Q2's
    gaussian_strided(Y + (size_t)c0 * n, n, b - c0, 1, (size_t)n, ks);
    if (warm) {  // V = [Q1 | orth(Ω - Q1 Q1ᵀ Ω)]: the previous Q1 is orthonormal, only the b - r1 new columns need it
        std::memcpy(V, W, (size_t)n * r1 * sizeof(float));
        project_out(Y + (size_t)r1 * n, W, n, r1, b - r1, S2);
    }
    int info = orth_into(V + (size_t)c0 * n, Y + (size_t)c0 * n, n, b - c0, S1, S2, tau, work, shifted_passes, res);
    for (int it = 0; it < iters && info == 0; it++) {
        cblas_ssymm(CblasColMajor, CblasLeft, CblasLower, n, b, 1.0f, G, n, V, n, 0.0f, Y, n);  // Y = G V
        info = orth_into(V, Y, n, b, S1, S2, tau, work, shifted_passes, res);
    }
    if (info != 0) return info;
    cblas_ssymm(CblasColMajor, CblasLeft, CblasLower, n, b, 1.0f, G, n, V, n, 0.0f, Y, n);  // Y = G V
    // Y scaled by the power of two that brings ‖Y‖_F into [1/2, 1) (exact): the steps below then give the same bits
    // for G and G·2^k (the Cholesky factor of B scales by an irrational factor otherwise). Without it, the 2-rank
    // average of --prac-shared-subspace (G/2 when one rank adds nothing) would move Q1 within a degenerate cluster.
    double ynorm2 = 0;
    for (size_t e = 0; e < (size_t)n * b; e++) ynorm2 += (double)Y[e] * Y[e];
    if (!std::isfinite(ynorm2)) return -1000;
    int e2 = 0;
    std::frexp(std::sqrt(ynorm2), &e2);
    float s = std::ldexp(1.0f, -e2);
    cblas_sscal((int)((size_t)n * b), s, Y, 1);
    ynorm2 *= (double)s * s;
    cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, b, b, n, 1.0f, V, n, Y, n, 0.0f, B, b);  // VᵀG V (b, b)
    if (!all_finite(B, (size_t)b * b)) return -1000;
    float nu = (float)(std::sqrt((double)n * ynorm2) * 5.96e-8);
    for (int j = 0; j < b; j++) B[(size_t)j * b + j] += nu;
    if (!nystrom || LAPACKE_spotrf_work(LAPACK_COL_MAJOR, 'U', b, B, b) != 0) {  // Rayleigh-Ritz on V instead
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, b, b, n, 1.0f, V, n, Y, n, 0.0f, B, b);
        return top_ritz_vectors(W, V, B, n, b, r1, Y, w, work, iwork);
    }
    cblas_saxpy((int)((size_t)n * b), nu, V, 1, Y, 1);  // Y + ν V (n, b)
    info = orth_into(V, Y, n, b, S1, S2, tau, work, shifted_passes, res, S1);  // V = Q, S1 = R (b, b)
    if (info != 0) return info;
    // T = R C⁻¹ (b, b) in S1, then T Tᵀ (lower) in B
    cblas_strsm(CblasColMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, b, b, 1.0f, B, b, S1, b);
    cblas_ssyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, 1.0f, S1, b, 0.0f, B, b);
    return top_ritz_vectors(W, V, B, n, b, r1, Y, w, work, iwork);
}

PracRefreshResult prac_refresh_cpu(float* P, const float* x, int N, int n, const SiteDims& d, bool refresh_q1,
                                   bool refresh_q2, bool had_basis, const PracDrawKey& key,
                                   const GramReducer* reduce_gram, int ld_x) {
    PracRefreshResult res;
    int r1 = d.r1, r2 = d.r2, r = d.r(), b = d.block(n);
    RefreshArena A(n, d);
    std::unique_ptr<float[]> arena(new float[A.total]);  // uninitialised: only the parts this call uses are touched
    res.workspace_bytes = A.total * sizeof(float);
    float* W = arena.get() + A.W;
    float *tau = arena.get() + A.tau, *work = arena.get() + A.work;
    int* iwork = reinterpret_cast<int*>(arena.get() + A.iwork);
    for (int i = 0; i < n; i++)  // the new P starts as the previous one (column-major)
        for (int j = 0; j < r; j++) W[(size_t)j * n + i] = P[(size_t)i * r + j];
    auto restore = [&](int c0, int c1) {  // columns [c0, c1) of W back to the previous P's
        for (int i = 0; i < n; i++)
            for (int j = c0; j < c1; j++) W[(size_t)j * n + i] = P[(size_t)i * r + j];
    };
    bool q1_changed = false;
    auto random_q1 = [&] {  // an orthonormal Q1 independent of x: the key's own stream, orthonormalized
        PracDrawKey k1 = key;
        k1.purpose = PRAC_DRAW_Q1_FALLBACK;
        gaussian_strided(W, n, r1, 1, (size_t)n, k1);
        orth_cm(W, n, r1, tau, work);
        q1_changed = true;
    };

    if (r1 > 0 && (refresh_q1 || !had_basis) && d.random_q1) {
        random_q1();  // a provisional basis (PracOptions::initial_spread): no Gram matrix, no solver
    } else if (r1 > 0 && (refresh_q1 || !had_basis)) {
        // G (n, n) = xᵀx accumulated in fp32, lower triangle (x row-major (N, n) at stride ld_x is column-major
        // (n, N) with leading dimension ld_x)
        float* G = arena.get() + A.G;
        cblas_ssyrk(CblasColMajor, CblasLower, CblasNoTrans, n, N, 1.0f, x, ld_x ? ld_x : n, 0.0f, G, n);
        if (reduce_gram) (*reduce_gram)(G, (size_t)n * n);
        int info = -1000;
        bool finite = true;
        for (int j = 0; j < n && finite; j++) finite = all_finite(G + (size_t)j * n + j, (size_t)(n - j));
        if (finite && b > 0) {
            int iters = had_basis ? d.subspace.warm_iters : d.subspace.cold_iters;
            info = subspace_q1(W, G, n, r1, b, had_basis, iters, d.subspace.nystrom, d.subspace.shifted_passes, key,
                               arena.get() + A.V, arena.get() + A.Y, arena.get() + A.B, arena.get() + A.S1,
                               arena.get() + A.S2, arena.get() + A.w, tau, work, iwork, &res);
        } else if (finite) {
            float* w = arena.get() + A.w;
            info = syevd_cm(G, n, w, work, iwork);  // eigenvector j is column j, eigenvalues ascending
            if (info == 0 && !all_finite(G, (size_t)n * n)) info = -1000;
            if (info == 0)
                for (int j = 0; j < r1; j++)
                    std::memcpy(W + (size_t)j * n, G + (size_t)(n - 1 - j) * n, (size_t)n * sizeof(float));
        }
        if (info == 0) {
            q1_changed = true;
        } else {
            restore(0, r1);
            res.q1_ok = false;
            res.message = format("Q1 refresh failed (%s info %d%s)", b > 0 ? "subspace" : "ssyevd", info,
                                 info == -1000 ? ", non-finite values" : "");
            if (!had_basis) {
                random_q1();  // no previous Q1: a random orthonormal Q1 keeps the estimator unbiased
                res.message += "; no previous basis, using a random Q1";
            } else {
                res.message += "; keeping the previous basis";
            }
        }
    }
    if (r2 > 0 && (refresh_q2 || q1_changed || !had_basis)) {
        float* Q2 = W + (size_t)r1 * n;
        res.q2_drawn = true;
        int info = draw_q2(Q2, W, n, r1, r2, key, arena.get() + A.t, arena.get() + A.S1, tau, work,
                           &res.q2_householder);
        if (info == 0) {
            float s = std::sqrt(d.k);
            for (size_t e = 0; e < (size_t)n * r2; e++) Q2[e] *= s;
        } else {
            res.q2_ok = false;
            std::string m = format("Q2 refresh failed (QR info %d)", info);
            if (q1_changed && had_basis) {
                restore(0, r);  // the old Q2 is not orthogonal to the new Q1: keep the whole previous basis
                m += "; keeping the previous Q1 and Q2";
            } else {
                restore(r1, r);
                m += "; keeping the previous Q2";
            }
            res.message += (res.message.empty() ? "" : "; ") + m;
        }
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < r; j++) P[(size_t)i * r + j] = W[(size_t)j * n + i];
    res.q1_changed = q1_changed && res.q2_ok;  // a failed Q2 after a new Q1 restored the whole previous basis
    return res;
}
