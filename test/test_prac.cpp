// Tests of PRAC's core (prac/prac.h, prac/philox.h): the draws, the ranks of a site, the refresh of a basis,
// the estimator and its operations.
//
//   1. Philox4x32-10 known-answer vectors (Random123) and the Gaussian draws built on it
//   2. prac_site_dims: rank rounding, overrides, pac / rac / prac, k, disabled classes, bad inputs
//   3. prac_refresh_cpu: Q1 = top right singular subspace, orthonormality, determinism, failure handling
//   4. the estimator X~ = X P Pᵀ over many Q2 draws: unbiasedness, variance = (k-1)·tail energy (exact),
//      RAC vs PRAC (the paper's Table 1), PAC's bias
//   5. the factored weight gradient, compress / reconstruct
//   (6, one ActSite on its own and the sites inside Llama / GPT-2, is test_prac_model.cpp; the helpers both
//   files use are in prac_test_util.h.)
//
// Statistics. Every random check uses fixed seeds (the run is deterministic); its tolerance is derived so that
// the check would fail with probability at most 1e-6 over the choice of seed if the code were right (stated at
// each check, together with the approximation used: normal approximation of a mean of many iid draws, or a
// Gaussian quadratic form for squared norms of such means). Two facts about Gaussian quadratic forms
// Q = Σ w_i Z_i² with w_i ≥ 0, Σ w_i = 1 (E Q = 1) are used for squared norms:
//   Székely & Bakirov (2003): for t ≥ 1.5365, P(Q ≥ t) ≤ P(Z² ≥ t) whatever the weights, so
//     P(Q ≥ 23.93) ≤ 1e-6 (23.93 = 4.8916², the two-sided 1e-6 normal quantile squared).
//   Laurent & Massart (2000), Lemma 1: P(Q ≥ 1 + 2|w|₂√x + 2|w|_∞x) ≤ e^-x and P(Q ≤ 1 - 2|w|₂√x) ≤ e^-x.
//
// The variance identity checked in 4(b) (our derivation, matching the paper's proof of its Theorem 2):
// with U an orthonormal basis of Q1's complement, Q2 = U·V where V is uniform on the Stiefel manifold
// St(n - r1, r2) (a Gaussian projected onto the complement and orthonormalized), E[Q2 Q2ᵀ] = (r2 / (n - r1))·UUᵀ.
// X~ - X = X(k Q2Q2ᵀ - UUᵀ), and since UUᵀ Q2 = Q2 and Q2ᵀQ2 = I,
//   (k Q2Q2ᵀ - UUᵀ)² = k² Q2Q2ᵀ - 2k Q2Q2ᵀ + UUᵀ,  and with k = (n - r1)/r2, E[Q2Q2ᵀ] = UUᵀ / k:
//   E[(k Q2Q2ᵀ - UUᵀ)²] = (k² / k - 2k / k + 1)·UUᵀ = (k - 1)·UUᵀ,
// so E||X~ - X||_F² = (k - 1)·||X UUᵀ||_F² = (k - 1)·||X - X Q1 Q1ᵀ||_F²: an equality for any fixed X and any
// orthonormal Q1 (the paper states it as a bound), and for RAC (r1 = 0, k = n/r2) it is (n/r2 - 1)·||X||_F².
//
// Runtime (OMP_NUM_THREADS=2): 13-25 s for this file and test_prac_model.cpp together, measured on 2 cores shared
// with other jobs (load 6-9), most of it in the model tests; the loops of thousands of tiny ops run
// single-threaded (see SingleThreaded).
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/cpu_backend.h"
#include "prac/philox.h"
#include "prac/prac.h"
#include "test/prac_test_util.h"
#include "test/q2_fallback_case.h"
#include "test/test_util.h"
#include "test/worst.h"  // worst_of

namespace {

constexpr double kEpsF = 5.9604644775390625e-8;  // fp32 unit roundoff 2^-24

// ---- small statistics helpers (the shared ones are in prac_test_util.h) ----

// upper p-quantile of chi-square(df), Wilson-Hilferty (relative error well below 1% for df >= 10)
double chi2_upper(double df, double p) {
    double z = z_upper(p), a = 2.0 / (9.0 * df);
    return df * std::pow(1 - a + z * std::sqrt(a), 3);
}
double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// ---- small dense helpers (row-major, double; the shared ones are in prac_test_util.h) ----

dvec to_d(const fvec& v) { return dvec(v.begin(), v.end()); }
double sq_dist(const dvec& a, const dvec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += (a[i] - b[i]) * (a[i] - b[i]);
    return s;
}

// max |AᵀB - δ·I| for A (n, a), B (n, b); identity = true subtracts I (a == b)
double max_gram_err(const dvec& A, int a, const dvec& B, int b, int n, bool identity) {
    if (a == 0 || b == 0) return 0;
    dvec G = dgemm(true, false, a, b, n, A, B);
    double e = 0;
    for (int i = 0; i < a; i++)
        for (int j = 0; j < b; j++) e = worst_of(e, std::fabs(G[(size_t)i * b + j] - (identity && i == j ? 1 : 0)));
    return e;
}
// ||A Aᵀ - B Bᵀ||_F for A, B (n, c) with orthonormal columns (difference of projectors)
double projector_dist(const dvec& A, const dvec& B, int n, int c) {
    dvec PA = dgemm(false, true, n, n, c, A, A), PB = dgemm(false, true, n, n, c, B, B);
    return std::sqrt(sq_dist(PA, PB));
}

// LAPACK dgesvd of the (N, n) double matrix: singular values (descending) and Vᵀ (n, n)
void svd_ref(const dvec& X, int N, int n, dvec& sigma, dvec& Vt) {
    dvec A = X, U(1), superb(std::max(1, std::min(N, n) - 1));
    sigma.assign(std::min(N, n), 0);
    Vt.assign((size_t)n * n, 0);
    ASSERT_EQ(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'A', N, n, A.data(), n, sigma.data(), U.data(), 1, Vt.data(), n,
                             superb.data()),
              0);
}
// the top-c right singular vectors as columns (n, c)
dvec top_right_vectors(const dvec& Vt, int n, int c) {
    dvec V1((size_t)n * c);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c; j++) V1[(size_t)i * c + j] = Vt[(size_t)j * n + i];
    return V1;
}
// ||X - X Q Qᵀ||_F² in double, Q (n, c) from the fp32 basis
double tail_energy(const dvec& X, int N, int n, const dvec& Q, int c) {
    if (c == 0) return sq_norm(X);
    dvec XQ = dgemm(false, false, N, c, n, X, Q), R = dgemm(false, true, N, n, c, XQ, Q);
    return sq_dist(X, R);
}

// the exact refresh (this file tests it and the estimator; test_prac_refresh.cpp tests the subspace refresh)
SiteDims dims(int r1, int r2, float k, PracRefresh refresh = PracRefresh::EXACT) {
    SiteDims d;
    d.refresh = refresh;
    d.compressed = true;
    d.r1 = r1;
    d.r2 = r2;
    d.k = k;
    return d;
}

// ================================================================================================
// 1. Philox and the Gaussian draws
// ================================================================================================

TEST(Philox, Random123KnownAnswerVectors) {
    struct Kat {
        uint32_t ctr[4], key[2], out[4];
    } kats[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (const Kat& k : kats) {
        Philox4x32 r = philox4x32_10(Philox4x32{{k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]}}, k.key[0], k.key[1]);
        for (int i = 0; i < 4; i++) EXPECT_EQ(r.v[i], k.out[i]) << "word " << i << " of counter " << std::hex << k.ctr[0];
    }
}

// The documented layout: element (i, j) of an (n, cols) draw is normal number i * cols + j of the key's stream,
// so any shape is a reshaped prefix of one long stream; and ld only moves rows apart.
TEST(PracGaussian, LayoutIsRowMajorPrefixOfOneStreamAndLdLeavesPaddingAlone) {
    PracDrawKey key{0x0123456789abcdefull, 3, 1, 5};
    const int total = 4 * 1000 + 3;  // not a multiple of 4: the last Philox block is used partially
    fvec flat(total);
    prac_gaussian_cpu(flat.data(), 1, total, total, key);
    for (int i = 0; i < total; i++) ASSERT_TRUE(std::isfinite(flat[i])) << i;

    for (auto [n, cols] : std::vector<std::pair<int, int>>{{1, 7}, {7, 1}, {13, 11}, {59, 17}, {1000, 4}}) {
        const int ld = cols + 5;
        const float sentinel = -12345.0f;
        fvec S((size_t)n * ld, sentinel);
        prac_gaussian_cpu(S.data(), n, cols, ld, key);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < cols; j++)
                ASSERT_EQ(S[(size_t)i * ld + j], flat[(size_t)i * cols + j]) << n << "x" << cols << " (" << i << "," << j << ")";
            for (int j = cols; j < ld; j++) ASSERT_EQ(S[(size_t)i * ld + j], sentinel) << "padding written at " << i << "," << j;
        }
    }
}

