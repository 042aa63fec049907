// Tests for train/checkpoint: the state file round trip (bitwise), its error messages, atomic commits, replacing
// a step directory, rotation, and that interrupted writes (including a writer killed with SIGKILL mid-way) never
// leave a checkpoint that looks complete and are cleaned up by the next writer.
#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>  // mkfifo
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "common/error.h"
#include "common/kill_point.h"
#include "common/safetensors.h"
#include "test/test_files.h"
#include "test/test_util.h"  // EXPECT_USER_ERROR

namespace fs = std::filesystem;

// ----------------------------------------------------------------------------
// helpers

// A fresh directory (TmpDirTest) holding the checkpoint directory.
struct CkptTest : TmpDirTest {
    std::string ckdir() const { return dir + "/ckpt"; }
    // Entries of the checkpoint directory whose name starts with prefix, sorted.
    std::vector<std::string> entries(const std::string& prefix = "") const {
        std::vector<std::string> out;
        std::error_code ec;
        for (fs::directory_iterator it(ckdir(), ec), end; !ec && it != end; it.increment(ec)) {
            std::string n = it->path().filename().string();
            if (n.compare(0, prefix.size(), prefix) == 0) out.push_back(n);
        }
        std::sort(out.begin(), out.end());
        return out;
    }
};

// The message of the UserError that f throws ("" if it throws none).
template <class F>
static std::string error_of(F f) {
    try {
        f();
    } catch (const UserError& e) {
        return e.what();
    }
    return "";
}

static float bits_to_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// A complete checkpoint as the trainer writes one: model, config, state (with a tag to tell them apart).
static std::string save_checkpoint(const std::string& dir, int64_t step, const std::string& tag,
                                   size_t floats = 16, bool replaces_earlier_run = false) {
    CheckpointWriter w(dir, step);
    std::vector<float> weights(floats, (float)step);
    safetensors_write(w.file(CKPT_MODEL_FILE), {{"w", "F32", {(int64_t)floats}, weights.data()}});
    write_bytes(w.file(CKPT_CONFIG_FILE), "{\"tag\": \"" + tag + "\"}\n");
    TrainState s;
    s.step = step;
    s.adam_t = step;
    s.set("tag", tag);
    s.add_f32("adamw.m", weights.data(), {(int64_t)floats});
    write_state(w.file(CKPT_STATE_FILE), s);
    return w.commit(replaces_earlier_run);
}

// Runs write() in a child that dies at `point` (common/kill_point.h); returns whether it died there (else it finished).
static bool killed_at(const char* point, const std::function<void()>& write) {
    pid_t child = fork();
    if (child == 0) {
        setenv("PRAC_TEST_KILL_AT", point, 1);
        try {
            write();
        } catch (...) {
            _exit(3);
        }
        _exit(0);
    }
    int st = 0;
    waitpid(child, &st, 0);
    EXPECT_TRUE(WIFSIGNALED(st) ? WTERMSIG(st) == SIGKILL : WEXITSTATUS(st) == 0) << point << ": status " << st;
    return WIFSIGNALED(st);
}

static std::string tag_of(const std::string& ckpt) {
    return read_state(ckpt + "/" + CKPT_STATE_FILE).get("tag");
}

// The HOST part of this process's temp dir names (.tmp_step_N_HOST_PID), from a temp dir made and removed.
static std::string my_host(const std::string& dir) {
    std::string tmp = checkpoint_begin(dir, 0);
    checkpoint_abort(tmp);
    std::string name = fs::path(tmp).filename().string();  // .tmp_step_00000000_HOST_PID
    size_t a = std::string(".tmp_step_00000000_").size(), b = name.rfind('_');
    return name.substr(a, b - a);
}

// A pid that was just used and is now gone (a child that exited and was reaped).
static pid_t dead_pid() {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    int st;
    waitpid(pid, &st, 0);
    return pid;
}

// A leftover directory with a file in it, as a writer would leave it.
static std::string make_dot_dir(const std::string& ckdir, const std::string& kind, int64_t step,
                                const std::string& host, long pid) {
    std::string p = ckdir + "/" + format(".%s_step_%08lld_%s_%ld", kind.c_str(), (long long)step, host.c_str(), pid);
    fs::create_directories(p);
    write_bytes(p + "/" + CKPT_STATE_FILE, "partial");
    return p;
}

// ----------------------------------------------------------------------------
// names and checksum

TEST(Checkpoint, Names) {
    EXPECT_EQ(checkpoint_dir_name(0), "step_00000000");
    EXPECT_EQ(checkpoint_dir_name(1234), "step_00001234");
    EXPECT_EQ(checkpoint_dir_name(123456789), "step_123456789");
    EXPECT_EQ(checkpoint_path("/a/b", 7), "/a/b/step_00000007");
}

TEST(Checkpoint, ChecksumSeesEveryBitFlip) {
    std::vector<unsigned char> buf(77);
    for (size_t i = 0; i < buf.size(); i++) buf[i] = (unsigned char)(i * 37 + 11);
    uint64_t base = state_checksum(buf.data(), buf.size());
    EXPECT_EQ(base, state_checksum(buf.data(), buf.size()));
    for (size_t i = 0; i < buf.size(); i++)
        for (int b = 0; b < 8; b++) {
            buf[i] ^= (unsigned char)(1 << b);
            EXPECT_NE(state_checksum(buf.data(), buf.size()), base) << "byte " << i << " bit " << b;
            buf[i] ^= (unsigned char)(1 << b);
        }
    EXPECT_NE(state_checksum(buf.data(), buf.size() - 1), base);  // length counts, zero bytes too
    std::vector<unsigned char> zeros(16, 0);
    EXPECT_NE(state_checksum(zeros.data(), 8), state_checksum(zeros.data(), 16));
    EXPECT_NE(state_checksum(nullptr, 0), state_checksum(zeros.data(), 1));
}

// ----------------------------------------------------------------------------
// TrainState round trip

