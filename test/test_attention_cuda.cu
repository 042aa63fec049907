// GPU test of kernels/attention_cuda.cu (the dispatch), kernels/attention_simt.cu, kernels/attention_mma.cu and
// kernels/attention_cudnn.cu: the flash-style forward and backward (every implementation this build has: Simt; Mma
// in the bf16 build; Cudnn, cuDNN's fused SDPA, in the bf16 build with cudnn-frontend) against the CPU twin
// (kernels/attention.h, run in float on the inputs rounded to floatX) and, for T <= 256, against the naive GPU
// kernels (test/attention_naive_cuda.cuh: scores materialised in global memory); Cudnn also against Mma.
//
// Exit codes: 0 all checks passed, 1 a check failed, 77 no CUDA device (ctest: "Not Run (Skipped)"); with
// REQUIRE_GPU=1 in the environment a missing device is a failure (exit 1) instead of a skip.
//
// Shapes: B in {1, 3} x NH in {1, 4, 12} x HS in {48, 64, 128} x T in {1, 7, 64, 100, 256, 1024} x causal and
// non-causal; the backward and the naive oracle for T <= 256 (the CPU backward is O(T^2) per head and the naive
// scores are (B, NH, T, T)). Key padding (kv_len, an encoder's batch): the patterns of make_kv_len (every row
// full, one real token, a partial mid-tile length, rows ending in different key tiles), causal and not, at lengths
// that are and are not multiples of the 64-key tile, against the twins given the same kv_len; and a check that
// padding keys are never read (NaN k and v there change no bit of any output of the hand-written kernels).
//
// Tolerances: max |gpu - ref| / max |ref| over the tensor (dqkv: over each of its q, k, v parts separately):
//   fp32 build (PRAC_FP32)   out, lse 1e-5;  dq, dk, dv 2e-5    fp32 math on both sides, different summation
//                                                               orders (tiles, FMA contraction); measured on a
//                                                               host emulation of the kernels: <= 7e-7
//   bf16 build               out, dq, dk, dv 2e-2;  lse 1e-4    outputs rounded to bf16 (2^-9), and in the Mma
//                                                               path P and dS rounded to bf16 before their
//                                                               matmuls (FA2); lse is fp32 from exact bf16
//                                                               products; emulation: <= 5e-3, lse <= 2e-7
// The fast-vs-naive and cudnn-vs-mma comparisons use the same tolerances (cuDNN, like Mma, rounds P and dS to bf16
// before its second matmuls). Determinism: the backward runs twice (into buffers prefilled with different garbage)
// and the two dqkv must be bitwise equal (Cudnn: when its context asked for the deterministic algorithm, the
// default); the prefill also proves that every element of dqkv is overwritten.
//
// cuDNN rows (at (B, NH) = (3, 4) and (1, 12) unless PRAC_TEST_CUDNN_GRID=full: each shape builds its graphs): a
// shape cuDNN declines (build or check_support fails) prints a "[--] cudnn declined" line, which
// is a failure only for the shapes every cuDNN 9 must take on Hopper (HS 64 / 128, T multiple of 64, causal).
// Emulated (kernels/cuda_emu/cudnn_emu.cpp, cuDNN's graph API on a CPU): every grid shape, and every decline but
// the frontend's own refusal of T = 1 is a failure; the workspace rows only check that the graphs build.
// Besides the grid: the graph cache (a second call of a shape builds nothing and is a cache hit), Auto preferring
// cuDNN when given a context and the hand-written kernels without one, clean refusals (forced Cudnn on unaligned
// tensors, PRAC_ATTENTION values this build cannot run), mixing implementations (the hand-written backward on
// cuDNN's O and lse), and the planner's workspace estimate (train/planner.cpp) against the measured
// get_workspace_size of the backward graphs at the planner's reference shapes (built, not run).
//
// Timing (information only, not a check): B=8, NH=12, T=1024, HS=64 (GPT-2 124M), causal and not, per
// implementation; FLOPs counted as 4*B*NH*T*T*HS for the forward (halved when causal) and 2.5x that for the
// backward (the usual FA2 convention; our backward does ~1.4x more arithmetic than that because dQ recomputes
// S and dP in its own pass).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
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
#if defined(PRAC_CUDA_EMU)
#include "kernels/cuda_emu/emu_internal.h"  // cuda_emu::launches_of
#endif
#include "common/cuda_common.cuh"
#include "common/error.h"
#include "kernels/attention.cuh"
#include "kernels/attention.h"
#include "kernels/attention_cudnn.cuh"
#include "test/attention_naive_cuda.cuh"  // the naive oracle
#include "kernels/cuda_sizes.h"  // cudnn_sdpa_workspace_estimate

// ---- reporting ----

static constexpr bool kFp32 = sizeof(floatX) == 4;
static constexpr double kTolOut = kFp32 ? 1e-5 : 2e-2;
static constexpr double kTolLse = kFp32 ? 1e-5 : 1e-4;
static constexpr double kTolGrad = kFp32 ? 2e-5 : 2e-2;

