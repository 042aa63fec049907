// Tests of PRAC's fp8 storage (--prac-storage fp8): the e4m3 format and the stochastic rounding of prac/fp8.h, the
// row quantizer's CPU twins (prac_fp8_quantize_cpu / prac_fp8_dequantize_cpu), the estimator with fp8 storage, and
// one ActSite storing fp8. The CUDA twins are compared with these in test_prac_cuda.cu (emulated builds).
//
//   1. all 256 codes against a float64 decoding written from the OCP E4M3FN definition (independent of the bit
//      manipulation under test); representable values round to themselves whatever the random bits
//   2. the rounding's probability, exactly: for a value y between the codes lo < hi, the set of 32-bit words u that
//      round up is an interval [u*, 2^32) whose size / 2^32 must equal (|y| - lo) / (hi - lo) to the last bit
//      (found by bisection over u, as the rounding is monotone in u); saturation at ±448, NaN and ±Inf
//   3. the row scale: a power of two that puts the row's largest finite |value| in (224, 448]; zero rows, NaN/Inf
//      elements, huge and tiny rows; rows split over calls give the same bits
//   4. statistically through Philox bits: unbiasedness and variance (hi - y)(y - lo) per element, by Hoeffding's
//      inequality (distribution-free) at a stated false-failure probability
//   5. PRAC with fp8 storage over many (Q2, rounding) draws: E[X~] = X, and E||X~ - X||² = (k-1)·tail + the
//      rounding's variance carried through P (an identity, below), with a check that truncation instead of
//      stochastic rounding would fail
//   6. one site: save / restore / weight_grad with fp8 storage equal the twins composed by hand, over two row blocks
//
// Every statistical check fails with probability at most 1e-6 over the seeds if the code is right (prac_test_util.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu_backend.h"
#include "prac/fp8.h"
#include "prac/prac.h"
#include "prac/site.h"
#include "test/prac_test_util.h"
#include "test/test_util.h"
#include "test/worst.h"  // worst_of

namespace {

// ---- the independent reference: the OCP E4M3FN definition in float64 ----
// bits S.EEEE.MMM; E = 1..15: (-1)^S (1 + M/8) 2^(E-7) except S.1111.111 = NaN (no infinities); E = 0: (-1)^S M/8 2^-6
double spec_value(int c) {
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
    double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
    return s ? -mag : mag;
}
// the 127 finite non-negative values, ascending (codes 0x00 .. 0x7E)
std::vector<double> spec_grid() {
    std::vector<double> g;
    for (int c = 0; c < 128; c++)
        if (!std::isnan(spec_value(c))) g.push_back(spec_value(c));
    std::sort(g.begin(), g.end());
    return g;
}
int spec_code(double v) {  // the code of a finite value of the grid (sign from v)
    for (int c = 0; c < 256; c++)
        if (spec_value(c) == v && std::signbit(spec_value(c)) == std::signbit(v)) return c;
    return -1;
}
// lo <= |y| < hi, neighbours on the grid; lo = hi = 448 for |y| = 448 (nothing to round)
void neighbours(const std::vector<double>& g, double y, double& lo, double& hi) {
    if (std::fabs(y) >= g.back()) {
        lo = hi = g.back();
        return;
    }
    size_t i = std::upper_bound(g.begin(), g.end(), std::fabs(y)) - g.begin();
    lo = g[i - 1];
    hi = g[i];
}
// the smallest u with fp8_e4m3_sr(y, u) != code of lo (2^32 if none), by bisection: the rounding is monotone in u
uint64_t first_up(float y, uint8_t lo_code) {
    uint64_t a = 0, b = 1ull << 32;  // sr(y, a) == lo, sr(y, b) != lo (b may be 2^32: "never")
    if (fp8_e4m3_sr(y, 0) != lo_code) return 0;
    while (b - a > 1) {
        uint64_t m = (a + b) / 2;
        (fp8_e4m3_sr(y, (uint32_t)m) == lo_code ? a : b) = m;
    }
    return b;
}

}  // namespace

// ================================================================================================
// 1. The format
// ================================================================================================

