// Muon over a model's parameter buffer: Newton-Schulz-orthogonalized Nesterov momentum for the hidden 2-D weight
// matrices (per layer those of qkvw, attprojw, fcw and fcprojw; q/k/v and gate/up as separate matrices by default),
// AdamW (same learning rate, same kernel as train/optim_adamw.h) for embeddings, head, norms and biases. The update
// W = W (1 - lr wd) - lr 0.2 sqrt(max(A, B)) NewtonSchulz5(u) lets AdamW's learning rate and decay carry over.
// Ops: kernels/muon.h (CPU twins), kernels/optim_cuda.cu (CUDA). State (fp32): momentum, the AdamW half's m and v,
// master weights (bf16 backends), one batch's workspace (same-shape matrices orthogonalized in one call: MuonBatch);
// no ZeRO-1 sharding (Newton-Schulz needs whole matrices).
// Which tensors, the fused blocks, the update and its scale, the state: docs/DESIGN.md section 3.4 (Muon).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/muon.h"  // MUON_NS_STEPS
#include "model/config.h"
#include "common/tensors.h"
#include "train/optim_adamw.h"  // OptimizerStateTensor


struct MuonOptions {
    float momentum = 0.95f;
    bool nesterov = true;
    int ns_steps = MUON_NS_STEPS;
    bool split_fused = true;  // q/k/v and gate/up as separate matrices (docs/DESIGN.md section 3.4, Muon)
    // the AdamW half (and the decoupled weight decay of both halves)
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
};

// One matrix Muon orthogonalizes: (rows, cols) row-major at `offset` in the parameter buffer, its momentum at
// `state` in the packed momentum buffer.
struct MuonMatrix {
    std::string name;  // e.g. "qkvw[1].k", "fcw[0]" (for messages and tests)
    size_t offset, state;
    int rows, cols;
    bool decay;
};

// A parameter tensor's place in a packed state buffer.
struct PackedSpec {
    ParamSpec spec;  // a copy: the optimizer does not depend on the caller's list staying alive
    size_t state;    // elements into the packed buffer
};

// Matrices of one shape that one Newton-Schulz call orthogonalizes together (a GPU runs each of its GEMMs as one
// strided-batched GEMM): indices into MuonLayout::matrices.
struct MuonBatch {
    int rows, cols;
    std::vector<size_t> matrices;
};

// Newton-Schulz batches hold up to this many bytes of u and workspace (or one matrix, when that needs more): at
// GPT-2 124M's width a 768² matrix's GEMMs are too small to fill a GPU alone, and 7 of them fit; at LLaMA-1B's
// (2048²: 67 MB each) the GEMMs fill it and batches are single matrices.
constexpr size_t MUON_BATCH_BYTES = 64ull << 20;

struct MuonLayout {
    std::vector<MuonMatrix> matrices;
    std::vector<MuonBatch> batches;      // every matrix in exactly one; same shapes in order of first appearance
    std::vector<PackedSpec> muon_specs;  // into the momentum buffer
    std::vector<PackedSpec> adam_specs;  // into AdamW's m and v
    size_t momentum_numel = 0, adam_numel = 0;
    size_t extent = 0;      // end of the last tensor in the parameter buffer (master weights' length)
    size_t max_matrix = 0;  // elements of u: the largest batch's matrices
    size_t ns_work = 0;     // Newton-Schulz workspace of the largest need (a batch's)
};

// The matrices grouped by shape and cut into batches of at most MUON_BATCH_BYTES of u and workspace (at least one
// matrix each); sets lay.batches, max_matrix and ns_work.
inline void muon_batches(MuonLayout& lay) {
    std::vector<std::pair<int, int>> shapes;
    for (const MuonMatrix& m : lay.matrices)
        if (std::find(shapes.begin(), shapes.end(), std::make_pair(m.rows, m.cols)) == shapes.end())
            shapes.push_back({m.rows, m.cols});
    for (auto [rows, cols] : shapes) {
        const size_t n = (size_t)rows * cols, w = newton_schulz_work_numel(rows, cols);
        const size_t per_batch = std::max<size_t>(1, MUON_BATCH_BYTES / ((n + w) * sizeof(float)));
        for (size_t i = 0; i < lay.matrices.size(); i++) {
            if (lay.matrices[i].rows != rows || lay.matrices[i].cols != cols) continue;
            if (lay.batches.empty() || lay.batches.back().rows != rows || lay.batches.back().cols != cols ||
                lay.batches.back().matrices.size() == per_batch)
                lay.batches.push_back({rows, cols, {}});
            lay.batches.back().matrices.push_back(i);
        }
    }
    for (const MuonBatch& b : lay.batches) {
        const size_t count = b.matrices.size();
        lay.max_matrix = std::max(lay.max_matrix, count * b.rows * b.cols);
        lay.ns_work = std::max(lay.ns_work, count * newton_schulz_work_numel(b.rows, b.cols));
    }
}

