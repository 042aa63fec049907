// RSO, randomized subspace optimization (Chen et al. 2025, arXiv 2502.07222), the PRAC paper's "random-only"
// baseline, as an optimizer over a model's parameter buffer: each linear weight W (qkvw, attprojw, fcw, fcprojw)
// is trained as W + B Pᵀ, Adam on the small B (m, r) for `gap` steps in a random orthonormal P (n, r), then B is
// merged and a new P drawn; embeddings, head, norms and biases use AdamW. The linear sites store X·P with this
// optimizer's P (ActSite::external, bind_sites): that is where the memory goes. Per-block ops: kernels/galore.h
// (right side) and kernels/rso.h, CUDA twins in kernels/optim_cuda.cu. The update rule, how it runs here, the
// choices where the RSO paper is silent (ranks, gap, prox, clipping, decay) and the state: docs/DESIGN.md
// section 3.4 (RSO).
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
#include "prac/prac.h"  // PracDrawKey, prac_random_basis_cpu: the subspace draws
#include "model/sites.h"  // SITE_* (the weights whose inputs are sites), ActSite
#include "train/optim_galore.h"  // galore_default_rank
#include "train/optim_adamw.h"  // StateEntry, carve_state, OptimizerStateTensor

struct RsoOptions {
    int rank = 0;       // 0: rso_default_rank(cfg)
    int gap = 200;      // inner steps per outer iteration (steps between subspace draws)
    float prox = 0.0f;  // coefficient of the proximal term (prox / 2) ||B||² (the paper's 1 / eta)
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
    uint64_t seed = 42;  // the subspace draws' key (the same on every rank)
};

// RSO's rank for a model: GaLore's (the PRAC paper's for GPT-2, GaLore's for LLaMA: docs/DESIGN.md section 3.4, RSO).
inline int rso_default_rank(const ModelConfig& cfg) { return galore_default_rank(cfg); }
// An --rso-rank as the run uses it: 0 is the model's default.
inline int rso_rank_for(int given, const ModelConfig& cfg) {
    return given > 0 ? given : rso_default_rank(cfg);
}

// One weight kind: `layers` stacked (rows, cols) = (out, in) matrices, layer l at offset + l * layer_stride.
struct RsoBlock {
    std::string name;  // the ParamSpec
    size_t offset, layer_stride;
    int layers, rows, cols, rank;
    int site;  // the model's activation site holding this weight's input (SITE_*), -1 when there is none
    size_t proj_numel() const { return (size_t)cols * rank; }  // P (cols, rank), per layer
    size_t var_numel() const { return (size_t)rows * rank; }   // B, m, v (rows, rank), per layer
};

// The subspace-optimized weights of a GPT-2 or LLaMA parameter list: qkvw (input: site ln1), attprojw (the
// attention output, not a site), fcw (site ln2), fcprojw (the activation output site).
inline std::vector<RsoBlock> rso_blocks(const std::vector<ParamSpec>& specs, const ModelConfig& cfg, int rank) {
    int L = cfg.num_layers, C = cfg.channels, F = cfg.hidden;
    int fc_rows = cfg.arch == Arch::LLAMA ? 2 * F : F;  // LLaMA's fcw stacks gate and up
    struct Want {
        const char* name;
        int rows, cols, site;
    } want[] = {{"qkvw", 3 * C, C, SITE_LN1}, {"attprojw", C, C, -1}, {"fcw", fc_rows, C, SITE_LN2},
                {"fcprojw", C, F, SITE_ACT_OUT}};
    std::vector<RsoBlock> blocks;
    for (const Want& w : want) {
        const ParamSpec* s = nullptr;
        for (const ParamSpec& p : specs)
            if (p.name == w.name) s = &p;
        if (!s) fail("RSO: the parameter list has no %s (RSO needs GPT-2 or LLaMA parameters)", w.name);
        size_t per_layer = (size_t)w.rows * w.cols;
        if (s->numel != (size_t)L * per_layer)
            fail("RSO: parameter %s has %zu elements, the model config says %d x %d x %d", w.name, s->numel, L,
                 w.rows, w.cols);
        if (rank < 1 || rank >= std::min(w.rows, w.cols))
            fail("RSO rank %d must be in [1, %d) for %s (%d x %d)\n---> HINT: lower --rso-rank", rank,
                 std::min(w.rows, w.cols), w.name, w.rows, w.cols);
        blocks.push_back({w.name, s->offset, per_layer, L, w.rows, w.cols, rank, w.site});
    }
    return blocks;
}

template <class Backend>
struct Rso {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;

