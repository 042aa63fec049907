// Portable seeded shuffles for the data loaders (dataloader.h, glue_batches.h): std::mt19937_64, whose output the C++
// standard fixes, and our own Fisher-Yates, never std::shuffle or uniform_int_distribution (their results differ
// between standard libraries), so one seed gives one order everywhere. docs/DESIGN.md section 7.1.
#pragma once
#include <cstdint>
#include <random>
#include <utility>

// splitmix64: a well-mixed, fully specified 64-bit step. It advances per-epoch states and derives independent
// mt19937_64 seeds from (state, stream id).
inline uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

inline uint64_t mix_seed(uint64_t state, uint64_t stream) { return splitmix64(state ^ splitmix64(stream)); }

// Uniform integer in [0, n) by rejection, so the result depends only on mt19937_64's (standardized) output.
inline uint64_t uniform_below(std::mt19937_64& g, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // largest multiple of n not above 2^64-1
    uint64_t r;
    do {
        r = g();
    } while (r >= limit);
    return r % n;
}

// Permutes v in place, from the seed alone.
template <typename V>
void fisher_yates(V& v, uint64_t seed) {
    std::mt19937_64 g(seed);
    for (size_t i = v.size(); i > 1; i--) {
        size_t j = (size_t)uniform_below(g, i);
        std::swap(v[i - 1], v[j]);
    }
}
