// GeLU, tanh approximation (GPT-2's "gelu_new"), CPU twins.
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
