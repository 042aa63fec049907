// Tests for data/gpt2_tokenizer.h: byte-exact agreement with tiktoken (TestPlans.txt golden cases, the
// built-in Austen shards that tiktoken wrote, and live tiktoken when python3 has it), round trips,
// gpt2_tokenizer.bin, bad inputs, and long pieces. Files are read in place from PRAC_SOURCE_DIR; scratch
// files go to a fresh mkdtemp directory, removed afterwards.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/strings.h"  // join
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "test/test_util.h"

#ifndef PRAC_SOURCE_DIR
#error "PRAC_SOURCE_DIR must point at the repository root"
#endif


static const std::string SRC = PRAC_SOURCE_DIR;
static const std::string RANKS = SRC + "/data/gpt2/r50k_base.tiktoken";
// make_builtin_corpus.py's order: the train shard holds these five, the val shard Persuasion.
static const std::vector<std::string> TRAIN_NOVELS = {"emma", "mansfield-park", "northanger-abbey",
                                                      "pride-and-prejudice", "sense-and-sensibility"};
static const std::vector<std::string> VAL_NOVELS = {"persuasion"};

static std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << "cannot open " << path;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

static void write_text(const std::string& path, const std::string& s) {
    std::ofstream out(path, std::ios::binary);
    out << s;
    ASSERT_TRUE(out.good()) << "cannot write " << path;
}

static std::string novel(const std::string& name) { return read_text(SRC + "/data/austen/" + name + ".txt"); }

static std::string ids_str(const std::vector<uint32_t>& v) {
    return "[" + join(v) + "]";
}

// Index of the first difference, or -1.
static long first_diff(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
    size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return (long)i;
    return a.size() == b.size() ? -1 : (long)n;
}

class TmpDir {
   public:
    std::string dir;
    TmpDir() {
        char tmpl[] = "/tmp/prac_test_gpt2_XXXXXX";
        if (mkdtemp(tmpl)) dir = tmpl;
    }
    ~TmpDir() {
        if (!dir.empty()) std::filesystem::remove_all(dir);
    }
    std::string path(const std::string& name) const { return dir + "/" + name; }
};

#if PRAC_HAVE_PCRE2

// One tokenizer for the whole binary: loading the ranks takes ~20 ms, but nearly every test needs it.
static const Gpt2Tokenizer& tok() {
    static Gpt2Tokenizer t(RANKS);
    return t;
}

// ---------------------------------------------------------------------------------------------------------
// Golden cases and tiktoken agreement
// ---------------------------------------------------------------------------------------------------------

struct PlanCase {
    std::string sample;
    std::vector<uint32_t> ids;
    int line;
};

// TestPlans.txt: blocks of "EncodingName: X" / "Sample: <text>" / "Encoded: [ids]" separated by blank lines.
// No sample contains a newline (checked by parsing: every block is exactly those three lines).
static std::vector<PlanCase> r50k_plans() {
    std::string text = read_text(SRC + "/data/gpt2/TestPlans.txt");
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        lines.push_back(text.substr(pos, eol - pos));
        pos = eol + 1;
    }
    std::vector<PlanCase> cases;
    for (size_t i = 0; i < lines.size(); i++) {
        if (lines[i].rfind("EncodingName: ", 0) != 0) continue;
        EXPECT_LT(i + 2, lines.size());
        EXPECT_EQ(lines[i + 1].rfind("Sample: ", 0), 0u) << "line " << i + 2;
        EXPECT_EQ(lines[i + 2].rfind("Encoded: [", 0), 0u) << "line " << i + 3;
        EXPECT_TRUE(i + 3 >= lines.size() || lines[i + 3].empty()) << "block at line " << i + 1 << " has 4+ lines";
        if (lines[i] != "EncodingName: r50k_base") continue;
        PlanCase c;
        c.sample = lines[i + 1].substr(8);
        c.line = (int)i + 2;
        std::string enc = lines[i + 2].substr(10);
        EXPECT_EQ(enc.back(), ']');
        enc.pop_back();
        std::stringstream ss(enc);
        std::string item;
        while (std::getline(ss, item, ',')) c.ids.push_back((uint32_t)std::stoul(item));
        cases.push_back(c);
    }
    return cases;
}

