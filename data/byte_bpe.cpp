// Byte-level BPE shared by the GPT-2 and RoBERTa tokenizers. See byte_bpe.h for the contract.
#include "data/byte_bpe.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>  // std::begin, std::end
#include <limits>
#include <stdexcept>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "data/unicode_classes.h"

#if PRAC_HAVE_PCRE2
#include <pcre2.h>
#endif

namespace {

constexpr uint64_t NO_PAIR = std::numeric_limits<uint64_t>::max();  // these two parts do not merge


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

// One part of a piece during the scan merge: where it starts, its token, and its merge with the next part.
struct Part {
    uint32_t start, id;
    uint64_t merge;  // rank << 32 | merged id (so comparing merges compares ranks), or NO_PAIR
};

struct ThreadState {
    uint64_t owner = 0;  // BytePairEncoder::instance_id whose cache this is
    PieceCache cache;
    std::vector<uint32_t> ids;                 // scratch: ids of one piece
    std::vector<Part> parts;                   // scratch: the short merge
    std::vector<uint32_t> next, prev, id;      // scratch: the heap merge
    std::vector<uint64_t> merge, heap;
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

ThreadState& thread_state(const BytePairEncoder& tok) {
    static thread_local ThreadState ts;
    if (ts.owner != tok.instance_id) {
        ts.owner = tok.instance_id;
        ts.cache = PieceCache();  // another tokenizer's ids (or other options) must not leak in
    }
    return ts;
}

}  // namespace

// ---- the regex ----

// GPT-2's pattern twice: spelled out by Unicode 16.0 (`code`), and as written (`plain`: PCRE2's own classes, 14%
// faster on English text), which splits alike wherever no code point of UNICODE_SPLITS_OTHERWISE occurs.
struct BpeSplitter {
#if PRAC_HAVE_PCRE2
    pcre2_code *code = nullptr, *plain = nullptr;
    bool jit = false, plain_jit = false;
    ~BpeSplitter() {
        if (code) pcre2_code_free(code);
        if (plain) pcre2_code_free(plain);
    }
#endif
};

#if PRAC_HAVE_PCRE2
static std::string pcre2_message(int rc) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(rc, buf, sizeof buf) < 0) return format("PCRE2 error %d", rc);
    return std::string((const char*)buf);
}

