// AdamW over a model's parameter buffer, and what every optimizer shares: the learning-rate schedule, global-norm
// clipping, the gradient norm, and optimizer state as named fp32 tensors (train/optimizers.h puts them together).
#pragma once
#include <algorithm>
#include <string>
#include <cmath>
#include <vector>

#include "common/tensors.h"

// Linear warmup over `warmup` steps, then cosine decay from lr to min_lr_frac * lr at the last step
// (the PRAC paper: warmup 10% of steps, floor 10% of peak). step is 0-based.
inline float lr_schedule(int step, int total_steps, int warmup, float lr, float min_lr_frac) {
    if (step < warmup) return lr * (float)(step + 1) / (float)warmup;
    float min_lr = min_lr_frac * lr;
    if (total_steps <= warmup) return lr;
    float ratio = (float)(step - warmup) / (float)(total_steps - warmup);
    float coeff = 0.5f * (1.0f + std::cos((float)M_PI * ratio));
    return min_lr + coeff * (lr - min_lr);
}

// Multiplier that clips a gradient of norm `norm` to max_norm (PyTorch's clip_grad_norm_ formula).
inline float clip_scale(float norm, float max_norm) {
    if (max_norm <= 0) return 1.0f;
    float s = max_norm / (norm + 1e-6f);
    return s < 1.0f ? s : 1.0f;
}

// One optimizer state tensor for checkpoints: its name, backend pointer and element count (fp32). Every optimizer
// lists its state this way, so checkpoints and the planner treat them alike.
struct OptimizerStateTensor {
    std::string name;
    float* data;
    size_t numel;
};

// An optimizer's state as named fp32 tensors in ONE backend allocation, each slice aligned like common/tensors.h
// (GaLore, RSO): state_entries_bytes is what to allocate (and what the planner counts), carve_state the slices.
struct StateEntry {
    std::string name;
    size_t numel;
};
inline size_t state_entries_bytes(const std::vector<StateEntry>& entries) {
    size_t total = 0;
    for (const StateEntry& e : entries) total += align_up(e.numel * sizeof(float), TENSOR_ALIGN);
    return total;
}
inline std::vector<float*> carve_state(void* memory, const std::vector<StateEntry>& entries) {
    std::vector<float*> out;
    char* base = (char*)memory;
    for (const StateEntry& e : entries) {
        out.push_back((float*)base);
        base += align_up(e.numel * sizeof(float), TENSOR_ALIGN);
    }
    return out;
}

// AdamW state: fp32 first and second moments (and fp32 master weights when the backend stores params in
// bf16), laid out like the parameter buffer, or like its slice [begin, end) under ZeRO-1 (each rank keeps and
// updates only its shard of the optimizer state).
template <class Backend>
struct AdamW {
    Backend& be;
    size_t n;           // elements of state: end - begin
    size_t begin, end;  // the slice of the parameter buffer this optimizer updates
    float* m = nullptr;
    float* v = nullptr;
    float* master = nullptr;
    int t = 0;  // completed steps
    float beta1, beta2, eps, weight_decay;

    AdamW(Backend& backend, size_t numel, float b1, float b2, float e, float wd)
        : AdamW(backend, 0, numel, b1, b2, e, wd) {}
    AdamW(Backend& backend, size_t shard_begin, size_t shard_end, float b1, float b2, float e, float wd)
        : be(backend), n(shard_end - shard_begin), begin(shard_begin), end(shard_end), beta1(b1), beta2(b2), eps(e),
          weight_decay(wd) {
        m = (float*)be.alloc(n * sizeof(float));
        v = (float*)be.alloc(n * sizeof(float));
        if (Backend::master_weights) master = (float*)be.alloc(n * sizeof(float));
    }
    ~AdamW() {
        be.free(m, n * sizeof(float));
        be.free(v, n * sizeof(float));
        be.free(master, Backend::master_weights ? n * sizeof(float) : 0);
    }
    AdamW(const AdamW&) = delete;
    AdamW& operator=(const AdamW&) = delete;

    std::vector<OptimizerStateTensor> state_tensors() const {
        std::vector<OptimizerStateTensor> s = {{"adamw.m", m, n}, {"adamw.v", v, n}};
        if (master) s.push_back({"adamw.master", master, n});
        return s;
    }

    // One update of every parameter tensor (the parts inside [begin, end)); weight decay only where the spec
    // says so (2-D weights).
    void step(typename Backend::act_t* params, const typename Backend::grad_t* grads,
              const std::vector<ParamSpec>& specs, float lr, float grad_scale) {
        t++;
        for (const ParamSpec& s : specs) {
            size_t lo = std::max(s.offset, begin), hi = std::min(s.offset + s.numel, end);
            if (lo >= hi) continue;
            be.adamw_update(params + lo, master ? master + (lo - begin) : nullptr, grads + lo, m + (lo - begin),
                            v + (lo - begin), hi - lo, lr, beta1, beta2, eps, s.decay ? weight_decay : 0.0f, t,
                            grad_scale, lo);
        }
    }
};

// Global L2 norm of the gradient buffer (alignment padding is zero and adds nothing).
template <class Backend>
float grad_norm(Backend& be, const typename Backend::grad_t* grads, size_t n) {
    return (float)std::sqrt(be.sum_squares(grads, n));
}
