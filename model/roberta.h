// RoBERTa encoder with a sequence-classification head (Hugging Face RobertaForSequenceClassification):
// parameters, activation arena, forward and backward, written once for every backend like model/gpt2.h.
// Embeddings: word + token type + learned absolute position with RoBERTa's padding offset, then a LayerNorm;
// post-LayerNorm blocks h = LN1(x + Attn(x)), out = LN2(h + MLP(h)) with the exact erf GeLU and bidirectional
// attention under a key-padding mask; the head dense + tanh + out_proj on each sequence's first token (<s>), with
// cross-entropy (num_labels >= 2) or the squared error of one output (num_labels == 1, STS-B). No dropout (the
// trainer has none). What is saved for backward, and what PRAC may compress: docs/DESIGN.md section 4.2.
//
// Interface (the same shape as GPT2 / Llama, so the optimizers, checkpoints and planner take it as they are):
//   ModelConfig cfg = model_config_load(Arch::ROBERTA, dir + "/config.json");  // cfg.num_labels may be changed
//   Roberta<Backend> model(be, cfg, prac_options, recompute);
//   model.load_pretrained(dir, seed) (or load_weights(model.safetensors, seed)): strict Hugging Face names and
//       shapes; a checkpoint without the classifier (a pretrained roberta-base) gets a fresh head, as HF does
//   model.init_weights(seed): a random model (HF's init)
//   model.allocate_activations(B, T)
//   model.zero_grad(); loss = model.forward(batch, 1 / labelled rows); model.backward();  then an optimizer
//       over params_memory / grads_memory / param_specs (train_forward(batch, scale, divisor) + be.loss_read()
//       for gradient accumulation, as the trainer does)
//   loss = model.eval_forward(batch); model.logits(host (B, num_labels))
//   model.save_pretrained(dir): config.json + model.safetensors that transformers loads back
//
// Shapes: B batch, T sequence, N = B*T rows, C channels, NH heads, L layers, F intermediate size, V vocab,
// P position rows (cfg.position_rows()), TV token types, NL labels. Per-layer tensors are stacked layer first.
#pragma once
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/safetensors.h"  // safetensors_open (the HF name prefix, whether the head is present)
#include "common/tensors.h"
#include "model/config.h"
#include "model/model_common.h"  // ActivationArena, check_tokens
#include "model/sites.h"         // the six sites: SiteIndex, apply_recompute, wire_sites
#include "model/weights.h"

// One batch as the host holds it (the model validates and uploads it).
struct EncoderBatch {
    const int32_t* input_ids = nullptr;       // (B, T) token ids in [0, V)
    const int32_t* attention_mask = nullptr;  // (B, T) 1 for each row's real tokens, then 0 (right padding)
    const int32_t* token_type_ids = nullptr;  // (B, T) in [0, TV), or null: all 0 (RoBERTa has one type)
    const float* labels = nullptr;            // (B) the class (a whole number in [0, NL)) or, for NL == 1, the
                                              // regression target; NaN marks an unlabelled row; null: none
};

// Hugging Face's create_position_ids_from_input_ids: a non-pad token's position is pad + its count among the
// row's non-pad tokens so far (so pad + 1 + index for a right-padded row); a pad token's position is pad.
inline void roberta_position_ids(int32_t* pos, const int32_t* ids, int B, int T, int pad) {
    for (int b = 0; b < B; b++) {
        int count = 0;
        for (int t = 0; t < T; t++) {
            const int32_t id = ids[(size_t)b * T + t];
            pos[(size_t)b * T + t] = id == pad ? pad : pad + ++count;
        }
    }
}

template <typename T>
struct RobertaWeights {
    T* wte;       // (V, C)      word embeddings (row pad: nn.Embedding's padding_idx, never gets a gradient)
    T* wpe;       // (P, C)      position embeddings (row pad likewise)
    T* tte;       // (TV, C)     token-type embeddings
    T* lnew;      // (C)         embedding LayerNorm
    T* lneb;      // (C)
    T* qkvw;      // (L, 3C, C)  rows: query, key, value
    T* qkvb;      // (L, 3C)
    T* attprojw;  // (L, C, C)   attention.output.dense
    T* attprojb;  // (L, C)
    T* ln1w;      // (L, C)      attention.output.LayerNorm (after the attention residual)
    T* ln1b;      // (L, C)
    T* fcw;       // (L, F, C)   intermediate.dense
    T* fcb;       // (L, F)
    T* fcprojw;   // (L, C, F)   output.dense
    T* fcprojb;   // (L, C)
    T* ln2w;      // (L, C)      output.LayerNorm (after the MLP residual)
    T* ln2b;      // (L, C)
    T* clsw;      // (C, C)      classifier.dense
    T* clsb;      // (C)
    T* outw;      // (NL, C)     classifier.out_proj
    T* outb;      // (NL)
};

template <class Backend>
struct Roberta {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;

    ModelConfig cfg;
    Backend& be;

    std::vector<ParamSpec> param_specs;
    size_t num_parameters = 0;
    size_t param_buffer_numel = 0;
    act_t* params_memory = nullptr;
    grad_t* grads_memory = nullptr;
    RobertaWeights<act_t> params;
    RobertaWeights<grad_t> grads;

