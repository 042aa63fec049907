// Tests for common/safetensors: conversions, round trips, interop with the Python library (through a
// committed fixture, so no Python at test time), every bad-input message, and atomic writes.
#include "common/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "test/test_files.h"

namespace fs = std::filesystem;

// ----------------------------------------------------------------------------
// helpers

// A hand-made safetensors file: length field (header.size() unless overridden), header, data.
static void write_raw_file(const std::string& path, const std::string& header, const std::string& data,
                           uint64_t header_len_field = UINT64_MAX) {
    uint64_t n = header_len_field == UINT64_MAX ? header.size() : header_len_field;
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; i++) bytes[i] = (char)(n >> (8 * i));
    write_bytes(path, bytes + header + data);
}

// The message of the UserError f throws; "" (and a test failure) if it throws nothing.
template <typename F>
static std::string user_error(F f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected a UserError";
    return "";
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
    << "message: " << (haystack) << "\nlacks: " << (needle)

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

// ----------------------------------------------------------------------------
// conversions

TEST(Convert, Bf16WideningIsExactAndRoundTripsEveryValue) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        ASSERT_EQ(bits(f), h << 16);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
        } else {
            ASSERT_EQ(f32_to_bf16(f), h) << h;
        }
    }
}

TEST(Convert, F16WideningIsExactAndRoundTripsEveryValue) {
    EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
    EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));
    EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
    EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
    EXPECT_EQ(bits(f16_to_f32(0x8000)), 0x80000000u);
    EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
    EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));  // signalling NaN must not become inf
    for (uint32_t h = 0; h < 65536; h++) {
        float f = f16_to_f32((uint16_t)h);
        if (std::isnan(f)) {
            ASSERT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
            continue;
        }
        ASSERT_EQ(f32_to_f16(f), h) << h;
        // strictly increasing over the positive finite values
        if (h > 0 && h < 0x7c00) {
            ASSERT_LT(f16_to_f32((uint16_t)(h - 1)), f);
        }
    }
}

// Checks h is the round-to-nearest-even narrowing of x by comparing against its neighbours.
// `widen` decodes, `inf_code` is the narrow +inf, `inf_as` the value inf stands for when rounding
// (the next power of two after the largest finite value).
static void check_nearest_even(float x, uint16_t h, float (*widen)(uint16_t), uint16_t inf_code, double inf_as) {
    ASSERT_EQ(h & 0x8000, (bits(x) >> 16) & 0x8000) << "sign of " << x;
    uint16_t m = h & 0x7fff;
    ASSERT_LE(m, inf_code) << x;
    auto value = [&](uint16_t c) { return c == inf_code ? inf_as : (double)widen(c); };
    double ax = std::fabs((double)x);
    double d = std::fabs(ax - value(m));
    if (m > 0) {
        double dlo = std::fabs(ax - value((uint16_t)(m - 1)));
        ASSERT_LE(d, dlo) << x;
        if (d == dlo) {
            ASSERT_EQ(m & 1, 0) << "tie must go to even: " << x;
        }
    }
    if (m < inf_code) {
        double dhi = std::fabs(ax - value((uint16_t)(m + 1)));
        ASSERT_LE(d, dhi) << x;
        if (d == dhi) {
            ASSERT_EQ(m & 1, 0) << "tie must go to even: " << x;
        }
    }
}

TEST(Convert, F32ToBf16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(from_bits(0x3f808000)), 0x3f80);  // tie, lsb even: down
    EXPECT_EQ(f32_to_bf16(from_bits(0x3f818000)), 0x3f82);  // tie, lsb odd: up to even
    EXPECT_EQ(f32_to_bf16(from_bits(0x3f808001)), 0x3f81);  // just above the tie: up
    EXPECT_EQ(f32_to_bf16(from_bits(0x7f7fffff)), 0x7f80);  // FLT_MAX rounds to inf
    EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001)))));  // payload only in low bits
    std::mt19937 rng(1);
    for (int i = 0; i < 1000000; i++) {
        float x = from_bits(rng());
        if (std::isnan(x)) continue;
        uint16_t h = f32_to_bf16(x);
        if (std::isinf(x)) {
            ASSERT_EQ(bf16_to_f32(h), x);
            continue;
        }
        check_nearest_even(x, h, bf16_to_f32, 0x7f80, std::ldexp(1.0, 128));
    }
}

