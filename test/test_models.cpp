// Whole-model tests against Hugging Face transformers (fp32, CPU): the fixtures under test/fixtures/*_tiny
// were written by test/reference/make_model_fixtures.py from the real GPT2LMHeadModel and LlamaForCausalLM
// (see test/reference/README.md). We load the same config.json and model.safetensors through our own
// loaders and compare logits, loss, every parameter gradient, and a 10-step AdamW trajectory.
//
// Tolerances: both sides compute in fp32 with different summation orders (OpenBLAS vs PyTorch, flash-style
// attention vs materialized softmax), so agreement is expected to a few ulps times the depth of the
// computation: ~1e-6 relative. We allow 2e-5 relative to the tensor's largest magnitude for logits and
// gradients, and 1e-5 absolute on the loss. The 10-step trajectory compounds rounding through Adam's
// division by sqrt(v): losses within 2e-4, final parameters within 1e-4 absolute.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "kernels/cpu_backend.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "prac/prac_state.h"
#include "train/optim_adamw.h"
#include "test/model_test_util.h"

#include <cstring>
#include <unistd.h>

namespace {

// One model, its fixture directory and the architecture of its config.
template <template <class> class M>
struct Case {
    const char* dir;
    Arch arch;
};

// A fixture's model on the CPU backend, its weights loaded, beside the fixture's reference tensors.
template <template <class> class M>
struct FixtureModel {
    SafeTensorsFile ref;
    ModelConfig cfg;
    CpuBackend be;
    M<CpuBackend> model;
    FixtureModel(const char* dir, Arch arch)
        : ref(safetensors_open(fixture(dir, "reference.safetensors"))),
          cfg(model_config_load(arch, fixture(dir, "config.json"))), model(be, cfg) {
        model.load_weights(fixture(dir, "model.safetensors"));
    }
};

template <template <class> class M>
void check_forward_backward(const char* dir, Arch arch) {
    FixtureModel<M> f(dir, arch);
    auto& [ref, cfg, be, model] = f;

    std::vector<int32_t> inputs = read_i32(ref, "inputs"), targets = read_i32(ref, "targets");
    std::vector<int64_t> shape = ref.shape("inputs");
    int B = (int)shape[0], T = (int)shape[1];
    model.allocate_activations(B, T);
    int valid = 0;
    for (int32_t t : targets) valid += t >= 0;

    model.zero_grad();
    float loss = model.forward(inputs.data(), targets.data(), 1.0f / valid);
    model.backward();

    std::vector<float> logits((size_t)B * T * cfg.vocab_size);
    model.logits(logits.data());
    EXPECT_LT(rel_err(logits, read_f32(ref, "logits")), 2e-5) << dir << " logits";
    // one row (a sample's next token): the same numbers as that row of all of them
    const int last = B * T - 1;
    std::vector<float> row(cfg.vocab_size);
    model.logits(row.data(), last, 1);
    // (to rounding: a one-row GEMM may sum in another order; another row differs by far more)
    EXPECT_LT(rel_err(row, std::vector<float>(logits.begin() + (size_t)last * cfg.vocab_size, logits.end())), 1e-6)
        << dir;
    EXPECT_NEAR(loss, read_f32(ref, "loss")[0], 1e-5) << dir << " loss";

    std::vector<float> grads = host_buffer<M<CpuBackend>>(be, model.grads_memory, model.param_buffer_numel);
    int checked = 0;
    for (const HFTensor& t : model.hf_map()) {
        std::vector<float> ours = hf_tensor_values(t, grads.data());
        std::vector<float> theirs = read_f32(ref, "grad." + t.name);
        EXPECT_LT(rel_err(ours, theirs), 2e-5) << dir << " grad." << t.name;
        checked++;
    }
    // every parameter tensor of the HF model has a gradient in the fixture, and we checked them all
    int in_fixture = 0;
    for (const std::string& n : ref.names()) in_fixture += n.rfind("grad.", 0) == 0;
    EXPECT_EQ(checked, in_fixture) << dir;

    // --sample's forward: one sequence of t positions in the arena of B x T (its buffers' leading parts), each row
    // transformers' logits at that position of the whole batch's forward (causal: the later positions change none)
    const std::vector<float> want = read_f32(ref, "logits");
    for (const auto& [b, t] : {std::pair<int, int>{B - 1, 1}, {B - 1, T / 2 + 1}, {0, T}}) {
        const size_t at = (size_t)b * T + t - 1;
        eval_logits_of_one_sequence(model, row.data(), inputs.data() + (size_t)b * T, targets.data() + (size_t)b * T,
                                    t, t - 1);
        EXPECT_LT(rel_err(row, std::vector<float>(want.begin() + at * cfg.vocab_size,
                                                  want.begin() + (at + 1) * cfg.vocab_size)), 2e-5)
            << dir << ": sequence " << b << "'s first " << t << " positions alone";
        EXPECT_EQ(model.B, B) << "restored";
        EXPECT_EQ(model.T, T) << "restored";
    }
}

// 10 optimizer steps with the conventions of test/reference/README.md: the same batch every step, gradient
// accumulation over its two rows (B=1 micro-batches), AdamW (0.9, 0.95, 1e-8, wd 0.1 on 2-D weights),
// clipping at 1.0, warmup 2 then cosine to 10% over 10 steps, peak lr 1e-2.
template <template <class> class M>
void check_training(const char* dir, Arch arch) {
    FixtureModel<M> f(dir, arch);
    auto& [ref, cfg, be, model] = f;
    std::vector<int32_t> inputs = read_i32(ref, "inputs"), targets = read_i32(ref, "targets");
    int rows = (int)ref.shape("inputs")[0], T = (int)ref.shape("inputs")[1];
    model.allocate_activations(1, T);
    AdamW<CpuBackend> opt(be, model.param_buffer_numel, 0.9f, 0.95f, 1e-8f, 0.1f);

    std::vector<float> losses, norms, lrs;
    for (int step = 0; step < 10; step++) {
        model.zero_grad();
        float loss = 0;
        for (int r = 0; r < rows; r++) {
            const int32_t* tg = targets.data() + (size_t)r * T;
            int valid = 0;
            for (int i = 0; i < T; i++) valid += tg[i] >= 0;
            loss += model.forward(inputs.data() + (size_t)r * T, tg, 1.0f / (valid * rows)) / rows;
            model.backward();
        }
        float norm = grad_norm(be, model.grads_memory, model.param_buffer_numel);
        float lr = lr_schedule(step, 10, 2, 1e-2f, 0.1f);
        opt.step(model.params_memory, model.grads_memory, model.param_specs, lr, clip_scale(norm, 1.0f));
        losses.push_back(loss);
        norms.push_back(norm);
        lrs.push_back(lr);
    }
    EXPECT_LT(max_abs_err(lrs, read_f32(ref, "train.lrs")), 1e-8) << dir << " learning rates";
    EXPECT_LT(max_abs_err(losses, read_f32(ref, "train.losses")), 2e-4) << dir << " losses";
    EXPECT_LT(max_abs_err(norms, read_f32(ref, "train.grad_norms")), 2e-4) << dir << " grad norms";

    std::vector<float> params = host_buffer<M<CpuBackend>>(be, model.params_memory, model.param_buffer_numel);
    for (const HFTensor& t : model.hf_map()) {
        std::vector<float> ours = hf_tensor_values(t, params.data());
        std::vector<float> theirs = read_f32(ref, "final." + t.name);
        // GPT-2's key bias (c_attn.bias[C:2C]) has an exactly-zero gradient (softmax is invariant to it);
        // both sides feed AdamW pure rounding noise there, and Adam normalizes noise to steps of ~lr. Its final
        // value is therefore implementation noise of up to ~1e-4 (README of the fixtures): 5e-4 for that slice
        // only; the query and value biases beside it keep 1e-4.
        if (t.name.find("c_attn.bias") != std::string::npos) {
            const size_t C = ours.size() / 3;
            auto slice = [C](const std::vector<float>& v, size_t part) {
                return std::vector<float>(v.begin() + part * C, v.begin() + (part + 1) * C);
            };
            EXPECT_LT(max_abs_err(slice(ours, 0), slice(theirs, 0)), 1e-4) << dir << " final." << t.name << " (q)";
            EXPECT_LT(max_abs_err(slice(ours, 1), slice(theirs, 1)), 5e-4) << dir << " final." << t.name << " (k)";
            EXPECT_LT(max_abs_err(slice(ours, 2), slice(theirs, 2)), 1e-4) << dir << " final." << t.name << " (v)";
            continue;
        }
        EXPECT_LT(max_abs_err(ours, theirs), 1e-4) << dir << " final." << t.name;
    }
}

}  // namespace

