// Parameter layout helpers shared by the models: the contiguous parameter buffer, GPT-2-style init, and
// the mapping between our fused layout and Hugging Face tensor names for safetensors load/save.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "common/tensors.h"

// Lays out parameter tensors contiguously (each offset rounded up to 64 elements, so every tensor starts
// 128-byte aligned even in bf16). Returns the buffer's element count.
struct ParamDecl {
    const char* name;
    size_t numel;
    bool decay;
};
size_t layout_params(const std::vector<ParamDecl>& decls, std::vector<ParamSpec>& specs);
size_t count_params(const std::vector<ParamSpec>& specs);  // real parameters, without alignment padding

// One Hugging Face tensor <-> one contiguous block of our parameter buffer. Our block is (rows, cols)
// row-major; the file stores it as (rows, cols), or as (cols, rows) when transposed (GPT-2's Conv1D).
struct HFTensor {
    std::string name;
    size_t offset;  // elements into the parameter buffer
    int rows, cols;
    bool transposed;
    bool matrix = false;  // 2-D in the file even with one row (RoBERTa's one token type, a one-label head)
};

// Reads every mapped tensor of a safetensors file into params (host fp32, the whole parameter buffer).
// Tensors the map does not name are an error unless listed in `ignorable` (name suffixes, e.g. attention
// mask buffers of old checkpoints). Missing tensors, wrong shapes and extra layers say what is wrong.
void hf_load(const std::string& path, const std::vector<HFTensor>& map, const std::vector<std::string>& ignorable,
             float* params, const ModelConfig& cfg);
// The tensor's values in Hugging Face layout (transposed back where needed), and its HF shape.
std::vector<float> hf_tensor_values(const HFTensor& t, const float* params);
std::vector<int64_t> hf_tensor_shape(const HFTensor& t);
// Writes the mapped tensors in Hugging Face layout (F32), atomically.
void hf_save(const std::string& path, const std::vector<HFTensor>& map, const float* params,
             const std::map<std::string, std::string>& metadata);

// Deterministic N(0, std^2) fill from (seed, stream): our own generator (splitmix64 + Box-Muller), so the
// same seed gives the same weights on every platform and standard library.
void fill_normal(float* x, size_t n, float std, uint64_t seed, uint64_t stream);
