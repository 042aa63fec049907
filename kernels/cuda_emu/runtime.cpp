// The CUDA runtime API on a CPU: the functions of cuda_runtime_api.h that the project calls, with the semantics the
// CUDA Runtime API reference gives them, on one emulated sm_90 device. Device memory is host memory (pages of its
// own, closed to host code: device_memory.cpp; tracked so cudaFree and cudaMemGetInfo behave); each stream is a queue
// that runs when something waits for it (stream_order.h: PRAC_EMU_STREAMS=deferred, the default; =eager runs every
// operation as it is issued), and events mark positions in those queues and time their execution; work from several
// host threads runs one operation at a time; the current device is each host thread's; errors follow the runtime's
// rules: a launch refused up front sets the calling host thread's last error (cudaGetLastError returns and clears it;
// another thread's is its own, as the reference says "in the same host thread"), a kernel that fails while running
// leaves a sticky error that every later call on every thread returns (and nothing queued runs after it).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda_emu/emu_internal.h"
#include "kernels/cuda_emu/libs_emu.h"  // set_host_memory_check
#include "kernels/cuda_emu/stream_order.h"

namespace cuda_emu {
namespace {

std::mutex g_mu;  // the runtime may be called from several host threads (OpenMP regions, NCCL's progress)
thread_local cudaError_t t_last = cudaSuccess;  // each host thread's last error, cleared by its cudaGetLastError
std::atomic<cudaError_t> g_sticky{cudaSuccess};  // a kernel failed: the context is unusable (read unlocked)
thread_local int t_device = 0;  // the current device is the host thread's (a new thread starts on 0)
std::string g_message;
std::map<std::string, long> g_launches;
long g_launches_off_main = 0;  // kernels launched from a host thread other than main()'s
long g_races = 0;

// Device memory: what the H100 reports (80 GiB), minus what is allocated.
constexpr size_t kDeviceBytes = 80ull << 30;
std::map<const void*, size_t> g_allocs;
size_t g_allocated = 0;
long g_malloc_calls = 0;
std::map<const void*, size_t> g_pinned;  // cudaMallocHost allocations: async copies from/to them do not wait
long g_host_waits = 0;

// A call that makes the host wait for the device on a GPU (counted, and with PRAC_EMU_TRACE_HOST_WAITS=1 printed
// to stdout, where a test can place it between a program's own lines). PRAC_EMU_FAULT_AT_WAIT=N: the N-th wait
// finds the device faulted (an illegal address, sticky, as an Xid or a bad kernel leaves it on a GPU), for the
// tests of what a process does then.
void note_host_wait(const char* what) {
    static const bool trace = [] {
        const char* e = std::getenv("PRAC_EMU_TRACE_HOST_WAITS");
        return e && std::strcmp(e, "1") == 0;
    }();
    static const long fault_at = [] {
        const char* e = std::getenv("PRAC_EMU_FAULT_AT_WAIT");
        return e ? std::atol(e) : 0L;
    }();
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_host_waits++;
        if (g_host_waits == fault_at) {
            g_sticky = t_last = cudaErrorIllegalAddress;
            g_message = "cuda_emu: PRAC_EMU_FAULT_AT_WAIT: the device faulted before this wait";
        }
    }
    if (trace) std::printf("cuda_emu: host waits for the device (%s)\n", what);
}
// The allocation of m (start, size) that p lies in, its end included, or null; under g_mu.
const std::pair<const void* const, size_t>* allocation_at(const std::map<const void*, size_t>& m, const void* p) {
    auto it = m.upper_bound(p);
    if (it == m.begin()) return nullptr;
    --it;
    const char *a = static_cast<const char*>(p), *base = static_cast<const char*>(it->first);
    return a >= base && a <= base + it->second ? &*it : nullptr;
}
// Whether [p, p + n) lies inside one allocation of m.
bool inside(const std::map<const void*, size_t>& m, const void* p, size_t n) {
    std::lock_guard<std::mutex> lock(g_mu);
    const auto* a = allocation_at(m, p);
    return a && static_cast<const char*>(p) + n <= static_cast<const char*>(a->first) + a->second;
}
bool pinned_host_range(const void* p, size_t n) { return inside(g_pinned, p, n); }

std::map<const void*, int> g_smem_limit;  // cudaFuncAttributeMaxDynamicSharedMemorySize per kernel
constexpr int kDefaultSmem = (int)kStaticSmemLimit;
constexpr int kOptinSmem = (int)kOptinSmemLimit;  // sm_90: 227 KiB per block with the opt-in, 228 KiB per SM

cudaError_t ret(cudaError_t e, const char* what = nullptr) {
    if (e != cudaSuccess) {
        std::lock_guard<std::mutex> lock(g_mu);
        t_last = e;
        if (what) g_message = std::string("cuda_emu: ") + what;
    }
    return e;
}
// Every call reports a sticky error first.
#define CUDA_EMU_STICKY()                                    \
    do {                                                     \
        if (g_sticky != cudaSuccess) return g_sticky.load(); \
    } while (0)

// A stream: the operations issued to it and not yet run, in order (stream_order.h).
struct EmuStream {
    int index = 0;          // its number in creation order (from 1; 0 is the legacy default stream)
    std::vector<uint32_t> clock;  // emu_internal.h's OpOrder::seen of its next operation, before that one counts
    int priority = 0;
    int device = 0;         // the current device when it was made: kernels and event records need it current
    bool blocking = true;   // false: cudaStreamNonBlocking, which the legacy default stream does not wait for
    std::deque<std::function<void()>> queue;
    uint64_t issued = 0, done = 0;  // operations issued to it, and run (or dropped after a fault), so far
    bool running = false;           // run_queue is working through it
};
// An event: the position of its last record in a stream's queue; complete once the stream has run that far. Each
// record's marker owns the time it writes when it runs, so an event destroyed or recorded again meanwhile is safe.
struct EmuEvent {
    std::shared_ptr<std::chrono::steady_clock::time_point> t;  // the last record's time (null: never recorded)
    bool timing = true;
    int device = 0;               // the current device when it was made
    EmuStream* stream = nullptr;  // the last record's stream (null: ran when recorded)
    uint64_t ticket = 0;          // and its position there
    std::vector<uint32_t> clock;  // what happens before the last record (its stream's clock then)
};
// Every operation runs under g_exec, one at a time, whichever host thread issued it or runs its queue; recursive
// because an operation may run other queues (a queued wait for an event).
std::recursive_mutex g_exec;
// Every stream ever created: a destroyed stream is emptied and kept, so a wait queued elsewhere that names it stays
// valid (a few bytes per stream).
std::vector<EmuStream*> g_streams;
long g_queued_run = 0;  // operations run from a queue (queued_operations_run)
EmuStream* as_stream(cudaStream_t s) { return reinterpret_cast<EmuStream*>(s); }

// ---- happens-before between stream operations (emu_internal.h's OpOrder), under g_exec --------------------------
using Clock = std::vector<uint32_t>;
Clock g_host_clock;    // what the host has waited for, every host thread together
Clock g_legacy_clock;  // the legacy default stream's (index 0)
uint64_t g_op_serial = 0;
const OpOrder* g_running = nullptr;  // the operation running now
void join(Clock& into, const Clock& c) {
    if (into.size() < c.size()) into.resize(c.size(), 0);
    for (size_t i = 0; i < c.size(); i++) into[i] = std::max(into[i], c[i]);
}
// Every stream's clock (a device-wide wait), or the legacy stream's and the blocking streams' (what the legacy
// stream's next operation, or a wait for it, comes after).
Clock clock_of_all(bool blocking_only) {
    Clock c = g_legacy_clock;
    for (const EmuStream* s : g_streams)
        if (!blocking_only || s->blocking) join(c, s->clock);
    return c;
}
// The order of an operation issued now to s (null: the legacy default stream, whose operations run now here but are
// asynchronous to the host on a GPU: only the calls that wait, below, tell the host's clock).
std::shared_ptr<const OpOrder> issue_order(EmuStream* s) {
    Clock& c = s ? s->clock : g_legacy_clock;
    const int i = s ? s->index : 0;
    join(c, g_host_clock);
    if (!s) join(c, clock_of_all(/*blocking_only=*/true));
    else if (s->blocking) join(c, g_legacy_clock);
    if (c.size() <= (size_t)i) c.resize((size_t)i + 1, 0);
    c[(size_t)i]++;
    auto o = std::make_shared<OpOrder>();
    o->serial = ++g_op_serial;
    o->stream = i;
    o->clock = c[(size_t)i];
    o->seen = c;
    o->cross_check = cross_stream_check_on();
    return o;
}
// The host waited for s's work issued so far (null: the legacy stream's and the blocking streams').
void host_saw(EmuStream* s) { join(g_host_clock, s ? s->clock : clock_of_all(/*blocking_only=*/true)); }
void host_saw_legacy() {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    host_saw(nullptr);
}
void host_saw_everything() {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    join(g_host_clock, clock_of_all(/*blocking_only=*/false));
}
void run_in_order(const OpOrder* o, const std::function<void()>& op) {
    const OpOrder* outer = g_running;  // a queued wait runs other queues' operations inside its own
    g_running = o;
    DeviceWork device;  // device memory open to it
    op();
    g_running = outer;
}

// Runs s's queue up to its operation number `upto` (1-based). After a fault nothing more runs, as on a GPU whose
// context has failed: the operations are dropped.
void run_queue(EmuStream* s, uint64_t upto) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (s->done >= upto) return;
    // An operation of s that needs later work of s itself, through other streams' waits: impossible through the
    // API (a wait names work issued before it), so a bug of this file.
    if (s->running) {
        std::fprintf(stderr, "cuda_emu: internal error: a stream's queue asked to run past its running operation\n");
        std::abort();
    }
    s->running = true;
    while (s->done < upto && !s->queue.empty()) {
        std::function<void()> op = std::move(s->queue.front());
        s->queue.pop_front();
        s->done++;
        if (g_sticky == cudaSuccess) op();
        g_queued_run++;
    }
    s->running = false;
}
// Every stream's queue (a device-wide wait), or only the blocking streams' (what the legacy default stream waits for:
// the runtime reference's "stream synchronization behavior" exempts cudaStreamNonBlocking streams).
void run_all_queues(bool blocking_only = false) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    for (size_t i = 0; i < g_streams.size(); i++)
        if (!blocking_only || g_streams[i]->blocking) run_queue(g_streams[i], g_streams[i]->issued);
}
bool event_complete(const EmuEvent* ev) { return !ev->stream || ev->stream->done >= ev->ticket; }

