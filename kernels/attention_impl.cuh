// Internal header of the CUDA attention (callers include kernels/attention.cuh, not this): what the dispatch
// (kernels/attention_cuda.cu) and the two hand-written kernel families share, and the families' launchers:
//   kernels/attention_simt.cu  Simt: fp32 FMA flash attention, and the D = rowsum(dO * O) pre-pass both backwards use
//   kernels/attention_mma.cu   Mma: bf16 tensor-core flash attention, FlashAttention-2 style (bf16 build only)
// Each launcher takes the head size at run time and switches to the kernels' compile-time HS (dispatch_head_size);
// the caller has checked the shape (check_shape in attention_cuda.cu) and picked the family.
// CPU twins: kernels/attention.h (attention_forward_cpu, attention_backward_cpu). Notation and determinism: see the
// head of kernels/attention_cuda.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "common/cuda_common.cuh"
#include "common/error.h"

// A named namespace: the dispatch and the kernel families are separate translation units that share it.
namespace attention_detail {

using bf16 = __nv_bfloat16;

// Both implementations use square tiles of 64 rows: 64 queries per query tile, 64 keys per key tile. Tiles of
// the same size keep the causal bookkeeping simple: a query tile's diagonal key tile starts at the same row.
constexpr int kTile = 64;

// The key-padding mask: keys [attention_kv_end, T) of batch row b are hidden from every query (kv_len (B), device,
// null = none; values outside 1..T are clipped as the CPU twin's attention_key_end does). Key tiles that start at
// or past it are skipped whole: a padded batch costs what its real keys cost.
__device__ inline int attention_kv_end(const int* kv_len, int b, int T) {
    return kv_len ? max(0, min(kv_len[b], T)) : T;
}

// Calls f(std::integral_constant<int, HS>) for the supported head sizes; the kernels unroll over HS.
template <typename F>
void dispatch_head_size(int HS, F&& f) {
    switch (HS) {
        case 16: f(std::integral_constant<int, 16>{}); break;
        case 32: f(std::integral_constant<int, 32>{}); break;
        case 48: f(std::integral_constant<int, 48>{}); break;
        case 64: f(std::integral_constant<int, 64>{}); break;
        case 80: f(std::integral_constant<int, 80>{}); break;
        case 96: f(std::integral_constant<int, 96>{}); break;
        case 112: f(std::integral_constant<int, 112>{}); break;
        case 128: f(std::integral_constant<int, 128>{}); break;
        default: fail("CUDA attention: head size %d is not supported", HS);  // check_shape said why
    }
}

// Kernels with more than 48 KiB of dynamic shared memory must opt in (done on every launch, as llm.c does; the
// call is cheap and not a stream operation, so it is legal during graph capture).
template <typename K>
void set_smem(K kernel, size_t bytes) {
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// ---- Simt (kernels/attention_simt.cu): both builds, floatX = float or bf16 ----
// D (B, NH, T) = rowsum(dO * O), fp32: attention_backward_rowdot_kernel, the first step of either backward.
void launch_backward_rowdot(float* D, const floatX* dout, const floatX* out, int B, int T, int NH, int HS,
                            cudaStream_t stream);
// out (B, T, C), lse (B, NH, T) <- qkv (B, T, 3C): attention_forward_simt_kernel.
void launch_forward_simt(floatX* out, float* lse, const floatX* qkv, int B, int T, int NH, int HS, bool causal,
                         const int* kv_len, float scale, cudaStream_t stream);
// dqkv <- dout, qkv, lse, D: attention_backward_dkdv_simt_kernel (dK, dV), then attention_backward_dq_simt_kernel (dQ).
void launch_backward_simt(floatX* dqkv, const floatX* dout, const floatX* qkv, const float* lse, const float* D, int B,
                          int T, int NH, int HS, bool causal, const int* kv_len, float scale, cudaStream_t stream);

// ---- Mma (kernels/attention_mma.cu): defined in the bf16 build only, where the dispatch calls them when every
// tensor is 16-byte aligned; scale is 1/sqrt(HS), the launchers fold log2(e) into it for the kernels ----
// out, lse <- qkv: attention_forward_mma_kernel.
void launch_forward_mma(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, int HS, bool causal,
                        const int* kv_len, float scale, cudaStream_t stream);
// dqkv <- dout, qkv, lse, D: attention_backward_dkdv_mma_kernel (dK, dV), then attention_backward_dq_mma_kernel (dQ).
void launch_backward_mma(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, const float* D, int B,
                         int T, int NH, int HS, bool causal, const int* kv_len, float scale, cudaStream_t stream);

}  // namespace attention_detail
