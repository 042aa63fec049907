// Named model sizes and Hugging Face config.json parsing.
#include "model/config.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

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
    };
}

std::vector<std::string> model_config_names(Arch arch) {
    std::vector<std::string> names;
    for (const ModelConfig& c : named_configs())
        if (c.arch == arch) names.push_back(c.name);
    return names;
}

static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + v[i];
    return s;
}

// Reads a key that must be present and numeric.
template <typename T>
static T need(const nlohmann::json& j, const char* key, const std::string& path) {
    if (!j.contains(key) || j[key].is_null())
        fail("%s: missing key \"%s\"\n---> HINT: is this a Hugging Face config.json of the right model type?",
             path.c_str(), key);
    if (!j[key].is_number()) fail("%s: key \"%s\" is not a number", path.c_str(), key);
    return j[key].get<T>();
}

// Reads an optional key that must be a number when present (and not null).
template <typename T>
static T opt_num(const nlohmann::json& j, const char* key, T def, const std::string& path) {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_number()) fail("%s: key \"%s\" must be a number", path.c_str(), key);
    return j[key].get<T>();
}
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

static ModelConfig config_from_json(Arch arch, const std::string& path) {
    std::ifstream f(path);
    if (!f) fail("cannot open model config %s", path.c_str());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
        fail("%s: not valid JSON (%s)", path.c_str(), e.what());
    }
    if (!j.is_object()) fail("%s: expected a JSON object", path.c_str());
    std::string type = opt_str(j, "model_type", "", path);
    ModelConfig c;
    c.name = path;
    c.arch = arch;
    if (arch == Arch::GPT2) {
        if (type != "gpt2")
            fail("%s: model_type is \"%s\", but train_gpt2 needs a GPT-2 config (model_type \"gpt2\")"
                 "\n---> HINT: LLaMA configs go to ./train_llama", path.c_str(), type.c_str());
        c.vocab_size = need<int>(j, "vocab_size", path);
        c.num_layers = need<int>(j, "n_layer", path);
        c.num_heads = need<int>(j, "n_head", path);
        c.channels = need<int>(j, "n_embd", path);
        c.hidden = opt_num<int>(j, "n_inner", 4 * c.channels, path);
        c.max_seq_len = need<int>(j, "n_positions", path);
        c.norm_eps = opt_num<float>(j, "layer_norm_epsilon", 1e-5f, path);
        std::string act = opt_str(j, "activation_function", "gelu_new", path);
        if (act != "gelu_new" && act != "gelu_pytorch_tanh")
            fail("%s: activation_function \"%s\" is not supported; GPT-2 uses the tanh GeLU (\"gelu_new\")",
                 path.c_str(), act.c_str());
        c.tied_embeddings = opt_bool(j, "tie_word_embeddings", true, path);
        if (!c.tied_embeddings) fail("%s: untied GPT-2 embeddings are not supported", path.c_str());
    } else {
        if (type != "llama")
            fail("%s: model_type is \"%s\", but train_llama needs a LLaMA config (model_type \"llama\")"
                 "\n---> HINT: GPT-2 configs go to ./train_gpt2", path.c_str(), type.c_str());
        c.vocab_size = need<int>(j, "vocab_size", path);
        c.num_layers = need<int>(j, "num_hidden_layers", path);
        c.num_heads = need<int>(j, "num_attention_heads", path);
        c.channels = need<int>(j, "hidden_size", path);
        c.hidden = need<int>(j, "intermediate_size", path);
        c.max_seq_len = opt_num<int>(j, "max_position_embeddings", opt_num<int>(j, "max_sequence_length", 2048, path), path);
        c.norm_eps = opt_num<float>(j, "rms_norm_eps", 1e-6f, path);
        int kv = opt_num<int>(j, "num_key_value_heads", c.num_heads, path);
        int head_dim = opt_num<int>(j, "head_dim", c.channels / std::max(c.num_heads, 1), path);
        if (c.num_heads > 0 && head_dim * c.num_heads != c.channels)
            fail("%s: head_dim %d times %d heads differs from hidden_size %d (only head_dim = hidden_size / heads "
                 "is supported)", path.c_str(), head_dim, c.num_heads, c.channels);
        if (kv != c.num_heads)
            fail("%s: num_key_value_heads = %d differs from num_attention_heads = %d: grouped-query attention "
                 "is not supported", path.c_str(), kv, c.num_heads);
        // transformers < 5 keeps rope_theta at top level; 5.x moves it into rope_parameters.
        c.rope_theta = 10000.0f;
        c.rope_theta = opt_num<float>(j, "rope_theta", c.rope_theta, path);
        for (const char* key : {"rope_parameters", "rope_scaling"}) {
            if (!j.contains(key) || j[key].is_null()) continue;
            const nlohmann::json& r = j[key];
            if (!r.is_object()) fail("%s: key \"%s\" must be an object", path.c_str(), key);
            std::string rt = opt_str(r, "rope_type", opt_str(r, "type", "default", path), path);
            if (rt != "default")
                fail("%s: %s.rope_type \"%s\" is not supported (only plain RoPE)", path.c_str(), key, rt.c_str());
            c.rope_theta = opt_num<float>(r, "rope_theta", c.rope_theta, path);
        }
        std::string act = opt_str(j, "hidden_act", "silu", path);
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
                fail("model \"%s\" is a %s model\n---> HINT: use ./train_%s", n.name.c_str(),
                     n.arch == Arch::GPT2 ? "GPT-2" : "LLaMA", n.arch == Arch::GPT2 ? "gpt2" : "llama");
            c = n;
            found = true;
        }
    if (!found) {
        bool looks_like_file = name_or_path.find('/') != std::string::npos ||
                               name_or_path.find(".json") != std::string::npos;
        if (!looks_like_file)
            fail("unknown model \"%s\"\n---> HINT: use one of: %s; or a path to a Hugging Face config.json",
                 name_or_path.c_str(), join(model_config_names(arch)).c_str());
        c = config_from_json(arch, name_or_path);
    }
    c.padded_vocab_size = round_up(c.vocab_size, 128);
    validate_config(c);
    return c;
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
    if (!(c.norm_eps > 0)) fail("model %s: norm eps must be positive", n);
}

