// Byte-level BPE, the one implementation behind GPT-2's tokenizer (tiktoken's ranks, data/gpt2_tokenizer.h) and
// RoBERTa's (Hugging Face's vocab.json + merges.txt, data/roberta_tokenizer.h); docs/DESIGN.md section 7.2.
// Encoding = pre-tokenization with GPT-2's regex (PCRE2, UTF + UCP, JIT), then per regex piece: start from its
// bytes and repeatedly merge the adjacent pair of lowest rank (leftmost on ties). The two file formats rank pairs
// differently, and both are reproduced exactly:
//   TOKEN_RANK (tiktoken): a pair's rank is the rank of its concatenation as a token; ids are ranks. A piece that is
//     a token as a whole is that token (tiktoken looks the piece up before merging).
//   PAIR_RANK (Hugging Face BPE): a pair's rank is its line in merges.txt; the merged token's id is the
//     vocabulary's, in any order. Only listed pairs merge (a + b may be a token that another pair makes), and a piece
//     is a single token only when the merges make it.
// Input must be valid UTF-8 (both references take a Python str): encode() fails with the byte offset of the first
// invalid sequence; utf8_replace_invalid() repairs as Python's errors="replace" does.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

enum class BpeRanking { TOKEN_RANK, PAIR_RANK };

// GPT-2's pre-tokenization (tiktoken's r50k_base), read by Unicode 16.0 as tiktoken and Hugging Face read it; PCRE2
// gets it with its classes spelled out (byte_bpe.cpp, gpt2_split_pattern_for_pcre2).
constexpr const char* GPT2_SPLIT_PATTERN =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// One line of merges.txt as token ids: left + right -> merged (PAIR_RANK).
struct BpeMerge {
    uint32_t left, right, merged;
};

// Knobs for tests and the benchmark; the defaults are what everyone should use.
struct BpeOptions {
    // Pieces of at least this many bytes that are not a token use the O(m log m) heap merge; shorter ones
    // the O(m^2) scan tiktoken uses (faster for the usual few-byte pieces). Both give the same ids.
    size_t heap_bpe_min_bytes = 64;
    // Per-thread cache of the ids of pieces that needed merging (bounded; cleared when full).
    bool piece_cache = true;
};

struct BpeSplitter;  // the compiled regex (PCRE2 types stay out of this header)

struct BytePairEncoder {
    // tokens[id]: the bytes of each id. special[id] (empty = none special): a token encode() never makes from text
    // (GPT-2's <|endoftext|>, RoBERTa's <s>); decode() gives its text. TOKEN_RANK: merges empty, rank = id.
    // PAIR_RANK: merges in rank order (the loader resolved their ids). Fails (naming `source`, the file, and
    // token_name(id), where the file has the token) when a non-special token is empty or repeats another's bytes,
    // when a byte is no token (some text would have no encoding), or when a merge's ids are out of range. A merge
    // that repeats a pair is the loader's to refuse (it knows the file's lines): here it is a logic_error. Fails
    // when the build has no PCRE2.
    BytePairEncoder(BpeRanking ranking, std::vector<std::string> tokens, std::vector<bool> special,
                    const std::vector<BpeMerge>& merges, const BpeOptions& options, const std::string& source,
                    const std::function<std::string(uint32_t)>& token_name);
    ~BytePairEncoder();
    BytePairEncoder(const BytePairEncoder&) = delete;
    BytePairEncoder& operator=(const BytePairEncoder&) = delete;