// Moments and distribution of one large draw. M = 2^20 values; each check at 1e-6 (normal approximation of
// means of M iid terms, which is excellent here: the terms have all moments).
TEST(PracGaussian, LargeDrawIsStandardNormal) {
    const int n = 1024, cols = 1024;
    const double M = (double)n * cols, z = z_two_sided(kFail);  // z = 4.89
    fvec S((size_t)n * cols);
    prac_gaussian_cpu(S.data(), n, cols, cols, PracDrawKey{42, 0, 0, 0});
    double m1 = 0, m2 = 0, m3 = 0, m4 = 0, lag1 = 0;
    for (size_t i = 0; i < S.size(); i++) {
        double x = S[i];
        m1 += x, m2 += x * x, m3 += x * x * x, m4 += x * x * x * x;
        if (i + 1 < S.size()) lag1 += x * S[i + 1];
    }
    m1 /= M, m2 /= M, m3 /= M, m4 /= M, lag1 /= M - 1;
    // mean: sd 1/sqrt(M); second moment: Var(Z²) = 2; third: Var(Z³) = 15; fourth: Var(Z⁴) = 105 - 9 = 96;
    // lag-1 product (covers the Box-Muller cos/sin pair and neighbouring Philox words): Var(Z Z') = 1
    EXPECT_LT(std::fabs(m1), z / std::sqrt(M)) << "mean";
    EXPECT_LT(std::fabs(m2 - 1), z * std::sqrt(2 / M)) << "E Z^2";
    EXPECT_LT(std::fabs(m3), z * std::sqrt(15 / M)) << "E Z^3";
    EXPECT_LT(std::fabs(m4 - 3), z * std::sqrt(96 / M)) << "E Z^4";
    EXPECT_LT(std::fabs(lag1), z * std::sqrt(1 / M)) << "lag-1 correlation";
    std::printf("[ stats    ] gaussian draw M=%.0f: mean %.2e  E Z^2 %.5f  E Z^3 %.2e  E Z^4 %.4f  lag-1 %.2e\n", M, m1,
                m2, m3, m4, lag1);

    // chi-square goodness of fit on 34 bins (edges -4 .. 4 step 0.25, plus two tails), upper 1e-6 quantile of
    // chi2(33) by Wilson-Hilferty
    std::vector<double> edges;
    for (int i = 0; i <= 32; i++) edges.push_back(-4 + 0.25 * i);
    std::vector<double> count(edges.size() + 1, 0);
    for (float x : S) count[std::upper_bound(edges.begin(), edges.end(), (double)x) - edges.begin()]++;
    double chi2 = 0;
    for (size_t b = 0; b < count.size(); b++) {
        double lo = b == 0 ? -INFINITY : edges[b - 1], hi = b == edges.size() ? INFINITY : edges[b];
        double expected = M * (normal_cdf(hi) - normal_cdf(lo));
        chi2 += (count[b] - expected) * (count[b] - expected) / expected;
    }
    double df = (double)count.size() - 1, bound = chi2_upper(df, kFail);
    EXPECT_LT(chi2, bound) << "chi-square goodness of fit, " << df << " dof";
    std::printf("[ stats    ] gaussian chi-square GOF %.1f on %.0f dof (1e-6 bound %.1f)\n", chi2, df, bound);
}

// Each part of the key selects its own stream; the same key gives the same draw bitwise.
TEST(PracGaussian, KeysSelectIndependentStreams) {
    const int n = 256, cols = 256;
    const double M = (double)n * cols;
    PracDrawKey base{42, 3, 1, 5};
    std::vector<std::pair<const char*, PracDrawKey>> keys = {
        {"base", base},
        {"seed low word", {43, 3, 1, 5}},
        {"seed high word", {42 + (1ull << 32), 3, 1, 5}},
        {"site", {42, 4, 1, 5}},
        {"layer", {42, 3, 2, 5}},
        {"refresh", {42, 3, 1, 6}},
        {"site and layer swapped", {42, 1, 3, 5}},
    };
    std::vector<fvec> draws;
    for (auto& [name, k] : keys) {
        draws.emplace_back((size_t)n * cols);
        prac_gaussian_cpu(draws.back().data(), n, cols, cols, k);
        fvec again((size_t)n * cols);
        prac_gaussian_cpu(again.data(), n, cols, cols, k);
        EXPECT_EQ(std::memcmp(again.data(), draws.back().data(), again.size() * sizeof(float)), 0) << name;
    }
    // independent streams: the sample correlation of two draws has sd 1/sqrt(M); Bonferroni over the pairs
    int pairs = (int)(keys.size() * (keys.size() - 1) / 2);
    double zb = z_two_sided(kFail / pairs);
    for (size_t a = 0; a < keys.size(); a++)
        for (size_t b = a + 1; b < keys.size(); b++) {
            double dot = 0;
            int equal = 0;
            for (size_t i = 0; i < draws[a].size(); i++) {
                dot += (double)draws[a][i] * draws[b][i];
                equal += draws[a][i] == draws[b][i];
            }
            EXPECT_LT(std::fabs(dot / M), zb / std::sqrt(M)) << keys[a].first << " vs " << keys[b].first;
            EXPECT_LT(equal, 4) << keys[a].first << " vs " << keys[b].first << ": identical elements";
        }
}

// ================================================================================================
// 2. Ranks of a site
// ================================================================================================

TEST(PracSiteDims, FractionsRoundDownToMultiplesOf8) {
    EXPECT_EQ(prac_round_rank(0.3f, 768), 224);
    EXPECT_EQ(prac_round_rank(0.2f, 768), 152);
    EXPECT_EQ(prac_round_rank(0.3f, 64), 16);
    EXPECT_EQ(prac_round_rank(0.2f, 64), 8);
    EXPECT_EQ(prac_round_rank(0.3f, 176), 48);
    EXPECT_EQ(prac_round_rank(0.2f, 352), 64);
    EXPECT_EQ(prac_round_rank(0.01f, 64), 8) << "at least 8";
    EXPECT_EQ(prac_round_rank(0.0f, 64), 0);
    EXPECT_EQ(prac_round_rank(-0.5f, 64), 0);
    // 0.42 of 1200 is 504, a multiple of 8: it stays 504 (the float 0.42f·1200 is 503.99998, whose floor gave 496)
    EXPECT_EQ(prac_round_rank(0.42f, 1200), 504);
    // every two-decimal fraction (as the flag parser reads "0.pp") of every width up to 20000, and every
    // three-decimal one of a few widths: floor(p·n / 800)·8 (floor(p·n / 8000)·8) in exact integer arithmetic, at
    // least 8. (The float product's floor missed 11 two-decimal fractions at the widths where p·n / 800 is whole.)
    int wrong = 0;
    std::string first;
    auto check = [&](int p, int scale, const std::vector<int>& widths) {
        const float frac = std::strtof(format("%.*f", scale == 100 ? 2 : 3, (double)p / scale).c_str(), nullptr);
        for (int n : widths) {
            const long exact = std::max(8L, (long)p * n / (8L * scale) * 8);
            const int got = prac_round_rank(frac, n);
            if (got != exact && wrong++ == 0)
                first = format("fraction %d/%d of width %d: %d, expected %ld", p, scale, n, got, exact);
        }
    };
    std::vector<int> every(20000 - 7);
    std::iota(every.begin(), every.end(), 8);
    for (int p = 1; p < 100; p++) check(p, 100, every);
    for (int p = 1; p < 1000; p++) check(p, 1000, {64, 768, 1000, 1001, 1200, 2048, 4096, 5461, 8000, 10922});
    EXPECT_EQ(wrong, 0) << "first: " << first;

    PracOptions o = opts(PracMode::PRAC);
    SiteDims lin = prac_site_dims(o, SiteClass::LINEAR, 768, "ln1"), non = prac_site_dims(o, SiteClass::NONLINEAR, 768, "resid");
    EXPECT_TRUE(lin.compressed);
    EXPECT_EQ(lin.r1, 224);
    EXPECT_EQ(lin.r2, 224);
    EXPECT_FLOAT_EQ(lin.k, (768.0f - 224) / 224);
    EXPECT_EQ(non.r1, 152);
    EXPECT_EQ(non.r2, 152);
    EXPECT_FLOAT_EQ(non.k, (768.0f - 152) / 152);
    EXPECT_EQ(lin.r(), 448);
}

TEST(PracSiteDims, AbsoluteRanksOverrideFractions) {
    PracOptions o = opts(PracMode::PRAC);
    o.linear_r1_abs = 40;
    o.linear_r2_abs = 20;  // absolute ranks are not rounded
    o.nonlinear_r1_abs = 0;
    o.nonlinear_r2_abs = 24;
    SiteDims lin = prac_site_dims(o, SiteClass::LINEAR, 768, "ln1");
    EXPECT_EQ(lin.r1, 40);
    EXPECT_EQ(lin.r2, 20);
    EXPECT_FLOAT_EQ(lin.k, (768.0f - 40) / 20);
    SiteDims non = prac_site_dims(o, SiteClass::NONLINEAR, 768, "fch");
    EXPECT_EQ(non.r1, 0) << "an absolute 0 overrides the fraction";
    EXPECT_EQ(non.r2, 24);
    EXPECT_FLOAT_EQ(non.k, 768.0f / 24);
}

