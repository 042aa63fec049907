// PRAC subspace state as named tensors, for checkpoints: per compressed site its bases P (L, n, r) and its
// refresh counters (which fix the next random draw), so a resumed run draws exactly what it would have.
// Loading checks that the state was written for the same sites, widths and ranks. A site that replaces an older
// one (ActSite::replaces: LLaMA's gate and up sites replace the old gate|up site "fch") and finds only the old
// site's state starts without a basis (it is drawn at the next step, as in a fresh run: the old basis of the joint
// space gives neither half's) and continues the old site's refresh counters, so no random draw repeats one the
// run already made. Everything else in such a checkpoint resumes as usual. With fp8 storage the state also holds
// each site's per-layer save counters (the key of the next save's rounding bits). With --prac-refresh-overlap D > 1
// a checkpoint falls between a refresh and the step it takes effect after: the state holds each such refresh's
// refreshed copy, layer, step and result flags (not its log message), which a resumed run installs when the
// uninterrupted one would.
#pragma once
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/safetensors.h"
#include "prac/site.h"

// A refresh in flight, as a checkpoint row: layer, install_after, q1_ok, q2_ok, q1_changed, q2_drawn, q2_householder
constexpr int PRAC_PENDING_FIELDS = 7;

// Host copies of the state, kept alive until the tensors are written.
struct PracStateBuffers {
    std::vector<std::vector<float>> f32;
    std::vector<std::vector<int64_t>> i64;
};

template <class Backend>
void prac_state_tensors(Backend& be, const std::vector<ActSite<Backend>>& sites, PracStateBuffers& buf,
                        std::vector<SafeTensorWrite>& out, const std::string& prefix = "prac.") {
    buf.f32.reserve(2 * sites.size());
    buf.i64.reserve(5 * sites.size());
    for (const ActSite<Backend>& s : sites) {
        if (!s.compressed()) continue;
        std::string p = prefix + s.name + ".";
        buf.f32.emplace_back((size_t)s.L * s.n * s.r());
        be.download_f32(buf.f32.back().data(), s.P, buf.f32.back().size());
        out.push_back({p + "P", "F32", {s.L, s.n, s.r()}, buf.f32.back().data()});
        buf.i64.push_back(s.q1_refreshes);
        out.push_back({p + "q1_refreshes", "I64", {s.L}, buf.i64.back().data()});
        buf.i64.push_back(s.q2_refreshes);
        out.push_back({p + "q2_refreshes", "I64", {s.L}, buf.i64.back().data()});
        buf.i64.emplace_back(s.has_basis.begin(), s.has_basis.end());
        out.push_back({p + "has_basis", "I64", {s.L}, buf.i64.back().data()});
        if (s.dims.fp8) {  // the next fp8 save's rounding key (site.h store_packed)
            buf.i64.push_back(s.fp8_saves);
            out.push_back({p + "fp8_saves", "I64", {s.L}, buf.i64.back().data()});
        }
        if (!s.pending.empty()) {  // refreshes in flight (--prac-refresh-overlap): their copies and results
            const size_t elems = (size_t)s.n * s.r(), k = s.pending.size();
            buf.f32.emplace_back(k * elems);
            buf.i64.emplace_back();
            for (size_t i = 0; i < k; i++) {
                const auto& q = s.pending[i];
                PracRefreshResult res = be.prac_refresh_result(q.slot);  // waits for the solve
                be.download_f32(buf.f32.back().data() + i * elems, q.slot, elems);
                buf.i64.back().insert(buf.i64.back().end(),
                                      {q.layer, q.install_after, res.q1_ok, res.q2_ok, res.q1_changed, res.q2_drawn,
                                       res.q2_householder});
            }
            out.push_back({p + "pending_P", "F32", {(int64_t)k, s.n, s.r()}, buf.f32.back().data()});
            out.push_back({p + "pending", "I64", {(int64_t)k, PRAC_PENDING_FIELDS}, buf.i64.back().data()});
        }
    }
}

