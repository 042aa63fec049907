// GPU test of the elementwise CUDA kernel family (kernels/{encoder,layernorm,rmsnorm,residual,gelu,swiglu,rope,
// adamw}.cuh, built into prac_cuda): every launcher against its CPU twin (kernels/*.h), run in float
// on the same inputs rounded to the storage type first, for both storage types (fp32 and bf16) in every build.
// (Both GeLUs have their own element-wise tolerance: see test_gelu.)
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no CUDA device (ctest: "Not Run (Skipped)"); with
// REQUIRE_GPU=1 in the environment a missing device is a failure (exit 1) instead of a skip.
//
// Tolerances: rel = max |gpu - cpu| / max |cpu| over the whole output.
//   fp32 storage                  1e-5  (same fp32 math; only summation order / FMA contraction / tanhf and
//                                        expf vs libm differ, each ~1e-7)
//   bf16 storage                  1e-2  (the GPU rounds each output to bf16, 2^-9 relative; accumulated outputs
//                                        (+=) are rounded once after the fp32 add; the CPU keeps float)
//   norm statistics (mean, rstd)  1e-5  for both (fp32 on both sides, from the same stored inputs)
//   AdamW master, m, v            1e-6  (same fp32 operation order with _rn intrinsics: expected bitwise; the
//                                        count of bitwise-equal elements is printed)
//   AdamW bf16 params             each one of the two bf16 neighbours of the fp32 master (<= 1 ulp), and bit
//                                 for bit the host twin stochastic_round(master, seed, i)
//   stochastic rounding bias      256 seeds: per element |mean - x| <= 0.25 ulp (8 sigma of the binomial),
//                                 averaged over 4096 elements |mean error| <= 0.005 ulp
//   sum of squares                1e-10 relative (double on both sides, different order)
// Determinism: every gradient op (encoder, layernorm and rmsnorm backward, sum of squares) is run twice from the
// same state and the outputs must be bitwise equal.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "common/cuda_check.h"
#include "test/gpu/gpu_test.h"
#include "common/cuda_common.cuh"
#include "kernels/adamw.cuh"
#include "kernels/encoder.cuh"
#include "kernels/gelu.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/residual.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rope.cuh"
#include "kernels/swiglu.cuh"

using bf16 = __nv_bfloat16;

// ---- reporting ----

template <typename T>
static const char* tname() {
    return std::is_same<T, float>::value ? "fp32" : "bf16";
}
template <typename T>
static double tol() {
    return std::is_same<T, float>::value ? 1e-5 : 1e-2;
}

// ---- device buffers: gpu_test.h's Dev with one spare element past the end, the n + offset + 1 elements this test
// has always allocated; an element offset gives pointers that are not 16-byte aligned ----
template <typename T>
struct DevPad : Dev<T> {
    explicit DevPad(size_t n, size_t offset = 0) : Dev<T>(n, offset, 1) {}
};
template <typename T>
static void fill_nan(Dev<T>& d) {  // 0xFF bytes: NaN in fp32 and bf16, so an element left unwritten fails
    cudaCheck(cudaMemset(d.p, 0xFF, d.count * sizeof(T)));
}

static std::mt19937_64 g_rng(20241121);
static std::vector<float> randn(size_t n, float scale = 1.0f, float shift = 0.0f) {
    return normal_values(g_rng, n, scale, shift);
}

static size_t bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
    size_t k = 0;
    for (size_t i = 0; i < a.size(); i++) k += std::memcmp(&a[i], &b[i], 4) == 0;
    return k;
}

static cudaStream_t g_stream = nullptr;
static void sync() { cudaCheck(cudaStreamSynchronize(g_stream)); }

// device scratch of at least `bytes` (256-byte aligned by cudaMalloc)
struct Scratch {
    void* p = nullptr;
    size_t bytes = 0;
    explicit Scratch(size_t b) : bytes(b) { cudaCheck(cudaMalloc(&p, b ? b : 16)); }
    ~Scratch() { cudaFree(p); }
};