TEST(PracSiteDims, ModesPacRacPracAndKMult) {
    PracOptions o = opts(PracMode::PAC);
    SiteDims pac = prac_site_dims(o, SiteClass::LINEAR, 768, "ln1");
    EXPECT_TRUE(pac.compressed);
    EXPECT_EQ(pac.r1, 448) << "pac: r1 = r1 + r2";
    EXPECT_EQ(pac.r2, 0);
    EXPECT_EQ(pac.r(), 448);

    o.mode = PracMode::RAC;
    SiteDims rac = prac_site_dims(o, SiteClass::NONLINEAR, 768, "resid");
    EXPECT_EQ(rac.r1, 0);
    EXPECT_EQ(rac.r2, 304) << "rac: r2 = r1 + r2";
    EXPECT_FLOAT_EQ(rac.k, 768.0f / 304) << "rac: k = n / r2";

    for (float km : {0.5f, 1.0f, 2.0f}) {
        o.k_mult = km;
        o.mode = PracMode::PRAC;
        EXPECT_FLOAT_EQ(prac_site_dims(o, SiteClass::LINEAR, 768, "ln1").k, km * (768.0f - 224) / 224);
        o.mode = PracMode::RAC;
        EXPECT_FLOAT_EQ(prac_site_dims(o, SiteClass::LINEAR, 768, "ln1").k, km * 768.0f / 448);
    }
}

TEST(PracSiteDims, DisabledClassesAndModeNoneAreNotCompressed) {
    for (PracMode m : {PracMode::PAC, PracMode::RAC, PracMode::PRAC}) {
        PracOptions o = opts(m);
        o.linear = false;
        EXPECT_FALSE(prac_site_dims(o, SiteClass::LINEAR, 768, "ln1").compressed);
        EXPECT_TRUE(prac_site_dims(o, SiteClass::NONLINEAR, 768, "resid").compressed);
        o.linear = true;
        o.nonlinear = false;
        EXPECT_TRUE(prac_site_dims(o, SiteClass::LINEAR, 768, "ln1").compressed);
        EXPECT_FALSE(prac_site_dims(o, SiteClass::NONLINEAR, 768, "resid").compressed);
    }
    PracOptions none = opts(PracMode::NONE);
    SiteDims d = prac_site_dims(none, SiteClass::LINEAR, 768, "ln1");
    EXPECT_FALSE(d.compressed);
    EXPECT_EQ(d.r(), 0);
    EXPECT_EQ(prac_mode_parse("prac"), PracMode::PRAC);
    EXPECT_EQ(prac_mode_parse("none"), PracMode::NONE);
    EXPECT_THROW(prac_mode_parse("PRAC!"), UserError);
}

// fn must throw UserError whose message contains every one of `parts`
void expect_user_error(const std::function<void()>& fn, const std::vector<std::string>& parts, const std::string& what) {
    try {
        fn();
        ADD_FAILURE() << what << ": no exception";
    } catch (const UserError& e) {
        std::string m = e.what();
        for (const std::string& p : parts) EXPECT_NE(m.find(p), std::string::npos) << what << ": \"" << m << "\" lacks \"" << p << "\"";
    }
}

TEST(PracSiteDims, BadInputsThrowNamingTheSite) {
    auto at = [](PracOptions o, SiteClass c, int n, const char* site) {
        return [=] { prac_site_dims(o, c, n, site); };
    };
    PracOptions o = opts(PracMode::PRAC);
    o.linear_r1_abs = 32;
    o.linear_r2_abs = 32;
    expect_user_error(at(o, SiteClass::LINEAR, 64, "fch_act"), {"fch_act", "64"}, "r1 + r2 == width");
    o.linear_r1_abs = 8;
    o.linear_r2_abs = 100;
    expect_user_error(at(o, SiteClass::LINEAR, 64, "ln2"), {"ln2"}, "r2 above width");
    PracOptions f = opts(PracMode::PRAC);
    f.nonlinear_r1 = 0.6f;
    f.nonlinear_r2 = 0.5f;
    expect_user_error(at(f, SiteClass::NONLINEAR, 64, "resid_mid"), {"resid_mid"}, "fractions summing above 1");
    f.mode = PracMode::PAC;
    expect_user_error(at(f, SiteClass::NONLINEAR, 64, "resid_mid"), {"resid_mid"}, "pac ranks above width");
    // width 16: every fraction's rank is 8 (the least), so the hint names absolute ranks (it said to lower the
    // fractions, which changes nothing); where a lower fraction helps, the hint says that
    PracOptions narrow = opts(PracMode::PRAC);
    narrow.nonlinear_r1 = narrow.nonlinear_r2 = 0.01f;
    expect_user_error(at(narrow, SiteClass::NONLINEAR, 16, "fch"),
                      {"r1 = 8 + r2 = 8", "a fraction's rank is at least 8", "--prac-nonlinear-ranks R1,R2"},
                      "fractions at the least rank");
    expect_user_error(at(f, SiteClass::NONLINEAR, 64, "resid_mid"), {"lower the nonlinear rank fractions"},
                      "fractions above the least rank");

    PracOptions p = opts(PracMode::PRAC);
    p.linear_r2_abs = 0;
    expect_user_error(at(p, SiteClass::LINEAR, 768, "ln1"), {"ln1", "r2"}, "prac with r2 = 0");

    PracOptions r = opts(PracMode::RAC);
    r.nonlinear_r1_abs = 0;
    r.nonlinear_r2_abs = 0;
    expect_user_error(at(r, SiteClass::NONLINEAR, 768, "fch"), {"fch"}, "rac with total rank 0");
    r.mode = PracMode::PAC;
    expect_user_error(at(r, SiteClass::NONLINEAR, 768, "fch"), {"fch"}, "pac with total rank 0");

    for (float km : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()}) {
        PracOptions k = opts(PracMode::PRAC);
        k.k_mult = km;
        expect_user_error(at(k, SiteClass::LINEAR, 768, "ln1"), {"k-mult", "ln1"}, "k_mult " + std::to_string(km));
    }
}

// ================================================================================================
// 3. Refresh of one basis
// ================================================================================================

struct RefreshCase {
    int N = 128, n = 64, r1 = 16, r2 = 16;
    Synth S = make_synth(128, 64, dominant_spectrum(64, 16), 1001);
    SiteDims d = dims(16, 16, (64.0f - 16) / 16);
    int r() const { return r1 + r2; }
};

TEST(PracRefresh, Q1IsTheTopRightSingularSubspaceAndTheBasesAreOrthonormal) {
    RefreshCase c;
    fvec P((size_t)c.n * c.r(), 0.0f);
    PracRefreshResult res = prac_refresh_cpu(P.data(), c.S.X.data(), c.N, c.n, c.d, true, true, false, {7, 1, 0, 0});
    ASSERT_TRUE(res.q1_ok && res.q2_ok) << res.message;
    for (float v : P) ASSERT_TRUE(std::isfinite(v));

    dvec sigma, Vt;
    svd_ref(c.S.Xd, c.N, c.n, sigma, Vt);
    for (int i = 0; i < c.n; i++) EXPECT_NEAR(sigma[i], c.S.s[i], 1e-5 * c.S.s[0]) << "synthetic spectrum, sigma " << i;

    dvec Q1 = block(P.data(), c.n, c.r(), 0, c.r1), Q2 = block(P.data(), c.n, c.r(), c.r1, c.r2, 1 / std::sqrt((double)c.d.k));
    dvec V1 = top_right_vectors(Vt, c.n, c.r1);
    // Davis-Kahan: ||sinΘ||_F <= ||E||_F / gap, with E the fp32 error of the Gram matrix (<= N·eps·||X||_F² entrywise
    // summed) plus the eigensolver's backward error (O(n)·eps·||G||); gap = σ16² - σ17².
    double gap = sigma[c.r1 - 1] * sigma[c.r1 - 1] - sigma[c.r1] * sigma[c.r1];
    double tol_proj = std::sqrt(2.0) * (c.N + c.n) * kEpsF * sq_norm(c.S.Xd) / gap;
    double pd = projector_dist(Q1, V1, c.n, c.r1);
    EXPECT_LT(pd, tol_proj) << "||Q1Q1ᵀ - V1V1ᵀ||_F";
    // orthonormality to fp32 precision: Householder QR / symmetric eigensolvers give O(n)·eps
    double tol_orth = c.n * kEpsF;
    double e11 = max_gram_err(Q1, c.r1, Q1, c.r1, c.n, true), e22 = max_gram_err(Q2, c.r2, Q2, c.r2, c.n, true),
           e12 = max_gram_err(Q1, c.r1, Q2, c.r2, c.n, false);
    EXPECT_LT(e11, tol_orth) << "Q1ᵀQ1 = I";
    EXPECT_LT(e22, tol_orth) << "Q2ᵀQ2 = I (Q2 block / sqrt(k))";
    EXPECT_LT(e12, tol_orth) << "Q1ᵀQ2 = 0";
    std::printf("[ stats    ] refresh: ||Q1Q1'-V1V1'||_F %.2e (bound %.2e); max|Q1'Q1-I| %.2e  max|Q2'Q2-I| %.2e  "
                "max|Q1'Q2| %.2e (tol %.2e)\n", pd, tol_proj, e11, e22, e12, tol_orth);
}

