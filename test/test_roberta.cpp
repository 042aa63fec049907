// The RoBERTa encoder (model/roberta.h) against Hugging Face transformers: test/fixtures/roberta_tiny_{cls,reg}
// were written by test/reference/make_roberta_fixtures.py from the real RobertaForSequenceClassification (three
// classes with cross-entropy; one output with MSE), on a batch of 3 rows of 16, 11 and 7 real tokens (padding
// inside the batch). We load the same config.json and model.safetensors through our loaders and compare logits,
// loss, every parameter gradient and 3 AdamW steps; then padding invariance, save/load, load and batch errors,
// recompute, PRAC wiring and resume, the per-layer gradient hook and the planner.
//
// Tolerances as test_models.cpp (fp32 on both sides, different summation orders): 2e-5 relative to the tensor's
// largest magnitude for logits and gradients, 1e-5 absolute on the loss; the AdamW trajectory (lr 1e-3, 3 steps)
// within 1e-5 on the losses and 1e-5 on the final parameters (Adam's steps are ~lr each, rounding noise ~1e-7);
// the key biases, whose exact gradient is 0, are compared on their own terms (see the two checks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/safetensors.h"
#include "kernels/cpu_backend.h"
#include "model/roberta.h"
#include "prac/prac_state.h"
#include "test/model_test_util.h"
#include "test/test_files.h"
#include "test/test_util.h"
#include "train/optim_adamw.h"
#include "train/optimizers.h"  // OptimizerChoice
#include "train/planner.h"

namespace {

// The fixture's batch as an EncoderBatch (labels as floats: class indices or regression targets).
struct FixtureBatch {
    std::vector<int32_t> ids, mask;
    std::vector<float> labels;
    int B = 0, T = 0;
    explicit FixtureBatch(const SafeTensorsFile& ref) {
        ids = read_i32(ref, "input_ids");
        mask = read_i32(ref, "attention_mask");
        B = (int)ref.shape("input_ids")[0];
        T = (int)ref.shape("input_ids")[1];
        if (ref.get("labels").dtype == "I32")
            for (int32_t l : read_i32(ref, "labels")) labels.push_back((float)l);
        else
            labels = read_f32(ref, "labels");
    }
    EncoderBatch batch() const {
        EncoderBatch b;
        b.input_ids = ids.data();
        b.attention_mask = mask.data();
        b.labels = labels.data();
        return b;
    }
};

struct Loaded {
    SafeTensorsFile ref;
    ModelConfig cfg;
    CpuBackend be;
    Roberta<CpuBackend> model;
    FixtureBatch fb;
    Loaded(const char* dir, PracOptions prac = PracOptions(), Recompute rec = Recompute())
        : ref(safetensors_open(fixture(dir, "reference.safetensors"))),
          cfg(model_config_load(Arch::ROBERTA, fixture(dir, "config.json"))),
          model(be, cfg, prac, rec),
          fb(ref) {
        EXPECT_TRUE(model.load_weights(fixture(dir, "model.safetensors"))) << "the fixture has the head";
        model.allocate_activations(fb.B, fb.T);
    }
    std::vector<float> logits() {
        std::vector<float> out((size_t)fb.B * cfg.num_labels);
        model.logits(out.data());
        return out;
    }
    std::vector<float> grads() { return host_buffer<Roberta<CpuBackend>>(be, model.grads_memory, model.param_buffer_numel); }
    std::vector<float> params() { return host_buffer<Roberta<CpuBackend>>(be, model.params_memory, model.param_buffer_numel); }
};

void check_forward_backward(const char* dir) {
    SingleThreaded single;  // tiny models: see test_util.h
    Loaded m(dir);
    m.model.zero_grad();
    float loss = m.model.forward(m.fb.batch(), 1.0f / m.fb.B);
    m.model.backward();
    EXPECT_LT(rel_err(m.logits(), read_f32(m.ref, "logits")), 2e-5) << dir << " logits";
    EXPECT_NEAR(loss, read_f32(m.ref, "loss")[0], 1e-5) << dir << " loss";
    std::vector<float> grads = m.grads();
    int checked = 0;
    for (const HFTensor& t : m.model.hf_map()) {
        std::vector<float> ours = hf_tensor_values(t, grads.data());
        std::vector<float> theirs = read_f32(m.ref, "grad." + t.name);
        // The key bias's exact gradient is 0 (softmax is invariant to adding q·b_k to a whole row); both sides hold
        // rounding noise (~1e-7 of the layer's gradients). It is measured on the scale of the query bias's gradient.
        double floor = 1e-6;
        size_t at = t.name.find("key.bias");
        if (at != std::string::npos) {
            std::vector<float> q = read_f32(m.ref, "grad." + t.name.substr(0, at) + "query.bias");
            for (float v : q) floor = std::max(floor, (double)std::fabs(v));
        }
        EXPECT_LT(rel_err(ours, theirs, floor), 2e-5) << dir << " grad." << t.name;
        checked++;
    }
    int in_fixture = 0;
    for (const std::string& n : m.ref.names()) in_fixture += n.rfind("grad.", 0) == 0;
    EXPECT_EQ(checked, in_fixture) << dir << ": every HF parameter's gradient is compared";
    // the eval forward gives the training forward's logits and loss, and leaves no gradient
    m.model.zero_grad();
    EXPECT_EQ(m.model.eval_forward(m.fb.batch()), loss) << dir;
    EXPECT_LT(rel_err(m.logits(), read_f32(m.ref, "logits")), 2e-5) << dir << " eval logits";
}

// torch.optim.AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every parameter), constant lr,
// the same batch each step, no clipping
void check_training(const char* dir) {
    SingleThreaded single;
    Loaded m(dir);
    std::vector<ParamSpec> specs = m.model.param_specs;
    for (ParamSpec& s : specs) s.decay = true;  // torch decays every tensor it is given
    AdamW<CpuBackend> opt(m.be, m.model.param_buffer_numel, 0.9f, 0.999f, 1e-8f, 0.01f);
    std::vector<float> losses;
    for (int step = 0; step < 3; step++) {
        m.model.zero_grad();
        losses.push_back(m.model.forward(m.fb.batch(), 1.0f / m.fb.B));
        m.model.backward();
        opt.step(m.model.params_memory, m.model.grads_memory, specs, 1e-3f, 1.0f);
    }
    EXPECT_LT(max_abs_err(losses, read_f32(m.ref, "train.losses")), 1e-5) << dir << " losses";
    std::vector<float> params = m.params();
    for (const HFTensor& t : m.model.hf_map()) {
        // the key bias's gradient is pure rounding noise on both sides (see above), which Adam normalizes to steps
        // of up to ~lr: the two trajectories may part by up to 2 x 3 steps x lr there, and by rounding elsewhere
        double tol = t.name.find("key.bias") != std::string::npos ? 2 * 3 * 1e-3 : 1e-5;
        EXPECT_LT(max_abs_err(hf_tensor_values(t, params.data()), read_f32(m.ref, "final." + t.name)), tol)
            << dir << " final." << t.name;
    }
}

}  // namespace

