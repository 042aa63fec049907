// GPU test for several ranks (mpirun -n R, one GPU each; emulated: PRAC_EMU_DEVICES=R and the NCCL stand-in):
// NcclComm's averages (train/comm_nccl.h) over R ranks against the exact mean of the ranks' values, computed on the
// host in double (every rank can compute every rank's values: v(r, i) is a function of r and i).
//   - allreduce_avg, reduce_scatter_avg (ncclReduceScatter and the grouped ncclReduce shards: each rank checks its
//     own shard) and allreduce_avg_start over two ranges, in fp32 and bf16;
//   - each element within the type's rounding of the exact mean (2 ulps of the mean of |values|: the partial sums'
//     roundings and the scale's), and no scale error: over ~10^5 elements the mean of result / exact is 1 to 2e-4 (bf16,
//     rounding noise ~1e-5 there) or 1e-6 (fp32). NCCL's own bf16 ncclAvg multiplies each contribution by
//     bf16(1/R), which for R = 3 is 1.00195 / 3: emulated that way, it measures 1.0015 here, 7 times the
//     tolerance (see comm_nccl.cu);
//   - all-reduced buffers are bitwise equal on every rank (the replicas must stay equal).
// Exit 77 without a GPU (REQUIRE_GPU=1: fail instead).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_bf16.h>

#include "kernels/cuda_backend.cuh"
#include "test/gpu/gpu_test.h"
#include "train/comm_nccl.h"

// rank r's value i: spread over [-3, 3) and over magnitudes, different on every rank, never a tie of rounding
static double value(int r, size_t i) { return std::sin(0.37 * (double)i + 1.3 * r) * 3.0 * (1.0 + 0.5 * ((i + r) % 7)); }

struct Buffer {  // R ranks' worth of one rank's values of `type` on the device, and the exact means on the host
    DType type;
    size_t n;
    std::vector<unsigned char> bytes;
    std::vector<double> mean, mean_abs;
    Buffer(DType t, size_t count, int rank, int ranks)
        : type(t), n(count), bytes(count * dtype_size(t)), mean(count), mean_abs(count) {
        for (size_t i = 0; i < n; i++) {
            double sum = 0, sum_abs = 0;
            for (int r = 0; r < ranks; r++) {
                float v = (float)value(r, i);
                if (t == DType::BF16) v = __bfloat162float(__float2bfloat16(v));
                sum += v;
                sum_abs += std::fabs(v);
                if (r != rank) continue;
                if (t == DType::BF16) {
                    __nv_bfloat16 h = __float2bfloat16(v);
                    std::memcpy(bytes.data() + 2 * i, &h, 2);
                } else {
                    std::memcpy(bytes.data() + 4 * i, &v, 4);
                }
            }
            mean[i] = sum / ranks;
            mean_abs[i] = sum_abs / ranks;
        }
    }
    float got(const std::vector<unsigned char>& b, size_t i) const {
        float f = 0;
        if (type == DType::BF16) {
            __nv_bfloat16 h;
            std::memcpy(&h, b.data() + 2 * i, 2);
            return __bfloat162float(h);
        }
        std::memcpy(&f, b.data() + 4 * i, 4);
        return f;
    }
};

// elements [lo, hi) of `out` against the exact means: within the type's rounding, and no scale error
static void expect_mean(const Buffer& buf, const std::vector<unsigned char>& out, size_t lo, size_t hi,
                        const std::string& what) {
    const bool bf16 = buf.type == DType::BF16;
    const double ulp = bf16 ? 1.0 / 128 : 1.2e-7;  // the type's relative spacing, at most
    size_t bad = 0, counted = 0;
    double ratio_sum = 0;
    for (size_t i = lo; i < hi; i++) {
        double m = buf.mean[i], g = buf.got(out, i);
        if (std::fabs(g - m) > 2 * ulp * buf.mean_abs[i]) bad++;
        if (std::fabs(m) > 0.1) {  // ratios of tiny means are noise
            ratio_sum += g / m;
            counted++;
        }
    }
    double ratio = counted ? ratio_sum / (double)counted : 1;
    check(bad == 0, "%s: %zu of %zu elements beyond 2 %s ulps of the exact mean's scale", what.c_str(), bad, hi - lo,
          bf16 ? "bf16" : "fp32");
    check(std::fabs(ratio - 1) <= (bf16 ? 2e-4 : 1e-6), "%s: mean of result / exact mean = %.7f (NCCL's bf16 "
          "ncclAvg over 3 ranks: about 1.0015)", what.c_str(), ratio);
}

static void averages(Comm& host, NcclComm& nc, CudaBackend& be, DType type) {
    const int R = host.size(), rank = host.rank();
    const char* tn = dtype_name(type);
    for (size_t n : {(size_t)3 * 40000, (size_t)3 * 40000 + 1}) {  // ranks divide n, and not (uneven shards)
        Buffer buf(type, n, rank, R);
        void* d = be.alloc(buf.bytes.size());
        std::vector<unsigned char> out(buf.bytes.size());
        auto run = [&](const char* what, auto&& collective) {
            be.upload(d, buf.bytes.data(), buf.bytes.size());
            collective();
            be.download(out.data(), d, out.size());
            return std::string(tn) + " n=" + std::to_string(n) + " ranks=" + std::to_string(R) + " " + what;
        };

        std::string w = run("allreduce_avg", [&] { nc.allreduce_avg(d, n, type); });
        expect_mean(buf, out, 0, n, w);
        std::vector<unsigned char> rank0 = out;  // every rank's result, bitwise: rank 0's
        host.broadcast(rank0.data(), rank0.size(), 0);
        check(rank0 == out, "%s: the same bytes on every rank", w.c_str());

        for (bool grouped : {false, true}) {
            nc.grouped_shards = grouped;
            w = run(grouped ? "reduce_scatter_avg (grouped ncclReduce)" : "reduce_scatter_avg",
                    [&] { nc.reduce_scatter_avg(d, n, type); });
            if (grouped || n % (size_t)R == 0)  // the in-place ncclReduceScatter needs ranks to divide n
                expect_mean(buf, out, host.shard_begin(n, rank), host.shard_end(n, rank), w + ", this rank's shard");
        }
        nc.grouped_shards = false;

        std::vector<ElemRange> ranges = {{0, n / 3}, {n / 3, n - n / 3}};
        w = run("allreduce_avg_start over 2 ranges + wait_all", [&] {
            nc.allreduce_avg_start(d, ranges, type);
            nc.wait_all();
        });
        expect_mean(buf, out, 0, n, w);
        be.free(d, buf.bytes.size());
    }
}

int main(int argc, char** argv) {
    if (int rc = gpu_unavailable_exit_code("test_comm_nccl_ranks"); rc >= 0) return rc;
    std::unique_ptr<Comm> host;
    try {
        host = comm_create(&argc, &argv);
        if (host->size() < 2) {
            std::printf("FAIL test_comm_nccl_ranks: needs mpirun -n 2 or more (got %d rank)\n", host->size());
            return 1;
        }
        CudaBackend be(host->local_rank(), 1);
        {
            NcclComm nc(*host, host->local_rank(), be.stream);
            for (DType t : {DType::F32, DType::BF16}) averages(*host, nc, be, t);
        }
    } catch (const std::exception& e) {
        check_exception(e);
    }
    int rc = gpu_test_summary("test_comm_nccl_ranks");
    if (host && host->size() > 1) {  // a rank that failed ends the job with its status; the others agree
        double failed = rc != 0;
        host->allreduce_sum(&failed, 1);
        rc = failed > 0 ? 1 : 0;
    }
    return rc;
}