TEST(Fp8Format, AllCodesDecodeAsTheSpecSays) {
    int nans = 0;
    for (int c = 0; c < 256; c++) {
        double want = spec_value(c);
        float got = fp8_e4m3_decode((uint8_t)c);
        if (std::isnan(want)) {
            nans++;
            EXPECT_TRUE(std::isnan(got)) << "code " << c;
            continue;
        }
        EXPECT_EQ((double)got, want) << "code " << c;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << "code " << c << " (signed zero)";
    }
    EXPECT_EQ(nans, 2) << "S.1111.111 only: E4M3FN has no infinities";
    EXPECT_EQ(fp8_e4m3_decode(0x7E), 448.0f);
    EXPECT_EQ(fp8_e4m3_decode(0xFE), -448.0f);
    EXPECT_EQ(fp8_e4m3_decode(0x01), 0x1p-9f);  // smallest subnormal
    EXPECT_EQ(fp8_e4m3_decode(0x08), 0x1p-6f);  // smallest normal
    EXPECT_EQ(fp8_e4m3_decode(0x07), 7 * 0x1p-9f);
    // the property the rounding relies on: codes 0x00 .. 0x7E are the grid in ascending order
    std::vector<double> g = spec_grid();
    ASSERT_EQ(g.size(), 127u);
    for (int c = 0; c < 127; c++) EXPECT_EQ(spec_value(c), g[c]) << "code " << c;
}

TEST(Fp8Format, RepresentableValuesRoundToThemselvesWhateverTheBits) {
    for (int c = 0; c < 256; c++) {
        double v = spec_value(c);
        if (std::isnan(v)) continue;
        for (uint32_t u : {0u, 1u, 0x80000000u, 0xFFFFFFFEu, 0xFFFFFFFFu})
            EXPECT_EQ(fp8_e4m3_sr((float)v, u), c) << "value " << v << " u " << u;
    }
}

// ================================================================================================
// 2. The rounding's probability, exactly
// ================================================================================================

// For |y| in (lo, hi) the words that round up are exactly [u*, 2^32), and (2^32 - u*) / 2^32 = (|y| - lo) / (hi - lo)
// exactly (the fraction has at most 32 bits for every |y| >= 2^-18 tested here; prac/fp8.h states the truncation
// below). 20000 values: log-uniform over the normal range and the subnormal range, both signs, the top
// binade (416, 448) included.
TEST(Fp8Rounding, ProbabilityOfRoundingUpIsExactlyTheFractionOfTheStep) {
    std::vector<double> g = spec_grid();
    Rng rng(7);
    int checked = 0;
    for (int t = 0; t < 20000; t++) {
        double mag = t % 4 == 3 ? 416.0 + 32.0 * rng.uniform() : std::exp2(-18.0 + 26.8 * rng.uniform());
        float y = (float)((t & 1) ? -mag : mag);
        if (std::fabs(y) >= 448.0f) continue;
        double lo, hi;
        neighbours(g, y, lo, hi);
        int lo_c = spec_code(std::signbit(y) ? -lo : lo), hi_c = spec_code(std::signbit(y) ? -hi : hi);
        if (lo == 0) lo_c = std::signbit(y) ? 0x80 : 0x00;
        uint64_t u = first_up(y, (uint8_t)lo_c);
        double frac = (std::fabs((double)y) - lo) / (hi - lo);  // exact in double
        ASSERT_EQ((double)((1ull << 32) - u), frac * 4294967296.0) << "y " << y << " lo " << lo << " hi " << hi;
        if (frac > 0) {  // the words at and above u* give hi, below it lo
            ASSERT_EQ(fp8_e4m3_sr(y, (uint32_t)u), hi_c) << "y " << y;
            ASSERT_EQ(fp8_e4m3_sr(y, 0xFFFFFFFFu), hi_c) << "y " << y;
            if (u > 0) ASSERT_EQ(fp8_e4m3_sr(y, (uint32_t)(u - 1)), lo_c) << "y " << y;
        }
        ASSERT_EQ(fp8_e4m3_sr(-y, 12345u), fp8_e4m3_sr(y, 12345u) ^ 0x80) << "sign symmetry, y " << y;
        checked++;
    }
    EXPECT_GT(checked, 19000);
    // below 2^-18 the fraction is kept to 32 bits of the step 2^-9: 2^-45 = 2^-36 steps rounds up with probability
    // floor(2^-36 · 2^32) / 2^32 = 0; 1.5·2^-38 = 1.5·2^-29 steps with exactly 12 words of 2^32
    EXPECT_EQ(first_up(0x1p-45f, 0x00), 1ull << 32);
    EXPECT_EQ((1ull << 32) - first_up(0x1.8p-38f, 0x00), 12u);
}

