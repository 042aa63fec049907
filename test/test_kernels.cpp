// Unit tests of the CPU op twins in kernels/*.h.
//
// Every backward is checked against central finite differences of its own forward, in double precision (each
// op family is a template on the scalar type: T = double here, float in the trainer). For an op out = f(in)
// the scalar objective is L = sum(out * R) with a fixed random R, so dout = R and the backward must return
// exactly dL/din. Forwards are checked against naive reference implementations, AdamW against a direct scalar
// re-implementation of PyTorch's documented formulas, and a few ops are also run in float and compared with
// the double run on the same inputs (the trainer computes in float).
//
// Deterministic: fixed seeds, std::mt19937 with our own uniform/normal transforms. Runs in well under a
// second with OMP_NUM_THREADS=2.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/classifier.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/seqcls.h"
#include "kernels/swiglu.h"

namespace {

using vec = std::vector<double>;

// ---- tolerances ----
// kH / kGradTol: central differences (L(x+h) - L(x-h)) / 2h in double. The truncation error is
// h^2 |L'''| / 6 ~ 1e-13 for these smooth O(1) functions; the rounding error is ~ eps_double * |L| / h
// ~ 2e-16 * |L| / 1e-6 ~ 1e-9 with |L| <= ~10 here. A correct gradient thus agrees to ~1e-8 in
// max|analytic - numeric| / max(1, max|numeric|); 1e-6 leaves two orders of magnitude of headroom, while
// any real mistake (a missing term, factor, sign or wrong index) shows up at 1e-3..1.
constexpr double kH = 1e-6;
constexpr double kGradTol = 1e-6;
// kRefTol: a kernel against a naive double reference of the same formula: only the summation order
// differs, ~ n * eps_double ~ 1e-14 for the sizes here.
constexpr double kRefTol = 1e-12;
// kF32Tol: float run against the double run of the same op on the same (float-representable) inputs:
// eps_float ~ 6e-8 times the short accumulations used here stays below ~1e-6.
constexpr double kF32Tol = 1e-5;
constexpr double kPi = 3.14159265358979323846;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- deterministic random numbers ----
// std::mt19937's output sequence is fixed by the standard; the std::*_distribution classes are not, so the
// transforms are our own.
class Rng {
public:
    explicit Rng(uint32_t seed) : gen_(seed) {}
    double uniform() { return ((double)(uint32_t)gen_() + 0.5) / 4294967296.0; }  // in (0, 1)
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    double normal() {  // Box-Muller
        double u1 = uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
    }
    vec normals(size_t n, double mean = 0.0, double sd = 1.0) {
        vec x(n);
        for (auto& e : x) e = mean + sd * normal();
        return x;
    }
    vec uniforms(size_t n, double lo, double hi) {
        vec x(n);
        for (auto& e : x) e = uniform(lo, hi);
        return x;
    }

private:
    std::mt19937 gen_;
};

// ---- helpers ----
double dot(const vec& a, const vec& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}
vec minus(const vec& a, const vec& b) {
    vec d(a.size());
    for (size_t i = 0; i < a.size(); i++) d[i] = a[i] - b[i];
    return d;
}
vec scaled(const vec& a, double s) {
    vec d(a);
    for (auto& e : d) e *= s;
    return d;
}
template <typename T>
std::vector<T> cast(const vec& x) {
    return std::vector<T>(x.begin(), x.end());
}
template <typename T>
vec widen(const std::vector<T>& x) {
    return vec(x.begin(), x.end());
}
// round every entry to float, so float and double runs see identical inputs
vec f32(const vec& x) { return widen(cast<float>(x)); }

// Numerical gradient of loss() w.r.t. every entry of x (loss() reads x by reference), central differences.
template <class F>
vec numgrad(vec& x, F&& loss) {
    vec g(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        double s = x[i];
        x[i] = s + kH;
        double lp = loss();
        x[i] = s - kH;
        double lm = loss();
        x[i] = s;
        g[i] = (lp - lm) / (2 * kH);
    }
    return g;
}

// max|got - ref| / max(1, max|ref|) < tol; NaN/inf in got fails.
::testing::AssertionResult Close(const vec& got, const vec& ref, double tol) {
    if (got.size() != ref.size())
        return ::testing::AssertionFailure() << "size " << got.size() << " vs expected " << ref.size();
    double maxdiff = 0, maxref = 0;
    size_t worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!std::isfinite(got[i]))
            return ::testing::AssertionFailure() << "non-finite value " << got[i] << " at index " << i;
        double d = std::fabs(got[i] - ref[i]);
        if (d > maxdiff) maxdiff = d, worst = i;
        maxref = std::max(maxref, std::fabs(ref[i]));
    }
    double err = maxdiff / std::max(1.0, maxref);
    if (err < tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "relative error " << err << " >= " << tol << "; worst index " << worst
                                         << ": got " << got[worst] << ", expected " << ref[worst] << " (max|ref| "
                                         << maxref << ")";
}

// ======================================================================================== residual
TEST(Residual, ForwardIsElementwiseSum) {
    Rng rng(1);
    const size_t n = 1001;
    vec a = rng.normals(n), b = rng.normals(n), out(n, kNaN);
    residual_forward_cpu(out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(out[i], a[i] + b[i]) << "index " << i;
}

// ======================================================================================== matmul
struct MatmulShape {
    int N, C, OC;
    bool bias;
};
const MatmulShape kMatmulShapes[] = {{5, 7, 3, true}, {4, 6, 9, false}, {1, 3, 1, true}, {6, 1, 4, true}};

struct MatmulCase {
    MatmulShape s;
    vec inp, w, b, R;
    MatmulCase(MatmulShape s_, uint32_t seed) : s(s_) {
        Rng rng(seed);
        inp = rng.normals((size_t)s.N * s.C);
        w = rng.normals((size_t)s.OC * s.C, 0.0, 0.5);
        b = s.bias ? rng.normals(s.OC) : vec();
        R = rng.normals((size_t)s.N * s.OC);
    }
    template <typename T = double>
    vec forward() const {
        auto ti = cast<T>(inp), tw = cast<T>(w), tb = cast<T>(b);
        std::vector<T> out((size_t)s.N * s.OC, T(kNaN));
        matmul_forward_cpu(out.data(), ti.data(), tw.data(), s.bias ? tb.data() : nullptr, s.N, s.C, s.OC);
        return widen(out);
    }
    double loss() const { return dot(forward(), R); }
};
std::string trace(const MatmulShape& s) {
    return "N=" + std::to_string(s.N) + " C=" + std::to_string(s.C) + " OC=" + std::to_string(s.OC) +
           (s.bias ? " bias" : " no bias");
}

TEST(Matmul, ForwardMatchesNaive) {
    for (const auto& s : kMatmulShapes) {
        SCOPED_TRACE(trace(s));
        MatmulCase c(s, 10);
        vec ref((size_t)s.N * s.OC);
        for (int n = 0; n < s.N; n++)
            for (int o = 0; o < s.OC; o++) {
                double acc = s.bias ? c.b[o] : 0.0;
                for (int k = 0; k < s.C; k++) acc += c.inp[(size_t)n * s.C + k] * c.w[(size_t)o * s.C + k];
                ref[(size_t)n * s.OC + o] = acc;
            }
        EXPECT_TRUE(Close(c.forward(), ref, kRefTol));
    }
}

// gemm_cpu (the row-major wrapper over cblas that every CPU matmul, PRAC projection and test reference goes through),
// double and float, in all four transpose combinations, with leading dimensions wider than the operands, alpha and
// beta, against naive loops: C (M, N) = alpha op(A) op(B) + beta C, op(A) (M, K), op(B) (K, N).
TEST(Gemm, AllTransposesAndLeadingDimensionsMatchNaiveLoops) {
    const int M = 5, N = 7, K = 3, pad = 2;
    const double alpha = 0.75, beta = -0.5;
    for (bool ta : {false, true})
        for (bool tb : {false, true}) {
            SCOPED_TRACE(std::string("trans_a ") + (ta ? "yes" : "no") + ", trans_b " + (tb ? "yes" : "no"));
            Rng rng(31 + 2 * ta + tb);
            const int rows_a = ta ? K : M, cols_a = ta ? M : K, rows_b = tb ? N : K, cols_b = tb ? K : N;
            const int lda = cols_a + pad, ldb = cols_b + pad, ldc = N + pad;
            vec A = rng.normals((size_t)rows_a * lda), B = rng.normals((size_t)rows_b * ldb),
                C = rng.normals((size_t)M * ldc);
            auto a = [&](int i, int k) { return ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]; };
            auto b = [&](int k, int j) { return tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]; };
            vec ref = C;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double acc = 0;
                    for (int k = 0; k < K; k++) acc += a(i, k) * b(k, j);
                    ref[(size_t)i * ldc + j] = alpha * acc + beta * C[(size_t)i * ldc + j];
                }
            vec got = C;
            gemm_cpu(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, got.data(), ldc);
            EXPECT_TRUE(Close(got, ref, kRefTol));  // the padding columns of C included: untouched
            std::vector<float> Af(A.begin(), A.end()), Bf(B.begin(), B.end()), Cf(C.begin(), C.end());
            gemm_cpu(ta, tb, M, N, K, (float)alpha, Af.data(), lda, Bf.data(), ldb, (float)beta, Cf.data(), ldc);
            EXPECT_TRUE(Close(vec(Cf.begin(), Cf.end()), ref, kF32Tol));
        }
}

