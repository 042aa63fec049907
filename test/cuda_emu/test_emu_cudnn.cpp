// Unit tests of the stand-in for cuDNN's graph API (kernels/cuda_emu/cudnn_emu.cpp), driven through cudnn-frontend
// as kernels/attention_cudnn.cu drives it. Every expected value is computed by hand in the comments; no test
// compares the stand-in with another implementation (test_attention_cuda compares whole SDPA graphs with the CPU
// twin).
//
// Deliberate-break checks (done by hand on copies of the stand-in, each compiled with this file):
//   - BINARY_SELECT as `t ? b : x`: fails CudnnEmu.CausalMaskFromIndexComparison;
//   - GEN_INDEX along the last dimension whatever its axis: fails CudnnEmu.CausalMaskFromIndexComparison;
//   - matmul ignoring the M override: fails CudnnEmu.MatmulOverridesPadRowsAndColumns;
//   - reshape copying by y's stored offset instead of its declared one: fails CudnnEmu.ReshapeIsATransposedView;
//   - the SDPA forward ignoring SEQ_LEN_KV: fails CudnnEmu.SdpaForwardWithPaddingMask;
//   - read_tensor without its BOOLEAN-in-memory and layout-attribute refusals: fails
//     CudnnEmu.UnemulatedLayoutsAreDeclinedAtBuild (both cases).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <gtest/gtest.h>
#include <gtest/gtest-death-test.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda_emu/libs_emu.h"

namespace fe = cudnn_frontend;

namespace {

using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

struct Handle {
    cudnnHandle_t h = nullptr;
    Handle() { EXPECT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS); }
    ~Handle() { cudnnDestroy(h); }
};

// "Device" memory (cudaMalloc: the emulated runtime's allocations, 0x7f-filled) holding `values`.
template <typename T>
struct Dev {
    T* p = nullptr;
    size_t n;
    explicit Dev(const std::vector<T>& values) : n(values.size()) {
        EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
        cudaMemcpy(p, values.data(), n * sizeof(T), cudaMemcpyHostToDevice);
    }
    explicit Dev(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
    ~Dev() { cudaFree(p); }
    std::vector<T> get() const {
        std::vector<T> v(n);
        cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
        return v;
    }
};

TensorPtr input(fe::graph::Graph& g, int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides,
                fe::DataType_t type = fe::DataType_t::FLOAT) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name("t" + std::to_string(uid))
                        .set_uid(uid)
                        .set_dim(std::move(dims))
                        .set_stride(std::move(strides))
                        .set_data_type(type));
}

void output(const TensorPtr& t, int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides,
            fe::DataType_t type = fe::DataType_t::FLOAT) {
    t->set_output(true).set_uid(uid).set_dim(std::move(dims)).set_stride(std::move(strides)).set_data_type(type);
}

