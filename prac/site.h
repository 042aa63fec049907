// Activation sites: the tensors a model saves for backward that PRAC may compress (ActSite), the refresh schedule
// (PracSchedule) and --dump-site (ActivationDump). The model calls the same four functions whether a site is
// compressed or not, so `--prac none` runs exactly the baseline op sequence: fwd(l) where layer l's full tensor is
// written in forward, save(l) compresses it (refreshing the basis when due), restore(l) gives the full tensor in
// backward (stored, or reconstructed into the shared transient buffer), weight_grad(l) the factored dW of a linear
// site. A recomputed site (--recompute) saves nothing: one (N, n) slot that backward refills. Which sites a
// transformer has: model/sites.h. The four functions, the transient buffers and recompute: docs/DESIGN.md section 4.2.
// With fp8 storage (--prac-storage fp8, prac/fp8.h) X·P is quantized right after compression, and dequantized into
// dead scratch before use: a block of rows at a time through fp8_block for save / restore, and whole into fp8_wgrad
// for weight_grad (a buffer the model knows to be dead there: model/sites.h wire_sites).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/npy.h"  // write_npy_f32 (--dump-site)
#include "common/tensors.h"
#include "prac/prac.h"

// Draw keys of RSO's subspaces (train/optim_rso.h) use site ids from here on, apart from every model site's.
constexpr uint32_t RSO_DRAW_SITE_BASE = 200;

// What one (site, layer) refreshes on this save (PracSchedule::due): Q1, Q2 on their phase; provisional before its
// first refresh when those are spread, first on that step; the step.
struct SiteRefresh {
    bool q1 = false, q2 = false, provisional = false, first = false;
    int64_t step = 0;
};

// --prac-refresh-overlap D (PracOptions::overlap): the model's pending copies of refreshed bases, one (n, r) slot
// per refresh in flight (prac_overlap_slots), taken in save and given back when the refresh is installed
// (ActSite::install_if). Lives with the bases (a model's basis specs).
template <typename T>
struct PracPendingPool {
    T* slots = nullptr;     // (count, slot_elems)
    size_t slot_elems = 0;  // n·r of the widest compressed site
    int count = 0;
    int steps = 0;              // D: a refresh begun on step s is installed at the end of step s + D - 1
    std::vector<uint8_t> busy;  // (count)
    T* take(size_t elems) {
        for (int i = 0; i < count && elems <= slot_elems; i++)
            if (!busy[i]) {
                busy[i] = 1;
                return slots + (size_t)i * slot_elems;
            }
        fail("internal error: --prac-refresh-overlap needs more than its %d pending bases of %zu elements "
             "(prac_overlap_slots)", count, slot_elems);
    }
    void give_back(const T* slot) { busy[(slot - slots) / slot_elems] = 0; }
};

template <class Backend>
struct ActSite {
    using act_t = typename Backend::act_t;
    using grad_t = typename Backend::grad_t;

    std::string name;
    uint32_t id = 0;  // position in the model's site list (part of the random draw's key)
    SiteClass cls = SiteClass::LINEAR;
    int n = 0;        // width
    int ld = 0;       // row stride of the full tensor (its slots, its transient buffer) in elements: 0 = n; the
                      // padded stride of LLaMA's F-wide sites (ModelConfig::hidden_stride, --hidden-align)
    int stack = 0;    // layers in the uncompressed stack (the residual stream keeps one more: the final output)
    int L = 0;        // layers with a saved tensor
    SiteDims dims;
    bool recompute = false;  // one slot for all layers, refilled by the model's backward (see top)
    bool borrowed = false;   // recompute: the slot is another recomputed site's (set by the model); no spec
    bool external = false;   // --optimizer rso: P is the optimizer's basis, written by it (optim_rso.h); never
                             // refreshed here
    std::string replaces;    // a site of older checkpoints whose state this one takes over (prac_state_load)

