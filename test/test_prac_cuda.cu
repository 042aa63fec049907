// GPU test of prac/prac_cuda.cu: every CUDA PRAC op against its CPU twin (prac/prac.h, prac/prac_cpu.cpp) on
// random inputs, for fp32 and bf16 activations.
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no CUDA device (ctest: "Not Run (Skipped)"); with
// REQUIRE_GPU=1 in the environment a missing device is a failure (exit 1) instead of a skip.
//
// Tolerances (max |gpu - cpu| / max |cpu| over the output, unless said otherwise):
//   fp32 GEMM ops                      1e-4  (cuBLAS vs OpenBLAS fp32, different summation orders)
//   bf16 GEMM ops                      1e-2  (inputs are the same bf16 values on both sides; the GPU rounds its
//                                             output, and in weight_grad the (OC, r) intermediate, to bf16:
//                                             2^-9 relative each)
//   Gaussian draw                      bitwise, or 1 ulp where libm and CUDA's double log/sin/cos differ in the
//                                      last bit before the rounding to float; more than 1 ulp fails
//   refresh projectors (max abs)       fp32 1e-4, bf16 5e-3 (P rounded to bf16); exact and subspace Q1
//   refresh tail energy (fp32)         1e-3 relative to the CPU twin's (the variance PRAC pays is k - 1 times it)
//   refresh orthonormality (max abs)   fp32 1e-4, bf16 1e-2
//   weight_grad dbias vs matmul_backward_weight_cuda's dbias: bitwise (the same deterministic two-stage column sum)
//   fp8 quantize (codes, row scales): bitwise; fp8 dequantize: equal values (exact on both sides), NaN for NaN
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"  // format
#include "test/gpu/gpu_test.h"
#if defined(PRAC_CUDA_EMU)
#include "kernels/cuda_emu/emu_internal.h"  // cuda_emu::launches_of
#endif
#include "kernels/matmul.cuh"
#include "prac/prac.h"
#include "prac/prac_cuda.cuh"
#include "test/q2_fallback_case.h"
#include "train/planner.h"  // plan_cuda_refresh_workspace

using bf16 = __nv_bfloat16;

static std::mt19937_64 g_rng(1234);
static std::vector<float> randn(size_t n, float scale = 1.0f) { return normal_values(g_rng, n, scale); }

static double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double d = std::fabs((double)a[i] - (double)b[i]);
        m = worst_of(m, d);
    }
    return m;
}

struct Ctx {
    PracCudaHandles h;
};

// ---------------------------------------------------------------------------------------------------------------
// compress / reconstruct / weight_grad
// ---------------------------------------------------------------------------------------------------------------
// pad > 0: the full activations (x, and dY for weight_grad) live at a row stride of width + pad, as LLaMA's (N, F)
// activations with --hidden-align: NaN in the padding columns (a read of one poisons the result), and
// reconstruct's padding columns must keep the sentinel they held. The references are the contiguous CPU twins.
template <typename T, typename G>
static void test_gemm_ops(Ctx& c, int N, int n, int r, int OC, int pad = 0) {
    const double tol = std::is_same<T, float>::value && std::is_same<G, float>::value ? 1e-4 : 1e-2;
    const double tol_act = std::is_same<T, float>::value ? 1e-4 : 1e-2;
    // dbias sums dY's columns in fp32 into G: with fp32 gradients no bf16 rounding is on its path, whatever T
    const double tol_dbias = std::is_same<G, float>::value ? 1e-4 : 1e-2;
    std::printf("gemm ops %s act / %s grad, N=%d n=%d r=%d OC=%d%s\n", Host<T>::name(), Host<G>::name(), N, n, r, OC,
                pad ? (" rows at stride width + " + std::to_string(pad)).c_str() : "");
    const int ld_x = pad ? n + pad : 0, ld_dy = pad ? OC + pad : 0;  // 0: contiguous (the default argument)
    auto strided = [&](const std::vector<float>& a, int rows, int cols, float fill) {  // (rows, cols) at cols + pad
        std::vector<float> out((size_t)rows * (cols + pad), fill);
        for (int i = 0; i < rows; i++)
            std::copy(a.begin() + (size_t)i * cols, a.begin() + (size_t)(i + 1) * cols, out.begin() + (size_t)i * (cols + pad));
        return out;
    };
    auto unstrided = [&](const std::vector<float>& a, int rows, int cols) {
        std::vector<float> out((size_t)rows * cols);
        for (int i = 0; i < rows; i++)
            std::copy(a.begin() + (size_t)i * (cols + pad), a.begin() + (size_t)i * (cols + pad) + cols,
                      out.begin() + (size_t)i * cols);
        return out;
    };
    std::vector<float> x = quantize<T>(randn((size_t)N * n)), P = quantize<T>(randn((size_t)n * r, 0.1f));
    std::vector<float> xc_in = quantize<T>(randn((size_t)N * r)), dY = quantize<T>(randn((size_t)N * OC));
    std::vector<float> dW0 = quantize<G>(randn((size_t)OC * n)), db0 = quantize<G>(randn(OC));
    const std::vector<float> xs = strided(x, N, n, NAN), dYs = strided(dY, N, OC, NAN);
    const std::vector<float> xr_init = strided(std::vector<float>((size_t)N * n, 0.0f), N, n, 7.0f);
    Dev<T> dx(xs.size()), dP(P.size()), dxc(xc_in.size()), ddY(dYs.size()), dxr(xr_init.size());
    Dev<G> ddW(dW0.size()), ddb(db0.size());
    Dev<float> dtmp((size_t)OC * r);
    upload(dx, xs);
    upload(dP, P);
    upload(dxc, xc_in);
    upload(ddY, dYs);
    upload(ddW, dW0);
    upload(ddb, db0);
    upload(dxr, xr_init);

    // compress
    std::vector<float> xc_ref((size_t)N * r);
    prac_compress_cpu(xc_ref.data(), x.data(), P.data(), N, n, r);
    Dev<T> dxc_out(xc_ref.size());
    prac_compress_cuda(dxc_out.p, dx.p, dP.p, N, n, r, c.h, ld_x);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    double e = rel_err(download(dxc_out, xc_ref.size()), xc_ref);
    check(e <= tol_act, "compress: rel err %.3g (tol %.0e)", e, tol_act);

    // reconstruct (from independent xc)
    std::vector<float> xr_ref((size_t)N * n);
    prac_reconstruct_cpu(xr_ref.data(), xc_in.data(), P.data(), N, n, r);
    prac_reconstruct_cuda(dxr.p, dxc.p, dP.p, N, n, r, c.h, ld_x);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    std::vector<float> xr = download(dxr, xr_init.size());
    e = rel_err(unstrided(xr, N, n), xr_ref);
    check(e <= tol_act, "reconstruct: rel err %.3g (tol %.0e)", e, tol_act);
    if (pad) {
        bool kept = true;
        for (int i = 0; i < N; i++)
            for (int j = n; j < n + pad; j++) kept &= xr[(size_t)i * (n + pad) + j] == 7.0f;
        check(kept, "reconstruct leaves the padding columns alone");
    }

    // weight_grad (accumulates into random dW, dbias)
    std::vector<float> dW_ref = dW0, db_ref = db0, tmp_ref((size_t)OC * r);
    prac_weight_grad_cpu(dW_ref.data(), db_ref.data(), dY.data(), xc_in.data(), P.data(), N, n, r, OC, tmp_ref.data());
    prac_weight_grad_cuda<T, G>(ddW.p, ddb.p, ddY.p, dxc.p, dP.p, N, n, r, OC, dtmp.p, c.h, ld_dy);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    e = rel_err(download(ddW, dW_ref.size()), dW_ref);
    check(e <= tol, "weight_grad dW: rel err %.3g (tol %.0e)", e, tol);
    double eb = rel_err(download(ddb, db_ref.size()), db_ref);
    check(eb <= tol_dbias, "weight_grad dbias: rel err %.3g (tol %.0e)", eb, tol_dbias);

    // without bias: dW accumulates a second time, dbias untouched
    prac_weight_grad_cpu(dW_ref.data(), (float*)nullptr, dY.data(), xc_in.data(), P.data(), N, n, r, OC,
                         tmp_ref.data());
    std::vector<uint8_t> db_before = download_bytes(ddb);
    prac_weight_grad_cuda<T, G>(ddW.p, (G*)nullptr, ddY.p, dxc.p, dP.p, N, n, r, OC, dtmp.p, c.h, ld_dy);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    e = rel_err(download(ddW, dW_ref.size()), dW_ref);
    check(e <= tol, "weight_grad dW (2nd accumulation, no bias): rel err %.3g (tol %.0e)", e, tol);
    check(download_bytes(ddb) == db_before, "weight_grad without bias leaves dbias untouched, bit for bit");
}

