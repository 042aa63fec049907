// Named model sizes and Hugging Face config.json parsing.
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"  // refuse_special_file
#include "common/strings.h"  // join

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

static ModelConfig gpt2(const char* name, int L, int NH, int C, int maxT) {
    ModelConfig c;
    c.arch = Arch::GPT2;
    c.name = name;
    c.vocab_size = 50257;
    c.num_layers = L;
    c.num_heads = NH;
    c.channels = C;
    c.hidden = 4 * C;
    c.max_seq_len = maxT;
    c.norm_eps = 1e-5f;
    c.tied_embeddings = true;
    return c;
}

static ModelConfig llama(const char* name, int C, int F, int NH, int L) {
    ModelConfig c;
    c.arch = Arch::LLAMA;
    c.name = name;
    c.vocab_size = 32000;
    c.num_layers = L;
    c.num_heads = NH;
    c.channels = C;
    c.hidden = F;
    c.max_seq_len = 1024;  // GaLore's configs: max_sequence_length 1024
    c.norm_eps = 1e-6f;
    c.rope_theta = 10000.0f;
    c.tied_embeddings = false;
    return c;
}

// RoBERTa (RobertaConfig of roberta-base: <pad> = 1, positions 2 ... 513, one token type, exact-erf GeLU).
// num_labels 2 is Hugging Face's default; a fine-tuning run sets its task's count.
static ModelConfig roberta(const char* name, int V, int L, int NH, int C, int F, int maxT) {
    ModelConfig c;
    c.arch = Arch::ROBERTA;
    c.name = name;
    c.vocab_size = V;
    c.num_layers = L;
    c.num_heads = NH;
    c.channels = C;
    c.hidden = F;
    c.max_seq_len = maxT;
    c.norm_eps = 1e-5f;
    c.type_vocab_size = 1;
    c.pad_token_id = 1;
    c.num_labels = 2;
    c.init_std = 0.02f;
    return c;
}

const char* arch_name(Arch a) {
    switch (a) {
        case Arch::GPT2: return "GPT-2";
        case Arch::LLAMA: return "LLaMA";
        case Arch::ROBERTA: return "RoBERTa";
    }
    return "?";
}

static std::vector<ModelConfig> named_configs() {
    return {
        gpt2("gpt2-124m", 12, 12, 768, 1024),  // d12
        gpt2("gpt2-355m", 24, 16, 1024, 1024), // d24
        gpt2("gpt2-mini", 4, 4, 128, 256),     // CPU demo size (make train without a GPU)
        gpt2("gpt2-tiny", 2, 4, 64, 64),       // tests
        // LLaMA: GaLore repository configs (hidden / intermediate / heads / layers); 35M from the PRAC paper.
        llama("llama-35m", 384, 1024, 8, 6),
        llama("llama-60m", 512, 1376, 8, 8),
        llama("llama-130m", 768, 2048, 12, 12),
        llama("llama-350m", 1024, 2736, 16, 24),
        llama("llama-1b", 2048, 5461, 32, 24),  // the paper's table swaps heads and layers; this is the code config
        llama("llama-mini", 128, 352, 4, 4),    // CPU demo size
        llama("llama-tiny", 64, 176, 4, 2),     // tests
        roberta("roberta-base", 50265, 12, 12, 768, 3072, 512),
        roberta("roberta-tiny", 1000, 2, 4, 64, 256, 64),  // tests
    };
}

std::vector<std::string> model_config_names(Arch arch) {
    std::vector<std::string> names;
    for (const ModelConfig& c : named_configs())
        if (c.arch == arch) names.push_back(c.name);
    return names;
}

std::string named_config_like(const ModelConfig& c) {
    for (const ModelConfig& n : named_configs())
        if (n.arch == c.arch && n.num_layers == c.num_layers && n.num_heads == c.num_heads &&
            n.channels == c.channels && n.hidden == c.hidden && n.vocab_size == c.vocab_size)
            return n.name;
    return "";
}

