// Kernel execution on a CPU (see cuda_emu.h for the model): CUDA threads as fibers, blocks one at a time, not in index
// order (block_run_at), barriers that release or report, shuffles and mma.sync through warp exchanges, per-block shared
// memory, and the race checks (shared and global memory) fed by the compiler's load/store callbacks.
//
// This file is part of the runtime, not of the kernels: it is compiled without the load/store callbacks.
#include "kernels/cuda_emu/emu_internal.h"
#include "kernels/cuda_emu/stream_order.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>  // std::gcd
#include <set>
#include <string>
#include <vector>

#include <boost/context/detail/fcontext.hpp>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_ASAN 1
#endif
#if defined(CUDA_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_emu {

namespace bctx = boost::context::detail;

__thread Thread* tls_thread = nullptr;
__thread bool tls_in_atomic = false;

namespace {

// ---- fibers ----------------------------------------------------------------------------------------------------
// 128 KiB per CUDA thread is far above what our kernels keep in "registers" (local arrays), with room for
// AddressSanitizer's redzones; a PROT_NONE page under each stack turns an overflow into a fault.
constexpr size_t kStackBytes = 128 * 1024;
constexpr size_t kGuardBytes = 4096;

struct Stack {
    char* base = nullptr;  // lowest usable byte (above the guard page)
};
std::vector<Stack>& stack_pool() {
    static std::vector<Stack> pool;  // kernels launch from one host thread (the trainer's); see launch()
    return pool;
}
Stack& stack_for(size_t i) {
    auto& pool = stack_pool();
    while (pool.size() <= i) {
        void* m = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            std::fprintf(stderr, "cuda_emu: cannot map a fiber stack (%zu threads)\n", pool.size());
            std::abort();
        }
        mprotect(m, kGuardBytes, PROT_NONE);
        pool.push_back(Stack{static_cast<char*>(m) + kGuardBytes});
    }
    return pool[i];
}

// A CUDA thread's state. Threads run on carriers (fibers with their own stack): a carrier runs the block's threads
// that have not started yet one after another, until one of them waits at a barrier; that thread keeps the carrier,
// and the scheduler starts the next thread on a new one. So a kernel without barriers runs a whole block on one
// carrier without a single fiber switch, and a kernel whose threads all reach a barrier gets one carrier per
// thread, as if each had its own fiber.
enum class State { NotStarted, Runnable, BlockBarrier, WarpBarrier, Exited, Dead };

struct Fiber {
    Thread t;
    State state = State::NotStarted;
    bctx::fcontext_t ctx = nullptr;  // where the thread resumes, once it has waited at a barrier
    char* stack = nullptr;           // its carrier's stack
    const char* file = nullptr;  // where it waits
    int line = 0;
    unsigned wmask = 0;  // the mask of the warp barrier it waits at
    unsigned xchg = 0;   // warp exchanges done (selects the exchange buffer)
    void* asan_fake = nullptr;
};

// Per warp: who has arrived at a warp barrier, the exchange buffers (two, alternating, so a lane that runs ahead
// into the next exchange cannot overwrite a value another lane has not read yet), and the warp's sync epoch.
struct Warp {
    unsigned arrived = 0;
    uint64_t slot[2][32] = {};
    uint32_t mma[2][32][6] = {};
    uint32_t epoch = 0;
};

// The race check's record of one byte of shared memory since the last barrier.
struct Cell {
    uint32_t w_epoch = 0, r_epoch = 0;  // block epochs of the last write / reads (0 = none)
    uint32_t w_wep = 0, r_wep = 0;      // the warp epochs at the write / the latest read
    int16_t w_tid = -1, r_tid = -1;     // the writer / the first reader (a block has at most 1024 threads)
    int16_t r_warp = -1;                // the readers' warp, -2 when readers span several warps
    bool r_multi = false;               // more than one thread has read
    const void* w_pc = nullptr;         // where they did it (for the report)
    const void* r_pc = nullptr;
};
struct Region {
    uintptr_t lo, hi;
    const void* key;  // the declaration (nullptr: dynamic shared memory)
    size_t cells = SIZE_MAX;  // its first cell in cell_pool() (SIZE_MAX: not tracked)
};

// The global-memory race check's record of one byte of a cudaMalloc'ed buffer: the block epochs (Exec::epoch) of the
// last write and of a read, and who did them. Epochs only grow, so an epoch below the launch's first is from an earlier
// operation (ordered if of the same stream, else as the streams' happens-before order says: see "across operations"
// below), one below the running block's first is from another block of this launch (unordered: a GPU runs blocks in any
// order, at the same time), one at or above it is this block's (ordered by __syncthreads unless it is the current
// interval).
// Two reads are kept: r_epoch, the latest, and r2_epoch, an earlier operation's read that is not ordered before the
// one in r_epoch (another stream's): a later write must meet both (a stream that read, then another stream that
// read, then the first stream writing: ordered after its own read only). Of three mutually unordered readers, one is
// dropped.
struct GCell {
    uint32_t w_epoch = 0, r_epoch = 0, r2_epoch = 0;
    uint16_t w_tid = 0, r_tid = 0;  // w_tid | kAtomicWrite: an atomic's; r_tid kManyReaders: several threads of the
                                    // block read in the interval
};
constexpr uint16_t kManyReaders = 0xffff;  // a block has at most 1024 threads
constexpr uint16_t kAtomicWrite = 0x8000;
// A device buffer and its cells (mapped when cudaMalloc returns it, pages touched on first use).
struct Shadow {
    uintptr_t lo, hi;
    GCell* cells;
};

// The cells of the running block's shared memory, reused block after block without clearing: epochs are globally
// unique, so a cell left by an earlier block never matches the current one.
std::vector<Cell>& cell_pool() {
    static std::vector<Cell> pool;
    return pool;
}
size_t g_cells_used = 0;
Cell* g_cell_v = nullptr;  // cell_pool().data(), for access()

uint32_t g_epoch = 0;  // epochs are globally unique, so a cell from an earlier block or barrier never matches
// The counter is 32 bits (a cell per byte of every device buffer holds two): run_launch restarts it, clearing every
// cell, once a launch begins at or above kEpochRestart (emu_internal.h), so no launch sees it wrap unless it alone
// takes 2^31 epochs (an epoch is a barrier interval of a block or a warp: 2^31 blocks, or days of emulation), which
// stops the process rather than let a stale cell pass for a current one. (It counts with the race check off too.)
uint32_t next_epoch() {
    if (g_epoch == UINT32_MAX) {
        std::fprintf(stderr, "cuda_emu: one launch took 2^31 epochs (barrier intervals of its blocks and warps), "
                             "beyond what the emulation counts: run fewer blocks per launch\n");
        std::abort();
    }
    return ++g_epoch;
}
long g_carriers = 0;   // carriers started in this process (carriers_started())
bool g_stacks_dirty = false;  // fibers were abandoned (a failed launch): unpoison the stacks before reuse

struct Exec {
    Config cfg;
    Body body;
    const void* kernel = nullptr;
    const char* name = nullptr;
    const char* signature = nullptr;
    Block blk;
    std::vector<Fiber> fibers;
    std::vector<Warp> warps;
    bctx::fcontext_t sched = nullptr;
    const void* sched_bottom = nullptr;
    size_t sched_size = 0;
    int live = 0, arrived = 0;
    unsigned next = 0;      // the block's first thread that has not started
    unsigned carriers = 0;  // carriers started in this block (each takes the next stack of the pool)
    uint32_t epoch = 0;  // this block's current barrier interval
    bool failed = false;
    // shared memory of the running block
    std::vector<Region> regions;
    // Plain views of the vectors for access(): a function AddressSanitizer does not instrument cannot inline the
    // vectors' (instrumented) members, and calls on every tracked byte cost more than the check itself. Set
    // wherever the vectors change.
    const Region* region_v = nullptr;
    size_t region_n = 0;
    const Fiber* fiber_v = nullptr;
    const Warp* warp_v = nullptr;
    const Shadow* shadow_v = nullptr;
    size_t shadow_n = 0;
    void* dyn = nullptr;
    long races = 0;
    // the global-memory race check: the device buffers (a snapshot at the launch), the first epoch of the launch
    // and of the running block (epochs only grow, so a cell's epoch says whose access it records)
    std::vector<Shadow> shadows;
    uint32_t launch_first = 0, block_first = 0;
};
thread_local Exec* tls_exec = nullptr;
// The address range of the running block's tracked shared memory (empty when nothing is tracked): the one test the
// load/store callbacks make before they call access(), since nearly every load and store is to global memory.
__thread uintptr_t tls_tracked_lo = UINTPTR_MAX, tls_tracked_hi = 0;

