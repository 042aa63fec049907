// Tests for data/shard.h and data/dataloader.h. Each test works in a fresh mkdtemp directory under
// /tmp, removed afterwards; the built-in corpus is read in place from PRAC_DATA_DIR.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>  // mkfifo

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/files.h"  // read_file_bytes
#include "data/dataloader.h"
#include "data/tokenizer_id.h"
#include "data/shard.h"
#include "test/test_util.h"

#ifndef PRAC_DATA_DIR
#error "PRAC_DATA_DIR must point at the repository's data/ directory"
#endif


class DataTest : public ::testing::Test {
   protected:
    std::string dir;
    void SetUp() override {
        char tmpl[] = "/tmp/prac_test_data_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override { std::filesystem::remove_all(dir); }
    std::string path(const std::string& name) const { return dir + "/" + name; }
};

static void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
}

static std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

static void put_le32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) b[at + i] = (uint8_t)(v >> (8 * i));
}

// An llm.c-format file built byte by byte: magic, version, ntok, 253 zero ints, uint16 LE tokens.
static std::vector<uint8_t> llmc_bytes(const std::vector<uint16_t>& toks, uint32_t magic = 20240520,
                                       uint32_t version = 1) {
    std::vector<uint8_t> b(1024 + 2 * toks.size(), 0);
    put_le32(b, 0, magic);
    put_le32(b, 4, version);
    put_le32(b, 8, (uint32_t)toks.size());
    for (size_t i = 0; i < toks.size(); i++) {
        b[1024 + 2 * i] = (uint8_t)(toks[i] & 0xff);
        b[1024 + 2 * i + 1] = (uint8_t)(toks[i] >> 8);
    }
    return b;
}

static std::vector<uint16_t> iota_tokens(size_t n, uint16_t first = 0) {
    std::vector<uint16_t> t(n);
    for (size_t i = 0; i < n; i++) t[i] = (uint16_t)(first + i);
    return t;
}

static ShardInfo gpt2_info() {
    ShardInfo info;
    info.vocab_size = 50257;
    info.tokenizer = TOKENIZER_GPT2;
    info.eos_id = 50256;
    return info;
}

static ShardInfo rows_info(int row_len, int vocab = 1000) {
    ShardInfo info;
    info.vocab_size = vocab;
    info.layout = SHARD_LAYOUT_ROWS;
    info.row_len = row_len;
    info.tokenizer = TOKENIZER_SENTENCEPIECE;
    info.pad_id = 0;
    info.eos_id = 1;
    return info;
}

// ---------------------------------------------------------------------------------------------
// Shard format

TEST_F(DataTest, RoundTripFlat) {
    std::vector<uint16_t> toks = {50256, 15496, 995, 0, 50255, 13, 50256, 7};
    write_shard(path("a.bin"), toks, gpt2_info());
    EXPECT_EQ(std::filesystem::file_size(path("a.bin")), 1024u + 2 * toks.size());
    ShardInfo h = read_shard_header(path("a.bin"));
    EXPECT_EQ(h.num_tokens, (int64_t)toks.size());
    EXPECT_EQ(h.vocab_size, 50257);
    EXPECT_EQ(h.layout, SHARD_LAYOUT_FLAT);
    EXPECT_EQ(h.row_len, 0);
    EXPECT_EQ(h.tokenizer, TOKENIZER_GPT2);
    EXPECT_EQ(h.eos_id, 50256);
    ShardInfo h2;
    EXPECT_EQ(read_shard(path("a.bin"), &h2, 50257), toks);
    EXPECT_EQ(h2.num_tokens, (int64_t)toks.size());
    // Header bytes are exactly llm.c's for the first three fields, little-endian.
    std::vector<uint8_t> b = read_bytes(path("a.bin"));
    std::vector<uint8_t> ref = llmc_bytes(toks);
    EXPECT_TRUE(std::equal(ref.begin(), ref.begin() + 12, b.begin()));
    EXPECT_TRUE(std::equal(ref.begin() + 1024, ref.end(), b.begin() + 1024));
    // No temporary file is left behind by the atomic write.
    int n = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) n += (int)!e.path().empty();
    EXPECT_EQ(n, 1);
}

TEST_F(DataTest, RoundTripRows) {
    // Two rows of 6: doc + eos(1) + pads(0).
    std::vector<uint16_t> toks = {5, 6, 7, 1, 0, 0, 9, 8, 7, 6, 5, 1};
    write_shard(path("r.bin"), toks, rows_info(6));
    ShardInfo h;
    EXPECT_EQ(read_shard(path("r.bin"), &h), toks);
    EXPECT_EQ(h.layout, SHARD_LAYOUT_ROWS);
    EXPECT_EQ(h.row_len, 6);
    EXPECT_EQ(h.pad_id, 0);
    EXPECT_EQ(h.eos_id, 1);
    EXPECT_EQ(h.vocab_size, 1000);
    EXPECT_EQ(h.tokenizer, TOKENIZER_SENTENCEPIECE);
}

TEST_F(DataTest, OverwriteIsAtomicReplace) {
    write_shard(path("a.bin"), iota_tokens(10), ShardInfo());
    write_shard(path("a.bin"), iota_tokens(3, 7), ShardInfo());
    EXPECT_EQ(read_shard(path("a.bin")), iota_tokens(3, 7));
}

TEST_F(DataTest, HandMadeLlmcFileLoads) {
    std::vector<uint16_t> toks = iota_tokens(100, 50200);  // 50200..50299, above GPT-2 EOT too
    write_bytes(path("llmc.bin"), llmc_bytes(toks));
    ShardInfo h;
    EXPECT_EQ(read_shard(path("llmc.bin"), &h), toks);
    EXPECT_EQ(h.num_tokens, 100);
    EXPECT_EQ(h.vocab_size, 0);  // zero fields = llm.c defaults
    EXPECT_EQ(h.layout, SHARD_LAYOUT_FLAT);
    EXPECT_EQ(h.tokenizer, TOKENIZER_UNKNOWN);
    DataLoader dl(path("llmc.bin"), 1, 8, 0, 1, 0, false);
    std::vector<int32_t> x(8), y(8);
    dl.next_batch(x.data(), y.data());
    EXPECT_EQ(x[0], 50200);
    EXPECT_EQ(y[7], 50208);
}