TEST(Fp8Rounding, SaturatesAt448AndNonFiniteBecomesNaN) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (uint32_t u : {0u, 0x12345678u, 0xFFFFFFFFu}) {
        EXPECT_EQ(fp8_e4m3_sr(448.0f, u), 0x7E);
        EXPECT_EQ(fp8_e4m3_sr(448.00003f, u), 0x7E);
        EXPECT_EQ(fp8_e4m3_sr(1e30f, u), 0x7E);
        EXPECT_EQ(fp8_e4m3_sr(std::numeric_limits<float>::max(), u), 0x7E);
        EXPECT_EQ(fp8_e4m3_sr(-1e30f, u), 0xFE);
        EXPECT_TRUE(std::isnan(fp8_e4m3_decode(fp8_e4m3_sr(inf, u))));
        EXPECT_TRUE(std::isnan(fp8_e4m3_decode(fp8_e4m3_sr(-inf, u))));
        EXPECT_TRUE(std::isnan(fp8_e4m3_decode(fp8_e4m3_sr(nan, u))));
        EXPECT_EQ(fp8_e4m3_sr(447.99997f, 0u), 0x7D);  // 416: below 448 still rounds within (416, 448)
    }
}

// ================================================================================================
// 3. The row scale and the CPU twins
// ================================================================================================

TEST(Fp8Rows, ScaleExponentPutsTheRowMaximumIn224To448) {
    EXPECT_EQ(fp8_row_exponent(448.0f), 0);
    EXPECT_EQ(fp8_row_exponent(448.00003f), -1);
    EXPECT_EQ(fp8_row_exponent(1.75f), 8);
    EXPECT_EQ(fp8_row_exponent(1.7500001f), 7);
    EXPECT_EQ(fp8_row_exponent(1.0f), 8);
    EXPECT_EQ(fp8_row_exponent(0.0f), 0);
    EXPECT_EQ(fp8_row_exponent(std::numeric_limits<float>::infinity()), 0);
    EXPECT_EQ(fp8_row_exponent(std::numeric_limits<float>::max()), -120);
    EXPECT_EQ(fp8_row_exponent(0x1p-130f), 126);  // clamped: 2^126 and 2^-126 stay normal fp32
    Rng rng(8);
    for (int t = 0; t < 10000; t++) {
        float amax = (float)std::exp2(-117.0 + 244.0 * rng.uniform());
        int k = fp8_row_exponent(amax);
        double y = std::ldexp((double)amax, k);
        ASSERT_GT(y, 224.0) << amax;
        ASSERT_LE(y, 448.0) << amax;
        ASSERT_EQ((double)fp8_pow2(k), std::ldexp(1.0, k));
        ASSERT_EQ((double)fp8_pow2(-k), std::ldexp(1.0, -k));
    }
}