// ---- AddressSanitizer's fiber annotations ------------------------------------------------------------------------
inline void asan_start(void** fake, const void* bottom, size_t size) {
#if defined(CUDA_EMU_ASAN)
    __sanitizer_start_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}
inline void asan_finish(void* fake, const void** bottom, size_t* size) {
#if defined(CUDA_EMU_ASAN)
    __sanitizer_finish_switch_fiber(fake, bottom, size);
#else
    (void)fake, (void)bottom, (void)size;
#endif
}

std::string where(const Exec* ex) {
    char b[160];
    std::snprintf(b, sizeof b, "kernel %s, block (%u,%u,%u) of (%u,%u,%u), %u threads", ex->name ? ex->name : "?",
                  ex->blk.idx.x, ex->blk.idx.y, ex->blk.idx.z, ex->cfg.grid.x, ex->cfg.grid.y, ex->cfg.grid.z,
                  ex->cfg.block.x * ex->cfg.block.y * ex->cfg.block.z);
    return b;
}

Fiber* current() { return reinterpret_cast<Fiber*>(tls_thread); }  // Thread is Fiber's first member

// From a thread: back to the scheduler until it resumes us. The scheduler learns which thread waits (and where it
// resumes) from the jump's data: a carrier may have gone on to other threads since the scheduler last switched to it.
void yield(Fiber* f) {
    Exec* ex = tls_exec;
    tls_thread = nullptr;
    asan_start(&f->asan_fake, ex->sched_bottom, ex->sched_size);
    bctx::transfer_t back = bctx::jump_fcontext(ex->sched, f);
    ex = tls_exec;
    ex->sched = back.fctx;
    asan_finish(f->asan_fake, &ex->sched_bottom, &ex->sched_size);
    tls_thread = &f->t;
}

// From a fiber: the launch has failed; never resumed.
[[noreturn]] void die(Fiber* f) {
    f->state = State::Dead;
    tls_exec->failed = true;
    for (;;) yield(f);
}

void fail(Exec* ex, const std::string& what) {
    std::string msg = "cuda_emu: " + what + " (" + where(ex) + ")";
    std::fprintf(stderr, "%s\n", msg.c_str());
    set_kernel_error(msg);
    ex->failed = true;
}

// A carrier: runs the threads that have not started, in order, on this stack (from.data), until none is left. A
// thread that waits at a barrier suspends the carrier with it; when it returns, the carrier goes on.
void carrier_main(bctx::transfer_t from) {
    Exec* ex = tls_exec;
    ex->sched = from.fctx;
    char* stack = static_cast<char*>(from.data);
    asan_finish(nullptr, &ex->sched_bottom, &ex->sched_size);
    while (ex->next < ex->fibers.size() && !ex->failed) {
        Fiber* f = &ex->fibers[ex->next++];
        f->state = State::Runnable;
        f->stack = stack;
        tls_thread = &f->t;
        ex->body.run(ex->body.ctx);
        f->state = State::Exited;
        ex->live--;
    }
    tls_thread = nullptr;
    asan_start(nullptr, ex->sched_bottom, ex->sched_size);  // this carrier's stack is done
    bctx::jump_fcontext(ex->sched, nullptr);
    std::abort();  // never resumed
}

// From the scheduler: switch to `to` (a new carrier or a waiting thread's context) on `stack` until a thread waits
// (it is the jump's data; record where it resumes) or the carrier finishes (no data).
void switch_to(bctx::fcontext_t to, char* stack, void* data) {
    void* fake = nullptr;
    asan_start(&fake, stack, kStackBytes);
    bctx::transfer_t back = bctx::jump_fcontext(to, data);
    tls_thread = nullptr;
    asan_finish(fake, nullptr, nullptr);
    if (back.data) static_cast<Fiber*>(back.data)->ctx = back.fctx;
}
void start_carrier(Exec* ex) {
    g_carriers++;
    char* stack = stack_for(ex->carriers++).base;
    switch_to(bctx::make_fcontext(stack + kStackBytes, kStackBytes, carrier_main), stack, stack);
}
void resume(Fiber* f) {
    tls_thread = &f->t;
    switch_to(f->ctx, f->stack, nullptr);
}

// Why no thread can go on: every thread waits at a barrier that cannot release. Groups the threads by where they
// are, e.g. "128 threads wait at __syncthreads (a.cu:10); 128 threads have returned".
void report_stall(Exec* ex) {
    std::map<std::string, int> groups;
    for (const Fiber& f : ex->fibers) {
        char b[256];
        switch (f.state) {
            case State::BlockBarrier: std::snprintf(b, sizeof b, "wait at __syncthreads (%s:%d)", f.file, f.line); break;
            case State::WarpBarrier:
                std::snprintf(b, sizeof b, "wait at a warp barrier with mask 0x%08x in warp %u (%s:%d)", f.wmask,
                              f.t.warp, f.file, f.line);
                break;
            case State::Exited: std::snprintf(b, sizeof b, "have returned"); break;
            case State::NotStarted: std::snprintf(b, sizeof b, "have not started"); break;
            default: std::snprintf(b, sizeof b, "are stopped"); break;
        }
        groups[b]++;
    }
    std::string s = "barrier divergence: no thread can proceed, a GPU would hang:";
    for (auto& g : groups) s += " " + std::to_string(g.second) + " threads " + g.first + ";";
    fail(ex, s);
}

void free_smem(Exec* ex) {
    for (Region& r : ex->regions) std::free(reinterpret_cast<void*>(r.lo));
    ex->regions.clear();
    ex->region_n = 0;
    tls_tracked_lo = UINTPTR_MAX;
    tls_tracked_hi = 0;
    ex->dyn = nullptr;
    g_cells_used = 0;
}
void* add_region(Exec* ex, const void* key, size_t bytes, size_t align) {
    void* p = nullptr;
    // exactly `bytes` long, so AddressSanitizer flags the first byte past the declared size
    if (posix_memalign(&p, align, bytes ? bytes : 1) != 0) {
        std::fprintf(stderr, "cuda_emu: out of host memory for %zu bytes of shared memory\n", bytes);
        std::abort();
    }
    // unwritten shared memory reads as 3.39e38 (fp32, bf16) / 2.1e9 (int32), never a plausible value: a sum or a
    // max-reduction with an unwritten slot is far off (0xff's NaN vanished in fmaxf, the max-reductions' function)
    std::memset(p, 0x7f, bytes);
    Region r{reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes, key, SIZE_MAX};
    if (race_check_enabled()) {
        r.cells = g_cells_used;
        g_cells_used += bytes;
        if (cell_pool().size() < g_cells_used) cell_pool().resize(g_cells_used);
        g_cell_v = cell_pool().data();
    }
    if (r.cells != SIZE_MAX) {
        tls_tracked_lo = std::min(tls_tracked_lo, r.lo);
        tls_tracked_hi = std::max(tls_tracked_hi, r.hi);
    }
    ex->regions.push_back(std::move(r));
    ex->region_v = ex->regions.data();
    ex->region_n = ex->regions.size();
    return p;
}

