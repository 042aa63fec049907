// PRAC refresh cost on the CPU backend: one refresh (Q1 and Q2) of one site per width, exact (Gram + full
// eigensolver) and subspace (warm-started, as every refresh after the first in training) side by side, their
// ratio, and the amortized cost at T1 = T2 = 500 of all of a model's refreshes as a fraction of a training step.
// Beside them, the parts no faster Q1 method avoids, and the ratio they cap: the Q2 draw (both methods draw the
// same Q2), with the Gram matrix XᵀX (any method that solves on G) or with one power step on X itself, Xᵀ(X V) for
// the block V (n, b) (a method that never forms G; every step costs this much).
// The CUDA backend's counterpart is tools/bench_gpu_refresh.cu.
//
//   ./build/tools/bench_refresh [--N TOKENS] [--max-elems E] [--widths 768,2048,...] [--exact-max-n N] [--model M]
//   ./build/tools/bench_refresh --npy PREV.npy,CUR.npy    (one dumped site: --dump-site at two steps)
//
// The synthetic sites (tools/synthetic_site.h) have the shape of real activation spectra; the warm start's basis
// comes from a cold refresh on another batch whose top direction is turned, as the model moves in training. The orth
// column says how often the refresh's orthonormalizations needed more than CholQR2.
//
// N = B·T is 32768 unless N·n would exceed --max-elems (default 2^25 floats, 128 MiB of X): then N is scaled down
// (to a multiple of 64, never below n rounded up to 64, whatever --max-elems says) and the output says so. Widths
// above --exact-max-n (default 5461) skip the exact path (minutes on 2 cores), the model's sites too. The step time
// is estimated as 6·params·N / (the sgemm rate measured here), said so in the output; --model none skips that part
// (it times the exact path at the model's widths, the longest part of a run). --npy takes N and n from the dumps:
// --N, --max-elems, --widths and --model are refused with it.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/npy.h"
#include "common/strings.h"  // parse_whole, split_commas
#include "model/config.h"
#include "prac/prac.h"
#include "tools/synthetic_site.h"

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
    double exact = -1, subspace = -1;
    double subspace_hh = -1;  // the subspace refresh with Householder QR where CholQR2 fails (shifted_passes 0)
    double gram = -1;   // the Gram matrix alone (ssyrk), a part of both
    double q2 = -1;     // the Q2 draw alone (Gaussian, projection, CholQR2), a part of both
    double xpass = -1;  // one power step on X without G: Y = X V (N, b), Z = Xᵀ Y (n, b)
    int N = 0;
    PracRefreshResult warm;  // the timed subspace refresh's result (its orthonormalization fallbacks)
};

// A failed refresh's time is not a refresh's: the bench stops, naming it.
static void must_succeed(const PracRefreshResult& r, const char* what, int n) {
    if (!r.q1_ok || !r.q2_ok)
        fail("the %s refresh at n = %d failed: %s (what a training run does then; this benchmark of the refresh "
             "stops)", what, n, r.message.c_str());
}

