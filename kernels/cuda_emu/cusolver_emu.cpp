// CPU stand-in for cuSOLVER (dense) in the emulated CUDA build: the routines the project calls, computed by
// LAPACK (LAPACKE) on the caller's memory, which is host memory here ("device" pointers included). A call checks its
// arguments at once (its status, and info for a bad parameter) and computes in stream order (stream_order.h):
// queued in the handle's stream, writing info when it runs. The functions are the ones cusolverDn.h declares, with
// its signatures (C linkage from the header's extern "C" block).
//
// Documented behaviour kept:
//   - info (an int in "device" memory, host memory here) is written: 0 on success, -i when the i-th parameter
//     (not counting the handle) is wrong, LAPACK's positive value when syevd does not converge.
//   - invalid parameters return CUSOLVER_STATUS_INVALID_VALUE (the conditions listed per routine below); a NULL
//     handle returns CUSOLVER_STATUS_NOT_INITIALIZED.
//   - workspaces: *_bufferSize reports the bytes (elements for the legacy Sorgqr) the computation needs; a call
//     with a NULL buffer where that size is > 0, or a smaller buffer, returns CUSOLVER_STATUS_INVALID_VALUE. The
//     Xsyevd / Xgeqrf device workspace is overwritten (the library's scratch: its contents afterwards are
//     unspecified), so a caller that keeps live data there finds out; the host workspace they ask for is 0 bytes
//     (PRAC_EMU_CUSOLVER_HOST_BYTES=N: N bytes, required and written, below).
//   - eigenvalues ascending, eigenvectors orthonormal in A's columns (LAPACK ?syevd, divide and conquer); only
//     the `uplo` triangle of A is read. Ssyevj (Jacobi: tools/bench_gpu_refresh times it) gives the same here.
// Data types: CUDA_R_32F (and CUDA_R_64F) for every type argument of one call; other combinations return
// CUSOLVER_STATUS_INVALID_VALUE.
#include <cusolverDn.h>
#include <lapacke.h>

#include "kernels/cuda_emu/stream_order.h"

#include <climits>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

// The opaque structs behind cusolverDnHandle_t and cusolverDnParams_t (declared in cusolverDn.h).
struct cusolverDnContext {
    cudaStream_t stream = nullptr;
};
struct cusolverDnParams {
    int unused = 0;
};

namespace {
// A new opaque object (handle, params, syevj info) into *out: INVALID_VALUE for a NULL out, ALLOC_FAILED without memory
template <typename T>
cusolverStatus_t create(T** out) {
    if (!out) return CUSOLVER_STATUS_INVALID_VALUE;
    *out = new (std::nothrow) T();
    return *out ? CUSOLVER_STATUS_SUCCESS : CUSOLVER_STATUS_ALLOC_FAILED;
}
}  // namespace

cusolverStatus_t cusolverDnCreate(cusolverDnHandle_t* handle) { return create(handle); }

cusolverStatus_t cusolverDnDestroy(cusolverDnHandle_t handle) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    delete handle;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSetStream(cusolverDnHandle_t handle, cudaStream_t streamId) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnGetStream(cusolverDnHandle_t handle, cudaStream_t* streamId) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!streamId) return CUSOLVER_STATUS_INVALID_VALUE;
    *streamId = handle->stream;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnCreateParams(cusolverDnParams_t* params) { return create(params); }

cusolverStatus_t cusolverDnDestroyParams(cusolverDnParams_t params) {
    delete params;
    return CUSOLVER_STATUS_SUCCESS;
}

