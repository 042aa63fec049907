// PRAC: options, per-site ranks, and the CPU twins of the site ops.
//
// A site is one activation tensor X (N, n) saved for backward. PRAC stores Xc = X·P (N, r), r = r1 + r2, with
//   P = [Q1 | sqrt(k)·Q2]   (n, r):  Q1 (n, r1) top right singular vectors of X (top eigenvectors of XᵀX),
//                                    Q2 (n, r2) orthonormal basis of a Gaussian draw projected out of Q1,
//                                    k = k_mult · (n - r1) / r2
// and rebuilds X~ = Xc·Pᵀ = X·Q1·Q1ᵀ + k·X·Q2·Q2ᵀ, an unbiased estimate of X over the draw of Q2 (the paper's
// Theorem 1; its P is ours). Keeping sqrt(k) inside P makes compress, reconstruct and the factored weight
// gradient one GEMM each over one basis buffer. Linear sites never rebuild X: dW = dYᵀ·X~ = (dYᵀ·Xc)·Pᵀ.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/matmul.h"

enum class PracMode { NONE, PAC, RAC, PRAC };
// How a refresh finds Q1: EXACT = the full eigendecomposition of the Gram matrix; SUBSPACE = warm-started
// subspace iteration on the Gram matrix (prac_refresh_cpu below), O(n^2 (r1 + p)) instead of O(n^3).
enum class PracRefresh { EXACT, SUBSPACE };
const char* prac_refresh_name(PracRefresh m);
PracRefresh prac_refresh_parse(const std::string& s);  // "exact" | "subspace"; UserError otherwise
enum class SiteClass { LINEAR, NONLINEAR };

const char* prac_mode_name(PracMode m);
PracMode prac_mode_parse(const std::string& s);  // "none" | "pac" | "rac" | "prac"; UserError otherwise
// How the packed projections Xc = X·P are stored: ACT in the activation dtype (bf16 in the CUDA bf16 build, fp32 in
// the CPU backend and the fp32 build); FP8: e4m3 codes with a per-row fp32 scale, stochastically rounded (prac/fp8.h,
// prac_fp8_quantize_cpu below), about half the bytes of bf16.
enum class PracStorage { ACT, FP8 };
const char* prac_storage_name(PracStorage s);
PracStorage prac_storage_parse(const std::string& s);  // "act" | "fp8"; UserError otherwise

struct PracOptions {
    PracMode mode = PracMode::NONE;
    // ranks as fractions of the site's width (paper: linear 0.3 + 0.3, nonlinear 0.2 + 0.2), rounded down
    // to a multiple of 8 (at least 8); an absolute rank >= 0 overrides the fraction
    float linear_r1 = 0.3f, linear_r2 = 0.3f, nonlinear_r1 = 0.2f, nonlinear_r2 = 0.2f;
    int linear_r1_abs = -1, linear_r2_abs = -1, nonlinear_r1_abs = -1, nonlinear_r2_abs = -1;
    int t1 = 500, t2 = 500;  // refresh intervals (steps) of Q1 and Q2; Q2 is also redrawn whenever Q1 changes
    // true: each (site, layer) refreshes on its own phase of T1 / T2 (PracSchedule), so a step refreshes at most
    // ceil(sites x layers / T) of them instead of all at once; false: every one on steps that are multiples of T
    bool stagger = true;
    // > 1: the sites' first refreshes are spread over the first K = min(initial_spread, sites x layers) steps
    // (PracSchedule::first_refresh), ceil(sites x layers / K) per step instead of all on the first step; until its
    // first refresh a (site, layer) compresses with a provisional random orthonormal basis (unbiased, more
    // variance). 0 or 1: every first refresh on the first step. The trainers' default is their warmup's steps
    // (--prac-initial-spread auto); the struct's, 0
    int initial_spread = 0;
    // D >= 1 (--prac-refresh-overlap D): a refresh of a (site, layer) that already has a basis, due on step s, is
    // computed from step s's activations but takes effect at the end of step s + D - 1 (ActSite::install_refreshes),
    // so steps s .. s + D - 1 compress with the basis they started with. The CUDA backend solves it on a worker thread
    // with its own stream meanwhile, instead of stalling step s at that site. Each refresh in flight costs one
    // pending copy (n, r) (prac_overlap_slots); D <= T1, T2. 0: off (every refresh in place, on its step).
    int overlap = 0;
    PracRefresh refresh = PracRefresh::SUBSPACE;
    float k_mult = 1.0f;     // k = k_mult * (n - r1) / r2 (the paper's k ablation; 1 = unbiased)
    bool linear = true, nonlinear = true;  // which site classes are compressed
    uint64_t seed = 42;
    PracStorage storage = PracStorage::ACT;  // of the packed projections of every compressed site
    // > 0: the run uses --optimizer rso (train/optim_rso.h) and mode is none. Every linear site then stores
    // X·P (N, rso_rank) with P the optimizer's random basis of the consuming weight's input space (k = 1, no
    // principal part); nonlinear sites stay exact. The sites never draw these bases themselves.
    int rso_rank = 0;
};