// Rows of every kind through prac_fp8_quantize_cpu: each code is one of the two grid neighbours of x / scale, the
// scale is 2^-k of the finite maximum, dequantize gives code value · scale exactly; a zero row has scale 1 and zero
// codes; NaN and ±Inf become NaN and leave the row's other values scaled by its finite maximum; splitting the rows
// over two calls (row0) gives the same bits.
TEST(Fp8Rows, QuantizeAndDequantizeRowsOfEveryKind) {
    const int r = 40;
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    Rng rng(9);
    std::vector<fvec> rows;
    for (double s : {1.0, 1e-30, 1e30, 3e-3}) rows.push_back(rng.normals_f(r, s));
    rows.push_back(fvec(r, 0.0f));
    fvec bad = rng.normals_f(r, 2.0);
    bad[3] = nan;
    bad[7] = -inf;
    bad[8] = inf;
    rows.push_back(bad);
    fvec wide = rng.normals_f(r, 1.0);  // values spread over 2^-24 .. 2^4: subnormal codes inside a normal row
    for (int j = 0; j < r; j++) wide[j] *= (float)std::exp2(-28.0 * j / r);
    rows.push_back(wide);
    const int N = (int)rows.size();
    fvec x;
    for (const fvec& v : rows) x.insert(x.end(), v.begin(), v.end());
    std::vector<uint8_t> q((size_t)N * r), q2((size_t)N * r);
    fvec scale(N), scale2(N), back((size_t)N * r);
    PracDrawKey key{5, 3, 2, 7, PRAC_DRAW_FP8_ROUNDING};
    prac_fp8_quantize_cpu(q.data(), scale.data(), x.data(), N, r, 0, key);
    prac_fp8_dequantize_cpu(back.data(), q.data(), scale.data(), N, r);
    std::vector<double> g = spec_grid();
    for (int i = 0; i < N; i++) {
        double amax = 0;
        for (int j = 0; j < r; j++)
            if (std::isfinite(x[(size_t)i * r + j])) amax = std::max(amax, std::fabs((double)x[(size_t)i * r + j]));
        double s = scale[i];
        EXPECT_EQ(s, std::ldexp(1.0, -(int)std::lround(-std::log2(s)))) << "row " << i << ": a power of two";
        if (amax == 0) {
            EXPECT_EQ(s, 1.0) << "zero row";
        } else {
            EXPECT_GT(amax / s, 224.0) << "row " << i;
            EXPECT_LE(amax / s, 448.0) << "row " << i;
        }
        for (int j = 0; j < r; j++) {
            size_t e = (size_t)i * r + j;
            double v = spec_value(q[e]);
            if (!std::isfinite(x[e])) {
                EXPECT_TRUE(std::isnan(v) && std::isnan(back[e])) << "row " << i << " col " << j;
                continue;
            }
            double y = x[e] / s, lo, hi;  // exact: s is a power of two
            neighbours(g, y, lo, hi);
            EXPECT_TRUE(std::fabs(v) == lo || std::fabs(v) == hi) << "row " << i << " col " << j << " y " << y;
            EXPECT_TRUE(v == 0 || std::signbit(v) == std::signbit(y)) << "sign, row " << i << " col " << j;
            EXPECT_EQ((double)back[e], v * s) << "dequantized, row " << i << " col " << j;
        }
    }
    // the same bits when the rows come in two calls
    const int a = 3;
    prac_fp8_quantize_cpu(q2.data(), scale2.data(), x.data(), a, r, 0, key);
    prac_fp8_quantize_cpu(q2.data() + (size_t)a * r, scale2.data() + a, x.data() + (size_t)a * r, N - a, r, a, key);
    EXPECT_EQ(q, q2);
    EXPECT_EQ(scale, scale2);
    // another key, other bits (with overwhelming probability: 280 values with fractions in (0, 1))
    PracDrawKey key2 = key;
    key2.refresh = 8;
    prac_fp8_quantize_cpu(q2.data(), scale2.data(), x.data(), N, r, 0, key2);
    EXPECT_NE(q, q2);
}

// ================================================================================================
// 4. Unbiasedness and variance through the Philox bits
// ================================================================================================

