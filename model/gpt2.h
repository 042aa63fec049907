// GPT-2: parameters, activation arena, forward and backward. Written once for every backend: the backend
// (kernels/cpu_backend.h, kernels/cuda_backend.cuh) supplies the ops; this file decides their order and what
// is saved for backward where (docs/DESIGN.md sections 3.1, 4).
//
// Shapes: B batch, T sequence, N = B*T rows, C channels, NH heads, L layers, F = 4C MLP width, V vocab,
// Vp padded vocab. Per-layer tensors are stacked with the layer index first.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/config.h"
#include "common/tensors.h"
#include "model/weights.h"
#include "model/sites.h"  // the sites: SiteIndex, apply_recompute, wire_sites
#include "common/safetensors.h"  // safetensors_open (the HF name prefix of --init-from)
#include "common/strings.h"      // join
#include "model/model_common.h"  // ActivationArena, load_hf_weights, ...

template <typename T>
struct GPT2Weights {
    T* wte;       // (Vp, C)  token embedding, also the LM head (tied)
    T* wpe;       // (maxT, C) position embedding
    T* ln1w;      // (L, C)
    T* ln1b;      // (L, C)
    T* qkvw;      // (L, 3C, C) rows: q, k, v
    T* qkvb;      // (L, 3C)
    T* attprojw;  // (L, C, C)
    T* attprojb;  // (L, C)
    T* ln2w;      // (L, C)
    T* ln2b;      // (L, C)
    T* fcw;       // (L, F, C)
    T* fcb;       // (L, F)
    T* fcprojw;   // (L, C, F)
    T* fcprojb;   // (L, C)
    T* lnfw;      // (C)
    T* lnfb;      // (C)
};

template <class Backend>
struct GPT2 {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;

    ModelConfig cfg;
    Backend& be;

    // parameters and gradients: one buffer each, same layout (param_specs)
    std::vector<ParamSpec> param_specs;
    size_t num_parameters = 0;    // real parameters
    size_t param_buffer_numel = 0;  // with alignment padding
    act_t* params_memory = nullptr;
    grad_t* grads_memory = nullptr;
    GPT2Weights<act_t> params;
    GPT2Weights<grad_t> grads;

    // activation arena for micro-batch B x T (allocate_activations)
    int B = 0, T = 0;
    struct Activations {
        int32_t* inputs;      // (N) token ids
        int32_t* targets;     // (N) next-token ids, -1 = ignored
        float* ln1_mean;      // (L, N)
        float* ln1_rstd;      // (L, N)
        act_t* qkv;           // (L, N, 3C) attention inputs (exact)
        act_t* atty;          // (L, N, C), or (N, C) with --recompute-attention: attention output O, attproj's input
        float* lse;           // (L, B, NH, T) log-sum-exp of each attention row, layers lse_layer_stride apart
        float* ln2_mean;      // (L, N)
        float* ln2_rstd;      // (L, N)
        act_t* lnf;           // (N, C)     final LN output: the LM head's input (consumed at once, see forward)
        float* lnf_mean;      // (N)
        float* lnf_rstd;      // (N)
        float* losses;        // (N) per-token cross-entropy
        float* logits_chunk;  // (min(chunk, N), V) classifier scratch (CUDA: rows of an aligned ld)
        act_t* scratch_btc;   // (N, C) branch outputs in forward; input gradients in backward
        act_t* dresid;        // (N, C) gradient of the residual stream, accumulated by every branch
        act_t* scratch_wide;  // (N, max(3C, F)) gradients of qkv / fch
        // transient full-width buffers of compressed sites (size 0 when their sites are not compressed, or when
        // they live in backward scratch: alias_transients, model/sites.h)
        act_t* t_resid;       // (N, C) residual stream: block input, x + attention, block output (in place)
        act_t* t_ln;          // (N, C) LN1 / LN2 output                                  (else in dresid)
        act_t* t_mlp_in;      // (N, F) GeLU input
        act_t* t_mlp_out;     // (N, F) GeLU output                                       (else in scratch_wide)
        float* prac_tmp;      // (max OC, max r) factored weight-gradient scratch
        act_t* prac_fp8_block;  // (min(N, 8192), max r) --prac-storage fp8: rows of X·P (prac/site.h)
    } acts;
    ActivationArena arena;  // the Activations above and the PRAC bases, laid out from activation_specs

