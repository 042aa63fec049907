// Long-run machinery through the real binaries: a run killed at a random step and resumed from its last checkpoint
// ends bit for bit where an uninterrupted run ends; data parallelism over 2 MPI ranks (with and without ZeRO-1)
// equals one rank with the doubled micro-batch; a shared PRAC subspace survives a rank whose step is all padding.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/shard.h"
#include "common/safetensors.h"
#include "common/strings.h"  // format
#include "train/checkpoint.h"
#include "test/run_shell.h"
#include "test/small_vocab.h"
#include "test/worst.h"  // worst_of

namespace {

std::string tmpdir() {
    char d[] = "/tmp/prac_dist_XXXXXX";
    if (!mkdtemp(d)) return "";
    return d;
}


// step -> (loss, grad_norm), the last record of each step (a resumed run logs the replayed steps again)
std::map<int, std::pair<double, double>> steps_of(const std::string& jsonl) {
    std::map<int, std::pair<double, double>> m;
    std::ifstream f(jsonl);
    std::string line;
    while (std::getline(f, line)) {
        auto j = nlohmann::json::parse(line);
        if (j["type"] == "step") m[j["step"].get<int>()] = {j["loss"].get<double>(), j["grad_norm"].get<double>()};
    }
    return m;
}

// The trainers of this build (the repository root; the emulated CUDA build's own directory) and the device they
// run on: the CPU backend, or in the emulated FP32 build the CUDA backend on the CPU execution layer, where two
// ranks use NCCL (its stand-in over MPI) with one emulated GPU each.
#if !defined(PRAC_TRAINER_DIR)
#define PRAC_TRAINER_DIR PRAC_SOURCE_DIR
#endif
#if !defined(PRAC_TEST_DEVICE)
#define PRAC_TEST_DEVICE "cpu"
#define PRAC_TEST_COMM "mpi"  // the communicator the trainer picks for 2 ranks on that device
#endif
std::string bin(const char* name) { return std::string(PRAC_TRAINER_DIR) + "/" + name; }

const char* TRAIN_ARGS =
    " --model gpt2-tiny --device " PRAC_TEST_DEVICE " --steps 9 --batch-size 2 --seq-len 32 --eval-tokens 512 --lr 1e-3";

// A rank's number in a shell the launcher started (Open MPI's variable, else MPICH's), for per-rank settings.
const std::string RANK_VAR = "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}";

// mpiexec with 2 ranks. OpenMPI refuses root and more ranks than cores unless told (CI runs as root on 2 cores).
std::string mpirun_2() {
    return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
           "OMPI_MCA_rmaps_base_oversubscribe=1 " + std::string(PRAC_MPIEXEC) + " -x OMP_NUM_THREADS=1 ";
}

// The same with 3 ranks (the launcher's count is its first " 2 ").
std::string mpirun_3() {
    std::string two = mpirun_2();
    return two.replace(two.find(" 2 "), 3, " 3 ");
}

// The model flags of a gpt2-tiny run: on emulated GPUs its layout with 512 ids (test/small_vocab.h) and, with_data,
// that fixture's shards (a test with its own shards gives them: see write_padded_shards); elsewhere the named model.
std::string gpt2_tiny(bool with_data = true) {
#if defined(PRAC_TEST_EMULATED_GPUS)
    const SmallVocab v = small_vocab(PRAC_SOURCE_DIR);
    return v.gpt2 + (with_data ? v.data : "");
#else
    (void)with_data;
    return " --model gpt2-tiny";
#endif
}

// The largest absolute difference between the tensors of two weight files (the same names and shapes).
double max_weight_difference(const std::string& a, const std::string& b) {
    SafeTensorsFile wa = safetensors_open(a), wb = safetensors_open(b);
    double worst = 0;
    for (const std::string& name : wa.names()) {
        std::vector<float> x(wa.get(name).numel()), y(x.size());
        wa.read_f32(name, x.data(), x.size());
        wb.read_f32(name, y.data(), y.size());
        for (size_t i = 0; i < x.size(); i++) worst = worst_of(worst, (double)std::fabs(x[i] - y[i]));
    }
    return worst;
}

}  // namespace

// Killed right after a random step (like kill -9: no cleanup, no last checkpoint), resumed from the newest
// complete checkpoint: the losses of every step and the final weights, optimizer state and PRAC bases are
// bitwise those of the uninterrupted run.
// die_after > 0: kill after that step instead of a random one (1 leaves no checkpoint: a fresh start).
static void killed_and_resumed(const std::string& extra, int steps, int die_after = 0) {
    std::string d = tmpdir();
    std::string args = std::string(TRAIN_ARGS) + " --steps " + std::to_string(steps) + " --ckpt-every 2 " + extra;
    std::string env = "OMP_NUM_THREADS=2 ";
    ASSERT_EQ(run_shell(env + bin("train_gpt2") + args + " --ckpt-dir " + d + "/a --log " + d + "/a.jsonl"), 0);

    std::mt19937 rng(std::random_device{}());
    if (die_after <= 0) die_after = 1 + (int)(rng() % (steps - 1));
    std::printf("%s: killing the second run right after step %d\n", extra.c_str(), die_after);
    std::string b = " --ckpt-dir " + d + "/b --log " + d + "/b.jsonl";
    EXPECT_EQ(run_shell(env + "PRAC_TEST_DIE_AFTER_STEP=" + std::to_string(die_after) + " " + bin("train_gpt2") + args + b),
              137);
    std::string out;
    // nothing committed yet (killed before step 2) is a valid case: the run then starts over (--overwrite: its log
    // holds the killed run's step 1)
    bool has_ckpt = !checkpoint_latest(d + "/b").empty();
    int rc = run_shell(env + bin("train_gpt2") + args + b + (has_ckpt ? " --resume" : " --overwrite"), &out);
    ASSERT_EQ(rc, 0) << out;
    if (has_ckpt) EXPECT_NE(out.find("resumed from"), std::string::npos) << out;

    auto sa = steps_of(d + "/a.jsonl"), sb = steps_of(d + "/b.jsonl");
    EXPECT_EQ(sa.size(), (size_t)steps);
    EXPECT_EQ(sa, sb) << extra << ": losses or gradient norms differ after resuming";
    char last[32];
    std::snprintf(last, sizeof last, "step_%08d", steps);
    for (const char* f : {"model.safetensors", "state.safetensors"}) {
        std::string cmd = "cmp " + d + "/a/" + last + "/" + f + " " + d + "/b/" + last + "/" + f;
        EXPECT_EQ(run_shell(cmd), 0) << extra << ": " << f << " differs";
    }
    run_shell("rm -rf " + d);
}

// PRAC refreshes Q2 every step and Q1 every 2, so the draws' counters must be restored exactly too.
TEST(Resume, KilledAtARandomStepAndResumedIsBitExact) {
    killed_and_resumed("--prac prac --prac-t1 2 --prac-t2 1", 9);
}
// fp8 storage of the packed projections: each save's rounding bits are keyed by the layer's save counter, which the
// checkpoint carries (prac.<site>.fp8_saves), so a resumed run rounds exactly as the uninterrupted one. Killed after
// step 3 (not a random step: step 1 leaves no checkpoint), so the resume starts from step 2's checkpoint.
TEST(Resume, Fp8StorageResumesBitExact) {
    killed_and_resumed("--prac prac --prac-storage fp8 --prac-t1 2 --prac-t2 1 --grad-accum 2", 5, 3);
}
// The other optimizers' state (momenta, projections and their refresh step, RSO's subspaces, its variable B
// and the sites' copies of P) resumes exactly as well.
TEST(Resume, OtherOptimizersResumeBitExact) {
    killed_and_resumed("--optimizer muon", 6);
    killed_and_resumed("--optimizer galore --galore-rank 16 --galore-gap 3", 6);
    killed_and_resumed("--optimizer rso --rso-rank 16 --rso-gap 3 --rso-prox 0.1", 6);
}

// A resume that would not be a bit-exact continuation is refused, naming the setting.
TEST(Resume, RefusesADifferentConfiguration) {
    std::string d = tmpdir();
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + TRAIN_ARGS + " --steps 2 --ckpt-dir " + d), 0);
    std::string out;
    EXPECT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + TRAIN_ARGS + " --steps 2 --lr 3e-3 --resume --ckpt-dir " + d,
                  &out), 1);
    EXPECT_NE(out.find("it was written with --lr 0.001, this run has --lr 0.003"), std::string::npos) << out;
    // a setting that is one flag's value is said as the flag (it said "run.grad_accum = 1")
    EXPECT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + TRAIN_ARGS + " --steps 2 --grad-accum 2 --resume "
                        "--ckpt-dir " + d, &out), 1);
    EXPECT_NE(out.find("it was written with --grad-accum 1, this run has --grad-accum 2"), std::string::npos) << out;
    EXPECT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + TRAIN_ARGS + " --resume --ckpt-dir " + d + "/nothing", &out),
              1);
    EXPECT_NE(out.find("no checkpoint"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

#if defined(PRAC_HAVE_MPI)
// A checkpoint of one rank after 3 steps (samples 0-5 read) resumed by two ranks reads on from sample 6: their
// first step (4 samples, 2 per rank) reads what one rank's steps 4 and 5 would. The learning rate is 0, so no
// weight moves and the two-rank step's loss, the mean over samples 6-9, is the mean of the one-rank losses of steps
// 4 and 5 up to fp32 summation order (1e-6 relative). Before, this resume was refused (6 is no multiple of the 4
// samples a two-rank step takes), though documented as accepted.
TEST(Resume, AnotherNumberOfRanksReadsOnFromTheSamePosition) {
    std::string d = tmpdir(), out;
    const std::string args = std::string(TRAIN_ARGS) + " --lr 0 --prac none";
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + " --steps 5 --log " + d + "/one.jsonl",
                        &out), 0) << out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + " --steps 3 --ckpt-dir " + d + "/c", &out),
              0) << out;
    ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --steps 4 --resume --ckpt-dir " +
                            d + "/c --log " + d + "/two.jsonl", &out), 0) << out;
    EXPECT_NE(out.find("written by 1 rank(s), this run has 2: a step now takes 4 samples instead of 2"),
              std::string::npos) << out;
    EXPECT_EQ(out.find("PRAC bases"), std::string::npos) << "no PRAC bases without PRAC\n" << out;
    auto one = steps_of(d + "/one.jsonl"), two = steps_of(d + "/two.jsonl");
    ASSERT_EQ(one.size(), 5u);
    ASSERT_EQ(two.count(4), 1u) << out;
    const double want = (one[4].first + one[5].first) / 2;
    EXPECT_NEAR(two[4].first, want, 1e-6 * want) << "one rank: steps 4 and 5 lose " << one[4].first << " and "
                                                 << one[5].first;
    EXPECT_GT(std::fabs(one[4].first - one[5].first), 1e-4 * want) << "samples 6-7 and 8-9 should differ";
    run_shell("rm -rf " + d);
}

