#include "data/shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/files.h"  // refuse_special_file
#include "common/kill_point.h"

// The format is little-endian and we read it with plain fread into native ints.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shard I/O assumes a little-endian host");

// llm.c's other token formats, recognized only to say what they are.
static const int32_t LLMC_LLAMA3_MAGIC = 20240801;  // version 7, uint32 tokens
static const int32_t LLMC_EVAL_MAGIC = 20240522;    // HellaSwag/MMLU multiple-choice eval files

const char* shard_layout_name(int32_t layout) {
    switch (layout) {
        case SHARD_LAYOUT_FLAT: return "flat";
        case SHARD_LAYOUT_ROWS: return "rows";
        default: return "invalid";
    }
}

const char* tokenizer_kind_name(int32_t kind) {
    switch (kind) {
        case TOKENIZER_UNKNOWN: return "unknown";
        case TOKENIZER_GPT2: return "GPT-2 BPE";
        case TOKENIZER_SENTENCEPIECE: return "SentencePiece";
        default: return "invalid";
    }
}

// The ids a header's pad and EOS may take, for errors (a vocabulary size of 0 is unknown: llm.c's shards).
static std::string id_range(const ShardInfo& h) {
    return h.vocab_size > 0 ? format("the vocabulary (size %d)", h.vocab_size)
                            : std::string("the token range 0..65535 (tokens are uint16; the header's vocabulary size "
                                          "is 0, unknown)");
}

// Checks the fields that do not depend on the file: shared by the writer and the reader so the
// writer can never produce a file the reader rejects.
static void check_header_fields(const std::string& path, const ShardInfo& h) {
    CHECK_USER(h.num_tokens >= 0, "%s: header declares %lld tokens (negative): the file is corrupt",
               path.c_str(), (long long)h.num_tokens);
    CHECK_USER(h.vocab_size >= 0 && h.vocab_size <= 65536,
               "%s: header vocab size %d is outside 0..65536 (tokens are uint16)\n"
               "---> HINT: the file is corrupt or not a token shard",
               path.c_str(), h.vocab_size);
    CHECK_USER(h.tokenizer >= TOKENIZER_UNKNOWN && h.tokenizer <= TOKENIZER_SENTENCEPIECE,
               "%s: header tokenizer kind %d is not 0 (unknown), 1 (GPT-2) or 2 (SentencePiece)",
               path.c_str(), h.tokenizer);
    if (h.layout == SHARD_LAYOUT_FLAT) {
        CHECK_USER(h.row_len == 0, "%s: flat layout (header[4]=0) but row length header[5]=%d; it must be 0",
                   path.c_str(), h.row_len);
    } else if (h.layout == SHARD_LAYOUT_ROWS) {
        CHECK_USER(h.row_len >= 2 && h.row_len <= SHARD_ROW_LEN_MAX,
                   "%s: row layout (header[4]=1) needs a row length in 2..%d in header[5], got %d", path.c_str(),
                   SHARD_ROW_LEN_MAX, h.row_len);
        CHECK_USER(h.num_tokens % h.row_len == 0,
                   "%s: row layout with row length %d, but %lld tokens is not a whole number of rows",
                   path.c_str(), h.row_len, (long long)h.num_tokens);
        CHECK_USER(h.pad_id >= 0 && h.pad_id < 65536 && (h.vocab_size == 0 || h.pad_id < h.vocab_size),
                   "%s: pad id %d is outside %s", path.c_str(), h.pad_id, id_range(h).c_str());
    } else {
        fail("%s: unknown layout %d in header[4]; known: 0 (flat stream), 1 (rows)\n"
             "---> HINT: the shard was written by a newer version of this program, or is corrupt",
             path.c_str(), h.layout);
    }
    if (h.layout == SHARD_LAYOUT_FLAT)
        CHECK_USER(h.pad_id == 0, "%s: flat layout (header[4]=0) but pad id header[7]=%d; it must be 0",
                   path.c_str(), h.pad_id);
    CHECK_USER(h.eos_id >= 0 && h.eos_id < 65536 && (h.vocab_size == 0 || h.eos_id < h.vocab_size),
               "%s: EOS id %d is outside %s", path.c_str(), h.eos_id, id_range(h).c_str());
    // The tokenizer's identity: a hash and a name together, of a known kind, the name a plain file name.
    CHECK_USER((h.tokenizer_hash == 0) == h.tokenizer_name.empty() && (h.tokenizer_hash == 0 || h.tokenizer != 0),
               "%s: the header's tokenizer fields disagree (kind %d, file hash %016llx, file name \"%s\"): a hash "
               "needs a name and a known kind\n---> HINT: the file is corrupt; re-create it with prep_data",
               path.c_str(), h.tokenizer, (unsigned long long)h.tokenizer_hash, h.tokenizer_name.c_str());
    CHECK_USER(h.tokenizer_name.size() < (size_t)SHARD_NAME_BYTES,
               "%s: tokenizer file name of %zu bytes does not fit the header (at most %d)", path.c_str(),
               h.tokenizer_name.size(), SHARD_NAME_BYTES - 1);
    for (unsigned char c : h.tokenizer_name)
        CHECK_USER(c >= 0x20 && c != 0x7F && c != '/',
                   "%s: the header's tokenizer file name holds byte 0x%02x (a control character or '/'): it must be "
                   "a plain file name\n---> HINT: the file is corrupt; re-create it with prep_data",
                   path.c_str(), (unsigned)c);
}