// ---------------------------------------------------------------------------------------------------------------
// encoder
// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void test_encoder(int B, int Tlen, int C, int V, bool with_wpe, bool skewed) {
    const double tl = tol<T>();
    std::printf("encoder %s B=%d T=%d C=%d V=%d wpe=%d skewed=%d\n", tname<T>(), B, Tlen, C, V, (int)with_wpe,
                (int)skewed);
    const size_t BT = (size_t)B * Tlen;
    std::vector<int32_t> tokens(BT);
    std::uniform_int_distribution<int> ud(0, V - 1);
    for (auto& t : tokens) t = (skewed && (g_rng() & 1)) ? 0 : ud(g_rng);  // skewed: half the rows hit token 0
    std::vector<float> wte = quantize<T>(randn((size_t)V * C)), wpe = quantize<T>(randn((size_t)Tlen * C));
    DevPad<int32_t> dtok(BT);
    cudaCheck(cudaMemcpy(dtok.p, tokens.data(), BT * 4, cudaMemcpyHostToDevice));
    DevPad<T> dwte_w(wte.size()), dwpe_w(wpe.size()), dout_f(BT * C);
    upload(dwte_w, wte);
    upload(dwpe_w, wpe);

    // forward
    std::vector<float> out_ref(BT * C);
    encoder_forward_cpu(out_ref.data(), tokens.data(), wte.data(), with_wpe ? wpe.data() : (const float*)nullptr, B,
                        Tlen, C);
    fill_nan(dout_f);
    encoder_forward_cuda<T>(dout_f.p, dtok.p, dwte_w.p, with_wpe ? dwpe_w.p : (const T*)nullptr, B, Tlen, C,
                            g_stream);
    sync();
    double e = rel_err(download(dout_f), out_ref);
    check(e <= tl, "encoder_forward: rel err %.3g (tol %.0e)", e, tl);

    // backward: accumulates into random dwte, dwpe
    std::vector<float> dout = quantize<T>(randn(BT * C));
    std::vector<float> dwte0 = quantize<T>(randn((size_t)V * C)), dwpe0 = quantize<T>(randn((size_t)Tlen * C));
    std::vector<float> dwte_ref = dwte0, dwpe_ref = dwpe0;
    encoder_backward_cpu(dwte_ref.data(), with_wpe ? dwpe_ref.data() : (float*)nullptr, dout.data(), tokens.data(), B,
                         Tlen, C);
    DevPad<T> ddout(dout.size()), ddwte(dwte0.size()), ddwpe(dwpe0.size());
    upload(ddout, dout);
    Scratch scratch(encoder_backward_scratch_bytes(B, Tlen));
    std::vector<uint8_t> bytes_wte[2], bytes_wpe[2];
    for (int run = 0; run < 2; run++) {
        upload(ddwte, dwte0);
        upload(ddwpe, dwpe0);
        encoder_backward_cuda<T>(ddwte.p, with_wpe ? ddwpe.p : (T*)nullptr, ddout.p, dtok.p, B, Tlen, C, scratch.p,
                                 scratch.bytes, g_stream);
        sync();
        bytes_wte[run] = download_bytes(ddwte);
        bytes_wpe[run] = download_bytes(ddwpe);
    }
    std::vector<float> got_wte = download(ddwte), got_wpe = download(ddwpe);
    e = rel_err(got_wte, dwte_ref);
    check(e <= tl, "encoder_backward dwte (+=): rel err %.3g (tol %.0e)", e, tl);
    e = rel_err(got_wpe, dwpe_ref);
    check(e <= tl, "encoder_backward dwpe (+=%s): rel err %.3g (tol %.0e)", with_wpe ? "" : ", null: untouched", e,
          tl);
    if (std::is_same<T, float>::value && with_wpe) {
        size_t eq = bitwise_equal(got_wpe, dwpe_ref);
        check(eq == got_wpe.size(), "encoder_backward dwpe fp32 bitwise equal to the CPU (same order): %zu of %zu", eq,
              got_wpe.size());
    }
    check(bytes_wte[0] == bytes_wte[1] && bytes_wpe[0] == bytes_wpe[1],
          "encoder_backward deterministic: two runs bitwise equal");
}

// ---------------------------------------------------------------------------------------------------------------
// layernorm / rmsnorm
// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void test_layernorm(int N, int C) {
    const double tl = tol<T>();
    const float eps = 1e-5f;
    std::printf("layernorm %s N=%d C=%d\n", tname<T>(), N, C);
    std::vector<float> x = quantize<T>(randn((size_t)N * C, 1.5f, 0.5f));
    std::vector<float> w = quantize<T>(randn(C, 0.2f, 1.0f)), b = quantize<T>(randn(C, 0.2f));
    DevPad<T> dx(x.size()), dw(C), db(C), dout(x.size());
    DevPad<float> dmean(N), drstd(N);
    upload(dx, x);
    upload(dw, w);
    upload(db, b);

    std::vector<float> out_ref(x.size()), mean_ref(N), rstd_ref(N);
    layernorm_forward_cpu(out_ref.data(), mean_ref.data(), rstd_ref.data(), x.data(), w.data(), b.data(), N, C, eps);
    fill_nan(dout);
    layernorm_forward_cuda<T>(dout.p, dmean.p, drstd.p, dx.p, dw.p, db.p, N, C, eps, g_stream);
    sync();
    double e = rel_err(download(dout), out_ref);
    check(e <= tl, "layernorm_forward out: rel err %.3g (tol %.0e)", e, tl);
    double em = rel_err(download(dmean), mean_ref), er = rel_err(download(drstd), rstd_ref);
    check(em <= 1e-5 && er <= 1e-5, "layernorm_forward mean, rstd: rel err %.3g, %.3g (tol 1e-05)", em, er);

    // backward from the CPU's mean/rstd (the same values on both sides), accumulating into random gradients
    std::vector<float> dy = quantize<T>(randn(x.size()));
    std::vector<float> dinp0 = quantize<T>(randn(x.size())), dw0 = quantize<T>(randn(C)), db0 = quantize<T>(randn(C));
    std::vector<float> dinp_ref = dinp0, dw_ref = dw0, db_ref = db0;
    layernorm_backward_cpu(dinp_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(),
                           mean_ref.data(), rstd_ref.data(), N, C);
    DevPad<T> ddy(dy.size()), ddinp(x.size()), ddw(C), ddb(C);
    upload(ddy, dy);
    DevPad<float> cmean(N), crstd(N);
    upload(cmean, mean_ref);
    upload(crstd, rstd_ref);
    Scratch scratch(layernorm_backward_scratch_bytes(N, C));
    std::vector<uint8_t> bi[2], bw[2], bb[2];
    for (int run = 0; run < 2; run++) {
        upload(ddinp, dinp0);
        upload(ddw, dw0);
        upload(ddb, db0);
        layernorm_backward_cuda<T>(ddinp.p, ddw.p, ddb.p, ddy.p, dx.p, dw.p, cmean.p, crstd.p, N, C, scratch.p,
                                   scratch.bytes, g_stream);
        sync();
        bi[run] = download_bytes(ddinp);
        bw[run] = download_bytes(ddw);
        bb[run] = download_bytes(ddb);
    }
    double ei = rel_err(download(ddinp), dinp_ref), ew = rel_err(download(ddw), dw_ref),
           eb = rel_err(download(ddb), db_ref);
    check(ei <= tl, "layernorm_backward dinp (+=): rel err %.3g (tol %.0e)", ei, tl);
    check(ew <= tl && eb <= tl, "layernorm_backward dweight, dbias (+=): rel err %.3g, %.3g (tol %.0e)", ew, eb, tl);
    check(bi[0] == bi[1] && bw[0] == bw[1] && bb[0] == bb[1],
          "layernorm_backward deterministic: two runs bitwise equal");
}

