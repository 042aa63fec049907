// The CUDA backend's non-template parts: device setup, the tracked allocator, fp32 <-> floatX conversions (on the
// host), the staged uploads and the device-side loss sum of a training step.
#include "kernels/cuda_backend.cuh"

#include "kernels/attention_cudnn.cuh"

#include <cmath>
#include <cstdlib>
#include <cstring>
#if defined(PRAC_CUDA_EMU)
#include <sanitizer/asan_interface.h>  // ASAN_(UN)POISON_MEMORY_REGION (no-ops in a build without AddressSanitizer)

#include "kernels/cuda_emu/stream_order.h"  // cuda_emu::stream_op
#endif

// Bytes [used, capacity) of a device buffer that the work issued to stream s from now on may not touch: poisoned, in
// stream order, in the CPU execution layer, where device memory is host memory under AddressSanitizer, so that an
// access past what a call was given (which a buffer rounded up would hide) is an error there, as it may be a
// corruption on a GPU. used = capacity lifts it (before a free). Nothing on a GPU.
static void poison_slack(void* p, size_t used, size_t capacity, cudaStream_t s) {
#if defined(PRAC_CUDA_EMU)
    if (!p) return;
    cuda_emu::stream_op(s, [=] {
        ASAN_UNPOISON_MEMORY_REGION(p, capacity);
        ASAN_POISON_MEMORY_REGION((char*)p + used, capacity - used);
    });
#else
    (void)p, (void)used, (void)capacity, (void)s;
#endif
}

__global__ void f32_to_floatx_kernel(floatX* dst, const float* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = from_float<floatX>(src[i]);
}

CudaBackend::CudaBackend(int dev, uint64_t run_seed) : device(dev), seed(run_seed) {
    attention_impl = attention_impl_from_env();  // a bad PRAC_ATTENTION fails here, before anything is made
    cudaCheck(cudaSetDevice(device));
    // One priority level above the lowest: the refresh worker's stream (--prac-refresh-overlap) has the lowest, so
    // when both have work the GPU schedules the step's blocks first and the solve fills the gaps (NCCL's stream,
    // train/comm_nccl.cu, has the greatest).
    int greatest = 0;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&lowest_priority, &greatest));
    cudaCheck(cudaStreamCreateWithPriority(&stream, cudaStreamDefault,
                                           greatest < lowest_priority ? lowest_priority - 1 : lowest_priority));
    cublasCheck(cublasCreate(&cublas));
    cublasCheck(cublasSetStream(cublas, stream));
    // default math mode: no TF32, so the fp32 build compares tightly with the CPU backend
    cublasCheck(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));
    cusolverCheck(cusolverDnCreate(&cusolver));
    cusolverCheck(cusolverDnSetStream(cusolver, stream));
    cudaCheck(cudaMemGetInfo(&device_free_at_start, &device_total));
    lt = new CublasLt(alloc(CUBLASLT_WORKSPACE_BYTES), CUBLASLT_WORKSPACE_BYTES);
    attention_cudnn = attention_cudnn_create(stream, &CudaBackend::scratch_for_library, this);  // no cuDNN call yet
    loss_sum = (float*)alloc(CUDA_LOSS_SUM_BYTES);
    cudaCheck(cudaMallocHost((void**)&loss_host, sizeof(float)));
}

CudaBackend::~CudaBackend() {
    RefreshWorker& w = refresh_worker;
    if (w.job.valid()) prac_refresh_discard(w.pending);  // a failure on its way out (the step threw) stays there
    if (w.stream) {
        cudaStreamSynchronize(w.stream);
        cudaEventDestroy(w.inputs_ready);
        cusolverDnDestroy(w.cusolver);
        cublasDestroy(w.cublas);
        cudaStreamDestroy(w.stream);
        poison_slack(w.workspace, w.workspace_bytes, w.workspace_bytes, stream);  // free waits for the stream
        free(w.workspace, w.workspace_bytes);
    }
    cudaStreamSynchronize(stream);
    for (HostStaging& h : staging) {
        cudaEventDestroy(h.copied);
        cudaFreeHost(h.host);
    }
    cudaFreeHost(loss_host);
    free(loss_sum, CUDA_LOSS_SUM_BYTES);
    attention_cudnn_destroy(attention_cudnn);
    void* ws = lt ? lt->workspace : nullptr;
    delete lt;
    free(ws, CUBLASLT_WORKSPACE_BYTES);
    poison_slack(scratch, scratch_bytes, scratch_bytes, stream);
    free(scratch, scratch_bytes);
    cusolverDnDestroy(cusolver);
    cublasDestroy(cublas);
    cudaStreamDestroy(stream);
}

