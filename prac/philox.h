// Philox4x32-10 counter-based generator and Box-Muller normals, usable on host and device, so the CPU and CUDA
// backends draw the same Gaussian matrices for PRAC's random subspace: element e of a draw is a pure function
// of (key, counter), independent of call order or thread layout.
// Reference: Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11); constants from the paper.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define PHILOX_HD __host__ __device__ __forceinline__
#else
#define PHILOX_HD inline
#endif

struct Philox4x32 {
    uint32_t v[4];
};

PHILOX_HD uint32_t philox_mulhi(uint32_t a, uint32_t b, uint32_t* lo) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *lo = (uint32_t)p;
    return (uint32_t)(p >> 32);
}

// 10 rounds of Philox4x32 on counter c with key (k0, k1).
PHILOX_HD Philox4x32 philox4x32_10(Philox4x32 c, uint32_t k0, uint32_t k1) {
    const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    for (int round = 0; round < 10; round++) {
        uint32_t lo0, lo1;
        uint32_t hi0 = philox_mulhi(M0, c.v[0], &lo0);
        uint32_t hi1 = philox_mulhi(M1, c.v[2], &lo1);
        c = Philox4x32{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
        k0 += W0;
        k1 += W1;
    }
    return c;
}

// Block `block` of stream (stream_hi, stream_lo) under key (k0, k1): four 32-bit words. Word e of a stream is word
// e % 4 of block e / 4 (the Gaussian draws below and the fp8 storage's rounding bits index streams this way).
PHILOX_HD Philox4x32 philox_stream_block(uint32_t k0, uint32_t k1, uint32_t stream_hi, uint32_t stream_lo,
                                         uint64_t block) {
    return philox4x32_10(Philox4x32{{(uint32_t)block, (uint32_t)(block >> 32), stream_lo, stream_hi}}, k0, k1);
}

// uniform in (0, 1] from 32 random bits (never 0, so log() is finite)
PHILOX_HD double philox_uniform(uint32_t x) { return ((double)x + 1.0) * (1.0 / 4294967296.0); }

// The four N(0, 1) values of block `block` of stream `stream` under key (k0, k1): two Box-Muller pairs.
// Draw element e = 4 * block + j. Computed in double so that host and device agree once rounded to float, except
// rarely by one ulp (CUDA's double log, cos and sin may be 1-2 ulp off glibc's; test_prac_cuda allows that).
PHILOX_HD void philox_normal4(uint32_t k0, uint32_t k1, uint32_t stream_hi, uint32_t stream_lo, uint64_t block,
                              double out[4]) {
    Philox4x32 r = philox_stream_block(k0, k1, stream_hi, stream_lo, block);
    for (int p = 0; p < 2; p++) {
        double u1 = philox_uniform(r.v[2 * p]), u2 = philox_uniform(r.v[2 * p + 1]);
        double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586476925 * u2;
        out[2 * p] = rad * cos(ang);
        out[2 * p + 1] = rad * sin(ang);
    }
}