TEST(RobertaVsHF, ClassificationLogitsLossAndEveryGradient) { check_forward_backward("roberta_tiny_cls"); }
TEST(RobertaVsHF, RegressionLogitsLossAndEveryGradient) { check_forward_backward("roberta_tiny_reg"); }
TEST(RobertaVsHF, ClassificationThreeAdamWSteps) { check_training("roberta_tiny_cls"); }
TEST(RobertaVsHF, RegressionThreeAdamWSteps) { check_training("roberta_tiny_reg"); }

// transformers' create_position_ids_from_input_ids, by hand: pad = 1, positions count non-pad tokens from pad + 1
TEST(RobertaPositions, PaddingOffsetAsTransformers) {
    const int32_t ids[] = {0, 5, 6, 2, 1, 1,   // right padding
                           0, 1, 7, 2, 1, 9};  // pad ids inside the row keep position 1 and do not count
    const int32_t want[] = {2, 3, 4, 5, 1, 1, 2, 1, 3, 4, 1, 5};
    int32_t pos[12];
    roberta_position_ids(pos, ids, 2, 6, 1);
    for (int i = 0; i < 12; i++) EXPECT_EQ(pos[i], want[i]) << i;
}

// Padding changes nothing for the real tokens: the shortest fixture row alone, unpadded (B = 1, T = 7), gives the
// logits of its padded row in the batch.
TEST(RobertaPadding, ShortRowAloneEqualsItsPaddedRow) {
    SingleThreaded single;
    Loaded m("roberta_tiny_cls");
    m.model.eval_forward(m.fb.batch());
    std::vector<float> batch_logits = m.logits();
    int b = 2, n = 0;
    while (n < m.fb.T && m.fb.mask[(size_t)b * m.fb.T + n]) n++;
    ASSERT_LT(n, m.fb.T) << "row 2 has padding";
    Roberta<CpuBackend> alone(m.be, m.cfg);
    alone.load_weights(fixture("roberta_tiny_cls", "model.safetensors"));
    alone.allocate_activations(1, n);
    EncoderBatch one;
    one.input_ids = m.fb.ids.data() + (size_t)b * m.fb.T;
    one.attention_mask = m.fb.mask.data() + (size_t)b * m.fb.T;
    alone.eval_forward(one);
    std::vector<float> row(m.cfg.num_labels);
    alone.logits(row.data());
    std::vector<float> padded(batch_logits.begin() + b * m.cfg.num_labels, batch_logits.begin() + (b + 1) * m.cfg.num_labels);
    EXPECT_LT(rel_err(row, padded), 1e-6);
}

// ---- Hugging Face out and back in ------------------------------------------------------------------------------
using RobertaFiles = TmpDirTest;

