#include "train/planner.h"

#include <climits>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "common/error.h"
#include "kernels/cpu_backend.h"
#include "kernels/cuda_sizes.h"  // the CUDA backend's fixed scratch
#include "model/gpt2.h"
#include "model/llama.h"
#include "model/roberta.h"
#include "prac/refresh_layout.h"  // the CUDA refresh workspace's parts
#include "train/comm.h"  // zero_shard_begin
#include "train/optimizers.h"

const char* plan_target_name(PlanTarget t) {
    switch (t) {
        case PlanTarget::CPU_FP32: return "cpu (fp32)";
        case PlanTarget::CUDA_BF16: return "cuda (bf16)";
        case PlanTarget::CUDA_FP32: return "cuda (fp32 build)";
    }
    return "?";
}

size_t MemoryPlan::bytes(const std::string& key) const {
    for (const Row& c : categories)
        if (c.key == key) return c.bytes;
    return 0;
}

namespace {

// A backend that records layouts and allocates nothing: addresses are fake and never dereferenced (the models
// only do pointer arithmetic on them while laying out tensors).
template <DType ACT, DType GRAD, bool MASTER, size_t (*CLASSIFIER_SCRATCH)(size_t, int)>
struct PlanBackend {
    using act_t = std::conditional_t<ACT == DType::BF16, uint16_t, float>;
    using grad_t = std::conditional_t<GRAD == DType::BF16, uint16_t, float>;
    static constexpr DType act_dtype = ACT;
    static constexpr DType grad_dtype = GRAD;
    static constexpr bool master_weights = MASTER;
    static size_t classifier_scratch_floats(size_t N, int V) { return CLASSIFIER_SCRATCH(N, V); }
    uintptr_t next = 1 << 20;
    void* alloc(size_t bytes) {
        void* p = (void*)next;
        next += align_up(bytes, TENSOR_ALIGN) + TENSOR_ALIGN;
        return p;
    }
    void free(void*, size_t) {}
    void check_attention_shape(int, int) const {}  // a plan is made for any shape; the real backend checks
    void rope_table(float*, int, int, float) {}
    void prac_refresh_discard(const act_t*) {}  // a plan's model never refreshes
};

using PlanCpu = PlanBackend<DType::F32, DType::F32, false, CpuBackend::classifier_scratch_floats>;
using PlanCudaBf16 = PlanBackend<DType::BF16, DType::BF16, true, classifier_cuda_scratch_floats>;
using PlanCudaFp32 = PlanBackend<DType::F32, DType::F32, false, classifier_cuda_scratch_floats>;

template <class Model, class PB>
MemoryPlan plan_with(const ModelConfig& cfg, const PracOptions& prac, int B, int T, PlanTarget target,
                     const OptimizerChoice& optim, Recompute recompute) {
    PB be;
    Model model(be, cfg, prac, recompute);
    model.allocate_activations(B, T);
    MemoryPlan p;
    p.model = cfg.name;
    p.B = B;
    p.T = T;
    p.target = target;
    p.prac = prac.mode;
    p.prac_storage = prac.storage;
    p.rso_rank = prac.rso_rank;
    p.num_parameters = model.num_parameters;
    p.vocab_padding_parameters = cfg.vocab_padding_parameters();
    p.compressed_sites = compressed_sites(model.sites);
    size_t n = model.param_buffer_numel;
    // ZeRO-1 over R ranks: each rank keeps its shard of AdamW's moments and master weights (rank 0's is the largest)
    size_t shard = optim.zero_ranks > 1 ? zero_shard_begin(n, 1, optim.zero_ranks) : n;
    p.zero_ranks = optim.zero_ranks;
    p.optimizer = optim.kind;
    p.optimizer_8bit = optim.adam_states == AdamStates::Q8;
    p.galore_rank = optim.kind == "galore" ? galore_rank_for(optim.galore_rank, cfg) : 0;
    p.recompute = recompute;
    const char* pdt = dtype_name(PB::act_dtype);
    p.categories.push_back({"weights", format("weights (%s)", pdt), n * dtype_size(PB::act_dtype)});
    p.categories.push_back({"gradients", format("gradients (%s)", dtype_name(PB::grad_dtype)),
                            n * dtype_size(PB::grad_dtype)});
    p.categories.push_back({"master_weights", "master weights (f32)", PB::master_weights ? shard * 4 : 0});
    p.categories.push_back({"optimizer_state", format("optimizer state (%s, %s)", optim.kind.c_str(),
                                                      p.optimizer_8bit ? "8-bit, block-wise" : "f32"),
                            optimizer_state_bytes(optim, cfg, model.param_specs, shard)});
    const std::pair<MemCategory, const char*> act_rows[] = {
        {MemCategory::INPUTS, "inputs"},           {MemCategory::SAVED_EXACT, "saved_exact"},
        {MemCategory::SAVED_LINEAR, "saved_linear"}, {MemCategory::SAVED_NONLINEAR, "saved_nonlinear"},
        {MemCategory::TRANSIENT, "transient"},     {MemCategory::LOSS, "loss"}};
    for (auto [c, key] : act_rows) {
        size_t bytes = 0;
        for (const TensorSpec& s : model.arena.act_specs)
            if (s.category == c && s.numel) bytes += align_up(s.numel * dtype_size(s.dtype), TENSOR_ALIGN);
        p.categories.push_back({key, mem_category_name(c), bytes});
    }
    // (RSO's linear sites hold a copy of the optimizer's P, not PRAC's [Q1 | sqrt(k) Q2]: named so, same key)
    p.categories.push_back({"prac_bases",
                            prac.rso_rank > 0 && prac.mode == PracMode::NONE ? "RSO's P at the linear sites"
                                                                             : mem_category_name(MemCategory::PRAC_BASES),
                            tensors_bytes(model.arena.basis_specs)});
    size_t ws = 0;
    for (const auto& s : model.sites)
        if (s.compressed() && !s.external)  // RSO: host draws
            ws = std::max(ws, target == PlanTarget::CPU_FP32 ? prac_refresh_cpu_workspace_bytes(s.n, s.dims)
                                                             : plan_cuda_refresh_workspace(s.n, s.dims));
    const size_t refresh_ws = ws;
    if (target != PlanTarget::CPU_FP32) {
        // the CUDA backend's library memory (kernels/cuda_backend.cu): the cuBLASLt workspace, the step's device
        // loss sum, plus ONE scratch buffer grown to its largest user, rounded up to 1 MiB: the PRAC refresh
        // (above), attention backward's row sums D or, in the bf16 target, cuDNN's attention workspace (estimate;
        // the bf16 target is planned as the GPU recipe builds it, with cudnn-frontend, whose attention Auto
        // prefers; a build without it needs less), the embedding backward's sort keys, the norm backward's column
        // partials (LayerNorm's two sums, RMSNorm's one), the gradient norm's sum of squares, and the optimizer's
        // ops (GaLore's refresh, bf16 gradient blocks widened for a projection); each user's size is the function
        // the backend calls (kernels/cuda_sizes.h). (Muon's norms take SUMSQ_BLOCKS doubles plus one per matrix of a
        // batch: under 1 MiB, inside the rounding.)
        const int N = B * T, C = cfg.channels;
        size_t attn = attention_backward_scratch_floats(B, T, cfg.num_heads) * sizeof(float);
        if (target == PlanTarget::CUDA_BF16 && cudnn_attention_takes_head_size(cfg.head_dim()))
            attn = std::max(attn, cudnn_sdpa_workspace_estimate(B, T, cfg.num_heads, cfg.head_dim()));
        const size_t norm = cfg.arch == Arch::LLAMA ? rmsnorm_backward_scratch_bytes(N, C)
                                                    : layernorm_backward_scratch_bytes(N, C);
        ws = std::max({ws, attn, encoder_backward_scratch_bytes(B, T), norm, SUM_SQUARES_SCRATCH_BYTES,
                       optimizer_cuda_scratch_bytes(optim, cfg, model.param_specs, PB::grad_dtype == DType::BF16)});
        ws = align_up(ws, 1 << 20) + CUBLASLT_WORKSPACE_BYTES + CUDA_LOSS_SUM_BYTES;
        // --prac-refresh-overlap: the refresh worker's own workspace beside the scratch (CudaBackend::RefreshWorker,
        // grown to the widest site's in 1 MiB steps), since its solve runs while the step uses the scratch
        if (prac.overlap) ws += align_up(refresh_ws, 1 << 20);
    }
    p.categories.push_back({"library_workspaces",
                            target == PlanTarget::CPU_FP32 ? "PRAC refresh workspace (host)" : "library workspaces", ws});
    for (const auto& c : p.categories) p.total += c.bytes;
    return p;
}

template <class PB>
MemoryPlan plan_for(const ModelConfig& cfg, const PracOptions& prac, int B, int T, PlanTarget target,
                    const OptimizerChoice& optim, Recompute recompute) {
    switch (cfg.arch) {
        case Arch::GPT2: return plan_with<GPT2<PB>, PB>(cfg, prac, B, T, target, optim, recompute);
        case Arch::LLAMA: return plan_with<Llama<PB>, PB>(cfg, prac, B, T, target, optim, recompute);
        case Arch::ROBERTA: return plan_with<Roberta<PB>, PB>(cfg, prac, B, T, target, optim, recompute);
    }
    return {};
}

std::string human_bytes(size_t b) {
    if (b >= (1ull << 30)) return format("%.2f GiB", b / 1073741824.0);
    if (b >= (1ull << 20)) return format("%.1f MiB", b / 1048576.0);
    if (b >= (1ull << 10)) return format("%.1f KiB", b / 1024.0);
    return format("%zu B", b);
}

}  // namespace