template <typename T>
static void test_rmsnorm(int N, int C) {
    const double tl = tol<T>();
    const float eps = 1e-5f;
    std::printf("rmsnorm %s N=%d C=%d\n", tname<T>(), N, C);
    std::vector<float> x = quantize<T>(randn((size_t)N * C, 1.5f, 0.3f)), w = quantize<T>(randn(C, 0.2f, 1.0f));
    DevPad<T> dx(x.size()), dw(C), dout(x.size());
    DevPad<float> drstd(N);
    upload(dx, x);
    upload(dw, w);

    std::vector<float> out_ref(x.size()), rstd_ref(N);
    rmsnorm_forward_cpu(out_ref.data(), rstd_ref.data(), x.data(), w.data(), N, C, eps);
    fill_nan(dout);
    rmsnorm_forward_cuda<T>(dout.p, drstd.p, dx.p, dw.p, N, C, eps, g_stream);
    sync();
    double e = rel_err(download(dout), out_ref);
    check(e <= tl, "rmsnorm_forward out: rel err %.3g (tol %.0e)", e, tl);
    double er = rel_err(download(drstd), rstd_ref);
    check(er <= 1e-5, "rmsnorm_forward rstd: rel err %.3g (tol 1e-05)", er);

    std::vector<float> dy = quantize<T>(randn(x.size()));
    std::vector<float> dinp0 = quantize<T>(randn(x.size())), dw0 = quantize<T>(randn(C));
    std::vector<float> dinp_ref = dinp0, dw_ref = dw0;
    rmsnorm_backward_cpu(dinp_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(), rstd_ref.data(), N, C);
    DevPad<T> ddy(dy.size()), ddinp(x.size()), ddw(C);
    upload(ddy, dy);
    DevPad<float> crstd(N);
    upload(crstd, rstd_ref);
    Scratch scratch(rmsnorm_backward_scratch_bytes(N, C));
    std::vector<uint8_t> bi[2], bw[2];
    for (int run = 0; run < 2; run++) {
        upload(ddinp, dinp0);
        upload(ddw, dw0);
        rmsnorm_backward_cuda<T>(ddinp.p, ddw.p, ddy.p, dx.p, dw.p, crstd.p, N, C, scratch.p, scratch.bytes,
                                 g_stream);
        sync();
        bi[run] = download_bytes(ddinp);
        bw[run] = download_bytes(ddw);
    }
    double ei = rel_err(download(ddinp), dinp_ref), ew = rel_err(download(ddw), dw_ref);
    check(ei <= tl, "rmsnorm_backward dinp (+=): rel err %.3g (tol %.0e)", ei, tl);
    check(ew <= tl, "rmsnorm_backward dweight (+=): rel err %.3g (tol %.0e)", ew, tl);
    check(bi[0] == bi[1] && bw[0] == bw[1], "rmsnorm_backward deterministic: two runs bitwise equal");
}

// ---------------------------------------------------------------------------------------------------------------
// residual (offset = 1 element gives unaligned pointers: the scalar path)
// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void test_flat(size_t n, size_t offset) {
    const double tl = tol<T>();
    std::printf("residual %s n=%zu offset=%zu\n", tname<T>(), n, offset);
    std::vector<float> a = quantize<T>(randn(n, 2.0f)), b = quantize<T>(randn(n, 2.0f));
    DevPad<T> da(n, offset), db(n, offset), dout(n, offset);
    upload(da, a);
    upload(db, b);

    std::vector<float> ref(n);
    residual_forward_cpu(ref.data(), a.data(), b.data(), n);
    fill_nan(dout);
    residual_forward_cuda<T>(dout.p, da.p, db.p, n, g_stream);
    sync();
    double e = rel_err(download(dout), ref);
    check(e <= tl, "residual_forward: rel err %.3g (tol %.0e)", e, tl);
    residual_forward_cuda<T>(da.p, da.p, db.p, n, g_stream);  // in place: out == a
    sync();
    e = rel_err(download(da), ref);
    check(e <= tl, "residual_forward in place (out == a): rel err %.3g (tol %.0e)", e, tl);
}

