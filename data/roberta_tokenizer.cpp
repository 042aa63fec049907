// RoBERTa's tokenizer over Hugging Face's files. See roberta_tokenizer.h for the contract.
#include "data/roberta_tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/error.h"
#include "common/files.h"

namespace {

const char* const WHAT = "RoBERTa encodes Unicode text, as transformers' RobertaTokenizer does (it takes a Python str)";
const char* const SPECIAL_NAMES[] = {"<s>", "</s>", "<pad>", "<unk>", "<mask>"};

bool is_file(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rust's char::is_whitespace (Unicode White_Space), which the tokenizers' lstrip / rstrip use.
bool is_unicode_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Decodes the (valid) UTF-8 character starting at s[i]; *len its byte count.
uint32_t utf8_at(std::string_view s, size_t i, size_t* len) {
    uint8_t c = (uint8_t)s[i];
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n && i + k < s.size(); k++) cp = cp << 6 | ((uint8_t)s[i + k] & 0x3F);
    *len = n;
    return cp;
}

// Where the whitespace run that ends at `end` starts (lstrip), and where the one that starts at `begin` ends (rstrip).
size_t space_run_start(std::string_view s, size_t floor, size_t end) {
    while (end > floor) {
        size_t i = end - 1;
        while (i > floor && ((uint8_t)s[i] & 0xC0) == 0x80) i--;  // back to the character's first byte
        size_t len;
        if (!is_unicode_space(utf8_at(s, i, &len))) break;
        end = i;
    }
    return end;
}
size_t space_run_end(std::string_view s, size_t begin) {
    size_t len;
    while (begin < s.size() && is_unicode_space(utf8_at(s, begin, &len))) begin += len;
    return begin;
}

// vocab.json's string of a token (GPT-2's byte -> character map) back to bytes, or fail naming it.
std::string vocab_bytes(const std::string& s, const std::string& where) {
    std::string bytes;
    if (!gpt2_unicode_to_bytes(s, bytes))
        fail("%s: \"%s\" has a character outside GPT-2's byte alphabet (256 characters stand for the bytes)\n"
             "---> HINT: this is not a byte-level BPE vocabulary (RoBERTa, GPT-2); a BERT WordPiece vocab.txt or a "
             "SentencePiece model is another tokenizer",
             where.c_str(), s.c_str());
    return bytes;
}

const nlohmann::json* field(const nlohmann::json& j, const char* key) {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
}

// o[key] as a string / bool, `fallback` when absent or null, or fail naming where and what it is (nlohmann's
// .value() threw a type_error that ended the run as an internal error naming no file)
std::string string_field(const nlohmann::json& o, const char* key, const std::string& where, const char* fallback) {
    const nlohmann::json* v = field(o, key);
    if (!v) return fallback;
    if (!v->is_string()) fail("%s.%s is %s, not a string", where.c_str(), key, v->dump().c_str());
    return v->get<std::string>();
}
bool bool_field(const nlohmann::json& o, const char* key, const std::string& where, bool fallback) {
    const nlohmann::json* v = field(o, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail("%s.%s is %s, not true or false", where.c_str(), key, v->dump().c_str());
    return v->get<bool>();
}

}  // namespace

// What a vocab.json + merges.txt or a tokenizer.json says, before the ids are checked and resolved.
struct RobertaFiles {
    std::string vocab_where, merges_where;            // "file" or "file: model.vocab" for errors
    nlohmann::json vocab;                             // string -> id
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<std::string> merge_where;             // "merges.txt:LINE" / "tokenizer.json: model.merges[K]"
    std::unordered_map<std::string, std::pair<bool, bool>> strip;  // special -> (lstrip, rstrip)
};

namespace {

nlohmann::json parse_json(const std::string& path, const char* what) {
    try {
        return nlohmann::json::parse(read_file_bytes(path));
    } catch (const nlohmann::json::exception& e) {
        fail("%s: not valid JSON (%s)\n---> HINT: is this the %s of a Hugging Face model?", path.c_str(), e.what(),
             what);
    }
}

void split_merge(const std::string& line, const std::string& where, RobertaFiles& f) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
        fail("%s: \"%s\" is not a merge (two tokens separated by one space)\n---> HINT: the file is damaged",
             where.c_str(), line.c_str());
    f.merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    f.merge_where.push_back(where);
}

RobertaFiles read_vocab_merges(const std::string& vocab_json, const std::string& merges_txt) {
    RobertaFiles f;
    f.vocab_where = vocab_json;
    f.merges_where = merges_txt;
    f.vocab = parse_json(vocab_json, "vocab.json");
    std::string text = read_file_bytes(merges_txt);
    size_t pos = 0, lineno = 0;
    while (pos < text.size()) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        lineno++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        // The tokenizers library skips its "#version" header; an empty line (the end of the file) is no merge.
        if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
        split_merge(line, merges_txt + ":" + std::to_string(lineno), f);
    }
    return f;
}

