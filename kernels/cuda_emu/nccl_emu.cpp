// NCCL on a CPU: the emulated build's stand-in for libnccl (kernels/cuda_emu/). It defines the functions of the real
// <nccl.h> that the project calls, with exactly the header's signatures, from NVIDIA's documentation of their
// behaviour (NCCL user guide: "Collective Communication Functions", "In-place Operations", "Group Calls",
// "Communicator Creation and Management Functions", "Types"). No code of NCCL is used.
//
// Execution model. In the emulated build "device memory" is host memory. A collective first runs its stream's queued
// work (stream_order.h), then runs to completion before it returns, on the calling thread: collectives stay in each
// rank's program order, so the blocking MPI calls of the ranks pair up.
//   - One rank (nranks == 1): pure in-process copies. The reduction of one contribution is that contribution (the
//     sum of one value is the value, the average is value / 1 = value), so every collective is a copy from
//     sendbuff to recvbuff (nothing at all in place). No MPI is involved, whether or not MPI is initialized.
//   - Several ranks: each NCCL rank is an MPI process, NCCL rank r = MPI_COMM_WORLD rank r. ncclCommInitRank needs
//     MPI to be initialized already (the project's host communicator does it, and broadcasts the ncclUniqueId over
//     MPI itself: train/comm_nccl.cu) and MPI_COMM_WORLD's size and rank to be nranks and rank. The communicator
//     MPI_Comm_dup's the world communicator, and every collective is made of blocking MPI calls on that duplicate,
//     so it never interferes with the application's own MPI traffic on MPI_COMM_WORLD.
//
// Reductions are deterministic and identical on every rank: each rank gathers every rank's contribution
// (MPI_Allgather / MPI_Gather / MPI_Alltoall of raw bytes) and reduces them itself in rank order 0, 1, ..., n-1:
//   fp32: summed in fp32; fp64 in fp64; bf16: converted to fp32, summed in fp32, rounded to bf16 ONCE at the end
//   (round to nearest, ties to even); integers: wrap-around two's-complement arithmetic.
//   ncclAvg (the Types page: "a sum across all ranks, divided by the number of ranks") as NCCL computes it for
//   floating types (its enqueue code turns it into a pre-multiplied sum): every contribution times 1/nranks rounded
//   to the element type, the product rounded to it too, then summed as above. In bf16 that scalar is not 1/nranks
//   unless nranks is a power of two (bf16(1/3) = 0.333984375), so an average over 3, 5, 6, 7 ... ranks comes out
//   scaled (by 1.00195 for 3): train/comm_nccl.cu sums and scales itself there, and the tests see the difference.
// Real NCCL's summation order and rounding are NOT specified (ring/tree algorithms, chunking, and the number of
// ranks and channels all change them), so tests must never expect the
// emulation's results to be bitwise equal to a real NCCL run: compare with tolerances, or use values whose sums are
// exact in the type (as test/cuda_emu/test_emu_nccl.cpp does).
//
// Supported: ncclSum, ncclProd, ncclMax, ncclMin on int8/uint8/int32/uint32/int64/uint64/fp32/fp64/bf16; ncclAvg on
// fp32/fp64/bf16. Reductions on fp16/fp8, ncclAvg on integers and user-defined operators (ncclRedOpCreatePreMulSum)
// are not emulated and return ncclInvalidArgument with a message; Broadcast and AllGather move bytes and take
// every type.
//
// In-place forms, exactly as the "In-place Operations" page defines them:
//   ncclAllReduce, ncclReduce, ncclBroadcast: sendbuff == recvbuff;
//   ncclReduceScatter: recvbuff == sendbuff + rank * recvcount;  ncclAllGather: sendbuff == recvbuff + rank * sendcount.
// The documentation defines no other overlap of the two buffers, so an overlap that is not the in-place form is
// refused with ncclInvalidArgument (real NCCL would silently compute something undefined; the emulation exists to
// find such bugs).
//
// Group calls (ncclGroupStart/ncclGroupEnd). Each call inside a group is executed immediately, when it is made,
// instead of being fused at ncclGroupEnd. That is equivalent for what the project does: every rank issues the same
// sequence of collectives in every group (the NCCL rule for collectives anyway), so the blocking MPI calls pair up
// in order. It would deadlock for point-to-point ncclSend/ncclRecv pairs, which need the fusion and are not
// emulated. The group depth is tracked per thread (NCCL's group state is per thread): ncclGroupEnd without a
// matching ncclGroupStart returns ncclInvalidUsage.
//
// Checks beyond real NCCL, all returning errors instead of hanging or corrupting memory:
//   - every multi-rank collective first exchanges a small signature (call number, collective, count, datatype, op,
//     root, and the rank's own argument-check result). When the ranks do not issue the same collective with the
//     same count/datatype/op/root (a sequence mismatch: on a GPU a hang or garbage), every rank returns
//     ncclInvalidUsage with a message listing each rank's call; when one rank's arguments are invalid, every rank
//     returns an error (that rank its own, the others ncclInvalidUsage naming it), so nobody waits forever;
//   - communicators are tracked: a destroyed, aborted or never-created ncclComm_t is ncclInvalidArgument, a
//     collective after ncclCommFinalize is ncclInvalidUsage;
//   - ncclCommInitRank checks, collectively, that every rank passed its MPI world rank and the same unique id.
// A collective with count 0 is a no-op after its argument checks (no communication).
//
// Errors: every failing call stores a one-line message that ncclGetLastError returns (process-wide, as in NCCL, whose
// comm argument is unused), and logs it when NCCL_DEBUG is set (WARN, INFO, ...). The log goes where NCCL's goes:
// stdout, or the file NCCL_DEBUG_FILE names (%h: the host name, %p: the pid); with NCCL_DEBUG=INFO a communicator
// that is ready says so ("Init COMPLETE"), as NCCL does.
//
// ncclCommAbort (what the project relies on, train/comm_nccl.cu): the project aborts the communicator on its error
// paths and then ends the whole job with MPI_Abort (NcclComm::abort_job -> comm_abort), and its destructor aborts
// during stack unwinding before main's catch prints the error and calls comm_abort. So ncclCommAbort here is LOCAL
// and returns at once: it frees this rank's communicator without any communication (the MPI duplicate is
// deliberately not freed: MPI_Comm_free is collective by the standard and the other ranks may be gone or blocked in
// a collective), and the other ranks stay blocked in their collective until the job is ended, as with real NCCL,
// whose ncclCommAbort also only affects the calling rank. It does not call MPI_Abort itself, so the error message
// that main prints after unwinding still appears. The one case where a local abort cannot work is a collective of
// this very communicator blocked in MPI on another thread (nothing can interrupt a blocking MPI call): then
// ncclCommAbort prints why and calls MPI_Abort on MPI_COMM_WORLD, so the job ends instead of hanging.
//
// Build: with MPI (PRAC_HAVE_MPI=1, or <mpi.h> on the include path when PRAC_HAVE_MPI is not defined) link MPI;
// with PRAC_HAVE_MPI=0 only one-rank communicators exist (nranks > 1 is ncclInvalidUsage). Never link libnccl.
// Test-only knob: NCCL_EMU_CHUNK_BYTES (read by ncclCommInitRank) caps the bytes one MPI call moves (default 64 MiB),
// to run the chunked paths on small buffers.
#include <nccl.h>

