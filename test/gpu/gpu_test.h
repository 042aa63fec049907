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
