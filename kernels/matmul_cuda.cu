// Matmul family and fused classifier on the GPU: CUDA twins of kernels/matmul.h and kernels/classifier.h, contracts in
// kernels/matmul.cuh and kernels/classifier.cuh. cuBLASLt is column-major: each row-major GEMM runs as the column-major
// product of the transposes on the same buffers (operands swapped, M and N swapped, each operand keeping its own
// transpose flag and leading dimension; as prac_gemm_rm in prac/prac_cuda.cu), and the BIAS epilogue then adds one
// value per output feature. Compute type CUBLAS_COMPUTE_32F for every storage type, never TF32, so the fp32 build
// (-DPRAC_FP32) stays IEEE fp32 and comparable with the CPU at ~1e-5. The mapping in cuBLASLt's terms (layouts, ops,
// the epilogue's vector) and the compute types: docs/DESIGN.md section 3.2.
#include "kernels/classifier.cuh"
#include "kernels/matmul.cuh"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda_check.h"
#include "common/error.h"

// ---------------------------------------------------------------------------------------------------------------
// CublasLt context and the per-shape cache
// ---------------------------------------------------------------------------------------------------------------

static_assert(sizeof(GemmKey) == 18 * sizeof(int32_t), "GemmKey must have no padding (hashed as bytes)");

bool GemmKey::operator==(const GemmKey& o) const { return std::memcmp(this, &o, sizeof(GemmKey)) == 0; }

size_t GemmKeyHash::operator()(const GemmKey& k) const {
    // FNV-1a over the key's bytes (all int32, no padding)
    const unsigned char* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof(GemmKey); i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return (size_t)h;
}

CublasLt::CublasLt(void* ws, size_t ws_bytes) {
    cublasCheck(cublasLtCreate(&handle));
    workspace_bytes = ws_bytes;
    if (ws) {
        workspace = ws;
    } else if (ws_bytes > 0) {
        cudaCheck(cudaMalloc(&workspace, ws_bytes));  // cudaMalloc: 256-byte aligned
        owns_workspace = true;
    }
}

CublasLt::~CublasLt() {
    // Destructors do not exit on errors: just release what can be released.
    for (auto& kv : cache) {
        GemmPlan& p = kv.second;
        if (p.a) cublasLtMatrixLayoutDestroy(p.a);
        if (p.b) cublasLtMatrixLayoutDestroy(p.b);
        if (p.c) cublasLtMatrixLayoutDestroy(p.c);
        if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    }
    cache.clear();
    if (owns_workspace && workspace) cudaFree(workspace);
    if (handle) cublasLtDestroy(handle);
}

// Largest power of two <= 256 that divides the address (256 for nullptr is never used: callers pass real pointers).
static int32_t pointer_alignment(const void* p) {
    uintptr_t a = (uintptr_t)p;
    int32_t al = 256;
    while (al > 1 && (a % (uintptr_t)al) != 0) al >>= 1;
    return al;
}

static const char* dtype_name(int32_t t) {
    switch (t) {
        case CUDA_R_32F: return "fp32";
        case CUDA_R_16BF: return "bf16";
        case CUDA_R_16F: return "fp16";
        case -1: return "none";
        default: return "other";
    }
}

static std::string key_string(const GemmKey& k) {
    return format("row-major %c%c M=%d N=%d K=%d lda=%d ldb=%d ldc=%d A=%s B=%s C=%s epilogue=%d bias=%s beta%s0 "
                  "align A/B/C/bias=%d/%d/%d/%d",
                  k.transa ? 'T' : 'N', k.transb ? 'T' : 'N', k.M, k.N, k.K, k.lda, k.ldb, k.ldc,
                  dtype_name(k.a_type), dtype_name(k.b_type), dtype_name(k.c_type), k.epilogue,
                  dtype_name(k.bias_type), k.beta_nonzero ? "!=" : "==", k.align_a, k.align_b, k.align_c,
                  k.align_bias);
}