TEST_F(DataTest, BadMagic) {
    write_bytes(path("m.bin"), llmc_bytes(iota_tokens(4), 12345));
    EXPECT_USER_ERROR(read_shard_header(path("m.bin")), "m.bin", "bad magic number 12345", "HINT");
    write_bytes(path("l3.bin"), llmc_bytes(iota_tokens(4), 20240801, 7));
    EXPECT_USER_ERROR(read_shard(path("l3.bin")), "l3.bin", "LLaMA-3", "uint32");
}

TEST_F(DataTest, WrongVersion) {
    write_bytes(path("v.bin"), llmc_bytes(iota_tokens(4), 20240520, 2));
    EXPECT_USER_ERROR(read_shard(path("v.bin")), "v.bin", "unsupported shard version 2");
}

TEST_F(DataTest, TruncatedFile) {
    std::vector<uint8_t> b = llmc_bytes(iota_tokens(50));
    b.pop_back();
    write_bytes(path("t.bin"), b);
    EXPECT_USER_ERROR(read_shard(path("t.bin")), "t.bin", "1123 bytes", "declares 50 tokens", "1124 bytes",
                      "file too short");
    b.resize(500);
    write_bytes(path("h.bin"), b);
    EXPECT_USER_ERROR(read_shard_header(path("h.bin")), "h.bin", "500 bytes", "1024-byte shard header");
}

TEST_F(DataTest, FileLongerThanDeclared) {
    std::vector<uint8_t> b = llmc_bytes(iota_tokens(50));
    b.push_back(0);
    b.push_back(0);
    write_bytes(path("long.bin"), b);
    EXPECT_USER_ERROR(read_shard_header(path("long.bin")), "long.bin", "file longer than declared");
}

TEST_F(DataTest, MissingFile) {
    EXPECT_USER_ERROR(read_shard(path("nope.bin")), "cannot open shard", "nope.bin");
}

// A data pattern that names an existing file is that file, glob characters and all (as prep_data reads --input):
// "a[1]_train.bin" matched no file ("no files match"), or, beside an "a1_train.bin", that other file. Otherwise the
// glob's matches, sorted by name.
TEST_F(DataTest, ExistingPathIsReadAsNamedGlobCharactersAndAll) {
    for (const char* name : {"a[1]_train.bin", "a1_train.bin", "a2_train.bin"})
        write_bytes(path(name), llmc_bytes(iota_tokens(40)));
    EXPECT_EQ(expand_data_pattern(path("a[1]_train.bin")), std::vector<std::string>{path("a[1]_train.bin")});
    EXPECT_EQ(expand_data_pattern(path("a[12]_train.bin")),
              (std::vector<std::string>{path("a1_train.bin"), path("a2_train.bin")}));
    EXPECT_TRUE(expand_data_pattern(path("b*_train.bin")).empty());
    DataLoader literal(path("a[1]_train.bin"), 2, 4, 0, 1, 1, false);
    EXPECT_EQ(literal.files(), std::vector<std::string>{path("a[1]_train.bin")});
}

// A named pipe as an input file is refused at once: its open() waited for a writer forever, the trainer hung without a
// word (--train-data, --val-data, --hellaswag, --model's config.json, prep_data's --gpt2-ranks). Without the check
// this test hangs until ctest's timeout fails it.
TEST_F(DataTest, NamedPipeIsRefusedNotWaitedOn) {
    ASSERT_EQ(mkfifo(path("pipe.bin").c_str(), 0600), 0);
    EXPECT_USER_ERROR(read_shard_header(path("pipe.bin")), "token shard", "pipe.bin is a named pipe (FIFO), not a file",
                      "HINT");
    EXPECT_USER_ERROR(read_file_bytes(path("pipe.bin")), "pipe.bin is a named pipe (FIFO)");
    EXPECT_USER_ERROR(sha256_file_hex(path("pipe.bin")), "tokenizer file", "named pipe");
    EXPECT_USER_ERROR(read_shard_header("/dev/null"), "/dev/null is a character device, not a file");
}

TEST_F(DataTest, InvalidLayoutFields) {
    std::vector<uint8_t> b = llmc_bytes(iota_tokens(10));
    put_le32(b, 16, 7);  // layout 7
    write_bytes(path("l.bin"), b);
    EXPECT_USER_ERROR(read_shard_header(path("l.bin")), "l.bin", "unknown layout 7");
    b = llmc_bytes(iota_tokens(10));
    put_le32(b, 16, 1);  // rows of 4, but 10 tokens
    put_le32(b, 20, 4);
    write_bytes(path("r.bin"), b);
    EXPECT_USER_ERROR(read_shard_header(path("r.bin")), "r.bin", "row length 4", "not a whole number of rows");
    put_le32(b, 20, 0);
    write_bytes(path("r0.bin"), b);
    EXPECT_USER_ERROR(read_shard_header(path("r0.bin")), "r0.bin", "row length in 2..");
    // The writer refuses what the reader would refuse.
    EXPECT_USER_ERROR(write_shard(path("w.bin"), iota_tokens(10), rows_info(4)), "not a whole number of rows");
    EXPECT_FALSE(std::filesystem::exists(path("w.bin")));
}

TEST_F(DataTest, EmptyShard) {
    write_shard(path("e.bin"), std::vector<uint16_t>(), gpt2_info());
    EXPECT_EQ(std::filesystem::file_size(path("e.bin")), 1024u);
    EXPECT_TRUE(read_shard(path("e.bin")).empty());  // a valid file...
    EXPECT_USER_ERROR(DataLoader(path("e.bin"), 1, 8, 0, 1, 0, false), "e.bin", "0 tokens",
                      "empty shard");  // ...but nothing to train on
    write_shard(path("er.bin"), std::vector<uint16_t>(), rows_info(8));
    EXPECT_USER_ERROR(DataLoader(path("er.bin"), 1, 8, 0, 1, 0, false), "er.bin", "empty");
}

