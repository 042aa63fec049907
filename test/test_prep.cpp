// Tests for data/spm_tokenizer.h and the ./prep_data tool (tools/prep_data/). The fixtures and the
// expected token counts/hashes come from test/reference/make_prep_fixtures.py (tiktoken and python
// sentencepiece, cross-checked with Debian's spm_encode), so nothing here is computed by the code under test.
// prep_data runs as a subprocess from the repository root; each test writes into a fresh mkdtemp directory.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <signal.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "data/dataloader.h"
#include "data/shard.h"
#include "data/spm_tokenizer.h"
#include "test/test_util.h"

#ifndef PRAC_SOURCE_DIR
#error "PRAC_SOURCE_DIR must point at the repository root"
#endif

namespace fs = std::filesystem;
using json = nlohmann::json;

// Paths below are relative to the repository root (ctest runs us there; a manual run may not).
static const int chdir_to_root = chdir(PRAC_SOURCE_DIR);

static const char* FX = "test/fixtures/prep/";
static const char* AUSTEN_MODEL = "data/builtin/austen_spm8k.model";


// Both tokenizers are optional in the build (PCRE2 for GPT-2, libsentencepiece for SentencePiece): tests
// that need a missing one are skipped, not failed.
#if PRAC_HAVE_PCRE2
#define REQUIRE_GPT2()
#else
#define REQUIRE_GPT2() GTEST_SKIP() << "built without PCRE2: no GPT-2 tokenizer"
#endif
#if PRAC_HAVE_SENTENCEPIECE
#define REQUIRE_SPM()
#else
#define REQUIRE_SPM() GTEST_SKIP() << "built without SentencePiece"
#endif

static const json& expected() {
    static json j = [] {
        std::ifstream in(std::string(FX) + "expected.json");
        EXPECT_TRUE(in.good()) << "missing " << FX << "expected.json: run test/reference/make_prep_fixtures.py";
        return json::parse(in);
    }();
    return j;
}

static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

static std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// FNV-1a 64 of tokens as little-endian uint16 bytes (what make_prep_fixtures.py writes).
static std::string fnv64(const std::vector<uint16_t>& t) {
    uint64_t h = 0xCBF29CE484222325ULL;
    for (uint16_t v : t)
        for (uint8_t b : {(uint8_t)(v & 0xFF), (uint8_t)(v >> 8)}) h = (h ^ b) * 0x100000001B3ULL;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)h);
    return buf;
}

struct PrepRun {
    int rc = -1;
    std::string out;  // stdout and stderr together
};

class Prep : public ::testing::Test {
   protected:
    std::string dir;
    void SetUp() override {
        ASSERT_EQ(chdir_to_root, 0) << "cannot chdir to " << PRAC_SOURCE_DIR;
        ASSERT_TRUE(fs::exists("prep_data")) << "./prep_data is not built (cmake --build build --target prep_data)";
        char tmpl[] = "/tmp/prac_test_prep_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir = tmpl;
    }
    void TearDown() override { fs::remove_all(dir); }
    std::string path(const std::string& name) const { return dir + "/" + name; }

    // rc: the exit status, 128 + the signal for a process killed by one (as a shell says it)
    PrepRun prep(const std::vector<std::string>& args, const std::string& env = "") const {
        std::string cmd = env + (env.empty() ? "" : " ") + "./prep_data";
        for (const auto& a : args) cmd += " " + shell_quote(a);
        std::string log = dir + "/log.txt";
        cmd += " > " + shell_quote(log) + " 2>&1 < /dev/null";
        int st = std::system(cmd.c_str());
        PrepRun r;
        r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
        r.out = slurp(log);
        return r;
    }
    PrepRun prep_ok(const std::vector<std::string>& args) const {
        PrepRun r = prep(args);
        EXPECT_EQ(r.rc, 0) << r.out;
        return r;
    }
    // Expects a failure (exit 1) whose output contains every part.
    void prep_fails(const std::vector<std::string>& args, const std::vector<std::string>& parts) const {
        PrepRun r = prep(args);
        EXPECT_EQ(r.rc, 1) << r.out;
        EXPECT_NE(r.out.find("prep_data: error:"), std::string::npos) << r.out;
        for (const auto& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "lacks \"" << p << "\":\n" << r.out;
    }

    std::vector<std::string> shards(const std::string& prefix, const char* split) const {
        std::vector<std::string> v;
        for (int k = 0; fs::exists(format("%s_%s_%06d.bin", prefix.c_str(), split, k)); k++)
            v.push_back(format("%s_%s_%06d.bin", prefix.c_str(), split, k));
        return v;
    }
    std::vector<uint16_t> tokens(const std::string& prefix, const char* split, ShardInfo* info = nullptr) const {
        std::vector<uint16_t> all;
        for (const auto& p : shards(prefix, split)) {
            auto t = read_shard(p, info);
            all.insert(all.end(), t.begin(), t.end());
        }
        return all;
    }
    // All output files of a run (shards and state), name -> bytes.
    std::map<std::string, std::string> outputs(const std::string& prefix) const {
        std::map<std::string, std::string> m;
        for (const char* s : {"train", "val"})
            for (const auto& p : shards(prefix, s)) m[p.substr(prefix.size())] = slurp(p);  // "_train_000000.bin"
        return m;
    }
    // Writes `given` and `reference` as JSON lines, prepares each (GPT-2, no validation split) and expects the same
    // shards: `given` reads as `reference` says. Returns the run of `given`.
    PrepRun expect_jsonl_reads_as(const std::string& given, const std::string& reference) const {
        std::ofstream(path("given.jsonl")) << given;
        std::ofstream(path("reference.jsonl")) << reference;
        PrepRun r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("given.jsonl"), "--out", path("a")});
        prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("reference.jsonl"), "--out", path("b")});
        auto a = outputs(path("a")), b = outputs(path("b"));
        EXPECT_EQ(a.size(), 1u);
        EXPECT_TRUE(a == b);
        return r;
    }

    // Runs an expected.json case and compares each split with the expectation.
    void check_case(const std::string& name, const std::vector<std::string>& extra = {}) {
        const json& c = expected()["cases"][name];
        ASSERT_FALSE(c.is_null()) << name;
        std::vector<std::string> args = c["args"].get<std::vector<std::string>>();
        // the cases without a validation option expect none (prep_data's default is now 1% of the documents)
        bool val = false;
        for (const auto& a : args) val = val || a.rfind("--val", 0) == 0 || a == "c4" || a == "owt";
        for (const auto& a : extra) val = val || a.rfind("--val", 0) == 0;
        if (!val) args.push_back("--no-val");
        std::string out = path(name);
        args.push_back("--out");
        args.push_back(out);
        args.insert(args.end(), extra.begin(), extra.end());
        PrepRun r = prep_ok(args);
        if (r.rc != 0) return;
        for (const char* s : {"train", "val"}) {
            SCOPED_TRACE(std::string(name) + " " + s);
            if (!c.contains(s)) {
                EXPECT_TRUE(shards(out, s).empty());
                continue;
            }
            const json& e = c[s];
            ShardInfo info;
            auto t = tokens(out, s, &info);
            EXPECT_EQ((int64_t)t.size(), e["tokens"].get<int64_t>());
            EXPECT_EQ(fnv64(t), e["fnv"].get<std::string>());
            std::vector<uint16_t> first(t.begin(), t.begin() + std::min<size_t>(16, t.size()));
            EXPECT_EQ(first, e["first"].get<std::vector<uint16_t>>());
            // Documents, counted from the tokens: EOS/EOT per document, or one row each.
            int64_t docs = 0;
            if (info.layout == SHARD_LAYOUT_ROWS) {
                docs = (int64_t)t.size() / info.row_len;
            } else {
                for (uint16_t v : t) docs += v == info.eos_id;
            }
            EXPECT_EQ(docs, e["docs"].get<int64_t>());
            if (info.layout == SHARD_LAYOUT_ROWS) {
                EXPECT_NE(r.out.find(with_commas_(e["truncated"].get<int64_t>()) + " truncated"), std::string::npos)
                    << r.out;
            }
        }
    }
    // Runs `args` with --max-shards n, then with --resume until it finishes (an interrupted run every n
    // shards); returns the number of runs.
    int resume_until_done(std::vector<std::string> args, int n, std::string* log) const {
        args.insert(args.end(), {"--max-shards", std::to_string(n)});
        int runs = 0;
        for (;;) {
            auto a = args;
            if (runs > 0) a.push_back("--resume");
            PrepRun r = prep(a);
            *log += r.out;
            runs++;
            EXPECT_EQ(r.rc, 0) << r.out;
            if (r.rc != 0 || r.out.find("stopped after") == std::string::npos || runs > 60) break;
        }
        return runs;
    }
    static std::string with_commas_(long long v) {
        std::string s = std::to_string(v), o;
        for (size_t i = 0; i < s.size(); i++) {
            if (i > 0 && (s.size() - i) % 3 == 0) o += ',';
            o += s[i];
        }
        return o;
    }
};

// ---------------------------------------------------------------------------------------------------------
// SpmTokenizer
// ---------------------------------------------------------------------------------------------------------

#if PRAC_HAVE_SENTENCEPIECE

TEST(SpmTokenizer, LoadsTheAustenModelWithT5Ids) {
    SpmTokenizer t(AUSTEN_MODEL);
    EXPECT_EQ(t.vocab_size(), 8000);
    EXPECT_EQ(t.eos_id(), 1u);
    EXPECT_EQ(t.pad_id(), 0);
    EXPECT_EQ(t.unk_id(), 2);
    EXPECT_EQ(t.bos_id(), -1);
    EXPECT_EQ(t.kind(), TOKENIZER_SENTENCEPIECE);
    EXPECT_NE(t.name().find("austen_spm8k.model"), std::string::npos);
}

// The ids of the first paragraphs of Pride and Prejudice, as Debian's spm_encode and python
// sentencepiece give them (the fixture script checks that the two agree).
TEST(SpmTokenizer, EncodesLikeSpmEncode) {
    SpmTokenizer t(AUSTEN_MODEL);
    const json& paras = expected()["spm_paragraphs"];
    ASSERT_GE(paras.size(), 10u);
    for (const auto& p : paras) {
        std::vector<uint32_t> ids;
        t.encode(p["text"].get<std::string>(), ids);
        EXPECT_EQ(ids, p["ids"].get<std::vector<uint32_t>>()) << p["text"];
    }
}