TEST_F(CkptTest, StateRoundTripIsBitwise) {
    // f32 with NaN payloads (quiet, signaling, negative), signed zero, infinities and denormals
    std::vector<uint32_t> fbits = {0x7fc00000, 0x7fc00001, 0x7fa12345, 0xffc0beef, 0xff800001, 0x80000000,
                                   0x00000000, 0x7f800000, 0xff800000, 0x00000001, 0x807fffff, 0x3f800000,
                                   0x7f7fffff, 0x12345678};
    std::vector<float> f(fbits.size());
    for (size_t i = 0; i < f.size(); i++) f[i] = bits_to_f32(fbits[i]);
    std::vector<int64_t> i64 = {0, -1, 1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                                0x0123456789abcdefLL};
    std::vector<uint8_t> u8(256);
    for (int i = 0; i < 256; i++) u8[i] = (uint8_t)i;

    TrainState s;
    s.step = 1234;
    s.adam_t = 1233;
    s.add_f32("adamw.m", f.data(), {2, 7});
    s.add_i64("data.train.rank0", i64.data(), {3, 2});
    s.add_u8("rng.bytes", u8.data(), {256});
    s.add_f32("empty", nullptr, {0, 5});
    float scalar = -2.5f;
    s.add_f32("scalar", &scalar, {});
    float* big = s.alloc_f32("adamw.v", {1000});
    for (int i = 0; i < 1000; i++) big[i] = std::sin((float)i) * 1e-3f;
    int64_t* c = s.alloc_i64("prac.attn.q1_refreshes", {4});
    for (int i = 0; i < 4; i++) c[i] = 10 * i;
    s.set("model", "gpt2-124m");
    s.set("unicode", "na\xc3\xafve \xe2\x9c\x93 \"quoted\"\nnewline\ttab");
    s.set("empty", "");
    s.set_i64("seed", -42);
    s.set_u64("rng", std::numeric_limits<uint64_t>::max());
    s.set_f64("loss_scale", 0.1);
    s.set_f64("tiny", 4.9406564584124654e-324);
    s.set_f64("neg_inf", -INFINITY);
    s.set_f64("nan", NAN);

    std::string final_dir;
    {
        CheckpointWriter w(ckdir(), 1234);
        write_state(w.file(CKPT_STATE_FILE), s);
        final_dir = w.commit();
    }
    EXPECT_EQ(final_dir, ckdir() + "/step_00001234");
    EXPECT_EQ(checkpoint_latest(ckdir()), final_dir);
    EXPECT_EQ(checkpoint_resolve(ckdir()), final_dir);

    TrainState r = read_state(final_dir + "/" + CKPT_STATE_FILE);
    EXPECT_EQ(r.step, 1234);
    EXPECT_EQ(r.adam_t, 1233);
    EXPECT_EQ(r.meta, s.meta);  // exactly the caller's keys: the reserved ckpt.* ones are not exposed
    EXPECT_EQ(r.get_i64("seed"), -42);
    EXPECT_EQ(r.get_u64("rng"), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(r.get_f64("loss_scale"), 0.1);
    EXPECT_EQ(r.get_f64("tiny"), 4.9406564584124654e-324);
    EXPECT_EQ(r.get_f64("neg_inf"), -INFINITY);
    EXPECT_TRUE(std::isnan(r.get_f64("nan")));
    ASSERT_EQ(r.tensors.size(), s.tensors.size());

    std::vector<float> f2(f.size());
    r.get_f32("adamw.m", f2.data(), f2.size());
    EXPECT_EQ(std::memcmp(f2.data(), f.data(), f.size() * 4), 0);
    EXPECT_EQ(r.shape("adamw.m"), (std::vector<int64_t>{2, 7}));
    std::vector<int64_t> i2(i64.size());
    r.get_i64("data.train.rank0", i2.data(), i2.size());
    EXPECT_EQ(i2, i64);
    std::vector<uint8_t> u2(256);
    r.get_u8("rng.bytes", u2.data(), u2.size());
    EXPECT_EQ(u2, u8);
    r.get_f32("empty", nullptr, 0);
    EXPECT_EQ(r.shape("empty"), (std::vector<int64_t>{0, 5}));
    float sc = 0;
    r.get_f32("scalar", &sc, 1);
    EXPECT_EQ(sc, -2.5f);
    EXPECT_TRUE(r.shape("scalar").empty());
    std::vector<float> v2(1000);
    r.get_f32("adamw.v", v2.data(), v2.size());
    EXPECT_EQ(std::memcmp(v2.data(), big, 4000), 0);

    // A state read from a file writes back to the same bytes (its tensors are loaded from the file to do so).
    write_state(dir + "/again.safetensors", r);
    EXPECT_EQ(read_bytes(dir + "/again.safetensors"), read_bytes(final_dir + "/" + CKPT_STATE_FILE));
}

TEST_F(CkptTest, StateAccessErrorsNameTheProblem) {
    TrainState s;
    float x[3] = {1, 2, 3};
    s.add_f32("a", x, {3});
    EXPECT_NE(error_of([&] { s.add_f32("a", x, {3}); }).find("added twice"), std::string::npos);
    EXPECT_NE(error_of([&] { s.set("ckpt.step", "1"); }).find("reserved"), std::string::npos);
    write_state(dir + "/s.safetensors", s);
    TrainState r = read_state(dir + "/s.safetensors");
    float y[4];
    int64_t z[3];
    std::string e = error_of([&] { r.get_f32("b", y, 3); });
    EXPECT_NE(e.find("no tensor 'b'"), std::string::npos) << e;
    EXPECT_NE(e.find("---> HINT:"), std::string::npos) << e;
    e = error_of([&] { r.get_f32("a", y, 4); });
    EXPECT_NE(e.find("'a' has shape [3] (3 elements) but 4 elements were expected"), std::string::npos) << e;
    e = error_of([&] { r.get_i64("a", z, 3); });
    EXPECT_NE(e.find("'a' is F32 but I64 was expected"), std::string::npos) << e;
    e = error_of([&] { r.get("seed"); });
    EXPECT_NE(e.find("does not record 'seed'"), std::string::npos) << e;
    TrainState t;
    t.set("n", "12abc");
    e = error_of([&] { t.get_i64("n"); });
    EXPECT_NE(e.find("'n' = \"12abc\" is not an integer"), std::string::npos) << e;
    t.set("u", "-1");
    EXPECT_NE(error_of([&] { t.get_u64("u"); }).find("not an unsigned integer"), std::string::npos);
}

TEST_F(CkptTest, CheckCompatible) {
    TrainState s;
    s.set("model", "gpt2-124m");
    s.set_i64("num_ranks", 4);
    write_state(dir + "/s.safetensors", s);
    TrainState r = read_state(dir + "/s.safetensors");
    check_compatible(r, "model", "gpt2-124m");
    check_compatible(r, "num_ranks", (int64_t)4);
    std::string e = error_of([&] { check_compatible(r, "model", "gpt2-350m"); });
    EXPECT_NE(e.find(dir + "/s.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find("written with model = gpt2-124m, this run has model = gpt2-350m"), std::string::npos) << e;
    EXPECT_NE(e.find("---> HINT:"), std::string::npos) << e;
    e = error_of([&] { check_compatible(r, "num_ranks", (int64_t)8); });
    EXPECT_NE(e.find("num_ranks = 4, this run has num_ranks = 8"), std::string::npos) << e;
    e = error_of([&] { check_compatible(r, "zero_stage", (int64_t)1); });
    EXPECT_NE(e.find("does not record zero_stage (this run has zero_stage = 1)"), std::string::npos) << e;
    // a setting of many words is said as the flags that differ (a user had to diff two 100-character lines of
    // internal words), each float as short as it is (the keys hold nine digits)
    TrainState o;
    o.set("run.optimizer", "adamw wd 0.100000001 b1 0.899999976 b2 0.949999988 galore 0/200/0.25 muon 0.95");
    e = error_of([&] {
        check_compatible(o, "run.optimizer", "adamw wd 0.100000001 b1 0.899999976 b2 0.99000001 galore 0/100/0.25 "
                                             "muon 0.95");
    });
    EXPECT_NE(e.find("it was written with --beta2 0.95 --galore-gap 200, this run has --beta2 0.99 --galore-gap 100\n"
                     "---> HINT: resume with the settings of the run that wrote it (--beta2 0.95 --galore-gap 200)"),
              std::string::npos) << e;
    e = error_of([&] { check_compatible(o, "run.optimizer", o.get("run.optimizer") + " states 8bit"); });
    EXPECT_NE(e.find("it was written without --optimizer-states 8bit, which this run has\n"), std::string::npos)
        << e;
    e = error_of([&] { check_compatible(o, "run.optimizer", "muon wd 0.1 b1 0.9 b2 0.95 galore 0/200/0.25 muon 0.95"); });
    EXPECT_NE(e.find("it was written with --optimizer adamw, this run has --optimizer muon\n"), std::string::npos) << e;
    // another optimizer's flags at their defaults go without saying: finetune_roberta, which has no --rso-prox or
    // --rso-activations, told its user to pass them; one not at its default is said
    TrainState rso;
    rso.set("run.optimizer", "rso wd 0 b1 0.899999976 b2 0.999000013 eps 9.99999994e-09 clip 1 rso 4/5/0/projected");
    e = error_of([&] { check_compatible(rso, "run.optimizer", "adamw wd 0 b1 0.899999976 b2 0.999000013 eps "
                                                              "9.99999994e-09 clip 1"); });
    EXPECT_NE(e.find("it was written with --optimizer rso --rso-rank 4 --rso-gap 5, this run has --optimizer adamw\n"
                     "---> HINT: resume with the settings of the run that wrote it (--optimizer rso --rso-rank 4 "
                     "--rso-gap 5)"), std::string::npos) << e;
    rso.set("run.optimizer", "rso wd 0 b1 0.899999976 b2 0.999000013 eps 9.99999994e-09 clip 1 rso 4/5/0.5/full");
    e = error_of([&] { check_compatible(rso, "run.optimizer", "adamw wd 0 b1 0.899999976 b2 0.999000013 eps "
                                                              "9.99999994e-09 clip 1"); });
    EXPECT_NE(e.find("(--optimizer rso --rso-rank 4 --rso-gap 5 --rso-prox 0.5 --rso-activations full)"),
              std::string::npos) << e;
    o.set("run.prac", "prac lin r6,r16 nonlin 0.200000003,0.200000003 t1 500 t2 500 k 1 storage fp8");
    e = error_of([&] { check_compatible(o, "run.prac", "prac lin 0.3,0.3 nonlin 0.2,0.2 t1 500 t2 500 k 1"); });
    EXPECT_NE(e.find("it was written with --prac-linear-ranks 6,16 --prac-storage fp8, this run has --prac-linear "
                     "0.3,0.3 --prac-storage act\n"), std::string::npos) << e;
    // another --prac-classes: named (the key leaves the uncompressed class's ranks out, and the refusal named them
    // alone, with a hint that changed nothing)
    o.set("run.prac", "prac lin 0.300000012,0.300000012 nonlin 0.200000003,0.200000003 t1 500 t2 500 k 1");
    e = error_of([&] { check_compatible(o, "run.prac", "prac lin 0.300000012,0.300000012 t1 500 t2 500 k 1"); });
    EXPECT_NE(e.find("it was written with --prac-nonlinear 0.2,0.2 --prac-classes linear,nonlinear, this run has "
                     "--prac-classes linear\n"), std::string::npos) << e;
    // words no flag spells (an earlier spelling): the words that differ, each with the word before it
    o.set("run.prac", "prac lin 0.3 ranks 6,16 t1 500 classes linear");
    e = error_of([&] { check_compatible(o, "run.prac", "prac lin 0.3 ranks 16,16 t1 500 classes linear"); });
    EXPECT_NE(e.find("(the difference: saved `ranks 6,16` where this run has `ranks 16,16`)"), std::string::npos) << e;
    e = error_of([&] { check_compatible(o, "run.prac", "prac lin 0.3 ranks 6,16 t1 500 classes linear,nonlinear x"); });
    EXPECT_NE(e.find("(the difference: saved `linear` where this run has `linear,nonlinear x`)"), std::string::npos)
        << "other lengths: the stretch between the common ends\n" << e;
    e = error_of([&] { check_compatible(o, "run.prac", "rac lin 0.3 t1 500 classes nonlinear"); });
    EXPECT_EQ(e.find("the difference"), std::string::npos) << "nothing alike at either end: the values say it\n" << e;
}

TEST_F(CkptTest, CorruptStateFiles) {
    std::vector<float> m(4096);
    for (size_t i = 0; i < m.size(); i++) m[i] = (float)i;
    TrainState s;
    s.add_f32("adamw.m", m.data(), {(int64_t)m.size()});
    std::string path = dir + "/state.safetensors";
    write_state(path, s);
    std::string good = read_bytes(path);

    // a flipped byte in the data area: the header is fine, the checksum is not
    std::string bad = good;
    bad[bad.size() - 100] ^= 0x01;
    write_bytes(path, bad);
    TrainState r = read_state(path);
    std::vector<float> out(m.size());
    std::string e = error_of([&] { r.get_f32("adamw.m", out.data(), out.size()); });
    EXPECT_NE(e.find("corrupt checkpoint state " + path + ": tensor 'adamw.m' does not match its checksum"),
              std::string::npos) << e;
    EXPECT_NE(e.find("---> HINT:"), std::string::npos) << e;

    // truncated
    write_bytes(path, good.substr(0, good.size() / 2));
    e = error_of([&] { read_state(path); });
    EXPECT_NE(e.find("corrupt checkpoint state " + path), std::string::npos) << e;

    // garbage
    write_bytes(path, "not a safetensors file at all");
    e = error_of([&] { read_state(path); });
    EXPECT_NE(e.find("corrupt checkpoint state"), std::string::npos) << e;

    // missing
    e = error_of([&] { read_state(dir + "/nope.safetensors"); });
    EXPECT_NE(e.find("cannot read checkpoint state " + dir + "/nope.safetensors"), std::string::npos) << e;

    // a valid safetensors file that is not a state (e.g. model weights passed by mistake)
    safetensors_write(path, {{"w", "F32", {4}, m.data()}}, {{"format", "pt"}});
    e = error_of([&] { read_state(path); });
    EXPECT_NE(e.find("is not a training state file"), std::string::npos) << e;

    // a newer format, and a tensor without checksum
    safetensors_write(path, {{"w", "F32", {4}, m.data()}},
                      {{"ckpt.format", "prac-train-state"}, {"ckpt.format_version", "99"}, {"ckpt.step", "1"},
                       {"ckpt.adam_t", "1"}, {"ckpt.checksums", "{}"}});
    e = error_of([&] { read_state(path); });
    EXPECT_NE(e.find("format version 99"), std::string::npos) << e;
    safetensors_write(path, {{"w", "F32", {4}, m.data()}},
                      {{"ckpt.format", "prac-train-state"}, {"ckpt.format_version", "1"}, {"ckpt.step", "1"},
                       {"ckpt.adam_t", "1"}, {"ckpt.checksums", "{}"}});
    e = error_of([&] { read_state(path); });
    EXPECT_NE(e.find("no valid checksum for tensor 'w'"), std::string::npos) << e;

    // in a step_NNNNNNNN directory, a state of another step (a --resume took it and skipped a step of the schedule)
    TrainState three;
    three.step = 3;
    fs::create_directories(dir + "/step_00000002");
    write_state(dir + "/step_00000002/state.safetensors", three);
    e = error_of([&] { read_state(dir + "/step_00000002/state.safetensors"); });
    EXPECT_NE(e.find("it holds step 3, but its directory step_00000002 names step 2"), std::string::npos) << e;
    fs::create_directories(dir + "/step_00000003");
    write_state(dir + "/step_00000003/state.safetensors", three);
    EXPECT_EQ(read_state(dir + "/step_00000003/state.safetensors").step, 3);
}

// ----------------------------------------------------------------------------
// finding checkpoints

TEST_F(CkptTest, LatestOnMissingAndEmptyDirs) {
    EXPECT_EQ(checkpoint_latest(dir + "/missing"), "");
    EXPECT_TRUE(checkpoint_steps(dir + "/missing").empty());
    EXPECT_EQ(checkpoint_latest(dir), "");
    // only things that are not complete checkpoints
    fs::create_directories(ckdir() + "/step_00000009");          // no marker
    fs::create_directories(ckdir() + "/step_1");                 // not a canonical name
    fs::create_directories(ckdir() + "/step_000000010");         // neither
    write_bytes(ckdir() + "/step_00000011", "a file");           // not a directory
    make_dot_dir(ckdir(), "tmp", 12, "somehost", 1);
    EXPECT_EQ(checkpoint_latest(ckdir()), "");
    EXPECT_TRUE(checkpoint_steps(ckdir()).empty());
}

TEST_F(CkptTest, ResolveForResume) {
    std::string e = error_of([&] { checkpoint_resolve(dir + "/missing"); });
    EXPECT_NE(e.find("no checkpoint in " + dir + "/missing"), std::string::npos) << e;
    EXPECT_NE(e.find("---> HINT:"), std::string::npos) << e;
    fs::create_directories(ckdir());
    e = error_of([&] { checkpoint_resolve(ckdir()); });
    EXPECT_NE(e.find("no checkpoint in " + ckdir()), std::string::npos) << e;
    write_bytes(dir + "/file", "x");
    EXPECT_NE(error_of([&] { checkpoint_resolve(dir + "/file"); }).find("not a directory"), std::string::npos);

    std::string c3 = save_checkpoint(ckdir(), 3, "three");
    std::string c5 = save_checkpoint(ckdir(), 5, "five");
    EXPECT_EQ(checkpoint_resolve(ckdir()), c5);
    EXPECT_EQ(checkpoint_resolve(ckdir() + "/"), c5);
    EXPECT_EQ(checkpoint_resolve(c3), c3);  // one checkpoint named directly
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{3, 5}));

    fs::create_directories(ckdir() + "/step_00000007");  // committed name, no marker: not a checkpoint
    EXPECT_EQ(checkpoint_resolve(ckdir()), c5);
    e = error_of([&] { checkpoint_resolve(ckdir() + "/step_00000007"); });
    EXPECT_NE(e.find("not a complete checkpoint (it has no COMPLETE marker)"), std::string::npos) << e;
}

// --ckpt-dir naming one checkpoint: a resumed run writes beside it (its checkpoints used to nest inside it), but only
// when it is the newest there; a new run (no --resume) is refused; other paths are kept as given.
TEST_F(CkptTest, RunDirOfOneCheckpoint) {
    EXPECT_EQ(checkpoint_run_dir(ckdir(), false), ckdir());  // missing: a new run's directory
    std::string c3 = save_checkpoint(ckdir(), 3, "three");
    std::string c5 = save_checkpoint(ckdir(), 5, "five");
    const std::string above = fs::absolute(ckdir()).lexically_normal().string();
    EXPECT_EQ(checkpoint_run_dir(ckdir(), true), ckdir());
    for (const std::string& spelling : {c5, c5 + "/", c5 + "/.", c5 + "/../" + fs::path(c5).filename().string()})
        EXPECT_EQ(checkpoint_run_dir(spelling, true), above) << spelling;
    std::string e = error_of([&] { checkpoint_run_dir(c3, true); });
    EXPECT_NE(e.find("holds a newer checkpoint (after step 5)"), std::string::npos) << e;
    EXPECT_NE(e.find("copy it into a new directory (NEW/step_00000003) and resume there (--ckpt-dir NEW --resume)"),
              std::string::npos) << e;
    // a damaged newer one is no run to continue (--resume DIR itself falls back past it)
    const std::string model5 = c5 + "/" + CKPT_MODEL_FILE;
    std::string bytes = read_bytes(model5);
    bytes[bytes.size() - 1] ^= 1;
    write_bytes(model5, bytes);
    EXPECT_EQ(checkpoint_run_dir(c3, true), above);
    bytes[bytes.size() - 1] ^= 1;
    write_bytes(model5, bytes);
    fs::create_directories(ckdir() + "/step_00000009");  // a step name without a COMPLETE marker: no checkpoint
    EXPECT_EQ(checkpoint_run_dir(ckdir() + "/step_00000009", false), ckdir() + "/step_00000009");
    e = error_of([&] { checkpoint_run_dir(c5, false); });
    EXPECT_NE(e.find("is one checkpoint"), std::string::npos) << e;
    EXPECT_NE(e.find("--init-from " + c5), std::string::npos) << e;
    fs::rename(c3, dir + "/best");  // renamed: a checkpoint by its marker, of unknown order against ckdir()'s
    EXPECT_NE(error_of([&] { checkpoint_run_dir(dir + "/best", false); }).find("is one checkpoint"), std::string::npos);
    EXPECT_EQ(checkpoint_run_dir(dir + "/best", true), fs::absolute(dir).lexically_normal().string())
        << "nothing else in " << dir;
    fs::rename(dir + "/best", ckdir() + "/best");
    EXPECT_NE(error_of([&] { checkpoint_run_dir(ckdir() + "/best", true); }).find("holds a newer checkpoint"),
              std::string::npos);
}

TEST_F(CkptTest, DamagedStepDirIsNotComplete) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    std::string c2 = save_checkpoint(ckdir(), 2, "two");
    EXPECT_TRUE(checkpoint_is_complete(c2));
    // as if a copy of step 2 was interrupted: the state file is short
    std::string state = read_bytes(c2 + "/" + CKPT_STATE_FILE);
    write_bytes(c2 + "/" + CKPT_STATE_FILE, state.substr(0, state.size() - 1));
    std::string why;
    EXPECT_FALSE(checkpoint_is_complete(c2, &why));
    EXPECT_NE(why.find("state.safetensors is"), std::string::npos) << why;
    EXPECT_EQ(checkpoint_latest(ckdir()), c1);
    fs::remove(c2 + "/" + CKPT_CONFIG_FILE);
    EXPECT_FALSE(checkpoint_is_complete(c2, &why));
    EXPECT_NE(why.find("config.json is missing"), std::string::npos) << why;
    // a file of the marker that is there but is no file is not said to be missing (a person would look for it)
    fs::create_directory(c2 + "/" + CKPT_CONFIG_FILE);
    EXPECT_FALSE(checkpoint_is_complete(c2, &why));
    EXPECT_NE(why.find("config.json is a directory, not a file"), std::string::npos) << why;
    fs::remove(c2 + "/" + CKPT_CONFIG_FILE);
    EXPECT_NE(error_of([&] { checkpoint_resolve(c2); }).find("not a complete checkpoint"), std::string::npos);
    // rotation counts complete checkpoints only and leaves the damaged one for a person to look at
    checkpoint_rotate(ckdir(), 1, 2);
    EXPECT_TRUE(fs::exists(c1));
    EXPECT_TRUE(fs::exists(c2));
}