TEST_F(DataTest, TokenIdAboveVocab) {
    std::vector<uint16_t> toks = {1, 2, 3, 60000, 4};
    write_shard(path("v.bin"), toks, ShardInfo());  // vocab unknown: the writer cannot check
    EXPECT_USER_ERROR(read_shard(path("v.bin"), nullptr, 50257), "v.bin", "token id 60000 at position 3",
                      "50257", "wrong tokenizer");
    EXPECT_USER_ERROR(DataLoader(path("v.bin"), 1, 2, 0, 1, 0, false, 50257).next_batch(
                          std::vector<int32_t>(2).data(), std::vector<int32_t>(2).data()),
                      "token id 60000 at position 3");
    // Header vocab larger than the model's: a GPT-2 shard fed to a model with an 8000-id vocabulary.
    write_shard(path("g.bin"), iota_tokens(10, 100), gpt2_info());
    EXPECT_USER_ERROR(DataLoader(path("g.bin"), 1, 2, 0, 1, 0, false, 8000), "g.bin", "50257", "8000",
                      "wrong tokenizer");
    // A token at or above the header's own vocab size: the file is corrupt.
    std::vector<uint8_t> b = llmc_bytes(toks);
    put_le32(b, 12, 1000);
    write_bytes(path("c.bin"), b);
    EXPECT_USER_ERROR(read_shard(path("c.bin")), "c.bin", "token id 60000 at position 3", "1000", "corrupt");
    // ...also read for a model (the trainers): the ids were checked against the model's vocabulary alone, not the
    // header's smaller one (such a shard trained with exit 0)
    std::vector<uint16_t> within_model = {1, 2, 3, 50000, 4};
    b = llmc_bytes(within_model);
    put_le32(b, 12, 1000);
    write_bytes(path("c2.bin"), b);
    EXPECT_USER_ERROR(read_shard(path("c2.bin"), nullptr, 50257), "c2.bin", "token id 50000 at position 3",
                      "vocabulary size 1000 declared in the header", "corrupt");
    EXPECT_USER_ERROR(write_shard(path("w.bin"), toks, rows_info(5, 1000)), "cannot write", "w.bin",
                      "token id 60000 at position 3", "1000");
    EXPECT_FALSE(std::filesystem::exists(path("w.bin")));
}

TEST_F(DataTest, GlobMatchesNothing) {
    std::string pat = path("nothing_*.bin");
    EXPECT_USER_ERROR(DataLoader(pat, 1, 8, 0, 1, 0, false), "no files match", pat.c_str(), "HINT");
}

// A lone shard without one whole sample is an error; among several (a stream's short last shard, as prep_data
// writes) it is skipped and contributes no samples.
TEST_F(DataTest, ShardSmallerThanOneSample) {
    write_shard(path("b.bin"), iota_tokens(8), ShardInfo());
    EXPECT_USER_ERROR(DataLoader(path("b.bin"), 1, 8, 0, 1, 0, false), "b.bin", "has 8 tokens", "T+1 = 9");
    write_shard(path("a.bin"), iota_tokens(100), ShardInfo());
    testing::internal::CaptureStderr();
    DataLoader dl(path("*.bin"), 1, 8, 0, 1, 0, false);
    std::string said = testing::internal::GetCapturedStderr();
    EXPECT_NE(said.find("b.bin has 8 tokens, fewer than the T+1 = 9 of one sample: skipped"), std::string::npos)
        << said;
    EXPECT_EQ(dl.samples_per_epoch(), (100 - 1) / 8);  // a.bin's windows only
    // said by rank 0 alone (each rank said it)
    testing::internal::CaptureStderr();
    DataLoader rank1(path("*.bin"), 1, 8, 1, 2, 0, false);
    said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(said.find("skipped"), std::string::npos) << said;
    std::vector<int32_t> in(8), tg(8);
    for (int64_t i = 0; i < dl.steps_per_epoch(); i++) {
        dl.next_batch(in.data(), tg.data());
        EXPECT_EQ(in[0], 8 * i) << "sample " << i << " must be a.bin's window " << i;
    }
}

// Tokens in shard tails that no sample reaches (each shard's last (tokens - 1) mod T) are said when the split leaves
// over 5% of the data unread beyond one stream's tail (7 shards of 100 tokens at T = 64: one sample of 65 each, 35%
// unread, was silent); not at 0.7%
TEST_F(DataTest, ShardTailsThatNoSampleReadsAreSaid) {
    for (int k = 0; k < 7; k++) write_shard(path(format("s%d.bin", k)), iota_tokens(100), ShardInfo());
    testing::internal::CaptureStderr();
    DataLoader many(path("s*.bin"), 1, 64, 0, 1, 0, false);
    std::string said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(many.samples_per_epoch(), 7);
    EXPECT_NE(said.find("245 of its 700 tokens (35%) are read by no sample"), std::string::npos) << said;
    write_shard(path("one.bin"), iota_tokens(1000), ShardInfo());  // 124 samples of 8 + 1: 7 tokens unread
    testing::internal::CaptureStderr();
    DataLoader one(path("one.bin"), 1, 8, 0, 1, 0, false);
    said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(said.find("read by no sample"), std::string::npos) << said;
    // one file leaves what one stream would (35% of s0.bin at T = 64): the split costs nothing, so nothing is said;
    // nor by the other ranks (rank 0 says it)
    testing::internal::CaptureStderr();
    DataLoader alone(path("s0.bin"), 1, 64, 0, 1, 0, false), rank1(path("s*.bin"), 1, 64, 1, 2, 0, false);
    said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(said.find("read by no sample"), std::string::npos) << said;
}

TEST_F(DataTest, TooFewSamplesForOneStep) {
    write_shard(path("a.bin"), iota_tokens(17), ShardInfo());  // 2 windows of 8+1
    EXPECT_NO_THROW(DataLoader(path("a.bin"), 2, 8, 0, 1, 0, false));
    EXPECT_USER_ERROR(DataLoader(path("a.bin"), 2, 8, 1, 2, 0, false), "2 samples", "num_ranks*B = 2*2");
    // enough tokens, but in shards shorter than a sample (a tiny prep_data --shard-tokens): said, with its fix
    for (int k = 0; k < 20; k++) write_shard(path(format("t%02d.bin", k)), iota_tokens(5), ShardInfo());
    EXPECT_USER_ERROR(DataLoader(path("t*.bin"), 2, 8, 0, 1, 0, false), "20 shard(s) give 0 samples",
                      "they hold 100 tokens, but a sample's T+1 lie within one shard and 20 of them are shorter",
                      "larger prep_data --shard-tokens");
}

