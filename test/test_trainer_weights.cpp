// Tests of loading and saving Hugging Face safetensors through the models (model/weights.h): the fixtures load,
// GPT-2's Conv1D weights are transposed, missing / extra / misshapen / corrupt tensors give clear errors, a
// directory resolves to its model.safetensors, and save then load is bitwise exact in the Hugging Face layout.
// Every suite is named Trainer*, so `ctest -R Trainer` runs all the trainer tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/safetensors.h"
#include "kernels/cpu_backend.h"
#include "model/config.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/trainer.h"
#include "test/test_util.h"
#include "test/trainer_test_util.h"

namespace {

// Every tensor of a safetensors file, as fp32.
struct HostTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
};
std::vector<HostTensor> read_all(const std::string& path) {
    SafeTensorsFile f = safetensors_open(path);
    std::vector<HostTensor> v;
    for (const SafeTensor& t : f.tensors) {
        HostTensor h{t.name, t.shape, std::vector<float>(t.numel())};
        f.read_f32(t.name, h.data.data(), h.data.size());
        v.push_back(std::move(h));
    }
    return v;
}
void write_all(const std::string& path, const std::vector<HostTensor>& tensors) {
    std::vector<SafeTensorWrite> w;
    for (const HostTensor& t : tensors) w.push_back({t.name, "F32", t.shape, t.data.data()});
    safetensors_write(path, w, {{"format", "pt"}});
}

}  // namespace

// =========================================================================================================
// Safetensors <-> model
// =========================================================================================================

TEST(TrainerWeights, FixturesLoad) {
    CpuBackend be;
    {
        GPT2<CpuBackend> m(be, model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json"));
        EXPECT_NO_THROW(m.load_weights(GPT2_FIXTURE + "/model.safetensors"));
    }
    {
        Llama<CpuBackend> m(be, model_config_load(Arch::LLAMA, LLAMA_FIXTURE + "/config.json"));
        EXPECT_NO_THROW(m.load_weights(LLAMA_FIXTURE + "/model.safetensors"));
    }
}

// Loading transposes Conv1D weights: our qkvw row r, column c is the file's c_attn.weight[c][r].
TEST(TrainerWeights, LoadTransposesGpt2Conv1D) {
    CpuBackend be;
    ModelConfig cfg = model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json");
    GPT2<CpuBackend> m(be, cfg);
    m.load_weights(GPT2_FIXTURE + "/model.safetensors");
    SafeTensorsFile f = safetensors_open(GPT2_FIXTURE + "/model.safetensors");
    int C = cfg.channels;
    for (int l = 0; l < cfg.num_layers; l++) {
        std::string name = "transformer.h." + std::to_string(l) + ".attn.c_attn.weight";
        ASSERT_EQ(f.shape(name), (std::vector<int64_t>{C, 3 * C}));
        std::vector<float> w((size_t)3 * C * C);
        f.read_f32(name, w.data(), w.size());
        const float* ours = m.params.qkvw + (size_t)l * 3 * C * C;
        for (int r = 0; r < 3 * C; r++)
            for (int c = 0; c < C; c++) ASSERT_EQ(ours[(size_t)r * C + c], w[(size_t)c * 3 * C + r]) << l << " " << r << " " << c;
    }
}

TEST(TrainerWeights, MissingTensorWhenConfigHasMoreLayers) {
    TempDir dir;
    CpuBackend be;
    GPT2<CpuBackend> g(be, model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"n_layer", 3}}, "g.json")));
    EXPECT_USER_ERROR(g.load_weights(GPT2_FIXTURE + "/model.safetensors"), "tensor \"transformer.h.2.", "missing",
                      "expects 3 layers", "HINT");
    Llama<CpuBackend> l(be, model_config_load(Arch::LLAMA,
                                              derived_config(dir, LLAMA_FIXTURE, {{"num_hidden_layers", 3}}, "l.json")));
    EXPECT_USER_ERROR(l.load_weights(LLAMA_FIXTURE + "/model.safetensors"), "tensor \"model.layers.2.", "missing");
}