    int B = 0, T = 0;  // the batch in flight: (B, T) rows of the arena, T <= T_capacity (set_seq_len)
    int T_capacity = 0;  // the arena's sequence length (allocate_activations)
    struct Activations {
        int32_t* inputs;      // (N) token ids
        int32_t* type_ids;    // (N) token types
        int32_t* pos_ids;     // (N) position ids (roberta_position_ids)
        int32_t* kv_len;      // (B) real tokens per row: the attention's key-padding mask
        int32_t* cls_rows;    // (B) b * T: the row of each sequence's first token in (N, C)
        int32_t* targets;     // (B) class, 0 for a labelled regression row, -1 unlabelled
        float* scores;        // (B) regression targets (NL == 1)
        act_t* emb;           // (N, C) word + type + position embeddings: the embedding LN's input (exact)
        float* emb_mean;      // (N)
        float* emb_rstd;      // (N)
        act_t* qkv;           // (L, N, 3C) attention inputs (exact)
        act_t* atty;          // (L, N, C), or (N, C) with --recompute-attention: attention output O
        float* lse;           // (L, B, NH, T), layers lse_layer_stride apart
        float* ln1_mean;      // (L, N)
        float* ln1_rstd;      // (L, N)
        float* ln2_mean;      // (L, N)
        float* ln2_rstd;      // (L, N)
        act_t* cls_in;        // (B, C) the encoder's output at each first token: classifier.dense's input
        act_t* cls_hidden;    // (B, C) tanh(dense(cls_in)): out_proj's input and tanh's backward
        float* logits;        // (B, NL) fp32 in every build: STS-B's score keeps its precision
        act_t* dlogits;       // (B, NL) the loss gradient, left by the training forward for backward
        float* losses;        // (B)
        act_t* scratch_btc;   // (N, C) branch outputs and the encoder output in forward; gradients in backward
        act_t* dresid;        // (N, C) gradient of the block output / LN1 input
        act_t* scratch_wide;  // (N, max(3C, F)) gradients of qkv / the MLP hidden; the head's (B, C) gradients
        // transient full-width buffers of compressed sites (size 0 when their sites are not compressed)
        act_t* t_resid;       // (N, C) LN1 / LN2 inputs
        act_t* t_ln;          // (N, C) block input / LN1 output
        act_t* t_mlp_in;      // (N, F) GeLU input
        act_t* t_mlp_out;     // (N, F) GeLU output
        act_t* prac_fp8_block;  // (min(N, 8192), max r) --prac-storage fp8: rows of X·P (prac/site.h)
        float* prac_tmp;      // (max OC, max r) factored weight-gradient scratch
    } acts;
    ActivationArena arena;

    // Saved-for-backward tensors that PRAC may compress, per layer (post-LN, so the roles of GPT-2's six sites
    // move: the residual stream between blocks is a LayerNorm *output* here, the input of q/k/v):
    //   x          block input (the previous LN2's output, or the embedding LN's), qkv's input      linear
    //   resid      LN1 input, x + attention branch                                                 nonlinear
    //   h          LN1 output, the fc matmul's input (and the MLP residual)                        linear
    //   resid_mid  LN2 input, h + MLP branch                                                       nonlinear
    //   fch        GeLU input (N, F)                                                               nonlinear
    //   fch_gelu   GeLU output, fcproj's input                                                      linear
    // Exact: q, k, v, O, LSE, the embedding sum (embedding LN's input), the norm statistics and the head's (B, C)
    // tensors. The encoder's output x_L is needed only at the B first tokens (cls_in), so it is not stored.
    enum {  // slots of model/sites.h's SiteIndex, by role: the qkv input, the fc input, the norm inputs
        X = SITE_LN1, RESID = SITE_RESID, H = SITE_LN2, RESID_MID = SITE_RESID_MID, FCH = SITE_FCH,
        FCH_GELU = SITE_ACT_OUT
    };
    PracOptions prac;
    std::vector<ActSite<Backend>> sites;
    PracSchedule sched;
    PracPendingPool<act_t> pending_bases;  // --prac-refresh-overlap (prac/site.h)
    FILE* prac_log = stdout;
    ActivationDump dump;

    Recompute recompute;  // --recompute 1: fch_gelu from fch; 2: also x and h from the norm inputs (model/sites.h)

    // called by backward() as each layer's gradients complete, then with -1 (GPT2::on_layer_grads says how)
    std::function<void(int layer)> on_layer_grads;

    Roberta(Backend& backend, const ModelConfig& config, const PracOptions& prac_options = PracOptions(),
            Recompute recompute_options = Recompute())
        : cfg(config), be(backend), prac(prac_options), recompute(recompute_options) {
        if (cfg.arch != Arch::ROBERTA) fail("internal: Roberta built from a %s config", arch_name(cfg.arch));
        validate_config(cfg);  // the caller may have changed num_labels
        be.check_attention_shape(cfg.channels, cfg.num_heads);
        size_t V = cfg.vocab_size, C = cfg.channels, L = cfg.num_layers, F = cfg.hidden, NL = cfg.num_labels;
        param_buffer_numel = layout_params(
            {
                {"wte", V * C, true},
                {"wpe", (size_t)cfg.position_rows() * C, true},
                {"tte", (size_t)cfg.type_vocab_size * C, true},
                {"lnew", C, false},
                {"lneb", C, false},
                {"qkvw", L * 3 * C * C, true},
                {"qkvb", L * 3 * C, false},
                {"attprojw", L * C * C, true},
                {"attprojb", L * C, false},
                {"ln1w", L * C, false},
                {"ln1b", L * C, false},
                {"fcw", L * F * C, true},
                {"fcb", L * F, false},
                {"fcprojw", L * C * F, true},
                {"fcprojb", L * C, false},
                {"ln2w", L * C, false},
                {"ln2b", L * C, false},
                {"clsw", C * C, true},
                {"clsb", C, false},
                {"outw", NL * C, true},
                {"outb", NL, false},
            },
            param_specs);
        num_parameters = count_params(param_specs);
        params_memory = (act_t*)be.alloc(param_buffer_numel * sizeof(act_t));
        grads_memory = (grad_t*)be.alloc(param_buffer_numel * sizeof(grad_t));
        point_weights(params, params_memory);
        point_weights(grads, grads_memory);
        int Li = cfg.num_layers, Ci = cfg.channels, Fi = cfg.hidden;
        sites = {  // in SiteIndex order: resid, x (the "ln1" slot), resid_mid, h (the "ln2" slot), fch, fch_gelu
            make_site<Backend>("resid", RESID, SiteClass::NONLINEAR, Ci, Li, Li, prac),
            make_site<Backend>("x", X, SiteClass::LINEAR, Ci, Li, Li, prac),
            make_site<Backend>("resid_mid", RESID_MID, SiteClass::NONLINEAR, Ci, Li, Li, prac),
            make_site<Backend>("h", H, SiteClass::LINEAR, Ci, Li, Li, prac),
            make_site<Backend>("fch", FCH, SiteClass::NONLINEAR, Fi, Li, Li, prac),
            make_site<Backend>("fch_gelu", FCH_GELU, SiteClass::LINEAR, Fi, Li, Li, prac),
        };
        sched.units = (int)sites.size() * Li;
        // recompute 2 rebuilds x from resid_mid (the previous LN2) and h from resid (LN1): both must be exact
        apply_recompute(sites, recompute.level, FCH_GELU, X, H, RESID, RESID_MID);
    }
    ~Roberta() {
        discard_refreshes(be, sites);  // solves still in flight write into the arena: wait for them first
        arena.release(be);
        be.free(grads_memory, param_buffer_numel * sizeof(grad_t));
        be.free(params_memory, param_buffer_numel * sizeof(act_t));
    }
    Roberta(const Roberta&) = delete;
    Roberta& operator=(const Roberta&) = delete;