TEST(Gpt2Tokenizer, TestPlansR50kExact) {
    auto cases = r50k_plans();
    ASSERT_EQ(cases.size(), 64u);
    for (const auto& c : cases) {
        EXPECT_EQ(ids_str(tok().encode(c.sample)), ids_str(c.ids)) << "TestPlans.txt line " << c.line;
        EXPECT_EQ(tok().decode(c.ids), c.sample) << "TestPlans.txt line " << c.line;
    }
}

// The heap merge (forced for every piece, no cache) gives the same ids as tiktoken's scan.
TEST(Gpt2Tokenizer, HeapMergeMatchesTestPlans) {
    Gpt2Options o;
    o.heap_bpe_min_bytes = 2;
    o.piece_cache = false;
    Gpt2Tokenizer heap(RANKS, o);
    for (const auto& c : r50k_plans())
        EXPECT_EQ(ids_str(heap.encode(c.sample)), ids_str(c.ids)) << "TestPlans.txt line " << c.line;
}

// Splits a flat EOT-before-each-document stream into documents (without their EOT).
static std::vector<std::vector<uint32_t>> split_at_eot(const std::vector<uint16_t>& toks) {
    std::vector<std::vector<uint32_t>> docs;
    for (uint16_t t : toks) {
        if (t == GPT2_EOT_ID) {
            docs.emplace_back();
            continue;
        }
        EXPECT_FALSE(docs.empty()) << "the shard does not start with EOT";
        if (docs.empty()) docs.emplace_back();
        docs.back().push_back(t);
    }
    return docs;
}

// data/builtin/austen_gpt2_*.bin were written by tiktoken (data/make_builtin_corpus.py): each novel is
// [EOT] + encode_ordinary(text). Byte-exact agreement on the whole 4 MB corpus, no Python needed.
TEST(Gpt2Tokenizer, AustenMatchesTiktokenShards) {
    for (auto split : {std::make_pair(std::string("train"), TRAIN_NOVELS), std::make_pair(std::string("val"), VAL_NOVELS)}) {
        ShardInfo info;
        auto toks = read_shard(SRC + "/data/builtin/austen_gpt2_" + split.first + ".bin", &info);
        EXPECT_EQ(info.tokenizer, TOKENIZER_GPT2);
        EXPECT_EQ(info.eos_id, (int32_t)GPT2_EOT_ID);
        auto expected = split_at_eot(toks);
        ASSERT_EQ(expected.size(), split.second.size()) << split.first << ": novels (EOT count)";
        std::vector<std::string> texts;
        for (const auto& name : split.second) texts.push_back(novel(name));
        auto got = tok().encode_batch(texts, 2);
        for (size_t k = 0; k < texts.size(); k++) {
            long d = first_diff(got[k], expected[k]);
            EXPECT_EQ(d, -1) << split.second[k] << ": " << got[k].size() << " tokens vs tiktoken's "
                             << expected[k].size() << ", first difference at token " << d;
        }
    }
}

TEST(Gpt2Tokenizer, AustenRoundTrip) {
    size_t total = 0;
    for (const auto& names : {TRAIN_NOVELS, VAL_NOVELS})
        for (const auto& name : names) {
            std::string text = novel(name);
            auto ids = tok().encode(text);
            total += ids.size();
            EXPECT_TRUE(tok().decode(ids) == text) << name << ": decode(encode(text)) != text";
        }
    EXPECT_EQ(total, 878254u - 5 + 115080u - 1);  // the shards' token counts less their EOTs
}

// Without the cache, the short-piece scan and the heap merge agree on the whole of one novel.
TEST(Gpt2Tokenizer, HeapMergeMatchesScanOnNovel) {
    Gpt2Options o;
    o.piece_cache = false;
    o.heap_bpe_min_bytes = 2;
    Gpt2Tokenizer heap(RANKS, o);
    o.heap_bpe_min_bytes = (size_t)-1;
    Gpt2Tokenizer scan(RANKS, o);
    std::string text = novel("persuasion");
    auto a = heap.encode(text), b = scan.encode(text);
    EXPECT_EQ(first_diff(a, b), -1);
    EXPECT_EQ(first_diff(a, tok().encode(text)), -1);
}

