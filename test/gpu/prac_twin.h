// The step tests' PRAC comparison of a CPU model and a CUDA model: each backend refreshes its own bases, which differ
// by rounding that the estimator amplifies (by k on the random part), so after the step that refreshed them the CPU
// model takes the GPU's bases and both rerun the step without a refresh (T1 = T2 = 1000 at step 1 of the schedule):
// the same Q1 and Q2 on both sides, so every gradient must agree as without PRAC.
#pragma once
#include <cstddef>
#include <vector>

#include "prac/prac.h"  // PracOptions

// Copies every compressed site's bases (L, n, r) from mg to mc, then zeroes both models' gradients and runs
// step(mc), step(mg) (a forward and a backward) with the refresh off. Returns the number of compressed sites.
template <class CpuModel, class CudaModel, class Step>
int rerun_with_gpu_bases(const PracOptions& prac, CpuModel& mc, CudaModel& mg, const Step& step) {
    int compressed = 0;
    for (size_t i = 0; i < mc.sites.size(); i++) {
        if (!mc.sites[i].P) continue;
        const size_t numel = (size_t)mc.sites[i].L * mc.sites[i].n * mc.sites[i].r();
        std::vector<float> P(numel);  // (L, n, r)
        mg.be.download_f32(P.data(), mg.sites[i].P, numel);
        mc.be.upload(mc.sites[i].P, P.data(), numel * sizeof(float));
        compressed++;
    }
    PracOptions frozen = prac;
    frozen.t1 = frozen.t2 = 1000;
    mc.zero_grad();
    mg.zero_grad();
    mc.sched.begin_step(frozen, 1);
    mg.sched.begin_step(frozen, 1);
    step(mc);
    step(mg);
    return compressed;
}