void run_block(Exec* ex) {
    const dim3 bd = ex->cfg.block;
    const unsigned n = bd.x * bd.y * bd.z;
#if defined(CUDA_EMU_ASAN)
    if (g_stacks_dirty) {  // fibers abandoned by a failed launch left their frames' poison on the stacks
        for (Stack& st : stack_pool()) ASAN_UNPOISON_MEMORY_REGION(st.base, kStackBytes);
        g_stacks_dirty = false;
    }
#endif
    // The vectors are sized once per launch (a Warp's exchange buffers are 2 KiB: not cleared per block).
    if (ex->fibers.size() != n) {
        ex->fibers.assign(n, Fiber{});
        ex->warps.assign((n + 31) / 32, Warp{});
        ex->fiber_v = ex->fibers.data();
        ex->warp_v = ex->warps.data();
    }
    ex->block_first = g_epoch + 1;
    for (Warp& w : ex->warps) w.arrived = 0, w.epoch = next_epoch();
    for (unsigned i = 0; i < n; i++) {
        Fiber& f = ex->fibers[i];
        f = Fiber{};
        f.t.idx = make_uint3(i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y));
        f.t.linear = i;
        f.t.lane = i % 32;
        f.t.warp = i / 32;
        f.t.block = &ex->blk;
    }
    ex->live = (int)n;
    ex->next = 0;
    ex->carriers = 0;
    ex->arrived = 0;
    ex->epoch = next_epoch();
    if (ex->cfg.smem > 0) ex->dyn = add_region(ex, nullptr, ex->cfg.smem, 16);  // else extern __shared__ is null
    while (ex->live > 0 && !ex->failed) {
        bool ran = false;
        while (ex->next < n && !ex->failed) {  // every thread runs until it waits or returns, in order
            start_carrier(ex);
            ran = true;
        }
        for (Fiber& f : ex->fibers) {
            if (ex->failed) break;
            if (f.state != State::Runnable) continue;
            resume(&f);
            ran = true;
        }
        if (!ran && !ex->failed) report_stall(ex);
    }
    free_smem(ex);
    if (ex->failed) g_stacks_dirty = true;
}

// ---- coverage: which kernels ran in this process ---------------------------------------------------------------
std::mutex g_executed_mu;  // a refresh worker may be starting a kernel while exit() writes the coverage
std::set<std::string>& executed() {
    static auto* s = new std::set<std::string>;  // never destroyed: write_coverage runs at exit
    return *s;
}
// Which tests ran (coverage.py judges the kernels only on a run of all of them): every process of an emulated test
// marks it at its start, <dir>/tests/<PRAC_EMU_TEST> (set by ctest: cmake/CudaEmu.cmake), whether it then launches a
// kernel or not, and however it ends (a rank killed on purpose writes no coverage at exit).
static const bool g_test_marked = [] {
    const char* dir = std::getenv("PRAC_EMU_COVERAGE_DIR");
    const char* test = std::getenv("PRAC_EMU_TEST");
    if (!dir || !*dir || !test || !*test || std::strchr(test, '/')) return false;
    mkdir(dir, 0755);
    const std::string tests = std::string(dir) + "/tests";
    mkdir(tests.c_str(), 0755);
    FILE* fp = std::fopen((tests + "/" + test).c_str(), "w");
    if (fp) std::fclose(fp);
    return fp != nullptr;
}();

void write_coverage() {
    const char* dir = std::getenv("PRAC_EMU_COVERAGE_DIR");
    std::lock_guard<std::mutex> lock(g_executed_mu);
    if (!dir || !*dir || executed().empty()) return;
    mkdir(dir, 0755);  // the first process of a test run makes it (ctest's coverage-reset removed it)
    // <pid>.<ns>.txt: a suite starts tens of thousands of processes and the kernel reuses process ids (pid_max
    // 32768 here), so a later process of the same id must not overwrite an earlier one's list
    const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
    std::string path = std::string(dir) + "/" + std::to_string(getpid()) + "." + std::to_string(ns) + ".txt";
    FILE* fp = std::fopen(path.c_str(), "wx");
    if (!fp) return;
    for (const std::string& k : executed()) std::fprintf(fp, "%s\n", k.c_str());
    std::fclose(fp);
}

// ---- race check ---------------------------------------------------------------------------------------------------
std::string symbolize(const void* pc) {
#if defined(CUDA_EMU_ASAN)
    char buf[512];
    buf[0] = 0;
    // the load/store callback's return address is just past the access
    __sanitizer_symbolize_pc(const_cast<void*>(pc), "%F %L", buf, sizeof buf);
    return buf;
#else
    char b[32];
    std::snprintf(b, sizeof b, "%p", pc);
    return b;
#endif
}

void report_race(Exec* ex, const Region& r, uintptr_t a, bool write, int other, bool other_wrote,
                 const void* other_pc, const void* pc) {
    Fiber* f = current();
    ex->races++;
    if (ex->races > 1) return;  // the first race of a launch in detail; the count at the end
    char b[512];
    std::snprintf(b, sizeof b,
                  "shared-memory race on byte %zu of %s: thread %u %s it while thread %d %s it since the last "
                  "barrier, with no __syncthreads/__syncwarp between them\n    this access:  %s\n    other access: %s",
                  (size_t)(a - r.lo), r.key ? "a __shared__ variable" : "the dynamic shared memory", f->t.linear,
                  write ? "writes" : "reads", other, other_wrote ? "wrote" : "read", symbolize(pc).c_str(),
                  symbolize(other_pc).c_str());
    fail(ex, b);
}

void global_access(const void* p, size_t n, bool write, const void* pc);  // below
void global_atomic_access(const void* p, size_t n, const void* pc);
extern __thread bool tls_global_check;

// Called for the loads and stores of the kernels' code that may touch tracked shared memory (the callbacks below
// filter the rest): the bookkeeping itself is not checked by AddressSanitizer (its cells are this file's own
// vectors), which more than halves the cost of the race check. Plain arithmetic and the Exec's plain views only:
// no call of an instrumented function (see Exec::region_v).
__attribute__((no_sanitize("address"), noinline)) void access(const void* p, size_t n, bool write, const void* pc) {
    Exec* ex = tls_exec;
    if (!ex || !tls_thread) return;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p), end = a + n;  // within [tls_tracked_lo, tls_tracked_hi)
    for (size_t ri = 0; ri < ex->region_n; ri++) {
        const Region& r = ex->region_v[ri];
        if (a >= r.hi || end <= r.lo || r.cells == SIZE_MAX) continue;
        const Fiber* f = reinterpret_cast<const Fiber*>(tls_thread);
        const int tid = (int)f->t.linear, warp = (int)f->t.warp;
        const uint32_t wep = ex->warp_v[warp].epoch;
        const uintptr_t lo = a > r.lo ? a : r.lo, hi = end < r.hi ? end : r.hi;
        for (uintptr_t b = lo; b < hi; b++) {
            Cell& c = g_cell_v[r.cells + (b - r.lo)];
            // A race unless ordered by a __syncwarp of this warp since the other access (a new warp epoch). The
            // writer's id is read only when its epoch is this block's: older cells may name threads it lacks.
            if (c.w_epoch == ex->epoch && c.w_tid != tid &&
                !((int)ex->fiber_v[c.w_tid].t.warp == warp && c.w_wep != wep)) {
                report_race(ex, r, b, write, c.w_tid, true, c.w_pc, pc);
                return;
            }
            if (write && c.r_epoch == ex->epoch && (c.r_multi || c.r_tid != tid) &&
                !(c.r_warp == warp && c.r_wep != wep)) {
                report_race(ex, r, b, write, c.r_tid, false, c.r_pc, pc);
                return;
            }
            if (write) {
                c.w_epoch = ex->epoch, c.w_tid = (int16_t)tid, c.w_wep = wep, c.w_pc = pc;
                c.r_epoch = 0;
            } else if (c.r_epoch != ex->epoch) {
                c.r_epoch = ex->epoch, c.r_tid = (int16_t)tid, c.r_warp = (int16_t)warp, c.r_wep = wep,
                c.r_multi = false, c.r_pc = pc;
            } else if (c.r_tid != tid) {
                c.r_multi = true;
                if (c.r_warp != warp) c.r_warp = -2;
                if (wep > c.r_wep) c.r_wep = wep;
            }
        }
        return;
    }
    // in none of the regions: the hooks' span runs from the lowest region to the highest, and a device buffer may lie
    // between them (AddressSanitizer keeps each allocation size in an address range of its own)
    if (tls_global_check && !tls_in_atomic) global_access(p, n, write, pc);
    else if (tls_global_check && write) global_atomic_access(p, n, pc);
}