TEST(Matmul, BackwardInputOverwriteMatchesFiniteDifferences) {
    for (const auto& s : kMatmulShapes) {
        SCOPED_TRACE(trace(s));
        MatmulCase c(s, 11);
        vec num = numgrad(c.inp, [&] { return c.loss(); });
        vec dinp((size_t)s.N * s.C, kNaN);  // garbage: accumulate=false must overwrite it
        matmul_backward_input_cpu(dinp.data(), c.R.data(), c.w.data(), s.N, s.C, s.OC, false);
        EXPECT_TRUE(Close(dinp, num, kGradTol));
    }
}

TEST(Matmul, BackwardInputAccumulateAddsFiniteDifferenceGradient) {
    for (const auto& s : kMatmulShapes) {
        SCOPED_TRACE(trace(s));
        MatmulCase c(s, 12);
        vec num = numgrad(c.inp, [&] { return c.loss(); });
        vec d0 = Rng(99).normals((size_t)s.N * s.C), dinp = d0;
        matmul_backward_input_cpu(dinp.data(), c.R.data(), c.w.data(), s.N, s.C, s.OC, true);
        EXPECT_TRUE(Close(minus(dinp, d0), num, kGradTol));
    }
}

TEST(Matmul, BackwardWeightAndBiasAccumulateFiniteDifferenceGradient) {
    for (const auto& s : kMatmulShapes) {
        SCOPED_TRACE(trace(s));
        MatmulCase c(s, 13);
        vec num_w = numgrad(c.w, [&] { return c.loss(); });
        vec num_b = numgrad(c.b, [&] { return c.loss(); });
        Rng rng(98);
        vec dw0 = rng.normals(c.w.size()), db0 = rng.normals(c.b.size());
        vec dw = dw0, db = db0;
        matmul_backward_weight_cpu(dw.data(), s.bias ? db.data() : nullptr, c.R.data(), c.inp.data(), s.N, s.C,
                                   s.OC);
        EXPECT_TRUE(Close(minus(dw, dw0), num_w, kGradTol)) << "dweight";
        EXPECT_TRUE(Close(minus(db, db0), num_b, kGradTol)) << "dbias";
        // a second micro-step accumulates again (gradient accumulation)
        matmul_backward_weight_cpu(dw.data(), s.bias ? db.data() : nullptr, c.R.data(), c.inp.data(), s.N, s.C,
                                   s.OC);
        EXPECT_TRUE(Close(minus(dw, dw0), scaled(num_w, 2), kGradTol)) << "dweight after two calls";
        EXPECT_TRUE(Close(minus(db, db0), scaled(num_b, 2), kGradTol)) << "dbias after two calls";
    }
}

// ======================================================================================== encoder
TEST(Encoder, ForwardAndBackwardWithAndWithoutPositions) {
    const int B = 2, Tl = 5, C = 4, Vocab = 7;
    // repeated tokens (3 appears 3x, 1 appears 4x), tokens 2, 4, 5 unused
    const std::vector<int32_t> tokens = {1, 3, 3, 6, 1, 0, 3, 1, 1, 6};
    for (bool use_wpe : {true, false}) {
        SCOPED_TRACE(use_wpe ? "with wpe" : "without wpe");
        Rng rng(20);
        vec wte = rng.normals((size_t)Vocab * C), wpe = rng.normals((size_t)Tl * C);
        vec R = rng.normals((size_t)B * Tl * C);
        auto forward = [&] {
            vec out((size_t)B * Tl * C, kNaN);
            encoder_forward_cpu(out.data(), tokens.data(), wte.data(), use_wpe ? wpe.data() : nullptr, B, Tl, C);
            return out;
        };
        vec out = forward();
        for (int n = 0; n < B * Tl; n++)
            for (int c = 0; c < C; c++) {
                double ref = wte[(size_t)tokens[n] * C + c] + (use_wpe ? wpe[(size_t)(n % Tl) * C + c] : 0.0);
                ASSERT_EQ(out[(size_t)n * C + c], ref) << "row " << n << " channel " << c;
            }
        auto loss = [&] { return dot(forward(), R); };
        vec num_wte = numgrad(wte, loss), num_wpe = numgrad(wpe, loss);
        vec dwte0 = rng.normals(wte.size()), dwpe0 = rng.normals(wpe.size());
        vec dwte = dwte0, dwpe = dwpe0;
        encoder_backward_cpu(dwte.data(), use_wpe ? dwpe.data() : nullptr, R.data(), tokens.data(), B, Tl, C);
        EXPECT_TRUE(Close(minus(dwte, dwte0), num_wte, kGradTol)) << "dwte";
        if (use_wpe)
            EXPECT_TRUE(Close(minus(dwpe, dwpe0), num_wpe, kGradTol)) << "dwpe";
        else
            EXPECT_EQ(dwpe, dwpe0);
        for (int tok : {2, 4, 5})  // unused rows are untouched
            for (int c = 0; c < C; c++) EXPECT_EQ(dwte[(size_t)tok * C + c], dwte0[(size_t)tok * C + c]);
    }
}

// ======================================================================================== layernorm
template <typename T>
void ln_forward(vec& out, vec& mean, vec& rstd, const vec& x, const vec& w, const vec& b, int N, int C,
                float eps) {
    auto tx = cast<T>(x), tw = cast<T>(w), tb = cast<T>(b);
    std::vector<T> o((size_t)N * C, T(kNaN)), m(N, T(kNaN)), s(N, T(kNaN));
    layernorm_forward_cpu(o.data(), m.data(), s.data(), tx.data(), tw.data(), tb.data(), N, C, eps);
    out = widen(o), mean = widen(m), rstd = widen(s);
}
template <typename T>
void ln_backward(vec& dinp, vec& dw, vec& db, const vec& dout, const vec& x, const vec& w, const vec& mean,
                 const vec& rstd, int N, int C) {
    auto tdi = cast<T>(dinp), tdw = cast<T>(dw), tdb = cast<T>(db), tdo = cast<T>(dout), tx = cast<T>(x),
         tw = cast<T>(w), tm = cast<T>(mean), ts = cast<T>(rstd);
    layernorm_backward_cpu(tdi.data(), tdw.data(), tdb.data(), tdo.data(), tx.data(), tw.data(), tm.data(),
                           ts.data(), N, C);
    dinp = widen(tdi), dw = widen(tdw), db = widen(tdb);
}

