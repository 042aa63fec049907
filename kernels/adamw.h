// AdamW and gradient norm, CPU twins. The update follows PyTorch's torch.optim.AdamW operation order
// (decay first, then the bias-corrected step), so short trajectories can be compared tightly.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>
#include <omp.h>

// The scalars of one AdamW step (t is 1-based; weight_decay is 0 for tensors that are not decayed: norms, biases),
// computed as every twin does: double bias corrections, then T.
template <typename T>
struct AdamWScalars {
    T beta1, beta2, eps, decay, step_size, bc2_sqrt;
    AdamWScalars(float lr, float b1, float b2, float e, float weight_decay, int t)
        : beta1(T(b1)), beta2(T(b2)), eps(T(e)), decay(T(1) - T(lr) * T(weight_decay)) {
        double bc1 = 1.0 - std::pow((double)b1, t), bc2 = 1.0 - std::pow((double)b2, t);
        step_size = T(lr / bc1);
        bc2_sqrt = T(std::sqrt(bc2));
    }
};

// One element: the moments m, v absorb the (scaled) gradient g, then the parameter p decays and takes the
// bias-corrected step; returns the new p. Shared by adamw_update_cpu and the 8-bit twin (kernels/adamw8.h).
template <typename T>
inline T adamw_element(T p, T g, T& m, T& v, const AdamWScalars<T>& s) {
    m = s.beta1 * m + (T(1) - s.beta1) * g;
    v = s.beta2 * v + (T(1) - s.beta2) * g * g;
    p = p * s.decay;
    return p - s.step_size * m / (std::sqrt(v) / s.bc2_sqrt + s.eps);
}

// params, m, v (n) updated in place from grads * grad_scale (grad_scale carries global-norm clipping).
// step t is 1-based. weight_decay is 0 for tensors that are not decayed (norms, biases).
template <typename T>
void adamw_update_cpu(T* params, const T* grads, T* m, T* v, size_t n, float lr, float beta1, float beta2,
                      float eps, float weight_decay, int t, float grad_scale) {
    const AdamWScalars<T> s(lr, beta1, beta2, eps, weight_decay, t);
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) params[i] = adamw_element(params[i], grads[i] * T(grad_scale), m[i], v[i], s);
}

// sum of squares of x (n) in double. Each thread sums a fixed contiguous block and the partials are added
// in thread order, so the result is bitwise reproducible for a given thread count (an OpenMP reduction
// clause does not promise an order).
template <typename T>
double sum_squares_cpu(const T* x, size_t n) {
    std::vector<double> partial(omp_get_max_threads(), 0.0);
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        size_t lo = n * id / nt, hi = n * (id + 1) / nt;
        double s = 0;
        for (size_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
        partial[id] = s;
    }
    double s = 0;
    for (double p : partial) s += p;
    return s;
}
