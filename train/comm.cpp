// NoComm and MpiComm (host buffers); see comm.h for the contract.
#include "train/comm.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include "common/error.h"

#if PRAC_HAVE_MPI
#define OMPI_SKIP_MPICXX 1   // the C API only: no deprecated C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

// ---- Comm ------------------------------------------------------------------------------------------------------

Comm::~Comm() = default;

size_t Comm::shard_begin(size_t n, int r) const {
    if (r < 0 || r > size_) fail("Comm::shard_begin: rank %d out of [0, %d]", r, size_);
    return zero_shard_begin(n, r, size_);
}

size_t Comm::shard_end(size_t n, int r) const {
    if (r < 0 || r >= size_) fail("Comm::shard_end: rank %d out of [0, %d)", r, size_);
    return shard_begin(n, r + 1);
}

void Comm::abort_job(int code) { std::exit(code); }

void broadcast_string(Comm& comm, std::string& s, int root) {
    uint64_t bytes = s.size();
    comm.broadcast(&bytes, sizeof bytes, root);
    s.resize(bytes);
    if (bytes > 0) comm.broadcast(s.data(), bytes, root);
}

std::vector<std::string> all_gather_string(Comm& comm, const std::string& s) {
    std::vector<std::string> all(comm.size());
    for (int r = 0; r < comm.size(); r++) {
        if (r == comm.rank()) all[r] = s;
        broadcast_string(comm, all[r], r);
    }
    return all;
}

static Comm* fatal_exit_comm = nullptr;  // fatal_exit_hook's target
void Comm::install_as_fatal_exit() {
    fatal_before_ = fatal_exit_comm;
    fatal_exit_comm = this;
    fatal_exit_hook = [](int code) {
        static bool once = false;  // a failed CUDA call inside the abort itself ends the process plainly
        if (once || !fatal_exit_comm) return;
        once = true;
        comm_abort(*fatal_exit_comm, code);
    };
}
void Comm::uninstall_as_fatal_exit() {
    if (fatal_exit_comm != this) return;
    fatal_exit_comm = fatal_before_;
    if (!fatal_exit_comm) fatal_exit_hook = nullptr;
}

void comm_abort(Comm& comm, int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    comm.abort_job(code);
    std::_Exit(code);  // not reached (abort_job never returns); keeps [[noreturn]] provable
}

// ---- environment -----------------------------------------------------------------------------------------------

// The integer value of environment variable `name`: 0 when unset, -1 when set but not a positive integer.
static long env_int(const char* name, bool* set) {
    const char* s = std::getenv(name);
    *set = s != nullptr;
    if (!s) return 0;
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < 0 || v > INT_MAX) return -1;
    return v;
}

int comm_launcher_size() {
    bool set = false;
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
        long v = env_int(var, &set);
        if (set) return v > 0 ? (int)v : -1;
    }
    if (std::getenv("PMIX_RANK")) return -1;
    return 0;
}

int comm_launcher_local_rank(std::string* from) {
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                            "PMI_LOCAL_RANK", "SLURM_LOCALID"}) {
        bool set = false;
        long v = env_int(var, &set);
        if (!set) continue;
        if (v < 0) return -1;  // not a number: let MPI say (the rank's node comm after MPI_Init)
        if (from) *from = format("%s=%ld", var, v);
        return (int)v;
    }
    return -1;
}

int comm_launcher_rank() {
    bool set = false;
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
        long v = env_int(var, &set);
        if (set) return (int)v;
    }
    return -1;
}

// ---- NoComm ----------------------------------------------------------------------------------------------------

