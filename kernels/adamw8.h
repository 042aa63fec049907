// 8-bit AdamW states, CPU twin: AdamW (kernels/adamw.h, same operations in the same order) whose moments m and v
// are stored as one byte per element, quantized block-wise (Dettmers et al. 2022, "8-bit Optimizers via Block-wise
// Quantization"): blocks of ADAMW8_BLOCK elements, one fp32 absmax scale per block and moment, and a dynamic
// (tree) quantization code, signed for m and unsigned for v. Each step dequantizes a block, updates it in fp32 and
// quantizes the new moments back (quantize = the nearest code value after dividing by the block's new absmax).
// The CUDA twin is CudaBackend::adamw8_update (kernels/optim_cuda.cu). Why and the code's layout: docs/DESIGN.md
// section 3.3.
//
// The dynamic code (the paper's section 2.2-2.3): a code byte is [sign] [E zeros] [1] [F fraction bits j]; it
// stands for sign * 10^-E * (0.1 + 0.9 (j + 1) / 2^F), i.e. decade E holds 2^F values evenly spaced on
// (0.1, 1] * 10^-E. With no 1 bit the code is 0. The signed code (m) has 7 bits after the sign: E = 0..6,
// F = 6 - E, values down to 1e-6, and both 0x00 and 0x80 stand for 0. The unsigned code (v >= 0) repurposes the
// sign bit as one more bit: E = 0..7, F = 7 - E, values down to 1e-7. The fraction takes (j + 1) / 2^F, the top of
// its bin: 1 is a code (the block's absmax element is stored exactly) and each decade continues the one above it
// without a gap. Quantization picks the nearest code, with one exception: a positive v never becomes 0 (it takes
// the smallest code, 1e-7, instead). Without it an element whose v is below 5e-8 of its block's largest while its
// m is not below 5e-7 of m's (a gradient 1e-4 of the block's largest, common in a block that spans an embedding
// row of a rare token and one of a frequent token) would divide its m by eps alone and jump by ~100 lr.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <omp.h>

#include "kernels/adamw.h"  // adamw_element, AdamWScalars

#if defined(__CUDACC__)
#define ADAMW8_HD __host__ __device__ __forceinline__  // the encoder runs in the CUDA twin too
#else
#define ADAMW8_HD inline
#endif

constexpr size_t ADAMW8_BLOCK = 2048;  // elements per quantization block (the paper's block size)

// One dynamic code: what each byte stands for, and the nearest-value encoder's tables.
struct DynamicCode {
    float value[256];       // value[c]: the value of code byte c
    float threshold[255];   // ascending: midpoints between neighbouring distinct values (+inf past the last)
    uint8_t code[256];      // code[k]: the byte of the k-th smallest distinct value
};
// m's (signed) and v's (unsigned) codes, as the update kernels take them (host or device memory).
struct AdamW8Codes {
    DynamicCode m, v;
};

// The value of code byte c in the signed (7 bits after the sign) or unsigned (8 bits) dynamic code, in double.
inline double dynamic_code_value(uint8_t c, bool is_signed) {
    const int bits = is_signed ? 7 : 8;
    const unsigned body = is_signed ? (c & 0x7Fu) : c;
    if (body == 0) return 0.0;
    int E = 0;
    while (!(body & (1u << (bits - 1 - E)))) E++;  // leading zeros: the decade
    const int F = bits - 1 - E;                    // fraction bits after the indicator 1
    const unsigned j = body & ((1u << F) - 1);
    const double mag = std::pow(10.0, -E) * (0.1 + 0.9 * (double)(j + 1) / (double)(1u << F));
    return is_signed && (c & 0x80u) ? -mag : mag;
}