    // Saved-for-backward tensors that PRAC may compress (docs/DESIGN.md section 4.2); per layer:
    //   resid      LN1 input (the residual stream; one more slot holds the final LN's input) nonlinear
    //   ln1        LN1 output, the qkv matmul's input (one site shared by q, k, v)              linear
    //   resid_mid  LN2 input (x + attention branch)                                             nonlinear
    //   ln2        LN2 output, the fc matmul's input                                            linear
    //   fch        GeLU input (N, F)                                                            nonlinear
    //   fch_gelu   GeLU output, the fcproj matmul's input                                       linear
    // q, k, v, O and LSE stay exact (attention backward needs them; O is also attproj's input, and may be
    // recomputed from q, k, v instead: --recompute-attention).
    enum {  // the sites' order is model/sites.h's SiteIndex (wire_sites and RSO rely on it)
        RESID = SITE_RESID, LN1 = SITE_LN1, RESID_MID = SITE_RESID_MID, LN2 = SITE_LN2, FCH = SITE_FCH,
        FCH_GELU = SITE_ACT_OUT
    };
    PracOptions prac;
    std::vector<ActSite<Backend>> sites;
    PracSchedule sched;
    PracPendingPool<act_t> pending_bases;  // --prac-refresh-overlap (prac/site.h)
    FILE* prac_log = stdout;
    ActivationDump dump;

    Recompute recompute;  // what backward recomputes instead of saving (model/sites.h)
    bool alias_transients = true;  // PRAC's transient buffers in backward scratch (model/sites.h); set before
                                   // allocate_activations (off: the bitwise tests' reference)

    // Data parallelism (train/grad_sync.h): when set, backward() calls it with l as soon as layer l's parameter
    // gradients are complete (l = L-1 down to 0), then once with -1 at its end, when the tensors outside the layers
    // (embeddings, final norm, head: layer_param_ranges' last entry) are complete. Whatever it starts (a
    // collective on another stream) overlaps the rest of backward; it must not touch other layers' gradients.
    // Null (the default): no calls.
    std::function<void(int layer)> on_layer_grads;

    GPT2(Backend& backend, const ModelConfig& config, const PracOptions& prac_options = PracOptions(),
         Recompute recompute_options = Recompute())
        : cfg(config), be(backend), prac(prac_options), recompute(recompute_options) {
        be.check_attention_shape(cfg.channels, cfg.num_heads);
        int Vp = cfg.padded_vocab_size, C = cfg.channels, L = cfg.num_layers, F = cfg.hidden;
        size_t maxT = cfg.max_seq_len;
        param_buffer_numel = layout_params(
            {
                {"wte", (size_t)Vp * C, true},
                {"wpe", maxT * C, true},
                {"ln1w", (size_t)L * C, false},
                {"ln1b", (size_t)L * C, false},
                {"qkvw", (size_t)L * 3 * C * C, true},
                {"qkvb", (size_t)L * 3 * C, false},
                {"attprojw", (size_t)L * C * C, true},
                {"attprojb", (size_t)L * C, false},
                {"ln2w", (size_t)L * C, false},
                {"ln2b", (size_t)L * C, false},
                {"fcw", (size_t)L * F * C, true},
                {"fcb", (size_t)L * F, false},
                {"fcprojw", (size_t)L * C * F, true},
                {"fcprojb", (size_t)L * C, false},
                {"lnfw", (size_t)C, false},
                {"lnfb", (size_t)C, false},
            },
            param_specs);
        num_parameters = count_params(param_specs);
        params_memory = (act_t*)be.alloc(param_buffer_numel * sizeof(act_t));
        grads_memory = (grad_t*)be.alloc(param_buffer_numel * sizeof(grad_t));
        point_weights(params, params_memory);
        point_weights(grads, grads_memory);
        sites = {
            make_site<Backend>("resid", RESID, SiteClass::NONLINEAR, C, L, L + 1, prac),
            make_site<Backend>("ln1", LN1, SiteClass::LINEAR, C, L, L, prac),
            make_site<Backend>("resid_mid", RESID_MID, SiteClass::NONLINEAR, C, L, L, prac),
            make_site<Backend>("ln2", LN2, SiteClass::LINEAR, C, L, L, prac),
            make_site<Backend>("fch", FCH, SiteClass::NONLINEAR, F, L, L, prac),
            make_site<Backend>("fch_gelu", FCH_GELU, SiteClass::LINEAR, F, L, L, prac),
        };
        sched.units = (int)sites.size() * L;  // staggered refresh phases (prac/site.h PracSchedule)
        apply_recompute(sites, recompute.level, FCH_GELU, LN1, LN2, RESID, RESID_MID);
    }
    ~GPT2() {
        discard_refreshes(be, sites);  // solves still in flight write into the arena: wait for them first
        arena.release(be);
        be.free(grads_memory, param_buffer_numel * sizeof(grad_t));
        be.free(params_memory, param_buffer_numel * sizeof(act_t));
    }
    GPT2(const GPT2&) = delete;
    GPT2& operator=(const GPT2&) = delete;

