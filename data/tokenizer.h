// The tokenizer interface the data tools use: GPT-2 byte-level BPE (data/gpt2_tokenizer.h) and SentencePiece
// (data/spm_tokenizer.h) implement it. Encoding is const and thread-safe, so prep tools encode documents in
// parallel with one tokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct Tokenizer {
    virtual ~Tokenizer() = default;
    // Appends the ids of `text` (ordinary text: special-token strings are not parsed) to out. No EOS/EOT is
    // added: callers decide the document boundaries.
    virtual void encode(std::string_view text, std::vector<uint32_t>& out) const = 0;
    // The bytes of ids (may be invalid UTF-8 for a partial sequence).
    virtual std::string decode(const uint32_t* ids, size_t n) const = 0;
    virtual int vocab_size() const = 0;
    virtual uint32_t eos_id() const = 0;  // GPT-2: <|endoftext|> 50256; T5 SentencePiece: </s> 1
    virtual std::string eos_text() const = 0;  // how a sample shows it: "<|endoftext|>", "</s>"
    virtual int kind() const = 0;         // TOKENIZER_GPT2 or TOKENIZER_SENTENCEPIECE (data/shard.h)
    virtual std::string name() const = 0;
};