// save_pretrained writes a config that reads back as the same model, and weights that give the same logits bitwise
TEST_F(RobertaFiles, SavedModelLoadsBackToTheSameLogits) {
    SingleThreaded single;
    Loaded m("roberta_tiny_reg");
    std::vector<float> specs_before = m.params();
    m.model.eval_forward(m.fb.batch());
    std::vector<float> before = m.logits();
    m.model.save_pretrained(file("out"));
    ModelConfig c = model_config_load(Arch::ROBERTA, file("out/config.json"));
    EXPECT_EQ(c.vocab_size, m.cfg.vocab_size);
    EXPECT_EQ(c.num_layers, m.cfg.num_layers);
    EXPECT_EQ(c.num_heads, m.cfg.num_heads);
    EXPECT_EQ(c.channels, m.cfg.channels);
    EXPECT_EQ(c.hidden, m.cfg.hidden);
    EXPECT_EQ(c.max_seq_len, m.cfg.max_seq_len);
    EXPECT_EQ(c.position_rows(), 18);  // the fixture's max_position_embeddings
    EXPECT_EQ(c.type_vocab_size, m.cfg.type_vocab_size);
    EXPECT_EQ(c.pad_token_id, m.cfg.pad_token_id);
    EXPECT_EQ(c.num_labels, 1);
    EXPECT_EQ(c.norm_eps, m.cfg.norm_eps);
    CpuBackend be;
    Roberta<CpuBackend> back(be, c);
    EXPECT_TRUE(back.load_pretrained(file("out")));
    back.allocate_activations(m.fb.B, m.fb.T);
    back.eval_forward(m.fb.batch());
    std::vector<float> after(before.size());
    back.logits(after.data());
    EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
    // the file has exactly the Hugging Face names of the fixture (no pooler, no extras)
    std::vector<std::string> ours = safetensors_open(file("out/model.safetensors")).names();
    std::vector<std::string> theirs = safetensors_open(fixture("roberta_tiny_reg", "model.safetensors")).names();
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    EXPECT_EQ(ours, theirs);
    // ... with transformers' shapes (vectors 1-D; the one-row token-type table and one-label out_proj 2-D)
    SafeTensorsFile saved = safetensors_open(file("out/model.safetensors"));
    SafeTensorsFile orig = safetensors_open(fixture("roberta_tiny_reg", "model.safetensors"));
    for (const std::string& n : theirs)
        if (saved.find(n)) EXPECT_EQ(saved.shape(n), orig.shape(n)) << n;
}

namespace {
// The fixture's tensors, to rewrite with changes.
struct TensorCopy {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
};
std::vector<TensorCopy> fixture_tensors(const char* dir) {
    SafeTensorsFile f = safetensors_open(fixture(dir, "model.safetensors"));
    std::vector<TensorCopy> out;
    for (const std::string& n : f.names()) out.push_back({n, f.shape(n), read_f32(f, n)});
    return out;
}
void write_tensors(const std::string& path, const std::vector<TensorCopy>& ts) {
    std::vector<SafeTensorWrite> w;
    for (const TensorCopy& t : ts) w.push_back({t.name, "F32", t.shape, t.data.data()});
    safetensors_write(path, w, {{"format", "pt"}});
}
}  // namespace

TEST_F(RobertaFiles, LoadErrorsNameTheTensor) {
    ModelConfig cfg = model_config_load(Arch::ROBERTA, fixture("roberta_tiny_cls", "config.json"));
    CpuBackend be;
    Roberta<CpuBackend> model(be, cfg);
    std::vector<TensorCopy> good = fixture_tensors("roberta_tiny_cls");
    auto find = [&](std::vector<TensorCopy>& ts, const std::string& n) -> TensorCopy& {
        for (TensorCopy& t : ts)
            if (t.name == n) return t;
        throw std::logic_error(n);
    };
    {  // a misspelt name: the expected one is missing
        std::vector<TensorCopy> ts = good;
        find(ts, "roberta.encoder.layer.1.attention.self.key.weight").name = "roberta.encoder.layer.1.attention.self.keys.weight";
        write_tensors(file("renamed.safetensors"), ts);
        EXPECT_USER_ERROR(model.load_weights(file("renamed.safetensors")), "roberta.encoder.layer.1.attention.self.key.weight",
                          "missing");
    }
    {  // a wrong shape
        std::vector<TensorCopy> ts = good;
        TensorCopy& t = find(ts, "roberta.encoder.layer.0.intermediate.dense.weight");
        t.shape = {32, 64};
        write_tensors(file("shape.safetensors"), ts);
        EXPECT_USER_ERROR(model.load_weights(file("shape.safetensors")), "roberta.encoder.layer.0.intermediate.dense.weight",
                          "[32, 64]", "[64, 32]");
    }
    {  // a head for another label count
        std::vector<TensorCopy> ts = good;
        TensorCopy& t = find(ts, "classifier.out_proj.weight");
        t.shape = {1, 96};
        write_tensors(file("head.safetensors"), ts);
        EXPECT_USER_ERROR(model.load_weights(file("head.safetensors")), "classifier.out_proj.weight", "[3, 32]");
        // ... unless the caller asks for a fresh head (fine-tuning a checkpoint of another task)
        EXPECT_FALSE(model.load_weights(file("head.safetensors"), 7, true));
    }
    {  // an unknown tensor (a third layer)
        std::vector<TensorCopy> ts = good;
        TensorCopy extra = find(ts, "roberta.encoder.layer.1.output.dense.bias");
        extra.name = "roberta.encoder.layer.2.output.dense.bias";
        ts.push_back(extra);
        write_tensors(file("extra.safetensors"), ts);
        EXPECT_USER_ERROR(model.load_weights(file("extra.safetensors")), "unexpected tensor",
                          "roberta.encoder.layer.2.output.dense.bias");
    }
    {  // half a head
        std::vector<TensorCopy> ts;
        for (const TensorCopy& t : good)
            if (t.name != "classifier.dense.bias") ts.push_back(t);
        write_tensors(file("halfhead.safetensors"), ts);
        EXPECT_USER_ERROR(model.load_weights(file("halfhead.safetensors")), "classifier.dense.bias", "missing");
    }
}

