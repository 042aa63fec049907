// PRAC options and the LAPACK-based CPU refresh.
#include <lapacke.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "prac/philox.h"
#include "prac/prac.h"

const char* prac_mode_name(PracMode m) {
    switch (m) {
        case PracMode::NONE: return "none";
        case PracMode::PAC: return "pac";
        case PracMode::RAC: return "rac";
        case PracMode::PRAC: return "prac";
    }
    return "?";
}

PracMode prac_mode_parse(const std::string& s) {
    for (PracMode m : {PracMode::NONE, PracMode::PAC, PracMode::RAC, PracMode::PRAC})
        if (s == prac_mode_name(m)) return m;
    fail("--prac must be none, pac, rac or prac (got \"%s\")", s.c_str());
}

int prac_round_rank(float frac, int n) {
    if (frac <= 0) return 0;
    int r = (int)std::floor(frac * n / 8.0f) * 8;
    return r < 8 ? 8 : r;
}

SiteDims prac_site_dims(const PracOptions& o, SiteClass cls, int n, const std::string& site) {
    SiteDims d;
    bool lin = cls == SiteClass::LINEAR;
    if (o.rso_rank > 0) {  // --optimizer rso: linear sites store X·P of the optimizer's basis (prac.h)
        if (o.mode != PracMode::NONE)
            fail("--optimizer rso stores its own projections of the linear layers' inputs and cannot be combined "
                 "with --prac %s\n---> HINT: use --prac none with --optimizer rso", prac_mode_name(o.mode));
        if (!lin) return d;
        if (o.rso_rank >= n)
            fail("RSO rank %d is not below the width %d of site %s (the input of a linear layer)\n---> HINT: lower "
                 "--rso-rank below %d", o.rso_rank, n, site.c_str(), n);
        d.compressed = true;
        d.r2 = o.rso_rank;
        return d;
    }
    if (o.mode == PracMode::NONE || (lin && !o.linear) || (!lin && !o.nonlinear)) return d;
    int abs1 = lin ? o.linear_r1_abs : o.nonlinear_r1_abs, abs2 = lin ? o.linear_r2_abs : o.nonlinear_r2_abs;
    int r1 = abs1 >= 0 ? abs1 : prac_round_rank(lin ? o.linear_r1 : o.nonlinear_r1, n);
    int r2 = abs2 >= 0 ? abs2 : prac_round_rank(lin ? o.linear_r2 : o.nonlinear_r2, n);
    const char* cname = lin ? "linear" : "nonlinear";
    if (o.mode == PracMode::PAC) {
        r1 += r2;  // equal total rank, all of it principal
        r2 = 0;
    } else if (o.mode == PracMode::RAC) {
        r2 += r1;  // equal total rank, all of it random
        r1 = 0;
    }
    if (r1 + r2 == 0)
        fail("PRAC site %s (%s, width %d): total rank is 0%s\n---> HINT: raise the %s ranks", site.c_str(), cname, n,
             o.mode == PracMode::RAC ? " (mode rac draws all of r1 + r2 at random: it needs r1 + r2 > 0)" : "", cname);
    if (r1 + r2 >= n)
        fail("PRAC site %s (%s, width %d): ranks r1 = %d + r2 = %d leave nothing to compress (must be below %d)\n"
             "---> HINT: lower the %s rank fractions or absolute ranks", site.c_str(), cname, n, r1, r2, n, cname);
    if (o.mode == PracMode::PRAC && r2 == 0)
        fail("PRAC site %s (%s, width %d): mode prac needs r2 > 0 (r2 = 0 is mode pac)\n"
             "---> HINT: use --prac pac, or a positive r2", site.c_str(), cname, n);
    if (!(o.k_mult > 0))
        fail("PRAC site %s: the k multiplier (--prac-k-mult) must be positive (got %g)", site.c_str(), o.k_mult);
    d.compressed = true;
    d.r1 = r1;
    d.r2 = r2;
    d.k = r2 > 0 ? o.k_mult * (float)(n - r1) / (float)r2 : 1.0f;
    return d;
}

void prac_gaussian_cpu(float* S, int n, int cols, int ld, const PracDrawKey& key) {
    // key: the run seed; stream: (site, layer, purpose) in the high word, the refresh index in the low word
    uint32_t k0 = (uint32_t)key.seed, k1 = (uint32_t)(key.seed >> 32);
    uint32_t stream_hi = (key.site << 24) | ((key.layer & 0xFFFFFu) << 4) | (key.purpose & 0xFu);
    uint32_t stream_lo = (uint32_t)key.refresh;
    size_t total = (size_t)n * cols;
#pragma omp parallel for
    for (size_t b = 0; b < (total + 3) / 4; b++) {
        double z[4];
        philox_normal4(k0, k1, stream_hi, stream_lo, b, z);
        for (int j = 0; j < 4 && 4 * b + j < total; j++) {
            size_t e = 4 * b + j;
            S[(e / cols) * ld + e % cols] = (float)z[j];
        }
    }
}

static bool all_finite(const float* x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(x[i])) return false;
    return true;
}