// Every paragraph of Pride and Prejudice against Debian's spm_encode, the CLI of the library we link.
TEST(SpmTokenizer, MatchesSpmEncodeOnAWholeNovel) {
    if (std::system("command -v spm_encode > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "spm_encode not installed (apt-get install sentencepiece)";
    std::vector<std::string> paras;
    std::istringstream in(slurp("data/austen/pride-and-prejudice.txt"));
    std::string line, cur;
    while (std::getline(in, line)) {
        bool blank = line.find_first_not_of(" \t\r") == std::string::npos;
        if (!blank) cur += (cur.empty() ? "" : " ") + line;
        if (blank && !cur.empty()) paras.push_back(cur), cur.clear();
    }
    if (!cur.empty()) paras.push_back(cur);
    ASSERT_GT(paras.size(), 1000u);
    char tmpl[] = "/tmp/prac_test_spm_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string txt = std::string(tmpl) + "/paras.txt", ids = std::string(tmpl) + "/ids.txt";
    {
        std::ofstream f(txt);
        for (auto& p : paras) f << p << "\n";
    }
    ASSERT_EQ(std::system(("spm_encode --model=" + std::string(AUSTEN_MODEL) + " --output_format=id < " + txt +
                           " > " + ids).c_str()),
              0);
    std::istringstream got(slurp(ids));
    SpmTokenizer t(AUSTEN_MODEL);
    size_t n = 0, differ = 0;
    for (auto& p : paras) {
        ASSERT_TRUE(std::getline(got, line));
        std::vector<uint32_t> want, mine;
        std::istringstream ls(line);
        for (uint32_t v; ls >> v;) want.push_back(v);
        t.encode(p, mine);
        differ += mine != want;
        n++;
    }
    EXPECT_EQ(differ, 0u) << "of " << n << " paragraphs";
    fs::remove_all(tmpl);
}

TEST(SpmTokenizer, AddsNoBosOrEosAndAppends) {
    SpmTokenizer t(AUSTEN_MODEL);
    std::vector<uint32_t> ids;
    t.encode("", ids);
    EXPECT_TRUE(ids.empty());
    t.encode("It is a truth universally acknowledged.", ids);
    ASSERT_FALSE(ids.empty());
    EXPECT_NE(ids.back(), t.eos_id());
    size_t n = ids.size();
    t.encode("It is a truth universally acknowledged.", ids);  // appends
    ASSERT_EQ(ids.size(), 2 * n);
    EXPECT_TRUE(std::equal(ids.begin(), ids.begin() + (long)n, ids.begin() + (long)n));
}

TEST(SpmTokenizer, DecodeInvertsEncodeOnNormalizedText) {
    SpmTokenizer t(AUSTEN_MODEL);
    std::string text = "Mr. Bennet was so odd a mixture of quick parts, sarcastic humour, reserve, and caprice.";
    std::vector<uint32_t> ids;
    t.encode(text, ids);
    EXPECT_EQ(t.decode(ids.data(), ids.size()), text);
    uint32_t eos = t.eos_id();
    EXPECT_EQ(t.decode(&eos, 1), "");  // control pieces decode to nothing
    uint32_t bad = 8000;
    EXPECT_USER_ERROR(t.decode(&bad, 1), "8000");
}

TEST(SpmTokenizer, EncodesTheSameFromManyThreads) {
    SpmTokenizer t(AUSTEN_MODEL);
    const json& paras = expected()["spm_paragraphs"];
    std::vector<std::thread> th;
    std::vector<int> ok(4, 1);
    for (int k = 0; k < 4; k++)
        th.emplace_back([&, k] {
            for (int rep = 0; rep < 20; rep++)
                for (const auto& p : paras) {
                    std::vector<uint32_t> ids;
                    t.encode(p["text"].get<std::string>(), ids);
                    if (ids != p["ids"].get<std::vector<uint32_t>>()) ok[k] = 0;
                }
        });
    for (auto& x : th) x.join();
    EXPECT_EQ(ok, std::vector<int>(4, 1));
}

TEST(SpmTokenizer, MissingModelFileNamesItAndTheDownload) {
    EXPECT_USER_ERROR(SpmTokenizer("/nonexistent/spiece.model"), "/nonexistent/spiece.model",
                      "No such file", "huggingface-cli download google-t5/t5-base spiece.model");
    EXPECT_USER_ERROR(SpmTokenizer("test/fixtures/prep"), "not a regular file");
}

TEST(SpmTokenizer, CorruptModelFilesAreRefused) {
    EXPECT_USER_ERROR(SpmTokenizer(std::string(FX) + "bad/not_a_model.model"), "not_a_model.model",
                      "is not a valid SentencePiece model", "HINT");
    // A model cut in half (an interrupted download).
    char tmpl[] = "/tmp/prac_test_spm_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string half = std::string(tmpl) + "/half.model";
    std::string bytes = slurp(AUSTEN_MODEL);
    std::ofstream(half, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    EXPECT_USER_ERROR(SpmTokenizer{half}, "half.model", "is not a valid SentencePiece model");
    std::ofstream(half, std::ios::binary | std::ios::trunc).flush();  // empty file
    EXPECT_USER_ERROR(SpmTokenizer{half}, "half.model");
    fs::remove_all(tmpl);
}

TEST(SpmTokenizer, ModelWithoutEosIsRefused) {
    EXPECT_USER_ERROR(SpmTokenizer(std::string(FX) + "noeos.model"), "noeos.model", "has no EOS piece",
                      "--eos_id");
}

#else

TEST(SpmTokenizer, WithoutSentencePieceConstructionFailsWithTheFix) {
    EXPECT_USER_ERROR(SpmTokenizer{AUSTEN_MODEL}, "no SentencePiece support", "apt-get install libsentencepiece-dev");
}

#endif

// What a .model says of its kind, read from its protobuf bytes as sentencepiece_model.proto defines them
// (ModelProto { trainer_spec = 2; normalizer_spec = 3 }, TrainerSpec { model_type = 3 (UNIGRAM 1, BPE 2, WORD 3,
// CHAR 4); byte_fallback = 35 }, NormalizerSpec { name = 1 }): messages built here by that definition, and the
// built-in model (unigram, nmt_nfkc: data/README.md).
namespace {
std::string pb_varint(uint64_t v) {
    std::string s;
    for (; v >= 0x80; v >>= 7) s += (char)(0x80 | (v & 0x7F));
    return s + (char)v;
}
std::string pb_int(int field, uint64_t v) { return pb_varint((uint64_t)field << 3) + pb_varint(v); }
std::string pb_bytes(int field, const std::string& b) {
    return pb_varint((uint64_t)field << 3 | 2) + pb_varint(b.size()) + b;
}
}  // namespace

TEST(SpmModelKind, ReadsTheTrainerAndNormalizerSpecs) {
    const SpmModelKind austen = spm_model_kind(slurp(AUSTEN_MODEL), AUSTEN_MODEL);
    EXPECT_EQ(austen.model_type, "unigram");
    EXPECT_EQ(austen.normalizer, "nmt_nfkc");
    EXPECT_FALSE(austen.byte_fallback);
    EXPECT_EQ(spm_t5_mismatch(austen), "");
    // a LLaMA-style model: BPE, identity normalization, byte fallback; a piece (field 1) and other fields around
    const std::string piece = pb_bytes(1, pb_bytes(1, "\xe2\x96\x81the") + std::string("\x15\x00\x00\x80\xbf", 5));  // score: a fixed32
    const std::string llama = piece + pb_bytes(2, pb_int(4, 32000) + pb_int(3, 2) + pb_int(35, 1)) +
                              pb_bytes(3, pb_bytes(1, "identity") + pb_int(3, 1));
    const SpmModelKind k = spm_model_kind(llama, "llama.model");
    EXPECT_EQ(k.model_type, "bpe");
    EXPECT_EQ(k.normalizer, "identity");
    EXPECT_TRUE(k.byte_fallback);
    EXPECT_EQ(spm_t5_mismatch(k), "model type bpe, normalization identity, byte fallback");
    // absent fields are the proto's defaults (unigram, no byte fallback); a char model is named
    EXPECT_EQ(spm_model_kind(pb_bytes(2, pb_int(3, 4)), "c.model").model_type, "char");
    EXPECT_EQ(spm_t5_mismatch(spm_model_kind(piece, "p.model")), "");
    // bytes that are no protobuf message: a length past the end, a text file
    EXPECT_USER_ERROR(spm_model_kind(pb_varint(2 << 3 | 2) + pb_varint(99) + "ab", "cut.model"), "cut.model",
                      "not a SentencePiece model");
    EXPECT_USER_ERROR(spm_model_kind(slurp("README.md"), "README.md"), "README.md");
}

// ---------------------------------------------------------------------------------------------------------
// prep_data: formats and layouts against the independently computed expectations
// ---------------------------------------------------------------------------------------------------------

TEST_F(Prep, HelpDocumentsPresetsFormatsResumeAndDownloads) {
    PrepRun r = prep_ok({"--help"});
    for (const char* s :
         {"prep_data c4", "prep_data owt", "--input", "--val-input", "--text-field", "--doc-sep", "--tokenizer",
          "--spm-model", "--layout", "--row-len", "--shard-tokens", "--val-docs", "--val-fraction", "--val-seed",
          "--resume", "--max-shards", "--threads", ".json.gz", ".jsonl", ".zst", ".xz", "tar",
          "GIT_LFS_SKIP_SMUDGE=1 git clone https://huggingface.co/datasets/allenai/c4",
          "git lfs pull --include \"en/*\"", "3834942", "Skylion007/openwebtext", "parquet",
          "huggingface-cli download google-t5/t5-base spiece.model", "SplitMix64", "byte-identical"})
        EXPECT_NE(r.out.find(s), std::string::npos) << "help lacks " << s;
    PrepRun none = prep({});
    EXPECT_EQ(none.rc, 1);
    EXPECT_NE(none.out.find("usage: prep_data"), std::string::npos);
}

// The built-in corpus was made by data/make_builtin_corpus.py with tiktoken: prep_data must write the very
// same bytes (each novel = EOT + its tokens, in this order).
TEST_F(Prep, ReproducesTheBuiltinGpt2ShardByteForByte) {
    REQUIRE_GPT2();
    std::vector<std::string> args = {"--tokenizer", "gpt2", "--input"};
    for (const char* n : {"emma", "mansfield-park", "northanger-abbey", "pride-and-prejudice", "sense-and-sensibility"})
        args.push_back(std::string("data/austen/") + n + ".txt");
    args.insert(args.end(), {"--no-val", "--out", path("austen")});
    prep_ok(args);
    ASSERT_EQ(shards(path("austen"), "train").size(), 1u);
    EXPECT_TRUE(slurp(path("austen_train_000000.bin")) == slurp("data/builtin/austen_gpt2_train.bin"));
}

// ... and with SentencePiece, each paragraph (blank-line separated) = ids + EOS, as the builtin llama shard.
TEST_F(Prep, ReproducesTheBuiltinSpmShardByteForByte) {
    REQUIRE_SPM();
    PrepRun r = prep_ok({"--tokenizer", "spm", "--spm-model", AUSTEN_MODEL, "--doc-sep", "blank", "--no-val", "--input",
                     "data/austen/emma.txt", "data/austen/mansfield-park.txt", "data/austen/northanger-abbey.txt",
                     "data/austen/pride-and-prejudice.txt", "data/austen/sense-and-sensibility.txt", "--out",
                     path("five")});
    EXPECT_TRUE(slurp(path("five_train_000000.bin")) == slurp("data/builtin/austen_llama_train.bin"));
    EXPECT_NE(r.out.find("9,263 docs"), std::string::npos) << r.out;
}

TEST_F(Prep, JsonGzWithGpt2) {
    REQUIRE_GPT2();
    check_case("gpt2_json_gz");
    ShardInfo h = read_shard_header(path("gpt2_json_gz_train_000000.bin"));
    EXPECT_EQ(h.layout, SHARD_LAYOUT_FLAT);
    EXPECT_EQ(h.tokenizer, TOKENIZER_GPT2);
    EXPECT_EQ(h.vocab_size, 50257);
    EXPECT_EQ(h.eos_id, 50256);
    EXPECT_EQ(h.row_len, 0);
}

TEST_F(Prep, JsonlZstWithAnotherTextField) {
    REQUIRE_GPT2();
    check_case("gpt2_zst_content");
}
TEST_F(Prep, JsonXzWithSentencePieceFlat) {
    REQUIRE_SPM();
    check_case("spm_flat_xz");
}
TEST_F(Prep, DirectoryOfTxtRepairsInvalidUtf8AndSkipsEmptyFiles) {
    REQUIRE_GPT2();
    check_case("gpt2_dir");
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--input", std::string(FX) + "texts", "--out", path("again")});
    EXPECT_NE(r.out.find("1 with invalid UTF-8 repaired"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("skipped 1 empty document\n"), std::string::npos) << r.out;
    // the directory's other files are said, not skipped silently (a .jsonl beside .txt files was never read)
    EXPECT_NE(r.out.find("texts: read its 4 .txt file(s); 1 other file(s) there are not read (the first by name: " +
                         std::string(FX) + "texts/notes.md)"),
              std::string::npos) << r.out;
}
// A file whose name is not UTF-8 (a Latin-1 name) is an input like any other: its path goes into PREFIX_prep.json
// as \xNN (JSON text must be UTF-8: writing it stopped the run with an internal error after its first shard, and
// every rerun and --resume after it failed), and a --resume of the run finds it again.
TEST_F(Prep, AFileNameThatIsNotUtf8IsAnInput) {
    REQUIRE_GPT2();
    const std::string in = path("in");
    fs::create_directories(in);
    fs::copy_file(std::string(FX) + "texts/a.txt", in + "/caf\xe9.txt");  // Latin-1 e-acute: not UTF-8
    const std::vector<std::string> args = {"--tokenizer", "gpt2", "--input", in, "--out", path("latin1")};
    PrepRun r = prep(args);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(slurp(path("latin1_prep.json")).find("caf\\\\xe9.txt"), std::string::npos);  // JSON's "\\xe9"
    std::vector<std::string> again = args;
    again.push_back("--resume");
    r = prep(again);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("nothing to do"), std::string::npos) << r.out;
}

// Text as Python's open() reads it (universal newlines, "utf-8-sig"): a classic Mac file (lines ending in a lone
// CR: it was one document) and a file with a UTF-8 byte order mark (its tokens began the first document) make the
// shards of the same text with LF lines, byte for byte. UTF-16 and UTF-32 (a byte order mark, or NULs between the
// characters) are refused, naming the conversion: they were one document of NUL-separated characters, exit 0.
TEST_F(Prep, LineEndingsByteOrderMarksAndUtf16) {
    REQUIRE_GPT2();
    const std::string lf = slurp("data/austen/emma.txt").substr(0, 60000);
    std::string cr = lf;
    std::replace(cr.begin(), cr.end(), '\n', '\r');
    std::string utf16le, utf32be;
    for (char c : lf.substr(0, 2000)) {  // (the first 2000 bytes are ASCII)
        utf16le += std::string(1, c) + '\0';
        utf32be += std::string(3, '\0') + c;
    }
    const std::string nul_separated("id\0name\0", 8);  // UTF-8 with NULs: text (tiktoken: 312 188 3672 188)
    // a short first line: "Hi\n" is 6 bytes, "H\0i\0\n", too few to judge by (the file was read as UTF-8, exit 0)
    const std::string short_first_line = std::string("H\0i\0\n\0\n\0", 8) + utf16le;
    const std::pair<const char*, std::string> files[] = {{"lf.txt", lf}, {"cr.txt", cr}, {"bom.txt", "\xef\xbb\xbf" + lf},
                                                         {"utf16.txt", "\xff\xfe" + utf16le}, {"utf16le.txt", utf16le},
                                                         {"utf32be.txt", utf32be}, {"utf16.jsonl", "\xff\xfe{"},
                                                         {"nuls.txt", nul_separated}, {"utf16hi.txt", short_first_line},
                                                         {"padded.txt", "a record\n" + std::string(5000, '\0')}};
    for (const auto& [name, bytes] : files) std::ofstream(path(name), std::ios::binary) << bytes;
    auto args = [&](const char* name) {
        return std::vector<std::string>{"--tokenizer", "gpt2", "--doc-sep", "blank", "--input", path(name), "--out",
                                        path(std::string("out_") + name)};
    };
    prep_ok(args("lf.txt"));
    const auto want = outputs(path("out_lf.txt"));
    for (const char* name : {"cr.txt", "bom.txt"}) {
        SCOPED_TRACE(name);
        prep_ok(args(name));
        const auto got = outputs(path(std::string("out_") + name));
        ASSERT_EQ(got.size(), want.size());
        for (auto a = want.begin(), b = got.begin(); a != want.end(); ++a, ++b)
            if (a->first.find(".bin") != std::string::npos) EXPECT_TRUE(a->second == b->second) << a->first;
    }
    prep_fails(args("utf16.txt"), {"utf16.txt: this looks like UTF-16 or UTF-32 text (its byte order mark)", "iconv"});
    prep_fails(args("utf16le.txt"), {"utf16le.txt: this looks like UTF-16", "(NUL bytes between its characters)"});
    prep_fails(args("utf32be.txt"), {"utf32be.txt: this looks like UTF-16 or UTF-32", "(NUL bytes between"});
    prep_fails(args("utf16hi.txt"), {"utf16hi.txt: this looks like UTF-16", "(NUL bytes between its characters)"});
    prep_fails(args("utf16.jsonl"), {"utf16.jsonl: this looks like UTF-16"});
    std::vector<std::string> nuls = args("nuls.txt");
    nuls.push_back("--no-val");
    prep_ok(nuls);
    EXPECT_EQ(tokens(path("out_nuls.txt"), "train"), (std::vector<uint16_t>{50256, 312, 188, 3672, 188}));
    std::vector<std::string> padded = args("padded.txt");  // a record padded with NULs: text, not UTF-32
    padded.push_back("--no-val");
    prep_ok(padded);
}

TEST_F(Prep, BlankLineSeparatedDocuments) {
    REQUIRE_GPT2();
    REQUIRE_SPM();
    check_case("spm_paras");
    check_case("gpt2_paras");
}
TEST_F(Prep, ValDocsTakesTheFirstDocuments) {
    REQUIRE_GPT2();
    check_case("val_docs");
}

// OpenWebText's layout: a tar.xz of xz-compressed tars of .txt files, with HF's cleaning and a hashed split.
TEST_F(Prep, OwtPresetReadsNestedTarXz) {
    REQUIRE_GPT2();
    check_case("owt_preset");
    PrepRun r = prep_ok({"owt", "--input", std::string(FX) + "owt.tar.xz", "--val-fraction", "0.3", "--out", path("o2")});
    EXPECT_NE(r.out.find("skipped 1 archive entries"), std::string::npos) << r.out;  // openwebtext/README
    EXPECT_NE(r.out.find(format("%d docs", expected()["meta"]["owt_val_docs"].get<int>())), std::string::npos);
}

// GaLore's C4 protocol: rows of 256 = first 255 ids, EOS 1, pads 0; validation from --val-input.
TEST_F(Prep, C4PresetWritesRows) {
    REQUIRE_SPM();
    check_case("c4_preset");
    for (const char* s : {"train", "val"}) {
        ShardInfo info;
        auto t = tokens(path("c4_preset"), s, &info);
        EXPECT_EQ(info.layout, SHARD_LAYOUT_ROWS);
        EXPECT_EQ(info.row_len, 256);
        EXPECT_EQ(info.pad_id, 0);
        EXPECT_EQ(info.eos_id, 1);
        EXPECT_EQ(info.vocab_size, 8000);
        EXPECT_EQ(info.tokenizer, TOKENIZER_SENTENCEPIECE);
        ASSERT_EQ(t.size() % 256, 0u);
        for (size_t r = 0; r < t.size() / 256; r++) {
            const uint16_t* row = t.data() + r * 256;
            // Exactly one EOS, then only pads; no pad before it (the Austen model never emits id 0 or 1).
            size_t eos = 0;
            while (eos < 256 && row[eos] != 1) eos++;
            ASSERT_LT(eos, 256u) << "row " << r << " has no EOS";
            for (size_t i = 0; i < eos; i++) ASSERT_GT(row[i], 1) << "row " << r;
            for (size_t i = eos + 1; i < 256; i++) ASSERT_EQ(row[i], 0) << "row " << r;
        }
    }
}

// Truncation at row_len - 1: a long document keeps exactly its first 31 ids, then EOS, no pads.
TEST_F(Prep, RowsTruncateAtRowLenMinusOne) {
    REQUIRE_SPM();
    check_case("spm_rows32");
    auto t = tokens(path("spm_rows32"), "train");
    ASSERT_EQ(t.size() % 32, 0u);
    int full = 0;  // rows without pads: truncated documents, and those of exactly 31 ids
    for (size_t r = 0; r < t.size() / 32; r++) {
        const uint16_t* row = t.data() + r * 32;
        size_t eos = 0;
        while (eos < 32 && row[eos] != 1) eos++;
        ASSERT_LT(eos, 32u);
        for (size_t i = eos + 1; i < 32; i++) ASSERT_EQ(row[i], 0);
        full += eos == 31;
    }
    EXPECT_GE(full, expected()["cases"]["spm_rows32"]["train"]["truncated"].get<int>());
    EXPECT_GT(full, 20);
}

// "tokens not pad" of --layout rows counts each row's ids and its EOS, decided by the layout, not by the pad's value:
// with --pad-id equal to EOS (GPT-2's EOT 50256) it counted every token of the rows (2,240 instead of 1,737).
TEST_F(Prep, RowsCountTokensNotPadWhenPadIsEos) {
    REQUIRE_GPT2();
    auto run = [&](const char* pad, const std::string& out) {
        return prep_ok({"--tokenizer", "gpt2", "--layout", "rows", "--row-len", "64", "--pad-id", pad, "--no-val",
                        "--input", std::string(FX) + "c4_train.json.gz", "--out", out});
    };
    PrepRun a = run("0", path("a")), b = run("50256", path("b"));
    // counted from the shard of pad 0: each row is its ids (encode_ordinary never gives EOT 50256), EOT, pads
    auto t = tokens(path("a"), "train");
    ASSERT_EQ(t.size() % 64, 0u);
    long long real = 0;
    for (size_t r = 0; r < t.size() / 64; r++) {
        size_t e = 0;
        while (e < 64 && t[r * 64 + e] != 50256) e++;
        ASSERT_LT(e, 64u) << "row " << r << " has no EOT";
        real += (long long)e + 1;
    }
    ASSERT_LT(real, (long long)t.size());  // some rows have pads
    EXPECT_EQ(tokens(path("b"), "train").size(), t.size());
    const std::string want = with_commas_(real) + " tokens not pad";
    EXPECT_NE(a.out.find(want), std::string::npos) << a.out;
    EXPECT_NE(b.out.find(want), std::string::npos) << b.out;
}

// Rows shards load through the DataLoader with T = row_len; pad targets become -1.
TEST_F(Prep, RowShardsLoadInTheDataLoaderWithPadTargetsIgnored) {
    REQUIRE_SPM();
    prep_ok({"--tokenizer", "spm", "--spm-model", AUSTEN_MODEL, "--layout", "rows", "--row-len", "32", "--input",
             std::string(FX) + "c4_train.json.gz", "--out", path("r")});
    auto rows = tokens(path("r"), "train");
    DataLoader dl(path("r_train_*.bin"), 4, 32, 0, 1, 0, false);
    EXPECT_EQ(dl.info().layout, SHARD_LAYOUT_ROWS);
    std::vector<int32_t> in(4 * 32), tg(4 * 32);
    int64_t pads_seen = 0;
    for (int step = 0; step < 3; step++) {
        dl.next_batch(in.data(), tg.data());
        for (int b = 0; b < 4; b++) {
            const uint16_t* row = rows.data() + (size_t)(step * 4 + b) * 32;
            for (int i = 0; i < 32; i++) {
                EXPECT_EQ(in[(size_t)(b * 32 + i)], row[i]);
                int32_t want = i + 1 < 32 && row[i + 1] != 0 ? (int32_t)row[i + 1] : -1;
                EXPECT_EQ(tg[(size_t)(b * 32 + i)], want) << "step " << step << " row " << b << " pos " << i;
                pads_seen += i + 1 < 32 && row[i + 1] == 0;
            }
        }
    }
    EXPECT_GT(pads_seen, 0);
}

TEST_F(Prep, FlatShardsLoadInTheDataLoader) {
    REQUIRE_GPT2();
    prep_ok({"--tokenizer", "gpt2", "--input", std::string(FX) + "c4_train.json.gz", "--shard-tokens", "2000",
             "--out", path("f")});
    auto all = tokens(path("f"), "train");
    DataLoader dl(path("f_train_*.bin"), 2, 64, 0, 1, 0, false);
    EXPECT_EQ(dl.info().tokenizer, TOKENIZER_GPT2);
    std::vector<int32_t> in(128), tg(128);
    dl.next_batch(in.data(), tg.data());
    for (int i = 0; i < 128; i++) {
        EXPECT_EQ(in[(size_t)i], all[(size_t)i]);
        EXPECT_EQ(tg[(size_t)i], all[(size_t)i + 1]);
    }
    EXPECT_EQ(all[0], 50256);  // EOT before the first document
}

// Every shard but the last has exactly --shard-tokens tokens, and together they are the one-shard output.
TEST_F(Prep, ShardSizesAndSplitDocuments) {
    REQUIRE_GPT2();
    REQUIRE_SPM();
    std::string in = std::string(FX) + "c4_train.json.gz";
    prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", in, "--out", path("one")});
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", in, "--shard-tokens", "1K", "--out", path("many")});
    auto sh = shards(path("many"), "train");
    ASSERT_EQ(sh.size(), 7u) << r.out;  // 6133 tokens
    for (size_t k = 0; k + 1 < sh.size(); k++) EXPECT_EQ(read_shard_header(sh[k]).num_tokens, 1000);
    EXPECT_EQ(read_shard_header(sh.back()).num_tokens, 133);
    EXPECT_EQ(tokens(path("many"), "train"), tokens(path("one"), "train"));
    EXPECT_NE(r.out.find("wrote " + path("many") + "_train_000006.bin: 133 tokens"), std::string::npos) << r.out;
    // Rows: --shard-tokens is rounded down to whole rows.
    prep_ok({"--tokenizer", "spm", "--spm-model", AUSTEN_MODEL, "--layout", "rows", "--row-len", "32",
             "--shard-tokens", "100", "--no-val", "--input", in, "--out", path("rows")});
    auto rs = shards(path("rows"), "train");
    ASSERT_EQ(rs.size(), 12u);  // 35 rows, 3 per shard
    EXPECT_EQ(read_shard_header(rs[0]).num_tokens, 96);
    EXPECT_EQ(read_shard_header(rs.back()).num_tokens, 64);
}

// Shards smaller than the smallest window (17 tokens) give the trainer no sample whatever the text: the warning
// names --shard-tokens (it asked for more text, of which there were thousands of tokens)
TEST_F(Prep, ShardsTooSmallForAWindowAreBlamedNotTheText) {
    REQUIRE_GPT2();
    std::string in = std::string(FX) + "c4_train.json.gz";
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--input", in, "--no-val", "--shard-tokens", "10", "--out", path("s")});
    EXPECT_NE(r.out.find("warning: the train split holds fewer than 4 windows of 17 tokens, too few to train on; its "),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("tokens are in shards of --shard-tokens 10, and a window lies within one shard: give a "
                         "larger --shard-tokens"), std::string::npos) << r.out;
}

TEST_F(Prep, OutputDoesNotDependOnThreadsOrBatches) {
    REQUIRE_GPT2();
    std::string in = std::string(FX) + "c4_train.json.gz";
    prep_ok({"--tokenizer", "gpt2", "--input", in, "--val-fraction", "0.2", "--shard-tokens", "700", "--threads",
             "1", "--out", path("a")});
    prep_ok({"--tokenizer", "gpt2", "--input", in, "--val-fraction", "0.2", "--shard-tokens", "700", "--threads",
             "5", "--batch-docs", "2", "--out", path("b")});
    auto a = outputs(path("a")), b = outputs(path("b"));
    ASSERT_EQ(a.size(), b.size());
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt) EXPECT_TRUE(it->second == jt->second);
    EXPECT_FALSE(shards(path("a"), "val").empty());
}

TEST_F(Prep, MaxDocsLimitsEachSource) {
    REQUIRE_SPM();
    PrepRun r = prep_ok({"c4", "--input", std::string(FX) + "c4_train.json.gz", "--val-input",
                     std::string(FX) + "c4_val.json.gz", "--spm-model", AUSTEN_MODEL, "--max-docs", "4", "--out",
                     path("m")});
    EXPECT_EQ(tokens(path("m"), "train").size(), 4u * 256);
    EXPECT_EQ(tokens(path("m"), "val").size(), 4u * 256);
}

// ---------------------------------------------------------------------------------------------------------
// Resume
// ---------------------------------------------------------------------------------------------------------

TEST_F(Prep, ResumeAfterMaxShardsIsByteIdenticalFlat) {
    REQUIRE_GPT2();
    std::vector<std::string> base = {"--tokenizer", "gpt2", "--input", std::string(FX) + "c4_train.json.gz",
                                     std::string(FX) + "docs.json.xz", "--val-fraction", "0.25", "--shard-tokens", "450"};
    auto full = base;
    full.insert(full.end(), {"--out", path("full")});
    prep_ok(full);
    auto part = base;
    part.insert(part.end(), {"--out", path("part")});
    std::string log;
    int runs = resume_until_done(part, 2, &log);
    EXPECT_GE(runs, 5) << log;
    EXPECT_NE(log.find("resume: keeping"), std::string::npos) << log;
    auto a = outputs(path("full")), b = outputs(path("part"));
    ASSERT_EQ(a.size(), b.size()) << log;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt) {
        EXPECT_EQ(it->first, jt->first);
        EXPECT_TRUE(it->second == jt->second) << it->first << " differs\n" << log;
    }
    // A finished run resumes to nothing.
    part.push_back("--resume");
    PrepRun r = prep_ok(part);
    EXPECT_NE(r.out.find("nothing to do"), std::string::npos) << r.out;
    // a stopped run's summary says how much of what it read is in its shards (it counted the documents read past
    // its last shard as if written)
    auto one = base;
    one.insert(one.end(), {"--out", path("one"), "--max-shards", "1"});
    r = prep_ok(one);
    EXPECT_NE(r.out.find(" tokens (450 of them in its shards)"), std::string::npos) << r.out;
}

TEST_F(Prep, ResumeAfterMaxShardsIsByteIdenticalRowsWithValInput) {
    REQUIRE_SPM();
    std::vector<std::string> base = {"c4", "--input", std::string(FX) + "c4_train.json.gz", "--val-input",
                                     std::string(FX) + "c4_val.json.gz", "--spm-model", AUSTEN_MODEL,
                                     "--shard-tokens", "1024"};
    auto full = base;
    full.insert(full.end(), {"--out", path("full")});
    prep_ok(full);
    auto part = base;
    part.insert(part.end(), {"--out", path("part")});
    std::string log;
    EXPECT_GE(resume_until_done(part, 3, &log), 4);
    auto a = outputs(path("full")), b = outputs(path("part"));
    ASSERT_EQ(a.size(), b.size()) << log;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt)
        EXPECT_TRUE(it->second == jt->second) << it->first << " differs\n" << log;
}

