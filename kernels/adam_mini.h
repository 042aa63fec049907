// Adam-mini, CPU twin: Adam with one second-moment value per block of parameters instead of one per element.
// train/optim_adam_mini.h decides the blocks; a CUDA backend supplies the same op (same argument order) as the
// member adam_mini_update.
//
// For each block of `block` consecutive elements (n is a multiple of block), with g = grads * grad_scale:
//   v_b = beta2 v_b + (1 - beta2) mean_block(g²)          one float per block
//   m   = beta1 m + (1 - beta1) g                         one float per element
//   p   = p (1 - lr wd) - lr / (1 - beta1^t) * m / (sqrt(v_b) / sqrt(1 - beta2^t) + eps)
// i.e. AdamW (kernels/adamw.h, same operation order and bias corrections) with v shared inside a block; with
// block = 1 it is AdamW (mathematically: v is summed in double, so equal to within rounding). This is the update of the Adam-mini paper (Zhang et al. 2024, Algorithm 1).
#pragma once
#include <cmath>
#include <cstddef>

template <typename T, typename G>
void adam_mini_update_cpu(T* params, const G* grads, float* m, float* v, size_t n, size_t block, float lr,
                          float beta1, float beta2, float eps, float weight_decay, int t, float grad_scale) {
    double bc1 = 1.0 - std::pow((double)beta1, t), bc2 = 1.0 - std::pow((double)beta2, t);
    float step_size = (float)(lr / bc1), bc2_sqrt = (float)std::sqrt(bc2);
    float decay = 1.0f - lr * weight_decay;
    size_t nblocks = n / block;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < nblocks; k++) {
        const G* g = grads + k * block;
        double ss = 0;  // the block mean in double: blocks reach a few thousand elements (a head of q: HS * C)
        for (size_t i = 0; i < block; i++) {
            float gi = (float)g[i] * grad_scale;
            ss += (double)gi * gi;
        }
        float vb = beta2 * v[k] + (1.0f - beta2) * (float)(ss / (double)block);
        v[k] = vb;
        float den = std::sqrt(vb) / bc2_sqrt + eps;
        T* p = params + k * block;
        float* mk = m + k * block;
        for (size_t i = 0; i < block; i++) {
            float gi = (float)g[i] * grad_scale;
            mk[i] = beta1 * mk[i] + (1.0f - beta1) * gi;
            p[i] = (T)((float)p[i] * decay - step_size * mk[i] / den);
        }
    }
}