namespace {

struct NoComm final : Comm {
    void allreduce_avg(float*, size_t) override {}
    void allreduce_sum(double*, size_t) override {}
    void reduce_scatter_avg(float*, size_t) override {}  // one shard: the whole buffer, its own mean
    void all_gather(float*, size_t) override {}
    void broadcast(void*, size_t, int root) override {
        if (root != 0) fail("Comm::broadcast: root %d out of [0, 1)", root);
    }
    void barrier() override {}
    const char* name() const override { return "none"; }
};

// ---- MpiComm ---------------------------------------------------------------------------------------------------

#if PRAC_HAVE_MPI

// Divides buf[0..n) by k (exactly rounded; a multiplication when k is a power of two, where it is exact too).
static void divide_by(float* buf, size_t n, int k) {
    if (k == 1) return;
    if ((k & (k - 1)) == 0) {
        float inv = 1.0f / (float)k;
#pragma omp parallel for simd if (n > (1u << 18))
        for (size_t i = 0; i < n; i++) buf[i] *= inv;
    } else {
        float d = (float)k;
#pragma omp parallel for simd if (n > (1u << 18))
        for (size_t i = 0; i < n; i++) buf[i] /= d;
    }
}

struct MpiComm final : Comm {
    bool owns_init = false;  // this object called MPI_Init_thread, so its destructor finalizes

    MpiComm(int* argc, char*** argv, int announced, const std::function<void()>& before_mpi_init) {
        int finalized = 0, initialized = 0;
        MPI_Finalized(&finalized);
        if (finalized) fail("comm_create: MPI was already finalized in this process (create one Comm per process)");
        MPI_Initialized(&initialized);
        if (!initialized) {
            if (before_mpi_init) before_mpi_init();
            int provided = 0;
            // FUNNELED: OpenMP threads exist, but only the thread that created the Comm calls MPI.
            MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
            owns_init = true;
        }
        // A failed MPI call ends the whole job with a message rather than returning an error code.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local_rank_);
        MPI_Comm_size(node, &local_size_);
        MPI_Comm_free(&node);
        if (announced > 0 && announced != size_) {
            // e.g. MPICH's mpiexec starting a binary built against Open MPI: each process comes up alone
            fail("the MPI launcher started %d ranks, but MPI_COMM_WORLD of this process has %d: the launcher "
                 "(mpirun/mpiexec) belongs to another MPI than the one this binary was built with, so every rank "
                 "would train alone\n---> HINT: use the mpirun of the MPI found at configure time (the 'MPI' "
                 "line of cmake's dependency report)", announced, size_);
        }
        if (size_ > 1) install_as_fatal_exit();
    }

    ~MpiComm() override {
        uninstall_as_fatal_exit();
        if (!owns_init) return;
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized) return;
        // During stack unwinding (an error on this rank) the other ranks may be blocked in a collective, and
        // MPI_Finalize would then wait for them forever. Leaving MPI unfinalized makes the process exit look
        // abnormal to mpirun, which then ends every rank.
        if (size_ > 1 && std::uncaught_exceptions() > 0) return;
        MPI_Finalize();
    }

    // Calls f(offset, count) over [0, n) in pieces of at most max_chunk (and INT_MAX) elements.
    template <class F>
    void chunks(size_t n, size_t elem_limit, F f) const {
        size_t step = std::max<size_t>(1, std::min<size_t>(elem_limit, (size_t)INT_MAX));
        for (size_t off = 0; off < n; off += step) f(off, (int)std::min(step, n - off));
    }

