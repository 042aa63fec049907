// Tests of PRAC's sites (prac/site.h): one ActSite on its own (save / restore / failure bookkeeping), then the
// sites inside Llama / GPT-2: refresh schedule and counters, seeds, unbiased weight gradients with every other
// gradient exact, "classes off" == mode none. Section 6 of the PRAC tests; sections 1-5 (draws, ranks, refresh,
// estimator, ops) and the conventions of the statistical checks (each fails with probability at most 1e-6 over
// the seed if the code is right) are in test_prac.cpp, the shared helpers in prac_test_util.h.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu_backend.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "prac/prac.h"
#include "prac/site.h"
#include "test/prac_test_util.h"
#include "test/test_util.h"
#include "test/worst.h"  // worst_of

namespace {

// ================================================================================================
// 6. Sites inside the models
// ================================================================================================

template <template <class> class M>
struct Harness {
    CpuBackend be;
    std::unique_ptr<M<CpuBackend>> model;
    int B, T;
    std::vector<int32_t> inputs, targets;
    // vocab > 0 shrinks the vocabulary (the LM head dominates the cost of the tiny models on the CPU)
    Harness(Arch arch, const char* name, const PracOptions& o, int B_, int T_, int vocab = 0, uint64_t weight_seed = 1234)
        : B(B_), T(T_) {
        ModelConfig cfg = model_config_load(arch, name);
        if (vocab > 0) cfg.vocab_size = cfg.padded_vocab_size = vocab;
        model = std::make_unique<M<CpuBackend>>(be, cfg, o);
        model->prac_log = nullptr;
        model->allocate_activations(B, T);
        model->init_weights(weight_seed);
        Rng rng(99);
        for (int i = 0; i < B * T; i++) {
            inputs.push_back((int32_t)(rng.g() % cfg.vocab_size));
            targets.push_back((int32_t)(rng.g() % cfg.vocab_size));
        }
    }
    size_t numel() const { return model->param_buffer_numel; }
    // one training step of `micro` micro-batches on the fixed batch (grads zeroed first)
    float step(int64_t step, int micro = 1) {
        model->sched.begin_step(model->prac, step);
        model->zero_grad();
        float loss = 0;
        for (int m = 0; m < micro; m++) {
            loss += model->forward(inputs.data(), targets.data(), 1.0f / (B * T * micro)) / micro;
            model->backward();
        }
        model->install_refreshes();  // --prac-refresh-overlap: as the trainer, at the end of the step
        return loss;
    }
    void sgd(float lr) {
        for (size_t i = 0; i < numel(); i++) model->params_memory[i] -= lr * model->grads_memory[i];
    }
    fvec grads() const { return fvec(model->grads_memory, model->grads_memory + numel()); }
    const ParamSpec& spec(const std::string& name) const {
        for (const ParamSpec& s : model->param_specs)
            if (s.name == name) return s;
        throw std::logic_error(name);
    }
};

// One site outside a model: save compresses (refreshing when due or when there is no basis yet), restore rebuilds
// X~ = Xc·Pᵀ, an uncompressed site hands back its stored tensor, and a failed refresh is counted and logged
// with the site's name and layer.
TEST(PracSite, SaveRestoreAndFailureBookkeeping) {
    const int N = 96, n = 64, L = 2;
    CpuBackend be;
    PracOptions o = opts(PracMode::PRAC);
    o.linear_r1_abs = 16;
    o.linear_r2_abs = 16;
    ActSite<CpuBackend> site = make_site<CpuBackend>("ln1", 1, SiteClass::LINEAR, n, L, L, o);
    ASSERT_TRUE(site.compressed());
    const int r = site.r();
    fvec P((size_t)L * n * r), packed((size_t)L * N * r), transient((size_t)N * n);
    site.P = P.data();
    site.packed = packed.data();
    site.transient = transient.data();
    Synth S = make_synth(N, n, dominant_spectrum(n, 16), 6006);

    // layer 1 first, with no refresh due: the missing basis forces one
    std::memcpy(site.fwd(1, N), S.X.data(), S.X.size() * sizeof(float));
    site.save(be, 1, N, {}, 42, nullptr);
    EXPECT_EQ(site.has_basis[1], 1);
    EXPECT_EQ(site.has_basis[0], 0);
    EXPECT_EQ(site.q1_refreshes[1], 1);
    EXPECT_EQ(site.q2_refreshes[1], 1);
    // the basis is the one prac_refresh_cpu gives for the documented key (seed, site id, layer, draws so far)
    fvec Pref((size_t)n * r);
    prac_refresh_cpu(Pref.data(), S.X.data(), N, n, site.dims, true, true, false, {42, 1, 1, 0});
    EXPECT_EQ(0, std::memcmp(Pref.data(), P.data() + (size_t)n * r, Pref.size() * sizeof(float)));
    fvec xc((size_t)N * r), xt((size_t)N * n);
    prac_compress_cpu(xc.data(), S.X.data(), Pref.data(), N, n, r);
    EXPECT_EQ(0, std::memcmp(xc.data(), packed.data() + (size_t)N * r, xc.size() * sizeof(float)));
    std::fill(transient.begin(), transient.end(), 0.0f);
    float* back = site.restore(be, 1, N);
    EXPECT_EQ(back, transient.data());
    prac_reconstruct_cpu(xt.data(), xc.data(), Pref.data(), N, n, r);
    EXPECT_EQ(0, std::memcmp(xt.data(), back, xt.size() * sizeof(float)));

    // a non-finite activation on a Q1-refresh step: counted as a failure, logged with the site and layer, basis kept
    fvec before(P.begin() + (size_t)n * r, P.begin() + (size_t)2 * n * r);
    transient = S.X;
    transient[5] = std::numeric_limits<float>::quiet_NaN();
    FILE* log = std::tmpfile();
    ASSERT_NE(log, nullptr);
    int64_t q1b = site.q1_refreshes[1], q2b = site.q2_refreshes[1];
    site.save(be, 1, N, {true, false}, 42, log);
    std::rewind(log);
    char buf[512] = {0};
    size_t got = std::fread(buf, 1, sizeof(buf) - 1, log);
    std::fclose(log);
    std::string msg(buf, got);
    EXPECT_EQ(site.failures, 1);
    EXPECT_NE(msg.find("ln1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 1"), std::string::npos) << msg;
    EXPECT_TRUE(std::equal(before.begin(), before.end(), P.begin() + (size_t)n * r)) << "previous basis kept";
    std::printf("[ observed ] failed Q1 refresh (Q2 not due): counters q1 +%lld, q2 +%lld, P unchanged; log: %s",
                (long long)(site.q1_refreshes[1] - q1b), (long long)(site.q2_refreshes[1] - q2b), msg.c_str());

    // uncompressed site: the full stack, its own slot per layer, the plain matmul weight gradient
    ActSite<CpuBackend> plain = make_site<CpuBackend>("ln1", 1, SiteClass::LINEAR, n, L, L, opts(PracMode::NONE));
    ASSERT_FALSE(plain.compressed());
    fvec full((size_t)L * N * n);
    plain.full = full.data();
    EXPECT_EQ(plain.fwd(1, N), full.data() + (size_t)N * n);
    EXPECT_EQ(plain.restore(be, 1, N), full.data() + (size_t)N * n);
    plain.save(be, 1, N, {true, true}, 42, nullptr);  // nothing to do
    EXPECT_EQ(plain.q2_refreshes[1], 0);
}

// Q1 / Q2 blocks of every (site, layer) basis
struct Bases {
    std::vector<std::vector<fvec>> q1, q2;  // [site][layer]
};
template <class Model>
Bases snapshot(const Model& m) {
    Bases b;
    for (const auto& s : m.sites) {
        b.q1.emplace_back();
        b.q2.emplace_back();
        for (int l = 0; l < s.L; l++) {
            dvec q1 = block(s.P + (size_t)l * s.n * s.r(), s.n, s.r(), 0, s.dims.r1);
            dvec q2 = block(s.P + (size_t)l * s.n * s.r(), s.n, s.r(), s.dims.r1, s.dims.r2);
            b.q1.back().emplace_back(q1.begin(), q1.end());
            b.q2.back().emplace_back(q2.begin(), q2.end());
        }
    }
    return b;
}

// (a) Q1 refreshes on the steps of its unit's phase of t1, Q2 of t2 and whenever Q1 refreshes (staggered: unit
// u = layer x sites + site of U units refreshes when step mod t = floor(u t / U), prac/site.h); the first
// step of a fresh model always initializes; later micro-batches of a step never refresh. Between steps an SGD
// update moves the weights, so a refreshed Q1 differs from the old one and a kept one is bitwise the same. The
// per-layer counters must count what happened to P: +1 exactly when that block of P was recomputed / redrawn.
// pac has no Q2 (r2 = 0); rac has no Q1 (r1 = 0), so there t1 has nothing to refresh: whether a t1-only step
// redraws Q2 is left open, but the counter must agree with P.
template <template <class> class M>
void check_schedule(Arch arch, const char* name, PracMode mode, int first_step, int micro) {
    PracOptions o = opts(mode);
    o.t1 = 3;
    o.t2 = 2;
    Harness<M> h(arch, name, o, 2, 16);
    const char* mname = prac_mode_name(mode);
    for (auto& s : h.model->sites) ASSERT_TRUE(s.compressed()) << s.name;
    const size_t S = h.model->sites.size();
    std::vector<std::vector<int64_t>> c1(S), c2(S);  // counters before the step
    Bases prev = snapshot(*h.model);                 // all zeros before the first step
    for (int step = first_step; step < first_step + 7; step++) {
        bool first = step == first_step;
        const int units = (int)S * h.model->cfg.num_layers;
        auto due = [&](int t, size_t si, int l) {
            return first || step % t == (int64_t)(l * (int)S + (int)si) * t / units;
        };
        for (size_t si = 0; si < S; si++) {
            c1[si] = h.model->sites[si].q1_refreshes;
            c2[si] = h.model->sites[si].q2_refreshes;
        }
        float loss = h.step(step, micro);
        ASSERT_TRUE(std::isfinite(loss));
        Bases now = snapshot(*h.model);
        for (size_t si = 0; si < S; si++) {
            const auto& s = h.model->sites[si];
            for (int l = 0; l < s.L; l++) {
                std::string where = std::string(name) + " " + mname + " " + s.name + " layer " + std::to_string(l) +
                                    " step " + std::to_string(step);
                int64_t d1 = s.q1_refreshes[l] - c1[si][l], d2 = s.q2_refreshes[l] - c2[si][l];
                bool due1 = due(o.t1, si, l), due2 = due(o.t2, si, l);
                bool ch1 = now.q1[si][l] != prev.q1[si][l], ch2 = now.q2[si][l] != prev.q2[si][l];
                EXPECT_EQ(s.has_basis[l], 1) << where;
                if (s.dims.r1 > 0) {
                    EXPECT_EQ(ch1, due1) << where << ": Q1 recomputed iff due";
                    EXPECT_EQ(d1, (int64_t)due1) << where << ": Q1 counter";
                } else {
                    EXPECT_EQ(d1, 0) << where << ": no Q1, no Q1 refreshes";
                }
                if (s.dims.r2 == 0) {
                    EXPECT_EQ(d2, 0) << where << ": no Q2, no Q2 draws";
                    continue;
                }
                EXPECT_EQ(d2, (int64_t)ch2) << where << ": the Q2 counter must count the draws (Q2 "
                                            << (ch2 ? "redrawn" : "kept") << ", counter +" << d2 << ")";
                if (s.dims.r1 > 0) {
                    EXPECT_EQ(ch2, due1 || due2) << where << ": Q2 redrawn iff due or Q1 refreshed";
                } else {
                    if (due2) EXPECT_TRUE(ch2) << where << ": Q2 due";
                    if (!due1 && !due2) EXPECT_FALSE(ch2) << where << ": nothing due";
                }
            }
            EXPECT_EQ(s.failures, 0) << s.name;
        }
        prev = now;
        h.sgd(0.1f);
    }
}

TEST(PracModel, RefreshIntervalsAreHonoredLlama) {
    check_schedule<Llama>(Arch::LLAMA, "llama-tiny", PracMode::PRAC, 0, 2);
    check_schedule<Llama>(Arch::LLAMA, "llama-tiny", PracMode::PRAC, 1, 1);  // resumed at step 1: still initializes
}
// --prac-initial-spread K (PracOptions::initial_spread): on the first step every (site, layer) unit gets a basis, but
// only those with first_refresh(u) = 0 compute one from the data; the others get the provisional random basis of
// their key (the very P of prac_refresh_cpu with random_q1 and no x) and keep it until their own first refresh on
// step first_refresh(u) in [1, K), which replaces it; no other refresh happens in the window (T1 = T2 = 100), and no
// step computes more than ceil(units / K) bases from the data.
TEST(PracModel, InitialSpreadComputesEachFirstBasisOnItsOwnStep) {
    PracOptions o = opts(PracMode::PRAC);
    o.t1 = o.t2 = 100;
    o.initial_spread = 4;
    Harness<Llama> h(Arch::LLAMA, "llama-tiny", o, 2, 16, 512);
    auto& sites = h.model->sites;
    const int S = (int)sites.size(), units = S * h.model->cfg.num_layers;
    ASSERT_EQ(h.model->sched.units, units);
    std::vector<std::vector<fvec>> random(S);  // each unit's provisional basis
    for (int si = 0; si < S; si++)
        for (int l = 0; l < sites[si].L; l++) {
            const auto& st = sites[si];
            fvec P((size_t)st.n * st.r());
            SiteDims d = st.dims;
            d.random_q1 = true;
            prac_refresh_cpu(P.data(), nullptr, 32, st.n, d, true, true, false, {o.seed, st.id, (uint32_t)l, 0});
            random[si].push_back(P);
        }
    for (int step = 0; step < 6; step++) {
        std::vector<std::vector<int64_t>> before(S);
        for (int si = 0; si < S; si++) before[si] = sites[si].q1_refreshes;
        ASSERT_TRUE(std::isfinite(h.step(step)));
        int from_data = 0;
        for (int si = 0; si < S; si++)
            for (int l = 0; l < sites[si].L; l++) {
                const auto& st = sites[si];
                const int u = l * S + si;
                const int64_t first = (int64_t)u * o.initial_spread / units;
                const std::string where = st.name + " layer " + std::to_string(l) + " step " + std::to_string(step);
                const bool refreshed = st.q1_refreshes[l] - before[si][l] == 1;
                EXPECT_EQ(refreshed, step == 0 || step == first) << where;
                from_data += refreshed && step == first;
                fvec P(st.P + (size_t)l * st.n * st.r(), st.P + (size_t)(l + 1) * st.n * st.r());
                EXPECT_EQ(P == random[si][l], step < first) << where << ": the provisional basis until step " << first;
            }
        EXPECT_LE(from_data, (units + o.initial_spread - 1) / o.initial_spread) << "step " << step;
        h.sgd(0.1f);
    }
}

// --prac-refresh-overlap D (PracOptions::overlap): a refresh due on step s is computed from step s's activations but
// becomes the basis at the end of step s + D - 1. Three runs from the same weights and batch, T1 = T2 = 2 staggered
// (the units of phase 1 refresh on step 1, those of phase 0 on step 2): A overlapped; B refreshing in place; C never
// refreshing after its first step. Step 0 (every unit's first basis: in place, there is nothing else to compress
// with) is bitwise the same in all three. Steps 1 .. D, two micro-batches each: A's gradients are bitwise C's (every
// micro-batch compressed with the bases of step 0), its bases are step 0's until the end of step D, and then the
// phase-1 units' are bitwise B's after step 1 (the same solve of the same activations: A's and B's step-1
// activations are the same) and differ from C's, with B's refresh counters. The refreshes in flight take slots of
// the pool (prac_overlap_slots = min(units, D ceil(units / 2))) and give them back when installed.
static void overlapped_refresh_takes_effect_after(int D) {
    PracOptions o = opts(PracMode::PRAC);
    o.t1 = o.t2 = 2;
    PracOptions in_place = o, never = o;
    o.overlap = D;
    never.t1 = never.t2 = 1000;
    Harness<Llama> a(Arch::LLAMA, "llama-tiny", o, 2, 16, 512), b(Arch::LLAMA, "llama-tiny", in_place, 2, 16, 512),
        c(Arch::LLAMA, "llama-tiny", never, 2, 16, 512);
    auto& sa = a.model->sites;
    const int units = a.model->sched.units, per_phase = (units + 1) / 2;
    ASSERT_EQ(a.model->pending_bases.count, prac_overlap_slots(o, units));
    ASSERT_EQ(a.model->pending_bases.count, std::min(units, D * per_phase));
    ASSERT_EQ(b.model->pending_bases.count, 0);
    auto in_flight = [&] { return (int)std::count(a.model->pending_bases.busy.begin(),
                                                  a.model->pending_bases.busy.end(), 1); };
    for (Harness<Llama>* h : {&a, &b, &c}) h->step(0);
    ASSERT_EQ(a.grads(), c.grads());
    ASSERT_EQ(b.grads(), c.grads());
    const Bases step0 = snapshot(*c.model);
    ASSERT_EQ(snapshot(*a.model).q1, step0.q1);
    for (Harness<Llama>* h : {&a, &b, &c}) h->sgd(0.1f);
    std::vector<std::vector<int64_t>> q1_before(sa.size());
    for (size_t si = 0; si < sa.size(); si++) q1_before[si] = sa[si].q1_refreshes;
    b.step(1, 2);  // B refreshes phase 1 in place on step 1; its bases then are what A installs after step D
    const Bases b_step1 = snapshot(*b.model);
    const fvec b_grads1 = b.grads();
    for (int step = 1; step <= D; step++) {
        // A's step by hand, to look at it before its refreshes are installed
        a.model->sched.begin_step(a.model->prac, step);
        a.model->zero_grad();
        for (int m = 0; m < 2; m++) {
            a.model->forward(a.inputs.data(), a.targets.data(), 1.0f / (a.B * a.T * 2));
            a.model->backward();
        }
        const Bases during = snapshot(*a.model);
        EXPECT_EQ(during.q1, step0.q1) << "step " << step << ": no basis changes before its refresh's last step";
        EXPECT_EQ(during.q2, step0.q2) << "step " << step;
        EXPECT_EQ(in_flight(), std::min(step, 2) * per_phase) << "step " << step << ": one slot per refresh in flight";
        a.model->install_refreshes();
        c.step(step, 2);
        EXPECT_EQ(a.grads(), c.grads()) << "step " << step << " compressed with step 0's bases";
        if (step == 1) EXPECT_NE(b_grads1, c.grads()) << "in place, step 1 compressed with its refreshed bases";
        a.sgd(0.1f);
        c.sgd(0.1f);
    }
    EXPECT_EQ(in_flight(), D == 1 ? 0 : per_phase) << "installed after step D: phase 1's; phase 0's still in flight";
    const Bases A = snapshot(*a.model), C = snapshot(*c.model);
    for (size_t si = 0; si < sa.size(); si++)
        for (int l = 0; l < sa[si].L; l++) {
            const int u = l * (int)sa.size() + (int)si;
            const bool phase1 = u * 2 / units == 1;  // PracSchedule::phase(u, 2): refreshed on step 1
            const std::string where = sa[si].name + " layer " + std::to_string(l);
            EXPECT_EQ(sa[si].q1_refreshes[l] - q1_before[si][l], phase1 ? 1 : 0) << where;
            if (!phase1) {
                EXPECT_EQ(A.q1[si][l], step0.q1[si][l]) << where << ": still in flight (D = 2) or not refreshed";
                continue;
            }
            EXPECT_EQ(A.q1[si][l], b_step1.q1[si][l]) << where << ": installed, the in-place refresh's bits";
            EXPECT_EQ(A.q2[si][l], b_step1.q2[si][l]) << where;
            EXPECT_NE(A.q1[si][l], C.q1[si][l]) << where;
            EXPECT_EQ(sa[si].q1_refreshes[l], b.model->sites[si].q1_refreshes[l]) << where;
            EXPECT_EQ(sa[si].q2_refreshes[l], b.model->sites[si].q2_refreshes[l]) << where;
        }
}
TEST(PracModel, OverlappedRefreshTakesEffectAtTheEndOfItsStep) { overlapped_refresh_takes_effect_after(1); }
TEST(PracModel, OverlappedRefreshTakesEffectAfterTwoSteps) { overlapped_refresh_takes_effect_after(2); }

TEST(PracModel, RefreshIntervalsAreHonoredGpt2) { check_schedule<GPT2>(Arch::GPT2, "gpt2-tiny", PracMode::PRAC, 0, 1); }
TEST(PracModel, RefreshIntervalsPacAndRac) {
    check_schedule<Llama>(Arch::LLAMA, "llama-tiny", PracMode::PAC, 0, 1);
    check_schedule<Llama>(Arch::LLAMA, "llama-tiny", PracMode::RAC, 0, 1);
}

// (b) The same PracOptions.seed gives bitwise the same bases; another seed the same Q1 and a different Q2. The
// forward pass never sees the compression: the loss is bitwise the one of mode none.
TEST(PracModel, SeedsDetermineTheDraws) {
    PracOptions o = opts(PracMode::PRAC);
    o.refresh = PracRefresh::EXACT;  // the exact Q1 depends on X only; the subspace one also on the seed's block
    o.seed = 7;
    Harness<Llama> a(Arch::LLAMA, "llama-tiny", o, 2, 16), b(Arch::LLAMA, "llama-tiny", o, 2, 16);
    o.seed = 8;
    Harness<Llama> c(Arch::LLAMA, "llama-tiny", o, 2, 16);
    Harness<Llama> none(Arch::LLAMA, "llama-tiny", opts(PracMode::NONE), 2, 16);
    float la = a.step(0), lb = b.step(0), lc = c.step(0), ln = none.step(0);
    EXPECT_EQ(la, ln);
    EXPECT_EQ(lb, ln);
    EXPECT_EQ(lc, ln);
    ASSERT_EQ(a.model->arena.bases_bytes, b.model->arena.bases_bytes);
    EXPECT_EQ(std::memcmp(a.model->arena.bases_memory, b.model->arena.bases_memory, a.model->arena.bases_bytes), 0);
    EXPECT_EQ(a.grads(), b.grads()) << "same seed: bitwise the same gradients";
    Bases A = snapshot(*a.model), C = snapshot(*c.model);
    for (size_t si = 0; si < A.q1.size(); si++)
        for (size_t l = 0; l < A.q1[si].size(); l++) {
            const char* name = a.model->sites[si].name.c_str();
            EXPECT_EQ(A.q1[si][l], C.q1[si][l]) << name << " layer " << l << ": Q1 depends on X only";
            // different seeds: unrelated Q2 (no element equal beyond chance)
            int equal = 0;
            for (size_t i = 0; i < A.q2[si][l].size(); i++) equal += A.q2[si][l][i] == C.q2[si][l][i];
            EXPECT_LT(equal, 4) << name << " layer " << l << ": Q2 must differ between seeds";
        }
}

// (c) Only linear sites compressed: activation gradients stay exact, so the gradients of the PRAC'd weights
// (q/k/v, gate/up, down) are unbiased estimates of the exact ones, and every other parameter gets exactly the
// gradient of mode none. K = 64 PRAC seeds on fixed weights and batch; each run refreshes (begin_step(.., 0)).
// llama-tiny with a 512-token vocabulary (the 32000-row head would be 95% of the run time).
TEST(PracModel, LinearSitesGiveUnbiasedWeightGradientsAndExactOthers) {
    const int B = 4, T = 32, K = 64, V = 512;  // N = 128 rows: more than r1 of every linear site, so each has a tail
    SingleThreaded one;  // 65 small training steps: see SingleThreaded (the other model tests run threaded)
    PracOptions o = opts(PracMode::PRAC);
    o.stagger = false;  // every run refreshes all units at begin_step(.., 0)
    o.nonlinear = false;
    Harness<Llama> h(Arch::LLAMA, "llama-tiny", o, B, T, V), none(Arch::LLAMA, "llama-tiny", opts(PracMode::NONE), B, T, V);
    ASSERT_EQ(std::memcmp(h.model->params_memory, none.model->params_memory, h.numel() * sizeof(float)), 0);
    float loss_none = none.step(0);
    fvec exact = none.grads();

    const std::vector<std::string> estimated = {"qkvw", "fcw", "fcprojw"};
    const std::vector<std::string> others = {"wte", "ln1w", "attprojw", "ln2w", "lnfw", "lm_head"};
    std::vector<std::vector<fvec>> samples(estimated.size());
    int others_bitwise = 0;
    double others_maxrel = 0;
    for (int j = 0; j < K; j++) {
        h.model->prac.seed = 1000 + j;
        float loss = h.step(0);
        EXPECT_EQ(loss, loss_none) << "the forward pass is exact";
        for (size_t g = 0; g < estimated.size(); g++) {
            const ParamSpec& s = h.spec(estimated[g]);
            samples[g].emplace_back(h.model->grads_memory + s.offset, h.model->grads_memory + s.offset + s.numel);
        }
        for (const std::string& name : others) {
            const ParamSpec& s = h.spec(name);
            bool same = std::memcmp(h.model->grads_memory + s.offset, exact.data() + s.offset, s.numel * sizeof(float)) == 0;
            others_bitwise += same;
            double d = 0, m = 1e-30;
            for (size_t i = 0; i < s.numel; i++) {
                d = worst_of(d, (double)std::fabs(h.model->grads_memory[s.offset + i] - exact[s.offset + i]));
                m = std::max(m, (double)std::fabs(exact[s.offset + i]));
            }
            others_maxrel = worst_of(others_maxrel, d / m);
            EXPECT_TRUE(same) << name << " seed " << j << ": not bitwise the gradient of mode none (max rel diff "
                              << d / m << ")";
        }
    }
    for (const auto& s : h.model->sites) {
        if (s.cls == SiteClass::LINEAR)
            for (int l = 0; l < s.L; l++) EXPECT_EQ(s.q2_refreshes[l], K) << s.name << ": every run redrew Q2";
        else
            EXPECT_FALSE(s.compressed()) << s.name;
    }
    std::printf("[ stats    ] linear-only PRAC: non-PRAC parameter gradients bitwise equal to mode none in %d of %d "
                "(tensor, seed) pairs (max rel diff %.1e)\n", others_bitwise, (int)(K * others.size()), others_maxrel);

    // The per-seed noise e_j = g_j - G (G exact, from mode none) is iid with mean 0 if PRAC is unbiased. From the
    // K x K Gram matrix of the e_j:
    //   tr  = (1/K) Σ_j ||e_j||²                 unbiased estimate of tr Σ = E||e_j||² (the per-seed variance)
    //   tr2 = Σ_{i≠j} (e_iᵀe_j)² / (K(K-1))     unbiased estimate of tr Σ²
    // ||mean_K - G||²·K / tr Σ is (approximately, CLT) a Gaussian quadratic form with weights λ_i(Σ) / tr Σ:
    // |w|₂² = tr Σ² / (tr Σ)² (the inverse effective dimension), |w|_∞ <= |w|₂. Laurent-Massart at 1e-6 gives
    // [lo, hi] for it; a mean over 8 disjoint groups of 8 has |w|₂² / 8 and |w|_∞ / 8.
    for (size_t g = 0; g < estimated.size(); g++) {
        const ParamSpec& s = h.spec(estimated[g]);
        const size_t D = s.numel;
        dvec G(exact.begin() + s.offset, exact.begin() + s.offset + D);
        dvec E((size_t)K * D);
        for (int j = 0; j < K; j++)
            for (size_t i = 0; i < D; i++) E[(size_t)j * D + i] = (double)samples[g][j][i] - G[i];
        dvec Gram = dgemm(false, true, K, K, (int)D, E, E);
        double tr = 0, tr2 = 0;
        for (int i = 0; i < K; i++) {
            tr += Gram[(size_t)i * K + i] / K;
            for (int j = 0; j < K; j++)
                if (i != j) tr2 += Gram[(size_t)i * K + j] * Gram[(size_t)i * K + j] / ((double)K * (K - 1));
        }
        ASSERT_GT(tr, 0) << s.name << ": PRAC must add noise to this gradient";
        double w2 = tr2 / (tr * tr), w2c = std::max(w2, 0.0), x = std::log(1 / kFail);
        auto bounds = [&](double w2_, double winf_) {
            return std::make_pair(1 - 2 * std::sqrt(w2_ * x), 1 + 2 * std::sqrt(w2_ * x) + 2 * winf_ * x);
        };
        auto [lo, hi] = bounds(w2c, std::sqrt(w2c));
        auto [lo8, hi8] = bounds(w2c / 8, std::sqrt(w2c) / 8);
        // ||mean of samples [j0, j0 + k) - G||² = ||Σ e_j||² / k², from the Gram matrix
        auto err2 = [&](int j0, int k) {
            double e = 0;
            for (int i = j0; i < j0 + k; i++)
                for (int j = j0; j < j0 + k; j++) e += Gram[(size_t)i * K + j];
            return e / ((double)k * k);
        };
        double e8 = err2(0, 8), e64 = err2(0, K), avg8 = 0, gn = sq_norm(G);
        for (int grp = 0; grp < K / 8; grp++) avg8 += err2(8 * grp, 8) / (K / 8);
        double q64 = e64 * K / tr, q8 = e8 * 8 / tr, qavg8 = avg8 * 8 / tr;
        // unbiased at the 1/sqrt(K) scale: the error of the 64-seed mean is what the per-seed variance predicts
        EXPECT_LE(q64, std::min(hi, sb_factor())) << s.name << ": mean over 64 seeds too far from the exact gradient";
        EXPECT_GE(q64, lo) << s.name;
        EXPECT_LE(q8, hi) << s.name;
        EXPECT_GE(q8, lo) << s.name;
        // the 1/sqrt(K) rate: (error at K = 8, averaged over 8 disjoint groups) / (error at K = 64) -> sqrt(8)
        EXPECT_LE(qavg8, hi8) << s.name;
        EXPECT_GE(qavg8, lo8) << s.name;
        double rmin = std::sqrt(8 * std::max(lo8, 0.0) / std::min(hi, sb_factor())), rmax = std::sqrt(8 * hi8 / std::max(lo, 1e-300));
        std::printf("[ stats    ] %-8s |mean - exact| / |exact|: K=8 %.4f, K=64 %.4f (predicted from the per-seed variance "
                    "%.4f, %.4f); K=8 error (mean of 8 groups) / K=64 error = %.2f (sqrt 8 = 2.83, 1e-6 range [%.2f, "
                    "%.2f]), first group alone %.2f; ||mean-G||²·K/trΣ: K=64 %.2f, K=8 %.2f in [%.2f, %.2f]; effective "
                    "dimension %.0f; per-seed rel sd %.3f\n",
                    s.name.c_str(), std::sqrt(e8 / gn), std::sqrt(e64 / gn), std::sqrt(tr / 8 / gn),
                    std::sqrt(tr / K / gn), std::sqrt(avg8 / e64), rmin, rmax, std::sqrt(e8 / e64), q64, q8,
                    std::max(lo, 0.0), hi, 1 / w2c, std::sqrt(tr / gn));
    }
}

// (d) Mode prac with both classes disabled is mode none: bitwise the same loss and gradients over two steps.
template <template <class> class M>
void check_disabled_is_none(Arch arch, const char* name) {
    PracOptions o = opts(PracMode::PRAC);
    o.linear = o.nonlinear = false;
    Harness<M> a(arch, name, o, 2, 16), b(arch, name, opts(PracMode::NONE), 2, 16);
    for (auto& s : a.model->sites) EXPECT_FALSE(s.compressed()) << s.name;
    EXPECT_TRUE(a.model->arena.basis_specs.empty());
    EXPECT_EQ(a.model->arena.acts_bytes, b.model->arena.acts_bytes);
    for (int step = 0; step < 2; step++) {
        float la = a.step(step, 2), lb = b.step(step, 2);
        EXPECT_EQ(la, lb) << name << " step " << step;
        EXPECT_EQ(std::memcmp(a.model->grads_memory, b.model->grads_memory, a.numel() * sizeof(float)), 0)
            << name << " step " << step;
        a.sgd(0.1f);
        b.sgd(0.1f);
    }
}
TEST(PracModel, BothClassesDisabledIsBitwiseModeNone) {
    check_disabled_is_none<Llama>(Arch::LLAMA, "llama-tiny");
    check_disabled_is_none<GPT2>(Arch::GPT2, "gpt2-tiny");
}

// (e) LLaMA's gate and up pre-activations are two sites (model/llama.h), each of width F with the nonlinear ranks
// of width F and its own basis: per layer, each site's stored X·P is ITS half's exact X (taken from a mode-none run
// on the same weights and batch: the forward is exact) times its own P (float64 reference), and its Q1 (exact
// refresh) captures the top-r1 energy of its own X (float64 SVD), which the other half's Q1 does not.
TEST(PracModel, LlamaGateAndUpAreSeparateSites) {
    const int B = 4, T = 32, V = 512, N = B * T;
    PracOptions o = opts(PracMode::PRAC);
    o.refresh = PracRefresh::EXACT;
    Harness<Llama> h(Arch::LLAMA, "llama-tiny", o, B, T, V);
    Harness<Llama> none(Arch::LLAMA, "llama-tiny", opts(PracMode::NONE), B, T, V);
    const int F = h.model->cfg.hidden;
    const auto& gate = h.model->sites[SITE_FCH];
    const auto& up = h.model->sites[SITE_FCH_UP];
    ASSERT_EQ(h.model->sites.size(), (size_t)SITE_FCH_UP + 1);
    EXPECT_EQ(gate.name, "fch_gate");
    EXPECT_EQ(up.name, "fch_up");
    SiteDims want = prac_site_dims(o, SiteClass::NONLINEAR, F, "fch_gate");
    for (const auto* s : {&gate, &up}) {
        EXPECT_EQ(s->n, F) << s->name;
        EXPECT_EQ(s->cls, SiteClass::NONLINEAR) << s->name;
        EXPECT_TRUE(s->compressed()) << s->name;
        EXPECT_EQ(s->dims.r1, want.r1) << s->name;
        EXPECT_EQ(s->dims.r2, want.r2) << s->name;
    }
    ASSERT_LT(gate.r(), N);
    h.step(0);
    none.step(0);
    const int r = gate.r(), r1 = gate.dims.r1;
    for (int l = 0; l < gate.L; l++) {
        dvec X[2], Q1[2];
        const decltype(&gate) site[2] = {&gate, &up};
        const auto& exact = none.model->sites;
        for (int k = 0; k < 2; k++) {
            const float* x = exact[k == 0 ? SITE_FCH : SITE_FCH_UP].slot(l, N);
            X[k].assign(x, x + (size_t)N * F);
            const float* P = site[k]->P + (size_t)l * F * r;
            dvec Pd(P, P + (size_t)F * r), XP = dgemm(false, false, N, r, F, X[k], Pd);
            const float* xc = site[k]->packed + (size_t)l * N * r;
            double err = 0, mag = 0;  // fp32 GEMM over F = 176 terms vs float64: ~1e-6 relative
            for (size_t i = 0; i < XP.size(); i++) {
                err = worst_of(err, std::fabs(xc[i] - XP[i]));
                mag = std::max(mag, std::fabs(XP[i]));
            }
            EXPECT_LE(err, 1e-5 * mag)
                << site[k]->name << " layer " << l << ": the stored X·P is not this half's X times this site's P";
            Q1[k] = block(P, F, r, 0, r1);
        }
        EXPECT_NE(Q1[0], Q1[1]) << "layer " << l << ": gate and up share a basis";
        for (int k = 0; k < 2; k++) {
            dvec A = X[k], sv(F), U(1), Vt(1), superb(F);
            ASSERT_EQ(LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', N, F, A.data(), F, sv.data(), U.data(), 1, Vt.data(),
                                     1, superb.data()), 0);
            double top = 0;
            for (int i = 0; i < r1; i++) top += sv[i] * sv[i];
            double own = sq_norm(dgemm(false, false, N, r1, F, X[k], Q1[k]));
            double other = sq_norm(dgemm(false, false, N, r1, F, X[k], Q1[1 - k]));
            EXPECT_GE(own, (1 - 1e-4) * top)
                << site[k]->name << " layer " << l << ": Q1 is not its own X's top subspace";
            EXPECT_LT(other, 0.99 * top) << site[k]->name << " layer " << l << ": the other half's Q1 fits it as well";
        }
    }
}

