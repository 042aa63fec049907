// Rotary position embedding, rotate-half convention (Hugging Face LLaMA), CPU twins.
// For each head vector x (HS) at position t, with h = HS/2 and angle a_i = t * theta^(-2i/HS):
//   out[i]     = x[i]     cos a_i - x[i + h] sin a_i
//   out[i + h] = x[i + h] cos a_i + x[i]     sin a_i
// Applied in place to the q and k parts of the fused qkv buffer (B, T, 3C); v is untouched.
#pragma once
#include <cmath>
#include <cstddef>

// freqs (T, HS/2, 2): interleaved (cos, sin). Angles are formed in fp32 like the reference
// (inv_freq and position in fp32, their product in fp32), then cos/sin taken in double.
template <typename T>
void rope_table_cpu(T* freqs, int Tlen, int HS, float theta) {
    int h = HS / 2;
    for (int t = 0; t < Tlen; t++)
        for (int i = 0; i < h; i++) {
            float inv_freq = (float)(1.0 / std::pow((double)theta, (double)(2 * i) / HS));
            float angle = (float)t * inv_freq;
            freqs[((size_t)t * h + i) * 2 + 0] = (T)std::cos((double)angle);
            freqs[((size_t)t * h + i) * 2 + 1] = (T)std::sin((double)angle);
        }
}

// qkv (B, T, 3C) rotated in place (q and k parts); backward=true applies the inverse rotation,
// which is the gradient of the forward rotation (it is orthogonal).
template <typename T>
void rope_cpu(T* qkv, const T* freqs, int B, int Tlen, int C, int NH, bool backward) {
    int HS = C / NH, h = HS / 2;
    T dir = backward ? T(-1) : T(1);
#pragma omp parallel for
    for (int n = 0; n < B * Tlen; n++) {
        int t = n % Tlen;
        for (int part = 0; part < 2; part++)  // q, k
            for (int head = 0; head < NH; head++) {
                T* x = qkv + (size_t)n * 3 * C + (size_t)part * C + (size_t)head * HS;
                for (int i = 0; i < h; i++) {
                    T c = freqs[((size_t)t * h + i) * 2], s = dir * freqs[((size_t)t * h + i) * 2 + 1];
                    T x1 = x[i], x2 = x[i + h];
                    x[i] = x1 * c - x2 * s;
                    x[i + h] = x2 * c + x1 * s;
                }
            }
    }
}