TEST(Convert, F32ToF16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // the tie above the max rounds to inf
    EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);            // tie with 0: even is 0
    EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);            // above the tie
    EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);            // 1.5 ulp: tie, up to even
    EXPECT_EQ(f32_to_f16(std::ldexp(2047.0f, -25)), 0x0400);         // subnormal rounds up to normal
    EXPECT_EQ(f32_to_f16(from_bits(1)), 0x0000);                     // f32 subnormal
    EXPECT_EQ(f32_to_f16(-from_bits(1)), 0x8000);
    EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);     // tie, even down
    EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);     // tie, odd up
    EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(from_bits(0x7f800001)))));
    std::mt19937 rng(2);
    for (int i = 0; i < 1000000; i++) {
        // Random bits mostly land outside f16's range; aim half the draws at it.
        uint32_t u = rng();
        if (i % 2) u = (u & 0x807fffffu) | ((uint32_t)(95 + rng() % 50) << 23);  // 2^-32 .. 2^17
        float x = from_bits(u);
        if (std::isnan(x)) continue;
        uint16_t h = f32_to_f16(x);
        if (std::fabs(x) >= 65520.0f) {
            ASSERT_EQ(h & 0x7fff, 0x7c00) << x;
            continue;
        }
        check_nearest_even(x, h, f16_to_f32, 0x7c00, 65536.0);
#ifdef __FLT16_MAX__
        _Float16 ref = (_Float16)x;
        uint16_t rbits;
        std::memcpy(&rbits, &ref, 2);
        ASSERT_EQ(h, rbits) << x;
#endif
    }
}

TEST(Convert, DtypeSizes) {
    EXPECT_EQ(safetensors_dtype_size("F32"), 4u);
    EXPECT_EQ(safetensors_dtype_size("BF16"), 2u);
    EXPECT_EQ(safetensors_dtype_size("F16"), 2u);
    EXPECT_EQ(safetensors_dtype_size("I64"), 8u);
    EXPECT_EQ(safetensors_dtype_size("BOOL"), 1u);
    EXPECT_EQ(safetensors_dtype_size("f32"), 0u);  // dtype names are case-sensitive
    EXPECT_EQ(safetensors_dtype_size("Q4"), 0u);
}

// ----------------------------------------------------------------------------
// round trips

using RoundTrip = TmpDirTest;

