// Communication between the ranks of a data-parallel run: the Comm interface (host buffers) and DeviceComm (device
// buffers). NoComm (one process) and MpiComm (MPI on host buffers: the CPU backend) are in train/comm.cpp, NcclComm
// (NCCL on device buffers: CUDA builds with NCCL) in train/comm_nccl.h. Every collective must be called by every
// rank in the same order with the same n/bytes/root (a mismatch is an MPI error, which aborts the whole job); the
// host collectives block. Which implementation a run gets, what the gradient average means, the ZeRO-1 shard rule
// and how a failing rank ends the job: docs/DESIGN.md sections 8.1, 8.2, 8.3 and 8.5.
#pragma once
#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/tensors.h"  // DType, ElemRange

struct Comm;
[[noreturn]] void comm_abort(Comm& comm, int code);  // declared with its documentation at the end

// Collectives on DEVICE buffers (NcclComm), element type fp32 or bf16 (DType::F32 / DType::BF16), with the same
// meaning, shard rule and call-order rules as Comm's host calls. They are stream-ordered, not host-blocking:
// each runs on the communicator's own stream after all the work enqueued so far on the compute stream the
// communicator was made with, and
//   - allreduce_avg, reduce_scatter_avg, all_gather: work enqueued on the compute stream after the call runs
//     after the collective (the compute stream waits on an event), so the caller may go on as if it had finished;
//   - allreduce_avg_start: the compute stream does NOT wait (the overlap: backward goes on while layer l's
//     gradients travel); until wait_all() the compute stream must not touch those ranges;
//   - wait_all: work enqueued on the compute stream afterwards runs after every collective started so far.
// The host sees results by synchronizing the compute stream (a download does).
// ZeRO-1's shard of rank r among `ranks`: n / ranks elements, one more for r < n % ranks; contiguous, in rank order
// (Comm::shard_begin; the planner sizes rank 0's, the largest).
inline size_t zero_shard_begin(size_t n, int r, int ranks) {
    size_t q = n / (size_t)ranks, rem = n % (size_t)ranks;
    return (size_t)r * q + std::min((size_t)r, rem);
}

struct DeviceComm {
    virtual ~DeviceComm() = default;
    virtual void allreduce_avg(void* buf, size_t n, DType type) = 0;
    virtual void reduce_scatter_avg(void* buf, size_t n, DType type) = 0;
    virtual void all_gather(void* buf, size_t n, DType type) = 0;
    // In place, the mean over the ranks of buf[r.offset, r.offset + r.numel) for every range (one NCCL group).
    virtual void allreduce_avg_start(void* buf, const std::vector<ElemRange>& ranges, DType type) = 0;
    virtual void wait_all() = 0;
};

struct Comm {
    virtual ~Comm();

    int rank() const { return rank_; }
    int size() const { return size_; }
    int local_rank() const { return local_rank_; }  // rank among the processes of this node (device index)
    int local_size() const { return local_size_; }  // processes on this node

    // In place: every rank ends with the element-wise mean over the ranks (identical on every rank).
    virtual void allreduce_avg(float* buf, size_t n) = 0;
    // In place: every rank ends with the element-wise sum (metrics, token counts, gradient-norm partials).
    virtual void allreduce_sum(double* buf, size_t n) = 0;
    // ZeRO-1: on return buf[shard_begin(n, rank()) .. shard_end(n, rank())) holds the mean over the ranks of that
    // range; the rest of buf is unspecified (scratch) on return.
    virtual void reduce_scatter_avg(float* buf, size_t n) = 0;
    // ZeRO-1: each rank contributes buf[shard_begin(n, rank()) .. shard_end(n, rank())); on return every rank's
    // buf holds all the shards (the whole buffer, identical on every rank).
    virtual void all_gather(float* buf, size_t n) = 0;
    // `bytes` bytes from rank `root` to every rank.
    virtual void broadcast(void* buf, size_t bytes, int root) = 0;
    virtual void barrier() = 0;

    // The shard of rank r: n / size() elements, one more for r < n % size(); contiguous, in rank order.
    size_t shard_begin(size_t n, int r) const;
    size_t shard_end(size_t n, int r) const;
    size_t shard_size(size_t n, int r) const { return shard_end(n, r) - shard_begin(n, r); }

    virtual const char* name() const = 0;  // "none", "mpi", "nccl"

    // The device-buffer collectives, or nullptr when this communicator has none (NoComm, MpiComm).
    virtual DeviceComm* device_comm() { return nullptr; }

    // Most elements handed to one MPI call (counts are ints in MPI <= 3.1); larger buffers go in pieces.
    // Tests lower it to exercise the chunked paths.
    size_t max_chunk = size_t(1) << 30;

  protected:
    int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
    // Ends the job on every rank with exit status `code`; never returns (see comm_abort).
    [[noreturn]] virtual void abort_job(int code);
    friend void comm_abort(Comm& comm, int code);
    // This communicator ends the job when a failed CUDA call ends the process (fatal_exit_hook, common/error.h),
    // until it is destroyed (NcclComm over MpiComm: the innermost one, which aborts the outer one too).
    void install_as_fatal_exit();
    void uninstall_as_fatal_exit();
    Comm* fatal_before_ = nullptr;
};

// MpiComm when the process was started by an MPI launcher (see comm_launcher_size) and the build has MPI,
// else NoComm. MPI is initialized here (MPI_Init_thread, MPI_THREAD_FUNNELED: only the thread that called
// comm_create may call the collectives) and finalized by the Comm's destructor; create at most one per process.
// Fails (UserError) when launched with several ranks by a build without MPI: each rank would otherwise train
// alone, silently.
// before_mpi_init, when given, runs just before MPI_Init (only when this call initializes MPI): the trainers choose
// their GPU there (launch.h: choose_gpu_before_mpi_init).
std::unique_ptr<Comm> comm_create(int* argc, char*** argv, const std::function<void()>& before_mpi_init = nullptr);

// The number of ranks the launcher announced in the environment: OMPI_COMM_WORLD_SIZE (Open MPI), PMI_SIZE
// (MPICH/Hydra, Intel MPI, Slurm PMI), else -1 when only PMIX_RANK is set (PMIx launchers such as srun
// --mpi=pmix: size unknown), else 0 (not started by a launcher).
int comm_launcher_size();

// This process's rank in the job as the launcher announced it before MPI_Init (OMPI_COMM_WORLD_RANK, PMI_RANK,
// PMIX_RANK), or -1 when none did.
int comm_launcher_rank();

// This process's rank on its node as the launcher announced it before MPI_Init, or -1 when none did (or the value is
// not a number): OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), MPI_LOCALRANKID (MPICH/Hydra, Intel MPI),
// MV2_COMM_WORLD_LOCAL_RANK (MVAPICH2), PMI_LOCAL_RANK (Cray), SLURM_LOCALID (srun) last: an mpirun inside a Slurm
// allocation starts its daemons through srun, so its ranks may all inherit that one's value. *from gets
// "NAME=VALUE" of the variable read.
int comm_launcher_local_rank(std::string* from = nullptr);

// Rank `root`'s s on every rank (a collective).
void broadcast_string(Comm& comm, std::string& s, int root);
// Every rank's s, in rank order, on every rank (a collective; for small strings: one broadcast per rank).
std::vector<std::string> all_gather_string(Comm& comm, const std::string& s);

// Flushes stdout/stderr, then ends the job on every rank with exit status `code` (MPI_Abort under MPI; exit()
// for NoComm). Call it on any error path after printing the message, instead of returning from main.
[[noreturn]] void comm_abort(Comm& comm, int code);
