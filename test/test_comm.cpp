// Tests of train/comm.h. One binary for every launch (see test/mpi/CMakeLists.txt):
//   test_comm                      one process: NoComm
//   mpiexec -n N test_comm         MpiComm: every collective against exact and random expected values
//   PRAC_TEST_MPIEXEC="mpiexec -n 2 ..." test_comm --gtest_filter=*CommDeath.*
//                                  starts that launcher on this binary with PRAC_TEST_COMM_DIE=<mode>, in which
//                                  one rank fails before a collective, and checks the job ends non-zero, quickly
// Every rank runs the same tests in the same order and calls the same collectives, so checks inside tests are
// EXPECT_* (an ASSERT returning early on one rank would leave the others waiting in the next collective).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "train/comm.h"
#include "test/worst.h"  // worst_of

#if PRAC_HAVE_MPI
#include <mpi.h>  // MPI_Initialized: comm_create's before_mpi_init runs before MPI_Init
#endif

extern char** environ;

static Comm* g_comm = nullptr;
static Comm& C() { return *g_comm; }

// Lowers Comm::max_chunk for one scope, to run the chunked code paths on small buffers.
struct ChunkGuard {
    size_t old;
    explicit ChunkGuard(size_t c) : old(C().max_chunk) { C().max_chunk = c; }
    ~ChunkGuard() { C().max_chunk = old; }
};
static const size_t kChunks[] = {size_t(1) << 30, 7};  // the default (one MPI call) and many small calls

static const size_t kSizes[] = {0, 1, 2, 3, 5, 17, 1000, 1001, 4099};

// Values whose sums over up to ~8 ranks are exact in float: (rank + 1) * (i / 4 + 1).
static float exact_value(int r, size_t i) { return (float)(r + 1) * ((float)i * 0.25f + 1.0f); }
// Their mean over s ranks: (i / 4 + 1) * (s + 1) / 2, also exact.
static float exact_mean(int s, size_t i) { return ((float)i * 0.25f + 1.0f) * (float)(s + 1) / 2.0f; }

// Rank r's random values (any rank can replay any other rank's).
static std::vector<float> random_values(int r, size_t n, unsigned salt) {
    std::mt19937 rng(1000u * salt + (unsigned)r);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}
static std::vector<double> random_mean(int size, size_t n, unsigned salt) {
    std::vector<double> m(n, 0.0);
    for (int r = 0; r < size; r++) {
        std::vector<float> v = random_values(r, n, salt);
        for (size_t i = 0; i < n; i++) m[i] += v[i];
    }
    for (auto& x : m) x /= size;
    return m;
}

// True when buf is bitwise the same on every rank (compared with rank 0's copy).
static bool same_on_all_ranks(const std::vector<float>& buf) {
    std::vector<float> root = buf;
    C().broadcast(root.data(), root.size() * sizeof(float), 0);
    double diff = std::memcmp(root.data(), buf.data(), buf.size() * sizeof(float)) != 0;
    C().allreduce_sum(&diff, 1);
    return diff == 0;
}

// A Comm of any rank/size for the shard arithmetic (no communication).
struct FakeComm final : Comm {
    FakeComm(int r, int s) {
        rank_ = r;
        size_ = s;
    }
    void allreduce_avg(float*, size_t) override {}
    void allreduce_sum(double*, size_t) override {}
    void reduce_scatter_avg(float*, size_t) override {}
    void all_gather(float*, size_t) override {}
    void broadcast(void*, size_t, int) override {}
    void barrier() override {}
    const char* name() const override { return "fake"; }
};

// ---- shards ----------------------------------------------------------------------------------------------------