// A flipped byte keeps every size: the marker's checksums catch it. Resume then takes the newest intact checkpoint
// and says which newer one it skipped and why (it used to resume from the damaged one silently).
TEST_F(CkptTest, FlippedByteIsCaughtAndTheNewestIntactCheckpointUsed) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    std::string c2 = save_checkpoint(ckdir(), 2, "two");
    EXPECT_TRUE(checkpoint_verify(c2));
    for (const char* file : {CKPT_MODEL_FILE, CKPT_CONFIG_FILE}) {
        std::string path = c2 + "/" + file, bytes = read_bytes(path);
        std::string flipped = bytes;
        flipped[flipped.size() - 2] ^= 0x10;
        write_bytes(path, flipped);
        std::string why;
        EXPECT_TRUE(checkpoint_is_complete(c2));  // same sizes
        EXPECT_FALSE(checkpoint_verify(c2, &why));
        EXPECT_NE(why.find(std::string(file) + " does not match its checksum"), std::string::npos) << why;
        testing::internal::CaptureStdout();
        EXPECT_EQ(checkpoint_resolve(ckdir()), c1);
        std::string out = testing::internal::GetCapturedStdout();
        EXPECT_NE(out.find("warning"), std::string::npos) << out;
        EXPECT_NE(out.find("step_00000002: " + std::string(file) + " does not match its checksum"), std::string::npos)
            << out;
        EXPECT_NE(out.find("step_00000001"), std::string::npos) << out;
        std::string e = error_of([&] { checkpoint_resolve(c2); });  // named directly: refused
        EXPECT_NE(e.find("does not match its checksum"), std::string::npos) << e;
        write_bytes(path, bytes);
        EXPECT_TRUE(checkpoint_verify(c2));
        EXPECT_EQ(checkpoint_resolve(ckdir()), c2);
    }
}