    // Appends the ids of text. `what` names the tokenizer and its reference in the invalid-UTF-8 error. Thread-safe.
    void encode(std::string_view text, std::vector<uint32_t>& out, const char* what) const;
    // Fails unless text is valid UTF-8, naming the offset of the first bad byte (what: as for encode).
    void require_utf8(std::string_view text, const char* what) const;
    // Encodes documents on `threads` threads (<= 0: all hardware threads); result i = encode(docs[i]).
    // An error in any document (invalid UTF-8) is rethrown naming the document's index.
    std::vector<std::vector<uint32_t>> encode_batch(const std::vector<std::string>& docs, int threads,
                                                    const char* what) const;
    // Concatenated token bytes; `what` names the tokenizer when an id is out of range.
    std::string decode(const uint32_t* ids, size_t n, const char* what) const;
    std::string_view token_bytes(uint32_t id) const;  // id < vocab_size()
    int vocab_size() const { return (int)offsets.size() - 1; }
    // The id encode() gives a whole piece of exactly these bytes when that is one token, else -1. TOKEN_RANK: the
    // rank of any non-special token. PAIR_RANK: only tokens the merges make from their own bytes (and single bytes).
    int64_t single_token(std::string_view bytes) const;

    // ---- internals (public so the .cpp's helpers can use them; plain data) ----
    BpeRanking ranking;
    BpeOptions options;
    std::string arena;               // all token bytes, id after id
    std::vector<uint32_t> offsets;   // vocab size + 1 offsets into arena
    // Open-addressing hash of the single tokens (size a power of two, load < 0.4). A slot holds the first 8 bytes of
    // its token, so the usual short lookups never touch `arena`.
    struct Slot {
        uint64_t head;     // first min(len, 8) bytes, zero-padded
        uint32_t id1;      // id + 1; 0 = empty
        uint32_t len_tag;  // length | 24 bits of the hash << 8
    };
    std::vector<Slot> table;
    size_t max_token_len = 0;
    uint32_t byte_id[256] = {};  // the token of each single byte: where every piece starts
    // PAIR_RANK: open-addressing hash (left << 32 | right) -> (rank << 32 | merged); key ~0 = empty.
    struct PairSlot {
        uint64_t key, value;
    };
    std::vector<PairSlot> pairs;
    uint64_t instance_id = 0;  // keys the per-thread state (cache, PCRE2 match data)
    std::unique_ptr<BpeSplitter> splitter;

    uint64_t pair_merge(uint32_t left, uint32_t right) const;  // rank << 32 | merged, or ~0 when not a merge
    void build_table(const std::vector<std::string>& tokens, const std::vector<bool>& in_table,
                     const std::string& source, const std::function<std::string(uint32_t)>& token_name);
};

// Runs work_on(i) for i in [0, count) on `threads` threads (<= 0: all hardware threads), handing out one document at
// a time; the first failing document's UserError is rethrown prefixed "document i of count: ".
void for_each_document(size_t count, int threads, const std::function<void(size_t)>& work_on);

// Offset of the first byte that does not start a valid UTF-8 sequence (overlong forms, surrogates and
// code points above U+10FFFF are invalid, as in Python), or npos when all of s is valid.
size_t utf8_first_invalid(std::string_view s);
// Python's bytes.decode("utf-8", errors="replace") re-encoded: each maximal invalid subpart becomes U+FFFD.
std::string utf8_replace_invalid(std::string_view s);
// s with each byte of an invalid subpart written as the four characters \xNN: a file name as JSON text (a state
// file, a checkpoint's metadata) that still says which bytes it had, and is the same text each time.
std::string utf8_escape_invalid(std::string_view s);
// s safe to print in a message: utf8_escape_invalid's \xNN for invalid bytes, and for the control characters a
// terminal acts on (C0 but tab, DEL, C1) too (a parser's error quoting a line of invalid UTF-8 wrote it raw).
std::string printable_text(std::string_view s);

// GPT-2's byte -> printable code point map (bytes_to_unicode of openai/gpt-2's encoder.py, as its documentation
// states it: printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in byte order), as UTF-8. The
// strings of vocab.json and merges.txt are token bytes written this way.
std::string gpt2_byte_to_unicode(unsigned char b);
// The inverse over a whole string: false when s has a character outside the 256 of the map (or is not UTF-8).
bool gpt2_unicode_to_bytes(std::string_view s, std::string& bytes);