// The code's tables: values rounded to float, distinct values sorted, and float midpoints between them.
inline DynamicCode make_dynamic_code(bool is_signed) {
    DynamicCode d;
    double sorted[256];
    int count = 0;
    for (int c = 0; c < 256; c++) {
        d.value[c] = (float)dynamic_code_value((uint8_t)c, is_signed);
        if (is_signed && c == 0x80) continue;  // -0: the same value as 0x00, which encodes 0
        sorted[count] = dynamic_code_value((uint8_t)c, is_signed);
        d.code[count++] = (uint8_t)c;
    }
    for (int a = 1; a < count; a++)  // insertion sort of the codes by value (256 entries, once)
        for (int b = a; b > 0 && sorted[b] < sorted[b - 1]; b--) {
            std::swap(sorted[b], sorted[b - 1]);
            std::swap(d.code[b], d.code[b - 1]);
        }
    for (int k = count; k < 256; k++) d.code[k] = d.code[count - 1];
    for (int k = 0; k < 255; k++)
        d.threshold[k] = k + 1 < count ? (float)(0.5 * (sorted[k] + sorted[k + 1])) : INFINITY;
    if (!is_signed) d.threshold[0] = 0.0f;  // every v > 0 above 0's code (see the head of the file)
    return d;
}

inline const AdamW8Codes& adamw8_codes() {
    static const AdamW8Codes codes{make_dynamic_code(true), make_dynamic_code(false)};
    return codes;
}

// The code byte nearest to x (x already divided by the block's absmax, so in [-1, 1] or [0, 1]; for v, a positive
// x never 0's code): the k-th smallest value where k = how many thresholds lie below x (a tie on a threshold takes
// the smaller value). Binary search over the 255 thresholds; the CUDA twin runs the same loop.
ADAMW8_HD uint8_t dynamic_code_encode(const DynamicCode& d, float x) {
    int k = 0;
    for (int step = 128; step > 0; step >>= 1)
        if (d.threshold[k + step - 1] < x) k += step;
    return d.code[k];
}

// x (n) -> codes (n) and *absmax = max |x| (0 when every x is 0: then every code is 0's). is_signed picks the
// code through d; x / absmax is one float division, as in the CUDA twin.
inline void dynamic_quantize_block(uint8_t* codes, float* absmax, const float* x, size_t n, const DynamicCode& d) {
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) amax = std::max(amax, std::fabs(x[i]));
    *absmax = amax;
    for (size_t i = 0; i < n; i++) codes[i] = dynamic_code_encode(d, amax > 0.0f ? x[i] / amax : 0.0f);
}

// One AdamW step over params (n, fp32: the CPU backend's parameters, or the CUDA twin's master weights) with the
// moments stored 8-bit: m_codes, v_codes (n) and m_absmax, v_absmax (ceil(n / ADAMW8_BLOCK)), the blocks being
// [b * ADAMW8_BLOCK, (b + 1) * ADAMW8_BLOCK) of this call's elements. Arguments otherwise as adamw_update_cpu's.
inline void adamw8_update_cpu(float* params, const float* grads, uint8_t* m_codes, uint8_t* v_codes, float* m_absmax,
                              float* v_absmax, size_t n, const AdamW8Codes& codes, float lr, float beta1, float beta2,
                              float eps, float weight_decay, int t, float grad_scale) {
    const AdamWScalars<float> s(lr, beta1, beta2, eps, weight_decay, t);
    const size_t nblocks = (n + ADAMW8_BLOCK - 1) / ADAMW8_BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < nblocks; b++) {
        const size_t lo = b * ADAMW8_BLOCK, len = std::min(ADAMW8_BLOCK, n - lo);
        float m[ADAMW8_BLOCK], v[ADAMW8_BLOCK];  // the block's moments in fp32 for this step
        for (size_t i = 0; i < len; i++) {
            m[i] = codes.m.value[m_codes[lo + i]] * m_absmax[b];
            v[i] = codes.v.value[v_codes[lo + i]] * v_absmax[b];
            params[lo + i] = adamw_element(params[lo + i], grads[lo + i] * grad_scale, m[i], v[i], s);
        }
        dynamic_quantize_block(m_codes + lo, m_absmax + b, m, len, codes.m);
        dynamic_quantize_block(v_codes + lo, v_absmax + b, v, len, codes.v);
    }
}
