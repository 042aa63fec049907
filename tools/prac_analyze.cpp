// prac_analyze: the singular-value spectrum of one activation matrix X (N, n) (an .npy file, e.g. from a trainer's
// --dump-site) and what PRAC's estimator does to it: the paper's Figure 2 analysis, and a check of Theorem 1 on real
// activations. The spectrum comes from the eigenvalues of the float64 Gram matrix XᵀX (never an SVD of the tall X).
// The estimator part runs the trainer's own CPU ops (prac_site_dims, prac_refresh_cpu, prac_compress_cpu,
// prac_reconstruct_cpu) over K draws and compares the measured bias and variance with the closed form.
// The closed form and why it holds: docs/DESIGN.md section 4.5.
#include <fcntl.h>
#include <omp.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cblas.h>
#include <cerrno>
#include <cfloat>  // FLT_MAX
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lapacke.h>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/numbers.h"  // typed_as_decimal
#include "common/files.h"  // dir_of, probe_create
#include "common/npy.h"  // read_npy
#include "common/strings.h"  // join
#include "prac/prac.h"  // prac_site_dims, prac_refresh_cpu, prac_compress_cpu, prac_reconstruct_cpu
#include "tools/analyze_verdict.h"  // judge_estimator

extern char** environ;

using json = nlohmann::json;

static const char* PROGRAM = "prac_analyze";

static const char* HELP =
    "usage: prac_analyze FILE.npy [--bf16] [--r1 N --r2 N | --r1-frac F --r2-frac F] [--mode prac|pac|rac|none]\n"
    "                    [--k-mult M] [--draws K] [--seed S] [--refresh auto|exact|subspace] [--warm-from A.npy,...]\n"
    "                    [--json] [--png OUT.png] [--help]\n"
    "\n"
    "Singular-value spectrum of an activation matrix X (N, n), and the bias and variance of PRAC's\n"
    "reconstruction X~ = X P Pᵀ, P = [Q1 | sqrt(k) Q2], measured over K draws of Q2 and compared with theory.\n"
    "\n"
    "input\n"
    "  FILE.npy          2-D (N, n) array (rows = tokens, columns = features), float32 '<f4' or float16 '<f2';\n"
    "                    a 3-D (B, T, n) array is read as (B*T, n). Make one with a trainer's --dump-site, or\n"
    "                    np.save(path, x.astype(np.float32)).\n"
    "  --bf16            the file is '<u2' holding bfloat16 bit patterns (torch: x.view(torch.uint16).numpy())\n"
    "\n"
    "ranks (a linear site, exactly as the trainer computes them; defaults r1 = r2 = 0.3 n rounded down to a\n"
    "multiple of 8, at least 8)\n"
    "  --r1 N, --r2 N    absolute ranks (the trainer's --prac-linear-ranks N1,N2)\n"
    "  --r1-frac F, --r2-frac F   ranks as fractions of n (the trainer's --prac-linear F1,F2)\n"
    "  --mode MODE       prac (default) | pac: r1 + r2 principal, no random part | rac: r1 + r2 random, no Q1 |\n"
    "                    none: the spectrum only (the trainer's --prac)\n"
    "  --k-mult M        k = M (n - r1) / r2 (1 = unbiased; the trainer's --prac-k-mult)\n"
    "  --draws K         draws of Q2 (default 32; pac is deterministic and runs one)\n"
    "  --seed S          seed of the draws (default 42; draw d uses PracDrawKey{S, site 0, layer 0, refresh d})\n"
    "  --refresh M       how Q1 is found, as the trainer's --prac-refresh: auto (= subspace, the default) | exact\n"
    "                    | subspace\n"
    "  --warm-from LIST  comma-separated earlier dumps of the same site (same n), oldest first: Q1 is refreshed on\n"
    "                    each in turn, each warm-started from the previous one's, and the last Q1 warm-starts\n"
    "                    FILE's refresh, as in training every T1 steps (default: a cold start on FILE); only\n"
    "                    with --refresh subspace and a mode with a Q1 (prac, pac)\n"
    "\n"
    "output\n"
    "  (default)         a table on stdout; progress on stderr for large inputs\n"
    "  --json            one JSON object on stdout instead (fields below)\n"
    "  --png OUT.png     also plot the spectrum and the cumulative energy (needs python3 with matplotlib;\n"
    "                    runs scripts/plot_spectrum.py on the JSON)\n"
    "  --help            this text\n"
    "\n"
    "JSON fields (σ_1 >= σ_2 >= ... >= σ_n: the singular values of X; energy(r) = Σ_{i<=r} σ_i² / Σ σ_i²)\n"
    "  file, dtype, shape [N, n], reshaped_from (the 3-D shape, or null), frobenius_sq (||X||_F²)\n"
    "  singular_values     all n, descending (values below about 1e-8 σ_1 are float64 round-off)\n"
    "  cumulative_energy   all n: entry i is energy(i + 1)\n"
    "  spectrum            top (up to 10 σ), at_fraction [{fraction, rank, sigma}] for 10/25/50/75/90% of n\n"
    "                      (rank = max(1, floor(fraction n))), effective_rank (exp of the entropy of\n"
    "                      σ_i² / Σ σ²), stable_rank (||X||_F² / σ_1²)\n"
    "  energy              at_fraction [{fraction, rank, energy}] for 1/5/10/20/30/50% of n, at_r1, at_r (r1 + r2),\n"
    "                      rank_for [{energy, rank}]: the smallest rank reaching 90/95/99% of the energy\n"
    "  ranks               {mode, r1, r2, k, k_mult} after the mode is applied (pac: r1 = r1 + r2, r2 = 0;\n"
    "                      rac: r1 = 0, r2 = r1 + r2), or null with --mode none\n"
    "  estimator           null with --mode none, else:\n"
    "    draws, seed\n"
    "    refresh, warm_starts  --refresh, and how many --warm-from refreshes came before FILE's\n"
    "    orth_fallbacks        {shifted_cholqr, shifted_passes, householder}: FILE's subspace refresh's\n"
    "                          orthonormalizations whose CholQR2 failed and what took over (shifted Cholesky-QR, or\n"
    "                          Householder QR when that failed too; shifted_passes counts every shifted pass tried,\n"
    "                          a failed attempt's too): a matter of speed, not of quality\n"
    "    tail_energy           T = ||X - X Q1 Q1ᵀ||_F² with the Q1 the trainer computes (--refresh)\n"
    "    tail_energy_spectrum  Σ_{i>r1} σ_i² (T for an exact Q1)\n"
    "    tail_ratio            tail_energy / tail_energy_spectrum (>= 1 up to rounding; the subspace refresh's bar\n"
    "                          is 1.02 times the exact refresh's tail_energy)\n"
    "    tail_at_rounding      tail_energy_spectrum < 1e-5 ||X||_F²: the tail is within float32 rounding of the\n"
    "                          Gram matrix, and tail_ratio and mse_ratio measure the rounding (a warning says so)\n"
    "    bias_sq_theory        ||E[X~] - X||_F² = (c - 1)² T, c = k r2 / (n - r1); pac: T\n"
    "    variance_theory       E||X~ - E[X~]||_F² = c (k - c) T; k_mult = 1: (k - 1) T; pac: 0\n"
    "    mse_theory            E||X~ - X||_F² = bias_sq_theory + variance_theory (the variance when unbiased)\n"
    "    mse_theory_spectrum   the same with tail_energy_spectrum for T\n"
    "    mse_empirical, mse_stderr   mean over draws of ||X~_d - X||_F², and its standard error\n"
    "    mse_ratio             mse_empirical / mse_theory (null when the theory is 0)\n"
    "    variance_empirical    Σ_d ||X~_d - mean(X~)||_F² / (K - 1) (null for K = 1; pac: 0, it draws nothing)\n"
    "    bias_rel_empirical    ||mean_d(X~_d) - X||_F / ||X||_F\n"
    "    bias_rel_expected     sqrt(bias_sq_theory + variance_theory / K) / ||X||_F: what bias_rel_empirical\n"
    "                          should be about; for an unbiased estimator it is sqrt(Var / K) / ||X||_F\n"
    "    bias_dot_x_empirical, bias_dot_x_stderr   mean over draws of <X~_d - X, X>, and its standard error\n"
    "    bias_dot_x_theory     (c - 1) T (pac: -T): E[X~] - X = (c - 1) X (I - Q1 Q1ᵀ), whose product with X is\n"
    "                          (c - 1) T; 0 when unbiased\n"
    "  verdict               null with --mode none, else {result, checks, not_judged}: do the draws agree with\n"
    "                        the theory of the Q1 used? result is consistent | inconsistent | not judged; each\n"
    "                        check {name, measured, expected, allowed, consistent}:\n"
    "    mse                   |mse_empirical - mse_theory| <= allowed = max(t s.e., 1e-3 mse_theory), t Student's\n"
    "                          two-sided quantile at 1e-6 with K - 1 degrees of freedom\n"
    "    bias                  |bias_dot_x_empirical - bias_dot_x_theory| <= max(t s.e., 1e-6 ||X||_F²)\n"
    "                        not judged (not_judged says why): fewer than 8 draws, pac (no draws), T = 0,\n"
    "                        tail_at_rounding. The tail ratio is no check: it describes the refresh, whose T the\n"
    "                        theory takes (compare --refresh exact)\n"
    "\n"
    "exit status: 0 ok (the verdict consistent or not judged), 1 bad input (message on stderr), 2 internal error,\n"
    "3 the verdict is inconsistent (the whole analysis is still printed)\n";