// Random pieces from small alphabets (so merges and rank ties are frequent): heap == scan.
TEST(Gpt2Tokenizer, HeapMergeMatchesScanRandomPieces) {
    Gpt2Options o;
    o.piece_cache = false;
    o.heap_bpe_min_bytes = 2;
    Gpt2Tokenizer heap(RANKS, o);
    o.heap_bpe_min_bytes = (size_t)-1;
    Gpt2Tokenizer scan(RANKS, o);
    std::mt19937 rng(1234);
    const std::vector<std::string> alphabets = {"ab", "aeiou", "thequickbrownfox", "0123456789", "!?.-=",
                                                "xX", "\xc3\xa9\xc3\xa0" /* é à */};
    for (int k = 0; k < 600; k++) {
        const std::string& al = alphabets[k % alphabets.size()];
        bool multibyte = (uint8_t)al[0] >= 0x80;
        size_t len = 2 + rng() % (k < 500 ? 60 : 3000);
        std::string s = k % 3 == 0 ? " " : "";
        for (size_t i = 0; i < len; i++) {
            size_t c = multibyte ? 2 * (rng() % (al.size() / 2)) : rng() % al.size();
            s.append(al, c, multibyte ? 2 : 1);
        }
        auto a = heap.encode(s), b = scan.encode(s);
        ASSERT_EQ(first_diff(a, b), -1) << "piece \"" << s.substr(0, 80) << "\" (" << s.size() << " bytes)";
        ASSERT_EQ(heap.decode(a), s);
    }
}

// Runs test/reference/tiktoken_check.py on texts; false (with `why`) when python3 or tiktoken is missing.
static bool tiktoken_encode(const std::vector<std::string>& texts, std::vector<std::vector<uint32_t>>& out,
                            std::string& why) {
    const char* py = getenv("PYTHON");
    std::string python = py && *py ? py : "python3";
    if (std::system((python + " -c 'import tiktoken' >/dev/null 2>&1").c_str()) != 0) {
        why = python + " cannot import tiktoken (pip install tiktoken; CI installs it)";
        return false;
    }
    TmpDir tmp;
    std::string in = tmp.path("in.bin"), res = tmp.path("out.txt");
    std::string buf;
    for (const auto& t : texts) {
        uint64_t n = t.size();
        buf.append((const char*)&n, 8);
        buf += t;
    }
    write_text(in, buf);
    std::string cmd = python + " " + SRC + "/test/reference/tiktoken_check.py " + RANKS + " " + in + " " + res;
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
        why = "tiktoken_check.py failed (" + std::to_string(rc) + ")";
        ADD_FAILURE() << why;
        return false;
    }
    std::ifstream f(res);
    std::string line;
    out.clear();
    while (std::getline(f, line)) {
        std::vector<uint32_t> ids;
        std::stringstream ss(line);
        uint32_t id;
        while (ss >> id) ids.push_back(id);
        out.push_back(ids);
    }
    return true;
}

// tiktoken's ids of `texts` into `expected`, or the test skipped where python3 lacks tiktoken (CI installs it;
// REQUIRE_TIKTOKEN=1 turns a missing tiktoken into a failure there). A macro: GTEST_SKIP and FAIL return from the test.
#define TIKTOKEN_IDS_OR_SKIP(texts, expected)                                                  \
    do {                                                                                       \
        std::string why_;                                                                      \
        if (!tiktoken_encode(texts, expected, why_)) {                                         \
            const char* req_ = getenv("REQUIRE_TIKTOKEN");                                     \
            if (req_ && std::string(req_) == "1") FAIL() << why_ << " (REQUIRE_TIKTOKEN=1)";   \
            GTEST_SKIP() << why_;                                                              \
        }                                                                                      \
    } while (0)