static std::mt19937_64 g_rng(20261121);
// N(0, 1) values as stored in floatX (what both sides compute on)
static std::vector<float> randn_x(size_t n) {
    std::vector<float> v = normal_values(g_rng, n);
    for (float& f : v) f = to_float(from_float<floatX>(f));
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

static const char* impl_name(AttentionImpl i) { return attention_impl_name(i); }

// ---- key padding: kv_len (B) per pattern ----
enum class Pad { None, Full, One, Partial, Mixed };
static const char* pad_name(Pad p) {
    switch (p) {
        case Pad::None: return "";
        case Pad::Full: return " kv=full";
        case Pad::One: return " kv=1";
        case Pad::Partial: return " kv=partial";
        case Pad::Mixed: return " kv=mixed";
    }
    return "?";
}
// Full: every row T (the masked path on an unpadded batch); One: one real token; Partial: every row 2T/3 + 1
// (mid-tile for the lengths tested); Mixed: rows b = 0, 1, 2, 3, ... get 65 (one real key in the second tile),
// 1, T/2 + 1, T in turn, clipped to T. Empty for None.
static std::vector<int> make_kv_len(Pad p, int B, int T) {
    if (p == Pad::None) return {};
    std::vector<int> kv(B);
    for (int b = 0; b < B; b++) {
        const int mixed[4] = {65, 1, T / 2 + 1, T};
        int v = p == Pad::Full ? T : p == Pad::One ? 1 : p == Pad::Partial ? 2 * T / 3 + 1 : mixed[b % 4];
        kv[b] = std::min(std::max(v, 1), T);
    }
    return kv;
}
// kv_len on the device (null for None)
struct DevKvLen {
    std::vector<int> host;
    Dev<int> dev;
    DevKvLen(Pad p, int B, int T) : host(make_kv_len(p, B, T)), dev(host.size()) {
        if (!host.empty()) cudaCheck(cudaMemcpy(dev.p, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice));
    }
    const int* h() const { return host.empty() ? nullptr : host.data(); }
    const int* d() const { return host.empty() ? nullptr : dev.p; }
};

// ---- cuDNN: one context for the whole test, its workspace from a grow-only device buffer (as CudaBackend's) ----
struct GrowBuffer {
    void* p = nullptr;
    size_t bytes = 0;
};
static GrowBuffer g_cudnn_ws;
static void* grow_workspace(void* self, size_t bytes) {
    GrowBuffer* b = static_cast<GrowBuffer*>(self);
    if (bytes > b->bytes) {
        cudaCheck(cudaDeviceSynchronize());
        if (b->p) cudaCheck(cudaFree(b->p));
        cudaCheck(cudaMalloc(&b->p, bytes));
        b->bytes = bytes;
    }
    return b->p;
}
static AttentionCudnn* g_cudnn = nullptr;  // null when the build has no cuDNN attention
static bool cudnn_usable() { return g_cudnn != nullptr && attention_cuda_impl_available(AttentionImpl::Cudnn); }
static int g_cudnn_declined = 0;
static double g_cudnn_build_s = 0;  // wall time of the grid's graph builds (first use of each shape)
// Every graph is built once per shape (hundreds of ms each, unmeasured), so the cudnn rows cover the grid's head
// sizes, lengths and masks at two (B, NH) pairs, (3, 4) and (1, 12); PRAC_TEST_CUDNN_GRID=full runs all six.
static bool cudnn_grid_shape(int B, int NH) {
#if defined(PRAC_CUDA_EMU)
    (void)B, (void)NH;
    return true;  // the emulated grid is small, and the stand-in builds a graph in microseconds
#endif
    const char* v = std::getenv("PRAC_TEST_CUDNN_GRID");
    if (v && std::strcmp(v, "full") == 0) return true;
    return (B == 3 && NH == 4) || (B == 1 && NH == 12);
}

// One shape: CPU reference once, then every implementation (and the naive oracle) against it. pad: the key-padding
// pattern (make_kv_len), given to the twins and to every implementation alike. peaky: q and k are scaled by 6
// (scores ~36x larger: nearly one-hot softmax rows, where the online max/rescale matters most). The backward runs
// up to T = 256, and at any T with with_bwd.
static void test_shape(cudaStream_t st, int B, int NH, int HS, int T, bool causal, Pad pad = Pad::None,
                       bool peaky = false, bool with_bwd = false) {
    const int C = NH * HS;
    const size_t N = (size_t)B * T;
    const bool bwd = T <= 256 || with_bwd, naive = T <= 256;
    const DevKvLen kv(pad, B, T);
    char tag[96];
    std::snprintf(tag, sizeof tag, "B=%d NH=%d HS=%d T=%d %s%s%s", B, NH, HS, T, causal ? "causal" : "full",
                  pad_name(pad), peaky ? " peaky" : "");

    std::vector<float> qkv = randn_x(N * 3 * C), dout = randn_x(N * C);
    if (peaky)
        for (size_t i = 0; i < N; i++)
            for (int c = 0; c < 2 * C; c++) qkv[i * 3 * C + c] = to_float(from_float<floatX>(6.0f * qkv[i * 3 * C + c]));
    std::vector<float> out_ref(N * C), lse_ref((size_t)B * NH * T);
    attention_forward_cpu(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH, causal, kv.h());

    Dev<floatX> d_qkv(N * 3 * C), d_dout(N * C), d_out(N * C), d_dqkv(N * 3 * C), d_dqkv2(N * 3 * C);
    Dev<float> d_lse((size_t)B * NH * T), d_scratch(attention_backward_scratch_floats(B, T, NH));
    upload(d_qkv, qkv);
    upload(d_dout, dout);

    // naive forward / backward (the oracle), computed once per shape
    std::vector<float> nv_out, nv_lse;
    if (naive) {
        Dev<floatX> n_out(N * C);
        Dev<float> n_lse((size_t)B * NH * T), n_scr(attention_forward_naive_scratch_floats(B, T, NH));
        attention_forward_naive_cuda(n_out.p, n_lse.p, d_qkv.p, B, T, C, NH, causal, kv.d(), n_scr.p, st);
        cudaCheck(cudaStreamSynchronize(st));
        nv_out = download(n_out);
        nv_lse = download(n_lse);
        check(rel_err(nv_out, out_ref) <= kTolOut && rel_err(nv_lse, lse_ref) <= kTolLse,
              "naive  %-34s fwd vs cpu: out %.2e lse %.2e", tag, rel_err(nv_out, out_ref), rel_err(nv_lse, lse_ref));
    }

    std::vector<float> mma_out, mma_lse, mma_dqkv;  // the Mma results, for the cudnn-vs-mma rows
    for (AttentionImpl impl : {AttentionImpl::Simt, AttentionImpl::Mma, AttentionImpl::Cudnn}) {
        if (!attention_cuda_impl_available(impl)) continue;
        const char* in = impl_name(impl);
        if (impl == AttentionImpl::Cudnn) {
            if (!cudnn_usable() || !cudnn_grid_shape(B, NH)) continue;
            // declined shapes are reported, and fail only where every cuDNN 9 on Hopper must take them (emulated:
            // every shape the frontend does not refuse itself)
            std::string why;
            size_t ws = 0;
            auto t0 = std::chrono::steady_clock::now();
            const bool padded = kv.d() != nullptr;
            bool ok = attention_cudnn_prepare(g_cudnn, B, T, C, NH, causal, padded, false, st, &ws, &why) &&
                      (!bwd || attention_cudnn_prepare(g_cudnn, B, T, C, NH, causal, padded, true, st, &ws, &why));
            g_cudnn_build_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!ok) {
#if defined(PRAC_CUDA_EMU)
                // the stand-in takes every graph the frontend lowers; the frontend itself refuses s_q = s_kv = 1
                const bool required = T > 1;
#else
                const bool required = (HS == 64 || HS == 128) && T % 64 == 0 && causal && !padded;
#endif
                g_cudnn_declined++;
                if (required) check(false, "%-6s %-34s cuDNN must support this shape: %s", in, tag, why.c_str());
                else std::printf("  [--] %-6s %-34s declined by cuDNN (not a failure): %s\n", in, tag, why.c_str());
                continue;
            }
        }
        // ---- forward ----
        cudaCheck(cudaMemset(d_out.p, 0xFF, d_out.bytes()));  // NaN-ish garbage: every row must be written
        cudaCheck(cudaMemset(d_lse.p, 0xFF, d_lse.bytes()));
        attention_forward_cuda(d_out.p, d_lse.p, d_qkv.p, B, T, C, NH, causal, kv.d(), st, impl, g_cudnn);
        cudaCheck(cudaStreamSynchronize(st));
        std::vector<float> out = download(d_out), lse = download(d_lse);
        double eo = rel_err(out, out_ref), el = rel_err(lse, lse_ref);
        check(eo <= kTolOut && el <= kTolLse, "%-6s %-34s fwd vs cpu: out %.2e lse %.2e", in, tag, eo, el);
        if (naive) {
            double no = rel_err(out, nv_out), nl = rel_err(lse, nv_lse);
            check(no <= kTolOut && nl <= kTolLse, "%-6s %-34s fwd vs naive: out %.2e lse %.2e", in, tag, no, nl);
        }
        if (impl == AttentionImpl::Mma) {
            mma_out = out;
            mma_lse = lse;
        }
        if (impl == AttentionImpl::Cudnn && !mma_out.empty()) {
            double mo = rel_err(out, mma_out), ml = rel_err(lse, mma_lse);
            check(mo <= kTolOut && ml <= kTolLse, "%-6s %-34s fwd vs mma: out %.2e lse %.2e", in, tag, mo, ml);
        }
        if (!bwd) continue;

        // ---- backward: reference on this implementation's own O (as stored) and the CPU's lse ----
        std::vector<float> dqkv_ref(N * 3 * C);
        attention_backward_cpu(dqkv_ref.data(), dout.data(), qkv.data(), out.data(), lse_ref.data(), B, T, C, NH,
                               causal, kv.h());
        cudaCheck(cudaMemset(d_dqkv.p, 0xFF, d_dqkv.bytes()));
        cudaCheck(cudaMemset(d_dqkv2.p, 0x7F, d_dqkv2.bytes()));
        cudaCheck(cudaMemset(d_scratch.p, 0xFF, d_scratch.bytes()));
        attention_backward_cuda(d_dqkv.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, kv.d(),
                                d_scratch.p, st, impl, g_cudnn);
        attention_backward_cuda(d_dqkv2.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, kv.d(),
                                d_scratch.p, st, impl, g_cudnn);
        cudaCheck(cudaStreamSynchronize(st));
        std::vector<float> dqkv = download(d_dqkv);
        double e[3];
        for (int p = 0; p < 3; p++) e[p] = rel_err(part_of(dqkv, N, C, p), part_of(dqkv_ref, N, C, p));
        check(e[0] <= kTolGrad && e[1] <= kTolGrad && e[2] <= kTolGrad && all_finite(dqkv),
              "%-6s %-34s bwd vs cpu: dq %.2e dk %.2e dv %.2e", in, tag, e[0], e[1], e[2]);
        const bool same_bits = download_bytes(d_dqkv) == download_bytes(d_dqkv2);
        if (impl != AttentionImpl::Cudnn || attention_cudnn_deterministic(g_cudnn))
            check(same_bits, "%-6s %-34s bwd bitwise deterministic", in, tag);
        else
            std::printf("  [--] %-6s %-34s bwd repeated run bitwise %s (non-deterministic mode)\n", in, tag,
                        same_bits ? "equal" : "different");
        if (impl == AttentionImpl::Mma) mma_dqkv = dqkv;
        if (impl == AttentionImpl::Cudnn && !mma_dqkv.empty()) {
            // cudnn-vs-mma (each on its own forward's O and lse: the same contract, so within the same tolerance),
            // on the CPU reference's scale: where a gradient is exactly 0 (one key per row: dS = P (dP - D) = 0),
            // Mma's rounding noise is no scale to measure cuDNN's exact zeros by
            double m[3];
            for (int p = 0; p < 3; p++) {
                const std::vector<float> a = part_of(dqkv, N, C, p), b = part_of(mma_dqkv, N, C, p),
                                         r = part_of(dqkv_ref, N, C, p);
                double diff = 0, scale = 0;
                for (size_t i = 0; i < a.size(); i++) {
                    diff = worst_of(diff, std::fabs((double)a[i] - (double)b[i]));
                    scale = std::max(scale, std::fabs((double)r[i]));
                }
                m[p] = std::isfinite(diff) ? diff / (scale > 0 ? scale : 1.0) : INFINITY;
            }
            check(m[0] <= kTolGrad && m[1] <= kTolGrad && m[2] <= kTolGrad,
                  "%-6s %-34s bwd vs mma: dq %.2e dk %.2e dv %.2e", in, tag, m[0], m[1], m[2]);
            // mixing: the hand-written backward on cuDNN's O and lse (same lse convention) gives the same gradients
            Dev<floatX> x_dqkv(N * 3 * C);
            attention_backward_cuda(x_dqkv.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, kv.d(),
                                    d_scratch.p, st, AttentionImpl::Mma, nullptr);
            cudaCheck(cudaStreamSynchronize(st));
            std::vector<float> xd = download(x_dqkv);
            double x[3];
            for (int p = 0; p < 3; p++) x[p] = rel_err(part_of(xd, N, C, p), part_of(dqkv_ref, N, C, p));
            check(x[0] <= kTolGrad && x[1] <= kTolGrad && x[2] <= kTolGrad,
                  "mixed  %-34s mma bwd on cudnn's O, lse vs cpu: dq %.2e dk %.2e dv %.2e", tag, x[0], x[1], x[2]);
            // and the other way: cuDNN's backward on the hand-written forward's O and lse, against the CPU's
            // backward on that O (the layer picks each pass's implementation on its own: one contract for both)
            Dev<floatX> m_out(N * C), y_dqkv(N * 3 * C);
            Dev<float> m_lse((size_t)B * NH * T);
            upload(m_out, mma_out);
            upload(m_lse, mma_lse);
            attention_backward_cuda(y_dqkv.p, d_dout.p, d_qkv.p, m_out.p, m_lse.p, B, T, C, NH, causal, kv.d(),
                                    d_scratch.p, st, AttentionImpl::Cudnn, g_cudnn);
            cudaCheck(cudaStreamSynchronize(st));
            std::vector<float> yd = download(y_dqkv), y_ref(N * 3 * C);
            attention_backward_cpu(y_ref.data(), dout.data(), qkv.data(), mma_out.data(), lse_ref.data(), B, T, C, NH,
                                   causal, kv.h());
            double y[3];
            for (int p = 0; p < 3; p++) y[p] = rel_err(part_of(yd, N, C, p), part_of(y_ref, N, C, p));
            check(y[0] <= kTolGrad && y[1] <= kTolGrad && y[2] <= kTolGrad && all_finite(yd),
                  "mixed  %-34s cudnn bwd on mma's O, lse vs cpu: dq %.2e dk %.2e dv %.2e", tag, y[0], y[1], y[2]);
        }
        if (naive) {
            Dev<floatX> n_dqkv(N * 3 * C);
            Dev<float> n_scr(attention_backward_naive_scratch_floats(B, T, NH));
            attention_backward_naive_cuda(n_dqkv.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, kv.d(),
                                          n_scr.p, st);
            cudaCheck(cudaStreamSynchronize(st));
            std::vector<float> nv = download(n_dqkv);
            double n[3];
            for (int p = 0; p < 3; p++) n[p] = rel_err(part_of(dqkv, N, C, p), part_of(nv, N, C, p));
            check(n[0] <= kTolGrad && n[1] <= kTolGrad && n[2] <= kTolGrad,
                  "%-6s %-34s bwd vs naive: dq %.2e dk %.2e dv %.2e", in, tag, n[0], n[1], n[2]);
        }
    }
}