// ---- global-memory race check ------------------------------------------------------------------------------------
// Every load and store of a kernel to a cudaMalloc'ed buffer (not its own locals, not shared memory; atomics as
// global_atomic_access says) is checked against the byte's GCell: a byte that another block of the launch wrote, or
// another thread of the block wrote since the last __syncthreads, or (for a write) read, is a race. What
// compute-sanitizer cannot show: its racecheck tool sees shared memory only, and on a GPU such a race shows only when
// the blocks happen to run in the wrong order.
__thread bool tls_global_check = false;  // a launch with the check on runs on this host thread
__thread uintptr_t tls_buf_lo = 0, tls_buf_hi = 0;  // the buffer of the last checked access
__thread GCell* tls_buf_cells = nullptr;
// ... and of the last kRecentBuffers found (an AdamW update's accesses go to five buffers in turn: a one-entry cache
// missed on nearly every access, and the binary search over every buffer took a quarter of the check's time).
// Pointers into the running launch's Exec::shadows: reset with tls_buf_* when a launch begins.
constexpr unsigned kRecentBuffers = 8;
__thread const Shadow* tls_recent[kRecentBuffers];
__thread unsigned tls_recent_next = 0;

std::mutex g_shadow_mu;
std::map<uintptr_t, Shadow>& shadow_table() {  // the live device buffers by start address, under g_shadow_mu
    static auto* t = new std::map<uintptr_t, Shadow>;  // never destroyed: cudaFree may run at exit
    return *t;
}

// ---- across operations: the happens-before order of streams (emu_internal.h's OpOrder) ------------------------
// Each checked operation (a kernel launch with the global check on, or a copy, memset or library routine that
// reports its bytes: stream_order.h's op_access) is recorded with its first epoch, so a cell's epoch below the
// running operation's names the operation that made the access; that access is ordered before the running one when
// it is of the same stream or the running one's clock has seen it. Unordered, one of them writing: a race, which on a
// GPU shows only when the streams happen to run in the wrong order or at the same time. An operation that is not
// checked (a kernel's third launch of one configuration) leaves no record and no cell, so it can hide a race, never
// invent one. Under stream_order's one-operation-at-a-time lock, as the launches.
struct OpRecord {
    uint32_t first_epoch;
    int stream;
    uint32_t clock;
    const char* what;  // the kernel's name or the routine's
};
std::vector<OpRecord> g_records;                                       // by first epoch (epochs only grow)
std::vector<std::vector<std::pair<uint32_t, uint32_t>>> g_by_stream;  // per stream: (clock, first epoch), both growing
const OpOrder* g_order = nullptr;  // the running checked operation's order (null: none, or the check is off)
uint64_t g_order_serial = 0;       // and its serial
uint32_t g_order_first = 0;        // and its first epoch
uint32_t g_ordered_upto = 0;       // every access recorded at an epoch up to this one is ordered before it
uint32_t g_memo_lo = 1, g_memo_hi = 0;  // the epochs of the last record looked up [lo, hi), and its answer
bool g_memo_ordered = false;
std::atomic<bool> g_cross_stream_check{true};  // read when an operation is issued (OpOrder::cross_check)
uint64_t g_reported_serial = 0;  // the operation whose race op_access reported (one report per operation)

// The first epoch of a recorded operation of another stream that o's clock has not seen (UINT32_MAX: none, every
// recorded access is ordered before o).
uint32_t first_unordered_epoch(const OpOrder* o) {
    uint32_t first = UINT32_MAX;
    for (size_t j = 0; j < g_by_stream.size(); j++) {
        if ((int)j == o->stream) continue;
        const uint32_t seen = j < o->seen.size() ? o->seen[j] : 0;
        const auto& v = g_by_stream[j];
        auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(seen, UINT32_MAX));
        if (it != v.end()) first = std::min(first, it->second);
    }
    return first;
}
// Records the running operation o, whose accesses take epochs from `first` on, and finds g_ordered_upto: the
// earliest record of another stream that o's clock has not seen, less one. Every checked operation is recorded,
// so every cell's epoch has its record; one of unknown order (o null: not run as a stream operation; or the
// cross-stream check off) counts as ordered with everything (stream -1).
void begin_checked_op(const OpOrder* o, uint32_t first, const char* what) {
    g_memo_lo = 1, g_memo_hi = 0;
    if (!o || !o->cross_check) {
        g_records.push_back(OpRecord{first, -1, 0, what});
        g_order = nullptr, g_order_serial = o ? o->serial : 0, g_order_first = first;
        g_ordered_upto = UINT32_MAX;
        return;
    }
    g_order = o, g_order_serial = o->serial, g_order_first = first;
    g_ordered_upto = std::min(first - 1, first_unordered_epoch(o) - 1);
    g_records.push_back(OpRecord{first, o->stream, o->clock, what});
    if (g_by_stream.size() <= (size_t)o->stream) g_by_stream.resize((size_t)o->stream + 1);
    g_by_stream[(size_t)o->stream].emplace_back(o->clock, first);
}
// Forget every record (the epochs restart, every cell cleared).
void clear_records() {
    g_records.clear();
    g_by_stream.clear();
    g_order = nullptr, g_order_serial = 0;
    g_memo_lo = 1, g_memo_hi = 0;
}
// The record of the access made at `epoch` (below the running operation's first); SIZE_MAX when it precedes every
// record (a test that moved the epoch counter: set_epoch_counter), which counts as ordered.
size_t record_of(uint32_t epoch) {
    auto it = std::upper_bound(g_records.begin(), g_records.end(), epoch,
                               [](uint32_t e, const OpRecord& r) { return e < r.first_epoch; });
    return it == g_records.begin() ? SIZE_MAX : (size_t)(it - g_records.begin()) - 1;
}
__attribute__((noinline)) bool earlier_ordered_slow(uint32_t epoch) {
    const size_t i = record_of(epoch);
    if (i == SIZE_MAX) return true;
    const OpRecord& r = g_records[i];
    g_memo_lo = r.first_epoch;
    g_memo_hi = i + 1 < g_records.size() ? g_records[i + 1].first_epoch : UINT32_MAX;
    g_memo_ordered = r.stream < 0 || r.stream == g_order->stream ||
                     ((size_t)r.stream < g_order->seen.size() && g_order->seen[(size_t)r.stream] >= r.clock);
    return g_memo_ordered;
}
// Whether the access recorded at `epoch` (nonzero, below the running operation's first) happens before it.
inline bool earlier_ordered(uint32_t epoch) {
    if (epoch <= g_ordered_upto || !g_order) return true;
    if (epoch >= g_memo_lo && epoch < g_memo_hi) return g_memo_ordered;
    return earlier_ordered_slow(epoch);
}
// Whether `epoch` (0: none; below the running operation's first) is an access not ordered before the running
// operation.
inline bool unordered_earlier(uint32_t epoch) {
    return epoch != 0 && epoch > g_ordered_upto && !earlier_ordered(epoch);
}
// A read at epoch e (by thread t) of a byte whose r_epoch is an earlier operation's (or none): it replaces that read
// when it is ordered before, else moves it (another stream's, which any later write races too) to r2_epoch, unless
// that holds another unordered read (then this read is the one dropped).
inline void read_after_earlier(GCell& c, uint32_t e, uint16_t t) {
    if (!unordered_earlier(c.r_epoch)) c.r_epoch = e, c.r_tid = t;
    else if (!unordered_earlier(c.r2_epoch)) c.r2_epoch = c.r_epoch, c.r_epoch = e, c.r_tid = t;
}
// The report's sentence on the earlier access at `epoch`, which is not ordered before the running operation.
std::string unordered_with(uint32_t epoch, bool other_wrote, bool write) {
    const OpRecord& r = g_records[record_of(epoch)];
    char b[640];
    std::snprintf(b, sizeof b, "%s it in %s on %s, and neither is ordered before the other (this %s is on %s): on a "
                  "GPU the two may run in either order or at the same time. Order them: an event recorded after the "
                  "first, waited for with cudaStreamWaitEvent on the other's stream, or a host synchronization "
                  "between%s", other_wrote ? "wrote" : "read", r.what ? r.what : "?", stream_label(r.stream).c_str(),
                  write ? "write" : "read", stream_label(g_order->stream).c_str(),
                  r.stream == 0 || g_order->stream == 0 ? " (a cudaStreamNonBlocking stream does not synchronize "
                                                          "with the legacy default stream)" : "");
    return b;
}