// A crash after a shard's rename but before the state was saved: the state knows one shard less. And a
// damaged shard (cut short, or its tokens changed): the resume rewinds to the last good one.
TEST_F(Prep, ResumeAfterCrashOrDamageRewritesWhatIsNeeded) {
    REQUIRE_GPT2();
    // No val split, so every shard is a train shard and the numbers below are fixed.
    std::vector<std::string> base = {"--tokenizer", "gpt2", "--owt-clean", "--input", std::string(FX) + "owt.tar.xz",
                                     std::string(FX) + "texts", "--shard-tokens", "300"};
    auto full = base;
    full.insert(full.end(), {"--out", path("full")});
    prep_ok(full);
    auto part = base;
    part.insert(part.end(), {"--out", path("part"), "--max-shards", "2"});
    prep_ok(part);
    std::string state2 = slurp(path("part_prep.json"));
    part.push_back("--resume");
    PrepRun r2 = prep_ok(part);  // 4 shards now
    ASSERT_NE(r2.out.find("stopped after 2 shards"), std::string::npos) << r2.out;
    // Crash simulation: the state from after shard 2 (it knows shards 1 and 2), shards 3 and 4 on disk; and
    // shard 2 cut short, so the resume must go back to shard 1.
    std::ofstream(path("part_prep.json"), std::ios::binary | std::ios::trunc) << state2;
    auto sh = shards(path("part"), "train");
    ASSERT_EQ(sh.size(), 4u);
    fs::resize_file(sh[1], fs::file_size(sh[1]) - 2);
    part.pop_back();
    part.pop_back();
    part.pop_back();  // no --max-shards
    part.push_back("--resume");
    PrepRun r3 = prep_ok(part);
    EXPECT_NE(r3.out.find("part_train_000001.bin: file has"), std::string::npos) << r3.out;
    EXPECT_NE(r3.out.find("keeping 1 train + 0 val shards"), std::string::npos) << r3.out;
    EXPECT_NE(r3.out.find("wrote " + path("part") + "_train_000001.bin"), std::string::npos) << r3.out;
    auto a = outputs(path("full")), b = outputs(path("part"));
    ASSERT_EQ(a.size(), b.size()) << r3.out;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt)
        EXPECT_TRUE(it->second == jt->second) << it->first << " differs\n" << r3.out;

    // Change one token of the last train shard (same size, valid header): its checksum catches it, and a
    // resume of the finished run writes it again.
    auto last = shards(path("part"), "train").back();
    std::string bytes = slurp(last);
    size_t at = 1024;
    while (at + 2 < bytes.size() && (uint8_t)bytes[at + 1] != 0) at += 2;  // a token < 256: +1 stays valid
    bytes[at] = (char)((uint8_t)bytes[at] ^ 1);
    std::ofstream(last, std::ios::binary | std::ios::trunc) << bytes;
    PrepRun r4 = prep_ok(part);
    EXPECT_NE(r4.out.find("checksum"), std::string::npos) << r4.out;
    EXPECT_TRUE(slurp(last) == a[last.substr(path("part").size())]);

    // The same in an earlier shard (only the last was summed: the damage was kept, "its shards check out", exit 0):
    // the resume goes back to the shard before it and writes the rest again.
    const std::string second = shards(path("part"), "train")[1];
    bytes = slurp(second);
    at = 1024;
    while (at + 2 < bytes.size() && (uint8_t)bytes[at + 1] != 0) at += 2;
    bytes[at] = (char)((uint8_t)bytes[at] ^ 1);
    std::ofstream(second, std::ios::binary | std::ios::trunc) << bytes;
    PrepRun r5 = prep_ok(part);
    EXPECT_NE(r5.out.find("part_train_000001.bin: its tokens differ from what was written (checksum)"),
              std::string::npos) << r5.out;
    b = outputs(path("part"));
    ASSERT_EQ(a.size(), b.size()) << r5.out;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt)
        EXPECT_TRUE(it->second == jt->second) << it->first << " differs\n" << r5.out;
}

