// The CUDA device language on a CPU: what nvcc gives a kernel (threadIdx, __syncthreads, __shfl_xor_sync,
// __shared__, atomics, the _rn intrinsics, mma.sync) as host C++. Forced-included (-include) into every translation
// unit of the emulated build, after kernels/cuda_emu/rewrite.py has turned the two pieces of CUDA syntax that are
// not C++ into calls declared here:
//
//   k<<<grid, block, smem, stream>>>(args)   ->  ::cuda_emu::launcher(cfg(grid, block, smem, stream),
//                                                     [=](auto&&... a) { k(a...); }, <k's address>)(args)
//   __shared__ float part[8][33];            ->  float (&part)[8][33] = ::cuda_emu::static_smem<float[8][33]>(..)
//   extern __shared__ float smem[];          ->  float* smem = ::cuda_emu::dynamic_smem<float>()
//   __global__ void k(..) {                  ->  __global__ void k(..) { ::cuda_emu::kernel_entry("k", ..);
//
// Execution model (kernels/cuda_emu/exec.cpp): a launch is queued in its stream and runs when something waits for that
// stream (stream_order.h), its blocks one after another (not in index order: emu_internal.h, block_run_at) on the host
// thread that runs the queue (operations run one at a time, whichever host threads issue them); inside a block the CUDA
// threads run as fibers, switched without a system call (Boost.Context). A thread runs until it reaches a barrier
// (__syncthreads, __syncwarp, a shuffle, mma.sync) or returns; a barrier releases when every thread it waits for has
// arrived. Threads start in order on a shared stack; one that waits keeps it (a kernel without barriers runs without a
// fiber switch). Barriers that can never release (divergent __syncthreads, threads that exited before a barrier others
// wait at) end the launch with an error that names the kernel, the block and where the threads are, where a GPU would
// hang. Because a block's threads never run at the same time, atomics are plain read-modify-writes and __shared__ needs
// no locking.
//
// Checking (the emulated build is compiled with AddressSanitizer): each block's shared memory is its own heap
// allocation of exactly the declared size, filled with 0x7f bytes (3.39e38 for fp32 and bf16) so reads of unwritten
// shared memory show; ASan catches out-of-bounds accesses to it and to cudaMalloc'ed buffers. The kernel sources are also
// compiled with -fsanitize-coverage=trace-loads,trace-stores, whose callbacks (exec.cpp) record, per byte of shared
// memory, who wrote and read it since the last barrier: two threads touching the same byte between barriers with
// at least one write is reported as a race (what compute-sanitizer --tool racecheck reports). Per byte of every
// cudaMalloc'ed buffer they record the same for the running launch: a byte that two blocks touch, one of them
// writing, or two threads of a block between barriers, is a race too (which no GPU tool reports; atomics with each
// other excepted).
#pragma once
#define PRAC_CUDA_EMU 1

#include <cuda_runtime.h>
#include <cuda_bf16.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

// In host compilation crt/host_defines.h makes __global__, __device__, __host__, __forceinline__ plain; these two
// it leaves undefined (rewrite.py hands a kernel's maxThreadsPerBlock to kernel_entry, which checks the launch).
#define __launch_bounds__(...)
#ifndef __CUDA_ARCH_EMU__
#define __CUDA_ARCH_EMU__ 900  // the GPU the emulation describes (cudaGetDeviceProperties): sm_90
#endif