// Non-Austen edge cases against live tiktoken: Unicode categories at the regex's boundaries, whitespace runs,
// CRLF, numbers, contractions (case-sensitive in GPT-2's pattern), code, long pieces, random mixtures.
TEST(Gpt2Tokenizer, MatchesLiveTiktoken) {
    std::vector<std::string> texts = {
        "Hello world",
        "  leading spaces and trailing spaces   ",
        "a\n\nb\n\n\nc\n",
        "line one\r\nline two\r\n\r\nline four\r\n",
        "\r\n\r\n\r\n",
        "\t\ttabs\tand\t \t mixed \t\n",
        "don't I'll we've they're she's I'd I'm",
        "DON'T I'LL WE'VE THEY'RE SHE'S I'D I'M",
        "it\xe2\x80\x99s curly, 'quoted', ''double''",
        "1234567890 3.14159 1,000,000 12th 2024-01-01 0x1F 1e-9",
        "\xd9\xa3\xd9\xa4\xd9\xa5 \xc2\xbd \xc2\xb2 \xe2\x85\xab",  // Arabic-Indic digits, ½ ² Ⅻ (\p{N}, not Nd)
        "na\xc3\xafve caf\xc3\xa9 r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m",
        "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf\xe4\xb8\x96\xe7\x95\x8c",
        "\xf0\x9f\x87\xba\xf0\x9f\x87\xb8 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
        "e\xcc\x81 combining, a\xc2\xa0nbsp, em\xe2\x80\x83space, ideo\xe3\x80\x80space",
        "seps\x1c\x1d\x1e\x1f and nel\xc2\x85 and ls\xe2\x80\xa8ps\xe2\x80\xa9 zwsp\xe2\x80\x8b",
        std::string("nul\0byte and del\x7f", 18),
        "def f(x):\n    return x**2  # comment\n\n\n    \n",
        "https://example.com/a?b=c&d=e#frag <|endoftext|> <tag attr=\"v\">",
        "     \n     \n",
        std::string(100, ' ') + "x",
        "a" + std::string(50, ' ') + "b",
        "!!!!!!!??? ... --- === ***",
        std::string(10000, 'x'),
        std::string(10000, ' '),
        [] { std::string s; for (int i = 0; i < 2500; i++) s += "ab"; return s; }(),
        [] { std::string s; for (int i = 0; i < 3000; i++) s += "\xc3\xa9"; return s; }(),
    };
    // Random mixtures of the characters above.
    const std::vector<std::string> pool = {"a", "b", "Z", " ", " ", "\n", "\r\n", "\t", "'", "s", "t", "ll", "1",
                                           "9", ".", ",", "!", "\xc3\xa9", "\xe4\xb8\x96", "\xf0\x9f\x98\x80",
                                           "\xc2\xa0", "\xe2\x80\x83", "\xd9\xa3", "-", "_", "\xe2\x80\x99"};
    std::mt19937 rng(42);
    for (int k = 0; k < 200; k++) {
        std::string s;
        size_t n = 1 + rng() % 80;
        for (size_t i = 0; i < n; i++) s += pool[rng() % pool.size()];
        texts.push_back(s);
    }
    std::vector<std::vector<uint32_t>> expected;
    TIKTOKEN_IDS_OR_SKIP(texts, expected);
    ASSERT_EQ(expected.size(), texts.size());
    auto got = tok().encode_batch(texts, 2);
    for (size_t i = 0; i < texts.size(); i++)
        EXPECT_EQ(ids_str(got[i]), ids_str(expected[i])) << "text " << i << ": \"" << texts[i].substr(0, 60) << "\"";
}

// Every code point (but surrogates) of planes 0-3 and 14 at the pattern's boundaries, against live tiktoken, which
// splits by Unicode 16.0: PCRE2 10.42's tables are 14.0 (the 9,392 letters and digits added since split off from
// their word) and its \s matches U+180E. Each text holds 32 code points X as X's X1 X x (a contraction, a digit,
// a space) between newlines; a difference names the text's code points.
TEST(Gpt2Tokenizer, MatchesLiveTiktokenOnEveryCodePoint) {
    std::vector<std::string> texts;
    std::vector<uint32_t> first_code_point;
    std::string text;
    auto add = [&](uint32_t cp) {
        if (text.empty()) first_code_point.push_back(cp);
        std::string x;  // cp in UTF-8
        if (cp < 0x80) x = {(char)cp};
        else if (cp < 0x800) x = {(char)(0xC0 | cp >> 6), (char)(0x80 | (cp & 63))};
        else if (cp < 0x10000) x = {(char)(0xE0 | cp >> 12), (char)(0x80 | (cp >> 6 & 63)), (char)(0x80 | (cp & 63))};
        else x = {(char)(0xF0 | cp >> 18), (char)(0x80 | (cp >> 12 & 63)), (char)(0x80 | (cp >> 6 & 63)),
                  (char)(0x80 | (cp & 63))};
        text += x + "'s" + x + "1 " + x + " x\n";
        if (cp % 32 == 31) texts.push_back(std::move(text)), text.clear();
    };
    for (uint32_t cp = 1; cp < 0x40000; cp++)
        if (cp < 0xD800 || cp > 0xDFFF) add(cp);
    for (uint32_t cp = 0xE0000; cp < 0xE0200; cp++) add(cp);
    std::vector<std::vector<uint32_t>> expected;
    TIKTOKEN_IDS_OR_SKIP(texts, expected);
    ASSERT_EQ(expected.size(), texts.size());
    auto got = tok().encode_batch(texts, 2);
    int differ = 0;
    auto around = [](const std::vector<uint32_t>& ids, size_t at) {  // the ids from 4 before `at`, 12 at most
        const size_t from = at > 4 ? at - 4 : 0;
        return ids_str({ids.begin() + std::min(from, ids.size()), ids.begin() + std::min(from + 12, ids.size())});
    };
    for (size_t i = 0; i < texts.size(); i++) {
        const long at = first_diff(got[i], expected[i]);
        if (at >= 0 && ++differ <= 10)
            ADD_FAILURE() << "the text of code points from U+" << format("%04X", first_code_point[i])
                          << " splits otherwise than tiktoken from its id " << at << ": " << around(got[i], at)
                          << " vs " << around(expected[i], at);
    }
    EXPECT_EQ(differ, 0) << "texts that differ from tiktoken's ids";
}