TEST_F(DataTest, MismatchedShards) {
    write_shard(path("a.bin"), iota_tokens(64), rows_info(8));
    write_shard(path("b.bin"), iota_tokens(64), ShardInfo());
    EXPECT_USER_ERROR(DataLoader(path("*.bin"), 1, 8, 0, 1, 0, false), "b.bin", "layout flat", "layout rows");
    std::filesystem::remove(path("b.bin"));
    write_shard(path("c.bin"), iota_tokens(64), rows_info(16));
    EXPECT_USER_ERROR(DataLoader(path("*.bin"), 1, 8, 0, 1, 0, false), "c.bin", "row length 16");
    std::filesystem::remove(path("c.bin"));
    write_shard(path("d.bin"), iota_tokens(64), rows_info(8, 2000));
    EXPECT_USER_ERROR(DataLoader(path("*.bin"), 1, 8, 0, 1, 0, false), "d.bin", "2000", "1000",
                      "different tokenizers");
}

TEST_F(DataTest, RowLengthMustEqualT) {
    write_shard(path("r.bin"), iota_tokens(64), rows_info(16));
    EXPECT_USER_ERROR(DataLoader(path("r.bin"), 1, 8, 0, 1, 0, false), "r.bin", "rows of 16 tokens",
                      "sequence length T is 8", "T must equal the row length: pass --seq-len 16");
}

// ---------------------------------------------------------------------------------------------
// Loader

TEST_F(DataTest, FlatWindowsMatchStream) {
    // Two shards; token value = position in the concatenated stream, so offsets are visible.
    const int B = 2, T = 4;
    write_shard(path("s0.bin"), iota_tokens(21, 0), ShardInfo());    // (21-1)/4 = 5 windows
    write_shard(path("s1.bin"), iota_tokens(14, 100), ShardInfo());  // (14-1)/4 = 3 windows
    DataLoader dl(path("s*.bin"), B, T, 0, 1, 0, false);
    EXPECT_EQ(dl.samples_per_epoch(), 8);
    EXPECT_EQ(dl.steps_per_epoch(), 4);
    std::vector<int> starts = {0, 4, 8, 12, 16, 100, 104, 108};  // window starts, in order
    std::vector<int32_t> x(B * T), y(B * T);
    for (int epoch = 0; epoch < 2; epoch++) {
        for (int step = 0; step < 4; step++) {
            EXPECT_EQ(dl.epoch(), epoch);
            dl.next_batch(x.data(), y.data());
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) {
                    EXPECT_EQ(x[b * T + t], starts[step * B + b] + t);
                    EXPECT_EQ(y[b * T + t], starts[step * B + b] + t + 1);
                }
        }
    }
    EXPECT_EQ(dl.epoch(), 2);
    EXPECT_EQ(count_target_tokens(y.data(), y.size()), B * T);
}

// Reads one epoch on every rank; returns each rank's window starts (the first input token).
static std::vector<std::vector<int>> epoch_by_rank(const std::string& pat, int B, int T, int R, uint64_t seed,
                                                   bool shuffle) {
    std::vector<std::vector<int>> seen(R);
    for (int r = 0; r < R; r++) {
        DataLoader dl(pat, B, T, r, R, seed, shuffle);
        std::vector<int32_t> x(B * T), y(B * T);
        for (int64_t s = 0; s < dl.steps_per_epoch(); s++) {
            EXPECT_EQ(dl.epoch(), 0);
            dl.next_batch(x.data(), y.data());
            for (int b = 0; b < B; b++) {
                seen[r].push_back(x[b * T]);
                for (int t = 0; t < T; t++) {  // still a contiguous window
                    EXPECT_EQ(x[b * T + t], x[b * T] + t);
                    EXPECT_EQ(y[b * T + t], x[b * T] + t + 1);
                }
            }
        }
        EXPECT_EQ(dl.epoch(), 1);
    }
    return seen;
}

TEST_F(DataTest, RanksSeeDisjointSamplesCoveringTheEpoch) {
    const int B = 3, T = 5;
    // 3 shards with 7, 4 and 1 windows: 12 windows = 2 steps of 2 ranks x 3.
    write_shard(path("s0.bin"), iota_tokens(36, 0), ShardInfo());
    write_shard(path("s1.bin"), iota_tokens(21, 1000), ShardInfo());
    write_shard(path("s2.bin"), iota_tokens(6, 2000), ShardInfo());
    std::set<int> all;
    for (int w = 0; w < 7; w++) all.insert(w * T);
    for (int w = 0; w < 4; w++) all.insert(1000 + w * T);
    all.insert(2000);
    for (bool shuffle : {false, true}) {
        auto seen = epoch_by_rank(path("s*.bin"), B, T, 2, 42, shuffle);
        std::set<int> s0(seen[0].begin(), seen[0].end()), s1(seen[1].begin(), seen[1].end());
        EXPECT_EQ(s0.size(), seen[0].size());
        EXPECT_EQ(s1.size(), seen[1].size());
        std::vector<int> both;
        std::set_intersection(s0.begin(), s0.end(), s1.begin(), s1.end(), std::back_inserter(both));
        EXPECT_TRUE(both.empty()) << "shuffle=" << shuffle;
        std::set<int> uni = s0;
        uni.insert(s1.begin(), s1.end());
        EXPECT_EQ(uni, all) << "shuffle=" << shuffle;
    }
    // With one more window the epoch has 13: the incomplete last step (1 sample) is dropped.
    write_shard(path("s2.bin"), iota_tokens(11, 2000), ShardInfo());
    auto seen = epoch_by_rank(path("s*.bin"), B, T, 2, 42, false);
    EXPECT_EQ(seen[0].size() + seen[1].size(), 12u);
}

