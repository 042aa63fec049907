// Token (+ learned position) embedding, CPU twins.
#pragma once
#include <cstddef>
#include <cstdint>

// out (B, T, C) = wte[tokens] (+ wpe[t] when wpe is non-null: GPT-2; LLaMA has none)
template <typename T>
void encoder_forward_cpu(T* out, const int32_t* tokens, const T* wte, const T* wpe, int B, int Tlen, int C) {
#pragma omp parallel for
    for (int n = 0; n < B * Tlen; n++) {
        const T* e = wte + (size_t)tokens[n] * C;
        const T* p = wpe ? wpe + (size_t)(n % Tlen) * C : nullptr;
        T* o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = p ? e[c] + p[c] : e[c];
    }
}

// dwte[tokens] += dout, dwpe[t] += dout. Threads own channel ranges, rows run in order, so the sum is
// deterministic although several rows hit the same token.
template <typename T>
void encoder_backward_cpu(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int B, int Tlen, int C) {
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        for (int n = 0; n < B * Tlen; n++) {
            T d = dout[(size_t)n * C + c];
            dwte[(size_t)tokens[n] * C + c] += d;
            if (dwpe) dwpe[(size_t)(n % Tlen) * C + c] += d;
        }
    }
}
