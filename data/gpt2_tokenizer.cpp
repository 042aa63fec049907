// GPT-2 byte-level BPE over tiktoken's r50k_base ranks. See gpt2_tokenizer.h for the contract.
#include "data/gpt2_tokenizer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "data/shard.h"

#if PRAC_HAVE_PCRE2
#include <pcre2.h>
#endif

namespace {

constexpr uint32_t NO_RANK = std::numeric_limits<uint32_t>::max();

std::string read_file(const std::string& path, const char* what, const char* hint) {
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

// A fast hash for short byte strings (tokens are 1..128 bytes, typically 2..8).
inline uint64_t hash_bytes(const char* p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

// The first min(n, 8) bytes of p as a zero-padded word (the head of a hash slot).
inline uint64_t load_head(const char* p, size_t n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n < 8 ? n : 8);
    return w;
}

// Length of the well-formed UTF-8 sequence at s[i] (Unicode Table 3-7), or 0 when it is ill-formed; then
// *subpart is the length of its maximal subpart (>= 1), which Python replaces by one U+FFFD.
inline size_t utf8_seq(const uint8_t* s, size_t n, size_t i, size_t* subpart) {
    uint8_t c = s[i];
    if (c < 0x80) return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
    } else {
        *subpart = 1;
        return 0;
    }
    size_t k = 1;
    for (; k < len; k++) {
        if (i + k >= n) break;
        uint8_t b = s[i + k];
        uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (b < l || b > h) break;
    }
    if (k == len) return len;
    *subpart = k;
    return 0;
}

// ---- per-thread state: PCRE2 match data and the piece cache ----

// Ids of pieces that needed merging, keyed by the piece bytes. Bounded: cleared when full.
struct PieceCache {
    static constexpr size_t SLOTS = 1 << 16;        // power of two
    static constexpr size_t MAX_ENTRIES = SLOTS / 2;
    static constexpr size_t MAX_KEY = 256;           // longer pieces are rare; not worth their space
    struct Entry {
        uint64_t hash;
        uint32_t key_off, key_len, val_off, val_len;
    };
    std::vector<uint32_t> slots;  // entry index + 1, 0 = empty
    std::vector<Entry> entries;
    std::string keys;
    std::vector<uint32_t> vals;

    void clear() {
        slots.assign(SLOTS, 0);
        entries.clear();
        keys.clear();
        vals.clear();
    }
    const Entry* find(std::string_view piece, uint64_t h) const {
        if (slots.empty()) return nullptr;
        for (size_t i = h & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
            uint32_t e = slots[i];
            if (!e) return nullptr;
            const Entry& en = entries[e - 1];
            if (en.hash == h && en.key_len == piece.size() &&
                std::memcmp(keys.data() + en.key_off, piece.data(), piece.size()) == 0)
                return &en;
        }
    }
    void insert(std::string_view piece, uint64_t h, const uint32_t* ids, size_t n) {
        if (piece.size() > MAX_KEY) return;
        if (slots.empty() || entries.size() >= MAX_ENTRIES) clear();
        size_t i = h & (SLOTS - 1);
        while (slots[i]) i = (i + 1) & (SLOTS - 1);
        entries.push_back({h, (uint32_t)keys.size(), (uint32_t)piece.size(), (uint32_t)vals.size(), (uint32_t)n});
        keys.append(piece);
        vals.insert(vals.end(), ids, ids + n);
        slots[i] = (uint32_t)entries.size();
    }
};

struct ThreadState {
    uint64_t owner = 0;  // Gpt2Tokenizer::instance_id whose cache this is
    PieceCache cache;
    std::vector<uint32_t> ids;                       // scratch: ids of one piece
    std::vector<std::pair<uint32_t, uint32_t>> parts;  // scratch: (start, rank) for the short merge
    std::vector<uint32_t> next, prev, rank;          // scratch: the heap merge
    std::vector<uint64_t> heap;
#if PRAC_HAVE_PCRE2
    pcre2_match_data* md = nullptr;
    pcre2_match_context* mctx = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
    ~ThreadState() {
        if (md) pcre2_match_data_free(md);
        if (mctx) pcre2_match_context_free(mctx);
        if (jit_stack) pcre2_jit_stack_free(jit_stack);
    }
#endif
};

ThreadState& thread_state(const Gpt2Tokenizer& tok) {
    static thread_local ThreadState ts;
    if (ts.owner != tok.instance_id) {
        ts.owner = tok.instance_id;
        ts.cache = PieceCache();  // another tokenizer's ids (or other options) must not leak in
    }
    return ts;
}

std::atomic<uint64_t> next_instance_id{1};

}  // namespace

