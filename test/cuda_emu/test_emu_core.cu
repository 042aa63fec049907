// The CPU execution layer's own test (kernels/cuda_emu/): the device built-ins against their definitions (CUDA C++
// Programming Guide: thread hierarchy, __syncthreads, warp shuffle functions, atomics, launch limits and launch bounds;
// PTX ISA: the mma.m16n8k16 .bf16 fragment layouts), and the checks on deliberately broken kernels: a missing
// __syncthreads (race check), an off-by-one tail (AddressSanitizer, global and shared memory), divergent barriers, a
// block that reads another's output (the global-memory race check; through atomics, the block order); and the
// runtime's stream order (streams that run when waited for, events, pinned and pageable copies).
// Built and run only in the emulated build (PRAC_CUDA=EMU), where every kernel here is ordinary CUDA source.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <gtest/gtest-death-test.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda_emu/emu_internal.h"
#include "kernels/cuda_emu/stream_order.h"

namespace {

template <typename T>
struct DevBuf {
    T* p = nullptr;
    size_t n;
    explicit DevBuf(size_t n_) : n(n_) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
    ~DevBuf() { cudaFree(p); }
    void put(const std::vector<T>& h) { EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
    std::vector<T> get() const {
        std::vector<T> h(n);
        EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return h;
    }
};

// A deliberately failing kernel leaves the (emulated) context in error; each such test starts and ends clean.
struct EmuTest : ::testing::Test {
    void SetUp() override { cuda_emu::reset_errors(); }
    void TearDown() override { cuda_emu::reset_errors(); }
};

// ---- thread hierarchy ------------------------------------------------------------------------------------------
// Every thread writes its flat global id at the position the Programming Guide's index formulas give.
__global__ void index_kernel(int* out) {
    int tid = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
    int block = blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y;
    int per_block = blockDim.x * blockDim.y * blockDim.z;
    out[block * per_block + tid] = block * 1000 + tid;
}

TEST_F(EmuTest, ThreadAndBlockIndicesCoverTheGridOnce) {
    dim3 grid(3, 2, 2), block(4, 3, 2);
    const int total = 12 * 24;
    DevBuf<int> out(total);
    out.put(std::vector<int>(total, -1));
    index_kernel<<<grid, block>>>(out.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<int> h = out.get();
    for (int b = 0; b < 12; b++)
        for (int t = 0; t < 24; t++) EXPECT_EQ(h[b * 24 + t], b * 1000 + t);
}

// ---- __syncthreads and shared memory -----------------------------------------------------------------------------
// Tree sum in static shared memory, one block per row: the barrier between levels is what makes it right.
__global__ void block_sum_kernel(float* out, const float* in, int n) {
    __shared__ float s[256];
    int t = threadIdx.x;
    s[t] = t < n ? in[blockIdx.x * n + t] : 0.0f;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (t < w) s[t] += s[t + w];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = s[0];
}

TEST_F(EmuTest, SharedMemoryTreeSumWithBarriers) {
    const int rows = 5, n = 200;
    std::vector<float> h(rows * n);
    for (int i = 0; i < rows * n; i++) h[i] = (float)(i % 17);
    DevBuf<float> in(rows * n), out(rows);
    in.put(h);
    const long races0 = cuda_emu::races_seen();
    block_sum_kernel<<<rows, 256>>>(out.p, in.p, n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<float> o = out.get();
    for (int r = 0; r < rows; r++) {
        float want = 0;
        for (int i = 0; i < n; i++) want += h[r * n + i];
        EXPECT_EQ(o[r], want) << "row " << r;
    }
    EXPECT_EQ(cuda_emu::races_seen(), races0);
}

// ---- memory nobody wrote --------------------------------------------------------------------------------------
// cudaMalloc does not clear, and a kernel that adds into a buffer nobody zeroed (or reduces over a shared slot
// nobody wrote) is wrong on a GPU whatever garbage is there; the emulation's fill makes it far off. Were the fill a
// near-zero (0xa5 bytes: -2.9e-16) or a NaN that fmaxf drops (0xff), these results came out right.
__global__ void add_one_kernel(float* acc) { acc[threadIdx.x] += 1.0f; }
__global__ void max_with_a_slot_unwritten_kernel(float* out) {
    __shared__ float slot[32];
    if (threadIdx.x < 31) slot[threadIdx.x] = (float)threadIdx.x;  // slot 31 is never written
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = -INFINITY;
        for (int i = 0; i < 32; i++) m = fmaxf(m, slot[i]);
        out[0] = m;
    }
}

TEST_F(EmuTest, MemoryNobodyWroteReadsAsFarOff) {
    DevBuf<float> acc(32), out(1);
    add_one_kernel<<<1, 32>>>(acc.p);  // (no cudaMemset first)
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (float v : acc.get()) EXPECT_GT(std::fabs(v), 1e38f) << "an unzeroed sum must not read as 1";
    max_with_a_slot_unwritten_kernel<<<1, 32>>>(out.p);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_GT(out.get()[0], 1e38f) << "the unwritten slot must not vanish from a max (30 is the written slots')";
    DevBuf<__nv_bfloat16> h(4);
    for (__nv_bfloat16 v : h.get()) EXPECT_GT(std::fabs(__bfloat162float(v)), 1e38f) << "bf16 reads it far off too";
}

// Dynamic shared memory: its size is the launch's third argument; above 48 KiB only after cudaFuncSetAttribute.
__global__ void dyn_smem_kernel(float* out, int n) {
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = 1.0f + (i % 2);
    __syncthreads();
    float s = 0;
    for (int i = 0; i < n; i++) s += buf[i];
    if (threadIdx.x == 0) out[0] = s;
}

TEST_F(EmuTest, DynamicSharedMemoryAndItsLimits) {
    DevBuf<float> out(1);
    const int n = 20000;  // 80 000 bytes: above the 48 KiB default
    dyn_smem_kernel<<<1, 128, n * sizeof(float)>>>(out.p, n);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "more than 48 KiB without the opt-in must be refused";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a refused launch is not a sticky error";
    ASSERT_EQ(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n * 4), cudaSuccess);
    dyn_smem_kernel<<<1, 128, n * sizeof(float)>>>(out.p, n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(out.get()[0], 1.5f * n);  // exact in fp32
    EXPECT_EQ(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024),
              cudaErrorInvalidValue)
        << "sm_90 allows at most 227 KiB per block";
    cudaGetLastError();
}

// Static shared memory counts toward the block's limits (runtime API, cudaFuncSetAttribute: the attribute plus the
// static size within the opt-in 227 KiB; without the attribute, static and dynamic together within 48 KiB; ptxas
// refuses more than 48 KiB of __shared__ declarations). The launch fails when the kernel declares it.
template <int kWords>  // one kernel per size: the attribute belongs to the kernel
__global__ void static_smem_kernel(float* out, int words_dyn) {
    __shared__ float half_a[kWords / 2];
    __shared__ float half_b[kWords / 2];
    extern __shared__ float dyn[];
    half_a[threadIdx.x] = 1.0f;
    half_b[threadIdx.x] = 2.0f;
    if (words_dyn > 0) dyn[threadIdx.x] = 4.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = half_a[1] + half_b[1] + (words_dyn > 0 ? dyn[1] : 0.0f);
}

TEST_F(EmuTest, StaticSharedMemoryCountsTowardTheLimits) {
    DevBuf<float> out(1);
    constexpr int k32KiB = 8192, k50KiB = 12800;
    static_smem_kernel<k32KiB><<<1, 32, 16 * 1024>>>(out.p, 4096);  // 32 + 16 KiB: exactly 48
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    EXPECT_EQ(out.get()[0], 7.0f);

    static_smem_kernel<k32KiB><<<1, 32, 16 * 1024 + 4>>>(out.p, 4097);  // one word past 48 KiB together
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("32768 bytes of static and 16388 of dynamic shared memory, above 48 KiB together"),
              std::string::npos) << m;
    cuda_emu::reset_errors();