namespace {

// Precision of a call whose type arguments must all be CUDA_R_32F or all CUDA_R_64F.
enum class Prec { F32, F64, Unsupported };
Prec precision(cudaDataType a, cudaDataType b, cudaDataType c) {
    if (a == CUDA_R_32F && b == CUDA_R_32F && c == CUDA_R_32F) return Prec::F32;
    if (a == CUDA_R_64F && b == CUDA_R_64F && c == CUDA_R_64F) return Prec::F64;
    return Prec::Unsupported;
}
size_t elem_size(Prec p) { return p == Prec::F64 ? 8 : 4; }

bool fits_int(int64_t x) { return x >= 0 && x <= INT_MAX; }

// A workspace size LAPACK returned in WORK(1) (a floating-point value): rounded up, with a margin for a float that
// was rounded down when LAPACK stored it (sizes above 2^24 are not all representable in fp32).
lapack_int lwork_from(double w) { return (lapack_int)std::ceil(w * (1.0 + 1e-6)); }

// Reports the i-th parameter as wrong: info = -i (when there is an info to write) and INVALID_VALUE.
cusolverStatus_t bad_param(int* info, int i) {
    if (info) *info = -i;
    return CUSOLVER_STATUS_INVALID_VALUE;
}

// The documented workspace rule of a compute call: a buffer of at least `need` bytes, non-NULL when need > 0.
// ptr_index / size_index: their parameter positions (for info).
cusolverStatus_t check_workspace(const void* buf, size_t have, size_t need, int* info, int ptr_index,
                                 int size_index) {
    if (need > 0 && !buf) return bad_param(info, ptr_index);
    if (have < need) return bad_param(info, size_index);
    return CUSOLVER_STATUS_SUCCESS;
}

// PRAC_EMU_CUSOLVER_HOST_BYTES=N: Xsyevd and Xgeqrf ask for N bytes of host workspace (the real library may; here
// they need none), require it at the call, and write it when they run (in stream order): a caller that passes none,
// too little, or frees it before the work is done (AddressSanitizer) is seen.
size_t host_workspace_bytes() {
    static const char* const env = std::getenv("PRAC_EMU_CUSOLVER_HOST_BYTES");
    static const size_t bytes = env ? (size_t)std::strtoull(env, nullptr, 10) : 0;
    return bytes;
}

// ---- syevd ----

char jobz_char(cusolverEigMode_t jobz) { return jobz == CUSOLVER_EIG_MODE_VECTOR ? 'V' : 'N'; }
char uplo_char(cublasFillMode_t uplo) { return uplo == CUBLAS_FILL_MODE_UPPER ? 'U' : 'L'; }

// Xsyevd: "CUSOLVER_STATUS_INVALID_VALUE: invalid parameters were passed (n<0, or lda<max(1,n), or jobz is not
// CUSOLVER_EIG_MODE_NOVECTOR or CUSOLVER_EIG_MODE_VECTOR, or uplo is not CUBLAS_FILL_MODE_LOWER or
// CUBLAS_FILL_MODE_UPPER)". Returns the position of the first wrong one (jobz 2, uplo 3, n 4, lda 7), or 0.
int syevd_bad_param(cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n, int64_t lda) {
    if (jobz != CUSOLVER_EIG_MODE_NOVECTOR && jobz != CUSOLVER_EIG_MODE_VECTOR) return 2;
    if (uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER) return 3;
    if (n < 0 || !fits_int(n)) return 4;
    if (lda < (n > 1 ? n : 1) || !fits_int(lda)) return 7;
    return 0;
}

// LAPACK's workspace for ?syevd (a query: lwork = liwork = -1).
struct SyevdWork {
    lapack_int lwork, liwork;
};
SyevdWork syevd_query(Prec p, char jobz, char uplo, lapack_int n) {
    lapack_int iw = 0;
    const lapack_int ld = n > 1 ? n : 1;
    if (p == Prec::F32) {
        float w = 0;
        LAPACKE_ssyevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, nullptr, ld, nullptr, &w, -1, &iw, -1);
        return {lwork_from(w), iw};
    }
    double w = 0;
    LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, nullptr, ld, nullptr, &w, -1, &iw, -1);
    return {lwork_from(w), iw};
}
size_t syevd_device_bytes(Prec p, const SyevdWork& w) {
    return (size_t)w.lwork * elem_size(p) + (size_t)w.liwork * sizeof(lapack_int);
}

// ---- geqrf ----