// The per-token losses of an evaluation forward (multiple-choice scoring, --hellaswag) are transformers' cross-entropy
// of each position: logsumexp of its logits less the target's logit, from the fixture's logits. The training forward
// after it returns its own loss alone (the evaluation's mean is not left in the loss sum: that loss would be twice
// the fixture's).
template <template <class> class M>
void check_eval_token_losses(const char* dir, Arch arch) {
    FixtureModel<M> f(dir, arch);
    auto& [ref, cfg, be, model] = f;
    std::vector<int32_t> inputs = read_i32(ref, "inputs"), targets = read_i32(ref, "targets");
    const int B = (int)ref.shape("inputs")[0], T = (int)ref.shape("inputs")[1], V = cfg.vocab_size;
    model.allocate_activations(B, T);
    std::vector<float> losses((size_t)B * T), logits = read_f32(ref, "logits");
    model.eval_token_losses(inputs.data(), targets.data(), losses.data());
    int scored = 0, valid = 0;
    for (int p = 0; p < B * T; p++) {
        if (targets[p] < 0) continue;
        const float* z = &logits[(size_t)p * V];
        double m = *std::max_element(z, z + V), sum = 0;
        for (int v = 0; v < V; v++) sum += std::exp((double)z[v] - m);
        const double want = m + std::log(sum) - z[targets[p]];
        EXPECT_NEAR(losses[p], want, 1e-4 * std::max(1.0, want)) << dir << " position " << p;
        scored++;
    }
    ASSERT_GT(scored, B) << dir;
    for (int32_t t : targets) valid += t >= 0;
    model.zero_grad();
    EXPECT_NEAR(model.forward(inputs.data(), targets.data(), 1.0f / valid), read_f32(ref, "loss")[0], 1e-5) << dir;
}
TEST(Gpt2VsHF, EvaluationTokenLosses) { check_eval_token_losses<GPT2>("gpt2_tiny", Arch::GPT2); }
TEST(LlamaVsHF, EvaluationTokenLosses) { check_eval_token_losses<Llama>("llama_tiny", Arch::LLAMA); }

