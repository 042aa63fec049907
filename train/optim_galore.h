// GaLore as an optimizer (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank
// Projection"): the 2-D attention and MLP weights (q, k, v, o and the MLP's matrices, each layer separately) keep
// their Adam moments in a rank-r projection of the gradient, refreshed every T steps from the gradient's top
// singular vectors; everything else (embeddings, LM head, norms, biases) is updated by plain AdamW. Same shape as
// AdamW in train/optim_adamw.h (constructor, step, t), plus state_tensors() for checkpoints and a static
// state_bytes() for the memory planner. Per-block ops: kernels/galore.h (CPU twins), kernels/optim_cuda.cu (CUDA).
// The update, the choices (kept moments, canonical signs, rank clipping, which weights, the AdamW half, no
// sharding) and the memory: docs/DESIGN.md section 3.4 (GaLore).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "model/config.h"
#include "common/tensors.h"
#include "train/optim_adamw.h"  // StateEntry, carve_state, OptimizerStateTensor

// One projected weight: `layers` blocks of (rows, cols) = nn.Linear (out, in) inside the parameter buffer,
// layer l at offset + l * layer_stride (contiguous rows of a stacked, possibly fused ParamSpec).
struct GaloreBlock {
    std::string name;     // e.g. "qkvw.q": our ParamSpec name and the nn.Linear it stands for
    size_t offset;        // elements into the parameter buffer, layer 0
    size_t layer_stride;  // elements between layers
    int layers, rows, cols;
    int rank;  // already clipped to min(rows, cols)

    bool right() const { return rows >= cols; }
    int proj_dim() const { return right() ? cols : rows; }                          // k: P is (k, rank)
    size_t proj_numel() const { return (size_t)proj_dim() * rank; }                 // per layer
    size_t moment_numel() const { return (size_t)(right() ? rows : cols) * rank; }  // R, m, v per layer
};

// GaLore's rank for a model: the values of its benchmark scripts for the LLaMA sizes it trained (60M 128,
// 130M 256, 350M 256, 1B 512) and the PRAC paper's for GPT-2 (appendix D: 256 for 124M, 512 for 355M, for GaLore and
// RSO alike), for those names and config.json files of their shapes. Elsewhere channels / 4 (our choice: what 60M,
// 350M and 1B use; 130M uses C/3).
inline int galore_default_rank(const ModelConfig& cfg) {
    const std::string name = named_config_like(cfg);
    if (name == "gpt2-124m") return 256;
    if (name == "gpt2-355m") return 512;
    if (name == "llama-60m") return 128;
    if (name == "llama-130m") return 256;
    if (name == "llama-350m") return 256;
    if (name == "llama-1b") return 512;
    return std::max(1, cfg.channels / 4);
}
// A --galore-rank as the run uses it: 0 is the model's default.
inline int galore_rank_for(int given, const ModelConfig& cfg) {
    return given > 0 ? given : galore_default_rank(cfg);
}

// A block over `layers` stacked (rows, cols) matrices, rank clipped to min(rows, cols).
inline GaloreBlock galore_block(const std::string& name, size_t offset, size_t layer_stride, int layers, int rows,
                                int cols, int rank) {
    CHECK_USER(rank >= 1, "GaLore rank must be at least 1 (got %d)", rank);
    return {name, offset, layer_stride, layers, rows, cols, std::min(rank, std::min(rows, cols))};
}

