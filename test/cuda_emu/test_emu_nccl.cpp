// Tests of the emulated NCCL (kernels/cuda_emu/nccl_emu.cpp). One binary for every launch:
//   test_emu_nccl                    one process: a one-rank communicator (and the checks that need no MPI job)
//   mpirun -np N test_emu_nccl       N ranks, one MPI process each: main calls MPI_Init, makes the unique id on
//                                    rank 0, MPI_Bcast's it and calls ncclCommInitRank (as train/comm_nccl.cu does)
//   NCCL_EMU_TEST_MPIEXEC="mpirun -np 2 ..." test_emu_nccl --gtest_filter='*RankDies*'
//                                    (one process) starts that launcher on this binary with NCCL_EMU_TEST_DIE=<mode>,
//                                    where one rank fails while the others wait in a collective, and checks that the
//                                    job ends, non-zero, instead of hanging
// Only rank 0 prints gtest's report; the other ranks print their failures prefixed with "[rank R]"; every rank exits
// non-zero when any rank failed. Every rank runs the same tests in the same order and issues the same collectives,
// so the checks are EXPECT_* (an ASSERT returning early on one rank would leave the others in the next collective).
//
// Expected values are exact and hand-computable: in fp32, rank r contributes r*100 + i at element i (every sum and
// average over a few ranks is an exact integer); in bf16, (r + 1) * (i % 32 + 1) (sums and averages exact in
// bf16's 8 significant bits). One test checks bf16's rounding (fp32 sum, rounded once, to nearest even) against a
// reference written independently of the stand-in's bit manipulation. No result is compared with real NCCL: its
// summation order and rounding are unspecified (see the top of nccl_emu.cpp).
//
// The tests catch a broken stand-in. Tried once by hand (on a copy of nccl_emu.cpp): changing ncclReduceScatter's
// in-place form to `recvbuff == sendbuff + (rank + 1) * recvcount` (a wrong in-place offset) makes
// ReduceScatter.InPlaceAndOutOfPlace, Chunked.EveryCollectiveWithTinyMpiMessages and
// InvalidArguments.OverlapThatIsNotInPlace fail under np 1, 2 and 3 (the documented in-place call is refused as an
// overlap, the wrong offset accepted); making the all-to-all pack block 0 for every destination
// (`(0 * recvcount + o)` for `(j * recvcount + o)`) leaves rank 0 passing and fails the ReduceScatter checks on
// ranks 1 and 2 under np 2 and 3 ("element 0 is 100, expected 102"), and every rank exits 1. With the stand-in
// restored everything passes.
#include <gtest/gtest.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda_emu/libs_emu.h"  // cuda_emu::set_host_memory_check

#if defined(PRAC_HAVE_MPI)
#if PRAC_HAVE_MPI
#define TEST_MPI 1
#else
#define TEST_MPI 0
#endif
#elif defined(__has_include)
#if __has_include(<mpi.h>)
#define TEST_MPI 1
#else
#define TEST_MPI 0
#endif
#else
#define TEST_MPI 0
#endif

#if TEST_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

// The collectives here are given host vectors, which a GPU's could not reach: the operand check is off
// (kernels/cuda_emu/libs_emu.h).
[[maybe_unused]] static const bool g_check_was_on = cuda_emu::set_host_memory_check(false);

static ncclComm_t g_comm = nullptr;  // the tests' communicator: every process of the job
static int g_rank = 0, g_size = 1;   // this rank, the number of ranks
static bool g_mpi = false;           // started by an MPI launcher (MPI initialized)

static std::string last_error() {
    const char* e = ncclGetLastError(nullptr);
    return e ? e : "";
}
static bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// ---- MPI helpers (no-ops for one process) ----------------------------------------------------------------------

static void bcast_bytes(void* p, size_t bytes, int root) {
#if TEST_MPI
    if (g_mpi) MPI_Bcast(p, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
#else
    (void)p, (void)bytes, (void)root;
#endif
}
static bool all_ranks(bool ok) {  // true when ok on every rank
#if TEST_MPI
    if (g_mpi) {
        int v = ok ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        return v == 1;
    }
#endif
    return ok;
}
static ncclUniqueId shared_id() {  // made on rank 0, broadcast (the project's recipe)
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (g_rank == 0) {
        EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    }
    bcast_bytes(&id, sizeof id, 0);
    return id;
}
static ncclComm_t new_comm() {  // another communicator over every rank (collective)
    ncclComm_t c = nullptr;
    EXPECT_EQ(ncclCommInitRank(&c, g_size, shared_id(), g_rank), ncclSuccess) << last_error();
    return c;
}

// ---- element types and the values of the tests ----------------------------------------------------------------

static double bf16_round_ref(double x) {  // nearest bf16 (8 significant bits), ties to even, for normal x > 0
    int e = 0;
    std::frexp(x, &e);                        // x = m * 2^e, 0.5 <= m < 1
    double spacing = std::ldexp(1.0, e - 8);  // 8 significant bits
    return std::nearbyint(x / spacing) * spacing;  // default rounding mode: ties to even
}

struct F32 {
    using T = float;
    static constexpr ncclDataType_t type = ncclFloat32;
    static const char* name() { return "fp32"; }
    static T enc(double v) { return (float)v; }
    static double dec(T x) { return x; }
    static float round(float v) { return v; }  // to the type
    static double val(int r, size_t i) { return r * 100.0 + (double)i; }  // exact below 2^24
};
struct BF16 {
    using T = uint16_t;
    static constexpr ncclDataType_t type = ncclBfloat16;
    static const char* name() { return "bf16"; }
    static T enc(double v) {  // only for values exact in bf16 (checked)
        float f = (float)v;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        EXPECT_EQ(bits & 0xffffu, 0u) << v << " is not exact in bf16";
        return (T)(bits >> 16);
    }
    static double dec(T x) {
        uint32_t bits = (uint32_t)x << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
    static float round(float v) { return (float)bf16_round_ref(v); }  // to the type (the tests' values: > 0)
    static double val(int r, size_t i) { return (double)(r + 1) * (double)(i % 32 + 1); }
};

// The reduction over the ranks of E::val(r, i), in closed form (exact for the tests' values and rank counts), and
// ncclAvg as NCCL computes it for floating types (its enqueue code makes it a pre-multiplied sum): each contribution
// times 1/ranks rounded to the type, each product rounded to it, summed in fp32 (bf16: the emulation's one rounding
// of the sum); with 1, 2 or 4 ranks the scalar is exact and this is the sum / ranks.
template <class E>
static double expected(ncclRedOp_t op, size_t i) {
    double sum = 0, mx = E::val(0, i), mn = E::val(0, i);
    for (int r = 0; r < g_size; r++) {
        sum += E::val(r, i);
        mx = std::max(mx, E::val(r, i));
        mn = std::min(mn, E::val(r, i));
    }
    switch (op) {
        case ncclSum: return sum;
        case ncclAvg: {
            const float scale = E::round((float)(1.0 / g_size));
            float acc = 0;
            for (int r = 0; r < g_size; r++) acc += E::round((float)E::val(r, i) * scale);
            return E::round(acc);
        }
        case ncclMax: return mx;
        case ncclMin: return mn;
        default: return NAN;
    }
}

template <class E>
static std::vector<typename E::T> values(int r, size_t n, size_t first = 0) {
    std::vector<typename E::T> v(n);
    for (size_t i = 0; i < n; i++) v[i] = E::enc(E::val(r, first + i));
    return v;
}

static const size_t kCounts[] = {1, 7, 1000};
static const double kSentinel = -3.0;  // never a result: the tests' values are >= 0

// Counts the elements of got[0..n) that differ from want(i); reports the first few.
template <class E, class F>
static size_t mismatches(const typename E::T* got, size_t n, F want, const std::string& what) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double w = want(i), g = E::dec(got[i]);
        if (g != w && bad++ < 3) ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
    }
    return bad;
}