// Numbers of a config.json are range-checked where they are read: a size must be a whole number in [lo, hi] (a
// float such as 12.5, 1e20 or an integer beyond int are errors naming the key, never a truncated or wrapped value),
// a real number finite and in (lo, hi], also as a float. JSON has no NaN; nlohmann refuses 1e999 while parsing.
static long long whole_number(const nlohmann::json& v, const char* key, const std::string& path, long long lo,
                              long long hi) {
    if (!v.is_number()) fail("%s: key \"%s\" is not a number", path.c_str(), key);
    double d = v.get<double>();
    bool whole = v.is_number_integer() || (std::isfinite(d) && d == std::floor(d));
    if (!whole) fail("%s: key \"%s\" = %s must be a whole number", path.c_str(), key, v.dump().c_str());
    // an integer beyond long long arrives as unsigned or as a double: compare as double first
    if (d < (double)lo || d > (double)hi || (v.is_number_unsigned() && v.get<unsigned long long>() > (unsigned long long)hi))
        fail("%s: key \"%s\" = %s is out of range [%lld, %lld]", path.c_str(), key, v.dump().c_str(), lo, hi);
    return v.is_number_integer() ? v.get<long long>() : (long long)d;
}
static int need_int(const nlohmann::json& j, const char* key, const std::string& path, long long lo, long long hi) {
    if (!j.contains(key) || j[key].is_null())
        fail("%s: missing key \"%s\"\n---> HINT: is this a Hugging Face config.json of the right model type?",
             path.c_str(), key);
    return (int)whole_number(j[key], key, path, lo, hi);
}
static int opt_int(const nlohmann::json& j, const char* key, int def, const std::string& path, long long lo,
                   long long hi) {
    if (!j.contains(key) || j[key].is_null()) return def;
    return (int)whole_number(j[key], key, path, lo, hi);
}
// A real number in (lo, hi], finite.
static float opt_real(const nlohmann::json& j, const char* key, float def, const std::string& path, double lo,
                      double hi) {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) fail("%s: key \"%s\" must be a number", path.c_str(), key);
    double d = j[key].get<double>();
    if (!std::isfinite(d) || !(d > lo) || d > hi || !((float)d > lo))  // 1e-50 > 0, but it is 0 as a float
        fail("%s: key \"%s\" = %s is out of range (%g, %g]", path.c_str(), key, j[key].dump().c_str(), lo, hi);
    return (float)d;
}
// Bounds of the sizes (each also bounded by validate_config's products): far beyond any model this trainer runs,
// small enough that no size product overflows 64 bits.
static const long long MAX_WIDTH = 1 << 16, MAX_HIDDEN = 1 << 20, MAX_LAYERS = 1 << 12, MAX_POSITIONS = 1 << 20;
static const long long MAX_VOCAB = 1 << 16;  // uint16 token shards
static std::string opt_str(const nlohmann::json& j, const char* key, const std::string& def, const std::string& path) {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_string()) fail("%s: key \"%s\" must be a string", path.c_str(), key);
    return j[key].get<std::string>();
}
static bool opt_bool(const nlohmann::json& j, const char* key, bool def, const std::string& path) {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_boolean()) fail("%s: key \"%s\" must be true or false", path.c_str(), key);
    return j[key].get<bool>();
}
// hidden_act, `def` when absent; a null is refused, as transformers 5 refuses it (a strict str field), where
// opt_str's null-means-absent would run a model the file does not describe
static std::string hidden_act(const nlohmann::json& j, const std::string& def, const std::string& path) {
    if (j.contains("hidden_act") && j["hidden_act"].is_null())
        fail("%s: hidden_act is null; give the activation (\"%s\") or leave the key out", path.c_str(), def.c_str());
    return opt_str(j, "hidden_act", def, path);
}

// RobertaConfig keys (transformers' defaults where a key may be absent). Only what RobertaForSequenceClassification
// computes with our kernels is accepted: absolute positions, the exact GeLU, an encoder (no decoder, no
// cross-attention), single-label classification or one-output regression. The dropout rates are read only to say
// that the trainer has no dropout (docs/DESIGN.md section 4.2).
// Fails unless a config's model_type is `want`: a `kind` config is what `who` needs. The hint: `other_hint` for a
// config of `other_type`, else the model_type to write (a config without one: it was said as model_type "").
static void need_model_type(const std::string& path, const std::string& type, const char* want, const char* kind,
                            const char* who, const char* other_type, const char* other_hint) {
    if (type == want) return;
    fail("%s: %s, but %s needs a %s config (model_type \"%s\")\n---> HINT: %s", path.c_str(),
         type.empty() ? "it has no model_type" : format("model_type is \"%s\"", type.c_str()).c_str(), who, kind, want,
         type == other_type ? other_hint
                            : format("if it is a %s config, its model_type is \"%s\"", kind, want).c_str());
}

