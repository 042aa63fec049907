// Multi-head attention through cuDNN's fused SDPA (flash attention), built with cudnn-frontend's graph API: the
// context's life cycle and what the tests look at. Same contract as kernels/attention.cuh (twins in
// kernels/attention.h): qkv (B, T, 3C) with rows [q | k | v], out (B, T, C), lse (B, NH, T) fp32, dqkv (B, T, 3C)
// overwritten; Q, K, V and dQ, dK, dV are read and written by strides in place (no permutes, no copies). Callers
// normally reach it through attention_forward_cuda / attention_backward_cuda with AttentionImpl::Cudnn or Auto and
// an AttentionCudnn context. Only the bf16 build with cudnn-frontend has it (PRAC_ATTENTION_CUDNN below; CMake
// compiles kernels/attention_cudnn.cu only then). cuDNN's Stats output is exactly our lse (max + ln sum exp of the
// scaled, masked scores), so any forward/backward pairing of implementations is valid: docs/DESIGN.md section 6.3.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "common/cuda_common.cuh"  // floatX
#include "kernels/cuda_sizes.h"    // cudnn_attention_takes_head_size

#if defined(PRAC_HAVE_CUDNN_FRONTEND) && !defined(PRAC_FP32)
#define PRAC_ATTENTION_CUDNN 1
#else
#define PRAC_ATTENTION_CUDNN 0
#endif

// cuDNN handle (bound to one stream) + the graphs built so far, one per (B, T, NH, HS, dtype, fwd/bwd, causal,
// padded, deterministic). One per CudaBackend. Opaque.
struct AttentionCudnn;

// Device workspace provider: returns a pointer to at least `bytes` bytes valid in stream order until the next call
// (CudaBackend passes its grow-only scratch_at_least).
using AttentionWorkspaceFn = void* (*)(void* self, size_t bytes);

struct AttentionCudnnStats {
    int graphs_built = 0;   // graphs built and supported (one per key)
    int graphs_declined = 0;  // keys whose build / check_support failed (the hand-written kernels run instead)
    int cache_hits = 0;     // lookups answered from the cache (built or declined)
    int executes = 0;       // graphs executed
    size_t last_workspace_bytes = 0;  // workspace of the last graph looked up
};

// True in the bf16 build compiled with cudnn-frontend.
bool attention_cudnn_compiled();
// Head sizes cuDNN's SDPA takes on every architecture we build for: multiples of 8 up to 128
// (kernels/cuda_sizes.h cudnn_attention_takes_head_size, which the planner asks too).
bool attention_cudnn_supports_head_size(int HS);

// A context on `stream` (no cuDNN call yet: the handle is made on first use; if cudnnCreate fails there, every
// shape is declined with one notice). Null when !attention_cudnn_compiled(). Deterministic backward unless the
// environment says PRAC_CUDNN_DETERMINISTIC=0 (faster, less workspace at long T, but not bitwise reproducible).
AttentionCudnn* attention_cudnn_create(cudaStream_t stream, AttentionWorkspaceFn workspace, void* workspace_self);
void attention_cudnn_destroy(AttentionCudnn* ctx);  // null is fine
AttentionCudnnStats attention_cudnn_stats(const AttentionCudnn* ctx);
bool attention_cudnn_deterministic(const AttentionCudnn* ctx);
// "cuDNN 9.19.0 (runtime), cudnn-frontend 1.32.0" or why not available
std::string attention_cudnn_describe();

// Builds (or finds) the graph of this shape without running it: true when cuDNN supports it, with its workspace
// in *workspace_bytes; false with the reason in *why. Neither prints nor throws. padded: the graph with the
// key-padding mask (the one a call with a kv_len runs).
bool attention_cudnn_prepare(AttentionCudnn* ctx, int B, int T, int C, int NH, bool causal, bool padded,
                             bool backward, cudaStream_t stream, size_t* workspace_bytes, std::string* why);

// Run cuDNN's forward / backward on 16-byte aligned tensors (the dispatcher checks); kv_len (B) device int32 or
// null, as attention_forward_cuda's (cuDNN's padding mask with seq_len_kv = kv_len and seq_len_q = T, so padded
// query rows attend to the real keys as in the twin). When cuDNN declines the shape:
// with allow_fallback, print a one-line notice (once per shape) and return false, so the caller runs the
// hand-written kernel; without, throw a UserError with cuDNN's reason. A failed execute is a hard error (message
// with cuDNN's reason on stderr, exit), like every other library error in this code base.
bool attention_cudnn_forward(AttentionCudnn* ctx, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                             int NH, bool causal, const int* kv_len, cudaStream_t stream, bool allow_fallback);
bool attention_cudnn_backward(AttentionCudnn* ctx, floatX* dqkv, const floatX* dout, const floatX* qkv,
                              const floatX* out, const float* lse, int B, int T, int C, int NH, bool causal,
                              const int* kv_len, cudaStream_t stream, bool allow_fallback);

// The planner's estimate of the backward's workspace, cudnn_sdpa_workspace_estimate, is in kernels/cuda_sizes.h
// (test_attention_cuda prints it beside the measured get_workspace_size of the planner's reference shapes).
