// GPU test: NcclComm (train/comm_nccl.h) with one rank, no mpirun (the host communicator is NoComm and NCCL runs
// with nranks = 1, where every collective leaves its input). Checks, in fp32 and bf16, on device buffers:
//   - allreduce_avg, reduce_scatter_avg and all_gather (the plain in-place forms and the grouped per-shard
//     Reduce/Broadcast forms) and allreduce_avg_start + wait_all over ranges leave the buffer bit for bit;
//   - the collectives are ordered with the compute stream: a buffer written by a kernel on the compute stream
//     just before the call and read on it just after is the written one;
//   - the overlapped path: tiny GPT-2 and LLaMA backward with the per-layer hook starting each layer's average,
//     then wait_all, leave the same gradient bytes as backward followed by one whole-buffer allreduce_avg, and as
//     backward alone; the hook sees layers L-1 .. 0 then -1, and its ranges cover every parameter once.
// What one rank cannot check (sums over ranks, uneven shards, real overlap) needs >= 2 GPUs: docs/VERIFICATION.md.
// Exit 77 without a GPU (REQUIRE_GPU=1: fail instead).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_backend.cuh"
#include "model/gpt2.h"
#include "model/llama.h"
#include "test/gpu/gpu_test.h"
#include "train/comm_nccl.h"

// n random finite values of `type` as raw bytes (bf16: the top half of an fp32)
static std::vector<unsigned char> random_bytes(size_t n, DType type, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    size_t es = dtype_size(type);
    std::vector<unsigned char> out(n * es);
    for (size_t i = 0; i < n; i++) {
        float f = u(rng);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        if (type == DType::BF16) {
            uint16_t h = (uint16_t)(bits >> 16);
            std::memcpy(out.data() + i * 2, &h, 2);
        } else {
            std::memcpy(out.data() + i * 4, &bits, 4);
        }
    }
    return out;
}

static void collectives(NcclComm& nc, CudaBackend& be, DType type) {
    const char* tn = dtype_name(type);
    for (size_t n : {(size_t)1, (size_t)7, (size_t)1000003}) {
        std::vector<unsigned char> in = random_bytes(n, type, (uint32_t)n), out(in.size());
        void* d = be.alloc(in.size());
        auto same = [&](const char* what) {
            be.download(out.data(), d, out.size());  // syncs the compute stream
            check(std::memcmp(out.data(), in.data(), in.size()) == 0, "%s n=%zu %s leaves the input", tn, n, what);
            be.upload(d, in.data(), in.size());
        };
        be.upload(d, in.data(), in.size());
        nc.allreduce_avg(d, n, type);
        same("allreduce_avg");
        for (bool grouped : {false, true}) {
            nc.grouped_shards = grouped;
            nc.reduce_scatter_avg(d, n, type);
            same(grouped ? "reduce_scatter_avg (grouped ncclReduce)" : "reduce_scatter_avg (ncclReduceScatter)");
            nc.all_gather(d, n, type);
            same(grouped ? "all_gather (grouped ncclBroadcast)" : "all_gather (ncclAllGather)");
        }
        nc.grouped_shards = false;
        std::vector<ElemRange> ranges = {{0, n / 3}, {n / 3, n - n / 3}};
        nc.allreduce_avg_start(d, ranges, type);
        nc.wait_all();
        same("allreduce_avg_start over 2 ranges + wait_all");

        // stream order: the compute stream writes the buffer (memset 0x3f..) right before the collective and
        // copies it out right after; the copy must see the written bytes
        std::vector<unsigned char> pattern(in.size(), 0x3f);
        cudaCheck(cudaMemsetAsync(d, 0x3f, in.size(), be.stream));
        nc.allreduce_avg(d, n, type);
        cudaCheck(cudaMemcpyAsync(out.data(), d, out.size(), cudaMemcpyDeviceToHost, be.stream));
        cudaCheck(cudaStreamSynchronize(be.stream));
        check(std::memcmp(out.data(), pattern.data(), out.size()) == 0,
              "%s n=%zu allreduce_avg is ordered after the compute stream's write and before its read", tn, n);
        be.free(d, in.size());
    }
}