// ---- basics ----------------------------------------------------------------------------------------------------

TEST(Basics, VersionAndErrorStrings) {
    int v = 0;
    EXPECT_EQ(ncclGetVersion(&v), ncclSuccess);
    EXPECT_EQ(v, NCCL_VERSION_CODE);
    EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
    EXPECT_TRUE(contains(last_error(), "ncclGetVersion")) << last_error();
    std::vector<std::string> seen;
    for (int r = ncclSuccess; r < ncclNumResults; r++) {
        const char* s = ncclGetErrorString((ncclResult_t)r);
        ASSERT_NE(s, nullptr);
        EXPECT_GT(std::strlen(s), 0u);
        for (const std::string& o : seen) EXPECT_NE(o, s) << "two codes share a message";
        seen.push_back(s);
    }
}

TEST(Basics, CommunicatorQueries) {
    int n = 0, r = -1;
    EXPECT_EQ(ncclCommCount(g_comm, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(g_comm, &r), ncclSuccess);
    EXPECT_EQ(n, g_size);
    EXPECT_EQ(r, g_rank);
    ncclResult_t async = ncclInternalError;
    EXPECT_EQ(ncclCommGetAsyncError(g_comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
}

// ---- AllReduce -------------------------------------------------------------------------------------------------

template <class E>
static void allreduce_case(ncclComm_t comm, size_t n, ncclRedOp_t op, bool in_place) {
    std::string what = std::string("AllReduce ") + E::name() + " count " + std::to_string(n) + " op " +
                       std::to_string((int)op) + (in_place ? " in place" : " out of place");
    std::vector<typename E::T> send = values<E>(g_rank, n), recv(n, E::enc(kSentinel));
    const std::vector<typename E::T> orig = send;
    ncclResult_t r = in_place ? ncclAllReduce(send.data(), send.data(), n, E::type, op, comm, nullptr)
                              : ncclAllReduce(send.data(), recv.data(), n, E::type, op, comm, nullptr);
    EXPECT_EQ(r, ncclSuccess) << what << ": " << last_error();
    const auto& out = in_place ? send : recv;
    EXPECT_EQ((mismatches<E>(out.data(), n, [&](size_t i) { return expected<E>(op, i); }, what)), 0u);
    if (!in_place) {
        EXPECT_EQ(send, orig) << what << ": sendbuff changed";
    }
}

TEST(AllReduce, Fp32SumAvgMaxMin) {
    for (size_t n : kCounts)
        for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclMax, ncclMin})
            for (bool ip : {false, true}) allreduce_case<F32>(g_comm, n, op, ip);
}

TEST(AllReduce, Bf16SumAvg) {
    for (size_t n : kCounts)
        for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclMax})
            for (bool ip : {false, true}) allreduce_case<BF16>(g_comm, n, op, ip);
}

TEST(AllReduce, LargeCountFp32) {
    allreduce_case<F32>(g_comm, 1000003, ncclSum, true);
    allreduce_case<F32>(g_comm, 1000003, ncclAvg, false);
}

TEST(AllReduce, OtherTypes) {
    // int32: sums of r*100 + i; int64 max; fp64 avg
    const size_t n = 7;
    std::vector<int32_t> a(n);
    std::vector<int64_t> b(n);
    std::vector<double> c(n);
    for (size_t i = 0; i < n; i++) a[i] = g_rank * 100 + (int)i, b[i] = -(int64_t)g_rank * 1000000000000ll + (int64_t)i,
                                   c[i] = g_rank * 100.0 + (double)i;
    EXPECT_EQ(ncclAllReduce(a.data(), a.data(), n, ncclInt32, ncclSum, g_comm, nullptr), ncclSuccess) << last_error();
    EXPECT_EQ(ncclAllReduce(b.data(), b.data(), n, ncclInt64, ncclMax, g_comm, nullptr), ncclSuccess) << last_error();
    EXPECT_EQ(ncclAllReduce(c.data(), c.data(), n, ncclFloat64, ncclAvg, g_comm, nullptr), ncclSuccess) << last_error();
    for (size_t i = 0; i < n; i++) {
        EXPECT_EQ(a[i], (int32_t)expected<F32>(ncclSum, i)) << i;
        EXPECT_EQ(b[i], (int64_t)i) << i;  // rank 0's value is the largest
        double avg = 0;  // NCCL's fp64 average: a sum of the values times 1 / ranks
        for (int r = 0; r < g_size; r++) avg += (r * 100.0 + (double)i) * (1.0 / g_size);
        EXPECT_EQ(c[i], avg) << i;
    }
}

