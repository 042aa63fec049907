// Adam-mini over a model's parameter buffer (Zhang et al. 2024, arXiv 2406.16793): Adam's first moment per
// element, but ONE second-moment value per block of parameters, the mean of g² over the block (update in
// kernels/adam_mini.h: AdamW's operation order and bias corrections, decoupled weight decay where the spec says
// decay, i.e. the 2-D weights).
//
// Blocks (each a contiguous range of the parameter buffer; HS = C / NH, per-layer tensors are stacked (L, ...)):
//   wte, wpe, lm_head         per row: one token's (one position's) C values     (GPT-2's tied head is wte)
//   qkvw (L, 3C, C)           per layer, rows [0, C) are q, [C, 2C) k, [2C, 3C) v (GPT-2 c_attn and LLaMA
//                             q_proj/k_proj/v_proj alike):
//                               q: one block per head h, rows [h·HS, (h+1)·HS)           (HS·C values)
//                               k: one block per head h, rows [C + h·HS, C + (h+1)·HS)   (HS·C values)
//                               v: one block per output row, rows [2C, 3C)               (C values)
//   attprojw (L, C, C)        per output row (C values)
//   fcw (L, F, C) / (L, 2F, C) per output row (C values): GPT-2 c_fc; LLaMA gate rows [0, F), up rows [F, 2F)
//   fcprojw (L, C, F)         per output row (F values)
//   ln1w ln1b ln2w ln2b qkvb attprojb fcb fcprojb (L, X)    one block per layer's tensor (X values)
//   lnfw lnfb (C)             one block
// so per layer NH + NH + C + C + F (2F for LLaMA) + C second-moment values for the matrices. An unknown parameter
// name is an error: a new tensor needs a decision here.
//
// State (fp32): m packed per element in spec order (no alignment padding), v packed per block in spec order,
// fp32 master weights laid out like the parameter buffer when the backend keeps bf16 params (as AdamW; the trainer
// fills them). ZeRO-1 sharding is not supported (a block's mean needs all of its gradient). Adam-mini only sees
// gradients, so it combines with every PRAC mode unchanged.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "kernels/adam_mini.h"
#include "kernels/cpu_backend.h"
#include "model/config.h"
#include "model/tensors.h"
#include "train/optimizer.h"


struct AdamMiniOptions {
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
};

// numel consecutive elements at `offset` in the parameter buffer, in blocks of `block`; m at `m`, v at `v`.
struct AdamMiniSegment {
    size_t offset, numel, block, m, v;
    bool decay;
};
// One parameter tensor's state: m (spec.numel) at `m`, v (blocks) at `v`.
struct AdamMiniTensor {
    ParamSpec spec;
    size_t m, v, blocks;
};
struct AdamMiniLayout {
    std::vector<AdamMiniSegment> segments;
    std::vector<AdamMiniTensor> tensors;
    size_t m_numel = 0, v_numel = 0;
    size_t extent = 0;  // end of the last tensor in the parameter buffer (master weights' length)
};

// The (numel, block) pieces of one parameter tensor, in order (the table at the top of the file).
inline std::vector<std::pair<size_t, size_t>> adam_mini_pieces(const ParamSpec& s, const ModelConfig& cfg) {
    size_t L = (size_t)cfg.num_layers, C = (size_t)cfg.channels, F = (size_t)cfg.hidden, NH = (size_t)cfg.num_heads;
    const std::string& n = s.name;
    auto rows_of = [&](size_t width) -> std::vector<std::pair<size_t, size_t>> {
        CHECK_USER(width > 0 && s.numel % width == 0, "adam-mini: '%s' (%zu elements) is not rows of %zu values",
                   n.c_str(), s.numel, width);
        return {{s.numel, width}};
    };
    if (n == "wte" || n == "wpe" || n == "lm_head" || n == "attprojw" || n == "fcw") return rows_of(C);
    if (n == "fcprojw") return rows_of(F);
    if (n == "qkvw") {
        CHECK_USER(NH > 0 && C % NH == 0 && s.numel == L * 3 * C * C,
                   "adam-mini: 'qkvw' has %zu elements, expected L*3C*C = %zu with C %% NH == 0", s.numel,
                   L * 3 * C * C);
        std::vector<std::pair<size_t, size_t>> p;
        for (size_t l = 0; l < L; l++) {
            p.push_back({2 * C * C, (C / NH) * C});  // q and k heads
            p.push_back({C * C, C});                 // v rows
        }
        return p;
    }
    if (n == "ln1w" || n == "ln1b" || n == "ln2w" || n == "ln2b" || n == "qkvb" || n == "attprojb" || n == "fcb" ||
        n == "fcprojb") {
        CHECK_USER(L > 0 && s.numel % L == 0, "adam-mini: '%s' (%zu elements) is not %zu layers", n.c_str(), s.numel, L);
        return {{s.numel, s.numel / L}};
    }
    if (n == "lnfw" || n == "lnfb") return {{s.numel, s.numel}};
    fail("adam-mini: no block rule for parameter '%s' (see train/optim_adam_mini.h)", n.c_str());
}

