// SwiGLU (LLaMA MLP), CPU twins. The fused gate|up matmul writes one (N, 2F) buffer per row:
// gate in columns [0, F), up in [F, 2F). out = silu(gate) * up.
#pragma once
#include <cmath>
#include <cstddef>

// out (N, F) = silu(inp[:, :F]) * inp[:, F:]
template <typename T>
void swiglu_forward_cpu(T* out, const T* inp, int N, int F) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* g = inp + (size_t)n * 2 * F;
        const T* u = g + F;
        T* o = out + (size_t)n * F;
        for (int f = 0; f < F; f++) {
            T sig = T(1) / (T(1) + std::exp(-g[f]));
            o[f] = g[f] * sig * u[f];
        }
    }
}

// dinp (N, 2F) = [dgate | dup]  (overwrites)
template <typename T>
void swiglu_backward_cpu(T* dinp, const T* inp, const T* dout, int N, int F) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* g = inp + (size_t)n * 2 * F;
        const T* u = g + F;
        const T* dy = dout + (size_t)n * F;
        T* dg = dinp + (size_t)n * 2 * F;
        T* du = dg + F;
        for (int f = 0; f < F; f++) {
            T sig = T(1) / (T(1) + std::exp(-g[f]));
            T silu = g[f] * sig;
            du[f] = dy[f] * silu;
            dg[f] = dy[f] * u[f] * (sig + g[f] * sig * (T(1) - sig));
        }
    }
}
