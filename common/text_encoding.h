// Whether a file's first bytes are UTF-16 or UTF-32 rather than UTF-8 (prep_data's text and JSON lines, the GLUE
// files): read as UTF-8 such a file is NUL-separated characters, one document or a header cut at a NUL.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>

// What `head` (a file's first bytes; 4 KiB are looked at) is when it is not UTF-8: {"UTF-16" or "UTF-32", why},
// or {"", ""}. A byte order mark says it; without one, Latin-script UTF-16 has a NUL in the same byte of most of
// its 2-byte units and none in the other, UTF-32 in the same two bytes of its 4-byte units. UTF-8 text with NULs
// elsewhere (a dump's field separators) is text, as tiktoken reads it; a run of NULs (a padded record) is no UTF-32.
struct TextEncoding {
    const char* name;
    const char* why;
};
inline TextEncoding utf16_or_32(const std::string& head) {
    auto starts = [&](const char* bom, size_t n) { return head.size() >= n && head.compare(0, n, bom, n) == 0; };
    if (starts("\xff\xfe\0\0", 4) || starts("\0\0\xfe\xff", 4)) return {"UTF-32", "its byte order mark"};
    if (starts("\xff\xfe", 2) || starts("\xfe\xff", 2)) return {"UTF-16", "its byte order mark"};
    const size_t probe = std::min<size_t>(head.size(), 4096), units2 = probe / 2, units4 = probe / 4;
    size_t nuls_at[4] = {};  // NULs by their offset mod 4
    for (size_t i = 0; i < probe; i++) nuls_at[i % 4] += head[i] == '\0';
    const size_t even = nuls_at[0] + nuls_at[2], odd = nuls_at[1] + nuls_at[3];
    const bool utf32 = units4 >= 2 && ((10 * std::min(nuls_at[2], nuls_at[3]) >= 9 * units4 &&
                                        2 * nuls_at[0] <= units4) ||  // little-endian
                                       (10 * std::min(nuls_at[0], nuls_at[1]) >= 9 * units4 &&
                                        2 * nuls_at[3] <= units4));  // big-endian
    if (utf32) return {"UTF-32", "NUL bytes between its characters"};
    if (units2 >= 4 && 2 * std::max(even, odd) >= units2 && 8 * std::min(even, odd) <= units2)
        return {"UTF-16", "NUL bytes between its characters"};
    return {"", ""};
}
