// Small string helpers the programs share: "did you mean" distances, durations for ETAs, thousands separators.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
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

// 42s, 3m07s, 2h05m; "?" for a negative, non-finite or absurd (> 3 years) value.
inline std::string human_duration(double s) {
    if (!(s >= 0) || s > 1e8) return "?";
    long long t = (long long)std::llround(s);
    if (t < 60) return format("%llds", t);
    if (t < 3600) return format("%lldm%02llds", t / 60, t % 60);
    return format("%lldh%02lldm", t / 3600, (t / 60) % 60);
}

// 1234567 -> "1,234,567"
inline std::string with_commas(long long v) {
    std::string s = std::to_string(v < 0 ? -v : v), out;
    for (size_t i = 0; i < s.size(); i++) {
        if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
        out += s[i];
    }
    return v < 0 ? "-" + out : out;
}