inline AdamMiniLayout adam_mini_layout(const std::vector<ParamSpec>& specs, const ModelConfig& cfg) {
    AdamMiniLayout lay;
    for (const ParamSpec& s : specs) {
        lay.extent = std::max(lay.extent, s.offset + s.numel);
        AdamMiniTensor t{s, lay.m_numel, lay.v_numel, 0};
        size_t within = 0;
        for (auto [numel, block] : adam_mini_pieces(s, cfg)) {
            lay.segments.push_back({s.offset + within, numel, block, lay.m_numel + within, lay.v_numel + t.blocks,
                                    s.decay});
            within += numel;
            t.blocks += numel / block;
        }
        lay.tensors.push_back(t);
        lay.m_numel += s.numel;
        lay.v_numel += t.blocks;
    }
    return lay;
}

// Backend op: the CPU backend gets the twin of kernels/adam_mini.h directly; another backend (CUDA) provides a
// member adam_mini_update with this argument list (master: fp32 master weights or null; salt: the element index
// in the parameter buffer, for stochastic rounding to bf16; both as in adamw_update).
template <class Backend>
void adam_mini_update_op(Backend& be, typename Backend::act_t* params, float* master,
                         const typename Backend::grad_t* grads, float* m, float* v, size_t n, size_t block, float lr,
                         float beta1, float beta2, float eps, float wd, int t, float grad_scale, uint64_t salt) {
    if constexpr (std::is_same_v<Backend, CpuBackend>)
        adam_mini_update_cpu(params, grads, m, v, n, block, lr, beta1, beta2, eps, wd, t, grad_scale);
    else be.adam_mini_update(params, master, grads, m, v, n, block, lr, beta1, beta2, eps, wd, t, grad_scale, salt);
}

template <class Backend>
struct AdamMini {
    Backend& be;
    AdamMiniOptions o;
    AdamMiniLayout lay;
    float* m = nullptr;       // (m_numel) per element, packed in spec order
    float* v = nullptr;       // (v_numel) per block, packed in spec order
    float* master = nullptr;  // (extent) like the parameter buffer, bf16 backends only
    int t = 0;                // completed steps

    AdamMini(Backend& backend, const std::vector<ParamSpec>& specs, const ModelConfig& cfg, const AdamMiniOptions& opts)
        : be(backend), o(opts), lay(adam_mini_layout(specs, cfg)) {
        m = (float*)be.alloc(lay.m_numel * sizeof(float));
        v = (float*)be.alloc(lay.v_numel * sizeof(float));
        if (Backend::master_weights) master = (float*)be.alloc(lay.extent * sizeof(float));
    }
    ~AdamMini() {
        be.free(master, Backend::master_weights ? lay.extent * sizeof(float) : 0);
        be.free(v, lay.v_numel * sizeof(float));
        be.free(m, lay.m_numel * sizeof(float));
    }
    AdamMini(const AdamMini&) = delete;
    AdamMini& operator=(const AdamMini&) = delete;

    // Persistent state bytes for the planner (m and the block v's; master weights are the planner's own row).
    static size_t state_bytes(const std::vector<ParamSpec>& specs, const ModelConfig& cfg) {
        AdamMiniLayout l = adam_mini_layout(specs, cfg);
        return (l.m_numel + l.v_numel) * sizeof(float);
    }

    // One update of every parameter tensor (specs: the list the optimizer was built from; the layout keeps a copy).
    void step(typename Backend::act_t* params, const typename Backend::grad_t* grads,
              const std::vector<ParamSpec>& /*specs*/, float lr, float grad_scale) {
        t++;
        for (const AdamMiniSegment& s : lay.segments)
            adam_mini_update_op(be, params + s.offset, master ? master + s.offset : nullptr, grads + s.offset, m + s.m,
                                v + s.v, s.numel, s.block, lr, o.beta1, o.beta2, o.eps, s.decay ? o.weight_decay : 0.0f,
                                t, grad_scale, s.offset);
    }

    // Every state tensor, per parameter tensor, for checkpoints: "adam_mini.m.<name>" (one per element),
    // "adam_mini.v.<name>" (one per block, in the order of the table at the top), "adam_mini.master" (the whole
    // buffer) when present. t is the step count to save alongside.
    std::vector<OptimizerStateTensor> state_tensors() const {
        std::vector<OptimizerStateTensor> out;
        for (const AdamMiniTensor& x : lay.tensors) {
            out.push_back({"adam_mini.m." + x.spec.name, m + x.m, x.spec.numel});
            out.push_back({"adam_mini.v." + x.spec.name, v + x.v, x.blocks});
        }
        if (master) out.push_back({"adam_mini.master", master, lay.extent});
        return out;
    }
};