// Xgeqrf: "CUSOLVER_STATUS_INVALID_VALUE: invalid parameters were passed (m,n<0 or lda<max(1,m))".
// Positions: m 2, n 3, lda 6.
int geqrf_bad_param(int64_t m, int64_t n, int64_t lda) {
    if (m < 0 || !fits_int(m)) return 2;
    if (n < 0 || !fits_int(n)) return 3;
    if (lda < (m > 1 ? m : 1) || !fits_int(lda)) return 6;
    return 0;
}

lapack_int geqrf_query(Prec p, lapack_int m, lapack_int n) {
    const lapack_int ld = m > 1 ? m : 1;
    if (p == Prec::F32) {
        float w = 0;
        LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, m, n, nullptr, ld, nullptr, &w, -1);
        return lwork_from(w);
    }
    double w = 0;
    LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, nullptr, ld, nullptr, &w, -1);
    return lwork_from(w);
}

// ---- orgqr ----

// <t>orgqr: "CUSOLVER_STATUS_INVALID_VALUE: invalid parameters were passed (m,n,k<0, n>m, k>n or lda<m)" (lda must
// also be >= 1, as LAPACK's). Positions: m 1, n 2, k 3, lda 5.
int orgqr_bad_param(int m, int n, int k, int lda) {
    if (m < 0) return 1;
    if (n < 0 || n > m) return 2;
    if (k < 0 || k > n) return 3;
    if (lda < (m > 1 ? m : 1)) return 5;
    return 0;
}

lapack_int sorgqr_query(int m, int n, int k) {
    float w = 0;
    LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, m, n, k, nullptr, m > 1 ? m : 1, nullptr, &w, -1);
    return lwork_from(w);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Xsyevd: eigenvalues (ascending, into W) and optionally eigenvectors (into A's columns) of the symmetric n x n A
// ---------------------------------------------------------------------------------------------------------------

cusolverStatus_t cusolverDnXsyevd_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params,
                                             cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n,
                                             cudaDataType dataTypeA, const void* A, int64_t lda,
                                             cudaDataType dataTypeW, const void* W, cudaDataType computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost) {
    (void)A;
    (void)W;  // not read by a size query
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!params || !workspaceInBytesOnDevice || !workspaceInBytesOnHost) return CUSOLVER_STATUS_INVALID_VALUE;
    if (syevd_bad_param(jobz, uplo, n, lda)) return CUSOLVER_STATUS_INVALID_VALUE;
    const Prec p = precision(dataTypeA, dataTypeW, computeType);
    if (p == Prec::Unsupported) return CUSOLVER_STATUS_INVALID_VALUE;
    *workspaceInBytesOnDevice = syevd_device_bytes(p, syevd_query(p, jobz_char(jobz), uplo_char(uplo), (lapack_int)n));
    *workspaceInBytesOnHost = host_workspace_bytes();
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXsyevd(cusolverDnHandle_t handle, cusolverDnParams_t params, cusolverEigMode_t jobz,
                                  cublasFillMode_t uplo, int64_t n, cudaDataType dataTypeA, void* A, int64_t lda,
                                  cudaDataType dataTypeW, void* W, cudaDataType computeType, void* bufferOnDevice,
                                  size_t workspaceInBytesOnDevice, void* bufferOnHost, size_t workspaceInBytesOnHost,
                                  int* info) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!info) return CUSOLVER_STATUS_INVALID_VALUE;
    if (!params) return bad_param(info, 1);
    if (int i = syevd_bad_param(jobz, uplo, n, lda)) return bad_param(info, i);
    const size_t host_bytes = host_workspace_bytes();
    if (cusolverStatus_t h = check_workspace(bufferOnHost, workspaceInBytesOnHost, host_bytes, info, 13, 14))
        return h;
    const Prec p = precision(dataTypeA, dataTypeW, computeType);
    if (p == Prec::Unsupported) return bad_param(info, dataTypeA != dataTypeW ? 8 : 10);
    const char jz = jobz_char(jobz), ul = uplo_char(uplo);
    const SyevdWork need = syevd_query(p, jz, ul, (lapack_int)n);
    const size_t need_bytes = syevd_device_bytes(p, need);
    cusolverStatus_t s = check_workspace(bufferOnDevice, workspaceInBytesOnDevice, need_bytes, info, 11, 12);
    if (s != CUSOLVER_STATUS_SUCCESS) return s;
    if (n > 0 && !A) return bad_param(info, 6);
    if (n > 0 && !W) return bad_param(info, 9);

    cuda_emu::stream_op(handle->stream, [=] {
        const size_t es = elem_size(p);
        cuda_emu::op_access_matrix(A, n, n, lda, es, false, "cusolverDnXsyevd");
        cuda_emu::op_access_matrix(A, n, n, lda, es, true, "cusolverDnXsyevd");
        cuda_emu::op_access(W, (size_t)n * es, true, "cusolverDnXsyevd");
        cuda_emu::op_access(bufferOnDevice, need_bytes, true, "cusolverDnXsyevd");
        cuda_emu::op_access(info, sizeof(int), true, "cusolverDnXsyevd");
        lapack_int r = 0;
        std::vector<lapack_int> iwork((size_t)need.liwork);
        if (n > 0) {
            if (p == Prec::F32) {
                std::vector<float> work((size_t)need.lwork);
                r = LAPACKE_ssyevd_work(LAPACK_COL_MAJOR, jz, ul, (lapack_int)n, static_cast<float*>(A),
                                        (lapack_int)lda, static_cast<float*>(W), work.data(), need.lwork,
                                        iwork.data(), need.liwork);
            } else {
                std::vector<double> work((size_t)need.lwork);
                r = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, jz, ul, (lapack_int)n, static_cast<double*>(A),
                                        (lapack_int)lda, static_cast<double*>(W), work.data(), need.lwork,
                                        iwork.data(), need.liwork);
            }
        }
        if (need_bytes > 0) std::memset(bufferOnDevice, 0xff, need_bytes);  // scratch contents are unspecified
        if (host_bytes > 0) std::memset(bufferOnHost, 0xff, host_bytes);
        *info = (int)r;  // 0, or > 0: the algorithm failed to converge
    });
    return CUSOLVER_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------------------------
