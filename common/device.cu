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
        // (the runtime's words for a machine with no NVIDIA driver at all are about the driver's version)
        if (why)
            *why = e == cudaErrorInsufficientDriver
                       ? std::string("the CUDA runtime says \"") + cudaGetErrorString(e) +
                             "\", which is also what it says where no NVIDIA driver is installed: no GPU here?"
                       : std::string(cudaGetErrorString(e));
        return 0;
    }
    if (n == 0 && why) *why = "no CUDA device";
    return n;
}

bool cuda_set_device(int device, std::string* why) {
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess && why) *why = cudaGetErrorString(e);
    return e == cudaSuccess;
}

std::string cuda_device_uuid(int device) {
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "";
    std::string s = "GPU-";
    for (int i = 0; i < 16; i++) {
        char hex[3];
        std::snprintf(hex, sizeof hex, "%02x", (unsigned char)p.uuid.bytes[i]);
        s += hex;
        if (i == 3 || i == 5 || i == 7 || i == 9) s += "-";
    }
    return s;
}
#else
int cuda_device_count(std::string* why) {
    if (why) *why = "built without CUDA";
    return 0;
}
std::string cuda_device_uuid(int) { return ""; }
bool cuda_set_device(int, std::string* why) {
    if (why) *why = "built without CUDA";
    return false;
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
