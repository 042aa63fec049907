// AdamW over a model's parameter buffer, and what every optimizer shares: the learning-rate schedule, global-norm
// clipping, the gradient norm, and optimizer state as named tensors (train/optimizers.h puts them together).
#pragma once
#include <algorithm>
#include <string>
#include <cmath>
#include <cstdio>  // snprintf
#include <vector>

#include "common/tensors.h"
#include "kernels/adamw8.h"      // AdamW8Codes, ADAMW8_BLOCK
#include "model/model_common.h"  // tensor_numel

// The learning rate's shape after the warmup (--lr-schedule): cosine (the PRAC paper's, llm.c's default), linear,
// constant, or wsd (warmup-stable-decay: the peak until the last cooldown_frac of the steps, then a decay shaped
// 1 - sqrt of the fraction of the cooldown done: Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training
// Beyond Fixed Training Durations", arXiv:2405.18392, whose 20% cooldown is our default).
enum class LrShape { COSINE, LINEAR, CONSTANT, WSD };
inline const char* const LR_SHAPE_NAMES[] = {"cosine", "linear", "constant", "wsd"};
inline const char* lr_shape_name(LrShape s) { return LR_SHAPE_NAMES[(int)s]; }
// false for a name that is none of them
inline bool lr_shape_parse(const std::string& name, LrShape* shape) {
    for (int i = 0; i < 4; i++)
        if (name == LR_SHAPE_NAMES[i]) return *shape = (LrShape)i, true;
    return false;
}

// wsd: the cooldown's steps, round(cooldown_frac x total_steps) with halves up, in the decimal the fraction was
// given as: its decimal of at most 7 significant digits when that reads back as the same float (%.7g: "0.21" for
// 0.21f, which is 0.20999999), times total_steps in integers. The product in float or double can fall short of a half: 0.21 x 150 is 31.5, 32
// steps, and 31.499998 in float (0.35 x 10 is 3.4999999 in double). A fraction that no 7 digits give (or below 1e-4,
// written with an exponent) takes the product in double.
inline int wsd_cooldown_steps(int total_steps, float cooldown_frac) {
    char text[32];
    std::snprintf(text, sizeof text, "%.7g", cooldown_frac);
    long long num = 0, den = 1;  // the decimal num / den
    bool point = false, plain = true;
    for (const char* c = text; *c; c++) {
        if (*c == '.') point = true;
        else if (*c >= '0' && *c <= '9') num = num * 10 + (*c - '0'), den *= point ? 10 : 1;
        else plain = false;
    }
    if (!plain || (float)((double)num / (double)den) != cooldown_frac)
        return (int)std::lround((double)cooldown_frac * total_steps);
    return (int)((2 * num * total_steps + den) / (2 * den));  // (at most 2 x 10^7 x 2^31: within 64 bits)
}

// wsd: the first step (0-based) of the cooldown in a run of total_steps, not inside the warmup. A cooldown's first
// step is at the peak (its part done is 0), as llm.c's: one of N steps leaves N - 1 below it.
inline int wsd_cooldown_start(int total_steps, int warmup, float cooldown_frac) {
    return std::max(warmup, total_steps - wsd_cooldown_steps(total_steps, cooldown_frac));
}

// Linear warmup over `warmup` steps, then the shape's decay from lr toward min_lr_frac * lr, which step total_steps
// (one past the last) would reach: llm.c's convention, the last step's lr a little above the floor (the PRAC paper:
// cosine, warmup 10% of steps, floor 10% of peak). step is 0-based.
inline float lr_schedule(int step, int total_steps, int warmup, float lr, float min_lr_frac,
                         LrShape shape = LrShape::COSINE, float cooldown_frac = 0.2f) {
    if (step < warmup) return lr * (float)(step + 1) / (float)warmup;
    if (total_steps <= warmup || shape == LrShape::CONSTANT) return lr;
    const float min_lr = min_lr_frac * lr;
    const int start = shape == LrShape::WSD ? wsd_cooldown_start(total_steps, warmup, cooldown_frac) : warmup;
    if (step < start) return lr;  // wsd's stable phase
    const float ratio = (float)(step - start) / (float)(total_steps - start);  // [0, 1): the decay's part done
    const float coeff = shape == LrShape::COSINE ? 0.5f * (1.0f + std::cos((float)M_PI * ratio))
                        : shape == LrShape::LINEAR ? 1.0f - ratio
                                                   : 1.0f - std::sqrt(ratio);
    return min_lr + coeff * (lr - min_lr);
}

// Multiplier that clips a gradient of norm `norm` to max_norm (PyTorch's clip_grad_norm_ formula).
inline float clip_scale(float norm, float max_norm) {
    if (max_norm <= 0) return 1.0f;
    float s = max_norm / (norm + 1e-6f);
    return s < 1.0f ? s : 1.0f;
}