// Whether valid UTF-8 holds a code point of UNICODE_SPLITS_OTHERWISE. Only the UTF-8 lead bytes of its ranges are
// decoded (E1, EA, F0: a CJK or Cyrillic text's characters are passed over as bytes).
static bool splits_otherwise_by_old_tables(const uint8_t* s, size_t n) {
    static const std::array<bool, 256> leads = [] {
        auto lead = [](uint32_t cp) {  // (of a code point past U+007F)
            return cp < 0x800 ? 0xC0 | cp >> 6 : cp < 0x10000 ? 0xE0 | cp >> 12 : 0xF0 | cp >> 18;
        };
        std::array<bool, 256> is{};
        for (const auto& range : UNICODE_SPLITS_OTHERWISE)
            for (uint32_t b = lead(range[0]); b <= lead(range[1]); b++) is[b] = true;
        return is;
    }();
    for (size_t i = 0; i < n; i++) {
        if (!leads[s[i]]) continue;  // (never a continuation byte: every range is past U+0800)
        uint32_t cp;
        if (s[i] < 0xF0) {
            cp = (uint32_t)(s[i] & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
            i += 2;
        } else {
            cp = (uint32_t)(s[i] & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 |
                 (uint32_t)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
            i += 3;
        }
        const auto* end = std::end(UNICODE_SPLITS_OTHERWISE);
        const auto* r = std::lower_bound(std::begin(UNICODE_SPLITS_OTHERWISE), end, cp,
                                         [](const uint32_t (&range)[2], uint32_t c) { return range[1] < c; });
        if (r != end && (*r)[0] <= cp) return true;
    }
    return false;
}

// Unicode tables of versions UNICODE_CLASSES_BASE to UNICODE_CLASSES_VERSION ("14.0.0" .. "16.0.0"): the
// characters the pattern below adds are then exactly the ones PCRE2 lacks, or ones it already has.
static bool pcre2_unicode_tables_suffice(const char* version) {
    int major = 0, minor = 0, base_major = 0, base_minor = 0, top_major = 0, top_minor = 0;
    if (std::sscanf(version, "%d.%d", &major, &minor) != 2) return false;
    std::sscanf(UNICODE_CLASSES_BASE, "%d.%d", &base_major, &base_minor);
    std::sscanf(UNICODE_CLASSES_VERSION, "%d.%d", &top_major, &top_minor);
    const int v = major * 100 + minor;
    return v >= base_major * 100 + base_minor && v <= top_major * 100 + top_minor;
}

// GPT2_SPLIT_PATTERN as PCRE2 must read it to split as tiktoken and Hugging Face do, by Unicode 16.0: \p{L} and
// \p{N} completed with the letters and digits added since PCRE2's tables (Debian 12's 10.42 has Unicode 14.0: the
// 9,392 added in 15.0-16.0 split apart from their word there), and \s spelled as White_Space (PCRE2's \s also
// matches U+180E, which joined the spaces before a Mongolian word). A PCRE2 with tables of 14.0-16.0 splits alike.
static std::string gpt2_split_pattern_for_pcre2() {
    const std::string letter = std::string("\\p{L}") + UNICODE_LETTERS_ADDED,
                      number = std::string("\\p{N}") + UNICODE_NUMBERS_ADDED, space = UNICODE_WHITE_SPACE;
    const std::string pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?[" + letter + "]+| ?[" + number + "]+| ?[^" + space +
                                letter + number + "]+|[" + space + "]+(?![^" + space + "])|[" + space + "]+";
    char version[32] = "";
    if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version) > 0 && !pcre2_unicode_tables_suffice(version)) {
        static std::once_flag said;
        std::call_once(said, [&] {
            std::fprintf(stderr, "warning: PCRE2 %d.%d has Unicode %s tables; GPT-2's tokenizer splits as tiktoken "
                         "does by Unicode %s when they are %s to %s (characters added in between may split "
                         "otherwise)\n", PCRE2_MAJOR, PCRE2_MINOR, version, UNICODE_CLASSES_VERSION,
                         UNICODE_CLASSES_BASE, UNICODE_CLASSES_VERSION);
        });
    }
    return pattern;
}
#endif

// ---- the merges: the two rankings, the scan and the heap ----

namespace {

// tiktoken: parts [begin, end) merge when their concatenation is a token, at its rank, into it.
struct TokenRanking {
    const BytePairEncoder& t;
    uint64_t merge(const char* p, uint32_t begin, uint32_t end, uint32_t, uint32_t) const {
        int64_t r = t.single_token(std::string_view(p + begin, end - begin));
        return r < 0 ? NO_PAIR : ((uint64_t)r << 32 | (uint64_t)r);
    }
};

// Hugging Face: parts merge when (left, right) is a line of merges.txt, at that line, into its token.
struct PairRanking {
    const BytePairEncoder& t;
    uint64_t merge(const char*, uint32_t, uint32_t, uint32_t left, uint32_t right) const {
        return t.pair_merge(left, right);
    }
};

// Rescan for the lowest-ranked adjacent pair (leftmost on ties) after every merge, as tiktoken does.
// O(m^2), and the fastest for the few-byte pieces that make up nearly all text.
template <class Ranking>
void bpe_scan(const Ranking& rk, const uint32_t* byte_id, std::string_view piece, ThreadState& ts) {
    const char* p = piece.data();
    const uint32_t m = (uint32_t)piece.size();
    auto& parts = ts.parts;  // parts[len-1] is a sentinel holding the end of the piece
    parts.resize(m + 1);
    for (uint32_t i = 0; i < m; i++) parts[i] = {i, byte_id[(uint8_t)p[i]], NO_PAIR};
    parts[m] = {m, 0, NO_PAIR};
    size_t len = m + 1;
    // Parts i and i+1 merged: bytes [start(i), start(i+2)).
    auto merge_of = [&](size_t i) {
        return i + 2 < len ? rk.merge(p, parts[i].start, parts[i + 2].start, parts[i].id, parts[i + 1].id) : NO_PAIR;
    };
    for (size_t i = 0; i + 2 < len; i++) parts[i].merge = merge_of(i);
    for (;;) {
        uint64_t best = NO_PAIR;
        size_t bi = 0;
        for (size_t i = 0; i + 2 < len; i++)
            if (parts[i].merge < best) best = parts[i].merge, bi = i;
        if (best == NO_PAIR) break;
        // Merge parts bi and bi+1; the pairs that now include the merged part change.
        parts[bi].id = (uint32_t)best;
        parts.erase(parts.begin() + (ptrdiff_t)bi + 1);
        len--;
        parts[bi].merge = merge_of(bi);
        if (bi > 0) parts[bi - 1].merge = merge_of(bi - 1);
    }
    ts.ids.clear();
    for (size_t i = 0; i + 1 < len; i++) ts.ids.push_back(parts[i].id);
}

// The same merges in O(m log m): parts form a linked list (by start byte), candidate pairs sit in a min-heap
// keyed (rank, start), so the leftmost lowest rank comes first, exactly as in the scan. A heap entry is stale
// when its part is gone or its pair's rank has changed; a part's pair only grows, and a rank names one pair (one
// token, one merges line), so a rank never comes back.
template <class Ranking>
void bpe_heap(const Ranking& rk, const uint32_t* byte_id, std::string_view piece, ThreadState& ts) {
    const char* p = piece.data();
    const uint32_t m = (uint32_t)piece.size();
    auto& next = ts.next;
    auto& prev = ts.prev;
    auto& id = ts.id;
    auto& merge = ts.merge;  // merge of part i with next[i]
    auto& heap = ts.heap;    // rank << 32 | part
    next.resize(m);
    prev.resize(m);
    id.resize(m);
    merge.resize(m);
    heap.clear();
    std::vector<bool> alive(m, true);
    auto merge_of = [&](uint32_t i) {  // bytes [i, end of next[i])
        uint32_t j = next[i];
        if (j >= m) return NO_PAIR;
        return rk.merge(p, i, next[j], id[i], id[j]);
    };
    auto push = [&](uint64_t mg, uint32_t i) {
        heap.push_back((mg >> 32 << 32) | i);
        std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    };
    for (uint32_t i = 0; i < m; i++) next[i] = i + 1, prev[i] = i - 1, id[i] = byte_id[(uint8_t)p[i]];  // prev[0]: none
    for (uint32_t i = 0; i < m; i++) {
        merge[i] = merge_of(i);
        if (merge[i] != NO_PAIR) heap.push_back((merge[i] >> 32 << 32) | i);
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
        uint64_t top = heap.back();
        heap.pop_back();
        uint32_t i = (uint32_t)top;
        if (!alive[i] || merge[i] >> 32 != top >> 32) continue;  // stale
        uint32_t j = next[i];
        alive[j] = false;
        id[i] = (uint32_t)merge[i];
        next[i] = next[j];
        if (next[j] < m) prev[next[j]] = i;
        merge[i] = merge_of(i);
        if (merge[i] != NO_PAIR) push(merge[i], i);
        if (i > 0) {
            uint32_t h = prev[i];
            merge[h] = merge_of(h);
            if (merge[h] != NO_PAIR) push(merge[h], h);
        }
    }
    ts.ids.clear();
    for (uint32_t i = 0; i < m; i = next[i]) ts.ids.push_back(id[i]);
    if (m > (1u << 20)) {  // a huge piece: give its ~30 bytes/byte of scratch back rather than keep it per thread
        std::vector<uint32_t>().swap(next);
        std::vector<uint32_t>().swap(prev);
        std::vector<uint32_t>().swap(id);
        std::vector<uint64_t>().swap(merge);
        std::vector<uint64_t>().swap(heap);
    }
}

// The ids of one piece (>= 1 byte) into ts.ids, by either merge.
void merge_piece(const BytePairEncoder& t, std::string_view piece, ThreadState& ts) {
    if (piece.size() >= (size_t)UINT32_MAX)
        fail("a single pre-tokenization piece of %zu bytes is too long (4 GiB max)", piece.size());
    bool heap = piece.size() >= std::max<size_t>(t.options.heap_bpe_min_bytes, 2);
    if (t.ranking == BpeRanking::TOKEN_RANK) {
        TokenRanking rk{t};
        heap ? bpe_heap(rk, t.byte_id, piece, ts) : bpe_scan(rk, t.byte_id, piece, ts);
    } else {
        PairRanking rk{t};
        heap ? bpe_heap(rk, t.byte_id, piece, ts) : bpe_scan(rk, t.byte_id, piece, ts);
    }
}

std::atomic<uint64_t> next_instance_id{1};

uint64_t hash_pair(uint64_t key) {
    key = (key ^ (key >> 31)) * 0xbf58476d1ce4e5b9ull;
    return key ^ (key >> 29);
}

}  // namespace

// ---- construction ----

BytePairEncoder::BytePairEncoder(BpeRanking ranking_, std::vector<std::string> tokens, std::vector<bool> special,
                                 const std::vector<BpeMerge>& merges, const BpeOptions& opts,
                                 const std::string& source, const std::function<std::string(uint32_t)>& token_name)
    : ranking(ranking_), options(opts) {
#if !PRAC_HAVE_PCRE2
    (void)tokens, (void)special, (void)merges, (void)token_name;
    fail("cannot load the tokenizer %s: byte-level BPE needs PCRE2 for GPT-2's pre-tokenization regex, and this "
         "program was built without PCRE2 -> apt-get install libpcre2-dev\n"
         "---> HINT: install libpcre2-dev, then re-run cmake (it prints \"PCRE2: ...\" when found) and rebuild",
         source.c_str());
#else
    const size_t n = tokens.size();
    if (special.empty()) special.assign(n, false);
    CHECK_USER(special.size() == n && n > 0 && n < (size_t)UINT32_MAX, "%s: %zu tokens", source.c_str(), n);
    CHECK_USER(ranking == BpeRanking::PAIR_RANK || merges.empty(), "%s: tiktoken ranks have no merges list",
               source.c_str());
    offsets.resize(n + 1);
    for (size_t i = 0; i < n; i++) {
        if (tokens[i].empty() && !special[i]) fail("%s: token %zu is empty", source.c_str(), i);
        offsets[i] = (uint32_t)arena.size();
        arena += tokens[i];
    }
    offsets[n] = (uint32_t)arena.size();
    std::vector<bool> ordinary(n);
    for (size_t i = 0; i < n; i++) ordinary[i] = !special[i];
    build_table(tokens, ordinary, source, token_name);  // all ordinary tokens: finds duplicates and the bytes
    // Byte-level BPE starts from single bytes: each of the 256 must be a token, or some text has no encoding.
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int64_t id = single_token(std::string_view(&c, 1));
        if (id < 0)
            fail("%s: byte 0x%02x (\"%s\" in vocab.json's alphabet) is not a token, so text containing it cannot be "
                 "encoded\n---> HINT: this is not a byte-level BPE vocabulary (GPT-2, RoBERTa), or it is damaged",
                 source.c_str(), b, gpt2_byte_to_unicode((unsigned char)b).c_str());
        byte_id[b] = (uint32_t)id;
    }
    if (ranking == BpeRanking::PAIR_RANK) {
        size_t size = 1;
        while (size * 10 < merges.size() * 25 + 10) size *= 2;  // load < 0.4
        pairs.assign(size, PairSlot{~0ull, 0});
        for (size_t k = 0; k < merges.size(); k++) {
            const BpeMerge& mg = merges[k];
            if (mg.left >= n || mg.right >= n || mg.merged >= n)
                fail("%s: merge %zu has a token id out of range (vocabulary of %zu)", source.c_str(), k + 1, n);
            uint64_t key = (uint64_t)mg.left << 32 | mg.right;
            size_t s = hash_pair(key) & (size - 1);
            for (; pairs[s].key != ~0ull; s = (s + 1) & (size - 1))
                if (pairs[s].key == key)  // (the loader names a repeated merge by its file and line)
                    throw std::logic_error(format("%s: merge %zu repeats merge %llu: the loader let it by",
                                                  source.c_str(), k + 1, (unsigned long long)(pairs[s].value >> 32) + 1));
            pairs[s] = PairSlot{key, (uint64_t)k << 32 | mg.merged};
        }
    }
    splitter = std::make_unique<BpeSplitter>();
    int err = 0;
    PCRE2_SIZE erroff = 0;
    auto compile = [&](const std::string& pattern) {
        pcre2_code* code = pcre2_compile((PCRE2_SPTR)pattern.c_str(), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                                         &erroff, nullptr);
        if (!code)
            throw std::runtime_error("PCRE2 cannot compile GPT-2's pattern at offset " + std::to_string(erroff) +
                                     ": " + pcre2_message(err));
        return code;
    };
    splitter->code = compile(gpt2_split_pattern_for_pcre2());
    splitter->plain = compile(GPT2_SPLIT_PATTERN);
    // JIT is ~10x faster than the interpreter; a PCRE2 built without JIT still works, slower.
    splitter->jit = pcre2_jit_compile(splitter->code, PCRE2_JIT_COMPLETE) == 0;
    splitter->plain_jit = pcre2_jit_compile(splitter->plain, PCRE2_JIT_COMPLETE) == 0;
    instance_id = next_instance_id.fetch_add(1);
    if (ranking == BpeRanking::PAIR_RANK) {
        // A whole piece may skip the merges only when they would make it one token anyway: keep in the table the
        // tokens whose own bytes merge into themselves (merges.txt need not make every vocabulary entry).
        ThreadState& ts = thread_state(*this);
        std::vector<bool> whole(n, false);
        for (size_t i = 0; i < n; i++) {
            if (special[i]) continue;
            merge_piece(*this, tokens[i], ts);
            whole[i] = ts.ids.size() == 1 && ts.ids[0] == i;
        }
        build_table(tokens, whole, source, token_name);
    }
#endif
}

