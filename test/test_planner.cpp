// Memory planner: planned bytes equal the CPU backend's real allocations, and the numbers for GPT-2 124M match
// an independent hand calculation from the model's shapes.
#include <gtest/gtest.h>
#include <climits>

#include "kernels/cpu_backend.h"
#include "kernels/cuda_sizes.h"  // cudnn_sdpa_workspace_estimate
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/comm.h"
#include "train/planner.h"
#include "train/optimizers.h"

namespace {

// The activation and basis categories of a plan (everything the model allocates besides params/grads/optimizer).
size_t arena_bytes(const MemoryPlan& p) {
    size_t b = 0;
    for (const char* k : {"inputs", "saved_exact", "saved_linear", "saved_nonlinear", "transient", "loss", "prac_bases"})
        b += p.bytes(k);
    return b;
}

template <template <class> class M>
void check_plan_equals_allocation(Arch arch, const char* model_name) {
    ModelConfig cfg = model_config_load(arch, model_name);
    for (PracMode mode : {PracMode::NONE, PracMode::PRAC, PracMode::PAC, PracMode::RAC})
      for (PracStorage storage : {PracStorage::ACT, PracStorage::FP8})
       for (bool overlap : {false, true})  // --prac-refresh-overlap: its pending bases
        for (auto [B, T] : {std::pair{1, 8}, std::pair{3, 24}, std::pair{2, 64}}) {
            if (mode == PracMode::NONE && storage == PracStorage::FP8) continue;  // the CLI refuses it
            if (overlap && (mode != PracMode::PRAC || storage != PracStorage::ACT)) continue;
            PracOptions prac;
            prac.mode = mode;
            prac.storage = storage;
            prac.overlap = overlap ? 2 : 0;  // 2 steps: twice the slots
            prac.t1 = prac.t2 = 3;  // several pending slots: ceil(units / 3)
            CpuBackend be;
            M<CpuBackend> model(be, cfg, prac);
            size_t params_bytes = be.live_bytes;
            model.allocate_activations(B, T);
            size_t arena = be.live_bytes - params_bytes;
            MemoryPlan p = plan_memory(cfg, prac, B, T, PlanTarget::CPU_FP32);
            EXPECT_EQ(arena_bytes(p), arena) << model_name << " " << prac_mode_name(mode) << " "
                                             << prac_storage_name(storage) << (overlap ? " overlap" : "")
                                             << " B=" << B << " T=" << T;
            EXPECT_EQ(p.bytes("weights") + p.bytes("gradients"), params_bytes) << model_name;
            EXPECT_EQ(p.bytes("master_weights"), 0u);
            EXPECT_EQ(p.num_parameters, model.num_parameters);
        }
}

}  // namespace

TEST(Planner, PlannedBytesEqualCpuAllocationsGpt2) { check_plan_equals_allocation<GPT2>(Arch::GPT2, "gpt2-tiny"); }
TEST(Planner, PlannedBytesEqualCpuAllocationsLlama) { check_plan_equals_allocation<Llama>(Arch::LLAMA, "llama-tiny"); }