    // with the attribute, the dynamic part may grow until both together reach 227 KiB
    ASSERT_EQ(cudaFuncSetAttribute(static_smem_kernel<k32KiB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   195 * 1024), cudaSuccess);
    static_smem_kernel<k32KiB><<<1, 32, 195 * 1024>>>(out.p, 195 * 256);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    EXPECT_EQ(out.get()[0], 7.0f);
    ASSERT_EQ(cudaFuncSetAttribute(static_smem_kernel<k32KiB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   196 * 1024), cudaSuccess);  // (a GPU refuses this call already; its launch too)
    static_smem_kernel<k32KiB><<<1, 32, 1024>>>(out.p, 256);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("32768 bytes of static shared memory and a MaxDynamicSharedMemorySize of 200704"),
              std::string::npos) << m;
    cuda_emu::reset_errors();

    static_smem_kernel<k50KiB><<<1, 32>>>(out.p, 0);  // 25 + 25 KiB declared
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("51200 bytes of static shared memory (__shared__ declarations), above the 48 KiB"),
              std::string::npos) << m;
    EXPECT_NE(m.find("static_smem_kernel"), std::string::npos) << m;
    cuda_emu::reset_errors();
}

TEST_F(EmuTest, InvalidLaunchConfigurationsAreRefused) {
    DevBuf<int> out(4096);
    index_kernel<<<1, 2048>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    index_kernel<<<dim3(1, 70000), 32>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    index_kernel<<<dim3(1, 1), dim3(1, 1, 65)>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
}

// __launch_bounds__(maxThreadsPerBlock, ..): a GPU does not launch larger blocks (Programming Guide, "Launch
// Bounds"); the emulation fails such a launch at its first thread and names the bound. A template parameter as the
// bound too, as the attention kernels have it.
__global__ void __launch_bounds__(64) bounded_kernel(int* out) { out[threadIdx.x] = 1; }
template <int kThreads>
__global__ void __launch_bounds__(kThreads, 1) bounded_template_kernel(int* out) {
    out[threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * blockIdx.x)] = kThreads;
}

TEST_F(EmuTest, LaunchBoundsAreEnforced) {
    DevBuf<int> out(512);
    bounded_kernel<<<1, 64>>>(out.p);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "a block of the bound's size runs";
    bounded_kernel<<<1, 65>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("a block of 65 threads, above the kernel's __launch_bounds__ of 64"), std::string::npos) << m;
    EXPECT_NE(m.find("bounded_kernel"), std::string::npos) << m;

    cuda_emu::reset_errors();
    bounded_template_kernel<128><<<2, dim3(16, 8)>>>(out.p);  // 128 threads in two dimensions
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(out.get()[255], 128);
    bounded_template_kernel<128><<<2, dim3(16, 16)>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("a block of 256 threads, above the kernel's __launch_bounds__ of 128"), std::string::npos) << m;
}

// ---- block order: none promised (Programming Guide, "Thread Hierarchy": blocks run in any order) -----------------
// A running count along the blocks, each block reading its neighbour's result of the same launch: deliberately
// broken (a race on a GPU), and right only where blocks run in index order (from_left) or in reverse. Through
// atomics, which the global-memory race check lets commute: plain loads and stores would be reported by it (below),
// this is what only the block order shows.
__global__ void chain_kernel(int* out, int n, bool from_left) {
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int src = from_left ? b - 1 : b + 1;
    atomicExch(out + b, src < 0 || src >= n ? 1 : atomicAdd(out + src, 0) + 1);
}

TEST_F(EmuTest, BlocksRunOnceEachNotInIndexOrder) {
    for (unsigned long long total = 1; total <= 3000; total++) {
        std::vector<char> seen(total, 0);
        unsigned long long in_place = 0;
        for (unsigned long long i = 0; i < total; i++) {
            const unsigned long long b = cuda_emu::block_run_at(i, total);
            ASSERT_LT(b, total);
            ASSERT_FALSE(seen[b]) << "block " << b << " of " << total << " runs twice";
            seen[b] = 1;
            in_place += b == i;
        }
        if (total > 1) EXPECT_LT(in_place, total) << total << " blocks run in index order";
    }
    // the first block to run has two neighbours from 3 blocks on, and reads both unwritten: either chain breaks
    for (dim3 grid : {dim3(3), dim3(8), dim3(3, 4, 2), dim3(5, 1, 3)}) {
        const int n = (int)(grid.x * grid.y * grid.z);
        for (bool from_left : {true, false}) {
            DevBuf<int> out(n);
            ASSERT_EQ(cudaMemset(out.p, 0, n * sizeof(int)), cudaSuccess);
            chain_kernel<<<grid, 32>>>(out.p, n, from_left);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            std::vector<int> in_index_order(n);
            for (int b = 0; b < n; b++) in_index_order[b] = from_left ? b + 1 : n - b;
            EXPECT_NE(out.get(), in_index_order) << n << " blocks, from the " << (from_left ? "left" : "right");
        }
    }
}

// ---- the global-memory race check: what a GPU leaves to the order the blocks happen to run in ---------------------
// mode 0: each block writes its slot, then reads its neighbour block's (another block of the launch wrote it);
// 1: every block writes word 0 (two blocks write one byte); 2: each thread reads its neighbour thread's slot with
// no __syncthreads between (same block); 3: the same with the barrier (no race); 4: every thread reads every slot
// the previous launch wrote and writes its own, neighbours' bf16 bytes adjacent, and flags with atomicOr (no race).
__global__ void global_race_kernel(int* buf, __nv_bfloat16* half, const int* prev, int mode) {
    const int n = (int)(gridDim.x * blockDim.x), g = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (mode == 0) {
        buf[g] = g;
        if (threadIdx.x == 0) buf[n + blockIdx.x] = buf[((blockIdx.x + 1) % gridDim.x) * blockDim.x];
    } else if (mode == 1) {
        if (threadIdx.x == 0) buf[0] = (int)blockIdx.x;
    } else if (mode == 2 || mode == 3) {
        buf[g] = g;
        if (mode == 3) __syncthreads();
        const int nb = (int)(blockIdx.x * blockDim.x + (threadIdx.x + 1) % blockDim.x);
        buf[n + g] = buf[nb];
    } else {
        int s = 0;
        for (int i = 0; i < n; i++) s += prev[i];
        buf[g] = s;
        half[g] = __float2bfloat16((float)g);
        atomicOr(buf + 2 * n, 1 << (g % 31));
    }
}

