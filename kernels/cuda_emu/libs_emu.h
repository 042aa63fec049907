// Control and inspection hooks of the emulated NVIDIA libraries (kernels/cuda_emu/cublas_emu.cpp,
// kernels/cuda_emu/cusolver_emu.cpp). Only the emulated (CPU) build has these; the real libraries do not.
//
// The stand-ins themselves are reached through the real NVIDIA headers (cublas_v2.h, cublasLt.h, cusolverDn.h):
// they define the functions those headers declare, so project code calls them unchanged.
#pragma once

// Force cublasLtMatmulAlgoGetHeuristic to find no algorithm: while on, every call returns
// CUBLAS_STATUS_NOT_SUPPORTED with *returnAlgoCount = 0, as the real library may for a configuration it has no
// kernel for. The environment variable PRAC_EMU_CUBLASLT_NO_ALGO (set and not "0", read on every call) does the
// same; either one is enough.
void cuda_emu_cublaslt_fail_heuristic(bool fail);

// Number of cublasLtMatmulAlgoGetHeuristic calls so far in this process (every call, failed ones included), e.g.
// for a test that a per-shape cache runs the heuristic once per shape.
long cuda_emu_cublaslt_heuristic_calls();

// Number of cuBLAS GEMM calls so far in this process that passed their argument checks, by operand type:
// bf16_operands = true counts cublasGemmEx and cublasGemmStridedBatchedEx with CUDA_R_16BF A and B, false counts
// cublasSgemm, cublasSgemmStridedBatched and those two with CUDA_R_32F A and B (e.g. for a test that the bf16 build's
// Newton-Schulz multiplies bf16 operands); a batched call counts once, whatever its batch.
long cuda_emu_cublas_gemm_calls(bool bf16_operands);

// Number of cudnnBackendExecute calls that ran an operation graph to completion in this process (the cuDNN
// graph API's stand-in, kernels/cuda_emu/cudnn_emu.cpp; only in builds that have it), e.g. for a test that a
// cuDNN path really ran.
long cuda_emu_cudnn_executes();

// Whether the device operands of kernels (their pointer arguments) and of the library routines must be memory a GPU
// reaches: inside a cudaMalloc or cudaMallocHost allocation (a std::vector's pointer fails the kernel or routine,
// sticky, as it faults on a GPU; emu_internal.h's device_range_problem). On by default; the stand-ins' own unit tests
// turn it off to pass host arrays. Returns the old setting.
namespace cuda_emu {
bool set_host_memory_check(bool on);
}