    template <typename W>
    void point_weights(RobertaWeights<W>& w, W* base) {
        W** ptrs[] = {&w.wte,  &w.wpe,  &w.tte,     &w.lnew,    &w.lneb, &w.qkvw, &w.qkvb,
                      &w.attprojw, &w.attprojb, &w.ln1w, &w.ln1b, &w.fcw, &w.fcb, &w.fcprojw,
                      &w.fcprojb, &w.ln2w, &w.ln2b, &w.clsw, &w.clsb, &w.outw, &w.outb};
        static_assert(sizeof(ptrs) / sizeof(ptrs[0]) == sizeof(RobertaWeights<W>) / sizeof(W*), "every tensor");
        for (size_t i = 0; i < param_specs.size(); i++) *ptrs[i] = base + param_specs[i].offset;
    }

    std::vector<TensorSpec> activation_specs(int B, int T, std::vector<TensorSpec>& bases) {
        size_t N = (size_t)B * T, C = cfg.channels, L = cfg.num_layers, F = cfg.hidden, NH = cfg.num_heads;
        size_t NL = cfg.num_labels;
        DType act = Backend::act_dtype, f32 = DType::F32, i32 = DType::I32;
        Activations& a = acts;
        auto& S = sites;
        using M = MemCategory;
        std::vector<TensorSpec> specs = {
            {"inputs", (void**)&a.inputs, N, i32, M::INPUTS},
            {"type_ids", (void**)&a.type_ids, N, i32, M::INPUTS},
            {"pos_ids", (void**)&a.pos_ids, N, i32, M::INPUTS},
            {"kv_len", (void**)&a.kv_len, (size_t)B, i32, M::INPUTS},
            {"cls_rows", (void**)&a.cls_rows, (size_t)B, i32, M::INPUTS},
            {"targets", (void**)&a.targets, (size_t)B, i32, M::INPUTS},
            {"scores", (void**)&a.scores, (size_t)B, f32, M::INPUTS},
            {"emb", (void**)&a.emb, N * C, act, M::SAVED_EXACT},
            {"emb_mean", (void**)&a.emb_mean, N, f32, M::SAVED_EXACT},
            {"emb_rstd", (void**)&a.emb_rstd, N, f32, M::SAVED_EXACT},
            {"qkv", (void**)&a.qkv, L * N * 3 * C, act, M::SAVED_EXACT},
            {"atty", (void**)&a.atty, recompute.attention_out ? N * C : L * N * C, act,
             recompute.attention_out ? M::TRANSIENT : M::SAVED_EXACT},
            {"lse", (void**)&a.lse, L * lse_layer_stride(N, NH), f32, M::SAVED_EXACT},
            {"ln1_mean", (void**)&a.ln1_mean, L * N, f32, M::SAVED_EXACT},
            {"ln1_rstd", (void**)&a.ln1_rstd, L * N, f32, M::SAVED_EXACT},
            {"ln2_mean", (void**)&a.ln2_mean, L * N, f32, M::SAVED_EXACT},
            {"ln2_rstd", (void**)&a.ln2_rstd, L * N, f32, M::SAVED_EXACT},
            {"cls_in", (void**)&a.cls_in, (size_t)B * C, act, M::SAVED_EXACT},
            {"cls_hidden", (void**)&a.cls_hidden, (size_t)B * C, act, M::SAVED_EXACT},
            {"logits", (void**)&a.logits, (size_t)B * NL, f32, M::LOSS},
            {"dlogits", (void**)&a.dlogits, (size_t)B * NL, act, M::LOSS},
            {"losses", (void**)&a.losses, (size_t)B, f32, M::LOSS},
            {"scratch_btc", (void**)&a.scratch_btc, N * C, act},
            {"dresid", (void**)&a.dresid, N * C, act},
            {"scratch_wide", (void**)&a.scratch_wide, N * std::max(3 * C, F), act},
            {"t_resid", (void**)&a.t_resid, S[RESID].compressed() || S[RESID_MID].compressed() ? N * C : 0, act},
            {"t_ln", (void**)&a.t_ln, S[X].compressed() || S[H].compressed() ? N * C : 0, act},
            {"t_mlp_in", (void**)&a.t_mlp_in, S[FCH].compressed() ? N * F : 0, act},
            {"t_mlp_out", (void**)&a.t_mlp_out, S[FCH_GELU].compressed() ? N * F : 0, act},
            {"prac_tmp", (void**)&a.prac_tmp,
             factored_grad_scratch(sites, {{X, 3 * (int)C}, {H, (int)F}, {FCH_GELU, (int)C}}), f32},
            {"prac_fp8_block", (void**)&a.prac_fp8_block, fp8_block_scratch(sites, N), act},
        };
        bases.clear();
        for (ActSite<Backend>& s : sites) site_add_specs(s, N, specs, bases);
        overlap_add_spec(sites, pending_bases, prac, sched.units, bases);
        return specs;
    }