TEST_F(EmuTest, GlobalRaceCheckReportsUnorderedAccesses) {
    if (!cuda_emu::global_race_check_enabled()) GTEST_SKIP() << "PRAC_EMU_RACECHECK turns the global check off";
    const int blocks = 4, threads = 32, n = blocks * threads;
    DevBuf<int> buf(2 * n + 1), prev(2 * n + 1), zeros(n);
    DevBuf<__nv_bfloat16> half(n);
    ASSERT_EQ(cudaMemset(zeros.p, 0, n * sizeof(int)), cudaSuccess);
    // The check covers the first 2 launches of each kernel configuration (exec.cpp, kGlobalChecksPerConfig): each
    // launch here but the last gets a configuration of its own (its dynamic shared memory, unused).
    size_t config = 0;
    auto launch = [&](int* out, const int* in, int mode) {
        global_race_kernel<<<blocks, threads, 16 * ++config>>>(out, half.p, in, mode);
        return cudaDeviceSynchronize();
    };
    const long clean = cuda_emu::races_seen();
    ASSERT_EQ(launch(prev.p, zeros.p, 4), cudaSuccess) << cuda_emu::last_error_message();  // an earlier launch's
    ASSERT_EQ(launch(buf.p, prev.p, 4), cudaSuccess) << cuda_emu::last_error_message();    // output is read here
    ASSERT_EQ(launch(buf.p, prev.p, 3), cudaSuccess) << cuda_emu::last_error_message();
    EXPECT_EQ(cuda_emu::races_seen(), clean) << "reads of an earlier launch's output, adjacent bf16 stores, atomics "
                                                "and a barrier between a block's threads are no races";
    // (blocks run 2, 1, 0, 3: block_run_at; threads in order)
    const char* want[] = {"thread 0 reads it while another block of this launch wrote it",
                          "thread 0 writes it while another block of this launch wrote it",
                          "thread 1 writes it while thread 0 of this block read it since the last __syncthreads"};
    for (int mode = 0; mode < 3; mode++) {
        cuda_emu::reset_errors();
        const long before = cuda_emu::races_seen();
        EXPECT_EQ(launch(buf.p, prev.p, mode), cudaErrorLaunchFailure) << "mode " << mode;
        EXPECT_GT(cuda_emu::races_seen(), before) << "mode " << mode;
        const std::string m = cuda_emu::last_error_message();
        EXPECT_NE(m.find("global-memory race"), std::string::npos) << m;
        EXPECT_NE(m.find(want[mode]), std::string::npos) << "mode " << mode << ": " << m;
        EXPECT_NE(m.find("global_race_kernel"), std::string::npos) << m;
        EXPECT_NE(m.find("test_emu_core.cu"), std::string::npos) << "the report names the source line: " << m;
    }
    // the third launch of one configuration is not checked (unless PRAC_EMU_RACECHECK=all)
    cuda_emu::reset_errors();
    for (int i = 0; i < 3; i++) global_race_kernel<<<blocks, threads, 8>>>(buf.p, half.p, prev.p, 3);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    const long before = cuda_emu::races_seen();
    global_race_kernel<<<blocks, threads, 8>>>(buf.p, half.p, prev.p, 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cuda_emu::global_race_check_every_launch() ? cudaErrorLaunchFailure : cudaSuccess);
    EXPECT_EQ(cuda_emu::races_seen() > before, cuda_emu::global_race_check_every_launch());
}

// A device buffer amid a block's shared memory: the hooks send an address between the lowest and the highest shared
// region to the shared-memory check, and one in neither region is a global access still. AddressSanitizer's
// allocator keeps each size class in a region of its own, in the order of the sizes, so the 1 KiB buffer lies between
// the 16-byte static array and the 40,000 bytes of dynamic shared memory (the race went unreported there, as the
// kernel's two blocks writing buf[0] show).
__global__ void race_amid_shared_kernel(int* buf) {
    __shared__ int small[4];
    extern __shared__ int big[];
    if (threadIdx.x == 0) small[0] = 1, big[0] = 1;
    __syncthreads();
    if (threadIdx.x == 0) buf[0] = (int)blockIdx.x + small[0] + big[0];
}

TEST_F(EmuTest, GlobalRaceCheckSeesBuffersAmidSharedMemory) {
    if (!cuda_emu::global_race_check_enabled()) GTEST_SKIP() << "PRAC_EMU_RACECHECK turns the global check off";
    DevBuf<int> buf(256);
    cuda_emu::reset_errors();
    race_amid_shared_kernel<<<4, 32, 40000>>>(buf.p);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    const std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("global-memory race"), std::string::npos) << m;
    EXPECT_NE(m.find("writes it while another block of this launch wrote it"), std::string::npos) << m;
    cuda_emu::reset_errors();
}

// The race check's 32-bit epoch counter, placed just below its wrap: the launch that would cross it restarts it first
// (every cell cleared). Had it wrapped, the launch's own epochs would fall below its first one, and its blocks' writes
// would pass for an earlier launch's: the race of mode 0 unseen (or the process stopped at the wrap).
TEST_F(EmuTest, RaceCheckEpochsRestartBeforeTheCounterWraps) {
    if (!cuda_emu::global_race_check_enabled()) GTEST_SKIP() << "PRAC_EMU_RACECHECK turns the global check off";
    const int blocks = 4, threads = 32, n = blocks * threads;
    DevBuf<int> buf(2 * n + 1), prev(2 * n + 1), zeros(n);
    DevBuf<__nv_bfloat16> half(n);
    ASSERT_EQ(cudaMemset(zeros.p, 0, n * sizeof(int)), cudaSuccess);
    cuda_emu::set_epoch_counter(UINT32_MAX - 2);  // (each launch a configuration of its own: all checked)
    global_race_kernel<<<blocks, threads, 1001>>>(buf.p, half.p, prev.p, 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure) << "the race after the restart is reported";
    EXPECT_NE(cuda_emu::last_error_message().find("another block of this launch wrote it"), std::string::npos)
        << cuda_emu::last_error_message();
    EXPECT_LT(cuda_emu::epoch_counter(), 1000u) << "the counter restarted";
    cuda_emu::reset_errors();
    // No false race from the cells of before a restart: an earlier launch's output read after one.
    global_race_kernel<<<blocks, threads, 1002>>>(prev.p, half.p, zeros.p, 4);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    cuda_emu::set_epoch_counter(UINT32_MAX - 2);
    global_race_kernel<<<blocks, threads, 1003>>>(buf.p, half.p, prev.p, 4);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    cuda_emu::reset_errors();
}

// The shared-memory cells are cleared at a restart too: a cell left before it holds an epoch the counter reaches again
// (here placed there at once), which passed for the current block's interval: thread 32's lone write raced with
// thread 0's of a launch before the restart.
__global__ void shared_write_kernel(int* out, int writer) {
    __shared__ int cell[1];
    if ((int)threadIdx.x == writer) cell[0] = writer, out[0] = cell[0];
}