// Descriptors, layouts and algorithm for a key (first call of a shape): the only place the heuristic runs.
static GemmPlan make_plan(CublasLt& lt, const GemmKey& k, const void* bias) {
    GemmPlan p;
    cublasCheck(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // operands swapped for row-major (file comment): cuBLAS A is our B, cuBLAS B is our A
    cublasOperation_t op_a = k.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = k.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
    cublasLtEpilogue_t epi = (cublasLtEpilogue_t)k.epilogue;
    cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    if (k.epilogue == CUBLASLT_EPILOGUE_BIAS) {
        int32_t bt = k.bias_type;  // explicit: the default follows D's type, which is what we pass anyway
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
        cublasCheck(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    const uint64_t a_rows = k.transb ? k.K : k.N, a_cols = k.transb ? k.N : k.K;
    const uint64_t b_rows = k.transa ? k.M : k.K, b_cols = k.transa ? k.K : k.M;
    cublasCheck(cublasLtMatrixLayoutCreate(&p.a, (cudaDataType_t)k.b_type, a_rows, a_cols, (int64_t)k.ldb));
    cublasCheck(cublasLtMatrixLayoutCreate(&p.b, (cudaDataType_t)k.a_type, b_rows, b_cols, (int64_t)k.lda));
    cublasCheck(cublasLtMatrixLayoutCreate(&p.c, (cudaDataType_t)k.c_type, (uint64_t)k.N, (uint64_t)k.M,
                                           (int64_t)k.ldc));

    cublasLtMatmulPreference_t pref = nullptr;
    cublasCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t max_ws = lt.workspace_bytes;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                     sizeof(max_ws)));
    // Split-K reductions allowed: all three schemes are ordered (CublasLt comment in matmul.cuh). Spelled out so
    // that a reader (or a future cuBLASLt with an atomics-based scheme outside this mask) sees the choice. A bf16 D:
    // only the scheme whose partial sums stay fp32 (the others round each K slice's sum to bf16).
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (k.c_type != CUDA_R_16BF) schemes |= CUBLASLT_REDUCTION_SCHEME_INPLACE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                     sizeof(schemes)));
    // The real pointer alignments (default 256). cuBLAS A is our B.
    uint32_t al_a = (uint32_t)k.align_b, al_b = (uint32_t)k.align_a, al_c = (uint32_t)k.align_c;
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a,
                                                     sizeof(al_a)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b,
                                                     sizeof(al_b)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c,
                                                     sizeof(al_c)));
    cublasCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c,
                                                     sizeof(al_c)));

    // The heuristic's best-ranked algorithm (results come sorted by estimated time); C and D share one layout.
    cublasLtMatmulHeuristicResult_t res[4];
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt.handle, p.desc, p.a, p.b, p.c, p.c, pref, 4, res, &found);
    cublasCheck(cublasLtMatmulPreferenceDestroy(pref));
    // CUBLAS_STATUS_NOT_SUPPORTED is the documented answer when no algorithm fits: the error below, with the key
    if (hs == CUBLAS_STATUS_NOT_SUPPORTED) found = 0;
    else cublasCheck(hs);
    int pick = -1;
    for (int i = 0; i < found; i++)
        if (res[i].state == CUBLAS_STATUS_SUCCESS) {
            pick = i;
            break;
        }
    if (pick < 0) {
        cublasLtMatrixLayoutDestroy(p.a);
        cublasLtMatrixLayoutDestroy(p.b);
        cublasLtMatrixLayoutDestroy(p.c);
        cublasLtMatmulDescDestroy(p.desc);
        throw std::runtime_error("gemm_cuda: cuBLASLt has no algorithm for " + key_string(k) +
                                 format(" (workspace %zu bytes)", lt.workspace_bytes));
    }
    p.algo = res[pick].algo;
    p.workspace_bytes = res[pick].workspaceSize;
    return p;
}