BytePairEncoder::~BytePairEncoder() = default;

void BytePairEncoder::build_table(const std::vector<std::string>& tokens, const std::vector<bool>& in_table,
                                  const std::string& source,
                                  const std::function<std::string(uint32_t)>& token_name) {
    size_t count = 0;
    for (bool b : in_table) count += b;
    size_t size = 1;
    while (size * 10 < count * 25 + 10) size *= 2;  // load < 0.4, linear probing
    table.assign(size, Slot{0, 0, 0});
    max_token_len = 0;
    const size_t mask = size - 1;
    for (size_t i = 0; i < tokens.size(); i++) {
        if (!in_table[i]) continue;
        const std::string& t = tokens[i];
        uint64_t h = hash_bytes(t.data(), t.size());
        size_t s = h & mask;
        for (;; s = (s + 1) & mask) {
            uint32_t e = table[s].id1;
            if (!e) break;
            if (tokens[e - 1] == t)
                fail("%s: %s: token bytes duplicate those of %s\n---> HINT: the file is damaged", source.c_str(),
                     token_name((uint32_t)i).c_str(), token_name(e - 1).c_str());
        }
        table[s] = Slot{load_head(t.data(), t.size()), (uint32_t)i + 1, (uint32_t)t.size() | (uint32_t)(h >> 40) << 8};
        max_token_len = std::max(max_token_len, t.size());
    }
}

