// Tests for common/npy (round trips, numpy-written fixtures, byte equality with np.save, every bad-input message)
// and for the prac_analyze binary on synthetic X = U diag(s) Vᵀ with a known spectrum, so every number it
// reports has a closed form, and on real activations that the trainers dump (the subspace refresh's quality). No
// Python at test time (the fixtures are committed; the --png test is skipped when python3 + matplotlib are not there).
#include "common/npy.h"

#include <gtest/gtest.h>
#include <lapacke.h>
#include <sys/stat.h>  // mkfifo
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "test/test_files.h"
#include "tools/analyze_verdict.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

static const std::string FIXTURES = std::string(PRAC_SOURCE_DIR) + "/test/fixtures/npy/";
static const std::string BINARY = std::string(PRAC_SOURCE_DIR) + "/prac_analyze";

// ----------------------------------------------------------------------------
// helpers

static uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// The UserError message of f(), or "" when it does not throw.
template <class F>
static std::string error_of(F f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

#define EXPECT_ERROR(expr, ...)                                                      \
    do {                                                                             \
        std::string msg_ = error_of([&] { (void)(expr); });                          \
        EXPECT_FALSE(msg_.empty()) << #expr << " did not throw UserError";           \
        for (const char* part_ : {__VA_ARGS__})                                      \
            EXPECT_NE(msg_.find(part_), std::string::npos) << "\"" << part_ << "\" not in: " << msg_; \
    } while (0)

// A hand-made .npy file: magic, version, length field (the header's size unless overridden), header, data.
static std::string npy_bytes(const std::string& header, const std::string& data, int major = 1, int minor = 0,
                             int64_t len_field = -1) {
    std::string b = "\x93NUMPY";
    b += (char)major;
    b += (char)minor;
    uint64_t n = len_field < 0 ? header.size() : (uint64_t)len_field;
    int len_bytes = major == 1 ? 2 : 4;
    for (int i = 0; i < len_bytes; i++) b += (char)(n >> (8 * i));
    return b + header + data;
}

// ----------------------------------------------------------------------------
// round trips

using NpyTest = TmpDirTest;

TEST_F(NpyTest, RoundTripShapes) {
    const std::vector<std::vector<int64_t>> shapes = {{}, {7}, {2, 3}, {2, 3, 4}, {0, 4}, {3, 0, 2}, {1, 1, 1, 5}};
    // special values first: NaN keeps its payload, -0 its sign, subnormals are not flushed
    const uint32_t special[] = {0x7FC00001, 0x80000000, 0x00000001, 0x7F800000, 0xFF800000, 0x7F7FFFFF};
    for (const auto& shape : shapes) {
        size_t numel = 1;
        for (int64_t d : shape) numel *= (size_t)d;
        std::vector<float> data(numel);
        for (size_t i = 0; i < numel; i++) data[i] = i < 6 ? from_bits(special[i]) : 0.37f * (float)i - 3.0f;
        std::string path = file("a.npy");
        write_npy_f32(path, data.data(), shape);
        std::string header = npy_header_f32(shape);
        EXPECT_EQ(header.size() % 64, 0u);  // the data starts aligned, as with np.save
        EXPECT_EQ(fs::file_size(path), header.size() + 4 * numel);
        NpyArray a = read_npy(path);
        EXPECT_EQ(a.shape, shape);
        EXPECT_EQ(a.dtype, "<f4");
        ASSERT_EQ(a.data.size(), numel);
        EXPECT_EQ(a.numel(), numel);
        for (size_t i = 0; i < numel; i++) EXPECT_EQ(bits(a.data[i]), bits(data[i])) << "element " << i;
        EXPECT_TRUE(temp_files().empty());
    }
}

TEST_F(NpyTest, OverwriteReplacesTheFile) {
    std::string path = file("a.npy");
    std::vector<float> big(100, 1.0f), small = {5.0f, 6.0f};
    write_npy_f32(path, big.data(), {10, 10});
    write_npy_f32(path, small.data(), {2});
    NpyArray a = read_npy(path);
    EXPECT_EQ(a.shape, std::vector<int64_t>{2});
    EXPECT_EQ(a.data, small);
    EXPECT_TRUE(temp_files().empty());
}

TEST_F(NpyTest, WriteFailsCleanly) {
    std::vector<float> x = {1, 2};
    EXPECT_ERROR(write_npy_f32(file("no/such/dir/a.npy"), x.data(), {2}), "cannot create", "does not exist");
    EXPECT_ERROR(write_npy_f32(file("a.npy"), x.data(), {-1, 2}), "negative dimension");
    EXPECT_ERROR(write_npy_f32(file("a.npy"), nullptr, {2}), "no data");
    EXPECT_FALSE(fs::exists(file("a.npy")));
    EXPECT_TRUE(temp_files().empty());
}

// ----------------------------------------------------------------------------
// interop with numpy: test/reference/make_npy_fixtures.py (the values are mirrored here)

static std::vector<float> f4_2x3() {
    std::vector<float> v;
    for (int i = 0; i < 6; i++) v.push_back((float)((i - 2.5) * 0.25));
    return v;
}

struct Expected {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
};

static std::vector<Expected> expected_f32() {
    std::vector<float> ramp;
    for (int i = 0; i < 24; i++) ramp.push_back(i * 0.5f - 3.0f);
    return {
        {"f4_2x3", {2, 3}, f4_2x3()},
        {"f4_1d",
         {5},
         {from_bits(0), from_bits(0x80000000), from_bits(1), from_bits(0x7F7FFFFF), from_bits(0x7F800000)}},
        {"f4_2x3x4", {2, 3, 4}, ramp},
        {"f4_scalar", {}, {3.5f}},
        {"f4_empty", {0, 4}, {}},
    };
}

TEST_F(NpyTest, ReadsNumpyFixtures) {
    for (const Expected& e : expected_f32()) {
        NpyArray a = read_npy(FIXTURES + e.name + ".npy");
        EXPECT_EQ(a.shape, e.shape) << e.name;
        EXPECT_EQ(a.dtype, "<f4");
        ASSERT_EQ(a.data.size(), e.data.size()) << e.name;
        for (size_t i = 0; i < e.data.size(); i++) EXPECT_EQ(bits(a.data[i]), bits(e.data[i])) << e.name << " " << i;
    }
    // format versions 2.0 and 3.0 (4-byte header length) hold the same 2x3 array
    for (const char* name : {"f4_v2", "f4_v3"}) {
        EXPECT_EQ(read_bytes(FIXTURES + name + ".npy")[6], name[4] - '0');
        NpyArray a = read_npy(FIXTURES + name + ".npy");
        EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3})) << name;
        EXPECT_EQ(a.data, f4_2x3()) << name;
    }
    // float16: 1, -2.5, 65504 (max), 2^-24 (smallest subnormal), -inf, 0.333251953125
    NpyArray h = read_npy(FIXTURES + "f2_2x3.npy");
    EXPECT_EQ(h.dtype, "<f2");
    EXPECT_EQ(h.data, (std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24), -INFINITY, 0.333251953125f}));
    // bfloat16 bits in '<u2': 1, -2.5, 0.15625, inf, -0, 2^-133 (subnormal), the largest finite bf16
    NpyArray b = read_npy(FIXTURES + "bf16_u2.npy", true);
    EXPECT_EQ(b.dtype, "<u2");
    EXPECT_EQ(b.shape, std::vector<int64_t>{7});
    const uint32_t bf16[] = {0x3F80, 0xC020, 0x3E20, 0x7F80, 0x8000, 0x0001, 0x7F7F};
    ASSERT_EQ(b.data.size(), 7u);
    for (int i = 0; i < 7; i++) EXPECT_EQ(bits(b.data[i]), bf16[i] << 16) << i;
    EXPECT_EQ(b.data[0], 1.0f);
    EXPECT_EQ(b.data[1], -2.5f);
}

