// Which tokenizer made a token shard: its kind, the base name of its model file and the first 8 bytes of the
// file's SHA-256 (FIPS 180-4), as prep_data records them in the shard header (data/shard.h) and PREFIX_prep.json.
// find_tokenizer_file() picks the file that decodes a set of shards (a --sample, an export) and never another:
// a candidate counts only when its hash equals the header's. The rules: data/README.md, "Which tokenizer".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/shard.h"

// SHA-256 of a byte string / of a file's contents, as 64 lowercase hex digits. The file version fails (UserError)
// when the file cannot be read.
std::string sha256_hex(const void* data, size_t n);
std::string sha256_file_hex(const std::string& path);
// The header's 64-bit tokenizer hash: the first 8 bytes of the SHA-256 digest, read big-endian (so its %016llx
// spelling is the first 16 hex digits of `sha256sum FILE`).
uint64_t tokenizer_hash_of_sha256(const std::string& sha256_hex);
uint64_t tokenizer_file_hash(const std::string& path);
std::string tokenizer_hash_hex(uint64_t h);  // 16 hex digits

// What a set of shards says about its tokenizer (read_shard_header of every file matching the patterns). Fails
// when the shards disagree (kind, or model file hash).
struct ShardTokenizer {
    int32_t kind = TOKENIZER_UNKNOWN;
    int32_t vocab_size = 0;
    uint64_t hash = 0;        // 0: not recorded (llm.c's shards, shards of an older prep_data)
    std::string name;         // the model file's base name ("" when not recorded)
    std::string first_file;   // a shard, for messages
    std::vector<std::string> dirs;  // the directories holding the shards (where prep_data puts the model copy)
};
// flags: the flag of each pattern (--train-data, --val-data), which a file's error names first ("" or none: not)
ShardTokenizer shard_tokenizer(const std::vector<std::string>& patterns, const std::vector<std::string>& flags = {});

// Where a SentencePiece model file for these shards may be: `given` (a --spm-model flag: when the shards record a
// hash it must match, else this fails), then every *.model file in the shards' directories, then `fallbacks` (the
// built-in corpus's model). Returns the first whose hash matches the shards' hash; "" with *why set when none
// does or the shards record none (then only `given` is taken, trusting the user).
std::string find_spm_model_for(const ShardTokenizer& st, const std::string& given,
                               const std::vector<std::string>& fallbacks, std::string* why);

// Header field helpers for writers: the name is the file's base name, cut to what the header holds.
std::string tokenizer_file_base_name(const std::string& path);
