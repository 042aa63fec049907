// Tests of Muon (train/optim_muon.h, kernels/muon.h) and Adam-mini (train/optim_adam_mini.h, kernels/adam_mini.h).
//
// Newton-Schulz: the quintic p(x) = a x + b x³ + c x⁵ has a local maximum p(0.5545) = 1.2024 and a local minimum
// p(1.0501) = 0.6818 (computed below from p'), and p maps [0.6818, 1.2024] into itself, so after 5 iterations
// every singular value whose share x = σ / ||G||_F of the input is at least ~0.0015 ends in that band (the
// smallest such x is computed below too). Against LAPACK's SVD of the input (sgesvd): the output is U p⁵(x) Vᵀ,
// i.e. Uᵀ O V is diagonal with the predicted values, its singular values lie in the band, and ||O - U Vᵀ|| /
// ||U Vᵀ|| stays below the band's distance from 1 (0.32).
//
// Optimizer steps: 3 steps of Muon (q/k/v split and fused) and Adam-mini on tiny GPT-2 and LLaMA parameter
// buffers against trajectories computed with torch by test/reference/make_optimizer_fixtures.py (written from
// the published algorithms, per nn.Linear, torch.optim.AdamW for Muon's AdamW half), the state tensors against
// the reference's state, a resume from state_tensors() continuing bit for bit, the planner's state_bytes against
// allocations and a hand count, a backend with fp32 master weights against the CPU backend, and a few training
// steps with every PRAC mode. Runs in about a second (OMP_NUM_THREADS=2).
#include <gtest/gtest.h>
#include <lapacke.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "kernels/adam_mini.h"
#include "kernels/adamw.h"
#include "kernels/cpu_backend.h"
#include "kernels/muon.h"
#include "model/config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "model/weights.h"
#include "train/optim_adam_mini.h"
#include "train/optim_muon.h"
#include "train/optim_adamw.h"
#include "test/test_util.h"
#include "test/worst.h"  // worst_of

namespace {

using fvec = std::vector<float>;


// std::mt19937's sequence is fixed by the standard, its distributions are not: our own transforms.
struct Rng {
    std::mt19937 gen;
    explicit Rng(uint32_t seed) : gen(seed) {}
    double uniform() { return ((double)(uint32_t)gen() + 0.5) / 4294967296.0; }
    double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform()); }
    fvec normals(size_t n, double sd = 1.0) {
        fvec x(n);
        for (float& e : x) e = (float)(sd * normal());
        return x;
    }
};

// ---- Newton-Schulz: the polynomial and its band ----

double ns_p(double x) { return MUON_NS_A * x + MUON_NS_B * x * x * x + MUON_NS_C * x * x * x * x * x; }
double ns_p5(double x) {
    for (int i = 0; i < MUON_NS_STEPS; i++) x = ns_p(x);
    return x;
}

struct Band {
    double lo, hi;  // p at its local minimum and maximum on (0, inf)
    double x_min;   // the smallest input share x whose 5 iterations (and every larger x's, up to 1) land in [lo, hi]
};
Band ns_band() {
    // p'(x) = a + 3b x² + 5c x⁴ = 0, a quadratic in y = x²
    double a = MUON_NS_A, b = MUON_NS_B, c = MUON_NS_C;
    double d = std::sqrt(9 * b * b - 20 * a * c);
    double y_max = (-3 * b - d) / (10 * c), y_min = (-3 * b + d) / (10 * c);
    Band band{ns_p(std::sqrt(y_min)), ns_p(std::sqrt(y_max)), 0};
    const int n = 1000000;  // grid of (0, 1], from the top down: the first x that leaves the band
    for (int i = n; i >= 1; i--) {
        double x = (double)i / n, y = ns_p5(x);
        if (y < band.lo - 1e-12 || y > band.hi + 1e-12) {
            band.x_min = (double)(i + 1) / n;
            break;
        }
    }
    return band;
}

// Thin SVD of M (r, c) row-major: U (r, k), s (k), Vt (k, c), k = min(r, c), with LAPACK's sgesvd.
struct Svd {
    fvec U, s, Vt;
    int k;
};
Svd svd(const fvec& M, int r, int c) {
    Svd o;
    o.k = std::min(r, c);
    fvec A = M, superb(o.k);
    o.U.resize((size_t)r * o.k);
    o.s.resize(o.k);
    o.Vt.resize((size_t)o.k * c);
    int info = LAPACKE_sgesvd(LAPACK_ROW_MAJOR, 'S', 'S', r, c, A.data(), c, o.s.data(), o.U.data(), o.k,
                              o.Vt.data(), c, superb.data());
    EXPECT_EQ(info, 0);
    return o;
}

fvec newton_schulz(const fvec& G, int r, int c) {
    fvec X = G, work(newton_schulz_work_numel(r, c));
    newton_schulz_cpu(X.data(), r, c, work.data());
    return X;
}

// A test matrix: "gaussian" N(0, 1) entries, or "spectrum": random singular vectors (those of a Gaussian matrix)
// with singular values log-uniform in [0.02, 1].
fvec test_matrix(int r, int c, bool gaussian, Rng& rng) {
    fvec G = rng.normals((size_t)r * c);
    if (gaussian) return G;
    Svd d = svd(G, r, c);
    fvec M((size_t)r * c, 0.0f);
    for (int j = 0; j < d.k; j++) {
        double sj = std::exp(std::log(0.02) * rng.uniform());
        for (int i = 0; i < r; i++)
            for (int l = 0; l < c; l++) M[(size_t)i * c + l] += (float)(sj * d.U[(size_t)i * d.k + j] * d.Vt[(size_t)j * c + l]);
    }
    return M;
}

TEST(NewtonSchulz, BandOfTheQuinticIteration) {
    Band b = ns_band();
    std::printf("quintic band [%.4f, %.4f], reached from input shares x >= %.5f\n", b.lo, b.hi, b.x_min);
    EXPECT_NEAR(b.lo, 0.6818, 1e-4);
    EXPECT_NEAR(b.hi, 1.2024, 1e-4);
    EXPECT_GT(b.x_min, 0.001);
    EXPECT_LT(b.x_min, 0.002);
    // the band is invariant: p maps [lo, hi] into itself
    for (int i = 0; i <= 1000; i++) {
        double x = b.lo + (b.hi - b.lo) * i / 1000.0;
        EXPECT_GE(ns_p(x), b.lo - 1e-12);
        EXPECT_LE(ns_p(x), b.hi + 1e-12);
    }
}