// GPT-2 124M, B=64, T=1024, CUDA bf16: every tensor below is a multiple of 256 bytes, so the sums are exact.
TEST(Planner, Gpt2_124mByHand) {
    ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-124m");
    const size_t L = 12, N = 64 * 1024, C = 768, F = 3072, NH = 12, bf16 = 2, f32 = 4;
    PracOptions none;
    MemoryPlan p = plan_memory(cfg, none, 64, 1024, PlanTarget::CUDA_BF16);
    // parameters: 124,475,904 with the vocab padded to 50304 (HF's 124,439,808 has 50257 rows of wte)
    EXPECT_EQ(p.num_parameters, 124475904u);
    // the header says both (it gave the padded count alone, which the run's header calls ours, not Hugging Face's)
    EXPECT_NE(plan_table(p).find("124475904 parameters (124439808 without the padded vocabulary rows)"),
              std::string::npos) << plan_table(p);
    EXPECT_EQ(p.bytes("saved_linear"), L * N * (C + C + F) * bf16);              // ln1, ln2, gelu output
    EXPECT_EQ(p.bytes("saved_nonlinear"), ((L + 1) * N * C + L * N * C + L * N * F) * bf16);  // resid(+final), resid_mid, fch
    EXPECT_EQ(p.bytes("saved_exact"),
              L * N * 3 * C * bf16 + L * N * C * bf16 + L * N * NH * f32  // qkv, O, LSE
                  + 4 * L * N * f32 + 2 * N * f32);                       // LN mean/rstd per layer, final LN
    EXPECT_EQ(p.bytes("prac_bases"), 0u);
    const size_t P = 124475904;
    EXPECT_EQ(p.bytes("weights"), P * bf16);
    EXPECT_EQ(p.bytes("gradients"), P * bf16);
    EXPECT_EQ(p.bytes("master_weights"), P * f32);
    EXPECT_EQ(p.bytes("optimizer_state"), 2 * P * f32);  // AdamW's m and v
    EXPECT_EQ(p.bytes("inputs"), 2 * N * sizeof(int32_t));  // tokens and targets

    // PRAC with the paper's ranks: linear r1 = r2 = floor8(0.3 n), nonlinear floor8(0.2 n)
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    MemoryPlan q = plan_memory(cfg, prac, 64, 1024, PlanTarget::CUDA_BF16);
    const size_t rl_C = 224 + 224, rl_F = 920 + 920, rn_C = 152 + 152, rn_F = 608 + 608;
    EXPECT_EQ(q.bytes("saved_linear"), L * N * (rl_C + rl_C + rl_F) * bf16);
    EXPECT_EQ(q.bytes("saved_nonlinear"), L * N * (rn_C + rn_C + rn_F) * bf16);  // the final LN input is not saved
    EXPECT_EQ(q.bytes("saved_exact"), p.bytes("saved_exact"));
    EXPECT_EQ(q.bytes("prac_bases"), L * (C * rl_C * 2 + F * rl_F + C * rn_C * 2 + F * rn_F) * bf16);
    // transient: baseline scratch + full-width buffers (residual, GeLU input; the LN output and the GeLU output
    // live in backward scratch, model/sites.h) + dW scratch
    size_t wgrad_tmp = std::max({3 * C * rl_C, F * rl_C, C * rl_F}) * f32;
    EXPECT_EQ(q.bytes("transient"), p.bytes("transient") + N * (C + F) * bf16 + wgrad_tmp);
    EXPECT_LT(q.total, p.total);
    // PAC and RAC keep the same total rank per site (r1 + r2 all principal, or all random): the same bytes
    for (PracMode mode : {PracMode::PAC, PracMode::RAC}) {
        prac.mode = mode;
        MemoryPlan m = plan_memory(cfg, prac, 64, 1024, PlanTarget::CUDA_BF16);
        EXPECT_EQ(m.bytes("saved_linear"), L * N * (rl_C + rl_C + rl_F) * bf16) << prac_mode_name(mode);
        EXPECT_EQ(m.bytes("saved_nonlinear"), L * N * (rn_C + rn_C + rn_F) * bf16) << prac_mode_name(mode);
        EXPECT_EQ(m.bytes("prac_bases"), L * (C * rl_C * 2 + F * rl_F + C * rn_C * 2 + F * rn_F) * bf16);
        EXPECT_EQ(m.bytes("transient"), p.bytes("transient") + N * (C + F) * bf16 + wgrad_tmp);
    }
}

