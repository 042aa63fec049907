// Adam-mini over a model's parameter buffer (Zhang et al. 2024, arXiv 2406.16793): Adam's first moment per element,
// but ONE second-moment value per block of parameters, the mean of g² over the block (update in kernels/adam_mini.h,
// CUDA in kernels/optim_cuda.cu: AdamW's operation order and bias corrections, decoupled weight decay on the 2-D
// weights). Blocks: one row of an embedding, of the head or of a matrix (v, attproj, MLP), one head of q and of k, a
// whole norm or bias tensor per layer; an unknown parameter name is an error. State (fp32): m per element, v per
// block, master weights (bf16 backends); no ZeRO-1 sharding. The block table: docs/DESIGN.md section 3.4 (Adam-mini).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/config.h"
#include "common/tensors.h"
#include "train/optim_adamw.h"  // OptimizerStateTensor


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

// The (numel, block) pieces of one parameter tensor, in order (the table: docs/DESIGN.md section 3.4, Adam-mini).
inline std::vector<std::pair<size_t, size_t>> adam_mini_pieces(const ParamSpec& s, const ModelConfig& cfg) {
    size_t L = (size_t)cfg.num_layers, C = (size_t)cfg.channels, F = (size_t)cfg.hidden, NH = (size_t)cfg.num_heads;
    const std::string& n = s.name;
    auto rows_of = [&](size_t width) -> std::vector<std::pair<size_t, size_t>> {
        CHECK_USER(width > 0 && s.numel % width == 0, "adam-mini: '%s' (%zu elements) is not rows of %zu values",
                   n.c_str(), s.numel, width);
        return {{s.numel, width}};
    };
    if (n == "wte" || n == "wpe" || n == "lm_head" || n == "attprojw" || n == "fcw") return rows_of(C);
    if (n == "tte" || n == "clsw" || n == "outw") return rows_of(C);  // RoBERTa: token types, head (rows of C)
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
    if (n == "lnew" || n == "lneb" || n == "clsb" || n == "outb") return {{s.numel, s.numel}};  // RoBERTa
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
            be.adam_mini_update(params + s.offset, master ? master + s.offset : nullptr, grads + s.offset, m + s.m,
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