// A dropout rate key of a config (def when absent or null), in [0, 1]: read only to say that the trainers have no
// dropout (docs/DESIGN.md section 4.2).
static float dropout_rate(const nlohmann::json& j, const char* key, float def, const std::string& path) {
    if (!j.contains(key) || j[key].is_null()) return def;
    const double p = j[key].is_number() ? j[key].get<double>() : -1;
    if (!(p >= 0 && p <= 1))
        fail("%s: key \"%s\" = %s is not a dropout rate in [0, 1]", path.c_str(), key, j[key].dump().c_str());
    return (float)p;
}

static void roberta_from_json(ModelConfig& c, const nlohmann::json& j, const std::string& type, const std::string& path) {
    need_model_type(path, type, "roberta", "RoBERTa", "the encoder", type.empty() ? "(none)" : type.c_str(),
                    "pass the config.json of a roberta-base-layout directory");  // (any other type: this hint)
    c.vocab_size = need_int(j, "vocab_size", path, 1, MAX_VOCAB);
    c.num_layers = need_int(j, "num_hidden_layers", path, 1, MAX_LAYERS);
    c.num_heads = need_int(j, "num_attention_heads", path, 1, MAX_WIDTH);
    c.channels = need_int(j, "hidden_size", path, 1, MAX_WIDTH);
    c.hidden = need_int(j, "intermediate_size", path, 1, MAX_HIDDEN);
    c.pad_token_id = opt_int(j, "pad_token_id", 1, path, 0, MAX_VOCAB - 1);
    int positions = need_int(j, "max_position_embeddings", path, 1, MAX_POSITIONS);
    if (positions <= c.pad_token_id + 1)
        fail("%s: max_position_embeddings = %d leaves no position after the padding offset (pad_token_id %d + 1)",
             path.c_str(), positions, c.pad_token_id);
    c.max_seq_len = positions - c.pad_token_id - 1;  // RoBERTa's positions start at pad_token_id + 1
    c.type_vocab_size = opt_int(j, "type_vocab_size", 2, path, 1, MAX_VOCAB);
    c.norm_eps = opt_real(j, "layer_norm_eps", 1e-12f, path, 0.0, 1.0);
    c.init_std = opt_real(j, "initializer_range", 0.02f, path, 0.0, 1e3);
    const float hidden_dropout = dropout_rate(j, "hidden_dropout_prob", 0.1f, path);
    c.config_dropout = std::max({hidden_dropout, dropout_rate(j, "attention_probs_dropout_prob", 0.1f, path),
                                 dropout_rate(j, "classifier_dropout", hidden_dropout, path)});
    std::string act = hidden_act(j, "gelu", path);
    if (act != "gelu")
        fail("%s: hidden_act \"%s\" is not supported; RoBERTa uses the exact erf GeLU (\"gelu\")", path.c_str(),
             act.c_str());
    std::string pos = opt_str(j, "position_embedding_type", "absolute", path);
    if (pos != "absolute")
        fail("%s: position_embedding_type \"%s\" is not supported (only \"absolute\")", path.c_str(), pos.c_str());
    if (opt_bool(j, "is_decoder", false, path) || opt_bool(j, "add_cross_attention", false, path))
        fail("%s: is_decoder / add_cross_attention are set: only the bidirectional encoder is supported", path.c_str());
    // HF: num_labels = len(id2label) when the config has one (save_pretrained writes it), else num_labels, else 2
    c.num_labels = opt_int(j, "num_labels", 2, path, 1, MAX_VOCAB);
    if (j.contains("id2label") && j["id2label"].is_object() && !j["id2label"].empty()) {
        const nlohmann::json& names = j["id2label"];
        c.num_labels = (int)names.size();
        // the classes' names in the head's order, when every id 0..n-1 names one (else none: LABEL_0, ...)
        for (int i = 0; i < c.num_labels; i++) {
            auto it = names.find(std::to_string(i));
            if (it == names.end() || !it->is_string()) {
                c.label_names.clear();
                break;
            }
            c.label_names.push_back(it->get<std::string>());
        }
    }
    std::string problem = opt_str(j, "problem_type", "", path);
    if (problem == "multi_label_classification" || (problem == "regression" && c.num_labels != 1) ||
        (problem == "single_label_classification" && c.num_labels == 1))
        fail("%s: problem_type \"%s\" with %d labels is not supported (single-label classification with 2 or "
             "more labels, or regression with 1)", path.c_str(), problem.c_str(), c.num_labels);
}