RobertaFiles read_tokenizer_json(const std::string& path) {
    RobertaFiles f;
    nlohmann::json j = parse_json(path, "tokenizer.json");
    const char* hint = "---> HINT: RobertaTokenizer reads RoBERTa's own tokenizer.json (byte-level BPE); pass the "
                       "directory's vocab.json and merges.txt instead if it has them";
    const nlohmann::json* model = j.is_object() ? field(j, "model") : nullptr;
    if (!model || !model->is_object()) fail("%s: no \"model\" object: not a Hugging Face tokenizer.json\n%s", path.c_str(), hint);
    std::string type = string_field(*model, "type", path + ": model", "");
    if (type != "BPE")
        fail("%s: the model is \"%s\", not BPE: this is not RoBERTa's tokenizer\n%s", path.c_str(), type.c_str(), hint);
    // BPE options that change the ids: they must be what RoBERTa's (and GPT-2's) file has.
    auto refuse = [&](const char* key, const std::string& have, const char* want) {
        fail("%s: model.%s is %s; RoBERTa's byte-level BPE has %s, and this tokenizer implements only that\n%s",
             path.c_str(), key, have.c_str(), want, hint);
    };
    if (const nlohmann::json* d = field(*model, "dropout")) refuse("dropout", d->dump(), "null");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (const nlohmann::json* v = field(*model, key); v && *v != "") refuse(key, v->dump(), "\"\"");
    for (const char* key : {"byte_fallback", "ignore_merges"})
        if (const nlohmann::json* v = field(*model, key); v && *v != false) refuse(key, v->dump(), "false");
    if (const nlohmann::json* n = field(j, "normalizer"))
        fail("%s: a normalizer (%s); RoBERTa's tokenizer has none, and this one implements only that\n%s",
             path.c_str(), n->dump().c_str(), hint);
    const nlohmann::json* pre = field(j, "pre_tokenizer");
    const std::string pre_where = path + ": pre_tokenizer";
    if (pre && !pre->is_object()) fail("%s is %s, not an object\n%s", pre_where.c_str(), pre->dump().c_str(), hint);
    if (!pre || string_field(*pre, "type", pre_where, "") != "ByteLevel" ||
        bool_field(*pre, "add_prefix_space", pre_where, false) || !bool_field(*pre, "use_regex", pre_where, true))
        fail("%s: the pre-tokenizer is %s; RoBERTa's is ByteLevel without a prefix space, with GPT-2's regex\n%s",
             path.c_str(), pre ? pre->dump().c_str() : "none", hint);
    const nlohmann::json* post = field(j, "post_processor");
    std::string post_type;
    if (post) {
        if (!post->is_object())
            fail("%s: post_processor is %s, not an object\n%s", path.c_str(), post->dump().c_str(), hint);
        post_type = string_field(*post, "type", path + ": post_processor", "");
        if (post_type != "RobertaProcessing" && post_type != "ByteLevel")
            fail("%s: the post-processor is \"%s\"; this tokenizer lays inputs out as RobertaProcessing does\n%s",
                 path.c_str(), post_type.c_str(), hint);
    }
    f.vocab_where = path + ": model.vocab";
    f.merges_where = path + ": model.merges";
    const nlohmann::json* vocab = field(*model, "vocab");
    if (!vocab || !vocab->is_object()) fail("%s: model.vocab is not an object (string -> id)\n%s", path.c_str(), hint);
    f.vocab = *vocab;
    // The ids the file gives its special tokens elsewhere (the post-processor's cls and sep, added_tokens) are the
    // ones transformers uses: they must be the vocab's, which this tokenizer uses (an <s> given id 5 trained with 0)
    auto check_id = [&](const std::string& token, const nlohmann::json& id, const std::string& where) {
        auto it = vocab->find(token);
        if (!id.is_number_integer() || it == vocab->end() || *it != id)
            fail("%s: %s has id %s, but model.vocab gives it %s: transformers would use the former, this tokenizer "
                 "the latter\n---> HINT: the file is damaged or edited; RoBERTa's own tokenizer.json agrees with "
                 "itself", where.c_str(), token.c_str(), id.dump().c_str(),
                 it == vocab->end() ? "none" : it->dump().c_str());
    };
    if (post_type == "RobertaProcessing") {
        for (auto [key, token] : {std::pair<const char*, const char*>{"cls", "<s>"}, {"sep", "</s>"}}) {
            const std::string where = path + ": post_processor." + key;
            const nlohmann::json* pair = field(*post, key);
            if (!pair) continue;  // (transformers' defaults: <s> and </s> with the vocab's ids)
            if (!pair->is_array() || pair->size() != 2 || (*pair)[0] != token)
                fail("%s is %s; this tokenizer lays inputs out with [\"%s\", its id]\n%s", where.c_str(),
                     pair->dump().c_str(), token, hint);
            check_id(token, (*pair)[1], where);
        }
    }
    const nlohmann::json* merges = field(*model, "merges");
    if (!merges || !merges->is_array()) fail("%s: model.merges is not a list\n%s", path.c_str(), hint);
    for (size_t k = 0; k < merges->size(); k++) {
        const nlohmann::json& m = (*merges)[k];
        std::string where = f.merges_where + "[" + std::to_string(k) + "]";
        if (m.is_string()) {  // "a b" (tokenizers < 0.20) or ["a", "b"] (newer)
            split_merge(m.get<std::string>(), where, f);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            f.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
            f.merge_where.push_back(where);
        } else {
            fail("%s: %s is not a merge (\"a b\" or [\"a\", \"b\"])", where.c_str(), m.dump().c_str());
        }
    }
    if (const nlohmann::json* added = field(j, "added_tokens")) {
        if (!added->is_array()) fail("%s: added_tokens is %s, not a list\n%s", path.c_str(), added->dump().c_str(), hint);
        for (size_t k = 0; k < added->size(); k++) {
            const nlohmann::json& a = (*added)[k];
            const std::string where = path + ": added_tokens[" + std::to_string(k) + "]";
            if (!a.is_object()) fail("%s is %s, not an object\n%s", where.c_str(), a.dump().c_str(), hint);
            std::string content = string_field(a, "content", where, "");
            bool known = std::find(std::begin(SPECIAL_NAMES), std::end(SPECIAL_NAMES), content) != std::end(SPECIAL_NAMES);
            if (!known || bool_field(a, "single_word", where, false))
                fail("%s: added token %s: this tokenizer knows RoBERTa's five special tokens (<s> </s> <pad> <unk> "
                     "<mask>, not single_word) and no others\n%s", path.c_str(), a.dump().c_str(), hint);
            if (const nlohmann::json* id = field(a, "id")) check_id(content, *id, where);
            f.strip[content] = {bool_field(a, "lstrip", where, false), bool_field(a, "rstrip", where, false)};
        }
    }
    return f;
}

}  // namespace

