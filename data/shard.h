// Token shards: llm.c's .bin format (256 x int32 little-endian header, then uint16 tokens), with extra header
// fields that are zero in llm.c's files, so zero always means "llm.c default".
//   header[0] = 20240520 magic       header[5] = row length (layout 1 only, e.g. 256; else 0)
//   header[1] = 1 version            header[6] = tokenizer kind (0 unknown, 1 GPT-2 r50k, 2 SentencePiece)
//   header[2] = number of tokens     header[7] = pad id (layout 1 only; GaLore/T5: 0)
//   header[3] = vocab size (0 = ?)   header[8] = EOS/EOT id (0 = unknown; llm.c GPT-2 files: 50256)
//   header[4] = layout: 0 flat EOT-separated stream (llm.c), 1 rows (GaLore's C4: a document per row)
//   header[9], [10] = low, high 32 bits of the tokenizer model file's hash (data/tokenizer_id.h; 0 = unknown)
//   header[16..79]  = that file's base name, UTF-8, NUL-padded (at most 255 bytes); every other int is 0
// The file size must be exactly 1024 + 2 * ntok bytes. See data/README.md and docs/DESIGN.md section 7.1.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

constexpr int32_t SHARD_MAGIC = 20240520;
constexpr int32_t SHARD_VERSION = 1;
constexpr int SHARD_HEADER_INTS = 256;
constexpr size_t SHARD_HEADER_BYTES = SHARD_HEADER_INTS * sizeof(int32_t);

enum ShardLayout : int32_t { SHARD_LAYOUT_FLAT = 0, SHARD_LAYOUT_ROWS = 1 };
enum TokenizerKind : int32_t { TOKENIZER_UNKNOWN = 0, TOKENIZER_GPT2 = 1, TOKENIZER_SENTENCEPIECE = 2 };

// What the header says. Zero-initialized = an llm.c file (flat, vocab/tokenizer unknown).
struct ShardInfo {
    int64_t num_tokens = 0;           // header[2]; write_shard takes it from the token count instead
    int32_t vocab_size = 0;           // header[3]; 0 = unknown
    int32_t layout = SHARD_LAYOUT_FLAT;  // header[4]
    int32_t row_len = 0;              // header[5]; > 1 for rows, 0 for flat
    int32_t tokenizer = TOKENIZER_UNKNOWN;  // header[6]
    int32_t pad_id = 0;               // header[7]; only meaningful for rows
    int32_t eos_id = 0;               // header[8]; 0 = unknown
    uint64_t tokenizer_hash = 0;      // header[9..10]; 0 = unknown
    std::string tokenizer_name;       // header[16..79]; "" = unknown
};

constexpr int SHARD_NAME_INT = 16;          // first int of the tokenizer file name
constexpr int SHARD_NAME_BYTES = 256;       // its room, NUL included
constexpr int SHARD_ROW_LEN_MAX = 1 << 20;  // the longest row the readers accept

// Writes tokens with info's header fields (num_tokens is ignored). Atomic: a temporary file next to
// `path` is written, fsync'ed and renamed over it, so a crash never leaves a half-written shard.
// Fails on a header the readers would reject (e.g. rows whose count is not a multiple of row_len)
// and on a token id >= info.vocab_size (when it is set).
void write_shard(const std::string& path, const uint16_t* tokens, size_t num_tokens, const ShardInfo& info);
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens, const ShardInfo& info);

// Reads and validates the header: magic, version, exact file size, layout fields. Throws UserError
// naming `path` and the problem. A shard with 0 tokens is valid here (training refuses it later).
ShardInfo read_shard_header(const std::string& path);

// Reads header and tokens. Every token id must be < model_vocab when model_vocab > 0, else
// < the header's vocab size when that is set; a violation names the id, its position and the cure.
// Also fails when the header's vocab size exceeds model_vocab (shards from a bigger tokenizer).
std::vector<uint16_t> read_shard(const std::string& path, ShardInfo* info = nullptr, int model_vocab = 0);

// The token at `index` (0-based) of the shard at `path`, read alone (a shard may be gigabytes); the header is checked
// as read_shard checks it, the id as read_shard checks its ids (model_vocab the same), an index past the end is an error.
uint16_t read_shard_token(const std::string& path, int64_t index, int model_vocab = 0);

// The token-id check read_shard does, for callers holding tokens already. `what` names the source.
void check_token_ids(const std::string& what, const ShardInfo& info, const uint16_t* tokens, size_t n,
                     int model_vocab);

const char* shard_layout_name(int32_t layout);
const char* tokenizer_kind_name(int32_t kind);