TEST(PracRefresh, SameKeySameBasisBitwiseAndPartialRefreshes) {
    RefreshCase c;
    size_t sz = (size_t)c.n * c.r();
    fvec A(sz, 0.0f), B(sz, 7.0f);  // whatever P held before: a first refresh overwrites all of it
    PracDrawKey key{7, 1, 0, 0};
    prac_refresh_cpu(A.data(), c.S.X.data(), c.N, c.n, c.d, true, true, false, key);
    prac_refresh_cpu(B.data(), c.S.X.data(), c.N, c.n, c.d, true, true, false, key);
    EXPECT_EQ(std::memcmp(A.data(), B.data(), sz * sizeof(float)), 0) << "same key, same X: bitwise the same P";

    auto same_cols = [&](const fvec& X, const fvec& Y, int c0, int cnt) {
        for (int i = 0; i < c.n; i++)
            if (std::memcmp(&X[(size_t)i * c.r() + c0], &Y[(size_t)i * c.r() + c0], cnt * sizeof(float))) return false;
        return true;
    };
    // nothing due: P unchanged
    fvec C = A;
    prac_refresh_cpu(C.data(), c.S.X.data(), c.N, c.n, c.d, false, false, true, {7, 1, 0, 1});
    EXPECT_EQ(C, A);
    // Q2 only: Q1 bitwise kept, Q2 redrawn, still orthonormal and orthogonal to Q1
    prac_refresh_cpu(C.data(), c.S.X.data(), c.N, c.n, c.d, false, true, true, {7, 1, 0, 1});
    EXPECT_TRUE(same_cols(C, A, 0, c.r1));
    EXPECT_FALSE(same_cols(C, A, c.r1, c.r2));
    dvec Q1 = block(C.data(), c.n, c.r(), 0, c.r1), Q2 = block(C.data(), c.n, c.r(), c.r1, c.r2, 1 / std::sqrt((double)c.d.k));
    EXPECT_LT(max_gram_err(Q2, c.r2, Q2, c.r2, c.n, true), c.n * kEpsF);
    EXPECT_LT(max_gram_err(Q1, c.r1, Q2, c.r2, c.n, false), c.n * kEpsF);
    // Q1 only, on a different X: Q1 recomputed, and Q2 redrawn with it (it must stay in Q1's complement)
    Synth S2 = make_synth(c.N, c.n, dominant_spectrum(c.n, c.r1), 2002);
    fvec D = A;
    prac_refresh_cpu(D.data(), S2.X.data(), c.N, c.n, c.d, true, false, true, {7, 1, 0, 1});
    EXPECT_FALSE(same_cols(D, A, 0, c.r1));
    EXPECT_FALSE(same_cols(D, A, c.r1, c.r2)) << "Q2 must be redrawn whenever Q1 changes";
    Q1 = block(D.data(), c.n, c.r(), 0, c.r1);
    Q2 = block(D.data(), c.n, c.r(), c.r1, c.r2, 1 / std::sqrt((double)c.d.k));
    EXPECT_LT(max_gram_err(Q1, c.r1, Q2, c.r2, c.n, false), c.n * kEpsF);
}

TEST(PracRefresh, NonFiniteInputKeepsThePreviousBasis) {
    RefreshCase c;
    size_t sz = (size_t)c.n * c.r();
    fvec P(sz);
    ASSERT_TRUE(prac_refresh_cpu(P.data(), c.S.X.data(), c.N, c.n, c.d, true, true, false, {7, 1, 0, 0}).q1_ok);
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        fvec X = c.S.X;
        X[77] = bad;
        fvec Q = P;
        PracRefreshResult res = prac_refresh_cpu(Q.data(), X.data(), c.N, c.n, c.d, true, false, true, {7, 1, 0, 1});
        EXPECT_FALSE(res.q1_ok);
        EXPECT_TRUE(res.q2_ok);
        EXPECT_NE(res.message.find("Q1"), std::string::npos) << res.message;
        EXPECT_EQ(Q, P) << "Q1 failed and Q2 was not due: the whole basis is kept bitwise";
        std::printf("[ message  ] %s\n", res.message.c_str());
        // with Q2 due as well: Q1 kept, Q2 redrawn (it comes from the Gaussian, not from X) in Q1's complement
        Q = P;
        res = prac_refresh_cpu(Q.data(), X.data(), c.N, c.n, c.d, true, true, true, {7, 1, 0, 1});
        EXPECT_FALSE(res.q1_ok);
        EXPECT_TRUE(res.q2_ok) << res.message;
        dvec Q1 = block(Q.data(), c.n, c.r(), 0, c.r1), Q1old = block(P.data(), c.n, c.r(), 0, c.r1);
        EXPECT_EQ(Q1, Q1old);
        dvec Q2 = block(Q.data(), c.n, c.r(), c.r1, c.r2, 1 / std::sqrt((double)c.d.k));
        EXPECT_LT(max_gram_err(Q1, c.r1, Q2, c.r2, c.n, false), c.n * kEpsF);
        EXPECT_LT(max_gram_err(Q2, c.r2, Q2, c.r2, c.n, true), c.n * kEpsF);
    }
}

// The Q2 draw projects its Gaussian S (n, r2) out of Q1 once where the complement is roomy
// (prac_q2_projection_passes: PRAC's ranks) and twice where it is nearly square or Q1 takes most of the space, then
// orthonormalizes by CholQR2. Q2 must be orthonormal to O(u) and orthogonal to Q1 to O(u·κ), κ the condition number
// of the projected draw (I - Q1Q1ᵀ) S (float64 SVD here): any QR amplifies what rounding leaves in span(Q1) by
// ‖R⁻¹‖, Householder as much as CholQR (the former method measured the same on these draws). κ is a few for
// PRAC's ranks and reaches 10⁴ only when r2 nearly fills the complement (r1 + r2 = n: no compression). Measured:
// at most 2 u·κ; bound 32 (without the projection: 10⁴-10⁶ u·κ; a single pass where the rule takes two stays near
// 4 u·κ here, but FullRankBasisReconstructsX then fails).
TEST(PracRefresh, Q2IsOrthonormalAndOrthogonalToQ1ForEveryShape) {
    const int N = 512, n = 256;
    Synth S = make_synth(N, n, dominant_spectrum(n, 64), 6006);
    struct Shape {
        int r1, r2;
    };
    for (Shape sh : std::vector<Shape>{{72, 72}, {128, 64}, {128, 128}, {192, 32}, {200, 56}, {0, 128}, {24, 232}}) {
        SiteDims d = dims(sh.r1, sh.r2, (float)(n - sh.r1) / sh.r2);
        int r = d.r();
        fvec P((size_t)n * r, 0.0f);
        ASSERT_TRUE(prac_refresh_cpu(P.data(), S.X.data(), N, n, d, true, true, false, {9, 1, 0, 0}).q2_ok);
        dvec Q1 = block(P.data(), n, r, 0, sh.r1);
        double worst22 = 0, worst12 = 0, kappa_max = 0;  // worst12 relative to u·κ
        for (uint32_t draw = 1; draw <= 6; draw++) {
            PracDrawKey key{9, 1, 0, draw};
            PracRefreshResult res = prac_refresh_cpu(P.data(), S.X.data(), N, n, d, false, true, true, key);
            ASSERT_TRUE(res.q2_ok) << res.message;
            dvec Q2 = block(P.data(), n, r, sh.r1, sh.r2, 1 / std::sqrt((double)d.k));
            // the draw, projected in float64: (I - Q1 Q1ᵀ) S, its condition number
            fvec Sf((size_t)n * sh.r2);
            prac_gaussian_cpu(Sf.data(), n, sh.r2, sh.r2, key);
            dvec Sd = to_d(Sf);
            if (sh.r1 > 0) {
                dvec T = dgemm(true, false, sh.r1, sh.r2, n, Q1, Sd);  // Q1ᵀ S (r1, r2)
                dvec QT = dgemm(false, false, n, sh.r2, sh.r1, Q1, T);
                for (size_t e = 0; e < Sd.size(); e++) Sd[e] -= QT[e];
            }
            dvec sigma, Vt;
            svd_ref(Sd, n, sh.r2, sigma, Vt);
            double kappa = sigma.front() / sigma.back();
            kappa_max = std::max(kappa_max, kappa);
            worst22 = worst_of(worst22, max_gram_err(Q2, sh.r2, Q2, sh.r2, n, true) / kEpsF);
            if (sh.r1 > 0) worst12 = worst_of(worst12, max_gram_err(Q1, sh.r1, Q2, sh.r2, n, false) / (kEpsF * kappa));
        }
        std::printf("[ stats    ] n=%d r1=%d r2=%d: %d projection(s); over 6 draws: |Q2'Q2-I| <= %.1f u, |Q1'Q2| <= "
                    "%.2f u·kappa, kappa <= %.3g\n", n, sh.r1, sh.r2, prac_q2_projection_passes(n, sh.r1, sh.r2),
                    worst22, worst12, kappa_max);
        EXPECT_LT(worst22, 32) << "r1=" << sh.r1 << " r2=" << sh.r2 << ": Q2ᵀQ2 = I to 32 u";
        EXPECT_LT(worst12, 32) << "r1=" << sh.r1 << " r2=" << sh.r2 << ": Q1ᵀQ2 = 0 to 32 u·kappa";
    }
}

