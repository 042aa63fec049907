// The mean of the data-parallel ranks' gradients, in one call after backward whatever the setup:
//   1 rank             nothing to average; the gradient norm only
//   MPI (CPU backend)  an all-reduce of the host fp32 buffer, or a reduce-scatter under ZeRO-1
//   NCCL (CUDA)        the same on the device; with --overlap-comm 1 (and no ZeRO) each layer's average starts
//                      during the last micro-batch's backward, as soon as that layer's gradients are complete
// Every rank issues the same collectives in the same order, also a rank whose micro-batches were all padding.
#pragma once
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "common/tensors.h"
#include "model/model_common.h"  // layer_param_ranges
#include "model/weights.h"       // ParamSpec, ElemRange
#include "train/comm.h"
#include "train/optim_adamw.h"     // grad_norm

// The MPI communicator reduces host fp32 buffers: the CPU backend's gradients and parameters. (GPU data
// parallelism uses NcclComm's device_comm() on device buffers; train_main refuses MPI with GPU ranks > 1.)
template <typename T>
float* comm_buffer(T* p) {
    if constexpr (std::is_same_v<T, float>) return p;
    else fail("internal: MPI collectives need the CPU backend's fp32 host buffers");
}

template <class Backend>
struct GradientSync {
    Backend& be;
    Comm& comm;
    DeviceComm* dcomm;  // the device collectives (NCCL), or null: MPI or one rank
    const int L;
    const size_t n;                  // elements of the parameter (and gradient) buffer
    const bool sharded;              // ZeRO-1: this rank averages and updates [shard_lo, shard_hi) only
    const size_t shard_lo, shard_hi;
    const bool overlap;              // per-layer averages during the last backward
    std::vector<std::vector<ElemRange>> layer_ranges;  // [l]: layer l's gradient slices; [L]: the other tensors
    bool started = false;            // the per-layer averages of this step were started by a backward

    GradientSync(Backend& be, Comm& comm, const std::vector<ParamSpec>& specs, int L, size_t n, bool sharded,
                 size_t shard_lo, size_t shard_hi, bool overlap_comm)
        : be(be), comm(comm), dcomm(comm.device_comm()), L(L), n(n), sharded(sharded), shard_lo(shard_lo),
          shard_hi(shard_hi), overlap(dcomm && overlap_comm && !sharded) {
        if (overlap) layer_ranges = layer_param_ranges(specs, L);
    }

    const char* description() const {
        if (!dcomm) return nullptr;
        return overlap ? "layer by layer during the last micro-batch's backward (--overlap-comm 1)"
               : sharded ? "with one reduce-scatter after backward (ZeRO-1)"
                         : "with one all-reduce after backward (--overlap-comm 0)";
    }

    // Before each backward: the last micro-batch's backward starts the per-layer averages (on NCCL's stream) as
    // each layer's gradients complete; no gradient is added after it. The others run without the hook.
    template <class Model>
    void watch_backward(Model& model, bool last_micro_batch) {
        if (!overlap || !last_micro_batch) {
            model.on_layer_grads = nullptr;
            return;
        }
        model.on_layer_grads = [this, &model](int l) { start_layer(model.grads_memory, l); };
        started = true;
    }

    // After the step's micro-batches: the gradients (this rank's shard under ZeRO-1) become the means over the
    // ranks. Returns the norm of the averaged gradient (its readout is the step's first wait for the device).
    template <class Model>
    float average(Model& model) {
        model.on_layer_grads = nullptr;
        auto* g = model.grads_memory;
        if (comm.size() == 1 && !dcomm) return grad_norm(be, g, n);
        float norm;
        if (sharded) {
            if (dcomm) dcomm->reduce_scatter_avg(g, n, Backend::grad_dtype);
            else comm.reduce_scatter_avg(comm_buffer(g), n);
            double ss[1] = {be.sum_squares(g + shard_lo, shard_hi - shard_lo)};
            comm.allreduce_sum(ss, 1);
            norm = (float)std::sqrt(ss[0]);
        } else {
            if (overlap) {
                // a rank whose last micro-batch was all padding starts the same collectives in the same order
                if (!started) {
                    for (int l = L - 1; l >= 0; l--) start_layer(g, l);
                    start_layer(g, -1);
                }
                dcomm->wait_all();  // the compute stream waits for every layer's average
            } else if (dcomm) {
                dcomm->allreduce_avg(g, n, Backend::grad_dtype);
            } else {
                comm.allreduce_avg(comm_buffer(g), n);
            }
            norm = grad_norm(be, g, n);
        }
        started = false;
        return norm;
    }

    // ZeRO-1, after the update: every rank gets every updated shard.
    template <class Model>
    void gather_params(Model& model) {
        if (!sharded) return;
        if (dcomm) dcomm->all_gather(model.params_memory, n, Backend::act_dtype);
        else comm.all_gather(comm_buffer(model.params_memory), n);
    }

  private:
    template <typename G>
    void start_layer(G* grads, int l) {
        dcomm->allreduce_avg_start(grads, layer_ranges[l < 0 ? L : l], Backend::grad_dtype);
    }
};
