#include "model/hf_export.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "common/files.h"
#include "common/error.h"
#include "common/strings.h"  // join
#include "data/gpt2_tokenizer.h"
#include "data/spm_tokenizer.h"

using json = nlohmann::ordered_json;

namespace {

std::string unicode_of(std::string_view bytes) {
    std::string s;
    for (unsigned char b : bytes) s += gpt2_byte_to_unicode(b);
    return s;
}

// The two tokens whose merge made token `rank`: byte-pair merging of its bytes restricted to lower ranks ends in
// exactly two parts (the BPE training order: a token exists only as the merge of two earlier ones).
std::pair<std::string, std::string> merge_parts(const std::string& bytes, int rank,
                                                const std::unordered_map<std::string, int>& ranks) {
    std::vector<std::string> parts;
    for (char c : bytes) parts.emplace_back(1, c);
    while (parts.size() > 2) {
        int best = -1, best_rank = rank;
        for (size_t i = 0; i + 1 < parts.size(); i++) {
            auto it = ranks.find(parts[i] + parts[i + 1]);
            if (it != ranks.end() && it->second < best_rank) best_rank = it->second, best = (int)i;
        }
        CHECK_USER(best >= 0, "--save: GPT-2 rank %d cannot be written as a merge of lower ranks: not a BPE ranks file",
                   rank);
        parts[(size_t)best] += parts[(size_t)best + 1];
        parts.erase(parts.begin() + best + 1);
    }
    CHECK_USER(parts.size() == 2, "--save: GPT-2 rank %d is a single byte past rank 255: not a BPE ranks file", rank);
    return {parts[0], parts[1]};
}

void write_gpt2_tokenizer(const std::string& dir, const Gpt2Tokenizer& tok, int max_len) {
    std::unordered_map<std::string, int> ranks;
    for (int r = 0; r < GPT2_NUM_RANKS; r++) ranks.emplace(std::string(tok.token_bytes((uint32_t)r)), r);
    nlohmann::json vocab = nlohmann::json::object();  // a sorted map: ordered_json's linear lookups are O(n^2) here
    for (int r = 0; r < GPT2_NUM_RANKS; r++) vocab[unicode_of(tok.token_bytes((uint32_t)r))] = r;
    vocab["<|endoftext|>"] = GPT2_NUM_RANKS;
    std::string merges = "#version: 0.2\n";
    for (int r = 256; r < GPT2_NUM_RANKS; r++) {
        auto [a, b] = merge_parts(std::string(tok.token_bytes((uint32_t)r)), r, ranks);
        merges += unicode_of(a) + " " + unicode_of(b) + "\n";
    }
    write_file_atomic(dir + "/vocab.json", vocab.dump() + "\n");
    write_file_atomic(dir + "/merges.txt", merges);
    json cfg = {{"tokenizer_class", "GPT2Tokenizer"}, {"model_max_length", max_len}, {"add_prefix_space", false},
                {"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}, {"unk_token", "<|endoftext|>"}};
    write_file_atomic(dir + "/tokenizer_config.json", cfg.dump(2) + "\n");
    json special = {{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"}, {"unk_token", "<|endoftext|>"}};
    write_file_atomic(dir + "/special_tokens_map.json", special.dump(2) + "\n");
}

void write_spm_tokenizer(const std::string& dir, const SpmTokenizer& tok, const std::string& model_file, int max_len) {
    write_file_atomic(dir + "/spiece.model", read_file_bytes(model_file));
    json cfg = {{"tokenizer_class", "T5Tokenizer"}, {"model_max_length", max_len}, {"extra_ids", 0},
                {"eos_token", tok.piece((int)tok.eos_id())}};
    json special = {{"eos_token", tok.piece((int)tok.eos_id())}};
    if (tok.pad_id() >= 0) cfg["pad_token"] = special["pad_token"] = tok.piece(tok.pad_id());
    if (tok.unk_id() >= 0) cfg["unk_token"] = special["unk_token"] = tok.piece(tok.unk_id());
    write_file_atomic(dir + "/tokenizer_config.json", cfg.dump(2) + "\n");
    write_file_atomic(dir + "/special_tokens_map.json", special.dump(2) + "\n");
}

}  // namespace

void write_hf_export(const std::string& dir, const ModelConfig& cfg, const std::string& tokenizer_file) {
    CHECK_USER(!tokenizer_file.empty(), "--save: no tokenizer file is known for this model's training data");
    int bos = -1, eos = -1, pad = -1, tok_vocab = 0;
    if (cfg.arch == Arch::GPT2) {
        Gpt2Tokenizer tok(tokenizer_file);
        write_gpt2_tokenizer(dir, tok, cfg.max_seq_len);
        bos = eos = (int)tok.eos_id();
        tok_vocab = tok.vocab_size();
    } else {
        SpmTokenizer tok(tokenizer_file);
        write_spm_tokenizer(dir, tok, tokenizer_file, cfg.max_seq_len);
        // a warning only: a model libsentencepiece loaded but our reader cannot place costs no --save
        std::string differs;
        try {
            differs = spm_t5_mismatch(spm_model_kind(read_file_bytes(tokenizer_file), tokenizer_file));
        } catch (const UserError&) {
        }
        if (!differs.empty())
            std::fprintf(stderr, "warning: --save names the tokenizer T5Tokenizer, and transformers' T5Tokenizer was "
                         "seen to encode otherwise than SentencePiece for models not of T5's kind (unigram, nmt_nfkc "
                         "normalization, no byte fallback); %s has %s: check AutoTokenizer's ids against the shards', "
                         "or encode with the sentencepiece package and the saved spiece.model\n",
                         tokenizer_file.c_str(), differs.c_str());
        // on flat shards (prep_data's default) documents, and our samples, start after an EOS: it is the start token
        // of a generation (a row starts with its document, nothing before it: there generate() wants a prompt)
        bos = eos = (int)tok.eos_id();
        pad = tok.pad_id();
        tok_vocab = tok.vocab_size();
    }
    std::string config_path = dir + "/config.json";
    write_hf_config(config_path, cfg);
    json c = json::parse(read_file_bytes(config_path));
    c["bos_token_id"] = bos;
    c["eos_token_id"] = eos;
    if (pad >= 0) c["pad_token_id"] = pad;
    write_file_atomic(config_path, c.dump(2) + "\n");
    // print_sample's defaults (--temperature 1, --top-k 0): the whole distribution
    json g = {{"bos_token_id", bos}, {"eos_token_id", eos}, {"pad_token_id", pad >= 0 ? pad : eos},
              {"do_sample", true}, {"temperature", 1.0}, {"top_k", 0}, {"top_p", 1.0}};
    // rows of the embedding past the tokenizer's ids (the 8k built-in model under LLaMA's 32000) were never a
    // target: generate() must not sample them, as print_sample does not
    if (tok_vocab < cfg.vocab_size) {
        json ids = json::array();
        for (int v = tok_vocab; v < cfg.vocab_size; v++) ids.push_back(v);
        g["suppress_tokens"] = ids;
    }
    write_file_atomic(dir + "/generation_config.json", g.dump(2) + "\n");
}

bool is_hf_model_file(const std::string& name) {
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
                          "pytorch_model.bin", "pytorch_model.bin.index.json", "tokenizer.json",
                          "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
                          "merges.txt", "spiece.model", "tokenizer.model", "sentencepiece.bpe.model"})
        if (name == f) return true;
    auto sharded = [&](const char* prefix, const char* suffix) {  // model-00001-of-00002.safetensors
        const size_t p = std::strlen(prefix), q = std::strlen(suffix);
        return name.size() > p + q && name.compare(0, p, prefix) == 0 &&
               name.compare(name.size() - q, q, suffix) == 0 && name.find("-of-") != std::string::npos;
    };
    return sharded("model-", ".safetensors") || sharded("pytorch_model-", ".bin");
}

std::vector<std::string> hf_model_files_in(const std::string& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.is_regular_file() && is_hf_model_file(e.path().filename().string()))
            out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

std::string earlier_files_removed(const std::vector<std::string>& names) {
    if (names.empty()) return "";
    return "removed the earlier model's " + join(names) + " (not part of this one, and read before its files)\n";
}