// Two runs on one --out interleaved their shards (both exited 0, the set held parts of each): while one holds
// PREFIX_prep.lock, another is refused, naming the holder (its lock file kept); the end removes the lock file, a
// failed run's too.
TEST_F(Prep, OneRunAtATimeOnAnOutPrefix) {
    REQUIRE_GPT2();
    std::vector<std::string> args = {"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "c4_train.json.gz",
                                     "--out", path("a")};
    int fd = ::open(path("a_prep.lock").c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "4242", 4), 4);
    ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);  // as a running prep_data holds it
    prep_fails(args, {"another prep_data is writing --out " + path("a"), "pid 4242", "HINT"});
    EXPECT_TRUE(shards(path("a"), "train").empty());
    EXPECT_TRUE(fs::exists(path("a_prep.lock"))) << "the refused run removed the other run's lock file";
    ::close(fd);  // that run ended (killed: its lock file stays, unlocked)
    prep_ok(args);
    EXPECT_FALSE(fs::exists(path("a_prep.lock")));
    EXPECT_EQ(shards(path("a"), "train").size(), 1u);
    // a run that fails removes its lock file too (it was left behind)
    prep_fails({"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "bad/badjson.jsonl", "--out", path("b")},
               {"badjson.jsonl:2", "invalid JSON"});
    EXPECT_FALSE(fs::exists(path("b_prep.lock")));
}

// Shards past a complete run's count (another run's, with another --shard-tokens) would be read by the trainer's
// pattern with ours: removed, and named, at the end of the run (here a resume of the finished run).
TEST_F(Prep, ShardsPastTheRunsCountAreRemoved) {
    REQUIRE_GPT2();
    std::vector<std::string> args = {"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "c4_train.json.gz",
                                     "--shard-tokens", "1K", "--out", path("a")};
    prep_ok(args);
    ASSERT_EQ(shards(path("a"), "train").size(), 7u);
    fs::copy_file(path("a_train_000000.bin"), path("a_train_000007.bin"));
    fs::copy_file(path("a_train_000000.bin"), path("a_train_000012.bin"));
    args.push_back("--resume");
    PrepRun r = prep_ok(args);
    EXPECT_NE(r.out.find("removed " + path("a_train_000012.bin") + ": not one of this run's 7 train shards"),
              std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(path("a_train_000007.bin")));
    EXPECT_FALSE(fs::exists(path("a_train_000012.bin")));
    EXPECT_EQ(shards(path("a"), "train").size(), 7u);
}

