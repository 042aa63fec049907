// GaLore optimizer (train/optim_galore.h, kernels/galore.h) on the CPU backend.
//
// The reference trajectory (test/fixtures/galore/reference.safetensors) comes from an independent float64
// PyTorch implementation written from the algorithm description (test/reference/make_galore_fixtures.py): 7
// steps on 6 small tensors (5 projected blocks: both projection sides, a fused spec split by rows, 2 stacked
// layers, a clipped rank; AdamW for the rest), update gap 3, so the projections are recomputed at steps 0, 3, 6
// and the kept moments meet a new basis twice. The fixture's gradients are drawn with separated singular
// values and unambiguous canonical signs, so fp32 SVD lands on the same vectors: we expect agreement to fp32
// round-off (parameters up to ~0.4: ulp 3e-8), measured 1.1e-7 on parameters and 1.9e-6 on projections (unit
// vectors; fp32 SVD); we allow 2e-6 absolute on parameters and 1e-4 on projections.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "kernels/cpu_backend.h"
#include "model/config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/optim_galore.h"
#include "train/optim_adamw.h"
#include "train/optim_rso.h"  // rso_default_rank
#include "test/test_util.h"
#include "test/worst.h"  // worst_of

namespace {

std::string fixture_path() { return std::string(PRAC_SOURCE_DIR) + "/test/fixtures/galore/reference.safetensors"; }

std::vector<float> read_f32(const SafeTensorsFile& f, const std::string& name) {
    std::vector<float> v(f.get(name).numel());
    f.read_f32(name, v.data(), v.size());
    return v;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = worst_of(d, (double)std::fabs(a[i] - b[i]));
    return d;
}

// The fixture's problem, mirrored from make_galore_fixtures.py (SPECS, BLOCKS): specs laid out contiguously.
struct Problem {
    std::vector<ParamSpec> specs;
    std::vector<GaloreBlock> blocks;
    size_t numel = 0;
    static constexpr int steps = 7, gap = 3;
    static constexpr float alpha = 0.25f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, wd = 0.1f;

    Problem() {
        struct S {
            const char* name;
            size_t numel;
            bool decay;
        };
        for (S s : {S{"emb", 7 * 4, true}, S{"tall", 12 * 8, true}, S{"norm", 4, false}, S{"wide", 2 * 6 * 10, true},
                    S{"fused", 2 * 14 * 6, true}, S{"small", 5 * 3, true}}) {
            specs.push_back({s.name, numel, s.numel, s.decay});
            numel += s.numel;
        }
        blocks = {
            galore_block("tall", spec("tall").offset, 12 * 8, 1, 12, 8, 4),
            galore_block("wide", spec("wide").offset, 6 * 10, 2, 6, 10, 4),
            galore_block("fused.a", spec("fused").offset, 14 * 6, 2, 9, 6, 3),
            galore_block("fused.b", spec("fused").offset + 9 * 6, 14 * 6, 2, 5, 6, 3),
            galore_block("small", spec("small").offset, 5 * 3, 1, 5, 3, 4),  // rank 4 > min(5, 3): clipped to 3
        };
    }
    const ParamSpec& spec(const std::string& name) const {
        for (const ParamSpec& s : specs)
            if (s.name == name) return s;
        throw std::runtime_error("no spec " + name);
    }
};

// Loads the fixture's buffers: initial params and per-step gradients / expected params (flat, spec layout).
struct Fixture {
    SafeTensorsFile f;
    Problem pb;
    std::vector<float> init, lrs, grad_scales;
    std::vector<std::vector<float>> grads, expected;