TEST(NewtonSchulz, KeepsSingularVectorsAndMapsSingularValuesIntoTheBand) {
    Band band = ns_band();
    struct Case {
        int r, c;
        bool gaussian;
    };
    // square, tall, wide; Gaussian rectangles (aspect >= 2) and chosen spectra have every share x above x_min;
    // the square Gaussians have tiny singular values that 5 iterations do not lift into the band (checked
    // against p⁵ all the same)
    const Case cases[] = {{64, 64, false}, {128, 128, false}, {48, 64, false}, {80, 48, false}, {96, 32, true},
                          {32, 96, true},  {200, 50, true},   {64, 64, true},  {100, 100, true}};
    Rng rng(7);
    double worst_diag = 0, worst_off = 0, worst_band = 0;
    for (const Case& cs : cases) {
        int r = cs.r, c = cs.c;
        fvec G = test_matrix(r, c, cs.gaussian, rng);
        Svd in = svd(G, r, c);
        int k = in.k;
        double fro = 0;
        for (float x : G) fro += (double)x * x;
        fro = std::sqrt(fro);
        fvec O = newton_schulz(G, r, c);
        // D = Uᵀ O V (k, k) in double
        std::vector<double> OV((size_t)r * k, 0.0), D((size_t)k * k, 0.0);
        for (int i = 0; i < r; i++)
            for (int l = 0; l < c; l++) {
                double o = O[(size_t)i * c + l];
                for (int j = 0; j < k; j++) OV[(size_t)i * k + j] += o * in.Vt[(size_t)j * c + l];
            }
        for (int i = 0; i < r; i++)
            for (int a = 0; a < k; a++) {
                double u = in.U[(size_t)i * k + a];
                for (int j = 0; j < k; j++) D[(size_t)a * k + j] += u * OV[(size_t)i * k + j];
            }
        double diag_err = 0, off = 0, min_share = 1;
        for (int a = 0; a < k; a++) {
            double x = in.s[a] / (fro + 1e-7);
            min_share = std::min(min_share, x);
            diag_err = worst_of(diag_err, std::fabs(D[(size_t)a * k + a] - ns_p5(x)));
            for (int j = 0; j < k; j++)
                if (j != a) off += D[(size_t)a * k + j] * D[(size_t)a * k + j];
        }
        off = std::sqrt(off / k);  // RMS of the off-diagonal mass per singular direction
        // O's own singular values, and its distance from U Vᵀ
        Svd out = svd(O, r, c);
        double s_lo = *std::min_element(out.s.begin(), out.s.end()), s_hi = *std::max_element(out.s.begin(), out.s.end());
        double dist = 0;
        for (int i = 0; i < r; i++)
            for (int l = 0; l < c; l++) {
                double uv = 0;
                for (int j = 0; j < k; j++) uv += (double)in.U[(size_t)i * k + j] * in.Vt[(size_t)j * c + l];
                double e = O[(size_t)i * c + l] - uv;
                dist += e * e;
            }
        dist = std::sqrt(dist / k);  // ||U Vᵀ||_F = sqrt(k)
        bool in_band = min_share >= band.x_min;
        std::printf("  %4dx%-4d %-8s min share %.2e  |diag(UᵀOV) - p⁵(x)| %.1e  off-diag RMS %.1e  σ(O) in "
                    "[%.4f, %.4f]  ||O - UVᵀ||/||UVᵀ|| %.3f\n",
                    r, c, cs.gaussian ? "gaussian" : "spectrum", min_share, diag_err, off, s_lo, s_hi, dist);
        // fp32 rounding of 5 iterations of matmuls of depth <= 200, amplified by the quintic's slope (up to 3.4 per
        // iteration): measured at most 5.1e-6 (diagonal) and 1.7e-6 (off-diagonal) over these cases; 5e-5 (was 2e-4)
        EXPECT_LT(diag_err, 5e-5) << r << "x" << c;
        EXPECT_LT(off, 5e-5) << r << "x" << c;
        worst_diag = worst_of(worst_diag, diag_err);
        worst_off = worst_of(worst_off, off);
        if (in_band) {
            EXPECT_GE(s_lo, band.lo - 1e-4) << r << "x" << c;
            EXPECT_LE(s_hi, band.hi + 1e-4) << r << "x" << c;
            EXPECT_LE(dist, std::max(1 - band.lo, band.hi - 1)) << r << "x" << c;
            worst_band = std::max({worst_band, band.lo - s_lo, s_hi - band.hi});
        }
    }
    std::printf("worst |diag - p⁵| %.1e, off-diagonal %.1e, band overshoot %.1e\n", worst_diag, worst_off, worst_band);
}

// A tall matrix runs the transposed iteration (Gram matrix XᵀX): the result is the transpose of the wide one's.
TEST(NewtonSchulz, TallIsTheTransposeOfWide) {
    Rng rng(3);
    int r = 72, c = 40;
    fvec G = rng.normals((size_t)r * c), Gt((size_t)r * c);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) Gt[(size_t)j * r + i] = G[(size_t)i * c + j];
    fvec O = newton_schulz(G, r, c), Ot = newton_schulz(Gt, c, r);
    double err = 0;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) err = worst_of(err, (double)std::fabs(O[(size_t)i * c + j] - Ot[(size_t)j * r + i]));
    EXPECT_LT(err, 2e-6);
}

// ---- the torch fixture ----

std::string fixture_path() { return std::string(PRAC_SOURCE_DIR) + "/test/fixtures/optim/optimizers.safetensors"; }
const SafeTensorsFile& fixture() {
    static SafeTensorsFile f = safetensors_open(fixture_path());
    return f;
}
fvec read(const std::string& name) {
    const SafeTensor& t = fixture().get(name);
    fvec x(t.numel());
    fixture().read_f32(name, x.data(), x.size());
    return x;
}

TEST(NewtonSchulz, MatchesTorch) {
    for (auto [r, c] : {std::pair{32, 32}, {40, 24}, {24, 40}}) {
        std::string shape = std::to_string(r) + "x" + std::to_string(c);
        fvec O = newton_schulz(read("ns.in." + shape), r, c), want = read("ns.out." + shape);
        double err = 0;
        for (size_t i = 0; i < O.size(); i++) err = worst_of(err, (double)std::fabs(O[i] - want[i]));
        std::printf("  %s: max |ours - torch| %.1e\n", shape.c_str(), err);
        EXPECT_LT(err, 1e-5) << shape;
    }
}