    act_t* full = nullptr;       // (stack, N, n)  uncompressed (rows at stride(): so are transient and fwd(l))
    act_t* packed = nullptr;     // (L, N, r)      compressed: X·P per layer (act storage)
    uint8_t* packed8 = nullptr;  // (L, N, r)      compressed, fp8 storage: e4m3 codes of X·P per layer
    float* scales = nullptr;     // (L, N)         fp8 storage: the rows' dequantization scales 2^-k
    act_t* fp8_block = nullptr;  // (min(N, PRAC_FP8_BLOCK_ROWS), r or more)  fp8 storage: rows of X·P in the
                                 //                act dtype; one buffer shared by the sites (fp8_block_scratch)
    act_t* P = nullptr;          // (L, n, r)      [Q1 | sqrt(k) Q2] per layer
    act_t* transient = nullptr;  // (N, n)         compressed: the full tensor while it is live
    float* wgrad_tmp = nullptr;  // (OC, r)        linear sites: dYᵀ·Xc
    act_t* fp8_wgrad = nullptr;  // (N, r or more) fp8 storage, linear sites: Xc dequantized for weight_grad; dead
                                 //                scratch at that point of backward (model/sites.h wire_sites)

    // refresh bookkeeping, per layer (part of checkpoints)
    std::vector<int64_t> q1_refreshes, q2_refreshes;
    std::vector<int64_t> fp8_saves;  // fp8 storage: saves so far, the key of the next save's rounding bits
    std::vector<uint8_t> has_basis;
    int64_t failures = 0;
    const GramReducer* reduce_gram = nullptr;  // shared subspace across data-parallel ranks (see prac.h)
    PracPendingPool<act_t>* overlap = nullptr;  // --prac-refresh-overlap: where refreshes go first
    struct Pending {
        int layer;
        act_t* slot;            // the refreshed copy of the layer's P
        int64_t install_after;  // the step at whose end it becomes the basis
    };
    std::vector<Pending> pending;  // refreshes in flight, in the order they began (checkpointed)

    int r() const { return dims.r(); }
    bool compressed() const { return dims.compressed; }
    int stride() const { return ld ? ld : n; }

    act_t* slot(int l, size_t N) const { return full + (recompute ? 0 : (size_t)l * N * stride()); }
    act_t* fwd(int l, size_t N) const { return compressed() ? transient : slot(l, N); }

    // Compress layer l's full tensor x (fwd(l)); refresh the basis first when the step asks for it (`due`, from
    // PracSchedule::due). With the first refreshes spread (PracOptions::initial_spread): `provisional` before this
    // layer's first refresh, which then compresses with a random basis drawn once (no Gram matrix, no solver);
    // `first` on the step of that refresh, which starts cold (the provisional basis is no warm start).
    // With `overlap` a layer that has a basis (a provisional one included) compresses with it and refreshes a copy
    // in a pending slot instead (the backend's prac_refresh_begin: on the CUDA backend the solve runs beside the
    // steps), which install_refreshes makes its basis at the end of step due.step + D - 1. A layer without any basis
    // refreshes in place: it has nothing else to compress with. A refresh due while the layer's previous one is still
    // in flight (a first refresh spread close to the layer's phase) installs that one first.
    void save(Backend& be, int l, size_t N, SiteRefresh due, uint64_t seed, FILE* log) {
        const bool provisional = due.provisional;
        if (!compressed()) return;
        act_t* Pl = P + (size_t)l * n * r();
        if (external) {
            CHECK_USER(has_basis[l], "internal error: site %s layer %d has no basis from the RSO optimizer",
                       name.c_str(), l);
            store_packed(be, l, N, Pl, seed);
            return;
        }
        if (provisional && has_basis[l]) {
            store_packed(be, l, N, Pl, seed);
            return;
        }
        const bool cold = !has_basis[l] || due.first;  // no basis, or only a provisional one
        bool q1 = due.q1 || cold, q2 = due.q2 || cold;
        if (q1 || q2) {
            PracDrawKey key{seed, id, (uint32_t)l, (uint64_t)q2_refreshes[l]};
            SiteDims d = dims;
            d.random_q1 = provisional;
            const GramReducer* reduce = provisional ? nullptr : reduce_gram;
            if (overlap && has_basis[l] && !provisional) {
                install_if(be, [&](const Pending& q) { return q.layer == l; }, log);
                key.refresh = (uint64_t)q2_refreshes[l];  // the installed refresh may have drawn
                act_t* slot = overlap->take((size_t)n * r());
                be.prac_refresh_begin(slot, Pl, fwd(l, N), (int)N, n, d, q1, q2, !cold, key, reduce, stride());
                pending.push_back({l, slot, due.step + overlap->steps - 1});
            } else {
                count_refresh(l, be.prac_refresh(Pl, fwd(l, N), (int)N, n, d, q1, q2, !cold, key, reduce, stride()),
                              log);
            }
        }
        store_packed(be, l, N, Pl, seed);
    }