// Padding keys are never read: NaN in their k and v changes no bit of out, lse or dqkv of the hand-written kernels
// (their key loops stop at kv_len, and the last real tile is zero-filled past it), while any read of one would
// spread the NaN (0 * NaN). cuDNN is not held to this: its contract is the masked result on finite inputs.
static void test_padding_never_read(cudaStream_t st, int B, int NH, int HS, int T, bool causal) {
    const int C = NH * HS;
    const size_t N = (size_t)B * T;
    const DevKvLen kv(Pad::Mixed, B, T);
    std::vector<float> qkv = randn_x(N * 3 * C), poisoned = qkv;
    for (int b = 0; b < B; b++)
        for (int t = kv.host[b]; t < T; t++)
            for (int c = C; c < 3 * C; c++) poisoned[((size_t)b * T + t) * 3 * C + c] = NAN;  // k and v
    Dev<floatX> d_dout(N * C);
    upload(d_dout, randn_x(N * C));
    Dev<float> d_scratch(attention_backward_scratch_floats(B, T, NH));
    for (AttentionImpl impl : {AttentionImpl::Simt, AttentionImpl::Mma}) {
        if (!attention_cuda_impl_available(impl)) continue;
        std::vector<uint8_t> bytes[2][3];  // [clean, poisoned][out, lse, dqkv]
        for (int run = 0; run < 2; run++) {
            Dev<floatX> d_qkv(N * 3 * C), d_out(N * C), d_dqkv(N * 3 * C);
            Dev<float> d_lse((size_t)B * NH * T);
            upload(d_qkv, run == 0 ? qkv : poisoned);
            attention_forward_cuda(d_out.p, d_lse.p, d_qkv.p, B, T, C, NH, causal, kv.d(), st, impl);
            attention_backward_cuda(d_dqkv.p, d_dout.p, d_qkv.p, d_out.p, d_lse.p, B, T, C, NH, causal, kv.d(),
                                    d_scratch.p, st, impl);
            cudaCheck(cudaStreamSynchronize(st));
            bytes[run][0] = download_bytes(d_out);
            bytes[run][1] = download_bytes(d_lse);
            bytes[run][2] = download_bytes(d_dqkv);
        }
        check(bytes[0][0] == bytes[1][0] && bytes[0][1] == bytes[1][1] && bytes[0][2] == bytes[1][2],
              "%-6s B=%d NH=%d HS=%d T=%d %s kv=mixed: NaN k, v in the padding change no output bit", impl_name(impl),
              B, NH, HS, T, causal ? "causal" : "full");
    }
}