// A marker whose "checksums" key is lost (one flipped bit of its name does it) vouches for nothing: the checkpoint
// is damaged, not taken unchecked (a corrupted model.safetensors resumed and loaded by --init-from with exit 0).
TEST_F(CkptTest, AMarkerWithoutChecksumsIsDamaged) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    std::string c2 = save_checkpoint(ckdir(), 2, "two");
    const std::string marker_path = c2 + "/" + CKPT_COMPLETE_FILE, marker = read_bytes(marker_path);
    std::string renamed = marker;
    const size_t at = renamed.find("\"checksums\"");
    ASSERT_NE(at, std::string::npos) << marker;
    renamed[at + 9] = 'z';  // "checksumz": same size
    write_bytes(marker_path, renamed);
    std::string why;
    EXPECT_TRUE(checkpoint_is_complete(c2));
    EXPECT_FALSE(checkpoint_verify(c2, &why));
    EXPECT_NE(why.find("marker has no checksums"), std::string::npos) << why;
    testing::internal::CaptureStdout();
    EXPECT_EQ(checkpoint_resolve(ckdir()), c1);
    std::string out = testing::internal::GetCapturedStdout();
    EXPECT_NE(out.find("step_00000002: its COMPLETE marker has no checksums"), std::string::npos) << out;
    write_bytes(marker_path, marker);
    EXPECT_TRUE(checkpoint_verify(c2));
}