// A config (from `path`, for messages) as a JSON object. (Reading a directory throws too: "not valid JSON".)
static nlohmann::json json_object_of(std::istream& in, const std::string& path) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        fail("%s: not valid JSON (%s)", path.c_str(), e.what());
    }
    if (!j.is_object()) fail("%s: expected a JSON object", path.c_str());
    return j;
}

// A model config file's JSON object (UserError: a special file, unreadable, not a JSON object).
static nlohmann::json read_config_file(const std::string& path) {
    refuse_special_file(path, "model config");
    std::ifstream f(path);
    if (!f) fail("cannot open model config %s", path.c_str());
    return json_object_of(f, path);
}

// Whether a --model value that names no model is taken as a file: a path, or a .json name.
static bool names_a_file(const std::string& name_or_path) {
    return name_or_path.find('/') != std::string::npos || name_or_path.find(".json") != std::string::npos;
}

static ModelConfig config_from_json(Arch arch, const std::string& path) {
    const nlohmann::json j = read_config_file(path);
    std::string type = opt_str(j, "model_type", "", path);
    ModelConfig c;
    c.name = path;
    c.arch = arch;
    if (arch == Arch::ROBERTA) {
        roberta_from_json(c, j, type, path);
    } else if (arch == Arch::GPT2) {
        need_model_type(path, type, "gpt2", "GPT-2", "train_gpt2", "llama", "LLaMA configs go to ./train_llama");
        c.vocab_size = need_int(j, "vocab_size", path, 1, MAX_VOCAB);
        c.num_layers = need_int(j, "n_layer", path, 1, MAX_LAYERS);
        c.num_heads = need_int(j, "n_head", path, 1, MAX_WIDTH);
        c.channels = need_int(j, "n_embd", path, 1, MAX_WIDTH);
        c.hidden = opt_int(j, "n_inner", 4 * c.channels, path, 1, MAX_HIDDEN);
        c.max_seq_len = need_int(j, "n_positions", path, 1, MAX_POSITIONS);
        c.norm_eps = opt_real(j, "layer_norm_epsilon", 1e-5f, path, 0.0, 1.0);
        c.init_std = opt_real(j, "initializer_range", 0.02f, path, 0.0, 1e3);  // a fresh model's (it was ignored)
        std::string act = opt_str(j, "activation_function", "gelu_new", path);
        if (act != "gelu_new" && act != "gelu_pytorch_tanh")
            fail("%s: activation_function \"%s\" is not supported; GPT-2 uses the tanh GeLU (\"gelu_new\")",
                 path.c_str(), act.c_str());
        c.tied_embeddings = opt_bool(j, "tie_word_embeddings", true, path);
        if (!c.tied_embeddings) fail("%s: untied GPT-2 embeddings are not supported", path.c_str());
        // (transformers' GPT2Config: 0.1 each when absent)
        c.config_dropout = std::max({dropout_rate(j, "resid_pdrop", 0.1f, path),
                                     dropout_rate(j, "embd_pdrop", 0.1f, path),
                                     dropout_rate(j, "attn_pdrop", 0.1f, path)});
        // other attention scalings than 1/sqrt(head_dim) (ignored, they gave other logits with exit 0)
        if (!opt_bool(j, "scale_attn_weights", true, path))
            fail("%s: scale_attn_weights false is not supported (attention scores are scaled by 1/sqrt(head_dim))",
                 path.c_str());
        if (opt_bool(j, "scale_attn_by_inverse_layer_idx", false, path))
            fail("%s: scale_attn_by_inverse_layer_idx is not supported (GPT-2's attention scale is 1/sqrt(head_dim) "
                 "in every layer)", path.c_str());
    } else {
        need_model_type(path, type, "llama", "LLaMA", "train_llama", "gpt2", "GPT-2 configs go to ./train_gpt2");
        c.vocab_size = need_int(j, "vocab_size", path, 1, MAX_VOCAB);
        c.config_dropout = dropout_rate(j, "attention_dropout", 0.0f, path);  // (transformers' LlamaConfig: 0)
        c.num_layers = need_int(j, "num_hidden_layers", path, 1, MAX_LAYERS);
        c.num_heads = need_int(j, "num_attention_heads", path, 1, MAX_WIDTH);
        c.channels = need_int(j, "hidden_size", path, 1, MAX_WIDTH);
        c.hidden = need_int(j, "intermediate_size", path, 1, MAX_HIDDEN);
        c.max_seq_len = opt_int(j, "max_position_embeddings",
                                opt_int(j, "max_sequence_length", 2048, path, 1, MAX_POSITIONS), path, 1, MAX_POSITIONS);
        c.norm_eps = opt_real(j, "rms_norm_eps", 1e-6f, path, 0.0, 1.0);
        c.init_std = opt_real(j, "initializer_range", 0.02f, path, 0.0, 1e3);
        int kv = opt_int(j, "num_key_value_heads", c.num_heads, path, 1, MAX_WIDTH);
        int head_dim = opt_int(j, "head_dim", c.channels / std::max(c.num_heads, 1), path, 1, MAX_WIDTH);
        if (c.num_heads > 0 && head_dim * c.num_heads != c.channels)
            fail("%s: head_dim %d times %d heads differs from hidden_size %d (only head_dim = hidden_size / heads "
                 "is supported)", path.c_str(), head_dim, c.num_heads, c.channels);
        if (kv != c.num_heads)
            fail("%s: num_key_value_heads = %d differs from num_attention_heads = %d: grouped-query attention "
                 "is not supported", path.c_str(), kv, c.num_heads);
        // transformers < 5 keeps rope_theta at top level; 5.x moves it into rope_parameters, and an older file's
        // rope_scaling replaces rope_parameters whole (its theta, or else the top level's: as AutoConfig reads it)
        c.rope_theta = 10000.0f;
        c.rope_theta = opt_real(j, "rope_theta", c.rope_theta, path, 0.0, 1e12);
        const char* key =
            j.contains("rope_scaling") && !j["rope_scaling"].is_null() ? "rope_scaling" : "rope_parameters";
        if (j.contains(key) && !j[key].is_null()) {
            const nlohmann::json& r = j[key];
            if (!r.is_object()) fail("%s: key \"%s\" must be an object", path.c_str(), key);
            std::string rt = opt_str(r, "rope_type", opt_str(r, "type", "default", path), path);
            if (rt != "default")
                fail("%s: %s.rope_type \"%s\" is not supported (only plain RoPE)", path.c_str(), key, rt.c_str());
            c.rope_theta = opt_real(r, "rope_theta", c.rope_theta, path, 0.0, 1e12);
        }
        std::string act = hidden_act(j, "silu", path);
        if (act != "silu") fail("%s: hidden_act \"%s\" is not supported (LLaMA uses silu)", path.c_str(), act.c_str());
        if (opt_bool(j, "attention_bias", false, path) || opt_bool(j, "mlp_bias", false, path))
            fail("%s: attention_bias/mlp_bias are not supported (LLaMA has no biases)", path.c_str());
        c.tied_embeddings = opt_bool(j, "tie_word_embeddings", false, path);
        if (c.tied_embeddings) fail("%s: tied LLaMA embeddings are not supported", path.c_str());
    }
    return c;
}

