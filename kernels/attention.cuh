// Multi-head attention on the GPU, CUDA twins of kernels/attention.h (flash-attention contract: the forward saves
// only O and the per-row log-sum-exp; the backward recomputes the probabilities from q, k and LSE; no (T, T)
// matrix ever lives in global memory).
//
// Twins:
//   attention_forward_cuda   <-> attention_forward_cpu    out (B, T, C), lse (B, NH, T) fp32 from qkv (B, T, 3C)
//   attention_backward_cuda  <-> attention_backward_cpu   dqkv (B, T, 3C), overwritten
// qkv rows are [q | k | v], each C = NH heads of HS = C / NH contiguous values; the kernels read q, k and v
// through those interleaved strides directly (no permute). Scores are scaled by 1/sqrt(HS); `causal` masks
// key j > query t. lse is the log-sum-exp of the scaled (masked) scores, natural log, as on the CPU.
//
// Supported: HS in {32, 48, 64, 80, 96, 112, 128} (compile-time dispatch), any T >= 1 (tiles are masked at
// the tail), any B and NH. floatX (common/cuda_common.cuh) is the storage type; all math is fp32.
//
// Three implementations of the same contract (AttentionImpl):
//   Simt  fp32 FMA kernels (64x64 tiles in shared memory as fp32, 256 threads, 4x4 register micro-tiles).
//         The only path of the fp32 build (PRAC_FP32), where it must agree with the CPU twin to ~1e-5.
//   Mma   bf16 tensor cores (mma.sync m16n8k16, fp32 accumulate; FlashAttention-2 style), bf16 build only.
//         P and dS are rounded to bf16 before they meet V, dO, Q, K in an mma, as in FA2.
//   Cudnn cuDNN's fused SDPA via cudnn-frontend (kernels/attention_cudnn.cuh): bf16 build compiled with
//         cudnn-frontend only, head sizes multiple of 8 up to 128, an AttentionCudnn context (CudaBackend owns one).
//   Auto  Cudnn when it is compiled in, a context is given, HS suits cuDNN, every tensor is 16-byte aligned and
//         cuDNN builds a graph for the shape (if it declines, a one-line notice once per shape); otherwise Mma in
//         the bf16 build when the pointers are 16-byte aligned, else Simt.
// Simt and Mma are deterministic: the backward has no atomics (dK/dV parallel over key tiles, dQ parallel over query
// tiles, each recomputing P), so two runs give the same bits. Cudnn asks for cuDNN's deterministic backward
// (PRAC_CUDNN_DETERMINISTIC=0 turns that off). All three write the same lse (natural-log log-sum-exp of the scaled
// scores), so a forward by one and a backward by another are valid together.
// Forcing: the implementation argument, or for CudaBackend the environment variable PRAC_ATTENTION=auto|cudnn|mma|simt
// (attention_impl_from_env); forcing one that cannot run is a UserError, never a silent fallback.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "common/cuda_common.cuh"

enum class AttentionImpl { Auto, Simt, Mma, Cudnn };

struct AttentionCudnn;  // cuDNN handle + graph cache (kernels/attention_cudnn.cuh)

// True when the CUDA attention has a kernel for head size HS: 16 to 128 in steps of 16. The models check it when
// they are built on the CUDA backend (CudaBackend::check_attention_shape), before anything is allocated.
bool attention_cuda_supports_head_size(int HS);
// True when `impl` can run in this build (Mma needs the bf16 build; Cudnn the bf16 build with cudnn-frontend).
bool attention_cuda_impl_available(AttentionImpl impl);
const char* attention_impl_name(AttentionImpl impl);  // "auto", "simt", "mma", "cudnn"
// PRAC_ATTENTION from the environment (unset or empty: Auto). An unknown value, or one this build cannot run, is a
// UserError naming the choices.
AttentionImpl attention_impl_from_env();

// out (B, T, C) floatX, lse (B, NH, T) fp32 = attention of qkv (B, T, 3C).            twin of attention_forward_cpu
// cudnn: the context Cudnn / Auto use (null: Auto never picks Cudnn, forcing Cudnn is a UserError).
void attention_forward_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, bool causal,
                            cudaStream_t stream, AttentionImpl impl = AttentionImpl::Auto,
                            AttentionCudnn* cudnn = nullptr);

// fp32 scratch the backward needs: D = rowsum(dO * O), (B, NH, T). No dQ accumulator: dQ is computed in
// registers by its own query-parallel kernel.
size_t attention_backward_scratch_floats(int B, int T, int C, int NH);

// dqkv (B, T, 3C) = d loss / d qkv given dout (B, T, C), the forward's qkv, out and lse. Overwrites every
// element of dqkv (dqkv must not alias the inputs). scratch: attention_backward_scratch_floats() floats (the
// hand-written kernels' D; unused when cuDNN runs, which takes its workspace from the context's provider).
//                                                                                     twin of attention_backward_cpu
void attention_backward_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                             const float* lse, int B, int T, int C, int NH, bool causal, float* scratch,
                             cudaStream_t stream, AttentionImpl impl = AttentionImpl::Auto,
                             AttentionCudnn* cudnn = nullptr);

// ---- naive reference (test oracle only: materialises the (B, NH, T, T) scores in global memory) ----
// Simple one-thread-per-element kernels, fp32 math, same contract as above. Slow and memory-hungry: small T.
// forward scratch: B*NH*T*T floats (scores / probabilities)
// backward scratch: 2*B*NH*T*T + B*NH*T floats (P, dS, D)
size_t attention_forward_naive_scratch_floats(int B, int T, int NH);
size_t attention_backward_naive_scratch_floats(int B, int T, int NH);
void attention_forward_naive_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH,
                                  bool causal, float* scratch, cudaStream_t stream);
void attention_backward_naive_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                                   const float* lse, int B, int T, int C, int NH, bool causal, float* scratch,
                                   cudaStream_t stream);
