// cuDNN fused SDPA through cudnn-frontend: the Cudnn implementation of kernels/attention.cuh's contract (the
// context's life cycle and the LSE convention: kernels/attention_cudnn.cuh). This is the ONLY translation unit that
// includes the frontend's headers (they are heavy): everything else sees the opaque AttentionCudnn. Compiled (by
// CMake) only in the bf16 build when cudnn-frontend was found; the #if below keeps it empty otherwise, and
// kernels/attention_cuda.cu then defines the stubs. One graph per (B, T, NH, HS, dtype, fwd/bwd, causal, padded,
// deterministic), built on first use and cached (a declined key too); workspace from the context's provider.
// The graphs' tensors and strides, the plan choice, the workspace's size and determinism: docs/DESIGN.md section 6.3.
#include "kernels/attention_cudnn.cuh"

#if PRAC_ATTENTION_CUDNN

#include <cudnn.h>
#if defined(PRAC_CUDA_EMU)  // the CPU execution layer's device built-ins are macros; the frontend's host code
#pragma push_macro("threadIdx")  // names parameters gridDim and blockDim
#pragma push_macro("blockIdx")
#pragma push_macro("blockDim")
#pragma push_macro("gridDim")
#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim
#endif
#include <cudnn_frontend.h>
#if defined(PRAC_CUDA_EMU)
#pragma pop_macro("threadIdx")
#pragma pop_macro("blockIdx")
#pragma pop_macro("blockDim")
#pragma pop_macro("gridDim")
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"

namespace fe = cudnn_frontend;

namespace {

// tensor uids of the variant packs
enum : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSeqLenQ, kSeqLenKV };

struct GraphKey {
    int B, T, NH, HS;
    int dtype;  // bytes per element of floatX (2: bf16)
    bool backward, causal, padded, deterministic;  // padded: the key-padding mask (a kv_len is given)
    bool operator<(const GraphKey& o) const {
        return std::tie(B, T, NH, HS, dtype, backward, causal, padded, deterministic) <
               std::tie(o.B, o.T, o.NH, o.HS, o.dtype, o.backward, o.causal, o.padded, o.deterministic);
    }
};

struct GraphEntry {
    std::shared_ptr<fe::graph::Graph> graph;  // null when declined
    int64_t workspace = 0;
    std::string why;       // why it was declined
    bool noticed = false;  // the fallback notice was printed
    // padded graphs: seq_len_q (B) device int32, every entry T (cuDNN's padding mask also masks query rows
    // >= seq_len_q; ours masks keys only), filled once when the graph is built, freed with the context
    int32_t* seq_len_q = nullptr;
};

std::string key_text(const GraphKey& k) {
    return format("attention %s B=%d T=%d NH=%d HS=%d%s%s", k.backward ? "backward" : "forward", k.B, k.T, k.NH,
                  k.HS, k.causal ? " causal" : "", k.padded ? " padded" : "");
}

// one line: the frontend's messages may span several
std::string one_line(std::string s, size_t max_len = 300) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    if (s.size() > max_len) s = s.substr(0, max_len) + "...";
    return s;
}

bool env_flag(const char* name, bool dflt) {
    const char* v = std::getenv(name);
    if (!v || !*v) return dflt;
    if (!std::strcmp(v, "0") || !std::strcmp(v, "false") || !std::strcmp(v, "off")) return false;
    if (!std::strcmp(v, "1") || !std::strcmp(v, "true") || !std::strcmp(v, "on")) return true;
    fail("%s=%s: expected 0 or 1", name, v);
}

// (b, h, s, d) views of the interleaved buffers
std::vector<int64_t> bhsd_dims(const GraphKey& k) { return {k.B, k.NH, k.T, k.HS}; }
std::vector<int64_t> qkv_strides(const GraphKey& k) {  // one of q, k, v inside (B, T, 3C)
    const int64_t C = (int64_t)k.NH * k.HS;
    return {(int64_t)k.T * 3 * C, k.HS, 3 * C, 1};
}
std::vector<int64_t> btc_strides(const GraphKey& k) {  // (B, T, C) tensors: O, dO
    const int64_t C = (int64_t)k.NH * k.HS;
    return {(int64_t)k.T * C, k.HS, C, 1};
}
std::vector<int64_t> lse_dims(const GraphKey& k) { return {k.B, k.NH, k.T, 1}; }
std::vector<int64_t> lse_strides(const GraphKey& k) { return {(int64_t)k.NH * k.T, k.T, 1, 1}; }
std::vector<int64_t> seq_len_dims(const GraphKey& k) { return {k.B, 1, 1, 1}; }  // seq_len_q, seq_len_kv (B) int32