// A compressed site's bias gradient must be the uncompressed site's (matmul_backward_weight_cuda) bit for bit: the
// same deterministic two-stage column sum over matmul_dbias_groups(N) row groups, enough blocks to fill a GPU
// (ceil(OC/32) x G instead of ceil(OC/32)), run to run identical. Storage types of the build (floatX), as the
// backend calls both. N = 4096: 16 row groups; dY (N, OC), the matmul path's input (N, 8) is arbitrary.
static void test_dbias_like_matmul(Ctx& c, int N, int n, int r, int OC) {
    using X = floatX;
    std::printf("weight_grad dbias vs matmul_backward_weight dbias (%s), N=%d n=%d r=%d OC=%d\n", Host<X>::name(), N,
                n, r, OC);
    const int Cin = 8;
    std::vector<float> dY = quantize<X>(randn((size_t)N * OC)), db0 = quantize<X>(randn(OC));
    std::vector<float> xc = quantize<X>(randn((size_t)N * r)), P = quantize<X>(randn((size_t)n * r, 0.1f));
    std::vector<float> inp = quantize<X>(randn((size_t)N * Cin));
    Dev<X> ddY(dY.size()), dxc(xc.size()), dP(P.size()), dinp(inp.size());
    Dev<X> ddW((size_t)OC * n), ddWm((size_t)OC * Cin), db_prac(OC), db_prac2(OC), db_mm(OC);
    Dev<float> dtmp((size_t)OC * r);
    upload(ddY, dY);
    upload(dxc, xc);
    upload(dP, P);
    upload(dinp, inp);
    upload(db_prac, db0);
    upload(db_prac2, db0);
    upload(db_mm, db0);
    cudaCheck(cudaMemset(ddW.p, 0, ddW.bytes()));
    cudaCheck(cudaMemset(ddWm.p, 0, ddWm.bytes()));

#if defined(PRAC_CUDA_EMU)
    const long partial0 = cuda_emu::launches_of("matmul_dbias_partial_kernel");
#endif
    prac_weight_grad_cuda<X, X>(ddW.p, db_prac.p, ddY.p, dxc.p, dP.p, N, n, r, OC, dtmp.p, c.h);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
#if defined(PRAC_CUDA_EMU)
    const long partial1 = cuda_emu::launches_of("matmul_dbias_partial_kernel");
    check(partial1 == partial0 + 1, "weight_grad dbias runs the matmul path's row-group partial sums (%ld launch(es) "
          "of matmul_dbias_partial_kernel, want 1)", partial1 - partial0);
#endif
    prac_weight_grad_cuda<X, X>(ddW.p, db_prac2.p, ddY.p, dxc.p, dP.p, N, n, r, OC, dtmp.p, c.h);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    {
        CublasLt lt;
        matmul_backward_weight_cuda(ddWm.p, db_mm.p, ddY.p, dinp.p, N, Cin, OC, nullptr, lt, c.h.stream);
        cudaCheck(cudaStreamSynchronize(c.h.stream));
    }
    std::vector<uint8_t> a = download_bytes(db_prac), a2 = download_bytes(db_prac2), m = download_bytes(db_mm);
    size_t same = 0;
    for (int o = 0; o < OC; o++) same += std::memcmp(&a[o * sizeof(X)], &m[o * sizeof(X)], sizeof(X)) == 0;
    check(same == (size_t)OC, "weight_grad dbias bitwise equal to matmul_backward_weight's: %zu of %d", same, OC);
    check(a == a2, "weight_grad dbias bitwise equal over two runs");
    std::vector<float> db_ref = db0;  // the CPU twin's column sums (fp32, sequential)
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) db_ref[o] += dY[(size_t)i * OC + o];
    const double tol = std::is_same<X, float>::value ? 1e-4 : 1e-2;
    double e = rel_err(download(db_prac, OC), db_ref);
    check(e <= tol, "weight_grad dbias vs the CPU column sums: rel err %.3g (tol %.0e)", e, tol);
}

