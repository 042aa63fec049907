// CUDA ops of the non-AdamW optimizers (Muon, Adam-mini, GaLore): members of CudaBackend defined in
// kernels/optim_cuda.cu, called by train/optim_muon.h, optim_adam_mini.h and optim_galore.h with their CPU twins'
// argument lists:
//   CudaBackend::muon_momentum     <->  muon_momentum_cpu        (kernels/muon.h)
//   CudaBackend::newton_schulz     <->  newton_schulz_cpu        (kernels/muon.h)
//   CudaBackend::muon_apply        <->  muon_apply_cpu           (kernels/muon.h), + master weights
//   CudaBackend::adam_mini_update  <->  adam_mini_update_cpu     (kernels/adam_mini.h), + master weights
//   CudaBackend::galore_refresh    <->  galore_projection_cpu    (kernels/galore.h)
//   CudaBackend::galore_project    <->  galore_project_cpu       (kernels/galore.h)
//   CudaBackend::galore_adam       <->  galore_adam_cpu          (kernels/galore.h)
//   CudaBackend::galore_apply      <->  galore_apply_cpu         (kernels/galore.h), + master weights
// Optimizer state, momentum, projections and Newton-Schulz temporaries are fp32 device buffers; gradients and
// parameters are floatX (bf16, or fp32 in the PRAC_PRECISION=FP32 build). Elementwise updates repeat the CPU
// twin's fp32 operations in its order with explicit _rn intrinsics (no FMA contraction), as adamw.cuh does.
//
// Stochastic rounding of bf16 parameters (master != null), the seeds below, reproducible on the host:
//   adam_mini_update gets the step t: its seed is adamw_update's, run_seed ^ G t ^ K salt (optim_step_seed), and
//     element i of the call draws ew_hash32(seed, i), exactly as adamw_update_cuda.
//   muon_apply and galore_apply get no step count (their argument lists carry none), so a seed made of the run
//     seed, the salt and the call's float arguments alone could repeat from step to step (a constant learning
//     rate), and the same elements would round up every step. Their random bits therefore also hash the fp32
//     value being rounded (optim_round): a new master value draws new bits, the bits stay a pure function of
//     (run seed, salt, call arguments, value, index), and a resumed run re-rounds exactly as the uninterrupted
//     one. Unbiasedness is unchanged: for a given value, the decision is a fresh 16-bit uniform draw.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/elementwise_common.cuh"

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

// x rounded to T for element idx of a call with seed call_seed, the value's bits hashed in (see the top)
template <typename T>
__host__ __device__ inline T optim_round(float x, uint64_t call_seed, uint64_t idx) {
    return stochastic_round<T>(x, call_seed ^ ((uint64_t)ew_float_bits(x) * 0xD6E8FEB86659FD93ull), idx);
}
