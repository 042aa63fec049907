// GPU test of kernels/optim_cuda.cu: the CUDA backend's Muon, Adam-mini, 8-bit AdamW, GaLore and RSO ops against
// their CPU twins (kernels/muon.h, adam_mini.h, adamw8.h, galore.h) on random inputs of odd, model-like shapes
// (C = 96, F = 256/384: q/k/v (96, 96), fused qkv (288, 96), gate|up (512, 96), tall (160, 96) and wide (96, 160)),
// then whole optimizer steps Muon / AdamMini / GaLore / Rso / AdamW (8-bit states) <CudaBackend> against
// <CpuBackend> on GPT-2- and LLaMA-shaped parameter lists
// (GaLore with two projection refreshes, RSO with two subspace draws; RSO's tolerances are at its test). Both
// sides see the same inputs: gradients and parameters are rounded to the build's storage type (floatX) first,
// and the bf16 build's optimizers start their fp32 master weights from those values, so the GPU's master
// weights follow the CPU's fp32 parameters as tightly as the fp32 build's parameters do. Exit 77 without a
// GPU (REQUIRE_GPU=1: fail instead).
//
// Tolerances (rel = max |gpu - cpu| / max |cpu| over the tensor, unless said otherwise):
//   elementwise ops (momentum, muon_apply, adam_mini, galore_adam)   1e-6: the twin's fp32 operations in its
//       order with _rn intrinsics, expected bitwise on x86-64 (the bitwise-equal count is printed); Adam-mini's
//       block mean is a double sum in another order, which can move the float mean by 1 ulp
//   Newton-Schulz                                                      5e-5: cuBLAS vs OpenBLAS summation order;
//       the fp32 iteration differs from an fp64 one by 2.5e-6 at these shapes (measured on the CPU), so two fp32
//       orders should differ by about as much.
//       bf16 build: the GPU multiplies bf16 copies of X, A and B (reference Muon's precision; kernels/optim_cuda.cu),
//       the twin fp32 ones: 3 roundings of 2^-9 relative per iteration, 5 iterations. A rounding costs most once
//       the singular values are near 1: at s = 1 one iteration's output p(1) = 0.70 X carries the roundings of X
//       and B through |B| = |b + c| = 2.74 and that of A through 2|c| = 4.06, i.e. (2.74 + 4.06 + 2.74) / 0.70
//       * 2^-9 = 0.027 relative, and the quintic neither damps nor much amplifies relative errors on its band.
//       A rank-one X (the (1, 96) row) is at s = 1 from the start: 5 x 0.027 = 0.13; a numpy mirror of this
//       iteration gives up to 0.135 over 200 random rows -> 0.2. A Frobenius-normalized Gaussian matrix starts
//       at s <= 0.2, where B = b A + c A² is small (|B| / (p(s) / s) <= 0.06: one iteration costs <= 0.12 x 2^-9
//       = 2.3e-4, measured 1.1e-4 -> 5e-4 for the 1-step case), so only the last iterations count: 0.02-0.037 here,
//       up to 0.046 in the mirror (20-40 draws per shape) -> 8e-2. One iteration is also held to its
//       bf16-operand twin (the kernel's roundings on the host) at 1e-4: newton_schulz_bf16_operands says why
//       only one.
//   galore_project, galore_apply                                       1e-5: fp32 GEMMs, K <= 256, other order
//   galore_refresh P (rel to max |P|)                                  1e-3, and |PᵀP - I| <= 1e-4: the GPU takes
//       the eigenvectors of the fp64 Gram matrix (syevd), the CPU an fp32 SVD; the test matrices have planted
//       singular values 4 -> 1 (gaps 3 / (k - 1)) and one clearly largest entry per singular vector, so vectors
//       are determined to ~eps32 s1 / gap by the SVD and the canonical sign is no near tie. The fp32 Gram +
//       eigensolver path this replaced differed from sgesdd by <= 5e-5 on these shapes
//   galore_refresh's subspace on a small tail                          vs the exact subspace (dgesdd) 100 eps64
//       s_1² / (s_r² - s_r+1²) + 2 eps32 sqrt(r) (3.8e-6 fp32 build, 1e-6 bf16), vs the CPU twin's
//       4 eps32 s_1 / (s_r - s_r+1), the fp32 SVD's own error (Davis-Kahan): subspace distances
//       ‖E - P Pᵀ E‖_F. Singular values 16 -> 9, then a spike of 8 at c (2 -> 1.5) with c / s_1 ~ 1e-4 (fp32
//       build) or ~1e-3 (bf16: its rounding noise sits near 5e-4 s_1), the rest c (0.5 -> 0.1). Measured
//       (emulated): the fp64 Gram 1.3e-7 from exact (P's fp32 rounding), the twin <= 7.7e-4 (fp32 build; bound
//       7.6e-3) and <= 1.2e-4 (bf16; bound 5e-3) from it; the fp32 Gram it replaces is 0.4-2.8 (fp32, c = 1e-3)
//       or 0.02-0.06 (bf16, c = 1e-2) away from both (a numpy model of it)
//   adamw8 (op and whole steps)                                        bitwise: codes, block scales and master
//       weights (fp32 build: params); the twin's fp32 operations with _rn intrinsics, a max (order-free) for the
//       scales, and the same encoder over the same float tables
//   bf16 params (bf16 build)                                           within 1 bf16 ulp of the fp32 value, and
//       bit for bit the host twin of the stochastic rounding (optim_cuda.cuh) applied to the GPU's master
//   whole steps: parameter change Δ = final - initial per tensor (rel to max |Δ_cpu|), state tensors (rel):
//       AdamW / Adam-mini / momentum parts 1e-5 (state 1e-6); Muon's orthogonalized matrices 2e-4 (the NS error
//       above through 4 steps; bf16 build 5e-2: the bf16 NS error of a matrix, 0.02-0.046 above, through 4 updates
//       that the momentum keeps nearly parallel, so Δ's relative error stays about one update's; 0.016-0.023 here);
//       GaLore's projected blocks 2e-3 and its P / moments 1e-3 / 2e-3 (P's eigensolver
//       error, carried through R = G P into the moments and back through N Pᵀ; the CPU emulation above gives
//       Δ <= 1.6e-4, P and moments <= 4.4e-5). GaLore uses eps = 1e-4 (projected gradients ~3e-3): with a
//       negligible eps an Adam step is ~sign(R), and an R entry near 0 flips between two correct P's (the
//       emulation then differs by up to 0.12 in Δ); eps bounds N's slope at R = 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu_backend.h"
#include "kernels/cuda_backend.cuh"
#include "kernels/optim_cuda.cuh"
#include "model/gpt2.h"
#include "model/llama.h"
#include "test/gpu/gpu_test.h"
#if defined(PRAC_CUDA_EMU)
#include "kernels/cuda_emu/libs_emu.h"  // cuda_emu_cublas_gemm_calls
#endif
#include "train/optim_adam_mini.h"
#include "train/optim_adamw.h"
#include "train/optim_galore.h"
#include "train/optim_muon.h"
#include "train/optim_rso.h"

using fvec = std::vector<float>;
static constexpr bool BF16 = CudaBackend::master_weights;  // the bf16 build keeps fp32 master weights

static void check_tol(const std::string& what, double err, double tol) {
    check(err <= tol, "%-64s err %.3g (tol %.3g)", what.c_str(), err, tol);
}

// ---- inputs ----

static std::mt19937_64 g_rng(20250611);
static fvec randn(size_t n, float scale) { return normal_values(g_rng, n, scale); }
// the values as the build stores them (what both sides compute on)
static fvec quantize(fvec v) {
    for (float& f : v) f = to_float(from_float<floatX>(f));
    return v;
}