// bf16: the contributions are summed in fp32 and rounded to bf16 once, to nearest, ties to even. Rank 0 gives
// `base`, every other rank 1.0; between 256 and 512 bf16's spacing is 2, so 256 + 1 is a tie (-> 256, even) where a
// bf16 running sum would also give 256, but 256 + 1 + 1 = 258 exactly where a bf16 running sum would stay at 256;
// 258 + 1 = 259 is a tie that rounds UP to 260 (258's last mantissa bit is odd), where truncation would give 258.

TEST(AllReduce, Bf16RoundsTheFp32SumOnceToNearestEven) {
    for (double base : {256.0, 258.0, 300.0}) {
        for (ncclRedOp_t op : {ncclSum, ncclAvg}) {
            std::vector<uint16_t> buf(3, BF16::enc(g_rank == 0 ? base : 1.0));
            EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclBfloat16, op, g_comm, nullptr),
                      ncclSuccess) << last_error();
            float sum = (float)base + (float)(g_size - 1);  // exact in fp32
            double want = bf16_round_ref(op == ncclSum ? sum : (double)(sum / (float)g_size));
            for (uint16_t h : buf) EXPECT_EQ(BF16::dec(h), want) << "base " << base << " op " << (int)op;
        }
    }
    if (g_size == 2) {  // the tie cases spelled out
        std::vector<uint16_t> a(1, BF16::enc(g_rank == 0 ? 256.0 : 1.0)), b(1, BF16::enc(g_rank == 0 ? 258.0 : 1.0));
        EXPECT_EQ(ncclAllReduce(a.data(), a.data(), 1, ncclBfloat16, ncclSum, g_comm, nullptr), ncclSuccess);
        EXPECT_EQ(ncclAllReduce(b.data(), b.data(), 1, ncclBfloat16, ncclSum, g_comm, nullptr), ncclSuccess);
        EXPECT_EQ(BF16::dec(a[0]), 256.0);
        EXPECT_EQ(BF16::dec(b[0]), 260.0);
    }
    if (g_size == 3) {
        std::vector<uint16_t> a(1, BF16::enc(g_rank == 0 ? 256.0 : 1.0));
        EXPECT_EQ(ncclAllReduce(a.data(), a.data(), 1, ncclBfloat16, ncclSum, g_comm, nullptr), ncclSuccess);
        EXPECT_EQ(BF16::dec(a[0]), 258.0);  // a bf16 running sum would give 256
    }
}

// ---- ReduceScatter ---------------------------------------------------------------------------------------------

// rank r's send buffer holds g_size blocks of n: element b*n + i is val(r, b*n + i); rank r keeps block r reduced
template <class E>
static void reduce_scatter_case(ncclComm_t comm, size_t n, ncclRedOp_t op, bool in_place) {
    std::string what = std::string("ReduceScatter ") + E::name() + " recvcount " + std::to_string(n) + " op " +
                       std::to_string((int)op) + (in_place ? " in place" : " out of place");
    const size_t total = n * (size_t)g_size, mine = (size_t)g_rank * n;
    std::vector<typename E::T> send = values<E>(g_rank, total), recv(n, E::enc(kSentinel));
    const std::vector<typename E::T> orig = send;
    ncclResult_t r = in_place ? ncclReduceScatter(send.data(), send.data() + mine, n, E::type, op, comm, nullptr)
                              : ncclReduceScatter(send.data(), recv.data(), n, E::type, op, comm, nullptr);
    EXPECT_EQ(r, ncclSuccess) << what << ": " << last_error();
    const typename E::T* out = in_place ? send.data() + mine : recv.data();
    EXPECT_EQ((mismatches<E>(out, n, [&](size_t i) { return expected<E>(op, mine + i); }, what)), 0u);
    if (!in_place) {
        EXPECT_EQ(send, orig) << what << ": sendbuff changed";
    }
}

TEST(ReduceScatter, InPlaceAndOutOfPlace) {
    for (size_t n : kCounts)
        for (ncclRedOp_t op : {ncclSum, ncclAvg})
            for (bool ip : {false, true}) {
                reduce_scatter_case<F32>(g_comm, n, op, ip);
                reduce_scatter_case<BF16>(g_comm, n, op, ip);
            }
}

// ---- AllGather -------------------------------------------------------------------------------------------------

template <class E>
static void all_gather_case(ncclComm_t comm, size_t n, bool in_place) {
    std::string what = std::string("AllGather ") + E::name() + " sendcount " + std::to_string(n) +
                       (in_place ? " in place" : " out of place");
    const size_t total = n * (size_t)g_size, mine = (size_t)g_rank * n;
    std::vector<typename E::T> send = values<E>(g_rank, n), recv(total, E::enc(kSentinel));
    const std::vector<typename E::T> orig = send;
    ncclResult_t r;
    if (in_place) {
        std::copy(send.begin(), send.end(), recv.begin() + (ptrdiff_t)mine);
        r = ncclAllGather(recv.data() + mine, recv.data(), n, E::type, comm, nullptr);
    } else {
        r = ncclAllGather(send.data(), recv.data(), n, E::type, comm, nullptr);
    }
    EXPECT_EQ(r, ncclSuccess) << what << ": " << last_error();
    EXPECT_EQ((mismatches<E>(recv.data(), total, [&](size_t g) { return E::val((int)(g / n), g % n); }, what)), 0u);
    if (!in_place) {
        EXPECT_EQ(send, orig) << what << ": sendbuff changed";
    }
}

TEST(AllGather, InPlaceAndOutOfPlace) {
    for (size_t n : kCounts)
        for (bool ip : {false, true}) {
            all_gather_case<F32>(g_comm, n, ip);
            all_gather_case<BF16>(g_comm, n, ip);
        }
}