// What a mode uses, for the notices of flags that change nothing and the resume key that leaves them out (one
// predicate for both): pac keeps no random part (no Q2, no k), rac computes no Q1 (no T1, no --prac-refresh). With
// --prac-refresh-overlap every mode uses both intervals, which bound its delay and size its pending slots.
inline bool prac_uses_t1(PracMode m, bool overlap) { return m != PracMode::NONE && (m != PracMode::RAC || overlap); }
inline bool prac_uses_t2(PracMode m, bool overlap) { return m != PracMode::NONE && (m != PracMode::PAC || overlap); }
inline bool prac_uses_k(PracMode m) { return m == PracMode::RAC || m == PracMode::PRAC; }
inline bool prac_uses_q1(PracMode m) { return m == PracMode::PAC || m == PracMode::PRAC; }

// The first refreshes' spread: K = min(PracOptions::initial_spread, units) steps, 0 when there is none (PracSchedule,
// prac/site.h).
inline int prac_spread_steps(int initial_spread, int units) {
    return initial_spread > 1 ? (initial_spread < units ? initial_spread : units) : 0;
}

// --prac-refresh-overlap D: the most (site, layer) units with a refresh in flight, D times what one step begins
// (PracSchedule: with stagger at most ceil(units / T) units share a phase of T, one set for T1 and one for T2 unless
// they are equal, plus ceil(units / K) first refreshes when those are spread over K steps; without stagger every
// unit at once), and never more than the units (a unit's next refresh installs its pending one first).
int prac_overlap_slots(const PracOptions& o, int units);

// Ranks and scale of one site, after the mode is applied:
//   prac: r1, r2 from the class;  pac: r1 = r1 + r2, r2 = 0 (equal total rank, biased);
//   rac: r1 = 0, r2 = r1 + r2, k = k_mult * n / r2;  none, or class not compressed: compressed = false.
// The subspace refresh's parameters (PracRefresh::SUBSPACE): the block has b = min(r1 + oversample(r1), n)
// columns; a warm start (the previous Q1 plus b - r1 Gaussian columns) takes warm_iters power steps V = orth(G V),
// a cold start (b Gaussian columns) cold_iters; then one Nyström extraction (one more multiplication by G).
// Chosen by the quality tests (test_prac_refresh.cpp PracSubspace*: tail energy within 2% of the optimum's on
// synthetic spectra; test_npy_analyze.cpp SubspaceRefreshOnRealActivations: within 2% of the exact refresh's on
// real activations, where one warm step left 1.0194x on gpt2-mini's fch_gelu, too close to the bar, and two leave
// 1.0074x); see docs/DESIGN.md section 4.3.
struct PracSubspaceParams {
    int warm_iters = 2, cold_iters = 4;
    bool nystrom = true;  // false: a Rayleigh-Ritz step on V instead (Q1 within span(V): the tests' poorer Q1)
    // when CholQR2 fails, at most this many shifted Cholesky-QR passes (prac_shifted_cholqr_rel), each followed by
    // a CholQR2 attempt, before Householder QR (0: Householder at once). One pass divides κ by up to
    // 1/sqrt(prac_shifted_cholqr_rel): about 80 at n = 2048, 35 at n = 10922 (r1 = 0.3 n); llama-130m's fch_act
    // dump needed all three (one block's κ beyond 1/u), the mini sites' dumps one.
    int shifted_passes = 3;
    static int oversample(int r1) { return r1 / 8 > 16 ? r1 / 8 : 16; }
};