RobertaTokenizer::RobertaTokenizer(const std::string& path, const BpeOptions& options) {
    RobertaFiles f;
    if (ends_with(path, ".json")) {
        f = read_tokenizer_json(path);
    } else if (is_file(path + "/tokenizer.json")) {
        f = read_tokenizer_json(path + "/tokenizer.json");
    } else if (is_file(path + "/vocab.json") && is_file(path + "/merges.txt")) {
        f = read_vocab_merges(path + "/vocab.json", path + "/merges.txt");
    } else {
        fail("%s has neither tokenizer.json nor vocab.json + merges.txt\n"
             "---> HINT: pass a Hugging Face RoBERTa model directory (roberta-base has all three files)", path.c_str());
    }
    source_ = path;
    load(f, options);
}

RobertaTokenizer::RobertaTokenizer(const std::string& vocab_json, const std::string& merges_txt,
                                   const BpeOptions& options) {
    source_ = vocab_json;
    load(read_vocab_merges(vocab_json, merges_txt), options);
}

RobertaTokenizer::~RobertaTokenizer() = default;

void RobertaTokenizer::load(const RobertaFiles& f, const BpeOptions& options) {
    const char* where = f.vocab_where.c_str();
    if (!f.vocab.is_object() || f.vocab.empty())
        fail("%s: not a JSON object of token -> id\n---> HINT: is this RoBERTa's vocab.json?", where);
    const size_t n = f.vocab.size();
    std::vector<std::string> tokens(n);
    std::vector<bool> seen(n, false), special(n, false);
    for (auto it = f.vocab.begin(); it != f.vocab.end(); ++it) {
        if (!it.value().is_number_integer())
            fail("%s: the id of \"%s\" is %s, not an integer", where, it.key().c_str(), it.value().dump().c_str());
        int64_t id = it.value().get<int64_t>();
        if (id < 0 || id >= (int64_t)n)
            fail("%s: \"%s\" has id %lld; %zu tokens need the ids 0..%zu, each once\n---> HINT: the file is damaged",
                 where, it.key().c_str(), (long long)id, n, n - 1);
        if (seen[(size_t)id]) fail("%s: id %lld appears twice (\"%s\")", where, (long long)id, it.key().c_str());
        seen[(size_t)id] = true;
        ids_[it.key()] = (uint32_t)id;
    }
    // Special tokens: their text is the text of their string, and the BPE never makes them.
    uint32_t* slot[] = {&cls_id, &sep_id, &pad_id, &unk_id, &mask_id};
    for (size_t k = 0; k < 5; k++) {
        auto it = ids_.find(SPECIAL_NAMES[k]);
        if (it == ids_.end())
            fail("%s: no \"%s\": RoBERTa's vocabulary has <s> </s> <pad> <unk> <mask>\n"
                 "---> HINT: is this RoBERTa's vocab.json (GPT-2's has <|endoftext|> instead)?", where, SPECIAL_NAMES[k]);
        *slot[k] = it->second;
        special[it->second] = true;
        tokens[it->second] = SPECIAL_NAMES[k];
        auto fl = f.strip.find(SPECIAL_NAMES[k]);
        specials_.push_back({SPECIAL_NAMES[k], it->second, fl != f.strip.end() && fl->second.first,
                             fl != f.strip.end() && fl->second.second});
    }
    for (const auto& [text, id] : ids_)
        if (!special[id]) tokens[id] = vocab_bytes(text, f.vocab_where + ": token " + std::to_string(id));
    // Merges: both halves and their concatenation must be tokens (as the tokenizers library requires).
    std::vector<BpeMerge> merges;
    merges.reserve(f.merges.size());
    std::unordered_map<uint64_t, size_t> first_merge_of;  // (left, right) -> k: a repeat is named by file and line
    for (size_t k = 0; k < f.merges.size(); k++) {
        const std::string &a = f.merges[k].first, &b = f.merges[k].second;  // not a structured binding: captured below
        auto find = [&](const std::string& s, const char* which) {
            auto it = ids_.find(s);
            if (it == ids_.end())
                fail("%s: the merge \"%s %s\": %s \"%s\" is not in %s\n---> HINT: vocab.json and merges.txt must come "
                     "from the same model", f.merge_where[k].c_str(), a.c_str(), b.c_str(), which, s.c_str(), where);
            return it->second;
        };
        merges.push_back({find(a, "the left token"), find(b, "the right token"), find(a + b, "their merge")});
        auto [first, fresh] = first_merge_of.emplace((uint64_t)merges.back().left << 32 | merges.back().right, k);
        if (!fresh)
            fail("%s: the merge \"%s %s\" repeats %s\n---> HINT: the file is damaged", f.merge_where[k].c_str(),
                 a.c_str(), b.c_str(), f.merge_where[first->second].c_str());
    }
    std::vector<std::string> strings(n);  // for errors: the vocabulary's own spelling
    for (const auto& [text, id] : ids_) strings[id] = text;
    // A byte-level BPE makes each token of more than one byte by a merge: a merges list that makes few of them
    // (empty, cut short, another model's) would encode text in other, shorter tokens, silently. roberta-base has 3
    // tokens no merge makes (madeupword0000-0002, added by fairseq's dictionary), so a few are allowed.
    std::vector<bool> made(n, false);
    for (const BpeMerge& m : merges) made[m.merged] = true;
    size_t multi = 0;
    std::vector<uint32_t> unmade;
    for (uint32_t id = 0; id < n; id++) {
        if (special[id] || tokens[id].size() < 2) continue;
        multi++;
        if (!made[id]) unmade.push_back(id);
    }
    if (unmade.size() > std::max<size_t>(16, multi / 100)) {
        std::string examples;
        for (size_t k = 0; k < unmade.size() && k < 3; k++)
            examples += (k ? ", \"" : "\"") + strings[unmade[k]] + "\"";
        fail("%s: %zu of the %zu tokens of more than one byte in %s are made by no merge (%s, ...): text would be "
             "encoded in shorter tokens than the model was trained on\n---> HINT: the merges are damaged or cut "
             "short, or come from another vocabulary: take vocab.json and merges.txt (or tokenizer.json) from the "
             "model's own directory", f.merges_where.c_str(), unmade.size(), multi, where, examples.c_str());
    }
    bpe_ = std::make_unique<BytePairEncoder>(BpeRanking::PAIR_RANK, std::move(tokens), std::move(special), merges,
                                             options, f.vocab_where, [&](uint32_t id) {
                                                 return format("id %u (\"%s\")", id, strings[id].c_str());
                                             });
}

