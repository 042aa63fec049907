// fp8 storage of PRAC's packed projections (--prac-storage fp8): the e4m3 format, a power-of-two scale per row and
// stochastic rounding, as integer arithmetic usable on host and device (like prac/philox.h), so the CPU twins
// (prac/prac_cpu.cpp prac_fp8_*_cpu) and the CUDA kernels (prac/prac_cuda.cu prac_fp8_*_cuda) agree bit for bit.
//
// Format: OCP 8-bit floating point, E4M3FN (NVIDIA's __NV_E4M3): sign, 4 exponent bits (bias 7), 3 mantissa bits;
// no infinities; S.1111.111 is NaN; largest finite 448 = 1.75·2^8 (S.1111.110); exponent field 0 holds the
// subnormals m/8·2^-6 (smallest 2^-9). The codes of one sign are monotone in magnitude and contiguous: code + 1 is
// the next larger value (0x07 = 7·2^-9 -> 0x08 = 2^-6), which the rounding below relies on.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FP8_HD __host__ __device__ __forceinline__
#else
#define FP8_HD inline
#endif

constexpr uint8_t FP8_E4M3_NAN = 0x7F;       // the NaN code (with sign bit 0)
constexpr uint8_t FP8_E4M3_MAX_CODE = 0x7E;  // 448
constexpr float FP8_E4M3_MAX = 448.0f;

FP8_HD uint32_t fp8_float_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}
FP8_HD float fp8_bits_float(uint32_t b) {
    float x;
    memcpy(&x, &b, 4);
    return x;
}

// The value of code c (NaN codes give the quiet NaN 0x7FC00000, sign dropped: the CUDA conversion drops it too).
FP8_HD float fp8_e4m3_decode(uint8_t c) {
    uint32_t sign = (uint32_t)(c & 0x80) << 24, e = (c >> 3) & 0xF, m = c & 7;
    if (e == 15 && m == 7) return fp8_bits_float(0x7FC00000u);
    // normal: (1 + m/8)·2^(e-7) is fp32 exponent field e + 120, mantissa m in its top 3 bits; subnormal: m·2^-9
    uint32_t mag = e ? ((e + 120) << 23) | (m << 20) : fp8_float_bits((float)m * 0.001953125f);
    return fp8_bits_float(sign | mag);
}

// Stochastic rounding of y to e4m3 with the 32 random bits u: |y| between neighbouring codes lo < hi rounds to
// hi with probability (|y| - lo) / (hi - lo), to lo otherwise, so E[decode] = y exactly, and Var = (hi-|y|)(|y|-lo).
// The fraction is kept to 32 bits of a step: exact for every |y| >= 2^-18 and every |y| in e4m3's normal range (the
// step is 2^-9 below 2^-6, and an fp32 |y| >= 2^-18 is a multiple of 2^-41); the part of a smaller |y| below 2^-41
// is dropped (a bias under 2^-41, i.e. 2^-49 of the row's largest value after scaling). |y| >= 448 saturates to ±448 (a row's
// scale never produces it: fp8_row_exponent), ±Inf and NaN give the NaN code (e4m3 has no infinity: a non-finite
// activation stays non-finite for the trainer's non-finite check).
FP8_HD uint8_t fp8_e4m3_sr(float y, uint32_t u) {
    uint32_t bits = fp8_float_bits(y), a = bits & 0x7FFFFFFFu, sign = (bits >> 24) & 0x80u;
    if (a >= 0x7F800000u) return (uint8_t)(sign | FP8_E4M3_NAN);
    if (a >= 0x43E00000u) return (uint8_t)(sign | FP8_E4M3_MAX_CODE);  // 448 = 0x43E00000
    uint32_t base;   // the code of lo (truncation towards zero)
    uint64_t frac;   // (|y| - lo) / (hi - lo) as a 32-bit fixed-point fraction
    if (a >= 0x3C800000u) {  // |y| >= 2^-6, normal in e4m3: keep 3 of fp32's 23 mantissa bits
        base = (a >> 20) - (120u << 3);  // exponent field E - 120, mantissa's top 3 bits
        frac = (uint64_t)(a & 0xFFFFFu) << 12;
    } else {  // subnormal in e4m3, quantum 2^-9: |y| = sig·2^(E'-150), so |y| / 2^-9 = sig >> (141 - E')
        uint32_t E = a >> 23, sig = (a & 0x7FFFFFu) | (E ? 0x800000u : 0u);
        int d = 141 - (E ? (int)E : 1);  // >= 21 (E <= 120 here)
        base = d < 24 ? sig >> d : 0;    // sig < 2^24
        uint32_t rem = sig - (base << (d < 24 ? d : 0));
        frac = d <= 32 ? (uint64_t)rem << (32 - d) : (d - 32 < 24 ? rem >> (d - 32) : 0);
    }
    return (uint8_t)(sign | (base + (uint32_t)((frac + u) >> 32)));  // code + 1 is the next larger value
}

// The row scale's exponent k: the largest k with amax·2^k <= 448, so the row's largest |value| lands in (224, 448]
// and no rounding (stochastic rounding goes at most up to the next code, and 448 is a code) can overflow. A power
// of two keeps the scaling and its inverse exact (no rounding before or after the fp8 rounding: the estimator stays
// unbiased to the last bit), at the price of up to one binade of e4m3's range (relative precision is the same in
// every binade; only values below 2^-17 of the row's largest become subnormal sooner). amax = 0 (a zero row) or not
// finite: k = 0. Clamped to k <= 126 so that 2^k and 2^-k are normal fp32 numbers (amax >= 2^-117 is unaffected;
// the smallest finite rows then round to fewer codes, still unbiased); k >= -120 for any finite amax.
FP8_HD int fp8_row_exponent(float amax) {
    uint32_t a = fp8_float_bits(amax) & 0x7FFFFFFFu;
    if (a == 0 || a >= 0x7F800000u) return 0;
    int E = (int)(a >> 23);
    if (E == 0) return 126;                           // fp32 subnormal: far below 2^-117
    int k = ((a & 0x7FFFFFu) <= 0x600000u ? 135 : 134) - E;  // 1.m <= 1.75: amax·2^k = 1.m·2^8
    return k < 126 ? k : 126;
}
FP8_HD float fp8_pow2(int k) { return fp8_bits_float((uint32_t)(127 + k) << 23); }  // 2^k, -126 <= k <= 127