// --global-batch keeps a run's steps on another number of ranks: one rank with --global-batch 4 (B = 2, --grad-accum 2)
// checkpoints at step 3 of 5; two ranks resume it with --global-batch 4 (--grad-accum 1), so each of their steps reads
// the 4 samples the one rank's step read. Their steps 4 and 5 lose what the one rank's did up to fp32 summation order:
// step 4 from the same weights (1e-6 relative, as above), step 5 after one AdamW update from gradients that differ by
// rounding alone (1e-5). The broken variant, the same --grad-accum 2 on two ranks (8 samples a step, which the old
// notice accepted), loses otherwise; --grad-accum 3 (12 samples) is refused in sequences with the flag that fits,
// and so is --global-batch 8 on the run's own single rank.
TEST(Resume, AnotherNumberOfRanksKeepsTheGlobalBatch) {
    std::string d = tmpdir(), out;
    const std::string args = std::string(TRAIN_ARGS) + " --prac none --steps 5";
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + " --global-batch 4 --ckpt-dir " + d +
                            "/all --ckpt-every 3 --log " + d + "/one.jsonl", &out), 0) << out;
    EXPECT_NE(out.find("| grad_accum                    | 2 (--global-batch 4)"), std::string::npos) << out;
    auto resume_step_3 = [&](const std::string& name) {  // a directory holding step 3's checkpoint alone
        run_shell("mkdir -p " + d + "/" + name + " && cp -r " + d + "/all/step_00000003 " + d + "/" + name);
        return " --resume --ckpt-dir " + d + "/" + name + " --log " + d + "/" + name + ".jsonl";
    };
    ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --global-batch 4" +
                            resume_step_3("kept"), &out), 0) << out;
    EXPECT_NE(out.find("written by 1 rank(s), this run has 2: each step reads the run's next 4 samples as before (up "
                       "to the epoch's end), split as 2 rank(s) x --grad-accum 1 instead of 1 x 2"), std::string::npos)
        << out;
    auto one = steps_of(d + "/one.jsonl"), kept = steps_of(d + "/kept.jsonl");
    ASSERT_EQ(one.size(), 5u);
    ASSERT_EQ(kept.size(), 2u) << out;
    EXPECT_NEAR(kept[4].first, one[4].first, 1e-6 * one[4].first);
    EXPECT_NEAR(kept[4].second, one[4].second, 1e-5 * one[4].second) << "the gradient norm";
    EXPECT_NEAR(kept[5].first, one[5].first, 1e-5 * one[5].first);

    ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --grad-accum 2" +
                            resume_step_3("doubled"), &out), 0) << out;
    EXPECT_NE(out.find("a step now takes 8 samples instead of 4 (the data goes on from where it stopped; "
                       "--global-batch 4 keeps the run's)"), std::string::npos) << out;
    auto doubled = steps_of(d + "/doubled.jsonl");
    ASSERT_EQ(doubled.count(4), 1u) << out;
    EXPECT_GT(std::fabs(doubled[4].first - one[4].first), 1e-4 * one[4].first) << "8 samples should lose otherwise";

    EXPECT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --grad-accum 3" +
                            resume_step_3("tripled"), &out), 1) << out;
    EXPECT_NE(out.find("its steps took 4 sequences each (1 rank(s) x --grad-accum 2 x --batch-size 2), this run's "
                       "would take 12 (2 rank(s) x --grad-accum 3 x --batch-size 2)\n---> HINT: resume with "
                       "--global-batch 4 (--grad-accum 1 here)"), std::string::npos) << out;
    // another --global-batch on the run's own rank count is refused in its terms too
    EXPECT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + " --global-batch 8" +
                            resume_step_3("eight"), &out), 1) << out;
    EXPECT_NE(out.find("its steps took 4 sequences each (1 rank(s) x --grad-accum 2 x --batch-size 2), this run's "
                       "would take 8 (1 rank(s) x --grad-accum 4 x --batch-size 2)"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

// The PRAC bases of a one-rank checkpoint resumed by two ranks with a subspace each: rank 0 continues the
// checkpoint's bases, rank 1 draws its own at its next step (no refresh is due at step 3 with T1 = T2 = 50, so a
// rank 1 basis equal to rank 0's is a copy). Before, every rank loaded rank 0's bases, and the ranks' estimators shared
// one subspace, their noise no longer independent, until the next refresh (500 steps by default), with nothing said.
TEST(Resume, AnotherNumberOfRanksDrawsTheNewRanksOwnPracBases) {
    std::string d = tmpdir(), out;
    const std::string args = std::string(TRAIN_ARGS) + " --prac prac --prac-t1 50 --prac-t2 50 --prac-initial-spread 0 "
                                                       "--prac-storage act --ckpt-dir " + d + "/c";
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + " --steps 2", &out), 0) << out;
    ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --steps 3 --resume", &out), 0)
        << out;
    EXPECT_NE(out.find("holds the PRAC bases of 1 rank(s); this run has 2: rank 1 draws new bases at the next step"),
              std::string::npos) << out;
    SafeTensorsFile one = safetensors_open(d + "/c/step_00000002/state.safetensors"),
                    two = safetensors_open(d + "/c/step_00000003/state.safetensors");
    auto read = [](const SafeTensorsFile& f, const std::string& name) {
        std::vector<float> v(f.get(name).numel());
        f.read_f32(name, v.data(), v.size());
        return v;
    };
    int sites = 0;
    for (const std::string& name : one.names()) {
        if (name.size() < 2 || name.compare(name.size() - 2, 2, ".P") != 0) continue;  // prac.<site>.P
        sites++;
        const std::string site = name.substr(0, name.size() - 2);
        EXPECT_EQ(read(two, "rank0." + name), read(one, name)) << site << ": rank 0 continues the checkpoint's bases";
        EXPECT_NE(read(two, "rank1." + name), read(one, name)) << site << ": rank 1's bases are a copy of rank 0's";
        std::vector<int64_t> q0(one.get(site + ".q2_refreshes").numel()), q1(q0.size());
        one.read_raw(site + ".q2_refreshes", q0.data(), q0.size() * 8);
        two.read_raw("rank1." + site + ".q2_refreshes", q1.data(), q1.size() * 8);
        for (size_t l = 0; l < q0.size(); l++)
            EXPECT_EQ(q1[l], q0[l] + 1) << site << " layer " << l << ": rank 1 continues rank 0's refresh counters";
    }
    EXPECT_EQ(sites, 6) << "every site of gpt2-tiny is compressed by --prac prac";
    // RSO's sites hold the optimizer's bases, which it restores on every rank: the new rank keeps them (it lost them
    // with the counters-only load and stopped: "no basis from the RSO optimizer")
    const std::string rso = std::string(TRAIN_ARGS) + " --optimizer rso --rso-rank 8 --ckpt-dir " + d + "/rso";
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + rso + " --steps 2", &out), 0) << out;
    EXPECT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + rso + " --steps 3 --resume", &out), 0)
        << out;
    run_shell("rm -rf " + d);
}