void report_global_race(Exec* ex, const Shadow& s, uintptr_t b, bool write, uint32_t other_epoch, uint16_t other_tid,
                        bool other_wrote, const void* pc, bool atomic = false) {
    ex->races++;
    if (ex->races > 1) return;
    const Fiber* f = current();
    char other[96];
    if (other_epoch < ex->launch_first) {
        char m[1024];
        std::snprintf(m, sizeof m, "global-memory race across streams on byte %zu of a %zu-byte device buffer: thread "
                      "%u %s it%s; another operation %s\n    this access:  %s", (size_t)(b - s.lo),
                      (size_t)(s.hi - s.lo), f->t.linear, write ? "writes" : "reads", atomic ? " (an atomic)" : "",
                      unordered_with(other_epoch, other_wrote, write).c_str(), symbolize(pc).c_str());
        fail(ex, m);
        return;
    }
    const char* other_atomic = other_wrote && (other_tid & kAtomicWrite) ? " (an atomic)" : "";
    if (other_epoch < ex->block_first)
        std::snprintf(other, sizeof other, "another block of this launch %s it%s", other_wrote ? "wrote" : "read",
                      other_atomic);
    else if (!other_wrote && other_tid == kManyReaders)
        std::snprintf(other, sizeof other, "other threads of this block read it since the last __syncthreads");
    else
        std::snprintf(other, sizeof other, "thread %u of this block %s it%s since the last __syncthreads",
                      other_wrote ? other_tid & ~kAtomicWrite : other_tid, other_wrote ? "wrote" : "read",
                      other_atomic);
    char m[640];
    std::snprintf(m, sizeof m,
                  "global-memory race on byte %zu of a %zu-byte device buffer: thread %u %s it%s while %s; nothing "
                  "orders them (a GPU runs the blocks of a launch in any order and at the same time; the threads of "
                  "a block need a __syncthreads between)\n    this access:  %s",
                  (size_t)(b - s.lo), (size_t)(s.hi - s.lo), f->t.linear, write ? "writes" : "reads",
                  atomic ? " (an atomic)" : "", other,
                  symbolize(pc).c_str());
    fail(ex, m);
}

// Points tls_buf_* at the device buffer that holds address a; false when none does (kernel arguments).
__attribute__((no_sanitize("address"))) bool find_buffer(const Exec* ex, uintptr_t a) {
    const Shadow* found = nullptr;
    for (unsigned i = 0; i < kRecentBuffers && !found; i++)
        if (tls_recent[i] && a - tls_recent[i]->lo < tls_recent[i]->hi - tls_recent[i]->lo) found = tls_recent[i];
    if (!found) {
        size_t lo = 0, hi = ex->shadow_n;  // the first buffer that ends above a
        while (lo < hi) {
            const size_t mid = (lo + hi) / 2;
            if (ex->shadow_v[mid].hi <= a) lo = mid + 1;
            else hi = mid;
        }
        if (lo == ex->shadow_n || a < ex->shadow_v[lo].lo) return false;
        found = &ex->shadow_v[lo];
        tls_recent[tls_recent_next++ % kRecentBuffers] = found;
    }
    tls_buf_lo = found->lo, tls_buf_hi = found->hi, tls_buf_cells = found->cells;
    return true;
}

// An atomic's store (its load is the same access), checked as a write that commutes with other atomics: another
// block's plain access to its bytes (or another thread's of the block in the interval), or another stream's not
// ordered before, is a race; another thread's atomic is not. Recorded as the thread's write, marked kAtomicWrite.
__attribute__((no_sanitize("address"), noinline)) void global_atomic_access(const void* p, size_t n,
                                                                            const void* pc) {
    Exec* ex = tls_exec;
    const Fiber* f = reinterpret_cast<const Fiber*>(tls_thread);
    if (!ex || !f || ex->failed) return;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if ((a < tls_buf_lo || a >= tls_buf_hi) && !find_buffer(ex, a)) return;  // (not a local: atomics take pointers
                                                                             // to device or shared memory)
    const uint32_t e = ex->epoch, bf = ex->block_first, lf = ex->launch_first;
    const uint16_t t = (uint16_t)f->t.linear;
    const uintptr_t end = a + n < tls_buf_hi ? a + n : tls_buf_hi;
    for (uintptr_t b = a; b < end; b++) {
        GCell& c = tls_buf_cells[b - tls_buf_lo];
        const bool race_w = c.w_epoch >= lf ? !(c.w_tid & kAtomicWrite) &&
                                                  (c.w_epoch < bf || (c.w_epoch == e && c.w_tid != t))
                                            : unordered_earlier(c.w_epoch);
        const bool race_r = !race_w && (c.r_epoch >= lf ? c.r_epoch < bf || (c.r_epoch == e && c.r_tid != t)
                                                        : unordered_earlier(c.r_epoch));
        const bool race_r2 = !race_w && !race_r && unordered_earlier(c.r2_epoch);
        if (race_w || race_r || race_r2) {
            const Shadow s{tls_buf_lo, tls_buf_hi, tls_buf_cells};
            report_global_race(ex, s, b, true, race_w ? c.w_epoch : race_r ? c.r_epoch : c.r2_epoch,
                               race_w ? c.w_tid : race_r ? c.r_tid : 0, race_w, pc, true);
            return;
        }
        c.w_epoch = e, c.w_tid = t | kAtomicWrite, c.r_epoch = c.r2_epoch = 0;
    }
}

// Called for the kernels' loads and stores outside tracked shared memory while a launch runs with the check on. As
// access(): plain arithmetic and plain views only.
__attribute__((no_sanitize("address"), noinline)) void global_access(const void* p, size_t n, bool write,
                                                                     const void* pc) {
    Exec* ex = tls_exec;
    const Fiber* f = reinterpret_cast<const Fiber*>(tls_thread);
    if (!ex || !f || ex->failed) return;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (a - reinterpret_cast<uintptr_t>(f->stack) < kStackBytes) return;  // the thread's locals
    if ((a < tls_buf_lo || a >= tls_buf_hi) && !find_buffer(ex, a)) return;
    const uint32_t e = ex->epoch, bf = ex->block_first, lf = ex->launch_first;
    const uint16_t t = (uint16_t)f->t.linear;
    const uintptr_t end = a + n < tls_buf_hi ? a + n : tls_buf_hi;
    for (uintptr_t b = a; b < end; b++) {
        GCell& c = tls_buf_cells[b - tls_buf_lo];
        // (an epoch below lf is an earlier operation's: a race unless ordered before this launch's stream position)
        const bool race_w = c.w_epoch >= lf ? c.w_epoch < bf || (c.w_epoch == e && (c.w_tid & ~kAtomicWrite) != t)
                                            : unordered_earlier(c.w_epoch);
        const bool race_r = write && (c.r_epoch >= lf ? c.r_epoch < bf || (c.r_epoch == e && c.r_tid != t)
                                                      : unordered_earlier(c.r_epoch));
        const bool race_r2 = write && !race_r && unordered_earlier(c.r2_epoch);  // (always an earlier operation's)
        if (race_w || race_r || race_r2) {
            const Shadow s{tls_buf_lo, tls_buf_hi, tls_buf_cells};
            report_global_race(ex, s, b, write, race_w ? c.w_epoch : race_r ? c.r_epoch : c.r2_epoch,
                               race_w ? c.w_tid : race_r ? c.r_tid : 0, race_w, pc);
            return;
        }
        if (write) {
            c.w_epoch = e, c.w_tid = t, c.r_epoch = c.r2_epoch = 0;
        } else if (c.r_epoch < lf) {
            read_after_earlier(c, e, t);
        } else if (c.r_epoch >= bf && c.r_epoch < e) {
            c.r_epoch = e, c.r_tid = t;  // (another block's read of this launch is kept: any write here races it)
        } else if (c.r_epoch == e && c.r_tid != t) {
            c.r_tid = kManyReaders;
        }
    }
}

