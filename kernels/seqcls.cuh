// Sequence-classification head ops, CUDA twins of kernels/seqcls.h:
//   tanh_forward_cuda   <->  tanh_forward_cpu    out (n) = tanh(inp)
//   tanh_backward_cuda  <->  tanh_backward_cpu   dinp (n) = dout * (1 - out²)   (overwrites; in place allowed)
//   seqcls_logits_cuda  <->  matmul_forward_cpu  logits (B, NL) fp32 = x (B, C) @ w (NL, C)^T + bias (NL): the
//                                                head's out_proj, its output fp32 in every build (kernels/matmul.h)
//   seqcls_loss_cuda    <->  seqcls_loss_cpu     per-row cross-entropy (NL >= 2) or squared error (NL == 1) of
//                                                logits (B, NL) fp32, and dlogits * grad_scale; targets < 0 unlabelled
// tanh in fp32 on the stored values (tanhf, accurate: no --use_fast_math), one rounding to T. The loss runs one
// thread per row in double, as the CPU twin (B is a batch of sequences: a few dozen rows), so losses agree to
// fp32 rounding and dlogits to one rounding of T. Templates only (kernels included by several translation units
// are templates, so their symbols merge).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/elementwise_common.cuh"  // ew_map_launch, to_float, from_float
#include "kernels/seqcls.h"

struct TanhForwardOp {
    __device__ float operator()(float x, float) const { return tanhf(x); }
};
struct TanhBackwardOp {  // (out, dout) -> dinp
    __device__ float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};

template <typename T>
void tanh_forward_cuda(T* out, const T* inp, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 1>(out, inp, (const T*)nullptr, n, TanhForwardOp{}, stream);
}
template <typename T>
void tanh_backward_cuda(T* dinp, const T* out, const T* dout, size_t n, cudaStream_t stream) {
    ew_map_launch<T, 2>(dinp, out, dout, n, TanhBackwardOp{}, stream);
}

// One warp per logit: lanes stride over C, summed in fp32 by a fixed shuffle tree (deterministic). The output stays
// fp32 (a bf16 logit moved STS-B's score in steps of 1/64 to 1/32: ties in Spearman, a constant-prediction verdict
// on scores the CPU told apart). B x NL is a batch's few dozen rows by 1-3 labels: no tensor core to win.
template <typename T>
__global__ void seqcls_logits_kernel(float* logits, const T* x, const T* w, const T* bias, int B, int C, int NL) {
    const int warp = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (warp >= B * NL) return;  // (a whole warp: blockDim is a multiple of 32)
    const T* xr = x + (size_t)(warp / NL) * C;
    const T* wr = w + (size_t)(warp % NL) * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32) s += to_float(xr[c]) * to_float(wr[c]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) logits[warp] = s + (bias ? to_float(bias[warp % NL]) : 0.0f);
}

// logits (B, NL) fp32; x (B, C), w (NL, C) and bias (NL) or null in the storage type, on the device
template <typename T>
void seqcls_logits_cuda(float* logits, const T* x, const T* w, const T* bias, int B, int C, int NL,
                        cudaStream_t stream) {
    if (B > 0 && NL > 0)
        seqcls_logits_kernel<T><<<ceil_div(B * NL * 32, 128), 128, 0, stream>>>(logits, x, w, bias, B, C, NL);
    cudaCheck(cudaGetLastError());
}

template <typename T>
__global__ void seqcls_loss_kernel(float* losses, T* dlogits, const float* logits, const int32_t* targets,
                                   const float* scores, int B, int NL, float grad_scale) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float* z = logits + (size_t)b * NL;
    T* dz = dlogits ? dlogits + (size_t)b * NL : nullptr;
    const int t = targets[b];
    if (t < 0) {
        losses[b] = 0.0f;
        if (dz)
            for (int k = 0; k < NL; k++) dz[k] = from_float<T>(0.0f);
        return;
    }
    if (NL > 1 && t >= NL) {  // (the host refuses such labels: a NaN loss, which stops the run, never a read past z)
        losses[b] = NAN;
        if (dz)
            for (int k = 0; k < NL; k++) dz[k] = from_float<T>(NAN);
        return;
    }
    if (NL == 1) {
        const double d = (double)to_float(z[0]) - (double)scores[b];
        losses[b] = (float)(d * d);
        if (dz) dz[0] = from_float<T>((float)(2.0 * d * grad_scale));
        return;
    }
    double m = to_float(z[0]);
    for (int k = 1; k < NL; k++) m = fmax(m, (double)to_float(z[k]));
    double sum = 0;
    for (int k = 0; k < NL; k++) sum += exp((double)to_float(z[k]) - m);
    const double lse = m + log(sum);
    losses[b] = (float)(lse - (double)to_float(z[t]));
    if (dz)
        for (int k = 0; k < NL; k++)
            dz[k] = from_float<T>((float)((exp((double)to_float(z[k]) - lse) - (k == t ? 1.0 : 0.0)) * grad_scale));
}

// losses (B) fp32; dlogits (B, NL) or null (evaluation); logits (B, NL), targets (B) int32 and scores (B) fp32 on
// the device
template <typename T>
void seqcls_loss_cuda(float* losses, T* dlogits, const float* logits, const int32_t* targets, const float* scores,
                      int B, int NL, float grad_scale, cudaStream_t stream) {
    if (B > 0)
        seqcls_loss_kernel<T><<<ceil_div(B, 128), 128, 0, stream>>>(losses, dlogits, logits, targets, scores, B, NL,
                                                                   grad_scale);
    cudaCheck(cudaGetLastError());
}