// (rows, k) with orthonormal columns (k <= rows), double modified Gram-Schmidt run twice, on a Gaussian matrix
// whose column j has a bump of 6 at a row of its own: every column keeps one clearly largest entry (~0.5 against
// <= ~0.3), so its canonical sign (galore_canonical_signs) is no near tie
static std::vector<double> orthonormal_columns(int rows, int k) {
    std::normal_distribution<double> nd(0.0, 1.0);
    std::vector<double> Q((size_t)rows * k);
    for (double& x : Q) x = nd(g_rng);
    std::vector<int> perm(rows);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g_rng);
    for (int j = 0; j < k; j++) Q[(size_t)perm[j] * k + j] += 6.0;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < k; j++) {
            for (int l = 0; l < j; l++) {
                double d = 0;
                for (int i = 0; i < rows; i++) d += Q[(size_t)i * k + j] * Q[(size_t)i * k + l];
                for (int i = 0; i < rows; i++) Q[(size_t)i * k + j] -= d * Q[(size_t)i * k + l];
            }
            double s = 0;
            for (int i = 0; i < rows; i++) s += Q[(size_t)i * k + j] * Q[(size_t)i * k + j];
            s = 1.0 / std::sqrt(s);
            for (int i = 0; i < rows; i++) Q[(size_t)i * k + j] *= s;
        }
    return Q;
}

// G (m, n) row-major = U diag(s) Vᵀ, k = min(m, n) = s.size(), singular vectors with a clear largest entry
// (above). Not yet rounded to floatX.
static fvec with_spectrum(int m, int n, const std::vector<double>& s) {
    const int k = (int)s.size();
    std::vector<double> U = orthonormal_columns(m, k), V = orthonormal_columns(n, k);
    fvec G((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int l = 0; l < k; l++) acc += U[(size_t)i * k + l] * s[l] * V[(size_t)j * k + l];
            G[(size_t)i * n + j] = (float)acc;
        }
    return G;
}
// singular values scale (4 -> 1) with gaps 3 scale / (k - 1)
static fvec planted(int m, int n, float scale) {
    const int k = std::min(m, n);
    std::vector<double> s(k);
    for (int l = 0; l < k; l++) s[l] = scale * (k > 1 ? 4.0 - 3.0 * l / (k - 1) : 4.0);
    return with_spectrum(m, n, s);
}

// ---- device buffers through the backend's allocator ----

template <typename T>
struct DBuf {
    CudaBackend& be;
    T* p;
    size_t n;
    DBuf(CudaBackend& b, size_t count) : be(b), n(count) { p = (T*)be.alloc(std::max<size_t>(n, 1) * sizeof(T)); }
    ~DBuf() { be.free(p, std::max<size_t>(n, 1) * sizeof(T)); }
    DBuf(const DBuf&) = delete;
    DBuf& operator=(const DBuf&) = delete;
};
static void put_f32(CudaBackend& be, float* d, const fvec& h) { be.upload(d, h.data(), h.size() * sizeof(float)); }
static fvec get_f32(CudaBackend& be, const float* d, size_t n) {
    fvec h(n);
    be.download(h.data(), d, n * sizeof(float));
    return h;
}
static void put_x(CudaBackend& be, floatX* d, const fvec& h) { be.upload_f32(d, h.data(), h.size()); }
static fvec get_x(CudaBackend& be, const floatX* d, size_t n) {
    fvec h(n);
    be.download_f32(h.data(), d, n);
    return h;
}

static size_t bitwise_equal(const fvec& a, const fvec& b) {
    size_t k = 0;
    for (size_t i = 0; i < a.size(); i++) k += std::memcmp(&a[i], &b[i], 4) == 0;
    return k;
}
// elements of p within one storage ulp (bf16: 2^-8 relative to the binade; fp32: exact) of x
static size_t within_ulp(const fvec& p, const fvec& x) {
    size_t k = 0;
    for (size_t i = 0; i < p.size(); i++) {
        if (!BF16) {
            k += p[i] == x[i];
            continue;
        }
        int e = 0;
        std::frexp(x[i], &e);
        double ulp = x[i] == 0.0f ? 1e-38 : std::ldexp(1.0, e - 8);
        k += std::fabs((double)p[i] - (double)x[i]) <= ulp;
    }
    return k;
}
// bf16 params vs master: every element a neighbour of master and equal to the host twin round(master[i], i)
template <class Round>
static void check_rounding(const std::string& what, const fvec& params, const fvec& master, Round round) {
    size_t same = 0;
    for (size_t i = 0; i < params.size(); i++) same += to_float(round(master[i], (uint64_t)i)) == params[i];
    check(within_ulp(params, master) == params.size(), "%s: params within 1 ulp of master", what.c_str());
    check(same == params.size(), "%s: params == host twin of the rounding: %zu of %zu", what.c_str(), same,
          params.size());
}

// bf16 without master weights: the GPU rounds its params after every step, so the test rounds the CPU twin's fp32
// params the same way (the same seeds) after each of its steps; then the two agree bitwise except where their fp32
// results straddle a rounding threshold, rare (about |fp32 difference| / ulp), and never by more than an ulp. (A
// tolerance on the relative error could not tell a lost update from a kept one: three steps move a weight by a few
// ulps, one GaLore apply by less than one.)
static void round_as_the_gpu(fvec& twin, uint64_t step_seed) {  // after each of the twin's steps
    for (size_t i = 0; i < twin.size(); i++) twin[i] = to_float(stochastic_round<floatX>(twin[i], step_seed, i));
}
static void check_rounded_twin(const std::string& tag, const fvec& gpu, const fvec& twin_rounded) {
    const size_t n = gpu.size(), same = bitwise_equal(gpu, twin_rounded);
    check(within_ulp(gpu, twin_rounded) == n && same >= n - n / 200,
          "%s: bf16 params == the twin's, rounded as the GPU rounds: %zu of %zu (all within an ulp)", tag.c_str(), same,
          n);
}

// ---------------------------------------------------------------------------------------------------------------
// op tests
// ---------------------------------------------------------------------------------------------------------------

// muon_momentum vs muon_momentum_cpu: buf, u (n) after three calls
static void test_muon_momentum(CudaBackend& be, size_t n, bool nesterov) {
    fvec buf = randn(n, 0.01f), u(n);
    DBuf<float> dbuf(be, n), du(be, n);
    DBuf<floatX> dg(be, n);
    put_f32(be, dbuf.p, buf);
    for (int k = 0; k < 3; k++) {
        fvec g = quantize(randn(n, 0.02f));
        put_x(be, dg.p, g);
        be.muon_momentum(dbuf.p, du.p, dg.p, n, 0.95f, 0.8f, nesterov);
        muon_momentum_cpu(buf.data(), u.data(), g.data(), n, 0.95f, 0.8f, nesterov);
    }
    fvec gb = get_f32(be, dbuf.p, n), gu = get_f32(be, du.p, n);
    std::string tag = "muon_momentum n=" + std::to_string(n) + (nesterov ? " nesterov" : " plain");
    check_tol(tag + " buf", rel_err(gb, buf), 1e-6);
    check_tol(tag + " u", rel_err(gu, u), 1e-6);
    std::printf("    bitwise equal: buf %zu, u %zu of %zu\n", bitwise_equal(gb, buf), bitwise_equal(gu, u), n);
}

// Newton-Schulz tolerance (see the top): fp32 5e-5; bf16 operands 0.2 for a rank-one X, 5e-4 for one iteration
// and 8e-2 for the full iteration on a matrix
static double ns_tolerance(int rows, int cols, int steps) {
    if (!BF16) return 5e-5;
    if (std::min(rows, cols) == 1) return 0.2;
    return steps == 1 ? 5e-4 : 8e-2;
}

