// GPT-2 byte-level BPE over tiktoken's r50k_base ranks. See gpt2_tokenizer.h for the contract.
#include "data/gpt2_tokenizer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/files.h"  // refuse_special_file
#include "data/shard.h"

namespace {

std::string read_file(const std::string& path, const char* what, const char* hint) {
    refuse_special_file(path, what);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("cannot open %s %s: %s\n---> HINT: %s", what, path.c_str(), std::strerror(errno), hint);
    std::string s;
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, got);
    bool err = std::ferror(f);
    std::fclose(f);
    if (err) fail("cannot read %s %s", what, path.c_str());
    return s;
}

// Strict base64 (standard alphabet, '=' padding only at the end, length a multiple of 4).
bool base64_decode(std::string_view in, std::string& out) {
    static const auto table = [] {
        std::array<int8_t, 256> t{};
        t.fill(-1);
        const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; i++) t[(uint8_t)a[i]] = (int8_t)i;
        return t;
    }();
    out.clear();
    if (in.empty() || in.size() % 4 != 0) return false;
    size_t pad = 0;
    if (in.back() == '=') pad++;
    if (in.size() >= 2 && in[in.size() - 2] == '=') pad++;
    for (size_t i = 0; i < in.size(); i += 4) {
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            char c = in[i + k];
            int d;
            if (c == '=') {
                if (i + k < in.size() - pad) return false;  // '=' inside the string
                d = 0;
            } else {
                d = table[(uint8_t)c];
                if (d < 0) return false;
            }
            v = (v << 6) | (uint32_t)d;
        }
        out.push_back((char)(v >> 16));
        if (i + 4 < in.size() || pad < 2) out.push_back((char)(v >> 8));
        if (i + 4 < in.size() || pad < 1) out.push_back((char)v);
    }
    return true;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& ranks_path, const Gpt2Options& opts) {
    const char* hint = "pass the r50k_base.tiktoken ranks file (the repository has data/gpt2/r50k_base.tiktoken)";
    std::string text = read_file(ranks_path, "GPT-2 ranks file", hint);

    // Like tiktoken's load_tiktoken_bpe: one "base64 rank" per line, empty lines skipped.
    std::vector<std::string> tok(GPT2_NUM_RANKS);
    std::vector<size_t> line_of_rank(GPT2_NUM_RANKS, 0);
    size_t count = 0, lineno = 0, pos = 0;
    std::string bytes;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string_view line(text.data() + pos, eol - pos);
        pos = eol + 1;
        lineno++;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
            fail("%s:%zu: expected \"<base64 token bytes> <rank>\", got \"%.60s\"\n---> HINT: %s", ranks_path.c_str(),
                 lineno, std::string(line).c_str(), hint);
        std::string_view b64 = line.substr(0, sp), num = line.substr(sp + 1);
        if (!base64_decode(b64, bytes))
            fail("%s:%zu: \"%.60s\" is not valid base64\n---> HINT: the file is corrupt; %s", ranks_path.c_str(),
                 lineno, std::string(b64).c_str(), hint);
        if (bytes.size() > 255)
            fail("%s:%zu: token of %zu bytes; gpt2_tokenizer.bin stores at most 255\n---> HINT: %s",
                 ranks_path.c_str(), lineno, bytes.size(), hint);
        uint64_t r = 0;
        bool ok = !num.empty() && num.size() <= 9;
        for (char c : num) ok = ok && c >= '0' && c <= '9', r = r * 10 + (uint64_t)(c - '0');
        if (!ok) fail("%s:%zu: rank \"%.20s\" is not a non-negative integer\n---> HINT: %s", ranks_path.c_str(),
                      lineno, std::string(num).c_str(), hint);
        if (r >= (uint64_t)GPT2_NUM_RANKS)
            fail("%s:%zu: rank %llu is out of range: GPT-2 (r50k_base) has ranks 0..%d\n---> HINT: %s",
                 ranks_path.c_str(), lineno, (unsigned long long)r, GPT2_NUM_RANKS - 1, hint);
        if (line_of_rank[r])
            fail("%s:%zu: rank %llu appears twice (also on line %zu)\n---> HINT: the file is corrupt; %s",
                 ranks_path.c_str(), lineno, (unsigned long long)r, line_of_rank[r], hint);
        line_of_rank[r] = lineno;
        tok[r] = bytes;
        count++;
    }
    if (count != (size_t)GPT2_NUM_RANKS) {
        size_t missing = 0;
        while (line_of_rank[missing]) missing++;
        fail("%s: %zu ranks, but GPT-2 (r50k_base) has %d (ranks 0..%d); rank %zu is missing\n---> HINT: %s",
             ranks_path.c_str(), count, GPT2_NUM_RANKS, GPT2_NUM_RANKS - 1, missing, hint);
    }

    // <|endoftext|> on top of the ranks: decoded, never encoded.
    tok.push_back(GPT2_EOT_TEXT);
    std::vector<bool> special(GPT2_VOCAB_SIZE, false);
    special[GPT2_EOT_ID] = true;
    bpe_ = std::make_unique<BytePairEncoder>(BpeRanking::TOKEN_RANK, std::move(tok), std::move(special),
                                             std::vector<BpeMerge>{}, opts, ranks_path, [&](uint32_t r) {
                                                 return format("rank %u (line %zu)", r, line_of_rank[r]);
                                             });
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

int Gpt2Tokenizer::kind() const { return TOKENIZER_GPT2; }

int64_t Gpt2Tokenizer::rank_of(std::string_view b) const { return bpe_->single_token(b); }