// The state file is rewritten after every shard; with one checkpoint a shard it grew quadratically. It keeps the
// newest 8 and those at a power-of-two shard count, and a damaged early shard still resumes from the one before
// it, byte-identical to an uninterrupted run.
TEST_F(Prep, StateKeepsFewCheckpointsAndAnEarlyDamageResumes) {
    REQUIRE_GPT2();
    std::vector<std::string> base = {"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "c4_train.json.gz",
                                     "--shard-tokens", "50"};
    auto full = base, part = base;
    full.insert(full.end(), {"--out", path("full")});
    part.insert(part.end(), {"--out", path("part")});
    prep_ok(full);
    prep_ok(part);
    const size_t n = shards(path("part"), "train").size();
    ASSERT_EQ(n, 123u);  // 6133 tokens
    json st = json::parse(slurp(path("part_prep.json")));
    std::vector<int64_t> counts;
    for (const json& c : st["checkpoints"]) counts.push_back(c["shards"][0].get<int64_t>() + c["shards"][1].get<int64_t>());
    EXPECT_EQ(counts, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 116, 117, 118, 119, 120, 121, 122, 123}));
    // shard 40 damaged: the newest checkpoint before it is the one at 32 shards
    fs::resize_file(path("part_train_000040.bin"), fs::file_size(path("part_train_000040.bin")) - 2);
    part.push_back("--resume");
    PrepRun r = prep_ok(part);
    EXPECT_NE(r.out.find("keeping 32 train + 0 val shards"), std::string::npos) << r.out;
    // the message names the shard once (it named it twice: "resume: X: X: file has ...")
    const std::string damaged = path("part_train_000040.bin");
    EXPECT_NE(r.out.find("resume: " + damaged + ": "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(damaged + ": " + damaged), std::string::npos) << r.out;
    auto a = outputs(path("full")), b = outputs(path("part"));
    ASSERT_EQ(a.size(), b.size()) << r.out;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt)
        EXPECT_TRUE(it->second == jt->second) << it->first << " differs\n" << r.out;
}

// The "train with" line quotes --out's glob characters for the trainer's glob(3): "run[1]/d" matched "run1/d".
TEST_F(Prep, TrainWithPatternMatchesAnOutWithGlobCharacters) {
    REQUIRE_GPT2();
    fs::create_directories(path("run[1]"));
    fs::create_directories(path("run1"));
    // another run's files, which the unescaped pattern matched: its shards past this run's count, its temporaries
    // and state were deleted as this run's leftovers
    for (const char* f : {"d_train_000000.bin", "d_train_000005.bin", "d_prep.json", "d_train_000001.bin.tmp.1"})
        std::ofstream(path(std::string("run1/") + f)) << "another run's";
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "c4_train.json.gz", "--out",
                         path("run[1]/d"), "--overwrite"});
    for (const char* f : {"d_train_000000.bin", "d_train_000005.bin", "d_prep.json", "d_train_000001.bin.tmp.1"})
        EXPECT_EQ(slurp(path(std::string("run1/") + f)), "another run's") << f;
    const std::string want = "--train-data '" + path("run\\[1\\]/d_train_??????.bin") + "'";
    ASSERT_NE(r.out.find(want), std::string::npos) << r.out;
    // the shards of an --out d_train_x beside it (d_train_x_train_000000.bin) are not this run's: PREFIX_train_*
    // matched them
    std::ofstream(path("run[1]/d_train_x_train_000000.bin")) << "another run's";
    glob_t g;
    std::string pattern = path("run\\[1\\]/d_train_??????.bin");
    ASSERT_EQ(glob(pattern.c_str(), 0, nullptr, &g), 0);
    EXPECT_EQ(g.gl_pathc, 1u);
    EXPECT_EQ(std::string(g.gl_pathv[0]), path("run[1]/d_train_000000.bin"));
    globfree(&g);
}

// A run removes the temporaries a killed run left for its --out: only names of the shapes prep_data writes
// (PREFIX_train_NNNNNN.bin, PREFIX_val_NNNNNN.bin, PREFIX_tokenizer.model, PREFIX_prep.json, each + ".tmp.PID") whose
// writer is dead. It removed every PREFIX_*.tmp.*: a run's on a longer --out (d_small_...), files of other names, a
// live process's.
TEST_F(Prep, RemovesOnlyItsOwnTemporariesOfDeadRuns) {
    REQUIRE_GPT2();
    const pid_t child = fork();  // a pid that is dead
    ASSERT_GE(child, 0);
    if (child == 0) _exit(0);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    const std::string dead = std::to_string((long long)child), live = std::to_string((long long)getpid());
    const std::vector<std::string> kept = {
        "d_small_train_000003.bin.tmp." + dead, "d_small_train_000003.bin.tmp." + live, "d_notes.tmp.txt",
        "d_train_000002.bin.tmp." + live, "d_prep.json.tmp." + live, "d_train_2.bin.tmp." + dead,
        "d_train_000002.bin.tmp.x" + dead, "d_val_000001.bin.tmp." + dead + ".txt"};
    const std::vector<std::string> removed = {"d_train_000002.bin.tmp." + dead, "d_val_000001.bin.tmp." + dead,
                                              "d_prep.json.tmp." + dead, "d_tokenizer.model.tmp." + dead};
    for (const auto& f : kept) std::ofstream(path(f)) << "not this run's";
    for (const auto& f : removed) std::ofstream(path(f)) << "a killed run's";
    prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "c4_train.json.gz", "--out", path("d")});
    for (const auto& f : kept) EXPECT_EQ(slurp(path(f)), "not this run's") << f << " was removed";
    for (const auto& f : removed) EXPECT_FALSE(fs::exists(path(f))) << f << " was left";
}

// A crash at each moment between a shard's durable steps (common/kill_point.h: SIGKILL exactly there, at the 8th
// shard), then --resume: the output equals an uninterrupted run's byte for byte. The moments: the shard's temporary
// file written but not renamed, the shard in place but not in the state file, the state file saved.
TEST_F(Prep, ResumeAfterKillIsByteIdentical) {
    REQUIRE_GPT2();
    std::vector<std::string> base = {"--tokenizer", "gpt2", "--input", "data/austen/emma.txt",
                                     "data/austen/mansfield-park.txt", "data/austen/pride-and-prejudice.txt",
                                     "--doc-sep", "blank", "--val-fraction", "0.02", "--shard-tokens", "10000",
                                     "--threads", "1", "--quiet"};
    auto full = base;
    full.insert(full.end(), {"--out", path("full")});
    prep_ok(full);
    auto a = outputs(path("full"));
    EXPECT_GT(a.size(), 40u);
    for (const char* point : {"shard.temporary_written", "prep_data.shard_written", "prep_data.state_saved"}) {
        SCOPED_TRACE(point);
        auto part = base;
        part.insert(part.end(), {"--out", path(point)});
        PrepRun killed = prep(part, "PRAC_TEST_KILL_AT=" + std::string(point) + "@8");
        ASSERT_EQ(killed.rc, 128 + SIGKILL) << killed.out;
        auto temporaries = [&] {  // of this run: <out>_train_000007.bin.tmp.<pid> and the like
            size_t n = 0;
            for (const auto& e : fs::directory_iterator(dir)) {
                std::string name = e.path().filename().string();
                n += name.rfind(point, 0) == 0 && name.find(".tmp.") != std::string::npos;
            }
            return n;
        };
        EXPECT_EQ(temporaries(), std::string(point) == "shard.temporary_written" ? 1u : 0u);
        part.push_back("--resume");
        PrepRun r = prep_ok(part);
        auto b = outputs(path(point));
        ASSERT_EQ(a.size(), b.size()) << r.out;
        for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt)
            EXPECT_TRUE(it->second == jt->second) << it->first << " differs\n" << r.out;
        EXPECT_EQ(temporaries(), 0u) << "the resume left a temporary behind";
    }
}

// --out spelled otherwise on --resume (./ in it) finds the same state, and the SentencePiece copy's path in it is the
// same file (it was refused, "tokenizer_copy: was ..., now ./..."); a resume from another folder (a job script's cd)
// names the same input by another relative path: the same file. Both resumed as the uninterrupted run.
TEST_F(Prep, ResumeTakesTheOutPrefixHoweverSpelled) {
    REQUIRE_SPM();
    auto args = [&](const std::string& input, const std::string& out) {
        return std::vector<std::string>{"--tokenizer", "spm", "--spm-model", fs::absolute(AUSTEN_MODEL).string(),
                                        "--no-val", "--input", input, "--shard-tokens", "1000", "--out", out};
    };
    const std::string input = std::string(FX) + "c4_train.json.gz";
    prep_ok(args(input, path("u")));
    auto first = args(input, path("s"));
    first.insert(first.end(), {"--max-shards", "1"});
    prep_ok(first);
    auto resumed = args(input, path(".") + "/s");
    resumed.insert(resumed.end(), {"--resume", "--max-shards", "1"});
    prep_ok(resumed);
    ASSERT_EQ(shards(path("s"), "train").size(), 2u);
    std::string cmd = "cd " + shell_quote(dir) + " && " + shell_quote(fs::absolute("prep_data").string());
    for (const auto& a : args(fs::relative(fs::absolute(input), dir).string(), path("s"))) cmd += " " + shell_quote(a);
    cmd += " --resume > elsewhere.txt 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << slurp(dir + "/elsewhere.txt");
    EXPECT_GT(outputs(path("u")).size(), 2u);
    EXPECT_TRUE(outputs(path("u")) == outputs(path("s")));
}

TEST_F(Prep, ResumeRefusesOtherOptionsOrInputs) {
    REQUIRE_GPT2();
    std::vector<std::string> base = {"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "c4_train.json.gz",
                                     "--shard-tokens", "1000", "--out", path("p")};
    auto a = base;
    a.insert(a.end(), {"--max-shards", "1"});
    prep_ok(a);
    auto b = base;
    b[6] = "999";  // --shard-tokens (an option given twice is refused)
    b.push_back("--resume");
    prep_fails(b, {"options differ", "shard_tokens: was 1000, now 999", "--overwrite"});
    auto c = base;
    c.insert(c.end(), {"--input", std::string(FX) + "docs.json.xz", "--resume"});
    prep_fails(c, {"input files are not those", "1 files then, 2 now; file 2 was none, now test/fixtures/prep/docs"});
    // a checksum in the state that is no number (of a shard before the last, whose checksum is compared as written):
    // said as damage (it was "internal error: stoull", exit 2)
    {
        auto h = base;
        h[8] = path("h");
        h.insert(h.end(), {"--max-shards", "2"});
        prep_ok(h);
        json st = json::parse(slurp(path("h") + "_prep.json"));
        ASSERT_GE(st["shards"][0].size(), 2u);
        st["shards"][0][0]["hash"] = "zz";
        std::ofstream(path("h") + "_prep.json", std::ios::binary | std::ios::trunc) << st.dump(1) << "\n";
        h.back() = "1";
        h.push_back("--resume");
        prep_fails(h, {"is damaged", "h_train_000000.bin is \"zz\", not 16 hex digits", "--overwrite"});
    }
    // the same input spelled otherwise (./ in front, as from a job script) is the same input: resumed (it was refused)
    auto spelled = base;
    spelled[4] = "./" + spelled[4];
    spelled.push_back("--resume");
    prep_ok(spelled);
    EXPECT_EQ(shards(path("p"), "train").size(), 7u);
    // a state of an earlier prep_data (which read a lone CR and a byte order mark as text: no text_reading key) is
    // not continued, said so (other document boundaries would follow its shards)
    {
        json st = json::parse(slurp(path("p") + "_prep.json"));
        st["config"].erase("text_reading");
        std::ofstream(path("p") + "_prep.json", std::ios::binary | std::ios::trunc) << st.dump(1) << "\n";
        auto again = base;
        again.push_back("--resume");
        prep_fails(again, {"text_reading: was -", "an earlier prep_data's, which read text files otherwise"});
        // ... nor one of the build before JSON lines' invalid UTF-8 was repaired (refused, or skipped by
        // --skip-bad-json: a resume would repair the lines after its resume point only)
        st["config"]["text_reading"] = "universal newlines, utf-8-sig";
        std::ofstream(path("p") + "_prep.json", std::ios::binary | std::ios::trunc) << st.dump(1) << "\n";
        prep_fails(again, {"text_reading: was \"universal newlines, utf-8-sig\"",
                           "which refused a JSON line holding invalid UTF-8 (or skipped it, --skip-bad-json)"});
    }
    // Without --resume or --overwrite the earlier output is not touched.
    prep_fails(base, {"already exists", "--resume", "--overwrite"});
    // a run that failed before its state file (a full disk) left shards --resume cannot continue: the hint says so
    ASSERT_TRUE(fs::remove(path("p") + "_prep.json"));
    prep_fails(base, {"already exists", "saved no state file", "so nothing can be resumed", "--overwrite"});
    auto d = base;
    d.push_back("--overwrite");
    prep_ok(d);
    EXPECT_EQ(shards(path("p"), "train").size(), 7u);
    // an --overwrite whose --spm-model cannot be read fails before deleting the earlier run (its files were gone)
    auto e = base;
    e[1] = "spm";
    e.insert(e.end(), {"--spm-model", path("typo.model"), "--overwrite"});
    prep_fails(e, {"typo.model"});
    EXPECT_EQ(shards(path("p"), "train").size(), 7u);
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "c4_train.json.gz", "--out", path("nothing"),
                "--resume"},
               {"nothing to resume"});
}