TEST(Gpt2VsHF, LogitsLossAndEveryGradient) { check_forward_backward<GPT2>("gpt2_tiny", Arch::GPT2); }
TEST(LlamaVsHF, LogitsLossAndEveryGradient) { check_forward_backward<Llama>("llama_tiny", Arch::LLAMA); }
TEST(Gpt2VsHF, TenAdamWStepsWithAccumulationAndClipping) { check_training<GPT2>("gpt2_tiny", Arch::GPT2); }
TEST(LlamaVsHF, TenAdamWStepsWithAccumulationAndClipping) { check_training<Llama>("llama_tiny", Arch::LLAMA); }

// The arena holds exactly the tensors listed in the specs: bytes allocated == bytes planned, with and without
// PRAC (which swaps full stacks for packed projections, adds bases and transient buffers).
TEST(ActivationArena, AllocatedBytesEqualSpecs) {
    for (PracMode mode : {PracMode::NONE, PracMode::PRAC}) {
        CpuBackend be;
        ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
        PracOptions prac;
        prac.mode = mode;
        Llama<CpuBackend> model(be, cfg, prac);
        size_t before = be.live_bytes;
        model.allocate_activations(3, 24);
        EXPECT_EQ(be.live_bytes - before, tensors_bytes(model.arena.act_specs) + tensors_bytes(model.arena.basis_specs));
        EXPECT_EQ(model.arena.basis_specs.empty(), mode == PracMode::NONE);
        // every present tensor got an aligned slice inside its allocation; absent ones are null
        for (const TensorSpec& s : model.arena.act_specs) {
            if (s.numel == 0) {
                EXPECT_EQ(*s.ptr, nullptr) << s.name;
                continue;
            }
            ASSERT_NE(*s.ptr, nullptr) << s.name;
            EXPECT_EQ((uintptr_t)*s.ptr % TENSOR_ALIGN, 0u) << s.name;
            EXPECT_GE((char*)*s.ptr, (char*)model.arena.acts_memory);
            EXPECT_LE((char*)*s.ptr + s.numel * dtype_size(s.dtype), (char*)model.arena.acts_memory + model.arena.acts_bytes);
        }
    }
}