// --prac-shared-subspace changes something only with PRAC on 2+ ranks (the run says "changes nothing" otherwise), so
// only there does a resume compare it: a two-rank run without PRAC resumes without the flag (it was refused, naming
// run.prac_shared), a one-rank PRAC run resumes by two ranks with it, and two PRAC ranks with a subspace each are
// refused a shared one, naming the flag.
TEST(Resume, TheSharedSubspaceFlagIsComparedWhereItChangesSomething) {
    std::string d = tmpdir(), out;
    const std::string two = "timeout 300 env " + mpirun_2() + bin("train_gpt2") + TRAIN_ARGS;
    ASSERT_EQ(run_shell(two + " --prac none --steps 1 --prac-shared-subspace --ckpt-dir " + d + "/none", &out), 0)
        << out;
    EXPECT_EQ(run_shell(two + " --prac none --steps 2 --resume --ckpt-dir " + d + "/none", &out), 0) << out;
    const std::string prac = " --prac prac --prac-t1 50 --prac-t2 50 --ckpt-dir " + d + "/prac";
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + TRAIN_ARGS + prac + " --steps 1", &out), 0) << out;
    EXPECT_EQ(run_shell(two + prac + " --steps 2 --resume --prac-shared-subspace", &out), 0) << out;
    EXPECT_EQ(run_shell(two + prac + " --steps 3 --resume", &out), 1) << out;
    EXPECT_NE(out.find("its 2 ranks shared one PRAC subspace, this run's would have one each\n---> HINT: resume with "
                       "--prac-shared-subspace"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

// Another --zero on the same ranks resumes (it may save the memory a run needs) but is not bit-exact (the gradient
// norm's sum runs per shard): said, where it passed with no word.
TEST(Resume, AnotherZeroStageIsSaid) {
    std::string d = tmpdir(), out;
    const std::string two = "timeout 300 env " + mpirun_2() + bin("train_gpt2") + TRAIN_ARGS + " --ckpt-dir " + d;
    ASSERT_EQ(run_shell(two + " --steps 1 --zero 0", &out), 0) << out;
    ASSERT_EQ(run_shell(two + " --steps 2 --zero 1 --resume", &out), 0) << out;
    EXPECT_NE(out.find("notice: the checkpoint was written with --zero 0, this run has --zero 1: the gradient norm is "
                       "summed in another order"), std::string::npos) << out;
    ASSERT_EQ(run_shell(two + " --steps 3 --zero 1 --resume", &out), 0) << out;
    EXPECT_EQ(out.find("was written with --zero"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

// The CPU backend's sums depend on the thread count, and a resume with another count is said. Only rank 0's count was
// recorded and compared: rank 1 written with 2 threads and resumed with 1 continued, not bit-exact, unsaid. Now the
// checkpoint holds each rank's count ("1,2") and a resume with other counts on any rank is said.
TEST(Resume, AnotherThreadCountOnAnyRankIsSaid) {
    std::string d = tmpdir(), out;
    auto launch = [&](const std::string& rank1_threads, const std::string& flags) {
        return run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR +
                             " = 1 ]; then export OMP_NUM_THREADS=" + rank1_threads + "; fi; exec " +
                             bin("train_gpt2") + TRAIN_ARGS + " --ckpt-dir " + d + flags + "'",
                         &out);
    };
    ASSERT_EQ(launch("2", " --steps 1"), 0) << out;
    ASSERT_EQ(launch("1", " --steps 2 --resume"), 0) << out;
    EXPECT_NE(out.find("notice: the checkpoint was written with CPU threads 1 on rank 0, 2 on rank 1, this run has 1 "
                       "on every rank: the CPU backend's sums depend on the thread count, so the continuation is not "
                       "bit-exact (OMP_NUM_THREADS=1 on rank 0, 2 on rank 1 makes it so)"), std::string::npos) << out;
    ASSERT_EQ(launch("1", " --steps 3 --resume"), 0) << out;  // written with 1 and 1 now
    EXPECT_EQ(out.find("CPU threads"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

// Ranks that run more OpenMP threads than their node has cores take turns on them (mpirun --bind-to none without
// OMP_NUM_THREADS gives every rank all the cores: 1.5-2x the time per step): said at the start, with the count that
// fits (rank 0 with as many threads as the machine has cores, rank 1 with one: one more than the cores); nothing is
// said where the threads fit (one each, on a machine of 2 cores or more).
TEST(DataParallel, RanksWithMoreThreadsThanCoresAreSaid) {
    std::string out;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    auto launch = [&](long rank0_threads) {
        return run_shell("timeout 300 env " + mpirun_2() + "bash -c 'export OMP_NUM_THREADS=1; if [ " + RANK_VAR +
                             " = 0 ]; then export OMP_NUM_THREADS=" + std::to_string(rank0_threads) + "; fi; exec " +
                             bin("train_gpt2") + TRAIN_ARGS + " --steps 1'",
                         &out);
    };
    ASSERT_EQ(launch(cores), 0) << out;
    EXPECT_NE(out.find(format(" runs 2 ranks with %ld OpenMP threads in all on %ld cores: they take turns on the "
                              "cores, each step slower\n---> HINT: OMP_NUM_THREADS=%ld per rank (mpirun --bind-to "
                              "none -x OMP_NUM_THREADS=%ld)", cores + 1, cores, std::max(1L, cores / 2),
                              std::max(1L, cores / 2))),
              std::string::npos) << out;
    if (cores < 2) GTEST_SKIP() << "one core: two ranks of one thread each are more than it has";
    ASSERT_EQ(launch(1), 0) << out;
    EXPECT_EQ(out.find("take turns"), std::string::npos) << out;
}

// A ZeRO-1 checkpoint resumes on another number of ranks (it was refused: a job that lost a node could not go on):
// the checkpoint holds the optimizer state whole, split over the new ranks or kept whole. Checked against the same
// run without ZeRO, whose resume on other ranks was always accepted: two ranks, --grad-clip 0 (the gradient norm,
// summed per shard under ZeRO-1, then changes nothing), checkpoints at step 2; each resumed for one step on 1 rank and
// on 3 (ZeRO-1 there), the weights after it agree within float rounding (1e-6; a state slice taken at the wrong
// offset moves them by about the learning rate, 1e-3).
TEST(Resume, AZeroOneCheckpointResumesOnOtherRankCounts) {
    std::string d = tmpdir(), out;
    const std::string args = std::string(TRAIN_ARGS) + " --grad-clip 0";
    for (const char* zero : {"0", "1"}) {
        const std::string dir = d + "/z" + zero;
        ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --steps 2 --zero " + zero +
                                " --ckpt-dir " + dir, &out), 0) << out;
        ASSERT_EQ(run_shell("cp -r " + dir + " " + dir + "_1 && cp -r " + dir + " " + dir + "_3"), 0);
        ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + " --steps 3 --resume --ckpt-dir " +
                                dir + "_1", &out), 0) << out;
        if (std::string(zero) == "1")
            EXPECT_NE(out.find("the optimizer state, split over 2 ranks (ZeRO-1) there, is whole here"),
                      std::string::npos) << out;
        ASSERT_EQ(run_shell("timeout 300 env " + mpirun_3() + bin("train_gpt2") + args + " --steps 3 --resume --zero " +
                                zero + " --ckpt-dir " + dir + "_3", &out), 0) << out;
        if (std::string(zero) == "1")
            EXPECT_NE(out.find("the optimizer state, split over 2 ranks (ZeRO-1) there, is split over 3 here"),
                      std::string::npos) << out;
    }
    for (const char* ranks : {"_1", "_3"}) {
        const std::string w = "/step_00000003/model.safetensors";
        EXPECT_LT(max_weight_difference(d + "/z0" + ranks + w, d + "/z1" + ranks + w), 1e-6) << ranks;
        EXPECT_GT(max_weight_difference(d + "/z0" + ranks + w, d + "/z0/step_00000002/model.safetensors"), 1e-4)
            << ranks << ": the resumed step moved the weights";
    }
    run_shell("rm -rf " + d);
}

// --plan --zero 1 under mpirun plans one of the job's ranks, as --plan-ranks with that number does in one process (it
// planned one rank alone, ZeRO-1's state unsharded: more than the run's per-rank peak).
TEST(DataParallel, APlanUnderMpirunPlansOneOfItsRanks) {
    std::string two, one;
    const std::string plan = bin("train_gpt2") + TRAIN_ARGS + " --prac prac --plan --zero 1";
    ASSERT_EQ(run_shell("timeout 120 env " + mpirun_2() + plan, &two), 0) << two;
    ASSERT_EQ(run_shell("timeout 120 " + plan + " --plan-ranks 2", &one), 0) << one;
    auto line_of = [](const std::string& out, const std::string& part) {  // the whole line holding part
        const size_t at = out.find(part);
        if (at == std::string::npos) return std::string("(no line with ") + part + ")";
        const size_t from = out.rfind('\n', at) == std::string::npos ? 0 : out.rfind('\n', at) + 1;
        return out.substr(from, out.find('\n', at) - from);
    };
    ASSERT_NE(one.find("one of 2 ranks (ZeRO-1)"), std::string::npos) << one;
    for (const char* part : {"memory plan: ", "| total "})
        EXPECT_EQ(line_of(two, part), line_of(one, part)) << "mpirun:\n" << two << "\none process:\n" << one;
    // --plan-ranks under mpirun plans what it says, and says that the job has other ranks (no word before)
    ASSERT_EQ(run_shell("timeout 120 env " + mpirun_2() + plan + " --plan-ranks 4", &two), 0) << two;
    EXPECT_NE(two.find("one of 4 ranks (ZeRO-1)"), std::string::npos) << two;
    EXPECT_NE(two.find("notice: this job has 2 ranks; the plan is one of --plan-ranks 4's"), std::string::npos) << two;
}

// A stop signal on one rank stops every rank after the same step, each saying and exiting with that signal (rank 0
// said SIGTERM for rank 1's SIGINT). SIGUSR1 to mpiexec, which Open MPI forwards to every rank (a SIGINT or SIGTERM to
// mpiexec kills the ranks a second later), stops the job with a checkpoint and exit 128 + 10.
TEST(DataParallel, AStopSignalStopsEveryRankWithACheckpoint) {
    std::string d = tmpdir(), out;
    const std::string args = std::string(TRAIN_ARGS) + " --steps 400 --ckpt-dir " + d;
    int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR +
                           " = 1 ]; then export PRAC_TEST_KILL_AT=train.step_done@2:2; fi; exec " + bin("train_gpt2") +
                           args + "/int'", &out);
    EXPECT_EQ(rc, 128 + 2) << out;
    EXPECT_NE(out.find("received signal 2: stopping after "), std::string::npos) << out;
    EXPECT_EQ(checkpoint_steps(d + "/int").size(), 1u) << out;

    rc = run_shell("cd " + d + " && (env " + mpirun_2() + bin("train_gpt2") + args + "/usr1 --log " + d +
                       "/usr1.jsonl > usr1.out 2>&1 & pid=$!; for i in $(seq 600); do grep -q '\"step\": *3,' "
                       "usr1.jsonl 2>/dev/null && break; sleep 0.1; done; grep -q '\"step\": *3,' usr1.jsonl || "
                       "echo NO_STEP_3 >> usr1.out; kill -USR1 $pid; wait $pid)",
                   &out);
    std::ifstream f(d + "/usr1.out");
    std::string said((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 128 + 10) << said;
    EXPECT_EQ(said.find("NO_STEP_3"), std::string::npos) << "no step 3 within 60 s: the signal came early\n" << said;
    EXPECT_NE(said.find("received signal 10: stopping after "), std::string::npos) << said;
    // acknowledged at once, once (Open MPI forwards it to both ranks; the other's stdout is /dev/null)
    const size_t ack = said.find("note: signal 10 caught: the run stops cleanly");
    EXPECT_NE(ack, std::string::npos) << said;
    EXPECT_EQ(said.find("note: signal 10 caught", ack + 1), std::string::npos) << said;
    const std::vector<int64_t> saved = checkpoint_steps(d + "/usr1");
    ASSERT_EQ(saved.size(), 1u) << said;
    EXPECT_GE(saved[0], 3) << said;
    EXPECT_LT(saved[0], 400) << said;
    run_shell("rm -rf " + d);
}

// A stop signal on rank 1 while rank 0 saves or samples at the run's end is the job's exit code too, said by rank 0
// (it was lost: exit 0, a scheduler's stop reported as a finished job); what the run writes was written.
TEST(DataParallel, AStopSignalOnAnotherRankDuringTheRunsEndIsTheExitCode) {
    std::string d = tmpdir(), out;
    int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR +
                           " = 1 ]; then export PRAC_TEST_KILL_AT=train.run_end:15; fi; exec " + bin("train_gpt2") +
                           TRAIN_ARGS + " --steps 2 --eval-tokens 64 --sample 8 --save " + d + "/saved'", &out);
    EXPECT_EQ(rc, 128 + 15) << out;
    EXPECT_NE(out.find("received signal 15 during the run's end: its evaluation and saves finished: --save written; "
                       "exit 143"), std::string::npos) << out;
    EXPECT_EQ(access((d + "/saved/model.safetensors").c_str(), F_OK), 0) << out;
    run_shell("rm -rf " + d);
}

// Ranks started with other arguments (here rank 1 with --batch-size 4 added, as an MPMD launch or a wrapper would)
// are refused before anything runs, naming the rank and the arguments only it has. They used to train: other batch
// sizes gave exit 0 with nothing said, another --steps printed a wrong final loss and then failed in a collective.
TEST(DataParallel, RanksWithOtherArgumentsAreRefused) {
    std::string out;
    const std::string args = std::string(TRAIN_ARGS) + " --steps 2 --eval-tokens 64";
    auto launch = [&](const std::string& rank1_extra) {
        return run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR + " = 1 ]; then extra=\"" +
                         rank1_extra + "\"; fi; exec " + bin("train_gpt2") + args + " $extra'", &out);
    };
    EXPECT_EQ(launch("--batch-size 4 --no-shuffle"), 1) << out;  // TRAIN_ARGS has --batch-size 2
    EXPECT_NE(out.find("rank 1 was started with other arguments than rank 0:\n  --batch-size: rank 1 \"4\", rank 0 "
                       "\"2\"\n  --no-shuffle: rank 1 given, rank 0 absent"), std::string::npos) << out;
    EXPECT_EQ(out.find("| loss "), std::string::npos) << "refused before the first step\n" << out;
    // the same settings in another spelling (a repeated flag, --flag=value) are the same command
    EXPECT_EQ(launch("--eval-tokens=64"), 0) << out;
}

// An error that every rank meets (a bad flag) was printed once per rank, N copies burying it; now rank 0 says it and
// ends the job while the others wait a moment. An error only one rank meets (here rank 1, after step 1: kill_point's
// :error) is still said, naming the rank, and ends the job.
TEST(DataParallel, AnErrorIsSaidOnceAndARanksOwnErrorIsSaid) {
    std::string out;
    EXPECT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + TRAIN_ARGS + " --bogus", &out), 1) << out;
    size_t said = 0;
    for (size_t at = out.find("unknown flag \"--bogus\""); at != std::string::npos;
         at = out.find("unknown flag \"--bogus\"", at + 1))
        said++;
    EXPECT_EQ(said, 1u) << out;

    const int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR +
                                 " = 1 ]; then export PRAC_TEST_KILL_AT=train.step_done@1:error; fi; exec " +
                                 bin("train_gpt2") + TRAIN_ARGS + "'",
                             &out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("train_gpt2: error on rank 1 of 2: test: an error at train.step_done"), std::string::npos)
        << out;
    EXPECT_NE(out.find("rank 1: ending all 2 ranks of the job"), std::string::npos) << out;
}