    void allocate_activations(int batch, int seq_len) {
        if (batch == B && seq_len == T_capacity) {
            T = seq_len;
            return;
        }
        if (seq_len > cfg.max_seq_len)
            fail("sequence length %d exceeds the model's %d positions\n---> HINT: truncate to %d tokens or less",
                 seq_len, cfg.max_seq_len, cfg.max_seq_len);
        B = batch;
        T = T_capacity = seq_len;
        std::vector<TensorSpec> bases;
        std::vector<TensorSpec> specs = activation_specs(B, T, bases);
        arena.allocate(be, std::move(specs), std::move(bases));
        // x and h share t_ln (never live together), resid and resid_mid share t_resid; t_ln is dead in backward (x
        // and h are linear sites: never restored), so their fp8 weight_grad dequantizes there
        wire_sites(sites, acts.t_resid, acts.t_ln, acts.t_mlp_in, acts.t_mlp_out, acts.prac_tmp, acts.prac_fp8_block,
                   acts.t_ln);
        host_ids.clear();  // sized at the first upload_batch: a memory plan (train/planner.cpp) never uploads
        host_scores.clear();
    }

    // The next batches are (B, seq_len), seq_len <= the arena's T_capacity (dynamic padding: each batch padded to its
    // longest row). Every tensor's offsets come from N = B * T, so a shorter batch uses the first part of each
    // arena tensor and nothing is reallocated; PRAC's bases (n, r) do not depend on N.
    void set_seq_len(int seq_len) {
        if (seq_len < 1 || seq_len > T_capacity)
            fail("internal: a batch of length %d in an arena allocated for %d", seq_len, T_capacity);
        T = seq_len;
    }

    // Hugging Face's _init_weights: every weight and embedding N(0, init_std), biases 0, LayerNorm weights 1, the
    // padding rows of the word and position embeddings 0. On the host in fp32, uploaded.
    void init_weights(uint64_t seed) {
        std::vector<float> host(param_buffer_numel, 0.0f);
        for (size_t i = 0; i < param_specs.size(); i++) init_tensor(host.data(), i, seed);
        be.upload_f32(params_memory, host.data(), param_buffer_numel);
    }
    void init_tensor(float* host, size_t i, uint64_t seed) const {
        const ParamSpec& s = param_specs[i];
        float* p = host + s.offset;
        if (s.name == "lnew" || s.name == "ln1w" || s.name == "ln2w") {
            for (size_t j = 0; j < s.numel; j++) p[j] = 1.0f;
        } else if (s.decay) {  // the matrices and embeddings
            fill_normal(p, s.numel, cfg.init_std, seed, i);
            if (s.name == "wte" || s.name == "wpe")
                for (int c = 0; c < cfg.channels; c++) p[(size_t)cfg.pad_token_id * cfg.channels + c] = 0.0f;
        } else {
            for (size_t j = 0; j < s.numel; j++) p[j] = 0.0f;
        }
    }

    // Hugging Face RobertaForSequenceClassification names (nn.Linear weights are (out, in) as ours). prefix:
    // "roberta." (or "" for a bare RobertaModel file) before the encoder's names; the head's have none.
    std::vector<HFTensor> hf_map(const std::string& prefix = "roberta.", bool with_head = true) const {
        int C = cfg.channels, F = cfg.hidden;
        auto off = [&](const char* name) { return param_offset(name); };
        std::vector<HFTensor> m;
        auto mat = [&](const std::string& name, size_t offset, int rows, int cols) {
            m.push_back({name, offset, rows, cols, false, true});
        };
        auto vec = [&](const std::string& name, size_t offset, int n) { m.push_back({name, offset, 1, n, false}); };
        std::string e = prefix + "embeddings.";
        mat(e + "word_embeddings.weight", off("wte"), cfg.vocab_size, C);
        mat(e + "position_embeddings.weight", off("wpe"), cfg.position_rows(), C);
        mat(e + "token_type_embeddings.weight", off("tte"), cfg.type_vocab_size, C);
        vec(e + "LayerNorm.weight", off("lnew"), C);
        vec(e + "LayerNorm.bias", off("lneb"), C);
        const char* qkv_names[] = {"query", "key", "value"};
        for (int l = 0; l < cfg.num_layers; l++) {
            std::string h = prefix + "encoder.layer." + std::to_string(l) + ".";
            for (int i = 0; i < 3; i++) {
                std::string s = h + "attention.self." + qkv_names[i];
                mat(s + ".weight", off("qkvw") + ((size_t)l * 3 + i) * C * C, C, C);
                vec(s + ".bias", off("qkvb") + ((size_t)l * 3 + i) * C, C);
            }
            mat(h + "attention.output.dense.weight", off("attprojw") + (size_t)l * C * C, C, C);
            vec(h + "attention.output.dense.bias", off("attprojb") + (size_t)l * C, C);
            vec(h + "attention.output.LayerNorm.weight", off("ln1w") + (size_t)l * C, C);
            vec(h + "attention.output.LayerNorm.bias", off("ln1b") + (size_t)l * C, C);
            mat(h + "intermediate.dense.weight", off("fcw") + (size_t)l * F * C, F, C);
            vec(h + "intermediate.dense.bias", off("fcb") + (size_t)l * F, F);
            mat(h + "output.dense.weight", off("fcprojw") + (size_t)l * C * F, C, F);
            vec(h + "output.dense.bias", off("fcprojb") + (size_t)l * C, C);
            vec(h + "output.LayerNorm.weight", off("ln2w") + (size_t)l * C, C);
            vec(h + "output.LayerNorm.bias", off("ln2b") + (size_t)l * C, C);
        }
        if (with_head) {
            mat("classifier.dense.weight", off("clsw"), C, C);
            vec("classifier.dense.bias", off("clsb"), C);
            mat("classifier.out_proj.weight", off("outw"), cfg.num_labels, C);
            vec("classifier.out_proj.bias", off("outb"), cfg.num_labels);
        }
        return m;
    }
    // What transformers itself skips when it loads a RobertaForSequenceClassification: the position_ids buffer of
    // older files, the pooler (this model has none) and a masked-LM head (roberta-base's own checkpoint).
    static std::vector<std::string> hf_ignorable() {
        return {"embeddings.position_ids",   "pooler.dense.weight",       "pooler.dense.bias",
                "lm_head.dense.weight",      "lm_head.dense.bias",        "lm_head.layer_norm.weight",
                "lm_head.layer_norm.bias",   "lm_head.bias",              "lm_head.decoder.weight",
                "lm_head.decoder.bias"};
    }
    static std::string hf_prefix_of(const std::vector<std::string>& names) {
        for (const std::string& n : names)
            if (n == "embeddings.word_embeddings.weight") return "";
        return "roberta.";
    }