// Without tiktoken: what it gives for a letter of Unicode 16.0 (CJK Extension H, U+31350) before 's, and for
// U+180E (a format character since Unicode 6.3, no longer a space) before 'm (tiktoken 0.14, r50k_base).
TEST(Gpt2Tokenizer, SplitsByUnicode16) {
    EXPECT_EQ(ids_str(tok().encode("\xf0\xb1\x8d\x90's")), "[172, 109, 235, 238, 338]");
    EXPECT_EQ(ids_str(tok().encode("\xe1\xa0\x8e'm")), "[157, 254, 236, 6, 76]");
}

// ---------------------------------------------------------------------------------------------------------
// Special cases of the API
// ---------------------------------------------------------------------------------------------------------

TEST(Gpt2Tokenizer, Metadata) {
    EXPECT_EQ(tok().vocab_size(), 50257);
    EXPECT_EQ(tok().eos_id(), 50256u);
    EXPECT_EQ(tok().kind(), TOKENIZER_GPT2);
    EXPECT_EQ(tok().token_bytes(0), "!");
    EXPECT_EQ(tok().token_bytes(220), " ");
    EXPECT_EQ(tok().token_bytes(50256), "<|endoftext|>");
    EXPECT_EQ(tok().rank_of(" the"), 262);
    EXPECT_EQ(tok().rank_of("<|endoftext|>"), -1);  // special, not mergeable
    EXPECT_EQ(tok().rank_of(""), -1);
}