    Fixture() : f(safetensors_open(fixture_path())) {
        init = flat("init.");
        for (int s = 0; s < Problem::steps; s++) {
            grads.push_back(flat("grad." + std::to_string(s) + "."));
            expected.push_back(flat("param." + std::to_string(s) + "."));
        }
        lrs = read_f32(f, "lrs");
        grad_scales = read_f32(f, "grad_scales");
    }
    std::vector<float> flat(const std::string& prefix) {
        std::vector<float> buf(pb.numel);
        for (const ParamSpec& s : pb.specs) f.read_f32(prefix + s.name, buf.data() + s.offset, s.numel);
        return buf;
    }
};

template <class Opt>
Opt* make_opt(CpuBackend& be, const Problem& pb, int gap = Problem::gap) {
    return new Opt(be, pb.specs, pb.blocks, gap, Problem::alpha, Problem::beta1, Problem::beta2, Problem::eps,
                   Problem::wd);
}

}  // namespace

// (1) the C++ step reproduces the float64 PyTorch reference, every step, every tensor; and the projections.
TEST(Galore, MatchesReference) {
    Fixture fx;
    CpuBackend be;
    std::unique_ptr<GaLore<CpuBackend>> opt(make_opt<GaLore<CpuBackend>>(be, fx.pb));
    ASSERT_EQ(opt->blocks[4].rank, 3);  // "small" clipped, the reference slices the same way
    std::vector<float> params = fx.init;
    double worst_param = 0, worst_proj = 0;
    for (int s = 0; s < Problem::steps; s++) {
        opt->step(params.data(), fx.grads[s].data(), fx.pb.specs, fx.lrs[s], fx.grad_scales[s]);
        for (const ParamSpec& sp : fx.pb.specs) {
            double d = max_abs_diff(params.data() + sp.offset, fx.expected[s].data() + sp.offset, sp.numel);
            worst_param = worst_of(worst_param, d);
            EXPECT_LT(d, 2e-6) << "step " << s << " param " << sp.name;
        }
        for (size_t b = 0; b < opt->blocks.size(); b++) {
            const GaloreBlock& k = opt->blocks[b];
            std::vector<float> ref = read_f32(fx.f, "proj." + std::to_string(s) + "." + k.name);
            ASSERT_EQ(ref.size(), (size_t)k.layers * k.proj_numel()) << k.name;
            double d = max_abs_diff(opt->block_state[b].P, ref.data(), ref.size());
            worst_proj = worst_of(worst_proj, d);
            EXPECT_LT(d, 1e-4) << "step " << s << " projection " << k.name;
        }
    }
    // the trajectory moved the parameters far beyond the tolerance
    EXPECT_GT(max_abs_diff(params.data(), fx.init.data(), params.size()), 0.05);
    std::printf("GaLore vs float64 reference over %d steps: max |param diff| %.2e, max |P diff| %.2e\n",
                Problem::steps, worst_param, worst_proj);
}

// (2) projections are recomputed at t % T == 0 (t = 0-based step index) and at no other step.
TEST(Galore, RefreshExactlyAtMultiplesOfGap) {
    Fixture fx;
    for (int gap : {1, 2, 3, 5}) {
        CpuBackend be;
        std::unique_ptr<GaLore<CpuBackend>> opt(make_opt<GaLore<CpuBackend>>(be, fx.pb, gap));
        std::vector<float> params = fx.init;
        int expected_refreshes = 0;
        for (int s = 0; s < Problem::steps; s++) {
            std::vector<std::vector<float>> before;
            for (size_t b = 0; b < opt->blocks.size(); b++)
                before.emplace_back(opt->block_state[b].P,
                                    opt->block_state[b].P + opt->blocks[b].layers * opt->blocks[b].proj_numel());
            opt->step(params.data(), fx.grads[s].data(), fx.pb.specs, fx.lrs[s], fx.grad_scales[s]);
            bool due = s % gap == 0;
            expected_refreshes += due;
            EXPECT_EQ(opt->refreshes, expected_refreshes) << "gap " << gap << " step " << s;
            EXPECT_EQ(opt->last_refresh, s - s % gap) << "gap " << gap << " step " << s;
            // every step's gradient is fresh, so a refresh changes every block's P, and no other step does
            for (size_t b = 0; b < opt->blocks.size(); b++) {
                bool same = std::memcmp(before[b].data(), opt->block_state[b].P, before[b].size() * 4) == 0;
                EXPECT_EQ(same, !due) << "gap " << gap << " step " << s << " block " << opt->blocks[b].name;
            }
        }
    }
}