TEST(TrainerWeights, WrongShape) {
    TempDir dir;
    CpuBackend be;
    GPT2<CpuBackend> g(be, model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"n_embd", 64}}, "g.json")));
    EXPECT_USER_ERROR(g.load_weights(GPT2_FIXTURE + "/model.safetensors"), "transformer.wte.weight",
                      "has shape [96, 32]", "needs [96, 64]");
    Llama<CpuBackend> l(be, model_config_load(Arch::LLAMA,
                                              derived_config(dir, LLAMA_FIXTURE, {{"intermediate_size", 96}}, "l.json")));
    EXPECT_USER_ERROR(l.load_weights(LLAMA_FIXTURE + "/model.safetensors"), "mlp.gate_proj.weight",
                      "has shape [88, 32]", "needs [96, 32]");
}

// A NaN or Inf weight is refused at the load, naming the tensor and the first element in the file's order (a NaN in
// --init-from's weights read as a diverged first step: "lower --lr"); a Conv1D weight is stored transposed
TEST(TrainerWeights, NonFiniteWeightsAreRefusedAtTheLoad) {
    TempDir dir;
    CpuBackend be;
    const std::string c_attn = "transformer.h.1.attn.c_attn.weight";
    for (const std::string name : {std::string("transformer.ln_f.bias"), c_attn}) {
        std::vector<HostTensor> t = read_all(GPT2_FIXTURE + "/model.safetensors");
        for (HostTensor& h : t)
            if (h.name == name) {
                h.data[5] = NAN;
                h.data.back() = -INFINITY;
            }
        write_all(dir / "bad.safetensors", t);
        GPT2<CpuBackend> g(be, model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json"));
        const std::string tensor = "tensor \"" + name + "\"",
                          where = "the first at element 5 of " + std::to_string(name == c_attn ? 32 * 96 : 32);
        EXPECT_USER_ERROR(g.load_weights(dir / "bad.safetensors"), tensor.c_str(), "holds 2 non-finite values",
                          where.c_str());
    }
    EXPECT_NO_THROW(GPT2<CpuBackend>(be, model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json"))
                        .load_weights(GPT2_FIXTURE + "/model.safetensors"));
}

TEST(TrainerWeights, ExtraLayerIsUnexpected) {
    TempDir dir;
    CpuBackend be;
    // the GPT-2 fixture plus a third layer (a copy of layer 1)
    std::vector<HostTensor> t = read_all(GPT2_FIXTURE + "/model.safetensors");
    size_t n = t.size();
    for (size_t i = 0; i < n; i++)
        if (t[i].name.rfind("transformer.h.1.", 0) == 0) {
            HostTensor c = t[i];
            c.name = "transformer.h.2." + c.name.substr(std::strlen("transformer.h.1."));
            t.push_back(c);
        }
    write_all(dir / "g3.safetensors", t);
    GPT2<CpuBackend> g(be, model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json"));
    EXPECT_USER_ERROR(g.load_weights(dir / "g3.safetensors"), "unexpected tensor \"transformer.h.2.", "2 layers");

    std::vector<HostTensor> u = read_all(LLAMA_FIXTURE + "/model.safetensors");
    n = u.size();
    for (size_t i = 0; i < n; i++)
        if (u[i].name.rfind("model.layers.1.", 0) == 0) {
            HostTensor c = u[i];
            c.name = "model.layers.2." + c.name.substr(std::strlen("model.layers.1."));
            u.push_back(c);
        }
    write_all(dir / "l3.safetensors", u);
    Llama<CpuBackend> l(be, model_config_load(Arch::LLAMA, LLAMA_FIXTURE + "/config.json"));
    EXPECT_USER_ERROR(l.load_weights(dir / "l3.safetensors"), "unexpected tensor \"model.layers.2.");

    // tensors a checkpoint may carry that the model does not need are fine: GPT-2's lm_head and attn.bias,
    // LLaMA's rotary_emb.inv_freq
    std::vector<HostTensor> v = read_all(GPT2_FIXTURE + "/model.safetensors");
    v.push_back({"transformer.h.0.attn.bias", {1, 1, 4, 4}, std::vector<float>(16, 1.0f)});
    write_all(dir / "gbias.safetensors", v);
    EXPECT_NO_THROW(g.load_weights(dir / "gbias.safetensors"));
    std::vector<HostTensor> w = read_all(LLAMA_FIXTURE + "/model.safetensors");
    w.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, std::vector<float>(4, 1.0f)});
    write_all(dir / "linv.safetensors", w);
    EXPECT_NO_THROW(l.load_weights(dir / "linv.safetensors"));
    // GPT-2's tied head of the embedding's shape is skipped; one of another shape is another model's (it was
    // skipped too, exit 0)
    const SafeTensorsFile fixture = safetensors_open(GPT2_FIXTURE + "/model.safetensors");
    const std::vector<int64_t> wte_shape = fixture.shape("transformer.wte.weight");
    std::vector<HostTensor> tied = read_all(GPT2_FIXTURE + "/model.safetensors");
    tied.push_back({"lm_head.weight", wte_shape, std::vector<float>((size_t)wte_shape[0] * wte_shape[1], 0.5f)});
    write_all(dir / "ghead.safetensors", tied);
    EXPECT_NO_THROW(g.load_weights(dir / "ghead.safetensors"));
    tied.back() = {"lm_head.weight", {5, 5}, std::vector<float>(25, 0.5f)};
    write_all(dir / "ghead55.safetensors", tied);
    EXPECT_USER_ERROR(g.load_weights(dir / "ghead55.safetensors"), "\"lm_head.weight\" has shape [5, 5]",
                      "ties its head to the token embedding");
}

// The hub's original gpt2 checkpoints name tensors without the "transformer." prefix.
TEST(TrainerWeights, Gpt2CheckpointWithoutPrefix) {
    TempDir dir;
    CpuBackend be;
    std::vector<HostTensor> t = read_all(GPT2_FIXTURE + "/model.safetensors");
    for (HostTensor& x : t)
        if (x.name.rfind("transformer.", 0) == 0) x.name = x.name.substr(std::strlen("transformer."));
    write_all(dir / "noprefix.safetensors", t);
    ModelConfig cfg = model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json");
    GPT2<CpuBackend> a(be, cfg), b(be, cfg);
    a.load_weights(GPT2_FIXTURE + "/model.safetensors");
    ASSERT_NO_THROW(b.load_weights(dir / "noprefix.safetensors"));
    EXPECT_EQ(std::memcmp(a.params_memory, b.params_memory, a.param_buffer_numel * sizeof(float)), 0);
}

TEST(TrainerWeights, CorruptFiles) {
    TempDir dir;
    CpuBackend be;
    GPT2<CpuBackend> g(be, model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json"));
    std::string bytes = read_bytes(GPT2_FIXTURE + "/model.safetensors");
    ASSERT_GT(bytes.size(), 1000u);
    write_text(dir / "half.safetensors", bytes.substr(0, bytes.size() / 2));
    EXPECT_USER_ERROR(g.load_weights(dir / "half.safetensors"), "half.safetensors");
    write_text(dir / "stub.safetensors", bytes.substr(0, 5));
    EXPECT_USER_ERROR(g.load_weights(dir / "stub.safetensors"), "stub.safetensors", "too short");
    write_text(dir / "empty.safetensors", "");
    EXPECT_USER_ERROR(g.load_weights(dir / "empty.safetensors"), "empty.safetensors");
    std::string garbage(4096, '\0');
    for (size_t i = 0; i < garbage.size(); i++) garbage[i] = (char)((i * 2654435761u) >> 13);
    write_text(dir / "garbage.safetensors", garbage);
    EXPECT_USER_ERROR(g.load_weights(dir / "garbage.safetensors"), "garbage.safetensors");
    // a plausible header length followed by non-JSON
    std::string fake(8, '\0');
    fake[0] = 16;
    fake += "this is not json";
    write_text(dir / "fake.safetensors", fake);
    EXPECT_USER_ERROR(g.load_weights(dir / "fake.safetensors"), "fake.safetensors", "not valid JSON");
}

TEST(TrainerWeights, DirectoryWithoutModelFile) {
    TempDir dir;
    EXPECT_EQ(resolve_weights_path(dir.path), dir.path + "/model.safetensors");
    EXPECT_EQ(resolve_weights_path(GPT2_FIXTURE), GPT2_FIXTURE + "/model.safetensors");
    EXPECT_EQ(resolve_weights_path(dir / "x.safetensors"), dir / "x.safetensors");  // files pass through
    CpuBackend be;
    GPT2<CpuBackend> g(be, model_config_load(Arch::GPT2, GPT2_FIXTURE + "/config.json"));
    EXPECT_USER_ERROR(g.load_weights(resolve_weights_path(dir.path)), "cannot open", dir.path.c_str(),
                      "model.safetensors");
    // the directory itself given as the file
    EXPECT_USER_ERROR(g.load_weights(dir.path), "not a regular file");
}

// save_weights then load_weights into a fresh model: the whole parameter buffer is bitwise equal.
template <template <class> class Model>
void check_round_trip(Arch arch, const char* name) {
    SCOPED_TRACE(name);
    TempDir dir;
    CpuBackend be;
    ModelConfig cfg = model_config_load(arch, name);
    Model<CpuBackend> a(be, cfg), b(be, cfg);
    a.init_weights(1234);
    a.save_weights(dir / "model.safetensors");
    b.init_weights(999);  // different content first, so a no-op load would show
    b.load_weights(dir / "model.safetensors");
    ASSERT_EQ(a.param_buffer_numel, b.param_buffer_numel);
    EXPECT_EQ(std::memcmp(a.params_memory, b.params_memory, a.param_buffer_numel * sizeof(float)), 0);
    // what was saved is all there is: the file has exactly the mapped tensors
    SafeTensorsFile f = safetensors_open(dir / "model.safetensors");
    EXPECT_EQ(f.tensors.size(), a.hf_map().size());
    EXPECT_EQ(f.metadata.at("format"), "pt");
}

TEST(TrainerWeights, SaveLoadRoundTripIsExact) {
    check_round_trip<GPT2>(Arch::GPT2, "gpt2-tiny");
    check_round_trip<Llama>(Arch::LLAMA, "llama-tiny");
}

// The saved GPT-2 file is in Hugging Face layout: Conv1D weights (in, out), our (out, in) transposed;
// LLaMA's nn.Linear weights are (out, in) like ours. Vectors are 1-D, the embedding has the real vocab.
TEST(TrainerWeights, SavedFileUsesHuggingFaceLayout) {
    TempDir dir;
    CpuBackend be;
    ModelConfig gc = model_config_load(Arch::GPT2, "gpt2-tiny");
    GPT2<CpuBackend> g(be, gc);
    g.init_weights(7);
    g.save_weights(dir / "g.safetensors");
    SafeTensorsFile f = safetensors_open(dir / "g.safetensors");
    int C = gc.channels, F = gc.hidden;
    EXPECT_EQ(f.shape("transformer.wte.weight"), (std::vector<int64_t>{50257, C}));
    EXPECT_EQ(f.shape("transformer.wpe.weight"), (std::vector<int64_t>{gc.max_seq_len, C}));
    EXPECT_EQ(f.shape("transformer.h.1.attn.c_attn.weight"), (std::vector<int64_t>{C, 3 * C}));
    EXPECT_EQ(f.shape("transformer.h.1.attn.c_attn.bias"), (std::vector<int64_t>{3 * C}));
    EXPECT_EQ(f.shape("transformer.h.0.mlp.c_fc.weight"), (std::vector<int64_t>{C, F}));
    EXPECT_EQ(f.shape("transformer.h.0.mlp.c_proj.weight"), (std::vector<int64_t>{F, C}));
    EXPECT_EQ(f.find("lm_head.weight"), nullptr);  // tied
    std::vector<float> w((size_t)3 * C * C);
    f.read_f32("transformer.h.1.attn.c_attn.weight", w.data(), w.size());
    const float* qkvw1 = g.params.qkvw + (size_t)3 * C * C;
    // one element spelled out: our row 70 (a k row: 64 <= 70 < 128), column 5 is the file's [5][70]
    EXPECT_EQ(w[(size_t)5 * 3 * C + 70], qkvw1[(size_t)70 * C + 5]);
    EXPECT_NE(qkvw1[(size_t)70 * C + 5], 0.0f);
    for (int r = 0; r < 3 * C; r++)
        for (int c = 0; c < C; c++) ASSERT_EQ(w[(size_t)c * 3 * C + r], qkvw1[(size_t)r * C + c]);

    ModelConfig lc = model_config_load(Arch::LLAMA, "llama-tiny");
    Llama<CpuBackend> l(be, lc);
    l.init_weights(7);
    l.save_weights(dir / "l.safetensors");
    SafeTensorsFile h = safetensors_open(dir / "l.safetensors");
    C = lc.channels;
    F = lc.hidden;
    EXPECT_EQ(h.shape("model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{C, C}));
    EXPECT_EQ(h.shape("model.layers.0.mlp.up_proj.weight"), (std::vector<int64_t>{F, C}));
    EXPECT_EQ(h.shape("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{C, F}));
    EXPECT_EQ(h.shape("model.norm.weight"), (std::vector<int64_t>{C}));
    EXPECT_EQ(h.shape("lm_head.weight"), (std::vector<int64_t>{32000, C}));
    std::vector<float> k((size_t)C * C);
    h.read_f32("model.layers.0.self_attn.k_proj.weight", k.data(), k.size());
    // k_proj is rows C..2C of our fused qkv block, not transposed
    EXPECT_EQ(std::memcmp(k.data(), l.params.qkvw + (size_t)C * C, k.size() * sizeof(float)), 0);
    std::vector<float> up((size_t)F * C);
    h.read_f32("model.layers.0.mlp.up_proj.weight", up.data(), up.size());
    EXPECT_EQ(std::memcmp(up.data(), l.params.fcw + (size_t)F * C, up.size() * sizeof(float)), 0);

    // an embedding of one row stays 2-D, as transformers' nn.Embedding(1, C) is (GPT2Model's wpe at n_positions 1;
    // it was saved 1-D, which from_pretrained refuses as a size mismatch), and loads back
    ModelConfig one = gc;
    one.max_seq_len = 1;
    GPT2<CpuBackend> g1(be, one), g1b(be, one);
    g1.init_weights(7);
    g1.save_weights(dir / "g1.safetensors");
    EXPECT_EQ(safetensors_open(dir / "g1.safetensors").shape("transformer.wpe.weight"),
              (std::vector<int64_t>{1, gc.channels}));
    g1b.load_weights(dir / "g1.safetensors");
    EXPECT_EQ(std::memcmp(g1.params_memory, g1b.params_memory, g1.param_buffer_numel * sizeof(float)), 0);
}

// config.json's initializer_range is the std of a fresh model's weights, as Hugging Face's _init_weights draws them
// (GPT-2's residual projections / sqrt(2L)); it was read for RoBERTa only, so a GPT-2 or LLaMA config of 0.5 trained
// from N(0, 0.02) with exit 0. The sample std of thousands of N(0, s) draws is within 5% of s (its relative standard
// error is 1/sqrt(2n) < 1%, so 5% is more than 5 standard errors).
TEST(TrainerWeights, InitializerRangeIsTheFreshWeightsStd) {
    TempDir dir;
    CpuBackend be;
    auto sample_std = [](const float* p, size_t n) {
        double s = 0;
        for (size_t i = 0; i < n; i++) s += (double)p[i] * p[i];
        return std::sqrt(s / (double)n);
    };
    auto check = [&](const auto& m, const char* name, double want) {
        for (const auto& s : m.param_specs)
            if (s.name == name) {
                ASSERT_GT(s.numel, 4000u) << name;
                EXPECT_NEAR(sample_std(m.params_memory + s.offset, s.numel), want, 0.05 * want) << name;
                return;
            }
        ADD_FAILURE() << "no " << name;
    };
    ModelConfig g =
        model_config_load(Arch::GPT2, derived_config(dir, GPT2_FIXTURE, {{"initializer_range", 0.5}}, "g.json"));
    EXPECT_FLOAT_EQ(g.init_std, 0.5f);
    GPT2<CpuBackend> gm(be, g);
    gm.init_weights(1);
    check(gm, "qkvw", 0.5);
    check(gm, "fcprojw", 0.5 / std::sqrt(2.0 * g.num_layers));
    ModelConfig l =
        model_config_load(Arch::LLAMA, derived_config(dir, LLAMA_FIXTURE, {{"initializer_range", 0.5}}, "l.json"));
    Llama<CpuBackend> lm(be, l);
    lm.init_weights(1);
    check(lm, "qkvw", 0.5);
    EXPECT_USER_ERROR(
        model_config_load(Arch::LLAMA, derived_config(dir, LLAMA_FIXTURE, {{"initializer_range", 0}}, "z.json")),
        "initializer_range", "is out of range");
}

// A bf16 run's checkpoint holds its fp32 master weights beside model.safetensors' bf16 roundings of them; a resume on a
// backend with fp32 weights takes the master weights (it loaded the roundings: up to half a bf16 ulp of every
// weight's progress lost, without a word). Each optimizer's name for them; a checkpoint without them, or whose
// "master" is no F32 tensor of at most the buffer, changes nothing.
TEST(TrainerWeights, AResumeOnFp32WeightsTakesTheCheckpointsMasterWeights) {
    CpuBackend be;
    const size_t n = 6;
    const std::vector<float> master = {0.1f, -1.25f, 3.0e-3f, 7.5f, -2.0f, 1.0f / 3};
    for (const char* name : {"adamw.master", "muon.master", "adam_mini.master", "master"}) {
        float* params = (float*)be.alloc(n * sizeof(float));
        TrainState st;
        st.add_f32("adamw.m", std::vector<float>(n, 9.0f).data(), {(int64_t)n});  // (not a master: not taken)
        st.add_f32(name, master.data(), {(int64_t)n - 1});  // (an optimizer's may end before the buffer's padding)
        testing::internal::CaptureStdout();
        weights_from_master_weights(be, st, params, n);
        EXPECT_NE(testing::internal::GetCapturedStdout().find(
                      std::string("notice: the checkpoint holds its run's fp32 master weights ('") + name + "')"),
                  std::string::npos) << name;
        EXPECT_EQ(std::vector<float>(params, params + n - 1), std::vector<float>(master.begin(), master.end() - 1))
            << name;
        EXPECT_EQ(params[n - 1], 0.0f) << name;
        be.free(params, n * sizeof(float));
    }
    float* params = (float*)be.alloc(n * sizeof(float));
    TrainState none, too_long;
    none.add_f32("adamw.m", master.data(), {(int64_t)n});
    too_long.add_f32("adamw.master", std::vector<float>(n + 1, 1.0f).data(), {(int64_t)n + 1});
    for (const TrainState* st : {&none, &too_long}) {
        testing::internal::CaptureStdout();
        weights_from_master_weights(be, *st, params, n);
        EXPECT_EQ(testing::internal::GetCapturedStdout(), "");
        EXPECT_EQ(std::vector<float>(params, params + n), std::vector<float>(n, 0.0f));
    }
    be.free(params, n * sizeof(float));
}
