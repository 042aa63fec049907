// GeLU, CPU twins: the tanh approximation (GPT-2's "gelu_new") and the exact erf form (BERT/RoBERTa's "gelu").
#pragma once
#include <cmath>
#include <cstddef>

#define GELU_SCALING_FACTOR 0.7978845608028654  // sqrt(2 / pi)

// out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
template <typename T>
void gelu_forward_cpu(T* out, const T* inp, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        T x = inp[i];
        T u = T(GELU_SCALING_FACTOR) * (x + T(0.044715) * x * x * x);
        out[i] = T(0.5) * x * (T(1) + std::tanh(u));
    }
}

// dinp (N) = dout * gelu'(inp)   (overwrites)
template <typename T>
void gelu_backward_cpu(T* dinp, const T* inp, const T* dout, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        T x = inp[i];
        T u = T(GELU_SCALING_FACTOR) * (x + T(0.044715) * x * x * x);
        T th = std::tanh(u);
        T sech2 = T(1) - th * th;
        T du = T(GELU_SCALING_FACTOR) * (T(1) + T(3 * 0.044715) * x * x);
        dinp[i] = dout[i] * (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du);
    }
}

// out (N) = x Φ(x) = 0.5 x (1 + erf(x / sqrt(2)))   (exact GeLU: Hugging Face's "gelu", RoBERTa's hidden_act)
template <typename T>
void gelu_erf_forward_cpu(T* out, const T* inp, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) out[i] = T(0.5) * inp[i] * (T(1) + std::erf(inp[i] * T(M_SQRT1_2)));
}

// dinp (N) = dout * (Φ(x) + x φ(x)), φ(x) = exp(-x²/2) / sqrt(2π)   (overwrites)
template <typename T>
void gelu_erf_backward_cpu(T* dinp, const T* inp, const T* dout, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) {
        T x = inp[i];
        T cdf = T(0.5) * (T(1) + std::erf(x * T(M_SQRT1_2)));
        T pdf = std::exp(T(-0.5) * x * x) * T(0.3989422804014327);  // 1 / sqrt(2π)
        dinp[i] = dout[i] * (cdf + x * pdf);
    }
}