    // Loads a safetensors file of Hugging Face names (strict: every encoder tensor with its exact shape, nothing
    // unknown). The head: loaded when the file has any classifier.* tensor (then all four, shaped for num_labels),
    // else freshly initialized from seed as transformers does for a pretrained encoder (or always, with
    // fresh_head: a checkpoint fine-tuned for another label count). head_rows (not empty): the file's head rows in
    // this model's class order (class i = the file's row head_rows[i]: train/finetune.h, head_rows_in_task_order).
    // Returns whether the head came from the file.
    bool load_weights(const std::string& path, uint64_t seed = 0, bool fresh_head = false,
                      const std::vector<int>& head_rows = {}) {
        std::vector<std::string> names = safetensors_open(path).names();
        bool file_head = false;
        for (const std::string& n : names) file_head = file_head || n.rfind("classifier.", 0) == 0;
        bool use_head = file_head && !fresh_head;
        std::vector<std::string> ignorable = hf_ignorable();
        if (file_head && fresh_head)
            for (const char* n : {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
                                  "classifier.out_proj.bias"})
                ignorable.push_back(n);
        std::vector<float> host(param_buffer_numel, 0.0f);
        if (!use_head)
            for (size_t i = 0; i < param_specs.size(); i++)
                if (is_head(param_specs[i].name)) init_tensor(host.data(), i, seed);
        hf_load(path, hf_map(hf_prefix_of(names), use_head), ignorable, host.data(), cfg);
        if (use_head && !head_rows.empty()) {
            const size_t C = (size_t)cfg.channels, outw = param_offset("outw"), outb = param_offset("outb");
            const std::vector<float> w(host.begin() + outw, host.begin() + outw + head_rows.size() * C),
                b(host.begin() + outb, host.begin() + outb + head_rows.size());
            for (size_t i = 0; i < head_rows.size(); i++) {  // out_proj (NL, C) and its bias (NL)
                std::copy_n(w.begin() + head_rows[i] * C, C, host.begin() + outw + i * C);
                host[outb + i] = b[(size_t)head_rows[i]];
            }
        }
        be.upload_f32(params_memory, host.data(), param_buffer_numel);
        return use_head;
    }
    bool load_pretrained(const std::string& dir, uint64_t seed = 0, bool fresh_head = false,
                         const std::vector<int>& head_rows = {}) {
        return load_weights(dir + "/model.safetensors", seed, fresh_head, head_rows);
    }
    size_t param_offset(const char* name) const {
        for (const ParamSpec& s : param_specs)
            if (s.name == name) return s.offset;
        throw std::logic_error(name);
    }
    static bool is_head(const std::string& name) {
        return name == "clsw" || name == "clsb" || name == "outw" || name == "outb";
    }
    void save_weights(const std::string& path) { save_hf_weights(be, path, hf_map(), params_memory, param_buffer_numel); }
    // config.json + model.safetensors: RobertaForSequenceClassification.from_pretrained(dir) loads it. base_config:
    // the text of the config.json the model was read from, whose other keys (dropout, token ids) the new one keeps.
    void save_pretrained(const std::string& dir, const std::string& base_config = "") {
        std::error_code ec;
        std::filesystem::create_directories(dir, ec);
        CHECK_USER(!ec, "cannot create directory %s: %s", dir.c_str(), ec.message().c_str());
        write_hf_config(dir + "/config.json", cfg, base_config);
        save_weights(dir + "/model.safetensors");
    }

    void zero_grad() { be.zero(grads_memory, param_buffer_numel * sizeof(grad_t)); }