void gemm_cuda(bool transa, bool transb, int M, int N, int K, float alpha, const void* A, cudaDataType_t a_type,
               int lda, const void* B, cudaDataType_t b_type, int ldb, float beta, void* C, cudaDataType_t c_type,
               int ldc, CublasLt& lt, cudaStream_t stream, const void* bias, cudaDataType_t bias_type) {
    if (M < 0 || N < 0 || K < 0)
        throw std::runtime_error(format("gemm_cuda: negative size M=%d N=%d K=%d", M, N, K));
    if (M == 0 || N == 0) return;
    if (K == 0) {
        // C = beta * C + bias: only the no-op case occurs (an empty micro-batch's weight gradient)
        if (beta == 1.0f && !bias) return;
        throw std::runtime_error("gemm_cuda: K = 0 is supported only with beta = 1 and no bias");
    }
    // row-major leading dimensions: A is (M, K), stored (K, M) when transposed; likewise B; C is (M, N)
    if (lda < (transa ? M : K) || ldb < (transb ? K : N) || ldc < N)
        throw std::runtime_error(format("gemm_cuda: leading dimension too small (%c%c M=%d N=%d K=%d lda=%d ldb=%d "
                                        "ldc=%d)",
                                        transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, lda, ldb, ldc));

    GemmKey k;
    std::memset(&k, 0, sizeof k);
    k.transa = transa;
    k.transb = transb;
    k.M = M;
    k.N = N;
    k.K = K;
    k.lda = lda;
    k.ldb = ldb;
    k.ldc = ldc;
    k.a_type = a_type;
    k.b_type = b_type;
    k.c_type = c_type;
    k.epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    k.bias_type = bias ? (int32_t)bias_type : -1;
    k.beta_nonzero = beta != 0.0f;
    k.align_a = pointer_alignment(A);
    k.align_b = pointer_alignment(B);
    k.align_c = pointer_alignment(C);
    k.align_bias = bias ? pointer_alignment(bias) : 0;

    auto it = lt.cache.find(k);
    if (it == lt.cache.end()) it = lt.cache.emplace(k, make_plan(lt, k, bias)).first;
    GemmPlan& p = it->second;
    // The bias pointer is per call (the layer's bias); the descriptor is the shape's. A host-side attribute write.
    if (bias)
        cublasCheck(
            cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    // operands swapped (file comment); D = C in place
    cublasCheck(cublasLtMatmul(lt.handle, p.desc, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo,
                               lt.workspace, lt.workspace_bytes, stream));
}

// ---------------------------------------------------------------------------------------------------------------
// matmul forward / backward
// ---------------------------------------------------------------------------------------------------------------

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias.
// twin: gemm_cpu(false, true, N, OC, C, 1, inp, C, weight, C, 0, out, OC) + bias loop
// cuBLASLt: A = weight as column-major (C, OC) with op T -> (OC, C); B = inp column-major (C, N); D (OC, N):
// llm.c's forward layout, with the bias added by the epilogue in fp32 before D is rounded to floatX.
void matmul_forward_cuda(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int N, int C,
                         int OC, CublasLt& lt, cudaStream_t stream, int ld_out, int ld_inp) {
    gemm_cuda(false, true, N, OC, C, 1.0f, inp, FLOATX_CUDA_DTYPE, ld_inp ? ld_inp : C, weight, FLOATX_CUDA_DTYPE, C,
              0.0f, out, FLOATX_CUDA_DTYPE, ld_out ? ld_out : OC, lt, stream, bias, FLOATX_CUDA_DTYPE);
}

// dinp (N, C) (+)= dout (N, OC) @ weight (OC, C).
// twin: gemm_cpu(false, false, N, C, OC, 1, dout, ld_dout, weight, C, accumulate ? 1 : 0, dinp, ld_dinp)
void matmul_backward_input_cuda(floatX* dinp, const floatX* dout, const floatX* weight, int N, int C, int OC,
                                bool accumulate, CublasLt& lt, cudaStream_t stream, int ld_dinp, int ld_dout) {
    gemm_cuda(false, false, N, C, OC, 1.0f, dout, FLOATX_CUDA_DTYPE, ld_dout ? ld_dout : OC, weight, FLOATX_CUDA_DTYPE,
              C, accumulate ? 1.0f : 0.0f, dinp, FLOATX_CUDA_DTYPE, ld_dinp ? ld_dinp : C, lt, stream);
}

// dbias, step 1. partial (G, OC) fp32: partial[g][o] = sum of dout[r][o] over the rows r of group g
// (rows [g * rows_per_group, (g + 1) * rows_per_group) clipped to N).
// Block (32, DBIAS_LANES): x = 32 adjacent columns (one row of a warp is a coalesced read), y = row lanes that
// stride through the group; each lane sums its rows in order, then lane 0 sums the lanes in order. Fixed order
// throughout: deterministic, and the same on every GPU (the grid depends on N and OC only).
constexpr int DBIAS_LANES = 16;
template <typename T>
__global__ void matmul_dbias_partial_kernel(float* partial, const T* dout, int N, int OC, int ld, int rows_per_group) {
    __shared__ float part[DBIAS_LANES][33];  // +1 column: lane 0's column reads hit distinct banks
    int o = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * rows_per_group;
    int r1 = min(N, r0 + rows_per_group);
    float acc = 0.0f;
    if (o < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += DBIAS_LANES) acc += to_float(dout[(size_t)r * ld + o]);
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < OC) {
        float s = 0.0f;
        for (int y = 0; y < DBIAS_LANES; y++) s += part[y][threadIdx.x];
        partial[(size_t)blockIdx.y * OC + o] = s;
    }
}

