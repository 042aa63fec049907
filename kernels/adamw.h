// AdamW and gradient norm, CPU twins. The update follows PyTorch's torch.optim.AdamW operation order
// (decay first, then the bias-corrected step), so short trajectories can be compared tightly.
#pragma once
#include <cmath>
#include <cstddef>
#include <vector>
#include <omp.h>

// params, m, v (n) updated in place from grads * grad_scale (grad_scale carries global-norm clipping).
// step t is 1-based. weight_decay is 0 for tensors that are not decayed (norms, biases).
template <typename T>
void adamw_update_cpu(T* params, const T* grads, T* m, T* v, size_t n, float lr, float beta1, float beta2,
                      float eps, float weight_decay, int t, float grad_scale) {
    double bc1 = 1.0 - std::pow((double)beta1, t), bc2 = 1.0 - std::pow((double)beta2, t);
    T step_size = T(lr / bc1), bc2_sqrt = T(std::sqrt(bc2));
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        T g = grads[i] * T(grad_scale);
        m[i] = T(beta1) * m[i] + (T(1) - T(beta1)) * g;
        v[i] = T(beta2) * v[i] + (T(1) - T(beta2)) * g * g;
        T p = params[i] * (T(1) - T(lr) * T(weight_decay));
        params[i] = p - step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + T(eps));
    }
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