    // ------------------------------------------------------------------------------------------------
    // forward: embeddings -> L post-LN blocks -> head on the first tokens -> loss. A training forward also
    // computes the loss gradient (dlogits, for backward) with grad_scale = the weight of one row's loss (1 /
    // labelled rows of the step, all its micro-batches), and saves for backward (compressing, refreshing bases when
    // due). forward returns the micro-batch's mean loss over its labelled rows (a readout, as GPT2's); train_forward
    // adds it / loss_divisor to the backend's step loss instead (be.loss_read(); loss_divisor = the step's rows / the
    // micro-batch's, so that the sum is the step's mean loss: train/finetune.h, loss_divisor). eval_forward saves
    // nothing and returns the mean loss (0 without labels); logits() reads the (B, NL) logits of either.
    float forward(const EncoderBatch& batch, float grad_scale) {
        train_forward(batch, grad_scale, 1);
        return be.loss_read();
    }
    // The end of a step for PRAC's refreshes in flight: with --prac-refresh-overlap D the bases refreshed D - 1 steps
    // ago take effect here (nothing otherwise). After the step's last backward, before the update and anything that
    // saves the bases.
    void install_refreshes() { ::install_refreshes(be, sites, sched.step, prac_log); }
    void train_forward(const EncoderBatch& batch, float grad_scale, float loss_divisor) {
        if (!(grad_scale > 0.0f)) fail("internal: a training forward needs a loss weight > 0 (got %g)", grad_scale);
        forward_pass(batch, true, grad_scale, loss_divisor);
    }
    float eval_forward(const EncoderBatch& batch) {
        forward_pass(batch, false, 0.0f, 1);
        return be.loss_read();
    }
    void logits(float* host_out) { be.download(host_out, acts.logits, (size_t)B * cfg.num_labels * sizeof(float)); }

    act_t* attention_out(int l, int N) { return acts.atty + (recompute.attention_out ? 0 : (size_t)l * N * cfg.channels); }

    // Checks a host batch and uploads it with the derived index arrays (positions, key lengths, first-token rows,
    // targets).
    void upload_batch(const EncoderBatch& batch) {
        int N = B * T, NL = cfg.num_labels;
        if (B == 0) fail("internal: Roberta forward before allocate_activations");
        CHECK_USER(batch.input_ids && batch.attention_mask, "internal: a batch needs input_ids and attention_mask");
        check_tokens(batch.input_ids, N, cfg.vocab_size);
        if (host_ids.empty()) {  // for the arena's capacity, once: an upload in flight reads these
            host_ids.assign((size_t)B * T_capacity * 3 + (size_t)B * 4, 0);
            host_scores.assign(B, 0.0f);
        }
        int32_t* pos = host_ids.data();  // (N) then types (N), kv_len (B), cls_rows (B), targets (B)
        int32_t* types = pos + N;
        int32_t* kv = types + N;
        int32_t* rows = kv + B;
        int32_t* targets = rows + B;
        roberta_position_ids(pos, batch.input_ids, B, T, cfg.pad_token_id);
        for (int i = 0; i < N; i++) {
            types[i] = batch.token_type_ids ? batch.token_type_ids[i] : 0;
            if (types[i] < 0 || types[i] >= cfg.type_vocab_size)
                fail("token type %d at position %d is outside [0, %d)\n---> HINT: RoBERTa has %d token type(s); "
                     "pass no token_type_ids", types[i], i, cfg.type_vocab_size, cfg.type_vocab_size);
        }
        for (int b = 0; b < B; b++) {
            const int32_t* m = batch.attention_mask + (size_t)b * T;
            int n = 0;
            while (n < T && m[n] == 1) n++;
            for (int t = n; t < T; t++)
                if (m[t] != 0)
                    fail("attention_mask row %d is not right-padded: value %d at position %d after its %d real "
                         "tokens\n---> HINT: the encoder takes 1 for each real token, then 0 for the padding",
                         b, m[t], t, n);
            if (n == 0) fail("attention_mask row %d has no real token\n---> HINT: every row starts with <s>", b);
            kv[b] = n;
            rows[b] = b * T;
            float y = batch.labels ? batch.labels[b] : NAN;
            host_scores[b] = std::isnan(y) ? 0.0f : y;
            if (std::isnan(y)) {
                targets[b] = -1;
            } else if (NL == 1) {
                CHECK_USER(std::isfinite(y), "regression label %g of row %d is not finite", y, b);
                targets[b] = 0;
            } else {
                if (!(y == std::floor(y) && y >= 0 && y < NL))
                    fail("label %g of row %d is not a class in [0, %d)\n---> HINT: the model has num_labels = %d; "
                         "set it to the task's", y, b, NL, NL);
                targets[b] = (int32_t)y;
            }
        }
        be.upload_async(acts.inputs, batch.input_ids, (size_t)N * sizeof(int32_t));
        be.upload_async(acts.pos_ids, pos, (size_t)N * sizeof(int32_t));
        be.upload_async(acts.type_ids, types, (size_t)N * sizeof(int32_t));
        be.upload_async(acts.kv_len, kv, (size_t)B * sizeof(int32_t));
        be.upload_async(acts.cls_rows, rows, (size_t)B * sizeof(int32_t));
        be.upload_async(acts.targets, targets, (size_t)B * sizeof(int32_t));
        be.upload_async(acts.scores, host_scores.data(), (size_t)B * sizeof(float));
    }