namespace cuda_emu {

// ---- the state of the running CUDA thread --------------------------------------------------------------------
struct Block;
struct Thread {
    uint3 idx;          // threadIdx
    unsigned linear;    // x + y * blockDim.x + z * blockDim.x * blockDim.y
    unsigned lane;      // linear % 32
    unsigned warp;      // linear / 32
    Block* block;
};
struct Block {
    uint3 idx;   // blockIdx
    dim3 dim;    // blockDim
    dim3 grid;   // gridDim
};
// The CUDA thread running on this OS thread (null outside kernels). __thread, not thread_local: a variable that
// cannot have a dynamic initializer is read directly, not through a call of its TLS wrapper in every threadIdx.
extern __thread Thread* tls_thread;

// ---- barriers (exec.cpp) ---------------------------------------------------------------------------------------
void syncthreads(const char* file, int line);
void syncwarp(const char* file, int line, unsigned mask = 0xffffffffu);
[[noreturn]] void trap(const char* file, int line);

// Warp-wide exchange of 8 bytes per lane: every lane of `mask` deposits `value`, waits for the others, and gets
// lane src's deposit. Returns false (after reporting) if src is not in the mask.
uint64_t warp_exchange(unsigned mask, uint64_t value, unsigned src, const char* what, const char* file, int line);

// std::bit_cast (C++20) for this C++17 build
template <typename To, typename From>
To bit_cast(const From& x) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
    To out;
    std::memcpy(&out, &x, sizeof(To));
    return out;
}

template <typename T>
T shfl_from(unsigned mask, T v, unsigned src, const char* what, const char* file, int line) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffles move up to 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = warp_exchange(mask, bits, src, what, file, line);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}
// Source lanes as the CUDA Programming Guide defines them (warp shuffle functions): a warp is split into groups of
// `width` lanes; a lane outside the caller's group, or past the ends for up/down, gives the caller its own value.
inline unsigned lane_now() { return tls_thread->lane; }
template <typename T>
T shfl_xor_sync(const char* file, int line, unsigned mask, T v, int lane_mask, int width = 32) {
    unsigned lane = lane_now(), src = lane ^ (unsigned)lane_mask;
    if ((src & ~(unsigned)(width - 1)) > (lane & ~(unsigned)(width - 1))) src = lane;  // a later group: own value
    return shfl_from(mask, v, src, "__shfl_xor_sync", file, line);
}
template <typename T>
T shfl_sync(const char* file, int line, unsigned mask, T v, int src_lane, int width = 32) {
    unsigned lane = lane_now();
    unsigned src = (lane & ~(unsigned)(width - 1)) + ((unsigned)src_lane % (unsigned)width);
    return shfl_from(mask, v, src, "__shfl_sync", file, line);
}
template <typename T>
T shfl_down_sync(const char* file, int line, unsigned mask, T v, unsigned delta, int width = 32) {
    unsigned lane = lane_now(), seg = lane & ~(unsigned)(width - 1);
    unsigned src = lane + delta < seg + (unsigned)width ? lane + delta : lane;
    return shfl_from(mask, v, src, "__shfl_down_sync", file, line);
}
template <typename T>
T shfl_up_sync(const char* file, int line, unsigned mask, T v, unsigned delta, int width = 32) {
    unsigned lane = lane_now(), seg = lane & ~(unsigned)(width - 1);
    unsigned src = lane >= seg + delta ? lane - delta : lane;
    return shfl_from(mask, v, src, "__shfl_up_sync", file, line);
}

// ---- shared memory (exec.cpp): one allocation per declaration per block ------------------------------------
void* static_smem_bytes(const void* key, size_t bytes, size_t align);
void* dynamic_smem_bytes();
template <typename T>
T& static_smem(const void* key) {
    return *static_cast<T*>(static_smem_bytes(key, sizeof(T), alignof(T) < 16 ? 16 : alignof(T)));
}
template <typename T>
T* dynamic_smem() {
    return static_cast<T*>(dynamic_smem_bytes());
}
// the key of one __shared__ declaration: the address of a static inside the kernel (one per instantiation)
#define CUDA_EMU_SMEM_KEY() ([] { static const char k = 0; return &k; }())

// ---- kernels and launches ------------------------------------------------------------------------------------
// Called first by every thread of every kernel (inserted by rewrite.py): names the launch in diagnostics and
// records the kernel for the coverage report.
// max_threads: __launch_bounds__'s maxThreadsPerBlock (0: none). A GPU refuses a launch of larger blocks; here
// the launch fails at its first thread, with a message that says why.
void kernel_entry(const char* name, const char* signature, unsigned max_threads = 0);

