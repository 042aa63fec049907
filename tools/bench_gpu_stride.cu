// bench_gpu_stride: does padding the row stride of LLaMA's F-wide tensors pay on this GPU? LLaMA-1B's F = 5461 is
// odd, so every (N, F) activation row and every row of down_proj's weight (C, F) starts at a 2-byte-aligned address
// and cuBLAS(Lt) must use its low-alignment kernels for every MLP GEMM and every PRAC GEMM on the F-wide sites
// (docs/DESIGN.md "Row strides"). The cure is a storage stride Fs = F rounded up to --pad elements (zero columns,
// the model's F unchanged). This times the GEMMs of one LLaMA layer's MLP with the shapes, leading dimensions and
// calls of the trainer (kernels/matmul_cuda.cu's cuBLASLt products, prac/prac_cuda.cu's cublasGemmEx products) in
// three layouts, side by side in one run:
//   none  every F-wide row at stride F (what the trainer does today)
//   acts  the (N, F) activations and their gradients at stride Fs; down_proj's weight (C, F) and its gradient at F
//   all   also down_proj's weight and gradient at stride Fs
// and checks that each padded layout computes what `none` computes (relative Frobenius difference within the storage
// type's rounding; pad columns hold NaN, so a product that reads one fails). The GPU recipe (scripts/gpu_verify.sh
// run_benchmarks) runs it as it runs every tools/bench_gpu*.
//
//   build/tools/bench_gpu_stride [--quick] [--tiny] [--model llama-1b] [--C C --F F] [--N TOKENS] [--pad 8]
//                                [--iters 10]
//
// N defaults to 32768 tokens (bench_gpu's llama-1b micro-batch, 128 x 256); --quick (gpu_verify's benchmark step):
// 8192 and 5 iterations.
// Per product: the minimum over 3 rounds of the mean of `iters` back-to-back calls (cudaEvent timing) after a
// warm-up call. Sums per layer: the baseline MLP (9 GEMMs) and PRAC's MLP at the paper's ranks (the weight gradients
// of down_proj and of gate|up come from the factored products, plus compress and reconstruct); x L layers per
// step. One "RESULT bench_gpu_stride ..." line. Exits 77 without a GPU (1 with REQUIRE_GPU=1), 1 when a padded
// layout computes something else.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/cuda_common.cuh"  // floatX, PRAC_FLOATX_NAME
#include "common/device.h"         // gpu_unavailable_exit_code
#include "common/strings.h"        // parse_whole
#include "kernels/matmul.cuh"      // gemm_cuda, CublasLt, FLOATX_CUDA_DTYPE
#include "model/config.h"
#include "prac/prac.h"
#include "prac/prac_cuda.cuh"  // prac_gemm_rm

using act_t = floatX;
static const cudaDataType_t XT = FLOATX_CUDA_DTYPE;

// A row-major (rows, cols) device matrix at row stride ld >= cols, its pad columns NaN (a product that reads one
// gives NaN).
struct Mat {
    act_t* p = nullptr;
    int rows = 0, cols = 0, ld = 0;
};

// rows x cols logical values: N(0, 1), or zeros
static std::vector<float> values(int rows, int cols, std::mt19937_64& g, bool random) {
    std::vector<float> v((size_t)rows * cols, 0.0f);
    std::normal_distribution<float> z;
    if (random)
        for (float& x : v) x = z(g);
    return v;
}

// A device copy of v (rows, cols) at row stride ld
static Mat upload(const std::vector<float>& v, int rows, int cols, int ld) {
    Mat m{nullptr, rows, cols, ld};
    std::vector<act_t> h((size_t)rows * ld, (act_t)std::numeric_limits<float>::quiet_NaN());
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) h[(size_t)i * ld + j] = (act_t)v[(size_t)i * cols + j];
    cudaCheck(cudaMalloc(&m.p, h.size() * sizeof(act_t)));
    cudaCheck(cudaMemcpy(m.p, h.data(), h.size() * sizeof(act_t), cudaMemcpyHostToDevice));
    return m;
}
static Mat make_mat(int rows, int cols, int ld, std::mt19937_64& g, bool random) {
    return upload(values(rows, cols, g, random), rows, cols, ld);
}