// ---- kernels ----

TEST(MuonKernels, MomentumAndApply) {
    Rng rng(5);
    size_t n = 1000;
    fvec g = rng.normals(n), buf0 = rng.normals(n), p0 = rng.normals(n), O = rng.normals(n);
    for (bool nesterov : {true, false}) {
        fvec buf = buf0, u(n);
        muon_momentum_cpu(buf.data(), u.data(), g.data(), n, 0.95f, 0.5f, nesterov);
        for (size_t i = 0; i < n; i++) {
            float gi = g[i] * 0.5f, b = 0.95f * buf0[i] + gi;
            EXPECT_EQ(buf[i], b);
            EXPECT_EQ(u[i], nesterov ? gi + 0.95f * b : b);
        }
    }
    fvec p = p0;
    muon_apply_cpu(p.data(), O.data(), n, 0.01f, 0.1f, 0.03f);
    for (size_t i = 0; i < n; i++) EXPECT_EQ(p[i], p0[i] * (1.0f - 0.01f * 0.1f) - 0.03f * O[i]);
}

// Adam-mini with blocks of one element is AdamW; with larger blocks v is the block mean of g².
TEST(AdamMiniKernels, BlockOfOneIsAdamWAndBlocksShareTheMean) {
    Rng rng(9);
    size_t n = 4096;
    fvec p0 = rng.normals(n, 0.02), m0 = rng.normals(n, 0.01);
    fvec pa = p0, pb = p0, ma = m0, mb = m0, va(n), vb(n);
    for (size_t i = 0; i < n; i++) va[i] = vb[i] = (float)std::fabs(rng.normal() * 1e-4);
    for (int t = 1; t <= 3; t++) {
        fvec g = rng.normals(n, 0.01);
        adamw_update_cpu(pa.data(), g.data(), ma.data(), va.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.7f);
        adam_mini_update_cpu(pb.data(), g.data(), mb.data(), vb.data(), n, 1, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0.7f);
    }
    for (size_t i = 0; i < n; i++) {
        EXPECT_NEAR(pb[i], pa[i], 1e-6 * std::fabs(pa[i]) + 1e-9);
        EXPECT_NEAR(vb[i], va[i], 1e-6 * va[i]);
    }
    // blocks of 64: v of a block is beta2 v + (1 - beta2) mean(g²), and m stays per element
    size_t block = 64, nb = n / block;
    fvec g = rng.normals(n, 0.01), p = p0, m(n, 0.0f), v(nb, 0.0f);
    adam_mini_update_cpu(p.data(), g.data(), m.data(), v.data(), n, block, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1, 1.0f);
    for (size_t k = 0; k < nb; k++) {
        double ss = 0;
        for (size_t i = 0; i < block; i++) ss += (double)g[k * block + i] * g[k * block + i];
        EXPECT_NEAR(v[k], 0.05 * ss / block, 1e-6 * v[k]);
        for (size_t i = 0; i < block; i++) {
            size_t j = k * block + i;
            double step = 1e-3 / 0.1 * (0.1 * g[j]) / (std::sqrt((double)v[k]) / std::sqrt(0.05) + 1e-8);
            EXPECT_NEAR(p[j], p0[j] - step, 4e-7 * std::fabs(p0[j]) + 1e-6 * std::fabs(step));  // a few ulp
        }
    }
}

// ---- layouts ----

ModelConfig tiny_config(Arch arch, int V, int Vp, int L, int NH, int C, int F, int maxT) {
    ModelConfig c;
    c.arch = arch;
    c.name = arch == Arch::GPT2 ? "optim-test-gpt2" : "optim-test-llama";
    c.vocab_size = V;
    c.padded_vocab_size = Vp;
    c.num_layers = L;
    c.num_heads = NH;
    c.channels = C;
    c.hidden = F;
    c.max_seq_len = maxT;
    c.norm_eps = arch == Arch::GPT2 ? 1e-5f : 1e-6f;
    c.rope_theta = 10000.0f;
    c.tied_embeddings = arch == Arch::GPT2;
    return c;
}

// The fixture's configs: V, Vp, L, NH, C, F, maxT
ModelConfig fixture_config(const std::string& arch) {
    const SafeTensor& t = fixture().get(arch + ".config");
    EXPECT_EQ(t.dtype, "I32");
    int32_t v[7];
    fixture().read_raw(arch + ".config", v, sizeof(v));
    Arch a = arch == "gpt2" ? Arch::GPT2 : Arch::LLAMA;
    return tiny_config(a, v[0], v[1], v[2], v[3], v[4], v[5], a == Arch::GPT2 ? v[6] : 16);
}

const ParamSpec& spec_named(const std::vector<ParamSpec>& specs, const std::string& name) {
    for (const ParamSpec& s : specs)
        if (s.name == name) return s;
    throw std::logic_error("no parameter " + name);
}