TEST_F(DataTest, ShuffleIsSeededAndVariesPerEpoch) {
    const int T = 4;
    write_shard(path("s0.bin"), iota_tokens(401, 0), ShardInfo());      // 100 windows
    write_shard(path("s1.bin"), iota_tokens(401, 1000), ShardInfo());
    write_shard(path("s2.bin"), iota_tokens(401, 2000), ShardInfo());
    auto order = [&](uint64_t seed, bool shuffle, int epochs) {
        DataLoader dl(path("s*.bin"), 1, T, 0, 1, seed, shuffle);
        std::vector<int32_t> x(T), y(T), out;
        for (int64_t i = 0; i < epochs * dl.steps_per_epoch(); i++) {
            dl.next_batch(x.data(), y.data());
            out.push_back(x[0]);
        }
        return out;
    };
    std::vector<int32_t> plain = order(7, false, 1), a = order(7, true, 2), b = order(7, true, 2),
                         c = order(8, true, 2);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    std::vector<int32_t> a0(a.begin(), a.begin() + 300), a1(a.begin() + 300, a.end());
    EXPECT_NE(a0, plain);
    EXPECT_NE(a0, a1);  // a new permutation every epoch...
    std::sort(a0.begin(), a0.end());
    std::sort(a1.begin(), a1.end());
    EXPECT_EQ(a0, plain);  // ...of the same samples
    EXPECT_EQ(a1, plain);
    // Shard order is permuted too: over a few seeds, the first sample comes from more than one shard.
    std::set<int> first_shards;
    for (uint64_t s = 0; s < 8; s++) first_shards.insert(order(s, true, 1)[0] / 1000);
    EXPECT_GT(first_shards.size(), 1u);
}

TEST_F(DataTest, ShuffleOrderIsPortable) {
    // The order depends only on mt19937_64 (standardized) and our own code, so it is pinned here:
    // a different standard library must give the same numbers.
    write_shard(path("s.bin"), iota_tokens(41, 0), ShardInfo());  // 10 windows of T=4
    DataLoader dl(path("s.bin"), 1, 4, 0, 1, 1234, true);
    std::vector<int32_t> x(4), y(4), got;
    for (int i = 0; i < 10; i++) {
        dl.next_batch(x.data(), y.data());
        got.push_back(x[0] / 4);
    }
    // Computed independently by test/reference/shuffle_order.py (mt19937_64 from its published definition, checked
    // against the standard's 10000th-output value, + splitmix64 + Fisher-Yates).
    std::vector<int32_t> expect = {9, 4, 7, 5, 1, 6, 2, 8, 3, 0};
    EXPECT_EQ(got, expect);
}

TEST_F(DataTest, RowLayoutTargets) {
    const int T = 6;
    // Row 0: doc 5 6 7 + eos 1 + 2 pads. Row 1: doc fills the row (truncated, eos last).
    std::vector<uint16_t> toks = {5, 6, 7, 1, 0, 0, 9, 8, 7, 6, 5, 1};
    write_shard(path("r.bin"), toks, rows_info(T));
    DataLoader dl(path("r.bin"), 2, T, 0, 1, 0, false);
    EXPECT_EQ(dl.steps_per_epoch(), 1);
    std::vector<int32_t> x(2 * T), y(2 * T);
    dl.next_batch(x.data(), y.data());
    std::vector<int32_t> ex = {5, 6, 7, 1, 0, 0, 9, 8, 7, 6, 5, 1};
    std::vector<int32_t> ey = {6, 7, 1, -1, -1, -1, 8, 7, 6, 5, 1, -1};
    EXPECT_EQ(x, ex);
    EXPECT_EQ(y, ey);
    EXPECT_EQ(count_target_tokens(y.data(), y.size()), 3 + 5);
    EXPECT_EQ(dl.epoch(), 1);
}

// --sample's start on rows (DataLoader::document_start): the first token of a row, every row alike, over all the
// shards (rows of 4 in two shards of 5 and 3 rows; row r starts with 10 + r). 8,000 draws of mt19937_64: each row's
// count is Binomial(8000, 1/8), mean 1000, sd 29.6, outside 1000 +- 180 (6 sd) by chance about once in 5e8 per row.
// The ends of the draw's range take the first row and the last; flat shards have no rows. read_shard_token reads
// each token as read_shard does, and refuses an index outside the shard and an id outside the model's vocabulary;
// a shard rewritten since the run began is refused.
TEST_F(DataTest, DocumentStartIsARowsFirstTokenEveryRowAlike) {
    const int T = 4;
    std::vector<uint16_t> rows;
    for (int r = 0; r < 8; r++) rows.insert(rows.end(), {(uint16_t)(10 + r), 50, 60, 1});
    write_shard(path("d0.bin"), std::vector<uint16_t>(rows.begin(), rows.begin() + 5 * T), rows_info(T));
    write_shard(path("d1.bin"), std::vector<uint16_t>(rows.begin() + 5 * T, rows.end()), rows_info(T));
    DataLoader dl(path("d*.bin"), 1, T, 0, 1, 0, false);
    std::map<int32_t, int> count;
    std::mt19937_64 rng(11);
    for (int i = 0; i < 8000; i++) count[dl.document_start(rng())]++;
    ASSERT_EQ(count.size(), 8u) << "a token that starts no row, or a row never drawn";
    for (int r = 0; r < 8; r++) EXPECT_NEAR(count[10 + r], 1000, 180) << "row " << r;
    EXPECT_EQ(dl.document_start(0), 10);
    EXPECT_EQ(dl.document_start(~0ull), 17);
    for (size_t i = 0; i < 5 * T; i++) EXPECT_EQ(read_shard_token(path("d0.bin"), (int64_t)i), rows[i]) << i;
    for (int64_t bad : {-1, 5 * T}) {
        const std::string says = format("token %lld asked for, but the shard holds 20", (long long)bad);
        EXPECT_USER_ERROR(read_shard_token(path("d0.bin"), bad), says.c_str());
    }
    EXPECT_USER_ERROR(read_shard_token(path("d0.bin"), 0, 8), "the model's vocabulary has only 8");
    ShardInfo unknown = rows_info(T);  // an unknown tokenizer: "an unknown" (it was "a unknown")
    unknown.tokenizer = TOKENIZER_UNKNOWN;
    unknown.tokenizer_hash = 0;
    unknown.tokenizer_name.clear();
    write_shard(path("u0.bin"), rows, unknown);
    EXPECT_USER_ERROR(read_shard_token(path("u0.bin"), 0, 8), "written by an unknown tokenizer with");
    // a shard rewritten during the run (its rows counted at the start): refused, not read at what is no row's start
    write_shard(path("d1.bin"), std::vector<uint16_t>(rows.begin() + 5 * T, rows.end() - T), rows_info(T));
    EXPECT_USER_ERROR(dl.document_start(~0ull), "d1.bin changed during the run: it held 12 tokens when the run began "
                                                "and holds 8 now");
    write_shard(path("d1.bin"), std::vector<uint16_t>(rows.begin() + 5 * T, rows.end()), rows_info(2));
    EXPECT_USER_ERROR(dl.document_start(~0ull), "d1.bin changed during the run: it held rows of 4 tokens when the "
                                                "run began and holds rows of 2 now");
    write_shard(path("flat.bin"), iota_tokens(64), gpt2_info());
    DataLoader flat(path("flat.bin"), 1, T, 0, 1, 0, false);
    EXPECT_USER_ERROR(flat.document_start(0), "a document's first token is drawn from rows, not layout flat");
}