TEST(Gpt2Tokenizer, EndOfTextIsOrdinaryText) {
    auto ids = tok().encode("<|endoftext|>");
    EXPECT_EQ(ids_str(ids), "[27, 91, 437, 1659, 5239, 91, 29]");  // tiktoken's encode_ordinary
    uint32_t eot = GPT2_EOT_ID;
    EXPECT_EQ(tok().decode(&eot, 1), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, EmptyInput) {
    EXPECT_TRUE(tok().encode("").empty());
    std::vector<uint32_t> out = {7};
    tok().encode("", out);
    EXPECT_EQ(out.size(), 1u);  // appends nothing, keeps what was there
    EXPECT_EQ(tok().decode(nullptr, 0), "");
    EXPECT_TRUE(tok().encode_batch({}, 4).empty());
    auto b = tok().encode_batch({"", "a", ""}, 3);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_TRUE(b[0].empty() && b[2].empty());
    EXPECT_EQ(ids_str(b[1]), "[64]");
}

TEST(Gpt2Tokenizer, EncodeAppends) {
    std::vector<uint32_t> out = {GPT2_EOT_ID};
    tok().encode("hello", out);
    EXPECT_EQ(ids_str(out), "[50256, 31373]");
}

TEST(Gpt2Tokenizer, DecodeOutOfRange) {
    std::vector<uint32_t> ids = {31373, 50257};
    EXPECT_USER_ERROR(tok().decode(ids), "token id 50257 at position 1", "HINT");
    EXPECT_USER_ERROR(tok().token_bytes(60000), "60000");
}

TEST(Gpt2Tokenizer, InvalidUtf8) {
    EXPECT_USER_ERROR(tok().encode(std::string("hello\xff world")), "invalid UTF-8 at byte offset 5", "ff", "HINT");
    EXPECT_USER_ERROR(tok().encode(std::string("ab\xc0\xaf")), "byte offset 2", "c0 af");         // overlong '/'
    EXPECT_USER_ERROR(tok().encode(std::string("\xed\xa0\x80")), "byte offset 0");                // surrogate
    EXPECT_USER_ERROR(tok().encode(std::string("x\xf4\x90\x80\x80")), "byte offset 1");           // > U+10FFFF
    EXPECT_USER_ERROR(tok().encode(std::string("12345678\xe2\x82")), "byte offset 8");           // truncated
    EXPECT_USER_ERROR(tok().encode(std::string("caf\xc3\xa9\x80")), "byte offset 5");            // stray continuation
    EXPECT_USER_ERROR(tok().encode_batch({"fine", "also fine", "bad \xfe"}, 2), "document 2 of 3", "byte offset 4");
}

TEST(Gpt2Tokenizer, Utf8Helpers) {
    EXPECT_EQ(utf8_first_invalid("plain ascii text, long enough for the 8-byte path"), std::string_view::npos);
    EXPECT_EQ(utf8_first_invalid("\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9"), std::string_view::npos);
    EXPECT_EQ(utf8_first_invalid("0123456789abcdef\x80"), 16u);
    // Python's bytes.decode("utf-8", errors="replace").encode() on the same bytes.
    const char* R = "\xef\xbf\xbd";
    EXPECT_EQ(utf8_replace_invalid("a\xff" "b"), std::string("a") + R + "b");
    EXPECT_EQ(utf8_replace_invalid("\xc0\xaf"), std::string(R) + R);
    EXPECT_EQ(utf8_replace_invalid("\xed\xa0\x80x"), std::string(R) + R + R + "x");
    EXPECT_EQ(utf8_replace_invalid("\xf4\x90\x80\x80"), std::string(R) + R + R + R);
    EXPECT_EQ(utf8_replace_invalid("\xe2\x82"), std::string(R));
    EXPECT_EQ(utf8_replace_invalid("\xe2\x82x"), std::string(R) + "x");
    EXPECT_EQ(utf8_replace_invalid("\xf0\x9f\x98"), std::string(R));
    EXPECT_EQ(utf8_replace_invalid("\x80\x80"), std::string(R) + R);
    EXPECT_EQ(utf8_replace_invalid("ok \xe2\x82\xac"), "ok \xe2\x82\xac");
    EXPECT_NO_THROW(tok().encode(utf8_replace_invalid("hello\xff world")));
    // Python's bytes.decode("utf-8", errors="backslashreplace") on the same bytes: every byte of an invalid
    // subpart as \xNN, valid sequences kept
    EXPECT_EQ(utf8_escape_invalid("a\xff" "b"), "a\\xffb");
    EXPECT_EQ(utf8_escape_invalid("\xc0\xaf"), "\\xc0\\xaf");
    EXPECT_EQ(utf8_escape_invalid("\xed\xa0\x80x"), "\\xed\\xa0\\x80x");
    EXPECT_EQ(utf8_escape_invalid("\xe2\x82"), "\\xe2\\x82");
    EXPECT_EQ(utf8_escape_invalid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xe2\x82z"),
              "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\\xe2\\x82z");
    EXPECT_EQ(utf8_escape_invalid("plain"), "plain");
}

// A single 100 KB regex piece must not be quadratic (tiktoken's scan would do ~10^10 steps on it).
TEST(Gpt2Tokenizer, LongSinglePiece) {
    std::mt19937 rng(7);
    std::string letters;
    for (int i = 0; i < 100000; i++) letters += (char)('a' + rng() % 26);
    std::string xs(100000, 'x'), spaces(100000, ' '), digits;
    for (int i = 0; i < 100000; i++) digits += (char)('0' + rng() % 10);
    for (const std::string* s : {&letters, &xs, &spaces, &digits}) {
        auto t0 = std::chrono::steady_clock::now();
        auto ids = tok().encode(*s);
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        EXPECT_LT(sec, 2.0) << "a 100 KB piece took " << sec << " s";
        EXPECT_TRUE(tok().decode(ids) == *s);
        if (s == &xs) {  // tiktoken: 12,500 x "xxxxxxxx" (24223)
            EXPECT_EQ(ids.size(), 12500u);
            EXPECT_EQ(ids[0], 24223u);
        }
        if (s == &spaces) {
            EXPECT_EQ(ids.size(), 100000u);  // r50k has no multi-space tokens: all 220
        }
    }
}

TEST(Gpt2Tokenizer, BatchMatchesSequential) {
    std::string text = novel("northanger-abbey");
    std::vector<std::string> docs;
    for (size_t pos = 0; pos < text.size();) {  // paragraphs
        size_t e = text.find("\n\n", pos);
        e = e == std::string::npos ? text.size() : e + 2;
        docs.push_back(text.substr(pos, e - pos));
        pos = e;
    }
    ASSERT_GT(docs.size(), 500u);
    auto batch = tok().encode_batch(docs, 4);
    ASSERT_EQ(batch.size(), docs.size());
    for (size_t i = 0; i < docs.size(); i++) ASSERT_EQ(first_diff(batch[i], tok().encode(docs[i])), -1) << "doc " << i;
    auto all = tok().encode_batch(docs, 0);  // 0 = all hardware threads
    for (size_t i = 0; i < docs.size(); i++) ASSERT_EQ(first_diff(all[i], batch[i]), -1) << "doc " << i;
}

// Two tokenizers used alternately on one thread must not see each other's cached pieces.
TEST(Gpt2Tokenizer, TwoInstancesOneThread) {
    Gpt2Tokenizer other(RANKS);
    std::string s = "Antidisestablishmentarianism xyzzyplugh";
    auto a = tok().encode(s);
    auto b = other.encode(s);
    auto c = tok().encode(s);
    EXPECT_EQ(ids_str(a), ids_str(b));
    EXPECT_EQ(ids_str(a), ids_str(c));
}

// ---------------------------------------------------------------------------------------------------------
// gpt2_tokenizer.bin
// ---------------------------------------------------------------------------------------------------------

TEST(Gpt2TokenizerBin, RoundTrip) {
    TmpDir tmp;
    std::string p = tmp.path("gpt2_tokenizer.bin");
    tok().write_gpt2_tokenizer_bin(p);
    EXPECT_EQ(std::filesystem::file_size(p), GPT2_TOKENIZER_BIN_BYTES);
    EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
    std::string raw = read_text(p);
    int32_t h[4];
    std::memcpy(h, raw.data(), sizeof h);
    EXPECT_EQ(h[0], 20240328);
    EXPECT_EQ(h[1], 2);
    EXPECT_EQ(h[2], 50257);
    EXPECT_EQ(h[3], 50256);
    for (size_t i = 16; i < 1024; i++) ASSERT_EQ(raw[i], 0) << "header byte " << i;

    Gpt2DecodeTable t = read_gpt2_tokenizer_bin(p);
    EXPECT_EQ(t.version, 2);
    EXPECT_EQ(t.eot_id, 50256u);
    ASSERT_EQ(t.tokens.size(), 50257u);
    for (uint32_t id = 0; id < 50257; id++) ASSERT_EQ(t.tokens[id], tok().token_bytes(id)) << "id " << id;
    std::string text = novel("persuasion").substr(0, 20000);
    auto ids = tok().encode(text);
    EXPECT_EQ(t.decode(ids.data(), ids.size()), text);
    uint32_t bad = 50257;
    EXPECT_USER_ERROR(t.decode(&bad, 1), "50257");
}

TEST(Gpt2TokenizerBin, Version1AssumesEot50256) {
    TmpDir tmp;
    std::string p = tmp.path("v1.bin");
    tok().write_gpt2_tokenizer_bin(p);
    std::string raw = read_text(p);
    int32_t v1 = 1, zero = 0;
    std::memcpy(&raw[4], &v1, 4);
    std::memcpy(&raw[12], &zero, 4);
    write_text(p, raw);
    Gpt2DecodeTable t = read_gpt2_tokenizer_bin(p);
    EXPECT_EQ(t.version, 1);
    EXPECT_EQ(t.eot_id, 50256u);
}

TEST(Gpt2TokenizerBin, BadFiles) {
    TmpDir tmp;
    std::string good = tmp.path("good.bin");
    tok().write_gpt2_tokenizer_bin(good);
    std::string raw = read_text(good);
    auto variant = [&](const std::string& name, std::string bytes) {
        std::string p = tmp.path(name);
        write_text(p, bytes);
        return p;
    };
    std::string bad_magic = raw;
    int32_t shard_magic = SHARD_MAGIC;
    std::memcpy(&bad_magic[0], &shard_magic, 4);
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("magic.bin", bad_magic)), "bad magic number 20240520",
                      "token shard", "HINT");
    std::string bad_version = raw;
    int32_t v3 = 3;
    std::memcpy(&bad_version[4], &v3, 4);
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("version.bin", bad_version)), "unsupported", "version 3");
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("short.bin", raw.substr(0, 100))), "less than the 1024-byte");
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("cut.bin", raw.substr(0, raw.size() - 5))), "truncated",
                      "token 50256");
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("header_only.bin", raw.substr(0, 1024))), "truncated",
                      "token 0 of 50257");
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("long.bin", raw + "xx")), "2 bytes after the last");
    std::string bad_eot = raw;
    int32_t eot = 60000;
    std::memcpy(&bad_eot[12], &eot, 4);
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(variant("eot.bin", bad_eot)), "EOT id 60000");
    EXPECT_USER_ERROR(read_gpt2_tokenizer_bin(tmp.path("missing.bin")), "cannot open", "missing.bin");
}