TEST(MuonLayout, MatricesOfGpt2AndLlama) {
    CpuBackend be;
    ModelConfig g = tiny_config(Arch::GPT2, 50, 64, 2, 2, 16, 64, 12), l = tiny_config(Arch::LLAMA, 50, 64, 2, 4, 16, 24, 16);
    GPT2<CpuBackend> gpt2(be, g);
    Llama<CpuBackend> llama(be, l);
    struct Want {
        const std::vector<ParamSpec>* specs;
        const ModelConfig* cfg;
        bool split;
        std::vector<std::string> names;  // layer 0's matrices
        std::vector<std::pair<int, int>> shapes;
    };
    int C = 16, Fg = 64, Fl = 24;
    const Want wants[] = {
        {&gpt2.param_specs, &g, true, {"qkvw[0].q", "qkvw[0].k", "qkvw[0].v", "attprojw[0]", "fcw[0]", "fcprojw[0]"},
         {{C, C}, {C, C}, {C, C}, {C, C}, {Fg, C}, {C, Fg}}},
        {&gpt2.param_specs, &g, false, {"qkvw[0]", "attprojw[0]", "fcw[0]", "fcprojw[0]"},
         {{3 * C, C}, {C, C}, {Fg, C}, {C, Fg}}},
        {&llama.param_specs, &l, true,
         {"qkvw[0].q", "qkvw[0].k", "qkvw[0].v", "attprojw[0]", "fcw[0].gate", "fcw[0].up", "fcprojw[0]"},
         {{C, C}, {C, C}, {C, C}, {C, C}, {Fl, C}, {Fl, C}, {C, Fl}}},
        {&llama.param_specs, &l, false, {"qkvw[0]", "attprojw[0]", "fcw[0]", "fcprojw[0]"},
         {{3 * C, C}, {C, C}, {2 * Fl, C}, {C, Fl}}},
    };
    for (const Want& w : wants) {
        MuonLayout lay = muon_layout(*w.specs, *w.cfg, w.split);
        size_t per_layer = w.names.size();
        ASSERT_EQ(lay.matrices.size(), 2 * per_layer);
        // matrices appear spec by spec, layer by layer: layer 0's are the first of each spec's group
        std::vector<const MuonMatrix*> layer0;
        for (const MuonMatrix& m : lay.matrices)
            if (m.name.find("[0]") != std::string::npos) layer0.push_back(&m);
        ASSERT_EQ(layer0.size(), per_layer);
        for (size_t i = 0; i < per_layer; i++) {
            EXPECT_EQ(layer0[i]->name, w.names[i]);
            EXPECT_EQ(layer0[i]->rows, w.shapes[i].first) << w.names[i];
            EXPECT_EQ(layer0[i]->cols, w.shapes[i].second) << w.names[i];
        }
        // the matrices tile the hidden tensors exactly, and the momentum buffer in the same order
        size_t covered = 0, state = 0;
        for (const MuonMatrix& m : lay.matrices) {
            EXPECT_EQ(m.state, state) << m.name;
            state += (size_t)m.rows * m.cols;
            covered += (size_t)m.rows * m.cols;
        }
        EXPECT_EQ(covered, lay.momentum_numel);
        size_t hidden = 0, rest = 0;
        for (const ParamSpec& s : *w.specs) (muon_is_hidden(s.name) ? hidden : rest) += s.numel;
        EXPECT_EQ(lay.momentum_numel, hidden);
        EXPECT_EQ(lay.adam_numel, rest);
    }
    // row offsets of the split parts: layer 1's k of qkvw and up of LLaMA's fcw
    MuonLayout lg = muon_layout(gpt2.param_specs, g, true), ll = muon_layout(llama.param_specs, l, true);
    auto find = [](const MuonLayout& lay, const std::string& n) {
        for (const MuonMatrix& m : lay.matrices)
            if (m.name == n) return m;
        throw std::logic_error(n);
    };
    EXPECT_EQ(find(lg, "qkvw[1].k").offset, spec_named(gpt2.param_specs, "qkvw").offset + (size_t)(3 * C + C) * C);
    EXPECT_EQ(find(ll, "fcw[1].up").offset, spec_named(llama.param_specs, "fcw").offset + (size_t)(2 * Fl + Fl) * C);
    // embeddings, head, norms, biases are AdamW's
    for (const PackedSpec& p : ll.adam_specs) EXPECT_FALSE(muon_is_hidden(p.spec.name));
    EXPECT_EQ(ll.adam_specs.size(), 5u);  // wte, ln1w, ln2w, lnfw, lm_head
}

TEST(AdamMiniLayout, BlocksOfGpt2AndLlama) {
    CpuBackend be;
    int L = 2, NH = 4, C = 16, Fg = 64, Fl = 24, Vp = 64, T = 12;
    ModelConfig g = tiny_config(Arch::GPT2, 50, Vp, L, NH, C, Fg, T), l = tiny_config(Arch::LLAMA, 50, Vp, L, NH, C, Fl, 16);
    GPT2<CpuBackend> gpt2(be, g);
    Llama<CpuBackend> llama(be, l);
    AdamMiniLayout lg = adam_mini_layout(gpt2.param_specs, g), ll = adam_mini_layout(llama.param_specs, l);
    std::map<std::string, size_t> blocks;
    for (const AdamMiniTensor& t : lg.tensors) blocks[t.spec.name] = t.blocks;
    // per row: embeddings; per head: q, k; per row: v, o, MLP; per tensor: each layer's norms and biases
    EXPECT_EQ(blocks["wte"], (size_t)Vp);
    EXPECT_EQ(blocks["wpe"], (size_t)T);
    EXPECT_EQ(blocks["qkvw"], (size_t)L * (NH + NH + C));
    EXPECT_EQ(blocks["attprojw"], (size_t)L * C);
    EXPECT_EQ(blocks["fcw"], (size_t)L * Fg);
    EXPECT_EQ(blocks["fcprojw"], (size_t)L * C);
    for (const char* n : {"ln1w", "ln1b", "qkvb", "attprojb", "ln2w", "ln2b", "fcb", "fcprojb"}) EXPECT_EQ(blocks[n], (size_t)L) << n;
    EXPECT_EQ(blocks["lnfw"], 1u);
    EXPECT_EQ(blocks["lnfb"], 1u);
    EXPECT_EQ(lg.v_numel, (size_t)Vp + T + L * (2 * NH + 3 * C + Fg + 8) + 2);
    EXPECT_EQ(ll.v_numel, (size_t)Vp + L * (2 * NH + 3 * C + 2 * Fl + 2) + 1 + Vp);
    // qkvw's segments, layer 1: q and k heads (HS*C values), then v rows (C values)
    const ParamSpec& qkv = spec_named(gpt2.param_specs, "qkvw");
    std::vector<AdamMiniSegment> segs;
    for (const AdamMiniSegment& s : lg.segments)
        if (s.offset >= qkv.offset && s.offset < qkv.offset + qkv.numel) segs.push_back(s);
    ASSERT_EQ(segs.size(), 2u * L);
    EXPECT_EQ(segs[2].offset, qkv.offset + (size_t)3 * C * C);
    EXPECT_EQ(segs[2].numel, (size_t)2 * C * C);
    EXPECT_EQ(segs[2].block, (size_t)(C / NH) * C);
    EXPECT_EQ(segs[3].offset, qkv.offset + (size_t)5 * C * C);
    EXPECT_EQ(segs[3].block, (size_t)C);
    // segments tile every tensor; m and v are packed in spec order
    size_t m = 0, v = 0;
    for (const AdamMiniSegment& s : lg.segments) {
        EXPECT_EQ(s.m, m);
        EXPECT_EQ(s.v, v);
        EXPECT_EQ(s.numel % s.block, 0u);
        m += s.numel;
        v += s.numel / s.block;
    }
    EXPECT_EQ(m, count_params(gpt2.param_specs));
    EXPECT_EQ(v, lg.v_numel);
    // a tensor without a rule is refused by name
    std::vector<ParamSpec> odd = {{"mystery", 0, 16, true}};
    try {
        adam_mini_layout(odd, g);
        ADD_FAILURE() << "unknown tensor accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("mystery"), std::string::npos) << e.what();
    }
}