    Backend& be;
    RsoOptions o;
    std::vector<RsoBlock> blocks;
    std::vector<ParamSpec> dense;  // the tensors AdamW updates
    struct BlockState {
        float *P, *B, *m, *v;  // (L, cols, r), then (L, rows, r) three times
    };
    std::vector<BlockState> block_state;
    std::vector<float*> dense_m, dense_v;
    float* master = nullptr;   // bf16 backends: fp32 copy of the whole buffer (filled by the trainer, as AdamW's)
    float* scratch = nullptr;  // (rows, r) of the largest block: R, then N
    std::vector<StateEntry> entries;
    void* memory = nullptr;
    size_t bytes = 0;
    std::vector<ActSite<Backend>*> sites;  // per block: the site storing X·P with this P (null: none bound)
    int t = 0;                             // completed steps; the outer iteration is t / gap

    // A GPT-2 or LLaMA model's weights (rso_blocks), AdamW for the rest.
    Rso(Backend& backend, const std::vector<ParamSpec>& specs, const ModelConfig& cfg, const RsoOptions& opts)
        : Rso(backend, specs, rso_blocks(specs, cfg, opts.rank > 0 ? opts.rank : rso_default_rank(cfg)), opts) {}
    // Any parameter list with an explicit block list (tests): blocks cover whole specs (matched by name).
    Rso(Backend& backend, const std::vector<ParamSpec>& specs, std::vector<RsoBlock> block_list,
        const RsoOptions& opts)
        : be(backend), o(opts), blocks(std::move(block_list)) {
        CHECK_USER(o.gap >= 1, "--rso-gap (inner steps per subspace) must be at least 1 (got %d)", o.gap);
        CHECK_USER(o.prox >= 0, "--rso-prox must be >= 0 (got %g)", o.prox);
        entries = state_entries(specs, blocks, dense);
        bytes = state_entries_bytes(entries);
        memory = be.alloc(bytes);  // zeroed: B, m, v start at 0
        std::vector<float*> p = carve_state(memory, entries);
        size_t i = 0;
        for (size_t b = 0; b < blocks.size(); b++, i += 4) block_state.push_back({p[i], p[i + 1], p[i + 2], p[i + 3]});
        for (size_t d = 0; d < dense.size(); d++, i += 2) {
            dense_m.push_back(p[i]);
            dense_v.push_back(p[i + 1]);
        }
        if (Backend::master_weights) master = p[i++];
        scratch = p[i];
        sites.assign(blocks.size(), nullptr);
        draw_subspaces();
    }
    ~Rso() { be.free(memory, bytes); }
    Rso(const Rso&) = delete;
    Rso& operator=(const Rso&) = delete;

    // Bytes this optimizer allocates, for the planner.
    static size_t state_bytes(const std::vector<ParamSpec>& specs, const ModelConfig& cfg, int rank) {
        std::vector<ParamSpec> dense;
        return state_entries_bytes(state_entries(specs, rso_blocks(specs, cfg, rank), dense));
    }

    // The linear sites that store X·P: from now on they compress with this optimizer's P (the model must have
    // been built with PracOptions::rso_rank = the rank). Sites not compressed (a recomputed activation, or the
    // exact-activation ablation) are left alone: their exact gradient projects to the same G P.
    void bind_sites(std::vector<ActSite<Backend>>& model_sites) {
        for (size_t b = 0; b < blocks.size(); b++) {
            int s = blocks[b].site;
            sites[b] = nullptr;
            if (s < 0 || s >= (int)model_sites.size() || !model_sites[s].compressed()) continue;
            ActSite<Backend>& site = model_sites[s];
            CHECK_USER(site.external && site.n == blocks[b].cols && site.r() == blocks[b].rank,
                       "RSO: site %s (width %d, rank %d) was not built for the RSO rank %d of %s", site.name.c_str(),
                       site.n, site.r(), blocks[b].rank, blocks[b].name.c_str());
            sites[b] = &site;
        }
        push_to_sites();
    }

    // One inner step of every weight (and AdamW on the rest); after every gap-th step, new subspaces.
    void step(act_t* params, const grad_t* grads, const std::vector<ParamSpec>& /*specs*/, float lr,
              float grad_scale) {
        int tau = t % o.gap;  // inner steps already taken in this outer iteration
        t++;
        for (size_t d = 0; d < dense.size(); d++) {
            const ParamSpec& s = dense[d];
            be.adamw_update(params + s.offset, master ? master + s.offset : nullptr, grads + s.offset, dense_m[d],
                            dense_v[d], s.numel, lr, o.beta1, o.beta2, o.eps, s.decay ? o.weight_decay : 0.0f, t,
                            grad_scale, s.offset);  // salt: the element index, as AdamW passes it
        }
        double bc1 = 1.0 - std::pow((double)o.beta1, tau + 1), bc2 = 1.0 - std::pow((double)o.beta2, tau + 1);
        float step_size = (float)(lr * std::sqrt(bc2) / bc1), decay = lr * o.weight_decay;
        for (size_t b = 0; b < blocks.size(); b++) {
            const RsoBlock& k = blocks[b];
            const BlockState& s = block_state[b];
            for (int l = 0; l < k.layers; l++) {
                size_t off = k.offset + (size_t)l * k.layer_stride, nv = k.var_numel();
                float *P = s.P + (size_t)l * k.proj_numel(), *B = s.B + l * nv, *m = s.m + l * nv, *v = s.v + l * nv;
                be.galore_project(scratch, grads + off, P, k.rows, k.cols, k.rank, true, grad_scale);
                if (o.prox > 0) be.rso_prox(scratch, B, nv, o.prox);
                be.galore_adam(scratch, m, v, nv, o.beta1, o.beta2, o.eps);
                be.rso_track(B, scratch, nv, step_size);
                be.galore_apply(params + off, master ? master + off : nullptr, scratch, P, k.rows, k.cols,
                                          k.rank, true, step_size, decay, off);
            }
        }
        if (t % o.gap == 0) {  // W_{k+1} = W_k + B Pᵀ is already in the buffer: start the next subproblem
            for (size_t b = 0; b < blocks.size(); b++) {
                const BlockState& s = block_state[b];
                size_t bytes = (size_t)blocks[b].layers * blocks[b].var_numel() * sizeof(float);
                be.zero(s.B, bytes);
                be.zero(s.m, bytes);
                be.zero(s.v, bytes);
            }
            draw_subspaces();
            push_to_sites();
        }
    }

