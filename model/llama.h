// LLaMA: parameters, activation arena, forward and backward, written once for every backend.
// RMSNorm, rotate-half RoPE, SwiGLU MLP, no biases, untied embedding and head (Hugging Face LlamaForCausalLM).
//
// Shapes: B batch, T sequence, N = B*T rows, C channels, NH heads, HS = C/NH, L layers,
// F intermediate size, V vocab, Vp padded vocab. Per-layer tensors are stacked with the layer first.
// (N, F) activations keep their rows at stride Fs = cfg.hidden_stride() (F unless --hidden-align pads it: the pad
// columns are never read or written by a product; SwiGLU runs over whole rows, pads included, and nothing reads
// what it writes there). Weights are contiguous.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/config.h"
#include "model/model_common.h"  // ActivationArena, load_hf_weights, ...
#include "common/tensors.h"
#include "model/weights.h"
#include "model/sites.h"  // the sites: SiteIndex, apply_recompute, wire_sites
#include "common/safetensors.h"

template <typename T>
struct LlamaWeights {
    T* wte;       // (Vp, C)     token embedding
    T* ln1w;      // (L, C)      RMSNorm before attention
    T* qkvw;      // (L, 3C, C)  rows: q_proj, k_proj, v_proj
    T* attprojw;  // (L, C, C)   o_proj
    T* ln2w;      // (L, C)      RMSNorm before the MLP
    T* fcw;       // (L, 2F, C)  rows: gate_proj, up_proj
    T* fcprojw;   // (L, C, F)   down_proj
    T* lnfw;      // (C)         final RMSNorm
    T* lm_head;   // (Vp, C)
};

template <class Backend>
struct Llama {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;

    ModelConfig cfg;
    Backend& be;

    std::vector<ParamSpec> param_specs;
    size_t num_parameters = 0;
    size_t param_buffer_numel = 0;
    act_t* params_memory = nullptr;
    grad_t* grads_memory = nullptr;
    LlamaWeights<act_t> params;
    LlamaWeights<grad_t> grads;

    int B = 0, T = 0;
    struct Activations {
        int32_t* inputs;      // (N)
        int32_t* targets;     // (N), -1 = ignored (padding)
        float* freqs;         // (T, HS/2, 2) RoPE cos/sin table
        float* ln1_rstd;      // (L, N)
        act_t* qkv;           // (L, N, 3C) q, k after RoPE, v: attention inputs (exact)
        act_t* atty;          // (L, N, C), or (N, C) with --recompute-attention: attention output O, o_proj's input
        float* lse;           // (L, B, NH, T), layers lse_layer_stride apart
        float* ln2_rstd;      // (L, N)
        act_t* lnf;           // (N, C)
        float* lnf_rstd;      // (N)
        float* losses;        // (N)
        float* logits_chunk;  // (min(chunk, N), V) classifier scratch (CUDA: rows of an aligned ld)
        act_t* scratch_btc;   // (N, C)
        act_t* dresid;        // (N, C)
        act_t* scratch_wide;  // (N, max(3C, 2Fs)) gradients of qkv, or of gate and up (two (N, F) blocks, stride Fs)
        act_t* scratch_ff;    // (N, F) gradient of the SwiGLU output, stride Fs
        // transient full-width buffers of compressed sites (size 0 when their sites are not compressed, or when
        // they live in backward scratch: alias_transients, model/sites.h)
        act_t* t_resid;       // (N, C)  residual stream (in place)
        act_t* t_ln;          // (N, C)  RMSNorm-1 / RMSNorm-2 output                    (else in dresid)
        act_t* t_mlp_in;      // (2, N, F) gate, then up, stride Fs                      (else in scratch_wide)
        act_t* t_mlp_out;     // (N, F)  SwiGLU output, stride Fs                        (else in scratch_ff)
        float* prac_tmp;      // (max OC, max r) factored weight-gradient scratch
        act_t* prac_fp8_block;  // (min(N, 8192), max r) --prac-storage fp8: rows of X·P (prac/site.h)
    } acts;
    ActivationArena arena;  // the Activations above and the PRAC bases, laid out from activation_specs

