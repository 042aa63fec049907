// Multi-head attention, CUDA twins of kernels/attention.h (attention_forward_cpu, attention_backward_cpu): the
// dispatch (contract: kernels/attention.cuh). Implementations: kernels/attention_simt.cu (Simt, fp32 FMA flash
// attention), kernels/attention_mma.cu (Mma, bf16 tensor cores), kernels/attention_cudnn.cu (cuDNN's SDPA; builds
// without it get the stubs at the end of this file); launchers declared in kernels/attention_impl.cuh. This file:
// shape checks, the implementation per call (PRAC_ATTENTION, cuDNN preconditions, Mma's alignment), the entry
// points. The naive test oracle is test/attention_naive_cuda.cuh. Notation: Q, K, V, O, dO (T, HS) are strided
// views into qkv (row stride 3C) and out/dout (stride C); S = scale QK^T, P = exp(S - lse), D = rowsum(dO * O),
// dS = P * (dO V^T - D). Determinism: no atomics, one thread per output element with a fixed summation order,
// so results are bitwise reproducible on the same GPU and build (docs/DESIGN.md section 6.2).
#include "kernels/attention.cuh"

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "common/error.h"
#include "kernels/cuda_sizes.h"  // cuda_attention_takes_head_size
#include "kernels/attention_cudnn.cuh"
#include "kernels/attention_impl.cuh"

namespace attention_detail {

AttentionCalls calls;  // (the host thread that launches the step's kernels is the only one that counts)

bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }

// Mma for this call? Auto: in the bf16 build when every tensor is 16-byte aligned (uint4 tile loads).
template <typename X>
bool resolve_mma(AttentionImpl impl, std::initializer_list<const void*> ptrs) {
    if (impl == AttentionImpl::Simt) return false;
    if constexpr (!std::is_same<X, bf16>::value) {
        CHECK_USER(impl != AttentionImpl::Mma, "CUDA attention: the tensor-core path needs the bf16 build");
        return false;
    } else {
        bool ok = true;
        for (const void* p : ptrs) ok = ok && aligned16(p);
        CHECK_USER(ok || impl != AttentionImpl::Mma, "CUDA attention: the tensor-core path needs 16-byte aligned tensors");
        return ok;
    }
}

