// Unit tests of the CPU stand-ins for cuBLAS, cuBLASLt and cuSOLVER (kernels/cuda_emu/cublas_emu.cpp,
// kernels/cuda_emu/cusolver_emu.cpp). Every expected value is computed by hand in the comments; no test compares
// the stand-in with another implementation.
//
// The recurring example (row i, column j; stored column-major):
//   A (2x3) = [1 2 3; 4 5 6],  B (3x2) = [7 8; 9 10; 11 12],
//   A B (2x2) = [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12] = [58 64; 139 154].
//
// Deliberate-break checks (done by hand on copies of the stand-ins, each compiled with this file):
//   - run_gemm passes g.ta as B's transpose (`g.tb ? CblasTrans` -> `g.ta ? CblasTrans`): fails
//     CublasGemm.AllFourTransposeCombinationsWithPadding and CublasLt.AllFourTransposeCombinations (cases NT, TN);
//   - run_gemm without its "+ bias" line: fails CublasLt.BiasEpilogueInPlace, Bf16BiasAddedBeforeRounding and
//     StridedBatchWithBiasBatchStride;
//   - run_gemm reads C also when beta == 0: fails CublasGemm.BetaZeroIgnoresNaNInC, CublasLt.Bf16InFp32OutBetaZeroNaN
//     and the two bf16 rounding tests (their C holds NaN or garbage);
//   - cusolver_emu.cpp's uplo_char with 'U' and 'L' swapped: fails CusolverSyevd.KnownEigenpairsUpperAndLower.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <gtest/gtest.h>
#include <gtest/gtest-death-test.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cuda_emu/libs_emu.h"

namespace {

const float NaN = std::numeric_limits<float>::quiet_NaN();

// The routines here are given host arrays (DevBuf below), which a GPU's could not reach: the operand check is off in
// this file, but in its own test (HostMemoryCheck).
const bool g_check_was_on = cuda_emu::set_host_memory_check(false);

// "Device" memory as cudaMalloc gives it (but not from it: the operand check is off), 256-byte aligned.
template <typename T>
struct DevBuf {
    T* p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count, T fill = T()) : n(count) {
        size_t bytes = (count * sizeof(T) + 255) / 256 * 256;
        p = static_cast<T*>(std::aligned_alloc(256, bytes ? bytes : 256));
        for (size_t i = 0; i < n; i++) p[i] = fill;
    }
    ~DevBuf() { std::free(p); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    T& operator[](size_t i) { return p[i]; }
};

using Rows = std::vector<std::vector<float>>;  // a matrix written row by row

// Stores M (or its transpose when `transposed`) column-major with leading dimension ld into buf; the padding rows
// (ld > rows) keep what buf held.
template <typename T, typename Conv>
void put(T* buf, const Rows& M, int ld, bool transposed, Conv conv) {
    const int r = (int)M.size(), c = (int)M[0].size();
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            if (transposed) buf[j + (size_t)i * ld] = conv(M[i][j]);  // stored matrix is M^T (c x r)
            else buf[i + (size_t)j * ld] = conv(M[i][j]);
        }
}
void put(float* buf, const Rows& M, int ld, bool transposed = false) {
    put(buf, M, ld, transposed, [](float v) { return v; });
}
void put(__nv_bfloat16* buf, const Rows& M, int ld, bool transposed = false) {
    put(buf, M, ld, transposed, [](float v) { return __float2bfloat16_rn(v); });
}

uint16_t bits(__nv_bfloat16 h) {
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}

const Rows A23 = {{1, 2, 3}, {4, 5, 6}};
const Rows B32 = {{7, 8}, {9, 10}, {11, 12}};
const Rows AB = {{58, 64}, {139, 154}};