// ---------------------------------------------------------------------------------------------------------------
// Gaussian draw
// ---------------------------------------------------------------------------------------------------------------
static void test_gaussian(Ctx& c, int n, int cols, int ld, PracDrawKey key) {
    std::printf("gaussian n=%d cols=%d ld=%d key(seed=%llu site=%u layer=%u refresh=%llu purpose=%u)\n", n, cols, ld,
                (unsigned long long)key.seed, key.site, key.layer, (unsigned long long)key.refresh, key.purpose);
    size_t count = (size_t)n * ld;
    std::vector<float> ref(count);
    std::memset(ref.data(), 0xFF, count * 4);  // padding columns stay 0xFFFFFFFF on both sides
    prac_gaussian_cpu(ref.data(), n, cols, ld, key);
    Dev<float> d(count);
    cudaCheck(cudaMemset(d.p, 0xFF, count * 4));
    prac_gaussian_cuda(d.p, n, cols, ld, key, c.h.stream);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    std::vector<uint8_t> got = download_bytes(d);
    size_t exact = 0, ulp1 = 0, worse = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t a, b;
        std::memcpy(&a, got.data() + 4 * i, 4);
        std::memcpy(&b, reinterpret_cast<const uint8_t*>(ref.data()) + 4 * i, 4);
        if (a == b)
            exact++;
        else if ((a ^ b) >= 0 && std::abs((int64_t)a - (int64_t)b) == 1)  // same sign, neighbouring floats
            ulp1++;
        else
            worse++;
    }
    check(worse == 0, "gaussian: %zu of %zu bitwise equal, %zu 1-ulp, %zu worse (must be 0)", exact, count, ulp1,
          worse);
}

// ---------------------------------------------------------------------------------------------------------------
// fp8 storage
// ---------------------------------------------------------------------------------------------------------------
// prac_fp8_quantize_cuda against prac_fp8_quantize_cpu on the same values (exact in T): codes and row scales
// bitwise; prac_fp8_dequantize_cuda against the CPU twin: equal values (NaN where the CPU has NaN). Rows of every
// kind: ordinary, tiny (1e-30) and huge (1e30) scales, a zero row, NaN and ±Inf elements; r odd so Philox blocks
// straddle rows; r wider than a thread block; row0 > 0 (a later row block of a site).
template <typename T>
static void test_fp8(Ctx& c, int N, int r, uint64_t row0, PracDrawKey key) {
    std::printf("fp8 quantize/dequantize %s N=%d r=%d row0=%llu\n", Host<T>::name(), N, r, (unsigned long long)row0);
    std::vector<float> x = randn((size_t)N * r);
    for (int i = 0; i < N; i++) {
        float s = i % 5 == 1 ? 1e-30f : i % 5 == 2 ? 1e30f : i % 5 == 3 ? 0.0f : 1.0f;
        for (int j = 0; j < r; j++) x[(size_t)i * r + j] *= s;
    }
    if (N > 4) {
        x[(size_t)4 * r + 0] = NAN;
        x[(size_t)4 * r + r / 2] = INFINITY;
        x[(size_t)4 * r + r - 1] = -INFINITY;
    }
    x = quantize<T>(x);
    std::vector<uint8_t> q_ref((size_t)N * r);
    std::vector<float> s_ref(N), back_ref((size_t)N * r);
    prac_fp8_quantize_cpu(q_ref.data(), s_ref.data(), x.data(), N, r, row0, key);
    prac_fp8_dequantize_cpu(back_ref.data(), q_ref.data(), s_ref.data(), N, r);
    Dev<T> dx(x.size()), dback(x.size());
    Dev<uint8_t> dq(q_ref.size());
    Dev<float> ds(N);
    upload(dx, x);
    prac_fp8_quantize_cuda(dq.p, ds.p, dx.p, N, r, row0, key, c.h.stream);
    prac_fp8_dequantize_cuda(dback.p, dq.p, ds.p, N, r, c.h.stream);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    std::vector<uint8_t> q = download_bytes(dq);
    std::vector<float> sc = download(ds, N), back = download(dback, x.size());
    size_t same = 0;
    for (size_t e = 0; e < q.size(); e++) same += q[e] == q_ref[e];
    check(same == q.size(), "fp8 quantize: %zu of %zu codes bitwise equal to the CPU twin's", same, q.size());
    check(std::memcmp(sc.data(), s_ref.data(), N * sizeof(float)) == 0, "fp8 quantize: row scales bitwise equal");
    size_t equal = 0;
    for (size_t e = 0; e < back.size(); e++)
        equal += std::isnan(back_ref[e]) ? std::isnan(back[e]) : back[e] == back_ref[e];
    check(equal == back.size(), "fp8 dequantize: %zu of %zu values equal to the CPU twin's", equal, back.size());
}

// The device decode (the __nv_fp8_e4m3 -> half conversion) of all 256 codes equals the CPU twin's decode, which
// test_prac_fp8.cpp checks against the OCP definition; scale 2^-3 on the second row.
template <typename T>
static void test_fp8_all_codes(Ctx& c) {
    std::printf("fp8 dequantize of all 256 codes, %s\n", Host<T>::name());
    std::vector<uint8_t> q(512);
    for (int e = 0; e < 512; e++) q[e] = (uint8_t)(e & 255);
    std::vector<float> s = {1.0f, 0.125f}, ref(512);
    prac_fp8_dequantize_cpu(ref.data(), q.data(), s.data(), 2, 256);
    Dev<uint8_t> dq(512);
    Dev<float> ds(2);
    Dev<T> dx(512);
    cudaCheck(cudaMemcpy(dq.p, q.data(), 512, cudaMemcpyHostToDevice));
    upload(ds, s);
    prac_fp8_dequantize_cuda(dx.p, dq.p, ds.p, 2, 256, c.h.stream);
    cudaCheck(cudaStreamSynchronize(c.h.stream));
    std::vector<float> got = download(dx, 512);
    size_t equal = 0;
    for (int e = 0; e < 512; e++)
        equal += std::isnan(ref[e]) ? std::isnan(got[e]) : (got[e] == ref[e] && std::signbit(got[e]) == std::signbit(ref[e]));
    check(equal == 512, "fp8 decode of all codes: %zu of 512 equal to the CPU twin's (NaN for S.1111.111)", equal);
}