TEST_F(RoundTrip, ManyShapesAndDtypesAreExact) {
    std::vector<float> a(6), scalar = {-7.25f};
    for (int i = 0; i < 6; i++) a[i] = (float)i * 0.1f - 0.3f;  // not representable in bf16: raw bits must survive
    std::vector<uint16_t> b(15);
    for (int i = 0; i < 15; i++) b[i] = f32_to_bf16((float)i * 1.5f - 3.0f);
    std::vector<int32_t> c = {INT32_MIN, -1, 0, INT32_MAX};
    std::vector<int64_t> d = {INT64_MIN, INT64_MAX};
    std::vector<uint8_t> e = {0, 1, 255};
    std::vector<float> ones = {1.0f};
    std::string path = file("rt.safetensors");
    safetensors_write(path, {
                                {"a", "F32", {2, 3}, a.data()},
                                {"b", "BF16", {5, 3}, b.data()},
                                {"c", "I32", {4}, c.data()},
                                {"d", "I64", {2}, d.data()},
                                {"e", "U8", {3}, e.data()},
                                {"scalar", "F32", {}, scalar.data()},
                                {"empty", "F32", {0}, nullptr},
                                {"empty3d", "BF16", {3, 0, 2}, nullptr},
                                {"ones", "F32", {1, 1, 1, 1}, ones.data()},
                            });
    SafeTensorsFile f = safetensors_open(path);
    EXPECT_EQ(f.tensors.size(), 9u);
    EXPECT_EQ(f.names().size(), 9u);
    EXPECT_TRUE(f.metadata.empty());
    EXPECT_EQ(read_bytes(path).find("__metadata__"), std::string::npos);  // omitted when empty

    EXPECT_EQ(f.shape("a"), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(f.shape("scalar"), (std::vector<int64_t>{}));
    EXPECT_EQ(f.get("scalar").numel(), 1u);
    EXPECT_EQ(f.get("empty3d").numel(), 0u);
    EXPECT_EQ(f.get("empty3d").nbytes, 0u);
    EXPECT_EQ(f.get("b").dtype, "BF16");
    EXPECT_EQ(f.get("b").nbytes, 30u);
    EXPECT_EQ(f.find("nope"), nullptr);

    std::vector<float> fa(6);
    f.read_f32("a", fa.data(), 6);
    EXPECT_EQ(0, std::memcmp(fa.data(), a.data(), 24));
    std::vector<float> fb(15);
    f.read_f32("b", fb.data(), 15);
    for (int i = 0; i < 15; i++) EXPECT_EQ(fb[i], (float)i * 1.5f - 3.0f);
    std::vector<uint16_t> rb(15);
    f.read_raw("b", rb.data(), 30);
    EXPECT_EQ(rb, b);
    std::vector<int32_t> rc(4);
    f.read_raw("c", rc.data(), 16);
    EXPECT_EQ(rc, c);
    std::vector<int64_t> rd(2);
    f.read_raw("d", rd.data(), 16);
    EXPECT_EQ(rd, d);
    std::vector<uint8_t> re(3);
    f.read_raw("e", re.data(), 3);
    EXPECT_EQ(re, e);
    float s = 0;
    f.read_f32("scalar", &s, 1);
    EXPECT_EQ(s, -7.25f);
    f.read_f32("empty", nullptr, 0);
    f.read_f32("empty3d", nullptr, 0);
    f.read_raw("empty", nullptr, 0);
    float one = 0;
    f.read_f32("ones", &one, 1);
    EXPECT_EQ(one, 1.0f);
}

TEST_F(RoundTrip, LayoutIsAlignedAndContiguous) {
    std::vector<uint8_t> u8(3, 7);
    std::vector<uint16_t> h(5, 0x3c00);
    std::vector<float> f32(3, 2.0f);
    std::vector<int64_t> i64(1, 5);
    std::string path = file("align.safetensors");
    safetensors_write(path, {{"u8", "U8", {3}, u8.data()},
                             {"h", "F16", {5}, h.data()},
                             {"f", "F32", {3}, f32.data()},
                             {"i", "I64", {1}, i64.data()}});
    SafeTensorsFile f = safetensors_open(path);
    EXPECT_EQ(f.data_start % 8, 0u);
    uint64_t end = 0;
    for (const SafeTensor& t : f.tensors) {  // in offset order
        EXPECT_EQ(t.offset, end) << t.name;  // no gaps: the Python reader rejects them
        EXPECT_EQ(t.offset % safetensors_dtype_size(t.dtype), 0u) << t.name;
        end = t.offset + t.nbytes;
    }
    EXPECT_EQ(f.data_start + end, f.file_size);
    EXPECT_EQ(f.names(), (std::vector<std::string>{"i", "f", "h", "u8"}));
}

TEST_F(RoundTrip, Metadata) {
    std::map<std::string, std::string> meta = {
        {"format", "pt"},
        {"config", "{\"n_layer\": 12, \"n_embd\": 768}"},
        {"step", "12345"},
        {"note", "quotes \" backslash \\ newline \n tab \t unicode \xc3\xa9\xe2\x82\xac"},
        {"", "empty key"},
    };
    std::vector<float> x = {1.0f};
    std::string path = file("meta.safetensors");
    safetensors_write(path, {{"x", "F32", {1}, x.data()}}, meta);
    SafeTensorsFile f = safetensors_open(path);
    EXPECT_EQ(f.metadata, meta);
    EXPECT_EQ(f.names(), std::vector<std::string>{"x"});

    // metadata only, no tensors
    safetensors_write(path, {}, {{"k", "v"}});
    SafeTensorsFile g = safetensors_open(path);
    EXPECT_TRUE(g.tensors.empty());
    EXPECT_EQ(g.metadata.at("k"), "v");
}

TEST_F(RoundTrip, ReadF32ConvertsAcrossChunks) {
    // More elements than the reader's 1M-element staging buffer, so the chunk loop is exercised.
    size_t n = ((size_t)1 << 20) + 37;
    std::vector<uint16_t> b(n), h(n);
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint16_t)(i * 2654435761u >> 16);  // scattered bit patterns, NaNs included
        h[i] = (uint16_t)(i * 40503u);
    }
    std::string path = file("big.safetensors");
    safetensors_write(path, {{"b", "BF16", {(int64_t)n}, b.data()}, {"h", "F16", {(int64_t)n}, h.data()}});
    SafeTensorsFile f = safetensors_open(path);
    std::vector<float> out(n);
    f.read_f32("b", out.data(), n);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(bits(out[i]), bits(bf16_to_f32(b[i]))) << i;
    f.read_f32("h", out.data(), n);
    for (size_t i = 0; i < n; i++) ASSERT_EQ(bits(out[i]), bits(f16_to_f32(h[i]))) << i;
}