#include "kernels/cuda_emu/stream_order.h"

#include <strings.h>  // strcasecmp
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#if defined(PRAC_HAVE_MPI)
#if PRAC_HAVE_MPI
#define NCCL_EMU_MPI 1
#else
#define NCCL_EMU_MPI 0
#endif
#elif defined(__has_include)
#if __has_include(<mpi.h>)
#define NCCL_EMU_MPI 1
#else
#define NCCL_EMU_MPI 0
#endif
#else
#define NCCL_EMU_MPI 0
#endif

#if NCCL_EMU_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (no MPI C++ bindings, which warn and need libmpi_cxx)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

struct ncclComm {
    uint32_t magic = 0;
    int nranks = 1;
    int rank = 0;
    bool finalized = false;
    uint64_t calls = 0;                  // multi-rank collectives issued (their signature's call number)
    size_t chunk_bytes = size_t(64) << 20;  // most bytes one MPI call gathers (all ranks' parts together)
    std::atomic<int> busy{0};           // > 0 while a collective of this communicator runs (ncclCommAbort)
    char id[NCCL_UNIQUE_ID_BYTES] = {};
#if NCCL_EMU_MPI
    MPI_Comm mpi = MPI_COMM_NULL;  // the MPI_COMM_WORLD duplicate (nranks > 1)
#endif
};

namespace {

constexpr uint32_t kCommMagic = 0x4e454d55u;                        // a live emulated communicator
constexpr char kIdMagic[8] = {'N', 'C', 'C', 'L', '-', 'E', 'M', 'U'};  // first bytes of our unique ids

std::mutex g_mu;                     // guards the two below
std::set<const ncclComm*> g_live;    // communicators made by ncclCommInitRank and not yet destroyed/aborted
std::string g_last_error;            // ncclGetLastError's message (process-wide)
thread_local std::string t_last_error;  // the copy ncclGetLastError hands to this thread
thread_local int t_group_depth = 0;  // ncclGroupStart nesting of this thread

std::string vformat(const char* fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = std::vsnprintf(nullptr, 0, fmt, ap2);
    va_end(ap2);
    std::string s(n > 0 ? (size_t)n : 0, '\0');
    if (n > 0) std::vsnprintf(&s[0], (size_t)n + 1, fmt, ap);
    return s;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    return s;
}

bool debug_enabled() {
    const char* d = std::getenv("NCCL_DEBUG");
    return d && *d && std::strcmp(d, "VERSION") != 0;
}
bool info_enabled() {
    const char* d = std::getenv("NCCL_DEBUG");
    return d && (strcasecmp(d, "INFO") == 0 || strcasecmp(d, "TRACE") == 0);
}

// One line of the debug log: to NCCL_DEBUG_FILE (%h and %p expanded, opened once per process) or stdout.
void debug_log(const char* level, const std::string& msg) {
    static FILE* sink = [] {
        const char* f = std::getenv("NCCL_DEBUG_FILE");
        if (!f || !*f) return stdout;
        std::string path;
        for (const char* c = f; *c; c++) {
            if (c[0] == '%' && c[1] == 'h') {
                char host[256] = "?";
                gethostname(host, sizeof host - 1);
                path += host, c++;
            } else if (c[0] == '%' && c[1] == 'p') {
                path += std::to_string((int)getpid()), c++;
            } else {
                path += *c;
            }
        }
        FILE* fp = std::fopen(path.c_str(), "w");
        return fp ? fp : stdout;
    }();
    std::lock_guard<std::mutex> lock(g_mu);
    std::fprintf(sink, "NCCL %s [emulated NCCL, pid %d] %s\n", level, (int)getpid(), msg.c_str());
    std::fflush(sink);
}

ncclResult_t set_error(ncclResult_t r, const std::string& msg) {
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_last_error = msg;
    }
    if (debug_enabled()) debug_log("WARN", msg);
    return r;
}

