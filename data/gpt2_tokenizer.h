// GPT-2 byte-level BPE (tiktoken's r50k_base), byte-exact with tiktoken's encode_ordinary, plus llm.c's
// gpt2_tokenizer.bin (the decode table the C trainers read); docs/DESIGN.md section 7.2.
// Encoding = byte_bpe.h's TOKEN_RANK: pre-tokenization with GPT-2's regex, then per regex piece the whole piece if
// it is a token, else repeatedly merge the adjacent pair whose concatenation has the lowest rank (leftmost on
// ties), as tiktoken does. The ranks come from r50k_base.tiktoken (data/gpt2/, 50,256 lines
// "base64(token bytes) rank"); <|endoftext|> = 50256 is added on top and never produced by encode().
// Input must be valid UTF-8 (tiktoken takes a Python str): encode() fails with the byte offset of the first
// invalid sequence (utf8_replace_invalid() in byte_bpe.h repairs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/byte_bpe.h"   // the BPE itself, shared with RoBERTa
#include "data/tokenizer.h"  // Tokenizer, the interface this implements

constexpr int GPT2_NUM_RANKS = 50256;       // mergeable tokens in r50k_base (ids 0..50255)
constexpr int GPT2_VOCAB_SIZE = 50257;      // + <|endoftext|>
constexpr uint32_t GPT2_EOT_ID = 50256;
constexpr const char* GPT2_EOT_TEXT = "<|endoftext|>";

// llm.c's gpt2_tokenizer.bin: 256 x int32 header ([0] magic, [1] version, [2] vocab size, [3] EOT id; the
// rest 0), then for each id a uint8 length (1..255) and the token's raw bytes. Version 1 has no [3]
// (llm.c then assumes 50256). The GPT-2 file is 372,108 bytes.
constexpr int32_t GPT2_TOKENIZER_MAGIC = 20240328;
constexpr int32_t GPT2_TOKENIZER_VERSION = 2;
constexpr size_t GPT2_TOKENIZER_BIN_BYTES = 372108;

using Gpt2Options = BpeOptions;  // the merge's knobs (byte_bpe.h)

struct Gpt2Tokenizer : Tokenizer {
    // Reads and validates r50k_base.tiktoken: base64, ranks 0..50255 each exactly once, no token twice,
    // every single byte a token, tokens of 1..255 bytes. Errors name the file and the line. Fails when the
    // build has no PCRE2.
    explicit Gpt2Tokenizer(const std::string& ranks_path, const Gpt2Options& options = {});
    ~Gpt2Tokenizer() override;
    Gpt2Tokenizer(const Gpt2Tokenizer&) = delete;
    Gpt2Tokenizer& operator=(const Gpt2Tokenizer&) = delete;

    // tiktoken's encode_ordinary: "<|endoftext|>" in the text is ordinary text. Thread-safe.
    void encode(std::string_view text, std::vector<uint32_t>& out) const override;
    std::vector<uint32_t> encode(std::string_view text) const;
    // Encodes documents on `threads` threads (<= 0: all hardware threads); result i = encode(docs[i]).
    // An error in any document (invalid UTF-8) is rethrown naming the document's index.
    std::vector<std::vector<uint32_t>> encode_batch(const std::vector<std::string>& docs, int threads) const;

    // Concatenated token bytes; 50256 decodes to "<|endoftext|>". An id >= 50257 fails naming it.
    std::string decode(const uint32_t* ids, size_t n) const override;
    std::string decode(const std::vector<uint32_t>& ids) const { return decode(ids.data(), ids.size()); }
    std::string_view token_bytes(uint32_t id) const;  // id < 50257

    int vocab_size() const override { return GPT2_VOCAB_SIZE; }
    uint32_t eos_id() const override { return GPT2_EOT_ID; }
    std::string eos_text() const override { return "<|endoftext|>"; }
    int kind() const override;
    std::string name() const override { return "gpt2 (r50k_base)"; }

    // Writes llm.c's gpt2_tokenizer.bin (version 2) atomically (temporary file + rename).
    void write_gpt2_tokenizer_bin(const std::string& path) const;

    // Rank lookup: the id of exactly these bytes, or -1 when they are not a (mergeable) token.
    int64_t rank_of(std::string_view bytes) const;

   private:
    std::unique_ptr<BytePairEncoder> bpe_;  // TOKEN_RANK over the ranks, <|endoftext|> special
};

// A gpt2_tokenizer.bin read back: what llm.c's decoder knows (no ranks, so no encoding).
struct Gpt2DecodeTable {
    int32_t version = 0;
    uint32_t eot_id = GPT2_EOT_ID;
    std::vector<std::string> tokens;  // bytes of each id
    std::string decode(const uint32_t* ids, size_t n) const;
};

// Reads and validates gpt2_tokenizer.bin (v1 or v2): magic, version, vocab size, lengths, exact file
// size. Errors name the path and the problem (bad magic, unknown version, truncated, trailing bytes).
Gpt2DecodeTable read_gpt2_tokenizer_bin(const std::string& path);
