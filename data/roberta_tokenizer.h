// RoBERTa's tokenizer (Hugging Face RobertaTokenizer / RobertaTokenizerFast): GPT-2's byte-level BPE as Hugging Face
// files give it, vocab.json + merges.txt or a tokenizer.json of the same BPE model, with RoBERTa's special tokens and
// input layout; docs/DESIGN.md section 7.2. Ids equal transformers' (test/test_roberta_tokenizer.cpp checks them live).
//   - BPE: byte_bpe.h's PAIR_RANK (a pair merges at its merges.txt line; ids from vocab.json, in any order), the same
//     regex and merge loop as GPT-2's. No prefix space is added (add_prefix_space=false, RoBERTa's default).
//   - Special tokens: <s> (cls/bos), </s> (sep/eos), <pad>, <unk>, <mask>, ids from the vocabulary. In tokenize() and
//     the encode_* functions their strings in the text become their ids, as transformers splits added tokens out of
//     the text before the BPE; <mask> also takes the whitespace before it when tokenizer.json says lstrip (roberta-base's
//     does; vocab.json + merges.txt alone: no strip, as transformers 5 loads them).
//   - Layout: <s> A </s>, pairs <s> A </s></s> B </s>. Truncation to max_length: longest_first as the Rust tokenizers
//     (transformers 5's only RoBERTa tokenizer) compute it; see build_inputs(). Right truncation only.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/byte_bpe.h"
#include "data/tokenizer.h"

// Right-padded rows: ids (B, T) row-major, the pad id after each row's kv_len[b] real tokens.
struct TokenBatch {
    int B = 0, T = 0;
    std::vector<int32_t> ids;     // (B, T)
    std::vector<int32_t> kv_len;  // (B): real tokens of each row (1..T); the attention mask is t < kv_len[b]
};

// Pads rows to T with pad_id; T = 0 pads to the longest row. Fails when a row is empty or longer than T.
TokenBatch pad_rows(const std::vector<const std::vector<uint32_t>*>& rows, uint32_t pad_id, int T = 0);

struct RobertaFiles;  // the parsed files (roberta_tokenizer.cpp)

struct RobertaTokenizer : Tokenizer {
    // path: a model directory (its tokenizer.json when there is one, else vocab.json + merges.txt, as transformers
    // loads them) or a tokenizer.json file. A tokenizer.json must hold a byte-level BPE model (RoBERTa's, GPT-2's);
    // any other model, normalizer or pre-tokenizer is refused with an error naming it. Errors name the file and line.
    explicit RobertaTokenizer(const std::string& path, const BpeOptions& options = {});
    RobertaTokenizer(const std::string& vocab_json, const std::string& merges_txt, const BpeOptions& options = {});
    ~RobertaTokenizer() override;
    RobertaTokenizer(const RobertaTokenizer&) = delete;
    RobertaTokenizer& operator=(const RobertaTokenizer&) = delete;

    // The Tokenizer interface: the BPE ids of ordinary text (special-token strings are text here). Thread-safe.
    void encode(std::string_view text, std::vector<uint32_t>& out) const override;
    std::vector<uint32_t> encode(std::string_view text) const;
    // transformers' tokenizer(text, add_special_tokens=False)["input_ids"]: special-token strings become their ids.
    std::vector<uint32_t> tokenize(std::string_view text) const;
    // transformers' tokenizer(a, truncation=True, max_length=max_length)["input_ids"] (max_length 0: no truncation):
    // <s> A </s>. Fails when max_length is in 1..1 (no room for the two special tokens).
    std::vector<uint32_t> encode_single(std::string_view a, int max_length = 0) const;
    // transformers' tokenizer([a], [b], truncation=True, max_length=max_length)["input_ids"][0]: <s> A </s></s> B </s>
    // (an empty b still makes a pair, as in the batched call GLUE scripts use). Fails when max_length is in 1..3.
    std::vector<uint32_t> encode_pair(std::string_view a, std::string_view b, int max_length = 0) const;
    // The same layout and truncation over already tokenized texts (b == nullptr: single). With t = max_length minus
    // the special tokens, a pair keeps the shorter text whole when the longer still gets as many tokens, else each
    // gets t / 2 and the odd token goes to the longer (to B on a tie; transformers 4's Python tokenizer: to A).
    std::vector<uint32_t> build_inputs(std::vector<uint32_t> a, const std::vector<uint32_t>* b, int max_length) const;

    // Concatenated token bytes; special tokens decode to their text. An id out of range fails naming it.
    std::string decode(const uint32_t* ids, size_t n) const override;
    std::string decode(const std::vector<uint32_t>& ids) const { return decode(ids.data(), ids.size()); }
    int vocab_size() const override { return bpe_->vocab_size(); }
    uint32_t eos_id() const override { return sep_id; }
    std::string eos_text() const override { return decode(&sep_id, 1); }
    int kind() const override { return 0; }  // TOKENIZER_UNKNOWN: no token shards are made with it
    std::string name() const override { return "roberta (" + source_ + ")"; }
    // The id of a vocabulary string as vocab.json writes it (GPT-2's byte -> character map), or -1.
    int64_t id_of(const std::string& vocab_string) const;

    uint32_t cls_id = 0, sep_id = 2, pad_id = 1, unk_id = 3, mask_id = 0;  // <s> </s> <pad> <unk> <mask>

   private:
    struct Special {
        std::string text;
        uint32_t id;
        bool lstrip, rstrip;
    };
    std::vector<Special> specials_;  // split out of the text by tokenize()
    std::string source_;
    std::unique_ptr<BytePairEncoder> bpe_;
    std::unordered_map<std::string, uint32_t> ids_;  // vocab.json: string -> id
    void load(const RobertaFiles& files, const BpeOptions& options);
};