// bases = false: only the counters (refresh and fp8 save counts) of the state under `prefix`; the sites start without
// bases, drawn at the next step (a data-parallel rank that the checkpoint's run did not have). RSO's sites (external:
// their P is the optimizer's, which it restores) are left as they are.
template <class Backend>
void prac_state_load(Backend& be, std::vector<ActSite<Backend>>& sites, const SafeTensorsFile& f,
                     const std::string& prefix = "prac.", bool bases = true) {
    for (ActSite<Backend>& s : sites) {
        auto read_counters = [&](const std::string& q) {  // (L) each
            std::vector<int64_t> c(s.L);
            f.read_raw(q + "q1_refreshes", c.data(), c.size() * 8);
            s.q1_refreshes = c;
            f.read_raw(q + "q2_refreshes", c.data(), c.size() * 8);
            s.q2_refreshes = c;
        };
        std::string p = prefix + s.name + ".";
        const SafeTensor* t = f.find(p + "P");
        const std::string old = s.replaces.empty() ? "" : prefix + s.replaces + ".";
        const SafeTensor* t_old = !t && !old.empty() ? f.find(old + "P") : nullptr;
        if (!s.compressed()) {
            if (t || t_old)
                fail("%s: holds PRAC state for site %s, which this run does not compress\n---> HINT: resume with "
                     "the --prac flags of the run that wrote it", f.path.c_str(),
                     t ? s.name.c_str() : s.replaces.c_str());
            continue;
        }
        if (t_old) {  // a checkpoint from before site s replaced site `replaces` (top)
            if (t_old->shape.empty() || t_old->shape[0] != s.L)
                fail("%s: PRAC state of site %s is not for %d layers\n---> HINT: resume with the model of the run "
                     "that wrote it", f.path.c_str(), s.replaces.c_str(), s.L);
            read_counters(old);
            s.has_basis.assign(s.L, 0);
            std::printf("notice: %s holds PRAC state for site %s, which this version splits into several sites: "
                        "%s starts with a fresh basis at the next step, continuing %s's refresh counters (not a "
                        "bit-exact continuation)\n", f.path.c_str(), s.replaces.c_str(), s.name.c_str(),
                        s.replaces.c_str());
            continue;
        }
        if (!bases && s.external) continue;  // RSO's P: the optimizer's (restored by it, the same on every rank)
        std::vector<int64_t> want = {s.L, s.n, s.r()};
        if (!t || t->shape != want)
            fail("%s: no PRAC state for site %s with L=%d, n=%d, r=%d\n---> HINT: resume with the --prac flags "
                 "(mode, ranks) of the run that wrote it", f.path.c_str(), s.name.c_str(), s.L, s.n, s.r());
        read_counters(p);
        std::vector<int64_t> c(s.L);
        if (bases) {
            std::vector<float> P((size_t)s.L * s.n * s.r());
            f.read_f32(p + "P", P.data(), P.size());
            be.upload_f32(s.P, P.data(), P.size());
            f.read_raw(p + "has_basis", c.data(), c.size() * 8);
            s.has_basis.assign(c.begin(), c.end());
        } else {
            s.has_basis.assign(s.L, 0);
        }
        if (s.dims.fp8) {
            if (!f.find(p + "fp8_saves"))
                fail("%s: no fp8 rounding state for site %s (written with --prac-storage act?)\n---> HINT: resume "
                     "with the --prac-storage of the run that wrote it", f.path.c_str(), s.name.c_str());
            f.read_raw(p + "fp8_saves", c.data(), c.size() * 8);
            s.fp8_saves = c;
        }
        const SafeTensor* tq = bases ? f.find(p + "pending") : nullptr;  // (another rank's: not this one's)
        if (tq) {  // refreshes in flight (top)
            if (!s.overlap)
                fail("%s: holds PRAC refreshes of site %s that take effect after steps still to come "
                     "(--prac-refresh-overlap)\n---> HINT: resume with the --prac-refresh-overlap of the run that "
                     "wrote it", f.path.c_str(), s.name.c_str());
            const int64_t k = tq->shape.empty() ? 0 : tq->shape[0];
            const size_t elems = (size_t)s.n * s.r();
            const SafeTensor* tp = f.find(p + "pending_P");
            if (tq->shape != std::vector<int64_t>{k, PRAC_PENDING_FIELDS} || !tp ||
                tp->shape != std::vector<int64_t>{k, s.n, s.r()})
                fail("%s: malformed PRAC refreshes in flight for site %s", f.path.c_str(), s.name.c_str());
            const int64_t free_slots = std::count(s.overlap->busy.begin(), s.overlap->busy.end(), 0);
            if (k > free_slots)
                fail("%s: holds more PRAC refreshes in flight than this run's --prac-refresh-overlap has room for "
                     "(site %s: %lld, room left: %lld)\n---> HINT: resume with the --prac-refresh-overlap, --prac-t1 "
                     "and --prac-t2 of the run that wrote it", f.path.c_str(), s.name.c_str(), (long long)k,
                     (long long)free_slots);
            std::vector<int64_t> rows((size_t)k * PRAC_PENDING_FIELDS);
            std::vector<float> copies(k * elems);
            f.read_raw(p + "pending", rows.data(), rows.size() * 8);
            f.read_f32(p + "pending_P", copies.data(), copies.size());
            for (int64_t i = 0; i < k; i++) {
                const int64_t* row = rows.data() + i * PRAC_PENDING_FIELDS;
                if (row[0] < 0 || row[0] >= s.L)
                    fail("%s: a PRAC refresh in flight for layer %lld of site %s, which has %d", f.path.c_str(),
                         (long long)row[0], s.name.c_str(), s.L);
                PracRefreshResult res;
                res.q1_ok = row[2], res.q2_ok = row[3], res.q1_changed = row[4], res.q2_drawn = row[5];
                res.q2_householder = row[6];
                if (!res.q1_ok || !res.q2_ok) res.message = "a refresh restored from a checkpoint failed in part";
                auto* slot = s.overlap->take(elems);
                be.upload_f32(slot, copies.data() + i * elems, elems);
                be.prac_refresh_restore(slot, res);
                s.pending.push_back({(int)row[0], slot, row[1]});
            }
        }
    }
}
