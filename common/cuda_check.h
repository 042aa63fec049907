// Error checks for every CUDA runtime, cuBLAS and cuSOLVER call (llm.c style): on failure print
// "<what> error at file:line: <code> <string>" to stderr and exit(EXIT_FAILURE) (with several ranks: end the job,
// fatal_exit_hook). These are internal errors
// (a bad launch, a library misuse, out of device memory), not user errors, so they do not throw, except on a thread
// that holds a CudaChecksThrow (the PRAC refresh worker's): an exit there would tear the process down under the
// thread that waits for it, so the error is thrown to that thread instead (through the worker's future).
//
//   cudaCheck(cudaMemcpyAsync(...));
//   cudaCheck(cudaGetLastError());      // after a kernel launch
//   cublasCheck(cublasGemmEx(...));
//   cusolverCheck(cusolverDnXsyevd(...));
//
// Only for CUDA builds (include it from .cu files, or from code guarded by PRAC_HAVE_CUDA).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include "common/error.h"  // fatal_exit_hook

inline const char* cusolver_status_string(cusolverStatus_t s) {
    switch (s) {
        case CUSOLVER_STATUS_SUCCESS: return "CUSOLVER_STATUS_SUCCESS";
        case CUSOLVER_STATUS_NOT_INITIALIZED: return "CUSOLVER_STATUS_NOT_INITIALIZED";
        case CUSOLVER_STATUS_ALLOC_FAILED: return "CUSOLVER_STATUS_ALLOC_FAILED";
        case CUSOLVER_STATUS_INVALID_VALUE: return "CUSOLVER_STATUS_INVALID_VALUE";
        case CUSOLVER_STATUS_ARCH_MISMATCH: return "CUSOLVER_STATUS_ARCH_MISMATCH";
        case CUSOLVER_STATUS_MAPPING_ERROR: return "CUSOLVER_STATUS_MAPPING_ERROR";
        case CUSOLVER_STATUS_EXECUTION_FAILED: return "CUSOLVER_STATUS_EXECUTION_FAILED";
        case CUSOLVER_STATUS_INTERNAL_ERROR: return "CUSOLVER_STATUS_INTERNAL_ERROR";
        case CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
        case CUSOLVER_STATUS_NOT_SUPPORTED: return "CUSOLVER_STATUS_NOT_SUPPORTED";
        case CUSOLVER_STATUS_ZERO_PIVOT: return "CUSOLVER_STATUS_ZERO_PIVOT";
        case CUSOLVER_STATUS_INVALID_LICENSE: return "CUSOLVER_STATUS_INVALID_LICENSE";
        case CUSOLVER_STATUS_INVALID_WORKSPACE: return "CUSOLVER_STATUS_INVALID_WORKSPACE";
        default: return "CUSOLVER_STATUS_<other>";
    }
}

inline thread_local bool cuda_checks_throw = false;
// RAII: this thread's checks throw std::runtime_error instead of exiting, until the scope ends
struct CudaChecksThrow {
    bool before = cuda_checks_throw;
    CudaChecksThrow() { cuda_checks_throw = true; }
    ~CudaChecksThrow() { cuda_checks_throw = before; }
    CudaChecksThrow(const CudaChecksThrow&) = delete;
    CudaChecksThrow& operator=(const CudaChecksThrow&) = delete;
};
[[noreturn]] inline void cuda_check_fail(const char* kind, const char* what, const char* file, int line, int code,
                                         const char* text) {
    char msg[1024];
    std::snprintf(msg, sizeof msg, "[%s ERROR] at %s:%d: %s (%d: %s)", kind, file, line, what, code, text);
    if (cuda_checks_throw) throw std::runtime_error(msg);
    std::fprintf(stderr, "%s\n", msg);
    if (fatal_exit_hook) fatal_exit_hook(EXIT_FAILURE);  // every rank's end, not only this one's
    std::exit(EXIT_FAILURE);
}
inline void cuda_check_impl(cudaError_t e, const char* what, const char* file, int line) {
    if (e != cudaSuccess) cuda_check_fail("CUDA", what, file, line, (int)e, cudaGetErrorString(e));
}
inline void cuda_check_impl(cublasStatus_t s, const char* what, const char* file, int line) {
    if (s != CUBLAS_STATUS_SUCCESS) cuda_check_fail("cuBLAS", what, file, line, (int)s, cublasGetStatusString(s));
}
inline void cuda_check_impl(cusolverStatus_t s, const char* what, const char* file, int line) {
    if (s != CUSOLVER_STATUS_SUCCESS) cuda_check_fail("cuSOLVER", what, file, line, (int)s, cusolver_status_string(s));
}

#define cudaCheck(call) cuda_check_impl((cudaError_t)(call), #call, __FILE__, __LINE__)
#define cublasCheck(call) cuda_check_impl((cublasStatus_t)(call), #call, __FILE__, __LINE__)
#define cusolverCheck(call) cuda_check_impl((cusolverStatus_t)(call), #call, __FILE__, __LINE__)

// A cusolverDnParams_t that is destroyed however the scope ends (an error thrown midway included).
struct CusolverParams {
    cusolverDnParams_t p = nullptr;
    CusolverParams() { cusolverCheck(cusolverDnCreateParams(&p)); }
    ~CusolverParams() { cusolverDnDestroyParams(p); }
    CusolverParams(const CusolverParams&) = delete;
    CusolverParams& operator=(const CusolverParams&) = delete;
};

// Grid size for a 1-D launch over `count` items with `block` threads each, capped so grid-stride loops
// cover the rest (2^20 blocks is far above what any GPU keeps resident). On the CPU execution layer the environment
// variable PRAC_EMU_GRID_CAP lowers the cap: the emulated sizes never reach 2^20 blocks, so without it every block
// ran one iteration, and a grid-stride loop's later ones (shared memory reused across rows, a barrier missing
// between them) were never executed (test/gpu/CMakeLists.txt runs kernel tests with a cap of 3).
inline unsigned cuda_grid_1d(size_t count, int block, size_t cap = (size_t)1 << 20) {
    size_t g = (count + (size_t)block - 1) / (size_t)block;
    if (g < 1) g = 1;
#if defined(PRAC_CUDA_EMU)
    static const size_t emu_cap = [] {
        const char* s = std::getenv("PRAC_EMU_GRID_CAP");
        return s && *s ? (size_t)std::strtoull(s, nullptr, 10) : (size_t)0;
    }();
    if (emu_cap > 0 && emu_cap < cap) cap = emu_cap;
#endif
    return (unsigned)(g < cap ? g : cap);
}
