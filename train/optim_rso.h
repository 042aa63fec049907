// RSO, randomized subspace optimization (Chen, Zhang, Liu, Yuan, Wen 2025, "A Memory Efficient Randomized
// Subspace Optimization Method for Training Large Language Models", arXiv 2502.07222), as an optimizer over a
// model's parameter buffer. The PRAC paper's "random-only" baseline in Table 2.
//
// The method: an outer loop draws a random subspace per weight; an inner loop minimizes the loss over a small
// variable in that subspace, with a proximal term; the result is merged into the weight:
//   P_k random (n, r) with orthonormal columns, B = 0
//   B_k ~ argmin_B f(W_k + B P_kᵀ) + (prox / 2) ||B||²      (Adam from a fresh state, `gap` inner steps)
//   W_{k+1} = W_k + B_k P_kᵀ
// for every linear weight W (m, n) = nn.Linear (out, in) of the transformer blocks (qkvw, attprojw, fcw, fcprojw).
// Embeddings, the head, norms and biases are trained by AdamW at the same learning rate.
//
// How it runs here. The parameter buffer always holds W = W_k + B Pᵀ, so forward is the model's ordinary one.
// The gradient of B is G P, with G = dYᵀ X the weight's gradient: it only needs X·P (N, r), which is the
// memory point of the method. The linear sites therefore store X·P with the optimizer's P (PracOptions::rso_rank,
// ActSite::external: bound by bind_sites) and backward's factored weight gradient leaves G' = dYᵀ (X P) Pᵀ in
// the gradient buffer; since Pᵀ P = I, G' P = G P exactly, so this optimizer's projection of the buffer is B's
// true gradient whether or not the site compressed X (a test compares the two). The attention output (attprojw's
// input) is stored whole anyway for attention's backward; there the buffer holds G itself.
// Per inner step, per weight and layer (GaLore's per-block ops, kernels/galore.h, right side; kernels/rso.h):
//   R = grad_scale G P  (m, r);  R += prox B;  m, v Adam moments of R;  N = m / (sqrt(v) + eps)
//   s = lr sqrt(1 - b2^(τ+1)) / (1 - b1^(τ+1))   (τ = inner steps already taken: Adam restarts every outer step)
//   B -= s N;  W = (W - s N Pᵀ)(1 - lr wd)
// and after every `gap` steps: new P for every weight and layer, B = m = v = 0.
//
// Choices where the RSO paper's text available to us is silent (also in scripts/repro/README.md):
// - P is Haar-distributed (QR of a Gaussian draw; the method's analysis assumes Haar), one per weight and layer,
//   drawn from the run's seed so every data-parallel rank has the same P (it shapes the weights). Weights that
//   share an input share one P: q, k, v (our fused qkvw) and LLaMA's gate and up (fcw); each keeps its own rows
//   of B. One stored X·P then serves all of them.
// - gap = 200 inner steps (our choice, GaLore's refresh interval); prox = 0 (the paper's proximal constant comes
//   from its theory and its experimental value is not known to us; --rso-prox sets one).
// - Ranks: the PRAC paper's 256 (GPT-2 124M) and 512 (GPT-2 355M); for LLaMA, GaLore's ranks (128, 256, 256,
//   512 for 60M..1B: an assumption, RSO's own LLaMA settings are not available to us); elsewhere channels / 4.
// - Global-norm clipping sees the gradient buffer: for these weights G' with projected inputs, whose norm is
//   ||G P|| (B's gradient, what RSO's inner Adam trains on), but ||G|| with --rso-activations full, so the two
//   agree step for step only without clipping.
// - Decoupled weight decay acts on the whole W (AdamW's meaning of --weight-decay for every optimizer here);
//   --weight-decay 0 keeps every update inside the subspaces.
// - The gradient buffer keeps full-size weight gradients (the trainer's data-parallel reduction works on it),
//   so this implementation saves activation and optimizer memory, not gradient memory.
//
// State: per weight P (L, n, r), B, m, v (L, m, r); AdamW m, v of the other tensors; fp32 master weights when the
// backend stores bf16; one (m, r) scratch. Not sharded (ZeRO-1 would cut the weights).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/cpu_backend.h"
#include "kernels/rso.h"
#include "model/config.h"
#include "model/tensors.h"
#include "prac/prac.h"
#include "prac/site.h"
#include "train/optim_galore.h"
#include "train/optimizer.h"

struct RsoOptions {
    int rank = 0;       // 0: rso_default_rank(cfg)
    int gap = 200;      // inner steps per outer iteration (steps between subspace draws)
    float prox = 0.0f;  // coefficient of the proximal term (prox / 2) ||B||² (the paper's 1 / eta)
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.0f;
    uint64_t seed = 42;  // the subspace draws' key (the same on every rank)
};

// RSO's rank for a model (see the top of the file).
inline int rso_default_rank(const ModelConfig& cfg) {
    if (cfg.name == "gpt2-124m") return 256;
    if (cfg.name == "gpt2-355m") return 512;
    return galore_default_rank(cfg);
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

// The backend ops beyond GaLore's (GaloreOps): CpuBackend gets the twins of kernels/rso.h, another backend
// provides members rso_prox and rso_track with the same arguments.
template <class Backend>
void rso_prox_op(Backend& be, float* R, const float* B, size_t n, float prox) {
    if constexpr (std::is_same_v<Backend, CpuBackend>) rso_prox_cpu(R, B, n, prox);
    else be.rso_prox(R, B, n, prox);
}
template <class Backend>
void rso_track_op(Backend& be, float* B, const float* N, size_t n, float step) {
    if constexpr (std::is_same_v<Backend, CpuBackend>) rso_track_cpu(B, N, n, step);
    else be.rso_track(B, N, n, step);
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
                GaloreOps<Backend>::project(be, scratch, grads + off, P, k.rows, k.cols, k.rank, true, grad_scale);
                if (o.prox > 0) rso_prox_op(be, scratch, B, nv, o.prox);
                GaloreOps<Backend>::adam(be, scratch, m, v, nv, o.beta1, o.beta2, o.eps);
                rso_track_op(be, B, scratch, nv, step_size);
                GaloreOps<Backend>::apply(be, params + off, master ? master + off : nullptr, scratch, P, k.rows, k.cols,
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
