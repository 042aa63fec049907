// Tests for data/roberta_tokenizer.h: ids equal to transformers' RobertaTokenizer (live, on golden cases and a whole
// Austen novel; REQUIRE_TRANSFORMERS=1 turns a missing transformers into a failure, as CI sets it), the same model read
// from tokenizer.json, the pair-rank merge rule on a hand-made vocabulary, padding, and the errors bad files give.
// The vocabulary is built at test time from the vendored GPT-2 ranks by test/reference/make_roberta_vocab.py (RoBERTa's
// special tokens, ids in a seeded random order, no download) into a fresh temporary directory.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"  // join
#include "data/gpt2_tokenizer.h"
#include "data/roberta_tokenizer.h"
#include "test/test_files.h"
#include "test/test_util.h"

#ifndef PRAC_SOURCE_DIR
#error "PRAC_SOURCE_DIR must point at the repository root"
#endif

#if PRAC_HAVE_PCRE2

namespace {

const std::string SRC = PRAC_SOURCE_DIR;
const std::string RANKS = SRC + "/data/gpt2/r50k_base.tiktoken";

// A fresh directory under /tmp, removed with everything in it.
struct TmpDir {
    std::string dir;
    TmpDir() {
        char tmpl[] = "/tmp/prac_test_roberta_XXXXXX";
        if (mkdtemp(tmpl)) dir = tmpl;
    }
    ~TmpDir() {
        if (!dir.empty()) std::filesystem::remove_all(dir);
    }
    std::string file(const std::string& name) const { return dir + "/" + name; }
};

std::string python() {
    const char* py = getenv("PYTHON");
    return py && *py ? py : "python3";
}

std::string ids_str(const std::vector<uint32_t>& v) {
    return "[" + join(v) + "]";
}

long first_diff(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return a.size() == b.size() ? -1 : (long)n;
}

// The generated vocabulary: ctest's setup test tokenizer.roberta_vocab writes it into the build directory
// (PRAC_ROBERTA_VOCAB) before these tests; a binary run by hand without it makes its own in a temporary directory.
struct Vocab {
    std::string dir, tmp;
    static bool complete(const std::string& d) {
        for (const char* f : {"/vocab.json", "/merges.txt", "/json/tokenizer.json"})
            if (!std::filesystem::is_regular_file(d + f)) return false;
        return true;
    }
    Vocab() {
#ifdef PRAC_ROBERTA_VOCAB
        if (complete(PRAC_ROBERTA_VOCAB)) {
            dir = PRAC_ROBERTA_VOCAB;
            return;
        }
#endif
        char tmpl[] = "/tmp/prac_test_roberta_XXXXXX";
        if (!mkdtemp(tmpl)) return;
        tmp = tmpl;
        std::string cmd = python() + " " + SRC + "/test/reference/make_roberta_vocab.py " + RANKS + " " + tmp;
        if (std::system(cmd.c_str()) == 0 && complete(tmp)) dir = tmp;
    }
    ~Vocab() {
        if (!tmp.empty()) std::filesystem::remove_all(tmp);
    }
};
const std::string& vocab_dir() {
    static Vocab v;
    if (v.dir.empty()) throw std::runtime_error("make_roberta_vocab.py failed (python3 needed)");
    return v.dir;
}
const RobertaTokenizer& tok() {
    static RobertaTokenizer t(vocab_dir() + "/vocab.json", vocab_dir() + "/merges.txt");
    return t;
}
const RobertaTokenizer& tok_json() {
    static RobertaTokenizer t(vocab_dir() + "/json");  // the directory: its tokenizer.json
    return t;
}

// One comparison with transformers: kind 0 = tokenize (no special tokens), 1 = single, 2 = pair.
struct Case {
    int kind;
    std::string a, b;
    int max_length = 0;
};

std::vector<uint32_t> ours(const RobertaTokenizer& t, const Case& c) {
    if (c.kind == 0) return t.tokenize(c.a);
    if (c.kind == 1) return t.encode_single(c.a, c.max_length);
    return t.encode_pair(c.a, c.b, c.max_length);
}

// A batch of cases for one tokenizer directory, and transformers' ids for them.
struct Job {
    std::string model_dir;
    std::vector<Case> cases;
    std::vector<std::vector<uint32_t>> expected;
};

// Runs test/reference/roberta_tokenizer_check.py once for all jobs (loading transformers takes seconds); false (with
// `why`) when it fails, or when transformers is not importable.
bool transformers_ids(std::vector<Job>& jobs, std::string& why) {
    TmpDir io;
    std::string cmd = python() + " " + SRC + "/test/reference/roberta_tokenizer_check.py";
    for (size_t j = 0; j < jobs.size(); j++) {
        std::string buf;
        auto put64 = [&](int64_t v) { buf.append((const char*)&v, 8); };
        for (const Case& c : jobs[j].cases) {
            put64(c.max_length);
            buf += (char)c.kind;
            put64((int64_t)c.a.size());
            buf += c.a;
            put64((int64_t)c.b.size());
            buf += c.b;
        }
        std::string in = io.file("in" + std::to_string(j)), out = io.file("out" + std::to_string(j));
        write_bytes(in, buf);
        cmd += " " + jobs[j].model_dir + " " + in + " " + out;
    }
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
        why = WIFEXITED(rc) && WEXITSTATUS(rc) == 3
                  ? python() + " cannot import transformers (pip install transformers; CI installs it)"
                  : "roberta_tokenizer_check.py failed (" + std::to_string(rc) + ")";
        return false;
    }
    for (size_t j = 0; j < jobs.size(); j++) {
        std::stringstream lines(read_bytes(io.file("out" + std::to_string(j))));
        std::string line;
        while (std::getline(lines, line)) {
            std::vector<uint32_t> ids;
            std::stringstream ss(line);
            uint32_t id;
            while (ss >> id) ids.push_back(id);
            jobs[j].expected.push_back(ids);
        }
        if (jobs[j].expected.size() != jobs[j].cases.size()) {
            why = "roberta_tokenizer_check.py wrote " + std::to_string(jobs[j].expected.size()) + " rows for " +
                  std::to_string(jobs[j].cases.size()) + " cases";
            return false;
        }
    }
    return true;
}