void* CudaBackend::alloc(size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // clear the sticky-free error state of this failure
        size_t free_b = 0, total = 0;
        cudaMemGetInfo(&free_b, &total);
        fail("out of GPU memory allocating %.1f MiB (this run holds %.1f MiB; the device has %.1f of %.1f GiB free)\n"
             "---> HINT: ./train_* --plan --gpu-mem %g with the same flags prints the plan and the largest "
             "micro-batch that fits; lower --batch-size (raise --grad-accum to keep the batch) or use --prac prac",
             bytes / 1048576.0, live_bytes / 1048576.0, free_b / 1073741824.0, total / 1073741824.0,
             std::floor(total / 1073741824.0 * 100) / 100);  // (rounded down: an H100's 79.65 read as 80 planned
                                                             // two sequences more than fit)
    }
    cudaCheck(e);
    cudaCheck(cudaMemsetAsync(p, 0, bytes, stream));
    live_bytes += bytes;
    peak_bytes = std::max(peak_bytes, live_bytes);
    return p;
}

void CudaBackend::free(void* p, size_t bytes) {
    if (!p) return;
    cudaCheck(cudaStreamSynchronize(stream));
    cudaCheck(cudaFree(p));
    live_bytes -= bytes;
}

void* CudaBackend::scratch_at_least(size_t bytes) {
    if (bytes > scratch_bytes) {
        poison_slack(scratch, scratch_bytes, scratch_bytes, stream);  // free waits for the stream
        free(scratch, scratch_bytes);
        scratch_bytes = align_up(bytes, 1 << 20);
        scratch = alloc(scratch_bytes);
    }
    poison_slack(scratch, bytes, scratch_bytes, stream);  // the next user's work may touch `bytes` of it, no more
    return scratch;
}

// fp32 <-> floatX on the host, through a bounded host chunk: no device memory beyond the destination (a device
// fp32 copy of the whole parameter buffer, 4 bytes per parameter, was the unplanned peak of weight init and of
// every checkpoint save and load). from_float / to_float are the device kernels' own conversions (cuda_bf16.h
// defines them for the host too), so the bytes are the same.
static constexpr size_t CONVERT_CHUNK = 1 << 22;  // elements per host chunk (8 MiB of bf16)

void CudaBackend::upload_f32(act_t* dst, const float* host_src, size_t n) {
    std::vector<act_t> chunk(std::min(n, CONVERT_CHUNK));
    for (size_t i0 = 0; i0 < n; i0 += CONVERT_CHUNK) {
        const size_t m = std::min(CONVERT_CHUNK, n - i0);
        for (size_t i = 0; i < m; ++i) chunk[i] = from_float<act_t>(host_src[i0 + i]);
        upload(dst + i0, chunk.data(), m * sizeof(act_t));
    }
}

void CudaBackend::download_f32(float* host_dst, const act_t* src, size_t n) {
    std::vector<act_t> chunk(std::min(n, CONVERT_CHUNK));
    for (size_t i0 = 0; i0 < n; i0 += CONVERT_CHUNK) {
        const size_t m = std::min(CONVERT_CHUNK, n - i0);
        download(chunk.data(), src + i0, m * sizeof(act_t));
        for (size_t i = 0; i < m; ++i) host_dst[i0 + i] = to_float(chunk[i]);
    }
}

