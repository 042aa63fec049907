// CUDA ops of the optimizers besides fp32-state AdamW (Muon, Adam-mini, 8-bit AdamW, GaLore, RSO): members of
// CudaBackend defined in kernels/optim_cuda.cu, called by train/optim_*.h with their CPU twins' argument lists
// (kernels/muon.h, adam_mini.h, adamw8.h, galore.h, rso.h; the table of twins: docs/DESIGN.md
// section 3.4). State and temporaries are fp32 device buffers, gradients and parameters floatX; elementwise updates
// repeat the CPU twin's fp32 operations in its order with explicit _rn intrinsics, as adamw.cuh does.
// This header: the seeds of their stochastic rounding of bf16 parameters (master != null), reproducible on the host.
// adam_mini_update seeds as adamw_update does; muon_apply and galore_apply, which get no step count, also hash the
// value being rounded, so their bits do not repeat from step to step (why: docs/DESIGN.md section 3.3).
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/elementwise_common.cuh"  // stochastic_round, ew_mix64, ew_float_bits

// adamw_update's seed for step t (1-based) and salt (the element offset in the parameter buffer)
inline uint64_t optim_step_seed(uint64_t run_seed, int t, uint64_t salt) {
    return run_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)t) ^ (salt * 0xBF58476D1CE4E5B9ull);
}

// Seed of one muon_apply / galore_apply call: run seed, salt and two of the call's float arguments (muon_apply:
// lr, step; galore_apply: step, decay).
inline uint64_t optim_call_seed(uint64_t run_seed, uint64_t salt, float a, float b) {
    uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    return run_seed ^ (salt * 0xBF58476D1CE4E5B9ull) ^ ew_mix64(((uint64_t)ua << 32) | ub);
}

// x rounded to T for element idx of a call with seed call_seed, x's bits hashed in (docs/DESIGN.md section 3.3)
template <typename T>
__host__ __device__ inline T optim_round(float x, uint64_t call_seed, uint64_t idx) {
    return stochastic_round<T>(x, call_seed ^ ((uint64_t)ew_float_bits(x) * 0xD6E8FEB86659FD93ull), idx);
}
