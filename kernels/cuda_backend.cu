// The CUDA backend's non-template parts: device setup, the tracked allocator, fp32 <-> floatX conversions.
#include "kernels/cuda_backend.cuh"

#include "kernels/attention_cudnn.cuh"

__global__ void f32_to_floatx_kernel(floatX* dst, const float* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = from_float<floatX>(src[i]);
}

__global__ void floatx_to_f32_kernel(float* dst, const floatX* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_float(src[i]);
}

CudaBackend::CudaBackend(int dev, uint64_t run_seed) : device(dev), seed(run_seed) {
    attention_impl = attention_impl_from_env();  // a bad PRAC_ATTENTION fails here, before anything is made
    cudaCheck(cudaSetDevice(device));
    cudaCheck(cudaStreamCreate(&stream));
    cublasCheck(cublasCreate(&cublas));
    cublasCheck(cublasSetStream(cublas, stream));
    // default math mode: no TF32, so the fp32 build compares tightly with the CPU backend
    cublasCheck(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));
    cusolverCheck(cusolverDnCreate(&cusolver));
    cusolverCheck(cusolverDnSetStream(cusolver, stream));
    cudaCheck(cudaMemGetInfo(&device_free_at_start, &device_total));
    lt = new CublasLt(alloc(CUBLASLT_WORKSPACE_BYTES), CUBLASLT_WORKSPACE_BYTES);
    attention_cudnn = attention_cudnn_create(stream, &CudaBackend::scratch_for_library, this);  // no cuDNN call yet
}

CudaBackend::~CudaBackend() {
    cudaStreamSynchronize(stream);
    attention_cudnn_destroy(attention_cudnn);
    void* ws = lt ? lt->workspace : nullptr;
    delete lt;
    free(ws, CUBLASLT_WORKSPACE_BYTES);
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
             "---> HINT: ./train_* --plan --gpu-mem %.0f with the same flags prints the plan and the largest "
             "micro-batch that fits; lower --batch-size (raise --grad-accum to keep the batch) or use --prac prac",
             bytes / 1048576.0, live_bytes / 1048576.0, free_b / 1073741824.0, total / 1073741824.0,
             total / 1073741824.0);
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
        free(scratch, scratch_bytes);
        scratch_bytes = align_up(bytes, 1 << 20);
        scratch = alloc(scratch_bytes);
    }
    return scratch;
}

void CudaBackend::upload_f32(act_t* dst, const float* host_src, size_t n) {
    float* tmp = (float*)alloc(n * sizeof(float));
    upload(tmp, host_src, n * sizeof(float));
    f32_to_floatx_kernel<<<ceil_div(n, 256), 256, 0, stream>>>(dst, tmp, n);
    cudaCheck(cudaGetLastError());
    free(tmp, n * sizeof(float));
}

void CudaBackend::download_f32(float* host_dst, const act_t* src, size_t n) {
    float* tmp = (float*)alloc(n * sizeof(float));
    floatx_to_f32_kernel<<<ceil_div(n, 256), 256, 0, stream>>>(tmp, src, n);
    cudaCheck(cudaGetLastError());
    download(host_dst, tmp, n * sizeof(float));
    free(tmp, n * sizeof(float));
}