// ---------------------------------------------------------------------------------------------------------------
// both GeLUs (the tanh approximation GPT-2 uses, the exact erf one RoBERTa uses) against their twins, element by
// element: |gpu - cpu| <= rtol |cpu| + atol s with s = 1 + |x| (forward) or |dout| (1 + |x|) (backward). rtol: the
// output's one rounding to T (bf16: twice its unit roundoff 2^-8, which the emulation reaches to within 3%; fp32: a
// few ulp); atol: the absolute error of tanhf / erff / expf (CUDA 2 ulp, glibc 1) where 1 + tanh or 1 + erf
// cancels (x << 0) and where the derivative crosses zero (x ~ -0.75). The other GeLU's twin on the same inputs must
// miss that tolerance, so the check tells the two apart, in bf16 too (a whole-tensor relative error could not: it
// passed the tanh kernel against the erf twin, and a kernel returning 0 below x = -2).
// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void test_gelu(bool erf, size_t n, size_t offset) {
    const char* name = erf ? "gelu_erf" : "gelu";
    const double rtol = std::is_same<T, float>::value ? 1e-6 : 1.0 / 128, atol = 5e-7;
    std::printf("%s %s n=%zu offset=%zu\n", name, tname<T>(), n, offset);
    auto forward_cpu = erf ? gelu_erf_forward_cpu<float> : gelu_forward_cpu<float>;
    auto backward_cpu = erf ? gelu_erf_backward_cpu<float> : gelu_backward_cpu<float>;
    auto other_forward_cpu = erf ? gelu_forward_cpu<float> : gelu_erf_forward_cpu<float>;
    auto other_backward_cpu = erf ? gelu_backward_cpu<float> : gelu_erf_backward_cpu<float>;
    auto forward_cuda = erf ? gelu_erf_forward_cuda<T> : gelu_forward_cuda<T>;
    auto backward_cuda = erf ? gelu_erf_backward_cuda<T> : gelu_backward_cuda<T>;
    std::vector<float> x = quantize<T>(randn(n, 2.0f)), dy = quantize<T>(randn(n, 2.0f));
    DevPad<T> dx(n, offset), ddy(n, offset), dout(n, offset);
    upload(dx, x);
    upload(ddy, dy);
    // the worst element's |gpu - ref| / tolerance (<= 1 passes; NaN fails). An element's tolerance is 0 where dy is
    // 0 (randn draws an exact 0 now and then): its gradient must then be exactly 0 too (0/0 was a NaN)
    auto worst = [&](const std::vector<float>& got, const std::vector<float>& ref, bool backward) {
        double w = 0;
        for (size_t i = 0; i < n; i++) {
            const double s = (1.0 + std::fabs(x[i])) * (backward ? std::fabs(dy[i]) : 1.0);
            const double diff = std::fabs((double)got[i] - ref[i]);
            w = worst_of(w, diff == 0 ? 0.0 : diff / (rtol * std::fabs(ref[i]) + atol * s));
        }
        return w;
    };
    std::vector<float> ref(n), other(n);
    forward_cpu(ref.data(), x.data(), n);
    fill_nan(dout);
    forward_cuda(dout.p, dx.p, n, g_stream);
    sync();
    double w = worst(download(dout), ref, false);
    check(w <= 1, "%s_forward: worst |err| / tol %.3g", name, w);
    forward_cuda(dx.p, dx.p, n, g_stream);  // in place: out == inp
    sync();
    w = worst(download(dx), ref, false);
    check(w <= 1, "%s_forward in place (out == inp): worst |err| / tol %.3g", name, w);
    upload(dx, x);
    if (n >= 1000) {
        other_forward_cpu(other.data(), x.data(), n);
        w = worst(other, ref, false);
        check(w > 1, "%s_forward's tolerance rejects the other GeLU (worst %.3g)", name, w);
    }

    // backward: overwrite (dinp starts as NaN), then in place (dinp == dout)
    backward_cpu(ref.data(), x.data(), dy.data(), n);
    fill_nan(dout);
    backward_cuda(dout.p, dx.p, ddy.p, n, g_stream);
    sync();
    w = worst(download(dout), ref, true);
    check(w <= 1, "%s_backward (overwrites): worst |err| / tol %.3g", name, w);
    backward_cuda(ddy.p, dx.p, ddy.p, n, g_stream);
    sync();
    w = worst(download(ddy), ref, true);
    check(w <= 1, "%s_backward in place (dinp == dout): worst |err| / tol %.3g", name, w);
    if (n >= 1000) {
        other_backward_cpu(other.data(), x.data(), dy.data(), n);
        w = worst(other, ref, true);
        check(w > 1, "%s_backward's tolerance rejects the other GeLU's derivative (worst %.3g)", name, w);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// swiglu
// ---------------------------------------------------------------------------------------------------------------
// gate, up, dout (n = N * F each) separate buffers, as the model holds them; offset = 1 element: unaligned
// pointers (the scalar path). The model runs the backward in place (dgate over gate, dup over up): checked to give
// the out-of-place bits, every element.
template <typename T>
static void test_swiglu(int N, int F, size_t offset) {
    const double tl = tol<T>();
    const size_t n = (size_t)N * F;
    std::printf("swiglu %s N=%d F=%d offset=%zu\n", tname<T>(), N, F, offset);
    std::vector<float> g = quantize<T>(randn(n, 2.0f)), u = quantize<T>(randn(n, 2.0f)), dy = quantize<T>(randn(n));
    DevPad<T> dg(n, offset), du(n, offset), ddy(n, offset), dout(n, offset), dgg(n, offset), dgu(n, offset);
    upload(dg, g);
    upload(du, u);
    upload(ddy, dy);
    std::vector<float> out_ref(n), gg_ref(n), gu_ref(n);
    swiglu_forward_cpu(out_ref.data(), g.data(), u.data(), n);
    swiglu_backward_cpu(gg_ref.data(), gu_ref.data(), g.data(), u.data(), dy.data(), n);
    fill_nan(dout);
    fill_nan(dgg);
    fill_nan(dgu);
    swiglu_forward_cuda<T>(dout.p, dg.p, du.p, n, g_stream);
    swiglu_backward_cuda<T>(dgg.p, dgu.p, dg.p, du.p, ddy.p, n, g_stream);
    sync();
    double e = rel_err(download(dout), out_ref);
    check(e <= tl, "swiglu_forward: rel err %.3g (tol %.0e)", e, tl);
    std::vector<float> gg = download(dgg), gu = download(dgu);
    e = worst_of(rel_err(gg, gg_ref), rel_err(gu, gu_ref));
    check(e <= tl, "swiglu_backward (overwrites dgate and dup): rel err %.3g (tol %.0e)", e, tl);
    swiglu_backward_cuda<T>(dg.p, du.p, dg.p, du.p, ddy.p, n, g_stream);  // in place
    sync();
    size_t same = bitwise_equal(download(dg), gg) + bitwise_equal(download(du), gu);
    check(same == 2 * n, "swiglu_backward in place (dgate == gate, dup == up): %zu of %zu elements differ from "
          "out of place", 2 * n - same, 2 * n);
}

// ---------------------------------------------------------------------------------------------------------------
// rope
// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void test_rope(int B, int Tlen, int C, int NH) {
    const double tl = tol<T>();
    const int HS = C / NH;
    std::printf("rope %s B=%d T=%d C=%d NH=%d (HS=%d)\n", tname<T>(), B, Tlen, C, NH, HS);
    std::vector<float> freqs((size_t)Tlen * HS);  // (T, HS/2, 2)
    rope_table_cpu(freqs.data(), Tlen, HS, 10000.0f);
    std::vector<float> qkv = quantize<T>(randn((size_t)B * Tlen * 3 * C));
    DevPad<float> dfreqs(freqs.size());
    cudaCheck(cudaMemcpy(dfreqs.p, freqs.data(), freqs.size() * 4, cudaMemcpyHostToDevice));
    DevPad<T> dqkv(qkv.size());

    for (int backward = 0; backward < 2; backward++) {
        std::vector<float> ref = qkv;
        rope_cpu(ref.data(), freqs.data(), B, Tlen, C, NH, backward != 0);
        upload(dqkv, qkv);
        rope_cuda<T>(dqkv.p, dfreqs.p, B, Tlen, C, NH, backward != 0, g_stream);
        sync();
        std::vector<float> got = download(dqkv);
        double e = rel_err(got, ref);
        check(e <= tl, "rope %s: rel err %.3g (tol %.0e)", backward ? "backward" : "forward", e, tl);
        bool v_same = true;  // the v third of every row is untouched, bit for bit
        for (size_t n = 0; n < (size_t)B * Tlen && v_same; n++)
            v_same = std::memcmp(&got[n * 3 * C + 2 * C], &qkv[n * 3 * C + 2 * C], (size_t)C * 4) == 0;
        check(v_same, "rope %s leaves v untouched", backward ? "backward" : "forward");
    }
    // forward then backward is the identity up to rounding (twice for bf16)
    upload(dqkv, qkv);
    rope_cuda<T>(dqkv.p, dfreqs.p, B, Tlen, C, NH, false, g_stream);
    rope_cuda<T>(dqkv.p, dfreqs.p, B, Tlen, C, NH, true, g_stream);
    sync();
    double e = rel_err(download(dqkv), qkv);
    check(e <= 2 * tl, "rope backward(forward(x)) = x: rel err %.3g (tol %.0e)", e, 2 * tl);
}

