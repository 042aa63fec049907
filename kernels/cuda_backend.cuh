// The CUDA backend: the op set of kernels/cpu_backend.h over device memory, activations, parameters and gradients
// in floatX (bf16, or fp32 in the PRAC_PRECISION=FP32 build), statistics and optimizer state in fp32, fp32
// accumulation everywhere. Each op forwards to its kernel family (kernels/*.cuh, prac/prac_cuda.cuh), whose CPU
// twin is named in that file. Everything runs on one stream; every buffer goes through alloc/free so live and
// peak bytes are exact.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_common.cuh"
#include "common/error.h"
#include "kernels/adamw.cuh"
#include "kernels/adamw8.h"  // AdamW8Codes, ADAMW8_BLOCK
#include "kernels/attention.cuh"
#include "kernels/classifier.cuh"
#include "kernels/encoder.cuh"
#include "kernels/gelu.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/matmul.cuh"
#include "kernels/residual.cuh"
#include "kernels/rmsnorm.cuh"
#include "kernels/rope.cuh"
#include "kernels/seqcls.cuh"
#include "kernels/swiglu.cuh"
#include "common/tensors.h"
#include "kernels/cuda_sizes.h"  // CUBLASLT_WORKSPACE_BYTES, classifier_cuda_scratch_floats
#include "prac/prac.h"
#include "prac/prac_cuda.cuh"

// fp32 -> floatX on the device (Muon's bf16 Newton-Schulz operands, kernels/optim_cuda.cu)
__global__ void f32_to_floatx_kernel(floatX* dst, const float* src, size_t n);

struct CudaBackend {
    using act_t = floatX;
    using grad_t = floatX;
#if defined(PRAC_FP32)
    static constexpr DType act_dtype = DType::F32;
    static constexpr bool master_weights = false;
#else
    static constexpr DType act_dtype = DType::BF16;
    static constexpr bool master_weights = true;  // fp32 master weights, bf16 params by stochastic rounding
#endif
    static constexpr DType grad_dtype = act_dtype;
    // floats of the fused classifier's logits scratch for N rows (the model's logits_chunk)
    static size_t classifier_scratch_floats(size_t N, int V) { return classifier_cuda_scratch_floats(N, V); }
    static constexpr const char* name = "cuda";

    int device = 0;
    cudaStream_t stream = nullptr;  // one priority above the lowest (the refresh worker's)
    int lowest_priority = 0;        // cudaDeviceGetStreamPriorityRange's least
    cublasHandle_t cublas = nullptr;
    cusolverDnHandle_t cusolver = nullptr;
    CublasLt* lt = nullptr;
    uint64_t seed = 0;  // stochastic rounding: mixed with the step and the tensor's offset

    size_t live_bytes = 0, peak_bytes = 0;
    size_t device_free_at_start = 0, device_total = 0;

    // library scratch, grown on demand through alloc (so it counts in live/peak bytes)
    void* scratch = nullptr;
    size_t scratch_bytes = 0;

    // attention: which implementation (PRAC_ATTENTION=auto|cudnn|mma|simt, read once in the constructor; auto:
    // cuDNN's fused SDPA where the build and the shape allow, else the hand-written kernels) and the cuDNN context
    // (handle on `stream`, graphs cached per shape, workspace from scratch_at_least; null without cuDNN attention)
    AttentionImpl attention_impl = AttentionImpl::Auto;
    AttentionCudnn* attention_cudnn = nullptr;
    bool attention_calls_said = false;  // say_attention_calls_once has printed its line

    // PRAC refresh workspace bytes per site shape (n, r1, r2, subspace block): cuSOLVER's size queries, once per shape
    std::map<std::tuple<int, int, int, int>, size_t> refresh_workspace;

    // The training step's host round trips (llm.c keeps one small copy per step): upload_async stages host data in
    // pinned buffers (each reused once the event of its last copy has passed, found by cudaEventQuery, which never
    // waits); loss_add sums on the device into loss_sum, which loss_read copies into pinned loss_host once per step.
    struct HostStaging {
        void* host = nullptr;  // pinned (cudaMallocHost)
        size_t bytes = 0;
        cudaEvent_t copied = nullptr;  // recorded after the last copy out of it
        uint64_t last_use = 0;
    };
    std::vector<HostStaging> staging;
    uint64_t staging_uses = 0;
    static constexpr size_t MAX_STAGING_BUFFERS = 64;  // beyond, the least recently used one is waited for
    float* loss_sum = nullptr;   // (1) device
    float* loss_host = nullptr;  // (1) pinned host