struct NormShape {
    int N, C;
};
const NormShape kNormShapes[] = {{6, 10}, {3, 7}, {1, 3}};
constexpr float kNormEps = 1e-5f;

TEST(LayerNorm, ForwardMatchesNaive) {
    for (const auto& s : kNormShapes) {
        SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C));
        Rng rng(30);
        vec x = rng.normals((size_t)s.N * s.C, 0.5, 2.0), w = rng.normals(s.C, 1.0, 0.3), b = rng.normals(s.C);
        vec out, mean, rstd;
        ln_forward<double>(out, mean, rstd, x, w, b, s.N, s.C, kNormEps);
        vec ref_out(out.size()), ref_mean(s.N), ref_rstd(s.N);
        for (int n = 0; n < s.N; n++) {
            const double* r = &x[(size_t)n * s.C];
            double m = 0, v = 0;
            for (int c = 0; c < s.C; c++) m += r[c] / s.C;
            for (int c = 0; c < s.C; c++) v += (r[c] - m) * (r[c] - m) / s.C;  // biased variance
            double rs = 1.0 / std::sqrt(v + (double)kNormEps);
            for (int c = 0; c < s.C; c++) ref_out[(size_t)n * s.C + c] = (r[c] - m) * rs * w[c] + b[c];
            ref_mean[n] = m, ref_rstd[n] = rs;
        }
        EXPECT_TRUE(Close(out, ref_out, kRefTol)) << "out";
        EXPECT_TRUE(Close(mean, ref_mean, kRefTol)) << "mean";
        EXPECT_TRUE(Close(rstd, ref_rstd, kRefTol)) << "rstd";
    }
}

TEST(LayerNorm, BackwardAccumulatesFiniteDifferenceGradient) {
    for (const auto& s : kNormShapes) {
        SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C));
        Rng rng(31);
        vec x = rng.normals((size_t)s.N * s.C, 0.5, 2.0), w = rng.normals(s.C, 1.0, 0.3), b = rng.normals(s.C);
        vec R = rng.normals(x.size());
        auto loss = [&] {
            vec out, mean, rstd;
            ln_forward<double>(out, mean, rstd, x, w, b, s.N, s.C, kNormEps);
            return dot(out, R);
        };
        vec num_x = numgrad(x, loss), num_w = numgrad(w, loss), num_b = numgrad(b, loss);
        vec out, mean, rstd;
        ln_forward<double>(out, mean, rstd, x, w, b, s.N, s.C, kNormEps);
        // all three gradients accumulate: start from nonzero buffers and check the increments
        vec dinp0 = rng.normals(x.size()), dw0 = rng.normals(s.C), db0 = rng.normals(s.C);
        vec dinp = dinp0, dw = dw0, db = db0;
        ln_backward<double>(dinp, dw, db, R, x, w, mean, rstd, s.N, s.C);
        EXPECT_TRUE(Close(minus(dinp, dinp0), num_x, kGradTol)) << "dinp";
        EXPECT_TRUE(Close(minus(dw, dw0), num_w, kGradTol)) << "dweight";
        EXPECT_TRUE(Close(minus(db, db0), num_b, kGradTol)) << "dbias";
    }
}

// ======================================================================================== rmsnorm
template <typename T>
void rms_forward(vec& out, vec& rstd, const vec& x, const vec& w, int N, int C, float eps) {
    auto tx = cast<T>(x), tw = cast<T>(w);
    std::vector<T> o((size_t)N * C, T(kNaN)), s(N, T(kNaN));
    rmsnorm_forward_cpu(o.data(), s.data(), tx.data(), tw.data(), N, C, eps);
    out = widen(o), rstd = widen(s);
}
template <typename T>
void rms_backward(vec& dinp, vec& dw, const vec& dout, const vec& x, const vec& w, const vec& rstd, int N, int C) {
    auto tdi = cast<T>(dinp), tdw = cast<T>(dw), tdo = cast<T>(dout), tx = cast<T>(x), tw = cast<T>(w),
         ts = cast<T>(rstd);
    rmsnorm_backward_cpu(tdi.data(), tdw.data(), tdo.data(), tx.data(), tw.data(), ts.data(), N, C);
    dinp = widen(tdi), dw = widen(tdw);
}

TEST(RmsNorm, ForwardMatchesNaive) {
    for (const auto& s : kNormShapes) {
        SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C));
        Rng rng(40);
        vec x = rng.normals((size_t)s.N * s.C, 0.3, 1.5), w = rng.normals(s.C, 1.0, 0.3);
        vec out, rstd;
        rms_forward<double>(out, rstd, x, w, s.N, s.C, kNormEps);
        vec ref_out(out.size()), ref_rstd(s.N);
        for (int n = 0; n < s.N; n++) {
            const double* r = &x[(size_t)n * s.C];
            double ms = 0;
            for (int c = 0; c < s.C; c++) ms += r[c] * r[c] / s.C;
            double rs = 1.0 / std::sqrt(ms + (double)kNormEps);
            for (int c = 0; c < s.C; c++) ref_out[(size_t)n * s.C + c] = w[c] * r[c] * rs;
            ref_rstd[n] = rs;
        }
        EXPECT_TRUE(Close(out, ref_out, kRefTol)) << "out";
        EXPECT_TRUE(Close(rstd, ref_rstd, kRefTol)) << "rstd";
    }
}

TEST(RmsNorm, BackwardAccumulatesFiniteDifferenceGradient) {
    for (const auto& s : kNormShapes) {
        SCOPED_TRACE("N=" + std::to_string(s.N) + " C=" + std::to_string(s.C));
        Rng rng(41);
        vec x = rng.normals((size_t)s.N * s.C, 0.3, 1.5), w = rng.normals(s.C, 1.0, 0.3);
        vec R = rng.normals(x.size());
        auto loss = [&] {
            vec out, rstd;
            rms_forward<double>(out, rstd, x, w, s.N, s.C, kNormEps);
            return dot(out, R);
        };
        vec num_x = numgrad(x, loss), num_w = numgrad(w, loss);
        vec out, rstd;
        rms_forward<double>(out, rstd, x, w, s.N, s.C, kNormEps);
        vec dinp0 = rng.normals(x.size()), dw0 = rng.normals(s.C);
        vec dinp = dinp0, dw = dw0;
        rms_backward<double>(dinp, dw, R, x, w, rstd, s.N, s.C);
        EXPECT_TRUE(Close(minus(dinp, dinp0), num_x, kGradTol)) << "dinp";
        EXPECT_TRUE(Close(minus(dw, dw0), num_w, kGradTol)) << "dweight";
    }
}