// One optimizer state tensor for checkpoints: its name, backend pointer and element count, fp32 (data) or, for
// 8-bit AdamW's codes, bytes (u8, with data null). Every optimizer lists its state this way, so checkpoints and the
// planner treat them alike.
struct OptimizerStateTensor {
    std::string name;
    float* data;
    size_t numel;
    uint8_t* u8 = nullptr;
    void* ptr() const { return u8 ? (void*)u8 : (void*)data; }
    size_t nbytes() const { return numel * (u8 ? 1 : sizeof(float)); }
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

// How AdamW stores its moments m and v: fp32, or 8-bit block-wise quantized (kernels/adamw8.h).
enum class AdamStates { F32, Q8 };

// Which parameter tensors keep fp32 moments under 8-bit states: bitsandbytes' rule (its min_8bit_size, 4096 by
// default), tensors of fewer elements, are norms and biases: a sliver of the memory, where a block's one scale spans
// a whole tensor of unlike elements. A tensor is one layer's slice of a stacked spec (tensor_numel), as each of
// bitsandbytes' parameters is one layer's. One flag per spec, for AdamW's `fp32_specs`.
constexpr size_t ADAMW8_MIN_TENSOR = 4096;
inline std::vector<bool> adamw8_fp32_specs(const std::vector<ParamSpec>& specs, int num_layers) {
    if (num_layers <= 0) fail("internal: adamw8_fp32_specs with %d layers", num_layers);
    std::vector<bool> out;
    for (const ParamSpec& s : specs) out.push_back(tensor_numel(s, num_layers) < ADAMW8_MIN_TENSOR);
    return out;
}

// The 8-bit states' layout over the slice [begin, end) of the parameter buffer: each tensor's part is a segment of
// 8-bit codes or of fp32 moments (fp32_specs; empty: none), in spec order, each kind packed (`at`: its first
// element in its kind's arrays). The 8-bit segments are cut into quantization blocks of ADAMW8_BLOCK elements from
// their first element (a block never spans two tensors, which may differ in weight decay; a segment's last block
// may be short): block is its first block's index.
struct AdamW8Segment {
    size_t lo, hi;  // elements of the parameter buffer
    size_t at;      // of its first element in the codes (8-bit) or the fp32 moments
    size_t block;   // 8-bit: index of its first absmax
    bool decay;
};
struct AdamW8Layout {
    std::vector<AdamW8Segment> q8, f32;
    size_t n8 = 0, n32 = 0, nblocks = 0;  // elements of each kind, 8-bit blocks
};
inline AdamW8Layout adamw8_layout(const std::vector<ParamSpec>& specs, size_t begin, size_t end,
                                  const std::vector<bool>& fp32_specs) {
    AdamW8Layout out;
    for (size_t i = 0; i < specs.size(); i++) {
        const ParamSpec& s = specs[i];
        size_t lo = std::max(s.offset, begin), hi = std::min(s.offset + s.numel, end);
        if (lo >= hi) continue;
        if (i < fp32_specs.size() && fp32_specs[i]) {
            out.f32.push_back({lo, hi, out.n32, 0, s.decay});
            out.n32 += hi - lo;
            continue;
        }
        out.q8.push_back({lo, hi, out.n8, out.nblocks, s.decay});
        out.n8 += hi - lo;
        out.nblocks += (hi - lo + ADAMW8_BLOCK - 1) / ADAMW8_BLOCK;
    }
    return out;
}

// AdamW state: first and second moments (fp32, or 8-bit codes with a fp32 absmax per block and moment plus the
// code tables, and fp32 moments for the small tensors), and fp32 master weights when the backend stores params in
// bf16, laid out like the parameter buffer, or like its slice [begin, end) under ZeRO-1 (each rank keeps and updates
// only its shard of the optimizer state).
template <class Backend>
struct AdamW {
    Backend& be;
    size_t n;           // elements of state: end - begin
    size_t begin, end;  // the slice of the parameter buffer this optimizer updates
    AdamStates states;
    float* m = nullptr;  // fp32 moments: (n), or with 8-bit states the fp32 segments' (layout.n32)
    float* v = nullptr;
    uint8_t* m8 = nullptr;  // 8-bit states: codes (layout.n8)
    uint8_t* v8 = nullptr;
    float* m_absmax = nullptr;  // (layout.nblocks): one scale per quantization block
    float* v_absmax = nullptr;
    AdamW8Codes* codes = nullptr;  // the code tables, in backend memory
    AdamW8Layout layout;           // 8-bit states only
    float* master = nullptr;
    int t = 0;  // completed steps
    float beta1, beta2, eps, weight_decay;