// With a pending val split the reader resumes at its first pending document, before the train resume point: the
// files between were not checked (f3 holds train documents already in the shards; its first line removed, the
// resumed train shards held other documents, exit 0). Every file up to the later split's resume point is checked.
TEST_F(Prep, ResumeChecksEveryFileUpToTheLaterResumePoint) {
    REQUIRE_GPT2();
    ASSERT_EQ(std::system(("gzip -dc " + std::string(FX) + "c4_train.json.gz > " + path("all.jsonl")).c_str()), 0);
    std::istringstream all(slurp(path("all.jsonl")));
    std::string line, part[3];
    for (int n = 0; std::getline(all, line); n++) part[n < 12 ? 0 : n < 24 ? 1 : 2] += line + "\n";
    for (int f = 0; f < 3; f++) std::ofstream(path(format("f%d.jsonl", f + 1)), std::ios::binary) << part[f];
    std::vector<std::string> args = {"--tokenizer", "gpt2", "--input", path("f1.jsonl"), path("f2.jsonl"),
                                     path("f3.jsonl"), "--val-fraction", "0.2", "--shard-tokens", "1000", "--out",
                                     path("o")};
    auto first = args;
    first.insert(first.end(), {"--max-shards", "4"});
    prep_ok(first);
    // (the state: train pending in f3, val pending in f2, so the reader resumes in f2)
    const json ck = json::parse(slurp(path("o_prep.json")))["checkpoints"].back();
    ASSERT_GE(ck["pending"][0][0].get<int>(), 24) << ck.dump();
    ASSERT_LT(ck["pending"][1][0].get<int>(), 24) << ck.dump();
    std::ofstream(path("f3.jsonl"), std::ios::binary | std::ios::trunc) << part[2].substr(part[2].find('\n') + 1);
    args.push_back("--resume");
    prep_fails(args, {"f3.jsonl has", "bytes, but", "when the interrupted run read it"});
}

// A --resume refused for another --spm-model replaced the earlier run's PREFIX_tokenizer.model with that model before
// the options check (and a --resume with nothing to resume wrote one): the copy is written once the run goes ahead.
TEST_F(Prep, RefusedResumeLeavesTheTokenizerCopyAsItWas) {
    REQUIRE_SPM();
    const std::string austen = slurp(AUSTEN_MODEL);
    ASSERT_FALSE(austen.empty());
    // another valid model: the Austen model with an unknown protobuf field appended (field 100, varint 1)
    std::ofstream(path("other.model"), std::ios::binary) << austen << std::string("\xa0\x06\x01", 3);
    const std::vector<std::string> base = {"--tokenizer", "spm", "--no-val", "--input",
                                           std::string(FX) + "c4_train.json.gz", "--shard-tokens", "1000",
                                           "--out", path("p")};
    auto first = base;
    first.insert(first.end(), {"--spm-model", AUSTEN_MODEL, "--max-shards", "1"});
    prep_ok(first);
    ASSERT_TRUE(slurp(path("p_tokenizer.model")) == austen);
    struct stat before{};
    ASSERT_EQ(::stat(path("p_tokenizer.model").c_str(), &before), 0);
    auto other = base;
    other.insert(other.end(), {"--spm-model", path("other.model"), "--resume"});
    prep_fails(other, {"options differ", "tokenizer_sha256", "--overwrite"});
    EXPECT_TRUE(slurp(path("p_tokenizer.model")) == austen) << "the refused --resume replaced the tokenizer copy";
    // the resume with the run's own model goes ahead; the copy, the same bytes, is not rewritten
    auto same = base;
    same.insert(same.end(), {"--spm-model", AUSTEN_MODEL, "--resume"});
    prep_ok(same);
    EXPECT_TRUE(slurp(path("p_tokenizer.model")) == austen);
    struct stat after{};
    ASSERT_EQ(::stat(path("p_tokenizer.model").c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(shards(path("p"), "train").size(), 7u);
    // nothing to resume: no tokenizer copy either
    prep_fails({"--tokenizer", "spm", "--spm-model", AUSTEN_MODEL, "--no-val", "--input",
                std::string(FX) + "c4_train.json.gz", "--out", path("nothing"), "--resume"},
               {"nothing to resume"});
    EXPECT_FALSE(fs::exists(path("nothing_tokenizer.model")));
}

// ---------------------------------------------------------------------------------------------------------
// Bad input and bad options: a clear message and exit status 1
// ---------------------------------------------------------------------------------------------------------

TEST_F(Prep, MissingInputs) {
    std::string o = path("x");
    prep_fails({"--tokenizer", "gpt2", "--input", "no/such/file.jsonl", "--out", o}, {"no/such/file.jsonl",
                                                                                        "No such file"});
    prep_fails({"--tokenizer", "gpt2", "--input", "no/such/c4-train.*.json.gz", "--out", o},
               {"no file matches this pattern", "no/such/c4-train.*.json.gz"});
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/data.parquet", "--out", o},
               {"parquet is not read", "to_json"});
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad", "--out", o}, {"has no .txt files"});
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "texts/notes.md", "--out", o},
               {"notes.md: unknown file type"});
    // a stream is no input (its size makes the progress and --resume), said with what to do
    ASSERT_EQ(mkfifo(path("fifo.txt").c_str(), 0600), 0);
    prep_fails({"--tokenizer", "gpt2", "--input", path("fifo.txt"), "--out", o},
               {"fifo.txt is not a regular file", "HINT: prep_data reads files"});
    // a compressed file named without .txt/.jsonl is read as a tar archive (OpenWebText's *.xz): the refusal says
    // how to name a compressed text
    fs::copy_file(std::string(FX) + "c4_train.json.gz", path("notes.gz"));
    prep_fails({"--tokenizer", "gpt2", "--input", path("notes.gz"), "--out", o},
               {"notes.gz", "is read as a tar archive", "NAME.jsonl.gz"});
    // a tar named so (OpenWebText's subset files) that is cut short after its first entry is damaged, not misnamed
    ASSERT_EQ(std::system(("tar -cf - -C " + std::string(FX) + "texts a.txt b.txt | head -c 1500 | xz > " +
                           path("urlsf_subset00-1_data.xz")).c_str()), 0);
    PrepRun cut = prep({"--tokenizer", "gpt2", "--input", path("urlsf_subset00-1_data.xz"), "--out", o});
    EXPECT_EQ(cut.rc, 1) << cut.out;
    EXPECT_NE(cut.out.find("the archive is damaged or cut short"), std::string::npos) << cut.out;
    // one cut right after an entry read as complete, its later entries lost with exit 0 (libarchive, GNU tar and
    // Python's tarfile take the end of the bytes for the end of the archive): the missing end-of-archive marker says
    // it was cut (the whole archive, a.txt alone, is read)
    const uintmax_t a_size = fs::file_size(std::string(FX) + "texts/a.txt");
    ASSERT_EQ(std::system(("tar -cf " + path("a.tar") + " -C " + std::string(FX) + "texts a.txt && head -c " +
                           std::to_string(512 + (a_size + 511) / 512 * 512) + " " + path("a.tar") + " > " +
                           path("at_entry.tar")).c_str()), 0);
    PrepRun at_entry = prep({"--tokenizer", "gpt2", "--input", path("at_entry.tar"), "--out", o});
    EXPECT_EQ(at_entry.rc, 1) << at_entry.out;
    EXPECT_NE(at_entry.out.find("at_entry.tar: the tar archive ends after 1 entry without its end-of-archive marker"),
              std::string::npos) << at_entry.out;
    EXPECT_EQ(prep({"--tokenizer", "gpt2", "--no-val", "--input", path("a.tar"), "--out", path("whole")}).rc, 0);
    // the marker read is the one libarchive reads: what follows it is the writer's (POSIX: undefined data; a first
    // check of the stream's last bytes refused such a whole archive as cut)
    std::string marked = slurp(path("a.tar")).substr(0, 512 + (a_size + 511) / 512 * 512 + 1024);
    std::ofstream(path("junk_after.tar"), std::ios::binary) << marked + std::string(1024, '\xff');
    EXPECT_EQ(prep({"--tokenizer", "gpt2", "--no-val", "--input", path("junk_after.tar"), "--out", path("junk")}).rc, 0);
    // a line too long to be text names its file (--help says every message does; this one did not): the limit,
    // 2 GB, lowered for the test
    std::ofstream(path("long.jsonl"), std::ios::binary) << std::string(600000, 'x');
    PrepRun lng = prep({"--tokenizer", "gpt2", "--input", path("long.jsonl"), "--out", o}, "PRAC_TEST_MAX_LINE=100000");
    EXPECT_EQ(lng.rc, 1) << lng.out;
    EXPECT_NE(lng.out.find(path("long.jsonl") + ": a line of more than 100000 bytes"), std::string::npos) << lng.out;
}

// An archive's entry compressed under a name without .txt/.jsonl (changelog.gz) is read as a tar by its name, as
// OpenWebText's nested urlsf_subsetNN-M_data.xz are; one whose content is no tar is skipped and counted with the
// other unknown entries (it ended the run, "Unrecognized archive format", with a hint to rename a file inside the
// archive). A nested tar so named that is damaged still ends it.
TEST_F(Prep, ACompressedEntryThatIsNoTarIsSkipped) {
    REQUIRE_GPT2();
    auto sh = [](const std::string& cmd) { ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd; };
    const std::string texts = std::string(FX) + "texts";
    for (const char* d : {"with", "without", "damaged"}) fs::create_directories(path(d));
    for (const char* d : {"with", "without", "damaged"}) {
        fs::copy_file(texts + "/a.txt", path(d) + "/a.txt");
        sh("tar -cf - -C " + texts + " b.txt | xz > " + path(d) + "/urlsf_subset00-1_data.xz");
    }
    sh("echo 'a changelog, not an archive' | gzip > " + path("with") + "/changelog.gz");
    sh("tar -cf - -C " + texts + " a.txt b.txt | head -c 1500 | xz > " + path("damaged") + "/urlsf_subset00-2_data.xz");
    for (const char* d : {"with", "without", "damaged"})
        sh("tar --sort=name -cf " + path(d) + ".tar -C " + path(d) + " .");
    auto args = [&](const char* d) {
        return std::vector<std::string>{"--tokenizer", "gpt2", "--no-val", "--input", path(d) + ".tar", "--out",
                                        path(std::string(d) + "_out")};
    };
    PrepRun with = prep_ok(args("with"));
    EXPECT_NE(with.out.find("skipped 1 archive entries that are not"), std::string::npos) << with.out;
    prep_ok(args("without"));
    EXPECT_TRUE(slurp(path("with_out_train_000000.bin")) == slurp(path("without_out_train_000000.bin")));
    prep_fails(args("damaged"), {"urlsf_subset00-2_data.xz", "the archive is damaged or cut short"});
}

// A path that exists is read as named, though it has glob characters: "book [vol 1].txt" as a pattern matched
// "book v.txt" beside it (its text prepared instead, exit 0), or nothing ("no file matches this pattern").
TEST_F(Prep, AnExistingPathWithGlobCharactersIsReadAsNamed) {
    REQUIRE_GPT2();
    fs::create_directories(path("g"));
    std::ofstream(path("g/book [vol 1].txt"), std::ios::binary) << "The intended file, volume one.\n";
    std::ofstream(path("g/book v.txt"), std::ios::binary) << "Some other file altogether.\n";
    std::ofstream(path("plain.txt"), std::ios::binary) << "The intended file, volume one.\n";
    prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("g/book [vol 1].txt"), "--out", path("named")});
    prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("plain.txt"), "--out", path("plain")});
    const std::vector<uint16_t> named = tokens(path("named"), "train");
    EXPECT_FALSE(named.empty());
    EXPECT_EQ(named, tokens(path("plain"), "train"));
    // a pattern is still one when no file has its name
    prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("g/book v*"), "--out", path("pattern")});
    EXPECT_NE(tokens(path("pattern"), "train"), named);
}

