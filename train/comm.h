// Communication between the ranks of a data-parallel run (DESIGN.md section 8).
//
// One interface, several implementations:
//   NoComm   one process (size 1): every collective is a no-op (and trivially correct).
//   MpiComm  MPI on HOST buffers (the CPU backend), chosen by comm_create() when the process was started by
//            mpirun/mpiexec/srun and the build has MPI (PRAC_HAVE_MPI).
//   NcclComm (train/comm_nccl.h, CUDA builds with NCCL) NCCL on DEVICE buffers through device_comm(); its
//            host-buffer calls (metrics, broadcasts, barriers, checkpoint gathers) go to the MPI (or, for one
//            process, the no-op) communicator it was made from.
// Every collective is blocking and must be called by every rank in the same order with the same n/bytes/root
// (a mismatch is an MPI error, which aborts the whole job: MPI_ERRORS_ARE_FATAL).
//
// Gradient averaging. Each rank computes the gradient of ITS OWN mean loss (the mean over its micro-batches of
// the per-micro-batch mean token loss, as train_step does). allreduce_avg() then leaves on every rank the mean
// of the ranks' gradients, which equals the single-process gradient of the concatenated (size x larger) batch
// when every micro-batch on every rank has the same number of valid (non-ignored) targets. With uneven counts it
// is a mean of per-rank means (each rank weighted equally, not each token); exactness would need the ranks to
// scale by a global token count (allreduce_sum of the counts first). The float sum order differs from the
// one-process run, so the two agree to rounding, not bit for bit.
//
// ZeRO-1 sharding. A buffer of n elements is split evenly: rank r owns [shard_begin(n, r), shard_end(n, r)),
// of n / size elements, plus one more for the first n % size ranks (the remainder goes to the lowest ranks).
// Shards are contiguous, in rank order, and cover [0, n) exactly. Padding n to a multiple of size makes every
// shard the same length, which NCCL's reduce-scatter/all-gather need for their plain in-place form. NcclComm keeps
// this rule: it uses ncclReduceScatter/ncclAllGather in place when size divides n (the trainer's parameter
// buffer is a multiple of 64 elements, so with 1, 2, 4, ..., 64 ranks), and otherwise one grouped ncclReduce
// (ncclBroadcast) per rank's shard, so the optimizer's shard [shard_begin, shard_end) is the same either way.
//
// Errors. When one rank fails, the others are usually blocked in a collective. A rank that exits WITHOUT
// MPI_Finalize (exit(1), a crash, a signal) makes OpenMPI's mpirun kill the whole job with a message ("mpirun
// detected that one or more processes exited with non-zero status ..."). A rank that calls MPI_Finalize and then
// exits while the others wait in a collective HANGS the job forever. Hence:
//   - on an error path call comm_abort(comm, code) after printing the message; it never returns and every
//     rank exits;
//   - MpiComm's destructor skips MPI_Finalize when it runs during stack unwinding (an exception is in flight),
//     so a UserError thrown through the Comm's scope and printed by main's catch still ends the job.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "model/tensors.h"

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
};

// MpiComm when the process was started by an MPI launcher (see comm_launcher_size) and the build has MPI,
// else NoComm. MPI is initialized here (MPI_Init_thread, MPI_THREAD_FUNNELED: only the thread that called
// comm_create may call the collectives) and finalized by the Comm's destructor; create at most one per process.
// Fails (UserError) when launched with several ranks by a build without MPI: each rank would otherwise train
// alone, silently.
std::unique_ptr<Comm> comm_create(int* argc, char*** argv);

// The number of ranks the launcher announced in the environment: OMPI_COMM_WORLD_SIZE (Open MPI), PMI_SIZE
// (MPICH/Hydra, Intel MPI, Slurm PMI), else -1 when only PMIX_RANK is set (PMIx launchers such as srun
// --mpi=pmix: size unknown), else 0 (not started by a launcher).
int comm_launcher_size();

// Flushes stdout/stderr, then ends the job on every rank with exit status `code` (MPI_Abort under MPI; exit()
// for NoComm). Call it on any error path after printing the message, instead of returning from main.
[[noreturn]] void comm_abort(Comm& comm, int code);