// When no step directory can be used, the error lists each one with its problem (it used to say only "no checkpoint").
TEST_F(CkptTest, NoUsableCheckpointSaysWhy) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    std::string state = read_bytes(c1 + "/" + CKPT_STATE_FILE);
    write_bytes(c1 + "/" + CKPT_STATE_FILE, state.substr(0, state.size() - 1));
    fs::create_directories(ckdir() + "/step_00000002");
    std::string e = error_of([&] { checkpoint_resolve(ckdir()); });
    EXPECT_NE(e.find("no usable checkpoint in " + ckdir()), std::string::npos) << e;
    EXPECT_NE(e.find("step_00000001: state.safetensors is"), std::string::npos) << e;
    EXPECT_NE(e.find("step_00000002: it has no COMPLETE marker"), std::string::npos) << e;
    EXPECT_NE(e.find("---> HINT:"), std::string::npos) << e;
}

// ----------------------------------------------------------------------------
// commit, replace, rotate

TEST_F(CkptTest, CommitWritesMarkerLastAndLeavesNoTemp) {
    std::string c = save_checkpoint(ckdir(), 42, "x");
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000042"}));
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(c)) files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    EXPECT_EQ(files, (std::vector<std::string>{"COMPLETE", "config.json", "model.safetensors", "state.safetensors"}));
    std::string marker = read_bytes(c + "/COMPLETE");
    EXPECT_NE(marker.find("\"state.safetensors\""), std::string::npos) << marker;
    EXPECT_NE(marker.find("\"format_version\": 1"), std::string::npos) << marker;
}

// A COMPLETE marker is checked for its format version (a newer build's checkpoint is not complete here) and for its
// step against the directory's name: a copy of step 4 named step_00000009 was the newest checkpoint, and a resume
// from it continued at step 4 while its order said 9.
TEST_F(CkptTest, AMarkerOfAnotherStepOrANewerFormatIsNotComplete) {
    const std::string c = save_checkpoint(ckdir(), 4, "x"), copy = ckdir() + "/step_00000009";
    fs::copy(c, copy, fs::copy_options::recursive);
    std::string why;
    EXPECT_FALSE(checkpoint_is_complete(copy, &why));
    EXPECT_NE(why.find("its COMPLETE marker says step 4, not the step 9 of its name"), std::string::npos) << why;
    EXPECT_EQ(checkpoint_latest(ckdir()), c);
    std::string marker = read_bytes(c + "/COMPLETE");
    const size_t at = marker.find("\"format_version\": 1");
    ASSERT_NE(at, std::string::npos) << marker;
    marker.replace(at, 19, "\"format_version\": 2");
    write_bytes(c + "/COMPLETE", marker);
    EXPECT_FALSE(checkpoint_is_complete(c, &why));
    EXPECT_NE(why.find("format version 2; this build reads versions 1 to 1"), std::string::npos) << why;
    EXPECT_FALSE(checkpoint_is_complete(copy + "/.", &why));  // however the directory is spelled
}

TEST_F(CkptTest, ReplacingAStepDir) {
    save_checkpoint(ckdir(), 4, "first");
    std::string c = save_checkpoint(ckdir(), 5, "old");
    EXPECT_EQ(tag_of(c), "old");
    // the same step again (e.g. a run restarted from step 4 reaches step 5 again): the new one wins
    EXPECT_EQ(save_checkpoint(ckdir(), 5, "new", 1000), c);
    EXPECT_EQ(tag_of(c), "new");
    EXPECT_GT(fs::file_size(c + "/" + CKPT_MODEL_FILE), 4000u);  // the new model file, 1000 floats
    EXPECT_TRUE(checkpoint_is_complete(c));
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000004", "step_00000005"}));  // nothing aside
    // an existing step directory that is not a checkpoint at all is replaced as well
    fs::create_directories(ckdir() + "/step_00000006/junk");
    std::string c6 = save_checkpoint(ckdir(), 6, "six");
    EXPECT_FALSE(fs::exists(c6 + "/junk"));
    EXPECT_EQ(checkpoint_latest(ckdir()), c6);
    // one that holds files a checkpoint does not (someone's notes, another run's --save): moved beside, not deleted
    fs::create_directories(ckdir() + "/step_00000007/sub");
    write_bytes(ckdir() + "/step_00000007/sub/notes.txt", "mine\n");
    std::string c7 = save_checkpoint(ckdir(), 7, "seven");
    EXPECT_EQ(tag_of(c7), "seven");
    EXPECT_EQ(read_bytes(ckdir() + "/step_00000007.kept/sub/notes.txt"), "mine\n");
    EXPECT_EQ(checkpoint_latest(ckdir()), c7);
    // a file under a step's name: moved beside as well (it was deleted with no word)
    write_bytes(ckdir() + "/step_00000008", "my notes\n");
    std::string c8 = save_checkpoint(ckdir(), 8, "eight");
    EXPECT_EQ(tag_of(c8), "eight");
    EXPECT_EQ(read_bytes(ckdir() + "/step_00000008.kept"), "my notes\n");
    // a symbolic link (to another run's checkpoint, here c7) or a FIFO: moved beside, not removed with no word; the
    // link's target is untouched
    fs::create_directory_symlink(c7, ckdir() + "/step_00000009");
    EXPECT_EQ(tag_of(save_checkpoint(ckdir(), 9, "nine")), "nine");
    EXPECT_TRUE(fs::is_symlink(ckdir() + "/step_00000009.kept"));
    EXPECT_EQ(fs::read_symlink(ckdir() + "/step_00000009.kept"), fs::path(c7));
    EXPECT_EQ(tag_of(c7), "seven");
    ASSERT_EQ(mkfifo((ckdir() + "/step_00000010").c_str(), 0644), 0);
    EXPECT_EQ(tag_of(save_checkpoint(ckdir(), 10, "ten")), "ten");
    EXPECT_TRUE(fs::is_fifo(ckdir() + "/step_00000010.kept"));
}