struct Config {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
inline Config cfg(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = nullptr) {
    return Config{grid, block, smem, stream};
}
// Runs `body.run(body.ctx)` as every thread of every block (exec.cpp), in stream order: now, or later when the
// stream's queue runs (kernels/cuda_emu/stream_order.h); `keep` owns what body.ctx and body.pointers point to until
// then. `kernel` (may be null) identifies the kernel for the limits cudaFuncSetAttribute raised. body.pointers: the
// value of each argument that is a data pointer, null for the others (the kernel's entry checks that each points to
// memory a GPU kernel may touch).
struct Body {
    void (*run)(const void* ctx);
    const void* ctx;
    const void* const* pointers;
    unsigned n_arguments;
};
cudaError_t launch(const Config& cfg, const void* kernel, Body body, std::shared_ptr<const void> keep);

// The kernel's address, when the launch names one function (a kernel, a pointer to one, or a template with all
// its arguments given); Tag only makes the call depend on the caller's generic lambda, so that a kernel whose
// template arguments are deduced from the launch's arguments removes that lambda (SFINAE) instead of failing.
template <typename Tag, typename R, typename... P>
const void* kernel_ptr(R (*f)(P...)) {
    return reinterpret_cast<const void*>(f);
}

// An argument's value when it is a pointer to data (not to a function), else null.
template <typename T>
const void* data_pointer(const T& v) {
    if constexpr (std::is_pointer_v<T> && !std::is_function_v<std::remove_pointer_t<T>>)
        return (const void*)v;  // (a C cast: pointers to volatile data too)
    else
        return nullptr;
}

// launcher(cfg, call, address)(args): the arguments are evaluated once and kept (as a launch copies them into the
// parameter buffer), with `call` (a copy of [=](auto&&... a) { kernel(a...); }, so template arguments are deduced as
// at the launch), until the launch runs; every thread then calls the kernel with them, each with its own copies of
// the parameters.
template <typename Call, typename Addr>
struct Launcher {
    Config cfg;
    Call call;
    Addr addr;
    template <typename... A>
    void operator()(A&&... a) {
        const void* k = nullptr;
        if constexpr (std::is_invocable_v<Addr&, int>) k = addr(0);
        struct Ctx {
            Call call;
            std::tuple<std::decay_t<A>...> args;
            std::array<const void*, sizeof...(A) + 1> pointers;  // (+ 1: no zero-length array)
        };
        auto ctx = std::make_shared<Ctx>(Ctx{call, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...), {}});
        std::apply([&](const auto&... v) {
            size_t i = 0;
            ((ctx->pointers[i++] = data_pointer(v)), ...);
        }, ctx->args);
        Body body{[](const void* c) {
                      const Ctx* x = static_cast<const Ctx*>(c);
                      std::apply(x->call, x->args);
                  },
                  ctx.get(), ctx->pointers.data(), (unsigned)sizeof...(A)};
        launch(cfg, k, body, ctx);
    }
};
template <typename Call, typename Addr>
Launcher<Call, Addr> launcher(const Config& c, Call call, Addr addr) {
    return Launcher<Call, Addr>{c, call, addr};
}

// ---- mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (exec.cpp) ----------------------------------------
// d = a·b + c for one warp, fragments in the PTX ISA layout (a: 4 registers of 2 bf16, b: 2, c/d: 4 floats).
void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

}  // namespace cuda_emu

// cuda_runtime.h declares its C++ overload for kernel pointers only under nvcc (__CUDACC__)
template <typename T>
inline cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
    return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// ---- the built-in variables ------------------------------------------------------------------------------------
constexpr int warpSize = 32;  // a variable, not a macro: cudaDeviceProp has a member of that name
#define threadIdx (::cuda_emu::tls_thread->idx)
#define blockIdx (::cuda_emu::tls_thread->block->idx)
#define blockDim (::cuda_emu::tls_thread->block->dim)
#define gridDim (::cuda_emu::tls_thread->block->grid)