ncclResult_t fail(ncclResult_t r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t fail(ncclResult_t r, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::string msg = vformat(fmt, ap);
    va_end(ap);
    return set_error(r, msg);
}

bool is_live(const ncclComm* c) {
    if (!c) return false;
    std::lock_guard<std::mutex> lock(g_mu);
    return g_live.count(c) && c->magic == kCommMagic;
}

// ---- types and operators ---------------------------------------------------------------------------------------

size_t type_size(int t) {
    switch (t) {
        case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
        case ncclFloat16: case ncclBfloat16: return 2;
        case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
        case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
        default: return 0;
    }
}

const char* type_name(int t) {
    switch (t) {
        case ncclInt8: return "ncclInt8";
        case ncclUint8: return "ncclUint8";
        case ncclInt32: return "ncclInt32";
        case ncclUint32: return "ncclUint32";
        case ncclInt64: return "ncclInt64";
        case ncclUint64: return "ncclUint64";
        case ncclFloat16: return "ncclFloat16";
        case ncclFloat32: return "ncclFloat32";
        case ncclFloat64: return "ncclFloat64";
        case ncclBfloat16: return "ncclBfloat16";
        case ncclFloat8e4m3: return "ncclFloat8e4m3";
        case ncclFloat8e5m2: return "ncclFloat8e5m2";
        default: return "(invalid datatype)";
    }
}

const char* op_name(int op) {
    switch (op) {
        case ncclSum: return "ncclSum";
        case ncclProd: return "ncclProd";
        case ncclMax: return "ncclMax";
        case ncclMin: return "ncclMin";
        case ncclAvg: return "ncclAvg";
        default: return "(invalid op)";
    }
}

bool is_float_type(int t) { return t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16; }
bool reducible_type(int t) { return is_float_type(t) || (t >= ncclInt8 && t <= ncclUint64); }

// bf16 <-> fp32. bf16 is the top half of an fp32; rounding to it is to nearest, ties to even; NaN stays NaN.
float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
uint16_t f32_to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

// Element access: Plain<T> stores T and accumulates in T; Bf16 stores bf16 and accumulates in fp32.
template <typename T>
struct Plain {
    using acc = T;
    static acc load(const unsigned char* p, size_t i) {
        T v;
        std::memcpy(&v, p + i * sizeof(T), sizeof(T));
        return v;
    }
    static void store(unsigned char* p, size_t i, acc v) { std::memcpy(p + i * sizeof(T), &v, sizeof(T)); }
    static acc round(acc v) { return v; }  // to the element type: already
};
struct Bf16 {
    using acc = float;
    static acc load(const unsigned char* p, size_t i) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        return bf16_to_f32(h);
    }
    static void store(unsigned char* p, size_t i, acc v) {
        uint16_t h = f32_to_bf16(v);
        std::memcpy(p + i * 2, &h, 2);
    }
    static acc round(acc v) { return bf16_to_f32(f32_to_bf16(v)); }
};

template <typename A>
A combine(int op, A a, A b) {
    if constexpr (std::is_integral_v<A>) {
        using U = std::make_unsigned_t<A>;  // wrap-around, no signed overflow
        if (op == ncclSum || op == ncclAvg) return (A)(U)((U)a + (U)b);
        if (op == ncclProd) return (A)(U)((U)a * (U)b);
    } else {
        if (op == ncclSum || op == ncclAvg) return a + b;
        if (op == ncclProd) return a * b;
    }
    if (op == ncclMax) return b > a ? b : a;
    return b < a ? b : a;  // ncclMin
}

// out[i] = parts[0][i] op parts[1][i] op ... op parts[n-1][i], in rank order; ncclAvg pre-multiplies each part by
// 1/n in the element type (floating types only, checked before; see the top of the file).
template <class E>
void reduce_parts(unsigned char* out, const std::vector<const unsigned char*>& parts, size_t count, int op) {
    using A = typename E::acc;
    const size_t n = parts.size();
    const A scale = E::round((A)(1.0 / (double)n));
    auto part = [&](size_t r, size_t i) {
        return op == ncclAvg ? E::round(E::load(parts[r], i) * scale) : E::load(parts[r], i);
    };
    for (size_t i = 0; i < count; i++) {
        A acc = part(0, i);
        for (size_t r = 1; r < n; r++) acc = combine<A>(op, acc, part(r, i));
        E::store(out, i, acc);
    }
}

[[maybe_unused]] void reduce(int type, int op, unsigned char* out, const std::vector<const unsigned char*>& parts, size_t count) {
    switch (type) {
        case ncclInt8: reduce_parts<Plain<int8_t>>(out, parts, count, op); break;
        case ncclUint8: reduce_parts<Plain<uint8_t>>(out, parts, count, op); break;
        case ncclInt32: reduce_parts<Plain<int32_t>>(out, parts, count, op); break;
        case ncclUint32: reduce_parts<Plain<uint32_t>>(out, parts, count, op); break;
        case ncclInt64: reduce_parts<Plain<int64_t>>(out, parts, count, op); break;
        case ncclUint64: reduce_parts<Plain<uint64_t>>(out, parts, count, op); break;
        case ncclFloat32: reduce_parts<Plain<float>>(out, parts, count, op); break;
        case ncclFloat64: reduce_parts<Plain<double>>(out, parts, count, op); break;
        case ncclBfloat16: reduce_parts<Bf16>(out, parts, count, op); break;
        default: break;  // unreachable: checked by check_type_op
    }
}

// ---- argument checks -------------------------------------------------------------------------------------------

// The result of a rank's own argument checks (carried in the signature to the other ranks).
struct Check {
    ncclResult_t code = ncclSuccess;
    std::string msg;
    bool ok() const { return code == ncclSuccess; }
    void set(ncclResult_t c, std::string m) {
        if (ok()) code = c, msg = std::move(m);
    }
};