// Our writer produces np.save's exact bytes, so numpy loads what we write. PRAC_NPY_KEEP=DIR also leaves the
// files there for `python test/reference/make_npy_fixtures.py --check DIR`.
TEST_F(NpyTest, WriterMatchesNumpyBytes) {
    const char* keep = std::getenv("PRAC_NPY_KEEP");
    if (keep) fs::create_directories(keep);
    for (const Expected& e : expected_f32()) {
        std::string path = keep ? std::string(keep) + "/" + e.name + ".npy" : file(e.name + ".npy");
        write_npy_f32(path, e.data.data(), e.shape);
        EXPECT_EQ(read_bytes(path), read_bytes(FIXTURES + e.name + ".npy")) << e.name;
    }
}

TEST_F(NpyTest, RefusesBadFiles) {
    // numpy-written files of the kinds we do not read
    EXPECT_ERROR(read_npy(FIXTURES + "fortran_2x3.npy"), "Fortran-order", "np.ascontiguousarray");
    EXPECT_ERROR(read_npy(FIXTURES + "be_f4.npy"), "'>f4'", "big-endian", "astype('<f4')");
    EXPECT_ERROR(read_npy(FIXTURES + "f8.npy"), "'<f8'", "float64", "astype(np.float32)");
    EXPECT_ERROR(read_npy(FIXTURES + "bf16_u2.npy"), "'<u2'", "uint16", "--bf16");
    EXPECT_ERROR(read_npy(FIXTURES + "truncated.npy"), "truncated", "needs 24 data bytes", "has 20");
    EXPECT_ERROR(read_npy(file("missing.npy")), "cannot open", "missing.npy", "No such file");
    EXPECT_ERROR(read_npy(dir), "is a directory");
    // a named pipe: its open waited for a writer forever (and stdin's pipe was called an empty file)
    ASSERT_EQ(mkfifo(file("fifo.npy").c_str(), 0600), 0);
    EXPECT_ERROR(read_npy(file("fifo.npy")), "fifo.npy is not a regular file (a pipe or a device)");

    // hand-made: magic, version, header length, header syntax
    std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
    std::string data(8, '\0');
    auto refuse = [&](const std::string& bytes, std::vector<const char*> parts) {
        write_bytes(file("bad.npy"), bytes);
        std::string msg = error_of([&] { read_npy(file("bad.npy")); });
        EXPECT_FALSE(msg.empty()) << "accepted: " << bytes;
        for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "\"" << p << "\" not in: " << msg;
    };
    write_bytes(file("ok.npy"), npy_bytes(good, data));
    EXPECT_EQ(read_npy(file("ok.npy")).data, std::vector<float>(2, 0.0f));  // the baseline is fine

    refuse("", {"not an .npy file", "empty"});
    refuse("hello world, this is text", {"not an .npy file", "magic", "np.save"});
    refuse(std::string("PK\x03\x04", 4) + std::string(40, 'x'), {"not an .npy file", ".npz"});
    refuse("\x93NUMP", {"not an .npy file"});
    // the magic whole and the version cut off: truncated (it said the file lacks the magic it starts with)
    refuse("\x93NUMPY", {"is truncated: 6 bytes", "no format version"});
    refuse("\x93NUMPY\x01", {"is truncated: 7 bytes"});
    refuse(npy_bytes(good, data, 9, 0), {"unsupported .npy format version 9.0"});
    refuse(npy_bytes(good, data, 1, 1), {"version 1.1"});
    refuse(npy_bytes(good, data, 1, 0, 5000), {"truncated", "header needs"});
    refuse(npy_bytes(good, data, 2, 0, 0x7fffffff), {"over the", "limit"});
    refuse(npy_bytes("{'descr': '<f4', 'shape': (2,), }\n", data), {"malformed", "no 'fortran_order'"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, }\n", data), {"malformed", "no 'shape'"});
    refuse(npy_bytes("{'fortran_order': False, 'shape': (2,), }\n", data), {"malformed", "no 'descr'"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}\n", data),
           {"malformed", "unexpected key 'x'"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }\n", data),
           {"malformed", "True or False"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }\n", data),
           {"malformed", "non-negative integer"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': [2], }\n", data), {"malformed", "'('"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,) }} junk\n", data),
           {"malformed", "after the header dict"});
    refuse(npy_bytes("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }\n", data), {"malformed"});
    refuse(npy_bytes("not a dict at all\n", data), {"malformed", "'{'"});
    refuse(npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }\n", data),
           {"structured"});
    refuse(npy_bytes("{'descr': '|V2', 'fortran_order': False, 'shape': (2,), }\n", data), {"'|V2'", "np.uint16"});
    refuse(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\n", data), {"'<i4'", "int32"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", data),
           {"truncated", "needs 12 data bytes", "has 8"});
    refuse(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n", data),
           {"too many elements"});
    // Fortran order is harmless, and accepted, when at most one dimension is above 1 (same bytes)
    write_bytes(file("f1.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }\n", data));
    EXPECT_EQ(read_npy(file("f1.npy")).shape, (std::vector<int64_t>{1, 2}));
    // Python 2's numpy wrote long integers in the shape: (2L,)
    write_bytes(file("py2.npy"), npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }\n", data));
    EXPECT_EQ(read_npy(file("py2.npy")).shape, std::vector<int64_t>{2});
}

// ----------------------------------------------------------------------------
// prac_analyze on X = U diag(s) Vᵀ

// Orthonormal columns (rows x cols, row-major) from the QR of a seeded Gaussian, in double.
static std::vector<double> orthonormal(int rows, int cols, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    std::vector<double> A((size_t)rows * cols), tau(cols);
    for (double& v : A) v = g(rng);
    EXPECT_EQ(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, rows, cols, A.data(), cols, tau.data()), 0);
    EXPECT_EQ(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, rows, cols, cols, A.data(), cols, tau.data()), 0);
    return A;
}

// X (N, n) = U (N, n) diag(s) Vᵀ (n, n), rounded to float32.
static std::vector<float> synthetic(int N, int n, const std::vector<double>& s, uint64_t seed) {
    std::vector<double> U = orthonormal(N, n, seed), V = orthonormal(n, n, seed + 1);
    std::vector<float> X((size_t)N * n);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int t = 0; t < n; t++) acc += U[(size_t)i * n + t] * s[t] * V[(size_t)j * n + t];
            X[(size_t)i * n + j] = (float)acc;
        }
    return X;
}

// The test spectrum: n = 80, so the default ranks are r1 = r2 = floor8(0.3 * 80) = 24. 24 large values
// (20 * 0.9^i, down to 1.77), a gap, then a slowly decaying tail (0.97^(i - 24), from 1) holding about 1% of
// the energy: Q1 is well defined (fp32 eigenvectors are accurate) and the tail is what the random part has to
// carry.
static const int N_ROWS = 640, WIDTH = 80;
static std::vector<double> test_spectrum() {
    std::vector<double> s(WIDTH);
    for (int i = 0; i < WIDTH; i++) s[i] = i < 24 ? 20.0 * std::pow(0.9, i) : std::pow(0.97, i - 24);
    return s;
}

static double sum_sq(const std::vector<double>& s, int from, int to) {
    double e = 0;
    for (int i = from; i < to; i++) e += s[i] * s[i];
    return e;
}

struct RunResult {
    int rc = -1;
    std::string out, err;
};

static std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