// The projected blocks of a GPT-2 or LLaMA parameter list (model/gpt2.h, model/llama.h): qkvw split into
// q, k, v; attprojw; fcw (GPT-2 whole, LLaMA split into gate, up); fcprojw.
inline std::vector<GaloreBlock> galore_blocks(const std::vector<ParamSpec>& specs, const ModelConfig& cfg,
                                              int rank) {
    int L = cfg.num_layers, C = cfg.channels, F = cfg.hidden;
    // every projected matrix's smaller side is C (F > C): a rank of C or more projects nothing to a lower rank
    CHECK_USER(rank < C, "GaLore rank %d (--galore-rank) is not below the model's width %d, the smaller side of every "
               "projected matrix: GaLore would keep full-rank states, more memory than AdamW\n---> HINT: use a rank "
               "below %d (0: GaLore's rank for this model, %d), or --optimizer adamw", rank, C, C,
               galore_default_rank(cfg));
    auto find = [&](const char* name, size_t rows_total, size_t cols) -> const ParamSpec& {
        for (const ParamSpec& s : specs)
            if (s.name == name) {
                if (s.numel != (size_t)L * rows_total * cols)
                    fail("GaLore: parameter %s has %zu elements, the model config says %d x %zu x %zu", name, s.numel,
                         L, rows_total, cols);
                return s;
            }
        fail("GaLore: the parameter list has no %s (GaLore needs GPT-2 or LLaMA parameters)", name);
    };
    std::vector<GaloreBlock> blocks;
    // a stacked (L, parts * rows, cols) spec -> `parts` blocks of (rows, cols)
    auto split = [&](const char* spec, const std::vector<std::string>& parts, int rows, int cols) {
        const ParamSpec& s = find(spec, parts.size() * rows, cols);
        size_t stride = parts.size() * (size_t)rows * cols;
        for (size_t i = 0; i < parts.size(); i++) {
            std::string name = parts[i].empty() ? spec : std::string(spec) + "." + parts[i];
            blocks.push_back(galore_block(name, s.offset + i * (size_t)rows * cols, stride, L, rows, cols, rank));
        }
    };
    split("qkvw", {"q", "k", "v"}, C, C);
    split("attprojw", {""}, C, C);
    if (cfg.arch == Arch::LLAMA)
        split("fcw", {"gate", "up"}, F, C);
    else
        split("fcw", {""}, F, C);
    split("fcprojw", {""}, C, F);
    return blocks;
}

typedef OptimizerStateTensor GaloreStateTensor;  // train/optim_adamw.h

template <class Backend>
struct GaLore {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;

    Backend& be;
    std::vector<GaloreBlock> blocks;
    std::vector<size_t> dense;  // indices into the param specs of the tensors AdamW updates
    size_t num_specs;
    int update_gap;
    float scale, beta1, beta2, eps, weight_decay;
    int t = 0;             // completed steps (a checkpoint stores it, like AdamW::t)
    int refreshes = 0;     // steps that recomputed the projections
    int last_refresh = -1;  // 0-based index of the step that last recomputed them

    // state, one allocation: per block P, m, v (each stacked over layers); per dense tensor m, v; master
    // weights (bf16 backends); the projected-gradient scratch. Slices aligned like common/tensors.h.
    struct BlockState {
        float* P;
        float* m;
        float* v;
    };
    std::vector<BlockState> block_state;
    std::vector<float*> dense_m, dense_v;
    float* master = nullptr;  // bf16 backends: fp32 copy of the whole buffer, filled by the caller as AdamW's
    float* scratch = nullptr;
    void* memory = nullptr;
    size_t bytes = 0;

