// Small pieces both models share around their forward pass.
#pragma once
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "model/config.h"
#include "common/tensors.h"
#include "model/weights.h"

// Floats between two layers' attention log-sum-exp slices (B, NH, T): N * NH rounded up to 4, so every layer's slice
// is 16-byte aligned as cuDNN's attention needs (a layer whose slice was not ran the slower Mma kernel instead, with
// other numerics, when B * T * NH is not a multiple of 4: GPT-2 XL's NH = 25 at an odd B * T)
inline size_t lse_layer_stride(size_t N, int NH) { return (N * (size_t)NH + 3) / 4 * 4; }

// Every input id must index the embedding table.
inline void check_tokens(const int32_t* tokens, int N, int V) {
    for (int i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            fail("input token %d at position %d is outside the vocabulary [0, %d)\n"
                 "---> HINT: were the shards made with this model's tokenizer?", tokens[i], i, V);
}

// Every parameter spec is stacked (L, ...) over the layers, layer first, except the tensors outside the layer stack
// (embeddings, position embeddings, final norm, LM head; RoBERTa's token types, embedding norm and head).
inline bool is_layer_stacked(const ParamSpec& s) {
    static const char* const outside[] = {"wte", "wpe", "lnfw", "lnfb", "lm_head",                   // GPT-2, LLaMA
                                          "tte", "lnew", "lneb", "clsw", "clsb", "outw", "outb"};  // RoBERTa
    for (const char* name : outside)
        if (s.name == name) return false;
    return true;
}
// Elements of one of the model's tensors in spec s (a Hugging Face tensor: one layer's slice of a stacked spec).
inline size_t tensor_numel(const ParamSpec& s, int L) { return is_layer_stacked(s) ? s.numel / (size_t)L : s.numel; }

// Per-layer gradient averaging (the models' on_layer_grads hook, train/grad_sync.h): the ranges of the parameter
// buffer that layer l's backward completes, at index l in [0, L), and at index L the tensors outside the layer
// stack, which are complete only at the end of backward (GPT-2's tied wte also collects the head's gradient in
// forward). Layer l's share of a stacked tensor is numel / L elements at offset + l * numel / L. Every parameter is in
// exactly one range; the alignment gaps between tensors are in none (their gradients stay zero).
inline std::vector<std::vector<ElemRange>> layer_param_ranges(const std::vector<ParamSpec>& specs, int L) {
    if (L <= 0) fail("internal: layer_param_ranges with %d layers", L);
    std::vector<std::vector<ElemRange>> out((size_t)L + 1);
    for (const ParamSpec& s : specs) {
        if (!is_layer_stacked(s)) {
            out[L].push_back({s.offset, s.numel});
            continue;
        }
        if (s.numel % (size_t)L)
            fail("internal: parameter %s (%zu elements) is not stacked over %d layers: name it in is_layer_stacked",
                 s.name.c_str(), s.numel, L);
        size_t per = s.numel / (size_t)L;
        for (int l = 0; l < L; l++) out[l].push_back({s.offset + (size_t)l * per, per});
    }
    return out;
}

// host_out (N, V) = inp (N, C) @ head[:V]^T, for tests and sampling (training never forms all logits).
template <class Backend>
void head_logits(Backend& be, float* host_out, const typename Backend::act_t* inp,
                 const typename Backend::act_t* head, int N, int C, int V) {
    using act_t = typename Backend::act_t;
    size_t bytes = (size_t)N * V * sizeof(act_t);
    act_t* dev = (act_t*)be.alloc(bytes);
    be.matmul_forward(dev, inp, head, nullptr, N, C, V);
    be.download_f32(host_out, dev, (size_t)N * V);
    be.free(dev, bytes);
}

// host_row (V) = the logits at position `at` of an evaluation forward over one sequence of t positions, inputs (t)
// and targets (t; -1: no loss), in a model whose arena holds B x T (at < t <= T): --sample's forward, which reads
// one sequence, not the micro-batch's B. A forward over fewer rows uses the leading part of each activation buffer
// (every offset is computed from the forward's own N = B * T); B and T are restored after.
template <class Model>
void eval_logits_of_one_sequence(Model& m, float* host_row, const int32_t* inputs, const int32_t* targets, int t,
                                 int at) {
    if (t < 1 || t > m.T || at < 0 || at >= t)
        fail("internal: position %d of a sequence of %d in a model of T = %d", at, t, m.T);
    struct Restore {
        Model& m;
        const int B, T;
        ~Restore() { m.B = B, m.T = T; }
    } restore{m, m.B, m.T};
    m.B = 1, m.T = t;
    m.eval_loss(inputs, targets);
    m.logits(host_row, at, 1);
}

// The activation arena: one allocation laid out from a list of specs, again whenever the batch shape changes; and
// the PRAC bases in a second allocation made once (they depend on the widths only, so they survive a new shape).
// The memory planner reads the same spec lists.
struct ActivationArena {
    std::vector<TensorSpec> act_specs;
    void* acts_memory = nullptr;
    size_t acts_bytes = 0;
    std::vector<TensorSpec> basis_specs;
    void* bases_memory = nullptr;
    size_t bases_bytes = 0;

    template <class Backend>
    void allocate(Backend& be, std::vector<TensorSpec> specs, std::vector<TensorSpec> bases) {
        be.free(acts_memory, acts_bytes);
        act_specs = std::move(specs);
        acts_bytes = tensors_bytes(act_specs);
        acts_memory = be.alloc(acts_bytes);
        point_tensors(act_specs, acts_memory);
        if (!bases_memory) {
            basis_specs = std::move(bases);
            bases_bytes = tensors_bytes(basis_specs);
            bases_memory = be.alloc(bases_bytes);
        }
        point_tensors(basis_specs, bases_memory);
    }
    template <class Backend>
    void release(Backend& be) {
        be.free(bases_memory, bases_bytes);
        be.free(acts_memory, acts_bytes);
    }
};

// Hugging Face safetensors in and out, through a host fp32 copy of the parameter buffer (the backend converts).
template <class Backend>
void load_hf_weights(Backend& be, const std::string& path, const std::vector<HFTensor>& map,
                     const std::vector<std::string>& ignorable, typename Backend::act_t* params, size_t numel,
                     const ModelConfig& cfg) {
    std::vector<float> host(numel, 0.0f);
    hf_load(path, map, ignorable, host.data(), cfg);
    be.upload_f32(params, host.data(), numel);
}
template <class Backend>
void save_hf_weights(Backend& be, const std::string& path, const std::vector<HFTensor>& map,
                     const typename Backend::act_t* params, size_t numel) {
    std::vector<float> host(numel);
    be.download_f32(host.data(), params, numel);
    hf_save(path, map, host.data(), {{"format", "pt"}});
}