struct AnalyzeTest : TmpDirTest {
    std::string x_path;
    void SetUp() override {
        TmpDirTest::SetUp();
        ASSERT_TRUE(fs::exists(BINARY)) << BINARY << " is not built (cmake --build build --target prac_analyze)";
        x_path = file("x.npy");
        std::vector<float> X = synthetic(N_ROWS, WIDTH, test_spectrum(), 7);
        write_npy_f32(x_path, X.data(), {N_ROWS, WIDTH});
    }
    RunResult run(const std::vector<std::string>& args, const std::string& env = "") const {
        std::string cmd = env + " " + quote(BINARY);
        for (const std::string& a : args) cmd += " " + quote(a);
        cmd += " >" + quote(file("stdout")) + " 2>" + quote(file("stderr"));
        RunResult r;
        int status = std::system(cmd.c_str());
        r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        r.out = read_bytes(file("stdout"));
        r.err = read_bytes(file("stderr"));
        return r;
    }
    json run_json(std::vector<std::string> args) const {
        args.push_back("--json");
        RunResult r = run(args);
        EXPECT_EQ(r.rc, 0) << r.err;
        try {
            return json::parse(r.out);
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out;
            return json::object();
        }
    }
};

// |mean - theory| <= t·se, se estimated from the draws themselves: t is Student's two-sided quantile at the project's
// failure probability 1e-6 with draws - 1 degrees of freedom (6.072 for 31, 5.420 for 63; computed by integrating
// the t density numerically), not a normal quantile, which with se from few draws would fail far more often.
static double t_quantile_1e6(int draws) {
    if (draws == 32) return 6.072;
    if (draws == 64) return 5.420;
    ADD_FAILURE() << "no t quantile for " << draws << " draws";
    return 0;
}

static void expect_rel(double got, double want, double tol, const std::string& what) {
    EXPECT_LE(std::fabs(got - want), tol * std::fabs(want)) << what << ": got " << got << ", want " << want;
}

// The verdict's t quantile (Boost.Math) against independent values: the two above (numerical integration of the t
// density), the Cauchy distribution's closed form (1 degree of freedom: P(|t| > x) = 1 - 2 atan(x) / pi), and the
// normal limit (4.8916 at 1e-6).
TEST(AnalyzeVerdict, StudentTQuantile) {
    EXPECT_NEAR(student_t_two_sided(1e-6, 31), t_quantile_1e6(32), 1e-3);
    EXPECT_NEAR(student_t_two_sided(1e-6, 63), t_quantile_1e6(64), 1e-3);
    EXPECT_NEAR(student_t_two_sided(0.01, 1), std::tan(M_PI / 2 * (1 - 0.01)), 1e-6 * 63.66);
    EXPECT_NEAR(student_t_two_sided(1e-6, 100000), 4.8916, 1e-3);
}

// What an estimator measures over its draws, handed to the verdict. For X~ = X (β Q1 Q1ᵀ + k' Q2 Q2ᵀ) - with β = 1
// and k' = k PRAC's own - and q_d = ||X Q2||_F² (mean T / k, k = (n - r1) / r2: E[Q2 Q2ᵀ] = (1 / k) of Q1's
// complement), X~ - X = (β - 1) X Q1 Q1ᵀ + X (k' Q2 Q2ᵀ - (I - Q1 Q1ᵀ)), whose two parts are orthogonal:
//   e_d = ||X~_d - X||² = (β - 1)² (F - T) + (k'² - 2k') q_d + T,   b_d = <X~_d - X, X> = (β - 1) (F - T) + k' q_d - T
// (F = ||X||_F²). The numbers are those of the test spectrum at r1 = r2 = 16 (k = 4, T = 29.4, F = 2400), 32 draws,
// with the mean of q one standard error (q_se = 0.1) off its expectation.
static VerdictInput drawn(double k_used, double beta, double k = 4) {
    const double T = 29.4, F = 2400, q_se = 0.1, q = T / k + q_se;
    VerdictInput in;
    in.draws = 32;
    in.r2 = 16;
    in.fro2 = F;
    in.tail = T;
    in.mse_theory = (k - 1) * T;
    in.mse_mean = (beta - 1) * (beta - 1) * (F - T) + (k_used * k_used - 2 * k_used) * q + T;
    in.mse_stderr = std::fabs(k_used * k_used - 2 * k_used) * q_se;
    in.bias_mean = (beta - 1) * (F - T) + k_used * q - T;
    in.bias_stderr = k_used * q_se;
    in.bias_theory = 0;
    return in;
}

static std::string failed_checks(const Verdict& v) {
    std::string names;
    for (const VerdictCheck& c : v.checks)
        if (!c.consistent) names += (names.empty() ? "" : ",") + c.name;
    return names;
}

TEST(AnalyzeVerdict, EachCheckFailsOnItsDefect) {
    Verdict ok = judge_estimator(drawn(4, 1));
    EXPECT_TRUE(ok.consistent()) << failed_checks(ok);
    EXPECT_EQ(ok.checks.size(), 2u);
    EXPECT_TRUE(ok.not_judged.empty());

    // k 10% too large: the mean error ((k'² - 2k') q + T = 107 against 88.2) and the bias along X (2.9) both move
    EXPECT_EQ(failed_checks(judge_estimator(drawn(4.4, 1))), "mse,bias");
    EXPECT_EQ(failed_checks(judge_estimator(drawn(4.0 / 1.1, 1))), "mse,bias");
    // the principal part 0.2% too large: the bias along X moves by 0.002 (F - T) = 4.7 (allowed t 0.4 = 2.4), the mean
    // error by 0.002² (F - T) = 0.009: only the bias check sees it (0.05%: inside both)
    EXPECT_EQ(failed_checks(judge_estimator(drawn(4, 1.002))), "bias");
    EXPECT_TRUE(judge_estimator(drawn(4, 1.0005)).consistent());

    VerdictInput nan = drawn(4, 1);  // NaN is consistent with nothing
    nan.mse_mean = NAN;
    EXPECT_EQ(failed_checks(judge_estimator(nan)), "mse");
    nan = drawn(4, 1);
    nan.bias_stderr = NAN;
    EXPECT_EQ(failed_checks(judge_estimator(nan)), "bias");

    // k = 2: e_d = T for every draw (its spread is rounding, 1e-8 of it): the rounding floor, 1e-3 of the theory
    VerdictInput exact = drawn(2, 1, 2);
    exact.mse_stderr = 1e-8 * exact.mse_theory;
    EXPECT_EQ(exact.mse_mean, exact.tail);
    exact.mse_mean = exact.mse_theory * (1 + 5e-4);
    EXPECT_TRUE(judge_estimator(exact).consistent()) << failed_checks(judge_estimator(exact));
    exact.mse_mean = exact.mse_theory * (1 + 2e-3);
    EXPECT_EQ(failed_checks(judge_estimator(exact)), "mse");
}

TEST(AnalyzeVerdict, WhatIsNotJudgedIsSaid) {
    VerdictInput few = drawn(4.4, 1);  // inconsistent, but not looked at
    few.draws = 7;
    Verdict v = judge_estimator(few);
    EXPECT_TRUE(v.checks.empty());
    ASSERT_EQ(v.not_judged.size(), 1u);
    EXPECT_NE(v.not_judged[0].find("fewer than 8 draws"), std::string::npos);

    VerdictInput rounding = drawn(4.4, 1);
    rounding.tail_at_rounding = true;
    v = judge_estimator(rounding);
    EXPECT_TRUE(v.checks.empty());
    EXPECT_NE(v.not_judged.at(0).find("float32 rounding"), std::string::npos);

    VerdictInput rank_r1 = drawn(4.4, 1);
    rank_r1.tail = 0;
    EXPECT_NE(judge_estimator(rank_r1).not_judged.at(0).find("is zero"), std::string::npos);

    VerdictInput pac = drawn(4.4, 1);
    pac.r2 = 0;
    EXPECT_NE(judge_estimator(pac).not_judged.at(0).find("pac draws nothing"), std::string::npos);
}

