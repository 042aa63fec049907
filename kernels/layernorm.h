// LayerNorm (GPT-2), CPU twins. Saves mean and rstd per row (exact and tiny), so backward renormalizes
// from the saved input instead of storing the normalized tensor.
#pragma once
#include <cmath>
#include <cstddef>

// out (N, C) = (inp - mean) * rstd * weight + bias;  mean, rstd (N)
template <typename T>
void layernorm_forward_cpu(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int N, int C,
                           float eps) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        T m = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        T v = 0;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        T s = T(1) / std::sqrt(v + T(eps));
        T* o = out + (size_t)n * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * s * weight[c] + bias[c];
        mean[n] = m;
        rstd[n] = s;
    }
}

// dinp (N, C) += input gradient (it is the residual stream's gradient, hence +=);
// dweight, dbias (C) += parameter gradients.
template <typename T>
void layernorm_backward_cpu(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                            const T* mean, const T* rstd, int N, int C) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        const T* dy = dout + (size_t)n * C;
        T m = mean[n], s = rstd[n];
        // mean over channels of dnorm and of dnorm * norm, with dnorm = dy * weight
        T a = 0, b = 0;
        for (int c = 0; c < C; c++) {
            T dn = dy[c] * weight[c];
            a += dn;
            b += dn * (x[c] - m) * s;
        }
        a /= C;
        b /= C;
        T* dx = dinp + (size_t)n * C;
        for (int c = 0; c < C; c++) {
            T norm = (x[c] - m) * s;
            dx[c] += s * (dy[c] * weight[c] - a - norm * b);
        }
    }
    // parameter grads: threads own channels so the row sums are deterministic
#pragma omp parallel for
    for (int c = 0; c < C; c++) {
        T dw = 0, db = 0;
        for (int n = 0; n < N; n++) {
            T dy = dout[(size_t)n * C + c];
            dw += dy * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
            db += dy;
        }
        dweight[c] += dw;
        dbias[c] += db;
    }
}