// A directory input lists each file once, whatever order the system lists the tree in: a symbolic link beside the
// file it names, a link to a folder listed already and a hard link are paths to files read under the name that sorts
// first (the first two made "is given twice (overlapping --input patterns?)" of one directory, a hard link was read
// twice), a link to a folder above it (a loop) is not entered (sub/loop, and sub2/loop: two paths), links that lead
// nowhere are said (they were dropped unsaid): the shards are those of the files alone.
TEST_F(Prep, LinksInADirectoryAreReadOnce) {
    REQUIRE_GPT2();
    for (const char* d : {"plain", "linked"}) {
        fs::create_directories(path(d) + "/sub");
        fs::copy_file(std::string(FX) + "texts/a.txt", path(d) + "/a.txt");
        fs::copy_file(std::string(FX) + "texts/b.txt", path(d) + "/sub/b.txt");
    }
    fs::create_symlink("a.txt", path("linked/z_link.txt"));
    fs::create_symlink("sub", path("linked/sub2"));
    fs::create_symlink("..", path("linked/sub/loop"));
    fs::create_symlink("gone.txt", path("linked/dangling.txt"));
    fs::create_hard_link(path("linked/sub/b.txt"), path("linked/sub/c_hard.txt"));  // (and sub2/c_hard.txt: 4 paths)
    prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("plain"), "--out", path("plain_out")});
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", path("linked"), "--out", path("linked_out")});
    EXPECT_NE(r.out.find("note: " + path("linked") + ": skipped 4 path(s) to files listed already under another name "
                         "(symbolic or hard links"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("did not enter 2 symbolic link(s) to a folder on their own path (a loop)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("skipped 1 symbolic link(s) that lead nowhere"), std::string::npos) << r.out;
    EXPECT_TRUE(slurp(path("plain_out_train_000000.bin")) == slurp(path("linked_out_train_000000.bin")));
    // --quiet leaves the notes out, as it does the run's other messages (they were printed whatever it said)
    PrepRun quiet = prep_ok({"--tokenizer", "gpt2", "--no-val", "--quiet", "--input", path("linked"), "--out",
                             path("quiet_out")});
    EXPECT_EQ(quiet.out.find("note: "), std::string::npos) << quiet.out;
    const std::string state = slurp(path("linked_out_prep.json"));
    EXPECT_NE(state.find(path("linked") + "/sub/b.txt"), std::string::npos) << "the name that sorts first is read";
    EXPECT_EQ(state.find(path("linked") + "/sub2/b.txt"), std::string::npos);
    EXPECT_EQ(state.find("c_hard.txt"), std::string::npos) << "a hard link is the file it links to";
}

// A stop signal says how to go on (it ended the run without a word), with the status of the signal, and --resume
// then finishes the run as an uninterrupted one.
TEST_F(Prep, AStopSignalSaysHowToGoOn) {
    REQUIRE_GPT2();
    const std::vector<std::string> base = {"--tokenizer", "gpt2", "--input", "data/austen/emma.txt", "--doc-sep",
                                           "blank", "--shard-tokens", "20000", "--threads", "1"};
    auto with_out = [&](const char* out) {
        std::vector<std::string> a = base;
        a.insert(a.end(), {"--out", path(out)});
        return a;
    };
    prep_ok(with_out("full"));
    PrepRun stopped = prep(with_out("part"), "PRAC_TEST_KILL_AT=prep_data.state_saved@3:" + std::to_string(SIGINT));
    EXPECT_EQ(stopped.rc, 128 + SIGINT) << stopped.out;
    EXPECT_NE(stopped.out.find("prep_data: stopped by a signal; the same command with --resume (without --overwrite) "
                               "continues after the last shard it finished"), std::string::npos) << stopped.out;
    std::vector<std::string> resume = with_out("part");
    resume.push_back("--resume");
    prep_ok(resume);
    EXPECT_TRUE(outputs(path("full")) == outputs(path("part")));
    // before its first shard there is nothing to resume: said so
    stopped = prep(with_out("early"), "PRAC_TEST_KILL_AT=shard.temporary_written@1:" + std::to_string(SIGTERM));
    EXPECT_EQ(stopped.rc, 128 + SIGTERM) << stopped.out;
    EXPECT_NE(stopped.out.find("stopped by a signal before its first shard was finished; run the same command again"),
              std::string::npos) << stopped.out;
    // after its first shard's rename, before the state file lists it: the same command is refused (the shard is
    // there, no state to resume), so the message names --overwrite (it said to run the same command)
    stopped = prep(with_out("window"), "PRAC_TEST_KILL_AT=prep_data.shard_written@1:" + std::to_string(SIGTERM));
    EXPECT_EQ(stopped.rc, 128 + SIGTERM) << stopped.out;
    EXPECT_NE(stopped.out.find("before its state file listed its first shard; run the same command with --overwrite"),
              std::string::npos) << stopped.out;
    prep_fails(with_out("window"), {"already exists (a file of an earlier run"});
    std::vector<std::string> over = with_out("window");
    over.push_back("--overwrite");
    prep_ok(over);
    EXPECT_TRUE(outputs(path("full")) == outputs(path("window")));
    // a signal the launcher ignores stays ignored (nohup's SIGHUP): the run goes on to its end
    PrepRun ignored = prep(with_out("nohup"), "PRAC_TEST_KILL_AT=prep_data.state_saved@2:" + std::to_string(SIGHUP) +
                                                  " nohup");
    EXPECT_EQ(ignored.rc, 0) << ignored.out;
    EXPECT_TRUE(outputs(path("full")) == outputs(path("nohup")));
}

TEST_F(Prep, DamagedCompressedFiles) {
    REQUIRE_GPT2();
    std::string o = path("x");
    auto bad = [&](const char* f) { return std::string(FX) + "bad/" + f; };
    prep_fails({"--tokenizer", "gpt2", "--input", bad("truncated.json.gz"), "--out", o},
               {"truncated.json.gz", "unexpected end of the gzip data", "HINT"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("corrupt.json.gz"), "--out", o},
               {"corrupt.json.gz", "gzip"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("empty.json.gz"), "--out", o}, {"empty.json.gz", "is empty"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("truncated.json.xz"), "--out", o},
               {"truncated.json.xz", "unexpected end of the xz data"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("corrupt.json.xz"), "--out", o},
               {"corrupt.json.xz", "corrupt xz data"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("truncated.jsonl.zst"), "--out", o},
               {"truncated.jsonl.zst", "unexpected end of the zstd data"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("corrupt.jsonl.zst"), "--out", o},
               {"corrupt.jsonl.zst", "zstd"});
    prep_fails({"--tokenizer", "gpt2", "--input", bad("truncated.tar.xz"), "--out", o}, {"truncated.tar.xz"});
}

TEST_F(Prep, BadJsonLinesNameTheLine) {
    REQUIRE_GPT2();
    std::string o = path("x");
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/notext.jsonl", "--out", o},
               {"notext.jsonl:3", "no \"text\" field", "\"body\", \"url\"", "--text-field"});
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/badjson.jsonl", "--out", o},
               {"badjson.jsonl:2", "invalid JSON"});
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/array.json", "--out", o},
               {"array.json", "JSON array, not JSON lines"});
    // an object written over several lines (it read as "invalid JSON ... line 1")
    std::ofstream(path("pretty.json")) << "{\n  \"text\": \"a document\"\n}\n";
    prep_fails({"--tokenizer", "gpt2", "--input", path("pretty.json"), "--out", o},
               {"pretty.json", "a JSON object written over several lines", "jq -c . FILE"});
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/notext.jsonl", "--skip-bad-json",
                     "--out", path("skip")});
    EXPECT_NE(r.out.find("skipped 1 bad JSON line (--skip-bad-json)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("2 docs"), std::string::npos) << r.out;
    // a later line that is JSON but no object (it said "a array")
    std::ofstream(path("arr2.jsonl")) << "{\"text\": \"a document\"}\n[1, 2]\n";
    prep_fails({"--tokenizer", "gpt2", "--input", path("arr2.jsonl"), "--out", o},
               {"arr2.jsonl:2", "not a JSON object (an array)"});
}

// --progress-interval 0 prints no progress line, the last one ("[####] ... elapsed") neither; the summary stays
TEST_F(Prep, ProgressIntervalZeroPrintsNone) {
    REQUIRE_GPT2();
    auto args = [&](const char* out) {
        return std::vector<std::string>{"--tokenizer", "gpt2", "--input", std::string(FX) + "c4_train.json.gz",
                                        "--out", path(out)};
    };
    PrepRun shown = prep_ok(args("a"));
    EXPECT_NE(shown.out.find(" elapsed"), std::string::npos) << shown.out;
    auto quiet = args("b");
    quiet.insert(quiet.end(), {"--progress-interval", "0"});
    PrepRun none = prep_ok(quiet);
    EXPECT_EQ(none.out.find(" elapsed"), std::string::npos) << none.out;
    EXPECT_NE(none.out.find("docs"), std::string::npos) << none.out;
}

// A JSON line with a lone UTF-16 surrogate escape (web corpora hold them) stopped the run as invalid JSON; each is
// now U+FFFD, as tiktoken encodes a Python string holding one: the shards equal those of the text written with
// U+FFFD. A pair stays a character, and an escaped backslash before "u" stays text.
TEST_F(Prep, LoneSurrogatesInJsonAreReplacementCharacters) {
    REQUIRE_GPT2();
    expect_jsonl_reads_as("{\"text\":\"lone \\ud800 x\"}\n"
                          "{\"text\":\"low \\uDC00, a pair \\ud83d\\ude00, text \\\\ud800 and \\ud800\"}\n",
                          "{\"text\":\"lone \\ufffd x\"}\n"
                          "{\"text\":\"low \xEF\xBF\xBD, a pair \xF0\x9F\x98\x80, text \\\\ud800 and \\ufffd\"}\n");
}

// Invalid UTF-8 in a JSON line (a Latin-1 byte in a web corpus, a character cut short) is repaired as in text files,
// each bad sequence U+FFFD as Python's decode(errors="replace") makes it before json.loads, and counted: the shards
// equal those of the lines written with U+FFFD (the line stopped the run as invalid JSON; --skip-bad-json lost it).
TEST_F(Prep, InvalidUtf8InJsonLinesIsRepaired) {
    REQUIRE_GPT2();
    PrepRun r = expect_jsonl_reads_as(
        "{\"text\":\"caf\xE9 au lait\"}\n{\"text\":\"cut \xF0\x9F\x98 here\"}\n{\"text\":\"fine\"}\n",
        "{\"text\":\"caf\xEF\xBF\xBD au lait\"}\n{\"text\":\"cut \xEF\xBF\xBD here\"}\n{\"text\":\"fine\"}\n");
    EXPECT_NE(r.out.find("2 with invalid UTF-8 repaired"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("3 docs"), std::string::npos) << r.out;
}

// A run stopped at a bad JSON line goes on with --resume --skip-bad-json, as the hint says (it was refused as another
// option, and the way on was --overwrite: hours of C4 again): the shards are those of a run with --skip-bad-json from
// the start. Turned off on a resume it is refused (a line it skipped would have stopped that run).
TEST_F(Prep, SkipBadJsonMayBeAddedToAResume) {
    REQUIRE_GPT2();
    {
        std::ofstream f(path("a.jsonl"));
        for (int i = 0; i < 400; i++)
            f << (i == 300 ? std::string("{\"text\": broken") : "{\"text\":\"Document " + std::to_string(i) +
                                                                     " says hello to the world, again and again.\"}")
              << "\n";
    }
    auto args = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> a = {"--tokenizer", "gpt2", "--input", path("a.jsonl"), "--shard-tokens", "2000",
                                      "--batch-docs", "16", "--threads", "1", "--out", path(out)};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    };
    PrepRun stopped = prep(args("x", {}));
    EXPECT_EQ(stopped.rc, 1) << stopped.out;
    EXPECT_NE(stopped.out.find("a.jsonl:301: invalid JSON"), std::string::npos) << stopped.out;
    EXPECT_NE(stopped.out.find("--skip-bad-json skips such lines (added to a --resume of this run too)"),
              std::string::npos) << stopped.out;
    EXPECT_FALSE(shards(path("x"), "train").empty()) << "shards before the bad line";
    prep_ok(args("x", {"--resume", "--skip-bad-json"}));
    PrepRun whole = prep_ok(args("y", {"--skip-bad-json"}));
    EXPECT_NE(whole.out.find("skipped 1 bad JSON line"), std::string::npos) << whole.out;
    EXPECT_TRUE(outputs(path("x")) == outputs(path("y")));
    prep_ok(args("z", {"--skip-bad-json", "--max-shards", "1"}));
    prep_fails(args("z", {"--resume"}), {"options differ", "skip_bad_json: was true, now false"});
}

// An option that no input reads is said (both were accepted without a word): --doc-sep beside JSON lines only,
// --text-field beside text files only; not where an input reads it, nor beside an archive, which may hold either.
TEST_F(Prep, OptionsNoInputReadsAreSaid) {
    REQUIRE_GPT2();
    const std::string jsonl = std::string(FX) + "c4_train.json.gz", text = std::string(FX) + "texts/a.txt";
    PrepRun r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", jsonl, "--doc-sep", "blank", "--text-field",
                         "text", "--out", path("a")});
    EXPECT_NE(r.out.find("notice: --doc-sep changes nothing here: no input is a text file or an archive"),
              std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("notice: --text-field"), std::string::npos) << r.out;
    r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", text, "--doc-sep", "blank", "--text-field", "body",
                 "--out", path("b")});
    EXPECT_NE(r.out.find("notice: --text-field changes nothing here: no input is JSON lines or an archive"),
              std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("notice: --doc-sep"), std::string::npos) << r.out;
    r = prep_ok({"--tokenizer", "gpt2", "--no-val", "--input", std::string(FX) + "owt.tar.xz", "--doc-sep", "file",
                 "--text-field", "body", "--out", path("c")});
    EXPECT_EQ(r.out.find("notice: "), std::string::npos) << r.out;
}