// LLaMA 130M, B=16, T=256, CUDA bf16 (every tensor a multiple of 256 bytes): gate and up are two (N, F) sites
// with the nonlinear ranks of width F (not one (N, 2F) site), and of PRAC's transients only the residual stream's
// has a buffer of its own (ln1/ln2 output, gate|up and the SwiGLU output live in backward scratch).
TEST(Planner, Llama130mPracByHand) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-130m");
    const size_t L = 12, N = 16 * 256, C = 768, F = 2048, bf16 = 2, f32 = 4;
    PracOptions none, prac;
    prac.mode = PracMode::PRAC;
    MemoryPlan p = plan_memory(cfg, none, 16, 256, PlanTarget::CUDA_BF16);
    MemoryPlan q = plan_memory(cfg, prac, 16, 256, PlanTarget::CUDA_BF16);
    EXPECT_EQ(p.bytes("saved_linear"), L * N * (C + C + F) * bf16);                                 // ln1, ln2, act
    EXPECT_EQ(p.bytes("saved_nonlinear"), ((L + 1) * N * C + L * N * C + 2 * L * N * F) * bf16);  // + gate, up
    const size_t rl_C = 224 + 224, rl_F = 608 + 608, rn_C = 152 + 152, rn_F = 408 + 408;  // floor8(0.3n), floor8(0.2n)
    EXPECT_EQ(q.bytes("saved_linear"), L * N * (rl_C + rl_C + rl_F) * bf16);
    EXPECT_EQ(q.bytes("saved_nonlinear"), L * N * (rn_C + rn_C + rn_F + rn_F) * bf16);
    EXPECT_EQ(q.bytes("prac_bases"), L * (C * rl_C * 2 + F * rl_F + C * rn_C * 2 + F * rn_F * 2) * bf16);
    size_t wgrad_tmp = std::max({3 * C * rl_C, F * rl_C, C * rl_F}) * f32;  // ln2's dW per half: OC = F
    EXPECT_EQ(q.bytes("transient"), p.bytes("transient") + N * C * bf16 + wgrad_tmp);
    // --prac-refresh-overlap at T1 = T2 = 500 over 7 x 12 = 84 staggered site-layers: at most one refresh a step, so
    // one pending copy of the widest basis (fch_act: F x 1216), and the refresh worker's own workspace beside the
    // scratch: the widest site's refresh workspace (fch_act's: n = F with the largest ranks), in whole MiB
    prac.overlap = 1;
    MemoryPlan o = plan_memory(cfg, prac, 16, 256, PlanTarget::CUDA_BF16);
    EXPECT_EQ(o.bytes("prac_bases"), q.bytes("prac_bases") + F * rl_F * bf16);
    const size_t MiB = 1 << 20;
    size_t refresh = plan_cuda_refresh_workspace(F, prac_site_dims(prac, SiteClass::LINEAR, F, "fch_act"));
    EXPECT_EQ(o.bytes("library_workspaces"), q.bytes("library_workspaces") + (refresh + MiB - 1) / MiB * MiB);
    EXPECT_EQ(o.total, q.total + F * rl_F * bf16 + (refresh + MiB - 1) / MiB * MiB);
}

// GPT-2 124M, B=64, T=1024, CUDA bf16, PRAC with fp8 storage: each saved value is one byte plus one fp32 scale per
// row and layer (L·N·4 bytes per site, a multiple of 256); the shared block scratch is 8192 rows of the widest rank
// (fch_gelu's 1840) in bf16; everything else as with bf16 storage.
TEST(Planner, Gpt2_124mPracFp8ByHand) {
    ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-124m");
    const size_t L = 12, N = 64 * 1024, bf16 = 2, f32 = 4;
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    MemoryPlan q = plan_memory(cfg, prac, 64, 1024, PlanTarget::CUDA_BF16);
    prac.storage = PracStorage::FP8;
    MemoryPlan f = plan_memory(cfg, prac, 64, 1024, PlanTarget::CUDA_BF16);
    const size_t rl_C = 224 + 224, rl_F = 920 + 920, rn_C = 152 + 152, rn_F = 608 + 608;
    EXPECT_EQ(f.bytes("saved_linear"), L * N * (rl_C + rl_C + rl_F) * 1 + 3 * L * N * f32);
    EXPECT_EQ(f.bytes("saved_nonlinear"), L * N * (rn_C + rn_C + rn_F) * 1 + 3 * L * N * f32);
    EXPECT_EQ(f.bytes("transient"), q.bytes("transient") + 8192 * rl_F * bf16);
    for (const char* k : {"saved_exact", "prac_bases", "weights", "optimizer_state", "library_workspaces", "loss"})
        EXPECT_EQ(f.bytes(k), q.bytes(k)) << k;
    EXPECT_EQ(f.prac_storage, PracStorage::FP8);
    EXPECT_NE(plan_table(f).find("PRAC prac (fp8 storage)"), std::string::npos) << plan_table(f);
    EXPECT_NE(plan_json(f).find("\"prac_storage\": \"fp8\""), std::string::npos) << plan_json(f);
}

