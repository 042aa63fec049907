// Matmul family, CPU twins (fp32 in the CPU backend, fp64 in the finite-difference tests).
// Layout as nn.Linear: weight (OC, C) row-major, out = inp @ weight^T + bias.
// The CUDA twins (cuBLASLt) keep the same argument order.
#pragma once
#include <cblas.h>
#include <cstddef>

// Row-major GEMM: C(M,N) = alpha * op(A) @ op(B) + beta * C, with leading dimensions, so strided
// views (e.g. the gate half of a fused gate|up buffer) need no copies.
inline void gemm_cpu(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                     const float* B, int ldb, float beta, float* C, int ldc) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void gemm_cpu(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A, int lda,
                     const double* B, int ldb, double beta, double* C, int ldc) {
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

// Row strides: every function below takes the row strides (elements) of its activation operands as trailing
// arguments, 0 meaning contiguous (the row width). LLaMA's F-wide activations may sit at a padded stride
// (ModelConfig::hidden_stride, --hidden-align); weights are always contiguous.

// out (N, OC) = inp (N, C) @ weight (OC, C)^T + bias (OC, may be null); out rows at stride ld_out, inp at ld_inp
template <typename T>
void matmul_forward_cpu(T* out, const T* inp, const T* weight, const T* bias, int N, int C, int OC, int ld_out = 0,
                        int ld_inp = 0) {
    ld_out = ld_out ? ld_out : OC;
    gemm_cpu(false, true, N, OC, C, T(1), inp, ld_inp ? ld_inp : C, weight, C, T(0), out, ld_out);
    if (bias) {
#pragma omp parallel for
        for (int n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) out[(size_t)n * ld_out + o] += bias[o];
    }
}

// dinp (N, C) = dout (N, OC) @ weight (OC, C); accumulate=true adds to dinp (shared inputs, e.g. residual grads);
// dinp rows at stride ld_dinp, dout at ld_dout
template <typename T>
void matmul_backward_input_cpu(T* dinp, const T* dout, const T* weight, int N, int C, int OC, bool accumulate,
                               int ld_dinp = 0, int ld_dout = 0) {
    gemm_cpu(false, false, N, C, OC, T(1), dout, ld_dout ? ld_dout : OC, weight, C, accumulate ? T(1) : T(0), dinp,
             ld_dinp ? ld_dinp : C);
}

// dweight (OC, C) += dout (N, OC)^T @ inp (N, C);  dbias (OC) += column sums of dout. Always accumulates
// (gradient accumulation over micro-steps; the trainer zeroes grads once per optimizer step). dout rows at stride
// ld_dout, inp at ld_inp.
template <typename T>
void matmul_backward_weight_cpu(T* dweight, T* dbias, const T* dout, const T* inp, int N, int C, int OC,
                                int ld_dout = 0, int ld_inp = 0) {
    ld_dout = ld_dout ? ld_dout : OC;
    gemm_cpu(true, false, OC, C, N, T(1), dout, ld_dout, inp, ld_inp ? ld_inp : C, T(1), dweight, C);
    if (dbias) {
#pragma omp parallel for
        for (int o = 0; o < OC; o++) {
            T sum = 0;
            for (int n = 0; n < N; n++) sum += dout[(size_t)n * ld_dout + o];
            dbias[o] += sum;
        }
    }
}
