// RSO, randomized subspace optimization (train/optim_rso.h, kernels/rso.h) on the CPU backend.
//
// - The subspaces: orthonormal, and isotropic on average (E[P Pᵀ] = (r/n) I, Haar), a new draw per iteration.
// - The update rule, step by step, against a direct float64 implementation written here from the method's
//   equations (inner Adam from a fresh state every outer iteration, proximal term, merge, AdamW for the rest).
// - Between draws every update lies in the subspace: W_t - W_k = B Pᵀ.
// - On the quadratic f(W) = ½||W - W*||², the subproblem min_B f(W_k + B Pᵀ) + (c/2)||B||² has the solution
//   B = (W* - W_k) P / (1 + c), so the error E = W - W* follows E_{k+1} = E_k (I - P Pᵀ / (1 + c)) and, over the
//   Haar draw, E||E_{k+1}||² = (1 - (2a - a²) r/n) ||E_k||² with a = 1 / (1 + c). The optimizer (inner Adam, a
//   cosine inner schedule) must reproduce that contraction factor.
// - In a model, storing X·P instead of X (the method's activation memory) gives B the same gradient as storing X.
// - The planner counts RSO's state and the projected inputs exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_backend.h"
#include "model/config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/planner.h"
#include "prac/prac.h"
#include "test/test_util.h"
#include "train/optim_rso.h"
#include "train/optimizers.h"
#include "test/worst.h"  // worst_of

namespace {

const float* state_of(const Rso<CpuBackend>& opt, const std::string& name) {
    for (const OptimizerStateTensor& t : opt.state_tensors())
        if (t.name == name) return t.data;
    ADD_FAILURE() << "no state tensor " << name;
    return nullptr;
}

// ||A||_F² of a (rows, cols) row-major double matrix
double frob2(const std::vector<double>& a) {
    double s = 0;
    for (double x : a) s += x * x;
    return s;
}

TEST(RsoSubspace, OrthonormalAndIsotropicOverDraws) {
    // (P Pᵀ)_ii of a Haar P (n, r) is Beta(r/2, (n-r)/2): mean r/n = 0.25, sd sqrt(0.25 * 0.75 * 2 / 18) = 0.144;
    // the mean over 2000 draws has sd 0.0032 (off-diagonal entries: smaller), so 0.02 is a > 6 sigma bound.
    // The mean alone cannot tell a Haar subspace from r random coordinate axes (also isotropic on average), so the
    // second moment too: E[(P Pᵀ)_ii²] = r (r + 2) / (n (n + 2)) = 0.0833 for Haar (Beta's second moment), r / n =
    // 0.25 for axes; (P Pᵀ)_ii² has sd 0.0906 (Beta's fourth moment 120/7920), its mean over 2000 draws 0.0020, so
    // 0.012 is a 5.9 sigma bound (each of the 16 at about 4e-9).
    const int n = 16, r = 4, draws = 2000;
    std::vector<double> mean((size_t)n * n, 0.0), second(n, 0.0);
    std::vector<float> P((size_t)n * r), first;
    for (int d = 0; d < draws; d++) {
        PracDrawKey key{7, RSO_DRAW_SITE_BASE, 0, (uint64_t)d, PRAC_DRAW_RSO};
        ASSERT_EQ(prac_random_basis_cpu(P.data(), n, r, key), 0);
        for (int a = 0; a < r; a++)
            for (int b = 0; b < r; b++) {
                double dot = 0;
                for (int i = 0; i < n; i++) dot += (double)P[i * r + a] * P[i * r + b];
                ASSERT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5);
            }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double pp = 0;
                for (int a = 0; a < r; a++) pp += (double)P[i * r + a] * P[j * r + a];
                mean[i * n + j] += pp / draws;
                if (i == j) second[i] += pp * pp / draws;
            }
        if (d == 0) first = P;
        if (d == 1) EXPECT_NE(first, P) << "a new iteration must draw a new subspace";
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) EXPECT_NEAR(mean[i * n + j], i == j ? (double)r / n : 0.0, 0.02) << i << "," << j;
    for (int i = 0; i < n; i++) EXPECT_NEAR(second[i], (double)r * (r + 2) / (n * (n + 2)), 0.012) << i;
}