// The hidden 2-D weights (stacked per layer): Muon's. Everything else is AdamW's.
inline bool muon_is_hidden(const std::string& name) {
    return name == "qkvw" || name == "attprojw" || name == "fcw" || name == "fcprojw";
}

// The matrices of a model's parameter specs (the rows of fused blocks: docs/DESIGN.md section 3.4, Muon).
inline MuonLayout muon_layout(const std::vector<ParamSpec>& specs, const ModelConfig& cfg, bool split_fused) {
    MuonLayout lay;
    size_t L = (size_t)cfg.num_layers, C = (size_t)cfg.channels, F = (size_t)cfg.hidden;
    for (const ParamSpec& s : specs) {
        lay.extent = std::max(lay.extent, s.offset + s.numel);
        if (!muon_is_hidden(s.name)) {
            lay.adam_specs.push_back({s, lay.adam_numel});
            lay.adam_numel += s.numel;
            continue;
        }
        lay.muon_specs.push_back({s, lay.momentum_numel});
        size_t cols = s.name == "fcprojw" ? F : C;
        CHECK_USER(L > 0 && cols > 0 && s.numel % (L * cols) == 0,
                   "muon: parameter '%s' (%zu elements) is not %zu layers of %zu-column matrices", s.name.c_str(),
                   s.numel, L, cols);
        size_t rows = s.numel / (L * cols);
        // parts of each layer's block: q, k, v of qkvw; gate, up of LLaMA's fcw (rows = 2F); else one matrix
        size_t parts = 1;
        if (split_fused && s.name == "qkvw") parts = 3;
        if (split_fused && s.name == "fcw" && rows == 2 * F) parts = 2;
        CHECK_USER(rows % parts == 0, "muon: '%s' has %zu rows per layer, not %zu equal parts", s.name.c_str(), rows,
                   parts);
        static const char* qkv[] = {".q", ".k", ".v"};
        static const char* gate_up[] = {".gate", ".up"};
        size_t prow = rows / parts;
        for (size_t l = 0; l < L; l++)
            for (size_t p = 0; p < parts; p++) {
                size_t within = (l * rows + p * prow) * cols;
                std::string name = s.name + "[" + std::to_string(l) + "]" +
                                   (parts == 3 ? qkv[p] : parts == 2 ? gate_up[p] : "");
                lay.matrices.push_back({name, s.offset + within, lay.momentum_numel + within, (int)prow, (int)cols,
                                        s.decay});
            }
        lay.momentum_numel += s.numel;
    }
    muon_batches(lay);
    return lay;
}

template <class Backend>
struct Muon {
    Backend& be;
    MuonOptions o;
    MuonLayout lay;
    float* momentum = nullptr;  // (momentum_numel) packed in spec order
    float* adam_m = nullptr;    // (adam_numel) packed in spec order
    float* adam_v = nullptr;
    float* master = nullptr;  // (extent) like the parameter buffer, bf16 backends only
    float* u = nullptr;       // (max_matrix) one batch's updates, (count, rows, cols)
    float* work = nullptr;    // (ns_work) Newton-Schulz temporaries of one batch
    int t = 0;                // completed steps (AdamW's bias correction)