void expect_same(const RobertaTokenizer& t, const Job& job, const char* what) {
    for (size_t i = 0; i < job.cases.size(); i++) {
        const Case& c = job.cases[i];
        EXPECT_EQ(ids_str(ours(t, c)), ids_str(job.expected[i]))
            << what << ", case " << i << " (kind " << c.kind << ", max_length " << c.max_length << "): \""
            << c.a.substr(0, 60) << "\"" << (c.kind == 2 ? " / \"" + c.b.substr(0, 60) + "\"" : "");
    }
}

// A hand-made vocabulary where the pair rule matters: the bytes (ids in reverse byte order), then bc abc ab Ġa Ġab;
// merges (ranks 0..4) "b c", "a b", "Ġ a", "Ġa b", "a bc". Written into d.
std::unique_ptr<RobertaTokenizer> pair_rank_tokenizer(const TmpDir& d) {
    nlohmann::json vocab = {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
    auto add = [&](const std::string& t) {
        size_t id = vocab.size();
        vocab[t] = id;
    };
    for (int b = 255; b >= 0; b--) add(gpt2_byte_to_unicode((unsigned char)b));
    for (const char* t : {"bc", "abc", "ab", "Ġa", "Ġab"}) add(t);
    add("<mask>");
    write_bytes(d.file("vocab.json"), vocab.dump());
    write_bytes(d.file("merges.txt"), "#version: 0.2\nb c\na b\nĠ a\nĠa b\na bc\n");
    return std::make_unique<RobertaTokenizer>(d.dir);
}

std::string austen(const std::string& name) { return read_bytes(SRC + "/data/austen/" + name + ".txt"); }

// Golden cases: Unicode categories at the regex's boundaries, whitespace runs, contractions, numbers, emoji, very
// long words, empty strings, special-token strings in the text, pairs, truncation (odd and even budgets, ties).
std::vector<Case> golden_cases() {
    std::vector<std::string> texts = {
        "Hello world",
        " Hello world",
        "",
        " ",
        "  leading spaces and trailing spaces   ",
        "a\n\nb\n\n\nc\n",
        "line one\r\nline two\r\n\r\nline four\r\n",
        "\t\ttabs\tand\t \t mixed \t\n",
        "don't I'll we've they're she's I'd I'm",
        "DON'T I'LL WE'VE THEY'RE SHE'S I'D I'M",
        "it\xe2\x80\x99s curly, 'quoted', ''double''",
        "1234567890 3.14159 1,000,000 12th 2024-01-01 0x1F 1e-9",
        "\xd9\xa3\xd9\xa4\xd9\xa5 \xc2\xbd \xc2\xb2 \xe2\x85\xab",
        "na\xc3\xafve caf\xc3\xa9 r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m",
        "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf\xe4\xb8\x96\xe7\x95\x8c",
        "\xf0\x9f\x87\xba\xf0\x9f\x87\xb8 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
        "\xf0\x9f\x98\x80\xf0\x9f\x98\x80!",
        "e\xcc\x81 combining, a\xc2\xa0nbsp, em\xe2\x80\x83space, ideo\xe3\x80\x80space",
        std::string("nul\0byte and del\x7f", 18),
        "def f(x):\n    return x**2  # comment\n\n\n    \n",
        "https://example.com/a?b=c&d=e#frag <tag attr=\"v\">",
        std::string(100, ' ') + "x",
        "!!!!!!!??? ... --- === ***",
        "Antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
        std::string(3000, 'x'),
        [] { std::string s; for (int i = 0; i < 700; i++) s += "ab"; return s; }(),
        [] { std::string s; for (int i = 0; i < 500; i++) s += "\xc3\xa9"; return s; }(),
        // vocabulary entries the merges do not make (roberta-base has these): BPE splits them
        "madeupword0000 madeupword0001",
        // special tokens in the text become their ids
        "<s>x</s>", "a<mask>b", "<unk><pad>", "x <s> y", "</s></s>", "<mask", "<s >",
    };
    std::vector<Case> cases;
    for (const std::string& t : texts) {
        cases.push_back({0, t, ""});
        cases.push_back({1, t, ""});
    }
    // pairs, including empty halves
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {"The cat sat.", "A cat was sitting."}, {"", "only B"}, {"only A", ""}, {"", ""},
        {"Is this a question?", "It is\nmultiline.\n"}, {"\xf0\x9f\x98\x80", "caf\xc3\xa9"}};
    for (const auto& [a, b] : pairs) cases.push_back({2, a, b});
    // truncation: single and pairs, budgets odd and even, one side short, equal lengths (the tie)
    const std::string ten = "one two three four five six seven eight nine ten";
    const std::string four = "alpha beta gamma delta";
    for (int ml : {2, 3, 5, 8, 12, 13, 40}) cases.push_back({1, ten, "", ml});
    for (int ml : {4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 18, 40}) {
        cases.push_back({2, ten, four, ml});
        cases.push_back({2, four, ten, ml});
        cases.push_back({2, ten, ten, ml});
        cases.push_back({2, four, "", ml});
    }
    // random mixtures of the characters above
    const std::vector<std::string> pool = {"a", "b", "Z", " ", " ", "\n", "\r\n", "\t", "'", "s", "t", "ll", "1",
                                           "9", ".", ",", "!", "\xc3\xa9", "\xe4\xb8\x96", "\xf0\x9f\x98\x80",
                                           "\xc2\xa0", "\xe2\x80\x83", "\xd9\xa3", "-", "_", "\xe2\x80\x99", "<s>"};
    std::mt19937 rng(42);
    for (int k = 0; k < 150; k++) {
        std::string s;
        size_t n = 1 + rng() % 80;
        for (size_t i = 0; i < n; i++) s += pool[rng() % pool.size()];
        std::string b;
        for (size_t i = 0; i < n / 2; i++) b += pool[rng() % pool.size()];
        cases.push_back({k % 3 == 2 ? 2 : k % 2, s, b, k % 5 == 0 ? 20 : 0});
    }
    return cases;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Against transformers
// ---------------------------------------------------------------------------------------------------------

// Golden cases; a whole novel as one text and its paragraphs as truncated pairs; the tokenizer.json (merges as "a b"
// strings, <mask> with lstrip, as roberta-base's) with whitespace before <mask>; the pair-rank vocabulary: ids equal to
// transformers', all from one run of the reference script.
TEST(RobertaTokenizer, MatchesTransformers) {
    std::vector<Job> jobs(4);
    jobs[0] = {vocab_dir(), golden_cases(), {}};

    std::string text = austen("persuasion");
    jobs[1] = {vocab_dir(), {{0, text, ""}}, {}};
    std::vector<std::string> paras;
    for (size_t pos = 0; pos < text.size() && paras.size() < 400;) {
        size_t e = text.find("\n\n", pos);
        e = e == std::string::npos ? text.size() : e + 2;
        paras.push_back(text.substr(pos, e - pos));
        pos = e;
    }
    for (size_t i = 0; i + 1 < paras.size(); i += 2) jobs[1].cases.push_back({2, paras[i], paras[i + 1], 64});

    jobs[2] = {vocab_dir() + "/json", golden_cases(), {}};
    for (const char* t : {" hello <mask> world", "x  <mask>  y", "\t<mask>", "<mask> a", "a\xe3\x80\x80<mask>"}) {
        jobs[2].cases.push_back({0, t, ""});
        jobs[2].cases.push_back({1, t, ""});
    }

    TmpDir d;
    auto pair_rank = pair_rank_tokenizer(d);
    jobs[3] = {d.dir, {{0, "abc", ""}, {0, " abc", ""}, {0, " ab", ""}, {0, "ab abc abcabc bcab", ""}}, {}};

    // rstrip (no RoBERTa file sets it; the flag must still mean what it means in transformers): </s> eats the
    // whitespace after it, <s> both sides
    TmpDir strip;
    nlohmann::json tj = nlohmann::json::parse(read_bytes(vocab_dir() + "/json/tokenizer.json"));
    for (auto& a : tj["added_tokens"]) {
        if (a["content"] == "</s>") a["rstrip"] = true;
        if (a["content"] == "<s>") a["lstrip"] = a["rstrip"] = true;
    }
    write_bytes(strip.file("tokenizer.json"), tj.dump());
    RobertaTokenizer stripping(strip.dir);
    jobs.push_back({strip.dir, {}, {}});
    for (const char* t : {"a</s>  b", "x </s>\t\nb </s>", "  <s>  y  <s>", "<s> </s> <mask> z", " \xe2\x80\x83</s>\xe3\x80\x80q"})
        jobs[4].cases.push_back({0, t, ""});

    std::string why;
    if (!transformers_ids(jobs, why)) {
        // CI installs transformers; REQUIRE_TRANSFORMERS=1 turns its absence into a failure there
        const char* req = getenv("REQUIRE_TRANSFORMERS");
        if ((req && std::string(req) == "1") || why.find("cannot import") == std::string::npos)
            FAIL() << why << " (REQUIRE_TRANSFORMERS=" << (req ? req : "") << ")";
        GTEST_SKIP() << why;
    }
    expect_same(tok(), jobs[0], "golden cases");
    auto got = tok().tokenize(text);
    EXPECT_GT(got.size(), 100000u);
    EXPECT_EQ(first_diff(got, jobs[1].expected[0]), -1)
        << "Persuasion: " << got.size() << " tokens vs transformers' " << jobs[1].expected[0].size();
    expect_same(tok(), jobs[1], "Persuasion");
    expect_same(tok_json(), jobs[2], "tokenizer.json");
    expect_same(*pair_rank, jobs[3], "pair-rank vocabulary");
    expect_same(stripping, jobs[4], "lstrip/rstrip");
}

// Hugging Face BPE merges by the rank of the pair, not of the merged token, and a vocabulary entry is only reached
// through the merges: tiktoken's rule (lowest-ranked concatenation, whole piece first) gives other tokens here.
TEST(RobertaTokenizer, PairRankNotTokenRank) {
    TmpDir d;
    auto t = pair_rank_tokenizer(d);
    auto id = [&](const char* s) { return (uint32_t)t->id_of(s); };
    // a b c: (b,c) 0 < (a,b) 1 -> a bc; (a,bc) 4 -> abc
    EXPECT_EQ(ids_str(t->tokenize("abc")), ids_str({id("abc")}));
    // Ġ a b c: (b,c) 0 -> Ġ a bc; (Ġ,a) 2 -> Ġa bc, which no merge joins
    EXPECT_EQ(ids_str(t->tokenize(" abc")), ids_str({id("Ġa"), id("bc")}));
    // Ġ a b: (a,b) 1 < (Ġ,a) 2 -> Ġ ab; (Ġ,ab) is no merge, so the token "Ġab" (made only by Ġa + b) is not reached
    // although the whole piece is that token (tiktoken would return it whole)
    EXPECT_EQ(ids_str(t->tokenize(" ab")), ids_str({id("Ġ"), id("ab")}));
}

// ---------------------------------------------------------------------------------------------------------
// Without Python
// ---------------------------------------------------------------------------------------------------------

// The vocabulary is GPT-2's under other ids, and its merges are the r50k ranks' (recovered by the generator), so on
// real text the pair-rank BPE must give tiktoken's tokens, id for id through the permutation (Gpt2Tokenizer is
// checked against tiktoken itself). Both files (vocab.json + merges.txt and tokenizer.json) load the same model.
TEST(RobertaTokenizer, SameTokensAsGpt2OnNovel) {
    Gpt2Tokenizer gpt2(RANKS);
    std::string text = austen("northanger-abbey");
    auto r = tok().encode(text);
    std::vector<uint32_t> r_json;
    tok_json().encode(text, r_json);
    auto g = gpt2.encode(text);
    ASSERT_EQ(r.size(), g.size());
    EXPECT_EQ(first_diff(r, r_json), -1);
    std::vector<uint32_t> mapped(r.size());
    for (size_t i = 0; i < r.size(); i++) {
        std::string bytes = tok().decode(&r[i], 1);
        mapped[i] = (uint32_t)gpt2.rank_of(bytes);
    }
    EXPECT_EQ(first_diff(mapped, g), -1);
    EXPECT_TRUE(tok().decode(r) == text);
    EXPECT_NE(r[0], g[0]);  // the ids themselves differ: the permutation is real
}

TEST(RobertaTokenizer, SpecialIdsAndLayout) {
    EXPECT_EQ(tok().cls_id, 0u);
    EXPECT_EQ(tok().pad_id, 1u);
    EXPECT_EQ(tok().sep_id, 2u);
    EXPECT_EQ(tok().unk_id, 3u);
    EXPECT_EQ(tok().mask_id, (uint32_t)tok().vocab_size() - 1);
    EXPECT_EQ(tok().vocab_size(), 4 + 50256 + 3 + 1);
    auto a = tok().tokenize("Hello world"), b = tok().tokenize(" again");
    std::vector<uint32_t> single = {0}, pair = {0};
    single.insert(single.end(), a.begin(), a.end());
    single.push_back(2);
    pair = single;
    pair.push_back(2);
    pair.insert(pair.end(), b.begin(), b.end());
    pair.push_back(2);
    EXPECT_EQ(ids_str(tok().encode_single("Hello world")), ids_str(single));
    EXPECT_EQ(ids_str(tok().encode_pair("Hello world", " again")), ids_str(pair));
    EXPECT_EQ(tok().decode(tok().encode_pair("a", "b")), "<s>a</s></s>b</s>");
}

// The heap merge (forced for every piece, no cache) gives the scan's ids under the pair rule too.
TEST(RobertaTokenizer, HeapMergeMatchesScan) {
    BpeOptions o;
    o.heap_bpe_min_bytes = 2;
    o.piece_cache = false;
    RobertaTokenizer heap(vocab_dir(), o);
    std::string text = austen("persuasion").substr(0, 200000);
    std::vector<uint32_t> a, b;
    heap.encode(text, a);
    tok().encode(text, b);
    EXPECT_EQ(first_diff(a, b), -1);
    std::mt19937 rng(5);
    for (int k = 0; k < 300; k++) {
        std::string s = k % 2 ? " " : "";
        size_t len = 2 + rng() % 200;
        for (size_t i = 0; i < len; i++) s += "aeiouxyz"[rng() % (k % 3 == 0 ? 2 : 8)];
        a.clear(), b.clear();
        heap.encode(s, a);
        tok().encode(s, b);
        ASSERT_EQ(first_diff(a, b), -1) << s;
    }
}

TEST(RobertaTokenizer, PadRows) {
    std::vector<uint32_t> r0 = {0, 5, 6, 2}, r1 = {0, 7, 2}, r2 = {0, 2};
    TokenBatch b = pad_rows({&r0, &r1, &r2}, 1);
    EXPECT_EQ(b.B, 3);
    EXPECT_EQ(b.T, 4);
    EXPECT_EQ(b.ids, (std::vector<int32_t>{0, 5, 6, 2, 0, 7, 2, 1, 0, 2, 1, 1}));
    EXPECT_EQ(b.kv_len, (std::vector<int32_t>{4, 3, 2}));
    TokenBatch f = pad_rows({&r1}, 1, 6);
    EXPECT_EQ(f.ids, (std::vector<int32_t>{0, 7, 2, 1, 1, 1}));
    EXPECT_EQ(f.kv_len, (std::vector<int32_t>{3}));
    EXPECT_USER_ERROR(pad_rows({&r0, &r1}, 1, 3), "row 0 has 4 tokens, more than T = 3", "HINT");
    std::vector<uint32_t> empty;
    EXPECT_USER_ERROR(pad_rows({&r0, &empty}, 1), "row 1 of 2 is empty");
}

TEST(RobertaTokenizer, BadInputs) {
    EXPECT_USER_ERROR(tok().encode_single("x", 1), "max_length 1", "2 special tokens", "HINT");
    EXPECT_USER_ERROR(tok().encode_pair("x", "y", 3), "max_length 3", "4 special tokens");
    EXPECT_USER_ERROR(tok().encode_single("bad \xff byte"), "invalid UTF-8 at byte offset 4", "RoBERTa", "HINT");
    EXPECT_USER_ERROR(tok().tokenize("<s>\xc0\xaf"), "invalid UTF-8");
    uint32_t big = 60000;
    EXPECT_USER_ERROR(tok().decode(&big, 1), "token id 60000", "RoBERTa");
}

struct RobertaTokenizerFiles : TmpDirTest {
    nlohmann::json vocab, tokjson;
    std::string merges;
    void SetUp() override {
        TmpDirTest::SetUp();
        vocab = nlohmann::json::parse(read_bytes(vocab_dir() + "/vocab.json"));
        merges = read_bytes(vocab_dir() + "/merges.txt");
        tokjson = nlohmann::json::parse(read_bytes(vocab_dir() + "/json/tokenizer.json"));
    }
    std::string write_pair() {
        write_bytes(file("vocab.json"), vocab.dump());
        write_bytes(file("merges.txt"), merges);
        return dir;
    }
    std::string write_json() {
        write_bytes(file("tokenizer.json"), tokjson.dump());
        return file("tokenizer.json");
    }
};

TEST_F(RobertaTokenizerFiles, MissingAndDamagedFiles) {
    EXPECT_USER_ERROR(RobertaTokenizer{dir}, "neither tokenizer.json nor vocab.json + merges.txt", "HINT");
    write_bytes(file("vocab.json"), "{not json");
    write_bytes(file("merges.txt"), merges);
    EXPECT_USER_ERROR(RobertaTokenizer{dir}, "vocab.json: not valid JSON");
    vocab.erase("<mask>");
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "no \"<mask>\"", "HINT");
    vocab["<mask>"] = 7;  // the id of another token
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "id 7 appears twice");
    vocab["<mask>"] = vocab.size() + 5;
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "\"<mask>\" has id", "each once");
    vocab["<mask>"] = vocab.size() - 1;
    vocab["Ġ"] = "x";
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "the id of \"Ġ\" is \"x\"");
}