// ---- the regex ----

struct Gpt2Splitter {
#if PRAC_HAVE_PCRE2
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Gpt2Splitter() {
        if (code) pcre2_code_free(code);
    }
#endif
};

#if PRAC_HAVE_PCRE2
static std::string pcre2_message(int rc) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(rc, buf, sizeof buf) < 0) return format("PCRE2 error %d", rc);
    return std::string((const char*)buf);
}
#endif

// ---- construction ----

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& ranks_path, const Gpt2Options& opts) : options(opts) {
#if !PRAC_HAVE_PCRE2
    fail("cannot load the GPT-2 tokenizer (%s): it needs PCRE2 for GPT-2's pre-tokenization regex, and this "
         "program was built without PCRE2 -> apt-get install libpcre2-dev\n"
         "---> HINT: install libpcre2-dev, then re-run cmake (it prints \"PCRE2: ...\" when found) and rebuild",
         ranks_path.c_str());
#else
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

    // Token bytes, id after id, then <|endoftext|>.
    offsets.resize(GPT2_VOCAB_SIZE + 1);
    for (int i = 0; i < GPT2_NUM_RANKS; i++) {
        offsets[i] = (uint32_t)arena.size();
        arena += tok[i];
        max_token_len = std::max(max_token_len, tok[i].size());
    }
    offsets[GPT2_NUM_RANKS] = (uint32_t)arena.size();
    arena += GPT2_EOT_TEXT;
    offsets[GPT2_VOCAB_SIZE] = (uint32_t)arena.size();

    // The rank table (see Slot): load < 0.4, linear probing.
    table.assign(1 << 17, Slot{0, 0, 0});
    const size_t mask = table.size() - 1;
    for (int i = 0; i < GPT2_NUM_RANKS; i++) {
        uint64_t h = hash_bytes(tok[i].data(), tok[i].size());
        size_t s = h & mask;
        for (;; s = (s + 1) & mask) {
            uint32_t e = table[s].rank1;
            if (!e) break;
            if (tok[e - 1] == tok[i])
                fail("%s:%zu: token bytes duplicate those of rank %u (line %zu)\n---> HINT: the file is corrupt; %s",
                     ranks_path.c_str(), line_of_rank[i], e - 1, line_of_rank[e - 1], hint);
        }
        table[s] = Slot{load_head(tok[i].data(), tok[i].size()), (uint32_t)i + 1,
                        (uint32_t)tok[i].size() | (uint32_t)(h >> 40) << 8};
    }
    // Byte-level BPE starts from single bytes: each of the 256 must be a token, or some text has no encoding.
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (rank_of(std::string_view(&c, 1)) < 0)
            fail("%s: byte 0x%02x is not a token, so text containing it cannot be encoded\n---> HINT: %s",
                 ranks_path.c_str(), b, hint);
    }

    splitter = std::make_unique<Gpt2Splitter>();
    int err = 0;
    PCRE2_SIZE erroff = 0;
    splitter->code = pcre2_compile((PCRE2_SPTR)GPT2_SPLIT_PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                   &err, &erroff, nullptr);
    if (!splitter->code)
        throw std::runtime_error("PCRE2 cannot compile GPT-2's pattern at offset " + std::to_string(erroff) + ": " +
                                 pcre2_message(err));
    // JIT is ~10x faster than the interpreter; a PCRE2 built without JIT still works, slower.
    splitter->jit = pcre2_jit_compile(splitter->code, PCRE2_JIT_COMPLETE) == 0;
    instance_id = next_instance_id.fetch_add(1);
#endif
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

int Gpt2Tokenizer::kind() const { return TOKENIZER_GPT2; }