// The CUDA backend's one scratch buffer is planned at its largest user rounded up to 1 MiB, beside the 32 MiB
// cuBLASLt workspace and the 4-byte loss sum (CUDA fp32 target: no cuDNN workspace; no PRAC, AdamW: no refresh or
// optimizer scratch). At N = 16384 rows the norms' column sums take 256 row chunks (about 64 rows each, at most
// 256: kernels/elementwise_common.cuh colsum_launch): LayerNorm's backward keeps dweight's and dbias's fp32
// partials, 2 x 256 x 768 x 4 = 1.5 MiB in GPT-2 124M (above attention's D, N x 12 heads x 4 = 768 KiB); RMSNorm's
// keeps dweight's alone, 256 x 2048 x 4 = 2 MiB in LLaMA 1B with 16 heads of 128 (above D, N x 16 x 4 = 1 MiB).
// Counting LLaMA's norm as LayerNorm's planned 4 MiB; leaving the norms out, 1 MiB.
TEST(Planner, CudaScratchIsItsLargestUserByHand) {
    const size_t MiB = 1 << 20, fixed = 32 * MiB + 4;
    PracOptions none;
    MemoryPlan g = plan_memory(model_config_load(Arch::GPT2, "gpt2-124m"), none, 16, 1024, PlanTarget::CUDA_FP32);
    EXPECT_EQ(g.bytes("library_workspaces"), 2 * MiB + fixed);  // 1.5 MiB rounded up
    ModelConfig llama = model_config_load(Arch::LLAMA, "llama-1b");
    llama.num_heads = 16;
    MemoryPlan l = plan_memory(llama, none, 16, 1024, PlanTarget::CUDA_FP32);
    EXPECT_EQ(l.bytes("library_workspaces"), 2 * MiB + fixed);
}

// The largest micro-batch that fits: B fits, B + 1 does not.
TEST(Planner, MaxBatchIsTight) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-130m");
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    size_t gpu = 40ull << 30, reserve = 1ull << 30;
    int b = plan_max_batch(cfg, prac, 256, PlanTarget::CUDA_BF16, gpu, reserve);
    ASSERT_GT(b, 0);
    EXPECT_LE(plan_memory(cfg, prac, b, 256, PlanTarget::CUDA_BF16).total + reserve, gpu);
    EXPECT_GT(plan_memory(cfg, prac, b + 1, 256, PlanTarget::CUDA_BF16).total + reserve, gpu);
    EXPECT_EQ(plan_max_batch(cfg, prac, 256, PlanTarget::CUDA_BF16, 1ull << 20, reserve), 0);
    // PRAC fits a larger micro-batch than the baseline
    PracOptions none;
    EXPECT_GT(b, plan_max_batch(cfg, none, 256, PlanTarget::CUDA_BF16, gpu, reserve));
    // memory where every batch the search tries fits: the limit itself (it answered the limit minus 1, as if the
    // next batch did not fit)
    ModelConfig tiny = model_config_load(Arch::LLAMA, "llama-tiny");
    EXPECT_EQ(plan_max_batch(tiny, prac, 8, PlanTarget::CUDA_BF16, (size_t)1 << 62, reserve), PLAN_MAX_BATCH_LIMIT);
    // a micro-batch's tokens are indexed with an int (N = B·T in the forward and backward): a plan past it is refused,
    // and the search stops below it (it planned B = 2^20 at T = 4096, N = 2^32, with exit 0)
    ModelConfig tiny_long = tiny;
    tiny_long.max_seq_len = 4096;  // (a RoPE table that long: the limit below is the token index's, not T's)
    EXPECT_THROW(plan_memory(tiny_long, prac, 1 << 20, 4096, PlanTarget::CUDA_BF16), UserError);
    EXPECT_NO_THROW(plan_memory(tiny_long, prac, INT_MAX / 4096, 4096, PlanTarget::CUDA_BF16));
    EXPECT_EQ(plan_max_batch(tiny_long, prac, 4096, PlanTarget::CUDA_BF16, (size_t)1 << 62, reserve), INT_MAX / 4096);
}