// Orthonormal basis of Y (n, c) in place (leading dimension ld), through Householder QR. Returns LAPACK's info
// (or -1000 for non-finite input/output).
static int orthonormalize(float* Y, int n, int c, int ld) {
    if (c == 0) return 0;
    std::vector<float> tau(c);
    int info = LAPACKE_sgeqrf(LAPACK_ROW_MAJOR, n, c, Y, ld, tau.data());
    if (info == 0) info = LAPACKE_sorgqr(LAPACK_ROW_MAJOR, n, c, c, Y, ld, tau.data());
    if (info == 0) {
        for (int i = 0; i < n; i++)
            if (!all_finite(Y + (size_t)i * ld, c)) return -1000;
    }
    return info;
}

int prac_random_basis_cpu(float* Q, int n, int r, const PracDrawKey& key) {
    prac_gaussian_cpu(Q, n, r, r, key);
    return orthonormalize(Q, n, r, r);
}

// Y (n, c, ld) -= Q (n, q, ldq) @ (Q^T Y)
static void project_out(float* Y, int n, int c, int ld, const float* Q, int q, int ldq) {
    if (q == 0 || c == 0) return;
    std::vector<float> t((size_t)q * c);
    gemm_cpu(true, false, q, c, n, 1.0f, Q, ldq, Y, ld, 0.0f, t.data(), c);
    gemm_cpu(false, false, n, c, q, -1.0f, Q, ldq, t.data(), c, 1.0f, Y, ld);
}

PracRefreshResult prac_refresh_cpu(float* P, const float* x, int N, int n, const SiteDims& d, bool refresh_q1,
                                   bool refresh_q2, bool had_basis, const PracDrawKey& key,
                                   const GramReducer* reduce_gram) {
    PracRefreshResult res;
    int r1 = d.r1, r2 = d.r2, r = d.r();
    std::vector<float> fresh((size_t)n * r);  // the new P, written where a part succeeds
    for (int i = 0; i < n; i++) std::memcpy(&fresh[(size_t)i * r], P + (size_t)i * r, (size_t)r * sizeof(float));
    bool q1_changed = false;

    if (r1 > 0 && (refresh_q1 || !had_basis)) {
        // G (n, n) = xᵀx accumulated in fp32; ssyevd returns eigenvalues ascending, eigenvectors as columns
        std::vector<float> G((size_t)n * n), w(n);
        cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, n, N, 1.0f, x, n, 0.0f, G.data(), n);
        if (reduce_gram) (*reduce_gram)(G.data(), G.size());
        int info = all_finite(G.data(), G.size()) ? LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, G.data(), n, w.data())
                                                  : -1000;
        if (info == 0 && all_finite(G.data(), G.size())) {
            for (int i = 0; i < n; i++)
                for (int j = 0; j < r1; j++) fresh[(size_t)i * r + j] = G[(size_t)i * n + (n - 1 - j)];
            q1_changed = true;
        } else {
            res.q1_ok = false;
            res.message = format("Q1 refresh failed (ssyevd info %d%s)", info, info == -1000 ? ", non-finite input" : "");
            if (!had_basis) {
                // no previous Q1: a random orthonormal Q1 keeps the estimator unbiased
                PracDrawKey k1 = key;
                k1.purpose = PRAC_DRAW_Q1_FALLBACK;
                prac_gaussian_cpu(fresh.data(), n, r1, r, k1);
                orthonormalize(fresh.data(), n, r1, r);
                res.message += "; no previous basis, using a random Q1";
                q1_changed = true;
            } else {
                res.message += "; keeping the previous basis";
            }
        }
    }
    if (r2 > 0 && (refresh_q2 || q1_changed || !had_basis)) {
        float* Q2 = fresh.data() + r1;
        prac_gaussian_cpu(Q2, n, r2, r, key);
        res.q2_drawn = true;
        // twice is enough: after two projections Q2 ⟂ Q1 to fp32 precision
        project_out(Q2, n, r2, r, fresh.data(), r1, r);
        project_out(Q2, n, r2, r, fresh.data(), r1, r);
        int info = orthonormalize(Q2, n, r2, r);
        if (info == 0) {
            float s = std::sqrt(d.k);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < r2; j++) Q2[(size_t)i * r + j] *= s;
        } else {
            res.q2_ok = false;
            std::string m = format("Q2 refresh failed (QR info %d)", info);
            if (q1_changed && had_basis) {
                // the old Q2 is not orthogonal to the new Q1: keep the whole previous basis
                for (int i = 0; i < n; i++)
                    std::memcpy(&fresh[(size_t)i * r], P + (size_t)i * r, (size_t)r * sizeof(float));
                m += "; keeping the previous Q1 and Q2";
            } else {
                for (int i = 0; i < n; i++)
                    std::memcpy(&fresh[(size_t)i * r + r1], P + (size_t)i * r + r1, (size_t)r2 * sizeof(float));
                m += "; keeping the previous Q2";
            }
            res.message += (res.message.empty() ? "" : "; ") + m;
        }
    }
    std::memcpy(P, fresh.data(), fresh.size() * sizeof(float));
    res.q1_changed = q1_changed && res.q2_ok;  // a failed Q2 after a new Q1 restored the whole previous basis
    return res;
}