int64_t Gpt2Tokenizer::rank_of(std::string_view b) const {
    if (b.empty() || b.size() > max_token_len) return -1;
    const uint64_t h = hash_bytes(b.data(), b.size());
    const uint64_t head = load_head(b.data(), b.size());
    const uint32_t len_tag = (uint32_t)b.size() | (uint32_t)(h >> 40) << 8;
    const size_t mask = table.size() - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        const Slot& sl = table[s];
        if (!sl.rank1) return -1;
        if (sl.len_tag != len_tag || sl.head != head) continue;
        uint32_t id = sl.rank1 - 1;
        if (b.size() <= 8 || std::memcmp(arena.data() + offsets[id] + 8, b.data() + 8, b.size() - 8) == 0) return id;
    }
}

std::string_view Gpt2Tokenizer::token_bytes(uint32_t id) const {
    if (id >= (uint32_t)GPT2_VOCAB_SIZE) fail("GPT-2 token id %u is out of range (vocab %d)", id, GPT2_VOCAB_SIZE);
    return std::string_view(arena.data() + offsets[id], offsets[id + 1] - offsets[id]);
}

// ---- BPE ----

namespace {

inline uint32_t rank_u32(const Gpt2Tokenizer& t, const char* p, size_t n) {
    int64_t r = t.rank_of(std::string_view(p, n));
    return r < 0 ? NO_RANK : (uint32_t)r;
}

// tiktoken's merge: rescan for the lowest-ranked adjacent pair (leftmost on ties) after every merge.
// O(m^2), and the fastest for the few-byte pieces that make up nearly all text.
void bpe_scan(const Gpt2Tokenizer& t, std::string_view piece, ThreadState& ts) {
    const char* p = piece.data();
    const size_t m = piece.size();
    auto& parts = ts.parts;  // (start, rank of this part merged with the next)
    parts.resize(m + 1);
    for (size_t i = 0; i + 1 < m; i++) parts[i] = {(uint32_t)i, rank_u32(t, p + i, 2)};
    parts[m - 1] = {(uint32_t)(m - 1), NO_RANK};
    parts[m] = {(uint32_t)m, NO_RANK};
    size_t len = m + 1;
    // Rank of parts i and i+1 merged, i.e. bytes [start(i), start(i+2)).
    auto pair_rank = [&](size_t i) {
        return i + 3 < len ? rank_u32(t, p + parts[i].first, parts[i + 3].first - parts[i].first) : NO_RANK;
    };
    for (;;) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < len; i++)
            if (parts[i].second < best) best = parts[i].second, bi = i;
        if (best == NO_RANK) break;
        // Merge parts bi and bi+1; the ranks of the pairs that now include the merged part change.
        if (bi > 0) parts[bi - 1].second = pair_rank(bi - 1);
        parts[bi].second = pair_rank(bi);
        parts.erase(parts.begin() + (ptrdiff_t)bi + 1, parts.begin() + (ptrdiff_t)bi + 2);
        len--;
    }
    ts.ids.clear();
    for (size_t i = 0; i + 1 < len; i++)
        ts.ids.push_back(rank_u32(t, p + parts[i].first, parts[i + 1].first - parts[i].first));
}