// ---- Reduce and Broadcast --------------------------------------------------------------------------------------

template <class E>
static void reduce_case(ncclComm_t comm, size_t n, ncclRedOp_t op, int root, bool in_place, bool null_recv) {
    std::string what = std::string("Reduce ") + E::name() + " count " + std::to_string(n) + " root " +
                       std::to_string(root) + (in_place ? " in place" : " out of place");
    std::vector<typename E::T> send = values<E>(g_rank, n), recv(n, E::enc(kSentinel));
    const std::vector<typename E::T> orig = send;
    void* rb = in_place ? (void*)send.data() : (null_recv && g_rank != root ? nullptr : (void*)recv.data());
    EXPECT_EQ(ncclReduce(send.data(), rb, n, E::type, op, root, comm, nullptr), ncclSuccess) << what << ": "
                                                                                              << last_error();
    if (g_rank == root) {
        const auto& out = in_place ? send : recv;
        EXPECT_EQ((mismatches<E>(out.data(), n, [&](size_t i) { return expected<E>(op, i); }, what)), 0u);
    } else {
        EXPECT_EQ(send, orig) << what << ": a non-root's buffer changed";
        if (!in_place) {
            EXPECT_EQ((mismatches<E>(recv.data(), n, [](size_t) { return kSentinel; }, what + " (non-root recv)")),
                      0u);
        }
    }
    if (!in_place && g_rank == root) {
        EXPECT_EQ(send, orig) << what << ": sendbuff changed";
    }
}

TEST(Reduce, ToRootZeroAndToTheLastRank) {
    for (int root : {0, g_size - 1})
        for (size_t n : kCounts)
            for (ncclRedOp_t op : {ncclSum, ncclAvg})
                for (bool ip : {false, true}) {
                    reduce_case<F32>(g_comm, n, op, root, ip, false);
                    reduce_case<BF16>(g_comm, n, op, root, ip, false);
                }
    // recvbuff may be NULL except on the root
    reduce_case<F32>(g_comm, 7, ncclSum, g_size - 1, false, true);
}

template <class E>
static void broadcast_case(ncclComm_t comm, size_t n, int root, bool in_place, bool null_send) {
    std::string what = std::string("Broadcast ") + E::name() + " count " + std::to_string(n) + " root " +
                       std::to_string(root) + (in_place ? " in place" : " out of place");
    std::vector<typename E::T> send = values<E>(g_rank, n), recv(n, E::enc(kSentinel));
    const std::vector<typename E::T> orig = send;
    ncclResult_t r;
    if (in_place) {
        r = ncclBroadcast(send.data(), send.data(), n, E::type, root, comm, nullptr);
    } else {
        const void* sb = null_send && g_rank != root ? nullptr : send.data();  // only used on the root
        r = ncclBroadcast(sb, recv.data(), n, E::type, root, comm, nullptr);
    }
    EXPECT_EQ(r, ncclSuccess) << what << ": " << last_error();
    const auto& out = in_place ? send : recv;
    EXPECT_EQ((mismatches<E>(out.data(), n, [&](size_t i) { return E::val(root, i); }, what)), 0u);
    if (!in_place) {
        EXPECT_EQ(send, orig) << what << ": sendbuff changed";
    }
}

TEST(Broadcast, FromRootZeroAndFromTheLastRank) {
    for (int root : {0, g_size - 1})
        for (size_t n : kCounts)
            for (bool ip : {false, true}) {
                broadcast_case<F32>(g_comm, n, root, ip, false);
                broadcast_case<BF16>(g_comm, n, root, ip, false);
            }
    broadcast_case<F32>(g_comm, 7, g_size - 1, false, true);  // sendbuff NULL except on the root
    // ncclBcast: the legacy in-place form
    std::vector<float> b = values<F32>(g_rank, 7);
    EXPECT_EQ(ncclBcast(b.data(), 7, ncclFloat32, g_size - 1, g_comm, nullptr), ncclSuccess) << last_error();
    EXPECT_EQ((mismatches<F32>(b.data(), 7, [](size_t i) { return F32::val(g_size - 1, i); }, "ncclBcast")), 0u);
}

// ---- the chunked MPI paths (NCCL_EMU_CHUNK_BYTES: 64 bytes per MPI call) ---------------------------------------

