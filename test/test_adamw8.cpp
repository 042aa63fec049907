// Tests of 8-bit AdamW states (kernels/adamw8.h, train/optim_adamw.h with AdamStates::Q8).
//
// The reference is this file's own float64 implementation, built from the definition (Dettmers et al. 2022, the
// dynamic tree code; kernels/adamw8.h's head states our choices): the code values enumerated by decade and
// fraction, quantization as the nearest reference value (argmin over all 256 codes) of x / absmax in double, and
// AdamW in double on the dequantized moments. One exception to nearest, in the reference as in the kernel: a positive
// v takes the smallest code rather than 0 (kernels/adamw8.h says why).
//   - The code tables: every value against the reference (float rounding of it: 2^-24 relative), monotone, the
//     signed one in [-1, 1] and the unsigned one in [0, 1], 0 and 1 exact, every code value encodes to itself.
//   - Quantization: the kernel's code equals the reference's nearest code except where x / absmax lies within
//     4 float ulps of a midpoint between two neighbouring codes (float thresholds and a float division against
//     double ones); such cases must pick one of the two neighbours and are counted (expected: none or a few).
//   - One update step at a time from the kernel's own state (so that a tie decided differently cannot carry over):
//     new parameters within 3e-6 lr of the reference's step beyond p's own rounding (float AdamW against double:
//     steps are <= 5 lr (checked below) and carry ~8 roundings of 2^-24 each: dequantization products, m, v,
//     sqrt, division, multiply, subtract: 5 x 8 x 6e-8 = 2.4e-6), absmax within 2^-22 relative, codes as above. The gradients include entries 1e-3 and 1e-7 of the block's largest: v
//     below the smallest code, where plain nearest rounding would make the step m / eps.
//   - A small least-squares problem trained 60 steps with 8-bit and with fp32 AdamW: the tolerance is the
//     quantizer's worst case, see TrajectoryStaysCloseToFp32AdamW.
//   - Checkpoint tensors: a copy of the state continues bit for bit; the planner's bytes are the allocation.
//   - Tensors of fewer than 4096 elements keep fp32 moments (bitsandbytes' min_8bit_size): their updates are fp32
//     AdamW's bit for bit, the others' those of states 8-bit throughout; a checkpoint of every tensor 8-bit is refused.
// Runs in well under a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/adamw8.h"
#include "kernels/cpu_backend.h"
#include "train/optimizers.h"
#include "train/run_checkpoint.h"  // refuse_adamw8_of_every_tensor
#include "test/test_util.h"        // EXPECT_USER_ERROR
#include "test/worst.h"            // worst_of

