#include "common/device.h"

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
