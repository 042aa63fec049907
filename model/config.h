// Model configurations: the named GPT-2 and LLaMA sizes, tiny test sizes, and Hugging Face config.json files.
#pragma once
#include <string>
#include <vector>

enum class Arch { GPT2, LLAMA, ROBERTA };
const char* arch_name(Arch a);  // "GPT-2", "LLaMA", "RoBERTa"

struct ModelConfig {
    Arch arch = Arch::GPT2;
    std::string name;           // e.g. "gpt2-124m", or the config file path
    int vocab_size = 0;         // V: real vocabulary
    int padded_vocab_size = 0;  // Vp: V rounded up for alignment (embedding / head rows beyond V stay unused)
    int num_layers = 0;         // L
    int num_heads = 0;          // NH
    int channels = 0;           // C
    int hidden = 0;             // F: MLP width (GPT-2 4C; LLaMA intermediate_size)
    int hidden_align = 1;       // LLaMA, storage only: the (N, F) activations' rows start every hidden_stride()
                                // elements, F rounded up to a multiple of this (--hidden-align; 1: stride F). The
                                // model, its weights and checkpoints do not change (docs/DESIGN.md "Row strides")
    int max_seq_len = 0;        // GPT-2: rows of wpe; LLaMA: longest T the RoPE table is built for; RoBERTa:
                                // longest T (wpe has max_seq_len + pad_token_id + 1 rows, see position_rows)
    float norm_eps = 0;         // LayerNorm 1e-5 / RMSNorm 1e-6
    float rope_theta = 0;       // LLaMA only
    bool tied_embeddings = false;  // GPT-2: the head reuses wte
    // RoBERTa only (model/roberta.h; Hugging Face RobertaConfig keys in brackets)
    int type_vocab_size = 0;  // rows of the token-type embedding [type_vocab_size]
    int pad_token_id = 0;     // <pad>: the position offset and the embeddings' padding_idx [pad_token_id]
    int num_labels = 0;       // classes of the head (1: regression, MSE) [id2label / num_labels]
    std::vector<std::string> label_names;  // the classes' names in the head's order, read and written as id2label
                                           // (a fine-tuned GLUE head: the task's, as run_glue writes them); empty:
                                           // LABEL_0, LABEL_1, ... [id2label]
    // The largest dropout rate a config.json sets, with transformers' defaults where a key is absent, read only to say
    // that the trainers have no dropout. RoBERTa: [hidden_dropout_prob, attention_probs_dropout_prob,
    // classifier_dropout] (0.1; a null classifier_dropout is the hidden one); GPT-2: [resid_pdrop, embd_pdrop,
    // attn_pdrop] (0.1); LLaMA: [attention_dropout] (0)
    float config_dropout = 0;
    float init_std = 0.02f;   // N(0, init_std) of fresh weights (GPT-2, LLaMA, RoBERTa's head) [initializer_range]

    int head_dim() const { return channels / num_heads; }
    int hidden_stride() const { return (hidden + hidden_align - 1) / hidden_align * hidden_align; }
    // RoBERTa's position table: positions pad + 1 ... pad + max_seq_len, and pad itself for <pad> tokens
    int position_rows() const { return max_seq_len + pad_token_id + 1; }
    // The parameters of the rows past V in the padded embedding (and LLaMA's untied head): in our buffers, not in
    // the Hugging Face count (gpt2-124m: 124,475,904 held, 124,439,808 counted)
    size_t vocab_padding_parameters() const {
        if (arch == Arch::ROBERTA) return 0;  // (its embedding is not padded)
        return (size_t)(padded_vocab_size - vocab_size) * channels * (tied_embeddings ? 1 : 2);
    }

};

// "gpt2-124m", "gpt2-355m", "gpt2-mini", "gpt2-tiny", "llama-35m" ... "llama-1b", "llama-mini", "llama-tiny",
// "roberta-base", "roberta-tiny", or a path to a Hugging Face config.json (GPT2Config, LlamaConfig or RobertaConfig
// keys). Throws UserError on unknown names,
// unreadable files, missing keys, or configs this trainer cannot run (see validate_config).
ModelConfig model_config_load(Arch arch, const std::string& name_or_path);

// The architecture of a named config, or of a config.json by its model_type ("gpt2", "llama", "roberta"); UserError
// for an unknown name, an unreadable file, or another model_type. (For a tool that runs any architecture: bench_gpu.)
Arch model_config_arch(const std::string& name_or_path);

// Impossible configurations (heads not dividing the width, odd head dim for RoPE, GQA, ...) -> UserError.
void validate_config(const ModelConfig& c);

// Names accepted by model_config_load for this architecture, for --help and error messages.
std::vector<std::string> model_config_names(Arch arch);
// The named config with c's architecture and shape (layers, heads, widths, vocabulary), or "": a config.json of
// llama-130m's shape gets llama-130m's defaults that go by the name (GaLore's and RSO's ranks).
std::string named_config_like(const ModelConfig& c);

// One line per setting, for the start-of-run table.
std::vector<std::pair<std::string, std::string>> model_config_rows(const ModelConfig& c);

// Writes a Hugging Face config.json for this model (GPT2LMHeadModel, LlamaForCausalLM or
// RobertaForSequenceClassification), so a saved
// model.safetensors next to it loads with from_pretrained. With `keep_keys_of` (the text of the config.json this
// model was read from), its keys this writer does not set are kept: a fine-tuned model keeps its base's dropout rates
// and token ids, which transformers would otherwise take as its own defaults (dropout 0.1 for a base that had 0).
// Not kept: what describes the base's head, task, file or code (num_labels, problem_type, finetuning_task,
// torch_dtype/dtype, transformers_version, _name_or_path, auto_map, quantization_config).
void write_hf_config(const std::string& path, const ModelConfig& c, const std::string& keep_keys_of = "");