// A pretrained encoder (roberta-base's own file: no classifier, with a pooler, a masked-LM head and the
// position_ids buffer; here without the "roberta." prefix, as RobertaModel saves) loads as transformers loads it:
// the extras ignored, the encoder exact, the head fresh N(0, initializer_range) with zero biases.
TEST_F(RobertaFiles, PretrainedEncoderGetsAFreshHead) {
    std::vector<TensorCopy> ts;
    for (TensorCopy t : fixture_tensors("roberta_tiny_cls")) {
        if (t.name.rfind("classifier.", 0) == 0) continue;
        t.name = t.name.substr(std::string("roberta.").size());
        ts.push_back(t);
    }
    std::vector<float> c32(32, 0.5f), cc(32 * 32, 0.25f), vc(96 * 32, 0.1f), v(96, 0.0f), pos(18, 0.0f);
    ts.push_back({"pooler.dense.weight", {32, 32}, cc});
    ts.push_back({"pooler.dense.bias", {32}, c32});
    ts.push_back({"lm_head.dense.weight", {32, 32}, cc});
    ts.push_back({"lm_head.layer_norm.weight", {32}, c32});
    ts.push_back({"lm_head.decoder.weight", {96, 32}, vc});
    ts.push_back({"lm_head.bias", {96}, v});
    write_tensors(file("pretrained.safetensors"), ts);
    ModelConfig cfg = model_config_load(Arch::ROBERTA, fixture("roberta_tiny_cls", "config.json"));
    cfg.num_labels = 2;  // the task's count, not the checkpoint's
    CpuBackend be;
    Roberta<CpuBackend> model(be, cfg);
    EXPECT_FALSE(model.load_weights(file("pretrained.safetensors"), 5));
    std::vector<float> p = host_buffer<Roberta<CpuBackend>>(be, model.params_memory, model.param_buffer_numel);
    SafeTensorsFile src = safetensors_open(fixture("roberta_tiny_cls", "model.safetensors"));
    for (const HFTensor& t : model.hf_map("roberta.", false))
        EXPECT_EQ(hf_tensor_values(t, p.data()), read_f32(src, t.name)) << t.name;
    for (const ParamSpec& s : model.param_specs) {
        if (!Roberta<CpuBackend>::is_head(s.name)) continue;
        double sum = 0, sq = 0;
        for (size_t i = 0; i < s.numel; i++) sum += p[s.offset + i], sq += (double)p[s.offset + i] * p[s.offset + i];
        if (!s.decay) {
            EXPECT_EQ(sq, 0.0) << s.name << ": biases start at 0";
            continue;
        }
        // initializer_range 0.2: numel·sd²/0.2² is chi-square with numel - 1 degrees of freedom, so the sample std of
        // 1024 (64) draws is within 15% (45%) of it but with probability 1.5e-11 (4.4e-7), under the suite's 1e-6
        // (40% for the 64 was 5.8e-6)
        double sd = std::sqrt(sq / s.numel - (sum / s.numel) * (sum / s.numel));
        EXPECT_NEAR(sd, 0.2, s.numel > 100 ? 0.03 : 0.09) << s.name;
    }
}

// Config errors name the key and what is supported
TEST_F(RobertaFiles, ConfigErrors) {
    std::string good = read_bytes(fixture("roberta_tiny_cls", "config.json"));
    auto with = [&](const std::string& from, const std::string& to) {
        std::string s = good;
        size_t at = s.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        s.replace(at, from.size(), to);
        write_bytes(file("config.json"), s);
        return file("config.json");
    };
    EXPECT_USER_ERROR(model_config_load(Arch::ROBERTA, with("\"model_type\": \"roberta\"", "\"model_type\": \"bert\"")),
                      "model_type", "\"roberta\"");
    EXPECT_USER_ERROR(model_config_load(Arch::ROBERTA, with("\"hidden_act\": \"gelu\"", "\"hidden_act\": \"gelu_new\"")),
                      "hidden_act", "gelu_new");
    EXPECT_USER_ERROR(model_config_load(Arch::ROBERTA, with("\"hidden_act\": \"gelu\"", "\"hidden_act\": null")),
                      "hidden_act is null", "(\"gelu\")");
    EXPECT_USER_ERROR(model_config_load(Arch::ROBERTA, with("\"max_position_embeddings\": 18", "\"max_position_embeddings\": 2")),
                      "max_position_embeddings", "padding offset");
    EXPECT_USER_ERROR(model_config_load(Arch::ROBERTA, with("\"is_decoder\": false", "\"is_decoder\": true")),
                      "is_decoder");
    ModelConfig c = model_config_load(Arch::ROBERTA, fixture("roberta_tiny_cls", "config.json"));
    EXPECT_EQ(c.max_seq_len, 16);  // 18 positions - pad 1 - 1
    EXPECT_EQ(c.num_labels, 3);
    EXPECT_EQ(c.type_vocab_size, 1);
    EXPECT_FLOAT_EQ(c.init_std, 0.2f);
    EXPECT_USER_ERROR(model_config_load(Arch::ROBERTA, "gpt2-tiny"), "GPT-2");
}