TEST_F(RoundTrip, MovedFileStillReads) {
    std::vector<float> x = {4.0f, 5.0f};
    std::string path = file("m.safetensors");
    safetensors_write(path, {{"x", "F32", {2}, x.data()}});
    SafeTensorsFile a = safetensors_open(path);
    SafeTensorsFile b = std::move(a);
    SafeTensorsFile c;
    c = std::move(b);
    std::vector<float> y(2);
    c.read_f32("x", y.data(), 2);
    EXPECT_EQ(y, x);
}

// ----------------------------------------------------------------------------
// interop with the Python library (fixture from test/reference/make_safetensors_fixtures.py)

static const std::string PY_FIXTURE = std::string(PRAC_SAFETENSORS_FIXTURES) + "/python_written.safetensors";

// The table EXPECTED of make_safetensors_fixtures.py, as raw little-endian values.
struct PyExpected {
    std::vector<uint32_t> f32_special = {0x00000000, 0x80000000, 0x00000001, 0x7F7FFFFF,
                                         0x7F800000, 0xFF800000, 0x7FC00000};
    std::vector<float> weight_f32, a_bf16_values;
    std::vector<uint16_t> a_bf16, z_f16;
    std::vector<float> z_f16_values = {65504.0f, std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), -INFINITY, NAN, -0.0f};
    std::vector<int32_t> i32 = {-2, -1, 0, 1, 2147483647};
    std::vector<int64_t> i64 = {-((int64_t)1 << 40), 1, 2, (int64_t)1 << 62};
    float scalar = 3.5f;
    PyExpected() {
        for (int i = 0; i < 6; i++) weight_f32.push_back(((float)i - 2.5f) * 0.25f);
        for (int i = 0; i < 20; i++) a_bf16_values.push_back((float)(i - 10) * 0.375f);
        for (float v : a_bf16_values) a_bf16.push_back(f32_to_bf16(v));
        for (float v : z_f16_values) z_f16.push_back(f32_to_f16(v));
    }
    std::vector<SafeTensorWrite> tensors() const {
        // deliberately not in the file's order: the writer must sort like Python does
        return {
            {"weight.f32", "F32", {2, 3}, weight_f32.data()},
            {"a.bf16", "BF16", {4, 5}, a_bf16.data()},
            {"z.f16", "F16", {3, 2}, z_f16.data()},
            {"scalar", "F32", {}, &scalar},
            {"empty", "F32", {0, 4}, nullptr},
            {"i32", "I32", {5}, i32.data()},
            {"i64", "I64", {2, 2}, i64.data()},
            {"f32_special", "F32", {7}, f32_special.data()},
        };
    }
};

