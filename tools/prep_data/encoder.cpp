// prep_data's workers (Encoder::process, run by the Pipeline's worker threads): record -> text (the JSON
// line's field, UTF-8 repaired, --owt-clean) -> ids -> laid-out tokens (flat stream or rows) in its batch.
#include <algorithm>
#include <cstring>  // strchr
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/tokenizer.h"
#include "tools/prep_data/prep_data.h"

using json = nlohmann::json;

namespace prep {
namespace {

// Python's str.isspace() code points that are not ASCII, as UTF-8 (what str.strip() removes besides ASCII).
size_t unicode_space_len(const char* p, size_t n) {
    auto u = (const unsigned char*)p;
    if (n >= 2 && u[0] == 0xC2 && (u[1] == 0x85 || u[1] == 0xA0)) return 2;
    if (n >= 3 && u[0] == 0xE1 && u[1] == 0x9A && u[2] == 0x80) return 3;  // U+1680
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x80 &&
        ((u[2] >= 0x80 && u[2] <= 0x8A) || u[2] == 0xA8 || u[2] == 0xA9 || u[2] == 0xAF))
        return 3;  // U+2000..200A, U+2028, U+2029, U+202F
    if (n >= 3 && u[0] == 0xE2 && u[1] == 0x81 && u[2] == 0x9F) return 3;  // U+205F
    if (n >= 3 && u[0] == 0xE3 && u[1] == 0x80 && u[2] == 0x80) return 3;  // U+3000
    return 0;
}
bool ascii_space(unsigned char c) { return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F); }

// Hugging Face's openwebtext loader: text mode newlines, re.sub("\n\n\n+", "\n\n", text).strip().
std::string owt_clean(std::string_view s) {
    std::string t;
    t.reserve(s.size());
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] == '\r') {
            t += '\n';
            if (i + 1 < s.size() && s[i + 1] == '\n') i++;
        } else {
            t += s[i];
        }
    }
    std::string c;
    c.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
        if (t[i] != '\n') {
            c += t[i++];
            continue;
        }
        size_t j = i;
        while (j < t.size() && t[j] == '\n') j++;
        c.append(j - i >= 3 ? 2 : j - i, '\n');
        i = j;
    }
    // strip(): leading, then trailing whitespace.
    size_t b = 0;
    while (b < c.size()) {
        if (ascii_space((unsigned char)c[b])) b++;
        else if (size_t k = unicode_space_len(c.data() + b, c.size() - b)) b += k;
        else break;
    }
    size_t e = c.size();
    while (e > b) {
        if (ascii_space((unsigned char)c[e - 1])) {
            e--;
            continue;
        }
        bool cut = false;
        for (size_t k = 2; k <= 3 && e - b >= k; k++) {
            if (unicode_space_len(c.data() + e - k, k) == k) {
                e -= k;
                cut = true;
                break;
            }
        }
        if (!cut) break;
    }
    return c.substr(b, e - b);
}


// A JSON line whose text holds a lone UTF-16 surrogate escape ("\ud800" without its pair: web corpora hold them)
// with each such escape made U+FFFD, as tiktoken encodes a Python string holding one. The JSON parser refuses them.
std::string replace_lone_surrogates(std::string_view line) {
    auto unit_at = [&](size_t i) -> int {  // the code unit of a "\uXXXX" escape at i, or -1
        if (i + 6 > line.size() || line[i] != '\\' || line[i + 1] != 'u') return -1;
        int u = 0;
        for (size_t k = i + 2; k < i + 6; k++) {
            const char c = line[k], lower = (char)(c | 0x20);
            const int d = c >= '0' && c <= '9' ? c - '0' : lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
            if (d < 0) return -1;
            u = u * 16 + d;
        }
        return u;
    };
    std::string out;
    for (size_t i = 0; i < line.size();) {
        if (line[i] != '\\' || i + 1 >= line.size()) {
            out += line[i++];
            continue;
        }
        int u = unit_at(i);
        if (u >= 0xD800 && u <= 0xDBFF && unit_at(i + 6) >= 0xDC00 && unit_at(i + 6) <= 0xDFFF) {
            out.append(line.substr(i, 12));  // a pair
            i += 12;
        } else if (u >= 0xD800 && u <= 0xDFFF) {
            out += "\\ufffd";
            i += 6;
        } else {
            out.append(line.substr(i, 2));  // any other escape ("\\" too: its second backslash is not an escape)
            i += 2;
        }
    }
    return out;
}

}  // namespace