    // --prac-refresh-overlap, at the end of `step`: the refreshes due to take effect now become the layers' bases.
    void install_refreshes(Backend& be, int64_t step, FILE* log) {
        install_if(be, [&](const Pending& q) { return q.install_after <= step; }, log);
    }
    // The refreshes in flight that `due` picks become their layers' bases, in the order they began (the backend waits
    // for each solve; a failed part kept the previous bits in the copy, as an in-place refresh keeps them in P).
    template <class Due>
    void install_if(Backend& be, Due due, FILE* log) {
        const size_t elems = (size_t)n * r();
        for (size_t i = 0; i < pending.size();) {
            const Pending q = pending[i];
            if (!due(q)) {
                i++;
                continue;
            }
            count_refresh(q.layer, be.prac_refresh_end(P + q.layer * elems, q.slot, elems), log);
            overlap->give_back(q.slot);
            pending.erase(pending.begin() + i);
        }
    }

    void count_refresh(int l, const PracRefreshResult& res, FILE* log) {
        q1_refreshes[l] += res.q1_changed;
        q2_refreshes[l] += res.q2_drawn;  // each draw consumes its key: the next one uses a fresh stream
        has_basis[l] = 1;
        if (!res.q1_ok || !res.q2_ok) {
            failures++;
            if (log) std::fprintf(log, "warning: PRAC site %s layer %d: %s\n", name.c_str(), l, res.message.c_str());
        }
    }

    // Xc = X·P of layer l's full tensor (fwd(l)) into the packed storage. fp8: a block of rows at a time, compressed
    // into fp8_block and quantized from there, with rounding bits keyed by (seed, site, layer, saves so far), so a
    // resumed run (fp8_saves is checkpointed) rounds exactly as the uninterrupted one.
    void store_packed(Backend& be, int l, size_t N, const act_t* Pl, uint64_t seed) {
        if (!dims.fp8) {
            be.prac_compress(packed + (size_t)l * N * r(), fwd(l, N), Pl, (int)N, n, r(), stride());
            return;
        }
        PracDrawKey key{seed, id, (uint32_t)l, (uint64_t)fp8_saves[l]++, PRAC_DRAW_FP8_ROUNDING};
        for (size_t i0 = 0; i0 < N; i0 += PRAC_FP8_BLOCK_ROWS) {
            int rows = (int)std::min<size_t>(PRAC_FP8_BLOCK_ROWS, N - i0);
            be.prac_compress(fp8_block, fwd(l, N) + i0 * stride(), Pl, rows, n, r(), stride());
            be.prac_fp8_quantize(packed8 + ((size_t)l * N + i0) * r(), scales + (size_t)l * N + i0, fp8_block, rows,
                                 r(), i0, key);
        }
    }