// Ssyevj (Jacobi): the same outcome as syevd, which computes it here: "W: eigenvalues in ascending order" (sorted is
// the default, sort_eig = 1; unsorted order is unspecified, so sorted is one), eigenvectors in A's columns;
// info = n + 1 when it does not converge (LAPACK's failure maps to it). The tolerance and sweep limit are kept
// and have no effect: the decomposition is exact to LAPACK's accuracy. lwork counts floats.
// ---------------------------------------------------------------------------------------------------------------
struct syevjInfo {
    double tolerance = 0;  // 0: machine accuracy (the default)
    int max_sweeps = 100;
    int sort_eig = 1;
};

cusolverStatus_t cusolverDnCreateSyevjInfo(syevjInfo_t* info) { return create(info); }
cusolverStatus_t cusolverDnDestroySyevjInfo(syevjInfo_t info) {
    delete info;
    return CUSOLVER_STATUS_SUCCESS;
}

namespace {
// Ssyevj's INVALID_VALUE conditions, as Xsyevd's; returns the position (jobz 1, uplo 2, n 3, lda 5), or 0
int syevj_bad_param(cusolverEigMode_t jobz, cublasFillMode_t uplo, int n, int lda) {
    switch (syevd_bad_param(jobz, uplo, n, lda)) {
        case 2: return 1;
        case 3: return 2;
        case 4: return 3;
        case 7: return 5;
        default: return 0;
    }
}
lapack_int syevj_lwork(cusolverEigMode_t jobz, cublasFillMode_t uplo, int n) {  // floats: LAPACK's work + iwork
    const SyevdWork w = syevd_query(Prec::F32, jobz_char(jobz), uplo_char(uplo), (lapack_int)n);
    return w.lwork + w.liwork;
}
}  // namespace