struct SiteDims {
    bool compressed = false;
    bool fp8 = false;  // the packed projections are stored as e4m3 (PracStorage::FP8)
    int r1 = 0, r2 = 0;
    float k = 1.0f;
    PracRefresh refresh = PracRefresh::SUBSPACE;  // how Q1 is found (copied from PracOptions)
    bool random_q1 = false;  // this refresh draws Q1 at random instead (a provisional basis:
                             // PracOptions::initial_spread)
    PracSubspaceParams subspace;
    // columns of the subspace block (0 when the refresh is exact or the site has no Q1: then Q1 is exact)
    int block(int n) const {
        if (refresh != PracRefresh::SUBSPACE || r1 == 0) return 0;
        int b = r1 + PracSubspaceParams::oversample(r1);
        return b < n ? b : 0;  // a block as wide as the site: the exact eigensolver is no dearer
    }
    int r() const { return r1 + r2; }
};
// Throws UserError for impossible ranks (above the width, rac with r2 = 0, ...), naming the site.
SiteDims prac_site_dims(const PracOptions& o, SiteClass cls, int n, const std::string& site_name);
int prac_round_rank(float frac, int n);


// ---- CPU twins (fp32; the CUDA backend has the same argument order) ----
// The full activation's rows may sit at a padded stride (LLaMA's F-wide sites, ModelConfig::hidden_stride): a
// trailing ld_x / ld_dy in elements, 0 meaning contiguous (n, or OC), as the matmul twins (kernels/matmul.h).

// xc (N, r) = x (N, n) @ P (n, r); x rows at stride ld_x
template <typename T>
void prac_compress_cpu(T* xc, const T* x, const T* P, int N, int n, int r, int ld_x = 0) {
    gemm_cpu(false, false, N, r, n, T(1), x, ld_x ? ld_x : n, P, r, T(0), xc, r);
}

// x (N, n) = xc (N, r) @ P (n, r)^T; x rows at stride ld_x (its pad columns are not written)
template <typename T>
void prac_reconstruct_cpu(T* x, const T* xc, const T* P, int N, int n, int r, int ld_x = 0) {
    gemm_cpu(false, true, N, n, r, T(1), xc, r, P, r, T(0), x, ld_x ? ld_x : n);
}

// Factored weight gradient of a linear layer whose input was saved compressed:
// dW (OC, n) += (dY (N, OC)^T @ xc (N, r)) @ P^T, through tmp (OC, r); dbias (OC) += column sums of dY.
// Same value as matmul_backward_weight_cpu with the reconstructed input, in 2·N·OC·r + 2·OC·r·n FLOPs
// instead of 2·N·r·n + 2·N·OC·n. dY rows at stride ld_dy.
template <typename T>
void prac_weight_grad_cpu(T* dW, T* dbias, const T* dY, const T* xc, const T* P, int N, int n, int r, int OC, T* tmp,
                          int ld_dy = 0) {
    ld_dy = ld_dy ? ld_dy : OC;
    gemm_cpu(true, false, OC, r, N, T(1), dY, ld_dy, xc, r, T(0), tmp, r);
    gemm_cpu(false, true, OC, n, r, T(1), tmp, r, P, r, T(1), dW, n);
    if (dbias) {
#pragma omp parallel for
        for (int o = 0; o < OC; o++) {
            T s = 0;
            for (int i = 0; i < N; i++) s += dY[(size_t)i * ld_dy + o];
            dbias[o] += s;
        }
    }
}

// The random part's key: the same (seed, site, layer, refresh) gives the same draw on every backend.
struct PracDrawKey {
    uint64_t seed;
    uint32_t site;     // site id within the model (< 256)
    uint32_t layer;    // (< 2^20)
    uint64_t refresh;  // how many Q2 draws this (site, layer) had before (< 2^32)
    uint32_t purpose = 0;  // which matrix: PRAC_DRAW_Q2, or PRAC_DRAW_Q1_FALLBACK (never the same stream)
};
constexpr uint32_t PRAC_DRAW_Q2 = 0, PRAC_DRAW_Q1_FALLBACK = 1, PRAC_DRAW_RSO = 2;
// The fp8 storage's rounding bits: key.refresh counts the site's earlier fp8 saves of that layer (ActSite::fp8_saves)
constexpr uint32_t PRAC_DRAW_FP8_ROUNDING = 4;

