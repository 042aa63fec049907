// Number flags as typed: C's strtod/strtof also read hexadecimal ("0x10", "0x0.1p0", a typo more likely than a
// setting; Python's float() refuses it) and skip white space before the number (" 5", a quoting slip). The programs'
// number flags take neither (train/cli.cpp, finetune's --warmup-ratio, prep_data, prac_analyze).
#pragma once
#include <cctype>
#include <string>

inline bool typed_as_decimal(const std::string& v) {
    return !v.empty() && !std::isspace((unsigned char)v[0]) && v.find_first_of("xX") == std::string::npos;
}