TEST(Python, ReadsPythonWrittenFixture) {
    PyExpected want;
    SafeTensorsFile f = safetensors_open(PY_FIXTURE);
    EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
    EXPECT_EQ(f.tensors.size(), 8u);
    for (const SafeTensorWrite& w : want.tensors()) {
        const SafeTensor* t = f.find(w.name);
        ASSERT_NE(t, nullptr) << w.name;
        EXPECT_EQ(t->dtype, w.dtype) << w.name;
        EXPECT_EQ(t->shape, w.shape) << w.name;
        std::string raw(t->nbytes, '\0');
        f.read_raw(w.name, raw.data(), raw.size());
        if (!raw.empty()) {  // memcmp with the null data of a zero-size tensor is UB even for 0 bytes
            EXPECT_EQ(0, std::memcmp(raw.data(), w.data, raw.size())) << w.name;
        }
    }
    std::vector<float> x(20);
    f.read_f32("a.bf16", x.data(), 20);
    EXPECT_EQ(x, want.a_bf16_values);
    f.read_f32("weight.f32", x.data(), 6);
    EXPECT_EQ(std::vector<float>(x.begin(), x.begin() + 6), want.weight_f32);
    f.read_f32("z.f16", x.data(), 6);
    for (int i = 0; i < 6; i++) {
        if (std::isnan(want.z_f16_values[i])) {
            EXPECT_TRUE(std::isnan(x[i]));
        } else {
            EXPECT_EQ(bits(x[i]), bits(want.z_f16_values[i])) << i;
        }
    }
    f.read_f32("f32_special", x.data(), 7);
    EXPECT_EQ(0, std::memcmp(x.data(), want.f32_special.data(), 28));
    float s = 0;
    f.read_f32("scalar", &s, 1);
    EXPECT_EQ(s, 3.5f);
}

// Our writer produces the very bytes the Python library wrote for the same table, so whatever
// we write loads in Python. With PRAC_SAFETENSORS_KEEP=DIR the file is also left in DIR for
// `make_safetensors_fixtures.py --check DIR/cpp_written.safetensors`.
TEST_F(RoundTrip, PythonWriterBytesMatch) {
    PyExpected want;
    std::string path = file("cpp_written.safetensors");
    safetensors_write(path, want.tensors(), {{"format", "pt"}});
    std::string ours = read_bytes(path), theirs = read_bytes(PY_FIXTURE);
    ASSERT_FALSE(theirs.empty()) << PY_FIXTURE;
    EXPECT_EQ(ours.size(), theirs.size());
    EXPECT_TRUE(ours == theirs) << "header ours:   " << ours.substr(8, 200) << "\nheader theirs: " << theirs.substr(8, 200);
    if (const char* keep = getenv("PRAC_SAFETENSORS_KEEP")) {
        fs::create_directories(keep);
        safetensors_write(std::string(keep) + "/cpp_written.safetensors", want.tensors(), {{"format", "pt"}});
    }
}

// ----------------------------------------------------------------------------
// bad inputs: each fails at open (or at the read) with a message naming the problem

using BadInput = TmpDirTest;

TEST_F(BadInput, MissingFile) {
    std::string path = file("nope.safetensors");
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, "cannot open safetensors file " + path);
    EXPECT_HAS(msg, "No such file");
    EXPECT_HAS(msg, "---> HINT:");
}

TEST_F(BadInput, Directory) {
    std::string msg = user_error([&] { safetensors_open(dir); });
    EXPECT_HAS(msg, "not a regular file");
}

TEST_F(BadInput, ShorterThanEightBytes) {
    std::string path = file("short.safetensors");
    write_bytes(path, "abcde");
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, path + " is 5 bytes, too short");
    write_bytes(path, "");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "is 0 bytes, too short");
}

TEST_F(BadInput, HeaderLengthLargerThanFile) {
    std::string path = file("len.safetensors");
    write_raw_file(path, "{}", "", 1000);
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, path + ": header length 1000 does not fit the file (2 bytes after the length field)");
    write_raw_file(path, "{}", "", 0);
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "header length 0 does not fit");
}

TEST_F(BadInput, GitLfsPointer) {
    std::string path = file("lfs.safetensors");
    write_bytes(path, "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 548105171\n");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "git lfs pull");
}