    template <typename W>
    void point_weights(GPT2Weights<W>& w, W* base) {
        W** ptrs[] = {&w.wte,      &w.wpe,      &w.ln1w, &w.ln1b, &w.qkvw,    &w.qkvb,    &w.attprojw, &w.attprojb,
                      &w.ln2w,     &w.ln2b,     &w.fcw,  &w.fcb,  &w.fcprojw, &w.fcprojb, &w.lnfw,     &w.lnfb};
        for (size_t i = 0; i < param_specs.size(); i++) *ptrs[i] = base + param_specs[i].offset;
    }

    // The arena as a list of specs (and the PRAC bases as a second list): the memory planner reads the same
    // lists. Sites contribute their full stacks, or their packed projections and bases.
    std::vector<TensorSpec> activation_specs(int B, int T, std::vector<TensorSpec>& bases) {
        size_t N = (size_t)B * T, C = cfg.channels, L = cfg.num_layers, F = cfg.hidden, NH = cfg.num_heads;
        DType act = Backend::act_dtype, f32 = DType::F32;
        Activations& a = acts;
        auto& S = sites;
        const bool alias = alias_transients;
        using M = MemCategory;
        std::vector<TensorSpec> specs = {
            {"inputs", (void**)&a.inputs, N, DType::I32, M::INPUTS},
            {"targets", (void**)&a.targets, N, DType::I32, M::INPUTS},
            {"ln1_mean", (void**)&a.ln1_mean, L * N, f32, M::SAVED_EXACT},
            {"ln1_rstd", (void**)&a.ln1_rstd, L * N, f32, M::SAVED_EXACT},
            {"qkv", (void**)&a.qkv, L * N * 3 * C, act, M::SAVED_EXACT},
            {"atty", (void**)&a.atty, recompute.attention_out ? N * C : L * N * C, act,
             recompute.attention_out ? M::TRANSIENT : M::SAVED_EXACT},
            {"lse", (void**)&a.lse, L * lse_layer_stride(N, NH), f32, M::SAVED_EXACT},
            {"ln2_mean", (void**)&a.ln2_mean, L * N, f32, M::SAVED_EXACT},
            {"ln2_rstd", (void**)&a.ln2_rstd, L * N, f32, M::SAVED_EXACT},
            {"lnf", (void**)&a.lnf, N * C, act, M::TRANSIENT},
            {"lnf_mean", (void**)&a.lnf_mean, N, f32, M::SAVED_EXACT},
            {"lnf_rstd", (void**)&a.lnf_rstd, N, f32, M::SAVED_EXACT},
            {"losses", (void**)&a.losses, N, f32, M::LOSS},
            {"logits_chunk", (void**)&a.logits_chunk, Backend::classifier_scratch_floats(N, cfg.vocab_size), f32,
             M::LOSS},
            {"scratch_btc", (void**)&a.scratch_btc, N * C, act},
            {"dresid", (void**)&a.dresid, N * C, act},
            {"scratch_wide", (void**)&a.scratch_wide, N * std::max(3 * C, F), act},
            {"t_resid", (void**)&a.t_resid, S[RESID].compressed() || S[RESID_MID].compressed() ? N * C : 0, act},
            {"t_ln", (void**)&a.t_ln, !alias && (S[LN1].compressed() || S[LN2].compressed()) ? N * C : 0, act},
            {"t_mlp_in", (void**)&a.t_mlp_in, S[FCH].compressed() ? N * F : 0, act},
            {"t_mlp_out", (void**)&a.t_mlp_out, !alias && S[FCH_GELU].compressed() ? N * F : 0, act},
            {"prac_tmp", (void**)&a.prac_tmp,
             factored_grad_scratch(sites, {{LN1, 3 * (int)C}, {LN2, (int)F}, {FCH_GELU, (int)C}}), f32},
            {"prac_fp8_block", (void**)&a.prac_fp8_block, fp8_block_scratch(sites, N), act},
        };
        bases.clear();
        for (ActSite<Backend>& s : sites) site_add_specs(s, N, specs, bases);
        overlap_add_spec(sites, pending_bases, prac, sched.units, bases);
        return specs;
    }
    // (site, OC) pairs of the linear sites -> elements of the factored weight-gradient scratch