// ---- encoding ----

int64_t RobertaTokenizer::id_of(const std::string& vocab_string) const {
    auto it = ids_.find(vocab_string);
    return it == ids_.end() ? -1 : (int64_t)it->second;
}

void RobertaTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const { bpe_->encode(text, out, WHAT); }

std::vector<uint32_t> RobertaTokenizer::encode(std::string_view text) const {
    std::vector<uint32_t> out;
    encode(text, out);
    return out;
}

std::vector<uint32_t> RobertaTokenizer::tokenize(std::string_view text) const {
    bpe_->require_utf8(text, WHAT);  // (the pieces are checked again; this error has the offset in the whole text)
    std::vector<uint32_t> out;
    size_t pos = 0;
    while (pos < text.size()) {
        // The leftmost special token, the longest of those that start there (the tokenizers' added-token split).
        size_t best = std::string_view::npos;
        const Special* sp = nullptr;
        for (const Special& s : specials_) {
            size_t at = text.find(s.text, pos);
            if (at < best || (at == best && at != std::string_view::npos && s.text.size() > sp->text.size()))
                best = at, sp = &s;
        }
        if (!sp) {
            bpe_->encode(text.substr(pos), out, WHAT);
            break;
        }
        size_t before = sp->lstrip ? space_run_start(text, pos, best) : best;
        bpe_->encode(text.substr(pos, before - pos), out, WHAT);
        out.push_back(sp->id);
        pos = best + sp->text.size();
        if (sp->rstrip) pos = space_run_end(text, pos);
    }
    return out;
}