// ---------------------------------------------------------------------------------------------------------------
// refresh
// ---------------------------------------------------------------------------------------------------------------
// host helpers on row-major P (n, r)
static std::vector<float> projector(const std::vector<float>& P, int n, int r, int c0, int c, float scale) {
    std::vector<float> out((size_t)n * n, 0.0f);
    if (c > 0) gemm_cpu(false, true, n, n, c, scale, P.data() + c0, r, P.data() + c0, r, 0.0f, out.data(), n);
    return out;
}
// max |A^T B * scale - (same ? I : 0)| for column blocks A = P[:, a0:a0+ca], B = P[:, b0:b0+cb]
static double ortho_err(const std::vector<float>& P, int n, int r, int a0, int ca, int b0, int cb, float scale,
                        bool identity) {
    if (ca == 0 || cb == 0) return 0;
    std::vector<float> g((size_t)ca * cb);
    gemm_cpu(true, false, ca, cb, n, scale, P.data() + a0, r, P.data() + b0, r, 0.0f, g.data(), cb);
    double m = 0;
    for (int i = 0; i < ca; i++)
        for (int j = 0; j < cb; j++) {
            double d = std::fabs(g[(size_t)i * cb + j] - (identity && i == j ? 1.0 : 0.0));
            m = worst_of(m, d);
        }
    return m;
}
static bool same_bits(const std::vector<float>& a, const std::vector<float>& b, int n, int r, int c0, int c1) {
    for (int i = 0; i < n; i++)
        for (int j = c0; j < c1; j++)
            if (std::memcmp(&a[(size_t)i * r + j], &b[(size_t)i * r + j], 4) != 0) return false;
    return true;
}

// x (N, n) with a clear gap after the top r1 directions: rank-r1 signal plus small noise
// x (N, n) = a rank-r1 signal plus Gaussian noise of scale `noise` (0: x has rank r1)
static std::vector<float> structured_x(int N, int n, int r1, float noise = 0.05f) {
    std::vector<float> x = randn((size_t)N * n, noise);
    if (r1 > 0) {
        std::vector<float> Z = randn((size_t)N * r1), V = randn((size_t)n * r1, 1.0f / std::sqrt((float)n));
        gemm_cpu(false, true, N, n, r1, 1.0f, Z.data(), r1, V.data(), r1, 1.0f, x.data(), n);
    }
    return x;
}

template <typename T>
struct RefreshCase {
    Ctx& c;
    int N, n;
    SiteDims d;
    Dev<uint8_t> ws;
    size_t ws_bytes;
    double tol_proj, tol_orth;
    RefreshCase(Ctx& ctx, int N_, int n_, SiteDims d_, size_t bytes)
        : c(ctx), N(N_), n(n_), d(d_), ws(bytes), ws_bytes(bytes) {
        bool f32 = std::is_same<T, float>::value;
        tol_proj = f32 ? 1e-4 : 5e-3;
        tol_orth = f32 ? 1e-4 : 1e-2;
    }

    // Runs both twins from the same previous P (values exact in T) and input x; returns the GPU's new P.
    std::vector<float> run(const char* what, const std::vector<float>& Pprev, const std::vector<float>& x, bool q1,
                           bool q2, bool had_basis, const PracDrawKey& key, std::vector<float>* Pcpu_out,
                           PracRefreshResult* rg_out) {
        int r = d.r();
        std::vector<float> Pcpu = Pprev;
        PracRefreshResult rc = prac_refresh_cpu(Pcpu.data(), x.data(), N, n, d, q1, q2, had_basis, key);
        Dev<T> dP(Pprev.size()), dx(x.size());
        upload(dP, Pprev);
        upload(dx, x);
        PracRefreshResult rg = prac_refresh_cuda(dP.p, dx.p, N, n, d, q1, q2, had_basis, key, c.h, ws.p, ws_bytes);
        std::vector<float> Pg = download(dP, (size_t)n * r);
        for (auto [twin, res] : {std::pair{"cpu", &rc}, std::pair{"gpu", &rg}})
            std::printf("  %s: %s {q1_ok %d q2_ok %d q1_changed %d q2_drawn %d q2_householder %d q1 orth fallbacks "
                        "%d shifted (%d passes), %d householder \"%s\"}\n", what, twin, res->q1_ok, res->q2_ok,
                        res->q1_changed, res->q2_drawn, res->q2_householder, res->q1_shifted_qr,
                        res->q1_shifted_passes, res->q1_householder_qr, res->message.c_str());
        check(rc.q1_ok == rg.q1_ok && rc.q2_ok == rg.q2_ok && rc.q1_changed == rg.q1_changed &&
                  rc.q2_drawn == rg.q2_drawn && rc.q2_householder == rg.q2_householder &&
                  rc.q1_shifted_qr == rg.q1_shifted_qr && rc.q1_householder_qr == rg.q1_householder_qr &&
                  rc.message.empty() == rg.message.empty(),
              "%s: result flags equal the CPU's", what);
        // Which fallback took over must match; how many shifted passes it made depends on the rounding (cuBLAS's
        // against OpenBLAS's on a GPU), so the passes are only printed.
        if (Pcpu_out) *Pcpu_out = Pcpu;
        if (rg_out) *rg_out = rg;
        return Pg;
    }
    // projectors, orthonormality
    void compare(const char* what, const std::vector<float>& Pg, const std::vector<float>& Pc) {
        int r1 = d.r1, r2 = d.r2, r = d.r();
        if (r1 > 0) {
            double e = max_abs_diff(projector(Pg, n, r, 0, r1, 1.0f), projector(Pc, n, r, 0, r1, 1.0f));
            check(e <= tol_proj, "%s: Q1 Q1^T vs CPU max abs diff %.3g (tol %.0e)", what, e, tol_proj);
            double o = ortho_err(Pg, n, r, 0, r1, 0, r1, 1.0f, true);
            check(o <= tol_orth, "%s: Q1^T Q1 = I, max abs err %.3g (tol %.0e)", what, o, tol_orth);
        }
        if (r2 > 0) {
            float ik = 1.0f / d.k;
            double e = max_abs_diff(projector(Pg, n, r, r1, r2, ik), projector(Pc, n, r, r1, r2, ik));
            check(e <= tol_proj, "%s: Q2 Q2^T / k vs CPU max abs diff %.3g (tol %.0e)", what, e, tol_proj);
            double o = ortho_err(Pg, n, r, r1, r2, r1, r2, ik, true);
            check(o <= tol_orth, "%s: Q2^T Q2 = k I, max abs err %.3g (tol %.0e)", what, o, tol_orth);
            double x = ortho_err(Pg, n, r, 0, r1, r1, r2, 1.0f / std::sqrt(d.k), false);
            check(x <= tol_orth, "%s: Q1^T Q2 = 0, max abs err %.3g (tol %.0e)", what, x, tol_orth);
        }
    }
};

