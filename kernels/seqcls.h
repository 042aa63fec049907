// Sequence-classification head (RobertaForSequenceClassification's dense + tanh + out_proj on each sequence's
// first token), CPU twins of its two ops that the other families lack: tanh, and the loss over B rows of logits
// (cross-entropy over the classes, or the squared error of one output for regression). The dense layers are
// matmuls (the last, out_proj, with an fp32 output: matmul_forward_cpu here, seqcls_logits_cuda on the GPU); picking
// the first token's row is the embedding gather (kernels/encoder.h) with row indices.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

// out (N) = tanh(inp)
template <typename T>
void tanh_forward_cpu(T* out, const T* inp, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) out[i] = std::tanh(inp[i]);
}

// dinp (N) = dout * (1 - out²), from the forward's output (overwrites; dinp may alias dout)
template <typename T>
void tanh_backward_cpu(T* dinp, const T* out, const T* dout, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) dinp[i] = dout[i] * (T(1) - out[i] * out[i]);
}

// Per-row loss of logits (B, NL), and its gradient times grad_scale (the weight of one row's loss: 1 / labelled
// rows for a mean) when dlogits is not null. Rows with targets[b] < 0 are unlabelled: loss 0, gradient 0.
//   NL >= 2  cross-entropy with class targets[b]:  loss = logsumexp(z) - z[t],  dz = (softmax(z) - onehot(t))
//   NL == 1  regression on scores[b]:               loss = (z - y)²,            dz = 2 (z - y)
// (Hugging Face's CrossEntropyLoss / MSELoss, whose mean over the rows is the sum of loss * grad_scale.)
// Accumulated in double, dlogits stored as T. logits (B, NL) as Z (the backends': fp32, the head's output in every
// build, so that STS-B's score keeps its precision), targets (B) int32, scores (B) fp32 (read only for NL == 1).
template <typename T, typename Z>
void seqcls_loss_cpu(float* losses, T* dlogits, const Z* logits, const int32_t* targets, const float* scores, int B,
                     int NL, float grad_scale) {
    for (int b = 0; b < B; b++) {
        const Z* z = logits + (size_t)b * NL;
        T* dz = dlogits ? dlogits + (size_t)b * NL : nullptr;
        int t = targets[b];
        if (t < 0) {
            losses[b] = 0.0f;
            if (dz)
                for (int k = 0; k < NL; k++) dz[k] = T(0);
            continue;
        }
        if (NL == 1) {
            double d = (double)z[0] - (double)scores[b];
            losses[b] = (float)(d * d);
            if (dz) dz[0] = T(2.0 * d * grad_scale);
            continue;
        }
        double m = z[0];
        for (int k = 1; k < NL; k++) m = std::fmax(m, (double)z[k]);
        double sum = 0;
        for (int k = 0; k < NL; k++) sum += std::exp((double)z[k] - m);
        double lse = m + std::log(sum);
        losses[b] = (float)(lse - (double)z[t]);
        if (dz)
            for (int k = 0; k < NL; k++) dz[k] = T((std::exp((double)z[k] - lse) - (k == t ? 1.0 : 0.0)) * grad_scale);
    }
}