// ---- optimizer steps against torch ----

// A backend with fp32 master weights (like the CUDA bf16 backend, but fp32 params): each update reads and writes
// master and then copies it to params; records the salts it was given. Exercises the non-CPU dispatch of the
// optimizers and their master-weight offsets.
struct MasterBackend {
    using act_t = float;
    using grad_t = float;
    static constexpr DType act_dtype = DType::F32;
    static constexpr DType grad_dtype = DType::F32;
    static constexpr bool master_weights = true;
    size_t live_bytes = 0;
    std::vector<uint64_t> salts;
    void* alloc(size_t bytes) {
        live_bytes += bytes;
        return bytes ? std::calloc(bytes, 1) : nullptr;
    }
    void free(void* p, size_t bytes) {
        if (p) live_bytes -= bytes;
        std::free(p);
    }
    void adamw_update(float* params, float* master, const float* grads, float* m, float* v, size_t n, float lr,
                      float b1, float b2, float eps, float wd, int t, float gs, uint64_t salt) {
        adamw_update_cpu(master, grads, m, v, n, lr, b1, b2, eps, wd, t, gs);
        std::memcpy(params, master, n * sizeof(float));
        salts.push_back(salt);
    }
    void muon_momentum(float* buf, float* u, const float* g, size_t n, float mu, float gs, bool nesterov) {
        muon_momentum_cpu(buf, u, g, n, mu, gs, nesterov);
    }
    void newton_schulz(float* X, int rows, int cols, float* work, int steps, int count) {
        for (int i = 0; i < count; i++) newton_schulz_cpu(X + (size_t)i * rows * cols, rows, cols, work, steps);
    }
    void muon_apply(float* params, float* master, const float* O, size_t n, float lr, float wd, float step, uint64_t salt) {
        muon_apply_cpu(master, O, n, lr, wd, step);
        std::memcpy(params, master, n * sizeof(float));
        salts.push_back(salt);
    }
    void adam_mini_update(float* params, float* master, const float* grads, float* m, float* v, size_t n, size_t block,
                          float lr, float b1, float b2, float eps, float wd, int t, float gs, uint64_t salt) {
        adam_mini_update_cpu(master, grads, m, v, n, block, lr, b1, b2, eps, wd, t, gs);
        std::memcpy(params, master, n * sizeof(float));
        salts.push_back(salt);
    }
};

// A parameter buffer laid out like the model's (specs from the real model classes, nothing else allocated).
struct Buffers {
    ModelConfig cfg;
    std::vector<ParamSpec> specs;
    size_t n = 0;
    fvec params, grads;
    explicit Buffers(const std::string& arch) : cfg(fixture_config(arch)) {
        CpuBackend be;
        if (cfg.arch == Arch::GPT2) {
            GPT2<CpuBackend> m(be, cfg);
            specs = m.param_specs;
            n = m.param_buffer_numel;
        } else {
            Llama<CpuBackend> m(be, cfg);
            specs = m.param_specs;
            n = m.param_buffer_numel;
        }
        params.assign(n, 0.0f);
        grads.assign(n, 0.0f);
    }
    void load(fvec& buf, const std::string& prefix) {
        for (const ParamSpec& s : specs) fixture().read_f32(prefix + s.name, buf.data() + s.offset, s.numel);
    }
};

struct Agreement {
    double max_abs = 0;     // max |ours - torch| over all parameters
    double max_hidden = 0;  // the same over the hidden matrices (Muon's, with Muon)
    double max_update = 0;  // max |torch - initial|: the size of what was compared
};

// 3 steps with the fixture's lr and grad_scale; parameters compared after steps 1 and 3.
template <class Opt>
Agreement run_steps(Buffers& b, Opt& opt, const std::string& arch, const std::string& tag) {
    b.load(b.params, arch + ".param.");
    fvec initial = b.params, lr = read("lr"), scale = read("grad_scale");
    Agreement a;
    for (int k = 0; k < 3; k++) {
        b.load(b.grads, arch + ".grad" + std::to_string(k) + ".");
        opt.step(b.params.data(), b.grads.data(), b.specs, lr[k], scale[k]);
        if (k != 0 && k != 2) continue;
        std::string prefix = arch + "." + tag + ".after" + std::to_string(k + 1) + ".";
        for (const ParamSpec& s : b.specs) {
            fvec want = read(prefix + s.name);
            for (size_t i = 0; i < s.numel; i++) {
                double got = b.params[s.offset + i];
                a.max_abs = worst_of(a.max_abs, std::fabs(got - want[i]));
                if (muon_is_hidden(s.name)) a.max_hidden = worst_of(a.max_hidden, std::fabs(got - want[i]));
                a.max_update = std::max(a.max_update, (double)std::fabs(want[i] - initial[s.offset + i]));
                if (std::fabs(got - want[i]) > 1e-5) {
                    ADD_FAILURE() << arch << " " << tag << " step " << k + 1 << " " << s.name << "[" << i << "]: " << got
                                  << " vs torch " << want[i];
                    return a;
                }
            }
        }
    }
    return a;
}

// a state tensor (from state_tensors()) against the fixture's
double state_err(const OptimizerStateTensor& t, const std::string& fixture_name) {
    fvec want = read(fixture_name);
    EXPECT_EQ(t.numel, want.size()) << t.name;
    if (t.numel != want.size()) return 1e30;
    double err = 0, mag = 0;
    for (size_t i = 0; i < t.numel; i++) {
        err = worst_of(err, (double)std::fabs(t.data[i] - want[i]));
        mag = std::max(mag, (double)std::fabs(want[i]));
    }
    return err / std::max(mag, 1e-30);
}

// The fixture's hyperparameters: beta1, beta2, eps, weight decay, momentum.
MuonOptions muon_options(bool split) {
    fvec h = read("hyper");
    MuonOptions o;
    o.beta1 = h[0];
    o.beta2 = h[1];
    o.eps = h[2];
    o.weight_decay = h[3];
    o.momentum = h[4];
    o.nesterov = true;
    o.split_fused = split;
    return o;
}
AdamMiniOptions adam_mini_options() {
    fvec h = read("hyper");
    AdamMiniOptions o;
    o.beta1 = h[0];
    o.beta2 = h[1];
    o.eps = h[2];
    o.weight_decay = h[3];
    return o;
}