// Two subspace-optimized specs (one with 2 layers, one wider than tall) and an AdamW one.
struct SmallProblem {
    std::vector<ParamSpec> specs;
    std::vector<RsoBlock> blocks;
    size_t numel = 0;
    SmallProblem() {
        auto add = [&](const char* name, size_t n, bool decay) {
            ParamSpec s;
            s.name = name;
            s.offset = numel;
            s.numel = n;
            s.decay = decay;
            specs.push_back(s);
            numel += n;
        };
        add("w", 2 * 12 * 10, true);
        add("bias", 7, false);
        add("u", 6 * 16, true);
        blocks.push_back({"w", specs[0].offset, 12 * 10, 2, 12, 10, 3, -1});
        blocks.push_back({"u", specs[2].offset, 6 * 16, 1, 6, 16, 4, -1});
    }
};

TEST(Rso, MatchesADirectFloat64Implementation) {
    SmallProblem pb;
    RsoOptions o;
    o.gap = 3;
    o.prox = 0.5f;
    o.weight_decay = 0.1f;
    o.seed = 99;
    CpuBackend be;
    Rso<CpuBackend> opt(be, pb.specs, pb.blocks, o);

    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> params(pb.numel), grads(pb.numel);
    for (float& x : params) x = 0.3f * normal(rng);
    std::vector<double> W(params.begin(), params.end());  // the reference's parameters

    // reference state per block and layer: P (from the optimizer's draw; checked orthonormal above), B, m, v
    struct Ref {
        std::vector<double> P, B, m, v;
    };
    std::vector<std::vector<Ref>> ref(pb.blocks.size());
    auto take_P = [&](bool first) {
        for (size_t b = 0; b < pb.blocks.size(); b++) {
            const RsoBlock& k = pb.blocks[b];
            const float* P = state_of(opt, "rso." + k.name + ".proj");
            ref[b].resize(k.layers);
            for (int l = 0; l < k.layers; l++) {
                std::vector<double> fresh(P + l * k.proj_numel(), P + (l + 1) * k.proj_numel());
                if (!first) EXPECT_NE(fresh, ref[b][l].P) << "no new draw at an outer boundary";
                ref[b][l] = {fresh, std::vector<double>(k.var_numel(), 0.0), std::vector<double>(k.var_numel(), 0.0),
                             std::vector<double>(k.var_numel(), 0.0)};
            }
        }
    };
    take_P(true);
    std::vector<double> dm(7, 0.0), dv(7, 0.0);  // AdamW moments of "bias"
    const double b1 = o.beta1, b2 = o.beta2, eps = o.eps, wd = o.weight_decay, prox = o.prox;

    for (int t = 0; t < 8; t++) {  // crosses the draws after steps 3 and 6
        for (float& g : grads) g = normal(rng);
        float lr = 0.01f * (1.0f + 0.1f * t), gs = t % 2 ? 0.7f : 1.0f;
        opt.step(params.data(), grads.data(), pb.specs, lr, gs);

        int tau = t % o.gap;
        double step = lr * std::sqrt(1 - std::pow(b2, tau + 1)) / (1 - std::pow(b1, tau + 1));
        for (size_t b = 0; b < pb.blocks.size(); b++) {
            const RsoBlock& k = pb.blocks[b];
            int m = k.rows, n = k.cols, r = k.rank;
            for (int l = 0; l < k.layers; l++) {
                Ref& s = ref[b][l];
                double* w = W.data() + k.offset + l * k.layer_stride;
                const float* g = grads.data() + k.offset + l * k.layer_stride;
                std::vector<double> N((size_t)m * r);
                for (int i = 0; i < m; i++)
                    for (int a = 0; a < r; a++) {
                        double R = 0;
                        for (int j = 0; j < n; j++) R += (double)gs * g[i * n + j] * s.P[j * r + a];
                        size_t e = (size_t)i * r + a;
                        R += prox * s.B[e];
                        s.m[e] = b1 * s.m[e] + (1 - b1) * R;
                        s.v[e] = b2 * s.v[e] + (1 - b2) * R * R;
                        N[e] = s.m[e] / (std::sqrt(s.v[e]) + eps);
                        s.B[e] -= step * N[e];
                    }
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double back = 0;
                        for (int a = 0; a < r; a++) back += N[(size_t)i * r + a] * s.P[j * r + a];
                        w[i * n + j] = (w[i * n + j] - step * back) * (1 - lr * wd);
                    }
            }
        }
        // AdamW (torch order) on the bias, with the global step count
        for (int i = 0; i < 7; i++) {
            size_t e = pb.specs[1].offset + i;
            double g = (double)gs * grads[e];
            dm[i] = b1 * dm[i] + (1 - b1) * g;
            dv[i] = b2 * dv[i] + (1 - b2) * g * g;
            double mh = dm[i] / (1 - std::pow(b1, t + 1)), vh = dv[i] / (1 - std::pow(b2, t + 1));
            W[e] -= lr * mh / (std::sqrt(vh) + eps);  // no decay: the spec says decay = false
        }
        double worst = 0;
        for (size_t i = 0; i < pb.numel; i++) worst = worst_of(worst, std::fabs(W[i] - params[i]));
        // parameters ~0.3..1, fp32 arithmetic over 8 steps: a few ulp of 1 per step
        EXPECT_LT(worst, 2e-6) << "step " << t;
        // B as state, against the reference
        for (size_t b = 0; b < pb.blocks.size(); b++) {
            const float* B = state_of(opt, "rso." + pb.blocks[b].name + ".B");
            for (int l = 0; l < pb.blocks[b].layers; l++)
                for (size_t e = 0; e < pb.blocks[b].var_numel(); e++) {
                    double want = (t + 1) % o.gap == 0 ? 0.0 : ref[b][l].B[e];  // reset after a merge
                    ASSERT_NEAR(B[l * pb.blocks[b].var_numel() + e], want, 2e-6) << "step " << t;
                }
        }
        if ((t + 1) % o.gap == 0) take_P(false);
    }
    EXPECT_EQ(opt.t, 8);
}