// x (N, n) timed, warm-started from the basis of a cold refresh on x_prev (N_prev, n)
static Timing time_refresh(const std::vector<float>& x, const std::vector<float>& x_prev, int N, int N_prev, int n,
                           bool run_exact) {
    Timing t;
    t.N = N;
    PracOptions o;
    o.mode = PracMode::PRAC;
    SiteDims d = prac_site_dims(o, SiteClass::LINEAR, n, "bench");  // linear ranks: the widest Q1 (0.3 n)
    std::vector<float> P((size_t)n * d.r(), 0.0f);
    d.refresh = PracRefresh::SUBSPACE;
    must_succeed(prac_refresh_cpu(P.data(), x_prev.data(), N_prev, n, d, true, true, false, {1, 0, 0, 0}),
                 "first (cold) subspace", n);
    const std::vector<float> P_prev = P;
    double t0 = now_s();
    t.warm = prac_refresh_cpu(P.data(), x.data(), N, n, d, true, true, true, {1, 0, 0, 1});  // warm, as in training
    t.subspace = now_s() - t0;
    must_succeed(t.warm, "timed subspace", n);
    {  // the same refresh with Householder QR wherever CholQR2 fails (no shifted Cholesky-QR)
        std::vector<float> Ph = P_prev;
        SiteDims dh = d;
        dh.subspace.shifted_passes = 0;
        t0 = now_s();
        const PracRefreshResult r = prac_refresh_cpu(Ph.data(), x.data(), N, n, dh, true, true, true, {1, 0, 0, 1});
        t.subspace_hh = now_s() - t0;
        must_succeed(r, "Householder subspace", n);
    }
    t0 = now_s();
    const PracRefreshResult q2 = prac_refresh_cpu(P.data(), x.data(), N, n, d, false, true, true, {1, 0, 0, 3});
    t.q2 = now_s() - t0;  // (Q2 only)
    must_succeed(q2, "Q2-only", n);
    {
        std::vector<float> G((size_t)n * n);
        t0 = now_s();
        cblas_ssyrk(CblasColMajor, CblasLower, CblasNoTrans, n, N, 1.0f, x.data(), n, 0.0f, G.data(), n);
        t.gram = now_s() - t0;
    }
    {
        int b = d.block(n);
        std::vector<float> V((size_t)n * b, 0.01f), Y((size_t)N * b), Z((size_t)n * b);
        t0 = now_s();
        gemm_cpu(false, false, N, b, n, 1.0f, x.data(), n, V.data(), b, 0.0f, Y.data(), b);  // X V
        gemm_cpu(true, false, n, b, N, 1.0f, x.data(), n, Y.data(), b, 0.0f, Z.data(), b);   // Xᵀ Y
        t.xpass = now_s() - t0;
    }
    if (run_exact) {
        d.refresh = PracRefresh::EXACT;
        t0 = now_s();
        const PracRefreshResult r = prac_refresh_cpu(P.data(), x.data(), N, n, d, true, true, true, {1, 0, 0, 2});
        t.exact = now_s() - t0;
        must_succeed(r, "exact", n);
    }
    return t;
}

// a synthetic site (tools/synthetic_site.h): x, and the warm start's batch with the top direction turned
static Timing time_width(int n, int N, bool run_exact) {
    return time_refresh(synthetic_site(N, n, 1000 + n), synthetic_site(N, n, 2000 + n, SYNTHETIC_TURN), N, N, n,
                        run_exact);
}

// "S(p)/H": how many of the refresh's orthonormalizations left CholQR2 for shifted Cholesky-QR (S, in p passes) and
// for Householder QR (H)
static std::string orth_fallbacks(const PracRefreshResult& r) {
    return std::to_string(r.q1_shifted_qr) + "(" + std::to_string(r.q1_shifted_passes) + ")/" +
           std::to_string(r.q1_householder_qr);
}

// The rows N of a synthetic site of width n: N_full unless N_full·n floats exceed max_elems; then the most (a multiple
// of 64) that fit, never fewer than n rounded up to 64 (a small --max-elems cannot make N 0 or N < n), never more
// than N_full.
static int rows_for_width(int n, int N_full, size_t max_elems) {
    if ((size_t)N_full * n <= max_elems) return N_full;
    int fit = (int)(max_elems / n) / 64 * 64;  // < N_full here
    return std::min(N_full, std::max(fit, (n + 63) / 64 * 64));
}