TEST_F(CkptTest, InterruptedReplacementIsUndone) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    std::string c2 = save_checkpoint(ckdir(), 2, "two");
    std::string host = my_host(ckdir());
    // The replacing process died between its two renames: step 2 sits aside, its new version in a temp dir.
    pid_t dead = dead_pid();
    std::string aside = ckdir() + format("/.old_step_00000002_%s_%ld", host.c_str(), (long)dead);
    fs::rename(c2, aside);
    make_dot_dir(ckdir(), "tmp", 2, host, dead);
    EXPECT_EQ(checkpoint_latest(ckdir()), c1);  // read-only: sees step 1 only
    EXPECT_EQ(checkpoint_resolve(ckdir()), c2);  // resume cleans up first: step 2 is back
    EXPECT_EQ(tag_of(c2), "two");
    EXPECT_EQ(entries("."), std::vector<std::string>{});

    // When the step directory is there (the second rename happened), the aside copy is simply removed.
    fs::create_directories(aside);
    EXPECT_EQ(checkpoint_cleanup(ckdir()), 1);
    EXPECT_FALSE(fs::exists(aside));
    EXPECT_EQ(tag_of(c2), "two");
    // unless what it replaced was not a checkpoint (someone's notes, a file): that goes beside, as the replacing
    // process would have moved it had it lived (it was deleted)
    fs::create_directories(aside);
    write_bytes(aside + "/notes.txt", "mine\n");
    EXPECT_EQ(checkpoint_cleanup(ckdir()), 1);
    EXPECT_EQ(read_bytes(c2 + ".kept/notes.txt"), "mine\n");
    write_bytes(aside, "a file\n");
    EXPECT_EQ(checkpoint_cleanup(ckdir()), 1);
    EXPECT_EQ(read_bytes(c2 + ".kept2"), "a file\n");
    EXPECT_FALSE(fs::exists(aside));
    EXPECT_EQ(tag_of(c2), "two");
    // and a whole earlier checkpoint stays (beside) when the one that replaced it has a marker that cannot be read
    fs::copy(c1, aside, fs::copy_options::recursive);
    const std::string marker = read_bytes(c2 + "/" + CKPT_COMPLETE_FILE);
    write_bytes(c2 + "/" + CKPT_COMPLETE_FILE, "not json");
    EXPECT_EQ(checkpoint_cleanup(ckdir()), 1);
    EXPECT_EQ(tag_of(c2 + ".kept3"), "one");
    write_bytes(c2 + "/" + CKPT_COMPLETE_FILE, marker);
}

TEST_F(CkptTest, RotationKeepsTheLastK) {
    for (int s = 1; s <= 7; s++) save_checkpoint(ckdir(), s * 10, format("s%d", s));
    checkpoint_rotate(ckdir(), 0, 70);  // off
    EXPECT_EQ(checkpoint_steps(ckdir()).size(), 7u);
    checkpoint_rotate(ckdir(), 3, 70);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{50, 60, 70}));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "s7");
    checkpoint_rotate(ckdir(), 3, 70);  // nothing more to do
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{50, 60, 70}));
    checkpoint_rotate(ckdir(), 1, 70);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{70}));  // never the newest
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000070"}));
    // a newer incomplete step directory does not count and is not touched
    fs::create_directories(ckdir() + "/step_00000080");
    save_checkpoint(ckdir(), 75, "s75");
    checkpoint_rotate(ckdir(), 1, 75);
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000075", "step_00000080"}));
}

// --overwrite: a new run's checkpoints go where an earlier run's are, and --resume takes the newest complete one:
// the earlier run's, after the new run's first checkpoint, unless that one removes them (all of them: earlier and
// later steps, whatever --ckpt-keep). A newer incomplete step directory is still left for a person to look at.
// Without replaces_earlier_run (every other checkpoint) nothing newer is removed: a damaged newer one a resume
// skipped stays too.
TEST_F(CkptTest, RotationRemovesAReplacedRunsCheckpoints) {
    save_checkpoint(ckdir(), 1, "old 1");
    save_checkpoint(ckdir(), 16, "old 16");
    save_checkpoint(ckdir(), 32, "old 32");
    fs::create_directories(ckdir() + "/step_00000048");
    save_checkpoint(ckdir(), 3, "new 3");
    checkpoint_rotate(ckdir(), 5, 3);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{1, 3, 16, 32}));  // a resumed run's rotation
    checkpoint_rotate(ckdir(), 5, 3, /*replaces_earlier_run=*/true);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{3}));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "new 3");
    EXPECT_TRUE(fs::exists(ckdir() + "/step_00000048"));
    // the same step as the earlier run's: replaced by the commit, so nothing of the earlier run is left
    save_checkpoint(ckdir(), 16, "old 16");
    save_checkpoint(ckdir(), 16, "new 16");
    checkpoint_rotate(ckdir(), 5, 16, true);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{16}));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "new 16");

    // a run killed while it removed them (its new 3 committed, old 1 gone, old 16 and 32 left): --resume took old 32,
    // the earlier run's, and continued it (or refused its settings, never offering new 3). The rotation marks the
    // directory first; a resume of one of the earlier run's is refused, and one of new 3 (or of the directory)
    // finishes the removal and goes on from new 3
    save_checkpoint(ckdir(), 1, "old 1");
    save_checkpoint(ckdir(), 32, "old 32");
    save_checkpoint(ckdir(), 3, "new 3");
    EXPECT_TRUE(killed_at("checkpoint.rotate_moved", [&] { checkpoint_rotate(ckdir(), 5, 3, true); }));
    checkpoint_cleanup(ckdir());
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{3, 16, 32}));
    EXPECT_USER_ERROR(checkpoint_resolve(checkpoint_path(ckdir(), 32)), "this one may be the earlier run's",
                      "--overwrite");
    EXPECT_NO_THROW(checkpoint_run_dir(checkpoint_path(ckdir(), 3), true));  // (old 16 and 32 are newer: not refused)
    EXPECT_EQ(checkpoint_resolve(checkpoint_path(ckdir(), 3)), checkpoint_path(ckdir(), 3));
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{3}));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "new 3");
    EXPECT_FALSE(fs::exists(ckdir() + "/" + CKPT_REPLACING_FILE));
    // a mark whose checkpoint is gone (removed by hand): every checkpoint left is the earlier run's
    save_checkpoint(ckdir(), 40, "old 40");
    std::ofstream(ckdir() + "/" + CKPT_REPLACING_FILE) << "5\n";
    EXPECT_USER_ERROR(checkpoint_resolve(ckdir()), "stopped while it replaced the earlier run's checkpoints",
                      "step_00000005", "--overwrite");
    EXPECT_USER_ERROR(checkpoint_resolve(checkpoint_path(ckdir(), 40)), "may be the earlier run's");
}