// ---------------------------------------------------------------------------------------------------------------
// AdamW
// ---------------------------------------------------------------------------------------------------------------
static uint16_t bf16_bits(bf16 v) {
    __nv_bfloat16_raw r = v;
    return r.x;
}
static uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// bf16 params + fp32 master: several steps against adamw_update_cpu on the fp32 master
static void test_adamw_master_bf16(size_t n, int steps) {
    std::printf("adamw bf16 params + fp32 master, n=%zu, %d steps\n", n, steps);
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    std::vector<float> master = randn(n, 0.05f), m(n, 0.0f), v(n, 0.0f);
    DevPad<bf16> dp(n), dg(n);
    DevPad<float> dmaster(n), dm(n), dv(n);
    upload(dp, master);  // params = master rounded to nearest
    upload(dmaster, master);
    upload(dm, m);
    upload(dv, v);
    uint64_t seed = 0;
    for (int t = 1; t <= steps; t++) {
        std::vector<float> g = quantize<bf16>(randn(n, 0.01f));
        upload(dg, g);
        seed = 0xC0FFEEull * 1000 + t;
        adamw_update_cuda<bf16>(dp.p, dmaster.p, dg.p, dm.p, dv.p, n, lr, b1, b2, eps, wd, t, gs, seed, g_stream);
        adamw_update_cpu(master.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t, gs);
    }
    sync();
    std::vector<float> gm = download(dmaster), gmm = download(dm), gv = download(dv);
    double e0 = rel_err(gm, master), e1 = rel_err(gmm, m), e2 = rel_err(gv, v);
    check(e0 <= 1e-6 && e1 <= 1e-6 && e2 <= 1e-6,
          "adamw master, m, v vs CPU: rel err %.3g, %.3g, %.3g (tol 1e-06); bitwise equal %zu, %zu, %zu of %zu", e0,
          e1, e2, bitwise_equal(gm, master), bitwise_equal(gmm, m), bitwise_equal(gv, v), n);
    std::vector<bf16> p(n);
    cudaCheck(cudaMemcpy(p.data(), dp.p, n * 2, cudaMemcpyDeviceToHost));
    size_t neighbour = 0, exact_sr = 0, up = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(gm[i]);
        uint16_t lo = (uint16_t)(u >> 16), pb = bf16_bits(p[i]);
        bool ok = pb == lo || ((u & 0xFFFFu) && pb == (uint16_t)(lo + 1));
        neighbour += ok;
        up += pb != lo;
        exact_sr += pb == bf16_bits(stochastic_round<bf16>(gm[i], seed, i));
    }
    check(neighbour == n, "adamw bf16 params within 1 ulp of master (a bf16 neighbour): %zu of %zu (%zu rounded up)",
          neighbour, n, up);
    check(exact_sr == n, "adamw bf16 params == host stochastic_round(master, seed, i): %zu of %zu", exact_sr, n);
}