// ----------------------------------------------------------------------------
// flags

struct Args {
    std::string file;
    bool bf16 = false;
    int r1 = -1, r2 = -1;               // absolute ranks, -1 = not given
    float r1_frac = -1, r2_frac = -1;   // fractions, -1 = not given
    std::string mode = "prac";
    float k_mult = 1.0f;
    long long draws = 32;
    uint64_t seed = 42;
    bool json = false;
    std::string png;
    bool help = false;
    std::string refresh = "subspace";
    std::vector<std::string> warm_from;
    std::vector<std::string> given;  // the flags on the command line, in order
};

static long long parse_int(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end || errno) fail("flag %s needs an integer, got \"%s\"", flag.c_str(), v.c_str());
    return x;
}

static float parse_float(const std::string& flag, const std::string& v) {
    char* end = nullptr;
    errno = 0;
    float x = std::strtof(v.c_str(), &end);
    if (!typed_as_decimal(v) || *end || (!std::isfinite(x) && !(errno == ERANGE && std::isinf(x))))
        fail("flag %s needs a finite decimal number, got \"%s\"", flag.c_str(), v.c_str());
    // (an underflow to a subnormal or 0 is a value: a range check names it if it matters); as the trainers' flags, no
    // setting means anything beyond 1e9 (--k-mult 1e37 made k, and every result, inf or NaN with exit 0)
    if (!std::isfinite(x) || std::fabs(x) > 1e9f)
        fail("flag %s: %s is out of range (|value| <= 1e9)", flag.c_str(), v.c_str());
    return x;
}

static int parse_rank(const std::string& flag, const std::string& v) {
    long long x = parse_int(flag, v);
    if (x < 0 || x > INT_MAX) fail("flag %s: rank %s must be a non-negative integer", flag.c_str(), v.c_str());
    return (int)x;
}