std::string Encoder::json_text(const Record& r, std::string* text, bool* repaired) const {
    // invalid UTF-8 (a Latin-1 byte in a web corpus) as in text files: each bad sequence U+FFFD, as Python's
    // line.decode("utf-8", "replace") before json.loads (the parser refuses such bytes; the document was lost)
    *repaired = utf8_first_invalid(r.data) != std::string::npos;
    const std::string fixed = *repaired ? utf8_replace_invalid(r.data) : std::string();
    const std::string& line = *repaired ? fixed : r.data;
    json j;
    try {
        try {
            j = json::parse(line);
        } catch (const json::parse_error& e) {
            if (std::string(e.what()).find("surrogate") == std::string::npos) throw;
            j = json::parse(replace_lone_surrogates(line));
        }
    } catch (const json::parse_error& e) {
        std::string m = e.what();
        size_t k = m.find("] ");
        return format("invalid JSON: %s", k == std::string::npos ? m.c_str() : m.c_str() + k + 2);
    }
    if (!j.is_object())
        return format("not a JSON object (%s %s)", std::strchr("aeiou", j.type_name()[0]) ? "an" : "a", j.type_name());
    auto it = j.find(o.text_field);
    if (it == j.end()) {
        std::string keys;
        for (auto& [k, v] : j.items()) keys += (keys.empty() ? "\"" : ", \"") + k + "\"";
        return format("no \"%s\" field (its fields: %s)", o.text_field.c_str(),
                      keys.empty() ? "none" : keys.c_str());
    }
    if (!it->is_string()) return format("the \"%s\" field is a %s, not a string", o.text_field.c_str(),
                                        it->type_name());
    *text = it->get<std::string>();
    return "";
}

void Encoder::process(Batch& b) const {
    b.off.assign(1, 0);
    b.flags.clear();
    b.pads.clear();
    std::vector<uint32_t> ids;
    std::string text, fixed;
    for (const Record& r : b.recs) {
        try {
            process_record(b, r, ids, text, fixed);
        } catch (const std::exception& e) {
            b.error = format("%s%s: %s", r.where->c_str(),
                             r.line ? format(":%lld", (long long)r.line).c_str() : "", e.what());
        }
        if (!b.error.empty()) return;
        b.pads.resize(b.flags.size(), 0);  // no pads: the records that are not rows (skipped, flat, texts)
    }
}

void Encoder::process_record(Batch& b, const Record& r, std::vector<uint32_t>& ids, std::string& text,
                             std::string& fixed) const {
    {
        uint8_t fl = 0;
        std::string_view view;
        if (r.json) {
            bool repaired = false;
            std::string err = json_text(r, &text, &repaired);
            if (repaired) fl |= F_REPAIRED;
            if (!err.empty()) {
                if (!o.skip_bad_json) {
                    b.error = format("%s:%lld: %s\n---> HINT: %s", r.where->c_str(), (long long)r.line,
                                     err.c_str(),
                                     err.rfind("no \"", 0) == 0
                                         ? "name the text's field with --text-field NAME, or skip such lines "
                                           "with --skip-bad-json"
                                         : "the file is damaged, or not JSON lines; --skip-bad-json skips "
                                           "such lines (added to a --resume of this run too)");
                    return;
                }
                b.flags.push_back(F_BAD_JSON);
                b.off.push_back(b.tokens.size());
                if (collect_text) b.texts.emplace_back();
                return;
            }
            view = text;
        } else {
            view = r.data;
            if (utf8_first_invalid(view) != std::string::npos) {
                fixed = utf8_replace_invalid(view);
                view = fixed;
                fl |= F_REPAIRED;
            }
        }
        std::string cleaned;
        if (o.owt_clean) {
            cleaned = owt_clean(view);
            view = cleaned;
        }
        if (view.empty()) {
            b.flags.push_back(fl | F_EMPTY);
            b.off.push_back(b.tokens.size());
            if (collect_text) b.texts.emplace_back();
            return;
        }
        if (collect_text) {
            b.texts.emplace_back(view);
            b.flags.push_back(fl);
            b.off.push_back(b.tokens.size());
            return;
        }
        ids.clear();
        tok.encode(view, ids);
        if (lay.rows) {
            size_t keep = std::min(ids.size(), (size_t)lay.row_len - 1);
            if (ids.size() > keep) fl |= F_TRUNCATED;
            for (size_t i = 0; i < keep; i++) b.tokens.push_back((uint16_t)ids[i]);
            b.tokens.push_back((uint16_t)lay.eos);
            const size_t pads = (size_t)lay.row_len - 1 - keep;
            b.tokens.insert(b.tokens.end(), pads, (uint16_t)lay.pad);
            b.pads.push_back((uint32_t)pads);  // (the pads may equal EOS or an id of the text: counted, not looked for)
        } else {
            if (lay.eos_before) b.tokens.push_back((uint16_t)lay.eos);
            for (uint32_t id : ids) b.tokens.push_back((uint16_t)id);
            if (!lay.eos_before) b.tokens.push_back((uint16_t)lay.eos);
        }
        b.flags.push_back(fl);
        b.off.push_back(b.tokens.size());
    }
}

}  // namespace prep