ModelConfig model_config_load(Arch arch, const std::string& name_or_path) {
    ModelConfig c;
    bool found = false;
    for (const ModelConfig& n : named_configs())
        if (n.name == name_or_path) {
            if (n.arch != arch)
                fail("model \"%s\" is a %s model\n---> HINT: use ./%s", n.name.c_str(), arch_name(n.arch),
                     n.arch == Arch::GPT2 ? "train_gpt2" : n.arch == Arch::LLAMA ? "train_llama" : "finetune_roberta");
            c = n;
            found = true;
        }
    if (!found) {
        if (!names_a_file(name_or_path))
            fail("unknown model \"%s\"\n---> HINT: use one of: %s; or a path to a Hugging Face config.json",
                 name_or_path.c_str(), join(model_config_names(arch)).c_str());
        c = config_from_json(arch, name_or_path);
    }
    c.padded_vocab_size = round_up(c.vocab_size, 128);
    validate_config(c);
    return c;
}

Arch model_config_arch(const std::string& name_or_path) {
    for (const ModelConfig& n : named_configs())
        if (n.name == name_or_path) return n.arch;
    if (!names_a_file(name_or_path))
        fail("unknown model \"%s\"\n---> HINT: use a named model or a path to a Hugging Face config.json",
             name_or_path.c_str());
    const std::string type = opt_str(read_config_file(name_or_path), "model_type", "", name_or_path);
    if (type == "gpt2") return Arch::GPT2;
    if (type == "llama") return Arch::LLAMA;
    if (type == "roberta") return Arch::ROBERTA;
    fail("%s: %s, none of \"gpt2\", \"llama\", \"roberta\"", name_or_path.c_str(),
         type.empty() ? "it has no model_type" : format("model_type is \"%s\"", type.c_str()).c_str());
}