int64_t BytePairEncoder::single_token(std::string_view b) const {
    if (b.empty() || b.size() > max_token_len) return -1;
    const uint64_t h = hash_bytes(b.data(), b.size());
    const uint64_t head = load_head(b.data(), b.size());
    const uint32_t len_tag = (uint32_t)b.size() | (uint32_t)(h >> 40) << 8;
    const size_t mask = table.size() - 1;
    for (size_t s = h & mask;; s = (s + 1) & mask) {
        const Slot& sl = table[s];
        if (!sl.id1) return -1;
        if (sl.len_tag != len_tag || sl.head != head) continue;
        uint32_t id = sl.id1 - 1;
        if (b.size() <= 8 || std::memcmp(arena.data() + offsets[id] + 8, b.data() + 8, b.size() - 8) == 0) return id;
    }
}

uint64_t BytePairEncoder::pair_merge(uint32_t left, uint32_t right) const {
    const uint64_t key = (uint64_t)left << 32 | right;
    const size_t mask = pairs.size() - 1;
    for (size_t s = hash_pair(key) & mask;; s = (s + 1) & mask) {
        if (pairs[s].key == key) return pairs[s].value;
        if (pairs[s].key == ~0ull) return NO_PAIR;
    }
}

std::string_view BytePairEncoder::token_bytes(uint32_t id) const {
    if (id >= (uint32_t)vocab_size()) fail("token id %u is out of range (vocab %d)", id, vocab_size());
    return std::string_view(arena.data() + offsets[id], offsets[id + 1] - offsets[id]);
}

