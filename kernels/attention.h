// Multi-head attention, CPU twins of the flash-attention contract: forward saves only the output O and the
// per-row log-sum-exp (LSE); backward recomputes the probabilities from q, k and LSE. No (T, T) matrix is
// stored between forward and backward.
#pragma once
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

// qkv (B, T, 3C): per row [q | k | v], each C = NH heads of HS contiguous values.
// out (B, T, C) = softmax(q k^T / sqrt(HS) [+ masks]) v per head;  lse (B, NH, T)
// Masks: `causal` hides key j > query t (decoders); kv_len (B), when not null, is each sequence's number of real
// tokens (1..T, right padding, as an encoder's batch): keys j >= kv_len[b] are hidden from every query of row b.
// Padded query rows still attend to the real keys, so every output is finite; their gradient is the caller's.
// The key range of query t is [0, attention_key_end(t, ...)): both masks only cut the end.
inline int attention_key_end(int t, int Tlen, bool causal, const int* kv_len, int b) {
    int end = causal ? t + 1 : Tlen;
    if (kv_len && kv_len[b] < end) end = kv_len[b];
    return end;
}

template <typename T>
void attention_forward_cpu(T* out, T* lse, const T* qkv, int B, int Tlen, int C, int NH, bool causal,
                           const int* kv_len = nullptr) {
    int HS = C / NH;
    T scale = T(1) / std::sqrt(T(HS));
#pragma omp parallel
    {
        std::vector<T> p(Tlen);
#pragma omp for collapse(2)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < Tlen; t++) {
                    const T* q = qkv + ((size_t)b * Tlen + t) * 3 * C + (size_t)h * HS;
                    int jmax = attention_key_end(t, Tlen, causal, kv_len, b);
                    T m = -std::numeric_limits<T>::infinity();
                    for (int j = 0; j < jmax; j++) {
                        const T* k = qkv + ((size_t)b * Tlen + j) * 3 * C + C + (size_t)h * HS;
                        T s = 0;
                        for (int d = 0; d < HS; d++) s += q[d] * k[d];
                        p[j] = s * scale;
                        if (p[j] > m) m = p[j];
                    }
                    T sum = 0;
                    for (int j = 0; j < jmax; j++) {
                        p[j] = std::exp(p[j] - m);
                        sum += p[j];
                    }
                    T* o = out + ((size_t)b * Tlen + t) * C + (size_t)h * HS;
                    for (int d = 0; d < HS; d++) o[d] = 0;
                    for (int j = 0; j < jmax; j++) {
                        const T* v = qkv + ((size_t)b * Tlen + j) * 3 * C + 2 * C + (size_t)h * HS;
                        T w = p[j] / sum;
                        for (int d = 0; d < HS; d++) o[d] += w * v[d];
                    }
                    lse[((size_t)b * NH + h) * Tlen + t] = m + std::log(sum);
                }
    }
}

// dqkv (B, T, 3C) = gradients w.r.t. q, k, v (overwrites). With P = exp(S - lse), D = rowsum(dO * O):
//   dV = P^T dO,  dP = dO V^T,  dS = P (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
// One thread per (b, h): every write lands in that head's own columns, so no races.
template <typename T>
void attention_backward_cpu(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse, int B, int Tlen,
                            int C, int NH, bool causal, const int* kv_len = nullptr) {
    int HS = C / NH;
    T scale = T(1) / std::sqrt(T(HS));
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < Tlen; t++)
                for (int part = 0; part < 3; part++) {
                    T* d = dqkv + ((size_t)b * Tlen + t) * 3 * C + (size_t)part * C + (size_t)h * HS;
                    for (int i = 0; i < HS; i++) d[i] = 0;
                }
            for (int t = 0; t < Tlen; t++) {
                size_t row = (size_t)b * Tlen + t;
                const T* q = qkv + row * 3 * C + (size_t)h * HS;
                const T* dO = dout + row * C + (size_t)h * HS;
                const T* O = out + row * C + (size_t)h * HS;
                T* dq = dqkv + row * 3 * C + (size_t)h * HS;
                T D = 0;
                for (int d = 0; d < HS; d++) D += dO[d] * O[d];
                T L = lse[((size_t)b * NH + h) * Tlen + t];
                int jmax = attention_key_end(t, Tlen, causal, kv_len, b);
                for (int j = 0; j < jmax; j++) {
                    size_t rj = (size_t)b * Tlen + j;
                    const T* k = qkv + rj * 3 * C + C + (size_t)h * HS;
                    const T* v = qkv + rj * 3 * C + 2 * C + (size_t)h * HS;
                    T* dk = dqkv + rj * 3 * C + C + (size_t)h * HS;
                    T* dv = dqkv + rj * 3 * C + 2 * C + (size_t)h * HS;
                    T s = 0, dp = 0;
                    for (int d = 0; d < HS; d++) {
                        s += q[d] * k[d];
                        dp += dO[d] * v[d];
                    }
                    T p = std::exp(s * scale - L);
                    T ds = p * (dp - D) * scale;
                    for (int d = 0; d < HS; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                        dv[d] += p * dO[d];
                    }
                }
            }
        }
}