TEST(CommShards, CoverTheRangeWithTheRemainderOnTheFirstRanks) {
    std::vector<size_t> ns;
    for (size_t n = 0; n <= 40; n++) ns.push_back(n);
    ns.push_back(1000003);
    ns.push_back((size_t(1) << 33) + 5);  // past 32 bits
    for (int s = 1; s <= 8; s++) {
        FakeComm c(0, s);
        for (size_t n : ns) {
            EXPECT_EQ(c.shard_begin(n, 0), 0u) << "n=" << n << " size=" << s;
            EXPECT_EQ(c.shard_end(n, s - 1), n) << "n=" << n << " size=" << s;
            EXPECT_EQ(c.shard_begin(n, s), n);
            for (int r = 0; r < s; r++) {
                size_t want = n / s + ((size_t)r < n % s ? 1 : 0);
                EXPECT_EQ(c.shard_size(n, r), want) << "n=" << n << " size=" << s << " rank=" << r;
                if (r + 1 < s) {
                    EXPECT_EQ(c.shard_end(n, r), c.shard_begin(n, r + 1));
                }
            }
        }
    }
    FakeComm c(0, 3);
    EXPECT_EQ(c.shard_begin(10, 1), 4u);  // 10 = 4 + 3 + 3
    EXPECT_EQ(c.shard_end(10, 1), 7u);
    EXPECT_THROW(c.shard_end(10, 3), UserError);
    EXPECT_THROW(c.shard_begin(10, -1), UserError);
}

// ---- identity --------------------------------------------------------------------------------------------------

TEST(Comm, RanksAndSizeAgreeWithTheLauncher) {
    int announced = comm_launcher_size();
    if (announced == 0) {
        EXPECT_EQ(C().size(), 1);
        EXPECT_STREQ(C().name(), "none");
    } else {
#if PRAC_HAVE_MPI
        EXPECT_STREQ(C().name(), "mpi");
        if (announced > 0) {
            EXPECT_EQ(C().size(), announced);
        }
#endif
    }
    EXPECT_GE(C().rank(), 0);
    EXPECT_LT(C().rank(), C().size());
    EXPECT_GE(C().local_rank(), 0);
    EXPECT_LT(C().local_rank(), C().local_size());
    EXPECT_LE(C().local_size(), C().size());
    // every rank is a distinct member: a one-hot vector per rank sums to all ones
    std::vector<double> hot(C().size(), 0.0);
    hot[C().rank()] = 1.0;
    C().allreduce_sum(hot.data(), hot.size());
    for (int r = 0; r < C().size(); r++) EXPECT_EQ(hot[r], 1.0) << "rank " << r;
    C().barrier();
}

// ---- allreduce -------------------------------------------------------------------------------------------------

TEST(Comm, AllreduceAvgExact) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);
        for (size_t n : kSizes) {
            std::vector<float> buf(n);
            for (size_t i = 0; i < n; i++) buf[i] = exact_value(C().rank(), i);
            C().allreduce_avg(buf.data(), n);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += buf[i] != exact_mean(C().size(), i);
            EXPECT_EQ(bad, 0u) << "n=" << n << " chunk=" << chunk << " first: " << (n ? buf[0] : 0.f) << " vs "
                               << exact_mean(C().size(), 0);
        }
    }
}

TEST(Comm, AllreduceAvgRandomIsTheMeanAndIdenticalOnEveryRank) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);
        size_t n = 10007;
        std::vector<float> buf = random_values(C().rank(), n, 1);
        C().allreduce_avg(buf.data(), n);
        std::vector<double> want = random_mean(C().size(), n, 1);
        double worst = 0;
        for (size_t i = 0; i < n; i++) worst = worst_of(worst, std::fabs(buf[i] - want[i]));
        EXPECT_LT(worst, 1e-6) << "chunk=" << chunk;
        EXPECT_TRUE(same_on_all_ranks(buf));
    }
}

TEST(Comm, AllreduceSumDouble) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);
        for (size_t n : kSizes) {
            std::vector<double> buf(n);
            for (size_t i = 0; i < n; i++) buf[i] = C().rank() * 1e10 + (double)i * 0.5;
            C().allreduce_sum(buf.data(), n);
            int s = C().size();
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += buf[i] != s * (s - 1) / 2 * 1e10 + s * ((double)i * 0.5);
            EXPECT_EQ(bad, 0u) << "n=" << n << " chunk=" << chunk;
        }
    }
}