// ||x||² - ||x Q1||² in double, Q1 the first r1 columns of the (n, r) row-major P
static double tail_energy(const std::vector<float>& x, int N, int n, const std::vector<float>& P, int r, int r1) {
    double t = 0;
    for (int i = 0; i < N; i++) {
        const float* xi = x.data() + (size_t)i * n;
        for (int j = 0; j < n; j++) t += (double)xi[j] * xi[j];
        for (int c = 0; c < r1; c++) {
            double s = 0;
            for (int j = 0; j < n; j++) s += (double)xi[j] * P[(size_t)j * r + c];
            t -= s * s;
        }
    }
    return t;
}

// The refresh against prac_refresh_cpu, with Q1 by `method` (the subspace refresh with or without its Nyström
// step) on x = a rank-r1 signal plus noise of scale `noise` (0: rank r1, below the subspace block: the Cholesky-QR
// and Nyström fallbacks run: shifted Cholesky-QR, or Householder QR with shifted_passes = 0).
template <typename T>
static void test_refresh(Ctx& c, int N, int n, int r1, int r2, float k_mult,
                         PracRefresh method = PracRefresh::EXACT, bool nystrom = true, float noise = 0.05f,
                         int shifted_passes = PracSubspaceParams().shifted_passes) {
    SiteDims d;
    d.refresh = method;
    d.subspace.nystrom = nystrom;
    d.subspace.shifted_passes = shifted_passes;
    d.compressed = true;
    d.r1 = r1;
    d.r2 = r2;
    d.k = r2 > 0 ? k_mult * (float)(n - r1) / (float)r2 : 1.0f;
    int r = d.r();
    std::printf("refresh %s %s%s N=%d n=%d r1=%d r2=%d k=%g block %d noise %g shifted_passes %d\n", Host<T>::name(),
                prac_refresh_name(method), nystrom ? "" : " (no Nystrom)", N, n, r1, r2, d.k, d.block(n), noise,
                shifted_passes);
#if defined(PRAC_CUDA_EMU)
    const long waits_before = cuda_emu::host_waits();
#endif
    size_t bytes = prac_refresh_workspace_bytes(c.h.cusolver, n, d);
#if defined(PRAC_CUDA_EMU)
    // with a device pointer standing in for the matrices, the query makes the host wait for nothing: without one it
    // allocates and frees its own, and cudaFree waits for all the device's work (a refresh solve in flight)
    const long own_waits = cuda_emu::host_waits() - waits_before;
    float* stand_in = nullptr;
    cudaCheck(cudaMalloc(&stand_in, 256));
    const long before_stand_in = cuda_emu::host_waits();
    const size_t with_stand_in = prac_refresh_workspace_bytes(c.h.cusolver, n, d, stand_in);
    check(with_stand_in == bytes && cuda_emu::host_waits() == before_stand_in && own_waits > 0,
          "the workspace query with a stand-in pointer: %zu bytes (want %zu), %ld host waits (want 0; %ld without "
          "one)", with_stand_in, bytes, cuda_emu::host_waits() - before_stand_in, own_waits);
    cudaCheck(cudaFree(stand_in));
#endif
    size_t planned = plan_cuda_refresh_workspace(n, d);
    std::printf("  workspace %zu bytes; the memory planner counts %zu (its cuSOLVER buffer is an estimate)\n", bytes,
                planned);
#if defined(PRAC_CUDA_EMU)
    // the emulated cuSOLVER sizes its buffers by LAPACK's workspace queries, which the planner's estimate follows
    // (ssyevd's documented minimum): the two agree to a few KiB; on a GPU cuSOLVER's own sizes are only printed
    double gap = std::fabs((double)planned - (double)bytes);
    check(gap <= 0.02 * (double)bytes + 8192, "planner's refresh workspace %zu within 2%% + 8 KiB of the emulated "
          "%zu", planned, bytes);
#endif
    RefreshCase<T> tc(c, N, n, d, bytes);
    std::vector<float> x = quantize<T>(structured_x(N, n, r1, noise)), Pc, Pg;
    PracDrawKey key{42, 3, 5, 0};

    // 1. first refresh: no basis yet (P zero, as the backend allocates it)
    std::vector<float> P0((size_t)n * r, 0.0f);
    Pg = tc.run("first", P0, x, true, true, false, key, &Pc, nullptr);
    tc.compare("first", Pg, Pc);
    const std::vector<float> P1 = Pg;

    // 2. Q2 only (next draw): Q1 keeps its bits, Q2 spans what the CPU's spans
    std::vector<float> Pprev = Pg;
    key.refresh = 1;
    Pg = tc.run("q2 only", Pprev, x, false, true, true, key, &Pc, nullptr);
    check(same_bits(Pg, Pprev, n, r, 0, r1), "q2 only: Q1 block bitwise unchanged");
    tc.compare("q2 only", Pg, Pc);

    // 3. Q1 and Q2 with a basis (the subspace refresh's warm start)
    Pprev = Pg;
    key.refresh = 2;
    Pg = tc.run("q1+q2", Pprev, x, true, true, true, key, &Pc, nullptr);
    tc.compare("q1+q2", Pg, Pc);
    if (r1 > 0 && std::is_same<T, float>::value) {  // the variance PRAC pays: (k - 1) times this tail energy
        double tg = tail_energy(x, N, n, Pg, r, r1), tc_ = tail_energy(x, N, n, Pc, r, r1), full = 0;
        for (float v : x) full += (double)v * v;
        check(std::fabs(tg - tc_) <= 1e-3 * tc_ + 1e-6 * full, "q1+q2: tail energy %.6g vs the CPU's %.6g", tg, tc_);
    }

    // 4. NaN input, Q1 due, Q2 not: the whole previous basis stays, bit for bit
    std::vector<float> xbad = x;
    xbad[(size_t)(N / 2) * n + n / 3] = NAN;
    Pprev = Pg;
    PracRefreshResult rg;
    Pg = tc.run("nan q1", Pprev, xbad, true, false, true, key, &Pc, &rg);
    if (r1 > 0) {
        check(!rg.q1_ok && !rg.q1_changed, "nan q1: reported as a failed Q1 refresh");
        check(same_bits(Pg, Pprev, n, r, 0, r), "nan q1: P bitwise unchanged");
    }

    // 5. NaN input, Q1 and Q2 due: Q1 stays, Q2 is redrawn against it
    key.refresh = 3;
    Pg = tc.run("nan q1+q2", Pprev, xbad, true, true, true, key, &Pc, nullptr);
    check(same_bits(Pg, Pprev, n, r, 0, r1), "nan q1+q2: Q1 block bitwise unchanged");
    tc.compare("nan q1+q2", Pg, Pc);

    // 6. NaN input, no basis: random fallback Q1 (purpose PRAC_DRAW_Q1_FALLBACK), same span as the CPU's
    key.refresh = 0;
    Pg = tc.run("nan no basis", P0, xbad, true, true, false, key, &Pc, &rg);
    if (r1 > 0) check(!rg.q1_ok && rg.q1_changed, "nan no basis: fallback Q1 installed");
    tc.compare("nan no basis", Pg, Pc);

    // 7. Q2 fails (NaN in the previous Q1 poisons the projection): the previous P stays, NaNs included
    if (r1 > 0 && r2 > 0) {
        Pprev = Pg;
        Pprev[(size_t)(n / 2) * r + r1 / 2] = NAN;
        key.refresh = 4;
        Pg = tc.run("q2 fails", Pprev, x, false, true, true, key, &Pc, &rg);
        check(!rg.q2_ok && rg.q2_drawn && !rg.q1_changed, "q2 fails: reported as a failed Q2 refresh");
        check(same_bits(Pg, Pprev, n, r, 0, r), "q2 fails: P bitwise unchanged (NaN kept)");
    }

    // 8. a provisional basis (d.random_q1, --prac-initial-spread): the key's random Q1 and Q2 in its complement, the
    // same span as the CPU's, from an x the refresh must not read (NaN in it: no failure)
    SiteDims dr = d;
    dr.random_q1 = true;
    RefreshCase<T> tr(c, N, n, dr, bytes);
    key.refresh = 0;
    Pg = tr.run("provisional", P0, xbad, true, true, false, key, &Pc, &rg);
    check(rg.q1_ok && rg.q2_ok && rg.message.empty() && rg.q1_changed == (r1 > 0),
          "provisional: a random basis, no failure (x is not read)");
    tr.compare("provisional", Pg, Pc);

    // 9. a workspace below the fixed part is refused
    bool threw = false;
    try {
        Dev<T> dP((size_t)n * r), dx((size_t)N * n);
        prac_refresh_cuda(dP.p, dx.p, N, n, d, true, true, false, key, c.h, tc.ws.p, 16);
    } catch (const std::runtime_error& e) {
        threw = true;
        std::printf("  small workspace: %s\n", e.what());
    }
    check(threw, "a 16-byte workspace throws");

    // 10. profiled (PracCudaHandles::profile, for bench_gpu_refresh): the same bits as without; its parts the calls
    // this refresh makes, none negative, and together within the call's wall time (the parts are disjoint spans)
    PracRefreshProfile prof;
    PracCudaHandles hp = c.h;
    hp.profile = &prof;
    key.refresh = 5;
    std::vector<float> out[2];
    PracRefreshResult rp;
    for (int i = 0; i < 2; i++) {
        Dev<T> dP(P1.size()), dx(x.size());
        upload(dP, P1);
        upload(dx, x);
        rp = prac_refresh_cuda(dP.p, dx.p, N, n, d, true, true, true, key, i ? hp : c.h, tc.ws.p, tc.ws_bytes);
        out[i] = download(dP, P1.size());
    }
    check(out[0] == out[1], "profiled: P bitwise the unprofiled refresh's");
    std::vector<std::string> want;
    if (r1 > 0) want = {"gram", "checks", "syevd", "small_kernels"};
    if (r2 > 0) want.insert(want.end(), {"gaussian", "syrk", "potrf", "trsm"});
    if (r1 > 0 && r2 > 0) want.push_back("sgemm");  // Q2's projection out of Q1
    std::string missing, parts;
    bool nonneg = true;
    for (const std::string& w : want) {
        bool found = false;
        for (const auto& p : prof.parts) found = found || p.name == w;
        if (!found) missing += " " + w;
    }
    for (const auto& p : prof.parts) {
        nonneg = nonneg && p.ms >= 0 && p.calls > 0;
        parts += format(" %s %.3f (%d)", p.name.c_str(), p.ms, p.calls);
    }
    std::printf("  profile:%s; wall %.3f ms, %d host reads\n", parts.c_str(), prof.wall_ms, prof.host_reads);
    check(prof.calls == 1 && missing.empty() && nonneg && prof.host_reads > 0,
          "profiled: one call, every part it makes (missing:%s), each timed at least once, none negative",
          missing.c_str());
    check(prof.parts_ms() <= prof.wall_ms, "profiled: the parts' %.3f ms within the call's wall time %.3f ms",
          prof.parts_ms(), prof.wall_ms);
    // the host waits on the device once per decision the refresh takes, not once per check (each wait drains the
    // stream and idles the GPU until the host launches again): G finite; exact: the eigensolver; subspace: each
    // block orthonormalization, ||GV||, the Nystrom core, its R, the Ritz block and the Ritz vectors; the Q2 draw;
    // then at most three per shifted Cholesky-QR pass and one per Householder QR
    const int iters = d.subspace.warm_iters;
    int budget = d.block(n) == 0 ? 2 : 1 + 1 + iters + 1 + 1 + (d.subspace.nystrom ? 1 : 0) + 2;
    budget += (r2 > 0) + 3 * rp.q1_shifted_passes + rp.q1_householder_qr + rp.q2_householder;
    check(prof.host_reads <= budget,
          "profiled: %d host reads, within the budget of %d (%d shifted passes, %d Householder QR)", prof.host_reads,
          budget, rp.q1_shifted_passes, rp.q1_householder_qr + rp.q2_householder);

    // 11. a GramReducer (--prac-shared-subspace's average of the Gram matrix over ranks), the twins given the same
    // one: another rank's activations x2 = 3 x (a signal in other directions), averaged in. Called once per Q1
    // refresh (not for Q2 alone); Q1 then spans the average's top directions: the CPU twin's with its reducer, and
    // independently the CPU twin's without one on the two ranks' rows stacked and scaled by 1/sqrt(2), whose Gram
    // matrix is that average (x2's signal dominates: this rank's own Q1 is more than 10x the tolerance away)
    if (r1 > 0) {
        std::vector<float> x2 = structured_x(N, n, r1, noise), G2((size_t)n * n);
        for (float& v : x2) v *= 3.0f;
        x2 = quantize<T>(x2);
        gemm_cpu(true, false, n, n, N, 1.0f, x2.data(), n, x2.data(), n, 0.0f, G2.data(), n);  // x2ᵀ x2, symmetric
        int cpu_calls = 0, gpu_calls = 0;
        GramReducer on_host = [&](float* G, size_t nn) {
            cpu_calls++;
            for (size_t i = 0; i < nn; i++) G[i] = 0.5f * (G[i] + G2[i]);
        };
        GramReducer on_device = [&](float* G, size_t nn) {  // as the communicator does: on the refresh's stream
            gpu_calls++;
            std::vector<float> h(nn);
            cudaCheck(cudaStreamSynchronize(c.h.stream));
            cudaCheck(cudaMemcpy(h.data(), G, nn * sizeof(float), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < nn; i++) h[i] = 0.5f * (h[i] + G2[i]);
            cudaCheck(cudaMemcpy(G, h.data(), nn * sizeof(float), cudaMemcpyHostToDevice));
        };
        std::vector<float> Pcr = P1;
        key.refresh = 6;
        prac_refresh_cpu(Pcr.data(), x.data(), N, n, d, true, true, true, key, &on_host);
        Dev<T> dP(P1.size()), dx(x.size());
        upload(dP, P1);
        upload(dx, x);
        PracRefreshResult rr =
            prac_refresh_cuda(dP.p, dx.p, N, n, d, true, true, true, key, c.h, tc.ws.p, tc.ws_bytes, &on_device);
        std::vector<float> Pgr = download(dP, P1.size());
        check(rr.q1_ok && cpu_calls == 1 && gpu_calls == 1, "reducer: called once by each twin (cpu %d, gpu %d)",
              cpu_calls, gpu_calls);
        tc.compare("reducer", Pgr, Pcr);
        std::vector<float> stacked((size_t)2 * N * n), Pst = P1;
        const float s2 = 1.0f / std::sqrt(2.0f);
        for (size_t i = 0; i < x.size(); i++) {
            stacked[i] = s2 * x[i];
            stacked[x.size() + i] = s2 * x2[i];
        }
        prac_refresh_cpu(Pst.data(), stacked.data(), 2 * N, n, d, true, true, true, key);
        std::vector<float> Palone = P1;  // this rank's refresh without the reducer
        prac_refresh_cpu(Palone.data(), x.data(), N, n, d, true, true, true, key);
        double e = max_abs_diff(projector(Pgr, n, r, 0, r1, 1.0f), projector(Pst, n, r, 0, r1, 1.0f));
        double off = max_abs_diff(projector(Pgr, n, r, 0, r1, 1.0f), projector(Palone, n, r, 0, r1, 1.0f));
        check(e <= tc.tol_proj && off > 10 * tc.tol_proj,
              "reducer: Q1 Q1^T vs the stacked ranks' refresh %.3g (tol %.0e), vs this rank's alone %.3g (> %.0e)", e,
              tc.tol_proj, off, 10 * tc.tol_proj);
        upload(dP, Pgr);
        gpu_calls = 0;
        prac_refresh_cuda(dP.p, dx.p, N, n, d, false, true, true, key, c.h, tc.ws.p, tc.ws_bytes, &on_device);
        check(gpu_calls == 0, "reducer: not called for Q2 alone (%d calls)", gpu_calls);
    }
}

// The Q2 draw's Householder fallback (Xgeqrf + Sorgqr; test/q2_fallback_case.h): on a key whose projected draw has
// κ in [8000, 16000) both twins' CholQR2 fails and Householder QR takes over, on a key with κ < 100 neither's does;
// Q1 keeps its bits and Q2 matches the CPU's, to the usual tolerances widened to 32 u·κ, the QR's own bound (test
// PracRefresh.Q2DrawFallsBackToHouseholderOnANearSingularDraw: the CPU twin measured 1.3 u·κ).
template <typename T>
static void test_q2_fallback(Ctx& c) {
    namespace q = q2_fallback;
    SiteDims d;
    d.compressed = true;
    d.r1 = q::r1;
    d.r2 = q::r2;
    d.k = 1.0f;  // (n - r1) / r2
    const int N = 16;
    const std::vector<float> x((size_t)N * q::n, 0.0f);  // not read: only Q2 is drawn
    const size_t bytes = prac_refresh_workspace_bytes(c.h.cusolver, q::n, d);
    for (bool ill : {false, true}) {
        bool found = false;
        const PracDrawKey key = ill ? q::find_key(8000, 16000, &found) : q::find_key(1, 100, &found);
        check(found, "q2 fallback: a key with the wanted condition number");
        if (!found) return;
        const double kappa = q::kappa(key);
        std::printf("q2 fallback %s: n=%d r1=%d r2=%d, draw %llu, kappa %.4g\n", Host<T>::name(), q::n, q::r1, q::r2,
                    (unsigned long long)key.refresh, kappa);
        RefreshCase<T> tc(c, N, q::n, d, bytes);
        tc.tol_proj = std::max(tc.tol_proj, 32 * 5.96e-8 * kappa);
        tc.tol_orth = std::max(tc.tol_orth, 32 * 5.96e-8 * kappa);
        const std::vector<float> P0 = q::basis();
        std::vector<float> Pc;
        PracRefreshResult rg;
        std::vector<float> Pg = tc.run(ill ? "q2 householder" : "q2 cholqr2", P0, x, false, true, true, key, &Pc, &rg);
        check(rg.q2_ok && rg.q2_householder == ill, "q2 fallback: the device took %s", ill ? "Householder" : "CholQR2");
        check(same_bits(Pg, P0, q::n, q::r, 0, q::r1), "q2 fallback: Q1 block bitwise unchanged");
        tc.compare(ill ? "q2 householder" : "q2 cholqr2", Pg, Pc);
    }
}

int main() {
    if (int rc = gpu_unavailable_exit_code("test_prac_cuda"); rc >= 0) return rc;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    Ctx c;
    cudaCheck(cudaStreamCreate(&c.h.stream));
    cublasCheck(cublasCreate(&c.h.cublas));
    cusolverCheck(cusolverDnCreate(&c.h.cusolver));

    // widths that are not multiples of 64 (88, 200, 1376 ~ 5461 scaled down), ranks multiples of 8 and not (the
    // absolute ranks fine-tuning uses: 2 + 2, 3, 5); the last column: padding of --hidden-align's row stride
    const int shapes[][5] = {{64, 88, 16, 40, 0},      {257, 200, 56, 96, 0}, {512, 1376, 408, 200, 0},
                             {1024, 768, 448, 3072, 0}, {64, 88, 4, 40, 0},    {257, 200, 3, 96, 0},
                             {64, 88, 5, 40, 40},      {257, 1376, 56, 96, 32}};
    for (auto& s : shapes) {
        test_gemm_ops<float, float>(c, s[0], s[1], s[2], s[3], s[4]);
        test_gemm_ops<bf16, bf16>(c, s[0], s[1], s[2], s[3], s[4]);
        test_gemm_ops<bf16, float>(c, s[0], s[1], s[2], s[3], s[4]);
    }
    test_dbias_like_matmul(c, 4096, 64, 32, 96);

    for (int pass = 0; pass < 2; pass++) {
        auto run = [&](int N, int r, uint64_t row0, PracDrawKey key) {
            if (pass == 0)
                test_fp8<float>(c, N, r, row0, key);
            else
                test_fp8<bf16>(c, N, r, row0, key);
        };
        run(37, 40, 0, {42, 1, 3, 0, PRAC_DRAW_FP8_ROUNDING});
        run(300, 13, 5, {7, 4, 0, 11, PRAC_DRAW_FP8_ROUNDING});
        run(24, 1840, 8192, {0x123456789abcdefull, 5, 0xFFFFF, 0xFFFFFFFFull, PRAC_DRAW_FP8_ROUNDING});
        if (pass == 0)
            test_fp8_all_codes<float>(c);
        else
            test_fp8_all_codes<bf16>(c);
    }

    test_gaussian(c, 7, 5, 5, PracDrawKey{42, 0, 0, 0});                        // 35 values: a partial block
    test_gaussian(c, 200, 56, 64, PracDrawKey{42, 3, 5, 1});                    // ld > cols
    test_gaussian(c, 1376, 408, 408, PracDrawKey{0x123456789abcdefull, 255, 0xFFFFF, 7, PRAC_DRAW_Q1_FALLBACK});
    test_gaussian(c, 5461, 1600, 1600, PracDrawKey{7, 1, 2, 3});                // the LLaMA down-proj width

    for (int pass = 0; pass < 2; pass++) {
        auto run = [&](int N, int n, int r1, int r2, float km) {
            if (pass == 0)
                test_refresh<float>(c, N, n, r1, r2, km);
            else
                test_refresh<bf16>(c, N, n, r1, r2, km);
        };
        run(512, 88, 16, 16, 1.0f);
        run(512, 88, 56, 24, 1.0f);    // r1 > n/2: Q2's Gaussian projected twice (prac_q2_projection_passes)
        run(1024, 200, 56, 56, 1.0f);
        run(1024, 200, 0, 48, 1.0f);   // rac: r1 = 0
        run(1024, 200, 48, 0, 1.0f);   // pac: r2 = 0
        run(2048, 1376, 408, 408, 0.5f);
        // the subspace refresh (the default): cold, warm, failures; without the Nystrom step; on a rank-deficient x
        auto sub = [&](int N, int n, int r1, int r2, bool nystrom, float noise,
                       int shifted = PracSubspaceParams().shifted_passes) {
            if (pass == 0)
                test_refresh<float>(c, N, n, r1, r2, 1.0f, PracRefresh::SUBSPACE, nystrom, noise, shifted);
            else
                test_refresh<bf16>(c, N, n, r1, r2, 1.0f, PracRefresh::SUBSPACE, nystrom, noise, shifted);
        };
        sub(512, 88, 16, 16, true, 0.05f);
        sub(1024, 200, 56, 56, true, 0.05f);
        sub(1024, 200, 56, 56, false, 0.05f);
        sub(512, 88, 16, 16, true, 0.0f);     // shifted Cholesky-QR (the result flags count it on both twins)
        sub(512, 88, 16, 16, true, 0.0f, 0);  // the device's Householder QR of the block instead
        sub(1024, 200, 56, 56, true, 1.0f);  // noise as strong as the signal: no clear gap at r1, so Q1 depends on
                                             // every step of the iteration (any step unlike the CPU's shows)
        if (pass == 0)
            test_q2_fallback<float>(c);
        else
            test_q2_fallback<bf16>(c);
    }

    cusolverCheck(cusolverDnDestroy(c.h.cusolver));
    cublasCheck(cublasDestroy(c.h.cublas));
    cudaCheck(cudaStreamDestroy(c.h.stream));
    return gpu_test_summary("test_prac_cuda");
}