// The same merges in O(m log m): parts form a linked list (by start byte), candidate pairs sit in a min-heap
// keyed (rank, start), so the leftmost lowest rank comes first, exactly as in the scan. A heap entry is stale
// when its part is gone or its pair rank has changed; a part's pair only grows, so a rank never comes back.
void bpe_heap(const Gpt2Tokenizer& t, std::string_view piece, ThreadState& ts) {
    const char* p = piece.data();
    const uint32_t m = (uint32_t)piece.size();
    auto& next = ts.next;
    auto& prev = ts.prev;
    auto& rank = ts.rank;  // rank of part i merged with next[i]; NO_RANK also marks a dead part
    auto& heap = ts.heap;
    next.resize(m);
    prev.resize(m);
    rank.resize(m);
    heap.clear();
    std::vector<bool> alive(m, true);
    auto pair_rank = [&](uint32_t i) {  // bytes [i, end of next[i])
        uint32_t j = next[i];
        if (j >= m) return NO_RANK;
        uint32_t end = next[j];
        return rank_u32(t, p + i, end - i);
    };
    auto push = [&](uint32_t r, uint32_t i) {
        heap.push_back(((uint64_t)r << 32) | i);
        std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    };
    for (uint32_t i = 0; i < m; i++) next[i] = i + 1, prev[i] = i - 1;  // prev[0] wraps to UINT32_MAX: none
    for (uint32_t i = 0; i < m; i++) {
        rank[i] = pair_rank(i);
        if (rank[i] != NO_RANK) heap.push_back(((uint64_t)rank[i] << 32) | i);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
        uint64_t top = heap.back();
        heap.pop_back();
        uint32_t r = (uint32_t)(top >> 32), i = (uint32_t)top;
        if (!alive[i] || rank[i] != r) continue;  // stale
        uint32_t j = next[i];
        alive[j] = false;
        next[i] = next[j];
        if (next[j] < m) prev[next[j]] = i;
        rank[i] = pair_rank(i);
        if (rank[i] != NO_RANK) push(rank[i], i);
        if (i > 0) {
            uint32_t h = prev[i];
            rank[h] = pair_rank(h);
            if (rank[h] != NO_RANK) push(rank[h], h);
        }
    }
    ts.ids.clear();
    for (uint32_t i = 0; i < m; i = next[i]) ts.ids.push_back(rank_u32(t, p + i, next[i] - i));
    if (m > (1u << 20)) {  // a huge piece: give its ~20 bytes/byte of scratch back rather than keep it per thread
        std::vector<uint32_t>().swap(next);
        std::vector<uint32_t>().swap(prev);
        std::vector<uint32_t>().swap(rank);
        std::vector<uint64_t>().swap(heap);
    }
}

}  // namespace

// ---- encoding ----

void Gpt2Tokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
#if !PRAC_HAVE_PCRE2
    (void)text;
    (void)out;
    fail("the GPT-2 tokenizer needs PCRE2 -> apt-get install libpcre2-dev");
#else
    if (text.empty()) return;
    size_t bad = utf8_first_invalid(text);
    if (bad != std::string_view::npos) {
        std::string ctx;
        for (size_t k = bad; k < text.size() && k < bad + 4; k++) ctx += format("%s%02x", ctx.empty() ? "" : " ",
                                                                                 (unsigned)(uint8_t)text[k]);
        fail("invalid UTF-8 at byte offset %zu (bytes %s) of a %zu-byte text: GPT-2 encodes Unicode text, as "
             "tiktoken's encode_ordinary does\n"
             "---> HINT: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8), skip the document, or repair "
             "it with utf8_replace_invalid() (what Python's errors=\"replace\" does)",
             bad, ctx.c_str(), text.size());
    }
    ThreadState& ts = thread_state(*this);
    if (!ts.md) {
        ts.md = pcre2_match_data_create(1, nullptr);
        ts.mctx = pcre2_match_context_create(nullptr);
        // The default 32 KB JIT stack lives on the machine stack; give the JIT its own, growing to 8 MB.
        ts.jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
        if (!ts.md || !ts.mctx || !ts.jit_stack) throw std::bad_alloc();
        pcre2_jit_stack_assign(ts.mctx, nullptr, ts.jit_stack);
    }
    const auto* s = (PCRE2_SPTR)text.data();
    const size_t n = text.size();
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.md);
    size_t off = 0;
    while (off < n) {
        // The whole text was validated above; PCRE2's own check would re-validate the rest of the subject on
        // every call, which makes splitting O(n^2).
        int rc = splitter->jit ? pcre2_jit_match(splitter->code, s, n, off, 0, ts.md, ts.mctx)
                               : pcre2_match(splitter->code, s, n, off, PCRE2_NO_UTF_CHECK, ts.md, ts.mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;  // cannot happen: the pattern matches every character
        if (rc < 0)
            fail("GPT-2 pre-tokenization failed at byte %zu of a %zu-byte text: %s\n"
                 "---> HINT: split the text into smaller documents",
                 off, n, pcre2_message(rc).c_str());
        size_t b = ov[0], e = ov[1];
        off = e > b ? e : b + 1;  // (no empty matches are possible; guard anyway)
        if (e <= b) continue;
        std::string_view piece(text.data() + b, e - b);

        int64_t whole = rank_of(piece);
        if (whole >= 0) {
            out.push_back((uint32_t)whole);
            continue;
        }
        uint64_t h = 0;
        if (options.piece_cache && piece.size() <= PieceCache::MAX_KEY) {
            h = hash_bytes(piece.data(), piece.size());
            if (const PieceCache::Entry* en = ts.cache.find(piece, h)) {
                const uint32_t* v = ts.cache.vals.data() + en->val_off;
                out.insert(out.end(), v, v + en->val_len);
                continue;
            }
        }
        if (piece.size() >= std::max<size_t>(options.heap_bpe_min_bytes, 2)) {
            if (piece.size() >= (size_t)UINT32_MAX)
                fail("a single GPT-2 pre-tokenization piece of %zu bytes is too long (4 GiB max)", piece.size());
            bpe_heap(*this, piece, ts);
        } else {
            bpe_scan(*this, piece, ts);
        }
        out.insert(out.end(), ts.ids.begin(), ts.ids.end());
        if (options.piece_cache && piece.size() <= PieceCache::MAX_KEY)
            ts.cache.insert(piece, h, ts.ids.data(), ts.ids.size());
        if (ts.ids.capacity() > (1u << 20)) std::vector<uint32_t>().swap(ts.ids);  // after a huge piece
    }
#endif
}