fe::graph::Graph new_graph() {
    fe::graph::Graph g;
    g.set_io_data_type(fe::DataType_t::FLOAT)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

// Builds `g` the way kernels/attention_cudnn.cu does; "" or the step that failed and why.
std::string build(fe::graph::Graph& g, cudnnHandle_t h) {
    auto step = [](fe::error_t st, const char* what) { return st.is_good() ? std::string() : what + (": " + st.get_message()); };
    std::string e;
    if (!(e = step(g.validate(), "validate")).empty()) return e;
    if (!(e = step(g.build_operation_graph(h), "build_operation_graph")).empty()) return e;
    if (!(e = step(g.create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans")).empty()) return e;
    if (!(e = step(g.check_support(h), "check_support")).empty()) return e;
    return step(g.build_plans(h, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans");
}

void run(fe::graph::Graph& g, cudnnHandle_t h, std::unordered_map<int64_t, void*> pack) {
    ASSERT_EQ(build(g, h), "");
    int64_t ws = 0;
    ASSERT_TRUE(g.get_workspace_size(ws).is_good());
    Dev<char> workspace(ws > 0 ? (size_t)ws : 1);
    const long before = cuda_emu_cudnn_executes();
    fe::error_t st = g.execute(h, pack, workspace.p);
    ASSERT_TRUE(st.is_good()) << st.get_message();
    EXPECT_EQ(cuda_emu_cudnn_executes(), before + 1);
}

// C = A B with A (2x3) = [1 2 3; 4 5 6] row-major and B (3x2) = [7 8; 9 10; 11 12] stored transposed (column-major,
// B's strides (1, 3)): C = [1*7+2*9+3*11, 1*8+2*10+3*12; 4*7+5*9+6*11, 4*8+5*10+6*12] = [58 64; 139 154], and a
// batch of two where A's batch dimension is 1 (broadcast) and B's second matrix is 2 B: [116 128; 278 308].
TEST(CudnnEmu, MatmulBroadcastsBatchAndReadsStrides) {
    Handle h;
    auto g = new_graph();
    auto A = input(g, 1, {1, 1, 2, 3}, {6, 6, 3, 1});
    auto B = input(g, 2, {2, 1, 3, 2}, {6, 6, 1, 3});
    auto C = g.matmul(A, B, fe::graph::Matmul_attributes());
    output(C, 3, {2, 1, 2, 2}, {4, 4, 2, 1});
    Dev<float> a({1, 2, 3, 4, 5, 6}), b({7, 9, 11, 8, 10, 12, 14, 18, 22, 16, 20, 24}), c(8);
    run(g, h.h, {{1, a.p}, {2, b.p}, {3, c.p}});
    EXPECT_EQ(c.get(), (std::vector<float>{58, 64, 139, 154, 116, 128, 278, 308}));
}

// A plan reports the bytes of its tensors to the emulation's race check across streams (stream_order.h): a matmul
// on stream b reading A while a copy into A is queued on stream a, nothing ordering them, fails (when the copy runs,
// it meets the plan's read); with a cudaStreamWaitEvent for the copy it runs clean. In a child process each (the
// error is sticky).
TEST(CudnnEmu, PlansTakePartInTheRaceCheckAcrossStreams) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto child = [](bool ordered) {
        Handle h;
        auto g = new_graph();
        auto A = input(g, 1, {1, 2, 3}, {6, 3, 1});
        auto B = input(g, 2, {1, 3, 2}, {6, 2, 1});
        output(g.matmul(A, B, fe::graph::Matmul_attributes()), 3, {1, 2, 2}, {4, 2, 1});
        Dev<float> a(std::vector<float>(6, 1.0f)), b(std::vector<float>(6, 1.0f)), c(4);
        cudaStream_t sa, sb;
        cudaEvent_t e;
        cudaStreamCreate(&sa);
        cudaStreamCreate(&sb);
        cudaEventCreate(&e);
        const std::vector<float> twos(6, 2.0f);
        cudaMemcpyAsync(a.p, twos.data(), 6 * sizeof(float), cudaMemcpyHostToDevice, sa);  // (staged, queued on sa)
        if (ordered) cudaEventRecord(e, sa), cudaStreamWaitEvent(sb, e, 0);
        cudnnSetStream(h.h, sb);
        run(g, h.h, {{1, a.p}, {2, b.p}, {3, c.p}});
        std::fprintf(stderr, "result: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
        std::exit(0);
    };
    EXPECT_EXIT(child(false), ::testing::ExitedWithCode(0),
                "global-memory race across streams .*: cudaMemcpyAsync writes it; another operation read it in "
                "cudnnBackendExecute on stream .*result: cudaErrorLaunchFailure");
    EXPECT_EXIT(child(true), ::testing::ExitedWithCode(0), "result: cudaSuccess");
}

// The softmax of x = [1 2; 3 3] row by row, as the frontend's composite graphs compute it: m = max over the row
// (2, 3), e = exp(x - m) (e^-1, 1; 1, 1), s = sum of e (1 + e^-1, 2), p = e / s; the reductions keep the row dims
// (output dims 1 where reduced) and the SUB/DIV broadcast them back.
TEST(CudnnEmu, SoftmaxFromReductionsAndBroadcasts) {
    Handle h;
    auto g = new_graph();
    auto X = input(g, 1, {1, 1, 2, 2}, {4, 4, 2, 1});
    auto M = g.reduction(X, fe::graph::Reduction_attributes().set_mode(fe::ReductionMode_t::MAX));
    M->set_dim({1, 1, 2, 1}).set_stride({2, 2, 1, 1});
    auto D = g.pointwise(X, M, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::SUB));
    auto E = g.pointwise(D, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::EXP));
    auto S = g.reduction(E, fe::graph::Reduction_attributes().set_mode(fe::ReductionMode_t::ADD));
    S->set_dim({1, 1, 2, 1}).set_stride({2, 2, 1, 1});
    auto P = g.pointwise(E, S, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::DIV));
    output(P, 2, {1, 1, 2, 2}, {4, 4, 2, 1});
    output(S, 3, {1, 1, 2, 1}, {2, 2, 1, 1});
    Dev<float> x({1, 2, 3, 3}), p(4), s(2);
    run(g, h.h, {{1, x.p}, {2, p.p}, {3, s.p}});
    const double em1 = std::exp(-1.0);
    const std::vector<float> pv = p.get(), sv = s.get();
    EXPECT_NEAR(sv[0], 1 + em1, 1e-6);
    EXPECT_NEAR(sv[1], 2.0, 1e-6);
    EXPECT_NEAR(pv[0], em1 / (1 + em1), 1e-6);
    EXPECT_NEAR(pv[1], 1 / (1 + em1), 1e-6);
    EXPECT_NEAR(pv[2], 0.5, 1e-6);
    EXPECT_NEAR(pv[3], 0.5, 1e-6);
}

// A causal mask as the frontend writes it: row = GEN_INDEX(axis 2), col = GEN_INDEX(axis 3), keep = row >= col,
// y = BINARY_SELECT(x, -1000, keep) = keep ? x : -1000. With x (3x3) = 1..9 row-major:
// y = [1 -1000 -1000; 4 5 -1000; 7 8 9].
TEST(CudnnEmu, CausalMaskFromIndexComparison) {
    Handle h;
    auto g = new_graph();
    auto X = input(g, 1, {1, 1, 3, 3}, {9, 9, 3, 1});
    auto row = g.pointwise(X, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::GEN_INDEX).set_axis(2));
    auto col = g.pointwise(X, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::GEN_INDEX).set_axis(3));
    row->set_data_type(fe::DataType_t::INT32);
    col->set_data_type(fe::DataType_t::INT32);
    auto keep = g.pointwise(row, col, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::CMP_GE));
    keep->set_data_type(fe::DataType_t::BOOLEAN);
    auto Y = g.pointwise(X, g.tensor(-1000.0f), keep,
                         fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::BINARY_SELECT));
    output(Y, 2, {1, 1, 3, 3}, {9, 9, 3, 1});
    Dev<float> x({1, 2, 3, 4, 5, 6, 7, 8, 9}), y(9);
    run(g, h.h, {{1, x.p}, {2, y.p}});
    EXPECT_EQ(y.get(), (std::vector<float>{1, -1000, -1000, 4, 5, -1000, 7, 8, 9}));
}