TEST_F(RobertaTokenizerFiles, MergesMustMatchTheVocabulary) {
    std::string good = merges;
    merges = good + "Ġthe zzzzqq\n";
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "merges.txt:50002", "the right token \"zzzzqq\"", "HINT");
    merges = good + "Ġ t\n";  // merge 1 again
    // named by file and line in the file's own spelling (it named vocab.json, merge 50001 and the bytes " " + "t")
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "merges.txt:50002: the merge \"Ġ t\" repeats ",
                      "merges.txt:2\n", "HINT");
    tokjson["model"]["merges"].push_back("Ġ t");
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "model.merges[50000]: the merge \"Ġ t\" repeats ",
                      "model.merges[0]\n");
    std::filesystem::remove(file("tokenizer.json"));  // (write_pair's directory would read it first)
    merges = good + "Ġthe\n";
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "merges.txt:50002", "not a merge");
    // a byte that is no token: text with it could not be encoded
    merges = good;
    uint32_t id = vocab["Ā"];  // byte 0x00
    vocab.erase("Ā");
    vocab["Ā_"] = id;
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "byte 0x00", "is not a token");
}

// A merges list that makes few of the vocabulary's tokens (empty, cut short) is refused: it would encode text in
// shorter tokens, silently (finetune_roberta trained on such ids with exit 0). roberta-base's own files have 3 tokens
// no merge makes (madeupword0000-0002), and load.
TEST_F(RobertaTokenizerFiles, MergesThatMakeFewTokensAreRefused) {
    const std::string good = merges;
    merges = "#version: 0.2\n";
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "merges.txt: 50003 of the 50003 tokens of more than one byte",
                      "are made by no merge", "HINT");
    merges = good.substr(0, good.size() / 2);
    merges = merges.substr(0, merges.rfind('\n') + 1);
    EXPECT_USER_ERROR(RobertaTokenizer{write_pair()}, "tokens of more than one byte", "made by no merge");
    // the last 10 merges dropped: 13 tokens unmade, within the allowance (16), as a vocabulary with a few added words
    merges = good;
    for (int k = 0; k < 10; k++) merges = merges.substr(0, merges.rfind('\n', merges.size() - 2) + 1);
    EXPECT_EQ(RobertaTokenizer{write_pair()}.vocab_size(), 50264);
    tokjson["model"]["merges"] = nlohmann::json::array();
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "tokenizer.json: model.merges: 50003 of the 50003", "no merge");
}