// dbias, step 2. dbias[o] += sum over g = 0..G-1 of partial[g][o], in that order, in fp32; one rounding to T.
template <typename T>
__global__ void matmul_dbias_finish_kernel(T* dbias, const float* partial, int G, int OC) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OC) return;
    float s = 0.0f;
    for (int g = 0; g < G; g++) s += partial[(size_t)g * OC + o];
    dbias[o] = from_float<T>(to_float(dbias[o]) + s);
}

// dbias (OC) += column sums of dout (N, OC) over `groups` row groups through scratch (groups, OC); see matmul.cuh.
template <typename T, typename G>
void matmul_dbias_cuda(G* dbias, const T* dout, int N, int OC, int groups, float* scratch, cudaStream_t stream,
                       int ld_dout) {
    if (N <= 0 || OC <= 0) return;
    if (groups < 1 || !scratch) throw std::runtime_error(format("matmul_dbias_cuda: groups = %d, scratch %p", groups,
                                                                static_cast<void*>(scratch)));
    const int rows_per_group = (N + groups - 1) / groups;
    dim3 block(32, DBIAS_LANES), grid((unsigned)ceil_div(OC, 32), (unsigned)groups);
    matmul_dbias_partial_kernel<T><<<grid, block, 0, stream>>>(scratch, dout, N, OC, ld_dout ? ld_dout : OC,
                                                               rows_per_group);
    cudaCheck(cudaGetLastError());
    matmul_dbias_finish_kernel<G><<<ceil_div(OC, 256), 256, 0, stream>>>(dbias, scratch, groups, OC);
    cudaCheck(cudaGetLastError());
}
template void matmul_dbias_cuda<float, float>(float*, const float*, int, int, int, float*, cudaStream_t, int);
template void matmul_dbias_cuda<__nv_bfloat16, __nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, int, int, int,
                                                              float*, cudaStream_t, int);
template void matmul_dbias_cuda<__nv_bfloat16, float>(float*, const __nv_bfloat16*, int, int, int, float*,
                                                      cudaStream_t, int);

// dweight (OC, C) += dout (N, OC)^T @ inp (N, C); dbias (OC) += column sums of dout.
// twin: gemm_cpu(true, false, OC, C, N, 1, dout, ld_dout, inp, ld_inp, 1, dweight, C) + column-sum loop
void matmul_backward_weight_cuda(floatX* dweight, floatX* dbias, const floatX* dout, const floatX* inp, int N, int C,
                                 int OC, float* scratch, CublasLt& lt, cudaStream_t stream, int ld_dout, int ld_inp) {
    gemm_cuda(true, false, OC, C, N, 1.0f, dout, FLOATX_CUDA_DTYPE, ld_dout ? ld_dout : OC, inp, FLOATX_CUDA_DTYPE,
              ld_inp ? ld_inp : C, 1.0f, dweight, FLOATX_CUDA_DTYPE, C, lt, stream);
    if (!dbias || N <= 0 || OC <= 0) return;
    if (!scratch) {
        // lt's workspace: the GEMM above is finished with it before these kernels run (same stream)
        size_t need = matmul_dbias_scratch_floats(N, OC) * sizeof(float);
        if (need > lt.workspace_bytes)
            throw std::runtime_error(format("matmul_backward_weight_cuda: dbias needs %zu bytes of scratch, the "
                                            "cuBLASLt workspace has %zu: pass a scratch buffer",
                                            need, lt.workspace_bytes));
        scratch = static_cast<float*>(lt.workspace);
    }
    matmul_dbias_cuda<floatX, floatX>(dbias, dout, N, OC, matmul_dbias_groups(N), scratch, stream, ld_dout);
}

