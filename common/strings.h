// Small string helpers the programs share: "did you mean" distances, durations for ETAs, thousands separators,
// lists joined for messages, command-line numbers and lists read strictly.
#pragma once
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"  // format

// Levenshtein distance (insertions, deletions, substitutions), for "did you mean --flag?" hints.
inline size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> d(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) d[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t prev = d[0];
        d[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            size_t cur = d[j];
            d[j] = std::min({d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1])});
            prev = cur;
        }
    }
    return d[b.size()];
}

// The name in `names` closest to `typed`, for "did you mean" hints: those that start with it (--batch means
// --batch-size, not --beta1 two edits away; "--eval-only or --eval-tokens" when 2 to 4 do, else the shortest),
// else the one fewest edits away (the first of a tie); "" when none is within max_edits.
inline std::string closest_name(const std::string& typed, const std::vector<std::string>& names,
                                size_t max_edits = (size_t)-1) {
    std::vector<std::string> starting;
    for (const std::string& n : names)
        if (n.compare(0, typed.size(), typed) == 0) starting.push_back(n);
    std::stable_sort(starting.begin(), starting.end(),
                     [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
    if (starting.size() > 4) starting.resize(1);
    std::string best;
    for (size_t i = 0; i < starting.size(); i++)
        best += (i == 0 ? "" : i + 1 == starting.size() ? " or " : ", ") + starting[i];
    if (!best.empty()) return best;
    size_t best_edits = max_edits;
    for (const std::string& n : names) {
        const size_t d = edit_distance(typed, n);
        if (d < best_edits || (best.empty() && d == best_edits)) best_edits = d, best = n;
    }
    return best;
}

// Bytes read from a file (a header, a parser's quote of them) made text for an error message: \n and \xNN for what
// is not printable ASCII (a raw byte made grep take the output for a binary file), cut after max_len bytes ("...").
inline std::string printable_bytes(const std::string& s, size_t max_len = 160) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < max_len; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '\n') out += "\\n";
        else if (c >= 32 && c < 127) out += (char)c;
        else out += format("\\x%02x", c);
    }
    if (s.size() > max_len) out += "...";
    return out;
}

// x for printf: a NaN without its sign bit, printed "nan" (glibc prints a NaN whose sign bit is set as "-nan", which
// means nothing more: a diverged step said "norm -nan")
inline double printable(double x) { return std::isnan(x) ? std::fabs(x) : x; }

// The shortest %g text (6 to 9 digits) that reads back as the same float: 0.95f is "0.95", 0.9999999f (which %g
// prints as "1", another value) "0.9999999", 1234567.0f "1234567".
inline std::string float_text(float v) {
    for (int digits = 6;; digits++) {
        std::string s = format("%.*g", digits, (double)v);
        if (digits == 9 || (float)std::strtod(s.c_str(), nullptr) == v) return s;
    }
}

// 42s, 3m07s, 2h05m; "?" for a negative, non-finite or absurd (> 3 years) value.
inline std::string human_duration(double s) {
    if (!(s >= 0) || s > 1e8) return "?";
    long long t = (long long)std::llround(s);
    if (t < 60) return format("%llds", t);
    if (t < 3600) return format("%lldm%02llds", t / 60, t % 60);
    return format("%lldh%02lldm", t / 3600, (t / 60) % 60);
}

// A run's clock: tenths of a second under a minute (a short run's evaluation is not rounded away: 45.2s), then
// human_duration's 3m07s.
inline std::string run_clock(double s) { return s >= 0 && s < 59.95 ? format("%.1fs", s) : human_duration(s); }

// 1234567 -> "1,234,567"
inline std::string with_commas(long long v) {
    std::string s = std::to_string(v < 0 ? -v : v), out;
    for (size_t i = 0; i < s.size(); i++) {
        if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
        out += s[i];
    }
    return v < 0 ? "-" + out : out;
}

// The items joined by sep, for messages: "a, b, c" (strings as they are, numbers through std::to_string).
template <class Items>
std::string join(const Items& items, const char* sep = ", ") {
    std::string out;
    bool first = true;
    for (const auto& item : items) {
        if (!first) out += sep;
        first = false;
        if constexpr (std::is_arithmetic_v<std::decay_t<decltype(item)>>) out += std::to_string(item);
        else out += item;
    }
    return out;
}

// The value of a numeric flag: all of v a whole number in [lo, hi] ("2048x", "x", " 5" and "+5" are refused, and
// "-1" is out of range, never wrapped), else a UserError naming the flag and the value.
inline long long parse_whole(const char* flag, const std::string& v, long long lo, long long hi) {
    size_t digits = !v.empty() && v[0] == '-' ? 1 : 0;
    bool whole = v.size() > digits && std::isdigit((unsigned char)v[digits]);
    char* end = nullptr;
    errno = 0;
    long long x = whole ? std::strtoll(v.c_str(), &end, 10) : 0;
    if (!whole || *end != '\0')
        fail("%s: '%s' is not a whole number\n---> HINT: give digits only, from %lld to %lld", flag, v.c_str(), lo,
             hi);
    if (errno == ERANGE || x < lo || x > hi)
        fail("%s: %s is out of range\n---> HINT: give a whole number from %lld to %lld", flag, v.c_str(), lo, hi);
    return x;
}

// v split at every sep, empty pieces kept ("" is one empty piece, "96," two): each is checked, none dropped
inline std::vector<std::string> split_at(const std::string& v, char sep) {
    std::vector<std::string> out(1);
    for (char c : v)
        if (c == sep) out.emplace_back();
        else out.back() += c;
    return out;
}
inline std::vector<std::string> split_commas(const std::string& v) { return split_at(v, ','); }

// s in ASCII lower case (names compared without case: file extensions, class labels)
inline std::string to_lower(std::string s) {
    for (char& c : s) c = (char)std::tolower((unsigned char)c);
    return s;
}
