// SwiGLU (LLaMA MLP), CPU twins. gate and up are separate (N, F) buffers (one matmul per half of the gate|up
// weight, so each half is its own PRAC site), which makes the op elementwise over n = N * F:
// out = silu(gate) * up.
#pragma once
#include <cmath>
#include <cstddef>

// out (n) = silu(gate) * up
template <typename T>
void swiglu_forward_cpu(T* out, const T* gate, const T* up, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        T g = gate[i];
        T sig = T(1) / (T(1) + std::exp(-g));
        out[i] = g * sig * up[i];
    }
}

// dgate (n) = dout * up * silu'(gate), dup (n) = dout * silu(gate)   (both overwritten)
// Elementwise: element i's gate, up and dout are read before its dgate and dup are written, so the backward may
// run in place (dgate == gate, dup == up: the model reconstructs gate|up into the scratch that receives their
// gradients, docs/DESIGN.md section 4.1).
template <typename T>
void swiglu_backward_cpu(T* dgate, T* dup, const T* gate, const T* up, const T* dout, size_t n) {
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        T g = gate[i], u = up[i], dy = dout[i];
        T sig = T(1) / (T(1) + std::exp(-g));
        T silu = g * sig;
        dup[i] = dy * silu;
        dgate[i] = dy * u * (sig + g * sig * (T(1) - sig));
    }
}