// The Q2 draw's fallback (test/q2_fallback_case.h): a key whose projected draw has κ in [8000, 16000) fails CholQR2
// and is orthonormalized by Householder QR instead (PracRefreshResult::q2_householder), a key with κ < 100 is not;
// both leave Q1 bit for bit, and give Q2 orthonormal to 32 u and orthogonal to Q1 to 32 u·κ (the bound of the test
// above: any QR amplifies the input's rounding by ‖R⁻¹‖).
TEST(PracRefresh, Q2DrawFallsBackToHouseholderOnANearSingularDraw) {
    namespace q = q2_fallback;
    const int N = 16;
    const fvec x((size_t)N * q::n, 0.0f);  // not read: only Q2 is drawn
    const SiteDims d = dims(q::r1, q::r2, 1.0f);
    for (bool ill : {false, true}) {
        bool found = false;
        const PracDrawKey key = ill ? q::find_key(8000, 16000, &found) : q::find_key(1, 100, &found);
        ASSERT_TRUE(found) << "no key of the search has the wanted condition number";
        const double kappa = q::kappa(key);
        fvec P = q::basis();
        const fvec before = P;
        PracRefreshResult res = prac_refresh_cpu(P.data(), x.data(), N, q::n, d, false, true, true, key);
        const std::string what = "draw " + std::to_string(key.refresh) + ", kappa " + std::to_string(kappa);
        EXPECT_TRUE(res.q2_ok && res.q2_drawn && res.message.empty()) << what << ": " << res.message;
        EXPECT_EQ(res.q2_householder, ill) << what;
        for (int i = 0; i < q::n; i++)
            for (int j = 0; j < q::r1; j++) EXPECT_EQ(P[(size_t)i * q::r + j], before[(size_t)i * q::r + j]) << what;
        dvec Q1 = block(P.data(), q::n, q::r, 0, q::r1), Q2 = block(P.data(), q::n, q::r, q::r1, q::r2);
        const double e22 = max_gram_err(Q2, q::r2, Q2, q::r2, q::n, true) / kEpsF,
                     e12 = max_gram_err(Q1, q::r1, Q2, q::r2, q::n, false) / (kEpsF * kappa);
        std::printf("[ stats    ] %s: householder %d, |Q2'Q2-I| = %.2f u, |Q1'Q2| = %.3f u·kappa\n", what.c_str(),
                    res.q2_householder, e22, e12);
        EXPECT_LT(e22, 32) << what;
        EXPECT_LT(e12, 32) << what;
    }
}

// With no previous basis a failed Q1 falls back to a random orthonormal Q1; Q2 must then be an independent
// uniform draw in its complement (the estimator is unbiased for any Q1 only if Q2 is independent of it).
// r1 == r2 is the default (0.3 / 0.3 and 0.2 / 0.2 of the width).
TEST(PracRefresh, FirstRefreshFailureFallsBackToARandomOrthonormalQ1) {
    for (auto [r1, r2] : std::vector<std::pair<int, int>>{{16, 16}, {16, 24}}) {
        const int N = 128, n = 64, r = r1 + r2;
        SiteDims d = dims(r1, r2, (float)(n - r1) / r2);
        fvec X((size_t)N * n, 1.0f);
        X[3] = std::numeric_limits<float>::quiet_NaN();
        fvec P((size_t)n * r, 0.0f);
        PracDrawKey key{7, 2, 1, 0};
        PracRefreshResult res = prac_refresh_cpu(P.data(), X.data(), N, n, d, true, true, false, key);
        EXPECT_FALSE(res.q1_ok);
        EXPECT_TRUE(res.q2_ok) << res.message;
        EXPECT_NE(res.message.find("random"), std::string::npos) << res.message;
        for (float v : P) ASSERT_TRUE(std::isfinite(v));
        dvec Q1 = block(P.data(), n, r, 0, r1), Q2 = block(P.data(), n, r, r1, r2, 1 / std::sqrt((double)d.k));
        double e11 = max_gram_err(Q1, r1, Q1, r1, n, true), e22 = max_gram_err(Q2, r2, Q2, r2, n, true),
               e12 = max_gram_err(Q1, r1, Q2, r2, n, false);
        EXPECT_LT(e11, n * kEpsF) << "r1=" << r1 << " r2=" << r2 << ": fallback Q1 orthonormal";
        EXPECT_LT(e22, n * kEpsF) << "r1=" << r1 << " r2=" << r2 << ": Q2 orthonormal";
        EXPECT_LT(e12, n * kEpsF) << "r1=" << r1 << " r2=" << r2 << ": Q1ᵀQ2 = 0";
        // Independence of the fallback Q1 from Q2's Gaussian S (n, r2) drawn with the same key: for independent
        // draws ||(I - Q1Q1ᵀ)S||² / ||S||² = A / (A + B) with A ~ chi2((n - r1)·r2), B ~ chi2(r1·r2), mean
        // (n - r1)/n = 0.75; it falls below 0.5 only if A < B, whose mean difference 512 (r2 = 16) is 11 sd away
        // (probability far below 1e-6).
        fvec S((size_t)n * r2);
        prac_gaussian_cpu(S.data(), n, r2, r2, key);
        dvec Sd = to_d(S);
        dvec QtS = dgemm(true, false, r1, r2, n, Q1, Sd);
        double outside = 1 - sq_norm(QtS) / sq_norm(Sd);
        EXPECT_GT(outside, 0.5) << "r1=" << r1 << " r2=" << r2
                                << ": the fallback Q1 reuses the Gaussian stream of Q2's draw (share of Q2's S outside "
                                   "span(Q1) is " << outside << ", expected ~" << (double)(n - r1) / n << ")";
        std::printf("[ stats    ] fallback r1=%d r2=%d: |Q1'Q1-I| %.1e |Q2'Q2-I| %.1e |Q1'Q2| %.1e; share of Q2's "
                    "Gaussian outside span(Q1) %.4f (independent: ~%.2f)\n", r1, r2, e11, e22, e12, outside,
                    (double)(n - r1) / n);
    }
}

// ================================================================================================
// 4. The estimator over many Q2 draws (Q1 fixed)
// ================================================================================================

struct DrawStats {
    int K = 0;
    double tail = 0;           // ||X - X Q1 Q1ᵀ||_F² for the fixed (fp32) Q1, in double
    double predicted = 0;      // (k - 1)·tail
    double mean_err2 = 0;      // mean over draws of ||X~ - X||_F²
    double sd_err2 = 0;        // its per-draw standard deviation
    double bias2 = 0;          // ||mean(X~) - X||_F²
    double max_z = 0;          // largest per-entry |mean - X| / (sd / sqrt(K))
    double min_err2 = INFINITY, max_err2 = 0;  // extremes of ||X~ - X||_F² over the draws
    // t = <X~ - X, X - X Q1 Q1ᵀ> per draw: E[X~] - X = (k·r2/(n - r1) - 1)·(X - X Q1 Q1ᵀ), so E t = (k·r2/(n - r1) -
    // 1)·tail (0 when unbiased); a bias orthogonal to X - X Q1 Q1ᵀ does not move it
    double mean_t = 0, sd_t = 0;  // its mean and per-draw standard deviation
    // Rounding: a first-order bound on ||fl(X~) - X P Pᵀ||_F for the fp32 compress + reconstruct:
    // |fl(XP) - XP| <= n·eps·|X||P| and |fl(Xc Pᵀ) - Xc Pᵀ| <= r·eps·|Xc||P|ᵀ, so in Frobenius norm
    // delta <= (n + r)·eps·||X||_F·||P||_F², ||P||_F² = r1 + k·r2. It moves each ||X~ - X|| by at most delta,
    // hence a mean of ||X~ - X||² by at most 2·sqrt(mean)·delta + delta² (Cauchy-Schwarz).
    double delta = 0;
    double floor_err2(double mean) const { return 2 * std::sqrt(mean) * delta + delta * delta; }
    // ... and each t by at most delta·sqrt(tail) (Cauchy-Schwarz), so their mean too
    double floor_t() const { return delta * std::sqrt(tail); }
    // two-sided 1e-6 half-width of mean_t around E t (normal approximation, the empirical per-draw sd) plus rounding
    double half_t() const { return z_two_sided(kFail) * sd_t / std::sqrt((double)K) + floor_t(); }
    // the 1e-6 bound on ||mean(X~) - X||² of an unbiased estimator (Székely-Bakirov on Var/K), plus rounding
    double bias_bound(double var) const {
        double b = std::sqrt(sb_factor() * var / K) + delta;
        return b * b;
    }
};