// The bf16 kernel's iteration on the host (kernels/optim_cuda.cu, CudaBackend::newton_schulz): newton_schulz_cpu
// with its three GEMM operands rounded to bf16 (nearest even) per iteration, fp32 accumulation. Only a single
// iteration can be held to it: a rounding flips wherever the summation orders disagree on the last fp32 bit, and
// the flips compound; over 5 iterations the summation order alone moves the result by up to 3.7e-2 (OpenBLAS
// sgemm vs exact double sums, 10 draws per shape of this test), as much as the bf16 operands do, so the full
// iteration keeps its 8e-2 against the fp32 twin. One iteration: 1.1e-5 (sgemm vs exact, 40 draws per shape),
// 6.1e-5 with a pessimistic accumulator (sequential fp32 sums rounded toward zero, at (288, 96)) -> 1e-4.
// What it separates: truncated operands (3.2e-4 to 7e-4 from this twin) and fp32 operands (9e-5 to 2e-4,
// which the emulated GEMM-call count also rules out).
static void newton_schulz_bf16_operands(float* X, int rows, int cols, int steps) {
    auto bf16 = [](std::vector<float>& dst, const float* src) {
        for (size_t i = 0; i < dst.size(); i++) dst[i] = bf16_to_f32(f32_to_bf16(src[i]));
    };
    const size_t n = (size_t)rows * cols;
    const bool tall = rows > cols;
    const int m = tall ? cols : rows;
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += (double)X[i] * X[i];
    const float inv = (float)(1.0 / (std::sqrt(ss) + 1e-7));
    for (size_t i = 0; i < n; i++) X[i] *= inv;
    fvec A((size_t)m * m), Xh(n), Ah((size_t)m * m);
    for (int it = 0; it < steps; it++) {
        bf16(Xh, X);
        if (tall) gemm_cpu(true, false, m, m, rows, 1.0f, Xh.data(), cols, Xh.data(), cols, 0.0f, A.data(), m);
        else gemm_cpu(false, true, m, m, cols, 1.0f, Xh.data(), cols, Xh.data(), cols, 0.0f, A.data(), m);
        bf16(Ah, A.data());
        gemm_cpu(false, false, m, m, m, MUON_NS_C, Ah.data(), m, Ah.data(), m, MUON_NS_B, A.data(), m);
        bf16(Ah, A.data());
        if (tall) gemm_cpu(false, false, rows, cols, cols, 1.0f, Xh.data(), cols, Ah.data(), m, MUON_NS_A, X, cols);
        else gemm_cpu(false, false, rows, cols, rows, 1.0f, Ah.data(), m, Xh.data(), cols, MUON_NS_A, X, cols);
    }
}

// newton_schulz vs newton_schulz_cpu on `count` gradient-like Gaussian matrices (rows, cols) of one batch, each
// against the twin alone (the batch must not mix matrices: each has its own scale, 0.01 * (k + 1))
static void test_newton_schulz(CudaBackend& be, int rows, int cols, int steps, int count = 1) {
    size_t n = (size_t)rows * cols, w = newton_schulz_work_numel(rows, cols);
    fvec X((size_t)count * n), work(w);
    for (int k = 0; k < count; k++) {
        fvec x = randn(n, 0.01f * (k + 1));
        std::copy(x.begin(), x.end(), X.begin() + (size_t)k * n);
    }
    DBuf<float> dX(be, (size_t)count * n), dw(be, (size_t)count * w);
    put_f32(be, dX.p, X);
#if defined(PRAC_CUDA_EMU)
    const long bf0 = cuda_emu_cublas_gemm_calls(true), f0 = cuda_emu_cublas_gemm_calls(false);
#endif
    be.newton_schulz(dX.p, rows, cols, dw.p, steps, count);
#if defined(PRAC_CUDA_EMU)
    // three GEMMs per iteration (A = X Xᵀ, A², B X), each one call for the whole batch; the bf16 build multiplies
    // bf16 operands with fp32 accumulation (reference Muon's precision, tensor-core speed), the fp32 build fp32 ones
    const long bf = cuda_emu_cublas_gemm_calls(true) - bf0, f = cuda_emu_cublas_gemm_calls(false) - f0;
    const long want_bf = BF16 ? 3 * steps : 0, want_f = BF16 ? 0 : 3 * steps;
    check(bf == want_bf && f == want_f,
          "newton_schulz %d x (%d, %d) steps %d: %ld bf16-operand and %ld fp32-operand GEMM calls (want %ld and %ld)",
          count, rows, cols, steps, bf, f, want_bf, want_f);
#endif
    fvec got = get_f32(be, dX.p, (size_t)count * n);
    for (int k = 0; k < count; k++) {
        fvec x(X.begin() + (size_t)k * n, X.begin() + (size_t)(k + 1) * n);
        newton_schulz_cpu(x.data(), rows, cols, work.data(), steps);
        fvec g(got.begin() + (size_t)k * n, got.begin() + (size_t)(k + 1) * n);
        check_tol("newton_schulz (" + std::to_string(rows) + ", " + std::to_string(cols) + ") steps " +
                      std::to_string(steps) + (count > 1 ? " matrix " + std::to_string(k) + " of a batch of " +
                                                               std::to_string(count) : ""),
                  rel_err(g, x), ns_tolerance(rows, cols, steps));
        if (BF16 && steps == 1) {
            fvec y(X.begin() + (size_t)k * n, X.begin() + (size_t)(k + 1) * n);
            newton_schulz_bf16_operands(y.data(), rows, cols, steps);
            check_tol("newton_schulz (" + std::to_string(rows) + ", " + std::to_string(cols) +
                          ") steps 1 vs its bf16-operand twin",
                      rel_err(g, y), 1e-4);
        }
    }
}

// muon_apply vs muon_apply_cpu; with master: the master follows the CPU, params are its rounding
static void test_muon_apply(CudaBackend& be, size_t n, bool with_master) {
    const float lr = 0.02f, wd = 0.1f, step = lr * 0.2f * std::sqrt(160.0f);
    const uint64_t salt = 4096;
    fvec p = quantize(randn(n, 0.05f)), O = randn(n, 0.1f);
    DBuf<floatX> dp(be, n);
    DBuf<float> dm(be, n), dO(be, n);
    put_x(be, dp.p, p);
    put_f32(be, dm.p, p);
    put_f32(be, dO.p, O);
    be.muon_apply(dp.p, with_master ? dm.p : nullptr, dO.p, n, lr, wd, step, salt);
    muon_apply_cpu(p.data(), O.data(), n, lr, wd, step);
    std::string tag = std::string("muon_apply n=") + std::to_string(n) + (with_master ? " master" : " no master");
    fvec gp = get_x(be, dp.p, n);
    if (with_master) {
        fvec gm = get_f32(be, dm.p, n);
        check_tol(tag + " master", rel_err(gm, p), 1e-6);
        uint64_t cs = optim_call_seed(be.seed, salt, lr, step);
        check_rounding(tag, gp, gm, [&](float x, uint64_t i) { return optim_round<floatX>(x, cs, i); });
    } else if (BF16) {
        check(within_ulp(gp, p) == n, "%s: bf16 params within 1 ulp of the CPU's fp32 result", tag.c_str());
    } else {
        check_tol(tag + " params", rel_err(gp, p), 1e-6);
    }
}

// optim_round (muon_apply's and galore_apply's rounding without a step count: the value's bits are hashed into the
// seed) is unbiased: over K = 20000 call seeds the mean of round(x) is x to within z·ulp·sqrt(p(1 - p) / K), z = 4.89
// (two-sided 1e-6), p = x's position between its two bf16 neighbours; round-to-nearest fails the same bound (so it
// can). The function is __host__ __device__: this host run is the GPU's arithmetic.
static void test_optim_round_unbiased() {
    using bf16 = __nv_bfloat16;
    const int K = 20000;
    const float xs[] = {1.0f + 0.3f / 128, -3.7f, 0.0123f, 1000.1f, -2.0f - 0.9f / 64};
    for (float x : xs) {
        const float lo = __bfloat162float(__float2bfloat16_rd(x)), hi = __bfloat162float(__float2bfloat16_ru(x));
        const double ulp = (double)hi - lo, p = ((double)x - lo) / ulp;
        double sum = 0, nearest = 0;
        for (int k = 0; k < K; k++) {
            sum += __bfloat162float(optim_round<bf16>(x, optim_call_seed(0x5EEDull, (uint64_t)k, 0.02f, 1e-3f), k));
            nearest += __bfloat162float(__float2bfloat16_rn(x));
        }
        const double bound = 4.89 * ulp * std::sqrt(p * (1 - p) / K);
        check(std::fabs(sum / K - x) <= bound && std::fabs(nearest / K - x) > bound,
              "optim_round(%g) unbiased: mean %.9g, |mean - x| = %.3g ulp <= %.3g ulp (round-to-nearest: %.3g ulp)", x,
              sum / K, std::fabs(sum / K - x) / ulp, bound / ulp, std::fabs(nearest / K - x) / ulp);
    }
}

