#include "train/multiple_choice.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/files.h"
#include "data/byte_bpe.h"  // printable_text

namespace {

std::vector<int32_t> encoded(const Tokenizer& tok, const std::string& text) {
    std::vector<uint32_t> ids;
    tok.encode(text, ids);
    return std::vector<int32_t>(ids.begin(), ids.end());
}

// HellaSwag's JSON lines: {"ctx": "...", "endings": ["...", ...], "label": k, ...}, one example per line.
std::vector<ChoiceExample> read_jsonl(const std::string& path, const Tokenizer& tok, long long limit) {
    refuse_special_file(path, "--hellaswag");
    std::ifstream f(path);
    CHECK_USER(f, "--hellaswag %s: cannot read it: %s", path.c_str(), std::strerror(errno));
    std::vector<ChoiceExample> out;
    std::string line;
    for (long long n = 1; (limit == 0 || (long long)out.size() < limit) && std::getline(f, line); n++) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json j;
        try {
            j = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& e) {
            fail("--hellaswag %s: line %lld is no JSON object (%s)", path.c_str(), n, printable_text(e.what()).c_str());
        }
        CHECK_USER(j.is_object() && j.contains("ctx") && j["ctx"].is_string() && j.contains("endings") &&
                       j["endings"].is_array(),
                   "--hellaswag %s: line %lld lacks HellaSwag's fields (\"ctx\": text, \"endings\": a list of texts)",
                   path.c_str(), n);
        // (a Hugging Face datasets export writes the label as text: "3")
        const std::string text_label =
            j.contains("label") && j["label"].is_string() ? j["label"].get<std::string>() : "";
        if (!text_label.empty() && text_label.size() <= 3 &&
            text_label.find_first_not_of("0123456789") == std::string::npos)
            j["label"] = std::stoll(text_label);
        CHECK_USER(j.contains("label") && j["label"].is_number_integer(), "--hellaswag %s: line %lld has no \"label\" "
                   "(the right ending's index)%s", path.c_str(), n,
                   !j.contains("label") || (j["label"].is_string() && j["label"].get<std::string>().empty())
                       ? "\n---> HINT: HellaSwag's test split has no labels: use hellaswag_val.jsonl"
                       : format(": %s is no index", j["label"].dump().c_str()).c_str());
        ChoiceExample ex;
        ex.context = encoded(tok, j["ctx"].get<std::string>());
        for (const auto& e : j["endings"]) {
            CHECK_USER(e.is_string(), "--hellaswag %s: line %lld: an ending is no text", path.c_str(), n);
            ex.endings.push_back(encoded(tok, " " + e.get<std::string>()));  // (as llm.c: GPT-2's space before)
        }
        CHECK_USER(ex.endings.size() >= 2, "--hellaswag %s: line %lld has %zu ending(s): a choice needs 2 or more",
                   path.c_str(), n, ex.endings.size());
        const long long label = j["label"].get<long long>();
        CHECK_USER(label >= 0 && label < (long long)ex.endings.size(), "--hellaswag %s: line %lld: label %lld is no "
                   "index of its %zu endings", path.c_str(), n, label, ex.endings.size());
        ex.label = (int)label;
        out.push_back(std::move(ex));
    }
    CHECK_USER(!f.bad(), "--hellaswag %s: cannot read it", path.c_str());
    return out;
}