// ======================================================================================== gelu
template <typename T>
vec gelu_fwd(const vec& x) {
    auto tx = cast<T>(x);
    std::vector<T> o(x.size(), T(kNaN));
    gelu_forward_cpu(o.data(), tx.data(), x.size());
    return widen(o);
}
template <typename T>
vec gelu_bwd(const vec& x, const vec& dout) {
    auto tx = cast<T>(x), td = cast<T>(dout);
    std::vector<T> d(x.size(), T(kNaN));  // garbage: must be overwritten
    gelu_backward_cpu(d.data(), tx.data(), td.data(), x.size());
    return widen(d);
}
vec gelu_inputs() {
    vec x;
    for (int i = 0; i <= 24; i++) x.push_back(-6.0 + 0.5 * i);  // -6 .. 6, includes 0
    vec r = Rng(50).normals(16, 0.0, 2.0);
    x.insert(x.end(), r.begin(), r.end());
    return x;
}

TEST(Gelu, ForwardIsTanhApproximation) {
    vec x = gelu_inputs(), ref(x.size());
    for (size_t i = 0; i < x.size(); i++)
        ref[i] = 0.5 * x[i] * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x[i] + 0.044715 * std::pow(x[i], 3))));
    EXPECT_TRUE(Close(gelu_fwd<double>(x), ref, kRefTol));
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
    vec x = gelu_inputs();
    vec R = Rng(51).normals(x.size());
    vec num = numgrad(x, [&] { return dot(gelu_fwd<double>(x), R); });
    EXPECT_TRUE(Close(gelu_bwd<double>(x, R), num, kGradTol));
}

template <typename T>
vec gelu_erf_fwd(const vec& x) {
    auto tx = cast<T>(x);
    std::vector<T> o(x.size(), T(kNaN));
    gelu_erf_forward_cpu(o.data(), tx.data(), x.size());
    return widen(o);
}

// The exact GeLU is x times the standard normal CDF (erfc form, as the CDF is usually written)
TEST(GeluErf, ForwardIsXTimesNormalCdf) {
    vec x = gelu_inputs(), ref(x.size());
    for (size_t i = 0; i < x.size(); i++) ref[i] = x[i] * 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
    EXPECT_TRUE(Close(gelu_erf_fwd<double>(x), ref, kRefTol));
    EXPECT_TRUE(Close(gelu_erf_fwd<float>(x), ref, kF32Tol));
}

TEST(GeluErf, BackwardMatchesFiniteDifferences) {
    vec x = gelu_inputs();
    vec R = Rng(52).normals(x.size());
    vec num = numgrad(x, [&] { return dot(gelu_erf_fwd<double>(x), R); });
    vec d(x.size(), kNaN);  // garbage: must be overwritten
    gelu_erf_backward_cpu(d.data(), x.data(), R.data(), x.size());
    EXPECT_TRUE(Close(d, num, kGradTol));
}

// ======================================================================================== swiglu
// inp (2, N*F) = [gate | up] as two blocks (the model's separate gate and up buffers); the gradient likewise.
template <typename T>
vec swiglu_fwd(const vec& inp, int N, int F) {
    const size_t n = (size_t)N * F;
    auto ti = cast<T>(inp);
    std::vector<T> o(n, T(kNaN));
    swiglu_forward_cpu(o.data(), ti.data(), ti.data() + n, n);
    return widen(o);
}
template <typename T>
vec swiglu_bwd(const vec& inp, const vec& dout, int N, int F) {
    const size_t n = (size_t)N * F;
    auto ti = cast<T>(inp), td = cast<T>(dout);
    std::vector<T> d(2 * n, T(kNaN));  // garbage: must be overwritten
    swiglu_backward_cpu(d.data(), d.data() + n, ti.data(), ti.data() + n, td.data(), n);
    return widen(d);
}

TEST(SwiGLU, ForwardMatchesNaive) {
    const int N = 4, F = 5;
    const size_t n = (size_t)N * F;
    vec inp = Rng(60).normals(2 * n, 0.0, 2.0), ref(n);
    for (size_t i = 0; i < n; i++) ref[i] = inp[i] / (1.0 + std::exp(-inp[i])) * inp[n + i];
    EXPECT_TRUE(Close(swiglu_fwd<double>(inp, N, F), ref, kRefTol));
}

TEST(SwiGLU, BackwardMatchesFiniteDifferences) {
    for (auto [N, F] : {std::pair{4, 5}, std::pair{1, 1}, std::pair{3, 8}}) {
        SCOPED_TRACE("N=" + std::to_string(N) + " F=" + std::to_string(F));
        Rng rng(61);
        vec inp = rng.normals((size_t)N * 2 * F, 0.0, 2.0), R = rng.normals((size_t)N * F);
        vec num = numgrad(inp, [&] { return dot(swiglu_fwd<double>(inp, N, F), R); });
        EXPECT_TRUE(Close(swiglu_bwd<double>(inp, R, N, F), num, kGradTol));
    }
}

// The model runs the backward in place (dgate over gate, dup over up: docs/DESIGN.md section 4.1): the same bits
// as into separate buffers.
TEST(SwiGLU, BackwardInPlaceIsBitwiseOutOfPlace) {
    const size_t n = 37;
    Rng rng(62);
    std::vector<float> gu = cast<float>(rng.normals(2 * n, 0.0, 2.0)), dy = cast<float>(rng.normals(n));
    std::vector<float> d(2 * n, kNaN);
    swiglu_backward_cpu(d.data(), d.data() + n, gu.data(), gu.data() + n, dy.data(), n);
    swiglu_backward_cpu(gu.data(), gu.data() + n, gu.data(), gu.data() + n, dy.data(), n);
    EXPECT_EQ(0, std::memcmp(d.data(), gu.data(), 2 * n * sizeof(float)));
}

// ======================================================================================== rope
struct RopeCase {
    int B, Tl, NH, HS;
    float theta;
};
const RopeCase kRopeCases[] = {{2, 5, 2, 6, 10000.f}, {1, 7, 3, 8, 10.f}, {2, 3, 1, 2, 500.f}, {1, 9, 2, 4, 1.5f}};
std::string trace(const RopeCase& r) {
    return "B=" + std::to_string(r.B) + " T=" + std::to_string(r.Tl) + " NH=" + std::to_string(r.NH) +
           " HS=" + std::to_string(r.HS) + " theta=" + std::to_string(r.theta);
}
vec rope_table(const RopeCase& r) {
    vec f((size_t)r.Tl * r.HS, kNaN);  // (T, HS/2, 2)
    rope_table_cpu(f.data(), r.Tl, r.HS, r.theta);
    return f;
}
vec rope_apply(vec qkv, const vec& freqs, const RopeCase& r, bool backward) {
    rope_cpu(qkv.data(), freqs.data(), r.B, r.Tl, r.NH * r.HS, r.NH, backward);
    return qkv;
}

TEST(RoPE, TableMatchesAngles) {
    for (const auto& r : kRopeCases) {
        SCOPED_TRACE(trace(r));
        vec f = rope_table(r);
        int h = r.HS / 2;
        for (int t = 0; t < r.Tl; t++)
            for (int i = 0; i < h; i++) {
                // angle_i = t * theta^(-2i/HS); the kernel forms it in fp32 (as the reference implementation),
                // so it matches the exact angle to ~T * eps_float
                double a = t * std::pow((double)r.theta, -2.0 * i / r.HS);
                EXPECT_NEAR(f[((size_t)t * h + i) * 2], std::cos(a), 1e-5) << "t " << t << " i " << i;
                EXPECT_NEAR(f[((size_t)t * h + i) * 2 + 1], std::sin(a), 1e-5) << "t " << t << " i " << i;
                if (t == 0) {
                    EXPECT_EQ(f[((size_t)t * h + i) * 2], 1.0);
                    EXPECT_EQ(f[((size_t)t * h + i) * 2 + 1], 0.0);
                }
            }
    }
}