// ---- ZeRO-1: reduce-scatter and all-gather ---------------------------------------------------------------------

TEST(Comm, ReduceScatterAvgLeavesTheMeanOfTheOwnShard) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);
        for (size_t n : kSizes) {
            std::vector<float> buf(n);
            for (size_t i = 0; i < n; i++) buf[i] = exact_value(C().rank(), i);
            C().reduce_scatter_avg(buf.data(), n);
            size_t b = C().shard_begin(n, C().rank()), e = C().shard_end(n, C().rank()), bad = 0;
            for (size_t i = b; i < e; i++) bad += buf[i] != exact_mean(C().size(), i);
            EXPECT_EQ(bad, 0u) << "n=" << n << " chunk=" << chunk << " shard [" << b << ", " << e << ")";
        }
        size_t n = 10007;
        std::vector<float> buf = random_values(C().rank(), n, 2);
        C().reduce_scatter_avg(buf.data(), n);
        std::vector<double> want = random_mean(C().size(), n, 2);
        double worst = 0;
        for (size_t i = C().shard_begin(n, C().rank()); i < C().shard_end(n, C().rank()); i++)
            worst = worst_of(worst, std::fabs(buf[i] - want[i]));
        EXPECT_LT(worst, 1e-6) << "chunk=" << chunk;
    }
}

TEST(Comm, AllGatherGivesEveryRankEveryShard) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);
        for (size_t n : kSizes) {
            std::vector<float> buf(n, std::numeric_limits<float>::quiet_NaN());  // not ours: garbage
            for (size_t i = C().shard_begin(n, C().rank()); i < C().shard_end(n, C().rank()); i++)
                buf[i] = (float)i * 0.5f + 3.0f;
            C().all_gather(buf.data(), n);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += buf[i] != (float)i * 0.5f + 3.0f;
            EXPECT_EQ(bad, 0u) << "n=" << n << " chunk=" << chunk;
        }
    }
}

TEST(Comm, ReduceScatterThenAllGatherEqualsAllreduce) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);
        for (size_t n : {size_t(1), size_t(1001), size_t(10007)}) {
            // exact values: identical results
            std::vector<float> a(n), b(n);
            for (size_t i = 0; i < n; i++) a[i] = b[i] = exact_value(C().rank(), i);
            C().allreduce_avg(a.data(), n);
            C().reduce_scatter_avg(b.data(), n);
            C().all_gather(b.data(), n);
            EXPECT_EQ(std::memcmp(a.data(), b.data(), n * sizeof(float)), 0) << "n=" << n << " chunk=" << chunk;
            // random values: the same up to the summation order
            a = random_values(C().rank(), n, 3);
            b = a;
            C().allreduce_avg(a.data(), n);
            C().reduce_scatter_avg(b.data(), n);
            C().all_gather(b.data(), n);
            double worst = 0;
            for (size_t i = 0; i < n; i++) worst = worst_of(worst, (double)std::fabs(a[i] - b[i]));
            EXPECT_LT(worst, 1e-6) << "n=" << n << " chunk=" << chunk;
            EXPECT_TRUE(same_on_all_ranks(b));
        }
    }
}

// ---- broadcast, barrier ----------------------------------------------------------------------------------------

TEST(Comm, BroadcastFromEveryRoot) {
    for (size_t chunk : kChunks) {
        ChunkGuard g(chunk);  // chunk 7 = 28 bytes per call
        for (int root = 0; root < C().size(); root++) {
            for (size_t bytes : {size_t(0), size_t(1), size_t(29), size_t(1001)}) {
                std::vector<unsigned char> buf(bytes, 0xEE);
                if (C().rank() == root)
                    for (size_t i = 0; i < bytes; i++) buf[i] = (unsigned char)(i * 7 + root);
                C().broadcast(buf.data(), bytes, root);
                size_t bad = 0;
                for (size_t i = 0; i < bytes; i++) bad += buf[i] != (unsigned char)(i * 7 + root);
                EXPECT_EQ(bad, 0u) << "root=" << root << " bytes=" << bytes << " chunk=" << chunk;
            }
        }
    }
    int x = 0;
    EXPECT_THROW(C().broadcast(&x, sizeof x, C().size()), UserError);  // checked before any MPI call
    EXPECT_THROW(C().broadcast(&x, sizeof x, -1), UserError);
    C().barrier();
}

