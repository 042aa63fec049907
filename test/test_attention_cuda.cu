// GPU test of kernels/attention_cuda.cu: the flash-style forward and backward (every implementation this build
// has: Simt, and Mma in the bf16 build) against the CPU twin (kernels/attention.h, run in float on the inputs
// rounded to floatX) and, for T <= 256, against the naive GPU kernels (scores materialised in global memory).
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no CUDA device (ctest: "Not Run (Skipped)"); with
// REQUIRE_GPU=1 in the environment a missing device is a failure (exit 1) instead of a skip.
//
// Shapes: B in {1, 3} x NH in {1, 4, 12} x HS in {48, 64, 128} x T in {1, 7, 64, 100, 256, 1024} x causal and
// non-causal; the backward and the naive oracle for T <= 256 (the CPU backward is O(T^2) per head and the naive
// scores are (B, NH, T, T)).
//
// Tolerances: max |gpu - ref| / max |ref| over the tensor (dqkv: over each of its q, k, v parts separately):
//   fp32 build (PRAC_FP32)   out, lse 1e-5;  dq, dk, dv 2e-5    fp32 math on both sides, different summation
//                                                               orders (tiles, FMA contraction); measured on a
//                                                               host emulation of the kernels: <= 7e-7
//   bf16 build               out, dq, dk, dv 2e-2;  lse 1e-4    outputs rounded to bf16 (2^-9), and in the Mma
//                                                               path P and dS rounded to bf16 before their
//                                                               matmuls (FA2); lse is fp32 from exact bf16
//                                                               products; emulation: <= 5e-3, lse <= 2e-7
// The fast-vs-naive comparison uses the same tolerances. Determinism: the backward runs twice (into buffers
// prefilled with different garbage) and the two dqkv must be bitwise equal; the prefill also proves that every
// element of dqkv is overwritten.
//
// Timing (information only, not a check): B=8, NH=12, T=1024, HS=64 (GPT-2 124M), causal and not, per
// implementation; FLOPs counted as 4*B*NH*T*T*HS for the forward (halved when causal) and 2.5x that for the
// backward (the usual FA2 convention; our backward does ~1.4x more arithmetic than that because dQ recomputes
// S and dP in its own pass).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "test/gpu/gpu_test.h"
#include "common/cuda_common.cuh"
#include "common/error.h"
#include "kernels/attention.cuh"
#include "kernels/attention.h"

// ---- reporting ----

static constexpr bool kFp32 = sizeof(floatX) == 4;
static constexpr double kTolOut = kFp32 ? 1e-5 : 2e-2;
static constexpr double kTolLse = kFp32 ? 1e-5 : 1e-4;
static constexpr double kTolGrad = kFp32 ? 2e-5 : 2e-2;

static std::mt19937_64 g_rng(20261121);
// N(0, 1) values as stored in floatX (what both sides compute on)
static std::vector<float> randn_x(size_t n) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& f : v) f = to_float(from_float<floatX>(nd(g_rng)));
    return v;
}

// part (0 q, 1 k, 2 v) of a (N, 3C) tensor
static std::vector<float> part_of(const std::vector<float>& x, size_t N, int C, int part) {
    std::vector<float> r(N * C);
    for (size_t n = 0; n < N; n++)
        std::memcpy(&r[n * C], &x[n * 3 * C + (size_t)part * C], (size_t)C * sizeof(float));
    return r;
}
static bool all_finite(const std::vector<float>& x) {
    for (float f : x)
        if (!std::isfinite(f)) return false;
    return true;
}

static const char* impl_name(AttentionImpl i) { return i == AttentionImpl::Mma ? "mma" : "simt"; }