#define __syncthreads() ::cuda_emu::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) ::cuda_emu::syncwarp(__FILE__, __LINE__, ##__VA_ARGS__)
#define __trap() ::cuda_emu::trap(__FILE__, __LINE__)
#define __shfl_xor_sync(...) ::cuda_emu::shfl_xor_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_sync(...) ::cuda_emu::shfl_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::cuda_emu::shfl_down_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::cuda_emu::shfl_up_sync(__FILE__, __LINE__, __VA_ARGS__)

// ---- atomics: a block's threads never run at once and blocks run in sequence, so a plain read-modify-write is
// atomic. Returns the old value, as CUDA's do. -------------------------------------------------------------------
namespace cuda_emu {
extern __thread bool tls_in_atomic;  // exec.cpp: the global-memory race check takes an atomic as one write
template <typename T, typename F>
inline T read_modify_write(T* p, F f) {
    // (the compiler barriers keep the flag's stores around the access: the load/store callbacks are inserted after
    // optimization, which would otherwise drop the first store as overwritten by the second)
    tls_in_atomic = true;
    asm volatile("" ::: "memory");
    T old = *p;
    *p = f(old);
    asm volatile("" ::: "memory");
    tls_in_atomic = false;
    return old;
}
}  // namespace cuda_emu
template <typename T>
inline T atomicAdd(T* p, T v) { return cuda_emu::read_modify_write(p, [v](T o) { return o + v; }); }
template <typename T>
inline T atomicExch(T* p, T v) { return cuda_emu::read_modify_write(p, [v](T) { return v; }); }
template <typename T>
inline T atomicOr(T* p, T v) { return cuda_emu::read_modify_write(p, [v](T o) { return o | v; }); }
template <typename T>
inline T atomicAnd(T* p, T v) { return cuda_emu::read_modify_write(p, [v](T o) { return o & v; }); }
template <typename T>
inline T atomicMax(T* p, T v) { return cuda_emu::read_modify_write(p, [v](T o) { return o < v ? v : o; }); }
template <typename T>
inline T atomicMin(T* p, T v) { return cuda_emu::read_modify_write(p, [v](T o) { return v < o ? v : o; }); }
template <typename T>
inline T atomicCAS(T* p, T cmp, T v) { return cuda_emu::read_modify_write(p, [cmp, v](T o) { return o == cmp ? v : o; }); }
inline void __threadfence() {}
inline void __threadfence_block() {}

// ---- float intrinsics: IEEE round-to-nearest single operations, never contracted into an FMA (the emulated
// build compiles with -ffp-contract=off, as nvcc keeps __fmul_rn/__fadd_rn apart; with PRAC_EMU_FMA device code
// contracts the rest, below, and these, compiled outside it, stay apart) ----------------------------------------
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
// What rewrite.py puts first in every __global__ and __device__ (not __host__ __device__) body: nvcc's default
// --fmad=true contracts a * b + c into an FMA in device code, across statements; the emulated builds do not, unless
// built with PRAC_EMU_FMA=ON (cmake/CudaEmu.cmake), where a kernel claimed bitwise equal to its CPU twin that misses
// an _rn intrinsic then differs as on a GPU. The pragma marks only the body's own operations: an intrinsic's, a
// host function's, a __host__ __device__ twin's stay uncontracted (clang fuses only two operations both marked).
#if defined(CUDA_EMU_FMA)
#define CUDA_EMU_DEVICE_CONTRACT _Pragma("clang fp contract(fast)")
#else
#define CUDA_EMU_DEVICE_CONTRACT
#endif
// the fast-math intrinsics: the accurate function (the GPU's differ by a few ulp; the CPU twins use these)
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline unsigned __float_as_uint(float x) { return cuda_emu::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned u) { return cuda_emu::bit_cast<float>(u); }
inline int __float_as_int(float x) { return cuda_emu::bit_cast<int>(x); }
inline float __int_as_float(int i) { return cuda_emu::bit_cast<float>(i); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

// CUDA's integer min/max overloads (math_functions.hpp declares them for device code only)
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