TEST(Chunked, EveryCollectiveWithTinyMpiMessages) {
    setenv("NCCL_EMU_CHUNK_BYTES", "64", 1);
    ncclComm_t c = new_comm();
    unsetenv("NCCL_EMU_CHUNK_BYTES");
    if (!c) return;
    for (size_t n : {(size_t)7, (size_t)1000}) {
        allreduce_case<F32>(c, n, ncclAvg, true);
        allreduce_case<BF16>(c, n, ncclSum, false);
        reduce_scatter_case<F32>(c, n, ncclSum, true);
        reduce_scatter_case<BF16>(c, n, ncclAvg, false);
        all_gather_case<F32>(c, n, true);
        all_gather_case<BF16>(c, n, false);
        reduce_case<F32>(c, n, ncclAvg, g_size - 1, true, false);
        broadcast_case<BF16>(c, n, g_size - 1, false, false);
    }
    EXPECT_EQ(ncclCommFinalize(c), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// ---- grouped sequences, as train/comm_nccl.cu issues them ------------------------------------------------------

static size_t shard_begin(size_t n, int r) {  // Comm's rule: n / size each, one more for the first n % size ranks
    size_t q = n / (size_t)g_size, rem = n % (size_t)g_size;
    return (size_t)r * q + std::min((size_t)r, rem);
}

TEST(Groups, GroupedRangesAndPerShardReduceThenBroadcast) {
    for (size_t n : kCounts) {
        // allreduce_avg_start: one grouped in-place ncclAllReduce per range
        std::vector<float> g = values<F32>(g_rank, n);
        EXPECT_EQ(ncclGroupStart(), ncclSuccess);
        const size_t cut = n / 3;
        for (auto [off, cnt] : {std::pair<size_t, size_t>{0, cut}, {cut, n - cut}})
            if (cnt) {
                EXPECT_EQ(ncclAllReduce(g.data() + off, g.data() + off, cnt, ncclFloat32, ncclAvg, g_comm, nullptr),
                                   ncclSuccess) << last_error();
            }
        EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
        EXPECT_EQ((mismatches<F32>(g.data(), n, [](size_t i) { return expected<F32>(ncclAvg, i); }, "ranges")), 0u);

        // reduce_scatter_avg / all_gather with uneven shards: grouped ncclReduce to each shard's owner, then grouped
        // ncclBroadcast from each owner; afterwards every element holds the average on every rank
        for (bool bf : {false, true}) {
            std::vector<float> f = values<F32>(g_rank, n);
            std::vector<uint16_t> h = values<BF16>(g_rank, n);
            void* p = bf ? (void*)h.data() : (void*)f.data();
            const size_t es = bf ? 2 : 4;
            const ncclDataType_t t = bf ? ncclBfloat16 : ncclFloat32;
            EXPECT_EQ(ncclGroupStart(), ncclSuccess);
            for (int r = 0; r < g_size; r++) {
                size_t b = shard_begin(n, r), c = shard_begin(n, r + 1) - b;
                char* q = (char*)p + b * es;
                if (c) {
                    EXPECT_EQ(ncclReduce(q, q, c, t, ncclAvg, r, g_comm, nullptr), ncclSuccess) << last_error();
                }
            }
            EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
            const size_t b0 = shard_begin(n, g_rank), e0 = shard_begin(n, g_rank + 1);
            size_t bad = bf ? mismatches<BF16>(h.data() + b0, e0 - b0,
                                               [&](size_t i) { return expected<BF16>(ncclAvg, b0 + i); }, "bf16 shard")
                            : mismatches<F32>(f.data() + b0, e0 - b0,
                                              [&](size_t i) { return expected<F32>(ncclAvg, b0 + i); }, "fp32 shard");
            EXPECT_EQ(bad, 0u) << "grouped ncclReduce to each shard's owner, n = " << n;
            EXPECT_EQ(ncclGroupStart(), ncclSuccess);
            for (int r = 0; r < g_size; r++) {
                size_t b = shard_begin(n, r), c = shard_begin(n, r + 1) - b;
                char* q = (char*)p + b * es;
                if (c) {
                    EXPECT_EQ(ncclBroadcast(q, q, c, t, r, g_comm, nullptr), ncclSuccess) << last_error();
                }
            }
            EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
            bad = bf ? mismatches<BF16>(h.data(), n, [](size_t i) { return expected<BF16>(ncclAvg, i); }, "bf16 all")
                     : mismatches<F32>(f.data(), n, [](size_t i) { return expected<F32>(ncclAvg, i); }, "fp32 all");
            EXPECT_EQ(bad, 0u) << "grouped ncclBroadcast from each shard's owner, n = " << n;
        }
    }
}

TEST(Groups, NestingAndUnbalancedEnd) {
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    EXPECT_TRUE(contains(last_error(), "ncclGroupStart")) << last_error();
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    std::vector<float> a = values<F32>(g_rank, 7);
    EXPECT_EQ(ncclAllReduce(a.data(), a.data(), 7, ncclFloat32, ncclSum, g_comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    std::vector<float> b = values<F32>(g_rank, 7);
    EXPECT_EQ(ncclAllReduce(b.data(), b.data(), 7, ncclFloat32, ncclMax, g_comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);  // one End too many
    EXPECT_EQ((mismatches<F32>(a.data(), 7, [](size_t i) { return expected<F32>(ncclSum, i); }, "nested sum")), 0u);
    EXPECT_EQ((mismatches<F32>(b.data(), 7, [](size_t i) { return expected<F32>(ncclMax, i); }, "nested max")), 0u);
}

// ---- invalid arguments (every rank makes the same invalid call, so every rank gets its own error) --------------

// Expects `r` to be `want` with ncclGetLastError mentioning `part`.
#define EXPECT_NCCL_ERROR(call, want, part)                                                        \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        EXPECT_EQ(r_, want) << #call;                                                              \
        EXPECT_TRUE(contains(last_error(), part)) << #call << ": last error \"" << last_error() << "\""; \
    } while (0)

TEST(InvalidArguments, NullCommTypeOpRoot) {
    std::vector<float> a(8, 1.0f), b(8 * (size_t)g_size, 0.0f);
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 8, ncclFloat32, ncclSum, nullptr, nullptr),
                      ncclInvalidArgument, "comm is NULL");
    EXPECT_NCCL_ERROR(ncclReduce(a.data(), a.data(), 8, ncclFloat32, ncclSum, 0, nullptr, nullptr), ncclInvalidArgument,
                      "comm is NULL");
    EXPECT_NCCL_ERROR(ncclBroadcast(a.data(), a.data(), 8, ncclFloat32, 0, nullptr, nullptr), ncclInvalidArgument,
                      "comm is NULL");
    EXPECT_NCCL_ERROR(ncclReduceScatter(b.data(), a.data(), 8, ncclFloat32, ncclSum, nullptr, nullptr),
                      ncclInvalidArgument, "comm is NULL");
    EXPECT_NCCL_ERROR(ncclAllGather(a.data(), b.data(), 8, ncclFloat32, nullptr, nullptr), ncclInvalidArgument,
                      "comm is NULL");
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 8, (ncclDataType_t)ncclNumTypes, ncclSum, g_comm, nullptr),
                      ncclInvalidArgument, "invalid datatype");
    EXPECT_NCCL_ERROR(ncclAllGather(a.data(), b.data(), 8, (ncclDataType_t)15, g_comm, nullptr), ncclInvalidArgument,
                      "invalid datatype");  // (an enum value outside 0 .. 15 would be undefined behaviour in C++)
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 8, ncclFloat32, (ncclRedOp_t)ncclNumOps, g_comm, nullptr),
                      ncclInvalidArgument, "invalid reduction operation");
    EXPECT_NCCL_ERROR(ncclReduceScatter(b.data(), a.data(), 8, ncclFloat32, (ncclRedOp_t)1000, g_comm, nullptr),
                      ncclInvalidArgument, "invalid reduction operation");
    EXPECT_NCCL_ERROR(ncclReduce(a.data(), a.data(), 8, ncclFloat32, ncclSum, g_size, g_comm, nullptr),
                      ncclInvalidArgument, "invalid root");
    EXPECT_NCCL_ERROR(ncclBroadcast(a.data(), a.data(), 8, ncclFloat32, -1, g_comm, nullptr), ncclInvalidArgument,
                      "invalid root");
    // types and operators outside the emulation
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 4, ncclFloat16, ncclSum, g_comm, nullptr), ncclInvalidArgument,
                      "not emulated");
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 8, ncclInt32, ncclAvg, g_comm, nullptr), ncclInvalidArgument,
                      "ncclAvg");
    // the communicator still works, and the failed calls touched nothing
    for (float x : a) EXPECT_EQ(x, 1.0f);
    allreduce_case<F32>(g_comm, 7, ncclSum, true);
}