// adam_mini_update vs adam_mini_update_cpu over three steps; params at an element offset (unaligned pointers)
static void test_adam_mini(CudaBackend& be, size_t n, size_t block, bool with_master, size_t offset) {
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.7f;
    const uint64_t salt = 640 + offset;
    size_t nb = n / block;
    fvec p = quantize(randn(n, 0.05f)), m(n, 0.0f), v(nb, 0.0f);
    DBuf<floatX> dp(be, n + offset), dg(be, n + offset);
    DBuf<float> dmaster(be, n + offset), dm(be, n + offset), dv(be, nb + offset);
    put_x(be, dp.p + offset, p);
    put_f32(be, dmaster.p + offset, p);
    for (int t = 1; t <= 3; t++) {
        fvec g = quantize(randn(n, 0.01f));
        put_x(be, dg.p + offset, g);
        be.adam_mini_update(dp.p + offset, with_master ? dmaster.p + offset : nullptr, dg.p + offset, dm.p + offset,
                            dv.p + offset, n, block, lr, b1, b2, eps, wd, t, gs, salt);
        adam_mini_update_cpu(p.data(), g.data(), m.data(), v.data(), n, block, lr, b1, b2, eps, wd, t, gs);
        if (BF16 && !with_master) round_as_the_gpu(p, optim_step_seed(be.seed, t, salt));
    }
    std::string tag = "adam_mini n=" + std::to_string(n) + " block=" + std::to_string(block) +
                      (with_master ? " master" : " no master") + (offset ? " offset" : "");
    fvec gm = get_f32(be, dm.p + offset, n), gv = get_f32(be, dv.p + offset, nb), gp = get_x(be, dp.p + offset, n);
    check_tol(tag + " m", rel_err(gm, m), 1e-6);
    check_tol(tag + " v", rel_err(gv, v), 1e-6);
    if (with_master) {
        fvec gmaster = get_f32(be, dmaster.p + offset, n);
        check_tol(tag + " master", rel_err(gmaster, p), 1e-6);
        std::printf("    bitwise equal: master %zu, v %zu\n", bitwise_equal(gmaster, p), bitwise_equal(gv, v));
        uint64_t s = optim_step_seed(be.seed, 3, salt);
        check_rounding(tag, gp, gmaster, [&](float x, uint64_t i) { return stochastic_round<floatX>(x, s, i); });
    } else if (BF16) {
        check_rounded_twin(tag, gp, p);
    } else {
        check_tol(tag + " params", rel_err(gp, p), 1e-6);
    }
}

// adamw8_update vs adamw8_update_cpu (on the master weights when there are some): three steps over n elements (the
// last block short) from zero states; codes, block scales and master weights (fp32 build: params) bitwise equal
template <typename T>
static std::vector<T> get_raw(CudaBackend& be, const T* d, size_t n) {
    std::vector<T> h(n);
    be.download(h.data(), d, n * sizeof(T));
    return h;
}
static void test_adamw8(CudaBackend& be, size_t n, bool with_master) {
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.7f;
    const uint64_t salt = 4096;
    const size_t nb = (n + ADAMW8_BLOCK - 1) / ADAMW8_BLOCK;
    fvec p = quantize(randn(n, 0.05f)), ma(nb, 0.0f), va(nb, 0.0f);
    std::vector<uint8_t> mc(n, 0), vc(n, 0);
    DBuf<floatX> dp(be, n), dg(be, n);
    DBuf<float> dmaster(be, n), dma(be, nb), dva(be, nb);
    DBuf<uint8_t> dmc(be, n), dvc(be, n);
    DBuf<AdamW8Codes> dcodes(be, 1);
    be.upload(dcodes.p, &adamw8_codes(), sizeof(AdamW8Codes));
    be.zero(dmc.p, n);
    be.zero(dvc.p, n);
    be.zero(dma.p, nb * sizeof(float));
    be.zero(dva.p, nb * sizeof(float));
    put_x(be, dp.p, p);
    put_f32(be, dmaster.p, p);
    for (int t = 1; t <= 3; t++) {
        fvec g = randn(n, 0.01f);
        for (size_t i = 0; i < n; i += 7) g[i] *= 1e-4f;  // small entries: low decades and v's smallest codes
        g = quantize(g);
        put_x(be, dg.p, g);
        be.adamw8_update(dp.p, with_master ? dmaster.p : nullptr, dg.p, dmc.p, dvc.p, dma.p, dva.p, n, dcodes.p, lr, b1,
                         b2, eps, wd, t, gs, salt);
        adamw8_update_cpu(p.data(), g.data(), mc.data(), vc.data(), ma.data(), va.data(), n, adamw8_codes(), lr, b1,
                          b2, eps, wd, t, gs);
        if (BF16 && !with_master) round_as_the_gpu(p, optim_step_seed(be.seed, t, salt));
    }
    std::string tag = "adamw8 n=" + std::to_string(n) + (with_master ? " master" : " no master");
    std::vector<uint8_t> gmc = get_raw(be, dmc.p, n), gvc = get_raw(be, dvc.p, n);
    size_t same_m = 0, same_v = 0;
    for (size_t i = 0; i < n; i++) same_m += gmc[i] == mc[i], same_v += gvc[i] == vc[i];
    check(same_m == n && same_v == n, "%s: codes equal: m %zu, v %zu of %zu", tag.c_str(), same_m, same_v, n);
    fvec gma = get_f32(be, dma.p, nb), gva = get_f32(be, dva.p, nb), gp = get_x(be, dp.p, n);
    check(bitwise_equal(gma, ma) == nb && bitwise_equal(gva, va) == nb, "%s: block scales bitwise equal", tag.c_str());
    if (with_master) {
        fvec gmaster = get_f32(be, dmaster.p, n);
        check(bitwise_equal(gmaster, p) == n, "%s: master bitwise equal: %zu of %zu", tag.c_str(),
              bitwise_equal(gmaster, p), n);
        uint64_t s = optim_step_seed(be.seed, 3, salt);
        check_rounding(tag, gp, gmaster, [&](float x, uint64_t i) { return stochastic_round<floatX>(x, s, i); });
    } else if (BF16) {
        check_rounded_twin(tag, gp, p);
    } else {
        check(bitwise_equal(gp, p) == n, "%s: params bitwise equal: %zu of %zu", tag.c_str(), bitwise_equal(gp, p), n);
    }
}

// galore_refresh vs galore_projection_cpu on a planted-spectrum gradient
static void test_galore_refresh(CudaBackend& be, int m, int n, int r) {
    bool right = m >= n;
    int k = right ? n : m;
    fvec G = quantize(planted(m, n, 0.01f)), P((size_t)k * r);
    DBuf<floatX> dG(be, G.size());
    DBuf<float> dP(be, P.size());
    put_x(be, dG.p, G);
    int gi = be.galore_refresh(dP.p, dG.p, m, n, r, right);
    int ci = galore_projection_cpu(P.data(), G.data(), m, n, r, right);
    std::string tag = "galore_refresh (" + std::to_string(m) + ", " + std::to_string(n) + ") r=" + std::to_string(r) +
                      (right ? " right" : " left");
    check(gi == 0 && ci == 0, "%s: returns %d (CPU %d)", tag.c_str(), gi, ci);
    fvec gP = get_f32(be, dP.p, P.size());
    check_tol(tag + " P", rel_err(gP, P), 1e-3);
    double orth = 0;
    for (int a = 0; a < r; a++)
        for (int b = 0; b < r; b++) {
            double d = 0;
            for (int i = 0; i < k; i++) d += (double)gP[(size_t)i * r + a] * gP[(size_t)i * r + b];
            orth = worst_of(orth, std::fabs(d - (a == b)));
        }
    check_tol(tag + " |PᵀP - I|", orth, 1e-4);
}