    void allocate_activations(int batch, int seq_len) {
        if (batch == B && seq_len == T) return;
        if (seq_len > cfg.max_seq_len)
            fail("sequence length %d exceeds the model's %d positions\n---> HINT: use --seq-len %d or less",
                 seq_len, cfg.max_seq_len, cfg.max_seq_len);
        B = batch;
        T = seq_len;
        std::vector<TensorSpec> bases;
        std::vector<TensorSpec> specs = activation_specs(B, T, bases);
        arena.allocate(be, std::move(specs), std::move(bases));
        const bool alias = alias_transients;  // the scratch that holds each transient: model/sites.h
        wire_sites(sites, acts.t_resid, alias ? acts.dresid : acts.t_ln, acts.t_mlp_in,
                   alias ? acts.scratch_wide : acts.t_mlp_out, acts.prac_tmp, acts.prac_fp8_block, acts.scratch_btc);
    }

    // GPT-2 init: N(0, initializer_range = 0.02), residual projections scaled by 1/sqrt(2L), biases 0, LayerNorm
    // weights 1.
    // Generated on the host in fp32 (same weights on every backend) and uploaded.
    void init_weights(uint64_t seed) {
        std::vector<float> host(param_buffer_numel, 0.0f);
        float resid_std = cfg.init_std / std::sqrt(2.0f * cfg.num_layers);
        for (size_t i = 0; i < param_specs.size(); i++) {
            const ParamSpec& s = param_specs[i];
            float* p = host.data() + s.offset;
            if (s.name == "ln1w" || s.name == "ln2w" || s.name == "lnfw") {
                for (size_t j = 0; j < s.numel; j++) p[j] = 1.0f;
            } else if (s.decay) {
                size_t n = s.numel;
                if (s.name == "wte") n = (size_t)cfg.vocab_size * cfg.channels;  // padded rows stay 0
                bool resid = s.name == "attprojw" || s.name == "fcprojw";
                fill_normal(p, n, resid ? resid_std : cfg.init_std, seed, i);
            }
        }
        be.upload_f32(params_memory, host.data(), param_buffer_numel);
    }