TEST_F(EmuTest, RaceCheckEpochRestartClearsSharedMemoryCells) {
    if (!cuda_emu::race_check_enabled()) GTEST_SKIP() << "PRAC_EMU_RACECHECK=0 turns the race check off";
    DevBuf<int> out(1);
    const uint32_t before = cuda_emu::kEpochRestart - 10;
    cuda_emu::set_epoch_counter(before);
    shared_write_kernel<<<1, 64>>>(out.p, 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    cuda_emu::set_epoch_counter(cuda_emu::kEpochRestart);  // the next launch restarts the counter (and writes nothing)
    shared_write_kernel<<<1, 64>>>(out.p, -1);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    EXPECT_LT(cuda_emu::epoch_counter(), 100u);
    cuda_emu::set_epoch_counter(before);  // the epochs of the first launch, as 2^31 later
    shared_write_kernel<<<1, 64>>>(out.p, 32);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    cuda_emu::reset_errors();
}

// ---- warp shuffles (Programming Guide, "Warp Shuffle Functions") ------------------------------------------------
// out[4 * tid + {0,1,2,3}] = xor(5), down(3, width 16), up(2, width 8), idx(lane 7 of each group of 16)
__global__ void shuffle_kernel(int* out) {
    int v = 100 + (int)threadIdx.x;
    int* o = out + 4 * threadIdx.x;
    o[0] = __shfl_xor_sync(0xffffffffu, v, 5);
    o[1] = __shfl_down_sync(0xffffffffu, v, 3, 16);
    o[2] = __shfl_up_sync(0xffffffffu, v, 2, 8);
    o[3] = __shfl_sync(0xffffffffu, v, 7, 16);
}

TEST_F(EmuTest, ShufflesFollowTheProgrammingGuide) {
    DevBuf<int> out(4 * 64);
    shuffle_kernel<<<1, 64>>>(out.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    std::vector<int> o = out.get();
    for (int t = 0; t < 64; t++) {
        int lane = t % 32, base = t - lane;
        EXPECT_EQ(o[4 * t + 0], 100 + base + (lane ^ 5)) << t;
        int down = lane % 16 + 3 < 16 ? lane + 3 : lane;  // past the end of its group of 16: its own value
        EXPECT_EQ(o[4 * t + 1], 100 + base + down) << t;
        int up = lane % 8 >= 2 ? lane - 2 : lane;
        EXPECT_EQ(o[4 * t + 2], 100 + base + up) << t;
        EXPECT_EQ(o[4 * t + 3], 100 + base + (lane / 16) * 16 + 7) << t;
    }
}

// Butterfly sums of floats and doubles across a warp with __syncwarp between shared-memory steps.
__global__ void warp_reduce_kernel(double* out) {
    __shared__ double s[32];
    double v = 1.0 + threadIdx.x;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    s[threadIdx.x] = v;
    __syncwarp();
    if (threadIdx.x == 0) {
        double all_equal = 1;
        for (int i = 0; i < 32; i++) all_equal *= (s[i] == v);
        out[0] = v * all_equal;
    }
}

TEST_F(EmuTest, WarpButterflyAndSyncwarp) {
    DevBuf<double> out(1);
    const long races0 = cuda_emu::races_seen();  // (the process's count: tests of deliberate races run before)
    warp_reduce_kernel<<<1, 32>>>(out.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(out.get()[0], 32.0 * 33.0 / 2.0);
    EXPECT_EQ(cuda_emu::races_seen(), races0) << "__syncwarp orders the warp's shared-memory accesses";
}

// ---- atomics ----------------------------------------------------------------------------------------------------
__global__ void atomics_kernel(int* counter, unsigned* bits, int* maxv, float* fsum) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(counter, 1);
    atomicOr(bits, 1u << (i % 32));
    atomicMax(maxv, i);
    atomicAdd(fsum, 0.5f);
}

TEST_F(EmuTest, AtomicsAcrossBlocks) {
    DevBuf<int> counter(1), maxv(1);
    DevBuf<unsigned> bits(1);
    DevBuf<float> fsum(1);
    counter.put({0});
    maxv.put({-1});
    bits.put({0u});
    fsum.put({0.0f});
    atomics_kernel<<<7, 96>>>(counter.p, bits.p, maxv.p, fsum.p);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(counter.get()[0], 7 * 96);
    EXPECT_EQ(bits.get()[0], 0xffffffffu);
    EXPECT_EQ(maxv.get()[0], 7 * 96 - 1);
    EXPECT_EQ(fsum.get()[0], 7 * 96 * 0.5f);
}

// ---- mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 ----------------------------------------------------------
// The fragments as the PTX ISA lists them per lane (g = lane / 4, t = lane % 4), written independently of the
// emulation's per-element formulation:
//   a0 = A[g][2t, 2t+1]  a1 = A[g+8][2t, 2t+1]  a2 = A[g][2t+8, 2t+9]  a3 = A[g+8][2t+8, 2t+9]
//   b0 = B[2t, 2t+1][g]  b1 = B[2t+8, 2t+9][g]
//   c0 = C[g][2t]  c1 = C[g][2t+1]  c2 = C[g+8][2t]  c3 = C[g+8][2t+1]
__device__ uint32_t pack2(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    __nv_bfloat16_raw l = lo, h = hi;
    return (uint32_t)l.x | ((uint32_t)h.x << 16);
}
// C (16x8, row-major, fp32) += A (16x16, row-major) * B (16x8, row-major), one warp
__global__ void mma_kernel(float* C, const __nv_bfloat16* A, const __nv_bfloat16* B) {
    int lane = threadIdx.x, g = lane / 4, t = lane % 4;
    uint32_t a[4] = {pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]),
                     pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]),
                     pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]),
                     pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9])};
    uint32_t b0 = pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    uint32_t b1 = pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
    cuda_emu::mma_m16n8k16_bf16(c, a, b0, b1);
    C[g * 8 + 2 * t] = c[0];
    C[g * 8 + 2 * t + 1] = c[1];
    C[(g + 8) * 8 + 2 * t] = c[2];
    C[(g + 8) * 8 + 2 * t + 1] = c[3];
}

std::vector<float> run_mma(const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& C0) {
    std::vector<__nv_bfloat16> a(256), b(128);
    for (int i = 0; i < 256; i++) a[i] = __float2bfloat16_rn(A[i]);
    for (int i = 0; i < 128; i++) b[i] = __float2bfloat16_rn(B[i]);
    DevBuf<__nv_bfloat16> da(256), db(128);
    DevBuf<float> dc(128);
    da.put(a);
    db.put(b);
    dc.put(C0);
    mma_kernel<<<1, 32>>>(dc.p, da.p, db.p);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return dc.get();
}

// Every A position alone (a one-hot A picks row k of B into row r of C) and every B position alone: the layout
// is checked at all 256 + 128 fragment positions.
TEST_F(EmuTest, MmaFragmentLayoutAtEveryPosition) {
    std::mt19937 rng(1);
    std::uniform_int_distribution<int> small(-8, 8);
    std::vector<float> B(128), A(256), zero(128, 0.0f);
    for (float& x : B) x = (float)small(rng) / 4;  // exact in bf16
    for (float& x : A) x = (float)small(rng) / 4;
    for (int r = 0; r < 16; r++)
        for (int k = 0; k < 16; k++) {
            std::vector<float> onehot(256, 0.0f);
            onehot[r * 16 + k] = 1.0f;
            std::vector<float> C = run_mma(onehot, B, zero);
            for (int i = 0; i < 16; i++)
                for (int n = 0; n < 8; n++)
                    ASSERT_EQ(C[i * 8 + n], i == r ? B[k * 8 + n] : 0.0f) << "A(" << r << "," << k << ") C(" << i << "," << n << ")";
        }
    for (int k = 0; k < 16; k++)
        for (int n = 0; n < 8; n++) {
            std::vector<float> onehot(128, 0.0f);
            onehot[k * 8 + n] = 1.0f;
            std::vector<float> C = run_mma(A, onehot, zero);
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 8; j++)
                    ASSERT_EQ(C[i * 8 + j], j == n ? A[i * 16 + k] : 0.0f) << "B(" << k << "," << n << ") C(" << i << "," << j << ")";
        }
}

// Against a plain GEMM in double on random bf16 inputs, accumulating into a random C.
TEST_F(EmuTest, MmaEqualsPlainGemm) {
    std::mt19937 rng(2);
    std::normal_distribution<float> nd;
    std::vector<float> A(256), B(128), C0(128);
    for (float& x : A) x = __bfloat162float(__float2bfloat16_rn(nd(rng)));
    for (float& x : B) x = __bfloat162float(__float2bfloat16_rn(nd(rng)));
    for (float& x : C0) x = nd(rng);
    std::vector<float> C = run_mma(A, B, C0);
    for (int i = 0; i < 16; i++)
        for (int n = 0; n < 8; n++) {
            double want = C0[i * 8 + n];
            for (int k = 0; k < 16; k++) want += (double)A[i * 16 + k] * B[k * 8 + n];
            EXPECT_NEAR(C[i * 8 + n], want, 1e-5 * (1 + std::fabs(want))) << i << "," << n;
        }
}

// ---- deliberately broken kernels ----------------------------------------------------------------------------------
// 1. A missing __syncthreads: each thread writes its slot, then reads its neighbour's with no barrier between.
__global__ void neighbour_kernel(float* out, bool with_barrier) {
    __shared__ float s[64];
    s[threadIdx.x] = (float)threadIdx.x;
    if (with_barrier) __syncthreads();
    out[threadIdx.x] = s[(threadIdx.x + 1) % 64];
}