TEST(Muon, MatchesTorchReference) {
    SingleThreaded one;
    for (const char* arch : {"gpt2", "llama"})
        for (bool split : {true, false}) {
            Buffers b(arch);
            CpuBackend be;
            Muon<CpuBackend> opt(be, b.specs, b.cfg, muon_options(split));
            std::string tag = split ? "muon_split" : "muon_fused";
            Agreement a = run_steps(b, opt, arch, tag);
            std::printf("  %-5s %-10s max |ours - torch| %.2e (hidden matrices %.2e; updates up to %.2e)\n", arch,
                        tag.c_str(), a.max_abs, a.max_hidden, a.max_update);
            // measured <= 1.2e-7, one ulp of the O(1) norm weights (fp32 vs fp32 in another summation order)
            EXPECT_LT(a.max_abs, 1e-6) << arch << " " << tag;
            EXPECT_GT(a.max_update, 1e-3);  // the comparison is not vacuous
            if (!split) continue;
            // state after 3 steps: momentum of the hidden weights, AdamW's moments of the rest
            double worst = 0;
            for (const OptimizerStateTensor& t : opt.state_tensors()) {
                std::string rest = t.name.substr(std::string("muon.").size());  // momentum.x, adamw.m.x, adamw.v.x
                std::string key = rest.rfind("adamw.m.", 0) == 0 ? "adamw_m." + rest.substr(8)
                                  : rest.rfind("adamw.v.", 0) == 0 ? "adamw_v." + rest.substr(8)
                                                                    : rest;
                worst = worst_of(worst, state_err(t, std::string(arch) + ".muon_split." + key));
            }
            std::printf("  %-5s muon state: max relative difference %.1e\n", arch, worst);
            EXPECT_LT(worst, 1e-5) << arch;
        }
}

TEST(AdamMini, MatchesTorchReference) {
    SingleThreaded one;
    for (const char* arch : {"gpt2", "llama"}) {
        Buffers b(arch);
        CpuBackend be;
        AdamMini<CpuBackend> opt(be, b.specs, b.cfg, adam_mini_options());
        Agreement a = run_steps(b, opt, arch, "adam_mini");
        std::printf("  %-5s adam_mini  max |ours - torch| %.2e (hidden matrices %.2e; updates up to %.2e)\n", arch,
                    a.max_abs, a.max_hidden, a.max_update);
        EXPECT_LT(a.max_abs, 1e-6) << arch;
        EXPECT_GT(a.max_update, 1e-3);
        // m per element and v per block, in the documented block order
        double worst = 0;
        for (const OptimizerStateTensor& t : opt.state_tensors())
            worst = worst_of(worst, state_err(t, std::string(arch) + "." + t.name));
        std::printf("  %-5s adam_mini state: max relative difference %.1e\n", arch, worst);
        EXPECT_LT(worst, 1e-5) << arch;
    }
}

// With fp32 master weights (initialized from the params) the updates go through the backend's members, at the
// right master offsets: same trajectory, bit for bit, as the CPU backend's; salts are the tensors' offsets.
TEST(Optimizers, MasterWeightBackendFollowsTheCpuBackend) {
    SingleThreaded one;
    Buffers b("llama");
    for (int which = 0; which < 2; which++) {
        fvec lr = read("lr"), scale = read("grad_scale");
        auto run = [&](auto& opt, float* master) {
            b.load(b.params, "llama.param.");
            if (master) std::memcpy(master, b.params.data(), b.n * sizeof(float));
            for (int k = 0; k < 3; k++) {
                b.load(b.grads, "llama.grad" + std::to_string(k) + ".");
                opt.step(b.params.data(), b.grads.data(), b.specs, lr[k], scale[k]);
            }
            return b.params;
        };
        CpuBackend cpu;
        MasterBackend mb;
        fvec want, got;
        if (which == 0) {
            Muon<CpuBackend> a(cpu, b.specs, b.cfg, muon_options(true));
            want = run(a, nullptr);
            Muon<MasterBackend> m(mb, b.specs, b.cfg, muon_options(true));
            ASSERT_NE(m.master, nullptr);
            got = run(m, m.master);
            EXPECT_EQ(m.state_tensors().back().name, "muon.master");
        } else {
            AdamMini<CpuBackend> a(cpu, b.specs, b.cfg, adam_mini_options());
            want = run(a, nullptr);
            AdamMini<MasterBackend> m(mb, b.specs, b.cfg, adam_mini_options());
            ASSERT_NE(m.master, nullptr);
            got = run(m, m.master);
            EXPECT_EQ(m.state_tensors().back().name, "adam_mini.master");
        }
        for (const ParamSpec& s : b.specs)
            EXPECT_EQ(0, std::memcmp(want.data() + s.offset, got.data() + s.offset, s.numel * sizeof(float)))
                << (which ? "adam-mini " : "muon ") << s.name;
        for (uint64_t salt : mb.salts) EXPECT_LT(salt, b.n);
        EXPECT_EQ(mb.live_bytes, 0u);  // everything freed
    }
}

// Checkpoint: the tensors of state_tensors() and t, copied into a fresh optimizer, continue the run bit for bit.
template <class Opt, class Make>
void check_resume(Buffers& b, Make make) {
    fvec lr = read("lr"), scale = read("grad_scale");
    CpuBackend be;
    std::unique_ptr<Opt> a = make(be);
    b.load(b.params, "gpt2.param.");
    for (int k = 0; k < 2; k++) {
        b.load(b.grads, "gpt2.grad" + std::to_string(k) + ".");
        a->step(b.params.data(), b.grads.data(), b.specs, lr[k], scale[k]);
    }
    std::unique_ptr<Opt> r = make(be);
    std::vector<OptimizerStateTensor> sa = a->state_tensors(), sr = r->state_tensors();
    ASSERT_EQ(sa.size(), sr.size());
    for (size_t i = 0; i < sa.size(); i++) {
        ASSERT_EQ(sa[i].name, sr[i].name);
        ASSERT_EQ(sa[i].numel, sr[i].numel);
        std::memcpy(sr[i].data, sa[i].data, sa[i].numel * sizeof(float));
    }
    r->t = a->t;
    fvec pa = b.params, pr = b.params;
    b.load(b.grads, "gpt2.grad2.");
    a->step(pa.data(), b.grads.data(), b.specs, lr[2], scale[2]);
    r->step(pr.data(), b.grads.data(), b.specs, lr[2], scale[2]);
    EXPECT_EQ(0, std::memcmp(pa.data(), pr.data(), b.n * sizeof(float)));
}