struct Handles {
    cublasHandle_t h = nullptr;
    cublasLtHandle_t lt = nullptr;
    Handles() {
        EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
    }
    ~Handles() {
        cublasDestroy(h);
        cublasLtDestroy(lt);
    }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// cuBLAS
// ---------------------------------------------------------------------------------------------------------------

TEST(CublasHandle, CreateDestroyModesAndStatusStrings) {
    EXPECT_EQ(cublasCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
    Handles H;
    cublasPointerMode_t pm;
    ASSERT_EQ(cublasGetPointerMode(H.h, &pm), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(pm, CUBLAS_POINTER_MODE_HOST);  // documented default
    EXPECT_EQ(cublasSetPointerMode(H.h, CUBLAS_POINTER_MODE_DEVICE), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasGetPointerMode(H.h, &pm), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(pm, CUBLAS_POINTER_MODE_DEVICE);
    EXPECT_EQ(cublasGetPointerMode(H.h, nullptr), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSetMathMode(H.h, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSetMathMode(H.h, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSetMathMode(H.h, (cublasMath_t)5), CUBLAS_STATUS_INVALID_VALUE);
    cublasMath_t mm;
    ASSERT_EQ(cublasGetMathMode(H.h, &mm), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(mm, CUBLAS_TF32_TENSOR_OP_MATH);
    cudaStream_t s = reinterpret_cast<cudaStream_t>(0x1234), got = nullptr;
    EXPECT_EQ(cublasSetStream(H.h, s), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasGetStream(H.h, &got), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(got, s);
    EXPECT_EQ(cublasSetStream(nullptr, s), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
    EXPECT_NE(std::strlen(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)), 0u);
}

// C (2x2) = A (2x3) B (3x2), column-major, every leading dimension equal to the rows: C = [58 64; 139 154].
TEST(CublasGemm, ColumnMajorNN) {
    Handles H;
    float A[6], B[6], C[4];
    put(A, A23, 2);
    put(B, B32, 3);
    // column-major: A = {1, 4, 2, 5, 3, 6}, so a row-major reading would give a different product
    EXPECT_EQ(A[1], 4.0f);
    const float one = 1, zero = 0;
    ASSERT_EQ(cublasSgemm(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 58);
    EXPECT_EQ(C[1], 139);
    EXPECT_EQ(C[2], 64);
    EXPECT_EQ(C[3], 154);
}

// op(A) op(B) = A B = [58 64; 139 154] for every transpose combination: with op = T the stored operand is the
// transpose (A^T 3x2, B^T 2x3). Leading dimensions exceed the rows; the padding holds NaN (must not be read) in
// A and B and 777 in C (must not be written).
TEST(CublasGemm, AllFourTransposeCombinationsWithPadding) {
    Handles H;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            SCOPED_TRACE(testing::Message() << "transa " << ta << " transb " << tb);
            const int lda = (ta ? 3 : 2) + 2, ldb = (tb ? 2 : 3) + 1, ldc = 2 + 3;
            std::vector<float> A((size_t)lda * 3, NaN), B((size_t)ldb * 3, NaN), C((size_t)ldc * 2, 777.0f);
            put(A.data(), A23, lda, ta);
            put(B.data(), B32, ldb, tb);
            const float one = 1, zero = 0;
            ASSERT_EQ(cublasSgemm(H.h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, 2, 2, 3, &one,
                                  A.data(), lda, B.data(), ldb, &zero, C.data(), ldc),
                      CUBLAS_STATUS_SUCCESS);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) EXPECT_EQ(C[i + (size_t)j * ldc], AB[i][j]) << i << "," << j;
            for (int j = 0; j < 2; j++)
                for (int i = 2; i < ldc; i++) EXPECT_EQ(C[i + (size_t)j * ldc], 777.0f) << "padding " << i << "," << j;
        }
}

// C = 2 A B - 1 C with C = [1 2; 3 4]: [116-1 128-2; 278-3 308-4] = [115 126; 275 304]; the same with the scalars
// read through pointer mode DEVICE (device memory is host memory here).
TEST(CublasGemm, AlphaBetaHostAndDevicePointerMode) {
    Handles H;
    float A[6], B[6];
    put(A, A23, 2);
    put(B, B32, 3);
    for (int mode = 0; mode < 2; mode++) {
        ASSERT_EQ(cublasSetPointerMode(H.h, mode ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST),
                  CUBLAS_STATUS_SUCCESS);
        float C[4];
        put(C, {{1, 2}, {3, 4}}, 2);
        DevBuf<float> scal(2);
        scal[0] = 2;
        scal[1] = -1;
        ASSERT_EQ(cublasSgemm(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &scal[0], A, 2, B, 3, &scal[1], C, 2),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(C[0], 115);
        EXPECT_EQ(C[1], 275);
        EXPECT_EQ(C[2], 126);
        EXPECT_EQ(C[3], 304);
    }
}

// beta = 0: C "does not have to be a valid input": NaN in C must not reach the result. Also k = 0 with beta = 0
// gives zeros (A and B are not read: NULL).
TEST(CublasGemm, BetaZeroIgnoresNaNInC) {
    Handles H;
    float A[6], B[6], C[4] = {NaN, NaN, NaN, NaN};
    put(A, A23, 2);
    put(B, B32, 3);
    const float one = 1, zero = 0;
    ASSERT_EQ(cublasSgemm(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 58);
    EXPECT_EQ(C[3], 154);
    float D[4] = {NaN, NaN, NaN, NaN};
    ASSERT_EQ(cublasSgemm(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 0, &one, nullptr, 2, nullptr, 1, &zero, D, 2),
              CUBLAS_STATUS_SUCCESS);
    for (float v : D) EXPECT_EQ(v, 0.0f);
}

// Strided-batched GEMMs: matrix i of A, B, C at i * stride elements. Batch 0 is A B = [58 64; 139 154], batch 1
// is (2 A) B + 1 * C1 with C1 = [1 2; 3 4]: [117 130; 281 312]. The strides exceed the matrices: the gaps hold NaN
// in A and B (must not be read) and 777 in C (must not be written). fp32 (cublasSgemmStridedBatched) and bf16
// operands with fp32 C (cublasGemmStridedBatchedEx; every value is exact in bf16). batchCount 0 computes nothing,
// a negative one is CUBLAS_STATUS_INVALID_VALUE.
TEST(CublasGemm, StridedBatched) {
    Handles H;
    const long long sa = 8, sb = 7, sc = 5;
    std::vector<float> A(2 * sa, NaN), B(2 * sb, NaN), C(2 * sc, 777.0f);
    put(A.data(), A23, 2);
    put(A.data() + sa, {{2, 4, 6}, {8, 10, 12}}, 2);
    put(B.data(), B32, 3);
    put(B.data() + sb, B32, 3);
    put(C.data() + sc, {{1, 2}, {3, 4}}, 2);
    std::vector<__nv_bfloat16> a(A.size()), b(B.size());
    for (size_t i = 0; i < A.size(); i++) a[i] = __float2bfloat16_rn(A[i]);  // NaN stays NaN
    for (size_t i = 0; i < B.size(); i++) b[i] = __float2bfloat16_rn(B[i]);
    const float one = 1;
    const auto N = CUBLAS_OP_N;
    for (int i = 0; i < 4; i++) C[i] = 0;  // beta = 1: batch 0 adds its C, 0
    std::vector<float> C2 = C;
    ASSERT_EQ(cublasSgemmStridedBatched(H.h, N, N, 2, 2, 3, &one, A.data(), 2, sa, B.data(), 3, sb, &one, C.data(), 2,
                                        sc, 2),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasGemmStridedBatchedEx(H.h, N, N, 2, 2, 3, &one, a.data(), CUDA_R_16BF, 2, sa, b.data(),
                                         CUDA_R_16BF, 3, sb, &one, C2.data(), CUDA_R_32F, 2, sc, 2, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    const float want[2][4] = {{58, 139, 64, 154}, {117, 281, 130, 312}};  // column-major
    for (const std::vector<float>* c : {&C, &C2})
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 4; i++) EXPECT_EQ((*c)[k * sc + i], want[k][i]) << "batch " << k << " element " << i;
            if (k == 0) EXPECT_EQ((*c)[4], 777.0f) << "the gap between the batches is not written";
        }
    EXPECT_EQ(cublasSgemmStridedBatched(H.h, N, N, 2, 2, 3, &one, A.data(), 2, sa, B.data(), 3, sb, &one, C.data(), 2,
                                        sc, 0),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 58);
    EXPECT_EQ(cublasSgemmStridedBatched(H.h, N, N, 2, 2, 3, &one, A.data(), 2, sa, B.data(), 3, sb, &one, C.data(), 2,
                                        sc, -1),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasGemmStridedBatchedEx(H.h, N, N, 2, 2, 3, &one, a.data(), CUDA_R_16BF, 2, sa, b.data(),
                                         CUDA_R_32F, 3, sb, &one, C2.data(), CUDA_R_32F, 2, sc, 2, CUBLAS_COMPUTE_32F,
                                         CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);  // A and B of different types
}

// The documented CUBLAS_STATUS_INVALID_VALUE cases of cublas<t>gemm / cublasGemmEx, and NOT_INITIALIZED.
TEST(CublasGemm, InvalidArguments) {
    Handles H;
    float A[64] = {}, B[64] = {}, C[64] = {};
    const float one = 1;
    const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    // m = 4, n = 3, k = 2
    EXPECT_EQ(cublasSgemm(H.h, N, N, 4, 3, 2, &one, A, 4, B, 2, &one, C, 4), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSgemm(H.h, N, N, 4, 3, 2, &one, A, 3, B, 2, &one, C, 4), CUBLAS_STATUS_INVALID_VALUE);  // lda<m
    EXPECT_EQ(cublasSgemm(H.h, T, N, 4, 3, 2, &one, A, 2, B, 2, &one, C, 4), CUBLAS_STATUS_SUCCESS);  // lda>=k
    EXPECT_EQ(cublasSgemm(H.h, T, N, 4, 3, 2, &one, A, 1, B, 2, &one, C, 4), CUBLAS_STATUS_INVALID_VALUE);  // lda<k
    EXPECT_EQ(cublasSgemm(H.h, N, N, 4, 3, 2, &one, A, 4, B, 1, &one, C, 4), CUBLAS_STATUS_INVALID_VALUE);  // ldb<k
    EXPECT_EQ(cublasSgemm(H.h, N, T, 4, 3, 2, &one, A, 4, B, 3, &one, C, 4), CUBLAS_STATUS_SUCCESS);  // ldb>=n
    EXPECT_EQ(cublasSgemm(H.h, N, T, 4, 3, 2, &one, A, 4, B, 2, &one, C, 4), CUBLAS_STATUS_INVALID_VALUE);  // ldb<n
    EXPECT_EQ(cublasSgemm(H.h, N, N, 4, 3, 2, &one, A, 4, B, 2, &one, C, 3), CUBLAS_STATUS_INVALID_VALUE);  // ldc<m
    EXPECT_EQ(cublasSgemm(H.h, N, N, 0, 3, 2, &one, A, 0, B, 2, &one, C, 1), CUBLAS_STATUS_INVALID_VALUE);  // lda<1
    EXPECT_EQ(cublasSgemm(H.h, N, N, -1, 3, 2, &one, A, 4, B, 2, &one, C, 4), CUBLAS_STATUS_INVALID_VALUE);
    // CUBLAS_OP_CONJG: "not supported in the current release"; transa must be N, T or C
    EXPECT_EQ(cublasSgemm(H.h, CUBLAS_OP_CONJG, N, 4, 3, 2, &one, A, 4, B, 2, &one, C, 4),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSgemm(H.h, N, N, 4, 3, 2, nullptr, A, 4, B, 2, &one, C, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSgemm(H.h, N, N, 4, 3, 2, &one, A, 4, B, 2, nullptr, C, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSgemm(nullptr, N, N, 4, 3, 2, &one, A, 4, B, 2, &one, C, 4), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasGemmEx(H.h, N, N, 4, 3, 2, &one, A, CUDA_R_32F, 3, B, CUDA_R_32F, 2, &one, C, CUDA_R_32F, 4,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_INVALID_VALUE);
}

// bf16 output is rounded to nearest, ties to even, once from the fp32 result. D (4x1) = A (4x2) [1; 1]:
//   row 0: 1 + 2^-8          halfway between bf16 1 and 1 + 2^-7      -> 1 (even mantissa)        0x3F80
//   row 1: 1 + 3*2^-8        halfway between 1 + 2^-7 and 1 + 2^-6    -> 1 + 2^-6 (even)          0x3F82
//   row 2: 1 + 2^-8 + 2^-12  above halfway                            -> 1 + 2^-7                 0x3F81
//   row 3: -(1 + 2^-8)       halfway                                  -> -1                       0xBF80
// (truncation would give 0x3F80 in row 2; round-half-up 0x3F81 in row 0). With fp32 output the sums are exact.
TEST(CublasGemmEx, Bf16RoundToNearestEvenAndFp32Output) {
    Handles H;
    const float e8 = std::ldexp(1.0f, -8), e12 = std::ldexp(1.0f, -12);
    const Rows A = {{1, e8}, {1, 3 * e8}, {1, e8 + e12}, {-1, -e8}};
    __nv_bfloat16 a[8], b[2], c[4];
    put(a, A, 4);
    put(b, {{1}, {1}}, 2);
    const float one = 1, zero = 0;
    ASSERT_EQ(cublasGemmEx(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 1, 2, &one, a, CUDA_R_16BF, 4, b, CUDA_R_16BF, 2, &zero,
                           c, CUDA_R_16BF, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(bits(c[0]), 0x3F80);
    EXPECT_EQ(bits(c[1]), 0x3F82);
    EXPECT_EQ(bits(c[2]), 0x3F81);
    EXPECT_EQ(bits(c[3]), 0xBF80);
    float f[4];
    ASSERT_EQ(cublasGemmEx(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 1, 2, &one, a, CUDA_R_16BF, 4, b, CUDA_R_16BF, 2, &zero,
                           f, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(f[0], 1 + e8);
    EXPECT_EQ(f[1], 1 + 3 * e8);
    EXPECT_EQ(f[2], 1 + e8 + e12);
    EXPECT_EQ(f[3], -1 - e8);
}

// fp32 with CUBLAS_COMPUTE_32F_FAST_TF32 is accepted and computed in fp32: (1 + 2^-20) * 1 keeps its last bit
// (TF32 keeps 10 mantissa bits). The transposes of GemmEx with bf16 and beta != 0: op(A) = A^T stored (3x2).
TEST(CublasGemmEx, Fp32FastTf32AndBf16TransposeBeta) {
    Handles H;
    const float x = 1.0f + std::ldexp(1.0f, -20), one = 1, zero = 0;
    float y = 0;
    ASSERT_EQ(cublasGemmEx(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, &x, CUDA_R_32F, 1, &one, CUDA_R_32F, 1, &zero,
                           &y, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT_TENSOR_OP),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(y, x);
    // D = A B + 1 * [1 2; 3 4] = [59 66; 142 158], all exact in bf16 (8 significant bits)
    __nv_bfloat16 a[6], b[6], c[4];
    put(a, A23, 3, true);
    put(b, B32, 2, true);
    put(c, {{1, 2}, {3, 4}}, 2);
    ASSERT_EQ(cublasGemmEx(H.h, CUBLAS_OP_T, CUBLAS_OP_T, 2, 2, 3, &one, a, CUDA_R_16BF, 3, b, CUDA_R_16BF, 2, &one, c,
                           CUDA_R_16BF, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(__bfloat162float(c[0]), 59);
    EXPECT_EQ(__bfloat162float(c[1]), 142);
    EXPECT_EQ(__bfloat162float(c[2]), 66);
    EXPECT_EQ(__bfloat162float(c[3]), 158);
}

// Type combinations outside the supported table: CUBLAS_STATUS_NOT_SUPPORTED.
TEST(CublasGemmEx, UnsupportedTypesAndComputeType) {
    Handles H;
    float f[4] = {};
    __nv_bfloat16 h[4] = {};
    const float one = 1;
    const auto N = CUBLAS_OP_N;
    EXPECT_EQ(cublasGemmEx(H.h, N, N, 2, 2, 2, &one, f, CUDA_R_32F, 2, h, CUDA_R_16BF, 2, &one, f, CUDA_R_32F, 2,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);  // A and B of different types
    EXPECT_EQ(cublasGemmEx(H.h, N, N, 2, 2, 2, &one, f, CUDA_R_32F, 2, f, CUDA_R_32F, 2, &one, h, CUDA_R_16BF, 2,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);  // fp32 inputs, bf16 output
    EXPECT_EQ(cublasGemmEx(H.h, N, N, 2, 2, 2, &one, f, CUDA_R_32F, 2, f, CUDA_R_32F, 2, &one, f, CUDA_R_32F, 2,
                           CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);
}

// SYRK with A (2x3) = [1 2 3; 4 5 6]:
//   trans N, n = 2, k = 3: C = A A^T = [14 32; 32 77];
//   trans T, n = 3, k = 2: C = A^T A = [17 22 27; 22 29 36; 27 36 45].
// Only the `uplo` triangle is written (the other keeps 555); beta = 0 ignores the NaN there.
TEST(CublasSyrk, UpperNoTransAndLowerTransWithBetaZero) {
    Handles H;
    const float one = 1, zero = 0;
    float A[3 * 3];
    std::fill(A, A + 9, NaN);
    put(A, A23, 3);  // lda = 3 > n = 2: row 2 is NaN padding
    float C[4] = {NaN, 555, NaN, NaN};  // column-major 2x2: C(1,0) = 555 is the lower triangle
    ASSERT_EQ(cublasSsyrk(H.h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, 2, 3, &one, A, 3, &zero, C, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 14);
    EXPECT_EQ(C[2], 32);
    EXPECT_EQ(C[3], 77);
    EXPECT_EQ(C[1], 555);
    // trans T: stored A is k x n = 2x3, lda 2; lower triangle of the 3x3 result
    float A2[6];
    put(A2, A23, 2);
    float D[9];
    std::fill(D, D + 9, NaN);
    D[3] = D[6] = D[7] = 555;  // upper triangle (0,1), (0,2), (1,2)
    ASSERT_EQ(cublasSsyrk(H.h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, 3, 2, &one, A2, 2, &zero, D, 3),
              CUBLAS_STATUS_SUCCESS);
    const float want[3][3] = {{17, 22, 27}, {22, 29, 36}, {27, 36, 45}};
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 3; i++) EXPECT_EQ(D[i + j * 3], i >= j ? want[i][j] : 555.0f) << i << "," << j;
    // beta = 2 keeps and doubles the old triangle: 2 * 14 + 14 = 42
    C[0] = 14;
    C[2] = 32;
    C[3] = 77;
    const float two = 2;
    ASSERT_EQ(cublasSsyrk(H.h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, 2, 3, &one, A, 3, &two, C, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 42);
    EXPECT_EQ(C[2], 96);
    EXPECT_EQ(C[3], 231);
}

// DSYRK computes in fp64: A (2x2) = [1 2^-20; 1 0], trans N, upper: C = A A^T = [1 + 2^-40, 1; 1, 1], whose
// C(0,0) an fp32 product would round to 1. Then trans T, lower, with A^T A = [2, 2^-20; 2^-20, 2^-40].
TEST(CublasSyrk, DoublePrecision) {
    Handles H;
    const double one = 1, zero = 0, e = std::ldexp(1.0, -20);
    const double A[4] = {1, 1, e, 0};  // column-major
    double C[4] = {NaN, 555, NaN, NaN};
    ASSERT_EQ(cublasDsyrk(H.h, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, 2, 2, &one, A, 2, &zero, C, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 1 + e * e);
    EXPECT_EQ(C[2], 1);
    EXPECT_EQ(C[3], 1);
    EXPECT_EQ(C[1], 555);  // the lower triangle untouched
    double D[4] = {NaN, NaN, 555, NaN};
    ASSERT_EQ(cublasDsyrk(H.h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, 2, 2, &one, A, 2, &zero, D, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(D[0], 2);
    EXPECT_EQ(D[1], e);
    EXPECT_EQ(D[3], e * e);
    EXPECT_EQ(D[2], 555);
    EXPECT_EQ(cublasDsyrk(H.h, CUBLAS_FILL_MODE_FULL, CUBLAS_OP_N, 2, 2, &one, A, 2, &zero, C, 2),
              CUBLAS_STATUS_INVALID_VALUE);
}

// Triangular solves by hand: U = [[2, 1], [0, 2]] (column-major {2, 0, 1, 2}); right side: X U = B with
// B = [2 5] gives X = [1 2]; left side, lower L = Uᵀ = [[2, 0], [1, 2]]: L x = [2 5]ᵀ gives x = [1 2]ᵀ, and with
// trans T on the stored upper U (Uᵀ x = b) the same; alpha = 2 scales B first. The strict lower part of a stored
// upper triangle (NaN here) is never read.
TEST(CublasTrsm, RightUpperLeftLowerAndTransposedWithAlpha) {
    Handles H;
    const float one = 1, two = 2;
    const float U[4] = {2, NaN, 1, 2};
    float B[2] = {2, 5};  // 1 x 2, ldb 1
    ASSERT_EQ(cublasStrsm(H.h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 1, 2,
                          &one, U, 2, B, 1),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(B[0], 1);
    EXPECT_EQ(B[1], 2);
    const float L[4] = {2, 1, NaN, 2};
    float b[2] = {2, 5};
    ASSERT_EQ(cublasStrsm(H.h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 2, 1,
                          &one, L, 2, b, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(b[0], 1);
    EXPECT_EQ(b[1], 2);
    float c[2] = {1, 2.5f};  // alpha 2: Uᵀ x = [2 5]ᵀ
    ASSERT_EQ(cublasStrsm(H.h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, 2, 1,
                          &two, U, 2, c, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(c[0], 1);
    EXPECT_EQ(c[1], 2);
    // unit diagonal: the stored diagonal (2) is not read; [1 1; 0 1]: X U = [1 3] gives X = [1 2]
    float d[2] = {1, 3};
    ASSERT_EQ(cublasStrsm(H.h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT, 1, 2, &one,
                          U, 2, d, 1),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(d[0], 1);
    EXPECT_EQ(d[1], 2);
}

// trmm by hand with the same U: U I = U out of place (B kept), [1 2] U = [2 5] in place (C == B), alpha 2 with
// trans T: 2 Uᵀ [1 1]ᵀ = [4 6]ᵀ; ldc < m is INVALID_VALUE.
TEST(CublasTrmm, OutOfPlaceInPlaceTransposedAndLdc) {
    Handles H;
    const float one = 1, two = 2;
    const float U[4] = {2, NaN, 1, 2};
    const float I2[4] = {1, 0, 0, 1};
    float C[4] = {NaN, NaN, NaN, NaN};
    ASSERT_EQ(cublasStrmm(H.h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 2, 2, &one,
                          U, 2, I2, 2, C, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 2);
    EXPECT_EQ(C[1], 0);
    EXPECT_EQ(C[2], 1);
    EXPECT_EQ(C[3], 2);
    EXPECT_EQ(I2[0], 1);
    float B[2] = {1, 2};
    ASSERT_EQ(cublasStrmm(H.h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 1, 2, &one,
                          U, 2, B, 1, B, 1),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(B[0], 2);
    EXPECT_EQ(B[1], 5);
    float x[2] = {1, 1}, y[2] = {0, 0};
    ASSERT_EQ(cublasStrmm(H.h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, 2, 1, &two,
                          U, 2, x, 2, y, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(y[0], 4);
    EXPECT_EQ(y[1], 6);
    EXPECT_EQ(cublasStrmm(H.h, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, 2, 1, &one,
                          U, 2, x, 2, y, 1),
              CUBLAS_STATUS_INVALID_VALUE);
}

TEST(CublasTrsm, InvalidArguments) {
    Handles H;
    const float one = 1;
    float A[16] = {1, 0, 0, 1}, B[16] = {};
    const auto R = CUBLAS_SIDE_RIGHT, L = CUBLAS_SIDE_LEFT;
    const auto U = CUBLAS_FILL_MODE_UPPER;
    const auto N = CUBLAS_OP_N;
    const auto D = CUBLAS_DIAG_NON_UNIT;
    EXPECT_EQ(cublasStrsm(H.h, R, U, N, D, 3, 2, &one, A, 2, B, 3), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasStrsm(H.h, R, U, N, D, 3, 2, &one, A, 1, B, 3), CUBLAS_STATUS_INVALID_VALUE);  // lda < n (right)
    EXPECT_EQ(cublasStrsm(H.h, L, U, N, D, 3, 2, &one, A, 2, B, 3), CUBLAS_STATUS_INVALID_VALUE);  // lda < m (left)
    EXPECT_EQ(cublasStrsm(H.h, R, U, N, D, 3, 2, &one, A, 2, B, 2), CUBLAS_STATUS_INVALID_VALUE);  // ldb < m
    EXPECT_EQ(cublasStrsm(H.h, R, U, N, D, -1, 2, &one, A, 2, B, 3), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasStrsm(H.h, R, CUBLAS_FILL_MODE_FULL, N, D, 3, 2, &one, A, 2, B, 3), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasStrsm(H.h, R, U, N, D, 3, 2, nullptr, A, 2, B, 3), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasStrsm(nullptr, R, U, N, D, 3, 2, &one, A, 2, B, 3), CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST(CublasSyrk, InvalidArguments) {
    Handles H;
    float A[16] = {}, C[16] = {};
    const float one = 1;
    const auto U = CUBLAS_FILL_MODE_UPPER;
    EXPECT_EQ(cublasSsyrk(H.h, CUBLAS_FILL_MODE_FULL, CUBLAS_OP_N, 2, 3, &one, A, 2, &one, C, 2),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSsyrk(H.h, U, CUBLAS_OP_N, 2, 3, &one, A, 1, &one, C, 2), CUBLAS_STATUS_INVALID_VALUE);  // lda<n
    EXPECT_EQ(cublasSsyrk(H.h, U, CUBLAS_OP_T, 3, 2, &one, A, 1, &one, C, 3), CUBLAS_STATUS_INVALID_VALUE);  // lda<k
    EXPECT_EQ(cublasSsyrk(H.h, U, CUBLAS_OP_T, 3, 2, &one, A, 2, &one, C, 3), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasSsyrk(H.h, U, CUBLAS_OP_N, 2, 3, &one, A, 2, &one, C, 1), CUBLAS_STATUS_INVALID_VALUE);  // ldc<n
    EXPECT_EQ(cublasSsyrk(H.h, U, CUBLAS_OP_N, -1, 3, &one, A, 2, &one, C, 2), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSsyrk(H.h, U, CUBLAS_OP_N, 2, 3, &one, A, 2, nullptr, C, 2), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSsyrk(nullptr, U, CUBLAS_OP_N, 2, 3, &one, A, 2, &one, C, 2), CUBLAS_STATUS_NOT_INITIALIZED);
}

// ---------------------------------------------------------------------------------------------------------------
// cuBLASLt
// ---------------------------------------------------------------------------------------------------------------

namespace {

// One cuBLASLt GEMM set up the way the project does: descriptor, layouts, preference, heuristic.
struct LtGemm {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res{};
    int found = -1;

    LtGemm(cublasLtHandle_t h, cublasOperation_t ta, cublasOperation_t tb, cudaDataType at, uint64_t ar, uint64_t ac,
           int64_t lda, cudaDataType bt, uint64_t br, uint64_t bc, int64_t ldb, cudaDataType ct, uint64_t cr,
           uint64_t cc, int64_t ldc)
        : lt(h) {
        EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, at, ar, ac, lda), CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, bt, br, bc, ldb), CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatrixLayoutCreate(&c, ct, cr, cc, ldc), CUBLAS_STATUS_SUCCESS);
        d = c;
        EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    }
    ~LtGemm() {
        cublasLtMatrixLayoutDestroy(a);
        cublasLtMatrixLayoutDestroy(b);
        if (d != c) cublasLtMatrixLayoutDestroy(d);
        cublasLtMatrixLayoutDestroy(c);
        cublasLtMatmulDescDestroy(desc);
        cublasLtMatmulPreferenceDestroy(pref);
    }
    void set_bias(const void* bias, cudaDataType type) {
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
        int32_t t = type;
        EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                  CUBLAS_STATUS_SUCCESS);
    }
    void set_pref(cublasLtMatmulPreferenceAttributes_t attr, uint32_t v) {
        EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &v, sizeof v), CUBLAS_STATUS_SUCCESS);
    }
    void set_max_workspace(uint64_t bytes) {
        EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes,
                                                       sizeof bytes),
                  CUBLAS_STATUS_SUCCESS);
    }
    cublasStatus_t heuristic() {
        found = -1;
        return cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, d, pref, 1, &res, &found);
    }
    cublasStatus_t run(float alpha, const void* A, const void* B, float beta, const void* C, void* D,
                       void* ws = nullptr, size_t ws_bytes = 0) {
        return cublasLtMatmul(lt, desc, &alpha, A, a, B, b, &beta, C, c, D, d, &res.algo, ws, ws_bytes, nullptr);
    }
};

}  // namespace

// The four transpose combinations through cuBLASLt, with ld > rows everywhere (NaN padding in A, B; 777 in D's).
TEST(CublasLt, AllFourTransposeCombinations) {
    Handles H;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            SCOPED_TRACE(testing::Message() << "transa " << ta << " transb " << tb);
            const int ar = ta ? 3 : 2, ac = ta ? 2 : 3, br = tb ? 2 : 3, bc = tb ? 3 : 2;
            const int lda = ar + 1, ldb = br + 2, ldc = 4;
            DevBuf<float> A((size_t)lda * ac, NaN), B((size_t)ldb * bc, NaN), C((size_t)ldc * 2, 777.0f);
            put(A.p, A23, lda, ta);
            put(B.p, B32, ldb, tb);
            LtGemm g(H.lt, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, CUDA_R_32F, ar, ac, lda,
                     CUDA_R_32F, br, bc, ldb, CUDA_R_32F, 2, 2, ldc);
            ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
            ASSERT_EQ(g.found, 1);
            ASSERT_EQ(g.run(1, A.p, B.p, 0, C.p, C.p), CUBLAS_STATUS_SUCCESS);
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < 2; j++) EXPECT_EQ(C[i + (size_t)j * ldc], AB[i][j]) << i << "," << j;
            EXPECT_EQ(C[2], 777.0f);
            EXPECT_EQ(C[3], 777.0f);
            EXPECT_EQ(C[6], 777.0f);
        }
}

// BIAS epilogue in place (C == D), beta = 1: D = A B + C + bias with one bias value per ROW of D:
// [58+1+10 64+2+10; 139+3+20 154+4+20] = [69 76; 162 178]. (A per-column bias would give 86 in D(0,1).)
TEST(CublasLt, BiasEpilogueInPlace) {
    Handles H;
    DevBuf<float> A(6), B(6), C(4), bias(2);
    put(A.p, A23, 2);
    put(B.p, B32, 3);
    put(C.p, {{1, 2}, {3, 4}}, 2);
    bias[0] = 10;
    bias[1] = 20;
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    g.set_bias(bias.p, CUDA_R_32F);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.run(1, A.p, B.p, 1, C.p, C.p), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(C[0], 69);
    EXPECT_EQ(C[1], 162);
    EXPECT_EQ(C[2], 76);
    EXPECT_EQ(C[3], 178);
}

// bf16 in/out with a bf16 bias: the bias is added in fp32 BEFORE the single rounding. D (2x1) = A (2x2) [1; 1]
// with both rows of A = [1, 2^-8], so A B = 1 + 2^-8 (a tie) in both rows; bias = [2^-12, -2^-12]:
//   row 0: 1 + 2^-8 + 2^-12 -> 1 + 2^-7 (0x3F81); rounding before the bias would give 1 + 2^-12 -> 1 (0x3F80)
//   row 1: 1 + 2^-8 - 2^-12 -> 1 (0x3F80)
// beta = 0 with NaN in C (= D): not read.
TEST(CublasLt, Bf16BiasAddedBeforeRounding) {
    Handles H;
    const float e8 = std::ldexp(1.0f, -8), e12 = std::ldexp(1.0f, -12);
    DevBuf<__nv_bfloat16> A(4), B(2), D(2, __float2bfloat16_rn(NaN)), bias(2);
    put(A.p, {{1, e8}, {1, e8}}, 2);
    put(B.p, {{1}, {1}}, 2);
    bias[0] = __float2bfloat16_rn(e12);
    bias[1] = __float2bfloat16_rn(-e12);
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_16BF, 2, 2, 2, CUDA_R_16BF, 2, 1, 2, CUDA_R_16BF, 2, 1, 2);
    g.set_bias(bias.p, CUDA_R_16BF);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(bits(D[0]), 0x3F81);
    EXPECT_EQ(bits(D[1]), 0x3F80);
}

// bf16 A, B with fp32 C = D, beta = 0 and D full of NaN: D = A B exactly, no NaN.
TEST(CublasLt, Bf16InFp32OutBetaZeroNaN) {
    Handles H;
    DevBuf<__nv_bfloat16> A(6), B(6);
    DevBuf<float> D(4, NaN);
    put(A.p, A23, 2);
    put(B.p, B32, 3);
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_16BF, 2, 3, 2, CUDA_R_16BF, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(D[0], 58);
    EXPECT_EQ(D[1], 139);
    EXPECT_EQ(D[2], 64);
    EXPECT_EQ(D[3], 154);
}

// Strided batch of 2 with a bias batch stride: batch 1 has A2 = 2 A and bias2 = [1, 2]:
//   D1 = A B + [10; 20] = [68 74; 159 174],   D2 = 2 A B + [1; 2] = [117 129; 280 310].
TEST(CublasLt, StridedBatchWithBiasBatchStride) {
    Handles H;
    DevBuf<float> A(16, NaN), B(12), D(10, 777.0f), bias(4);
    put(A.p, A23, 2);                                              // batch 0 at offset 0
    put(A.p + 8, {{2, 4, 6}, {8, 10, 12}}, 2);                     // batch 1 at offset 8 (stride 8 > 6)
    put(B.p, B32, 3);
    put(B.p + 6, B32, 3);
    bias[0] = 10;
    bias[1] = 20;
    bias[2] = 1;
    bias[3] = 2;
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    int32_t two = 2;
    int64_t sa = 8, sb = 6, sd = 6, sbias = 2;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.c, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof two),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.b, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.c, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sd, sizeof sd),
              CUBLAS_STATUS_SUCCESS);
    g.set_bias(bias.p, CUDA_R_32F);
    ASSERT_EQ(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &sbias, sizeof sbias),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p), CUBLAS_STATUS_SUCCESS);
    const float want[10] = {68, 159, 74, 174, 777, 777, 117, 280, 129, 310};
    for (int i = 0; i < 10; i++) EXPECT_EQ(D[i], want[i]) << i;
}

// The forced heuristic failure (libs_emu.h): function and environment variable, and the call counter.
TEST(CublasLt, HeuristicForcedNotSupported) {
    Handles H;
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    const long calls0 = cuda_emu_cublaslt_heuristic_calls();
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(g.found, 1);
    EXPECT_EQ(g.res.state, CUBLAS_STATUS_SUCCESS);
    cuda_emu_cublaslt_fail_heuristic(true);
    EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(g.found, 0);
    cuda_emu_cublaslt_fail_heuristic(false);
    EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    setenv("PRAC_EMU_CUBLASLT_NO_ALGO", "1", 1);
    EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(g.found, 0);
    setenv("PRAC_EMU_CUBLASLT_NO_ALGO", "0", 1);
    EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    unsetenv("PRAC_EMU_CUBLASLT_NO_ALGO");
    EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cuda_emu_cublaslt_heuristic_calls() - calls0, 6);
    // "CUBLAS_STATUS_INVALID_VALUE if requestedAlgoCount is less or equal to zero"
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(H.lt, g.desc, g.a, g.b, g.c, g.d, g.pref, 0, &g.res, &g.found),
              CUBLAS_STATUS_INVALID_VALUE);
}

// Workspace: the algorithm's workspaceSize never exceeds MAX_WORKSPACE_BYTES (default 0: none); a matmul whose
// algorithm needs workspace fails with INVALID_VALUE for a NULL or smaller workspace, and overwrites it otherwise.
TEST(CublasLt, HeuristicWorkspaceLimitAndMatmulWorkspaceChecks) {
    Handles H;
    DevBuf<float> A(6), B(6), D(4);
    put(A.p, A23, 2);
    put(B.p, B32, 3);
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);  // default preference
    EXPECT_EQ(g.res.workspaceSize, 0u);
    EXPECT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p, nullptr, 0), CUBLAS_STATUS_SUCCESS);
    for (uint64_t max : {1000ull, 4096ull, 1ull << 20}) {
        g.set_max_workspace(max);
        ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
        EXPECT_LE(g.res.workspaceSize, max);
        EXPECT_GT(g.res.workspaceSize, 0u);
    }
    const size_t need = g.res.workspaceSize;
    DevBuf<unsigned char> ws(need + 256, 0);
    EXPECT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p, nullptr, need), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p, ws.p, need - 1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p, ws.p + 4, need + 4), CUBLAS_STATUS_INVALID_VALUE);  // not 256-aligned
    D[0] = 0;
    ASSERT_EQ(g.run(1, A.p, B.p, 0, D.p, D.p, ws.p, need + 256), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(D[0], 58);
    EXPECT_NE(ws[0], 0);  // used as scratch
    // reduction scheme mask without a workspace scheme: no workspace even though some is allowed
    g.set_pref(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, CUBLASLT_REDUCTION_SCHEME_NONE);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(g.res.workspaceSize, 0u);
}

// MIN_ALIGNMENT_*_BYTES: a promise below one element (2 bytes for fp32) or not a power of two leaves no algorithm;
// 2 bytes is fine for bf16. An algorithm chosen for 256-byte-aligned A run on a 4-byte-aligned A fails (a GPU
// kernel would fault on the misaligned address); chosen for 4 bytes, the same call works.
TEST(CublasLt, AlignmentPreferences) {
    Handles H;
    {
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
        g.set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 2);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
        EXPECT_EQ(g.found, 0);
        g.set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 12);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
        g.set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    }
    {
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_16BF, 2, 3, 2, CUDA_R_16BF, 3, 2, 3, CUDA_R_16BF, 2, 2, 2);
        g.set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 2);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    }
    DevBuf<float> A(7), B(6), D(4);
    put(A.p + 1, A23, 2);  // A at a 4-byte-aligned address
    put(B.p, B32, 3);
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);  // default: 256
    EXPECT_EQ(g.run(1, A.p + 1, B.p, 0, D.p, D.p), CUBLAS_STATUS_EXECUTION_FAILED);
    g.set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.run(1, A.p + 1, B.p, 0, D.p, D.p), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(D[3], 154);
}

// Attribute buffers: "INVALID_VALUE if buf is NULL or sizeInBytes doesn't match size of internal storage"; the
// documented defaults read back.
TEST(CublasLt, AttributeSizeChecksAndDefaults) {
    cublasLtMatmulDesc_t desc;
    ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    int64_t wide = CUBLAS_OP_T;
    int32_t op = CUBLAS_OP_T;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, sizeof op),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, (cublasLtMatmulDescAttributes_t)9, &op, sizeof op),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op), CUBLAS_STATUS_SUCCESS);
    int32_t got = -1;
    size_t written = 0;
    EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &got, sizeof got, &written),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(got, CUBLAS_OP_T);
    EXPECT_EQ(written, 4u);
    EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &written),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(written, sizeof(void*));
    EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, nullptr),
              CUBLAS_STATUS_INVALID_VALUE);
    uint32_t epi = 0;
    EXPECT_EQ(cublasLtMatmulDescGetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(epi, (uint32_t)CUBLASLT_EPILOGUE_DEFAULT);
    cublasLtMatmulDescDestroy(desc);

    cublasLtMatmulPreference_t pref;
    ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    uint32_t al = 0;
    uint64_t ws = 1;
    EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al,
                                                   nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(al, 256u);
    EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws,
                                                   nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(ws, 0u);
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &al, sizeof al),
              CUBLAS_STATUS_INVALID_VALUE);  // uint64_t attribute
    cublasLtMatmulPreferenceDestroy(pref);

    cublasLtMatrixLayout_t l;
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 5, 7, 8), CUBLAS_STATUS_SUCCESS);
    uint64_t rows = 0;
    int32_t order = -1, batch = 0;
    EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows, nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(rows, 5u);
    EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order, nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(order, CUBLASLT_ORDER_COL);
    EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch, nullptr),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(batch, 1);
    cublasLtMatrixLayoutDestroy(l);
}

