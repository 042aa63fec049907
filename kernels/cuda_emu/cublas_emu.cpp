// CPU stand-ins for cuBLAS and cuBLASLt in the emulated CUDA build.
//
// "Device memory" is host memory here (cudaMalloc returns a host pointer). Each routine checks its arguments when
// called (the status it returns) and computes in stream order (stream_order.h): queued in the handle's stream
// (cuBLASLt: the call's), with the host scalars alpha and beta read at the call. The functions are
// the ones the real headers declare (cublas_v2.h maps cublasSgemm to cublasSgemm_v2 etc.), with their exact
// signatures; the headers' extern "C" blocks give them C linkage. Behaviour follows NVIDIA's cuBLAS
// documentation (API reference and the comments in cublasLt.h); each check below names the rule it implements.
//
// Arithmetic: storage types CUDA_R_32F and CUDA_R_16BF, compute type CUBLAS_COMPUTE_32F (the _PEDANTIC and
// _FAST_* variants are accepted and computed in IEEE fp32, which they permit). bf16 operands are widened exactly
// to fp32, the product is one OpenBLAS cblas_sgemm (fp32 accumulation), and the result is rounded to the output
// type (bf16: round to nearest even) once, after alpha/beta and the bias epilogue; except where the cuBLASLt
// heuristic picked a split-K reduction in D's type for a bf16 D (choose_algo, when the preference allows one), whose
// partial sums over K slices are rounded to bf16 as a GPU's would be. SYRK comes in fp32 and fp64
// (cublasSsyrk, cublasDsyrk: OpenBLAS cblas_ssyrk, cblas_dsyrk).
//
// Emulation-only hooks (kernels/cuda_emu/libs_emu.h): forcing the cuBLASLt heuristic to fail, and call counters.
// Diagnostics: with CUBLASLT_LOG_LEVEL >= 1 (cuBLASLt) or CUBLAS_LOGINFO_DBG=1 (cuBLAS) in the environment, the
// reason for every non-success status is printed to stderr, as the real libraries' error logging would.
#include <cblas.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <new>
#include <vector>

#include "kernels/cuda_emu/libs_emu.h"
#include "kernels/cuda_emu/stream_order.h"

// ---------------------------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------------------------

namespace {

bool env_on(const char* name, int min_level) {
    const char* v = std::getenv(name);
    return v && *v && std::atoi(v) >= min_level;
}

// PRAC_EMU_OTHER_ROUNDING=1: the fp32 GEMMs and SYRKs sum K in two halves (another order than the CPU twins' one
// OpenBLAS call, as a GPU's library rounds otherwise), so that a test comparing a decision of the CUDA code with its
// twin's (which fallback took over) sees whether rounding alone can change it.
bool other_rounding() {
    static const bool on = env_on("PRAC_EMU_OTHER_ROUNDING", 1);
    return on;
}

// The status, after printing why when the library's error logging is on.
cublasStatus_t fail(bool lt, cublasStatus_t s, const char* fmt, ...) {
    if (lt ? env_on("CUBLASLT_LOG_LEVEL", 1) : env_on("CUBLAS_LOGINFO_DBG", 1)) {
        std::fprintf(stderr, "[cuda_emu %s] %s: ", lt ? "cublasLt" : "cublas", cublasGetStatusName(s));
        va_list ap;
        va_start(ap, fmt);
        std::vfprintf(stderr, fmt, ap);
        va_end(ap);
        std::fputc('\n', stderr);
    }
    return s;
}

bool is_storage_type(cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16BF; }
size_t type_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// The fp32 compute types: IEEE fp32 satisfies each of them (the _FAST_ ones allow, not require, lower precision).
bool is_compute_32f(cublasComputeType_t c) {
    return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_PEDANTIC || c == CUBLAS_COMPUTE_32F_FAST_16F ||
           c == CUBLAS_COMPUTE_32F_FAST_16BF || c == CUBLAS_COMPUTE_32F_FAST_TF32 ||
           c == CUBLAS_COMPUTE_32F_EMULATED_16BFX9;
}

// For real data CUBLAS_OP_C is CUBLAS_OP_T; CUBLAS_OP_CONJG is "not supported in the current release" (header).
bool is_op(int op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

float load(const void* p, cudaDataType_t t, size_t i) {
    if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);  // exact
}

void store(void* p, cudaDataType_t t, size_t i, float v) {
    if (t == CUDA_R_32F) static_cast<float*>(p)[i] = v;
    else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);  // round to nearest even
}

// One stored matrix operand: column-major, element (i, j) at p + (i + j * ld) elements.
struct Operand {
    const void* p;
    cudaDataType_t type;
    int64_t ld;
};

// The stored matrix (rows x cols) as fp32 for cblas: fp32 data in place, bf16 data widened (exactly) into `copy`
// packed with ld = max(1, rows).
const float* as_f32(const Operand& x, int64_t rows, int64_t cols, std::vector<float>& copy, int64_t* ld) {
    if (x.type == CUDA_R_32F) {
        *ld = x.ld;
        return static_cast<const float*>(x.p);
    }
    *ld = rows > 1 ? rows : 1;
    copy.resize((size_t)(rows * cols));
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++) copy[(size_t)(i + j * rows)] = load(x.p, x.type, (size_t)(i + j * x.ld));
    return copy.data();
}

// One GEMM after validation: D (m x n) = alpha op(A) op(B) + beta C [+ bias (m), one value per row of D].
// op(A) is m x k (stored k x m when ta), op(B) is k x n (stored n x k when tb). beta == 0: C is not read.
struct Gemm {
    bool ta, tb;
    int64_t m, n, k;
    float alpha, beta;
    Operand A, B, C, D;
    const void* bias;
    cudaDataType_t bias_type;
    // cuBLASLt's split-K with a reduction in D's type (INPLACE or OUTPUT_TYPE, choose_algo): K in k_slices slices,
    // each slice's partial sum rounded to D's type; 1: one fp32 sum over K
    int64_t k_slices = 1;
    bool inplace = false;  // INPLACE: summed into D slice after slice, each sum rounded; else (OUTPUT_TYPE) the rounded
                           // partials summed in fp32 by the separate step
};

float round_to(cudaDataType_t t, float v) {
    if (t == CUDA_R_32F) return v;
    return __bfloat162float(__float2bfloat16_rn(v));
}