// The binary with a broken estimator (its random part scaled by 1.3, as a k 30% off: common/kill_point.h's kind of
// test hook): exit status 3, the whole analysis still printed, the JSON still JSON; unbroken, exit 0.
TEST_F(AnalyzeTest, ABrokenEstimatorIsInconsistentWithExitStatus3) {
    const std::vector<std::string> args = {x_path, "--r1", "16", "--r2", "16", "--draws", "32"};
    RunResult broken = run(args, "PRAC_TEST_ANALYZE_Q2_SCALE=1.3");
    EXPECT_EQ(broken.rc, 3) << broken.err;
    for (const char* part : {"singular values", "cumulative energy", "E||X~ - X||_F^2",
                             "verdict  INCONSISTENT with the theory (exit status 3)", "FAIL mse", "FAIL bias"})
        EXPECT_NE(broken.out.find(part), std::string::npos) << "\"" << part << "\" not in:\n" << broken.out;
    std::vector<std::string> json_args = args;
    json_args.push_back("--json");
    RunResult bj = run(json_args, "PRAC_TEST_ANALYZE_Q2_SCALE=1.3");
    EXPECT_EQ(bj.rc, 3) << bj.err;
    EXPECT_EQ(json::parse(bj.out)["verdict"]["result"], "inconsistent");
    RunResult fine = run(args);
    EXPECT_EQ(fine.rc, 0) << fine.out;
    EXPECT_NE(fine.out.find("verdict  consistent with the theory"), std::string::npos) << fine.out;
}

// An analysis printed to a full disk (/dev/full) exited 0 with nothing written; now it is an error. The same check
// guards the trainers' --plan and every program's --help (through check_stdout_written).
TEST_F(AnalyzeTest, OutputThatCannotBeWrittenIsAnError) {
    const std::string root = std::string(PRAC_SOURCE_DIR) + "/";
    for (const std::string& cmd : {quote(BINARY) + " " + quote(x_path) + " --json", quote(BINARY) + " --help",
                                   root + "train_gpt2 --model gpt2-tiny --plan --json", root + "train_llama --help",
                                   root + "finetune_roberta --help", root + "prep_data --help"}) {
        const int status = std::system((cmd + " >/dev/full 2>" + quote(file("stderr"))).c_str());
        EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1) << cmd;
        EXPECT_NE(read_bytes(file("stderr")).find("to the standard output (No space left on device)"),
                  std::string::npos) << cmd << "\n" << read_bytes(file("stderr"));
    }
}

TEST_F(AnalyzeTest, SpectrumMatchesTheKnownSingularValues) {
    json j = run_json({x_path});
    std::vector<double> s = test_spectrum();
    double total = sum_sq(s, 0, WIDTH);
    EXPECT_EQ(j["shape"], json({N_ROWS, WIDTH}));
    EXPECT_TRUE(j["reshaped_from"].is_null());
    expect_rel(j["frobenius_sq"].get<double>(), total, 1e-5, "||X||_F^2");
    std::vector<double> sv = j["singular_values"], cum = j["cumulative_energy"];
    ASSERT_EQ(sv.size(), (size_t)WIDTH);
    ASSERT_EQ(cum.size(), (size_t)WIDTH);
    for (int i = 0; i < WIDTH; i++) {
        expect_rel(sv[i], s[i], 1e-4, "sigma_" + std::to_string(i + 1));
        expect_rel(cum[i], sum_sq(s, 0, i + 1) / total, 1e-5, "energy(" + std::to_string(i + 1) + ")");
    }
    const json& sp = j["spectrum"];
    ASSERT_EQ(sp["top"].size(), 10u);
    for (int i = 0; i < 10; i++) expect_rel(sp["top"][i], s[i], 1e-4, "top");
    // ranks at 10/25/50/75/90% of 80: 8, 20, 40, 60, 72
    const int at_ranks[] = {8, 20, 40, 60, 72};
    for (int i = 0; i < 5; i++) {
        EXPECT_EQ(sp["at_fraction"][i]["rank"], at_ranks[i]);
        expect_rel(sp["at_fraction"][i]["sigma"], s[at_ranks[i] - 1], 1e-4, "sigma at fraction");
    }
    double H = 0;
    for (double v : s) H -= v * v / total * std::log(v * v / total);
    expect_rel(sp["effective_rank"], std::exp(H), 1e-5, "effective rank");
    expect_rel(sp["stable_rank"], total / (s[0] * s[0]), 1e-5, "stable rank");

    // default ranks: r1 = r2 = 24, k = (80 - 24) / 24
    EXPECT_EQ(j["ranks"]["mode"], "prac");
    EXPECT_EQ(j["ranks"]["r1"], 24);
    EXPECT_EQ(j["ranks"]["r2"], 24);
    expect_rel(j["ranks"]["k"], 56.0 / 24.0, 1e-6, "k");
    const json& en = j["energy"];
    expect_rel(en["at_r1"], sum_sq(s, 0, 24) / total, 1e-5, "energy at r1");
    expect_rel(en["at_r"], sum_sq(s, 0, 48) / total, 1e-5, "energy at r1 + r2");
    const int en_ranks[] = {1, 4, 8, 16, 24, 40};  // 1/5/10/20/30/50% of 80
    for (int i = 0; i < 6; i++) {
        EXPECT_EQ(en["at_fraction"][i]["rank"], en_ranks[i]);
        expect_rel(en["at_fraction"][i]["energy"], sum_sq(s, 0, en_ranks[i]) / total, 1e-5, "energy at fraction");
    }
    for (const json& v : en["rank_for"]) {
        double target = v["energy"];
        int r = 1;
        while (sum_sq(s, 0, r) / total < target) r++;
        EXPECT_EQ(v["rank"], r) << "rank for " << target;
    }
}

// Theorem 1 on this X: unbiased, E||X~ - X||_F² = (k - 1) Σ_{i>r1} s_i². The K = 64 per-draw errors are
// i.i.d., so their mean is within t = 5.420 reported standard errors of the expectation except with probability
// 1e-6 under the Student t approximation (63 degrees of freedom). The errors are sums of squares (skewed),
// so the real tail is somewhat heavier: over 3000 seeds on this spectrum |z| exceeded 4 once and never 4.3.
// The 1e-3 relative floor covers fp32 round-off if the spread were ever tiny.
// The empirical variance matches the theory computed from the Q1 actually used, for both refresh methods.
TEST_F(AnalyzeTest, PracVarianceMatchesTheory) {
  for (const char* refresh : {"subspace", "exact"}) {
    SCOPED_TRACE(refresh);
    json j = run_json({x_path, "--r1", "16", "--r2", "16", "--seed", "3", "--refresh", refresh, "--draws", "64"});
    EXPECT_EQ(j["estimator"]["refresh"], refresh);
    EXPECT_LE(j["estimator"]["tail_ratio"].get<double>(), 1.02);
    std::vector<double> s = test_spectrum();
    const int r1 = 16, r2 = 16, n = WIDTH;
    double k = (double)(n - r1) / r2, tail = sum_sq(s, r1, n), total = sum_sq(s, 0, n);
    const json& e = j["estimator"];
    EXPECT_EQ(e["draws"], 64);
    expect_rel(e["tail_energy_spectrum"], tail, 1e-5, "tail energy from the spectrum");
    expect_rel(e["tail_energy"], tail, 1e-3, "tail energy with the fp32 Q1");
    expect_rel(e["variance_theory"], (k - 1) * tail, 1e-3, "variance theory");
    expect_rel(e["mse_theory"], (k - 1) * tail, 1e-3, "E||X~ - X||^2 theory");
    expect_rel(e["mse_theory_spectrum"], (k - 1) * tail, 1e-5, "E||X~ - X||^2 theory (spectrum)");
    EXPECT_LT(e["bias_sq_theory"].get<double>(), 1e-6 * tail);  // k_mult = 1: unbiased to fp32 precision of k
    double emp = e["mse_empirical"], se = e["mse_stderr"], theory = e["mse_theory"];
    EXPECT_GT(se, 0);
    EXPECT_LT(se, 0.2 * theory);  // 64 draws pin the mean down to a few percent here (se / theory 0.007)
    EXPECT_LE(std::fabs(emp - theory), std::max(t_quantile_1e6(64) * se, 1e-3 * theory))
        << "empirical " << emp << " +- " << se << " vs theory " << theory;
    expect_rel(e["mse_ratio"], emp / theory, 1e-9, "ratio");
    // Unbiased: ||mean(X~) - X||² has expectation Var / K. It concentrates (the noise spreads over many
    // directions): over 300 seeds (64 draws, a matrix of this spectrum) the ratio empirical / expected stayed in
    // [0.925, 1.079] (std 0.029), so [0.75, 1.25] is a margin of 8 standard deviations, while a bias the size of the
    // tail would push the ratio to about sqrt(1 + K / (k - 1)) = 4.7.
    double expected = e["bias_rel_expected"], got = e["bias_rel_empirical"];
    expect_rel(expected, std::sqrt((k - 1) * tail / 64) / std::sqrt(total), 1e-3, "expected relative bias");
    EXPECT_GT(got, 0.75 * expected);
    EXPECT_LT(got, 1.25 * expected);
    // variance about the empirical mean estimates the same (k - 1) T here (over the same 300 seeds its distance to
    // the theory in units of se had std 0.975, like the mean's)
    EXPECT_LE(std::fabs(e["variance_empirical"].get<double>() - theory),
              std::max(t_quantile_1e6(64) * se, 1e-3 * theory));
    // unbiased: <X~ - X, X> has mean 0; the verdict judges all three and finds them consistent
    EXPECT_EQ(e["bias_dot_x_theory"].get<double>(), 0.0);
    EXPECT_LE(std::fabs(e["bias_dot_x_empirical"].get<double>()),
              std::max(t_quantile_1e6(64) * e["bias_dot_x_stderr"].get<double>(), 1e-6 * total));
    EXPECT_EQ(j["verdict"]["result"], "consistent") << j["verdict"].dump();
    std::vector<std::string> names;
    for (const json& c : j["verdict"]["checks"]) names.push_back(c["name"]);
    EXPECT_EQ(names, std::vector<std::string>({"mse", "bias"}));
    EXPECT_TRUE(j["verdict"]["not_judged"].empty());
  }
}