    // Hugging Face GPT2LMHeadModel names. Conv1D weights are stored (in, out): transposed from our (out, in).
    std::vector<HFTensor> hf_map(const std::string& prefix = "transformer.") const {
        int V = cfg.vocab_size, C = cfg.channels, F = cfg.hidden;
        auto off = [&](const char* name) {
            for (const ParamSpec& s : param_specs)
                if (s.name == name) return s.offset;
            throw std::logic_error(name);
        };
        std::vector<HFTensor> m;
        // (matrix: 2-D in the file even with one row, as nn.Embedding(1, C) is: a model of one position)
        m.push_back({prefix + "wte.weight", off("wte"), V, C, false, true});
        m.push_back({prefix + "wpe.weight", off("wpe"), cfg.max_seq_len, C, false, true});
        for (int l = 0; l < cfg.num_layers; l++) {
            std::string h = prefix + "h." + std::to_string(l) + ".";
            m.push_back({h + "ln_1.weight", off("ln1w") + (size_t)l * C, 1, C, false});
            m.push_back({h + "ln_1.bias", off("ln1b") + (size_t)l * C, 1, C, false});
            m.push_back({h + "attn.c_attn.weight", off("qkvw") + (size_t)l * 3 * C * C, 3 * C, C, true});
            m.push_back({h + "attn.c_attn.bias", off("qkvb") + (size_t)l * 3 * C, 1, 3 * C, false});
            m.push_back({h + "attn.c_proj.weight", off("attprojw") + (size_t)l * C * C, C, C, true});
            m.push_back({h + "attn.c_proj.bias", off("attprojb") + (size_t)l * C, 1, C, false});
            m.push_back({h + "ln_2.weight", off("ln2w") + (size_t)l * C, 1, C, false});
            m.push_back({h + "ln_2.bias", off("ln2b") + (size_t)l * C, 1, C, false});
            m.push_back({h + "mlp.c_fc.weight", off("fcw") + (size_t)l * F * C, F, C, true});
            m.push_back({h + "mlp.c_fc.bias", off("fcb") + (size_t)l * F, 1, F, false});
            m.push_back({h + "mlp.c_proj.weight", off("fcprojw") + (size_t)l * C * F, C, F, true});
            m.push_back({h + "mlp.c_proj.bias", off("fcprojb") + (size_t)l * C, 1, C, false});
        }
        m.push_back({prefix + "ln_f.weight", off("lnfw"), 1, C, false});
        m.push_back({prefix + "ln_f.bias", off("lnfb"), 1, C, false});
        return m;
    }
    // Tensors a GPT-2 checkpoint may carry that we do not need: the tied head and old attention-mask buffers.
    static std::vector<std::string> hf_ignorable() { return {"lm_head.weight", ".attn.bias", ".attn.masked_bias"}; }
    // The hub's original gpt2 files name tensors without the "transformer." prefix.
    static std::string hf_prefix_of(const std::vector<std::string>& names) {
        for (const std::string& n : names)
            if (n == "wte.weight") return "";
        return "transformer.";
    }

