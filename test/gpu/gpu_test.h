// What every GPU test shares: it first returns gpu_unavailable_exit_code(name) when that is not -1 (exit 77,
// ctest's "Skipped", without a device; a failure with REQUIRE_GPU=1), then reports checks one per line.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <random>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "common/cuda_check.h"
#include "common/device.h"  // gpu_unavailable_exit_code
#include "common/safetensors.h"  // f32_to_bf16, bf16_to_f32 (round to nearest even)
#include "test/worst.h"  // worst_of

// ---- reporting: one line per check, a final "N passed, M failed" summary line and the exit code ----
inline int g_gpu_checks = 0, g_gpu_failures = 0;

inline bool check(bool ok, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline bool check(bool ok, const char* fmt, ...) {
    g_gpu_checks++;
    if (!ok) g_gpu_failures++;
    std::printf("  [%s] ", ok ? "ok" : "FAIL");
    va_list ap;
    va_start(ap, fmt);
    std::vprintf(fmt, ap);
    va_end(ap);
    std::printf("\n");
    return ok;
}

// An exception that ended a test early counts as a failed check.
inline void check_exception(const std::exception& ex) { check(false, "exception: %s", ex.what()); }

// A run that made no check fails: a part that runs nothing in this build (or on this backend) must not pass as tested.
inline int gpu_test_summary(const char* test) {
    std::printf("%s: %d passed, %d failed\n", test, g_gpu_checks - g_gpu_failures, g_gpu_failures);
    if (g_gpu_checks == 0) {
        std::printf("%s: FAILED: no check ran (the part asked for has none in this build or on this device)\n", test);
        return 1;
    }
    return g_gpu_failures ? 1 : 0;
}

// max |a - b| / max |b| over the first `count` values (all when 0); a NaN in a propagates to a failure
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b, size_t count = 0) {
    if (count == 0) count = b.size();
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double d = std::fabs((double)a[i] - (double)b[i]);
        num = worst_of(num, d);
        den = std::max(den, std::fabs((double)b[i]));
    }
    return num / (den > 0 ? den : 1.0);
}

// ---- test data ----
// n values of scale * N(0, 1) + shift from rng: Box-Muller on 53-bit uniforms, both values of each pair used.
// (std::normal_distribution draws its uniforms through libstdc++'s generate_canonical, which takes two long-double
// logarithms per draw: a quarter of an emulated kernel test's time went there.)
inline std::vector<float> normal_values(std::mt19937_64& rng, size_t n, float scale = 1.0f, float shift = 0.0f) {
    std::vector<float> v(n);
    const double two_pi = 6.283185307179586, to_unit = 1.0 / 9007199254740992.0;  // 2^-53
    for (size_t i = 0; i < n; i += 2) {
        const double u1 = (double)((rng() >> 11) + 1) * to_unit, u2 = (double)(rng() >> 11) * to_unit;  // (0,1], [0,1)
        const double r = std::sqrt(-2.0 * std::log(u1));
        v[i] = shift + scale * (float)(r * std::cos(two_pi * u2));
        if (i + 1 < n) v[i + 1] = shift + scale * (float)(r * std::sin(two_pi * u2));
    }
    return v;
}

// ---- host-side storage types: T <-> float for T = float or bf16 ----
// The bf16 conversions are the checkpoint code's (common/safetensors.h): round to nearest even, so a host value and
// the GPU's stored value agree bit for bit.
template <typename T>
struct Host;
template <>
struct Host<float> {
    static float from(float v) { return v; }
    static float to_f32(float v) { return v; }
    static const char* name() { return "fp32"; }
};
template <>
struct Host<__nv_bfloat16> {
    static __nv_bfloat16 from(float v) {
        __nv_bfloat16_raw raw;
        raw.x = f32_to_bf16(v);
        return __nv_bfloat16(raw);
    }
    static float to_f32(__nv_bfloat16 v) {
        __nv_bfloat16_raw raw = v;
        return bf16_to_f32(raw.x);
    }
    static const char* name() { return "bf16"; }
};

// the values of `v` as stored in T (what both sides compute on)
template <typename T>
std::vector<float> quantize(std::vector<float> v) {
    for (float& f : v) f = Host<T>::to_f32(Host<T>::from(f));
    return v;
}

// ---- device buffers ----
// `count` elements of T at p = base + offset. An element offset gives pointers that are not 16-byte aligned
// (kernels' scalar paths); `spare` elements past the end are for a test that wants slack. The allocation is
// never 0 elements (cudaMalloc of 0 bytes gives no pointer).
template <typename T>
struct Dev {
    T* base = nullptr;  // what cudaMalloc returned
    T* p = nullptr;
    size_t count = 0;
    explicit Dev(size_t n, size_t offset = 0, size_t spare = 0) : count(n) {
        cudaCheck(cudaMalloc(&base, std::max<size_t>(offset + n + spare, 1) * sizeof(T)));
        p = base + offset;
    }
    ~Dev() { cudaFree(base); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;
    size_t bytes() const { return count * sizeof(T); }
};

// host floats -> T on the device (h.size() elements; Host<T> converts)
template <typename T>
void upload(Dev<T>& d, const std::vector<float>& h) {
    std::vector<T> t(h.size());
    for (size_t i = 0; i < h.size(); i++) t[i] = Host<T>::from(h[i]);
    cudaCheck(cudaMemcpy(d.p, t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice));
}
// the first `count` elements as host floats
template <typename T>
std::vector<float> download(const Dev<T>& d, size_t count) {
    std::vector<T> t(count);
    cudaCheck(cudaMemcpy(t.data(), d.p, count * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> h(count);
    for (size_t i = 0; i < count; i++) h[i] = Host<T>::to_f32(t[i]);
    return h;
}
template <typename T>
std::vector<float> download(const Dev<T>& d) {
    return download(d, d.count);
}
// the raw bytes of all `count` elements (for bitwise comparisons)
template <typename T>
std::vector<uint8_t> download_bytes(const Dev<T>& d) {
    std::vector<uint8_t> b(d.bytes());
    cudaCheck(cudaMemcpy(b.data(), d.p, b.size(), cudaMemcpyDeviceToHost));
    return b;
}
// src's `count` elements into dst
template <typename T>
void copy_dev(Dev<T>& dst, const Dev<T>& src) {
    cudaCheck(cudaMemcpy(dst.p, src.p, src.bytes(), cudaMemcpyDeviceToDevice));
}