TEST(InvalidArguments, NullBuffersAndCountZero) {
    std::vector<float> a(8, 1.0f);
    EXPECT_NCCL_ERROR(ncclAllReduce(nullptr, a.data(), 8, ncclFloat32, ncclSum, g_comm, nullptr), ncclInvalidArgument,
                      "sendbuff is NULL");
    EXPECT_NCCL_ERROR(ncclAllGather(a.data(), nullptr, 1, ncclFloat32, g_comm, nullptr), ncclInvalidArgument,
                      "recvbuff is NULL");
    EXPECT_NCCL_ERROR(ncclReduce(a.data(), nullptr, 8, ncclFloat32, ncclSum, 0, g_comm, nullptr),
                      g_rank == 0 ? ncclInvalidArgument : ncclInvalidUsage, g_rank == 0 ? "recvbuff" : "rank 0");
    // count 0: nothing to move, nothing is read (NULL pointers are fine)
    EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, g_comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclReduceScatter(nullptr, nullptr, 0, ncclBfloat16, ncclAvg, g_comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclAllGather(nullptr, nullptr, 0, ncclFloat32, g_comm, nullptr), ncclSuccess);
    EXPECT_EQ(ncclBroadcast(nullptr, nullptr, 0, ncclFloat32, 0, g_comm, nullptr), ncclSuccess);
    allreduce_case<BF16>(g_comm, 7, ncclAvg, true);
}

TEST(InvalidArguments, OverlapThatIsNotInPlace) {
    const size_t n = 4, R = (size_t)g_size;
    std::vector<float> a(n * R + 8, 1.0f);
    // AllReduce: recvbuff one element after sendbuff
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data() + 1, n, ncclFloat32, ncclSum, g_comm, nullptr),
                      ncclInvalidArgument, "in-place form");
    // ReduceScatter / AllGather at the wrong rank offset (the next rank's block, or one element off)
    const size_t wrong = R > 1 ? (size_t)((g_rank + 1) % g_size) * n : 1;
    EXPECT_NCCL_ERROR(ncclReduceScatter(a.data(), a.data() + wrong, n, ncclFloat32, ncclSum, g_comm, nullptr),
                      ncclInvalidArgument, "recvbuff == sendbuff + rank * recvcount");
    EXPECT_NCCL_ERROR(ncclAllGather(a.data() + wrong, a.data(), n, ncclFloat32, g_comm, nullptr), ncclInvalidArgument,
                      "sendbuff == recvbuff + rank * sendcount");
    for (float x : a) EXPECT_EQ(x, 1.0f);
    // the documented in-place forms are accepted
    std::vector<float> rs = values<F32>(g_rank, n * R), ag(n * R);
    EXPECT_EQ(ncclReduceScatter(rs.data(), rs.data() + (size_t)g_rank * n, n, ncclFloat32, ncclSum, g_comm, nullptr),
              ncclSuccess) << last_error();
    EXPECT_EQ(ncclAllGather(ag.data() + (size_t)g_rank * n, ag.data(), n, ncclFloat32, g_comm, nullptr), ncclSuccess)
        << last_error();
}

// ---- ranks that disagree (several ranks only) ------------------------------------------------------------------

TEST(Mismatch, RanksIssuingDifferentCollectivesAllGetAnError) {
    if (g_size < 2) GTEST_SKIP() << "needs several ranks";
    std::vector<float> a(8 * (size_t)g_size, 1.0f);
    // different counts
    ncclResult_t r = ncclAllReduce(a.data(), a.data(), g_rank == 0 ? 4 : 5, ncclFloat32, ncclSum, g_comm, nullptr);
    EXPECT_EQ(r, ncclInvalidUsage);
    EXPECT_TRUE(contains(last_error(), "did not issue the same collective")) << last_error();
    EXPECT_TRUE(contains(last_error(), "rank 1: call #")) << last_error();
    // different collectives (what a rank that skipped a collective would do)
    r = g_rank == 0 ? ncclAllReduce(a.data(), a.data(), 8, ncclFloat32, ncclAvg, g_comm, nullptr)
                    : ncclAllGather(a.data() + (size_t)g_rank * 8, a.data(), 8, ncclFloat32, g_comm, nullptr);
    EXPECT_EQ(r, ncclInvalidUsage);
    EXPECT_TRUE(contains(last_error(), "ncclAllGather")) << last_error();
    // different roots
    r = ncclBroadcast(a.data(), a.data(), 8, ncclFloat32, g_rank == 0 ? 0 : 1, g_comm, nullptr);
    EXPECT_EQ(r, ncclInvalidUsage);
    // one rank's arguments are invalid: it reports its own error, the others name it
    r = ncclAllReduce(a.data(), a.data(), 8, ncclFloat32, g_rank == 1 ? (ncclRedOp_t)99 : ncclSum, g_comm, nullptr);
    if (g_rank == 1) {
        EXPECT_EQ(r, ncclInvalidArgument);
        EXPECT_TRUE(contains(last_error(), "invalid reduction operation")) << last_error();
    } else {
        EXPECT_EQ(r, ncclInvalidUsage);
        EXPECT_TRUE(contains(last_error(), "rank 1 of the communicator refused")) << last_error();
    }
    for (float x : a) EXPECT_EQ(x, 1.0f);
    // and the communicator still works
    allreduce_case<F32>(g_comm, 1000, ncclAvg, false);
}

