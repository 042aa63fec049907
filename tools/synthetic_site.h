// Synthetic activations of one PRAC site for the refresh benchmarks (tools/bench_refresh.cpp and its CUDA twin
// tools/bench_gpu_refresh.cu use the same matrices).
//
// Real activations (prac_analyze on the gpt2-mini, llama-mini and llama-130m MLP sites) have one direction that holds
// most of the energy (stable rank 1.0-1.2) over a power law; between two refreshes the model moves, and the top
// direction with it. Their refresh's first power step is then beyond CholQR2 (shifted Cholesky-QR or Householder QR
// takes it, prac/prac_cpu.cpp orth_into), which a synthetic site must reproduce to time what training pays.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

// X (N, n): Gaussian rows (seed) times the column scales 6 for column 0 and (1 + j/8)^-1.2 after it. With turn != 0
// the top direction is turned by that angle (radians) toward a fixed random unit direction w on the columns from
// 0.4 n on (outside the subspace block): rows x <- x R with R the rotation in the plane (e0, w) taking e0 to
// cos(turn) e0 + sin(turn) w. The warm start's batch of the benchmarks: another seed, turned by 0.1 (about 6
// degrees). Measured with bench_refresh (2026-11-28): at n = 768 and 2048, without a turn (another seed only)
// CholQR2 suffices, with 0.03 or 0.1 the warm refresh's first power step needs one shifted Cholesky-QR pass (and the
// cold refresh two); with 0.1, one pass up to n = 5461 and two at 10922; a llama-130m dump (fch_act, steps 5 and 10
// of training) needed three.
constexpr double SYNTHETIC_TURN = 0.1;  // the warm start's batch (radians)
inline std::vector<float> synthetic_site(int N, int n, uint64_t seed, double turn = 0) {
    std::vector<float> x((size_t)N * n), scale(n), w(n, 0.0f);
    for (int j = 0; j < n; j++) scale[j] = j == 0 ? 6.0f : (float)std::pow(1.0 + j / 8.0, -1.2);
    std::mt19937_64 g(seed);
    std::normal_distribution<float> z;
    for (size_t e = 0; e < x.size(); e++) x[e] = z(g) * scale[e % n];
    const int j0 = (int)std::ceil(0.4 * n);
    if (turn == 0 || j0 >= n) return x;
    std::mt19937_64 gw(0x5EED0000u + n);
    std::normal_distribution<float> zw;  // not z: a distribution may keep a value drawn from the rows' generator
    double norm2 = 0;
    for (int j = j0; j < n; j++) norm2 += (double)(w[j] = zw(gw)) * w[j];
    for (int j = j0; j < n; j++) w[j] = (float)(w[j] / std::sqrt(norm2));
    const float cm1 = (float)(std::cos(turn) - 1), sn = (float)std::sin(turn);
    for (int i = 0; i < N; i++) {
        float* row = x.data() + (size_t)i * n;
        float a = row[0], c = 0;  // the row's coordinates on e0 and w (w has no e0 part)
        for (int j = j0; j < n; j++) c += row[j] * w[j];
        // x R = x + a ((cos - 1) e0 + sin w) + c ((cos - 1) w - sin e0)
        row[0] += a * cm1 - c * sn;
        for (int j = j0; j < n; j++) row[j] += (a * sn + c * cm1) * w[j];
    }
    return x;
}