// ‖E - Q (Qᵀ E)‖_F for Q, E (k, r) row-major with orthonormal columns: the Frobenius norm of the sines of the
// principal angles between their spans
template <typename A, typename B>
static double subspace_distance(const std::vector<A>& Q, const std::vector<B>& E, int k, int r) {
    std::vector<double> QtE((size_t)r * r, 0.0);
    for (int i = 0; i < k; i++)
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++) QtE[(size_t)a * r + b] += (double)Q[(size_t)i * r + a] * E[(size_t)i * r + b];
    double sum = 0;
    for (int i = 0; i < k; i++)
        for (int b = 0; b < r; b++) {
            double d = E[(size_t)i * r + b];
            for (int a = 0; a < r; a++) d -= (double)Q[(size_t)i * r + a] * QtE[(size_t)a * r + b];
            sum += d * d;
        }
    return std::sqrt(sum);
}

// galore_refresh's top-r subspace where s_r / s_1 is small (see the header), against the exact one (LAPACK's
// dgesdd of the same G) and the CPU twin's, as subspaces: the tail's vectors are each determined only to
// ~eps32 s_1 / (their gaps) by the twin's fp32 SVD
static void test_galore_refresh_small_tail(CudaBackend& be, int m, int n) {
    const bool right = m >= n;
    const int k = right ? n : m, r = 16;
    const double c = BF16 ? 1e-2 : 1e-3;
    std::vector<double> s(k);
    for (int l = 0; l < k; l++)
        s[l] = l < 8 ? 16.0 - l : l < 16 ? c * (2.0 - 0.5 * (l - 8) / 7) : c * (0.5 - 0.4 * (l - 16) / (k - 17));
    fvec G = quantize(with_spectrum(m, n, s)), P((size_t)k * r);
    DBuf<floatX> dG(be, G.size());
    DBuf<float> dP(be, P.size());
    put_x(be, dG.p, G);
    int gi = be.galore_refresh(dP.p, dG.p, m, n, r, right);
    int ci = galore_projection_cpu(P.data(), G.data(), m, n, r, right);
    std::string tag = "galore_refresh (" + std::to_string(m) + ", " + std::to_string(n) + ") s_r/s_1 " +
                      format("%.1e", 1.5 * c / 16) + (right ? " right" : " left");
    check(gi == 0 && ci == 0, "%s: returns %d (CPU %d)", tag.c_str(), gi, ci);
    // the exact top r of G as stored
    std::vector<double> a(G.begin(), G.end()), sv(k), u((size_t)m * k), vt((size_t)k * n), E((size_t)k * r);
    check(LAPACKE_dgesdd(LAPACK_ROW_MAJOR, 'S', m, n, a.data(), n, sv.data(), u.data(), k, vt.data(), n) == 0,
          "%s: dgesdd", tag.c_str());
    for (int i = 0; i < k; i++)
        for (int j = 0; j < r; j++) E[(size_t)i * r + j] = right ? vt[(size_t)j * n + i] : u[(size_t)i * k + j];
    fvec gP = get_f32(be, dP.p, P.size());
    // fp64 Gram + eigensolver: an error of ~100 eps64 ‖GᵀG‖ over the gap s_r² - s_r+1² (generous for cuBLAS's and
    // cuSOLVER's backward errors), plus P's rounding to fp32 (2 eps32 per column's norm, r columns)
    const double gram_gap = sv[r - 1] * sv[r - 1] - sv[r] * sv[r];
    const double tol_exact = 100 * DBL_EPSILON * sv[0] * sv[0] / gram_gap + 2 * FLT_EPSILON * std::sqrt((double)r);
    check_tol(tag + " subspace vs exact", subspace_distance(gP, E, k, r), tol_exact);
    const double twin_bound = 4 * FLT_EPSILON * sv[0] / (sv[r - 1] - sv[r]);  // Davis-Kahan on sgesdd's error
    check_tol(tag + " subspace vs CPU", subspace_distance(gP, P, k, r), twin_bound);
}

// cuSOLVER's dsyevd workspace (galore_refresh's) beside the planner's estimate, galore_syevd_bytes_estimate (train/
// optimizers.h counts it): emulated, the LAPACK query it follows agrees within 2% + 8 KiB (as PRAC's in
// test_prac_cuda); on a GPU cuSOLVER's own size is printed, to compare (at LLaMA-1B's k = 2048 too).
static void test_galore_syevd_estimate(CudaBackend& be) {
    DBuf<double> stand_in(be, 1);  // (a device pointer for the query: it reads no matrix)
    for (int k : {96, 600, 2048}) {
        size_t dev_bytes = 0, host_bytes = 0;
        CusolverParams params;
        cusolverCheck(cusolverDnXsyevd_bufferSize(be.cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR,
                                                  CUBLAS_FILL_MODE_UPPER, k, CUDA_R_64F, stand_in.p, k, CUDA_R_64F,
                                                  stand_in.p, CUDA_R_64F, &dev_bytes, &host_bytes));
        const size_t planned = galore_syevd_bytes_estimate(k);
        std::printf("  dsyevd workspace k = %d: cuSOLVER %zu bytes (host %zu), planned %zu\n", k, dev_bytes,
                    host_bytes, planned);
#if defined(PRAC_CUDA_EMU)
        check(std::fabs((double)planned - (double)dev_bytes) <= 0.02 * (double)dev_bytes + 8192,
              "planner's dsyevd workspace %zu within 2%% + 8 KiB of the emulated %zu (k = %d)", planned, dev_bytes, k);
#endif
    }
}