    // ------------------------------------------------------------------------------------------------
    // forward: embeddings -> L blocks -> final LayerNorm -> LM head + cross-entropy.
    // In training the fused classifier also runs the head's backward right away: dlnf goes to scratch_btc and
    // dwte accumulates, so no logits are stored. grad_scale is the loss weight per token: 1 / (valid tokens in
    // this micro-batch * gradient accumulation steps). The loss is the mean over non-ignored targets (0 when
    // every target is ignored): forward returns it (a readout: tests, tools); the training loop's train_forward
    // adds it / loss_divisor to the step's loss on the device instead (be.loss_read() once per step), so nothing
    // in a micro-batch waits for the device.
    // Training: saves for backward (compressing, refreshing bases when due); grad_scale > 0 is the loss weight
    // per token. Evaluation (eval_loss): the mean loss only; nothing saved or refreshed, no gradient.
    float forward(const int32_t* host_inputs, const int32_t* host_targets, float grad_scale) {
        train_forward(host_inputs, host_targets, grad_scale, 1);
        return be.loss_read();
    }
    // The end of a step for PRAC's refreshes in flight: with --prac-refresh-overlap D the bases refreshed D - 1 steps
    // ago take effect here (nothing otherwise). After the step's last backward, before the update and anything that
    // saves the bases.
    void install_refreshes() { ::install_refreshes(be, sites, sched.step, prac_log); }
    void train_forward(const int32_t* host_inputs, const int32_t* host_targets, float grad_scale, int loss_divisor) {
        if (!(grad_scale > 0.0f)) fail("internal: a training forward needs a loss weight > 0 (got %g)", grad_scale);
        forward_pass(host_inputs, host_targets, true, grad_scale, loss_divisor);
    }
    float eval_loss(const int32_t* host_inputs, const int32_t* host_targets) {
        forward_pass(host_inputs, host_targets, false, 0.0f, 1);
        return be.loss_read();
    }
    // An evaluation forward's per-token losses, (B*T) into host memory (multiple-choice scoring sums a row's).
    void eval_token_losses(const int32_t* host_inputs, const int32_t* host_targets, float* host_losses) {
        forward_pass(host_inputs, host_targets, false, 0.0f, 1);
        be.loss_read();  // (the mean the forward added, unused: the next step's loss starts from 0)
        be.download(host_losses, acts.losses, (size_t)B * T * sizeof(float));
    }
    // Layer l's attention output O, (N, C): its own slot of the (L, N, C) stack, or the one buffer all layers share
    // when backward recomputes O (--recompute-attention).
    act_t* attention_out(int l, int N) { return acts.atty + (recompute.attention_out ? 0 : (size_t)l * N * cfg.channels); }
    void forward_pass(const int32_t* host_inputs, const int32_t* host_targets, bool train, float grad_scale,
                      int loss_divisor) {
        int C = cfg.channels, NH = cfg.num_heads, F = cfg.hidden, V = cfg.vocab_size;
        int N = B * T;
        check_tokens(host_inputs, N, V);
        be.upload_async(acts.inputs, host_inputs, (size_t)N * sizeof(int32_t));
        be.upload_async(acts.targets, host_targets, (size_t)N * sizeof(int32_t));
        ActSite<Backend>&resid = sites[RESID], &ln1 = sites[LN1], &resid_mid = sites[RESID_MID], &ln2 = sites[LN2],
                        &fch = sites[FCH], &fch_gelu = sites[FCH_GELU];
        // saving for backward (compressing, refreshing bases) only when training; evaluation keeps nothing
        auto save = [&](ActSite<Backend>& site, int l) {
            if (!train) return;
            if (dump.wants(site.name, l, sched)) dump.write(be, site.fwd(l, N), N, site.n, site.stride());
            int unit = l * (int)sites.size() + (int)site.id;  // its own refresh phase (PracSchedule)
            site.save(be, l, N, sched.due(unit), prac.seed, prac_log);
        };

        be.encoder_forward(resid.fwd(0, N), acts.inputs, params.wte, params.wpe, B, T, C);
        for (int l = 0; l < cfg.num_layers; l++) {
            act_t* x = resid.fwd(l, N);  // (N, C) block input
            act_t* l_ln1 = ln1.fwd(l, N);
            float* l_ln1_mean = acts.ln1_mean + (size_t)l * N;
            float* l_ln1_rstd = acts.ln1_rstd + (size_t)l * N;
            act_t* l_qkv = acts.qkv + (size_t)l * N * 3 * C;
            act_t* l_atty = attention_out(l, N);
            float* l_lse = acts.lse + (size_t)l * lse_layer_stride(N, NH);
            act_t* l_resid_mid = resid_mid.fwd(l, N);
            act_t* l_ln2 = ln2.fwd(l, N);
            float* l_ln2_mean = acts.ln2_mean + (size_t)l * N;
            float* l_ln2_rstd = acts.ln2_rstd + (size_t)l * N;
            act_t* l_fch = fch.fwd(l, N);
            act_t* l_fch_gelu = fch_gelu.fwd(l, N);
            act_t* l_out = resid.fwd(l + 1, N);

            // attention branch: x + attproj(attention(qkv(ln1(x))))
            be.layernorm_forward(l_ln1, l_ln1_mean, l_ln1_rstd, x, params.ln1w + l * C, params.ln1b + l * C, N, C,
                                 cfg.norm_eps);
            save(resid, l);  // before the residual add below, which may overwrite x in place
            be.matmul_forward(l_qkv, l_ln1, params.qkvw + (size_t)l * 3 * C * C, params.qkvb + l * 3 * C, N, C,
                              3 * C);
            save(ln1, l);
            be.attention_forward(l_atty, l_lse, l_qkv, B, T, C, NH);
            be.matmul_forward(acts.scratch_btc, l_atty, params.attprojw + (size_t)l * C * C, params.attprojb + l * C,
                              N, C, C);
            be.residual_forward(l_resid_mid, x, acts.scratch_btc, (size_t)N * C);
            // MLP branch: resid_mid + fcproj(gelu(fc(ln2(resid_mid))))
            be.layernorm_forward(l_ln2, l_ln2_mean, l_ln2_rstd, l_resid_mid, params.ln2w + l * C, params.ln2b + l * C,
                                 N, C, cfg.norm_eps);
            save(resid_mid, l);
            be.matmul_forward(l_fch, l_ln2, params.fcw + (size_t)l * F * C, params.fcb + (size_t)l * F, N, C, F);
            save(ln2, l);
            be.gelu_forward(l_fch_gelu, l_fch, (size_t)N * F);
            save(fch, l);
            be.matmul_forward(acts.scratch_btc, l_fch_gelu, params.fcprojw + (size_t)l * C * F,
                              params.fcprojb + l * C, N, F, C);
            save(fch_gelu, l);
            be.residual_forward(l_out, l_resid_mid, acts.scratch_btc, (size_t)N * C);
        }
        // the final LN's input is the last slot of the residual stack (never compressed: backward starts with it)
        act_t* last = resid.fwd(cfg.num_layers, N);
        be.layernorm_forward(acts.lnf, acts.lnf_mean, acts.lnf_rstd, last, params.lnfw, params.lnfb, N, C,
                             cfg.norm_eps);
        be.classifier(acts.losses, train ? acts.scratch_btc : nullptr, train ? grads.wte : nullptr, acts.lnf,
                      params.wte, acts.targets, N, C, V, grad_scale, acts.logits_chunk);
        sched.end_micro_batch();
        be.loss_add(acts.losses, acts.targets, N, loss_divisor);
    }

