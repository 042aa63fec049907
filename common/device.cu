#include "common/device.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(PRAC_HAVE_CUDA)
#include <cuda_runtime.h>

int cuda_device_count(std::string* why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why) *why = cudaGetErrorString(e);
        return 0;
    }
    if (n == 0 && why) *why = "no CUDA device";
    return n;
}
#else
int cuda_device_count(std::string* why) {
    if (why) *why = "built without CUDA";
    return 0;
}
#endif

int gpu_unavailable_exit_code(const char* program) {
    std::string why;
    if (cuda_device_count(&why) > 0) return -1;
    const char* req = std::getenv("REQUIRE_GPU");
    if (req && std::strcmp(req, "1") == 0) {
        std::printf("FAIL %s: REQUIRE_GPU=1 but no CUDA device (%s)\n", program, why.c_str());
        return 1;
    }
    std::printf("SKIP %s: no CUDA device (%s)\n", program, why.c_str());
    return 77;
}