cusolverStatus_t cusolverDnSsyevj_bufferSize(cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo,
                                             int n, const float* A, int lda, const float* W, int* lwork,
                                             syevjInfo_t params) {
    (void)A;
    (void)W;  // not read by a size query
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!lwork || !params || syevj_bad_param(jobz, uplo, n, lda)) return CUSOLVER_STATUS_INVALID_VALUE;
    *lwork = (int)syevj_lwork(jobz, uplo, n);
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSsyevj(cusolverDnHandle_t handle, cusolverEigMode_t jobz, cublasFillMode_t uplo, int n,
                                  float* A, int lda, float* W, float* work, int lwork, int* info, syevjInfo_t params) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!info) return CUSOLVER_STATUS_INVALID_VALUE;
    if (!params) return bad_param(info, 10);
    if (int i = syevj_bad_param(jobz, uplo, n, lda)) return bad_param(info, i);
    const lapack_int need = syevj_lwork(jobz, uplo, n);
    cusolverStatus_t st = check_workspace(work, lwork < 0 ? 0 : (size_t)lwork, (size_t)need, info, 7, 8);
    if (st != CUSOLVER_STATUS_SUCCESS) return st;
    if (n > 0 && !A) return bad_param(info, 4);
    if (n > 0 && !W) return bad_param(info, 6);
    cuda_emu::stream_op(handle->stream, [=] {
        cuda_emu::op_access_matrix(A, n, n, lda, 4, false, "cusolverDnSsyevj");
        cuda_emu::op_access_matrix(A, n, n, lda, 4, true, "cusolverDnSsyevj");
        cuda_emu::op_access(W, (size_t)n * 4, true, "cusolverDnSsyevj");
        cuda_emu::op_access(work, (size_t)need * 4, true, "cusolverDnSsyevj");
        cuda_emu::op_access(info, sizeof(int), true, "cusolverDnSsyevj");
        lapack_int r = 0;
        if (n > 0) {
            const SyevdWork w = syevd_query(Prec::F32, jobz_char(jobz), uplo_char(uplo), (lapack_int)n);
            std::vector<float> fwork((size_t)w.lwork);
            std::vector<lapack_int> iwork((size_t)w.liwork);
            r = LAPACKE_ssyevd_work(LAPACK_COL_MAJOR, jobz_char(jobz), uplo_char(uplo), (lapack_int)n, A,
                                    (lapack_int)lda, W, fwork.data(), w.lwork, iwork.data(), w.liwork);
        }
        if (need > 0) std::memset(work, 0xff, (size_t)need * sizeof(float));  // scratch contents are unspecified
        *info = r == 0 ? 0 : n + 1;
    });
    return CUSOLVER_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------------------------
// Xgeqrf: A (m x n) = Q R; R in and above A's diagonal, the Householder vectors below, their scalars in tau
// (min(m, n) values), as LAPACK ?geqrf
// ---------------------------------------------------------------------------------------------------------------