void validate_config(const ModelConfig& c) {
    const char* n = c.name.c_str();
    if (c.vocab_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.channels <= 0 || c.hidden <= 0 ||
        c.max_seq_len <= 0)
        fail("model %s: every size must be positive (V=%d L=%d NH=%d C=%d F=%d maxT=%d)", n, c.vocab_size,
             c.num_layers, c.num_heads, c.channels, c.hidden, c.max_seq_len);
    if (c.channels % c.num_heads != 0)
        fail("model %s: %d heads do not divide the width %d", n, c.num_heads, c.channels);
    if (c.arch == Arch::LLAMA && c.head_dim() % 2 != 0)
        fail("model %s: head dim %d is odd; rotate-half RoPE needs an even head dim", n, c.head_dim());
    if (c.vocab_size > 65536)
        fail("model %s: vocabulary %d exceeds 65536, the range of the uint16 token shards", n, c.vocab_size);
    if (!(c.norm_eps > 0) || !(c.norm_eps < 1)) fail("model %s: norm eps must be in (0, 1) (got %g)", n, c.norm_eps);
    if (c.arch == Arch::ROBERTA) {
        if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size)
            fail("model %s: pad_token_id %d is outside the vocabulary [0, %d)", n, c.pad_token_id, c.vocab_size);
        if (c.type_vocab_size < 1 || c.num_labels < 1)
            fail("model %s: type_vocab_size (%d) and num_labels (%d) must be at least 1", n, c.type_vocab_size,
                 c.num_labels);
    }
    if (!(c.init_std > 0 && std::isfinite(c.init_std)))
        fail("model %s: initializer_range must be positive and finite (got %g)", n, c.init_std);
    if (c.arch == Arch::LLAMA && !(c.rope_theta > 0 && std::isfinite(c.rope_theta)))
        fail("model %s: rope theta must be positive and finite (got %g)", n, c.rope_theta);
    // the kernels index one weight matrix or one sequence's activations with 32-bit element counts
    const long long C = c.channels, limit = (1LL << 31) - 1;
    const long long sizes[] = {(long long)round_up(c.vocab_size, 128) * C, C * c.hidden, 3 * C * C,
                               (long long)(c.arch == Arch::ROBERTA ? c.position_rows() : c.max_seq_len) * C};
    for (long long sz : sizes)
        if (sz > limit)
            fail("model %s: a weight matrix of %lld elements (V=%d C=%d F=%d maxT=%d) exceeds 2^31 - 1, the most the "
                 "kernels index", n, sz, c.vocab_size, c.channels, c.hidden, c.max_seq_len);
}

std::vector<std::pair<std::string, std::string>> model_config_rows(const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> r;
    r.push_back({"model", c.name});
    r.push_back({"architecture", arch_name(c.arch)});
    r.push_back({"vocab_size (padded)", format("%d (%d)", c.vocab_size, c.padded_vocab_size)});
    r.push_back({"num_layers", std::to_string(c.num_layers)});
    r.push_back({"num_heads (head dim)", format("%d (%d)", c.num_heads, c.head_dim())});
    r.push_back({"channels", std::to_string(c.channels)});
    r.push_back({"mlp hidden", std::to_string(c.hidden)});
    r.push_back({"max_seq_len", std::to_string(c.max_seq_len)});
    r.push_back({c.arch == Arch::LLAMA ? "rmsnorm eps" : "layernorm eps", format("%g", c.norm_eps)});
    if (c.arch == Arch::LLAMA) r.push_back({"rope theta", format("%g", c.rope_theta)});
    if (c.arch == Arch::ROBERTA) {
        r.push_back({"token types", std::to_string(c.type_vocab_size)});
        r.push_back({"pad token (position offset)", format("%d (%d)", c.pad_token_id, c.pad_token_id + 1)});
        r.push_back({"labels", c.num_labels == 1 ? "1 (regression, MSE)" : std::to_string(c.num_labels)});
    } else {
        r.push_back({"embeddings", c.tied_embeddings ? "tied" : "untied"});
    }
    return r;
}