// One shape: CPU reference once, then every implementation (and the naive oracle) against it.
static void test_shape(cudaStream_t st, int B, int NH, int HS, int T, bool causal) {
    const int C = NH * HS;
    const size_t N = (size_t)B * T;
    const bool bwd = T <= 256, naive = T <= 256;
    char tag[96];
    std::snprintf(tag, sizeof tag, "B=%d NH=%d HS=%d T=%d %s", B, NH, HS, T, causal ? "causal" : "full");

    std::vector<float> qkv = randn_x(N * 3 * C), dout = randn_x(N * C);
    std::vector<float> out_ref(N * C), lse_ref((size_t)B * NH * T);
    attention_forward_cpu(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH, causal);

    Dev<floatX> d_qkv(N * 3 * C), d_dout(N * C), d_out(N * C), d_dqkv(N * 3 * C), d_dqkv2(N * 3 * C);
    Dev<float> d_lse((size_t)B * NH * T), d_scratch(attention_backward_scratch_floats(B, T, C, NH));
    upload(d_qkv, qkv);
    upload(d_dout, dout);

    // naive forward / backward (the oracle), computed once per shape
    std::vector<float> nv_out, nv_lse;
    if (naive) {
        Dev<floatX> n_out(N * C);
        Dev<float> n_lse((size_t)B * NH * T), n_scr(attention_forward_naive_scratch_floats(B, T, NH));
        attention_forward_naive_cuda(n_out.p, n_lse.p, d_qkv.p, B, T, C, NH, causal, n_scr.p, st);
        cudaCheck(cudaStreamSynchronize(st));
        nv_out = download(n_out);
        nv_lse = download(n_lse);
        check(rel_err(nv_out, out_ref) <= kTolOut && rel_err(nv_lse, lse_ref) <= kTolLse,
              "naive  %-34s fwd vs cpu: out %.2e lse %.2e", tag, rel_err(nv_out, out_ref), rel_err(nv_lse, lse_ref));
    }

    for (AttentionImpl impl : {AttentionImpl::Simt, AttentionImpl::Mma}) {
        if (!attention_cuda_impl_available(impl)) continue;
        const char* in = impl_name(impl);
        // ---- forward ----
        cudaCheck(cudaMemset(d_out.p, 0xFF, d_out.bytes()));  // NaN-ish garbage: every row must be written
        cudaCheck(cudaMemset(d_lse.p, 0xFF, d_lse.bytes()));
        attention_forward_cuda(d_out.p, d_lse.p, d_qkv.p, B, T, C, NH, causal, st, impl);
        cudaCheck(cudaStreamSynchronize(st));
        std::vector<float> out = download(d_out), lse = download(d_lse);
        double eo = rel_err(out, out_ref), el = rel_err(lse, lse_ref);
        check(eo <= kTolOut && el <= kTolLse, "%-6s %-34s fwd vs cpu: out %.2e lse %.2e", in, tag, eo, el);
        if (naive) {
            double no = rel_err(out, nv_out), nl = rel_err(lse, nv_lse);
            check(no <= kTolOut && nl <= kTolLse, "%-6s %-34s fwd vs naive: out %.2e lse %.2e", in, tag, no, nl);
        }
        if (!bwd) continue;

        // ---- backward: reference on this implementation's own O (as stored) and the CPU's lse ----
        std::vector<float> dqkv_ref(N * 3 * C);
        attention_backward_cpu(dqkv_ref.data(), dout.data(), qkv.data(), out.data(), lse_ref.data(), B, T, C, NH,
                               causal);
        cudaCheck(cudaMemset(d_dqkv.p, 0xFF, d_dqkv.bytes()));
        cudaCheck(cudaMemset(d_dqkv2.p, 0x7F, d_dqkv2.bytes()));
        cudaCheck(cudaMemset(d_scratch.p, 0xFF, d_scratch.bytes()));
        attention_backward_cuda(d_dqkv.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, d_scratch.p, st,
                                impl);
        attention_backward_cuda(d_dqkv2.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, d_scratch.p,
                                st, impl);
        cudaCheck(cudaStreamSynchronize(st));
        std::vector<float> dqkv = download(d_dqkv);
        double e[3];
        for (int p = 0; p < 3; p++) e[p] = rel_err(part_of(dqkv, N, C, p), part_of(dqkv_ref, N, C, p));
        check(e[0] <= kTolGrad && e[1] <= kTolGrad && e[2] <= kTolGrad && all_finite(dqkv),
              "%-6s %-34s bwd vs cpu: dq %.2e dk %.2e dv %.2e", in, tag, e[0], e[1], e[2]);
        check(download_bytes(d_dqkv) == download_bytes(d_dqkv2), "%-6s %-34s bwd bitwise deterministic", in, tag);
        if (naive) {
            Dev<floatX> n_dqkv(N * 3 * C);
            Dev<float> n_scr(attention_backward_naive_scratch_floats(B, T, NH));
            attention_backward_naive_cuda(n_dqkv.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, n_scr.p,
                                          st);
            cudaCheck(cudaStreamSynchronize(st));
            std::vector<float> nv = download(n_dqkv);
            double n[3];
            for (int p = 0; p < 3; p++) n[p] = rel_err(part_of(dqkv, N, C, p), part_of(nv, N, C, p));
            check(n[0] <= kTolGrad && n[1] <= kTolGrad && n[2] <= kTolGrad,
                  "%-6s %-34s bwd vs naive: dq %.2e dk %.2e dv %.2e", in, tag, n[0], n[1], n[2]);
        }
    }
}