std::string_view Gpt2Tokenizer::token_bytes(uint32_t id) const {
    if (id >= (uint32_t)GPT2_VOCAB_SIZE) fail("GPT-2 token id %u is out of range (vocab %d)", id, GPT2_VOCAB_SIZE);
    return bpe_->token_bytes(id);
}

// ---- encoding ----

static const char* const WHAT = "GPT-2 encodes Unicode text, as tiktoken's encode_ordinary does";

void Gpt2Tokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const { bpe_->encode(text, out, WHAT); }

std::vector<uint32_t> Gpt2Tokenizer::encode(std::string_view text) const {
    std::vector<uint32_t> out;
    out.reserve(text.size() / 3 + 16);
    encode(text, out);
    return out;
}

std::vector<std::vector<uint32_t>> Gpt2Tokenizer::encode_batch(const std::vector<std::string>& docs,
                                                               int threads) const {
    return bpe_->encode_batch(docs, threads, WHAT);
}

// ---- decoding and gpt2_tokenizer.bin ----

std::string Gpt2Tokenizer::decode(const uint32_t* ids, size_t n) const { return bpe_->decode(ids, n, "GPT-2"); }

void Gpt2Tokenizer::write_gpt2_tokenizer_bin(const std::string& path) const {
    std::string buf(256 * sizeof(int32_t), '\0');
    int32_t header[256] = {};
    header[0] = GPT2_TOKENIZER_MAGIC;
    header[1] = GPT2_TOKENIZER_VERSION;
    header[2] = GPT2_VOCAB_SIZE;
    header[3] = (int32_t)GPT2_EOT_ID;
    std::memcpy(buf.data(), header, sizeof header);  // little-endian hosts only, like llm.c
    for (uint32_t id = 0; id < (uint32_t)GPT2_VOCAB_SIZE; id++) {
        std::string_view b = token_bytes(id);
        buf.push_back((char)(uint8_t)b.size());
        buf.append(b);
    }
    std::string tmp = path + ".tmp";  // same directory, so rename() is atomic
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    CHECK_USER(f, "cannot create %s: %s\n---> HINT: does the directory exist and is it writable?", tmp.c_str(),
               std::strerror(errno));
    bool ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
    ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) {
        std::remove(tmp.c_str());
        fail("cannot write %s: %s\n---> HINT: is the disk full?", tmp.c_str(), std::strerror(err));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        err = errno;
        std::remove(tmp.c_str());
        fail("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(err));
    }
}

Gpt2DecodeTable read_gpt2_tokenizer_bin(const std::string& path) {
    std::string s = read_file(path, "GPT-2 tokenizer file", "write one with Gpt2Tokenizer::write_gpt2_tokenizer_bin");
    const char* hint = "---> HINT: regenerate it from data/gpt2/r50k_base.tiktoken (write_gpt2_tokenizer_bin)";
    if (s.size() < 1024)
        fail("%s: %zu bytes, less than the 1024-byte header: truncated or not a gpt2_tokenizer.bin\n%s",
             path.c_str(), s.size(), hint);
    int32_t h[256];
    std::memcpy(h, s.data(), sizeof h);
    if (h[0] != GPT2_TOKENIZER_MAGIC)
        fail("%s: bad magic number %d (expected %d): not a gpt2_tokenizer.bin%s\n%s", path.c_str(), h[0],
             GPT2_TOKENIZER_MAGIC, h[0] == SHARD_MAGIC ? " (it is a token shard)" : "", hint);
    if (h[1] != 1 && h[1] != 2)
        fail("%s: unsupported tokenizer file version %d (known: 1, 2)\n%s", path.c_str(), h[1], hint);
    if (h[2] <= 0 || h[2] > (1 << 24))
        fail("%s: implausible vocabulary size %d in header[2]\n%s", path.c_str(), h[2], hint);
    Gpt2DecodeTable t;
    t.version = h[1];
    t.eot_id = h[1] == 1 ? GPT2_EOT_ID : (uint32_t)h[3];  // version 1 has no EOT field; llm.c assumes 50256
    if (t.eot_id >= (uint32_t)h[2])
        fail("%s: EOT id %d in header[3] is not below the vocabulary size %d\n%s", path.c_str(), h[3], h[2], hint);
    t.tokens.resize((size_t)h[2]);
    size_t pos = 1024;
    for (int32_t id = 0; id < h[2]; id++) {
        if (pos >= s.size())
            fail("%s: truncated: the file ends at token %d of %d (%zu bytes)\n%s", path.c_str(), id, h[2], s.size(),
                 hint);
        size_t len = (uint8_t)s[pos++];
        if (len == 0) fail("%s: token %d has length 0 (at byte %zu)\n%s", path.c_str(), id, pos - 1, hint);
        if (pos + len > s.size())
            fail("%s: truncated: token %d needs %zu bytes at offset %zu, but the file has %zu bytes\n%s",
                 path.c_str(), id, len, pos, s.size(), hint);
        t.tokens[(size_t)id].assign(s, pos, len);
        pos += len;
    }
    if (pos != s.size())
        fail("%s: %zu bytes after the last of the %d tokens: corrupt or not a gpt2_tokenizer.bin\n%s", path.c_str(),
             s.size() - pos, h[2], hint);
    return t;
}

std::string Gpt2DecodeTable::decode(const uint32_t* ids, size_t n) const {
    std::string s;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= tokens.size())
            fail("cannot decode token id %u at position %zu: the tokenizer file has ids 0..%zu", ids[i], i,
                 tokens.size() - 1);
        s += tokens[ids[i]];
    }
    return s;
}