// Bad batches: clear errors, nothing computed
TEST(RobertaBatch, ErrorsNameTheRowAndWhatIsWrong) {
    SingleThreaded single;
    ModelConfig cfg = model_config_load(Arch::ROBERTA, "roberta-tiny");
    cfg.num_labels = 3;
    CpuBackend be;
    Roberta<CpuBackend> model(be, cfg);
    model.init_weights(1);
    model.allocate_activations(2, 4);
    std::vector<int32_t> ids = {0, 5, 2, 1, 0, 6, 7, 2}, mask = {1, 1, 1, 0, 1, 1, 1, 1}, types(8, 0);
    std::vector<float> labels = {2, 0};
    EncoderBatch b;
    b.input_ids = ids.data();
    b.attention_mask = mask.data();
    b.labels = labels.data();
    EXPECT_GT(model.forward(b, 0.5f), 0.0f);  // the good batch runs
    std::vector<int32_t> holes = {1, 0, 1, 0, 1, 1, 1, 1};
    b.attention_mask = holes.data();
    EXPECT_USER_ERROR(model.forward(b, 0.5f), "row 0", "right-padded");
    std::vector<int32_t> empty = {0, 0, 0, 0, 1, 1, 1, 1};
    b.attention_mask = empty.data();
    EXPECT_USER_ERROR(model.forward(b, 0.5f), "row 0", "no real token");
    b.attention_mask = mask.data();
    std::vector<float> bad = {3, 0};
    b.labels = bad.data();
    EXPECT_USER_ERROR(model.forward(b, 0.5f), "label 3", "[0, 3)");
    b.labels = labels.data();
    types[5] = 1;  // RoBERTa has one token type
    b.token_type_ids = types.data();
    EXPECT_USER_ERROR(model.forward(b, 0.5f), "token type 1", "[0, 1)");
    b.token_type_ids = nullptr;
    ids[3] = 1000;
    EXPECT_USER_ERROR(model.forward(b, 0.5f), "outside the vocabulary");
    // unlabelled rows (NaN) count in neither the loss nor the gradient
    ids[3] = 1;
    std::vector<float> one = {2, NAN};
    b.labels = one.data();
    float l1 = model.eval_forward(b);
    std::vector<float> logits(6);
    model.logits(logits.data());
    double m = std::max({logits[0], logits[1], logits[2]}), z = 0;
    for (int k = 0; k < 3; k++) z += std::exp(logits[k] - m);
    EXPECT_NEAR(l1, m + std::log(z) - logits[2], 1e-6) << "the mean over the one labelled row";
}

// ---- recompute and PRAC ----------------------------------------------------------------------------------------
namespace {
double rel_scale(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, (double)std::fabs(x));
    return m;
}
struct StepsRun {
    std::vector<float> losses, grads;
};
// two training steps on the classification fixture (AdamW in between), with the given PRAC and recompute options
StepsRun two_steps(const PracOptions& prac, Recompute rec, std::initializer_list<int> uncompress = {}) {
    SafeTensorsFile ref = safetensors_open(fixture("roberta_tiny_cls", "reference.safetensors"));
    ModelConfig cfg = model_config_load(Arch::ROBERTA, fixture("roberta_tiny_cls", "config.json"));
    CpuBackend be;
    Roberta<CpuBackend> model(be, cfg, prac, rec);
    for (int s : uncompress) model.sites[s].dims = SiteDims();
    model.load_weights(fixture("roberta_tiny_cls", "model.safetensors"));
    FixtureBatch fb(ref);
    model.allocate_activations(fb.B, fb.T);
    AdamW<CpuBackend> opt(be, model.param_buffer_numel, 0.9f, 0.999f, 1e-8f, 0.01f);
    StepsRun r;
    for (int step = 0; step < 2; step++) {
        model.zero_grad();
        model.sched.begin_step(prac, step);
        r.losses.push_back(model.forward(fb.batch(), 1.0f / fb.B));
        model.backward();
        r.grads = host_buffer<Roberta<CpuBackend>>(be, model.grads_memory, model.param_buffer_numel);
        opt.step(model.params_memory, model.grads_memory, model.param_specs, 1e-3f, 1.0f);
    }
    return r;
}
bool bitwise(const StepsRun& a, const StepsRun& b) {
    return a.losses == b.losses && a.grads.size() == b.grads.size() &&
           std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)) == 0;
}
using R = Roberta<CpuBackend>;
}  // namespace

// What backward recomputes instead of saving gives the same bits (the recomputing ops are deterministic and see
// the same inputs, including, at level 2, the block input x rebuilt from the previous LN2 or the embedding LN)
TEST(RobertaRecompute, BitwiseEqualToStored) {
    SingleThreaded single;  // many tiny steps: see test_util.h
    PracOptions none;
    StepsRun r0 = two_steps(none, Recompute());
    EXPECT_TRUE(bitwise(two_steps(none, Recompute(1)), r0)) << "recompute 1";
    EXPECT_TRUE(bitwise(two_steps(none, Recompute(2)), r0)) << "recompute 2";
    EXPECT_TRUE(bitwise(two_steps(none, Recompute(2, true)), r0)) << "recompute 2 + attention output";
    // PRAC on the linear sites: recompute 1 takes fch_gelu out of PRAC, as the stored run without that site
    PracOptions lin;
    lin.mode = PracMode::PRAC;
    lin.nonlinear = false;
    lin.t1 = lin.t2 = 1;
    lin.linear_r1_abs = lin.linear_r2_abs = 2;  // the paper's fine-tuning ranks, absolute
    StepsRun p0 = two_steps(lin, Recompute(), {R::FCH_GELU});
    EXPECT_FALSE(bitwise(p0, r0)) << "PRAC on x and h changed nothing: the next check would be vacuous";
    EXPECT_TRUE(bitwise(two_steps(lin, Recompute(1)), p0)) << "prac-linear recompute 1";
}