std::shared_ptr<fe::graph::Tensor_attributes> add_tensor(fe::graph::Graph& g, const char* name, int64_t uid,
                                                         std::vector<int64_t> dims, std::vector<int64_t> strides,
                                                         fe::DataType_t type) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim(std::move(dims))
                        .set_stride(std::move(strides))
                        .set_data_type(type));
}

void set_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid, std::vector<int64_t> dims,
                std::vector<int64_t> strides, fe::DataType_t type) {
    t->set_output(true).set_uid(uid).set_dim(std::move(dims)).set_stride(std::move(strides)).set_data_type(type);
}

// Defines the graph of `k` (nothing is built yet).
std::shared_ptr<fe::graph::Graph> define_graph(const GraphKey& k) {
    const fe::DataType_t io = fe::DataType_t::BFLOAT16, f32 = fe::DataType_t::FLOAT;
    const float scale = 1.0f / std::sqrt((float)k.HS);
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io).set_intermediate_data_type(f32).set_compute_data_type(f32);
    auto Q = add_tensor(*g, "Q", kQ, bhsd_dims(k), qkv_strides(k), io);
    auto K = add_tensor(*g, "K", kK, bhsd_dims(k), qkv_strides(k), io);
    auto V = add_tensor(*g, "V", kV, bhsd_dims(k), qkv_strides(k), io);
    // key padding: cuDNN hides score (i, j) unless i < seq_len_q[b] and j < seq_len_kv[b]; seq_len_q = T keeps
    // every query row (ours attend to the real keys too), seq_len_kv = kv_len
    std::shared_ptr<fe::graph::Tensor_attributes> seq_q, seq_kv;
    if (k.padded) {
        seq_q = add_tensor(*g, "seq_len_q", kSeqLenQ, seq_len_dims(k), {1, 1, 1, 1}, fe::DataType_t::INT32);
        seq_kv = add_tensor(*g, "seq_len_kv", kSeqLenKV, seq_len_dims(k), {1, 1, 1, 1}, fe::DataType_t::INT32);
    }
    if (!k.backward) {
        auto opts = fe::graph::SDPA_attributes().set_name("sdpa_forward").set_generate_stats(true).set_attn_scale(scale);
        if (k.causal)
            opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
        if (k.padded) opts.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
        auto outs = g->sdpa(Q, K, V, std::move(opts));
        set_output(outs[0], kO, bhsd_dims(k), btc_strides(k), io);
        set_output(outs[1], kStats, lse_dims(k), lse_strides(k), f32);
    } else {
        auto O = add_tensor(*g, "O", kO, bhsd_dims(k), btc_strides(k), io);
        auto dO = add_tensor(*g, "dO", kDO, bhsd_dims(k), btc_strides(k), io);
        auto Stats = add_tensor(*g, "Stats", kStats, lse_dims(k), lse_strides(k), f32);
        auto opts = fe::graph::SDPA_backward_attributes()
                        .set_name("sdpa_backward")
                        .set_attn_scale(scale)
                        .set_deterministic_algorithm(k.deterministic);
        if (k.causal)
            opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
        if (k.padded) opts.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
        auto grads = g->sdpa_backward(Q, K, V, O, dO, Stats, std::move(opts));
        set_output(grads[0], kDQ, bhsd_dims(k), qkv_strides(k), io);
        set_output(grads[1], kDK, bhsd_dims(k), qkv_strides(k), io);
        set_output(grads[2], kDV, bhsd_dims(k), qkv_strides(k), io);
    }
    return g;
}