// K draws of X~ = compress + reconstruct with Q2 redrawn each time (key refresh index 1 .. K), Q1 fixed by one
// initial refresh. Accumulates in double.
DrawStats run_draws(const Synth& S, const SiteDims& d, int K, uint64_t seed) {
    SingleThreaded one;
    const int N = S.N, n = S.n, r = d.r();
    fvec P((size_t)n * r), xc((size_t)N * r), xt((size_t)N * n);
    PracRefreshResult res = prac_refresh_cpu(P.data(), S.X.data(), N, n, d, true, true, false, {seed, 9, 0, 0});
    EXPECT_TRUE(res.q1_ok && res.q2_ok) << res.message;
    DrawStats st;
    st.K = K;
    const dvec Q1 = block(P.data(), n, r, 0, d.r1);  // (n, r1)
    st.tail = tail_energy(S.Xd, N, n, Q1, d.r1);
    dvec tail_part = S.Xd;  // (N, n) X - X Q1 Q1ᵀ
    if (d.r1 > 0) {
        dvec XQQ = dgemm(false, true, N, n, d.r1, dgemm(false, false, N, d.r1, n, S.Xd, Q1), Q1);
        for (size_t i = 0; i < tail_part.size(); i++) tail_part[i] -= XQQ[i];
    }
    st.predicted = ((double)d.k - 1) * st.tail;
    st.delta = (n + r) * kEpsF * std::sqrt(sq_norm(S.Xd)) * (d.r1 + (double)d.k * d.r2);
    dvec sum((size_t)N * n, 0), sumsq((size_t)N * n, 0);
    double s1 = 0, s2 = 0, t1 = 0, t2 = 0;
    for (int j = 0; j < K; j++) {
        if (d.r2 > 0) prac_refresh_cpu(P.data(), S.X.data(), N, n, d, false, true, true, {seed, 9, 0, (uint64_t)j + 1});
        prac_compress_cpu(xc.data(), S.X.data(), P.data(), N, n, r);
        prac_reconstruct_cpu(xt.data(), xc.data(), P.data(), N, n, r);
        double e = 0, t = 0;
        for (size_t i = 0; i < xt.size(); i++) {
            double dlt = (double)xt[i] - S.Xd[i];
            e += dlt * dlt;
            t += dlt * tail_part[i];
            sum[i] += dlt;
            sumsq[i] += dlt * dlt;
        }
        s1 += e;
        s2 += e * e;
        t1 += t;
        t2 += t * t;
        st.min_err2 = std::min(st.min_err2, e);
        st.max_err2 = std::max(st.max_err2, e);
    }
    st.mean_err2 = s1 / K;
    st.sd_err2 = std::sqrt(std::max(0.0, (s2 - s1 * s1 / K) / (K - 1)));
    st.mean_t = t1 / K;
    st.sd_t = std::sqrt(std::max(0.0, (t2 - t1 * t1 / K) / (K - 1)));
    for (size_t i = 0; i < sum.size(); i++) {
        double m = sum[i] / K, var = (sumsq[i] - sum[i] * sum[i] / K) / (K - 1);
        st.bias2 += m * m;
        if (var > 0) st.max_z = std::max(st.max_z, std::fabs(m) / std::sqrt(var / K));
    }
    return st;
}

struct EstimatorCase {
    static constexpr int N = 128, n = 64, top = 16;
    Synth S = make_synth(N, n, dominant_spectrum(n, top), 3003);
};

// (a) E[X~] = X and (b) E||X~ - X||² = (k - 1)·||X - XQ1Q1ᵀ||², with the paper's default-like ranks r1 = r2 = 16.
TEST(PracEstimator, UnbiasedWithVarianceExactlyKMinus1TimesTailEnergy) {
    EstimatorCase c;
    const int K = 4000;
    SiteDims d = dims(16, 16, (c.n - 16.0f) / 16);  // k = 3
    DrawStats st = run_draws(c.S, d, K, 11);

    // (a) mean(X~) - X is a mean of K iid zero-mean terms with E||.||² = Var / K; as a Gaussian quadratic form
    // (CLT) Székely-Bakirov bounds it by 23.93·Var/K at 1e-6, whatever the covariance (plus fp32 rounding).
    double bound_a = st.bias_bound(st.predicted);
    EXPECT_LT(st.bias2, bound_a) << "||mean(X~) - X||²";
    // per entry: z = mean / (sd / sqrt(K)) with the empirical sd, two-sided, Bonferroni over N·n entries at 1e-6
    // (normal approximation of a mean of 4000 bounded terms)
    double zb = z_two_sided(kFail / (c.N * c.n));
    EXPECT_LT(st.max_z, zb) << "largest per-entry z-score of mean(X~) - X";
    // and along X - X Q1 Q1ᵀ, where a wrong k moves the mean (TheUnbiasednessCheckDetectsAWrongK): E t = 0
    EXPECT_NEAR(st.mean_t, 0.0, st.half_t()) << "mean of <X~ - X, X - X Q1 Q1ᵀ>";

    // (b) |mean - (k-1)·tail| <= z·sd/sqrt(K) (two-sided 1e-6, normal approximation; the empirical per-draw sd),
    // plus the rounding floor of fp32 X~ (the identity is exact for exact arithmetic)
    double z = z_two_sided(kFail), half = z * st.sd_err2 / std::sqrt((double)K) + st.floor_err2(st.predicted);
    EXPECT_NEAR(st.mean_err2, st.predicted, half) << "E||X~ - X||² vs (k - 1)·tail";
    std::printf("[ stats    ] PRAC r1=16 r2=16 k=3, K=%d: E||X~-X||² measured %.4f, predicted (k-1)·tail = %.4f "
                "(tail %.4f), tolerance ±%.4f (%.2f%%, of which rounding %.4f); ||mean-X||² = %.5f = %.3f·Var/K "
                "(bound %.4f); max entry z %.2f (bound %.2f)\n", K, st.mean_err2, st.predicted, st.tail, half,
                100 * half / st.predicted, st.floor_err2(st.predicted), st.bias2, st.bias2 * K / st.predicted, bound_a,
                st.max_z, zb);

    // the same identity at another split (r1 = 8, r2 = 24, k = 7/3): Q1 need not be a spectral boundary
    SiteDims d2 = dims(8, 24, (c.n - 8.0f) / 24);
    DrawStats st2 = run_draws(c.S, d2, 2000, 12);
    double half2 = z * st2.sd_err2 / std::sqrt(2000.0) + st2.floor_err2(st2.predicted);
    EXPECT_NEAR(st2.mean_err2, st2.predicted, half2) << "r1 = 8, r2 = 24";
    EXPECT_LT(st2.bias2, st2.bias_bound(st2.predicted));
    std::printf("[ stats    ] PRAC r1=8 r2=24, K=2000: E||X~-X||² measured %.3f, predicted %.3f ± %.3f\n",
                st2.mean_err2, st2.predicted, half2);
}

// K draws for a Q1 that is not the optimum (its tail over twice the optimal one): E[X~] = X at 1e-6 (the whole
// mean and each entry) and E||X~ - X||² = (k - 1)·tail of THAT Q1.
void expect_unbiased_for_a_poor_q1(const EstimatorCase& c, const SiteDims& d, int K, uint64_t seed, const char* what) {
    DrawStats st = run_draws(c.S, d, K, seed);
    dvec sigma, Vt;
    svd_ref(c.S.Xd, c.N, c.n, sigma, Vt);
    double best = 0;
    for (int i = d.r1; i < c.n; i++) best += sigma[i] * sigma[i];
    EXPECT_GT(st.tail, 2 * best) << what << ": the test needs a Q1 far from the optimum";
    EXPECT_LT(st.bias2, st.bias_bound(st.predicted)) << what << ": ||mean(X~) - X||²";
    EXPECT_LT(st.max_z, z_two_sided(kFail / (c.N * c.n))) << what << ": largest per-entry z-score";
    double z = z_two_sided(kFail), half = z * st.sd_err2 / std::sqrt((double)K) + st.floor_err2(st.predicted);
    EXPECT_NEAR(st.mean_err2, st.predicted, half) << what << ": E||X~ - X||² vs (k - 1)·tail of the Q1 used";
    std::printf("[ stats    ] %s (tail %.2f, optimum %.2f): E||X~-X||² %.3f, predicted %.3f ± %.3f\n", what, st.tail,
                best, st.mean_err2, st.predicted, half);
}