    // The full tensor of layer l for backward.
    act_t* restore(Backend& be, int l, size_t N) {
        if (!compressed()) return slot(l, N);
        const act_t* Pl = P + (size_t)l * n * r();
        if (!dims.fp8) {
            be.prac_reconstruct(transient, packed + (size_t)l * N * r(), Pl, (int)N, n, r(), stride());
            return transient;
        }
        for (size_t i0 = 0; i0 < N; i0 += PRAC_FP8_BLOCK_ROWS) {
            int rows = (int)std::min<size_t>(PRAC_FP8_BLOCK_ROWS, N - i0);
            be.prac_fp8_dequantize(fp8_block, packed8 + ((size_t)l * N + i0) * r(), scales + (size_t)l * N + i0, rows,
                                   r());
            be.prac_reconstruct(transient + i0 * stride(), fp8_block, Pl, rows, n, r(), stride());
        }
        return transient;
    }

    // dW (OC, n) += dY (N, OC)ᵀ · X_l (N, n), dbias += column sums of dY; dY rows at stride ld_dy (0: OC).
    void weight_grad(Backend& be, int l, size_t N, grad_t* dW, grad_t* dbias, const act_t* dY, int OC, int ld_dy = 0) {
        if (!compressed()) {
            be.matmul_backward_weight(dW, dbias, dY, slot(l, N), (int)N, n, OC, ld_dy, stride());
            return;
        }
        const act_t* xc = packed + (size_t)l * N * r();
        if (dims.fp8) {  // Xc (N, r) into dead scratch (see top)
            if (!fp8_wgrad) fail("internal: site %s stores fp8 but has no fp8_wgrad scratch (wire_sites)", name.c_str());
            be.prac_fp8_dequantize(fp8_wgrad, packed8 + (size_t)l * N * r(), scales + (size_t)l * N, (int)N, r());
            xc = fp8_wgrad;
        }
        be.prac_weight_grad(dW, dbias, dY, xc, P + (size_t)l * n * r(), (int)N, n, r(), OC, wgrad_tmp, ld_dy);
    }
};

// Which step of training the sites are in. Refreshes happen on the first micro-batch of a step (the other
// micro-batches and evaluation never refresh). With PracOptions::stagger each refresh unit, u = layer x sites +
// site id of `units` (set by the model), has its own phase: Q1 of unit u is refreshed on the steps s with
// s mod T1 = floor(u·T1 / units) (Q2 likewise with T2), so each unit still refreshes every T1 steps but a step
// refreshes at most ceil(units / T1) units instead of all of them (no step stalls). Without stagger, every unit
// on the multiples of T. A unit without a basis refreshes on its first step whatever the phase (site.h save).
// The first refreshes themselves: on the first step, or with K = min(PracOptions::initial_spread, units) > 1 unit u's
// on step first_refresh(u) = floor(u·K / units), at most ceil(units / K) per step (a K beyond the units would only
// leave steps without one); before it the unit is provisional (a random basis, site.h save) and skips its regular
// refreshes.
// A pure function of the step: a resumed run refreshes exactly what the uninterrupted one would.
struct PracSchedule {
    int64_t step = -1;
    bool first_micro_batch = false;
    bool refresh_q1 = false, refresh_q2 = false;  // some unit refreshes Q1 / Q2 on this step
    int units = 1;                                // refresh units of the model (layers x sites)
    int t1 = 0, t2 = 0;
    bool stagger = false;
    int spread = 0;  // PracOptions::initial_spread
    void begin_step(const PracOptions& o, int64_t s) {
        step = s;
        first_micro_batch = true;
        t1 = o.t1;
        t2 = o.t2;
        stagger = o.stagger;
        spread = o.initial_spread;
        refresh_q1 = any_due(t1);
        refresh_q2 = any_due(t2);
    }
    int64_t phase(int unit, int t) const { return stagger && units > 0 ? (int64_t)unit * t / units : 0; }
    bool q1_due(int unit) const { return refresh_q1 && step % t1 == phase(unit, t1) && !provisional(unit); }
    bool q2_due(int unit) const { return refresh_q2 && step % t2 == phase(unit, t2) && !provisional(unit); }
    int spread_steps() const { return prac_spread_steps(spread, units); }  // K above; 0: no spread
    int64_t first_refresh(int unit) const { return spread_steps() > 1 ? (int64_t)unit * spread_steps() / units : 0; }
    bool provisional(int unit) const { return step < first_refresh(unit); }
    bool first_due(int unit) const { return first_micro_batch && step > 0 && step == first_refresh(unit); }
    bool any_first_due() const {
        for (int u = 0; u < units; u++)
            if (first_due(u)) return true;
        return false;
    }
    SiteRefresh due(int unit) const {
        return {q1_due(unit), q2_due(unit), provisional(unit), first_due(unit), step};
    }
    void end_micro_batch() { first_micro_batch = refresh_q1 = refresh_q2 = false; }