// C = A B with A (3x2) = [1 2; 3 4; 5 6], B (2x2) = I, per-batch overrides M' = 2 and N' = 1 and padding value 0.5:
// rows m >= 2 and columns n >= 1 hold 0.5, the rest is A B: C = [1 0.5; 3 0.5; 0.5 0.5]. A K override of 1 sums
// only k < 1: C = [1 0; 3 0; 5 0] (B = I keeps column 1's single term k = 1 out).
TEST(CudnnEmu, MatmulOverridesPadRowsAndColumns) {
    Handle h;
    {
        auto g = new_graph();
        auto A = input(g, 1, {1, 1, 3, 2}, {6, 6, 2, 1});
        auto B = input(g, 2, {1, 1, 2, 2}, {4, 4, 2, 1});
        auto Mo = input(g, 4, {1, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT32);
        auto No = input(g, 5, {1, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT32);
        auto C = g.matmul(A, B, fe::graph::Matmul_attributes().set_m_override(Mo).set_n_override(No).set_padding(0.5));
        output(C, 3, {1, 1, 3, 2}, {6, 6, 2, 1});
        Dev<float> a({1, 2, 3, 4, 5, 6}), b({1, 0, 0, 1}), c(6);
        Dev<int32_t> mo(std::vector<int32_t>{2}), no(std::vector<int32_t>{1});
        run(g, h.h, {{1, a.p}, {2, b.p}, {3, c.p}, {4, mo.p}, {5, no.p}});
        EXPECT_EQ(c.get(), (std::vector<float>{1, 0.5f, 3, 0.5f, 0.5f, 0.5f}));
    }
    {
        auto g = new_graph();
        auto A = input(g, 1, {1, 1, 3, 2}, {6, 6, 2, 1});
        auto B = input(g, 2, {1, 1, 2, 2}, {4, 4, 2, 1});
        auto Ko = input(g, 4, {1, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT32);
        auto C = g.matmul(A, B, fe::graph::Matmul_attributes().set_k_override(Ko));
        output(C, 3, {1, 1, 3, 2}, {6, 6, 2, 1});
        Dev<float> a({1, 2, 3, 4, 5, 6}), b({1, 0, 0, 1}), c(6);
        Dev<int32_t> ko(std::vector<int32_t>{1});
        run(g, h.h, {{1, a.p}, {2, b.p}, {3, c.p}, {4, ko.p}});
        EXPECT_EQ(c.get(), (std::vector<float>{1, 0, 3, 0, 5, 0}));
    }
}

// A view-only reshape with swapped dims and strides is a transpose: X (2x3) = [1 2 3; 4 5 6] viewed as (3x2) with
// strides (1, 3) is Xt = [1 4; 2 5; 3 6]; Xt times the column (1, 10) = (41, 52, 63). X is an intermediate (X = x +
// 0), so the view is of a virtual tensor, which the stand-in stores densely whatever strides it was declared with.
TEST(CudnnEmu, ReshapeIsATransposedView) {
    Handle h;
    auto g = new_graph();
    auto x = input(g, 1, {1, 1, 2, 3}, {6, 6, 3, 1});
    auto X = g.pointwise(x, g.tensor(0.0f), fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
    X->set_dim({1, 1, 2, 3}).set_stride({6, 6, 3, 1});
    auto Xt = g.reshape(X, fe::graph::Reshape_attributes());
    Xt->set_dim({1, 1, 3, 2}).set_stride({6, 6, 1, 3});
    auto v = input(g, 2, {1, 1, 2, 1}, {2, 2, 1, 1});
    auto Y = g.matmul(Xt, v, fe::graph::Matmul_attributes());
    output(Y, 3, {1, 1, 3, 1}, {3, 3, 1, 1});
    Dev<float> xd({1, 2, 3, 4, 5, 6}), vd({1, 10}), y(3);
    run(g, h.h, {{1, xd.p}, {2, vd.p}, {3, y.p}});
    EXPECT_EQ(y.get(), (std::vector<float>{41, 52, 63}));
}

std::vector<__nv_bfloat16> bf16(const std::vector<float>& v) {
    std::vector<__nv_bfloat16> r;
    for (float f : v) r.push_back(__float2bfloat16(f));
    return r;
}

// cuDNN's unified SDPA forward (the frontend's lowering of a non-causal forward on cuDNN 9.19), one head, two
// queries and keys of head size 8: q0 = k0 = e0, q1 = k1 = e1, v0 = (1, 2, 0...), v1 = (3, 4, 0...), scale ln 3.
// Scores: row 0 (ln 3, 0), row 1 (0, ln 3). Softmax: (3/4, 1/4) and (1/4, 3/4). O: row 0 = 3/4 v0 + 1/4 v1 =
// (1.5, 2.5), row 1 = (2.5, 3.5); Stats = max + ln(sum exp(s - max)) = ln 3 + ln(4/3) = ln 4 for both rows.
// With the padding mask (seq_len_q = 2, seq_len_kv = 1): only key 0, so O = v0 in both rows and Stats = (ln 3, 0).
TEST(CudnnEmu, SdpaForwardWithPaddingMask) {
    for (bool padded : {false, true}) {
        SCOPED_TRACE(padded ? "padded" : "no mask");
        Handle h;
        fe::graph::Graph g;
        g.set_io_data_type(fe::DataType_t::BFLOAT16)
            .set_intermediate_data_type(fe::DataType_t::FLOAT)
            .set_compute_data_type(fe::DataType_t::FLOAT);
        const fe::DataType_t io = fe::DataType_t::BFLOAT16;
        auto Q = input(g, 1, {1, 1, 2, 8}, {16, 16, 8, 1}, io);
        auto K = input(g, 2, {1, 1, 2, 8}, {16, 16, 8, 1}, io);
        auto V = input(g, 3, {1, 1, 2, 8}, {16, 16, 8, 1}, io);
        auto opts = fe::graph::SDPA_attributes()
                        .set_name("sdpa")
                        .set_generate_stats(true)
                        .set_attn_scale((float)std::log(3.0))
                        .set_implementation(fe::AttentionImplementation_t::UNIFIED);
        TensorPtr sq, skv;
        if (padded) {
            sq = input(g, 6, {1, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT32);
            skv = input(g, 7, {1, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT32);
            opts.set_padding_mask(true).set_seq_len_q(sq).set_seq_len_kv(skv);
        }
        auto outs = g.sdpa(Q, K, V, std::move(opts));
        output(outs[0], 4, {1, 1, 2, 8}, {16, 16, 8, 1}, io);
        output(outs[1], 5, {1, 1, 2, 1}, {2, 2, 1, 1});
        std::vector<float> e01(16, 0.0f);
        e01[0] = 1;
        e01[9] = 1;
        std::vector<float> vv(16, 0.0f);
        vv[0] = 1, vv[1] = 2, vv[8] = 3, vv[9] = 4;
        Dev<__nv_bfloat16> q(bf16(e01)), k(bf16(e01)), v(bf16(vv)), o(16);
        Dev<float> stats(2);
        Dev<int32_t> sqd(std::vector<int32_t>{2}), skvd(std::vector<int32_t>{1});
        std::unordered_map<int64_t, void*> pack = {{1, q.p}, {2, k.p}, {3, v.p}, {4, o.p}, {5, stats.p}};
        if (padded) pack[6] = sqd.p, pack[7] = skvd.p;
        run(g, h.h, pack);
        std::vector<float> ov;
        for (__nv_bfloat16 x : o.get()) ov.push_back(__bfloat162float(x));
        const std::vector<float> want_o =
            padded ? std::vector<float>{1, 2, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0}
                   : std::vector<float>{1.5f, 2.5f, 0, 0, 0, 0, 0, 0, 2.5f, 3.5f, 0, 0, 0, 0, 0, 0};
        // O's values are bf16 numbers (probabilities 3/4 and 1/4 or 1) and fp32 arithmetic misses them by far less
        // than half a bf16 ulp: exact. Stats (fp32) within fp32 rounding of log(3) and of the exp/log sums.
        for (int i = 0; i < 16; i++) EXPECT_EQ(ov[i], want_o[i]) << "O element " << i;
        const std::vector<float> sv = stats.get();
        EXPECT_NEAR(sv[0], padded ? std::log(3.0) : std::log(4.0), 1e-6);
        EXPECT_NEAR(sv[1], padded ? 0.0 : std::log(4.0), 1e-6);
    }
}

// What the stand-in does not emulate is refused when the graph is built, with its reason: never a wrong result.
TEST(CudnnEmu, UnemulatedOperationIsDeclinedAtBuild) {
    Handle h;
    auto g = new_graph();
    auto X = input(g, 1, {1, 1, 2, 2}, {4, 4, 2, 1});
    auto Y = g.pointwise(X, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::GELU_FWD));
    output(Y, 2, {1, 1, 2, 2}, {4, 4, 2, 1});
    const std::string e = build(g, h.h);
    EXPECT_NE(e.find("not emulated"), std::string::npos) << e;
}

// Layouts the stand-in does not read are declined too: a BOOLEAN tensor in memory (cuDNN packs it one bit per
// element) and a ragged tensor (rows at offsets given by another tensor).
TEST(CudnnEmu, UnemulatedLayoutsAreDeclinedAtBuild) {
    Handle h;
    {
        auto g = new_graph();
        auto X = input(g, 1, {1, 1, 2, 2}, {4, 4, 2, 1});
        auto M = input(g, 2, {1, 1, 2, 2}, {4, 4, 2, 1}, fe::DataType_t::BOOLEAN);
        auto Y = g.pointwise(X, g.tensor(0.0f), M,
                             fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::BINARY_SELECT));
        output(Y, 3, {1, 1, 2, 2}, {4, 4, 2, 1});
        const std::string e = build(g, h.h);
        EXPECT_NE(e.find("bit-packed"), std::string::npos) << e;
    }
    {
        auto g = new_graph();
        auto offsets = input(g, 4, {2, 1, 1, 1}, {1, 1, 1, 1}, fe::DataType_t::INT32);
        auto X = input(g, 1, {1, 1, 2, 2}, {4, 4, 2, 1});
        X->set_ragged_offset(offsets);
        auto Y = g.pointwise(X, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::NEG));
        output(Y, 2, {1, 1, 2, 2}, {4, 4, 2, 1});
        const std::string e = build(g, h.h);
        EXPECT_NE(e.find("not emulated"), std::string::npos) << e;
    }
}

// The plan's workspace holds its intermediates: executing without one is an error, and so is a caller's tensor
// inside it (cuDNN would overwrite it).
TEST(CudnnEmu, WorkspaceIsRequiredAndKeptApart) {
    Handle h;
    auto g = new_graph();
    auto X = input(g, 1, {1, 1, 2, 2}, {4, 4, 2, 1});
    auto E = g.pointwise(X, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::EXP));
    auto Y = g.pointwise(E, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::NEG));
    output(Y, 2, {1, 1, 2, 2}, {4, 4, 2, 1});
    ASSERT_EQ(build(g, h.h), "");
    int64_t ws = 0;
    ASSERT_TRUE(g.get_workspace_size(ws).is_good());
    ASSERT_GE(ws, 16);  // E: 4 floats
    Dev<float> x({0, 0, 0, 0}), y(4);
    Dev<char> workspace((size_t)ws + 64);
    std::unordered_map<int64_t, void*> pack = {{1, x.p}, {2, y.p}}, inside = {{1, x.p}, {2, workspace.p}};
    EXPECT_TRUE(g.execute(h.h, pack, nullptr).is_bad());
    EXPECT_TRUE(g.execute(h.h, inside, workspace.p).is_bad());
    EXPECT_TRUE(g.execute(h.h, pack, workspace.p).is_good());
    EXPECT_EQ(y.get(), (std::vector<float>{-1, -1, -1, -1}));
}

}  // namespace
