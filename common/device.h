// GPU presence, asked without making the CPU-only build depend on CUDA.
#pragma once
#include <string>

// Number of CUDA devices this process can use (0 without a driver, a GPU or a CUDA build). why gets the
// reason when it is 0.
int cuda_device_count(std::string* why = nullptr);