// (3) state_bytes is exactly what the optimizer allocates; the state tensors have GaLore's sizes.
TEST(Galore, StateBytesMatchAllocation) {
    for (Arch arch : {Arch::GPT2, Arch::LLAMA}) {
        ModelConfig cfg = model_config_load(arch, arch == Arch::GPT2 ? "gpt2-tiny" : "llama-tiny");
        CpuBackend be;
        std::vector<ParamSpec> specs;
        size_t n = 0;
        if (arch == Arch::GPT2) {
            GPT2<CpuBackend> m(be, cfg);
            specs = m.param_specs, n = m.param_buffer_numel;
        } else {
            Llama<CpuBackend> m(be, cfg);
            specs = m.param_specs, n = m.param_buffer_numel;
        }
        for (int rank : {1, 8, 16, 63}) {  // 63: the largest below the width 64 (galore_blocks refuses more)
            size_t planned = GaLore<CpuBackend>::state_bytes(specs, cfg, rank);
            size_t live = be.live_bytes;
            {
                GaLore<CpuBackend> opt(be, specs, cfg, rank, 200, 0.25f, 0.9f, 0.95f, 1e-8f, 0.1f);
                EXPECT_EQ(be.live_bytes - live, planned) << cfg.name << " rank " << rank;
                // expected state, counted from the shapes: per block and layer P (min(m,n) x r) and two
                // moments (max(m,n) x r); two AdamW moments of every other tensor
                size_t expect = 0, galore_params = 0, in_state = 0;
                for (const GaloreBlock& k : opt.blocks) {
                    int r = std::min(rank, std::min(k.rows, k.cols));
                    EXPECT_EQ(k.rank, r);
                    expect += (size_t)k.layers * r * (std::min(k.rows, k.cols) + 2 * std::max(k.rows, k.cols));
                    galore_params += (size_t)k.layers * k.rows * k.cols;
                }
                size_t dense = 0;
                for (const ParamSpec& s : specs) dense += s.numel;
                expect += 2 * (dense - galore_params);
                for (const GaloreStateTensor& t : opt.state_tensors(specs)) in_state += t.numel;
                EXPECT_EQ(in_state, expect) << cfg.name << " rank " << rank;
                if (rank == 8)  // well below AdamW's 2 floats per parameter on the projected weights
                    EXPECT_LT(expect, 2 * n - galore_params);
            }
            EXPECT_EQ(be.live_bytes, live) << "the destructor frees everything";
        }
    }
}