TEST(RoPE, ForwardRotatesHalvesPreservesNormsAndIsIdentityAtPositionZero) {
    for (const auto& r : kRopeCases) {
        SCOPED_TRACE(trace(r));
        const int C = r.NH * r.HS, h = r.HS / 2;
        vec x = Rng(70).normals((size_t)r.B * r.Tl * 3 * C), f = rope_table(r);
        vec y = rope_apply(x, f, r, false);
        for (int n = 0; n < r.B * r.Tl; n++) {
            int t = n % r.Tl;
            for (int part = 0; part < 3; part++)
                for (int hd = 0; hd < r.NH; hd++) {
                    size_t base = (size_t)n * 3 * C + (size_t)part * C + (size_t)hd * r.HS;
                    double nx = 0, ny = 0;
                    for (int i = 0; i < h; i++) {
                        double x1 = x[base + i], x2 = x[base + i + h], y1 = y[base + i], y2 = y[base + i + h];
                        nx += x1 * x1 + x2 * x2, ny += y1 * y1 + y2 * y2;
                        if (part == 2 || t == 0) {  // v untouched; position 0 is the identity (cos 1, sin 0)
                            ASSERT_EQ(y1, x1) << "row " << n << " part " << part << " head " << hd << " i " << i;
                            ASSERT_EQ(y2, x2) << "row " << n << " part " << part << " head " << hd << " i " << i;
                        } else {  // rotate-half formula
                            double c = f[((size_t)t * h + i) * 2], s = f[((size_t)t * h + i) * 2 + 1];
                            EXPECT_NEAR(y1, x1 * c - x2 * s, 1e-14);
                            EXPECT_NEAR(y2, x2 * c + x1 * s, 1e-14);
                            // each (i, i+h) pair keeps its norm
                            EXPECT_NEAR(y1 * y1 + y2 * y2, x1 * x1 + x2 * x2, 1e-12 * (1 + x1 * x1 + x2 * x2));
                        }
                    }
                    EXPECT_NEAR(ny, nx, 1e-12 * (1 + nx)) << "head vector norm, row " << n << " part " << part;
                }
        }
    }
}

TEST(RoPE, BackwardIsGradientOfForwardAndItsInverse) {
    for (const auto& r : kRopeCases) {
        SCOPED_TRACE(trace(r));
        const int C = r.NH * r.HS;
        Rng rng(71);
        vec x = rng.normals((size_t)r.B * r.Tl * 3 * C), R = rng.normals(x.size()), f = rope_table(r);
        vec num = numgrad(x, [&] { return dot(rope_apply(x, f, r, false), R); });
        EXPECT_TRUE(Close(rope_apply(R, f, r, true), num, kGradTol)) << "gradient";
        EXPECT_TRUE(Close(rope_apply(rope_apply(x, f, r, false), f, r, true), x, kRefTol)) << "inverse";
    }
}

// ======================================================================================== attention
struct AttnCase {
    int B, Tl, NH, HS;
    bool causal;
    std::vector<int> kv_len = {};  // per sequence (an encoder's key-padding mask); empty: none
    const int* lens() const { return kv_len.empty() ? nullptr : kv_len.data(); }
};
const AttnCase kAttnCases[] = {
    {2, 9, 3, 8, true}, {2, 9, 3, 8, false}, {1, 7, 2, 6, true}, {1, 7, 2, 6, false},
    {2, 5, 3, 6, true}, {1, 8, 2, 8, false}, {2, 1, 2, 6, true}, {1, 1, 2, 8, false},
    // key padding: full, partial and one-token rows; with the causal mask too
    {2, 9, 3, 8, false, {9, 4}}, {3, 7, 2, 6, false, {1, 7, 5}}, {2, 9, 3, 8, true, {6, 9}},
};
std::string trace(const AttnCase& a) {
    std::string lens;
    for (int l : a.kv_len) lens += (lens.empty() ? " kv_len=" : ",") + std::to_string(l);
    return "B=" + std::to_string(a.B) + " T=" + std::to_string(a.Tl) + " NH=" + std::to_string(a.NH) +
           " HS=" + std::to_string(a.HS) + (a.causal ? " causal" : " non-causal") + lens;
}
vec attn_qkv(const AttnCase& a, uint32_t seed) {
    // sd 1.5 makes the softmax rows reasonably peaked, so both large and small probabilities are exercised
    return Rng(seed).normals((size_t)a.B * a.Tl * 3 * a.NH * a.HS, 0.0, 1.5);
}
template <typename T>
void attn_forward(vec& out, vec& lse, const vec& qkv, const AttnCase& a) {
    const int C = a.NH * a.HS;
    auto tq = cast<T>(qkv);
    std::vector<T> o((size_t)a.B * a.Tl * C, T(kNaN)), l((size_t)a.B * a.NH * a.Tl, T(kNaN));
    attention_forward_cpu(o.data(), l.data(), tq.data(), a.B, a.Tl, C, a.NH, a.causal, a.lens());
    out = widen(o), lse = widen(l);
}
template <typename T>
vec attn_backward(const vec& dout, const vec& qkv, const vec& out, const vec& lse, const AttnCase& a) {
    auto td = cast<T>(dout), tq = cast<T>(qkv), to = cast<T>(out), tl = cast<T>(lse);
    std::vector<T> d(qkv.size(), T(kNaN));  // garbage: must be overwritten
    attention_backward_cpu(d.data(), td.data(), tq.data(), to.data(), tl.data(), a.B, a.Tl, a.NH * a.HS, a.NH,
                           a.causal, a.lens());
    return widen(d);
}

TEST(Attention, ForwardMatchesNaiveSoftmaxAndLse) {
    for (const auto& a : kAttnCases) {
        SCOPED_TRACE(trace(a));
        const int C = a.NH * a.HS, T = a.Tl;
        vec qkv = attn_qkv(a, 80), out, lse;
        attn_forward<double>(out, lse, qkv, a);
        vec ref_out(out.size()), ref_lse(lse.size());
        const double inf = std::numeric_limits<double>::infinity();
        auto at = [&](int b, int t, int part, int h, int d) {
            return qkv[((size_t)b * T + t) * 3 * C + (size_t)part * C + (size_t)h * a.HS + d];
        };
        for (int b = 0; b < a.B; b++)
            for (int h = 0; h < a.NH; h++) {
                // S = Q K^T / sqrt(d) + masks (-inf above the diagonal when causal, and on padded keys)
                std::vector<vec> S(T, vec(T));
                for (int t = 0; t < T; t++)
                    for (int j = 0; j < T; j++) {
                        double s = 0;
                        for (int d = 0; d < a.HS; d++) s += at(b, t, 0, h, d) * at(b, j, 1, h, d);
                        bool hidden = (a.causal && j > t) || (!a.kv_len.empty() && j >= a.kv_len[b]);
                        S[t][j] = s / std::sqrt((double)a.HS) + (hidden ? -inf : 0.0);
                    }
                for (int t = 0; t < T; t++) {
                    double m = *std::max_element(S[t].begin(), S[t].end()), z = 0, zraw = 0;
                    for (int j = 0; j < T; j++) z += std::exp(S[t][j] - m), zraw += std::exp(S[t][j]);
                    ref_lse[((size_t)b * a.NH + h) * T + t] = std::log(zraw);  // log-sum-exp, scores are small
                    for (int d = 0; d < a.HS; d++) {
                        double o = 0;
                        for (int j = 0; j < T; j++) o += std::exp(S[t][j] - m) / z * at(b, j, 2, h, d);
                        ref_out[((size_t)b * T + t) * C + (size_t)h * a.HS + d] = o;
                    }
                }
            }
        EXPECT_TRUE(Close(out, ref_out, kRefTol)) << "out";
        EXPECT_TRUE(Close(lse, ref_lse, kRefTol)) << "lse";
    }
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
    for (const auto& a : kAttnCases) {
        SCOPED_TRACE(trace(a));
        vec qkv = attn_qkv(a, 81);
        vec R = Rng(82).normals((size_t)a.B * a.Tl * a.NH * a.HS);
        vec out, lse;
        auto loss = [&] {
            attn_forward<double>(out, lse, qkv, a);
            return dot(out, R);
        };
        vec num = numgrad(qkv, loss);
        attn_forward<double>(out, lse, qkv, a);
        EXPECT_TRUE(Close(attn_backward<double>(R, qkv, out, lse, a), num, kGradTol));
    }
}