// One row of r values, K draws (key.refresh = draw). For element j the rounding goes up with probability p_j (its
// fraction of the step Δ_j = (hi - lo)·scale); the draws are independent (distinct Philox words), so the count of
// "up" is Binomial(K, p_j). Hoeffding: P(|p̂ - p| >= t) <= 2 exp(-2 K t²); with t = sqrt(ln(2 r / 1e-6) / (2K)) the
// r checks together fail with probability <= 1e-6 (union bound), with no approximation. Hence
//   (a) unbiased: |mean - x_j| <= t·Δ_j (mean - x_j = (p̂ - p)·Δ_j exactly);
//   (b) variance: the per-draw variance of the dequantized value is p(1 - p)·Δ² = (hi - y)(y - lo)·scale²; the
//       sample variance is p̂(1 - p̂)·Δ²·K/(K-1), and |p̂(1 - p̂) - p(1 - p)| <= |p̂ - p| <= t: so it lies within
//       t·Δ²·K/(K-1) of the bound (hi - y)(y - lo)·scale² (at most, and not far below: not a biased rounding with
//       less spread).
// Values: fractions spread over (0, 1), exact codes (variance 0: always the same value), subnormal codes.
TEST(Fp8Rounding, UnbiasedWithVarianceTheBoundAtOneInAMillion) {
    const int r = 64, K = 20000;
    SingleThreaded one;  // 20000 one-row calls: no thread pool
    Rng rng(10);
    fvec x(r);
    for (int j = 0; j < r; j++) x[j] = (float)((j % 2 ? -1 : 1) * std::exp2(-12.0 + 20.0 * rng.uniform()));
    x[0] = 300.0f;                 // sets the scale: k = 0 (300 is in (224, 448]), so y = x
    x[1] = 288.0f;                 // a code: never rounded
    x[2] = 0x1.8p-8f;              // subnormal codes: 3·2^-9 exact
    x[3] = 0x1.4p-8f;              // 2.5·2^-9 between two subnormals
    std::vector<double> sum(r, 0), sumsq(r, 0);
    std::vector<uint8_t> q(r);
    float s;
    fvec back(r);
    for (int d = 0; d < K; d++) {
        prac_fp8_quantize_cpu(q.data(), &s, x.data(), 1, r, 0, {99, 1, 0, (uint64_t)d, PRAC_DRAW_FP8_ROUNDING});
        prac_fp8_dequantize_cpu(back.data(), q.data(), &s, 1, r);
        for (int j = 0; j < r; j++) {
            sum[j] += back[j];
            sumsq[j] += (double)back[j] * back[j];
        }
    }
    ASSERT_EQ(s, 1.0f);
    std::vector<double> g = spec_grid();
    const double t = std::sqrt(std::log(2.0 * r / kFail) / (2.0 * K));
    double worst_mean = 0, worst_var = 0, sum_var = 0, sum_bound = 0;
    for (int j = 0; j < r; j++) {
        double y = x[j], lo, hi;
        neighbours(g, y, lo, hi);
        double step = hi - lo, bound = (hi - std::fabs(y)) * (std::fabs(y) - lo);
        double mean = sum[j] / K, var = (sumsq[j] - sum[j] * sum[j] / K) / (K - 1);
        EXPECT_LE(std::fabs(mean - y), t * step) << "element " << j << " y " << y;
        // var = p̂(1-p̂)Δ²K/(K-1): within (t + 1/(4(K-1)))·Δ²·K/(K-1) of p(1-p)Δ² = bound
        double slack = (t + 0.25 / (K - 1.0)) * step * step * K / (K - 1.0);
        EXPECT_LE(std::fabs(var - bound), slack) << "element " << j;
        if (bound == 0) EXPECT_EQ(var, 0.0) << "a code is never rounded, element " << j;
        worst_mean = worst_of(worst_mean, std::fabs(mean - y) / step);
        worst_var = worst_of(worst_var, std::fabs(var - bound) / (step * step));
        sum_var += var / (step * step);
        sum_bound += bound / (step * step);
    }
    std::printf("[ stats    ] fp8 rounding, %d draws: max |mean - x| = %.4f steps, max |var - (hi-x)(x-lo)| = %.4f "
                "steps² (Hoeffding t = %.4f at 1e-6); sum of variances %.3f vs bound %.3f (steps²)\n", K, worst_mean,
                worst_var, t, sum_var, sum_bound);
}

// ================================================================================================
// 5. PRAC with fp8 storage
// ================================================================================================