    // backward: from dlnf (left in scratch_btc by the training forward) down to the embeddings.
    // Parameter gradients accumulate (+=) so micro-steps add up; zero_grad() once per optimizer step.
    void backward() {
        int C = cfg.channels, NH = cfg.num_heads, F = cfg.hidden;
        int N = B * T;
        act_t* dresid = acts.dresid;       // (N, C)
        act_t* dbtc = acts.scratch_btc;    // (N, C)
        act_t* dwide = acts.scratch_wide;  // (N, max(3C, F))
        ActSite<Backend>&resid = sites[RESID], &ln1 = sites[LN1], &resid_mid = sites[RESID_MID], &ln2 = sites[LN2],
                        &fch = sites[FCH], &fch_gelu = sites[FCH_GELU];

        be.zero(dresid, (size_t)N * C * sizeof(act_t));
        be.layernorm_backward(dresid, grads.lnfw, grads.lnfb, dbtc, resid.fwd(cfg.num_layers, N), params.lnfw,
                              acts.lnf_mean, acts.lnf_rstd, N, C);
        for (int l = cfg.num_layers - 1; l >= 0; l--) {
            act_t* l_qkv = acts.qkv + (size_t)l * N * 3 * C;
            act_t* l_atty = attention_out(l, N);
            float* l_lse = acts.lse + (size_t)l * lse_layer_stride(N, NH);

            // MLP branch; dresid is the gradient of this block's output
            act_t* l_fch = fch.restore(be, l, N);
            if (fch_gelu.recompute) be.gelu_forward(fch_gelu.slot(l, N), l_fch, (size_t)N * F);  // --recompute >= 1
            fch_gelu.weight_grad(be, l, N, grads.fcprojw + (size_t)l * C * F, grads.fcprojb + l * C, dresid, C);
            be.matmul_backward_input(dwide, dresid, params.fcprojw + (size_t)l * C * F, N, F, C, false);
            be.gelu_backward(dwide, l_fch, dwide, (size_t)N * F);
            if (ln2.recompute)  // --recompute 2 (resid_mid is exact then; rewrites the same mean/rstd bits)
                be.layernorm_forward(ln2.slot(l, N), acts.ln2_mean + (size_t)l * N, acts.ln2_rstd + (size_t)l * N,
                                     resid_mid.restore(be, l, N), params.ln2w + l * C, params.ln2b + l * C, N, C,
                                     cfg.norm_eps);
            ln2.weight_grad(be, l, N, grads.fcw + (size_t)l * F * C, grads.fcb + (size_t)l * F, dwide, F);
            be.matmul_backward_input(dbtc, dwide, params.fcw + (size_t)l * F * C, N, C, F, false);
            be.layernorm_backward(dresid, grads.ln2w + l * C, grads.ln2b + l * C, dbtc, resid_mid.restore(be, l, N),
                                  params.ln2w + l * C, acts.ln2_mean + (size_t)l * N, acts.ln2_rstd + (size_t)l * N,
                                  N, C);
            // attention branch; dresid is now the gradient of resid_mid
            if (recompute.attention_out)  // --recompute-attention: O again from the exact q, k, v (same LSE bits)
                be.attention_forward(l_atty, l_lse, l_qkv, B, T, C, NH);
            be.matmul_backward_weight(grads.attprojw + (size_t)l * C * C, grads.attprojb + l * C, dresid, l_atty, N,
                                      C, C);
            be.matmul_backward_input(dbtc, dresid, params.attprojw + (size_t)l * C * C, N, C, C, false);
            be.attention_backward(dwide, dbtc, l_qkv, l_atty, l_lse, B, T, C, NH);
            if (ln1.recompute)
                be.layernorm_forward(ln1.slot(l, N), acts.ln1_mean + (size_t)l * N, acts.ln1_rstd + (size_t)l * N,
                                     resid.restore(be, l, N), params.ln1w + l * C, params.ln1b + l * C, N, C,
                                     cfg.norm_eps);
            ln1.weight_grad(be, l, N, grads.qkvw + (size_t)l * 3 * C * C, grads.qkvb + l * 3 * C, dwide, 3 * C);
            be.matmul_backward_input(dbtc, dwide, params.qkvw + (size_t)l * 3 * C * C, N, C, 3 * C, false);
            be.layernorm_backward(dresid, grads.ln1w + l * C, grads.ln1b + l * C, dbtc, resid.restore(be, l, N),
                                  params.ln1w + l * C, acts.ln1_mean + (size_t)l * N, acts.ln1_rstd + (size_t)l * N,
                                  N, C);
            if (on_layer_grads) on_layer_grads(l);  // layer l's parameter gradients are complete
        }
        be.encoder_backward(grads.wte, grads.wpe, dresid, acts.inputs, B, T, C);
        if (on_layer_grads) on_layer_grads(-1);  // wte, wpe, lnfw, lnfb complete
    }