void CudaBackend::upload_async(void* dst, const void* host_src, size_t bytes) {
    if (bytes == 0) return;
    // a large enough buffer whose last copy is done (cudaEventQuery does not wait; a pending event's NotReady is
    // not an error, but the runtime leaves it as the last error, which is cleared here)
    HostStaging* h = nullptr;
    for (HostStaging& c : staging) {
        if (c.bytes < bytes) continue;
        cudaError_t q = cudaEventQuery(c.copied);
        if (q == cudaErrorNotReady) {
            (void)cudaGetLastError();
            continue;
        }
        cudaCheck(q);
        h = &c;
        break;
    }
    if (!h && staging.size() < MAX_STAGING_BUFFERS) {
        staging.push_back({});
        h = &staging.back();
        cudaCheck(cudaEventCreateWithFlags(&h->copied, cudaEventDisableTiming));
    }
    if (!h) {  // every buffer is in flight (the host ran 64 copies ahead): wait for the least recently used one
        h = &*std::min_element(staging.begin(), staging.end(),
                               [](const HostStaging& a, const HostStaging& b) { return a.last_use < b.last_use; });
        cudaCheck(cudaEventSynchronize(h->copied));
    }
    if (h->bytes < bytes) {  // a new buffer, or one too small (its last copy is done: freeing it waits for nothing)
        if (h->host) cudaCheck(cudaFreeHost(h->host));
        h->host = nullptr;
        cudaCheck(cudaMallocHost(&h->host, bytes));
        h->bytes = bytes;
    }
    std::memcpy(h->host, host_src, bytes);
    cudaCheck(cudaMemcpyAsync(dst, h->host, bytes, cudaMemcpyHostToDevice, stream));
    cudaCheck(cudaEventRecord(h->copied, stream));
    h->last_use = ++staging_uses;
}

// twin: CpuBackend::loss_add. acc (1) += (mean of losses (N) over the i with targets[i] >= 0, 0 when none) /
// divisor. One block: per-thread double sums and counts, then a fixed tree (deterministic); the mean is rounded to
// fp32 once and divided in fp32, the twin's operations. B·T values are microseconds of reading for one block.
constexpr int LOSS_THREADS = 512;
__global__ void loss_add_kernel(float* acc, const float* losses, const int32_t* targets, int N, float divisor) {
    __shared__ double sums[LOSS_THREADS];
    __shared__ int counts[LOSS_THREADS];
    const int t = threadIdx.x;
    double s = 0.0;
    int c = 0;
    for (int i = t; i < N; i += LOSS_THREADS)
        if (targets[i] >= 0) {
            s += (double)losses[i];
            c++;
        }
    sums[t] = s;
    counts[t] = c;
    __syncthreads();
    for (int w = LOSS_THREADS / 2; w > 0; w >>= 1) {
        if (t < w) {
            sums[t] += sums[t + w];
            counts[t] += counts[t + w];
        }
        __syncthreads();
    }
    if (t == 0) {
        const float mean = counts[0] ? (float)(sums[0] / (double)counts[0]) : 0.0f;
        acc[0] = __fadd_rn(acc[0], __fdiv_rn(mean, divisor));
    }
}

void CudaBackend::loss_add(const float* losses, const int32_t* targets, int N, float divisor) {
    if (!(divisor > 0.0f)) fail("internal: loss_add with divisor %g", divisor);
    loss_add_kernel<<<1, LOSS_THREADS, 0, stream>>>(loss_sum, losses, targets, N, divisor);
    cudaCheck(cudaGetLastError());
}

