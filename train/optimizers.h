// The optimizer a run uses, behind one small interface: AdamW (train/optim_adamw.h), Muon (optim_muon.h),
// Adam-mini (optim_adam_mini.h), GaLore (optim_galore.h) or RSO (optim_rso.h). The first four combine with every
// PRAC mode; RSO brings its own activation compression (PracOptions::rso_rank). All of them list their state as
// named tensors (fp32, or 8-bit AdamW's bytes), which checkpoints store and the planner counts.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "model/config.h"
#include "common/tensors.h"
#include "kernels/cpu_backend.h"  // state_bytes are counted on the CPU backend's layout
#include "kernels/cuda_sizes.h"   // galore_refresh_scratch: the CUDA refresh's layout
#include "train/optim_adam_mini.h"
#include "train/optim_galore.h"
#include "train/optim_muon.h"
#include "train/optim_rso.h"
#include "train/optim_adamw.h"

struct OptimizerChoice {
    std::string kind = "adamw";  // adamw | muon | adam-mini | galore | rso
    int zero_ranks = 1;          // > 1: AdamW's state and master weights sharded over this many ranks (ZeRO-1)
    AdamStates adam_states = AdamStates::F32;  // AdamW's moments: fp32 or 8-bit block-wise (--optimizer-states)
    float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
    int galore_rank = 0;  // 0: GaLore's rank for this model size (galore_default_rank)
    int galore_gap = 200;
    float galore_scale = 0.25f;
    float muon_momentum = 0.95f;
    int rso_rank = 0;  // 0: rso_default_rank
    int rso_gap = 200;
    float rso_prox = 0.0f;
    uint64_t rso_seed = 42;  // the run's seed, NOT offset per rank: every rank draws the same subspaces
};

// RSO's rank for this choice and model (0 for the other optimizers): what the model's linear sites store.
inline int rso_rank_of(const OptimizerChoice& c, const ModelConfig& cfg) {
    if (c.kind != "rso") return 0;
    return rso_rank_for(c.rso_rank, cfg);
}

template <class Backend>
struct Optimizer {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;
    virtual ~Optimizer() = default;
    virtual void step(act_t* params, const grad_t* grads, const std::vector<ParamSpec>& specs, float lr,
                      float grad_scale) = 0;
    virtual int& steps() = 0;  // completed steps (bias corrections, projection refreshes): checkpointed
    virtual std::vector<OptimizerStateTensor> state() const = 0;
    // fp32 master weights of parameter elements [master_begin(), ...) (nullptr when the backend keeps none)
    virtual float* master() const = 0;
    virtual size_t master_begin() const { return 0; }
    // RSO: the model's activation sites that store X·P with the optimizer's bases (a no-op for the others)
    virtual void bind_sites(std::vector<ActSite<Backend>>& /*sites*/) {}
    // called after a checkpoint's state was written into state()'s tensors
    virtual void state_loaded() {}
};

template <class Backend, class Impl>
struct OptimizerOf : Optimizer<Backend> {
    Impl impl;
    std::vector<ParamSpec> specs;  // GaLore names its state after them
    template <class... Args>
    explicit OptimizerOf(Args&&... args) : impl(std::forward<Args>(args)...) {}
    void step(typename Backend::act_t* params, const typename Backend::grad_t* grads,
              const std::vector<ParamSpec>& specs, float lr, float grad_scale) override {
        impl.step(params, grads, specs, lr, grad_scale);
    }
    int& steps() override { return impl.t; }
    std::vector<OptimizerStateTensor> state() const override {
        if constexpr (std::is_same_v<Impl, GaLore<Backend>>) return impl.state_tensors(specs);
        else return impl.state_tensors();
    }
    float* master() const override { return impl.master; }
    size_t master_begin() const override {
        if constexpr (std::is_same_v<Impl, AdamW<Backend>>) return impl.begin;
        return 0;
    }
    void bind_sites(std::vector<ActSite<Backend>>& sites) override {
        if constexpr (std::is_same_v<Impl, Rso<Backend>>) impl.bind_sites(sites);
    }
    void state_loaded() override {
        if constexpr (std::is_same_v<Impl, Rso<Backend>>) impl.state_loaded();
    }
};