bool known_device_pointer(const void* p, size_t n) { return inside(g_allocs, p, n); }

}  // namespace

void set_launch_error(cudaError_t e, const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::lock_guard<std::mutex> lock(g_mu);
    t_last = e;
    g_message = message;
}
void set_kernel_error(const std::string& message) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_sticky = cudaErrorLaunchFailure;  // the context's, not the last error of whichever thread ran the queue
    if (g_message.empty() || g_message.find("cuda_emu: kernel") != 0) g_message = message;
}
cudaError_t sticky_error() { return g_sticky; }
std::string last_error_message() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_message;
}
void reset_errors() {
    std::lock_guard<std::mutex> lock(g_mu);
    t_last = g_sticky = cudaSuccess;
    g_message.clear();
}
int max_dynamic_smem(const void* kernel) {
    const int set = dynamic_smem_attribute(kernel);
    return set < 0 ? kDefaultSmem : set;
}
int dynamic_smem_attribute(const void* kernel) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_smem_limit.find(kernel);
    return it == g_smem_limit.end() ? -1 : it->second;
}
void note_launch(const char* kernel, bool failed, long races, bool off_main) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_launches[kernel]++;
    g_launches_off_main += off_main;
    g_races += races;
    (void)failed;
}
long launches_off_main_thread() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_launches_off_main;
}
long launches_of(const std::string& kernel) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_launches.find(kernel);
    return it == g_launches.end() ? 0 : it->second;
}
long malloc_calls() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_malloc_calls;
}
long host_waits() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_host_waits;
}
long queued_operations_run() {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    return g_queued_run;
}
void note_races(long n) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_races += n;
}
long races_seen() {
    std::lock_guard<std::mutex> lock(g_mu);
    return g_races;
}
// PRAC_EMU_RACECHECK: 1 (the default; also empty) checks shared memory and the first launches of each kernel
// configuration in global memory, all every launch in both, shared only shared memory, 0 neither (a malformed value
// is an error, not a silent default).
static int race_check_level() {
    static const int level = [] {
        const char* e = std::getenv("PRAC_EMU_RACECHECK");
        if (!e || !*e || std::strcmp(e, "1") == 0) return 2;
        if (std::strcmp(e, "all") == 0) return 3;
        if (std::strcmp(e, "shared") == 0) return 1;
        if (std::strcmp(e, "0") == 0) return 0;
        std::fprintf(stderr, "cuda_emu: PRAC_EMU_RACECHECK=%s: expected 1 (the default: shared memory, and global "
                             "memory in each kernel configuration's first launches), all, shared, or 0\n", e);
        std::exit(2);
    }();
    return level;
}
// ---- which memory a device operand may be ------------------------------------------------------------------------
// Host and device memory are one here; on a GPU a kernel or a library routine given a pointer to pageable host memory
// faults (an illegal address). cudaMallocHost's memory is reachable from the device (unified addressing).
std::atomic<bool> g_host_memory_check{true};
bool set_host_memory_check(bool on) { return g_host_memory_check.exchange(on); }

