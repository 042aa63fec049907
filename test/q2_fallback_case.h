// The Q2 draw's Householder fallback, made reachable (shared by test_prac.cpp, the CPU twin, and test_prac_cuda.cu,
// the device twin). The draw orthonormalizes (I - Q1 Q1ᵀ) S by CholQR2 and falls back to Householder QR of the same
// projected Gaussian when CholQR2 fails, i.e. when the projected draw's condition number κ is beyond about u^(-1/2)
// (fp32: ~3000). With n = 8, Q1 = the first 6 coordinate axes and r2 = 2, the projection is exact (it zeroes the
// first 6 rows) and the projected draw is the Gaussian's last two rows: a 2 x 2 Gaussian, whose κ exceeds 8000 for
// about one key in 4000 (Monte Carlo: 2.6e-4). A search over the draw counter finds such keys, and keys with a small
// κ, from the key alone.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "prac/prac.h"

namespace q2_fallback {

constexpr int n = 8, r1 = 6, r2 = 2, r = r1 + r2;  // k = (n - r1) / r2 = 1

// P (n, r) row-major: Q1 = e_0 ... e_5 (exact in any precision), Q2's columns zero (a refresh draws them)
inline std::vector<float> basis() {
    std::vector<float> P((size_t)n * r, 0.0f);
    for (int j = 0; j < r1; j++) P[(size_t)j * r + j] = 1.0f;
    return P;
}

// κ of the projected draw of `key`: the 2 x 2 block of rows 6, 7 of its Gaussian (n, r2), in double
inline double kappa(const PracDrawKey& key) {
    std::vector<float> S((size_t)n * r2);
    prac_gaussian_cpu(S.data(), n, r2, r2, key);
    const double a = S[12], b = S[13], c = S[14], d = S[15];
    const double f = a * a + b * b + c * c + d * d, det = std::fabs(a * d - b * c);
    const double s1sq = 0.5 * (f + std::sqrt(std::fmax(f * f - 4 * det * det, 0.0)));
    return det > 0 ? s1sq / det : INFINITY;  // s1 / s2 = s1² / (s1 s2) = s1² / |det|
}

// The first key {seed, site, layer, refresh >= 0} whose κ lies in [lo, hi); `found` false if none below 2^20.
inline PracDrawKey find_key(double lo, double hi, bool* found, uint64_t seed = 11, uint32_t site = 2) {
    PracDrawKey key{seed, site, 0, 0};
    for (key.refresh = 0; key.refresh < (1u << 20); key.refresh++) {
        const double k = kappa(key);
        if (k >= lo && k < hi) {
            *found = true;
            return key;
        }
    }
    *found = false;
    return key;
}

}  // namespace q2_fallback