    void forward_pass(const EncoderBatch& batch, bool train, float grad_scale, float loss_divisor) {
        int C = cfg.channels, NH = cfg.num_heads, F = cfg.hidden, L = cfg.num_layers, NL = cfg.num_labels;
        int N = B * T;
        upload_batch(batch);
        ActSite<Backend>&x_site = sites[X], &resid = sites[RESID], &h_site = sites[H], &resid_mid = sites[RESID_MID],
                        &fch = sites[FCH], &fch_gelu = sites[FCH_GELU];
        auto save = [&](ActSite<Backend>& site, int l) {  // as GPT2's: only when training
            if (!train) return;
            if (dump.wants(site.name, l, sched)) dump.write(be, site.fwd(l, N), N, site.n, site.stride());
            int unit = l * (int)sites.size() + (int)site.id;
            site.save(be, l, N, sched.due(unit), prac.seed, prac_log);
        };

        // embeddings: (word + token type) + position, in transformers' order; each table a row gather
        act_t* tmp = acts.scratch_btc;
        be.encoder_forward(acts.emb, acts.inputs, params.wte, nullptr, B, T, C);
        be.encoder_forward(tmp, acts.type_ids, params.tte, nullptr, B, T, C);
        be.residual_forward(acts.emb, acts.emb, tmp, (size_t)N * C);
        be.encoder_forward(tmp, acts.pos_ids, params.wpe, nullptr, B, T, C);
        be.residual_forward(acts.emb, acts.emb, tmp, (size_t)N * C);
        be.layernorm_forward(x_site.fwd(0, N), acts.emb_mean, acts.emb_rstd, acts.emb, params.lnew, params.lneb, N,
                             C, cfg.norm_eps);
        for (int l = 0; l < L; l++) {
            act_t* x = x_site.fwd(l, N);  // (N, C) block input
            act_t* l_qkv = acts.qkv + (size_t)l * N * 3 * C;
            act_t* l_atty = attention_out(l, N);
            float* l_lse = acts.lse + (size_t)l * lse_layer_stride(N, NH);
            act_t* l_resid = resid.fwd(l, N);
            act_t* l_h = h_site.fwd(l, N);
            act_t* l_fch = fch.fwd(l, N);
            act_t* l_fch_gelu = fch_gelu.fwd(l, N);
            act_t* l_resid_mid = resid_mid.fwd(l, N);
            // the block output: the next block's input, or after the last block the encoder output (only its B
            // first-token rows are used: gathered below, never saved)
            act_t* out = l + 1 < L ? x_site.fwd(l + 1, N) : acts.scratch_btc;

            // attention: h = LN1(x + attproj(attention(qkv(x))))
            be.matmul_forward(l_qkv, x, params.qkvw + (size_t)l * 3 * C * C, params.qkvb + (size_t)l * 3 * C, N, C,
                              3 * C);
            save(x_site, l);
            be.attention_forward(l_atty, l_lse, l_qkv, B, T, C, NH, false, acts.kv_len);
            be.matmul_forward(acts.scratch_btc, l_atty, params.attprojw + (size_t)l * C * C,
                              params.attprojb + (size_t)l * C, N, C, C);
            be.residual_forward(l_resid, x, acts.scratch_btc, (size_t)N * C);
            be.layernorm_forward(l_h, acts.ln1_mean + (size_t)l * N, acts.ln1_rstd + (size_t)l * N, l_resid,
                                 params.ln1w + (size_t)l * C, params.ln1b + (size_t)l * C, N, C, cfg.norm_eps);
            save(resid, l);
            // MLP: out = LN2(h + fcproj(gelu(fc(h))))
            be.matmul_forward(l_fch, l_h, params.fcw + (size_t)l * F * C, params.fcb + (size_t)l * F, N, C, F);
            save(h_site, l);
            be.gelu_erf_forward(l_fch_gelu, l_fch, (size_t)N * F);
            save(fch, l);
            be.matmul_forward(acts.scratch_btc, l_fch_gelu, params.fcprojw + (size_t)l * C * F,
                              params.fcprojb + (size_t)l * C, N, F, C);
            save(fch_gelu, l);
            be.residual_forward(l_resid_mid, l_h, acts.scratch_btc, (size_t)N * C);
            be.layernorm_forward(out, acts.ln2_mean + (size_t)l * N, acts.ln2_rstd + (size_t)l * N, l_resid_mid,
                                 params.ln2w + (size_t)l * C, params.ln2b + (size_t)l * C, N, C, cfg.norm_eps);
            save(resid_mid, l);
        }
        // head on each sequence's first token: logits = out_proj(tanh(dense(x_L[b, 0])))
        be.encoder_forward(acts.cls_in, acts.cls_rows, acts.scratch_btc, nullptr, B, 1, C);  // row gather
        be.matmul_forward(acts.cls_hidden, acts.cls_in, params.clsw, params.clsb, B, C, C);
        be.tanh_forward(acts.cls_hidden, acts.cls_hidden, (size_t)B * C);
        be.seqcls_logits(acts.logits, acts.cls_hidden, params.outw, params.outb, B, C, NL);
        be.seqcls_loss(acts.losses, train ? acts.dlogits : nullptr, acts.logits, acts.targets, acts.scores, B, NL,
                       grad_scale);
        if (train) sched.end_micro_batch();
        be.loss_add(acts.losses, acts.targets, B, loss_divisor);
    }