    explicit CudaBackend(int dev, uint64_t run_seed);
    ~CudaBackend();
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    // ---- memory ----
    void* alloc(size_t bytes);  // zeroed; out of memory -> UserError naming what fits
    void free(void* p, size_t bytes);
    void* scratch_at_least(size_t bytes);
    static void* scratch_for_library(void* self, size_t bytes) {  // AttentionWorkspaceFn over scratch_at_least
        return static_cast<CudaBackend*>(self)->scratch_at_least(bytes);
    }
    void upload(void* dst, const void* host_src, size_t bytes) {
        cudaCheck(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaStreamSynchronize(stream));
    }
    void download(void* host_dst, const void* src, size_t bytes) {
        cudaCheck(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream));
        cudaCheck(cudaStreamSynchronize(stream));
    }
    // upload without waiting: host_src is copied into a pinned staging buffer (so the caller may reuse it at
    // once) and the device copy is queued on the stream (the micro-batches' tokens)
    void upload_async(void* dst, const void* host_src, size_t bytes);
    // loss_sum += (mean of losses (N) over the i with targets[i] >= 0, or 0 when there is none) / divisor, on the
    // device (twin: CpuBackend::loss_add); loss_read returns the sum and clears it: one 4-byte copy and one wait
    void loss_add(const float* losses, const int32_t* targets, int N, float divisor);
    float loss_read();
    void zero(void* p, size_t bytes) { cudaCheck(cudaMemsetAsync(p, 0, bytes, stream)); }
    void upload_f32(act_t* dst, const float* host_src, size_t n);
    void download_f32(float* host_dst, const act_t* src, size_t n);
    void synchronize() { cudaCheck(cudaStreamSynchronize(stream)); }

    // ---- ops (same signatures as CpuBackend) ----
    void encoder_forward(act_t* out, const int32_t* tokens, const act_t* wte, const act_t* wpe, int B, int T, int C) {
        encoder_forward_cuda(out, tokens, wte, wpe, B, T, C, stream);
    }
    void encoder_backward(grad_t* dwte, grad_t* dwpe, const act_t* dout, const int32_t* tokens, int B, int T, int C) {
        size_t s = encoder_backward_scratch_bytes(B, T);
        encoder_backward_cuda(dwte, dwpe, dout, tokens, B, T, C, scratch_at_least(s), s, stream);
    }
    void layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w, const act_t* b,
                           int N, int C, float eps) {
        layernorm_forward_cuda(out, mean, rstd, inp, w, b, N, C, eps, stream);
    }
    void layernorm_backward(act_t* dinp, grad_t* dw, grad_t* db, const act_t* dout, const act_t* inp,
                            const act_t* w, const float* mean, const float* rstd, int N, int C) {
        size_t s = layernorm_backward_scratch_bytes(N, C);
        layernorm_backward_cuda(dinp, dw, db, dout, inp, w, mean, rstd, N, C, scratch_at_least(s), s, stream);
    }
    void rmsnorm_forward(act_t* out, float* rstd, const act_t* inp, const act_t* w, int N, int C, float eps) {
        rmsnorm_forward_cuda(out, rstd, inp, w, N, C, eps, stream);
    }
    void rmsnorm_backward(act_t* dinp, grad_t* dw, const act_t* dout, const act_t* inp, const act_t* w,
                          const float* rstd, int N, int C) {
        size_t s = rmsnorm_backward_scratch_bytes(N, C);
        rmsnorm_backward_cuda(dinp, dw, dout, inp, w, rstd, N, C, scratch_at_least(s), s, stream);
    }
    // matmuls and PRAC ops: trailing row strides of the activation operands (0 = contiguous; kernels/matmul.h)
    void matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias, int N, int C, int OC,
                        int ld_out = 0, int ld_inp = 0) {
        matmul_forward_cuda(out, inp, w, bias, N, C, OC, *lt, stream, ld_out, ld_inp);
    }
    void matmul_backward_input(act_t* dinp, const act_t* dout, const act_t* w, int N, int C, int OC, bool accumulate,
                               int ld_dinp = 0, int ld_dout = 0) {
        matmul_backward_input_cuda(dinp, dout, w, N, C, OC, accumulate, *lt, stream, ld_dinp, ld_dout);
    }
    void matmul_backward_weight(grad_t* dw, grad_t* dbias, const act_t* dout, const act_t* inp, int N, int C, int OC,
                                int ld_dout = 0, int ld_inp = 0) {
        matmul_backward_weight_cuda(dw, dbias, dout, inp, N, C, OC, nullptr, *lt, stream, ld_dout, ld_inp);
    }
    void residual_forward(act_t* out, const act_t* a, const act_t* b, size_t n) {
        residual_forward_cuda(out, a, b, n, stream);
    }
    void gelu_forward(act_t* out, const act_t* inp, size_t n) { gelu_forward_cuda(out, inp, n, stream); }
    void gelu_backward(act_t* dinp, const act_t* inp, const act_t* dout, size_t n) {
        gelu_backward_cuda(dinp, inp, dout, n, stream);
    }
    void gelu_erf_forward(act_t* out, const act_t* inp, size_t n) { gelu_erf_forward_cuda(out, inp, n, stream); }
    void gelu_erf_backward(act_t* dinp, const act_t* inp, const act_t* dout, size_t n) {
        gelu_erf_backward_cuda(dinp, inp, dout, n, stream);
    }
    void swiglu_forward(act_t* out, const act_t* gate, const act_t* up, size_t n) {
        swiglu_forward_cuda(out, gate, up, n, stream);
    }
    void swiglu_backward(act_t* dgate, act_t* dup, const act_t* gate, const act_t* up, const act_t* dout, size_t n) {
        swiglu_backward_cuda(dgate, dup, gate, up, dout, n, stream);
    }
    // sequence-classification head (model/roberta.h)
    void tanh_forward(act_t* out, const act_t* inp, size_t n) { tanh_forward_cuda(out, inp, n, stream); }
    void tanh_backward(act_t* dinp, const act_t* out, const act_t* dout, size_t n) {
        tanh_backward_cuda(dinp, out, dout, n, stream);
    }
    void seqcls_logits(float* logits, const act_t* x, const act_t* w, const act_t* bias, int B, int C, int NL) {
        seqcls_logits_cuda(logits, x, w, bias, B, C, NL, stream);
    }
    void seqcls_loss(float* losses, act_t* dlogits, const float* logits, const int32_t* targets, const float* scores,
                     int B, int NL, float grad_scale) {
        seqcls_loss_cuda(losses, dlogits, logits, targets, scores, B, NL, grad_scale, stream);
    }
    // the table is made on the host by the CPU twin and uploaded (fp32 either way)
    void rope_table(float* freqs, int T, int HS, float theta) {
        std::vector<float> host((size_t)T * HS);
        rope_table_cpu(host.data(), T, HS, theta);
        upload(freqs, host.data(), host.size() * sizeof(float));
    }
    void rope_forward(act_t* qkv, const float* freqs, int B, int T, int C, int NH) {
        rope_cuda(qkv, freqs, B, T, C, NH, false, stream);
    }
    void rope_backward(act_t* dqkv, const float* freqs, int B, int T, int C, int NH) {
        rope_cuda(dqkv, freqs, B, T, C, NH, true, stream);
    }
    // Prints, the first time it is called (a run calls it after each step), the attention kernels this process has
    // run: "attention kernels so far (forward and backward): cuDNN 0, MMA 8, SIMT 0 calls (PRAC_ATTENTION=auto)".
    // Which kernels PRAC_ATTENTION=auto chose is per call (cuDNN may decline a shape): nothing else shows it.
    void say_attention_calls_once() {
        if (attention_calls_said) return;
        attention_calls_said = true;
        const AttentionCalls c = attention_cuda_calls();
        std::printf("attention kernels so far (forward and backward): cuDNN %lld, MMA %lld, SIMT %lld calls "
                    "(PRAC_ATTENTION=%s)\n", c.cudnn, c.mma, c.simt, attention_impl_name(attention_impl));
    }
    // Called when a model is built, before any allocation: the hand-written kernels (the fallback whenever cuDNN
    // declines a shape) must have this head size.
    void check_attention_shape(int C, int NH) const {
        CHECK_USER(attention_cuda_supports_head_size(C / NH),
                   "head size %d (n_embd %d / n_head %d): the CUDA backend's attention takes head sizes 16, 32, 48, "
                   "64, 80, 96, 112 and 128\n---> HINT: pick n_embd / n_head among those, or run on the CPU backend "
                   "(--device cpu), which takes any head size",
                   C / NH, C, NH);
    }
    // causal: decoders (the default); an encoder passes false and its kv_len (B), here in DEVICE memory
    // (kernels/attention.cuh; the CPU backend's is on the host)
    void attention_forward(act_t* out, float* lse, const act_t* qkv, int B, int T, int C, int NH, bool causal = true,
                           const int32_t* kv_len = nullptr) {
        attention_forward_cuda(out, lse, qkv, B, T, C, NH, causal, kv_len, stream, attention_impl, attention_cudnn);
    }
    // (the D scratch is taken first; if cuDNN runs it grows the same scratch for its workspace and D is unused)
    void attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out, const float* lse,
                            int B, int T, int C, int NH, bool causal = true, const int32_t* kv_len = nullptr) {
        size_t s = attention_backward_scratch_floats(B, T, NH) * sizeof(float);
        attention_backward_cuda(dqkv, dout, qkv, out, lse, B, T, C, NH, causal, kv_len, (float*)scratch_at_least(s),
                                stream, attention_impl, attention_cudnn);
    }
    void classifier(float* losses, act_t* dinp, grad_t* dweight, const act_t* inp, const act_t* weight,
                    const int32_t* targets, int N, int C, int V, float grad_scale, float* logits_scratch) {
        classifier_cuda(losses, dinp, dweight, inp, weight, targets, N, C, V, grad_scale, logits_scratch, *lt, stream);
    }
    double sum_squares(const grad_t* g, size_t n) {
        return sum_squares_cuda(g, n, scratch_at_least(SUM_SQUARES_SCRATCH_BYTES), SUM_SQUARES_SCRATCH_BYTES, stream);
    }
    // salt: the tensor's offset in the parameter buffer, so every tensor and step draws its own rounding noise
    void adamw_update(act_t* params, float* master, const grad_t* grads, float* m, float* v, size_t n, float lr,
                      float beta1, float beta2, float eps, float wd, int t, float grad_scale, uint64_t salt) {
        uint64_t s = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)t) ^ (salt * 0xBF58476D1CE4E5B9ull);
        adamw_update_cuda(params, master, grads, m, v, n, lr, beta1, beta2, eps, wd, t, grad_scale, s, stream);
    }

    // ---- Muon, Adam-mini, GaLore, RSO (train/optim_*.h): defined in kernels/optim_cuda.cu, whose header
    // kernels/optim_cuda.cuh names each CPU twin and the stochastic-rounding seeds. Same argument lists as the
    // twins, plus master (fp32 master weights or null) and salt (element offset) where parameters are written.
    void muon_momentum(float* buf, float* u, const grad_t* g, size_t n, float mu, float grad_scale, bool nesterov);
    // count matrices (rows, cols) one after the other, with count * newton_schulz_work_numel(rows, cols) of work
    void newton_schulz(float* X, int rows, int cols, float* work, int steps, int count = 1);
    void muon_apply(act_t* params, float* master, const float* O, size_t n, float lr, float wd, float step,
                    uint64_t salt);
    void adam_mini_update(act_t* params, float* master, const grad_t* grads, float* m, float* v, size_t n,
                          size_t block, float lr, float beta1, float beta2, float eps, float wd, int t,
                          float grad_scale, uint64_t salt);
    // AdamW with 8-bit block-wise states (kernels/adamw8.h); codes: device memory
    void adamw8_update(act_t* params, float* master, const grad_t* grads, uint8_t* m_codes, uint8_t* v_codes,
                       float* m_absmax, float* v_absmax, size_t n, const AdamW8Codes* codes, float lr, float beta1,
                       float beta2, float eps, float wd, int t, float grad_scale, uint64_t salt);
    int galore_refresh(float* P, const grad_t* G, int m, int n, int r, bool right);
    void galore_project(float* R, const grad_t* G, const float* P, int m, int n, int r, bool right, float grad_scale);
    void galore_adam(float* R, float* m1, float* m2, size_t n, float b1, float b2, float eps);
    void galore_apply(act_t* W, float* master, const float* N, const float* P, int m, int n, int r, bool right,
                      float step, float decay, uint64_t salt);
    // RSO (train/optim_rso.h) runs GaLore's project/adam/apply (right side) plus these (twins: kernels/rso.h)
    void rso_prox(float* R, const float* B, size_t n, float prox);
    void rso_track(float* B, const float* N, size_t n, float step);

    // ---- PRAC site ops ----
    PracCudaHandles prac_handles() const { return PracCudaHandles{stream, cublas, cusolver}; }
    void prac_compress(act_t* xc, const act_t* x, const act_t* P, int N, int n, int r, int ld_x = 0) {
        prac_compress_cuda(xc, x, P, N, n, r, prac_handles(), ld_x);
    }
    void prac_reconstruct(act_t* x, const act_t* xc, const act_t* P, int N, int n, int r, int ld_x = 0) {
        prac_reconstruct_cuda(x, xc, P, N, n, r, prac_handles(), ld_x);
    }
    void prac_weight_grad(grad_t* dW, grad_t* dbias, const act_t* dY, const act_t* xc, const act_t* P, int N, int n,
                          int r, int OC, float* tmp, int ld_dy = 0) {
        prac_weight_grad_cuda(dW, dbias, dY, xc, P, N, n, r, OC, tmp, prac_handles(), ld_dy);
    }
    void prac_fp8_quantize(uint8_t* q, float* scale, const act_t* xc, int N, int r, uint64_t row0,
                           const PracDrawKey& key) {
        prac_fp8_quantize_cuda(q, scale, xc, N, r, row0, key, stream);
    }
    void prac_fp8_dequantize(act_t* xc, const uint8_t* q, const float* scale, int N, int r) {
        prac_fp8_dequantize_cuda(xc, q, scale, N, r, stream);
    }
    PracRefreshResult prac_refresh(act_t* P, const act_t* x, int N, int n, const SiteDims& d, bool q1, bool q2,
                                   bool had_basis, const PracDrawKey& key, const GramReducer* reduce_gram,
                                   int ld_x = 0) {
        // both refresh methods run on the device (prac_refresh_cuda); reduce_gram (--prac-shared-subspace) gets the
        // device Gram matrix: the trainer binds it to NCCL
        size_t s = refresh_workspace_bytes(n, d);
        return prac_refresh_cuda(P, x, N, n, d, q1, q2, had_basis, key, prac_handles(), scratch_at_least(s), s,
                                 reduce_gram, ld_x);
    }
    size_t refresh_workspace_bytes(int n, const SiteDims& d) {
        size_t& s = refresh_workspace[{n, d.r1, d.r2, d.block(n)}];
        // (the cuBLASLt workspace stands in for the matrices the queries never touch: an allocation of their own,
        // freed, waited for a refresh solve in flight)
        if (s == 0) s = prac_refresh_workspace_bytes(cusolver, n, d, lt->workspace);
        return s;
    }

    // --prac-refresh-overlap (ActSite::save / install_refreshes; twin: CpuBackend's). begin copies P (n, r) into
    // `pending` and forms the Gram matrix of x on the step's stream (x is a transient buffer the step reuses), then
    // hands the solve to the refresh worker: a thread with its own stream, handles and workspace, which refreshes
    // `pending` while the step goes on (prac_refresh_cuda with x null). One solve at a time: a second begin first
    // waits for the first. end waits for pending's solve (if it is still running) and copies it into P on the
    // step's stream. result waits too, for a checkpoint of the copy; restore registers one a checkpoint held;
    // discard waits and forgets. In the CPU execution layer, where stream work runs as it is issued, the solve runs
    // when it is waited for, on the calling thread, so the step's work in between has run before it, as on a GPU that
    // is slow to get to it; with PRAC_EMU_REFRESH_THREAD=1 it runs on the worker thread, as on a GPU.
    void prac_refresh_begin(act_t* pending, const act_t* P, const act_t* x, int N, int n, const SiteDims& d, bool q1,
                            bool q2, bool had_basis, const PracDrawKey& key, const GramReducer* reduce_gram,
                            int ld_x = 0);
    PracRefreshResult prac_refresh_end(act_t* P, const act_t* pending, size_t elems);
    PracRefreshResult prac_refresh_result(const act_t* pending);  // waits; the copy is final (a checkpoint)
    void prac_refresh_restore(const act_t* pending, const PracRefreshResult& res) {
        refresh_worker.done[pending] = res;
    }
    void prac_refresh_discard(const act_t* pending);  // waits, forgets (a model that goes away)
    struct RefreshWorker {
        cudaStream_t stream = nullptr;  // non-blocking, the lowest priority (the step's is one above)
        cublasHandle_t cublas = nullptr;
        cusolverDnHandle_t cusolver = nullptr;
        cudaEvent_t inputs_ready = nullptr;  // recorded on the step's stream after the pending copy and the Gram
        void* workspace = nullptr;           // prac_refresh_workspace_bytes of the widest site so far
        size_t workspace_bytes = 0;
        const act_t* pending = nullptr;  // the solve in flight (job) refreshes this copy
        std::future<PracRefreshResult> job;
        std::map<const act_t*, PracRefreshResult> done;  // solves waited for, not yet ended, by their copy
    } refresh_worker;
    void refresh_worker_wait();  // the solve in flight, if any, into refresh_worker.done
};