// Forward and backward timing at the GPT-2 124M shape (information only).
static void time_attention(cudaStream_t st) {
    const int B = 8, NH = 12, HS = 64, T = 1024, C = NH * HS;
    const size_t N = (size_t)B * T;
    Dev<floatX> qkv(N * 3 * C), dout(N * C), out(N * C), dqkv(N * 3 * C);
    Dev<float> lse((size_t)B * NH * T), scratch(attention_backward_scratch_floats(B, T, NH));
    upload(qkv, randn_x(N * 3 * C));
    upload(dout, randn_x(N * C));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    std::printf("timing B=%d NH=%d T=%d HS=%d (%s):\n", B, NH, T, HS, PRAC_FLOATX_NAME);
    for (AttentionImpl impl : {AttentionImpl::Simt, AttentionImpl::Mma, AttentionImpl::Cudnn}) {
        if (!attention_cuda_impl_available(impl)) continue;
        if (impl == AttentionImpl::Cudnn && !cudnn_usable()) continue;
        for (bool causal : {true, false}) {
            if (impl == AttentionImpl::Cudnn &&
                !(attention_cudnn_prepare(g_cudnn, B, T, C, NH, causal, false, false, st, nullptr, nullptr) &&
                  attention_cudnn_prepare(g_cudnn, B, T, C, NH, causal, false, true, st, nullptr, nullptr)))
                continue;
            const double fwd_flops = 4.0 * B * NH * (double)T * T * HS / (causal ? 2 : 1);
            const int iters = 10;
            auto fwd = [&] {
                attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, causal, nullptr, st, impl, g_cudnn);
            };
            auto bwd = [&] {
                attention_backward_cuda(dqkv.p, dout.p, qkv.p, out.p, lse.p, B, T, C, NH, causal, nullptr, scratch.p,
                                        st, impl, g_cudnn);
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
            std::printf("  %-5s %-6s forward %8.3f ms %7.1f TFLOP/s   backward %8.3f ms %7.1f TFLOP/s\n",
                        impl_name(impl), causal ? "causal" : "full", ms[0], fwd_flops / (ms[0] * 1e-3) / 1e12, ms[1],
                        2.5 * fwd_flops / (ms[1] * 1e-3) / 1e12);
        }
    }
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
}