// ---- warp barriers -----------------------------------------------------------------------------------------------
// Arrive at a barrier of the lanes in `mask`; returns when all of them have arrived. sync: a __syncwarp (orders
// memory among the lanes, so it starts a new warp epoch for the race check); shuffles and mma are not.
void warp_barrier(unsigned mask, const char* file, int line, bool sync, const char* what) {
    Exec* ex = tls_exec;
    Fiber* f = current();
    Warp& w = ex->warps[f->t.warp];
    const unsigned bit = 1u << f->t.lane;
    const unsigned n = (unsigned)ex->fibers.size();
    const unsigned lanes_here = std::min(32u, n - f->t.warp * 32);
    const unsigned exists = lanes_here == 32 ? 0xffffffffu : ((1u << lanes_here) - 1);
    if (!(mask & bit) || (mask & ~exists)) {
        char b[256];
        std::snprintf(b, sizeof b, "%s at %s:%d in thread %u: mask 0x%08x %s", what, file, line, f->t.linear, mask,
                      !(mask & bit) ? "does not include the calling lane" : "names lanes this warp does not have");
        fail(ex, b);
        die(f);
    }
    f->state = State::WarpBarrier;
    f->file = file;
    f->line = line;
    f->wmask = mask;
    w.arrived |= bit;
    if ((w.arrived & mask) == mask) {
        for (unsigned l = 0; l < 32; l++) {
            if (!(mask & (1u << l))) continue;
            Fiber& o = ex->fibers[f->t.warp * 32 + l];
            if (o.wmask != mask) {
                char b[256];
                std::snprintf(b, sizeof b, "%s at %s:%d: lane %u waits with mask 0x%08x, lane %u with 0x%08x", what,
                              file, line, f->t.lane, mask, l, o.wmask);
                fail(ex, b);
                die(f);
            }
            o.state = State::Runnable;
        }
        w.arrived &= ~mask;
        if (sync) w.epoch = next_epoch();
        return;
    }
    yield(f);
    if (ex->failed) die(f);
}

}  // namespace

// ---- the API of cuda_emu.h -------------------------------------------------------------------------------------------

void syncthreads(const char* file, int line) {
    Exec* ex = tls_exec;
    Fiber* f = current();
    f->state = State::BlockBarrier;
    f->file = file;
    f->line = line;
    if (++ex->arrived == ex->live) {
        if (ex->live != (int)ex->fibers.size()) {
            report_stall(ex);  // some threads returned before this barrier: they will never arrive
            die(f);
        }
        for (Fiber& o : ex->fibers) {
            if (o.file != file || o.line != line) {
                char b[512];
                std::snprintf(b, sizeof b,
                              "barrier divergence: thread %u waits at __syncthreads (%s:%d), thread %u at "
                              "__syncthreads (%s:%d)",
                              f->t.linear, file, line, o.t.linear, o.file, o.line);
                fail(ex, b);
                die(f);
            }
        }
        for (Fiber& o : ex->fibers) o.state = State::Runnable;
        ex->arrived = 0;
        ex->epoch = next_epoch();
        for (Warp& w : ex->warps) w.epoch = next_epoch();
        return;
    }
    yield(f);
    if (ex->failed) die(f);
}

void syncwarp(const char* file, int line, unsigned mask) { warp_barrier(mask, file, line, true, "__syncwarp"); }

void trap(const char* file, int line) {
    Exec* ex = tls_exec;
    char b[256];
    std::snprintf(b, sizeof b, "__trap() at %s:%d in thread %u", file, line, current()->t.linear);
    fail(ex, b);
    die(current());
}

uint64_t warp_exchange(unsigned mask, uint64_t value, unsigned src, const char* what, const char* file, int line) {
    Exec* ex = tls_exec;
    Fiber* f = current();
    Warp& w = ex->warps[f->t.warp];
    const unsigned buf = f->xchg++ & 1;
    w.slot[buf][f->t.lane] = value;
    warp_barrier(mask, file, line, false, what);
    if (!(mask & (1u << src))) {
        char b[200];
        std::snprintf(b, sizeof b, "%s in thread %u reads lane %u, which is not in the mask 0x%08x", what,
                      f->t.linear, src, mask);
        fail(ex, b);
        die(f);
    }
    return w.slot[buf][src];
}

void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    Exec* ex = tls_exec;
    Fiber* f = current();
    Warp& w = ex->warps[f->t.warp];
    const unsigned buf = f->xchg++ & 1;
    uint32_t* mine = w.mma[buf][f->t.lane];
    for (int i = 0; i < 4; i++) mine[i] = a[i];
    mine[4] = b0;
    mine[5] = b1;
    // .aligned: every lane of the warp executes the same mma
    warp_barrier(0xffffffffu, "mma.sync.aligned.m16n8k16", 0, false, "mma.sync");
    // The fragment layouts of the PTX ISA (Warp-level matrix fragment mma.m16n8k16, .bf16), g = lane/4, t = lane%4:
    //   A (16x16, row): element (r, k) is in lane (r % 8)·4 + (k % 8)/2, register (r >= 8) + 2·(k >= 8),
    //                   the low half for even k
    //   B (16x8, col):  element (k, n) is in lane n·4 + (k % 8)/2, register (k >= 8), the low half for even k
    //   C/D (16x8):     c0, c1 = (g, 2t), (g, 2t+1); c2, c3 = (g+8, 2t), (g+8, 2t+1)
    auto half = [](uint32_t reg, int k) {
        __nv_bfloat16_raw raw;
        raw.x = (unsigned short)((k & 1) ? reg >> 16 : reg & 0xffffu);
        return __bfloat162float(__nv_bfloat16(raw));
    };
    auto A = [&](int r, int k) { return half(w.mma[buf][(r % 8) * 4 + (k % 8) / 2][(r >= 8) + 2 * (k >= 8)], k); };
    auto B = [&](int k, int n) { return half(w.mma[buf][n * 4 + (k % 8) / 2][4 + (k >= 8)], k); };
    const int g = (int)f->t.lane / 4, t = (int)f->t.lane % 4;
    for (int i = 0; i < 4; i++) {
        int r = g + 8 * (i >= 2), n = 2 * t + (i & 1);
        float acc = 0.0f;
        for (int k = 0; k < 16; k++) acc += A(r, k) * B(k, n);  // bf16 products are exact in fp32
        c[i] += acc;
    }
}

// A declaration's first use in the block allocates it. The block's static shared memory so far (declarations in
// branches not taken are left out: a GPU counts them too, so this sees less, never more) is held to sm_90's limits
// (runtime API, cudaFuncSetAttribute: the attribute plus the static size within the opt-in 227 KiB; without the
// attribute, static and dynamic together within 48 KiB; ptxas refuses more than 48 KiB declared). Known only as
// the kernel runs, a failure is the sticky one of a kernel that ran, as for __launch_bounds__.
void* static_smem_bytes(const void* key, size_t bytes, size_t align) {
    Exec* ex = tls_exec;
    for (Region& r : ex->regions)
        if (r.key == key) return reinterpret_cast<void*>(r.lo);
    size_t declared = bytes;
    for (const Region& r : ex->regions)
        if (r.key) declared += r.hi - r.lo;
    const int attribute = dynamic_smem_attribute(ex->kernel);
    char b[320] = "";
    if (declared > kStaticSmemLimit)
        std::snprintf(b, sizeof b, "%zu bytes of static shared memory (__shared__ declarations), above the 48 KiB a "
                      "kernel may declare: ptxas refuses it (more must be extern __shared__, with "
                      "cudaFuncSetAttribute)", declared);
    else if (attribute < 0 && declared + ex->cfg.smem > kStaticSmemLimit)
        std::snprintf(b, sizeof b, "%zu bytes of static and %zu of dynamic shared memory, above 48 KiB together "
                      "without cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize): a GPU refuses the "
                      "launch", declared, ex->cfg.smem);
    else if (attribute >= 0 && declared + (size_t)attribute > kOptinSmemLimit)
        std::snprintf(b, sizeof b, "%zu bytes of static shared memory and a MaxDynamicSharedMemorySize of %d, above "
                      "sm_90's 227 KiB per block together: a GPU refuses the attribute, then the launch", declared,
                      attribute);
    if (b[0]) {
        fail(ex, b);
        die(current());
    }
    return add_region(ex, key, bytes, align);
}
long carriers_started() { return g_carriers; }
void* dynamic_smem_bytes() { return tls_exec->dyn; }

