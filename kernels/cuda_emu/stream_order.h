// Stream order in the CPU execution layer (runtime.cpp), for the library stand-ins (cuBLAS, cuSOLVER, cuDNN,
// NCCL) and exec.cpp's launches: each stream is a queue that runs only when something waits for it.
//
// PRAC_EMU_STREAMS=deferred (the default): an operation issued to a stream waits in that stream's queue until the
// host or another stream needs it: cudaStreamSynchronize, cudaEventSynchronize, a blocking cudaMemcpy/cudaFree,
// cudaDeviceSynchronize, or an operation on another stream that waits (cudaStreamWaitEvent) for an event recorded
// after it. So streams run in an order unlike the one they were issued in, as a GPU may: work that reads another
// stream's results without waiting for them reads stale data, a host that reads pinned memory without waiting
// for its copy reads the old bytes, and a pinned buffer refilled before its copy has run sends the new bytes.
// PRAC_EMU_STREAMS=eager: every operation runs as it is issued (the order a single host thread gives).
// The null (legacy default) stream is not queued: its operations first run every blocking stream's queue, then run
// (a cudaStreamNonBlocking stream's work stays queued: the legacy stream does not wait for it, so a host that reads
// its results through a cudaMemcpy without waiting for that stream reads stale data, as it may on a GPU).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>

namespace cuda_emu {

// Issues `op` to stream s: queued (deferred mode) or run now (eager mode, or the null stream).
void stream_op(cudaStream_t s, std::function<void()> op);
// Runs s's queued operations (the null stream: every blocking stream's), then `op`, now: for what a GPU also does at once
// from the host's point of view (a copy to pageable memory), and for cuDNN's plans, which the stand-in runs in
// program order rather than queue (the frontend's descriptors need not outlive the call).
void stream_run_now(cudaStream_t s, const std::function<void()>& op);
// Runs s's queued operations (the null stream: every blocking stream's) now: NCCL's collectives run in each rank's program
// order, after their stream's work, so the ranks' blocking MPI calls pair up.
void stream_drain(cudaStream_t s);
// Whether operations are queued (PRAC_EMU_STREAMS is not "eager").
bool streams_deferred();

// Inside a stream operation that is not a kernel (a copy, a memset, a library routine): the device bytes it reads or
// writes, reported before it touches them, for the global-memory race check (exec.cpp): a byte that an earlier
// operation of another stream wrote (or, for a write, read) and that nothing orders before this one (emu_internal.h's
// OpOrder) fails the operation as a race, sticky, as a racing kernel's launch does; so does a range that is not inside
// one cudaMalloc (or cudaMallocHost) allocation: pageable host memory, which a GPU routine cannot reach
// (emu_internal.h's device_range_problem), or bytes past an allocation's end. `what` names the routine in the
// report.
void op_access(const void* p, size_t bytes, bool write, const char* what);
// The same for a column-major matrix of `rows` x `cols` elements of `elem` bytes, leading dimension `ld`.
void op_access_matrix(const void* p, int64_t rows, int64_t cols, int64_t ld, size_t elem, bool write,
                      const char* what);
// The upper or lower triangle (with the diagonal) of a column-major n x n matrix: what a routine that references one
// triangle only ("the other part is not referenced") touches.
void op_access_triangle(const void* p, int64_t n, int64_t ld, size_t elem, bool upper, bool write, const char* what);

// Device work that is not a stream operation (NCCL's collectives, which run in program order): while one lives, the
// device memory it touches is open to it (device_memory.cpp keeps cudaMalloc's memory closed to host code); those in
// open_now are opened at once (a collective's buffers, which another rank's process may read). Stream operations are
// device work already.
class DeviceWork {
public:
    explicit DeviceWork(std::initializer_list<const void*> open_now = {});
    ~DeviceWork();
    DeviceWork(const DeviceWork&) = delete;
    DeviceWork& operator=(const DeviceWork&) = delete;
};

}  // namespace cuda_emu