// Only the linear sites compressed (the paper's fine-tuning: r1 = r2 = 2, absolute): the forward and every
// activation gradient stay exact, so the loss and every parameter gradient except the weights whose input is a
// linear site (qkv, fc, fcproj) are bitwise those of mode none, and those three differ.
TEST(RobertaPrac, LinearSitesChangeOnlyTheirWeightGradients) {
    SingleThreaded single;
    PracOptions lin;
    lin.mode = PracMode::PRAC;
    lin.nonlinear = false;
    lin.t1 = lin.t2 = 1;
    lin.linear_r1_abs = lin.linear_r2_abs = 2;
    SafeTensorsFile ref = safetensors_open(fixture("roberta_tiny_cls", "reference.safetensors"));
    ModelConfig cfg = model_config_load(Arch::ROBERTA, fixture("roberta_tiny_cls", "config.json"));
    CpuBackend be;
    Roberta<CpuBackend> a(be, cfg), b(be, cfg, lin);
    FixtureBatch fb(ref);
    for (Roberta<CpuBackend>* m : {&a, &b}) {
        m->load_weights(fixture("roberta_tiny_cls", "model.safetensors"));
        m->allocate_activations(fb.B, fb.T);
        m->zero_grad();
        m->sched.begin_step(lin, 0);
    }
    for (const auto& s : b.sites) EXPECT_EQ(s.compressed(), s.cls == SiteClass::LINEAR) << s.name;
    EXPECT_EQ(a.forward(fb.batch(), 1.0f / fb.B), b.forward(fb.batch(), 1.0f / fb.B));
    a.backward();
    b.backward();
    for (size_t i = 0; i < a.param_specs.size(); i++) {
        const ParamSpec& s = a.param_specs[i];
        bool same = std::memcmp(a.grads_memory + s.offset, b.grads_memory + s.offset, s.numel * sizeof(float)) == 0;
        bool estimated = s.name == "qkvw" || s.name == "fcw" || s.name == "fcprojw";
        EXPECT_EQ(same, !estimated) << s.name;
    }
}

// The nonlinear sites too, where backward reads them: when a site's rank covers all N rows (N <= r1, so its basis
// spans the rows of X) PAC reconstructs every saved tensor exactly up to rounding, and the gradient is the exact
// one; a site saved from or restored into the wrong tensor would not be. Ranks 2 + 2 on 48 rows do change it.
TEST(RobertaPrac, SitesCoveringAllRowsReproduceTheExactGradient) {
    SingleThreaded single;
    ModelConfig cfg = model_config_load(Arch::ROBERTA, "roberta-tiny");
    cfg.num_labels = 3;
    std::vector<int32_t> ids = {0, 17, 2, 0, 5, 1}, mask = {1, 1, 1, 1, 1, 0};  // N = 6, the second row padded
    std::vector<float> labels = {2, 0};
    EncoderBatch batch;
    batch.input_ids = ids.data();
    batch.attention_mask = mask.data();
    batch.labels = labels.data();
    std::vector<ParamSpec> specs;
    auto run = [&](const PracOptions& o) {
        CpuBackend be;
        Roberta<CpuBackend> m(be, cfg, o);
        m.init_weights(11);
        m.allocate_activations(2, 3);
        m.zero_grad();
        m.sched.begin_step(o, 0);
        float loss = m.forward(batch, 0.5f);
        m.backward();
        std::vector<float> g = host_buffer<Roberta<CpuBackend>>(be, m.grads_memory, m.param_buffer_numel);
        g.push_back(loss);
        for (const auto& s : m.sites) EXPECT_EQ(s.compressed(), o.mode != PracMode::NONE) << s.name;
        specs = m.param_specs;
        return g;
    };
    // the largest error of any one tensor, relative to that tensor's scale (the lower layers' gradients are
    // smaller than the head's: a global scale would hide them)
    auto worst = [&](const std::vector<float>& a, const std::vector<float>& b) {
        double w = std::fabs(a.back() - b.back()) / std::fabs(b.back());  // the loss
        for (const ParamSpec& s : specs) {
            std::vector<float> x(a.begin() + s.offset, a.begin() + s.offset + s.numel);
            std::vector<float> y(b.begin() + s.offset, b.begin() + s.offset + s.numel);
            w = worst_of(w, rel_err(x, y, 1e-3 * rel_scale(b)));
        }
        return w;
    };
    PracOptions none, pac;
    pac.mode = PracMode::PAC;
    pac.refresh = PracRefresh::EXACT;
    pac.linear_r1_abs = pac.nonlinear_r1_abs = 8;  // >= N = 6
    pac.linear_r2_abs = pac.nonlinear_r2_abs = 0;
    std::vector<float> exact = run(none), covered = run(pac);
    // "up to rounding": Q1 is the fp32 eigenvectors of the Gram matrix XᵀX, whose rounding grows with cond(X)²
    // (measured 1.8e-5 here, OpenBLAS on x86-64); 1e-4 keeps a 5x margin for another BLAS, and stays 10x below the
    // 1e-3 by which ranks 2 + 2 must change the gradient (below), so a wrong site restore cannot hide under it
    EXPECT_LT(worst(covered, exact), 1e-4);
    std::printf("[ info     ] rank-covered PAC vs exact: worst per-tensor relative error %.2e\n", worst(covered, exact));
    PracOptions low;
    low.mode = PracMode::PRAC;
    low.t1 = low.t2 = 1;
    low.linear_r1_abs = low.linear_r2_abs = low.nonlinear_r1_abs = low.nonlinear_r2_abs = 2;
    StepsRun r = two_steps(low, Recompute()), e = two_steps(PracOptions(), Recompute());
    EXPECT_GT(rel_err(r.grads, e.grads), 1e-3) << "ranks 2 + 2 should change the gradient";
    for (float v : r.losses) EXPECT_TRUE(std::isfinite(v));
}