TEST_F(BadInput, InvalidJson) {
    std::string path = file("json.safetensors");
    write_raw_file(path, "{\"a\": {\"dtype\": \"F32\",", "");
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, path + ": the header is not valid JSON");
    // a damaged byte inside a key: the parser's quote of what it read last is escaped, text (it printed the raw byte:
    // grep took the output for a binary file)
    write_raw_file(path, "{\"__metadata\xcd\": {}}", "");
    msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, "__metadata\\xcd");
    for (const unsigned char c : msg) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << msg;
    write_raw_file(path, "[1, 2]", "");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "JSON but not an object");
    // what nlohmann's parser accepts and the format (and the safetensors library) does not
    write_raw_file(path, "\xEF\xBB\xBF{}", "");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "begins with byte 0xef, not '{'");
    write_raw_file(path, std::string("{}\0\0", 4), "");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "a NUL byte at offset 2");
}

TEST_F(BadInput, HeaderPaddedWithSpacesIsFine) {
    std::string path = file("pad.safetensors");
    write_raw_file(path, "{\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}      ", std::string("\x05\0\0\0", 4));
    SafeTensorsFile f = safetensors_open(path);
    int32_t v = 0;
    f.read_raw("x", &v, 4);
    EXPECT_EQ(v, 5);
}

TEST_F(BadInput, MalformedEntries) {
    std::string path = file("entry.safetensors");
    auto open_with = [&](const std::string& entry) {
        write_raw_file(path, "{\"t\":" + entry + "}", std::string(16, '\0'));
        return user_error([&] { safetensors_open(path); });
    };
    EXPECT_HAS(open_with("[1]"), "entry for tensor 't' is not a JSON object");
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[1]}"), "lacks \"dtype\", \"shape\" or \"data_offsets\"");
    EXPECT_HAS(open_with("{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}"), "tensor 't' has unknown dtype 'Q4'");
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}"), "non-negative integers");
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}"), "non-negative integers");
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}"), "expected [begin, end]");
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}"), "begin after end");
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}"),
               "overflows 64 bits");
    write_raw_file(path, "{\"__metadata__\":{\"step\":5}}", "");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "metadata value for 'step' is not a string");
    // a field given twice in an entry is refused, as the safetensors library does ("duplicate field `dtype`"):
    // nlohmann kept the last one, here an I32 [2] that fits the 8 bytes as well as the F32 [2]
    EXPECT_HAS(open_with("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"dtype\":\"I32\"}"),
               "the entry 't' gives \"dtype\" twice");
    write_raw_file(path, "{\"__metadata__\":{\"a\":\"x\",\"a\":\"y\"}}", "");
    EXPECT_HAS(user_error([&] { safetensors_open(path); }), "the entry '__metadata__' gives \"a\" twice");
    // "__metadata__": null is no metadata (safetensors.numpy.load_file reads such a file)
    write_raw_file(path, "{\"__metadata__\":null,\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                   std::string("\x05\0\0\0", 4));
    int32_t v = 0;
    safetensors_open(path).read_raw("x", &v, 4);
    EXPECT_EQ(v, 5);
}

TEST_F(BadInput, OffsetsOutsideData) {
    std::string path = file("off.safetensors");
    write_raw_file(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[4,20]}}", std::string(16, '\0'));
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, path + ": tensor 'w' has data_offsets [4, 20] but the data area is only 16 bytes");
    EXPECT_HAS(msg, "truncated");
}

TEST_F(BadInput, NbytesNotMatchingShape) {
    std::string path = file("nbytes.safetensors");
    write_raw_file(path, "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,16]}}", std::string(16, '\0'));
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, "tensor 'w' has dtype BF16 and shape [2, 3] (12 bytes) but data_offsets [0, 16] span 16 bytes");
}

TEST_F(BadInput, OverlappingTensors) {
    std::string path = file("overlap.safetensors");
    write_raw_file(path,
                   "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                   "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                   std::string(16, '\0'));
    std::string msg = user_error([&] { safetensors_open(path); });
    EXPECT_HAS(msg, "tensors 'a' and 'b' overlap");
}