void check_token_ids(const std::string& what, const ShardInfo& info, const uint16_t* tokens, size_t n,
                     int model_vocab) {
    if (model_vocab > 0 && info.vocab_size > model_vocab) {
        fail("%s: written by %s %s tokenizer with %d token ids, but the model's vocabulary has only %d\n"
             "---> HINT: wrong tokenizer for this model? Use shards tokenized for this model, or a model "
             "whose vocab_size is at least %d",
             what.c_str(), info.tokenizer == TOKENIZER_UNKNOWN ? "an" : "a", tokenizer_kind_name(info.tokenizer),
             info.vocab_size, model_vocab, info.vocab_size);
    }
    // the smaller of the two known sizes (the header's is at most the model's, checked above; 0: unknown, llm.c's)
    const int limit = info.vocab_size > 0 ? info.vocab_size : model_vocab;
    if (limit <= 0 || limit >= 65536) return;  // nothing to check: every uint16 fits
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] >= limit) {
            if (model_vocab > 0 && tokens[i] >= model_vocab) {
                fail("%s: token id %u at position %zu is >= the model's vocabulary size %d\n"
                     "---> HINT: wrong tokenizer for this model? (shard header: vocab %d, tokenizer %s). "
                     "Re-tokenize the text with the model's tokenizer, or pick the matching shards",
                     what.c_str(), (unsigned)tokens[i], i, model_vocab, info.vocab_size,
                     tokenizer_kind_name(info.tokenizer));
            }
            fail("%s: token id %u at position %zu is >= the vocabulary size %d declared in the header\n"
                 "---> HINT: the file is corrupt or its header is wrong; regenerate it",
                 what.c_str(), (unsigned)tokens[i], i, info.vocab_size);
        }
    }
}

static void header_to_ints(const ShardInfo& info, size_t num_tokens, int32_t* h) {
    std::memset(h, 0, SHARD_HEADER_BYTES);
    h[0] = SHARD_MAGIC;
    h[1] = SHARD_VERSION;
    h[2] = (int32_t)num_tokens;
    h[3] = info.vocab_size;
    h[4] = info.layout;
    h[5] = info.row_len;
    h[6] = info.tokenizer;
    h[7] = info.pad_id;
    h[8] = info.eos_id;
    h[9] = (int32_t)(uint32_t)(info.tokenizer_hash & 0xFFFFFFFFu);
    h[10] = (int32_t)(uint32_t)(info.tokenizer_hash >> 32);
    std::memcpy(h + SHARD_NAME_INT, info.tokenizer_name.data(), info.tokenizer_name.size());  // checked: < 256
}