TEST_F(EmuTest, RaceCheckReportsAMissingSyncthreads) {
    DevBuf<float> out(64);
    long before = cuda_emu::races_seen();
    neighbour_kernel<<<1, 64>>>(out.p, true);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(cuda_emu::races_seen(), before) << "with the barrier there is no race";
    neighbour_kernel<<<1, 64>>>(out.p, false);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    EXPECT_GT(cuda_emu::races_seen(), before);
    std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("shared-memory race"), std::string::npos) << m;
    EXPECT_NE(m.find("neighbour_kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("test_emu_core.cu"), std::string::npos) << "the report names the source line: " << m;
}

// 2. An off-by-one tail: i <= n instead of i < n.
__global__ void tail_kernel(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = 2.0f * in[i];
}
__global__ void smem_tail_kernel(float* out) {
    __shared__ float s[32];
    s[threadIdx.x] = 1.0f;  // launched with 33 threads
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}

void launch_global_tail() {
    const int n = 100;
    float *in, *out;
    cudaMalloc(&in, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    tail_kernel<<<1, 128>>>(out, in, n);
}
void launch_shared_tail() {
    float* out;
    cudaMalloc(&out, 33 * sizeof(float));
    smem_tail_kernel<<<1, 33>>>(out);
}

TEST(EmuDeathTest, AddressSanitizerCatchesAnOffByOneTail) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(launch_global_tail(), "use-after-poison");  // (device memory: the bytes past its end are poisoned)
    EXPECT_DEATH(launch_shared_tail(), "heap-buffer-overflow");
}

// Host code that dereferences a cudaMalloc pointer (a missing cudaMemcpy) crashes on a GPU machine or reads garbage;
// here host and device memory are one, so device memory is closed to host code (device_memory.cpp): the read dies
// with what it touched, and so does one after cudaFree. Device work reaches the same bytes (the kernels above).
void host_reads_device_memory(bool after_free) {
    float* p = nullptr;
    cudaMalloc(&p, 64 * sizeof(float));
    if (after_free) cudaFree(p);
    volatile float* v = p;
    std::printf("read %f\n", v[3]);
}

TEST(EmuDeathTest, HostCodeThatTouchesDeviceMemoryDies) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(host_reads_device_memory(false), "cuda_emu: host code touched device memory: byte 12 of a 256-byte "
                                                  "cudaMalloc allocation at 0x[0-9a-f]+, outside any device work");
    EXPECT_DEATH(host_reads_device_memory(true), "cuda_emu: host code touched freed device memory: byte 12 of a "
                                                 "256-byte cudaMalloc allocation at 0x[0-9a-f]+, after its cudaFree");
}

TEST_F(EmuTest, CorrectTailRunsClean) {
    const int n = 100;
    DevBuf<float> in(n), out(n);
    in.put(std::vector<float>(n, 1.5f));
    tail_kernel<<<1, 128>>>(out.p, in.p, n - 1);  // i <= n-1 is the right bound for n elements
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(out.get()[n - 1], 3.0f);
}

// Host and device memory are one here, so a kernel given a std::vector's pointer would run; on a GPU it faults (an
// illegal address). A pointer argument must lie in a cudaMalloc allocation (an offset into it, its end included) or
// a cudaMallocHost one, which a GPU reaches through unified addressing; else the launch fails, sticky, naming the
// argument. A null pointer is no access.
TEST_F(EmuTest, AKernelGivenPageableHostMemoryFails) {
    DevBuf<float> out(64), in(64);
    in.put(std::vector<float>(64, 1.5f));
    tail_kernel<<<1, 32>>>(out.p + 32, in.p + 32, 31);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    EXPECT_EQ(out.get()[63], 3.0f);
    tail_kernel<<<1, 32>>>(out.p + 64, in.p, -1);  // its end: touched by no thread
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    float* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 32 * sizeof(float)), cudaSuccess);
    tail_kernel<<<1, 32>>>(out.p, pinned, -1);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    cudaFreeHost(pinned);
    tail_kernel<<<1, 32>>>(out.p, nullptr, -1);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cuda_emu::last_error_message();
    // a copy whose host side is device memory: the kind names the wrong direction (undefined behaviour on a GPU)
    EXPECT_EQ(cudaMemcpy(out.p, in.p, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_NE(cuda_emu::last_error_message().find("the source is device memory, and the kind (host to device)"),
              std::string::npos) << cuda_emu::last_error_message();
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);

    std::vector<float> host(32, 1.5f);
    tail_kernel<<<1, 32>>>(out.p, host.data(), 31);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    const std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("argument 2 of the kernel is 0x"), std::string::npos) << m;
    EXPECT_NE(m.find("pageable host memory"), std::string::npos) << m;
    EXPECT_NE(m.find("tail_kernel"), std::string::npos) << m;
}

// 3. Divergent barriers: half the block returns before a barrier the other half waits at; and two different
// __syncthreads reached by different threads.
__global__ void early_exit_kernel(float* out) {
    if (threadIdx.x >= 16) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}
__global__ void two_barriers_kernel(float* out) {
    if (threadIdx.x % 2) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}
__global__ void half_warp_shuffle_kernel(float* out) {
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
    out[threadIdx.x] = v;
}

TEST_F(EmuTest, DivergentBarriersAreReportedNotHung) {
    DevBuf<float> out(64);
    early_exit_kernel<<<2, 64>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("barrier divergence"), std::string::npos) << m;
    EXPECT_NE(m.find("early_exit_kernel"), std::string::npos) << m;
    EXPECT_NE(m.find("16 threads wait at __syncthreads"), std::string::npos) << m;
    EXPECT_NE(m.find("48 threads have returned"), std::string::npos) << m;
    EXPECT_EQ(cudaMemcpy(nullptr, nullptr, 0, cudaMemcpyDeviceToHost), cudaErrorLaunchFailure)
        << "a failed kernel leaves a sticky error";

    cuda_emu::reset_errors();
    two_barriers_kernel<<<1, 32>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("barrier divergence"), std::string::npos) << m;

    cuda_emu::reset_errors();
    half_warp_shuffle_kernel<<<1, 32>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("warp barrier with mask 0xffffffff"), std::string::npos) << m;
}

// ---- fibers: threads share a stack until one waits ----------------------------------------------------------------
// Each thread fills a local array (on its stack) from its id, crosses `barriers` barriers of the given kind, and
// writes the array's weighted sum: a thread that waits must find its stack as it left it, though other threads
// ran since. The even warps of `split` blocks return at once, so carriers go on from finished threads to ones
// that wait.
__device__ long stack_sum(volatile int* local, int n) {
    long s = 0;
    for (int i = 0; i < n; i++) s += (long)(i + 1) * local[i];
    return s;
}
__global__ void stack_kernel(long* out, int barriers, bool block_barrier, bool split) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (split && (threadIdx.x / 32) % 2 == 0) {
        out[tid] = -1;
        return;
    }
    volatile int local[48];
    for (int i = 0; i < 48; i++) local[i] = tid * 7 + i;
    int v = tid;
    for (int b = 0; b < barriers; b++) {
        if (block_barrier) __syncthreads();
        else v += __shfl_xor_sync(0xffffffffu, v, 1) - v;  // the neighbour's id, then back on the next round
    }
    out[tid] = stack_sum(local, 48) * 2 + (v == tid ? 0 : 1);
}

TEST_F(EmuTest, ThreadsShareAStackUntilOneWaitsAtABarrier) {
    const int blocks = 3, threads = 256;
    DevBuf<long> out(blocks * threads);
    auto expect_sums = [&](bool split, const char* what) {
        std::vector<long> o = out.get();
        for (int t = 0; t < blocks * threads; t++) {
            if (split && ((t % threads) / 32) % 2 == 0) {
                EXPECT_EQ(o[t], -1) << what << ", thread " << t;
                continue;
            }
            long want = 0;
            for (int i = 0; i < 48; i++) want += (long)(i + 1) * (t * 7 + i);
            EXPECT_EQ(o[t], want * 2) << what << ", thread " << t;
        }
    };
    const long races0 = cuda_emu::races_seen();
    long c0 = cuda_emu::carriers_started();
    stack_kernel<<<blocks, threads>>>(out.p, 0, true, false);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    expect_sums(false, "no barrier");
    EXPECT_EQ(cuda_emu::carriers_started() - c0, blocks) << "a kernel without barriers: one stack per block";

    c0 = cuda_emu::carriers_started();
    stack_kernel<<<blocks, threads>>>(out.p, 3, true, false);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    expect_sums(false, "__syncthreads");
    EXPECT_EQ(cuda_emu::carriers_started() - c0, blocks * threads) << "every thread waits: a stack each";

    stack_kernel<<<blocks, threads>>>(out.p, 4, false, false);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    expect_sums(false, "shuffles");

    stack_kernel<<<blocks, threads>>>(out.p, 4, false, true);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    expect_sums(true, "shuffles, even warps returned");
    EXPECT_EQ(cuda_emu::races_seen(), races0);
}

