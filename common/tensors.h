// Tensor specs and the one-allocation layout used for parameters, gradients and the activation arena.
// A model describes every buffer it needs as a list of specs (size 0 = absent); one allocation is carved
// into aligned slices. The memory planner reads the same lists, so planned bytes are allocated bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

// F8E4M3: OCP fp8 E4M3FN codes, one byte each (PRAC's fp8 storage, prac/fp8.h)
enum class DType : uint8_t { F32, BF16, I32, F8E4M3 };

inline size_t dtype_size(DType t) { return t == DType::BF16 ? 2 : t == DType::F8E4M3 ? 1 : 4; }
inline const char* dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "f32";
        case DType::BF16: return "bf16";
        case DType::I32: return "i32";
        case DType::F8E4M3: return "f8e4m3";
    }
    return "?";
}

// What a buffer is for, as the memory planner reports it.
enum class MemCategory : uint8_t {
    INPUTS,           // token ids and targets
    SAVED_EXACT,      // saved for backward, never compressed (attention q/k/v, O, LSE; norm statistics)
    SAVED_LINEAR,     // saved inputs of linear layers (PRAC linear sites, compressed or not)
    SAVED_NONLINEAR,  // saved inputs of norms and activations (PRAC nonlinear sites, compressed or not)
    PRAC_BASES,       // P = [Q1 | sqrt(k) Q2] per site and layer
    TRANSIENT,        // full-width buffers shared by all layers of compressed sites, and backward scratch
    LOSS,             // per-token losses and the classifier's logits chunk
};
const char* mem_category_name(MemCategory c);

struct TensorSpec {
    std::string name;
    void** ptr;    // where the slice's address is written (nullptr when numel == 0)
    size_t numel;  // 0 = absent
    DType dtype;
    MemCategory category = MemCategory::TRANSIENT;
};

constexpr size_t TENSOR_ALIGN = 256;  // bytes; keeps every slice aligned for vector loads and cuBLASLt

inline const char* mem_category_name(MemCategory c) {
    switch (c) {
        case MemCategory::INPUTS: return "inputs";
        case MemCategory::SAVED_EXACT: return "saved exact (attention, norm stats)";
        case MemCategory::SAVED_LINEAR: return "saved linear-site inputs";
        case MemCategory::SAVED_NONLINEAR: return "saved nonlinear-site inputs";
        case MemCategory::PRAC_BASES: return "PRAC bases";
        case MemCategory::TRANSIENT: return "transient buffers and scratch";
        case MemCategory::LOSS: return "losses and logits chunk";
    }
    return "?";
}

inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

// Total bytes of the layout (each present tensor padded to TENSOR_ALIGN).
inline size_t tensors_bytes(const std::vector<TensorSpec>& specs) {
    size_t total = 0;
    for (const TensorSpec& s : specs)
        if (s.numel) total += align_up(s.numel * dtype_size(s.dtype), TENSOR_ALIGN);
    return total;
}

// Points every spec into base (which holds tensors_bytes(specs) bytes), in list order.
inline void point_tensors(const std::vector<TensorSpec>& specs, void* base) {
    char* p = (char*)base;
    for (const TensorSpec& s : specs) {
        if (!s.numel) {
            *s.ptr = nullptr;
            continue;
        }
        *s.ptr = p;
        p += align_up(s.numel * dtype_size(s.dtype), TENSOR_ALIGN);
    }
}

// A parameter tensor inside the (unaligned, contiguous) parameter buffer: the optimizer walks these.
// Per-layer tensors are stacked: shape (L, rows, cols) is stored as numel = L * rows * cols.
struct ParamSpec {
    std::string name;  // our name, e.g. "qkvw"
    size_t offset;     // in elements, into the parameter buffer
    size_t numel;
    bool decay;  // AdamW weight decay: 2-D weights (matmuls, embeddings) yes; norms and biases no
};

// A range of elements of a buffer (e.g. one layer's slice of a stacked gradient tensor).
struct ElemRange {
    size_t offset;  // in elements
    size_t numel;
};