std::string device_range_problem(const void* p, size_t n) {
    if (!p || !g_host_memory_check) return "";
    std::lock_guard<std::mutex> lock(g_mu);
    for (const auto* m : {&g_allocs, &g_pinned}) {
        const auto* at = allocation_at(*m, p);
        if (!at) continue;
        const size_t from = (size_t)(static_cast<const char*>(p) - static_cast<const char*>(at->first));
        if (from + n <= at->second) return "";
        char b[200];
        std::snprintf(b, sizeof b, "bytes %zu to %zu of a %zu-byte %s allocation: past its end", from, from + n,
                      at->second, m == &g_allocs ? "cudaMalloc" : "cudaMallocHost");
        return b;
    }
    return "pageable host memory (from neither cudaMalloc nor cudaMallocHost: a std::vector's, a local variable's, "
           "new's), which a GPU cannot reach: it faults (an illegal address)";
}

bool race_check_enabled() { return race_check_level() >= 1; }
bool global_race_check_enabled() { return race_check_level() >= 2; }
bool global_race_check_every_launch() { return race_check_level() >= 3; }

bool streams_deferred() {
    static const bool deferred = [] {
        const char* e = std::getenv("PRAC_EMU_STREAMS");
        if (!e || !*e || std::strcmp(e, "deferred") == 0) return true;
        if (std::strcmp(e, "eager") == 0) return false;
        std::fprintf(stderr, "cuda_emu: PRAC_EMU_STREAMS=%s: expected deferred (the default) or eager\n", e);
        std::exit(2);
    }();
    return deferred;
}
void stream_op(cudaStream_t s, std::function<void()> op) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (!s || !streams_deferred()) return stream_run_now(s, op);  // the legacy default stream: after the blocking ones
    as_stream(s)->queue.push_back([o = issue_order(as_stream(s)), op = std::move(op)] { run_in_order(o.get(), op); });
    as_stream(s)->issued++;
}
void stream_drain(cudaStream_t s) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (s)
        run_queue(as_stream(s), as_stream(s)->issued);
    else
        run_all_queues(/*blocking_only=*/true);
}
cudaError_t stream_device_check(cudaStream_t s, const char* what) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (!s || as_stream(s)->device == t_device) return cudaSuccess;
    char b[200];
    std::snprintf(b, sizeof b, "%s on a stream of device %d while device %d is current (the Programming Guide: it "
                  "fails when the stream is not associated to the current device)", what, as_stream(s)->device,
                  t_device);
    set_launch_error(cudaErrorInvalidResourceHandle, std::string("cuda_emu: ") + b);
    return cudaErrorInvalidResourceHandle;
}
void stream_run_now(cudaStream_t s, const std::function<void()>& op) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    stream_drain(s);
    const std::shared_ptr<const OpOrder> o = issue_order(as_stream(s));
    if (g_sticky == cudaSuccess) run_in_order(o.get(), op);
}
const OpOrder* running_op() { return g_running; }
std::string stream_label(int stream) {
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (stream <= 0 || (size_t)stream > g_streams.size()) return "the legacy default stream";
    char b[80];  // (the number counts every stream of the process, the libraries' too: the handle value names it)
    std::snprintf(b, sizeof b, "stream %d (%p%s)", stream, (void*)g_streams[(size_t)stream - 1],
                  g_streams[(size_t)stream - 1]->blocking ? "" : ", non-blocking");
    return b;
}

}  // namespace cuda_emu