// --recompute: planned == allocated on the CPU, and the savings match the hand formula. Recompute 1 keeps one
// (N, F) activation-output slot instead of L; recompute 2 also one (N, C) slot for ln1 and ln2 together
// instead of 2L. The slots are transient (nothing is saved); everything else is unchanged.
namespace {

template <template <class> class M>
void check_recompute_plan_equals_allocation(Arch arch, const char* model_name) {
    ModelConfig cfg = model_config_load(arch, model_name);
    struct Case {
        PracMode mode;
        bool nonlinear;
        Recompute recompute;
    };
    for (Case c : {Case{PracMode::NONE, true, 1}, Case{PracMode::NONE, true, 2}, Case{PracMode::PRAC, true, 1},
                   Case{PracMode::PRAC, false, 2}, Case{PracMode::PAC, false, 1}, Case{PracMode::NONE, true, {0, true}},
                   Case{PracMode::PRAC, true, {1, true}}, Case{PracMode::PRAC, false, {2, true}}})
        for (auto [B, T] : {std::pair{1, 8}, std::pair{3, 24}}) {
            PracOptions prac;
            prac.mode = c.mode;
            prac.nonlinear = c.nonlinear;
            CpuBackend be;
            M<CpuBackend> model(be, cfg, prac, c.recompute);
            size_t params_bytes = be.live_bytes;
            model.allocate_activations(B, T);
            size_t arena = be.live_bytes - params_bytes;
            MemoryPlan p = plan_memory(cfg, prac, B, T, PlanTarget::CPU_FP32, nullptr, c.recompute);
            EXPECT_EQ(arena_bytes(p), arena) << model_name << " " << prac_mode_name(c.mode) << " r"
                                             << c.recompute.level << (c.recompute.attention_out ? " attention-out" : "");
        }
}

template <template <class> class M>
void check_recompute_savings(Arch arch, const char* model_name, int B, int T) {
    ModelConfig cfg = model_config_load(arch, model_name);
    const size_t L = cfg.num_layers, N = (size_t)B * T, C = cfg.channels, F = cfg.hidden, bf16 = 2;
    PracOptions none;
    MemoryPlan p0 = plan_memory(cfg, none, B, T, PlanTarget::CUDA_BF16);
    MemoryPlan p1 = plan_memory(cfg, none, B, T, PlanTarget::CUDA_BF16, nullptr, 1);
    MemoryPlan p2 = plan_memory(cfg, none, B, T, PlanTarget::CUDA_BF16, nullptr, 2);
    EXPECT_EQ(p0.total - p1.total, (L - 1) * N * F * bf16) << model_name;
    EXPECT_EQ(p1.total - p2.total, (2 * L - 1) * N * C * bf16) << model_name;
    EXPECT_EQ(p1.bytes("saved_linear"), p0.bytes("saved_linear") - L * N * F * bf16);
    EXPECT_EQ(p1.bytes("transient"), p0.bytes("transient") + N * F * bf16);
    EXPECT_EQ(p2.bytes("saved_linear"), 0u);
    EXPECT_EQ(p2.bytes("transient"), p1.bytes("transient") + N * C * bf16);
    for (const char* k : {"saved_exact", "saved_nonlinear", "prac_bases", "weights", "optimizer_state"}) {
        EXPECT_EQ(p1.bytes(k), p0.bytes(k)) << k;
        EXPECT_EQ(p2.bytes(k), p0.bytes(k)) << k;
    }
    // PRAC on linear sites only + recompute 2: nothing left to compress, the same plan as without PRAC
    PracOptions lin;
    lin.mode = PracMode::PRAC;
    lin.nonlinear = false;
    EXPECT_EQ(plan_memory(cfg, lin, B, T, PlanTarget::CUDA_BF16, nullptr, 2).total, p2.total) << model_name;
    // --recompute-attention: O, (L, N, C) saved exact, becomes one (N, C) transient buffer, with PRAC or without
    for (const PracOptions& prac : {none, lin}) {
        MemoryPlan stored = plan_memory(cfg, prac, B, T, PlanTarget::CUDA_BF16);
        MemoryPlan rec = plan_memory(cfg, prac, B, T, PlanTarget::CUDA_BF16, nullptr, Recompute(0, true));
        EXPECT_EQ(stored.total - rec.total, (L - 1) * N * C * bf16) << model_name;
        EXPECT_EQ(stored.bytes("saved_exact") - rec.bytes("saved_exact"), L * N * C * bf16) << model_name;
        EXPECT_EQ(rec.bytes("transient") - stored.bytes("transient"), N * C * bf16) << model_name;
    }
}

}  // namespace