// Two host threads launching at once (the refresh worker of --prac-refresh-overlap beside the step): kernels run
// one at a time, since the fiber stacks and the race check's records are the process's; each thread's results are
// its own and right, barriers and shared memory included.
TEST_F(EmuTest, KernelsFromTwoHostThreadsRunOneAtATime) {
    const int blocks = 3, threads = 256, rounds = 20, rows = 5, n = 200;
    const long races0 = cuda_emu::races_seen(), off0 = cuda_emu::launches_off_main_thread();
    std::vector<float> h(rows * n);
    for (int i = 0; i < rows * n; i++) h[i] = (float)(i % 17);
    std::vector<float> want(rows, 0.0f);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) want[r] += h[r * n + i];
    auto work = [&](int* bad) {
        DevBuf<long> out(blocks * threads);
        DevBuf<float> in(rows * n), sums(rows);
        in.put(h);
        for (int k = 0; k < rounds; k++) {
            stack_kernel<<<blocks, threads>>>(out.p, 3, true, false);
            block_sum_kernel<<<rows, 256>>>(sums.p, in.p, n);
            std::vector<long> o = out.get();
            for (int t = 0; t < blocks * threads; t++) {
                long s = 0;
                for (int i = 0; i < 48; i++) s += (long)(i + 1) * (t * 7 + i);
                *bad += o[t] != s * 2;
            }
            std::vector<float> got = sums.get();
            for (int r = 0; r < rows; r++) *bad += got[r] != want[r];
        }
    };
    int bad_main = 0, bad_worker = 0;
    std::thread worker(work, &bad_worker);
    work(&bad_main);
    worker.join();
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    EXPECT_EQ(bad_main, 0) << "wrong results on the main thread";
    EXPECT_EQ(bad_worker, 0) << "wrong results on the second thread";
    EXPECT_EQ(cuda_emu::races_seen(), races0);
    EXPECT_EQ(cuda_emu::launches_off_main_thread() - off0, 2 * rounds) << "the second thread's launches, counted";
}


// ---- stream order (kernels/cuda_emu/stream_order.h) --------------------------------------------------------------
__global__ void fill_kernel(int* p, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = v;
}
__global__ void add_kernel(int* p, int n, int v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] += v;
}
__global__ void copy_kernel(int* dst, const int* src, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}
constexpr int kOrderN = 300;  // two blocks of 256
// Every thread sets bit 0 of p[g % n] with atomicOr; with out, thread 0 of block 0 then reads p[n - 1] plainly,
// which an atomic of the other block writes (of thread 43 of block 1 for n = 300).
__global__ void atomic_or_kernel(int* p, int n, int* out) {
    const int g = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    atomicOr(p + g % n, 1);
    if (out && g == 0) out[0] = p[n - 1];
}
bool all_equal(const std::vector<int>& v, int x) {
    for (int e : v)
        if (e != x) return false;
    return true;
}

// The stream-order tests read other streams' results unordered on purpose (to see stale data), which the global
// race check reports across streams: it is off while they run.
struct NoCrossStreamCheck {
    bool was = cuda_emu::set_cross_stream_check(false);
    ~NoCrossStreamCheck() { cuda_emu::set_cross_stream_check(was); }
};

// A stream runs when something waits for it: work on one stream that reads another's results without waiting for
// them reads what was there before (on a GPU: whatever the timing gives), and a wait for an event orders exactly the
// work issued before the event's record.
TEST_F(EmuTest, StreamsRunWhenWaitedForAndEventsOrderThem) {
    ASSERT_TRUE(cuda_emu::streams_deferred()) << "this test needs the default PRAC_EMU_STREAMS=deferred";
    NoCrossStreamCheck unordered_on_purpose;
    const int n = kOrderN;
    DevBuf<int> x(n), y(n);
    x.put(std::vector<int>(n, 0));
    y.put(std::vector<int>(n, -1));
    cudaStream_t a, b;
    ASSERT_EQ(cudaStreamCreate(&a), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&b), cudaSuccess);

    fill_kernel<<<2, 256, 0, a>>>(x.p, n, 1);
    copy_kernel<<<2, 256, 0, b>>>(y.p, x.p, n);  // reads x without waiting for a
    ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
    EXPECT_TRUE(all_equal(y.get(), 0)) << "b ran first: its copy saw x before a's fill";
    EXPECT_TRUE(all_equal(x.get(), 1)) << "a blocking copy runs every stream first";

    cudaEvent_t e;
    ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    fill_kernel<<<2, 256, 0, a>>>(x.p, n, 2);
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    fill_kernel<<<2, 256, 0, a>>>(x.p, n, 3);  // after the record: not waited for
    ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
    copy_kernel<<<2, 256, 0, b>>>(y.p, x.p, n);
    ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(a), cudaErrorNotReady) << "a's last fill is still queued";
    EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady) << "left as the last error, as the runtime does";
    EXPECT_TRUE(all_equal(y.get(), 2)) << "b waited for a up to the record, not beyond";
    EXPECT_EQ(cudaStreamQuery(a), cudaSuccess);
    EXPECT_TRUE(all_equal(x.get(), 3));
    EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(a), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(b), cudaSuccess);
}

// The last error is each host thread's ("produced by any of the runtime calls ... in the same host thread", the
// reference's cudaGetLastError): a query's NotReady or a refused launch on one thread is not another's error (CI saw
// the refresh worker's launch check fail on the main thread's pending-copy query when the emulator kept one for all);
// a kernel's failure is the context's and reaches every thread.
TEST_F(EmuTest, EachHostThreadHasItsOwnLastError) {
    ASSERT_TRUE(cuda_emu::streams_deferred()) << "this test needs the default PRAC_EMU_STREAMS=deferred";
    DevBuf<int> x(kOrderN);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    fill_kernel<<<2, 256, 0, s>>>(x.p, kOrderN, 1);
    ASSERT_EQ(cudaStreamQuery(s), cudaErrorNotReady);  // left as this thread's last error
    cudaError_t other = cudaErrorUnknown, other_refused = cudaSuccess, other_after = cudaErrorUnknown;
    std::thread([&] {
        other = cudaGetLastError();
        index_kernel<<<1, 2048>>>(x.p);  // refused: too many threads per block
        other_refused = cudaGetLastError();
        other_after = cudaGetLastError();
    }).join();
    EXPECT_EQ(other, cudaSuccess) << "another thread does not see this thread's NotReady";
    EXPECT_EQ(other_refused, cudaErrorInvalidConfiguration) << "its own refused launch is its own";
    EXPECT_EQ(other_after, cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady) << "this thread's stays until it reads it";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not the other thread's refused launch";
    EXPECT_STREQ(cudaGetErrorString(cudaErrorNotReady), "device not ready");
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// The legacy default stream (a blocking cudaMemcpy) waits for the blocking streams' work, not for a
// cudaStreamNonBlocking stream's (the runtime reference's "stream synchronization behavior"): a host that reads such
// a stream's results without waiting for it reads what was there before.
TEST_F(EmuTest, TheLegacyStreamDoesNotWaitForNonBlockingStreams) {
    ASSERT_TRUE(cuda_emu::streams_deferred()) << "this test needs the default PRAC_EMU_STREAMS=deferred";
    NoCrossStreamCheck unordered_on_purpose;
    const int n = kOrderN;
    DevBuf<int> x(n), y(n);
    x.put(std::vector<int>(n, 0));
    y.put(std::vector<int>(n, 0));
    cudaStream_t blocking, nonblocking;
    ASSERT_EQ(cudaStreamCreateWithFlags(&blocking, cudaStreamDefault), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithPriority(&nonblocking, cudaStreamNonBlocking, 0), cudaSuccess);
    fill_kernel<<<2, 256, 0, blocking>>>(x.p, n, 1);
    fill_kernel<<<2, 256, 0, nonblocking>>>(y.p, n, 2);
    EXPECT_TRUE(all_equal(x.get(), 1)) << "a blocking stream's work runs before the legacy stream's copy";
    EXPECT_TRUE(all_equal(y.get(), 0)) << "a non-blocking stream's work is not waited for";
    ASSERT_EQ(cudaStreamSynchronize(nonblocking), cudaSuccess);
    EXPECT_TRUE(all_equal(y.get(), 2));
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, 0x4), cudaErrorInvalidValue) << "an unknown flag";
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(nonblocking), cudaSuccess);
}