void check_type_op(Check& ck, const char* fn, int type, int op, bool reduction) {
    if (type < 0 || type >= ncclNumTypes) {
        ck.set(ncclInvalidArgument, format("%s: invalid datatype %d (valid: 0 .. %d, ncclDataType_t)", fn, type,
                                           (int)ncclNumTypes - 1));
        return;
    }
    if (!reduction) return;
    if (op < 0 || op >= ncclNumOps) {
        ck.set(ncclInvalidArgument, format("%s: invalid reduction operation %d (valid: ncclSum, ncclProd, ncclMax, "
                                           "ncclMin, ncclAvg; user-defined operators are not emulated)", fn, op));
        return;
    }
    if (!reducible_type(type))
        ck.set(ncclInvalidArgument, format("%s: reductions on %s are not emulated (the emulated NCCL reduces int8, "
                                           "uint8, int32, uint32, int64, uint64, fp32, fp64 and bf16)", fn,
                                           type_name(type)));
    else if (op == ncclAvg && !is_float_type(type))
        ck.set(ncclInvalidArgument, format("%s: ncclAvg on %s is not emulated (only on fp32, fp64 and bf16)", fn,
                                           type_name(type)));
}

void check_root(Check& ck, const char* fn, int root, int nranks) {
    if (root < 0 || root >= nranks)
        ck.set(ncclInvalidArgument, format("%s: invalid root %d (must be in [0, nranks = %d))", fn, root, nranks));
}

void check_ptr(Check& ck, const char* fn, const void* p, const char* name) {
    if (!p) ck.set(ncclInvalidArgument, format("%s: %s is NULL", fn, name));
}

bool overlap(const void* a, size_t na, const void* b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

// The two buffers may only overlap in the documented in-place form (in_place: the pointers are that form).
void check_overlap(Check& ck, const char* fn, const void* send, size_t send_bytes, const void* recv, size_t recv_bytes,
                   bool in_place, const char* inplace_form) {
    if (in_place || !overlap(send, send_bytes, recv, recv_bytes)) return;
    ck.set(ncclInvalidArgument,
           format("%s: sendbuff %p (%zu bytes) and recvbuff %p (%zu bytes) overlap but are not the in-place form "
                  "(%s); the result would be undefined", fn, send, send_bytes, recv, recv_bytes, inplace_form));
}

bool mul_overflows(size_t a, size_t b) { return b && a > SIZE_MAX / b; }

// ---- the collectives' common part ------------------------------------------------------------------------------

enum Kind : int32_t { K_ALLREDUCE = 1, K_REDUCE, K_BROADCAST, K_REDUCESCATTER, K_ALLGATHER };
const char* kind_name(int k) {
    switch (k) {
        case K_ALLREDUCE: return "ncclAllReduce";
        case K_REDUCE: return "ncclReduce";
        case K_BROADCAST: return "ncclBroadcast";
        case K_REDUCESCATTER: return "ncclReduceScatter";
        case K_ALLGATHER: return "ncclAllGather";
        default: return "(unknown collective)";
    }
}

// What one rank is calling, exchanged before any data moves (fixed size, raw bytes over MPI).
struct Signature {
    uint64_t call;   // this rank's call number on the communicator (0, 1, ...)
    uint64_t count;
    int32_t kind, type, op, root;  // op and root: -1 where the collective has none
    int32_t code;                  // this rank's argument checks (ncclResult_t)
    char msg[220];                 // ... and their message
};
static_assert(sizeof(Signature) == 256, "Signature is exchanged as 256 raw bytes");

[[maybe_unused]] std::string describe(const Signature& s) {
    std::string d = format("call #%llu %s(count %llu, %s", (unsigned long long)s.call, kind_name(s.kind),
                           (unsigned long long)s.count, type_name(s.type));
    if (s.op >= 0) d += format(", %s", op_name(s.op));
    if (s.root >= 0) d += format(", root %d", s.root);
    return d + ")";
}

// RAII: the communicator is in a collective (ncclCommAbort from another thread must not free it).
struct Busy {
    ncclComm* c;
    explicit Busy(ncclComm* comm) : c(comm) { c->busy++; }
    ~Busy() { c->busy--; }
};

// Live-communicator and state checks that need no other rank.
ncclResult_t check_comm(const ncclComm* comm, const char* fn) {
    if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", fn);
    if (!is_live(comm))
        return fail(ncclInvalidArgument, "%s: comm %p is not a live communicator (destroyed, aborted, or not made by "
                    "ncclCommInitRank)", fn, (const void*)comm);
    if (comm->finalized)
        return fail(ncclInvalidUsage, "%s: the communicator was finalized (ncclCommFinalize); only ncclCommDestroy "
                    "may follow", fn);
    return ncclSuccess;
}

#if NCCL_EMU_MPI
ncclResult_t mpi_error(int rc, const char* fn, const char* what) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return fail(ncclSystemError, "%s: %s failed: %s", fn, what, text);
}
#define MPI_TRY(call, fn)                                         \
    do {                                                          \
        int mpi_rc_ = (call);                                     \
        if (mpi_rc_ != MPI_SUCCESS) return mpi_error(mpi_rc_, fn, #call); \
    } while (0)

// Elements per MPI call so that `parts` pieces of them fit the chunk budget, and one piece fits an int byte count.
size_t chunk_elems(const ncclComm* comm, size_t es, size_t parts) {
    size_t c = comm->chunk_bytes / (es * parts);
    c = std::min(c, (size_t)INT_MAX / es);
    return c ? c : 1;
}
#endif

// Runs the argument checks' outcome through the ranks: every rank learns every rank's call and check result.
// Returns ncclSuccess when every rank passed its checks and issued the same collective (then data may move).
ncclResult_t agree(ncclComm* comm, int kind, size_t count, int type, int op, int root, const Check& ck) {
#if NCCL_EMU_MPI
    const char* fn = kind_name(kind);
    Signature mine;
    std::memset(&mine, 0, sizeof mine);
    mine.call = comm->calls++;
    mine.count = count;
    mine.kind = kind;
    mine.type = type;
    mine.op = op;
    mine.root = root;
    mine.code = ck.code;
    std::snprintf(mine.msg, sizeof mine.msg, "%s", ck.msg.c_str());
    std::vector<Signature> all((size_t)comm->nranks);
    MPI_TRY(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all.data(), (int)sizeof mine, MPI_BYTE, comm->mpi), fn);
    // a rank whose arguments are invalid: it reports its own error, the others name it (nobody waits for it)
    if (!ck.ok()) return set_error(ck.code, ck.msg);
    for (int r = 0; r < comm->nranks; r++)
        if (all[(size_t)r].code != ncclSuccess)
            return fail(ncclInvalidUsage, "%s: rank %d of the communicator refused its arguments in the same "
                        "collective: %s", fn, r, all[(size_t)r].msg);
    bool same = true;
    for (const Signature& s : all)
        same = same && s.call == all[0].call && s.count == all[0].count && s.kind == all[0].kind &&
               s.type == all[0].type && s.op == all[0].op && s.root == all[0].root;
    if (!same) {
        std::string m = "the ranks did not issue the same collective (every rank must call the same collectives in "
                        "the same order with the same count, datatype, op and root):";
        for (int r = 0; r < comm->nranks; r++) m += format(" rank %d: %s;", r, describe(all[(size_t)r]).c_str());
        m.pop_back();
        return set_error(ncclInvalidUsage, std::string(fn) + ": " + m);
    }
    return ncclSuccess;
#else
    (void)comm, (void)kind, (void)count, (void)type, (void)op, (void)root, (void)ck;
    return fail(ncclInternalError, "internal: a multi-rank communicator in a build without MPI");
#endif
}