// Block layout: fused stacks split by rows into the nn.Linear weights GaLore sees; side by shape.
TEST(Galore, BlockLayout) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");  // C 64, F 176, L 2
    CpuBackend be;
    Llama<CpuBackend> m(be, cfg);
    std::vector<GaloreBlock> bl = galore_blocks(m.param_specs, cfg, 16);
    std::vector<std::string> names;
    for (const GaloreBlock& k : bl) names.push_back(k.name);
    EXPECT_EQ(names, (std::vector<std::string>{"qkvw.q", "qkvw.k", "qkvw.v", "attprojw", "fcw.gate", "fcw.up",
                                                "fcprojw"}));
    size_t qkv = 0, fcw = 0;
    for (const ParamSpec& s : m.param_specs) {
        if (s.name == "qkvw") qkv = s.offset;
        if (s.name == "fcw") fcw = s.offset;
    }
    EXPECT_EQ(bl[1].offset, qkv + 64 * 64);  // k rows follow q rows in each layer
    EXPECT_EQ(bl[1].layer_stride, (size_t)3 * 64 * 64);
    EXPECT_EQ(bl[5].offset, fcw + 176 * 64);  // up follows gate
    EXPECT_EQ(bl[5].layer_stride, (size_t)2 * 176 * 64);
    EXPECT_TRUE(bl[4].right());   // gate (176, 64): m >= n, P (64, r)
    EXPECT_FALSE(bl[6].right());  // down (64, 176): m < n, P (64, r)
    EXPECT_EQ(bl[6].moment_numel(), (size_t)16 * 176);

    ModelConfig g = model_config_load(Arch::GPT2, "gpt2-tiny");
    GPT2<CpuBackend> gm(be, g);
    names.clear();
    for (const GaloreBlock& k : galore_blocks(gm.param_specs, g, 16)) names.push_back(k.name);
    EXPECT_EQ(names, (std::vector<std::string>{"qkvw.q", "qkvw.k", "qkvw.v", "attprojw", "fcw", "fcprojw"}));
    // a rank of the width (64) or more projects nothing to a lower rank: refused (it was clipped silently, and
    // --galore-rank 100000 took more memory than AdamW)
    EXPECT_EQ(galore_blocks(gm.param_specs, g, 63).front().rank, 63);
    for (int r : {64, 100000}) EXPECT_USER_ERROR(galore_blocks(gm.param_specs, g, r), "not below the model's width 64",
                                                 "HINT");

    EXPECT_EQ(galore_default_rank(model_config_load(Arch::LLAMA, "llama-60m")), 128);
    EXPECT_EQ(galore_default_rank(model_config_load(Arch::LLAMA, "llama-130m")), 256);
    EXPECT_EQ(galore_default_rank(model_config_load(Arch::LLAMA, "llama-350m")), 256);
    EXPECT_EQ(galore_default_rank(model_config_load(Arch::LLAMA, "llama-1b")), 512);
    // GPT-2: the PRAC paper's ranks for GaLore and RSO (appendix D), not width / 4 (192 and 256)
    EXPECT_EQ(galore_default_rank(model_config_load(Arch::GPT2, "gpt2-124m")), 256);
    EXPECT_EQ(galore_default_rank(model_config_load(Arch::GPT2, "gpt2-355m")), 512);
    // a config of llama-130m's shape under another name (a config.json, which --init-from DIR makes the model) gets
    // llama-130m's rank, not C / 4 = 192; another shape gets C / 4
    ModelConfig like = model_config_load(Arch::LLAMA, "llama-130m");
    like.name = "some/dir/config.json";
    EXPECT_EQ(galore_default_rank(like), 256);
    like.num_layers += 1;
    EXPECT_EQ(galore_default_rank(like), 192);
    ModelConfig gpt2 = model_config_load(Arch::GPT2, "gpt2-124m");
    gpt2.name = "hf/gpt2/config.json";
    EXPECT_EQ(rso_default_rank(gpt2), 256);
}