// Forward and backward timing at the GPT-2 124M shape (information only).
static void time_attention(cudaStream_t st) {
    const int B = 8, NH = 12, HS = 64, T = 1024, C = NH * HS;
    const size_t N = (size_t)B * T;
    Dev<floatX> qkv(N * 3 * C), dout(N * C), out(N * C), dqkv(N * 3 * C);
    Dev<float> lse((size_t)B * NH * T), scratch(attention_backward_scratch_floats(B, T, C, NH));
    upload(qkv, randn_x(N * 3 * C));
    upload(dout, randn_x(N * C));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    std::printf("timing B=%d NH=%d T=%d HS=%d (%s):\n", B, NH, T, HS, PRAC_FLOATX_NAME);
    for (AttentionImpl impl : {AttentionImpl::Simt, AttentionImpl::Mma}) {
        if (!attention_cuda_impl_available(impl)) continue;
        for (bool causal : {true, false}) {
            const double fwd_flops = 4.0 * B * NH * (double)T * T * HS / (causal ? 2 : 1);
            const int iters = 10;
            auto fwd = [&] { attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, causal, st, impl); };
            auto bwd = [&] {
                attention_backward_cuda(dqkv.p, dout.p, qkv.p, out.p, lse.p, B, T, C, NH, causal, scratch.p, st, impl);
            };
            float ms[2];
            int k = 0;
            for (int which = 0; which < 2; which++) {
                auto run = [&] {
                    if (which == 0) fwd();
                    else bwd();
                };
                run();  // warm-up (and the forward output the backward reads)
                cudaCheck(cudaEventRecord(e0, st));
                for (int i = 0; i < iters; i++) run();
                cudaCheck(cudaEventRecord(e1, st));
                cudaCheck(cudaEventSynchronize(e1));
                cudaCheck(cudaEventElapsedTime(&ms[k], e0, e1));
                ms[k++] /= iters;
            }
            std::printf("  %-4s %-6s forward %8.3f ms %7.1f TFLOP/s   backward %8.3f ms %7.1f TFLOP/s\n",
                        impl_name(impl), causal ? "causal" : "full", ms[0], fwd_flops / (ms[0] * 1e-3) / 1e12, ms[1],
                        2.5 * fwd_flops / (ms[1] * 1e-3) / 1e12);
        }
    }
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
}

int main() {
    if (int rc = gpu_test_unavailable("test_attention_cuda"); rc >= 0) return rc;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s (sm_%d%d), floatX = %s\n", prop.name, prop.major, prop.minor, PRAC_FLOATX_NAME);
    cudaStream_t st;
    cudaCheck(cudaStreamCreate(&st));

    // argument checks: unsupported head sizes are a user error, T = 0 is a no-op
    check(!attention_cuda_supports_head_size(40) && attention_cuda_supports_head_size(48) &&
              attention_cuda_supports_head_size(128) && !attention_cuda_supports_head_size(144),
          "supported head sizes: 48 and 128 yes, 40 and 144 no");
    {
        bool threw = false;
        try {
            attention_forward_cuda(nullptr, nullptr, nullptr, 1, 8, 80, 2, true, st);  // HS = 40
        } catch (const UserError& ex) {
            threw = std::strstr(ex.what(), "head size 40") != nullptr;
        }
        check(threw, "head size 40 throws a UserError naming it");
        attention_forward_cuda(nullptr, nullptr, nullptr, 1, 0, 768, 12, true, st);  // T = 0: nothing to do
        cudaCheck(cudaStreamSynchronize(st));
        check(true, "T = 0 is a no-op");
    }

    for (int HS : {48, 64, 128})
        for (int T : {1, 7, 64, 100, 256, 1024})
            for (int B : {1, 3})
                for (int NH : {1, 4, 12})
                    for (bool causal : {true, false}) test_shape(st, B, NH, HS, T, causal);

    time_attention(st);
    cudaCheck(cudaStreamDestroy(st));
    return gpu_test_summary("test_attention_cuda");
}