// PRAC state in a checkpoint: a model restored from weights + PRAC state takes the next step (including the
// next refresh's random draw) bit for bit like the model that kept running.
TEST(PracState, RestoredModelContinuesBitwise) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    prac.t1 = 2;
    prac.t2 = 1;
    int B = 2, T = 16, N = B * T;
    std::vector<int32_t> inputs(N), targets(N);
    for (int i = 0; i < N; i++) {
        inputs[i] = (i * 7919) % cfg.vocab_size;
        targets[i] = (i * 104729 + 3) % cfg.vocab_size;
    }
    CpuBackend be;
    Llama<CpuBackend> a(be, cfg, prac);
    a.init_weights(7);
    a.allocate_activations(B, T);
    AdamW<CpuBackend> opt(be, a.param_buffer_numel, 0.9f, 0.95f, 1e-8f, 0.1f);
    for (int step = 0; step < 3; step++) {
        a.zero_grad();
        a.sched.begin_step(prac, step);
        a.forward(inputs.data(), targets.data(), 1.0f / N);
        a.backward();
        opt.step(a.params_memory, a.grads_memory, a.param_specs, 1e-3f, 1.0f);
    }
    char dir[] = "/tmp/prac_state_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string weights = std::string(dir) + "/model.safetensors", state = std::string(dir) + "/prac.safetensors";
    a.save_weights(weights);
    PracStateBuffers buf;
    std::vector<SafeTensorWrite> tensors;
    prac_state_tensors(be, a.sites, buf, tensors);
    safetensors_write(state, tensors);

    Llama<CpuBackend> b(be, cfg, prac);
    b.load_weights(weights);
    b.allocate_activations(B, T);
    prac_state_load(be, b.sites, safetensors_open(state));
    for (size_t i = 0; i < a.sites.size(); i++) {
        EXPECT_EQ(a.sites[i].q2_refreshes, b.sites[i].q2_refreshes) << a.sites[i].name;
        EXPECT_EQ(0, std::memcmp(a.sites[i].P, b.sites[i].P, a.sites[i].L * a.sites[i].n * a.sites[i].r() * 4));
    }
    for (Llama<CpuBackend>* m : {&a, &b}) {  // step 3: Q2 is redrawn (t2 = 1) from the restored counters
        m->zero_grad();
        m->sched.begin_step(prac, 3);
        m->forward(inputs.data(), targets.data(), 1.0f / N);
        m->backward();
    }
    EXPECT_EQ(0, std::memcmp(a.grads_memory, b.grads_memory, a.param_buffer_numel * sizeof(float)));

    // state for other ranks/sites is refused with a message naming the site
    PracOptions other = prac;
    other.linear_r1 = 0.1f;
    Llama<CpuBackend> c(be, cfg, other);
    c.allocate_activations(B, T);
    try {
        prac_state_load(be, c.sites, safetensors_open(state));
        ADD_FAILURE() << "mismatched PRAC state loaded";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("ln1"), std::string::npos) << e.what();
    }
    std::remove(weights.c_str());
    std::remove(state.c_str());
    rmdir(dir);
}