// Only the pads after a row's EOS are ignored: the pad id is also a token of the text when the tokenizer has no pad
// (GPT-2's rows take any id as --pad-id; every '!' was dropped from the loss with pad 0). With pad == EOS (a choice
// prep_data warns about) the document's EOS is still a target, and the pads after it are not.
TEST_F(DataTest, RowTargetsIgnoreOnlyThePadsAfterTheEos) {
    const int T = 6;
    std::vector<uint16_t> toks = {5, 0, 7, 1, 0, 0,   // pad 0 inside the document
                                  1, 0, 0, 0, 0, 0};  // an empty document
    write_shard(path("p.bin"), toks, rows_info(T));
    DataLoader dl(path("p.bin"), 2, T, 0, 1, 0, false);
    std::vector<int32_t> x(2 * T), y(2 * T);
    dl.next_batch(x.data(), y.data());
    EXPECT_EQ(y, (std::vector<int32_t>{0, 7, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));

    ShardInfo same = rows_info(T);
    same.pad_id = 1;  // == EOS
    write_shard(path("e.bin"), {5, 6, 1, 1, 1, 1, 9, 8, 7, 6, 5, 1}, same);
    DataLoader de(path("e.bin"), 2, T, 0, 1, 0, false);
    de.next_batch(x.data(), y.data());
    EXPECT_EQ(y, (std::vector<int32_t>{6, 1, -1, -1, -1, -1, 8, 7, 6, 5, 1, -1}));
}

// A shard rewritten while a run reads it (prep_data --overwrite under a running job) was read past its end, its
// samples counted from the header of the run's start: refused when it is loaded again.
TEST_F(DataTest, AShardRewrittenDuringTheRunIsRefused) {
    const int T = 4;
    write_shard(path("a0.bin"), iota_tokens(41, 0), ShardInfo());
    write_shard(path("a1.bin"), iota_tokens(41, 100), ShardInfo());
    DataLoader dl(path("a*.bin"), 1, T, 0, 1, 0, false);
    std::vector<int32_t> x(T), y(T);
    dl.next_batch(x.data(), y.data());  // a0 loaded
    write_shard(path("a1.bin"), iota_tokens(9, 100), ShardInfo());
    try {
        for (int i = 0; i < 10; i++) dl.next_batch(x.data(), y.data());
        FAIL() << "a shortened shard was read";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("a1.bin changed during the run: it held 41 tokens when the run began "
                                             "and holds 9 now"), std::string::npos) << e.what();
    }
}

// Shards of llm.c (no tokenizer recorded) go with shards that record one, as data/README.md says zero means unknown
// (llm.c's val shards beside our train shards were refused); shards of two known tokenizers are still refused.
TEST_F(DataTest, LlmcShardsAgreeWithAnyTokenizer) {
    ShardInfo gpt2;
    gpt2.tokenizer = TOKENIZER_GPT2;
    gpt2.vocab_size = 50257;
    gpt2.tokenizer_hash = 0x1234;
    gpt2.tokenizer_name = "gpt2_ranks.txt";
    write_shard(path("t_llmc.bin"), iota_tokens(40), ShardInfo());
    write_shard(path("t_ours.bin"), iota_tokens(40), gpt2);
    ShardTokenizer st = shard_tokenizer({path("t_*.bin")});
    EXPECT_EQ(st.kind, TOKENIZER_GPT2);
    EXPECT_EQ(st.hash, 0x1234u);
    ShardInfo spm = rows_info(4);
    spm.layout = SHARD_LAYOUT_FLAT, spm.row_len = 0;
    write_shard(path("t_spm.bin"), iota_tokens(40), spm);
    try {
        shard_tokenizer({path("t_*.bin")});
        FAIL() << "shards of two tokenizers were accepted";
    } catch (const UserError& e) {
        EXPECT_NE(std::string(e.what()).find("t_ours.bin with the GPT-2 BPE tokenizer gpt2_ranks.txt (hash"),
                  std::string::npos)
            << e.what();
    }
}