// ---------------------------------------------------------------------------------------------------------------
// fused classifier
// ---------------------------------------------------------------------------------------------------------------

// Running (max, sum of exp(x - max)) of a set of logits, combinable in any grouping (online log-sum-exp).
struct MaxSum {
    float m, s;
};
__device__ __forceinline__ MaxSum maxsum_combine(MaxSum a, MaxSum b) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.0f};  // both empty: avoid exp(-inf - -inf) = NaN
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

constexpr int CLS_THREADS = 512;

// One block per row of the chunk. logits row r: fp32 at logits + r * ld (V values). Computes
//   lse = log(sum_v exp(l_v)) in fp32 (each thread a running max/sum over its strided columns, then a fixed
//   butterfly over the warp and a fixed-order sum over the warps: deterministic; no overflow for any logits),
//   losses[r] = lse - l[target]    (0 for target < 0; NaN for target >= V)
// and when training, dlogits[v] = exp(l_v - lse) * grad_scale - (v == target) * grad_scale (the CPU twin's
// order: scale first, then subtract), 0 for ignored rows, written as TD over the row itself:
//   TD = float: element v replaces element v (same thread reads then writes);
//   TD = bf16:  bf16 element v lies at byte 2v of the row, inside fp32 element v/2. The row is walked in steps
//     of S = CLS_PER_THREAD * blockDim: every thread reads its CLS_PER_THREAD fp32 elements of the step, the block
//     syncs, then writes. The bytes written in the step at `base` belong to fp32 elements < (base + S) / 2, all
//     read in this or an earlier step (and before the sync), and the next step reads elements >= base + S, never
//     written. So the bf16 row (row stride 2 * ld bf16 elements) replaces the fp32 row in place, and no second
//     scratch is needed. Several elements per thread make one barrier per S logits instead of per blockDim (the
//     GPT-2 vocabulary: 13 barriers a row, not 99); each element's value is the same either way.
constexpr int CLS_PER_THREAD = 8;
template <typename TD>
__global__ void __launch_bounds__(CLS_THREADS)
    classifier_row_kernel(float* losses, float* logits, int ld, int V, const int32_t* targets, float grad_scale,
                          int train) {
    const int r = blockIdx.x;
    float* l = logits + (size_t)r * ld;
    TD* d = reinterpret_cast<TD*>(l);
    const int target = targets[r];
    if (target < 0 || target >= V) {  // ignored (or invalid): no gradient
        if (threadIdx.x == 0) losses[r] = target < 0 ? 0.0f : NAN;
        if (train)
            for (int v = threadIdx.x; v < V; v += blockDim.x) d[v] = from_float<TD>(0.0f);
        return;
    }
    const float l_target = l[target];  // read by every thread before anything is written

    MaxSum t{-INFINITY, 0.0f};
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float x = l[v];
        if (x > t.m) {
            t.s = t.s * expf(t.m - x) + 1.0f;
            t.m = x;
        } else {
            t.s += expf(x - t.m);  // NaN logits propagate to the loss
        }
    }
    for (int off = 16; off > 0; off >>= 1) {
        MaxSum o{__shfl_xor_sync(0xffffffffu, t.m, off), __shfl_xor_sync(0xffffffffu, t.s, off)};
        // (lane 0's is used: nvcc contracts a.s * ea + b.s * eb into an FMA, which is not symmetric, so on a GPU the
        // lanes may end an ulp apart; the emulator's host code, built with -ffp-contract=off, ends them equal)
        t = maxsum_combine(t, o);
    }
    __shared__ MaxSum warp_ms[CLS_THREADS / 32];
    __shared__ float lse_sh;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    if (lane == 0) warp_ms[warp] = t;
    __syncthreads();
    if (threadIdx.x == 0) {
        MaxSum a = warp_ms[0];
        for (int w = 1; w < nwarps; w++) a = maxsum_combine(a, warp_ms[w]);
        float lse = a.m + logf(a.s);
        lse_sh = lse;
        losses[r] = lse - l_target;
    }
    __syncthreads();
    if (!train) return;
    const float lse = lse_sh;
    const int step = CLS_PER_THREAD * blockDim.x;
    for (int base = 0; base < V; base += step) {  // same trip count for every thread: the sync is uniform
        float x[CLS_PER_THREAD];  // this thread's logits of the step: v = base + k * blockDim + threadIdx
#pragma unroll
        for (int k = 0; k < CLS_PER_THREAD; k++) {
            const int v = base + k * blockDim.x + threadIdx.x;
            x[k] = v < V ? l[v] : 0.0f;
        }
        if (sizeof(TD) < sizeof(float)) __syncthreads();
#pragma unroll
        for (int k = 0; k < CLS_PER_THREAD; k++) {
            const int v = base + k * blockDim.x + threadIdx.x;
            if (v < V) {
                float g = expf(x[k] - lse) * grad_scale;
                if (v == target) g -= grad_scale;
                d[v] = from_float<TD>(g);
            }
        }
    }
}