float CudaBackend::loss_read() {
    cudaCheck(cudaMemcpyAsync(loss_host, loss_sum, sizeof(float), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaMemsetAsync(loss_sum, 0, sizeof(float), stream));
    cudaCheck(cudaStreamSynchronize(stream));
    return *loss_host;
}

void CudaBackend::refresh_worker_wait() {
    RefreshWorker& w = refresh_worker;
    if (!w.job.valid()) return;
    const act_t* pending = w.pending;
    w.pending = nullptr;
    w.done[pending] = w.job.get();  // rethrows what the worker threw
}

void CudaBackend::prac_refresh_begin(act_t* pending, const act_t* P, const act_t* x, int N, int n, const SiteDims& d,
                                     bool q1, bool q2, bool had_basis, const PracDrawKey& key,
                                     const GramReducer* reduce_gram, int ld_x) {
    RefreshWorker& w = refresh_worker;
    refresh_worker_wait();  // its workspace is this solve's
    size_t bytes = refresh_workspace_bytes(n, d);
    if (!w.stream) {
        cudaCheck(cudaStreamCreateWithPriority(&w.stream, cudaStreamNonBlocking, lowest_priority));  // below the step's
        cublasCheck(cublasCreate(&w.cublas));
        cublasCheck(cublasSetMathMode(w.cublas, CUBLAS_DEFAULT_MATH));  // no TF32, as the step's handle
        cusolverCheck(cusolverDnCreate(&w.cusolver));
        cudaCheck(cudaEventCreateWithFlags(&w.inputs_ready, cudaEventDisableTiming));
    }
    if (w.workspace_bytes < bytes) {  // in 1 MiB steps, as the planner counts it
        poison_slack(w.workspace, w.workspace_bytes, w.workspace_bytes, stream);  // free waits for the stream
        free(w.workspace, w.workspace_bytes);
        w.workspace_bytes = (bytes + (1 << 20) - 1) & ~(size_t)((1 << 20) - 1);
        w.workspace = alloc(w.workspace_bytes);
    }
    poison_slack(w.workspace, bytes, w.workspace_bytes, stream);  // before this refresh's Gram matrix and solve
    cudaCheck(cudaMemcpyAsync(pending, P, (size_t)n * d.r() * sizeof(act_t), cudaMemcpyDeviceToDevice, stream));
    if (prac_refresh_forms_gram(d, q1, had_basis))  // the solve reads G: formed here, while x is live
        prac_refresh_gram_cuda(x, N, n, d, prac_handles(), w.workspace, reduce_gram, ld_x);
    cudaCheck(cudaEventRecord(w.inputs_ready, stream));
    PracCudaHandles h{w.stream, w.cublas, w.cusolver};
    void* ws = w.workspace;
    cudaEvent_t ready = w.inputs_ready;
    int dev = device;
    auto solve = [=] {
        CudaChecksThrow to_the_waiter;  // a failed call reaches the step's thread through the future
        cudaCheck(cudaSetDevice(dev));  // the current device is per host thread
        cudaCheck(cudaStreamWaitEvent(h.stream, ready, 0));
        try {
            return prac_refresh_cuda(pending, (const act_t*)nullptr, N, n, d, q1, q2, had_basis, key, h, ws, bytes);
        } catch (...) {
            // what it queued before throwing still runs on the worker's stream, into the pending copy and the
            // workspace: done before the waiting thread (which frees or reuses them) hears of the failure
            cudaStreamSynchronize(h.stream);
            throw;
        }
    };
#if defined(PRAC_CUDA_EMU)  // see the header: when waited for, or (PRAC_EMU_REFRESH_THREAD=1) on its own thread
    const char* on_thread = std::getenv("PRAC_EMU_REFRESH_THREAD");
    w.job = std::async(on_thread && std::strcmp(on_thread, "1") == 0 ? std::launch::async : std::launch::deferred,
                       solve);
#else
    w.job = std::async(std::launch::async, solve);
#endif
    w.pending = pending;
}

PracRefreshResult CudaBackend::prac_refresh_result(const act_t* pending) {
    RefreshWorker& w = refresh_worker;
    if (w.pending == pending) refresh_worker_wait();
    auto it = w.done.find(pending);
    if (it == w.done.end()) fail("internal error: a PRAC refresh result without prac_refresh_begin");
    return it->second;
}

void CudaBackend::prac_refresh_discard(const act_t* pending) {
    RefreshWorker& w = refresh_worker;
    if (w.pending == pending && w.job.valid()) {
        w.pending = nullptr;
        try {
            w.job.get();
        } catch (...) {  // its result is not wanted: a failure has nobody to tell (called from destructors)
        }
    }
    w.done.erase(pending);
}

PracRefreshResult CudaBackend::prac_refresh_end(act_t* P, const act_t* pending, size_t elems) {
    PracRefreshResult res = prac_refresh_result(pending);
    refresh_worker.done.erase(pending);
    cudaCheck(cudaMemcpyAsync(P, pending, elems * sizeof(act_t), cudaMemcpyDeviceToDevice, stream));
    return res;
}