cusolverStatus_t cusolverDnXgeqrf_bufferSize(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m,
                                             int64_t n, cudaDataType dataTypeA, const void* A, int64_t lda,
                                             cudaDataType dataTypeTau, const void* tau, cudaDataType computeType,
                                             size_t* workspaceInBytesOnDevice, size_t* workspaceInBytesOnHost) {
    (void)A;
    (void)tau;  // not read by a size query
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!params || !workspaceInBytesOnDevice || !workspaceInBytesOnHost) return CUSOLVER_STATUS_INVALID_VALUE;
    if (geqrf_bad_param(m, n, lda)) return CUSOLVER_STATUS_INVALID_VALUE;
    const Prec p = precision(dataTypeA, dataTypeTau, computeType);
    if (p == Prec::Unsupported) return CUSOLVER_STATUS_INVALID_VALUE;
    *workspaceInBytesOnDevice = (size_t)geqrf_query(p, (lapack_int)m, (lapack_int)n) * elem_size(p);
    *workspaceInBytesOnHost = host_workspace_bytes();
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnXgeqrf(cusolverDnHandle_t handle, cusolverDnParams_t params, int64_t m, int64_t n,
                                  cudaDataType dataTypeA, void* A, int64_t lda, cudaDataType dataTypeTau, void* tau,
                                  cudaDataType computeType, void* bufferOnDevice, size_t workspaceInBytesOnDevice,
                                  void* bufferOnHost, size_t workspaceInBytesOnHost, int* info) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!info) return CUSOLVER_STATUS_INVALID_VALUE;
    if (!params) return bad_param(info, 1);
    if (int i = geqrf_bad_param(m, n, lda)) return bad_param(info, i);
    const size_t host_bytes = host_workspace_bytes();
    if (cusolverStatus_t h = check_workspace(bufferOnHost, workspaceInBytesOnHost, host_bytes, info, 12, 13))
        return h;
    const Prec p = precision(dataTypeA, dataTypeTau, computeType);
    if (p == Prec::Unsupported) return bad_param(info, dataTypeA != dataTypeTau ? 7 : 9);
    const lapack_int lwork = geqrf_query(p, (lapack_int)m, (lapack_int)n);
    const size_t need_bytes = (size_t)lwork * elem_size(p);
    cusolverStatus_t s = check_workspace(bufferOnDevice, workspaceInBytesOnDevice, need_bytes, info, 10, 11);
    if (s != CUSOLVER_STATUS_SUCCESS) return s;
    if (m > 0 && n > 0 && !A) return bad_param(info, 5);
    if (m > 0 && n > 0 && !tau) return bad_param(info, 8);

    cuda_emu::stream_op(handle->stream, [=] {
        const size_t es = elem_size(p);
        cuda_emu::op_access_matrix(A, m, n, lda, es, false, "cusolverDnXgeqrf");
        cuda_emu::op_access_matrix(A, m, n, lda, es, true, "cusolverDnXgeqrf");
        cuda_emu::op_access(tau, (size_t)std::min(m, n) * es, true, "cusolverDnXgeqrf");
        cuda_emu::op_access(bufferOnDevice, need_bytes, true, "cusolverDnXgeqrf");
        cuda_emu::op_access(info, sizeof(int), true, "cusolverDnXgeqrf");
        lapack_int r = 0;
        if (m > 0 && n > 0) {
            if (p == Prec::F32) {
                std::vector<float> work((size_t)lwork);
                r = LAPACKE_sgeqrf_work(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, static_cast<float*>(A),
                                        (lapack_int)lda, static_cast<float*>(tau), work.data(), lwork);
            } else {
                std::vector<double> work((size_t)lwork);
                r = LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, (lapack_int)m, (lapack_int)n, static_cast<double*>(A),
                                        (lapack_int)lda, static_cast<double*>(tau), work.data(), lwork);
            }
        }
        if (need_bytes > 0) std::memset(bufferOnDevice, 0xff, need_bytes);  // scratch contents are unspecified
        if (host_bytes > 0) std::memset(bufferOnHost, 0xff, host_bytes);
        *info = (int)r;  // always 0 after the checks above
    });
    return CUSOLVER_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------------------------
// Sorgqr: the m x n Q with orthonormal columns defined by k Householder reflectors (A's columns below the
// diagonal and tau, as left by geqrf), overwriting A; as LAPACK sorgqr. lwork counts floats.
// ---------------------------------------------------------------------------------------------------------------

cusolverStatus_t cusolverDnSorgqr_bufferSize(cusolverDnHandle_t handle, int m, int n, int k, const float* A, int lda,
                                             const float* tau, int* lwork) {
    (void)A;
    (void)tau;  // not read by a size query
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!lwork || orgqr_bad_param(m, n, k, lda)) return CUSOLVER_STATUS_INVALID_VALUE;
    *lwork = (int)sorgqr_query(m, n, k);
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSorgqr(cusolverDnHandle_t handle, int m, int n, int k, float* A, int lda, const float* tau,
                                  float* work, int lwork, int* info) {
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!info) return CUSOLVER_STATUS_INVALID_VALUE;
    if (int i = orgqr_bad_param(m, n, k, lda)) return bad_param(info, i);
    const lapack_int need = sorgqr_query(m, n, k);
    // work (position 7) non-NULL and lwork (position 8) at least what cusolverDnSorgqr_bufferSize reported
    if (need > 0 && !work) return bad_param(info, 7);
    if (lwork < need) return bad_param(info, 8);
    if (n > 0 && !A) return bad_param(info, 4);
    if (k > 0 && !tau) return bad_param(info, 6);
    cuda_emu::stream_op(handle->stream, [=] {
        cuda_emu::op_access_matrix(A, m, n, lda, 4, false, "cusolverDnSorgqr");
        cuda_emu::op_access(tau, (size_t)k * 4, false, "cusolverDnSorgqr");
        cuda_emu::op_access_matrix(A, m, n, lda, 4, true, "cusolverDnSorgqr");
        cuda_emu::op_access(work, (size_t)lwork * 4, true, "cusolverDnSorgqr");
        cuda_emu::op_access(info, sizeof(int), true, "cusolverDnSorgqr");
        lapack_int r = 0;
        // the caller's work array is LAPACK's work array
        if (n > 0) r = LAPACKE_sorgqr_work(LAPACK_COL_MAJOR, m, n, k, A, lda, tau, work, (lapack_int)lwork);
        *info = (int)r;  // 0 after the checks above
    });
    return CUSOLVER_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------------------------