static std::vector<double> logical(const Mat& a) {
    std::vector<act_t> h((size_t)a.rows * a.ld);
    cudaCheck(cudaMemcpy(h.data(), a.p, h.size() * sizeof(act_t), cudaMemcpyDeviceToHost));
    std::vector<double> v((size_t)a.rows * a.cols);
    for (int i = 0; i < a.rows; i++)
        for (int j = 0; j < a.cols; j++) v[(size_t)i * a.cols + j] = (double)(float)h[(size_t)i * a.ld + j];
    return v;
}

// The tensors of one layout. Inputs hold the same logical values in every layout; outputs are written.
struct Layout {
    const char* name;
    int fa, fw;                          // row stride of the (N, F) activations and of the (C, F) weights
    Mat gate, act, dgate, Wd;            // inputs: (N, F) x3 at fa, down_proj's weight (C, F) at fw
    Mat gate_out, dact, recon, dWd;      // outputs: (N, F) x3 at fa, down_proj's weight gradient (C, F) at fw
};

struct Product {
    const char* name;
    int per_layer;  // calls per layer
    bool baseline;  // in the baseline layer's MLP
    bool prac;      // in PRAC's layer (the factored weight gradients replace dWd and dWg)
    std::function<void(Layout&)> run;
    std::function<Mat*(Layout&)> out;  // what it writes, zeroed before the check call
};