// The CPU refresh allocates exactly prac_refresh_cpu_workspace_bytes (prac/prac.h; test_prac_refresh checks it).
// The CUDA refresh's workspace is the layout it shares with us (prac/refresh_layout.h: the Gram matrix, the new
// basis, the subspace block and its factors, Q2's, the small parts, each aligned to 256 bytes) plus cuSOLVER's
// device buffer, which only cuSOLVER can size (prac_refresh_workspace_bytes asks it, on a GPU): estimated by
// LAPACK's documented minimum for ssyevd with eigenvectors (1 + 6m + 2m^2 floats, m = b, or n when exact), the
// largest of the refresh's solver calls, or without a Q1 the Householder fallbacks' (64 columns' worth of
// reflector blocks per QR column). Transient: one refresh at a time.
size_t plan_cuda_refresh_workspace(int n, const SiteDims& d) {
    size_t m = (size_t)(d.block(n) ? d.block(n) : n);
    size_t qr = 4 * 64 * (size_t)std::max(d.r(), d.block(n));
    size_t solver = std::max(d.r1 > 0 ? 4 * (1 + 6 * m + 2 * m * m) : 0, qr);
    return refresh_layout(n, d).solver + align256(solver);
}

MemoryPlan plan_memory(const ModelConfig& cfg, const PracOptions& prac, int B, int T, PlanTarget target,
                       const OptimizerChoice* optimizer, Recompute recompute) {
    CHECK_USER(B > 0 && T > 0, "planning needs a positive batch and sequence length (B=%d, T=%d)", B, T);
    // the kernels index a micro-batch's tokens N = B·T with an int
    CHECK_USER((long long)B * T <= INT_MAX, "a micro-batch of B x T = %d x %d = %lld tokens is more than the %d the "
               "kernels index\n---> HINT: use a smaller --batch-size and --grad-accum for the same tokens a step", B,
               T, (long long)B * T, INT_MAX);
    OptimizerChoice adamw;
    const OptimizerChoice& o = optimizer ? *optimizer : adamw;
    switch (target) {
        case PlanTarget::CPU_FP32: return plan_for<PlanCpu>(cfg, prac, B, T, target, o, recompute);
        case PlanTarget::CUDA_BF16: return plan_for<PlanCudaBf16>(cfg, prac, B, T, target, o, recompute);
        case PlanTarget::CUDA_FP32: return plan_for<PlanCudaFp32>(cfg, prac, B, T, target, o, recompute);
    }
    return {};
}

