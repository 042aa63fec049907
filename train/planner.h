// Memory planner: exact bytes per category for any model, batch, sequence length, precision and PRAC setting,
// computed on any machine. It builds the real model classes over a backend that allocates nothing and only
// records the layouts, so the plan is the trainer's own tensor lists (planned == allocated by construction;
// test_planner checks it against the CPU backend's actual allocations).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/sites.h"  // Recompute
#include "prac/prac.h"

// Which backend's memory to plan.
enum class PlanTarget { CPU_FP32, CUDA_BF16, CUDA_FP32 };
const char* plan_target_name(PlanTarget t);

struct MemoryPlan {
    std::string model;
    int B = 0, T = 0;
    PlanTarget target = PlanTarget::CUDA_BF16;
    PracMode prac = PracMode::NONE;
    PracStorage prac_storage = PracStorage::ACT;  // FP8: the saved categories hold e4m3 codes + row scales
    int rso_rank = 0;  // > 0: the linear sites store RSO's projections (PracOptions::rso_rank)
    int zero_ranks = 1;  // > 1: the plan of one of that many ZeRO-1 ranks (OptimizerChoice::zero_ranks)
    std::string optimizer = "adamw";  // OptimizerChoice::kind
    bool optimizer_8bit = false;      // AdamW's moments 8-bit block-wise (--optimizer-states 8bit)
    int galore_rank = 0;              // --optimizer galore: the rank the run uses (its default resolved); else 0
    Recompute recompute;              // --recompute, --recompute-attention
    size_t num_parameters = 0;
    size_t vocab_padding_parameters = 0;  // of num_parameters: the padded vocabulary rows (Hugging Face counts none)
    int compressed_sites = 0;  // the activation sites PRAC (or RSO) compresses
    struct Row {
        std::string key;    // stable snake_case name (JSON)
        std::string label;  // for the table
        size_t bytes;
    };
    std::vector<Row> categories;  // in report order
    size_t total = 0;
    size_t bytes(const std::string& key) const;  // 0 when absent
};

struct OptimizerChoice;  // train/optimizers.h; the default (nullptr) is AdamW
MemoryPlan plan_memory(const ModelConfig& cfg, const PracOptions& prac, int B, int T, PlanTarget target,
                       const OptimizerChoice* optimizer = nullptr, Recompute recompute = Recompute());

// Largest micro-batch B whose plan fits in gpu_bytes (after `reserve` bytes for the CUDA context and allocator
// slack); 0 if not even B = 1 fits; PLAN_MAX_BATCH_LIMIT when that fits: the search stops there, so "at least".
constexpr int PLAN_MAX_BATCH_LIMIT = 1 << 20;
int plan_max_batch(const ModelConfig& cfg, const PracOptions& prac, int T, PlanTarget target, size_t gpu_bytes,
                   size_t reserve, const OptimizerChoice* optimizer = nullptr, Recompute recompute = Recompute());

// The CUDA PRAC refresh's device workspace for one site of width n, as the plan counts it: the refresh's own layout
// (prac/refresh_layout.h) plus an estimate of cuSOLVER's buffer (test_prac_cuda prints it beside what cuSOLVER
// asks for, prac_refresh_workspace_bytes).
size_t plan_cuda_refresh_workspace(int n, const SiteDims& d);

std::string plan_table(const MemoryPlan& p);
std::string plan_json(const MemoryPlan& p);