template <typename X>
void forward_impl(X* out, float* lse, const X* qkv, int B, int T, int C, int NH, bool causal, const int* kv_len,
                  cudaStream_t stream, AttentionImpl impl) {
    attention_cuda_check_shape("attention_forward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt((float)HS);
    const bool mma = resolve_mma<X>(impl, {out, qkv});  // lse: scalar stores, any float alignment
    (mma ? calls.mma : calls.simt)++;
    if constexpr (std::is_same<X, bf16>::value) {
        if (mma) {
            launch_forward_mma(out, lse, qkv, B, T, NH, HS, causal, kv_len, scale, stream);
            return;
        }
    }
    launch_forward_simt(out, lse, qkv, B, T, NH, HS, causal, kv_len, scale, stream);
}

template <typename X>
void backward_impl(X* dqkv, const X* dout, const X* qkv, const X* out, const float* lse, int B, int T, int C,
                   int NH, bool causal, const int* kv_len, float* scratch, cudaStream_t stream, AttentionImpl impl) {
    attention_cuda_check_shape("attention_backward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    const int HS = C / NH;
    const float scale = 1.0f / std::sqrt((float)HS);
    float* D = scratch;  // (B, NH, T)
    launch_backward_rowdot(D, dout, out, B, T, NH, HS, stream);
    const bool mma = resolve_mma<X>(impl, {dqkv, dout, qkv, out});
    (mma ? calls.mma : calls.simt)++;
    if constexpr (std::is_same<X, bf16>::value) {
        if (mma) {
            launch_backward_mma(dqkv, dout, qkv, lse, D, B, T, NH, HS, causal, kv_len, scale, stream);
            return;
        }
    }
    launch_backward_simt(dqkv, dout, qkv, lse, D, B, T, NH, HS, causal, kv_len, scale, stream);
}

}  // namespace attention_detail
using namespace attention_detail;

void attention_cuda_check_shape(const char* what, int B, int T, int C, int NH) {
    CHECK_USER(B >= 0 && T >= 0 && NH > 0 && C > 0 && C % NH == 0,
               "%s: bad shape B=%d T=%d C=%d NH=%d (C must be a positive multiple of NH)", what, B, T, C, NH);
    CHECK_USER(attention_cuda_supports_head_size(C / NH),
               "%s: head size %d (C=%d / NH=%d) is not supported\n---> HINT: the CUDA attention kernels take head "
               "sizes 16, 32, 48, 64, 80, 96, 112 and 128",
               what, C / NH, C, NH);
}

bool attention_cuda_supports_head_size(int HS) { return cuda_attention_takes_head_size(HS); }

AttentionCalls attention_cuda_calls() { return calls; }

bool attention_cuda_impl_available(AttentionImpl impl) {
    if (impl == AttentionImpl::Mma) return std::is_same<floatX, bf16>::value;
    if (impl == AttentionImpl::Cudnn) return attention_cudnn_compiled();
    return true;
}

const char* attention_impl_name(AttentionImpl impl) {
    switch (impl) {
        case AttentionImpl::Auto: return "auto";
        case AttentionImpl::Simt: return "simt";
        case AttentionImpl::Mma: return "mma";
        case AttentionImpl::Cudnn: return "cudnn";
    }
    return "?";
}

AttentionImpl attention_impl_from_env() {
    const char* v = std::getenv("PRAC_ATTENTION");
    if (!v || !*v) return AttentionImpl::Auto;
    for (AttentionImpl impl : {AttentionImpl::Auto, AttentionImpl::Simt, AttentionImpl::Mma, AttentionImpl::Cudnn}) {
        if (std::strcmp(v, attention_impl_name(impl)) != 0) continue;
        CHECK_USER(attention_cuda_impl_available(impl),
                   "PRAC_ATTENTION=%s: this build cannot run it (%s)\n---> HINT: unset PRAC_ATTENTION (auto picks "
                   "what the build has)",
                   v, impl == AttentionImpl::Mma ? "the tensor-core kernels need the bf16 build"
                                                 : "cuDNN attention needs the bf16 build compiled with cudnn-frontend");
        return impl;
    }
    fail("PRAC_ATTENTION=%s: expected auto, cudnn, mma or simt", v);
}

// Cudnn for this call? Forced: every precondition must hold (UserError otherwise). Auto: only when all hold; the
// graph may still be declined for the shape, and then the caller falls back to the hand-written kernels.
static bool want_cudnn(AttentionImpl impl, const AttentionCudnn* cudnn, int HS,
                       std::initializer_list<const void*> ptrs) {
    if (impl != AttentionImpl::Cudnn && impl != AttentionImpl::Auto) return false;
    const bool forced = impl == AttentionImpl::Cudnn;
    bool aligned = true;
    for (const void* p : ptrs) aligned = aligned && aligned16(p);
    if (forced) {
        CHECK_USER(attention_cudnn_compiled(),
                   "CUDA attention: the cuDNN path needs the bf16 build compiled with cudnn-frontend");
        CHECK_USER(cudnn != nullptr, "CUDA attention: the cuDNN path needs an AttentionCudnn context");
        CHECK_USER(attention_cudnn_supports_head_size(HS),
                   "CUDA attention: cuDNN takes head sizes that are multiples of 8 up to 128 (got %d)", HS);
        CHECK_USER(aligned, "CUDA attention: the cuDNN path needs 16-byte aligned tensors");
        return true;
    }
    return attention_cudnn_compiled() && cudnn != nullptr && attention_cudnn_supports_head_size(HS) && aligned;
}

void attention_forward_cuda(floatX* out, float* lse, const floatX* qkv, int B, int T, int C, int NH, bool causal,
                            const int* kv_len, cudaStream_t stream, AttentionImpl impl, AttentionCudnn* cudnn) {
    attention_cuda_check_shape("attention_forward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    if (want_cudnn(impl, cudnn, C / NH, {out, lse, qkv, kv_len}) &&
        attention_cudnn_forward(cudnn, out, lse, qkv, B, T, C, NH, causal, kv_len, stream,
                                impl == AttentionImpl::Auto)) {
        calls.cudnn++;
        return;
    }
    forward_impl<floatX>(out, lse, qkv, B, T, C, NH, causal, kv_len, stream, impl);
}

void attention_backward_cuda(floatX* dqkv, const floatX* dout, const floatX* qkv, const floatX* out,
                             const float* lse, int B, int T, int C, int NH, bool causal, const int* kv_len,
                             float* scratch, cudaStream_t stream, AttentionImpl impl, AttentionCudnn* cudnn) {
    attention_cuda_check_shape("attention_backward_cuda", B, T, C, NH);
    if (B == 0 || T == 0) return;
    if (want_cudnn(impl, cudnn, C / NH, {dqkv, dout, qkv, out, lse, kv_len}) &&
        attention_cudnn_backward(cudnn, dqkv, dout, qkv, out, lse, B, T, C, NH, causal, kv_len, stream,
                                 impl == AttentionImpl::Auto)) {
        calls.cudnn++;
        return;
    }
    backward_impl<floatX>(dqkv, dout, qkv, out, lse, B, T, C, NH, causal, kv_len, scratch, stream, impl);
}

#if !PRAC_ATTENTION_CUDNN
// ---- builds without cuDNN attention (no cudnn-frontend, or the fp32 build): kernels/attention_cudnn.cu is not
// compiled; these stubs say so. attention_cudnn_create returns null, so Auto never picks Cudnn.
bool attention_cudnn_compiled() { return false; }
bool attention_cudnn_supports_head_size(int) { return false; }
AttentionCudnn* attention_cudnn_create(cudaStream_t, AttentionWorkspaceFn, void*) { return nullptr; }
void attention_cudnn_destroy(AttentionCudnn*) {}
AttentionCudnnStats attention_cudnn_stats(const AttentionCudnn*) { return {}; }
bool attention_cudnn_deterministic(const AttentionCudnn*) { return false; }
std::string attention_cudnn_describe() {
    return std::is_same<floatX, float>::value ? "not in the fp32 build"
                                              : "not compiled in (cmake found no cudnn-frontend, or no NVRTC)";
}
bool attention_cudnn_prepare(AttentionCudnn*, int, int, int, int, bool, bool, bool, cudaStream_t, size_t*,
                             std::string* why) {
    if (why) *why = attention_cudnn_describe();
    return false;
}
bool attention_cudnn_forward(AttentionCudnn*, floatX*, float*, const floatX*, int, int, int, int, bool, const int*,
                             cudaStream_t, bool) {
    fail("cuDNN attention is %s", attention_cudnn_describe().c_str());
}
bool attention_cudnn_backward(AttentionCudnn*, floatX*, const floatX*, const floatX*, const floatX*, const float*, int,
                              int, int, int, bool, const int*, cudaStream_t, bool) {
    fail("cuDNN attention is %s", attention_cudnn_describe().c_str());
}
#endif