// ---- encoding ----

void BytePairEncoder::require_utf8(std::string_view text, const char* what) const {
    size_t bad = utf8_first_invalid(text);
    if (bad == std::string_view::npos) return;
    std::string ctx;
    for (size_t k = bad; k < text.size() && k < bad + 4; k++)
        ctx += format("%s%02x", ctx.empty() ? "" : " ", (unsigned)(uint8_t)text[k]);
    fail("invalid UTF-8 at byte offset %zu (bytes %s) of a %zu-byte text: %s\n"
         "---> HINT: convert the input to UTF-8 (e.g. iconv -f latin1 -t utf-8), skip the document, or repair "
         "it with utf8_replace_invalid() (what Python's errors=\"replace\" does)",
         bad, ctx.c_str(), text.size(), what);
}

void BytePairEncoder::encode(std::string_view text, std::vector<uint32_t>& out, const char* what) const {
#if !PRAC_HAVE_PCRE2
    (void)text, (void)out, (void)what;
    fail("byte-level BPE needs PCRE2 -> apt-get install libpcre2-dev");
#else
    if (text.empty()) return;
    require_utf8(text, what);
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
    const bool spelled = splits_otherwise_by_old_tables(s, n);
    pcre2_code* code = spelled ? splitter->code : splitter->plain;
    const bool jit = spelled ? splitter->jit : splitter->plain_jit;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.md);
    size_t off = 0;
    while (off < n) {
        // The whole text was validated above; PCRE2's own check would re-validate the rest of the subject on
        // every call, which makes splitting O(n^2).
        int rc = jit ? pcre2_jit_match(code, s, n, off, 0, ts.md, ts.mctx)
                     : pcre2_match(code, s, n, off, PCRE2_NO_UTF_CHECK, ts.md, ts.mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;  // cannot happen: the pattern matches every character
        if (rc < 0)
            fail("pre-tokenization failed at byte %zu of a %zu-byte text: %s\n"
                 "---> HINT: split the text into smaller documents",
                 off, n, pcre2_message(rc).c_str());
        size_t b = ov[0], e = ov[1];
        off = e > b ? e : b + 1;  // (no empty matches are possible; guard anyway)
        if (e <= b) continue;
        std::string_view piece(text.data() + b, e - b);

        int64_t whole = single_token(piece);
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
        merge_piece(*this, piece, ts);
        out.insert(out.end(), ts.ids.begin(), ts.ids.end());
        if (options.piece_cache && piece.size() <= PieceCache::MAX_KEY)
            ts.cache.insert(piece, h, ts.ids.data(), ts.ids.size());
        if (ts.ids.capacity() > (1u << 20)) std::vector<uint32_t>().swap(ts.ids);  // after a huge piece
    }
#endif
}