void run_gemm(const Gemm& g) {
    if (g.m == 0 || g.n == 0) return;
    // the bytes it reads and writes, for the race check across streams (stream_order.h)
    const char* what = "a cuBLAS GEMM";
    if (g.alpha != 0.0f && g.k > 0) {
        cuda_emu::op_access_matrix(g.A.p, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.A.ld, type_size(g.A.type), false, what);
        cuda_emu::op_access_matrix(g.B.p, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.B.ld, type_size(g.B.type), false, what);
    }
    if (g.beta != 0.0f) cuda_emu::op_access_matrix(g.C.p, g.m, g.n, g.C.ld, type_size(g.C.type), false, what);
    if (g.bias) cuda_emu::op_access(g.bias, (size_t)g.m * type_size(g.bias_type), false, what);
    cuda_emu::op_access_matrix(g.D.p, g.m, g.n, g.D.ld, type_size(g.D.type), true, what);
    // T = alpha op(A) op(B) in fp32; A and B are not read when alpha == 0 or k == 0 (BLAS convention)
    std::vector<float> T((size_t)(g.m * g.n), 0.0f);
    if (g.alpha != 0.0f && g.k > 0) {
        std::vector<float> ca, cb;
        int64_t lda = 0, ldb = 0;
        const float* a = as_f32(g.A, g.ta ? g.k : g.m, g.ta ? g.m : g.k, ca, &lda);
        const float* b = as_f32(g.B, g.tb ? g.n : g.k, g.tb ? g.k : g.n, cb, &ldb);
        if (g.k_slices <= 1) {
            cblas_sgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans, (int)g.m,
                        (int)g.n, (int)g.k, g.alpha, a, (int)lda, b, (int)ldb, 0.0f, T.data(), (int)g.m);
        } else {
            // slice [k0, k1) of op(A)'s columns and op(B)'s rows; T = the slices' partials in D's type, summed
            std::vector<float> part((size_t)(g.m * g.n));
            for (int64_t s = 0; s < g.k_slices; s++) {
                const int64_t k0 = g.k * s / g.k_slices, k1 = g.k * (s + 1) / g.k_slices;
                const float* as = a + (g.ta ? k0 : k0 * lda);
                const float* bs = b + (g.tb ? k0 * ldb : k0);
                cblas_sgemm(CblasColMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
                            (int)g.m, (int)g.n, (int)(k1 - k0), g.alpha, as, (int)lda, bs, (int)ldb, 0.0f, part.data(),
                            (int)g.m);
                for (size_t i = 0; i < T.size(); i++)
                    T[i] = g.inplace ? round_to(g.D.type, T[i] + part[i]) : T[i] + round_to(g.D.type, part[i]);
            }
        }
    }
    // D = T + beta C + bias in fp32, then one rounding to D's type. C is read before D is written at the same
    // element, so C == D (in place) is fine.
    for (int64_t j = 0; j < g.n; j++) {
        for (int64_t i = 0; i < g.m; i++) {
            float v = T[(size_t)(i + j * g.m)];
            if (g.beta != 0.0f) v += g.beta * load(g.C.p, g.C.type, (size_t)(i + j * g.C.ld));
            if (g.bias) v += load(g.bias, g.bias_type, (size_t)i);
            store(const_cast<void*>(g.D.p), g.D.type, (size_t)(i + j * g.D.ld), v);
        }
    }
}

// The GEMMs of one call, in stream order (kernels/cuda_emu/stream_order.h): queued in s, or run now.
void queue_gemms(cudaStream_t s, std::vector<Gemm> gemms) {
    for (Gemm& g : gemms)  // PRAC_EMU_OTHER_ROUNDING: an fp32 D's K in two slices (their sum in fp32, no rounding more)
        if (other_rounding() && g.D.type == CUDA_R_32F && g.k >= 2 && g.k_slices == 1) g.k_slices = 2;
    cuda_emu::stream_op(s, [gemms = std::move(gemms)] {
        for (const Gemm& g : gemms) run_gemm(g);
    });
}

int64_t max1(int64_t x) { return x > 1 ? x : 1; }

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// cuBLAS: context and helpers
// ---------------------------------------------------------------------------------------------------------------

// The opaque context behind cublasHandle_t (cublas_api.h declares `struct cublasContext`).
struct cublasContext {
    cudaStream_t stream = nullptr;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;  // documented default
    cublasMath_t math_mode = CUBLAS_DEFAULT_MATH;                 // documented default
};

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
    if (!handle) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle == NULL");
    *handle = new (std::nothrow) cublasContext();
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: handle == NULL");
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: handle == NULL");
    handle->stream = streamId;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* streamId) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream: handle == NULL");
    if (!streamId) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: streamId == NULL");
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t* mode) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetPointerMode: handle == NULL");
    if (!mode) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasGetPointerMode: mode == NULL");
    *mode = handle->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetPointerMode: handle == NULL");
    if (mode != CUBLAS_POINTER_MODE_HOST && mode != CUBLAS_POINTER_MODE_DEVICE)
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode: mode %d is not HOST or DEVICE",
                    (int)mode);
    handle->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode: handle == NULL");
    if (!mode) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode: mode == NULL");
    *mode = handle->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode: handle == NULL");
    // a mode is one of the cublasMath_t values, optionally OR-ed with
    // CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION; every mode computes in IEEE fp32 here
    const int base = (int)mode & ~(int)CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base != CUBLAS_DEFAULT_MATH && base != CUBLAS_TENSOR_OP_MATH && base != CUBLAS_PEDANTIC_MATH &&
        base != CUBLAS_TF32_TENSOR_OP_MATH && base != CUBLAS_FP32_EMULATED_BF16X9_MATH &&
        base != CUBLAS_FP64_EMULATED_FIXEDPOINT_MATH)
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode: unknown mode %d", (int)mode);
    handle->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
        case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
        case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
    }
    return "unknown error";
}

// ---------------------------------------------------------------------------------------------------------------
// cuBLAS: GEMM, SYRK, TRSM and TRMM
// ---------------------------------------------------------------------------------------------------------------

namespace {

// The CUBLAS_STATUS_INVALID_VALUE conditions that cublas<t>gemm and cublasGemmEx document: m, n or k < 0;
// transa/transb not N, T or C; lda < max(1, m) when transa == N, else lda < max(1, k); ldb < max(1, k) when
// transb == N, else ldb < max(1, n); ldc < max(1, m); alpha or beta NULL.
cublasStatus_t check_gemm_args(const char* fn, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                               int k, const void* alpha, int lda, int ldb, const void* beta, int ldc) {
    if (m < 0 || n < 0 || k < 0)
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: m=%d n=%d k=%d (negative)", fn, m, n, k);
    if (!is_op(transa) || !is_op(transb))
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: transa=%d transb=%d", fn, (int)transa, (int)transb);
    if (lda < max1(transa == CUBLAS_OP_N ? m : k))
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: lda=%d < max(1, rows of A = %d)", fn, lda,
                    transa == CUBLAS_OP_N ? m : k);
    if (ldb < max1(transb == CUBLAS_OP_N ? k : n))
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: ldb=%d < max(1, rows of B = %d)", fn, ldb,
                    transb == CUBLAS_OP_N ? k : n);
    if (ldc < max1(m)) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: ldc=%d < max(1, m=%d)", fn, ldc, m);
    if (!alpha || !beta) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: alpha or beta is NULL", fn);
    return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS GEMM calls that computed something, by operand type (libs_emu.h): fp32 = cublasSgemm and cublasGemmEx with
// CUDA_R_32F A/B, bf16 = cublasGemmEx with CUDA_R_16BF A/B
std::atomic<long> g_gemm_calls_fp32{0}, g_gemm_calls_bf16{0};
}  // namespace

long cuda_emu_cublas_gemm_calls(bool bf16_operands) {
    return bf16_operands ? g_gemm_calls_bf16.load() : g_gemm_calls_fp32.load();
}

// C = alpha op(A) op(B) + beta C, all fp32. alpha/beta: host or (pointer mode DEVICE) device pointers, which are
// both host memory here, so both are read directly.
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasSgemm: handle == NULL");
    cublasStatus_t s = check_gemm_args("cublasSgemm", transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    queue_gemms(handle->stream, {Gemm{transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, *beta,
                                      Operand{A, CUDA_R_32F, lda}, Operand{B, CUDA_R_32F, ldb},
                                      Operand{C, CUDA_R_32F, ldc}, Operand{C, CUDA_R_32F, ldc}, nullptr, CUDA_R_32F}});
    g_gemm_calls_fp32++;
    return CUBLAS_STATUS_SUCCESS;
}