#if defined(PRAC_CUDA_EMU)
// The tensor-core forward writes lse with scalar stores: an lse that is only 4-byte aligned (layer l's lse starts
// l·B·NH·T floats into the arena: unaligned for layers >= 1 when B·NH·T % 4 != 0) must not push Auto onto the ~10x
// slower Simt forward. Which kernel ran is counted by the execution layer.
static void test_lse_alignment(cudaStream_t st) {
    if (!attention_cuda_impl_available(AttentionImpl::Mma)) return;  // the bf16 build's path
    const int B = 1, NH = 2, HS = 64, T = 7, C = NH * HS;
    Dev<floatX> qkv((size_t)B * T * 3 * C), out((size_t)B * T * C);
    Dev<float> lse((size_t)B * NH * T, 1);  // one float past a 256-byte aligned base
    upload(qkv, randn_x(qkv.count));
    long before = cuda_emu::launches_of("attention_forward_mma_kernel");
    attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Auto, nullptr);
    cudaCheck(cudaStreamSynchronize(st));
    check(cuda_emu::launches_of("attention_forward_mma_kernel") == before + 1,
          "Auto takes the tensor-core forward with a 4-byte aligned lse");
}
#endif

// A UserError from f whose message contains `needle`?
template <typename F>
static bool throws_user_error(F&& f, const char* needle) {
    try {
        f();
    } catch (const UserError& ex) {
        return std::strstr(ex.what(), needle) != nullptr;
    }
    return false;
}