// ---- memory planner -----------------------------------------------------------------------------------------------
// The plan is the model's own tensor lists: planned activation and basis bytes equal the CPU backend's allocation,
// with and without PRAC and recompute.
TEST(RobertaPlanner, PlannedBytesEqualCpuAllocations) {
    SingleThreaded single;
    ModelConfig cfg = model_config_load(Arch::ROBERTA, "roberta-tiny");
    for (PracMode mode : {PracMode::NONE, PracMode::PRAC})
        for (int level : {0, 1}) {
            PracOptions prac;
            prac.mode = mode;
            prac.linear_r1_abs = prac.linear_r2_abs = 2;
            CpuBackend be;
            Roberta<CpuBackend> model(be, cfg, prac, Recompute(level));
            size_t before = be.live_bytes;
            model.allocate_activations(3, 24);
            size_t allocated = be.live_bytes - before;
            MemoryPlan p = plan_memory(cfg, prac, 3, 24, PlanTarget::CPU_FP32, nullptr, Recompute(level));
            size_t planned = 0;
            for (const char* k : {"inputs", "saved_exact", "saved_linear", "saved_nonlinear", "transient", "loss",
                                  "prac_bases"})
                planned += p.bytes(k);
            EXPECT_EQ(planned, allocated) << "mode " << (int)mode << " recompute " << level;
            EXPECT_EQ(p.num_parameters, model.num_parameters);
            EXPECT_EQ(p.bytes("weights"), model.param_buffer_numel * 4);
        }
    // every optimizer has a rule for every RoBERTa parameter (RSO's sites are the linear-layer inputs by role)
    for (const char* kind : {"adamw", "adam-mini", "muon", "galore", "rso"}) {
        OptimizerChoice o;
        o.kind = kind;
        PracOptions none;
        none.rso_rank = rso_rank_of(o, cfg);
        EXPECT_GT(plan_memory(cfg, none, 2, 16, PlanTarget::CPU_FP32, &o).bytes("optimizer_state"), 0u) << kind;
    }
}

// The fine-tuning setting of the paper's Table 5 (roberta-base, batch 16, length 128 here, CUDA bf16), by hand: PRAC
// on the linear sites with r1 = r2 = 2 stores (N, 4) per linear site instead of (N, C), (N, C), (N, F), and adds the
// bases (C, 4), (C, 4), (F, 4) per layer; the nonlinear sites are untouched. Each tensor is 256-byte aligned.
TEST(RobertaPlanner, LinearSiteBytesByHand) {
    ModelConfig cfg = model_config_load(Arch::ROBERTA, "roberta-base");
    const size_t B = 16, T = 128, N = B * T, L = 12, C = 768, F = 3072, bf = 2;
    auto al = [](size_t bytes) { return align_up(bytes, TENSOR_ALIGN); };
    PracOptions none, lin;
    lin.mode = PracMode::PRAC;
    lin.nonlinear = false;
    lin.linear_r1_abs = lin.linear_r2_abs = 2;
    MemoryPlan p0 = plan_memory(cfg, none, B, T, PlanTarget::CUDA_BF16);
    MemoryPlan p1 = plan_memory(cfg, lin, B, T, PlanTarget::CUDA_BF16);
    EXPECT_EQ(p0.bytes("saved_linear"), 2 * al(L * N * C * bf) + al(L * N * F * bf));
    EXPECT_EQ(p0.bytes("saved_nonlinear"), 2 * al(L * N * C * bf) + al(L * N * F * bf));
    EXPECT_EQ(p1.bytes("saved_linear"), 3 * al(L * N * 4 * bf));
    EXPECT_EQ(p1.bytes("saved_nonlinear"), p0.bytes("saved_nonlinear"));
    EXPECT_EQ(p1.bytes("prac_bases"), 2 * al(L * C * 4 * bf) + al(L * F * 4 * bf));
    // RobertaModel(roberta-base) has 124,645,632 parameters with its pooler (768² + 768), which the classification
    // model drops for the head: dense (768² + 768) and out_proj (2 x 768 + 2)
    EXPECT_EQ(p0.num_parameters, 124645632u - (768u * 768 + 768) + (768u * 768 + 768) + (2 * 768 + 2));
}