// Unbiasedness needs only an orthonormal Q1 and Q2 uniform in its complement, not the top singular subspace:
// the subspace refresh with no iterations and no Nyström step (cold_iters = 0, nystrom = false: Q1 = Rayleigh-Ritz
// on a random 32-column block, far from the top 16 directions) still gives E[X~] = X and E||X~ - X||² =
// (k - 1)·tail of THAT Q1, whose tail is much larger than the optimal one.
TEST(PracEstimator, UnbiasedForAnApproximateQ1FromTheSubspaceRefresh) {
    EstimatorCase c;
    SiteDims d = dims(16, 16, (c.n - 16.0f) / 16, PracRefresh::SUBSPACE);
    d.subspace.cold_iters = 0;
    d.subspace.nystrom = false;
    expect_unbiased_for_a_poor_q1(c, d, 3000, 21, "approximate Q1");
}

// A provisional basis (--prac-initial-spread: SiteDims::random_q1) is a random orthonormal Q1 that never reads x (a
// null x is passed: the refresh must not touch it), the same for every x under one key, with Q2 in its complement;
// the estimator over Q2 draws is then unbiased with variance (k - 1)·tail of that Q1, a tail far above the optimum's.
TEST(PracEstimator, UnbiasedForARandomProvisionalQ1) {
    EstimatorCase c;
    SiteDims d = dims(16, 16, (c.n - 16.0f) / 16);
    d.random_q1 = true;
    const int r = d.r();
    fvec P1((size_t)c.n * r), P2((size_t)c.n * r);
    PracRefreshResult a = prac_refresh_cpu(P1.data(), nullptr, c.N, c.n, d, true, true, false, {5, 9, 0, 0});
    PracRefreshResult b = prac_refresh_cpu(P2.data(), c.S.X.data(), c.N, c.n, d, true, true, false, {5, 9, 0, 0});
    EXPECT_TRUE(a.q1_ok && a.q2_ok && a.q1_changed && a.q2_drawn && a.message.empty()) << a.message;
    EXPECT_TRUE(b.q1_ok && b.q2_ok) << b.message;
    EXPECT_EQ(P1, P2) << "a provisional basis depends on the key only";
    dvec Q = block(P1.data(), c.n, r, 0, r, 1), QtQ = dgemm(true, false, r, r, c.n, Q, Q);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < r; j++) {
            double want = i == j ? (i < d.r1 ? 1.0 : (double)d.k) : 0.0;  // [Q1 | sqrt(k) Q2]
            EXPECT_NEAR(QtQ[(size_t)i * r + j], want, 32 * kEpsF * (1 + want)) << i << "," << j;
        }
    expect_unbiased_for_a_poor_q1(c, d, 3000, 31, "provisional random Q1");
}

// The unbiasedness checks have power: k_mult = 1.5 (k = 4.5, c = r2/(n - r1) = 1/3) makes E[X~] - X = (kc - 1)·XUUᵀ =
// 0.5·XUUᵀ (UUᵀ = I - Q1Q1ᵀ), whose squared norm 0.25·tail is far above the 1e-6 bound of the unbiased case.
TEST(PracEstimator, TheUnbiasednessCheckDetectsAWrongK) {
    EstimatorCase c;
    const int K = 1000;
    SiteDims d = dims(16, 16, 1.5f * (c.n - 16.0f) / 16);
    DrawStats st = run_draws(c.S, d, K, 13);
    const double cc = 16.0 / (c.n - 16), coef = d.k * cc - 1;  // 0.5
    // the unbiased case's two checks fail: its bound on ||mean(X~) - X||² (from its Var, (k - 1)·tail) and E t = 0
    EXPECT_GT(st.bias2, st.bias_bound(st.predicted));
    EXPECT_GT(std::fabs(st.mean_t), st.half_t());
    // the bias measured: E t = coef·tail (two-sided 1e-6, as in the unbiased case)
    EXPECT_NEAR(st.mean_t, coef * st.tail, st.half_t()) << "mean of <X~ - X, X - X Q1 Q1ᵀ>";
    // ||mean(X~) - X||² = ||b + e||² with b = coef·XUUᵀ and e = mean(X~) - E[X~], the mean of K zero-mean draws:
    // = coef²·tail + 2<b, e> + ||e||², and 2<b, e> = 2·coef·(mean_t - coef·tail) exactly (in the measured values), so
    // the spread ||e||² = bias2 - coef²·tail - 2·coef·(mean_t - coef·tail) in every direction, held to the unbiased
    // case's Székely-Bakirov bound (1e-6) with this estimator's Var = E||X~ - E X~||² = k²c(1 - c)·tail (= 4.5·tail)
    const double var = (double)d.k * d.k * cc * (1 - cc) * st.tail;
    const double spread = st.bias2 - coef * coef * st.tail - 2 * coef * (st.mean_t - coef * st.tail);
    EXPECT_LT(spread, st.bias_bound(var)) << "||mean(X~) - E[X~]||²";
    std::printf("[ stats    ] k_mult=1.5: mean t = %.3f (%.1f·tail = %.3f ± %.3f); ||mean-X||² = %.3f (%.2f·tail = "
                "%.3f), of which the spread %.4f (bound %.4f); the unbiased bound would be %.3f\n", st.mean_t, coef,
                coef * st.tail, st.half_t(), st.bias2, coef * coef, coef * coef * st.tail, spread,
                st.bias_bound(var), st.bias_bound(st.predicted));
}

// (c) Table 1: at equal total rank 24, RAC (r2 = 24, k = 8/3) has variance (n/r - 1)·||X||² and PRAC (16 + 8,
// k = 6) has 5·tail; on this dominant spectrum RAC's is ~16x larger.
TEST(PracEstimator, RacVarianceExceedsPracByThePredictedRatio) {
    EstimatorCase c;
    const int K = 3000;
    PracOptions o = opts(PracMode::RAC);
    o.nonlinear_r1_abs = 16;
    o.nonlinear_r2_abs = 8;
    SiteDims rac = prac_site_dims(o, SiteClass::NONLINEAR, c.n, "resid");
    o.mode = PracMode::PRAC;
    SiteDims prac = prac_site_dims(o, SiteClass::NONLINEAR, c.n, "resid");
    ASSERT_EQ(rac.r1, 0);
    ASSERT_EQ(rac.r2, 24);
    ASSERT_EQ(prac.r1, 16);
    ASSERT_EQ(prac.r2, 8);
    DrawStats a = run_draws(c.S, rac, K, 21), b = run_draws(c.S, prac, K, 22);
    double z = z_two_sided(kFail);
    double rac_pred = (c.n / 24.0 - 1) * sq_norm(c.S.Xd);
    EXPECT_NEAR(a.predicted, rac_pred, 1e-6 * rac_pred) << "RAC: tail of an empty Q1 is ||X||²";
    double ha = z * a.sd_err2 / std::sqrt((double)K) + a.floor_err2(a.predicted);
    double hb = z * b.sd_err2 / std::sqrt((double)K) + b.floor_err2(b.predicted);
    EXPECT_NEAR(a.mean_err2, rac_pred, ha) << "RAC variance";
    EXPECT_NEAR(b.mean_err2, b.predicted, hb) << "PRAC variance";
    EXPECT_LT(a.bias2, a.bias_bound(a.predicted)) << "RAC is unbiased too";
    EXPECT_LT(b.bias2, b.bias_bound(b.predicted));
    // ratio of two independent means: relative half-widths add (to first order), each at 1e-6
    double ratio = a.mean_err2 / b.mean_err2, pred = a.predicted / b.predicted;
    double rel = ha / a.mean_err2 + hb / b.mean_err2;
    EXPECT_GT(ratio, 10.0);
    EXPECT_NEAR(ratio / pred, 1.0, rel) << "variance ratio RAC / PRAC";
    std::printf("[ stats    ] RAC (r2=24,k=2.67): E||X~-X||² %.2f (pred %.2f ± %.2f);  PRAC (16+8,k=6): %.3f (pred %.3f "
                "± %.3f);  ratio %.3f, predicted %.3f ± %.2f%%\n", a.mean_err2, a.predicted, ha, b.mean_err2,
                b.predicted, hb, ratio, pred, 100 * rel);

    // A degenerate case worth knowing: RAC with r2 = n/2 has k = 2 and 2·Q2Q2ᵀ - I is orthogonal (a reflection),
    // so ||X~ - X||_F = ||X||_F for every draw (the variance is not random at all).
    o.mode = PracMode::RAC;
    o.nonlinear_r1_abs = 16;
    o.nonlinear_r2_abs = 16;
    SiteDims half = prac_site_dims(o, SiteClass::NONLINEAR, c.n, "resid");
    ASSERT_FLOAT_EQ(half.k, 2.0f);
    DrawStats h = run_draws(c.S, half, 50, 23);
    double xn = std::sqrt(sq_norm(c.S.Xd));
    EXPECT_NEAR(std::sqrt(h.min_err2), xn, h.delta);
    EXPECT_NEAR(std::sqrt(h.max_err2), xn, h.delta);
}