    // Hugging Face safetensors in and out (our fp32 host copy in between; the backend converts).
    void load_weights(const std::string& path) {
        SafeTensorsFile file = safetensors_open(path);
        // the tied head is skipped, but one of another shape is another model's (transformers refuses it too)
        if (const SafeTensor* head = file.find("lm_head.weight")) {
            const std::vector<int64_t> want = {cfg.vocab_size, cfg.channels};
            if (head->shape != want)
                fail("%s: tensor \"lm_head.weight\" has shape [%s] but model %s ties its head to the token embedding "
                     "[%s]\n---> HINT: the checkpoint does not match the model config: check its config.json (and "
                     "the trainers' --model)", path.c_str(), join(head->shape).c_str(), cfg.name.c_str(),
                     join(want).c_str());
        }
        std::vector<HFTensor> map = hf_map(hf_prefix_of(file.names()));
        load_hf_weights(be, path, map, hf_ignorable(), params_memory, param_buffer_numel, cfg);
    }
    void save_weights(const std::string& path) { save_hf_weights(be, path, hf_map(), params_memory, param_buffer_numel); }

    void zero_grad() { be.zero(grads_memory, param_buffer_numel * sizeof(grad_t)); }

    // Logits (N, V) of the last forward, for tests and sampling.
    // host_out (rows, V): the logits of rows first .. first + rows - 1 of the last forward's (B*T) positions (all by
    // default; a sample needs one row, not B*T*V floats)
    void logits(float* host_out, int first = 0, int rows = -1) {
        head_logits(be, host_out, acts.lnf + (size_t)first * cfg.channels, params.wte, rows < 0 ? B * T : rows,
                    cfg.channels, cfg.vocab_size);
    }
};