// Data parallelism's per-layer hook (train/grad_sync.h): backward reports layers L-1 .. 0, then -1; each reported
// range of layer_param_ranges (the head, token types and embedding norm in the last one) is final when reported
// (bitwise its value at the end of backward), layer 0's does not change before its report, and the ranges cover
// every parameter once.
TEST(RobertaLayerGradHook, ReportsEachLayerWhenFinal) {
    SingleThreaded single;
    for (PracMode mode : {PracMode::NONE, PracMode::PRAC}) {
        ModelConfig cfg = model_config_load(Arch::ROBERTA, "roberta-tiny");
        PracOptions prac;
        prac.mode = mode;
        prac.linear_r1_abs = prac.linear_r2_abs = 2;
        CpuBackend be;
        Roberta<CpuBackend> m(be, cfg, prac);
        m.init_weights(3);
        const int B = 2, T = 8, L = cfg.num_layers;
        m.allocate_activations(B, T);
        std::vector<int32_t> ids = {0, 11, 12, 13, 14, 15, 16, 2, 0, 21, 22, 2, 1, 1, 1, 1};
        std::vector<int32_t> mask = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0};
        std::vector<float> labels = {1, 0};
        EncoderBatch batch;
        batch.input_ids = ids.data();
        batch.attention_mask = mask.data();
        batch.labels = labels.data();
        std::vector<std::vector<ElemRange>> ranges = layer_param_ranges(m.param_specs, L);
        size_t covered = 0;
        for (const auto& rs : ranges)
            for (const ElemRange& r : rs) covered += r.numel;
        EXPECT_EQ(covered, m.num_parameters);
        auto gather = [&](int k) {
            std::vector<float> v;
            for (const ElemRange& r : ranges[k])
                v.insert(v.end(), m.grads_memory + r.offset, m.grads_memory + r.offset + r.numel);
            return v;
        };
        std::vector<std::vector<float>> at_hook(L + 1);
        std::vector<int> order;
        bool lower_touched = false;
        m.zero_grad();
        m.sched.begin_step(prac, 0);
        std::vector<float> before_lower;  // layer 0 after micro-batch 0: unchanged until its report
        for (int micro = 0; micro < 2; micro++) {
            m.forward(batch, 0.25f);
            if (micro == 1) {
                before_lower = gather(0);
                m.on_layer_grads = [&](int l) {
                    order.push_back(l);
                    at_hook[l < 0 ? L : l] = gather(l < 0 ? L : l);
                    if (l > 0 && gather(0) != before_lower) lower_touched = true;
                };
            }
            m.backward();
            m.on_layer_grads = nullptr;
        }
        std::vector<int> want;
        for (int l = L - 1; l >= -1; l--) want.push_back(l);
        EXPECT_EQ(order, want);
        EXPECT_FALSE(lower_touched);
        for (int k = 0; k <= L; k++) EXPECT_EQ(at_hook[k], gather(k)) << "range " << k << " changed after its report";
    }
}

// Resume (the fine-tuning CLI's checkpoints): weights saved in Hugging Face layout plus the PRAC state
// (prac/prac_state.h) restore a model that takes the next step, with its fresh random draw, bit for bit like the
// model that kept running.
TEST_F(RobertaFiles, RestoredModelContinuesBitwise) {
    SingleThreaded single;
    SafeTensorsFile ref = safetensors_open(fixture("roberta_tiny_cls", "reference.safetensors"));
    ModelConfig cfg = model_config_load(Arch::ROBERTA, fixture("roberta_tiny_cls", "config.json"));
    FixtureBatch fb(ref);
    PracOptions prac;
    prac.mode = PracMode::PRAC;
    prac.t1 = prac.t2 = 1;  // every step refreshes, so step 3 draws from the restored counters
    prac.linear_r1_abs = prac.linear_r2_abs = prac.nonlinear_r1_abs = prac.nonlinear_r2_abs = 2;
    CpuBackend be;
    Roberta<CpuBackend> a(be, cfg, prac), b(be, cfg, prac);
    a.load_weights(fixture("roberta_tiny_cls", "model.safetensors"));
    a.allocate_activations(fb.B, fb.T);
    b.allocate_activations(fb.B, fb.T);
    for (int step = 0; step < 3; step++) {
        a.zero_grad();
        a.sched.begin_step(prac, step);
        a.forward(fb.batch(), 1.0f / fb.B);
        a.backward();
        for (size_t i = 0; i < a.param_buffer_numel; i++) a.params_memory[i] -= 0.01f * a.grads_memory[i];
    }
    a.save_weights(file("w.safetensors"));
    PracStateBuffers buf;
    std::vector<SafeTensorWrite> tensors;
    prac_state_tensors(be, a.sites, buf, tensors);
    safetensors_write(file("prac.safetensors"), tensors, {});
    b.load_weights(file("w.safetensors"));
    prac_state_load(be, b.sites, safetensors_open(file("prac.safetensors")));
    ASSERT_EQ(0, std::memcmp(a.params_memory, b.params_memory, a.param_buffer_numel * sizeof(float)));
    for (Roberta<CpuBackend>* m : {&a, &b}) {
        m->zero_grad();
        m->sched.begin_step(prac, 3);
        m->forward(fb.batch(), 1.0f / fb.B);
        m->backward();
    }
    EXPECT_EQ(0, std::memcmp(a.grads_memory, b.grads_memory, a.param_buffer_numel * sizeof(float)));
    // a fresh model without the state draws differently: the comparison above is not vacuous
    Roberta<CpuBackend> c(be, cfg, prac);
    c.load_weights(file("w.safetensors"));
    c.allocate_activations(fb.B, fb.T);
    c.zero_grad();
    c.sched.begin_step(prac, 3);
    c.forward(fb.batch(), 1.0f / fb.B);
    c.backward();
    EXPECT_NE(0, std::memcmp(a.grads_memory, c.grads_memory, a.param_buffer_numel * sizeof(float)));
}
