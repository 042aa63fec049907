// The CPU backend: fp32 everywhere, OpenBLAS for matmuls, OpenMP for the rest. It binds the *_cpu twins to
// the op set the model orchestration calls (model/gpt2.h, model/llama.h). The CUDA backend supplies the
// same member functions over bf16 (or fp32) device memory.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>

#include "common/error.h"
#include "kernels/adam_mini.h"
#include "kernels/adamw.h"
#include "kernels/adamw8.h"
#include "kernels/attention.h"
#include "kernels/classifier.h"
#include "kernels/encoder.h"
#include "kernels/galore.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/muon.h"
#include "kernels/residual.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/rso.h"
#include "kernels/seqcls.h"
#include "kernels/swiglu.h"
#include "common/tensors.h"
#include "prac/prac.h"

struct CpuBackend {
    using act_t = float;   // activations and parameters
    using grad_t = float;  // parameter gradients
    static constexpr DType act_dtype = DType::F32;
    static constexpr DType grad_dtype = DType::F32;
    static constexpr bool master_weights = false;  // fp32 params need no fp32 master copy
    static constexpr const char* name = "cpu";

    // ---- memory: every buffer goes through alloc/free so live and peak bytes are exact ----
    size_t live_bytes = 0, peak_bytes = 0;
    void* alloc(size_t bytes) {
        if (bytes == 0) return nullptr;
        void* p = std::aligned_alloc(TENSOR_ALIGN, align_up(bytes, TENSOR_ALIGN));
        if (!p)
            fail("out of host memory allocating %.1f MiB\n---> HINT: a smaller --batch-size, or --seq-len "
                 "(finetune_roberta: --max-len); --plan --device cpu prints what a configuration needs",
                 bytes / 1048576.0);
        std::memset(p, 0, bytes);
        live_bytes += bytes;
        peak_bytes = live_bytes > peak_bytes ? live_bytes : peak_bytes;
        return p;
    }
    void free(void* p, size_t bytes) {
        if (!p) return;
        std::free(p);
        live_bytes -= bytes;
    }
    // a workspace a call allocated and freed itself (the PRAC refresh's, prac_refresh_cpu_workspace_bytes): in the
    // peak, as the plan counts it
    void note_workspace(size_t bytes) { peak_bytes = std::max(peak_bytes, live_bytes + bytes); }
    void upload(void* dst, const void* host_src, size_t bytes) { std::memcpy(dst, host_src, bytes); }
    void download(void* host_dst, const void* src, size_t bytes) { std::memcpy(host_dst, src, bytes); }
    void upload_async(void* dst, const void* host_src, size_t bytes) { std::memcpy(dst, host_src, bytes); }
    void zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }
    // the training loss of a step (CudaBackend keeps it on the device, read once per step):
    // loss_sum += (mean of losses (N) over the i with targets[i] >= 0, 0 when none) / divisor; loss_read returns
    // the sum and clears it. The mean is a double sum rounded to float once, then divided in float.
    float loss_sum = 0.0f;
    void loss_add(const float* losses, const int32_t* targets, int N, float divisor) {
        double sum = 0;
        int count = 0;
        for (int i = 0; i < N; i++)
            if (targets[i] >= 0) {
                sum += losses[i];
                count++;
            }
        loss_sum += (count ? (float)(sum / count) : 0.0f) / divisor;
    }
    float loss_read() {
        float l = loss_sum;
        loss_sum = 0.0f;
        return l;
    }
    void upload_f32(act_t* dst, const float* host_src, size_t n) { std::memcpy(dst, host_src, n * 4); }
    void download_f32(float* host_dst, const act_t* src, size_t n) { std::memcpy(host_dst, src, n * 4); }
    void synchronize() {}

    // ---- ops (see the *_cpu twins for shapes and semantics) ----
    void encoder_forward(act_t* out, const int32_t* tokens, const act_t* wte, const act_t* wpe, int B, int T, int C) {
        encoder_forward_cpu(out, tokens, wte, wpe, B, T, C);
    }
    void encoder_backward(grad_t* dwte, grad_t* dwpe, const act_t* dout, const int32_t* tokens, int B, int T,
                          int C) {
        encoder_backward_cpu(dwte, dwpe, dout, tokens, B, T, C);
    }
    void layernorm_forward(act_t* out, float* mean, float* rstd, const act_t* inp, const act_t* w, const act_t* b,
                           int N, int C, float eps) {
        layernorm_forward_cpu(out, mean, rstd, inp, w, b, N, C, eps);
    }
    void layernorm_backward(act_t* dinp, grad_t* dw, grad_t* db, const act_t* dout, const act_t* inp,
                            const act_t* w, const float* mean, const float* rstd, int N, int C) {
        layernorm_backward_cpu(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    }
    void rmsnorm_forward(act_t* out, float* rstd, const act_t* inp, const act_t* w, int N, int C, float eps) {
        rmsnorm_forward_cpu(out, rstd, inp, w, N, C, eps);
    }
    void rmsnorm_backward(act_t* dinp, grad_t* dw, const act_t* dout, const act_t* inp, const act_t* w,
                          const float* rstd, int N, int C) {
        rmsnorm_backward_cpu(dinp, dw, dout, inp, w, rstd, N, C);
    }
    // matmuls and PRAC ops: trailing row strides of the activation operands (0 = contiguous; kernels/matmul.h)
    void matmul_forward(act_t* out, const act_t* inp, const act_t* w, const act_t* bias, int N, int C, int OC,
                        int ld_out = 0, int ld_inp = 0) {
        matmul_forward_cpu(out, inp, w, bias, N, C, OC, ld_out, ld_inp);
    }
    void matmul_backward_input(act_t* dinp, const act_t* dout, const act_t* w, int N, int C, int OC, bool accumulate,
                               int ld_dinp = 0, int ld_dout = 0) {
        matmul_backward_input_cpu(dinp, dout, w, N, C, OC, accumulate, ld_dinp, ld_dout);
    }
    void matmul_backward_weight(grad_t* dw, grad_t* dbias, const act_t* dout, const act_t* inp, int N, int C, int OC,
                                int ld_dout = 0, int ld_inp = 0) {
        matmul_backward_weight_cpu(dw, dbias, dout, inp, N, C, OC, ld_dout, ld_inp);
    }
    void residual_forward(act_t* out, const act_t* a, const act_t* b, size_t n) { residual_forward_cpu(out, a, b, n); }
    void gelu_forward(act_t* out, const act_t* inp, size_t n) { gelu_forward_cpu(out, inp, n); }
    void gelu_backward(act_t* dinp, const act_t* inp, const act_t* dout, size_t n) {
        gelu_backward_cpu(dinp, inp, dout, n);
    }
    void gelu_erf_forward(act_t* out, const act_t* inp, size_t n) { gelu_erf_forward_cpu(out, inp, n); }
    void gelu_erf_backward(act_t* dinp, const act_t* inp, const act_t* dout, size_t n) {
        gelu_erf_backward_cpu(dinp, inp, dout, n);
    }
    void swiglu_forward(act_t* out, const act_t* gate, const act_t* up, size_t n) {
        swiglu_forward_cpu(out, gate, up, n);
    }
    void swiglu_backward(act_t* dgate, act_t* dup, const act_t* gate, const act_t* up, const act_t* dout, size_t n) {
        swiglu_backward_cpu(dgate, dup, gate, up, dout, n);
    }
    void rope_table(float* freqs, int T, int HS, float theta) { rope_table_cpu(freqs, T, HS, theta); }
    void rope_forward(act_t* qkv, const float* freqs, int B, int T, int C, int NH) {
        rope_cpu(qkv, freqs, B, T, C, NH, false);
    }
    void rope_backward(act_t* dqkv, const float* freqs, int B, int T, int C, int NH) {
        rope_cpu(dqkv, freqs, B, T, C, NH, true);
    }
    void check_attention_shape(int, int) const {}  // attention_cpu takes any head size
    // causal: decoders (the default); an encoder passes false and its kv_len (B) (kernels/attention.h)
    void attention_forward(act_t* out, float* lse, const act_t* qkv, int B, int T, int C, int NH, bool causal = true,
                           const int32_t* kv_len = nullptr) {
        attention_forward_cpu(out, lse, qkv, B, T, C, NH, causal, kv_len);
    }
    void attention_backward(act_t* dqkv, const act_t* dout, const act_t* qkv, const act_t* out, const float* lse,
                            int B, int T, int C, int NH, bool causal = true, const int32_t* kv_len = nullptr) {
        attention_backward_cpu(dqkv, dout, qkv, out, lse, B, T, C, NH, causal, kv_len);
    }
    // rows of the (N, V) logits processed per chunk by the fused classifier; its scratch for N rows (the model's
    // logits_chunk): a chunk, or the N rows of a smaller batch
    static constexpr int classifier_chunk = 256;
    static size_t classifier_scratch_floats(size_t N, int V) { return std::min((size_t)classifier_chunk, N) * V; }
    void classifier(float* losses, act_t* dinp, grad_t* dweight, const act_t* inp, const act_t* weight,
                    const int32_t* targets, int N, int C, int V, float grad_scale, float* scratch) {
        classifier_forward_backward_cpu(losses, dinp, dweight, inp, weight, targets, N, C, V, grad_scale, scratch,
                                        classifier_chunk);
    }
    // sequence-classification head (model/roberta.h): tanh, and the loss over B rows of logits (B, NL)
    void tanh_forward(act_t* out, const act_t* inp, size_t n) { tanh_forward_cpu(out, inp, n); }
    void tanh_backward(act_t* dinp, const act_t* out, const act_t* dout, size_t n) {
        tanh_backward_cpu(dinp, out, dout, n);
    }
    // logits (B, NL) fp32 = x (B, C) @ w (NL, C)^T + bias: the head's out_proj (fp32 here either way)
    void seqcls_logits(float* logits, const act_t* x, const act_t* w, const act_t* bias, int B, int C, int NL) {
        matmul_forward_cpu(logits, x, w, bias, B, C, NL);
    }
    void seqcls_loss(float* losses, act_t* dlogits, const float* logits, const int32_t* targets, const float* scores,
                     int B, int NL, float grad_scale) {
        seqcls_loss_cpu(losses, dlogits, logits, targets, scores, B, NL, grad_scale);
    }
    // ---- PRAC site ops (prac/prac.h) ----
    void prac_compress(act_t* xc, const act_t* x, const act_t* P, int N, int n, int r, int ld_x = 0) {
        prac_compress_cpu(xc, x, P, N, n, r, ld_x);
    }
    void prac_reconstruct(act_t* x, const act_t* xc, const act_t* P, int N, int n, int r, int ld_x = 0) {
        prac_reconstruct_cpu(x, xc, P, N, n, r, ld_x);
    }
    void prac_weight_grad(grad_t* dW, grad_t* dbias, const act_t* dY, const act_t* xc, const act_t* P, int N, int n,
                          int r, int OC, float* tmp, int ld_dy = 0) {
        prac_weight_grad_cpu(dW, dbias, dY, xc, P, N, n, r, OC, tmp, ld_dy);
    }
    void prac_fp8_quantize(uint8_t* q, float* scale, const act_t* xc, int N, int r, uint64_t row0,
                           const PracDrawKey& key) {
        prac_fp8_quantize_cpu(q, scale, xc, N, r, row0, key);
    }
    void prac_fp8_dequantize(act_t* xc, const uint8_t* q, const float* scale, int N, int r) {
        prac_fp8_dequantize_cpu(xc, q, scale, N, r);
    }
    PracRefreshResult prac_refresh(act_t* P, const act_t* x, int N, int n, const SiteDims& d, bool q1, bool q2,
                                   bool had_basis, const PracDrawKey& key, const GramReducer* reduce_gram,
                                   int ld_x = 0) {
        PracRefreshResult res = prac_refresh_cpu(P, x, N, n, d, q1, q2, had_basis, key, reduce_gram, ld_x);
        note_workspace(res.workspace_bytes);
        return res;
    }
    // --prac-refresh-overlap (ActSite::save / install): refresh a copy of P (n, r) in `pending`, to become P when
    // its steps are over. Here at once (the CUDA backend's runs beside the steps); end copies it into P. result: the
    // refresh's result, for a checkpoint (the copy is final); restore: a refresh a checkpoint held, already done.
    void prac_refresh_begin(act_t* pending, const act_t* P, const act_t* x, int N, int n, const SiteDims& d, bool q1,
                            bool q2, bool had_basis, const PracDrawKey& key, const GramReducer* reduce_gram,
                            int ld_x = 0) {
        std::copy(P, P + (size_t)n * d.r(), pending);
        pending_refreshes[pending] = prac_refresh_cpu(pending, x, N, n, d, q1, q2, had_basis, key, reduce_gram, ld_x);
        note_workspace(pending_refreshes[pending].workspace_bytes);
    }
    PracRefreshResult prac_refresh_end(act_t* P, const act_t* pending, size_t elems) {
        PracRefreshResult res = prac_refresh_result(pending);
        pending_refreshes.erase(pending);
        std::copy(pending, pending + elems, P);
        return res;
    }
    PracRefreshResult prac_refresh_result(const act_t* pending) {
        auto it = pending_refreshes.find(pending);
        if (it == pending_refreshes.end()) fail("internal error: a PRAC refresh result without prac_refresh_begin");
        return it->second;
    }
    void prac_refresh_restore(const act_t* pending, const PracRefreshResult& res) { pending_refreshes[pending] = res; }
    void prac_refresh_discard(const act_t* pending) { pending_refreshes.erase(pending); }
    std::map<const act_t*, PracRefreshResult> pending_refreshes;  // begun, not yet ended, by their pending copy
    double sum_squares(const grad_t* g, size_t n) { return sum_squares_cpu(g, n); }
    // master is unused on the CPU (params are fp32), and so is the salt (no stochastic rounding in fp32)
    void adamw_update(act_t* params, float* /*master*/, const grad_t* grads, float* m, float* v, size_t n, float lr,
                      float beta1, float beta2, float eps, float wd, int t, float grad_scale, uint64_t /*salt*/) {
        adamw_update_cpu(params, grads, m, v, n, lr, beta1, beta2, eps, wd, t, grad_scale);
    }
    void adamw8_update(act_t* params, float* /*master*/, const grad_t* grads, uint8_t* m_codes, uint8_t* v_codes,
                       float* m_absmax, float* v_absmax, size_t n, const AdamW8Codes* codes, float lr, float beta1,
                       float beta2, float eps, float wd, int t, float grad_scale, uint64_t /*salt*/) {
        adamw8_update_cpu(params, grads, m_codes, v_codes, m_absmax, v_absmax, n, *codes, lr, beta1, beta2, eps, wd,
                          t, grad_scale);
    }
    void adam_mini_update(act_t* params, float* /*master*/, const grad_t* grads, float* m, float* v, size_t n,
                          size_t block, float lr, float beta1, float beta2, float eps, float wd, int t,
                          float grad_scale, uint64_t /*salt*/) {
        adam_mini_update_cpu(params, grads, m, v, n, block, lr, beta1, beta2, eps, wd, t, grad_scale);
    }
    void muon_momentum(float* buf, float* u, const grad_t* g, size_t n, float mu, float grad_scale, bool nesterov) {
        muon_momentum_cpu(buf, u, g, n, mu, grad_scale, nesterov);
    }
    // X: count matrices (rows, cols) one after the other, each orthogonalized alone (work: one matrix's)
    void newton_schulz(float* X, int rows, int cols, float* work, int steps, int count = 1) {
        for (int i = 0; i < count; i++) newton_schulz_cpu(X + (size_t)i * rows * cols, rows, cols, work, steps);
    }
    void muon_apply(act_t* params, float* /*master*/, const float* O, size_t n, float lr, float wd, float step,
                    uint64_t /*salt*/) {
        muon_apply_cpu(params, O, n, lr, wd, step);
    }
    int galore_refresh(float* P, const grad_t* G, int m, int n, int r, bool right) {
        return galore_projection_cpu(P, G, m, n, r, right);
    }
    void galore_project(float* R, const grad_t* G, const float* P, int m, int n, int r, bool right, float grad_scale) {
        galore_project_cpu(R, G, P, m, n, r, right, grad_scale);
    }
    void galore_adam(float* R, float* m1, float* m2, size_t n, float b1, float b2, float eps) {
        galore_adam_cpu(R, m1, m2, n, b1, b2, eps);
    }
    void galore_apply(act_t* W, float* /*master*/, const float* N, const float* P, int m, int n, int r, bool right,
                      float step, float decay, uint64_t /*salt*/) {
        galore_apply_cpu(W, N, P, m, n, r, right, step, decay);
    }
    void rso_prox(float* R, const float* B, size_t n, float prox) { rso_prox_cpu(R, B, n, prox); }
    void rso_track(float* B, const float* N, size_t n, float step) { rso_track_cpu(B, N, n, step); }
};
