// Residual add, CPU twin. Its backward is the identity: the trainer keeps one residual-gradient buffer
// that every branch's backward accumulates into.
#pragma once
#include <cstddef>

// out (N) = a + b
template <typename T>
void residual_forward_cpu(T* out, const T* a, const T* b, size_t N) {
#pragma omp parallel for
    for (size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}