// --overlap-comm overlaps NCCL's per-layer averages with backward; where it changes nothing (the mpi communicator,
// --zero 1's one reduce-scatter) a run on several ranks says so, as one on one rank does (it was silent, and the table
// read "overlap 1" as if it applied)
TEST(DataParallel, AnOverlapCommThatChangesNothingIsSaid) {
    const bool nccl = std::string(PRAC_TEST_DEVICE) != "cpu";  // (the GPU variant: NCCL, where it overlaps)
    const std::string mpi_said = "notice: --overlap-comm changes nothing in this run: the mpi communicator averages "
                                 "the gradients after backward";
    const std::string zero_said = "notice: --overlap-comm changes nothing in this run: --zero 1 averages with one "
                                  "reduce-scatter after backward";
    // (NCCL without ZeRO: 0 and 1 are two runs, nothing said)
    for (const char* extra : {" --overlap-comm 1", " --overlap-comm 0", " --overlap-comm 0 --zero 1"}) {
        std::string out;
        ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + TRAIN_ARGS + " --steps 1" + extra,
                            &out), 0) << out;
        const bool zero = std::string(extra).find("--zero 1") != std::string::npos;
        const std::string want = !nccl ? mpi_said : zero ? zero_said : "";
        if (want.empty()) EXPECT_EQ(out.find("notice: --overlap-comm"), std::string::npos) << extra << "\n" << out;
        else EXPECT_NE(out.find(want), std::string::npos) << extra << "\n" << out;
    }
    std::string out;  // not given: nothing said
    ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + TRAIN_ARGS + " --steps 1", &out), 0)
        << out;
    EXPECT_EQ(out.find("--overlap-comm"), std::string::npos) << out;
}

// The same command is not the same job when the ranks find other files under its names (node-local copies, another
// working directory: here each rank runs in its own, whose t_train.bin differ) or run other programs (an MPMD launch
// of train_gpt2 and train_llama). Both used to go on: other data trained with exit 0 (a checkpoint records rank 0's
// files alone), other programs died inside MPI with a truncated message. Now each is refused, naming what differs:
// the file's sizes; with the same size and --ckpt-dir, its content (two tokens swapped); the programs.
TEST(DataParallel, RanksWithOtherDataOrProgramsAreRefused) {
    const std::string d = tmpdir(), train = std::string(PRAC_SOURCE_DIR) + "/data/builtin/austen_gpt2_train.bin",
                      val = std::string(PRAC_SOURCE_DIR) + "/data/builtin/austen_gpt2_val.bin";
    ASSERT_EQ(run_shell("mkdir -p " + d + "/a " + d + "/b " + d + "/c && cp " + train + " " + d +
                        "/a/t_train.bin && cp " + val + " " + d + "/b/t_train.bin && cp " + train + " " + d +
                        "/c/t_train.bin"), 0);
    {  // c: a's tokens 0 and 1 swapped (after the 1024-byte header; uint16 tokens)
        std::fstream f(d + "/c/t_train.bin", std::ios::in | std::ios::out | std::ios::binary);
        char t[4];
        f.seekg(1024);
        f.read(t, 4);
        const char swapped[4] = {t[2], t[3], t[0], t[1]};
        f.seekp(1024);
        f.write(swapped, 4);
    }
    auto in_dirs = [&](const std::string& dir1, const std::string& extra, const std::string& val_data = "") {
        std::string out;
        int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR + " = 1 ]; then cd " + d +
                               "/" + dir1 + "; else cd " + d + "/a; fi; exec " + bin("train_gpt2") + TRAIN_ARGS +
                               " --steps 2 --train-data t_train.bin --val-data " + (val_data.empty() ? val : val_data) +
                               extra + "'",
                           &out);
        return std::make_pair(rc, out);
    };
    auto [rc, out] = in_dirs("b", "");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--train-data: the ranks read other data: t_train.bin is "), std::string::npos) << out;
    EXPECT_NE(out.find(" bytes on rank 0, "), std::string::npos) << out;
    EXPECT_EQ(out.find("| loss "), std::string::npos) << "refused before the first step\n" << out;
    std::tie(rc, out) = in_dirs("c", " --ckpt-dir " + d + "/ck");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("t_train.bin has other content on rank 1 than on rank 0"), std::string::npos) << out;
    // validation files and --hellaswag's are read whole by every rank: their content is compared without
    // --ckpt-dir too (a validation loss of two data sets, a HellaSwag score of two files, were exit 0). c's t_train.bin
    // as validation data beside a's (the same size, two tokens swapped); then, c's training data made a's, two
    // --hellaswag files of one example each whose labels differ (the same size).
    std::tie(rc, out) = in_dirs("c", "", "t_train.bin");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--val-data: the ranks read other data: t_train.bin has other content on rank 1 than on rank 0"),
              std::string::npos) << out;
    for (const char* dir : {"a", "c"})
        ASSERT_EQ(run_shell(std::string("printf '%s\\n' '{\"ctx\": \"It is a truth\", \"endings\": [\"a\", \"b\", "
                                        "\"c\", \"d\"], \"label\": ") + (dir[0] == 'a' ? "0" : "1") + "}' > " + d +
                            "/" + dir + "/hs.jsonl"), 0);
    std::tie(rc, out) = in_dirs("a", " --hellaswag hs.jsonl");
    EXPECT_EQ(rc, 0) << "the same files: " << out;
    ASSERT_EQ(run_shell("cp " + d + "/a/t_train.bin " + d + "/c/t_train.bin"), 0);
    std::tie(rc, out) = in_dirs("c", " --hellaswag hs.jsonl");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--hellaswag: the ranks read other data: hs.jsonl has other content on rank 1 than on rank 0"),
              std::string::npos) << out;
    EXPECT_EQ(out.find("| loss "), std::string::npos) << "refused before the first step\n" << out;

    rc = run_shell("timeout 300 env " + mpirun_2() + "-n 1 " + bin("train_gpt2") + TRAIN_ARGS + " : -n 1 " +
                       bin("train_llama") + TRAIN_ARGS,
                   &out);
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("rank 1 runs train_llama, rank 0 train_gpt2"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

// Node-local copies of the model that differ: --init-from weights of another seed on rank 1 evaluated a mix of two
// models with exit 0 (trained, the ranks parted at the first check with a hint about GPU models); a config.json with
// another layer count died in MPI with no word of why, one with another eps trained two models with exit 0. Now each
// is refused before the first step, naming what differs; the same copies run.
TEST(DataParallel, RanksWithOtherModelsAreRefused) {
    const std::string d = tmpdir(), args = " --device " PRAC_TEST_DEVICE " --batch-size 2 --seq-len 32 --eval-tokens 64";
    ASSERT_EQ(run_shell(bin("train_gpt2") + " --model gpt2-tiny" + args + " --steps 1 --save " + d + "/a/m > /dev/null && " +
                        bin("train_gpt2") + " --model gpt2-tiny" + args + " --steps 1 --seed 7 --save " + d +
                        "/other > /dev/null && mkdir -p " + d + "/b && cp -r " + d + "/a/m " + d + "/b/m && cp " + d +
                        "/a/m/config.json " + d + "/a/c.json"), 0);
    auto in_dirs = [&](const std::string& dir1, const std::string& flags) {
        std::string out;
        int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR + " = 1 ]; then cd " + d +
                               "/" + dir1 + "; else cd " + d + "/a; fi; exec " + bin("train_gpt2") + args + flags + "'",
                           &out);
        return std::make_pair(rc, out);
    };
    auto [rc, out] = in_dirs("b", " --eval-only --init-from m");
    EXPECT_EQ(rc, 0) << "the same weights: " << out;
    ASSERT_EQ(run_shell("cp " + d + "/other/model.safetensors " + d + "/b/m/model.safetensors"), 0);
    std::tie(rc, out) = in_dirs("b", " --eval-only --init-from m");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("--init-from m/model.safetensors: the ranks read other weights (size:checksum "), std::string::npos)
        << out;
    EXPECT_EQ(out.find("val loss"), std::string::npos) << "refused before the evaluation\n" << out;
    for (const auto& [key, value] : {std::make_pair("n_layer", "3"), std::make_pair("layer_norm_epsilon", "1e-6")}) {
        ASSERT_EQ(run_shell("python3 -c \"import json; c = json.load(open('" + d + "/a/c.json')); c['" + key + "'] = " +
                            value + "; json.dump(c, open('" + d + "/b/c.json', 'w'))\""), 0);
        std::tie(rc, out) = in_dirs("b", " --model c.json --steps 2");
        EXPECT_EQ(rc, 1) << key << ": " << out;
        EXPECT_NE(out.find("--model c.json: the ranks built other models: rank 0 has "), std::string::npos) << out;
        EXPECT_EQ(out.find("| loss "), std::string::npos) << "refused before the first step\n" << out;
    }
    // a --ckpt-dir that rank 1 cannot see: said as such (it was "cannot read checkpoint state ... pass a complete one")
    ASSERT_EQ(run_shell("cd " + d + "/a && " + bin("train_gpt2") + " --model gpt2-tiny" + args +
                        " --steps 2 --ckpt-dir ck > /dev/null"), 0);
    std::tie(rc, out) = in_dirs("b", " --model gpt2-tiny --steps 3 --ckpt-dir ck --resume");
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("rank 1 cannot read ck/step_00000002/state.safetensors, the checkpoint rank 0 resumes from"),
              std::string::npos) << out;
    // one it sees is another run's (a node-local --ckpt-dir): refused before the first step (each rank loaded its
    // own copy, and the run trained copies that parted, said at its first checkpoint with a hint to resume again)
    ASSERT_EQ(run_shell("cd " + d + "/b && " + bin("train_gpt2") + " --model gpt2-tiny" + args +
                        " --steps 2 --seed 7 --ckpt-dir ck > /dev/null"), 0);
    std::tie(rc, out) = in_dirs("b", " --model gpt2-tiny --steps 3 --ckpt-dir ck --resume");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("rank 1 sees another checkpoint at ck/step_00000002 than rank 0 does"), std::string::npos)
        << out;
    EXPECT_EQ(out.find("| loss "), std::string::npos) << "refused before the first step\n" << out;
    // the same marker over a damaged file (one bit of rank 1's model.safetensors, in its last tensor's data): refused
    // before the first step (each rank trained its own copy, said at the next checkpoint, and resuming again met the
    // same copy)
    ASSERT_EQ(run_shell("rm -rf " + d + "/b/ck && cp -r " + d + "/a/ck " + d + "/b/ck"), 0);
    ASSERT_EQ(run_shell("python3 -c \"import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-3] ^= 1; "
                        "open(p, 'wb').write(b)\" " + d + "/b/ck/step_00000002/model.safetensors"), 0);
    std::tie(rc, out) = in_dirs("b", " --model gpt2-tiny --steps 3 --ckpt-dir ck --resume");
    EXPECT_EQ(rc, 1) << out;
    EXPECT_NE(out.find("rank 1's copy of the checkpoint ck/step_00000002 is damaged: model.safetensors does not match "
                       "its checksum"), std::string::npos) << out;
    EXPECT_EQ(out.find("| loss "), std::string::npos) << "refused before the first step\n" << out;
    ASSERT_EQ(run_shell("rm -rf " + d + "/b/ck && cp -r " + d + "/a/ck " + d + "/b/ck"), 0);
    std::tie(rc, out) = in_dirs("b", " --model gpt2-tiny --steps 3 --ckpt-dir ck --resume");
    EXPECT_EQ(rc, 0) << "the same copy on each rank: " << out;
    run_shell("rm -rf " + d);
}