    // A GPT-2 or LLaMA model: its projected blocks at `rank` (clipped per block), AdamW for the rest.
    GaLore(Backend& backend, const std::vector<ParamSpec>& specs, const ModelConfig& cfg, int rank, int gap,
           float alpha, float b1, float b2, float e, float wd)
        : GaLore(backend, specs, galore_blocks(specs, cfg, rank), gap, alpha, b1, b2, e, wd) {}
    // Any parameter list with an explicit block list (tests, other models): the blocks' ranks are used as given.
    GaLore(Backend& backend, const std::vector<ParamSpec>& specs, std::vector<GaloreBlock> block_list, int gap,
           float alpha, float b1, float b2, float e, float wd)
        : be(backend), blocks(std::move(block_list)), num_specs(specs.size()), update_gap(gap), scale(alpha),
          beta1(b1), beta2(b2), eps(e), weight_decay(wd) {
        CHECK_USER(gap >= 1, "GaLore update gap (steps between projection refreshes) must be at least 1 (got %d)",
                   gap);
        dense = dense_specs(specs, blocks);
        std::vector<StateEntry> entries = state_entries(specs, blocks);
        bytes = state_entries_bytes(entries);
        memory = be.alloc(bytes);
        std::vector<float*> p = carve_state(memory, entries);
        size_t i = 0;
        for (size_t b = 0; b < blocks.size(); b++, i += 3) block_state.push_back({p[i], p[i + 1], p[i + 2]});
        for (size_t d = 0; d < dense.size(); d++, i += 2) {
            dense_m.push_back(p[i]);
            dense_v.push_back(p[i + 1]);
        }
        if (Backend::master_weights) master = p[i++];
        scratch = p[i];
    }
    ~GaLore() { be.free(memory, bytes); }
    GaLore(const GaLore&) = delete;
    GaLore& operator=(const GaLore&) = delete;

    // Bytes this optimizer allocates (exactly what the constructor asks the backend for), for the planner.
    static size_t state_bytes(const std::vector<ParamSpec>& specs, const ModelConfig& cfg, int rank) {
        return state_bytes(specs, galore_blocks(specs, cfg, rank));
    }
    static size_t state_bytes(const std::vector<ParamSpec>& specs, const std::vector<GaloreBlock>& blocks) {
        return state_entries_bytes(state_entries(specs, blocks));
    }

    // Everything a checkpoint needs besides t (the scratch is not state): fp32 tensors named
    //   galore.<block>.proj        (L, k, r)            P of each layer
    //   galore.<block>.exp_avg     (L, m, r) or (L, r, n) first moment in the projected space
    //   galore.<block>.exp_avg_sq  likewise             second moment
    //   adamw.<param>.m, adamw.<param>.v                 AdamW moments of the other tensors
    //   master                     whole parameter buffer (only for backends with bf16 parameters)
    // Projections written back together with t reproduce the run: no refresh happens until t % T == 0.
    std::vector<GaloreStateTensor> state_tensors(const std::vector<ParamSpec>& specs) const {
        std::vector<StateEntry> entries = state_entries(specs, blocks);
        std::vector<GaloreStateTensor> out;
        size_t i = 0;
        auto add = [&](float* data) {
            out.push_back({entries[i].name, data, entries[i].numel});
            i++;
        };
        for (const BlockState& s : block_state) {
            add(s.P);
            add(s.m);
            add(s.v);
        }
        for (size_t d = 0; d < dense.size(); d++) {
            add(dense_m[d]);
            add(dense_v[d]);
        }
        if (master) add(master);
        return out;
    }