// llm.c's eval file: 256 int32 (magic 20240522, version 1, examples, the longest example's bytes), then per example
// uint16s: 65535, its bytes, its index, label, endings, the context's length and ids, each ending's length and ids.
std::vector<ChoiceExample> read_eval_file(const std::string& path, long long limit) {
    const std::string bytes = read_file_bytes(path);
    CHECK_USER(bytes.size() >= 1024, "--hellaswag %s: %zu bytes, shorter than an eval file's 1024-byte header\n"
               "---> HINT: pass HellaSwag's hellaswag_val.jsonl, or llm.c's hellaswag_val.bin", path.c_str(),
               bytes.size());
    int32_t header[256];
    std::memcpy(header, bytes.data(), sizeof(header));
    CHECK_USER(header[0] == EVAL_FILE_MAGIC && header[1] == 1, "--hellaswag %s: not llm.c's eval file (magic %d "
               "version %d, not %d version 1)\n---> HINT: HellaSwag's JSON lines need a name ending in .jsonl",
               path.c_str(), header[0], header[1], EVAL_FILE_MAGIC);
    const size_t words = (bytes.size() - 1024) / 2;
    CHECK_USER((bytes.size() - 1024) % 2 == 0, "--hellaswag %s: an odd number of bytes after the header: not uint16 "
               "ids (truncated?)", path.c_str());
    std::vector<uint16_t> w(words);
    std::memcpy(w.data(), bytes.data() + 1024, words * 2);
    std::vector<ChoiceExample> out;
    size_t at = 0;
    for (int32_t i = 0; i < header[2] && (limit == 0 || (long long)out.size() < limit); i++) {
        auto bad = [&](const char* what) {
            fail("--hellaswag %s: example %d of %d (uint16 %zu after the header): %s: the file is damaged or not "
                 "llm.c's eval format", path.c_str(), i, header[2], at, what);
        };
        if (at + 5 > words) bad("the file ends inside it");
        if (w[at] != 65535) bad("no start mark (65535)");
        const size_t start = at, n_words = w[at + 1] / 2;
        if (w[at + 1] % 2 || n_words < 6 || start + n_words > words) bad("its byte count does not fit the file");
        ChoiceExample ex;
        ex.label = w[at + 3];
        const int endings = w[at + 4];
        at += 5;
        auto ids = [&](std::vector<int32_t>& dst) {
            if (at >= start + n_words) bad("its lengths overrun its byte count");
            const size_t n = w[at++];
            if (at + n > start + n_words) bad("its lengths overrun its byte count");
            dst.assign(w.begin() + at, w.begin() + at + n);
            at += n;
        };
        ids(ex.context);
        ex.endings.resize(endings);
        for (auto& e : ex.endings) ids(e);
        if (at != start + n_words) bad("its byte count is not its fields'");
        if (w[start + 2] != (uint16_t)i) bad("its index is not its place in the file");
        if (endings < 2 || ex.label >= endings) bad("fewer than 2 endings, or a label past them");
        out.push_back(std::move(ex));
    }
    CHECK_USER(limit != 0 || at == words, "--hellaswag %s: %zu bytes after its %d examples (the header's count is "
               "wrong, or the file is damaged)", path.c_str(), (words - at) * 2, header[2]);
    return out;
}

}  // namespace

bool choice_file_is_text(const std::string& path) { return std::filesystem::path(path).extension() == ".jsonl"; }

std::vector<ChoiceExample> read_choice_examples(const std::string& path, const Tokenizer* tok, bool gpt2_ids,
                                                int seq_len, int vocab, long long limit) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    CHECK_USER(std::filesystem::exists(status), "--hellaswag %s: no such file\n---> HINT: pass HellaSwag's "
               "hellaswag_val.jsonl, or llm.c's hellaswag_val.bin", path.c_str());
    CHECK_USER(!std::filesystem::is_directory(status), "--hellaswag %s is a directory: it takes one file (HellaSwag's "
               "hellaswag_val.jsonl, or llm.c's hellaswag_val.bin)", path.c_str());
    const bool jsonl = choice_file_is_text(path);
    if (jsonl && !tok) fail("internal: --hellaswag %s needs a tokenizer", path.c_str());
    CHECK_USER(jsonl || gpt2_ids, "--hellaswag %s: llm.c's eval files hold GPT-2 ids, and this model reads other ids"
               "\n---> HINT: pass HellaSwag's hellaswag_val.jsonl: it is encoded with the model's tokenizer",
               path.c_str());
    std::vector<ChoiceExample> ex = jsonl ? read_jsonl(path, *tok, limit) : read_eval_file(path, limit);
    CHECK_USER(!ex.empty(), "--hellaswag %s: no example in it", path.c_str());
    for (size_t i = 0; i < ex.size(); i++) {
        const ChoiceExample& e = ex[i];
        // (a row's first ending token is predicted from the context's last position: an empty context has none)
        CHECK_USER(!e.context.empty(), "--hellaswag %s: example %zu has an empty context", path.c_str(), i);
        for (size_t k = 0; k < e.endings.size(); k++) {
            CHECK_USER(!e.endings[k].empty(), "--hellaswag %s: example %zu: ending %zu has no token", path.c_str(), i,
                       k);
            const size_t inputs = e.context.size() + e.endings[k].size() - 1;
            CHECK_USER(inputs <= (size_t)seq_len, "--hellaswag %s: example %zu, ending %zu, takes %zu positions (its "
                       "context and ending, less the last token), more than --seq-len %d\n---> HINT: a --seq-len of "
                       "%zu or more%s", path.c_str(), i, k, inputs, seq_len, inputs,
                       i ? format(", or the examples before it alone (--hellaswag-examples %zu)", i).c_str() : "");
            for (const std::vector<int32_t>* ids : {&e.context, &e.endings[k]})
                for (int32_t id : *ids)
                    CHECK_USER(id >= 0 && id < vocab, "--hellaswag %s: example %zu holds id %d, past the model's "
                               "vocabulary of %d", path.c_str(), i, id, vocab);
        }
    }
    return ex;
}