// fp32 params without master weights (the fp32 build), and fp32 params with a master (params = master)
static void test_adamw_fp32(size_t n, int steps) {
    std::printf("adamw fp32 params, n=%zu, %d steps\n", n, steps);
    // weight decay and a gradient scale in play: decay moves each parameter by lr·wd·p = 3e-5 p per step (30x the
    // tolerance), and eps of the gradients' size lets the scale show through m / (sqrt(v) + eps) (Adam is otherwise
    // blind to it): a kernel that ignored either would fail
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-2f, wd = 0.1f, gs = 0.7f;
    std::vector<float> p = randn(n, 0.05f), m(n, 0.0f), v(n, 0.0f);
    DevPad<float> dp(n), dg(n), dm(n), dv(n), dp2(n), dmaster2(n), dm2(n), dv2(n);
    upload(dp, p);
    upload(dm, m);
    upload(dv, v);
    upload(dp2, p);
    upload(dmaster2, p);
    upload(dm2, m);
    upload(dv2, v);
    for (int t = 1; t <= steps; t++) {
        std::vector<float> g = randn(n, 0.01f);
        upload(dg, g);
        adamw_update_cuda<float>(dp.p, nullptr, dg.p, dm.p, dv.p, n, lr, b1, b2, eps, wd, t, gs, 7 + t, g_stream);
        adamw_update_cuda<float>(dp2.p, dmaster2.p, dg.p, dm2.p, dv2.p, n, lr, b1, b2, eps, wd, t, gs, 7 + t,
                                 g_stream);
        adamw_update_cpu(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t, gs);
    }
    sync();
    std::vector<float> gp = download(dp), gp2 = download(dp2), gmaster2 = download(dmaster2);
    double e = rel_err(gp, p);
    check(e <= 1e-6, "adamw fp32 (no master) params vs CPU: rel err %.3g (tol 1e-06), bitwise equal %zu of %zu", e,
          bitwise_equal(gp, p), n);
    check(bitwise_equal(gp2, gmaster2) == n && bitwise_equal(gp2, gp) == n,
          "adamw fp32 with master: params == master == the no-master result, bitwise");
}

// bf16 params without master weights: one step from bf16 params, vs the CPU step from the same values
static void test_adamw_bf16_nomaster(size_t n) {
    std::printf("adamw bf16 params, no master, n=%zu, 1 step\n", n);
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 1.0f;
    std::vector<float> p = quantize<bf16>(randn(n, 0.5f)), g = quantize<bf16>(randn(n, 0.1f));
    std::vector<float> m = randn(n, 0.01f), v(n);
    for (auto& x : v) x = 1e-4f * (float)(g_rng() % 1000) / 1000.0f;
    DevPad<bf16> dp(n), dg(n);
    DevPad<float> dm(n), dv(n);
    upload(dp, p);
    upload(dg, g);
    upload(dm, m);
    upload(dv, v);
    adamw_update_cuda<bf16>(dp.p, nullptr, dg.p, dm.p, dv.p, n, lr, b1, b2, eps, wd, 3, gs, 99, g_stream);
    adamw_update_cpu(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, 3, gs);
    sync();
    std::vector<bf16> got(n);
    cudaCheck(cudaMemcpy(got.data(), dp.p, n * 2, cudaMemcpyDeviceToHost));
    size_t ok = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(p[i]);
        uint16_t lo = (uint16_t)(u >> 16), pb = bf16_bits(got[i]);
        ok += pb == lo || ((u & 0xFFFFu) && pb == (uint16_t)(lo + 1));
    }
    check(ok == n, "adamw bf16 without master: params a bf16 neighbour of the CPU's fp32 result: %zu of %zu", ok, n);
}