void write_shard(const std::string& path, const uint16_t* tokens, size_t num_tokens, const ShardInfo& info) {
    // header[2] is an int32, like llm.c's; llm.c's own shards are 1e8 tokens.
    CHECK_USER(num_tokens <= (size_t)INT32_MAX, "%s: %zu tokens do not fit one shard (at most %d)\n"
               "---> HINT: split the data into several shards", path.c_str(), num_tokens, INT32_MAX);
    ShardInfo h = info;
    h.num_tokens = (int64_t)num_tokens;
    check_header_fields(path, h);
    for (size_t i = 0; h.vocab_size > 0 && i < num_tokens; i++)
        CHECK_USER(tokens[i] < h.vocab_size,
                   "cannot write %s: token id %u at position %zu is >= the vocabulary size %d given for it\n"
                   "---> HINT: the tokenizer and the vocab_size passed to write_shard disagree",
                   path.c_str(), (unsigned)tokens[i], i, h.vocab_size);

    int32_t header[SHARD_HEADER_INTS];
    header_to_ints(h, num_tokens, header);

    // Temporary name in the same directory, so rename() is atomic (same filesystem).
    std::string tmp = path + ".tmp." + std::to_string((long long)getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    CHECK_USER(f, "cannot create %s: %s\n---> HINT: does the directory exist and is it writable?", tmp.c_str(),
               std::strerror(errno));
    bool ok = std::fwrite(header, 1, SHARD_HEADER_BYTES, f) == SHARD_HEADER_BYTES;
    if (ok && num_tokens > 0) ok = std::fwrite(tokens, sizeof(uint16_t), num_tokens, f) == num_tokens;
    ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        fail("cannot write %s: %s\n---> HINT: is the disk full?", tmp.c_str(), std::strerror(err));
    }
    kill_point("shard.temporary_written");
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        err = errno;
        std::remove(tmp.c_str());
        fail("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(err));
    }
    // Make the rename itself durable. Best effort: some filesystems refuse fsync on directories.
    size_t slash = path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
}

void write_shard(const std::string& path, const std::vector<uint16_t>& tokens, const ShardInfo& info) {
    write_shard(path, tokens.data(), tokens.size(), info);
}

// Opens `path`, reads and validates the header; returns the open file positioned at the tokens.
static FILE* open_shard(const std::string& path, ShardInfo* out) {
    refuse_special_file(path, "token shard");
    FILE* f = std::fopen(path.c_str(), "rb");
    CHECK_USER(f, "cannot open shard %s: %s", path.c_str(), std::strerror(errno));
    struct stat st{};
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        std::fclose(f);
        if (S_ISDIR(st.st_mode))
            fail("%s is a directory, not a token shard\n---> HINT: name the shards in it with a pattern, e.g. "
                 "'%s/*.bin' (quoted: the program expands it)", path.c_str(), path.c_str());
        fail("%s is not a regular file, not a token shard", path.c_str());
    }
    long long size = (long long)st.st_size;
    int32_t h[SHARD_HEADER_INTS];
    if (size < (long long)SHARD_HEADER_BYTES || std::fread(h, 1, SHARD_HEADER_BYTES, f) != SHARD_HEADER_BYTES) {
        std::fclose(f);
        fail("%s: file has %lld bytes, less than the 1024-byte shard header: truncated or not a token shard",
             path.c_str(), size);
    }
    if (h[0] != SHARD_MAGIC) {
        std::fclose(f);
        if (h[0] == LLMC_LLAMA3_MAGIC)
            fail("%s: this is llm.c's LLaMA-3 shard format (magic %d, uint32 tokens), which is not supported\n"
                 "---> HINT: re-tokenize into uint16 shards (magic %d)",
                 path.c_str(), LLMC_LLAMA3_MAGIC, SHARD_MAGIC);
        if (h[0] == LLMC_EVAL_MAGIC)
            fail("%s: this is an llm.c multiple-choice eval file (magic %d), not a token shard", path.c_str(),
                 LLMC_EVAL_MAGIC);
        fail("%s: bad magic number %d (expected %d): not a token shard\n"
             "---> HINT: headerless uint16 files (nanoGPT's train.bin) need the 1024-byte header; "
             "re-create the shard with this project's data tools",
             path.c_str(), h[0], SHARD_MAGIC);
    }
    if (h[1] != SHARD_VERSION) {
        std::fclose(f);
        fail("%s: unsupported shard version %d (expected %d)", path.c_str(), h[1], SHARD_VERSION);
    }
    ShardInfo info;
    info.num_tokens = h[2];
    info.vocab_size = h[3];
    info.layout = h[4];
    info.row_len = h[5];
    info.tokenizer = h[6];
    info.pad_id = h[7];
    info.eos_id = h[8];
    info.tokenizer_hash = (uint64_t)(uint32_t)h[9] | ((uint64_t)(uint32_t)h[10] << 32);
    const char* name = (const char*)(h + SHARD_NAME_INT);
    size_t name_len = strnlen(name, SHARD_NAME_BYTES);
    if (name_len == (size_t)SHARD_NAME_BYTES) {
        std::fclose(f);
        fail("%s: the header's tokenizer file name (bytes %d..%d) has no terminating NUL: the file is corrupt",
             path.c_str(), SHARD_NAME_INT * 4, SHARD_NAME_INT * 4 + SHARD_NAME_BYTES - 1);
    }
    info.tokenizer_name.assign(name, name_len);
    for (size_t i = name_len; i < (size_t)SHARD_NAME_BYTES; i++)
        if (name[i] != 0) {
            std::fclose(f);
            fail("%s: the header's tokenizer file name has bytes after its terminating NUL (byte %zu): the file is "
                 "corrupt", path.c_str(), SHARD_NAME_INT * 4 + i);
        }
    // Ints this version does not use must be 0 (llm.c's files: all of them past [2]); anything else is a newer
    // format or damage, and guessing would be wrong.
    for (int i = 11; i < SHARD_HEADER_INTS; i++) {
        if (i == SHARD_NAME_INT) i += SHARD_NAME_BYTES / 4;
        if (h[i] != 0) {
            std::fclose(f);
            fail("%s: header int %d is %d, but this version of the format leaves it 0\n"
                 "---> HINT: the shard is corrupt, or was written by a newer version of this program", path.c_str(),
                 i, h[i]);
        }
    }
    if (info.num_tokens >= 0) {
        long long expect = (long long)SHARD_HEADER_BYTES + 2LL * info.num_tokens;
        if (size != expect) {
            std::fclose(f);
            fail("%s: file has %lld bytes, but its header declares %lld tokens, i.e. %lld bytes (%s)\n"
                 "---> HINT: %s; copy or regenerate it",
                 path.c_str(), size, (long long)info.num_tokens, expect,
                 size < expect ? "file too short" : "file longer than declared",
                 size < expect ? "the file was cut short (interrupted copy or download?) or is corrupt"
                               : "something was appended to the file, or its header is wrong");
        }
    }
    try {
        check_header_fields(path, info);
    } catch (...) {
        std::fclose(f);
        throw;
    }
    *out = info;
    return f;
}