// A checkpoint from before LLaMA's gate|up site "fch" (N, 2F) was split into fch_gate and fch_up (N, F each) is
// converted (prac/prac_state.h): the two new sites start without a basis and continue fch's refresh counters (so
// no Q2 draw key repeats), every other site resumes its state, and the next step draws the new bases. A run that
// does not compress them refuses the old state, naming the site.
TEST(PracState, LlamaCheckpointWithTheOldGateUpSiteIsConverted) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    const int B = 2, T = 16, N = B * T, L = cfg.num_layers, F = cfg.hidden;
    std::vector<int32_t> inputs(N), targets(N);
    for (int i = 0; i < N; i++) {
        inputs[i] = (i * 7919) % cfg.vocab_size;
        targets[i] = (i * 104729 + 3) % cfg.vocab_size;
    }
    CpuBackend be;
    Llama<CpuBackend> a(be, cfg, prac);
    a.init_weights(7);
    a.allocate_activations(B, T);
    a.sched.begin_step(prac, 0);
    a.forward(inputs.data(), targets.data(), 1.0f / N);
    a.backward();
    // the state as the old binary wrote it: fch_gate / fch_up replaced by one "fch" site of width 2F
    PracStateBuffers buf;
    std::vector<SafeTensorWrite> tensors, old;
    prac_state_tensors(be, a.sites, buf, tensors);
    for (const SafeTensorWrite& t : tensors)
        if (t.name.rfind("prac.fch_gate.", 0) != 0 && t.name.rfind("prac.fch_up.", 0) != 0) old.push_back(t);
    const int r_old = prac_site_dims(prac, SiteClass::NONLINEAR, 2 * F, "fch").r();
    std::vector<float> P_old((size_t)L * 2 * F * r_old, 0.5f);
    std::vector<int64_t> q1(L), q2(L), has(L, 1);
    for (int l = 0; l < L; l++) {
        q1[l] = 3 + l;
        q2[l] = 11 + l;
    }
    old.push_back({"prac.fch.P", "F32", {L, 2 * F, r_old}, P_old.data()});
    old.push_back({"prac.fch.q1_refreshes", "I64", {L}, q1.data()});
    old.push_back({"prac.fch.q2_refreshes", "I64", {L}, q2.data()});
    old.push_back({"prac.fch.has_basis", "I64", {L}, has.data()});
    char dir[] = "/tmp/prac_state_old_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string state = std::string(dir) + "/prac.safetensors";
    safetensors_write(state, old);

    Llama<CpuBackend> b(be, cfg, prac);
    b.init_weights(7);
    b.allocate_activations(B, T);
    prac_state_load(be, b.sites, safetensors_open(state));
    for (size_t i = 0; i < b.sites.size(); i++) {
        const auto &sa = a.sites[i], &sb = b.sites[i];
        if (i == SITE_FCH || i == (size_t)SITE_FCH_UP) {
            EXPECT_EQ(sb.q1_refreshes, q1) << sb.name;
            EXPECT_EQ(sb.q2_refreshes, q2) << sb.name;
            EXPECT_EQ(sb.has_basis, std::vector<uint8_t>(L, 0)) << sb.name << ": must draw a new basis";
            continue;
        }
        EXPECT_EQ(sa.q2_refreshes, sb.q2_refreshes) << sa.name;
        EXPECT_EQ(sa.has_basis, sb.has_basis) << sa.name;
        EXPECT_EQ(0, std::memcmp(sa.P, sb.P, (size_t)sa.L * sa.n * sa.r() * 4)) << sa.name;
    }
    b.sched.begin_step(prac, 1);  // not a refresh step for most units: the new sites refresh anyway
    float loss = b.forward(inputs.data(), targets.data(), 1.0f / N);
    b.backward();
    EXPECT_TRUE(std::isfinite(loss));
    for (int i : {SITE_FCH, SITE_FCH_UP}) {
        const auto& s = b.sites[i];
        EXPECT_EQ(s.has_basis, std::vector<uint8_t>(L, 1)) << s.name;
        for (int l = 0; l < L; l++) EXPECT_EQ(s.q2_refreshes[l], q2[l] + 1) << s.name << ": the next key, not key 0";
        EXPECT_EQ(s.failures, 0) << s.name;
    }
    for (size_t i = 0; i < b.param_buffer_numel; i++) ASSERT_TRUE(std::isfinite(b.grads_memory[i])) << i;

    Llama<CpuBackend> c(be, cfg, prac);
    for (int i : {SITE_FCH, SITE_FCH_UP}) c.sites[i].dims = SiteDims();  // gate and up left exact
    c.allocate_activations(B, T);
    try {
        prac_state_load(be, c.sites, safetensors_open(state));
        ADD_FAILURE() << "old gate|up state loaded into a run that does not compress it";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("site fch,"), std::string::npos) << e.what();
    }
    std::remove(state.c_str());
    rmdir(dir);
}