// PRAC_ATTENTION parsing: every value this build can run is accepted, the others are refused by name.
static void test_impl_env() {
    const char* saved = std::getenv("PRAC_ATTENTION");
    std::string keep = saved ? saved : "";
    unsetenv("PRAC_ATTENTION");
    check(attention_impl_from_env() == AttentionImpl::Auto, "PRAC_ATTENTION unset -> auto");
    for (AttentionImpl impl : {AttentionImpl::Auto, AttentionImpl::Simt, AttentionImpl::Mma, AttentionImpl::Cudnn}) {
        setenv("PRAC_ATTENTION", attention_impl_name(impl), 1);
        if (attention_cuda_impl_available(impl))
            check(attention_impl_from_env() == impl, "PRAC_ATTENTION=%s accepted", attention_impl_name(impl));
        else
            check(throws_user_error([] { attention_impl_from_env(); }, "cannot run"),
                  "PRAC_ATTENTION=%s refused in this build (%s)", attention_impl_name(impl), PRAC_FLOATX_NAME);
    }
    setenv("PRAC_ATTENTION", "flash", 1);
    check(throws_user_error([] { attention_impl_from_env(); }, "expected auto"), "PRAC_ATTENTION=flash refused");
    if (saved) setenv("PRAC_ATTENTION", keep.c_str(), 1);
    else unsetenv("PRAC_ATTENTION");
}