// Inconsistent or unsupported configurations: the heuristic finds no algorithm (NOT_SUPPORTED); cublasLtMatmul
// (implicit heuristic: algo == NULL) returns INVALID_VALUE for parameters in conflict and NOT_SUPPORTED for an
// unsupported configuration.
TEST(CublasLt, InvalidAndUnsupportedConfigurations) {
    Handles H;
    DevBuf<float> A(16), B(16), C(16), D(16);
    const float one = 1, zero = 0;
    auto matmul = [&](LtGemm& g, const void* c, void* d) {
        return cublasLtMatmul(H.lt, g.desc, &one, A.p, g.a, B.p, g.b, &zero, c, g.c, d, g.d, nullptr, nullptr, 0,
                              nullptr);
    };
    {  // k disagrees: op(A) 2x3, op(B) 2x2
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 2, 2, 2, CUDA_R_32F, 2, 2, 2);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
        EXPECT_EQ(g.found, 0);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_INVALID_VALUE);
    }
    {  // ld < rows
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 1, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_INVALID_VALUE);
    }
    {  // in place (C == D) with different leading dimensions in Cdesc and Ddesc
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
        ASSERT_EQ(cublasLtMatrixLayoutCreate(&g.d, CUDA_R_32F, 2, 2, 3), CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_INVALID_VALUE);
        EXPECT_EQ(matmul(g, C.p, D.p), CUBLAS_STATUS_SUCCESS);  // out of place, ldc 2, ldd 3
    }
    {  // A and B of different types
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_16BF, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_NOT_SUPPORTED);
    }
    {  // row-major order
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 3, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
        int32_t row = CUBLASLT_ORDER_ROW;
        ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(g.a, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof row),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_NOT_SUPPORTED);
    }
    {  // BIAS epilogue without a bias pointer; fp8-style scale pointer on an fp32 matmul
        LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
        g.set_bias(nullptr, CUDA_R_32F);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_INVALID_VALUE);
        g.set_bias(A.p, CUDA_R_32F);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_SUCCESS);
        const void* scale = &one;
        ASSERT_EQ(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale),
                  CUBLAS_STATUS_SUCCESS);
        EXPECT_EQ(matmul(g, C.p, C.p), CUBLAS_STATUS_INVALID_VALUE);
    }
    LtGemm g(H.lt, CUBLAS_OP_N, CUBLAS_OP_N, CUDA_R_32F, 2, 3, 2, CUDA_R_32F, 3, 2, 3, CUDA_R_32F, 2, 2, 2);
    EXPECT_EQ(cublasLtMatmul(nullptr, g.desc, &one, A.p, g.a, B.p, g.b, &zero, C.p, g.c, C.p, g.c, nullptr, nullptr, 0,
                             nullptr),
              CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cublasLtMatmul(H.lt, g.desc, nullptr, A.p, g.a, B.p, g.b, &zero, C.p, g.c, C.p, g.c, nullptr, nullptr, 0,
                             nullptr),
              CUBLAS_STATUS_INVALID_VALUE);
    cublasLtMatmulAlgo_t bogus{};
    EXPECT_EQ(cublasLtMatmul(H.lt, g.desc, &one, A.p, g.a, B.p, g.b, &zero, C.p, g.c, C.p, g.c, &bogus, nullptr, 0,
                             nullptr),
              CUBLAS_STATUS_INVALID_VALUE);
}

