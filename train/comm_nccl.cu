// NcclComm (see train/comm_nccl.h).
#include "train/comm_nccl.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "common/cuda_check.h"
#include "common/error.h"

#define NCCL_CHECK(call) check((call), #call, __FILE__, __LINE__)

// x (n) bf16 *= s, each product rounded once (grid-stride)
__global__ void nccl_scale_bf16_kernel(__nv_bfloat16* x, size_t n, float s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(__bfloat162float(x[i]) * s);
}

static ncclDataType_t nccl_type(DType t) {
    switch (t) {
        case DType::F32: return ncclFloat32;
        case DType::BF16: return ncclBfloat16;
        default: fail("internal: NCCL collectives take fp32 or bf16 buffers (got %s)", dtype_name(t));
    }
}

std::string NcclComm::version() {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (unknown version)";
    // since 2.9 the code is major * 10000 + minor * 100 + patch (NCCL_VERSION in nccl.h)
    if (v >= 20900) return format("NCCL %d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    return format("NCCL %d.%d.%d", v / 1000, (v / 100) % 10, v % 100);
}

NcclComm::NcclComm(Comm& host, int device, cudaStream_t compute) : host_(host), device_(device), compute_(compute) {
    rank_ = host.rank();
    size_ = host.size();
    local_rank_ = host.local_rank();
    local_size_ = host.local_size();
    cudaCheck(cudaSetDevice(device_));
    // the collectives' kernels go first when both streams have work ready, so a layer's gradients leave early
    int least = 0, greatest = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    cudaCheck(cudaEventCreateWithFlags(&computed_, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    host_.broadcast(&id, sizeof id, 0);  // MPI_Bcast of the 128-byte id (a no-op for one process)
    NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    if (size_ > 1) install_as_fatal_exit();
}

NcclComm::~NcclComm() {
    uninstall_as_fatal_exit();
    if (comm_) {
        if (std::uncaught_exceptions() > 0) {
            // an error on this rank: the others may wait in a collective forever, so no finalize (which waits for
            // them); comm_abort / MPI_Abort in the caller ends the job
            ncclCommAbort(comm_);
        } else {
            cudaStreamSynchronize(stream_);
            ncclResult_t r = ncclCommFinalize(comm_);
            if (r != ncclSuccess)
                std::fprintf(stderr, "[NCCL ERROR] rank %d: ncclCommFinalize: %s (%d)\n", rank_, ncclGetErrorString(r),
                             (int)r);
            ncclCommDestroy(comm_);
        }
        comm_ = nullptr;
    }
    if (reduced_) cudaEventDestroy(reduced_);
    if (computed_) cudaEventDestroy(computed_);
    if (stream_) cudaStreamDestroy(stream_);
}

void NcclComm::check(ncclResult_t r, const char* what, const char* file, int line) {
    if (r == ncclSuccess) return;
    const char* last = ncclGetLastError(comm_);
    bool has_last = last && *last;
    std::fprintf(stderr, "[NCCL ERROR] rank %d (GPU %d) at %s:%d: %s: %s (%d)%s%s\n", rank_, device_, file, line, what,
                 ncclGetErrorString(r), (int)r, has_last ? ": " : "", has_last ? last : "");
    abort_job(EXIT_FAILURE);
}

void NcclComm::abort_job(int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (comm_) {
        ncclCommAbort(comm_);  // frees the communicator and stops its kernels on this GPU
        comm_ = nullptr;
    }
    comm_abort(host_, code);  // MPI_Abort: every rank of the job ends (exit() for one process)
}

void NcclComm::after_compute() {
    cudaCheck(cudaEventRecord(computed_, compute_));
    cudaCheck(cudaStreamWaitEvent(stream_, computed_, 0));
}

void NcclComm::join_compute() {
    cudaCheck(cudaEventRecord(reduced_, stream_));
    cudaCheck(cudaStreamWaitEvent(compute_, reduced_, 0));
}

// NCCL averages floating types by pre-multiplying each contribution by 1/ranks rounded to the type (its enqueue
// code): in bf16 that is 1/ranks only for a power of two (bf16(1/3) = 0.333984375), so the average of 3, 6 or 12
// ranks' gradients would come out 1.00195 times too large, on every element at every step. There the collectives
// sum, and the averaged elements are scaled by 1/ranks in fp32 on NCCL's stream (one rounding, the same on every
// rank, so the replicas stay equal).
bool NcclComm::sum_then_scale(DType type) const { return type == DType::BF16 && (size_ & (size_ - 1)) != 0; }
ncclRedOp_t NcclComm::average_op(DType type) const { return sum_then_scale(type) ? ncclSum : ncclAvg; }
void NcclComm::scale_to_average(void* buf, size_t offset, size_t n, DType type) {
    if (!sum_then_scale(type) || n == 0) return;
    const int threads = 256;
    const unsigned blocks = (unsigned)std::min<size_t>((n + threads - 1) / threads, 4096);
    nccl_scale_bf16_kernel<<<blocks, threads, 0, stream_>>>((__nv_bfloat16*)buf + offset, n, 1.0f / (float)size_);
    cudaCheck(cudaGetLastError());
}

void NcclComm::allreduce_avg(void* buf, size_t n, DType type) {
    if (n == 0) return;
    after_compute();
    NCCL_CHECK(ncclAllReduce(buf, buf, n, nccl_type(type), average_op(type), comm_, stream_));
    scale_to_average(buf, 0, n, type);
    join_compute();
}

void NcclComm::allreduce_avg_start(void* buf, const std::vector<ElemRange>& ranges, DType type) {
    ncclDataType_t t = nccl_type(type);
    size_t es = dtype_size(type);
    char* p = (char*)buf;
    after_compute();
    NCCL_CHECK(ncclGroupStart());
    for (const ElemRange& r : ranges)
        if (r.numel)
            NCCL_CHECK(ncclAllReduce(p + r.offset * es, p + r.offset * es, r.numel, t, average_op(type), comm_, stream_));
    NCCL_CHECK(ncclGroupEnd());
    for (const ElemRange& r : ranges) scale_to_average(buf, r.offset, r.numel, type);
}

void NcclComm::wait_all() { join_compute(); }

void NcclComm::reduce_scatter_avg(void* buf, size_t n, DType type) {
    if (n == 0) return;
    ncclDataType_t t = nccl_type(type);
    size_t es = dtype_size(type);
    char* p = (char*)buf;
    after_compute();
    if (n % (size_t)size_ == 0 && !grouped_shards) {
        // equal shards: rank r's shard [r q, (r+1) q) is shard_begin/shard_end's; in place = recvbuff at it
        size_t q = n / (size_t)size_;
        NCCL_CHECK(ncclReduceScatter(p, p + (size_t)rank_ * q * es, q, t, average_op(type), comm_, stream_));
        scale_to_average(buf, (size_t)rank_ * q, q, type);
    } else {
        // uneven shards (Comm's rule: the first n % size ranks hold one more): one reduction to each shard's owner
        NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < size_; r++) {
            size_t b = shard_begin(n, r), c = shard_size(n, r);
            if (c) NCCL_CHECK(ncclReduce(p + b * es, p + b * es, c, t, average_op(type), r, comm_, stream_));
        }
        NCCL_CHECK(ncclGroupEnd());
        scale_to_average(buf, shard_begin(n, rank_), shard_size(n, rank_), type);  // this rank's shard holds the sum
    }
    join_compute();
}

void NcclComm::all_gather(void* buf, size_t n, DType type) {
    if (n == 0) return;
    ncclDataType_t t = nccl_type(type);
    size_t es = dtype_size(type);
    char* p = (char*)buf;
    after_compute();
    if (n % (size_t)size_ == 0 && !grouped_shards) {
        size_t q = n / (size_t)size_;
        NCCL_CHECK(ncclAllGather(p + (size_t)rank_ * q * es, p, q, t, comm_, stream_));
    } else {
        NCCL_CHECK(ncclGroupStart());
        for (int r = 0; r < size_; r++) {
            size_t b = shard_begin(n, r), c = shard_size(n, r);
            if (c) NCCL_CHECK(ncclBroadcast(p + b * es, p + b * es, c, t, r, comm_, stream_));
        }
        NCCL_CHECK(ncclGroupEnd());
    }
    join_compute();
}