// --warm-from: the refreshes of earlier dumps warm-start FILE's (as in training); the chain is reported, the Q1 meets
// the 2% tail bar, and a dump of another width is refused naming both files.
TEST_F(AnalyzeTest, WarmStartChainAndItsBadInput) {
    std::string other = file("other.npy");
    std::vector<float> Y = synthetic(N_ROWS, WIDTH, test_spectrum(), 8);  // another draw of the same spectrum
    write_npy_f32(other, Y.data(), {N_ROWS, WIDTH});
    json j = run_json({x_path, "--r1", "16", "--r2", "16", "--draws", "4", "--warm-from", other + "," + other});
    EXPECT_EQ(j["estimator"]["warm_starts"], 2);
    EXPECT_LE(j["estimator"]["tail_ratio"].get<double>(), 1.02);
    EXPECT_GE(j["estimator"]["tail_ratio"].get<double>(), 1 - 1e-4);
    std::string narrow = file("narrow.npy");
    std::vector<float> Z((size_t)N_ROWS * 8, 1.0f);
    write_npy_f32(narrow, Z.data(), {N_ROWS, 8});
    RunResult r = run({x_path, "--r1", "16", "--r2", "16", "--warm-from", narrow});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("narrow.npy"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("same site"), std::string::npos) << r.err;
    r = run({x_path, "--refresh", "fast"});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("exact or subspace"), std::string::npos) << r.err;
    // the trainer's --prac-refresh auto is the subspace refresh, and so it is here (it was refused)
    json from_auto = run_json({x_path, "--r1", "16", "--r2", "16", "--refresh", "auto", "--draws", "2"});
    EXPECT_EQ(from_auto["estimator"]["refresh"], "subspace");
    // nothing to warm-start: refused (the file was read and ignored, or not read at all: a missing one passed)
    const std::vector<std::vector<std::string>> nothing_to_warm = {
        {"--mode", "none", "--mode none computes none"},
        {"--mode", "rac", "--mode rac has no Q1"},
        {"--refresh", "exact", "--refresh exact solves from scratch"}};
    for (const std::vector<std::string>& c : nothing_to_warm) {
        r = run({x_path, c[0], c[1], "--warm-from", file("missing.npy")});
        EXPECT_EQ(r.rc, 1) << c[0] << " " << c[1];
        EXPECT_NE(r.err.find(c[2]), std::string::npos) << r.err;
    }
    // a warm-start file is checked as FILE is: a non-finite value is named with its file (it failed as "warm-start
    // refresh failed"), and --bf16 holds for it too
    std::vector<float> W = Y;
    W[3 * WIDTH + 5] = NAN;
    write_npy_f32(file("nan_warm.npy"), W.data(), {N_ROWS, WIDTH});
    r = run({x_path, "--r1", "16", "--r2", "16", "--warm-from", file("nan_warm.npy")});
    EXPECT_EQ(r.rc, 1);
    EXPECT_NE(r.err.find("nan_warm.npy: X[3, 5] = nan is not finite"), std::string::npos) << r.err;
    // --mode none: the estimator's flags are said to change nothing
    r = run({x_path, "--mode", "none", "--k-mult", "2", "--draws", "4", "--k-mult", "3"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("notice: --k-mult --draws change nothing with --mode none"), std::string::npos) << r.err;
    // --mode pac: the random part's flags likewise (they were printed back, "k_mult 2", as if they applied)
    r = run({x_path, "--mode", "pac", "--k-mult", "2", "--draws", "5", "--r1", "16", "--r2", "16"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("notice: --k-mult --draws change nothing with --mode pac"), std::string::npos) << r.err;
    r = run({x_path, "--mode", "pac", "--r1", "16", "--r2", "16"});
    EXPECT_EQ(r.err.find("notice"), std::string::npos) << r.err;
}

// The subspace refresh on real activations (issue 15): a site's input dumped by the trainers at steps 5 and 10 of one
// short baseline run on the built-in corpus (gpt2-mini fch_gelu and llama-mini fch_act, layer 1, B = 2 x T = 256
// rows; one thread and --prac none, so that the activations are the same everywhere and whatever the refresh does),
// refreshed as in training (cold on step 5's dump, warm on step 10's) with the linear ranks: its tail energy is
// within 2% of the exact fp32 refresh's (the bar), and the measured reconstruction error matches the theory
// from the Q1 used. These two were the hardest of the layer-1 sites tried (ln1, ln2, fch_gelu; ln1, ln2, fch_gate,
// fch_up, fch_act). Measured ratios: 1.0074 and 1.0043 with the default two warm steps, 1.0194 and 1.0150 with
// one (within the bar, by too little to rely on: hence two), 1.076 and 1.092 with none (PracSubspaceParams::
// warm_iters = 0: the check fails, as it should). On both, the warm refresh's first power step is beyond CholQR2;
// it must be orthonormalized by shifted Cholesky-QR, not Householder QR (before it existed: one
// Householder QR per refresh, and the check fails with shifted Cholesky-QR disabled).
TEST_F(AnalyzeTest, SubspaceRefreshOnRealActivations) {
    struct Site {
        const char *trainer, *model, *site;
    };
    for (const Site& s : {Site{"train_gpt2", "gpt2-mini", "fch_gelu"}, Site{"train_llama", "llama-mini", "fch_act"}}) {
        SCOPED_TRACE(s.model);
        std::string dump[2];
        for (int i = 0; i < 2; i++) {  // the same 11-step run twice (deterministic), dumping at step 5, then 10
            const std::string step = std::to_string(5 * (i + 1)), log = file("train.log");
            dump[i] = file(std::string(s.site) + step + ".npy");
            std::string cmd = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout -k 10 300 " +
                              quote(std::string(PRAC_SOURCE_DIR) + "/" + s.trainer) + " --model " + s.model +
                              " --device cpu --prac none --batch-size 2 --steps 11 --dump-site " + s.site +
                              " --dump-layer 1 --dump-step " + step + " --dump-path " + quote(dump[i]) + " >" +
                              quote(log) + " 2>&1 </dev/null";
            int status = std::system(cmd.c_str());
            ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n" << read_bytes(log);
        }
        json sub = run_json({dump[1], "--refresh", "subspace", "--warm-from", dump[0], "--draws", "32"});
        json ex = run_json({dump[1], "--refresh", "exact", "--draws", "1"});  // its tail energy only
        const json &es = sub["estimator"], &ee = ex["estimator"];
        ASSERT_EQ(sub["shape"], json({512, s.model[0] == 'g' ? 512 : 352}));
        EXPECT_EQ(es["warm_starts"], 1);
        double ratio = es["tail_energy"].get<double>() / ee["tail_energy"].get<double>();
        EXPECT_LE(ratio, 1.02) << "subspace tail " << es["tail_energy"] << " vs exact " << ee["tail_energy"];
        // nothing beats the float64 optimum (the exact fp32 refresh may: its Gram matrix rounds the small tail)
        EXPECT_GE(es["tail_ratio"].get<double>(), 1 - 1e-4);
        double emp = es["mse_empirical"], se = es["mse_stderr"], theory = es["mse_theory"];
        EXPECT_LE(std::fabs(emp - theory), std::max(t_quantile_1e6(32) * se, 1e-3 * theory))
            << "empirical " << emp << " +- " << se << " vs theory " << theory;
        // its first power step is too ill-conditioned for CholQR2 here (measured: one orthonormalization per warm
        // refresh); shifted Cholesky-QR must take it, not the slow Householder QR
        EXPECT_EQ(es["orth_fallbacks"]["householder"], 0) << es["orth_fallbacks"];
        EXPECT_EQ(sub["verdict"]["result"], "consistent") << sub["verdict"].dump();
        std::printf("[ stats    ] %s %s: subspace / exact tail %.4f (to the float64 optimum: %.4f and %.4f), "
                    "measured error / theory %.4f +- %.4f, orthonormalizations past CholQR2: %d shifted "
                    "Cholesky-QR, %d Householder\n", s.model, s.site, ratio, es["tail_ratio"].get<double>(),
                    ee["tail_ratio"].get<double>(), emp / theory, se / theory,
                    es["orth_fallbacks"]["shifted_cholqr"].get<int>(), es["orth_fallbacks"]["householder"].get<int>());
    }
}

// The reported standard error is the per-draw spread over sqrt(K): checked against the spread of 32 independent
// one-draw runs (other seeds), with which it shares no arithmetic. se² K / s² is the ratio of two variance estimates of
// one distribution with 63 and 31 degrees of freedom: F(63, 31) has its 1e-6 two-sided quantiles at 0.234 and 5.80
// (computed by integrating the F density numerically); the errors are sums of many squares, close to normal, so
// [0.2, 7] is that band with a margin. An se without its 1/sqrt(K) (it widens every |emp - theory| <= t se check
// above) gives 64.
TEST_F(AnalyzeTest, StandardErrorMatchesTheSpreadOfIndependentDraws) {
    json j = run_json({x_path, "--r1", "16", "--r2", "16", "--seed", "3", "--draws", "64"});
    const double se = j["estimator"]["mse_stderr"];
    std::vector<double> one;
    for (int seed = 100; seed < 132; seed++) {
        json d = run_json({x_path, "--r1", "16", "--r2", "16", "--seed", std::to_string(seed), "--draws", "1"});
        one.push_back(d["estimator"]["mse_empirical"].get<double>());
    }
    double mean = 0, ss = 0;
    for (double v : one) mean += v / (double)one.size();
    for (double v : one) ss += (v - mean) * (v - mean);
    const double s2 = ss / (double)(one.size() - 1), ratio = se * se * 64 / s2;
    EXPECT_GT(ratio, 0.2) << "se " << se << ", one-draw spread " << std::sqrt(s2);
    EXPECT_LT(ratio, 7.0) << "se " << se << ", one-draw spread " << std::sqrt(s2);
}

// k_mult = 2 doubles the random part: biased by (c - 1) X⊥ with c = 2, variance c (k - c) T.
TEST_F(AnalyzeTest, KMultBiasIsMeasured) {
    json j = run_json({x_path, "--r1", "16", "--r2", "16", "--k-mult", "2", "--draws", "64"});
    std::vector<double> s = test_spectrum();
    double tail = sum_sq(s, 16, WIDTH), total = sum_sq(s, 0, WIDTH), c = 2, k = 2.0 * 64 / 16;
    const json& e = j["estimator"];
    expect_rel(j["ranks"]["k"], k, 1e-6, "k");
    expect_rel(e["bias_sq_theory"], (c - 1) * (c - 1) * tail, 1e-3, "bias^2 theory");
    expect_rel(e["variance_theory"], c * (k - c) * tail, 1e-3, "variance theory");
    expect_rel(e["mse_theory"], (c * k - 2 * c + 1) * tail, 1e-3, "mse theory");
    double emp = e["mse_empirical"], se = e["mse_stderr"], theory = e["mse_theory"];
    EXPECT_LE(std::fabs(emp - theory), std::max(t_quantile_1e6(64) * se, 1e-3 * theory));
    // the variance about the draws' mean leaves the bias out: c (k - c) T, not the mse (c k - 2c + 1) T. A variance
    // that kept the bias (T, 8% of the mse) is off by about T: 105 against this band's 57 (the mse's band: the
    // draws' spread is the variance's too)
    EXPECT_LE(std::fabs(e["variance_empirical"].get<double>() - e["variance_theory"].get<double>()),
              std::max(t_quantile_1e6(64) * se, 1e-3 * e["variance_theory"].get<double>()))
        << "variance_empirical " << e["variance_empirical"] << ", theory " << e["variance_theory"] << ", se " << se;
    // the bias now dominates the mean's error: expected sqrt(T + c (k - c) T / K) / ||X||; over 150 seeds (64 draws)
    // the ratio empirical / expected stayed in [0.960, 1.070] (std 0.019): 20% is a margin of 10 standard deviations
    double expected = e["bias_rel_expected"];
    expect_rel(expected, std::sqrt(tail * (1 + c * (k - c) / 64)) / std::sqrt(total), 1e-3, "expected bias");
    expect_rel(e["bias_rel_empirical"], expected, 0.2, "empirical relative bias");
    // the bias along X is (c - 1) T = T, and the verdict judges it against that, not against 0
    expect_rel(e["bias_dot_x_theory"], (c - 1) * tail, 1e-3, "<E[X~] - X, X> theory");
    EXPECT_LE(std::fabs(e["bias_dot_x_empirical"].get<double>() - e["bias_dot_x_theory"].get<double>()),
              std::max(t_quantile_1e6(64) * e["bias_dot_x_stderr"].get<double>(), 1e-6 * total));
    EXPECT_EQ(j["verdict"]["result"], "consistent") << j["verdict"].dump();
}

// pac keeps the top r1 + r2 directions: deterministic, bias² = the tail energy beyond r1 + r2, no variance.
TEST_F(AnalyzeTest, PacIsBiasedWithoutVariance) {
    json j = run_json({x_path, "--mode", "pac", "--r1", "16", "--r2", "8"});
    std::vector<double> s = test_spectrum();
    double tail = sum_sq(s, 24, WIDTH), total = sum_sq(s, 0, WIDTH);
    EXPECT_EQ(j["ranks"]["r1"], 24);
    EXPECT_EQ(j["ranks"]["r2"], 0);
    const json& e = j["estimator"];
    EXPECT_EQ(e["draws"], 1);
    expect_rel(e["bias_sq_theory"], tail, 1e-3, "bias^2 = tail");
    EXPECT_EQ(e["variance_theory"], 0.0);
    EXPECT_EQ(e["variance_empirical"], 0.0);
    EXPECT_EQ(e["mse_stderr"], 0.0);
    expect_rel(e["mse_empirical"], tail, 1e-3, "||X Q1 Q1^T - X||^2");
    expect_rel(e["mse_ratio"], 1.0, 1e-3, "ratio");
    expect_rel(e["bias_rel_empirical"], std::sqrt(tail / total), 1e-3, "relative bias");
    expect_rel(e["bias_rel_expected"], std::sqrt(tail / total), 1e-3, "expected relative bias");
    // X~ - X = -X (I - Q1 Q1ᵀ): its product with X is -T; only the tail is judged
    expect_rel(e["bias_dot_x_empirical"], -tail, 1e-3, "<X~ - X, X>");
    expect_rel(e["bias_dot_x_theory"], -tail, 1e-3, "<X~ - X, X> theory");
    EXPECT_EQ(j["verdict"]["result"], "not judged") << j["verdict"].dump();
    EXPECT_TRUE(j["verdict"]["checks"].empty());
    EXPECT_NE(j["verdict"]["not_judged"][0].get<std::string>().find("pac draws nothing"), std::string::npos);
}

// rac: no Q1; r2 = r1 + r2 random directions, k = n / r2, variance (n / r2 - 1) ||X||_F².
TEST_F(AnalyzeTest, RacVarianceIsNOverR2MinusOneTimesEnergy) {
    json j = run_json({x_path, "--mode", "rac", "--r1", "16", "--r2", "16", "--draws", "64"});
    std::vector<double> s = test_spectrum();
    double total = sum_sq(s, 0, WIDTH);
    EXPECT_EQ(j["ranks"]["r1"], 0);
    EXPECT_EQ(j["ranks"]["r2"], 32);
    const json& e = j["estimator"];
    expect_rel(e["tail_energy"], total, 1e-6, "tail = ||X||^2");
    expect_rel(e["mse_theory"], (80.0 / 32 - 1) * total, 1e-5, "rac theory");
    double emp = e["mse_empirical"], se = e["mse_stderr"], theory = e["mse_theory"];
    EXPECT_LE(std::fabs(emp - theory), std::max(t_quantile_1e6(64) * se, 1e-3 * theory))
        << "empirical " << emp << " +- " << se << " vs theory " << theory;
}

TEST_F(AnalyzeTest, ReadsA3DArrayAsRows) {
    std::vector<float> X = synthetic(N_ROWS, WIDTH, test_spectrum(), 7);
    std::string p3 = file("x3.npy");
    write_npy_f32(p3, X.data(), {4, N_ROWS / 4, WIDTH});
    RunResult r = run({p3, "--mode", "none", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("as (B*T, n) = (640, 80)"), std::string::npos) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["shape"], json({N_ROWS, WIDTH}));
    EXPECT_EQ(j["reshaped_from"], json({4, N_ROWS / 4, WIDTH}));
    EXPECT_TRUE(j["estimator"].is_null());
    expect_rel(j["singular_values"][0], 20.0, 1e-4, "sigma_1");
}

TEST_F(AnalyzeTest, TableOutput) {
    RunResult r = run({x_path, "--draws", "4"});
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* part : {"shape              (640, 80)", "effective rank", "stable rank", "rank for 99%",
                             "(r1 + r2)", "mode prac, r1 = 24, r2 = 24", "4 draws", "E||X~ - X||_F^2",
                             "||mean(X~) - X||_F / ||X||_F"})
        EXPECT_NE(r.out.find(part), std::string::npos) << "\"" << part << "\" not in:\n" << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;  // small inputs: no progress lines
    // 4 draws: not judged, said why
    for (const char* part : {"verdict  not judged", "not judged: fewer than 8 draws"})
        EXPECT_NE(r.out.find(part), std::string::npos) << "\"" << part << "\" not in:\n" << r.out;
    // one draw has no standard error: said (the table printed "+- nan")
    RunResult one = run({x_path, "--draws", "1"});
    ASSERT_EQ(one.rc, 0) << one.err;
    EXPECT_NE(one.out.find("(one draw: no s.e.)"), std::string::npos) << one.out;
    EXPECT_EQ(one.out.find("nan"), std::string::npos) << one.out;
    // X of rank 1 <= r1: the tail is exactly zero and the ratios to it are undefined: said (it printed "ratio nan")
    std::vector<float> col((size_t)N_ROWS * WIDTH, 0.0f);
    for (int i = 0; i < N_ROWS; i++) col[(size_t)i * WIDTH] = (float)(i % 7) - 3.0f;
    write_npy_f32(file("onecol.npy"), col.data(), {N_ROWS, WIDTH});
    RunResult zero = run({file("onecol.npy")});
    ASSERT_EQ(zero.rc, 0) << zero.err;
    EXPECT_EQ(zero.out.find("nan"), std::string::npos) << zero.out;
    EXPECT_NE(zero.out.find("ratio undefined (T = 0)"), std::string::npos) << zero.out;
}