ShardInfo read_shard_header(const std::string& path) {
    ShardInfo info;
    std::fclose(open_shard(path, &info));
    return info;
}

uint16_t read_shard_token(const std::string& path, int64_t index, int model_vocab) {
    ShardInfo info;
    FILE* f = open_shard(path, &info);  // (positioned after the header)
    uint16_t token = 0;
    const bool inside = index >= 0 && index < info.num_tokens;
    const bool got = inside && fseeko(f, (off_t)(SHARD_HEADER_BYTES + 2 * (size_t)index), SEEK_SET) == 0 &&
                     std::fread(&token, sizeof token, 1, f) == 1;
    std::fclose(f);
    CHECK_USER(inside, "%s: token %lld asked for, but the shard holds %lld", path.c_str(), (long long)index,
               (long long)info.num_tokens);
    CHECK_USER(got, "%s: cannot read token %lld: the file changed while reading?", path.c_str(), (long long)index);
    check_token_ids(format("%s (its token %lld)", path.c_str(), (long long)index), info, &token, 1, model_vocab);
    return token;
}

std::vector<uint16_t> read_shard(const std::string& path, ShardInfo* info_out, int model_vocab) {
    ShardInfo info;
    FILE* f = open_shard(path, &info);
    std::vector<uint16_t> tokens((size_t)info.num_tokens);
    size_t got = tokens.empty() ? 0 : std::fread(tokens.data(), sizeof(uint16_t), tokens.size(), f);
    std::fclose(f);
    CHECK_USER(got == tokens.size(), "%s: read %zu of %zu tokens: the file changed while reading?", path.c_str(),
               got, tokens.size());
    check_token_ids(path, info, tokens.data(), tokens.size(), model_vocab);
    if (info_out) *info_out = info;
    return tokens;
}