  private:
    bool any_due(int t) const {
        if (t <= 0) return false;
        if (!stagger) return step % t == 0;
        for (int u = 0; u < units; u++)
            if (step % t == phase(u, t)) return true;
        return false;
    }
};

// --dump-site: writes one site's full input activation (N, n) at one step and layer to .npy as fp32, for
// prac_analyze (the paper's Figure 2 spectrum analysis). Taken on the first micro-batch of that step, before
// compression, so it is the exact X whatever the PRAC mode.
struct ActivationDump {
    std::string site;  // empty = off
    int layer = 0;
    int64_t step = 0;
    std::string path;
    bool done = false;

    bool wants(const std::string& name, int l, const PracSchedule& s) const {
        return !done && !site.empty() && name == site && l == layer && s.step == step && s.first_micro_batch;
    }
    // x (N, n) with rows at stride ld
    template <class Backend>
    void write(Backend& be, const typename Backend::act_t* x, size_t N, int n, int ld) {
        std::vector<float> host(N * ld);
        be.download_f32(host.data(), x, host.size());
        for (size_t i = 1; i < N && ld != n; i++)  // the rows, packed (row i moves down; nothing is overwritten early)
            std::copy(host.begin() + i * ld, host.begin() + i * ld + n, host.begin() + i * n);
        write_npy_f32(path, host.data(), {(int64_t)N, (int64_t)n});
        std::printf("dumped site %s layer %d at --dump-step %lld (the step printed as %lld, its first micro-batch): "
                    "(%zu, %d) -> %s\n", site.c_str(), layer, (long long)step, (long long)step + 1, N, n, path.c_str());
        done = true;
    }
};

// Builds a site with its ranks from the PRAC options (throws on impossible ranks).
template <class Backend>
ActSite<Backend> make_site(const char* name, uint32_t id, SiteClass cls, int n, int L, int stack,
                           const PracOptions& o, int ld = 0) {
    ActSite<Backend> s;
    s.name = name;
    s.id = id;
    s.cls = cls;
    s.n = n;
    s.ld = ld;
    s.L = L;
    s.stack = stack;
    s.dims = prac_site_dims(o, cls, n, name);
    s.external = o.rso_rank > 0 && s.dims.compressed;
    s.q1_refreshes.assign(L, 0);
    s.q2_refreshes.assign(L, 0);
    s.fp8_saves.assign(L, 0);
    s.has_basis.assign(L, 0);
    return s;
}