    Muon(Backend& backend, const std::vector<ParamSpec>& specs, const ModelConfig& cfg, const MuonOptions& opts)
        : be(backend), o(opts), lay(muon_layout(specs, cfg, opts.split_fused)) {
        CHECK_USER(o.ns_steps >= 1, "muon: Newton-Schulz needs at least one iteration (got %d)", o.ns_steps);
        momentum = (float*)be.alloc(lay.momentum_numel * sizeof(float));
        adam_m = (float*)be.alloc(lay.adam_numel * sizeof(float));
        adam_v = (float*)be.alloc(lay.adam_numel * sizeof(float));
        if (Backend::master_weights) master = (float*)be.alloc(lay.extent * sizeof(float));
        u = (float*)be.alloc(lay.max_matrix * sizeof(float));
        work = (float*)be.alloc(lay.ns_work * sizeof(float));
    }
    ~Muon() {
        be.free(work, lay.ns_work * sizeof(float));
        be.free(u, lay.max_matrix * sizeof(float));
        be.free(master, Backend::master_weights ? lay.extent * sizeof(float) : 0);
        be.free(adam_v, lay.adam_numel * sizeof(float));
        be.free(adam_m, lay.adam_numel * sizeof(float));
        be.free(momentum, lay.momentum_numel * sizeof(float));
    }
    Muon(const Muon&) = delete;
    Muon& operator=(const Muon&) = delete;

    // Persistent state bytes for the planner (momentum, AdamW m and v; master weights are the planner's own row,
    // as for AdamW).
    static size_t state_bytes(const std::vector<ParamSpec>& specs) {
        size_t muon = 0, adam = 0;
        for (const ParamSpec& s : specs) (muon_is_hidden(s.name) ? muon : adam) += s.numel;
        return (muon + 2 * adam) * sizeof(float);
    }
    // Workspace bytes held next to the state (one batch's u and its Newton-Schulz temporaries).
    static size_t scratch_bytes(const std::vector<ParamSpec>& specs, const ModelConfig& cfg, bool split_fused) {
        MuonLayout l = muon_layout(specs, cfg, split_fused);
        return (l.max_matrix + l.ns_work) * sizeof(float);
    }

    // One update of every parameter tensor. specs is the list the optimizer was built from (the layout keeps
    // its own copy; the argument keeps AdamW's signature).
    void step(typename Backend::act_t* params, const typename Backend::grad_t* grads,
              const std::vector<ParamSpec>& /*specs*/, float lr, float grad_scale) {
        t++;
        for (const PackedSpec& p : lay.adam_specs) {
            const ParamSpec& s = p.spec;
            be.adamw_update(params + s.offset, master ? master + s.offset : nullptr, grads + s.offset,
                            adam_m + p.state, adam_v + p.state, s.numel, lr, o.beta1, o.beta2, o.eps,
                            s.decay ? o.weight_decay : 0.0f, t, grad_scale, s.offset);  // salt: element index
        }
        // per batch: every matrix's momentum into its slice of u, one Newton-Schulz call, every matrix's update
        // (each matrix gets the same operations as alone: the batch only groups the GEMMs)
        for (const MuonBatch& b : lay.batches) {
            const size_t n = (size_t)b.rows * b.cols;
            for (size_t k = 0; k < b.matrices.size(); k++) {
                const MuonMatrix& mx = lay.matrices[b.matrices[k]];
                be.muon_momentum(momentum + mx.state, u + k * n, grads + mx.offset, n, o.momentum, grad_scale,
                                 o.nesterov);
            }
            be.newton_schulz(u, b.rows, b.cols, work, o.ns_steps, (int)b.matrices.size());
            const float scale = 0.2f * std::sqrt((float)std::max(b.rows, b.cols));
            for (size_t k = 0; k < b.matrices.size(); k++) {
                const MuonMatrix& mx = lay.matrices[b.matrices[k]];
                be.muon_apply(params + mx.offset, master ? master + mx.offset : nullptr, u + k * n, n, lr,
                              mx.decay ? o.weight_decay : 0.0f, lr * scale, mx.offset);
            }
        }
    }

    // Every state tensor, per parameter tensor, for checkpoints: "muon.momentum.<name>" for the hidden weights,
    // "muon.adamw.m.<name>" and "muon.adamw.v.<name>" for the rest, "muon.master" (the whole buffer) when present.
    // t is the step count to save alongside.
    std::vector<OptimizerStateTensor> state_tensors() const {
        std::vector<OptimizerStateTensor> out;
        for (const PackedSpec& p : lay.muon_specs)
            out.push_back({"muon.momentum." + p.spec.name, momentum + p.state, p.spec.numel});
        for (const PackedSpec& p : lay.adam_specs) {
            out.push_back({"muon.adamw.m." + p.spec.name, adam_m + p.state, p.spec.numel});
            out.push_back({"muon.adamw.v." + p.spec.name, adam_v + p.state, p.spec.numel});
        }
        if (master) out.push_back({"muon.master", master, lay.extent});
        return out;
    }
};