// --recompute (llm.c's -r): the recomputed tensors come from the same kernels on the same inputs, so loss and
// every gradient are BITWISE those of the run that stores them; two AdamW steps so the second step also runs
// on updated weights. `uncompress` lists sites forced uncompressed in every run (the recompute run's recomputed
// sites are uncompressed anyway), so PRAC runs compare the same compression of the remaining sites.
namespace {

template <template <class> class M>
struct RecomputeRun {
    std::vector<float> losses;
    std::vector<float> grads;
    size_t acts_bytes = 0;  // the activation arena
};

template <template <class> class M>
RecomputeRun<M> run_recompute(const char* dir, Arch arch, const PracOptions& prac, Recompute recompute,
                              std::initializer_list<int> uncompress = {}, bool alias_transients = true) {
    SafeTensorsFile ref = safetensors_open(fixture(dir, "reference.safetensors"));
    ModelConfig cfg = model_config_load(arch, fixture(dir, "config.json"));
    CpuBackend be;
    M<CpuBackend> model(be, cfg, prac, recompute);
    for (int s : uncompress) model.sites[s].dims = SiteDims();
    model.alias_transients = alias_transients;
    model.load_weights(fixture(dir, "model.safetensors"));
    std::vector<int32_t> inputs = read_i32(ref, "inputs"), targets = read_i32(ref, "targets");
    int B = (int)ref.shape("inputs")[0], T = (int)ref.shape("inputs")[1];
    model.allocate_activations(B, T);
    int valid = 0;
    for (int32_t t : targets) valid += t >= 0;
    AdamW<CpuBackend> opt(be, model.param_buffer_numel, 0.9f, 0.95f, 1e-8f, 0.1f);
    RecomputeRun<M> r;
    r.acts_bytes = model.arena.acts_bytes;
    for (int step = 0; step < 2; step++) {
        model.zero_grad();
        model.sched.begin_step(prac, step);
        r.losses.push_back(model.forward(inputs.data(), targets.data(), 1.0f / valid));
        model.backward();
        r.grads = host_buffer<M<CpuBackend>>(be, model.grads_memory, model.param_buffer_numel);
        opt.step(model.params_memory, model.grads_memory, model.param_specs, 1e-3f, 1.0f);
    }
    // the recomputed sites hold one slot and are never compressed
    for (const auto& s : model.sites) {
        if (!s.recompute) continue;
        EXPECT_EQ(s.stack, 1) << s.name;
        EXPECT_FALSE(s.compressed()) << s.name;
    }
    // --recompute-attention keeps one layer's attention output, (N, C), instead of (L, N, C)
    for (const TensorSpec& t : model.arena.act_specs)
        if (t.name == "atty")
            EXPECT_EQ(t.numel, (size_t)B * T * cfg.channels * (recompute.attention_out ? 1 : cfg.num_layers));
    return r;
}

template <template <class> class M>
void expect_bitwise(const RecomputeRun<M>& a, const RecomputeRun<M>& b, const std::string& what) {
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t i = 0; i < a.losses.size(); i++) {
        EXPECT_TRUE(std::isfinite(a.losses[i])) << what;
        EXPECT_EQ(0, std::memcmp(&a.losses[i], &b.losses[i], sizeof(float))) << what << " loss step " << i;
    }
    ASSERT_EQ(a.grads.size(), b.grads.size());
    EXPECT_EQ(0, std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float))) << what << " grads";
}

// site indices are the same in both models: RESID, LN1, RESID_MID, LN2, FCH, FCH_GELU / FCH_ACT
enum { S_RESID, S_LN1, S_RESID_MID, S_LN2, S_FCH, S_ACT };

template <template <class> class M>
void check_recompute(const char* dir, Arch arch) {
    PracOptions none;
    RecomputeRun<M> r0 = run_recompute<M>(dir, arch, none, 0);
    expect_bitwise(run_recompute<M>(dir, arch, none, 1), r0, std::string(dir) + " none r1");
    expect_bitwise(run_recompute<M>(dir, arch, none, 2), r0, std::string(dir) + " none r2");
    // --recompute-attention: O rebuilt from the exact q, k, v in backward, alone and with the other levels
    expect_bitwise(run_recompute<M>(dir, arch, none, Recompute(0, true)), r0, std::string(dir) + " none attention-out");
    expect_bitwise(run_recompute<M>(dir, arch, none, Recompute(2, true)), r0, std::string(dir) + " none r2 attention-out");

    // PRAC on the linear sites, refreshing every step: recompute 1 takes the activation output out of PRAC, so
    // it matches the stored run with that site uncompressed (ln1, ln2 compressed identically in both)
    PracOptions lin;
    lin.mode = PracMode::PRAC;
    lin.nonlinear = false;
    lin.t1 = lin.t2 = 1;
    RecomputeRun<M> p0 = run_recompute<M>(dir, arch, lin, 0, {S_ACT});
    expect_bitwise(run_recompute<M>(dir, arch, lin, 1), p0, std::string(dir) + " prac-linear r1");
    EXPECT_NE(0, std::memcmp(p0.grads.data(), r0.grads.data(), r0.grads.size() * sizeof(float)))
        << "PRAC on ln1/ln2 changed nothing: the comparison above would be vacuous";
    // recompute 2: every linear site is recomputed, so nothing is compressed
    expect_bitwise(run_recompute<M>(dir, arch, lin, 2), r0, std::string(dir) + " prac-linear r2");

    // full PRAC with recompute 1 runs (the activation is recomputed from the reconstructed MLP input: not bitwise)
    PracOptions full;
    full.mode = PracMode::PRAC;
    full.t1 = full.t2 = 1;
    RecomputeRun<M> f1 = run_recompute<M>(dir, arch, full, 1);
    // ... and recomputing O changes nothing under full PRAC either (O is never a site: exact q, k, v in, same bits out)
    expect_bitwise(run_recompute<M>(dir, arch, full, Recompute(1, true)), f1, std::string(dir) + " prac r1 attention-out");
    for (float l : f1.losses) EXPECT_TRUE(std::isfinite(l)) << dir;
    // recompute 2 with compressed residual sites is refused, naming the flag and the site
    try {
        run_recompute<M>(dir, arch, full, 2);
        ADD_FAILURE() << "recompute 2 with compressed resid accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("--recompute 2"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("resid"), std::string::npos) << e.what();
    }
}