TEST_F(DataTest, StateSaveRestoreResumesExactly) {
    const int B = 2, T = 4;
    write_shard(path("s0.bin"), iota_tokens(41, 0), ShardInfo());
    write_shard(path("s1.bin"), iota_tokens(29, 1000), ShardInfo());
    write_shard(path("s2.bin"), iota_tokens(17, 2000), ShardInfo());  // 10+7+4 = 21 windows, 5 steps of 2x2
    for (bool shuffle : {false, true}) {
        for (int r = 0; r < 2; r++) {
            DataLoader dl(path("s*.bin"), B, T, r, 2, 99, shuffle);
            std::vector<int32_t> x(B * T), y(B * T);
            for (int i = 0; i < 8; i++) dl.next_batch(x.data(), y.data());  // into epoch 1
            DataLoaderState st = dl.get_state();
            EXPECT_EQ(st.epoch, 1);
            auto read5 = [&](DataLoader& d) {
                std::vector<int32_t> out;
                for (int i = 0; i < 5; i++) {  // crosses into epoch 2
                    d.next_batch(x.data(), y.data());
                    out.insert(out.end(), x.begin(), x.end());
                    out.insert(out.end(), y.begin(), y.end());
                }
                return out;
            };
            std::vector<int32_t> first = read5(dl);
            EXPECT_EQ(dl.epoch(), 2);
            dl.set_state(st);
            EXPECT_EQ(dl.epoch(), 1);
            EXPECT_EQ(read5(dl), first) << "shuffle=" << shuffle << " rank=" << r;
            // A fresh loader (a resumed run) restores from the same state, on any rank.
            DataLoader fresh(path("s*.bin"), B, T, r, 2, 99, shuffle);
            fresh.set_state(st);
            EXPECT_EQ(read5(fresh), first);
        }
    }
    // States that cannot belong to this loader are refused.
    DataLoader dl(path("s*.bin"), B, T, 0, 2, 99, true);
    DataLoaderState bad = dl.get_state();
    bad.shard_index = 3;
    EXPECT_USER_ERROR(dl.set_state(bad), "does not fit this loader", "HINT");
    bad = dl.get_state();
    bad.sample_index = 1;  // not the start of a step
    EXPECT_USER_ERROR(dl.set_state(bad), "does not fit this loader");
}

// A resume by another number of ranks (same B) continues the global sample order where the writer stopped: after
// 3 steps of one rank (6 of 21 samples), two ranks' steps read samples 6-9, 10-13, ... (rank 0 the first two of
// each four), which one rank would have read next; the epoch then ends with the last whole step (3 steps: 18
// samples) and the next epoch is the two-rank run's own epoch 1. A state taken mid-way (at sample 10, not a step
// start of a fresh two-rank loader) restores the same continuation; a writer's position with no whole step of the
// new ranks left moves to the next epoch; a position that is no multiple of B is still refused.
TEST_F(DataTest, AnotherNumberOfRanksContinuesTheSameSamples) {
    const int B = 2, T = 4;
    write_shard(path("s0.bin"), iota_tokens(41, 0), ShardInfo());
    write_shard(path("s1.bin"), iota_tokens(29, 1000), ShardInfo());
    write_shard(path("s2.bin"), iota_tokens(17, 2000), ShardInfo());  // 21 windows
    for (bool shuffle : {false, true}) {
        std::vector<int32_t> x(B * T), y(B * T);
        auto step = [&](DataLoader& d) {
            d.next_batch(x.data(), y.data());
            std::vector<int32_t> out(x);
            out.insert(out.end(), y.begin(), y.end());
            return out;
        };
        auto joined = [&](DataLoader& first, DataLoader& second) {  // inputs of both batches, then their targets
            std::vector<int32_t> a = step(first), b = step(second), out;
            for (auto* v : {&a, &b}) out.insert(out.end(), v->begin(), v->begin() + B * T);
            for (auto* v : {&a, &b}) out.insert(out.end(), v->begin() + B * T, v->end());
            return out;
        };
        // one step of both ranks (rank 0's samples first), and two steps of one rank as one step of two
        auto two_ranks = [&](DataLoader& r0, DataLoader& r1) { return joined(r0, r1); };
        auto one_rank_twice = [&](DataLoader& d) { return joined(d, d); };
        DataLoader one(path("s*.bin"), B, T, 0, 1, 7, shuffle);
        for (int i = 0; i < 3; i++) step(one);
        const DataLoaderState st = one.get_state();
        DataLoader r0(path("s*.bin"), B, T, 0, 2, 7, shuffle), r1(path("s*.bin"), B, T, 1, 2, 7, shuffle);
        r0.set_state(st);
        r1.set_state(st);
        EXPECT_EQ(two_ranks(r0, r1), one_rank_twice(one)) << "samples 6-9, shuffle=" << shuffle;
        const DataLoaderState mid = r0.get_state();  // at sample 10
        EXPECT_EQ(r1.get_state().sample_index, mid.sample_index);
        DataLoader q0(path("s*.bin"), B, T, 0, 2, 7, shuffle), q1(path("s*.bin"), B, T, 1, 2, 7, shuffle);
        q0.set_state(mid);
        q1.set_state(mid);
        for (int i = 0; i < 2; i++) {
            std::vector<int32_t> want = one_rank_twice(one);
            EXPECT_EQ(two_ranks(r0, r1), want) << "step " << i + 2 << ", shuffle=" << shuffle;
            EXPECT_EQ(two_ranks(q0, q1), want) << "restored mid-way, step " << i + 2 << ", shuffle=" << shuffle;
        }
        EXPECT_EQ(r0.epoch(), 1) << "samples 18-20 are no whole step of two ranks";
        DataLoader f0(path("s*.bin"), B, T, 0, 2, 7, shuffle), f1(path("s*.bin"), B, T, 1, 2, 7, shuffle);
        for (int i = 0; i < 5; i++) two_ranks(f0, f1);  // a whole first epoch of two ranks
        ASSERT_EQ(f0.epoch(), 1);
        std::vector<int32_t> epoch1 = two_ranks(f0, f1);
        EXPECT_EQ(two_ranks(r0, r1), epoch1) << "shuffle=" << shuffle;

        DataLoader late(path("s*.bin"), B, T, 0, 1, 7, shuffle);
        for (int i = 0; i < 9; i++) step(late);  // at sample 18: one step of one rank left, none of two
        DataLoader l0(path("s*.bin"), B, T, 0, 2, 7, shuffle), l1(path("s*.bin"), B, T, 1, 2, 7, shuffle);
        l0.set_state(late.get_state());
        l1.set_state(late.get_state());
        EXPECT_EQ(l0.epoch(), 1);
        EXPECT_EQ(two_ranks(l0, l1), epoch1) << "shuffle=" << shuffle;
    }
}

TEST_F(DataTest, ResetRewinds) {
    write_shard(path("s.bin"), iota_tokens(401), ShardInfo());
    DataLoader dl(path("s.bin"), 2, 4, 0, 1, 5, true);
    std::vector<int32_t> x(8), y(8), first;
    dl.next_batch(x.data(), y.data());
    first = x;
    for (int i = 0; i < 70; i++) dl.next_batch(x.data(), y.data());
    EXPECT_EQ(dl.epoch(), 1);
    dl.reset();
    EXPECT_EQ(dl.epoch(), 0);
    dl.next_batch(x.data(), y.data());
    EXPECT_EQ(x, first);
}