// X of rank 8 < r1 = 24 (as a GPT-2 fch dump: rank <= C of its 4C columns): the tail past r1 is float32 rounding, so
// its ratios measure nothing; said in the table and in the JSON (tail_ratio 190 and mse_ratio 3.1 read as failures).
// The test spectrum's tail (a third of the energy past r1) gets no warning.
TEST_F(AnalyzeTest, ATailAtRoundingIsSaid) {
    std::vector<double> s(WIDTH, 0.0);
    for (int i = 0; i < 8; i++) s[i] = 10.0 - i;
    std::vector<float> X = synthetic(N_ROWS, WIDTH, s, 11);
    write_npy_f32(file("rank8.npy"), X.data(), {N_ROWS, WIDTH});
    json j = run_json({file("rank8.npy"), "--draws", "4"});
    EXPECT_TRUE(j["estimator"]["tail_at_rounding"].get<bool>()) << j["estimator"].dump();
    RunResult r = run({file("rank8.npy"), "--draws", "4"});
    EXPECT_NE(r.out.find("warning: the spectrum's tail past r1 holds"), std::string::npos) << r.out;
    // a tail of 1.5e-7 of ||X||² (rank 8 plus noise at 1e-3): said too (up to 1e-5: a rank-64 signal's tail at 6.9e-7
    // read tail_ratio 1.30 for the refresh's 1.01)
    for (int i = 8; i < WIDTH; i++) s[i] = 1e-3;
    std::vector<float> Y = synthetic(N_ROWS, WIDTH, s, 11);
    write_npy_f32(file("rank8_noise.npy"), Y.data(), {N_ROWS, WIDTH});
    json k = run_json({file("rank8_noise.npy"), "--draws", "4"});
    EXPECT_TRUE(k["estimator"]["tail_at_rounding"].get<bool>()) << k["estimator"].dump();
    EXPECT_EQ(k["verdict"]["result"], "not judged") << k["verdict"].dump();
    EXPECT_FALSE(run_json({x_path, "--draws", "4"})["estimator"]["tail_at_rounding"].get<bool>());
    EXPECT_EQ(run({x_path, "--draws", "4"}).out.find("warning"), std::string::npos);
}