static int bench_main(int argc, char** argv) {
    std::string model = "llama-1b";
    int C = 0, F = 0, N = -1, pad = 8, iters = -1, rounds = 3;
    bool tiny = false, quick = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "bench_gpu_stride: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--quick") quick = true;
        else if (a == "--tiny") tiny = true;
        else if (a == "--model") model = val();
        else if (a == "--C") C = (int)parse_whole("--C", val(), 1, 1 << 20);
        else if (a == "--F") F = (int)parse_whole("--F", val(), 1, 1 << 20);
        else if (a == "--N") N = (int)parse_whole("--N", val(), 1, 1 << 24);
        else if (a == "--pad") pad = (int)parse_whole("--pad", val(), 1, 256);
        else if (a == "--iters") iters = (int)parse_whole("--iters", val(), 1, 100000);
        else if (a == "-h" || a == "--help") {
            std::printf("usage: bench_gpu_stride [--quick] [--tiny] [--model llama-1b] [--C C --F F] [--N TOKENS] "
                        "[--pad 8] [--iters 10]\n"
                        "  times one LLaMA layer's MLP GEMMs (baseline and PRAC) with F-wide rows at stride F and at\n"
                        "  stride F rounded up to --pad elements; N 32768 (llama-1b's 128 x 256; --quick: 8192 and 5\n"
                        "  iterations); --tiny: C 64, F 173, N 256, 1 iteration (a smoke run)\n");
            return 0;
        } else {
            std::fprintf(stderr, "bench_gpu_stride: unknown flag %s\n---> HINT: --help lists the flags\n", a.c_str());
            return 2;
        }
    }
    if (N < 0) N = quick ? 8192 : 32768;
    if (iters < 0) iters = quick ? 5 : 10;
    int L = 0;
    if (tiny) {
        C = 64, F = 173, N = 256, iters = 1, rounds = 1, L = 2;
    } else if (C == 0 && F == 0) {
        ModelConfig cfg = model_config_load(Arch::LLAMA, model);
        C = cfg.channels, F = cfg.hidden, L = cfg.num_layers;
    }
    if (C < 1 || F < 1 || N < 1 || pad < 1 || iters < 1 || (C > 0) != (F > 0)) {
        std::fprintf(stderr, "bench_gpu_stride: --C, --F (both or neither), --N, --pad and --iters must be positive\n");
        return 2;
    }
    const int Fs = (F + pad - 1) / pad * pad;
    int unavailable = gpu_unavailable_exit_code("bench_gpu_stride");
    if (unavailable >= 0) return unavailable;

    cudaStream_t stream;
    cublasHandle_t cublas;
    cudaCheck(cudaStreamCreate(&stream));
    cublasCheck(cublasCreate(&cublas));
    cublasCheck(cublasSetStream(cublas, stream));
    CublasLt lt;

    // PRAC's ranks at the paper's fractions (prac_site_dims): gate and up nonlinear, the SwiGLU output (down_proj's
    // input) linear; ln2 (width C) is the input of gate|up, its factored weight gradient reads dgate
    PracOptions o;
    o.mode = PracMode::PRAC;
    const int r_nl = prac_site_dims(o, SiteClass::NONLINEAR, F, "fch_gate").r();
    const int r_lin = prac_site_dims(o, SiteClass::LINEAR, F, "fch_act").r();
    const int r_ln2 = prac_site_dims(o, SiteClass::LINEAR, C, "ln2").r();

    std::mt19937_64 g(5461);
    // stride-independent tensors, shared by the layouts
    Mat ln2 = make_mat(N, C, C, g, true), Wg = make_mat(F, C, C, g, true), dresid = make_mat(N, C, C, g, true);
    Mat out = make_mat(N, C, C, g, false), dln2 = make_mat(N, C, C, g, false), dWg = make_mat(F, C, C, g, false);
    Mat P_nl = make_mat(F, r_nl, r_nl, g, true), P_lin = make_mat(F, r_lin, r_lin, g, true);
    Mat xc_nl = make_mat(N, r_nl, r_nl, g, true), xc_lin_out = make_mat(N, r_lin, r_lin, g, false);
    Mat xc_ln2 = make_mat(N, r_ln2, r_ln2, g, true), tmp_lin = make_mat(C, r_lin, r_lin, g, true);
    Mat tmp_ln2 = make_mat(F, r_ln2, r_ln2, g, false), xc_nl_out = make_mat(N, r_nl, r_nl, g, false);

    std::vector<Layout> layouts = {{"none", F, F}, {"acts", Fs, F}, {"all", Fs, Fs}};
    const std::vector<float> gate = values(N, F, g, true), act = values(N, F, g, true), dgate = values(N, F, g, true),
                             Wd = values(C, F, g, true);
    for (Layout& l : layouts) {  // the same inputs in every layout
        l.gate = upload(gate, N, F, l.fa), l.act = upload(act, N, F, l.fa), l.dgate = upload(dgate, N, F, l.fa);
        l.Wd = upload(Wd, C, F, l.fw);
        l.gate_out = make_mat(N, F, l.fa, g, false), l.dact = make_mat(N, F, l.fa, g, false);
        l.recon = make_mat(N, F, l.fa, g, false), l.dWd = make_mat(C, F, l.fw, g, false);
    }

    // The products, each with the arguments of its call in the trainer (model/llama.h forward/backward, the site's
    // weight_grad). Shapes: ln2 (N, C), Wg (F, C) (gate_proj; up_proj alike), act = SwiGLU output (N, F), Wd (C, F)
    // down_proj, dresid (N, C), dgate (N, F) (dup alike).
    auto lt_gemm = [&](bool ta, bool tb, int M, int Nn, int K, const Mat& A, const Mat& B, float beta, Mat& Cm) {
        gemm_cuda(ta, tb, M, Nn, K, 1.0f, A.p, XT, A.ld, B.p, XT, B.ld, beta, Cm.p, XT, Cm.ld, lt, stream);
    };
    auto rm_gemm = [&](bool ta, bool tb, int M, int Nn, int K, const Mat& A, const Mat& B, float beta, Mat& Cm) {
        prac_gemm_rm(cublas, ta, tb, M, Nn, K, 1.0f, A.p, XT, A.ld, B.p, XT, B.ld, beta, Cm.p, XT, Cm.ld);
    };
    std::vector<Product> products = {
        // matmul_forward(gate, ln2, w_gate, N, C, F); up alike
        {"gate/up fwd  ln2 Wg^T", 2, true, true, [&](Layout& l) { lt_gemm(false, true, N, F, C, ln2, Wg, 0, l.gate_out); },
         [](Layout& l) { return &l.gate_out; }},
        // matmul_forward(out, act, Wd, N, F, C)
        {"down fwd     act Wd^T", 1, true, true, [&](Layout& l) { lt_gemm(false, true, N, C, F, l.act, l.Wd, 0, out); },
         [&](Layout&) { return &out; }},
        // matmul_backward_input(dact, dresid, Wd, N, F, C, false)
        {"dact         dresid Wd", 1, true, true, [&](Layout& l) { lt_gemm(false, false, N, F, C, dresid, l.Wd, 0, l.dact); },
         [](Layout& l) { return &l.dact; }},
        // matmul_backward_weight(dWd, dresid, act, N, F, C): accumulates (beta 1)
        {"dWd          dresid^T act", 1, true, false,
         [&](Layout& l) { lt_gemm(true, false, C, F, N, dresid, l.act, 1, l.dWd); },
         [](Layout& l) { return &l.dWd; }},
        // matmul_backward_weight(dWg, dgate, ln2, N, C, F); dWu alike
        {"dWg/dWu      dgate^T ln2", 2, true, false,
         [&](Layout& l) { lt_gemm(true, false, F, C, N, l.dgate, ln2, 1, dWg); }, [&](Layout&) { return &dWg; }},
        // matmul_backward_input(dln2, dgate, Wg, N, C, F, false), then dup's with accumulate
        {"dln2         dgate Wg", 1, true, true, [&](Layout& l) { lt_gemm(false, false, N, C, F, l.dgate, Wg, 0, dln2); },
         [&](Layout&) { return &dln2; }},
        {"dln2 (+=)    dup Wu", 1, true, true, [&](Layout& l) { lt_gemm(false, false, N, C, F, l.dgate, Wg, 1, dln2); },
         [&](Layout&) { return &dln2; }},
        // PRAC (prac/prac_cuda.cu): prac_compress(xc, gate, P, N, F, r) for gate and up, and for act
        {"compress     gate/up P", 2, false, true,
         [&](Layout& l) { rm_gemm(false, false, N, r_nl, F, l.gate, P_nl, 0, xc_nl_out); },
         [&](Layout&) { return &xc_nl_out; }},
        {"compress     act P", 1, false, true,
         [&](Layout& l) { rm_gemm(false, false, N, r_lin, F, l.act, P_lin, 0, xc_lin_out); },
         [&](Layout&) { return &xc_lin_out; }},
        // prac_reconstruct(gate, xc, P, N, F, r) for gate and up in backward
        {"reconstruct  xc P^T", 2, false, true,
         [&](Layout& l) { rm_gemm(false, true, N, F, r_nl, xc_nl, P_nl, 0, l.recon); },
         [](Layout& l) { return &l.recon; }},
        // prac_weight_grad(dWd, dresid, xc, P, N, F, r, C): its second product writes dWd (C, F)
        {"dWd factored tmp P^T", 1, false, true,
         [&](Layout& l) { rm_gemm(false, true, C, F, r_lin, tmp_lin, P_lin, 1, l.dWd); },
         [](Layout& l) { return &l.dWd; }},
        // prac_weight_grad(dWg, dgate, xc_ln2, P_ln2, N, C, r, F): its first product reads dgate (N, F); dWu alike
        {"dWg factored dgate^T xc", 2, false, true,
         [&](Layout& l) { rm_gemm(true, false, F, r_ln2, N, l.dgate, xc_ln2, 0, tmp_ln2); },
         [&](Layout&) { return &tmp_ln2; }},
    };

    // 1. every padded layout computes what `none` computes
    const double tol = sizeof(act_t) == 2 ? 1e-2 : 1e-5;
    bool ok = true;
    for (Product& p : products) {
        std::vector<double> ref;
        for (Layout& l : layouts) {
            Mat& o_ = *p.out(l);
            cudaCheck(cudaMemset(o_.p, 0, (size_t)o_.rows * o_.ld * sizeof(act_t)));
            p.run(l);
            cudaCheck(cudaStreamSynchronize(stream));
            std::vector<double> v = logical(o_);
            if (&l == &layouts[0]) {
                ref = v;
                continue;
            }
            double d2 = 0, r2 = 0;
            for (size_t e = 0; e < v.size(); e++) d2 += (v[e] - ref[e]) * (v[e] - ref[e]), r2 += ref[e] * ref[e];
            double rel = std::sqrt(d2 / std::max(r2, 1e-300));
            if (!(rel <= tol)) {  // NaN fails too
                std::fprintf(stderr, "bench_gpu_stride: %s in layout %s differs from layout none: relative Frobenius "
                             "difference %.3g > %.0e\n", p.name, l.name, rel, tol);
                ok = false;
            }
        }
    }
    if (!ok) return 1;

    // 2. timings
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    auto time_ms = [&](Product& p, Layout& l) {
        p.run(l);  // warm-up (and the cuBLASLt plan)
        double best = 1e30;
        for (int round = 0; round < rounds; round++) {
            cudaCheck(cudaEventRecord(e0, stream));
            for (int it = 0; it < iters; it++) p.run(l);
            cudaCheck(cudaEventRecord(e1, stream));
            cudaCheck(cudaEventSynchronize(e1));
            float ms = 0;
            cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
            best = std::min(best, (double)ms / iters);
        }
        return best;
    };
    std::printf("LLaMA MLP GEMMs of one layer, %s storage, fp32 accumulation: C = %d, F = %d, N = %d tokens; padded "
                "stride Fs = %d (--pad %d); PRAC ranks: gate/up %d, act %d, ln2 %d\n",
                PRAC_FLOATX_NAME, C, F, N, Fs, pad, r_nl, r_lin, r_ln2);
    std::printf("%-26s %5s %10s %10s %10s %9s %9s\n", "product", "calls", "none ms", "acts ms", "all ms", "none/acts",
                "none/all");
    double base[3] = {0, 0, 0}, prac[3] = {0, 0, 0};
    for (Product& p : products) {
        double t[3];
        for (int k = 0; k < 3; k++) t[k] = time_ms(p, layouts[k]);
        std::printf("%-26s %5d %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", p.name, p.per_layer, t[0], t[1], t[2],
                    t[0] / t[1], t[0] / t[2]);
        for (int k = 0; k < 3; k++) {
            if (p.baseline) base[k] += p.per_layer * t[k];
            if (p.prac) prac[k] += p.per_layer * t[k];
        }
    }
    std::printf("%-26s %5s %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", "baseline layer MLP", "", base[0], base[1], base[2],
                base[0] / base[1], base[0] / base[2]);
    std::printf("%-26s %5s %10.3f %10.3f %10.3f %8.2fx %8.2fx\n", "PRAC layer MLP", "", prac[0], prac[1], prac[2],
                prac[0] / prac[1], prac[0] / prac[2]);
    if (L > 0)
        std::printf("per step (x %d layers, one micro-batch of N): baseline saves %.2f ms (acts) / %.2f ms (all), "
                    "PRAC %.2f / %.2f ms; compare with bench_gpu's ms/step at the same N\n",
                    L, L * (base[0] - base[1]), L * (base[0] - base[2]), L * (prac[0] - prac[1]),
                    L * (prac[0] - prac[2]));
    std::printf("RESULT bench_gpu_stride C=%d F=%d Fs=%d N=%d layers=%d base_none_ms=%.4f base_acts_ms=%.4f "
                "base_all_ms=%.4f prac_none_ms=%.4f prac_acts_ms=%.4f prac_all_ms=%.4f\n",
                C, F, Fs, N, L, base[0], base[1], base[2], prac[0], prac[1], prac[2]);
    cublasCheck(cublasDestroy(cublas));
    return 0;
}

int main(int argc, char** argv) {
    // line-buffered: a run killed at its time limit (scripts/gpu_verify.sh, gpu_followup.sh log to a file) keeps the
    // RESULT lines it printed
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    try {
        return bench_main(argc, argv);
    } catch (const UserError& e) {  // a flag's value, an unknown --model: before any GPU work
        std::fprintf(stderr, "bench_gpu_stride: %s\n", e.what());
        return 2;
    }
}