    void allreduce_avg(float* buf, size_t n) override {
        chunks(n, max_chunk, [&](size_t off, int c) {
            MPI_Allreduce(MPI_IN_PLACE, buf + off, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        });
        divide_by(buf, n, size_);
    }

    void allreduce_sum(double* buf, size_t n) override {
        chunks(n, max_chunk, [&](size_t off, int c) {
            MPI_Allreduce(MPI_IN_PLACE, buf + off, c, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        });
    }

    // Counts per rank as ints, or false when n is too large for one MPI call.
    bool int_counts(size_t n, std::vector<int>* counts, std::vector<int>* displs) const {
        if (n > max_chunk || n > (size_t)INT_MAX) return false;
        counts->resize(size_);
        displs->resize(size_);
        for (int r = 0; r < size_; r++) {
            (*displs)[r] = (int)shard_begin(n, r);
            (*counts)[r] = (int)shard_size(n, r);
        }
        return true;
    }

    void reduce_scatter_avg(float* buf, size_t n) override {
        if (n == 0) return;
        size_t b = shard_begin(n, rank_), cnt = shard_size(n, rank_);
        std::vector<int> counts, displs;
        if (int_counts(n, &counts, &displs)) {
            // In place, the input is the whole of buf and the result lands at buf[0 .. counts[rank]).
            MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (b != 0 && cnt) std::memmove(buf + b, buf, cnt * sizeof(float));
        } else {
            // Large buffers: one reduction per owner, in pieces (byte offsets never pass through an int).
            for (int r = 0; r < size_; r++) {
                size_t rb = shard_begin(n, r);
                chunks(shard_size(n, r), max_chunk, [&](size_t off, int c) {
                    float* p = buf + rb + off;
                    MPI_Reduce(r == rank_ ? MPI_IN_PLACE : p, p, c, MPI_FLOAT, MPI_SUM, r, MPI_COMM_WORLD);
                });
            }
        }
        divide_by(buf + b, cnt, size_);
    }

    void all_gather(float* buf, size_t n) override {
        if (n == 0) return;
        std::vector<int> counts, displs;
        if (int_counts(n, &counts, &displs)) {
            MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts.data(), displs.data(), MPI_FLOAT,
                           MPI_COMM_WORLD);
        } else {
            for (int r = 0; r < size_; r++) {
                size_t rb = shard_begin(n, r);
                chunks(shard_size(n, r), max_chunk, [&](size_t off, int c) {
                    MPI_Bcast(buf + rb + off, c, MPI_FLOAT, r, MPI_COMM_WORLD);
                });
            }
        }
    }

    void broadcast(void* buf, size_t bytes, int root) override {
        if (root < 0 || root >= size_) fail("Comm::broadcast: root %d out of [0, %d)", root, size_);
        size_t limit = max_chunk > (size_t)INT_MAX / sizeof(float) ? (size_t)INT_MAX : max_chunk * sizeof(float);
        chunks(bytes, limit, [&](size_t off, int c) {
            MPI_Bcast((char*)buf + off, c, MPI_BYTE, root, MPI_COMM_WORLD);
        });
    }

    void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

    const char* name() const override { return "mpi"; }

    [[noreturn]] void abort_job(int code) override {
        if (size_ > 1) {
            // said here: the launcher's own message may not come (Open MPI 4.1 loses it at times: "Data unpack had
            // inadequate space"), and srun's does not name the rank
            std::fprintf(stderr, "rank %d: ending all %d ranks of the job (MPI_Abort, exit code %d)\n", rank_, size_,
                         code);
            std::fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, code);  // kills every rank of the job
        } else if (owns_init) {
            int finalized = 0;
            MPI_Finalized(&finalized);
            if (!finalized) MPI_Finalize();  // alone: nobody to wait for, end cleanly
        }
        std::exit(code);
    }
};

#endif  // PRAC_HAVE_MPI

}  // namespace

// ---- factory ---------------------------------------------------------------------------------------------------

std::unique_ptr<Comm> comm_create(int* argc, char*** argv, const std::function<void()>& before_mpi_init) {
    int announced = comm_launcher_size();
#if PRAC_HAVE_MPI
    if (announced != 0) return std::unique_ptr<Comm>(new MpiComm(argc, argv, announced, before_mpi_init));
#else
    (void)argc;
    (void)argv;
    (void)before_mpi_init;
    int r = comm_launcher_rank();
    if (announced > 1 || (announced < 0 && r > 0))
        fail("this process was started by an MPI launcher (rank %d of %s), but this build has no MPI: every rank "
             "would train alone on the same data\n---> HINT: install MPI (apt-get install libopenmpi-dev "
             "openmpi-bin), reconfigure and rebuild (cmake's dependency report must show '✓ MPI'), or run a "
             "single process without mpirun", r,
             announced > 1 ? format("%d", announced).c_str() : "several");
#endif
    return std::unique_ptr<Comm>(new NoComm());
}