TEST_F(RobertaTokenizerFiles, OtherTokenizerJsonModelsAreRefused) {
    nlohmann::json good = tokjson;
    tokjson["model"] = {{"type", "WordPiece"}, {"vocab", {{"[UNK]", 0}}}};
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "the model is \"WordPiece\", not BPE", "HINT");
    tokjson["model"] = {{"type", "Unigram"}};
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "\"Unigram\", not BPE");
    tokjson = good;
    tokjson["normalizer"] = {{"type", "NFC"}};
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "normalizer", "NFC", "HINT");
    tokjson = good;
    tokjson["pre_tokenizer"]["add_prefix_space"] = true;
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "pre-tokenizer", "without a prefix space");
    tokjson = good;
    tokjson["model"]["byte_fallback"] = true;
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "model.byte_fallback is true");
    tokjson = good;
    tokjson["added_tokens"].push_back({{"id", 5}, {"content", "[NEW]"}, {"special", true}});
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "added token", "[NEW]");
    // a value of the wrong type names its place (it was "internal error: [json.exception.type_error.306] cannot use
    // value() with string", exit 2)
    tokjson = good;
    tokjson["pre_tokenizer"] = "ByteLevel";
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "tokenizer.json: pre_tokenizer is \"ByteLevel\", not an object");
    tokjson = good;
    tokjson["pre_tokenizer"]["add_prefix_space"] = "yes";
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "pre_tokenizer.add_prefix_space is \"yes\", not true or false");
    tokjson = good;
    tokjson["post_processor"] = "x";
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "post_processor is \"x\", not an object");
    tokjson = good;
    tokjson["model"]["type"] = 5;
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "model.type is 5, not a string");
    tokjson = good;
    tokjson["added_tokens"] = {5};
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "added_tokens[0] is 5, not an object");
    tokjson = good;
    tokjson["added_tokens"][0]["content"] = 5;
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "added_tokens[0].content is 5, not a string");
    // ids that disagree with model.vocab: transformers would use them, this tokenizer the vocab's (it trained with
    // <s> = 0 where the file's post-processor said 5, exit 0)
    tokjson = good;
    tokjson["post_processor"]["cls"] = {"<s>", 5};
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "post_processor.cls: <s> has id 5, but model.vocab gives it 0");
    tokjson = good;
    tokjson["post_processor"]["sep"] = {"<s>", 0};
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "post_processor.sep is [\"<s>\",0]", "[\"</s>\", its id]");
    tokjson = good;
    for (auto& a : tokjson["added_tokens"])
        if (a["content"] == "<mask>") a["id"] = 7;
    EXPECT_USER_ERROR(RobertaTokenizer{write_json()}, "<mask> has id 7, but model.vocab gives it");
    // merges as ["a", "b"] lists (newer tokenizers) load the same model
    tokjson = good;
    nlohmann::json pairs = nlohmann::json::array();
    for (const auto& m : good["model"]["merges"]) {
        std::string s = m.get<std::string>();
        pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
    }
    tokjson["model"]["merges"] = pairs;
    RobertaTokenizer t(write_json());
    EXPECT_EQ(ids_str(t.encode_pair("Pairs of merges,", " as lists <mask>.")),
              ids_str(tok_json().encode_pair("Pairs of merges,", " as lists <mask>.")));
}

#else
TEST(RobertaTokenizer, NeedsPcre2) { GTEST_SKIP() << "built without PCRE2"; }
#endif