static Args parse_args(int argc, char** argv) {
    static const char* VALUE_FLAGS[] = {"--r1", "--r2", "--r1-frac", "--r2-frac", "--mode", "--k-mult",
                                        "--draws", "--seed", "--png",
                                        "--refresh", "--warm-from"};
    static const char* SWITCHES[] = {"--bf16", "--json", "--help", "-h"};
    Args a;
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i], value;
        if (arg.rfind("-", 0) != 0 || arg == "-") {
            if (!a.file.empty())
                fail("two input files given (\"%s\" and \"%s\")\n---> HINT: prac_analyze reads one .npy file",
                     a.file.c_str(), arg.c_str());
            a.file = arg;
            continue;
        }
        bool has_inline = false;
        size_t eq = arg.find('=');
        if (eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
            has_inline = true;
        }
        bool is_switch = false, is_value = false;
        for (const char* s : SWITCHES) is_switch |= arg == s;
        for (const char* s : VALUE_FLAGS) is_value |= arg == s;
        if (is_switch || is_value) a.given.push_back(arg);
        if (is_switch) {
            if (has_inline) fail("flag %s takes no value", arg.c_str());
            if (arg == "--bf16") a.bf16 = true;
            if (arg == "--json") a.json = true;
            if (arg == "--help" || arg == "-h") a.help = true;
            continue;
        }
        if (!is_value)
            fail("unknown flag \"%s\"\n---> HINT: prac_analyze --help lists every flag", arg.c_str());
        if (!has_inline) {
            if (i + 1 >= argc) fail("flag %s needs a value", arg.c_str());
            value = argv[++i];
        }
        if (arg == "--r1") a.r1 = parse_rank(arg, value);
        if (arg == "--r2") a.r2 = parse_rank(arg, value);
        if (arg == "--r1-frac") a.r1_frac = parse_float(arg, value);
        if (arg == "--r2-frac") a.r2_frac = parse_float(arg, value);
        if (arg == "--mode") a.mode = value;
        if (arg == "--k-mult") a.k_mult = parse_float(arg, value);
        if (arg == "--draws") a.draws = parse_int(arg, value);
        if (arg == "--seed") {
            char* end = nullptr;
            errno = 0;
            unsigned long long s = std::strtoull(value.c_str(), &end, 10);
            if (value.empty() || value[0] == '-' || *end || errno)
                fail("flag --seed needs a non-negative integer, got \"%s\"", value.c_str());
            a.seed = s;
        }
        if (arg == "--png") a.png = value;
        if (arg == "--refresh") a.refresh = value == "auto" ? "subspace" : value;  // the trainer's auto is subspace
        if (arg == "--warm-from") {
            size_t at = 0;
            while (at <= value.size()) {
                size_t c = value.find(',', at);
                std::string f = value.substr(at, c == std::string::npos ? std::string::npos : c - at);
                if (f.empty()) fail("--warm-from: empty file name in \"%s\"", value.c_str());
                a.warm_from.push_back(f);
                if (c == std::string::npos) break;
                at = c + 1;
            }
        }
    }
    if (a.help) return a;
    if (a.file.empty()) fail("no input file\n---> HINT: prac_analyze FILE.npy [options]; --help lists them");
    if (a.r1 >= 0 && a.r1_frac >= 0) fail("give --r1 or --r1-frac, not both");
    if (a.r2 >= 0 && a.r2_frac >= 0) fail("give --r2 or --r2-frac, not both");
    for (float f : {a.r1_frac, a.r2_frac})
        if (f != -1 && !(f >= 0 && f < 1))
            fail("rank fractions must be in [0, 1), got %g\n---> HINT: --r1-frac 0.3 means 30%% of the width", f);
    if (a.draws < 1) fail("--draws must be at least 1 (got %lld)", a.draws);
    if (a.draws > 1000000) fail("--draws %lld is more than anyone needs; the standard error falls as 1/sqrt(K)",
                                a.draws);
    if (!a.png.empty() && (a.png.size() < 5 || a.png.compare(a.png.size() - 4, 4, ".png") != 0))
        fail("--png %s: the output name must end in .png", a.png.c_str());
    // --warm-from feeds the subspace refresh of Q1: with none to warm-start it would be read and ignored
    if (!a.warm_from.empty() && (a.mode == "none" || a.mode == "rac" || a.refresh == "exact"))
        fail("--warm-from warm-starts the subspace refresh of Q1, and %s\n---> HINT: drop --warm-from, or analyze "
             "with --mode prac (or pac) and --refresh subspace",
             a.mode == "none"  ? "--mode none computes none (the spectrum only)"
             : a.mode == "rac" ? "--mode rac has no Q1 (its whole rank is random)"
                               : "--refresh exact solves from scratch");
    if (a.mode == "none") {  // the spectrum only: the estimator's flags change nothing (said, as the trainers do)
        const std::vector<std::string> used = {"--mode", "--bf16", "--json", "--png"};
        std::string unused;
        for (const std::string& f : a.given)
            if (std::find(used.begin(), used.end(), f) == used.end() && unused.find(f + " ") == std::string::npos)
                unused += f + " ";
        if (!unused.empty())
            std::fprintf(stderr, "%s: notice: %s%s nothing with --mode none (the spectrum only)\n", PROGRAM,
                         unused.c_str(), unused.find(' ') + 1 == unused.size() ? "changes" : "change");
    }
    if (a.mode == "pac") {  // a deterministic estimator: nothing random to scale, draw or seed
        std::string unused;
        for (const char* f : {"--k-mult", "--draws"})  // (--seed: the subspace refresh's sketch draws from it)
            if (std::find(a.given.begin(), a.given.end(), f) != a.given.end()) unused += std::string(f) + " ";
        if (!unused.empty())
            std::fprintf(stderr, "%s: notice: %s%s nothing with --mode pac (its basis is all principal: no "
                         "random part to scale or draw)\n", PROGRAM, unused.c_str(),
                         unused.find(' ') + 1 == unused.size() ? "changes" : "change");
    }
    return a;
}

// ----------------------------------------------------------------------------
// helpers

static bool large_input = false;  // print progress on stderr

static void progress(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char* fmt, ...) {
    if (!large_input) return;
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "%s: %s\n", PROGRAM, s.c_str());
}

static std::string shape_str(const std::vector<int64_t>& s) {
    return "(" + join(s) + (s.size() == 1 ? ",)" : ")");
}

// An activation matrix X (N, n) from PATH (FILE or a --warm-from file): float32, float16 or, with --bf16, bfloat16
// bits; a 3-D (B, T, n) array read as (B*T, n) (its shape in *reshaped_from); each dimension 1 .. 2^31 - 1; every
// value finite. Anything else fails naming PATH.
static NpyArray read_activations(const std::string& path, bool bf16, std::vector<int64_t>* reshaped_from) {
    NpyArray arr = read_npy(path, bf16);
    if (bf16 && arr.dtype.find("u2") == std::string::npos)  // asked for bits the file does not hold: not ignored
        fail("%s: dtype '%s' is not '<u2' bfloat16 bit patterns as --bf16 says\n---> HINT: drop --bf16 (a float "
             "file is read as it is)", path.c_str(), arr.dtype.c_str());
    reshaped_from->clear();
    if (arr.shape.size() == 3) {
        *reshaped_from = arr.shape;
        std::fprintf(stderr, "%s: note: reading the 3-D array %s of %s as (B*T, n) = (%lld, %lld)\n", PROGRAM,
                     shape_str(arr.shape).c_str(), path.c_str(), (long long)(arr.shape[0] * arr.shape[1]),
                     (long long)arr.shape[2]);
        arr.shape = {arr.shape[0] * arr.shape[1], arr.shape[2]};
    } else if (arr.shape.size() != 2) {
        fail("%s: expected a 2-D activation matrix (N, n) or a 3-D (B, T, n) array, got shape %s\n"
             "---> HINT: save X with rows = tokens and columns = features, e.g. x.reshape(-1, x.shape[-1])",
             path.c_str(), shape_str(arr.shape).c_str());
    }
    const int64_t N = arr.shape[0], n = arr.shape[1];
    if (N == 0 || n == 0) fail("%s: X of shape %s has no elements", path.c_str(), shape_str(arr.shape).c_str());
    if (N > INT_MAX || n > INT_MAX)
        fail("%s: shape %s is too large (each dimension must be below 2^31)", path.c_str(),
             shape_str(arr.shape).c_str());
    const float* X = arr.data.data();
    for (size_t i = 0; i < arr.data.size(); i++)
        if (!std::isfinite(X[i]))
            fail("%s: X[%zu, %zu] = %g is not finite\n---> HINT: the activations diverged before the dump; analyze "
                 "a finite X", path.c_str(), i / (size_t)n, i % (size_t)n, X[i]);
    return arr;
}

// JSON has no NaN; nlohmann writes a NaN double as null, which is what we want for "undefined".
static const double UNDEFINED = NAN;