// cuDNN outside the grid: graph cache, Auto's choice, refusals, planner estimate vs measured workspace.
static void test_cudnn_extras(cudaStream_t st) {
    if (!cudnn_usable()) {
        // the path is compiled out (fp32 build, or no cudnn-frontend): forcing it is a clean UserError
        check(throws_user_error([&] {
                  Dev<floatX> qkv(3 * 64 * 3 * 256), out(3 * 64 * 256);
                  Dev<float> lse(3 * 4 * 64);
                  attention_forward_cuda(out.p, lse.p, qkv.p, 3, 64, 256, 4, true, nullptr, st, AttentionImpl::Cudnn,
                                         g_cudnn);
              }, "cuDNN"),
              "forcing Cudnn without cuDNN attention is a UserError (%s)", attention_cudnn_describe().c_str());
        return;
    }
    const int B = 2, T = 128, NH = 4, HS = 64, C = NH * HS;
    const size_t N = (size_t)B * T;
    Dev<floatX> qkv(N * 3 * C), out(N * C);
    Dev<float> lse((size_t)B * NH * T + 4);  // + 4: room for the misaligned view below
    upload(qkv, randn_x(N * 3 * C));

    // graph cache: the first call of a new shape builds one graph, the second finds it
    AttentionCudnnStats s0 = attention_cudnn_stats(g_cudnn);
    attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Cudnn, g_cudnn);
    AttentionCudnnStats s1 = attention_cudnn_stats(g_cudnn);
    attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Cudnn, g_cudnn);
    AttentionCudnnStats s2 = attention_cudnn_stats(g_cudnn);
    cudaCheck(cudaStreamSynchronize(st));
    check(s1.graphs_built == s0.graphs_built + 1 && s1.executes == s0.executes + 1,
          "cudnn first call of a shape builds one graph (built %d -> %d)", s0.graphs_built, s1.graphs_built);
    check(s2.graphs_built == s1.graphs_built && s2.cache_hits == s1.cache_hits + 1 && s2.executes == s1.executes + 1,
          "cudnn second call is a cache hit (hits %d -> %d, built %d)", s1.cache_hits, s2.cache_hits,
          s2.graphs_built);
    std::printf("  [--] forward workspace at B=%d T=%d NH=%d HS=%d: %zu bytes\n", B, T, NH, HS,
                s2.last_workspace_bytes);

    // Auto: cuDNN when given a context, the hand-written kernels without one
    attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Auto, g_cudnn);
    AttentionCudnnStats s3 = attention_cudnn_stats(g_cudnn);
    attention_forward_cuda(out.p, lse.p, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Auto, nullptr);
    AttentionCudnnStats s4 = attention_cudnn_stats(g_cudnn);
    cudaCheck(cudaStreamSynchronize(st));
    check(s3.executes == s2.executes + 1 && s4.executes == s3.executes, "auto runs cuDNN with a context, not without");

    // forced Cudnn on a misaligned lse: refused by name (Auto would take the hand-written kernels)
    check(throws_user_error([&] {
              attention_forward_cuda(out.p, lse.p + 1, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Cudnn,
                                     g_cudnn);
          }, "16-byte"),
          "forced cudnn on a misaligned lse is a UserError");
    attention_forward_cuda(out.p, lse.p + 1, qkv.p, B, T, C, NH, true, nullptr, st, AttentionImpl::Auto, g_cudnn);
    cudaCheck(cudaStreamSynchronize(st));
    check(attention_cudnn_stats(g_cudnn).executes == s4.executes, "auto on a misaligned lse runs the hand-written kernel");

    // the planner's estimate (train/planner.cpp) against the measured backward workspace at its reference shapes
    // (graphs built, never run: nothing of this size is allocated)
    struct Ref {
        const char* name;
        int B, T, NH, HS;
    } refs[] = {{"gpt2-124m 64x1024", 64, 1024, 12, 64},
                {"llama-130m 128x256", 128, 256, 12, 64},
                {"llama-350m 128x256", 128, 256, 16, 64},
                {"llama-1b 128x256", 128, 256, 32, 64}};
    for (const Ref& r : refs) {
        size_t fwd_ws = 0, bwd_ws = 0;
        std::string why;
        bool ok =
            attention_cudnn_prepare(g_cudnn, r.B, r.T, r.NH * r.HS, r.NH, true, false, false, st, &fwd_ws, &why) &&
            attention_cudnn_prepare(g_cudnn, r.B, r.T, r.NH * r.HS, r.NH, true, false, true, st, &bwd_ws, &why);
        const size_t est = cudnn_sdpa_workspace_estimate(r.B, r.T, r.NH, r.HS);
#if defined(PRAC_CUDA_EMU)
        // the stand-in's workspace holds its interpreted intermediates (every score matrix), not cuDNN's: the graphs
        // must build; the estimate is checked against cuDNN's own figures on a GPU
        check(ok, "cudnn %-20s graphs build (the stand-in's workspace: fwd %zu, bwd %zu bytes; not cuDNN's)%s%s",
              r.name, fwd_ws, bwd_ws, ok ? "" : ": declined: ", why.c_str());
        (void)est;
        continue;
#endif
        // an upper bound (the plan must hold), and a tight one: more than the planner's 1 MiB rounding above
        // cuDNN's figure would shrink the largest micro-batch the plan allows for nothing
        check(ok && fwd_ws <= est && bwd_ws <= est && est < bwd_ws + (1u << 20),
              "cudnn workspace %-20s fwd %zu, bwd %zu (%.1f MiB) <= planner estimate %zu (%.1f MiB) < bwd + 1 MiB%s%s",
              r.name, fwd_ws, bwd_ws, bwd_ws / 1048576.0, est, est / 1048576.0, ok ? "" : ": declined: ", why.c_str());
    }
    AttentionCudnnStats sf = attention_cudnn_stats(g_cudnn);
    std::printf("  [--] cudnn graphs: %d built, %d declined, %d cache hits, %d executes\n", sf.graphs_built,
                sf.graphs_declined, sf.cache_hits, sf.executes);
}