// ======================================================================================== classifier
struct ClsCase {
    int N = 9, C = 5, V = 13, Vp = 16;
    // row 4-5 form a fully ignored chunk when chunk = 2; targets 0 and V-1 exercise the ends of the vocab
    std::vector<int32_t> targets = {3, -1, 12, 0, -1, -1, 7, 12, 5};
    float grad_scale = 0.37f;
    vec inp, w;
    explicit ClsCase(uint32_t seed, double inp_sd = 1.0) {
        Rng rng(seed);
        inp = rng.normals((size_t)N * C, 0.0, inp_sd);
        w = rng.normals((size_t)Vp * C, 0.0, 0.7);  // rows V..Vp-1 are padding and must not matter
    }
};
// chunk sizes: 1, 3, 9 divide N = 9; 2, 4, 5 do not; 16 exceeds N
const int kChunks[] = {1, 2, 3, 4, 5, 9, 16};

// Runs the fused classifier in precision T. dinp == nullptr: forward only. dinp/dweight are in-out.
template <typename T>
vec classifier_run(const ClsCase& c, int chunk, vec* dinp, vec* dweight) {
    auto ti = cast<T>(c.inp), tw = cast<T>(c.w);
    std::vector<T> losses(c.N, T(kNaN)), tdi, tdw;
    if (dinp) tdi = cast<T>(*dinp), tdw = cast<T>(*dweight);
    // scratch holds exactly chunk * V values; a canary after it detects overruns
    const size_t scratch_n = (size_t)chunk * c.V;
    std::vector<T> scratch(scratch_n + 16, T(12345));
    classifier_forward_backward_cpu(losses.data(), dinp ? tdi.data() : nullptr, dinp ? tdw.data() : nullptr,
                                    ti.data(), tw.data(), c.targets.data(), c.N, c.C, c.V, c.grad_scale,
                                    scratch.data(), chunk);
    for (size_t i = scratch_n; i < scratch.size(); i++) EXPECT_EQ(scratch[i], T(12345)) << "scratch overrun";
    if (dinp) *dinp = widen(tdi), *dweight = widen(tdw);
    return widen(losses);
}

// -log_softmax(inp @ W[:V]^T)[target], 0 for ignored rows
vec classifier_reference_losses(const ClsCase& c) {
    vec losses(c.N, 0.0);
    for (int n = 0; n < c.N; n++) {
        if (c.targets[n] < 0) continue;
        vec logits(c.V);
        for (int v = 0; v < c.V; v++) {
            double s = 0;
            for (int k = 0; k < c.C; k++) s += c.inp[(size_t)n * c.C + k] * c.w[(size_t)v * c.C + k];
            logits[v] = s;
        }
        double m = *std::max_element(logits.begin(), logits.end()), z = 0;
        for (double l : logits) z += std::exp(l - m);
        losses[n] = -(logits[c.targets[n]] - m - std::log(z));
    }
    return losses;
}

TEST(Classifier, LossesMatchNaiveLogSoftmax) {
    ClsCase c(90);
    vec ref = classifier_reference_losses(c);
    for (int chunk : kChunks) {
        SCOPED_TRACE("chunk=" + std::to_string(chunk));
        EXPECT_TRUE(Close(classifier_run<double>(c, chunk, nullptr, nullptr), ref, kRefTol)) << "forward only";
        vec dinp(c.inp.size(), 0.0), dw(c.w.size(), 0.0);
        EXPECT_TRUE(Close(classifier_run<double>(c, chunk, &dinp, &dw), ref, kRefTol)) << "with backward";
    }
}

TEST(Classifier, StableForLargeLogits) {
    ClsCase c(91, 300.0);  // logits of several hundred: exp would overflow without the max shift
    vec ref = classifier_reference_losses(c);
    double maxref = *std::max_element(ref.begin(), ref.end());
    EXPECT_GT(maxref, 100.0);
    for (int chunk : {2, 9}) {
        SCOPED_TRACE("chunk=" + std::to_string(chunk));
        EXPECT_TRUE(Close(classifier_run<double>(c, chunk, nullptr, nullptr), ref, kRefTol)) << "double";
        EXPECT_TRUE(Close(classifier_run<float>(c, chunk, nullptr, nullptr), ref, kF32Tol)) << "float";
    }
}

TEST(Classifier, GradientsMatchFiniteDifferences) {
    for (int chunk : kChunks) {
        SCOPED_TRACE("chunk=" + std::to_string(chunk));
        ClsCase c(92);
        // objective: sum over non-ignored rows of grad_scale * loss_n
        auto loss = [&] {
            vec l = classifier_run<double>(c, chunk, nullptr, nullptr);
            double s = 0;
            for (int n = 0; n < c.N; n++)
                if (c.targets[n] >= 0) s += (double)c.grad_scale * l[n];
            return s;
        };
        vec num_inp = numgrad(c.inp, loss), num_w = numgrad(c.w, loss);
        vec dinp(c.inp.size(), kNaN);  // garbage: dinp is overwritten
        vec dw0 = Rng(93).normals(c.w.size()), dw = dw0;  // dweight accumulates
        vec losses = classifier_run<double>(c, chunk, &dinp, &dw);
        EXPECT_TRUE(Close(dinp, num_inp, kGradTol)) << "dinp";
        EXPECT_TRUE(Close(minus(dw, dw0), num_w, kGradTol)) << "dweight";
        for (int n = 0; n < c.N; n++)
            if (c.targets[n] < 0) {
                EXPECT_EQ(losses[n], 0.0) << "ignored row " << n;
                for (int k = 0; k < c.C; k++) EXPECT_EQ(dinp[(size_t)n * c.C + k], 0.0) << "ignored row " << n;
            }
        for (size_t i = (size_t)c.V * c.C; i < dw.size(); i++)
            EXPECT_EQ(dw[i], dw0[i]) << "padding row of dweight touched, index " << i;
    }
}

// ======================================================================================== adamw
struct AdamCfg {
    float lr, beta1, beta2, eps, wd, grad_scale;
};
const AdamCfg kAdamCfgs[] = {
    {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1.0f},
    {3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.37f},
    {1e-2f, 0.8f, 0.99f, 1e-6f, 0.5f, 2.5f},
};