// ---------------------------------------------------------------------------------------------------------------
// cuSOLVER
// ---------------------------------------------------------------------------------------------------------------

namespace {

struct Solver {
    cusolverDnHandle_t h = nullptr;
    cusolverDnParams_t params = nullptr;
    Solver() {
        EXPECT_EQ(cusolverDnCreate(&h), CUSOLVER_STATUS_SUCCESS);
        EXPECT_EQ(cusolverDnCreateParams(&params), CUSOLVER_STATUS_SUCCESS);
    }
    ~Solver() {
        cusolverDnDestroyParams(params);
        cusolverDnDestroy(h);
    }
};

// A = R diag(1, 3, 5) R^T with R the 45-degree rotation in the (x, y) plane:
//   eigenpairs 1: (1, 1, 0)/sqrt2,  3: (1, -1, 0)/sqrt2,  5: (0, 0, 1);
//   A = 1/2 [1+3 1-3; 1-3 1+3] (+) [5] = [2 -1 0; -1 2 0; 0 0 5].
// Check: A (1,1,0) = (1,1,0), A (1,-1,0) = (3,-3,0).
const Rows SYM = {{2, -1, 0}, {-1, 2, 0}, {0, 0, 5}};

// W = (1, 3, 5) and the columns of A (ld lda) the eigenvectors above, up to sign
void expect_sym_eigenpairs(const float* W, const float* A, int lda) {
    const double r = 1.0 / std::sqrt(2.0);
    const double V[3][3] = {{r, r, 0}, {r, -r, 0}, {0, 0, 1}};  // V[c] = eigenvector c
    EXPECT_NEAR(W[0], 1.0f, 1e-5);
    EXPECT_NEAR(W[1], 3.0f, 1e-5);
    EXPECT_NEAR(W[2], 5.0f, 1e-5);
    for (int c = 0; c < 3; c++) {
        double dot = 0;
        for (int i = 0; i < 3; i++) dot += A[i + c * lda] * V[c][i];
        EXPECT_NEAR(std::fabs(dot), 1.0, 1e-5) << "eigenvector " << c;
    }
}

}  // namespace