std::vector<uint32_t> RobertaTokenizer::build_inputs(std::vector<uint32_t> a, const std::vector<uint32_t>* b,
                                                     int max_length) const {
    const int specials = b ? 4 : 2;
    if (max_length < 0 || (max_length > 0 && max_length < specials))
        fail("max_length %d cannot hold RoBERTa's %d special tokens (%s)\n---> HINT: use a max length of at least %d, "
             "or 0 for none (roberta-base: 512)", max_length, specials,
             b ? "<s> A </s></s> B </s>" : "<s> A </s>", specials);
    std::vector<uint32_t> bb = b ? *b : std::vector<uint32_t>{};
    if (max_length > 0) {
        const size_t t = (size_t)(max_length - specials);  // tokens left for the texts
        if (!b) {
            if (a.size() > t) a.resize(t);
        } else if (a.size() + bb.size() > t) {
            // longest_first, as the tokenizers library computes it (truncation.rs): the shorter text stays whole when
            // the longer still gets as much; else both get half, the odd token going to the longer (to b on a tie).
            size_t n1 = a.size(), n2 = bb.size();
            bool swap = n1 > n2;
            if (swap) std::swap(n1, n2);
            n2 = n1 > t ? n1 : std::max(n1, t - n1);
            if (n1 + n2 > t) n1 = t / 2, n2 = n1 + t % 2;
            if (swap) std::swap(n1, n2);
            a.resize(std::min(a.size(), n1));
            bb.resize(std::min(bb.size(), n2));
        }
    }
    std::vector<uint32_t> out;
    out.reserve(a.size() + bb.size() + (size_t)specials);
    out.push_back(cls_id);
    out.insert(out.end(), a.begin(), a.end());
    out.push_back(sep_id);
    if (b) {
        out.push_back(sep_id);
        out.insert(out.end(), bb.begin(), bb.end());
        out.push_back(sep_id);
    }
    return out;
}