TEST(Rso, UpdatesStayInTheSubspaceBetweenDraws) {
    SmallProblem pb;
    RsoOptions o;
    o.gap = 4;
    CpuBackend be;
    Rso<CpuBackend> opt(be, pb.specs, pb.blocks, o);
    std::mt19937 rng(6);
    std::normal_distribution<float> normal;
    std::vector<float> params(pb.numel), grads(pb.numel);
    for (float& x : params) x = normal(rng);
    const RsoBlock& k = pb.blocks[0];  // w, layer 1
    const float* w = params.data() + k.offset + k.layer_stride;
    for (int outer = 0; outer < 3; outer++) {
        std::vector<float> Wk(w, w + k.rows * k.cols);
        const float* layer1 = state_of(opt, "rso.w.proj") + k.proj_numel();
        std::vector<float> P(layer1, layer1 + k.proj_numel());
        for (int inner = 0; inner < o.gap; inner++) {
            for (float& g : grads) g = normal(rng);
            opt.step(params.data(), grads.data(), pb.specs, 0.05f, 1.0f);
            const float* B = state_of(opt, "rso.w.B") + k.var_numel();
            // W - W_k = B Pᵀ (B is reset after the last inner step: compare with the residual projection then)
            double off = 0, change = 0;
            for (int i = 0; i < k.rows; i++) {
                std::vector<double> d(k.cols);
                for (int j = 0; j < k.cols; j++) d[j] = (double)w[i * k.cols + j] - Wk[i * k.cols + j];
                for (int j = 0; j < k.cols; j++) {
                    double in = 0;  // (d P Pᵀ)_j
                    for (int a = 0; a < k.rank; a++) {
                        double c = 0;
                        for (int jj = 0; jj < k.cols; jj++) c += d[jj] * P[jj * k.rank + a];
                        in += c * P[j * k.rank + a];
                    }
                    off = worst_of(off, std::fabs(d[j] - in));
                    change = std::max(change, std::fabs(d[j]));
                    if (inner + 1 < o.gap) {
                        double bp = 0;
                        for (int a = 0; a < k.rank; a++) bp += (double)B[i * k.rank + a] * P[j * k.rank + a];
                        EXPECT_NEAR(d[j], bp, 1e-6);
                    }
                }
            }
            EXPECT_GT(change, 1e-3);
            EXPECT_LT(off, 1e-6) << "outer " << outer << " inner " << inner << ": an update left the subspace";
        }
    }
}