// Defines and builds the graph of `k`: validate, operation graph, heuristics A + fallback, check_support, the
// first plan that builds, workspace size. Failures (and exceptions from the frontend) decline the key.
GraphEntry build_graph(cudnnHandle_t handle, const GraphKey& k, cudaStream_t stream) {
    GraphEntry e;
    auto step = [&](fe::error_t st, const char* what) {
        if (st.is_good()) return true;
        e.why = format("%s: %s", what, one_line(st.get_message()).c_str());
        return false;
    };
    try {
        auto g = define_graph(k);
        if (!step(g->validate(), "validate")) return e;
        if (!step(g->build_operation_graph(handle), "build_operation_graph")) return e;
        if (!step(g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans"))
            return e;
        if (!step(g->check_support(handle), "check_support")) return e;
        if (!step(g->build_plans(handle, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "build_plans")) return e;
        int64_t ws = 0;
        if (!step(g->get_workspace_size(ws), "get_workspace_size")) return e;
        if (ws < 0) {
            e.why = format("get_workspace_size returned %lld", (long long)ws);
            return e;
        }
        e.graph = std::move(g);
        e.workspace = ws;
        if (k.padded) {  // once per shape, before any execute; waited for, so any later stream sees it
            std::vector<int32_t> all_T((size_t)k.B, k.T);
            cudaCheck(cudaMalloc(&e.seq_len_q, all_T.size() * sizeof(int32_t)));
            cudaCheck(cudaMemcpyAsync(e.seq_len_q, all_T.data(), all_T.size() * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream));
            cudaCheck(cudaStreamSynchronize(stream));
        }
    } catch (const std::exception& ex) {
        e.graph.reset();
        e.why = format("cudnn-frontend threw: %s", one_line(ex.what()).c_str());
    }
    return e;
}

}  // namespace

struct AttentionCudnn {
    cudaStream_t stream = nullptr;  // the handle's stream
    cudnnHandle_t handle = nullptr;
    bool handle_failed = false, handle_noticed = false;
    std::string handle_why;
    AttentionWorkspaceFn workspace_fn = nullptr;
    void* workspace_self = nullptr;
    bool deterministic = true;
    std::map<GraphKey, GraphEntry> cache;
    AttentionCudnnStats stats;
};

namespace {

// The handle, made on first use and bound to `stream` (re-bound when a caller passes another stream).
bool ensure_handle(AttentionCudnn* c, cudaStream_t stream, std::string* why) {
    if (c->handle_failed) {
        *why = c->handle_why;
        return false;
    }
    if (!c->handle) {
        cudnnStatus_t s = cudnnCreate(&c->handle);
        if (s != CUDNN_STATUS_SUCCESS) {
            c->handle = nullptr;
            c->handle_failed = true;
            c->handle_why = format("cudnnCreate failed (%d: %s)", (int)s, cudnnGetErrorString(s));
            *why = c->handle_why;
            return false;
        }
        c->stream = stream;
        s = cudnnSetStream(c->handle, stream);
        if (s != CUDNN_STATUS_SUCCESS) {
            std::fprintf(stderr, "[cuDNN ERROR] cudnnSetStream (%d: %s)\n", (int)s, cudnnGetErrorString(s));
            std::exit(EXIT_FAILURE);
        }
        static bool said = false;  // once per process
        if (!said) {
            said = true;
            std::printf("attention: %s fused SDPA, %s backward\n", attention_cudnn_describe().c_str(),
                        c->deterministic ? "deterministic" : "non-deterministic (PRAC_CUDNN_DETERMINISTIC=0)");
        }
    } else if (stream != c->stream) {
        cudnnStatus_t s = cudnnSetStream(c->handle, stream);
        if (s != CUDNN_STATUS_SUCCESS) {
            std::fprintf(stderr, "[cuDNN ERROR] cudnnSetStream (%d: %s)\n", (int)s, cudnnGetErrorString(s));
            std::exit(EXIT_FAILURE);
        }
        c->stream = stream;
    }
    return true;
}

GraphKey make_key(const AttentionCudnn* c, int B, int T, int C, int NH, bool causal, bool padded, bool backward) {
    CHECK_USER(c != nullptr, "cuDNN attention: no context (CudaBackend makes one; tests call attention_cudnn_create)");
    CHECK_USER(B > 0 && T > 0 && NH > 0 && C % NH == 0 && attention_cudnn_supports_head_size(C / NH),
               "cuDNN attention: unsupported shape B=%d T=%d C=%d NH=%d (head sizes: multiples of 8 up to 128)", B, T,
               C, NH);
    return GraphKey{B, T, NH, C / NH, (int)sizeof(floatX), backward, causal, padded, backward && c->deterministic};
}

// The cache entry of `k`, built on first use. Null only when the handle could not be made (reason in *why).
GraphEntry* lookup(AttentionCudnn* c, const GraphKey& k, cudaStream_t stream, std::string* why) {
    if (!ensure_handle(c, stream, why)) return nullptr;
    auto it = c->cache.find(k);
    if (it != c->cache.end()) {
        c->stats.cache_hits++;
    } else {
        it = c->cache.emplace(k, build_graph(c->handle, k, stream)).first;
        if (it->second.graph) c->stats.graphs_built++;
        else c->stats.graphs_declined++;
    }
    c->stats.last_workspace_bytes = (size_t)it->second.workspace;
    if (!it->second.graph) *why = it->second.why;
    return &it->second;
}

// Resolves the graph for a run: the entry, or null after the fallback notice (allow_fallback) / a UserError.
GraphEntry* graph_for_run(AttentionCudnn* c, const GraphKey& k, cudaStream_t stream, bool allow_fallback) {
    std::string why;
    GraphEntry* e = lookup(c, k, stream, &why);
    if (e && e->graph) return e;
    if (!allow_fallback)
        fail("cuDNN attention declined %s: %s\n---> HINT: PRAC_ATTENTION=auto (or mma / simt) runs the hand-written "
             "kernels",
             key_text(k).c_str(), why.c_str());
    if (!e) {  // the handle could not be made: one notice per context, every shape falls back
        if (!c->handle_noticed) {
            c->handle_noticed = true;
            std::printf("notice: cuDNN attention unavailable (%s); using the hand-written attention kernels\n",
                        why.c_str());
        }
        return nullptr;
    }
    if (!e->noticed) {  // once per shape
        e->noticed = true;
        std::printf("notice: cuDNN SDPA declined %s (%s); using the hand-written kernel for this shape\n",
                    key_text(k).c_str(), why.c_str());
    }
    return nullptr;
}

void execute(AttentionCudnn* c, GraphEntry* e, const GraphKey& k, std::unordered_map<int64_t, void*>& pack) {
    void* ws = e->workspace > 0 ? c->workspace_fn(c->workspace_self, (size_t)e->workspace) : nullptr;
    fe::error_t st = e->graph->execute(c->handle, pack, ws);
    if (st.is_bad()) {
        std::fprintf(stderr, "[cuDNN ERROR] execute of the %s graph failed: %s\n", key_text(k).c_str(),
                     one_line(st.get_message(), 2000).c_str());
        std::exit(EXIT_FAILURE);
    }
    c->stats.executes++;
}

}  // namespace

bool attention_cudnn_compiled() { return true; }

bool attention_cudnn_supports_head_size(int HS) { return cudnn_attention_takes_head_size(HS); }

AttentionCudnn* attention_cudnn_create(cudaStream_t stream, AttentionWorkspaceFn workspace, void* workspace_self) {
    CHECK_USER(workspace != nullptr, "attention_cudnn_create: a workspace provider is required");
    auto* c = new AttentionCudnn();
    c->stream = stream;
    c->workspace_fn = workspace;
    c->workspace_self = workspace_self;
    c->deterministic = env_flag("PRAC_CUDNN_DETERMINISTIC", true);
    return c;
}

void attention_cudnn_destroy(AttentionCudnn* c) {
    if (!c) return;
    for (auto& kv : c->cache)
        if (kv.second.seq_len_q) cudaCheck(cudaFree(kv.second.seq_len_q));
    c->cache.clear();  // plans before the handle
    if (c->handle) cudnnDestroy(c->handle);
    delete c;
}

AttentionCudnnStats attention_cudnn_stats(const AttentionCudnn* c) { return c ? c->stats : AttentionCudnnStats{}; }

bool attention_cudnn_deterministic(const AttentionCudnn* c) { return c && c->deterministic; }

std::string attention_cudnn_describe() {
    size_t v = cudnnGetVersion();  // 91900 = 9.19.0
    return format("cuDNN %zu.%zu.%zu (runtime; headers %d.%d.%d), cudnn-frontend %d.%d.%d", v / 10000,
                  (v / 100) % 100, v % 100, CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, CUDNN_FRONTEND_MAJOR_VERSION,
                  CUDNN_FRONTEND_MINOR_VERSION, CUDNN_FRONTEND_PATCH_VERSION);
}

bool attention_cudnn_prepare(AttentionCudnn* c, int B, int T, int C, int NH, bool causal, bool padded,
                             bool backward, cudaStream_t stream, size_t* workspace_bytes, std::string* why) {
    std::string reason;
    bool ok = false;
    if (!c) reason = "no context";
    else if (B <= 0 || T <= 0 || NH <= 0 || C % NH != 0) reason = "bad shape";
    else if (!attention_cudnn_supports_head_size(C / NH)) reason = format("head size %d", C / NH);
    else {
        GraphEntry* e = lookup(c, make_key(c, B, T, C, NH, causal, padded, backward), stream, &reason);
        ok = e && e->graph;
        if (ok && workspace_bytes) *workspace_bytes = (size_t)e->workspace;
    }
    if (!ok && why) *why = reason;
    return ok;
}

// the padding mask's two tensors, for a padded graph
static void add_seq_lens(std::unordered_map<int64_t, void*>& pack, const GraphEntry* e, const int* kv_len) {
    if (!kv_len) return;
    pack[kSeqLenQ] = e->seq_len_q;
    pack[kSeqLenKV] = const_cast<int*>(kv_len);
}

bool attention_cudnn_forward(AttentionCudnn* c, floatX* out, float* lse, const floatX* qkv, int B, int T, int C,
                             int NH, bool causal, const int* kv_len, cudaStream_t stream, bool allow_fallback) {
    const GraphKey k = make_key(c, B, T, C, NH, causal, kv_len != nullptr, false);
    GraphEntry* e = graph_for_run(c, k, stream, allow_fallback);
    if (!e) return false;
    floatX* q = const_cast<floatX*>(qkv);
    std::unordered_map<int64_t, void*> pack = {{kQ, q}, {kK, q + C}, {kV, q + 2 * C}, {kO, out}, {kStats, lse}};
    add_seq_lens(pack, e, kv_len);
    execute(c, e, k, pack);
    return true;
}

bool attention_cudnn_backward(AttentionCudnn* c, floatX* dqkv, const floatX* dout, const floatX* qkv,
                              const floatX* out, const float* lse, int B, int T, int C, int NH, bool causal,
                              const int* kv_len, cudaStream_t stream, bool allow_fallback) {
    const GraphKey k = make_key(c, B, T, C, NH, causal, kv_len != nullptr, true);
    GraphEntry* e = graph_for_run(c, k, stream, allow_fallback);
    if (!e) return false;
    floatX* q = const_cast<floatX*>(qkv);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, q},           {kK, q + C},          {kV, q + 2 * C},       {kO, const_cast<floatX*>(out)},
        {kDO, const_cast<floatX*>(dout)}, {kStats, const_cast<float*>(lse)}, {kDQ, dqkv}, {kDK, dqkv + C},
        {kDV, dqkv + 2 * C}};
    add_seq_lens(pack, e, kv_len);
    // cuDNN's documentation does not promise to write dK, dV of the padding keys (zero by the contract: the twin
    // never adds to them), so with a padding mask dqkv is cleared first
    if (kv_len) cudaCheck(cudaMemsetAsync(dqkv, 0, (size_t)B * T * 3 * C * sizeof(floatX), stream));
    execute(c, e, k, pack);
    return true;
}

#endif  // PRAC_ATTENTION_CUDNN