// v as config.json holds it: the shortest decimal that reads back as the same float ("1e-05", not
// 9.99999974737875e-06; rope_theta 1234567, which six digits would make 1234570: another model)
static double json_float(float v) { return std::stod(float_text(v)); }

void write_hf_config(const std::string& path, const ModelConfig& c, const std::string& keep_keys_of) {
    nlohmann::json j;
    if (c.arch == Arch::GPT2) {
        j = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", c.vocab_size},
             {"n_positions", c.max_seq_len}, {"n_embd", c.channels}, {"n_layer", c.num_layers},
             {"n_head", c.num_heads}, {"n_inner", c.hidden}, {"activation_function", "gelu_new"},
             {"layer_norm_epsilon", json_float(c.norm_eps)}, {"tie_word_embeddings", true}, {"resid_pdrop", 0.0},
             {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"initializer_range", json_float(c.init_std)}};
    } else if (c.arch == Arch::ROBERTA) {
        nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
        for (int i = 0; i < c.num_labels; i++) {
            const std::string name = (int)c.label_names.size() == c.num_labels ? c.label_names[(size_t)i]
                                                                               : "LABEL_" + std::to_string(i);
            id2label[std::to_string(i)] = name;
            label2id[name] = i;
        }
        j = {{"model_type", "roberta"}, {"architectures", {"RobertaForSequenceClassification"}},
             {"vocab_size", c.vocab_size}, {"hidden_size", c.channels}, {"num_hidden_layers", c.num_layers},
             {"num_attention_heads", c.num_heads}, {"intermediate_size", c.hidden}, {"hidden_act", "gelu"},
             {"max_position_embeddings", c.position_rows()}, {"type_vocab_size", c.type_vocab_size},
             {"pad_token_id", c.pad_token_id}, {"layer_norm_eps", json_float(c.norm_eps)},
             {"initializer_range", json_float(c.init_std)}, {"position_embedding_type", "absolute"},
             {"id2label", id2label}, {"label2id", label2id}};
        if (c.num_labels == 1) j["problem_type"] = "regression";
    } else {
        j = {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"vocab_size", c.vocab_size},
             {"hidden_size", c.channels}, {"intermediate_size", c.hidden}, {"num_attention_heads", c.num_heads},
             {"num_key_value_heads", c.num_heads}, {"num_hidden_layers", c.num_layers},
             {"max_position_embeddings", c.max_seq_len}, {"rms_norm_eps", json_float(c.norm_eps)},
             {"rope_theta", json_float(c.rope_theta)}, {"initializer_range", json_float(c.init_std)},
             {"hidden_act", "silu"}, {"tie_word_embeddings", false}, {"attention_bias", false},
             {"mlp_bias", false}};
    }
    if (!keep_keys_of.empty()) {
        // what describes the base's head, task, file or code, not this model
        const std::set<std::string> not_kept = {"num_labels", "problem_type", "finetuning_task", "torch_dtype", "dtype",
                                                "transformers_version", "_name_or_path", "auto_map",
                                                "quantization_config"};
        // (a local: items() of a temporary would dangle)
        std::istringstream text(keep_keys_of);
        const nlohmann::json base = json_object_of(text, "the base model's config.json");
        for (const auto& [key, value] : base.items())
            if (!j.contains(key) && !not_kept.count(key)) j[key] = value;
    }
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        if (!f) fail("cannot write %s", tmp.c_str());
        f << j.dump(2) << "\n";
        f.close();  // (a write error of the last buffer shows here: a truncated file must not replace config.json)
        if (f.fail()) fail("cannot write %s (disk full?)", tmp.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename %s to %s", tmp.c_str(), path.c_str());
}