// The prologue of every collective: local checks, then (several ranks, count > 0) the agreement. *go is false when
// there is nothing more to do (an error, returned; or count 0 / one rank handled by the caller).
ncclResult_t begin(ncclComm* comm, int kind, size_t count, int type, int op, int root, const Check& ck, bool* go) {
    *go = false;
    if (comm->nranks == 1 || count == 0) {
        if (!ck.ok()) return set_error(ck.code, ck.msg);
        *go = count > 0;
        return ncclSuccess;
    }
    ncclResult_t r = agree(comm, kind, count, type, op, root, ck);
    *go = r == ncclSuccess;
    return r;
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes) std::memmove(dst, src, bytes);
}

}  // namespace

// ---- version, ids, errors --------------------------------------------------------------------------------------

ncclResult_t ncclGetVersion(int* version) {
    if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;  // the header's version: this stand-in implements that API
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    static std::atomic<uint64_t> counter{0};
    std::random_device rd;
    uint64_t nonce = ((uint64_t)rd() << 32) ^ (uint64_t)rd() ^
                     (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() ^
                     ((uint64_t)getpid() << 17) ^ (counter++ * 0x9e3779b97f4a7c15ull);
    std::memset(uniqueId, 0, sizeof *uniqueId);
    std::memcpy(uniqueId->internal, kIdMagic, sizeof kIdMagic);
    std::memcpy(uniqueId->internal + 8, &nonce, 8);
    int pid = (int)getpid();
    std::memcpy(uniqueId->internal + 16, &pid, sizeof pid);
    return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

const char* ncclGetLastError(ncclComm_t comm) {
    (void)comm;  // unused, as in NCCL: the last error of the process
    std::lock_guard<std::mutex> lock(g_mu);
    t_last_error = g_last_error;
    return t_last_error.c_str();
}

// ---- communicators ---------------------------------------------------------------------------------------------

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    const char* fn = "ncclCommInitRank";
    if (!comm) return fail(ncclInvalidArgument, "%s: comm (the output pointer) is NULL", fn);
    if (nranks < 1) return fail(ncclInvalidArgument, "%s: invalid nranks %d (must be >= 1)", fn, nranks);
    if (rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "%s: invalid rank %d (must be in [0, nranks = %d))", fn, rank, nranks);
    if (std::memcmp(commId.internal, kIdMagic, sizeof kIdMagic) != 0)
        return fail(ncclInvalidArgument, "%s: commId was not made by ncclGetUniqueId (rank 0 must create it and "
                    "every rank must receive it before ncclCommInitRank)", fn);
    size_t chunk = size_t(64) << 20;
    if (const char* e = std::getenv("NCCL_EMU_CHUNK_BYTES")) {
        long long v = std::atoll(e);
        if (v > 0) chunk = (size_t)v;
    }

    if (nranks > 1) {
#if !NCCL_EMU_MPI
        return fail(ncclInvalidUsage, "%s: nranks = %d, but this build of the emulated NCCL (CPU, no GPU) has no "
                    "MPI: it runs several ranks only as the processes of an MPI job (rebuild with MPI), or use "
                    "nranks = 1", fn, nranks);
#else
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (!initialized || finalized)
            return fail(ncclInvalidUsage, "%s: nranks = %d, but MPI is %s: the emulated NCCL (CPU, no GPU) runs its "
                        "ranks over MPI, one MPI process per rank; call MPI_Init first and start the job with mpirun "
                        "-np %d", fn, nranks, finalized ? "already finalized" : "not initialized", nranks);
        int wsize = 0, wrank = 0;
        MPI_Comm_size(MPI_COMM_WORLD, &wsize);
        MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
        if (wsize != nranks)
            return fail(ncclInvalidUsage, "%s: nranks = %d, but MPI_COMM_WORLD has %d process(es): the emulated NCCL "
                        "maps NCCL rank r to MPI world rank r, so nranks must be the world size (mpirun -np %d)", fn,
                        nranks, wsize, nranks);
        MPI_Comm dup = MPI_COMM_NULL;
        MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &dup), fn);
        // every rank checks every rank: its rank argument is its world rank, and all passed the same id
        struct Hello {
            int32_t rank;
            char id[NCCL_UNIQUE_ID_BYTES];
        } mine;
        mine.rank = rank;
        std::memcpy(mine.id, commId.internal, NCCL_UNIQUE_ID_BYTES);
        std::vector<Hello> all((size_t)wsize);
        int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all.data(), (int)sizeof mine, MPI_BYTE, dup);
        if (rc != MPI_SUCCESS) {
            MPI_Comm_free(&dup);
            return mpi_error(rc, fn, "MPI_Allgather");
        }
        std::string bad_rank, bad_id;
        for (int w = 0; w < wsize; w++) {
            if (all[(size_t)w].rank != w)
                bad_rank += format(" MPI world rank %d passed rank %d;", w, (int)all[(size_t)w].rank);
            if (std::memcmp(all[(size_t)w].id, all[0].id, NCCL_UNIQUE_ID_BYTES) != 0)
                bad_id += format(" %d", w);
        }
        if (!bad_rank.empty()) {
            MPI_Comm_free(&dup);
            bad_rank.pop_back();
            return fail(ncclInvalidUsage, "%s: the emulated NCCL maps NCCL rank r to MPI world rank r, but%s", fn,
                        bad_rank.c_str());
        }
        if (!bad_id.empty()) {
            MPI_Comm_free(&dup);
            return fail(ncclInvalidArgument, "%s: the ranks passed different commIds (world rank(s)%s differ from "
                        "rank 0's): make the id once on rank 0 with ncclGetUniqueId and broadcast it", fn,
                        bad_id.c_str());
        }
        ncclComm* c = new ncclComm;
        c->magic = kCommMagic;
        c->nranks = nranks;
        c->rank = rank;
        c->chunk_bytes = chunk;
        c->mpi = dup;
        std::memcpy(c->id, commId.internal, NCCL_UNIQUE_ID_BYTES);
        {
            std::lock_guard<std::mutex> lock(g_mu);
            g_live.insert(c);
        }
        *comm = c;
        if (info_enabled())
            debug_log("INFO", format("comm %p rank %d nranks %d - Init COMPLETE", (void*)c, rank, nranks));
        return ncclSuccess;