// torch.optim.AdamW as given in its documentation (amsgrad = maximize = False), one step t (1-based):
//   theta <- theta - gamma * lambda * theta
//   m <- beta1 m + (1 - beta1) g;   v <- beta2 v + (1 - beta2) g^2
//   mhat = m / (1 - beta1^t);       vhat = v / (1 - beta2^t)
//   theta <- theta - gamma * mhat / (sqrt(vhat) + eps)
// with g the gradient times grad_scale. Hyperparameters are the float values the kernel receives.
void adamw_reference(vec& p, vec& m, vec& v, const vec& grad, const AdamCfg& h, int t) {
    const double lr = h.lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.wd, gs = h.grad_scale;
    for (size_t i = 0; i < p.size(); i++) {
        double g = grad[i] * gs;
        p[i] = p[i] - lr * wd * p[i];
        m[i] = b1 * m[i] + (1 - b1) * g;
        v[i] = b2 * v[i] + (1 - b2) * g * g;
        double mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
        p[i] = p[i] - lr * mhat / (std::sqrt(vhat) + eps);
    }
}
template <typename T>
void adamw_kernel(vec& p, vec& m, vec& v, const vec& grad, const AdamCfg& h, int t) {
    auto tp = cast<T>(p), tm = cast<T>(m), tv = cast<T>(v), tg = cast<T>(grad);
    adamw_update_cpu(tp.data(), tg.data(), tm.data(), tv.data(), p.size(), h.lr, h.beta1, h.beta2, h.eps, h.wd, t,
                     h.grad_scale);
    p = widen(tp), m = widen(tm), v = widen(tv);
}
// per-step gradients: mostly O(1), a few tiny (where eps matters) and a few exact zeros
vec adam_grad(Rng& rng, size_t n) {
    vec g = rng.normals(n);
    for (size_t i = 0; i < n; i += 7) g[i] *= 1e-9;
    for (size_t i = 3; i < n; i += 11) g[i] = 0;
    return g;
}

TEST(AdamW, MatchesPyTorchFormulasOverSeveralSteps) {
    const size_t n = 53;
    for (const auto& h : kAdamCfgs) {
        SCOPED_TRACE("lr=" + std::to_string(h.lr) + " wd=" + std::to_string(h.wd) +
                     " grad_scale=" + std::to_string(h.grad_scale));
        Rng rng(100);
        vec p = rng.normals(n), m(n, 0.0), v(n, 0.0);
        vec rp = p, rm = m, rv = v;
        for (int t = 1; t <= 6; t++) {
            SCOPED_TRACE("step " + std::to_string(t));
            vec g = adam_grad(rng, n);
            adamw_kernel<double>(p, m, v, g, h, t);
            adamw_reference(rp, rm, rv, g, h, t);
            ASSERT_TRUE(Close(p, rp, kRefTol)) << "params";
            ASSERT_TRUE(Close(m, rm, kRefTol)) << "m";
            ASSERT_TRUE(Close(v, rv, kRefTol)) << "v";
        }
    }
}

// ======================================================================================== sum_squares
TEST(SumSquares, MatchesSimpleSumAndIsBitwiseReproducible) {
    for (size_t n : {size_t(0), size_t(1), size_t(3), size_t(100003)}) {
        SCOPED_TRACE("n=" + std::to_string(n));
        vec x = Rng(110).normals(n, 0.1, 2.0);
        std::vector<float> xf = cast<float>(x);
        double ref = 0, ref_f = 0;
        for (double e : x) ref += e * e;
        for (float e : xf) ref_f += (double)e * (double)e;
        double s1 = sum_squares_cpu(x.data(), n), s2 = sum_squares_cpu(x.data(), n);
        EXPECT_NEAR(s1, ref, 1e-12 * std::max(1.0, ref));
        EXPECT_EQ(std::memcmp(&s1, &s2, sizeof s1), 0) << s1 << " vs " << s2;
        // the float overload accumulates in double too
        double f1 = sum_squares_cpu(xf.data(), n), f2 = sum_squares_cpu(xf.data(), n);
        EXPECT_NEAR(f1, ref_f, 1e-12 * std::max(1.0, ref_f));
        EXPECT_EQ(std::memcmp(&f1, &f2, sizeof f1), 0) << f1 << " vs " << f2;
    }
}

// ======================================================================================== float vs double
// The trainer runs these templates in float; on identical float-representable inputs, the float run must stay
// within kF32Tol (relative to max(1, max|double|)) of the double run.

TEST(FloatVsDouble, Matmul) {
    MatmulCase c({7, 24, 11, true}, 120);
    c.inp = f32(c.inp), c.w = f32(c.w), c.b = f32(c.b), c.R = f32(c.R);
    EXPECT_TRUE(Close(c.forward<float>(), c.forward<double>(), kF32Tol));
}

TEST(FloatVsDouble, LayerNormForwardBackward) {
    const int N = 6, C = 32;
    Rng rng(121);
    vec x = f32(rng.normals((size_t)N * C, 0.5, 2.0)), w = f32(rng.normals(C, 1.0, 0.3)), b = f32(rng.normals(C));
    vec R = f32(rng.normals(x.size())), d0 = f32(rng.normals(x.size())), dw0 = f32(rng.normals(C));
    vec od, md, sd, of, mf, sf;
    ln_forward<double>(od, md, sd, x, w, b, N, C, kNormEps);
    ln_forward<float>(of, mf, sf, x, w, b, N, C, kNormEps);
    EXPECT_TRUE(Close(of, od, kF32Tol)) << "out";
    EXPECT_TRUE(Close(sf, sd, kF32Tol)) << "rstd";
    vec did = d0, dwd = dw0, dbd = dw0, dif = d0, dwf = dw0, dbf = dw0;
    ln_backward<double>(did, dwd, dbd, R, x, w, md, sd, N, C);
    ln_backward<float>(dif, dwf, dbf, R, x, w, mf, sf, N, C);
    EXPECT_TRUE(Close(dif, did, kF32Tol)) << "dinp";
    EXPECT_TRUE(Close(dwf, dwd, kF32Tol)) << "dweight";
    EXPECT_TRUE(Close(dbf, dbd, kF32Tol)) << "dbias";
}

TEST(FloatVsDouble, RmsNormForwardBackward) {
    const int N = 5, C = 32;
    Rng rng(122);
    vec x = f32(rng.normals((size_t)N * C, 0.3, 1.5)), w = f32(rng.normals(C, 1.0, 0.3));
    vec R = f32(rng.normals(x.size())), d0 = f32(rng.normals(x.size())), dw0 = f32(rng.normals(C));
    vec od, sd, of, sf;
    rms_forward<double>(od, sd, x, w, N, C, kNormEps);
    rms_forward<float>(of, sf, x, w, N, C, kNormEps);
    EXPECT_TRUE(Close(of, od, kF32Tol)) << "out";
    vec did = d0, dwd = dw0, dif = d0, dwf = dw0;
    rms_backward<double>(did, dwd, R, x, w, sd, N, C);
    rms_backward<float>(dif, dwf, R, x, w, sf, N, C);
    EXPECT_TRUE(Close(dif, did, kF32Tol)) << "dinp";
    EXPECT_TRUE(Close(dwf, dwd, kF32Tol)) << "dweight";
}

TEST(FloatVsDouble, GeluAndSwiGLU) {
    vec x = f32(gelu_inputs()), R = f32(Rng(123).normals(x.size()));
    EXPECT_TRUE(Close(gelu_fwd<float>(x), gelu_fwd<double>(x), kF32Tol)) << "gelu forward";
    EXPECT_TRUE(Close(gelu_bwd<float>(x, R), gelu_bwd<double>(x, R), kF32Tol)) << "gelu backward";
    const int N = 4, F = 8;
    vec inp = f32(Rng(124).normals((size_t)N * 2 * F, 0.0, 2.0)), dy = f32(Rng(125).normals((size_t)N * F));
    EXPECT_TRUE(Close(swiglu_fwd<float>(inp, N, F), swiglu_fwd<double>(inp, N, F), kF32Tol)) << "swiglu forward";
    EXPECT_TRUE(Close(swiglu_bwd<float>(inp, dy, N, F), swiglu_bwd<double>(inp, dy, N, F), kF32Tol))
        << "swiglu backward";
}