void for_each_document(size_t count, int threads, const std::function<void(size_t)>& work_on) {
    if (threads <= 0) threads = (int)std::max(1u, std::thread::hardware_concurrency());
    threads = (int)std::min<size_t>((size_t)threads, count);
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    std::mutex err_mu;
    std::exception_ptr err;
    size_t err_doc = 0;
    // Documents are handed out one at a time, so long and short ones balance across threads.
    auto work = [&] {
        while (!stop.load(std::memory_order_relaxed)) {
            size_t i = next.fetch_add(1);
            if (i >= count) break;
            try {
                work_on(i);
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
            fail("document %zu of %zu: %s", err_doc, count, e.what());
        }
    }
}

std::vector<std::vector<uint32_t>> BytePairEncoder::encode_batch(const std::vector<std::string>& docs, int threads,
                                                                 const char* what) const {
    std::vector<std::vector<uint32_t>> out(docs.size());
    for_each_document(docs.size(), threads, [&](size_t i) {
        out[i].reserve(docs[i].size() / 3 + 16);
        encode(docs[i], out[i], what);
    });
    return out;
}

// ---- decoding ----

std::string BytePairEncoder::decode(const uint32_t* ids, size_t n, const char* what) const {
    std::string s;
    s.reserve(n * 4);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= (uint32_t)vocab_size())
            fail("cannot decode token id %u at position %zu: %s's ids are 0..%d\n"
                 "---> HINT: these ids come from another tokenizer (or a model with a padded vocabulary)",
                 ids[i], i, what, vocab_size() - 1);
        s.append(arena, offsets[ids[i]], offsets[ids[i] + 1] - offsets[ids[i]]);
    }
    return s;
}