// ---- communicators: creation errors, one-rank communicators, finalize/destroy/abort ----------------------------

TEST(Communicators, InitRankArgumentErrors) {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    EXPECT_EQ(ncclGetUniqueId(nullptr), ncclInvalidArgument);
    ncclComm_t c = nullptr;
    EXPECT_NCCL_ERROR(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument, "output pointer");
    EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 0, id, 0), ncclInvalidArgument, "nranks");
    EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 1, id, 1), ncclInvalidArgument, "invalid rank");
    EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 2, id, -1), ncclInvalidArgument, "invalid rank");
    ncclUniqueId zero;
    std::memset(&zero, 0, sizeof zero);
    EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 1, zero, 0), ncclInvalidArgument, "ncclGetUniqueId");
    EXPECT_EQ(c, nullptr);
    ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    EXPECT_NCCL_ERROR(ncclCommInitRankConfig(&c, 1, id, 0, &bad), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
}

TEST(Communicators, SeveralRanksNeedAMatchingMpiJob) {
    ncclUniqueId id = shared_id();
    ncclComm_t c = nullptr;
    if (!g_mpi) {  // one process, MPI not initialized
        EXPECT_NCCL_ERROR(ncclCommInitRank(&c, 2, id, 0), ncclInvalidUsage, "MPI");
        EXPECT_EQ(c, nullptr);
        return;
    }
    // more ranks than MPI processes: refused on every rank, without communication
    EXPECT_NCCL_ERROR(ncclCommInitRank(&c, g_size + 1, id, g_rank), ncclInvalidUsage, "MPI_COMM_WORLD has");
    if (g_size > 1) {
        // rank arguments that are not the world ranks: every rank refuses (collectively), nobody hangs
        EXPECT_NCCL_ERROR(ncclCommInitRank(&c, g_size, id, (g_rank + 1) % g_size), ncclInvalidUsage, "world rank");
        // each rank with its own id
        ncclUniqueId own;
        EXPECT_EQ(ncclGetUniqueId(&own), ncclSuccess);
        EXPECT_NCCL_ERROR(ncclCommInitRank(&c, g_size, own, g_rank), ncclInvalidArgument, "different commIds");
    }
    EXPECT_EQ(c, nullptr);
    EXPECT_TRUE(all_ranks(true));
}

TEST(Communicators, OneRankCommunicatorInEveryProcess) {
    // every process makes its own one-rank communicator (no MPI involved, even under mpirun): each collective is a
    // copy of this rank's contribution
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    ncclComm_t c = nullptr;
    ASSERT_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess) << last_error();  // local: an early return is safe
    int n = 0, r = -1;
    EXPECT_EQ(ncclCommCount(c, &n), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(c, &r), ncclSuccess);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(r, 0);
    std::vector<float> v = values<F32>(g_rank, 7), out(7, -1.0f);
    std::vector<uint16_t> h = values<BF16>(g_rank, 7), hout(7, 0);
    auto same = [&](const char* what) {
        EXPECT_EQ((mismatches<F32>(out.data(), 7, [](size_t i) { return F32::val(g_rank, i); }, what)), 0u);
        std::fill(out.begin(), out.end(), -1.0f);
    };
    EXPECT_EQ(ncclAllReduce(v.data(), out.data(), 7, ncclFloat32, ncclAvg, c, nullptr), ncclSuccess);
    same("1-rank AllReduce");
    EXPECT_EQ(ncclReduceScatter(v.data(), out.data(), 7, ncclFloat32, ncclSum, c, nullptr), ncclSuccess);
    same("1-rank ReduceScatter");
    EXPECT_EQ(ncclAllGather(v.data(), out.data(), 7, ncclFloat32, c, nullptr), ncclSuccess);
    same("1-rank AllGather");
    EXPECT_EQ(ncclReduce(v.data(), out.data(), 7, ncclFloat32, ncclAvg, 0, c, nullptr), ncclSuccess);
    same("1-rank Reduce");
    EXPECT_EQ(ncclBroadcast(v.data(), out.data(), 7, ncclFloat32, 0, c, nullptr), ncclSuccess);
    same("1-rank Broadcast");
    EXPECT_EQ(ncclAllReduce(h.data(), hout.data(), 7, ncclBfloat16, ncclAvg, c, nullptr), ncclSuccess);
    EXPECT_EQ(hout, h);
    EXPECT_NCCL_ERROR(ncclReduce(v.data(), out.data(), 7, ncclFloat32, ncclSum, 1, c, nullptr), ncclInvalidArgument,
                      "invalid root");
    EXPECT_EQ(ncclCommFinalize(c), ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(Communicators, FinalizeDestroyAbortLifecycle) {
    ncclComm_t c = new_comm();
    if (!c) return;
    std::vector<float> a = values<F32>(g_rank, 7);
    EXPECT_EQ(ncclAllReduce(a.data(), a.data(), 7, ncclFloat32, ncclSum, c, nullptr), ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(c), ncclSuccess);
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 7, ncclFloat32, ncclSum, c, nullptr), ncclInvalidUsage,
                      "finalized");
    EXPECT_NCCL_ERROR(ncclCommFinalize(c), ncclInvalidUsage, "finalized");
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
    EXPECT_NCCL_ERROR(ncclCommDestroy(c), ncclInvalidArgument, "not a live communicator");
    EXPECT_NCCL_ERROR(ncclAllReduce(a.data(), a.data(), 7, ncclFloat32, ncclSum, c, nullptr), ncclInvalidArgument,
                      "not a live communicator");
    EXPECT_EQ(ncclCommDestroy(nullptr), ncclSuccess);
    EXPECT_EQ(ncclCommAbort(nullptr), ncclSuccess);

    // abort: local and immediate. Rank 0 aborts while the other ranks destroy theirs: nobody waits for anybody.
    ncclComm_t d = new_comm();
    if (!d) return;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(g_rank == 0 ? ncclCommAbort(d) : ncclCommDestroy(d), ncclSuccess);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(s, 10.0);  // (a wait for the others would be unbounded: they never call again)
    EXPECT_NCCL_ERROR(ncclCommAbort(d), ncclInvalidArgument, "not a live communicator");
    EXPECT_TRUE(all_ranks(true));  // every rank got here
}