std::vector<uint32_t> Gpt2Tokenizer::encode(std::string_view text) const {
    std::vector<uint32_t> out;
    out.reserve(text.size() / 3 + 16);
    encode(text, out);
    return out;
}

std::vector<std::vector<uint32_t>> Gpt2Tokenizer::encode_batch(const std::vector<std::string>& docs,
                                                               int threads) const {
    std::vector<std::vector<uint32_t>> out(docs.size());
    if (threads <= 0) threads = (int)std::max(1u, std::thread::hardware_concurrency());
    threads = (int)std::min<size_t>((size_t)threads, docs.size());
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex err_mu;
    std::exception_ptr err;
    size_t err_doc = 0;
    // Documents are handed out one at a time, so long and short ones balance across threads.
    auto work = [&] {
        while (!stop.load(std::memory_order_relaxed)) {
            size_t i = next.fetch_add(1);
            if (i >= docs.size()) break;
            try {
                out[i] = encode(docs[i]);
            } catch (...) {
                std::lock_guard<std::mutex> lock(err_mu);
                if (!err || i < err_doc) err = std::current_exception(), err_doc = i;
                stop = true;
            }
        }
    };
    if (threads <= 1) {
        work();
    } else {
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; t++) pool.emplace_back(work);
        for (auto& th : pool) th.join();
    }
    if (err) {
        try {
            std::rethrow_exception(err);
        } catch (const UserError& e) {
            fail("document %zu of %zu: %s", err_doc, docs.size(), e.what());
        }
    }
    return out;
}

// ---- decoding and gpt2_tokenizer.bin ----

std::string Gpt2Tokenizer::decode(const uint32_t* ids, size_t n) const {
    std::string s;
    s.reserve(n * 4);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= (uint32_t)GPT2_VOCAB_SIZE)
            fail("cannot decode token id %u at position %zu: GPT-2's ids are 0..%d\n"
                 "---> HINT: these ids come from another tokenizer (or a model with a padded vocabulary)",
                 ids[i], i, GPT2_VOCAB_SIZE - 1);
        s.append(arena, offsets[ids[i]], offsets[ids[i] + 1] - offsets[ids[i]]);
    }
    return s;
}

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

// ---- UTF-8 ----

size_t utf8_first_invalid(std::string_view sv) {
    const auto* s = (const uint8_t*)sv.data();
    const size_t n = sv.size();
    size_t i = 0;
    while (i < n) {
        // ASCII runs (nearly all of English text), 8 bytes at a time.
        while (i + 8 <= n) {
            uint64_t w;
            std::memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        size_t sub = 0, len = utf8_seq(s, n, i, &sub);
        if (!len) return i;
        i += len;
    }
    return std::string_view::npos;
}

std::string utf8_replace_invalid(std::string_view sv) {
    const auto* s = (const uint8_t*)sv.data();
    const size_t n = sv.size();
    std::string out;
    out.reserve(n);
    for (size_t i = 0; i < n;) {
        size_t sub = 0, len = utf8_seq(s, n, i, &sub);
        if (len) {
            out.append(sv.data() + i, len);
            i += len;
        } else {
            out += "\xEF\xBF\xBD";  // U+FFFD
            i += sub;
        }
    }
    return out;
}