// A rank that stops (here SIGSTOP right after step 2: common/kill_point.h) left the other waiting in the next step's
// collective forever, the job holding its devices and printing nothing. The other rank's watchdog (--watchdog 3)
// says where it is and ends the job; the launcher returns non-zero long before the test's timeout (300 s), which
// ends the run with the status 124 but prints no such line.
TEST(DataParallel, AStoppedRankEndsTheJobThroughTheWatchdog) {
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR +
                                 " = 1 ]; then export PRAC_TEST_KILL_AT=train.step_done@2:19; fi; exec " +
                                 bin("train_gpt2") + TRAIN_ARGS + " --watchdog 3'",
                             &out);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(watchdog_line_at(out, 0, 3, "start of step 3"), std::string::npos) << out;
    EXPECT_NE(out.find("ending all 2 ranks of the job"), std::string::npos) << out;
    EXPECT_LT(seconds, 200) << out;
}

// The same before the first step (a tester's rank stopped at start-up hung the job for good, --watchdog 5: nothing
// was watched before the first step's mark): rank 1 stops once the model is set up, rank 0 waits in the first
// collective after it, and its watchdog ends the job.
TEST(DataParallel, ARankStoppedInTheStartUpEndsTheJobThroughTheWatchdog) {
    std::string out;
    const int rc = run_shell("timeout 300 env " + mpirun_2() + "bash -c 'if [ " + RANK_VAR +
                                 " = 1 ]; then export PRAC_TEST_KILL_AT=train.set_up:19; fi; exec " +
                                 bin("train_gpt2") + TRAIN_ARGS + " --watchdog 3'",
                             &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(watchdog_line_at(out, 0, 3, "start-up, begun at"), std::string::npos) << out;
    EXPECT_NE(out.find("ending all 2 ranks of the job"), std::string::npos) << out;
}

// Two ranks with micro-batch B equal one rank with 2B: the same samples (rank r reads the r-th B of every
// 2B-sample step), the mean of the ranks' mean losses equals the mean over 2B rows (no padding in these shards),
// so gradients agree up to fp32 summation order. Tolerances: losses and gradient norms 1e-5 (measured 1e-6);
// weights after 9 AdamW steps 2e-4 absolute: Adam divides by sqrt(v), so parameters whose true gradient is 0 or
// at rounding level move by rounding noise amplified to about lr per step (lr = 1e-3; measured 2.3e-5, an element
// of h.0's c_fc weight; GPT-2's key biases, whose gradient is 0, 2.4e-6). ZeRO-1's own update is held to 1e-6
// against ZeRO-0's in Resume.AZeroOneCheckpointResumesOnOtherRankCounts.
static void two_ranks_equal_one_rank(const std::string& extra, std::initializer_list<const char*> zeros) {
    std::string d = tmpdir();
    std::string base = std::string(TRAIN_ARGS) + " " + extra;
    base.replace(base.find(" --model gpt2-tiny"), 18, gpt2_tiny());
    const std::string last = "/step_00000009/model.safetensors";  // the final checkpoint's (TRAIN_ARGS: 9 steps)
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + base + " --batch-size 4 --log " + d +
                        "/one.jsonl --ckpt-dir " + d + "/one"), 0);
    for (const char* zero : zeros) {
        std::string tag = std::string("two_z") + zero, out;
        int rc = run_shell(mpirun_2() + bin("train_gpt2") + base + " --batch-size 2 --zero " + zero + " --log " + d +
                               "/" + tag + ".jsonl --ckpt-dir " + d + "/" + tag,
                           &out);
        ASSERT_EQ(rc, 0) << out;
        EXPECT_NE(out.find("2 ranks"), std::string::npos) << out;
        auto a = steps_of(d + "/one.jsonl"), b = steps_of(d + "/" + tag + ".jsonl");
        ASSERT_EQ(a.size(), b.size());
        for (auto& [step, v] : a) {
            EXPECT_NEAR(v.first, b[step].first, 1e-5) << "loss, step " << step << " zero " << zero;
            EXPECT_NEAR(v.second, b[step].second, 1e-5) << "grad norm, step " << step << " zero " << zero;
        }
        double worst = max_weight_difference(d + "/one" + last, d + "/" + tag + last);
        EXPECT_LT(worst, 2e-4) << extra << " zero " << zero;
        std::printf("%s zero %s: max weight difference %.3g\n", extra.c_str(), zero, worst);
    }
    run_shell("rm -rf " + d);
}
// --hellaswag on two ranks (each scoring every other example) counts what one rank counts, with micro-batches of
// 2 and 4 rows; a training run's evaluations carry the score into the log (step 1's and the final one), as the
// printed lines say; train_llama scores the same file. Ten examples of Austen's sentences, the right ending the
// sentence's own.
TEST(DataParallel, TwoRanksScoreHellaSwagAsOneRank) {
    const std::string d = tmpdir();
    const std::vector<std::pair<std::string, std::string>> sentences = {
        {"It is a truth universally acknowledged, that a single man", "in possession of a good fortune, must be in want of a wife."},
        {"Emma Woodhouse, handsome, clever, and rich, with a comfortable", "home and happy disposition, seemed to unite some of the best blessings of existence."},
        {"The family of Dashwood had long been settled", "in Sussex."},
        {"No one who had ever seen Catherine Morland in her", "infancy would have supposed her born to be an heroine."},
        {"Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man", "who, for his own amusement, never took up any book but the Baronetage."},
        {"About thirty years ago Miss Maria Ward, of Huntingdon, with only", "seven thousand pounds, had the good luck to captivate Sir Thomas Bertram."},
        {"She was the youngest of the two daughters of a most", "affectionate, indulgent father."},
        {"Their estate was large, and their residence was at Norland Park, in", "the centre of their property."},
        {"A mother who had three sons, and not one of them", "ever married, was a woman of some consequence."},
        {"The real evils, indeed, of Emma's situation were the power of having", "rather too much her own way."}};
    {
        std::ofstream f(d + "/hs.jsonl");
        for (size_t i = 0; i < sentences.size(); i++) {
            std::vector<std::string> endings;  // the sentence's own ending at index i % 4, the next three's around it
            for (size_t k = 0; k < 4; k++) endings.push_back(sentences[(i + k) % sentences.size()].second);
            std::rotate(endings.begin(), endings.end() - i % 4, endings.end());
            f << nlohmann::json{{"ctx", sentences[i].first}, {"endings", endings}, {"label", i % 4}}.dump() << "\n";
        }
    }
    auto score_of = [](const std::string& jsonl, int step) {  // (acc_norm, acc, examples) of step's eval record
        std::ifstream f(jsonl);
        std::tuple<double, double, long long> r{-1, -1, -1};
        for (std::string line; std::getline(f, line);)
            if (auto j = nlohmann::json::parse(line); j["type"] == "eval" && j["step"] == step && j.contains("hellaswag_acc"))
                r = {j["hellaswag_acc_norm"].get<double>(), j["hellaswag_acc"].get<double>(),
                     j["hellaswag_examples"].get<long long>()};
        return r;
    };
    const std::string args = std::string(" --model gpt2-tiny --device ") + PRAC_TEST_DEVICE +
                             " --seq-len 64 --eval-tokens 256 --hellaswag " + d + "/hs.jsonl --log " + d;
    std::string out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_gpt2") + args + "/train.jsonl --steps 2 --eval-interval 1 "
                        "--batch-size 4 --lr 3e-3", &out), 0) << out;
    EXPECT_NE(out.find("hellaswag:  10 example(s) from " + d + "/hs.jsonl: 40 rows"), std::string::npos) << out;
    EXPECT_NE(out.find("step 1 | hellaswag acc_norm "), std::string::npos) << out;
    EXPECT_NE(out.find("final | hellaswag acc_norm "), std::string::npos) << out;
    EXPECT_EQ(std::get<2>(score_of(d + "/train.jsonl", 1)), 10);
    EXPECT_EQ(std::get<2>(score_of(d + "/train.jsonl", 2)), 10);
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + "/one.jsonl --eval-only --batch-size 4",
                        &out), 0) << out;
    ASSERT_EQ(run_shell(mpirun_2() + bin("train_gpt2") + args + "/two.jsonl --eval-only --batch-size 2", &out), 0)
        << out;
    const auto one = score_of(d + "/one.jsonl", 0), two = score_of(d + "/two.jsonl", 0);
    EXPECT_EQ(std::get<2>(one), 10);
    EXPECT_EQ(two, one) << "acc_norm, acc, examples";
    // one example on two ranks: rank 1 scores none and still joins the sum
    ASSERT_EQ(run_shell(mpirun_2() + bin("train_gpt2") + args + "/first.jsonl --eval-only --batch-size 2 "
                        "--hellaswag-examples 1", &out), 0) << out;
    EXPECT_EQ(std::get<2>(score_of(d + "/first.jsonl", 0)), 1) << out;
    // LLaMA encodes the same lines with the SentencePiece model of its shards (the built-in corpus's)
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=2 " + bin("train_llama") + " --model llama-tiny --device " PRAC_TEST_DEVICE
                        " --seq-len 64 --eval-tokens 256 --eval-only --batch-size 4 --hellaswag " + d + "/hs.jsonl "
                        "--log " + d + "/llama.jsonl", &out), 0) << out;
    EXPECT_EQ(std::get<2>(score_of(d + "/llama.jsonl", 0)), 10) << out;
    run_shell("rm -rf " + d);
}