TEST(Optimizers, StateTensorsResumeBitwise) {
    SingleThreaded one;
    Buffers b("gpt2");
    check_resume<Muon<CpuBackend>>(
        b, [&](CpuBackend& be) { return std::make_unique<Muon<CpuBackend>>(be, b.specs, b.cfg, muon_options(true)); });
    check_resume<AdamMini<CpuBackend>>(b, [&](CpuBackend& be) {
        return std::make_unique<AdamMini<CpuBackend>>(be, b.specs, b.cfg, adam_mini_options());
    });
    // names are unique (they become checkpoint keys)
    CpuBackend be;
    Muon<CpuBackend> m(be, b.specs, b.cfg, muon_options(true));
    AdamMini<CpuBackend> a(be, b.specs, b.cfg, adam_mini_options());
    std::map<std::string, int> seen;
    for (const auto& t : m.state_tensors()) EXPECT_EQ(seen[t.name]++, 0) << t.name;
    for (const auto& t : a.state_tensors()) EXPECT_EQ(seen[t.name]++, 0) << t.name;
}

// ---- memory: planner formulas against allocations and a hand count ----

// A backend that allocates nothing (the models only lay out their tensors): specs of full-size models.
struct LayoutBackend {
    using act_t = float;
    using grad_t = float;
    static constexpr DType act_dtype = DType::F32;
    static constexpr DType grad_dtype = DType::F32;
    static constexpr bool master_weights = false;
    static size_t classifier_scratch_floats(size_t N, int V) { return CpuBackend::classifier_scratch_floats(N, V); }
    uintptr_t next = 1 << 20;
    void* alloc(size_t bytes) {
        void* p = (void*)next;
        next += align_up(bytes, TENSOR_ALIGN) + TENSOR_ALIGN;
        return p;
    }
    void free(void*, size_t) {}
    void check_attention_shape(int, int) const {}
    void rope_table(float*, int, int, float) {}
    void prac_refresh_discard(const float*) {}
};

TEST(Optimizers, StateBytes) {
    // the fixture's tiny models: what the constructors allocate is what the planner formulas say
    for (const char* arch : {"gpt2", "llama"}) {
        Buffers b(arch);
        CpuBackend be;
        size_t before = be.live_bytes;
        for (bool split : {true, false}) {
            Muon<CpuBackend> opt(be, b.specs, b.cfg, muon_options(split));
            EXPECT_EQ(be.live_bytes - before, Muon<CpuBackend>::state_bytes(b.specs) +
                                                  Muon<CpuBackend>::scratch_bytes(b.specs, b.cfg, split));
            size_t listed = 0;
            for (const OptimizerStateTensor& t : opt.state_tensors()) listed += t.numel;
            EXPECT_EQ(listed * sizeof(float), Muon<CpuBackend>::state_bytes(b.specs));
        }
        {
            AdamMini<CpuBackend> opt(be, b.specs, b.cfg, adam_mini_options());
            EXPECT_EQ(be.live_bytes - before, AdamMini<CpuBackend>::state_bytes(b.specs, b.cfg));
            size_t listed = 0;
            for (const OptimizerStateTensor& t : opt.state_tensors()) listed += t.numel;
            EXPECT_EQ(listed * sizeof(float), AdamMini<CpuBackend>::state_bytes(b.specs, b.cfg));
        }
    }
    // hand counts for the tiny GPT-2 (L = 2, NH = 2, C = 16, F = 64, Vp = 64, maxT = 12): Muon's momentum is
    // L (3C² + C² + 2FC), AdamW's two moments cover the rest. Newton-Schulz batches all matrices of one shape here
    // (far below MUON_BATCH_BYTES); per matrix (r, c), m = min(r, c), u is r c and the work A, B (m²) + the next X
    // (r c). Split: the 4L (C, C) matrices q, k, v, attproj give u = 4L C² = 2048 and work 4L 3C² = 6144 (fcw's and
    // fcprojw's pairs: u = L F C = 2048, work L (2C² + F C) = 3072). Unsplit: qkvw's pair (3C, C) has u = 3L C² =
    // 1536, work L (2C² + 3C²) = 2560, attproj's u = L C², work 3L C²; the fc pairs are the largest: 2048, 3072.
    {
        Buffers b("gpt2");
        size_t L = 2, C = 16, F = 64, Vp = 64, T = 12, NH = 2;
        size_t hidden = L * (4 * C * C + 2 * F * C);
        size_t rest = Vp * C + T * C + L * (4 * C + 3 * C + C + F + C) + 2 * C;
        EXPECT_EQ(hidden + rest, count_params(b.specs));
        EXPECT_EQ(Muon<CpuBackend>::state_bytes(b.specs), 4 * (hidden + 2 * rest));
        EXPECT_EQ(Muon<CpuBackend>::scratch_bytes(b.specs, b.cfg, true), 4 * (4 * L * C * C + 4 * L * 3 * C * C));
        EXPECT_EQ(Muon<CpuBackend>::scratch_bytes(b.specs, b.cfg, false), 4 * (L * F * C + L * (2 * C * C + F * C)));
        size_t blocks = Vp + T + L * (2 * NH + 3 * C + F + 8) + 2;
        EXPECT_EQ(AdamMini<CpuBackend>::state_bytes(b.specs, b.cfg), 4 * (hidden + rest + blocks));
    }
    // full-size models: against AdamW's 2 floats per parameter
    for (auto [arch, name] : {std::pair{Arch::GPT2, "gpt2-124m"}, {Arch::LLAMA, "llama-130m"}}) {
        ModelConfig cfg = model_config_load(arch, name);
        LayoutBackend lb;
        std::vector<ParamSpec> specs;
        if (arch == Arch::GPT2) specs = GPT2<LayoutBackend>(lb, cfg).param_specs;
        else specs = Llama<LayoutBackend>(lb, cfg).param_specs;
        size_t N = count_params(specs), L = cfg.num_layers, C = cfg.channels, F = cfg.hidden, NH = cfg.num_heads;
        size_t Vp = cfg.padded_vocab_size;
        size_t hidden = arch == Arch::GPT2 ? L * (4 * C * C + 2 * F * C) : L * (4 * C * C + 3 * F * C);
        size_t blocks = arch == Arch::GPT2 ? Vp + cfg.max_seq_len + L * (2 * NH + 3 * C + F + 8) + 2
                                           : Vp + L * (2 * NH + 3 * C + 2 * F + 2) + 1 + Vp;
        size_t muon = Muon<LayoutBackend>::state_bytes(specs), mini = AdamMini<LayoutBackend>::state_bytes(specs, cfg);
        EXPECT_EQ(muon, 4 * (hidden + 2 * (N - hidden))) << name;
        EXPECT_EQ(mini, 4 * (N + blocks)) << name;
        std::printf("  %-10s state: AdamW %.1f MiB | Muon %.1f MiB (+%.1f MiB Newton-Schulz scratch) | Adam-mini "
                    "%.1f MiB\n",
                    name, 8.0 * N / 1048576.0, muon / 1048576.0,
                    Muon<LayoutBackend>::scratch_bytes(specs, cfg, true) / 1048576.0, mini / 1048576.0);
    }
}

