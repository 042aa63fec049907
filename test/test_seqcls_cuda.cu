// GPU test of the sequence-classification head ops (kernels/seqcls.cuh: tanh forward/backward, the fp32 logits of
// out_proj, the per-row cross-entropy / squared-error loss) against their CPU twins (kernels/seqcls.h; the logits
// against a double dot product), run on the same inputs rounded to the storage type first, for both storage types
// (fp32 and bf16) in every build.
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no CUDA device (ctest: "Not Run (Skipped)"); with
// REQUIRE_GPU=1 in the environment a missing device is a failure (exit 1) instead of a skip.
//
// Tolerances: rel = max |gpu - cpu| / max |cpu|.
//   tanh, fp32 storage       1e-6  (tanhf vs libm tanh, ~1 ulp)
//   tanh, bf16 storage       1e-2  (the output rounded to bf16, 2^-9 relative)
//   logits (fp32 both)       1e-5  (fp32 sums of C = 768 products in another order than double's; a logit rounded to
//                                   bf16 is off by up to 2^-9 relative and fails)
//   losses (fp32 both)       1e-6  (the same double arithmetic from the same stored logits; exp/log of the device's
//                                   double library against libm, last-ulp differences only)
//   dlogits                  1e-6 fp32, 1e-2 bf16 (one rounding to the storage type)
// Unlabelled rows (target -1) must give exactly 0 loss and 0 gradient.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <type_traits>
#include <vector>

#include "common/cuda_common.cuh"
#include "kernels/seqcls.cuh"
#include "test/gpu/gpu_test.h"

using bf16 = __nv_bfloat16;

static cudaStream_t g_stream = nullptr;
static void sync() { cudaCheck(cudaStreamSynchronize(g_stream)); }
static std::mt19937_64 g_rng(20261127);
static std::vector<float> randn(size_t n, float scale) { return normal_values(g_rng, n, scale); }
template <typename T>
static double tol() {
    return std::is_same<T, float>::value ? 1e-6 : 1e-2;
}

template <typename T>
static void test_tanh(size_t n, size_t offset) {
    const char* tn = Host<T>::name();
    std::vector<float> x = quantize<T>(randn(n, 2.0f)), dy = quantize<T>(randn(n, 1.0f));
    Dev<T> dx(n, offset), dout(n, offset), ddy(n, offset);
    upload(dx, x);
    upload(ddy, dy);
    std::vector<float> ref(n), dref(n);
    tanh_forward_cpu(ref.data(), x.data(), n);
    cudaCheck(cudaMemset(dout.p, 0xFF, dout.bytes()));
    tanh_forward_cuda<T>(dout.p, dx.p, n, g_stream);
    sync();
    std::vector<float> y = download(dout);  // the stored output: what backward reads
    double e = rel_err(y, ref);
    check(e <= tol<T>(), "%s tanh_forward n=%zu offset=%zu: rel err %.3g", tn, n, offset, e);
    tanh_backward_cpu(dref.data(), y.data(), dy.data(), n);
    tanh_backward_cuda<T>(ddy.p, dout.p, ddy.p, n, g_stream);  // in place: dinp == dout
    sync();
    e = rel_err(download(ddy), dref);
    check(e <= tol<T>(), "%s tanh_backward in place n=%zu offset=%zu: rel err %.3g", tn, n, offset, e);
}

template <typename T>
static void test_logits(int B, int C, int NL, bool bias) {
    const char* tn = Host<T>::name();
    std::vector<float> x = quantize<T>(randn((size_t)B * C, 1.0f)), w = quantize<T>(randn((size_t)NL * C, 0.05f)),
                       b = quantize<T>(randn(NL, 0.5f)), ref((size_t)B * NL);
    for (int r = 0; r < B; r++)
        for (int k = 0; k < NL; k++) {
            double s = bias ? b[k] : 0.0;
            for (int c = 0; c < C; c++) s += (double)x[(size_t)r * C + c] * w[(size_t)k * C + c];
            ref[(size_t)r * NL + k] = (float)s;
        }
    Dev<T> dx((size_t)B * C), dw((size_t)NL * C), db(NL);
    Dev<float> dz((size_t)B * NL);
    upload(dx, x);
    upload(dw, w);
    upload(db, b);
    cudaCheck(cudaMemset(dz.p, 0xFF, dz.bytes()));
    seqcls_logits_cuda<T>(dz.p, dx.p, dw.p, bias ? db.p : nullptr, B, C, NL, g_stream);
    sync();
    const double e = rel_err(download(dz), ref);
    check(e <= 1e-5, "%s seqcls_logits B=%d C=%d NL=%d bias=%d: rel err %.3g (fp32 output)", tn, B, C, NL, bias, e);
}