// ---------------------------------------------------------------------------------------------------------
// Bad ranks files: each error names the line
// ---------------------------------------------------------------------------------------------------------

class BadRanks : public ::testing::Test {
   protected:
    TmpDir tmp;
    std::vector<std::string> lines;  // the real file's lines
    void SetUp() override {
        std::string text = read_text(RANKS);
        std::stringstream ss(text);
        std::string l;
        while (std::getline(ss, l)) lines.push_back(l);
        ASSERT_EQ(lines.size(), 50256u);
    }
    std::string write(const std::vector<std::string>& ls) {
        std::string s;
        for (const auto& l : ls) s += l + "\n";
        std::string p = tmp.path("ranks.tiktoken");
        write_text(p, s);
        return p;
    }
};

TEST_F(BadRanks, ControlParsesWithCrlfAndBlankLines) {
    auto ls = lines;
    ls[10] += "\r";
    ls.insert(ls.begin() + 20, "");
    Gpt2Tokenizer t(write(ls));
    EXPECT_EQ(ids_str(t.encode("hello world")), "[31373, 995]");
}

TEST_F(BadRanks, Errors) {
    EXPECT_USER_ERROR(Gpt2Tokenizer(tmp.path("nope.tiktoken")), "cannot open", "nope.tiktoken", "HINT");
    auto ls = lines;
    ls[99] = "Zm9v!!== 99";
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), "ranks.tiktoken:100:", "not valid base64");
    ls = lines;
    ls[4] = "IQ==";
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), ":5:", "expected");
    ls = lines;
    ls[6] = "IQ== seven";
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), ":7:", "not a non-negative integer");
    ls = lines;
    ls[7] = ls[7].substr(0, ls[7].find(' ')) + " 50256";
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), ":8:", "rank 50256 is out of range", "0..50255");
    ls = lines;
    ls[300] = ls[300].substr(0, ls[300].find(' ')) + " 299";  // rank 299 twice, rank 300 missing
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), ":301:", "rank 299 appears twice", "line 300");
    ls = lines;
    ls[300] = ls[299].substr(0, ls[299].find(' ')) + " 300";  // the bytes of rank 299 again
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), "duplicate those of rank", "line 300");
    ls = lines;
    ls.erase(ls.begin() + 1000);
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), "50255 ranks", "rank 1000 is missing");
    ls = lines;
    ls[0] = "=== 0";
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), ":1:", "base64");
    ls = lines;
    ls[5] = " 5";  // empty token
    EXPECT_USER_ERROR(Gpt2Tokenizer(write(ls)), ":6:", "base64");
}

#else  // !PRAC_HAVE_PCRE2

TEST(Gpt2Tokenizer, FailsWithoutPcre2) {
    EXPECT_USER_ERROR(Gpt2Tokenizer t(RANKS), "built without PCRE2", "apt-get install libpcre2-dev");
}

#endif