// Newton-Schulz batches (train/optim_muon.h): every matrix in exactly one batch of its shape, hand counts at real
// widths with MUON_BATCH_BYTES = 64 MiB. GPT-2 124M: a (768, 768) matrix needs u + work = 768² + 3 * 768² floats
// = 9437184 bytes -> 7 per batch (67108864 / 9437184 = 7.1): the 48 of q, k, v, attproj make 6 batches of 7 and one
// of 6; fcw (3072, 768) needs (2 * 2359296 + 2 * 768²) * 4 = 23592960 bytes -> 2 per batch, 6 batches. LLaMA-1B:
// a (2048, 2048) matrix needs 4 * 2048² * 4 = 67108864 bytes, the whole limit: single-matrix batches.
TEST(Optimizers, MuonBatchesByShape) {
    for (auto [arch, name] : {std::pair{Arch::GPT2, "gpt2-124m"}, {Arch::LLAMA, "llama-1b"}}) {
        ModelConfig cfg = model_config_load(arch, name);
        LayoutBackend lb;
        std::vector<ParamSpec> specs = arch == Arch::GPT2 ? GPT2<LayoutBackend>(lb, cfg).param_specs
                                                          : Llama<LayoutBackend>(lb, cfg).param_specs;
        MuonLayout lay = muon_layout(specs, cfg, true);
        std::vector<int> seen(lay.matrices.size(), 0);
        std::map<std::pair<int, int>, std::vector<size_t>> sizes;
        for (const MuonBatch& b : lay.batches) {
            sizes[{b.rows, b.cols}].push_back(b.matrices.size());
            for (size_t i : b.matrices) {
                seen[i]++;
                EXPECT_EQ(lay.matrices[i].rows, b.rows) << name << " " << lay.matrices[i].name;
                EXPECT_EQ(lay.matrices[i].cols, b.cols) << name << " " << lay.matrices[i].name;
            }
        }
        for (size_t i = 0; i < seen.size(); i++) EXPECT_EQ(seen[i], 1) << name << " " << lay.matrices[i].name;
        if (arch == Arch::GPT2) {
            EXPECT_EQ(sizes[std::make_pair(768, 768)], (std::vector<size_t>{7, 7, 7, 7, 7, 7, 6})) << name;
            EXPECT_EQ(sizes[std::make_pair(3072, 768)], (std::vector<size_t>(6, 2))) << name;
        } else {
            EXPECT_EQ(sizes[std::make_pair(2048, 2048)], (std::vector<size_t>(4 * 24, 1))) << name;
        }
    }
}

// ---- with every PRAC mode: a few steps on a fixed batch lower the loss ----

template <template <class> class M, class MakeOpt>
void train_a_little(Arch arch, const char* name, PracMode mode, const char* opt_name, MakeOpt make_opt) {
    ModelConfig cfg = model_config_load(arch, name);
    cfg.vocab_size = cfg.padded_vocab_size = 128;  // the head dominates the tiny models' cost on the CPU
    PracOptions prac;
    prac.mode = mode;
    CpuBackend be;
    M<CpuBackend> model(be, cfg, prac);
    model.prac_log = nullptr;
    int B = 2, T = 16, N = B * T;
    model.allocate_activations(B, T);
    model.init_weights(11);
    std::vector<int32_t> inputs(N), targets(N);
    Rng rng(21);
    for (int i = 0; i < N; i++) {
        inputs[i] = (int32_t)(rng.gen() % cfg.vocab_size);
        targets[i] = (int32_t)(rng.gen() % cfg.vocab_size);
    }
    auto opt = make_opt(be, model.param_specs, cfg);
    float first = 0, last = 0;
    for (int step = 0; step < 12; step++) {
        model.sched.begin_step(prac, step);
        model.zero_grad();
        float loss = model.forward(inputs.data(), targets.data(), 1.0f / N);
        model.backward();
        ASSERT_TRUE(std::isfinite(loss)) << name << " " << prac_mode_name(mode) << " " << opt_name;
        opt->step(model.params_memory, model.grads_memory, model.param_specs, 3e-3f, 1.0f);
        (step == 0 ? first : last) = loss;
    }
    std::printf("  %-10s %-4s %-9s loss %.3f -> %.3f\n", name, prac_mode_name(mode), opt_name, first, last);
    EXPECT_LT(last, first - 0.3f) << name << " " << prac_mode_name(mode) << " " << opt_name;
}

TEST(Optimizers, TrainWithEveryPracMode) {
    SingleThreaded one;
    auto muon = [](CpuBackend& be, const std::vector<ParamSpec>& specs, const ModelConfig& cfg) {
        MuonOptions o;
        o.weight_decay = 0.1f;
        return std::make_unique<Muon<CpuBackend>>(be, specs, cfg, o);
    };
    auto mini = [](CpuBackend& be, const std::vector<ParamSpec>& specs, const ModelConfig& cfg) {
        AdamMiniOptions o;
        o.weight_decay = 0.1f;
        return std::make_unique<AdamMini<CpuBackend>>(be, specs, cfg, o);
    };
    for (PracMode mode : {PracMode::NONE, PracMode::PAC, PracMode::RAC, PracMode::PRAC}) {
        train_a_little<GPT2>(Arch::GPT2, "gpt2-tiny", mode, "muon", muon);
        train_a_little<GPT2>(Arch::GPT2, "gpt2-tiny", mode, "adam-mini", mini);
        train_a_little<Llama>(Arch::LLAMA, "llama-tiny", mode, "muon", muon);
        train_a_little<Llama>(Arch::LLAMA, "llama-tiny", mode, "adam-mini", mini);
    }
}

}  // namespace