// [shard_begin, shard_end): the slice of the parameter buffer this rank's AdamW updates (ZeRO-1); the other
// optimizers need whole matrices and refuse sharding.
template <class Backend>
std::unique_ptr<Optimizer<Backend>> make_optimizer(Backend& be, const OptimizerChoice& c, const ModelConfig& cfg,
                                                   const std::vector<ParamSpec>& specs, size_t n, size_t shard_begin,
                                                   size_t shard_end) {
    bool sharded = shard_begin != 0 || shard_end != n;
    if (c.adam_states == AdamStates::Q8) {
        if (c.kind != "adamw")
            fail("--optimizer-states 8bit quantizes AdamW's moments; --optimizer %s keeps its own fp32 state\n"
                 "---> HINT: use --optimizer adamw, or drop --optimizer-states", c.kind.c_str());
        if (sharded)
            fail("--optimizer-states 8bit does not combine with ZeRO-1 yet (its checkpoints hold whole-buffer "
                 "block scales)\n---> HINT: drop --zero 1, or keep fp32 states");
    }
    if (c.kind == "adamw")
        return std::make_unique<OptimizerOf<Backend, AdamW<Backend>>>(
            be, specs, shard_begin, shard_end, c.beta1, c.beta2, c.eps, c.weight_decay, c.adam_states,
            c.adam_states == AdamStates::Q8 ? adamw8_fp32_specs(specs, cfg.num_layers) : std::vector<bool>());
    if (sharded)
        fail("--optimizer %s does not shard its state (ZeRO-1 is AdamW's)\n---> HINT: drop --zero 1, or use "
             "--optimizer adamw", c.kind.c_str());
    // the Adam hyperparameters every options struct carries (the AdamW half of Muon, Adam-mini's, RSO's inner Adam)
    auto with_adam = [&c](auto o) {
        o.beta1 = c.beta1;
        o.beta2 = c.beta2;
        o.eps = c.eps;
        o.weight_decay = c.weight_decay;
        return o;
    };
    if (c.kind == "muon") {
        MuonOptions o = with_adam(MuonOptions());
        o.momentum = c.muon_momentum;
        return std::make_unique<OptimizerOf<Backend, Muon<Backend>>>(be, specs, cfg, o);
    }
    if (c.kind == "adam-mini")
        return std::make_unique<OptimizerOf<Backend, AdamMini<Backend>>>(be, specs, cfg, with_adam(AdamMiniOptions()));
    if (c.kind == "galore") {
        int rank = galore_rank_for(c.galore_rank, cfg);
        auto o = std::make_unique<OptimizerOf<Backend, GaLore<Backend>>>(
            be, specs, cfg, rank, c.galore_gap, c.galore_scale, c.beta1, c.beta2, c.eps, c.weight_decay);
        o->specs = specs;
        return o;
    }
    if (c.kind == "rso") {
        RsoOptions o = with_adam(RsoOptions());
        o.rank = rso_rank_of(c, cfg);
        o.gap = c.rso_gap;
        o.prox = c.rso_prox;
        o.seed = c.rso_seed;
        return std::make_unique<OptimizerOf<Backend, Rso<Backend>>>(be, specs, cfg, o);
    }
    fail("--optimizer must be adamw, muon, adam-mini, galore or rso (got \"%s\")", c.kind.c_str());
}

// Bytes the optimizer allocates for the planner: its state (moments, projections; without master weights, the
// planner's own row) and the workspace it holds next to it (Muon's u and Newton-Schulz temporaries, GaLore's and
// RSO's projected-gradient scratch).
inline size_t optimizer_state_bytes(const OptimizerChoice& c, const ModelConfig& cfg,
                                    const std::vector<ParamSpec>& specs, size_t n) {
    if (c.kind == "muon")
        return Muon<CpuBackend>::state_bytes(specs) + Muon<CpuBackend>::scratch_bytes(specs, cfg, true);
    if (c.kind == "adam-mini") return AdamMini<CpuBackend>::state_bytes(specs, cfg);
    int galore_rank = galore_rank_for(c.galore_rank, cfg);
    if (c.kind == "galore") return GaLore<CpuBackend>::state_bytes(specs, cfg, galore_rank);
    if (c.kind == "rso") return Rso<CpuBackend>::state_bytes(specs, cfg, rso_rank_of(c, cfg));
    if (c.adam_states == AdamStates::F32) return AdamW<CpuBackend>::state_bytes(c.adam_states, n, {});
    return AdamW<CpuBackend>::state_bytes(c.adam_states, n,
                                          adamw8_layout(specs, 0, n, adamw8_fp32_specs(specs, cfg.num_layers)));
}

// The CUDA backend's shared scratch that the optimizer's ops grow (kernels/optim_cuda.cu), bytes: GaLore's refresh
// of its largest block (kernels/cuda_sizes.h: galore_refresh_scratch, the layout the backend uses, plus the dsyevd
// workspace estimate); GaLore's and RSO's projection widen a bf16 gradient block to fp32 (m n floats: within
// GaLore's refresh's).
inline size_t optimizer_cuda_scratch_bytes(const OptimizerChoice& c, const ModelConfig& cfg,
                                           const std::vector<ParamSpec>& specs, bool bf16_grads) {
    size_t ws = 0;
    int galore_rank = galore_rank_for(c.galore_rank, cfg);
    if (c.kind == "galore")
        for (const GaloreBlock& b : galore_blocks(specs, cfg, galore_rank)) {
            const size_t k = (size_t)b.proj_dim();
            ws = std::max(ws, galore_refresh_scratch(b.rows, b.cols, k).solver + galore_syevd_bytes_estimate(k));
        }
    if (c.kind == "rso" && bf16_grads)
        for (const RsoBlock& b : rso_blocks(specs, cfg, rso_rank_of(c, cfg)))
            ws = std::max(ws, (size_t)b.rows * b.cols * 4);
    return ws;
}

// The master weights start as the parameters (bf16 backends): without this the first update would start from 0.
template <class Backend>
void init_master_weights(Backend& be, Optimizer<Backend>& opt, const typename Backend::act_t* params, size_t n) {
    float* master = opt.master();
    if (!master) return;
    std::vector<float> host(n);
    be.download_f32(host.data(), params, n);
    size_t lo = opt.master_begin();
    for (const OptimizerStateTensor& s : opt.state())
        if (s.data == master) be.upload(master, host.data() + lo, s.numel * sizeof(float));
}