// (4) ranks above min(m, n) are clipped; at full rank P is orthogonal; bad settings are user errors.
TEST(Galore, RankClipping) {
    EXPECT_EQ(galore_block("x", 0, 0, 1, 5, 3, 4).rank, 3);
    EXPECT_EQ(galore_block("x", 0, 0, 1, 3, 5, 4).rank, 3);
    EXPECT_EQ(galore_block("x", 0, 0, 1, 8, 6, 4).rank, 4);
    EXPECT_THROW(galore_block("x", 0, 0, 1, 8, 6, 0), UserError);

    // one full-rank right block (5, 3) and one full-rank left block (3, 5)
    std::vector<ParamSpec> specs = {{"a", 0, 15, true}, {"b", 15, 15, true}};
    std::vector<GaloreBlock> bl = {galore_block("a", 0, 15, 1, 5, 3, 100), galore_block("b", 15, 15, 1, 3, 5, 100)};
    CpuBackend be;
    GaLore<CpuBackend> opt(be, specs, bl, 10, 0.25f, 0.9f, 0.95f, 1e-8f, 0.0f);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> params(30), grads(30);
    for (float& x : grads) x = nd(rng);
    opt.step(params.data(), grads.data(), specs, 1e-2f, 1.0f);
    for (size_t b = 0; b < 2; b++) {
        EXPECT_EQ(opt.blocks[b].rank, 3);
        const float* P = opt.block_state[b].P;  // (3, 3)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double dot = 0;  // (Pᵀ P)[i][j]
                for (int k = 0; k < 3; k++) dot += (double)P[k * 3 + i] * P[k * 3 + j];
                EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5) << "block " << b;
            }
    }
    // first step at full rank: Adam's normalized update is (1-b1)/sqrt(1-b2) * sign(R) elementwise in the
    // rotated basis and the step size lr * sqrt(1-b2) / (1-b1) * alpha, so each entry moves by lr * alpha; P is
    // orthogonal, so the update's Frobenius norm is lr * alpha * sqrt(15) for each block (params start at 0)
    for (int b = 0; b < 2; b++) {
        double norm = 0;
        for (int i = 0; i < 15; i++) norm += (double)params[b * 15 + i] * params[b * 15 + i];
        EXPECT_NEAR(std::sqrt(norm), 1e-2 * 0.25 * std::sqrt(15.0), 1e-6) << "block " << b;
    }

    EXPECT_THROW(GaLore<CpuBackend>(be, specs, bl, 0, 0.25f, 0.9f, 0.95f, 1e-8f, 0.0f), UserError);
    std::vector<GaloreBlock> partial = {galore_block("a", 0, 15, 1, 4, 3, 2)};  // 12 of 15 elements
    EXPECT_THROW(GaLore<CpuBackend>(be, specs, partial, 10, 0.25f, 0.9f, 0.95f, 1e-8f, 0.0f), UserError);
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
    EXPECT_THROW(galore_blocks(specs, cfg, 8), UserError);  // not a model's parameter list
    std::fill(grads.begin(), grads.end(), NAN);
    GaLore<CpuBackend> fresh(be, specs, bl, 10, 0.25f, 0.9f, 0.95f, 1e-8f, 0.0f);
    EXPECT_THROW(fresh.step(params.data(), grads.data(), specs, 1e-2f, 1.0f), UserError);
}

// Checkpoint: state_tensors and t written into a fresh optimizer continue the run bit for bit.
TEST(Galore, ResumeFromStateTensors) {
    Fixture fx;
    CpuBackend be;
    std::unique_ptr<GaLore<CpuBackend>> a(make_opt<GaLore<CpuBackend>>(be, fx.pb));
    std::vector<float> pa = fx.init;
    for (int s = 0; s < 4; s++) a->step(pa.data(), fx.grads[s].data(), fx.pb.specs, fx.lrs[s], fx.grad_scales[s]);
    std::unique_ptr<GaLore<CpuBackend>> b(make_opt<GaLore<CpuBackend>>(be, fx.pb));
    std::vector<GaloreStateTensor> sa = a->state_tensors(fx.pb.specs), sb = b->state_tensors(fx.pb.specs);
    ASSERT_EQ(sa.size(), sb.size());
    for (size_t i = 0; i < sa.size(); i++) {
        ASSERT_EQ(sa[i].name, sb[i].name);
        ASSERT_EQ(sa[i].numel, sb[i].numel);
        std::memcpy(sb[i].data, sa[i].data, sa[i].numel * 4);
    }
    b->t = a->t;
    std::vector<float> pb = pa;
    for (int s = 4; s < Problem::steps; s++) {
        a->step(pa.data(), fx.grads[s].data(), fx.pb.specs, fx.lrs[s], fx.grad_scales[s]);
        b->step(pb.data(), fx.grads[s].data(), fx.pb.specs, fx.lrs[s], fx.grad_scales[s]);
    }
    EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * 4), 0);
    EXPECT_EQ(b->last_refresh, 6);
}