// Per chunk (classifier.cuh):
//   logits (rows, V) fp32, ld Lld = inp_chunk (rows, C) @ weight[:V] (V, C)^T
//     twin: gemm_cpu(false, true, rows, V, C, 1, inp + n0*C, C, weight, C, 0, logits, V)
//   row kernel -> losses, dlogits (rows, V) floatX, ld Dld = Lld * 4 / sizeof(floatX), over the logits
//   dinp_chunk (rows, C) = dlogits @ weight[:V]
//     twin: gemm_cpu(false, false, rows, C, V, 1, logits, V, weight, C, 0, dinp + n0*C, C)
//   dweight[:V] (V, C) += dlogits^T @ inp_chunk
//     twin: gemm_cpu(true, false, V, C, rows, 1, logits, V, inp + n0*C, C, 1, dweight, C)
void classifier_cuda(float* losses, floatX* dinp, floatX* dweight, const floatX* inp, const floatX* weight,
                     const int32_t* targets, int N, int C, int V, float grad_scale, float* logits_scratch,
                     CublasLt& lt, cudaStream_t stream) {
    if (N < 0 || C <= 0 || V <= 0)
        throw std::runtime_error(format("classifier_cuda: bad sizes N=%d C=%d V=%d", N, C, V));
    if (!logits_scratch) throw std::runtime_error("classifier_cuda: logits_scratch is null");
    if (dinp && !dweight) throw std::runtime_error("classifier_cuda: training (dinp set) needs dweight");
    const bool train = dinp != nullptr;
    const int Lld = classifier_logits_ld(V);
    const int Dld = Lld * (int)(sizeof(float) / sizeof(floatX));  // same byte stride as the fp32 rows
    const int chunk = classifier_rows_per_chunk(V);
    floatX* dlogits = reinterpret_cast<floatX*>(logits_scratch);
    for (int n0 = 0; n0 < N; n0 += chunk) {
        const int rows = N - n0 < chunk ? N - n0 : chunk;
        const floatX* inp_c = inp + (size_t)n0 * C;
        gemm_cuda(false, true, rows, V, C, 1.0f, inp_c, FLOATX_CUDA_DTYPE, C, weight, FLOATX_CUDA_DTYPE, C, 0.0f,
                  logits_scratch, CUDA_R_32F, Lld, lt, stream);
        classifier_row_kernel<floatX><<<rows, CLS_THREADS, 0, stream>>>(losses + n0, logits_scratch, Lld, V,
                                                                        targets + n0, grad_scale, train ? 1 : 0);
        cudaCheck(cudaGetLastError());
        if (!train) continue;
        gemm_cuda(false, false, rows, C, V, 1.0f, dlogits, FLOATX_CUDA_DTYPE, Dld, weight, FLOATX_CUDA_DTYPE, C,
                  0.0f, dinp + (size_t)n0 * C, FLOATX_CUDA_DTYPE, C, lt, stream);
        gemm_cuda(true, false, V, C, rows, 1.0f, dlogits, FLOATX_CUDA_DTYPE, Dld, inp_c, FLOATX_CUDA_DTYPE, C, 1.0f,
                  dweight, FLOATX_CUDA_DTYPE, C, lt, stream);
    }
}