// ---- launcher detection, no-MPI builds, comm_abort -------------------------------------------------------------

// Sets (value != nullptr) or unsets environment variables for one scope.
struct EnvGuard {
    std::vector<std::pair<std::string, std::unique_ptr<std::string>>> saved;
    void set(const char* name, const char* value) {
        const char* old = std::getenv(name);
        saved.emplace_back(name, old ? std::make_unique<std::string>(old) : nullptr);
        if (value)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~EnvGuard() {
        for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
            if (it->second)
                setenv(it->first.c_str(), it->second->c_str(), 1);
            else
                unsetenv(it->first.c_str());
        }
    }
};

TEST(CommLaunch, LauncherSizeFromTheEnvironment) {
    EnvGuard env;
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) env.set(v, nullptr);
    EXPECT_EQ(comm_launcher_size(), 0);
    env.set("PMIX_RANK", "0");
    EXPECT_EQ(comm_launcher_size(), -1);  // a launcher, size unknown
    env.set("PMI_SIZE", "3");
    EXPECT_EQ(comm_launcher_size(), 3);
    env.set("OMPI_COMM_WORLD_SIZE", "4");
    EXPECT_EQ(comm_launcher_size(), 4);
    env.set("OMPI_COMM_WORLD_SIZE", "four");
    EXPECT_EQ(comm_launcher_size(), -1);
}

TEST(CommLaunch, LocalRankFromTheEnvironment) {
    EnvGuard env;
    const char* vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                          "PMI_LOCAL_RANK", "SLURM_LOCALID"};
    for (const char* v : vars) env.set(v, nullptr);
    std::string from = "untouched";
    EXPECT_EQ(comm_launcher_local_rank(&from), -1);
    EXPECT_EQ(from, "untouched");
    // each variable alone, then all of them: the first in this order wins (SLURM_LOCALID last: an mpirun inside a
    // Slurm allocation passes its own daemon's value to every rank)
    for (int i = 4; i >= 0; i--) {
        EnvGuard one;
        one.set(vars[i], std::to_string(i + 1).c_str());
        EXPECT_EQ(comm_launcher_local_rank(&from), i + 1) << vars[i];
        EXPECT_EQ(from, std::string(vars[i]) + "=" + std::to_string(i + 1));
    }
    for (int i = 4; i >= 0; i--) env.set(vars[i], std::to_string(i + 1).c_str());
    EXPECT_EQ(comm_launcher_local_rank(&from), 1);
    EXPECT_EQ(from, "OMPI_COMM_WORLD_LOCAL_RANK=1");
    env.set("OMPI_COMM_WORLD_LOCAL_RANK", "one");  // not a number: unknown, MPI decides after MPI_Init
    EXPECT_EQ(comm_launcher_local_rank(), -1);
}

// comm_create's before_mpi_init ran (main below) exactly when MPI_Init ran, and before it: the trainers choose their
// GPU there, because an MPI library may open a CUDA context on the current GPU inside MPI_Init (launch.h).
static int g_before_mpi_init_calls = 0;
static bool g_mpi_up_before_init = false;
TEST(CommLaunch, BeforeMpiInitRunsBeforeMpiInit) {
    const bool mpi = PRAC_HAVE_MPI && comm_launcher_size() != 0;
    EXPECT_EQ(g_before_mpi_init_calls, mpi ? 1 : 0);
    EXPECT_FALSE(g_mpi_up_before_init);
}