namespace {

using fvec = std::vector<float>;

// ---- the float64 reference ----

// value of every code byte, from the definition: enumerate decades E and fraction indices j, build the byte
// [sign][E zeros][1][F bits of j] and its value sign * 10^-E * (0.1 + 0.9 (j + 1) / 2^F)
std::vector<double> reference_code(bool is_signed) {
    std::vector<double> value(256, std::nan(""));
    const int bits = is_signed ? 7 : 8;  // bits after the sign
    value[0] = 0.0;
    if (is_signed) value[0x80] = 0.0;  // -0
    for (int E = 0; E < bits; E++) {
        const int F = bits - 1 - E;
        double decade = 1.0;
        for (int e = 0; e < E; e++) decade /= 10.0;
        for (int j = 0; j < (1 << F); j++) {
            const int body = (1 << F) | j;  // the indicator 1 after E zeros, then j
            const double mag = decade * (0.1 + 0.9 * (j + 1) / (double)(1 << F));
            value[body] = mag;
            if (is_signed) value[0x80 | body] = -mag;
        }
    }
    return value;
}

// the nearest reference code to y (argmin |y - value|; the first of equals), and whether y is within `ulps` float
// ulps of the midpoint between the two nearest distinct values (a tie a float computation may decide either way)
struct Nearest {
    int code;
    int second;  // the other neighbour
    bool near_tie;
};
Nearest reference_nearest(const std::vector<double>& value, double y) {
    int best = 0, second = -1;
    for (int c = 1; c < 256; c++)
        if (std::fabs(y - value[c]) < std::fabs(y - value[best])) best = c;
    const bool is_unsigned = value[0x80] > 0;
    if (is_unsigned && y > 0 && best == 0) return {1, 1, false};  // the one exception: v > 0 is never 0's code
    for (int c = 0; c < 256; c++) {
        if (value[c] == value[best]) continue;
        if (second < 0 || std::fabs(y - value[c]) < std::fabs(y - value[second])) second = c;
    }
    const double mid = 0.5 * (value[best] + value[second]);
    const double ulp = std::max(std::fabs(mid), 1e-30) * std::ldexp(1.0, -23);
    return {best, second, std::fabs(y - mid) <= 4 * ulp};
}

struct RefQuant {
    std::vector<uint8_t> codes;
    double absmax;
};
RefQuant reference_quantize(const std::vector<double>& value, const std::vector<double>& x) {
    RefQuant q{std::vector<uint8_t>(x.size()), 0.0};
    for (double e : x) q.absmax = std::max(q.absmax, std::fabs(e));
    for (size_t i = 0; i < x.size(); i++)
        q.codes[i] = (uint8_t)reference_nearest(value, q.absmax > 0 ? x[i] / q.absmax : 0.0).code;
    return q;
}

// kernel code k for y against the reference: equal, or a near tie decided for the other neighbour
struct CodeCheck {
    size_t mismatches = 0, ties_other_way = 0;
    void add(const std::vector<double>& value, double y, uint8_t k) {
        Nearest r = reference_nearest(value, y);
        if (value[k] == value[r.code]) return;
        if (r.near_tie && value[k] == value[r.second]) ties_other_way++;
        else mismatches++;
    }
};

std::mt19937 rng(20261127);
double normal() {
    static std::normal_distribution<double> d(0.0, 1.0);
    return d(rng);
}

// ---- the code tables ----

TEST(AdamW8Codes, TablesAreTheirDefinition) {
    for (bool is_signed : {true, false}) {
        SCOPED_TRACE(is_signed ? "signed" : "unsigned");
        const DynamicCode& d = is_signed ? adamw8_codes().m : adamw8_codes().v;
        std::vector<double> ref = reference_code(is_signed);
        for (int c = 0; c < 256; c++) {
            ASSERT_FALSE(std::isnan(ref[c])) << "reference misses code " << c;
            EXPECT_LE(std::fabs(d.value[c] - ref[c]), std::fabs(ref[c]) * std::ldexp(1.0, -24)) << "code " << c;
        }
        // 0 and 1 exact, the range, the smallest magnitude: 10^-6 (signed) / 10^-7 (unsigned)
        EXPECT_EQ(d.value[0], 0.0f);
        float lo = 0, hi = 0, tiny = 1;
        for (int c = 0; c < 256; c++) {
            lo = std::min(lo, d.value[c]);
            hi = std::max(hi, d.value[c]);
            if (d.value[c] != 0) tiny = std::min(tiny, std::fabs(d.value[c]));
        }
        EXPECT_EQ(hi, 1.0f);
        EXPECT_EQ(lo, is_signed ? -1.0f : 0.0f);
        EXPECT_EQ(tiny, is_signed ? 1e-6f : 1e-7f);
        // monotone: unsigned in the byte; signed in the 7 bits of each sign, mirrored
        if (is_signed) {
            for (int c = 1; c < 128; c++) {
                EXPECT_GT(d.value[c], d.value[c - 1]) << c;
                EXPECT_EQ(d.value[0x80 | c], -d.value[c]) << c;
            }
        } else {
            for (int c = 1; c < 256; c++) EXPECT_GT(d.value[c], d.value[c - 1]) << c;
        }
        // the encoder's tables: thresholds ascending, and every code value encodes to a code of that value
        for (int k = 1; k < 255; k++) EXPECT_LE(d.threshold[k - 1], d.threshold[k]) << k;
        for (int c = 0; c < 256; c++) EXPECT_EQ(d.value[dynamic_code_encode(d, d.value[c])], d.value[c]) << c;
        // distinct values: 255 signed (+0 and -0 are one), 256 unsigned
        std::vector<float> v(d.value, d.value + 256);
        std::sort(v.begin(), v.end());
        EXPECT_EQ(std::unique(v.begin(), v.end()) - v.begin(), is_signed ? 255 : 256);
    }
}

// ---- quantization against the reference ----

TEST(AdamW8Codes, QuantizeIsTheNearestCodeOfAFloat64Reference) {
    const size_t n = ADAMW8_BLOCK;
    for (bool is_signed : {true, false}) {
        SCOPED_TRACE(is_signed ? "signed" : "unsigned");
        const DynamicCode& d = is_signed ? adamw8_codes().m : adamw8_codes().v;
        std::vector<double> ref = reference_code(is_signed);
        CodeCheck check;
        // Gaussian m (or squared: v), heavy tails (a log-uniform magnitude over 9 decades), exact zeros, all zeros
        for (int kind = 0; kind < 4; kind++) {
            fvec x(n);
            for (size_t i = 0; i < n; i++) {
                double g = normal();
                if (kind == 1) g = std::copysign(std::pow(10.0, -9.0 * std::uniform_real_distribution<>(0, 1)(rng)), g);
                if (kind == 2 && i % 3 == 0) g = 0;
                if (kind == 3) g = 0;
                x[i] = (float)(is_signed ? g : g * g);
            }
            std::vector<uint8_t> codes(n);
            float absmax = -1;
            dynamic_quantize_block(codes.data(), &absmax, x.data(), n, d);
            std::vector<double> xd(x.begin(), x.end());
            RefQuant r = reference_quantize(ref, xd);
            ASSERT_EQ((double)absmax, r.absmax) << "kind " << kind;  // a max of the same floats
            for (size_t i = 0; i < n; i++) check.add(ref, r.absmax > 0 ? xd[i] / r.absmax : 0.0, codes[i]);
            if (kind == 3)
                for (uint8_t c : codes) EXPECT_EQ(d.value[c], 0.0f);
        }
        EXPECT_EQ(check.mismatches, 0u);
        EXPECT_LE(check.ties_other_way, 4u);
        std::printf("%s: %zu near ties decided the other way of %zu\n", is_signed ? "signed" : "unsigned",
                    check.ties_other_way, 4 * n);
    }
}

// ---- the update step against the reference ----

// One AdamW step in double on dequantized moments, then the reference quantization; params in place.
void reference_adamw8_step(std::vector<double>& p, const fvec& g, const std::vector<uint8_t>& mc,
                           const std::vector<uint8_t>& vc, const fvec& ma, const fvec& va, double lr, double b1,
                           double b2, double eps, double wd, int t, double gs, std::vector<double>* m_new,
                           std::vector<double>* v_new) {
    static const std::vector<double> sref = reference_code(true), uref = reference_code(false);
    const size_t n = p.size();
    m_new->resize(n);
    v_new->resize(n);
    for (size_t i = 0; i < n; i++) {
        const size_t b = i / ADAMW8_BLOCK;
        double m = sref[mc[i]] * ma[b], v = uref[vc[i]] * va[b], gi = g[i] * gs;
        m = b1 * m + (1 - b1) * gi;
        v = b2 * v + (1 - b2) * gi * gi;
        p[i] = p[i] * (1 - lr * wd);
        const double mhat = m / (1 - std::pow(b1, t)), vhat = v / (1 - std::pow(b2, t));
        p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
        (*m_new)[i] = m;
        (*v_new)[i] = v;
    }
}

TEST(AdamW8, UpdateStepMatchesAFloat64Reference) {
    const size_t n = 2 * ADAMW8_BLOCK + 777;  // two whole blocks and a short one
    const size_t nb = 3;
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.8f;
    const std::vector<double> sref = reference_code(true), uref = reference_code(false);
    fvec p(n), g(n), ma(nb, 0.0f), va(nb, 0.0f);
    std::vector<uint8_t> mc(n, 0), vc(n, 0);
    for (float& e : p) e = (float)(0.05 * normal());
    CodeCheck cm, cv;
    double worst_p = 0, worst_scale = 0, worst_step = 0;
    for (int t = 1; t <= 6; t++) {
        for (size_t i = 0; i < n; i++)
            g[i] = (float)(normal() * (i % 5 == 0 ? 1e-3 : i % 7 == 0 ? 1e-7 : 1.0) * (i / ADAMW8_BLOCK + 1));
        std::vector<double> pr(p.begin(), p.end()), m_new, v_new;
        const fvec p_old = p;
        reference_adamw8_step(pr, g, mc, vc, ma, va, lr, b1, b2, eps, wd, t, gs, &m_new, &v_new);
        adamw8_update_cpu(p.data(), g.data(), mc.data(), vc.data(), ma.data(), va.data(), n, adamw8_codes(), lr, b1,
                          b2, eps, wd, t, gs);
        for (size_t i = 0; i < n; i++) {  // less p's own float rounding (2^-24 relative)
            worst_p = worst_of(worst_p, (std::fabs(p[i] - pr[i]) - std::ldexp(std::fabs(pr[i]), -24)) / lr);
            worst_step = worst_of(worst_step, std::fabs(p[i] - p_old[i] * (1.0 - lr * wd)) / lr);
        }
        for (size_t b = 0; b < nb; b++) {
            const size_t lo = b * ADAMW8_BLOCK, hi = std::min(n, lo + ADAMW8_BLOCK);
            double am = 0, av = 0;
            for (size_t i = lo; i < hi; i++) am = std::max(am, std::fabs(m_new[i])), av = std::max(av, v_new[i]);
            worst_scale = worst_of(worst_of(worst_scale, std::fabs(ma[b] - am) / am), std::fabs(va[b] - av) / av);
            for (size_t i = lo; i < hi; i++) {
                cm.add(sref, m_new[i] / am, mc[i]);
                cv.add(uref, v_new[i] / av, vc[i]);
            }
        }
    }
    EXPECT_LE(worst_p, 3e-6) << "parameter step vs the float64 reference, relative to lr";
    EXPECT_LE(worst_scale, std::ldexp(1.0, -22));
    // no step runs away: fp32 AdamW's |m̂| / sqrt(v̂) <= 2.6 at these betas (Cauchy-Schwarz on the two averages:
    // |m| <= (1 - b1) / sqrt((1 - b2)(1 - b1² / b2)) sqrt(v) = 1.165 sqrt(v), times the bias corrections' largest
    // ratio sqrt(1 - b2) / (1 - b1) = 2.236 at t = 1); the smallest v codes may round v down by up to 69% (3.25e-7 ->
    // 1e-7), x1.8 through the square root: 5 lr. Plain nearest rounding of v to 0 broke this (p jumped 12.3 = 1227 lr)
    EXPECT_LE(worst_step, 5.0);
    EXPECT_EQ(cm.mismatches, 0u);
    EXPECT_EQ(cv.mismatches, 0u);
    EXPECT_LE(cm.ties_other_way + cv.ties_other_way, 8u);
    std::printf("params %.3g lr, scales %.3g, largest step %.3g lr; near ties the other way: m %zu, v %zu of %zu\n",
                worst_p, worst_scale, worst_step, cm.ties_other_way, cv.ties_other_way, 6 * n);
}

// ---- 8-bit vs fp32 AdamW on a small problem ----

// Least squares: W (R, C) and b (R) fitted to Y = X Wtrueᵀ + btrue + noise from X (N, C), loss 0.5 mean ||.||².
struct LeastSquares {
    static constexpr int N = 128, C = 48, R = 40;
    std::vector<ParamSpec> specs;
    size_t n = 0;
    fvec X, Y;
    LeastSquares() {
        specs = {{"W", (size_t)0, (size_t)R * C, true}, {"b", align_up((size_t)R * C, 64), (size_t)R, false}};
        n = specs[1].offset + R;
        X.resize((size_t)N * C);
        Y.resize((size_t)N * R);
        fvec w((size_t)R * C), b(R);
        for (float& e : X) e = (float)normal();
        for (float& e : w) e = (float)(0.3 * normal());
        for (float& e : b) e = (float)normal();
        for (int s = 0; s < N; s++)
            for (int r = 0; r < R; r++) {
                double y = b[r] + 0.05 * normal();
                for (int c = 0; c < C; c++) y += (double)X[(size_t)s * C + c] * w[(size_t)r * C + c];
                Y[(size_t)s * R + r] = (float)y;
            }
    }
    // loss and gradient of params (n)
    double loss_grad(const fvec& p, fvec* g) const {
        g->assign(n, 0.0f);
        double loss = 0;
        for (int s = 0; s < N; s++)
            for (int r = 0; r < R; r++) {
                double e = p[specs[1].offset + r] - Y[(size_t)s * R + r];
                for (int c = 0; c < C; c++) e += (double)X[(size_t)s * C + c] * p[(size_t)r * C + c];
                loss += 0.5 * e * e / N;
                for (int c = 0; c < C; c++) (*g)[(size_t)r * C + c] += (float)(e * X[(size_t)s * C + c] / N);
                (*g)[specs[1].offset + r] += (float)(e / N);
            }
        return loss;
    }
};

// Both runs from the same start with the same schedule; each computes its own gradients (a closed loop, as in
// training). Tolerance: dequantization moves a moment by at most half a code gap. In decade 0 of the signed code
// (|m| >= 0.1 absmax) the gap is 0.9 / 64 of the absmax, so m's relative error is <= 0.45 / 64 / 0.1 = 7%; the
// unsigned code's gap is 0.9 / 128 (v's error <= 3.5%, halved by the square root: 1.8%). Every step's update is
// within ~9% of fp32's for the elements that carry it (smaller ones lie in lower decades and move the parameters
// less), and the parameter change Δ, a sum of such updates on a convex problem, stays within that: ||Δ8 - Δ32|| /
// ||Δ32|| <= 0.09 and the final losses within 9% of the loss drop (measured: 0.014-0.023). m dequantized at half
// its block's scale breaks both by far (0.59; checked by hand when this test was written).
TEST(AdamW8, TrajectoryStaysCloseToFp32AdamW) {
    LeastSquares ls;
    fvec p0(ls.n, 0.0f);
    for (size_t i = 0; i < (size_t)ls.R * ls.C; i++) p0[i] = (float)(0.02 * normal());
    CpuBackend be;
    AdamW<CpuBackend> q8(be, ls.specs, 0, ls.n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::Q8);
    AdamW<CpuBackend> f32(be, ls.specs, 0, ls.n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::F32);
    fvec pq = p0, pf = p0, g;
    const double loss0 = ls.loss_grad(p0, &g);
    double lq = 0, lf = 0;
    for (int step = 0; step < 60; step++) {
        const float lr = lr_schedule(step, 60, 6, 3e-2f, 0.1f);
        lq = ls.loss_grad(pq, &g);
        q8.step(pq.data(), g.data(), ls.specs, lr, 1.0f);
        lf = ls.loss_grad(pf, &g);
        f32.step(pf.data(), g.data(), ls.specs, lr, 1.0f);
    }
    lq = ls.loss_grad(pq, &g);
    lf = ls.loss_grad(pf, &g);
    double num = 0, den = 0;
    for (size_t i = 0; i < ls.n; i++) {
        num += std::pow((double)pq[i] - pf[i], 2);
        den += std::pow((double)pf[i] - p0[i], 2);
    }
    const double rel = std::sqrt(num / den);
    std::printf("loss %.5g -> fp32 %.5g, 8-bit %.5g; ||Δ8 - Δ32|| / ||Δ32|| = %.4f\n", loss0, lf, lq, rel);
    EXPECT_LT(lf, 0.2 * loss0);  // the problem is learned at all
    EXPECT_LE(rel, 0.09);
    EXPECT_LE(std::fabs(lq - lf), 0.09 * (loss0 - lf));
}

// ---- state, checkpoints, planner ----

// A copy of the state tensors (what a checkpoint stores: the codes as bytes, the scales as floats, the fp32 moments of
// the tensors that keep them: b here) continues bit for bit; the tensors are those a checkpoint names, and the
// allocation is the planner's formula.
TEST(AdamW8, StateTensorsResumeBitwiseAndBytesAreThePlanners) {
    LeastSquares ls;
    CpuBackend be;
    fvec p(ls.n, 0.0f), g;
    const std::vector<bool> fp32_b = {false, true};
    size_t before = be.live_bytes;
    auto a = std::make_unique<AdamW<CpuBackend>>(be, ls.specs, 0, ls.n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::Q8,
                                                 fp32_b);
    const size_t allocated = be.live_bytes - before;
    // W: 1920 elements -> 1 block; b: 40 fp32 moments
    EXPECT_EQ(a->layout.nblocks, 1u);
    EXPECT_EQ(allocated, 2 * 1920 + 2 * 1 * sizeof(float) + sizeof(AdamW8Codes) + 2 * 40 * sizeof(float));
    EXPECT_EQ(AdamW<CpuBackend>::state_bytes(AdamStates::Q8, ls.n, a->layout), allocated);
    for (int s = 0; s < 3; s++) {
        ls.loss_grad(p, &g);
        a->step(p.data(), g.data(), ls.specs, 1e-2f, 1.0f);
    }
    AdamW<CpuBackend> b(be, ls.specs, 0, ls.n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::Q8, fp32_b);
    std::vector<OptimizerStateTensor> sa = a->state_tensors(), sb = b.state_tensors();
    ASSERT_EQ(sa.size(), 6u);
    const char* names[] = {"adamw.m8", "adamw.v8", "adamw.m8_absmax", "adamw.v8_absmax", "adamw.m", "adamw.v"};
    const size_t bytes[] = {1920, 1920, sizeof(float), sizeof(float), 40 * sizeof(float), 40 * sizeof(float)};
    for (size_t i = 0; i < sa.size(); i++) {
        EXPECT_EQ(sa[i].name, names[i]);
        EXPECT_EQ(sa[i].nbytes(), bytes[i]);
        std::memcpy(sb[i].ptr(), sa[i].ptr(), sa[i].nbytes());
    }
    b.t = a->t;
    fvec pb = p;
    for (int s = 0; s < 3; s++) {
        ls.loss_grad(p, &g);
        a->step(p.data(), g.data(), ls.specs, 1e-2f, 1.0f);
        b.step(pb.data(), g.data(), ls.specs, 1e-2f, 1.0f);
    }
    EXPECT_EQ(std::memcmp(p.data(), pb.data(), p.size() * sizeof(float)), 0);
    sa = a->state_tensors();
    for (size_t i = 0; i < sa.size(); i++) EXPECT_EQ(std::memcmp(sb[i].ptr(), sa[i].ptr(), sa[i].nbytes()), 0) << i;
}

// bitsandbytes keeps fp32 moments for a parameter of fewer than min_8bit_size (4096) elements; ours are stacked over
// the layers, so the rule takes one layer's slice (2 layers here) and the tensors outside the stack (wte, lnfw) whole:
// ln1w's 4095 per layer and lnfw's 4095 keep fp32, ln1b's 4096 and the rest are 8-bit. Their updates over 4 steps are
// bit for bit those of fp32 AdamW (the fp32 specs) and of 8-bit states throughout (the others) on the same gradients;
// the allocation is the planner's; and a checkpoint of 8-bit states for every tensor (this program's before) is
// refused with what changed.
TEST(AdamW8, SmallTensorsKeepFp32MomentsAsBitsandbytes) {
    std::vector<ParamSpec> specs = {{"wte", 0, 8192, true},
                                    {"qkvw", 8192, 2 * 6144, true},
                                    {"ln1w", 20480, 2 * 4095, false},
                                    {"ln1b", 28672, 2 * 4096, false},
                                    {"lnfw", 36864, 4095, false}};
    const size_t n = 40960;
    ModelConfig cfg;
    cfg.num_layers = 2;
    const std::vector<bool> fp32 = adamw8_fp32_specs(specs, cfg.num_layers);
    EXPECT_EQ(fp32, (std::vector<bool>{false, false, true, false, true}));
    CpuBackend be;
    OptimizerChoice c;
    c.adam_states = AdamStates::Q8;
    const size_t before = be.live_bytes;
    std::unique_ptr<Optimizer<CpuBackend>> mixed = make_optimizer(be, c, cfg, specs, n, 0, n);
    // by hand: codes for 8192 + 12288 + 8192 elements in 4 + 6 + 4 blocks, fp32 moments for 8190 + 4095
    EXPECT_EQ(be.live_bytes - before, 2 * 28672 + 2 * 14 * sizeof(float) + sizeof(AdamW8Codes) + 8 * 12285);
    EXPECT_EQ(be.live_bytes - before, optimizer_state_bytes(c, cfg, specs, n));
    AdamW<CpuBackend> all8(be, specs, 0, n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::Q8);
    AdamW<CpuBackend> all32(be, specs, 0, n, 0.9f, 0.95f, 1e-8f, 0.1f, AdamStates::F32);
    fvec p0(n, 0.0f), g(n, 0.0f);
    for (float& x : p0) x = (float)(0.02 * normal());
    fvec pm = p0, p8 = p0, p32 = p0;
    for (int step = 0; step < 4; step++) {
        for (const ParamSpec& s : specs)
            for (size_t i = s.offset; i < s.offset + s.numel; i++) g[i] = (float)(normal() * (i % 7 ? 1e-2 : 1e-5));
        mixed->step(pm.data(), g.data(), specs, 1e-2f, 1.0f);
        all8.step(p8.data(), g.data(), specs, 1e-2f, 1.0f);
        all32.step(p32.data(), g.data(), specs, 1e-2f, 1.0f);
    }
    for (size_t k = 0; k < specs.size(); k++) {
        const fvec& want = fp32[k] ? p32 : p8;
        EXPECT_EQ(std::memcmp(pm.data() + specs[k].offset, want.data() + specs[k].offset,
                              specs[k].numel * sizeof(float)), 0) << specs[k].name;
    }
    EXPECT_NE(std::memcmp(p8.data() + specs[2].offset, p32.data() + specs[2].offset, specs[2].numel * sizeof(float)),
              0) << "8-bit and fp32 moments gave ln1w the same updates: the comparison shows nothing";
    std::vector<OptimizerStateTensor> st = mixed->state();
    ASSERT_EQ(st.size(), 6u);
    EXPECT_EQ(st[0].numel, 8192u + 12288u + 8192u);  // adamw.m8
    EXPECT_EQ(st[4].name, "adamw.m");
    EXPECT_EQ(st[4].numel, 8190u + 4095u);
    TrainState old;  // a checkpoint of every tensor 8-bit: codes and scales, no fp32 moments
    std::vector<uint8_t> codes(n);
    old.add_u8("adamw.m8", codes.data(), {(int64_t)n});
    EXPECT_USER_ERROR(refuse_adamw8_of_every_tensor(old, *mixed, "ck/step_00000004"),
                      "cannot resume ck/step_00000004: its 8-bit AdamW states quantize every tensor",
                      "tensors of fewer than 4096 elements (norms, biases) now keep fp32 moments",
                      "--init-from ck/step_00000004");
    TrainState now;
    now.add_u8("adamw.m8", codes.data(), {(int64_t)n});
    now.add_f32("adamw.m", p0.data(), {(int64_t)(8190 + 4095)});
    EXPECT_NO_THROW(refuse_adamw8_of_every_tensor(now, *mixed, "ck/step_00000004"));
}

// Blocks never span two tensors and restart at a ZeRO-1 shard's edge, each kind packed; 8-bit states refuse other
// optimizers and (for now) ZeRO-1 with a message.
TEST(AdamW8, BlocksFollowTheTensorsAndRefusals) {
    std::vector<ParamSpec> specs = {{"a", 0, 5000, true}, {"b", 5056, 10, false}, {"c", 5120, 2048, true}};
    AdamW8Layout q = adamw8_layout(specs, 0, 7168, {});
    ASSERT_EQ(q.q8.size(), 3u);
    EXPECT_EQ(q.nblocks, 3u + 1u + 1u);
    EXPECT_EQ(q.q8[1].block, 3u);
    EXPECT_EQ(q.q8[2].block, 4u);
    EXPECT_EQ(q.q8[2].at, 5010u);  // (packed: the gap before b holds no codes)
    EXPECT_EQ(q.n8, 7058u);
    EXPECT_FALSE(q.q8[1].decay);
    q = adamw8_layout(specs, 0, 7168, {false, true, false});
    EXPECT_EQ(q.q8.size(), 2u);
    ASSERT_EQ(q.f32.size(), 1u);
    EXPECT_EQ(q.f32[0].lo, 5056u);
    EXPECT_EQ(q.q8[1].at, 5000u);
    EXPECT_EQ(q.q8[1].block, 3u);
    q = adamw8_layout(specs, 3000, 5100, {});  // a shard: a's tail (2000) and b
    ASSERT_EQ(q.q8.size(), 2u);
    EXPECT_EQ(q.q8[0].lo, 3000u);
    EXPECT_EQ(q.nblocks, 2u);
    CpuBackend be;
    OptimizerChoice c;
    c.adam_states = AdamStates::Q8;
    c.kind = "muon";
    ModelConfig cfg;
    cfg.num_layers = 1;
    EXPECT_THROW(make_optimizer(be, c, cfg, specs, 7168, 0, 7168), UserError);
    c.kind = "adamw";
    try {
        make_optimizer(be, c, cfg, specs, 7168, 0, 3000);
        ADD_FAILURE() << "8-bit states sharded";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("ZeRO-1"), std::string::npos) << e.what();
    }
}

}  // namespace