// f(W) = ½||W - W*||² (rows m, cols n); one outer iteration = `inner` Adam steps with a cosine schedule that
// starts at a fraction of the error's RMS (Adam's steps have the size of lr whatever the gradient's scale).
// Appends each outer iteration's contraction ||E_{k+1}||² / ||E_k||² to *ratios, and to *exact the contraction of the
// exact minimizer over the iteration's subspace. (A chain stays short enough that the error stays far above fp32's
// denormals, where the inner solve would stop being exact and slow down.)
void quadratic_contractions(float prox, int outers, uint32_t seed, std::vector<double>* ratios,
                            std::vector<double>* exact) {
    const int m = 8, n = 16, r = 4, inner = 300;
    std::vector<ParamSpec> specs(1);
    specs[0].name = "w";
    specs[0].offset = 0;
    specs[0].numel = (size_t)m * n;
    specs[0].decay = true;
    RsoOptions o;
    o.gap = inner;
    o.prox = prox;
    o.beta2 = 0.999f;
    o.seed = 3 + seed;
    CpuBackend be;
    Rso<CpuBackend> opt(be, specs, {{"w", 0, (size_t)m * n, 1, m, n, r, -1}}, o);
    std::mt19937 rng(8 + seed);
    std::normal_distribution<float> normal;
    std::vector<float> W(m * n), target(m * n), G(m * n), E0(m * n), P(n * r);
    for (int i = 0; i < m * n; i++) {
        W[i] = normal(rng);
        target[i] = normal(rng);
    }
    auto err2 = [&] {
        double s = 0;
        for (int i = 0; i < m * n; i++) s += ((double)W[i] - target[i]) * ((double)W[i] - target[i]);
        return s;
    };
    for (int k = 0; k < outers; k++) {
        double before = err2();
        for (int i = 0; i < m * n; i++) E0[i] = W[i] - target[i];
        double lr0 = 0.05 * std::sqrt(before / (m * n));
        for (int s = 0; s < inner; s++) {
            for (int i = 0; i < m * n; i++) G[i] = W[i] - target[i];
            float lr = (float)(lr0 * 0.5 * (1 + std::cos(M_PI * s / inner)));
            opt.step(W.data(), G.data(), specs, lr, 1.0f);
            if (s == 0) std::copy_n(state_of(opt, "rso.w.proj"), n * r, P.begin());  // this outer iteration's P
        }
        ratios->push_back(err2() / before);
        // the exact inner minimizer: E_{k+1} = E_k (I - a P Pᵀ), a = 1 / (1 + prox)
        double a = 1.0 / (1.0 + prox), after = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double e = (double)E0[i * n + j];
                for (int c = 0; c < r; c++) {
                    double d = 0;  // (E_k P)_ic
                    for (int l = 0; l < n; l++) d += (double)E0[i * n + l] * P[l * r + c];
                    e -= a * d * P[j * r + c];
                }
                after += e * e;
            }
        exact->push_back(after / before);
    }
}

TEST(Rso, ConvergesOnAQuadraticAtThePredictedRate) {
    // Each outer iteration's inner solve reaches the exact minimizer over its subspace, E_{k+1} = E_k (I - a P Pᵀ)
    // (a = 1 / (1 + prox)), to within 0.01 of the contraction (measured: 3.4e-3 at prox 0, 5e-5 at prox 1; the wrong
    // P, the next outer iteration's, is off by up to 0.56). Those exact contractions have the conditional mean
    // 1 - (2a - a²) r/n for every E_k (P is a uniformly random r-dimensional projection: E||E_k P||² = (r/n)||E_k||²),
    // r/n = 1/4: prox 0 (a = 1) 0.75, prox 1 (a = 1/2) 0.8125. Their mean over 480 outer iterations (8 chains of 60)
    // is within t·sd/sqrt(480) of it, t = 4.956 Student's two-sided quantile at 1e-6 with 479 degrees of freedom (sd
    // their sample standard deviation).
    for (auto [prox, want] : {std::pair{0.0f, 0.75}, std::pair{1.0f, 0.8125}}) {
        std::vector<double> ratios, exact;
        for (uint32_t chain = 0; chain < 8; chain++) quadratic_contractions(prox, 60, chain, &ratios, &exact);
        double n = (double)exact.size(), mean = 0, ss = 0, gap = 0;
        for (double x : exact) mean += x / n;
        for (double x : exact) ss += (x - mean) * (x - mean);
        for (size_t i = 0; i < ratios.size(); i++) gap = worst_of(gap, std::fabs(ratios[i] - exact[i]));
        double sd = std::sqrt(ss / (n - 1)), bound = 4.956 * sd / std::sqrt(n);
        double worst = *std::max_element(ratios.begin(), ratios.end());
        std::printf("  prox %.1f: mean contraction %.4f (theory %.4f, bound +-%.4f), sd %.4f; inner solve off by at "
                    "most %.5f; worst %.4f\n", prox, mean, want, bound, sd, gap, worst);
        EXPECT_LT(gap, 0.01) << "prox " << prox << ": the inner solve missed its subspace's minimizer";
        EXPECT_NEAR(mean, want, bound) << "prox " << prox;
        EXPECT_LT(bound, 0.04) << "the bound must stay able to tell prox 0 from prox 1";
        EXPECT_LT(worst, 1.0) << "an outer iteration increased the error";
    }
}