TEST(Planner, RecomputePlannedBytesEqualCpuAllocationsGpt2) {
    check_recompute_plan_equals_allocation<GPT2>(Arch::GPT2, "gpt2-tiny");
}
TEST(Planner, RecomputePlannedBytesEqualCpuAllocationsLlama) {
    check_recompute_plan_equals_allocation<Llama>(Arch::LLAMA, "llama-tiny");
}
TEST(Planner, RecomputeSavingsByHand) {
    check_recompute_savings<GPT2>(Arch::GPT2, "gpt2-124m", 64, 1024);
    check_recompute_savings<Llama>(Arch::LLAMA, "llama-130m", 16, 256);
}

// GPT-2 124M, B=64, T=1024 with PRAC (paper ranks) and recompute 1: fch_gelu leaves PRAC (no packed tensor,
// no bases; its recompute slot is a buffer of its own); the dW scratch shrinks to the largest remaining linear site.
TEST(Planner, Gpt2_124mPracRecompute1ByHand) {
    ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-124m");
    const size_t L = 12, N = 64 * 1024, C = 768, F = 3072, bf16 = 2, f32 = 4;
    const size_t rl_C = 448, rl_F = 1840;
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    MemoryPlan q0 = plan_memory(cfg, prac, 64, 1024, PlanTarget::CUDA_BF16);
    MemoryPlan q1 = plan_memory(cfg, prac, 64, 1024, PlanTarget::CUDA_BF16, nullptr, 1);
    EXPECT_EQ(q1.bytes("saved_linear"), L * N * (rl_C + rl_C) * bf16);
    EXPECT_EQ(q1.bytes("saved_nonlinear"), q0.bytes("saved_nonlinear"));
    EXPECT_EQ(q0.bytes("prac_bases") - q1.bytes("prac_bases"), L * F * rl_F * bf16);
    // the recompute slot (N, F) is a buffer of its own, where PRAC's GeLU-output transient lived in scratch_wide
    size_t tmp0 = std::max({3 * C * rl_C, F * rl_C, C * rl_F}) * f32, tmp1 = std::max(3 * C * rl_C, F * rl_C) * f32;
    EXPECT_EQ(q1.bytes("transient") - q0.bytes("transient"), N * F * bf16 - (tmp0 - tmp1));
    // (the refresh workspace shrinks too: its largest site is now fch, a smaller rank at the same width)
    EXPECT_EQ(q0.total - q0.bytes("library_workspaces") - (q1.total - q1.bytes("library_workspaces")),
              L * N * rl_F * bf16 + L * F * rl_F * bf16 + tmp0 - tmp1 - N * F * bf16);
}

// RSO's linear sites hold the optimizer's P, which the plan names as such (it was listed as "PRAC bases" with PRAC
// off); PRAC's bases keep their name, and the JSON key stays prac_bases for both.
TEST(Planner, RsoProjectionsAreNotCalledPracBases) {
    const ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-tiny");
    auto bases_row = [&](const PracOptions& prac) {
        for (const MemoryPlan::Row& r : plan_memory(cfg, prac, 1, 8, PlanTarget::CPU_FP32).categories)
            if (r.key == "prac_bases") return r;
        return MemoryPlan::Row{};
    };
    PracOptions rso;
    rso.rso_rank = 8;
    const MemoryPlan::Row r = bases_row(rso);
    EXPECT_EQ(r.label, "RSO's P at the linear sites");
    EXPECT_GT(r.bytes, 0u);
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    EXPECT_EQ(bases_row(prac).label, "PRAC bases");
}