    // Checkpoint state besides t (which fixes the outer iteration and Adam's inner step):
    //   rso.<w>.proj (L, n, r), rso.<w>.B / .exp_avg / .exp_avg_sq (L, m, r), adamw.<param>.m / .v, master.
    std::vector<OptimizerStateTensor> state_tensors() const {
        std::vector<OptimizerStateTensor> out;
        std::vector<float*> p = carve_state(memory, entries);
        for (size_t i = 0; i + 1 < entries.size(); i++)  // the last entry is the scratch
            out.push_back({entries[i].name, p[i], entries[i].numel});
        return out;
    }
    // After a checkpoint's state was loaded into the tensors above: the sites take the loaded P.
    void state_loaded() { push_to_sites(); }

   private:
    // P of every weight and layer for outer iteration t / gap: Haar, from (seed, weight, layer, iteration).
    void draw_subspaces() {
        uint64_t outer = (uint64_t)(t / o.gap);
        for (size_t b = 0; b < blocks.size(); b++) {
            const RsoBlock& k = blocks[b];
            std::vector<float> host(k.proj_numel());
            for (int l = 0; l < k.layers; l++) {
                PracDrawKey key{o.seed, (uint32_t)(RSO_DRAW_SITE_BASE + b), (uint32_t)l, outer, PRAC_DRAW_RSO};
                int info = prac_random_basis_cpu(host.data(), k.cols, k.rank, key);
                if (info != 0)
                    fail("RSO: the QR of the random subspace of %s layer %d failed (LAPACK info %d)", k.name.c_str(),
                         l, info);
                be.upload(block_state[b].P + (size_t)l * k.proj_numel(), host.data(), host.size() * sizeof(float));
            }
        }
    }
    // The bound sites' P (act_t) from ours (fp32): bf16 backends round it, which perturbs the stored X·P at the
    // bf16 level only (the update's Pᵀ stays fp32).
    void push_to_sites() {
        for (size_t b = 0; b < blocks.size(); b++) {
            if (!sites[b]) continue;
            const RsoBlock& k = blocks[b];
            std::vector<float> host((size_t)k.layers * k.proj_numel());
            be.download(host.data(), block_state[b].P, host.size() * sizeof(float));
            be.upload_f32(sites[b]->P, host.data(), host.size());
            sites[b]->has_basis.assign(k.layers, 1);
        }
    }
    static std::vector<StateEntry> state_entries(const std::vector<ParamSpec>& specs,
                                                 const std::vector<RsoBlock>& blocks, std::vector<ParamSpec>& dense) {
        std::vector<StateEntry> e;
        size_t scratch = 0, buffer = 0;
        for (const RsoBlock& k : blocks) {
            size_t nv = (size_t)k.layers * k.var_numel();
            e.push_back({"rso." + k.name + ".proj", (size_t)k.layers * k.proj_numel()});
            e.push_back({"rso." + k.name + ".B", nv});
            e.push_back({"rso." + k.name + ".exp_avg", nv});
            e.push_back({"rso." + k.name + ".exp_avg_sq", nv});
            scratch = std::max(scratch, k.var_numel());
        }
        dense.clear();
        for (const ParamSpec& s : specs) {
            buffer = std::max(buffer, s.offset + s.numel);
            bool blocked = false;
            for (const RsoBlock& k : blocks) blocked = blocked || k.name == s.name;
            if (blocked) continue;
            dense.push_back(s);
            e.push_back({"adamw." + s.name + ".m", s.numel});
            e.push_back({"adamw." + s.name + ".v", s.numel});
        }
        if (Backend::master_weights) e.push_back({"master", buffer});
        e.push_back({"scratch", scratch});
        return e;
    }
};
