// Helpers of the whole-model tests against Hugging Face fixtures (test_models.cpp, test_roberta.cpp): fixture
// paths, reading reference tensors, and the error measures their tolerances are stated in.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "kernels/cpu_backend.h"
#include "test/worst.h"  // worst_of

inline std::string fixture(const std::string& model, const std::string& file) {
    return std::string(PRAC_SOURCE_DIR) + "/test/fixtures/" + model + "/" + file;
}

inline std::vector<float> read_f32(const SafeTensorsFile& f, const std::string& name) {
    std::vector<float> v(f.get(name).numel());
    f.read_f32(name, v.data(), v.size());
    return v;
}

inline std::vector<int32_t> read_i32(const SafeTensorsFile& f, const std::string& name) {
    std::vector<int32_t> v(f.get(name).numel());
    f.read_raw(name, v.data(), v.size() * sizeof(int32_t));
    return v;
}

// max |a - b| / max(max |b|, floor): relative to the reference tensor's scale.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b, double floor = 1e-6) {
    EXPECT_EQ(a.size(), b.size());
    double diff = 0, scale = floor;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) {
        diff = worst_of(diff, (double)std::fabs(a[i] - b[i]));
        scale = std::max(scale, (double)std::fabs(b[i]));
    }
    return diff / scale;
}

inline double max_abs_err(const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); i++) diff = worst_of(diff, (double)std::fabs(a[i] - b[i]));
    return diff;
}

template <class Model>
std::vector<float> host_buffer(CpuBackend& be, const typename Model::act_t* dev, size_t n) {
    std::vector<float> h(n);
    be.download_f32(h.data(), dev, n);
    return h;
}