    AdamW(Backend& backend, size_t numel, float b1, float b2, float e, float wd)
        : AdamW(backend, {}, 0, numel, b1, b2, e, wd, AdamStates::F32) {}
    // specs: the parameter tensors (the 8-bit states' blocks follow them); fp32_specs: with 8-bit states, the specs
    // that keep fp32 moments (adamw8_fp32_specs; empty: none)
    AdamW(Backend& backend, const std::vector<ParamSpec>& specs, size_t shard_begin, size_t shard_end, float b1,
          float b2, float e, float wd, AdamStates st, const std::vector<bool>& fp32_specs = {})
        : be(backend), n(shard_end - shard_begin), begin(shard_begin), end(shard_end), states(st), beta1(b1),
          beta2(b2), eps(e), weight_decay(wd) {
        if (states == AdamStates::Q8) {
            layout = adamw8_layout(specs, begin, end, fp32_specs);
            m8 = (uint8_t*)be.alloc(layout.n8);
            v8 = (uint8_t*)be.alloc(layout.n8);
            m_absmax = (float*)be.alloc(layout.nblocks * sizeof(float));
            v_absmax = (float*)be.alloc(layout.nblocks * sizeof(float));
            codes = (AdamW8Codes*)be.alloc(sizeof(AdamW8Codes));
            be.upload(codes, &adamw8_codes(), sizeof(AdamW8Codes));
        }
        const size_t nf = fp32_moments();
        if (nf) {
            m = (float*)be.alloc(nf * sizeof(float));
            v = (float*)be.alloc(nf * sizeof(float));
        }
        if (Backend::master_weights) master = (float*)be.alloc(n * sizeof(float));
    }
    ~AdamW() {
        be.free(m, m ? fp32_moments() * sizeof(float) : 0);
        be.free(v, v ? fp32_moments() * sizeof(float) : 0);
        be.free(m8, m8 ? layout.n8 : 0);
        be.free(v8, v8 ? layout.n8 : 0);
        be.free(m_absmax, m_absmax ? layout.nblocks * sizeof(float) : 0);
        be.free(v_absmax, v_absmax ? layout.nblocks * sizeof(float) : 0);
        be.free(codes, codes ? sizeof(AdamW8Codes) : 0);
        be.free(master, Backend::master_weights ? n * sizeof(float) : 0);
    }
    AdamW(const AdamW&) = delete;
    AdamW& operator=(const AdamW&) = delete;

    // elements of each fp32 moment
    size_t fp32_moments() const { return states == AdamStates::Q8 ? layout.n32 : n; }

    // Bytes the state allocates for a slice of n elements with this 8-bit layout (the planner's row; master weights
    // are the planner's own row).
    static size_t state_bytes(AdamStates st, size_t n, const AdamW8Layout& q) {
        if (st == AdamStates::Q8) return 2 * q.n8 + 2 * (q.nblocks + q.n32) * sizeof(float) + sizeof(AdamW8Codes);
        return 2 * n * sizeof(float);
    }

    std::vector<OptimizerStateTensor> state_tensors() const {
        std::vector<OptimizerStateTensor> s;
        if (states == AdamStates::Q8 && layout.n8)  // the code tables are constants of the format, not state
            s = {{"adamw.m8", nullptr, layout.n8, m8}, {"adamw.v8", nullptr, layout.n8, v8},
                 {"adamw.m8_absmax", m_absmax, layout.nblocks}, {"adamw.v8_absmax", v_absmax, layout.nblocks}};
        if (fp32_moments()) s.insert(s.end(), {{"adamw.m", m, fp32_moments()}, {"adamw.v", v, fp32_moments()}});
        if (master) s.push_back({"adamw.master", master, n});
        return s;
    }

    // One update of every parameter tensor (the parts inside [begin, end)); weight decay only where the spec
    // says so (2-D weights).
    void step(typename Backend::act_t* params, const typename Backend::grad_t* grads,
              const std::vector<ParamSpec>& specs, float lr, float grad_scale) {
        t++;
        if (states == AdamStates::Q8) {
            for (const AdamW8Segment& g : layout.q8)
                be.adamw8_update(params + g.lo, master ? master + (g.lo - begin) : nullptr, grads + g.lo, m8 + g.at,
                                 v8 + g.at, m_absmax + g.block, v_absmax + g.block, g.hi - g.lo, codes, lr, beta1,
                                 beta2, eps, g.decay ? weight_decay : 0.0f, t, grad_scale, g.lo);
            for (const AdamW8Segment& g : layout.f32)
                be.adamw_update(params + g.lo, master ? master + (g.lo - begin) : nullptr, grads + g.lo, m + g.at,
                                v + g.at, g.hi - g.lo, lr, beta1, beta2, eps, g.decay ? weight_decay : 0.0f, t,
                                grad_scale, g.lo);
            return;
        }
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
