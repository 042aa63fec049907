// PRAC refresh cost on the CUDA backend: one refresh (Q1 and Q2) of one site per width, exact (device Gram +
// cusolverDnXsyevd of n x n) and subspace (warm start, as every refresh after a site's first) side by side, with
// their ratio, and the parts that decide it: the Gram GEMM and the Q2 draw alone (both methods pay them; cap G =
// exact / (gram + q2) is the most any method that forms G can gain) and the b x b eigensolver of the subspace
// refresh's extraction alone, and the same b x b block by cusolverDnSsyevj (Jacobi) beside it, and one b x b
// cusolverDnSpotrf in upper fill (the refresh's) and in lower (potrf_b_upper_ms, potrf_b_lower_ms); how many of the
// subspace refresh's orthonormalizations needed more than CholQR2 (orth S/H: shifted Cholesky-QR / Householder), and
// the subspace refresh with Householder QR for those instead (HH ms, PracSubspaceParams::shifted_passes 0, the
// path before 2026-11-28: which is faster on a GPU decides the default). Then where one warm
// subspace refresh's time goes (PracRefreshProfile): GPU time and calls per part (the library call or kernel kind:
// sgemm, syrk, potrf, trsm, syevd, ...) and the rest of its wall time, spent on the host between them (launches and
// the info-word reads). The device twin of tools/bench_refresh.cpp; the GPU
// recipe (scripts/gpu_verify.sh run_benchmarks) runs it as it runs every tools/bench_gpu*.
//
//   build/tools/bench_gpu_refresh [--quick] [--N TOKENS] [--widths 768,2048,...] [--reps R]
//
// Activations in the build's storage type (bf16 or fp32), tools/synthetic_site.h's sites (each warm refresh starts
// from the basis of a cold refresh on another batch), linear ranks r1 = r2 = 0.3 n; N = 32768 (--quick: 8192
// and widths 768,2048,4096). Each time is the median of R (default 3) calls after a warm-up call; the parts are
// those of R more calls, averaged. Prints "RESULT bench_gpu_refresh ..." and "RESULT bench_gpu_refresh_parts ..."
// per width, and first "RESULT bench_gpu_refresh_handles bytes=...": the device memory one cuBLAS + cuSOLVER
// handle pair takes for itself. Exits 77 without a GPU (1 with REQUIRE_GPU=1).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/device.h"  // gpu_unavailable_exit_code
#include "common/cuda_common.cuh"  // floatX, PRAC_FLOATX_NAME
#include "common/strings.h"  // parse_whole, split_commas
#include "prac/prac.h"
#include "prac/prac_cuda.cuh"
#include "tools/synthetic_site.h"

using act_t = floatX;

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The device memory a cuBLAS + cuSOLVER handle pair allocates for itself (workspace pools, what the first GEMM and
// eigensolver make), by cudaMemGetInfo around creating them and running one of each on buffers made before: no
// allocator of ours sees it, and the refresh worker of --prac-refresh-overlap makes a second pair
// (kernels/cuda_backend.cu) that the planner does not count. Measured first, in a fresh context.
static size_t library_handle_bytes() {
    const int n = 64;
    float *a = nullptr, *c = nullptr, *w = nullptr;
    void* work = nullptr;
    int* info = nullptr;
    const size_t work_bytes = 4u << 20;  // syevd of 64 x 64 asks for far less
    cudaCheck(cudaMalloc(&a, (size_t)n * n * sizeof(float)));
    cudaCheck(cudaMalloc(&c, (size_t)n * n * sizeof(float)));
    cudaCheck(cudaMalloc(&w, n * sizeof(float)));
    cudaCheck(cudaMalloc(&work, work_bytes));
    cudaCheck(cudaMalloc(&info, sizeof(int)));
    cudaCheck(cudaMemset(a, 0, (size_t)n * n * sizeof(float)));
    cudaCheck(cudaDeviceSynchronize());
    size_t free0 = 0, free1 = 0, total = 0;
    cudaCheck(cudaMemGetInfo(&free0, &total));
    cublasHandle_t cublas;
    cusolverDnHandle_t cusolver;
    cublasCheck(cublasCreate(&cublas));
    cusolverCheck(cusolverDnCreate(&cusolver));
    const float one = 1.0f, zero = 0.0f;
    cublasCheck(cublasSgemm(cublas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, a, n, a, n, &zero, c, n));
    {
        CusolverParams params;
        size_t dev_bytes = 0, host_bytes = 0;
        cusolverCheck(cusolverDnXsyevd_bufferSize(cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                                  n, CUDA_R_32F, c, n, CUDA_R_32F, w, CUDA_R_32F, &dev_bytes,
                                                  &host_bytes));
        if (dev_bytes > work_bytes) {
            std::fprintf(stderr, "bench_gpu_refresh: syevd of %d x %d wants %zu bytes of workspace\n", n, n, dev_bytes);
            std::exit(1);
        }
        std::vector<char> host_work(host_bytes);
        cusolverCheck(cusolverDnXsyevd(cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, n,
                                       CUDA_R_32F, c, n, CUDA_R_32F, w, CUDA_R_32F, work, dev_bytes,
                                       host_work.empty() ? nullptr : host_work.data(), host_bytes, info));
    }
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemGetInfo(&free1, &total));
    cusolverCheck(cusolverDnDestroy(cusolver));
    cublasCheck(cublasDestroy(cublas));
    for (void* p : {(void*)a, (void*)c, (void*)w, work, (void*)info}) cudaCheck(cudaFree(p));
    return free0 > free1 ? free0 - free1 : 0;
}