// Tiny GPT-2 / LLaMA trained with RSO while the linear sites store X·P (the method). At every step a second
// model that stores X exactly is evaluated at the same parameters on the same batch: B's gradient G P (G the
// weight gradient) must agree, since the buffer holds G' = dYᵀ (X P) Pᵀ and G' P = G P. Every other gradient
// (embeddings, norms, biases) is computed from the same tensors and must agree too. 7 steps with gap 3 cover
// two redraws of P.
template <template <class> class M>
void projected_gradient_is_exact(Arch arch, const char* name) {
    ModelConfig cfg = model_config_load(arch, name);
    cfg.vocab_size = cfg.padded_vocab_size = 128;
    const int rank = 8, B = 2, T = 16, N = B * T;
    PracOptions projected, exact;
    projected.rso_rank = rank;
    CpuBackend be;
    M<CpuBackend> model(be, cfg, projected), twin(be, cfg, exact);
    model.prac_log = twin.prac_log = nullptr;
    for (M<CpuBackend>* m : {&model, &twin}) {
        m->allocate_activations(B, T);
        m->init_weights(11);
    }
    EXPECT_LT(model.arena.acts_bytes, twin.arena.acts_bytes) << "storing X·P must take less memory than X";
    RsoOptions o;
    o.rank = rank;
    o.gap = 3;
    o.weight_decay = 0.1f;
    Rso<CpuBackend> opt(be, model.param_specs, cfg, o);
    opt.bind_sites(model.sites);
    std::vector<int32_t> inputs(N), targets(N);
    std::mt19937 rng(21);
    size_t n = model.param_buffer_numel;
    for (int step = 0; step < 7; step++) {
        // the sites compress with the optimizer's current P
        const float* Pq = state_of(opt, "rso.qkvw.proj");
        for (size_t i = 0; i < (size_t)cfg.channels * rank; i++) ASSERT_EQ(model.sites[SITE_LN1].P[i], Pq[i]);
        for (int i = 0; i < N; i++) {
            inputs[i] = (int32_t)(rng() % cfg.vocab_size);
            targets[i] = (int32_t)(rng() % cfg.vocab_size);
        }
        std::copy(model.params_memory, model.params_memory + n, twin.params_memory);
        for (M<CpuBackend>* m : {&model, &twin}) {
            m->sched.begin_step(projected, step);
            m->zero_grad();
            m->forward(inputs.data(), targets.data(), 1.0f / N);
            m->backward();
        }
        std::vector<bool> in_block(n, false);
        for (const RsoBlock& k : opt.blocks) {
            const float* P = state_of(opt, "rso." + k.name + ".proj");
            for (int l = 0; l < k.layers; l++) {
                size_t off = k.offset + l * k.layer_stride;
                std::fill(in_block.begin() + off, in_block.begin() + off + (size_t)k.rows * k.cols, true);
                double worst = 0, scale = 0;
                for (int i = 0; i < k.rows; i++)
                    for (int a = 0; a < k.rank; a++) {
                        double ra = 0, rb = 0;
                        for (int j = 0; j < k.cols; j++) {
                            double pj = P[l * k.proj_numel() + (size_t)j * k.rank + a];
                            ra += model.grads_memory[off + (size_t)i * k.cols + j] * pj;
                            rb += twin.grads_memory[off + (size_t)i * k.cols + j] * pj;
                        }
                        worst = worst_of(worst, std::fabs(ra - rb));
                        scale = std::max(scale, std::fabs(rb));
                    }
                // fp32 sums of N = 32 rows in two orders: ~1e-7 relative to the largest entry
                EXPECT_LT(worst, 1e-5 * scale) << name << " " << k.name << "[" << l << "] step " << step;
            }
        }
        double worst = 0, scale = 0;
        for (size_t i = 0; i < n; i++)
            if (!in_block[i]) {
                worst = worst_of(worst, (double)std::fabs(model.grads_memory[i] - twin.grads_memory[i]));
                scale = std::max(scale, (double)std::fabs(twin.grads_memory[i]));
            }
        EXPECT_LT(worst, 1e-5 * scale) << name << " other gradients, step " << step;
        opt.step(model.params_memory, model.grads_memory, model.param_specs, 1e-2f, 1.0f);
    }
}