// backward with the per-layer hook (+ wait_all) vs backward + whole-buffer allreduce_avg vs backward alone
template <template <class> class M>
static void overlapped_vs_whole(NcclComm& nc, CudaBackend& be, Arch arch, const char* name) {
    ModelConfig cfg = model_config_load(arch, name);
    M<CudaBackend> m(be, cfg);
    m.init_weights(7);
    int B = 2, T = 32, L = cfg.num_layers;
    m.allocate_activations(B, T);
    std::mt19937 rng(11);
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    for (size_t i = 0; i < inputs.size(); i++) {
        inputs[i] = (int32_t)(rng() % (uint32_t)cfg.vocab_size);
        targets[i] = i % 5 == 4 ? -1 : (int32_t)(rng() % (uint32_t)cfg.vocab_size);  // some ignored targets
    }
    size_t n = m.param_buffer_numel, bytes = n * sizeof(CudaBackend::grad_t);
    std::vector<std::vector<ElemRange>> ranges = layer_param_ranges(m.param_specs, L);
    size_t covered = 0;
    for (const auto& r : ranges)
        for (const ElemRange& e : r) covered += e.numel;
    check(covered == m.num_parameters, "%s: the layer ranges cover %zu of %zu parameters", name, covered,
          m.num_parameters);

    auto grads_after = [&](int mode) {  // 0 backward alone, 1 + whole-buffer allreduce, 2 overlapped
        std::vector<int> seen;
        m.zero_grad();
        PracOptions none;
        m.sched.begin_step(none, 0);
        m.forward(inputs.data(), targets.data(), 1.0f / (float)(B * T));
        if (mode == 2)
            m.on_layer_grads = [&](int l) {
                seen.push_back(l);
                nc.allreduce_avg_start(m.grads_memory, ranges[l < 0 ? L : l], CudaBackend::grad_dtype);
            };
        m.backward();
        m.on_layer_grads = nullptr;
        if (mode == 1) nc.allreduce_avg(m.grads_memory, n, CudaBackend::grad_dtype);
        if (mode == 2) {
            nc.wait_all();
            std::vector<int> want;
            for (int l = L - 1; l >= -1; l--) want.push_back(l);
            check(seen == want, "%s: the hook saw layers %d..0 then -1 (%zu calls)", name, L - 1, seen.size());
        }
        std::vector<unsigned char> g(bytes);
        be.download(g.data(), m.grads_memory, bytes);
        return g;
    };
    std::vector<unsigned char> alone = grads_after(0), whole = grads_after(1), overlapped = grads_after(2);
    check(std::memcmp(alone.data(), whole.data(), bytes) == 0, "%s: backward + allreduce_avg = backward alone", name);
    check(std::memcmp(overlapped.data(), whole.data(), bytes) == 0,
          "%s: per-layer overlapped averages = one whole-buffer allreduce_avg (bitwise)", name);
}

int main() {
    if (int rc = gpu_unavailable_exit_code("test_comm_nccl"); rc >= 0) return rc;
    try {
        std::unique_ptr<Comm> host = comm_create(nullptr, nullptr);  // NoComm when not started by mpirun
        check(host->size() == 1, "one process (host communicator %s, size %d)", host->name(), host->size());
        CudaBackend be(0, 42);
        {
            NcclComm nc(*host, 0, be.stream);  // destroyed before be
            std::printf("%s, rank %d of %d\n", NcclComm::version().c_str(), nc.rank(), nc.size());
            check(nc.device_comm() == &nc && std::string(nc.name()) == "nccl", "device_comm() and name()");
            collectives(nc, be, DType::F32);
            collectives(nc, be, DType::BF16);
            overlapped_vs_whole<GPT2>(nc, be, Arch::GPT2, "gpt2-tiny");
            overlapped_vs_whole<Llama>(nc, be, Arch::LLAMA, "llama-tiny");
        }
    } catch (const std::exception& ex) {
        check_exception(ex);
    }
    return gpu_test_summary("test_comm_nccl");
}