// syevd on the 3x3 matrix above with lda = 4 (padding row NaN); only the `uplo` triangle is read (the other holds
// 99). Eigenvalues ascending (1, 3, 5); eigenvector columns equal to the hand-computed ones up to sign.
TEST(CusolverSyevd, KnownEigenpairsUpperAndLower) {
    Solver S;
    for (cublasFillMode_t uplo : {CUBLAS_FILL_MODE_UPPER, CUBLAS_FILL_MODE_LOWER}) {
        SCOPED_TRACE(uplo == CUBLAS_FILL_MODE_UPPER ? "upper" : "lower");
        DevBuf<float> A(12, NaN), W(3, NaN);
        DevBuf<int> info(1, 12345);
        put(A.p, SYM, 4);
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 3; i++)
                if (uplo == CUBLAS_FILL_MODE_UPPER ? i > j : i < j) A[i + j * 4] = 99;  // the unread triangle
        size_t dev = 0, host = 1;
        ASSERT_EQ(cusolverDnXsyevd_bufferSize(S.h, S.params, CUSOLVER_EIG_MODE_VECTOR, uplo, 3, CUDA_R_32F, A.p, 4,
                                              CUDA_R_32F, W.p, CUDA_R_32F, &dev, &host),
                  CUSOLVER_STATUS_SUCCESS);
        EXPECT_GT(dev, 0u);
        DevBuf<unsigned char> ws(dev);
        std::vector<char> hbuf(host);
        ASSERT_EQ(cusolverDnXsyevd(S.h, S.params, CUSOLVER_EIG_MODE_VECTOR, uplo, 3, CUDA_R_32F, A.p, 4, CUDA_R_32F,
                                   W.p, CUDA_R_32F, ws.p, dev, host ? hbuf.data() : nullptr, host, info.p),
                  CUSOLVER_STATUS_SUCCESS);
        EXPECT_EQ(info[0], 0);
        expect_sym_eigenpairs(W.p, A.p, 4);
    }
}