// Every optimizer: the planner's optimizer row is what make_optimizer allocates on the CPU backend (state and
// the workspace held beside it), for both models.
TEST(Planner, OptimizerBytesEqualCpuAllocations) {
    for (auto [arch, name] : {std::pair{Arch::GPT2, "gpt2-tiny"}, std::pair{Arch::LLAMA, "llama-tiny"}})
        for (const char* kind : {"adamw", "muon", "adam-mini", "galore", "rso"}) {
            ModelConfig cfg = model_config_load(arch, name);
            OptimizerChoice c;
            c.kind = kind;
            c.galore_rank = c.rso_rank = 8;
            CpuBackend be;
            std::unique_ptr<Optimizer<CpuBackend>> opt;
            size_t planned = 0, allocated = 0;
            auto count = [&](auto& model) {
                size_t before = be.live_bytes;
                opt = make_optimizer(be, c, cfg, model.param_specs, model.param_buffer_numel, 0,
                                     model.param_buffer_numel);
                allocated = be.live_bytes - before;
                opt.reset();
                planned = plan_memory(cfg, PracOptions(), 1, 8, PlanTarget::CPU_FP32, &c).bytes("optimizer_state");
            };
            if (arch == Arch::GPT2) {
                GPT2<CpuBackend> model(be, cfg, PracOptions());
                count(model);
            } else {
                Llama<CpuBackend> model(be, cfg, PracOptions());
                count(model);
            }
            EXPECT_EQ(planned, allocated) << name << " " << kind;
        }
}

// 8-bit AdamW states (--optimizer-states 8bit): the planner's row is what make_optimizer allocates on the CPU
// backend, and by hand: one byte per element and moment, one fp32 scale per block of ADAMW8_BLOCK elements of each
// tensor and moment, and the two code tables, except for tensors under 4096 elements (fp32 moments); on the bf16 target at LLaMA-1B the row shrinks from 8 to ~2 bytes
// per parameter and nothing else changes.
TEST(Planner, EightBitAdamStatesAreCountedAsAllocated) {
    OptimizerChoice q8;
    q8.adam_states = AdamStates::Q8;
    for (auto [arch, name] : {std::pair{Arch::GPT2, "gpt2-tiny"}, std::pair{Arch::LLAMA, "llama-tiny"}}) {
        ModelConfig cfg = model_config_load(arch, name);
        CpuBackend be;
        size_t planned = plan_memory(cfg, PracOptions(), 1, 8, PlanTarget::CPU_FP32, &q8).bytes("optimizer_state");
        // bitsandbytes' rule on the model's Hugging Face tensors (what it would see in transformers' model): one of
        // fewer than 4096 elements keeps 8 bytes of fp32 moments per element, the others 2 bytes of codes, in blocks
        // of 2048 per tensor of ours (each of ours holds tensors of one kind at these widths: the kind of the one at
        // its start; the embedding's padded rows with it), 8 bytes per block
        auto count = [&](auto& model) {
            size_t n = model.param_buffer_numel, n32 = 0, n8 = 0, blocks = 0;
            for (const HFTensor& t : model.hf_map()) {
                const size_t e = (size_t)t.rows * t.cols;
                if (e < 4096) n32 += e;
                for (const ParamSpec& s : model.param_specs)
                    if (s.offset == t.offset && e >= 4096)
                        n8 += s.numel, blocks += (s.numel + ADAMW8_BLOCK - 1) / ADAMW8_BLOCK;
            }
            EXPECT_GT(n32, 0u);
            size_t before = be.live_bytes;
            auto opt = make_optimizer(be, q8, cfg, model.param_specs, n, 0, n);
            EXPECT_EQ(be.live_bytes - before, planned) << name;
            EXPECT_EQ(planned, 2 * n8 + 8 * n32 + 2 * 4 * blocks + sizeof(AdamW8Codes)) << name;
        };
        if (arch == Arch::GPT2) {
            GPT2<CpuBackend> model(be, cfg, PracOptions());
            count(model);
        } else {
            Llama<CpuBackend> model(be, cfg, PracOptions());
            count(model);
        }
    }
    ModelConfig big = model_config_load(Arch::LLAMA, "llama-1b");
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    MemoryPlan f32 = plan_memory(big, prac, 128, 256, PlanTarget::CUDA_BF16);
    MemoryPlan b8 = plan_memory(big, prac, 128, 256, PlanTarget::CUDA_BF16, &q8);
    size_t n = f32.bytes("master_weights") / 4;
    EXPECT_EQ(f32.bytes("optimizer_state"), 8 * n);
    EXPECT_LT(b8.bytes("optimizer_state"), 2 * n + n / 200);  // scales: 8 bytes per 2048 elements, and padding
    EXPECT_GT(b8.bytes("optimizer_state"), 2 * n);
    EXPECT_EQ(f32.total - b8.total, f32.bytes("optimizer_state") - b8.bytes("optimizer_state"));
}

