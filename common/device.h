// GPU presence, asked without making the CPU-only build depend on CUDA.
#pragma once
#include <string>

// Number of CUDA devices this process can use (0 without a driver, a GPU or a CUDA build). why gets the
// reason when it is 0.
int cuda_device_count(std::string* why = nullptr);

// The UUID of CUDA device `device` as nvidia-smi prints it ("GPU-" and 32 hex digits in groups), the same in every
// process that sees that GPU, whatever CUDA_VISIBLE_DEVICES numbers it; "" when it cannot be asked.
std::string cuda_device_uuid(int device);

// cudaSetDevice(device): false (with why) when it fails or the build has no CUDA.
bool cuda_set_device(int device, std::string* why = nullptr);

// For programs that only make sense on a GPU (the GPU tests, bench_gpu): -1 when a device is there; otherwise,
// after saying why, the exit code to return: 77 (ctest's "skipped"), or 1 when REQUIRE_GPU=1 (the GPU machine,
// where a missing device is a failure).
int gpu_unavailable_exit_code(const char* program);