// X~ = dequant(quant(X·P))·Pᵀ with Q2 and the rounding bits redrawn each draw (key index d). With e the rounding
// error of Xc (zero mean given Q2, independent entries) and PᵀP = diag(1 x r1, k x r2):
//   E||X~ - X||² = (k - 1)·tail + E_Q2[ Σ_ij Var(e_ij)·(PᵀP)_jj ],   Var(e_ij) = (hi - y)(y - lo)·scale_i²,
// as the cross term E[(X P Pᵀ - X)·(e Pᵀ)ᵀ] vanishes (E[e | Q2] = 0). The second term is computed per draw from the
// actual Xc (in double), so both sides are known: checked like PracEstimator's variance identity (normal
// approximation of a mean of K iid draws at 1e-6 two-sided, plus the fp32 rounding floor), and E[X~] = X by
// Székely-Bakirov on ||mean - X||² (bound 23.93·Var/K) and per-entry z-scores (Bonferroni, 1e-6).
struct Fp8Draws {
    double tail = 0, predicted = 0, mean_err2 = 0, sd_err2 = 0, bias2 = 0, max_z = 0, delta = 0;
    int K = 0;
};
// truncate = true: round towards zero instead (u = 0), to show the checks detect a biased rounding
Fp8Draws run_fp8_draws(const Synth& S, const SiteDims& d, int K, uint64_t seed, bool truncate) {
    SingleThreaded one;
    const int N = S.N, n = S.n, r = d.r();
    fvec P((size_t)n * r), xc((size_t)N * r), xq((size_t)N * r), xt((size_t)N * n), scale(N);
    std::vector<uint8_t> q((size_t)N * r);
    EXPECT_TRUE(prac_refresh_cpu(P.data(), S.X.data(), N, n, d, true, true, false, {seed, 9, 0, 0}).q1_ok);
    std::vector<double> g = spec_grid();
    Fp8Draws st;
    st.K = K;
    {  // tail of the fixed Q1, in double
        dvec Q1 = block(P.data(), n, r, 0, d.r1), XQ = dgemm(false, false, N, d.r1, n, S.Xd, Q1);
        dvec R = dgemm(false, true, N, n, d.r1, XQ, Q1);
        for (size_t i = 0; i < R.size(); i++) st.tail += (S.Xd[i] - R[i]) * (S.Xd[i] - R[i]);
    }
    double xnorm = std::sqrt(sq_norm(S.Xd)), sr_var = 0;
    dvec sum((size_t)N * n, 0), sumsq((size_t)N * n, 0);
    double s1 = 0, s2 = 0;
    for (int j = 0; j < K; j++) {
        prac_refresh_cpu(P.data(), S.X.data(), N, n, d, false, true, true, {seed, 9, 0, (uint64_t)j + 1});
        prac_compress_cpu(xc.data(), S.X.data(), P.data(), N, n, r);
        prac_fp8_quantize_cpu(q.data(), scale.data(), xc.data(), N, r, 0, {seed, 9, 0, (uint64_t)j, PRAC_DRAW_FP8_ROUNDING});
        if (truncate)
            for (size_t e = 0; e < q.size(); e++) q[e] = fp8_e4m3_sr(xc[e] / scale[e / r], 0u);
        prac_fp8_dequantize_cpu(xq.data(), q.data(), scale.data(), N, r);
        prac_reconstruct_cpu(xt.data(), xq.data(), P.data(), N, n, r);
        for (int i = 0; i < N; i++)  // this draw's rounding variance carried through P (PᵀP = diag(1, k))
            for (int c = 0; c < r; c++) {
                double y = xc[(size_t)i * r + c] / scale[i], lo, hi;
                neighbours(g, y, lo, hi);
                sr_var += (hi - std::fabs(y)) * (std::fabs(y) - lo) * scale[i] * scale[i] * (c < d.r1 ? 1.0 : d.k);
            }
        double e = 0;
        for (size_t i = 0; i < xt.size(); i++) {
            double dl = (double)xt[i] - S.Xd[i];
            e += dl * dl;
            sum[i] += dl;
            sumsq[i] += dl * dl;
        }
        s1 += e;
        s2 += e * e;
    }
    st.predicted = ((double)d.k - 1) * st.tail + sr_var / K;
    st.mean_err2 = s1 / K;
    st.sd_err2 = std::sqrt(std::max(0.0, (s2 - s1 * s1 / K) / (K - 1)));
    // fp32 rounding of compress and reconstruct, as PracEstimator bounds it: (n + r)·eps·||X||·||P||_F²
    st.delta = (n + r) * 5.9604644775390625e-8 * xnorm * (d.r1 + (double)d.k * d.r2);
    for (size_t i = 0; i < sum.size(); i++) {
        double m = sum[i] / K, var = (sumsq[i] - sum[i] * sum[i] / K) / (K - 1);
        st.bias2 += m * m;
        if (var > 0) st.max_z = std::max(st.max_z, std::fabs(m) / std::sqrt(var / K));
    }
    return st;
}

