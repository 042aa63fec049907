// NcclComm: data parallelism on GPUs. One process per GPU (device = local rank % GPUs on the node), the NCCL unique
// id made on rank 0 and broadcast through the host communicator (MPI), then ncclCommInitRank. Gradients and
// parameters are reduced on DEVICE buffers through device_comm() (fp32 or bf16, ncclAvg for means) on NCCL's own
// high-priority stream, ordered with the compute stream by events; everything on host buffers (loss, norm and token
// sums, broadcasts, barriers, checkpoint gathers) goes to the host communicator. The contract is train/comm.h's.
// Streams, ZeRO-1 shards, errors, and why only one-rank tests run on a one-GPU machine: docs/DESIGN.md section 8.4
// (and 8.3, 8.5).
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
    // averages: ncclAvg, or ncclSum then scale_to_average (bf16 over a rank count that is not a power of two)
    bool sum_then_scale(DType type) const;
    ncclRedOp_t average_op(DType type) const;
    void scale_to_average(void* buf, size_t offset, size_t n, DType type);  // elements [offset, offset + n) of buf
};