TEST(Rso, ProjectedInputsGiveTheExactSubspaceGradientGpt2) {
    SingleThreaded one;
    projected_gradient_is_exact<GPT2>(Arch::GPT2, "gpt2-tiny");
}
TEST(Rso, ProjectedInputsGiveTheExactSubspaceGradientLlama) {
    SingleThreaded one;
    projected_gradient_is_exact<Llama>(Arch::LLAMA, "llama-tiny");
}

TEST(Rso, PlannerCountsStateAndProjectedInputs) {
    // GPT-2 124M, B = 8, T = 1024, rank 256, CUDA bf16: every tensor is a multiple of 256 bytes (exact sums)
    ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-124m");
    const size_t L = 12, N = 8 * 1024, C = 768, F = 3072, r = 256, bf16 = 2, f32 = 4;
    OptimizerChoice rso;
    rso.kind = "rso";
    EXPECT_EQ(rso_rank_of(rso, cfg), 256);
    PracOptions prac;
    prac.rso_rank = 256;
    MemoryPlan p = plan_memory(cfg, prac, 8, 1024, PlanTarget::CUDA_BF16, &rso);
    PracOptions none;
    MemoryPlan base = plan_memory(cfg, none, 8, 1024, PlanTarget::CUDA_BF16);
    EXPECT_EQ(p.bytes("saved_linear"), L * N * 3 * r * bf16);  // ln1, ln2, gelu output as X·P
    EXPECT_EQ(p.bytes("saved_nonlinear"), base.bytes("saved_nonlinear"));
    EXPECT_EQ(p.bytes("saved_exact"), base.bytes("saved_exact"));
    EXPECT_EQ(p.bytes("prac_bases"), L * (C * r + C * r + F * r) * bf16);  // the sites' copies of P
    // per layer: P (n, r) and B, m, v (m, r) of qkvw (3C x C), attprojw (C x C), fcw (F x C), fcprojw (C x F);
    // AdamW m, v of everything else; the (F, r) scratch
    size_t blocks = L * ((C * r + 3 * 3 * C * r) + (C * r + 3 * C * r) + (C * r + 3 * F * r) + (F * r + 3 * C * r));
    size_t hidden = L * (3 * C * C + C * C + F * C + C * F);
    size_t dense = p.num_parameters - hidden;
    EXPECT_EQ(p.bytes("optimizer_state"), (blocks + 2 * dense + F * r) * f32);
    EXPECT_LT(p.bytes("optimizer_state"), base.bytes("optimizer_state"));

    // planned == allocated on the CPU backend (tiny model, the state of Rso<CpuBackend> itself)
    ModelConfig tiny = model_config_load(Arch::LLAMA, "llama-tiny");
    PracOptions tp;
    tp.rso_rank = 8;
    OptimizerChoice c;
    c.kind = "rso";
    c.rso_rank = 8;
    CpuBackend be;
    Llama<CpuBackend> model(be, tiny, tp);
    size_t before = be.live_bytes;
    model.allocate_activations(2, 16);
    size_t arena = be.live_bytes - before;
    before = be.live_bytes;
    auto opt = make_optimizer(be, c, tiny, model.param_specs, model.param_buffer_numel, 0, model.param_buffer_numel);
    MemoryPlan tpl = plan_memory(tiny, tp, 2, 16, PlanTarget::CPU_FP32, &c);
    EXPECT_EQ(tpl.bytes("optimizer_state"), be.live_bytes - before);
    size_t planned_arena = 0;
    for (const char* k :
         {"inputs", "saved_exact", "saved_linear", "saved_nonlinear", "transient", "loss", "prac_bases"})
        planned_arena += tpl.bytes(k);
    EXPECT_EQ(planned_arena, arena);
}

TEST(Rso, RefusesImpossibleRanksAndPrac) {
    ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-tiny");  // C = 64
    PracOptions prac;
    prac.rso_rank = 64;
    CpuBackend be;
    EXPECT_USER_ERROR(GPT2<CpuBackend>(be, cfg, prac), "RSO rank 64 is not below the width 64");
    prac.rso_rank = 8;
    prac.mode = PracMode::PRAC;
    EXPECT_USER_ERROR(GPT2<CpuBackend>(be, cfg, prac), "cannot be combined");
    PracOptions none;
    GPT2<CpuBackend> model(be, cfg, none);
    RsoOptions o;
    o.rank = 100;
    EXPECT_USER_ERROR(Rso<CpuBackend>(be, model.param_specs, cfg, o), "RSO rank 100 must be in [1, 64)");
}

}  // namespace