SiteDims fp8_dims(int r1, int r2, int n) {
    SiteDims d;
    d.refresh = PracRefresh::EXACT;
    d.compressed = true;
    d.fp8 = true;
    d.r1 = r1;
    d.r2 = r2;
    d.k = (float)(n - r1) / (float)r2;
    return d;
}

TEST(PracFp8, EstimatorStaysUnbiasedAndItsVarianceAddsTheRoundingVariance) {
    const int N = 96, n = 48, K = 3000;
    // a sharp spectrum with a small tail, so the rounding's share of the variance is visible (fp8 matters most there)
    dvec spec(n);
    for (int i = 0; i < n; i++) spec[i] = i < 12 ? 10.0 - 0.5 * i : 0.05 * std::pow(0.97, i - 12);
    Synth S = make_synth(N, n, spec, 4004);
    SiteDims d = fp8_dims(12, 12, n);
    Fp8Draws st = run_fp8_draws(S, d, K, 31, false);
    double z = z_two_sided(kFail), floor2 = 2 * std::sqrt(st.predicted) * st.delta + st.delta * st.delta;
    double half = z * st.sd_err2 / std::sqrt((double)K) + floor2;
    EXPECT_NEAR(st.mean_err2, st.predicted, half) << "E||X~ - X||² vs (k-1)·tail + rounding variance";
    double bias_bound = std::pow(std::sqrt(sb_factor() * st.predicted / K) + st.delta, 2);
    EXPECT_LT(st.bias2, bias_bound) << "||mean(X~) - X||²";
    double zb = z_two_sided(kFail / (N * n));
    EXPECT_LT(st.max_z, zb) << "largest per-entry z-score";
    double prac_part = ((double)d.k - 1) * st.tail;
    std::printf("[ stats    ] PRAC + fp8, r1=r2=12, K=%d: E||X~-X||² measured %.5f, predicted %.5f = (k-1)·tail %.5f + "
                "rounding %.5f (%.1f%%), tolerance ±%.5f; ||mean-X||² %.3g (bound %.3g); max entry z %.2f (bound %.2f)\n",
                K, st.mean_err2, st.predicted, prac_part, st.predicted - prac_part,
                100 * (st.predicted - prac_part) / st.predicted, half, st.bias2, bias_bound, st.max_z, zb);
    EXPECT_GT(st.predicted - prac_part, 0.05 * st.predicted) << "the rounding's share must be visible to be tested";

    // power: rounding towards zero (no random bits) biases X~, and the same bound sees it
    Fp8Draws tr = run_fp8_draws(S, d, 1000, 32, true);
    double tr_bound = std::pow(std::sqrt(sb_factor() * st.predicted / 1000) + tr.delta, 2);
    EXPECT_GT(tr.bias2, tr_bound) << "truncation must fail the unbiasedness check";
    std::printf("[ stats    ] truncation instead: ||mean-X||² %.3g vs the unbiased bound %.3g\n", tr.bias2, tr_bound);
}

// ================================================================================================
// 6. One site with fp8 storage
// ================================================================================================