static bool file_exists(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// scripts/plot_spectrum.py next to the executable (it is built at the repository root), else in the source tree.
static std::string find_plot_script() {
    std::vector<std::string> tried;
    char buf[4096];
    ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (len > 0) {
        buf[len] = '\0';
        tried.push_back(dir_of(buf) + "/scripts/plot_spectrum.py");
    }
    tried.push_back(std::string(PRAC_SOURCE_DIR) + "/scripts/plot_spectrum.py");
    for (const std::string& p : tried)
        if (file_exists(p)) return p;
    fail("--png: cannot find plot_spectrum.py (looked for %s)\n"
         "---> HINT: run the prac_analyze built in the repository, or use --json and plot the JSON yourself",
         tried.size() > 1 ? (tried[0] + " and " + tried[1]).c_str() : tried[0].c_str());
}

// Runs python3 with these arguments (no shell: file names with spaces or quotes are fine); returns its exit
// status, 127 when python3 is not on PATH.
static int run_python(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    std::string py = "python3";
    argv.push_back(py.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t pid;
    int err = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ);
    if (err == ENOENT) return 127;
    if (err != 0) fail("--png: cannot start python3: %s", strerror(err));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) fail("--png: waiting for python3: %s", strerror(errno));
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

static const char* PLOT_HINT =
    "---> HINT: pip install matplotlib (for the python3 on PATH), or use --json and plot the JSON yourself";
static const char* PYTHON_HINT =
    "---> HINT: install Python 3 and then pip install matplotlib, or use --json and plot the JSON yourself";

// where plot() writes the JSON it hands to the script
static std::string temp_dir() {
    const char* tmpdir = std::getenv("TMPDIR");
    return tmpdir && *tmpdir ? tmpdir : "/tmp";
}

// Fails early (before the analysis, which may take minutes) when --png cannot work; returns the script's path.
static std::string check_plotting(const std::string& png) {
    struct stat st;
    std::string dir = dir_of(png);
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        fail("--png %s: the directory %s does not exist\n---> HINT: create it first", png.c_str(), dir.c_str());
    if (stat(png.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        fail("--png %s is a directory\n---> HINT: name a .png file (in it, or elsewhere)", png.c_str());
    // an earlier picture (or an empty file) is replaced; someone's other file, a pipe or a device is not
    // (scripts/save_figure.py's rule)
    if (stat(png.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        fail("--png %s is not a regular file (a pipe or a device): writing the picture would replace it\n---> HINT: "
             "name a .png file", png.c_str());
    char head[4] = {0};
    FILE* existing = stat(png.c_str(), &st) == 0 ? std::fopen(png.c_str(), "rb") : nullptr;
    const bool png_there = existing && std::fread(head, 1, 4, existing) == 4 && std::memcmp(head, "\x89PNG", 4) == 0;
    if (existing) std::fclose(existing);
    if (stat(png.c_str(), &st) == 0 && st.st_size > 0 && !png_there)  // (an empty file holds nothing to lose)
        fail("--png %s exists and is not a .png picture (not an earlier plot): left as it is\n---> HINT: pass another "
             "path, or remove it", png.c_str());
    for (const std::string& d : {dir, temp_dir()}) {  // the PNG's directory and TMPDIR must each take a file
        if (const int err = probe_create(d))
            fail("--png %s: cannot create a file in %s (%s)\n---> HINT: %s", png.c_str(), d.c_str(), strerror(err),
                 d == dir ? "write the PNG to a writable directory" : "point TMPDIR at a writable directory");
    }
    std::string script = find_plot_script();
    int rc = run_python({script, "--check"});
    if (rc == 127) fail("--png needs python3, which is not on PATH\n%s", PYTHON_HINT);
    if (rc == 3) fail("--png needs matplotlib, which the python3 on PATH cannot import\n%s", PLOT_HINT);
    if (rc != 0) fail("--png: %s --check failed (exit %d)\n%s", script.c_str(), rc, PLOT_HINT);
    return script;
}

static void plot(const std::string& script, const json& j, const std::string& png) {
    std::string tmpl = temp_dir() + "/prac_analyze.XXXXXX.json";
    int fd = mkstemps(tmpl.data(), 5);
    if (fd < 0) fail("--png: cannot create a temporary file %s: %s", tmpl.c_str(), strerror(errno));
    std::string text = j.dump();
    bool ok = write(fd, text.data(), text.size()) == (ssize_t)text.size();
    close(fd);
    if (!ok) {
        unlink(tmpl.c_str());
        fail("--png: cannot write the temporary file %s: %s", tmpl.c_str(), strerror(errno));
    }
    int rc = run_python({script, tmpl, png});
    unlink(tmpl.c_str());
    if (rc == 127) fail("--png needs python3, which is not on PATH\n%s", PYTHON_HINT);
    if (rc == 3) fail("--png needs matplotlib, which the python3 on PATH cannot import\n%s", PLOT_HINT);
    if (rc != 0) fail("--png: %s failed (exit %d) writing %s; its message is above", script.c_str(), rc, png.c_str());
    std::fprintf(stderr, "%s: wrote %s\n", PROGRAM, png.c_str());
}

// ----------------------------------------------------------------------------
// the spectrum

struct Spectrum {
    std::vector<double> sigma;       // n, descending
    std::vector<double> cum_energy;  // n: entry i = Σ_{j<=i} σ_j² / Σ σ²
    double fro2 = 0;                 // ||X||_F², summed directly
};

static Spectrum spectrum(const float* X, int N, int n) {
    Spectrum s;
    double fro2 = 0;
#pragma omp parallel for reduction(+ : fro2)
    for (int64_t i = 0; i < (int64_t)N * n; i++) fro2 += (double)X[i] * X[i];
    s.fro2 = fro2;

    // G = XᵀX in float64, accumulated over row blocks so X is never held twice in double
    progress("X^T X in float64 (%d x %d, %d rows)", n, n, N);
    std::vector<double> G((size_t)n * n, 0.0);
    const int BLOCK = 4096;
    std::vector<double> xd((size_t)std::min(N, BLOCK) * n);
    for (int r0 = 0; r0 < N; r0 += BLOCK) {
        int rows = std::min(BLOCK, N - r0);
#pragma omp parallel for
        for (int64_t i = 0; i < (int64_t)rows * n; i++) xd[i] = X[(size_t)r0 * n + i];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, n, rows, 1.0, xd.data(), n, 1.0, G.data(), n);
    }
    progress("eigenvalues of X^T X (dsyevd)");
    std::vector<double> w(n);
    int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'N', 'U', n, G.data(), n, w.data());
    if (info != 0) fail("the eigenvalue solver failed on X^T X (LAPACK dsyevd info %d)", info);
    // ascending eigenvalues λ = σ²; tiny negative ones are round-off of zero singular values
    s.sigma.resize(n);
    double total = 0;
    for (int i = 0; i < n; i++) {
        double lam = std::max(w[n - 1 - i], 0.0);
        s.sigma[i] = std::sqrt(lam);
        total += lam;
    }
    s.cum_energy.resize(n);
    double acc = 0;
    for (int i = 0; i < n; i++) {
        acc += s.sigma[i] * s.sigma[i];
        s.cum_energy[i] = acc / total;
    }
    return s;
}

static double energy_at(const Spectrum& s, int r) {
    return r <= 0 ? 0.0 : s.cum_energy[std::min<size_t>(r, s.sigma.size()) - 1];
}

static int rank_for(const Spectrum& s, double frac) {
    for (size_t i = 0; i < s.cum_energy.size(); i++)
        if (s.cum_energy[i] >= frac) return (int)i + 1;
    return (int)s.cum_energy.size();
}

static int rank_at_percent(int pct, int n) { return std::max(1, (int)((int64_t)pct * n / 100)); }

// ----------------------------------------------------------------------------
// the estimator

struct EstimatorResult {
    int draws = 0;
    double tail = 0, tail_spectrum = 0, c = 1;
    double bias_sq_theory = 0, variance_theory = 0, mse_theory = 0, mse_theory_spectrum = 0;
    double mse_empirical = 0, mse_stderr = UNDEFINED, variance_empirical = UNDEFINED;
    double bias_rel_empirical = 0, bias_rel_expected = 0;
    double bias_dot_mean = 0, bias_dot_stderr = UNDEFINED;  // b_d = <X~_d - X, X> over the draws (verdict's bias)
    double bias_dot_theory = 0;  // E[b_d] = (c - 1) T (pac: -T)
    PracRefreshResult refresh;  // FILE's refresh (its orthonormalization fallbacks)
};

// Rows per step of the compress/reconstruct loop: bounds the scratch (rows x (n + r)) at any N.
static const int CHUNK_ROWS = 2048;

static void check_refresh(const PracRefreshResult& res, const char* what) {
    if (!res.q1_ok || !res.q2_ok)
        fail("the %s failed: %s (what a training run does then; this analysis of the refresh stops)\n---> HINT: X "
             "may be too ill-conditioned for fp32 (check for huge values)", what, res.message.c_str());
}

// Tests only (as common/kill_point.h): PRAC_TEST_ANALYZE_Q2_SCALE=S multiplies the reconstruction's random part by S
// (k off by that factor: P = [Q1 | sqrt(k) Q2] enters the compression and the reconstruction), a broken estimator
// whose draws the verdict must find inconsistent with the theory (exit status 3).
static void test_scale_q2(std::vector<float>& P, int n, int r1, int r) {
    const char* s = std::getenv("PRAC_TEST_ANALYZE_Q2_SCALE");
    if (!s) return;
    const float f = std::sqrt(std::strtof(s, nullptr));
    for (int i = 0; i < n; i++)
        for (int c = r1; c < r; c++) P[(size_t)i * r + c] *= f;
}

// P (n, r): the basis of the warm-start refreshes (had_basis), or zeros for a cold start
static EstimatorResult estimate(const float* X, int N, int n, const SiteDims& d, const Spectrum& sp, long long K,
                                uint64_t seed, std::vector<float> P, bool had_basis) {
    EstimatorResult e;
    int r1 = d.r1, r2 = d.r2, r = d.r();
    if (r2 == 0) K = 1;  // pac: X~ = X Q1 Q1ᵀ, the same every draw
    e.draws = (int)K;
    PracDrawKey key{seed, 0, 0, 0};
    progress("Q1: top %d eigenvectors of the fp32 Gram matrix (the trainer's refresh)", r1);
    e.refresh = prac_refresh_cpu(P.data(), X, N, n, d, true, true, had_basis, key);
    check_refresh(e.refresh, "basis refresh (Q1 and Q2)");
    test_scale_q2(P, n, r1, r);

    // T = ||X - X Q1 Q1ᵀ||_F² with the Q1 the trainer computed, summed over row chunks in double
    int rows_max = std::min(N, CHUNK_ROWS);
    std::vector<float> xc((size_t)rows_max * r), xt((size_t)rows_max * n);
    if (r1 == 0) {
        e.tail = sp.fro2;
    } else {
        std::vector<float> q1((size_t)n * r1);
        for (int i = 0; i < n; i++)
            std::memcpy(&q1[(size_t)i * r1], &P[(size_t)i * r], (size_t)r1 * sizeof(float));
        double tail = 0;
        for (int r0 = 0; r0 < N; r0 += CHUNK_ROWS) {
            int rows = std::min(CHUNK_ROWS, N - r0);
            const float* x = X + (size_t)r0 * n;
            prac_compress_cpu(xc.data(), x, q1.data(), rows, n, r1);
            prac_reconstruct_cpu(xt.data(), xc.data(), q1.data(), rows, n, r1);
#pragma omp parallel for reduction(+ : tail)
            for (int64_t i = 0; i < (int64_t)rows * n; i++) {
                double diff = (double)x[i] - xt[i];
                tail += diff * diff;
            }
        }
        e.tail = tail;
    }
    for (int i = r1; i < n; i++) e.tail_spectrum += sp.sigma[i] * sp.sigma[i];

    // theory (see the top of the file); c from the float k the trainer uses, so k_mult = 1 gives c = 1 to fp32
    if (r2 == 0) {
        e.bias_sq_theory = e.tail;
        e.variance_theory = 0;
    } else {
        e.c = (double)d.k * r2 / (double)(n - r1);
        e.bias_sq_theory = (e.c - 1) * (e.c - 1) * e.tail;
        e.variance_theory = e.c * ((double)d.k - e.c) * e.tail;
    }
    e.mse_theory = e.bias_sq_theory + e.variance_theory;
    // E[X~] - X = (c - 1) X⊥ (pac: -X⊥), and <X⊥, X> = T
    e.bias_dot_theory = r2 == 0 ? -e.tail : (e.c - 1) * e.tail;
    double factor = r2 == 0 ? 1.0 : (e.c - 1) * (e.c - 1) + e.c * ((double)d.k - e.c);  // mse = factor * T
    e.mse_theory_spectrum = factor * e.tail_spectrum;

    // K draws of Q2: accumulate mean(X~) and ||X~_d - X||_F² per draw
    std::vector<float> acc((size_t)N * n, 0.0f);
    std::vector<double> err(K, 0.0), dot(K, 0.0);
    for (long long dr = 0; dr < K; dr++) {
        if (dr > 0) {
            key.refresh = (uint64_t)dr;
            check_refresh(prac_refresh_cpu(P.data(), X, N, n, d, false, true, true, key), "Q2 draw");
            test_scale_q2(P, n, r1, r);
        }
        double ed = 0, bd = 0;
        for (int r0 = 0; r0 < N; r0 += CHUNK_ROWS) {
            int rows = std::min(CHUNK_ROWS, N - r0);
            const float* x = X + (size_t)r0 * n;
            float* a = acc.data() + (size_t)r0 * n;
            prac_compress_cpu(xc.data(), x, P.data(), rows, n, r);
            prac_reconstruct_cpu(xt.data(), xc.data(), P.data(), rows, n, r);
#pragma omp parallel for reduction(+ : ed, bd)
            for (int64_t i = 0; i < (int64_t)rows * n; i++) {
                double diff = (double)xt[i] - x[i];
                ed += diff * diff;
                bd += diff * x[i];
                a[i] += xt[i];
            }
        }
        err[dr] = ed;
        dot[dr] = bd;
        if (K > 1) progress("draw %lld/%lld: ||X~ - X||_F^2 = %.6e", dr + 1, K, ed);
    }

    // mean and standard error over the draws (one draw: no s.e., unless pac's is deterministic)
    auto mean_and_stderr = [&](const std::vector<double>& v, double* mean, double* se) {
        *mean = 0;
        for (double x : v) *mean += x / (double)K;
        if (K > 1) {
            double ss = 0;
            for (double x : v) ss += (x - *mean) * (x - *mean);
            *se = std::sqrt(ss / (double)(K - 1) / (double)K);
        } else if (r2 == 0) {
            *se = 0;
        }
    };
    mean_and_stderr(err, &e.mse_empirical, &e.mse_stderr);
    mean_and_stderr(dot, &e.bias_dot_mean, &e.bias_dot_stderr);
    const double mean = e.mse_empirical;
    double bias2 = 0;
    const double inv_k = 1.0 / (double)K;
#pragma omp parallel for reduction(+ : bias2)
    for (int64_t i = 0; i < (int64_t)N * n; i++) {
        double diff = (double)acc[i] * inv_k - X[i];
        bias2 += diff * diff;
    }
    double norm = std::sqrt(sp.fro2);
    e.bias_rel_empirical = std::sqrt(bias2) / norm;
    e.bias_rel_expected = std::sqrt(e.bias_sq_theory + e.variance_theory / (double)K) / norm;
    // (1/K) Σ ||X~_d - X||² = (1/K) Σ ||X~_d - mean||² + ||mean - X||²
    if (K > 1) e.variance_empirical = std::max(0.0, (mean - bias2) * (double)K / (double)(K - 1));
    else if (r2 == 0) e.variance_empirical = 0;
    return e;
}

// ----------------------------------------------------------------------------
// report

static json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// Below this fraction of ||X||_F² the tail past r1 is within the float32 Gram matrix's rounding: the ratios of
// tails and of errors built on it measure the rounding as much as the refresh. Measured: a GPT-2 fch dump (rank <= C
// of its 4C columns), T / ||X||² = 1e-12: tail_ratio 190, mse_ratio 3.1; llama-130m fch_act, 2.6e-6: the exact
// refresh 1.51; a rank-64 signal plus noise (4096 x 2048, r1 608) at 6.9e-7: 1.30 (subspace) and 1.18 (exact), at
// 6.9e-5: 1.017, at 6.8e-3: 1.012 (1e-8 let the 1.30 pass as a refresh 30% short of its 1.02 bar).
constexpr double TAIL_AT_ROUNDING = 1e-5;

static void print_table(const json& j, const Args& a) {
    auto sh = j["shape"];
    std::printf("%s\n", j["file"].get<std::string>().c_str());
    std::printf("  shape              (%lld, %lld)  %s%s\n", sh[0].get<long long>(), sh[1].get<long long>(),
                j["dtype"].get<std::string>().c_str(), a.bf16 ? " as bfloat16" : "");
    if (!j["reshaped_from"].is_null()) {
        std::vector<int64_t> from = j["reshaped_from"].get<std::vector<int64_t>>();
        std::printf("                     reshaped from %s\n", shape_str(from).c_str());
    }
    std::printf("  ||X||_F^2          %.6e\n\n", j["frobenius_sq"].get<double>());

    const json& sp = j["spectrum"];
    std::printf("singular values (eigenvalues of X^T X in float64)\n");
    std::printf("  %-17s", format("top %zu", sp["top"].size()).c_str());
    size_t i = 0;
    for (const json& v : sp["top"]) {
        if (i && i % 5 == 0) std::printf("\n                   ");
        std::printf("%-12.5g", v.get<double>());
        i++;
    }
    std::printf("\n");
    for (const json& v : sp["at_fraction"])
        std::printf("  at %2.0f%% of n       s_%-6d = %.5g\n", 100 * v["fraction"].get<double>(), v["rank"].get<int>(),
                    v["sigma"].get<double>());
    std::printf("  effective rank     %.2f   (of the energy: exp of the entropy of s_i^2 / sum s^2)\n",
                sp["effective_rank"].get<double>());
    std::printf("  stable rank        %.3f   (||X||_F^2 / s_1^2)\n\n", sp["stable_rank"].get<double>());

    const json& en = j["energy"];
    std::printf("cumulative energy  sum_{i<=r} s_i^2 / ||X||_F^2\n");
    for (const json& v : en["at_fraction"])
        std::printf("  r = %-6d (%2.0f%% of n)  %.6f\n", v["rank"].get<int>(), 100 * v["fraction"].get<double>(),
                    v["energy"].get<double>());
    if (!j["ranks"].is_null()) {
        std::printf("  r = %-6d (r1)        %.6f\n", j["ranks"]["r1"].get<int>(), en["at_r1"].get<double>());
        std::printf("  r = %-6d (r1 + r2)   %.6f\n", j["ranks"]["r1"].get<int>() + j["ranks"]["r2"].get<int>(),
                    en["at_r"].get<double>());
    }
    int n = sh[1].get<int>();
    for (const json& v : en["rank_for"])
        std::printf("  rank for %2.0f%%       %-6d (%.1f%% of n)\n", 100 * v["energy"].get<double>(),
                    v["rank"].get<int>(),
                    100.0 * v["rank"].get<int>() / n);

    if (j["estimator"].is_null()) return;
    const json& rk = j["ranks"];
    const json& e = j["estimator"];
    auto g = [&](const char* k) { return e[k].is_null() ? NAN : e[k].get<double>(); };
    // a ratio to a zero tail (X of rank <= r1: nothing left to estimate) is undefined: said so, not "nan"
    auto ratio = [&](const char* k, const char* fmt) {
        return e[k].is_null() ? std::string("undefined (T = 0)") : format(fmt, e[k].get<double>());
    };
    std::printf("\nestimator  mode %s, r1 = %d, r2 = %d, k = %.6g (k_mult %g), %d draw%s, seed %llu\n",
                rk["mode"].get<std::string>().c_str(), rk["r1"].get<int>(), rk["r2"].get<int>(),
                rk["k"].get<double>(), rk["k_mult"].get<double>(), e["draws"].get<int>(),
                e["draws"].get<int>() == 1 ? "" : "s", (unsigned long long)e["seed"].get<uint64_t>());
    const json& fb = e["orth_fallbacks"];
    if (rk["r1"].get<int>() == 0)  // rac: no Q1, T = ||X||^2
        std::printf("  tail energy T = ||X||_F^2 (no Q1: r1 = 0)   %.6e\n", g("tail_energy"));
    else
        std::printf("  tail energy T = ||X - X Q1 Q1^T||_F^2   %.6e   (spectrum: sum_{i>r1} s_i^2 = %.6e; ratio %s,\n"
                    "    Q1 by the %s refresh after %d warm-start refreshes; orthonormalizations past CholQR2: %d "
                    "by shifted Cholesky-QR (%d shifted passes tried), %d by Householder)\n",
                    g("tail_energy"), g("tail_energy_spectrum"), ratio("tail_ratio", "%.5f").c_str(),
                    e["refresh"].get<std::string>().c_str(), e["warm_starts"].get<int>(),
                    fb["shifted_cholqr"].get<int>(), fb["shifted_passes"].get<int>(), fb["householder"].get<int>());
    bool pac = rk["r2"].get<int>() == 0;
    std::printf("  theory  bias^2 %.6e   variance %.6e%s\n", g("bias_sq_theory"), g("variance_theory"),
                pac ? "   (pac: bias^2 = T, no variance)"
                    : (std::fabs(rk["k_mult"].get<double>() - 1) < 1e-12 ? "   ((k - 1) T; unbiased)" : ""));
    const double se = g("mse_stderr");  // (undefined for one draw: said so, not "nan")
    std::printf("  E||X~ - X||_F^2   empirical %.6e %s   theory %.6e   ratio %s\n", g("mse_empirical"),
                std::isfinite(se)                 ? format("+- %.2e (1 s.e.)", se).c_str()
                : e["draws"].get<int>() == 1 ? "(one draw: no s.e.)"
                                             : "(s.e. not finite)",
                g("mse_theory"), ratio("mse_ratio", "%.4f").c_str());
    std::printf("  ||mean(X~) - X||_F / ||X||_F   empirical %.4e   expected %.4e%s\n", g("bias_rel_empirical"),
                g("bias_rel_expected"), pac ? "" : "   (sqrt(bias^2 + Var/K) / ||X||_F)");
    const double dse = g("bias_dot_x_stderr");
    std::printf("  <X~ - X, X>   empirical %.6e %s   theory %.6e   (%s)\n", g("bias_dot_x_empirical"),
                std::isfinite(dse) ? format("+- %.2e (1 s.e.)", dse).c_str() : "(one draw: no s.e.)",
                g("bias_dot_x_theory"), pac ? "-T" : "(c - 1) T: E[X~] - X = (c - 1) X (I - Q1 Q1^T)");
    if (e["tail_at_rounding"].get<bool>())
        std::printf("  warning: the spectrum's tail past r1 holds %.1e of ||X||_F^2 (below %.0e): it is within the "
                    "float32 Gram matrix's rounding (X has rank about r1 or less: a GPT-2 fch dump has rank <= C of its "
                    "4C columns; N < n), so tail_ratio and mse_ratio measure rounding as much as the refresh or the "
                    "estimator\n",
                    g("tail_energy_spectrum") / j["frobenius_sq"].get<double>(), TAIL_AT_ROUNDING);

    const json& v = j["verdict"];
    std::printf("\nverdict  %s\n", v["result"] == "consistent"     ? "consistent with the theory"
                                   : v["result"] == "inconsistent" ? "INCONSISTENT with the theory (exit status 3)"
                                                                   : "not judged");
    for (const json& c : v["checks"]) {
        auto val = [&](const char* k) { return c[k].is_null() ? NAN : c[k].get<double>(); };
        std::printf("  %s %-5s %.6e, theory %.6e: off by %.2e, allowed %.2e (Student's t at %.0e over the draws' "
                    "s.e., or rounding)\n", c["consistent"].get<bool>() ? "ok  " : "FAIL",
                    c["name"].get<std::string>().c_str(), val("measured"), val("expected"),
                    std::fabs(val("measured") - val("expected")), val("allowed"), VERDICT_FAILURE_PROBABILITY);
    }
    for (const json& why : v["not_judged"]) std::printf("  not judged: %s\n", why.get<std::string>().c_str());
}

// ----------------------------------------------------------------------------

// Runs prac_site_dims and adds how its trainer-worded messages map onto this tool's flags.
static SiteDims site_dims(const PracOptions& o, int n, const std::string& file) {
    try {
        return prac_site_dims(o, SiteClass::LINEAR, n, file);
    } catch (const UserError& e) {
        throw UserError(std::string(e.what()) +
                        "\n---> HINT: (prac_analyze: the trainer's --prac is --mode, its linear ranks are --r1/--r2 "
                        "or --r1-frac/--r2-frac, its --prac-k-mult is --k-mult; where the trainer would leave the "
                        "site uncompressed, --mode none shows its spectrum)");
    }
}

static int analyze_main(int argc, char** argv) {
    Args a = parse_args(argc, argv);
    if (a.help) {
        std::fputs(HELP, stdout);
        check_stdout_written("the help");
        return 0;
    }
    PracOptions o;
    try {
        o.mode = prac_mode_parse(a.mode);
    } catch (const UserError&) {
        fail("--mode must be prac, pac, rac or none (got \"%s\")", a.mode.c_str());
    }
    o.linear_r1_abs = a.r1;
    o.linear_r2_abs = a.r2;
    if (a.r1_frac >= 0) o.linear_r1 = a.r1_frac;
    if (a.r2_frac >= 0) o.linear_r2 = a.r2_frac;
    o.k_mult = a.k_mult;
    o.seed = a.seed;
    try {
        o.refresh = prac_refresh_parse(a.refresh);
    } catch (const UserError&) {
        fail("--refresh must be auto, exact or subspace (got \"%s\")", a.refresh.c_str());
    }
    std::string script = a.png.empty() ? "" : check_plotting(a.png);

    std::vector<int64_t> reshaped_from;
    NpyArray arr = read_activations(a.file, a.bf16, &reshaped_from);
    int64_t N64 = arr.shape[0], n64 = arr.shape[1];
    int N = (int)N64, n = (int)n64;
    const float* X = arr.data.data();
    large_input = (double)N * n >= 4e6 || n >= 2048;

    SiteDims d = site_dims(o, n, a.file);

    Spectrum sp = spectrum(X, N, n);
    if (sp.fro2 == 0) fail("%s: X is all zeros; there is no spectrum to analyze", a.file.c_str());
    // The refresh forms the Gram XᵀX in float32, as training does: entries out of float32's normal range (1e-38 ..
    // 3e38; within 1e8 of it, its sums lose digits) make its basis noise, and every ratio below measures that.
    double largest_column = 0;  // the Gram's largest diagonal entry, in double
    for (int c = 0; c < n; c++) {
        double sum = 0;
        for (int r = 0; r < N; r++) sum += (double)X[(size_t)r * n + c] * X[(size_t)r * n + c];
        largest_column = std::max(largest_column, sum);
    }
    if (largest_column < 1e-30 || largest_column > 1e30)
        std::fprintf(stderr, "%s: warning: %s: X's column energies reach %.1e, %s float32's range for the refresh's "
                     "Gram X^T X: its basis is unreliable, and so is what follows; scale X (every ratio here is "
                     "scale-free), e.g. x / abs(x).max()\n", PROGRAM, a.file.c_str(), largest_column,
                     largest_column < 1e-30 ? "below" : "above");
    // past float32's largest value the Gram's diagonal is inf: the refresh's basis and every estimate NaN, exit 0
    // (the spectrum alone, --mode none, is computed in double: warned above, not refused)
    if (d.compressed && largest_column > FLT_MAX)
        fail("%s: X's column energies reach %.1e, past float32's largest value (%.1e): the refresh's Gram X^T X "
             "overflows, and every estimate would be NaN\n---> HINT: scale X (every ratio here is scale-free), e.g. "
             "x / abs(x).max(); --mode none gives its spectrum as it is", a.file.c_str(), largest_column, FLT_MAX);

    json j;
    j["file"] = a.file;
    j["dtype"] = arr.dtype;
    j["shape"] = {N64, n64};
    j["reshaped_from"] = reshaped_from.empty() ? json(nullptr) : json(reshaped_from);
    j["frobenius_sq"] = sp.fro2;

    json top = json::array(), at = json::array();
    for (int i = 0; i < std::min(n, 10); i++) top.push_back(sp.sigma[i]);
    for (int pct : {10, 25, 50, 75, 90}) {
        int r = rank_at_percent(pct, n);
        at.push_back({{"fraction", pct / 100.0}, {"rank", r}, {"sigma", sp.sigma[r - 1]}});
    }
    double entropy = 0, total = 0;
    for (double s : sp.sigma) total += s * s;
    for (double s : sp.sigma) {
        double p = s * s / total;
        if (p > 0) entropy -= p * std::log(p);
    }
    j["spectrum"] = {{"top", top},
                     {"at_fraction", at},
                     {"effective_rank", std::exp(entropy)},
                     {"stable_rank", sp.fro2 / (sp.sigma[0] * sp.sigma[0])}};

    json en_at = json::array(), en_for = json::array();
    for (int pct : {1, 5, 10, 20, 30, 50}) {
        int r = rank_at_percent(pct, n);
        en_at.push_back({{"fraction", pct / 100.0}, {"rank", r}, {"energy", energy_at(sp, r)}});
    }
    for (int pct : {90, 95, 99}) en_for.push_back({{"energy", pct / 100.0}, {"rank", rank_for(sp, pct / 100.0)}});
    j["energy"] = {{"at_fraction", en_at},
                   {"at_r1", d.compressed ? num(energy_at(sp, d.r1)) : json(nullptr)},
                   {"at_r", d.compressed ? num(energy_at(sp, d.r())) : json(nullptr)},
                   {"rank_for", en_for}};
    j["singular_values"] = sp.sigma;
    j["cumulative_energy"] = sp.cum_energy;

    bool inconsistent = false;  // the verdict: exit status 3
    if (!d.compressed) {
        j["ranks"] = nullptr;
        j["estimator"] = nullptr;
        j["verdict"] = nullptr;
    } else {
        j["ranks"] = {{"mode", prac_mode_name(o.mode)}, {"r1", d.r1}, {"r2", d.r2}, {"k", d.k}, {"k_mult", o.k_mult}};
        // --warm-from: the chain of refreshes before FILE's, each warm-started from the one before
        std::vector<float> P((size_t)n * d.r(), 0.0f);
        bool had_basis = false;
        for (size_t w = 0; w < a.warm_from.size(); w++) {
            std::vector<int64_t> unused;
            NpyArray prev = read_activations(a.warm_from[w], a.bf16, &unused);
            if (prev.shape[1] != n64)
                fail("--warm-from %s: shape %s, but %s has n = %d columns\n---> HINT: warm-start from dumps of the "
                     "same site", a.warm_from[w].c_str(), shape_str(prev.shape).c_str(), a.file.c_str(), n);
            check_refresh(prac_refresh_cpu(P.data(), prev.data.data(), (int)prev.shape[0], n, d, true, true, had_basis,
                                           {a.seed, 0, 0, 1000000 + w}),
                          "warm-start refresh");
            had_basis = true;
        }
        EstimatorResult e = estimate(X, N, n, d, sp, a.draws, a.seed, P, had_basis);
        const bool tail_at_rounding = e.tail_spectrum < TAIL_AT_ROUNDING * sp.fro2;
        j["estimator"] = {{"draws", e.draws},
                          {"refresh", prac_refresh_name(o.refresh)},
                          {"warm_starts", (int)a.warm_from.size()},
                          {"orth_fallbacks",
                           {{"shifted_cholqr", e.refresh.q1_shifted_qr},
                            {"shifted_passes", e.refresh.q1_shifted_passes},
                            {"householder", e.refresh.q1_householder_qr}}},
                          {"tail_ratio", e.tail_spectrum > 0 ? num(e.tail / e.tail_spectrum) : json(nullptr)},
                          {"tail_at_rounding", tail_at_rounding},
                          {"seed", a.seed},
                          {"tail_energy", e.tail},
                          {"tail_energy_spectrum", e.tail_spectrum},
                          {"bias_sq_theory", e.bias_sq_theory},
                          {"variance_theory", e.variance_theory},
                          {"mse_theory", e.mse_theory},
                          {"mse_theory_spectrum", e.mse_theory_spectrum},
                          {"mse_empirical", e.mse_empirical},
                          {"mse_stderr", num(e.mse_stderr)},
                          {"mse_ratio", e.mse_theory > 0 ? num(e.mse_empirical / e.mse_theory) : json(nullptr)},
                          {"variance_empirical", num(e.variance_empirical)},
                          {"bias_rel_empirical", e.bias_rel_empirical},
                          {"bias_rel_expected", e.bias_rel_expected},
                          {"bias_dot_x_empirical", e.bias_dot_mean},
                          {"bias_dot_x_stderr", num(e.bias_dot_stderr)},
                          {"bias_dot_x_theory", e.bias_dot_theory}};
        VerdictInput in;
        in.draws = e.draws;
        in.r2 = d.r2;
        in.tail_at_rounding = tail_at_rounding;
        in.fro2 = sp.fro2;
        in.tail = e.tail;
        in.mse_theory = e.mse_theory;
        in.mse_mean = e.mse_empirical;
        in.mse_stderr = e.mse_stderr;
        in.bias_mean = e.bias_dot_mean;
        in.bias_stderr = e.bias_dot_stderr;
        in.bias_theory = e.bias_dot_theory;
        const Verdict v = judge_estimator(in);
        json checks = json::array();
        for (const VerdictCheck& c : v.checks)
            checks.push_back({{"name", c.name},
                              {"measured", num(c.measured)},
                              {"expected", c.expected},
                              {"allowed", num(c.allowed)},
                              {"consistent", c.consistent}});
        j["verdict"] = {{"result", v.checks.empty() ? "not judged" : v.consistent() ? "consistent" : "inconsistent"},
                        {"checks", checks},
                        {"not_judged", v.not_judged}};
        inconsistent = !v.checks.empty() && !v.consistent();
    }

    if (a.json) std::printf("%s\n", j.dump().c_str());
    else print_table(j, a);
    check_stdout_written("the analysis");
    if (!a.png.empty()) plot(script, j, a.png);
    return inconsistent ? 3 : 0;
}

int main(int argc, char** argv) {
    file_size_limit_as_error();
    try {
        return analyze_main(argc, argv);
    } catch (const UserError& e) {
        std::fprintf(stderr, "%s: error: %s\n", PROGRAM, e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "%s: error: out of memory (X, the running mean of X~ and the n x n Gram matrix must "
                     "fit: 4 n^2 bytes for the Gram, 8 N n for X and the mean)\n---> HINT: a tall X: analyze fewer rows, "
                     "e.g. np.save(path, x[:16384]); a wide one (n past some 30000 columns): fewer rows cannot help, "
                     "analyze a narrower site\n", PROGRAM);
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: internal error: %s\n", PROGRAM, e.what());
        return 2;
    }
}