std::vector<std::pair<std::string, std::string>> model_config_rows(const ModelConfig& c) {
    std::vector<std::pair<std::string, std::string>> r;
    r.push_back({"model", c.name});
    r.push_back({"architecture", c.arch == Arch::GPT2 ? "GPT-2" : "LLaMA"});
    r.push_back({"vocab_size (padded)", format("%d (%d)", c.vocab_size, c.padded_vocab_size)});
    r.push_back({"num_layers", std::to_string(c.num_layers)});
    r.push_back({"num_heads (head dim)", format("%d (%d)", c.num_heads, c.head_dim())});
    r.push_back({"channels", std::to_string(c.channels)});
    r.push_back({"mlp hidden", std::to_string(c.hidden)});
    r.push_back({"max_seq_len", std::to_string(c.max_seq_len)});
    r.push_back({c.arch == Arch::GPT2 ? "layernorm eps" : "rmsnorm eps", format("%g", c.norm_eps)});
    if (c.arch == Arch::LLAMA) r.push_back({"rope theta", format("%g", c.rope_theta)});
    r.push_back({"embeddings", c.tied_embeddings ? "tied" : "untied"});
    return r;
}

void write_hf_config(const std::string& path, const ModelConfig& c) {
    nlohmann::json j;
    if (c.arch == Arch::GPT2) {
        j = {{"model_type", "gpt2"}, {"architectures", {"GPT2LMHeadModel"}}, {"vocab_size", c.vocab_size},
             {"n_positions", c.max_seq_len}, {"n_embd", c.channels}, {"n_layer", c.num_layers},
             {"n_head", c.num_heads}, {"n_inner", c.hidden}, {"activation_function", "gelu_new"},
             {"layer_norm_epsilon", std::stod(format("%g", c.norm_eps))}, {"tie_word_embeddings", true}, {"resid_pdrop", 0.0},
             {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
    } else {
        j = {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"vocab_size", c.vocab_size},
             {"hidden_size", c.channels}, {"intermediate_size", c.hidden}, {"num_attention_heads", c.num_heads},
             {"num_key_value_heads", c.num_heads}, {"num_hidden_layers", c.num_layers},
             {"max_position_embeddings", c.max_seq_len}, {"rms_norm_eps", std::stod(format("%g", c.norm_eps))}, {"rope_theta", std::stod(format("%g", c.rope_theta))},
             {"hidden_act", "silu"}, {"tie_word_embeddings", false}, {"attention_bias", false},
             {"mlp_bias", false}};
    }
    std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp);
        if (!f) fail("cannot write %s", tmp.c_str());
        f << j.dump(2) << "\n";
        if (!f) fail("cannot write %s", tmp.c_str());
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename %s to %s", tmp.c_str(), path.c_str());
}