int main() {
    if (int rc = gpu_unavailable_exit_code("test_attention_cuda"); rc >= 0) return rc;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    std::printf("device 0: %s (sm_%d%d), floatX = %s\n", prop.name, prop.major, prop.minor, PRAC_FLOATX_NAME);
    cudaStream_t st;
    cudaCheck(cudaStreamCreate(&st));
    g_cudnn = attention_cudnn_create(st, grow_workspace, &g_cudnn_ws);
    std::printf("cuDNN attention: %s%s\n", attention_cudnn_describe().c_str(),
                g_cudnn ? (attention_cudnn_deterministic(g_cudnn) ? ", deterministic backward" : ", non-deterministic")
                        : "");
    test_impl_env();

    // argument checks: unsupported head sizes are a user error, T = 0 is a no-op
    check(!attention_cuda_supports_head_size(8) && attention_cuda_supports_head_size(16) &&
              !attention_cuda_supports_head_size(40) && attention_cuda_supports_head_size(48) &&
              attention_cuda_supports_head_size(128) && !attention_cuda_supports_head_size(144),
          "supported head sizes: 16, 48 and 128 yes, 8, 40 and 144 no");
    {
        bool threw = false;
        try {
            attention_forward_cuda(nullptr, nullptr, nullptr, 1, 8, 80, 2, true, nullptr, st);  // HS = 40
        } catch (const UserError& ex) {
            threw = std::strstr(ex.what(), "head size 40") != nullptr;
        }
        check(threw, "head size 40 throws a UserError naming it");
        // T = 0: nothing to do, and its buffers are null: any access (a launch reading them) would crash here
        attention_forward_cuda(nullptr, nullptr, nullptr, 1, 0, 768, 12, true, nullptr, st);
        cudaCheck(cudaStreamSynchronize(st));
        check(cudaGetLastError() == cudaSuccess, "T = 0 returns without touching its (null) buffers");
    }

#if !defined(PRAC_CUDA_EMU)
    for (int HS : {48, 64, 128})
        for (int T : {1, 7, 64, 100, 256, 1024})
            for (int B : {1, 3})
                for (int NH : {1, 4, 12})
                    for (bool causal : {true, false}) test_shape(st, B, NH, HS, T, causal);
    for (int HS : {16, 32, 80, 96, 112})
        for (int T : {7, 100, 256})
            for (bool causal : {true, false}) test_shape(st, 3, 4, HS, T, causal);
#else
    // On the CPU execution layer (every thread a fiber, every mma emulated): every head size at a one-tile, a tail
    // and a multi-tile length, (B, NH) = (2, 2).
    for (int HS : {16, 32, 48, 64, 80, 96, 112, 128})
        for (int T : {1, 7, 100})
            for (bool causal : {true, false}) test_shape(st, 2, 2, HS, T, causal);
#endif
#if defined(PRAC_CUDA_EMU)
    test_lse_alignment(st);
#endif
    // peaky softmax rows, and the backward at T = 1024 (16 key tiles per query tile; emulated: one such shape, at
    // the smallest head size, since the race check's cost grows with every shared-memory access)
    for (bool causal : {true, false}) test_shape(st, 1, 2, 64, 100, causal, Pad::None, true);
#if !defined(PRAC_CUDA_EMU)
    for (bool causal : {true, false}) test_shape(st, 1, 1, 64, 1024, causal, Pad::None, false, true);
    test_shape(st, 1, 1, 128, 1024, true, Pad::None, true, true);
#else
    test_shape(st, 1, 1, 16, 1024, true, Pad::None, true, true);
#endif
    // key padding (kv_len): every pattern, causal and not, lengths inside one tile, at a tail, and past two tiles
    // (after the shapes above, which so draw the random inputs they drew before these existed)
#if !defined(PRAC_CUDA_EMU)
    for (int HS : {48, 64, 128})
        for (int T : {7, 100, 256})
            for (Pad pad : {Pad::Full, Pad::One, Pad::Partial, Pad::Mixed})
                for (bool causal : {false, true}) test_shape(st, 3, 4, HS, T, causal, pad);
    for (int B : {1, 4})
        for (bool causal : {false, true}) test_shape(st, B, 12, 64, 130, causal, Pad::Mixed);
    for (bool causal : {false, true}) test_padding_never_read(st, 4, 4, 64, 300, causal);
#else
    // emulated: the four patterns at a tail length (T = 100: one full key tile and a partial one), mixed rows at
    // T = 130 (three key tiles; rows end in the first, second and third) and T = 7, several B and head sizes
    for (Pad pad : {Pad::Full, Pad::One, Pad::Partial, Pad::Mixed})
        for (bool causal : {false, true}) test_shape(st, 2, 1, 32, 100, causal, pad);
    for (bool causal : {false, true}) {
        test_shape(st, 4, 1, 64, 130, causal, Pad::Mixed);
        test_shape(st, 3, 2, 48, 7, causal, Pad::Mixed);
        test_shape(st, 1, 2, 128, 100, causal, Pad::Partial);
        test_padding_never_read(st, 3, 1, 16, 130, causal);
    }
    // three heads over three whole key tiles (T = 192, a multiple of 64: no tail), causal and not
    for (bool causal : {false, true}) test_shape(st, 2, 3, 64, 192, causal);
#endif

    try {
        test_cudnn_extras(st);
    } catch (const std::exception& ex) {
        check_exception(ex);
    }
    if (cudnn_usable())
        std::printf("cudnn: %d shape(s) of the grid declined (listed above as [--]); graph builds took %.1f s\n",
                    g_cudnn_declined, g_cudnn_build_s);

#if !defined(PRAC_CUDA_EMU)
    time_attention(st);  // timings mean nothing on the CPU execution layer
#endif
    attention_cudnn_destroy(g_cudnn);
    if (g_cudnn_ws.p) cudaCheck(cudaFree(g_cudnn_ws.p));
    cudaCheck(cudaStreamDestroy(st));
    return gpu_test_summary("test_attention_cuda");
}