using namespace cuda_emu;

// ---- errors ----------------------------------------------------------------------------------------------------------
cudaError_t cudaGetLastError() {
    std::lock_guard<std::mutex> lock(g_mu);
    const cudaError_t sticky = g_sticky;
    cudaError_t e = sticky != cudaSuccess ? sticky : t_last;
    t_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() {
    std::lock_guard<std::mutex> lock(g_mu);
    const cudaError_t sticky = g_sticky;
    return sticky != cudaSuccess ? sticky : t_last;
}
const char* cudaGetErrorName(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
        case cudaErrorNotSupported: return "cudaErrorNotSupported";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
        default: return "unrecognized error code";
    }
}
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorLaunchFailure: return "unspecified launch failure (emulated: see the cuda_emu message above)";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
        case cudaErrorNotSupported: return "operation not supported";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorInvalidDeviceFunction: return "invalid device function";
        default: return "unrecognized error code";
    }
}

// ---- device -------------------------------------------------------------------------------------------------------------
// One emulated GPU, or PRAC_EMU_DEVICES of them (0 to 16; 0: a machine without a GPU): several MPI ranks of one node,
// each on "its own GPU", as the multi-GPU tests need. Every device is the same sm_90 description; a process uses the
// one it selects. CUDA_VISIBLE_DEVICES is honoured as the CUDA runtime documents it for numbers: the listed GPUs,
// renumbered from 0 in that order, up to the first index that is not a GPU; set but empty, none (so a job can give
// each rank its own GPU, as Slurm's --gpus-per-task does). Each visible device keeps its GPU's UUID.
static const std::vector<int>& visible_gpus() {
    static const std::vector<int> gpus = [] {
        const char* e = std::getenv("PRAC_EMU_DEVICES");
        int physical = e ? std::atoi(e) : 1;
        if (physical < 0 || physical > 16) physical = 1;
        std::vector<int> v;
        const char* list = std::getenv("CUDA_VISIBLE_DEVICES");
        if (!list) {
            for (int i = 0; i < physical; i++) v.push_back(i);
            return v;
        }
        for (const char* p = list; *p;) {
            char* end = nullptr;
            long i = std::strtol(p, &end, 10);
            if (end == p || i < 0 || i >= physical || (*end != ',' && *end != '\0')) break;
            v.push_back((int)i);
            p = *end == ',' ? end + 1 : end;
        }
        return v;
    }();
    return gpus;
}
static int device_count() { return (int)visible_gpus().size(); }
cudaError_t cudaGetDeviceCount(int* count) {
    if (!count) return ret(cudaErrorInvalidValue);
    *count = device_count();
    return *count > 0 ? cudaSuccess : ret(cudaErrorNoDevice);  // the runtime's answer without a GPU
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return ret(cudaErrorInvalidDevice);
    t_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
    if (!device) return ret(cudaErrorInvalidValue);
    *device = t_device;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
    note_host_wait("cudaDeviceSynchronize");
    run_all_queues();
    host_saw_everything();
    CUDA_EMU_STICKY();
    return cudaSuccess;
}
cudaError_t cudaDeviceReset() {
    reset_errors();
    return cudaSuccess;
}
// An H100 SXM as cudaGetDeviceProperties describes it; the name says what it is.
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (!p) return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count()) return ret(cudaErrorInvalidDevice);
    std::memset(p, 0, sizeof *p);
    std::snprintf(p->name, sizeof p->name, "cuda_emu (CPU emulation of an sm_90 GPU)");
    const int gpu = visible_gpus()[device];  // the UUID is the GPU's, whatever number this process gives it
    std::memcpy(p->uuid.bytes, "cuda_emu", 8);
    p->uuid.bytes[15] = (char)gpu;
    p->pciBusID = gpu;
    p->major = 9;
    p->minor = 0;
    p->totalGlobalMem = kDeviceBytes;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = kOptinSmem;
    p->sharedMemPerMultiprocessor = 228 * 1024;
    p->regsPerBlock = 65536;
    p->regsPerMultiprocessor = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->multiProcessorCount = 132;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->l2CacheSize = 50 * 1024 * 1024;
    p->memoryBusWidth = 5120;
    p->totalConstMem = 65536;
    p->textureAlignment = 512;
    p->concurrentKernels = 1;
    p->unifiedAddressing = 1;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    if (!value) return ret(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count()) return ret(cudaErrorInvalidDevice);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, device);
    switch (attr) {
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
        case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
        case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
        case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
        case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
        case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
        case cudaDevAttrWarpSize: *value = 32; break;
        default: return ret(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute not emulated");
    }
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
    if (!v) return ret(cudaErrorInvalidValue);
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) { return cudaRuntimeGetVersion(v); }
cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    if (!func) return ret(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (value < 0 || value > kOptinSmem)
            return ret(cudaErrorInvalidValue, "cudaFuncSetAttribute: MaxDynamicSharedMemorySize above the "
                                              "sm_90 opt-in limit of 227 KiB");
        std::lock_guard<std::mutex> lock(g_mu);
        g_smem_limit[func] = value;
    }
    return cudaSuccess;
}