// The global race check across streams: an access to bytes that an operation of another stream wrote (or, for a
// write, read) fails unless something orders that operation first: an event recorded after it and waited for with
// cudaStreamWaitEvent, or a host synchronization that saw it (stream, event, device; a successful query). The runtime
// reference's stream semantics; on a GPU such a race shows only when the streams run in the wrong order. Kernels,
// async copies and memsets, an in-place kernel after another stream's read, and the legacy stream (which waits for
// the blocking streams only, and whose kernels do not make the host wait).
TEST_F(EmuTest, RacesAcrossStreamsAreReportedUnlessOrdered) {
    if (!cuda_emu::global_race_check_enabled()) GTEST_SKIP() << "PRAC_EMU_RACECHECK turns the global check off";
    ASSERT_TRUE(cuda_emu::streams_deferred()) << "this test needs the default PRAC_EMU_STREAMS=deferred";
    const int n = kOrderN;
    DevBuf<int> x(n), y(n), z(n);
    x.put(std::vector<int>(n, 0));
    y.put(std::vector<int>(n, 0));
    cudaStream_t a, b, nb;
    ASSERT_EQ(cudaStreamCreate(&a), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&b), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking), cudaSuccess);
    cudaEvent_t e, e2;
    ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming), cudaSuccess);
    size_t config = 1000;  // the check covers a kernel configuration's first launches: each launch gets its own
    auto fill = [&](cudaStream_t s, int* p) { fill_kernel<<<2, 256, ++config, s>>>(p, n, 1); };
    auto copy = [&](cudaStream_t s) { copy_kernel<<<2, 256, ++config, s>>>(y.p, x.p, n); };
    auto clean = [&](const char* what) {
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what << ": " << cuda_emu::last_error_message();
    };
    auto race = [&](const char* what, const char* want) {
        const long before = cuda_emu::races_seen();
        EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure) << what;
        EXPECT_GT(cuda_emu::races_seen(), before) << what;
        const std::string m = cuda_emu::last_error_message();
        EXPECT_NE(m.find("global-memory race across streams"), std::string::npos) << what << ": " << m;
        EXPECT_NE(m.find(want), std::string::npos) << what << ": " << m;
        cuda_emu::reset_errors();
    };
    // unordered: a kernel reads what another stream's kernel wrote; a kernel writes what another stream's read
    fill(a, x.p);
    copy(b);
    race("read after write", "reads it; another operation wrote it in fill_kernel on stream");
    copy(a);
    fill(b, x.p);
    race("write after read", "writes it; another operation read it in copy_kernel on stream");
    // ordered by an event and cudaStreamWaitEvent; by host synchronizations
    fill(a, x.p);
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
    copy(b);
    clean("an event waited for");
    fill(a, x.p);
    ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);
    copy(b);
    clean("cudaStreamSynchronize");
    fill(a, x.p);
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
    copy(b);
    clean("cudaEventSynchronize");
    fill(a, x.p);
    ASSERT_EQ(cudaStreamSynchronize(a), cudaSuccess);  // (so that the query succeeds: the queue has run)
    // a wait for an event recorded before the write orders nothing
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    fill(a, x.p);
    ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
    copy(b);
    race("an event recorded before the write", "wrote it in fill_kernel on stream");
    // an operation that reads and then writes in place meets another stream's read (its own read does not hide it)
    copy(a);
    add_kernel<<<2, 256, ++config, b>>>(x.p, n, 1);
    race("in place after a read", "writes it; another operation read it in copy_kernel on stream");
    // two streams read, then the first reader's stream writes: ordered after its own read, not after the other's.
    // (The queues run a's read, then b's, then a's write: a's read up to the event, then b's queue, then the rest.)
    auto two_readers = [&](const std::function<void()>& read_a, const std::function<void()>& read_b,
                           const std::function<void()>& write_a, bool b_before_write) {
        read_a();
        ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
        read_b();
        if (b_before_write) {
            ASSERT_EQ(cudaEventRecord(e2, b), cudaSuccess);
            ASSERT_EQ(cudaStreamWaitEvent(a, e2, 0), cudaSuccess);
        }
        write_a();
        ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
    };
    auto read_b = [&] { copy_kernel<<<2, 256, ++config, b>>>(z.p, x.p, n); };
    two_readers([&] { copy(a); }, read_b, [&] { fill(a, x.p); }, false);
    race("two readers, then the first one's stream writes", "writes it; another operation read it in copy_kernel");
    auto copy_a = [&] { ASSERT_EQ(cudaMemcpyAsync(y.p, x.p, n * 4, cudaMemcpyDeviceToDevice, a), cudaSuccess); };
    auto copy_b = [&] { ASSERT_EQ(cudaMemcpyAsync(z.p, x.p, n * 4, cudaMemcpyDeviceToDevice, b), cudaSuccess); };
    auto memset_a = [&] { ASSERT_EQ(cudaMemsetAsync(x.p, 0, n * 4, a), cudaSuccess); };
    two_readers(copy_a, copy_b, memset_a, false);
    race("two copies read, then the first one's stream writes",
         "cudaMemsetAsync writes it; another operation read it in cudaMemcpyAsync");
    // ... and once the writer's stream has waited for the other reader, nothing races
    two_readers([&] { copy(a); }, read_b, [&] { fill(a, x.p); }, true);
    clean("two readers, the writer after both");
    two_readers(copy_a, copy_b, memset_a, true);
    clean("two copies, the memset after both");
    // an atomic takes part as a write: another stream's copy of its word, or its atomic after another stream's read,
    // unordered, race; atomics of one launch commute, a plain read after another thread's atomic does not
    auto atomics = [&](cudaStream_t s, int* out) { atomic_or_kernel<<<2, 256, ++config, s>>>(x.p, n, out); };
    atomics(a, nullptr);
    copy(b);
    race("an atomic, then another stream's read", "reads it; another operation wrote it in atomic_or_kernel");
    copy(a);
    atomics(b, nullptr);
    race("a read, then another stream's atomic",
         "writes it (an atomic); another operation read it in copy_kernel on stream");
    atomics(a, nullptr);
    ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
    copy(b);
    clean("an atomic, then another stream's read after an event");
    atomics(a, z.p);
    {
        const long before = cuda_emu::races_seen();
        EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure) << "a plain read of an atomic's word";
        EXPECT_GT(cuda_emu::races_seen(), before);
        const std::string m = cuda_emu::last_error_message();
        EXPECT_NE(m.find("global-memory race on byte 1196 of"), std::string::npos) << m;
        // (whichever block runs first: the read meets the atomic, or the atomic the read)
        EXPECT_TRUE(m.find("thread 0 reads it while another block of this launch wrote it (an atomic)") !=
                        std::string::npos ||
                    m.find("thread 43 writes it (an atomic) while another block of this launch read it") !=
                        std::string::npos) << m;
        cuda_emu::reset_errors();
    }
    // a kernel on the legacy stream does not make the host wait: a non-blocking stream's later work is not ordered
    // after it
    fill(nullptr, x.p);
    copy(nb);
    race("the legacy stream, then a non-blocking one", "wrote it in fill_kernel on the legacy default stream");
    // copies and memsets are operations of their stream too
    fill(a, x.p);
    ASSERT_EQ(cudaMemcpyAsync(y.p, x.p, n * sizeof(int), cudaMemcpyDeviceToDevice, b), cudaSuccess);
    race("a copy", "cudaMemcpyAsync reads it; another operation wrote it in fill_kernel");
    copy(a);
    ASSERT_EQ(cudaMemsetAsync(x.p, 0, n * sizeof(int), b), cudaSuccess);
    race("a memset", "cudaMemsetAsync writes it; another operation read it in copy_kernel");
    // the legacy stream (a blocking cudaMemcpy) waits for the blocking streams, not for a non-blocking one
    fill(a, x.p);
    std::vector<int> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), x.p, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    clean("a blocking stream, then cudaMemcpy");
    fill(nb, x.p);  // queued: the copy reads the old bytes, and the fill, run later, meets the copy's read
    EXPECT_EQ(cudaMemcpy(h.data(), x.p, n * sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    race("a non-blocking stream, then cudaMemcpy",
         "writes it; another operation read it in cudaMemcpy on the legacy default stream, and neither is ordered "
         "before the other (this write is on stream");
    cudaEventDestroy(e);
    cudaEventDestroy(e2);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaStreamDestroy(nb);
}

// A stream and an event belong to the device current when they were made; "a kernel launch will fail if it is
// issued to a stream that is not associated to the current device", and "cudaEventRecord() will fail if the input
// event and input stream are associated to different devices" (Programming Guide, stream and event behavior): what
// a second host thread that forgot its rank's cudaSetDevice would meet. In a child process with two devices.
TEST(EmuDeathTest, StreamsAndEventsBelongToTheirDevice) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    setenv("PRAC_EMU_DEVICES", "2", 1);
    auto run = [] {
        int bad = 0;
        auto expect = [&](bool ok, const char* what) {
            if (!ok) std::fprintf(stderr, "FAILED: %s\n", what), bad++;
        };
        int count = 0;
        expect(cudaGetDeviceCount(&count) == cudaSuccess && count == 2, "two devices");
        int* x = nullptr;
        expect(cudaMalloc(&x, kOrderN * sizeof(int)) == cudaSuccess, "cudaMalloc");
        expect(cudaSetDevice(1) == cudaSuccess, "cudaSetDevice(1)");
        cudaStream_t s1;
        cudaEvent_t e1;
        expect(cudaStreamCreate(&s1) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess, "device 1's objects");
        expect(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0)");
        cudaStream_t s0;
        expect(cudaStreamCreate(&s0) == cudaSuccess, "device 0's stream");
        fill_kernel<<<2, 256, 0, s1>>>(x, kOrderN, 1);
        expect(cudaGetLastError() == cudaErrorInvalidResourceHandle, "a launch on device 1's stream from device 0");
        expect(cudaEventRecord(e1, s0) == cudaErrorInvalidResourceHandle, "device 1's event into device 0's stream");
        expect(cudaEventRecord(e1, nullptr) == cudaErrorInvalidResourceHandle, "into device 0's legacy stream");
        expect(cudaGetLastError() == cudaErrorInvalidResourceHandle, "left as the last error");
        expect(cudaEventRecord(e1, s1) == cudaSuccess, "event and stream of one device, whatever is current");
        fill_kernel<<<2, 256, 0, s0>>>(x, kOrderN, 2);
        expect(cudaGetLastError() == cudaSuccess, "device 0's stream from device 0");
        expect(cudaStreamSynchronize(s0) == cudaSuccess, "device 0's fill done (the next one writes x too)");
        expect(cudaSetDevice(1) == cudaSuccess, "cudaSetDevice(1) again");
        fill_kernel<<<2, 256, 0, s1>>>(x, kOrderN, 3);
        expect(cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess,
               "device 1's stream from device 1");
        std::exit(bad);
    };
    EXPECT_EXIT(run(), ::testing::ExitedWithCode(0), "");
    unsetenv("PRAC_EMU_DEVICES");
}