// ---- UTF-8 and the byte <-> character map of vocab.json ----

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

// sv with each maximal invalid subpart (its first byte and length) replaced by what invalid(out, bytes, n) appends
template <class Invalid>
static std::string utf8_rewrite_invalid(std::string_view sv, Invalid invalid) {
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
            invalid(out, s + i, sub);
            i += sub;
        }
    }
    return out;
}

std::string utf8_replace_invalid(std::string_view sv) {
    return utf8_rewrite_invalid(sv, [](std::string& out, const uint8_t*, size_t) { out += "\xEF\xBF\xBD"; });  // U+FFFD
}

std::string utf8_escape_invalid(std::string_view sv) {
    return utf8_rewrite_invalid(sv, [](std::string& out, const uint8_t* bytes, size_t n) {
        for (size_t k = 0; k < n; k++) out += format("\\x%02x", (unsigned)bytes[k]);
    });
}

std::string printable_text(std::string_view sv) {
    const auto* s = (const uint8_t*)sv.data();
    const size_t n = sv.size();
    std::string out;
    for (size_t i = 0; i < n;) {
        size_t sub = 0, len = utf8_seq(s, n, i, &sub);
        const bool control = len == 1 ? (s[i] < 0x20 && s[i] != '\t') || s[i] == 0x7F
                                      : len == 2 && s[i] == 0xC2 && s[i + 1] <= 0x9F;  // U+0080..U+009F
        const size_t step = len ? len : sub;
        if (len && !control)
            out.append(sv.data() + i, len);
        else
            for (size_t k = 0; k < step; k++) out += format("\\x%02x", (unsigned)s[i + k]);
        i += step;
    }
    return out;
}

namespace {

bool gpt2_printable(int c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255); }

}  // namespace

std::string gpt2_byte_to_unicode(unsigned char b) {
    int cp = b;
    if (!gpt2_printable(b)) {
        int n = 0;
        for (int c = 0; c < b; c++) n += !gpt2_printable(c);
        cp = 256 + n;
    }
    std::string s;
    if (cp < 0x80) s += (char)cp;
    else s += (char)(0xC0 | (cp >> 6)), s += (char)(0x80 | (cp & 0x3F));
    return s;
}

bool gpt2_unicode_to_bytes(std::string_view s, std::string& bytes) {
    static const auto byte_of = [] {  // code point (< 0x144) -> byte + 1; 0 = not in the map
        std::vector<int> t(0x200, 0);
        for (int b = 0; b < 256; b++) {
            std::string u = gpt2_byte_to_unicode((unsigned char)b);
            int cp = u.size() == 1 ? (uint8_t)u[0] : ((uint8_t)u[0] & 0x1F) << 6 | ((uint8_t)u[1] & 0x3F);
            t[(size_t)cp] = b + 1;
        }
        return t;
    }();
    bytes.clear();
    for (size_t i = 0; i < s.size();) {
        uint8_t c = (uint8_t)s[i];
        int cp;
        if (c < 0x80) {
            cp = c, i += 1;
        } else if (c >= 0xC2 && c <= 0xDF && i + 1 < s.size() && ((uint8_t)s[i + 1] & 0xC0) == 0x80) {
            cp = (c & 0x1F) << 6 | ((uint8_t)s[i + 1] & 0x3F), i += 2;
        } else {
            return false;  // 3- and 4-byte characters are all outside the map
        }
        if (cp >= (int)byte_of.size() || !byte_of[(size_t)cp]) return false;
        bytes += (char)(byte_of[(size_t)cp] - 1);
    }
    return true;
}