TEST(CommLaunch, BuildWithoutMpiRefusesSeveralRanks) {
#if PRAC_HAVE_MPI
    GTEST_SKIP() << "this build has MPI";
#else
    EnvGuard env;
    env.set("OMPI_COMM_WORLD_SIZE", "2");
    env.set("OMPI_COMM_WORLD_RANK", "1");
    try {
        comm_create(nullptr, nullptr);
        ADD_FAILURE() << "comm_create did not fail";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("this build has no MPI"), std::string::npos) << e.what();
    }
    env.set("OMPI_COMM_WORLD_SIZE", "1");
    EXPECT_STREQ(comm_create(nullptr, nullptr)->name(), "none");  // mpirun -n 1: harmless
#endif
}

TEST(CommLaunch, CommAbortExitsWithTheCode) {
    if (comm_launcher_size() != 0) GTEST_SKIP() << "forks: single-process runs only";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            auto c = comm_create(nullptr, nullptr);
            std::printf("about to abort\n");
            comm_abort(*c, 5);
        },
        ::testing::ExitedWithCode(5), "");
}

// ---- a rank dies: the job must end, not hang -------------------------------------------------------------------

// PRAC_TEST_COMM_DIE=<mode> under the launcher: the last rank fails (after the others entered a collective).
//   none   nobody fails (the control: exit 0, every rank prints "survived")
//   exit   std::exit(1) without MPI_Finalize
//   throw  a UserError thrown through the Comm's scope, printed by main's catch, return 1
//   abort  comm_abort(comm, 3)
static int death_mode(const std::string& mode, int argc, char** argv) {
    try {
        std::unique_ptr<Comm> comm = comm_create(&argc, &argv);
        if (comm->size() < 2) {
            std::fprintf(stderr, "death mode needs at least 2 ranks\n");
            return 3;
        }
        int victim = comm->size() - 1;
        if (comm->rank() == victim && mode != "none") {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the others block first
            std::fprintf(stderr, "rank %d: failing on purpose (%s)\n", comm->rank(), mode.c_str());
            std::fflush(stderr);
            if (mode == "exit") std::exit(1);
            if (mode == "throw") fail("injected error on rank %d", comm->rank());
            if (mode == "abort") comm_abort(*comm, 3);
            std::fprintf(stderr, "unknown PRAC_TEST_COMM_DIE mode '%s'\n", mode.c_str());
            return 4;
        }
        float x = 1;
        comm->allreduce_avg(&x, 1);
        comm->barrier();
        std::printf("rank %d: survived the collective\n", comm->rank());
        return 0;
    } catch (const UserError& e) {
        std::fprintf(stderr, "test_comm: error: %s\n", e.what());
        return 1;
    }
}

struct LaunchResult {
    bool timed_out = false;
    int status = 0;  // waitpid status
    double seconds = 0;
    std::string output;  // stdout and stderr together
};

// Runs argv with extra environment variables, its stdout+stderr captured, killing its process group after
// limit_s seconds.
static LaunchResult launch(const std::vector<std::string>& args, const std::vector<std::string>& extra_env,
                           double limit_s) {
    std::vector<std::string> env_strings(extra_env);
    for (char** e = environ; *e; e++) env_strings.push_back(*e);
    std::vector<char*> envp, argvp;
    for (auto& s : env_strings) envp.push_back(&s[0]);
    envp.push_back(nullptr);
    std::vector<std::string> a(args);
    for (auto& s : a) argvp.push_back(&s[0]);
    argvp.push_back(nullptr);

    LaunchResult res;
    int fds[2];
    if (pipe(fds) != 0) {
        res.output = "pipe failed";
        return res;
    }
    auto t0 = std::chrono::steady_clock::now();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execve(argvp[0], argvp.data(), envp.data());
        _exit(127);
    }
    setpgid(pid, pid);
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    auto drain = [&] {
        char chunk[4096];
        ssize_t k;
        while ((k = read(fds[0], chunk, sizeof chunk)) > 0) res.output.append(chunk, (size_t)k);
    };
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        poll(&p, 1, 50);
        drain();
        siginfo_t info{};
        // WNOWAIT: leave it a zombie, so its process group id stays reserved for the kill below
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) break;
        res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (res.seconds > limit_s) {
            res.timed_out = true;
            break;
        }
    }
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    kill(-pid, SIGKILL);  // the launcher and anything it left behind
    waitpid(pid, &res.status, 0);
    drain();
    close(fds[0]);
    return res;
}