TEST(FloatVsDouble, AttentionForwardBackward) {
    for (const auto& a : {AttnCase{2, 9, 3, 8, true}, AttnCase{1, 7, 2, 6, false}}) {
        SCOPED_TRACE(trace(a));
        vec qkv = f32(attn_qkv(a, 126)), R = f32(Rng(127).normals((size_t)a.B * a.Tl * a.NH * a.HS));
        vec od, ld, of, lf;
        attn_forward<double>(od, ld, qkv, a);
        attn_forward<float>(of, lf, qkv, a);
        EXPECT_TRUE(Close(of, od, kF32Tol)) << "out";
        EXPECT_TRUE(Close(lf, ld, kF32Tol)) << "lse";
        EXPECT_TRUE(Close(attn_backward<float>(R, qkv, of, lf, a), attn_backward<double>(R, qkv, od, ld, a), kF32Tol))
            << "dqkv";
    }
}

TEST(FloatVsDouble, Classifier) {
    ClsCase c(128);
    c.inp = f32(c.inp), c.w = f32(c.w);
    vec dw0 = f32(Rng(129).normals(c.w.size()));
    for (int chunk : {3, 4}) {
        SCOPED_TRACE("chunk=" + std::to_string(chunk));
        vec did(c.inp.size(), 0.0), dif = did, dwd = dw0, dwf = dw0;
        vec ld = classifier_run<double>(c, chunk, &did, &dwd), lf = classifier_run<float>(c, chunk, &dif, &dwf);
        EXPECT_TRUE(Close(lf, ld, kF32Tol)) << "losses";
        EXPECT_TRUE(Close(dif, did, kF32Tol)) << "dinp";
        EXPECT_TRUE(Close(dwf, dwd, kF32Tol)) << "dweight";
    }
}

TEST(FloatVsDouble, AdamW) {
    const size_t n = 53;
    for (const auto& h : kAdamCfgs) {
        SCOPED_TRACE("lr=" + std::to_string(h.lr) + " wd=" + std::to_string(h.wd));
        Rng rng(130);
        vec pd = f32(rng.normals(n)), md(n, 0.0), vd(n, 0.0);
        vec pf = pd, mf = md, vf = vd;
        for (int t = 1; t <= 6; t++) {
            vec g = f32(adam_grad(rng, n));
            adamw_kernel<double>(pd, md, vd, g, h, t);
            adamw_kernel<float>(pf, mf, vf, g, h, t);
        }
        EXPECT_TRUE(Close(pf, pd, kF32Tol)) << "params";
        EXPECT_TRUE(Close(mf, md, kF32Tol)) << "m";
        EXPECT_TRUE(Close(vf, vd, kF32Tol)) << "v";
    }
}

// ======================================================================================== sequence-classification head
TEST(Tanh, ForwardIsStdTanhAndBackwardMatchesFiniteDifferences) {
    vec x = Rng(140).normals(40, 0.0, 2.0), ref(x.size());
    for (size_t i = 0; i < x.size(); i++) ref[i] = (std::exp(2 * x[i]) - 1) / (std::exp(2 * x[i]) + 1);
    auto fwd = [&] {
        vec o(x.size(), kNaN);
        tanh_forward_cpu(o.data(), x.data(), x.size());
        return o;
    };
    EXPECT_TRUE(Close(fwd(), ref, kRefTol));
    vec R = Rng(141).normals(x.size());
    vec num = numgrad(x, [&] { return dot(fwd(), R); });
    vec out = fwd(), d(x.size(), kNaN);  // garbage: overwritten
    tanh_backward_cpu(d.data(), out.data(), R.data(), x.size());
    EXPECT_TRUE(Close(d, num, kGradTol));
    tanh_backward_cpu(R.data(), out.data(), R.data(), x.size());  // in place (dinp aliasing dout)
    EXPECT_TRUE(Close(R, num, kGradTol)) << "in place";
}

// Rows 0..B-1 of logits (B, NL) with targets; row 2 is unlabelled (-1).
struct SeqClsCase {
    int B = 5, NL;
    vec z;
    std::vector<int32_t> targets;
    std::vector<float> scores;
    float grad_scale = 0.25f;
    SeqClsCase(int nl, uint32_t seed) : NL(nl) {
        Rng rng(seed);
        z = rng.normals((size_t)B * NL, 0.0, 3.0);
        for (int b = 0; b < B; b++) {
            targets.push_back(b == 2 ? -1 : (NL == 1 ? 0 : (int32_t)(rng.uniform() * NL)));
            scores.push_back((float)rng.uniform(0.0, 5.0));
        }
    }
    // per-row losses; dz when asked
    vec run(vec* dz) const {
        std::vector<float> l(B, (float)kNaN);
        if (dz) dz->assign(z.size(), kNaN);
        seqcls_loss_cpu(l.data(), dz ? dz->data() : nullptr, z.data(), targets.data(), scores.data(), B, NL,
                        grad_scale);
        return widen(l);
    }
};

// Against the textbook definitions: -log softmax(z)[t] (computed without the max shift) and (z - y)²
TEST(SeqClsLoss, LossesMatchNaiveCrossEntropyAndSquaredError) {
    for (int NL : {1, 2, 3}) {
        SCOPED_TRACE("NL=" + std::to_string(NL));
        SeqClsCase c(NL, 142 + NL);
        vec ref(c.B, 0.0);
        for (int b = 0; b < c.B; b++) {
            if (c.targets[b] < 0) continue;
            const double* z = c.z.data() + (size_t)b * NL;
            if (NL == 1) {
                ref[b] = (z[0] - c.scores[b]) * (z[0] - c.scores[b]);
            } else {
                double sum = 0;
                for (int k = 0; k < NL; k++) sum += std::exp(z[k]);
                ref[b] = -std::log(std::exp(z[c.targets[b]]) / sum);
            }
        }
        EXPECT_TRUE(Close(c.run(nullptr), ref, kF32Tol));  // losses are stored as float
    }
}

// dz = d(sum_b grad_scale * loss_b)/dz; unlabelled rows: loss 0 and gradient 0
TEST(SeqClsLoss, GradientMatchesFiniteDifferencesAndSkipsUnlabelledRows) {
    for (int NL : {1, 3}) {
        SCOPED_TRACE("NL=" + std::to_string(NL));
        SeqClsCase c(NL, 150 + NL);
        // the objective in double (the kernel stores float losses: too coarse for central differences)
        auto objective = [&] {
            double s = 0;
            for (int b = 0; b < c.B; b++) {
                if (c.targets[b] < 0) continue;
                const double* z = c.z.data() + (size_t)b * NL;
                if (NL == 1) {
                    s += c.grad_scale * (z[0] - c.scores[b]) * (z[0] - c.scores[b]);
                } else {
                    double sum = 0;
                    for (int k = 0; k < NL; k++) sum += std::exp(z[k]);
                    s += c.grad_scale * (std::log(sum) - z[c.targets[b]]);
                }
            }
            return s;
        };
        vec num = numgrad(c.z, objective), dz;
        vec l = c.run(&dz);
        EXPECT_TRUE(Close(dz, num, kGradTol));
        EXPECT_EQ(l[2], 0.0);
        for (int k = 0; k < NL; k++) EXPECT_EQ(dz[(size_t)2 * NL + k], 0.0);
    }
}

TEST(SeqClsLoss, StableForLargeLogits) {
    SeqClsCase c(3, 160);
    for (double& v : c.z) v *= 300.0;  // exp(900) overflows without the max shift
    vec dz;
    vec l = c.run(&dz);
    for (double v : l) EXPECT_TRUE(std::isfinite(v));
    for (double v : dz) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