std::string choice_eval_file_bytes(const std::vector<ChoiceExample>& examples) {
    // (llm.c's limits: uint16 fields, 65535 the start mark)
    CHECK_USER(examples.size() < 65536, "llm.c's eval file holds at most 65535 examples (got %zu)", examples.size());
    std::vector<uint16_t> stream;
    int32_t header[256] = {EVAL_FILE_MAGIC, 1, (int32_t)examples.size(), 0};
    for (size_t i = 0; i < examples.size(); i++) {
        const ChoiceExample& e = examples[i];
        const size_t start = stream.size();
        stream.insert(stream.end(), {65535, 0, (uint16_t)i, (uint16_t)e.label, (uint16_t)e.endings.size()});
        auto put = [&](const std::vector<int32_t>& ids) {  // the length, then the ids
            stream.push_back((uint16_t)ids.size());
            for (int32_t id : ids) {
                CHECK_USER(id >= 0 && id < 65535, "example %zu: id %d is no uint16 below 65535", i, id);
                stream.push_back((uint16_t)id);
            }
        };
        put(e.context);
        for (const auto& end : e.endings) put(end);
        CHECK_USER(2 * (stream.size() - start) < 65536, "example %zu takes %zu bytes, more than llm.c's eval file "
                   "holds (65535)", i, 2 * (stream.size() - start));
        stream[start + 1] = (uint16_t)(2 * (stream.size() - start));
        header[3] = std::max(header[3], (int32_t)stream[start + 1]);
    }
    std::string bytes((const char*)header, sizeof(header));
    return bytes + std::string((const char*)stream.data(), stream.size() * 2);
}

ChoiceScore score_choices(const std::vector<ChoiceExample>& examples, int B, int T, int rank, int ranks,
                          const std::function<void(const int32_t*, const int32_t*, float*)>& token_losses,
                          const std::function<bool()>& each_batch) {
    struct Row {
        size_t example, ending;
    };
    std::vector<Row> rows;  // this rank's: every ending of examples rank, rank + ranks, ...
    for (size_t i = rank; i < examples.size(); i += ranks)
        for (size_t k = 0; k < examples[i].endings.size(); k++) rows.push_back({i, k});
    std::vector<double> loss_sum(rows.size());
    std::vector<int32_t> inputs((size_t)B * T), targets((size_t)B * T);
    std::vector<float> losses((size_t)B * T);
    for (size_t first = 0; first < rows.size(); first += B) {
        if (each_batch && !each_batch()) return {};
        std::fill(inputs.begin(), inputs.end(), 0);  // (positions past a row: any valid id, nothing scored)
        std::fill(targets.begin(), targets.end(), -1);
        for (size_t r = first; r < std::min(rows.size(), first + B); r++) {
            const ChoiceExample& e = examples[rows[r].example];
            const std::vector<int32_t>& end = e.endings[rows[r].ending];
            int32_t* in = &inputs[(r - first) * T];
            int32_t* tg = &targets[(r - first) * T];
            std::copy(e.context.begin(), e.context.end(), in);
            std::copy(end.begin(), end.end() - 1, in + e.context.size());
            // position context + j - 1 predicts the ending's token j
            std::copy(end.begin(), end.end(), tg + e.context.size() - 1);
        }
        token_losses(inputs.data(), targets.data(), losses.data());
        for (size_t r = first; r < std::min(rows.size(), first + B); r++) {
            const ChoiceExample& e = examples[rows[r].example];
            const size_t from = (r - first) * T + e.context.size() - 1, n = e.endings[rows[r].ending].size();
            double s = 0;
            for (size_t j = 0; j < n; j++) s += losses[from + j];
            CHECK_USER(std::isfinite(s), "--hellaswag: example %zu's ending %zu has a non-finite loss (%g): the model "
                       "produces NaN or Inf\n---> HINT: check the weights", rows[r].example, rows[r].ending, s);
            loss_sum[r] = s;
        }
    }
    ChoiceScore score;
    for (size_t r = 0; r < rows.size();) {  // an example's rows are consecutive
        const ChoiceExample& e = examples[rows[r].example];
        size_t best = 0, best_norm = 0;  // the first of equal losses, as torch's argmin
        for (size_t k = 1; k < e.endings.size(); k++) {
            if (loss_sum[r + k] < loss_sum[r + best]) best = k;
            if (loss_sum[r + k] / e.endings[k].size() < loss_sum[r + best_norm] / e.endings[best_norm].size())
                best_norm = k;
        }
        score.examples++;
        score.correct += best == (size_t)e.label;
        score.correct_norm += best_norm == (size_t)e.label;
        r += e.endings.size();
    }
    return score;
}
