// What every GPU test does first: without a usable CUDA device it exits 77 (ctest reports "Skipped"), unless
// REQUIRE_GPU=1 is set, on the GPU machine, where a missing device is a failure.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

// -1 when a device is there; otherwise the exit code the test must return (77 or 1), after saying why.
inline int gpu_test_unavailable(const char* test) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) return -1;
    const char* why = e != cudaSuccess ? cudaGetErrorString(e) : "device count is 0";
    const char* req = std::getenv("REQUIRE_GPU");
    if (req && std::strcmp(req, "1") == 0) {
        std::printf("FAIL %s: REQUIRE_GPU=1 but no CUDA device (%s)\n", test, why);
        return 1;
    }
    std::printf("SKIP %s: no CUDA device (%s)\n", test, why);
    return 77;
}

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <vector>

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

inline int gpu_test_summary(const char* test) {
    std::printf("%s: %d passed, %d failed\n", test, g_gpu_checks - g_gpu_failures, g_gpu_failures);
    return g_gpu_failures ? 1 : 0;
}

// max |a - b| / max |b| over the first `count` values (all when 0); a NaN in a propagates to a failure
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b, size_t count = 0) {
    if (count == 0) count = b.size();
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double d = std::fabs((double)a[i] - (double)b[i]);
        if (!(d <= num)) num = d;
        den = std::max(den, std::fabs((double)b[i]));
    }
    return num / (den > 0 ? den : 1.0);
}