TEST(DataParallel, TwoRanksEqualOneRankWithTheDoubledBatch) { two_ranks_equal_one_rank("", {"0", "1"}); }

// An evaluation on two ranks of B reads what one rank of 2B reads, also where --eval-tokens is not a multiple of
// 2*B*T (65 here: ceil(65 / 64) = 2 micro-batches on each, as --help says; the budget was split into 33 and 32 tokens,
// and the ranks read 2 and 1, 96 tokens and another loss), and in GaLore's protocol (each rank until its non-pad
// inputs times the ranks exceed --eval-tokens). Loss within 1e-5 (fp32 sums in another order), the tokens exactly.
TEST(DataParallel, TwoRanksEvaluateWhatOneRankWithTheDoubledBatchDoes) {
    const std::string d = tmpdir();
    auto eval_of = [](const std::string& jsonl) {  // (val_loss, val_tokens) of the one eval record
        std::ifstream f(jsonl);
        std::pair<double, long long> r{-1, -1};
        for (std::string line; std::getline(f, line);)
            if (auto j = nlohmann::json::parse(line); j["type"] == "eval")
                r = {j["val_loss"].get<double>(), j["val_tokens"].get<long long>()};
        return r;
    };
    for (const char* protocol : {"tokens", "galore"}) {
        const std::string args = std::string(" --model gpt2-tiny --device ") + PRAC_TEST_DEVICE +
                                 " --eval-only --seq-len 32 --eval-tokens 65 --eval-protocol " + protocol + " --log " +
                                 d + "/" + protocol;
        std::string out;
        ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + "_one.jsonl --batch-size 2", &out), 0)
            << out;
        ASSERT_EQ(run_shell(mpirun_2() + bin("train_gpt2") + args + "_two.jsonl --batch-size 1", &out), 0) << out;
        const auto one = eval_of(d + "/" + protocol + "_one.jsonl"), two = eval_of(d + "/" + protocol + "_two.jsonl");
        EXPECT_EQ(one.second, 2 * 2 * 32) << protocol;  // 2 micro-batches of 2 x 32 (galore: 64, then 128 > 65)
        EXPECT_EQ(two.second, one.second) << protocol;
        EXPECT_NEAR(two.first, one.first, 1e-5) << protocol;
    }
    // the CPU backend's default --eval-tokens is counted in whole steps of every rank's micro-batches (ranks x B x T),
    // as the evaluation reads them: two ranks of 2 read what one rank of 4 reads, and the table says that count (two
    // ranks of 2 read 15104 tokens, one rank of 4 14976, and the table said 15040)
    const std::string args = std::string(" --model gpt2-tiny --device ") + PRAC_TEST_DEVICE +
                             " --eval-only --seq-len 32 --log " + d + "/default";
    std::string out_one, out_two;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + "_one.jsonl --batch-size 4", &out_one), 0)
        << out_one;
    ASSERT_EQ(run_shell(mpirun_2() + bin("train_gpt2") + args + "_two.jsonl --batch-size 2", &out_two), 0) << out_two;
    const auto one = eval_of(d + "/default_one.jsonl"), two = eval_of(d + "/default_two.jsonl");
    EXPECT_EQ(two.second, one.second);
    EXPECT_NEAR(two.first, one.first, 1e-5);
    for (const std::string* out : {&out_one, &out_two}) {
        const size_t row = out->find("| eval tokens");
        ASSERT_NE(row, std::string::npos) << *out;
        EXPECT_NE(out->substr(row, out->find('\n', row) - row).find(" " + std::to_string(one.second) + " "),
                  std::string::npos) << *out;
    }
    run_shell("rm -rf " + d);
}
// RSO's subspaces shape the weights: every rank must draw the same P (a per-rank draw would split the ranks'
// weights and the losses would part from the one-rank run's after the first update).
TEST(DataParallel, RsoTwoRanksEqualOneRank) {
    two_ranks_equal_one_rank("--optimizer rso --rso-rank 16 --rso-gap 4", {"0"});
}

// --prac-shared-subspace averages every rank's Gram matrix inside forward when a basis refresh is due: a collective.
// A rank whose micro-batches of a refresh step are all padding (GaLore's row-aligned C4 shards pad short documents;
// a row of padding has no target) has nothing to learn, but must still take part in the refresh, with nothing to
// add to the Gram matrix (on one rank an all-padding micro-batch never enters the Gram matrix either), and end
// with the bases of the other ranks. The shard's rows 1 and 4 are all padding: rank 1's micro-batch of step 0 (the
// first Q1 and Q2 refresh: a collective) and rank 0's of step 2 (a Q2 redraw, --prac-t2 2: no collective, but the
// draw counters must stay in step). The rules then make 2 ranks of B = 1 equal 1 rank with --grad-accum 2: the
// same mean of per-micro-batch mean losses (over those with a target), and at step 0 the Gram matrix of row 0
// alone (halved by the 2-rank average, which leaves the eigenvectors as they are); Q1 is refreshed only then
// (T1 = 500). Before the fix the job died at step 0 (rank 1 skipped forward and met the others' Gram all-reduces
// with its gradient all-reduce: MPI_ERR_TRUNCATE). Tolerances as in TwoRanksEqualOneRankWithTheDoubledBatch;
// the PRAC state rank 0 checkpoints (the shared bases) equals the one-rank run's: counters exactly, bases to 1e-5.
// Row-aligned GPT-2 shards (GaLore's C4 layout) in d: train.bin of `rows` random rows of T tokens, those listed in
// `padding` all padding, and val.bin of 8 random rows; the tokens drawn from `seed`, train's first. On emulated GPUs
// ids of gpt2_tiny's 512 (no tokenizer recorded, pad 511).
static void write_padded_shards(const std::string& d, int T, int rows, std::initializer_list<int> padding,
                                unsigned seed) {
    ShardInfo info;
    info.layout = SHARD_LAYOUT_ROWS;
    info.row_len = T;
#if defined(PRAC_TEST_EMULATED_GPUS)
    info.vocab_size = 512;
    info.tokenizer = TOKENIZER_UNKNOWN;
#else
    info.vocab_size = 50257;
    info.tokenizer = TOKENIZER_GPT2;
#endif
    info.pad_id = info.eos_id = info.vocab_size - 1;
    std::mt19937 rng(seed);
    auto draw = [&](int n, std::initializer_list<int> pad_rows) {
        std::vector<uint16_t> t((size_t)n * T);
        for (uint16_t& x : t) x = (uint16_t)(rng() % info.pad_id);
        for (int r : pad_rows)
            for (int i = 0; i < T; i++) t[(size_t)r * T + i] = (uint16_t)info.pad_id;
        return t;
    };
    write_shard(d + "/train.bin", draw(rows, padding), info);
    write_shard(d + "/val.bin", draw(8, {}), info);
}

