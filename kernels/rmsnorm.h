// RMSNorm (LLaMA), CPU twins: out = weight * x / sqrt(mean(x^2) + eps), as Hugging Face's LlamaRMSNorm.
// Saves rstd per row; backward renormalizes from the saved input.
#pragma once
#include <cmath>
#include <cstddef>

// out (N, C), rstd (N)
template <typename T>
void rmsnorm_forward_cpu(T* out, T* rstd, const T* inp, const T* weight, int N, int C, float eps) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        T ss = 0;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        T s = T(1) / std::sqrt(ss / C + T(eps));
        T* o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = weight[c] * (x[c] * s);
        rstd[n] = s;
    }
}

// dinp (N, C) += input gradient (residual stream), dweight (C) += parameter gradient
template <typename T>
void rmsnorm_backward_cpu(T* dinp, T* dweight, const T* dout, const T* inp, const T* weight, const T* rstd, int N,
                          int C) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        const T* dy = dout + (size_t)n * C;
        T s = rstd[n];
        T b = 0;  // mean over channels of dnorm * norm
        for (int c = 0; c < C; c++) b += dy[c] * weight[c] * x[c] * s;
        b /= C;
        T* dx = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) dx[c] += s * (dy[c] * weight[c] - x[c] * s * b);
    }
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        T dw = 0;
        for (int n = 0; n < N; n++) dw += dout[(size_t)n * C + c] * inp[(size_t)n * C + c] * rstd[n];
        dweight[c] += dw;
    }
}