// A name given twice is refused (the safetensors library, 0.8, keeps the last entry silently, as nlohmann did: a file
// whose second copy was zeros loaded the zeros with exit 0); what the library refuses, refused: bytes between
// two tensors, bytes after the last ("invalid offset for tensor", "file not fully covered"). Tensors that tile the
// data area, in any header order and with a zero-size one, are the good case.
TEST_F(BadInput, TensorsMustTileTheDataAreaOnceEach) {
    std::string path = file("tile.safetensors");
    auto error_with = [&](const std::string& header, size_t data_bytes) {
        write_raw_file(path, header, std::string(data_bytes, '\0'));
        return user_error([&] { safetensors_open(path); });
    };
    const std::string a = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    const std::string b = "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}";
    const std::string b_after_gap = "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}";
    const std::string a_again = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}";
    const std::string empty = "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,16]}";
    write_raw_file(path, "{" + b + "," + empty + "," + a + "}", std::string(16, '\0'));
    EXPECT_NO_THROW(safetensors_open(path));
    EXPECT_HAS(error_with("{" + a + "," + a_again + "}", 16), "the header names 'a' twice");
    EXPECT_HAS(error_with("{" + a + "," + b_after_gap + "}", 20), "bytes 8..12 of the data area belong to no tensor "
                                                                  "(before 'b')");
    EXPECT_HAS(error_with("{" + a + "," + b + "}", 20), "the data area has 4 bytes after its last tensor (16 of 20 used)");
    // a name inside a tensor's entry (its own keys) is no tensor name: only the header's own keys count
    write_raw_file(path, "{\"__metadata__\":{\"a\":\"x\"}," + a + "," + b + "}", std::string(16, '\0'));
    EXPECT_NO_THROW(safetensors_open(path));
}

TEST_F(BadInput, UnsupportedDtypeAsF32) {
    std::vector<int32_t> v = {1, 2};
    std::string path = file("i32.safetensors");
    safetensors_write(path, {{"ids", "I32", {2}, v.data()}});
    SafeTensorsFile f = safetensors_open(path);
    float out[2];
    std::string msg = user_error([&] { f.read_f32("ids", out, 2); });
    EXPECT_HAS(msg, "tensor 'ids' in " + path + " has dtype I32; only F32, BF16 and F16 can be read as float");
}

TEST_F(BadInput, MissingTensorName) {
    std::vector<float> v = {1.0f};
    std::string path = file("names.safetensors");
    safetensors_write(path, {{"model.wte", "F32", {1}, v.data()}, {"model.wpe", "F32", {1}, v.data()}});
    SafeTensorsFile f = safetensors_open(path);
    float out;
    std::string msg = user_error([&] { f.read_f32("lm_head", &out, 1); });
    EXPECT_HAS(msg, "tensor 'lm_head' not found in " + path + "; it has 2 tensors, e.g. model.wpe, model.wte");
    msg = user_error([&] { f.shape("wte"); });
    EXPECT_HAS(msg, "---> HINT: the file has 'model.wte'");
    msg = user_error([&] { f.read_raw("wpe", &out, 4); });
    EXPECT_HAS(msg, "tensor 'wpe' not found");
}

TEST_F(BadInput, WrongNumel) {
    std::vector<float> v(6, 0.0f);
    std::string path = file("numel.safetensors");
    safetensors_write(path, {{"w", "F32", {2, 3}, v.data()}});
    SafeTensorsFile f = safetensors_open(path);
    std::vector<float> out(7);
    std::string msg = user_error([&] { f.read_f32("w", out.data(), 7); });
    EXPECT_HAS(msg, "tensor 'w' in " + path + " has shape [2, 3] (6 elements) but 7 elements were expected");
    EXPECT_HAS(msg, "---> HINT:");
    msg = user_error([&] { f.read_raw("w", out.data(), 28); });
    EXPECT_HAS(msg, "is 24 bytes (F32 [2, 3]) but the destination buffer is 28 bytes");
}

TEST_F(BadInput, FileTruncatedAfterOpen) {
    std::vector<float> v(64, 1.0f);
    std::string path = file("trunc.safetensors");
    safetensors_write(path, {{"w", "F32", {64}, v.data()}});
    SafeTensorsFile f = safetensors_open(path);
    ASSERT_EQ(0, truncate(path.c_str(), (off_t)(f.file_size - 10)));
    std::string msg = user_error([&] { f.read_f32("w", v.data(), 64); });
    EXPECT_HAS(msg, "unexpected end of file");
}

// ----------------------------------------------------------------------------
// writer: validation and atomic replacement