// An --overwrite run killed around its first checkpoint's publication, in a directory whose earlier run has that step
// too. Killed after the rename, before the rotation, a --resume took the earlier run's newest (old 32) and went on
// with it, exit 0: nothing marked the directory yet. Now the commit marks it before the rename, naming the new
// checkpoint by its COMPLETE marker's checksum: after the rename the removal is finished and the new 16 resumed;
// before it, the 16 in place is the earlier run's: refused, with both ways on.
TEST_F(CkptTest, AnOverwriteKilledAroundItsFirstPublicationIsNotTakenForTheEarlierRun) {
    const std::string mark = ckdir() + "/" + CKPT_REPLACING_FILE;
    save_checkpoint(ckdir(), 1, "old 1");
    save_checkpoint(ckdir(), 16, "old 16");
    save_checkpoint(ckdir(), 32, "old 32");
    EXPECT_TRUE(killed_at("checkpoint.replacing_marked", [&] { save_checkpoint(ckdir(), 16, "new 16", 16, true); }));
    checkpoint_cleanup(ckdir());  // (the new one's temp dir)
    EXPECT_EQ(tag_of(checkpoint_path(ckdir(), 16)), "old 16");
    const std::string remove_mark = "to continue the earlier run instead, remove " + mark;
    EXPECT_USER_ERROR(checkpoint_resolve(ckdir()), "stopped before its first checkpoint (step_00000016) was in place",
                      "the earlier run's", "--overwrite", remove_mark.c_str());
    fs::remove(mark);  // the hint's second way
    EXPECT_EQ(tag_of(checkpoint_resolve(ckdir())), "old 32");

    EXPECT_TRUE(killed_at("checkpoint.published", [&] { save_checkpoint(ckdir(), 16, "new 16", 16, true); }));
    EXPECT_EQ(tag_of(checkpoint_resolve(ckdir())), "new 16");
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{16}));
    EXPECT_FALSE(fs::exists(mark));
}

// A resumed run's rotation keeps the newest --ckpt-keep of the checkpoints up to its own: a newer one that the resume
// skipped as damaged stays and does not count (its step is still to come). It counted, and with --ckpt-keep 1 the
// rotation after the resumed run's first checkpoint removed that one and every intact one, leaving only the damaged.
TEST_F(CkptTest, RotationCountsTheCheckpointsUpToThisRunsOwn) {
    for (int64_t s : {10, 15, 20}) save_checkpoint(ckdir(), s, format("s%lld", (long long)s));
    save_checkpoint(ckdir(), 18, "resumed 18");  // (step 20 damaged: the resume went on from 15)
    checkpoint_rotate(ckdir(), 1, 18);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{18, 20}));
    EXPECT_EQ(tag_of(checkpoint_path(ckdir(), 18)), "resumed 18");
    save_checkpoint(ckdir(), 19, "resumed 19");
    checkpoint_rotate(ckdir(), 2, 19);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{18, 19, 20}));
}

TEST_F(CkptTest, CleanupRemovesOnlyDeadWritersLeftovers) {
    save_checkpoint(ckdir(), 1, "one");
    std::string host = my_host(ckdir());
    // a live writer in another process: a child that waits until we kill it
    pid_t live = fork();
    if (live == 0) {
        pause();
        _exit(0);
    }
    ASSERT_GT(live, 0);
    pid_t dead = dead_pid();
    std::string mine = make_dot_dir(ckdir(), "tmp", 30, host, (long)getpid());     // this process: alive
    std::string other_live = make_dot_dir(ckdir(), "tmp", 4, host, (long)live);
    std::string other_host = make_dot_dir(ckdir(), "tmp", 5, "other-host", (long)dead);  // cannot tell: keep
    std::string dead_tmp = make_dot_dir(ckdir(), "tmp", 6, host, (long)dead);
    std::string dead_del = make_dot_dir(ckdir(), "del", 0, host, (long)dead);
    std::string not_ours = ckdir() + "/.tmp_step_something_else";
    fs::create_directories(not_ours);

    checkpoint_rotate(ckdir(), 1, 1);
    EXPECT_TRUE(fs::exists(mine));
    EXPECT_TRUE(fs::exists(other_live));
    EXPECT_TRUE(fs::exists(other_host));
    EXPECT_TRUE(fs::exists(not_ours));
    EXPECT_FALSE(fs::exists(dead_tmp));
    EXPECT_FALSE(fs::exists(dead_del));
    // and a new checkpoint (checkpoint_begin cleans too) still leaves the live ones alone
    save_checkpoint(ckdir(), 2, "two");
    EXPECT_TRUE(fs::exists(other_live));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "two");

    // once the writer is gone, its temp dir goes with the next writer
    kill(live, SIGKILL);
    int st;
    waitpid(live, &st, 0);
    save_checkpoint(ckdir(), 3, "three");
    EXPECT_FALSE(fs::exists(other_live));
    EXPECT_TRUE(fs::exists(mine));
}

// ----------------------------------------------------------------------------
// interrupted writes

TEST_F(CkptTest, UncommittedWriteIsInvisible) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    std::string tmp = checkpoint_begin(ckdir(), 2);
    write_bytes(tmp + "/" + CKPT_MODEL_FILE, "weights");
    write_bytes(tmp + "/COMPLETE", "{}");  // even a marker does not make a temp dir a checkpoint
    EXPECT_EQ(checkpoint_latest(ckdir()), c1);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{1}));
    EXPECT_EQ(checkpoint_resolve(ckdir()), c1);
    checkpoint_abort(tmp);
    EXPECT_FALSE(fs::exists(tmp));

    // A writer that throws half-way leaves nothing behind.
    EXPECT_THROW(
        {
            CheckpointWriter w(ckdir(), 2);
            write_bytes(w.file(CKPT_MODEL_FILE), "weights");
            fail("disk full");
        },
        UserError);
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000001"}));
}

TEST_F(CkptTest, WriterKilledMidWayLeavesPreviousCheckpoint) {
    std::string c1 = save_checkpoint(ckdir(), 1, "one");
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    pid_t child = fork();
    if (child == 0) {
        // Start checkpoint 2: the model file in full, the state file half-written, then hang.
        close(pipefd[0]);
        try {
            std::string tmp = checkpoint_begin(ckdir(), 2);
            std::vector<float> w(1 << 20, 1.0f);
            safetensors_write(tmp + "/" + CKPT_MODEL_FILE, {{"w", "F32", {(int64_t)w.size()}, w.data()}});
            std::ofstream f(tmp + "/" + CKPT_STATE_FILE, std::ios::binary);
            f.write((const char*)w.data(), (std::streamsize)(w.size() * 2));
            f.flush();
        } catch (...) {
            _exit(3);
        }
        char ok = 1;
        if (write(pipefd[1], &ok, 1) != 1) _exit(4);
        pause();
        _exit(0);
    }
    ASSERT_GT(child, 0);
    close(pipefd[1]);
    char ok = 0;
    ASSERT_EQ(read(pipefd[0], &ok, 1), 1);
    close(pipefd[0]);
    kill(child, SIGKILL);
    int st;
    waitpid(child, &st, 0);
    ASSERT_TRUE(WIFSIGNALED(st));

    std::vector<std::string> tmps = entries(".tmp_step_00000002_");
    ASSERT_EQ(tmps.size(), 1u);  // the dead writer's leftovers
    EXPECT_EQ(checkpoint_latest(ckdir()), c1);
    EXPECT_EQ(checkpoint_steps(ckdir()), (std::vector<int64_t>{1}));
    EXPECT_EQ(tag_of(checkpoint_resolve(ckdir())), "one");

    // the next writer removes them
    std::string c2 = save_checkpoint(ckdir(), 2, "two");
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000001", "step_00000002"}));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "two");
}