#endif
    }

    ncclComm* c = new ncclComm;
    c->magic = kCommMagic;
    c->nranks = 1;
    c->rank = 0;
    c->chunk_bytes = chunk;
    std::memcpy(c->id, commId.internal, NCCL_UNIQUE_ID_BYTES);
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_live.insert(c);
    }
    *comm = c;
    if (info_enabled()) debug_log("INFO", format("comm %p rank 0 nranks 1 - Init COMPLETE", (void*)c));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
    // the options tune performance or ask for non-blocking calls; every call here completes before it returns,
    // which is a valid outcome of a non-blocking call too
    if (config && config->magic != 0xcafebeefu)
        return fail(ncclInvalidArgument, "ncclCommInitRankConfig: config was not initialized with "
                    "NCCL_CONFIG_INITIALIZER");
    return ncclCommInitRank(comm, nranks, commId, rank);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (ncclResult_t r = check_comm(comm, "ncclCommFinalize"); r != ncclSuccess) return r;
    comm->finalized = true;  // nothing to flush: every operation completed when its call returned
    return ncclSuccess;
}

namespace {
void forget(ncclComm* comm) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_live.erase(comm);
    comm->magic = 0;
}
}  // namespace

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;  // a NULL communicator: nothing to free
    if (!is_live(comm))
        return fail(ncclInvalidArgument, "ncclCommDestroy: comm %p is not a live communicator (destroyed twice, "
                    "aborted, or not made by ncclCommInitRank)", (void*)comm);
    forget(comm);
#if NCCL_EMU_MPI
    if (comm->mpi != MPI_COMM_NULL) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&comm->mpi);
    }
#endif
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    if (!is_live(comm))
        return fail(ncclInvalidArgument, "ncclCommAbort: comm %p is not a live communicator (destroyed, aborted "
                    "twice, or not made by ncclCommInitRank)", (void*)comm);
#if NCCL_EMU_MPI
    if (comm->busy.load() > 0 && comm->nranks > 1) {
        // another thread is blocked in MPI inside a collective of this communicator: nothing can interrupt it
        std::fprintf(stderr, "[emulated NCCL] ncclCommAbort: rank %d of %d: a collective of this communicator is "
                     "blocked in MPI on another thread; ending the job with MPI_Abort\n", comm->rank, comm->nranks);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    // no MPI_Comm_free: collective by the MPI standard, and the other ranks may be gone or blocked (see the top)
    comm->mpi = MPI_COMM_NULL;
#endif
    forget(comm);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
    if (!comm || !is_live(comm)) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: comm is not a live communicator");
    if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    *asyncError = ncclSuccess;  // nothing runs asynchronously
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (!comm || !is_live(comm)) return fail(ncclInvalidArgument, "ncclCommCount: comm is not a live communicator");
    if (!count) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (!comm || !is_live(comm)) return fail(ncclInvalidArgument, "ncclCommUserRank: comm is not a live communicator");
    if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = comm->rank;
    return ncclSuccess;
}

// ---- groups ----------------------------------------------------------------------------------------------------