// cublasGemmEx with an fp32 compute type (alpha/beta are then floats). Supported type combinations (the subset of
// the documented table that the project uses): A = B = CUDA_R_32F with C = CUDA_R_32F, and A = B = CUDA_R_16BF with
// C = CUDA_R_16BF or CUDA_R_32F. Others: CUBLAS_STATUS_NOT_SUPPORTED ("the combination of the parameters Atype,
// Btype and Ctype or the algorithm, algo is not supported").
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasGemmEx: handle == NULL");
    cublasStatus_t s = check_gemm_args("cublasGemmEx", transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    const bool algo_ok = algo == CUBLAS_GEMM_DEFAULT || algo == CUBLAS_GEMM_DEFAULT_TENSOR_OP ||
                         algo == CUBLAS_GEMM_AUTOTUNE || (algo >= CUBLAS_GEMM_ALGO0 && algo <= CUBLAS_GEMM_ALGO23) ||
                         (algo >= CUBLAS_GEMM_ALGO0_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
    if (!algo_ok) return fail(false, CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: algo %d", (int)algo);
    if (!is_compute_32f(computeType))
        return fail(false, CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: computeType %d is not an fp32 compute type",
                    (int)computeType);
    const bool types_ok = Atype == Btype && ((Atype == CUDA_R_32F && Ctype == CUDA_R_32F) ||
                                             (Atype == CUDA_R_16BF && (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F)));
    if (!types_ok)
        return fail(false, CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: Atype=%d Btype=%d Ctype=%d", (int)Atype,
                    (int)Btype, (int)Ctype);
    queue_gemms(handle->stream, {Gemm{transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k,
                                      *static_cast<const float*>(alpha), *static_cast<const float*>(beta),
                                      Operand{A, Atype, lda}, Operand{B, Btype, ldb}, Operand{C, Ctype, ldc},
                                      Operand{C, Ctype, ldc}, nullptr, CUDA_R_32F}});
    (Atype == CUDA_R_16BF ? g_gemm_calls_bf16 : g_gemm_calls_fp32)++;
    return CUBLAS_STATUS_SUCCESS;
}

// The strided-batched forms: batchCount independent GEMMs, matrix i of A, B and C at element offsets i * strideA,
// i * strideB, i * strideC (the documented layout); batchCount < 0 is CUBLAS_STATUS_INVALID_VALUE. Each call
// counts once in cuda_emu_cublas_gemm_calls, whatever its batch.
static size_t elem_bytes(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }
static const void* at(const void* p, cudaDataType t, long long off) {
    return static_cast<const char*>(p) + (size_t)off * elem_bytes(t);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* A, int lda,
                                         long long int strideA, const float* B, int ldb, long long int strideB,
                                         const float* beta, float* C, int ldc, long long int strideC,
                                         int batchCount) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasSgemmStridedBatched: handle == NULL");
    cublasStatus_t s = check_gemm_args("cublasSgemmStridedBatched", transa, transb, m, n, k, alpha, lda, ldb, beta,
                                       ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (batchCount < 0)
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasSgemmStridedBatched: batchCount=%d", batchCount);
    std::vector<Gemm> gemms;
    for (int i = 0; i < batchCount; i++)
        gemms.push_back(Gemm{transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *alpha, *beta,
                      Operand{A + (size_t)i * strideA, CUDA_R_32F, lda}, Operand{B + (size_t)i * strideB, CUDA_R_32F, ldb},
                      Operand{C + (size_t)i * strideC, CUDA_R_32F, ldc}, Operand{C + (size_t)i * strideC, CUDA_R_32F, ldc},
                      nullptr, CUDA_R_32F});
    queue_gemms(handle->stream, std::move(gemms));
    g_gemm_calls_fp32++;
    return CUBLAS_STATUS_SUCCESS;
}
// cublasGemmEx's type combinations and compute types (see there), batched
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                          int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long int strideA, const void* B, cudaDataType Btype, int ldb,
                                          long long int strideB, const void* beta, void* C, cudaDataType Ctype,
                                          int ldc, long long int strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
    const char* fn = "cublasGemmStridedBatchedEx";
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle == NULL", fn);
    cublasStatus_t s = check_gemm_args(fn, transa, transb, m, n, k, alpha, lda, ldb, beta, ldc);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (batchCount < 0) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: batchCount=%d", fn, batchCount);
    const bool algo_ok = algo == CUBLAS_GEMM_DEFAULT || algo == CUBLAS_GEMM_DEFAULT_TENSOR_OP ||
                         algo == CUBLAS_GEMM_AUTOTUNE || (algo >= CUBLAS_GEMM_ALGO0 && algo <= CUBLAS_GEMM_ALGO23) ||
                         (algo >= CUBLAS_GEMM_ALGO0_TENSOR_OP && algo <= CUBLAS_GEMM_ALGO15_TENSOR_OP);
    if (!algo_ok) return fail(false, CUBLAS_STATUS_NOT_SUPPORTED, "%s: algo %d", fn, (int)algo);
    if (!is_compute_32f(computeType))
        return fail(false, CUBLAS_STATUS_NOT_SUPPORTED, "%s: computeType %d is not an fp32 compute type", fn,
                    (int)computeType);
    const bool types_ok = Atype == Btype && ((Atype == CUDA_R_32F && Ctype == CUDA_R_32F) ||
                                             (Atype == CUDA_R_16BF && (Ctype == CUDA_R_16BF || Ctype == CUDA_R_32F)));
    if (!types_ok)
        return fail(false, CUBLAS_STATUS_NOT_SUPPORTED, "%s: Atype=%d Btype=%d Ctype=%d", fn, (int)Atype, (int)Btype,
                    (int)Ctype);
    std::vector<Gemm> gemms;
    for (int i = 0; i < batchCount; i++) {
        const void* Ci = at(C, Ctype, (long long)i * strideC);
        gemms.push_back(Gemm{transa != CUBLAS_OP_N, transb != CUBLAS_OP_N, m, n, k, *static_cast<const float*>(alpha),
                      *static_cast<const float*>(beta), Operand{at(A, Atype, (long long)i * strideA), Atype, lda},
                      Operand{at(B, Btype, (long long)i * strideB), Btype, ldb}, Operand{Ci, Ctype, ldc},
                      Operand{Ci, Ctype, ldc}, nullptr, CUDA_R_32F});
    }
    queue_gemms(handle->stream, std::move(gemms));
    (Atype == CUDA_R_16BF ? g_gemm_calls_bf16 : g_gemm_calls_fp32)++;
    return CUBLAS_STATUS_SUCCESS;
}

namespace {
// C = alpha op(A) op(A)^T + beta C, C symmetric n x n of which only the `uplo` triangle is read and written;
// op(A) is n x k: A stored n x k (trans == N) or k x n (trans == T or C). Documented CUBLAS_STATUS_INVALID_VALUE:
// n < 0 or k < 0; trans not N, T, C; uplo not LOWER or UPPER; lda < max(1, n) when trans == N, else
// lda < max(1, k); ldc < max(1, n); alpha or beta NULL. T = float (cublasSsyrk) or double (cublasDsyrk).
template <typename T>
cublasStatus_t syrk(const char* fn, cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans, int n,
                    int k, const T* alpha, const T* A, int lda, const T* beta, T* C, int ldc) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle == NULL", fn);
    if (n < 0 || k < 0) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: n=%d k=%d", fn, n, k);
    if (!is_op(trans)) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: trans=%d", fn, (int)trans);
    if (uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER)
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: uplo=%d is not LOWER or UPPER", fn, (int)uplo);
    if (lda < max1(trans == CUBLAS_OP_N ? n : k))
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: lda=%d < max(1, %d)", fn, lda,
                    trans == CUBLAS_OP_N ? n : k);
    if (ldc < max1(n)) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: ldc=%d < max(1, n=%d)", fn, ldc, n);
    if (!alpha || !beta) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: alpha or beta is NULL", fn);
    if (n == 0) return CUBLAS_STATUS_SUCCESS;
    const bool upper = uplo == CUBLAS_FILL_MODE_UPPER;
    cuda_emu::stream_op(handle->stream, [=, alpha = *alpha, beta = *beta] {
        if (k > 0 && alpha != 0)
            cuda_emu::op_access_matrix(A, trans == CUBLAS_OP_N ? n : k, trans == CUBLAS_OP_N ? k : n, lda, sizeof(T),
                                       false, fn);
        cuda_emu::op_access_triangle(C, n, ldc, sizeof(T), upper, false, fn);
        cuda_emu::op_access_triangle(C, n, ldc, sizeof(T), upper, true, fn);
        // beta == 0: C need not hold valid values on input (BLAS); clear the triangle so no NaN can survive
        if (beta == 0)
            for (int j = 0; j < n; j++)
                for (int i = upper ? 0 : j; i <= (upper ? j : n - 1); i++) C[i + (size_t)j * ldc] = 0;
        if (k == 0 || alpha == 0) {  // A is not read: C = beta C on the triangle
            if (beta != 0 && beta != 1)
                for (int j = 0; j < n; j++)
                    for (int i = upper ? 0 : j; i <= (upper ? j : n - 1); i++) C[i + (size_t)j * ldc] *= beta;
            return;
        }
        const CBLAS_UPLO ul = upper ? CblasUpper : CblasLower;
        const CBLAS_TRANSPOSE tr = trans == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
        // (PRAC_EMU_OTHER_ROUNDING: K in two halves, the second added to the first's C)
        const int k1 = other_rounding() && k >= 2 ? k / 2 : k;
        const T* A2 = A + (trans == CUBLAS_OP_N ? (size_t)k1 * lda : (size_t)k1);
        if constexpr (std::is_same_v<T, float>) {
            cblas_ssyrk(CblasColMajor, ul, tr, n, k1, alpha, A, lda, beta, C, ldc);
            if (k1 < k) cblas_ssyrk(CblasColMajor, ul, tr, n, k - k1, alpha, A2, lda, 1.0f, C, ldc);
        } else {
            cblas_dsyrk(CblasColMajor, ul, tr, n, k1, alpha, A, lda, beta, C, ldc);
            if (k1 < k) cblas_dsyrk(CblasColMajor, ul, tr, n, k - k1, alpha, A2, lda, 1.0, C, ldc);
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}
}  // namespace

cublasStatus_t cublasSsyrk_v2(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
                              const float* alpha, const float* A, int lda, const float* beta, float* C, int ldc) {
    return syrk("cublasSsyrk", handle, uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
}
cublasStatus_t cublasDsyrk_v2(cublasHandle_t handle, cublasFillMode_t uplo, cublasOperation_t trans, int n, int k,
                              const double* alpha, const double* A, int lda, const double* beta, double* C, int ldc) {
    return syrk("cublasDsyrk", handle, uplo, trans, n, k, alpha, A, lda, beta, C, ldc);
}

namespace {
// The CUBLAS_STATUS_INVALID_VALUE conditions that cublas<t>trsm and cublas<t>trmm document: m < 0 or n < 0; side,
// uplo, trans or diag out of range; lda < max(1, m) (LEFT) or max(1, n) (RIGHT); ldb < max(1, m) (and ldc for
// trmm); alpha NULL.
cublasStatus_t check_triangular_args(const char* fn, cublasSideMode_t side, cublasFillMode_t uplo,
                                     cublasOperation_t trans, cublasDiagType_t diag, int m, int n, const float* alpha,
                                     int lda, int ldb) {
    if (m < 0 || n < 0) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: m=%d n=%d", fn, m, n);
    if ((side != CUBLAS_SIDE_LEFT && side != CUBLAS_SIDE_RIGHT) ||
        (uplo != CUBLAS_FILL_MODE_LOWER && uplo != CUBLAS_FILL_MODE_UPPER) || !is_op(trans) ||
        (diag != CUBLAS_DIAG_UNIT && diag != CUBLAS_DIAG_NON_UNIT))
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: side=%d uplo=%d trans=%d diag=%d", fn, (int)side,
                    (int)uplo, (int)trans, (int)diag);
    const bool left = side == CUBLAS_SIDE_LEFT;
    if (lda < max1(left ? m : n))
        return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: lda=%d < max(1, %d)", fn, lda, left ? m : n);
    if (ldb < max1(m)) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: ldb=%d < max(1, m=%d)", fn, ldb, m);
    if (!alpha) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "%s: alpha is NULL", fn);
    return CUBLAS_STATUS_SUCCESS;
}
CBLAS_SIDE cblas_side(cublasSideMode_t s) { return s == CUBLAS_SIDE_LEFT ? CblasLeft : CblasRight; }
CBLAS_UPLO cblas_uplo(cublasFillMode_t u) { return u == CUBLAS_FILL_MODE_UPPER ? CblasUpper : CblasLower; }
CBLAS_TRANSPOSE cblas_trans(cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }
CBLAS_DIAG cblas_diag(cublasDiagType_t d) { return d == CUBLAS_DIAG_UNIT ? CblasUnit : CblasNonUnit; }
}  // namespace

// B = alpha op(A)^-1 B (side LEFT, A m x m) or alpha B op(A)^-1 (side RIGHT, A n x n), A triangular (`uplo`, unit
// or non-unit `diag`), B m x n overwritten with the solution: cblas_strsm.
cublasStatus_t cublasStrsm_v2(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,
                              cublasOperation_t trans, cublasDiagType_t diag, int m, int n, const float* alpha,
                              const float* A, int lda, float* B, int ldb) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasStrsm: handle == NULL");
    cublasStatus_t s = check_triangular_args("cublasStrsm", side, uplo, trans, diag, m, n, alpha, lda, ldb);
    if (s != CUBLAS_STATUS_SUCCESS || m == 0 || n == 0) return s;
    cuda_emu::stream_op(handle->stream, [=, alpha = *alpha] {
        const int na = side == CUBLAS_SIDE_LEFT ? m : n;
        cuda_emu::op_access_triangle(A, na, lda, 4, uplo == CUBLAS_FILL_MODE_UPPER, false, "cublasStrsm");
        cuda_emu::op_access_matrix(B, m, n, ldb, 4, false, "cublasStrsm");
        cuda_emu::op_access_matrix(B, m, n, ldb, 4, true, "cublasStrsm");
        cblas_strsm(CblasColMajor, cblas_side(side), cblas_uplo(uplo), cblas_trans(trans), cblas_diag(diag), m, n,
                    alpha, A, lda, B, ldb);
    });
    return CUBLAS_STATUS_SUCCESS;
}