// (f) --hidden-align: LLaMA's (N, F) activations at a padded row stride (ModelConfig::hidden_stride, model/llama.h)
// are the same model. Three SGD steps of llama-tiny (F = 176, stride 192 at alignment 64), every basis refreshed
// every step, give the losses and gradients of the contiguous layout bit for bit (OpenBLAS computes each product
// the same way whatever its leading dimensions): without PRAC; PRAC with the exact and the subspace refresh; fp8
// storage over more than one block of rows (N = 8320 > PRAC_FP8_BLOCK_ROWS) with --recompute 1; transients in
// their own buffers. --dump-site writes the same matrix.
struct PaddedRun {
    std::vector<float> losses, grads;
    std::string dump;  // bytes of the --dump-site file
};
static PaddedRun run_llama_tiny(int hidden_align, PracOptions o, int B, int T, Recompute rc, bool alias) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
    cfg.vocab_size = cfg.padded_vocab_size = 512;
    cfg.hidden_align = hidden_align;
    o.t1 = o.t2 = 1;
    CpuBackend be;
    Llama<CpuBackend> m(be, cfg, o, rc);
    m.prac_log = nullptr;
    m.alias_transients = alias;
    m.allocate_activations(B, T);
    m.init_weights(1234);
    std::string path = testing::TempDir() + "padded_dump_" + std::to_string(hidden_align) + ".npy";
    m.dump.site = "fch_up";
    m.dump.layer = 1;
    m.dump.step = 1;
    m.dump.path = path;
    Rng rng(99);
    std::vector<int32_t> in(B * T), tg(B * T);
    for (int i = 0; i < B * T; i++) in[i] = (int32_t)(rng.g() % 512), tg[i] = (int32_t)(rng.g() % 512);
    PaddedRun r;
    for (int step = 0; step < 3; step++) {
        m.sched.begin_step(o, step);
        m.zero_grad();
        r.losses.push_back(m.forward(in.data(), tg.data(), 1.0f / (B * T)));
        m.backward();
        for (size_t i = 0; i < m.param_buffer_numel; i++) m.params_memory[i] -= 0.1f * m.grads_memory[i];
    }
    r.grads.assign(m.grads_memory, m.grads_memory + m.param_buffer_numel);
    FILE* f = std::fopen(path.c_str(), "rb");
    EXPECT_NE(f, nullptr) << "no --dump-site file " << path;
    if (f) {
        for (int c; (c = std::fgetc(f)) != EOF;) r.dump.push_back((char)c);
        std::fclose(f);
    }
    return r;
}
TEST(PracModel, LlamaPaddedHiddenStrideIsBitwiseTheSameModel) {
    ModelConfig cfg = model_config_load(Arch::LLAMA, "llama-tiny");
    cfg.hidden_align = 64;
    ASSERT_EQ(cfg.hidden, 176);
    ASSERT_EQ(cfg.hidden_stride(), 192);
    struct Case {
        const char* what;
        PracMode mode;
        PracRefresh refresh;
        PracStorage storage;
        int B, T;
        Recompute rc;
        bool alias;
    };
    const Case cases[] = {
        {"no PRAC", PracMode::NONE, PracRefresh::SUBSPACE, PracStorage::ACT, 4, 32, Recompute(0), true},
        {"PRAC, exact refresh", PracMode::PRAC, PracRefresh::EXACT, PracStorage::ACT, 4, 32, Recompute(0), true},
        {"PRAC, subspace refresh, own transients", PracMode::PRAC, PracRefresh::SUBSPACE, PracStorage::ACT, 4, 32,
         Recompute(0), false},
        {"PRAC, fp8 over two row blocks, --recompute 1", PracMode::PRAC, PracRefresh::SUBSPACE, PracStorage::FP8, 130,
         64, Recompute(1), true},
    };
    for (const Case& c : cases) {
        PracOptions o = opts(c.mode);
        o.refresh = c.refresh;
        o.storage = c.storage;
        PaddedRun a = run_llama_tiny(1, o, c.B, c.T, c.rc, c.alias), b = run_llama_tiny(64, o, c.B, c.T, c.rc, c.alias);
        ASSERT_EQ(a.losses.size(), b.losses.size());
        EXPECT_EQ(std::memcmp(a.losses.data(), b.losses.data(), a.losses.size() * sizeof(float)), 0)
            << c.what << ": losses " << a.losses.back() << " vs " << b.losses.back() << " with the padded stride";
        ASSERT_EQ(a.grads.size(), b.grads.size());
        size_t differ = 0;
        for (size_t i = 0; i < a.grads.size(); i++) differ += std::memcmp(&a.grads[i], &b.grads[i], sizeof(float)) != 0;
        EXPECT_EQ(differ, 0u) << c.what << ": gradients that differ with the padded stride";
        EXPECT_FALSE(a.dump.empty()) << c.what;
        EXPECT_TRUE(a.dump == b.dump) << c.what << ": --dump-site wrote another matrix with the padded stride";
    }
}

}  // namespace