// The Philox key and stream words of a draw (prac/philox.h), the same on every backend: key = the run seed; stream
// = (site, layer, purpose) in the high word, the refresh index in the low word.
struct PracPhiloxWords {
    uint32_t k0, k1, stream_hi, stream_lo;
};
inline PracPhiloxWords prac_philox_words(const PracDrawKey& key) {
    return {(uint32_t)key.seed, (uint32_t)(key.seed >> 32),
            (key.site << 24) | ((key.layer & 0xFFFFFu) << 4) | (key.purpose & 0xFu), (uint32_t)key.refresh};
}

// ---- fp8 storage (PracStorage::FP8; the format, scale and rounding: prac/fp8.h) ----
// q (N, r) e4m3 codes and scale (N) of xc (N, r): row i is multiplied by 2^k_i (fp8_row_exponent of its largest
// finite |value|; exact), stochastically rounded (fp8_e4m3_sr) with 32-bit word (row0 + i)·r + j of the key's
// Philox stream for element (i, j) (row0: where these rows start in the site's (N, r), so that the bits do not
// depend on how the rows are split into calls), and scale[i] = 2^-k_i. NaN and ±Inf become the NaN code.
void prac_fp8_quantize_cpu(uint8_t* q, float* scale, const float* xc, int N, int r, uint64_t row0,
                           const PracDrawKey& key);
// xc (N, r) = decode(q) · scale per row (exact: at most 4 significant bits times a power of two)
void prac_fp8_dequantize_cpu(float* xc, const uint8_t* q, const float* scale, int N, int r);
// Rows of the fp8 storage's shared scratch (ActSite::fp8_rows): compress and reconstruct run through it in blocks
// of this many rows (the GEMMs stay large; the scratch is small next to a packed tensor).
constexpr int PRAC_FP8_BLOCK_ROWS = 8192;

// S (n, cols) with ld: element (i, j) is normal number i * cols + j of the key's Philox stream.
void prac_gaussian_cpu(float* S, int n, int cols, int ld, const PracDrawKey& key);

// How many times the Q2 draw (both backends) projects its Gaussian S (n, r2) out of Q1 (n, r1). A projection leaves
// a residual in span(Q1) of a few u·‖S‖; CholQR then multiplies by R⁻¹, amplifying it by ‖S‖ / σ_min(S - Q1Q1ᵀS).
// For r1 ≤ n/2 and r2 ≤ (n - r1)/2 a Gaussian in the complement has σ_min ≥ (1 - sqrt(1/2))·sqrt(n - r1) on
// average, so one pass leaves Q1ᵀQ2 at a few u (≤ 2 u·κ measured): PRAC's ranks (r1 = r2 = 0.3 n) save a third of
// the draw's FLOPs. Otherwise (a near-square complement, e.g. r2 = n - r1) twice, which is enough for any S.
inline int prac_q2_projection_passes(int n, int r1, int r2) { return 2 * r1 <= n && 2 * r2 <= n - r1 ? 1 : 2; }

// The subspace refresh's shifted Cholesky-QR (Fukaya et al., SIAM J. Sci. Comput. 2020), both backends: when CholQR2
// of Q (n, c) fails, QᵀQ + s I is factored instead, s = this · tr(QᵀQ) = (n + c + 1)·u·‖Q‖_F²: of the order of
// the fp32 Gram matrix's rounding error (γ_n ‖Q‖_F² entrywise) and of its Cholesky factorization's, so that it
// factors where the unshifted one cannot (no guarantee: should it fail, Householder QR takes over).
// (The paper's proven shift is about 11 (n c + c²) u ‖Q‖², more than ‖Q‖² itself at our sizes in fp32. Measured on
// real activations: on the mini sites' dumps, shifts from 1e-6 to 1e-2 of the trace all took one pass; on
// llama-130m's fch_act this one, 1.6e-4 there, takes three passes, a hundredth of it two, ten times it fails.)
inline double prac_shifted_cholqr_rel(int n, int c) { return (n + c + 1) * 5.96e-8; }