// X at 1e-20 of the test matrix's scale: the refresh's float32 Gram underflows (its basis is noise: a tail ratio of
// 1.5 was printed as a result), said on stderr (the JSON stays JSON); at the test scale nothing is said.
TEST_F(AnalyzeTest, AScaleOutOfFloat32sRangeIsSaid) {
    std::vector<float> X = synthetic(N_ROWS, WIDTH, test_spectrum(), 7);
    for (float& x : X) x *= 1e-20f;
    write_npy_f32(file("tiny.npy"), X.data(), {N_ROWS, WIDTH});
    RunResult r = run({file("tiny.npy"), "--draws", "4", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NO_THROW((void)json::parse(r.out)) << r.out;
    EXPECT_NE(r.err.find("warning: " + file("tiny.npy") + ": X's column energies reach"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("below float32's range"), std::string::npos) << r.err;
    EXPECT_EQ(run({x_path, "--draws", "4", "--json"}).err.find("warning"), std::string::npos);
}

TEST_F(AnalyzeTest, HelpAndBadInputs) {
    RunResult h = run({"--help"});
    EXPECT_EQ(h.rc, 0);
    for (const char* part : {"--bf16", "--r1-frac", "--draws", "--png", "singular_values", "cumulative_energy"})
        EXPECT_NE(h.out.find(part), std::string::npos) << part;

    auto bad = [&](std::vector<std::string> args, std::vector<const char*> parts) {
        RunResult r = run(args);
        std::string cmd;
        for (const auto& a : args) cmd += a + " ";
        EXPECT_EQ(r.rc, 1) << cmd << "\n" << r.err;
        EXPECT_TRUE(r.out.empty()) << cmd;
        for (const char* p : parts)
            EXPECT_NE(r.err.find(p), std::string::npos) << cmd << ": \"" << p << "\" not in " << r.err;
    };
    bad({}, {"no input file"});
    bad({file("missing.npy")}, {"cannot open", "missing.npy"});
    bad({FIXTURES + "f8.npy"}, {"'<f8'", "float64"});
    bad({FIXTURES + "fortran_2x3.npy"}, {"Fortran-order", "ascontiguousarray"});
    bad({FIXTURES + "truncated.npy"}, {"truncated"});
    bad({FIXTURES + "bf16_u2.npy"}, {"'<u2'", "--bf16"});
    bad({FIXTURES + "bf16_u2.npy", "--bf16"}, {"expected a 2-D", "(7,)"});
    bad({FIXTURES + "f4_2x3.npy", "--bf16"}, {"'<f4' is not '<u2'", "drop --bf16"});  // refused, not ignored
    bad({FIXTURES + "f4_scalar.npy"}, {"expected a 2-D", "()"});
    write_bytes(file("text.npy"), "just text");
    bad({file("text.npy")}, {"not an .npy file"});
    bad({x_path, "--r1", "40", "--r2", "40"}, {"r1 = 40 + r2 = 40", "must be below 80", "--r1/--r2"});
    bad({x_path, "--r1-frac", "0.6", "--r2-frac", "0.4"}, {"must be below 80"});
    // ranks whose int sum wraps negative (it passed both checks, then an allocation failed: "internal error")
    bad({x_path, "--r1", "2147483647", "--r2", "1"}, {"r1 = 2147483647 + r2 = 1", "must be below 80"});
    bad({x_path, "--mode", "pac", "--r1", "1", "--r2", "2147483647"}, {"r1 = 1 + r2 = 2147483647", "must be below 80"});
    bad({x_path, "--mode", "rac", "--r1", "0", "--r2", "0"}, {"total rank is 0"});
    bad({x_path, "--r2", "0"}, {"mode prac needs r2 > 0", "--mode"});
    bad({x_path, "--k-mult", "0"}, {"must be positive"});
    bad({x_path, "--k-mult", "1e300"}, {"--k-mult: 1e300 is out of range"});  // it said "needs a number"
    // finite, but k and every result overflowed to inf or NaN, with exit 0: the trainers' bound
    bad({x_path, "--k-mult", "1e37"}, {"--k-mult: 1e37 is out of range (|value| <= 1e9)"});
    // not a finite decimal number: said so, as the trainers say it (nan was "out of range (|value| <= 1e9)")
    for (const char* v : {"nan", "0x0.1", " 0.1"})
        bad({x_path, "--r1-frac", v},
            {("flag --r1-frac needs a finite decimal number, got \"" + std::string(v) + "\"").c_str()});
    bad({x_path, "--draws", "0"}, {"--draws must be at least 1"});
    bad({x_path, "--draws", "many"}, {"needs an integer"});
    bad({x_path, "--mode", "fast"}, {"--mode must be prac, pac, rac or none"});
    bad({x_path, "--r1", "8", "--r1-frac", "0.1"}, {"not both"});
    bad({x_path, "--wat"}, {"unknown flag \"--wat\"", "--help"});
    bad({x_path, x_path}, {"two input files"});
    bad({x_path, "--png", "out.jpg"}, {"must end in .png"});
    std::vector<float> zeros(64, 0.0f), nan(64, 1.0f);
    nan[10] = NAN;
    write_npy_f32(file("zeros.npy"), zeros.data(), {8, 8});
    write_npy_f32(file("nan.npy"), nan.data(), {8, 8});
    bad({file("zeros.npy"), "--mode", "none"}, {"all zeros"});
    bad({file("nan.npy"), "--mode", "none"}, {"X[1, 2]", "not finite"});
    // a PNG path that cannot be written, or a TMPDIR that cannot take the plot's JSON: refused before the analysis
    // (they failed after it, its table printed: minutes lost on a large dump)
    fs::create_directory(file("adir.png"));
    bad({x_path, "--png", file("adir.png")}, {"adir.png is a directory"});
    // someone's file or a pipe at the PNG's path is not replaced (an earlier picture is: PngPlot)
    write_bytes(file("notes.png"), "notes");
    bad({x_path, "--png", file("notes.png")}, {"notes.png exists and is not a .png picture"});
    EXPECT_EQ(read_bytes(file("notes.png")), "notes");
    ASSERT_EQ(mkfifo(file("pipe.png").c_str(), 0600), 0);
    bad({x_path, "--png", file("pipe.png")}, {"pipe.png is not a regular file (a pipe or a device)"});
    // values whose squares overflow the float32 sums: every result was NaN with exit 0 (--mode rac, "one draw")
    std::vector<float> huge = synthetic(N_ROWS, WIDTH, test_spectrum(), 5);
    for (float& x : huge) x = x > 0 ? 3e38f : -3e38f;
    write_npy_f32(file("huge.npy"), huge.data(), {N_ROWS, WIDTH});
    for (const char* mode : {"rac", "prac"})
        bad({file("huge.npy"), "--mode", mode, "--draws", "3"},
            {"past float32's largest value", "--mode none gives its spectrum as it is"});
    // (the spectrum alone is computed in double: warned, not refused)
    EXPECT_EQ(run({file("huge.npy"), "--mode", "none"}).rc, 0);
    const char* had = std::getenv("TMPDIR");
    const std::string saved = had ? had : "";
    setenv("TMPDIR", file("zeros.npy").c_str(), 1);  // a file, not a directory
    const std::string no_tmp = "cannot create a file in " + file("zeros.npy");
    bad({x_path, "--png", file("p.png")}, {no_tmp.c_str(), "TMPDIR"});
    had ? setenv("TMPDIR", saved.c_str(), 1) : unsetenv("TMPDIR");
}

// Needs python3 with matplotlib: skipped without (the C++ tests must not need Python).
TEST_F(AnalyzeTest, PngPlot) {
    if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
        GTEST_SKIP() << "python3 with matplotlib not available";
    std::string png = file("spectrum.png");
    RunResult r = run({x_path, "--draws", "2", "--png", png});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("wrote " + png), std::string::npos) << r.err;
    std::string bytes = read_bytes(png);
    ASSERT_GT(bytes.size(), 1000u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    // an earlier picture is replaced (someone's other file is not: HelpAndBadInputs)
    RunResult again = run({x_path, "--draws", "2", "--png", png});
    ASSERT_EQ(again.rc, 0) << again.err;
    EXPECT_NE(again.err.find("wrote " + png), std::string::npos) << again.err;
}