// ZeRO-1 over R ranks (--plan --zero 1 --plan-ranks R): rank 0 holds the largest shard of AdamW's state, which is
// what make_optimizer allocates for rank 0 of R on the CPU (Comm::shard_begin's shard); on the
// bf16 target the master weights shrink the same way and nothing else changes.
TEST(Planner, ZeroShardsOptimizerStateOverRanks) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
    CpuBackend be;
    Llama<CpuBackend> model(be, cfg, PracOptions());
    size_t n = model.param_buffer_numel;
    for (int R : {2, 3, 4, 7}) {
        size_t rank0_end = zero_shard_begin(n, 1, R);  // Comm::shard_end(n, 0) of R ranks
        EXPECT_EQ(rank0_end, (n + R - 1) / R);
        size_t before = be.live_bytes;
        auto opt = make_optimizer(be, OptimizerChoice(), cfg, model.param_specs, n, 0, rank0_end);
        size_t allocated = be.live_bytes - before;
        opt.reset();
        OptimizerChoice c;
        c.zero_ranks = R;
        MemoryPlan cpu = plan_memory(cfg, PracOptions(), 1, 8, PlanTarget::CPU_FP32, &c);
        EXPECT_EQ(cpu.bytes("optimizer_state"), allocated) << R << " ranks";
        EXPECT_EQ(cpu.zero_ranks, R);
    }
    // LLaMA-1B at 128 x 256 over 4 ranks (the paper's setting): moments and master weights of ceil(n / 4) elements
    ModelConfig big = model_config_load(Arch::LLAMA, "llama-1b");
    OptimizerChoice z4;
    z4.zero_ranks = 4;
    MemoryPlan one = plan_memory(big, PracOptions(), 128, 256, PlanTarget::CUDA_BF16);
    MemoryPlan four = plan_memory(big, PracOptions(), 128, 256, PlanTarget::CUDA_BF16, &z4);
    size_t numel = one.bytes("master_weights") / 4, shard = (numel + 3) / 4;
    EXPECT_EQ(four.bytes("master_weights"), shard * 4);
    EXPECT_EQ(four.bytes("optimizer_state"), 2 * shard * 4);
    EXPECT_EQ(one.total - four.total, (numel - shard) * 12);
}

// cuDNN's attention workspace in the bf16 plan: cuDNN's own figures (get_workspace_size of the backward graph,
// deterministic, as test_attention_cuda builds it) measured on a GPU are an upper bound's reference. Measured with
// cuDNN 9.19.0 + cudnn-frontend 1.32.0 on an H100, 2026-11-27 (docs/VERIFICATION.md, first GPU run): the
// estimate of that day was 256 bytes short at every shape. The estimate must cover them, within the planner's
// 1 MiB rounding.
TEST(Planner, CudnnAttentionWorkspaceCoversCudnnsMeasuredFigures) {
    struct Measured {
        int B, T, NH, HS;
        size_t bwd_bytes;
    } measured[] = {{64, 1024, 12, 64, 1613758720},  // gpt2-124m 64x1024
                    {128, 256, 12, 64, 202899712},   // llama-130m 128x256
                    {128, 256, 16, 64, 270532864},   // llama-350m 128x256
                    {128, 256, 32, 64, 541065472}};  // llama-1b 128x256
    for (const Measured& m : measured) {
        const size_t est = cudnn_sdpa_workspace_estimate(m.B, m.T, m.NH, m.HS);
        EXPECT_GE(est, m.bwd_bytes) << "B=" << m.B << " T=" << m.T << " NH=" << m.NH;
        EXPECT_LT(est, m.bwd_bytes + (1u << 20)) << "B=" << m.B << " T=" << m.T << " NH=" << m.NH;
    }
}