// stochastic rounding is unbiased: lr = 0 makes adamw a pure rounding of master (p = master * 1 - 0)
static void test_stochastic_rounding(size_t n, int seeds) {
    std::printf("stochastic rounding bias, n=%zu, %d seeds\n", n, seeds);
    std::vector<float> x = randn(n, 1.0f), zeros(n, 0.0f);
    DevPad<bf16> dp(n), dg(n);
    DevPad<float> dmaster(n), dm(n), dv(n);
    upload(dmaster, x);
    upload(dg, zeros);
    upload(dm, zeros);
    upload(dv, zeros);
    std::vector<double> sum(n, 0.0);
    std::vector<bf16> p(n);
    size_t both = 0;
    std::vector<uint8_t> seen_up(n, 0), seen_down(n, 0);
    for (int s = 0; s < seeds; s++) {
        adamw_update_cuda<bf16>(dp.p, dmaster.p, dg.p, dm.p, dv.p, n, 0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f,
                                1000003ull * (s + 1), g_stream);
        cudaCheck(cudaMemcpyAsync(p.data(), dp.p, n * 2, cudaMemcpyDeviceToHost, g_stream));
        sync();
        for (size_t i = 0; i < n; i++) {
            float r = to_float(p[i]);
            sum[i] += r;
            (std::fabs(r) > std::fabs(x[i]) ? seen_up : seen_down)[i] = 1;
        }
    }
    std::vector<float> xm = download(dmaster);
    check(bitwise_equal(xm, x) == n, "adamw with lr = 0 leaves master unchanged");
    double max_err = 0, mean_err = 0, mean_rn = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = f32_bits(x[i]);
        uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
        float flo, fhi;
        std::memcpy(&flo, &lo, 4);
        std::memcpy(&fhi, &hi, 4);
        double ulp = std::fabs((double)fhi - (double)flo);
        double err = (sum[i] / seeds - x[i]) / ulp * (x[i] < 0 ? -1 : 1);  // in ulps, + = away from zero
        max_err = worst_of(max_err, std::fabs(err));
        mean_err += err / n;
        mean_rn += std::fabs((double)to_float(from_float<bf16>(x[i])) - x[i]) / ulp / n;
        both += seen_up[i] && seen_down[i];
    }
    check(max_err <= 0.25, "stochastic rounding: max per-element |mean - x| = %.4f ulp (bound 0.25)", max_err);
    check(std::fabs(mean_err) <= 0.005,
          "stochastic rounding: mean signed error %.5f ulp (bound 0.005; round-to-nearest's mean |error| %.3f ulp)",
          mean_err, mean_rn);
    check(both > n / 2, "stochastic rounding varies with the seed: %zu of %zu elements rounded both ways", both, n);
}

// ---------------------------------------------------------------------------------------------------------------
// sum of squares
// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void test_sum_squares(size_t n, size_t offset) {
    std::printf("sum_squares %s n=%zu offset=%zu\n", tname<T>(), n, offset);
    std::vector<float> g = quantize<T>(randn(n, 0.01f)), g2 = quantize<T>(randn(n / 2 + 1, 0.3f));
    DevPad<T> dg(n, offset), dg2(g2.size());
    upload(dg, g);
    upload(dg2, g2);
    Scratch scratch(SUM_SQUARES_SCRATCH_BYTES);
    double ref = sum_squares_cpu(g.data(), n), ref2 = sum_squares_cpu(g2.data(), g2.size());
    double a = sum_squares_cuda<T>(dg.p, n, scratch.p, scratch.bytes, g_stream);
    double b = sum_squares_cuda<T>(dg.p, n, scratch.p, scratch.bytes, g_stream);
    double e = std::fabs(a - ref) / ref;
    check(e <= 1e-10, "sum_squares: %.17g vs CPU %.17g, rel err %.3g (tol 1e-10)", a, ref, e);
    check(std::memcmp(&a, &b, 8) == 0, "sum_squares deterministic: two runs bitwise equal");
    // the grid follows n (cuda_grid_1d up to SUMSQ_BLOCKS): the full grid's result to the bit, whatever an earlier call left in the
    // scratch past its own partials (here 1e300 in every slot: read, it would show). (Not with the emulation's grid
    // cap, PRAC_EMU_GRID_CAP: a grid below the one n needs sums in another order, as no real launch does.)
    if (!std::getenv("PRAC_EMU_GRID_CAP")) {
        const bool packed = aligned16(dg.p);
        constexpr int V = vec128<T>();
        double* partials = static_cast<double*>(scratch.p);
        DevPad<double> full(1);
        if (packed) sum_squares_partial_kernel<T, V><<<SUMSQ_BLOCKS, SUMSQ_THREADS, 0, g_stream>>>(partials, dg.p, n);
        else sum_squares_partial_kernel<T, 1><<<SUMSQ_BLOCKS, SUMSQ_THREADS, 0, g_stream>>>(partials, dg.p, n);
        sum_squares_final_kernel<<<1, SUMSQ_BLOCKS, 0, g_stream>>>(full.p, partials, SUMSQ_BLOCKS, false);
        double whole = 0;
        cudaCheck(cudaMemcpyAsync(&whole, full.p, 8, cudaMemcpyDeviceToHost, g_stream));
        std::vector<double> stale(SUMSQ_BLOCKS, 1e300);
        cudaCheck(cudaMemcpyAsync(scratch.p, stale.data(), stale.size() * 8, cudaMemcpyHostToDevice, g_stream));
        double c = sum_squares_cuda<T>(dg.p, n, scratch.p, scratch.bytes, g_stream);
        check(std::memcmp(&a, &whole, 8) == 0 && std::memcmp(&c, &whole, 8) == 0,
              "sum_squares on %d of %d blocks: the full grid's %.17g bitwise (got %.17g, %.17g after stale partials)",
              (int)cuda_grid_1d(packed ? n / V : n, SUMSQ_THREADS, SUMSQ_BLOCKS), SUMSQ_BLOCKS, whole, a, c);
    }
    // device-side accumulation over two tensors
    DevPad<double> dout(1);
    sum_squares_device_cuda<T>(dout.p, dg.p, n, false, scratch.p, scratch.bytes, g_stream);
    sum_squares_device_cuda<T>(dout.p, dg2.p, g2.size(), true, scratch.p, scratch.bytes, g_stream);
    double tot = 0;
    cudaCheck(cudaMemcpyAsync(&tot, dout.p, 8, cudaMemcpyDeviceToHost, g_stream));
    sync();
    e = std::fabs(tot - (ref + ref2)) / (ref + ref2);
    check(e <= 1e-10, "sum_squares_device_cuda accumulating two tensors: rel err %.3g (tol 1e-10)", e);
}