// ---- a rank dies while the others wait in a collective: the job must end, not hang -----------------------------

// NCCL_EMU_TEST_DIE=<mode> under the launcher: the last rank fails after the others entered an ncclAllReduce.
//   none        nobody fails (the control: exit 0)
//   abort       what train/comm_nccl.cu's error path does: ncclCommAbort, then MPI_Abort
//   abort_exit  ncclCommAbort, then exit(1) without MPI_Finalize (mpirun then ends the other ranks)
static int die_mode(const std::string& mode) {
#if TEST_MPI
    ncclComm_t c = nullptr;
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (g_rank == 0) ncclGetUniqueId(&id);
    bcast_bytes(&id, sizeof id, 0);
    if (ncclCommInitRank(&c, g_size, id, g_rank) != ncclSuccess) {
        std::fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", g_rank, last_error().c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::vector<float> a(1000, 1.0f);
    if (g_size < 2) {
        std::fprintf(stderr, "die mode needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (g_rank == g_size - 1 && mode != "none") {
        usleep(300 * 1000);  // the others are in the collective by now
        std::fprintf(stderr, "rank %d: failing on purpose (%s)\n", g_rank, mode.c_str());
        auto t0 = std::chrono::steady_clock::now();
        ncclResult_t r = ncclCommAbort(c);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "rank %d: ncclCommAbort returned %d after %.3f s\n", g_rank, (int)r, s);
        std::fflush(stderr);
        if (mode == "abort") MPI_Abort(MPI_COMM_WORLD, 3);
        std::exit(1);
    }
    ncclResult_t r = ncclAllReduce(a.data(), a.data(), a.size(), ncclFloat32, ncclSum, c, nullptr);
    std::printf("rank %d: survived the collective (%d)\n", g_rank, (int)r);
    ncclCommFinalize(c);
    ncclCommDestroy(c);
    MPI_Finalize();
    return 0;
#else
    (void)mode;
    std::fprintf(stderr, "die mode needs MPI\n");
    return 2;
#endif
}

class RankDies : public ::testing::TestWithParam<const char*> {};

TEST_P(RankDies, TheJobEndsInsteadOfHanging) {
    const char* launcher = std::getenv("NCCL_EMU_TEST_MPIEXEC");
    if (g_mpi || !launcher || !*launcher)
        GTEST_SKIP() << "set NCCL_EMU_TEST_MPIEXEC (e.g. \"mpirun -np 2 --oversubscribe\") and run one process";
    char self[4096] = {};
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    ASSERT_GT(len, 0);
    std::string mode = GetParam();
    std::string cmd = "NCCL_EMU_TEST_DIE=" + mode + " timeout 120 " + launcher + " " + self + " 2>&1";
    auto t0 = std::chrono::steady_clock::now();
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t got = std::fread(buf, 1, sizeof buf, p)) out.append(buf, got);
    int status = pclose(p);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    EXPECT_NE(code, 124) << "the job hung (killed by timeout after " << s << " s):\n" << out;
    if (mode == "none") {
        EXPECT_EQ(code, 0) << out;
        EXPECT_TRUE(contains(out, "rank 0: survived the collective (0)")) << out;
    } else {
        EXPECT_NE(code, 0) << out;
        EXPECT_TRUE(contains(out, "ncclCommAbort returned 0")) << out;
        EXPECT_FALSE(contains(out, "survived")) << out;
    }
    std::printf("mode %s: exit %d after %.1f s\n", mode.c_str(), code, s);
}

INSTANTIATE_TEST_SUITE_P(Modes, RankDies, ::testing::Values("none", "abort", "abort_exit"));

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

static bool started_by_mpi_launcher() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (const char* s = std::getenv(v); s && *s) return true;
    return false;
}

int main(int argc, char** argv) {
#if TEST_MPI
    if (started_by_mpi_launcher()) {
        MPI_Init(&argc, &argv);
        g_mpi = true;
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    }
#else
    if (started_by_mpi_launcher()) {
        std::fprintf(stderr, "test_emu_nccl: started by an MPI launcher, but built without MPI\n");
        return 1;
    }
#endif
    if (const char* mode = std::getenv("NCCL_EMU_TEST_DIE")) return die_mode(mode);
    ::testing::InitGoogleTest(&argc, argv);

    // the communicator of the tests, made as train/comm_nccl.cu makes it
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (g_rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) std::fprintf(stderr, "ncclGetUniqueId failed\n");
    bcast_bytes(&id, sizeof id, 0);
    if (ncclCommInitRank(&g_comm, g_size, id, g_rank) != ncclSuccess) {
        std::fprintf(stderr, "rank %d: ncclCommInitRank failed: %s\n", g_rank, last_error().c_str());
#if TEST_MPI
        if (g_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
        return 1;
    }
    if (g_rank != 0) {
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new RankFailurePrinter(g_rank));
    }
    int rc = RUN_ALL_TESTS();
    bool ok = all_ranks(rc == 0);  // every rank exits non-zero when any rank failed
    if (g_rank == 0 && !ok && rc == 0) std::fprintf(stderr, "other rank(s) failed (see the [rank N] lines)\n");
    if (ncclCommFinalize(g_comm) != ncclSuccess || ncclCommDestroy(g_comm) != ncclSuccess) {
        std::fprintf(stderr, "rank %d: finalize/destroy failed: %s\n", g_rank, last_error().c_str());
        ok = false;
    }
#if TEST_MPI
    if (g_mpi) MPI_Finalize();
#endif
    return ok ? 0 : 1;
}