TEST_F(Prep, EmptyInputs) {
    REQUIRE_GPT2();
    REQUIRE_SPM();
    std::string o = path("x");
    for (const char* f : {"empty.jsonl", "blank.json.gz", "emptytext.jsonl"})
        prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/" + f, "--out", o},
                   {"no documents in the input"});
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/notext.jsonl", "--skip-bad-json",
                "--val-docs", "5", "--out", o},
               {"all 2 documents went to the validation split"});
    prep_fails({"c4", "--input", std::string(FX) + "c4_train.json.gz", "--val-input",
                std::string(FX) + "bad/emptytext.jsonl", "--spm-model", AUSTEN_MODEL, "--out", o},
               {"the --val-input files hold no documents"});
    // the other way round it said "all 2 documents went to the validation split", and to lower --val-docs
    prep_fails({"--tokenizer", "gpt2", "--input", std::string(FX) + "bad/empty.jsonl", "--val-input",
                std::string(FX) + "docs.json.xz", "--out", o},
               {"the --input files hold no documents (the --val-input files hold"});
    EXPECT_FALSE(fs::exists(path("x_train_000000.bin")));
}

TEST_F(Prep, BadOptions) {
    REQUIRE_GPT2();
    REQUIRE_SPM();
    std::string in = std::string(FX) + "c4_train.json.gz", o = path("x");
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--shard-token", "5"},
               {"unknown option --shard-token", "did you mean --shard-tokens?"});
    // an --out whose file names would pass NAME_MAX: refused at the start (it failed at the first shard's write)
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", path(std::string(240, 'x'))},
               {"the names written beside it", "pass the filesystem's limit of 255 a name", "shorter --out"});
    // the start of an option's name means that option (more than 3 edits away it had no suggestion)
    prep_fails({"--tok", "gpt2", "--input", in, "--out", o}, {"unknown option --tok", "did you mean --tokenizer?"});
    // a ceiling is said, not applied without a word
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--threads", "5000"},
               {"--threads must be at most 4096 (got 5000)"});
    // --val-seed where no split is drawn (it changed nothing, without a word)
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--val-docs", "5", "--val-seed", "9"},
               {"--val-seed goes with --val-fraction", "this split is --val-docs, which draws nothing"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--no-val", "--val-seed", "9"},
               {"this split is --no-val"});
    prep_fails({"--tokenizer", "spm", "--input", in, "--out", o}, {"--spm-model", "huggingface-cli download"});
    // a directory as --out wrote files named "_train_000000.bin" into it
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", dir + "/"},
               {"is a directory; --out is a prefix of file names", "--out " + dir + "/data"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", dir}, {"is a directory", "--out " + dir + "/data"});
    prep_fails({"--tokenizer", "spm", "--spm-model", "nope.model", "--input", in, "--out", o},
               {"nope.model", "No such file"});
    prep_fails({"--tokenizer", "spm", "--spm-model", std::string(FX) + "noeos.model", "--input", in, "--out", o},
               {"has no EOS piece"});
    prep_fails({"--tokenizer", "bpe", "--input", in, "--out", o}, {"--tokenizer must be gpt2 or spm"});
    prep_fails({"--tokenizer", "gpt2", "--gpt2-ranks", "no/ranks.tiktoken", "--input", in, "--out", o},
               {"no/ranks.tiktoken"});
    prep_fails({"--tokenizer", "gpt2", "--spm-model", AUSTEN_MODEL, "--input", in, "--out", o},
               {"--spm-model is for --tokenizer spm"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--val-docs", "3", "--val-fraction", "0.1"},
               {"at most one of"});
    prep_fails({"--tokenizer", "gpt2", "--layout", "rows", "--input", in, "--out", o}, {"needs a pad id", "--pad-id"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--row-len", "64"}, {"for --layout rows"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--val-fraction", "1.5"}, {"--val-fraction"});
    prep_fails({"c4", "--input", in, "--spm-model", AUSTEN_MODEL, "--out", o}, {"--val-input", "--no-val"});
    // a preset's settings are overridden by the options given: c4 without a validation split (it was refused, its
    // message asking for a --val-input)
    prep_ok({"c4", "--input", in, "--spm-model", AUSTEN_MODEL, "--out", path("c4noval"), "--no-val"});
    EXPECT_EQ(shards(path("c4noval"), "val").size(), 0u);
    EXPECT_GE(shards(path("c4noval"), "train").size(), 1u);
    // an option given twice is refused (the last was taken: one of two --out written, no word)
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--out", path("y")},
               {"--out is given twice", "(the second is \"" + path("y") + "\")"});
    // a seed is any 64-bit value (2^63 and up were refused as counts); not a negative or a wider one
    prep_ok({"--tokenizer", "gpt2", "--input", in, "--out", path("seedmax"), "--val-fraction", "0.5", "--val-seed",
             "18446744073709551615"});
    EXPECT_GE(shards(path("seedmax"), "val").size(), 1u);
    for (const char* bad : {"-1", "18446744073709551616", "1K", " 5"})
        prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--val-fraction", "0.5", "--val-seed", bad},
                   {"--val-seed: \"" + std::string(bad) + "\" is not a whole number from 0 to 18446744073709551615"});
    // numbers as the trainers take them: strtod's hexadecimal ("0x0.1" was a fraction of 0.0625) and a space before
    // the number are refused, and a fraction too small for a double (it was 0: no validation split, unsaid)
    for (const char* bad : {"0x0.1", " 0.1"})
        prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--val-fraction", bad},
                   {"--val-fraction: \"" + std::string(bad) + "\" is not a decimal number"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--val-fraction", "1e-400"},
               {"--val-fraction: 1e-400 is too small to be told from 0"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--max-docs", " 5"},
               {"--max-docs: \" 5\" is not a non-negative whole number"});
    // an option of a step that does not run is refused (it was ignored, exit 0)
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--spm-train-lines", "5"},
               {"--spm-train-lines goes with --spm-vocab N"});
    // --spm-vocab 0 is a size out of range (it was taken as not given: "no tokenizer: give --tokenizer gpt2 ...")
    prep_fails({"--input", in, "--out", o, "--spm-vocab", "0"},
               {"--spm-vocab 0: a SentencePiece model here has 8..65536 pieces"});
    // one far above it names the value given (it said "--spm-vocab 2147483647")
    prep_fails({"--input", in, "--out", o, "--spm-vocab", "3000000000"},
               {"--spm-vocab 3000000000: a SentencePiece model here has 8..65536 pieces"});
    // a text too small even for the smallest model (SentencePiece asks for <= 6 pieces): more text, not a smaller
    // --spm-vocab, which 8 cannot go below (the hint asked for the impossible)
    std::ofstream(path("ab.txt")) << "a\n\nb\n";
    prep_fails({"--input", path("ab.txt"), "--out", o, "--spm-vocab", "8", "--no-val"},
               {"Please set it to a value <= 6", "HINT: the text is too small for a model: give more text"});
    // an input under one of --out's names (its state file): --overwrite deleted it, then failed to open it
    std::ofstream(path("io_prep.json")) << "{\"text\": \"Some text of a document.\"}\n";
    for (const bool overwrite : {false, true}) {
        std::vector<std::string> args = {"--tokenizer", "gpt2", "--input", path("io_prep.json"), "--out", path("io"),
                                         "--no-val"};
        if (overwrite) args.push_back("--overwrite");
        prep_fails(args, {"--input " + path("io_prep.json") + " is one of the files --out " + path("io") +
                          " writes (its state file)"});
        EXPECT_TRUE(fs::exists(path("io_prep.json"))) << "--overwrite " << overwrite;
    }
    // the hint's command makes a file prep_data reads (FILE.zst: refused by its name)
    std::ofstream(path("a.jsonl.bz2")) << "x";
    prep_fails({"--tokenizer", "gpt2", "--input", path("a.jsonl.bz2"), "--out", o},
               {"bzip2 -dc " + path("a.jsonl.bz2") + " | zstd -o " + path("a.jsonl.zst")});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--val-input", in, "--out", o},
               {"both a --val-input and an --input"});
    // ... and under two names, hard links to one file (paths were compared: train and val shards came out the same)
    fs::copy_file(in, path("hl_a.json.gz"));
    fs::create_hard_link(path("hl_a.json.gz"), path("hl_b.json.gz"));
    prep_fails({"--tokenizer", "gpt2", "--input", path("hl_a.json.gz"), "--val-input", path("hl_b.json.gz"), "--out", o},
               {path("hl_b.json.gz") + " (a --val-input) and " + path("hl_a.json.gz") +
                " (an --input) are one file (hard or symbolic links): validation documents would leak into training"});
    prep_fails({"--tokenizer", "gpt2", "--no-val", "--input", path("hl_a.json.gz"), path("hl_b.json.gz"), "--out", o},
               {path("hl_a.json.gz") + " and " + path("hl_b.json.gz") + " are one file (hard or symbolic links): its "
                "documents would be read twice"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", o, "--shard-tokens", "12X"}, {"not a non-negative"});
    prep_fails({"--tokenizer", "gpt2", "--input", in}, {"no output"});
    prep_fails({"--tokenizer", "gpt2", "--out", o}, {"no input"});
    prep_fails({"c5", "--input", in}, {"unknown preset"});
}

// An --out whose path cannot be looked at (a symlink loop, a name too long, a directory this user may not enter) threw
// std::filesystem's error: "internal error", exit 2. It is the user's to fix: exit 1, what went wrong, a hint.
TEST_F(Prep, OutPathThatCannotBeExaminedIsAUserError) {
    const std::string in = std::string(FX) + "c4_train.json.gz";
    fs::create_symlink("loop", path("loop"));
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", path("loop/x")},
               {"cannot use --out " + path("loop/x"), "Too many levels of symbolic links", "HINT"});
    const std::string too_long = path(std::string(300, 'n'));
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", too_long + "/x"},
               {"cannot use --out " + too_long + "/x", "File name too long", "HINT"});
    prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", too_long}, {"File name too long"});
    if (geteuid() != 0) {  // (root enters any directory)
        fs::create_directories(path("locked"));
        fs::permissions(path("locked"), fs::perms::none);
        prep_fails({"--tokenizer", "gpt2", "--input", in, "--out", path("locked/x/y")},
                   {"cannot use --out " + path("locked/x/y"), "Permission denied", "HINT"});
        fs::permissions(path("locked"), fs::perms::owner_all);
    }
}