TEST(CountTargets, IgnoresMinusOne) {
    std::vector<int32_t> y = {-1, 0, 5, -1, 50256, 3};
    EXPECT_EQ(count_target_tokens(y.data(), y.size()), 4);
    EXPECT_EQ(count_target_tokens(y.data(), 0), 0);
}

// ---------------------------------------------------------------------------------------------
// Built-in corpus. Expected ids come from data/make_builtin_corpus.py, i.e. from tiktoken and
// sentencepiece directly (also in data/builtin/expected_ids.txt), not from reading our shards.

static const std::string BUILTIN = std::string(PRAC_DATA_DIR) + "/builtin/";

static std::string b64decode(const std::string& s) {
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (char c : s) {
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;
        if (v < 0) continue;  // '=' padding
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back((char)((acc >> bits) & 0xff));
        }
    }
    return out;
}

// Decodes GPT-2 ids with the vendored r50k ranks (rank = id), independently of any project code.
static std::string gpt2_decode(const std::vector<uint16_t>& ids) {
    std::map<int, std::string> bytes;
    std::ifstream in(std::string(PRAC_DATA_DIR) + "/gpt2/r50k_base.tiktoken");
    std::string b64;
    int rank;
    while (in >> b64 >> rank) bytes[rank] = b64decode(b64);
    bytes[50256] = "<|endoftext|>";
    std::string out;
    for (uint16_t id : ids) out += bytes.at(id);
    return out;
}

TEST(BuiltinCorpus, Gpt2ShardsLoadAndMatchTiktoken) {
    const std::vector<uint16_t> train16 = {50256, 3620, 5673, 198,   198,   3886, 12091, 2517,
                                           268,   628,  628,  198,   44558, 38340, 314,  628};
    const std::vector<uint16_t> val16 = {50256, 30946, 84,    4247, 628, 198, 1525, 198,
                                         198,   41083, 2517,  268,  198, 198, 7,    1507};
    ShardInfo h;
    std::vector<uint16_t> train = read_shard(BUILTIN + "austen_gpt2_train.bin", &h, 50257);
    EXPECT_EQ(h.num_tokens, 878254);
    EXPECT_EQ(h.vocab_size, 50257);
    EXPECT_EQ(h.tokenizer, TOKENIZER_GPT2);
    EXPECT_EQ(h.layout, SHARD_LAYOUT_FLAT);
    EXPECT_EQ(h.eos_id, 50256);
    EXPECT_EQ(std::vector<uint16_t>(train.begin(), train.begin() + 16), train16);
    EXPECT_EQ(std::count(train.begin(), train.end(), 50256), 5);  // one EOT before each novel
    EXPECT_EQ(gpt2_decode(std::vector<uint16_t>(train.begin(), train.begin() + 9)),
              "<|endoftext|>EMMA\n\nBy Jane Austen");
    std::vector<uint16_t> val = read_shard(BUILTIN + "austen_gpt2_val.bin", &h, 50257);
    EXPECT_EQ(h.num_tokens, 115080);
    EXPECT_EQ(std::vector<uint16_t>(val.begin(), val.begin() + 16), val16);
    EXPECT_EQ(gpt2_decode(std::vector<uint16_t>(val.begin(), val.begin() + 4)), "<|endoftext|>Persuasion");

    // Trainable as shipped: GPT-2 small's T=1024 on 2 ranks.
    DataLoader dl(BUILTIN + "austen_gpt2_*.bin", 4, 1024, 1, 2, 1337, true, 50257);
    EXPECT_EQ(dl.files().size(), 2u);
    std::vector<int32_t> x(4 * 1024), y(4 * 1024);
    dl.next_batch(x.data(), y.data());
    EXPECT_EQ(count_target_tokens(y.data(), y.size()), 4 * 1024);
    // GPT-2 shards for a model with an 8000-id vocabulary (the built-in LLaMA tokenizer's) are refused.
    EXPECT_USER_ERROR(DataLoader(BUILTIN + "austen_gpt2_val.bin", 4, 64, 0, 1, 0, false, 8000), "50257", "8000",
                      "wrong tokenizer");
}

TEST(BuiltinCorpus, LlamaShardsLoadAndMatchSentencePiece) {
    const std::vector<uint16_t> train16 = {1379, 1716, 1716, 774,  1,    529,  220,  170,
                                           5409, 1,    2601, 2324, 6679, 6388, 14,   1};
    const std::vector<uint16_t> val16 = {1308, 7920, 1,    43,   1,    170, 5409, 1,
                                         441,  3856, 4995, 3856, 4995, 426, 1,    511};
    ShardInfo h;
    std::vector<uint16_t> train = read_shard(BUILTIN + "austen_llama_train.bin", &h, 8000);
    EXPECT_EQ(h.num_tokens, 802603);
    EXPECT_EQ(h.vocab_size, 8000);
    EXPECT_EQ(h.tokenizer, TOKENIZER_SENTENCEPIECE);
    EXPECT_EQ(h.layout, SHARD_LAYOUT_FLAT);
    EXPECT_EQ(h.eos_id, 1);
    EXPECT_EQ(std::vector<uint16_t>(train.begin(), train.begin() + 16), train16);
    EXPECT_EQ(train.back(), 1);  // every paragraph ends with EOS
    std::vector<uint16_t> val = read_shard(BUILTIN + "austen_llama_val.bin", &h, 8000);
    EXPECT_EQ(h.num_tokens, 110627);
    EXPECT_EQ(std::vector<uint16_t>(val.begin(), val.begin() + 16), val16);
    EXPECT_EQ(std::count(val.begin(), val.end(), 0), 0);  // no pad id inside a flat stream
    DataLoader dl(BUILTIN + "austen_llama_train.bin", 8, 256, 0, 1, 0, false, 8000);
    EXPECT_GT(dl.steps_per_epoch(), 300);
    EXPECT_TRUE(std::filesystem::exists(BUILTIN + "austen_spm8k.model"));
}