    // Saved-for-backward tensors that PRAC may compress (docs/DESIGN.md section 4.2); per layer:
    //   resid      RMSNorm-1 input (the residual stream; one more slot: the final norm's input) nonlinear
    //   ln1        RMSNorm-1 output, shared input of q, k, v                                  linear
    //   resid_mid  RMSNorm-2 input                                                              nonlinear
    //   ln2        RMSNorm-2 output, shared input of gate and up                                linear
    //   fch_gate   gate pre-activation (N, F), SwiGLU backward's input                          nonlinear
    //   fch_act    SwiGLU output, down_proj's input                                             linear
    //   fch_up     up pre-activation (N, F), SwiGLU backward's input                            nonlinear
    // gate and up are two sites with their own bases (our reading: the paper does not say which SwiGLU tensors
    // it compressed); before they were one site "fch" over (N, 2F), whose checkpointed state prac_state_load
    // converts (prac/prac_state.h). q, k (after RoPE), v, O and LSE stay exact; O is also o_proj's input (or
    // recomputed: --recompute-attention).
    enum {  // the sites' order is model/sites.h's SiteIndex (wire_sites and RSO rely on it)
        RESID = SITE_RESID, LN1 = SITE_LN1, RESID_MID = SITE_RESID_MID, LN2 = SITE_LN2, FCH_GATE = SITE_FCH,
        FCH_ACT = SITE_ACT_OUT, FCH_UP = SITE_FCH_UP
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

    // called by backward() as each layer's gradients complete, then with -1 (GPT2::on_layer_grads says how)
    std::function<void(int layer)> on_layer_grads;