// Kill a writer of a large checkpoint at times spread over its life (before, during and after the commit, also
// inside its file writes): every time, the newest complete checkpoint is either the previous one or the whole new
// one, never a partial one. Every other attempt replaces an existing step 2. Where the kills land depends on the
// machine; the next test puts one at each moment between the commit's durable steps.
TEST_F(CkptTest, WriterKilledAtAnyPointNeverLeavesAPartialCheckpoint) {
    save_checkpoint(ckdir(), 1, "one");
    const size_t floats = 2 << 20;  // 8 MB per file
    const int attempts = 16;
    int saw_new = 0, saw_old = 0;
    for (int attempt = 0; attempt < attempts; attempt++) {
        bool replace = attempt % 2 == 1;
        if (replace) save_checkpoint(ckdir(), 2, "old two");
        int pipefd[2];
        ASSERT_EQ(pipe(pipefd), 0);
        pid_t child = fork();
        if (child == 0) {
            close(pipefd[0]);
            char go = 1;
            if (write(pipefd[1], &go, 1) != 1) _exit(4);
            try {
                save_checkpoint(ckdir(), 2, "two", floats);
            } catch (...) {
                _exit(3);
            }
            _exit(0);
        }
        ASSERT_GT(child, 0);
        close(pipefd[1]);
        char go;
        ASSERT_EQ(read(pipefd[0], &go, 1), 1);
        close(pipefd[0]);
        usleep((useconds_t)(attempt * attempt * 300));  // 0 .. 68 ms: spread over the child's whole write
        kill(child, SIGKILL);
        int st;
        waitpid(child, &st, 0);

        checkpoint_cleanup(ckdir());  // what the next writer or a resume does first
        EXPECT_EQ(entries("."), std::vector<std::string>{}) << "attempt " << attempt;
        std::string latest = checkpoint_latest(ckdir());
        ASSERT_FALSE(latest.empty());
        TrainState r = read_state(latest + "/" + CKPT_STATE_FILE);
        std::string tag = r.get("tag");
        if (tag == "two") {
            saw_new++;
            std::vector<float> m(floats);
            r.get_f32("adamw.m", m.data(), m.size());  // whole and matching its checksum
            EXPECT_EQ(m[floats - 1], 2.0f);
        } else {
            saw_old++;
            EXPECT_EQ(tag, replace ? "old two" : "one") << "attempt " << attempt;
        }
        EXPECT_TRUE(checkpoint_is_complete(latest));
        if (tag != "one") fs::remove_all(latest);  // back to "step 1 only" for the next attempt
    }
    std::printf("killed writers: %d left the previous checkpoint, %d had committed the new one\n", saw_old, saw_new);
}

// A writer killed at each moment between the durable steps of a commit (common/kill_point.h: the kill happens
// exactly there), writing step 2 anew or replacing it: the next cleanup leaves no dot-directory, and the newest
// complete checkpoint is the previous one up to the publishing rename and the new one from it on. Killed between
// a replacement's two renames (the old step 2 moved aside, the new one not yet in place), the old one comes back.
// A rotation killed after moving an old step out of its name loses that step only.
TEST_F(CkptTest, WriterKilledAtEachCommitPointLeavesTheOldOrTheNewCheckpoint) {
    save_checkpoint(ckdir(), 1, "one");
    for (const char* point : {"checkpoint.files_synced", "checkpoint.marker_written", "checkpoint.moved_aside",
                              "checkpoint.published"}) {
        for (bool replace : {false, true}) {
            SCOPED_TRACE(std::string(point) + (replace ? ", replacing step 2" : ", a new step 2"));
            if (replace) save_checkpoint(ckdir(), 2, "old two");
            bool died = killed_at(point, [&] { save_checkpoint(ckdir(), 2, "two"); });
            bool aside = std::string(point) == "checkpoint.moved_aside";
            EXPECT_EQ(died, replace || !aside) << "a new step has nothing to move aside";
            bool published = !died || std::string(point) == "checkpoint.published";
            // what the dead writer left: its temporary until it was published, the old step 2 once moved aside
            EXPECT_EQ(entries(".tmp_").size(), died && !published ? 1u : 0u);
            EXPECT_EQ(entries(".old_").size(), died && replace && (aside || published) ? 1u : 0u);
            EXPECT_EQ(entries(".").size(), entries(".tmp_").size() + entries(".old_").size());
            checkpoint_cleanup(ckdir());
            EXPECT_EQ(entries("."), std::vector<std::string>{});
            std::string latest = checkpoint_latest(ckdir());
            EXPECT_TRUE(checkpoint_is_complete(latest));
            EXPECT_EQ(tag_of(latest), published ? "two" : replace ? "old two" : "one");
            std::vector<int64_t> steps = {1, 2};
            if (!published && !replace) steps = {1};
            EXPECT_EQ(checkpoint_steps(ckdir()), steps);
            if (latest != checkpoint_path(ckdir(), 1)) fs::remove_all(latest);  // back to "step 1 only"
        }
    }
    save_checkpoint(ckdir(), 2, "two");
    EXPECT_TRUE(killed_at("checkpoint.rotate_moved", [&] {
        save_checkpoint(ckdir(), 3, "three");
        checkpoint_rotate(ckdir(), 1, 3);  // would remove steps 1 and 2; dies with step 1 out of its name
    }));
    EXPECT_EQ(entries(".").size(), 1u);
    EXPECT_EQ(entries(".del_step_00000001_").size(), 1u);
    checkpoint_cleanup(ckdir());
    EXPECT_EQ(entries(), (std::vector<std::string>{"step_00000002", "step_00000003"}));
    EXPECT_EQ(tag_of(checkpoint_latest(ckdir())), "three");
}

// A state whose step counts are not counts the trainer can continue from (negative, or beyond its int steps) is
// damage, reported as such when it is read (the trainer used to truncate 2^40 to int).
TEST_F(CkptTest, StepCountsOutOfRangeAreCorrupt) {
    for (int64_t bad : {(int64_t)-1, (int64_t)1 << 31, (int64_t)1 << 40}) {
        for (int which = 0; which < 2; which++) {
            TrainState s;
            (which ? s.adam_t : s.step) = bad;
            write_state(dir + "/s.safetensors", s);
            std::string e = error_of([&] { read_state(dir + "/s.safetensors"); });
            EXPECT_NE(e.find("corrupt checkpoint state"), std::string::npos) << bad << ": " << e;
            EXPECT_NE(e.find("is not a count in [0, 2^31)"), std::string::npos) << bad << ": " << e;
        }
    }
    TrainState ok;
    ok.step = ok.adam_t = INT32_MAX;
    write_state(dir + "/s.safetensors", ok);
    EXPECT_EQ(read_state(dir + "/s.safetensors").step, INT32_MAX);
}

// PRAC_TEST_KILL_AT is read strictly: a misspelt count or signal is an error, not a point that never fires (a test
// asking for ":SIGTERM" passed without the signal). Last in the file: a pass counted here would shift the count of
// the kill tests above if they ran after it in one process.
TEST(KillPoint, AMisspeltRequestIsAnErrorNotANoOp) {
    for (const char* bad : {"kp.test:SIGTERM", "kp.test:", "kp.test:15x", "kp.test:0", "kp.test@two", "kp.test@0",
                            "kp.test@2x", "kp.test@2:"}) {
        setenv("PRAC_TEST_KILL_AT", bad, 1);
        EXPECT_USER_ERROR(kill_point("kp.test"), "PRAC_TEST_KILL_AT=", bad);
        kill_point("kp.other");  // another point's name: not this request's business
    }
    setenv("PRAC_TEST_KILL_AT", "kp.test@2:error", 1);
    kill_point("kp.test");  // the first pass goes on
    EXPECT_USER_ERROR(kill_point("kp.test"), "test: an error at kp.test");
    unsetenv("PRAC_TEST_KILL_AT");
}