// median seconds of `reps` calls of f (after one warm-up call), each ended by a device synchronization
template <class F>
static double median_time(int reps, F f) {
    f();
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        f();
        cudaCheck(cudaDeviceSynchronize());
        t.push_back(now_s() - t0);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static int bench_main(int argc, char** argv) {
    int N = -1, reps = 3;
    bool quick = false;
    std::vector<int> widths;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_gpu_refresh: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::printf("usage: bench_gpu_refresh [--quick] [--N TOKENS] [--widths 768,2048,...] [--reps R]\n\n"
                        "One PRAC refresh per site width on the CUDA backend, exact vs subspace, side by side.\n"
                        "  --quick       N 8192 and widths 768,2048,4096\n"
                        "  --N TOKENS    rows of the site's activation (default 32768)\n"
                        "  --widths W,.. site widths (default 768,2048,3072,4096,5461,10922)\n"
                        "  --reps R      median of R timed calls after a warm-up (default 3)\n"
                        "Exits 77 without a GPU (1 with REQUIRE_GPU=1).\n");
            return 0;
        } else if (a == "--quick") quick = true;
        else if (a == "--N") N = (int)parse_whole("--N", val(), 1, 1 << 24);
        else if (a == "--reps") reps = (int)parse_whole("--reps", val(), 1, 1000);
        else if (a == "--widths") {
            for (const std::string& w : split_commas(val()))
                widths.push_back((int)parse_whole("--widths", w, 1, 1 << 20));
        } else {
            std::fprintf(stderr, "bench_gpu_refresh: unknown flag %s\n---> HINT: --help lists them\n", a.c_str());
            return 2;
        }
    }
    if (N < 0) N = quick ? 8192 : 32768;
    if (widths.empty())
        widths = quick ? std::vector<int>{768, 2048, 4096} : std::vector<int>{768, 2048, 3072, 4096, 5461, 10922};
    int unavailable = gpu_unavailable_exit_code("bench_gpu_refresh");
    if (unavailable >= 0) return unavailable;
    std::printf("RESULT bench_gpu_refresh_handles bytes=%zu (one cuBLAS + one cuSOLVER handle after a GEMM and a "
                "syevd, by cudaMemGetInfo: uncounted by the planner for the refresh worker's pair)\n",
                library_handle_bytes());

    cudaStream_t stream;
    cublasHandle_t cublas;
    cusolverDnHandle_t cusolver;
    cudaCheck(cudaStreamCreate(&stream));
    cublasCheck(cublasCreate(&cublas));
    cusolverCheck(cusolverDnCreate(&cusolver));
    PracCudaHandles h{stream, cublas, cusolver};
    std::printf("PRAC refresh, CUDA backend (%s activations, fp32 Gram and solvers), one site with linear ranks "
                "r1 = r2 = 0.3 n, N = %d; subspace = warm start (from another batch's basis), %d power step(s) + "
                "the Nystrom extraction; orth S(p)/H: its orthonormalizations beyond CholQR2, by shifted "
                "Cholesky-QR (in p passes) / by Householder QR; HH ms: the subspace refresh with Householder QR for "
                "those instead\n",
                PRAC_FLOATX_NAME, N, PracSubspaceParams().warm_iters);
    std::printf("%7s %7s %6s %10s %12s %8s %9s %8s %7s %13s %13s %9s %8s\n", "n", "N", "r1", "exact ms",
                "subspace ms", "ratio", "gram ms", "q2 ms", "cap G", "syevd(b) ms", "syevj(b) ms", "orth", "HH ms");
    for (int n : widths) {
        PracOptions o;
        o.mode = PracMode::PRAC;
        SiteDims d = prac_site_dims(o, SiteClass::LINEAR, n, "bench");
        // the site (tools/synthetic_site.h, as bench_refresh) and the batch its warm start's basis came from
        auto upload_site = [&](uint64_t seed, double turn) {
            std::vector<float> hx = synthetic_site(N, n, seed, turn);
            std::vector<act_t> hxa(hx.size());
            for (size_t e = 0; e < hx.size(); e++) hxa[e] = (act_t)hx[e];
            act_t* dx = nullptr;
            cudaCheck(cudaMalloc(&dx, hxa.size() * sizeof(act_t)));
            cudaCheck(cudaMemcpy(dx, hxa.data(), hxa.size() * sizeof(act_t), cudaMemcpyHostToDevice));
            return dx;
        };
        const size_t basis_bytes = (size_t)n * d.r() * sizeof(act_t);
        act_t *x = upload_site(1000 + n, 0), *P = nullptr, *P_prev = nullptr;
        cudaCheck(cudaMalloc(&P, basis_bytes));
        cudaCheck(cudaMalloc(&P_prev, basis_bytes));
        cudaCheck(cudaMemset(P, 0, basis_bytes));
        SiteDims ds = d, de = d;
        ds.refresh = PracRefresh::SUBSPACE;
        de.refresh = PracRefresh::EXACT;
        size_t bytes = std::max(prac_refresh_workspace_bytes(cusolver, n, ds), prac_refresh_workspace_bytes(cusolver, n, de));
        void* ws = nullptr;
        cudaCheck(cudaMalloc(&ws, bytes));
        uint64_t draw = 0;
        {  // the cold start, on the other batch: each warm refresh below starts from its basis, as in training
            act_t* x_prev = upload_site(2000 + n, SYNTHETIC_TURN);
            prac_refresh_cuda(P_prev, x_prev, N, n, ds, true, true, false, {1, 0, 0, draw++}, h, ws, bytes);
            cudaCheck(cudaFree(x_prev));
        }
        auto restore_basis = [&] {  // inside every timed refresh: a device copy of P, 0.1 ms at n = 10922 in bf16
            cudaCheck(cudaMemcpyAsync(P, P_prev, basis_bytes, cudaMemcpyDeviceToDevice, stream));
        };
        PracRefreshResult warm;
        double sub = median_time(reps, [&] {
            restore_basis();
            warm = prac_refresh_cuda(P, x, N, n, ds, true, true, true, {1, 0, 0, draw++}, h, ws, bytes);
        });
        SiteDims dh = ds;  // the same with Householder QR wherever CholQR2 fails (no shifted Cholesky-QR)
        dh.subspace.shifted_passes = 0;
        double sub_hh = median_time(reps, [&] {
            restore_basis();
            prac_refresh_cuda(P, x, N, n, dh, true, true, true, {1, 0, 0, draw++}, h, ws, bytes);
        });
        double ex = median_time(reps, [&] {
            restore_basis();  // as in the subspace spans (the exact refresh does not read it)
            prac_refresh_cuda(P, x, N, n, de, true, true, true, {1, 0, 0, draw++}, h, ws, bytes);
        });
        // the Gram GEMM alone, as the refresh runs it: x^T x (bf16 or fp32 operands, fp32 output)
        float* G = (float*)ws;
        const float one = 1.0f, zero = 0.0f;
        cudaDataType_t xt = sizeof(act_t) == 2 ? CUDA_R_16BF : CUDA_R_32F;
        cublasCheck(cublasSetStream(cublas, stream));
        double gram = median_time(reps, [&] {
            cublasCheck(cublasGemmEx(cublas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, N, &one, x, xt, n, x, xt, n, &zero, G,
                                     CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
        // the Q2 draw alone (Gaussian, projection out of Q1, CholQR2): a Q2-only refresh
        double q2 = median_time(reps, [&] {
            prac_refresh_cuda(P, x, N, n, ds, false, true, true, {1, 0, 0, draw++}, h, ws, bytes);
        });
        // the subspace extraction's b x b eigensolver alone (cusolverDnXsyevd, as the refresh calls it), on the
        // leading b x b block of the Gram matrix just computed: a copy A0 restored before each call
        int b = ds.block(n);
        if (b < 1 || bytes < ((size_t)n * n + 2 * (size_t)b * b + b) * sizeof(float)) {
            std::fprintf(stderr, "bench_gpu_refresh: n = %d has no subspace block (b = %d) or the workspace cannot "
                         "hold G and two b x b copies\n", n, b);
            return 1;
        }
        float* A = G + (size_t)n * n;  // the workspace beyond G (n, n): V, Y, ... (more than 2 b x b + b floats)
        float* A0 = A + (size_t)b * b;
        for (int j = 0; j < b; j++)  // column j of the block (column-major, ld n) into A0 (ld b)
            cudaCheck(cudaMemcpyAsync(A0 + (size_t)j * b, G + (size_t)j * n, b * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream));
        CusolverParams params;
        size_t dev_bytes = 0, host_bytes = 0;
        float* w = A0 + (size_t)b * b;
        cusolverCheck(cusolverDnXsyevd_bufferSize(cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                                  (int64_t)b, CUDA_R_32F, A, (int64_t)b, CUDA_R_32F, w, CUDA_R_32F,
                                                  &dev_bytes, &host_bytes));
        void* dev_work = nullptr;
        int* info = nullptr;
        cudaCheck(cudaMalloc(&dev_work, std::max<size_t>(dev_bytes, 1)));
        cudaCheck(cudaMalloc(&info, sizeof(int)));
        std::vector<char> host_work(host_bytes);
        double syevd_b = median_time(reps, [&] {
            cudaCheck(cudaMemcpyAsync(A, A0, (size_t)b * b * sizeof(float), cudaMemcpyDeviceToDevice, stream));
            cusolverCheck(cusolverDnXsyevd(cusolver, params.p, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER,
                                           (int64_t)b, CUDA_R_32F, A, (int64_t)b, CUDA_R_32F, w, CUDA_R_32F, dev_work,
                                           dev_bytes, host_work.empty() ? nullptr : host_work.data(), host_bytes,
                                           info));
        });
        int info_host = 0;
        cudaCheck(cudaMemcpy(&info_host, info, sizeof(int), cudaMemcpyDeviceToHost));
        if (info_host != 0) {
            std::fprintf(stderr, "bench_gpu_refresh: cusolverDnXsyevd of the %d x %d block returned info %d: its time "
                         "is not a valid measurement\n", b, b, info_host);
            return 1;
        }
        // the same block by cusolverDnSsyevj (Jacobi, default tolerance and sweeps): would it be the cheaper
        // extraction? Its eigenvalues against syevd's, relative to the largest
        std::vector<float> w_syevd(b), w_syevj(b);
        cudaCheck(cudaMemcpy(w_syevd.data(), w, b * sizeof(float), cudaMemcpyDeviceToHost));
        syevjInfo_t jparams = nullptr;
        cusolverCheck(cusolverDnCreateSyevjInfo(&jparams));
        int jwork = 0;
        cusolverCheck(cusolverDnSsyevj_bufferSize(cusolver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, b, A, b,
                                                  w, &jwork, jparams));
        float* jbuf = nullptr;
        cudaCheck(cudaMalloc(&jbuf, std::max<size_t>((size_t)jwork, 1) * sizeof(float)));
        double syevj_b = median_time(reps, [&] {
            cudaCheck(cudaMemcpyAsync(A, A0, (size_t)b * b * sizeof(float), cudaMemcpyDeviceToDevice, stream));
            cusolverCheck(cusolverDnSsyevj(cusolver, CUSOLVER_EIG_MODE_VECTOR, CUBLAS_FILL_MODE_UPPER, b, A, b, w, jbuf,
                                           jwork, info, jparams));
        });
        cudaCheck(cudaMemcpy(&info_host, info, sizeof(int), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(w_syevj.data(), w, b * sizeof(float), cudaMemcpyDeviceToHost));
        cusolverCheck(cusolverDnDestroySyevjInfo(jparams));
        cudaCheck(cudaFree(jbuf));
        // one Cholesky factorization of a b x b block (the refresh makes about a dozen, all in upper fill) in each
        // fill, on the block made positive definite (mean diagonal added): cuSOLVER's two fills are separate code,
        // and a much faster lower fill would be worth switching the refresh's Cholesky-QR to
        std::vector<float> hA((size_t)b * b);
        cudaCheck(cudaMemcpy(hA.data(), A0, hA.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double mean_diag = 0;
        for (int i = 0; i < b; i++) mean_diag += hA[(size_t)i * b + i] / b;
        for (int i = 0; i < b; i++) hA[(size_t)i * b + i] += (float)mean_diag;
        cudaCheck(cudaMemcpy(A0, hA.data(), hA.size() * sizeof(float), cudaMemcpyHostToDevice));
        double potrf_b[2] = {0, 0};
        const cublasFillMode_t fills[2] = {CUBLAS_FILL_MODE_UPPER, CUBLAS_FILL_MODE_LOWER};
        for (int f = 0; f < 2; f++) {
            int pwork = 0;
            cusolverCheck(cusolverDnSpotrf_bufferSize(cusolver, fills[f], b, A, b, &pwork));
            float* pbuf = nullptr;
            cudaCheck(cudaMalloc(&pbuf, std::max<size_t>((size_t)pwork, 1) * sizeof(float)));
            potrf_b[f] = median_time(reps, [&] {
                cudaCheck(cudaMemcpyAsync(A, A0, (size_t)b * b * sizeof(float), cudaMemcpyDeviceToDevice, stream));
                cusolverCheck(cusolverDnSpotrf(cusolver, fills[f], b, A, b, pbuf, pwork, info));
            });
            int pinfo = 0;
            cudaCheck(cudaMemcpy(&pinfo, info, sizeof(int), cudaMemcpyDeviceToHost));
            cudaCheck(cudaFree(pbuf));
            if (pinfo != 0) {
                std::fprintf(stderr, "bench_gpu_refresh: cusolverDnSpotrf (%s) of the shifted %d x %d block returned "
                             "info %d: its time is not a valid measurement\n", f ? "lower" : "upper", b, b, pinfo);
                return 1;
            }
        }
        cudaCheck(cudaFree(dev_work));
        cudaCheck(cudaFree(info));
        double eig_err = 0, eig_max = 0;
        for (int i = 0; i < b; i++) {
            eig_err = std::max(eig_err, (double)std::fabs(w_syevj[i] - w_syevd[i]));
            eig_max = std::max(eig_max, (double)std::fabs(w_syevd[i]));
        }
        eig_err = eig_max > 0 ? eig_err / eig_max : eig_err;
        const int syevj_info = info_host;  // 0, or b + 1: not converged (its time then says little)
        double cap = ex / (gram + q2);
        if (!warm.q1_ok || !warm.q2_ok) {  // a failed refresh's time is not a refresh's
            std::fprintf(stderr, "bench_gpu_refresh: the timed subspace refresh at n = %d failed: %s\n", n,
                         warm.message.c_str());
            return 1;
        }
        std::printf("%7d %7d %6d %10.2f %12.2f %7.1fx %9.2f %8.2f %6.1fx %13.2f %13.2f %3d(%d)/%d %8.2f%s\n", n, N,
                    d.r1, 1e3 * ex, 1e3 * sub, ex / sub, 1e3 * gram, 1e3 * q2, cap, 1e3 * syevd_b, 1e3 * syevj_b,
                    warm.q1_shifted_qr, warm.q1_shifted_passes, warm.q1_householder_qr, 1e3 * sub_hh,
                    syevj_info ? " (syevj did not converge)" : "");
        std::printf("RESULT bench_gpu_refresh n=%d N=%d r1=%d exact_ms=%.3f subspace_ms=%.3f ratio=%.2f gram_ms=%.3f "
                    "q2_ms=%.3f cap_g=%.2f syevd_b_ms=%.3f b=%d syevj_b_ms=%.3f syevj_info=%d syevj_eig_rel_err=%.3g "
                    "orth_shifted=%d orth_shifted_passes=%d orth_householder=%d subspace_householder_ms=%.3f "
                    "potrf_b_upper_ms=%.3f potrf_b_lower_ms=%.3f\n",
                    n, N, d.r1, 1e3 * ex, 1e3 * sub, ex / sub, 1e3 * gram, 1e3 * q2, cap, 1e3 * syevd_b, b,
                    1e3 * syevj_b, syevj_info, eig_err, warm.q1_shifted_qr, warm.q1_shifted_passes,
                    warm.q1_householder_qr, 1e3 * sub_hh, 1e3 * potrf_b[0], 1e3 * potrf_b[1]);

        // where a warm subspace refresh's time goes: GPU ms per part, and the host's share of the wall time
        PracRefreshProfile prof;
        PracCudaHandles hp = h;
        hp.profile = &prof;
        for (int i = 0; i < reps; i++) {
            restore_basis();
            prac_refresh_cuda(P, x, N, n, ds, true, true, true, {1, 0, 0, draw++}, hp, ws, bytes);
        }
        const double wall = prof.wall_ms / prof.calls, parts = prof.parts_ms() / prof.calls;
        if (parts > wall * 1.001 + 0.01) {  // the parts are disjoint spans of one call: they cannot add up to more
            std::fprintf(stderr, "bench_gpu_refresh: the profiled parts add up to %.3f ms, above the call's %.3f ms "
                         "wall time: overlapping parts (a bug in prac_refresh_cuda's profile)\n", parts, wall);
            return 1;
        }
        std::string line, result;
        for (const auto& part : prof.parts) {
            char cell[128];
            std::snprintf(cell, sizeof cell, " %s %.2f (%d)", part.name.c_str(), part.ms / prof.calls,
                          part.calls / prof.calls);
            line += cell;
            std::snprintf(cell, sizeof cell, " %s_ms=%.3f %s_calls=%d", part.name.c_str(), part.ms / prof.calls,
                          part.name.c_str(), part.calls / prof.calls);
            result += cell;
        }
        std::printf("        subspace parts, GPU ms (calls):%s; host (launches, %d info reads) %.2f of %.2f ms "
                    "wall\n",
                    line.c_str(), prof.host_reads / prof.calls, wall - parts, wall);
        std::printf("RESULT bench_gpu_refresh_parts n=%d wall_ms=%.3f host_ms=%.3f host_reads=%d%s\n", n, wall,
                    wall - parts, prof.host_reads / prof.calls, result.c_str());
        cudaCheck(cudaFree(ws));
        cudaCheck(cudaFree(P));
        cudaCheck(cudaFree(P_prev));
        cudaCheck(cudaFree(x));
    }
    cusolverCheck(cusolverDnDestroy(cusolver));
    cublasCheck(cublasDestroy(cublas));
    cudaCheck(cudaStreamDestroy(stream));
    return 0;
}

int main(int argc, char** argv) {
    // line-buffered: a run killed at its time limit (scripts/gpu_verify.sh, gpu_followup.sh log to a file) keeps the
    // RESULT lines it printed
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        return bench_main(argc, argv);
    } catch (const UserError& e) {  // a flag's value: before any GPU work
        std::fprintf(stderr, "bench_gpu_refresh: %s\n", e.what());
        return 2;
    }
}