    // One update of every parameter tensor. grad_scale multiplies the gradients (global-norm clipping).
    void step(act_t* params, const grad_t* grads, const std::vector<ParamSpec>& specs, float lr, float grad_scale) {
        if (specs.size() != num_specs)
            fail("GaLore: step got %zu parameter specs, the optimizer was built for %zu", specs.size(), num_specs);
        bool refresh = t % update_gap == 0;  // t = index of this step: 0, T, 2T, ... recompute P
        t++;
        for (size_t d = 0; d < dense.size(); d++) {
            const ParamSpec& s = specs[dense[d]];
            be.adamw_update(params + s.offset, master ? master + s.offset : nullptr, grads + s.offset, dense_m[d],
                            dense_v[d], s.numel, lr, beta1, beta2, eps, s.decay ? weight_decay : 0.0f, t, grad_scale,
                            s.offset);  // salt: the element index, as AdamW passes it
        }
        double bc1 = 1.0 - std::pow((double)beta1, t), bc2 = 1.0 - std::pow((double)beta2, t);
        float step_size = (float)(lr * std::sqrt(bc2) / bc1 * scale), decay = lr * weight_decay;
        for (size_t b = 0; b < blocks.size(); b++) {
            const GaloreBlock& k = blocks[b];
            const BlockState& s = block_state[b];
            for (int l = 0; l < k.layers; l++) {
                size_t off = k.offset + (size_t)l * k.layer_stride;
                float* P = s.P + (size_t)l * k.proj_numel();
                float* m = s.m + (size_t)l * k.moment_numel();
                float* v = s.v + (size_t)l * k.moment_numel();
                if (refresh) {
                    int info = be.galore_refresh(P, grads + off, k.rows, k.cols, k.rank, k.right());
                    if (info < 0)
                        fail("GaLore: the gradient of %s (layer %d) has non-finite values at step %d\n"
                             "---> HINT: training diverged; lower the learning rate or clip gradients",
                             k.name.c_str(), l, t);
                    if (info > 0)
                        fail("GaLore: the SVD of the gradient of %s (layer %d) did not converge at step %d (LAPACK "
                             "info %d)", k.name.c_str(), l, t, info);
                }
                be.galore_project(scratch, grads + off, P, k.rows, k.cols, k.rank, k.right(),
                                            grad_scale);
                be.galore_adam(scratch, m, v, k.moment_numel(), beta1, beta2, eps);
                be.galore_apply(params + off, master ? master + off : nullptr, scratch, P, k.rows,
                                          k.cols, k.rank, k.right(), step_size, decay, off);
            }
        }
        if (refresh) {
            refreshes++;
            last_refresh = t - 1;
        }
    }

   private:
    // specs not covered by any block, in order; a spec partly covered is an error (a block list must split a
    // spec completely or not touch it)
    static std::vector<size_t> dense_specs(const std::vector<ParamSpec>& specs, const std::vector<GaloreBlock>& bl) {
        std::vector<size_t> out;
        for (size_t i = 0; i < specs.size(); i++) {
            const ParamSpec& s = specs[i];
            size_t covered = 0;
            for (const GaloreBlock& k : bl) {
                size_t lo = k.offset, hi = k.offset + (size_t)(k.layers - 1) * k.layer_stride + (size_t)k.rows * k.cols;
                if (k.layers < 1 || k.rows < 1 || k.cols < 1 || k.rank < 1 || k.rank > std::min(k.rows, k.cols))
                    fail("GaLore: block %s has an invalid shape or rank", k.name.c_str());
                if (lo >= s.offset && hi <= s.offset + s.numel) covered += (size_t)k.layers * k.rows * k.cols;
            }
            if (covered == 0)
                out.push_back(i);
            else if (covered != s.numel)
                fail("GaLore: blocks cover %zu of the %zu elements of %s", covered, s.numel, s.name.c_str());
        }
        return out;
    }
    // the state's tensors in allocation order (block P, m, v ...; dense m, v ...; master; scratch)
    static std::vector<StateEntry> state_entries(const std::vector<ParamSpec>& specs,
                                                 const std::vector<GaloreBlock>& bl) {
        std::vector<StateEntry> e;
        size_t scratch = 0, buffer = 0;
        for (const GaloreBlock& k : bl) {
            e.push_back({"galore." + k.name + ".proj", (size_t)k.layers * k.proj_numel()});
            e.push_back({"galore." + k.name + ".exp_avg", (size_t)k.layers * k.moment_numel()});
            e.push_back({"galore." + k.name + ".exp_avg_sq", (size_t)k.layers * k.moment_numel()});
            scratch = std::max(scratch, k.moment_numel());
        }
        for (size_t i : dense_specs(specs, bl)) {
            e.push_back({"adamw." + specs[i].name + ".m", specs[i].numel});
            e.push_back({"adamw." + specs[i].name + ".v", specs[i].numel});
        }
        for (const ParamSpec& s : specs) buffer = std::max(buffer, s.offset + s.numel);
        if (Backend::master_weights) e.push_back({"master", buffer});
        e.push_back({"scratch", scratch});
        return e;
    }
};