void kernel_entry(const char* name, const char* signature, unsigned max_threads) {
    Exec* ex = tls_exec;
    if (ex->name) return;
    ex->name = name;
    ex->signature = signature;
    {
        std::lock_guard<std::mutex> lock(g_executed_mu);
        executed().insert(name);
    }
    const unsigned threads = ex->cfg.block.x * ex->cfg.block.y * ex->cfg.block.z;
    if (max_threads > 0 && threads > max_threads) {
        // (a GPU refuses it at the launch and the context stays usable; the bound is known here only, inside the
        // kernel's instantiation, so it fails as a launch that ran: sticky, as any bug the emulation reports)
        char b[200];
        std::snprintf(b, sizeof b, "a block of %u threads, above the kernel's __launch_bounds__ of %u: a GPU "
                      "refuses the launch", threads, max_threads);
        fail(ex, b);
        die(current());
    }
    // a pointer argument to memory a GPU kernel cannot reach (a std::vector's): here it would work
    for (unsigned i = 0; i < ex->body.n_arguments; i++) {
        const std::string why = device_range_problem(ex->body.pointers[i], 0);
        if (why.empty()) continue;
        char b[360];
        std::snprintf(b, sizeof b, "argument %u of the kernel is %p, %s", i + 1, ex->body.pointers[i], why.c_str());
        fail(ex, b);
        die(current());
    }
}

void track_device_buffer(void* p, size_t bytes) {
    if (!global_race_check_enabled() || bytes == 0) return;
    void* m = mmap(nullptr, bytes * sizeof(GCell), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);  // zero pages (epoch 0: no access), given memory only where a kernel touches the buffer
    if (m == MAP_FAILED) {
        std::fprintf(stderr, "cuda_emu: cannot map the race check's cells for a %zu-byte buffer "
                             "(PRAC_EMU_RACECHECK=shared checks shared memory only)\n", bytes);
        std::abort();
    }
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    std::lock_guard<std::mutex> lock(g_shadow_mu);
    shadow_table()[lo] = Shadow{lo, lo + bytes, static_cast<GCell*>(m)};
}
void untrack_device_buffer(void* p) {
    std::lock_guard<std::mutex> lock(g_shadow_mu);
    auto it = shadow_table().find(reinterpret_cast<uintptr_t>(p));
    if (it == shadow_table().end()) return;
    munmap(it->second.cells, (it->second.hi - it->second.lo) * sizeof(GCell));
    shadow_table().erase(it);
}

// Between launches: every cell back to "no access" (the global cells' pages back to zero pages) and the counter to 0.
static void restart_epochs() {
    std::fill(cell_pool().begin(), cell_pool().end(), Cell{});
    std::lock_guard<std::mutex> lock(g_shadow_mu);
    for (const auto& kv : shadow_table())
        madvise(kv.second.cells, (kv.second.hi - kv.second.lo) * sizeof(GCell), MADV_DONTNEED);
    g_epoch = 0;
    clear_records();
}
// stream_order.h: a copy's, memset's or library routine's bytes, checked against earlier operations of other
// streams and recorded (one epoch for the whole operation: its own accesses never race each other). A matrix looks
// its buffer up once and checks column by column.
namespace {
// The running operation's checked bytes in the device buffer `sh` holding p; false: nothing to check (no operation,
// the check off, host memory, or this operation's race already reported).
bool begin_op_bytes(const void* p, const char* what, Shadow* sh) {
    const OpOrder* o = running_op();
    if (!o || !p || !global_race_check_enabled() || !o->cross_check || tls_exec) return false;
    {
        std::lock_guard<std::mutex> lock(g_shadow_mu);
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);
        auto it = shadow_table().upper_bound(a);
        if (it == shadow_table().begin()) return false;
        --it;
        if (a >= it->second.hi) return false;  // host memory
        *sh = it->second;
    }
    if (o->serial != g_order_serial) {
        if (g_epoch >= kEpochRestart) restart_epochs();
        begin_checked_op(o, next_epoch(), what);
    }
    return g_reported_serial != o->serial;
}
// Bytes [lo, hi) of sh (clamped to its end); false after reporting a race.
bool check_op_bytes(const Shadow& sh, uintptr_t lo, uintptr_t hi, bool write, const char* what) {
    const uint32_t e = g_order_first;
    hi = std::min(hi, sh.hi);
    if (g_ordered_upto >= e - 1) {  // every recorded access is ordered before this operation (one stream at work,
                                    // or the others waited for): nothing can race it, its bytes are only recorded,
                                    // as the loop below would (a GEMM's or a copy's, byte by byte, took a fifth of
                                    // an emulated test's time there)
        GCell* const end = sh.cells + (hi - sh.lo);
        if (write)
            for (GCell* c = sh.cells + (lo - sh.lo); c < end; c++) c->w_epoch = e, c->w_tid = 0, c->r_epoch = 0,
                                                                    c->r2_epoch = 0;
        else
            for (GCell* c = sh.cells + (lo - sh.lo); c < end; c++) c->r_epoch = e, c->r_tid = 0;
        return true;
    }
    for (uintptr_t b = lo; b < hi; b++) {
        GCell& c = sh.cells[b - sh.lo];
        const bool race_w = c.w_epoch != 0 && c.w_epoch < e && !earlier_ordered(c.w_epoch);
        const bool race_r = write && c.r_epoch != 0 && c.r_epoch < e && !earlier_ordered(c.r_epoch);
        const bool race_r2 = write && !race_r && unordered_earlier(c.r2_epoch);
        if (race_w || race_r || race_r2) {
            char m[1200];
            std::snprintf(m, sizeof m, "cuda_emu: global-memory race across streams on byte %zu of a %zu-byte device "
                          "buffer: %s %s it; another operation %s", (size_t)(b - sh.lo), (size_t)(sh.hi - sh.lo),
                          what, write ? "writes" : "reads",
                          unordered_with(race_w ? c.w_epoch : race_r ? c.r_epoch : c.r2_epoch, race_w, write).c_str());
            std::fprintf(stderr, "%s\n", m);
            set_kernel_error(m);
            note_races(1);
            g_reported_serial = g_order_serial;
            return false;
        }
        // (read_after_earlier keeps another stream's unordered read: a later write, this operation's own in place
        // too, must meet it)
        if (write) {
            c.w_epoch = e, c.w_tid = 0, c.r_epoch = c.r2_epoch = 0;
        } else if (c.r_epoch < e) {
            read_after_earlier(c, e, 0);
        }
    }
    return true;
}
}  // namespace

// A device operand of a copy, memset or library routine: false, after failing the operation (sticky), when it lies
// where a GPU routine cannot reach (pageable host memory: device_range_problem), or past its allocation's end.
static bool device_operand(const void* p, size_t bytes, const char* what) {
    const std::string why = device_range_problem(p, bytes);
    if (why.empty()) return true;
    char m[480];
    std::snprintf(m, sizeof m, "cuda_emu: %s given %p as a device operand of %zu bytes: %s", what, p, bytes,
                  why.c_str());
    std::fprintf(stderr, "%s\n", m);
    set_kernel_error(m);
    return false;
}

void op_access(const void* p, size_t bytes, bool write, const char* what) {
    Shadow sh{};
    if (bytes == 0 || !device_operand(p, bytes, what) || !begin_op_bytes(p, what, &sh)) return;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
    check_op_bytes(sh, lo, lo + bytes, write, what);
}
void op_access_matrix(const void* p, int64_t rows, int64_t cols, int64_t ld, size_t elem, bool write,
                      const char* what) {
    Shadow sh{};
    if (rows <= 0 || cols <= 0 || !device_operand(p, (size_t)((cols - 1) * ld + rows) * elem, what) ||
        !begin_op_bytes(p, what, &sh))
        return;
    const uintptr_t base = reinterpret_cast<uintptr_t>(p);
    if (ld == rows) {
        check_op_bytes(sh, base, base + (size_t)(rows * cols) * elem, write, what);
        return;
    }
    for (int64_t j = 0; j < cols; j++) {
        const uintptr_t col = base + (size_t)(j * ld) * elem;
        if (!check_op_bytes(sh, col, col + (size_t)rows * elem, write, what)) return;
    }
}
void op_access_triangle(const void* p, int64_t n, int64_t ld, size_t elem, bool upper, bool write, const char* what) {
    Shadow sh{};
    if (n <= 0 || !device_operand(p, (size_t)((n - 1) * ld + n) * elem, what) || !begin_op_bytes(p, what, &sh)) return;
    for (int64_t j = 0; j < n; j++) {  // column j's rows 0..j (upper) or j..n-1 (lower)
        const int64_t first = upper ? 0 : j, rows = upper ? j + 1 : n - j;
        const uintptr_t col = reinterpret_cast<uintptr_t>(p) + (size_t)(j * ld + first) * elem;
        if (!check_op_bytes(sh, col, col + (size_t)rows * elem, write, what)) return;
    }
}
bool set_cross_stream_check(bool on) {
    return g_cross_stream_check.exchange(on);
}
bool cross_stream_check_on() { return g_cross_stream_check; }