#if !defined(PRAC_CUDA_EMU)
// On a GPU only (emulated it would take minutes): one refresh at LLaMA-1B's block shape (m, n) = (5461, 2048)
// (gate/up/down; q/k/v/o are (2048, 2048): the same k = 2048) and GaLore's rank 512, timed (the first call sizes
// the scratch and is not counted; then the median of 3).
static void time_galore_refresh_llama_1b(CudaBackend& be) {
    const int m = 5461, n = 2048, r = 512, k = 2048;
    DBuf<floatX> dG(be, (size_t)m * n);
    DBuf<float> dP(be, (size_t)k * r);
    put_x(be, dG.p, quantize(randn((size_t)m * n, 0.01f)));
    std::vector<double> ms;
    for (int i = 0; i < 4; i++) {
        cudaCheck(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        const int ret = be.galore_refresh(dP.p, dG.p, m, n, r, true);
        cudaCheck(cudaDeviceSynchronize());
        check(ret == 0, "galore_refresh (%d, %d) r=%d: returns %d", m, n, r, ret);
        if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("TIMING galore_refresh (%d, %d) r=%d, fp64 Gram + dsyevd: %.1f ms (median of 3)\n", m, n, r, ms[1]);
}
#endif

// the special returns: non-finite G -> -1 with P untouched; G = 0 -> the CPU's P (identity columns)
static void test_galore_refresh_special(CudaBackend& be) {
    const int m = 96, n = 160, r = 24, k = 96;
    fvec sentinel((size_t)k * r, 7.0f);
    DBuf<floatX> dG(be, (size_t)m * n);
    DBuf<float> dP(be, sentinel.size());
    for (float bad : {NAN, INFINITY}) {
        fvec G = quantize(randn((size_t)m * n, 0.01f));
        G[(size_t)37 * n + 101] = bad;
        put_x(be, dG.p, G);
        put_f32(be, dP.p, sentinel);
        int gi = be.galore_refresh(dP.p, dG.p, m, n, r, false);
        fvec cP = sentinel;
        int ci = galore_projection_cpu(cP.data(), G.data(), m, n, r, false);
        check(gi == -1 && ci == -1, "galore_refresh with %s: returns %d (CPU %d)", std::isnan(bad) ? "NaN" : "inf",
              gi, ci);
        check(bitwise_equal(get_f32(be, dP.p, sentinel.size()), sentinel) == sentinel.size(),
              "galore_refresh with %s: P untouched", std::isnan(bad) ? "NaN" : "inf");
    }
    fvec Z((size_t)m * n, 0.0f), cP = sentinel;
    put_x(be, dG.p, Z);
    int gi = be.galore_refresh(dP.p, dG.p, m, n, r, false);
    int ci = galore_projection_cpu(cP.data(), Z.data(), m, n, r, false);
    check(gi == 0 && ci == 0 && bitwise_equal(get_f32(be, dP.p, cP.size()), cP) == cP.size(),
          "galore_refresh of a zero gradient: returns %d (CPU %d), P == CPU's P", gi, ci);
}

// galore_project vs galore_project_cpu
static void test_galore_project(CudaBackend& be, int m, int n, int r) {
    bool right = m >= n;
    int k = right ? n : m;
    size_t rn = (size_t)r * (right ? m : n);
    fvec G = quantize(randn((size_t)m * n, 0.01f)), P = randn((size_t)k * r, 0.1f), R(rn);
    DBuf<floatX> dG(be, G.size());
    DBuf<float> dP(be, P.size()), dR(be, rn);
    put_x(be, dG.p, G);
    put_f32(be, dP.p, P);
    be.galore_project(dR.p, dG.p, dP.p, m, n, r, right, 0.7f);
    galore_project_cpu(R.data(), G.data(), P.data(), m, n, r, right, 0.7f);
    check_tol("galore_project (" + std::to_string(m) + ", " + std::to_string(n) + ") r=" + std::to_string(r),
              rel_err(get_f32(be, dR.p, rn), R), 1e-5);
}

// galore_adam vs galore_adam_cpu over three calls
static void test_galore_adam(CudaBackend& be, size_t n) {
    fvec m1(n, 0.0f), m2(n, 0.0f), R;
    DBuf<float> dR(be, n), dm1(be, n), dm2(be, n);
    for (int k = 0; k < 3; k++) {
        R = randn(n, 0.01f);
        put_f32(be, dR.p, R);
        be.galore_adam(dR.p, dm1.p, dm2.p, n, 0.9f, 0.95f, 1e-8f);
        galore_adam_cpu(R.data(), m1.data(), m2.data(), n, 0.9f, 0.95f, 1e-8f);
    }
    fvec gR = get_f32(be, dR.p, n), g1 = get_f32(be, dm1.p, n), g2 = get_f32(be, dm2.p, n);
    std::string tag = "galore_adam n=" + std::to_string(n);
    check_tol(tag + " N", rel_err(gR, R), 1e-6);
    check_tol(tag + " m1", rel_err(g1, m1), 1e-6);
    check_tol(tag + " m2", rel_err(g2, m2), 1e-6);
    std::printf("    bitwise equal: N %zu, m1 %zu, m2 %zu of %zu\n", bitwise_equal(gR, R), bitwise_equal(g1, m1),
                bitwise_equal(g2, m2), n);
}

// RSO's two element-wise steps on B (m, r) against rso_prox_cpu / rso_track_cpu: both round each product and sum
// once (no FMA: __fmul_rn / __fadd_rn on the GPU, -ffp-contract=off on the host), so bit for bit; n not a multiple
// of the block, so the grid-stride loop's tail runs
static void test_rso_ops(CudaBackend& be, size_t n) {
    fvec R = randn(n, 0.01f), B = randn(n, 0.5f), N = randn(n, 0.02f);
    DBuf<float> dR(be, n), dB(be, n), dN(be, n);
    put_f32(be, dR.p, R);
    put_f32(be, dB.p, B);
    put_f32(be, dN.p, N);
    be.rso_prox(dR.p, dB.p, n, 0.37f);
    rso_prox_cpu(R.data(), B.data(), n, 0.37f);
    fvec gR = get_f32(be, dR.p, n);
    check(bitwise_equal(gR, R) == n, "rso_prox n=%zu: R += prox B bit for bit (%zu of %zu)", n, bitwise_equal(gR, R), n);
    be.rso_track(dB.p, dN.p, n, 3e-3f);
    rso_track_cpu(B.data(), N.data(), n, 3e-3f);
    fvec gB = get_f32(be, dB.p, n);
    check(bitwise_equal(gB, B) == n, "rso_track n=%zu: B -= step N bit for bit (%zu of %zu)", n, bitwise_equal(gB, B), n);
}

// galore_apply vs galore_apply_cpu
static void test_galore_apply(CudaBackend& be, int m, int n, int r, bool with_master) {
    bool right = m >= n;
    int k = right ? n : m;
    size_t rn = (size_t)r * (right ? m : n), mn = (size_t)m * n;
    const float step = 2.5e-4f, decay = 1e-4f;
    const uint64_t salt = 12345;
    fvec W = quantize(randn(mn, 0.05f)), N = randn(rn, 0.5f), P = randn((size_t)k * r, 0.1f), W0 = W;
    DBuf<floatX> dW(be, mn);
    DBuf<float> dmaster(be, mn), dN(be, rn), dP(be, P.size());
    put_x(be, dW.p, W);
    put_f32(be, dmaster.p, W);
    put_f32(be, dN.p, N);
    put_f32(be, dP.p, P);
    be.galore_apply(dW.p, with_master ? dmaster.p : nullptr, dN.p, dP.p, m, n, r, right, step, decay, salt);
    galore_apply_cpu(W.data(), N.data(), P.data(), m, n, r, right, step, decay);
    std::string tag = "galore_apply (" + std::to_string(m) + ", " + std::to_string(n) + ") r=" + std::to_string(r) +
                      (with_master ? " master" : " no master");
    fvec gW = get_x(be, dW.p, mn);
    if (with_master) {
        fvec gm = get_f32(be, dmaster.p, mn);
        check_tol(tag + " master", rel_err(gm, W), 1e-5);
        uint64_t cs = optim_call_seed(be.seed, salt, step, decay);
        check_rounding(tag, gW, gm, [&](float x, uint64_t i) { return optim_round<floatX>(x, cs, i); });
    } else if (BF16) {
        // the widened W, updated and rounded once: what the master path (checked above against the twin) makes of
        // the same W, bit for bit. (Not the twin rounded: optim_round hashes the value it rounds, so where the GPU's
        // and the CPU's fp32 sums differ by an ulp, a quarter of the elements in the left GEMM's order, a third of
        // those round the other way.)
        DBuf<floatX> dW2(be, mn);
        DBuf<float> dmaster2(be, mn);
        put_x(be, dW2.p, W0);
        put_f32(be, dmaster2.p, W0);
        be.galore_apply(dW2.p, dmaster2.p, dN.p, dP.p, m, n, r, right, step, decay, salt);
        check(bitwise_equal(gW, get_x(be, dW2.p, mn)) == mn && within_ulp(gW, W) == mn,
              "%s: bf16 params == the master path's, bitwise (and within an ulp of the twin's fp32)", tag.c_str());
    } else {
        check_tol(tag + " params", rel_err(gW, W), 1e-5);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// whole optimizer steps: <CudaBackend> vs <CpuBackend>
// ---------------------------------------------------------------------------------------------------------------

struct Problem {
    ModelConfig cfg;
    std::vector<ParamSpec> specs;
    size_t n = 0;
};

// GPT-2 (F = 4C, biases, wpe, tied head) or LLaMA (gate|up F = 256, untied head) with C = 96, NH = 3, L = 2:
// the models' own parameter lists (built on the CPU backend, host memory only)
static Problem make_problem(Arch arch) {
    Problem pb;
    ModelConfig& c = pb.cfg;
    c.arch = arch;
    c.name = arch == Arch::GPT2 ? "optim-cuda-gpt2" : "optim-cuda-llama";
    c.vocab_size = 100;
    c.padded_vocab_size = 128;
    c.num_layers = 2;
    c.num_heads = 3;
    c.channels = 96;
    c.hidden = arch == Arch::GPT2 ? 384 : 256;
    c.max_seq_len = 32;
    c.norm_eps = arch == Arch::GPT2 ? 1e-5f : 1e-6f;
    c.rope_theta = 10000.0f;
    c.tied_embeddings = arch == Arch::GPT2;
    CpuBackend cpu;
    if (arch == Arch::GPT2) {
        GPT2<CpuBackend> model(cpu, c);
        pb.specs = model.param_specs;
        pb.n = model.param_buffer_numel;
    } else {
        Llama<CpuBackend> model(cpu, c);
        pb.specs = model.param_specs;
        pb.n = model.param_buffer_numel;
    }
    return pb;
}

template <class B>
static std::vector<OptimizerStateTensor> states_of(const Muon<B>& o, const Problem&) {
    return o.state_tensors();
}
template <class B>
static std::vector<OptimizerStateTensor> states_of(const AdamMini<B>& o, const Problem&) {
    return o.state_tensors();
}
template <class B>
static std::vector<OptimizerStateTensor> states_of(const GaLore<B>& o, const Problem& pb) {
    return o.state_tensors(pb.specs);
}
template <class B>
static std::vector<OptimizerStateTensor> states_of(const Rso<B>& o, const Problem&) {
    return o.state_tensors();
}

// steps of the optimizer built by build(backend) on both backends from the same parameters and gradients;
// grads(step) gives the full gradient buffer (host, not yet rounded). Tolerances per parameter tensor
// (param_tol(name)) and per state tensor (state_tol(name)), see the top of the file.
template <class Build, class Grads, class ParamTol, class StateTol>
static void compare_steps(const std::string& tag, CudaBackend& gpu, const Problem& pb, Build build, Grads grads,
                          int steps, ParamTol param_tol, StateTol state_tol) {
    std::printf("%s\n", tag.c_str());
    const float lrs[] = {2e-3f, 3e-3f, 2.5e-3f, 1e-3f}, scales[] = {1.0f, 0.8f, 1.0f, 0.5f};
    CpuBackend cpu;
    auto oc = build(cpu);
    auto og = build(gpu);
    fvec p0 = quantize(randn(pb.n, 0.02f)), pc = p0;
    DBuf<floatX> dp(gpu, pb.n), dg(gpu, pb.n);
    put_x(gpu, dp.p, p0);
    std::vector<OptimizerStateTensor> sg = states_of(*og, pb), sc = states_of(*oc, pb);
    for (const OptimizerStateTensor& s : sg)  // the master weights start as the parameters (init_master_weights)
        if (og->master && s.data == og->master) gpu.upload(s.data, p0.data(), s.numel * sizeof(float));
    for (int k = 0; k < steps; k++) {
        fvec g = quantize(grads(k));
        put_x(gpu, dg.p, g);
        oc->step(pc.data(), g.data(), pb.specs, lrs[k % 4], scales[k % 4]);
        og->step(dp.p, dg.p, pb.specs, lrs[k % 4], scales[k % 4]);
    }
    fvec params = get_x(gpu, dp.p, pb.n), fp32 = params;
    if (og->master) {
        // the master weights may end before the parameter buffer's alignment padding (Muon: up to the last tensor)
        size_t len = 0;
        for (const OptimizerStateTensor& s : sg)
            if (s.data == og->master) len = s.numel;
        fvec m = get_f32(gpu, og->master, len);
        std::copy(m.begin(), m.end(), fp32.begin());
        check(within_ulp(params, fp32) == pb.n, "%s: bf16 params within 1 ulp of the master weights", tag.c_str());
    }
    for (const ParamSpec& s : pb.specs) {
        double num = 0, den = 0;
        for (size_t i = s.offset; i < s.offset + s.numel; i++) {
            double dc = (double)pc[i] - p0[i], d = std::fabs(((double)fp32[i] - p0[i]) - dc);
            num = worst_of(num, d);  // NaN fails
            den = std::max(den, std::fabs(dc));
        }
        check_tol(tag + " Δ" + s.name, num / (den > 0 ? den : 1.0), param_tol(s.name));
    }
    size_t j = 0;
    for (const OptimizerStateTensor& s : sg) {
        if (og->master && s.data == og->master) continue;
        if (j >= sc.size() || sc[j].name != s.name || sc[j].numel != s.numel) {
            check(false, "%s: state tensor %s has no CPU counterpart", tag.c_str(), s.name.c_str());
            return;
        }
        fvec want(sc[j].data, sc[j].data + s.numel);
        check_tol(tag + " state " + s.name, rel_err(get_f32(gpu, s.data, s.numel), want), state_tol(s.name));
        j++;
    }
}

// AdamW with 8-bit states, whole steps over a model's parameter list (blocks per tensor, decay per tensor, master
// weights in the bf16 build; the norms and biases, under 4096 elements, with fp32 moments): the GPU's master weights
// (fp32 build: params) and every state tensor bitwise equal to <CpuBackend>'s
static void test_adamw8_steps(CudaBackend& gpu, const Problem& pb, const std::string& a) {
    CpuBackend cpu;
    const std::vector<bool> fp32_specs = adamw8_fp32_specs(pb.specs, pb.cfg.num_layers);
    check(std::count(fp32_specs.begin(), fp32_specs.end(), true) > 0 &&
              std::count(fp32_specs.begin(), fp32_specs.end(), false) > 0,
          "adamw 8-bit states %s: tensors of both kinds", a.c_str());
    AdamW<CpuBackend> oc(cpu, pb.specs, 0, pb.n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::Q8, fp32_specs);
    AdamW<CudaBackend> og(gpu, pb.specs, 0, pb.n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::Q8, fp32_specs);
    fvec p0 = quantize(randn(pb.n, 0.02f)), pc = p0;
    DBuf<floatX> dp(gpu, pb.n), dg(gpu, pb.n);
    put_x(gpu, dp.p, p0);
    if (og.master) put_f32(gpu, og.master, p0);
    for (int k = 0; k < 4; k++) {
        fvec g = quantize(randn(pb.n, 0.01f));
        put_x(gpu, dg.p, g);
        oc.step(pc.data(), g.data(), pb.specs, 2e-3f, k == 2 ? 0.5f : 1.0f);
        og.step(dp.p, dg.p, pb.specs, 2e-3f, k == 2 ? 0.5f : 1.0f);
    }
    std::string tag = "adamw 8-bit states " + a;
    fvec fp32 = og.master ? get_f32(gpu, og.master, pb.n) : get_x(gpu, dp.p, pb.n);
    size_t same = 0;
    for (const ParamSpec& s : pb.specs)  // the padding between tensors is never updated
        for (size_t i = s.offset; i < s.offset + s.numel; i++) same += std::memcmp(&fp32[i], &pc[i], 4) == 0;
    size_t total = 0;
    for (const ParamSpec& s : pb.specs) total += s.numel;
    check(same == total, "%s: %s bitwise equal: %zu of %zu", tag.c_str(), og.master ? "master" : "params", same,
          total);
    std::vector<OptimizerStateTensor> sg = og.state_tensors(), sc = oc.state_tensors();
    size_t gpu_states = 0;  // the GPU's list also holds the master weights, which the CPU has none of
    for (const OptimizerStateTensor& t : sg) gpu_states += !(og.master && t.data == og.master);
    check(gpu_states == sc.size(), "%s: %zu state tensors besides the master weights (CPU %zu)", tag.c_str(),
          gpu_states, sc.size());
    for (size_t j = 0; j < sg.size() && j < sc.size(); j++) {
        if (sg[j].data == og.master && og.master) continue;
        std::vector<uint8_t> got(sg[j].nbytes());
        gpu.download(got.data(), sg[j].ptr(), got.size());
        check(std::memcmp(got.data(), sc[j].ptr(), got.size()) == 0, "%s: state %s bitwise equal", tag.c_str(),
              sg[j].name.c_str());
    }
}

static void test_whole_steps(CudaBackend& gpu) {
    for (Arch arch : {Arch::GPT2, Arch::LLAMA}) {
        Problem pb = make_problem(arch);
        std::string a = arch == Arch::GPT2 ? "gpt2" : "llama";
        test_adamw8_steps(gpu, pb, a);
        auto gaussian = [&](int) { return randn(pb.n, 0.01f); };
        auto hidden_tol = [](double hidden, double rest) {
            return [=](const std::string& name) { return muon_is_hidden(name) ? hidden : rest; };
        };
        // Muon: q/k/v (and gate/up) split, and LLaMA's fused blocks as single matrices
        for (bool split : {true, false}) {
            if (!split && arch == Arch::GPT2) continue;
            MuonOptions o;
            o.weight_decay = 0.1f;
            o.split_fused = split;
            auto build = [&](auto& be) {
                return std::make_unique<Muon<std::decay_t<decltype(be)>>>(be, pb.specs, pb.cfg, o);
            };
            compare_steps("muon " + a + (split ? " split" : " fused"), gpu, pb, build, gaussian, 4,
                          hidden_tol(BF16 ? 5e-2 : 2e-4, 1e-5), [](const std::string&) { return 1e-6; });
        }
        {
            AdamMiniOptions o;
            o.weight_decay = 0.1f;
            auto build = [&](auto& be) {
                return std::make_unique<AdamMini<std::decay_t<decltype(be)>>>(be, pb.specs, pb.cfg, o);
            };
            compare_steps("adam-mini " + a, gpu, pb, build, gaussian, 4, hidden_tol(1e-5, 1e-5),
                          [](const std::string&) { return 1e-6; });
        }
        {
            // rank C/4 = 24 (galore_default_rank for an unnamed config), refresh every 2 steps: at t = 0 and 2
            const int rank = galore_default_rank(pb.cfg);
            std::vector<GaloreBlock> blocks = galore_blocks(pb.specs, pb.cfg, rank);
            auto build = [&](auto& be) {
                return std::make_unique<GaLore<std::decay_t<decltype(be)>>>(be, pb.specs, pb.cfg, rank, 2, 0.25f,
                                                                             0.9f, 0.95f, 1e-4f, 0.1f);
            };
            // planted spectra in every projected block and layer (well-determined singular vectors, see above)
            auto grads = [&](int) {
                fvec g = randn(pb.n, 0.01f);
                for (const GaloreBlock& b : blocks)
                    for (int l = 0; l < b.layers; l++) {
                        fvec x = planted(b.rows, b.cols, 0.01f);
                        std::copy(x.begin(), x.end(), g.begin() + b.offset + (size_t)l * b.layer_stride);
                    }
                return g;
            };
            auto state_tol = [](const std::string& name) {
                if (name.rfind("galore.", 0) != 0) return 1e-6;
                return name.size() > 5 && name.compare(name.size() - 5, 5, ".proj") == 0 ? 1e-3 : 2e-3;
            };
            compare_steps("galore " + a, gpu, pb, build, grads, 4, hidden_tol(2e-3, 1e-5), state_tol);
        }
        {
            // RSO: rank 24, a new subspace every 2 steps (after steps 2 and 4), proximal term on. P is drawn on the
            // host from the same key for both backends (bitwise equal); the rest is GaLore's project / Adam / apply
            // (right side) and two element-wise steps, so the blocks get the element-wise tolerance times the
            // GEMMs' fp32 reordering (1e-6 relative in R) amplified by Adam's normalization; eps = 1e-4 keeps
            // near-zero entries of R from flipping sign (as for GaLore above): 1e-4.
            RsoOptions o;
            o.rank = 24;
            o.gap = 2;
            o.prox = 0.1f;
            o.eps = 1e-4f;
            o.weight_decay = 0.1f;
            auto build = [&](auto& be) {
                return std::make_unique<Rso<std::decay_t<decltype(be)>>>(be, pb.specs, pb.cfg, o);
            };
            auto rso_tol = [](const std::string& name) {
                if (name.rfind("rso.", 0) != 0) return 1e-6;
                return name.size() > 5 && name.compare(name.size() - 5, 5, ".proj") == 0 ? 0.0 : 1e-4;
            };
            compare_steps("rso " + a, gpu, pb, build, gaussian, 5, hidden_tol(1e-4, 1e-5), rso_tol);
        }
    }
}

int main() {
    if (int rc = gpu_unavailable_exit_code("test_optim_cuda"); rc >= 0) return rc;
    try {
        cudaDeviceProp prop;
        cudaCheck(cudaGetDeviceProperties(&prop, 0));
        std::printf("device 0: %s (sm_%d%d), build floatX = %s\n", prop.name, prop.major, prop.minor,
                    PRAC_FLOATX_NAME);
        CudaBackend gpu(0, 0x5EEDull);

        std::printf("==== muon ====\n");
        for (size_t n : {(size_t)96 * 160, (size_t)1001})
            for (bool nesterov : {true, false}) test_muon_momentum(gpu, n, nesterov);
        const int ns_shapes[][2] = {{96, 160}, {160, 96}, {96, 96}, {288, 96}, {512, 96}, {96, 256}, {1, 96}};
        for (auto& s : ns_shapes) test_newton_schulz(gpu, s[0], s[1], MUON_NS_STEPS);
        const int ns1_shapes[][2] = {{160, 96}, {96, 160}, {288, 96}, {97, 61}};
        for (auto& s : ns1_shapes) test_newton_schulz(gpu, s[0], s[1], 1);
        test_newton_schulz(gpu, 96, 160, MUON_NS_STEPS, 3);  // batches (train/optim_muon.h), wide and tall
        test_newton_schulz(gpu, 288, 96, MUON_NS_STEPS, 2);
        test_newton_schulz(gpu, 97, 61, MUON_NS_STEPS, 3);  // rows x cols odd: unaligned copies, scalar sums
        for (bool master : {true, false}) test_muon_apply(gpu, (size_t)96 * 160, master);
        test_optim_round_unbiased();

        std::printf("==== adam-mini ====\n");
        // (n, block): rows of C = 96 and F = 256; q/k heads (HS = 32: 32 x 96); one norm; AdamW (block 1)
        const size_t am[][2] = {{96 * 160, 160}, {2 * 96 * 96, 32 * 96}, {96 * 96, 96}, {96, 96}, {2 * 256, 256},
                                {1001, 1}};
        for (auto& c : am)
            for (bool master : {true, false}) test_adam_mini(gpu, c[0], c[1], master, 0);
        test_adam_mini(gpu, 96 * 160, 160, true, 3);

        std::printf("==== adamw, 8-bit states ====\n");
        for (size_t n : {(size_t)2 * ADAMW8_BLOCK + 555, (size_t)100})
            for (bool master : {true, false}) test_adamw8(gpu, n, master);

        std::printf("==== galore ====\n");
        const int gl[][3] = {{160, 96, 24}, {96, 160, 24}, {96, 96, 96}, {256, 96, 24}, {96, 256, 24}, {96, 96, 1}};
        for (auto& c : gl) test_galore_refresh(gpu, c[0], c[1], c[2]);
        test_galore_refresh(gpu, 640, 600, 16);  // a projected side over the 256 threads of top_vectors_kernel's
        test_galore_refresh(gpu, 600, 640, 16);  // blocks and not a multiple of 32: each thread scans several entries
        test_galore_refresh_special(gpu);
        test_galore_refresh_small_tail(gpu, 96, 160);
        test_galore_refresh_small_tail(gpu, 160, 96);
        test_galore_syevd_estimate(gpu);
#if !defined(PRAC_CUDA_EMU)
        time_galore_refresh_llama_1b(gpu);
#endif
        for (auto& c : gl) test_galore_project(gpu, c[0], c[1], c[2]);
        test_galore_adam(gpu, (size_t)160 * 24);
        for (auto& c : gl)
            for (bool master : {true, false}) test_galore_apply(gpu, c[0], c[1], c[2], master);

        std::printf("==== rso ====\n");
        for (size_t n : {(size_t)96 * 24, (size_t)100003}) test_rso_ops(gpu, n);

        std::printf("==== whole optimizer steps ====\n");
        test_whole_steps(gpu);
    } catch (const std::exception& ex) {
        check_exception(ex);
    }
    return gpu_test_summary("test_optim_cuda");
}