// Ssyevj (Jacobi; bench_gpu_refresh times it beside syevd): the same hand-computed eigenpairs from the upper
// triangle (the other holds 99), eigenvalues ascending (sort_eig's default); INVALID_VALUE with info = -(position,
// not counting the handle) for lda < n (5), a NULL or too small workspace (7, 8), NULL params (10); NULL handle.
TEST(CusolverSyevj, KnownEigenpairsAndInvalidArguments) {
    Solver S;
    syevjInfo_t params = nullptr;
    ASSERT_EQ(cusolverDnCreateSyevjInfo(&params), CUSOLVER_STATUS_SUCCESS);
    const cusolverEigMode_t vec = CUSOLVER_EIG_MODE_VECTOR;
    const cublasFillMode_t up = CUBLAS_FILL_MODE_UPPER;
    DevBuf<float> A(12, NaN), W(3, NaN);
    DevBuf<int> info(1, 12345);
    put(A.p, SYM, 4);
    for (int j = 0; j < 3; j++)
        for (int i = j + 1; i < 3; i++) A[i + j * 4] = 99;  // the unread lower triangle
    int lwork = -1;
    ASSERT_EQ(cusolverDnSsyevj_bufferSize(S.h, vec, up, 3, A.p, 4, W.p, &lwork, params), CUSOLVER_STATUS_SUCCESS);
    ASSERT_GT(lwork, 0);
    DevBuf<float> work((size_t)lwork);
    ASSERT_EQ(cusolverDnSsyevj(S.h, vec, up, 3, A.p, 4, W.p, work.p, lwork, info.p, params), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info[0], 0);
    expect_sym_eigenpairs(W.p, A.p, 4);
    auto call = [&](int lda, float* wk, int lw, syevjInfo_t p) {
        info[0] = 0;
        return cusolverDnSsyevj(S.h, vec, up, 3, A.p, lda, W.p, wk, lw, info.p, p);
    };
    EXPECT_EQ(call(2, work.p, lwork, params), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info[0], -5);
    EXPECT_EQ(call(4, nullptr, lwork, params), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info[0], -7);
    EXPECT_EQ(call(4, work.p, lwork - 1, params), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info[0], -8);
    EXPECT_EQ(call(4, work.p, lwork, nullptr), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info[0], -10);
    EXPECT_EQ(cusolverDnSsyevj(nullptr, vec, up, 3, A.p, 4, W.p, work.p, lwork, info.p, params),
              CUSOLVER_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cusolverDnDestroySyevjInfo(params), CUSOLVER_STATUS_SUCCESS);
}

// jobz = NOVECTOR: eigenvalues only.
TEST(CusolverSyevd, EigenvaluesOnly) {
    Solver S;
    DevBuf<float> A(9), W(3);
    DevBuf<int> info(1, -99);
    put(A.p, SYM, 3);
    size_t dev = 0, host = 0;
    ASSERT_EQ(cusolverDnXsyevd_bufferSize(S.h, S.params, CUSOLVER_EIG_MODE_NOVECTOR, CUBLAS_FILL_MODE_UPPER, 3,
                                          CUDA_R_32F, A.p, 3, CUDA_R_32F, W.p, CUDA_R_32F, &dev, &host),
              CUSOLVER_STATUS_SUCCESS);
    DevBuf<unsigned char> ws(dev);
    ASSERT_EQ(cusolverDnXsyevd(S.h, S.params, CUSOLVER_EIG_MODE_NOVECTOR, CUBLAS_FILL_MODE_UPPER, 3, CUDA_R_32F, A.p,
                               3, CUDA_R_32F, W.p, CUDA_R_32F, ws.p, dev, nullptr, 0, info.p),
              CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info[0], 0);
    EXPECT_NEAR(W[0], 1.0f, 1e-5);
    EXPECT_NEAR(W[1], 3.0f, 1e-5);
    EXPECT_NEAR(W[2], 5.0f, 1e-5);
}

