// Multi-head attention on the GPU, CUDA twins of kernels/attention.h, flash-attention contract (the forward saves
// only O and the per-row log-sum-exp; the backward recomputes the probabilities; no (T, T) matrix in global memory):
//   attention_forward_cuda   <-> attention_forward_cpu    out (B, T, C), lse (B, NH, T) fp32 from qkv (B, T, 3C)
//   attention_backward_cuda  <-> attention_backward_cpu   dqkv (B, T, 3C), overwritten
// qkv rows are [q | k | v] (NH heads of HS = C / NH), read through those strides (no permute); scores scaled by
// 1/sqrt(HS), `causal` masks key j > query t, kv_len (B, device int32, null = no padding) masks keys
// j >= kv_len[b] from every query of row b (right padding; the twins' semantics, kernels/attention.h), lse in
// natural log as on the CPU. floatX storage, fp32 math.
// Three implementations behind AttentionImpl (Simt, Mma, Cudnn; Auto picks one; PRAC_ATTENTION forces one): what
// each supports, how Auto chooses, determinism: docs/DESIGN.md section 6.2. Files: kernels/attention_cuda.cu (the
// dispatch), attention_simt.cu, attention_mma.cu, attention_cudnn.cu; test oracle test/attention_naive_cuda.cuh.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "common/cuda_common.cuh"  // floatX
#include "kernels/cuda_sizes.h"    // attention_backward_scratch_floats

enum class AttentionImpl { Auto, Simt, Mma, Cudnn };

struct AttentionCudnn;  // cuDNN handle + graph cache (kernels/attention_cudnn.cuh)

// True when the CUDA attention has a kernel for head size HS: 16 to 128 in steps of 16. The models check it when
// they are built on the CUDA backend (CudaBackend::check_attention_shape), before anything is allocated.
bool attention_cuda_supports_head_size(int HS);
// The shapes the CUDA attention takes (B, T >= 0; C a positive multiple of NH; a supported head size), else a
// UserError naming `what` and the sizes that work.
void attention_cuda_check_shape(const char* what, int B, int T, int C, int NH);
// True when `impl` can run in this build (Mma needs the bf16 build; Cudnn the bf16 build with cudnn-frontend).
bool attention_cuda_impl_available(AttentionImpl impl);
const char* attention_impl_name(AttentionImpl impl);  // "auto", "simt", "mma", "cudnn"
// The calls (forward and backward) each path has taken in this process: which kernels a run's attention used, which
// Auto decides per call (cuDNN may decline a shape; MMA needs 16-byte aligned tensors) and nothing else shows.
struct AttentionCalls {
    long long cudnn = 0, mma = 0, simt = 0;
};
AttentionCalls attention_cuda_calls();
// PRAC_ATTENTION from the environment (unset or empty: Auto). An unknown value, or one this build cannot run, is a
// UserError naming the choices.
AttentionImpl attention_impl_from_env();

// out (B, T, C) floatX, lse (B, NH, T) fp32 = attention of qkv (B, T, 3C).            twin of attention_forward_cpu
// cudnn: the context Cudnn / Auto use (null: Auto never picks Cudnn, forcing Cudnn is a UserError).
void attention_forward_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, bool causal,
                            const int* kv_len, cudaStream_t stream, AttentionImpl impl = AttentionImpl::Auto,
                            AttentionCudnn* cudnn = nullptr);

// dqkv (B, T, 3C) = d loss / d qkv given dout (B, T, C), the forward's qkv, out and lse. Overwrites every
// element of dqkv (dqkv must not alias the inputs). scratch: attention_backward_scratch_floats(B, T, NH) floats
// (kernels/cuda_sizes.h: the hand-written kernels' D; unused when cuDNN runs, which takes its workspace from the
// context's provider).
//                                                                                     twin of attention_backward_cpu
void attention_backward_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                             const float* lse, int B, int T, int C, int NH, bool causal, const int* kv_len,
                             float* scratch, cudaStream_t stream, AttentionImpl impl = AttentionImpl::Auto,
                             AttentionCudnn* cudnn = nullptr);