    Llama(Backend& backend, const ModelConfig& config, const PracOptions& prac_options = PracOptions(),
         Recompute recompute_options = Recompute())
        : cfg(config), be(backend), prac(prac_options), recompute(recompute_options) {
        be.check_attention_shape(cfg.channels, cfg.num_heads);
        int Vp = cfg.padded_vocab_size, C = cfg.channels, L = cfg.num_layers, F = cfg.hidden, Fs = cfg.hidden_stride();
        param_buffer_numel = layout_params(
            {
                {"wte", (size_t)Vp * C, true},
                {"ln1w", (size_t)L * C, false},
                {"qkvw", (size_t)L * 3 * C * C, true},
                {"attprojw", (size_t)L * C * C, true},
                {"ln2w", (size_t)L * C, false},
                {"fcw", (size_t)L * 2 * F * C, true},
                {"fcprojw", (size_t)L * C * F, true},
                {"lnfw", (size_t)C, false},
                {"lm_head", (size_t)Vp * C, true},
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
            make_site<Backend>("fch_gate", FCH_GATE, SiteClass::NONLINEAR, F, L, L, prac, Fs),
            make_site<Backend>("fch_act", FCH_ACT, SiteClass::LINEAR, F, L, L, prac, Fs),
            make_site<Backend>("fch_up", FCH_UP, SiteClass::NONLINEAR, F, L, L, prac, Fs),
        };
        sites[FCH_GATE].replaces = sites[FCH_UP].replaces = "fch";  // the old gate|up site (prac_state_load)
        sched.units = (int)sites.size() * L;  // staggered refresh phases (prac/site.h PracSchedule)
        apply_recompute(sites, recompute.level, FCH_ACT, LN1, LN2, RESID, RESID_MID);
    }
    ~Llama() {
        discard_refreshes(be, sites);  // solves still in flight write into the arena: wait for them first
        arena.release(be);
        be.free(grads_memory, param_buffer_numel * sizeof(grad_t));
        be.free(params_memory, param_buffer_numel * sizeof(act_t));
    }
    Llama(const Llama&) = delete;
    Llama& operator=(const Llama&) = delete;

    template <typename W>
    void point_weights(LlamaWeights<W>& w, W* base) {
        W** ptrs[] = {&w.wte, &w.ln1w, &w.qkvw, &w.attprojw, &w.ln2w, &w.fcw, &w.fcprojw, &w.lnfw, &w.lm_head};
        for (size_t i = 0; i < param_specs.size(); i++) *ptrs[i] = base + param_specs[i].offset;
    }

    // The arena as a list of specs (and the PRAC bases as a second list), read by the memory planner too.
    std::vector<TensorSpec> activation_specs(int B, int T, std::vector<TensorSpec>& bases) {
        size_t N = (size_t)B * T, C = cfg.channels, L = cfg.num_layers, F = cfg.hidden, NH = cfg.num_heads;
        size_t Fs = cfg.hidden_stride();
        DType act = Backend::act_dtype, f32 = DType::F32;
        Activations& a = acts;
        auto& S = sites;
        const bool alias = alias_transients;
        using M = MemCategory;
        std::vector<TensorSpec> specs = {
            {"inputs", (void**)&a.inputs, N, DType::I32, M::INPUTS},
            {"targets", (void**)&a.targets, N, DType::I32, M::INPUTS},
            {"freqs", (void**)&a.freqs, (size_t)T * cfg.head_dim(), f32, M::TRANSIENT},
            {"ln1_rstd", (void**)&a.ln1_rstd, L * N, f32, M::SAVED_EXACT},
            {"qkv", (void**)&a.qkv, L * N * 3 * C, act, M::SAVED_EXACT},
            {"atty", (void**)&a.atty, recompute.attention_out ? N * C : L * N * C, act,
             recompute.attention_out ? M::TRANSIENT : M::SAVED_EXACT},
            {"lse", (void**)&a.lse, L * lse_layer_stride(N, NH), f32, M::SAVED_EXACT},
            {"ln2_rstd", (void**)&a.ln2_rstd, L * N, f32, M::SAVED_EXACT},
            {"lnf", (void**)&a.lnf, N * C, act, M::TRANSIENT},
            {"lnf_rstd", (void**)&a.lnf_rstd, N, f32, M::SAVED_EXACT},
            {"losses", (void**)&a.losses, N, f32, M::LOSS},
            {"logits_chunk", (void**)&a.logits_chunk, Backend::classifier_scratch_floats(N, cfg.vocab_size), f32,
             M::LOSS},
            {"scratch_btc", (void**)&a.scratch_btc, N * C, act},
            {"dresid", (void**)&a.dresid, N * C, act},
            {"scratch_wide", (void**)&a.scratch_wide, N * std::max(3 * C, 2 * Fs), act},
            {"scratch_ff", (void**)&a.scratch_ff, N * Fs, act},
            {"t_resid", (void**)&a.t_resid, S[RESID].compressed() || S[RESID_MID].compressed() ? N * C : 0, act},
            {"t_ln", (void**)&a.t_ln, !alias && (S[LN1].compressed() || S[LN2].compressed()) ? N * C : 0, act},
            {"t_mlp_in", (void**)&a.t_mlp_in,
             !alias && (S[FCH_GATE].compressed() || S[FCH_UP].compressed()) ? 2 * N * Fs : 0, act},
            {"t_mlp_out", (void**)&a.t_mlp_out, !alias && S[FCH_ACT].compressed() ? N * Fs : 0, act},
            {"prac_tmp", (void**)&a.prac_tmp,  // ln2's dW is taken per half (gate, up): OC = F
             factored_grad_scratch(sites, {{LN1, 3 * (int)C}, {LN2, (int)F}, {FCH_ACT, (int)C}}), f32},
            {"prac_fp8_block", (void**)&a.prac_fp8_block, fp8_block_scratch(sites, N), act},
        };
        bases.clear();
        for (ActSite<Backend>& s : sites) site_add_specs(s, N, specs, bases);
        overlap_add_spec(sites, pending_bases, prac, sched.units, bases);
        return specs;
    }

    void allocate_activations(int batch, int seq_len) {
        if (batch == B && seq_len == T) return;
        if (seq_len > cfg.max_seq_len)
            fail("sequence length %d exceeds the model's max_position_embeddings %d\n---> HINT: use --seq-len %d "
                 "or less", seq_len, cfg.max_seq_len, cfg.max_seq_len);
        B = batch;
        T = seq_len;
        std::vector<TensorSpec> bases;
        std::vector<TensorSpec> specs = activation_specs(B, T, bases);
        arena.allocate(be, std::move(specs), std::move(bases));
        const bool alias = alias_transients;  // the scratch that holds each transient: model/sites.h
        act_t* mlp_in = alias ? acts.scratch_wide : acts.t_mlp_in;  // gate, then up: (2, N, F), stride Fs
        wire_sites(sites, acts.t_resid, alias ? acts.dresid : acts.t_ln, mlp_in,
                   alias ? acts.scratch_ff : acts.t_mlp_out, acts.prac_tmp, acts.prac_fp8_block, acts.scratch_btc,
                   mlp_in ? mlp_in + (size_t)B * T * cfg.hidden_stride() : nullptr);
        be.rope_table(acts.freqs, T, cfg.head_dim(), cfg.rope_theta);
    }

    // Hugging Face's LLaMA init: every Linear and Embedding N(0, initializer_range = 0.02), RMSNorm weights 1.
    void init_weights(uint64_t seed) {
        std::vector<float> host(param_buffer_numel, 0.0f);
        for (size_t i = 0; i < param_specs.size(); i++) {
            const ParamSpec& s = param_specs[i];
            float* p = host.data() + s.offset;
            if (!s.decay) {
                for (size_t j = 0; j < s.numel; j++) p[j] = 1.0f;  // norm weights
            } else {
                size_t n = s.numel;
                if (s.name == "wte" || s.name == "lm_head") n = (size_t)cfg.vocab_size * cfg.channels;
                fill_normal(p, n, cfg.init_std, seed, i);
            }
        }
        be.upload_f32(params_memory, host.data(), param_buffer_numel);
    }

    // Hugging Face LlamaForCausalLM names; our fused qkv and gate|up blocks are row-concatenations of theirs.
    std::vector<HFTensor> hf_map() const {
        int V = cfg.vocab_size, C = cfg.channels, F = cfg.hidden;
        auto off = [&](const char* name) {
            for (const ParamSpec& s : param_specs)
                if (s.name == name) return s.offset;
            throw std::logic_error(name);
        };
        std::vector<HFTensor> m;
        m.push_back({"model.embed_tokens.weight", off("wte"), V, C, false, true});  // 2-D even with one row
        for (int l = 0; l < cfg.num_layers; l++) {
            std::string p = "model.layers." + std::to_string(l) + ".";
            size_t qkv = off("qkvw") + (size_t)l * 3 * C * C, fc = off("fcw") + (size_t)l * 2 * F * C;
            m.push_back({p + "input_layernorm.weight", off("ln1w") + (size_t)l * C, 1, C, false});
            m.push_back({p + "self_attn.q_proj.weight", qkv, C, C, false});
            m.push_back({p + "self_attn.k_proj.weight", qkv + (size_t)C * C, C, C, false});
            m.push_back({p + "self_attn.v_proj.weight", qkv + (size_t)2 * C * C, C, C, false});
            m.push_back({p + "self_attn.o_proj.weight", off("attprojw") + (size_t)l * C * C, C, C, false});
            m.push_back({p + "post_attention_layernorm.weight", off("ln2w") + (size_t)l * C, 1, C, false});
            m.push_back({p + "mlp.gate_proj.weight", fc, F, C, false});
            m.push_back({p + "mlp.up_proj.weight", fc + (size_t)F * C, F, C, false});
            m.push_back({p + "mlp.down_proj.weight", off("fcprojw") + (size_t)l * C * F, C, F, false});
        }
        m.push_back({"model.norm.weight", off("lnfw"), 1, C, false});
        m.push_back({"lm_head.weight", off("lm_head"), V, C, false, true});
        return m;
    }
    static std::vector<std::string> hf_ignorable() { return {"rotary_emb.inv_freq"}; }

    // ------------------------------------------------------------------------------------------------
    // forward: embedding -> L blocks -> final RMSNorm -> LM head + cross-entropy (see GPT2::forward for the
    // fused head: in training it leaves dlnf in scratch_btc and accumulates dlm_head).
    // Training: saves for backward (compressing, refreshing bases when due); grad_scale > 0 is the loss weight
    // per token. Evaluation (eval_loss): the mean loss only; nothing saved or refreshed, no gradient.
    // forward returns this micro-batch's mean loss (a readout: tests, tools); the training loop's train_forward
    // adds mean loss / loss_divisor to the step's loss on the device instead (be.loss_read() once per step), so
    // nothing in it waits for the device.
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
        int C = cfg.channels, NH = cfg.num_heads, F = cfg.hidden, Fs = cfg.hidden_stride(), V = cfg.vocab_size;
        int N = B * T;
        check_tokens(host_inputs, N, V);
        be.upload_async(acts.inputs, host_inputs, (size_t)N * sizeof(int32_t));
        be.upload_async(acts.targets, host_targets, (size_t)N * sizeof(int32_t));
        ActSite<Backend>&resid = sites[RESID], &ln1 = sites[LN1], &resid_mid = sites[RESID_MID], &ln2 = sites[LN2],
                        &fch_gate = sites[FCH_GATE], &fch_up = sites[FCH_UP], &fch_act = sites[FCH_ACT];
        auto save = [&](ActSite<Backend>& site, int l) {  // only when training: evaluation keeps nothing
            if (!train) return;
            if (dump.wants(site.name, l, sched)) dump.write(be, site.fwd(l, N), N, site.n, site.stride());
            int unit = l * (int)sites.size() + (int)site.id;  // its own refresh phase (PracSchedule)
            site.save(be, l, N, sched.due(unit), prac.seed, prac_log);
        };

        be.encoder_forward(resid.fwd(0, N), acts.inputs, params.wte, nullptr, B, T, C);
        for (int l = 0; l < cfg.num_layers; l++) {
            act_t* x = resid.fwd(l, N);  // (N, C) block input
            act_t* l_ln1 = ln1.fwd(l, N);
            float* l_ln1_rstd = acts.ln1_rstd + (size_t)l * N;
            act_t* l_qkv = acts.qkv + (size_t)l * N * 3 * C;
            act_t* l_atty = attention_out(l, N);
            float* l_lse = acts.lse + (size_t)l * lse_layer_stride(N, NH);
            act_t* l_resid_mid = resid_mid.fwd(l, N);
            act_t* l_ln2 = ln2.fwd(l, N);
            float* l_ln2_rstd = acts.ln2_rstd + (size_t)l * N;
            act_t* l_gate = fch_gate.fwd(l, N);  // (N, F), stride Fs
            act_t* l_up = fch_up.fwd(l, N);      // (N, F), stride Fs
            act_t* l_fch_act = fch_act.fwd(l, N);  // (N, F), stride Fs
            const act_t* w_gate = params.fcw + (size_t)l * 2 * F * C;  // (F, C) gate_proj, then (F, C) up_proj
            const act_t* w_up = w_gate + (size_t)F * C;
            act_t* l_out = resid.fwd(l + 1, N);

            // attention branch: x + o_proj(attention(rope(qkv(rmsnorm(x)))))
            be.rmsnorm_forward(l_ln1, l_ln1_rstd, x, params.ln1w + l * C, N, C, cfg.norm_eps);
            save(resid, l);  // before the residual add below, which may overwrite x in place
            be.matmul_forward(l_qkv, l_ln1, params.qkvw + (size_t)l * 3 * C * C, nullptr, N, C, 3 * C);
            save(ln1, l);
            be.rope_forward(l_qkv, acts.freqs, B, T, C, NH);
            be.attention_forward(l_atty, l_lse, l_qkv, B, T, C, NH);
            be.matmul_forward(acts.scratch_btc, l_atty, params.attprojw + (size_t)l * C * C, nullptr, N, C, C);
            be.residual_forward(l_resid_mid, x, acts.scratch_btc, (size_t)N * C);
            // MLP branch: resid_mid + down(silu(gate(h)) * up(h)), h = rmsnorm(resid_mid)
            be.rmsnorm_forward(l_ln2, l_ln2_rstd, l_resid_mid, params.ln2w + l * C, N, C, cfg.norm_eps);
            save(resid_mid, l);
            be.matmul_forward(l_gate, l_ln2, w_gate, nullptr, N, C, F, Fs);  // one product per half: gate and up
            be.matmul_forward(l_up, l_ln2, w_up, nullptr, N, C, F, Fs);      // are separate (N, F) sites
            save(ln2, l);
            be.swiglu_forward(l_fch_act, l_gate, l_up, (size_t)N * Fs);
            save(fch_gate, l);
            save(fch_up, l);
            be.matmul_forward(acts.scratch_btc, l_fch_act, params.fcprojw + (size_t)l * C * F, nullptr, N, F, C, 0,
                              Fs);
            save(fch_act, l);
            be.residual_forward(l_out, l_resid_mid, acts.scratch_btc, (size_t)N * C);
        }
        act_t* last = resid.fwd(cfg.num_layers, N);  // the final norm's input: never compressed
        be.rmsnorm_forward(acts.lnf, acts.lnf_rstd, last, params.lnfw, N, C, cfg.norm_eps);
        be.classifier(acts.losses, train ? acts.scratch_btc : nullptr, train ? grads.lm_head : nullptr, acts.lnf,
                      params.lm_head, acts.targets, N, C, V, grad_scale, acts.logits_chunk);
        sched.end_micro_batch();
        be.loss_add(acts.losses, acts.targets, N, loss_divisor);
    }