std::vector<uint32_t> RobertaTokenizer::encode_single(std::string_view a, int max_length) const {
    return build_inputs(tokenize(a), nullptr, max_length);
}

std::vector<uint32_t> RobertaTokenizer::encode_pair(std::string_view a, std::string_view b, int max_length) const {
    std::vector<uint32_t> tb = tokenize(b);
    return build_inputs(tokenize(a), &tb, max_length);
}

std::string RobertaTokenizer::decode(const uint32_t* ids, size_t n) const { return bpe_->decode(ids, n, "RoBERTa"); }

// ---- batches ----

TokenBatch pad_rows(const std::vector<const std::vector<uint32_t>*>& rows, uint32_t pad_id, int T) {
    TokenBatch batch;
    batch.B = (int)rows.size();
    size_t longest = 0;
    for (const auto* r : rows) longest = std::max(longest, r->size());
    CHECK_USER(T >= 0, "pad_rows: T = %d", T);
    batch.T = T > 0 ? T : (int)longest;
    batch.ids.assign((size_t)batch.B * (size_t)batch.T, (int32_t)pad_id);
    batch.kv_len.resize((size_t)batch.B);
    for (int b = 0; b < batch.B; b++) {
        const std::vector<uint32_t>& r = *rows[(size_t)b];
        if (r.empty()) fail("pad_rows: row %d of %d is empty (every row needs at least one token)", b, batch.B);
        if (r.size() > (size_t)batch.T)
            fail("row %d has %zu tokens, more than T = %d\n---> HINT: truncate to the model's length (max_length) "
                 "when encoding, or pad to a larger T", b, r.size(), batch.T);
        std::copy(r.begin(), r.end(), batch.ids.begin() + (ptrdiff_t)((size_t)b * (size_t)batch.T));
        batch.kv_len[(size_t)b] = (int32_t)r.size();
    }
    return batch;
}