// sgemm rate (FLOP/s) at a transformer-like shape: (N, C) x (C, 4C)
static double gemm_rate(int N, int C) {
    std::vector<float> a((size_t)N * C, 0.5f), b((size_t)C * 4 * C, 0.25f), c((size_t)N * 4 * C);
    gemm_cpu(false, false, N, 4 * C, C, 1.0f, a.data(), C, b.data(), 4 * C, 0.0f, c.data(), 4 * C);  // warm-up
    double t0 = now_s();
    gemm_cpu(false, false, N, 4 * C, C, 1.0f, a.data(), C, b.data(), 4 * C, 0.0f, c.data(), 4 * C);
    return 2.0 * N * 4.0 * C * C / (now_s() - t0);
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured (a run takes minutes)
    try {
        int N_full = 32768, exact_max = 5461;
        size_t max_elems = (size_t)1 << 25;
        std::vector<int> widths = {768, 2048, 3072, 4096, 5461, 10922};
        std::string model = "llama-130m";
        std::vector<std::string> npy;  // --npy PREV,CUR
        bool bf16 = false;             // --bf16: the dumps hold bfloat16 bits as '<u2'
        std::vector<std::string> synthetic_flags;  // those given of --N, --max-elems, --widths, --model: not for --npy
        const int MAX_WIDTH = 1 << 20;            // (an n x n Gram matrix of 4 TiB)
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            auto val = [&]() -> std::string {
                if (i + 1 >= argc) fail("%s needs a value", a.c_str());
                return argv[++i];
            };
            if (a == "-h" || a == "--help") {
                std::printf(
                    "usage: bench_refresh [--N TOKENS] [--max-elems E] [--widths 768,2048,...] [--exact-max-n N] "
                    "[--model M]\n       bench_refresh --npy PREV.npy,CUR.npy [--bf16]\n\n"
                    "One PRAC refresh per site width on the CPU backend, exact vs subspace, side by side, and the "
                    "amortized\nrefresh cost at T1 = T2 = 500 as a fraction of a training step.\n"
                    "  --N TOKENS       rows of the site's activation (default 32768; scaled down to fit --max-elems, "
                    "said so)\n"
                    "  --max-elems E    most floats of one activation (default 33554432: 128 MiB)\n"
                    "  --widths W,...   site widths (default 768,2048,3072,4096,5461,10922)\n"
                    "  --exact-max-n N  widths above N skip the exact path, the model's sites too (default 5461; "
                    "minutes on 2 cores)\n"
                    "  --model M        the LLaMA model whose step time the amortized cost is a fraction of (default "
                    "llama-130m; none: skip)\n"
                    "  --npy PREV,CUR   one dumped site at two steps (trainers' --dump-site) instead of synthetic "
                    "ones\n                   (its N and n are the dumps': --N, --max-elems, --widths and --model are "
                    "refused with it)\n"
                    "  --bf16           the --npy dumps are '<u2' bfloat16 bit patterns (as prac_analyze --bf16)\n");
                return 0;
            }
            if (a == "--N" || a == "--max-elems" || a == "--widths" || a == "--model") synthetic_flags.push_back(a);
            if (a == "--N") N_full = (int)parse_whole("--N", val(), 1, INT_MAX);
            else if (a == "--max-elems") max_elems = (size_t)parse_whole("--max-elems", val(), 1, LLONG_MAX);
            else if (a == "--exact-max-n") exact_max = (int)parse_whole("--exact-max-n", val(), 0, INT_MAX);
            else if (a == "--model") model = val();
            else if (a == "--bf16") bf16 = true;
            else if (a == "--npy") {
                std::string v = val();
                size_t comma = v.find(',');
                CHECK_USER(comma != std::string::npos && comma > 0 && comma + 1 < v.size() &&
                               v.find(',', comma + 1) == std::string::npos,
                           "--npy needs PREV.npy,CUR.npy: two files (got '%s')", v.c_str());
                npy = {v.substr(0, comma), v.substr(comma + 1)};
            } else if (a == "--widths") {
                widths.clear();
                std::string v = val();
                for (const std::string& w : split_commas(v)) {
                    if (w.empty())
                        fail("--widths: '%s' has an empty width\n---> HINT: comma-separated widths, e.g. --widths "
                             "768,2048", v.c_str());
                    widths.push_back((int)parse_whole("--widths", w, 1, MAX_WIDTH));
                    // ranks r1 = r2 = 0.3 n, at least 8 each: the width must leave a remainder to compress
                    if (widths.back() <= 16)
                        fail("--widths: %d is too narrow for the bench's ranks r1 = r2 = 8 (0.3 n, at least 8 "
                             "each; they must sum below n)\n---> HINT: widths of 17 or more", widths.back());
                }
            } else fail("unknown argument %s\n---> HINT: --help lists them", a.c_str());
        }
        if (!npy.empty())
            for (const std::string& f : synthetic_flags)
                fail("%s does nothing with --npy (the dumps give the site's N and width; no model is estimated)",
                     f.c_str());
        CHECK_USER(!bf16 || !npy.empty(), "--bf16 goes with --npy (it says how the dumps are stored)");
        // the model before any timing: a bad --model is refused at once, not after minutes of widths
        ModelConfig cfg;
        if (npy.empty() && model != "none") {
            std::vector<std::string> names = model_config_names(Arch::LLAMA);
            bool looks_like_file = model.find('/') != std::string::npos || model.find(".json") != std::string::npos;
            if (!looks_like_file && std::find(names.begin(), names.end(), model) == names.end()) {
                fail("--model: unknown model '%s' (a LLaMA model's step time is estimated)\n---> HINT: use one of: "
                     "none, %s; or a path to a Hugging Face LlamaConfig config.json", model.c_str(), join(names).c_str());
            }
            cfg = model_config_load(Arch::LLAMA, model);  // a config.json's errors name the file
        }
        std::printf("PRAC refresh, CPU backend (fp32, LAPACK), one site with linear ranks r1 = r2 = 0.3 n; subspace = "
                    "warm start, %d power step(s) + the Nyström extraction, oversampling max(16, r1/8)\n",
                    PracSubspaceParams().warm_iters);
        std::printf("(gram s: the Gram matrix XᵀX alone; q2 s: the Q2 draw alone; both methods pay both. cap G: exact / "
                    "(gram + q2), the most any method that forms G can gain; X step s: one power step on X, Xᵀ(X V), "
                    "the least a method that never forms G pays; cap X: exact / (X step + q2); orth S(p)/H: the "
                    "subspace refresh's orthonormalizations that CholQR2 could not do, by shifted Cholesky-QR (in p "
                    "passes) / by Householder QR; HH s: the subspace refresh with Householder QR for those instead)\n");
        std::printf("%7s %7s %6s %9s %11s %7s %8s %7s %7s %9s %7s %8s %7s\n", "n", "N", "r1", "exact s", "subspace s",
                    "ratio", "gram s", "q2 s", "cap G", "X step s", "cap X", "orth", "HH s");
        auto print_row = [&](int n, const Timing& t, const char* note) {
            int r1 = prac_round_rank(0.3f, n);
            if (t.exact > 0)
                std::printf("%7d %7d %6d %9.3f %11.3f %6.1fx %8.3f %7.3f %6.1fx %9.3f %6.1fx %8s %7.3f%s\n", n, t.N,
                            r1, t.exact, t.subspace, t.exact / t.subspace, t.gram, t.q2, t.exact / (t.gram + t.q2),
                            t.xpass, t.exact / (t.xpass + t.q2), orth_fallbacks(t.warm).c_str(), t.subspace_hh, note);
            else
                std::printf("%7d %7d %6d %9s %11.3f %7s %8.3f %7.3f %7s %9.3f %7s %8s %7.3f%s\n", n, t.N, r1,
                            "skipped", t.subspace, "-", t.gram, t.q2, "-", t.xpass, "-", orth_fallbacks(t.warm).c_str(),
                            t.subspace_hh, (std::string("  (exact above --exact-max-n)") + note).c_str());
        };
        if (!npy.empty()) {  // a dumped site: CUR warm-started from a cold refresh on PREV
            NpyArray prev = read_npy(npy[0], bf16), cur = read_npy(npy[1], bf16);
            for (const NpyArray* a : {&prev, &cur})  // asked for bits a file does not hold: refused, not ignored
                CHECK_USER(!bf16 || a->dtype.find("u2") != std::string::npos,
                           "--npy: %s has dtype '%s', not the '<u2' bfloat16 bit patterns --bf16 says\n---> HINT: drop "
                           "--bf16 (a float file is read as it is)", a == &prev ? npy[0].c_str() : npy[1].c_str(),
                           a->dtype.c_str());
            for (NpyArray* a : {&prev, &cur})
                if (a->shape.size() == 3) a->shape = {a->shape[0] * a->shape[1], a->shape[2]};
            CHECK_USER(prev.shape.size() == 2 && cur.shape.size() == 2 && prev.shape[1] == cur.shape[1] &&
                           prev.shape[0] > 0 && cur.shape[0] > 0 && cur.shape[0] <= INT_MAX && prev.shape[0] <= INT_MAX,
                       "--npy: %s and %s must be (N, n) activations of one site (same n)\n---> HINT: two --dump-site "
                       "dumps of the same site and layer at different --dump-step", npy[0].c_str(), npy[1].c_str());
            int n = (int)cur.shape[1];
            CHECK_USER(n > 16, "--npy: the dumps are %d wide, too narrow for the bench's ranks r1 = r2 = 8 (0.3 n, at "
                       "least 8 each; they must sum below n)\n---> HINT: dumps of a site 17 or more wide", n);
            for (const NpyArray* a : {&prev, &cur})  // (a refresh of zeros times nothing; prac_analyze refuses it too)
                CHECK_USER(std::any_of(a->data.begin(), a->data.end(), [](float x) { return x != 0.0f; }),
                           "--npy: %s is all zeros; there is no spectrum to refresh", a == &prev ? npy[0].c_str()
                                                                                                    : npy[1].c_str());
            print_row(n, time_refresh(cur.data, prev.data, (int)cur.shape[0], (int)prev.shape[0], n, n <= exact_max),
                      "  (--npy: a dumped site)");
            return 0;
        }
        for (int n : widths) {
            int N = rows_for_width(n, N_full, max_elems);
            print_row(n, time_width(n, N, n <= exact_max),
                      (size_t)N * n > max_elems ? "  (above --max-elems: N is never scaled below n)"
                      : N < N_full              ? "  (N scaled down from the real shape: CPU memory/time)"
                                                : "");
        }
        if (model == "none") return 0;
        // amortized: every site of every layer refreshes Q1 and Q2 once per 500 steps (staggered or not)
        int C = cfg.channels, F = cfg.hidden, L = cfg.num_layers;
        std::vector<int> site_widths = {C, C, C, C, F, F, F};  // resid, ln1, resid_mid, ln2, fch_gate, fch_act, fch_up
        // one N for every site: the least that fits, as the widths above, but never below the widest site's width
        // rounded up to 64 (as a width above gets), whatever --max-elems says
        const int widest = std::max(C, F);
        int N = N_full;
        for (int n : site_widths) N = std::min(N, rows_for_width(n, N_full, max_elems));
        if (N < N_full) N = std::min(N_full, std::max(N, (widest + 63) / 64 * 64));
        double ex = 0, sub = 0;
        int exact_skipped = 0;  // the widest site above --exact-max-n (0: none)
        std::map<int, Timing> at_n;
        for (int n : site_widths) {
            bool run_exact = n <= exact_max;
            if (!run_exact) exact_skipped = std::max(exact_skipped, n);
            if (!at_n.count(n)) at_n[n] = time_width(n, N, run_exact);
            if (run_exact) ex += at_n[n].exact * L;
            sub += at_n[n].subspace * L;
        }
        double params = 0;
        {
            // 12 C^2-ish per layer for LLaMA: attention 4 C^2, MLP 3 C F; plus the LM head's V C (the input
            // embedding is a lookup, not a matmul)
            params = (double)L * (4.0 * C * C + 3.0 * C * F) + (double)cfg.vocab_size * C;
        }
        double rate = gemm_rate(std::min(N, 4096), C), step = 6 * params * N / rate;
        std::string scaled = N < N_full ? ", scaled down" : "";
        if ((size_t)N * widest > max_elems) scaled += ", above --max-elems (N is never scaled below the widest site)";
        std::printf("\n%s (L = %d, site widths %d and %d, N = %d%s): one training step ~ %.1f s (estimated: 6 x %.0fM "
                    "params x N / the %.1f GFLOP/s sgemm measured here)\n", model.c_str(), L, C, F, N,
                    scaled.c_str(), step, params / 1e6, rate / 1e9);
        if (exact_skipped == 0) {
            std::printf("all refreshes of the model: exact %.2f s, subspace %.2f s (%.1fx)\n", ex, sub, ex / sub);
            std::printf("amortized at T1 = T2 = 500: exact %.3f%% of step time, subspace %.3f%%\n",
                        100 * ex / 500 / step, 100 * sub / 500 / step);
        } else {
            std::printf("all refreshes of the model: exact skipped (site width %d above --exact-max-n %d), subspace "
                        "%.2f s\n", exact_skipped, exact_max, sub);
            std::printf("amortized at T1 = T2 = 500: exact skipped, subspace %.3f%% of step time\n",
                        100 * sub / 500 / step);
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_refresh: %s\n", e.what());
        return 1;
    }
}