// (5) a tiny GPT-2 trains with GaLore: same batch every step, the loss falls.
TEST(Galore, Gpt2TinyLossDecreases) {
    auto t0 = std::chrono::steady_clock::now();
    ModelConfig cfg = model_config_load(Arch::GPT2, "gpt2-tiny");
    CpuBackend be;
    GPT2<CpuBackend> model(be, cfg);
    model.init_weights(1);
    int B = 2, T = 32, N = B * T;
    model.allocate_activations(B, T);
    std::mt19937 rng(5);
    std::vector<int32_t> seq(N + 1);
    for (int32_t& x : seq) x = (int32_t)(rng() % 512);  // a small slice of the vocabulary
    std::vector<int32_t> inputs(seq.begin(), seq.begin() + N), targets(seq.begin() + 1, seq.end());
    int rank = galore_default_rank(cfg);  // 16
    GaLore<CpuBackend> opt(be, model.param_specs, cfg, rank, 4, 0.25f, 0.9f, 0.95f, 1e-8f, 0.0f);
    std::vector<float> losses;
    double worst_outside = 0;
    for (int step = 0; step < 12; step++) {
        model.zero_grad();
        losses.push_back(model.forward(inputs.data(), targets.data(), 1.0f / N));
        model.backward();
        float norm = grad_norm(be, model.grads_memory, model.param_buffer_numel);
        std::vector<float> before(model.params_memory, model.params_memory + model.param_buffer_numel);
        opt.step(model.params_memory, model.grads_memory, model.param_specs, 3e-3f, clip_scale(norm, 1.0f));
        // with no weight decay every projected block moves inside its projection's span: dW = -s N Pᵀ (right,
        // dW (I - P Pᵀ) = 0) or -s P N (left, (I - P Pᵀ) dW = 0). Checked for every block and layer.
        for (size_t b = 0; b < opt.blocks.size(); b++) {
            const GaloreBlock& k = opt.blocks[b];
            for (int l = 0; l < k.layers; l++) {
                size_t off = k.offset + (size_t)l * k.layer_stride;
                const float* P = opt.block_state[b].P + (size_t)l * k.proj_numel();
                int m = k.rows, n = k.cols, r = k.rank;
                std::vector<double> dW((size_t)m * n), coef(k.moment_numel(), 0.0);
                double total = 0, outside = 0;
                for (size_t i = 0; i < dW.size(); i++) {
                    dW[i] = (double)model.params_memory[off + i] - before[off + i];
                    total += dW[i] * dW[i];
                }
                // coef = dW P (m, r) or Pᵀ dW (r, n); outside = |dW - coef Pᵀ|² or |dW - P coef|²
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++)
                        for (int c = 0; c < r; c++) {
                            if (k.right()) coef[(size_t)i * r + c] += dW[(size_t)i * n + j] * P[(size_t)j * r + c];
                            else coef[(size_t)c * n + j] += P[(size_t)i * r + c] * dW[(size_t)i * n + j];
                        }
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < n; j++) {
                        double back = 0;
                        for (int c = 0; c < r; c++)
                            back += k.right() ? coef[(size_t)i * r + c] * P[(size_t)j * r + c]
                                              : P[(size_t)i * r + c] * coef[(size_t)c * n + j];
                        outside += (dW[(size_t)i * n + j] - back) * (dW[(size_t)i * n + j] - back);
                    }
                ASSERT_GT(total, 0) << k.name << " layer " << l << " did not move";
                worst_outside = worst_of(worst_outside, std::sqrt(outside / total));
            }
        }
    }
    // fp32 round-off of W + dW (|W| ~ 0.02, |dW| ~ 1e-3) leaves about eps |W| / |dW| = 6e-8 * 20 = 1.2e-6 of |dW|
    // outside the span (measured 2.8e-6): 3e-5 (it was 1e-3)
    EXPECT_LT(worst_outside, 3e-5);
    std::printf("largest part of a block update outside its projection's span: %.1e\n", worst_outside);
    std::string s;
    for (float l : losses) s += " " + std::to_string(l);
    std::printf("gpt2-tiny GaLore (rank %d, T 4) losses:%s\n", rank, s.c_str());
    EXPECT_EQ(opt.refreshes, 3);
    for (float l : losses) EXPECT_TRUE(std::isfinite(l));
    EXPECT_LT(losses.back(), losses.front() - 0.5f);
    for (size_t i = 1; i < losses.size(); i++) EXPECT_LT(losses[i], losses[i - 1] + 0.05f) << "step " << i;
    // ~0.6 s on 2 idle cores; printed rather than asserted (a loaded CI machine would make it flaky)
    std::printf("12 steps in %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