using Write = TmpDirTest;

TEST_F(Write, OverwriteReplacesContentAndLeavesNoTempFile) {
    std::vector<float> a = {1.0f, 2.0f}, b = {3.0f, 4.0f, 5.0f};
    std::string path = file("ckpt.safetensors");
    safetensors_write(path, {{"x", "F32", {2}, a.data()}}, {{"step", "1"}});
    safetensors_write(path, {{"x", "F32", {3}, b.data()}}, {{"step", "2"}});
    SafeTensorsFile f = safetensors_open(path);
    EXPECT_EQ(f.metadata.at("step"), "2");
    std::vector<float> out(3);
    f.read_f32("x", out.data(), 3);
    EXPECT_EQ(out, b);
    EXPECT_TRUE(temp_files().empty());
}

TEST_F(Write, MissingDirectory) {
    std::vector<float> a = {1.0f};
    std::string path = file("no/such/dir/ckpt.safetensors");
    std::string msg = user_error([&] { safetensors_write(path, {{"x", "F32", {1}, a.data()}}); });
    EXPECT_HAS(msg, "cannot create " + path + ".tmp.");
    EXPECT_HAS(msg, "No such file or directory");
    EXPECT_HAS(msg, "---> HINT: the directory '" + dir + "/no/such/dir' does not exist");
    EXPECT_TRUE(temp_files().empty());
}

TEST_F(Write, FailureKeepsOldFile) {
    std::vector<float> a = {1.0f};
    std::string path = file("ckpt.safetensors");
    safetensors_write(path, {{"x", "F32", {1}, a.data()}});
    std::string before = read_bytes(path);

    std::string msg = user_error([&] { safetensors_write(path, {{"x", "F32", {1}, a.data()}, {"x", "F32", {1}, a.data()}}); });
    EXPECT_HAS(msg, "cannot save " + path + ": tensor name 'x' appears twice");
    EXPECT_EQ(read_bytes(path), before);
    EXPECT_TRUE(temp_files().empty());

    EXPECT_HAS(user_error([&] { safetensors_write(path, {{"x", "F33", {1}, a.data()}}); }), "unknown dtype 'F33'");
    EXPECT_HAS(user_error([&] { safetensors_write(path, {{"x", "F32", {-1}, a.data()}}); }), "invalid shape [-1]");
    EXPECT_HAS(user_error([&] { safetensors_write(path, {{"x", "F32", {1}, nullptr}}); }), "has no data pointer");
    EXPECT_HAS(user_error([&] { safetensors_write(path, {{"__metadata__", "F32", {1}, a.data()}}); }),
               "invalid tensor name");
    EXPECT_HAS(user_error([&] { safetensors_write(path, {{"x", "F32", {1}, a.data()}}, {{"k", "\xff\xfe"}}); }),
               "not valid UTF-8");
    EXPECT_EQ(read_bytes(path), before);
    EXPECT_TRUE(temp_files().empty());
}

// A write that fails halfway (here: the file size limit, standing in for a full disk) leaves the
// old checkpoint untouched and removes the partial temp file.
TEST_F(Write, FailureMidWriteKeepsOldFile) {
    std::vector<float> a = {1.0f};
    std::string path = file("ckpt.safetensors");
    safetensors_write(path, {{"x", "F32", {1}, a.data()}});
    std::string before = read_bytes(path);

    std::vector<float> big(1 << 16, 2.0f);  // 256 KB, over the limit below
    struct rlimit old_limit;
    ASSERT_EQ(0, getrlimit(RLIMIT_FSIZE, &old_limit));
    struct rlimit small = old_limit;
    small.rlim_cur = 64 * 1024;
    ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &small));
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    std::string msg = user_error([&] { safetensors_write(path, {{"x", "F32", {1 << 16}, big.data()}}); });
    signal(SIGXFSZ, old_handler);
    ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &old_limit));

    EXPECT_HAS(msg, "cannot write " + path + ".tmp.");
    EXPECT_HAS(msg, "File too large");
    EXPECT_HAS(msg, "---> HINT: free some disk space");
    EXPECT_EQ(read_bytes(path), before);
    EXPECT_TRUE(temp_files().empty());
}