int plan_max_batch(const ModelConfig& cfg, const PracOptions& prac, int T, PlanTarget target, size_t gpu_bytes,
                   size_t reserve, const OptimizerChoice* optimizer, Recompute recompute) {
    auto fits = [&](int B) {  // (a micro-batch past the int token index fits nothing: plan_memory refuses it)
        return (long long)B * T <= INT_MAX &&
               plan_memory(cfg, prac, B, T, target, optimizer, recompute).total + reserve <= gpu_bytes;
    };
    if (!fits(1)) return 0;
    int lo = 1, hi = 2;
    while (fits(hi)) {
        if (hi == PLAN_MAX_BATCH_LIMIT) return hi;
        lo = hi;
        hi *= 2;
    }
    while (hi - lo > 1) {  // fits(lo), !fits(hi): memory grows with B
        int mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
    }
    return lo;
}

std::string plan_table(const MemoryPlan& p) {
    std::string acts = p.rso_rank > 0 ? format("RSO projections (rank %d)", p.rso_rank)
                                      : format("PRAC %s%s", prac_mode_name(p.prac),
                                               p.prac_storage == PracStorage::FP8 ? " (fp8 storage)" : "");
    std::string tail = p.zero_ranks > 1 ? format(", one of %d ranks (ZeRO-1)", p.zero_ranks) : "";
    // (the optimizer is in its row's label; recomputation only shows in the saved rows, so it is said here where it
    // is not the default: --recompute 0, --recompute-attention 1)
    if (p.recompute.level > 0) tail += format(", --recompute %d", p.recompute.level);
    if (!p.recompute.attention_out) tail += ", --recompute-attention 0";
    // (as the run's header says them: the padded vocabulary rows are ours, not the model's as Hugging Face counts it)
    std::string params = format("%zu parameters", p.num_parameters);
    if (p.vocab_padding_parameters)
        params += format(" (%zu without the padded vocabulary rows)", p.num_parameters - p.vocab_padding_parameters);
    std::string s = format("memory plan: %s, B=%d, T=%d, %s, %s, %s%s\n", p.model.c_str(), p.B, p.T,
                           plan_target_name(p.target), acts.c_str(), params.c_str(), tail.c_str());
    size_t w = 5;
    for (const auto& c : p.categories) w = std::max(w, c.label.size());
    std::string line = "+" + std::string(w + 2, '-') + "+" + std::string(17, '-') + "+" + std::string(13, '-') + "+\n";
    s += line + format("| %-*s | %15s | %11s |\n", (int)w, "category", "bytes", "") + line;
    for (const auto& c : p.categories)
        s += format("| %-*s | %15zu | %11s |\n", (int)w, c.label.c_str(), c.bytes, human_bytes(c.bytes).c_str());
    s += line + format("| %-*s | %15zu | %11s |\n", (int)w, "total", p.total, human_bytes(p.total).c_str()) + line;
    return s;
}

std::string plan_json(const MemoryPlan& p) {
    nlohmann::ordered_json j;
    j["model"] = p.model;
    j["batch_size"] = p.B;
    j["seq_len"] = p.T;
    j["target"] = plan_target_name(p.target);
    j["prac"] = prac_mode_name(p.prac);
    j["prac_storage"] = prac_storage_name(p.prac_storage);
    j["rso_rank"] = p.rso_rank;
    j["zero_ranks"] = p.zero_ranks;
    j["optimizer"] = p.optimizer;
    j["optimizer_states"] = p.optimizer_8bit ? "8bit" : "fp32";  // as --optimizer-states spells them
    j["galore_rank"] = p.galore_rank;
    j["recompute"] = p.recompute.level;
    j["recompute_attention"] = p.recompute.attention_out ? 1 : 0;
    j["num_parameters"] = p.num_parameters;
    nlohmann::ordered_json bytes = nlohmann::ordered_json::object();
    for (const auto& c : p.categories) bytes[c.key] = c.bytes;
    j["bytes"] = bytes;
    j["total"] = p.total;
    return j.dump(2);
}