    // backward: from dlogits (left by the training forward) down to the embeddings. Parameter gradients
    // accumulate (+=); zero_grad() once per optimizer step.
    void backward() {
        int C = cfg.channels, NH = cfg.num_heads, F = cfg.hidden, L = cfg.num_layers, NL = cfg.num_labels;
        int N = B * T;
        act_t* dresid = acts.dresid;       // (N, C)
        act_t* dbtc = acts.scratch_btc;    // (N, C)
        act_t* dwide = acts.scratch_wide;  // (N, max(3C, F))
        ActSite<Backend>&x_site = sites[X], &resid = sites[RESID], &h_site = sites[H], &resid_mid = sites[RESID_MID],
                        &fch = sites[FCH], &fch_gelu = sites[FCH_GELU];

        // head: the gradient of the encoder output is nonzero only at the B first-token rows
        act_t* dhidden = dwide;                   // (B, C)
        act_t* dcls = dwide + (size_t)B * C;      // (B, C)
        be.matmul_backward_weight(grads.outw, grads.outb, acts.dlogits, acts.cls_hidden, B, C, NL);
        be.matmul_backward_input(dhidden, acts.dlogits, params.outw, B, C, NL, false);
        be.tanh_backward(dhidden, acts.cls_hidden, dhidden, (size_t)B * C);
        be.matmul_backward_weight(grads.clsw, grads.clsb, dhidden, acts.cls_in, B, C, C);
        be.matmul_backward_input(dcls, dhidden, params.clsw, B, C, C, false);
        be.zero(dresid, (size_t)N * C * sizeof(act_t));
        be.encoder_backward(dresid, nullptr, dcls, acts.cls_rows, B, 1, C);  // row scatter: dresid[b*T] += dcls[b]

        for (int l = L - 1; l >= 0; l--) {
            act_t* l_qkv = acts.qkv + (size_t)l * N * 3 * C;
            act_t* l_atty = attention_out(l, N);
            float* l_lse = acts.lse + (size_t)l * lse_layer_stride(N, NH);
            float* ln1_mean = acts.ln1_mean + (size_t)l * N;
            float* ln1_rstd = acts.ln1_rstd + (size_t)l * N;

            // LN2: dresid is the gradient of the block output; dbtc becomes that of resid_mid
            be.zero(dbtc, (size_t)N * C * sizeof(act_t));
            be.layernorm_backward(dbtc, grads.ln2w + (size_t)l * C, grads.ln2b + (size_t)l * C, dresid,
                                  resid_mid.restore(be, l, N), params.ln2w + (size_t)l * C,
                                  acts.ln2_mean + (size_t)l * N, acts.ln2_rstd + (size_t)l * N, N, C);
            // MLP branch; its input gradient adds to the residual's: dbtc becomes the gradient of h
            act_t* l_fch = fch.restore(be, l, N);
            if (fch_gelu.recompute) be.gelu_erf_forward(fch_gelu.slot(l, N), l_fch, (size_t)N * F);
            fch_gelu.weight_grad(be, l, N, grads.fcprojw + (size_t)l * C * F, grads.fcprojb + (size_t)l * C, dbtc, C);
            be.matmul_backward_input(dwide, dbtc, params.fcprojw + (size_t)l * C * F, N, F, C, false);
            be.gelu_erf_backward(dwide, l_fch, dwide, (size_t)N * F);
            if (h_site.recompute)  // --recompute 2: h = LN1(resid) again (resid is exact then; same statistics)
                be.layernorm_forward(h_site.slot(l, N), ln1_mean, ln1_rstd, resid.restore(be, l, N),
                                     params.ln1w + (size_t)l * C, params.ln1b + (size_t)l * C, N, C, cfg.norm_eps);
            h_site.weight_grad(be, l, N, grads.fcw + (size_t)l * F * C, grads.fcb + (size_t)l * F, dwide, F);
            be.matmul_backward_input(dbtc, dwide, params.fcw + (size_t)l * F * C, N, C, F, true);
            // LN1: dresid becomes the gradient of resid = x + attention branch
            be.zero(dresid, (size_t)N * C * sizeof(act_t));
            be.layernorm_backward(dresid, grads.ln1w + (size_t)l * C, grads.ln1b + (size_t)l * C, dbtc,
                                  resid.restore(be, l, N), params.ln1w + (size_t)l * C, ln1_mean, ln1_rstd, N, C);
            // attention branch; its input gradient adds to the residual's: dresid becomes the gradient of x
            if (recompute.attention_out)
                be.attention_forward(l_atty, l_lse, l_qkv, B, T, C, NH, false, acts.kv_len);
            be.matmul_backward_weight(grads.attprojw + (size_t)l * C * C, grads.attprojb + (size_t)l * C, dresid,
                                      l_atty, N, C, C);
            be.matmul_backward_input(dbtc, dresid, params.attprojw + (size_t)l * C * C, N, C, C, false);
            be.attention_backward(dwide, dbtc, l_qkv, l_atty, l_lse, B, T, C, NH, false, acts.kv_len);
            if (x_site.recompute) recompute_block_input(l, N);
            x_site.weight_grad(be, l, N, grads.qkvw + (size_t)l * 3 * C * C, grads.qkvb + (size_t)l * 3 * C, dwide,
                               3 * C);
            be.matmul_backward_input(dresid, dwide, params.qkvw + (size_t)l * 3 * C * C, N, C, 3 * C, true);
            if (on_layer_grads) on_layer_grads(l);
        }
        // embedding LN, then the three tables (row scatters); the padding rows of the word and position tables
        // get no gradient (nn.Embedding's padding_idx)
        be.zero(dbtc, (size_t)N * C * sizeof(act_t));
        be.layernorm_backward(dbtc, grads.lnew, grads.lneb, dresid, acts.emb, params.lnew, acts.emb_mean,
                              acts.emb_rstd, N, C);
        be.encoder_backward(grads.wte, nullptr, dbtc, acts.inputs, B, T, C);
        be.encoder_backward(grads.tte, nullptr, dbtc, acts.type_ids, B, T, C);
        be.encoder_backward(grads.wpe, nullptr, dbtc, acts.pos_ids, B, T, C);
        be.zero(grads.wte + (size_t)cfg.pad_token_id * C, (size_t)C * sizeof(grad_t));
        be.zero(grads.wpe + (size_t)cfg.pad_token_id * C, (size_t)C * sizeof(grad_t));
        if (on_layer_grads) on_layer_grads(-1);
    }

    // --recompute 2: block l's input x again, from the embedding LN (l = 0) or the previous block's LN2, with
    // their saved statistics rewritten to the same bits (their inputs are exact under recompute 2)
    void recompute_block_input(int l, int N) {
        int C = cfg.channels;
        act_t* x = sites[X].slot(l, N);
        if (l == 0) {
            be.layernorm_forward(x, acts.emb_mean, acts.emb_rstd, acts.emb, params.lnew, params.lneb, N, C,
                                 cfg.norm_eps);
            return;
        }
        size_t p = (size_t)(l - 1);
        be.layernorm_forward(x, acts.ln2_mean + p * N, acts.ln2_rstd + p * N, sites[RESID_MID].restore(be, l - 1, N),
                             params.ln2w + p * C, params.ln2b + p * C, N, C, cfg.norm_eps);
    }

  private:
    std::vector<int32_t> host_ids;  // staging of the derived index arrays (upload_batch)
    std::vector<float> host_scores;
};