// Q (n, r): a random orthonormal basis (Haar-distributed), the QR of the key's Gaussian draw: what Q2 is for a
// site without a principal part. Returns LAPACK's info (0 on success).
int prac_random_basis_cpu(float* Q, int n, int r, const PracDrawKey& key);

// Refresh of one site's basis from the full activation x (N, n), writing P (n, r) in place:
//   refresh_q1: Q1 = top-r1 eigenvectors of the fp32 Gram matrix G = xᵀx (never an SVD of x), either
//               exact (d.refresh EXACT, or d.block(n) == 0: LAPACK ssyevd on G) or by subspace iteration
//               (SUBSPACE: V (n, b) = orth([previous Q1 | Gaussian]) when had_basis, else orth(Gaussian);
//               V = orth(G V) warm_iters / cold_iters times; then Q1 = the top r1 eigenvectors of the Nyström
//               approximation from Y = G V, or Rayleigh-Ritz on V when that fails; orth is CholQR2, shifted
//               Cholesky-QR when that fails, Householder QR when both do). Any orthonormal Q1 keeps PRAC unbiased (Q2
//               below is uniform in its complement); a worse Q1 only leaves more tail energy ‖x‖² − ‖x Q1‖², i.e.
//               more variance.
//   refresh_q2: Q2 = orth(S - Q1 Q1ᵀ S), Gaussian S from the key, the projection applied
//               prac_q2_projection_passes times (Q2 orthogonal to Q1 to fp32 precision), orth by CholQR2
//               (Householder QR, sgeqrf + sorgqr, of the same projected S when that fails); scaled by sqrt(k).
//   d.random_q1: Q1 = a random orthonormal basis instead (the key's PRAC_DRAW_Q1_FALLBACK draw, orthonormalized; x
//               is not read), with Q2 drawn in its complement as above: a provisional basis, unbiased like any other.
// A step that fails (solver info != 0, non-finite values) keeps that part of the previous P and is reported
// in the result; `had_basis` false means P holds no basis yet, and a failed Q1 then falls back to a random
// orthonormal Q1 (PRAC stays unbiased for any Q1). x rows at stride ld_x (0: n).
struct PracRefreshResult {
    bool q1_ok = true, q2_ok = true;
    bool q1_changed = false;  // P's Q1 block was replaced (a new eigenbasis, or the random fallback)
    bool q2_drawn = false;    // a Q2 draw consumed this key (whether or not its QR succeeded)
    bool q2_householder = false;  // its CholQR2 failed (a near-singular projected draw): Householder QR took over
    // the subspace refresh's orthonormalizations whose CholQR2 failed, taken over by shifted Cholesky-QR / by
    // Householder QR, and the shifted passes they made (diagnostics of speed, not of quality: checkpoints do not
    // carry them)
    int q1_shifted_qr = 0, q1_householder_qr = 0, q1_shifted_passes = 0;
    size_t workspace_bytes = 0;  // host bytes this call allocated (prac_refresh_cpu_workspace_bytes)
    std::string message;      // what failed, for the log
};
// reduce_gram (optional): called on the fp32 Gram matrix (n x n) before the eigensolver (a host pointer on the
// CPU backend, a device pointer on the CUDA backend); data parallelism's shared-subspace option averages it over
// the ranks there, so every rank computes the same Q1.
typedef std::function<void(float* gram, size_t n)> GramReducer;
constexpr uint32_t PRAC_DRAW_Q1_SUBSPACE = 3;  // the subspace refresh's Gaussian columns (PracDrawKey::purpose)
// Host bytes prac_refresh_cpu allocates for a site of width n (all of its buffers and LAPACK's work arrays,
// whatever the call refreshes); what the memory planner reports as the CPU's refresh workspace.
size_t prac_refresh_cpu_workspace_bytes(int n, const SiteDims& d);
PracRefreshResult prac_refresh_cpu(float* P, const float* x, int N, int n, const SiteDims& d, bool refresh_q1,
                                   bool refresh_q2, bool had_basis, const PracDrawKey& key,
                                   const GramReducer* reduce_gram = nullptr, int ld_x = 0);