// save / restore / weight_grad of an fp8 site equal the twins composed by hand: the whole (N, r) compressed and
// quantized in one call with the documented key (seed, site id, layer, saves so far, PRAC_DRAW_FP8_ROUNDING), though
// the site goes through fp8_block in blocks of PRAC_FP8_BLOCK_ROWS rows (N spans two blocks here); the restore the
// dequantized Xc times Pᵀ (by the same row blocks); the weight
// gradient from the dequantized Xc (in the site's fp8_wgrad scratch). A second save of the layer draws other bits.
TEST(PracFp8, SiteSaveRestoreWeightGradEqualTheTwins) {
    const int N = PRAC_FP8_BLOCK_ROWS + 40, n = 24, L = 2, OC = 5;
    CpuBackend be;
    PracOptions o = opts(PracMode::PRAC);
    o.linear_r1_abs = 8;
    o.linear_r2_abs = 8;
    o.storage = PracStorage::FP8;
    ActSite<CpuBackend> site = make_site<CpuBackend>("ln2", 3, SiteClass::LINEAR, n, L, L, o);
    ASSERT_TRUE(site.compressed() && site.dims.fp8);
    const int r = site.r();
    std::vector<TensorSpec> acts, bases;
    site_add_specs(site, N, acts, bases);
    ASSERT_EQ(acts.size(), 2u);
    EXPECT_EQ(acts[0].dtype, DType::F8E4M3);
    EXPECT_EQ(acts[0].numel, (size_t)L * N * r);
    EXPECT_EQ(acts[1].dtype, DType::F32);
    EXPECT_EQ(acts[1].numel, (size_t)L * N);
    std::vector<ActSite<CpuBackend>> one = {site};
    EXPECT_EQ(fp8_block_scratch(one, N), (size_t)PRAC_FP8_BLOCK_ROWS * r);

    fvec P((size_t)L * n * r), scales((size_t)L * N), transient((size_t)N * n), block(fp8_block_scratch(one, N));
    std::vector<uint8_t> packed((size_t)L * N * r);
    site.P = P.data();
    site.packed8 = packed.data();
    site.scales = scales.data();
    site.transient = transient.data();
    site.fp8_block = block.data();
    Rng rng(11);
    fvec X = rng.normals_f((size_t)N * n);
    transient = X;
    site.save(be, 1, N, {}, 42, nullptr);
    EXPECT_EQ(site.fp8_saves[1], 1);
    EXPECT_EQ(site.fp8_saves[0], 0);
    const float* Pl = P.data() + (size_t)n * r;
    fvec xc((size_t)N * r), sc(N), xq((size_t)N * r), xt((size_t)N * n);
    std::vector<uint8_t> q((size_t)N * r);
    prac_compress_cpu(xc.data(), X.data(), Pl, N, n, r);
    prac_fp8_quantize_cpu(q.data(), sc.data(), xc.data(), N, r, 0, {42, 3, 1, 0, PRAC_DRAW_FP8_ROUNDING});
    EXPECT_TRUE(std::equal(q.begin(), q.end(), packed.begin() + (size_t)N * r)) << "codes";
    EXPECT_TRUE(std::equal(sc.begin(), sc.end(), scales.begin() + N)) << "scales";

    prac_fp8_dequantize_cpu(xq.data(), q.data(), sc.data(), N, r);
    // the reconstruction GEMM by the site's row blocks (OpenBLAS may round a row differently in another M)
    for (int i0 = 0; i0 < N; i0 += PRAC_FP8_BLOCK_ROWS)
        prac_reconstruct_cpu(xt.data() + (size_t)i0 * n, xq.data() + (size_t)i0 * r, Pl,
                             std::min(PRAC_FP8_BLOCK_ROWS, N - i0), n, r);
    std::fill(transient.begin(), transient.end(), -1.0f);
    float* back = site.restore(be, 1, N);
    EXPECT_EQ(back, transient.data());
    EXPECT_EQ(0, std::memcmp(xt.data(), back, xt.size() * sizeof(float))) << "restore";

    fvec dY = rng.normals_f((size_t)N * OC), dW((size_t)OC * n, 0.5f), dWref = dW, tmp((size_t)OC * r);
    fvec db(OC, 0.25f), dbref = db, wgrad_xc((size_t)N * r);
    site.wgrad_tmp = tmp.data();
    site.fp8_wgrad = wgrad_xc.data();
    site.weight_grad(be, 1, N, dW.data(), db.data(), dY.data(), OC);
    fvec tmp2((size_t)OC * r);
    prac_weight_grad_cpu(dWref.data(), dbref.data(), dY.data(), xq.data(), Pl, N, n, r, OC, tmp2.data());
    EXPECT_EQ(dW, dWref) << "weight_grad";
    EXPECT_EQ(db, dbref);

    transient = X;  // the same activation saved again: the next key, other rounding bits
    site.save(be, 1, N, {}, 42, nullptr);
    EXPECT_EQ(site.fp8_saves[1], 2);
    EXPECT_FALSE(std::equal(q.begin(), q.end(), packed.begin() + (size_t)N * r));
}