// ---------------------------------------------------------------------------------------------------------------
template <typename T>
static void run_all() {
    std::printf("==== storage %s ====\n", tname<T>());
    // encoder: (B, T, C, V, wpe, skewed). BT = 4096 and 3000 go through the global bitonic steps (P > 2048).
    test_encoder<T>(1, 1, 88, 10, true, false);
    test_encoder<T>(2, 7, 200, 5, true, true);
    test_encoder<T>(4, 64, 768, 50, true, false);
    test_encoder<T>(2, 33, 5461, 1000, false, false);
    test_encoder<T>(8, 512, 768, 300, true, true);
    test_encoder<T>(3, 1000, 1376, 3, false, true);
    // BT = 8200 and 8192: P = 16384, global steps with k < P, where pairs are put in descending order (at P = 4096
    // the only global step has k = P: ascending only). A mis-sort splits a token's run across blocks.
    test_encoder<T>(2, 4100, 16, 50, true, true);
    test_encoder<T>(1, 8192, 16, 3, false, true);
    // norms: N = 1, odd widths, many blocks / row chunks
    // (16385 rows: the column sums' 256 chunks of 65 rows, the last ones empty, as at N = 32768 they are full)
    const int norm_shapes[][2] = {{1, 88},     {3, 200},    {64, 768},   {17, 1376},
                                  {5, 5461},   {1000, 200}, {4096, 768}, {16385, 16}};
    for (auto& s : norm_shapes) {
        test_layernorm<T>(s[0], s[1]);
        test_rmsnorm<T>(s[0], s[1]);
    }
    // flat ops: aligned (vector + tail) and unaligned (scalar); the largest is a GPT-2 activation. On the CPU
    // execution layer (where the host's random inputs cost more than the kernels) 300005 still needs many blocks.
#if defined(PRAC_CUDA_EMU)
    const size_t flat_n[] = {1, 1001, 88 * 7, (size_t)300005};
#else
    const size_t flat_n[] = {1, 1001, 88 * 7, (size_t)4096 * 768 + 5};
#endif
    for (size_t n : flat_n) {
        test_flat<T>(n, 0);
        test_flat<T>(n, 1);
        for (bool erf : {false, true}) {
            test_gelu<T>(erf, n, 0);
            test_gelu<T>(erf, n, 1);
        }
    }
    // swiglu: F odd (LLaMA-1B's 5461: n not a multiple of the pack, a scalar tail) and multiples of 8
    const int sw[][2] = {{1, 88}, {7, 200}, {64, 1376}, {3, 5461}, {512, 768}};
    for (auto& s : sw) {
        test_swiglu<T>(s[0], s[1], 0);
        test_swiglu<T>(s[0], s[1], 1);
    }
    // rope: HS = 64, 40 (h = 20: scalar for bf16), 88 (h = 44), 128
    test_rope<T>(1, 1, 128, 2);
    test_rope<T>(2, 17, 768, 12);
    test_rope<T>(2, 9, 200, 5);
    test_rope<T>(1, 33, 88, 1);
    test_rope<T>(4, 64, 2048, 16);
    // sum of squares
    const size_t ss_n[] = {1, 4097, ((size_t)3 << 20) + 7};
    for (size_t n : ss_n) {
        test_sum_squares<T>(n, 0);
        test_sum_squares<T>(n, 1);
    }
}

int main() {
    if (int rc = gpu_unavailable_exit_code("test_elementwise_cuda"); rc >= 0) return rc;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s (sm_%d%d), build floatX = %s\n", prop.name, prop.major, prop.minor, PRAC_FLOATX_NAME);
    cudaCheck(cudaStreamCreate(&g_stream));

    run_all<float>();
    run_all<bf16>();
    std::printf("==== adamw ====\n");
    test_adamw_master_bf16(100003, 5);
    test_adamw_master_bf16(1, 3);
    test_adamw_fp32(100003, 5);
    test_adamw_bf16_nomaster(4099);
    test_stochastic_rounding(4096, 256);

    cudaCheck(cudaStreamDestroy(g_stream));
    return gpu_test_summary("test_elementwise_cuda");
}