// (d) PAC (r1 = 32, r2 = 0) is deterministic and biased by exactly the tail energy Σ_{i>r1} σ_i² (vs LAPACK).
TEST(PracEstimator, PacBiasIsTheTailEnergy) {
    EstimatorCase c;
    PracOptions o = opts(PracMode::PAC);
    o.linear_r1_abs = 16;
    o.linear_r2_abs = 16;
    o.refresh = PracRefresh::EXACT;  // Σ_{i>r1} σ_i² is the tail of the exact top-r1 subspace
    SiteDims pac = prac_site_dims(o, SiteClass::LINEAR, c.n, "ln1");
    ASSERT_EQ(pac.r1, 32);
    ASSERT_EQ(pac.r2, 0);
    const int N = c.N, n = c.n, r = pac.r();
    fvec P((size_t)n * r), xc((size_t)N * r), xt((size_t)N * n);
    ASSERT_TRUE(prac_refresh_cpu(P.data(), c.S.X.data(), N, n, pac, true, true, false, {5, 0, 0, 0}).q1_ok);
    prac_compress_cpu(xc.data(), c.S.X.data(), P.data(), N, n, r);
    prac_reconstruct_cpu(xt.data(), xc.data(), P.data(), N, n, r);
    double bias = sq_dist(to_d(xt), c.S.Xd);
    dvec sigma, Vt;
    svd_ref(c.S.Xd, N, n, sigma, Vt);
    double tail = 0;
    for (int i = r; i < n; i++) tail += sigma[i] * sigma[i];
    // fp32: P orthonormal to ~n·eps and X~ rounded to ~r·eps·|X|, so ||X~ - X|| deviates by about (n + r)·eps·||X||
    // from the exact residual norm; the energy by twice that relative to the residual norm
    double tol = 2 * (n + r) * kEpsF * std::sqrt(sq_norm(c.S.Xd)) * std::sqrt(tail) + 1e-12;
    EXPECT_NEAR(bias, tail, tol) << "||X Q1Q1ᵀ - X||² vs Σ_{i>32} σ_i²";
    // no randomness: a Q2-only refresh changes nothing (there is no Q2)
    fvec P2 = P;
    prac_refresh_cpu(P2.data(), c.S.X.data(), N, n, pac, false, true, true, {5, 0, 0, 1});
    EXPECT_EQ(P2, P);
    std::printf("[ stats    ] PAC r1=32: bias ||X~-X||² = %.6f, LAPACK tail Σσ² = %.6f (tol %.1e)\n", bias, tail, tol);
}

// ================================================================================================
// 5. Factored weight gradient, compress / reconstruct
// ================================================================================================

TEST(PracOps, FactoredWeightGradEqualsMatmulOnTheReconstructedInput) {
    const int N = 96, n = 64, OC = 40;
    SiteDims d = dims(16, 16, 3.0f);
    const int r = d.r();
    Synth S = make_synth(N, n, dominant_spectrum(n, 16), 4004);
    fvec P((size_t)n * r), xc((size_t)N * r), xt((size_t)N * n);
    ASSERT_TRUE(prac_refresh_cpu(P.data(), S.X.data(), N, n, d, true, true, false, {3, 3, 0, 0}).q1_ok);
    prac_compress_cpu(xc.data(), S.X.data(), P.data(), N, n, r);
    prac_reconstruct_cpu(xt.data(), xc.data(), P.data(), N, n, r);
    Rng rng(77);
    fvec dY = rng.normals_f((size_t)N * OC), dW0 = rng.normals_f((size_t)OC * n), db0 = rng.normals_f(OC);

    fvec dWa = dW0, dba = db0, tmp((size_t)OC * r);
    prac_weight_grad_cpu(dWa.data(), dba.data(), dY.data(), xc.data(), P.data(), N, n, r, OC, tmp.data());
    fvec dWb = dW0, dbb = db0;
    matmul_backward_weight_cpu(dWb.data(), dbb.data(), dY.data(), xt.data(), N, n, OC);
    fvec dWc = dW0;
    prac_weight_grad_cpu(dWc.data(), (float*)nullptr, dY.data(), xc.data(), P.data(), N, n, r, OC, tmp.data());

    // double reference from the same fp32 xc and P: dW0 + dYᵀ (xc Pᵀ); forward error bound of both fp32 paths
    // (two chained sums of N and r terms): (N + r + 2)·eps·(|dW0| + |dY|ᵀ|xc||P|ᵀ) entrywise
    dvec xtd = dgemm(false, true, N, n, r, to_d(xc), to_d(P));
    dvec ref = dgemm(true, false, OC, n, N, to_d(dY), xtd);
    dvec absxt = dgemm(false, true, N, n, r, [&] { dvec a = to_d(xc); for (double& v : a) v = std::fabs(v); return a; }(),
                       [&] { dvec a = to_d(P); for (double& v : a) v = std::fabs(v); return a; }());
    dvec absdy = to_d(dY);
    for (double& v : absdy) v = std::fabs(v);
    dvec mag = dgemm(true, false, OC, n, N, absdy, absxt);
    double worst_a = 0, worst_b = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double exact = dW0[i] + ref[i], bound = (N + r + 2) * kEpsF * (std::fabs(dW0[i]) + mag[i]);
        worst_a = worst_of(worst_a, std::fabs(dWa[i] - exact) / bound);
        worst_b = worst_of(worst_b, std::fabs(dWb[i] - exact) / bound);
        ASSERT_LE(std::fabs(dWa[i] - exact), bound) << "factored dW, entry " << i;
        ASSERT_LE(std::fabs(dWb[i] - exact), bound) << "matmul on X~, entry " << i;
        ASSERT_EQ(dWc[i], dWa[i]) << "dbias = nullptr changes nothing in dW";
    }
    for (int o = 0; o < OC; o++) EXPECT_EQ(dba[o], dbb[o]) << "dbias: the same column sums, bitwise";
    std::printf("[ stats    ] factored dW: worst error / fp32 bound %.3f; matmul on X~: %.3f\n", worst_a, worst_b);
}

TEST(PracOps, CompressAndReconstructShapes) {
    const int N = 5, n = 24, r = 8;
    Rng rng(5);
    fvec x = rng.normals_f((size_t)N * n), P = rng.normals_f((size_t)n * r);
    const float sentinel = 99.0f;
    fvec xc((size_t)N * r + 16, sentinel), xt((size_t)N * n + 16, sentinel);
    prac_compress_cpu(xc.data(), x.data(), P.data(), N, n, r);
    prac_reconstruct_cpu(xt.data(), xc.data(), P.data(), N, n, r);
    dvec xc_ref = dgemm(false, false, N, r, n, to_d(x), to_d(P));
    dvec xt_ref = dgemm(false, true, N, n, r, to_d(fvec(xc.begin(), xc.begin() + N * r)), to_d(P));
    for (int i = 0; i < N * r; i++) EXPECT_NEAR(xc[i], xc_ref[i], 1e-5 * (1 + std::fabs(xc_ref[i])));
    for (int i = 0; i < N * n; i++) EXPECT_NEAR(xt[i], xt_ref[i], 1e-5 * (1 + std::fabs(xt_ref[i])));
    for (int i = N * r; i < N * r + 16; i++) EXPECT_EQ(xc[i], sentinel) << "xc is (N, r)";
    for (int i = N * n; i < N * n + 16; i++) EXPECT_EQ(xt[i], sentinel) << "x~ is (N, n)";
}

// With r = n the basis is a full orthogonal matrix (k = (n - r1)/r2 = 1) and X~ = X to fp32 precision.
TEST(PracOps, FullRankBasisReconstructsX) {
    const int N = 80, n = 64;
    Synth S = make_synth(N, n, dominant_spectrum(n, 16), 5005);
    for (auto [r1, r2] : std::vector<std::pair<int, int>>{{n - 8, 8}, {32, 32}, {0, n}, {n, 0}}) {
        SiteDims d = dims(r1, r2, r2 ? (float)(n - r1) / r2 : 1.0f);
        ASSERT_FLOAT_EQ(d.k, 1.0f);
        fvec P((size_t)n * n), xc((size_t)N * n), xt((size_t)N * n);
        ASSERT_TRUE(prac_refresh_cpu(P.data(), S.X.data(), N, n, d, true, true, false, {1, 2, 3, 4}).q2_ok);
        prac_compress_cpu(xc.data(), S.X.data(), P.data(), N, n, n);
        prac_reconstruct_cpu(xt.data(), xc.data(), P.data(), N, n, n);
        double rel = std::sqrt(sq_dist(to_d(xt), S.Xd) / sq_norm(S.Xd));
        // P orthogonal to O(n)·eps, and two chained n-term products: ~4n·eps relative
        EXPECT_LT(rel, 4 * n * kEpsF) << "r1=" << r1 << " r2=" << r2;
    }
}

}  // namespace
