// NcclComm: data parallelism on GPUs (DESIGN.md section 8, issue 6). One process per GPU (device = local rank %
// GPUs on the node), the NCCL unique id made on rank 0 and broadcast through the host communicator (MPI), then
// ncclCommInitRank. Gradients and parameters are reduced on DEVICE buffers through device_comm() (fp32 or bf16,
// ncclAvg for means); everything on host buffers (loss, norm and token sums, broadcasts, barriers, checkpoint
// gathers) goes to the host communicator, so metrics reduce in double precision as on the CPU backend.
//
// Streams. NCCL runs on its own high-priority stream. Each device collective first records an event on the compute
// stream (the CUDA backend's) and makes the NCCL stream wait on it, so it sees every gradient computed so far.
// The blocking-style calls then make the compute stream wait on an event recorded after the collective;
// allreduce_avg_start does not, which lets backward go on while a layer's gradients travel, and wait_all() joins
// the two streams before the gradient norm and the optimizer. Nothing here blocks the host.
//
// ZeRO-1 shards follow Comm's rule (comm.h): plain in-place ncclReduceScatter/ncclAllGather when size divides n,
// else grouped ncclReduce/ncclBroadcast, one per shard (grouped_shards forces the latter, for tests).
//
// Errors. A failed NCCL call prints "[NCCL ERROR] rank R at file:line: <call>: <ncclGetErrorString> (<code>):
// <ncclGetLastError>" and ends the job (ncclCommAbort, then MPI_Abort through the host communicator); comm_abort()
// does the same. The destructor aborts instead of destroying when an exception is in flight (the other ranks may
// be stuck in a collective), and otherwise finalizes and destroys the communicator.
//
// NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): the trainer checks local_size <= GPUs first.
// Only the 1-rank tests (test/test_comm_nccl.cu, test/test_trainer_cuda.cu) can run on a one-GPU machine; 2 and 3
// ranks run on the CPU execution layer (docs/VERIFICATION.md has which path ran where).
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "train/comm.h"

class NcclComm final : public Comm, public DeviceComm {
  public:
    // host: the communicator of the job (MpiComm under mpirun, NoComm for one process); it must outlive this
    // object. device: the CUDA device of this rank (set current here). compute: the stream whose work the
    // device collectives are ordered with (CudaBackend::stream). Collective over the ranks of host.
    NcclComm(Comm& host, int device, cudaStream_t compute);
    ~NcclComm() override;
    NcclComm(const NcclComm&) = delete;
    NcclComm& operator=(const NcclComm&) = delete;

    // ---- host buffers: the host communicator ----
    void allreduce_avg(float* buf, size_t n) override { host_.allreduce_avg(buf, n); }
    void allreduce_sum(double* buf, size_t n) override { host_.allreduce_sum(buf, n); }
    void reduce_scatter_avg(float* buf, size_t n) override { host_.reduce_scatter_avg(buf, n); }
    void all_gather(float* buf, size_t n) override { host_.all_gather(buf, n); }
    void broadcast(void* buf, size_t bytes, int root) override { host_.broadcast(buf, bytes, root); }
    void barrier() override { host_.barrier(); }
    const char* name() const override { return "nccl"; }
    DeviceComm* device_comm() override { return this; }

    // ---- device buffers (DeviceComm; contract in comm.h) ----
    void allreduce_avg(void* buf, size_t n, DType type) override;
    void reduce_scatter_avg(void* buf, size_t n, DType type) override;
    void all_gather(void* buf, size_t n, DType type) override;
    void allreduce_avg_start(void* buf, const std::vector<ElemRange>& ranges, DType type) override;
    void wait_all() override;

    int device() const { return device_; }
    cudaStream_t stream() const { return stream_; }
    // "NCCL 2.28.9" (the runtime library's version, which may differ from the headers')
    static std::string version();

    bool grouped_shards = false;  // tests: the grouped Reduce/Broadcast shard path even when size divides n

  protected:
    [[noreturn]] void abort_job(int code) override;

  private:
    Comm& host_;
    int device_ = 0;
    cudaStream_t compute_ = nullptr;  // not owned
    cudaStream_t stream_ = nullptr;   // NCCL's stream, owned
    cudaEvent_t computed_ = nullptr;  // recorded on compute_, waited on by stream_
    cudaEvent_t reduced_ = nullptr;   // recorded on stream_, waited on by compute_
    ncclComm_t comm_ = nullptr;

    void after_compute();  // stream_ waits for the compute stream's work so far
    void join_compute();   // the compute stream waits for stream_'s work so far
    void check(ncclResult_t r, const char* what, const char* file, int line);
};