    // backward: from dlnf (in scratch_btc) down to the embedding; parameter gradients accumulate.
    void backward() {
        int C = cfg.channels, NH = cfg.num_heads, F = cfg.hidden, Fs = cfg.hidden_stride();
        int N = B * T;
        act_t* dresid = acts.dresid;       // (N, C)
        act_t* dbtc = acts.scratch_btc;    // (N, C)
        act_t* dwide = acts.scratch_wide;  // (N, max(3C, 2Fs))
        act_t* dgate = dwide;                        // (N, F), stride Fs
        act_t* dup = dwide + (size_t)N * Fs;         // (N, F), stride Fs
        ActSite<Backend>&resid = sites[RESID], &ln1 = sites[LN1], &resid_mid = sites[RESID_MID], &ln2 = sites[LN2],
                        &fch_gate = sites[FCH_GATE], &fch_up = sites[FCH_UP], &fch_act = sites[FCH_ACT];

        be.zero(dresid, (size_t)N * C * sizeof(act_t));
        be.rmsnorm_backward(dresid, grads.lnfw, dbtc, resid.fwd(cfg.num_layers, N), params.lnfw, acts.lnf_rstd, N, C);
        for (int l = cfg.num_layers - 1; l >= 0; l--) {
            act_t* l_qkv = acts.qkv + (size_t)l * N * 3 * C;
            act_t* l_atty = attention_out(l, N);
            float* l_lse = acts.lse + (size_t)l * lse_layer_stride(N, NH);

            // MLP branch. gate and up, when compressed and alias_transients, are reconstructed into dgate and dup,
            // and the SwiGLU backward overwrites them in place (model/sites.h).
            const act_t* w_gate = params.fcw + (size_t)l * 2 * F * C;  // (F, C), then up_proj's (F, C)
            const act_t* w_up = w_gate + (size_t)F * C;
            grad_t* dw_gate = grads.fcw + (size_t)l * 2 * F * C;
            grad_t* dw_up = dw_gate + (size_t)F * C;
            act_t* l_gate = fch_gate.restore(be, l, N);
            act_t* l_up = fch_up.restore(be, l, N);
            if (fch_act.recompute)  // --recompute >= 1
                be.swiglu_forward(fch_act.slot(l, N), l_gate, l_up, (size_t)N * Fs);
            fch_act.weight_grad(be, l, N, grads.fcprojw + (size_t)l * C * F, nullptr, dresid, C);
            be.matmul_backward_input(acts.scratch_ff, dresid, params.fcprojw + (size_t)l * C * F, N, F, C, false, Fs);
            be.swiglu_backward(dgate, dup, l_gate, l_up, acts.scratch_ff, (size_t)N * Fs);
            if (ln2.recompute)  // --recompute 2 (resid_mid is exact then; rewrites the same rstd bits)
                be.rmsnorm_forward(ln2.slot(l, N), acts.ln2_rstd + (size_t)l * N, resid_mid.restore(be, l, N),
                                   params.ln2w + l * C, N, C, cfg.norm_eps);
            ln2.weight_grad(be, l, N, dw_gate, nullptr, dgate, F, Fs);
            ln2.weight_grad(be, l, N, dw_up, nullptr, dup, F, Fs);
            be.matmul_backward_input(dbtc, dgate, w_gate, N, C, F, false, 0, Fs);
            be.matmul_backward_input(dbtc, dup, w_up, N, C, F, true, 0, Fs);  // bf16: one more rounding of dbtc
            be.rmsnorm_backward(dresid, grads.ln2w + l * C, dbtc, resid_mid.restore(be, l, N), params.ln2w + l * C,
                                acts.ln2_rstd + (size_t)l * N, N, C);
            // attention branch
            if (recompute.attention_out)  // --recompute-attention: O again from the exact q, k, v (same LSE bits)
                be.attention_forward(l_atty, l_lse, l_qkv, B, T, C, NH);
            be.matmul_backward_weight(grads.attprojw + (size_t)l * C * C, nullptr, dresid, l_atty, N, C, C);
            be.matmul_backward_input(dbtc, dresid, params.attprojw + (size_t)l * C * C, N, C, C, false);
            be.attention_backward(dwide, dbtc, l_qkv, l_atty, l_lse, B, T, C, NH);
            be.rope_backward(dwide, acts.freqs, B, T, C, NH);
            if (ln1.recompute)
                be.rmsnorm_forward(ln1.slot(l, N), acts.ln1_rstd + (size_t)l * N, resid.restore(be, l, N),
                                   params.ln1w + l * C, N, C, cfg.norm_eps);
            ln1.weight_grad(be, l, N, grads.qkvw + (size_t)l * 3 * C * C, nullptr, dwide, 3 * C);
            be.matmul_backward_input(dbtc, dwide, params.qkvw + (size_t)l * 3 * C * C, N, C, 3 * C, false);
            be.rmsnorm_backward(dresid, grads.ln1w + l * C, dbtc, resid.restore(be, l, N), params.ln1w + l * C,
                                acts.ln1_rstd + (size_t)l * N, N, C);
            if (on_layer_grads) on_layer_grads(l);  // layer l's parameter gradients are complete
        }
        be.encoder_backward(grads.wte, nullptr, dresid, acts.inputs, B, T, C);
        if (on_layer_grads) on_layer_grads(-1);  // wte, lnfw, lm_head complete
    }

    // Hugging Face safetensors in and out (our fp32 host copy in between; the backend converts).
    void load_weights(const std::string& path) {
        load_hf_weights(be, path, hf_map(), hf_ignorable(), params_memory, param_buffer_numel, cfg);
    }
    void save_weights(const std::string& path) { save_hf_weights(be, path, hf_map(), params_memory, param_buffer_numel); }

    void zero_grad() { be.zero(grads_memory, param_buffer_numel * sizeof(grad_t)); }

    // host_out (rows, V): rows first .. first + rows - 1 of the last forward's (B*T) positions (all by default)
    void logits(float* host_out, int first = 0, int rows = -1) {
        head_logits(be, host_out, acts.lnf + (size_t)first * cfg.channels, params.lm_head, rows < 0 ? B * T : rows,
                    cfg.channels, cfg.vocab_size);
    }
};