// Documented INVALID_VALUE conditions (n < 0, lda < max(1, n), uplo not LOWER/UPPER) with info = -(position, not
// counting the handle): uplo 3, n 4, lda 7; the workspace rules (NULL buffer: 11, too small: 12); an unsupported
// type combination; NULL handle. (A jobz other than NOVECTOR/VECTOR is rejected too, but cusolverEigMode_t has no
// in-range invalid value to test it with: a cast to it would be undefined behaviour.)
TEST(CusolverSyevd, InvalidArgumentsAndWorkspace) {
    Solver S;
    DevBuf<float> A(9), W(3);
    put(A.p, SYM, 3);
    size_t dev = 0, host = 0;
    ASSERT_EQ(cusolverDnXsyevd_bufferSize(S.h, S.params, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, 3,
                                          CUDA_R_32F, A.p, 3, CUDA_R_32F, W.p, CUDA_R_32F, &dev, &host),
              CUSOLVER_STATUS_SUCCESS);
    DevBuf<unsigned char> ws(dev);
    int info = 0;
    auto call = [&](cusolverEigMode_t jobz, cublasFillMode_t uplo, int64_t n, int64_t lda, void* buf, size_t bytes,
                    cudaDataType wt = CUDA_R_32F) {
        info = 12345;
        return cusolverDnXsyevd(S.h, S.params, jobz, uplo, n, CUDA_R_32F, A.p, lda, wt, W.p, CUDA_R_32F, buf, bytes,
                                nullptr, 0, &info);
    };
    const auto V = CUSOLVER_EIG_MODE_VECTOR;
    const auto U = CUBLAS_FILL_MODE_UPPER;
    EXPECT_EQ(call(V, CUBLAS_FILL_MODE_FULL, 3, 3, ws.p, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -3);
    EXPECT_EQ(call(V, U, -1, 3, ws.p, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -4);
    EXPECT_EQ(call(V, U, 3, 2, ws.p, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -7);
    EXPECT_EQ(call(V, U, 3, 3, nullptr, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -11);
    EXPECT_EQ(call(V, U, 3, 3, ws.p, dev - 1), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -12);
    EXPECT_EQ(call(V, U, 3, 3, ws.p, dev, CUDA_R_64F), CUSOLVER_STATUS_INVALID_VALUE);  // A fp32, W fp64
    EXPECT_EQ(cusolverDnXsyevd_bufferSize(S.h, S.params, V, U, 3, CUDA_R_32F, A.p, 2, CUDA_R_32F, W.p, CUDA_R_32F, &dev,
                                          &host),
              CUSOLVER_STATUS_INVALID_VALUE);  // lda < n
    EXPECT_EQ(cusolverDnXsyevd(nullptr, S.params, V, U, 3, CUDA_R_32F, A.p, 3, CUDA_R_32F, W.p, CUDA_R_32F, ws.p, dev,
                               nullptr, 0, &info),
              CUSOLVER_STATUS_NOT_INITIALIZED);
    // the valid call still works afterwards
    EXPECT_EQ(call(V, U, 3, 3, ws.p, dev), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info, 0);
    EXPECT_NEAR(W[2], 5.0f, 1e-5);
}

// QR of A (3x2) = [3 3; 4 4; 0 2] (lda 4, padding row NaN): by hand, q1 = (3, 4, 0)/5, r11 = 5, r12 = q1.a2 = 5,
// a2 - 5 q1 = (0, 0, 2) so q2 = (0, 0, 1), r22 = 2:  Q = [0.6 0; 0.8 0; 0 1], R = [5 5; 0 2]. LAPACK may flip the
// sign of a column of Q together with the matching row of R, so the checks are Q^T Q = I, Q R = A, |Q| and |R| as
// above, and R's first row of one sign (r11 = r12).
TEST(CusolverQr, GeqrfOrgqrThreeByTwo) {
    Solver S;
    const Rows A0 = {{3, 3}, {4, 4}, {0, 2}};
    DevBuf<float> A(8, NaN), tau(2, NaN);
    DevBuf<int> info(1, 12345);
    put(A.p, A0, 4);
    size_t dev = 0, host = 1;
    ASSERT_EQ(cusolverDnXgeqrf_bufferSize(S.h, S.params, 3, 2, CUDA_R_32F, A.p, 4, CUDA_R_32F, tau.p, CUDA_R_32F, &dev,
                                          &host),
              CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(host, 0u);
    DevBuf<unsigned char> ws(dev);
    ASSERT_EQ(cusolverDnXgeqrf(S.h, S.params, 3, 2, CUDA_R_32F, A.p, 4, CUDA_R_32F, tau.p, CUDA_R_32F, ws.p, dev,
                               nullptr, 0, info.p),
              CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info[0], 0);
    const float R[2][2] = {{A[0], A[4]}, {0, A[5]}};
    EXPECT_NEAR(std::fabs(R[0][0]), 5, 1e-5);
    EXPECT_NEAR(R[0][1], R[0][0], 1e-5);
    EXPECT_NEAR(std::fabs(R[1][1]), 2, 1e-5);

    int lwork = 0;
    ASSERT_EQ(cusolverDnSorgqr_bufferSize(S.h, 3, 2, 2, A.p, 4, tau.p, &lwork), CUSOLVER_STATUS_SUCCESS);
    EXPECT_GT(lwork, 0);
    DevBuf<float> work((size_t)lwork);
    info[0] = 12345;
    ASSERT_EQ(cusolverDnSorgqr(S.h, 3, 2, 2, A.p, 4, tau.p, work.p, lwork, info.p), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info[0], 0);
    auto Q = [&](int i, int j) { return A[i + j * 4]; };
    const float Qabs[3][2] = {{0.6f, 0}, {0.8f, 0}, {0, 1}};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) EXPECT_NEAR(std::fabs(Q(i, j)), Qabs[i][j], 1e-6) << i << "," << j;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            float qtq = 0;
            for (int i = 0; i < 3; i++) qtq += Q(i, a) * Q(i, b);
            EXPECT_NEAR(qtq, a == b ? 1.0f : 0.0f, 1e-6) << "Q^T Q " << a << "," << b;
        }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            float qr = Q(i, 0) * R[0][j] + Q(i, 1) * R[1][j];
            EXPECT_NEAR(qr, A0[i][j], 1e-5) << "Q R " << i << "," << j;
        }
    EXPECT_TRUE(std::isnan(A[3]) && std::isnan(A[7]));  // padding row untouched
}

// geqrf: INVALID_VALUE for m, n < 0 or lda < max(1, m) (info -2, -3, -6), NULL workspace (-10), too small (-11).
// orgqr: "m,n,k<0, n>m, k>n or lda<m" (info -1, -2, -3, -5), NULL work (-7), lwork too small (-8).
TEST(CusolverQr, InvalidArgumentsAndWorkspace) {
    Solver S;
    DevBuf<float> A(16), tau(4), work(256);
    int info = 0;
    size_t dev = 0, host = 0;
    ASSERT_EQ(cusolverDnXgeqrf_bufferSize(S.h, S.params, 3, 2, CUDA_R_32F, A.p, 3, CUDA_R_32F, tau.p, CUDA_R_32F, &dev,
                                          &host),
              CUSOLVER_STATUS_SUCCESS);
    DevBuf<unsigned char> ws(dev);
    auto geqrf = [&](int64_t m, int64_t n, int64_t lda, void* buf, size_t bytes, cudaDataType tt = CUDA_R_32F) {
        info = 12345;
        return cusolverDnXgeqrf(S.h, S.params, m, n, CUDA_R_32F, A.p, lda, tt, tau.p, CUDA_R_32F, buf, bytes, nullptr,
                                0, &info);
    };
    EXPECT_EQ(geqrf(-1, 2, 3, ws.p, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -2);
    EXPECT_EQ(geqrf(3, -2, 3, ws.p, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -3);
    EXPECT_EQ(geqrf(3, 2, 2, ws.p, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -6);
    EXPECT_EQ(geqrf(3, 2, 3, nullptr, dev), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -10);
    EXPECT_EQ(geqrf(3, 2, 3, ws.p, dev - 1), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -11);
    EXPECT_EQ(geqrf(3, 2, 3, ws.p, dev, CUDA_R_64F), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(geqrf(3, 2, 3, ws.p, dev), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info, 0);

    int lwork = 0;
    EXPECT_EQ(cusolverDnSorgqr_bufferSize(S.h, 2, 3, 2, A.p, 2, tau.p, &lwork), CUSOLVER_STATUS_INVALID_VALUE);  // n>m
    ASSERT_EQ(cusolverDnSorgqr_bufferSize(S.h, 3, 2, 2, A.p, 3, tau.p, &lwork), CUSOLVER_STATUS_SUCCESS);
    ASSERT_LE(lwork, 256);
    auto orgqr = [&](int m, int n, int k, int lda, float* w, int lw) {
        info = 12345;
        return cusolverDnSorgqr(S.h, m, n, k, A.p, lda, tau.p, w, lw, &info);
    };
    EXPECT_EQ(orgqr(-1, 2, 2, 3, work.p, lwork), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -1);
    EXPECT_EQ(orgqr(2, 3, 2, 3, work.p, lwork), CUSOLVER_STATUS_INVALID_VALUE);  // n > m
    EXPECT_EQ(info, -2);
    EXPECT_EQ(orgqr(3, 2, 3, 3, work.p, lwork), CUSOLVER_STATUS_INVALID_VALUE);  // k > n
    EXPECT_EQ(info, -3);
    EXPECT_EQ(orgqr(3, 2, 2, 2, work.p, lwork), CUSOLVER_STATUS_INVALID_VALUE);  // lda < m
    EXPECT_EQ(info, -5);
    EXPECT_EQ(orgqr(3, 2, 2, 3, nullptr, lwork), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -7);
    EXPECT_EQ(orgqr(3, 2, 2, 3, work.p, lwork - 1), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -8);
    EXPECT_EQ(orgqr(3, 2, 2, 3, work.p, lwork), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info, 0);
    EXPECT_EQ(cusolverDnSorgqr(nullptr, 3, 2, 2, A.p, 3, tau.p, work.p, lwork, &info), CUSOLVER_STATUS_NOT_INITIALIZED);
}

// Cholesky by hand: [[4, 2], [2, 5]] = UᵀU with U = [[2, 1], [0, 2]] (upper) or L = Uᵀ (lower); the other
// triangle is not referenced (555 stays). [[1, 2], [2, 1]] is indefinite: info 2 (the order-2 leading minor).
TEST(CusolverPotrf, KnownFactorsNotPositiveDefiniteAndInvalidArguments) {
    Solver S;
    int lwork = -1, info = -7;
    float A[4] = {4, 555, 2, 5};  // column-major, upper triangle valid
    ASSERT_EQ(cusolverDnSpotrf_bufferSize(S.h, CUBLAS_FILL_MODE_UPPER, 2, A, 2, &lwork), CUSOLVER_STATUS_SUCCESS);
    EXPECT_GE(lwork, 0);
    std::vector<float> work(lwork > 0 ? lwork : 1);
    ASSERT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_UPPER, 2, A, 2, work.data(), lwork, &info),
              CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info, 0);
    EXPECT_EQ(A[0], 2);
    EXPECT_EQ(A[2], 1);
    EXPECT_EQ(A[3], 2);
    EXPECT_EQ(A[1], 555);
    float Bl[4] = {4, 2, 555, 5};  // lower triangle valid
    ASSERT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_LOWER, 2, Bl, 2, work.data(), lwork, &info),
              CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info, 0);
    EXPECT_EQ(Bl[0], 2);
    EXPECT_EQ(Bl[1], 1);
    EXPECT_EQ(Bl[3], 2);
    EXPECT_EQ(Bl[2], 555);
    float C[4] = {1, 2, 2, 1};
    ASSERT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_UPPER, 2, C, 2, work.data(), lwork, &info),
              CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(info, 2);
    EXPECT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_UPPER, 2, A, 1, work.data(), lwork, &info),
              CUSOLVER_STATUS_INVALID_VALUE);  // lda < n
    EXPECT_EQ(info, -4);
    EXPECT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_UPPER, -1, A, 2, work.data(), lwork, &info),
              CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -2);
    EXPECT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_FULL, 2, A, 2, work.data(), lwork, &info),
              CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -1);
    EXPECT_EQ(cusolverDnSpotrf_bufferSize(S.h, CUBLAS_FILL_MODE_UPPER, 2, A, 2, nullptr),
              CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(cusolverDnSpotrf(nullptr, CUBLAS_FILL_MODE_UPPER, 2, A, 2, work.data(), lwork, &info),
              CUSOLVER_STATUS_NOT_INITIALIZED);
}