// C = alpha op(A) B (LEFT) or alpha B op(A) (RIGHT), A triangular, B and C m x n. cuBLAS's trmm is out of place
// ("the application can obtain the in-place functionality of BLAS by passing the address of the matrix B in place
// of the matrix C"): B is copied to C, then cblas_strmm runs in place on C. ldc < max(1, m) is INVALID_VALUE too.
cublasStatus_t cublasStrmm_v2(cublasHandle_t handle, cublasSideMode_t side, cublasFillMode_t uplo,
                              cublasOperation_t trans, cublasDiagType_t diag, int m, int n, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
    if (!handle) return fail(false, CUBLAS_STATUS_NOT_INITIALIZED, "cublasStrmm: handle == NULL");
    cublasStatus_t s = check_triangular_args("cublasStrmm", side, uplo, trans, diag, m, n, alpha, lda, ldb);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (ldc < max1(m)) return fail(false, CUBLAS_STATUS_INVALID_VALUE, "cublasStrmm: ldc=%d < max(1, m=%d)", ldc, m);
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    cuda_emu::stream_op(handle->stream, [=, alpha = *alpha] {
        const int na = side == CUBLAS_SIDE_LEFT ? m : n;
        cuda_emu::op_access_triangle(A, na, lda, 4, uplo == CUBLAS_FILL_MODE_UPPER, false, "cublasStrmm");
        cuda_emu::op_access_matrix(B, m, n, ldb, 4, false, "cublasStrmm");
        cuda_emu::op_access_matrix(C, m, n, ldc, 4, true, "cublasStrmm");
        if (C != B)
            for (int j = 0; j < n; j++)
                for (int i = 0; i < m; i++) C[i + (size_t)j * ldc] = B[i + (size_t)j * ldb];
        cblas_strmm(CblasColMajor, cblas_side(side), cblas_uplo(uplo), cblas_trans(trans), cblas_diag(diag), m, n,
                    alpha, A, lda, C, ldc);
    });
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------------------------
// cuBLASLt: emulation controls
// ---------------------------------------------------------------------------------------------------------------

namespace {
std::atomic<bool> g_fail_heuristic{false};
std::atomic<long> g_heuristic_calls{0};
}  // namespace

void cuda_emu_cublaslt_fail_heuristic(bool fail_it) { g_fail_heuristic = fail_it; }
long cuda_emu_cublaslt_heuristic_calls() { return g_heuristic_calls.load(); }

// ---------------------------------------------------------------------------------------------------------------
// cuBLASLt: handle and descriptors
// ---------------------------------------------------------------------------------------------------------------
//
// cublasLtHandle_t points to a struct we define. The descriptors are "semi-opaque": cublasLt.h defines their
// storage (cublasLtMatmulDescOpaque_t = 256 bytes, layout and preference 64 bytes each) so that callers may also
// place them in their own memory (cublasLt*Init). The state of each descriptor therefore lives inside that storage:
// a plain struct placed there, its size checked at compile time.

struct cublasLtContext {
    int unused = 0;
};

namespace {

// cublasLtMatmulDesc_t contents: every attribute of cublasLtMatmulDescAttributes_t, with the documented defaults.
struct DescState {
    int32_t compute_type, scale_type;
    int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
    int32_t fill_mode = CUBLAS_FILL_MODE_FULL;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    int64_t bias_batch_stride = 0;
    void* aux = nullptr;
    int64_t aux_ld = 0, aux_batch_stride = 0, alpha_vector_batch_stride = 0;
    int32_t sm_count_target = 0;
    const void* a_scale = nullptr;
    const void* b_scale = nullptr;
    const void* c_scale = nullptr;
    const void* d_scale = nullptr;
    void* amax_d = nullptr;
    int32_t aux_data_type = -1;
    void* aux_scale = nullptr;
    void* aux_amax = nullptr;
    int8_t fast_accum = 0;
    int32_t bias_data_type = -1;  // -1: the type of D
    int32_t a_scale_mode = 0, b_scale_mode = 0, c_scale_mode = 0, d_scale_mode = 0, aux_scale_mode = 0;
    void* d_out_scale = nullptr;
    int32_t d_out_scale_mode = 0;
    cublasLtEmulationDesc_t emulation = nullptr;
};
static_assert(sizeof(DescState) <= sizeof(cublasLtMatmulDescOpaque_t), "DescState must fit the opaque storage");

// cublasLtMatrixLayout_t contents (cublasLtMatrixLayoutAttribute_t, documented defaults)
struct LayoutState {
    uint64_t rows, cols;
    int64_t ld;
    int64_t batch_stride = 0;  // CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, elements
    int64_t plane_offset = 0;
    uint32_t type;
    int32_t order = CUBLASLT_ORDER_COL;
    int32_t batch_count = 1;
    uint32_t batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
};
static_assert(sizeof(LayoutState) <= sizeof(cublasLtMatrixLayoutOpaque_t), "LayoutState must fit");

// cublasLtMatmulPreference_t contents (cublasLtMatmulPreferenceAttributes_t, documented defaults)
struct PrefState {
    uint64_t max_workspace = 0;  // "default: 0 - no workspace allowed"
    uint64_t impl_mask = ~0ull;
    uint32_t search_mode = CUBLASLT_SEARCH_BEST_FIT;
    uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    uint32_t align_a = 256, align_b = 256, align_c = 256, align_d = 256;  // "default: 256"
    float max_waves = 0.0f;
};
static_assert(sizeof(PrefState) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "PrefState must fit");

// What an algorithm (cublasLtMatmulAlgo_t, 64 bytes, copied by value by callers) remembers: the workspace it uses
// and the pointer alignments it was chosen for (the preference's MIN_ALIGNMENT_*, the bias pointer's alignment).
struct AlgoState {
    uint64_t magic;
    uint64_t workspace;
    uint32_t align_a, align_b, align_c, align_d, align_bias;
    uint32_t reduction;  // cublasLtReductionScheme_t it uses
};
static_assert(sizeof(AlgoState) <= sizeof(cublasLtMatmulAlgo_t), "AlgoState must fit");
constexpr uint64_t ALGO_MAGIC = 0x6375656d754c7441ull;  // "cuemuLtA"

DescState* state(cublasLtMatmulDesc_t d) { return std::launder(reinterpret_cast<DescState*>(d)); }
LayoutState* state(cublasLtMatrixLayout_t l) { return std::launder(reinterpret_cast<LayoutState*>(l)); }
PrefState* state(cublasLtMatmulPreference_t p) { return std::launder(reinterpret_cast<PrefState*>(p)); }

// An attribute's storage inside a state struct and its documented size.
struct Field {
    void* p;
    size_t size;
};
template <typename T>
Field field(T& x) {
    return Field{&x, sizeof(T)};
}

Field desc_field(DescState& d, cublasLtMatmulDescAttributes_t a) {
    switch (a) {
        case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return field(d.compute_type);
        case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return field(d.scale_type);
        case CUBLASLT_MATMUL_DESC_POINTER_MODE: return field(d.pointer_mode);
        case CUBLASLT_MATMUL_DESC_TRANSA: return field(d.transa);
        case CUBLASLT_MATMUL_DESC_TRANSB: return field(d.transb);
        case CUBLASLT_MATMUL_DESC_TRANSC: return field(d.transc);
        case CUBLASLT_MATMUL_DESC_FILL_MODE: return field(d.fill_mode);
        case CUBLASLT_MATMUL_DESC_EPILOGUE: return field(d.epilogue);
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return field(d.bias);
        case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return field(d.bias_batch_stride);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return field(d.aux);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return field(d.aux_ld);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return field(d.aux_batch_stride);
        case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: return field(d.alpha_vector_batch_stride);
        case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return field(d.sm_count_target);
        case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return field(d.a_scale);
        case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return field(d.b_scale);
        case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return field(d.c_scale);
        case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return field(d.d_scale);
        case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return field(d.amax_d);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return field(d.aux_data_type);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER: return field(d.aux_scale);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER: return field(d.aux_amax);
        case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return field(d.fast_accum);
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return field(d.bias_data_type);
        case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return field(d.a_scale_mode);
        case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return field(d.b_scale_mode);
        case CUBLASLT_MATMUL_DESC_C_SCALE_MODE: return field(d.c_scale_mode);
        case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: return field(d.d_scale_mode);
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE: return field(d.aux_scale_mode);
        case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER: return field(d.d_out_scale);
        case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE: return field(d.d_out_scale_mode);
        case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR: return field(d.emulation);
    }
    return Field{nullptr, 0};
}

Field layout_field(LayoutState& l, cublasLtMatrixLayoutAttribute_t a) {
    switch (a) {
        case CUBLASLT_MATRIX_LAYOUT_TYPE: return field(l.type);
        case CUBLASLT_MATRIX_LAYOUT_ORDER: return field(l.order);
        case CUBLASLT_MATRIX_LAYOUT_ROWS: return field(l.rows);
        case CUBLASLT_MATRIX_LAYOUT_COLS: return field(l.cols);
        case CUBLASLT_MATRIX_LAYOUT_LD: return field(l.ld);
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return field(l.batch_count);
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return field(l.batch_stride);
        case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return field(l.plane_offset);
        case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return field(l.batch_mode);
    }
    return Field{nullptr, 0};
}

Field pref_field(PrefState& p, cublasLtMatmulPreferenceAttributes_t a) {
    switch (a) {
        case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return field(p.search_mode);
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return field(p.max_workspace);
        case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return field(p.reduction_mask);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return field(p.align_a);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return field(p.align_b);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return field(p.align_c);
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return field(p.align_d);
        case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return field(p.max_waves);
        case CUBLASLT_MATMUL_PREF_IMPL_MASK: return field(p.impl_mask);
    }
    return Field{nullptr, 0};
}

// *SetAttribute: "CUBLAS_STATUS_INVALID_VALUE if buf is NULL or sizeInBytes doesn't match size of internal
// storage for selected attribute" (an unknown attribute has no storage).
cublasStatus_t set_field(const char* fn, Field f, const void* buf, size_t size) {
    if (!f.p) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: unknown attribute", fn);
    if (!buf) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: buf == NULL", fn);
    if (size != f.size)
        return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: sizeInBytes %zu, the attribute has %zu", fn, size, f.size);
    std::memcpy(f.p, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

// *GetAttribute: "CUBLAS_STATUS_INVALID_VALUE if sizeInBytes is 0 and sizeWritten is NULL, or if sizeInBytes is
// non-zero and buf is NULL or sizeInBytes doesn't match size of internal storage"; sizeWritten gets the bytes
// written, or (sizeInBytes == 0) the bytes needed.
cublasStatus_t get_field(const char* fn, Field f, void* buf, size_t size, size_t* written) {
    if (!f.p) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: unknown attribute", fn);
    if (size == 0) {
        if (!written) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: sizeInBytes 0 and sizeWritten NULL", fn);
        *written = f.size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: buf == NULL", fn);
    if (size != f.size)
        return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: sizeInBytes %zu, the attribute has %zu", fn, size, f.size);
    std::memcpy(buf, f.p, size);
    if (written) *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
    if (!lightHandle) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate: lightHandle == NULL");
    *lightHandle = new (std::nothrow) cublasLtContext();
    return *lightHandle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
    if (!lightHandle) return fail(true, CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy: lightHandle == NULL");
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasLtGetStatusName(cublasStatus_t status) { return cublasGetStatusName(status); }
const char* cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }
size_t cublasLtGetVersion(void) { return CUBLAS_VERSION; }

// --- matmul descriptor ---

cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t matmulDesc, size_t size,
                                               cublasComputeType_t computeType, cudaDataType_t scaleType) {
    // "CUBLAS_STATUS_ALLOC_FAILED if size of the pre-allocated space is insufficient"
    if (!matmulDesc || size < sizeof(DescState)) return CUBLAS_STATUS_ALLOC_FAILED;
    DescState* d = new (matmulDesc) DescState();
    d->compute_type = computeType;
    d->scale_type = scaleType;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (!matmulDesc) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate: matmulDesc == NULL");
    *matmulDesc = new (std::nothrow) cublasLtMatmulDescOpaque_t;
    if (!*matmulDesc) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasLtMatmulDescInit_internal(*matmulDesc, sizeof(cublasLtMatmulDescOpaque_t), computeType, scaleType);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    delete matmulDesc;  // DescState is trivially destructible
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
    if (!matmulDesc) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescSetAttribute: desc == NULL");
    return set_field("cublasLtMatmulDescSetAttribute", desc_field(*state(matmulDesc), attr), buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, size_t sizeInBytes, size_t* sizeWritten) {
    if (!matmulDesc) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescGetAttribute: desc == NULL");
    return get_field("cublasLtMatmulDescGetAttribute", desc_field(*state(matmulDesc), attr), buf, sizeInBytes,
                     sizeWritten);
}

// --- matrix layout ---

cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t matLayout, size_t size, cudaDataType type,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
    if (!matLayout || size < sizeof(LayoutState)) return CUBLAS_STATUS_ALLOC_FAILED;
    LayoutState* l = new (matLayout) LayoutState();
    l->type = (uint32_t)type;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (!matLayout) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate: matLayout == NULL");
    *matLayout = new (std::nothrow) cublasLtMatrixLayoutOpaque_t;
    if (!*matLayout) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasLtMatrixLayoutInit_internal(*matLayout, sizeof(cublasLtMatrixLayoutOpaque_t), type, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    delete matLayout;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                size_t sizeInBytes) {
    if (!matLayout) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutSetAttribute: layout == NULL");
    return set_field("cublasLtMatrixLayoutSetAttribute", layout_field(*state(matLayout), attr), buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf, size_t sizeInBytes,
                                                size_t* sizeWritten) {
    if (!matLayout) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutGetAttribute: layout == NULL");
    return get_field("cublasLtMatrixLayoutGetAttribute", layout_field(*state(matLayout), attr), buf, sizeInBytes,
                     sizeWritten);
}

// --- heuristic preference ---

cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t pref, size_t size) {
    if (!pref || size < sizeof(PrefState)) return CUBLAS_STATUS_ALLOC_FAILED;
    new (pref) PrefState();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    if (!pref) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate: pref == NULL");
    *pref = new (std::nothrow) cublasLtMatmulPreferenceOpaque_t;
    if (!*pref) return CUBLAS_STATUS_ALLOC_FAILED;
    return cublasLtMatmulPreferenceInit_internal(*pref, sizeof(cublasLtMatmulPreferenceOpaque_t));
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete pref;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
    if (!pref) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceSetAttribute: pref == NULL");
    return set_field("cublasLtMatmulPreferenceSetAttribute", pref_field(*state(pref), attr), buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
    if (!pref) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceGetAttribute: pref == NULL");
    return get_field("cublasLtMatmulPreferenceGetAttribute", pref_field(*state(pref), attr), buf, sizeInBytes,
                     sizeWritten);
}

// ---------------------------------------------------------------------------------------------------------------
// cuBLASLt: problem checks, heuristic, matmul
// ---------------------------------------------------------------------------------------------------------------

namespace {

// The workspace the emulated split-K algorithm asks for (when the preference allows a workspace and the
// COMPUTE_TYPE reduction scheme): a fixed 64 KiB, or less when the preference's maximum is smaller. cublasLtMatmul
// overwrites it (as a split-K reduction would) so that a caller that shares it with live data finds out.
constexpr uint64_t EMU_WORKSPACE_BYTES = 64 * 1024;
// The least K the emulated heuristic splits when the reduction rounds to D's type, and into how many slices.
constexpr int64_t EMU_SPLIT_K_MIN = 1024, EMU_SPLIT_K_SLICES = 4;

// The largest power of two <= 256 dividing the address (256 for NULL).
uint32_t alignment_of(const void* p) {
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a) != 0) a >>= 1;
    return a;
}

bool is_pow2(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

// The validated problem of one cublasLtMatmul / heuristic call.
struct LtProblem {
    bool ta, tb;
    int64_t m, n, k;
    int32_t batch;
    cudaDataType_t a_type, b_type, c_type, d_type, bias_type;
    bool bias;
};

// Checks a descriptor and four layouts. Returns CUBLAS_STATUS_INVALID_VALUE for parameters "in conflict or in an
// impossible configuration" (cublasLtMatmul) and CUBLAS_STATUS_NOT_SUPPORTED for a configuration this stand-in has
// no implementation for ("current implementation ... doesn't support configured operation").
cublasStatus_t check_problem(const char* fn, const DescState& d, const LayoutState& A, const LayoutState& B,
                             const LayoutState& C, const LayoutState& D, LtProblem* P) {
    const cublasStatus_t NS = CUBLAS_STATUS_NOT_SUPPORTED, IV = CUBLAS_STATUS_INVALID_VALUE;
    // compute/scale type: CUBLAS_COMPUTE_32F family with CUDA_R_32F scale (alpha, beta are floats)
    if (!is_compute_32f((cublasComputeType_t)d.compute_type) || d.scale_type != CUDA_R_32F)
        return fail(true, NS, "%s: compute type %d / scale type %d", fn, d.compute_type, d.scale_type);
    if (!is_op(d.transa) || !is_op(d.transb))
        return fail(true, IV, "%s: TRANSA=%d TRANSB=%d", fn, d.transa, d.transb);
    // "TRANSC: Currently only CUBLAS_OP_N is supported"
    if (d.transc != CUBLAS_OP_N) return fail(true, NS, "%s: TRANSC=%d (only CUBLAS_OP_N)", fn, d.transc);
    if (d.fill_mode != CUBLAS_FILL_MODE_FULL) return fail(true, NS, "%s: FILL_MODE=%d", fn, d.fill_mode);
    if (d.pointer_mode != CUBLASLT_POINTER_MODE_HOST && d.pointer_mode != CUBLASLT_POINTER_MODE_DEVICE)
        return fail(true, NS, "%s: POINTER_MODE=%d (vector modes not emulated)", fn, d.pointer_mode);
    if (d.epilogue != CUBLASLT_EPILOGUE_DEFAULT && d.epilogue != CUBLASLT_EPILOGUE_BIAS)
        return fail(true, NS, "%s: EPILOGUE=%u (DEFAULT and BIAS are emulated)", fn, d.epilogue);
    // scale/amax pointers: "If set for an unsupported matrix data, scale, and compute type combination, calling
    // cublasLtMatmul() will return CUBLAS_INVALID_VALUE" (they are for fp8 types, none of which is supported here)
    if (d.a_scale || d.b_scale || d.c_scale || d.d_scale || d.amax_d || d.aux_scale || d.aux_amax || d.d_out_scale)
        return fail(true, IV, "%s: scale/amax pointers are set for a non-fp8 matmul", fn);

    const LayoutState* L[4] = {&A, &B, &C, &D};
    const char* name = "ABCD";
    for (int i = 0; i < 4; i++) {
        if (L[i]->order != CUBLASLT_ORDER_COL)
            return fail(true, NS, "%s: %c has order %d (only CUBLASLT_ORDER_COL)", fn, name[i], L[i]->order);
        if (L[i]->batch_mode != CUBLASLT_BATCH_MODE_STRIDED || L[i]->plane_offset != 0)
            return fail(true, NS, "%s: %c uses pointer-array batching or a planar layout", fn, name[i]);
        if (!is_storage_type((cudaDataType_t)L[i]->type))
            return fail(true, NS, "%s: %c has type %u", fn, name[i], L[i]->type);
        // LD: "Currently only non-negative values are supported, must be large enough so that matrix memory
        // locations are not overlapping (e.g. greater or equal to CUBLASLT_MATRIX_LAYOUT_ROWS ...)"
        if (L[i]->ld < 0 || (uint64_t)L[i]->ld < L[i]->rows)
            return fail(true, IV, "%s: %c ld=%lld < rows=%llu", fn, name[i], (long long)L[i]->ld,
                        (unsigned long long)L[i]->rows);
        if (L[i]->rows > INT32_MAX || L[i]->cols > INT32_MAX || L[i]->ld > INT32_MAX)
            return fail(true, NS, "%s: %c is larger than int32 sizes", fn, name[i]);
        if (L[i]->batch_count < 1) return fail(true, IV, "%s: %c batch count %d", fn, name[i], L[i]->batch_count);
    }
    // every operand has the same batch count
    if (A.batch_count != D.batch_count || B.batch_count != D.batch_count || C.batch_count != D.batch_count)
        return fail(true, IV, "%s: batch counts A=%d B=%d C=%d D=%d differ", fn, A.batch_count, B.batch_count,
                    C.batch_count, D.batch_count);

    P->ta = d.transa != CUBLAS_OP_N;
    P->tb = d.transb != CUBLAS_OP_N;
    P->m = (int64_t)(P->ta ? A.cols : A.rows);
    P->k = (int64_t)(P->ta ? A.rows : A.cols);
    const int64_t kb = (int64_t)(P->tb ? B.cols : B.rows);
    P->n = (int64_t)(P->tb ? B.rows : B.cols);
    // op(A) m x k, op(B) k x n, C and D m x n
    if (kb != P->k || (int64_t)C.rows != P->m || (int64_t)C.cols != P->n || (int64_t)D.rows != P->m ||
        (int64_t)D.cols != P->n)
        return fail(true, IV, "%s: shapes disagree: op(A) %lldx%lld, op(B) %lldx%lld, C %llux%llu, D %llux%llu", fn,
                    (long long)P->m, (long long)P->k, (long long)kb, (long long)P->n, (unsigned long long)C.rows,
                    (unsigned long long)C.cols, (unsigned long long)D.rows, (unsigned long long)D.cols);
    P->batch = D.batch_count;

    // types (CUBLAS_COMPUTE_32F rows of the documented table, restricted to fp32 and bf16): A = B; C = D;
    // fp32 x fp32 -> fp32, bf16 x bf16 -> bf16 or fp32
    P->a_type = (cudaDataType_t)A.type;
    P->b_type = (cudaDataType_t)B.type;
    P->c_type = (cudaDataType_t)C.type;
    P->d_type = (cudaDataType_t)D.type;
    const bool types_ok = P->a_type == P->b_type && P->c_type == P->d_type &&
                          (P->a_type == CUDA_R_16BF || P->d_type == CUDA_R_32F);
    if (!types_ok)
        return fail(true, NS, "%s: types A=%d B=%d C=%d D=%d", fn, (int)P->a_type, (int)P->b_type, (int)P->c_type,
                    (int)P->d_type);
    // bias: one value per row of D; its type defaults (-1) to D's type; a fp32 bias is accepted for any D
    P->bias = d.epilogue == CUBLASLT_EPILOGUE_BIAS;
    P->bias_type = d.bias_data_type == -1 ? P->d_type : (cudaDataType_t)d.bias_data_type;
    if (P->bias && P->bias_type != P->d_type && P->bias_type != CUDA_R_32F)
        return fail(true, NS, "%s: bias type %d with D type %d", fn, (int)P->bias_type, (int)P->d_type);
    return CUBLAS_STATUS_SUCCESS;
}

// The algorithm the emulated heuristic picks for a preference (and the descriptor's bias pointer).
AlgoState choose_algo(const PrefState& pref, const DescState& d, const LtProblem& P) {
    AlgoState a{};
    a.magic = ALGO_MAGIC;
    // A bf16 D and a K worth splitting: the least precise split-K the mask allows, a reduction in D's type
    // (OUTPUT_TYPE: "intermediate results are stored in output type"; INPLACE: "using the output buffer (and output
    // data type)", cublasLt.h), either of which a GPU's heuristic may pick; run_gemm rounds each slice's partial sum
    // to bf16, so that a caller allowing them sees what they cost. Both keep counters or partials in the workspace.
    const bool splits_in_d_type = P.d_type == CUDA_R_16BF && P.k >= EMU_SPLIT_K_MIN && pref.max_workspace >= 256;
    const uint32_t in_d_type = pref.reduction_mask & (CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE |
                                                      CUBLASLT_REDUCTION_SCHEME_INPLACE);
    // Otherwise split-K with a COMPUTE_TYPE reduction in the workspace when both are allowed, else no reduction.
    if (splits_in_d_type && in_d_type)
        a.reduction = (in_d_type & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) ? CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE
                                                                          : CUBLASLT_REDUCTION_SCHEME_INPLACE;
    else if ((pref.reduction_mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) && pref.max_workspace >= 256)
        a.reduction = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    else
        a.reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    a.workspace = a.reduction == CUBLASLT_REDUCTION_SCHEME_NONE ? 0
                  : pref.max_workspace < EMU_WORKSPACE_BYTES     ? pref.max_workspace / 256 * 256
                                                                 : EMU_WORKSPACE_BYTES;
    a.align_a = pref.align_a;
    a.align_b = pref.align_b;
    a.align_c = pref.align_c;
    a.align_d = pref.align_d;
    // BIAS_POINTER: "Routines that don't dereference this pointer, like cublasLtMatmulAlgoGetHeuristic() depend on
    // its value to determine expected pointer alignment."
    a.align_bias = alignment_of(d.bias);
    return a;
}

}  // namespace

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
    static const char* fn = "cublasLtMatmulAlgoGetHeuristic";
    g_heuristic_calls++;
    if (!lightHandle) return fail(true, CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle == NULL", fn);
    // "CUBLAS_STATUS_INVALID_VALUE if requestedAlgoCount is less or equal to zero"
    if (requestedAlgoCount <= 0) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: requestedAlgoCount <= 0", fn);
    if (!operationDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !preference || !heuristicResultsArray ||
        !returnAlgoCount)
        return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: a NULL descriptor or output", fn);
    *returnAlgoCount = 0;

    // the forced failure of the emulation (libs_emu.h)
    const char* env = std::getenv("PRAC_EMU_CUBLASLT_NO_ALGO");
    if (g_fail_heuristic || (env && *env && std::strcmp(env, "0") != 0))
        return fail(true, CUBLAS_STATUS_NOT_SUPPORTED, "%s: no algorithm (forced by the emulation)", fn);

    // "CUBLAS_STATUS_NOT_SUPPORTED if no heuristic function available for current configuration": every
    // configuration this stand-in cannot run, valid or not, has no algorithm
    const DescState& d = *state(operationDesc);
    LtProblem P;
    if (check_problem(fn, d, *state(Adesc), *state(Bdesc), *state(Cdesc), *state(Ddesc), &P) != CUBLAS_STATUS_SUCCESS)
        return fail(true, CUBLAS_STATUS_NOT_SUPPORTED, "%s: no algorithm for this configuration", fn);
    // MIN_ALIGNMENT_*: an algorithm works with pointers "not as strictly aligned as they need" only down to one
    // element; a promise below the element size (or not a power of two) leaves no algorithm
    const PrefState& pref = *state(preference);
    const uint32_t al[4] = {pref.align_a, pref.align_b, pref.align_c, pref.align_d};
    const cudaDataType_t ty[4] = {P.a_type, P.b_type, P.c_type, P.d_type};
    for (int i = 0; i < 4; i++)
        if (!is_pow2(al[i]) || al[i] < type_size(ty[i]))
            return fail(true, CUBLAS_STATUS_NOT_SUPPORTED, "%s: MIN_ALIGNMENT_%c_BYTES=%u for %zu-byte elements", fn,
                        "ABCD"[i], al[i], type_size(ty[i]));
    if (P.bias && alignment_of(d.bias) < type_size(P.bias_type))
        return fail(true, CUBLAS_STATUS_NOT_SUPPORTED, "%s: bias pointer %p is not element-aligned", fn, d.bias);

    // one algorithm, workspaceSize <= the preference's maximum
    AlgoState a = choose_algo(pref, d, P);
    cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
    std::memset(&r, 0, sizeof r);
    std::memcpy(&r.algo, &a, sizeof a);
    r.workspaceSize = (size_t)a.workspace;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// D = alpha op(A) op(B) + beta C (+ bias: one value per row of D, broadcast over its columns, added in fp32 before
// D is rounded). C and D may be the same memory. Every batch of a strided batch in turn.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    static const char* fn = "cublasLtMatmul";
    if (!lightHandle) return fail(true, CUBLAS_STATUS_NOT_INITIALIZED, "%s: handle == NULL", fn);
    if (!computeDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc)
        return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: a NULL descriptor", fn);
    if (!alpha || !beta) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: alpha or beta is NULL", fn);
    const DescState& d = *state(computeDesc);
    const LayoutState &La = *state(Adesc), &Lb = *state(Bdesc), &Lc = *state(Cdesc), &Ld = *state(Ddesc);
    LtProblem P;
    cublasStatus_t s = check_problem(fn, d, La, Lb, Lc, Ld, &P);
    if (s != CUBLAS_STATUS_SUCCESS) return s;

    // alpha, beta: read at the call, as host scalars (CUBLASLT_POINTER_MODE_HOST, the project's) are
    const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
    if (!D) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: D == NULL", fn);
    if (b != 0.0f && !C) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: beta != 0 with C == NULL", fn);
    if (P.bias && !d.bias) return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: BIAS epilogue without a pointer", fn);
    // in place (C == D): C and D must describe the same memory layout
    if (C == D && (Lc.ld != Ld.ld || Lc.order != Ld.order || Lc.type != Ld.type || Lc.batch_stride != Ld.batch_stride))
        return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: C == D but Cdesc and Ddesc differ (ld %lld vs %lld)", fn,
                    (long long)Lc.ld, (long long)Ld.ld);

    // the algorithm: the heuristic's, or (algo == NULL) an implicit heuristic query with default preferences and
    // the actual pointers' alignments
    AlgoState al{};
    if (algo) {
        std::memcpy(&al, algo, sizeof al);
        if (al.magic != ALGO_MAGIC)
            return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: algo was not produced by the heuristic", fn);
    } else {
        PrefState def;
        def.align_a = alignment_of(A);
        def.align_b = alignment_of(B);
        def.align_c = alignment_of(C);
        def.align_d = alignment_of(D);
        al = choose_algo(def, d, P);
    }
    // "CUBLAS_STATUS_INVALID_VALUE ... e.g. when workspaceSizeInBytes is less than workspace required by configured
    // algo"; the workspace must be 256-byte aligned (cublasLtMatmul's workspace parameter)
    if (al.workspace > 0) {
        if (workspaceSizeInBytes < al.workspace)
            return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: workspace of %zu bytes, the algorithm needs %llu", fn,
                        workspaceSizeInBytes, (unsigned long long)al.workspace);
        if (!workspace || (uintptr_t)workspace % 256 != 0)
            return fail(true, CUBLAS_STATUS_INVALID_VALUE, "%s: workspace %p is NULL or not 256-byte aligned", fn,
                        workspace);
    }
    // An algorithm chosen for MIN_ALIGNMENT_x_BYTES may rely on that alignment (the preference's purpose); on a GPU
    // a less aligned operand makes the kernel fault (misaligned address). Emulated as an execution failure.
    struct {
        const void* p;
        uint32_t need;
        char name;  // 'b': the bias
    } ptrs[5] = {{A, al.align_a, 'A'}, {B, al.align_b, 'B'}, {b != 0.0f ? C : nullptr, al.align_c, 'C'},
                 {D, al.align_d, 'D'}, {P.bias ? d.bias : nullptr, al.align_bias, 'b'}};
    for (const auto& x : ptrs) {
        const uint32_t need = x.need < 256 ? x.need : 256;  // alignment_of() saturates at 256
        if (x.p && alignment_of(x.p) < need)
            return fail(true, CUBLAS_STATUS_EXECUTION_FAILED,
                        "%s: %c = %p is %u-byte aligned, the algorithm was chosen for %u-byte alignment (on a GPU: "
                        "misaligned address)",
                        fn, x.name, x.p, alignment_of(x.p), need);
    }

    std::vector<Gemm> gemms;
    for (int32_t i = 0; i < P.batch; i++) {
        auto at = [i](const void* base, const LayoutState& l) -> const void* {
            return base ? static_cast<const char*>(base) + (int64_t)i * l.batch_stride *
                                                               (int64_t)type_size((cudaDataType_t)l.type)
                        : nullptr;
        };
        const void* bias = P.bias ? static_cast<const char*>(d.bias) + (int64_t)i * d.bias_batch_stride *
                                                                            (int64_t)type_size(P.bias_type)
                                  : nullptr;
        gemms.push_back(Gemm{P.ta, P.tb, P.m, P.n, P.k, a, b, Operand{at(A, La), P.a_type, La.ld},
                      Operand{at(B, Lb), P.b_type, Lb.ld}, Operand{at(C, Lc), P.c_type, Lc.ld},
                      Operand{at(D, Ld), P.d_type, Ld.ld}, bias, P.bias_type});
        const bool inplace = al.reduction == CUBLASLT_REDUCTION_SCHEME_INPLACE;
        if (inplace || al.reduction == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) {
            gemms.back().k_slices = EMU_SPLIT_K_SLICES;
            gemms.back().inplace = inplace;
        }
    }
    queue_gemms(stream, std::move(gemms));
    // the split-K partial sums: the workspace's contents afterwards are unspecified
    if (al.workspace > 0)
        cuda_emu::stream_op(stream, [workspace, bytes = (size_t)al.workspace] {
            cuda_emu::op_access(workspace, bytes, true, "cublasLtMatmul (its workspace)");
            std::memset(workspace, 0xff, bytes);
        });
    return CUBLAS_STATUS_SUCCESS;
}
