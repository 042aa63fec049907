#include "data/tokenizer_id.h"

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/files.h"  // dir_of, refuse_special_file

// ---- SHA-256, as FIPS 180-4 section 6.2 states it ----

namespace {

const uint32_t SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

struct Sha256 {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char block[64];
    size_t fill = 0;
    uint64_t total = 0;  // bytes

    void compress(const unsigned char* p) {
        uint32_t w[64];
        for (int t = 0; t < 16; t++)
            w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 | (uint32_t)p[4 * t + 2] << 8 | p[4 * t + 3];
        for (int t = 16; t < 64; t++) {
            uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
            uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
            w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
        for (int t = 0; t < 64; t++) {
            uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[t] + w[t];
            uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
    }
    void update(const unsigned char* p, size_t n) {
        total += n;
        while (n > 0) {
            size_t take = std::min(n, 64 - fill);
            std::memcpy(block + fill, p, take);
            fill += take, p += take, n -= take;
            if (fill == 64) compress(block), fill = 0;
        }
    }
    std::string hex() {
        uint64_t bits = total * 8;
        unsigned char pad = 0x80;
        update(&pad, 1);
        unsigned char zero = 0;
        while (fill != 56) update(&zero, 1);
        unsigned char len[8];
        for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
        update(len, 8);
        std::string out;
        for (uint32_t v : h) out += format("%08x", v);
        return out;
    }
};

bool is_regular(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string sha256_hex(const void* data, size_t n) {
    Sha256 s;
    s.update((const unsigned char*)data, n);
    return s.hex();
}

std::string sha256_file_hex(const std::string& path) {
    refuse_special_file(path, "tokenizer file");
    FILE* f = std::fopen(path.c_str(), "rb");
    CHECK_USER(f, "cannot read %s: %s", path.c_str(), std::strerror(errno));
    Sha256 s;
    std::vector<unsigned char> buf(1 << 16);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) s.update(buf.data(), n);
    bool bad = std::ferror(f);
    std::fclose(f);
    CHECK_USER(!bad, "cannot read %s: read error", path.c_str());
    return s.hex();
}

uint64_t tokenizer_hash_of_sha256(const std::string& hex) {
    CHECK_USER(hex.size() == 64, "not a SHA-256 hex digest: %s", hex.c_str());
    return std::stoull(hex.substr(0, 16), nullptr, 16);
}

uint64_t tokenizer_file_hash(const std::string& path) { return tokenizer_hash_of_sha256(sha256_file_hex(path)); }

std::string tokenizer_hash_hex(uint64_t h) { return format("%016" PRIx64, h); }

std::string tokenizer_file_base_name(const std::string& path) {
    size_t slash = path.find_last_of('/');
    std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.size() >= (size_t)SHARD_NAME_BYTES) name.resize(SHARD_NAME_BYTES - 1);
    for (char& c : name)
        if ((unsigned char)c < 0x20 || c == 0x7F) c = '_';
    return name;
}

// "the SentencePiece tokenizer spiece.model (hash 0123...)", without what the shard does not record.
static std::string describe_tokenizer(int32_t kind, const std::string& name, uint64_t hash) {
    std::string s = format("the %s tokenizer", tokenizer_kind_name(kind));
    if (!name.empty()) s += " " + name;
    if (hash != 0) s += " (hash " + tokenizer_hash_hex(hash) + ")";
    return s;
}

ShardTokenizer shard_tokenizer(const std::vector<std::string>& patterns, const std::vector<std::string>& flags) {
    ShardTokenizer st;
    std::string first_pattern;  // the pattern st.first_file came from
    for (size_t k = 0; k < patterns.size(); k++) {
        const std::string& pattern = patterns[k];
        glob_t g;
        if (glob(pattern.c_str(), 0, nullptr, &g) != 0) {  // the loader reports a pattern matching nothing
            globfree(&g);
            continue;
        }
        for (size_t i = 0; i < g.gl_pathc; i++) {
            std::string path = g.gl_pathv[i];
            ShardInfo h;
            try {
                h = read_shard_header(path);
            } catch (const UserError& e) {
                globfree(&g);
                if (k < flags.size() && !flags[k].empty()) throw UserError(flags[k] + ": " + e.what());
                throw;
            } catch (...) {
                globfree(&g);
                throw;
            }
            std::string dir = dir_of(path);
            if (std::find(st.dirs.begin(), st.dirs.end(), dir) == st.dirs.end()) st.dirs.push_back(dir);
            if (st.first_file.empty()) {
                st.kind = h.tokenizer, st.vocab_size = h.vocab_size, st.hash = h.tokenizer_hash;
                st.name = h.tokenizer_name, st.first_file = path, first_pattern = pattern;
                continue;
            }
            // zero is unknown (llm.c's shards: data/README.md) and agrees with anything; the known one is kept
            bool same = (h.tokenizer == TOKENIZER_UNKNOWN || st.kind == TOKENIZER_UNKNOWN || h.tokenizer == st.kind) &&
                        (h.tokenizer_hash == 0 || st.hash == 0 || h.tokenizer_hash == st.hash);
            if (!same) {
                globfree(&g);
                const bool one_pattern = first_pattern == pattern;  // two tokenizers among one flag's shards
                fail("%s was made with %s, but %s with %s\n"
                     "---> HINT: %s; prepare them with one prep_data run (it writes PREFIX_train_* and PREFIX_val_*)",
                     path.c_str(), describe_tokenizer(h.tokenizer, h.tokenizer_name, h.tokenizer_hash).c_str(),
                     st.first_file.c_str(), describe_tokenizer(st.kind, st.name, st.hash).c_str(),
                     one_pattern ? format("the shards \"%s\" matches must all come from one tokenizer",
                                          pattern.c_str()).c_str()
                                 : "training and validation shards must come from the same tokenizer");
            }
            if (st.kind == TOKENIZER_UNKNOWN && h.tokenizer != TOKENIZER_UNKNOWN)
                st.kind = h.tokenizer, st.vocab_size = h.vocab_size, st.first_file = path, first_pattern = pattern;
            if (st.hash == 0 && h.tokenizer_hash != 0)
                st.hash = h.tokenizer_hash, st.name = h.tokenizer_name, st.first_file = path, first_pattern = pattern;
        }
        globfree(&g);
    }
    return st;
}

std::string find_spm_model_for(const ShardTokenizer& st, const std::string& given,
                               const std::vector<std::string>& fallbacks, std::string* why) {
    std::string want = tokenizer_hash_hex(st.hash);
    if (!given.empty()) {
        struct stat sb;
        CHECK_USER(is_regular(given), "--spm-model %s: %s\n---> HINT: pass the SentencePiece .model file", given.c_str(),
                   stat(given.c_str(), &sb) != 0 ? "no such file" : S_ISDIR(sb.st_mode) ? "a directory, not a file"
                                                                                        : "not a regular file");
        if (st.hash == 0) return given;  // the shards cannot tell: the user's word
        uint64_t h = tokenizer_file_hash(given);
        if (h != st.hash)
            fail("--spm-model %s is not the SentencePiece model that made the shards: its SHA-256 starts %s, but %s "
                 "was made with %s, whose SHA-256 starts %s\n---> HINT: pass the model the shards were made with "
                 "(prep_data keeps a copy next to them, PREFIX_tokenizer.model), or drop --spm-model",
                 given.c_str(), tokenizer_hash_hex(h).c_str(), st.first_file.c_str(), st.name.c_str(), want.c_str());
        return given;
    }
    if (st.hash == 0) {
        *why = format("%s does not record which SentencePiece model made it (shards of llm.c, or of a prep_data "
                      "older than the tokenizer fields)", st.first_file.c_str());
        return "";
    }
    std::vector<std::string> candidates;
    for (const std::string& dir : st.dirs) {
        DIR* d = opendir(dir.c_str());
        if (!d) continue;
        std::vector<std::string> names;
        while (dirent* e = readdir(d)) {
            std::string n = e->d_name;
            if (n.size() > 6 && n.compare(n.size() - 6, 6, ".model") == 0) names.push_back(n);
        }
        closedir(d);
        std::sort(names.begin(), names.end());
        for (auto& n : names) candidates.push_back(dir + "/" + n);
    }
    for (const auto& f : fallbacks) candidates.push_back(f);
    for (const auto& c : candidates) {
        if (!is_regular(c)) continue;
        try {
            if (tokenizer_file_hash(c) == st.hash) return c;
        } catch (const UserError&) {
        }
    }
    *why = format("the shards were made with the SentencePiece model %s (SHA-256 starting %s), and no file with that "
                  "hash is in the shards' director%s or among the built-in models",
                  st.name.c_str(), want.c_str(), st.dirs.size() == 1 ? "y" : "ies");
    return "";
}