uint32_t epoch_counter() { return g_epoch; }
void set_epoch_counter(uint32_t e) { g_epoch = e; }

unsigned long long block_run_at(unsigned long long i, unsigned long long total) {
    if (total <= 1) return 0;
    unsigned long long stride = (unsigned long long)(0.618 * (double)total);  // the golden ratio's spread
    if (stride < 1) stride = 1;
    while (std::gcd(stride, total) != 1) stride++;  // a stride coprime with total visits every block once
    return (unsigned long long)((total / 2 + (unsigned __int128)i * stride) % total);
}

// Whether the global-memory race check runs on this launch: on the first kGlobalChecksPerConfig launches of each
// kernel with each configuration (grid, block, dynamic shared memory), or on every one (PRAC_EMU_RACECHECK=all). A
// training run launches one kernel with one configuration thousands of times, and checking each of them made the
// emulated suite 1.46 times as long (617 s to 900 s on 2 cores); a race that shows only in a later launch of the same configuration needs data
// that steer the kernel's accesses. (Launches run one at a time: no lock.)
constexpr int kGlobalChecksPerConfig = 2;
static bool check_this_launch_globally(const Config& cfg, const void* kernel) {
    if (!global_race_check_enabled()) return false;
    if (global_race_check_every_launch()) return true;
    static std::map<std::vector<uintptr_t>, int> launched;
    const std::vector<uintptr_t> key = {reinterpret_cast<uintptr_t>(kernel), cfg.grid.x, cfg.grid.y, cfg.grid.z,
                                        cfg.block.x, cfg.block.y, cfg.block.z, cfg.smem};
    return launched[key]++ < kGlobalChecksPerConfig;
}

// Runs every block of one launch (under stream_order's lock: one operation at a time), in block_run_at's order.
static void run_launch(const Config& cfg, const void* kernel, Body body, bool off_main) {
    Exec ex;
    ex.cfg = cfg;
    ex.body = body;
    ex.kernel = kernel;
    ex.blk.dim = cfg.block;
    ex.blk.grid = cfg.grid;
    tls_exec = &ex;
    if (g_epoch >= kEpochRestart) restart_epochs();
    ex.launch_first = g_epoch + 1;
    // (also every launch while another stream has work not ordered before it: a race across streams needs no
    // first launch, and the refresh worker's kernels repeat the configurations of the step's)
    const OpOrder* order = running_op();
    tls_global_check = check_this_launch_globally(cfg, kernel) ||
                       (global_race_check_enabled() && order && order->cross_check &&
                        first_unordered_epoch(order) != UINT32_MAX);
    size_t record = SIZE_MAX;
    if (tls_global_check) {
        {
            std::lock_guard<std::mutex> lock(g_shadow_mu);
            for (const auto& kv : shadow_table()) ex.shadows.push_back(kv.second);
        }
        ex.shadow_v = ex.shadows.data();
        ex.shadow_n = ex.shadows.size();
        begin_checked_op(order, ex.launch_first, "a kernel");
        record = g_records.size() - 1;
    }
    tls_buf_lo = tls_buf_hi = 0;
    std::fill(std::begin(tls_recent), std::end(tls_recent), nullptr);
    const unsigned long long gx = cfg.grid.x, gy = cfg.grid.y, total = gx * gy * cfg.grid.z;
    for (unsigned long long i = 0; i < total && !ex.failed; i++) {
        const unsigned long long b = block_run_at(i, total);
        ex.blk.idx = make_uint3((unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / (gx * gy)));
        run_block(&ex);
    }
    tls_exec = nullptr;
    tls_global_check = false;
    if (record != SIZE_MAX && ex.name) g_records[record].what = ex.name;  // (known once a thread has started)
    note_launch(ex.name ? ex.name : "?", ex.failed, ex.races, off_main);
}

cudaError_t launch(const Config& cfg, const void* kernel, Body body, std::shared_ptr<const void> keep) {
    static bool coverage_registered = (std::atexit(write_coverage), true);
    (void)coverage_registered;
    if (tls_exec) {
        std::fprintf(stderr, "cuda_emu: a kernel launched another kernel (dynamic parallelism is not emulated)\n");
        std::abort();
    }
    // The limits a launch is checked against on an sm_90 GPU (CUDA C++ Programming Guide, compute capability
    // table; cudaErrorInvalidConfiguration / cudaErrorInvalidValue as the runtime returns them).
    const dim3 g = cfg.grid, b = cfg.block;
    const unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    char msg[256];
    cudaError_t bad = cudaSuccess;
    if (g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535 || g.x > 2147483647u || threads == 0 ||
        threads > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64) {
        std::snprintf(msg, sizeof msg, "invalid launch configuration: grid (%u,%u,%u), block (%u,%u,%u)", g.x, g.y,
                      g.z, b.x, b.y, b.z);
        bad = cudaErrorInvalidConfiguration;
    } else if (cfg.smem > (size_t)max_dynamic_smem(kernel)) {
        std::snprintf(msg, sizeof msg,
                      "launch with %zu bytes of dynamic shared memory, above the kernel's limit of %d (more than "
                      "48 KiB needs cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) first)",
                      cfg.smem, max_dynamic_smem(kernel));
        bad = cudaErrorInvalidValue;
    }
    if (bad != cudaSuccess) {
        set_launch_error(bad, std::string("cuda_emu: ") + msg);
        return bad;
    }
    if (sticky_error() != cudaSuccess) return sticky_error();  // a failed kernel poisons the context, as on a GPU
    if (cudaError_t e = stream_device_check(cfg.stream, "a kernel launch")) return e;

    // Queued in its stream (stream_order.h), or run now. Operations run one at a time, whichever host thread issued
    // them (a second thread's stream: the refresh worker of --prac-refresh-overlap): a GPU may run kernels of two
    // streams side by side, one after the other is one of the orders it may choose, and the fiber stacks, the race
    // check's cells and the epochs are the process's. `keep` holds the arguments until the launch has run.
    const bool off_main = gettid() != getpid();  // Linux: the main thread's id is the process's
    stream_op(cfg.stream, [cfg, kernel, body, keep, off_main] { run_launch(cfg, kernel, body, off_main); });
    return sticky_error();  // a launch that ran now and failed reports it at once
}

}  // namespace cuda_emu

// ---- the compiler's load/store callbacks (-fsanitize-coverage=trace-loads,trace-stores on kernel sources) ------
// A range test inline: the shared-memory race check's bookkeeping for what may be tracked shared memory, the
// global-memory check's for the rest while a launch runs (inside an atomic, its store only).
#define CUDA_EMU_HOOK(n, T)                                                                                      \
    extern "C" __attribute__((no_sanitize("address"))) void __sanitizer_cov_load##n(T* p) {                     \
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);                                                      \
        if (a < cuda_emu::tls_tracked_hi && a + n > cuda_emu::tls_tracked_lo)                                    \
            cuda_emu::access(p, n, false, __builtin_return_address(0));                                          \
        else if (cuda_emu::tls_global_check && !cuda_emu::tls_in_atomic)                                        \
            cuda_emu::global_access(p, n, false, __builtin_return_address(0));                                   \
    }                                                                                                            \
    extern "C" __attribute__((no_sanitize("address"))) void __sanitizer_cov_store##n(T* p) {                    \
        const uintptr_t a = reinterpret_cast<uintptr_t>(p);                                                      \
        if (a < cuda_emu::tls_tracked_hi && a + n > cuda_emu::tls_tracked_lo)                                    \
            cuda_emu::access(p, n, true, __builtin_return_address(0));                                           \
        else if (cuda_emu::tls_global_check && !cuda_emu::tls_in_atomic)                                        \
            cuda_emu::global_access(p, n, true, __builtin_return_address(0));                                    \
        else if (cuda_emu::tls_global_check)                                                                     \
            cuda_emu::global_atomic_access(p, n, __builtin_return_address(0));                                   \
    }
CUDA_EMU_HOOK(1, uint8_t)
CUDA_EMU_HOOK(2, uint16_t)
CUDA_EMU_HOOK(4, uint32_t)
CUDA_EMU_HOOK(8, uint64_t)
CUDA_EMU_HOOK(16, __int128)