ncclResult_t ncclGroupStart() {
    t_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (t_group_depth == 0)
        return fail(ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart (unbalanced group calls)");
    t_group_depth--;  // the calls of the group were executed when they were made (see the top of this file)
    return ncclSuccess;
}

// ---- collectives -----------------------------------------------------------------------------------------------

// A collective's local bytes, read and written, for the race check across streams (stream_order.h): a stream
// operation of its own on `stream`, issued in program order where the collective runs.
static void report_bytes(cudaStream_t stream, const char* fn, const void* send, size_t send_bytes, const void* recv,
                         size_t recv_bytes) {
    cuda_emu::stream_run_now(stream, [&] {
        cuda_emu::op_access(send, send_bytes, false, fn);
        cuda_emu::op_access(recv, recv_bytes, true, fn);
    });
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    cuda_emu::stream_drain(stream);  // in program order: the stream's queued work, then the collective, now
    cuda_emu::DeviceWork device({sendbuff, recvbuff});  // (its buffers open at once: another rank may read them)
    const char* fn = "ncclAllReduce";
    if (ncclResult_t r = check_comm(comm, fn); r != ncclSuccess) return r;
    Check ck;
    check_type_op(ck, fn, datatype, op, true);
    const size_t es = type_size(datatype);
    if (ck.ok() && count) {
        check_ptr(ck, fn, sendbuff, "sendbuff");
        check_ptr(ck, fn, recvbuff, "recvbuff");
        if (mul_overflows(count, es * (size_t)comm->nranks))
            ck.set(ncclInvalidArgument, format("%s: count %zu is too large", fn, count));
        else
            check_overlap(ck, fn, sendbuff, count * es, recvbuff, count * es, sendbuff == recvbuff,
                          "sendbuff == recvbuff");
    }
    Busy busy(comm);
    bool go = false;
    if (ncclResult_t r = begin(comm, K_ALLREDUCE, count, datatype, op, -1, ck, &go); !go) return r;
    report_bytes(stream, fn, sendbuff, count * es, recvbuff, count * es);
    if (comm->nranks == 1) {
        copy_bytes(recvbuff, sendbuff, count * es);
        return ncclSuccess;
    }
#if NCCL_EMU_MPI
    const size_t n = (size_t)comm->nranks, step = chunk_elems(comm, es, n);
    std::vector<unsigned char> gathered(std::min(step, count) * es * n);
    std::vector<const unsigned char*> parts(n);
    for (size_t o = 0; o < count; o += step) {
        const size_t c = std::min(step, count - o), bytes = c * es;
        MPI_TRY(MPI_Allgather((const unsigned char*)sendbuff + o * es, (int)bytes, MPI_BYTE, gathered.data(),
                              (int)bytes, MPI_BYTE, comm->mpi), fn);
        for (size_t r = 0; r < n; r++) parts[r] = gathered.data() + r * bytes;
        reduce(datatype, op, (unsigned char*)recvbuff + o * es, parts, c);
    }
#endif
    return ncclSuccess;
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
    cuda_emu::stream_drain(stream);  // in program order: the stream's queued work, then the collective, now
    cuda_emu::DeviceWork device({sendbuff, recvbuff});  // (its buffers open at once: another rank may read them)
    const char* fn = "ncclReduce";
    if (ncclResult_t r = check_comm(comm, fn); r != ncclSuccess) return r;
    Check ck;
    check_type_op(ck, fn, datatype, op, true);
    check_root(ck, fn, root, comm->nranks);
    const size_t es = type_size(datatype);
    const bool is_root = comm->rank == root;
    if (ck.ok() && count) {
        check_ptr(ck, fn, sendbuff, "sendbuff");
        if (is_root) check_ptr(ck, fn, recvbuff, "recvbuff (on the root)");  // recvbuff is only used on the root
        if (mul_overflows(count, es * (size_t)comm->nranks))
            ck.set(ncclInvalidArgument, format("%s: count %zu is too large", fn, count));
        else if (is_root)
            check_overlap(ck, fn, sendbuff, count * es, recvbuff, count * es, sendbuff == recvbuff,
                          "sendbuff == recvbuff");
    }
    Busy busy(comm);
    bool go = false;
    if (ncclResult_t r = begin(comm, K_REDUCE, count, datatype, op, root, ck, &go); !go) return r;
    report_bytes(stream, fn, sendbuff, count * es, recvbuff, is_root ? count * es : 0);
    if (comm->nranks == 1) {
        copy_bytes(recvbuff, sendbuff, count * es);
        return ncclSuccess;
    }
#if NCCL_EMU_MPI
    const size_t n = (size_t)comm->nranks, step = chunk_elems(comm, es, n);
    std::vector<unsigned char> gathered(is_root ? std::min(step, count) * es * n : 0);
    std::vector<const unsigned char*> parts(n);
    for (size_t o = 0; o < count; o += step) {
        const size_t c = std::min(step, count - o), bytes = c * es;
        MPI_TRY(MPI_Gather((const unsigned char*)sendbuff + o * es, (int)bytes, MPI_BYTE,
                           is_root ? gathered.data() : nullptr, (int)bytes, MPI_BYTE, root, comm->mpi), fn);
        if (!is_root) continue;
        for (size_t r = 0; r < n; r++) parts[r] = gathered.data() + r * bytes;
        reduce(datatype, op, (unsigned char*)recvbuff + o * es, parts, c);
    }
#endif
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    cuda_emu::stream_drain(stream);  // in program order: the stream's queued work, then the collective, now
    cuda_emu::DeviceWork device({sendbuff, recvbuff});  // (its buffers open at once: another rank may read them)
    const char* fn = "ncclBroadcast";
    if (ncclResult_t r = check_comm(comm, fn); r != ncclSuccess) return r;
    Check ck;
    check_type_op(ck, fn, datatype, -1, false);
    check_root(ck, fn, root, comm->nranks);
    const size_t es = type_size(datatype);
    const bool is_root = comm->rank == root;
    if (ck.ok() && count) {
        if (is_root) check_ptr(ck, fn, sendbuff, "sendbuff (on the root)");  // sendbuff is only used on the root
        check_ptr(ck, fn, recvbuff, "recvbuff");
        if (mul_overflows(count, es))
            ck.set(ncclInvalidArgument, format("%s: count %zu is too large", fn, count));
        else if (is_root)
            check_overlap(ck, fn, sendbuff, count * es, recvbuff, count * es, sendbuff == recvbuff,
                          "sendbuff == recvbuff");
    }
    Busy busy(comm);
    bool go = false;
    if (ncclResult_t r = begin(comm, K_BROADCAST, count, datatype, -1, root, ck, &go); !go) return r;
    report_bytes(stream, fn, sendbuff, comm->rank == root ? count * es : 0, recvbuff, count * es);
    if (is_root) copy_bytes(recvbuff, sendbuff, count * es);
    if (comm->nranks == 1) return ncclSuccess;
#if NCCL_EMU_MPI
    const size_t step = chunk_elems(comm, es, 1);
    for (size_t o = 0; o < count; o += step) {
        const size_t c = std::min(step, count - o);
        MPI_TRY(MPI_Bcast((unsigned char*)recvbuff + o * es, (int)(c * es), MPI_BYTE, root, comm->mpi), fn);
    }
#endif
    return ncclSuccess;
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);  // the documented equivalence
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    cuda_emu::stream_drain(stream);  // in program order: the stream's queued work, then the collective, now
    cuda_emu::DeviceWork device({sendbuff, recvbuff});  // (its buffers open at once: another rank may read them)
    const char* fn = "ncclReduceScatter";
    if (ncclResult_t r = check_comm(comm, fn); r != ncclSuccess) return r;
    Check ck;
    check_type_op(ck, fn, datatype, op, true);
    const size_t es = type_size(datatype), n = (size_t)comm->nranks;
    if (ck.ok() && recvcount) {
        check_ptr(ck, fn, sendbuff, "sendbuff");
        check_ptr(ck, fn, recvbuff, "recvbuff");
        if (mul_overflows(recvcount, es * n))
            ck.set(ncclInvalidArgument, format("%s: recvcount %zu is too large", fn, recvcount));
        else
            check_overlap(ck, fn, sendbuff, n * recvcount * es, recvbuff, recvcount * es,
                          (uintptr_t)recvbuff == (uintptr_t)sendbuff + (size_t)comm->rank * recvcount * es,
                          "recvbuff == sendbuff + rank * recvcount");
    }
    Busy busy(comm);
    bool go = false;
    if (ncclResult_t r = begin(comm, K_REDUCESCATTER, recvcount, datatype, op, -1, ck, &go); !go) return r;
    report_bytes(stream, fn, sendbuff, recvcount * es * (size_t)comm->nranks, recvbuff, recvcount * es);
    if (comm->nranks == 1) {
        copy_bytes(recvbuff, sendbuff, recvcount * es);  // rank 0's block is the whole send buffer
        return ncclSuccess;
    }
#if NCCL_EMU_MPI
    // rank r receives block r of every rank: an all-to-all of the blocks (chunk by chunk), then the reduction
    const size_t step = chunk_elems(comm, es, n), cmax = std::min(step, recvcount);
    std::vector<unsigned char> packed(cmax * es * n), gathered(cmax * es * n);
    std::vector<const unsigned char*> parts(n);
    for (size_t o = 0; o < recvcount; o += step) {
        const size_t c = std::min(step, recvcount - o), bytes = c * es;
        for (size_t j = 0; j < n; j++)
            std::memcpy(packed.data() + j * bytes, (const unsigned char*)sendbuff + (j * recvcount + o) * es, bytes);
        MPI_TRY(MPI_Alltoall(packed.data(), (int)bytes, MPI_BYTE, gathered.data(), (int)bytes, MPI_BYTE, comm->mpi),
                fn);
        for (size_t r = 0; r < n; r++) parts[r] = gathered.data() + r * bytes;
        // in place, this overwrites sendbuff's own block at [o, o + c): already packed, never read again
        reduce(datatype, op, (unsigned char*)recvbuff + o * es, parts, c);
    }
#endif
    return ncclSuccess;
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    cuda_emu::stream_drain(stream);  // in program order: the stream's queued work, then the collective, now
    cuda_emu::DeviceWork device({sendbuff, recvbuff});  // (its buffers open at once: another rank may read them)
    const char* fn = "ncclAllGather";
    if (ncclResult_t r = check_comm(comm, fn); r != ncclSuccess) return r;
    Check ck;
    check_type_op(ck, fn, datatype, -1, false);
    const size_t es = type_size(datatype), n = (size_t)comm->nranks;
    if (ck.ok() && sendcount) {
        check_ptr(ck, fn, sendbuff, "sendbuff");
        check_ptr(ck, fn, recvbuff, "recvbuff");
        if (mul_overflows(sendcount, es * n))
            ck.set(ncclInvalidArgument, format("%s: sendcount %zu is too large", fn, sendcount));
        else
            check_overlap(ck, fn, sendbuff, sendcount * es, recvbuff, n * sendcount * es,
                          (uintptr_t)sendbuff == (uintptr_t)recvbuff + (size_t)comm->rank * sendcount * es,
                          "sendbuff == recvbuff + rank * sendcount");
    }
    Busy busy(comm);
    bool go = false;
    if (ncclResult_t r = begin(comm, K_ALLGATHER, sendcount, datatype, -1, -1, ck, &go); !go) return r;
    report_bytes(stream, fn, sendbuff, sendcount * es, recvbuff, sendcount * es * (size_t)comm->nranks);
    if (comm->nranks == 1) {
        copy_bytes(recvbuff, sendbuff, sendcount * es);
        return ncclSuccess;
    }
#if NCCL_EMU_MPI
    const size_t step = chunk_elems(comm, es, n);
    std::vector<unsigned char> gathered(std::min(step, sendcount) * es * n);
    for (size_t o = 0; o < sendcount; o += step) {
        const size_t c = std::min(step, sendcount - o), bytes = c * es;
        MPI_TRY(MPI_Allgather((const unsigned char*)sendbuff + o * es, (int)bytes, MPI_BYTE, gathered.data(),
                              (int)bytes, MPI_BYTE, comm->mpi), fn);
        // in place, block `rank` is written with the bytes it already holds; no other block overlaps sendbuff
        for (size_t j = 0; j < n; j++)
            std::memcpy((unsigned char*)recvbuff + (j * sendcount + o) * es, gathered.data() + j * bytes, bytes);
    }
#endif
    return ncclSuccess;
}