TEST(CusolverHandle, CreateDestroyStream) {
    EXPECT_EQ(cusolverDnCreate(nullptr), CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(cusolverDnDestroy(nullptr), CUSOLVER_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(cusolverDnSetStream(nullptr, nullptr), CUSOLVER_STATUS_NOT_INITIALIZED);
    Solver S;
    cudaStream_t s = reinterpret_cast<cudaStream_t>(0x42), got = nullptr;
    EXPECT_EQ(cusolverDnSetStream(S.h, s), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(cusolverDnGetStream(S.h, &got), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(got, s);
}

// ---------------------------------------------------------------------------------------------------------------
// Stream order (kernels/cuda_emu/stream_order.h): a routine checks its arguments at the call and computes when its
// stream runs, as on a GPU, so the host sees the result (and info) only after waiting for the stream.
// ---------------------------------------------------------------------------------------------------------------

// The routines report the device bytes they read and write to the global-memory race check across streams
// (kernels/cuda_emu/stream_order.h's op_access): a GEMM or a Cholesky factorization on one stream that reads what
// another stream wrote, with nothing ordering the two, fails as a racing kernel does (sticky, the report on stderr);
// an event waited for orders them. In a child process each (the error is sticky); cudaMalloc'ed buffers (the check
// sees device memory only).
TEST(StreamOrder, LibraryRoutinesTakePartInTheRaceCheckAcrossStreams) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // ordered: true waits for an event recorded after the write
    auto run = [](bool gemm, bool ordered) {
        float *A = nullptr, *C = nullptr;
        int* info = nullptr;
        cudaMalloc(&A, 4 * sizeof(float));
        cudaMalloc(&C, 4 * sizeof(float));
        cudaMalloc(&info, sizeof(int));
        const float spd[4] = {4, 2, 2, 5};
        cudaMemcpy(A, spd, sizeof spd, cudaMemcpyHostToDevice);
        cudaStream_t a, b;
        cudaEvent_t e;
        cudaStreamCreate(&a);
        cudaStreamCreate(&b);
        cudaEventCreate(&e);
        cudaMemcpyAsync(A, spd, sizeof spd, cudaMemcpyHostToDevice, a);  // (pageable: staged, queued on a)
        if (ordered) cudaEventRecord(e, a), cudaStreamWaitEvent(b, e, 0);
        cublasHandle_t h;
        cusolverDnHandle_t sh;
        cublasCreate(&h);
        cusolverDnCreate(&sh);
        cublasSetStream(h, b);
        cusolverDnSetStream(sh, b);
        const float one = 1, zero = 0;
        if (gemm) cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, A, 2, A, 2, &zero, C, 2);
        else cusolverDnSpotrf(sh, CUBLAS_FILL_MODE_UPPER, 2, A, 2, nullptr, 0, info);
        const cudaError_t r = cudaDeviceSynchronize();
        std::fprintf(stderr, "result: %s\n", cudaGetErrorName(r));
        std::exit(0);
    };
    const char* race = "global-memory race across streams .*: %s reads it; another operation wrote it in "
                       "cudaMemcpyAsync on stream .*result: cudaErrorLaunchFailure";
    char want[300];
    std::snprintf(want, sizeof want, race, "a cuBLAS GEMM");
    EXPECT_EXIT(run(true, false), ::testing::ExitedWithCode(0), want);
    std::snprintf(want, sizeof want, race, "cusolverDnSpotrf");
    EXPECT_EXIT(run(false, false), ::testing::ExitedWithCode(0), want);
    EXPECT_EXIT(run(true, true), ::testing::ExitedWithCode(0), "result: cudaSuccess");
    EXPECT_EXIT(run(false, true), ::testing::ExitedWithCode(0), "result: cudaSuccess");
}

// With the operand check on (as everywhere but in this file's other tests): host and device memory are one here, so
// a routine given a std::vector's pointer would compute; on a GPU it faults. An operand inside a cudaMalloc
// allocation, or a cudaMallocHost one (which a GPU reaches through unified addressing), passes; pageable host memory,
// or a matrix that reaches past its allocation's end, fails the routine, sticky. In a child process each.
TEST(HostMemoryCheck, ARoutineGivenMemoryAGpuCannotReachFails) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    ASSERT_TRUE(g_check_was_on) << "on by default";
    enum Case { DEVICE, PINNED, PAGEABLE, PAST_THE_END };
    auto run = [](Case c) {
        cuda_emu::set_host_memory_check(true);
        float *A = nullptr, *B = nullptr, *C = nullptr, *pinned = nullptr;
        cudaMalloc(&A, 6 * sizeof(float));
        cudaMalloc(&B, 6 * sizeof(float));
        cudaMalloc(&C, 4 * sizeof(float));
        // (the C function: cuda_runtime.h's template overload calls cudaHostAlloc)
        cudaMallocHost(reinterpret_cast<void**>(&pinned), 6 * sizeof(float));
        std::vector<float> pageable(6);
        const float* a = c == PINNED ? pinned : c == PAGEABLE ? pageable.data() : A;
        cublasHandle_t h;
        cublasCreate(&h);
        const float one = 1, zero = 0;
        // B (3 x 2) with a leading dimension of 4: 4 + 3 = 7 floats of its 6
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, 2, B, c == PAST_THE_END ? 4 : 3, &zero, C, 2);
        std::fprintf(stderr, "result: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
        std::exit(0);
    };
    EXPECT_EXIT(run(DEVICE), ::testing::ExitedWithCode(0), "result: cudaSuccess");
    EXPECT_EXIT(run(PINNED), ::testing::ExitedWithCode(0), "result: cudaSuccess");
    EXPECT_EXIT(run(PAGEABLE), ::testing::ExitedWithCode(0),
                "a cuBLAS GEMM given 0x[0-9a-f]+ as a device operand of 24 bytes: pageable host memory .*"
                "result: cudaErrorLaunchFailure");
    EXPECT_EXIT(run(PAST_THE_END), ::testing::ExitedWithCode(0),
                "a cuBLAS GEMM given 0x[0-9a-f]+ as a device operand of 28 bytes: bytes 0 to 28 of a 24-byte "
                "cudaMalloc allocation: past its end.*result: cudaErrorLaunchFailure");
}

TEST(StreamOrder, LibraryWorkRunsWhenItsStreamIsWaitedFor) {
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    Handles H;
    Solver S;
    ASSERT_EQ(cublasSetStream(H.h, s), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cusolverDnSetStream(S.h, s), CUSOLVER_STATUS_SUCCESS);
    float A[6], B[6], C[4] = {-1, -1, -1, -1};
    put(A, A23, 2);
    put(B, B32, 3);
    const float one = 1, zero = 0;
    ASSERT_EQ(cublasSgemm(H.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, A, 2, B, 3, &zero, C, 2),
              CUBLAS_STATUS_SUCCESS);
    float P[4] = {4, 555, 2, 5};  // the upper triangle of [4 2; 2 5] = U^T U with U = [2 1; 0 2]
    int info = -7;
    ASSERT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_UPPER, 2, P, 2, nullptr, 0, &info), CUSOLVER_STATUS_SUCCESS);
    EXPECT_EQ(C[0], -1) << "queued: nothing computed before the stream runs";
    EXPECT_EQ(info, -7);
    EXPECT_EQ(P[0], 4);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(C[0], 58);
    EXPECT_EQ(C[1], 139);
    EXPECT_EQ(C[2], 64);
    EXPECT_EQ(C[3], 154);
    EXPECT_EQ(info, 0);
    EXPECT_EQ(P[0], 2);
    EXPECT_EQ(P[2], 1);
    EXPECT_EQ(P[3], 2);
    // a wrong argument is refused at the call (status and info), nothing queued
    EXPECT_EQ(cusolverDnSpotrf(S.h, CUBLAS_FILL_MODE_UPPER, 2, P, 1, nullptr, 0, &info),
              CUSOLVER_STATUS_INVALID_VALUE);
    EXPECT_EQ(info, -4);
    EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}
