// GPT-2 byte-level BPE (tiktoken's r50k_base), byte-exact with tiktoken's encode_ordinary, plus llm.c's
// gpt2_tokenizer.bin (the decode table the C trainers read); docs/DESIGN.md section 7.2.
// Encoding = pre-tokenization with GPT-2's regex (PCRE2, UTF + UCP, JIT), then per regex piece: the whole
// piece if it is a token, else repeatedly merge the adjacent pair whose concatenation has the lowest rank
// (leftmost on ties), as tiktoken does. The ranks come from r50k_base.tiktoken (data/gpt2/, 50,256 lines
// "base64(token bytes) rank"); <|endoftext|> = 50256 is added on top and never produced by encode().
// Input must be valid UTF-8 (tiktoken takes a Python str, so it never sees anything else): encode() fails
// with the byte offset of the first invalid sequence. utf8_replace_invalid() gives Python's
// bytes.decode("utf-8", errors="replace") for callers that prefer to repair rather than to skip.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"  // Tokenizer, the interface this implements

constexpr int GPT2_NUM_RANKS = 50256;       // mergeable tokens in r50k_base (ids 0..50255)
constexpr int GPT2_VOCAB_SIZE = 50257;      // + <|endoftext|>
constexpr uint32_t GPT2_EOT_ID = 50256;
constexpr const char* GPT2_EOT_TEXT = "<|endoftext|>";
constexpr const char* GPT2_SPLIT_PATTERN =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// llm.c's gpt2_tokenizer.bin: 256 x int32 header ([0] magic, [1] version, [2] vocab size, [3] EOT id; the
// rest 0), then for each id a uint8 length (1..255) and the token's raw bytes. Version 1 has no [3]
// (llm.c then assumes 50256). The GPT-2 file is 372,108 bytes.
constexpr int32_t GPT2_TOKENIZER_MAGIC = 20240328;
constexpr int32_t GPT2_TOKENIZER_VERSION = 2;
constexpr size_t GPT2_TOKENIZER_BIN_BYTES = 372108;

// Knobs for tests and the benchmark; the defaults are what everyone should use.
struct Gpt2Options {
    // Pieces of at least this many bytes that are not a token use the O(m log m) heap merge; shorter ones
    // the O(m^2) scan tiktoken uses (faster for the usual few-byte pieces). Both give the same ids.
    size_t heap_bpe_min_bytes = 64;
    // Per-thread cache of the ids of pieces that needed merging (bounded; cleared when full).
    bool piece_cache = true;
};

struct Gpt2Splitter;  // the compiled regex (PCRE2 types stay out of this header)

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
    int kind() const override;
    std::string name() const override { return "gpt2 (r50k_base)"; }

    // Writes llm.c's gpt2_tokenizer.bin (version 2) atomically (temporary file + rename).
    void write_gpt2_tokenizer_bin(const std::string& path) const;

    // Rank lookup: the id of exactly these bytes, or -1 when they are not a (mergeable) token.
    int64_t rank_of(std::string_view bytes) const;

    // ---- internals (public so the .cpp's helpers can use them; plain data) ----
    Gpt2Options options;
    std::string arena;               // all token bytes, id after id
    std::vector<uint32_t> offsets;   // GPT2_VOCAB_SIZE + 1 offsets into arena
    // Open-addressing hash of the ranks (size a power of two, load < 0.4). A slot holds the first 8 bytes of
    // its token, so the usual short lookups never touch `arena`.
    struct Slot {
        uint64_t head;     // first min(len, 8) bytes, zero-padded
        uint32_t rank1;    // rank + 1; 0 = empty
        uint32_t len_tag;  // length | 24 bits of the hash << 8
    };
    std::vector<Slot> table;
    size_t max_token_len = 0;
    uint64_t instance_id = 0;        // keys the per-thread state (cache, PCRE2 match data)
    std::unique_ptr<Gpt2Splitter> splitter;
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

// Offset of the first byte that does not start a valid UTF-8 sequence (overlong forms, surrogates and
// code points above U+10FFFF are invalid, as in Python), or npos when all of s is valid.
size_t utf8_first_invalid(std::string_view s);
// Python's bytes.decode("utf-8", errors="replace") re-encoded: each maximal invalid subpart becomes U+FFFD.
std::string utf8_replace_invalid(std::string_view s);