TEST(DataParallel, SharedSubspaceWithAnAllPaddingRank) {
    std::string d = tmpdir();
    const int T = 16, steps = 6;
    write_padded_shards(d, T, 2 * steps, {1, 4}, 1234);
    std::string args = gpt2_tiny(false) + " --device " PRAC_TEST_DEVICE " --steps " + std::to_string(steps) + " --seq-len " +
                       std::to_string(T) + " --batch-size 1 --lr 1e-3 --no-shuffle --eval-tokens 64 --prac prac "
                       "--prac-t2 2 --prac-shared-subspace --train-data " + d + "/train.bin --val-data " + d +
                       "/val.bin";
    // act storage: fp8's stochastic rounding is keyed by a save counter that each rank keeps for its own
    // micro-batches, so 2 ranks draw other rounding bits than 1 rank's two micro-batches (both unbiased, not one run)
    args += " --prac-storage act";
    std::string out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + " --grad-accum 2 --log " + d +
                        "/one.jsonl --ckpt-dir " + d + "/one", &out), 0) << out;
    int rc = run_shell(mpirun_2() + bin("train_gpt2") + args + " --log " + d + "/two.jsonl --ckpt-dir " + d + "/two",
                       &out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("2 ranks (" PRAC_TEST_COMM "), ZeRO-0, PRAC subspace shared"), std::string::npos) << out;
    auto a = steps_of(d + "/one.jsonl"), b = steps_of(d + "/two.jsonl");
    ASSERT_EQ(a.size(), (size_t)steps);
    ASSERT_EQ(a.size(), b.size());
    for (auto& [step, v] : a) {
        EXPECT_NEAR(v.first, b[step].first, 1e-5) << "loss, step " << step;
        EXPECT_NEAR(v.second, b[step].second, 1e-5) << "grad norm, step " << step;
    }
    char last[32];
    std::snprintf(last, sizeof last, "/step_%08d/", steps);
    std::string one = d + "/one" + last, two = d + "/two" + last;
    double worst = max_weight_difference(one + "model.safetensors", two + "model.safetensors");
    EXPECT_LT(worst, 2e-4);
    SafeTensorsFile sa = safetensors_open(one + "state.safetensors"), sb = safetensors_open(two + "state.safetensors");
    int bases = 0;
    double worst_basis = 0;
    for (const std::string& name : sa.names()) {
        if (name.rfind("prac.", 0) != 0) continue;
        const SafeTensor& t = sa.get(name);
        ASSERT_NE(sb.find(name), nullptr) << name;
        if (t.dtype == "F32") {
            std::vector<float> x(t.numel()), y(x.size());
            sa.read_f32(name, x.data(), x.size());
            sb.read_f32(name, y.data(), y.size());
            for (size_t i = 0; i < x.size(); i++) worst_basis = worst_of(worst_basis, (double)std::fabs(x[i] - y[i]));
            bases++;
        } else {
            std::vector<char> x(t.nbytes), y(x.size());
            sa.read_raw(name, x.data(), x.size());
            ASSERT_EQ(sb.get(name).nbytes, x.size()) << name;
            sb.read_raw(name, y.data(), y.size());
            EXPECT_EQ(x, y) << name << " (refresh counters / has_basis) differ from the one-rank run's";
        }
    }
    EXPECT_EQ(bases, 6) << "every site of gpt2-tiny is compressed by --prac prac";
    EXPECT_LT(worst_basis, 1e-5);
    std::printf("max weight difference %.3g, max basis difference %.3g\n", worst, worst_basis);
    run_shell("rm -rf " + d);
}

// A micro-batch of padding has no mean loss: a step's loss and gradient are the mean over its micro-batches that have
// one (it counted 0: a step with one of two micro-batches all padding logged half its loss and took half its
// gradient, exit 0). Rows 1, 3, 5, 7 are padding: --grad-accum 2 on the shard trains each step on one row, and so
// does --grad-accum 1 on the shard without them, step for step: the same losses and gradient norms (the scale is 2,
// a power of two, so to the bit in practice; the check allows float rounding).
TEST(DataParallel, AMicroBatchOfPaddingIsLeftOutOfTheStepsMean) {
    std::string d = tmpdir();
    const int T = 16, steps = 4;
    write_padded_shards(d, T, 2 * steps, {1, 3, 5, 7}, 777);
    ShardInfo info;
    std::vector<uint16_t> rows = read_shard(d + "/train.bin", &info), kept;
    for (int r = 0; r < 2 * steps; r += 2) kept.insert(kept.end(), rows.begin() + r * T, rows.begin() + (r + 1) * T);
    write_shard(d + "/rows.bin", kept, info);
    const std::string args = " --model gpt2-tiny --device " PRAC_TEST_DEVICE " --steps " + std::to_string(steps) +
                             " --seq-len " + std::to_string(T) + " --batch-size 1 --lr 1e-3 --no-shuffle "
                             "--eval-tokens 64 --val-data " + d + "/val.bin";
    std::string out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + " --grad-accum 2 --train-data " + d +
                        "/train.bin --log " + d + "/padded.jsonl", &out), 0) << out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + " --train-data " + d + "/rows.bin --log " +
                        d + "/rows.jsonl", &out), 0) << out;
    auto a = steps_of(d + "/padded.jsonl"), b = steps_of(d + "/rows.jsonl");
    ASSERT_EQ(a.size(), (size_t)steps);
    ASSERT_EQ(b.size(), (size_t)steps);
    for (auto& [step, v] : a) {
        EXPECT_NEAR(v.first, b[step].first, 1e-6 * b[step].first) << "loss, step " << step;
        EXPECT_NEAR(v.second, b[step].second, 1e-6 * b[step].second) << "grad norm, step " << step;
    }
    run_shell("rm -rf " + d);
}

// A step whose every micro-batch is padding has nothing to learn: it takes no update (one of zero gradients still
// decayed the weights and moved them by the moments, with exit 0), and says so. At a constant learning rate, 2 steps
// on [row 0, padding] end at the weights of 1 step on row 0, to the byte. Its log record has no loss (null, and
// "padding":true: it logged 0, which curves and means took for a loss), and a run of padding alone fails (exit 0).
TEST(DataParallel, AStepOfPaddingAloneTakesNoUpdate) {
    std::string d = tmpdir();
    const int T = 16;
    write_padded_shards(d, T, 2, {1}, 555);
    ShardInfo info;
    std::vector<uint16_t> rows = read_shard(d + "/train.bin", &info);
    write_shard(d + "/pad.bin", std::vector<uint16_t>(rows.begin() + T, rows.end()), info);
    rows.resize(T);
    write_shard(d + "/row0.bin", rows, info);
    const std::string args = " --model gpt2-tiny --device " PRAC_TEST_DEVICE " --seq-len " + std::to_string(T) +
                             " --batch-size 1 --lr 1e-3 --warmup 0 --min-lr-frac 1 --no-shuffle --eval-tokens 64 "
                             "--val-data " + d + "/val.bin";
    std::string out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + " --steps 2 --train-data " + d +
                        "/train.bin --save " + d + "/two --log " + d + "/two.jsonl --log-interval 1", &out), 0) << out;
    EXPECT_NE(out.find("warning: step 2: every micro-batch was padding, nothing to learn: no update"), std::string::npos)
        << out;
    EXPECT_NE(out.find("step     2/2 | loss    n/a |"), std::string::npos) << out;
    EXPECT_NE(out.find("warning: 1 of this run's 2 steps were padding alone and made no update"), std::string::npos)
        << out;
    std::string log;
    run_shell("grep '\"step\":2,' " + d + "/two.jsonl", &log);
    EXPECT_NE(log.find("\"loss\":null,"), std::string::npos) << log;
    EXPECT_NE(log.find("\"padding\":true"), std::string::npos) << log;
    EXPECT_NE(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + " --steps 2 --train-data " + d + "/pad.bin",
                        &out), 0) << out;
    EXPECT_NE(out.find("every one of this run's 2 steps was padding: nothing was learned"), std::string::npos) << out;
    ASSERT_EQ(run_shell("OMP_NUM_THREADS=1 " + bin("train_gpt2") + args + " --steps 1 --train-data " + d +
                        "/row0.bin --save " + d + "/one", &out), 0) << out;
    EXPECT_EQ(run_shell("cmp " + d + "/one/model.safetensors " + d + "/two/model.safetensors", &out), 0) << out;
    run_shell("rm -rf " + d);
}

// --prac-refresh-overlap with each rank's own bases: a rank whose micro-batch of a refresh step is all padding
// skips forward and begins no refresh there, while the other rank's is in flight at the step's checkpoint, so the
// ranks hold different PRAC tensors (the pending copies and their rows). Each rank's own go into the checkpoint
// under its prefix, its list sent first. Row 4 is padding: rank 0 skips forward on step 2 (counting from 0), so
// with D = 2 it has no refresh in flight in the checkpoint after that step (step_00000003), where rank 1 has the
// refreshes begun on step 2. The run must get through that checkpoint (before the fix it died there: the ranks
// broadcast different lists, MPI_ERR_TRUNCATE) and resume from it to the weights of the run that went straight
// through, bit for bit.
TEST(DataParallel, OverlappedRefreshWithAnAllPaddingRankCheckpoints) {
    std::string d = tmpdir();
    const int T = 16, steps = 5;
    write_padded_shards(d, T, 2 * steps, {4}, 4321);  // row 4: rank 0's micro-batch of step 2
    std::string args = gpt2_tiny(false) + " --device " PRAC_TEST_DEVICE " --seq-len " + std::to_string(T) +
                       " --batch-size 1 --lr 1e-3 --no-shuffle --eval-tokens 64 --prac prac --prac-t2 2 "
                       "--prac-refresh-overlap 2 --train-data " + d + "/train.bin --val-data " + d + "/val.bin";
    std::string out;
    int rc = run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " --steps " + std::to_string(steps) +
                       " --ckpt-every 1 --ckpt-keep 10 --ckpt-dir " + d + "/full", &out);
    ASSERT_EQ(rc, 0) << out;
    SafeTensorsFile st = safetensors_open(d + "/full/step_00000003/state.safetensors");
    int pending[2] = {0, 0};
    for (const std::string& name : st.names())
        for (int r = 0; r < 2; r++)
            pending[r] += name.rfind("prac.", 0) == std::string::npos && name.find("rank" + std::to_string(r) + ".") == 0 &&
                          name.find("pending") != std::string::npos;
    std::printf("tensors with pending refreshes in the step-3 checkpoint: rank 0 %d, rank 1 %d\n", pending[0], pending[1]);
    EXPECT_NE(pending[0], pending[1]) << "the ranks should hold different refreshes in flight here";
    char last[32];
    std::snprintf(last, sizeof last, "/step_%08d", steps);
    rc = run_shell("mv " + d + "/full" + last + " " + d + "/straight && rm -rf " + d + "/full/step_00000004 && timeout 300 env " +
                   mpirun_2() + bin("train_gpt2") + args + " --steps " + std::to_string(steps) + " --ckpt-dir " + d +
                   "/full --resume", &out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_EQ(max_weight_difference(d + "/straight/model.safetensors", d + "/full" + last + "/model.safetensors"), 0.0)
        << "resumed from the step-3 checkpoint";
    run_shell("rm -rf " + d);
}