static std::vector<std::string> split_spaces(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> v;
    std::string w;
    while (in >> w) v.push_back(w);
    return v;
}

class CommDeath : public ::testing::TestWithParam<const char*> {};

TEST_P(CommDeath, JobEndsInsteadOfHanging) {
    const char* launcher = std::getenv("PRAC_TEST_MPIEXEC");
    if (!launcher || !*launcher) GTEST_SKIP() << "set PRAC_TEST_MPIEXEC (ctest mpi.comm_rank_dies does)";
    if (comm_launcher_size() != 0) GTEST_SKIP() << "the driver runs as a single process";
    std::string mode = GetParam();
    std::vector<std::string> args = split_spaces(launcher);
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(k, 0);
    self[k] = 0;
    args.push_back(self);
    const double limit = 25;
    LaunchResult r = launch(args, {"PRAC_TEST_COMM_DIE=" + mode}, limit);
    std::string desc = "mode " + mode + ", " + std::to_string(r.seconds) + " s, output:\n" + r.output;
    ASSERT_FALSE(r.timed_out) << "the job still ran after " << limit << " s: a hang; " << desc;
    if (mode == "none") {
        EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << desc;
        EXPECT_NE(r.output.find("rank 1: survived the collective"), std::string::npos) << desc;
        return;
    }
    EXPECT_FALSE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << "the launcher exited 0; " << desc;
    EXPECT_NE(r.output.find("failing on purpose (" + mode + ")"), std::string::npos) << desc;
    EXPECT_EQ(r.output.find("survived the collective"), std::string::npos) << desc;
    if (mode == "throw") {
        EXPECT_NE(r.output.find("error: injected error on rank 1"), std::string::npos) << desc;
    }
    std::printf("[mode %s] launcher exit status %d after %.1f s\n", mode.c_str(),
                WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1, r.seconds);
}

INSTANTIATE_TEST_SUITE_P(Modes, CommDeath, ::testing::Values("none", "exit", "throw", "abort"));

// ---- main ------------------------------------------------------------------------------------------------------

// On ranks other than 0: no report, only failures, prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
    int rank_;

  public:
    explicit RankFailurePrinter(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (r.failed())
            std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                         r.line_number(), r.summary());
    }
};

int main(int argc, char** argv) {
    if (const char* mode = std::getenv("PRAC_TEST_COMM_DIE")) return death_mode(mode, argc, argv);
    std::unique_ptr<Comm> comm;
    try {
        comm = comm_create(&argc, &argv, [] {
            g_before_mpi_init_calls++;
#if PRAC_HAVE_MPI
            int up = 0;
            MPI_Initialized(&up);
            g_mpi_up_before_init = up != 0;
#endif
        });
    } catch (const UserError& e) {
        std::fprintf(stderr, "test_comm: error: %s\n", e.what());
        return 1;
    }
    g_comm = comm.get();
    ::testing::InitGoogleTest(&argc, argv);
    if (comm->rank() != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new RankFailurePrinter(comm->rank()));
    }
    int rc = RUN_ALL_TESTS();
    const char* launcher = std::getenv("PRAC_TEST_MPIEXEC");
    if (launcher && *launcher && ::testing::UnitTest::GetInstance()->successful_test_count() == 0) {
        std::fprintf(stderr, "test_comm: PRAC_TEST_MPIEXEC is set but no test ran (check --gtest_filter)\n");
        rc = 1;
    }
    double failed = rc != 0;
    comm->allreduce_sum(&failed, 1);  // every rank exits non-zero when any rank failed
    if (comm->rank() == 0 && failed > 0 && rc == 0)
        std::fprintf(stderr, "%.0f other rank(s) failed (see the [rank N] lines)\n", failed);
    comm.reset();  // MPI_Finalize
    return failed > 0 ? 1 : 0;
}
