// What the execution layer's parts (exec.cpp: kernels; runtime.cpp: the CUDA runtime API) tell each other, and
// what the emulation's own tests may ask (test/cuda_emu/). Not for the project's code: it sees CUDA's API only.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda_emu/cuda_emu.h"

namespace cuda_emu {

// runtime.cpp: the error state. A launch refused before it runs (bad configuration) sets the calling host thread's
// last error, which its cudaGetLastError returns and clears; a kernel that fails while running (barrier divergence,
// a race, __trap) sets a sticky error that every later call returns, as a GPU context does after a fault.
void set_launch_error(cudaError_t e, const std::string& message);
void set_kernel_error(const std::string& message);
cudaError_t sticky_error();
// The message of the last error (empty when none): for tests and for cudaGetErrorString's callers who want more.
std::string last_error_message();
// cudaSuccess when stream s (null: the legacy default stream) belongs to the calling thread's current device; else
// sets the launch error (cudaErrorInvalidResourceHandle, naming `what`) and returns it, as a kernel launch fails then.
cudaError_t stream_device_check(cudaStream_t s, const char* what);
// Forget every error (the emulation's cudaDeviceReset; tests of deliberately broken kernels use it).
void reset_errors();

// runtime.cpp: the limit set by cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize) (48 KiB
// by default), and the value set (-1 when none was: static and dynamic shared memory then share the 48 KiB).
int max_dynamic_smem(const void* kernel);
int dynamic_smem_attribute(const void* kernel);
constexpr size_t kStaticSmemLimit = 48 * 1024;  // sm_90: what a kernel may declare, and share with dynamic without
                                                // the attribute
constexpr size_t kOptinSmemLimit = 227 * 1024;  // sm_90: static + dynamic per block with the opt-in
// runtime.cpp: counts per kernel name (for the tests of the emulation); off_main: issued by a host thread other than
// the process's main thread.
void note_launch(const char* kernel, bool failed, long races, bool off_main);
long launches_of(const std::string& kernel);
// Kernels launched from a host thread other than the process's main thread (the refresh worker's).
long launches_off_main_thread();
// runtime.cpp: cudaMalloc calls so far (a test can assert that a warm training step allocates nothing).
long malloc_calls();
// runtime.cpp: calls so far that make the host wait for the device on a GPU: cudaStreamSynchronize,
// cudaDeviceSynchronize, cudaEventSynchronize, cudaFree, cudaFreeHost, cudaMemcpy with a host side, cudaMemcpyAsync
// with a pageable (not cudaMallocHost) host side. PRAC_EMU_TRACE_HOST_WAITS=1 also prints each one to stdout.
long host_waits();
// runtime.cpp: operations that waited in a stream's queue and ran later (stream_order.h; 0 with
// PRAC_EMU_STREAMS=eager), e.g. for a test that a program's streams really were queued.
long queued_operations_run();
long races_seen();
void note_races(long n);  // exec.cpp: a race found outside a kernel (a copy or library routine: op_access)

// runtime.cpp: whether shared memory accesses are tracked (on unless PRAC_EMU_RACECHECK=0), whether global memory
// accesses are too (on unless PRAC_EMU_RACECHECK=0 or =shared), in every launch (=all) or in the first launches of
// each kernel configuration only (exec.cpp: kGlobalChecksPerConfig).
bool race_check_enabled();
bool global_race_check_enabled();
bool global_race_check_every_launch();
// runtime.cpp: the happens-before order of stream operations, for the global-memory race check across operations
// (exec.cpp). Vector clocks: an operation issued to a stream comes after that stream's earlier ones, after what the
// host had waited for when it was issued, after the legacy default stream's earlier work (a blocking stream), after
// the record an earlier cudaStreamWaitEvent of its stream named; a host wait (a stream, event or device
// synchronization, a cudaMemcpy that returns after its copy, cudaFree, a successful query) adds what it waited for
// to the host's clock; the legacy stream's other work is asynchronous to the host, as on a GPU. One
// host clock for every host thread: their own synchronization (a future's get, a join) is invisible here, so a race
// between the work of two host threads may be missed, never invented.
struct OpOrder {
    uint64_t serial = 0;         // unique per operation issued
    int stream = 0;              // 0: the legacy default stream; i: the i-th stream the process created
    uint32_t clock = 0;          // the operation's number on its stream (from 1)
    std::vector<uint32_t> seen;  // seen[j]: how many of stream j's operations happen before this one
    bool cross_check = true;     // set_cross_stream_check's setting when it was issued
};
// The stream operation running now (null outside one; operations run one at a time).
const OpOrder* running_op();
// "the legacy default stream", "stream 3 (0x..., non-blocking)": for the race reports.
std::string stream_label(int stream);
// exec.cpp: whether the global-memory race check also compares accesses with earlier operations of other streams
// (on with the global check); for the tests of deliberately unordered streams' stale data. Returns the old setting.
// Operations keep the setting of when they were issued (a queued one may run after it changed).
bool set_cross_stream_check(bool on);
bool cross_stream_check_on();

// runtime.cpp: why [p, p + n) cannot be a device operand (a kernel's pointer argument, with n = 0; a library routine's
// matrix or buffer), "" when it can: inside one cudaMalloc allocation, or one cudaMallocHost allocation (which a GPU
// reaches through unified addressing). Here host and device memory are one, and a pointer to a std::vector would work;
// on a GPU it faults. Off after set_host_memory_check(false) (libs_emu.h).
std::string device_range_problem(const void* p, size_t n);

// device_memory.cpp: cudaMalloc's memory, in pages of its own closed to host code (PROT_NONE) except while device
// work runs (stream_order.h's DeviceWork), with a guard page after it and the bytes past its end poisoned for
// AddressSanitizer; null when mmap fails. unmap keeps the range closed for the next 1024 frees (a use after cudaFree
// is said as such), then unmaps it.
void* device_memory_map(size_t bytes);
void device_memory_unmap(void* p);

// exec.cpp: cudaMalloc / cudaFree tell the global-memory race check which buffers are device memory.
void track_device_buffer(void* p, size_t bytes);
void untrack_device_buffer(void* p);
// exec.cpp: the linear index (x + y*gx + z*gx*gy) of the i-th block a launch of `total` blocks runs. Not index
// order, as a GPU promises none: a kernel whose block reads what another block of the same launch writes (a bug: on a
// GPU the writer may run later, or at the same time) would pass in index order whenever the writer comes first. A
// permutation by a stride coprime with total near 0.618 total, from the middle: neighbours run far apart, in both
// directions (what the global-memory race check leaves alone: blocks that talk through atomics). A correct kernel gives
// the same bits in any order.
unsigned long long block_run_at(unsigned long long i, unsigned long long total);
// exec.cpp: the race check's epoch counter, and where it restarts (the first launch from kEpochRestart on clears
// every cell and starts it again from 0); set by tests that place it near its wrap or its restart.
constexpr uint32_t kEpochRestart = 1u << 31;
uint32_t epoch_counter();
void set_epoch_counter(uint32_t e);
// exec.cpp: carriers (fiber stacks) started so far: one per block for a kernel without barriers, one per thread that
// waits at a barrier otherwise.
long carriers_started();

}  // namespace cuda_emu