// check_replicas (train/trainer.h): over 2 ranks every optimizer keeps the ranks' parameters and state the same bits,
// so the check before each checkpoint and at the end passes; a rank whose first parameter is nudged by one bit after
// step 3 stops the run at the step-4 checkpoint, which is not written (the step-2 one is). --steps 0 (no optimizer:
// an evaluation of the initial weights) compares the parameters alone.
TEST(Replicas, EveryOptimizerKeepsThemEqualAndANudgedRankStops) {
    std::string d = tmpdir(), out;
    const std::string args = " --model gpt2-tiny --device " PRAC_TEST_DEVICE " --batch-size 2 --seq-len 32 "
                             "--eval-tokens 64 --lr 1e-3 --ckpt-every 2 --prac prac --prac-t1 2 --prac-t2 1";
    for (const char* o : {"--optimizer adamw", "--optimizer adamw --optimizer-states 8bit", "--optimizer muon",
                          "--optimizer adam-mini", "--optimizer galore --galore-rank 8 --galore-gap 2",
                          "--optimizer rso --rso-rank 16 --rso-gap 2 --prac none"}) {
        std::string dir = d + "/" + std::to_string(std::hash<std::string>{}(o));
        int rc = run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + args + " " + o +
                               " --steps 4 --ckpt-dir " + dir, &out);
        EXPECT_EQ(rc, 0) << o << ": " << out;
    }
    int rc = run_shell("timeout 300 env " + mpirun_2() + bin("train_gpt2") + " --model gpt2-tiny --device "
                           PRAC_TEST_DEVICE " --batch-size 2 --seq-len 32 --eval-tokens 64 --steps 0", &out);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("| optimizer none (--steps 0 trains nothing) |"), std::string::npos) << out;
    rc = run_shell("timeout 300 env " + mpirun_2() + "-x PRAC_TEST_NUDGE_AFTER_STEP=3 -x PRAC_TEST_NUDGE_RANK=1 " +
                           bin("train_gpt2") + args + " --steps 6 --ckpt-dir " + d + "/nudged", &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(rc, 124) << "hung: " << out;
    EXPECT_NE(out.find("the ranks' copies of the model parted by step 4: rank(s) 1 hold other parameters than rank 0"),
              std::string::npos) << out;
    EXPECT_EQ(checkpoint_steps(d + "/nudged"), std::vector<int64_t>{2}) << out;
    run_shell("rm -rf " + d);
}

#if defined(PRAC_TEST_EMULATED_GPUS)
// Which GPUs each rank sees (launch.h: check_ranks_agree_on_device, check_one_gpu_per_rank), set per rank as a job
// script would: PRAC_EMU_DEVICES GPUs on the node (0: no usable GPU), CUDA_VISIBLE_DEVICES as the CUDA runtime reads
// it (the emulated GPUs keep their UUIDs whatever number a process gives them).
static std::string per_rank_env(const std::string& rank0, const std::string& rank1, const std::string& cmd) {
    return "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then export " + rank1 + "; else export " + rank0 +
           "; fi; exec " + cmd + "'";
}
static const std::string DEVICE_ARGS = gpt2_tiny() + " --steps 2 --batch-size 2 --seq-len 32 --eval-tokens 64";

// --device auto on a rank whose node has no usable GPU: before the check that rank took the CPU backend and MPI while
// rank 0 set up NCCL (an MPI error or a hang); now every rank stops with the reason.
TEST(DevicePerRank, RanksThatDisagreeOnTheDeviceStop) {
    std::string out;
    int rc = run_shell("timeout 300 env " + mpirun_2() +
                           per_rank_env("PRAC_EMU_DEVICES=1", "PRAC_EMU_DEVICES=0",
                                        bin("train_gpt2") + DEVICE_ARGS + " --device auto"),
                       &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(rc, 124) << "hung: " << out;
    EXPECT_NE(out.find("the ranks disagree on the device: 1 of 2 found a usable GPU"), std::string::npos) << out;
    EXPECT_NE(out.find("these found none:\n  rank 1 ("), std::string::npos) << out;
    EXPECT_NE(out.find(": no CUDA-capable device is detected)"), std::string::npos) << out;
    EXPECT_EQ(out.find("on rank 1 of 2"), std::string::npos) << "said once, by rank 0\n" << out;
}

// One GPU per rank, told apart by UUID: two ranks that see the node's one GPU are refused; two that each see only
// their own (CUDA_VISIBLE_DEVICES per rank: both call it GPU 0, as under srun --gpus-per-task=1) train, and give
// the run of two ranks that see both GPUs bit for bit; two whose GPUs are one (rank 0's GPU 0 and rank 1's GPU 1
// under different CUDA_VISIBLE_DEVICES lists) are refused again.
TEST(DevicePerRank, OneGpuPerRankByUuid) {
    std::string d = tmpdir(), out;
    const std::string train = bin("train_gpt2") + DEVICE_ARGS + " --device cuda";
    int rc = run_shell("timeout 300 env PRAC_EMU_DEVICES=1 " + mpirun_2() + train, &out);
    EXPECT_EQ(rc == 0 || rc == 124, false) << out;
    EXPECT_NE(out.find("ranks 0 and 1 share one GPU (GPU-"), std::string::npos) << out;

    ASSERT_EQ(run_shell("timeout 300 env PRAC_EMU_DEVICES=2 " + mpirun_2() + train + " --log " + d + "/both.jsonl", &out),
              0) << out;
    rc = run_shell("timeout 300 env PRAC_EMU_DEVICES=2 " + mpirun_2() +
                       per_rank_env("CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=1", train + " --log " + d + "/own.jsonl"),
                   &out);
    ASSERT_EQ(rc, 0) << out;
    auto both = steps_of(d + "/both.jsonl"), own = steps_of(d + "/own.jsonl");
    EXPECT_EQ(both.size(), 2u);
    EXPECT_EQ(both, own) << "each rank on its own visible GPU";

    rc = run_shell("timeout 300 env PRAC_EMU_DEVICES=2 " + mpirun_2() +
                       per_rank_env("CUDA_VISIBLE_DEVICES=1", "CUDA_VISIBLE_DEVICES=0,1", train),
                   &out);
    EXPECT_EQ(rc == 0 || rc == 124, false) << out;
    EXPECT_NE(out.find("ranks 0 and 1 share one GPU (GPU-"), std::string::npos) << out;
    run_shell("rm -rf " + d);
}

// Each rank sets its GPU before MPI_Init from the launcher's local rank (launch.h: choose_gpu_before_mpi_init; an
// MPI library may open a context on the current GPU inside MPI_Init), and keeps it: with the launcher's local ranks
// swapped against MPI's node order (rank 0 told 1, rank 1 told 0) the ranks train on the GPUs the launcher gave them,
// rank 0 says so, and the run equals the one in MPI's order bit for bit.
TEST(DevicePerRank, GpuChosenBeforeMpiInit) {
    std::string d = tmpdir(), out;
    const std::string train = bin("train_gpt2") + DEVICE_ARGS + " --device cuda";
    ASSERT_EQ(run_shell("timeout 300 env " + mpirun_2() + train + " --log " + d + "/plain.jsonl", &out), 0) << out;
    EXPECT_NE(out.find("device: CUDA GPU 0 (fp32 storage; chosen before MPI_Init from OMPI_COMM_WORLD_LOCAL_RANK=0)"),
              std::string::npos) << out;
    int rc = run_shell("timeout 300 env " + mpirun_2() +
                           per_rank_env("OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_RANK=0",
                                        train + " --log " + d + "/swapped.jsonl"),
                       &out);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("notice: rank 0 took GPU 1 from OMPI_COMM_WORLD_LOCAL_RANK=1 before MPI_Init; MPI's node "
                       "order would give GPU 0"), std::string::npos) << out;
    EXPECT_NE(out.find("device: CUDA GPU 1 (fp32 storage; chosen before MPI_Init"), std::string::npos) << out;
    auto plain = steps_of(d + "/plain.jsonl"), swapped = steps_of(d + "/swapped.jsonl");
    EXPECT_EQ(plain.size(), 2u);
    EXPECT_EQ(plain, swapped);
    run_shell("rm -rf " + d);
}

// NCCL_DEBUG=INFO: NCCL logs to stdout, which ranks other than 0 have silenced, so theirs go to a file of their own
// (NCCL_DEBUG_FILE=nccl_debug.%h.%p.log, set by the trainer when the user set none); rank 0 says where. The NCCL
// stand-in logs where NCCL does, and says "Init COMPLETE" at INFO as NCCL does.
TEST(DevicePerRank, NcclDebugOfEveryRankIsKept) {
    std::string d = tmpdir(), out;
    const std::string train = bin("train_gpt2") + DEVICE_ARGS + " --steps 1 --device cuda";
    ASSERT_EQ(run_shell("cd " + d + " && timeout 300 env " + mpirun_2() +
                            per_rank_env("NCCL_DEBUG=INFO", "NCCL_DEBUG=INFO", train),
                        &out),
              0) << out;
    EXPECT_NE(out.find("notice: NCCL_DEBUG is set: rank 0's NCCL messages follow here, the other ranks' go to "
                       "nccl_debug.<host>.<pid>.log"), std::string::npos) << out;
    EXPECT_NE(out.find("rank 0 nranks 2 - Init COMPLETE"), std::string::npos) << out;
    std::string files;
    run_shell("cd " + d + " && ls nccl_debug.*.log && cat nccl_debug.*.log", &files);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    EXPECT_NE(files.find("nccl_debug." + std::string(host) + "."), std::string::npos) << files;
    EXPECT_NE(files.find("rank 1 nranks 2 - Init COMPLETE"), std::string::npos) << files;
    EXPECT_EQ(files.find("rank 0 nranks 2"), std::string::npos) << "rank 0 logs to its output: " << files;
    run_shell("rm -rf " + d);
}

// A failed CUDA call on one rank (here rank 1's GPU faults before one of its waits) ends the whole job through
// MPI_Abort (fatal_exit_hook, common/error.h), after the NCCL communicator's abort: with a plain exit(), launchers
// that do not kill a job when one process exits (Slurm's srun by default) left the other ranks waiting in a
// collective until the time limit. mpirun kills them either way, so the test tells the two apart by the line the
// rank prints just before MPI_Abort (not mpirun's own message for it, which Open MPI 4.1 sometimes loses: "Data
// unpack had inadequate space").
TEST(DevicePerRank, AFailedCudaCallEndsEveryRank) {
    std::string out;
    int rc = run_shell("timeout 300 env PRAC_EMU_DEVICES=2 " + mpirun_2() +
                           per_rank_env("PRAC_EMU_FAULT_AT_WAIT=0", "PRAC_EMU_FAULT_AT_WAIT=8",
                                        bin("train_gpt2") + DEVICE_ARGS + " --device cuda"),
                       &out);
    EXPECT_EQ(rc == 0 || rc == 124, false) << out;
    EXPECT_NE(out.find("[CUDA ERROR]"), std::string::npos) << out;
    EXPECT_NE(out.find("an illegal memory access was encountered"), std::string::npos) << out;
    EXPECT_NE(out.find("rank 1: ending all 2 ranks of the job (MPI_Abort"), std::string::npos) << out;
}
#endif
#endif
