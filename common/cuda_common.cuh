// Types shared by the CUDA kernels. floatX is the storage type of activations, parameters and gradients in the
// CUDA backend: bf16 by default, fp32 in the PRAC_PRECISION=FP32 build (llm.c's PRECISION=FP32), which exists
// so that whole steps can be compared tightly with the CPU backend. Accumulation is always fp32.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common/cuda_check.h"

#if defined(PRAC_FP32)
typedef float floatX;
#define PRAC_FLOATX_NAME "fp32"
#else
typedef __nv_bfloat16 floatX;
#define PRAC_FLOATX_NAME "bf16"
#endif

__host__ __device__ inline float to_float(float x) { return x; }
__host__ __device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T>
__host__ __device__ inline T from_float(float x);
template <>
__host__ __device__ inline float from_float<float>(float x) { return x; }
template <>
__host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

inline int ceil_div(long long a, long long b) { return (int)((a + b - 1) / b); }