// The site's saved tensor goes into the activation specs (the full stack, or the packed projections); its
// bases into the basis specs, which live in their own allocation so they survive a change of batch shape.
template <class Backend>
void site_add_specs(ActSite<Backend>& s, size_t N, std::vector<TensorSpec>& acts, std::vector<TensorSpec>& bases) {
    DType act = Backend::act_dtype;
    MemCategory cat = s.cls == SiteClass::LINEAR ? MemCategory::SAVED_LINEAR : MemCategory::SAVED_NONLINEAR;
    if (s.recompute) {  // one shared slot, rewritten per layer: scratch, not saved
        if (!s.borrowed)
            acts.push_back({s.name + ".recompute", (void**)&s.full, N * s.stride(), act, MemCategory::TRANSIENT});
    } else if (!s.compressed()) {
        acts.push_back({s.name, (void**)&s.full, (size_t)s.stack * N * s.stride(), act, cat});
    } else {
        if (s.dims.fp8) {
            acts.push_back({s.name + ".packed", (void**)&s.packed8, (size_t)s.L * N * s.r(), DType::F8E4M3, cat});
            acts.push_back({s.name + ".scales", (void**)&s.scales, (size_t)s.L * N, DType::F32, cat});
        } else {
            acts.push_back({s.name + ".packed", (void**)&s.packed, (size_t)s.L * N * s.r(), act, cat});
        }
        bases.push_back({s.name + ".P", (void**)&s.P, (size_t)s.L * s.n * s.r(), act, MemCategory::PRAC_BASES});
    }
}

// --prac-refresh-overlap (o.overlap): the pending pool joins the bases' allocation, prac_overlap_slots(o, units)
// slots of the widest compressed site's (n, r), and every site that refreshes itself takes its slots from it.
template <class Backend>
void overlap_add_spec(std::vector<ActSite<Backend>>& sites, PracPendingPool<typename Backend::act_t>& pool,
                      const PracOptions& o, int units, std::vector<TensorSpec>& bases) {
    pool.slot_elems = 0;
    for (ActSite<Backend>& s : sites) {
        bool refreshes = o.overlap > 0 && s.compressed() && !s.external;
        s.overlap = refreshes ? &pool : nullptr;
        if (refreshes) pool.slot_elems = std::max(pool.slot_elems, (size_t)s.n * s.r());
    }
    pool.count = pool.slot_elems ? prac_overlap_slots(o, units) : 0;
    pool.steps = o.overlap;
    pool.busy.assign(pool.count, 0);
    if (pool.count)
        bases.push_back({"prac.pending", (void**)&pool.slots, pool.count * pool.slot_elems, Backend::act_dtype,
                         MemCategory::PRAC_BASES});
}

// The end of step `step` for the refreshes in flight (ActSite::install_refreshes of every site); nothing without
// --prac-refresh-overlap.
template <class Backend>
void install_refreshes(Backend& be, std::vector<ActSite<Backend>>& sites, int64_t step, FILE* log) {
    for (ActSite<Backend>& s : sites) s.install_refreshes(be, step, log);
}

// Refreshes still in flight are waited for and dropped: for a model that goes away before their steps are over (the
// end of a run, an error), whose pending copies a solve on the CUDA backend's worker may still be writing.
template <class Backend>
void discard_refreshes(Backend& be, std::vector<ActSite<Backend>>& sites) {
    for (ActSite<Backend>& s : sites) {
        for (const auto& q : s.pending) be.prac_refresh_discard(q.slot);
        s.pending.clear();
    }
}

// Elements of the factored weight-gradient scratch: (OC, r) of the widest compressed linear site among the
// (site index, OC) pairs (0 when none is compressed).
template <class Backend>
size_t factored_grad_scratch(const std::vector<ActSite<Backend>>& sites,
                             std::initializer_list<std::pair<int, int>> linear) {
    size_t m = 0;
    for (auto [site, OC] : linear)
        if (sites[site].compressed()) m = std::max(m, (size_t)OC * sites[site].r());
    return m;
}

// Elements of the fp8 storage's block scratch ActSite::fp8_block, shared by all sites: (min(N, PRAC_FP8_BLOCK_ROWS),
// r) of the widest fp8 site (0 when no site stores fp8). A transient buffer (dead between the sites' calls).
template <class Backend>
size_t fp8_block_scratch(const std::vector<ActSite<Backend>>& sites, size_t N) {
    size_t r = 0;
    for (const ActSite<Backend>& s : sites)
        if (s.compressed() && s.dims.fp8) r = std::max(r, (size_t)s.r());
    return std::min(N, (size_t)PRAC_FP8_BLOCK_ROWS) * r;
}