// Spotrf: Cholesky factorization of the symmetric positive definite n x n A (its `uplo` triangle), in place:
// A = L L^T (LOWER) or U^T U (UPPER); the other triangle is not referenced (LAPACK spotrf). devInfo: 0, -i for a
// wrong i-th parameter, or i > 0 when the leading minor of order i is not positive definite (the factorization
// stopped there). "CUSOLVER_STATUS_INVALID_VALUE: invalid parameters were passed (n<0 or lda<max(1,n))"; positions
// uplo 1, n 2, lda 4. LAPACK's spotrf needs no workspace: the size query reports 0 elements.
// ---------------------------------------------------------------------------------------------------------------

namespace {
int potrf_bad_param(cublasFillMode_t uplo, int n, int lda) {
    if (uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER) return 1;
    if (n < 0) return 2;
    if (lda < (n > 1 ? n : 1)) return 4;
    return 0;
}
}  // namespace

cusolverStatus_t cusolverDnSpotrf_bufferSize(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, float* A,
                                             int lda, int* Lwork) {
    (void)A;  // not read by a size query
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (!Lwork || potrf_bad_param(uplo, n, lda)) return CUSOLVER_STATUS_INVALID_VALUE;
    *Lwork = 0;
    return CUSOLVER_STATUS_SUCCESS;
}

cusolverStatus_t cusolverDnSpotrf(cusolverDnHandle_t handle, cublasFillMode_t uplo, int n, float* A, int lda,
                                  float* Workspace, int Lwork, int* devInfo) {
    (void)Workspace;
    if (!handle) return CUSOLVER_STATUS_NOT_INITIALIZED;
    if (int bad = potrf_bad_param(uplo, n, lda)) return bad_param(devInfo, bad);
    if (Lwork < 0) return bad_param(devInfo, 6);
    if (!devInfo) return CUSOLVER_STATUS_INVALID_VALUE;
    cuda_emu::stream_op(handle->stream, [=] {
        cuda_emu::op_access_triangle(A, n, lda, 4, uplo == CUBLAS_FILL_MODE_UPPER, false, "cusolverDnSpotrf");
        cuda_emu::op_access_triangle(A, n, lda, 4, uplo == CUBLAS_FILL_MODE_UPPER, true, "cusolverDnSpotrf");
        cuda_emu::op_access(devInfo, sizeof(int), true, "cusolverDnSpotrf");
        // (PRAC_EMU_OTHER_ROUNDING: LAPACK's recursive spotrf2, another order of the same factorization)
        static const char* const env = std::getenv("PRAC_EMU_OTHER_ROUNDING");
        static const bool other = env && std::atoi(env) >= 1;
        const char ul = uplo_char(uplo);
        *devInfo = n == 0  ? 0
                   : other ? (int)LAPACKE_spotrf2_work(LAPACK_COL_MAJOR, ul, n, A, lda)
                           : (int)LAPACKE_spotrf_work(LAPACK_COL_MAJOR, ul, n, A, lda);
    });
    return CUSOLVER_STATUS_SUCCESS;
}