template <typename T>
static void test_loss(int B, int NL) {
    const char* tn = Host<T>::name();
    std::vector<float> z = randn((size_t)B * NL, 3.0f), scores(B);  // (logits: fp32 in every build)
    std::vector<int32_t> targets(B);
    for (int b = 0; b < B; b++) {
        targets[b] = b % 5 == 3 ? -1 : (NL == 1 ? 0 : (int32_t)(g_rng() % NL));
        scores[b] = (float)(g_rng() % 500) / 100.0f;
    }
    const float scale = 1.0f / B;
    std::vector<float> lref(B), dref((size_t)B * NL);
    seqcls_loss_cpu(lref.data(), dref.data(), z.data(), targets.data(), scores.data(), B, NL, scale);
    Dev<float> dz((size_t)B * NL), dl(B), ds(B);
    Dev<T> ddz((size_t)B * NL);
    Dev<int32_t> dt(B);
    upload(dz, z);
    upload(ds, scores);
    cudaCheck(cudaMemcpy(dt.p, targets.data(), B * sizeof(int32_t), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(ddz.p, 0xFF, ddz.bytes()));
    cudaCheck(cudaMemset(dl.p, 0xFF, dl.bytes()));
    seqcls_loss_cuda<T>(dl.p, ddz.p, dz.p, dt.p, ds.p, B, NL, scale, g_stream);
    sync();
    std::vector<float> l = download(dl), d = download(ddz);
    double el = rel_err(l, lref), ed = rel_err(d, dref);
    check(el <= 1e-6, "%s seqcls_loss B=%d NL=%d: losses rel err %.3g", tn, B, NL, el);
    check(ed <= tol<T>(), "%s seqcls_loss B=%d NL=%d: dlogits rel err %.3g", tn, B, NL, ed);
    bool zero = true;
    for (int b = 0; b < B; b++)
        if (targets[b] < 0) {
            zero = zero && l[b] == 0.0f;
            for (int k = 0; k < NL; k++) zero = zero && d[(size_t)b * NL + k] == 0.0f;
        }
    check(zero, "%s seqcls_loss B=%d NL=%d: unlabelled rows give 0 loss and 0 gradient", tn, B, NL);
    // evaluation: no gradient buffer, the same losses
    cudaCheck(cudaMemset(dl.p, 0xFF, dl.bytes()));
    seqcls_loss_cuda<T>(dl.p, (T*)nullptr, dz.p, dt.p, ds.p, B, NL, scale, g_stream);
    sync();
    el = rel_err(download(dl), lref);
    check(el <= 1e-6, "%s seqcls_loss B=%d NL=%d without dlogits: losses rel err %.3g", tn, B, NL, el);
}

template <typename T>
static void run_all() {
    test_tanh<T>(1000, 0);
    test_tanh<T>(1001, 1);  // unaligned: the scalar path
    for (int NL : {1, 2, 3}) {
        test_logits<T>(16, 768, NL, true);
        test_logits<T>(37, 100, NL, NL != 2);  // a C that is no multiple of 32, more warps than a block has
        test_loss<T>(16, NL);
        test_loss<T>(300, NL);  // more than one block
    }
}

int main() {
    if (int rc = gpu_unavailable_exit_code("test_seqcls_cuda"); rc >= 0) return rc;
    cudaCheck(cudaStreamCreate(&g_stream));
    run_all<float>();
    run_all<bf16>();
    cudaCheck(cudaStreamDestroy(g_stream));
    return gpu_test_summary("test_seqcls_cuda");
}