// Copies with pinned (cudaMallocHost) memory run with their stream and read or write the host bytes then; copies
// with pageable memory take (host to device) or deliver (device to host) the bytes at the call, as the runtime API's
// "API synchronization behavior" describes.
TEST_F(EmuTest, CopiesRunWithTheirStreamUnlessTheHostSideIsPageable) {
    const int n = kOrderN;
    const size_t bytes = n * sizeof(int);
    DevBuf<int> d(n);
    d.put(std::vector<int>(n, 0));
    int* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost((void**)&pinned, bytes), cudaSuccess);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);

    for (int i = 0; i < n; i++) pinned[i] = 5;
    ASSERT_EQ(cudaMemcpyAsync(d.p, pinned, bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
    for (int i = 0; i < n; i++) pinned[i] = 9;  // refilled before the copy ran
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(all_equal(d.get(), 9)) << "a queued copy reads the pinned bytes when it runs";

    fill_kernel<<<2, 256, 0, s>>>(d.p, n, 4);
    ASSERT_EQ(cudaMemcpyAsync(pinned, d.p, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(pinned[0], 9) << "not there before the stream has run";
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(pinned[0], 4);
    EXPECT_EQ(pinned[n - 1], 4);

    std::vector<int> pageable(n, 6);
    ASSERT_EQ(cudaMemcpyAsync(d.p, pageable.data(), bytes, cudaMemcpyHostToDevice, s), cudaSuccess);
    pageable.assign(n, 8);  // the source was staged at the call
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_TRUE(all_equal(d.get(), 6));
    fill_kernel<<<2, 256, 0, s>>>(d.p, n, 7);
    ASSERT_EQ(cudaMemcpyAsync(pageable.data(), d.p, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_TRUE(all_equal(pageable, 7)) << "device to pageable host returns with the bytes";

    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
    EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

// An event is complete, and times its record, once its stream has run that far: until then cudaEventQuery and
// cudaEventElapsedTime say cudaErrorNotReady; an event never recorded is complete.
TEST_F(EmuTest, EventsCompleteWhenTheirStreamRunsThatFar) {
    DevBuf<int> d(kOrderN);
    cudaStream_t s;
    cudaEvent_t e0, e1;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e0), cudaSuccess) << "never recorded";
    ASSERT_EQ(cudaEventRecord(e0, s), cudaSuccess);
    fill_kernel<<<2, 256, 0, s>>>(d.p, kOrderN, 1);
    ASSERT_EQ(cudaEventRecord(e1, s), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e1), cudaErrorNotReady);
    EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
    float ms = -1.0f;
    EXPECT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaErrorNotReady);
    EXPECT_EQ(cudaGetLastError(), cudaErrorNotReady);
    ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(e1), cudaSuccess);
    EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
    ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
    EXPECT_GE(ms, 0.0f);
    EXPECT_TRUE(all_equal(d.get(), 1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
}

// A queued kernel that fails reports it where the host waits (as a GPU's fault does), and nothing queued after it
// runs.
TEST_F(EmuTest, AQueuedKernelsFailureShowsAtTheWait) {
    DevBuf<float> out(64);
    DevBuf<int> d(kOrderN);
    d.put(std::vector<int>(kOrderN, 0));
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    early_exit_kernel<<<2, 64, 0, s>>>(out.p);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "queued: nothing has run yet";
    fill_kernel<<<2, 256, 0, s>>>(d.p, kOrderN, 1);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorLaunchFailure);
    const std::string m = cuda_emu::last_error_message();
    EXPECT_NE(m.find("early_exit_kernel"), std::string::npos) << m;
    cuda_emu::reset_errors();
    EXPECT_TRUE(all_equal(d.get(), 0)) << "the fill after the failed kernel never ran";
    cudaStreamDestroy(s);
}

}  // namespace