// ---- memory ---------------------------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** ptr, size_t size) {
    CUDA_EMU_STICKY();
    if (!ptr) return ret(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (size == 0) return cudaSuccess;  // the runtime returns success and no allocation for 0 bytes
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_malloc_calls++;
        if (size > kDeviceBytes - g_allocated) {
            t_last = cudaErrorMemoryAllocation;
            return cudaErrorMemoryAllocation;
        }
    }
    void* p = device_memory_map(size);  // filled with 0x7f bytes, closed to host code (device_memory.cpp)
    if (!p) return ret(cudaErrorMemoryAllocation);
    track_device_buffer(p, size);
    std::lock_guard<std::mutex> lock(g_mu);
    g_allocs[p] = size;
    g_allocated += size;
    *ptr = p;
    return cudaSuccess;
}
cudaError_t cudaFree(void* ptr) {
    if (!ptr) return cudaSuccess;
    note_host_wait("cudaFree synchronizes the device");
    run_all_queues();
    host_saw_everything();
    {
        std::lock_guard<std::mutex> lock(g_mu);
        auto it = g_allocs.find(ptr);
        if (it == g_allocs.end()) {
            t_last = cudaErrorInvalidValue;
            std::fprintf(stderr, "cuda_emu: cudaFree(%p) of a pointer cudaMalloc did not return\n", ptr);
            return cudaErrorInvalidValue;
        }
        g_allocated -= it->second;
        g_allocs.erase(it);
    }
    untrack_device_buffer(ptr);
    device_memory_unmap(ptr);
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** ptr, size_t size) {
    if (!ptr) return ret(cudaErrorInvalidValue);
    *ptr = std::malloc(size ? size : 1);
    if (!*ptr) return ret(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lock(g_mu);
    g_pinned[*ptr] = size;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void* ptr) {
    if (ptr) {
        note_host_wait("cudaFreeHost synchronizes the device");
        run_all_queues();
        host_saw_everything();
        std::lock_guard<std::mutex> lock(g_mu);
        g_pinned.erase(ptr);
    }
    std::free(ptr);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
    CUDA_EMU_STICKY();
    std::lock_guard<std::mutex> lock(g_mu);
    if (free_bytes) *free_bytes = kDeviceBytes - g_allocated;
    if (total) *total = kDeviceBytes;
    return cudaSuccess;
}

// A copy must stay inside one allocation on the device side (the runtime reports cudaErrorInvalidValue for a range
// it does not know; AddressSanitizer would stop at the same overflow less politely).
static cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    if (n == 0) return cudaSuccess;
    if (!dst || !src) return ret(cudaErrorInvalidValue, "cudaMemcpy with a null pointer");
    bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) dst_dev = src_dev = false;  // unified addressing: either side
    if ((dst_dev && !known_device_pointer(dst, n)) || (src_dev && !known_device_pointer(src, n))) {
        char b[200];
        std::snprintf(b, sizeof b, "cudaMemcpy of %zu bytes: the %s range is not inside one cudaMalloc allocation", n,
                      dst_dev && !known_device_pointer(dst, n) ? "destination" : "source");
        std::fprintf(stderr, "cuda_emu: %s\n", b);
        return ret(cudaErrorInvalidValue, b);
    }
    // the other way round: a host side that is device memory (here both are one memory, and it would copy)
    const bool dst_host = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost,
               src_host = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
    if ((dst_host && known_device_pointer(dst, 1)) || (src_host && known_device_pointer(src, 1))) {
        char b[300];
        std::snprintf(b, sizeof b, "cudaMemcpy of %zu bytes: the %s is device memory, and the kind (%s) says host "
                      "memory: pointers that do not match the kind are undefined behaviour (cudaMemcpyDeviceToDevice "
                      "or cudaMemcpyDefault copies between device buffers)", n,
                      dst_host && known_device_pointer(dst, 1) ? "destination" : "source",
                      kind == cudaMemcpyHostToDevice ? "host to device"
                      : kind == cudaMemcpyDeviceToHost ? "device to host" : "host to host");
        std::fprintf(stderr, "cuda_emu: %s\n", b);
        return ret(cudaErrorInvalidValue, b);
    }
    return cudaSuccess;
}
// A copy as a stream operation: its device bytes reported to the race check (stream_order.h), then moved.
static void copy_in_order(void* dst, const void* src, size_t n, const char* what) {
    if (known_device_pointer(src, n)) op_access(src, n, false, what);  // (op_access takes device operands only)
    if (known_device_pointer(dst, n)) op_access(dst, n, true, what);
    std::memmove(dst, src, n);
}
// The runtime API reference's "API synchronization behavior": cudaMemcpy with a host side returns after the copy
// (and a host-to-device one first synchronizes); cudaMemcpyAsync between the device and pageable host memory may be
// synchronous (device-to-host always is: it runs now, after the stream's queue; host-to-device returns once the
// source is staged: its bytes are taken now, the copy is queued); only pinned (cudaMallocHost) memory makes it a
// queued copy in both directions, which reads or writes the host bytes when it runs.
cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
    CUDA_EMU_STICKY();
    if (cudaError_t e = check_copy(dst, src, n, kind)) return e;
    if (kind != cudaMemcpyDeviceToDevice) note_host_wait("cudaMemcpy");
    // the host's waits ("API synchronization behavior"): from pageable memory to the device, a stream sync before
    // the copy and a return once the bytes are staged (the copy itself may still run); to or between host memory,
    // and from pinned memory, a return after the copy; between device buffers, none
    const bool pageable_to_device = kind == cudaMemcpyHostToDevice && !pinned_host_range(src, n);
    if (pageable_to_device) host_saw_legacy();
    stream_op(nullptr, [=] { copy_in_order(dst, src, n, "cudaMemcpy"); });  // the legacy stream: now, after every
                                                                              // blocking stream's work
    if (kind != cudaMemcpyDeviceToDevice && !pageable_to_device) host_saw_legacy();
    CUDA_EMU_STICKY();
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
    CUDA_EMU_STICKY();
    if (cudaError_t e = check_copy(dst, src, n, kind)) return e;
    if (n == 0) return cudaSuccess;
    if (kind == cudaMemcpyDefault || (kind == cudaMemcpyDeviceToHost && !pinned_host_range(dst, n))) {
        note_host_wait(kind == cudaMemcpyDefault ? "cudaMemcpyAsync (cudaMemcpyDefault)"
                                                 : "cudaMemcpyAsync to pageable host memory");
        stream_run_now(s, [=] { copy_in_order(dst, src, n, "cudaMemcpyAsync"); });
        std::lock_guard<std::recursive_mutex> lock(g_exec);
        host_saw(as_stream(s));  // the call returned after the copy
    } else if (kind == cudaMemcpyHostToDevice && !pinned_host_range(src, n)) {
        note_host_wait("cudaMemcpyAsync from pageable host memory");
        const char* from = static_cast<const char*>(src);
        auto staged = std::make_shared<std::vector<char>>(from, from + n);
        stream_op(s, [=] { copy_in_order(dst, staged->data(), n, "cudaMemcpyAsync"); });
    } else {
        stream_op(s, [=] { copy_in_order(dst, src, n, "cudaMemcpyAsync"); });
    }
    return cudaSuccess;
}
static cudaError_t memset_in_order(void* p, int value, size_t n, cudaStream_t s, const char* what) {
    CUDA_EMU_STICKY();
    if (n && !known_device_pointer(p, n)) return ret(cudaErrorInvalidValue, "cudaMemset outside an allocation");
    if (n)
        stream_op(s, [=] {
            op_access(p, n, true, what);
            std::memset(p, value, n);
        });
    return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t n) { return memset_in_order(p, value, n, nullptr, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t s) {
    return memset_in_order(p, value, n, s, "cudaMemsetAsync");
}

// ---- streams and events ---------------------------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned int flags, int priority) {
    if (!s || (flags & ~cudaStreamNonBlocking)) return ret(cudaErrorInvalidValue);
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    g_streams.push_back(new EmuStream());
    g_streams.back()->index = (int)g_streams.size();
    g_streams.back()->priority = priority;
    g_streams.back()->device = t_device;
    g_streams.back()->blocking = !(flags & cudaStreamNonBlocking);
    *s = reinterpret_cast<cudaStream_t>(g_streams.back());
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithPriority(s, cudaStreamDefault, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
    return cudaStreamCreateWithPriority(s, flags, 0);
}
cudaError_t cudaStreamGetPriority(cudaStream_t s, int* priority) {  // recorded; it orders nothing here
    if (!priority) return ret(cudaErrorInvalidValue);
    *priority = s ? as_stream(s)->priority : 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
    if (least) *least = 0;  // an H100 reports 0 (least) .. -5 (greatest)
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
// "In case the device is still doing work in the stream when cudaStreamDestroy() is called, the function will
// return immediately and the resources associated with stream will be released automatically once the device has
// completed all work in stream": here its queue runs first (kept: see g_streams).
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return ret(cudaErrorInvalidResourceHandle);
    run_queue(as_stream(s), as_stream(s)->issued);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    note_host_wait("cudaStreamSynchronize");
    {
        std::lock_guard<std::recursive_mutex> lock(g_exec);
        stream_drain(s);
        host_saw(as_stream(s));
    }
    CUDA_EMU_STICKY();
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {  // cudaErrorNotReady while s has queued work (left as the last error)
    CUDA_EMU_STICKY();
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (s && as_stream(s)->done < as_stream(s)->issued) return ret(cudaErrorNotReady);
    join(g_host_clock, s ? as_stream(s)->clock : g_legacy_clock);  // (the legacy stream's work always ran here)
    return cudaSuccess;
}
// s's later work waits for the event's last record as it is now ("the most recently captured state at the time of
// the call"); an event never recorded waits for nothing.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
    CUDA_EMU_STICKY();
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    auto* ev = reinterpret_cast<EmuEvent*>(e);
    if (ev->stream) stream_op(s, [on = ev->stream, upto = ev->ticket] { run_queue(on, upto); });
    join(s ? as_stream(s)->clock : g_legacy_clock, ev->clock);  // s's later operations come after the record
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) {
    if (!e) return ret(cudaErrorInvalidValue);
    *e = reinterpret_cast<cudaEvent_t>(new EmuEvent());
    reinterpret_cast<EmuEvent*>(*e)->device = t_device;
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
    cudaError_t r = cudaEventCreate(e);
    if (r == cudaSuccess) reinterpret_cast<EmuEvent*>(*e)->timing = !(flags & cudaEventDisableTiming);
    return r;
}
// A record is a marker in s's queue: the event is complete, and holds the time, once the marker has run.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    CUDA_EMU_STICKY();
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    auto* ev = reinterpret_cast<EmuEvent*>(e);
    // "cudaEventRecord() will fail if the input event and input stream are associated to different devices"
    if (ev->device != (s ? as_stream(s)->device : t_device))
        return ret(cudaErrorInvalidResourceHandle, "cudaEventRecord: the event and the stream are of different devices");
    ev->t = std::make_shared<std::chrono::steady_clock::time_point>();
    stream_op(s, [t = ev->t] { *t = std::chrono::steady_clock::now(); });
    const bool queued = s && streams_deferred();
    ev->stream = queued ? as_stream(s) : nullptr;
    ev->ticket = queued ? as_stream(s)->issued : 0;
    ev->clock = s ? as_stream(s)->clock : g_legacy_clock;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    note_host_wait("cudaEventSynchronize");
    {
        std::lock_guard<std::recursive_mutex> lock(g_exec);  // the record as it is now (another thread may record)
        auto* ev = reinterpret_cast<EmuEvent*>(e);
        if (ev->stream) run_queue(ev->stream, ev->ticket);
        join(g_host_clock, ev->clock);
    }
    CUDA_EMU_STICKY();
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {  // cudaErrorNotReady while its marker is queued (left as the last error)
    CUDA_EMU_STICKY();
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    auto* ev = reinterpret_cast<EmuEvent*>(e);
    if (!event_complete(ev)) return ret(cudaErrorNotReady);
    join(g_host_clock, ev->clock);
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    CUDA_EMU_STICKY();
    auto* a = reinterpret_cast<EmuEvent*>(start);
    auto* b = reinterpret_cast<EmuEvent*>(end);
    if (!ms || !a || !b) return ret(cudaErrorInvalidResourceHandle);
    if (!a->timing || !b->timing) return ret(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> lock(g_exec);
    if (!a->t || !b->t || !event_complete(a) || !event_complete(b)) return ret(cudaErrorNotReady);
    *ms = std::chrono::duration<float, std::milli>(*b->t - *a->t).count();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e) return ret(cudaErrorInvalidResourceHandle);
    delete reinterpret_cast<EmuEvent*>(e);
    return cudaSuccess;
}

// ---- what cudnn-frontend's host code references (kernels/attention_cudnn.cu in the emulated bf16 build) ----------
// Stream capture: nothing is ever captured here (no CUDA graphs), so the queries say so and the capture-mode
// exchange only swaps the thread's mode. The frontend's own kernels (loaded from NVRTC cubins, launched by handle)
// and CUDA graphs cannot exist on a CPU: those calls fail with cudaErrorNotSupported and a message, so a path that
// needs them ends in the frontend's error, never in a silent skip.
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t, cudaStreamCaptureStatus* status, unsigned long long* id,
                                     cudaGraph_t* graph, const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                     size_t* num_deps) {
    CUDA_EMU_STICKY();
    if (!status) return ret(cudaErrorInvalidValue);
    *status = cudaStreamCaptureStatusNone;
    if (id) *id = 0;
    if (graph) *graph = nullptr;
    if (deps) *deps = nullptr;
    if (edges) *edges = nullptr;
    if (num_deps) *num_deps = 0;
    return cudaSuccess;
}
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
    static thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
    if (!mode) return ret(cudaErrorInvalidValue);
    std::swap(current, *mode);
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* ptr) {
    CUDA_EMU_STICKY();
    if (!a) return ret(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lock(g_mu);
    bool device = false;
    auto it = g_allocs.upper_bound(ptr);  // the allocation that starts at or before ptr
    if (it != g_allocs.begin()) {
        --it;
        device = (const char*)ptr < (const char*)it->first + it->second;
    }
    std::memset(a, 0, sizeof *a);
    a->type = device ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    a->device = t_device;
    a->devicePointer = device ? const_cast<void*>(ptr) : nullptr;
    a->hostPointer = device ? nullptr : const_cast<void*>(ptr);
    return cudaSuccess;
}
static cudaError_t not_on_a_cpu(const char* what) {
    return ret(cudaErrorNotSupported, (std::string(what) + ": no loaded GPU code in the CPU execution layer").c_str());
}
cudaError_t cudaUserObjectCreate(cudaUserObject_t*, void*, cudaHostFn_t, unsigned int, unsigned int) {
    return not_on_a_cpu("cudaUserObjectCreate (CUDA graphs)");
}
cudaError_t cudaUserObjectRelease(cudaUserObject_t, unsigned int) { return not_on_a_cpu("cudaUserObjectRelease"); }
cudaError_t cudaGraphRetainUserObject(cudaGraph_t, cudaUserObject_t, unsigned int, unsigned int) {
    return not_on_a_cpu("cudaGraphRetainUserObject (CUDA graphs)");
}
// There is no driver API here: every symbol is "not found", which callers (the frontend's context helpers) take
// as "cannot tell" (the documented outcome for a symbol the driver lacks: success, status SymbolNotFound).
cudaError_t cudaGetDriverEntryPointByVersion(const char*, void** fn, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
    if (!fn) return ret(cudaErrorInvalidValue);
    *fn = nullptr;
    if (status) *status = cudaDriverEntryPointSymbolNotFound;
    return cudaSuccess;
}
cudaError_t cudaLibraryLoadData(cudaLibrary_t*, const void*, cudaJitOption*, void**, unsigned int, cudaLibraryOption*,
                                void**, unsigned int) {
    return not_on_a_cpu("cudaLibraryLoadData (a cubin)");
}
cudaError_t cudaLibraryUnload(cudaLibrary_t) { return not_on_a_cpu("cudaLibraryUnload"); }
cudaError_t cudaLibraryGetKernel(cudaKernel_t*, cudaLibrary_t, const char*) {
    return not_on_a_cpu("cudaLibraryGetKernel");
}
cudaError_t cudaKernelSetAttributeForDevice(cudaKernel_t, cudaFuncAttribute, int, int) {
    return not_on_a_cpu("cudaKernelSetAttributeForDevice");
}
cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
    return not_on_a_cpu("cudaLaunchKernel by function handle (launches here go through <<<>>>)");
}

// AddressSanitizer's defaults for every emulated program (ASAN_OPTIONS in the environment still wins): no leak
// report at exit (Open MPI and OpenBLAS keep allocations until exit by design, and a rank's report would fail an MPI
// job that succeeded), no fake stack frames for use-after-return (they would have to follow every fiber switch).
extern "C" const char* __asan_default_options() { return "detect_leaks=0:detect_stack_use_after_return=0"; }