// PRAC's transient buffers in backward scratch (alias_transients, model/sites.h): the same loss and gradients,
// bit for bit, as with a buffer of their own, over two AdamW steps that refresh every basis, with every site
// compressed, only the linear ones, with --recompute 1 / --recompute-attention, and with fp8 storage (whose linear
// sites dequantize into other dead scratch in backward: t_ln is live there as dresid); the arena is smaller by
// exactly the aliased buffers (t_ln, t_mlp_out, and LLaMA's t_mlp_in).
template <template <class> class M>
void check_alias_transients(const char* dir, Arch arch) {
    ModelConfig cfg = model_config_load(arch, fixture(dir, "config.json"));
    SafeTensorsFile ref = safetensors_open(fixture(dir, "reference.safetensors"));
    const size_t N = (size_t)ref.shape("inputs")[0] * ref.shape("inputs")[1], C = cfg.channels, F = cfg.hidden;
    const size_t act = sizeof(typename M<CpuBackend>::act_t);
    const bool llama = arch == Arch::LLAMA;
    PracOptions full, lin;
    full.mode = lin.mode = PracMode::PRAC;
    full.t1 = full.t2 = lin.t1 = lin.t2 = 1;
    lin.nonlinear = false;
    RecomputeRun<M> none = run_recompute<M>(dir, arch, PracOptions(), 0);
    PracOptions full8 = full, lin8 = lin;
    full8.storage = lin8.storage = PracStorage::FP8;
    for (const PracOptions& prac : {full, lin, full8, lin8})
        for (Recompute rc : {Recompute(0), Recompute(1, true)}) {
            std::string what = std::string(dir) + (prac.nonlinear ? " prac" : " prac-linear") +
                               (prac.storage == PracStorage::FP8 ? " fp8" : "") + " r" + std::to_string(rc.level) +
                               (rc.attention_out ? " attention-out" : "");
            RecomputeRun<M> own = run_recompute<M>(dir, arch, prac, rc, {}, false);
            RecomputeRun<M> alias = run_recompute<M>(dir, arch, prac, rc, {}, true);
            expect_bitwise(alias, own, what + ": aliased transients");
            EXPECT_NE(0, std::memcmp(own.grads.data(), none.grads.data(), none.grads.size() * sizeof(float)))
                << what << ": PRAC changed nothing, the comparison is vacuous";
            size_t saved = align_up(N * C * act, TENSOR_ALIGN);                     // t_ln
            if (rc.level == 0) saved += align_up(N * F * act, TENSOR_ALIGN);        // t_mlp_out (else recomputed)
            if (llama && prac.nonlinear) saved += align_up(2 * N * F * act, TENSOR_ALIGN);  // t_mlp_in
            EXPECT_EQ(own.acts_bytes - alias.acts_bytes, saved) << what;
        }
}

}  // namespace

TEST(AliasTransients, Gpt2BitwiseEqualToOwnBuffers) { check_alias_transients<GPT2>("gpt2_tiny", Arch::GPT2); }
TEST(AliasTransients, LlamaBitwiseEqualToOwnBuffers) { check_alias_transients<Llama>("llama_tiny", Arch::LLAMA); }

TEST(Recompute, Gpt2BitwiseEqualToStored) { check_recompute<GPT2>("gpt2_tiny", Arch::GPT2); }
TEST(Recompute, LlamaBitwiseEqualToStored) { check_recompute<Llama>("llama_tiny", Arch::LLAMA); }

// ---- data parallelism's per-layer hook (model.on_layer_grads, layer_param_ranges) ------------------------------
// The NCCL path starts averaging layer l's gradient slices when backward reports l, while backward goes on (train/
// grad_sync.h). That is right only if, at that moment, those slices are final (bitwise equal to the end of backward)
// and nothing later writes them; the report order is L-1 .. 0, then -1 for the tensors outside the layers, and
// the ranges cover every parameter exactly once. With PRAC the linear sites' factored weight gradients are
// covered too.
namespace {

template <template <class> class M>
void check_layer_hook(const char* name, Arch arch, PracMode mode) {
    ModelConfig cfg = model_config_load(arch, name);
    CpuBackend be;
    PracOptions prac;
    prac.mode = mode;
    prac.t1 = prac.t2 = 1;
    M<CpuBackend> m(be, cfg, prac);
    m.init_weights(3);
    const int B = 2, T = 16, L = cfg.num_layers, V = cfg.vocab_size;
    m.allocate_activations(B, T);
    std::vector<int32_t> in((size_t)B * T), tg((size_t)B * T);
    for (int i = 0; i < B * T; i++) {
        in[i] = (i * 7 + 3) % V;
        tg[i] = i % 9 == 8 ? -1 : (i * 5 + 1) % V;
    }
    std::vector<std::vector<ElemRange>> ranges = layer_param_ranges(m.param_specs, L);
    ASSERT_EQ(ranges.size(), (size_t)L + 1);
    std::vector<int> owner(m.param_buffer_numel, -2);
    size_t covered = 0;
    for (int k = 0; k <= L; k++)
        for (const ElemRange& r : ranges[k]) {
            ASSERT_LE(r.offset + r.numel, m.param_buffer_numel);
            for (size_t i = r.offset; i < r.offset + r.numel; i++) {
                EXPECT_EQ(owner[i], -2) << name << ": element " << i << " in two ranges";
                owner[i] = k;
            }
            covered += r.numel;
        }
    EXPECT_EQ(covered, m.num_parameters) << name;

    auto gather = [&](int k) {
        std::vector<float> v;
        for (const ElemRange& r : ranges[k]) v.insert(v.end(), m.grads_memory + r.offset, m.grads_memory + r.offset + r.numel);
        return v;
    };
    // two micro-batches, the hook on the second only (as the trainer does): the first one's gradients are in
    std::vector<std::vector<float>> at_hook(L + 1);
    std::vector<int> order;
    bool lower_touched = false;
    m.zero_grad();
    m.sched.begin_step(prac, 0);
    for (int micro = 0; micro < 2; micro++) {
        m.forward(in.data(), tg.data(), 1.0f / (2.0f * B * T));
        if (micro == 0) {
            m.backward();
            continue;
        }
        std::vector<float> before_lower = gather(0);  // layer 0 after micro-batch 0: unchanged until its report
        m.on_layer_grads = [&](int l) {
            order.push_back(l);
            at_hook[l < 0 ? L : l] = gather(l < 0 ? L : l);
            if (l > 0 && gather(0) != before_lower) lower_touched = true;
        };
        m.backward();
        m.on_layer_grads = nullptr;
    }
    std::vector<int> want;
    for (int l = L - 1; l >= -1; l--) want.push_back(l);
    EXPECT_EQ(order, want) << name;
    EXPECT_FALSE(lower_touched) << name << ": layer 0's gradients changed before layer 0 was reported";
    for (int k = 0; k <= L; k++) {
        std::vector<float> fin = gather(k);
        ASSERT_EQ(at_hook[k].size(), fin.size());
        EXPECT_EQ(0, std::memcmp(at_hook[k].data(), fin.data(), fin.size() * sizeof(float)))
            << name << " " << prac_mode_name(mode) << ": range " << k << " changed after it was reported";
    }
}

}  // namespace

TEST(LayerGradHook, Gpt2ReportsEachLayerWhenFinal) {
    check_layer_hook<GPT2>("gpt2-tiny", Arch::GPT2, PracMode::NONE);
    check_layer_hook<GPT2>("gpt2-tiny", Arch::GPT2, PracMode::PRAC);
}
TEST(LayerGradHook, LlamaReportsEachLayerWhenFinal) {
    check_layer_hook<Llama>("llama-tiny", Arch::LLAMA, PracMode::NONE);
    check_layer_hook<Llama>("llama-tiny", Arch::LLAMA, PracMode::PRAC);
}
